"""The Pareto distribution with shape b, from loc + scale on (`jax.scipy.stats.pareto`): sf y^-b for
y = (x - loc) / scale >= 1.

>>> pareto.logpdf(tg.asarray([1.0, 2.0, 0.5]), 3.0)     # [1.0986123, -1.6739764, -inf]
>>> pareto.cdf(tg.asarray([2.0]), 3.0)                   # [0.875]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor


def _y(name: str, x: ArrayLike, b: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Tensor, Tensor, Tensor,
                                                                                           Tensor]:
    """(below the support, y = (x - loc) / scale made 1 there, b, scale): a power or log of the masked branch must not
    put a NaN into the gradient."""
    xt, bt, lt, st = promote_args_inexact(f"pareto.{name}", x, b, loc, scale)
    below = xt < lt + st
    return below, tnp.where(below, 1.0, (xt - lt) / st), bt, st


def logpdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(b / scale) - (b + 1) log y from loc + scale on, -inf below."""
    below, y, bt, st = _y("logpdf", x, b, loc, scale)
    return tnp.where(below, -math.inf, -(tnp.log(st / bt) + (bt + 1) * tnp.log(y)))


def pdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, b, loc, scale))."""
    return tnp.exp(logpdf(x, b, loc, scale))


def cdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = 1 - y^-b, 0 below the support."""
    below, y, bt, _ = _y("cdf", x, b, loc, scale)
    return tnp.where(below, 0.0, 1 - tnp.power(y, -bt))


def logcdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log1p(-y^-b), -inf below the support."""
    below, y, bt, _ = _y("logcdf", x, b, loc, scale)
    return tnp.where(below, -math.inf, tnp.log1p(-tnp.power(y, -bt)))


def logsf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log P(X > x) = -b log y, 0 below the support."""
    below, y, bt, _ = _y("logsf", x, b, loc, scale)
    return tnp.where(below, 0.0, -bt * tnp.log(y))


def sf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = y^-b, 1 below the support."""
    return tnp.exp(logsf(x, b, loc, scale))


def ppf(q: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile loc + scale (1 - q)^(-1 / b); NaN for q outside [0, 1]."""
    qt, bt, lt, st = promote_args_inexact("pareto.ppf", q, b, loc, scale)
    bad = tnp.isnan(qt) | (qt < 0) | (qt > 1)
    return tnp.where(bad, math.nan, lt + st * tnp.power(1 - tnp.where(bad, 0.5, qt), -1 / bt))


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]
