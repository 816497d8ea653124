"""tg.lax's primitives (tgfx/_lax_ops.py, _lax_shape.py, _lax_scan.py) against numpy or their definitions: the
elementwise ops with C-style integer division and XLA's shift rules, the shape ops (pad with interior and negative
padding), saturating conversion, bit reductions, cumulative reductions (short and long axes), sorts and top_k, the
parallel associative_scan with a non-commutative fn, dot_general; jit and vmap, gradients of top_k, dot_general and
associative_scan, and the errors (a dtype mismatch names both dtypes, as jax.lax).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import lax


def T(x: np.ndarray) -> tg.Tensor:
    return tnp.asarray(np.asarray(x))


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got: tg.Tensor, want: np.ndarray, tol: float = 1e-5) -> None:
    g = got.numpy()
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol)


def same(got: tg.Tensor, want: np.ndarray) -> None:
    g = got.numpy()
    assert g.dtype == np.asarray(want).dtype, (g.dtype, np.asarray(want).dtype)
    np.testing.assert_array_equal(g, want)


# ---- elementwise ----
def test_unary_float_ops_match_numpy() -> None:
    import math
    x = np.array([-2.5, -0.7, -0.0, 0.3, 0.5, 1.5, 2.5, 7.25], np.float32)
    pos = np.abs(x) + 0.25
    unit = np.clip(x / 3, -0.9, 0.9).astype(np.float32)
    cases = [
        (lax.abs, x, np.abs), (lax.neg, x, np.negative), (lax.floor, x, np.floor), (lax.ceil, x, np.ceil),
        (lax.sqrt, pos, np.sqrt), (lax.rsqrt, pos, lambda v: 1 / np.sqrt(v)), (lax.cbrt, x, np.cbrt),
        (lax.exp, x, np.exp), (lax.exp2, x, np.exp2), (lax.expm1, x, np.expm1), (lax.log, pos, np.log),
        (lax.log1p, pos, np.log1p), (lax.logistic, x, lambda v: 1 / (1 + np.exp(-v))), (lax.sin, x, np.sin),
        (lax.cos, x, np.cos), (lax.tan, unit, np.tan), (lax.asin, unit, np.arcsin), (lax.acos, unit, np.arccos),
        (lax.atan, x, np.arctan), (lax.sinh, x, np.sinh), (lax.cosh, x, np.cosh), (lax.tanh, x, np.tanh),
        (lax.asinh, x, np.arcsinh), (lax.acosh, pos + 1, np.arccosh), (lax.atanh, unit, np.arctanh),
        (lax.erf, x, np.vectorize(math.erf)), (lax.erfc, x, np.vectorize(math.erfc)),
        (lax.lgamma, pos, np.vectorize(math.lgamma)), (lax.square, x, np.square),
        (lax.reciprocal, pos, np.reciprocal), (lax.sign, x, np.sign),
    ]
    for fn, arg, ref in cases:
        close(fn(T(arg)), ref(arg.astype(np.float64)).astype(np.float32), 2e-5)
    close(lax.erf_inv(lax.erf(T(unit))), unit, 1e-5)
    close(lax.digamma(T(np.float32([1.0, 2.0]))), np.float32([-0.5772157, 0.4227843]), 1e-5)
    assert np.signbit(lax.sign(T(np.float32(-0.0))).numpy())   # -0.0 keeps its sign, as lax.sign
    same(lax.is_finite(T(np.float32([1.0, np.inf, np.nan]))), np.array([True, False, False]))
    same(lax.cbrt(T(np.float32([27.0, -8.0]))), np.float32([3.0, -2.0]))   # exact cubes are exact


def test_round_methods() -> None:
    x = np.float32([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, -0.4, np.inf])
    same(lax.round(T(x)), np.float32([1, 2, 3, -1, -3, 0, -0.0, np.inf]))
    same(lax.round(T(x), lax.RoundingMethod.TO_NEAREST_EVEN), np.round(x))
    assert np.signbit(lax.round(T(x)).numpy()[6])


def c_div(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C's truncating division and remainder, with XLA's x / 0 = -1 (all bits) and x % 0 = x."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    safe = np.where(b64 == 0, 1, b64)
    q = np.trunc(a64 / safe).astype(np.int64)
    q = np.where(np.abs(a64 - q * safe) >= np.abs(safe), q + np.sign(a64) * np.sign(safe), q)   # float rounding
    r = a64 - q * safe
    q = np.where(b64 == 0, -1, q)
    r = np.where(b64 == 0, a64, r)
    info = np.iinfo(a.dtype)
    return (q.astype(np.int64) & ((1 << info.bits) - 1)).astype(np.uint64).astype(a.dtype), r.astype(a.dtype)


@settings(max_examples=15)
@given(st.sampled_from([np.int8, np.int32, np.uint8, np.uint16]), st.integers(0, 2**32 - 1))
def test_int_div_rem_are_c_style(dt: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, 12, endpoint=True).astype(dt)
    b = rng.integers(max(info.min, -9), 10, 12).astype(dt)
    b[0] = 0
    q, r = c_div(a, b)
    same(lax.div(T(a), T(b)), q)
    same(lax.rem(T(a), T(b)), r)


def test_div_rem_examples() -> None:
    same(lax.div(T(np.int32([-7, 7, -7])), T(np.int32([2, -2, -2]))), np.int32([-3, -3, 3]))
    same(lax.rem(T(np.int32([-7, 7])), T(np.int32([2, -2]))), np.int32([-1, 1]))
    close(lax.rem(T(np.float32([-7.5, 7.5])), T(np.float32([2.0, -2.0]))), np.float32([-1.5, 1.5]))
    close(lax.div(T(np.float32([1.0])), T(np.float32([4.0]))), np.float32([0.25]))


@settings(max_examples=15)
@given(st.sampled_from([np.int8, np.int32, np.uint8, np.uint32]), st.integers(0, 2**32 - 1))
def test_shifts_follow_xla(dt: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    bits = info.bits
    a = rng.integers(info.min, info.max, 16, endpoint=True).astype(dt)
    b = rng.integers(-2 if info.min < 0 else 0, bits + 3, 16).astype(dt)
    u = np.dtype(f"uint{bits}").type
    s = np.dtype(f"int{bits}").type
    amt = b.astype(np.int64)
    ok = (amt >= 0) & (amt < bits)
    safe = np.where(ok, amt, 0)
    mask = (1 << bits) - 1
    left = np.where(ok, (a.astype(np.int64) << safe) & mask, 0).astype(np.uint64).astype(u).view(dt)
    logical = np.where(ok, a.view(u).astype(np.uint64) >> safe.astype(np.uint64), 0).astype(u).view(dt)
    arith = (a.view(s).astype(np.int64) >> np.where(ok, safe, bits - 1)).astype(s).view(dt)
    same(lax.shift_left(T(a), T(b)), left)
    same(lax.shift_right_logical(T(a), T(b)), logical)
    same(lax.shift_right_arithmetic(T(a), T(b)), arith)


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int32, np.uint32])
def test_population_count_and_clz(dt: type) -> None:
    info = np.iinfo(dt)
    a = np.random.default_rng(1).integers(info.min, info.max, 20, endpoint=True).astype(dt)
    a[:4] = [0, 1, info.max, info.min]
    bits = np.unpackbits(a.view(np.uint8).reshape(a.size, -1)[:, ::-1], axis=1)   # most significant bit first
    same(lax.population_count(T(a)), bits.sum(1).astype(dt))
    lead = np.where(bits.any(1), bits.argmax(1), info.bits)
    same(lax.clz(T(a)), lead.astype(dt))


def test_bitwise_comparisons_pow() -> None:
    a, b = np.int32([5, -3, 12]), np.int32([3, 7, -12])
    same(lax.bitwise_and(T(a), T(b)), a & b)
    same(lax.bitwise_or(T(a), T(b)), a | b)
    same(lax.bitwise_xor(T(a), T(b)), a ^ b)
    same(lax.bitwise_not(T(a)), ~a)
    same(lax.bitwise_not(T(np.array([True, False]))), np.array([False, True]))
    for fn, ref in ((lax.eq, np.equal), (lax.ne, np.not_equal), (lax.lt, np.less), (lax.le, np.less_equal),
                    (lax.gt, np.greater), (lax.ge, np.greater_equal)):
        same(fn(T(a), T(b)), ref(a, b))
    x = np.float32([1.5, -2.0, 0.5])
    close(lax.pow(T(x), T(np.int32([2, 3, -1]))), np.float32([2.25, -8.0, 2.0]))
    close(lax.pow(T(np.abs(x)), T(x)), np.abs(x) ** x)
    close(lax.integer_pow(T(x), 3), x ** 3)
    close(lax.integer_pow(T(x), -2), x ** -2.0)
    same(lax.integer_pow(T(np.int32([2, -3])), 5), np.int32([32, -243]))
    close(lax.atan2(T(x), T(x[::-1].copy())), np.arctan2(x, x[::-1]))
    close(lax.nextafter(T(np.float32([1.0])), T(np.float32([2.0]))), np.nextafter(np.float32([1.0]), np.float32(2)))
    close(lax.sub(T(x), 1.0), x - 1)   # a Python float is a float32 operand
    close(lax.sub(T(x), T(np.float32(2.0))), x - 2)   # a 0-d operand broadcasts


def test_dtype_mismatch_raises_naming_both_dtypes() -> None:
    f, i = T(np.float32([1.0, 2.0])), T(np.int32([1, 2]))
    for call in (lambda: lax.sub(f, i), lambda: lax.eq(f, i), lambda: lax.div(i, f), lambda: lax.sub(f, 1),
                 lambda: lax.concatenate([f, i], 0), lambda: lax.select_n(T(np.array([True, False])), f, i),
                 lambda: lax.clamp(0, f, 1.0), lambda: lax.pad(f, 0, [(1, 1, 0)])):
        with pytest.raises(TypeError, match=r"same dtypes, got (float32, int32|int32, float32)"):
            call()
    with pytest.raises(TypeError, match="lax.exp does not accept dtype int32"):
        lax.exp(i)
    with pytest.raises(TypeError, match="lax.shift_left does not accept dtype float32"):
        lax.shift_left(f, f)
    with pytest.raises(TypeError, match="same number of dimensions"):
        lax.sub(T(np.ones((2, 3), np.float32)), T(np.ones(3, np.float32)))
    with pytest.raises(TypeError, match="negative powers"):
        lax.integer_pow(i, -1)


# ---- shapes ----
def test_shape_ops_match_numpy() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    same(lax.broadcast(T(x), (5,)), np.broadcast_to(x, (5, 2, 3, 4)))
    same(lax.broadcast_in_dim(T(x[:, :1, 0]), (2, 7, 3), (0, 2)), np.broadcast_to(x[:, None, :1, 0], (2, 7, 3)))
    same(lax.broadcast_in_dim(T(x[0]), (4, 3), (1, 0)), x[0].T)   # axes that land out of order
    same(lax.reshape(T(x), (4, 6), (2, 0, 1)), x.transpose(2, 0, 1).reshape(4, 6))
    same(lax.transpose(T(x), (2, 0, 1)), x.transpose(2, 0, 1))
    same(lax.rev(T(x), (0, 2)), x[::-1, :, ::-1])
    same(lax.squeeze(T(x[:, :1, :, None]), (-1, 1)), x[:, 0, :])
    same(lax.expand_dims(T(x), (0, -1)), x[None, ..., None])
    same(lax.collapse(T(x), 1), x.reshape(2, 12))
    same(lax.collapse(T(x), 0, 2), x.reshape(6, 4))
    same(lax.slice(T(x), (1, 0, 1), (2, 3, 4), (1, 2, 2)), x[1:2, 0:3:2, 1:4:2])
    same(lax.slice_in_dim(T(x), -3, None, 1, 2), x[:, :, -3:])
    same(lax.slice_in_dim(T(x), 0, -1, 2, 1), x[:, 0:-1:2])
    same(lax.index_in_dim(T(x), -1, 1, keepdims=False), x[:, -1])
    same(lax.index_in_dim(T(x), 0, 2), x[:, :, :1])
    same(lax.concatenate([T(x), T(x[:, :1])], 1), np.concatenate([x, x[:, :1]], 1))
    with pytest.raises(ValueError, match="0 <= start <= limit <= 3"):
        lax.slice(T(x), (0, 0, 0), (2, 4, 4))
    with pytest.raises(ValueError, match="size 3"):
        lax.squeeze(T(x), (1,))
    with pytest.raises(TypeError, match="keep the size"):
        lax.reshape(T(x), (5, 5))


def np_pad(x: np.ndarray, value: float, config: list[tuple[int, int, int]]) -> np.ndarray:
    """lax.pad's definition: interior values first, then low/high (negative: elements dropped)."""
    for a, (lo, hi, interior) in enumerate(config):
        x = np.moveaxis(x, a, 0)
        n = x.shape[0]
        grown = np.full((n + max(n - 1, 0) * interior,) + x.shape[1:], value, x.dtype)
        grown[::interior + 1] = x
        ends = np.full((max(lo, 0),) + x.shape[1:], value, x.dtype), np.full((max(hi, 0),) + x.shape[1:], value,
                                                                              x.dtype)
        grown = np.concatenate([ends[0], grown, ends[1]])
        grown = grown[max(-lo, 0):grown.shape[0] - max(-hi, 0)]
        x = np.moveaxis(grown, 0, a)
    return x


@settings(max_examples=15)
@given(st.lists(st.tuples(st.integers(-2, 3), st.integers(-2, 3), st.integers(0, 2)), min_size=2, max_size=2),
       st.sampled_from([0.0, -1.5]))
def test_pad_with_interior_and_negative_padding(config: list[tuple[int, int, int]], value: float) -> None:
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    if any(lo + hi + n + (n - 1) * interior < 0 for (lo, hi, interior), n in zip(config, x.shape, strict=True)):
        # (more cut than the axis has, (-2, -2, 0) of 3: jax refuses it too)
        with pytest.raises(ValueError, match=r"padding_config\[\d\] = .* is invalid for an axis of size"):
            lax.pad(T(x), np.float32(value), config)
        return
    same(lax.pad(T(x), np.float32(value), config), np_pad(x, np.float32(value), config))


def test_selections_constants_conversions() -> None:
    a, b, c = np.float32([1, 2, 3]), np.float32([4, 5, 6]), np.float32([7, 8, 9])
    same(lax.select(T(np.array([True, False, True])), T(a), T(b)), np.float32([1, 5, 3]))
    same(lax.select_n(T(np.int32([2, 0, 1])), T(a), T(b), T(c)), np.float32([7, 2, 6]))
    same(lax.select_n(T(np.array(True)), T(a), T(b)), b)
    same(lax.clamp(np.float32(1.5), T(np.float32([0, 2, 9])), np.float32(8)), np.float32([1.5, 2, 8]))
    same(lax.iota(tnp.float32, 4), np.arange(4, dtype=np.float32))
    same(lax.broadcasted_iota(tnp.int32, (2, 3), 1), np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)))
    same(lax.full((2, 3), 1.5, tnp.int32), np.full((2, 3), 1, np.int32))
    same(lax.full_like(T(a), 7), np.full(3, 7, np.float32))
    f = np.float32([1.7, -1.7, np.nan, 1e10, -1e10, 127.5, -128.9])
    same(lax.convert_element_type(T(f), tnp.int8), np.int8([1, -1, 0, 127, -128, 127, -128]))   # saturating
    same(lax.convert_element_type(T(f), tnp.uint8), np.uint8([1, 0, 0, 255, 0, 127, 0]))
    same(lax.convert_element_type(T(f), tnp.bool_), f != 0)
    same(lax.convert_element_type(T(np.complex64([1 + 2j])), tnp.float32), np.float32([1]))
    u = np.uint32([0x01020304, 7])
    same(lax.bitcast_convert_type(T(f), tnp.int32), f.view(np.int32))
    same(lax.bitcast_convert_type(T(u), tnp.uint8), u.view(np.uint8).reshape(2, 4))
    same(lax.bitcast_convert_type(T(u.view(np.uint8).reshape(2, 4)), tnp.uint32), u)
    with pytest.raises(TypeError, match="scalar fill_value"):
        lax.full((2,), T(a))
    with pytest.raises(TypeError, match="cases must have the same shapes"):
        lax.select(T(np.array([True, False, True])), T(a), T(np.float32(0)))


# ---- reductions ----
def test_reductions_keep_dtype_and_match_numpy() -> None:
    x = rand(3, 5, 4)
    xi = np.random.default_rng(2).integers(-100, 100, (3, 5, 4)).astype(np.int32)
    close(lax.reduce_sum(T(x), (0, 2)), x.sum((0, 2)))
    same(lax.reduce_sum(T(xi.astype(np.int8)), (1,)), xi.astype(np.int8).sum(1, dtype=np.int8))
    close(lax.reduce_prod(T(x), (1,)), x.prod(1), 1e-4)
    same(lax.reduce_max(T(x), (1,)), x.max(1))
    same(lax.reduce_min(T(xi), (0, 1)), xi.min((0, 1)))
    same(lax.reduce_max(T(np.zeros((2, 0), np.float32)), (1,)), np.full(2, -np.inf, np.float32))
    for fn, ref in ((lax.reduce_and, np.bitwise_and), (lax.reduce_or, np.bitwise_or),
                    (lax.reduce_xor, np.bitwise_xor)):
        same(fn(T(xi), (1,)), ref.reduce(xi, axis=1))
        same(fn(T(xi.astype(np.uint8)), (0, 2)), ref.reduce(ref.reduce(xi.astype(np.uint8), axis=2), axis=0))
        same(fn(T(xi > 0), (1,)), ref.reduce(xi > 0, axis=1))
    same(lax.reduce_and(T(np.zeros((2, 0), np.int32)), (1,)), np.full(2, -1, np.int32))
    same(lax.argmax(T(x), 1, tnp.int32), x.argmax(1).astype(np.int32))
    same(lax.argmin(T(xi), 2, tnp.int16), xi.argmin(2).astype(np.int16))


def np_cumulative(name: str, x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    fn = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum, "cummin": np.minimum,
          "cumlogsumexp": np.logaddexp}[name]
    y = np.flip(x, axis) if reverse else x
    out = fn.accumulate(y.astype(np.float64) if x.dtype.kind == "f" else y, axis=axis).astype(x.dtype)
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"])
def test_cumulative_short_and_long_axes(name: str) -> None:
    for shape, axis in (((3, 5), 1), ((70, 2), 0)):   # a masked reduce, and the associative scan
        x = rand(*shape, seed=len(name)) * (0.1 if name == "cumprod" else 1.0)
        for reverse in (False, True):
            close(getattr(lax, name)(T(x), axis, reverse), np_cumulative(name, x, axis, reverse), 1e-4)
    xi = np.random.default_rng(3).integers(-9, 9, (4, 20)).astype(np.int32)
    if name != "cumlogsumexp":
        same(getattr(lax, name)(T(xi), 1), np_cumulative(name, xi, 1, False))


# ---- sorting ----
def test_sort_single_and_multi_key() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    x[0, 2] = np.nan
    same(lax.sort(T(x), 1), np.sort(x, 1))
    k1, k2 = rng.integers(0, 2, (3, 9)).astype(np.int32), rng.integers(0, 3, (3, 9)).astype(np.int32)
    v = rng.standard_normal((3, 9)).astype(np.float32)
    order = np.stack([np.lexsort((np.arange(9), r2, r1)) for r1, r2 in zip(k1, k2, strict=True)])   # stable
    out = lax.sort((T(k1), T(k2), T(v)), dimension=1, num_keys=2)
    assert isinstance(out, tuple) and len(out) == 3
    for got, src in zip(out, (k1, k2, v), strict=True):
        same(got, np.take_along_axis(src, order, 1))
    keys, vals = lax.sort_key_val(T(k1.T.copy()), T(v.T.copy()), 0)
    order1 = np.argsort(k1.T, axis=0, kind="stable")
    same(keys, np.take_along_axis(k1.T, order1, 0))
    same(vals, np.take_along_axis(v.T, order1, 0))


def test_top_k_values_indices_ties_and_axis() -> None:
    x = np.float32([[1, 3, 3, 2, 3], [5, 4, 4, 9, 0]])
    vals, idx = lax.top_k(T(x), 3)
    same(vals, np.float32([[3, 3, 3], [9, 5, 4]]))
    same(idx, np.int32([[1, 2, 4], [3, 0, 1]]))   # equal values: the lower index first
    y = rand(6, 4, seed=5)
    vals, idx = lax.top_k(T(y), 2, axis=0)
    order = np.argsort(-y, axis=0, kind="stable")[:2]
    same(idx, order.astype(np.int32))
    same(vals, np.take_along_axis(y, order, 0))
    with pytest.raises(ValueError, match="k must be an int from 0"):
        lax.top_k(T(x), 6)


def _total_order_top_k(x: np.ndarray, k: int) -> np.ndarray:
    """The reference: positions of the k largest along the last axis by JAX's order of float bits (-NaN < -inf <
    ... < -0.0 < 0.0 < ... < inf < NaN), lower index first among equals."""
    bits = x.view(np.int32).astype(np.int64)
    key = np.where(bits < 0, -(bits & 0x7FFFFFFF) - 1, bits)   # monotone in the float order, -0.0 below 0.0
    return np.argsort(-key, axis=-1, kind="stable")[..., :k].astype(np.int32)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(0, 40), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_top_k_orders_floats_by_their_bits_on_both_sides_of_the_select_limit(n: int, k: int, rows: int,
                                                                            seed: int) -> None:
    # k up to TOP_K_SELECT selects one at a time, larger k sorts: both give JAX's order, ties lower index first
    k = min(k, n)
    rng = np.random.default_rng(seed)
    pool = np.float32([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 2.5, 2.5])
    x = np.where(rng.random((rows, n)) < 0.5, rng.choice(pool, (rows, n)), rng.integers(-3, 3, (rows, n)))
    x = x.astype(np.float32)
    x.view(np.int32)[np.isnan(x) & (rng.random(x.shape) < 0.5)] |= np.int32(-2**31)   # -NaN too
    vals, idx = lax.top_k(T(x), k)
    want = _total_order_top_k(x, k)
    same(idx, want)
    np.testing.assert_array_equal(vals.numpy().view(np.int32), np.take_along_axis(x, want, -1).view(np.int32))
    ints = rng.integers(-5, 5, (rows, n)).astype(np.int32)
    same(lax.top_k(T(ints), k)[1], np.argsort(-ints.astype(np.int64), axis=-1, kind="stable")[:, :k].astype(np.int32))


def test_minus_zero_survives_sorts_and_gathers_that_stay_one_hot_sums() -> None:
    # k == n: the gather of the values stays a one-hot sum in the kernel; float sums start at -0.0 and the one-hot
    # fills with it, so a picked -0.0 is still -0.0 (it came out +0.0), as in a sort and in numpy's sum of -0.0s
    x = np.float32([[0.0, -0.0, 1.0, 1.0, 2.5, -np.inf, np.inf, np.inf, 0.0]])
    vals, _ = lax.top_k(T(x), 9)
    np.testing.assert_array_equal(np.signbit(vals.numpy()), [[0, 0, 0, 0, 0, 0, 0, 1, 1]])
    np.testing.assert_array_equal(np.signbit(tnp.sort(T(x)).numpy()), np.signbit(np.sort(x, kind="stable")))
    assert np.signbit(tnp.sum(T(np.float32([-0.0, -0.0]))).numpy()) and not np.signbit(
        tnp.sum(T(np.float32([-0.0, 0.0]))).numpy())


def test_top_k_of_a_few_selects_in_a_few_kernels() -> None:
    from tgfx.counters import counters
    x = T(rand(64, 1000, seed=3))
    counters.reset()
    lax.top_k(x, 5)[0].numpy()
    assert counters.kernel_count <= 12, counters.kernel_count   # no sorting network (dozens of stages)


def test_top_k_gradient_goes_to_the_chosen_entries() -> None:
    x = rand(3, 6, seed=6)
    w = np.float32([1.0, 10.0])
    g = tg.grad(lambda t: (lax.top_k(t, 2)[0] * T(w)).sum())(T(x)).numpy()
    want = np.zeros_like(x)
    order = np.argsort(-x, axis=1, kind="stable")[:, :2]
    for r in range(3):
        want[r, order[r]] = w
    np.testing.assert_array_equal(g, want)


# ---- associative_scan, map ----
def compose(f: tuple, g: tuple) -> tuple:
    """The affine map x -> a x + b of f then g: non-commutative, so the operand order is tested."""
    return g[0] * f[0], g[0] * f[1] + g[1]


@settings(max_examples=10)
@given(st.integers(1, 37), st.booleans())
def test_associative_scan_composes_affine_maps_in_order(n: int, reverse: bool) -> None:
    a, b = rand(n, 3, seed=n) * 0.5 + 1.0, rand(n, 3, seed=n + 100)
    sa, sb = lax.associative_scan(compose, (T(a), T(b)), reverse=reverse)
    wa, wb = np.empty_like(a), np.empty_like(b)
    order = range(n - 1, -1, -1) if reverse else range(n)
    acc = None
    for i in order:
        acc = (a[i], b[i]) if acc is None else compose(acc, (a[i], b[i]))
        wa[i], wb[i] = acc
    close(sa, wa, 1e-4)
    close(sb, wb, 1e-4)


def test_associative_scan_axis_pytree_grad_and_errors() -> None:
    x = rand(3, 40, seed=7)
    out = lax.associative_scan(lambda p, q: {"s": p["s"] + q["s"], "m": tnp.maximum(p["m"], q["m"])},
                               {"s": T(x), "m": T(x)}, axis=1)
    close(out["s"], np.cumsum(x, 1), 1e-4)
    same(out["m"], np.maximum.accumulate(x, 1))
    g = tg.grad(lambda t: (lax.associative_scan(tnp.add, t, axis=1) * T(x)).sum())(T(x)).numpy()
    close(tg.Tensor(g), np.cumsum(x[:, ::-1], 1)[:, ::-1], 1e-4)   # d/dx_j sum_i w_i cumsum_i = sum_{i>=j} w_i
    with pytest.raises(ValueError, match="same length along axis"):
        lax.associative_scan(compose, (T(x), T(x[:, :5])), axis=1)


@settings(max_examples=12)
@given(st.integers(2, 40), st.sampled_from([1, 3, 16]))
def test_associative_scan_along_a_middle_axis_matches_numpy(n: int, inner: int) -> None:
    """A scan along an axis with a loop inside it: its levels' interleaves read their pieces under conditions that the
    index simplifier narrows the loops by (odd and even lengths, one level's padded piece)."""
    a, b = rand(2, n, inner, seed=n) * 0.5 + 1.0, rand(2, n, inner, seed=n + 1)
    sa, sb = lax.associative_scan(compose, (T(a), T(b)), axis=1)
    wa, wb = _compose_prefix(a, b)
    close(sa, wa, 1e-4)
    close(sb, wb, 1e-4)
    close(lax.associative_scan(tnp.add, T(b), axis=1), np.cumsum(b, 1), 1e-4)


def _compose_prefix(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`compose`'s prefixes along axis 1, one step at a time."""
    wa, wb = a.copy(), b.copy()
    for i in range(1, a.shape[1]):
        wa[:, i], wb[:, i] = compose((wa[:, i - 1], wb[:, i - 1]), (a[:, i], b[:, i]))
    return wa, wb


def test_associative_scan_levels_divide_no_index_in_their_inner_loop() -> None:
    """The down-sweep of a scan along a middle axis interleaves its even and odd prefixes: its even slots `r // 2`
    read a concatenation's second piece (`0 < r // 2`) through a padded slice. Given that condition the pieces' reads
    and their padding's clause are affine in the inner loop; before, a division and a remainder of every element's
    64-bit offset stayed in it, and the loop was left scalar (pool_scan's two scans of (32, 256, 32): 4 of its 7 ms of
    kernels; jax 0.4 ms for the scan of adds, tgfx 3.2 -> 0.2 ms)."""
    from tgfx.ir.ops import Ops
    from tgfx.ir.uop import UOp
    from tgfx.lowering import index_level
    from tgfx.lowering.inline import inline
    from tgfx.lowering.schedule import schedule
    out = lax.associative_scan(tnp.add, T(rand(4, 16, 32)), axis=1)   # the levels below run eagerly: the top one's
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (out.uop,))).src))
    (call,) = linear.src
    sink = index_level(call.src[0])
    inner = max((u for u in sink.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg[0])
    assert inner.src[0].arg == 32
    divisions = [u for u in sink.toposort() if u.op in (Ops.IDIV, Ops.MOD) and inner in u.toposort()]
    assert not divisions, divisions
    close(out, np.cumsum(rand(4, 16, 32), 1), 1e-4)


def test_map_and_stop_gradient() -> None:
    x = rand(4, 5, seed=8)
    close(lax.map(lambda r: (r * r).sum(), T(x)), (x * x).sum(1))
    out = lax.map(lambda d: {"twice": d["a"] * 2}, {"a": T(x)}, batch_size=2)
    close(out["twice"], 2 * x)
    assert lax.stop_gradient is tg.stop_gradient


# ---- dot_general ----
def test_dot_general_matches_einsum() -> None:
    a, b = rand(2, 3, 4, 5, seed=9), rand(2, 5, 4, 6, seed=10)
    close(lax.dot_general(T(a), T(b), (((2, 3), (2, 1)), ((0,), (0,)))), np.einsum("bmkl,blkn->bmn", a, b), 1e-4)
    close(lax.dot_general(T(a), T(b), (((3,), (1,)), ((0, 2), (0, 2)))), np.einsum("bmkl,blkn->bkmn", a, b), 1e-4)
    close(lax.dot_general(T(a[0, 0]), T(b[0, 0, 0]), (((), ()), ((), ()))), np.multiply.outer(a[0, 0], b[0, 0, 0]))
    i8 = np.random.default_rng(11).integers(-100, 100, (2, 3, 8)).astype(np.int8)
    out = lax.dot_general(T(i8), T(i8), (((2,), (2,)), ((0,), (0,))), preferred_element_type=tnp.int32)
    same(out, np.einsum("bik,bjk->bij", i8.astype(np.int32), i8.astype(np.int32)))
    m, v = rand(3, 4, seed=12), rand(4, seed=13)
    close(lax.dot(T(m), T(v)), m @ v)
    close(lax.dot(T(v), T(v)), v @ v)
    close(lax.batch_matmul(T(a[:, :, 0]), T(b[:, :, 0])), a[:, :, 0] @ b[:, :, 0], 1e-4)
    with pytest.raises(TypeError, match="contracting dimensions to have the same shape"):
        lax.dot_general(T(a), T(b), (((3,), (2,)), ((), ())))
    with pytest.raises(ValueError, match="dimension_numbers must be given"):
        lax.dot(T(a), T(b))


def test_dot_general_gradient() -> None:
    a, b = rand(2, 3, 4, seed=14), rand(2, 4, 5, seed=15)
    w = rand(2, 3, 5, seed=16)
    dims = (((2,), (1,)), ((0,), (0,)))
    ga, gb = tg.grad(lambda p, q: (lax.dot_general(p, q, dims) * T(w)).sum(), (0, 1))(T(a), T(b))
    close(ga, w @ b.transpose(0, 2, 1), 1e-4)
    close(gb, a.transpose(0, 2, 1) @ w, 1e-4)


# ---- transformations ----
def test_jit_and_vmap_agree_with_eager() -> None:
    x = rand(4, 6, seed=17)

    def f(t: tg.Tensor, v: tg.Tensor) -> tuple:
        return (lax.pad(t, v, [(1, -1, 1), (0, 2, 0)]), lax.sort((t, -t), 1)[1], lax.cumsum(t, 1, reverse=True),
                lax.div(lax.convert_element_type(t * 10, tnp.int32), 3), lax.clamp(-0.5, t, 0.5),
                lax.top_k(t, 2)[1], lax.shift_right_logical(lax.bitcast_convert_type(t, tnp.int32), 3))

    v = T(np.float32(9.0))
    for got, want in zip(tg.jit(f)(T(x), v), f(T(x), v), strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    rows = tg.vmap(lambda r: lax.associative_scan(compose, (r, r))[1])(T(x))
    for i in range(4):
        close(rows[i], lax.associative_scan(compose, (T(x[i]), T(x[i])))[1].numpy())


def test_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp, jlax = jax.numpy, jax.lax
    x = rand(5, 8, seed=18)
    xi = np.random.default_rng(19).integers(-50, 50, (5, 8)).astype(np.int32)
    for name, args in (("cbrt", (x,)), ("round", (x * 3,)), ("logistic", (x,)), ("div", (xi, xi % 7)),
                       ("rem", (xi, xi % 7)), ("clz", (xi,)), ("population_count", (xi,)),
                       ("shift_right_arithmetic", (xi, xi % 40)), ("cummax", (x, 1)), ("cumlogsumexp", (x, 1, True))):
        got = getattr(lax, name)(*(T(a) if isinstance(a, np.ndarray) else a for a in args)).numpy()
        want = np.asarray(getattr(jlax, name)(*(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
    got = lax.top_k(T(x), 3)
    want = jlax.top_k(jnp.asarray(x), 3)
    np.testing.assert_array_equal(got[1].numpy(), np.asarray(want[1]))
