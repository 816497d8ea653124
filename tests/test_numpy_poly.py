"""Polynomials, 1-d signals, set operations, lexsort/partition and the axis-application functions of tgfx.numpy
(tgfx/numpy/_poly.py) against numpy, under jit and vmap, their gradients, and their error messages."""
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.function import ConcretizationError


def close(got: object, want: np.ndarray, tol: float = 1e-5) -> None:
    g = np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol)


def same(got: object, want: np.ndarray) -> None:
    g = np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_array_equal(g, want)


floats = st.floats(-4, 4, width=32)


def vec(n: int) -> st.SearchStrategy:
    """float32 vectors of length n: the values vary, the shape does not (each new shape compiles new kernels)."""
    return st.lists(floats, min_size=n, max_size=n).map(lambda v: np.array(v, np.float32))


# ---- convolution, interpolation, calculus on samples ----
@settings(max_examples=15)
@given(vec(7), vec(3), st.sampled_from(["full", "same", "valid"]))
def test_convolve_correlate_match_numpy(a: np.ndarray, v: np.ndarray, mode: str) -> None:
    close(tnp.convolve(a, v, mode), np.convolve(a, v, mode), 1e-4)
    close(tnp.correlate(a, v, mode), np.correlate(a, v, mode), 1e-4)
    close(tnp.correlate(v, a, mode), np.correlate(v, a, mode), 1e-4)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_correlate_conjugates_a_complex_second_argument(mode: str) -> None:
    # numpy's and JAX's out[k] = sum_n a[n + k] conj(v[n]), with either argument the longer or the complex one
    a, v = np.array([1 + 1j, 2, 0.5 - 3j], np.complex64), np.array([1.0, 2.0], np.float32)
    for x, y in ((a, v), (v, a), (a, a[:2] * 1j), (a[:2] * 1j, a)):
        got = tnp.correlate(x, y, mode)
        assert got.dtype == tnp.complex64
        np.testing.assert_allclose(got.numpy(), np.correlate(x, y, mode), rtol=1e-6)
    np.testing.assert_allclose(tg.jit(tnp.correlate)(a[:2], v).numpy(), [5 + 1j], rtol=1e-6)   # jax's, in the finding
    np.testing.assert_allclose(tnp.convolve(a, a[:2] * 1j, mode).numpy(), np.convolve(a, a[:2] * 1j, mode), rtol=1e-6)


def test_convolve_dtypes() -> None:
    assert tnp.convolve(np.array([1, 2, 3]), np.array([1, 1])).dtype == tnp.float32   # promoted inexact, as JAX
    out = tnp.convolve(np.array([1, 2, 3]), np.array([1, 1]), preferred_element_type=tnp.int32)
    assert out.dtype == tnp.int32 and out.tolist() == [1, 3, 5, 3]


# no subnormal knots: kernels flush subnormal results to zero by default (TGFX_FLUSH_DENORMALS, as XLA's CPU code), so a
# segment from 0 to 8e-39 is flat there; JAX's CPU flushes subnormal inputs as well and departs from numpy on them too.
# test_interp_keeps_subnormal_knots_with_gradual_underflow has them
@settings(max_examples=15)
@given(st.lists(st.floats(-3, 3, width=32, allow_subnormal=False), min_size=5, max_size=5, unique=True), vec(8),
       st.integers(0, 2**31 - 1))
@example([0.0, -1.0, -2.0, -1.5, -5.693166710071602e-38], np.zeros(8, np.float32), 0)   # a segment 6e-38 wide
@example([-1.0, -0.001953125, 0.0, 0.5, 1.0], np.full(8, -1.617608213564381e-4, np.float32), 0)   # x % 2.5 in float32
def test_interp_matches_numpy(knots: list, x: np.ndarray, seed: int) -> None:
    xp = np.sort(np.array(knots, np.float32))
    if np.any(np.diff(xp) <= 0):
        return
    fp = np.random.default_rng(seed).normal(size=xp.size).astype(np.float32)
    close(tnp.interp(x, xp, fp), np.interp(x, xp, fp), 1e-4)
    close(tnp.interp(x, xp, fp, left=-9.0, right=9.0), np.interp(x, xp, fp, left=-9.0, right=9.0), 1e-4)
    # numpy reduces modulo the period in float64, tgfx (as JAX) in the inputs' float32: x = -1.6e-4 is 2.49984 to
    # within float32's 2.4e-7, a large error on a segment 0.002 wide; the reference reduces as tgfx does. A knot a
    # rounding error below a multiple of the period lands on the period's end there, where numpy puts it at the start
    per = np.float32(2.5)
    if not np.any(xp % per == per):
        close(tnp.interp(x, xp, fp, period=2.5), np.interp(x % per, xp % per, fp, period=2.5), 1e-4)


def test_interp_extrapolate() -> None:
    xp, fp = np.array([0.0, 1.0, 2.0], np.float32), np.array([0.0, 1.0, 4.0], np.float32)
    close(tnp.interp(np.array([-1.0, 3.0], np.float32), xp, fp, left="extrapolate", right="extrapolate"), [-1.0, 7.0])


def test_interp_keeps_subnormal_knots_with_gradual_underflow(monkeypatch: pytest.MonkeyPatch) -> None:
    # with TGFX_FLUSH_DENORMALS=0 the segment from 0 to 8e-39 is interpolated as numpy's (by default it is flushed)
    from tgfx import config
    monkeypatch.setattr(config.FLUSH_DENORMALS, "value", 0)
    xp, fp = np.array([0.0, 8e-39, 0.5, 1.0, 2.0], np.float32), np.array([1.0, -1.0, 3.0, 4.0, 5.0], np.float32)
    x = np.array([0.0, 4e-39, 0.25, 2.25], np.float32)
    close(tnp.interp(x, xp, fp), np.interp(x, xp, fp), 1e-4)
    close(tnp.interp(x, xp, fp, period=2.5), np.interp(x, xp, fp, period=2.5), 1e-4)


# (x, xp, fp dtypes, keyword arguments) -> jnp.interp's result dtype: x and xp promote together (with the period), fp
# alone, and the slope in x's type times fp's differences promotes them; then left and right join (weak when Python)
_INTERP_TYPES = [
    (("int32", "int32", "int32"), {}, "float32"),
    (("int32", "int32", "bool"), {}, "float32"),
    (("int32", "int32", "float16"), {}, "float32"),
    (("int32", "float32", "bfloat16"), {}, "float32"),
    (("float16", "float16", "bfloat16"), {}, "float32"),
    (("bfloat16", "bfloat16", "bfloat16"), {}, "bfloat16"),
    (("float16", "float16", "float16"), {}, "float16"),
    (("float16", "float16", "float16"), {"left": 0.5, "right": 9}, "float16"),
    (("float16", "float16", "float16"), {"left": np.float32(0.5)}, "float32"),
    (("float16", "float16", "float16"), {"right": np.ones((), np.float32)}, "float32"),
    (("float16", "float16", "float16"), {"left": 0.5 + 1j}, "complex64"),
    (("float16", "float16", "float16"), {"period": 3.0}, "float16"),
    (("float16", "float16", "float16"), {"period": np.float32(3.0)}, "float32"),
    (("int32", "int32", "int32"), {"period": np.float16(3.0)}, "float32"),
    (("float16", "float16", "float16"), {"left": "extrapolate", "right": "extrapolate"}, "float16"),
]
_INTERP_TYPES_X64 = [
    (("int32", "int32", "int32"), {}, "float32"),
    (("int32", "int64", "int32"), {}, "float64"),
    (("float16", "float64", "float32"), {}, "float64"),
    (("int32", "int32", "float64"), {}, "float64"),
    (("float16", "float16", "float16"), {"right": np.float64(9.0)}, "float64"),
    (("float16", "float16", "float16"), {"period": np.float64(3.0)}, "float64"),
    (("float32", "float32", "float32"), {"left": 0.5 + 1j}, "complex64"),
]


def _interp_with_types(types: tuple, kw: dict, want: str) -> None:
    values = ([0.0, 1.0, 2.0, 3.0, 5.0], [1.0, 2.0, 4.0], [1.0, 0.0, 1.0] if types[2] == "bool" else [3.0, 1.0, 7.0])
    x, xp, fp = (tg.asarray(np.array(v, np.float32)).astype(d) for v, d in zip(values, types, strict=True))
    got = tnp.interp(x, xp, fp, **kw)
    assert got.dtype.name == want, (types, kw, got.dtype)
    if kw.get("left") == "extrapolate":
        expected = [5.0, 3.0, 1.0, 4.0, 10.0]
    else:
        expected = np.interp(*values[:2], np.array(values[2], np.complex128), **kw)   # (numpy's complex left)
    np.testing.assert_allclose(got.numpy().astype(np.complex128), expected, rtol=1e-3)


@pytest.mark.parametrize(("types", "kw", "want"), _INTERP_TYPES)
def test_interp_result_types_are_jaxs(types: tuple, kw: dict, want: str) -> None:
    _interp_with_types(types, kw, want)


@pytest.mark.x64
@pytest.mark.parametrize(("types", "kw", "want"), _INTERP_TYPES_X64)
def test_interp_result_types_are_jaxs_with_x64(types: tuple, kw: dict, want: str) -> None:
    _interp_with_types(types, kw, want)


@settings(max_examples=15)
@given(st.integers(0, 1), st.integers(0, 2**31 - 1))
def test_calculus_match_numpy(axis: int, seed: int) -> None:
    n, m = 4, 5
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(n, m)).astype(np.float32)
    x = np.cumsum(rng.uniform(0.2, 1.0, size=y.shape[axis])).astype(np.float32)
    close(tnp.trapezoid(y, axis=axis), np.trapezoid(y, axis=axis), 1e-4)
    close(tnp.trapezoid(y, dx=0.5, axis=axis), np.trapezoid(y, dx=0.5, axis=axis), 1e-4)
    close(tnp.trapezoid(y, x, axis=axis), np.trapezoid(y, x, axis=axis), 1e-4)
    for got, want in zip(tnp.gradient(y, 0.5), np.gradient(y, 0.5), strict=True):
        close(got, want, 1e-4)
    close(tnp.gradient(y, x, axis=axis), np.gradient(y, x, axis=axis), 1e-3)
    close(tnp.ediff1d(y, to_begin=7.0, to_end=[1.0, 2.0]), np.ediff1d(y, to_begin=7.0, to_end=[1.0, 2.0]), 1e-5)
    phase = np.cumsum(rng.normal(size=(n, m + 3)) * 3, axis=1).astype(np.float32)
    close(tnp.unwrap(phase), np.unwrap(phase), 1e-4)
    close(tnp.unwrap(phase, axis=0, discont=4.0), np.unwrap(phase, axis=0, discont=4.0), 1e-4)


# (y's dtype, spacing: None, a Python number, or a typed array) -> the dtypes of jnp.gradient's and jnp.trapezoid's
# results: y made inexact by its own width (int32 is float32 with x64 too), then promoted with the spacing, a Python
# number weakly (the default 1.0 as well). Where JAX's two differ: gradient makes y and its spacing inexact together
# (int32 y, Python 2.0: the default float), trapezoid y first, then multiplies by dx
_CALCULUS_TYPES = [
    ("bool", None, "float32", "float32"),
    ("uint8", None, "float32", "float32"),
    ("int32", None, "float32", "float32"),
    ("int32", 2, "float32", "float32"),
    ("int32", 2.0, "float32", "float32"),
    ("float16", None, "float16", "float16"),
    ("bfloat16", 0.5, "bfloat16", "bfloat16"),
    ("float16", np.float32(0.5), "float32", "float32"),
    ("int32", np.array([0.0, 1.0, 3.0, 4.0, 6.0], np.float16), "float16", "float16"),
]
_CALCULUS_TYPES_X64 = [
    ("bool", None, "float32", "float32"),
    ("int16", None, "float32", "float32"),
    ("int32", None, "float32", "float32"),
    ("int32", 2, "float32", "float32"),
    ("int32", 2.0, "float64", "float32"),
    ("float16", 2.0, "float16", "float16"),
    ("int64", None, "float64", "float64"),
    ("int32", np.float64(0.5), "float64", "float64"),
    ("float32", np.array([0, 1, 3, 4, 6], np.int64), "float32", "float32"),
]


def _calculus_with_types(dtype: str, spacing: object, want_gradient: str, want_trapezoid: str) -> None:
    y = np.array([1.0, 2.0, 4.0, 7.0, 11.0])
    yt = tg.asarray(y.astype(np.float32)).astype(dtype)
    yn = (y != 0).astype(np.float64) if dtype == "bool" else y
    coords = isinstance(spacing, np.ndarray)
    args = () if spacing is None else (spacing,)
    got = tnp.gradient(yt, *args)
    assert got.dtype.name == want_gradient, (dtype, spacing, got.dtype)
    close(got.numpy().astype(np.float64), np.gradient(yn, *(np.asarray(a, np.float64) for a in args)), 1e-2)
    dx = 1.0 if spacing is None or coords else spacing
    got = tnp.trapezoid(yt, spacing) if coords else tnp.trapezoid(yt, dx=dx)
    assert got.dtype.name == want_trapezoid, (dtype, spacing, got.dtype)
    want = np.trapezoid(yn, np.asarray(spacing, np.float64)) if coords else np.trapezoid(yn, dx=float(dx))
    close(got.numpy().astype(np.float64), want, 1e-2)
    if spacing is None:   # the default dx too
        assert tnp.trapezoid(yt).dtype.name == want_trapezoid


@pytest.mark.parametrize(("dtype", "spacing", "want_gradient", "want_trapezoid"), _CALCULUS_TYPES)
def test_gradient_and_trapezoid_types_are_jaxs(dtype: str, spacing: object, want_gradient: str,
                                               want_trapezoid: str) -> None:
    _calculus_with_types(dtype, spacing, want_gradient, want_trapezoid)


@pytest.mark.x64
@pytest.mark.parametrize(("dtype", "spacing", "want_gradient", "want_trapezoid"), _CALCULUS_TYPES_X64)
def test_gradient_and_trapezoid_types_are_jaxs_with_x64(dtype: str, spacing: object, want_gradient: str,
                                                        want_trapezoid: str) -> None:
    _calculus_with_types(dtype, spacing, want_gradient, want_trapezoid)


# ---- polynomials ----
@settings(max_examples=15)
@given(vec(5), vec(3), vec(4))
def test_polynomials_match_numpy(p: np.ndarray, q: np.ndarray, x: np.ndarray) -> None:
    close(tnp.polyval(p, x), np.polyval(p, x), 2e-3)
    close(tnp.polyval(p, x, unroll=1), np.polyval(p, x), 2e-3)    # the lax.scan form
    n = max(p.size, q.size)   # numpy trims leading zero coefficients of a sum; JAX and tgfx keep the length
    close(tnp.polyadd(p, q), np.pad(p, (n - p.size, 0)) + np.pad(q, (n - q.size, 0)))
    close(tnp.polysub(q, p), np.pad(q, (n - q.size, 0)) - np.pad(p, (n - p.size, 0)))
    close(tnp.polymul(p, q), np.convolve(p, q), 1e-4)   # np.polymul trims leading zeros too
    for m in (1, 2):
        if m < p.size:
            close(tnp.polyder(p, m), np.polyder(p, m), 1e-4)
        close(tnp.polyint(p, m, k=1.5), np.polyint(p, m, k=1.5), 1e-4)


def test_polynomial_details() -> None:
    assert tnp.polyval(np.array([1, 2, 3]), np.array([2, 3])).tolist() == [11, 18]   # integers stay integers
    assert tnp.polyadd(np.array([1, 2]), np.array([1, 0, 0])).dtype == tnp.int32
    close(tnp.polyint(np.array([3.0, 2.0, 1.0], np.float32), 2, k=[1.0, 2.0]),
          np.polyint(np.array([3.0, 2.0, 1.0]), 2, k=[1.0, 2.0]))
    close(tnp.polymul(np.array([0.0, 0.0, 1.0, 2.0], np.float32), np.array([1.0, 1.0], np.float32),
                      trim_leading_zeros=True), [1.0, 3.0, 2.0])
    same(tnp.vander(np.array([2, 3])), np.vander(np.array([2, 3])).astype(np.int32))
    close(tnp.vander(np.array([0.5, -2.0], np.float32), 4, increasing=True),
          np.vander(np.array([0.5, -2.0]), 4, increasing=True))


@pytest.mark.parametrize("deg", [1, 3])
def test_polyfit_matches_numpy(deg: int) -> None:
    rng = np.random.default_rng(deg)
    x = np.linspace(-1, 1, 12).astype(np.float32)
    y = (np.stack([np.sin(2 * x), x ** 2], axis=1) + 0.01 * rng.normal(size=(12, 2))).astype(np.float32)
    w = rng.uniform(0.5, 2, size=12).astype(np.float32)
    close(tnp.polyfit(x, y[:, 0], deg), np.polyfit(x, y[:, 0], deg), 1e-3)
    close(tnp.polyfit(x, y, deg, w=w), np.polyfit(x, y, deg, w=w), 1e-3)
    c, resid, rank, s, rcond = tnp.polyfit(x, y[:, 0], deg, full=True)
    cn, residn, rankn, sn, _ = np.polyfit(x.astype(np.float64), y[:, 0], deg, full=True)
    close(resid, residn, 1e-3)
    assert int(rank) == rankn
    close(s, sn, 1e-4)
    c, cov = tnp.polyfit(x, y[:, 0], deg, cov=True)
    close(cov, np.polyfit(x, y[:, 0], deg, cov=True)[1], 1e-3)


# ---- unique and set operations ----
small_ints = st.lists(st.integers(-3, 3), min_size=6, max_size=6).map(lambda v: np.array(v, np.int32))


@settings(max_examples=20)
@given(small_ints, st.booleans())
def test_unique_matches_numpy(v: np.ndarray, with_nan: bool) -> None:
    x = v.astype(np.float32)
    if with_nan:
        x[::3] = np.nan
    got = tnp.unique(x.reshape(2, 3), return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True, equal_nan=True)
    np.testing.assert_array_equal(np.asarray(got[0]), want[0])
    for g, w in zip(got[1:], want[1:], strict=True):
        same(np.asarray(g).reshape(-1), w.reshape(-1).astype(np.int32))
    assert got[2].shape == (2, 3)   # the inverse has the input's shape
    pad = 8 - want[0].size
    vals, counts = tnp.unique(x, return_counts=True, size=8, fill_value=-7)
    np.testing.assert_array_equal(np.asarray(vals), np.concatenate([want[0], [-7] * pad]))
    same(counts, np.concatenate([want[3], [0] * pad]).astype(np.int32))


@settings(max_examples=20)
@given(st.lists(st.integers(0, 2), min_size=12, max_size=12).map(lambda v: np.array(v, np.int32)),
       st.sampled_from([0, 1, -1]))
def test_unique_along_an_axis_matches_numpy(v: np.ndarray, axis: int) -> None:
    # the distinct slices in lexicographic order (jnp.unique(axis=) was a NotImplementedError): numpy's values,
    # first indices and counts; the inverse is 1-d, as jnp.unique's
    x = v.reshape(6, 2) if axis == 0 else v.reshape(3, 2, 2)
    got = tnp.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(g), w.reshape(-1) if w.ndim == 1 or g.ndim == 1 else w)
    k = want[0].shape[axis]
    vals, counts = tg.jit(lambda a: tnp.unique(a, return_counts=True, axis=axis, size=7, fill_value=-1))(x)
    slots = np.moveaxis(np.asarray(vals), axis, 0)
    np.testing.assert_array_equal(slots[:k], np.moveaxis(want[0], axis, 0))
    assert (slots[k:] == -1).all() and np.asarray(counts).tolist() == want[3].tolist() + [0] * (7 - k)


def test_an_eager_unique_with_size_sorts_once() -> None:
    # its body is one cached traced function: an eager graph cut 32 ops deep sorted again in each later piece
    # (four network sorts for one unique); now as many runs of the sort's kernels as one argsort, and numpy's values
    from collections import Counter

    from tgfx.devices import get_device
    dev = get_device()   # the default device's profile: where x is, and the sorts run
    v = np.random.default_rng(0).integers(0, 50, 3000).astype(np.int32)
    x = tg.asarray(v)

    def kernels(f: Callable[[], tg.Tensor]) -> Counter:
        f().block_until_ready()
        dev.synchronize()
        dev.clear_profile()
        f().block_until_ready()
        dev.synchronize()
        return Counter(e.name for e in dev.profile_events if e.name != "copy")
    sort = kernels(lambda: tnp.argsort(x))
    unique = kernels(lambda: tnp.unique(x, size=60))
    step = max(sort, key=sort.get)   # the network's pass
    assert unique[step] == sort[step]
    want = np.unique(v)
    np.testing.assert_array_equal(tnp.unique(x, size=60).numpy(), np.concatenate([want, [want[0]] * (60 - want.size)]))


def test_unique_equal_nan_false_and_default_fill() -> None:
    x = np.array([3.0, np.nan, 1.0, np.nan, 1.0], np.float32)
    np.testing.assert_array_equal(np.asarray(tnp.unique(x, equal_nan=False)), [1.0, 3.0, np.nan, np.nan])
    vals, idx, inv, counts = tnp.unique(x, True, True, True, size=5)   # JAX's fill: the smallest value, its index
    np.testing.assert_array_equal(np.asarray(vals), [1.0, 3.0, np.nan, 1.0, 1.0])
    assert idx.tolist() == [2, 0, 1, 2, 2] and inv.tolist() == [1, 2, 0, 2, 0] and counts.tolist() == [2, 1, 2, 0, 0]


@settings(max_examples=12)
@given(small_ints, small_ints)
def test_set_operations_match_numpy(a: np.ndarray, b: np.ndarray) -> None:
    same(tnp.setdiff1d(a, b), np.setdiff1d(a, b).astype(np.int32))
    same(tnp.intersect1d(a, b), np.intersect1d(a, b).astype(np.int32))
    same(tnp.union1d(a, b), np.union1d(a, b).astype(np.int32))
    same(tnp.setxor1d(a, b), np.setxor1d(a, b).astype(np.int32))
    vals, i1, i2 = tnp.intersect1d(a, b, return_indices=True)
    want = np.intersect1d(a, b, return_indices=True)
    for g, w in zip((vals, i1, i2), want, strict=True):
        same(g, w.astype(np.int32))
    ua, ub = np.unique(a), np.unique(b)
    same(tnp.setxor1d(ua, ub, assume_unique=True), np.setxor1d(ua, ub, assume_unique=True).astype(np.int32))
    for fn in ("setdiff1d", "intersect1d", "union1d", "setxor1d"):   # with size=: the first ones, then fill_value
        exact = getattr(np, fn)(a, b)
        got = getattr(tnp, fn)(a, b, size=12, fill_value=-9)
        same(got, np.concatenate([exact, [-9] * (12 - exact.size)]).astype(np.int32))


def test_set_operation_default_fills() -> None:
    a, b = np.array([5, 1, 3, 1, 7]), np.array([3, 4, 7])
    assert tnp.setdiff1d(a, b, size=4).tolist() == [1, 5, 0, 0]             # 0
    assert tnp.intersect1d(a, b, size=4).tolist() == [3, 7, 3, 3]           # the smallest result
    assert tnp.setxor1d(a, b, size=5).tolist() == [1, 4, 5, 1, 1]
    assert tnp.union1d(a, b, size=7).tolist() == [1, 3, 4, 5, 7, 1, 1]     # unique's: the smallest value
    vals, i1, i2 = tnp.intersect1d(a, b, return_indices=True, size=3)
    assert vals.tolist() == [3, 7, 3] and i1.tolist() == [2, 4, 5] and i2.tolist() == [0, 2, 3]


# ---- lexsort, partition ----
@settings(max_examples=15)
@given(st.integers(0, 2**31 - 1))
def test_lexsort_partition_match_numpy(seed: int) -> None:
    n, m = 6, 3
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 3, size=(3, m, n))
    same(tnp.lexsort(keys), np.lexsort(keys).astype(np.int32))
    same(tnp.lexsort([keys[0], keys[1].astype(np.float32)], axis=0),
         np.lexsort([keys[0], keys[1].astype(np.float32)], axis=0).astype(np.int32))
    a = rng.normal(size=(m, n)).astype(np.float32)
    k = int(rng.integers(0, n))
    part, idx = np.asarray(tnp.partition(a, k)), np.asarray(tnp.argpartition(a, k))
    srt = np.sort(a, axis=-1)
    same(part[:, :k + 1], srt[:, :k + 1])                 # JAX's layout: the smallest k + 1 sorted ascending ...
    same(part[:, k + 1:], srt[:, k + 1:][:, ::-1])        # ... then the rest descending
    same(np.take_along_axis(a, idx, -1)[:, k], srt[:, k])
    same(np.sort(idx, axis=-1), np.broadcast_to(np.arange(n), (m, n)))   # a permutation
    assert np.all(np.take_along_axis(a, idx[:, :k], -1) <= srt[:, k:k + 1])
    assert np.all(np.take_along_axis(a, idx[:, k + 1:], -1) >= srt[:, k:k + 1])
    same(tnp.partition(a.T, k, axis=0), tnp.partition(a, k).numpy().T)


def test_partition_jax_layout() -> None:
    assert tnp.partition(np.array([5, 1, 4, 2, 3]), 1).tolist() == [1, 2, 5, 4, 3]
    assert tnp.argpartition(np.array([3, 1, 1, 2, 1, 3]), 2).tolist() == [1, 2, 4, 0, 3, 5]   # the rest by index


# ---- putting and applying along axes ----
def test_put_along_axis_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    for axis, idx, vals in ((1, rng.integers(0, 4, (3, 2)), np.float32(9)),
                            (0, np.array([[2, 0, 1, 2]]), np.arange(4, dtype=np.float32)[None]),
                            (None, np.array([0, 5, 11]), np.array([7, 8, 9], np.float32))):
        want = a.copy()
        np.put_along_axis(want, idx, vals, axis)
        close(tnp.put_along_axis(a, idx, vals, axis, inplace=False), want)


def test_apply_along_and_over_axes_match_numpy() -> None:
    b = np.random.default_rng(1).normal(size=(2, 3, 4)).astype(np.float32)
    for axis in range(3):
        close(tnp.apply_along_axis(lambda v: v * v.sum(), axis, b), np.apply_along_axis(lambda v: v * v.sum(), axis, b),
              1e-5)
        close(tnp.apply_along_axis(lambda v: v.max(), axis, b), np.apply_along_axis(lambda v: v.max(), axis, b))
        outer = np.apply_along_axis(lambda v: np.outer(v, v[:2]), axis, b)
        close(tnp.apply_along_axis(lambda v: tnp.outer(v, v[:2]), axis, b), outer, 1e-5)
    close(tnp.apply_over_axes(tnp.sum, b, [0, 2]), np.apply_over_axes(np.sum, b, [0, 2]), 1e-5)


def test_vectorize() -> None:
    rng = np.random.default_rng(2)
    m, v = rng.normal(size=(2, 1, 3, 4)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    matvec = tnp.vectorize(lambda a, b: a @ b, signature="(n,k),(k)->(n)")
    close(matvec(m, v), np.matmul(m, v[..., None])[..., 0], 1e-5)   # (2, 1) and (5,) broadcast to (2, 5)
    calls = []
    f = tnp.vectorize(lambda a, p: calls.append(1) or a ** p, excluded={1})
    close(f(m, 2), m ** 2, 1e-5)
    assert len(calls) == 1                         # traced once, by vmap: not a Python loop per element
    two = tnp.vectorize(lambda a, b: (a.sum(), b * 2), signature="(n),()->(),()")
    s, d = two(m[:, 0], np.ones((2, 1), np.float32))
    close(s, m[:, 0].sum(-1), 1e-5)
    close(d, np.full((2, 3), 2.0), 1e-6)
    assert tnp.vectorize(lambda a, b: a + b)(np.ones((1, 1)), np.ones(1)).shape == (1, 1)


# ---- jit, vmap, grad ----
def test_under_jit_and_vmap() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 5, 6).astype(np.float32), rng.integers(0, 5, 4).astype(np.float32)
    xp = np.array([0.0, 1.0, 3.0], np.float32)

    @tg.jit
    def f(a: tg.Tensor, b: tg.Tensor) -> tuple:
        return (tnp.convolve(a, b, "same"), tnp.interp(a, xp, b[:3]), tnp.polyval(b, a), tnp.polyfit(a, a * 2 + 1, 1),
                tnp.unique(a, size=6), tnp.setdiff1d(a, b, size=6), tnp.intersect1d(a, b, size=4),
                tnp.union1d(a, b, size=10), tnp.setxor1d(a, b, size=10), tnp.partition(a, 2), tnp.lexsort([a, a > 2]))

    got = f(a, b)
    want = (np.convolve(a, b, "same"), np.interp(a, xp, b[:3]), np.polyval(b, a), [2.0, 1.0])
    for g, w in zip(got, want, strict=False):
        close(g, w, 1e-3)
    for g, fn in zip(got[5:9], ("setdiff1d", "intersect1d", "union1d", "setxor1d"), strict=True):
        exact = getattr(np, fn)(a, b)
        np.testing.assert_array_equal(np.asarray(g)[:exact.size], exact)
    same(got[4][:np.unique(a).size], np.unique(a))
    rows = rng.integers(0, 4, (3, 5)).astype(np.float32)
    same(tg.vmap(lambda r: tnp.unique(r, size=5, fill_value=-1))(rows),
         np.stack([np.pad(np.unique(r), (0, 5 - np.unique(r).size), constant_values=-1) for r in rows]))
    same(tg.vmap(lambda r: tnp.partition(r, 1))(rows), tnp.partition(rows, 1))


def fd_check(f: object, x: np.ndarray, eps: float = 1e-3, tol: float = 2e-2) -> None:
    """tg.grad(f) against central differences along two random directions."""
    g = np.asarray(tg.grad(f)(x), np.float64)
    rng = np.random.default_rng(0)
    for _ in range(2):
        d = rng.normal(size=x.shape).astype(np.float32)
        fd = (float(f(x + eps * d)) - float(f(x - eps * d))) / (2 * eps)
        assert abs(fd - float((g * d).sum())) <= tol * max(1.0, abs(fd)), (fd, float((g * d).sum()))


def test_gradients_by_finite_differences() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=6).astype(np.float32)
    xp = np.array([-2.0, -0.5, 0.5, 2.0], np.float32)
    kernel = np.array([0.5, -1.0, 0.25], np.float32)
    fd_check(lambda fp: (tnp.interp(x, xp, fp) ** 2).sum(), rng.normal(size=4).astype(np.float32))
    fd_check(lambda q: (tnp.interp(q, xp, np.array([1.0, 3.0, -1.0, 0.0], np.float32)) ** 2).sum(), x * 0.9)
    fd_check(lambda p: (tnp.polyval(p, x) ** 2).sum(), kernel)
    fd_check(lambda p: (tnp.polyval(p, x, unroll=1) ** 2).sum(), kernel)
    fd_check(lambda a: (tnp.convolve(a, kernel, "same") ** 2).sum(), x)
    fd_check(lambda y: (tnp.polyfit(np.linspace(-1, 1, 6).astype(np.float32), y, 2) ** 2).sum(), x)
    fd_check(lambda y: tnp.trapezoid(y ** 2, np.cumsum(np.abs(x) + 0.1)), x)
    fd_check(lambda y: (tnp.gradient(y, 0.5) ** 2).sum(), x)
    fd_check(lambda y: (tnp.partition(y, 2) * np.arange(6.0, dtype=np.float32)).sum(), x)


def test_matches_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    u = np.array([3.0, np.nan, 1.0, 2.0, np.nan, 1.0], np.float32)
    for kw in ({"size": 2}, {"equal_nan": False}):
        for g, w in zip(tnp.unique(u, True, True, True, **kw), jnp.unique(u, True, True, True, **kw), strict=True):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    a, b = np.array([5, 1, 3, 1, 7, 9], np.float32), np.array([3, 4, 9, 9, 0, np.nan], np.float32)
    for fn in ("intersect1d", "setxor1d"):   # JAX's default fill: NaN when a result is NaN
        for kw in ({"size": 8},):
            np.testing.assert_array_equal(np.asarray(getattr(tnp, fn)(a, b, **kw)),
                                          np.asarray(getattr(jnp, fn)(a, b, **kw)))
    c = np.array([3.0, np.nan, 1.0, 2.0, 0.0], np.float32)
    np.testing.assert_array_equal(np.asarray(tnp.partition(c, 1)), np.asarray(jnp.partition(c, 1)))
    np.testing.assert_array_equal(np.asarray(tnp.argpartition(c, 1)), np.asarray(jnp.argpartition(c, 1)))


# ---- errors ----
def test_error_messages() -> None:
    x = np.array([1.0, 2.0, 2.0], np.float32)
    with pytest.raises(ConcretizationError, match="size="):
        tg.jit(lambda t: tnp.unique(t))(x)
    with pytest.raises(ConcretizationError, match="setdiff1d.*size="):
        tg.jit(lambda t: tnp.setdiff1d(t, t[:1]))(x)
    with pytest.raises(ValueError, match="convolve: only 1-d"):
        tnp.convolve(np.ones((2, 2)), np.ones(2))
    with pytest.raises(ValueError, match="mode must be one of"):
        tnp.convolve(x, x, mode="middle")
    with pytest.raises(ValueError, match="xp and fp must be 1-d arrays of equal length"):
        tnp.interp(x, x, x[:2])
    with pytest.raises(ValueError, match="'extrapolate'"):
        tnp.interp(x, x, x, left="clamp")
    with pytest.raises(ValueError, match="inplace=False"):
        tnp.put_along_axis(x, np.array([0]), 1.0, 0)
    with pytest.raises(ValueError, match="kth=5 is out of bounds"):
        tnp.partition(x, 5)
    with pytest.raises(ValueError, match="unique: axis 2 is out of bounds"):
        tnp.unique(np.ones((2, 2)), axis=2)
    with pytest.raises(NotImplementedError, match="edge_order=2"):
        tnp.gradient(x, edge_order=2)
    with pytest.raises(ValueError, match="gufunc signature"):
        tnp.vectorize(lambda a: a, signature="(n->()")
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n'"):
        tnp.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="polyfit: y must be"):
        tnp.polyfit(x, x[:2], 1)
    with pytest.raises(ValueError, match="fill_value"):
        tnp.unique(np.zeros(0, np.float32), size=2)
    with pytest.raises(ValueError, match="lexsort: all keys must have the same shape"):
        tnp.lexsort([x, x[:2]])
