"""llvm_rules: the renderer's rule table from ops to LLVM IR, keyed by the op and its dtype's kind
(`alu_rules`, and `_VECTOR_RULES` for those a vector type takes as a scalar one), and the LLVM types and literals of
tgfx's dtypes. A node with no rule fails loudly (`RenderError`) with its op, dtype and source dtypes."""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from tgfx.dtypes import DType, cast_scalar, dtypes
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.packs import (
    split_offset,
)

if TYPE_CHECKING:
    from tgfx.lowering.render_llvm import LLVMRenderer


class RenderError(NotImplementedError):
    pass


def reg_type(d: DType) -> str:
    """The LLVM type of a value of dtype `d` in a register."""
    if d.is_bool:
        return "i1"
    if d.is_int:
        return f"i{d.bits}"
    return {"float16": "half", "bfloat16": "i16", "float32": "float", "float64": "double"}[d.name]


def mem_type(d: DType) -> str:
    return "i8" if d.is_bool else reg_type(d)


def compute_type(d: DType) -> str:
    return "float" if d in (dtypes.float16, dtypes.bfloat16) else reg_type(d)


def exact_in_bfloat16(u: UOp) -> bool:
    """Whether bfloat16 op `u`, computed in float, gives a bfloat16 value already: a negation, or a maximum (one of its
    operands), of bfloat16 values (a constant among them one too). Its round to nearest even changes no bit (but a
    NaN's, which `from_compute` still makes the quiet NaN), and is left out: seven integer ops a lane of every
    negation and maximum, of the three a softmax's row maximum takes per element (`-max(-x, -big)`) and a relu's one."""
    return u.dtype == dtypes.bfloat16 and u.op in (Ops.NEG, Ops.MAX) and \
        all(s.op is not Ops.CONST or s.arg != s.arg or
            cast_scalar(s.arg, dtypes.bfloat16) == cast_scalar(s.arg, dtypes.float32) for s in u.src)


def float_literal(v: float, ty: str) -> str:
    if ty == "half":
        return "0xH" + struct.pack(">e", v).hex().upper()
    if ty == "float":  # LLVM writes floats as the double with the same value
        v = struct.unpack("f", struct.pack("f", v))[0]
    return "0x" + struct.pack(">d", v).hex().upper()


def literal(v: bool | int | float, d: DType, ty: str) -> str:
    """A constant of dtype `d` written as LLVM type `ty` (its register or compute type)."""
    if ty == "i1":
        return "true" if v else "false"
    if ty.startswith("i") and d == dtypes.bfloat16:
        from tgfx.dtypes import f32_to_bf16
        return str(int(f32_to_bf16(v)))
    if ty.startswith("i"):
        return str(int(v))
    return float_literal(float(v), ty)


# libm names of float ops LLVM has no intrinsic for; intrinsics for the rest
_LIBM = {Ops.TAN: "tan", Ops.TANH: "tanh", Ops.ASIN: "asin", Ops.ACOS: "acos", Ops.ATAN: "atan", Ops.EXPM1: "expm1",
         Ops.LOG1P: "log1p", Ops.SINH: "sinh", Ops.COSH: "cosh", Ops.ERF: "erf", Ops.ATAN2: "atan2"}
_INTRINSIC = {Ops.SQRT: "sqrt", Ops.EXP: "exp", Ops.EXP2: "exp2", Ops.LOG: "log", Ops.LOG2: "log2", Ops.SIN: "sin",
              Ops.COS: "cos", Ops.TRUNC: "trunc", Ops.FLOOR: "floor", Ops.CEIL: "ceil", Ops.RINT: "rint",
              Ops.POW: "pow", Ops.MAX: "maximum"}
_LLVM_SUFFIX = {"float": "f32", "double": "f64"}



_VECTOR_OPS = frozenset({Ops.ADD, Ops.MUL, Ops.FDIV, Ops.NEG, Ops.MAX, Ops.MULACC, Ops.WHERE, Ops.CMPLT, Ops.CMPNE,
                         Ops.CMPEQ, Ops.SQRT})


# what computes a value (and may be left unrendered when only a pack's lanes use it); everything else has effects
MXCSR_FTZ = 1 << 15   # flush subnormal results to zero
_VALUE_OPS = GroupOp.ALU | {Ops.LOAD, Ops.INDEX, Ops.CAST, Ops.BITCAST}




def _side_by_side(loads: tuple[UOp, ...]) -> bool:
    """Whether loads of one buffer read consecutive elements, in order."""
    bufs = {u.src[0].src[0] for u in loads}
    base, first = split_offset(loads[0].src[0].src[1])
    return len(bufs) == 1 and all(split_offset(u.src[0].src[1]) == (base, first + i) for i, u in enumerate(loads))


def _suffix(t: str) -> str:
    """LLVM's intrinsic suffix of a type: f32 for float, v16f32 for <16 x float>."""
    if t.startswith("<"):
        width, _, elem = t[1:-1].split()
        return f"v{width}{_LLVM_SUFFIX[elem]}"
    return _LLVM_SUFFIX[t]


def _kind(d: DType) -> str:
    """The rule tables' key for dtype `d`'s arithmetic: "f", "b" (bool), or its integer kind "i" / "u"."""
    return "f" if d.is_float else ("b" if d.is_bool else d.kind)


def _vsuffix(t: str) -> str:
    """The intrinsic suffix of a vector type of any element: v16f32, v8i64, v32i8."""
    width, _, elem = t[1:-1].split()
    return f"v{width}{_LLVM_SUFFIX.get(elem, elem)}"


def _float_below(v: int, t: str) -> int:
    """The largest value of LLVM float type `t` (float or double) that is at most the integer `v`."""
    f = {"float": np.float32, "double": np.float64}[t]
    out = f(v)
    return int(out) if int(out) <= v else int(np.nextafter(out, f(0)))


def _fbits(t: str) -> int:
    return {"half": 16, "float": 32, "double": 64}[t]


def _ibits(t: str) -> int:
    return int(t[1:])


# a reduce's update may be reassociated (vector lanes, independent chains) and fused; not `nsz`, with which LLVM folds
# acc + 0.0 to acc, so a sum of zeros came out -0.0 (a sum is -0.0 only when every term is, in any order)
_UPDATE_FLAGS = "reassoc contract "


# ---- ALU rules: (op, kind) -> emitter(renderer, compute type, operands, flags) ----
Rule = Callable[["LLVMRenderer", str, list[str], str], str]


def _bin(instr: str) -> Rule:
    return lambda r, t, x, f: r.op_in(f"{instr} {f}{t} {x[0]}, {x[1]}")


def _commutative(instr: str) -> Rule:
    """An integer op whose operands may come in either order, written in one order (their names', sorted): the index
    simplifier orders a sum's terms by their loops' axes, and kernels that differ only there are one code, one
    compile (`lower_kernel`'s `_same_code`: spectral's transposes of one buffer viewed two ways)."""
    return lambda r, t, x, f: r.op_in(f"{instr} {f}{t} {min(x[0], x[1])}, {max(x[0], x[1])}")


def _intrinsic(name: str) -> Rule:
    return lambda r, t, x, f: r.call(f"llvm.{name}.{_suffix(t)}", t, [(t, v) for v in x])


def _libm(name: str) -> Rule:
    return lambda r, t, x, f: r.call(name + ("f" if t == "float" else ""), t, [(t, v) for v in x])


def _int_intrinsic(name: str) -> Rule:
    return lambda r, t, x, f: r.call(f"llvm.{name}.{t}", t, [(t, v) for v in x])


def _safe_div(instr: str, signed: bool) -> Rule:
    """numpy integer division semantics at the edges: x / 0 = 0 (and x % 0 = 0), INT_MIN / -1 wraps."""
    def rule(r: LLVMRenderer, t: str, x: list[str], f: str) -> str:
        if x[1].lstrip("-").isdigit() and int(x[1]) > 0:
            return r.op_in(f"{instr} {t} {x[0]}, {x[1]}")
        zero = r.op_in(f"icmp eq {t} {x[1]}, 0")
        bad = zero
        if signed:
            neg1 = r.op_in(f"icmp eq {t} {x[1]}, -1")
            bad = r.op_in(f"or i1 {zero}, {neg1}")
        d = r.op_in(f"select i1 {bad}, {t} 1, {t} {x[1]}")
        q = r.op_in(f"{instr} {t} {x[0]}, {d}")
        if signed:
            special = r.op_in(f"sub {t} 0, {x[0]}" if instr == "sdiv" else f"add {t} 0, 0")
            q = r.op_in(f"select i1 {neg1}, {t} {special}, {t} {q}")
        return r.op_in(f"select i1 {zero}, {t} 0, {t} {q}")
    return rule


def _shift(instr: str, arith: bool) -> Rule:
    """Shifts by >= the bit width give 0 (or -1 for a negative arithmetic right shift), as numpy does."""
    def rule(r: LLVMRenderer, t: str, x: list[str], f: str) -> str:
        bits = _ibits(t)
        big = r.op_in(f"icmp uge {t} {x[1]}, {bits}")
        amt = r.op_in(f"select i1 {big}, {t} {bits - 1}, {t} {x[1]}")
        v = r.op_in(f"{instr} {t} {x[0]}, {amt}")
        if arith:
            return v  # shifting by bits-1 already gives 0 or -1
        return r.op_in(f"select i1 {big}, {t} 0, {t} {v}")
    return rule


alu_rules: dict[tuple[Ops, str], Rule] = {
    # An elementwise value must round the same in every kernel that computes it (argmax compares a recomputed value
    # with its stored maximum, a max's gradient with its result), so only a reduction's update may fuse a multiply
    # into its add (`contract` on both: a matmul's FMA); elsewhere an FMA is explicit (MULACC, e.g. polynomials)
    (Ops.ADD, "f"): _bin("fadd"), (Ops.MUL, "f"): _bin("fmul contract"), (Ops.FDIV, "f"): _bin("fdiv"),
    (Ops.MOD, "f"): _bin("frem"),
    (Ops.NEG, "f"): lambda r, t, x, f: r.op_in(f"fneg {t} {x[0]}"),
    (Ops.RECIP, "f"): lambda r, t, x, f: r.op_in(f"fdiv {t} {float_literal(1.0, t)}, {x[0]}"),
    (Ops.CMPLT, "f"): _bin("fcmp olt"), (Ops.CMPNE, "f"): _bin("fcmp une"), (Ops.CMPEQ, "f"): _bin("fcmp oeq"),
    # MULACC is a fused multiply-add, one rounding, whether it runs or LLVM folds it over constants (a `contract`
    # fmul/fadd pair fuses in the backend but folds as two roundings, so a value would depend on constness)
    (Ops.MULACC, "f"): _intrinsic("fma"),
    **{(op, "f"): _intrinsic(n) for op, n in _INTRINSIC.items()},
    **{(op, "f"): _libm(n) for op, n in _LIBM.items()},
}
for _k in "iu":
    alu_rules.update({
        (Ops.ADD, _k): _commutative("add"), (Ops.MUL, _k): _commutative("mul"),
        (Ops.NEG, _k): lambda r, t, x, f: r.op_in(f"sub {t} 0, {x[0]}"),
        (Ops.IDIV, _k): _safe_div("sdiv" if _k == "i" else "udiv", _k == "i"),
        (Ops.MOD, _k): _safe_div("srem" if _k == "i" else "urem", _k == "i"),
        (Ops.MAX, _k): _int_intrinsic("smax" if _k == "i" else "umax"),
        (Ops.CMPLT, _k): _bin("icmp slt" if _k == "i" else "icmp ult"), (Ops.CMPNE, _k): _bin("icmp ne"),
        (Ops.CMPEQ, _k): _bin("icmp eq"), (Ops.AND, _k): _commutative("and"), (Ops.OR, _k): _commutative("or"),
        (Ops.XOR, _k): _commutative("xor"), (Ops.SHL, _k): _shift("shl", False),
        (Ops.SHR, _k): _shift("ashr" if _k == "i" else "lshr", _k == "i"),
        (Ops.MULACC, _k): lambda r, t, x, f: r.op_in(f"add {t} {r.op_in(f'mul {t} {x[0]}, {x[1]}')}, {x[2]}"),
    })
alu_rules.update({
    (Ops.AND, "b"): _bin("and"), (Ops.OR, "b"): _bin("or"), (Ops.XOR, "b"): _bin("xor"), (Ops.MAX, "b"): _bin("or"),
    (Ops.CMPNE, "b"): _bin("xor"), (Ops.CMPEQ, "b"): _bin("icmp eq"), (Ops.MUL, "b"): _bin("and"),
    (Ops.ADD, "b"): _bin("or"),
    (Ops.CMPLT, "b"): lambda r, t, x, f: r.op_in(f"and i1 {r.op_in(f'xor i1 {x[0]}, true')}, {x[1]}"),
})

# the rules that take a vector type as they take a scalar one (`wide_alu` adds the ones with constant operands and
# does the rest lane by lane)
_VECTOR_RULES: dict[tuple[Ops, str], Rule] = {
    **{k: alu_rules[k] for k in alu_rules if k[1] == "f" and (k[0] not in _LIBM and k[0] is not Ops.RECIP)},
    **{(op, k): alu_rules[(op, k)] for k in "iu" for op in (Ops.ADD, Ops.MUL, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ,
                                                             Ops.AND, Ops.OR, Ops.XOR, Ops.MULACC)},
    **{(op, "b"): alu_rules[(op, "b")] for op in (Ops.AND, Ops.OR, Ops.XOR, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.MUL,
                                                   Ops.ADD)},
    (Ops.MAX, "i"): lambda r, t, x, f: r.call(f"llvm.smax.{_vsuffix(t)}", t, [(t, v) for v in x]),
    (Ops.MAX, "u"): lambda r, t, x, f: r.call(f"llvm.umax.{_vsuffix(t)}", t, [(t, v) for v in x]),
}
