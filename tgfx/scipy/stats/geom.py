"""The geometric distribution: the number of Bernoulli(p) trials up to the first success, from 1 on, shifted by loc
(`jax.scipy.stats.geom`).

>>> geom.logpmf(tg.asarray([1.0, 2.0, 0.0]), 0.5)       # [-0.6931472, -1.3862944, -inf]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import xlog1py
from tgfx.tensor import ArrayLike, Tensor


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """(k - loc - 1) log(1 - p) + log p for k - loc > 0, -inf from loc down (k is not checked to be an integer, as
    in JAX)."""
    kt, pt, lt = promote_args_inexact("geom.logpmf", k, p, loc)
    x = kt - lt
    off = x <= 0
    return tnp.where(off, -math.inf, xlog1py(tnp.where(off, 1.0, x) - 1, -pt) + tnp.log(pt))


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k) = exp(logpmf(k, p, loc))."""
    return tnp.exp(logpmf(k, p, loc))


__all__ = ["logpmf", "pmf"]
