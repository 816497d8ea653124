"""The binomial distribution: successes in n Bernoulli(p) trials, shifted by loc (`jax.scipy.stats.binom`).

>>> binom.logpmf(tg.asarray([0.0, 2.0, 5.0]), 4.0, 0.5)     # [-2.7725887, -0.9808293, -inf]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammaln, xlog1py, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """log C(n, y) + y log p + (n - y) log(1 - p) for y = k - loc in [0, n + 1), -inf outside (y is not checked to
    be an integer, as in JAX: the continuous extension through gammaln). 0 where y = n = 0, and where p is 0 or 1
    and y sits at the matching end."""
    kt, nt, pt, lt = promote_args_inexact("binom.logpmf", k, n, p, loc)
    inside = (kt >= lt) & (kt < lt + nt + 1)
    y = tnp.where(inside, kt - lt, 0.0)       # gammaln and digamma of what is masked stay finite
    comb = gammaln(nt + 1) - (gammaln(y + 1) + gammaln(nt - y + 1))
    linear = xlogy(y, pt) + xlog1py(nt - y, -pt)
    log_probs = tnp.where(((y == 0) & (nt == 0)) | (linear == 0), 0.0, comb + linear)
    return tnp.where(inside, log_probs, -math.inf)


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k) = exp(logpmf(k, n, p, loc))."""
    return tnp.exp(logpmf(k, n, p, loc))


__all__ = ["logpmf", "pmf"]
