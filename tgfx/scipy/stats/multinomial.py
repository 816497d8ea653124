"""The multinomial distribution: counts x (..., k) of n draws from k categories with probabilities p (..., k)
(`jax.scipy.stats.multinomial`).

>>> multinomial.logpmf(tg.asarray([1, 1]), tg.asarray(2), tg.asarray([0.5, 0.5]))    # -0.6931472
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammaln, xlogy
from tgfx.tensor import ArrayLike, Tensor, promotion_kind


def _is_integer(a: ArrayLike) -> bool:
    kind = promotion_kind(a)
    return kind == "i*" if isinstance(kind, str) else kind.is_int


def _name(a: ArrayLike) -> str:
    kind = promotion_kind(a)
    return {"i*": "int", "f*": "float", "c*": "complex"}.get(kind, kind) if isinstance(kind, str) else kind.name


def logpmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Tensor:
    """log n! + sum_i (x_i log p_i - log x_i!) over the last axis where the counts add up to n, -inf elsewhere.

    x and n must be integers (as in JAX); p takes their place in the float result's dtype. Unlike JAX, which compares
    n with the sum of all of x, a batch of count vectors is checked row by row.

    Raises ValueError when x or n has a float dtype.
    """
    if not (_is_integer(x) and _is_integer(n)):
        raise ValueError(f"multinomial.logpmf: x and n must be of integer type; got x.dtype={_name(x)}, "
                         f"n.dtype={_name(n)}; cast the counts with .astype(int)")
    (pt,) = promote_args_inexact("multinomial.logpmf", p)
    xt, nt = tnp.asarray(x).astype(pt.dtype), tnp.asarray(n).astype(pt.dtype)
    log_probs = gammaln(nt + 1) + tnp.sum(xlogy(xt, pt) - gammaln(xt + 1), axis=-1)
    return tnp.where(tnp.sum(xt, axis=-1) == nt, log_probs, -math.inf)


def pmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Tensor:
    """P(X = x) = exp(logpmf(x, n, p))."""
    return tnp.exp(logpmf(x, n, p))


__all__ = ["logpmf", "pmf"]
