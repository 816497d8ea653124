"""`tgfx.scipy`: the parts of `jax.scipy` that programs use, as tgfx programs.

`special` (logsumexp, gammaln, erfc, ndtr, ndtri, xlogy, ...), `stats` (norm, multivariate_normal, uniform,
bernoulli, ...) and `linalg` (cholesky, solve_triangular, cho_factor, cho_solve, lu_factor, lu_solve). Everything
runs on the device, traces under `jit` and is differentiable with `grad`.

>>> from tgfx import scipy as tsp
>>> tsp.stats.multivariate_normal.logpdf(x, mean, cov)
>>> tsp.linalg.cho_solve(tsp.linalg.cho_factor(cov), b)
"""
from tgfx.scipy import linalg as linalg
from tgfx.scipy import special as special
from tgfx.scipy import stats as stats
