"""half: index-level rewrites for half floats (bfloat16, float16), before the options."""
from __future__ import annotations

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat
from tgfx.ir.uop import UOp

_HALVES = (dtypes.bfloat16, dtypes.float16)


def _in_float32(u: UOp) -> UOp:
    """Half value `u` in float32, its negations and maxima (exact, so done in float32 with the same value) taken in
    float32 too: no rounding back between them, and no quiet-NaN select (a NaN is NaN either way, and the maximum's
    rounding back makes it the quiet NaN)."""
    if u.op is Ops.CONST:
        return UOp(Ops.CONST, dtypes.float32, (), u.arg)
    if u.op in (Ops.NEG, Ops.MAX) and u.dtype in _HALVES:
        return UOp(u.op, dtypes.float32, tuple(_in_float32(s) for s in u.src), u.arg)
    return u.cast(dtypes.float32)


def widen_max(red: UOp) -> UOp | None:
    """A half float's maximum as float32's, rounded back once: the same value (a maximum is one of its operands, and
    widening is exact; a NaN stays NaN). In the 16-bit type the accumulator was widened and rounded back at every step,
    and a value that is a maximum or negation (a softmax's `-max(-x, -big)`) made the quiet NaN at each: a recurrence
    LLVM's loop vectoriser does not take as a reduction, so a bfloat16 softmax's row maximum stayed a scalar loop."""
    if red.arg is not Ops.MAX or red.dtype not in _HALVES:
        return None
    return UOp(Ops.REDUCE, dtypes.float32, (_in_float32(red.src[0]), *red.src[1:]), Ops.MAX).cast(red.dtype)


pm_widen_half_max = PatternMatcher([
    (UPat(Ops.REDUCE, name="red"), widen_max),
], pure=True)
