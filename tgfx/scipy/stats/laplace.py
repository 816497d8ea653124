"""The Laplace (double exponential) distribution around loc with scale `scale` (`jax.scipy.stats.laplace`).

>>> laplace.logpdf(tg.asarray([0.0, 1.0]))      # [-0.6931472, -1.6931472]
"""
from __future__ import annotations

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """-|x - loc| / scale - log(2 scale)."""
    xt, lt, st = promote_args_inexact("laplace.logpdf", x, loc, scale)
    return -tnp.abs(xt - lt) / st - tnp.log(2 * st)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, loc, scale))."""
    return tnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(z) / 2 for z = (x - loc) / scale <= 0, 1 - exp(-z) / 2 above (each exp of a non-positive number)."""
    xt, lt, st = promote_args_inexact("laplace.cdf", x, loc, scale)
    z = (xt - lt) / st
    below = z <= 0
    return tnp.where(below, 0.5 * tnp.exp(tnp.where(below, z, 0.0)), 1 - 0.5 * tnp.exp(-tnp.where(below, 0.0, z)))


__all__ = ["logpdf", "pdf", "cdf"]
