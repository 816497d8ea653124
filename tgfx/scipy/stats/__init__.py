"""`tgfx.scipy.stats`: log densities, densities and distribution functions of `jax.scipy.stats`, one module per
distribution (`norm.logpdf`, `multivariate_normal.logpdf`, ...), with JAX's arguments and edge cases.

Every function broadcasts its arguments, promotes them to one float type (integers to the default float), runs on
the device as tgfx ops and is differentiable in all of its array arguments.

>>> from tgfx.scipy import stats
>>> stats.norm.logpdf(tg.asarray([0.0, 1.0]), loc=0.0, scale=2.0)      # [-1.6120857, -1.7370857]
>>> stats.multivariate_normal.logpdf(x, mean, cov)                    # x (..., n), mean (n,), cov (n, n)
"""
from tgfx.scipy.stats import bernoulli as bernoulli
from tgfx.scipy.stats import beta as beta
from tgfx.scipy.stats import expon as expon
from tgfx.scipy.stats import gamma as gamma
from tgfx.scipy.stats import laplace as laplace
from tgfx.scipy.stats import multivariate_normal as multivariate_normal
from tgfx.scipy.stats import norm as norm
from tgfx.scipy.stats import poisson as poisson
from tgfx.scipy.stats import t as t
from tgfx.scipy.stats import uniform as uniform
