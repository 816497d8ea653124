"""transcendental: float32 exp, exp2 and tanh as polynomial arithmetic, so LLVM can vectorise them.

A call into the C math library is scalar: a kernel that calls `expf` or `tanhf` per element cannot use vector
instructions. These rewrites express the functions with ALU ops only (multiply-adds, rounding, integer bit tricks):
- exp/exp2: Cody-Waite range reduction `x = n*ln2 + r`, the Cephes degree-5 polynomial for e^r on |r| <= ln2/2,
  and 2^n built in the exponent bits (split in two factors so results near the overflow and denormal edges are
  exact). About 1 ulp.
- tanh: the odd/even rational approximation used by Eigen and XLA on the CPU (13th over 6th degree) on [-7.9, 7.9]
  (clamped there), exactly +-1 beyond 9.02 where float32 tanh rounds to it; `x` itself below 4e-4. A few ulp.
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
    out = _c(coeffs[0])
    for c in coeffs[1:]:
        out = out * x + _c(c)
    return out


def _pow2(n: UOp) -> UOp:
    """2**n for an integer-valued float n in [-126, 127], through the exponent bits."""
    bits = (n.cast(i32) + UOp.const(i32, 127)).alu(Ops.SHL, UOp.const(i32, 23))
    return UOp(Ops.BITCAST, f32, (bits,))


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


pm_transcendental = PatternMatcher([
    (UPat(Ops.EXP, dtype=f32, src=(UPat.var("x"),)), exp_f32),
    (UPat(Ops.EXP2, dtype=f32, src=(UPat.var("x"),)), exp2_f32),
    (UPat(Ops.TANH, dtype=f32, src=(UPat.var("x"),)), tanh_f32),
])
