"""tgfx.scipy.stats beyond norm / gamma / beta: the discrete distributions (binom, betabinom, nbinom, geom,
multinomial), the continuous ones (cauchy, chi2, dirichlet, gennorm, gumbel_l / gumbel_r, logistic, pareto,
truncnorm, vonmises, wrapcauchy) and the sample statistics mode, rankdata and sem.

Always run: numpy closed forms (each density written out here), identities that tie a distribution's functions
together (pmfs sum to 1, pdfs integrate to 1, cdf + sf = 1, ppf inverts cdf, logpdf = log pdf), mode / rankdata /
sem against brute-force numpy, `jit` and `vmap`, gradients of log densities in their continuous parameters against
central differences, JAX's edge values, and the errors a user gets. Where scipy is installed, scipy.stats over a
grid; where jax is, jax.scipy.stats itself.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grad import T, check_grads

import tgfx as tg
from tgfx.dtypes import dtypes
from tgfx.scipy import stats

INF, NAN = math.inf, math.nan


def lgamma(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.lgamma, otypes=[np.float64])(x)


def comb_log(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)


def close(got: tg.Tensor, want: np.ndarray, rtol: float = 1e-12, atol: float = 1e-14) -> None:
    """Same shape, NaN and inf where the reference has them, the rest within rtol / atol."""
    g, w = got.numpy().astype(np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg="NaNs differ")
    inf = np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf], err_msg="infinities differ")
    np.testing.assert_allclose(g[~inf], w[~inf], rtol=rtol, atol=atol)


# ---- closed forms in numpy ----
X = np.linspace(-6, 6, 49)
# name: (tgfx function, numpy closed form, float64 arguments)
CLOSED: dict[str, tuple[Callable, Callable, tuple[np.ndarray, ...]]] = {
    "cauchy.logpdf": (stats.cauchy.logpdf, lambda x, l, s: -np.log(np.pi * s * (1 + ((x - l) / s) ** 2)),
                      (X, 0.5, 2.0)),
    "cauchy.cdf": (stats.cauchy.cdf, lambda x, l, s: 0.5 + np.arctan((x - l) / s) / np.pi, (X, 0.5, 2.0)),
    "logistic.logpdf": (stats.logistic.logpdf,
                        lambda x, l, s: -(x - l) / s - 2 * np.log1p(np.exp(-(x - l) / s)) - np.log(s), (X, 0.5, 1.5)),
    "logistic.cdf": (stats.logistic.cdf, lambda x, l, s: 1 / (1 + np.exp(-(x - l) / s)), (X, 0.5, 1.5)),
    "gumbel_r.logpdf": (stats.gumbel_r.logpdf, lambda x, l, s: -np.log(s) - (x - l) / s - np.exp(-(x - l) / s),
                        (X, 0.5, 1.5)),
    "gumbel_r.cdf": (stats.gumbel_r.cdf, lambda x, l, s: np.exp(-np.exp(-(x - l) / s)), (X, 0.5, 1.5)),
    "gumbel_l.logpdf": (stats.gumbel_l.logpdf, lambda x, l, s: -np.log(s) + (x - l) / s - np.exp((x - l) / s),
                        (X, 0.5, 1.5)),
    "gumbel_l.sf": (stats.gumbel_l.sf, lambda x, l, s: np.exp(-np.exp((x - l) / s)), (X, 0.5, 1.5)),
    "pareto.logpdf": (stats.pareto.logpdf,
                      lambda x, b, l, s: np.where(x >= l + s, np.log(b / s) - (b + 1) * np.log(np.maximum(
                          (x - l) / s, 1)), -np.inf), (X, 2.5, -1.0, 1.5)),
    "pareto.sf": (stats.pareto.sf, lambda x, b, l, s: np.minimum(np.maximum((x - l) / s, 1) ** -b, 1),
                  (X, 2.5, -1.0, 1.5)),
    "chi2.logpdf": (stats.chi2.logpdf,
                    lambda x, k: np.where(x < 0, -np.inf, (k / 2 - 1) * np.log(np.maximum(x, 0)) - x / 2
                                          - math.lgamma(k / 2) - k / 2 * np.log(2)), (X, 3.0)),
    "chi2.cdf(k=2)": (stats.chi2.cdf, lambda x, k: np.where(x < 0, 0.0, -np.expm1(-np.maximum(x, 0) / 2)), (X, 2.0)),
    "gennorm.logpdf": (stats.gennorm.logpdf,
                       lambda x, b: np.log(b / 2) - math.lgamma(1 / b) - np.abs(x) ** b, (X, 1.5)),
    "vonmises.logpdf": (stats.vonmises.logpdf,
                        lambda x, k: k * np.cos(x) - np.log(2 * np.pi * np.i0(k)), (X, 2.5)),
    "wrapcauchy.logpdf": (stats.wrapcauchy.logpdf,
                          lambda x, c: np.where((x >= 0) & (x <= 2 * np.pi), np.log(
                              (1 - c * c) / (2 * np.pi * (1 + c * c - 2 * c * np.cos(x)))), -np.inf), (X, 0.4)),
    "truncnorm.logpdf": (stats.truncnorm.logpdf,
                         lambda x, a, b, l, s: np.where(((x - l) / s >= a) & ((x - l) / s <= b), -0.5 * ((x - l) / s)
                                                        ** 2 - np.log(s * np.sqrt(2 * np.pi)) - np.log(
                             0.5 * (math.erf(b / math.sqrt(2)) - math.erf(a / math.sqrt(2)))), -np.inf),
                         (X, -1.0, 2.0, 0.5, 1.5)),
    "geom.logpmf": (stats.geom.logpmf, lambda k, p: np.where(k >= 1, (k - 1) * np.log1p(-p) + np.log(p), -np.inf),
                    (np.arange(-2.0, 12.0), 0.3)),
    "binom.logpmf": (stats.binom.logpmf,
                     lambda k, n, p: np.where((k >= 0) & (k <= n), comb_log(n, np.clip(k, 0, n)) + k * np.log(p)
                                              + (n - k) * np.log1p(-p), -np.inf), (np.arange(-2.0, 12.0), 9.0, 0.3)),
    "nbinom.logpmf": (stats.nbinom.logpmf,
                      lambda k, n, p: np.where(k >= 0, lgamma(np.maximum(k, 0) + n) - math.lgamma(n)
                                               - lgamma(np.maximum(k, 0) + 1) + n * np.log(p) + k * np.log1p(-p),
                                               -np.inf), (np.arange(-2.0, 12.0), 2.5, 0.3)),
    "betabinom.logpmf": (stats.betabinom.logpmf,
                         lambda k, n, a, b: np.where((k >= 0) & (k <= n), comb_log(n, np.clip(k, 0, n)) + lgamma(
                             np.clip(k, 0, n) + a) + lgamma(n - np.clip(k, 0, n) + b) - math.lgamma(n + a + b)
                                                     - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)),
                                                     -np.inf), (np.arange(-2.0, 12.0), 9.0, 1.5, 2.5)),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", list(CLOSED))
def test_matches_closed_forms(name: str) -> None:
    f, ref, args = CLOSED[name]
    with np.errstate(all="ignore"):
        want = ref(*args)
    close(f(*[T(np.asarray(a, np.float64)) for a in args]), want, rtol=1e-11, atol=1e-13)


# ---- identities ----
def _simpson(y: np.ndarray, h: float) -> float:
    return float(h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum()))


@pytest.mark.x64
@settings(max_examples=8)
@given(n=st.integers(0, 30), p=st.floats(0.05, 0.99), a=st.floats(0.2, 5.0), b=st.floats(0.2, 5.0))
def test_pmfs_sum_to_one_and_cdfs_are_their_sums(n: int, p: float, a: float, b: float) -> None:
    k = T(np.arange(0.0, n + 1))
    p, a, b = T(np.array(p)), T(np.array(a)), T(np.array(b))        # Tensors: new values, no recompiles
    binom = stats.binom.pmf(k, float(n), p).numpy()
    np.testing.assert_allclose(binom.sum(), 1.0, rtol=1e-12)
    np.testing.assert_allclose(stats.betabinom.pmf(k, float(n), a, b).numpy().sum(), 1.0, rtol=1e-12)
    assert stats.binom.pmf(T(np.array([-1.0, n + 1.0])), float(n), p).numpy().tolist() == [0.0, 0.0]
    # nbinom and geom: far enough out that the tail is below 1e-13
    tail = T(np.arange(0.0, 3000))
    np.testing.assert_allclose(stats.nbinom.pmf(tail, a, p).numpy().sum(), 1.0, rtol=1e-10)
    np.testing.assert_allclose(stats.geom.pmf(tail + 1, p).numpy().sum(), 1.0, rtol=1e-10)
    # multinomial over all count vectors of two categories is the binomial
    counts = np.stack([np.arange(n + 1), n - np.arange(n + 1)], axis=-1)
    multi = stats.multinomial.pmf(tg.asarray(counts.astype(np.int32)), n, tg.numpy.stack([p, 1 - p]))
    np.testing.assert_allclose(multi.numpy(), binom, rtol=1e-11, atol=1e-300)


@pytest.mark.x64
@settings(max_examples=6)
@given(loc=st.floats(-2, 2), scale=st.floats(0.3, 3.0), shape=st.floats(0.5, 4.0))
def test_densities_integrate_to_their_cdfs(loc: float, scale: float, shape: float) -> None:
    """Simpson's rule of pdf over [x0, x1] = cdf(x1) - cdf(x0); logpdf = log pdf; cdf + sf = 1; ppf inverts cdf."""
    whole = (loc - 3 * scale, loc + 3 * scale)
    lt, st_, sh = T(np.array(loc)), T(np.array(scale)), T(np.array(shape))    # Tensors: new values, no recompiles
    # (distribution, parameters, an interval on which its density is smooth)
    cases = {
        "cauchy": (stats.cauchy, (lt, st_), whole), "logistic": (stats.logistic, (lt, st_), whole),
        "gumbel_r": (stats.gumbel_r, (lt, st_), whole), "gumbel_l": (stats.gumbel_l, (lt, st_), whole),
        "truncnorm": (stats.truncnorm, (-1.0, sh, lt, st_), (loc - 0.99 * scale, loc + 0.99 * shape * scale)),
        "chi2": (stats.chi2, (sh + 2, lt, st_), (loc + 0.5 * scale, loc + 6 * scale)),
        "pareto": (stats.pareto, (sh, lt - 4 * st_, st_), (loc - 2.99 * scale, loc + 3 * scale)),
    }
    for name, (dist, params, (lo, hi)) in cases.items():
        xs = np.linspace(lo, hi, 2001)
        h = xs[1] - xs[0]
        pdf = dist.pdf(T(xs), *params).numpy()
        cdf = dist.cdf(T(xs[[0, -1]]), *params).numpy()
        np.testing.assert_allclose(_simpson(pdf, h), cdf[1] - cdf[0], rtol=1e-6, atol=1e-9, err_msg=name)
        np.testing.assert_allclose(np.exp(dist.logpdf(T(xs), *params).numpy()), pdf, rtol=1e-12, err_msg=name)
        if hasattr(dist, "sf"):
            np.testing.assert_allclose(dist.cdf(T(xs), *params).numpy() + dist.sf(T(xs), *params).numpy(), 1.0,
                                       rtol=1e-12, err_msg=name)
        if hasattr(dist, "ppf"):
            q = np.linspace(0.05, 0.95, 7)
            np.testing.assert_allclose(dist.cdf(dist.ppf(T(q), *params), *params).numpy(), q, rtol=1e-10,
                                       err_msg=name)
    # the wrapped and the circular ones integrate to 1 over [0, 2 pi] / [-pi, pi]
    circle = np.linspace(0, 2 * np.pi, 2001)
    np.testing.assert_allclose(_simpson(stats.wrapcauchy.pdf(T(circle), sh / 5).numpy(), circle[1] - circle[0]),
                               1.0, rtol=1e-6)
    np.testing.assert_allclose(_simpson(stats.vonmises.pdf(T(circle - np.pi), sh).numpy(), circle[1] - circle[0]),
                               1.0, rtol=1e-8)
    line = np.linspace(0.5, 6, 2001)                   # away from the cusp at 0
    ends = stats.gennorm.cdf(T(line[[0, -1]]), sh).numpy()
    np.testing.assert_allclose(_simpson(stats.gennorm.pdf(T(line), sh).numpy(), line[1] - line[0]),
                               ends[1] - ends[0], rtol=1e-8)
    np.testing.assert_allclose(stats.gennorm.cdf(T(np.array([-2.0, 2.0])), sh).numpy().sum(), 1.0, rtol=1e-12)


@pytest.mark.x64
def test_dirichlet_against_the_beta_and_the_simplex() -> None:
    """Two categories are the beta distribution; x may leave out its last row; off the simplex is -inf."""
    a, b = 2.5, 1.5
    x = np.linspace(0.05, 0.95, 7)
    want = (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    alpha = T(np.array([a, b]))
    close(stats.dirichlet.logpdf(T(np.stack([x, 1 - x])), alpha), want, rtol=1e-12)
    close(stats.dirichlet.logpdf(T(x[None]), alpha), want, rtol=1e-12)
    off = np.array([[0.5, 0.0, 1.2], [0.5, 1.0, -0.2], [0.1, 0.0, 0.0]])
    assert stats.dirichlet.logpdf(T(off), T(np.array([1.0, 2.0, 3.0]))).numpy().tolist() == [-INF] * 3


@pytest.mark.x64
def test_jax_edge_values() -> None:
    """The values at and beyond the support and for invalid parameters, as jax.scipy.stats has them."""
    k = T(np.array([-1.0, 0.0, 1.0, 2.5, 3.0, 4.0]))
    close(stats.binom.logpmf(k, 3.0, 0.0), [-INF, 0.0, -INF, -INF, -INF, -INF])
    close(stats.binom.logpmf(k, 3.0, 1.0), [-INF, -INF, -INF, -INF, 0.0, -INF])
    close(stats.binom.logpmf(T(np.array([0.0])), 0.0, 0.5), [0.0])
    close(stats.betabinom.logpmf(T(np.array([0.0, 1.0])), 1.0, 1.0, -1.0), [NAN, NAN])
    close(stats.betabinom.logpmf(T(np.array([1.7])), 2.0, 1.0, 1.0), [-math.log(3)])     # k is floored
    close(stats.geom.logpmf(T(np.array([0.0, 1.0, 2.0])), 1.0), [-INF, 0.0, -INF])
    close(stats.chi2.logpdf(T(np.array([-1.0, 0.0, INF])), 2.0), [-INF, -math.log(2), -INF])
    close(stats.chi2.cdf(T(np.array([-1.0, 0.0, INF])), 3.0), [0.0, 0.0, 1.0])
    close(stats.pareto.cdf(T(np.array([0.5, 1.0, INF])), 2.0), [0.0, 0.0, 1.0])
    close(stats.pareto.ppf(T(np.array([-0.1, 0.0, 1.0, 1.1])), 2.0), [NAN, 1.0, INF, NAN])
    close(stats.gumbel_r.logpdf(T(np.array([0.0, 1.0])), 0.0, T(np.array([0.0, -1.0]))), [NAN, NAN])
    close(stats.gumbel_l.ppf(T(np.array([0.0, 0.5, 1.0])), 0.0, 1.0), [NAN, math.log(math.log(2)), NAN])
    close(stats.vonmises.logpdf(T(np.array([0.0, 0.0])), T(np.array([0.0, -1.0]))), [NAN, NAN])
    close(stats.wrapcauchy.logpdf(T(np.array([-0.1, 1.0, 7.0, 1.0])), T(np.array([0.5, 0.0, 0.5, 1.0]))),
          [-INF, NAN, -INF, NAN])
    close(stats.truncnorm.logpdf(T(np.array([0.0, 0.0])), T(np.array([1.0, 1.0])), T(np.array([1.0, 0.5]))),
          [NAN, NAN])
    close(stats.truncnorm.cdf(T(np.array([-2.0, -1.0, 1.0, 2.0])), -1.0, 1.0), [0.0, 0.0, 1.0, 1.0])
    # far in a tail, the mass comes from log_ndtr's difference: finite where 1 - ndtr rounds to 0
    def mills(z: float) -> float:            # P(Z > z) / pdf(z), asymptotically (error below 1e-13 at z = 39)
        return (1 - 1 / z ** 2 + 3 / z ** 4 - 15 / z ** 6 + 105 / z ** 8) / z

    want = -(40 ** 2 - 39 ** 2) / 2 - math.log(mills(39)) - math.log1p(-math.exp(-(41 ** 2 - 39 ** 2) / 2)
                                                                         * mills(41) / mills(39))
    close(stats.truncnorm.logpdf(T(np.array([40.0])), 39.0, 41.0), [want], rtol=1e-10)
    assert np.isfinite(stats.logistic.logpdf(T(np.array([-800.0, 800.0]))).numpy()).all()
    close(stats.logistic.ppf(T(np.array([-0.1, 0.0, 1.0])), 0.0, 1.0), [NAN, -INF, INF])


# ---- mode, rankdata, sem against numpy ----
def np_rank(a: np.ndarray, method: str) -> np.ndarray:
    a = a.ravel()
    if np.isnan(a).any():
        return np.full(a.shape, np.nan)
    order = np.argsort(a, kind="stable")
    ordinal = np.empty(a.size)
    ordinal[order] = np.arange(1, a.size + 1)
    low = np.array([(a < v).sum() + 1 for v in a], np.float64)
    high = np.array([(a <= v).sum() for v in a], np.float64)
    dense = np.searchsorted(np.unique(a), a) + 1.0
    return {"ordinal": ordinal, "min": low, "max": high, "average": (low + high) / 2, "dense": dense}[method]


@settings(max_examples=12)
@given(shape=st.sampled_from([(7,), (4, 5), (3, 2, 4)]), seed=st.integers(0, 2 ** 16), nan=st.booleans(),
       method=st.sampled_from(["average", "min", "max", "dense", "ordinal"]))
def test_mode_rankdata_sem_against_numpy(shape: tuple[int, ...], seed: int, nan: bool, method: str) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, shape).astype(np.float32)
    if nan:
        a.flat[rng.integers(0, a.size)] = np.nan
    axis = int(rng.integers(0, len(shape)))
    got = stats.rankdata(tg.asarray(a), method, axis=axis).numpy()
    want = np.apply_along_axis(np_rank, axis, a, method)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(stats.rankdata(tg.asarray(a), method).numpy(), np_rank(a, method))
    moved = np.moveaxis(a, axis, -1).reshape(-1, a.shape[axis])
    modes, counts = [], []
    for row in moved:
        vals, cnt = np.unique(np.where(np.isnan(row), np.inf, row), return_counts=True)   # NaN: one value, last
        modes.append(vals[np.argmax(cnt)])
        counts.append(cnt.max())
    out_shape = tuple(s for i, s in enumerate(shape) if i != axis)
    m = stats.mode(tg.asarray(a), axis=axis)
    np.testing.assert_array_equal(np.where(np.isnan(m.mode.numpy()), np.inf, m.mode.numpy()),
                                  np.array(modes).reshape(out_shape))
    np.testing.assert_array_equal(m.count.numpy(), np.array(counts).reshape(out_shape))
    assert m.count.dtype == dtypes.int32
    np.testing.assert_allclose(stats.sem(tg.asarray(a), axis=axis).numpy(),
                               np.std(a, axis=axis, ddof=1) / np.sqrt(shape[axis]), rtol=1e-5)
    np.testing.assert_allclose(stats.sem(tg.asarray(a), axis=axis, nan_policy="omit", ddof=0).numpy(),
                               np.nanstd(a, axis=axis) / np.sqrt((~np.isnan(a)).sum(axis)), rtol=1e-5)


def test_mode_keepdims_axis_none_and_empty() -> None:
    a = tg.asarray(np.array([[1.0, 2.0, 2.0], [3.0, 3.0, 1.0]], np.float32))
    m = stats.mode(a, axis=1, keepdims=True)
    assert m.mode.shape == (2, 1) and m.mode.numpy().ravel().tolist() == [2.0, 3.0]
    m = stats.mode(a, axis=None)
    assert m.mode.shape == () and float(m.mode.numpy()) == 1.0 and int(m.count.numpy()) == 2      # ties: smallest
    assert stats.mode(a, axis=None, keepdims=True).mode.shape == (1, 1)
    empty = stats.mode(tg.asarray(np.zeros((0, 3), np.float32)))
    assert np.isnan(empty.mode.numpy()).all() and empty.count.numpy().tolist() == [0.0, 0.0, 0.0]
    assert stats.rankdata(tg.asarray(np.array([3, 1, 3], np.int32)), "min").dtype == dtypes.float32


# ---- transformations ----
def test_jit_and_vmap_match_eager() -> None:
    traces = []

    def f(x: tg.Tensor, p: tg.Tensor) -> tg.Tensor:
        traces.append(1)
        return (stats.binom.logpmf(x, 6.0, p) + stats.truncnorm.logcdf(x, -1.0, 4.0) + stats.chi2.logsf(x, 3.0)
                + stats.gumbel_r.logsf(x) + stats.rankdata(x))

    x = tg.asarray(np.array([0.0, 1.0, 2.0, 3.0], np.float32))
    eager = f(x, tg.asarray(np.float32(0.3))).numpy()
    jf = tg.jit(f)
    np.testing.assert_allclose(jf(x, tg.asarray(np.float32(0.3))).numpy(), eager, rtol=1e-6)
    jf(x, tg.asarray(np.float32(0.6)))
    assert len(traces) == 2                                    # once eagerly, once under jit: a new p is no retrace
    ps = tg.asarray(np.array([0.2, 0.5], np.float32))
    rows = tg.vmap(lambda p: stats.nbinom.logpmf(x, 2.5, p) + stats.mode(x + p).mode)(ps)
    want = np.stack([stats.nbinom.logpmf(x, 2.5, p).numpy() + 0.0 + p for p in (0.2, 0.5)])
    np.testing.assert_allclose(rows.numpy(), want, rtol=1e-6)


# ---- gradients ----
# name: (log density of its continuous arguments, float64 inputs inside the support)
GRADS: dict[str, tuple[Callable, tuple[np.ndarray, ...]]] = {
    "cauchy": (lambda x, l, s: stats.cauchy.logpdf(x, l, s), (np.array([-1.0, 0.3, 2.0]), np.array(0.2),
                                                             np.array(1.5))),
    "logistic": (lambda x, s: stats.logistic.logpdf(x, 0.1, s) + stats.logistic.sf(x, 0.1, s),
                 (np.array([-1.0, 0.3, 2.0]), np.array(1.5))),
    "gumbel": (lambda x, s: stats.gumbel_r.logsf(x, 0.2, s) + stats.gumbel_l.logcdf(x, 0.2, s),
               (np.array([-1.0, 0.3, 2.0]), np.array(1.5))),
    "chi2": (lambda x, k: stats.chi2.logpdf(x, k) + stats.chi2.cdf(x, k), (np.array([0.5, 1.3, 4.0]), np.array(3.5))),
    "pareto": (lambda x, b, s: stats.pareto.logpdf(x, b, 0.0, s) + stats.pareto.logcdf(x, b, 0.0, s),
               (np.array([1.5, 2.0, 4.0]), np.array(2.5), np.array(1.2))),
    "gennorm": (lambda x, b: stats.gennorm.logpdf(x, b) + stats.gennorm.cdf(x, b),
                (np.array([-1.0, 0.3, 2.0]), np.array(1.7))),
    "vonmises_wrapcauchy": (lambda x, k, c: stats.vonmises.logpdf(x, k) + stats.wrapcauchy.logpdf(x, c),
                            (np.array([0.4, 1.3, 4.0]), np.array(2.5), np.array(0.4))),
    "truncnorm": (lambda x, a, b, l, s: stats.truncnorm.logpdf(x, a, b, l, s) + stats.truncnorm.logcdf(x, a, b, l, s),
                  (np.array([-0.5, 0.3, 1.5]), np.array(-1.2), np.array(1.1), np.array(0.2), np.array(1.3))),
    "discrete": (lambda p, n, a: stats.binom.logpmf(T(np.array([0.0, 2.0, 5.0])), 5.0, p)
                 + stats.nbinom.logpmf(T(np.array([0.0, 2.0, 5.0])), n, p)
                 + stats.betabinom.logpmf(T(np.array([0.0, 2.0, 5.0])), 5.0, a, n)
                 + stats.geom.logpmf(T(np.array([1.0, 2.0, 5.0])), p),
                 (np.array(0.35), np.array(2.5), np.array(1.7))),
    "dirichlet_multinomial": (lambda x, alpha, p: stats.dirichlet.logpdf(x, alpha)
                              + stats.multinomial.logpmf(tg.asarray(np.array([1, 2, 0], np.int32)), 3, p),
                              (np.array([[0.2, 0.5], [0.3, 0.1]]), np.array([1.5, 2.0, 0.7]),
                               np.array([0.2, 0.5, 0.3]))),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", list(GRADS))
def test_gradients_match_differences(name: str) -> None:
    f, xs = GRADS[name]
    check_grads(f, *xs, rtol=1e-6, atol=1e-8)


@pytest.mark.x64
def test_gradients_are_finite_at_the_support_edges() -> None:
    """Masked branches get safe inputs: no NaN leaks into the gradient where the value is -inf or a constant."""
    p = T(np.array(0.4))
    g = tg.grad(lambda q: stats.binom.logpmf(T(np.array([-1.0, 7.0, 2.0])), 3.0, q).sum())(p)
    np.testing.assert_allclose(g.numpy(), 2 / 0.4 - 1 / 0.6, rtol=1e-12)
    g = tg.grad(lambda s: stats.pareto.logcdf(T(np.array([0.5, 2.0])), 2.0, 0.0, s).sum())(T(np.array(1.0)))
    assert np.isfinite(g.numpy())
    g = tg.grad(lambda loc: stats.truncnorm.logcdf(T(np.array([-3.0, 0.0, 3.0])), -1.0, 1.0, loc).sum())(
        T(np.array(0.0)))
    assert np.isfinite(g.numpy())


# ---- errors ----
def test_errors_name_the_argument() -> None:
    x = tg.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match=r"multinomial.logpmf: x and n must be of integer type; got x.dtype=float32"):
        stats.multinomial.logpmf(x, 3, tg.asarray([0.5, 0.5]))
    with pytest.raises(ValueError, match=r"dirichlet.logpdf: `alpha` must be one-dimensional; got alpha.shape=\(1, 2"):
        stats.dirichlet.logpdf(x, tg.asarray([[1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"dirichlet.logpdf: `x` must have .* x.shape=\(2,\), alpha.shape=\(4,\)"):
        stats.dirichlet.logpdf(x, tg.asarray([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(ValueError, match="mode: illegal nan_policy value 'skip'"):
        stats.mode(x, nan_policy="skip")
    with pytest.raises(NotImplementedError, match="mode: nan_policy='omit' is not implemented"):
        stats.mode(x, nan_policy="omit")
    with pytest.raises(NotImplementedError, match="rankdata: nan_policy='raise'"):
        stats.rankdata(x, nan_policy="raise")
    with pytest.raises(ValueError, match="rankdata: unknown method 'mean'"):
        stats.rankdata(x, "mean")
    with pytest.raises(ValueError, match="mode: axis 2 is out of range for an array of 1 dimension"):
        stats.mode(x, axis=2)
    with pytest.raises(ValueError, match="sem: nan_policy 'raise' is not supported"):
        stats.sem(x, nan_policy="raise")
    with pytest.raises(ValueError, match=r"multinomial.logpmf: .* n.dtype=float"):
        stats.multinomial.logpmf(tg.asarray([1, 2]), 3.0, tg.asarray([0.5, 0.5]))


# ---- scipy.stats and jax.scipy.stats themselves ----
R = np.random.default_rng(0)
U = R.uniform
KS = np.arange(-1.0, 12.0)
# (distribution, function, scipy arguments (x first), tgfx arguments if they differ)
SCIPY_CASES = [
    ("binom", "logpmf", (KS, 10.0, 0.35)), ("betabinom", "logpmf", (KS, 10.0, 1.3, 2.7)),
    ("nbinom", "logpmf", (KS, 3.5, 0.35)), ("geom", "logpmf", (KS, 0.35)),
    ("cauchy", "logsf", (U(-9, 9, 30), 0.5, 2.0)), ("cauchy", "isf", (U(0, 1, 30), 0.5, 2.0)),
    ("chi2", "logpdf", (U(0.01, 20, 30), 4.5, -0.5, 1.3)), ("chi2", "sf", (U(0, 20, 30), 4.5)),
    ("gennorm", "cdf", (U(-3, 3, 30), 1.7)), ("gumbel_l", "logcdf", (U(-9, 3, 30), 0.5, 2.0)),
    ("gumbel_r", "logsf", (U(-3, 9, 30), 0.5, 2.0)), ("gumbel_r", "ppf", (U(0.01, 0.99, 30), 0.5, 2.0)),
    ("logistic", "isf", (U(0.01, 0.99, 30), 0.5, 2.0)), ("pareto", "logsf", (U(1, 9, 30), 2.5, -0.5, 1.3)),
    ("pareto", "ppf", (U(0, 1, 30), 2.5, -0.5, 1.3)), ("truncnorm", "logsf", (U(-1, 2, 30), -1.0, 2.0, 0.3, 1.2)),
    ("truncnorm", "cdf", (U(8, 12, 30), 8.0, 12.0)), ("vonmises", "logpdf", (U(-3, 3, 30), 30.0)),
    ("wrapcauchy", "logpdf", (U(0, 6, 30), 0.7)),
]


@pytest.mark.x64
def test_matches_scipy() -> None:
    ss = pytest.importorskip("scipy.stats")
    for dist, fn, args in SCIPY_CASES:
        want = getattr(getattr(ss, dist), fn)(*args)
        close(getattr(getattr(stats, dist), fn)(*[T(np.asarray(a, np.float64)) for a in args]), want, rtol=1e-9,
              atol=1e-12)
    x = U(0.05, 1, (3, 5))
    x /= x.sum(0)
    alpha = np.array([0.7, 2.0, 3.5])
    close(stats.dirichlet.logpdf(T(x), T(alpha)), ss.dirichlet.logpdf(x, alpha), rtol=1e-11)
    counts = np.array([[1, 3, 2], [0, 6, 0]])
    close(stats.multinomial.logpmf(tg.asarray(counts), 6, T(np.array([0.2, 0.5, 0.3]))),
          ss.multinomial.logpmf(counts, 6, [0.2, 0.5, 0.3]), rtol=1e-12)
    a = R.integers(0, 5, (4, 6)).astype(np.float64)
    for method in ("average", "min", "max", "dense", "ordinal"):
        close(stats.rankdata(T(a), method, axis=1), ss.rankdata(a, method, axis=1))
    close(stats.sem(T(a), axis=None), ss.sem(a, axis=None), rtol=1e-12)


@pytest.mark.x64
def test_matches_jax() -> None:
    jax = pytest.importorskip("jax")
    js = pytest.importorskip("jax.scipy.stats")
    a = R.integers(0, 3, (5, 4)).astype(np.float64)
    with jax.enable_x64(True):      # one compilation for every case
        wants = jax.jit(lambda arrays, a: ([getattr(getattr(js, d), f)(*args) for (d, f, _), args in zip(
            SCIPY_CASES, arrays, strict=True)], js.mode(a, axis=1)))([c[2] for c in SCIPY_CASES], a)
    for (dist, fn, args), want in zip(SCIPY_CASES, wants[0], strict=True):
        # jax's betaln differs from scipy's (and ours) by up to 1e-7 relative
        rtol = 1e-6 if dist == "betabinom" else 1e-9
        close(getattr(getattr(stats, dist), fn)(*[T(np.asarray(x, np.float64)) for x in args]), np.asarray(want),
              rtol=rtol, atol=1e-12)
    m = stats.mode(T(a), axis=1)
    close(m.mode, np.asarray(wants[1].mode))
    np.testing.assert_array_equal(m.count.numpy(), np.asarray(wants[1].count))


@pytest.mark.parametrize("fn", ["cdf", "sf", "logcdf", "logsf"])
def test_gamma_and_beta_cdfs_against_scipy(fn: str) -> None:
    ss = pytest.importorskip("scipy.stats")
    x = np.array([-0.5, 0.0, 0.3, 1.0, 2.5, 7.0, 30.0], np.float32)
    got = getattr(stats.gamma, fn)(tg.asarray(x), 2.5, 0.1, 1.5)
    np.testing.assert_allclose(got.numpy(), getattr(ss.gamma, fn)(x, 2.5, 0.1, 1.5), rtol=2e-5, atol=1e-6)
    xb = np.array([-0.1, 0.0, 0.2, 0.5, 0.9, 1.0, 1.3], np.float32)
    got = getattr(stats.beta, fn)(tg.asarray(xb), 2.0, 3.5)
    np.testing.assert_allclose(got.numpy(), getattr(ss.beta, fn)(xb, 2.0, 3.5), rtol=2e-5, atol=1e-6)


def test_poisson_cdf_and_expon_log_tails_against_scipy() -> None:
    ss = pytest.importorskip("scipy.stats")
    k = np.array([-1.0, 0.0, 1.0, 2.5, 4.0, 10.0], np.float32)
    np.testing.assert_allclose(stats.poisson.cdf(tg.asarray(k), 3.0).numpy(), ss.poisson.cdf(k, 3.0), rtol=2e-5)
    np.testing.assert_allclose(stats.poisson.cdf(tg.asarray(k), 3.0, 1.0).numpy(), ss.poisson.cdf(k, 3.0, 1.0),
                               rtol=2e-5)
    x = np.array([-0.5, 0.2, 0.3, 1.0, 50.0, 500.0], np.float32)
    np.testing.assert_allclose(stats.expon.logcdf(tg.asarray(x), 0.1, 2.0).numpy(), ss.expon.logcdf(x, 0.1, 2.0),
                               rtol=2e-5, atol=1e-30)   # log(1 - 1e-109) is -0.0 in float32
    # far in the tail the log survival is exact where sf itself underflows to 0 in float32
    np.testing.assert_allclose(stats.expon.logsf(tg.asarray(x), 0.1, 2.0).numpy(), ss.expon.logsf(x, 0.1, 2.0),
                               rtol=2e-5)


@pytest.mark.x64
def test_gamma_and_beta_log_cdfs_gradients() -> None:
    check_grads(lambda v: stats.gamma.logcdf(v, 2.5), np.array([0.5, 2.0, 4.0]), rtol=1e-5, atol=1e-7)
    check_grads(lambda v: stats.beta.logsf(v, 2.0, 3.5), np.array([0.3, 0.6]), rtol=1e-5, atol=1e-7)
