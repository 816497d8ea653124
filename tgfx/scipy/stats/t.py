"""Student's t distribution with df degrees of freedom, location loc and scale `scale` (`jax.scipy.stats.t`).

>>> t.logpdf(tg.asarray([0.0]), 3.0)            # [-1.0008888]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammaln
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """gammaln((df + 1) / 2) - gammaln(df / 2) - log(pi df scale^2) / 2 - (df + 1) / 2 log1p(z^2 / df) for
    z = (x - loc) / scale."""
    xt, dt, lt, st = promote_args_inexact("t.logpdf", x, df, loc, scale)
    z = (xt - lt) / st
    half = 0.5 * dt
    norm = gammaln(half) + 0.5 * tnp.log(math.pi * dt * st * st) - gammaln(half + 0.5)
    return -(norm + (half + 0.5) * tnp.log1p(z * z / dt))


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, df, loc, scale))."""
    return tnp.exp(logpdf(x, df, loc, scale))


__all__ = ["logpdf", "pdf"]
