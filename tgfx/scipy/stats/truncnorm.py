"""The normal distribution with mean loc and standard deviation scale truncated to [loc + a scale, loc + b scale]
(`jax.scipy.stats.truncnorm`; a and b are in standard units, as in scipy).

The log of the mass between the bounds is taken from whichever tail is smaller (log_ndtr's differences, exact far
out where ndtr would round to 0 or 1), so the density stays finite for bounds deep in a tail. NaN where a >= b.

>>> truncnorm.logpdf(tg.asarray([0.0, 2.0]), -1.0, 1.0)    # [-0.5372234, -inf]
>>> truncnorm.cdf(tg.asarray([0.0]), -1.0, 1.0)            # [0.5]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import log_ndtr, logsumexp, ndtr
from tgfx.scipy.stats import norm
from tgfx.tensor import ArrayLike, Tensor


def _log_diff(x: Tensor, y: Tensor) -> Tensor:
    """log(exp(x) - exp(y)) for x >= y, as JAX's logsumexp with weights (1, -1)."""
    return logsumexp(tnp.stack([x, y]), b=tnp.stack([tnp.ones_like(x), -tnp.ones_like(y)]), axis=0)


def _log_gauss_mass(a: Tensor, b: Tensor) -> Tensor:
    """log P(a <= Z <= b) for a standard normal Z: from the tail both bounds lie in, else 1 minus both tails."""
    a, b = tnp.broadcast_arrays(a, b)
    left, right = b <= 0, a > 0
    central = ~(left | right)
    a_tail = tnp.where(right, -b, a)
    b_tail = tnp.where(right, -a, b)
    tail = _log_diff(log_ndtr(b_tail), log_ndtr(a_tail))
    middle = tnp.log1p(-ndtr(a) - ndtr(-b))
    return tnp.where(central, middle, tail)


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """norm.logpdf(x, loc, scale) - log P(a <= Z <= b) inside the bounds, -inf outside; NaN where a >= b."""
    xt, at, bt, lt, st = promote_args_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    val = norm.logpdf(xt, lt, st) - _log_gauss_mass(at, bt)
    z = (xt - lt) / st
    val = tnp.where((z < at) | (z > bt), -math.inf, val)
    return tnp.where(at >= bt, math.nan, val)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, a, b, loc, scale))."""
    return tnp.exp(logpdf(x, a, b, loc, scale))


def _logcdf(name: str, x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> Tensor:
    xt, at, bt, lt, st = promote_args_inexact(name, x, a, b, loc, scale)
    xt, at, bt = tnp.broadcast_arrays(xt, at, bt)
    z = (xt - lt) / st
    # on and outside the bounds the answer is 0 or -inf: the masses get a point strictly inside, so that neither
    # they nor their gradients meet a log of 0
    inner = tnp.where(tnp.isfinite(at) & tnp.isfinite(bt), (at + bt) / 2,
                      tnp.where(tnp.isfinite(at), at + 1, tnp.where(tnp.isfinite(bt), bt - 1, 0.0)))
    zc = tnp.where((z > at) & (z < bt), z, inner)
    mass = _log_gauss_mass(at, bt)
    log_cdf = _log_gauss_mass(at, zc) - mass
    log_sf = _log_gauss_mass(zc, bt) - mass
    # near the top, 1 - sf keeps the digits that the difference of two close logs loses
    out = tnp.select([z >= bt, z <= at, log_cdf > -0.1, z > at],
                     [tnp.zeros_like(z), tnp.full_like(z, -math.inf), tnp.log1p(-tnp.exp(log_sf)), log_cdf], 0.0)
    return tnp.where(at >= bt, math.nan, out)


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x): 0 from the upper bound on, -inf to the lower; NaN where a >= b."""
    return _logcdf("truncnorm.logcdf", x, a, b, loc, scale)


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logcdf(x, a, b, loc, scale))."""
    return tnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X > x): the logcdf of the mirrored distribution at -x."""
    xt, at, bt, lt, st = promote_args_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return _logcdf("truncnorm.logsf", -xt, -bt, -at, -lt, st)


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logsf(x, a, b, loc, scale))."""
    return tnp.exp(logsf(x, a, b, loc, scale))


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
