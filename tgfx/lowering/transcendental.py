"""transcendental: float32 exp, exp2, expm1, tanh, log, log2, log1p, sin and cos as polynomial arithmetic, so LLVM can
vectorise them.

A call into the C math library is scalar: a kernel that calls `expf` or `tanhf` per element cannot use vector
instructions. These rewrites express the functions with ALU ops only (multiply-adds, rounding, integer bit tricks):
- exp/exp2: Cody-Waite range reduction `x = n*ln2 + r`, the Cephes degree-5 polynomial for e^r on |r| <= ln2/2,
  and 2^n built in the exponent bits (split in two factors so results near the overflow and denormal edges are
  exact). About 1 ulp.
- tanh: the odd/even rational approximation used by Eigen and XLA on the CPU (13th over 6th degree) on [-7.9, 7.9]
  (clamped there), exactly +-1 beyond 9.02 where float32 tanh rounds to it; `x` itself below 4e-4. A few ulp.
- log, log2, log1p: Cephes' logf (mantissa and exponent from the bits, a degree-9 polynomial); log1p with
  Goldberg's correction. About 1-2 ulp.
- expm1: exp and log through Kahan's correction, `(u - 1) * x / log(u)` for u = e^x. At most 3 ulp.
- sin, cos: x * 2/pi reduced mod 4 in float64 from exact products with 2/pi's bits (correct for every float32, up
  to 3.4e38), Eigen's minimax polynomials on [-pi/4, pi/4] in float32. At most 1.24 ulp measured (numpy's: 1.45).
float64 keeps the C library; so do the 16-bit types (they compute in float32 there anyway) but for sin and cos,
computed by the float32 rewrite.
"""
from __future__ import annotations

from collections.abc import Callable

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat
from tgfx.ir.uop import UOp

f32, f64, i32 = dtypes.float32, dtypes.float64, dtypes.int32


def _c(v: float) -> UOp:
    return UOp.const(f32, v)


def _poly(x: UOp, coeffs: list[float]) -> UOp:
    """Horner's scheme in FMAs (explicit: a value must not depend on which kernel computes it)."""
    out = _c(coeffs[0])
    for c in coeffs[1:]:
        out = UOp(Ops.MULACC, f32, (out, x, _c(c)))
    return out


def _pow2(n: UOp) -> UOp:
    """2**n for an integer-valued float n in [-126, 127], through the exponent bits. n + 1.5 * 2**23 holds n in its
    low mantissa bits (above them, 0x4B400000's, which the shift drops): four ops, where a float-to-int cast is
    seven (its clamps and NaN select, which JAX's conversion semantics need and an n known in range does not)."""
    bits = UOp(Ops.BITCAST, i32, (n + _c(12582912.0),)) + UOp.const(i32, 127)
    return UOp(Ops.BITCAST, f32, (bits.alu(Ops.SHL, UOp.const(i32, 23)),))


def _exp_reduced(x: UOp, n: UOp, r: UOp) -> UOp:
    """e^r * 2^n for |r| <= ln2/2, with the edges of float32 handled."""
    z = r * r
    p = _poly(r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
                  5.0000001201e-1])
    y = p * z + r + _c(1.0)
    half = UOp(Ops.TRUNC, f32, (n * _c(0.5),))  # 2^n = 2^half * 2^(n - half): each factor stays a normal float
    return y * _pow2(half) * _pow2(n - half)


def _clamp(x: UOp, lo: float, hi: float) -> UOp:
    return UOp(Ops.MAX, f32, (x, _c(lo))).alu(Ops.CMPLT, _c(hi)).where(UOp(Ops.MAX, f32, (x, _c(lo))), _c(hi))


def _edges(x: UOp, y: UOp, over: float, under: float) -> UOp:
    """inf above `over`, 0 below `under`, NaN stays NaN."""
    y = _c(over).alu(Ops.CMPLT, x).where(_c(float("inf")), y)
    y = x.alu(Ops.CMPLT, _c(under)).where(_c(0.0), y)
    return x.alu(Ops.CMPNE, x).where(x, y)


def exp_f32(x: UOp) -> UOp:
    xc = _clamp(x, -104.0, 89.0)
    n = UOp(Ops.RINT, f32, (xc * _c(1.44269504088896341),))
    r = xc - n * _c(0.693359375) - n * _c(-2.12194440e-4)
    return _edges(x, _exp_reduced(xc, n, r), 88.72283935546875, -103.972077083991796)


def exp2_f32(x: UOp) -> UOp:
    xc = _clamp(x, -150.0, 129.0)
    n = UOp(Ops.RINT, f32, (xc,))
    r = (xc - n) * _c(0.693147180559945309)
    return _edges(x, _exp_reduced(xc, n, r), 128.0, -150.0)


def tanh_f32(x: UOp) -> UOp:
    xc = _clamp(x, -7.90531110763549805, 7.90531110763549805)
    x2 = xc * xc
    p = _poly(x2, [-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                   1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03]) * xc
    q = _poly(x2, [1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03])
    ax = UOp(Ops.MAX, f32, (x, -x))
    out = ax.alu(Ops.CMPLT, _c(0.0004)).where(x, p.alu(Ops.FDIV, q))
    # beyond 9.02 tanh rounds to exactly +-1 in float32; the rational function at the clamp gives 1 - 2.4e-7, and a
    # gradient 1 - tanh^2 of 4.8e-7 instead of 0 there is large once multiplied by a large x (gelu's tail)
    out = _c(9.02).alu(Ops.CMPLT, ax).where(x.alu(Ops.CMPLT, _c(0.0)).where(_c(-1.0), _c(1.0)), out)
    return x.alu(Ops.CMPNE, x).where(x, out)


def log_f32(x: UOp) -> UOp:
    """Cephes' logf: x = m * 2^e with m in [sqrt(1/2), sqrt(2)) from the bits (denormals scaled up first), a
    degree-9 polynomial in m - 1, and e * ln2 added in two parts. About 1 ulp; log(0) = -inf, log(x < 0) = NaN."""
    tiny = x.alu(Ops.CMPLT, _c(1.17549435e-38))
    xs = tiny.where(x * _c(8388608.0), x)   # 2^23: a denormal becomes normal
    bits = UOp(Ops.BITCAST, i32, (xs,))
    e = (bits.alu(Ops.SHR, UOp.const(i32, 23)).alu(Ops.AND, UOp.const(i32, 0xFF)) - UOp.const(i32, 126)).cast(f32)
    e = tiny.where(e - _c(23.0), e)
    mantissa = bits.alu(Ops.AND, UOp.const(i32, 0x007FFFFF)).alu(Ops.OR, UOp.const(i32, 0x3F000000))
    m = UOp(Ops.BITCAST, f32, (mantissa,))
    small = m.alu(Ops.CMPLT, _c(0.707106781186547524))   # m in [0.5, 1): fold [0.5, sqrt(1/2)) up by one octave
    e = small.where(e - _c(1.0), e)
    f = small.where(m + m, m) - _c(1.0)
    z = f * f
    p = _poly(f, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                  -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1])
    y = f * z * p + e * _c(-2.12194440e-4) - z * _c(0.5)
    out = f + y + e * _c(0.693359375)
    out = x.alu(Ops.CMPEQ, _c(float("inf"))).where(x, out)
    out = x.alu(Ops.CMPEQ, _c(0.0)).where(_c(float("-inf")), out)
    return x.alu(Ops.CMPLT, _c(0.0)).where(_c(float("nan")), x.alu(Ops.CMPNE, x).where(x, out))


def log2_f32(x: UOp) -> UOp:
    return log_f32(x) * _c(1.44269504088896341)


def log1p_f32(x: UOp) -> UOp:
    """log(1 + x) as log(u) * x / (u - 1) for u = 1 + x (Goldberg's correction of the rounding in u); x where u
    rounds to 1, and x itself at +inf."""
    u = x + _c(1.0)
    d = u - _c(1.0)
    out = u.alu(Ops.CMPEQ, _c(1.0)).where(x, log_f32(u) * x.alu(Ops.FDIV, d))
    out = x.alu(Ops.CMPEQ, _c(float("inf"))).where(x, out)
    return x.alu(Ops.CMPEQ, _c(-1.0)).where(_c(float("-inf")), out)


def expm1_f32(x: UOp) -> UOp:
    """e^x - 1 as (u - 1) * x / log(u) for u = e^x (Kahan's correction of the rounding in u, log1p's mirror): x where
    u rounds to 1, -1 where u - 1 does, +inf past exp's overflow. A few ulp; ELU's and SELU's expm1 was a C library
    call per element (a graph attention layer's ELU, 16,000 elements: 210 us, scalar)."""
    u = exp_f32(x)
    d = u - _c(1.0)
    out = u.alu(Ops.CMPEQ, _c(1.0)).where(x, d * x.alu(Ops.FDIV, log_f32(u)))
    out = d.alu(Ops.CMPEQ, _c(-1.0)).where(_c(-1.0), out)
    out = u.alu(Ops.CMPEQ, _c(float("inf"))).where(u, out)
    return x.alu(Ops.CMPNE, x).where(x, out)


# 2/pi in pieces of 29 bits: a float32's 24-bit significand times a piece is exact in float64's 53. Seven pieces (203
# bits) leave x * 2/pi's remainder below 2^-46 * 2^-128 * |x| < 2^-46 for every finite float32.
_TWO_OVER_PI = [float.fromhex(h) for h in ("0x1.45f306dp-1", "0x1.9391054p-30", "0x1.4fe13abp-59", "0x1.d1f534dp-88",
                                             "0x1.b81b6c5p-117", "0x1.5993c4p-148", "0x1.c820ff2p-175")]


def _d(v: float) -> UOp:
    return UOp.const(f64, v)


def _round_off(v: UOp) -> tuple[UOp, UOp]:
    """v as its nearest integer and the rest, both exact: the rest is in [-0.5, 0.5]."""
    n = UOp(Ops.RINT, f64, (v,))
    return n, v - n


def _quadrant(x: UOp) -> tuple[UOp, UOp]:
    """x = (k + f) * pi/2 with k an integer (as float32, any of its residues mod 4) and f in [-0.5, 0.5] (float64).

    x * 2/pi is summed from its exact products with the pieces of 2/pi (Payne and Hanek's reduction without its table:
    every lane multiplies by every piece, a piece too coarse to matter for a small x, or too fine for a large one,
    costing a multiply). Each product is taken mod 4 (a quadrant repeats every 4) and split into an integer and a
    fraction in [-0.5, 0.5], and only the fractions are summed: summed whole, values up to 8 lose 2^-50, 2^-20 of the
    remainder of the float32 nearest a multiple of pi/2 (2^-29.9, at 16367173 * 2^72). The two finest products are
    below 2^-17 and need neither step."""
    xd = x.cast(f64)
    prods = [xd * _d(t) for t in _TWO_OVER_PI]
    k, f = _d(0.0), prods[5] + prods[6]
    for p in prods[:5]:
        n, g = _round_off(UOp(Ops.MULACC, f64, (UOp(Ops.RINT, f64, (p * _d(0.25),)), _d(-4.0), p)))   # p mod 4
        k, f = k + n, f + g
    n, f = _round_off(f)
    k = k + n
    return k.cast(f32), f


def _sincos(x: UOp, cos: bool) -> UOp:
    """sin(x), or cos(x) = sin(x + pi/2): the quadrant k of x picks sin or cos of the rest r (|r| <= pi/4) and the sign,
    by selects, so one vector code serves every lane. The polynomials are Eigen's psincos_float (minimax on
    [-pi/4, pi/4], about 1 ulp)."""
    k, f = _quadrant(x)
    rd = f * _d(1.5707963267948966)
    r = rd.cast(f32)
    lo = (rd - r.cast(f64)).cast(f32)   # what rounding r to float32 left: up to half an ulp more error otherwise
    # k + 1.5 * 2^23 holds k in its low mantissa bits, two's complement for a negative k (see `_pow2`)
    q = UOp(Ops.BITCAST, i32, (k + _c(12582912.0),))
    if cos:
        q = q + UOp.const(i32, 1)
    z = r * r
    # cos(r + lo) = 1 - r^2/2 + ... - r*lo; sin(r + lo) = r + r^3 * p + lo (the corrections are under an ulp: they
    # go in before the last rounding)
    c = UOp(Ops.MULACC, f32, (_poly(z, [2.4372266125283204019069671630859375e-05, -0.00138865201734006404876708984375,
                                         0.041666619479656219482421875, -0.5]), z, -(r * lo))) + _c(1.0)
    s = UOp(Ops.MULACC, f32, (_poly(z, [-1.959234114083702898469196984621021329076029360294342041015625e-4,
                                         8.3326873655616851693794799871284340042620897293090820312500000e-3,
                                         -0.1666666203982298255503735617821803316473960876464843750000000000]) * z,
                               r, lo)) + r
    odd = q.alu(Ops.AND, UOp.const(i32, 1)).alu(Ops.CMPNE, UOp.const(i32, 0))
    y = UOp(Ops.BITCAST, i32, (odd.where(c, s),))
    # quadrants 2 and 3 negate: bit 1 of q moved to the sign bit
    sign = q.alu(Ops.AND, UOp.const(i32, 2)).alu(Ops.SHL, UOp.const(i32, 30))
    out = UOp(Ops.BITCAST, f32, (y.alu(Ops.XOR, sign),))
    if cos:
        return out
    # sin(x) rounds to x below 2^-12 (x^3 / 6 is under half its ulp); this keeps -0.0 and denormals as they are
    return UOp(Ops.MAX, f32, (x, -x)).alu(Ops.CMPLT, _c(2.0 ** -12)).where(x, out)


def sin_f32(x: UOp) -> UOp:
    return _sincos(x, cos=False)


def cos_f32(x: UOp) -> UOp:
    return _sincos(x, cos=True)


def _in_float32(fn: Callable[[UOp], UOp]) -> Callable[[UOp], UOp]:
    """A float32 rewrite for a 16-bit float: computed in float32 and rounded once more (the C library's was too)."""
    return lambda x: fn(x.cast(f32)).cast(x.dtype)


pm_transcendental = PatternMatcher([
    (UPat(Ops.EXP, dtype=f32, src=(UPat.var("x"),)), exp_f32),
    (UPat(Ops.EXP2, dtype=f32, src=(UPat.var("x"),)), exp2_f32),
    (UPat(Ops.TANH, dtype=f32, src=(UPat.var("x"),)), tanh_f32),
    (UPat(Ops.LOG, dtype=f32, src=(UPat.var("x"),)), log_f32),
    (UPat(Ops.LOG2, dtype=f32, src=(UPat.var("x"),)), log2_f32),
    (UPat(Ops.LOG1P, dtype=f32, src=(UPat.var("x"),)), log1p_f32),
    (UPat(Ops.EXPM1, dtype=f32, src=(UPat.var("x"),)), expm1_f32),
    (UPat(Ops.SIN, dtype=f32, src=(UPat.var("x"),)), sin_f32),
    (UPat(Ops.COS, dtype=f32, src=(UPat.var("x"),)), cos_f32),
    # a 16-bit float's: computed in float32 and rounded once, as the C library's float call it replaces was (a
    # library call per element otherwise: a bfloat16 gelu of 64K elements took 8.2 ms, its float32 one 49 us)
    *((UPat(op, dtype=(dtypes.float16, dtypes.bfloat16), src=(UPat.var("x"),)), _in_float32(fn))
      for op, fn in ((Ops.EXP, exp_f32), (Ops.EXP2, exp2_f32), (Ops.TANH, tanh_f32), (Ops.LOG, log_f32),
                     (Ops.LOG2, log2_f32), (Ops.LOG1P, log1p_f32), (Ops.EXPM1, expm1_f32), (Ops.SIN, sin_f32),
                     (Ops.COS, cos_f32))),
], pure=True)
