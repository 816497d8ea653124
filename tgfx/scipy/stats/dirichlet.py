"""The Dirichlet distribution on the probability simplex with concentrations alpha (`jax.scipy.stats.dirichlet`).

As in JAX, the categories run along the FIRST axis of x: x is (k, ...) for alpha of shape (k,), or (k - 1, ...),
the last coordinate then being 1 minus the others' sum. Points off the simplex (a coordinate <= 0, or a sum more
than 1e-6 away from 1) get -inf.

>>> dirichlet.logpdf(tg.asarray([0.2, 0.3, 0.5]), tg.asarray([1.0, 2.0, 3.0]))     # 1.5040774
"""
from __future__ import annotations

import math

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammaln, xlogy
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, alpha: ArrayLike) -> Tensor:
    """sum_i (alpha_i - 1) log x_i - sum_i gammaln(alpha_i) + gammaln(sum alpha) on the simplex, -inf off it; one
    value per point (the shape of x without its first axis).

    Raises ValueError when alpha is not 1-d or x's first axis is neither len(alpha) nor len(alpha) - 1.
    """
    xt, at = promote_args_inexact("dirichlet.logpdf", x, alpha)
    if at.ndim != 1:
        raise ValueError(f"dirichlet.logpdf: `alpha` must be one-dimensional; got alpha.shape={at.shape}")
    k = at.shape[0]
    if xt.ndim == 0 or xt.shape[0] not in (k, k - 1):
        raise ValueError(f"dirichlet.logpdf: `x` must have either the same number of entries as `alpha` or one entry "
                         f"fewer along its first axis; got x.shape={xt.shape}, alpha.shape={at.shape}")
    if xt.shape[0] != k:
        xt = tnp.concatenate([xt, 1 - tnp.sum(xt, axis=0, keepdims=True)], axis=0)
    simplex = tnp.all(xt > 0, axis=0) & (tnp.abs(tnp.sum(xt, axis=0) - 1) < 1e-6)
    xs = tnp.where(simplex, xt, 1.0)           # log of what is masked stays finite, and so does its gradient
    a = at.reshape((k,) + (1,) * (xt.ndim - 1))
    normalize = tnp.sum(gammaln(at)) - gammaln(tnp.sum(at))
    return tnp.where(simplex, tnp.sum(xlogy(a - 1, xs), axis=0) - normalize, -math.inf)


def pdf(x: ArrayLike, alpha: ArrayLike) -> Tensor:
    """exp(logpdf(x, alpha))."""
    return tnp.exp(logpdf(x, alpha))


__all__ = ["logpdf", "pdf"]
