"""Elementwise numpy functions: arithmetic, comparisons, logic, bitwise, and the float math library."""
from __future__ import annotations

import math

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.tensor import ArrayLike, Tensor, broadcast, promote, to_tensor


def _t(x: ArrayLike) -> Tensor:
    return to_tensor(x)


def _check_int(name: str, *xs: Tensor) -> None:
    for x in xs:
        if x.dtype.is_float:
            raise TypeError(f"{name} is only defined for integer and bool Tensors, got {x.dtype.name}")


# ---- arithmetic ----
def add(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "add")
    if a.dtype.is_bool:
        return logical_or(a, b)
    return a._binary(Ops.ADD, b, name="add")


def multiply(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "multiply")
    if a.dtype.is_bool:
        return logical_and(a, b)
    return a._binary(Ops.MUL, b, name="multiply")


def negative(x: ArrayLike) -> Tensor:
    x = _t(x)
    if x.dtype.is_bool:
        raise TypeError("negative is not defined for bool Tensors; use logical_not")
    return x._unary(Ops.NEG)


def positive(x: ArrayLike) -> Tensor:
    return _t(x)


def subtract(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "subtract")
    if a.dtype.is_bool:
        raise TypeError("subtract is not defined for bool Tensors; use logical_xor")
    return add(a, negative(b))


def true_divide(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "true_divide", float_only=True)
    return a._binary(Ops.FDIV, b, name="true_divide")


divide = true_divide


def floor_divide(x: ArrayLike, y: ArrayLike) -> Tensor:
    """numpy's floor division: rounds toward -inf; integer division by zero gives 0."""
    a, b = promote(x, y, "floor_divide")
    if a.dtype.is_float:
        return floor(true_divide(a, b))
    if a.dtype.is_bool:
        a, b = a.astype(dtypes.int8), b.astype(dtypes.int8)
    q = a._binary(Ops.IDIV, b, name="floor_divide")
    if a.dtype.is_unsigned:
        return q
    # truncation rounds toward zero: step down when the signs differ and the division was inexact
    r = a._binary(Ops.MOD, b, name="floor_divide")
    fix = logical_and(r != 0, (r < 0) != (b < 0))
    return where(fix, q - 1, q)


def remainder(x: ArrayLike, y: ArrayLike) -> Tensor:
    """numpy's mod: the result has the sign of the divisor."""
    a, b = promote(x, y, "remainder")
    if a.dtype.is_bool:
        a, b = a.astype(dtypes.int8), b.astype(dtypes.int8)
    r = a._binary(Ops.MOD, b, name="remainder")
    if a.dtype.is_unsigned:
        return r
    fix = logical_and(r != 0, (r < 0) != (b < 0))
    out = where(fix, r + b, r)
    if a.dtype.is_float:  # numpy: a zero result takes the divisor's sign
        out = where(out == 0, copysign(out, b), out)
    return out


mod = remainder


def fmod(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "fmod")
    return a._binary(Ops.MOD, b, name="fmod")


def power(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "power")
    if a.dtype.is_float:
        return a._binary(Ops.POW, b, name="power")
    if isinstance(y, int) and 0 <= y <= 64:
        return _int_pow_const(a, y)
    return _int_pow(a, b)


def _int_pow_const(a: Tensor, n: int) -> Tensor:
    out, base = Tensor.full(a.shape, 1, a.dtype), a
    while n:
        if n & 1:
            out = out * base
        base, n = base * base, n >> 1
    return out


def _int_pow(a: Tensor, b: Tensor) -> Tensor:
    """Integer power by repeated squaring over the bits of the exponent (negative exponents give 0, as JAX)."""
    a, b = broadcast(a, b, name="power")
    out, base, e = Tensor.full(a.shape, 1, a.dtype), a, b
    for _ in range(a.dtype.bits):
        out = where((e & 1) != 0, out * base, out)
        base, e = base * base, e >> 1
    if not a.dtype.is_unsigned:
        out = where(b < 0, where(a == 1, 1, where(a == -1, where((b & 1) != 0, -1, 1), 0)), out)
    return out


def square(x: ArrayLike) -> Tensor:
    x = _t(x)
    return multiply(x, x)


def reciprocal(x: ArrayLike) -> Tensor:
    x = _t(x)
    return x._unary(Ops.RECIP) if x.dtype.is_float else floor_divide(1, x)


def absolute(x: ArrayLike) -> Tensor:
    x = _t(x)
    if x.dtype.is_bool or x.dtype.is_unsigned:
        return x
    if x.dtype.is_float:  # clear the sign bit: exact for -0.0 and NaN
        ui = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[x.dtype.itemsize]
        return (x.bitcast(ui) & ((1 << (x.dtype.bits - 1)) - 1)).bitcast(x.dtype)
    return where(x < 0, -x, x)


abs = absolute  # noqa: A001 - numpy's name


def sign(x: ArrayLike) -> Tensor:
    x = _t(x)
    if x.dtype.is_bool:
        return x
    one, zero = 1, 0
    out = where(x > 0, one, where(x < 0, -1 if not x.dtype.is_unsigned else 0, zero)).astype(x.dtype)
    return where(isnan(x), x, out) if x.dtype.is_float else out


def copysign(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "copysign", float_only=True)
    ui = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[a.dtype.itemsize]
    bit = 1 << (a.dtype.bits - 1)
    return ((a.bitcast(ui) & (bit - 1)) | (b.bitcast(ui) & bit)).bitcast(a.dtype)


def maximum(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "maximum")
    return a._binary(Ops.MAX, b, name="maximum")


def minimum(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "minimum")
    if a.dtype.is_float:
        return negative(maximum(negative(a), negative(b)))
    if a.dtype.is_bool:
        return logical_and(a, b)
    return invert(maximum(invert(a), invert(b)))


def clip(x: ArrayLike, a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Tensor:
    x = _t(x)
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Tensor:
    c = _t(condition)
    return c.where(x, y)


# ---- comparisons ----
def less(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "less")
    return a._binary(Ops.CMPLT, b, name="less")


def greater(x: ArrayLike, y: ArrayLike) -> Tensor:
    return less(y, x)


def less_equal(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "less_equal")
    return logical_or(less(a, b), equal(a, b))


def greater_equal(x: ArrayLike, y: ArrayLike) -> Tensor:
    return less_equal(y, x)


def equal(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "equal")
    return a._binary(Ops.CMPEQ, b, name="equal")


def not_equal(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "not_equal")
    return a._binary(Ops.CMPNE, b, name="not_equal")


def isnan(x: ArrayLike) -> Tensor:
    x = _t(x)
    return not_equal(x, x) if x.dtype.is_float else Tensor.full(x.shape, False)


def isinf(x: ArrayLike) -> Tensor:
    x = _t(x)
    if not x.dtype.is_float:
        return Tensor.full(x.shape, False)
    return equal(absolute(x), float("inf"))


def isfinite(x: ArrayLike) -> Tensor:
    x = _t(x)
    if not x.dtype.is_float:
        return Tensor.full(x.shape, True)
    return logical_not(logical_or(isnan(x), isinf(x)))


# ---- logic and bits ----
def _bool(x: ArrayLike) -> Tensor:
    x = _t(x)
    return x if x.dtype.is_bool else not_equal(x, 0)


def logical_and(x: ArrayLike, y: ArrayLike) -> Tensor:
    return _bool(x)._binary(Ops.AND, _bool(y), name="logical_and")


def logical_or(x: ArrayLike, y: ArrayLike) -> Tensor:
    return _bool(x)._binary(Ops.OR, _bool(y), name="logical_or")


def logical_xor(x: ArrayLike, y: ArrayLike) -> Tensor:
    return _bool(x)._binary(Ops.XOR, _bool(y), name="logical_xor")


def logical_not(x: ArrayLike) -> Tensor:
    return _bool(x)._binary(Ops.XOR, True, name="logical_not")


def bitwise_and(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "bitwise_and")
    _check_int("bitwise_and", a)
    return a._binary(Ops.AND, b, name="bitwise_and")


def bitwise_or(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "bitwise_or")
    _check_int("bitwise_or", a)
    return a._binary(Ops.OR, b, name="bitwise_or")


def bitwise_xor(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "bitwise_xor")
    _check_int("bitwise_xor", a)
    return a._binary(Ops.XOR, b, name="bitwise_xor")


def invert(x: ArrayLike) -> Tensor:
    x = _t(x)
    _check_int("invert", x)
    return logical_not(x) if x.dtype.is_bool else x._binary(Ops.XOR, -1 if not x.dtype.is_unsigned else
                                                            (1 << x.dtype.bits) - 1, name="invert")


bitwise_not = invert


def left_shift(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "left_shift")
    _check_int("left_shift", a)
    return a._binary(Ops.SHL, b, name="left_shift")


def right_shift(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = promote(x, y, "right_shift")
    _check_int("right_shift", a)
    return a._binary(Ops.SHR, b, name="right_shift")


# ---- float math: each a single op, computed by the C math library or an LLVM intrinsic ----
def _float_unary(op: Ops, name: str):  # noqa: ANN202
    def fn(x: ArrayLike) -> Tensor:
        return _t(x)._unary(op)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name} (integer inputs are computed in float32)."
    return fn


exp = _float_unary(Ops.EXP, "exp")
exp2 = _float_unary(Ops.EXP2, "exp2")
expm1 = _float_unary(Ops.EXPM1, "expm1")
log = _float_unary(Ops.LOG, "log")
log2 = _float_unary(Ops.LOG2, "log2")
log1p = _float_unary(Ops.LOG1P, "log1p")
sqrt = _float_unary(Ops.SQRT, "sqrt")
sin = _float_unary(Ops.SIN, "sin")
cos = _float_unary(Ops.COS, "cos")
tan = _float_unary(Ops.TAN, "tan")
arcsin = _float_unary(Ops.ASIN, "arcsin")
arccos = _float_unary(Ops.ACOS, "arccos")
arctan = _float_unary(Ops.ATAN, "arctan")
sinh = _float_unary(Ops.SINH, "sinh")
cosh = _float_unary(Ops.COSH, "cosh")
tanh = _float_unary(Ops.TANH, "tanh")


def log10(x: ArrayLike) -> Tensor:
    return log(x) * (1 / math.log(10))


def arctan2(y: ArrayLike, x: ArrayLike) -> Tensor:
    a, b = promote(y, x, "arctan2", float_only=True)
    return a._binary(Ops.ATAN2, b, name="arctan2")


def _rounding(op: Ops, name: str):  # noqa: ANN202
    def fn(x: ArrayLike) -> Tensor:
        x = _t(x)
        return x if not x.dtype.is_float else x._unary(op)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name} (integers are returned unchanged)."
    return fn


floor = _rounding(Ops.FLOOR, "floor")
ceil = _rounding(Ops.CEIL, "ceil")
trunc = _rounding(Ops.TRUNC, "trunc")
rint = _rounding(Ops.RINT, "rint")


def round(x: ArrayLike, decimals: int = 0) -> Tensor:  # noqa: A001 - numpy's name
    """Round half to even, like numpy.round."""
    x = _t(x)
    if not x.dtype.is_float:
        if decimals >= 0:
            return x
        f = 10 ** -decimals
        return (floor_divide(x + f // 2, f)) * f
    if decimals == 0:
        return rint(x)
    f = 10.0 ** decimals
    return rint(x * f) / f


around = round
