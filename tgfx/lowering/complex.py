"""complex: complex values become arithmetic on their (re, im) pairs, before scheduling.

A complex value is stored as numpy stores it: interleaved (re, im) pairs, a complex64 BUFFER of n elements is 2n
float32s. Above the schedule a complex value is an ordinary node of a complex dtype (`ADD`, `MUL`, `EXP`, movement
ops, `REDUCE_AXIS`, ... of complex64), so the transforms (grad, vmap, jit) treat it like any other. `AS_PAIRS` views
a complex value as a float value with a last axis of 2, `AS_COMPLEX` the other way (`tgfx/numpy/_complex.py` builds
the non-holomorphic functions, `real`, `abs`, `conj`, ..., from them).

`pm_complex` replaces every `AS_PAIRS` of a computed complex value by float ops on the real and imaginary parts of
its sources (`to_parts`, down to stored values: a product is four real products and two sums), packed into pairs
only there, so that afterwards a complex node is only:

- a BUFFER (and movement views of one that are results: no kernel reads them);
- `AS_COMPLEX(pairs)` as a value the schedule stores (a result, under a CONTIGUOUS or a COPY);
- `AS_PAIRS` of a BUFFER or of such a stored value, read by a kernel.

`kernel_ast` (schedule.py) then reads and writes a complex buffer as the float buffer of twice its size: kernels,
rangeify and the renderer never see a complex type.
"""
from __future__ import annotations

import math

from tgfx.dtypes import DType, dtypes
from tgfx.ir.control import n_bodies
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.inline import substitute_outside_calls, walk


# ---- float helpers on UOps (elementwise sources have equal shapes: constants are broadcast explicitly) ----
def full(shape: tuple[int, ...], value: float, d: DType) -> UOp:
    c = UOp.const(d, value)
    return c if not shape else UOp(Ops.EXPAND, d, (UOp(Ops.RESHAPE, d, (c,), (1,) * len(shape)),), shape)


def alu(op: Ops, *src: UOp) -> UOp:
    return UOp(op, dtypes.bool if op in GroupOp.Comparison else src[-1].dtype, src)


def part(p: UOp, i: int) -> UOp:
    """The real (i=0) or imaginary (i=1) part of pairs `p`."""
    shape = p.shape[:-1]
    cut = UOp(Ops.SHRINK, p.dtype, (p,), (*((0, s) for s in shape), (i, i + 1)))
    return UOp(Ops.RESHAPE, p.dtype, (cut,), shape)


def pack(re: UOp, im: UOp) -> UOp:
    """Pairs (re, im) of two float values of one shape: WHERE(first, PAD(re), PAD(im)), a select rather than a sum of
    the padded halves, which would turn a part's -0.0 into +0.0 (-0.0 + 0.0 is +0.0) and move a value to the other
    side of a branch cut."""
    zero = tuple((0, 0) for _ in re.shape)
    halves = [UOp(Ops.PAD, x.dtype, (UOp(Ops.RESHAPE, x.dtype, (x,), (*x.shape, 1)),), (*zero, pads))
              for x, pads in ((re, (0, 1)), (im, (1, 0)))]
    first = UOp(Ops.PAD, dtypes.bool, (full((*re.shape, 1), True, dtypes.bool),), (*zero, (0, 1)))
    return UOp(Ops.WHERE, re.dtype, (first, *halves))


def is_zero(u: UOp, signed: bool = True) -> bool:
    """A constant +0.0 (a real value's imaginary part, a symbolic zero tangent; with `signed=False` -0.0 too), seen
    through the views that broadcast it."""
    while u.op in GroupOp.Movement:
        u = u.src[0]
    return u.op is Ops.CONST and u.arg == 0 and not (signed and math.copysign(1.0, u.arg) < 0)


def _negative(x: UOp) -> UOp:
    """x's sign bit, -0.0 included (1/x is -inf there)."""
    zero = full(x.shape, 0.0, x.dtype)
    return alu(Ops.OR, alu(Ops.CMPLT, x, zero), alu(Ops.CMPLT, alu(Ops.FDIV, full(x.shape, 1.0, x.dtype), x), zero))


def _abs(x: UOp) -> UOp:
    return alu(Ops.MAX, alu(Ops.NEG, x), x)


def _finite(x: UOp) -> UOp:
    return alu(Ops.CMPEQ, alu(Ops.ADD, x, alu(Ops.NEG, x)), full(x.shape, 0.0, x.dtype))    # x - x is 0: not inf, NaN


def _not_finite(x: UOp) -> UOp:
    return alu(Ops.CMPNE, alu(Ops.ADD, x, alu(Ops.NEG, x)), full(x.shape, 0.0, x.dtype))    # x - x is inf or NaN


def _is_inf(x: UOp) -> UOp:
    return alu(Ops.CMPEQ, _abs(x), full(x.shape, float("inf"), x.dtype))


def cmul(a: tuple[UOp, UOp], b: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """a * b, the complex product also where an operand is real (a Python float, a real Tensor promoted to complex,
    whose imaginary part is +0.0), as XLA (JAX) and numpy multiply: (0 + 0j) * -2.0 is -0 + 0j and (inf + 0j) * 0.5
    is inf + NaN j. (C99 would scale part by part; `tgfx.numpy._complex` does that where it needs it.)"""
    (ar, ai), (br, bi) = a, b
    # each part one fused multiply-add, rounded as numpy's (and XLA's real part): fma(ar, br, -(ai * bi)) and
    # fma(ar, bi, ai * br), so that an iteration as chaotic as a Mandelbrot set's counts what numpy's counts
    return (alu(Ops.MULACC, ar, br, alu(Ops.NEG, alu(Ops.MUL, ai, bi))),
            alu(Ops.MULACC, ar, bi, alu(Ops.MUL, ai, br)))


def _copysign(x: UOp, y: UOp) -> UOp:
    """|x| with y's sign bit (-0.0 too; a NaN y counts as positive)."""
    mag = _abs(x)
    return alu(Ops.WHERE, _negative(y), alu(Ops.NEG, mag), mag)


def cdiv(a: tuple[UOp, UOp], b: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """a / b as XLA divides (JAX's values, zero signs and infinities included): Smith's method, scaled by b's larger
    part, and where that gives NaN + NaN j, C99's recoveries: a zero b gives inf (b_r's sign) times a, an infinite a
    over a finite b inf times the product with a's infinite parts as +-1, a finite a over an infinite b zero likewise
    ((1 + 1j) / 0 is inf + inf j, (inf + inf j) / 2 is inf + inf j, where a * (1 / b) gave NaN + NaN j)."""
    (ar, ai), (br, bi) = a, b
    shape, d = ar.shape, ar.dtype
    zero, one, inf = full(shape, 0.0, d), full(shape, 1.0, d), full(shape, math.inf, d)

    def mul(x: UOp, y: UOp) -> UOp:
        return alu(Ops.MUL, x, y)

    def add(x: UOp, y: UOp) -> UOp:
        return alu(Ops.ADD, x, y)

    def sub(x: UOp, y: UOp) -> UOp:
        return alu(Ops.ADD, x, alu(Ops.NEG, y))

    def div(x: UOp, y: UOp) -> UOp:
        return alu(Ops.FDIV, x, y)

    def nan(x: UOp) -> UOp:
        return alu(Ops.CMPNE, x, x)

    def both(x: UOp, y: UOp) -> UOp:
        return alu(Ops.AND, x, y)

    def either(x: UOp, y: UOp) -> UOp:
        return alu(Ops.OR, x, y)

    def select(c: UOp, x: tuple[UOp, UOp], y: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
        return alu(Ops.WHERE, c, x[0], y[0]), alu(Ops.WHERE, c, x[1], y[1])

    def fma(x: UOp, y: UOp, z: UOp) -> UOp:   # x y + z rounded once, as XLA's CPU code contracts it
        return alu(Ops.MULACC, x, y, z)

    # Smith's method: r = b_r / b_i and b_i + b_r r when |b_r| < |b_i|, else r = b_i / b_r and b_r + b_i r
    r_ri, r_ir = div(br, bi), div(bi, br)
    den_ri, den_ir = fma(r_ri, br, bi), fma(r_ir, bi, br)
    by_i = alu(Ops.CMPLT, _abs(br), _abs(bi))
    out = select(by_i, (div(fma(r_ri, ar, ai), den_ri), div(fma(r_ri, ai, alu(Ops.NEG, ar)), den_ri)),
                 (div(fma(r_ir, ai, ar), den_ir), div(fma(alu(Ops.NEG, r_ir), ar, ai), den_ir)))
    # the recoveries, where Smith's gave NaN + NaN j
    zero_den = both(both(alu(Ops.CMPEQ, br, zero), alu(Ops.CMPEQ, bi, zero)),
                    either(alu(Ops.CMPEQ, ar, ar), alu(Ops.CMPEQ, ai, ai)))
    big = _copysign(inf, br)
    by_zero = mul(big, ar), mul(big, ai)
    ar_inf, ai_inf = _is_inf(ar), _is_inf(ai)
    inf_over_finite = both(either(ar_inf, ai_inf), both(_finite(br), _finite(bi)))
    sr, si = (_copysign(alu(Ops.WHERE, c, one, zero), x) for c, x in ((ar_inf, ar), (ai_inf, ai)))
    inf_out = mul(inf, add(mul(sr, br), mul(si, bi))), mul(inf, sub(mul(si, br), mul(sr, bi)))
    br_inf, bi_inf = _is_inf(br), _is_inf(bi)
    finite_over_inf = both(either(br_inf, bi_inf), both(_finite(ar), _finite(ai)))
    tr, ti = (_copysign(alu(Ops.WHERE, c, one, zero), x) for c, x in ((br_inf, br), (bi_inf, bi)))
    zero_out = mul(zero, add(mul(ar, tr), mul(ai, ti))), mul(zero, sub(mul(ai, tr), mul(ar, ti)))
    fixed = select(zero_den, by_zero, select(inf_over_finite, inf_out, select(finite_over_inf, zero_out, out)))
    return select(both(nan(out[0]), nan(out[1])), fixed, out)


def cexp(a: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """exp(x) (cos y + i sin y); a real argument (y = +-0) keeps its zero imaginary part, as C99's cexp does:
    exp(inf + 0j) is inf + 0j, not inf * 0 = NaN (and sinh, cosh, expm1 built on it follow)."""
    ar, ai = a
    d, shape = ar.dtype, ar.shape
    m = alu(Ops.EXP, ar)
    real_arg = alu(Ops.CMPEQ, ai, full(shape, 0.0, d))
    re, im = alu(Ops.MUL, m, alu(Ops.COS, ai)), alu(Ops.WHERE, real_arg, ai, alu(Ops.MUL, m, alu(Ops.SIN, ai)))
    # an infinite real part with an infinite or NaN imaginary one (C99): exp(-inf + yj) is 0 (im's sign), exp(inf +
    # yj) is inf + NaN j
    inf = full(shape, float("inf"), d)
    odd_y = _not_finite(ai)
    to_zero = alu(Ops.AND, odd_y, alu(Ops.CMPEQ, ar, alu(Ops.NEG, inf)))
    to_inf = alu(Ops.AND, odd_y, alu(Ops.CMPEQ, ar, inf))
    signed_zero = alu(Ops.WHERE, _negative(ai), full(shape, -0.0, d), full(shape, 0.0, d))
    re = alu(Ops.WHERE, to_zero, full(shape, 0.0, d), alu(Ops.WHERE, to_inf, inf, re))
    return re, alu(Ops.WHERE, to_zero, signed_zero, im)


def cabs(a: tuple[UOp, UOp]) -> UOp:
    """|a| as numpy's complex absolute computes it (XLA's agrees): the larger part times sqrt(fma(r, r, 1)), r the
    smaller over the larger, so squares do not overflow; inf if a part is infinite (even beside a NaN), else NaN if
    one is NaN."""
    ar, ai = a
    x, y = _abs(ar), _abs(ai)
    hi, lo = alu(Ops.MAX, x, y), alu(Ops.NEG, alu(Ops.MAX, alu(Ops.NEG, x), alu(Ops.NEG, y)))
    zero = full(hi.shape, 0.0, hi.dtype)
    safe = alu(Ops.WHERE, alu(Ops.CMPEQ, hi, zero), full(hi.shape, 1.0, hi.dtype), hi)
    r = alu(Ops.FDIV, lo, safe)
    one = full(hi.shape, 1.0, hi.dtype)
    inf = full(hi.shape, float("inf"), hi.dtype)
    return alu(Ops.WHERE, alu(Ops.OR, alu(Ops.CMPEQ, x, inf), alu(Ops.CMPEQ, y, inf)), inf,
               alu(Ops.MUL, alu(Ops.SQRT, alu(Ops.MULACC, r, r, one)), hi))


def clog(a: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    ar, ai = a
    return alu(Ops.LOG, cabs(a)), alu(Ops.ATAN2, ai, ar)


def csqrt(a: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """The principal square root, without cancellation: t = sqrt((|a| + |re|) / 2) is the larger part, the other is
    im / (2 t); the imaginary part has im's sign, -0.0 included (sqrt(-4 - 0j) is -2j: the value below the cut)."""
    ar, ai = a
    d, shape = ar.dtype, ar.shape
    zero, half = full(shape, 0.0, d), full(shape, 0.5, d)
    t = alu(Ops.SQRT, alu(Ops.MUL, alu(Ops.ADD, cabs(a), _abs(ar)), half))
    safe_t = alu(Ops.WHERE, alu(Ops.CMPEQ, t, zero), full(shape, 1.0, d), t)
    other = alu(Ops.FDIV, ai, alu(Ops.ADD, safe_t, safe_t))           # im / (2 t): sign of im
    other = alu(Ops.WHERE, alu(Ops.CMPEQ, t, zero), ai, other)        # sqrt(+-0 +- 0j) is +0 +- 0j
    neg_re = alu(Ops.CMPLT, ar, zero)
    abs_other = _abs(other)
    signed_t = alu(Ops.WHERE, _negative(ai), alu(Ops.NEG, t), t)
    re, im = alu(Ops.WHERE, neg_re, abs_other, t), alu(Ops.WHERE, neg_re, signed_t, other)
    # C99's infinities: an infinite im gives inf + im j whatever re is (NaN too); re = -inf with a NaN im gives
    # NaN + inf j; re = +inf with a NaN im gives inf + NaN j
    inf = full(shape, float("inf"), d)
    inf_im = _is_inf(ai)
    nan_im = alu(Ops.CMPNE, ai, ai)
    re = alu(Ops.WHERE, inf_im, inf, alu(Ops.WHERE, alu(Ops.AND, nan_im, alu(Ops.CMPEQ, ar, inf)), inf, re))
    im = alu(Ops.WHERE, inf_im, ai, alu(Ops.WHERE, alu(Ops.AND, nan_im, alu(Ops.CMPEQ, ar, alu(Ops.NEG, inf))),
                                         inf, im))
    return re, im


def csinh(a: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """sinh(x) cos(y) + i cosh(x) sin(y), with C99's values where a product would be 0 * inf: sinh(+-0 + inf j) is
    +-0 + NaN j, sinh(inf + 0j) is inf + 0j, sinh(inf + inf j) is inf + NaN j."""
    x, y = a
    re, im = alu(Ops.MUL, alu(Ops.SINH, x), alu(Ops.COS, y)), alu(Ops.MUL, alu(Ops.COSH, x), alu(Ops.SIN, y))
    zero = full(x.shape, 0.0, x.dtype)
    keep_x = alu(Ops.AND, _not_finite(y), alu(Ops.OR, alu(Ops.CMPEQ, x, zero), _is_inf(x)))
    return alu(Ops.WHERE, keep_x, x, re), alu(Ops.WHERE, alu(Ops.CMPEQ, y, zero), y, im)


def ccosh(a: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """cosh(x) cos(y) + i sinh(x) sin(y), with C99's values where a product would be 0 * inf: cosh(+-0 + inf j) is
    NaN + 0j, cosh(+-inf + 0j) is inf + 0j (the zero's sign times x's), cosh(inf + inf j) is inf + NaN j."""
    x, y = a
    re, im = alu(Ops.MUL, alu(Ops.COSH, x), alu(Ops.COS, y)), alu(Ops.MUL, alu(Ops.SINH, x), alu(Ops.SIN, y))
    zero, inf = full(x.shape, 0.0, x.dtype), full(x.shape, float("inf"), x.dtype)
    odd_y = _not_finite(y)
    re = alu(Ops.WHERE, alu(Ops.AND, odd_y, _is_inf(x)), inf, re)
    im = alu(Ops.WHERE, alu(Ops.AND, odd_y, alu(Ops.CMPEQ, x, zero)), x, im)
    signed_y = alu(Ops.WHERE, _negative(x), alu(Ops.NEG, y), y)     # cosh is even: cosh(-0 - 0j) is 1 + 0j
    return re, alu(Ops.WHERE, alu(Ops.CMPEQ, y, zero), signed_y, im)


def csin(a: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """sin(z) = -i sinh(iz), C99's definition (and so its special values)."""
    x, y = a
    re, im = csinh((alu(Ops.NEG, y), x))
    return im, alu(Ops.NEG, re)


def ccos(a: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """cos(z) = cosh(iz)."""
    x, y = a
    return ccosh((alu(Ops.NEG, y), x))


def ctanh(a: tuple[UOp, UOp]) -> tuple[UOp, UOp]:
    """tanh(x + iy) = (sinh 2x + i sin 2y) / (cosh 2x + cos 2y); for |x| > 20 it is sign(x) to float precision
    (and the quotient would be inf / inf)."""
    ar, ai = a
    d, shape = ar.dtype, ar.shape
    ch, sh = alu(Ops.COSH, alu(Ops.ADD, ar, ar)), alu(Ops.SINH, alu(Ops.ADD, ar, ar))
    two_y = alu(Ops.ADD, ai, ai)
    den = alu(Ops.ADD, ch, alu(Ops.COS, two_y))
    zero = full(shape, 0.0, d)
    abs_x = _abs(ar)
    # far: sign(x) + 0j, for an infinite x whatever y is, and for a large finite x only with a finite y (C99: a
    # finite x and an infinite or NaN y give NaN + NaN j, which the quotient gives)
    finite_y = _finite(ai)
    inf_x = alu(Ops.CMPEQ, abs_x, full(shape, float("inf"), d))
    far = alu(Ops.AND, alu(Ops.CMPLT, full(shape, 20.0, d), abs_x), alu(Ops.OR, finite_y, inf_x))
    sign = alu(Ops.WHERE, alu(Ops.CMPLT, ar, zero), full(shape, -1.0, d), full(shape, 1.0, d))
    im = alu(Ops.WHERE, alu(Ops.CMPEQ, ai, zero), ai, alu(Ops.FDIV, alu(Ops.SIN, two_y), den))  # tanh(x + 0j) real
    re = alu(Ops.WHERE, alu(Ops.CMPEQ, ar, zero), ar, alu(Ops.FDIV, sh, den))    # tanh(+-0 + inf j) is +-0 + NaN j
    return alu(Ops.WHERE, far, sign, re), alu(Ops.WHERE, far, zero, im)


_UNARY = {Ops.EXP: cexp, Ops.LOG: clog, Ops.SQRT: csqrt, Ops.SIN: csin, Ops.COS: ccos, Ops.TANH: ctanh,
          Ops.RECIP: lambda b: cdiv((full(b[0].shape, 1.0, b[0].dtype), full(b[0].shape, 0.0, b[0].dtype)), b)}


# ---- the rules ----
Parts = tuple[UOp, UOp]


def pairs(x: UOp) -> UOp:
    return UOp(Ops.AS_PAIRS, x.dtype.real, (x,))


def unpack(p: UOp) -> Parts | None:
    """(re, im) if pairs `p` were built by `pack`, else None."""
    if p.op is not Ops.WHERE or any(s.op is not Ops.PAD for s in p.src):
        return None
    lo, hi = p.src[1:]
    if lo.arg[-1] != (0, 1) or hi.arg[-1] != (1, 0) or any(a != (0, 0) for a in lo.arg[:-1] + hi.arg[:-1]):
        return None
    re, im = lo.src[0], hi.src[0]
    if re.op is not Ops.RESHAPE or im.op is not Ops.RESHAPE:
        return None
    return re.src[0], im.src[0]


def to_parts(x: UOp, memo: dict[UOp, Parts]) -> Parts:
    """The (re, im) float values of complex value `x`, each complex op written on its sources' parts. Parts, not
    pairs, between ops: a pair is built (`pack`) only where one is stored or viewed, so a chain of complex ops is a
    chain of real ops, not nested packs and slices of packs."""
    if x in memo:
        return memo[x]
    op, src = x.op, x.src
    if op is Ops.AS_COMPLEX:
        out = unpack(src[0]) or (part(src[0], 0), part(src[0], 1))
    elif _read_as_pairs(x):
        p = pairs(x)
        out = part(p, 0), part(p, 1)
    elif op in GroupOp.Movement:
        out = tuple(UOp(op, x.dtype.real, (t,), x.arg) for t in to_parts(src[0], memo))
    elif op in GroupOp.DynamicView:   # an eager x[i] (its start an integer operand): each part cut the same way
        out = tuple(UOp(op, x.dtype.real, (t, *src[1:]), x.arg) for t in to_parts(src[0], memo))
    elif op is Ops.CONST:
        v, d = complex(x.arg), x.dtype.real
        out = UOp.const(d, v.real), UOp.const(d, v.imag)
    elif op is Ops.ADD:
        (ar, ai), (br, bi) = to_parts(src[0], memo), to_parts(src[1], memo)
        # part by part, also beside a real operand (promoted: its imaginary part +0.0), as XLA and numpy add: -0j + 1.0
        # is 1 + 0j (C99 would keep the -0; `tgfx.numpy._complex` adds a real part alone where a branch cut needs it)
        out = alu(Ops.ADD, ar, br), alu(Ops.ADD, ai, bi)
    elif op is Ops.NEG:
        out = tuple(alu(Ops.NEG, t) for t in to_parts(src[0], memo))
    elif op is Ops.MUL:
        out = cmul(to_parts(src[0], memo), to_parts(src[1], memo))
    elif op is Ops.FDIV:
        out = cdiv(to_parts(src[0], memo), to_parts(src[1], memo))
    elif op in _UNARY:
        out = _UNARY[op](to_parts(src[0], memo))
    elif op is Ops.WHERE:
        (ar, ai), (br, bi) = to_parts(src[1], memo), to_parts(src[2], memo)
        out = alu(Ops.WHERE, src[0], ar, br), alu(Ops.WHERE, src[0], ai, bi)
    elif op is Ops.CAST and src[0].dtype.is_complex:
        out = tuple(UOp(Ops.CAST, x.dtype.real, (t,)) for t in to_parts(src[0], memo))
    elif op is Ops.CAST:
        re = UOp(Ops.CAST, x.dtype.real, (src[0],))
        out = re, full(re.shape, 0.0, re.dtype)
    elif op is Ops.REDUCE_AXIS and x.arg[0] is Ops.ADD:
        out = tuple(UOp(Ops.REDUCE_AXIS, x.dtype.real, (t,), x.arg) for t in to_parts(src[0], memo))
    else:
        raise NotImplementedError(f"complex {op.name} (arg {x.arg!r}) has no pair form; tgfx.numpy builds complex "
                                  f"functions from ADD MUL FDIV NEG RECIP EXP LOG SQRT SIN COS TANH WHERE CAST and "
                                  f"sums")
    memo[x] = out
    return out


def fold_part(x: UOp) -> UOp | None:
    """A part of a `pack`ed pair is the value it was packed from: SHRINK to one entry of the last axis of
    WHERE(first, PAD(re), PAD(im)), as `pack` builds it."""
    s = x.src[0]
    if s.shape[-1:] != (2,) or x.arg[-1] not in ((0, 1), (1, 2)) or \
            any(b != (0, n) for b, n in zip(x.arg[:-1], s.shape[:-1], strict=True)):
        return None
    got = unpack(s)
    return None if got is None else UOp(Ops.RESHAPE, x.dtype, (got[x.arg[-1][0]],), x.shape)


def compare(ctx: dict, x: UOp) -> UOp:
    """== and != of complex values: both parts equal, or either differs."""
    (ar, ai), (br, bi) = to_parts(x.src[0], ctx), to_parts(x.src[1], ctx)
    re, im = alu(x.op, ar, br), alu(x.op, ai, bi)
    return alu(Ops.AND if x.op is Ops.CMPEQ else Ops.OR, re, im)


def _is_buffer_view(u: UOp) -> bool:
    while u.op is Ops.RESHAPE:
        u = u.src[0]
    return u.op is Ops.BUFFER


def _stored_complex(u: UOp) -> bool:
    """A complex value a kernel can read as pairs without computing it: a buffer, or one the schedule stores."""
    return u.op in (Ops.AS_COMPLEX, Ops.COPY, Ops.CONTIGUOUS, Ops.GETTUPLE, Ops.PARAM) or _is_buffer_view(u)


def _read_as_pairs(u: UOp) -> bool:
    """A complex value a kernel reads as the float pairs of its buffer (`kernel_ast`); views of it are views of
    those pairs."""
    # GETTUPLE: a loop's result; PARAM: a loop body's operand (a buffer when the body runs)
    return u.op in (Ops.BUFFER, Ops.AS_COMPLEX, Ops.COPY, Ops.CONTIGUOUS, Ops.GETTUPLE, Ops.PARAM)


def as_stored(u: UOp) -> UOp:
    """`u` as a value the schedule can store: its pairs, viewed as complex."""
    return u if _stored_complex(u) else UOp(Ops.AS_COMPLEX, u.dtype, (pairs(u),))


def store_operands(x: UOp) -> UOp | None:
    nb = n_bodies(x)
    src = (*x.src[:nb], *(as_stored(s) if s.dtype is not None and s.dtype.is_complex else s for s in x.src[nb:]))
    return None if src == x.src else x.replace(src=src)


def pairs_view(u: UOp, p: UOp) -> UOp:
    """Movement op `u` of a complex value, applied to that value's float (re, im) pairs `p` (a last axis of 2): the
    pair axis is carried along."""
    arg = {Ops.RESHAPE: lambda a: (*a, 2), Ops.EXPAND: lambda a: (*a, 2), Ops.PERMUTE: lambda a: (*a, len(a)),
           Ops.PAD: lambda a: (*a, (0, 0)), Ops.SHRINK: lambda a: (*a, (0, 2)), Ops.FLIP: lambda a: a}[u.op](u.arg)
    return UOp(u.op, u.dtype.real, (p,), arg)


def view_pairs(x: UOp) -> UOp | None:
    """The pairs of views of a value read as pairs: the same views of its pairs. A kernel then reads each pair where
    it lies (a jitted complex input is a reshape of its buffer), not each part of it cut out and the two selected
    by a `pack` (a transpose of a complex input's pairs into planes read both floats of every pair, 34 us for
    128 x 128, and neither index told the optimiser which axis it walks)."""
    views = []
    while x.op in GroupOp.Movement:
        views.append(x)
        x = x.src[0]
    if not views or not _read_as_pairs(x):
        return None
    p = pairs(x)
    for v in reversed(views):
        p = pairs_view(v, p)
    return p


_is_complex = UPat(custom=lambda u: u.dtype is not None and u.dtype.is_complex)
pm_complex = PatternMatcher([
    (UPat(Ops.AS_PAIRS, src=(UPat(Ops.AS_COMPLEX, name="c"),)), lambda c: c.src[0]),
    (UPat(Ops.AS_PAIRS, src=(UPat(GroupOp.Movement, name="x"),)), view_pairs),
    # a computed complex value's pairs: its parts, written on its sources' parts
    (UPat(Ops.AS_PAIRS, src=(UPat(name="x"),)),
     lambda ctx, x: None if _read_as_pairs(x) else pack(*to_parts(x, ctx))),
    (UPat(Ops.SHRINK, name="x"), fold_part),
    # a stored complex value is computed as its pairs
    (UPat((Ops.CONTIGUOUS, Ops.COPY), src=(_is_complex,), name="x"),
     lambda x: None if _stored_complex(x.src[0]) else x.replace(src=(as_stored(x.src[0]),))),
    # a loop's, a branch's or a call's operands are buffers: a complex one is stored as its pairs
    (UPat((Ops.LOOP, Ops.SWITCH, Ops.CALL), name="x"), store_operands),
    (UPat((Ops.CMPEQ, Ops.CMPNE), src=(_is_complex, _is_complex), name="x"), compare),
    # complex -> real takes the real part, as numpy's astype does (with its ComplexWarning, given by tgfx.numpy)
    (UPat(Ops.CAST, src=(_is_complex,), name="x"),
     lambda ctx, x: None if x.dtype.is_complex else UOp(Ops.CAST, x.dtype, (to_parts(x.src[0], ctx)[0],))
     if not x.dtype.is_bool else alu(Ops.CMPNE, x.src[0], full(x.shape, 0, x.src[0].dtype))),
])


def _store_shared_results(roots: list[UOp]) -> list[UOp]:
    """A computed complex result that other results read too is stored once and read back as pairs by them, not
    written again on its sources' parts in each (a Mandelbrot step's count recomputed its new z, 0.94 ms; reading
    it, 0.20-0.36)."""
    computed = {r for r in roots if r.dtype is not None and r.dtype.is_complex and not _is_buffer_view(r) and
                not _stored_complex(r)}
    read = computed and {s for u in walk(UOp(Ops.SINK, None, tuple(roots))) for s in u.src[n_bodies(u):]
                         if s in computed}
    if not read:
        return roots
    keep = {r: UOp(Ops.CONTIGUOUS, r.dtype, (r,)) for r in read}
    return list(substitute_outside_calls(UOp(Ops.SINK, None, tuple(roots)), keep).src)


def lower_complex(roots: list[UOp]) -> list[UOp]:
    """`roots` with complex arithmetic written on pairs (see the module's docstring); complex results are stored as
    complex buffers. Roots without a complex node are returned as they are."""
    if not any(u.dtype is not None and u.dtype.is_complex for u in UOp(Ops.SINK, None, tuple(roots)).toposort()):
        return roots
    roots = _store_shared_results(roots)
    # (and in each body, inner ones first: the rewrite below goes into bodies, where the results are the body's)
    bodies: dict[UOp, UOp] = {}
    for u in UOp(Ops.SINK, None, tuple(roots)).toposort():
        for b in u.src[:n_bodies(u)]:
            if b.op is Ops.TUPLE and b not in bodies:
                inner = b.substitute(bodies) if bodies else b
                bodies[b] = inner.replace(src=tuple(_store_shared_results(list(inner.src))))
    if bodies := {b: n for b, n in bodies.items() if n is not b}:
        roots = list(UOp(Ops.SINK, None, tuple(roots)).substitute(bodies).src)
    stored = [r if not (r.dtype is not None and r.dtype.is_complex) or _is_buffer_view(r) else as_stored(r)
              for r in roots]
    return list(graph_rewrite(UOp(Ops.SINK, None, tuple(stored)), pm_complex, ctx={}, name="complex").src)
