"""The beta distribution with shapes a and b on [loc, loc + scale] (`jax.scipy.stats.beta`).

>>> beta.logpdf(tg.asarray([0.5]), 2.0, 2.0)    # [0.4054651]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import betainc, betaln, xlog1py, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """(a - 1) log y + (b - 1) log(1 - y) - betaln(a, b) - log(scale) for y = (x - loc) / scale in [0, 1], -inf
    outside; NaN where a, b or scale is not positive."""
    xt, at, bt, lt, st = promote_args_inexact("beta.logpdf", x, a, b, loc, scale)
    outside = (xt < lt) | (xt > lt + st)
    y = tnp.where(outside, 0.5, (xt - lt) / st)
    log_probs = xlogy(at - 1, y) + xlog1py(bt - 1, -y) - betaln(at, bt) - tnp.log(st)
    out = tnp.where(outside, -math.inf, log_probs)
    return tnp.where((at <= 0) | (bt <= 0) | (st <= 0), math.nan, out)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, a, b, loc, scale))."""
    return tnp.exp(logpdf(x, a, b, loc, scale))


def _y(name: str, x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple:
    """(a, b, (x - loc) / scale clipped to [0, 1])."""
    xt, at, bt, lt, st = promote_args_inexact(f"beta.{name}", x, a, b, loc, scale)
    return at, bt, tnp.clip((xt - lt) / st, 0.0, 1.0)


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x): the regularized incomplete beta function I_y(a, b) at y = (x - loc) / scale clipped to [0, 1].

    >>> beta.cdf(tg.asarray([0.25, 0.5]), 2.0, 3.0)     # [0.26171875, 0.6875]
    """
    at, bt, y = _y("cdf", x, a, b, loc, scale)
    return betainc(at, bt, y)


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = I_{1 - y}(b, a), by the symmetry of the incomplete beta function (not 1 - cdf: exact where the
    cdf is near 1)."""
    at, bt, y = _y("sf", x, a, b, loc, scale)
    return betainc(bt, at, 1.0 - y)


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(cdf(x, a, b, loc, scale))."""
    return tnp.log(cdf(x, a, b, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(sf(x, a, b, loc, scale))."""
    return tnp.log(sf(x, a, b, loc, scale))


__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"]
