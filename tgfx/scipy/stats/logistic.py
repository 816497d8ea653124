"""The logistic distribution around loc with scale `scale` (`jax.scipy.stats.logistic`).

>>> logistic.logpdf(tg.asarray([0.0]))          # [-1.3862944]
>>> logistic.cdf(tg.asarray([0.0, 100.0]))      # [0.5, 1.]
"""
from __future__ import annotations

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import expit, logit
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """-2 logaddexp(z / 2, -z / 2) - log(scale) for z = (x - loc) / scale: symmetric, finite for any z."""
    xt, lt, st = promote_args_inexact("logistic.logpdf", x, loc, scale)
    half = (xt - lt) / st / 2
    return -2 * tnp.logaddexp(half, -half) - tnp.log(st)


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """exp(logpdf(x, loc, scale))."""
    return tnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X <= x) = expit((x - loc) / scale)."""
    xt, lt, st = promote_args_inexact("logistic.cdf", x, loc, scale)
    return expit((xt - lt) / st)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """P(X > x) = expit(-(x - loc) / scale), accurate in the upper tail."""
    xt, lt, st = promote_args_inexact("logistic.sf", x, loc, scale)
    return expit(-(xt - lt) / st)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The quantile loc + scale logit(q); NaN outside [0, 1]."""
    qt, lt, st = promote_args_inexact("logistic.ppf", q, loc, scale)
    return logit(qt) * st + lt


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Tensor:
    """The inverse of `sf`: loc - scale logit(q)."""
    qt, lt, st = promote_args_inexact("logistic.isf", q, loc, scale)
    return -logit(qt) * st + lt


__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]
