"""transcendental: float32 exp, exp2, expm1, tanh, log, log2 and log1p as polynomial arithmetic, so LLVM can
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
float64 and the 16-bit types keep the C library (the 16-bit types compute in float32 there anyway).
"""
from __future__ import annotations

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat
from tgfx.ir.uop import UOp

f32, i32 = dtypes.float32, dtypes.int32


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


pm_transcendental = PatternMatcher([
    (UPat(Ops.EXP, dtype=f32, src=(UPat.var("x"),)), exp_f32),
    (UPat(Ops.EXP2, dtype=f32, src=(UPat.var("x"),)), exp2_f32),
    (UPat(Ops.TANH, dtype=f32, src=(UPat.var("x"),)), tanh_f32),
    (UPat(Ops.LOG, dtype=f32, src=(UPat.var("x"),)), log_f32),
    (UPat(Ops.LOG2, dtype=f32, src=(UPat.var("x"),)), log2_f32),
    (UPat(Ops.LOG1P, dtype=f32, src=(UPat.var("x"),)), log1p_f32),
    (UPat(Ops.EXPM1, dtype=f32, src=(UPat.var("x"),)), expm1_f32),
])
