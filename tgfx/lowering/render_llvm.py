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

from tgfx.devices.target import Target, host_target
from tgfx.dtypes import DType, dtypes, max_value, min_value
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.linearize import is_lane_reduce, range_deps, vector_ranges
from tgfx.lowering.llvm_rules import (
    _UPDATE_FLAGS,
    _VALUE_OPS,
    MXCSR_FTZ,
    RenderError,
    Rule,
    _fbits,
    _float_below,
    _ibits,
    _kind,
    alu_rules,
    compute_type,
    exact_in_bfloat16,
    float_literal,
    literal,
    mem_type,
    reg_type,
)
from tgfx.lowering.llvm_worker import NO_LSR, NO_SLP
from tgfx.lowering.packs import (
    Pack,
    StorePack,
    find_packs,
    find_store_packs,
)
from tgfx.lowering.render_tiles import RegisterTiles
from tgfx.lowering.render_wide import WideValues

_UNROLL_OFF = '!{!"llvm.loop.unroll.disable"}'
_CHAINED = frozenset({Ops.ADD, Ops.MUL, Ops.MAX})   # reduce ops whose updates may be chains (`chained_update`)
SHORT_LOOP = 8   # trips of a loop LLVM unrolls whole (see `LLVMRenderer.outer_md`)
# a register tile's reduce loop is unrolled this many steps: one step is a tile's FMAs beside its loads, broadcasts,
# index arithmetic and the loop's own add, compare and branch, more instructions a step than the core's front end issues
# while its FMA units take the FMAs (AVX2's 16 x 6 tile: 29 instructions for 12 FMAs); LLVM left it rolled. A 1024^3
# matmul, alternated: AVX2 class 159 -> 193 GFLOP/s, AVX-512 266-283 -> 293-305 (2 by 2: 177)
TILE_REDUCE_UNROLL = 4
# ... unless a step already reads more values than this: its loads alone are more instructions than the unroll is
# for, and four copies of them are addresses of the loop's index that LLVM's loop strength reduction searches
# together. A Fourier layer's complex weight gradient (a 16 x 8 tile whose step reads 32 scalars of interleaved real and
# imaginary parts, 8 trips) spent 350 ms there, 80 without the unroll; a contraction's tile reads 9-10 a step. The
# reduce loops around such a loop are kept rolled: LLVM unrolled short ones whole by itself, and its SLP vectoriser and
# loop strength reduction searched the straight line of their loads (the FNO's lifting weight gradient, a 3 x 4 tile of
# scalars reading 28 values a step in loops of 8 inside loops of 4, 2 and 8 trips: 250 ms of LLVM for no vector, 60
# with those rolled). The loop itself is left to LLVM (rolled too, such loops of 8 trips ran 10-20% slower), and so
# are the loops around a shorter one (a convolution's taps, whose loops of 3 LLVM unrolls into one step)
TILE_STEP_LOADS = 16


class LLVMRenderer(WideValues, RegisterTiles):
    # the ALU rules (tgfx/lowering/llvm_rules.py); a renderer for another target (render_nvptx.py) brings its own
    rules: dict[tuple[Ops, str], Rule] = alu_rules
    # an update `acc op (v0 op v1 ...)` rendered as the chain `(acc op v0) op v1 ...` (`chained_update`): the GPU's
    # renderer does
    chain_updates = False

    def __init__(self, name: str, loop_vectorize: bool = True, target: Target | None = None,
                 loop_unroll: bool = True, tile: bool = False, trips_arg: UOp | None = None) -> None:
        self.name = name
        self.trips_arg = trips_arg   # the RANGE whose trip count the kernel reads from `vals[0]` (`render_llvm`)
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
        self.rolled_inside: list[bool] = []   # for each open loop: whether a tile's reduce loop in it reads many values
        self.step_loads: dict[UOp, int] = {}   # each loop's loads a trip (`step_loads`), by its END
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

    def to_compute(self, v: str, d: DType, width: int = 1) -> str:
        """`v`, of dtype `d` in its register type, in its compute type; with `width` > 1, a vector of that many lanes
        (float16's `<W x half>` widened by one instruction with F16C, bfloat16's `<W x i16>` bits shifted up)."""
        def vt(t: str) -> str:
            return t if width == 1 else f"<{width} x {t}>"

        def lit(x: int) -> str:
            return str(x) if width == 1 else f"splat (i32 {x})"
        if d == dtypes.float16:
            return self.op_in(f"fpext {vt('half')} {v} to {vt('float')}")
        if d == dtypes.bfloat16:
            w = self.op_in(f"zext {vt('i16')} {v} to {vt('i32')}")
            w = self.op_in(f"shl {vt('i32')} {w}, {lit(16)}")
            return self.op_in(f"bitcast {vt('i32')} {w} to {vt('float')}")
        return v

    def from_compute(self, v: str, d: DType, width: int = 1, exact: bool = False) -> str:
        """`v`, of dtype `d` in its compute type, rounded back to its register type; with `width` > 1, a vector of that
        many lanes (bfloat16's round to nearest even as integer ops on the lanes, the same ops as a scalar's). `exact`:
        `v` is a bfloat16 value already (`exact_in_bfloat16`), its high half; a NaN still becomes the quiet NaN."""
        def vt(t: str) -> str:
            return t if width == 1 else f"<{width} x {t}>"

        def lit(t: str, x: int | str) -> str:
            return str(x) if width == 1 else f"splat ({t} {x})"
        if d == dtypes.float16:
            return self.op_in(f"fptrunc {vt('float')} {v} to {vt('half')}")
        if d == dtypes.bfloat16:  # round to nearest even, keep NaN a quiet NaN
            i32 = vt("i32")
            r = self.op_in(f"bitcast {vt('float')} {v} to {i32}")
            if not exact:
                lsb = self.op_in(f"lshr {i32} {r}, {lit('i32', 16)}")
                lsb = self.op_in(f"and {i32} {lsb}, {lit('i32', 1)}")
                r = self.op_in(f"add {i32} {r}, {lit('i32', 32767)}")
                r = self.op_in(f"add {i32} {r}, {lsb}")
            r = self.op_in(f"lshr {i32} {r}, {lit('i32', 16)}")
            r = self.op_in(f"trunc {i32} {r} to {vt('i16')}")
            nan = self.op_in(f"fcmp uno {vt('float')} {v}, {lit('float', '0.0') if width > 1 else '0.0'}")
            return self.op_in(f"select {vt('i1')} {nan}, {vt('i16')} {lit('i16', 32704)}, {vt('i16')} {r}")
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
        return out if u.op in GroupOp.Comparison else self.from_compute(out, d, exact=exact_in_bfloat16(u))

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
        self.step_loads = step_loads(lin)
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
        trips = self.trips_arg is not None
        call_args = ", ".join([f"ptr %a{i}" for i in range(len(bufs))] + ["i64 %core"] + (["i64 %t"] if trips else []))
        body = "\n".join(self.allocas + ["  br label %start", "start:"] + self.lines)
        flush, restore = self.flush_denormals()
        return "\n".join([
            *sorted(self.declares),
            f"define internal void @{self.name}_body({args}{', ' if args else ''}i64 %core"
            f"{', i64 %trips' if trips else ''}) alwaysinline #0 {{",
            "entry:", body, "  ret void", "}",
            f"define void @{self.name}(ptr %bufs, ptr %vals, i64 %core) #0 {{", "entry:", *flush, *loads,
            *(["  %t = load i64, ptr %vals"] if trips else []),
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

    def chained_update(self, u: UOp) -> str:
        """A reduce's update `acc op (v0 op v1 op ...)` (a GPU register tile's UNROLL lanes summed in one register,
        `optimize_gpu.unroll_lanes`) as the chain `((acc op v0) op v1) ...`, each step an update (reassociated and
        contracted: a sum of products is a chain of FMAs, not products summed and then added). The tree's own ops,
        already emitted, are left to LLVM's dead-code elimination."""
        terms, todo = [], [u.src[1]]
        while todo:
            v = todo.pop()
            if v.op is u.op:
                todo += reversed(v.src)
            else:
                terms.append(v)
        chain = u.src[0]
        for t in terms:
            step = UOp(u.op, u.dtype, (chain, t))
            self.names[step] = self.alu(step, _UPDATE_FLAGS)
            chain = step
        return self.names[chain]

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
            # named by its order alone (not its axis): kernels that differ only in their loops' axes are one code
            self.n += 1
            rid = str(self.n)
            self.open_ids.append(rid)
            self.inner_trips = [*(max(t, u.src[0].arg) for t in self.inner_trips), 0]
            self.rolled_inside.append(False)
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
            c = self.op_in(f"icmp slt i64 {nxt}, {'%trips' if r is self.trips_arg else r.src[0].arg}")
            inner = self.inner_trips.pop()
            md = self.outer_md if inner > SHORT_LOOP else self.loop_md
            many_loads = self.rolled_inside.pop()   # (a reduce loop inside reads more than TILE_STEP_LOADS a step)
            if self.tile_hints and r.arg[1] == "reduce":
                if many_loads:   # kept rolled around it (see TILE_STEP_LOADS)
                    md = self.outer_md
                elif not inner and r.src[0].arg >= 2 * TILE_REDUCE_UNROLL:
                    if self.step_loads[u] > TILE_STEP_LOADS:
                        many_loads = True
                    else:
                        md = ", !llvm.loop !2"
            if many_loads and self.rolled_inside:
                self.rolled_inside[-1] = True
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
        elif op is Ops.MUL and self.trips_arg is not None and u.src[0].op is Ops.SPECIAL:
            # a threaded loop's share starts at core * its trip count, read at run time (`runtime_trips`)
            self.names[u] = self.op_in(f"mul i64 {self.val(u.src[0])}, %trips")
        elif op in GroupOp.ALU and is_update and u.src[0].op is Ops.LOAD and u.src[0].src[0] in self.pack_of:
            return
        elif op in GroupOp.ALU and is_update and self.chain_updates and op in _CHAINED and u.src[1].op is op:
            self.names[u] = self.chained_update(u)
        elif op in GroupOp.ALU:
            self.names[u] = self.alu(u, _UPDATE_FLAGS if is_update else "")
        elif op is Ops.CAST:
            self.names[u] = self.cast(u)
        elif op is Ops.BITCAST:
            self.names[u] = self.bitcast(u)
        else:
            raise RenderError(f"no LLVM rule for {op} (dtype {u.dtype!r}, sources {[s.dtype for s in u.src]})")


# ops a pack's value is rendered with on vectors (the rules below take a vector type as they take a scalar one)


# A kernel with this many integer xors hashes (a random draw: threefry's twenty rounds of add, rotate and xor, with
# the loop index mixed into its counter). Every sum of such a hash holds the loop index as a term, so LLVM's loop
# strength reduction takes each for a use of the induction variable and searches their rewrites: 250-400 ms of code
# generation for a 16-element kernel adding two draws' noise to a gradient (8 ms without), 19 for one draw (7). The
# module is marked with named metadata `!tgfx.no_lsr` (`llvm_worker.NO_LSR`), which the compiler reads; the
# kernel's addresses, the few uses strength reduction is for, cost as much without it (1M normals: 1.12 ms either way).
HASH_XORS = 16




def step_loads(lin: list[UOp]) -> dict[UOp, int]:
    """For the END of each loop of `lin` (the most of its emissions), the loads of memory one trip of it runs that no
    loop inside it does."""
    counts: dict[UOp, int] = {}
    open_loads: list[int] = []
    for u in lin:
        if u.op is Ops.RANGE:
            open_loads.append(0)
        elif u.op is Ops.END:
            counts[u] = max(counts.get(u, 0), open_loads.pop())
        elif u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and open_loads:
            open_loads[-1] += 1
    return counts


def render_llvm(name: str, lin: list[UOp], acc_of: dict[UOp, list[UOp]], bufs: list[UOp], loop_vectorize: bool = True,
                target: Target | None = None, loop_unroll: bool = True, tile: bool = False,
                trips_arg: UOp | None = None) -> str:
    """A linearized kernel as LLVM IR for `target` (default: `host_target()`); `loop_vectorize` / `loop_unroll`
    False: LLVM's loop vectoriser / unroller leave its loops alone; `tile`: a register tile's kernel, its innermost
    reduce loops unrolled `TILE_REDUCE_UNROLL` steps; `trips_arg`: a RANGE of `lin` whose trip count the kernel reads
    from its first value (`vals[0]`, the launch's) instead of having it written in."""
    return LLVMRenderer(name, loop_vectorize, target, loop_unroll, tile, trips_arg).render(lin, acc_of, bufs)
