"""The gamma distribution with shape a, from loc on, with scale `scale` (`jax.scipy.stats.gamma`).

>>> gamma.logpdf(tg.asarray([1.0]), 2.0)        # [-1.]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammaln, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """(a - 1) log y - y - gammaln(a) - log(scale) for y = (x - loc) / scale >= 0, -inf below loc."""
    xt, at, lt, st = promote_args_inexact("gamma.logpdf", x, a, loc, scale)
    below = xt < lt
    y = tnp.where(below, 1.0, (xt - lt) / st)
    return tnp.where(below, -math.inf, xlogy(at - 1, y) - y - gammaln(at) - tnp.log(st))


def pdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, a, loc, scale))."""
    return tnp.exp(logpdf(x, a, loc, scale))


__all__ = ["logpdf", "pdf"]
