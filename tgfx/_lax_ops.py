"""`jax.lax`'s elementwise operations: arithmetic, the float math library, bits and comparisons.

Unlike `tgfx.numpy`, these do not promote: every operand must have the same dtype, and a mismatch is a TypeError
naming both dtypes, as in JAX (`tnp`'s function of the same meaning promotes; `lax.convert_element_type` casts). A
Python scalar is an operand of its default type (int32, float32, bool, complex64; 64-bit in x64 mode), not a weak
one: `lax.sub(x_float16, 1.0)` is an error, as in JAX. Shapes: equal, or a scalar beside an array (size-1 axes
broadcast too, as JAX allows); arrays of different ranks are an error. Each operation checks the dtypes it is
defined for (`lax.exp` of an int32 is an error: JAX's `exp does not accept dtype int32`).

Integer division is C's: `div` truncates toward zero and `rem` takes the dividend's sign (XLA's semantics: x / 0 is
-1, all bits set, and x % 0 is x). Shifts by a negative amount or by at least the bit width give 0, or the sign for
`shift_right_arithmetic`, as XLA defines them.

Each function is a composition of `tgfx.numpy` / `tgfx.scipy.special` / `tgfx.nn` ops (or one op of the graph), so
they fuse with what surrounds them, trace under `jit` and `vmap`, and differentiate where JAX's do.

>>> tg.lax.div(tnp.asarray([-7, 7]), tnp.asarray([2, 2])).tolist()     # [-3, 3]: toward zero, not floor
>>> tg.lax.sub(tnp.ones(3), tnp.ones(3, "int32"))                       # TypeError: ... got float32, int32
"""
from __future__ import annotations

import enum
from typing import Any

from tgfx.dtypes import DType, dtypes, max_value, uint_of
from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.tensor import ArrayLike, Tensor, broadcast, static_int, to_tensor

# the dtype kinds an operation accepts, as DType.kind letters, and how an error message names them
BOOL, SIGNED, UNSIGNED, FLOAT, COMPLEX = "b", "i", "u", "f", "c"
INT = SIGNED + UNSIGNED
NUMBER = INT + FLOAT + COMPLEX
INEXACT = FLOAT + COMPLEX
ANY = BOOL + NUMBER
_KIND_NAMES = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "floating", "c": "complex"}


class RoundingMethod(enum.IntEnum):
    """How `round` breaks a tie between two integers (`jax.lax.RoundingMethod`)."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


# ---- operands ----
def operand(x: ArrayLike) -> Tensor:
    """x as a lax operand: a Tensor as it is, a Python scalar or host array as a Tensor of its default type."""
    return to_tensor(x)


def check_kind(name: str, x: Tensor, kinds: str, what: str = "") -> None:
    """Raise JAX's TypeError when x's dtype is not one of `kinds` (DType.kind letters)."""
    if x.dtype.kind not in kinds:
        accepted = ", ".join(_KIND_NAMES[k] for k in kinds)
        where = f" for {what}" if what else ""
        raise TypeError(f"lax.{name} does not accept dtype {x.dtype.name}{where}; it takes {accepted} types (cast "
                        f"with lax.convert_element_type)")


def same_dtypes(name: str, ts: list[Tensor], tip: str | None = None) -> DType:
    """The one dtype of `ts`; a TypeError naming every dtype when they differ (lax does not promote)."""
    d = ts[0].dtype
    if any(t.dtype != d for t in ts[1:]):
        got = ", ".join(t.dtype.name for t in ts)
        hint = f"tnp.{tip} is a similar function that promotes its operands; or " if tip else ""
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got {got} ({hint}cast one with "
                        f"lax.convert_element_type)")
    return d


def same_shapes(name: str, ts: list[Tensor]) -> list[Tensor]:
    """`ts` broadcast to one shape: scalars broadcast, and size-1 axes of operands of the same rank (as JAX's lax)."""
    ranks = {t.ndim for t in ts if t.ndim}
    if len(ranks) > 1:
        shapes = ", ".join(str(t.shape) for t in ts)
        raise TypeError(f"lax.{name}: arrays must have the same number of dimensions (or be scalars), got shapes "
                        f"{shapes}; lax does not broadcast by rank (use lax.broadcast_in_dim or lax.expand_dims)")
    return broadcast(*ts, name=f"lax.{name}")


def _unary(name: str, x: ArrayLike, kinds: str) -> Tensor:
    t = operand(x)
    check_kind(name, t, kinds)
    return t


def _binary(name: str, x: ArrayLike, y: ArrayLike, kinds: str, tip: str | None = None) -> tuple[Tensor, Tensor]:
    a, b = operand(x), operand(y)
    same_dtypes(name, [a, b], tip)
    check_kind(name, a, kinds)
    a, b = same_shapes(name, [a, b])
    return a, b


def _all_ones(d: DType) -> Tensor:
    return Tensor.full((), -1 if d.kind == SIGNED else max_value(d), d)


def _sint(d: DType) -> DType:
    return {1: dtypes.int8, 2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[d.itemsize]


# ---- arithmetic ----
def abs(x: ArrayLike) -> Tensor:  # noqa: A001 - JAX's name
    """|x|, as `jax.lax.abs` (signed integers, floats; a complex x gives its float magnitude)."""
    return ew.absolute(_unary("abs", x, SIGNED + INEXACT))


def neg(x: ArrayLike) -> Tensor:
    """-x, as `jax.lax.neg` (unsigned integers wrap around)."""
    return ew.negative(_unary("neg", x, NUMBER))


def sign(x: ArrayLike) -> Tensor:
    """-1, 0 or 1 by the sign of x (x / |x| for complex), as `jax.lax.sign`; a signed zero and NaN are returned as
    they are. Its gradient is zero."""
    t = _unary("sign", x, NUMBER)
    s = ew.sign(t)
    return ew.where(t == 0, t * 0, s) if t.dtype.is_float else s   # -0.0 stays -0.0, with a zero gradient


def sub(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x - y, as `jax.lax.sub`."""
    return ew.subtract(*_binary("sub", x, y, NUMBER, "subtract"))


def div(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x / y, as `jax.lax.div`: integers divide as C does, truncating toward zero (-7 / 2 is -3); x / 0 is -1 (all
    bits set), and INT_MIN / -1 is INT_MIN (XLA's semantics)."""
    a, b = _binary("div", x, y, NUMBER, "divide")
    if not a.dtype.is_int:
        return ew.true_divide(a, b)
    q = a._binary(Ops.IDIV, b, name="lax.div")   # truncating; 0 for a zero divisor
    return ew.where(b == 0, _all_ones(a.dtype), q)


def rem(x: ArrayLike, y: ArrayLike) -> Tensor:
    """The remainder of `div`, as `jax.lax.rem` (C's fmod): it has the sign of x; x % 0 is x for integers, NaN for
    floats."""
    a, b = _binary("rem", x, y, INT + FLOAT, "fmod")
    r = a._binary(Ops.MOD, b, name="lax.rem")
    return ew.where(b == 0, a, r) if a.dtype.is_int else r


def pow(x: ArrayLike, y: ArrayLike) -> Tensor:  # noqa: A001 - JAX's name
    """x ** y, as `jax.lax.pow`: x is floating or complex; y has x's dtype or is an integer array."""
    a, b = operand(x), operand(y)
    check_kind("pow", a, INEXACT, "x")
    if b.dtype.is_int:
        b = b.astype(a.dtype)   # an integral exponent: exact in pow, which handles a negative base for it
    same_dtypes("pow", [a, b], "power")
    return ew.power(*same_shapes("pow", [a, b]))


def integer_pow(x: ArrayLike, y: int) -> Tensor:
    """x ** y for a static Python int y, by repeated squaring, as `jax.lax.integer_pow`; a negative y is 1 / x**-y
    (an error for integer x)."""
    t = _unary("integer_pow", x, NUMBER)
    if static_int(y) is None:
        raise TypeError(f"lax.integer_pow: y must be a Python int, got {y!r}; for an array exponent use lax.pow")
    y = static_int(y)
    if y < 0 and t.dtype.is_int:
        raise TypeError(f"lax.integer_pow: integers cannot be raised to negative powers, got "
                        f"integer_pow({t.dtype.name}{list(t.shape)}, {y})")
    p = ew._int_pow_const(t, -y if y < 0 else y)
    return ew.true_divide(Tensor.full((), 1, t.dtype), p) if y < 0 else p


def square(x: ArrayLike) -> Tensor:
    """x * x, as `jax.lax.square`."""
    t = _unary("square", x, NUMBER)
    return ew.multiply(t, t)


def reciprocal(x: ArrayLike) -> Tensor:
    """1 / x, as `jax.lax.reciprocal` (floating and complex only)."""
    return ew.reciprocal(_unary("reciprocal", x, INEXACT))


def nextafter(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The next float after x1 toward x2, as `jax.lax.nextafter`."""
    return ew.nextafter(*_binary("nextafter", x1, x2, FLOAT, "nextafter"))


# ---- rounding ----
def floor(x: ArrayLike) -> Tensor:
    """Round toward -inf, as `jax.lax.floor` (floats only)."""
    return ew.floor(_unary("floor", x, FLOAT))


def ceil(x: ArrayLike) -> Tensor:
    """Round toward +inf, as `jax.lax.ceil` (floats only)."""
    return ew.ceil(_unary("ceil", x, FLOAT))


def round(x: ArrayLike, rounding_method: RoundingMethod | int = RoundingMethod.AWAY_FROM_ZERO) -> Tensor:  # noqa: A001
    """Round to the nearest integer, as `jax.lax.round`: ties away from zero (2.5 -> 3, -2.5 -> -3) by default, to
    even with `RoundingMethod.TO_NEAREST_EVEN` (numpy's). Floats only.

    >>> tg.lax.round(tnp.asarray([0.5, 1.5, 2.5])).tolist()                                  # [1., 2., 3.]
    >>> tg.lax.round(tnp.asarray([0.5, 1.5, 2.5]), tg.lax.RoundingMethod.TO_NEAREST_EVEN)    # [0., 2., 2.]
    """
    t = _unary("round", x, FLOAT)
    method = int(rounding_method)
    if method == RoundingMethod.TO_NEAREST_EVEN:
        return ew.rint(t)
    if method != RoundingMethod.AWAY_FROM_ZERO:
        raise ValueError(f"lax.round: rounding_method must be a lax.RoundingMethod, got {rounding_method!r}")
    # trunc, then a step away from zero when the dropped fraction is at least one half (x - trunc(x) is exact,
    # where trunc(x + 0.5) would round 0.49999997 + 0.5 up to 1 first); -0.4 stays -0.0, inf stays inf
    tr = ew.trunc(t)
    return ew.where(ew.absolute(t - tr) >= 0.5, tr + ew.sign(t), tr)


# ---- the float math library ----
def _inexact_fn(name: str, fn: Any, kinds: str = INEXACT):  # noqa: ANN202
    def f(x: ArrayLike) -> Tensor:
        return fn(_unary(name, x, kinds))
    f.__name__ = f.__qualname__ = name
    taken = "floats" if kinds == FLOAT else "floats and complex numbers"
    f.__doc__ = f"Elementwise {name}, as `jax.lax.{name}` ({taken}; integers are an error, not promoted)."
    return f


sqrt = _inexact_fn("sqrt", ew.sqrt)
exp = _inexact_fn("exp", ew.exp)
exp2 = _inexact_fn("exp2", ew.exp2)
expm1 = _inexact_fn("expm1", ew.expm1)
log = _inexact_fn("log", ew.log)
log1p = _inexact_fn("log1p", ew.log1p)
sin = _inexact_fn("sin", ew.sin)
cos = _inexact_fn("cos", ew.cos)
tan = _inexact_fn("tan", ew.tan)
asin = _inexact_fn("asin", ew.arcsin)
acos = _inexact_fn("acos", ew.arccos)
atan = _inexact_fn("atan", ew.arctan)
sinh = _inexact_fn("sinh", ew.sinh)
cosh = _inexact_fn("cosh", ew.cosh)
tanh = _inexact_fn("tanh", ew.tanh)
asinh = _inexact_fn("asinh", ew.arcsinh)
acosh = _inexact_fn("acosh", ew.arccosh)
atanh = _inexact_fn("atanh", ew.arctanh)


def rsqrt(x: ArrayLike) -> Tensor:
    """1 / sqrt(x), as `jax.lax.rsqrt` (floating and complex)."""
    return ew.reciprocal(ew.sqrt(_unary("rsqrt", x, INEXACT)))


def cbrt(x: ArrayLike) -> Tensor:
    """The real cube root, as `jax.lax.cbrt` (floats; cbrt(-8) is -2).

    |x| ** (1/3) with x's sign, then one Newton step, y - (y^3 - |x|) / (3 y^2), which makes exact cubes exact
    (pow's 27 ** (1/3) is 3.0000002 in float32). 0, -0.0, +-inf and NaN are returned as they are, with a zero
    gradient (JAX's is inf at 0).
    """
    t = _unary("cbrt", x, FLOAT)
    a = ew.absolute(t)
    special = ew.logical_or(a == 0, ew.logical_not(ew.isfinite(a)))
    safe = ew.where(special, 1.0, a)   # no 0 ** (1/3) or 1 / 0 on the masked side, so no NaN in the gradient
    y = ew.power(safe, 1.0 / 3.0)
    y = y - (y * y * y - safe) / (3.0 * y * y)
    from tgfx.transforms.grad import stop_gradient
    return ew.where(special, stop_gradient(t), ew.copysign(y, t))


def logistic(x: ArrayLike) -> Tensor:
    """1 / (1 + exp(-x)), as `jax.lax.logistic` (`tg.nn.sigmoid`'s stable form for floats)."""
    t = _unary("logistic", x, INEXACT)
    if t.dtype.is_complex:
        return ew.reciprocal(ew.add(ew.exp(ew.negative(t)), 1))
    from tgfx.nn._activations import sigmoid
    return sigmoid(t)


def atan2(x: ArrayLike, y: ArrayLike) -> Tensor:
    """The angle of the point (y, x), atan(x / y) in the right quadrant, as `jax.lax.atan2` (floats)."""
    return ew.arctan2(*_binary("atan2", x, y, FLOAT, "arctan2"))


def is_finite(x: ArrayLike) -> Tensor:
    """Whether x is neither infinite nor NaN, as `jax.lax.is_finite` (floats only; a bool array)."""
    return ew.isfinite(_unary("is_finite", x, FLOAT))


def _special(name: str, attr: str):  # noqa: ANN202
    def f(x: ArrayLike) -> Tensor:
        from tgfx.scipy import special  # (imported on use: tgfx.scipy imports tgfx.lax)
        return getattr(special, attr)(_unary(name, x, FLOAT))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name}, as `jax.lax.{name}` (floats only): `tg.scipy.special.{attr}`."
    return f


erf = _special("erf", "erf")
erfc = _special("erfc", "erfc")
erf_inv = _special("erf_inv", "erfinv")
lgamma = _special("lgamma", "gammaln")
digamma = _special("digamma", "digamma")


# ---- bits ----
def bitwise_and(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x & y, as `jax.lax.bitwise_and` (bool and integers)."""
    return ew.bitwise_and(*_binary("bitwise_and", x, y, BOOL + INT, "bitwise_and"))


def bitwise_or(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x | y, as `jax.lax.bitwise_or` (bool and integers)."""
    return ew.bitwise_or(*_binary("bitwise_or", x, y, BOOL + INT, "bitwise_or"))


def bitwise_xor(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x ^ y, as `jax.lax.bitwise_xor` (bool and integers)."""
    return ew.bitwise_xor(*_binary("bitwise_xor", x, y, BOOL + INT, "bitwise_xor"))


def bitwise_not(x: ArrayLike) -> Tensor:
    """~x, as `jax.lax.bitwise_not` (bool and integers)."""
    return ew.invert(_unary("bitwise_not", x, BOOL + INT))


def _shift(name: str, x: ArrayLike, y: ArrayLike) -> tuple[Tensor, Tensor, Tensor]:
    """Both operands, the amount made safe (0 where out of range) and where it is in range, [0, bits)."""
    a, b = _binary(name, x, y, INT, name)
    in_range = b.bitcast(uint_of(b.dtype)) < a.dtype.bits   # a negative amount is a huge unsigned one
    return a, ew.where(in_range, b, Tensor.full((), 0, b.dtype)), in_range


def shift_left(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x << y, as `jax.lax.shift_left`; 0 where y is negative or at least the bit width."""
    a, amount, ok = _shift("shift_left", x, y)
    return ew.where(ok, ew.left_shift(a, amount), Tensor.full((), 0, a.dtype))


def shift_right_logical(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x >> y filling with zeros, as `jax.lax.shift_right_logical` (a signed x is shifted as its unsigned bits);
    0 where y is negative or at least the bit width."""
    a, amount, ok = _shift("shift_right_logical", x, y)
    u = uint_of(a.dtype)
    out = ew.right_shift(a.bitcast(u), amount.bitcast(uint_of(amount.dtype))).bitcast(a.dtype)
    return ew.where(ok, out, Tensor.full((), 0, a.dtype))


def shift_right_arithmetic(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x >> y filling with the sign bit, as `jax.lax.shift_right_arithmetic` (an unsigned x is shifted as its
    signed bits: uint8 255 >> 1 is 255); all sign bits where y is negative or at least the bit width."""
    a, amount, ok = _shift("shift_right_arithmetic", x, y)
    s = _sint(a.dtype)
    signed = a.bitcast(s)
    amount = ew.where(ok, amount, Tensor.full((), a.dtype.bits - 1, amount.dtype))   # past the width: the sign
    return ew.right_shift(signed, amount.bitcast(s)).bitcast(a.dtype)


def _repeat_byte(byte: int, nbytes: int) -> int:
    return int.from_bytes(bytes([byte]) * nbytes, "little")


def population_count(x: ArrayLike) -> Tensor:
    """The number of set bits of each element, in x's dtype, as `jax.lax.population_count` (integers).

    The SWAR count: bit pairs, then nibbles, then bytes summed in parallel, then the bytes added up by one multiply.
    """
    t = _unary("population_count", x, INT)
    u, n = uint_of(t.dtype), t.dtype.itemsize
    v = t.bitcast(u)
    v = v - ((v >> 1) & _repeat_byte(0x55, n))
    v = (v & _repeat_byte(0x33, n)) + ((v >> 2) & _repeat_byte(0x33, n))
    v = (v + (v >> 4)) & _repeat_byte(0x0F, n)
    if n > 1:
        v = (v * _repeat_byte(0x01, n)) >> (8 * (n - 1))   # the top byte collects every byte's count
    return v.bitcast(t.dtype)


def clz(x: ArrayLike) -> Tensor:
    """The number of leading zero bits of each element, in x's dtype, as `jax.lax.clz` (integers; clz(0) is the
    bit width). A binary search: log2(bits) steps, each testing whether the top half of what is left is zero."""
    t = _unary("clz", x, INT)
    u, bits = uint_of(t.dtype), t.dtype.bits
    v = t.bitcast(u)
    n = Tensor.full(t.shape, 0, u)
    s = bits // 2
    while s:
        top_zero = (v >> (bits - s)) == 0
        n = ew.where(top_zero, n + s, n)
        v = ew.where(top_zero, v << s, v)
        s //= 2
    n = n + ((v >> (bits - 1)) == 0).astype(u)   # the last bit: 1 more only when x was 0
    return n.bitcast(t.dtype)


# ---- comparisons ----
def _compare(name: str, fn: Any, kinds: str):  # noqa: ANN202
    def f(x: ArrayLike, y: ArrayLike) -> Tensor:
        return fn(*_binary(name, x, y, kinds, fn.__name__))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {fn.__name__} as a bool array, as `jax.lax.{name}` (operands of one dtype)."
    return f


eq = _compare("eq", ew.equal, ANY)
ne = _compare("ne", ew.not_equal, ANY)
lt = _compare("lt", ew.less, BOOL + INT + FLOAT)
le = _compare("le", ew.less_equal, BOOL + INT + FLOAT)
gt = _compare("gt", ew.greater, BOOL + INT + FLOAT)
ge = _compare("ge", ew.greater_equal, BOOL + INT + FLOAT)
