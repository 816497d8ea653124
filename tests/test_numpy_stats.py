"""Statistics (tgfx/numpy/_stats.py) against numpy: NaN-ignoring reductions, quantiles and medians, weighted
averages, covariance, histograms, bincount and digitize; under jit and vmap, their gradients, and their errors.

Where JAX's answer differs from numpy's (an all-NaN nanargmax is -1, bincount counts negative values in bin 0,
histogram counts are floats), the test says so and checks JAX's; `test_matches_jax` compares with jax when installed.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from helpers import check_vmap, close
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
import tgfx.numpy as tnp

Axis = int | tuple[int, ...] | None
# numpy's default int64 and float64 inputs become int32 and float32 without x64, as in JAX (which warns too)
pytestmark = pytest.mark.filterwarnings("ignore:tgfx.*is not enabled:UserWarning")


def np_quiet(fn: Any, *args: Any, **kw: Any) -> Any:
    """numpy's answer without its all-NaN-slice and degrees-of-freedom warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kw)


@st.composite
def nan_case(draw: Any, min_side: int = 1) -> tuple[np.ndarray, Axis, bool]:
    """A float32 array of up to 3 axes with some NaNs (maybe whole slices of them), an axis and keepdims."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=min_side, max_side=4))
    finite = st.floats(-10, 10, width=32, allow_subnormal=False)
    x = draw(hnp.arrays(np.float32, shape, elements=st.one_of(finite, finite, st.just(np.nan))))
    nd = x.ndim
    axis = draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                          st.lists(st.integers(0, nd - 1), unique=True, min_size=1, max_size=nd).map(tuple)))
    return x, axis, draw(st.booleans())


# ---- NaN-ignoring reductions ----
NAN_REDUCTIONS = ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd"]


@pytest.mark.parametrize("name", NAN_REDUCTIONS)
@settings(max_examples=12)
@given(case=nan_case())
def test_nan_reductions(name: str, case: tuple[np.ndarray, Axis, bool]) -> None:
    x, axis, keepdims = case
    want = np_quiet(getattr(np, name), x.astype(np.float64), axis=axis, keepdims=keepdims)
    scale = float(np.nanmax(np.abs(x), initial=1.0)) ** (4 if name == "nanprod" else 2)
    close(getattr(tnp, name)(x, axis=axis, keepdims=keepdims), want, rtol=1e-4, atol=1e-5 * scale, dtype=np.float32)


def test_nan_reductions_where_initial_ddof() -> None:
    x = np.array([[1.0, np.nan, 3.0, 4.0], [np.nan, np.nan, np.nan, 2.0], [5.0, -1.0, 0.5, np.nan]], np.float32)
    w = np.array([[True, True, False, True], [True, False, True, False], [False, True, True, True]])
    close(tnp.nansum(x, axis=1, where=w), np.nansum(x, axis=1, where=w))
    close(tnp.nanprod(x, axis=0, where=w, initial=2.0), np.nanprod(x, axis=0, where=w, initial=2.0))
    close(tnp.nansum(x, initial=10.0), np.nansum(x) + 10.0)
    close(tnp.nanmax(x, axis=1, where=w, initial=-7.0), np.nanmax(x, axis=1, where=w, initial=-7.0))
    close(tnp.nanmin(x, axis=0, initial=0.0), np.nanmin(x, axis=0, initial=0.0))
    close(tnp.nanmean(x, axis=1, where=w), np_quiet(np.nanmean, x, axis=1, where=w))
    close(tnp.nanvar(x, axis=1, ddof=1, where=w), np_quiet(np.nanvar, x, axis=1, ddof=1, where=w))
    close(tnp.nanstd(x, axis=0, ddof=2), np_quiet(np.nanstd, x, axis=0, ddof=2))  # no dof left: NaN, as numpy
    m = np.zeros((3, 1), np.float32)
    close(tnp.nanvar(x, axis=1, mean=m), np_quiet(np.nanvar, x, axis=1, mean=m))
    for name in ("nansum", "nanmean", "nanvar"):  # integers: nothing to ignore, float results for mean and var
        xi = np.arange(12, dtype=np.int32).reshape(3, 4)
        close(getattr(tnp, name)(xi, axis=0), getattr(np, name)(xi, axis=0), dtype=np.int32 if name == "nansum"
              else np.float32)
    # half floats accumulate in float32: 200^2 + 200^2 would overflow float16, the variance 200^2 does not
    h = np.array([[-200.0, 200.0, np.nan], [0.01, 0.03, 0.02]], np.float16)
    close(tnp.nanvar(h, axis=1), np.nanvar(h.astype(np.float64), axis=1), rtol=1e-3, dtype=np.float16)


def test_nanmean_of_integers_is_mean() -> None:
    """Integers hold no NaN: nanmean is mean, as JAX's, so an integer dtype= sums in that dtype and wraps as numpy's
    (tgfx summed int8 in float32 and cast the mean: 254 for numpy's and JAX's 126)."""
    x = np.array([[-1, -3, 100], [-3, -1, 100]], np.int8)
    for dtype in ("uint8", "int8", "float16"):
        close(tnp.nanmean(x, axis=0, dtype=dtype), np.nanmean(x, axis=0, dtype=dtype), dtype=np.dtype(dtype))


@settings(max_examples=15)
@given(case=nan_case())
def test_nanargmax_nanargmin(case: tuple[np.ndarray, Axis, bool]) -> None:
    x, axis, keepdims = case
    axis = axis if not isinstance(axis, tuple) else axis[0]
    for name in ("nanargmax", "nanargmin"):
        got = getattr(tnp, name)(x, axis=axis, keepdims=keepdims)
        all_nan = np.all(np.isnan(x), axis=axis, keepdims=keepdims)
        safe = np.where(np.isnan(x), np.inf if name == "nanargmin" else -np.inf, x)
        # numpy raises on an all-NaN slice; JAX (and tgfx) answer -1 there
        want = np.where(all_nan, -1, getattr(np, name[3:])(safe, axis=axis, keepdims=keepdims))
        close(got, want, dtype=np.int32)
    # the first non-NaN extreme, also where it is an infinity next to a NaN (numpy's answer)
    assert tnp.nanargmax(np.array([np.nan, -np.inf, -np.inf], np.float32)).item() == 1


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_nancumsum_nancumprod(axis: int | None) -> None:
    x = np.array([[1.5, np.nan, 2.0], [np.nan, np.nan, -1.0]], np.float32)
    close(tnp.nancumsum(x, axis=axis), np.nancumsum(x, axis=axis), dtype=np.float32)
    close(tnp.nancumprod(x, axis=axis), np.nancumprod(x, axis=axis), dtype=np.float32)
    close(tnp.nancumsum(np.array([True, False, True]), axis=axis if axis != 1 else 0), [1, 1, 2], dtype=np.int32)


def test_ptp() -> None:
    x = np.array([[4, 9, -3], [2, 5, 2]], np.int32)
    close(tnp.ptp(x), np.ptp(x), dtype=np.int32)
    close(tnp.ptp(x, axis=1, keepdims=True), np.ptp(x, axis=1, keepdims=True))
    f = np.array([[0.5, -2.0], [3.0, 1.0]], np.float32)
    close(tnp.ptp(f, axis=0), np.ptp(f, axis=0), dtype=np.float32)


# ---- quantiles ----
METHODS = ["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf"]   # jnp.quantile's
# q * (n - 1) is never exactly k + 1/2 for these q and the slice lengths drawn: "nearest" rounds a tie down in JAX
# and to an even index in numpy
QS = [0.0, 0.13, 0.37, 0.81, 1.0]


@settings(max_examples=20)
@given(case=nan_case(), q=st.lists(st.sampled_from(QS), min_size=1, max_size=3), scalar_q=st.booleans(),
       method=st.sampled_from(METHODS))
def test_quantile_methods(case: tuple[np.ndarray, Axis, bool], q: list[float], scalar_q: bool, method: str) -> None:
    x, axis, keepdims = case
    qa = np.float32(q[0]) if scalar_q else np.array(q, np.float32)
    want = np_quiet(np.nanquantile, x, qa, axis=axis, method=method, keepdims=keepdims)
    close(tnp.nanquantile(x, qa, axis=axis, method=method, keepdims=keepdims), want, dtype=np.float32)
    close(tnp.nanpercentile(x, qa * 100, axis=axis, method=method, keepdims=keepdims), want, rtol=1e-4)
    # without nan-: a slice holding a NaN gives NaN, the others the same quantiles
    want = np.quantile(x, qa, axis=axis, method=method, keepdims=keepdims)
    close(tnp.quantile(x, qa, axis=axis, method=method, keepdims=keepdims), want, dtype=np.float32)
    close(tnp.percentile(x, qa * 100, axis=axis, method=method, keepdims=keepdims), want, rtol=1e-4)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
def test_median_nanmedian(axis: Axis) -> None:
    x = np.random.default_rng(3).integers(-20, 20, (4, 5, 6)).astype(np.float32)
    close(tnp.median(x, axis=axis), np.median(x, axis=axis), dtype=np.float32)
    x[1, 2, :] = np.nan
    x[0, 0, 0] = np.nan
    close(tnp.median(x, axis=axis, keepdims=True), np.median(x, axis=axis, keepdims=True))
    close(tnp.nanmedian(x, axis=axis), np_quiet(np.nanmedian, x, axis=axis))
    xi = np.array([[3, 1, 2, 7], [9, 8, 5, 5]], np.int32)  # integers: float results
    close(tnp.median(xi, axis=1), np.median(xi, axis=1), dtype=np.float32)


@pytest.mark.parametrize("method", METHODS)
def test_quantile_each_method(method: str) -> None:
    x = np.array([[4.0, -1.0, 2.5, 7.0, 0.0], [1.0, np.nan, 3.0, -2.0, 6.0]], np.float32)
    q = np.array([0.0, 0.13, 0.37, 0.81, 1.0], np.float32)
    close(tnp.quantile(x, q, axis=1, method=method), np.quantile(x, q, axis=1, method=method))
    close(tnp.nanquantile(x, q, axis=1, method=method), np.nanquantile(x, q, axis=1, method=method))


def test_quantile_inverted_cdf_and_weights() -> None:
    # numpy's (and JAX's) method="inverted_cdf", the only one taking weights=: the first sorted element whose
    # cumulative weight reaches q of the total. It raised ValueError
    assert tnp.quantile(np.float32([1, 2, 3, 4, 10]), 0.3, method="inverted_cdf").item() == 2.0
    x = np.array([[4.0, -1.0, 2.5, 7.0, 0.0], [1.0, 0.5, 3.0, -2.0, 6.0]], np.float32)
    q = np.array([0.0, 0.13, 0.37, 0.81, 1.0], np.float32)
    w = np.float32([1.0, 3.0, 0.5, 2.0, 1.0])
    want = np.quantile(x, q, axis=1, method="inverted_cdf", weights=np.broadcast_to(w, x.shape))
    for f in (tnp.quantile, tg.jit(tnp.quantile, static_argnames=("axis", "method"))):
        close(f(x, q, axis=1, method="inverted_cdf", weights=w), want, dtype=np.float32)
    close(tnp.percentile(x, q * 100, axis=(0, 1), method="inverted_cdf", weights=np.tile(w, (2, 1))),
          np.percentile(x, q * 100, axis=(0, 1), method="inverted_cdf", weights=np.tile(w, (2, 1))))
    # the gradient flows to the element each quantile selects, as jax.grad's
    g = tg.grad(lambda v: tnp.sum(tnp.quantile(v, q, axis=1, method="inverted_cdf", weights=w)))(tg.asarray(x))
    hits = np.zeros_like(x)
    for k in range(2):
        for v in want[:, k]:
            hits[k, np.flatnonzero(x[k] == v)[0]] += 1
    close(g, hits)
    # a negative or NaN weight makes the slice's quantiles NaN, as JAX's; NaN data weigh nothing in nanquantile
    close(tnp.quantile(x, 0.5, axis=1, method="inverted_cdf", weights=np.float32([[1, -1, 1, 1, 1], [1] * 5])),
          np.float32([np.nan, 1.0]))
    xn = x.copy()
    xn[1, 2] = np.nan
    close(tnp.nanquantile(xn, q, axis=1, method="inverted_cdf"), np_quiet(np.nanquantile, xn, q, axis=1,
                                                                           method="inverted_cdf"))


def test_quantile_long_rows() -> None:
    """Slices long enough to sort by the bitonic network, not by counting ranks."""
    x = np.random.default_rng(4).standard_normal((2, 2500)).astype(np.float32)
    x[0, ::7] = np.nan
    q = np.array([0.01, 0.5, 0.99], np.float32)
    close(tnp.nanquantile(x, q, axis=1), np.nanquantile(x, q, axis=1))


def test_quantiles_of_long_rows_select_their_order_statistics_without_sorting() -> None:
    """A median of 65,536 values (SVGD's bandwidth) sorted the row by a 136-pass bitonic network (17 ms); the two
    order statistics it reads are selected instead, by a 32-step bitwise search (about 0.4 ms). The same values as a
    stable sort gives, -0.0 equal to 0.0 and NaN last, and the gradient reaches the element a stable sort puts there
    (JAX's: among ties, by position)."""
    from tgfx.ir.ops import Ops
    rng = np.random.default_rng(7)
    x = rng.standard_normal(65536).astype(np.float32)
    traced = tg.function(tnp.median)(tg.asarray(x))   # (traced: eagerly, the loops would have run already)
    steps = {u.arg.length for u in traced.uop.toposort() if u.op is Ops.LOOP}
    assert 32 in steps and 136 not in steps   # the search's steps, not the network's passes (a cumsum: the tie's)
    np.testing.assert_array_equal(tnp.median(tg.asarray(x)).numpy(), np.median(x))
    q = np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32)
    for method in ("linear", "lower", "higher", "midpoint"):
        close(tnp.quantile(x, q, method=method), np.quantile(x.astype(np.float64), q, method=method))
    ties = np.round(rng.standard_normal((3, 5000))).astype(np.float32)   # -0.0 and 0.0 among the ties
    ties[1, ::9] = np.nan
    got = tnp.median(tg.asarray(ties), axis=1).numpy()
    srt = np.sort(ties, axis=1, kind="stable")
    np.testing.assert_array_equal(got, [(srt[0, 2499] + srt[0, 2500]) / 2, np.nan, (srt[2, 2499] + srt[2, 2500]) / 2])
    close(tnp.nanmedian(tg.asarray(ties), axis=1), np.nanmedian(ties, axis=1))
    g = tg.grad(lambda t: tnp.median(t))(tg.asarray(ties[0])).numpy()
    order = np.argsort(ties[0], kind="stable")
    want = np.zeros(5000, np.float32)
    want[order[2499]] += 0.5
    want[order[2500]] += 0.5
    np.testing.assert_array_equal(g, want)


# ---- average, cov, corrcoef ----
def test_average() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    w = rng.random((3, 4, 5)).astype(np.float32)
    close(tnp.average(x), np.average(x))
    close(tnp.average(x, axis=1, weights=w), np.average(x, axis=1, weights=w))
    close(tnp.average(x, axis=2, weights=w[0, 0]), np.average(x, axis=2, weights=w[0, 0]))
    avg, wsum = tnp.average(x, axis=(2, 0), weights=w[:, 0, :].T, returned=True)   # weights in `axis`'s order
    wavg, wwsum = np.average(x, axis=(0, 2), weights=w[:, 0, :], returned=True)
    close(avg, wavg)
    close(wsum, wwsum)
    avg, n = tnp.average(x, axis=1, keepdims=True, returned=True)
    close(avg, np.mean(x, axis=1, keepdims=True))
    close(n, np.full((3, 1, 5), 4.0))
    close(tnp.average(np.array([1, 2, 4], np.int32), weights=np.array([2, 1, 1], np.int32)), 2.0, dtype=np.float32)


@pytest.mark.parametrize("rowvar", [True, False])
def test_cov_corrcoef(rowvar: bool) -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    x = x if rowvar else x.T.copy()
    y = rng.standard_normal((2, 7)).astype(np.float32)
    y = y if rowvar else y.T.copy()
    fw = np.array([1, 2, 1, 3, 0, 1, 2], np.int32)
    aw = rng.random(7).astype(np.float32)
    tol = {"rtol": 1e-4, "atol": 1e-5}
    close(tnp.cov(x, rowvar=rowvar), np.cov(x, rowvar=rowvar), **tol, dtype=np.float32)
    close(tnp.cov(x, y, rowvar=rowvar), np.cov(x, y, rowvar=rowvar), **tol)
    close(tnp.cov(x, rowvar=rowvar, bias=True), np.cov(x, rowvar=rowvar, bias=True), **tol)
    close(tnp.cov(x, rowvar=rowvar, ddof=3), np.cov(x, rowvar=rowvar, ddof=3), **tol)
    close(tnp.cov(x, rowvar=rowvar, fweights=fw), np.cov(x, rowvar=rowvar, fweights=fw), **tol)
    close(tnp.cov(x, rowvar=rowvar, aweights=aw), np.cov(x, rowvar=rowvar, aweights=aw), **tol)
    close(tnp.cov(x, rowvar=rowvar, fweights=fw, aweights=aw, ddof=0),
          np.cov(x, rowvar=rowvar, fweights=fw, aweights=aw, ddof=0), **tol)
    close(tnp.corrcoef(x, rowvar=rowvar), np.corrcoef(x, rowvar=rowvar), **tol)
    close(tnp.corrcoef(x, y, rowvar=rowvar), np.corrcoef(x, y, rowvar=rowvar), **tol)


def test_cov_corrcoef_one_variable() -> None:
    v = np.array([1.0, 4.0, 2.0, 8.0], np.float32)
    close(tnp.cov(v), np.cov(v))                       # 0-d
    close(tnp.cov(v, v[::-1]), np.cov(v, v[::-1]))
    close(tnp.cov(np.array([1, 2, 4], np.int32)), np.cov(np.array([1, 2, 4])), dtype=np.float32)  # integers: float32
    close(tnp.corrcoef(v), 1.0)
    assert np.isnan(tnp.corrcoef(np.ones(3, np.float32)).item())   # a constant variable: 0 / 0


# ---- histogram, bincount, digitize ----
def test_histogram_bins_range_weights_density() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(-10, 11, (6, 7)).astype(np.float32)   # integers: the edges below are exact in float32
    w = rng.random((6, 7)).astype(np.float32)
    for kw in [{"bins": 10, "range": (-10, 10)}, {"bins": 4, "range": (-2.0, 6.0)}, {"bins": 5, "range": (0, 0)},
               {"bins": np.array([-10, -3, 0, 0.5, 10], np.float32)}, {"bins": np.array([0, 1, 1, 4], np.float32)}]:
        counts, edges = tnp.histogram(x, **kw)
        wc, we = np.histogram(x, **kw)
        close(counts, wc, dtype=np.float32)   # float counts, as JAX's (numpy's are int64)
        close(edges, we, dtype=np.float32)
        close(tnp.histogram(x, weights=w, **kw)[0], np.histogram(x, weights=w, **kw)[0], rtol=1e-5)
        close(tnp.histogram(x, density=True, **kw)[0], np_quiet(np.histogram, x, density=True, **kw)[0])
    close(tnp.histogram_bin_edges(x, bins=3), np.histogram_bin_edges(x, bins=3))


@settings(max_examples=15)
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=6),
                    elements=st.floats(-100, 100, width=32)), bins=st.integers(1, 9))
def test_histogram_default_range(x: np.ndarray, bins: int) -> None:
    counts, edges = tnp.histogram(x, bins=bins)
    # the edges as numpy's (which computes them in float64 and rounds: equal within an ulp of the range)
    close(edges, np.histogram_bin_edges(x, bins=bins), rtol=1e-6, atol=1e-6 * float(np.abs(x).max(initial=1.0)))
    # every value counted once, in the bin numpy puts it in given these edges
    close(counts, np.histogram(x, bins=np.asarray(edges))[0])
    assert counts.numpy().sum() == x.size


def test_bincount() -> None:
    x = np.array([0, 1, 1, 3, 2, 1, 7])
    w = np.array([0.5, 1.0, 2.0, 0.25, 1.0, 1.0, 3.0], np.float32)
    close(tnp.bincount(x), np.bincount(x), dtype=np.int32)
    close(tnp.bincount(x, minlength=10), np.bincount(x, minlength=10))
    close(tnp.bincount(x, weights=w), np.bincount(x, weights=w), dtype=np.float32)  # weights' dtype, as JAX
    close(tnp.bincount(x, length=4), np.bincount(x)[:4])        # values past `length` are dropped, as JAX
    close(tnp.bincount(np.array([-2, 1]), length=3), [1, 1, 0])  # JAX: negatives count in bin 0 (numpy raises)
    close(tnp.bincount(np.array([True, False, True])), [1, 2])
    close(tnp.bincount(np.zeros(0, np.int32), minlength=2), [0, 0])


@pytest.mark.parametrize("right", [False, True])
def test_digitize(right: bool) -> None:
    x = np.array([[-1.0, 0.0, 0.5], [1.0, 2.5, 3.0]], np.float32)
    for bins in (np.array([0, 1, 2.5], np.float32), np.array([2.5, 1, 0], np.float32), np.array([1, 1, 3], np.float32)):
        close(tnp.digitize(x, bins, right=right), np.digitize(x, bins, right=right), dtype=np.int32)
    close(tnp.digitize(x, np.zeros(0, np.float32), right=right), np.zeros((2, 3)))


# ---- transforms ----
def test_jit_matches_eager() -> None:
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    x[1, 3] = np.nan

    def stats(a: tg.Tensor, q: tg.Tensor) -> tuple[tg.Tensor, ...]:
        return (tnp.nanmean(a, axis=1), tnp.nanstd(a, ddof=1), tnp.nanquantile(a, q, axis=1),
                tnp.nanargmin(a, axis=0), tnp.histogram(a, bins=4, range=(-2.0, 2.0))[0],
                tnp.bincount(tnp.digitize(a[0], q), length=4), tnp.cov(tnp.where(tnp.isnan(a), 0.0, a)))

    q = np.array([0.25, 0.5, 0.75], np.float32)
    got = tg.jit(stats)(tg.asarray(x), tg.asarray(q))
    want = stats(tg.asarray(x), tg.asarray(q))
    for g, w in zip(got, want, strict=True):
        close(g, w.numpy(), dtype=w.dtype.np)
    close(got[2], np.nanquantile(x, q, axis=1))
    close(got[4], np.histogram(x[~np.isnan(x)], bins=4, range=(-2, 2))[0])


def test_bincount_needs_length_under_jit() -> None:
    with pytest.raises(tg.ConcretizationError, match="length="):
        tg.jit(lambda v: tnp.bincount(v))(tg.asarray(np.array([1, 2], np.int32)))
    close(tg.jit(lambda v: tnp.bincount(v, length=3))(tg.asarray(np.array([1, 2, 2], np.int32))), [0, 1, 2])


def test_vmap() -> None:
    x = np.random.default_rng(9).standard_normal((4, 6)).astype(np.float32)
    x[2, 1] = np.nan
    check_vmap(lambda r: tnp.nanmedian(r), (x,), (0,))
    check_vmap(lambda r: tnp.nanvar(r, ddof=1), (x,), (0,))
    check_vmap(lambda r: tnp.histogram(r, bins=3, range=(-1.0, 1.0))[0], (x,), (0,))
    check_vmap(lambda r: tnp.quantile(r, 0.3), (x,), (1,))


def test_grad_nanvar_and_quantile_analytic() -> None:
    x = np.array([[1.0, np.nan, 4.0, 2.0], [3.0, 0.5, np.nan, -1.0]], np.float32)
    g = tg.grad(lambda a: tnp.nanvar(a))(tg.asarray(x)).numpy()
    ok = ~np.isnan(x)
    n, m = ok.sum(), np.nanmean(x)
    close(g, np.where(ok, 2 * (x - m) / n, 0.0))    # NaN elements get a zero gradient, not NaN
    # quantile: linear interpolation between the two order statistics around q * (n - 1)
    v = np.array([5.0, -1.0, 3.0, 0.0, 2.0], np.float32)   # sorted: -1, 0 (v[3]), 2 (v[4]), 3, 5
    g = tg.grad(lambda a: tnp.quantile(a, 0.3))(tg.asarray(v)).numpy()   # 0.3 * 4 = 1.2: 0.8 of 0, 0.2 of 2
    close(g, [0.0, 0.0, 0.0, 0.8, 0.2])
    g = tg.grad(lambda a: tnp.median(a))(tg.asarray(v[:4])).numpy()   # sorted -1, 0, 3, 5: half of 0 and 3
    close(g, [0.0, 0.0, 0.5, 0.5])


def test_grad_cov_corrcoef_average_finite_differences() -> None:
    rng = np.random.default_rng(10)
    x = rng.standard_normal((3, 6)).astype(np.float64)
    w = rng.random(6) + 0.5
    r = rng.standard_normal((3, 3))
    d = rng.standard_normal((3, 6))
    fns = {"cov": lambda a: tnp.sum(tnp.cov(a, aweights=w) * r), "corrcoef": lambda a: tnp.sum(tnp.corrcoef(a) * r),
           "average": lambda a: tnp.sum(tnp.average(a, axis=1, weights=w) * r[0]),
           "nanstd": lambda a: tnp.nanstd(a, axis=1).sum()}
    with tg.Context(TGFX_ENABLE_X64=1):
        for name, f in fns.items():
            g = tg.grad(f)(tg.asarray(x)).numpy()
            eps = 1e-5
            fd = (f(tg.asarray(x + eps * d)).item() - f(tg.asarray(x - eps * d)).item()) / (2 * eps)
            assert abs(float((g * d).sum()) - fd) < 1e-6 * max(1.0, abs(fd)), name


# ---- errors ----
def test_errors_name_the_argument() -> None:
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="nanmax: a where= mask needs initial="):
        tnp.nanmax(x, where=x > 0)
    with pytest.raises(ValueError, match=r"nansum: where of shape \(4,\) does not broadcast"):
        tnp.nansum(x, where=np.ones(4, bool))
    with pytest.raises(ValueError, match="quantile: method must be one of"):
        tnp.quantile(x, 0.5, method="weibull")
    with pytest.raises(NotImplementedError, match="quantile: method='linear' does not take weights"):
        tnp.quantile(x, 0.5, axis=1, weights=np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"percentile: weights of shape \(3,\) must have a's shape \(2, 3\)$"):
        tnp.percentile(x, 50, method="inverted_cdf", weights=np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"quantile: q must be a scalar or 1-d, got shape \(2, 2\)"):
        tnp.quantile(x, np.full((2, 2), 0.5, np.float32))
    with pytest.raises(ValueError, match="median: repeated axis"):
        tnp.median(x, axis=(1, -1))
    with pytest.raises(ValueError, match="nanmedian: cannot take a quantile of an empty slice"):
        tnp.nanmedian(np.zeros((0, 3), np.float32), axis=0)
    with pytest.raises(ValueError, match=r"average: weights must have a's shape \(2, 3\) or the reduced axes' shape"):
        tnp.average(x, axis=1, weights=np.ones(2))
    with pytest.raises(ValueError, match="cov: m has more than 2 dimensions"):
        tnp.cov(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="cov: fweights must be integers"):
        tnp.cov(x, fweights=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="cov: aweights has 2 entries for 3 observations"):
        tnp.cov(x, aweights=np.ones(2))
    with pytest.raises(TypeError, match="bincount: x must be integers, got float32"):
        tnp.bincount(np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"bincount: x must be 1-d, got shape \(2, 3\)"):
        tnp.bincount(np.ones((2, 3), np.int32))
    with pytest.raises(ValueError, match=r"histogram: weights must have a's shape \(2, 3\)"):
        tnp.histogram(x, weights=np.ones(3))
    with pytest.raises(ValueError, match="histogram_bin_edges: bins must be a positive number of bins"):
        tnp.histogram(x, bins=0)
    with pytest.raises(NotImplementedError, match="bins given by name"):
        tnp.histogram(x, bins="auto")
    with pytest.raises(ValueError, match=r"digitize: bins must be 1-d, got shape \(2, 3\)"):
        tnp.digitize(x, x)
    with pytest.raises(TypeError, match="ptp: the range of a bool array"):
        tnp.ptp(np.array([True, False]))
    with pytest.raises(NotImplementedError, match="nanmean: the 'out' argument"):
        tnp.nanmean(x, out=x)


def test_matches_jax() -> None:
    """JAX's own answers where they differ from numpy's, or where numpy has no answer."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.array([[np.nan, np.nan, np.nan], [1.0, np.nan, 2.0]], np.float32)
    close(tnp.nanargmax(x, axis=1), jnp.nanargmax(x, axis=1), dtype=np.int32)
    close(tnp.nanvar(x, axis=1, ddof=2), jnp.nanvar(x, axis=1, ddof=2))
    close(tnp.bincount(np.array([-2, 1, 5]), length=3), jnp.bincount(np.array([-2, 1, 5]), length=3))
    v = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    close(tnp.quantile(v, 0.5, method="nearest"), jnp.quantile(v, 0.5, method="nearest"))   # the tie goes low
    for a, b in zip(tnp.histogram(v, bins=3), jnp.histogram(v, bins=3), strict=True):
        close(a, b, dtype=np.asarray(b).dtype)
    close(tnp.average(v, returned=True)[1], jnp.average(v, returned=True)[1])
