"""Elementwise numpy functions and Tensor operators against numpy, over hypothesis shapes and values, per dtype.

Each reference is numpy run on the inputs cast to the result dtype JAX's promotion gives (bfloat16: float32, then
rounded), so a test checks the value and the dtype at once. NaN and infinity handling has its own targeted cases.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import (
    FLOATS,
    INTS,
    NUMERIC,
    SIGNED,
    TRANSCENDENTAL_ULPS,
    arrays,
    assert_close,
    broadcastable_shapes,
    elements,
    np_dtype,
    shapes,
    to_tensor,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_grad import check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import DType, dtypes, to_inexact

Fn = Callable[..., Any]


def _ref(fn: Fn, *xs: np.ndarray, dtype: DType) -> np.ndarray:
    """numpy's `fn` on the inputs cast to the dtype tgfx computes in."""
    with np.errstate(all="ignore"):
        return fn(*(np.asarray(x).astype(np_dtype(dtype)) for x in xs))


# ---- unary float functions: (tgfx, numpy, lo, hi) with the domain kept away from numpy's ill-conditioned edges ----
FLOAT_UNARY: dict[str, tuple[Fn, Fn, float, float]] = {
    "exp": (tnp.exp, np.exp, -10, 10),
    "exp2": (tnp.exp2, np.exp2, -14, 14),
    "expm1": (tnp.expm1, np.expm1, -5, 5),
    "log": (tnp.log, np.log, 0.01, 100),
    "log2": (tnp.log2, np.log2, 0.01, 100),
    "log10": (tnp.log10, np.log10, 0.01, 100),
    "log1p": (tnp.log1p, np.log1p, -0.9, 100),
    "sqrt": (tnp.sqrt, np.sqrt, 0, 100),
    "sin": (tnp.sin, np.sin, -10, 10),
    "cos": (tnp.cos, np.cos, -10, 10),
    "tan": (tnp.tan, np.tan, -1.3, 1.3),
    "arcsin": (tnp.arcsin, np.arcsin, -0.99, 0.99),
    "arccos": (tnp.arccos, np.arccos, -0.99, 0.99),
    "arctan": (tnp.arctan, np.arctan, -100, 100),
    "arcsinh": (tnp.arcsinh, np.arcsinh, -1e4, 1e4),
    "arccosh": (tnp.arccosh, np.arccosh, 1.0, 1e4),
    "arctanh": (tnp.arctanh, np.arctanh, -0.999, 0.999),
    "sinh": (tnp.sinh, np.sinh, -5, 5),
    "cosh": (tnp.cosh, np.cosh, -5, 5),
    "tanh": (tnp.tanh, np.tanh, -10, 10),
}


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
@pytest.mark.parametrize("name", FLOAT_UNARY)
@settings(max_examples=10)
@given(data=st.data())
def test_float_unary(name: str, d: DType, data: st.DataObject) -> None:
    fn, ref, lo, hi = FLOAT_UNARY[name]
    x = data.draw(arrays(d, shapes(), lo=lo, hi=hi))
    assert_close(fn(to_tensor(x, d)), _ref(ref, x, dtype=d), dtype=d, ulps=TRANSCENDENTAL_ULPS)


@pytest.mark.parametrize("d", [dtypes.int8, dtypes.int32, dtypes.uint8, dtypes.bool], ids=str)
@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "log1p", "tanh"])
def test_float_unary_of_integers_is_float32(name: str, d: DType) -> None:
    fn, ref, _, _ = FLOAT_UNARY[name]
    x = np.array([0, 1, 2, 1, 0, 3], d.np) if not d.is_bool else np.array([True, False, True])
    assert_close(fn(to_tensor(x)), _ref(ref, x, dtype=dtypes.float32), dtype=dtypes.float32,
                 ulps=TRANSCENDENTAL_ULPS)


@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.int64, dtypes.uint64], ids=str)
def test_float_unary_of_64bit_integers_is_float64(d: DType) -> None:
    x = np.array([0, 1, 2, 3, 2 ** 40], d.np)
    y = np.array([3, 2, 1, 7, 5], d.np)
    assert_close(tnp.sqrt(to_tensor(x)), np.sqrt(x.astype(np.float64)), dtype=dtypes.float64)
    assert_close(tnp.true_divide(to_tensor(x), to_tensor(y)), x / y, dtype=dtypes.float64)
    assert_close(to_tensor(x) / 3, x / 3, dtype=dtypes.float64)


def test_tanh_float32_saturates_to_exactly_one() -> None:
    """Beyond 9.02, float32 tanh rounds to +-1 (as numpy's float64 tanh rounded); a value just under 1 there makes
    the gradient 1 - tanh^2 a spurious 4.8e-7 instead of 0."""
    x = np.array([-1e30, -1000.0, -9.5, 9.5, 20.0, 1000.0], np.float32)
    out = tnp.tanh(tg.asarray(x))
    np.testing.assert_array_equal(out.numpy(), np.tanh(x.astype(np.float64)).astype(np.float32))
    np.testing.assert_array_equal(tg.grad(lambda t: tnp.tanh(t).sum())(tg.asarray(x)).numpy(), np.zeros(6))


# ---- unary functions on every numeric dtype, the result keeps the input's dtype ----
def _np_round(x: np.ndarray) -> np.ndarray:
    return np.round(x)


NUMERIC_UNARY: dict[str, tuple[Fn, Fn]] = {
    "negative": (tnp.negative, np.negative), "positive": (tnp.positive, np.positive),
    "abs": (tnp.abs, np.abs), "sign": (tnp.sign, np.sign), "square": (tnp.square, np.square),
    "floor": (tnp.floor, np.floor), "ceil": (tnp.ceil, np.ceil), "trunc": (tnp.trunc, np.trunc),
    "round": (tnp.round, _np_round), "rint": (tnp.rint, np.rint),
}


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC, ids=str)
@pytest.mark.parametrize("name", NUMERIC_UNARY)
@settings(max_examples=10)
@given(data=st.data())
def test_numeric_unary(name: str, d: DType, data: st.DataObject) -> None:
    fn, ref = NUMERIC_UNARY[name]
    # integers over their full range (negation and abs wrap around, as in numpy), except where squares overflow
    kw = {"lo": -300.0, "hi": 300.0} if d.is_float else {"lo": -11, "hi": 11} if name == "square" else {}
    x = data.draw(arrays(d, shapes(), **kw))
    # rint always gives floats: JAX's default float type for integers (float64 here, in x64 mode, even for int8)
    out = (d if d.is_float else dtypes.default_float) if name == "rint" else d
    assert_close(fn(to_tensor(x, d)), _ref(ref, x, dtype=out), dtype=out)


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("d", [dtypes.bool, dtypes.int8, dtypes.uint16, dtypes.int32], ids=str)
def test_rint_of_integers_is_the_default_float(d: DType, x64: bool) -> None:
    x = np.array([0, 1, 1, 0] if d.is_bool else [3, 0, 7] if d.is_unsigned else [3, -2, 0, 7], np_dtype(d))
    with tg.Context(TGFX_ENABLE_X64=int(x64)):
        want = np.float64 if x64 else np.float32
        assert_close(tnp.rint(to_tensor(x, d)), x.astype(want), dtype=dtypes.default_float)
        assert_close(tg.jit(tnp.rint)(to_tensor(x, d)), x.astype(want), dtype=dtypes.default_float)


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
def test_round_half_to_even(d: DType) -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49, -0.51], np_dtype(d))
    assert_close(tnp.round(to_tensor(x, d)), np.round(x), dtype=d)
    assert_close(tnp.rint(to_tensor(x, d)), np.rint(x), dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("decimals", [1, 2, -1])
def test_round_decimals_float(decimals: int) -> None:
    x = np.array([1.2345, -1.2355, 12.5, 15.0, 25.0, 0.05, 123.456], np.float64)
    assert_close(tnp.round(to_tensor(x), decimals), np.round(x, decimals), dtype=dtypes.float64)


def test_round_decimals_float16_scales_in_float32() -> None:
    # 65504 * 100 overflows float16 (numpy's round gives inf there): JAX scales in float32 and rounds back
    x = np.array([65504.0, 1000.5, 3.14159, -0.125, 60000.0], np.float16)
    for decimals in (2, 1, -2):
        want = np.round(x.astype(np.float32), decimals).astype(np.float16)
        out = tnp.round(to_tensor(x, dtypes.float16), decimals)
        assert out.dtype == dtypes.float16
        np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(tg.jit(lambda t: tnp.round(t, 2))(to_tensor(x, dtypes.float16)).numpy(),
                                  np.round(x.astype(np.float32), 2).astype(np.float16))


@pytest.mark.parametrize("d,decimals", [(dtypes.float16, 5), (dtypes.float32, 39)], ids=str)
def test_round_decimals_beyond_the_types_range_is_the_input(d: DType, decimals: int) -> None:
    # 10**decimals overflows the type (numpy gives NaN): JAX returns the input, there being nothing finer to round to
    x = np.array([1.5, -0.25, 3.0], np_dtype(d))
    assert_close(tnp.round(to_tensor(x, d), decimals), x, dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.int8, dtypes.int32, dtypes.uint8, dtypes.int64], ids=str)
@pytest.mark.parametrize("decimals", [1, -1, -2])
def test_round_decimals_int(d: DType, decimals: int) -> None:
    vals = [0, 5, 15, 25, 35, 44, 45, 46, 55, 99, 100, 120, 125, 127, -5, -15, -25, -35, -45, -126, -128, 250, 255]
    x = np.array([v for v in vals if np.iinfo(d.np).min <= v <= np.iinfo(d.np).max], d.np)
    assert_close(tnp.round(to_tensor(x), decimals), np.round(x, decimals), dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC, ids=str)
def test_reciprocal(d: DType) -> None:
    """Floats as numpy; integers promote to float like jnp.reciprocal (numpy's integer 1 // x is not followed)."""
    x = np.array([1, 2, 4, 5, 8, 100], np_dtype(d))
    out_dtype = to_inexact(d)
    assert_close(tnp.reciprocal(to_tensor(x, d)), 1 / x.astype(np_dtype(out_dtype)), dtype=out_dtype)


# ---- binary arithmetic with broadcasting ----
def _pow_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(a, b)


def _jax_floor_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's floor_divide, but an integer x // 0 as JAX gives it (numpy's is 0): XLA's x / 0 (all bits set), stepped
    down as an inexact division with differing signs: the maximum for unsigned types; -1 for 0 // 0, else -2."""
    with np.errstate(all="ignore"):
        q = np.floor_divide(a, b)
    if q.dtype.kind not in "iu":
        return q
    by_zero = np.iinfo(q.dtype).max if q.dtype.kind == "u" else np.where(a == 0, -1, -2)
    return np.where(b == 0, by_zero, q).astype(q.dtype)


BINARY: dict[str, tuple[Fn, Fn]] = {
    "add": (tnp.add, np.add), "subtract": (tnp.subtract, np.subtract), "multiply": (tnp.multiply, np.multiply),
    "maximum": (tnp.maximum, np.maximum), "minimum": (tnp.minimum, np.minimum),
    "floor_divide": (tnp.floor_divide, _jax_floor_divide), "remainder": (tnp.remainder, np.remainder),
    "mod": (tnp.mod, np.mod),
}


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC, ids=str)
@pytest.mark.parametrize("name", BINARY)
@settings(max_examples=12)
@given(data=st.data())
def test_binary(name: str, d: DType, data: st.DataObject) -> None:
    fn, ref = BINARY[name]
    sa = data.draw(shapes(max_dims=3))
    sb = data.draw(broadcastable_shapes(sa))
    # integers over their full range (add/multiply wrap as numpy does); floats within +-100; divisors may be 0
    kw = {} if d.is_int else {"lo": -100.0, "hi": 100.0}
    a = data.draw(arrays(d, sa, **kw))
    b = data.draw(arrays(d, sb, **kw))
    assert_close(fn(to_tensor(a, d), to_tensor(b, d)), _ref(ref, a, b, dtype=d), dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC, ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_true_divide(d: DType, data: st.DataObject) -> None:
    out = to_inexact(d)
    sa = data.draw(shapes(max_dims=2))
    a = data.draw(arrays(d, sa, lo=-1000, hi=1000))
    b = data.draw(arrays(d, data.draw(broadcastable_shapes(sa)), lo=-1000, hi=1000, nonzero=True))
    for fn in (tnp.true_divide, tnp.divide):
        assert_close(fn(to_tensor(a, d), to_tensor(b, d)), _ref(np.true_divide, a, b, dtype=out), dtype=out)


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_arctan2(d: DType, data: st.DataObject) -> None:
    sa = data.draw(shapes(max_dims=2))
    y = data.draw(arrays(d, sa, lo=-10.0, hi=10.0))
    x = data.draw(arrays(d, data.draw(broadcastable_shapes(sa)), lo=-10.0, hi=10.0))
    assert_close(tnp.arctan2(to_tensor(y, d), to_tensor(x, d)), _ref(np.arctan2, y, x, dtype=d), dtype=d,
                 ulps=TRANSCENDENTAL_ULPS)


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_power_float(d: DType, data: st.DataObject) -> None:
    sa = data.draw(shapes(max_dims=2))
    a = data.draw(arrays(d, sa, lo=0.1, hi=8.0))
    b = data.draw(arrays(d, data.draw(broadcastable_shapes(sa)), lo=-3.0, hi=3.0))
    assert_close(tnp.power(to_tensor(a, d), to_tensor(b, d)), _ref(np.power, a, b, dtype=d), dtype=d,
                 ulps=TRANSCENDENTAL_ULPS)


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
def test_power_float_negative_base(d: DType) -> None:
    a = np.array([-2.0, -3.0, -0.5, -1.0, -2.0, 0.0, 0.0], np_dtype(d))
    b = np.array([2.0, 3.0, -2.0, 7.0, 0.5, 0.0, 2.0], np_dtype(d))
    assert_close(tnp.power(to_tensor(a, d), to_tensor(b, d)), _ref(np.power, a, b, dtype=d), dtype=d,
                 ulps=TRANSCENDENTAL_ULPS)


@pytest.mark.x64
@pytest.mark.parametrize("d", INTS, ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_power_int(d: DType, data: st.DataObject) -> None:
    sa = data.draw(shapes(max_dims=2))
    a = data.draw(arrays(d, sa, lo=-4, hi=4))
    b = data.draw(arrays(d, data.draw(broadcastable_shapes(sa)), lo=0, hi=6))
    assert_close(tnp.power(to_tensor(a, d), to_tensor(b, d)), _ref(np.power, a, b, dtype=d), dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", INTS, ids=str)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 7])
def test_power_int_by_python_int(d: DType, n: int) -> None:
    x = np.array([0, 1, 2, 3, 5, 7], d.np)
    with np.errstate(all="ignore"):
        assert_close(to_tensor(x) ** n, x ** d.np.type(n), dtype=d)
        assert_close(tnp.power(to_tensor(x), n), x ** d.np.type(n), dtype=d)


def test_power_int_negative_exponent_truncates() -> None:
    """numpy raises on integer ** negative integer; tgfx gives the truncated real power (0 unless the base is +-1)."""
    a = to_tensor(np.array([2, 1, -1, -1, 3, 0, -2], np.int32))
    b = to_tensor(np.array([-1, -3, -3, -2, -2, 0, -1], np.int32))
    assert_close(a ** b, np.array([0, 1, -1, 1, 0, 1, 0]), dtype=dtypes.int32)


# ---- integer division and modulo: numpy's signs, division by zero as JAX, INT_MIN // -1 wraps ----
@pytest.mark.x64
@pytest.mark.parametrize("d", INTS, ids=str)
def test_integer_floor_divide_and_mod_signs(d: DType) -> None:
    vals = [-7, -6, -1, 0, 1, 6, 7, 3, -3, 2, -2] if not d.is_unsigned else [0, 1, 2, 3, 6, 7, 200 % (2 ** d.bits)]
    a = np.array([[v] for v in vals], d.np)
    b = np.array([v for v in vals if v != 0], d.np)
    assert_close(tnp.floor_divide(to_tensor(a), to_tensor(b)), a // b, dtype=d)
    assert_close(tnp.remainder(to_tensor(a), to_tensor(b)), a % b, dtype=d)
    assert_close(to_tensor(a) // to_tensor(b), a // b, dtype=d)
    assert_close(to_tensor(a) % to_tensor(b), a % b, dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", INTS, ids=str)
def test_integer_division_by_zero_is_jaxs(d: DType) -> None:
    """JAX's x // 0 (numpy's is 0): all bits set for unsigned types; for signed ones -1 for 0 // 0, -2 otherwise (XLA's
    x / 0 is -1, stepped down as the signs differ). x % 0 is 0, as in numpy; lax.div and lax.rem are XLA's."""
    x = np.array([5, 0, 1, 100] if d.is_unsigned else [5, 0, -1, -100], d.np)
    a, z = to_tensor(x), to_tensor(np.zeros(4, d.np))
    want = [int(np.iinfo(d.np).max)] * 4 if d.is_unsigned else [-2, -1, -2, -2]
    for q in (tnp.floor_divide(a, z), a // 0, a // z, tnp.divmod(a, z)[0], tg.jit(lambda p, q: p // q)(a, z)):
        assert q.dtype == d and q.tolist() == want
    for r in (tnp.remainder(a, z), a % 0, tnp.divmod(a, z)[1], tnp.fmod(a, z)):
        assert r.dtype == d and r.tolist() == [0] * 4
    assert tg.lax.div(a, z).tolist() == [int(np.iinfo(d.np).max) if d.is_unsigned else -1] * 4
    assert tg.lax.rem(a, z).tolist() == x.tolist()
    # a divisor of zero among others: the rest divide as numpy
    b = to_tensor(np.array([2, 0, 3, 0], d.np))
    assert (a // b).tolist() == _jax_floor_divide(x, np.array([2, 0, 3, 0], d.np)).tolist()


@pytest.mark.x64
@pytest.mark.parametrize("d", SIGNED, ids=str)
def test_integer_min_floor_divide_minus_one_wraps(d: DType) -> None:
    lo = np.iinfo(d.np).min
    a = np.array([lo, lo, lo + 1], d.np)
    b = np.array([-1, 1, -1], d.np)
    with np.errstate(all="ignore"):
        assert_close(tnp.floor_divide(to_tensor(a), to_tensor(b)), a // b, dtype=d)
        assert_close(tnp.remainder(to_tensor(a), to_tensor(b)), a % b, dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
def test_float_floor_divide_and_mod_are_numpys(d: DType) -> None:
    """numpy's divmod: `1 // 0.1` is 9 (0.1 is a little more than a tenth), signs follow the divisor."""
    a = np.array([[1.0], [-1.0], [7.0], [-7.0], [0.0], [-0.0], [5.5], [0.3]], np_dtype(d))
    b = np.array([0.1, 2.0, -2.0, 0.7, -0.7, 3.0, 1.5], np_dtype(d))
    if d == dtypes.bfloat16:  # numpy has no bfloat16: compare with float32 inputs rounded, computed in float32
        from helpers import bf16_round
        a, b = bf16_round(a), bf16_round(b)
    assert_close(tnp.floor_divide(to_tensor(a, d), to_tensor(b, d)), _ref(np.floor_divide, a, b, dtype=d), dtype=d)
    assert_close(tnp.remainder(to_tensor(a, d), to_tensor(b, d)), _ref(np.remainder, a, b, dtype=d), dtype=d)


def test_float_floor_divide_and_mod_special_values() -> None:
    inf, nan = np.inf, np.nan
    a = np.array([5.0, -5.0, 0.0, inf, 3.0, -3.0, nan, 3.0, -inf], np.float32)
    b = np.array([0.0, 0.0, 0.0, 3.0, inf, inf, 2.0, nan, -inf], np.float32)
    assert_close(tnp.floor_divide(to_tensor(a), to_tensor(b)), _ref(np.floor_divide, a, b, dtype=dtypes.float32))
    assert_close(tnp.remainder(to_tensor(a), to_tensor(b)), _ref(np.remainder, a, b, dtype=dtypes.float32))


def test_remainder_zero_takes_divisor_sign() -> None:
    a = np.array([4.0, -4.0, 0.0, -0.0], np.float32)
    b = np.array([-2.0, 2.0, -1.0, 1.0], np.float32)
    got = tnp.remainder(to_tensor(a), to_tensor(b)).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.remainder(a, b)))


# ---- comparisons and logic ----
COMPARISONS: dict[str, tuple[Fn, Fn]] = {
    "equal": (tnp.equal, np.equal), "not_equal": (tnp.not_equal, np.not_equal), "less": (tnp.less, np.less),
    "less_equal": (tnp.less_equal, np.less_equal), "greater": (tnp.greater, np.greater),
    "greater_equal": (tnp.greater_equal, np.greater_equal),
}


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC + (dtypes.bool,), ids=str)
@pytest.mark.parametrize("name", COMPARISONS)
@settings(max_examples=8)
@given(data=st.data())
def test_comparison(name: str, d: DType, data: st.DataObject) -> None:
    fn, ref = COMPARISONS[name]
    sa = data.draw(shapes(max_dims=2))
    few = {} if d.is_bool else {"lo": -2, "hi": 2}  # few distinct values, so ties are common
    a = data.draw(arrays(d, sa, **few))
    b = data.draw(arrays(d, data.draw(broadcastable_shapes(sa)), **few))
    assert_close(fn(to_tensor(a, d), to_tensor(b, d)), _ref(ref, a, b, dtype=d), dtype=dtypes.bool)


@pytest.mark.parametrize("d", [dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.int32, dtypes.uint8], ids=str)
def test_comparison_operators(d: DType) -> None:
    a = np.array([[0, 1, 2]], np_dtype(d))
    b = np.array([[2], [1], [0]], np_dtype(d))
    ta, tb = to_tensor(a, d), to_tensor(b, d)
    for got, want in [(ta < tb, a < b), (ta <= tb, a <= b), (ta > tb, a > b), (ta >= tb, a >= b),
                      (ta == tb, a == b), (ta != tb, a != b), (ta < 1, a < 1), (1 < ta, 1 < a), (ta == 2, a == 2)]:
        assert_close(got, want, dtype=dtypes.bool)


def test_comparisons_with_nan() -> None:
    a = np.array([np.nan, np.nan, 1.0, np.inf, -np.inf], np.float32)
    b = np.array([np.nan, 1.0, np.nan, np.inf, np.inf], np.float32)
    for fn, ref in COMPARISONS.values():
        assert_close(fn(to_tensor(a), to_tensor(b)), ref(a, b), dtype=dtypes.bool)


LOGICAL: dict[str, tuple[Fn, Fn]] = {
    "logical_and": (tnp.logical_and, np.logical_and), "logical_or": (tnp.logical_or, np.logical_or),
    "logical_xor": (tnp.logical_xor, np.logical_xor),
}


@pytest.mark.parametrize("d", [dtypes.bool, dtypes.int32, dtypes.uint8, dtypes.float32, dtypes.bfloat16], ids=str)
@pytest.mark.parametrize("name", LOGICAL)
@settings(max_examples=8)
@given(data=st.data())
def test_logical(name: str, d: DType, data: st.DataObject) -> None:
    fn, ref = LOGICAL[name]
    sa = data.draw(shapes(max_dims=2))
    few = {} if d.is_bool else {"lo": -1, "hi": 1}
    a = data.draw(arrays(d, sa, **few))
    b = data.draw(arrays(d, data.draw(broadcastable_shapes(sa)), **few))
    assert_close(fn(to_tensor(a, d), to_tensor(b, d)), ref(a, b), dtype=dtypes.bool)


@pytest.mark.parametrize("d", [dtypes.bool, dtypes.int8, dtypes.float32, dtypes.float16], ids=str)
def test_logical_not(d: DType) -> None:
    x = np.array([0, 1, 2, 0, -1], np_dtype(d)) if not d.is_bool else np.array([True, False])
    assert_close(tnp.logical_not(to_tensor(x, d)), np.logical_not(x), dtype=dtypes.bool)
    if d.is_float:
        assert_close(tnp.logical_not(to_tensor(np.array([np.nan, -0.0], np_dtype(d)), d)), np.array([False, True]))


# ---- bitwise and shifts ----
BITWISE: dict[str, tuple[Fn, Fn]] = {
    "bitwise_and": (tnp.bitwise_and, np.bitwise_and), "bitwise_or": (tnp.bitwise_or, np.bitwise_or),
    "bitwise_xor": (tnp.bitwise_xor, np.bitwise_xor),
}


@pytest.mark.x64
@pytest.mark.parametrize("d", INTS + (dtypes.bool,), ids=str)
@pytest.mark.parametrize("name", BITWISE)
@settings(max_examples=8)
@given(data=st.data())
def test_bitwise(name: str, d: DType, data: st.DataObject) -> None:
    fn, ref = BITWISE[name]
    sa = data.draw(shapes(max_dims=2))
    a = data.draw(arrays(d, sa))
    b = data.draw(arrays(d, data.draw(broadcastable_shapes(sa))))
    assert_close(fn(to_tensor(a, d), to_tensor(b, d)), ref(a, b), dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", INTS + (dtypes.bool,), ids=str)
@settings(max_examples=8)
@given(data=st.data())
def test_invert(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=2)))
    assert_close(tnp.invert(to_tensor(x, d)), np.invert(x), dtype=d)
    assert_close(tnp.bitwise_not(to_tensor(x, d)), np.invert(x), dtype=d)
    assert_close(~to_tensor(x, d), ~x, dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", INTS, ids=str)
@pytest.mark.parametrize("name", ["left_shift", "right_shift"])
@settings(max_examples=10)
@given(data=st.data())
def test_shift(name: str, d: DType, data: st.DataObject) -> None:
    fn, ref = getattr(tnp, name), getattr(np, name)
    sa = data.draw(shapes(max_dims=2))
    a = data.draw(arrays(d, sa))
    b = data.draw(arrays(d, data.draw(broadcastable_shapes(sa)), lo=0, hi=d.bits - 1))
    assert_close(fn(to_tensor(a, d), to_tensor(b, d)), ref(a, b), dtype=d)


@pytest.mark.x64
@pytest.mark.parametrize("d", INTS, ids=str)
def test_shift_by_bit_width_or_more(d: DType) -> None:
    """numpy: shifting out every bit gives 0, or -1 for an arithmetic right shift of a negative number."""
    lo = -5 if not d.is_unsigned else 5
    a = np.array([1, lo, 7, lo, 1], d.np)
    b = np.array([d.bits, d.bits, d.bits + 3, d.bits - 1, min(2 * d.bits, np.iinfo(d.np).max)], d.np)
    assert_close(tnp.left_shift(to_tensor(a), to_tensor(b)), np.left_shift(a, b), dtype=d)
    assert_close(tnp.right_shift(to_tensor(a), to_tensor(b)), np.right_shift(a, b), dtype=d)


def test_shift_operators() -> None:
    a = np.array([1, -8, 255, 3], np.int32)
    t = to_tensor(a)
    assert_close(t << 2, a << 2, dtype=dtypes.int32)
    assert_close(t >> 1, a >> 1, dtype=dtypes.int32)
    assert_close(1 << to_tensor(np.array([0, 1, 5], np.int32)), 1 << np.array([0, 1, 5]), dtype=dtypes.int32)
    assert_close(256 >> to_tensor(np.array([0, 1, 5], np.int32)), 256 >> np.array([0, 1, 5]), dtype=dtypes.int32)


def test_bitwise_operators_on_ints_and_bools() -> None:
    a, b = np.array([12, 10, -1], np.int16), np.array([10, 6, 5], np.int16)
    ta, tb = to_tensor(a), to_tensor(b)
    assert_close(ta & tb, a & b, dtype=dtypes.int16)
    assert_close(ta | tb, a | b, dtype=dtypes.int16)
    assert_close(ta ^ tb, a ^ b, dtype=dtypes.int16)
    assert_close(ta & 6, a & 6, dtype=dtypes.int16)
    assert_close(3 | ta, 3 | a, dtype=dtypes.int16)
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    tp, tq = to_tensor(p), to_tensor(q)
    assert_close(tp & tq, p & q, dtype=dtypes.bool)
    assert_close(tp | tq, p | q, dtype=dtypes.bool)
    assert_close(tp ^ tq, p ^ q, dtype=dtypes.bool)
    assert_close(tp & True, p & True, dtype=dtypes.bool)
    assert_close(False | tq, False | q, dtype=dtypes.bool)


# JAX's numeric promotion (promote_args_numeric): the functions with no bool form compute bools as int32, either mode
BOOL_AS_INT32: dict[str, Fn] = {
    "left_shift": tnp.left_shift, "<<": operator.lshift, "right_shift": tnp.right_shift, ">>": operator.rshift,
    "fmod": tnp.fmod, "floor_divide": tnp.floor_divide, "//": operator.floordiv, "remainder": tnp.remainder,
    "%": operator.mod, "power": tnp.power, "**": operator.pow,
}


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("name", BOOL_AS_INT32)
def test_bool_operands_compute_as_int32(name: str, x64: bool) -> None:
    fn = BOOL_AS_INT32[name]
    p, q = np.array([True, False, True, False]), np.array([True, True, True, True])   # (no division by zero)
    pi, qi = p.astype(np.int32), q.astype(np.int32)
    with tg.Context(TGFX_ENABLE_X64=int(x64)):
        tp, tq = to_tensor(p), to_tensor(q)
        assert_close(fn(tp, tq), fn(pi, qi), dtype=dtypes.int32)
        assert_close(fn(tp, True), fn(pi, np.int32(1)), dtype=dtypes.int32)   # a Python bool is a weak bool
        assert_close(fn(True, tq), fn(np.int32(1), qi), dtype=dtypes.int32)
        assert_close(tg.jit(fn)(tp, tq), fn(pi, qi), dtype=dtypes.int32)


@pytest.mark.parametrize("x64", [False, True])
def test_square_of_a_bool_is_int32(x64: bool) -> None:
    p = np.array([True, False])
    with tg.Context(TGFX_ENABLE_X64=int(x64)):
        assert_close(tnp.square(to_tensor(p)), p.astype(np.int32), dtype=dtypes.int32)
        assert_close(tg.jit(tnp.square)(to_tensor(p)), p.astype(np.int32), dtype=dtypes.int32)


@pytest.mark.parametrize("x64", [False, True])
def test_integer_scalar_powers_keep_the_bases_type(x64: bool) -> None:
    # as JAX's integer_pow: a Python or numpy integer exponent takes no part in the promotion (a bool base is int32)
    p, i = np.array([True, False]), np.array([3, -2], np.int8)
    with tg.Context(TGFX_ENABLE_X64=int(x64)):
        assert_close(to_tensor(p) ** 1, p.astype(np.int32), dtype=dtypes.int32)
        assert_close(to_tensor(p) ** 3, p.astype(np.int32), dtype=dtypes.int32)
        assert_close(tnp.power(p, np.int16(2)), p.astype(np.int32), dtype=dtypes.int32)
        assert_close(to_tensor(i) ** np.int64(2), i * i, dtype=dtypes.int8)
        assert_close(to_tensor(i) ** np.uint8(3), i * i * i, dtype=dtypes.int8)
        assert_close(tnp.power(i, np.int32(2)), i * i, dtype=dtypes.int8)
        assert_close(tg.jit(lambda t: t ** np.int64(2))(to_tensor(i)), i * i, dtype=dtypes.int8)
        assert_close(to_tensor(p) ** 2.0, p.astype(np.float32), dtype=dtypes.default_float)   # a float one does
        # a negative one is an error, as integer_pow's (it gave the truncated power, silently, where JAX raises)
        for base, n in ((i, -1), (p, -2), (i, np.int32(-3))):
            with pytest.raises(TypeError, match=r"integers cannot be raised to negative powers, got .*\*\* -"):
                to_tensor(base) ** n
            with pytest.raises(TypeError, match="negative powers"):
                tg.jit(lambda t: tnp.power(t, n))(to_tensor(base))   # noqa: B023


# ---- where, clip, isnan/isinf/isfinite ----
@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.int32, dtypes.uint8,
                               dtypes.bool, dtypes.int64], ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_where(d: DType, data: st.DataObject) -> None:
    sc, sx, sy = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=3)).input_shapes
    cond = data.draw(arrays(dtypes.bool, sc))
    x = data.draw(arrays(d, sx))
    y = data.draw(arrays(d, sy))
    assert_close(tnp.where(to_tensor(cond), to_tensor(x, d), to_tensor(y, d)), np.where(cond, x, y), dtype=d)


def test_where_nonbool_condition_and_scalars() -> None:
    c = np.array([0, 2, -1, 0], np.int32)
    x = np.array([1.5, 2.5, 3.5, 4.5], np.float32)
    assert_close(tnp.where(to_tensor(c), to_tensor(x), 0.0), np.where(c, x, 0.0).astype(np.float32),
                 dtype=dtypes.float32)
    assert_close(tnp.where(to_tensor(c), 1, 2), np.where(c, 1, 2), dtype=dtypes.int32)


def test_where_of_the_condition_alone_is_nonzero() -> None:
    # jnp.where(condition): numpy's one-argument form (the indices where it holds), eagerly or with size= under jit
    c = np.array([[0, 3, 0], [5, 0, 1]], np.int32)
    for got, want in zip(tnp.where(to_tensor(c)), np.where(c), strict=True):
        np.testing.assert_array_equal(got.numpy(), want)
    rows, cols = tg.jit(lambda c: tnp.where(c, size=4, fill_value=-1))(to_tensor(c))
    np.testing.assert_array_equal(rows.numpy(), [0, 1, 1, -1])
    np.testing.assert_array_equal(cols.numpy(), [1, 0, 2, -1])
    with pytest.raises(ValueError, match="both x and y, or neither"):
        tnp.where(to_tensor(c), 1.0)
    with pytest.raises(ValueError, match="one-argument form"):
        tnp.where(to_tensor(c), 1.0, 2.0, size=3)
    assert_close(tnp.where(to_tensor(c > 0), to_tensor(c), 7.5), np.where(c > 0, c, 7.5).astype(np.float32),
                 dtype=dtypes.float32)


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC, ids=str)
@settings(max_examples=8)
@given(data=st.data())
def test_clip(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=2), lo=-50, hi=50))
    lo, hi = sorted(data.draw(st.tuples(elements(d, lo=-20, hi=20), elements(d, lo=-20, hi=20))))
    want = np.clip(x, np.asarray(lo, x.dtype), np.asarray(hi, x.dtype))
    assert_close(tnp.clip(to_tensor(x, d), lo, hi), want, dtype=d)
    assert_close(tnp.clip(to_tensor(x, d), lo, None), np.maximum(x, np.asarray(lo, x.dtype)), dtype=d)
    assert_close(tnp.clip(to_tensor(x, d), None, hi), np.minimum(x, np.asarray(hi, x.dtype)), dtype=d)
    assert_close(to_tensor(x, d).clip(lo, hi), want, dtype=d)


def test_clip_with_array_bounds_broadcasts() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    lo, hi = np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.array([[5.0], [6.0], [7.0]], np.float32)
    assert_close(tnp.clip(to_tensor(x), to_tensor(lo), to_tensor(hi)), np.clip(x, lo, hi), dtype=dtypes.float32)


@pytest.mark.parametrize("d", FLOATS, ids=str)
def test_isnan_isinf_isfinite(d: DType) -> None:
    x = np.array([0.0, -0.0, 1.0, np.nan, np.inf, -np.inf, -2.5, 65504.0], np.float32)
    t = to_tensor(x, d)
    for fn, ref in [(tnp.isnan, np.isnan), (tnp.isinf, np.isinf), (tnp.isfinite, np.isfinite)]:
        assert_close(fn(t), ref(x), dtype=dtypes.bool)


@pytest.mark.parametrize("d", [dtypes.int32, dtypes.uint8, dtypes.bool], ids=str)
def test_isnan_isinf_isfinite_of_integers(d: DType) -> None:
    x = np.array([0, 1, 1], d.np)
    for fn, ref in [(tnp.isnan, np.isnan), (tnp.isinf, np.isinf), (tnp.isfinite, np.isfinite)]:
        assert_close(fn(to_tensor(x)), ref(x), dtype=dtypes.bool)


# ---- NaN and infinity propagation ----
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], np.float32)


@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos",
                                  "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh"])
def test_float_unary_special_values(name: str) -> None:
    fn, ref, _, _ = FLOAT_UNARY[name]
    assert_close(fn(to_tensor(SPECIAL)), _ref(ref, SPECIAL, dtype=dtypes.float32), dtype=dtypes.float32,
                 ulps=TRANSCENDENTAL_ULPS)


@pytest.mark.parametrize("name", list(NUMERIC_UNARY))
def test_numeric_unary_special_values(name: str) -> None:
    fn, ref = NUMERIC_UNARY[name]
    assert_close(fn(to_tensor(SPECIAL)), _ref(ref, SPECIAL, dtype=dtypes.float32), dtype=dtypes.float32)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "minimum"])
def test_binary_special_values(name: str) -> None:
    fn, ref = BINARY[name]
    a, b = SPECIAL.reshape(-1, 1), SPECIAL.reshape(1, -1)
    assert_close(fn(to_tensor(a), to_tensor(b)), _ref(ref, a, b, dtype=dtypes.float32), dtype=dtypes.float32)


def test_divide_special_values() -> None:
    a, b = SPECIAL.reshape(-1, 1), SPECIAL.reshape(1, -1)
    assert_close(tnp.true_divide(to_tensor(a), to_tensor(b)), _ref(np.true_divide, a, b, dtype=dtypes.float32))
    assert_close(tnp.power(to_tensor(a), to_tensor(b)), _ref(np.power, a, b, dtype=dtypes.float32))
    assert_close(tnp.arctan2(to_tensor(a), to_tensor(b)), _ref(np.arctan2, a, b, dtype=dtypes.float32),
                 ulps=TRANSCENDENTAL_ULPS)


def test_sign_abs_clip_of_nan() -> None:
    x = np.array([np.nan, -np.nan, -np.inf, np.inf, -0.0], np.float32)
    assert_close(tnp.sign(to_tensor(x)), np.sign(x), dtype=dtypes.float32)
    assert_close(tnp.abs(to_tensor(x)), np.abs(x), dtype=dtypes.float32)
    assert_close(tnp.clip(to_tensor(x), -1.0, 1.0), np.clip(x, -1.0, 1.0), dtype=dtypes.float32)
    assert not np.signbit(tnp.abs(to_tensor(x)).numpy()).any()



# ---- logaddexp ----
LOGADDEXP = {"logaddexp": (tnp.logaddexp, np.logaddexp), "logaddexp2": (tnp.logaddexp2, np.logaddexp2)}


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
@pytest.mark.parametrize("name", LOGADDEXP)
@settings(max_examples=8)
@given(data=st.data())
def test_logaddexp(name: str, d: DType, data: st.DataObject) -> None:
    fn, ref = LOGADDEXP[name]
    sa = data.draw(shapes(max_dims=2))
    a = data.draw(arrays(d, sa, lo=-100.0, hi=100.0))
    b = data.draw(arrays(d, data.draw(broadcastable_shapes(sa)), lo=-100.0, hi=100.0))
    assert_close(fn(to_tensor(a, d), to_tensor(b, d)), _ref(ref, a, b, dtype=d), dtype=d, ulps=TRANSCENDENTAL_ULPS)


@pytest.mark.parametrize("name", LOGADDEXP)
def test_logaddexp_special_values_and_promotion(name: str) -> None:
    fn, ref = LOGADDEXP[name]
    a, b = SPECIAL.reshape(-1, 1), SPECIAL.reshape(1, -1)
    assert_close(fn(to_tensor(a), to_tensor(b)), _ref(ref, a, b, dtype=dtypes.float32), dtype=dtypes.float32,
                 ulps=TRANSCENDENTAL_ULPS)
    big = np.array([1e30, -1e30, 88.0, 1000.0], np.float32)    # exp would overflow: the value must not
    assert_close(fn(to_tensor(big), to_tensor(big[::-1].copy())), _ref(ref, big, big[::-1], dtype=dtypes.float32),
                 ulps=TRANSCENDENTAL_ULPS)
    assert fn(tg.asarray([1, 2]), 3).dtype == dtypes.float32
    assert fn(tg.asarray(np.ones(2, np.float16)), 1.0).dtype == dtypes.float16


@pytest.mark.x64
@pytest.mark.parametrize("name", LOGADDEXP)
def test_logaddexp_gradients_at_ties_and_infinities(name: str) -> None:
    """(1/2, 1/2) at equal arguments (also at two equal infinities: JAX gives NaN at two -infs), (0, 1) with a -inf
    first argument, exact; central differences elsewhere."""
    fn, _ = LOGADDEXP[name]
    ninf = -np.inf
    x = np.array([1.5, ninf, 0.0, ninf, np.inf, np.inf, 1e30], np.float32)
    y = np.array([1.5, 0.0, ninf, ninf, np.inf, 2.0, -1e30], np.float32)
    gx, gy = tg.grad(lambda a, b: fn(a, b).sum(), argnums=(0, 1))(to_tensor(x), to_tensor(y))
    np.testing.assert_array_equal(gx.numpy(), [0.5, 0.0, 1.0, 0.5, 0.5, 1.0, 1.0])
    np.testing.assert_array_equal(gy.numpy(), [0.5, 1.0, 0.0, 0.5, 0.5, 0.0, 0.0])
    r = np.random.default_rng(0)
    check_grads(fn, r.uniform(-3, 3, (2, 3)), r.uniform(-3, 3, (2, 3)))


# ---- operators on Tensor, reflected operators and numpy arrays on the left ----
def test_arithmetic_operators_and_reflections() -> None:
    x = np.array([[1.0, 2.0, -3.0], [4.0, -5.5, 0.25]], np.float32)
    t = to_tensor(x)
    cases = [
        (t + 2, x + 2), (2 + t, 2 + x), (t - 2, x - 2), (2 - t, 2 - x), (t * 3, x * 3), (3 * t, 3 * x),
        (t / 4, x / 4), (1 / t, 1 / x), (t // 2, x // 2), (7 // t, 7 // x), (t % 3, x % 3), (7 % t, 7 % x),
        (t ** 2, x ** 2), (2 ** t, 2 ** x), (t ** 0.5, _ref(np.power, x, 0.5, dtype=dtypes.float32)),
        (-t, -x), (+t, +x), (abs(t), abs(x)), (t + t, x + x), (t * t - t / 2, x * x - x / 2),
    ]
    for got, want in cases:
        assert_close(got, want.astype(np.float32), dtype=dtypes.float32, ulps=TRANSCENDENTAL_ULPS)


def test_integer_operators_and_reflections() -> None:
    x = np.array([[1, 2, -3], [4, -5, 7]], np.int32)
    t = to_tensor(x)
    cases = [(2 - t, 2 - x), (t * 3, x * 3), (t // 2, x // 2), (-7 // t, -7 // x), (t % 3, x % 3), (10 % t, 10 % x),
             (t ** 2, x ** 2), (2 ** abs(t), 2 ** abs(x)), (-t, -x), (abs(t), abs(x))]
    for got, want in cases:
        assert_close(got, want, dtype=dtypes.int32)
    assert_close(1 / t, (1 / x).astype(np.float32), dtype=dtypes.float32)
    assert_close(t / t, np.ones((2, 3), np.float32), dtype=dtypes.float32)


def test_matmul_operator() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    assert_close(to_tensor(a) @ to_tensor(b), a @ b, dtype=dtypes.float32)
    assert_close(to_tensor(a) @ b, a @ b, dtype=dtypes.float32)
    assert_close(a @ to_tensor(b), a @ b, dtype=dtypes.float32)


def test_numpy_array_on_the_left_defers_to_tensor() -> None:
    a = np.array([1.0, 2.0, 3.0], np.float32)
    t = to_tensor(np.array([0.5, -1.0, 2.0], np.float32))
    for got, want in [(a + t, a + t.numpy()), (a - t, a - t.numpy()), (a * t, a * t.numpy()),
                      (a / t, a / t.numpy()), (a < t, a < t.numpy())]:
        assert_close(got, want)


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC, ids=str)
def test_operators_keep_dtype_with_python_scalars(d: DType) -> None:
    x = np.array([1, 2, 3, 4], np_dtype(d))
    t = to_tensor(x, d)
    for got, want in [(t + 1, x + 1), (1 + t, 1 + x), (t * 2, x * 2), (2 * t, 2 * x), (t - 1, x - 1),
                      (t // 2, x // 2), (t % 3, x % 3), (t ** 2, x ** 2), (tnp.maximum(t, 2), np.maximum(x, 2))]:
        assert_close(got, want, dtype=d)


def test_a_float_to_a_python_int_power_is_multiplications(monkeypatch: pytest.MonkeyPatch) -> None:
    """`x ** 2` as JAX's integer_pow: x * x, not pow(x, 2), and its gradient 2x rather than 2 * pow(x, 1) (a batch
    norm's backward called libm's pow for every element). Specials as numpy's, subnormal results too with IEEE
    gradual underflow (TGFX_FLUSH_DENORMALS=0); a float exponent stays pow."""
    import warnings

    from tgfx import config
    from tgfx.ir.ops import Ops
    monkeypatch.setattr(config.FLUSH_DENORMALS, "value", 0)
    x = np.array([-2.5, -0.0, 0.0, 1.5, np.nan, np.inf, -np.inf, 3.0, 1e-20, 1e20], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for n in (0, 1, 2, 3, 7, 16, -1, -2, -16):   # (negative ones: pow, as before)
            got, want = (tg.asarray(x) ** n).numpy(), x ** n
            np.testing.assert_allclose(got, want, rtol=4e-7 * abs(n) + 1e-7, equal_nan=True)
            assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0])), n
    t = tg.asarray(x)
    assert not any(u.op is Ops.POW for u in (t ** 2).uop.toposort())
    assert any(u.op is Ops.POW for u in (t ** 2.5).uop.toposort())
    g = tg.grad(lambda v: (v ** 3).sum())(tg.asarray(np.array([1.0, -2.0], np.float32)))
    np.testing.assert_allclose(g.numpy(), [3.0, 12.0])


def test_kernels_flush_subnormal_results_as_xla_and_leave_the_callers_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a kernel's subnormal result is 0 (as JAX's CPU code: gradual underflow is the processor's slow path,
    which made a spectral solver's FFTs 4-6x slower after exp(-k^2 t) underflowed); the thread's floating-point mode
    is restored after it (numpy on the same thread keeps its subnormals); TGFX_FLUSH_DENORMALS=0 keeps them, in
    kernels of their own. Subnormal inputs are read as they are."""
    from tgfx import config
    x = np.array([1e-40, 3e-39, 1e-30, -1e-38], np.float32)
    half = tg.jit(lambda v: v * 0.5)
    np.testing.assert_array_equal(half(tg.asarray(x)).numpy(), np.array([0.0, 0.0, 5e-31, -0.0], np.float32))
    np.testing.assert_array_equal(tg.asarray(x).max().numpy(), np.float32(1e-30))
    assert np.float32(1e-40) * np.float32(0.5) == np.float32(5e-41)       # the caller's mode, untouched
    np.testing.assert_array_equal((tg.asarray(x) > 0).numpy(), [True, True, True, False])  # inputs as they are
    monkeypatch.setattr(config.FLUSH_DENORMALS, "value", 0)   # (for what is compiled from now on)
    np.testing.assert_array_equal(tg.jit(lambda v: v * 0.5)(tg.asarray(x)).numpy(), x * np.float32(0.5))
