"""The uniform distribution on [loc, loc + scale] (`jax.scipy.stats.uniform`).

>>> uniform.logpdf(tg.asarray([0.5, 2.0]))      # [0., -inf]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """-log(scale) on [loc, loc + scale], -inf outside."""
    xt, lt, st = promote_args_inexact("uniform.logpdf", x, loc, scale)
    return tnp.where((xt < lt) | (xt > lt + st), -math.inf, -tnp.log(st))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """1 / scale on [loc, loc + scale], 0 outside."""
    return tnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """0 below loc, (x - loc) / scale on the interval [loc, loc + scale], 1 above; as JAX's, 0 where none of these
    holds (a NaN x) and 0 / 0 = NaN for a zero scale at x = loc."""
    xt, lt, st = promote_args_inexact("uniform.cdf", x, loc, scale)
    hi = lt + st
    inside = (xt >= lt) & (xt <= hi)
    return tnp.where(xt < lt, 0.0, tnp.where(xt > hi, 1.0, tnp.where(inside, (xt - lt) / st, 0.0)))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """loc + q * scale for q in [0, 1], NaN outside."""
    qt, lt, st = promote_args_inexact("uniform.ppf", q, loc, scale)
    return tnp.where((qt < 0) | (qt > 1), math.nan, lt + qt * st)


__all__ = ["logpdf", "pdf", "cdf", "ppf"]
