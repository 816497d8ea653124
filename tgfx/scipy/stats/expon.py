"""The exponential distribution with rate 1 / scale, starting at loc (`jax.scipy.stats.expon`).

>>> expon.logpdf(tg.asarray([1.0, -1.0]))       # [-1., -inf]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """-(x - loc) / scale - log(scale) from loc on, -inf below."""
    xt, lt, st = promote_args_inexact("expon.logpdf", x, loc, scale)
    return tnp.where(xt < lt, -math.inf, -(xt - lt) / st - tnp.log(st))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, loc, scale))."""
    return tnp.exp(logpdf(x, loc, scale))


def _z(name: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Tensor, Tensor]:
    """(x < loc, (x - loc) / scale made 0 there): exp of the masked branch must not overflow into the gradient."""
    xt, lt, st = promote_args_inexact(f"expon.{name}", x, loc, scale)
    below = xt < lt
    return below, tnp.where(below, 0.0, (xt - lt) / st)


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = 1 - exp(-(x - loc) / scale) (by expm1, exact for small x), 0 below loc."""
    below, z = _z("cdf", x, loc, scale)
    return tnp.where(below, 0.0, -tnp.expm1(-z))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = exp(-(x - loc) / scale), 1 below loc."""
    below, z = _z("sf", x, loc, scale)
    return tnp.where(below, 1.0, tnp.exp(-z))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x) = log1p(-exp(-(x - loc) / scale)) (exact where the cdf is tiny), -inf at and below loc."""
    below, z = _z("logcdf", x, loc, scale)
    return tnp.where(below, -math.inf, tnp.log1p(-tnp.exp(-z)))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X > x) = -(x - loc) / scale (no exp to underflow), 0 below loc."""
    below, z = _z("logsf", x, loc, scale)
    return tnp.where(below, 0.0, -z)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile loc - scale * log1p(-q); NaN outside [0, 1]."""
    qt, lt, st = promote_args_inexact("expon.ppf", q, loc, scale)
    return tnp.where((qt < 0) | (qt > 1), math.nan, lt - st * tnp.log1p(-qt))


__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf", "ppf"]
