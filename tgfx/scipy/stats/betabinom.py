"""The beta-binomial distribution: binomial with n trials and a Beta(a, b) success probability, shifted by loc
(`jax.scipy.stats.betabinom`).

>>> betabinom.logpmf(tg.asarray([0.0, 1.0, 2.0]), 2.0, 1.0, 1.0)    # [-1.0986123] * 3: uniform on {0, 1, 2}
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import betaln
from tgfx.tensor import ArrayLike, Tensor


def logpmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """-log(n + 1) - betaln(n - y + 1, y + 1) + betaln(y + a, n - y + b) - betaln(a, b) for y = floor(k) - loc.

    As in JAX: -inf where floor(k) < 0, y > n or y + a <= 0; 0 where y = n = 0; NaN where n < 0, a <= 0 or b <= 0.
    """
    kt, nt, at, bt, lt = promote_args_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = tnp.floor(kt) - lt
    off = (y < -lt) | (y > nt) | (y + at <= 0)
    ys = tnp.where(off, 0.0, y)                # betaln and its gradient stay finite where the result is masked
    comb = -(tnp.log1p(nt) + betaln(nt - ys + 1, ys + 1))
    log_probs = comb + betaln(ys + at, nt - ys + bt) - betaln(at, bt)
    log_probs = tnp.where((y == 0) & (nt == 0), 0.0, log_probs)
    log_probs = tnp.where(off, -math.inf, log_probs)
    return tnp.where((nt < 0) | (at <= 0) | (bt <= 0), math.nan, log_probs)


def pmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Tensor:
    """P(K = k) = exp(logpmf(k, n, a, b, loc))."""
    return tnp.exp(logpmf(k, n, a, b, loc))


__all__ = ["logpmf", "pmf"]
