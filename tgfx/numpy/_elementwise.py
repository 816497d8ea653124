"""Elementwise numpy functions: arithmetic, comparisons, logic, bitwise, and the float math library."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tgfx.dtypes import dtypes, finfo, max_value, to_inexact, uint_of
from tgfx.function import function, with_derivative
from tgfx.ir.ops import Ops
from tgfx.tensor import (
    ArrayLike,
    Tensor,
    broadcast,
    cast_keeping_weak,
    fast_binary,
    keep_weak,
    promote,
    static_int,
    to_tensor,
    weak_typed,
)


def _t(x: ArrayLike) -> Tensor:
    return to_tensor(x)


def _inexact(x: ArrayLike) -> Tensor:
    """x as the float type float functions compute it in (see `to_inexact`: int32 -> float32, int64 -> float64)."""
    x = _t(x)
    return cast_keeping_weak(x, to_inexact(x.dtype))


def _operands(x: ArrayLike, y: ArrayLike, name: str) -> tuple[Tensor, Tensor]:
    """Both operands promoted and broadcast, so a function built from other ones reports a mismatch by its own name."""
    a, b = promote(x, y, name)
    a, b = broadcast(a, b, name=name)
    return a, b


def _promote_inexact(x: ArrayLike, y: ArrayLike, name: str) -> tuple[Tensor, Tensor]:
    """Both operands in the float type of their promotion (JAX's promote_args_inexact)."""
    xs = [v if isinstance(v, (bool, int, float, complex, Tensor)) else _t(v) for v in (x, y)]
    return promote(*xs, name, float_only=True)


def _numeric(x: Tensor) -> Tensor:
    """x in JAX's numeric type for it (`to_numeric_dtype`): a bool is int32, whatever the x64 mode."""
    return cast_keeping_weak(x, dtypes.int32) if x.dtype.is_bool else x


def _promote_numeric(x: ArrayLike, y: ArrayLike, name: str) -> tuple[Tensor, Tensor]:
    """Both operands promoted, then made numeric (JAX's promote_args_numeric): the functions with no bool form
    (floor_divide, remainder, fmod, power, the shifts) compute bool operands as int32, as JAX does."""
    a, b = promote(x, y, name)
    return (_numeric(a), _numeric(b)) if a.dtype.is_bool else (a, b)


def _check_int(name: str, *xs: Tensor) -> None:
    for x in xs:
        if x.dtype.is_float:
            raise TypeError(f"{name} is only defined for integer and bool Tensors, got {x.dtype.name}")


# ---- arithmetic ----
def add(x: ArrayLike, y: ArrayLike) -> Tensor:
    if (out := fast_binary(Ops.ADD, x, y)) is not None:
        return out
    a, b = promote(x, y, "add")
    if a.dtype.is_bool:
        return logical_or(a, b)
    return a._binary(Ops.ADD, b, name="add")


def multiply(x: ArrayLike, y: ArrayLike) -> Tensor:
    if (out := fast_binary(Ops.MUL, x, y)) is not None:
        return out
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
    if (out := fast_binary(Ops.ADD, x, y, negate=True)) is not None:
        return out
    a, b = promote(x, y, "subtract")
    if a.dtype.is_bool:
        raise TypeError("subtract is not defined for bool Tensors; use logical_xor")
    # x + (-y), y negated before it is broadcast (one promotion and one broadcast, not three and two)
    return a._binary(Ops.ADD, b._unary(Ops.NEG), name="subtract")


def true_divide(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x / y in floats: integers divide as to_inexact of their promotion (int32 / int32 is float32)."""
    if (out := fast_binary(Ops.FDIV, x, y, kinds="f")) is not None:
        return out
    a, b = _promote_inexact(x, y, "true_divide")
    return a._binary(Ops.FDIV, b, name="true_divide")


divide = true_divide


def _float_divmod(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """numpy's npy_divmod for floats: the floored quotient, and the remainder with the divisor's sign.

    The quotient is (a - fmod(a, b)) / b snapped to an integer, not floor(a / b): `1 // 0.1` is 9, as 0.1 is a little
    more than a tenth, where floor(1 / 0.1) would round up to 10 first.
    """
    d = a.dtype
    if d in (dtypes.float16, dtypes.bfloat16):  # numpy computes half types in float32 and rounds once at the end
        q, r = _float_divmod(a.astype(dtypes.float32), b.astype(dtypes.float32))
        return q.astype(d), r.astype(d)
    mod = a._binary(Ops.MOD, b, name="divmod")  # fmod: exact, with the dividend's sign
    div = true_divide(subtract(a, mod), b)
    fix = logical_and(mod != 0, (b < 0) != (mod < 0))
    mod = where(fix, mod + b, mod)
    div = where(fix, div - 1, div)
    mod = where(mod == 0, copysign(0.0, b), mod)  # a zero remainder takes the divisor's sign
    q = floor(div)
    q = where(div - q > 0.5, q + 1, q)
    quotient = true_divide(a, b)  # for b == 0 (inf or nan), and the sign of a zero quotient
    q = where(div == 0, copysign(0.0, quotient), q)
    return where(b == 0, quotient, q), mod


@weak_typed
def floor_divide(x: ArrayLike, y: ArrayLike) -> Tensor:
    """numpy's floor division: rounds toward -inf. An integer x // 0 is what JAX gives (XLA's x / 0, all bits set,
    stepped down as for any inexact division whose signs differ): the type's maximum for unsigned types, and -1 for
    0 // 0, -2 for any other x // 0 for signed ones."""
    a, b = _promote_numeric(x, y, "floor_divide")
    if a.dtype.is_float:
        return _float_divmod(*broadcast(a, b, name="floor_divide"))[0]
    q = a._binary(Ops.IDIV, b, name="floor_divide")   # 0 for a zero divisor
    if not a.dtype.is_unsigned:
        # truncation rounds toward zero: step down when the signs differ and the division was inexact
        r = a._binary(Ops.MOD, b, name="floor_divide")
        fix = logical_and(r != 0, (r < 0) != (b < 0))
        q = where(fix, q - 1, q)
    if isinstance(y, (int, np.integer)) and int(y) % (1 << a.dtype.bits) != 0:
        return q   # a divisor known not to be zero in a's type (`i // 2`; int8 // 256 wraps to a zero divisor)
    by_zero = max_value(a.dtype) if a.dtype.is_unsigned else where(a == 0, -1, -2).astype(a.dtype)
    return where(b == 0, by_zero, q)


@weak_typed
def remainder(x: ArrayLike, y: ArrayLike) -> Tensor:
    """numpy's mod: the result has the sign of the divisor."""
    a, b = _promote_numeric(x, y, "remainder")
    if a.dtype.is_float:
        return _float_divmod(*broadcast(a, b, name="remainder"))[1]
    r = a._binary(Ops.MOD, b, name="remainder")
    if a.dtype.is_unsigned:
        return r
    fix = logical_and(r != 0, (r < 0) != (b < 0))
    return where(fix, r + b, r)


mod = remainder


@weak_typed
def fmod(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = _promote_numeric(x, y, "fmod")
    return a._binary(Ops.MOD, b, name="fmod")


def power(x: ArrayLike, y: ArrayLike) -> Tensor:
    if isinstance(y, (int, np.integer, np.bool_)) and not isinstance(x, (int, float, complex)):
        # a concrete integer exponent is JAX's integer_pow: it takes no part in the promotion (the result has the
        # base's numeric type: int8 ** np.int64(2) is int8, a bool base int32) and is never converted to the base's
        # type (int8 ** 1000 is x^1000 mod 2^8, not x ** (1000 wrapped to int8); a float ** 2**31 - 1 is odd)
        x, n = _numeric(_t(x)), int(y)
        if n < 0 and x.dtype.is_int:   # (1 / x in integers: JAX's integer_pow refuses, NumPy's power too)
            raise TypeError(f"power: integers cannot be raised to negative powers, got {x.dtype.name}"
                            f"{list(x.shape)} ** {n}; make the base a float (x.astype(float)) to compute it")
        if x.dtype.is_int or (x.dtype.is_float and n >= 0):
            # by repeated squaring, as JAX: `(x - m) ** 2` is x*x and its gradient 2x, not pow(x, 2) and
            # 2 * pow(x, 1) (a batch norm's backward: 16 libm calls for each vector)
            return _int_pow_const(x, n)
        if x.dtype.is_float and -n > _EXACT_INT[x.dtype]:
            # an exponent the float type cannot hold exactly would lose its parity in pow (a negative base's sign)
            return reciprocal(_int_pow_const(x, -n))
        # a small negative power stays pow: 1 / x**n overflows first where pow's result is a denormal (1e20 ** -2)
    a, b = _promote_numeric(x, y, "power")
    if a.dtype.is_complex:
        from tgfx.numpy import _complex
        return _complex.power(a, b, y)
    if a.dtype.is_float:
        return a._binary(Ops.POW, b, name="power")
    return _int_pow(a, b)


# the largest integer each float type holds exactly (with its parity): beyond it a power is not pow's
_EXACT_INT = {dtypes.float16: 2 ** 11, dtypes.bfloat16: 2 ** 8, dtypes.float32: 2 ** 24, dtypes.float64: 2 ** 53}


def _int_pow_const(a: Tensor, n: int) -> Tensor:
    """a ** n by repeated squaring (n >= 0); n = 0 is ones, and no product starts from one."""
    out, base = None, a
    while n:
        if n & 1:
            out = base if out is None else out * base
        n >>= 1
        if n:
            base = base * base
    return Tensor.full(a.shape, 1, a.dtype) if out is None else out


def _int_pow(a: Tensor, b: Tensor) -> Tensor:
    """Integer power by repeated squaring over the bits of the exponent (negative exponents give 0, as JAX)."""
    a, b = broadcast(a, b, name="power")
    one, zero = Tensor.full(a.shape, 1, a.dtype), Tensor.full(a.shape, 0, a.dtype)
    out, base, e = one, a, b
    for _ in range(a.dtype.bits):
        out = where((e & 1) != 0, out * base, out)
        base, e = base * base, e >> 1
    if not a.dtype.is_unsigned:  # typed constants, so the result keeps a's dtype
        out = where(b < 0, where(a == 1, one, where(a == -1, where((b & 1) != 0, a, one), zero)), out)
    return out


def square(x: ArrayLike) -> Tensor:
    """x * x; a bool x squares as int32, as jnp.square."""
    x = _numeric(_t(x))
    return multiply(x, x)


def reciprocal(x: ArrayLike) -> Tensor:
    """1 / x. Integers promote to floats, as jnp.reciprocal (numpy's integer result, 1 // x truncated, is not kept)."""
    return _inexact(x)._unary(Ops.RECIP)


@weak_typed
def absolute(x: ArrayLike) -> Tensor:
    x = _t(x)
    if x.dtype.is_bool or x.dtype.is_unsigned:
        return x
    if x.dtype.is_complex:
        from tgfx.numpy import _complex
        return _complex.absolute(x)
    if x.dtype.is_float:  # clear the sign bit: exact for -0.0 and NaN
        ui = uint_of(x.dtype)
        return (x.bitcast(ui) & ((1 << (x.dtype.bits - 1)) - 1)).bitcast(x.dtype)
    return where(x < 0, -x, x)


abs = absolute  # noqa: A001 - numpy's name


@weak_typed
def sign(x: ArrayLike) -> Tensor:
    x = _t(x)
    if x.dtype.is_bool:
        return x
    if x.dtype.is_complex:  # x / |x|, 0 at 0 (numpy 2's and JAX's)
        m = absolute(x).astype(x.dtype)
        return where(m == 0, 0, x / where(m == 0, 1, m))
    one, zero = 1, 0
    out = where(x > 0, one, where(x < 0, -1 if not x.dtype.is_unsigned else 0, zero)).astype(x.dtype)
    return where(isnan(x), x, out) if x.dtype.is_float else out


@weak_typed
def copysign(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = _promote_inexact(x, y, "copysign")
    ui = uint_of(a.dtype)
    bit = 1 << (a.dtype.bits - 1)
    return ((a.bitcast(ui) & (bit - 1)) | (b.bitcast(ui) & bit)).bitcast(a.dtype)


def maximum(x: ArrayLike, y: ArrayLike) -> Tensor:
    """The elementwise maximum; NaN wins for floats. Complex values compare as `less` orders them."""
    a, b = promote(x, y, "maximum")
    if a.dtype.is_complex:
        from tgfx.numpy import _complex
        return _complex.maximum(a, b)
    return a._binary(Ops.MAX, b, name="maximum")


def minimum(x: ArrayLike, y: ArrayLike) -> Tensor:
    """The elementwise minimum; NaN wins for floats. Complex values compare as `less` orders them."""
    a, b = _operands(x, y, "minimum")
    if a.dtype.is_complex:
        from tgfx.numpy import _complex
        return _complex.minimum(a, b)
    if a.dtype.is_float:
        return negative(maximum(negative(a), negative(b)))
    if a.dtype.is_bool:
        return logical_and(a, b)
    return invert(maximum(invert(a), invert(b)))


def clip(x: ArrayLike, min: ArrayLike | None = None, max: ArrayLike | None = None, *,  # noqa: A002
         a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Tensor:
    """x limited to [min, max] (either may be None), as jnp.clip; `a_min`/`a_max` are numpy's older names for the
    same bounds. The result dtype is the promotion of x and the bounds (JAX's; the standard keeps x's)."""
    for old, new, name in ((a_min, min, "min"), (a_max, max, "max")):
        if old is not None and new is not None:
            raise ValueError(f"clip: a_{name} and {name} are the same bound (numpy's old and new name); pass one")
    lo, hi = a_min if a_min is not None else min, a_max if a_max is not None else max
    x = _t(x)
    if any(isinstance(v, complex) or v is not None and not isinstance(v, (bool, int, float)) and _t(v).dtype.is_complex
           for v in (x, lo, hi)):
        raise ValueError("clip: complex values have no order to clip by (as in JAX); clip real(x) and imag(x), or "
                         "abs(x)")
    if lo is not None:
        x = maximum(x, lo)
    if hi is not None:
        x = minimum(x, hi)
    return x


def where(condition: ArrayLike, x: ArrayLike | None = None, y: ArrayLike | None = None, /, *, size: int | None = None,
          fill_value: ArrayLike | tuple | None = None) -> Tensor | tuple[Tensor, ...]:
    """x where `condition` holds, else y (numpy.where); with the condition alone, `nonzero(condition, size=...,
    fill_value=...)`, as `jnp.where(condition)`.

    >>> tnp.where(tnp.asarray([True, False]), 1.0, 2.0)        # [1., 2.]
    >>> tnp.where(tnp.asarray([0, 3, 0, 5]))                   # (Tensor([1, 3]),)
    """
    if x is None and y is None:
        from tgfx.numpy._data_dependent import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither (the one-argument form is nonzero(condition))")
    if size is not None or fill_value is not None:
        raise ValueError("where: size and fill_value belong to the one-argument form, where(condition, size=...)")
    if type(condition) is Tensor:
        return condition.where(x, y)
    if isinstance(condition, (np.ndarray, list, tuple)):
        # host data goes where the Tensor operands are, as a binary op's (JAX's uncommitted array): a mask of
        # indices, `where(i == j, x, 0)`, failed every x on another device than the default
        on = next((t.uop.device for t in (x, y) if isinstance(t, Tensor) and t.uop.device is not None), None)
        condition = Tensor(condition, device=on)
    return _t(condition).where(x, y)


# ---- comparisons ----
def less(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x < y; complex values in JAX's lexicographic order: by the real parts, then the imaginary parts (and
    `greater`, `less_equal`, `greater_equal`, `maximum`, the sorts, ... in the same order)."""
    if (out := fast_binary(Ops.CMPLT, x, y, compare=True)) is not None:
        return out
    a, b = promote(x, y, "less")
    if a.dtype.is_complex:
        from tgfx.numpy import _complex
        return _complex.less(a, b)
    return a._binary(Ops.CMPLT, b, name="less")


def greater(x: ArrayLike, y: ArrayLike) -> Tensor:
    if (out := fast_binary(Ops.CMPLT, y, x, compare=True)) is not None:
        return out
    a, b = _operands(x, y, "greater")
    return less(b, a)


def less_equal(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = _operands(x, y, "less_equal")
    return logical_or(less(a, b), equal(a, b))


def greater_equal(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = _operands(x, y, "greater_equal")
    return less_equal(b, a)


def equal(x: ArrayLike, y: ArrayLike) -> Tensor:
    if (out := fast_binary(Ops.CMPEQ, x, y, compare=True)) is not None:
        return out
    a, b = promote(x, y, "equal")
    return a._binary(Ops.CMPEQ, b, name="equal")


def not_equal(x: ArrayLike, y: ArrayLike) -> Tensor:
    if (out := fast_binary(Ops.CMPNE, x, y, compare=True)) is not None:
        return out
    a, b = promote(x, y, "not_equal")
    return a._binary(Ops.CMPNE, b, name="not_equal")


def _either_part(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    from tgfx.numpy import _complex
    return logical_or(fn(_complex.real(x)), fn(_complex.imag(x)))


def isnan(x: ArrayLike) -> Tensor:
    x = _t(x)
    if x.dtype.is_complex:
        return _either_part(isnan, x)
    return not_equal(x, x) if x.dtype.is_float else Tensor.full(x.shape, False)


def isinf(x: ArrayLike) -> Tensor:
    x = _t(x)
    if x.dtype.is_complex:
        return _either_part(isinf, x)
    if not x.dtype.is_float:
        return Tensor.full(x.shape, False)
    return equal(absolute(x), float("inf"))


def isfinite(x: ArrayLike) -> Tensor:
    x = _t(x)
    if x.dtype.is_complex:
        return logical_not(_either_part(lambda v: logical_not(isfinite(v)), x))
    if not x.dtype.is_float:
        return Tensor.full(x.shape, True)
    # (false for NaN, whose comparisons all are, and for +-inf; no |x|, whose bits would make a gradient rewrite it)
    return logical_and(less(-float("inf"), x), less(x, float("inf")))


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
    a, b = _promote_numeric(x, y, "left_shift")
    _check_int("left_shift", a)
    return a._binary(Ops.SHL, b, name="left_shift")


def right_shift(x: ArrayLike, y: ArrayLike) -> Tensor:
    a, b = _promote_numeric(x, y, "right_shift")
    _check_int("right_shift", a)
    return a._binary(Ops.SHR, b, name="right_shift")


# ---- float math: each a single op, computed by the C math library or an LLVM intrinsic ----
def _real_or_complex(x: ArrayLike, name: str, real_fn: Callable[[Tensor], Tensor]) -> Tensor:
    """numpy's `name` of x: `real_fn` of a real x, the complex library's `name` of a complex one (the holomorphic
    ops, or built from them: tgfx/numpy/_complex.py)."""
    x = _inexact(x)
    if x.dtype.is_complex:
        from tgfx.numpy import _complex
        return keep_weak(_complex.unary(name, x), x)
    return keep_weak(real_fn(x), x)


def _float_unary(op: Ops, name: str):  # noqa: ANN202
    def fn(x: ArrayLike) -> Tensor:
        if type(x) is Tensor and x.uop.dtype.kind == "f":
            # (a float Tensor, an eager `exp(x)`'s case: no conversion, cast or complex branch to go through, and
            # `_unary` keeps a weak x's weak type itself: 48 -> 28 Python calls an eager op)
            return x._unary(op)
        return _real_or_complex(x, name, lambda t: t._unary(op))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name} (integers are computed in float32, 64-bit ones in float64)."
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
    return _real_or_complex(x, "log10", lambda t: log(t) * (1 / math.log(10)))


def arctan2(y: ArrayLike, x: ArrayLike) -> Tensor:
    a, b = _promote_inexact(y, x, "arctan2")
    return a._binary(Ops.ATAN2, b, name="arctan2")



def _logaddexp(x1: ArrayLike, x2: ArrayLike, name: str, exp_fn: Callable[[Tensor], Tensor], scale: float) -> Tensor:
    """hi + log1p(exp(lo - hi)) * scale, hi and lo the larger and smaller argument picked by a select (so a tie sends
    each its half of the gradient: d/dhi = 1 - s, d/dlo = s, s = sigmoid(lo - hi) = 1/2), and exp only of lo - hi <= 0.

    Two equal infinities would make lo - hi a NaN, in the value and (through exp's derivative, even masked out) in
    the gradient: there the difference is replaced by 0 and the value is (x1 + x2) / 2, the infinity itself with
    gradient 1/2 each, the limit along x1 = x2 (JAX gives NaN gradients at two -infs). A NaN argument gives NaN."""
    a, b = _promote_inexact(x1, x2, name)
    a, b = broadcast(a, b, name=name)
    ge = greater_equal(a, b)
    hi, lo = where(ge, a, b), where(ge, b, a)
    same_inf = logical_and(equal(hi, lo), isinf(hi))
    d = where(same_inf, 0.0, lo - hi)
    out = hi + log1p(exp_fn(d)) * scale if scale != 1.0 else hi + log1p(exp_fn(d))
    return where(same_inf, (a + b) * 0.5, out)


def logaddexp(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """log(exp(x1) + exp(x2)) without overflow or underflow (`numpy.logaddexp`), in floats.

    >>> tnp.logaddexp(1000.0, 1000.0)          # 1000.6931, not inf
    >>> tnp.logaddexp(-tnp.inf, 0.0)           # 0.0; its gradient is (0, 1)

    The gradient is (sigmoid(x1 - x2), sigmoid(x2 - x1)): (1/2, 1/2) at equal arguments, (0, 1) at (-inf, finite).
    """
    return _logaddexp(x1, x2, "logaddexp", exp, 1.0)


def logaddexp2(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """log2(2**x1 + 2**x2) without overflow or underflow (`numpy.logaddexp2`), in floats; gradients as
    `logaddexp`'s.

    >>> tnp.logaddexp2(1.0, 1.0)               # 2.0
    """
    return _logaddexp(x1, x2, "logaddexp2", exp2, 1 / math.log(2))


def _rounding(op: Ops, name: str):  # noqa: ANN202
    def fn(x: ArrayLike) -> Tensor:
        x = _t(x)
        if x.dtype.is_complex:
            raise TypeError(f"{name} is not defined for complex Tensors ({x.dtype.name}); apply it to real(x) and "
                            f"imag(x), or use round")
        return x if not x.dtype.is_float else x._unary(op)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}, as numpy.{name} (integers are returned unchanged)."
    return fn


floor = _rounding(Ops.FLOOR, "floor")
ceil = _rounding(Ops.CEIL, "ceil")
trunc = _rounding(Ops.TRUNC, "trunc")


def _complex_parts(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """fn of a complex x's real and imaginary parts, as the parts of the result (rounding a complex value)."""
    from tgfx.numpy import _complex
    return _complex.from_parts(fn(_complex.real(x)), fn(_complex.imag(x)))


def rint(x: ArrayLike) -> Tensor:
    """Round half to even. Always returns floats, as jnp.rint: integers and bools, their own rounding, as the default
    float type (float64 in x64 mode, whatever their width); a complex value has its real and imaginary parts rounded."""
    x = _t(x)
    if x.dtype.is_complex:
        return keep_weak(_complex_parts(rint, x), x)
    if not x.dtype.is_float:
        return x.astype(dtypes.default_float)
    return x._unary(Ops.RINT)


def round(x: ArrayLike, decimals: int = 0) -> Tensor:  # noqa: A001 - numpy's name
    """Round half to even to `decimals` digits, like numpy.round; integers stay integers, a complex value has its
    real and imaginary parts rounded.

    >>> tnp.round(tnp.asarray([1.5 + 2.5j, 0.125]), 2)     # [1.5+2.5j, 0.12+0j]
    """
    if (places := static_int(decimals)) is None:   # (JAX's decimals is static too: an array is an error there)
        raise TypeError(f"round: decimals must be a Python int, got {type(decimals).__name__}"
                        f"{' of shape ' + str(decimals.shape) if hasattr(decimals, 'shape') else ''}")
    x = _t(x)
    return keep_weak(_round(x, places), x)


def _round(x: Tensor, decimals: int) -> Tensor:
    if not x.dtype.is_inexact:
        return x if decimals >= 0 or x.dtype.is_bool else _round_int(x, 10 ** -decimals)
    if decimals > math.log10(finfo(x.dtype).max):   # finer than the type resolves (and 10**decimals overflows it)
        return x
    if x.dtype.is_complex:
        return _complex_parts(lambda part: round(part, decimals), x)
    if decimals == 0:
        return rint(x)
    if x.dtype == dtypes.float16:   # scaled in float32, where 65504 * 100 does not overflow, and rounded back (as JAX)
        return round(x.astype(dtypes.float32), decimals).astype(dtypes.float16)
    # as numpy: multiply then divide for decimals > 0, divide then multiply for decimals < 0 (exact powers of ten)
    if decimals > 0:
        f = 10.0 ** decimals
        return rint(x * f) / f
    f = 10.0 ** -decimals
    return rint(x / f) * f


def _round_int(x: Tensor, f: int) -> Tensor:
    """x rounded to a multiple of f, half to even, in exact integer arithmetic."""
    if f > max_value(x.dtype):  # every value is within half a step of 0
        return Tensor.full(x.shape, 0, x.dtype)
    q = floor_divide(x, f)
    r = x - q * f  # in [0, f)
    rest = f - r
    up = logical_or(r > rest, logical_and(r == rest, (q & 1) != 0))
    return where(up, q + 1, q) * f


around = round


# ---- the array API's inverse hyperbolics, hypot, nextafter, signbit: composed of the ops above ----
_HALF = (dtypes.float16, dtypes.bfloat16)
_BIG = float(2 ** 28)  # above it x**2 + 1 is x**2 in float64 too, and log(2x) is the function to its last bit


def _in_float32(fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """Half floats computed in float32 and rounded once (their squares overflow at 256), as numpy does."""
    def wrapped(x: Tensor) -> Tensor:
        return fn(x.astype(dtypes.float32)).astype(x.dtype) if x.dtype in _HALF else fn(x)
    return wrapped


@_in_float32
def _asinh_value(x: Tensor) -> Tensor:
    a = absolute(x)
    small = minimum(a, _BIG)  # the large branch's input kept finite, so its unselected square is no inf/NaN
    near = log1p(small + small * small / (1.0 + sqrt(small * small + 1.0)))
    return copysign(where(a > _BIG, log(a) + math.log(2), near), x)


# the derivatives in closed form: through the branches above, the one not taken put inf * 0 = NaN into the gradient
# (log(|x|) at 0, sqrt(t (t + 2)) at x = 1), where JAX's is 1 and inf
_asinh = with_derivative(_asinh_value, lambda x, y: 1.0 / hypot(1.0, x))


def arcsinh(x: ArrayLike) -> Tensor:
    """Elementwise inverse hyperbolic sine (numpy.arcsinh): log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) with x's sign,
    accurate near 0; log(2|x|) past 2**28, where x^2 would lose the 1."""
    return _real_or_complex(x, "arcsinh", _asinh)


@_in_float32
def _acosh_value(x: Tensor) -> Tensor:
    t = minimum(x, _BIG) - 1.0  # x - 1 is exact near 1, where log(x + sqrt(x^2 - 1)) would cancel
    near = log1p(t + sqrt(t * (t + 2.0)))
    return where(x < 1.0, float("nan"), where(x > _BIG, log(x) + math.log(2), near))  # NaN below 1 (t * (t + 2) is
    # positive again past -2)


_acosh = with_derivative(_acosh_value, lambda x, y: 1.0 / (sqrt(x - 1.0) * sqrt(x + 1.0)))


def arccosh(x: ArrayLike) -> Tensor:
    """Elementwise inverse hyperbolic cosine (numpy.arccosh); NaN below 1, log(2x) past 2**28."""
    return _real_or_complex(x, "arccosh", _acosh)


@_in_float32
def _atanh(x: Tensor) -> Tensor:
    a = absolute(x)  # on |x| the argument of log1p is positive: no cancellation near +-1
    t = where(a < 0.5, 2.0 * a + 2.0 * a * a / (1.0 - a), 2.0 * a / (1.0 - a))
    return copysign(0.5 * log1p(t), x)


def arctanh(x: ArrayLike) -> Tensor:
    """Elementwise inverse hyperbolic tangent (numpy.arctanh): log1p(2|x| / (1 - |x|)) / 2 with x's sign (glibc's
    split at 1/2), +-inf at +-1, NaN past."""
    return _real_or_complex(x, "arctanh", _atanh)


@weak_typed
def hypot(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """sqrt(x1**2 + x2**2) without overflow or underflow (numpy.hypot): the larger magnitude times
    sqrt(1 + ratio**2); inf if either is infinite (even beside a NaN), as C's hypot. Its derivative is x / hypot,
    and at the origin JAX's (its max(|x1|, |x2|) ties there: each argument has half of abs's 1), not 0 / 0."""
    a, b = _promote_inexact(x1, x2, "hypot")
    a, b = broadcast(absolute(a), absolute(b), name="hypot")
    return _hypot_fn(a, b)


def _hypot_value(a: Tensor, b: Tensor) -> Tensor:
    if a.dtype in _HALF:
        return _hypot_value(a.astype(dtypes.float32), b.astype(dtypes.float32)).astype(a.dtype)
    if a.dtype == dtypes.float32:
        # the sum of squares in float64 (whatever x64 says: an internal width) cannot overflow, and rounds once to
        # float32: what numpy's hypotf and XLA give (the scaled form below was an ulp off for 4% of inputs)
        a64, b64 = (t.uop.cast(dtypes.float64) for t in (a, b))   # (as UOps: Tensor arithmetic would canonicalise)
        wide = Tensor((a64 * a64 + b64 * b64).alu(Ops.SQRT).cast(dtypes.float32))
        return where(logical_or(isinf(a), isinf(b)), float("inf"), wide)
    hi, lo = maximum(a, b), minimum(a, b)
    safe = where(logical_or(hi == 0, isinf(hi)), 1.0, hi)  # 0/0 and inf/inf stay out of the ratio
    r = lo / safe
    out = where(hi == 0, 0.0, hi * sqrt(1.0 + r * r))
    return where(logical_or(isinf(a), isinf(b)), float("inf"), out)


def _hypot_backward(grads: Tensor, call: Any) -> tuple[Tensor, Tensor]:
    g, (a, b), (h,) = grads, call.inputs, call.outputs
    origin = h == 0
    safe = where(origin, 1.0, h).astype(h.dtype)
    return g * where(origin, 0.5, a / safe).astype(h.dtype), g * where(origin, 0.5, b / safe).astype(h.dtype)


_hypot_fn = function(_hypot_value, grad_fxn=_hypot_backward, cache=True)


@weak_typed
def nextafter(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The next float after x1 toward x2 (numpy.nextafter): one step of the bit pattern, in x1's and x2's promoted
    float type; x2 where they are equal, NaN if either is."""
    a, b = _promote_inexact(x1, x2, "nextafter")
    a, b = broadcast(a, b, name="nextafter")
    ui = uint_of(a.dtype)
    bits = a.bitcast(ui)
    sign_bit = 1 << (a.dtype.bits - 1)
    away = (b > a) == (a > 0)  # away from zero: the magnitude's bits grow by one
    stepped = where(away, bits + 1, bits - 1).astype(ui)
    tiny = ((b.bitcast(ui) & sign_bit) | 1).astype(ui)  # from +-0: the smallest subnormal with x2's sign
    out = where(a == 0, tiny, stepped).bitcast(a.dtype)
    out = where(a == b, b, out)
    return where(logical_or(isnan(a), isnan(b)), float("nan"), out)


def signbit(x: ArrayLike) -> Tensor:
    """Whether the sign bit is set (numpy.signbit): true for -0.0 and negative NaNs, x < 0 for integers."""
    x = _t(x)
    if x.dtype.is_bool or x.dtype.is_unsigned:
        return Tensor.full(x.shape, False)
    if x.dtype.is_int:
        return less(x, 0)
    return (x.bitcast(uint_of(x.dtype)) >> (x.dtype.bits - 1)) != 0


# the array API standard's spellings of numpy's names
acos, asin, atan, atan2 = arccos, arcsin, arctan, arctan2
acosh, asinh, atanh = arccosh, arcsinh, arctanh
pow = power  # noqa: A001 - the standard's name
bitwise_invert, bitwise_left_shift, bitwise_right_shift = invert, left_shift, right_shift
