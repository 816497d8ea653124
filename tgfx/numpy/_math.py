"""The rest of jax.numpy's elementwise math: float decomposition (frexp, ldexp, modf), cbrt, sinc, heaviside, fmax and
fmin, integer gcd and lcm, divmod, float_power, nan_to_num. Each is a composition of the elementwise functions, so it
fuses, traces under `jit`/`vmap` and differentiates as they do.
"""
from __future__ import annotations

import math

from tgfx.dtypes import DType, dtypes, finfo, fits, uint_of
from tgfx.function import with_derivative
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce as rd
from tgfx.tensor import ArrayLike, Tensor, broadcast, keep_weak, promote, to_tensor, weak_typed


def _const(v: ArrayLike, d: DType) -> Tensor:
    """A scalar or array argument (a fill value, a replacement) as dtype `d`, as JAX converts them."""
    return to_tensor(v).astype(d) if isinstance(v, Tensor) or not isinstance(v, (bool, int, float)) else \
        Tensor.full((), v, d)


# ---- elementwise math ----
def _real_inexact(x: ArrayLike, fn: str) -> Tensor:
    t = ew._inexact(x)
    if t.dtype.is_complex:
        raise TypeError(f"{fn} does not support complex dtypes, got {t.dtype.name}; apply it to real(x) and imag(x)")
    return t


@weak_typed
def fabs(x: ArrayLike, /) -> Tensor:
    """|x| in floats (integers become floats); complex input is a TypeError, as numpy's fabs."""
    return ew.absolute(_real_inexact(x, "fabs"))


@weak_typed
def cbrt(x: ArrayLike, /) -> Tensor:
    """The real cube root, negative for negative x.

    pow(|x|, 1/3) refined by one Newton step y - (y - |x|/y^2)/3, which makes exact cubes exact (cbrt(27.0) is 3,
    where pow gives 3.0000000000000004); the gradient is 1/(3 y^2) in closed form (inf at 0, as JAX's).
    """
    return _cbrt(_real_inexact(x, "cbrt"))


@ew._in_float32
def _cbrt_value(x: Tensor) -> Tensor:
    a = ew.absolute(x)
    ok = ew.logical_and(a > 0, a < float("inf"))
    sa = ew.where(ok, a, 1.0)  # zeros, infinities and NaNs stay out of the Newton step (and its gradient)
    y = ew.power(sa, Tensor.full((), 1 / 3, x.dtype))
    y = y - (y - sa / (y * y)) * (1 / 3)
    r = ew.where(ok, y, a)
    return ew.where(ew.signbit(x), -r, r)


_cbrt = with_derivative(_cbrt_value, lambda x, y: 1.0 / (3.0 * (y * y)))


def deg2rad(x: ArrayLike, /) -> Tensor:
    """Degrees to radians (x * pi / 180), in floats."""
    return ew._inexact(x) * (math.pi / 180)


def rad2deg(x: ArrayLike, /) -> Tensor:
    """Radians to degrees (x * 180 / pi), in floats."""
    return ew._inexact(x) * (180 / math.pi)


radians, degrees = deg2rad, rad2deg


def sinc(x: ArrayLike, /) -> Tensor:
    """The normalised sinc, sin(pi x) / (pi x), 1 at 0.

    Near 0 it is the Taylor polynomial 1 - y^2/6 + y^4/120 - y^6/5040 (y = pi x; exact there to rounding), so every
    derivative at 0 is right too (the first is 0, the second -pi^2/3), as JAX's custom rule makes them.
    """
    return ew._in_float32(_sinc)(ew._inexact(x))


def _sinc(x: Tensor) -> Tensor:
    y = x * math.pi
    small = ew.less(ew.absolute(y), 1e-2)
    s = ew.where(small, 1.0, y)
    y2 = y * y
    near = 1.0 - y2 * (1 / 6 - y2 * (1 / 120 - y2 * (1 / 5040)))
    return ew.where(small, near, ew.sin(s) / s)


def heaviside(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """The step function: 0 for x1 < 0, 1 for x1 > 0, x2 at x1 == 0 (NaN stays NaN), in floats."""
    a, b = ew._promote_inexact(x1, x2, "heaviside")
    return ew.where(a < 0, 0.0, ew.where(a > 0, 1.0, ew.where(ew.isnan(a), a, b)))


def fmax(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The elementwise maximum ignoring NaNs: the other value where one is NaN (NaN only if both are)."""
    return ew.where(ew.logical_or(ew.greater(x1, x2), ew.isnan(x2)), x1, x2)


def fmin(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The elementwise minimum ignoring NaNs: the other value where one is NaN (NaN only if both are)."""
    return ew.where(ew.logical_or(ew.less(x1, x2), ew.isnan(x2)), x1, x2)


def _int_operands(x1: ArrayLike, x2: ArrayLike, fn: str) -> tuple[Tensor, Tensor]:
    a, b = promote(x1, x2, fn)
    if not a.dtype.is_int:
        raise ValueError(f"{fn}: arguments must be integers, got {a.dtype.name} (the promotion of the two arguments)")
    a, b = broadcast(a, b, name=fn)
    return a, b


@weak_typed
def gcd(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The greatest common divisor of |x1| and |x2| (integers; gcd(0, 0) is 0), by Euclid's algorithm in a
    `while_loop` on the device that stops when every pair is done. The magnitudes are unsigned, as numpy's: the
    smallest integer's is its type's 2^(bits-1) (`gcd(int32 min, 6)` is 2; its absolute value is negative, and the
    loop never ended), and a gcd of 2^(bits-1) wraps to the smallest integer, as numpy's.

    >>> tnp.gcd(tnp.asarray([12, 18]), 8)        # [4, 2]
    """
    from tgfx.lax import while_loop
    a, b = _int_operands(x1, x2, "gcd")
    d = a.dtype
    if not d.is_unsigned:
        a, b = ew.absolute(a).astype(uint_of(d)), ew.absolute(b).astype(uint_of(d))

    def body(c: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        p, q = c
        nz = q != 0
        p, q = ew.where(nz, q, p), ew.where(nz, ew.fmod(p, ew.where(nz, q, 1)), 0)
        return ew.where(p < q, q, p), ew.where(p < q, p, q)
    return while_loop(lambda c: rd.any(c[1] != 0), body, (a, b))[0].astype(d)


@weak_typed
def lcm(x1: ArrayLike, x2: ArrayLike) -> Tensor:
    """The least common multiple of |x1| and |x2| (integers; 0 if either is 0)."""
    a, b = _int_operands(x1, x2, "lcm")
    a, b = ew.absolute(a), ew.absolute(b)
    d = gcd(a, b)
    return ew.where(d == 0, 0, a * ew.floor_divide(b, ew.where(d == 0, 1, d)))


# (mantissa bits, exponent bias) of the float types, for frexp and ldexp's exact powers of two
_FLOAT_LAYOUT = {"float16": (10, 15), "bfloat16": (7, 127), "float32": (23, 127), "float64": (52, 1023)}


def _pow2(k: Tensor, d: DType) -> Tensor:
    """2**k exactly, as dtype d, for integer k within d's normal exponents [1 - bias, bias]: built from its bits."""
    nmant, bias = _FLOAT_LAYOUT[d.name]
    return ((k + bias).cast(uint_of(d)) << nmant).bitcast(d)


def _frexp(x: Tensor) -> tuple[Tensor, Tensor]:
    nmant, bias = _FLOAT_LAYOUT[x.dtype.name]
    mask = (1 << (x.dtype.bits - 1 - nmant)) - 1
    sub = ew.absolute(x) < finfo(x.dtype).tiny  # subnormals: scaled to normal first, their exponent corrected
    xn = ew.where(sub, x * float(2 ** nmant), x)
    field = ((xn.bitcast(uint_of(x.dtype)) >> nmant) & mask).cast(dtypes.int32)
    e = field - (bias - 1) - ew.where(sub, nmant, 0).cast(dtypes.int32)
    special = ew.logical_or(ew.logical_not(ew.isfinite(x)), x == 0)
    e = ew.where(special, 0, e).cast(dtypes.int32)
    # m = x * 2**-e as two exact power-of-two factors (2**-e alone overflows for subnormal x): exact, and its
    # gradient is 2**-e, JAX's frexp rule
    h = ew.right_shift(-e, 1)
    m = x * _pow2(h, x.dtype) * _pow2(-e - h, x.dtype)
    return ew.where(special, x, m), e


def frexp(x: ArrayLike, /) -> tuple[Tensor, Tensor]:
    """(mantissa, exponent) with x = mantissa * 2**exponent, |mantissa| in [0.5, 1) (0, inf and NaN are their own
    mantissa, exponent 0); the exponent is int32, as JAX's.

    >>> tnp.frexp(tnp.asarray([8.0, 0.3]))       # ([0.5, 0.6], [4, -1])
    """
    return _frexp(_real_inexact(x, "frexp"))


def ldexp(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """x1 * 2**x2 for integer x2, rounded once (so it underflows to subnormals and overflows to inf as numpy's).

    >>> tnp.ldexp(1.5, tnp.asarray([3, -2]))     # [12.0, 0.375]
    """
    a, n = to_tensor(x1), to_tensor(x2)
    if a.dtype.is_complex or n.dtype.is_inexact:
        raise ValueError(f"ldexp: x1 must be real and x2 an integer, got dtypes ({a.dtype.name}, {n.dtype.name}); "
                         f"use x1 * 2.0 ** x2 for a float exponent")
    x = ew._inexact(a)
    nmant, bias = _FLOAT_LAYOUT[x.dtype.name]
    m, e = _frexp(x)
    big = 4 * (bias + nmant)  # past this any exponent gives 0 or inf: clamped first, so e + n cannot wrap
    # (in n's own type, where a bound it cannot hold would wrap: n is within that bound already)
    n = ew.clip(n, -big if fits(-big, n.dtype) else None, big if fits(big, n.dtype) else None).cast(dtypes.int32)
    t = ew.clip(e + n, 2 * (1 - bias), 2 * bias)
    h = ew.right_shift(t, 1)  # two factors within the normal exponents: m * 2**h is exact, the second rounds once
    out = m * _pow2(h, x.dtype) * _pow2(t - h, x.dtype)
    return ew.where(ew.logical_or(ew.isinf(x), x == 0), x, out)


def modf(x: ArrayLike, /, out: None = None) -> tuple[Tensor, Tensor]:
    """(fractional part, integral part), both with x's sign, in floats.

    As numpy (not JAX), +-inf gives (+-0.0, +-inf) rather than (NaN, +-inf), and a zero fraction keeps x's sign.
    """
    if out is not None:
        raise NotImplementedError("modf: the out argument is not supported; Tensors are immutable")
    t = _real_inexact(x, "modf")
    whole = ew.where(t >= 0, ew.floor(t), ew.ceil(t))
    # x's sign without copysign, which would turn the gradient at negative integers to -1: -(whole - x) is -0.0
    # there (JAX's x - whole is +0.0), and a zero x is its own fraction
    frac = ew.where(t == 0, t, ew.where(t < 0, -(whole - t), t - whole))
    return keep_weak((ew.where(ew.isinf(t), ew.copysign(0.0, t), frac), whole), t)


@weak_typed
def divmod(x1: ArrayLike, x2: ArrayLike, /) -> tuple[Tensor, Tensor]:  # noqa: A001 - numpy's name
    """(floor_divide(x1, x2), remainder(x1, x2)), computed together (bools divide as int32, as in JAX)."""
    a, b = ew._promote_numeric(x1, x2, "divmod")
    if a.dtype.is_complex:
        raise TypeError(f"divmod is not defined for complex Tensors ({a.dtype.name})")
    if a.dtype.is_int:
        return ew.floor_divide(a, b), ew.remainder(a, b)
    return ew._float_divmod(*broadcast(a, b, name="divmod"))


def float_power(x: ArrayLike, y: ArrayLike, /) -> Tensor:
    """x ** y in floats: integer operands are promoted first, so negative integer powers are fractions."""
    a, b = ew._promote_inexact(x, y, "float_power")
    return ew.power(a, b)


def _isposneginf(inf: float, name: str):  # noqa: ANN202
    def fn(x: ArrayLike, /, out: None = None) -> Tensor:
        if out is not None:
            raise NotImplementedError(f"{name}: the out argument is not supported; Tensors are immutable")
        t = to_tensor(x)
        if t.dtype.is_complex:
            raise ValueError(f"{name} is not well defined for complex types ({t.dtype.name}); test real(x) or imag(x)")
        return ew.equal(t, inf) if t.dtype.is_float else Tensor.full(t.shape, False)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Whether each element is {'+' if inf > 0 else '-'}inf (always False for integers)."
    return fn


isposinf, isneginf = _isposneginf(float("inf"), "isposinf"), _isposneginf(-float("inf"), "isneginf")


def nan_to_num(x: ArrayLike, copy: bool = True, nan: ArrayLike = 0.0, posinf: ArrayLike | None = None,
               neginf: ArrayLike | None = None) -> Tensor:
    """x with NaN replaced by `nan`, +inf by `posinf` and -inf by `neginf` (default: the dtype's largest and most
    negative finite values); each part of a complex x on its own; integers unchanged."""
    t = to_tensor(x)
    if not t.dtype.is_inexact:
        return t
    if t.dtype.is_complex:
        from tgfx.numpy import _complex
        return _complex.make_complex(*(nan_to_num(p(t), nan=nan, posinf=posinf, neginf=neginf)
                                       for p in (_complex.real, _complex.imag)))
    info = finfo(t.dtype)
    d = t.dtype
    out = ew.where(ew.isnan(t), _const(nan, d), t)
    out = ew.where(ew.equal(out, float("inf")), _const(info.max if posinf is None else posinf, d), out)
    return ew.where(ew.equal(out, -float("inf")), _const(info.min if neginf is None else neginf, d), out)
