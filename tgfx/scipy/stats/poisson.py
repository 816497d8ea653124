"""The Poisson distribution with mean mu, shifted by loc (`jax.scipy.stats.poisson`).

>>> poisson.logpmf(tg.asarray([0.0, 2.0, 1.5]), 2.0)     # [-2., -1.3068528, -inf]
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammaincc, gammaln, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """k log(mu) - log(k!) - mu at k - loc a non-negative integer, -inf elsewhere."""
    kt, mt, lt = promote_args_inexact("poisson.logpmf", k, mu, loc)
    x = kt - lt
    off = (x < 0) | (tnp.round(x) != x)
    xs = tnp.where(off, 0.0, x)
    return tnp.where(off, -math.inf, xlogy(xs, mt) - gammaln(xs + 1) - mt)


def pmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k) = exp(logpmf(k, mu, loc))."""
    return tnp.exp(logpmf(k, mu, loc))


def cdf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K <= k) = Q(floor(k - loc) + 1, mu), the regularized upper incomplete gamma function; 0 below loc. k need
    not be an integer (the cdf is a step function).

    >>> poisson.cdf(tg.asarray([0.0, 2.0, 2.5]), 2.0)      # [0.13533528, 0.67667642, 0.67667642]
    """
    kt, mt, lt = promote_args_inexact("poisson.cdf", k, mu, loc)
    x = kt - lt
    below = x < 0
    return tnp.where(below, 0.0, gammaincc(tnp.floor(tnp.where(below, 0.0, x)) + 1, mt))


__all__ = ["logpmf", "pmf", "cdf"]
