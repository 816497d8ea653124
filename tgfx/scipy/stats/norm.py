"""The normal distribution with mean `loc` and standard deviation `scale` (`jax.scipy.stats.norm`).

The distribution functions go through `tgfx.scipy.special`'s `ndtr`, `log_ndtr` and `ndtri`, so they keep their
relative accuracy far into both tails (`logcdf(-40)` is -804.6, not -inf).

>>> norm.logpdf(tg.asarray([0.0]))              # [-0.9189385]
>>> norm.cdf(tg.asarray([1.96]))                # [0.9750021]
>>> norm.ppf(tg.asarray([0.975]), loc=1.0, scale=2.0)    # [4.919928]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import log_ndtr, ndtr, ndtri
from tgfx.tensor import ArrayLike, Tensor


def _standardized(name: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Tensor, Tensor]:
    xt, lt, st = promote_args_inexact(f"norm.{name}", x, loc, scale)
    return (xt - lt) / st, st


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log of the density, -((x - loc) / scale)^2 / 2 - log|scale| - log(2 pi) / 2 (a negative scale is its
    absolute value, as in JAX's, which divides by scale^2; cdf and ppf take it as it is, as JAX's)."""
    z, s = _standardized("logpdf", x, loc, scale)
    return -0.5 * (z * z) - tnp.log(tnp.abs(s)) - 0.5 * math.log(2 * math.pi)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The density exp(logpdf(x, loc, scale))."""
    return tnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x): ndtr((x - loc) / scale)."""
    return ndtr(_standardized("cdf", x, loc, scale)[0])


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x), finite far into the lower tail."""
    return log_ndtr(_standardized("logcdf", x, loc, scale)[0])


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The survival function P(X > x) = ndtr(-(x - loc) / scale), accurate in the upper tail."""
    return ndtr(-_standardized("sf", x, loc, scale)[0])


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X > x), finite far into the upper tail."""
    return log_ndtr(-_standardized("logsf", x, loc, scale)[0])


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile function, the inverse of `cdf`: loc + scale * ndtri(q); NaN outside [0, 1]."""
    qt, lt, st = promote_args_inexact("norm.ppf", q, loc, scale)
    return lt + st * ndtri(qt)


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The inverse of `sf`: loc - scale * ndtri(q), accurate for tiny q."""
    qt, lt, st = promote_args_inexact("norm.isf", q, loc, scale)
    return lt - st * ndtri(qt)


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]
