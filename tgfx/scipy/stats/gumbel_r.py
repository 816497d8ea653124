"""The right-skewed Gumbel (extreme value, maximum) distribution (`jax.scipy.stats.gumbel_r`): cdf exp(-exp(-z)) for
z = (x - loc) / scale. Every function is NaN where scale <= 0.

>>> gumbel_r.logpdf(tg.asarray([0.0]))          # [-1.]
>>> gumbel_r.cdf(tg.asarray([0.0]))             # [0.36787945]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.nn import log1mexp
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor


def _z(name: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Tensor, Tensor, Tensor]:
    """(z, scale, scale > 0) with z = (x - loc) / scale."""
    xt, lt, st = promote_args_inexact(f"gumbel_r.{name}", x, loc, scale)
    return (xt - lt) / st, st, st > 0


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """-log(scale) - z - exp(-z)."""
    z, st, ok = _z("logpdf", x, loc, scale)
    return tnp.where(ok, -tnp.log(tnp.where(ok, st, 1.0)) - (z + tnp.exp(-z)), math.nan)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, loc, scale))."""
    return tnp.exp(logpdf(x, loc, scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X <= x) = -exp(-z)."""
    z, _, ok = _z("logcdf", x, loc, scale)
    return tnp.where(ok, -tnp.exp(-z), math.nan)


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = exp(-exp(-z))."""
    return tnp.exp(logcdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = 1 - exp(-exp(-z))."""
    z, _, ok = _z("sf", x, loc, scale)
    return tnp.where(ok, 1 - tnp.exp(-tnp.exp(-z)), math.nan)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X > x) = log1mexp(exp(-z)), finite far into the upper tail."""
    z, _, ok = _z("logsf", x, loc, scale)
    return tnp.where(ok, log1mexp(tnp.exp(-z)), math.nan)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile loc - scale log(-log q) for q in (0, 1); NaN elsewhere (0 and 1 included, as in JAX)."""
    qt, lt, st = promote_args_inexact("gumbel_r.ppf", q, loc, scale)
    ok = (qt > 0) & (qt < 1)
    return tnp.where(ok, lt - st * tnp.log(-tnp.log(tnp.where(ok, qt, 0.5))), math.nan)


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]
