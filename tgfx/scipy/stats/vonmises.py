"""The von Mises distribution on the circle with concentration kappa around 0 (`jax.scipy.stats.vonmises`).

The normaliser 2 pi I0(kappa) is taken as 2 pi i0e(kappa) exp(kappa), so the log density stays finite for any
kappa (I0 overflows float32 at kappa = 89). NaN where kappa <= 0, as in JAX.

>>> vonmises.logpdf(tg.asarray([0.0, math.pi]), 1.0)    # [-1.0737915, -3.0737915]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import i0e
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, kappa: ArrayLike) -> Tensor:
    """kappa (cos x - 1) - log(2 pi i0e(kappa)), NaN for kappa <= 0."""
    xt, kt = promote_args_inexact("vonmises.logpdf", x, kappa)
    ok = kt > 0
    ks = tnp.where(ok, kt, 1.0)
    return tnp.where(ok, ks * (tnp.cos(xt) - 1) - tnp.log(2 * math.pi * i0e(ks)), math.nan)


def pdf(x: ArrayLike, kappa: ArrayLike) -> Tensor:
    """exp(logpdf(x, kappa))."""
    return tnp.exp(logpdf(x, kappa))


__all__ = ["logpdf", "pdf"]
