"""The gamma distribution with shape a, from loc on, with scale `scale` (`jax.scipy.stats.gamma`).

>>> gamma.logpdf(tg.asarray([1.0]), 2.0)        # [-1.]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammainc, gammaincc, gammaln, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """(a - 1) log y - y - gammaln(a) - log(scale) for y = (x - loc) / scale >= 0, -inf below loc."""
    xt, at, lt, st = promote_args_inexact("gamma.logpdf", x, a, loc, scale)
    below = xt < lt
    y = tnp.where(below, 1.0, (xt - lt) / st)
    return tnp.where(below, -math.inf, xlogy(at - 1, y) - y - gammaln(at) - tnp.log(st))


def pdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, a, loc, scale))."""
    return tnp.exp(logpdf(x, a, loc, scale))


def _y(name: str, x: ArrayLike, a: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Tensor, Tensor, Tensor]:
    """(a, (x - loc) / scale clipped at 0, whether it was below 0): the incomplete gamma functions read only y >= 0."""
    xt, at, lt, st = promote_args_inexact(f"gamma.{name}", x, a, loc, scale)
    y = (xt - lt) / st
    below = y < 0
    return at, tnp.where(below, 0.0, y), below


def cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x): the regularized lower incomplete gamma function P(a, (x - loc) / scale), 0 below loc.

    >>> gamma.cdf(tg.asarray([1.0, 2.0]), 2.0)     # [0.2642411, 0.5939942]
    """
    at, y, _ = _y("cdf", x, a, loc, scale)
    return gammainc(at, y)


def sf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x): the regularized upper incomplete gamma function Q(a, (x - loc) / scale), computed as itself (not
    1 - cdf: exact in the far tail), 1 below loc."""
    at, y, below = _y("sf", x, a, loc, scale)
    return tnp.where(below, 1.0, gammaincc(at, y))


def logcdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(cdf(x, a, loc, scale)), -inf at and below loc."""
    return tnp.log(cdf(x, a, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(sf(x, a, loc, scale)), 0 below loc."""
    return tnp.log(sf(x, a, loc, scale))


__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"]
