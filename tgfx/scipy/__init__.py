"""`tgfx.scipy`: the parts of `jax.scipy` that programs use, as tgfx programs.

`special` (logsumexp, gammaln, erfc, ndtr, ndtri, xlogy, ...), `stats` (norm, multivariate_normal, uniform,
bernoulli, ...), `linalg` (cholesky, cho_solve, lu_solve, solve_triangular, lu, qr, svd, eigh, expm, ...), `signal`
(convolve, correlate, convolve2d, correlate2d, fftconvolve, detrend, stft, istft, csd, welch), `fft` (dct, dctn,
idct, idctn), `sparse.linalg` (cg, bicgstab), `optimize` (minimize by BFGS, line_search), `integrate`
(trapezoid), `interpolate` (RegularGridInterpolator), `ndimage` (map_coordinates) and `cluster.vq` (vq). Everything
runs on the device, traces under `jit` and is differentiable with `grad`.

>>> from tgfx import scipy as tsp
>>> tsp.stats.multivariate_normal.logpdf(x, mean, cov)
>>> tsp.linalg.cho_solve(tsp.linalg.cho_factor(cov), b)
>>> f, pxx = tsp.signal.welch(x, fs=100.0, nperseg=64)
"""
from tgfx.scipy import cluster as cluster
from tgfx.scipy import fft as fft
from tgfx.scipy import integrate as integrate
from tgfx.scipy import interpolate as interpolate
from tgfx.scipy import linalg as linalg
from tgfx.scipy import ndimage as ndimage
from tgfx.scipy import optimize as optimize
from tgfx.scipy import signal as signal
from tgfx.scipy import sparse as sparse
from tgfx.scipy import special as special
from tgfx.scipy import stats as stats
