"""tgfx/numpy/_misc.py against numpy: whole-array comparisons, joining and splitting, insert/delete, the float and
integer math (cbrt, sinc, frexp, ldexp, modf, gcd, ...), sequences, index helpers and dtype questions.

numpy is the reference for values; where JAX's semantics differ from numpy's (index dtypes, clamped unravel_index,
weak Python types in promote_types) the expected values are JAX's, written out, and a jax comparison runs where jax
is installed. The data-dependent functions have jit tests and error tests for the traced case.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import arrays, assert_close, shapes
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grad import check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import config
from tgfx.dtypes import dtypes

T = tg.asarray
F32 = dtypes.float32
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -7.0, 0.3, -1e-3, 27.0, 1e-40, 3e38, -3e38, np.inf, -np.inf,
                    np.nan], dtype=np.float32)


def _same(got: tg.Tensor, want: np.ndarray) -> None:
    """Exact equality of value, shape and dtype (NaN equals NaN, and a zero's sign must match)."""
    want = np.asarray(want)
    assert got.dtype.np == want.dtype, (got.dtype, want.dtype)
    g = got.numpy()
    assert g.shape == want.shape, (g.shape, want.shape)
    np.testing.assert_array_equal(g, want)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(g), np.signbit(want), err_msg="signs of zeros differ")


def _same_list(got: list | tuple, want: list | tuple) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _same(g, w)


# ---- whole-array comparisons ----
@settings(max_examples=20)
@given(data=st.data())
def test_isclose_allclose(data: st.DataObject) -> None:
    a = data.draw(arrays(F32, shapes(max_dims=2), allow_special=True))
    b = a + data.draw(st.sampled_from([0.0, 1e-7, 1e-3, 1.0])) * data.draw(st.sampled_from([1.0, -1.0]))
    b = np.where(data.draw(arrays(dtypes.bool, a.shape)), b, data.draw(arrays(F32, a.shape, allow_special=True)))
    rtol, atol = data.draw(st.sampled_from([(1e-5, 1e-8), (0.0, 1e-3), (1e-2, 0.0)]))
    equal_nan = data.draw(st.booleans())
    _same(tnp.isclose(T(a), T(b), rtol, atol, equal_nan), np.isclose(a, b, rtol, atol, equal_nan))
    _same(tnp.allclose(T(a), T(b), rtol, atol, equal_nan), np.array(np.allclose(a, b, rtol, atol, equal_nan)))


def test_isclose_promotes_and_broadcasts() -> None:
    _same(tnp.isclose(T(np.array([1, 2], np.int32)), 2), np.array([False, True]))
    _same(tnp.isclose(T(np.array([[1.0], [2.0]], np.float32)), T(np.array([1.0, 2.0 + 1e-6], np.float32))),
          np.isclose(np.array([[1.0], [2.0]]), np.array([1.0, 2.0 + 1e-6])))
    _same(tnp.isclose(T(np.array([1 + 1j], np.complex64)), T(np.array([1 + 1.000001j], np.complex64))),
          np.array([True]))


def test_array_equal_equiv() -> None:
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    nan = np.array([1.0, np.nan], np.float32)
    _same(tnp.array_equal(T(x), T(x)), np.array(True))
    _same(tnp.array_equal(T(x), T(x[:1])), np.array(False))
    _same(tnp.array_equal(T(x), T(x + np.eye(2, 3, dtype=np.float32))), np.array(False))
    _same(tnp.array_equal(T(nan), T(nan)), np.array(False))
    _same(tnp.array_equal(T(nan), T(nan), equal_nan=True), np.array(True))
    _same(tnp.array_equiv(T(x[:1]), T(np.tile(x[:1], (4, 1)))), np.array(True))
    _same(tnp.array_equiv(T(x), T(x[:, :2])), np.array(False))  # shapes that do not broadcast
    _same(tnp.array_equiv(T(x), T(x[:1])), np.array(False))


# ---- dimensions, joining, splitting ----
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4)], ids=str)
def test_atleast_and_stacks(shape: tuple[int, ...]) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    _same(tnp.atleast_1d(T(x)), np.atleast_1d(x))
    _same(tnp.atleast_3d(T(x)), np.atleast_3d(x))
    _same_list(tnp.atleast_1d(T(x), 2.0), [np.atleast_1d(x), np.array([2.0], np.float32)])
    _same_list(tnp.atleast_3d(T(x), T(x)), np.atleast_3d(x, x))
    _same(tnp.dstack([T(x), T(x + 1)]), np.dstack([x, x + 1]))
    if x.ndim:
        # an array is a sequence of its rows: one transpose and reshape, numpy's values
        stacked = np.stack([x, x * 2])
        _same(tnp.column_stack(T(stacked)), np.column_stack(list(stacked)))
        _same(tnp.dstack(T(stacked)), np.dstack(list(stacked)))
        _same(tnp.dstack(T(stacked), dtype=tnp.int32), np.dstack(list(stacked)).astype(np.int32))
    if x.ndim <= 2:
        col = np.arange(x.shape[0] if x.ndim else 1, dtype=np.float32)
        _same(tnp.column_stack([T(x), T(col)]), np.column_stack([x, col]))


@settings(max_examples=20)
@given(data=st.data())
def test_splits(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=3, max_dims=3, min_side=1, max_side=6))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    for fn, np_fn, ax in ((tnp.hsplit, np.hsplit, 1), (tnp.vsplit, np.vsplit, 0), (tnp.dsplit, np.dsplit, 2)):
        n = shape[ax]
        sections = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        _same_list(fn(T(x), sections), np_fn(x, sections))
        cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
        _same_list(fn(T(x), cuts), np_fn(x, cuts))
        _same_list(fn(T(x), np.array(cuts, np.int64)), np_fn(x, cuts))
    _same_list(tnp.hsplit(T(x[0, 0]), 1), np.hsplit(x[0, 0], 1))


def test_block() -> None:
    a, b = np.eye(2, dtype=np.float32), np.zeros((2, 1), np.float32)
    c, d = np.ones((1, 2), np.float32), np.full((1, 1), 5.0, np.float32)
    _same(tnp.block([[T(a), T(b)], [T(c), T(d)]]), np.block([[a, b], [c, d]]))
    _same(tnp.block([T(np.arange(2.0, dtype=np.float32)), 3.0]), np.block([np.arange(2.0, dtype=np.float32),
                                                                           np.float32(3.0)]))
    _same(tnp.block(T(a)), np.block(a))
    _same(tnp.block([[T(a)], [T(c)]]), np.block([[a], [c]]))


@settings(max_examples=12)
@given(data=st.data())
def test_append_insert_delete(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=2, min_side=1, max_side=5))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 3 + 1
    axis = data.draw(st.sampled_from([None, *range(x.ndim), -1]))
    n = x.size if axis is None else shape[axis]
    vals = np.float32(-1.0) if data.draw(st.booleans()) else np.arange(
        n if axis is None else 1, dtype=np.float32) - 9
    _same(tnp.append(T(x), T(vals), axis=None), np.append(x, vals))
    if x.ndim == 2:
        _same(tnp.append(T(x), T(x[:1]), axis=0), np.append(x, x[:1], axis=0))
    # insert: a scalar index, a list (repeats and negatives allowed) and a slice; static, and as a Tensor
    idx = data.draw(st.lists(st.integers(-n, n), min_size=2, max_size=4))
    for obj in (idx[0], idx, slice(0, n, 2)):
        k = len(range(*obj.indices(n))) if isinstance(obj, slice) else 1 if isinstance(obj, int) else len(obj)
        flat = axis is None or x.ndim == 1  # (numpy's values must broadcast to the k inserted slices)
        v = np.arange(k, dtype=np.float32) * 100 if k > 1 and flat else np.float32(7.5)
        want = np.insert(x, obj, v, axis=axis)
        _same(tnp.insert(T(x), obj, T(v), axis=axis), want)
        if not isinstance(obj, slice):
            _same(tnp.insert(T(x), T(np.array(obj, np.int32)), T(v), axis=axis), want)
    # delete: an int, a list, a slice, a mask; a Tensor of unique indices on the device
    gone = sorted(set(data.draw(st.lists(st.integers(-n, n - 1), max_size=3))))
    _same(tnp.delete(T(x), idx[0] if -n <= idx[0] < n else 0, axis=axis),
          np.delete(x, idx[0] if -n <= idx[0] < n else 0, axis=axis))
    _same(tnp.delete(T(x), np.array(gone, np.int64), axis=axis), np.delete(x, np.array(gone, np.int64), axis=axis))
    _same(tnp.delete(T(x), slice(1, None, 2), axis=axis), np.delete(x, slice(1, None, 2), axis=axis))
    mask = np.arange(n) % 3 == 1
    _same(tnp.delete(T(x), mask, axis=axis), np.delete(x, mask, axis=axis))
    unique = sorted({i % n for i in gone})
    _same(tnp.delete(T(x), T(np.array(unique, np.int32)), axis=axis, assume_unique_indices=True),
          np.delete(x, unique, axis=axis))
    _same(tnp.delete(T(x), T(np.array(gone, np.int32)), axis=axis), np.delete(x, gone, axis=axis))


def test_insert_values_shapes() -> None:
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    # a scalar index turns the values' first axis along `axis`; a one-element list inserts len(values) slices
    _same(tnp.insert(T(x), 1, T(np.array([10.0, 20, 30], np.float32)), axis=1),
          np.insert(x, 1, [10.0, 20, 30], axis=1))
    _same(tnp.insert(T(x), [1], T(np.array([10.0, 20, 30], np.float32)), axis=1),
          np.insert(x, [1], [10.0, 20, 30], axis=1))
    _same(tnp.insert(T(x), [3, 0], T(np.array([[1.0], [2], [3]], np.float32)), axis=1),
          np.insert(x, [3, 0], [[1.0], [2], [3]], axis=1))
    _same(tnp.insert(T(x.astype(np.int32)), 2, 9.7, axis=0), np.insert(x.astype(np.int32), 2, 9.7, axis=0))


@settings(max_examples=20)
@given(data=st.data())
def test_resize_rot90_rollaxis(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=2, max_dims=3, min_side=1, max_side=4))
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    new = data.draw(shapes(max_dims=3, max_side=5))
    _same(tnp.resize(T(x), new), np.resize(x, new))
    k = data.draw(st.integers(-5, 5))
    axes = tuple(data.draw(st.permutations(range(-x.ndim, 0)))[:2])
    _same(tnp.rot90(T(x), k, axes), np.rot90(x, k, axes))
    axis, start = data.draw(st.integers(-x.ndim, x.ndim - 1)), data.draw(st.integers(-x.ndim, x.ndim))
    _same(tnp.rollaxis(T(x), axis, start), np.rollaxis(x, axis, start))
    _same(tnp.resize(T(np.zeros(0, np.float32)), (2, 2)), np.zeros((2, 2), np.float32))
    c = tnp.copy(T(x))
    _same(c, x)
    assert c is not x


# ---- elementwise math ----
@pytest.mark.parametrize("d", ["float32", "float16", "float64"])
def test_float_math(d: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config.FLUSH_DENORMALS, "value", 0)   # numpy's subnormal results (deg2rad(1e-40))
    with np.errstate(over="ignore"):  # (3e38 is inf in float16)
        x = SPECIAL.astype(d)
    t = T(x)
    ulp = {"float32": 1e-6, "float16": 1e-3, "float64": 1e-14}[d]
    with np.errstate(all="ignore"):
        assert_close(tnp.cbrt(t), np.cbrt(x), rtol=ulp, atol=0)
        assert_close(tnp.sinc(t), np.sinc(x), rtol=4 * ulp, atol=ulp)
        _same(tnp.fabs(t), np.fabs(x))
        assert_close(tnp.deg2rad(t), np.deg2rad(x), rtol=ulp, atol=0)
        assert_close(tnp.radians(t), np.radians(x), rtol=ulp, atol=0)
        assert_close(tnp.rad2deg(t), np.rad2deg(x), rtol=ulp, atol=0)
        assert_close(tnp.degrees(t), np.degrees(x), rtol=ulp, atol=0)
        _same(tnp.heaviside(t, 0.5), np.heaviside(x, x.dtype.type(0.5)))
        _same(tnp.isposinf(t), np.isposinf(x))
        _same(tnp.isneginf(t), np.isneginf(x))
        _same(tnp.nan_to_num(t), np.nan_to_num(x))
        _same(tnp.nan_to_num(t, nan=1.0, posinf=2.0, neginf=-3.0), np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-3.0))
        _same_list(tnp.modf(t), np.modf(x))  # zeros and infinities keep x's sign, as numpy's
        _same_list(tnp.frexp(t), [np.frexp(x)[0], np.frexp(x)[1].astype(np.int32)])
        y = x[::-1].copy()
        _same(tnp.fmax(t, T(y)), np.fmax(x, y))
        _same(tnp.fmin(t, T(y)), np.fmin(x, y))
        _same_list(tnp.divmod(t, T(y)), np.divmod(x, y))
        assert_close(tnp.float_power(tnp.fabs(t), T(np.abs(y) % 3)), np.float_power(np.abs(x), np.abs(y) % 3).astype(d),
                     rtol=4 * ulp, atol=0)


@pytest.mark.x64
def test_cbrt_frexp_ldexp_exactness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config.FLUSH_DENORMALS, "value", 0)   # ldexp's underflow to subnormals, as numpy's
    cubes = np.array([27.0, -8.0, 1e-300, 0.001, 343.0, 1e300, 5e-324], np.float64)
    _same(tnp.cbrt(T(cubes)), np.cbrt(cubes))
    tiny = np.array([1e-45, 1.5e-39, 1.17549435e-38, 3.4e38], np.float32)  # subnormals, smallest normal, largest
    _same_list(tnp.frexp(T(tiny)), [np.frexp(tiny)[0], np.frexp(tiny)[1].astype(np.int32)])
    x = np.array([1.5, 3.0, 1.0, -1e-40, 1e-30, 1e30, 0.75, np.inf, 0.0, np.nan, 2.0], np.float32)
    e = np.array([3, -150, -149, 20, -120, 100, 129, 1, 200, 5, 2**31 - 1], np.int32)
    with np.errstate(over="ignore"):
        _same(tnp.ldexp(T(x), T(e)), np.ldexp(x, e))  # rounded once: underflow to subnormals, overflow to inf
        _same(tnp.ldexp(T(x), T(e.astype(np.int64))), np.ldexp(x, e.astype(np.int64)))
        _same(tnp.ldexp(T(x.astype(np.float16)), T(e % 40 - 20)), np.ldexp(x.astype(np.float16), e % 40 - 20))
    _same(tnp.ldexp(T(np.array([3, -1], np.int64)), 2), np.array([12.0, -4.0], np.float64))


_EXPONENT_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.bool_]


@pytest.mark.parametrize("x64,ed", [(False, t) for t in _EXPONENT_TYPES] + [(True, t) for t in _EXPONENT_TYPES]
                         + [(True, np.int64), (True, np.uint64)])
def test_ldexp_exponent_of_any_integer_type(x64: bool, ed: type) -> None:
    # the exponent is clamped to +-4 (bias + mantissa bits) in its own type: a bound that type cannot hold (600 for
    # an int8) wrapped, and ldexp(1., int8 100) was 2**88
    e = np.array([3, 100, 1, 0] if ed is not np.bool_ else [1, 0, 1, 0], ed)
    x = np.array([1.0, 1.0, -3.0, 0.5], np.float32)
    with np.errstate(over="ignore"), config.Context(TGFX_ENABLE_X64=int(x64)):
        _same(tnp.ldexp(T(x), T(e)), np.ldexp(x, e.astype(np.int32)))
        _same(tnp.ldexp(T(x.astype(np.float16)), T(e)), np.ldexp(x.astype(np.float16), e.astype(np.int32)))
        _same(tg.jit(tnp.ldexp)(T(x), T(e)), np.ldexp(x, e.astype(np.int32)))
        want = np.ldexp(1.0, e.astype(np.int32)).astype(np.float64 if x64 else np.float32)   # as jnp.ldexp(1, e)
        _same(tnp.ldexp(1, T(e)), want)


@settings(max_examples=20)
@given(data=st.data())
def test_gcd_lcm_divmod(data: st.DataObject) -> None:
    d = data.draw(st.sampled_from([dtypes.int32, dtypes.int8, dtypes.uint16]))
    a = data.draw(arrays(d, shapes(max_dims=2), lo=-100, hi=100))
    b = data.draw(arrays(d, st.just(a.shape[-1:] if a.ndim else ()), lo=-100, hi=100))
    _same(tnp.gcd(T(a), T(b)), np.gcd(a, b))
    _same(tnp.lcm(T(a), T(b)), np.lcm(a, b))
    nz = np.where(b == 0, 1, b).astype(b.dtype)
    _same_list(tnp.divmod(T(a), T(nz)), np.divmod(a, nz))


def test_gcd_lcm_scalars() -> None:
    _same(tnp.gcd(T(np.array([12, 18, 0, 1071], np.int32)), 6), np.array([6, 6, 6, 3], np.int32))
    _same(tnp.lcm(T(np.array([4, 0, -6], np.int32)), T(np.array([6, 5, 4], np.int32))), np.array([12, 0, 12], np.int32))
    _same_list(tnp.divmod(T(np.array([True, False])), True), [np.array([1, 0], np.int32), np.array([0, 0], np.int32)])



@pytest.mark.parametrize("d", [np.int8, np.int16, np.int32])
def test_gcd_lcm_of_the_smallest_integer_end_with_numpys_answers(d: type) -> None:
    # |min| is negative in its own type: Euclid's loop on it never ended (a hang, as JAX's does); the magnitudes
    # are unsigned now, and a gcd of 2^(bits-1) wraps back to min, as numpy's
    m = np.iinfo(d).min
    a, b = np.array([m, m, m, 12, -18, 0, 7, m], d), np.array([6, 0, m, 8, 8, 0, -3, 1], d)
    _same(tnp.gcd(T(a), T(b)), np.gcd(a, b))
    _same(tnp.lcm(T(a), T(b)), np.lcm(a, b))
    _same(tg.jit(tnp.gcd)(T(a), T(b)), np.gcd(a, b))


# ---- products and selection ----
@settings(max_examples=15)
@given(data=st.data())
def test_cross_kron_select(data: st.DataObject) -> None:
    batch = data.draw(shapes(max_dims=2, min_side=1, max_side=3))
    na, nb = data.draw(st.sampled_from([(3, 3), (2, 3), (3, 2), (2, 2)]))
    a = data.draw(arrays(F32, batch + (na,), lo=-10, hi=10))
    b = data.draw(arrays(F32, batch[-1:] + (nb,), lo=-10, hi=10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # numpy 2 deprecates 2-vectors; JAX keeps them
        assert_close(tnp.cross(T(a), T(b)), np.cross(a, b), rtol=1e-5, atol=1e-4)
        ax = data.draw(st.integers(0, a.ndim - 1))
        a_moved = np.moveaxis(a, -1, ax)
        assert_close(tnp.cross(T(a_moved), T(b), axisa=ax), np.cross(a_moved, b, axisa=ax), rtol=1e-5, atol=1e-4)
        if na == 3 and nb == 3:
            assert_close(tnp.cross(T(a), T(b), axisc=0), np.cross(a, b, axisc=0), rtol=1e-5, atol=1e-4)
    x = data.draw(arrays(dtypes.int32, shapes(max_dims=3, max_side=3), lo=-9, hi=9))
    y = data.draw(arrays(dtypes.int32, shapes(max_dims=2, max_side=3), lo=-9, hi=9))
    _same(tnp.kron(T(x), T(y)), np.kron(x, y))
    _same(tnp.kron(T(x), T(y.astype(np.float32))), np.kron(x.astype(np.float32), y.astype(np.float32)))
    v = a[..., 0]
    conds, choices = [v < -2, v > 5], [v * 2, v - 100]
    _same(tnp.select([T(c) for c in conds], [T(c) for c in choices], default=T(v)), np.select(conds, choices, v))
    _same(tnp.select([T(conds[0])], [T(np.int8(3) * np.ones_like(v, np.int8))]),
          np.select([conds[0]], [np.full(v.shape, 3, np.int8)]))


# ---- sequences ----
@pytest.mark.parametrize("endpoint", [True, False])
def test_logspace_geomspace(endpoint: bool) -> None:
    for num in (0, 1, 2, 7):
        assert_close(tnp.logspace(0.5, 3, num, endpoint), np.logspace(0.5, 3, num, endpoint), rtol=1e-5)
        assert_close(tnp.logspace(0, 4, num, endpoint, base=2.0), np.logspace(0, 4, num, endpoint, base=2.0),
                     rtol=1e-5)
        assert_close(tnp.geomspace(1, 1000, num, endpoint), np.geomspace(1, 1000, num, endpoint), rtol=1e-5)
        assert_close(tnp.geomspace(-2.0, -0.01, num, endpoint), np.geomspace(-2.0, -0.01, num, endpoint), rtol=1e-5)
    lo, hi = np.array([0.0, 1.0], np.float32), np.array([2.0, 3.0], np.float32)
    assert_close(tnp.logspace(T(lo), T(hi), 4, endpoint, axis=1), np.logspace(lo, hi, 4, endpoint, axis=1), rtol=1e-5)
    assert_close(tnp.geomspace(T(hi), 100.0, 3, endpoint, axis=-1), np.geomspace(hi, 100.0, 3, endpoint, axis=-1),
                 rtol=1e-5)
    _same(tnp.logspace(0, 3, 4, endpoint, dtype=tnp.int32), np.logspace(0, 3, 4, endpoint).astype(np.int32))


# ---- index helpers ----
@pytest.mark.parametrize("k", [-2, 0, 1, 5])
def test_triangle_and_diagonal_indices(k: int) -> None:
    i32 = np.int32  # JAX's default int, where numpy's is int64
    for n, m in ((4, None), (3, 5), (5, 2), (0, 3)):
        _same_list(tnp.tril_indices(n, k, m), [a.astype(i32) for a in np.tril_indices(n, k, m)])
        _same_list(tnp.triu_indices(n, k, m), [a.astype(i32) for a in np.triu_indices(n, k, m)])
    a = np.zeros((3, 4), np.float32)
    _same_list(tnp.tril_indices_from(T(a), k), [i.astype(i32) for i in np.tril_indices_from(a, k)])
    _same_list(tnp.triu_indices_from(a, k), [i.astype(i32) for i in np.triu_indices_from(a, k)])
    _same_list(tnp.diag_indices(abs(k), 3), [i.astype(i32) for i in np.diag_indices(abs(k), 3)])
    _same_list(tnp.diag_indices_from(T(np.zeros((2, 2, 2), np.float32))), [np.arange(2, dtype=i32)] * 3)


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (5, 2), (3, 3, 3)], ids=str)
def test_fill_diagonal_indices(shape: tuple[int, ...]) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    for val in (np.float32(-1.0), np.array([7.0, 8.0], np.float32), np.array([[1.0, 2, 3, 4, 5, 6]], np.float32)):
        want = x.copy()
        np.fill_diagonal(want, val)
        _same(tnp.fill_diagonal(T(x), T(val), inplace=False), want)
    _same(tnp.indices(shape), np.indices(shape).astype(np.int32))
    _same_list(tnp.indices(shape, dtype=tnp.int8, sparse=True), np.indices(shape, dtype=np.int8, sparse=True))
    flat = np.arange(int(np.prod(shape)), dtype=np.int32)[::-1].copy()
    coords = np.unravel_index(flat, shape)
    _same_list(tnp.unravel_index(T(flat), shape), [c.astype(np.int32) for c in coords])
    _same(tnp.ravel_multi_index([T(c.astype(np.int32)) for c in coords], shape), flat)
    _same(tnp.ravel_multi_index([T(c.astype(np.int32)) for c in coords], shape, order="F"),
          np.ravel_multi_index(coords, shape, order="F").astype(np.int32))
    far = [T(c.astype(np.int32) * 3 - 2) for c in coords]
    for mode in ("clip", "wrap"):
        _same(tnp.ravel_multi_index(far, shape, mode=mode),
              np.ravel_multi_index([c * 3 - 2 for c in coords], shape, mode=mode).astype(np.int32))
    _same(tnp.indices(()), np.indices(()).astype(np.int32))


def test_unravel_index_clamps_as_jax() -> None:
    # numpy raises for out-of-range flat indices; JAX (and tgfx) clamp them to the first or last element
    _same_list(tnp.unravel_index(T(np.array([5, 100, -1, -7], np.int32)), (2, 3)),
               [np.array([1, 1, 1, 0], np.int32), np.array([2, 2, 2, 0], np.int32)])
    _same_list(tnp.unravel_index(7, (2, 4)), [np.array(1, np.int32), np.array(3, np.int32)])


@settings(max_examples=20)
@given(data=st.data())
def test_isin(data: st.DataObject) -> None:
    d = data.draw(st.sampled_from([dtypes.int32, F32]))
    e = data.draw(arrays(d, shapes(max_dims=2), lo=-5, hi=5))
    t = data.draw(arrays(d, shapes(max_dims=2), lo=-5, hi=5))
    invert = data.draw(st.booleans())
    for method in ("auto", "compare_all", "binary_search", "sort"):
        _same(tnp.isin(T(e), T(t), invert=invert, method=method), np.isin(e, t, invert=invert))


# ---- scalars, dtypes, shapes ----
def test_isscalar_promote_types_broadcast_shapes() -> None:
    assert tnp.isscalar(1.0) and tnp.isscalar(np.float32(1)) and tnp.isscalar(T(1.0)) and tnp.isscalar("a")
    assert not tnp.isscalar(T([1.0])) and not tnp.isscalar([1]) and not tnp.isscalar(np.zeros(1))
    # JAX's table: Python types are weak, a weak result is the kind's 64-bit type, types are as named
    for a, b, want in [("int64", "int32", "int64"), ("uint32", "int32", "int32"), (tnp.int8, int, "int8"),
                       (float, int, "float64"), (bool, int, "int64"), ("float16", float, "float16"),
                       ("bfloat16", "float16", "float32"), (np.float32, complex, "complex64"),
                       ("int8", complex, "complex128"), (bool, bool, "bool"), ("int64", "uint64", "float64")]:
        assert tnp.promote_types(a, b).name == want, (a, b)
    assert tnp.broadcast_shapes((3, 1), (1, 4), (5, 1, 1)) == (5, 3, 4)
    assert tnp.broadcast_shapes() == () and tnp.broadcast_shapes(3, (2, 1)) == (2, 3)


def test_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    for a, b in [("int64", "int32"), (int, "uint8"), (float, int), (bool, complex), ("bfloat16", int)]:
        assert tnp.promote_types(a, b).name == jnp.promote_types(a, b).name
    idx = np.array([5, 100, -1, -7, 3], np.int32)
    for g, w in zip(tnp.unravel_index(T(idx), (2, 3)), jnp.unravel_index(idx, (2, 3)), strict=True):
        _same(g, np.asarray(w))
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    obj = np.array([0, 2, 2, -1], np.int32)
    _same(tnp.insert(T(x), T(obj), T(np.arange(4.0, dtype=np.float32)), axis=1),
          np.asarray(jnp.insert(x, obj, np.arange(4.0, dtype=np.float32), axis=1)))
    _same(tnp.fill_diagonal(T(x), 9.0, inplace=False), np.asarray(jnp.fill_diagonal(x, 9.0, inplace=False)))
    _same(tnp.select([T(x) > 3], [1.5]), np.asarray(jnp.select([x > 3], [1.5])))


# ---- jit, vmap, grad ----
def test_jit_and_vmap() -> None:
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    ix = np.array([3, 0], np.int32)

    @tg.jit
    def f(a: tg.Tensor, i: tg.Tensor) -> tuple:
        return (tnp.insert(a, i, -1.0, axis=1), tnp.delete(a, i, axis=1, assume_unique_indices=True),
                tnp.gcd(i * 6, 4), tnp.frexp(a)[0], tnp.ldexp(a, i[0]), tnp.isin(a, i.astype(a.dtype)),
                tnp.ravel_multi_index((i, i + 1), (4, 5), mode="clip"), tnp.unravel_index(i, (2, 2))[1],
                tnp.allclose(a, a + 1e-9), tnp.cbrt(a), tnp.nan_to_num(a / 0.0))
    got = f(T(x), T(ix))
    with np.errstate(divide="ignore", invalid="ignore"):
        want = (np.insert(x, ix, -1.0, axis=1), np.delete(x, ix, axis=1), np.gcd(ix * 6, 4), np.frexp(x)[0],
                np.ldexp(x, ix[0]), np.isin(x, ix), np.ravel_multi_index((ix, ix + 1), (4, 5), mode="clip"),
                np.array([1, 0]), True, np.cbrt(x), np.nan_to_num(x / np.float32(0.0)))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-6)
    # per example: an index Tensor per row of a batch
    rows = np.array([[1, 2], [0, 3], [3, 3]], np.int32)
    out = tg.vmap(lambda a, i: tnp.insert(a, i, 0.5))(T(x), T(rows))
    np.testing.assert_array_equal(out.numpy(), np.stack([np.insert(r, i, 0.5) for r, i in zip(x, rows, strict=True)]))
    g = tg.vmap(tnp.gcd)(T(rows * 4), T(rows[::-1] * 6))
    np.testing.assert_array_equal(g.numpy(), np.gcd(rows * 4, rows[::-1] * 6))


GRADS = {
    "cbrt": (tnp.cbrt, np.array([0.3, -2.0, 27.0, 5.5])),
    "sinc": (tnp.sinc, np.array([1e-3, -0.4, 1.3, 2.7])),
    "frexp": (lambda t: tnp.frexp(t)[0], np.array([0.3, -2.5, 27.0, 1e-3])),
    "ldexp": (lambda t: tnp.ldexp(t, T(np.array([1, -3, 0, 4]))), np.array([0.3, -2.5, 27.0, 1e-3])),
    "modf": (lambda t: tnp.modf(t)[0] * t, np.array([0.3, -2.4, 27.6, -0.7])),
    "fmax": (lambda t: tnp.fmax(t, t[::-1] * 0.5), np.array([0.3, -2.4, 27.6, -0.7])),
    "heaviside": (lambda t: tnp.heaviside(t, 0.5) * t * t, np.array([0.3, -2.4, 27.6, -0.7])),
    "float_power": (lambda t: tnp.float_power(t * t + 1, 1.5), np.array([0.3, -2.4, 2.6, -0.7])),
    "cross": (lambda t: tnp.cross(t[:3], t[3:]), np.array([0.3, -2.4, 2.6, -0.7, 1.1, 0.2])),
    "kron": (lambda t: tnp.kron(t[:2], t[2:].reshape(2, 2)), np.array([0.3, -2.4, 2.6, -0.7, 1.1, 0.2])),
    "select": (lambda t: tnp.select([t < 0, t > 1], [t * t, 3 * t], t), np.array([0.3, -2.4, 2.6, -0.7])),
    "insert": (lambda t: tnp.insert(t, [1, 1, 3], t[:3] * 2), np.array([0.3, -2.4, 2.6, -0.7])),
    "insert_tensor": (lambda t: tnp.insert(t, T(np.array([1, 1, 3], np.int32)), t[:3] * 2),
                      np.array([0.3, -2.4, 2.6, -0.7])),
    "delete": (lambda t: tnp.delete(t, T(np.array([2, 0], np.int32)), assume_unique_indices=True),
               np.array([0.3, -2.4, 2.6, -0.7])),
    "fill_diagonal": (lambda t: tnp.fill_diagonal(t[:6].reshape(2, 3), t[4:6], inplace=False),
                      np.array([0.3, -2.4, 2.6, -0.7, 1.1, 0.2])),
    "logspace": (lambda t: tnp.logspace(t[0], t[1], 4), np.array([0.3, 1.2])),
    "geomspace": (lambda t: tnp.geomspace(t[0], t[1], 4), np.array([0.3, 1.2])),
    "nan_to_num": (lambda t: tnp.nan_to_num(t * t), np.array([0.3, 1.2])),
    "block_resize_rot90": (lambda t: tnp.rot90(tnp.resize(tnp.block([[t[:2], t[2:]]]), (3, 2))),
                           np.array([0.3, -2.4, 2.6, -0.7])),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", GRADS)
def test_grad(name: str) -> None:
    fn, x = GRADS[name]
    check_grads(fn, x)


def test_grad_at_special_points() -> None:
    # sinc's Taylor branch makes the first and second derivatives at 0 exact (0 and -pi^2/3), as JAX's rule does
    d1 = tg.grad(lambda t: tnp.sinc(t).sum())
    np.testing.assert_allclose(d1(T(np.zeros(1, np.float32))).numpy(), [0.0])
    d2 = tg.grad(lambda t: d1(t).sum())(T(np.zeros(1, np.float32)))
    np.testing.assert_allclose(d2.numpy(), [-np.pi ** 2 / 3], rtol=1e-5)
    # cbrt's Newton step: exactly 1 / (3 y^2); frexp's mantissa: 2**-e; modf's fraction: 1 at integers too
    np.testing.assert_allclose(tg.grad(lambda t: tnp.cbrt(t).sum())(T(np.array([8.0, -27.0], np.float32))).numpy(),
                               [1 / 12, 1 / 27], rtol=1e-6)
    np.testing.assert_array_equal(tg.grad(lambda t: tnp.frexp(t)[0].sum())(T(np.array([3.0, 0.0], np.float32))),
                                  [0.25, 1.0])
    np.testing.assert_array_equal(tg.grad(lambda t: tnp.modf(t)[0].sum())(T(np.array([-8.0, 2.0], np.float32))),
                                  [1.0, 1.0])
    # closed-form derivatives where the value's branches put inf * 0 into the gradient: arcsinh at 0 was NaN
    # (log(|x|) of the branch not taken), cbrt at 0 was 1 (|x|'s slope; JAX's and the true one: inf), arccosh at 1 NaN
    at = T(np.array([0.0, 1.0, -2.0, 1e30], np.float32))
    np.testing.assert_allclose(tg.vmap(tg.grad(tnp.arcsinh))(at).numpy(), [1.0, 0.5 ** 0.5, 5 ** -0.5, 1e-30],
                               rtol=1e-6)
    np.testing.assert_array_equal(tg.grad(tnp.cbrt)(T(np.float32(0.0))).numpy(), np.inf)
    np.testing.assert_allclose(tg.vmap(tg.grad(tnp.arccosh))(T(np.array([1.0, 2.0, 1e30], np.float32))).numpy(),
                               [np.inf, 3 ** -0.5, 1e-30], rtol=1e-6)
    x = np.array([0.5, -2.0], np.float32)    # second derivatives through the closed forms
    np.testing.assert_allclose(np.diag(tg.hessian(lambda t: tnp.arcsinh(t).sum())(T(x)).numpy()),
                               -x / (1 + x * x) ** 1.5, rtol=1e-5)
    np.testing.assert_allclose(np.diag(tg.hessian(lambda t: tnp.cbrt(t).sum())(T(x)).numpy()),
                               -2 / 9 * np.abs(x) ** (-5 / 3) * np.sign(x), rtol=1e-5)


# ---- errors ----
def test_errors() -> None:
    x = T(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    i = T(np.array([3, 0], np.int32))
    with pytest.raises(tg.ConcretizationError, match="assume_unique_indices=True"):
        tg.jit(lambda a, j: tnp.delete(a, j, axis=1))(x, i)
    with pytest.raises(tg.ConcretizationError, match="mode='clip'"):
        tg.jit(lambda j: tnp.ravel_multi_index((j, j), (4, 4)))(i)
    with pytest.raises(ValueError, match=r"invalid entry in coordinates array multi_index\[1\]"):
        tnp.ravel_multi_index((i, i + 2), (4, 4))
    with pytest.raises(ValueError, match="2 indices in obj but 3 values along axis 1"):
        tnp.insert(x, [0, 1], T(np.ones((3, 3), np.float32)), axis=1)
    with pytest.raises(ValueError, match=r"do not broadcast to \(3, 2\)"):
        tnp.insert(x, [0, 1], T(np.ones((2, 2), np.float32)), axis=1)
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 1 with size 4"):
        tnp.delete(x, [1, 7], axis=1)
    with pytest.raises(ValueError, match="gcd: arguments must be integers, got float32"):
        tnp.gcd(x, 2)
    with pytest.raises(ValueError, match=r"ldexp: .* \(float32, float32\)"):
        tnp.ldexp(x, x)
    with pytest.raises(TypeError, match="fabs does not support complex"):
        tnp.fabs(T(np.array([1j], np.complex64)))
    with pytest.raises(ValueError, match="2 or 3 elements, got 4"):
        tnp.cross(x, x)
    with pytest.raises(ValueError, match="same length, got 2 and 1"):
        tnp.select([x > 0, x > 1], [x])
    with pytest.raises(NotImplementedError, match="inplace=False"):
        tnp.fill_diagonal(x, 1.0)
    with pytest.raises(ValueError, match="axes must be different"):
        tnp.rot90(x, 1, (1, -1))
    with pytest.raises(ValueError, match=r"broadcast_shapes: .*\(3, 1\) \(4, 1\)"):
        tnp.broadcast_shapes((3, 1), (4, 1))
    with pytest.raises(ValueError, match=r"arrays\[1\] is a tuple"):
        tnp.block([x, (x,)])
    with pytest.raises(ValueError, match="nested to different depths"):
        tnp.block([x, [x]])
    with pytest.raises(TypeError, match="unravel_index: indices must be integers, got float32"):
        tnp.unravel_index(x, (3, 4))
    with pytest.raises(ValueError, match="method='fast' is not implemented"):
        tnp.isin(x, x, method="fast")
    with pytest.raises(ValueError, match=r"tril_indices_from: only 2-d inputs are accepted, got shape \(4,\)"):
        tnp.tril_indices_from(x[0])
    with pytest.raises(ValueError, match=r"equal length, got shape \(3, 4\)"):
        tnp.diag_indices_from(x)
    with pytest.raises(ValueError, match="number of samples, -1, must be non-negative"):
        tnp.logspace(0, 1, -1)
    with pytest.raises(ValueError, match="new_shape must be non-negative"):
        tnp.resize(x, (2, -1))
    with pytest.raises(ValueError, match="isneginf is not well defined for complex"):
        tnp.isneginf(T(np.array([1j], np.complex64)))
