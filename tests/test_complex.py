"""complex64 (and complex128 in x64 mode) end to end: creation, promotion, arithmetic, the math library, reductions,
movement, jit, and gradients with JAX's convention, against numpy and finite differences (and jax where it is
installed)."""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.counters import counters
from tgfx.ir.ops import Ops

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # the jax comparisons skip; finite differences still check every gradient
    jax = jnp = None
needs_jax = pytest.mark.skipif(jax is None, reason="jax is not installed")

RTOL = 1e-5


def cvalues(shape: tuple[int, ...], seed: int = 0, dtype: type = np.complex64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def assert_close(got: tg.Tensor, want: np.ndarray, rtol: float = RTOL, atol: float = 1e-6) -> None:
    g = got.numpy()
    assert g.dtype == np.asarray(want).dtype, (g.dtype, np.asarray(want).dtype)
    np.testing.assert_allclose(g, want, rtol=rtol, atol=atol)


# ---- creation, dtypes and promotion ----
def test_creation_and_numpy_roundtrip() -> None:
    x = cvalues((2, 3))
    t = tnp.asarray(x)
    assert t.dtype == tnp.complex64 and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), x)
    assert tnp.asarray([1j, 2]).dtype == tnp.complex64
    assert tnp.asarray(1 + 2j).item() == 1 + 2j and complex(tnp.asarray(3j)) == 3j
    np.testing.assert_array_equal(tnp.zeros((2,), tnp.complex64).numpy(), np.zeros(2, np.complex64))
    np.testing.assert_array_equal(tnp.ones((2,), dtype="complex64").numpy(), np.ones(2, np.complex64))
    full = tnp.full((3,), 1 - 2j)
    assert full.dtype == tnp.complex64
    np.testing.assert_array_equal(full.numpy(), np.full(3, 1 - 2j, np.complex64))
    np.testing.assert_array_equal(tnp.zeros_like(t).numpy(), np.zeros((2, 3), np.complex64))
    assert tnp.array([t[0, 0], 1, 2j]).dtype == tnp.complex64


def test_complex128_becomes_complex64_without_x64() -> None:
    import sys
    sys.modules["tgfx.dtypes"]._warned.discard("complex128")   # the warning is given once per type
    with pytest.warns(UserWarning, match="complex128 is not enabled"):
        t = tnp.asarray(np.array([1 + 1j]), dtype=np.complex128)
    assert t.dtype == tnp.complex64
    assert tnp.asarray(np.array([1 + 1j], np.complex128)).dtype == tnp.complex64   # numpy data: silently, as JAX


@pytest.mark.x64
def test_complex128_in_x64_mode() -> None:
    x = cvalues((4,), dtype=np.complex128)
    t = tnp.asarray(x)
    assert t.dtype == tnp.complex128
    assert_close(tnp.exp(t) * t, np.exp(x) * x, rtol=1e-12, atol=1e-14)
    assert (tnp.ones(2, tnp.float64) * 1j).dtype == tnp.complex128
    assert tnp.result_type(tnp.float64, tnp.complex64) == tnp.complex128


@pytest.mark.parametrize("a,b,want", [
    ("float32", "complex64", "complex64"), ("int32", "complex64", "complex64"), ("float16", "complex64", "complex64"),
    ("bool", "complex64", "complex64"), ("complex64", "complex64", "complex64"),
    ("float32", 1j, "complex64"), ("int8", 1j, "complex64"), ("float16", 1j, "complex64"),
    ("complex64", 2.0, "complex64"), ("complex64", 3, "complex64"), (1j, 2.0, "complex64"),
])
def test_promotion_as_jax(a: object, b: object, want: str) -> None:
    def arg(v: object) -> object:
        return tnp.ones(2, dtype=v) if isinstance(v, str) else v
    assert tnp.result_type(*(getattr(tnp, v) if isinstance(v, str) else v for v in (a, b))) == getattr(tnp, want)
    assert tnp.add(arg(a), arg(b)).dtype == getattr(tnp, want)
    if jax is not None:
        ja = [jnp.ones(2, v) if isinstance(v, str) else v for v in (a, b)]
        assert str(jnp.add(*ja).dtype) == want


def test_dtype_predicates() -> None:
    z = tnp.asarray(cvalues((2,)))
    assert tnp.isdtype(tnp.complex64, "complex floating") and not tnp.isdtype(tnp.float32, "complex floating")
    assert tnp.isdtype(tnp.complex64, "numeric") and not tnp.isdtype(tnp.complex64, "real floating")
    assert tnp.iscomplexobj(z) and not tnp.iscomplexobj(tnp.ones(2)) and tnp.iscomplexobj(np.ones(2, np.complex64))
    assert tnp.isrealobj(tnp.ones(2))
    assert tnp.finfo(tnp.complex64).eps == np.finfo(np.float32).eps
    assert "complex64" in tnp.__array_namespace_info__().dtypes(kind="complex floating")


# ---- arithmetic and the math library against numpy ----
complex_arrays = st.tuples(
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4),
    st.integers(0, 2 ** 16),
)


@settings(max_examples=15)
@given(complex_arrays, st.sampled_from(["add", "subtract", "multiply", "true_divide", "equal", "not_equal"]),
       st.sampled_from(["complex", "float", "scalar"]))
def test_binary_ops_match_numpy(shape_seed: tuple, name: str, other: str) -> None:
    shape, seed = shape_seed
    x = cvalues(shape, seed)
    y = cvalues(shape[-1:], seed + 1) if other == "complex" else \
        np.random.default_rng(seed).standard_normal(shape[-1:]).astype(np.float32) if other == "float" else 0.5 - 2j
    if name in ("equal", "not_equal") and other == "complex":
        y = np.where(np.arange(y.size).reshape(y.shape) % 2 == 0, x.reshape(-1)[:y.size].reshape(y.shape), y) \
            if x.size >= y.size and y.ndim else y
    got = getattr(tnp, name)(tnp.asarray(x), y if other == "scalar" else tnp.asarray(y))
    want = getattr(np, name)(x, y)
    want = want.astype(np.complex64) if want.dtype.kind == "c" else want
    assert_close(got, want, rtol=1e-5, atol=1e-6)


UNARY = ["exp", "log", "sqrt", "sin", "cos", "tanh", "abs", "angle", "conj", "real", "imag", "square", "reciprocal",
         "exp2", "log2", "log10", "expm1", "log1p", "tan", "sinh", "cosh", "sign", "negative"]


@settings(max_examples=10)
@given(complex_arrays, st.sampled_from(UNARY))
def test_unary_ops_match_numpy(shape_seed: tuple, name: str) -> None:
    shape, seed = shape_seed
    x = cvalues(shape, seed)
    want = getattr(np, name)(x)
    got = getattr(tnp, name)(tnp.asarray(x))
    assert_close(got, want, rtol=2e-5, atol=2e-6)


def test_special_values() -> None:
    x = np.array([0, -1, 1e30 + 1e30j, -4, 1e-30j, -0.0 - 1j, 3], np.complex64)
    t = tnp.asarray(x)
    np.testing.assert_allclose(tnp.abs(t).numpy(), np.abs(x), rtol=1e-6)        # no overflow in |z|^2
    np.testing.assert_allclose(tnp.sqrt(t).numpy(), np.sqrt(x), rtol=1e-6, atol=1e-20)  # no cancellation
    np.testing.assert_allclose((1 / t[2:]).numpy(), 1 / x[2:], rtol=1e-6)     # Smith's division
    np.testing.assert_allclose(tnp.tanh(tnp.asarray([30 + 1j, -30 + 2j])).numpy(), np.tanh([30 + 1j, -30 + 2j]),
                               rtol=1e-6, atol=1e-7)
    assert (tnp.isnan(tnp.asarray([complex(np.nan, 0), 1j])).numpy() == [True, False]).all()
    assert (tnp.isfinite(tnp.asarray([complex(np.inf, 0), 1j])).numpy() == [False, True]).all()


def test_power() -> None:
    x = cvalues((5,))
    t = tnp.asarray(x)
    assert_close(t ** 3, x ** 3)
    assert_close(t ** -2, (x ** -2).astype(np.complex64), rtol=1e-5)
    assert_close(t ** 0.5, (x ** 0.5).astype(np.complex64), rtol=1e-5)
    assert_close(t ** t, (x ** x).astype(np.complex64), rtol=1e-5)
    # 0 ** 0 is 1; 0 ** 2j is NaN, as numpy's and JAX's (|0 ** b| is 0 ** re(b) = 0 ** 0: undefined)
    assert_close(tnp.asarray(np.zeros(2, np.complex64)) ** tnp.asarray([0j, 2j]),
                 np.array([1, complex(np.nan, np.nan)], np.complex64))


def test_reductions_matmul_einsum() -> None:
    x, y = cvalues((3, 4)), cvalues((4, 2), 1)
    tx, ty = tnp.asarray(x), tnp.asarray(y)
    assert_close(tnp.sum(tx), x.sum())
    assert_close(tnp.sum(tx, axis=0, keepdims=True), x.sum(0, keepdims=True))
    assert_close(tnp.mean(tx, axis=1), x.mean(1))
    assert_close(tnp.prod(tx, axis=1), x.prod(1), rtol=1e-5)
    assert_close(tnp.prod(tx), x.prod().astype(np.complex64), rtol=1e-5)
    assert_close(tnp.prod(tnp.asarray(np.ones((2, 0), np.complex64)), axis=1), np.ones(2, np.complex64))
    assert_close(tx @ ty, x @ y, rtol=1e-5)
    assert_close(tnp.matmul(tx, tnp.asarray(y.real)), x @ y.real, rtol=1e-5)
    assert_close(tnp.einsum("ij,jk->ik", tx, ty), x @ y, rtol=1e-5)
    assert_close(tnp.dot(tx[0], tx[1]), np.dot(x[0], x[1]), rtol=1e-5)


# ---- order: JAX's lexicographic one (real parts, then imaginary parts), numpy's too where there is no NaN ----
def _exact(got: tg.Tensor, want: Any) -> None:
    g, w = got.numpy(), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
    np.testing.assert_array_equal(g, w)


_X = np.array([1 + 2j, 1 - 1j, 3 + 0j, -1 + 5j, 3 - 1j, 1 + 2j], np.complex64)
_Y = np.array([1 + 3j, 1 - 1j, 2 + 9j, -1 + 4j, 3 + 0j, 0j], np.complex64)


def test_complex_comparisons_and_extremes_are_lexicographic() -> None:
    tx, ty = tnp.asarray(_X), tnp.asarray(_Y)
    for got, want in [(tx < ty, [True, False, False, False, True, False]), (tx <= ty, [True, True, False, False, True,
                      False]), (tx > ty, [False, False, True, True, False, True]), (tx >= ty, [False, True, True, True,
                      False, True]), (tnp.less(tx, 2), [True, True, False, True, False, True])]:
        _exact(got, np.array(want))
    _exact(tnp.maximum(tx, ty), np.array([1 + 3j, 1 - 1j, 3, -1 + 5j, 3, 1 + 2j], np.complex64))
    _exact(tnp.minimum(tx, ty), np.array([1 + 2j, 1 - 1j, 2 + 9j, -1 + 4j, 3 - 1j, 0j], np.complex64))
    _exact(tg.lax.max(tx, ty), np.maximum(_X, _Y))
    _exact(tnp.max(tx), np.complex64(3 + 0j))
    _exact(tnp.min(tx), np.complex64(-1 + 5j))
    both = tnp.stack([tx, ty])
    _exact(tnp.max(both, axis=0), np.max(np.stack([_X, _Y]), axis=0))
    _exact(tnp.min(both, axis=1, keepdims=True), np.array([[-1 + 5j], [-1 + 4j]], np.complex64))
    _exact(tnp.max(tx, where=tx != 3, initial=-10 + 0j), np.complex64(3 - 1j))
    _exact(tnp.max(tnp.zeros(0, tnp.complex64), initial=1j), np.complex64(1j))
    _exact(tnp.ptp(tx), np.complex64(4 - 5j))
    _exact(tg.lax.reduce_max(tx, (0,)), np.complex64(3 + 0j))
    _exact(tg.lax.reduce_min(tnp.zeros(0, tnp.complex64), (0,)), np.complex64(complex(np.inf, 0)))
    _exact(tg.lax.cummax(tx), np.maximum.accumulate(_X))
    _exact(tg.lax.cummin(tx, reverse=True), np.minimum.accumulate(_X[::-1])[::-1])
    _exact(tg.lax.clamp(tnp.asarray(np.complex64(1 + 0j)), tx, tnp.asarray(np.complex64(3 - 1j))),
           np.array([1 + 2j, 1, 3 - 1j, 1, 3 - 1j, 1 + 2j], np.complex64))
    _exact(tg.jit(lambda a, b: (tnp.max(a), a < b, tnp.maximum(a, b)))(tx, ty)[2], np.maximum(_X, _Y))


def test_complex_sorts_are_lexicographic() -> None:
    tx = tnp.asarray(_X)
    _exact(tnp.sort(tx), np.sort(_X))
    _exact(tnp.argsort(tx), np.array([3, 1, 0, 5, 4, 2], np.int32))
    _exact(tnp.sort(tx, descending=True), np.sort(_X)[::-1])
    _exact(tnp.argsort(tx, descending=True), np.array([2, 4, 0, 5, 1, 3], np.int32))
    _exact(tnp.sort(tnp.stack([tx, tx[::-1]]), axis=0), np.sort(np.stack([_X, _X[::-1]]), axis=0))
    _exact(tnp.searchsorted(tnp.sort(tx), tnp.asarray(_Y)), np.searchsorted(np.sort(_X), _Y).astype(np.int32))
    _exact(tnp.searchsorted(tnp.sort(tx), tx, side="right"),
           np.searchsorted(np.sort(_X), _X, side="right").astype(np.int32))
    _exact(tnp.lexsort((tnp.arange(6), tx)), np.lexsort((np.arange(6), _X)).astype(np.int32))
    _exact(tg.lax.sort(tx), np.sort(_X))
    keys, vals = tg.lax.sort_key_val(tx, tnp.arange(6))
    _exact(keys, np.sort(_X))
    _exact(vals, np.array([3, 1, 0, 5, 4, 2], np.int32))
    _exact(tg.jit(tnp.sort)(tx), np.sort(_X))
    long = np.tile(_X, 300)   # the bitonic network's rows
    _exact(tnp.argsort(tnp.asarray(long)), np.argsort(long, kind="stable").astype(np.int32))
    _exact(tnp.searchsorted(tnp.asarray(np.sort(long)), tnp.asarray(_Y)),
           np.searchsorted(np.sort(long), _Y).astype(np.int32))
    # zeros keep their signs; -0.0 == 0.0, so they keep their order too
    z = np.array([complex(-0.0, -0.0), complex(0.0, -0.0), complex(-0.0, 0.0), 0j, -1j], np.complex64)
    got = tnp.sort(tnp.asarray(z)).numpy()
    want = z[[4, 0, 1, 2, 3]]
    assert np.signbit(got.real).tolist() == np.signbit(want.real).tolist()
    assert np.signbit(got.imag).tolist() == np.signbit(want.imag).tolist()


def test_complex_order_with_nan_is_jaxs() -> None:
    """A NaN part compares false, as a float's: the elementwise extremes pick the other value (JAX's select; numpy's
    propagate the NaN). Sorts put a NaN part last, as numpy's and JAX's sorts do for each part."""
    nan = tnp.asarray(np.array([1 + 2j, complex(np.nan, 0), 3, complex(0, np.nan)], np.complex64))
    zero = tnp.zeros(4, tnp.complex64)
    _exact(tnp.maximum(nan, zero), np.array([1 + 2j, 0, 3, 0], np.complex64))
    _exact(tnp.minimum(nan, zero), np.zeros(4, np.complex64))
    _exact(nan < 1, np.array([False, False, False, True]))
    _exact(tnp.fmin(nan, zero), np.zeros(4, np.complex64))
    _exact(tnp.sort(nan), np.array([complex(0, np.nan), 1 + 2j, 3, complex(np.nan, 0)], np.complex64))
    _exact(tnp.nanmax(nan), np.complex64(3))
    _exact(tnp.nanmin(nan), np.complex64(1 + 2j))


def test_complex_order_has_no_argmax_or_clip() -> None:
    """As in JAX: argmax and argmin (and their nan forms) are TypeErrors for complex values, clip a ValueError."""
    tx = tnp.asarray(_X)
    for fn in (tnp.argmax, tnp.argmin, tnp.nanargmax, tnp.nanargmin):
        with pytest.raises(TypeError, match="complex"):
            fn(tx)
    with pytest.raises(ValueError, match="complex"):
        tnp.clip(tx, 0, 2)
    with pytest.raises(ValueError, match="complex"):
        tnp.clip(tnp.asarray(_X.real), 0j)


@settings(max_examples=25, deadline=None)
@given(hnp.arrays(np.complex64, st.tuples(st.integers(1, 4), st.integers(1, 6)),
                  elements=st.sampled_from([-1.0, 0.0, 0.5, 2.0, -np.inf]).flatmap(
                      lambda r: st.sampled_from([complex(r, i) for i in (-2.0, 0.0, 1.0, np.inf)]))))
def test_complex_order_matches_numpy_without_nan(x: np.ndarray) -> None:
    """numpy orders complex values lexicographically too: without NaN it is the reference (ties in the real parts
    are common here, so the imaginary parts decide)."""
    t, y = tnp.asarray(x), x[::-1].copy()
    ty = tnp.asarray(y)
    _exact(t < ty, x < y)
    _exact(t >= ty, x >= y)
    _exact(tnp.maximum(t, ty), np.maximum(x, y))
    _exact(tnp.minimum(t, ty), np.minimum(x, y))
    for axis in (None, 0, 1):
        _exact(tnp.max(t, axis=axis), np.max(x, axis=axis))
        _exact(tnp.min(t, axis=axis), np.min(x, axis=axis))
    _exact(tnp.sort(t, axis=1), np.sort(x, axis=1))
    _exact(tnp.argsort(t, axis=0), np.argsort(x, axis=0, kind="stable").astype(np.int32))


def test_variance_is_real() -> None:
    # the variance of complex values is the mean of |x - mean|^2, real, as numpy's and JAX's: var gave the complex
    # mean of (x - mean)^2 (var([1+1j, 1-1j, 2j]) = -1.33-0.89j, not 1.78), and nanvar and nanstd raised
    x = cvalues((3, 4))
    for axis in (None, 1):
        for ddof in (0, 1):
            for name in ("var", "std"):
                want = getattr(np, name)(x, axis=axis, ddof=ddof).astype(np.float32)
                assert_close(getattr(tnp, name)(tnp.asarray(x), axis=axis, ddof=ddof), want)
                f = tg.jit(lambda v, name=name, axis=axis, ddof=ddof: getattr(tnp, name)(v, axis=axis, ddof=ddof))
                assert_close(f(tnp.asarray(x)), want)
    x[0, 1] = np.nan
    for name in ("nanvar", "nanstd"):
        assert_close(getattr(tnp, name)(tnp.asarray(x), axis=1), getattr(np, name)(x, axis=1).astype(np.float32))


@pytest.mark.parametrize("n", [2, 5, 40])   # a masked triangle up to 32 elements, a loop past it
def test_cumulative_products(n: int) -> None:
    # the short scan's masked product was a MUL reduce, which has no complex form: cumprod raised; now a tree of
    # complex products, as prod's
    x = cvalues((3, n)) * 0.9
    want = np.cumprod(x, axis=1)
    for f in (tnp.cumprod, tnp.nancumprod, tg.jit(tnp.cumprod, static_argnames="axis")):
        assert_close(f(tnp.asarray(x), axis=1), want, rtol=1e-4)
    assert_close(tnp.cumulative_prod(tnp.asarray(x[0])), want[0], rtol=1e-4)
    assert_close(tg.lax.cumprod(tnp.asarray(x), axis=1, reverse=True), np.cumprod(x[:, ::-1], axis=1)[:, ::-1],
                 rtol=1e-4)


def test_movement_indexing_where() -> None:
    x = cvalues((3, 4))
    t = tnp.asarray(x)
    assert_close(t.T, x.T)
    assert_close(t.reshape(2, 6), x.reshape(2, 6))
    assert_close(t[1:, ::-2], x[1:, ::-2])
    assert_close(t[tnp.asarray([2, 0])], x[[2, 0]])
    assert_close(tnp.flip(t, 1), np.flip(x, 1))
    assert_close(tnp.pad(t, 1), np.pad(x, 1))
    assert_close(tnp.concatenate([t, t]), np.concatenate([x, x]))
    assert_close(tnp.stack([t, t], axis=1), np.stack([x, x], axis=1))
    assert_close(tnp.broadcast_to(t[0], (2, 4)), np.broadcast_to(x[0], (2, 4)))
    assert_close(t.at[0, 1].set(5j), np.where(np.arange(12).reshape(3, 4) == 1, np.complex64(5j), x))
    assert_close(tnp.where(t.real > 0, t, 0), np.where(x.real > 0, x, 0).astype(np.complex64))
    assert_close(tnp.roll(t, 1, axis=1), np.roll(x, 1, axis=1))


def test_astype_and_parts() -> None:
    x = cvalues((4,))
    t = tnp.asarray(x)
    with pytest.warns(np.exceptions.ComplexWarning):
        r = t.astype(tnp.float32)
    assert_close(r, x.real)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (t.astype(tnp.bool_).numpy() == x.astype(bool)).all()
        assert_close(t.astype(tnp.int32), x.real.astype(np.int32))
    assert_close(tnp.ones(3).astype(tnp.complex64), np.ones(3, np.complex64))
    assert_close(tnp.asarray([1, 2], dtype=tnp.int32).astype(tnp.complex64), np.array([1, 2], np.complex64))
    assert_close(tg.lax.complex(tnp.asarray(x.real), tnp.asarray(x.imag)), x)
    assert_close(tnp.real(tnp.arange(3.0)), np.arange(3.0, dtype=np.float32))
    assert_close(tnp.imag(tnp.arange(3.0)), np.zeros(3, np.float32))
    assert_close(tnp.conj(tnp.arange(3.0)), np.arange(3.0, dtype=np.float32))
    assert_close(t.real, x.real)
    assert_close(t.imag, x.imag)
    assert_close(t.conj(), np.conj(x))
    assert_close(tnp.angle(t, deg=True), np.angle(x, deg=True), rtol=1e-5)


def test_complex_arithmetic_fuses_into_one_kernel() -> None:
    """No kernel sees a complex type: a complex expression is one fused kernel of float pairs."""
    x, y = tnp.asarray(cvalues((64,))).realize(), tnp.asarray(cvalues((64,), 1)).realize()
    counters.reset()
    out = (x * y + x / y - tnp.conj(x)).realize()
    assert counters.kernel_count == 1
    np.testing.assert_allclose(out.numpy(), (x.numpy() * y.numpy() + x.numpy() / y.numpy() - np.conj(x.numpy())),
                               rtol=1e-5)


def test_a_view_of_a_stored_complex_value_reads_its_pairs_where_they_lie() -> None:
    """The pairs of a reshaped or transposed complex input (a jitted argument is a reshape of its buffer) are the same
    views of its buffer's floats: a kernel transposing them into (re, im) planes loads each float once, at an index
    the optimiser reads as a stride, not both floats of every pair, the wanted one selected (34 us for 128 x 128,
    scalar; 3 as a transpose of 16 x 16 tiles)."""
    from tgfx.lowering import index_level
    from tgfx.numpy._complex import pairs
    f = tg.jit(lambda z: tnp.moveaxis(pairs(z.reshape(32, 16)), (1, 2), (0, 1)).contiguous())
    x = cvalues((16, 32))
    got = f(tnp.asarray(x))
    want = np.stack([x.reshape(32, 16).real, x.reshape(32, 16).imag], -1).transpose(1, 2, 0)
    np.testing.assert_array_equal(got.numpy(), want)
    prog = next(iter(f._cache._d.values()))[0]
    (sink,) = [index_level(c.src[0]) for c in prog.calls if c.src[0].op is Ops.SINK]
    assert sum(u.op is Ops.LOAD for u in sink.toposort()) == 1 and not any(u.op is Ops.WHERE for u in sink.toposort())


def test_jit_complex_inputs_and_outputs() -> None:
    f = tg.jit(lambda z, w: (tnp.exp(z) * w, tnp.abs(z).sum()))
    x, y = cvalues((8,)), cvalues((8,), 1)
    for seed in range(3):
        x = cvalues((8,), seed)
        a, b = f(tnp.asarray(x), tnp.asarray(y))
        assert_close(a, np.exp(x) * y, rtol=1e-5)
        np.testing.assert_allclose(b.item(), np.abs(x).sum(), rtol=1e-5)
    assert f.trace_count == 1


def test_function_and_vmap() -> None:
    f = tg.function(lambda z: tnp.conj(z) * z + tnp.real(z))
    x = cvalues((3, 2))
    assert_close(f(tnp.asarray(x)), (np.conj(x) * x + x.real).astype(np.complex64), rtol=1e-5)
    g = tg.vmap(lambda z: tnp.sum(z * tnp.conj(z)).real)
    np.testing.assert_allclose(g(tnp.asarray(x)).numpy(), (np.abs(x) ** 2).sum(1), rtol=1e-5)


# ---- gradients: JAX's convention, df/dx - i df/dy ----
def fd_grad(f: Callable[[np.ndarray], float], z: np.ndarray, h: float = 1e-3) -> np.ndarray:
    """df/dx - i df/dy by central differences in float64."""
    z = z.astype(np.complex128)
    out = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        for unit, sign in ((1.0, 1.0), (1j, -1j)):
            e = np.zeros_like(z)
            e[i] = unit * h
            out[i] += sign * (f(z + e) - f(z - e)) / (2 * h)
    return out


# (name, tgfx function, numpy function), each a real scalar of a complex vector
GRAD_CASES = [
    ("abs2", lambda z: tnp.sum(tnp.abs(z) ** 2), lambda z: np.sum(np.abs(z) ** 2)),
    ("real_square", lambda z: tnp.real(tnp.sum(z * z)), lambda z: np.real(np.sum(z * z))),
    ("exp_conj", lambda z: tnp.real(tnp.sum(tnp.exp(z) * tnp.conj(z))),
     lambda z: np.real(np.sum(np.exp(z) * np.conj(z)))),
    ("imag_log", lambda z: tnp.sum(tnp.imag(tnp.log(z + 3))), lambda z: np.sum(np.imag(np.log(z + 3)))),
    ("abs_sqrt", lambda z: tnp.sum(tnp.abs(tnp.sqrt(z + 4))), lambda z: np.sum(np.abs(np.sqrt(z + 4)))),
    ("angle", lambda z: tnp.sum(tnp.angle(z)), lambda z: np.sum(np.angle(z))),
    ("div_sin", lambda z: tnp.real(tnp.sum(tnp.sin(z) / (z + 3))), lambda z: np.real(np.sum(np.sin(z) / (z + 3)))),
    ("tanh_cos", lambda z: tnp.imag(tnp.sum(tnp.tanh(z) * tnp.cos(z))),
     lambda z: np.imag(np.sum(np.tanh(z) * np.cos(z)))),
    ("prod_mean", lambda z: tnp.real(tnp.prod(z) + tnp.mean(z * 1j)), lambda z: np.real(np.prod(z) + np.mean(z * 1j))),
    ("matmul", lambda z: tnp.real(tnp.sum(z.reshape(2, 2) @ z.reshape(2, 2))),
     lambda z: np.real(np.sum(z.reshape(2, 2) @ z.reshape(2, 2)))),
    ("cumprod", lambda z: tnp.sum(tnp.abs(tnp.cumprod(z))), lambda z: np.sum(np.abs(np.cumprod(z)))),
    ("var_nanstd", lambda z: tnp.var(z) + tnp.nanstd(z), lambda z: np.var(z) + np.nanstd(z)),
]


@pytest.mark.parametrize("name,f,fn", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_matches_finite_differences(name: str, f: Callable, fn: Callable) -> None:
    z = cvalues((4,), 3) * 0.5
    got = tg.grad(f)(tnp.asarray(z)).numpy()
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, fd_grad(fn, z), rtol=2e-3, atol=2e-3)


@needs_jax
@pytest.mark.parametrize("name,f,fn", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_matches_jax(name: str, f: Callable, fn: Callable) -> None:
    z = cvalues((4,), 3) * 0.5
    jf = {"abs2": lambda z: jnp.sum(jnp.abs(z) ** 2), "real_square": lambda z: jnp.real(jnp.sum(z * z)),
          "exp_conj": lambda z: jnp.real(jnp.sum(jnp.exp(z) * jnp.conj(z))),
          "imag_log": lambda z: jnp.sum(jnp.imag(jnp.log(z + 3))),
          "abs_sqrt": lambda z: jnp.sum(jnp.abs(jnp.sqrt(z + 4))), "angle": lambda z: jnp.sum(jnp.angle(z)),
          "div_sin": lambda z: jnp.real(jnp.sum(jnp.sin(z) / (z + 3))),
          "tanh_cos": lambda z: jnp.imag(jnp.sum(jnp.tanh(z) * jnp.cos(z))),
          "prod_mean": lambda z: jnp.real(jnp.prod(z) + jnp.mean(z * 1j)),
          "matmul": lambda z: jnp.real(jnp.sum(z.reshape(2, 2) @ z.reshape(2, 2))),
          "cumprod": lambda z: jnp.sum(jnp.abs(jnp.cumprod(z))),
          "var_nanstd": lambda z: jnp.var(z) + jnp.nanstd(z)}[name]
    np.testing.assert_allclose(tg.grad(f)(tnp.asarray(z)).numpy(), np.asarray(jax.grad(jf)(jnp.asarray(z))),
                               rtol=1e-4, atol=1e-5)


def test_grad_of_real_input_through_complex() -> None:
    """A real input through complex intermediates gets a real gradient (the real part of the complex one)."""
    x = np.array([0.3, -0.7, 1.1], np.float32)
    f = lambda x: tnp.sum(tnp.abs(tnp.exp(1j * x) * (x + 2j)) ** 2)  # noqa: E731
    fn = lambda x: np.sum(np.abs(np.exp(1j * x) * (x + 2j)) ** 2)  # noqa: E731
    got = tg.grad(f)(tnp.asarray(x))
    assert got.dtype == tnp.float32
    np.testing.assert_allclose(got.numpy(), fd_grad(fn, x.astype(np.complex128)).real, rtol=1e-3, atol=1e-3)


def test_grad_at_a_python_complex() -> None:
    # JAX's complex-differentiation tutorial differentiates at z = 3. + 4j, a Python complex (it was "not an array"):
    # |z|^2's gradient is 2 conj(z) in JAX's convention, sin's holomorphic one cos(z), conj's discards Im of the output
    z = 3.0 + 4.0j
    assert_close(tg.grad(lambda z: tnp.real(z) ** 2 + tnp.imag(z) ** 2)(z), np.complex64(6 - 8j))
    assert_close(tg.grad(tnp.sin, holomorphic=True)(z), np.complex64(np.cos(z)))
    assert_close(tg.grad(tnp.conjugate, holomorphic=True)(z), np.complex64(1))


def test_grad_of_complex_output_raises_and_holomorphic() -> None:
    z = tnp.asarray(np.complex64(0.3 + 0.4j))
    with pytest.raises(TypeError, match="holomorphic=True"):
        tg.grad(tnp.exp)(z)
    np.testing.assert_allclose(tg.grad(lambda z: tnp.exp(z) * z, holomorphic=True)(z).item(),
                               np.exp(0.3 + 0.4j) * (1 + 0.3 + 0.4j), rtol=1e-5)
    with pytest.raises(TypeError, match="complex inputs"):
        tg.grad(lambda x: x * 1j, holomorphic=True)(tnp.asarray(1.0))


def test_vjp_jvp_inner_product_identity() -> None:
    """Re <ct, J t> == Re <J^T ct, t> with JAX's bilinear pairing, for a non-holomorphic function."""
    f = lambda z: tnp.exp(z) * tnp.conj(z) + tnp.abs(z)  # noqa: E731
    z, t, ct = cvalues((3,)), cvalues((3,), 1), cvalues((3,), 2)
    _, vjp_fn = tg.vjp(f, tnp.asarray(z))
    (g,) = vjp_fn(tnp.asarray(ct))
    _, jt = tg.jvp(f, (tnp.asarray(z),), (tnp.asarray(t),))
    np.testing.assert_allclose(np.real(np.sum(ct * jt.numpy())), np.real(np.sum(g.numpy() * t)), rtol=1e-4)
    # J t by finite differences along t
    h = 1e-3
    fn = lambda z: np.exp(z) * np.conj(z) + np.abs(z)  # noqa: E731
    zd, td = z.astype(np.complex128), t.astype(np.complex128)
    np.testing.assert_allclose(jt.numpy(), (fn(zd + h * td) - fn(zd - h * td)) / (2 * h), rtol=1e-3, atol=1e-3)


@needs_jax
def test_vjp_jvp_match_jax() -> None:
    z, t, ct = cvalues((3,)), cvalues((3,), 1), cvalues((3,), 2)
    f = lambda z: tnp.exp(z) * tnp.conj(z)  # noqa: E731
    jf = lambda z: jnp.exp(z) * jnp.conj(z)  # noqa: E731
    (g,) = tg.vjp(f, tnp.asarray(z))[1](tnp.asarray(ct))
    (jg,) = jax.vjp(jf, jnp.asarray(z))[1](jnp.asarray(ct))
    np.testing.assert_allclose(g.numpy(), np.asarray(jg), rtol=1e-5, atol=1e-6)
    jt = tg.jvp(f, (tnp.asarray(z),), (tnp.asarray(t),))[1]
    jjt = jax.jvp(jf, (jnp.asarray(z),), (jnp.asarray(t),))[1]
    np.testing.assert_allclose(jt.numpy(), np.asarray(jjt), rtol=1e-5, atol=1e-6)


def test_loops_with_complex_carries() -> None:
    """A complex carry runs as a scheduled loop of pairs (not the register loop kernel) and differentiates."""
    z0 = np.complex64(0.1 + 0.2j)
    step = lambda i, c: c * c + 0.1  # noqa: E731
    out = tg.jit(lambda z: tg.lax.fori_loop(0, 3, step, z))(tnp.asarray(z0))
    want = z0
    for i in range(3):
        want = step(i, want)
    np.testing.assert_allclose(out.item(), want, rtol=1e-6)
    fn = lambda z: np.abs(step(2, step(1, step(0, z))))  # noqa: E731
    for loss in (lambda z: tnp.abs(tg.lax.fori_loop(0, 3, step, z)),
                 lambda z: tnp.abs(tg.lax.scan(lambda c, x: (c * c + x, c), z, tnp.full((3,), 0.1 + 0j))[0])):
        got = tg.grad(loss)(tnp.asarray(z0)).item()
        np.testing.assert_allclose(got, fd_grad(lambda z: fn(z[0]), np.array([z0]))[0], rtol=1e-3, atol=1e-5)


def test_eager_complex_index_is_a_kernel_argument_too():
    a = (np.arange(12) + 1j * np.arange(12)[::-1]).astype(np.complex64).reshape(4, 3)
    z = tg.asarray(a).realize()
    np.testing.assert_array_equal((z[0] * 2).numpy(), a[0] * 2)
    before = tg.counters.compile_count
    for i in range(1, 4):
        got = (z[i] * 2).numpy()
        np.testing.assert_array_equal(got, a[i] * 2)
    assert tg.counters.compile_count == before      # one kernel for every i (tgfx/lowering/complex.py: DynamicView)


def test_vecdot_conjugates_its_first_argument():
    rng = np.random.default_rng(5)
    x, y = ((rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64) for _ in range(2))
    np.testing.assert_allclose(tnp.vecdot(x, y).numpy(), np.vecdot(x, y), rtol=1e-5)
    np.testing.assert_allclose(tnp.linalg.vecdot(x, y, axis=0).numpy(), np.vecdot(x, y, axis=0), rtol=1e-5)


def test_round_and_rint_round_both_parts():
    # as jnp.round and jnp.rint (and numpy's): half to even on the real and the imaginary part; floor, ceil and trunc
    # are not defined on complex values (a TypeError, as in JAX)
    z = np.array([1.5 + 2.5j, 0.4 - 1.6j, -0.5 + 3.5j], np.complex64)
    np.testing.assert_array_equal(tnp.round(z).numpy(), np.round(z))
    np.testing.assert_array_equal(tnp.around(tg.asarray(z)).numpy(), np.round(z))
    np.testing.assert_array_equal(tg.asarray(z).round().numpy(), np.round(z))
    np.testing.assert_array_equal(tnp.rint(z).numpy(), np.rint(z))
    w = np.array([1.15 + 2.25j, 0.45 - 1.67j, 15 + 25j], np.complex64)
    np.testing.assert_allclose(tnp.round(w, 1).numpy(), np.round(w, 1), rtol=1e-6)
    np.testing.assert_array_equal(tnp.round(w, -1).numpy(), np.round(w, -1))
    np.testing.assert_allclose(tg.jit(lambda t: tnp.round(t, 1))(tg.asarray(w)).numpy(), np.round(w, 1), rtol=1e-6)
    for f in (tnp.floor, tnp.ceil, tnp.trunc):
        with pytest.raises(TypeError, match="complex"):
            f(tg.asarray(z))


@pytest.mark.parametrize("x64", [False, True])
def test_angle_of_integers_and_0d_floats_is_the_default_float(x64):
    # as jnp.angle (numpy's angle of a scalar is float64): integers, bools and 0-d real floats give the default float
    # type, other floats keep theirs
    with tg.Context(TGFX_ENABLE_X64=int(x64)):
        f = np.float64 if x64 else np.float32
        for x in (np.array([1, -2, 0], np.int8), np.array([True, False]), np.array(-1.5, np.float16),
                  np.array(2.0, np.float32), np.array([3, -4], np.int32)):
            want = np.angle(x.astype(f))
            for got in (tnp.angle(tg.asarray(x)), tg.jit(tnp.angle)(tg.asarray(x))):
                assert got.dtype == tg.dtypes.default_float
                np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
        assert tnp.angle(tg.asarray(np.array([-1.5], np.float16))).dtype == tnp.float16
        assert tnp.angle(tg.asarray(np.array([1j], np.complex64)), deg=True).dtype == tnp.float32


def test_exp_family_keeps_a_real_arguments_zero_imaginary_part():
    # C99 and the array API's special cases: exp(inf + 0j) = inf + 0j (not inf * sin 0 = NaN), sinh/cosh/tanh/log2
    # likewise; their compositions scale by a real part by part (no inf * 0 term)
    z = np.array([complex(np.inf, 0), complex(np.nan, 0), complex(0.5, 0.25), complex(-2, 3)], np.complex64)
    for f in ("exp", "sinh", "cosh", "tanh", "log2", "log10"):
        got = getattr(tnp, f)(tg.asarray(z)).numpy()
        with np.errstate(all="ignore"):
            want = getattr(np, f)(z.astype(np.complex128)).astype(np.complex64)
        np.testing.assert_allclose(got, want, rtol=2e-6, equal_nan=True, err_msg=f)
    np.testing.assert_array_equal(tnp.tanh(tg.asarray(np.array([complex(1.0, np.inf)], np.complex64))).numpy(),
                                  np.array([complex(np.nan, np.nan)], np.complex64))


@pytest.mark.parametrize("name", ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"])
def test_inverse_functions_match_numpy_off_their_branch_cuts(name):
    rng = np.random.default_rng(9)
    z = (rng.standard_normal(64) * 3 + 1j * rng.standard_normal(64) * 3).astype(np.complex64)
    z = np.concatenate([z, np.array([1e-4 + 1e-4j, -1e-6 + 3e-7j, 0.999 + 0.001j, 0.3j + 0.1, 1e5 + 1e5j,
                                     -1e5 + 2j, 1e20 + 1j, -1e20 - 1e20j], np.complex64)])
    got = getattr(tnp, name)(tg.asarray(z)).numpy()
    want = getattr(np, name)(z.astype(np.complex128))
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=0, err_msg=name)   # small arguments keep their digits


def test_inverse_functions_special_values():
    inf, nan = np.inf, np.nan
    z = np.array([complex(inf, inf), complex(-inf, inf), complex(nan, inf), complex(1.0, nan), complex(0, 0)],
                 np.complex64)
    cases = {"arcsinh": [complex(inf, np.pi / 4), None, None, complex(nan, nan), 0j],
             "arccosh": [complex(inf, np.pi / 4), complex(inf, 3 * np.pi / 4), complex(inf, nan), complex(nan, nan),
                         complex(0, np.pi / 2)],
             "arctanh": [complex(0, np.pi / 2), complex(0, np.pi / 2), None, complex(nan, nan), 0j]}
    for name, want in cases.items():
        got = getattr(tnp, name)(tg.asarray(z)).numpy()
        for g, w in zip(got, want, strict=True):
            if w is not None:
                np.testing.assert_allclose(g, np.complex64(w), rtol=1e-6, equal_nan=True, err_msg=f"{name}{g}")


_SIGNED_GRID = [-np.inf, -2.0, -0.5, -0.0, 0.0, 0.5, 2.0, np.inf, np.nan]


def _signed_grid() -> np.ndarray:
    re, im = np.array([(a, b) for a in _SIGNED_GRID for b in _SIGNED_GRID], np.float32).T
    z = np.zeros(re.shape, np.complex64)
    z.real, z.imag = re, im          # z = re + im * 1j would lose the imaginary part's -0.0
    return z


def _same_part(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    both_nan = np.isnan(got) & np.isnan(want)
    exact = (got == want) & (np.signbit(got) == np.signbit(want))
    with np.errstate(invalid="ignore"):
        return both_nan | exact | (np.abs(got - want) <= 2e-6 * np.abs(want))


@pytest.mark.parametrize("name", ["sqrt", "log", "log1p", "exp", "sin", "cos", "tan", "sinh", "cosh", "tanh",
                                  "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "abs", "negative",
                                  "conj", "square"])
def test_signed_zeros_and_infinities_as_c99(name):
    # every part of the grid: -0.0 and +0.0 are different inputs (the side of a branch cut: sqrt(-4 - 0j) is -2j)
    # and stored results keep a zero's sign; at infinities and NaNs C99 Annex G's values, as numpy's (the C
    # library's)
    z = _signed_grid()
    got = getattr(tnp, name)(tg.asarray(z)).numpy()
    with np.errstate(all="ignore"):
        want = getattr(np, name)(z)
    bad = ~(_same_part(got.real, want.real) & _same_part(got.imag, want.imag))
    assert not bad.any(), [(complex(a), complex(g), complex(w))
                           for a, g, w in zip(z[bad], got[bad], want[bad], strict=True)]


def test_a_real_operand_is_a_complex_one_in_products_and_sums_as_in_jax():
    # jax 0.10.2 (XLA) and numpy promote the real operand to complex, imaginary part +0.0, and multiply or add as
    # complex values: (0 + 0j) * -2.0 is -0 + 0j (tgfx scaled part by part, as C99: -0 - 0j), (inf + 0j) * 0.5 is
    # inf + NaN j (tgfx: inf + 0j), -0j + 1.0 is 1 + 0j (tgfx: 1 - 0j)
    z = _signed_grid()
    r = np.array(_SIGNED_GRID, np.float32)
    zz, rr = np.repeat(z, len(r)), np.tile(r, len(z))
    zt, rt = tg.asarray(zz), tg.asarray(rr)
    with np.errstate(all="ignore"):
        cases = [("z * r", zt * rt, zz * rr), ("r * z", rt * zt, rr * zz), ("z + r", zt + rt, zz + rr),
                 ("r + z", rt + zt, rr + zz), ("z - r", zt - rt, zz - rr), ("r - z", rt - zt, rr - zz),
                 ("z * -2.0", zt * -2.0, zz * np.float32(-2.0)), ("z * 0.5", zt * 0.5, zz * np.float32(0.5)),
                 ("z + 1.0", zt + 1.0, zz + np.float32(1.0)), ("0.0 - z", 0.0 - zt, np.float32(0.0) - zz)]
    for name, got, want in cases:
        got = got.numpy()
        bad = ~(_same_part(got.real, want.real) & _same_part(got.imag, want.imag))
        assert not bad.any(), (name, [(complex(a), complex(g), complex(w))
                                      for a, g, w in zip(zz[bad], got[bad], want[bad], strict=True)][:6])
    parts = [(v.real, v.imag) for v in (tg.asarray(np.array([0j, complex(np.inf, 0)], np.complex64)) * -2.0).numpy()]
    np.testing.assert_array_equal(np.signbit(parts[0]), [True, False])
    assert parts[1][0] == -np.inf and np.isnan(parts[1][1])
    assert not np.signbit((tg.asarray(np.array([complex(0.0, -0.0)], np.complex64)) + 1.0).numpy().imag[0])


_INF, _NAN = float("inf"), float("nan")
# jax 0.10.2's quotients (XLA: Smith's method, its products contracted to FMAs, then C99's recoveries where that
# gives NaN + NaN j), as (a, b, a / b) by parts; tgfx computed a * (1 / b): NaN + NaN j for the first three
XLA_QUOTIENTS = [
    ((1, 1), (0, 0), (_INF, _INF)), ((1, 1), (-0.0, 0), (-_INF, -_INF)), ((_INF, _INF), (2, 0), (_INF, _INF)),
    ((0, 0), (-1, 0), (-0.0, -0.0)), ((2, 0), (0, -1), (-0.0, 2.0)), ((0, 1), (0, 0), (_NAN, _INF)),
    ((1, 3), (1, 3), (1.0, 8.940697071579962e-09)), ((3, -1), (1, 3), (8.940697071579962e-09, -1.0)),
    ((1, 0), (_INF, 0), (0.0, 0.0)), ((1, 2), (_INF, -_INF), (-0.0, 0.0)), ((_INF, 1), (1, 1), (_INF, -_INF)),
    ((0, 0), (0, 0), (_NAN, _NAN)), ((_NAN, 1), (0, 0), (_NAN, _INF)), ((-0.0, 0), (0, -1), (-0.0, -0.0)),
    ((5, -7), (2, 1e-30), (2.5, -3.5)),
    # reciprocal(b), as 1 / b
    ((1, 0), (0, 0), (_INF, _NAN)), ((1, 0), (-0.0, -0.0), (-_INF, _NAN)), ((1, 0), (0, -_INF), (-0.0, 0.0)),
    ((1, 0), (3, 4), (0.11999999731779099, -0.1599999964237213)),
    ((1, 0), (1e-30, 1e-30), (5.000000075237331e+29, -5.000000075237331e+29)),
]


def test_complex_division_is_xlas_sign_for_sign():
    def parts(ps: list) -> np.ndarray:
        z = np.zeros(len(ps), np.complex64)
        z.real, z.imag = np.array(ps, np.float32).T
        return z
    a, b, want = (parts([c[i] for c in XLA_QUOTIENTS]) for i in range(3))
    recips = [i for i, c in enumerate(XLA_QUOTIENTS) if c[0] == (1, 0)]
    for got in ((tg.asarray(a) / tg.asarray(b)).numpy(), tnp.true_divide(tg.asarray(a), tg.asarray(b)).numpy()):
        bad = ~(_same_part(got.real, want.real) & _same_part(got.imag, want.imag))
        assert not bad.any(), [(complex(x), complex(y), complex(g), complex(w))
                               for x, y, g, w in zip(a[bad], b[bad], got[bad], want[bad], strict=True)]
    got = tnp.reciprocal(tg.asarray(b[recips])).numpy()
    assert (_same_part(got.real, want[recips].real) & _same_part(got.imag, want[recips].imag)).all(), got


def test_a_loop_body_reads_a_captured_complex_value():
    # the body's operand is a PARAM of complex type: read as its buffer's pairs (it had no pair form)
    z = np.array([1 + 2j, -3 + 0.5j], np.complex64)
    c = tg.asarray(z)
    got = tg.lax.fori_loop(0, 3, lambda i, acc: acc * c + 1, tnp.ones(2, tnp.complex64))
    want = np.ones(2, np.complex64)
    for _ in range(3):
        want = want * z + 1
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("upper", [False, True])
def test_complex_cholesky_matches_numpy_and_differentiates(upper):
    rng = np.random.default_rng(4)
    m = rng.standard_normal((3, 6, 6)) + 1j * rng.standard_normal((3, 6, 6))
    h = (m @ np.conj(np.swapaxes(m, -1, -2)) + 6 * np.eye(6)).astype(np.complex64)   # Hermitian positive definite
    got = tnp.linalg.cholesky(tg.asarray(h), upper=upper).numpy()
    np.testing.assert_allclose(got, np.linalg.cholesky(h, upper=upper), rtol=2e-5, atol=2e-5)
    h1 = (m[0] + np.conj(m[0].T)).astype(np.complex64) * 0.1

    def loss(t):
        fac = tnp.linalg.cholesky(tg.asarray(h[0]) + t.astype(tnp.complex64) * tg.asarray(h1), upper=upper)
        return tnp.sum(tnp.abs(fac) ** 2 * tnp.arange(6.0)) + tnp.sum(tnp.real(fac) * tnp.imag(fac))
    g = float(tg.grad(loss)(tg.asarray(np.float32(0.3))))
    eps = 1e-2
    fd = (float(loss(tg.asarray(np.float32(0.3 + eps)))) - float(loss(tg.asarray(np.float32(0.3 - eps))))) / (2 * eps)
    assert abs(g - fd) <= 5e-3 * max(1.0, abs(fd)), (g, fd)


def test_products_and_magnitudes_round_as_numpys() -> None:
    """complex64 products are numpy's fused multiply-adds, |z| numpy's scaled form with an FMA, hypot numpy's float32
    hypot (one rounding): bit for bit, so an iteration as chaotic as the Mandelbrot set's counts what numpy counts."""
    rng = np.random.default_rng(0)
    a, b, c, d = (rng.standard_normal(20000).astype(np.float32) for _ in range(4))
    z, w = (a + 1j * b).astype(np.complex64), (c + 1j * d).astype(np.complex64)
    np.testing.assert_array_equal((tnp.asarray(z) * tnp.asarray(w)).numpy(), z * w)
    np.testing.assert_array_equal(tnp.abs(tnp.asarray(z)).numpy(), np.abs(z))
    np.testing.assert_array_equal(tnp.hypot(tnp.asarray(a), tnp.asarray(b)).numpy(), np.hypot(a, b))
    edge = np.array([3e38 + 4e38j, complex(np.inf, np.nan), complex(np.nan, 1.0), 1e-30 + 1e-30j, 0j, -0.0 - 3j],
                    np.complex64)
    np.testing.assert_array_equal(tnp.abs(tnp.asarray(edge)).numpy(), np.abs(edge))
    xs, ys = np.linspace(-2, 1, 96, dtype=np.float32), np.linspace(-1.5, 1.5, 96, dtype=np.float32)
    grid = (xs[None, :] + 1j * ys[:, None]).astype(np.complex64)

    def mandel(c: Any, np_: Any) -> Any:
        zz, n = c * 0, 0
        for _ in range(60):
            zz = np_.where(np_.abs(zz) <= 2.0, zz * zz + c, zz)
            n = n + (np_.abs(zz) <= 2.0)
        return n
    np.testing.assert_array_equal(np.asarray(tg.jit(lambda c: mandel(c, tnp))(tnp.asarray(grid))), mandel(grid, np))


def test_a_complex_result_other_results_read_is_stored_once() -> None:
    """A loop body's new z is a result, and its count reads |z|: the count reads z back as pairs (a stored value)
    instead of computing it again on the old z's parts (a product, a square root and a division per element, each
    step)."""
    from tgfx.ir.uop import UOp
    from tgfx.lowering.complex import lower_complex

    def fmas(u: UOp) -> int:   # the fused multiply-adds computed for u, not those of a value stored before it
        seen, stack, n = set(), [u], 0
        while stack:
            x = stack.pop()
            if x in seen:
                continue
            seen.add(x)
            n += x.op is Ops.MULACC
            stack.extend(x.src if x.op is not Ops.CONTIGUOUS or x is u else ())
        return n
    z = tnp.asarray(np.full((8, 8), 0.5 + 0.5j, np.complex64))
    zn = tnp.where(tnp.abs(z) <= 2.0, z * z + z, z)
    n = tnp.zeros((8, 8), tnp.int32) + (tnp.abs(zn) <= 2.0)
    assert fmas(lower_complex([zn.uop, n.uop])[1]) == 1     # |z|'s only: z * z (two) and |z_old| are not redone
    # in a loop's body: the rewrite goes into bodies, whose results are the body's own
    def step(i: Any, c: tuple) -> tuple:
        zn = tnp.where(tnp.abs(c[0]) <= 2, c[0] * c[0] + 0.3j, c[0])
        return zn, c[1] + (tnp.abs(zn) <= 2)
    out = tg.lax.fori_loop(0, 20, step, (z, tnp.zeros((8, 8), tnp.int32)))
    lowered = UOp(Ops.SINK, None, tuple(lower_complex([out[0].uop, out[1].uop])))
    (loop,) = [u for u in lowered.toposort() if u.op is Ops.LOOP]
    assert fmas(loop.src[0].src[1]) == 1
    zz, nn = np.full((8, 8), 0.5 + 0.5j, np.complex64), np.zeros((8, 8), np.int32)
    for _ in range(20):
        zz = np.where(np.abs(zz) <= 2, zz * zz + np.complex64(0.3j), zz)
        nn = nn + (np.abs(zz) <= 2)
    np.testing.assert_array_equal(np.asarray(out[1]), nn)
    np.testing.assert_array_equal(np.asarray(out[0]), zz)


def test_jitted_views_of_a_stored_complex_value_copy_every_pair() -> None:
    """A jitted result that is a view of a stored complex value (a captured constant reshaped and broadcast) is
    copied as pairs: the copy read the pairs buffer as half as many complex elements (the second row came out 0)."""
    c = tg.asarray(np.array([1 + 1j, 1 - 1j, 2, 3j], np.complex64))
    v = c.numpy()
    cases = [(lambda: c[:2].reshape(1, 2).expand((2, 2)) + 0, np.broadcast_to(v[:2].reshape(1, 2), (2, 2))),
             (lambda: (c.reshape(2, 2).T + 0).reshape(4), v.reshape(2, 2).T.reshape(4)),
             (lambda: (c + 0)[::-1], v[::-1]), (lambda: tnp.pad(c + 1, 1), np.pad(v + 1, 1)),
             (lambda: tnp.cumsum(c), np.cumsum(v))]
    for f, want in cases:
        np.testing.assert_array_equal(tg.jit(f)().numpy(), want)


def test_a_chain_of_eager_complex_steps_reads_parts_without_nesting_packs() -> None:
    # JAX's cookbook descends on z = 3 + 4j for 100 eager steps through real/imag/conj. Their eager `p[..., i]` was a
    # dynamic slice (its start a kernel argument) that the lowering could not fold into the part a pair was packed
    # from: every step nested the last one's pack, and the kernel lowered in exponential time (7.8 s at 4 steps, none
    # at 6 in 110 s). Cut statically, a step's pairs are packed once where stored, whatever the chain's length
    from tgfx.lowering.complex import lower_complex
    z, want = tnp.asarray(np.complex64(3 + 4j)), np.complex64(3 + 4j)
    for _ in range(12):
        z = z - 0.05 * tnp.conj(2 * tnp.real(z) + 2j * tnp.imag(z))
        want = want - np.float32(0.05) * np.conj(2 * want.real + 2j * want.imag)
    lowered = tg.UOp(Ops.SINK, None, tuple(lower_complex([tg.UOp(Ops.CONTIGUOUS, z.dtype, (z.uop,))]))).toposort()
    assert sum(u.op is Ops.PAD for u in lowered) <= 3 and not any(u.op is Ops.DYNAMIC_SHRINK for u in lowered)
    assert_close(z, np.complex64(want))
