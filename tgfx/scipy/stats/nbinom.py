"""The negative binomial distribution: failures before the n-th success of Bernoulli(p) trials, shifted by loc
(`jax.scipy.stats.nbinom`); n may be any positive real.

>>> nbinom.logpmf(tg.asarray([0.0, 2.0, -1.0]), 3.0, 0.5)   # [-2.0794415, -1.6739764, -inf]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammaln, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """gammaln(y + n) - gammaln(n) - gammaln(y + 1) + n log p + y log(1 - p) for y = k - loc >= 0, -inf below."""
    kt, nt, pt, lt = promote_args_inexact("nbinom.logpmf", k, n, p, loc)
    below = kt < lt
    y = tnp.where(below, 0.0, kt - lt)
    comb = gammaln(y + nt) - gammaln(nt) - gammaln(y + 1)
    return tnp.where(below, -math.inf, comb + xlogy(nt, pt) + xlogy(y, 1 - pt))


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k) = exp(logpmf(k, n, p, loc))."""
    return tnp.exp(logpmf(k, n, p, loc))


__all__ = ["logpmf", "pmf"]
