"""The multivariate normal distribution (`jax.scipy.stats.multivariate_normal`), through a Cholesky factor.

With cov = L L^T, the log density of x is -|z|^2 / 2 - sum(log diag L) - n log(2 pi) / 2 for z = L^-1 (x - mean):
one factorisation and one triangular solve for every x at once, no inverse and no determinant formed. A covariance
that is not positive definite gives NaN, as in JAX.

>>> multivariate_normal.logpdf(tg.asarray([0.0, 0.0]), tg.asarray([0.0, 0.0]), tnp.eye(2))    # -1.837877
"""
from __future__ import annotations

import math
from typing import Any

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.linalg import _solve, cholesky
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike, allow_singular: Any = None) -> Tensor:
    """log of the density at `x` of the normal with mean `mean` and covariance `cov`.

    `mean` is a scalar or (..., n); `x` is (..., n), its leading axes broadcasting with mean's (one log density per
    point); `cov` is a scalar (the variance of every independent coordinate) or (..., n, n), only its lower triangle
    read. With a 0-d mean it is the univariate normal with variance `cov`. `allow_singular` is accepted for scipy
    compatibility; a singular cov gives NaN or -inf.

    >>> multivariate_normal.logpdf(points, mu, sigma)       # points (1000, 3), mu (3,), sigma (3, 3) -> (1000,)

    Raises ValueError when the shapes of x, mean and cov do not fit together.
    """
    xt, mt, ct = promote_args_inexact("multivariate_normal.logpdf", x, mean, cov)
    if mt.ndim == 0:
        d = xt - mt
        return -0.5 * (d * d) / ct - 0.5 * (math.log(2 * math.pi) + tnp.log(ct))
    n = mt.shape[-1]
    if xt.ndim == 0 or xt.shape[-1] != n:
        raise ValueError(f"multivariate_normal.logpdf: x must have shape (..., {n}) to match mean of shape "
                         f"{mt.shape}, got shape {xt.shape}")
    d = xt - mt
    if ct.ndim == 0:
        return -0.5 * tnp.sum(d * d, axis=-1) / ct - 0.5 * n * (math.log(2 * math.pi) + tnp.log(ct))
    if ct.ndim < 2 or ct.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf: cov must have shape (..., {n}, {n}) to match mean of shape "
                         f"{mt.shape}, got shape {ct.shape}")
    low = cholesky(ct, lower=True)
    if ct.ndim == 2:
        # every point against the one factor: z^T L^T = d^T for all rows of d at once, L^-1 d for each
        flat = d.reshape(-1, n)
        z = _solve(low, flat, transpose=True, lower=True, unit=False, right=True).reshape(d.shape)
    else:
        z = _solve(low, d[..., None, :], transpose=True, lower=True, unit=False, right=True)[..., 0, :]
    log_det = tnp.sum(tnp.log(tnp.sum(tnp.where(tnp.eye(n, dtype=tnp.bool_), low, 0.0), axis=-1)), axis=-1)
    return -0.5 * tnp.sum(z * z, axis=-1) - log_det - 0.5 * n * math.log(2 * math.pi)


def pdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike, allow_singular: Any = None) -> Tensor:
    """The density exp(logpdf(x, mean, cov))."""
    return tnp.exp(logpdf(x, mean, cov, allow_singular))


__all__ = ["logpdf", "pdf"]
