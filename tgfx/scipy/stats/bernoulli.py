"""The Bernoulli distribution: 1 with probability p, else 0, shifted by `loc` (`jax.scipy.stats.bernoulli`).

>>> bernoulli.logpmf(tg.asarray([0.0, 1.0, 2.0]), 0.25)      # [-0.2876821, -1.3862944, -inf]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import xlog1py, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """log P(K = k): k log p + (1 - k) log(1 - p) at k - loc in {0, 1} (0 log 0 taken as 0), -inf elsewhere in
    [0, 1] and beyond."""
    kt, pt, lt = promote_args_inexact("bernoulli.logpmf", k, p, loc)
    x = kt - lt
    log_probs = xlogy(x, pt) + xlog1py(1 - x, -pt)
    return tnp.where((x < 0) | (x > 1), -math.inf, log_probs)


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k) = exp(logpmf(k, p, loc))."""
    return tnp.exp(logpmf(k, p, loc))


def cdf(k: ArrayLike, p: ArrayLike) -> Tensor:
    """P(K <= k): 0 below 0, 1 - p on [0, 1), 1 from 1 on; NaN for p outside [0, 1]."""
    kt, pt = promote_args_inexact("bernoulli.cdf", k, p)
    bad = tnp.isnan(kt) | tnp.isnan(pt) | (pt < 0) | (pt > 1)
    return tnp.where(bad, math.nan, tnp.where(kt < 0, 0.0, tnp.where(kt < 1, 1 - pt, 1.0)))


def ppf(q: ArrayLike, p: ArrayLike) -> Tensor:
    """The smallest k with cdf(k) >= q: 0 for q <= 1 - p, else 1; NaN for q or p outside [0, 1]."""
    qt, pt = promote_args_inexact("bernoulli.ppf", q, p)
    bad = tnp.isnan(qt) | tnp.isnan(pt) | (pt < 0) | (pt > 1) | (qt < 0) | (qt > 1)
    return tnp.where(bad, math.nan, tnp.where(qt <= 1 - pt, 0.0, 1.0).astype(qt.dtype))


__all__ = ["logpmf", "pmf", "cdf", "ppf"]
