"""tg.scipy: special functions, distributions and linear algebra against scipy, gradients by central differences
(test_grad's `check_grads`: jvp, vjp and their transposition identity), `jit` without retracing, kernel counts that
do not grow with the matrix size, and the errors a user gets for shapes that do not fit.

scipy is the reference for every value, evaluated in float64 at the inputs rounded to the tested dtype.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

pytest.importorskip("scipy")

import scipy.linalg as sl  # noqa: E402
import scipy.special as ss  # noqa: E402
import scipy.stats as st  # noqa: E402
from hypothesis import given, settings
from hypothesis import strategies as st_h
from hypothesis.extra import numpy as hnp
from test_grad import T, check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import config
from tgfx.devices import get_device
from tgfx.dtypes import dtypes
from tgfx.scipy import linalg as sla
from tgfx.scipy import special as sp
from tgfx.scipy import stats

RNG = np.random.default_rng(0)


def spd(n: int, batch: tuple[int, ...] = (), seed: int = 0) -> np.ndarray:
    """A well-conditioned symmetric positive definite matrix (or a stack of them)."""
    m = np.random.default_rng(seed).standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def close(got: tg.Tensor, want: np.ndarray, rtol: float, atol: float = 0.0) -> None:
    """Same shape, NaNs and infinities where scipy has them, the rest within rtol / atol."""
    g, w = got.numpy().astype(np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg="NaNs differ")
    inf = np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf], err_msg="infinities differ")
    np.testing.assert_allclose(g[~inf], w[~inf], rtol=rtol, atol=atol)


# ---- special functions against scipy.special ----
_NEG = -np.linspace(0.013, 30.3, 301)      # negative non-integers
_POS = np.concatenate([np.logspace(-8, 30, 200), np.linspace(0.01, 20, 400)])
# name: (tgfx function, scipy function, inputs, (rtol, atol) for float64, (rtol, atol) for float32)
SPECIAL: dict[str, tuple[Callable, Callable, np.ndarray, tuple[float, float], tuple[float, float]]] = {
    "erf": (sp.erf, ss.erf, np.linspace(-6, 6, 241), (1e-15, 0), (1e-6, 1e-7)),
    "erfc": (sp.erfc, ss.erfc, np.linspace(-6, 26, 321), (1e-13, 0), (1e-5, 0)),
    # scipy's own ndtr is off by up to 2e-13 in the far tails (exp of the square of the rounded x / sqrt 2)
    "ndtr": (sp.ndtr, ss.ndtr, np.linspace(-37, 9, 461), (5e-13, 0), (2e-6, 0)),
    "log_ndtr": (sp.log_ndtr, ss.log_ndtr, np.concatenate([-np.logspace(3, -3, 100), np.linspace(0, 12, 50)]),
                 (5e-13, 0), (2e-6, 0)),
    "ndtri": (sp.ndtri, ss.ndtri, np.concatenate([np.logspace(-300, -0.31, 200), np.linspace(0.01, 0.99, 99),
                                                  1 - np.logspace(-15, -2, 20)]), (1e-13, 0), (2e-6, 1e-7)),
    "gammaln": (sp.gammaln, ss.gammaln, np.concatenate([_POS, _NEG]), (1e-12, 1e-14), (2e-6, 2e-6)),
    "digamma": (sp.digamma, ss.digamma, np.concatenate([_POS[_POS < 1e15], _NEG]), (1e-12, 1e-14), (2e-6, 2e-6)),
    "logit": (sp.logit, ss.logit, np.linspace(1e-6, 1 - 1e-6, 201), (1e-14, 0), (1e-6, 1e-7)),
    "expit": (sp.expit, ss.expit, np.linspace(-100, 100, 201), (1e-14, 0), (1e-6, 0)),
    "erfinv": (sp.erfinv, ss.erfinv, np.linspace(-0.9999, 0.9999, 201), (3e-14, 0), (2e-6, 1e-7)),
}


@pytest.mark.x64
@pytest.mark.parametrize("dtype", [dtypes.float64, dtypes.float32], ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(SPECIAL))
def test_special_matches_scipy(name: str, dtype: tg.DType) -> None:
    f, ref, x, tol64, tol32 = SPECIAL[name]
    xd = x.astype(dtype.np)
    want = ref(xd.astype(np.float64))
    keep = np.abs(want) > (1e-300 if dtype == dtypes.float64 else 1e-36)    # below the normal floats of the dtype
    out = f(tg.asarray(xd[keep]))
    assert out.dtype == dtype
    close(out, want[keep], *(tol64 if dtype == dtypes.float64 else tol32))


# one shape for every example: the values vary, the compiled kernels are reused
@pytest.mark.x64
@settings(max_examples=12)
@given(hnp.arrays(np.float64, 8, elements=st_h.floats(-30, 30)), st_h.sampled_from(["erfc", "ndtr", "log_ndtr"]))
def test_normal_functions_hypothesis(x: np.ndarray, name: str) -> None:
    f, ref, *_ = SPECIAL[name]
    close(f(tg.asarray(x)), ref(x), rtol=5e-13, atol=1e-300)


@pytest.mark.x64
@settings(max_examples=12)
@given(hnp.arrays(np.float64, 8, elements=st_h.floats(1e-6, 1e6)))
def test_gammaln_digamma_hypothesis(x: np.ndarray) -> None:
    close(sp.gammaln(tg.asarray(x)), ss.gammaln(x), rtol=1e-12, atol=1e-13)
    close(sp.digamma(tg.asarray(x)), ss.digamma(x), rtol=1e-11, atol=1e-12)


def test_special_values_at_the_edges() -> None:
    """Poles, infinities and NaN as scipy has them (gammaln(-inf) is +inf, C's lgamma, where scipy says -inf)."""
    inf, nan = np.inf, np.nan
    assert sp.erfc(tg.asarray([inf, -inf, nan])).tolist()[:2] == [0.0, 2.0]
    assert sp.log_ndtr(tg.asarray([inf, -inf])).tolist() == [0.0, -inf]
    np.testing.assert_array_equal(sp.ndtri(tg.asarray([0.0, 1.0, -0.1, 1.1, 0.5, nan])).numpy(),
                                  [-inf, inf, nan, nan, 0.0, nan])
    np.testing.assert_array_equal(sp.gammaln(tg.asarray([0.0, -1.0, -2.0, inf, nan])).numpy(),
                                  [inf, inf, inf, inf, nan])
    np.testing.assert_array_equal(sp.digamma(tg.asarray([0.0, -1.0, -3.0, inf])).numpy(), [-inf, nan, nan, inf])
    np.testing.assert_array_equal(sp.logit(tg.asarray([0.0, 1.0, 0.5, 2.0])).numpy(), [-inf, inf, 0.0, nan])
    np.testing.assert_array_equal(sp.erfinv(tg.asarray([1.0, -1.0, 0.0])).numpy(), [inf, -inf, 0.0])
    assert sp.log_ndtr(tg.asarray(np.float32(-40.0))).item() == pytest.approx(ss.log_ndtr(-40.0), rel=1e-6)


@pytest.mark.x64
def test_xlogy_family() -> None:
    x = np.array([0.0, 0.0, 0.0, 2.0, 0.5, 0.0, 3.0])
    y = np.array([0.0, -1.0, np.inf, np.e, 2.0, np.nan, 0.0])
    close(sp.xlogy(tg.asarray(x), tg.asarray(y)), ss.xlogy(x, y), rtol=1e-15)
    y1 = y - 1
    close(sp.xlog1py(tg.asarray(x), tg.asarray(y1)), ss.xlog1py(x, y1), rtol=1e-15)
    e = np.array([0.0, 0.5, 2.0, -1.0])
    close(sp.entr(tg.asarray(e)), ss.entr(e), rtol=1e-15)
    a, b = np.array([0.5, 2.0, 30.0]), np.array([1.5, 3.0, 0.1])
    close(sp.betaln(tg.asarray(a), tg.asarray(b)), ss.betaln(a, b), rtol=1e-12)
    # broadcasting, and 32-bit integer arguments computed in float32
    assert sp.xlogy(tg.asarray(np.array([1, 2], np.int32)), 3).dtype == dtypes.float32
    assert sp.xlogy(tg.asarray(np.ones((2, 1))), tg.asarray(np.ones(3))).shape == (2, 3)


def test_special_keeps_half_precision() -> None:
    x = np.linspace(0.2, 3, 8)
    for name in ("erf", "erfc", "ndtr", "log_ndtr", "gammaln", "digamma", "expit"):
        f, ref, *_ = SPECIAL[name]
        out = f(tg.asarray(x.astype(np.float16)))
        assert out.dtype == dtypes.float16, name
        close(out, ref(x.astype(np.float16).astype(np.float64)), rtol=2e-3, atol=2e-3)


# ---- logsumexp ----
@pytest.mark.x64
@settings(max_examples=12)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=3),
                  elements=st_h.floats(-50, 50)), st_h.data())
def test_logsumexp_hypothesis(a: np.ndarray, data: st_h.DataObject) -> None:
    axis = data.draw(st_h.sampled_from([None, *range(-a.ndim, a.ndim)]))
    keepdims = data.draw(st_h.booleans())
    close(sp.logsumexp(tg.asarray(a), axis=axis, keepdims=keepdims), ss.logsumexp(a, axis=axis, keepdims=keepdims),
          rtol=1e-13, atol=1e-13)
    b = data.draw(hnp.arrays(np.float64, a.shape[-1:], elements=st_h.floats(-2, 2)))
    # (a subnormal weight is scipy's exactly with IEEE gradual underflow; by default kernels flush it, as XLA's)
    flush, config.FLUSH_DENORMALS.value = config.FLUSH_DENORMALS.value, 0
    try:
        out, sign = sp.logsumexp(tg.asarray(a), axis=axis, b=tg.asarray(b), return_sign=True)
        tg.realize(out, sign)   # (lazy: computed here, with the flag off, not at the comparison below)
    finally:
        config.FLUSH_DENORMALS.value = flush
    want, want_sign = ss.logsumexp(a, axis=axis, b=np.broadcast_to(b, a.shape), return_sign=True)
    close(out, want, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(sign.numpy(), want_sign)


def test_logsumexp_edges() -> None:
    assert sp.logsumexp(tg.asarray([1000.0, 1000.0])).item() == pytest.approx(1000 + np.log(2))
    assert sp.logsumexp(tg.asarray([-np.inf, -np.inf])).item() == -np.inf
    assert np.isnan(sp.logsumexp(tg.asarray([1.0, 2.0]), b=tg.asarray([1.0, -1.0])).item())     # a negative sum
    # entries with b == 0 are left out, even an infinite one; their gradient is 0
    x = tg.asarray([np.inf, 0.0, 1.0])
    b = tg.asarray([0.0, 1.0, 1.0])
    assert sp.logsumexp(x, b=b).item() == pytest.approx(np.log(1 + np.e))
    g = tg.grad(lambda t: sp.logsumexp(t, b=tg.asarray([1.0, 1.0, 0.0])))(tg.asarray([0.0, 0.0, 5.0]))
    np.testing.assert_allclose(g.numpy(), [0.5, 0.5, 0.0])


def test_logsumexp_where_leaves_entries_out() -> None:
    """JAX's `where=` (it was an unexpected keyword): the masked-out entries are not summed, with or without `b`; a
    slice with none left is -inf, and the left-out entries get no gradient."""
    a = np.array([[1.0, 2.0, 300.0], [4.0, 5.0, 6.0]], np.float32)
    w = np.array([[True, True, False], [False, False, False]])
    close(sp.logsumexp(tg.asarray(a), axis=1, where=w), [np.log(np.e + np.e ** 2), -np.inf], rtol=1e-6, atol=0)
    out, sign = sp.logsumexp(tg.asarray(a), axis=1, b=tg.asarray([2.0, -1.0, 1.0]), where=w, return_sign=True)
    close(out, [np.log(np.e ** 2 - 2 * np.e), -np.inf], rtol=1e-6, atol=0)
    np.testing.assert_array_equal(sign.numpy(), [-1.0, 0.0])   # 2e - e^2 < 0
    g = tg.grad(lambda t: sp.logsumexp(t, where=w[0]))(tg.asarray(a[0]))
    close(g, [1 / (1 + np.e), np.e / (1 + np.e), 0.0], rtol=1e-6, atol=0)


# ---- gradients ----
UNIT, POSV = RNG.uniform(0.05, 0.95, 4), RNG.uniform(0.3, 6.0, 4)
REAL = RNG.uniform(0.3, 4.0, 4) * np.array([1, -1, 1, -1])
KS = tg.asarray([0.0, 1.0, 3.0, 7.0])
# families checked together (one check_grads over the stacked results, fewer compiles): name -> (function, inputs)
GRADS: dict[str, tuple[Callable, tuple[np.ndarray, ...]]] = {
    "erf_erfc_ndtr_log_ndtr": (lambda x: tnp.stack([sp.erf(x), sp.erfc(x), sp.ndtr(3 * x), sp.log_ndtr(5 * x)]),
                               (REAL,)),
    "ndtri_erfinv_logit": (lambda u: tnp.stack([sp.ndtri(u), sp.ndtri(0.015 * u + 0.003), sp.erfinv(u - 0.5),
                                                sp.logit(u)]), (UNIT,)),
    "gammaln_digamma_betaln": (lambda x, u: tnp.stack([sp.gammaln(x), sp.digamma(x), sp.gammaln(-u), sp.betaln(x, u)]),
                               (POSV, UNIT)),
    "xlogy_xlog1py": (lambda x, y, u: tnp.stack([sp.xlogy(x, y), sp.xlog1py(x, u)]), (REAL, POSV, UNIT)),
    "logsumexp": (lambda a, b: sp.logsumexp(a, axis=0, b=b), (REAL, POSV)),
    # the other distributions are compositions of these and of tnp ops
    "norm": (lambda x, loc, scale: tnp.stack([stats.norm.logpdf(x, loc, scale), stats.norm.logcdf(8 * x, loc, scale),
                                              stats.norm.sf(x, loc, scale)]), (REAL, UNIT, POSV)),
    "gamma_poisson_laplace": (lambda x, a, u: tnp.stack([stats.gamma.logpdf(a, a + u), stats.poisson.logpmf(KS, a),
                                                         stats.laplace.cdf(x, u, a)]), (REAL, POSV, UNIT)),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", list(GRADS))
def test_gradients_by_central_differences(name: str) -> None:
    f, xs = GRADS[name]
    check_grads(f, *xs, rtol=1e-5, atol=1e-6)


@pytest.mark.x64
def test_gradients_stay_finite_at_extremes() -> None:
    cases = {
        "erfc": (sp.erfc, [-40.0, 0.0, 40.0, 1e30]), "log_ndtr": (sp.log_ndtr, [-1e4, -40.0, 0.0, 40.0]),
        "ndtr": (sp.ndtr, [-40.0, 0.0, 40.0]), "ndtri": (sp.ndtri, [1e-300, 1e-30, 0.5, 1 - 1e-12]),
        "erfinv": (sp.erfinv, [0.0, 0.5, -0.999999]), "gammaln": (sp.gammaln, [1e-5, 1.0, 1e10, -0.5]),
        "logit": (sp.logit, [1e-12, 0.5, 1 - 1e-12]), "xlogy_zero": (lambda t: sp.xlogy(t * 0, t * 0 + 1), [0.0]),
        "expon.cdf": (stats.expon.cdf, [-100.0, 0.0, 100.0]), "laplace.cdf": (stats.laplace.cdf, [-800.0, 800.0]),
        "norm.logcdf": (stats.norm.logcdf, [-1e3, 0.0, 1e3]),
    }
    for name, (f, x) in cases.items():
        g = tg.grad(lambda t, f=f: f(t).sum())(tg.asarray(np.array(x)))
        assert np.all(np.isfinite(g.numpy())), (name, g.numpy())
    # x = 0 contributes 0 to xlogy whatever y is, and gets the gradient log(y), as in JAX
    gx, gy = tg.grad(lambda x, y: sp.xlogy(x, y).sum(), argnums=(0, 1))(tg.asarray([0.0, 0.0]), tg.asarray([2.0, 0.0]))
    np.testing.assert_allclose(gx.numpy(), [np.log(2), 0.0])
    np.testing.assert_array_equal(gy.numpy(), [0.0, 0.0])
    # the gradient of erfc at 0 is the one-sided -2 / sqrt(pi), not the 0 of |x|
    assert tg.grad(sp.erfc)(tg.asarray(0.0)).item() == pytest.approx(-2 / np.sqrt(np.pi))


# ---- distributions against scipy.stats ----
X, LOC, SCALE, PQ = np.linspace(-3, 3, 13), 0.3, 1.7, np.linspace(0.001, 0.999, 13)
K = np.array([-1.0, 0.0, 1.0, 2.0, 2.5, 5.0])
# name: (tgfx function, scipy function, arguments)
STATS: dict[str, tuple[Callable, Callable, tuple]] = {
    "norm.logpdf": (stats.norm.logpdf, st.norm.logpdf, (X, LOC, SCALE)),
    "norm.pdf": (stats.norm.pdf, st.norm.pdf, (X, LOC, SCALE)),
    "norm.cdf": (stats.norm.cdf, st.norm.cdf, (X * 10, LOC, SCALE)),
    "norm.logcdf": (stats.norm.logcdf, st.norm.logcdf, (X * 20, LOC, SCALE)),
    "norm.sf": (stats.norm.sf, st.norm.sf, (X * 10, LOC, SCALE)),
    "norm.logsf": (stats.norm.logsf, st.norm.logsf, (X * 20, LOC, SCALE)),
    "norm.ppf": (stats.norm.ppf, st.norm.ppf, (PQ, LOC, SCALE)),
    "norm.isf": (stats.norm.isf, st.norm.isf, (PQ ** 8, LOC, SCALE)),
    "uniform.logpdf": (stats.uniform.logpdf, st.uniform.logpdf, (X, LOC, SCALE)),
    "uniform.pdf": (stats.uniform.pdf, st.uniform.pdf, (X, LOC, SCALE)),
    "uniform.cdf": (stats.uniform.cdf, st.uniform.cdf, (X, LOC, SCALE)),
    "uniform.ppf": (stats.uniform.ppf, st.uniform.ppf, (np.linspace(-0.5, 1.5, 9), LOC, SCALE)),
    "bernoulli.logpmf": (stats.bernoulli.logpmf, st.bernoulli.logpmf, (K, 0.3)),
    "bernoulli.pmf": (stats.bernoulli.pmf, st.bernoulli.pmf, (K, 0.3)),
    "bernoulli.cdf": (stats.bernoulli.cdf, st.bernoulli.cdf, (K, 0.3)),
    "bernoulli.ppf": (stats.bernoulli.ppf, st.bernoulli.ppf, (PQ, 0.3)),
    "expon.logpdf": (stats.expon.logpdf, st.expon.logpdf, (X, LOC, SCALE)),
    "expon.cdf": (stats.expon.cdf, st.expon.cdf, (X, LOC, SCALE)),
    "expon.sf": (stats.expon.sf, st.expon.sf, (X, LOC, SCALE)),
    "expon.ppf": (stats.expon.ppf, st.expon.ppf, (PQ, LOC, SCALE)),
    "laplace.logpdf": (stats.laplace.logpdf, st.laplace.logpdf, (X, LOC, SCALE)),
    "laplace.cdf": (stats.laplace.cdf, st.laplace.cdf, (X * 10, LOC, SCALE)),
    "poisson.logpmf": (stats.poisson.logpmf, st.poisson.logpmf, (K, 2.5)),
    "poisson.pmf": (stats.poisson.pmf, st.poisson.pmf, (K, 2.5, 1.0)),
    "gamma.logpdf": (stats.gamma.logpdf, st.gamma.logpdf, (X + 3, 2.5, LOC, SCALE)),
    "beta.logpdf": (stats.beta.logpdf, st.beta.logpdf, (np.linspace(-0.1, 1.1, 13), 2.5, 0.7)),
    "t.logpdf": (stats.t.logpdf, st.t.logpdf, (X, 3.5, LOC, SCALE)),
    "t.pdf": (stats.t.pdf, st.t.pdf, (X, 3.5, LOC, SCALE)),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", list(STATS))
def test_distributions_match_scipy(name: str) -> None:
    f, ref, args = STATS[name]
    out = f(*(tg.asarray(a) if isinstance(a, np.ndarray) else a for a in args))
    assert out.dtype == dtypes.float64
    close(out, ref(*args), rtol=1e-12, atol=1e-14)


def test_distributions_broadcast_and_promote() -> None:
    x = tg.asarray(np.zeros((3, 1), np.float32))
    out = stats.norm.logpdf(x, tg.asarray(np.zeros(4, np.float32)), 2.0)
    assert out.shape == (3, 4) and out.dtype == dtypes.float32
    assert stats.norm.logpdf(tg.asarray([0, 1])).dtype == dtypes.float32          # integers: the default float
    assert stats.norm.cdf(tg.asarray([0.0], dtypes.float16)).dtype == dtypes.float16


# ---- multivariate normal ----
@pytest.mark.x64
@pytest.mark.parametrize("x_shape", [(3,), (5, 3), (2, 4, 3)], ids=str)
def test_multivariate_normal_matches_scipy(x_shape: tuple[int, ...]) -> None:
    cov, mean = spd(3), RNG.standard_normal(3)
    x = RNG.standard_normal(x_shape)
    want = st.multivariate_normal.logpdf(x.reshape(-1, 3), mean, cov).reshape(x_shape[:-1])
    close(stats.multivariate_normal.logpdf(tg.asarray(x), tg.asarray(mean), tg.asarray(cov)), want, rtol=1e-12)
    close(stats.multivariate_normal.pdf(tg.asarray(x), tg.asarray(mean), tg.asarray(cov)), np.exp(want), rtol=1e-12)


@pytest.mark.x64
def test_multivariate_normal_batched_scalar_and_univariate_cov() -> None:
    covs, means, x = spd(3, (2,)), RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    want = [st.multivariate_normal.logpdf(x[i], means[i], covs[i]) for i in range(2)]
    close(stats.multivariate_normal.logpdf(tg.asarray(x), tg.asarray(means), tg.asarray(covs)), want, rtol=1e-12)
    # a scalar cov is the variance of every coordinate; a 0-d mean the univariate normal with variance cov
    close(stats.multivariate_normal.logpdf(tg.asarray(x), tg.asarray(means[0]), 2.0),
          st.multivariate_normal.logpdf(x, means[0], 2.0 * np.eye(3)), rtol=1e-12)
    close(stats.multivariate_normal.logpdf(tg.asarray(x[0]), 0.5, 2.0), st.norm.logpdf(x[0], 0.5, np.sqrt(2.0)),
          rtol=1e-12)


@pytest.mark.x64
def test_multivariate_normal_gradients_and_second_order() -> None:
    m = RNG.standard_normal((3, 3))
    check_grads(lambda x, mu, a: stats.multivariate_normal.logpdf(x, mu, a @ a.T + tnp.eye(3)),
                RNG.standard_normal((4, 3)), RNG.standard_normal(3), m)
    # d^2/dmean^2 of the log density is -cov^-1 (second order through the triangular solves' own backward)
    cov, x = spd(3), T(RNG.standard_normal(3))
    row_sums = tg.grad(lambda mu: tg.grad(lambda v: stats.multivariate_normal.logpdf(x, v, T(cov)))(mu).sum())(
        T(np.zeros(3)))
    np.testing.assert_allclose(row_sums.numpy(), -np.linalg.inv(cov).sum(axis=1), rtol=1e-10)


def test_multivariate_normal_shape_errors() -> None:
    x, mean, cov = tg.asarray(np.zeros((4, 3))), tg.asarray(np.zeros(3)), tg.asarray(np.eye(3))
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 3\) .* got shape \(4, 2\)"):
        stats.multivariate_normal.logpdf(tg.asarray(np.zeros((4, 2))), mean, cov)
    with pytest.raises(ValueError, match=r"cov must have shape \(\.\.\., 3, 3\) .* got shape \(2, 2\)"):
        stats.multivariate_normal.logpdf(x, mean, tg.asarray(np.eye(2)))


# ---- linear algebra ----
@pytest.mark.x64
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("batch", [(), (2, 3)], ids=str)
def test_cholesky_matches_scipy(lower: bool, batch: tuple[int, ...]) -> None:
    a = spd(5, batch)
    out = sla.cholesky(tg.asarray(a), lower=lower)
    want = np.linalg.cholesky(a)
    close(out, want if lower else np.swapaxes(want, -1, -2), rtol=1e-12, atol=1e-13)
    if not batch:
        close(out, sl.cholesky(a, lower=lower), rtol=1e-12, atol=1e-13)


@pytest.mark.x64
def test_cholesky_reads_one_triangle_and_gives_nan_when_not_positive_definite() -> None:
    a = spd(4)
    junk = a.copy()
    junk[np.triu_indices(4, 1)] = np.nan       # what scipy never reads for lower=True
    close(sla.cholesky(tg.asarray(junk), lower=True), np.linalg.cholesky(a), rtol=1e-12, atol=1e-13)
    junk = a.copy()
    junk[np.tril_indices(4, -1)] = np.inf
    close(sla.cholesky(tg.asarray(junk)), sl.cholesky(a), rtol=1e-12, atol=1e-13)
    assert np.isnan(sla.cholesky(tg.asarray(-np.eye(3)), lower=True).numpy()).any()
    assert sla.cholesky(tg.asarray(np.array([[4, 2], [2, 5]], np.int32)), lower=True).dtype == dtypes.float32
    assert sla.cholesky(tg.asarray(np.zeros((0, 0)))).shape == (0, 0)


@pytest.mark.x64
@pytest.mark.parametrize("trans", [0, 1, "C"], ids=str)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_matches_scipy(trans: int | str, lower: bool, unit: bool) -> None:
    tri = np.linalg.cholesky(spd(4))
    a = tri if lower else tri.T
    a = a + (np.triu(np.full((4, 4), np.nan), 1) if lower else np.tril(np.full((4, 4), np.nan), -1))   # never read
    for b in (RNG.standard_normal(4), RNG.standard_normal((4, 2))):
        out = sla.solve_triangular(tg.asarray(a), tg.asarray(b), trans=trans, lower=lower, unit_diagonal=unit)
        want = sl.solve_triangular(np.nan_to_num(a), b, trans=trans, lower=lower, unit_diagonal=unit)
        close(out, want, rtol=1e-11, atol=1e-12)


@pytest.mark.x64
def test_solve_triangular_broadcasts_batches() -> None:
    a = np.linalg.cholesky(spd(3, (2,)))
    b = RNG.standard_normal((5, 1, 3, 2))
    out = sla.solve_triangular(tg.asarray(a), tg.asarray(b), lower=True)
    assert out.shape == (5, 2, 3, 2)
    want = np.stack([[sl.solve_triangular(a[j], b[i, 0], lower=True) for j in range(2)] for i in range(5)])
    close(out, want, rtol=1e-11, atol=1e-12)
    vec = RNG.standard_normal((2, 3))              # one vector per matrix: b has one axis fewer than a
    close(sla.solve_triangular(tg.asarray(a), tg.asarray(vec), lower=True, trans=1),
          [sl.solve_triangular(a[i], vec[i], lower=True, trans=1) for i in range(2)], rtol=1e-11, atol=1e-12)


@pytest.mark.x64
def test_cho_factor_and_cho_solve() -> None:
    a, b = spd(4), RNG.standard_normal((4, 3))
    for lower in (True, False):
        c_and_lower = sla.cho_factor(tg.asarray(a), lower=lower)
        assert c_and_lower[1] is lower
        close(sla.cho_solve(c_and_lower, tg.asarray(b)), sl.cho_solve(sl.cho_factor(a, lower=lower), b), rtol=1e-11)
        close(sla.cho_solve(c_and_lower, tg.asarray(b[:, 0])), np.linalg.solve(a, b[:, 0]), rtol=1e-11)


LINALG_GRADS: dict[str, tuple[Callable, tuple[np.ndarray, ...]]] = {
    "cholesky_lower": (lambda a: sla.cholesky(a, lower=True), (spd(4),)),
    "cholesky_upper": (sla.cholesky, (spd(4),)),
    "cholesky_batched": (lambda a: sla.cholesky(a, lower=True), (spd(3, (2,)),)),
    "solve_lower": (lambda a, b: sla.solve_triangular(a, b, lower=True), (np.linalg.cholesky(spd(4)),
                                                                          RNG.standard_normal((4, 2)))),
    "solve_upper_T": (lambda a, b: sla.solve_triangular(a, b, trans=1), (np.linalg.cholesky(spd(4)).T,
                                                                         RNG.standard_normal(4))),
    "solve_unit": (lambda a, b: sla.solve_triangular(a, b, lower=True, unit_diagonal=True),
                   (np.tril(RNG.standard_normal((3, 3))), RNG.standard_normal((3, 3)))),
    "cho_solve": (lambda a, b: sla.cho_solve(sla.cho_factor(a), b), (spd(3), RNG.standard_normal((3, 2)))),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", list(LINALG_GRADS))
def test_linalg_gradients_by_central_differences(name: str) -> None:
    """Along any direction, not only symmetric ones: the gradient is that of the function as computed, which reads one
    triangle (so it is zero on the other)."""
    f, xs = LINALG_GRADS[name]
    check_grads(f, *xs, rtol=1e-5, atol=1e-6)


@pytest.mark.x64
def test_cholesky_gradient_is_triangular_and_agrees_with_jax_on_symmetric_directions() -> None:
    a, w = spd(4), RNG.standard_normal((4, 4))
    g = tg.grad(lambda t: (sla.cholesky(t, lower=True) * T(w)).sum())(T(a)).numpy()
    np.testing.assert_array_equal(np.triu(g, 1), 0)
    # JAX's rule, L^-T phi(L^T Lbar) L^-1, gives the same inner product with any symmetric direction
    lo = np.linalg.cholesky(a)
    x = lo.T @ np.tril(w)
    phi = np.tril(x) - 0.5 * np.diag(np.diag(x))
    jax_grad = np.linalg.solve(lo.T, np.linalg.solve(lo.T, phi.T).T)
    d = RNG.standard_normal((4, 4))
    d = d + d.T
    np.testing.assert_allclose(np.vdot(g, d), np.vdot(jax_grad, d), rtol=1e-10)


# Sizes past the blocked thresholds (cholesky above 64, solves above twice their block), one of each a multiple of
# the block and one padded to it: the tests above use small matrices, which take the unblocked loops.
@pytest.mark.x64
@pytest.mark.parametrize("n", [72, 70])
@pytest.mark.parametrize("lower", [True, False])
def test_blocked_cholesky_matches_numpy(n: int, lower: bool) -> None:
    a = spd(n, (2,), seed=n)
    a = a + (np.triu(np.full((n, n), np.nan), 1) if lower else np.tril(np.full((n, n), np.nan), -1))   # never read
    want = np.linalg.cholesky(np.nan_to_num(np.tril(a) + np.tril(a, -1).swapaxes(-1, -2)) if lower else
                              np.nan_to_num(np.triu(a) + np.triu(a, 1).swapaxes(-1, -2)))
    close(sla.cholesky(tg.asarray(a), lower=lower), want if lower else np.swapaxes(want, -1, -2), rtol=1e-10,
          atol=1e-12)


def gp_covariance(n: int, lengthscale: float, noise: float, seed: int) -> np.ndarray:
    """An RBF-kernel covariance of n sorted points in [0, 2 pi] plus noise on the diagonal, in float32: near singular
    for a small noise, as a GP's is."""
    x = np.sort(np.random.default_rng(seed).uniform(0, 2 * np.pi, n))
    return (np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / lengthscale ** 2) + noise * np.eye(n)).astype(np.float32)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize(("lengthscale", "noise"), [(1.0, 0.09), (1.0, 1e-4), (1.0, 3e-5), (0.3, 1e-5)])
def test_cholesky_float32_is_as_accurate_as_lapack_on_ill_conditioned_covariances(lower: bool, lengthscale: float,
                                                                                    noise: float) -> None:
    """The panels' rows below the diagonal block go through the inverses of its two groups of four in turn: in float32
    against float64's factor, within 2x of LAPACK's spotrf error (one 8 x 8 inverse was up to 7x worse)."""
    for seed in range(3):
        k = gp_covariance(128, lengthscale, noise, seed)
        want = np.linalg.cholesky(k.astype(np.float64))
        want = want if lower else want.T
        lapack = np.abs(sl.cholesky(k, lower=lower) - want).max()
        ours = np.abs(sla.cholesky(tg.asarray(k), lower=lower).numpy() - want).max()
        assert ours <= 2 * lapack + 1e-6, (seed, ours, lapack)


def test_cholesky_is_n_over_8_loop_steps_of_a_few_kernels() -> None:
    """n = 128 under jit: 16 panel steps (n / 8) of about 16 small kernels each, not 128 column steps of six (about
    1,300 kernels in all)."""
    f = tg.jit(lambda a: sla.cholesky(a, lower=True))
    a = tg.asarray(gp_covariance(128, 1.0, 0.1, 0))
    f(a).block_until_ready()
    dev = get_device("CPU:0")
    dev.synchronize()
    dev.clear_profile()
    f(a).block_until_ready()
    dev.synchronize()
    kernels = [e for e in dev.profile_events if e.name != "copy"]
    assert len(kernels) <= 16 * 17, len(kernels)


@pytest.mark.x64
@pytest.mark.parametrize("n", [40, 37])
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_blocked_solve_triangular_matches_scipy(n: int, trans: int, lower: bool, unit: bool) -> None:
    tri = np.linalg.cholesky(spd(n, seed=n)) / np.sqrt(n)
    a = tri if lower else tri.T
    a = a + (np.triu(np.full((n, n), np.nan), 1) if lower else np.tril(np.full((n, n), np.nan), -1))   # never read
    if unit:
        a = np.where(np.eye(n, dtype=bool), np.nan, a / np.sqrt(n))   # the diagonal is not read either
    for b in (RNG.standard_normal(n), RNG.standard_normal((n, 3))):
        out = sla.solve_triangular(tg.asarray(a), tg.asarray(b), trans=trans, lower=lower, unit_diagonal=unit)
        want = sl.solve_triangular(np.nan_to_num(a), b, trans=trans, lower=lower, unit_diagonal=unit)
        close(out, want, rtol=1e-9, atol=1e-10)


@pytest.mark.x64
def test_blocked_solve_triangular_broadcasts_batches() -> None:
    a = np.linalg.cholesky(spd(40, (2,)))
    b = RNG.standard_normal((3, 1, 40, 2))
    out = sla.solve_triangular(tg.asarray(a), tg.asarray(b), lower=True, trans=1)
    want = np.stack([[sl.solve_triangular(a[j], b[i, 0], lower=True, trans=1) for j in range(2)] for i in range(3)])
    close(out, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("lower", [True, False])
def test_blocked_solve_float32_with_many_right_hand_sides_is_as_accurate_as_lapack(trans: int, lower: bool) -> None:
    """The GP backward's solves: a float32 factor of an RBF covariance (n = 128) against 128 right-hand sides, the
    blocks of x the loop's outputs and the rest of b updated a step; against float64, within 2x of LAPACK's strtrs."""
    for seed in range(2):
        tri = np.linalg.cholesky(gp_covariance(128, 1.0, 1e-2, seed).astype(np.float64)).astype(np.float32)
        a = tri if lower else tri.T.copy()
        b = np.random.default_rng(seed).standard_normal((128, 128)).astype(np.float32)
        want = sl.solve_triangular(a.astype(np.float64), b.astype(np.float64), trans=trans, lower=lower)
        lapack = np.abs(sl.solve_triangular(a, b, trans=trans, lower=lower) - want).max()
        out = sla.solve_triangular(tg.asarray(a), tg.asarray(b), trans=trans, lower=lower)
        assert out.dtype == dtypes.float32
        ours = np.abs(out.numpy() - want).max()
        assert ours <= 2 * lapack + 1e-6, (seed, ours, lapack)


@pytest.mark.parametrize("trans", [0, 1])
def test_blocked_solve_is_n_over_b_steps_of_five_kernels(trans: int) -> None:
    """n = k = 128 under jit: B = 16 steps inverting the diagonal blocks, then n / B = 8 block steps of five small
    kernels each (the block of M^-1 and of the rest of b, x's block, M's block, the rank-16 update), x's blocks being
    the loop's outputs; writing each block into an n x k x took two more kernels a step."""
    tri = np.linalg.cholesky(spd(128)).astype(np.float32)
    f = tg.jit(lambda a, b: sla.solve_triangular(a, b, lower=True, trans=trans))
    a, b = tg.asarray(tri), tg.asarray(RNG.standard_normal((128, 128)).astype(np.float32))
    f(a, b).block_until_ready()
    dev = get_device("CPU:0")
    dev.synchronize()
    dev.clear_profile()
    f(a, b).block_until_ready()
    dev.synchronize()
    kernels = [e for e in dev.profile_events if e.name != "copy"]
    assert len(kernels) <= 16 * 5 + 8 * 5 + 5, len(kernels)


BLOCKED_GRADS: dict[str, tuple[Callable, tuple[np.ndarray, ...]]] = {
    "cholesky_lower": (lambda a: sla.cholesky(a, lower=True), (spd(70),)),
    "cholesky_upper": (sla.cholesky, (spd(72),)),
    "solve_lower_T": (lambda a, b: sla.solve_triangular(a, b, lower=True, trans=1),
                      (np.linalg.cholesky(spd(37)), RNG.standard_normal((37, 2)))),
    "solve_upper": (lambda a, b: sla.solve_triangular(a, b), (np.linalg.cholesky(spd(40)).T, RNG.standard_normal(40))),
    "cho_solve": (lambda a, b: sla.cho_solve(sla.cho_factor(a, lower=True), b), (spd(70), RNG.standard_normal(70))),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", list(BLOCKED_GRADS))
def test_blocked_linalg_gradients_by_central_differences(name: str) -> None:
    f, xs = BLOCKED_GRADS[name]
    check_grads(f, *xs, rtol=1e-5, atol=1e-6)


def test_linalg_shape_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"cholesky: a must be a square matrix .* got shape \(3, 4\)"):
        sla.cholesky(tg.asarray(np.ones((3, 4))))
    with pytest.raises(ValueError, match=r"cholesky: .* got shape \(3,\)"):
        sla.cholesky(tg.asarray(np.ones(3)))
    a = tg.asarray(np.eye(3))
    with pytest.raises(ValueError, match=r"b must have shape \(\.\.\., 3\) or \(\.\.\., 3, k\) .* got shape \(2, 1\)"):
        sla.solve_triangular(a, tg.asarray(np.ones((2, 1))))
    with pytest.raises(ValueError, match=r"trans must be 0, 1, 2, 'N', 'T' or 'C', got 3"):
        sla.solve_triangular(a, tg.asarray(np.ones(3)), trans=3)
    with pytest.raises(TypeError, match=r"cho_solve: the first argument must be the pair \(c, lower\)"):
        sla.cho_solve(a, tg.asarray(np.ones(3)))


# ---- under jit, and what compiles ----
@pytest.mark.x64
def test_jit_does_not_retrace_and_matches_eager() -> None:
    cov, mean, x = spd(4), RNG.standard_normal(4), RNG.standard_normal((6, 4))

    @tg.jit
    def loss(x: tg.Tensor, mean: tg.Tensor, cov: tg.Tensor) -> tg.Tensor:
        return -stats.multivariate_normal.logpdf(x, mean, cov).sum()

    step = tg.jit(tg.value_and_grad(loss, argnums=(1, 2)))
    want = -st.multivariate_normal.logpdf(x, mean, cov).sum()
    before = tg.counters.trace_count
    for i in range(3):
        out = loss(T(x), T(mean + i), T(cov))
        value, (g_mean, g_cov) = step(T(x), T(mean), T(cov))
    assert tg.counters.trace_count - before == 2, "one trace each, then cache hits"
    close(out, -st.multivariate_normal.logpdf(x, mean + 2, cov).sum(), rtol=1e-12)
    close(value, want, rtol=1e-12)
    np.testing.assert_allclose(g_mean.numpy(), -np.linalg.solve(cov, (x - mean).sum(0)), rtol=1e-10)


def test_loops_compile_once_whatever_the_size() -> None:
    """The factorisation and the solve are loops whose bodies compile once: the kernels launched do not depend on n
    (a loop body counts once, whatever its trip count)."""
    launched = []
    for n in (9, 12):   # (from 8 down the solve is unrolled: test_a_small_triangular_solve_is_one_kernel)
        a = T(spd(n)).realize()
        before = tg.counters.kernel_count
        low = sla.cholesky(a, lower=True).realize()
        sla.solve_triangular(low, a, lower=True).realize()
        launched.append(tg.counters.kernel_count - before)
    assert launched[0] == launched[1]


def test_float32_cholesky_64() -> None:
    a = spd(64).astype(np.float32)
    low = sla.cholesky(tg.asarray(a), lower=True)
    close(low, np.linalg.cholesky(a.astype(np.float64)), rtol=1e-4, atol=1e-5)
    x = sla.cho_solve((low, True), tg.asarray(np.ones(64, np.float32)))
    close(x, np.linalg.solve(a.astype(np.float64), np.ones(64)), rtol=1e-4, atol=1e-6)


@pytest.mark.x64
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_a_small_triangular_solve_is_one_kernel(trans: int, lower: bool, unit: bool) -> None:
    """A solve of 8 unknowns or fewer is unrolled (`_substitute_unrolled`): one kernel storing x once, its rows from
    b's and the rows before them, where the loop rewrote x each step (a Gaussian mixture's 8 x 8 factors against
    8 x 8,192 points: 3.4 -> 0.4 ms). Every triangle, transposed or not, unit diagonal or not, as scipy solves it."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 8, 8)) + 4 * np.eye(8)
    b = rng.standard_normal((3, 8, 50))
    ta, tb = T(a).realize(), T(b).realize()
    before = tg.counters.kernel_count
    x = sla.solve_triangular(ta, tb, trans=trans, lower=lower, unit_diagonal=unit).realize()
    assert tg.counters.kernel_count - before == 1
    want = np.stack([sl.solve_triangular(a[i], b[i], trans=trans, lower=lower, unit_diagonal=unit) for i in range(3)])
    close(x, want, rtol=1e-10, atol=1e-12)
    check_grads(lambda a, b: sla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit), a, b)
