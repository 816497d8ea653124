"""The wrapped Cauchy distribution on [0, 2 pi] with shape c in (0, 1) (`jax.scipy.stats.wrapcauchy`).

>>> wrapcauchy.logpdf(tg.asarray([0.0, 7.0]), 0.5)      # [-0.7392647, -inf]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, c: ArrayLike) -> Tensor:
    """log(1 - c^2) - log(2 pi) - log(1 + c^2 - 2 c cos x) on [0, 2 pi], -inf outside; NaN unless 0 < c < 1."""
    xt, ct = promote_args_inexact("wrapcauchy.logpdf", x, c)
    ok = (ct > 0) & (ct < 1)
    cs = tnp.where(ok, ct, 0.5)
    density = tnp.log(1 - cs * cs) - math.log(2 * math.pi) - tnp.log(1 + cs * cs - 2 * cs * tnp.cos(xt))
    inside = (xt >= 0) & (xt <= 2 * math.pi)
    return tnp.where(ok, tnp.where(inside, density, -math.inf), math.nan)


def pdf(x: ArrayLike, c: ArrayLike) -> Tensor:
    """exp(logpdf(x, c))."""
    return tnp.exp(logpdf(x, c))


__all__ = ["logpdf", "pdf"]
