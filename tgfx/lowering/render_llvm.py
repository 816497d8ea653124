"""render: a linearized kernel as LLVM IR text.

Every kernel has the calling convention of tgfx/devices/hcq.py: `void name(ptr bufs, ptr vals, i64 core)`. It loads
its buffer pointers and calls an always-inlined body whose pointer arguments are `noalias` (outputs are always fresh
buffers), so LLVM can vectorise without runtime alias checks.

A kernel with a vector range (an UPCAST's or UNROLL's lanes, `kernel_opts.vector_lanes`) computes every value that
depends on it as an LLVM vector of that many lanes (`render_wide`): accesses the lanes make side by side are vector
loads and stores (masked for a padded axis), a transpose's strided reads the rows of a square transposed in registers,
other reads element by element, other stores a scatter; a scalar operand is splatted; an op without a vector rule is
done lane by lane; a REDUCE over the range (an UNROLL's partial results) combines the lanes by halves.

The renderer is a rule table from ops to IR, keyed by dtype. float16 values live in registers as `half` and bfloat16
values as their `i16` bits; both compute in `float` and round back after every op, as numpy does per op.
A node with no rule fails loudly with its op, dtype and source dtypes.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

import numpy as np

from tgfx.devices.target import Target, host_target
from tgfx.dtypes import DType, dtypes, max_value, min_value
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import _coef, masked_unit_stride, unit_stride
from tgfx.lowering.linearize import is_lane_reduce, range_deps, vector_ranges
from tgfx.lowering.llvm_worker import NO_LSR, NO_SLP
from tgfx.lowering.packs import (
    MAX_STEP,
    Pack,
    StorePack,
    direct_load,
    find_packs,
    find_store_packs,
    masked_read,
    split_offset,
    square_tiles,
    strided,
    unclamped_offset,
)


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


_UNROLL_OFF = '!{!"llvm.loop.unroll.disable"}'
# a reduce's update may be reassociated (vector lanes, independent chains) and fused; not `nsz`, with which LLVM folds
# acc + 0.0 to acc, so a sum of zeros came out -0.0 (a sum is -0.0 only when every term is, in any order)
_UPDATE_FLAGS = "reassoc contract "
SHORT_LOOP = 8   # trips of a loop LLVM unrolls whole (see `LLVMRenderer.outer_md`)
# a register tile's reduce loop is unrolled this many steps: one step is a tile's FMAs beside its loads, broadcasts,
# index arithmetic and the loop's own add, compare and branch, more instructions a step than the core's front end issues
# while its FMA units take the FMAs (AVX2's 16 x 6 tile: 29 instructions for 12 FMAs); LLVM left it rolled. A 1024^3
# matmul, alternated: AVX2 class 159 -> 193 GFLOP/s, AVX-512 266-283 -> 293-305 (2 by 2: 177)
TILE_REDUCE_UNROLL = 4


class LLVMRenderer:
    rules: dict[tuple[Ops, str], Rule]   # the ALU rules below (set after them)

    def __init__(self, name: str, loop_vectorize: bool = True, target: Target | None = None,
                 loop_unroll: bool = True, tile: bool = False) -> None:
        self.name = name
        # LLVM's vectorisers build vectors as wide as the target's registers, which the options' tiles are made for
        # (its own default for some AVX-512 CPUs is half that width)
        self.target = host_target() if target is None else target
        self.vector_bits = 8 * self.target.vector_bytes
        # upcast kernels are vectorised across their lanes by SLP; the loop vectoriser would vectorise the reduce
        # loop instead, with gathers, so it is turned off for their loops
        # (and a kernel too small for either to pay keeps its loops as written: see `render_kernel`)
        self.loop_hints = [*([] if loop_vectorize else ['!{!"llvm.loop.vectorize.enable", i1 false}']),
                           *([] if loop_unroll else [_UNROLL_OFF])]
        self.loop_md = ", !llvm.loop !0" if self.loop_hints else ""
        # a register tile's innermost reduce loops: unrolled TILE_REDUCE_UNROLL steps
        self.tile_hints = [h for h in self.loop_hints if h != _UNROLL_OFF] + \
            [f'!{{!"llvm.loop.unroll.count", i32 {TILE_REDUCE_UNROLL}}}'] if tile else []
        # a loop around a longer loop than SHORT_LOOP is never unrolled: LLVM unrolled a row reduce's outer loops
        # whole once it had vectorised and unrolled the inner one (eight rows of 128: 113 KB of optimised IR, 61 ms to
        # compile), for nothing at run time (the inner loop's work is the same). Around short loops, which LLVM
        # unrolls whole, unrolling is left to it (a convolution's bias gradient over rows of 8: 15 -> 17 us without)
        self.outer_md = ", !llvm.loop !1"
        self.inner_trips: list[int] = []   # for each open loop: the longest loop opened inside it
        self.lines: list[str] = []
        self.allocas: list[str] = []
        self.names: dict[UOp, str] = {}
        self.declares: set[str] = set()
        self.open_ids: list[str] = []
        self.n = 0
        # register tiles as vectors (tgfx/lowering/packs.py): each packed accumulator's pack and lane
        self.pack_of: dict[UOp, tuple[Pack, int]] = {}
        self.pack_last: dict[UOp, Pack] = {}     # the last of a pack's update stores: where its vector update goes
        self.pack_read: dict[int, str] = {}      # a pack's vector, loaded after its loop
        self.store_pack: dict[UOp, StorePack] = {}   # a global store that is a lane of a vector store
        # each REDUCE's (and carry read's) register: the one its current emission reads (`bind_registers`)
        self.acc_of: dict[UOp, UOp] = {}
        self.later_registers: dict[UOp, list[UOp]] = {}
        # square tiles read by columns (a transpose): (buffer and offset terms, step, width) -> the first column's
        # constant offset, and once built the tile's columns
        self.tiles: dict[tuple, int] = {}
        self.tile_columns: dict[tuple, list[str]] = {}
        self.position: dict[UOp, int] = {}
        self.vectors: dict[tuple[UOp, ...], str] = {}
        self.masks: dict[tuple[str, ...], str] = {}   # lane conditions as a <W x i1>, by the conditions' registers
        # the kernel's vector range and its lanes (None, 1: none), the registers of accumulators it makes vectors,
        # the wide accesses whose lanes are side by side (addressed by lane 0's pointer), scalars splatted once
        self.vec: UOp | None = None
        self.width = 1
        self.wide_accs: set[UOp] = set()
        self.contiguous: set[UOp] = set()
        self.index_mask: dict[UOp, UOp] = {}     # a padded read's index: the lanes' validity, its masked load's mask
        self.wide_tile: dict[UOp, tuple[tuple[UOp, ...], int]] = {}   # a transpose's strided load: its tile, column
        self.wide_tile_columns: dict[tuple[UOp, ...], list[str]] = {}
        self.wide_tile_store: dict[UOp, tuple[tuple[UOp, ...], int]] = {}   # a transposed store: its tile, column
        self.wide_tile_values: dict[tuple[UOp, ...], dict[int, str]] = {}   # the columns computed so far
        self.strided: dict[UOp, int] = {}     # a wide index whose lanes are a constant stride apart: the stride
        self.splats: dict[str, str] = {}

    def tmp(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def op_in(self, line: str) -> str:
        """Emit `%t = line` and return %t."""
        t = self.tmp()
        self.emit(f"{t} = {line}")
        return t

    # ---- values in compute type ----
    def val(self, u: UOp) -> str:
        """`u` as a register value."""
        if u.op is Ops.CONST:
            return literal(u.arg, u.dtype, reg_type(u.dtype))
        return self.names[u]

    def cval(self, u: UOp) -> str:
        """`u` in its compute type (float for float16/bfloat16)."""
        if u.op is Ops.CONST:
            return literal(u.arg, u.dtype, compute_type(u.dtype))
        return self.to_compute(self.names[u], u.dtype)

    def to_compute(self, v: str, d: DType) -> str:
        if d == dtypes.float16:
            return self.op_in(f"fpext half {v} to float")
        if d == dtypes.bfloat16:
            w = self.op_in(f"zext i16 {v} to i32")
            w = self.op_in(f"shl i32 {w}, 16")
            return self.op_in(f"bitcast i32 {w} to float")
        return v

    def from_compute(self, v: str, d: DType) -> str:
        if d == dtypes.float16:
            return self.op_in(f"fptrunc float {v} to half")
        if d == dtypes.bfloat16:  # round to nearest even, keep NaN a quiet NaN
            b = self.op_in(f"bitcast float {v} to i32")
            lsb = self.op_in(f"lshr i32 {b}, 16")
            lsb = self.op_in(f"and i32 {lsb}, 1")
            r = self.op_in(f"add i32 {b}, 32767")
            r = self.op_in(f"add i32 {r}, {lsb}")
            r = self.op_in(f"lshr i32 {r}, 16")
            r = self.op_in(f"trunc i32 {r} to i16")
            nan = self.op_in(f"fcmp uno float {v}, 0.0")
            return self.op_in(f"select i1 {nan}, i16 32704, i16 {r}")
        return v

    def align(self, idx: UOp) -> str:
        """An alignment to state on an access of `idx` beyond its type's (the CPU's vectorisers need none)."""
        return ""

    def call(self, fn: str, ret: str, args: list[tuple[str, str]]) -> str:
        self.declares.add(f"declare {ret} @{fn}({', '.join(t for t, _ in args)})")
        line = f"call {ret} @{fn}({', '.join(f'{t} {v}' for t, v in args)})"
        if ret == "void":
            self.emit(line)
            return ""
        return self.op_in(line)

    # ---- the op rules ----
    def alu(self, u: UOp, flags: str = "") -> str:
        d = u.src[-1].dtype if u.op is not Ops.WHERE else u.dtype
        if u.op is Ops.WHERE:
            return self.op_in(f"select i1 {self.val(u.src[0])}, {reg_type(d)} {self.val(u.src[1])}, "
                              f"{reg_type(d)} {self.val(u.src[2])}")
        ct = compute_type(d)
        xs = [self.cval(s) for s in u.src]
        rule = self.rules.get((u.op, _kind(d)))
        if rule is None:
            raise RenderError(f"no LLVM rule for {u.op} on {d!r} (sources {[s.dtype for s in u.src]})")
        out = rule(self, ct, xs, flags if d.is_float else "")
        return out if u.op in GroupOp.Comparison else self.from_compute(out, d)

    def cast(self, u: UOp) -> str:
        s, d = u.src[0].dtype, u.dtype
        x = self.cval(u.src[0])
        if s == dtypes.float64 and d == dtypes.float16:
            # double -> float rounding to odd, then float -> half: one correct rounding, not two
            t = self.op_in(f"fptrunc double {x} to float")
            back = self.op_in(f"fpext float {t} to double")
            exact = self.op_in(f"fcmp ueq double {back}, {x}")
            over = self.op_in(f"fcmp ogt double {self.call('llvm.fabs.f64', 'double', [('double', back)])}, "
                              f"{self.call('llvm.fabs.f64', 'double', [('double', x)])}")
            bits = self.op_in(f"bitcast float {t} to i32")
            bits = self.op_in(f"sub i32 {bits}, {self.op_in(f'zext i1 {over} to i32')}")
            odd = self.op_in(f"bitcast i32 {self.op_in(f'or i32 {bits}, 1')} to float")
            return self.op_in(f"fptrunc float {self.op_in(f'select i1 {exact}, float {t}, float {odd}')} to half")
        out = self.convert(s, d, x)
        return out if d.is_bool else self.from_compute(out, d)

    def convert(self, s: DType, d: DType, x: str, width: int = 1) -> str:
        """`x`, of dtype `s` in its compute type, as dtype `d` in its compute type (a bool: `x` is not zero); with
        `width` > 1, `x` is a vector of that many lanes."""
        cs, cd = compute_type(s), compute_type(d)
        ts, td = (cs, cd) if width == 1 else (f"<{width} x {cs}>", f"<{width} x {cd}>")
        if d.is_bool:
            zero = "zeroinitializer" if width > 1 else "0.0" if s.is_float else "0"
            return self.op_in(f"{'fcmp une' if s.is_float else 'icmp ne'} {ts} {x}, {zero}")
        if s.is_float and d.is_float:
            sb, db = _fbits(cs), _fbits(cd)
            return x if sb == db else self.op_in(f"{'fpext' if db > sb else 'fptrunc'} {ts} {x} to {td}")
        if s.is_float:
            return self.float_to_int(cs, d, x, ts, td)
        if d.is_float:
            return self.op_in(f"{'sitofp' if s.kind == 'i' else 'uitofp'} {ts} {x} to {td}")
        sb, db = _ibits(cs), _ibits(cd)
        if sb == db:
            return x
        return self.op_in(f"{'trunc' if db < sb else 'sext' if s.kind == 'i' else 'zext'} {ts} {x} to {td}")

    def float_to_int(self, cs: str, d: DType, x: str, ts: str, td: str) -> str:
        """`x` (of float type `ts`, elements `cs`) converted to integer dtype `d` (type `td`) as XLA, so JAX, converts:
        toward zero, out-of-range values saturate to d's bounds and NaN is 0. fptosi of such a value is poison (x86
        gives INT_MIN), so x is made NaN-free and clamped first, by selects the backend turns into min/max instructions
        (LLVM's fptosi.sat intrinsic does the same, but x86 scalarises it for vectors: ten times slower)."""
        lo, hi = min_value(d), max_value(d)
        top = _float_below(hi, cs)   # the largest value of type cs that is at most hi: hi itself unless cs rounds it
        vec = ts != cs
        cond = ts.replace(cs, "i1")

        def lit(v: float) -> str:
            return f"splat ({cs} {float_literal(v, cs)})" if vec else float_literal(v, cs)

        def clamp(test: str, bound: float, v: str) -> tuple[str, str]:
            hit = self.op_in(f"fcmp {test} {ts} {v}, {v if test == 'uno' else lit(bound)}")
            return hit, self.op_in(f"select {cond} {hit}, {ts} {lit(bound)}, {ts} {v}")

        _, x = clamp("uno", 0.0, x)
        _, x = clamp("olt", float(lo), x)
        over, x = clamp("ogt", float(top), x)
        out = self.op_in(f"{'fptoui' if d.is_unsigned else 'fptosi'} {ts} {x} to {td}")
        if top == hi:
            return out
        big = f"splat ({compute_type(d)} {hi})" if vec else str(hi)
        return self.op_in(f"select {cond} {over}, {td} {big}, {td} {out}")   # above `top` is at least hi + 1

    def bitcast(self, u: UOp) -> str:
        return self.op_in(f"bitcast {reg_type(u.src[0].dtype)} {self.val(u.src[0])} to {reg_type(u.dtype)}")

    # ---- values of a vector range's lanes (see the module docstring) ----
    def wide(self, u: UOp) -> bool:
        """Whether `u` is a vector of the kernel's vector range's lanes."""
        if self.vec is None:
            return False
        if u.op is Ops.DEFINE_ACC or u.op is Ops.LOAD and u.src[0].op is Ops.DEFINE_ACC:
            return (u if u.op is Ops.DEFINE_ACC else u.src[0]) in self.wide_accs
        return self.vec in range_deps(u)

    def vlit(self, v: bool | int | float, d: DType) -> str:
        ty = reg_type(d)
        return f"splat ({ty} {literal(v, d, ty)})"

    def wval(self, u: UOp) -> str:
        """`u` as a vector of the lanes: its own register, or a scalar splatted (once)."""
        if u is self.vec:
            return "<" + ", ".join(f"i64 {i}" for i in range(self.width)) + ">"
        if u.op is Ops.CONST:
            return self.vlit(u.arg, u.dtype)
        if self.wide(u):
            return self.names[u]
        # by the scalar's register, not the node: a node rendered again (in a second loop over the same range) has a
        # new register, and a splat of the old one would read the first loop's last value
        name = self.val(u)
        if (hit := self.splats.get(name)) is None:
            hit = self.splats[name] = self.splat(name, reg_type(u.dtype), self.width)
        return hit

    def vtype(self, ty: str) -> str:
        return f"<{self.width} x {ty}>"

    def bind_registers(self, acc_of: dict[UOp, list[UOp]]) -> None:
        """Before rendering: every REDUCE bound to its first emission's register; `render_one` moves it on to the
        next at each of its reads in the program."""
        self.acc_of = {u: regs[0] for u, regs in acc_of.items()}
        self.later_registers = {u: list(regs) for u, regs in acc_of.items()}

    def render_wide(self, u: UOp, is_update: bool) -> None:
        """One node of vector width: registers, accesses and arithmetic on `<W x T>`."""
        op, w = u.op, self.width
        if op is Ops.DEFINE_ACC and isinstance(u.arg, tuple):   # a loop kernel reading a carry's vector register
            self.names[u] = self.op_in(f"load {self.vtype(reg_type(u.dtype))}, ptr {self.names[self.acc_of[u]]}")
        elif op is Ops.DEFINE_ACC:
            vt = self.vtype(reg_type(u.dtype))
            self.allocas.append(f"  %acc{u.arg} = alloca {vt}")
            self.emit(f"store {vt} {self.wval(u.src[0])}, ptr %acc{u.arg}")
            self.names[u] = f"%acc{u.arg}"
        elif op is Ops.LOAD and u.src[0].op is Ops.DEFINE_ACC:
            self.names[u] = self.op_in(f"load {self.vtype(reg_type(u.dtype))}, ptr {self.names[u.src[0]]}")
        elif op is Ops.STORE and u.src[0].op is Ops.DEFINE_ACC:
            self.emit(f"store {self.vtype(reg_type(u.src[1].dtype))} {self.wval(u.src[1])}, ptr {self.names[u.src[0]]}")
        elif op is Ops.REDUCE:
            self.names[u] = self.op_in(f"load {self.vtype(reg_type(u.dtype))}, ptr {self.names[self.acc_of[u]]}")
        elif op is Ops.INDEX:
            buf, off = u.src[:2]
            mt = mem_type(buf.dtype)
            if unit_stride(off, self.vec):   # lane 0's element, the others after it
                first = self.lane0(off)
                self.contiguous.add(u)
            elif (masked := masked_unit_stride(off, self.vec)) is not None:   # a padded read: from lane 0 of its
                # unclamped offset, where the mask holds
                self.index_mask[u], e, rest = masked
                first = self.lane0(e)
                for t in rest:
                    first = self.op_in(f"add i64 {first}, {self.val(t) if not self.wide(t) else self.lane0(t)}")
                self.contiguous.add(u)
            elif off.op is not Ops.WHERE and (stride := _coef(off, self.vec)) is not None:   # lane l: l * stride on
                first = self.lane0(off)
                self.strided[u] = stride
            else:   # a vector of addresses
                self.names[u] = self.op_in(f"getelementptr {mt}, ptr {self.names[buf]}, <{w} x i64> {self.wval(off)}")
                return
            self.names[u] = self.op_in(f"getelementptr {mt}, ptr {self.names[buf]}, i64 {first}")
        elif op is Ops.LOAD:
            idx, d = u.src[0], u.dtype
            vmt = self.vtype(mem_type(d))
            if u in self.wide_tile:
                v = self.wide_tile_column(u)
            elif idx in self.index_mask:
                v = self.call(f"llvm.masked.load.{_vsuffix(vmt)}.p0", vmt,
                              [("ptr", self.names[idx]), ("i32", str(d.itemsize)),
                               (f"<{w} x i1>", self.wval(self.index_mask[idx])), (vmt, "zeroinitializer")])
            elif idx in self.contiguous:
                v = self.op_in(f"load {vmt}, ptr {self.names[idx]}, align {d.itemsize}")
            elif self.short_step(idx):
                v = self.strided_load(idx, d)
            else:   # element by element: AMD's gather instructions are slower than the loads (a 16-lane
                # column of an NCHW -> NHWC copy: 9 -> 19 us with `llvm.masked.gather`)
                v = "poison"
                for i in range(w):
                    x = self.op_in(f"load {mem_type(d)}, ptr {self.lane_ptr(idx, i)}")
                    v = self.op_in(f"insertelement {vmt} {v}, {mem_type(d)} {x}, i64 {i}")
            self.names[u] = self.op_in(f"trunc {vmt} {v} to <{w} x i1>") if d.is_bool else v
        elif op is Ops.STORE and u in self.wide_tile_store:
            self.store_wide_tile(u)
        elif op is Ops.STORE:
            idx, v = u.src[:2]
            if not self.wide(idx):
                raise RenderError(f"a vector of {w} lanes stored to one element (kernel {self.name})")
            d = v.dtype
            vmt, x = self.vtype(mem_type(d)), self.wval(v)
            if d.is_bool:
                x = self.op_in(f"zext <{w} x i1> {x} to {vmt}")
            gate = u.src[2] if len(u.src) == 3 else None
            skip = None
            if gate is not None and not self.wide(gate):   # one condition for every lane: branch around the store
                self.n += 1
                skip = f"S{self.n}"
                self.emit(f"br i1 {self.val(gate)}, label %{skip}, label %{skip}.skip")
                self.lines.append(f"{skip}:")
            mask = self.wval(gate) if gate is not None and self.wide(gate) else None
            if idx in self.index_mask:   # a padded axis's lanes past its end store nothing
                lanes_in = self.wval(self.index_mask[idx])
                mask = lanes_in if mask is None else self.op_in(f"and <{w} x i1> {mask}, {lanes_in}")
            if idx in self.contiguous and mask is None:
                self.emit(f"store {vmt} {x}, ptr {self.names[idx]}, align {d.itemsize}")
            elif mask is None and self.short_step(idx):
                self.strided_store(idx, x, d)
            elif idx in self.contiguous:
                self.call(f"llvm.masked.store.{_vsuffix(vmt)}.p0", "void",
                          [(vmt, x), ("ptr", self.names[idx]), ("i32", str(d.itemsize)), (f"<{w} x i1>", mask)])
            else:   # one scatter (a reduce's result, once per output), not a store per lane: LLVM's SLP
                # vectoriser searched a weight gradient's 5 x 32 such stores for vectors (50 -> 17 ms of LLVM)
                if idx in self.strided:
                    steps = "<" + ", ".join(f"i64 {i * self.strided[idx]}" for i in range(w)) + ">"
                    ptrs = self.op_in(f"getelementptr {mem_type(d)}, ptr {self.names[idx]}, <{w} x i64> {steps}")
                else:
                    ptrs = self.names[idx]
                self.call(f"llvm.masked.scatter.{_vsuffix(vmt)}.v{w}p0", "void",
                          [(vmt, x), (f"<{w} x ptr>", ptrs), ("i32", str(d.itemsize)),
                           (f"<{w} x i1>", mask or "splat (i1 true)")])
            if skip is not None:
                self.emit(f"br label %{skip}.skip")
                self.lines.append(f"{skip}.skip:")
        elif op in GroupOp.ALU:
            self.names[u] = self.wide_alu(u, _UPDATE_FLAGS if is_update else "")
        elif op is Ops.CAST:
            self.names[u] = self.convert(u.src[0].dtype, u.dtype, self.wval(u.src[0]), w)
        elif op is Ops.BITCAST:
            self.names[u] = self.op_in(f"bitcast {self.vtype(reg_type(u.src[0].dtype))} {self.wval(u.src[0])} to "
                                       f"{self.vtype(reg_type(u.dtype))}")
        else:
            raise RenderError(f"no vector rule for {op} (dtype {u.dtype!r}, kernel {self.name})")

    def find_wide_tiles(self, lin: list[UOp]) -> None:
        """The transposes among the wide accesses: `w` loads of one block (an UPCAST's copies) whose lanes read offsets
        `m + c + l * s` (copy c, lane l, a constant stride s) for c = 0 .. w-1, w the vector range's lanes: a square
        read as w row vectors and transposed in registers (`wide_tile_column`), where each would be a gather. Stores
        the same way (ungated, to a buffer the kernel does not read): the square's columns transposed into rows and
        stored as w vectors once its last column is computed (`store_wide_tile`), where each would be a scatter
        (a row kernel's output when its rows are the vector's lanes, `heuristics.across_rows_opts`)."""
        w, groups, block = self.width, {}, 0
        if w & (w - 1):
            return
        read = {u.src[0].src[0] for u in lin if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX}
        for u in lin:
            if u.op in (Ops.RANGE, Ops.END):
                block += 1
                continue
            store = u.op is Ops.STORE and len(u.src) == 2 and not u.src[1].dtype.is_bool and \
                u.src[0].src[0] not in read
            if (u.op is Ops.LOAD or store) and u.src[0].op is Ops.INDEX and \
                    u.src[0].src[0].op is Ops.DEFINE_GLOBAL and self.wide(u.src[0] if store else u) and \
                    u.src[0].src[1].op is not Ops.WHERE and \
                    (stride := _coef(u.src[0].src[1], self.vec)) not in (None, 1):
                terms, const = split_offset(u.src[0].src[1])
                groups.setdefault((block, u.op, u.src[0].src[0], terms, stride, (u.src[1] if store else u).dtype),
                                  {})[const] = u
        for (_, op, *_), by_const in groups.items():
            found = self.wide_tile if op is Ops.LOAD else self.wide_tile_store
            for tile in square_tiles(by_const, w):
                found.update((x, (tile, j)) for j, x in enumerate(tile))

    def store_wide_tile(self, u: UOp) -> None:
        """Store `u`, a column of a tile of stores (`find_wide_tiles`): kept until the tile's last column is computed,
        then the columns transposed into rows and each row stored as a vector at its lane of the first column."""
        tile, col = self.wide_tile_store[u]
        cols = self.wide_tile_values.setdefault(tile, {})
        cols[col] = self.wval(u.src[1])
        if len(cols) < self.width:
            return
        first, d = tile[0].src[0], u.src[1].dtype
        for v, row in enumerate(self.transpose([cols[c] for c in range(self.width)], mem_type(d))):
            self.emit(f"store {self.vtype(mem_type(d))} {row}, ptr {self.lane_ptr(first, v)}, align {d.itemsize}")

    def wide_tile_column(self, u: UOp) -> str:
        """Load `u`'s column of its tile: the tile's rows loaded as vectors from lane 0 of the first column and
        transposed (`transpose`), once per tile, at its first load in program order."""
        tile, col = self.wide_tile[u]
        if tile not in self.wide_tile_columns:
            idx, d, w = u.src[0], u.dtype, self.width
            rows = []
            for v in range(w):   # row v: lane v of every column, from the first column's
                off = v * self.strided[idx] - col
                ptr = self.op_in(f"getelementptr {mem_type(d)}, ptr {self.names[idx]}, i64 {off}")
                rows.append(self.op_in(f"load {self.vtype(mem_type(d))}, ptr {ptr}, align {d.itemsize}"))
            self.wide_tile_columns[tile] = self.transpose(rows, mem_type(d))
        return self.wide_tile_columns[tile][col]

    def transpose(self, rows: list[str], ty: str) -> list[str]:
        """The columns of a square of `len(rows)` row vectors (a power of two): log2(w) rounds of interleaving row j
        with row j + w/2; after the last, row c holds column c."""
        width = len(rows)
        vt, half = f"<{width} x {ty}>", width // 2
        lo = ", ".join(f"i32 {x}" for i in range(half) for x in (i, width + i))
        hi = ", ".join(f"i32 {x}" for i in range(half, width) for x in (i, width + i))
        for _ in range(width.bit_length() - 1):
            nxt = []
            for j in range(half):
                a, b = rows[j], rows[j + half]
                nxt += [self.op_in(f"shufflevector {vt} {a}, {vt} {b}, <{width} x i32> <{lo}>"),
                        self.op_in(f"shufflevector {vt} {a}, {vt} {b}, <{width} x i32> <{hi}>")]
            rows = nxt
        return rows

    def short_step(self, idx: UOp) -> bool:
        """Whether wide index `idx` steps by a constant of at most MAX_STEP elements from lane to lane, either way
        (a complex value's parts, a flipped axis), on a target with masked vector loads (AVX's and AVX-512's; SSE
        has none: LLVM would branch around each lane)."""
        return idx in self.strided and 1 <= abs(self.strided[idx]) <= MAX_STEP and self.target.vector_bytes >= 32 \
            and self.strided[idx] != 1

    def strided_span(self, idx: UOp, d: DType) -> tuple[int, int, int, str, str]:
        """(lanes, step, span, its vector type, the lowest lane's pointer) of wide index `idx`, its lanes a short step
        apart (`short_step`): the |step| x lanes elements a masked load or store of them covers."""
        w, step = self.width, self.strided[idx]
        span = w * abs(step)
        return w, step, span, f"<{span} x {mem_type(d)}>", self.lane_ptr(idx, w - 1) if step < 0 else self.names[idx]

    def strided_load(self, idx: UOp, d: DType) -> str:
        """The lanes of `idx`, a short step s apart (`short_step`), as one masked load of the |s| W elements from the
        lowest lane's, only the lanes' enabled, and a shuffle picking them in lane order: |s| vector loads and a
        permute, where the lanes loaded one by one were W loads and W inserts (the real parts of 16 complex values,
        or 16 floats of a flipped row)."""
        w, step, span, vt, low = self.strided_span(idx, d)
        bits = ", ".join("i1 true" if i % abs(step) == 0 else "i1 false" for i in range(span))
        out = self.call(f"llvm.masked.load.{_vsuffix(vt)}.p0", vt,
                        [("ptr", low), ("i32", str(d.itemsize)), (f"<{span} x i1>", f"<{bits}>"), (vt, "poison")])
        keep = ", ".join(f"i32 {(i if step > 0 else w - 1 - i) * abs(step)}" for i in range(w))
        return self.op_in(f"shufflevector {vt} {out}, {vt} poison, <{w} x i32> <{keep}>")

    def strided_store(self, idx: UOp, x: str, d: DType) -> None:
        """Vector `x` stored to the lanes of `idx`, a short step s apart (`short_step`): spread to every |s|-th lane
        of |s| W elements from the lowest lane's and stored with only those enabled (one masked store a vector; a
        complex value's parts written into its pairs, where a scatter wrote W elements one by one)."""
        w, step, span, vt, low = self.strided_span(idx, d)
        at = {(i if step > 0 else w - 1 - i) * abs(step): i for i in range(w)}
        spread = ", ".join(f"i32 {at[j]}" if j in at else "i32 poison" for j in range(span))
        wide = self.op_in(f"shufflevector <{w} x {mem_type(d)}> {x}, <{w} x {mem_type(d)}> poison, "
                          f"<{span} x i32> <{spread}>")
        bits = ", ".join("i1 true" if j in at else "i1 false" for j in range(span))
        self.call(f"llvm.masked.store.{_vsuffix(vt)}.p0", "void",
                  [(vt, wide), ("ptr", low), ("i32", str(d.itemsize)), (f"<{span} x i1>", f"<{bits}>")])

    def lane0(self, u: UOp) -> str:
        return self.op_in(f"extractelement <{self.width} x {reg_type(u.dtype)}> {self.wval(u)}, i64 0")

    def lane_ptr(self, idx: UOp, lane: int) -> str:
        """The address lane `lane` of wide index `idx` accesses: lane 0's plus a constant for a strided one (an
        address mode), else taken from its vector of addresses."""
        if idx in self.strided:
            off = lane * self.strided[idx]
            return self.names[idx] if off == 0 else \
                self.op_in(f"getelementptr {mem_type(idx.src[0].dtype)}, ptr {self.names[idx]}, i64 {off}")
        return self.op_in(f"extractelement <{self.width} x ptr> {self.names[idx]}, i64 {lane}")

    def wide_alu(self, u: UOp, flags: str) -> str:
        op, w = u.op, self.width
        d = u.src[-1].dtype if op is not Ops.WHERE else u.dtype
        xs = [self.wval(s) for s in u.src]
        if op is Ops.WHERE:
            vt = self.vtype(reg_type(d))
            return self.op_in(f"select <{w} x i1> {xs[0]}, {vt} {xs[1]}, {vt} {xs[2]}")
        t = self.vtype(compute_type(d))
        kind = _kind(d)
        divisor = u.src[-1]
        if op in (Ops.IDIV, Ops.MOD) and kind in "iu" and divisor.op is Ops.CONST and divisor.arg > 0:
            instr = {Ops.IDIV: "sdiv", Ops.MOD: "srem"}[op] if kind == "i" else {Ops.IDIV: "udiv", Ops.MOD: "urem"}[op]
            return self.op_in(f"{instr} {t} {xs[0]}, {xs[1]}")
        if op in (Ops.SHL, Ops.SHR) and divisor.op is Ops.CONST and 0 <= divisor.arg < d.bits:
            instr = "shl" if op is Ops.SHL else ("ashr" if kind == "i" else "lshr")
            return self.op_in(f"{instr} {t} {xs[0]}, {xs[1]}")
        if op is Ops.NEG and kind in "iu":
            return self.op_in(f"sub {t} zeroinitializer, {xs[0]}")
        if op is Ops.RECIP and kind == "f":
            return self.op_in(f"fdiv {flags}{t} {self.vlit(1.0, d)}, {xs[0]}")
        if (rule := _VECTOR_RULES.get((op, kind))) is not None:
            return rule(self, t, xs, flags if kind == "f" else "")
        return self.lane_by_lane(u, xs, flags)

    def lane_reduce(self, u: UOp) -> str:
        """A REDUCE over the vector range: its source's lanes combined by halves (the op's vector rule on the two
        halves of what is left, as a reduce's update may reassociate), a lane left over from an odd count alone."""
        d, op = u.dtype, u.arg
        ct, kind = compute_type(d), _kind(d)
        rule, scalar = _VECTOR_RULES.get((op, kind)), self.rules[(op, kind)]
        flags = _UPDATE_FLAGS if kind == "f" else ""
        v, width, n, rest = self.wval(u.src[0]), self.width, self.width, []   # v: `width` lanes, the first n live
        while n > 1 and rule is not None:
            if n % 2:
                n -= 1
                rest.append(self.op_in(f"extractelement <{width} x {ct}> {v}, i64 {n}"))
            half = n // 2
            lo, hi = (self.op_in(f"shufflevector <{width} x {ct}> {v}, <{width} x {ct}> poison, <{half} x i32> <"
                                 + ", ".join(f"i32 {i}" for i in range(start, start + half)) + ">")
                      for start in (0, half))
            v, width, n = rule(self, f"<{half} x {ct}>", [lo, hi], flags), half, half
        lanes = [self.op_in(f"extractelement <{width} x {ct}> {v}, i64 {i}") for i in range(n)] + rest
        out = lanes[0]
        for lane in lanes[1:]:
            out = scalar(self, ct, [out, lane], flags)
        return out

    def lane_by_lane(self, u: UOp, xs: list[str], flags: str) -> str:
        """An op with no vector rule (a libm call, a division by a variable): the scalar rule on each lane."""
        d = u.src[-1].dtype
        ct = compute_type(d)
        rule = self.rules.get((u.op, _kind(d)))
        if rule is None:
            raise RenderError(f"no LLVM rule for {u.op} on {d!r} (sources {[s.dtype for s in u.src]})")
        rt = "i1" if u.op in GroupOp.Comparison else ct
        out = "poison"
        for i in range(self.width):
            lanes = [self.op_in(f"extractelement {self.vtype(compute_type(s.dtype))} {x}, i64 {i}")
                     for s, x in zip(u.src, xs, strict=True)]
            out = self.op_in(f"insertelement {self.vtype(rt)} {out}, {rt} "
                             f"{rule(self, ct, lanes, flags if d.is_float else '')}, i64 {i}")
        return out

    # ---- register tiles as vectors ----
    def vector_dtype(self, d: DType) -> bool:
        """Whether accumulators of dtype `d` are packed into vectors: floats computed in their own type."""
        return d.is_float and compute_type(d) == reg_type(d)

    def splat(self, v: str, ty: str, width: int) -> str:
        one = self.op_in(f"insertelement <{width} x {ty}> poison, {ty} {v}, i64 0")
        return self.op_in(f"shufflevector <{width} x {ty}> {one}, <{width} x {ty}> poison, <{width} x i32> "
                          "zeroinitializer")

    def lane_kind(self, lanes: tuple[UOp, ...]) -> str:
        """How values `lanes` make one vector: "splat" (one value), "load" (a buffer read side by side), "op" (the same
        op, on vectors of its sources) or "gather" (element by element)."""
        first = lanes[0]
        if all(u is first for u in lanes):
            return "splat"
        if first.op is Ops.REDUCE and self._pack_lanes(lanes) is not None:
            return "pack"
        if first.op is Ops.LOAD and self._tile_of(lanes) is not None:
            return "tile"
        if self._padded_read(lanes) is not None:
            return "masked"
        if not all(u.op is first.op and u.dtype == first.dtype and u.arg == first.arg and len(u.src) == len(first.src)
                   for u in lanes):
            return "gather"
        if direct_load(first) and _side_by_side(lanes):
            return "load"
        return "op" if first.op in _VECTOR_OPS and self.vector_dtype(first.src[-1].dtype) else "gather"

    def _pack_lanes(self, lanes: tuple[UOp, ...]) -> Pack | None:
        """The accumulator pack whose results `lanes` are, lane by lane in its order (a tile's epilogue), else None."""
        found = [self.pack_of.get(self.acc_of.get(u)) if u.op is Ops.REDUCE else None for u in lanes]
        if found[0] is None or len(found[0][0].accs) != len(lanes):
            return None
        pack = found[0][0]
        return pack if all(f is not None and f[0] is pack and f[1] == i for i, f in enumerate(found)) else None

    def _padded_read(self, lanes: tuple[UOp, ...]) -> tuple[UOp, tuple[UOp, ...], int, int, list[UOp | None]] | None:
        """(lane 0's load, the index terms its unmasked address sums, plus a constant, the step from lane to lane, each
        lane's mask or None) if `lanes` read one buffer at evenly spaced offsets where their masks hold: side by side
        with some lane masked (a padded read's lanes), or every s-th element for s up to MAX_STEP, masked or not (a
        strided convolution's input): one masked vector load, s vectors long for step s."""
        reads = [masked_read(u) for u in lanes]
        if len(lanes) < 2 or any(r is None for r in reads):
            return None
        first = reads[0][0]
        base, start = unclamped_offset(first.src[0].src[1])
        step = unclamped_offset(reads[1][0].src[0].src[1])[1] - start
        if not 1 <= step <= MAX_STEP or step == 1 and all(r[1] is None for r in reads):
            return None
        if any(r[0].src[0].src[0] is not first.src[0].src[0] or r[0].dtype != first.dtype or
               unclamped_offset(r[0].src[0].src[1]) != (base, start + i * step) for i, r in enumerate(reads)):
            return None
        # lane 0's unclamped address: its offset's terms, a clamp `where(mask, t, 0)` read as t
        terms, const = split_offset(first.src[0].src[1])
        if sum(t.op is Ops.WHERE for t in terms) > 1:
            return None
        terms = tuple(t.src[1] if t.op is Ops.WHERE else t for t in terms)
        return first, terms, const, step, [r[1] for r in reads]

    def lane_mask(self, bits: tuple[str, ...]) -> str:
        """A `<W x i1>` of the rendered conditions `bits`, once per distinct tuple. The lanes between a tile's edges
        share one condition (a padded read's rows): with mask registers (AVX-512) the vector is a W-bit integer, one
        select of its lanes' bits per distinct condition, bitcast to <W x i1> (inserting W i1 lanes took W
        mask-register operations each); with vector masks (AVX2) 32-bit lanes, a splat of the common one with the
        others inserted, compared with zero: the form of a vector compare's result, which LLVM keeps in a register
        (inserted as i1 lanes, it packed and widened the mask at every use: eight instructions per input vector of a
        convolution)."""
        if (hit := self.masks.get(bits)) is not None:
            return hit
        width = len(bits)
        if all(b in ("true", "false") for b in bits):
            mask = "<" + ", ".join(f"i1 {b}" for b in bits) + ">"
        elif self.target.mask_registers:
            patterns: dict[str, int] = {}
            for i, b in enumerate(bits):
                patterns[b] = patterns.get(b, 0) | (1 << i)
            patterns.pop("false", None)
            word = str(patterns.pop("true", 0))
            for b, pattern in patterns.items():
                word = self.op_in(f"or i{width} {word}, {self.op_in(f'select i1 {b}, i{width} {pattern}, i{width} 0')}")
            mask = self.op_in(f"bitcast i{width} {word} to <{width} x i1>")
        else:   # as 32-bit lanes, the form of a vector compare's result, then compared with 0
            lane = {b: ("-1" if b == "true" else "0") if b in ("true", "false") else self.op_in(f"sext i1 {b} to i32")
                    for b in dict.fromkeys(bits)}
            common = max(dict.fromkeys(bits), key=bits.count)
            mask = self.splat(lane[common], "i32", width)
            for i, b in enumerate(bits):
                if b != common:
                    mask = self.op_in(f"insertelement <{width} x i32> {mask}, i32 {lane[b]}, i64 {i}")
            mask = self.op_in(f"icmp ne <{width} x i32> {mask}, zeroinitializer")
        self.masks[bits] = mask
        return mask

    def masked_load(self, lanes: tuple[UOp, ...]) -> str:
        """`llvm.masked.load` of the lanes' elements from lane 0's unclamped address: a masked lane reads nothing
        (its clamped scalar read would read offset 0) and is 0. Lanes a step s apart are loaded as s vectors' worth
        of elements, only each lane's enabled, and every s-th kept (LLVM: s masked loads and a permute per vector)."""
        load, terms, const, step, masks = self._padded_read(lanes)
        width, ty = len(lanes), reg_type(load.dtype)
        vt = f"<{width * step} x {ty}>"
        off = str(const)
        for t in terms:
            off = self.op_in(f"add i64 {off}, {self.val(t)}")
        ptr = self.op_in(f"getelementptr {mem_type(load.dtype)}, ptr {self.names[load.src[0].src[0]]}, i64 {off}")
        bits = ["false"] * (width * step)
        for i, m in enumerate(masks):
            bits[i * step] = "true" if m is None else self.val(m)
        mask = self.lane_mask(tuple(bits))
        out = self.call(f"llvm.masked.load.{_suffix(vt)}.p0", vt,
                        [("ptr", ptr), ("i32", str(load.dtype.itemsize)), (f"<{width * step} x i1>", mask),
                         (vt, "zeroinitializer")])
        if step == 1:
            return out
        keep = ", ".join(f"i32 {i * step}" for i in range(width))
        return self.op_in(f"shufflevector {vt} {out}, {vt} poison, <{width} x i32> <{keep}>")

    def _tile_of(self, lanes: tuple[UOp, ...]) -> tuple[tuple, int] | None:
        """(tile key, column) if `lanes` are a column of a square tile of loads `find_tiles` found, else None."""
        got = strided(lanes) if len(lanes) > 1 else None
        if got is None:
            return None
        key = (got[0], got[2], len(lanes))
        return (key, got[1] - self.tiles[key]) if key in self.tiles else None

    def _gathers_accumulators(self, lanes: tuple[UOp, ...]) -> bool:
        """Whether vector `lanes` would be built lane by lane from scalar accumulators' results (a tile whose reduce
        `find_packs` left scalar, a convolution's with masked edge lanes). Such stores stay scalar: they are what
        LLVM's SLP vectoriser starts from to vectorise the accumulators and their loop, which a vector store built
        by insertelements hides from it (a direct convolution ran 30% slower)."""
        return any(kind == "gather" and any(u.op is Ops.REDUCE for u in ls) for kind, ls in self.leaves([lanes]))

    def leaves(self, roots: list[tuple[UOp, ...]]) -> Iterator[tuple[str, tuple[UOp, ...]]]:
        """(kind, lanes) of each vector `vector(root)` builds from other than an op on vectors (`lane_kind`), once."""
        stack, seen = list(dict.fromkeys(roots)), set()
        while stack:
            lanes = stack.pop()
            if lanes in seen:
                continue
            seen.add(lanes)
            kind = self.lane_kind(lanes)
            if kind == "op":
                stack.extend(tuple(u.src[i] for u in lanes) for i in range(len(lanes[0].src)))
            else:
                yield kind, lanes

    def find_tiles(self, packs: list[StorePack]) -> None:
        """The square tiles the store packs' values read by columns: `w` columns of `w` loads at offsets m + c + l * s
        (column c, lane l) for c = 0 .. w-1, all in one block. Such a tile is read as w row vectors and transposed in
        registers (`tile_columns`), where each column would be w scalar loads."""
        found: dict[tuple, set[tuple[int, int]]] = {}
        for sp in packs:   # before any tile is known a tile's column is a gather
            for kind, lanes in self.leaves([sp.values]):
                if kind in ("gather", "masked") and (got := strided(lanes)) is not None:
                    found.setdefault((got[0], got[2], len(lanes)), set()).add((got[1], sp.block))
        for key, cols in found.items():
            width, firsts = key[2], sorted(c for c, _ in cols)
            if width & (width - 1) == 0 and len({b for _, b in cols}) == 1 and \
                    firsts == list(range(firsts[0], firsts[0] + width)):
                self.tiles[key] = firsts[0]

    def tile_column(self, lanes: tuple[UOp, ...]) -> str:
        """Column `c` of a tile: its rows loaded as vectors and transposed by log2(w) rounds of interleaving row j
        with row j + w/2 (after the last round row c holds column c), once per tile."""
        key, col = self._tile_of(lanes)
        if key not in self.tile_columns:
            width, ty = len(lanes), reg_type(lanes[0].dtype)
            vt = f"<{width} x {ty}>"
            back = self.tiles[key] - (split_offset(lanes[0].src[0].src[1])[1])   # from this column to the first
            rows = []
            for u in lanes:   # lane l of this column is in row l: the row starts `back` elements from it
                ptr = self.op_in(f"getelementptr {mem_type(u.dtype)}, ptr {self.names[u.src[0]]}, i64 {back}")
                rows.append(self.op_in(f"load {vt}, ptr {ptr}, align {u.dtype.itemsize}"))
            self.tile_columns[key] = self.transpose(rows, ty)
        return self.tile_columns[key][col]

    def vector(self, lanes: tuple[UOp, ...]) -> str:
        """The values `lanes` as one vector register (`lane_kind` says how)."""
        if (hit := self.vectors.get(lanes)) is not None:
            return hit
        first, width = lanes[0], len(lanes)
        ty = reg_type(first.dtype)
        vt = f"<{width} x {ty}>"
        kind = self.lane_kind(lanes)
        if kind == "splat":
            out = self.splat(self.val(first), ty, width)
        elif kind == "pack":    # its register, read after its loop (the lanes' REDUCEs came first)
            out = self.pack_read[self._pack_lanes(lanes).id]
        elif kind == "tile":
            out = self.tile_column(lanes)
        elif kind == "masked":
            out = self.masked_load(lanes)
        elif kind == "load":
            out = self.op_in(f"load {vt}, ptr {self.names[first.src[0]]}, align {first.dtype.itemsize}")
        elif kind == "op":
            xs = [self.vector(tuple(u.src[i] for u in lanes)) for i in range(len(first.src))]
            if first.op is Ops.WHERE:
                out = self.op_in(f"select <{width} x i1> {xs[0]}, {vt} {xs[1]}, {vt} {xs[2]}")
            else:
                out = alu_rules[(first.op, "f")](self, f"<{width} x {reg_type(first.src[-1].dtype)}>", xs, "")
        elif first.dtype.is_bool:   # conditions that differ by lane (a tile's edges)
            out = self.lane_mask(tuple(self.val(u) for u in lanes))
        else:
            out = "poison"
            for i, u in enumerate(lanes):
                out = self.op_in(f"insertelement {vt} {out}, {ty} {self.val(u)}, i64 {i}")
        self.vectors[lanes] = out
        return out

    def scalars_needed(self, lin: list[UOp]) -> set[UOp]:
        """The values of `lin` that are rendered as scalars: what stores and unpacked accumulators use, and what the
        packs' vectors are built from (a splat's value, a vector load's first address, a lane gathered alone); a
        packed lane's own arithmetic is left out (LLVM would delete it, after parsing and optimising it)."""
        needs: set[UOp] = set()
        roots = [p.values for p, _ in self.pack_of.values()] + [p.values for p in self.store_pack.values()]
        for kind, lanes in self.leaves(roots):
            if kind == "tile":   # its rows are addressed from its lanes'
                needs.update(u.src[0] for u in lanes)
            elif kind == "masked":   # lane 0's address terms and the masks
                _, terms, _, _, masks = self._padded_read(lanes)
                needs.update([*terms, *(m for m in masks if m is not None)])
            elif kind != "pack":
                needs.update(lanes[:1] if kind == "splat" else (lanes[0].src[0],) if kind == "load" else lanes)
        needs.update(p.stores[0].src[0] for p in self.store_pack.values())   # a vector store's address
        live = set(needs)
        for u in reversed(lin):
            packed = u.op is Ops.STORE and (u.src[0] in self.pack_of or u in self.store_pack)
            if u.op not in _VALUE_OPS and not packed and u.op is not Ops.REDUCE:
                live.add(u)
            if u in live and not packed and u.op is not Ops.REDUCE:
                live.update(u.src)
        return live

    def render_pack(self, pack: Pack) -> None:
        """A pack's update in its loop: one vector op on its register."""
        vt = f"<{len(pack.accs)} x {reg_type(pack.dtype)}>"
        cur = self.op_in(f"load {vt}, ptr %vacc{pack.id}")
        value = self.vector(pack.values)
        upd = alu_rules[(pack.op, "f")](self, vt, [cur, value], _UPDATE_FLAGS)
        self.emit(f"store {vt} {upd}, ptr %vacc{pack.id}")

    def render(self, lin: list[UOp], acc_of: dict[UOp, list[UOp]], bufs: list[UOp]) -> str:
        for i, b in enumerate(bufs):
            self.names[b] = f"%b{i}"
        self.bind_registers(acc_of)
        vecs = vector_ranges(lin)
        if len(vecs) > 1:
            raise RenderError(f"kernel {self.name} has {len(vecs)} vector ranges (one at most)")
        if vecs:
            self.vec = vecs.pop()
            self.width = self.vec.src[0].arg
            self.wide_accs = {acc for red, regs in acc_of.items() if self.vec in range_deps(red) for acc in regs}
            # (a loop kernel's carry read: a vector where its register is one, the elements being the lanes)
            self.wide_accs |= {h for h, regs in acc_of.items() if h.op is Ops.DEFINE_ACC and isinstance(h.arg, tuple)
                               and regs[0] in self.wide_accs}
            self.find_wide_tiles(lin)
        self.position = position = {u: i for i, u in enumerate(lin) if u.op is Ops.STORE}
        for pack in find_packs(lin, lambda d: self.target.lanes(d.itemsize), self.vector_dtype):
            if any(acc in self.wide_accs for acc in pack.accs):   # already vectors
                continue
            self.pack_of.update((acc, (pack, lane)) for lane, acc in enumerate(pack.accs))
            self.pack_last[max(pack.stores, key=position.__getitem__)] = pack
        update_of_acc: set[UOp] = set()
        for u in lin:  # a reduce may be reassociated; a loop kernel's carry is computed exactly as written
            if u.op is Ops.STORE and u.src[0].op is Ops.DEFINE_ACC and u.src[0].tag != "carry":
                update_of_acc.add(u.src[1])
        store_packs = [sp for sp in find_store_packs(lin, lambda d: self.target.lanes(d.itemsize), self.vector_dtype)
                       if not self.wide(sp.stores[0]) and not self._gathers_accumulators(sp.values)]
        for sp in store_packs:
            self.store_pack.update((st, sp) for st in sp.stores)
        self.find_tiles(store_packs)
        live = self.scalars_needed(lin) if self.pack_of or self.store_pack else None
        for u in lin:
            if live is None or u in live or u.op not in _VALUE_OPS:
                self.render_one(u, u in update_of_acc)
        args = ", ".join(f"ptr noalias %b{i}" for i in range(len(bufs)))
        loads = []
        for i, b in enumerate(bufs):  # by slot: a buffer folded out of the kernel leaves a gap, not a shift
            loads.append(f"  %p{i} = getelementptr ptr, ptr %bufs, i64 {b.arg[0]}")
            loads.append(f"  %a{i} = load ptr, ptr %p{i}")
        call_args = ", ".join([f"ptr %a{i}" for i in range(len(bufs))] + ["i64 %core"])
        body = "\n".join(self.allocas + ["  br label %start", "start:"] + self.lines)
        flush, restore = self.flush_denormals()
        return "\n".join([
            *sorted(self.declares),
            f"define internal void @{self.name}_body({args}{', ' if args else ''}i64 %core) alwaysinline #0 {{",
            "entry:", body, "  ret void", "}",
            f"define void @{self.name}(ptr %bufs, ptr %vals, i64 %core) #0 {{", "entry:", *flush, *loads,
            f"  call void @{self.name}_body({call_args})", *restore, "  ret void", "}",
            f'attributes #0 = {{ "prefer-vector-width"="{self.vector_bits}" }}',
            *self.loop_metadata(),
            *([NO_LSR] if sum(u.op is Ops.XOR and u.dtype.is_int for u in lin) >= HASH_XORS else []),
            *([NO_SLP] if self.vec is not None else []),
        ])

    def flush_denormals(self) -> tuple[list[str], list[str]]:
        """The kernel's entry and exit on x86 for a target that flushes subnormals (the default,
        `TGFX_FLUSH_DENORMALS`): the thread's MXCSR with flush-to-zero set while it runs, then restored (the calling
        thread may be the user's, running numpy next). As XLA's CPU kernels, a result that would be subnormal is 0,
        and arithmetic never takes the processor's slow path for one: a spectral solver's exp(-k^2 t) underflowed
        into subnormals and made every FFT stage after it 4-6x slower. Subnormal inputs are read as they are (DAZ
        is not set): bit-level functions (nextafter, frexp) stay exact on them."""
        if not self.target.flush_denormals or not self.target.triple.startswith("x86_64"):
            return [], []
        self.declares |= {"declare void @llvm.x86.sse.stmxcsr(ptr)", "declare void @llvm.x86.sse.ldmxcsr(ptr)"}
        return ["  %csr.old = alloca i32", "  %csr.new = alloca i32",
                "  call void @llvm.x86.sse.stmxcsr(ptr %csr.old)", "  %csr = load i32, ptr %csr.old",
                f"  %csr.ftz = or i32 %csr, {MXCSR_FTZ}", "  store i32 %csr.ftz, ptr %csr.new",
                "  call void @llvm.x86.sse.ldmxcsr(ptr %csr.new)"], \
            ["  call void @llvm.x86.sse.ldmxcsr(ptr %csr.old)"]

    def loop_metadata(self) -> list[str]:
        """Loop IDs: !0 every loop's hints (when it has any), !1 those of a loop around a loop longer than SHORT_LOOP
        trips (unrolling off as well)."""
        outer = [*self.loop_hints, *([_UNROLL_OFF] if _UNROLL_OFF not in self.loop_hints else [])]
        ids = {h: i + 3 for i, h in enumerate(dict.fromkeys([*outer, *self.tile_hints]))}
        loops = [("!1", outer), *([("!0", self.loop_hints)] if self.loop_hints else []),
                 *([("!2", self.tile_hints)] if self.tile_hints else [])]
        return [*(f"{n} = distinct !{{{n}, {', '.join(f'!{ids[h]}' for h in hints)}}}" for n, hints in loops),
                *(f"!{i} = {h}" for h, i in ids.items())]

    def render_one(self, u: UOp, is_update: bool) -> None:
        op = u.op
        if u in self.later_registers:   # a read of a REDUCE (or a carry): its register is this emission's
            self.acc_of[u] = self.later_registers[u].pop(0)
        acc_of = self.acc_of
        if op is Ops.CONST or op is Ops.DEFINE_GLOBAL:
            return
        if op is Ops.SPECIAL:  # the core id this invocation runs as
            self.names[u] = "%core"
            return
        if op is Ops.RANGE:
            # a range may be opened more than once (lanes of an upcast reduced in separate loops): unique names
            self.n += 1
            rid = f"{u.arg[0]}_{self.n}"
            self.open_ids.append(rid)
            self.inner_trips = [*(max(t, u.src[0].arg) for t in self.inner_trips), 0]
            self.allocas.append(f"  %r{rid}.p = alloca i64")
            self.emit(f"store i64 0, ptr %r{rid}.p")
            self.emit(f"br label %L{rid}")
            self.lines.append(f"L{rid}:")
            self.names[u] = f"%r{rid}"
            self.emit(f"%r{rid} = load i64, ptr %r{rid}.p")
        elif op is Ops.END:
            r = u.src[0]
            rid = self.open_ids.pop()
            nxt = self.op_in(f"add i64 %r{rid}, 1")
            self.emit(f"store i64 {nxt}, ptr %r{rid}.p")
            c = self.op_in(f"icmp slt i64 {nxt}, {r.src[0].arg}")
            inner = self.inner_trips.pop()
            md = self.outer_md if inner > SHORT_LOOP else self.loop_md
            if self.tile_hints and not inner and r.arg[1] == "reduce" and r.src[0].arg >= 2 * TILE_REDUCE_UNROLL:
                md = ", !llvm.loop !2"
            self.emit(f"br i1 {c}, label %L{rid}, label %L{rid}.end{md}")
            self.lines.append(f"L{rid}.end:")
        elif op is Ops.DEFINE_REG:   # a register buffer (tgfx/lowering/row_buffer.py): on this core's stack
            self.allocas.append(f"  %reg{u.arg[0]} = alloca [{u.arg[1]} x {mem_type(u.dtype)}], align 64")
            self.names[u] = f"%reg{u.arg[0]}"
        elif op is Ops.AFTER:   # a value, once the stores it comes with are done
            self.names[u] = self.names[u.src[0]]
        elif self.vec is not None and self.wide(u):
            self.render_wide(u, is_update)
        elif op is Ops.DEFINE_ACC and isinstance(u.arg, tuple):  # a loop kernel reading a carry's register
            self.names[u] = self.op_in(f"load {reg_type(u.dtype)}, ptr {self.names[acc_of[u]]}")
        elif op is Ops.DEFINE_ACC and u in self.pack_of:
            pack, lane = self.pack_of[u]
            if lane == 0:   # the pack's register, every lane the reduce's identity
                ty, width = reg_type(u.dtype), len(pack.accs)
                self.allocas.append(f"  %vacc{pack.id} = alloca <{width} x {ty}>")
                self.emit(f"store <{width} x {ty}> {self.splat(self.val(u.src[0]), ty, width)}, ptr %vacc{pack.id}")
        elif op is Ops.DEFINE_ACC:
            ty = reg_type(u.dtype)
            self.allocas.append(f"  %acc{u.arg} = alloca {ty}")
            self.emit(f"store {ty} {self.val(u.src[0])}, ptr %acc{u.arg}")
            self.names[u] = f"%acc{u.arg}"
        elif op is Ops.LOAD and u.src[0].op is Ops.DEFINE_ACC:
            if u.src[0] not in self.pack_of:   # a packed lane's update is its pack's vector op
                self.names[u] = self.op_in(f"load {reg_type(u.dtype)}, ptr {self.names[u.src[0]]}")
        elif op is Ops.STORE and u.src[0].op is Ops.DEFINE_ACC:
            if u in self.pack_last:
                self.render_pack(self.pack_last[u])
            elif u.src[0] not in self.pack_of:
                self.emit(f"store {reg_type(u.src[1].dtype)} {self.val(u.src[1])}, ptr {self.names[u.src[0]]}")
        elif op is Ops.REDUCE and is_lane_reduce(u):
            self.names[u] = self.lane_reduce(u)
        elif op is Ops.REDUCE and acc_of[u] in self.pack_of:
            pack, lane = self.pack_of[acc_of[u]]
            vt = f"<{len(pack.accs)} x {reg_type(u.dtype)}>"
            if pack.id not in self.pack_read:
                self.pack_read[pack.id] = self.op_in(f"load {vt}, ptr %vacc{pack.id}")
            self.names[u] = self.op_in(f"extractelement {vt} {self.pack_read[pack.id]}, i64 {lane}")
        elif op is Ops.REDUCE:
            self.names[u] = self.op_in(f"load {reg_type(u.dtype)}, ptr {self.names[acc_of[u]]}")
        elif op is Ops.INDEX:
            buf, off = u.src
            ptr = self.names[buf]
            self.names[u] = self.op_in(f"getelementptr {mem_type(buf.dtype)}, ptr {ptr}, i64 {self.val(off)}")
        elif op is Ops.LOAD:
            d = u.dtype
            v = self.op_in(f"load {mem_type(d)}, ptr {self.names[u.src[0]]}{self.align(u.src[0])}")
            self.names[u] = self.op_in(f"trunc i8 {v} to i1") if d.is_bool else v
        elif op is Ops.STORE and u in self.store_pack:
            sp = self.store_pack[u]
            if u is max(sp.stores, key=self.position.__getitem__):   # the run's last store: all its values exist
                vt = f"<{len(sp.values)} x {reg_type(u.src[1].dtype)}>"
                self.emit(f"store {vt} {self.vector(sp.values)}, ptr {self.names[sp.stores[0].src[0]]}, "
                          f"align {u.src[1].dtype.itemsize}")
        elif op is Ops.STORE:
            idx, v = u.src[:2]
            d = v.dtype
            x = self.val(v)
            if d.is_bool:
                x = self.op_in(f"zext i1 {x} to i8")
            if len(u.src) == 3:  # gated (the padding of a PADTO range): branch around the store
                self.n += 1
                self.emit(f"br i1 {self.val(u.src[2])}, label %S{self.n}, label %S{self.n}.skip")
                self.lines.append(f"S{self.n}:")
            self.emit(f"store {mem_type(d)} {x}, ptr {self.names[idx]}{self.align(idx)}")
            if len(u.src) == 3:
                self.emit(f"br label %S{self.n}.skip")
                self.lines.append(f"S{self.n}.skip:")
        elif op in GroupOp.ALU and is_update and u.src[0].op is Ops.LOAD and u.src[0].src[0] in self.pack_of:
            return
        elif op in GroupOp.ALU:
            self.names[u] = self.alu(u, _UPDATE_FLAGS if is_update else "")
        elif op is Ops.CAST:
            self.names[u] = self.cast(u)
        elif op is Ops.BITCAST:
            self.names[u] = self.bitcast(u)
        else:
            raise RenderError(f"no LLVM rule for {op} (dtype {u.dtype!r}, sources {[s.dtype for s in u.src]})")


# ops a pack's value is rendered with on vectors (the rules below take a vector type as they take a scalar one)
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


# ---- ALU rules: (op, kind) -> emitter(renderer, compute type, operands, flags) ----
Rule = Callable[[LLVMRenderer, str, list[str], str], str]


def _bin(instr: str) -> Rule:
    return lambda r, t, x, f: r.op_in(f"{instr} {f}{t} {x[0]}, {x[1]}")


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
        (Ops.ADD, _k): _bin("add"), (Ops.MUL, _k): _bin("mul"),
        (Ops.NEG, _k): lambda r, t, x, f: r.op_in(f"sub {t} 0, {x[0]}"),
        (Ops.IDIV, _k): _safe_div("sdiv" if _k == "i" else "udiv", _k == "i"),
        (Ops.MOD, _k): _safe_div("srem" if _k == "i" else "urem", _k == "i"),
        (Ops.MAX, _k): _int_intrinsic("smax" if _k == "i" else "umax"),
        (Ops.CMPLT, _k): _bin("icmp slt" if _k == "i" else "icmp ult"), (Ops.CMPNE, _k): _bin("icmp ne"),
        (Ops.CMPEQ, _k): _bin("icmp eq"), (Ops.AND, _k): _bin("and"), (Ops.OR, _k): _bin("or"),
        (Ops.XOR, _k): _bin("xor"), (Ops.SHL, _k): _shift("shl", False),
        (Ops.SHR, _k): _shift("ashr" if _k == "i" else "lshr", _k == "i"),
        (Ops.MULACC, _k): lambda r, t, x, f: r.op_in(f"add {t} {r.op_in(f'mul {t} {x[0]}, {x[1]}')}, {x[2]}"),
    })
alu_rules.update({
    (Ops.AND, "b"): _bin("and"), (Ops.OR, "b"): _bin("or"), (Ops.XOR, "b"): _bin("xor"), (Ops.MAX, "b"): _bin("or"),
    (Ops.CMPNE, "b"): _bin("xor"), (Ops.CMPEQ, "b"): _bin("icmp eq"), (Ops.MUL, "b"): _bin("and"),
    (Ops.ADD, "b"): _bin("or"),
    (Ops.CMPLT, "b"): lambda r, t, x, f: r.op_in(f"and i1 {r.op_in(f'xor i1 {x[0]}, true')}, {x[1]}"),
})
LLVMRenderer.rules = alu_rules   # a renderer for another target (render_nvptx.py) brings its own table

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


# A kernel with this many integer xors hashes (a random draw: threefry's twenty rounds of add, rotate and xor, with
# the loop index mixed into its counter). Every sum of such a hash holds the loop index as a term, so LLVM's loop
# strength reduction takes each for a use of the induction variable and searches their rewrites: 250-400 ms of code
# generation for a 16-element kernel adding two draws' noise to a gradient (8 ms without), 19 for one draw (7). The
# module is marked with named metadata `!tgfx.no_lsr` (`llvm_worker.NO_LSR`), which the compiler reads; the
# kernel's addresses, the few uses strength reduction is for, cost as much without it (1M normals: 1.12 ms either way).
HASH_XORS = 16


def render_llvm(name: str, lin: list[UOp], acc_of: dict[UOp, list[UOp]], bufs: list[UOp], loop_vectorize: bool = True,
                target: Target | None = None, loop_unroll: bool = True, tile: bool = False) -> str:
    """A linearized kernel as LLVM IR for `target` (default: `host_target()`); `loop_vectorize` / `loop_unroll`
    False: LLVM's loop vectoriser / unroller leave its loops alone; `tile`: a register tile's kernel, its innermost
    reduce loops unrolled `TILE_REDUCE_UNROLL` steps."""
    return LLVMRenderer(name, loop_vectorize, target, loop_unroll, tile).render(lin, acc_of, bufs)
