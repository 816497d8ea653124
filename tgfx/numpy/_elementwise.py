"""Elementwise numpy functions: arithmetic, comparisons, logic and bitwise; the float math library (exp, log,
trigonometry, rounding, hypot, ...) is `_float_math.py`, built on these and re-exported at the end."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tgfx._promote import fast_operands
from tgfx.dtypes import dtypes, max_value, to_inexact, uint_of
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.tensor import (
    ArrayLike,
    Tensor,
    broadcast,
    cast_keeping_weak,
    fast_binary,
    lazy_node,
    promote,
    to_tensor,
    weak,
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
    if (out := fast_binary(Ops.POW, x, y, kinds="f")) is not None:   # (a float's pow: the node below)
        return out
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
    if (out := fast_binary(Ops.MAX, x, y)) is not None:
        return out
    a, b = promote(x, y, "maximum")
    if a.dtype.is_complex:
        from tgfx.numpy import _complex
        return _complex.maximum(a, b)
    return a._binary(Ops.MAX, b, name="maximum")


def minimum(x: ArrayLike, y: ArrayLike) -> Tensor:
    """The elementwise minimum; NaN wins for floats. Complex values compare as `less` orders them."""
    if (got := fast_operands(x, y, kinds="f")) is not None:   # (the nodes below for floats, without a Tensor each)
        xu, yu, d, w = got
        m = lazy_node(UOp(Ops.MAX, d, (UOp(Ops.NEG, d, (xu,)), UOp(Ops.NEG, d, (yu,)))))
        out = Tensor(UOp(Ops.NEG, d, (m,)))
        return weak(out) if w else out
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


def _int_binary(op: Ops, a: Tensor, b: Tensor, name: str) -> Tensor:
    """The bitwise op `op` of the promoted operands a and b of numpy's `name`, which takes integers and bools only."""
    _check_int(name, a)
    return a._binary(op, b, name=name)


def bitwise_and(x: ArrayLike, y: ArrayLike) -> Tensor:
    return _int_binary(Ops.AND, *promote(x, y, "bitwise_and"), "bitwise_and")


def bitwise_or(x: ArrayLike, y: ArrayLike) -> Tensor:
    return _int_binary(Ops.OR, *promote(x, y, "bitwise_or"), "bitwise_or")


def bitwise_xor(x: ArrayLike, y: ArrayLike) -> Tensor:
    return _int_binary(Ops.XOR, *promote(x, y, "bitwise_xor"), "bitwise_xor")


def invert(x: ArrayLike) -> Tensor:
    x = _t(x)
    _check_int("invert", x)
    if x.dtype.is_bool:
        return logical_not(x)
    ones = -1 if not x.dtype.is_unsigned else (1 << x.dtype.bits) - 1
    if (out := fast_binary(Ops.XOR, x, ones, kinds="iu")) is not None:
        return out
    return x._binary(Ops.XOR, ones, name="invert")


bitwise_not = invert


def left_shift(x: ArrayLike, y: ArrayLike) -> Tensor:
    return _int_binary(Ops.SHL, *_promote_numeric(x, y, "left_shift"), "left_shift")


def right_shift(x: ArrayLike, y: ArrayLike) -> Tensor:
    return _int_binary(Ops.SHR, *_promote_numeric(x, y, "right_shift"), "right_shift")


# the float math library, in a module of its own (built on the functions above; `_float_divmod` calls its floor)
from tgfx.numpy._float_math import _in_float32 as _in_float32  # noqa: E402
from tgfx.numpy._float_math import _real_or_complex as _real_or_complex  # noqa: E402
from tgfx.numpy._float_math import arccos as arccos  # noqa: E402
from tgfx.numpy._float_math import arccosh as arccosh  # noqa: E402
from tgfx.numpy._float_math import arcsin as arcsin  # noqa: E402
from tgfx.numpy._float_math import arcsinh as arcsinh  # noqa: E402
from tgfx.numpy._float_math import arctan as arctan  # noqa: E402
from tgfx.numpy._float_math import arctan2 as arctan2  # noqa: E402
from tgfx.numpy._float_math import arctanh as arctanh  # noqa: E402
from tgfx.numpy._float_math import around as around  # noqa: E402
from tgfx.numpy._float_math import ceil as ceil  # noqa: E402
from tgfx.numpy._float_math import cos as cos  # noqa: E402
from tgfx.numpy._float_math import cosh as cosh  # noqa: E402
from tgfx.numpy._float_math import exp as exp  # noqa: E402
from tgfx.numpy._float_math import exp2 as exp2  # noqa: E402
from tgfx.numpy._float_math import expm1 as expm1  # noqa: E402
from tgfx.numpy._float_math import floor as floor  # noqa: E402
from tgfx.numpy._float_math import hypot as hypot  # noqa: E402
from tgfx.numpy._float_math import log as log  # noqa: E402
from tgfx.numpy._float_math import log1p as log1p  # noqa: E402
from tgfx.numpy._float_math import log2 as log2  # noqa: E402
from tgfx.numpy._float_math import log10 as log10  # noqa: E402
from tgfx.numpy._float_math import logaddexp as logaddexp  # noqa: E402
from tgfx.numpy._float_math import logaddexp2 as logaddexp2  # noqa: E402
from tgfx.numpy._float_math import nextafter as nextafter  # noqa: E402
from tgfx.numpy._float_math import rint as rint  # noqa: E402
from tgfx.numpy._float_math import round as round  # noqa: E402, A004
from tgfx.numpy._float_math import signbit as signbit  # noqa: E402
from tgfx.numpy._float_math import sin as sin  # noqa: E402
from tgfx.numpy._float_math import sinh as sinh  # noqa: E402
from tgfx.numpy._float_math import sqrt as sqrt  # noqa: E402
from tgfx.numpy._float_math import tan as tan  # noqa: E402
from tgfx.numpy._float_math import tanh as tanh  # noqa: E402
from tgfx.numpy._float_math import trunc as trunc  # noqa: E402

# the array API standard's spellings of numpy's names
acos, asin, atan, atan2 = arccos, arcsin, arctan, arctan2
acosh, asinh, atanh = arccosh, arcsinh, arctanh
pow = power  # noqa: A001 - the standard's name
bitwise_invert, bitwise_left_shift, bitwise_right_shift = invert, left_shift, right_shift
