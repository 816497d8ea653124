"""numpy's float math library, elementwise: exp, log, the trigonometric and hyperbolic functions (each a single op,
computed by the C math library or an LLVM intrinsic), logaddexp, rounding, and the array API's inverse hyperbolics,
hypot, nextafter and signbit (composed of those ops). Complex inputs go to tgfx/numpy/_complex.py.

Built on the arithmetic, comparisons and logic of `_elementwise.py`, which re-exports every name here.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tgfx.dtypes import dtypes, finfo, max_value, uint_of
from tgfx.function import function, with_derivative
from tgfx.ir.ops import Ops
from tgfx.numpy._elementwise import (
    _inexact,
    _promote_inexact,
    _t,
    absolute,
    copysign,
    equal,
    floor_divide,
    greater_equal,
    isinf,
    isnan,
    less,
    logical_and,
    logical_or,
    maximum,
    minimum,
    where,
)
from tgfx.tensor import ArrayLike, Tensor, broadcast, keep_weak, static_int, weak_typed


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
