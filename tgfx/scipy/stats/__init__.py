"""`tgfx.scipy.stats`: log densities, densities and distribution functions of `jax.scipy.stats`, one module per
distribution (`norm.logpdf`, `multivariate_normal.logpdf`, ...), with JAX's arguments and edge cases, and the sample
statistics `mode`, `rankdata` and `sem`.

Every function broadcasts its arguments, promotes them to one float type (integers to the default float), runs on
the device as tgfx ops and is differentiable in all of its array arguments.

>>> from tgfx.scipy import stats
>>> stats.norm.logpdf(tg.asarray([0.0, 1.0]), loc=0.0, scale=2.0)      # [-1.6120857, -1.7370857]
>>> stats.multivariate_normal.logpdf(x, mean, cov)                    # x (..., n), mean (n,), cov (n, n)
>>> stats.binom.pmf(tg.asarray([0.0, 1.0, 2.0]), 2.0, 0.5)            # [0.25, 0.5, 0.25]
"""
from tgfx.scipy.stats import bernoulli as bernoulli
from tgfx.scipy.stats import beta as beta
from tgfx.scipy.stats import betabinom as betabinom
from tgfx.scipy.stats import binom as binom
from tgfx.scipy.stats import cauchy as cauchy
from tgfx.scipy.stats import chi2 as chi2
from tgfx.scipy.stats import dirichlet as dirichlet
from tgfx.scipy.stats import expon as expon
from tgfx.scipy.stats import gamma as gamma
from tgfx.scipy.stats import gennorm as gennorm
from tgfx.scipy.stats import geom as geom
from tgfx.scipy.stats import gumbel_l as gumbel_l
from tgfx.scipy.stats import gumbel_r as gumbel_r
from tgfx.scipy.stats import laplace as laplace
from tgfx.scipy.stats import logistic as logistic
from tgfx.scipy.stats import multinomial as multinomial
from tgfx.scipy.stats import multivariate_normal as multivariate_normal
from tgfx.scipy.stats import nbinom as nbinom
from tgfx.scipy.stats import norm as norm
from tgfx.scipy.stats import pareto as pareto
from tgfx.scipy.stats import poisson as poisson
from tgfx.scipy.stats import t as t
from tgfx.scipy.stats import truncnorm as truncnorm
from tgfx.scipy.stats import uniform as uniform
from tgfx.scipy.stats import vonmises as vonmises
from tgfx.scipy.stats import wrapcauchy as wrapcauchy
from tgfx.scipy.stats._core import ModeResult as ModeResult
from tgfx.scipy.stats._core import mode as mode
from tgfx.scipy.stats._core import rankdata as rankdata
from tgfx.scipy.stats._core import sem as sem
