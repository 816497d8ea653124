"""The chi-squared distribution with df degrees of freedom, from loc on, with scale `scale` (`jax.scipy.stats.chi2`):
the gamma distribution with shape df / 2 and scale 2 scale.

>>> chi2.logpdf(tg.asarray([1.0, -1.0]), 3.0)   # [-1.4189385, -inf]
>>> chi2.cdf(tg.asarray([2.0]), 2.0)            # [0.63212055]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammainc, gammaincc, gammaln, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """(df / 2 - 1) log y - y / 2 - gammaln(df / 2) - df log(2) / 2 - log(scale) for y = (x - loc) / scale >= 0, -inf
    below loc. (df / 2 - 1) log y is an `xlogy`, so the density at y = 0 with df = 2 is 1/2 (JAX's product gives NaN).
    """
    xt, dt, lt, st = promote_args_inexact("chi2.logpdf", x, df, loc, scale)
    below = xt < lt
    y = tnp.where(below, 1.0, (xt - lt) / st)
    half = dt / 2
    log_probs = xlogy(half - 1, y) - y / 2 - gammaln(half) - half * math.log(2) - tnp.log(st)
    return tnp.where(below, -math.inf, log_probs)


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, df, loc, scale))."""
    return tnp.exp(logpdf(x, df, loc, scale))


def _half_y(name: str, x: ArrayLike, df: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Tensor, Tensor]:
    """(df / 2, (x - loc) / (2 scale) clipped to [0, inf])."""
    xt, dt, lt, st = promote_args_inexact(f"chi2.{name}", x, df, loc, scale)
    return dt / 2, tnp.clip((xt - lt) / (2 * st), 0.0, math.inf)


def cdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = gammainc(df / 2, y / 2), 0 below loc."""
    return gammainc(*_half_y("cdf", x, df, loc, scale))


def logcdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(cdf(x, df, loc, scale))."""
    return tnp.log(cdf(x, df, loc, scale))


def sf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = gammaincc(df / 2, y / 2), accurate in the upper tail."""
    return gammaincc(*_half_y("sf", x, df, loc, scale))


def logsf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(sf(x, df, loc, scale))."""
    return tnp.log(sf(x, df, loc, scale))


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
