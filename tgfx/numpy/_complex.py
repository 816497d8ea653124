"""Complex numbers: `complex64` (and `complex128` in x64 mode, as float64), as JAX has them.

How they are built. A complex value is stored as numpy stores it, interleaved (re, im) pairs, so a complex64 buffer
of n elements is 2n float32s and `.numpy()` hands numpy that memory as complex64. Above the schedule a complex value
is an ordinary node of a complex dtype: the holomorphic ops (`ADD MUL FDIV NEG RECIP EXP LOG SQRT SIN COS TANH`,
`WHERE`, `CAST`, sums and the movement ops) are the usual UOps with a complex dtype, so grad, vmap and jit treat them
as any other op, and their gradient rules are the real ones (with JAX's convention below, a holomorphic op's rule
has no conjugate in it). Everything else (`real imag conj abs angle`, `lax.complex`) is built here from two views:
`AS_PAIRS` (a complex value as float pairs, a last axis of 2) and `AS_COMPLEX` (pairs as a complex value). Before
scheduling, `tgfx/lowering/complex.py` writes each complex op as float ops on pairs and the schedule reads and writes
a complex buffer as a float buffer of twice its size: kernels, rangeify and the renderer stay real.

Gradients follow JAX: the cotangent of a complex value z = x + iy is df/dx - i df/dy, so `grad` of a real f of z is
the conjugate of the pair of partial derivatives, and a holomorphic op's vjp is `ct * f'(z)`. The conjugate is in
the gradient rules of the two views (`tgfx/transforms/grad.py`).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from tgfx.dtypes import DType, dtypes, to_complex, to_inexact
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.tensor import ArrayLike, Tensor, broadcast, keep_weak, to_tensor


def pairs(x: Tensor) -> Tensor:
    """A complex Tensor as float (re, im) pairs: shape `x.shape + (2,)`."""
    return Tensor(UOp(Ops.AS_PAIRS, x.dtype.real, (x.uop,)))


def from_pairs(p: Tensor) -> Tensor:
    """Float pairs (a last axis of 2) as the complex Tensor they are."""
    if p.dtype not in (dtypes.float32, dtypes.float64) or p.shape[-1:] != (2,):
        raise TypeError(f"complex pairs must be float32 or float64 with a last axis of 2, got {p.dtype.name}"
                        f"{list(p.shape)}")
    return Tensor(UOp(Ops.AS_COMPLEX, to_complex(p.dtype), (p.uop,)))


def _part(p: Tensor, i: int) -> Tensor:
    """Entry i of the pairs' last axis, cut statically: an eager `p[..., i]` is a dynamic slice (its start a kernel
    argument), which the lowering cannot fold into the part a pair was packed from, so a chain of complex steps
    nested its packs and lowered in exponential time (JAX's cookbook descends on z = 3 + 4j for 100 eager steps: no
    step 6 in 110 s)."""
    return p.shrink([*((0, n) for n in p.shape[:-1]), (i, i + 1)]).reshape(p.shape[:-1])


def from_parts(re: Tensor, im: Tensor) -> Tensor:
    """The complex Tensor re + i im of two float Tensors of one shape and dtype: their pairs built in the graph (no
    stored stack), so the lowering reads the parts back without a copy (`tgfx/lowering/complex.py`)."""
    from tgfx.lowering.complex import pack
    return Tensor(UOp(Ops.AS_COMPLEX, to_complex(re.dtype), (pack(re.uop, im.uop),)))


def make_complex(re: ArrayLike, im: ArrayLike) -> Tensor:
    """re + i im, both real (`lax.complex`): the complex type of their float promotion."""
    from tgfx.tensor import promote
    a, b = promote(re, im, "complex")
    if a.dtype.is_complex:
        raise TypeError(f"complex: the parts must be real, got {a.dtype.name}")
    d = to_inexact(a.dtype)
    if d not in (dtypes.float32, dtypes.float64):
        d = dtypes.float32
    a, b = broadcast(a.cast(d), b.cast(d), name="complex")
    return from_parts(a, b)


def real(x: Tensor) -> Tensor:
    return _part(pairs(x), 0) if x.dtype.is_complex else x


def _full_like(x: Tensor, value: bool | int, dtype: DType) -> Tensor:
    """A constant of x's shape on x's device (a result of x's, as JAX's `full_like`; not the default device's)."""
    return Tensor.full(x.shape, value, dtype, device=x.uop.device if isinstance(x.uop.device, str) else None)


def imag(x: Tensor) -> Tensor:
    return _part(pairs(x), 1) if x.dtype.is_complex else _full_like(x, 0, x.dtype)


def conj(x: Tensor) -> Tensor:
    if not x.dtype.is_complex:
        return x
    p = pairs(x)
    return from_parts(_part(p, 0), -_part(p, 1))


# ---- order: JAX's lexicographic one, by the real parts, then (where those are equal) the imaginary parts ----
def less(a: Tensor, b: Tensor) -> Tensor:
    """a < b for complex a and b, as `jnp.less` orders them: re(a) < re(b), or equal real parts and im(a) < im(b). A
    NaN part compares false, as a float's does."""
    ra, rb = real(a), real(b)
    return (ra == rb).where(imag(a) < imag(b), ra < rb)


def maximum(a: Tensor, b: Tensor) -> Tensor:
    """The larger of complex a and b in `less`'s order, as `jnp.maximum`: b unless a is greater (so b where a
    comparison with a NaN is false: NaN does not win, as it does for floats)."""
    return less(b, a).where(a, b)


def minimum(a: Tensor, b: Tensor) -> Tensor:
    """The smaller of complex a and b in `less`'s order, as `jnp.minimum` (b unless a is less)."""
    return less(a, b).where(a, b)


def absolute(x: Tensor) -> Tensor:
    """|x| in x's real type, as numpy computes it (scaled so that squares of large parts do not overflow, rounded as
    numpy's: `tgfx.lowering.complex.cabs`)."""
    from tgfx.lowering.complex import cabs
    p = pairs(x)
    return Tensor(cabs((_part(p, 0).uop, _part(p, 1).uop)))


def angle(x: ArrayLike, deg: bool = False) -> Tensor:
    """The argument of x (atan2(imag, real)), in radians or with `deg` in degrees; real x gives 0 or pi.

    As jnp.angle, integers and bools, and a 0-d real float (numpy's angle of a scalar is float64), give the default
    float type (float64 in x64 mode); other floats keep theirs, complex values give their parts' type."""
    from tgfx.numpy._elementwise import arctan2
    x = to_tensor(x)
    if not x.dtype.is_complex and (not x.dtype.is_float or x.ndim == 0):
        x = x.astype(dtypes.default_float)
    out = arctan2(imag(x), real(x))
    return keep_weak(out * (180 / math.pi) if deg else out, x)   # (a weak complex x: as JAX's, a weak angle)


def iscomplexobj(x: Any) -> bool:
    """Whether x has a complex dtype (its values are not looked at), as numpy.iscomplexobj."""
    d = getattr(x, "dtype", None)
    if isinstance(d, DType):
        return d.is_complex
    return np.iscomplexobj(x)


def isrealobj(x: Any) -> bool:
    return not iscomplexobj(x)


def iscomplex(x: ArrayLike) -> Tensor:
    """Elementwise: a nonzero imaginary part."""
    x = to_tensor(x)
    return imag(x) != 0 if x.dtype.is_complex else _full_like(x, False, dtypes.bool)


def isreal(x: ArrayLike) -> Tensor:
    x = to_tensor(x)
    return imag(x) == 0 if x.dtype.is_complex else _full_like(x, True, dtypes.bool)


def to_real_cast(x: Tensor, d: DType) -> Tensor:
    """A complex -> real astype: the real part, with numpy's ComplexWarning (as jnp's astype)."""
    warnings.warn("Casting complex values to real discards the imaginary part", np.exceptions.ComplexWarning,
                  stacklevel=3)
    return real(x).cast(d) if not d.is_bool else x != 0


# ---- the math library on complex values ----
_DIRECT = {"exp": Ops.EXP, "log": Ops.LOG, "sqrt": Ops.SQRT, "sin": Ops.SIN, "cos": Ops.COS, "tanh": Ops.TANH}


def _op(x: Tensor, op: Ops) -> Tensor:
    return Tensor(UOp(op, x.dtype, (x.uop,)))


# ---- the inverse functions: principal branches, with C99's special values at infinities (Annex G) ----
def _times_i(z: Tensor, sign: float = 1.0) -> Tensor:
    """sign * i * z, part by part (no complex product: its inf * 0 terms would be NaN)."""
    return from_parts(-imag(z) * sign, real(z) * sign)


def _scale(z: Tensor, s: float) -> Tensor:
    """z times a real s part by part, as C99 multiplies a complex by a real: (inf + 0j) * 0.5 is inf + 0j (the
    complex product `z * s`, XLA's and numpy's, has inf * 0 = NaN terms). For the functions below, whose special
    values are C99's."""
    return from_parts(real(z) * s, imag(z) * s)


def _shift(z: Tensor, r: float) -> Tensor:
    """z plus a real r, its imaginary part kept as it is (C99's complex plus real): a -0.0 stays -0.0, the side of a
    branch cut (`z + r` adds r's +0.0 imaginary part: -0 + 0 is +0)."""
    return from_parts(real(z) + r, imag(z))


def _log1p(w: Tensor) -> Tensor:
    """log(1 + w) accurate for small w: log|1 + w| = log1p(2x + x^2 + y^2) / 2 and arg(1 + w) = atan2(y, 1 + x),
    with no 1 + w formed (its rounding is the whole answer near 0). For |w| up to 1/sqrt(eps) (no overflow)."""
    from tgfx.numpy._elementwise import arctan2, log, log1p, where
    x, y = real(w), imag(w)
    # near 0, log1p of |1 + w|^2 - 1; elsewhere |1 + w|^2 itself (1 + x is exact near x = -1, where 2x + x^2
    # would cancel)
    small = x * x + y * y < 0.25
    re = where(small, log1p(x * (x + 2) + y * y), log((x + 1) * (x + 1) + y * y)) * 0.5
    return from_parts(re, arctan2(y, x + 1))


def _asinh(z: Tensor) -> Tensor:
    """asinh(z) = s f(s z), s the sign of re(z) (asinh is odd: f then never sums opposite signs), f(v) =
    log(v + sqrt(v^2 + 1)), or log(2v) past |v| = 1/sqrt(eps), where the two agree to the dtype's precision and
    v^2 would overflow (so asinh(inf + inf j) = inf + pi/4 j, as C99's)."""
    from tgfx.numpy._elementwise import isnan, signbit, where
    eps = float(np.finfo(real(z).dtype.np).eps)
    neg = signbit(real(z))          # -0.0 too: asinh(-0 + 2j) is -asinh(0 - 2j), C99's value on the cut
    v = where(neg, -z, z)
    big = absolute(v) > 1 / math.sqrt(eps)
    root = _op(_shift(v * v, 1), Ops.SQRT)
    near = _log1p(v + v * v / _shift(root, 1))     # log(v + root), and root - 1 = v^2 / (root + 1) without cancelling
    f = where(big, _shift(_op(v, Ops.LOG), math.log(2)), near)
    f = where(isnan(real(v)) & (imag(v) == 0), v, f)     # asinh(NaN + 0j) is NaN + 0j (C99)
    return where(neg, -f, f)


def _acosh(z: Tensor) -> Tensor:
    """acosh(z) = log(z + sqrt(z + 1) sqrt(z - 1)) (the product of two roots, not sqrt(z^2 - 1): the principal
    branch), log(2z) past |z| = 1/sqrt(eps); acosh(+-0 + NaN j) is NaN + pi/2 j (C99)."""
    from tgfx.numpy._elementwise import isnan, where
    eps = float(np.finfo(real(z).dtype.np).eps)
    big = absolute(z) > 1 / math.sqrt(eps)
    near = _op(z + _op(_shift(z, 1), Ops.SQRT) * _op(_shift(z, -1), Ops.SQRT), Ops.LOG)
    out = where(big, _op(_scale(z, 2.0), Ops.LOG), near)
    nan = Tensor.full(z.shape, math.nan, real(z).dtype)
    half_pi = Tensor.full(z.shape, math.pi / 2, real(z).dtype)
    return where((real(z) == 0) & isnan(imag(z)), from_parts(nan, half_pi), out)


def _atanh(z: Tensor) -> Tensor:
    """atanh(z) = s f(s z) with s the sign of re(z) (atanh is odd; a real part's -0.0 stays), f(z) = (log1p(z) -
    log1p(-z)) / 2; past |z| = 1/sqrt(eps) it is 1/z + i pi/2 with im(z)'s sign to the dtype's precision (the
    difference of logs would be inf - inf)."""
    from tgfx.numpy._elementwise import signbit, where
    neg = signbit(real(z))
    f = _atanh_odd(where(neg, -z, z))
    return where(neg, -f, f)


def _atanh_odd(z: Tensor) -> Tensor:
    from tgfx.numpy._elementwise import copysign, isinf, isnan, where
    eps = float(np.finfo(real(z).dtype.np).eps)
    x, y, r = real(z), imag(z), absolute(z)
    big = r > 1 / math.sqrt(eps)
    zero = Tensor.full(x.shape, 0.0, x.dtype)
    inv_re = where(isinf(r), copysign(zero, x), (x / r) / r)        # 1/z, 0 with x's sign at infinity
    inv_im = where(isinf(r), zero, -(y / r) / r)
    far = from_parts(inv_re, copysign(Tensor.full(y.shape, math.pi / 2, y.dtype), y) + inv_im)
    near = _scale(_log1p(z) - _log1p(-z), 0.5)
    # a NaN imaginary part: atanh(0 + NaN j) is 0 + NaN j and atanh(inf + NaN j) is 0 + NaN j (C99), NaN otherwise
    nan = Tensor.full(x.shape, math.nan, x.dtype)
    nan_im = from_parts(where((x == 0) | isinf(x), zero, nan), nan)
    return where(isnan(y), nan_im, where(big, far, near))


def _expm1(z: Tensor) -> Tensor:
    """exp(z) - 1; near 0 from its parts, expm1(x) cos(y) - 2 sin(y/2)^2 + i exp(x) sin(y), which keep their digits
    where exp(z) - 1 cancels (exp(z) - 1 itself elsewhere: its special values are C99's)."""
    from tgfx.numpy._elementwise import cos, exp, expm1, sin, where
    x, y = real(z), imag(z)
    s = sin(y * 0.5)
    near = from_parts(expm1(x) * cos(y) - 2 * s * s + 0.0, exp(x) * sin(y))   # + 0.0: expm1(-0 + 0j) is +0 + 0j
    return where(absolute(z) < 0.5, near, _shift(_op(z, Ops.EXP), -1))


def unary(name: str, x: Tensor) -> Tensor:
    """numpy's `name` of a complex Tensor: the holomorphic ops the lowering writes on pairs, the rest from them."""
    if name in _DIRECT:
        return _op(x, _DIRECT[name])
    composed = {
        "exp2": lambda: _op(_scale(x, math.log(2)), Ops.EXP),
        "expm1": lambda: _expm1(x),
        "log2": lambda: _scale(_op(x, Ops.LOG), 1 / math.log(2)),
        "log10": lambda: _scale(_op(x, Ops.LOG), 1 / math.log(10)),
        "log1p": lambda: _op(_shift(x, 1), Ops.LOG),
        "tan": lambda: _times_i(_op(_times_i(x), Ops.TANH), -1.0),       # -i tanh(iz), as C99 defines it
        "sinh": lambda: _times_i(_op(_times_i(x), Ops.SIN), -1.0),     # -i sin(iz): the lowering's C99 sinh
        "cosh": lambda: _op(_times_i(x), Ops.COS),
        "arcsinh": lambda: _asinh(x),
        "arccosh": lambda: _acosh(x),
        "arctanh": lambda: _atanh(x),
        # asin(z) = -i asinh(iz), acos(z) = pi/2 - asin(z) (its imaginary part negated, keeping a zero's sign),
        # atan(z) = -i atanh(iz)
        "arcsin": lambda: _times_i(_asinh(_times_i(x)), -1.0),
        "arccos": lambda: (lambda a: from_parts(math.pi / 2 - real(a), -imag(a)))(_times_i(_asinh(_times_i(x)), -1.0)),
        "arctan": lambda: _times_i(_atanh(_times_i(x)), -1.0),
    }
    if name not in composed:
        raise TypeError(f"{name} is not defined for complex Tensors in tgfx ({x.dtype.name}{list(x.shape)}); "
                        f"compute it from real(x) and imag(x)")
    return composed[name]()


def power(a: Tensor, b: Tensor, y: Any) -> Tensor:
    """a ** b for a complex result: a small integer exponent by repeated products (exact for Gaussian integers, as
    JAX's integer_pow), else exp(b log a), with JAX's values at a = 0 and b = 0."""
    if isinstance(y, (int, np.integer)) and not isinstance(y, bool) and abs(int(y)) <= 64:
        n = abs(int(y))
        out, base = Tensor.full(a.shape, 1, a.dtype), a
        while n:
            if n & 1:
                out = out * base
            base, n = base * base, n >> 1
        return out if int(y) >= 0 else 1 / out
    a, b = broadcast(a, b, name="power")
    out = _op(b * _op(a, Ops.LOG), Ops.EXP)
    one, zero = Tensor.full(out.shape, 1, out.dtype), Tensor.full(out.shape, 0, out.dtype)
    # log 0 is -inf: 0 ** b is 0 for a real b > 0 and NaN for any other b != 0 (0 ** -2, 0 ** 2j: JAX's); and
    # x ** 0 is 1 for every x (inf and NaN too, as C's cpow, numpy's and JAX's)
    nan = Tensor.full(out.shape, complex(math.nan, math.nan), out.dtype)
    at_zero = ((imag(b) == 0) & (real(b) > 0)).where(zero, nan)
    return (b == 0).where(one, (a == 0).where(at_zero, out))


def prod(x: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    """The product over `axes` of a complex Tensor: a tree of complex products (halves multiplied, log2 n steps),
    the reduce has no complex MUL."""
    from tgfx.numpy._movement import moveaxis
    nd = x.ndim
    rest = [a for a in range(nd) if a not in axes]
    y = moveaxis(x, list(axes), list(range(nd - len(axes), nd))) if axes else x
    kept = tuple(x.shape[a] for a in rest)
    n = math.prod(x.shape[a] for a in axes)
    y = y.reshape((*kept, n))
    if n == 0:
        y = Tensor.full((*kept, 1), 1, x.dtype)
    while y.shape[-1] > 1:
        m = y.shape[-1]
        if m % 2:
            y = y.pad_zeros([(0, 0)] * len(kept) + [(0, 1)])
            y = _pad_one(y, m)
        half = y.shape[-1] // 2
        y = y[..., :half] * y[..., half:]
    out = y.reshape(kept)
    if keepdims:
        out = out.reshape(tuple(1 if a in axes else s for a, s in enumerate(x.shape)))
    return out


def _pad_one(y: Tensor, m: int) -> Tensor:
    """y (padded with a zero at index m of its last axis) with a one there instead."""
    from tgfx.numpy._creation import arange
    last = arange(m + 1) == m
    return last.where(Tensor.full((), 1, y.dtype), y)
