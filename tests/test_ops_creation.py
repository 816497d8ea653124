"""Creation functions and linear algebra (matmul, dot and friends) against numpy, with JAX's default dtypes.

Python scalars give JAX's defaults: `full(s, 3)` and `arange(5)` are int32, float fills and ranges are float32.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import ALL, FLOATS, arrays, assert_close, eps, np_dtype, shapes, to_tensor
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import DType, dtypes


# ---- constants ----
@pytest.mark.x64
@pytest.mark.parametrize("d", ALL, ids=str)
@settings(max_examples=8)
@given(shape=shapes(max_dims=3))
def test_zeros_ones_full(d: DType, shape: tuple[int, ...]) -> None:
    assert_close(tnp.zeros(shape, dtype=d), np.zeros(shape, np_dtype(d)), dtype=d)
    assert_close(tnp.ones(shape, dtype=d), np.ones(shape, np_dtype(d)), dtype=d)
    v = True if d.is_bool else 7
    assert_close(tnp.full(shape, v, dtype=d), np.full(shape, v, np_dtype(d)), dtype=d)
    e = tnp.empty(shape, dtype=d)
    assert (e.shape, e.dtype) == (shape, d)


def test_default_dtypes_are_jaxs() -> None:
    assert tnp.zeros((2,)).dtype == dtypes.float32
    assert tnp.ones(3).dtype == dtypes.float32
    assert tnp.full((2,), 3).dtype == dtypes.int32
    assert tnp.full((2,), 1.5).dtype == dtypes.float32
    assert tnp.full((2,), True).dtype == dtypes.bool
    assert tnp.arange(5).dtype == dtypes.int32
    assert tnp.arange(0.0, 2.0).dtype == dtypes.float32
    assert tnp.arange(1, 5, 0.5).dtype == dtypes.float32
    assert tnp.linspace(0, 1, 5).dtype == dtypes.float32
    assert tnp.eye(3).dtype == dtypes.float32
    assert tg.asarray([1, 2]).dtype == dtypes.int32
    assert tg.asarray([1.0, 2]).dtype == dtypes.float32
    assert tg.asarray([True]).dtype == dtypes.bool


def test_full_with_shape_int_and_fill_cast_to_dtype() -> None:
    assert_close(tnp.full(4, 2.5), np.full(4, 2.5, np.float32), dtype=dtypes.float32)
    assert_close(tnp.full((2, 2), -1, dtype=dtypes.uint8), np.full((2, 2), 255, np.uint8), dtype=dtypes.uint8)
    assert_close(tnp.full((3,), 2.75, dtype=dtypes.int32), np.full(3, 2, np.int32), dtype=dtypes.int32)
    assert_close(tnp.full((2,), np.nan), np.full(2, np.nan, np.float32), dtype=dtypes.float32)
    assert_close(tnp.full((2,), 1e6, dtype=dtypes.float16), np.full(2, np.inf, np.float16), dtype=dtypes.float16)


def test_full_with_tensor_fill_broadcasts() -> None:
    row = np.array([1.0, 2.0, 3.0], np.float32)
    assert_close(tnp.full((2, 3), to_tensor(row)), np.full((2, 3), row), dtype=dtypes.float32)


@pytest.mark.x64
@pytest.mark.parametrize("d", ALL, ids=str)
def test_like_functions(d: DType) -> None:
    x = to_tensor(np.ones((2, 3), np_dtype(d)), d)
    assert_close(tnp.zeros_like(x), np.zeros((2, 3), np_dtype(d)), dtype=d)
    assert_close(x.zeros_like(), np.zeros((2, 3), np_dtype(d)), dtype=d)
    assert_close(tnp.ones_like(x), np.ones((2, 3), np_dtype(d)), dtype=d)
    v = False if d.is_bool else 5
    assert_close(tnp.full_like(x, v), np.full((2, 3), v, np_dtype(d)), dtype=d)
    assert_close(tnp.zeros_like(x, dtype=dtypes.int16), np.zeros((2, 3), np.int16), dtype=dtypes.int16)
    assert_close(tnp.full_like(x, 1.5, dtype=dtypes.float64), np.full((2, 3), 1.5), dtype=dtypes.float64)


def test_full_like_casts_the_fill_to_the_input_dtype() -> None:
    x = to_tensor(np.arange(4, dtype=np.int32))
    assert_close(tnp.full_like(x, 2.5), np.full_like(np.arange(4, dtype=np.int32), 2.5), dtype=dtypes.int32)


@pytest.mark.x64
@pytest.mark.parametrize("d", ALL, ids=str)
def test_asarray_and_array_with_dtype(d: DType) -> None:
    data = [[0, 1, 2], [3, 1, 0]]
    want = np.array(data, np_dtype(d))
    assert_close(tg.asarray(data, dtype=d), want, dtype=d)
    assert_close(tnp.array(data, dtype=d), want, dtype=d)
    assert_close(tnp.asarray(np.array(data, np.float64), dtype=d), want, dtype=d)
    t = to_tensor(want, d)
    assert tnp.asarray(t) is t or tnp.asarray(t).uop is t.uop


@pytest.mark.parametrize("value", [np.float32(3.5), np.array(2, np.int8), np.array(True), 3, 2.5])
def test_asarray_keeps_0d_shape(value: Any) -> None:
    assert tg.asarray(value).shape == ()
    assert_close(tg.asarray(value), np.asarray(value), dtype=tg.asarray(value).dtype)


@pytest.mark.parametrize("value,d", [(3, dtypes.int32), (2.5, dtypes.float32), (False, dtypes.bool),
                                     (np.float16(1.5), dtypes.float16), (np.uint8(7), dtypes.uint8)])
def test_asarray_of_scalar_dtype(value: Any, d: DType) -> None:
    assert tg.asarray(value).dtype == d
    assert tg.asarray(value).item() == value


_HALF = np.array([0.5, -2.0], np.float16)


LISTS = [([_HALF, _HALF], dtypes.float16), ([_HALF, [1.5, 2.5]], dtypes.float16),
         ([[np.int8(1), 2], [3, 4]], dtypes.int8), ((np.uint8(1), True), dtypes.uint8),
         ([np.float32(1), 2.5], dtypes.float32), ([np.float16(1), np.int16(2)], dtypes.float16),
         ([1, 2.5], dtypes.float32), ([[1, 2], [3, 4]], dtypes.int32), ([True], dtypes.bool)]


@pytest.mark.parametrize("data,d", LISTS)
def test_asarray_of_a_list_promotes_its_leaves_as_jax(data: Any, d: DType) -> None:
    # numpy scalars and arrays among a list's leaves are strongly typed, Python scalars weak (jnp.array's
    # promotion): a list of float16 arrays is float16, not the default float type of numpy's array's kind
    got = tg.asarray(data)
    assert got.dtype == d
    np.testing.assert_array_equal(got.numpy(), np.asarray(data, dtype=object).astype(np_dtype(d)))


def test_asarray_of_a_list_of_numpy_leaves_checks_python_ints() -> None:
    with pytest.raises(OverflowError, match="300"):
        tg.asarray([np.int8(1), 300])   # as JAX: the list is int8, and 300 is not one


# ---- ranges ----
@pytest.mark.parametrize("args", [(5,), (0,), (2, 7), (7, 2), (7, 2, -1), (-3, 10, 4), (10, -3, -4), (1, 2, 5)])
def test_arange_int(args: tuple[int, ...]) -> None:
    assert_close(tnp.arange(*args), np.arange(*args).astype(np.int32), dtype=dtypes.int32)


@pytest.mark.parametrize("args", [(0.0, 1.0, 0.1), (2.5,), (1, 5, 0.5), (-1.0, 1.0, 0.25), (3.0, 0.0, -0.7),
                                  (0.0, 1e-3, 1e-4)])
def test_arange_float(args: tuple[float, ...]) -> None:
    want = np.arange(*args)
    assert_close(tnp.arange(*args), want.astype(np.float32), dtype=dtypes.float32, ulps=4)


@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.float16, dtypes.bfloat16, dtypes.float64, dtypes.int8, dtypes.uint16], ids=str)
def test_arange_with_dtype(d: DType) -> None:
    assert_close(tnp.arange(2, 30, 3, dtype=d), np.arange(2, 30, 3).astype(np_dtype(d)), dtype=d)


@pytest.mark.parametrize("args,kwargs", [((3,), {"dtype": bool}), ((0, 2), {"dtype": bool}),
                                         ((0,), {"dtype": tnp.bool_}), ((True,), {}), ((np.bool_(True),), {})])
def test_a_range_of_bools_is_a_type_error_as_in_jax(args: tuple, kwargs: dict) -> None:
    # jax 0.10.2: "iota does not accept dtype bool" for each (numpy's arange(3, dtype=bool) is [False, True, True],
    # which tgfx gave; and tgfx's arange(True) was int32 [0])
    with pytest.raises(TypeError, match="arange: a range of bools"):
        tnp.arange(*args, **kwargs)
    # bool bounds beside a number are numbers, as JAX's result_type makes them
    assert_close(tnp.arange(True, 3), np.array([1, 2], np.int32), dtype=dtypes.int32)
    assert_close(tnp.arange(np.int16(3)), np.array([0, 1, 2], np.int16), dtype=dtypes.int16)


@settings(max_examples=20)
@given(start=st.floats(-100, 100), stop=st.floats(-100, 100), num=st.integers(0, 20), endpoint=st.booleans())
def test_linspace(start: float, stop: float, num: int, endpoint: bool) -> None:
    want = np.linspace(start, stop, num, endpoint=endpoint)
    tol = eps(dtypes.float32) * 4 * max(abs(start), abs(stop), 1.0)
    assert_close(tnp.linspace(start, stop, num, endpoint=endpoint), want, dtype=dtypes.float32, atol=tol)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("num,endpoint", [(0, True), (0, False), (1, True), (1, False), (3, True), (3, False)])
def test_linspace_retstep(num: int, endpoint: bool) -> None:
    # the step is NaN where there is no interval between samples (num=0, num=1 with endpoint), as numpy's and JAX's;
    # it was 0.0
    want, want_step = np.linspace(0.0, 1.0, num, endpoint=endpoint, retstep=True)
    for f in (tnp.linspace, tg.jit(tnp.linspace, static_argnames=("num", "endpoint", "retstep"))):
        out, step = f(0.0, 1.0, num=num, endpoint=endpoint, retstep=True)
        assert_close(out, want.astype(np.float32), dtype=dtypes.float32)
        assert_close(step, np.float32(want_step), dtype=dtypes.float32)


@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.float64, dtypes.float16, dtypes.int32, dtypes.int8, dtypes.uint8], ids=str)
@pytest.mark.parametrize("start,stop,num", [(0, 10, 4), (-5, 5, 4), (5, -5, 7), (0, 1, 1), (-3, 7, 11)])
def test_linspace_with_dtype(d: DType, start: int, stop: int, num: int) -> None:
    """numpy (and JAX) round integer results toward -inf, not toward zero."""
    if d.is_unsigned and min(start, stop) < 0:
        return
    want = np.linspace(start, stop, num, dtype=d.np)
    assert_close(tnp.linspace(start, stop, num, dtype=d), want, dtype=d)


# ---- masks: eye, identity, tri, tril, triu ----
# an offset past int32 (2**40, -2**62; the array API suite's eye(0, k=2**63)) raised OverflowError in the compare
@pytest.mark.parametrize("n,m,k", [(3, None, 0), (3, 5, 1), (4, 2, -1), (3, 3, 5), (3, 3, -5), (1, 1, 0), (0, 2, 0),
                                   (2, 3, 2 ** 40), (3, 2, -2 ** 62), (0, None, 2 ** 63)])
def test_eye_and_tri(n: int, m: int | None, k: int) -> None:
    assert_close(tnp.eye(n, m, k), np.eye(n, m, k, dtype=np.float32), dtype=dtypes.float32)
    assert_close(tnp.eye(n, m, k, dtype=dtypes.int8), np.eye(n, m, k, dtype=np.int8), dtype=dtypes.int8)
    assert_close(tnp.eye(n, m, k=k, dtype=dtypes.bool), np.eye(n, m, k, dtype=bool), dtype=dtypes.bool)
    assert_close(tnp.tri(n, m, k), np.tri(n, m, k, dtype=np.float32), dtype=dtypes.float32)
    # numpy's and JAX's parameter names: M= as a keyword raised TypeError
    assert_close(tnp.eye(N=n, M=m, k=k), np.eye(N=n, M=m, k=k, dtype=np.float32), dtype=dtypes.float32)
    assert_close(tnp.tri(n, M=m, k=k), np.tri(n, M=m, k=k, dtype=np.float32), dtype=dtypes.float32)
    assert_close(tnp.identity(n), np.identity(n, np.float32), dtype=dtypes.float32)


@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int64, dtypes.bool, dtypes.bfloat16], ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_tril_triu(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(min_dims=2, max_dims=4, min_side=1)))
    k = data.draw(st.integers(-4, 4))
    assert_close(tnp.tril(to_tensor(x, d), k), np.tril(x, k), dtype=d)
    assert_close(tnp.triu(to_tensor(x, d), k), np.triu(x, k), dtype=d)
    assert_close(tnp.tril(to_tensor(x, d)), np.tril(x), dtype=d)
    big = data.draw(st.sampled_from([2 ** 40, -2 ** 40]))
    assert_close(tnp.tril(to_tensor(x, d), big), np.tril(x, big), dtype=d)
    assert_close(tnp.triu(to_tensor(x, d), big), np.triu(x, big), dtype=d)


# ---- matmul and dot ----
def _mm_tol(d: DType, k: int, a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    if not d.is_float:
        return {}
    scale = float(np.abs(a.astype(np.float64)).max(initial=0) * np.abs(b.astype(np.float64)).max(initial=0))
    return {"rtol": 2 * eps(d), "atol": max(k, 1) * eps(d) * max(scale, 1e-30)}


def _np_matmul(a: np.ndarray, b: np.ndarray, d: DType) -> np.ndarray:
    if d.is_float:
        return np.matmul(a.astype(np.float64), b.astype(np.float64))
    with np.errstate(over="ignore"):
        return np.matmul(a, b)


@st.composite
def matmul_shapes(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(a, b) shapes for matmul: 1-d vectors, 2-d matrices and broadcast batches of them."""
    m, k, n = draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    batch_a, batch_b = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3)).input_shapes
    a = (k,) if draw(st.integers(0, 4)) == 0 else batch_a + (m, k)
    b = (k,) if draw(st.integers(0, 4)) == 0 else batch_b + (k, n)
    return a, b


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS + (dtypes.int32, dtypes.int8, dtypes.uint8, dtypes.bool), ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_matmul(d: DType, data: st.DataObject) -> None:
    sa, sb = data.draw(matmul_shapes())
    a = data.draw(arrays(d, sa, lo=-4, hi=4))
    b = data.draw(arrays(d, sb, lo=-4, hi=4))
    want = _np_matmul(a, b, d)
    tol = _mm_tol(d, sa[-1], a, b)
    assert_close(tnp.matmul(to_tensor(a, d), to_tensor(b, d)), want, dtype=d, **tol)
    assert_close(to_tensor(a, d) @ to_tensor(b, d), want, dtype=d, **tol)


def test_matmul_promotes() -> None:
    a, b = np.arange(6, dtype=np.int8).reshape(2, 3), np.arange(6, dtype=np.float16).reshape(3, 2)
    assert_close(tnp.matmul(to_tensor(a), to_tensor(b)), a.astype(np.float16) @ b, dtype=dtypes.float16)
    c = np.arange(6, dtype=np.int16).reshape(3, 2)
    assert_close(tnp.matmul(to_tensor(a), to_tensor(c)), a.astype(np.int16) @ c, dtype=dtypes.int16)


def test_matmul_larger_float32() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 33, 65), np.float32), rng.standard_normal((65, 17), np.float32)
    assert_close(tnp.matmul(to_tensor(a), to_tensor(b)), a.astype(np.float64) @ b, dtype=dtypes.float32,
                 **_mm_tol(dtypes.float32, 65, a, b))


@pytest.mark.parametrize("sa,sb", [((), (3,)), ((2, 3), ()), ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)),
                                   ((2, 3), (3, 4)), ((2, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((2, 2, 3), (4, 3, 2))])
def test_dot(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a = np.arange(1, 1 + int(np.prod(sa)), dtype=np.float32).reshape(sa) / 4
    b = np.arange(1, 1 + int(np.prod(sb)), dtype=np.float32).reshape(sb) - 3
    want = np.dot(a.astype(np.float64), b.astype(np.float64))
    assert_close(tnp.dot(to_tensor(a), to_tensor(b)), want, dtype=dtypes.float32)
    assert_close(to_tensor(a).dot(to_tensor(b)), want, dtype=dtypes.float32)


def test_vdot_inner_outer() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    v = np.array([1.0, -2.0, 0.5], np.float32)
    assert_close(tnp.vdot(to_tensor(a), to_tensor(b)), np.vdot(a, b), dtype=dtypes.float32)
    assert_close(tnp.inner(to_tensor(a), to_tensor(b)), np.inner(a, b), dtype=dtypes.float32)
    assert_close(tnp.inner(to_tensor(a), to_tensor(v)), np.inner(a, v), dtype=dtypes.float32)
    assert_close(tnp.inner(to_tensor(v), to_tensor(v)), np.inner(v, v), dtype=dtypes.float32)
    assert_close(tnp.outer(to_tensor(v), to_tensor(a)), np.outer(v, a), dtype=dtypes.float32)


@pytest.mark.parametrize("second", [np.complex64, np.float32])
def test_vdot_conjugates_its_first_argument(second: type) -> None:
    a, b = np.array([1 + 8j, 2 - 3j], np.complex64), np.array([8, 1], second)
    assert_close(tnp.vdot(to_tensor(a), to_tensor(b)), np.vdot(a, b), dtype=dtypes.complex64)   # 10-61j
    assert_close(tnp.vdot(to_tensor(b), to_tensor(a)), np.vdot(b, a), dtype=dtypes.complex64)   # 10+61j
    assert_close(tg.jit(tnp.vdot)(to_tensor(a), to_tensor(b)), np.vdot(a, b), dtype=dtypes.complex64)


def test_matmul_with_nan_and_inf() -> None:
    a = np.array([[1.0, np.nan], [np.inf, 1.0], [0.0, 1.0]], np.float32)
    b = np.array([[1.0, 0.0], [2.0, 1.0]], np.float32)
    with np.errstate(invalid="ignore"):
        want = a @ b
    assert_close(tnp.matmul(to_tensor(a), to_tensor(b)), want, dtype=dtypes.float32)


def test_dot_and_matmul_accept_precision_and_preferred_element_type() -> None:
    """`precision` is accepted and ignored (JAX's CPU backend ignores it too); `preferred_element_type` computes and
    returns the product in that type (int8 products summed in int32 do not wrap)."""
    a, b = np.full((2, 40), 100, np.int8), np.full((40, 3), 100, np.int8)
    for fn in (tnp.matmul, tnp.dot):
        assert_close(fn(to_tensor(a), to_tensor(b), precision="highest"), a @ b, dtype=dtypes.int8)
        out = fn(to_tensor(a), to_tensor(b), precision=None, preferred_element_type=dtypes.int32)
        assert_close(out, a.astype(np.int32) @ b.astype(np.int32), dtype=dtypes.int32)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_close(to_tensor(x).dot(to_tensor(x.T), precision=("high", "high")), x @ x.T, dtype=dtypes.float32)


# ---- meshgrid ----
@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("sizes", [(3,), (3, 2), (2, 4, 3)], ids=str)
def test_meshgrid_matches_numpy(sizes: tuple[int, ...], sparse: bool, indexing: str) -> None:
    xs = [np.arange(n, dtype=np.float32) * (i + 1) for i, n in enumerate(sizes)]
    got = tnp.meshgrid(*(to_tensor(x) for x in xs), sparse=sparse, indexing=indexing)
    want = np.meshgrid(*xs, sparse=sparse, indexing=indexing)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, dtype=dtypes.float32)


def test_meshgrid_errors() -> None:
    assert tnp.meshgrid() == []
    with pytest.raises(ValueError, match=r"every input must be 1-d, argument 1 has shape \(2, 2\)"):
        tnp.meshgrid(tnp.zeros(3), tnp.zeros((2, 2)))
    with pytest.raises(ValueError, match="indexing must be 'xy' or 'ij', got 'ji'"):
        tnp.meshgrid(tnp.zeros(3), indexing="ji")


# ---- array of a list holding Tensors ----
def test_array_of_tensors_stacks_them_with_jax_promotion() -> None:
    a, b = tg.asarray(np.float32(2.0)), tg.asarray([1.0, 3.0])
    out = tnp.array([a, 1.0, 3])
    assert out.dtype == dtypes.float32 and out.tolist() == [2.0, 1.0, 3.0]
    nested = tnp.asarray([[b, b * 2], (b, np.array([5.0, 6.0], np.float32))])
    assert nested.shape == (2, 2, 2)
    np.testing.assert_array_equal(nested.numpy(), [[[1, 3], [2, 6]], [[1, 3], [5, 6]]])
    assert tnp.array([tg.asarray(np.float16(1.0)), 2.5]).dtype == dtypes.float16       # Python scalars are weak
    assert tnp.array([tg.asarray(np.int32(1)), tg.asarray(np.float32(2))]).dtype == dtypes.float32
    assert tnp.array([a, a], dtype=dtypes.int32).tolist() == [2, 2]


def test_array_of_traced_tensors_under_jit_and_grad() -> None:
    """Inside jit and grad the Tensors have no value yet: they are stacked lazily, not read back (which would be a
    ConcretizationError)."""
    f = tg.jit(lambda x, y: tnp.asarray([x.sum(), y, x[0]]))
    x, y = tg.asarray([1.0, 3.0]), tg.asarray(np.float32(2.0))
    assert f(x, y).tolist() == [4.0, 2.0, 1.0]
    assert f(x + 1, y).tolist() == [6.0, 2.0, 2.0]
    assert f.trace_count == 1
    w = tg.asarray(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    g = tg.grad(lambda v: (tnp.array([v, v * 2]) * w).sum())(x)
    assert g.tolist() == [7.0, 10.0]


def test_array_of_tensors_errors_name_the_element() -> None:
    a = tg.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match=r"the elements of x\[1\] have different shapes \(x\[1\]\[0\] \(2,\), "
                                         r"x\[1\]\[1\] \(\)\)"):
        tnp.array([[a, a], [a, 1.0]])
    with pytest.raises(ValueError, match=r"x\[1\] is an empty list"):
        tnp.array([[a], []])


# ---- array facts, printing, formatting ----
def test_ndim_shape_size() -> None:
    t = tnp.zeros((2, 3))
    assert (tnp.ndim(t), tnp.shape(t), tnp.size(t), tnp.size(t, -1), tnp.size(t, 0)) == (2, (2, 3), 6, 3, 2)
    assert (tnp.ndim([[1, 2]]), tnp.shape([[1, 2]]), tnp.size([[1, 2]]), tnp.ndim(3.0), tnp.shape(3.0)) == \
        (2, (1, 2), 2, 0, ())
    assert tnp.ndim(np.zeros((1, 2, 3))) == 3


def test_print_options_reach_tensor_repr() -> None:
    t = tg.asarray(np.array([1.23456789, 2.0], np.float32))
    with tnp.printoptions(precision=2):
        assert "1.23," in repr(t) and "1.2345" not in repr(t)
        assert tnp.get_printoptions()["precision"] == 2
    old = tnp.get_printoptions()
    try:
        tnp.set_printoptions(precision=3)
        assert "1.235" in repr(t)
    finally:
        tnp.set_printoptions(**old)
    assert "1.2345" in repr(t)


def test_format_spec_formats_a_scalar_tensor() -> None:
    x = tg.asarray(np.float32(3.14159))
    assert f"{x:.3f}" == "3.142" and f"{x:>8.2e}" == "3.14e+00"
    assert f"{tg.asarray(np.int32(7)):04d}" == "0007" and f"{tg.asarray([2.5]):.1f}" == "2.5"
    assert f"{x}" == str(x)
    with pytest.raises(TypeError, match=r"format string '.2f' for a Tensor of shape \(2,\): a format spec needs a "
                                        r"scalar"):
        f"{tg.asarray([1.0, 2.0]):.2f}"
