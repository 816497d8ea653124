"""The array API standard's names, keywords and array methods in `tgfx.numpy` (issue #18), against numpy.

Each name the standard spells differently from numpy is checked to be numpy's function; each new function against
numpy over hypothesis shapes and dtypes; the data-dependent ones (nonzero, unique_*) eagerly against numpy and under
`jit` with `size=` against JAX's padding rules.
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import FLOATS, INTS, NUMERIC, TRANSCENDENTAL_ULPS, arrays, assert_close, np_dtype, shapes, to_tensor
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_grad import check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices import DEFAULT_DEVICE
from tgfx.dtypes import DType, dtypes

ALIASES = {
    "acos": "arccos", "asin": "arcsin", "atan": "arctan", "atan2": "arctan2", "acosh": "arccosh",
    "asinh": "arcsinh", "atanh": "arctanh", "pow": "power", "bitwise_invert": "invert",
    "bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
}


@pytest.mark.parametrize("name", ALIASES)
def test_standard_spelling_is_numpys_function(name: str) -> None:
    assert getattr(tnp, name) is getattr(tnp, ALIASES[name])


def test_namespace_constants() -> None:
    assert tnp.__array_api_version__ == "2024.12"
    assert tnp.bool is dtypes.bool and tnp.newaxis is None
    x = tnp.arange(3)
    assert x[:, tnp.newaxis].shape == (3, 1)


# ---- inverse hyperbolics, hypot, nextafter, signbit ----
# the inverse hyperbolics over their domains are rows of test_ops_elementwise.FLOAT_UNARY; here, their edges
@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.float64], ids=str)
def test_inverse_hyperbolic_edges(d: DType) -> None:
    """Accurate near 0 and 1 (where the textbook logs cancel), far out (where x**2 overflows), and at the poles."""
    big = 1e30 if d == dtypes.float32 else 1e300
    x = np.array([-big, -3, -1e-8, -0.0, 0.0, 1e-30, 2.5, big, np.inf, -np.inf, np.nan], d.np)
    c = np.array([1.0, 1 + 1e-6, 1.5, 1e10, big, np.inf, 0.5, -3.0, -big, -np.inf, np.nan], d.np)
    t = np.array([-1.0, -0.999999, -1e-9, 0.0, 0.3, 0.5, 0.9999, 1.0, 1.5], d.np)
    with np.errstate(all="ignore"):
        for fn, ref, v in ((tnp.asinh, np.arcsinh, x), (tnp.acosh, np.arccosh, c), (tnp.atanh, np.arctanh, t)):
            assert_close(fn(tg.asarray(v)), ref(v), dtype=d, ulps=TRANSCENDENTAL_ULPS)
    assert np.signbit(tnp.asinh(tg.asarray(np.array([-0.0], d.np))).numpy()[0])


def test_inverse_hyperbolic_of_integers_is_float32() -> None:
    assert_close(tnp.asinh(tnp.arange(4)), np.arcsinh(np.arange(4, dtype=np.float32)), dtype=dtypes.float32)


@pytest.mark.x64
@pytest.mark.parametrize("name", ["arcsinh", "arccosh", "arctanh"])
def test_inverse_hyperbolic_gradients(name: str) -> None:
    x = {"arcsinh": np.array([-2.0, -0.3, 0.1, 3.0]), "arccosh": np.array([1.2, 2.0, 5.0]),
         "arctanh": np.array([-0.7, -0.1, 0.2, 0.6])}[name]
    check_grads(lambda t: getattr(tnp, name)(t), x)


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_hypot(d: DType, data: st.DataObject) -> None:
    shape = data.draw(shapes())
    a, b = data.draw(arrays(d, shape, lo=-1e3, hi=1e3)), data.draw(arrays(d, shape, lo=-1e3, hi=1e3))
    assert_close(tnp.hypot(to_tensor(a, d), to_tensor(b, d)), np.hypot(a, b), dtype=d)


@pytest.mark.x64
def test_hypot_edges() -> None:
    """No overflow of the squares, no underflow of tiny ones; inf beside a NaN is inf (C's hypot)."""
    a = np.array([3e30, 3e-30, 0.0, 0.0, np.inf, np.nan, -np.inf, 1.0], np.float32)
    b = np.array([4e30, 4e-30, 0.0, -5.0, np.nan, np.inf, 2.0, np.nan], np.float32)
    assert_close(tnp.hypot(tg.asarray(a), tg.asarray(b)), np.hypot(a, b), dtype=dtypes.float32)
    check_grads(lambda x, y: tnp.hypot(x, y), np.array([3.0, -1.0, 0.5]), np.array([4.0, 2.0, -0.25]))


@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.float64, dtypes.float16], ids=str)
def test_nextafter(d: DType) -> None:
    vals = np.array([0.0, -0.0, 1.0, -1.0, 1e-3, np.inf, -np.inf, np.nan, np.finfo(d.np).max,
                     np.finfo(d.np).smallest_subnormal], d.np)
    a, b = np.meshgrid(vals, vals)
    if d == dtypes.float16:  # numpy's half nextafter(-0.0, 0.0) returns x, its float and double ones (C's) y
        a, b = a[:, 2:], b[:, 2:]
    np.testing.assert_array_equal(tnp.nextafter(tg.asarray(a), tg.asarray(b)).numpy().view(np.uint8),
                                  np.nextafter(a, b).view(np.uint8))


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC + (dtypes.bool,), ids=str)
def test_signbit(d: DType) -> None:
    x = np.array([-0.0, 0.0, -1.5, 2.0, -np.inf, np.nan, -np.nan]) if d.is_float else np.array([0, 1, 5])
    if d == dtypes.bfloat16:
        x = x[:-1]  # a negative NaN becomes the positive quiet NaN in bfloat16
    if d.kind == "i":
        x = np.array([0, -1, 5, -100])
    x = x.astype(np_dtype(d))
    assert_close(tnp.signbit(to_tensor(x, d)), np.signbit(x), dtype=dtypes.bool)


# ---- movement and linear algebra under the standard's names ----
@settings(max_examples=15)
@given(data=st.data())
def test_movement_names(data: st.DataObject) -> None:
    x = data.draw(arrays(dtypes.float32, shapes(min_dims=2, max_dims=4, min_side=1)))
    t = tg.asarray(x)
    perm = data.draw(st.permutations(range(x.ndim)))
    assert_close(tnp.permute_dims(t, tuple(perm)), np.transpose(x, perm))
    assert_close(tnp.matrix_transpose(t), np.swapaxes(x, -1, -2))
    assert_close(t.mT, np.swapaxes(x, -1, -2))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    parts = tnp.unstack(t, axis=axis)
    assert isinstance(parts, tuple) and len(parts) == x.shape[axis]
    for p, want in zip(parts, np.moveaxis(x, axis, 0), strict=True):
        assert_close(p, want)
    assert_close(tnp.concat([t, t], axis=axis), np.concatenate([x, x], axis=axis))
    assert_close(tnp.concat([t, t], axis=None), np.concatenate([x, x], axis=None))
    y = data.draw(arrays(dtypes.float32, x.shape[-1:], lo=-10, hi=10))
    assert_close(tnp.vecdot(t, tg.asarray(y)), np.sum(x * y, axis=-1), rtol=1e-4, atol=1e-4)
    assert_close(tnp.vecdot(t, t, axis=axis), np.sum(x * x, axis=axis), rtol=1e-4, atol=1e-4)



def test_broadcasting_no_arrays() -> None:
    """No arrays broadcast to nothing, as numpy's and jax.numpy's (`broadcast_arrays()` raised IndexError)."""
    assert tnp.broadcast_arrays() == [] and tnp.meshgrid() == [] and tnp.broadcast_shapes() == ()
    assert [t.shape for t in tnp.broadcast_arrays(tnp.ones(3))] == [(3,)]


@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int32, dtypes.uint8], ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_divmod_operator(d: DType, data: st.DataObject) -> None:
    """Python's divmod of a Tensor, either side, as numpy's and jax's arrays (a TypeError: Tensor had no
    __divmod__): (x // y, x % y), numpy's values."""
    x = data.draw(arrays(d, shapes(max_dims=2)))
    y = data.draw(arrays(d, x.shape, lo=1, hi=9))
    for got, want in ((divmod(tg.asarray(x), tg.asarray(y)), divmod(x, y)), (divmod(tg.asarray(x), 3), divmod(x, 3)),
                      (divmod(7, tg.asarray(y)), divmod(d.np.type(7), y))):
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, want, strict=True):
            assert g.dtype == d
            assert_close(g, w)

def test_matrix_transpose_needs_two_axes() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        tnp.matrix_transpose(tnp.arange(3))


def test_astype_and_complex_parts_of_reals() -> None:
    x = tnp.asarray([1.5, -2.5])
    assert tnp.astype(x, tnp.int32).tolist() == [1, -2]
    assert tnp.astype(x, tnp.float32, copy=False) is x and tnp.astype(x, tnp.float32) is not x
    assert tnp.conj(x) is x and tnp.real(x) is x and tnp.imag(x).tolist() == [0.0, 0.0]


def test_tensor_astype_takes_copy_and_device() -> None:
    # numpy's ndarray.astype(dtype, copy=False) and jax.Array.astype(dtype, copy=, device=): Tensor.astype took only
    # the dtype (TypeError: unexpected keyword argument 'copy')
    a = np.array([1.5, -2.5], np.float32)
    x = tg.asarray(a)
    assert x.astype(np.float32, copy=False) is x and x.astype(tnp.float32, copy=True) is not x
    assert_close(x.astype(np.int32, copy=False), a.astype(np.int32, copy=False), dtype=dtypes.int32)
    y = x.astype(tnp.int16, device="CPU:1")
    assert y.device == "CPU:1" and y.dtype is tnp.int16 and y.tolist() == [1, -2]
    assert x.astype(tnp.float32, device=x.device).tolist() == a.tolist()


# ---- dtype queries ----
def test_finfo_iinfo() -> None:
    for d in (tnp.float16, tnp.float32):
        fi, ref = tnp.finfo(d), np.finfo(d.dtype)
        assert (fi.bits, fi.eps, fi.max, fi.min, fi.smallest_normal) == (
            ref.bits, float(ref.eps), float(ref.max), float(ref.min), float(ref.smallest_normal))
        assert fi.dtype is d and isinstance(fi.eps, float)
    assert tnp.finfo(tnp.ones(2)).dtype is tnp.float32
    assert tnp.finfo(tnp.bfloat16).eps == 2.0 ** -7 and tnp.finfo(tnp.bfloat16).max == 3.3895313892515355e38
    for d in INTS:
        ii = tnp.iinfo(d)
        assert (ii.bits, ii.min, ii.max) == (d.bits, int(np.iinfo(d.np).min), int(np.iinfo(d.np).max))
    with pytest.raises(TypeError, match="iinfo"):
        tnp.finfo(tnp.int32)
    with pytest.raises(TypeError, match="finfo"):
        tnp.iinfo(tnp.float32)


def test_can_cast_isdtype_result_type() -> None:
    assert tnp.can_cast(tnp.int8, tnp.int16) and not tnp.can_cast(tnp.int16, tnp.int8)
    assert tnp.can_cast(tnp.uint8, tnp.int16) and not tnp.can_cast(tnp.uint16, tnp.int16)
    assert tnp.can_cast(tnp.bool, tnp.bfloat16) and not tnp.can_cast(tnp.int16, tnp.bfloat16)
    assert tnp.can_cast(tnp.ones(2), tnp.float32)
    # a question about the types as named: int64 is int64 outside x64 mode too (jnp.can_cast's answers)
    assert tnp.can_cast(tnp.uint32, tnp.int64) and tnp.can_cast("uint32", np.int64)
    assert not tnp.can_cast(tnp.uint64, tnp.int64) and tnp.can_cast(tnp.bfloat16, tnp.complex64)
    assert tnp.isdtype(tnp.int8, "signed integer") and not tnp.isdtype(tnp.uint8, "signed integer")
    assert tnp.isdtype(tnp.uint8, ("integral", "real floating")) and tnp.isdtype(tnp.float16, "numeric")
    assert not tnp.isdtype(tnp.bool, "numeric") and tnp.isdtype(tnp.bool, tnp.bool)
    assert not tnp.isdtype(tnp.float32, tnp.float64) and tnp.isdtype(tnp.float64, "real floating")   # as named
    with pytest.raises(ValueError, match="unknown kind"):
        tnp.isdtype(tnp.int8, "integer")
    assert tnp.result_type(tnp.int8, tnp.uint8) is tnp.int16
    assert tnp.result_type(tnp.int8, 1) is tnp.int8 and tnp.result_type(tnp.int8, 1.0) is tnp.float32
    assert tnp.result_type(tnp.ones(2, tnp.float16), tnp.int8) is tnp.float16
    # NumPy arrays and scalars stand for their dtypes, strong ones (they were taken for dtypes themselves)
    assert tnp.result_type(np.zeros(2, np.float16), 1.0) is tnp.float16 and tnp.result_type(np.int8(1)) is tnp.int8
    assert tnp.result_type(np.zeros(2, np.int8), 1.0) is tnp.float32 and tnp.issubdtype(
        tnp.result_type(np.ones(3, np.float32)), tnp.floating)


def test_namespace_info() -> None:
    info = tnp.__array_namespace_info__()
    assert info.default_device() == DEFAULT_DEVICE and DEFAULT_DEVICE in info.devices()   # CPU:0 unless TGFX_DEVICE
    assert info.default_dtypes() == {"real floating": tnp.float32, "complex floating": tnp.complex64,
                                     "integral": tnp.int32, "indexing": tnp.int32}   # the standard's four keys
    assert set(info.dtypes(kind="unsigned integer")) == {"uint8", "uint16", "uint32"}
    assert "float16" not in info.dtypes() and "float32" in info.dtypes()
    assert info.capabilities()["boolean indexing"] is False  # JAX's answer: not under jit


@pytest.mark.x64
def test_namespace_info_x64() -> None:
    info = tnp.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] is tnp.float64 and "int64" in info.dtypes()


# ---- small functions ----
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.bool], ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_count_nonzero_cumulative_diff(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(min_dims=1, min_side=1), lo=-5, hi=5))
    t = to_tensor(x, d)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    assert_close(tnp.count_nonzero(t), np.count_nonzero(x), dtype=dtypes.int32)
    assert_close(tnp.count_nonzero(t, axis=axis, keepdims=True), np.count_nonzero(x, axis=axis, keepdims=True))
    if not d.is_bool:
        for include in (False, True):
            assert_close(tnp.cumulative_sum(t, axis=axis, include_initial=include),
                         np.cumulative_sum(x, axis=axis, include_initial=include, dtype=tnp.sum(t).dtype.np))
    n = data.draw(st.integers(0, 2))
    assert_close(tnp.diff(t, n=n, axis=axis), np.diff(x, n=n, axis=axis))
    assert_close(tnp.diff(t, axis=axis, prepend=x.take([0], axis=axis), append=0),
                 np.diff(x, axis=axis, prepend=x.take([0], axis=axis), append=0))


@pytest.mark.parametrize("x64", [0, 1])
def test_diff_joins_python_scalars_weakly(x64: int) -> None:
    # as jnp.diff: a Python scalar prepend/append takes a's dtype (it promoted as int32/float32, int64/float64 with
    # x64), and n=0 returns a itself, without them (it returned them joined)
    from tgfx.config import Context
    with Context(TGFX_ENABLE_X64=x64):
        a = np.array([1, 2, 4], np.int16)
        for f in (tnp.diff, tg.jit(tnp.diff, static_argnames=("n", "prepend", "append"))):
            assert_close(f(tg.asarray(a), prepend=-1), np.int16([2, 1, 2]), dtype=dtypes.int16)
            assert_close(f(tg.asarray(a), n=0, append=9), a, dtype=dtypes.int16)
        assert_close(tnp.diff(tg.asarray(a.astype(np.float16)), append=0.5), np.float16([1, 2, -3.5]),
                     dtype=dtypes.float16)
        assert_close(tnp.diff(tg.asarray(a.astype(np.uint8)), prepend=300), np.uint8([213, 1, 2]), dtype=dtypes.uint8)
        assert_close(tnp.diff(tg.asarray(a), append=2.5), np.float32([1, 2, -1.5]), dtype=dtypes.default_float)
        # an array keeps its own dtype in the promotion
        assert_close(tnp.diff(tg.asarray(a), prepend=tg.asarray(np.int32([1]))), np.int32([0, 1, 2]),
                     dtype=dtypes.int32)


def test_cumulative_prod_and_axis_rule() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    assert_close(tnp.cumulative_prod(tg.asarray(x), axis=1, include_initial=True),
                 np.cumulative_prod(x, axis=1, include_initial=True))
    with pytest.raises(ValueError, match="axis must be given"):
        tnp.cumulative_sum(tg.asarray(x))


def test_empty_like() -> None:
    e = tnp.empty_like(tnp.ones((2, 3), tnp.int8))
    assert e.shape == (2, 3) and e.dtype is tnp.int8


# ---- keywords ----
@settings(max_examples=10)
@given(data=st.data())
def test_std_var_correction(data: st.DataObject) -> None:
    x = data.draw(arrays(dtypes.float32, shapes(min_dims=1, min_side=2), lo=-10, hi=10))
    c = data.draw(st.sampled_from([0, 1, 0.5]))
    with np.errstate(all="ignore"):
        assert_close(tnp.var(tg.asarray(x), correction=c), np.var(x, ddof=c), rtol=1e-4, atol=1e-4)
        assert_close(tnp.std(tg.asarray(x), axis=0, correction=c), np.std(x, axis=0, ddof=c), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="ddof and correction"):
        tnp.std(tg.asarray(x), ddof=1, correction=1)


def test_clip_min_max_keywords() -> None:
    x = tnp.arange(6)
    assert tnp.clip(x, min=1, max=4).tolist() == [1, 1, 2, 3, 4, 4]
    assert tnp.clip(x, max=2).tolist() == [0, 1, 2, 2, 2, 2] and tnp.clip(x, 3).tolist() == [3, 3, 3, 3, 4, 5]
    assert tnp.clip(x, a_min=1, a_max=4).tolist() == tnp.clip(x, 1, 4).tolist() == [1, 1, 2, 3, 4, 4]
    assert tnp.clip(x, min=tnp.asarray([5, 0, 0, 0, 0, 0])).tolist() == [5, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="a_min and min"):
        tnp.clip(x, a_min=1, min=1)


def test_device_keyword_on_creation_functions() -> None:
    dev = "CPU:1"
    made = [tnp.zeros(3, device=dev), tnp.ones((2,), device=dev), tnp.empty(2, device=dev),
            tnp.full((2,), 7, device=dev), tnp.arange(4, device=dev), tnp.linspace(0, 1, 5, device=dev),
            tnp.eye(3, device=dev), tnp.identity(2, device=dev), tnp.asarray([1, 2], device=dev),
            tnp.full((2,), tnp.asarray(3), device=dev)]
    x = tnp.asarray([1.0, 2.0], device=dev)
    made += [tnp.zeros_like(x), tnp.ones_like(x), tnp.full_like(x, 2), tnp.empty_like(x),
             tnp.zeros_like(tnp.ones(2), device=dev)]
    for t in made:
        assert t.device == dev, t
        t.numpy()
    assert tnp.zeros_like(x, device="CPU").device == "CPU:0"
    np.testing.assert_allclose(tnp.linspace(0, 1, 5, device=dev).numpy(), np.linspace(0, 1, 5))


def test_asarray_copy() -> None:
    x = tnp.asarray([1.0, 2.0])
    assert tnp.asarray(x) is x and tnp.asarray(x, copy=False) is x
    y = tnp.asarray(x, copy=True)
    assert y is not x and y.tolist() == [1.0, 2.0]
    y.realize()
    assert y.uop is not x.uop  # a buffer of its own
    with pytest.raises(ValueError, match="copy=False"):
        tnp.asarray(np.ones(2), copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        tnp.asarray(x, dtype=tnp.int32, copy=False)



_BUFFER_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.float32, np.float64, np.bool_]


@pytest.mark.x64
@settings(max_examples=15)
@given(data=st.data())
def test_asarray_of_a_buffer_keeps_its_element_type(data: st.DataObject) -> None:
    """Objects of the buffer protocol (memoryview, bytearray, array.array) are typed data, as a numpy array is, and
    `asarray` keeps their type and shape, as numpy's and jax.numpy's: they were read as lists of Python scalars (a
    bytearray int32, an array.array('h') int32)."""
    import array
    a = data.draw(hnp.arrays(st.sampled_from(_BUFFER_TYPES), shapes(max_dims=3)))
    for host in (memoryview(a), array.array(a.dtype.char, a.reshape(-1).tobytes()) if a.dtype.char in "bBhHiIfd"
                 else None):
        if host is None:
            continue
        t = tnp.asarray(host)
        want = np.asarray(host)
        assert t.dtype.np == want.dtype and t.shape == want.shape
        np.testing.assert_array_equal(t.numpy(), want)
    b = tnp.asarray(bytearray(b"\x01\xff"))
    assert b.dtype == tnp.uint8 and b.tolist() == [1, 255]
    assert tnp.asarray(array.array("h", [1, -2]), dtype=tnp.float32).tolist() == [1.0, -2.0]


def test_asarray_of_a_64_bit_buffer_narrows_as_numpy_data() -> None:
    import array
    assert tnp.asarray(array.array("d", [1.5, 2.0])).dtype == tnp.float32   # as jnp.asarray without x64
    assert tnp.asarray(memoryview(np.arange(3, dtype=np.int64))).dtype == tnp.int32

def test_reshape_copy() -> None:
    x = tnp.arange(6).realize()
    v = tnp.reshape(x, (2, 3), copy=False)
    c = tnp.reshape(x, (2, 3), copy=True).realize()
    assert v.tolist() == c.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert c.uop.src[0] is not x.uop


# ---- array methods ----
def test_array_namespace_and_to_device() -> None:
    x = tnp.asarray([1.0, 2.0], device="CPU:0")
    assert x.__array_namespace__() is tnp and x.__array_namespace__(api_version="2023.12") is tnp
    with pytest.raises(ValueError, match="api_version"):
        x.__array_namespace__(api_version="2019.01")
    y = x.to_device("CPU:1")
    assert y.device == "CPU:1" and y.tolist() == [1.0, 2.0] and x.to_device("CPU:0") is x
    assert complex(tnp.asarray(2.5)) == 2.5 + 0j


def test_dlpack_shares_the_cpu_buffer() -> None:
    """numpy.from_dlpack reads the Tensor's own buffer (no copy), read-only, and keeps it alive past the Tensor."""
    x = tnp.arange(6, device="CPU").reshape(2, 3) * 2   # (host memory: the CPU's, whatever the default device)
    a = np.from_dlpack(x)
    assert x.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) * 2)
    assert not a.flags.writeable
    from tgfx.lowering.execute import buffer_memory
    from tgfx.lowering.layout import buffer_view
    assert a.ctypes.data == buffer_memory(buffer_view(x.uop)).ptr  # the same memory, not a copy
    del x
    import gc
    gc.collect()
    np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) * 2)
    assert np.from_dlpack(tnp.zeros((0, 3), device="CPU")).shape == (0, 3)
    with pytest.raises(BufferError, match="bfloat16"):
        np.from_dlpack(tnp.ones(2, tnp.bfloat16, device="CPU"))


def test_dlpack_of_jit_results_is_not_recycled() -> None:
    """A jitted function reuses the memory of results nobody holds: a DLPack view holds its result."""
    f = tg.jit(lambda x: x * 2)
    first = np.from_dlpack(f(tnp.arange(3.0, device="CPU")))   # (host memory: the CPU's)
    for i in range(4):
        f(tnp.arange(3.0, device="CPU") + i)
    np.testing.assert_array_equal(first, [0.0, 2.0, 4.0])


def test_from_dlpack() -> None:
    t = tnp.from_dlpack(np.arange(3, dtype=np.int32))
    assert t.dtype is tnp.int32 and t.tolist() == [0, 1, 2]
    assert tnp.from_dlpack(np.ones(2, np.float32), device="CPU:1").device == "CPU:1"


def test_from_dlpack_of_a_tensor_on_its_own_device_is_itself() -> None:
    # device= naming where the Tensor is ("CPU" or "CPU:0" for one on CPU:0) moves nothing, so copy=False holds: it
    # raised "moving a Tensor from CPU:0 to CPU:0 copies it" (array-api-tests test_from_dlpack)
    x = tnp.arange(3.0)   # uncommitted, on the default device
    assert tnp.from_dlpack(x, device=x.device, copy=False) is x and tnp.from_dlpack(x, device=x.device) is x
    c = tnp.asarray(np.arange(3.0, dtype=np.float32), device="CPU")   # (CPU:0 whatever the default device)
    for device in ("CPU", "CPU:0"):
        assert tnp.from_dlpack(c, device=device, copy=False) is c and tnp.from_dlpack(c, device=device) is c
    y = tnp.from_dlpack(c, device="CPU:1")
    assert y.device == "CPU:1" and y.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="copies it"):
        tnp.from_dlpack(c, device="CPU:1", copy=False)


# ---- Python ints that do not fit: OverflowError, as in JAX ----
@pytest.mark.parametrize("make", [
    lambda: tnp.asarray(2 ** 40), lambda: tnp.asarray(2 ** 31), lambda: tnp.asarray(-2 ** 31 - 1),
    lambda: tnp.full((2,), 2 ** 40), lambda: tnp.asarray([1, 2 ** 40]), lambda: tnp.asarray([[1], [2 ** 70]]),
    lambda: tnp.asarray(2 ** 64), lambda: tnp.asarray(300, dtype=tnp.uint8), lambda: tnp.asarray(-1, dtype=tnp.uint32),
    lambda: tnp.arange(3) + 2 ** 40,
    lambda: tnp.where(tnp.arange(3) > 0, 2 ** 40, 0), lambda: tnp.arange(3) < 2 ** 31,
], ids=range(12))
def test_python_int_that_does_not_fit_is_overflow_error(make) -> None:  # noqa: ANN001
    with pytest.raises(OverflowError, match="too large to convert"):
        make()


def test_python_ints_that_fit_keep_their_values() -> None:
    assert tnp.asarray(-2 ** 31).item() == -2 ** 31 and tnp.asarray(2 ** 31 - 1).item() == 2 ** 31 - 1
    assert tnp.asarray(2 ** 40, dtype=tnp.float32).item() == 2.0 ** 40
    assert tnp.full((2,), 2 ** 40, dtype=tnp.float32).tolist() == [2.0 ** 40] * 2
    assert (tnp.zeros(2) + 2 ** 70).tolist() == [2.0 ** 70] * 2
    assert tnp.full((2,), 300, dtype=tnp.int8).tolist() == [44, 44]  # a given dtype converts the fill, as JAX's
    # an int operand that fits the default int type wraps into a narrower operand's type, as in JAX
    assert (tnp.arange(3, dtype=tnp.int8) + 1000).tolist() == [-24, -23, -22]
    assert (tnp.arange(3, dtype=tnp.uint8) - 1).tolist() == [255, 0, 1]
    # one that fits the operand's own type is exact (JAX would refuse 3e9 as an int32 first)
    assert (tnp.arange(2, dtype=tnp.uint32) + 3_000_000_000).tolist() == [3_000_000_000, 3_000_000_001]
    assert tnp.asarray(np.array([2 ** 40], np.int64)).dtype is tnp.int32  # numpy data narrows, as in JAX


@pytest.mark.x64
def test_python_int_overflow_x64() -> None:
    assert tnp.asarray(2 ** 40).item() == 2 ** 40 and tnp.full((2,), 2 ** 40).dtype is tnp.int64
    assert tnp.asarray(2 ** 63, dtype=tnp.uint64).item() == 2 ** 63
    assert (tnp.arange(2, dtype=tnp.uint64) + 2 ** 63).tolist() == [2 ** 63, 2 ** 63 + 1]
    with pytest.raises(OverflowError, match="too large to convert to int64"):
        tnp.asarray(2 ** 63)
    with pytest.raises(OverflowError, match="too large"):
        tnp.arange(2) + 2 ** 64


# ---- data-dependent shapes, as JAX: eager reads the value, jit needs size= ----
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int32, dtypes.uint8, dtypes.bool], ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_nonzero_and_unique_eager(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(min_dims=1, max_side=5), lo=-3, hi=3))
    if d.is_float:
        x = np.round(x)  # repeats, so the counts are not all 1
    t = to_tensor(x, d)
    for got, want in zip(tnp.nonzero(t), np.nonzero(x), strict=True):
        assert_close(got, want, dtype=dtypes.int32)
    if x.size == 0:
        return
    r, ref = tnp.unique_all(t), np.unique_all(x)
    assert_close(r.values, ref.values, dtype=d)
    for name in ("indices", "inverse_indices", "counts"):
        assert_close(getattr(r, name), getattr(ref, name).reshape(getattr(r, name).shape), dtype=dtypes.int32)
    assert r.inverse_indices.shape == x.shape
    assert_close(tnp.unique_values(t), np.unique(x))  # sorted (numpy 2.3's unique_values need not be)
    assert_close(tnp.unique_counts(t).counts, np.unique_counts(x).counts)
    assert_close(tnp.unique_inverse(t).inverse_indices, np.unique_inverse(x).inverse_indices.reshape(x.shape))


@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int32, dtypes.bool], ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_size_argument_matches_eager_and_pads_as_jax(d: DType, data: st.DataObject) -> None:
    """With size=N the first N results, padded (JAX's rules: nonzero with fill_value, 0 by default; unique with the
    smallest value, counts 0, indices of the smallest), computed the same eagerly and under jit."""
    x = data.draw(arrays(d, shapes(min_dims=1, max_side=5, min_side=1), lo=-3, hi=3))
    if d.is_float:
        x = np.round(x)
    size = data.draw(st.integers(1, x.size + 2))
    t = to_tensor(x, d)
    want_nz = [np.concatenate([p[:size], np.zeros(max(size - p.size, 0), int)]) for p in np.nonzero(x)]
    ref = np.unique_all(x)
    k = ref.values.size
    pad = max(size - k, 0)
    want_u = (np.concatenate([ref.values[:size], np.full(pad, ref.values[0], x.dtype)]),
              np.concatenate([ref.indices[:size], np.full(pad, ref.indices[0])]),
              np.concatenate([ref.counts[:size], np.zeros(pad, int)]))

    def run(v: tg.Tensor) -> tuple:
        r = tnp.unique_all(v, size=size)
        return tnp.nonzero(v, size=size), (r.values, r.indices, r.counts), r.inverse_indices

    for nz, u, inv in (run(t), tg.jit(run)(t)):
        for got, want in zip(nz, want_nz, strict=True):
            assert_close(got, want, dtype=dtypes.int32)
        for got, want in zip(u, want_u, strict=True):
            assert_close(got, want)
        assert_close(inv, ref.inverse_indices.reshape(x.shape), dtype=dtypes.int32)


def test_unique_nans_are_distinct_and_fill_value() -> None:
    x = np.array([3.0, 1.0, np.nan, 1.0, np.nan, 2.0], np.float32)
    r = tnp.unique_all(x, size=6, fill_value=-1.0)
    np.testing.assert_array_equal(r.values.numpy(), [1.0, 2.0, 3.0, np.nan, np.nan, -1.0])
    assert r.counts.tolist() == [2, 1, 1, 1, 1, 0] and r.inverse_indices.tolist() == [2, 0, 3, 0, 4, 1]
    np.testing.assert_array_equal(tnp.unique_values(x).numpy(), [1.0, 2.0, 3.0, np.nan, np.nan])
    ys = tnp.nonzero(tnp.asarray([[0, 1], [2, 0]]), size=3, fill_value=(-1, -2))
    assert [y.tolist() for y in ys] == [[0, 1, -1], [1, 0, -2]]


def test_traced_data_dependent_shapes_name_size() -> None:
    x = tnp.asarray([0.0, 2.0, 0.0, 3.0])
    for f in (lambda v: tnp.nonzero(v), lambda v: tnp.unique_values(v), lambda v: tnp.unique_all(v).counts):
        with pytest.raises(tg.ConcretizationError, match="Pass size=N"):
            tg.jit(f)(x)
    with pytest.raises(tg.ConcretizationError, match=r"nonzero\(mask, size=N\)"):
        tg.jit(lambda v: v[v > 1].sum())(x)
    with pytest.raises(tg.ConcretizationError, match="boolean mask index"):
        tg.vmap(lambda r: r[r > 1].sum())(x.reshape(2, 2))
    with pytest.raises(ValueError, match="0-d"):
        tnp.nonzero(tnp.asarray(1))


def test_boolean_mask_indexing_eager() -> None:
    """A concrete boolean Tensor indexes, updates and differentiates as numpy's mask (JAX's eager rule)."""
    v = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    x = tg.asarray(v)
    m = x > 4.5
    assert_close(x[m], v[v > 4.5])
    assert_close(x[m[:, 0]], v[v[:, 0] > 4.5])
    assert_close(x[1:, m[0] | True], v[1:, :])
    assert_close(x.at[m].set(0.0), np.where(v > 4.5, 0, v))
    g = tg.grad(lambda t: (t[t > 4.5] ** 2).sum())(x)
    assert_close(g, np.where(v > 4.5, 2 * v, 0))
    f = tg.jit(lambda t: t[tnp.nonzero(t > 4.5, size=7)].sum())
    assert f(x).item() == v[v > 4.5].sum()


@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int32, dtypes.float64], ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_searchsorted(d: DType, data: st.DataObject) -> None:
    a = np.sort(data.draw(arrays(d, st.integers(0, 6).map(lambda n: (n,)), lo=-5, hi=5)))
    v = data.draw(arrays(d, shapes(max_dims=2), lo=-6, hi=6))
    if d.is_float:
        a, v = np.round(a), np.round(v)  # ties with the sorted values
    for side in ("left", "right"):
        assert_close(tnp.searchsorted(to_tensor(a, d), to_tensor(v, d), side=side), np.searchsorted(a, v, side),
                     dtype=dtypes.int32)   # JAX's in either x64 mode
    perm = np.random.default_rng(0).permutation(a.size)
    assert_close(tnp.searchsorted(to_tensor(a[perm], d), to_tensor(v, d), sorter=np.argsort(perm)),
                 np.searchsorted(a, v))


def test_searchsorted_nan_and_jit() -> None:
    a = np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32)
    v = np.array([2.0, 0.0, 5.0, np.nan], np.float32)
    f = tg.jit(lambda a, v: tnp.searchsorted(a, v, side="right"))
    assert f(tg.asarray(a), tg.asarray(v)).tolist() == np.searchsorted(a, v, "right").tolist()
    assert tnp.searchsorted(a, v).tolist() == np.searchsorted(a, v).tolist()


@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "sort", "compare_all"])
def test_searchsorted_takes_jaxs_methods_with_one_answer(method: str) -> None:
    # jnp.searchsorted's method= picks an algorithm, never the answer: numpy's for a short and a long sorted array
    v = np.array([[2.0, 0.0], [5.0, np.nan]], np.float32)
    for a in (np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32), np.repeat(np.arange(40, dtype=np.float32), 2)):
        for side in ("left", "right"):
            got = tnp.searchsorted(a, v, side=side, method=method)
            assert got.dtype == dtypes.int32 and got.tolist() == np.searchsorted(a, v, side).tolist()
            assert tg.asarray(a).searchsorted(v, side, method=method).tolist() == got.tolist()
    with pytest.raises(ValueError, match="one of 'scan', 'scan_unrolled', 'sort', 'compare_all' .*, got 'bisect'"):
        tnp.searchsorted(a, v, method="bisect")


@settings(max_examples=10)
@given(st.integers(64, 700), st.sampled_from(["left", "right"]), st.booleans(), st.integers(0, 2 ** 16))
def test_searchsorted_by_halving_a_long_sorted_array(n: int, side: str, nans: bool, seed: int) -> None:
    # from SEARCH_BISECT elements on: a binary search (log2 n loads a query), numpy's answers with ties, NaNs
    # (last) and queries outside the range; under jit and vmap too
    from tgfx.numpy._data_dependent import SEARCH_BISECT
    assert n >= SEARCH_BISECT
    rng = np.random.default_rng(seed)
    a = np.sort(np.round(rng.standard_normal(n) * 4).astype(np.float32))
    if nans:
        a[-3:] = np.nan
    v = np.round(rng.standard_normal((5, 40)) * 6).astype(np.float32)
    v[0, :3] = [np.nan, -np.inf, np.inf]
    want = np.searchsorted(a, v, side)
    assert tnp.searchsorted(tg.asarray(a), tg.asarray(v), side=side).tolist() == want.tolist()
    f = tg.jit(tg.vmap(lambda q: tnp.searchsorted(tg.asarray(a), q, side=side)))
    assert f(tg.asarray(v)).tolist() == want.tolist()


# ---- the linalg extension's names that need no factorisation ----
@pytest.mark.x64
def test_linalg_extension_names() -> None:
    L = tnp.linalg
    a = np.random.default_rng(0).standard_normal((2, 3, 3))
    t = tg.asarray(a)
    assert_close(L.matrix_power(t, 3), np.linalg.matrix_power(a, 3))
    assert_close(L.matrix_power(t, -2), np.linalg.matrix_power(a, -2), rtol=1e-9, atol=1e-9)
    assert_close(L.matrix_power(t, 0), np.broadcast_to(np.eye(3), (2, 3, 3)))
    assert_close(L.cross(t, t[::-1]), np.cross(a, a[::-1]))
    assert_close(L.cross(t, t[::-1], axis=1), np.cross(a, a[::-1], axis=1))
    assert_close(L.vector_norm(t, axis=(0, 2), ord=1), np.linalg.vector_norm(a, axis=(0, 2), ord=1))
    assert_close(L.vector_norm(t), np.linalg.vector_norm(a))
    assert_close(L.matrix_norm(t, ord=np.inf, keepdims=True), np.linalg.matrix_norm(a, ord=np.inf, keepdims=True))
    assert_close(L.trace(t, offset=1), np.linalg.trace(a, offset=1))
    assert_close(L.diagonal(t, offset=-1), np.linalg.diagonal(a, offset=-1))
    assert_close(L.outer(np.arange(2.0), np.arange(3.0)), np.outer(np.arange(2.0), np.arange(3.0)))
    assert_close(L.tensordot(t, t, axes=([1, 2], [1, 2])), np.tensordot(a, a, axes=([1, 2], [1, 2])))
    assert_close(L.vecdot(t, t), np.linalg.vecdot(a, a))
    assert_close(L.matmul(t, t), a @ a)
    assert_close(L.matrix_transpose(t), np.linalg.matrix_transpose(a))
    with pytest.raises(ValueError, match="1-d"):
        L.outer(t, t)


# ---- reading elements one by one ----
def test_reading_elements_of_a_computed_tensor_runs_no_kernels() -> None:
    """`float(y[i, j])` in a loop reads the element from y's buffer: no kernel (and no compile) per index."""
    v = np.arange(60.0, dtype=np.float32).reshape(3, 4, 5)
    y = (tg.asarray(v) * 2).realize()
    tg.counters.reset()
    assert [float(y[i, j, k]) for i in range(3) for j in range(4) for k in range(5)] == (2 * v).reshape(-1).tolist()
    views = y.transpose(2, 0, 1)[::-1, 1:, ::2]
    want = (2 * v).transpose(2, 0, 1)[::-1, 1:, ::2]
    assert all(views[a, b, c].item() == want[a, b, c] for a in range(5) for b in range(2) for c in range(2))
    assert tnp.broadcast_to(y[1, 2, 3], (4, 4))[3, 1].item() == 2 * v[1, 2, 3]
    assert int(y.reshape(60)[17]) == 34 and bool(y[0, 0, 1])
    assert tnp.pad(y, 1)[0, 0, 0].item() == 0.0 and tnp.pad(y, 1)[1, 1, 2].item() == 2.0  # pad: zeros, or y
    assert tg.counters.kernel_count == 0 and tg.counters.compile_count == 0
    assert (y + 1)[0, 0, 1].item() == 3.0 and tg.counters.kernel_count == 1  # a computed element is computed


def test_scalar_boolean_index() -> None:
    """x[True] adds an axis, x[False] an empty one (numpy's and JAX's rule), for bools, numpy and Tensor scalars."""
    v = np.arange(6).reshape(2, 3)
    x = tg.asarray(v)
    for key in (True, False, np.bool_(True), np.array(False)):
        assert_close(x[key], v[key])
        assert_close(x[tg.asarray(key)], v[key])
    assert tnp.asarray(5)[tnp.asarray(False)].shape == (0,)


def test_vecdot_keeps_the_promoted_dtype() -> None:
    """jnp.vecdot's (and the standard's) result is the operands' promotion, not sum's widened integer."""
    a = np.array([[200, 100], [3, 4]], np.uint8)
    assert_close(tnp.vecdot(tg.asarray(a), tg.asarray(a)), np.sum(a * a, axis=-1, dtype=np.uint8), dtype=dtypes.uint8)


@pytest.mark.x64
def test_sum_of_narrow_integers_in_x64_is_64_bit() -> None:
    """As jnp.sum: integers narrower than the default integer sum in it (int64 with x64, int32 too)."""
    for d, out in ((tnp.int8, tnp.int64), (tnp.int32, tnp.int64), (tnp.uint8, tnp.uint64), (tnp.uint32, tnp.uint64),
                   (tnp.bool, tnp.int64), (tnp.int64, tnp.int64)):
        x = tnp.ones(3, d)
        assert tnp.sum(x).dtype is out and tnp.prod(x).dtype is out and tnp.cumulative_sum(x).dtype is out
    big = np.full(4, 2 ** 31 - 1, np.int32)
    assert tnp.sum(tg.asarray(big)).item() == 4 * (2 ** 31 - 1)


def test_slogdet_is_a_named_pair() -> None:
    r = tnp.linalg.slogdet(tg.asarray(np.array([[2.0, 0.0], [0.0, -3.0]], np.float32)))
    assert r.sign.item() == -1.0 and abs(r.logabsdet.item() - np.log(6.0)) < 1e-6
    sign, logdet = r
    assert sign is r.sign
