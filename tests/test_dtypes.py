"""Dtypes: JAX's promotion table (strong and weakly typed Python scalars), casts against numpy, bfloat16 rounding.

The expected table is JAX's documented one (docs "Type promotion semantics"), written out here by hand rather than
derived from tgfx's lattice. A weak float result `f*` materialises as float32, or as float64 when a 64-bit integer
takes part (tgfx has int64 and uint64, which in JAX need x64 mode, where `f*` is float64).
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from helpers import ALL, FLOATS, INTS, NUMERIC, arrays, assert_close, bf16_round, np_dtype, shapes, to_tensor
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import DType, bf16_to_f32, dtypes, f32_to_bf16, promote_types, to_dtype, to_inexact

ABBREV = {"b1": dtypes.bool, "u1": dtypes.uint8, "u2": dtypes.uint16, "u4": dtypes.uint32, "u8": dtypes.uint64,
          "i1": dtypes.int8, "i2": dtypes.int16, "i4": dtypes.int32, "i8": dtypes.int64, "bf": dtypes.bfloat16,
          "f2": dtypes.float16, "f4": dtypes.float32, "f8": dtypes.float64}

# JAX's promotion table; the last two columns are Python int (i*) and Python float (f*) scalars.
JAX_TABLE = """
    b1 u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 i* f*
b1  b1 u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 i* f*
u1  u1 u1 u2 u4 u8 i2 i2 i4 i8 bf f2 f4 f8 u1 f*
u2  u2 u2 u2 u4 u8 i4 i4 i4 i8 bf f2 f4 f8 u2 f*
u4  u4 u4 u4 u4 u8 i8 i8 i8 i8 bf f2 f4 f8 u4 f*
u8  u8 u8 u8 u8 u8 f* f* f* f* bf f2 f4 f8 u8 f*
i1  i1 i2 i4 i8 f* i1 i2 i4 i8 bf f2 f4 f8 i1 f*
i2  i2 i2 i4 i8 f* i2 i2 i4 i8 bf f2 f4 f8 i2 f*
i4  i4 i4 i4 i8 f* i4 i4 i4 i8 bf f2 f4 f8 i4 f*
i8  i8 i8 i8 i8 f* i8 i8 i8 i8 bf f2 f4 f8 i8 f*
bf  bf bf bf bf bf bf bf bf bf bf f4 f4 f8 bf bf
f2  f2 f2 f2 f2 f2 f2 f2 f2 f2 f4 f2 f4 f8 f2 f2
f4  f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f8 f4 f4
f8  f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8
"""


def _table() -> dict[tuple[str, str], str]:
    header, *rows = [line.split() for line in JAX_TABLE.strip().splitlines()]
    return {(row[0], col): cell for row in rows for col, cell in zip(header, row[1:], strict=True)}


TABLE = _table()


def _materialise(cell: str, a: str, b: str) -> DType:
    if cell == "i*":
        return dtypes.int32
    if cell == "f*":
        return dtypes.float64 if {a, b} & {"i8", "u8"} else dtypes.float32
    return ABBREV[cell]


STRONG_PAIRS = [(a, b) for a, b in itertools.product(ABBREV, ABBREV)]


def test_table_is_symmetric() -> None:
    for a, b in STRONG_PAIRS:
        assert TABLE[a, b] == TABLE[b, a], (a, b)


@pytest.mark.x64
@pytest.mark.parametrize("a,b", STRONG_PAIRS)
def test_promote_types_matches_jax(a: str, b: str) -> None:
    assert promote_types(ABBREV[a], ABBREV[b]) == _materialise(TABLE[a, b], a, b)


@pytest.mark.x64
@pytest.mark.parametrize("a,b", STRONG_PAIRS)
def test_binary_ops_promote_like_jax(a: str, b: str) -> None:
    """Building the graph is enough to know the dtype; a few pairs are also run, below."""
    want = _materialise(TABLE[a, b], a, b)
    x = to_tensor(np.ones(2, np_dtype(ABBREV[a])), ABBREV[a])
    y = to_tensor(np.ones((3, 1), np_dtype(ABBREV[b])), ABBREV[b])
    assert tnp.add(x, y).dtype == want
    assert tnp.maximum(x, y).dtype == want
    assert tnp.where(tnp.less(x, y), x, y).dtype == want
    assert tnp.equal(x, y).dtype == dtypes.bool
    assert tnp.true_divide(x, y).dtype == to_inexact(want)
    if want != dtypes.bool:
        assert (x * y).dtype == want and (x - y).dtype == want


@pytest.mark.parametrize("a", list(ABBREV))
@pytest.mark.parametrize("scalar,col", [(3, "i*"), (-2, "i*"), (2.5, "f*"), (True, "b1")])
def test_python_scalars_are_weak(a: str, scalar: Any, col: str) -> None:
    d = ABBREV[a]
    want = _materialise(TABLE[a, col], a, col)
    x = to_tensor(np.ones(3, np_dtype(d)), d)
    for got in [x + scalar, scalar + x, tnp.multiply(x, scalar), tnp.maximum(scalar, x)]:
        assert got.dtype == want, (got.dtype, want)


NUMPY_SCALARS = [np.bool_(True), np.int8(3), np.uint8(3), np.int64(3), np.float16(1.5), np.float32(2.5),
                 np.float64(2.5), np.complex64(1j), np.complex128(1j)]


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("a", ["b1", "u1", "i1", "i4", "bf", "f2", "f4"])
@pytest.mark.parametrize("scalar", NUMPY_SCALARS, ids=lambda s: type(s).__name__)
def test_numpy_scalars_are_strongly_typed(a: str, scalar: np.generic, x64: bool) -> None:
    # as in JAX, a numpy scalar has its type (canonical for the mode): np.float64 and np.complex128, which subclass
    # float and complex, were taken for weak Python scalars (float16 + np.float64(1.5) was float16; JAX: float32)
    from tgfx.tensor import is_weak
    d = ABBREV[a]
    with tg.Context(TGFX_ENABLE_X64=int(x64)):
        own = to_dtype(scalar.dtype)
        want = promote_types(d, own)
        x = to_tensor(np.ones(3, np_dtype(d)), d)
        got = [x + scalar, scalar + x, x * scalar, tnp.multiply(scalar, x), tnp.where(True, x, scalar),
               tg.jit(lambda t: t - scalar if not want.is_bool else t & scalar)(x), tg.jit(tnp.add)(x, scalar)]
        if not want.is_complex:
            got.append(tnp.maximum(scalar, x))
        assert [t.dtype for t in got] == [want] * len(got)
        assert tnp.result_type(scalar, d) == want and tnp.result_type(d, scalar) == want
        assert tnp.true_divide(x, scalar).dtype == to_inexact(want)
        assert tnp.full((2,), scalar).dtype == own and not is_weak(scalar)
        if own.is_int:
            assert tnp.arange(scalar).dtype == own


@pytest.mark.parametrize("a", list(ABBREV))
@pytest.mark.parametrize("other", [3, -2, 2.5, 1e30, True, "tensor", "rows", "mismatch", "weak"])
def test_the_fast_eager_arithmetic_builds_the_general_paths_graph(a: str, other: Any) -> None:
    # `x * 2.5` and `x + y` of one dtype are built without promotion (tensor.fast_binary): the node must be the one
    # promote-and-broadcast builds (hash-consed: the same object), weak typing and all
    from tgfx.ir.ops import Ops
    from tgfx.tensor import is_weak, weak
    d = ABBREV[a]
    x = to_tensor(np.ones(3, np_dtype(d)), d)
    if other in ("tensor", "rows", "mismatch"):   # the same shape, one that broadcasts, one that does not
        other = to_tensor(np.full({"tensor": 3, "rows": (2, 1), "mismatch": 4}[other], 2, np_dtype(d)), d)
    elif other == "weak":
        other = weak(tg.Tensor(tg.asarray(np.float32(2.0)).uop))
    for name, op, neg, fn in [("add", Ops.ADD, False, tnp.add), ("multiply", Ops.MUL, False, tnp.multiply),
                              ("subtract", Ops.ADD, True, tnp.subtract), ("true_divide", Ops.FDIV, False, tnp.divide)]:
        for lhs, rhs in [(x, other), (other, x)]:
            try:
                want = _general(lhs, rhs, name, op, neg)
            except (TypeError, OverflowError, ValueError) as e:
                with pytest.raises(type(e), match=str(e).split(":")[0]):   # the general path's message
                    fn(lhs, rhs)
                continue
            got = fn(lhs, rhs)
            assert got.uop is want.uop, (name, lhs, rhs)
            assert is_weak(got) == is_weak(want)


def _general(x: Any, y: Any, name: str, op: Any, negate: bool) -> tg.Tensor:
    """What the general path builds for x op y: promotion, then `_binary`."""
    from tgfx.numpy._elementwise import _promote_inexact, logical_and, logical_or
    from tgfx.tensor import promote
    a, b = _promote_inexact(x, y, name) if op.name == "FDIV" else promote(x, y, name)
    if a.dtype == dtypes.bool and not negate and op.name != "FDIV":
        return (logical_or if op.name == "ADD" else logical_and)(a, b)
    if a.dtype == dtypes.bool and negate:
        raise TypeError("subtract is not defined for bool Tensors")
    return a._binary(op, b._unary(type(op).NEG) if negate else b, name=name)


def test_weak_typing_examples_from_the_spec() -> None:
    i = to_tensor(np.array([1, 2], np.int32))
    h = to_tensor(np.array([1.5, 2.5], np.float16))
    assert_close(i + 1.5, np.array([2.5, 3.5], np.float32), dtype=dtypes.float32)
    assert_close(h * 2, np.array([3.0, 5.0], np.float16), dtype=dtypes.float16)
    assert_close(to_tensor(np.array([3], np.uint8)) + 1, np.array([4], np.uint8), dtype=dtypes.uint8)
    assert_close(to_tensor(np.array([3], np.int8)) * 2.5, np.array([7.5], np.float32), dtype=dtypes.float32)
    b = to_tensor(np.array([1.0, 2.0], np.float32), dtypes.bfloat16)
    assert_close(b + 1, np.array([2.0, 3.0], np.float32), dtype=dtypes.bfloat16)
    assert_close(to_tensor(np.array([True, False])) + 1, np.array([2, 1], np.int32), dtype=dtypes.int32)


# What jax 0.10.2 gives (`jax.typeof`, `~` for weakly typed): a value computed from Python numbers alone is weakly
# typed, as is a bool or integer array combined with a Python float (its promotion is a weak kind), and stays so
# through elementwise functions, `where`, `clip`, views and casts a function makes; `astype`, reductions and
# `lax.convert_element_type` make it strong.
def _f16() -> tg.Tensor:
    return tnp.ones(3, tnp.float16)


def _i8() -> tg.Tensor:
    return tnp.ones(3, tnp.int8)


WEAK_TYPES = [
    ("asarray(2.0)", lambda: tnp.asarray(2.0), "~float32[]"),
    ("array(2)", lambda: tnp.array(2), "~int32[]"),
    ("asarray(1j)", lambda: tnp.asarray(1j), "~complex64[]"),
    ("asarray(True)", lambda: tnp.asarray(True), "bool[]"),
    ("asarray(2.0, float32)", lambda: tnp.asarray(2.0, dtype=tnp.float32), "float32[]"),
    ("array(weak)", lambda: tnp.array(tnp.asarray(2.0)), "~float32[]"),
    ("asarray([1.0])", lambda: tnp.asarray([1.0, 2.0]), "float32[2]"),
    ("add(2.0, 3.0)", lambda: tnp.add(2.0, 3.0), "~float32[]"),
    ("multiply(2, 3)", lambda: tnp.multiply(2, 3), "~int32[]"),
    ("add(2, 3.0)", lambda: tnp.add(2, 3.0), "~float32[]"),
    ("int8 * 2.5", lambda: _i8() * 2.5, "~float32[3]"),
    ("int8 * asarray(2.5)", lambda: _i8() * tnp.asarray(2.5), "~float32[3]"),
    ("float16 * 2.0", lambda: _f16() * 2.0, "float16[3]"),
    ("true_divide(1, 2)", lambda: tnp.true_divide(1, 2), "~float32[]"),
    ("true_divide(int8, 2.5)", lambda: tnp.true_divide(_i8(), 2.5), "~float32[3]"),
    ("sin(2.0)", lambda: tnp.sin(2.0), "~float32[]"),
    ("sqrt(4)", lambda: tnp.sqrt(4), "~float32[]"),
    ("exp(asarray(2.0))", lambda: tnp.exp(tnp.asarray(2.0)), "~float32[]"),
    ("negative(2)", lambda: tnp.negative(2), "~int32[]"),
    ("abs(-2.0)", lambda: tnp.abs(-2.0), "~float32[]"),
    ("abs(1j)", lambda: tnp.abs(1j), "~float32[]"),
    ("sign(-2.0)", lambda: tnp.sign(-2.0), "~float32[]"),
    ("floor(2.5)", lambda: tnp.floor(2.5), "~float32[]"),
    ("round(2.5)", lambda: tnp.round(2.5), "~float32[]"),
    ("remainder(7.0, 2)", lambda: tnp.remainder(7.0, 2), "~float32[]"),
    ("floor_divide(7, 2)", lambda: tnp.floor_divide(7, 2), "~int32[]"),
    ("arctan2(1.0, 2.0)", lambda: tnp.arctan2(1.0, 2.0), "~float32[]"),
    ("hypot(3.0, 4.0)", lambda: tnp.hypot(3.0, 4.0), "~float32[]"),
    ("copysign(int8, 2.5)", lambda: tnp.copysign(_i8(), 2.5), "~float32[3]"),
    ("cbrt(8.0)", lambda: tnp.cbrt(8.0), "~float32[]"),
    ("gcd(12, 18)", lambda: tnp.gcd(12, 18), "~int32[]"),
    ("divmod(7, 3)[0]", lambda: tnp.divmod(7, 3)[0], "~int32[]"),
    ("maximum(2.0, 3.0)", lambda: tnp.maximum(2.0, 3.0), "~float32[]"),
    ("minimum(2, 3)", lambda: tnp.minimum(2, 3), "~int32[]"),
    ("exp(1j)", lambda: tnp.exp(1j), "~complex64[]"),
    ("where(c, 1.0, 2.0)", lambda: tnp.where(tnp.asarray([True, False]), 1.0, 2.0), "~float32[2]"),
    ("where(c, 1, 2.0)", lambda: tnp.where(tnp.asarray([True, False]), 1, 2.0), "~float32[2]"),
    ("where(c, int8, 2.0)", lambda: tnp.where(tnp.asarray([True, False, True]), _i8(), 2.0), "~float32[3]"),
    ("where(c, float16, 2.0)", lambda: tnp.where(tnp.asarray([True, False, True]), _f16(), 2.0), "float16[3]"),
    ("clip(2.0, 0.0, 1.0)", lambda: tnp.clip(2.0, 0.0, 1.0), "~float32[]"),
    ("clip(asarray(3), 0, 1)", lambda: tnp.clip(tnp.asarray(3), 0, 1), "~int32[]"),
    ("clip(int8, 0.5, 1.5)", lambda: tnp.clip(_i8(), 0.5, 1.5), "~float32[3]"),
    ("clip(float16, 0.0, 1.0)", lambda: tnp.clip(_f16(), 0.0, 1.0), "float16[3]"),
    ("full((2,), 3.0)", lambda: tnp.full((2,), 3.0), "~float32[2]"),
    ("zeros_like(2.0)", lambda: tnp.zeros_like(2.0), "~float32[]"),
    ("ones_like(weak)", lambda: tnp.ones_like(tnp.add(1.0, 1.0)), "~float32[]"),
    ("full_like(float16, 3.0)", lambda: tnp.full_like(_f16(), 3.0), "float16[3]"),
    ("weak.reshape(1)", lambda: tnp.asarray(2.0).reshape(1), "~float32[1]"),
    ("weak[None]", lambda: tnp.asarray(2.0)[None], "~float32[1]"),
    ("broadcast_to(weak)", lambda: tnp.broadcast_to(tnp.asarray(2.0), (3,)), "~float32[3]"),
    ("weak[0]", lambda: tnp.where(tnp.asarray([True, False]), 1.0, 2.0)[0], "~float32[]"),
    ("weak[::-1]", lambda: tnp.where(tnp.asarray([True, False]), 1.0, 2.0)[::-1], "~float32[2]"),
    ("weak[[0]]", lambda: tnp.where(tnp.asarray([True, False]), 1.0, 2.0)[tnp.asarray([0])], "~float32[1]"),
    ("weak > 1", lambda: tnp.add(1.0, 1.0) > 1, "~bool[]"),
    ("sum(weak)", lambda: tnp.sum(tnp.add(1.0, 1.0)), "float32[]"),
    ("max(weak)", lambda: tnp.max(tnp.where(tnp.asarray([True, False]), 1.0, 2.0)), "float32[]"),
    ("weak.astype(float32)", lambda: tnp.asarray(2.0).astype(tnp.float32), "float32[]"),
    ("convert_element_type(2.0)", lambda: tg.lax.convert_element_type(2.0, tnp.float32), "float32[]"),
    ("lax.mul(2.0, 3.0)", lambda: tg.lax.mul(2.0, 3.0), "~float32[]"),
    ("lax.exp(2.0)", lambda: tg.lax.exp(2.0), "~float32[]"),
]


@pytest.mark.parametrize("name,fn,want", WEAK_TYPES, ids=[c[0] for c in WEAK_TYPES])
def test_weak_typing_follows_jax(name: str, fn: Any, want: str) -> None:
    assert str(tg.typeof(fn())) == want


def test_a_weak_result_takes_the_type_of_what_it_meets() -> None:
    # each was float32 (int32) before: the weak result of Python numbers upcast the narrow array it met
    h = tnp.asarray(np.array([1.5, 2.5], np.float16))
    b = tnp.asarray(np.array([1.0, 3.0], np.float32)).astype(tnp.bfloat16)
    i = tnp.asarray(np.array([100, -7], np.int8))
    assert_close(h + tnp.add(2.0, 3.0), np.array([6.5, 7.5], np.float16), dtype=dtypes.float16)
    assert_close(h + tnp.sin(2.0), np.array([2.408, 3.408], np.float16), dtype=dtypes.float16, rtol=1e-3)
    assert_close(b * tnp.multiply(2.0, 3.0), np.array([6.0, 18.0], np.float32), dtype=dtypes.bfloat16)
    assert_close(i + tnp.add(2, 3), np.array([105, -2], np.int8), dtype=dtypes.int8)
    assert_close(i + tnp.asarray(27), np.array([127, 20], np.int8), dtype=dtypes.int8)
    assert_close(h + tnp.where(tnp.asarray([True, False]), 1.0, 2.0), np.array([2.5, 4.5], np.float16),
                 dtype=dtypes.float16)
    assert_close(tnp.clip(2.0, h, 3.0), np.array([2.0, 2.5], np.float16), dtype=dtypes.float16)
    assert_close(tnp.clip(h, tnp.asarray(2.0), 2.25), np.array([2.0, 2.25], np.float16), dtype=dtypes.float16)
    assert_close(h * tnp.abs(-2.0), np.array([3.0, 5.0], np.float16), dtype=dtypes.float16)


@pytest.mark.x64
def test_a_weak_result_takes_the_type_of_what_it_meets_in_x64_mode() -> None:
    # Python numbers are float64 / int64 here: weak, they still defer to a float32 or int32 array (they made it
    # float64 / int64)
    f = tnp.asarray(np.array([1.5, 2.5], np.float32))
    n = tnp.asarray(np.array([1, 2], np.int32))
    assert str(tg.typeof(tnp.asarray(2.0))) == "~float64[]"
    assert_close(f + tnp.asarray(2.0), np.array([3.5, 4.5], np.float32), dtype=dtypes.float32)
    assert_close(f * tnp.sqrt(4.0), np.array([3.0, 5.0], np.float32), dtype=dtypes.float32)
    assert_close(n * tnp.add(2, 3), np.array([5, 10], np.int32), dtype=dtypes.int32)
    assert_close(f + tnp.full((2,), 3.0), np.array([4.5, 5.5], np.float32), dtype=dtypes.float32)


@pytest.mark.x64
@pytest.mark.parametrize("a,b", [("i1", "u1"), ("u4", "i1"), ("bf", "f2"), ("i4", "f2"), ("u8", "i8"), ("i2", "bf"),
                                 ("b1", "f4"), ("u2", "i2")])
def test_mixed_promotion_values(a: str, b: str) -> None:
    da, db = ABBREV[a], ABBREV[b]
    want = _materialise(TABLE[a, b], a, b)
    x = np.array([0, 1, 2, 3], np_dtype(da)) if da != dtypes.bool else np.array([True, False, True, True])
    y = np.array([[1], [0], [5]], np_dtype(db))
    expect = x.astype(np_dtype(want)) + y.astype(np_dtype(want))
    assert_close(to_tensor(x, da) + to_tensor(y, db), expect, dtype=want)


@pytest.mark.x64
def test_float_functions_of_integers_follow_to_inexact() -> None:
    assert to_inexact(dtypes.int8) == dtypes.float32
    assert to_inexact(dtypes.uint32) == dtypes.float32
    assert to_inexact(dtypes.bool) == dtypes.float32
    assert to_inexact(dtypes.int64) == dtypes.float64
    assert to_inexact(dtypes.uint64) == dtypes.float64
    assert to_inexact(dtypes.bfloat16) == dtypes.bfloat16
    for d in INTS + (dtypes.bool,):
        x = to_tensor(np.ones(2, d.np))
        for fn in (tnp.exp, tnp.sqrt, tnp.mean, tnp.var, tnp.reciprocal):
            assert fn(x).dtype == to_inexact(d), (fn.__name__, d)
        assert tnp.arctan2(x, x).dtype == to_inexact(d)
        assert tnp.rint(x).dtype == dtypes.float64   # JAX's default float type, whatever the integer's width


@pytest.mark.parametrize("spec,want", [("float32", dtypes.float32), (np.float16, dtypes.float16),
                                       (np.dtype("uint8"), dtypes.uint8), (float, dtypes.float32),
                                       (int, dtypes.int32), (bool, dtypes.bool), ("bfloat16", dtypes.bfloat16),
                                       (dtypes.int64, dtypes.int64), (tnp.uint32, dtypes.uint32)])
def test_to_dtype(spec: Any, want: DType) -> None:
    assert to_dtype(spec) == want


@pytest.mark.parametrize("d", [d for d in dtypes.all() if d != dtypes.bfloat16], ids=str)
def test_a_dtype_compares_with_numpys_spellings_of_it(d: DType) -> None:
    # user code written for numpy or JAX: `if x.dtype == np.float32`, `x.dtype in (np.int8, np.uint8)`
    npd = np.dtype(d.np_name)
    assert d == npd.type and npd.type == d and d == npd and d == d.name
    assert d == npd.str and not d != npd.type and d in (np.void, npd.type)
    assert d.type is npd.type
    others = [o for o in dtypes.all() if o != d]
    assert all(d != np.dtype(o.np_name).type and d != o.name for o in others if o.np_name != d.np_name)
    x = tnp.zeros(2, d)   # (a 64-bit type is its 32-bit one without x64)
    assert x.dtype == np.dtype(x.dtype.np_name).type and {x.dtype: 1}[to_dtype(d)] == 1


def test_bfloat16_and_non_dtypes_compare_unequal() -> None:
    assert tnp.bfloat16 == "bfloat16" and tnp.bfloat16 != np.uint16 and tnp.bfloat16 != np.float16
    assert tnp.float32 != float and tnp.float64 == float   # noqa: E721 - as numpy: Python's float is float64
    assert tnp.float32 != None and tnp.float32 != 3 and tnp.float32 != "no such type"  # noqa: E711
    with pytest.raises(TypeError, match="bfloat16"):
        _ = tnp.bfloat16.type


def test_a_dtype_prints_its_name_as_numpys_and_jaxs_do() -> None:
    # a user's log line, a dtype saved as a string and read back, `str(x.dtype).startswith("float")`: str was the
    # repr, "dtypes.float32", which np.dtype does not read
    x = tnp.ones(2)
    assert str(x.dtype) == "float32" and f"{x.dtype}" == "float32" and "%s" % (x.dtype,) == "float32"  # noqa: UP031
    assert np.dtype(str(tnp.zeros(2, tnp.int8).dtype)) == np.int8 and str(tnp.bfloat16) == "bfloat16"
    assert repr(x.dtype) == "dtypes.float32"


def test_all_dtypes_are_listed() -> None:
    # the real types ALL lists, and the two complex ones (tests/test_complex.py)
    assert set(dtypes.all()) == set(ALL) | {dtypes.complex64, dtypes.complex128}
    assert len(dtypes.all()) == 15


# ---- casts ----
def _cast_values(src: DType, dst: DType) -> np.ndarray:
    """Values of `src` whose cast to `dst` numpy defines (no float -> int out of range, no NaN -> int)."""
    if src.is_bool:
        return np.array([True, False, True])
    if src.is_int:
        info = np.iinfo(src.np)
        vals = [0, 1, 5, 100, 127, int(info.max), int(info.min), int(info.max) // 3]
        if not src.is_unsigned:
            vals += [-1, -5, -100, -128]
        return np.array([v for v in vals if info.min <= v <= info.max], src.np)
    vals = [0.0, -0.0, 0.5, 1.7, 2.5, 100.25, 126.9, 3.0]
    if dst.is_float or dst.is_bool:
        vals += [-1.5, -126.9, 1e4, 3e4, np.nan, np.inf, -np.inf, 1e-3, 6e4]
    elif not dst.is_unsigned:
        vals += [-1.5, -126.9, -0.7]
    if dst.is_int and dst.itemsize >= 2 or dst.is_float:
        vals += [1234.5, 30000.7]
    return np.array(vals, np.float32 if src == dtypes.bfloat16 else src.np)


@pytest.mark.x64
@pytest.mark.parametrize("src,dst", list(itertools.product(ALL, ALL)), ids=str)
def test_astype(src: DType, dst: DType) -> None:
    x = _cast_values(src, dst)
    if src == dtypes.bfloat16:
        x = bf16_round(x)
    with np.errstate(all="ignore"):
        want = x.astype(np_dtype(dst))
    assert_close(to_tensor(x, src).astype(dst), want, dtype=dst, rtol=0, atol=0)


@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC, ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_astype_roundtrip_through_a_wider_type(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=2)))
    wide = dtypes.float64 if d.is_float or d.bits <= 32 else d
    assert_close(to_tensor(x, d).astype(wide).astype(d), x, dtype=d, rtol=0, atol=0)




@pytest.mark.x64
def test_float64_to_float16_rounds_once() -> None:
    x = np.array([1 + 2 ** -11 + 2 ** -40, -(1 + 2 ** -11 + 2 ** -30), 1 + 2 ** -9 + 2 ** -40], np.float64)
    assert_close(to_tensor(x).astype(dtypes.float16), x.astype(np.float16), dtype=dtypes.float16, rtol=0, atol=0)


@pytest.mark.x64
def test_float_to_int_truncates_toward_zero() -> None:
    x = np.array([1.9, -1.9, 0.5, -0.5, 2.0, -2.0], np.float32)
    for d in (dtypes.int8, dtypes.int32, dtypes.int64):
        assert_close(to_tensor(x).astype(d), x.astype(d.np), dtype=d)


# float -> int converts as XLA (so JAX) does: toward zero, saturating at the type's bounds, NaN to 0 (numpy's astype
# is undefined there; x86 gives INT_MIN). The values straddle each integer type's bounds, where float32 and float16
# round them (2147483647.0 is 2**31 in float32).
_SATURATING = [np.nan, np.inf, -np.inf, 1e10, -1e10, 3.7, -3.7, 127.5, 128.0, -128.9, -129.0, 255.9, 256.0, -0.5,
               65535.5, 2147483647.0, 2147483648.0, -2147483649.0, 4294967296.0, 9.3e18, -9.3e18, 1.9e19]


def _saturated(x: np.ndarray, d: DType) -> list[int]:
    """JAX's float -> int conversion of x's values, in exact Python ints."""
    lo, hi = int(np.iinfo(d.np).min), int(np.iinfo(d.np).max)
    return [0 if v != v else lo if v == -np.inf else hi if v == np.inf else max(lo, min(hi, int(v)))
            for v in x.astype(np.float64).tolist()]


@pytest.mark.x64
@pytest.mark.parametrize("src", FLOATS, ids=str)
def test_float_to_int_saturates_and_nan_is_zero(src: DType) -> None:
    with np.errstate(over="ignore"):
        x = np.array(_SATURATING, np.float32 if src == dtypes.bfloat16 else src.np)
    if src == dtypes.bfloat16:
        x = bf16_round(x)
    t = to_tensor(x, src)
    for d in INTS:
        want = _saturated(x, d)
        assert t.astype(d).tolist() == want, d
        assert tg.jit(lambda v, d=d: v.astype(d))(t).tolist() == want, d
        assert tg.lax.convert_element_type(t, d).tolist() == want, d
        assert tnp.asarray(t, dtype=d).tolist() == want, d


def test_float_to_int_saturates_for_known_values() -> None:
    x = tnp.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3.7, -3.7, 300.0, -1.0])
    assert x.astype(tnp.int32).tolist() == [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 3, -3, 300, -1]
    assert x.astype(tnp.uint8).tolist() == [0, 255, 0, 255, 0, 3, 0, 255, 0]
    assert x.astype(tnp.int8).tolist() == [0, 127, -128, 127, -128, 3, -3, 127, -1]
    assert tnp.asarray(x, dtype=int).tolist() == [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 3, -3, 300, -1]
    # a float constant becomes an integer the same way, where it is converted on the host
    assert tnp.full(2, 1e10, dtype=tnp.int32).tolist() == [2**31 - 1] * 2
    assert tnp.full(2, np.nan, dtype=tnp.uint8).tolist() == [0, 0]
    assert tnp.zeros(2, tnp.int8).at[0].set(-1e10).tolist() == [-128, 0]


def test_a_python_float_out_of_an_int_dtype_is_an_error() -> None:
    """As numpy and JAX: host data is converted by numpy, which refuses a float the integer type cannot hold."""
    with pytest.raises(OverflowError):
        tnp.asarray(1e10, dtype=tnp.int32)
    with pytest.raises(OverflowError):
        tnp.array([1.0, -300.0], dtype=tnp.uint8)
    with pytest.raises(ValueError):
        tnp.asarray(np.nan, dtype=tnp.int32)
    assert tnp.asarray([3.7, -2.5], dtype=tnp.int8).tolist() == [3, -2]


@pytest.mark.x64
@pytest.mark.parametrize("d", INTS, ids=str)
@settings(max_examples=15, deadline=None)
@given(v=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32) |
                  st.floats(-2.0 ** 65, 2.0 ** 65, width=32), min_size=1, max_size=20))
def test_float_to_int_saturates_property(d: DType, v: list[float]) -> None:
    x = np.array(v, np.float32)
    assert to_tensor(x).astype(d).tolist() == _saturated(x, d)


# ---- bfloat16 ----
def test_bf16_helpers_round_to_nearest_even() -> None:
    one_ulp = 2.0 ** -7
    x = np.array([1.0, 1 + one_ulp / 2, 1 + 3 * one_ulp / 2, 1 + one_ulp / 2 + 2 ** -20, -3.14159, np.inf, 1e-40],
                 np.float32)
    want = np.array([1.0, 1.0, 1 + 2 * one_ulp, 1 + one_ulp, -3.140625, np.inf, 0.0], np.float32)
    got = bf16_to_f32(f32_to_bf16(x))
    np.testing.assert_array_equal(got[:-1], want[:-1])
    assert abs(got[-1]) < 1e-38
    assert np.isnan(bf16_to_f32(f32_to_bf16(np.array([np.nan], np.float32))))[0]


def test_bfloat16_tensor_rounds_on_the_way_in_and_numpy_gives_float32() -> None:
    x = np.array([1.0, 1.00390625, 1.01171875, 3.14159, 1e30, -2.5e-3], np.float32)
    t = tg.asarray(x, dtype=dtypes.bfloat16)
    assert t.dtype == dtypes.bfloat16
    out = t.numpy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, bf16_round(x))


def test_a_0d_bfloat16_tensor_is_a_0d_array_to_numpy() -> None:
    # numpy's operators give a scalar for a 0-d array: the float32 of a 0-d bfloat16 (every full reduction) was
    # one, and np.asarray raised "object __array__ method not producing an array"
    t = tnp.sum(tg.asarray(np.array([1.0, 2.0], np.float32), dtype=dtypes.bfloat16))
    for out in (t.numpy(), np.asarray(t), np.array(t), np.asarray(tg.jit(tnp.max)(t.reshape(1)))):
        assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32 and out == 3.0
    assert bf16_to_f32(f32_to_bf16(np.float32(1.5))).shape == () and t.item() == 3.0 and float(t) == 3.0


@pytest.mark.parametrize("op", ["add", "multiply", "subtract", "true_divide"])
@settings(max_examples=10)
@given(data=st.data())
def test_bfloat16_rounds_after_every_op(op: str, data: st.DataObject) -> None:
    shape = data.draw(shapes(max_dims=2))
    a, b, c = (data.draw(arrays(dtypes.bfloat16, shape, lo=-50, hi=50, nonzero=True)) for _ in range(3))
    fn, ref = getattr(tnp, op), getattr(np, op)
    ta, tb, tc = (to_tensor(v, dtypes.bfloat16) for v in (a, b, c))
    want = bf16_round(ref(bf16_round(ref(a, b)), c))
    assert_close(fn(fn(ta, tb), tc), want, dtype=dtypes.bfloat16, rtol=0, atol=0)


@pytest.mark.x64
@pytest.mark.parametrize("d", FLOATS, ids=str)
def test_float_extremes_survive(d: DType) -> None:
    info = {dtypes.bfloat16: (3.3895e38, 1.1755e-38)}.get(d) or (float(np.finfo(d.np).max),
                                                                  float(np.finfo(d.np).tiny))
    x = np.array([info[0], -info[0], info[1], -info[1], 0.0], np.float32 if d == dtypes.bfloat16 else d.np)
    if d == dtypes.bfloat16:
        x = bf16_round(x)
    assert_close(to_tensor(x, d) * 1, x, dtype=d, rtol=0, atol=0)
    assert_close(tnp.isfinite(to_tensor(x, d)), np.ones(5, bool))


def test_numpy_takes_tgfx_dtypes_where_it_takes_a_dtype() -> None:
    for d in [dtypes.bool, dtypes.int8, dtypes.uint32, dtypes.float16, dtypes.float32, dtypes.float64]:
        assert np.dtype(d) == np.dtype(d.np_name)
    assert np.zeros(2).astype(tnp.float32).dtype == np.float32
    assert np.ones(3, dtype=tnp.int8).dtype == np.int8
    with pytest.raises(TypeError, match="numpy has no dtype for dtypes.bfloat16"):
        np.dtype(tnp.bfloat16)


def test_calling_a_dtype_makes_an_array_of_it() -> None:
    # JAX's scalar types are constructors (`jnp.float32(2.0)` is a 0-d float32 array): asarray(x, dtype=...)
    for d, x, want in [(tnp.float32, 2.0, np.float32(2.0)), (tnp.int32, [1, 2], np.array([1, 2], np.int32)),
                       (tnp.bool_, 1, np.True_), (tnp.int8, np.array([1.7, -3.0]), np.array([1, -3], np.int8)),
                       (tnp.uint8, tnp.arange(3), np.arange(3, dtype=np.uint8)),
                       (tnp.complex64, 1.5, np.complex64(1.5)),
                       (tnp.float16, [tnp.asarray(1.0), 2], np.array([1, 2], np.float16))]:
        got = d(x)
        assert isinstance(got, tg.Tensor) and got.dtype is d
        assert_close(got, np.asarray(want), dtype=d)
    assert tnp.bfloat16(1.5).dtype is dtypes.bfloat16 and tnp.bfloat16(1.5).item() == 1.5
    assert_close(tg.jit(lambda t: tnp.float16(t) * 2)(tnp.asarray(1.5)), np.float16(3.0), dtype=dtypes.float16)
    with pytest.raises(OverflowError):
        tnp.int8(300)   # as jnp.int8(300): a Python int that does not fit
    # still a hashable, interned dtype that compares by identity
    assert {tnp.float32: 1}[dtypes.float32] == 1 and tnp.float32 == dtypes.float32 and tnp.float32 != tnp.float16
    assert tnp.zeros(2, tnp.int8).dtype is tnp.int8 and np.dtype(tnp.int8) == np.int8


@pytest.mark.x64
@pytest.mark.parametrize("a", ["f4", "f2", "bf", "f8", "i4"])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((3, 4), (4, 1)), ((1, 4), (4, 5)), ((3, 4), (5, 6)),
                                    ((3, 4), (4,)), ((2, 3, 4), (4, 5))])
def test_the_fast_eager_matmul_builds_the_general_paths_graph(a: str, shapes: Any) -> None:
    # an eager `x @ y` of two 2-d float Tensors is built without promotion or broadcasting (_linalg._fast_matmul):
    # its node must be the one the general path builds (here taken through preferred_element_type, which skips the
    # fast path), and its mismatches raise the general path's error
    d = ABBREV[a]
    x = to_tensor(np.ones(shapes[0], np_dtype(d)), d)
    y = to_tensor(np.full(shapes[1], 2, np_dtype(d)), d)
    try:
        want = tnp.matmul(x, y, preferred_element_type=d)
    except ValueError as e:
        with pytest.raises(ValueError, match="contraction dimension mismatch"):
            x @ y
        assert "mismatch" in str(e)
        return
    got = x @ y
    assert got.uop is want.uop and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy().astype(np.float64),
                               np.ones(shapes[0]) @ np.full(shapes[1], 2.0), rtol=1e-2)


@pytest.mark.parametrize("d", [dtypes.float16, dtypes.bfloat16])
@pytest.mark.parametrize("op", ["sum", "mean", "prod", "matmul", "einsum", "dot_general", "grad"])
def test_half_floats_accumulate_in_float32(d: DType, op: str) -> None:
    """JAX sums and contracts float16/bfloat16 in float32 and rounds once (jnp.sum's upcast, XLA's for a dot): 4096
    terms of 0.1 add up to 409.6 (rounded to the half type), where a half accumulator stalls at 256 (float16) or
    32 (bfloat16) once 0.1 is below half its ulp."""
    n = 4096
    x, w = tnp.full((2, n), 0.1, d), tnp.full((n, 3), 1.0, d)
    if op == "grad":  # the backward's contraction over the 4096 rows: x.T @ ones
        got = tg.grad(lambda w: (x @ w).astype(tnp.float32).sum())(tnp.full((n, 1), 1.0, d)).astype(tnp.float32)
        want = np.float32(np.asarray(tnp.full((), 0.2, d)).astype(np.float32))
        np.testing.assert_array_equal(np.asarray(got), np.full((n, 1), want, np.float32))
        # and over the 4096 columns: x's gradient sums w's rows, in float32 as XLA's transposed dot
        gx = tg.grad(lambda x: (x @ tnp.full((2, n), 0.1, d)).astype(tnp.float32).sum())(tnp.ones((3, 2), d))
        want = np.float32(np.asarray(tnp.asarray(409.6, tnp.float32).astype(d)).astype(np.float32))
        np.testing.assert_array_equal(np.asarray(gx.astype(tnp.float32)), np.full((3, 2), want, np.float32))
        x = tnp.full((3, n), 0.1, d)
        got = tg.grad(lambda x: (x.sum(1) ** 2).sum())(x)  # 2 * sum(x) broadcast back
        want = np.float32(np.asarray((2 * tnp.asarray(409.6, tnp.float32)).astype(d)).astype(np.float32))
        np.testing.assert_array_equal(np.asarray(got.astype(tnp.float32)), np.full((3, n), want, np.float32))
        return
    eps = 2.0 ** -(10 if d == dtypes.float16 else 7)  # a half ulp of 1: the product of 64 (1 + eps) is 1 + 64 eps
    out = {"sum": lambda: x.sum(1), "mean": lambda: x.mean(1) * n,  # in a half accumulator, not (1 + eps) ** 64
           "prod": lambda: tnp.prod(tnp.full((2, 64), 1 + eps, d), axis=1),
           "matmul": lambda: (x @ w)[:, 0], "einsum": lambda: tnp.einsum("ik,kj->ij", x, w)[:, 0],
           "dot_general": lambda: tg.lax.dot_general(x, w, (((1,), (0,)), ((), ())))[:, 0]}[op]()
    assert out.dtype == d
    v = np.asarray(tnp.full((), 0.1, d).astype(tnp.float32)).item()
    exact = (1 + eps) ** 64 if op == "prod" else v * n
    want = np.asarray(tnp.asarray(exact, tnp.float32).astype(d).astype(tnp.float32))
    got = np.asarray(out.astype(tnp.float32))
    np.testing.assert_allclose(got, np.full(2, want), rtol=eps if op in ("mean", "prod") else 0)


def _rounded(a: np.ndarray, d: DType) -> np.ndarray:
    """float64 values rounded to the half type `d`, as float64."""
    return (bf16_round(a.astype(np.float32)) if d == dtypes.bfloat16 else a.astype(np.float16)).astype(np.float64)


@pytest.mark.parametrize("d", [dtypes.float16, dtypes.bfloat16])
@settings(max_examples=12)
@given(data=st.data())
def test_a_half_operand_of_two_dots_gets_each_dots_cotangent_rounded(d: DType, data: st.DataObject) -> None:
    """JAX transposes each half dot into a half dot (float32 sums, rounded once to the half type) and adds the
    cotangents of an operand used by several in the half type: w's gradient of x1 @ w + einsum(x2, w) is
    round(round(x1.T g) + round(x2.T g)), jax's bits (checked against jax 0.10.2). The two products shared w's float32
    cast and its broadcast, so their cotangents were summed in float32 and rounded once: 1 ulp off in a fifth of the
    elements (a bfloat16 transformer's 12 layers drifted from jax's losses by 2e-3 in three steps)."""
    m, k, n = (data.draw(st.integers(1, 9)) for _ in range(3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    # multiples of 1/256 below 1 are exact in either half type, and the dots' float32 sums of their products are exact
    # (at most 20 significant bits): each cotangent is rounded to the half type once, here as in any summation order.
    # (Normal draws were summed in float64 here: a float32 sum near a half tie rounds the other way, 1 ulp off.)
    x1, x2, w, g = (rng.integers(-255, 256, s) / 256 for s in ((m, k), (m, k), (k, n), (m, n)))
    tx1, tx2, tw, tgr = (tnp.asarray(a.astype(np.float32)).astype(d) for a in (x1, x2, w, g))
    _, pull = tg.vjp(lambda w: tx1 @ w + tnp.einsum("mk,kn->mn", tx2, w), tw)
    got = np.asarray(pull(tgr)[0].astype(tnp.float32)).astype(np.float64)
    np.testing.assert_array_equal(got, _rounded(_rounded(x1.T @ g, d) + _rounded(x2.T @ g, d), d))
