"""The generalized normal (exponential power) distribution with shape beta (`jax.scipy.stats.gennorm`): density
beta / (2 Gamma(1 / beta)) exp(-|x|^beta); beta = 2 is a normal with variance 1/2, beta = 1 the Laplace.

>>> gennorm.logpdf(tg.asarray([0.0, 1.0]), 2.0)     # [-0.5723649, -1.5723649]
>>> gennorm.cdf(tg.asarray([0.0]), 1.5)             # [0.5]
"""
from __future__ import annotations

import tgfx.numpy as tnp
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.special import gammainc, gammaln
from tgfx.tensor import ArrayLike, Tensor


def logpdf(x: ArrayLike, beta: ArrayLike) -> Tensor:
    """log(beta / 2) - gammaln(1 / beta) - |x|^beta."""
    xt, bt = promote_args_inexact("gennorm.logpdf", x, beta)
    return tnp.log(0.5 * bt) - gammaln(1 / bt) - tnp.power(tnp.abs(xt), bt)


def pdf(x: ArrayLike, beta: ArrayLike) -> Tensor:
    """exp(logpdf(x, beta))."""
    return tnp.exp(logpdf(x, beta))


def cdf(x: ArrayLike, beta: ArrayLike) -> Tensor:
    """P(X <= x) = (1 + sign(x) gammainc(1 / beta, |x|^beta)) / 2."""
    xt, bt = promote_args_inexact("gennorm.cdf", x, beta)
    return 0.5 * (1 + tnp.sign(xt) * gammainc(1 / bt, tnp.power(tnp.abs(xt), bt)))


__all__ = ["logpdf", "pdf", "cdf"]
