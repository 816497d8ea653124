"""The Cauchy distribution around loc with half-width `scale` (`jax.scipy.stats.cauchy`).

>>> cauchy.logpdf(tg.asarray([0.0, 1.0]))       # [-1.1447299, -1.8378770]
>>> cauchy.ppf(tg.asarray([0.75]), loc=1.0)     # [2.]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """-log(pi scale) - log1p(z^2) for z = (x - loc) / scale."""
    xt, lt, st = promote_args_inexact("cauchy.logpdf", x, loc, scale)
    z = (xt - lt) / st
    return -(tnp.log(math.pi * st) + tnp.log1p(z * z))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, loc, scale))."""
    return tnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = 1/2 + arctan((x - loc) / scale) / pi."""
    xt, lt, st = promote_args_inexact("cauchy.cdf", x, loc, scale)
    return 0.5 + tnp.arctan((xt - lt) / st) * (1 / math.pi)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(cdf(x, loc, scale))."""
    return tnp.log(cdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = cdf(-x, -loc, scale), exact in the upper tail (no 1 - cdf)."""
    xt, lt, st = promote_args_inexact("cauchy.sf", x, loc, scale)
    return cdf(-xt, -lt, st)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """log(sf(x, loc, scale))."""
    xt, lt, st = promote_args_inexact("cauchy.logsf", x, loc, scale)
    return logcdf(-xt, -lt, st)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile loc + scale tan(pi (q - 1/2))."""
    qt, lt, st = promote_args_inexact("cauchy.ppf", q, loc, scale)
    return tnp.tan(math.pi * qt - math.pi / 2) * st + lt


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The inverse of `sf`: loc + scale tan(pi (1/2 - q))."""
    qt, lt, st = promote_args_inexact("cauchy.isf", q, loc, scale)
    return tnp.tan(math.pi / 2 - math.pi * qt) * st + lt


__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]
