"""render_wide: the renderer's values of a kernel's vector range (an UPCAST's or UNROLL's lanes), each an LLVM vector
of that many lanes (see render_llvm's docstring); a mixin of `LLVMRenderer`, whose state (`vec`, `width`, registers
and names) it reads."""
from __future__ import annotations

from tgfx.dtypes import DType, dtypes
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import _coef, masked_unit_stride, unit_stride
from tgfx.lowering.linearize import range_deps
from tgfx.lowering.llvm_rules import (
    _LLVM_SUFFIX,
    _UPDATE_FLAGS,
    _VECTOR_RULES,
    RenderError,
    _kind,
    _vsuffix,
    compute_type,
    exact_in_bfloat16,
    float_literal,
    literal,
    mem_type,
    reg_type,
)
from tgfx.lowering.packs import (
    MAX_STEP,
    split_offset,
    square_tiles,
)


class WideValues:
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
            s, d = u.src[0].dtype, u.dtype
            if s == dtypes.float64 and d == dtypes.float16:   # one rounding, as the scalar's rounding to odd
                self.names[u] = self.op_in(f"fptrunc <{w} x double> {self.wval(u.src[0])} to <{w} x half>")
                return
            x = self.convert(s, d, self.to_compute(self.wval(u.src[0]), s, w), w)
            self.names[u] = x if d.is_bool else self.from_compute(x, d, w)
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
        with row j + w/2; after the last, row c holds column c.

        On x86 a float round's results pass through `llvm.arithmetic.fence` (no instruction) before the next round:
        LLVM's x86 instruction selection otherwise searches every chain of shuffles up to 8 deep for a cheaper one and
        finds none (the butterfly is one unpack a shuffle), spending 0.3 ms a shuffle: an 8 x 8 tile's 128 shuffles
        were 38 of the 50 ms its kernel's code generation took (fno's mode mixing), 17 ms with the fences."""
        width = len(rows)
        vt, half = f"<{width} x {ty}>", width // 2
        lo = ", ".join(f"i32 {x}" for i in range(half) for x in (i, width + i))
        hi = ", ".join(f"i32 {x}" for i in range(half, width) for x in (i, width + i))
        rounds = width.bit_length() - 1
        fence = ty in _LLVM_SUFFIX and self.target.triple.startswith("x86_64")
        for r in range(rounds):
            nxt = []
            for j in range(half):
                a, b = rows[j], rows[j + half]
                nxt += [self.op_in(f"shufflevector {vt} {a}, {vt} {b}, <{width} x i32> <{lo}>"),
                        self.op_in(f"shufflevector {vt} {a}, {vt} {b}, <{width} x i32> <{hi}>")]
            if fence and r < rounds - 1:
                nxt = [self.call(f"llvm.arithmetic.fence.{_vsuffix(vt)}", vt, [(vt, x)]) for x in nxt]
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
        if op is Ops.WHERE:
            xs = [self.wval(s) for s in u.src]
            vt = self.vtype(reg_type(d))
            return self.op_in(f"select <{w} x i1> {xs[0]}, {vt} {xs[1]}, {vt} {xs[2]}")
        # float16/bfloat16 lanes compute in float and round back, the scalar's ops on every lane
        xs = [self.to_compute(self.wval(s), s.dtype, w) for s in u.src]
        out = self.wide_compute(u, d, xs, flags)
        return out if op in GroupOp.Comparison else self.from_compute(out, d, w, exact_in_bfloat16(u))

    def wide_compute(self, u: UOp, d: DType, xs: list[str], flags: str) -> str:
        """`u`'s op on vectors `xs` of its sources' lanes in their compute type."""
        op = u.op
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
            return self.op_in(f"fdiv {flags}{t} splat ({compute_type(d)} {float_literal(1.0, compute_type(d))}), "
                              f"{xs[0]}")
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

        def rounded(x: str, lanes: int) -> str:   # a half float's sum or product rounds after every op, as a scalar's
            return x if op is Ops.MAX else self.to_compute(self.from_compute(x, d, lanes), d, lanes)
        v, width, n, rest = self.to_compute(self.wval(u.src[0]), d, self.width), self.width, self.width, []
        # (down to two lanes, which the scalar rule combines: halved to one, a half float's rounding of that
        # `<1 x float>` was written as a scalar's, which LLVM rejected -- a float16 cumprod of 4 elements, and of 3:
        # its odd lane set aside left two, halved)
        while n > 2 and rule is not None:   # v: `width` lanes, the first n live
            if n % 2:
                n -= 1
                rest.append(self.op_in(f"extractelement <{width} x {ct}> {v}, i64 {n}"))
                if n == 2:
                    break
            half = n // 2
            lo, hi = (self.op_in(f"shufflevector <{width} x {ct}> {v}, <{width} x {ct}> poison, <{half} x i32> <"
                                 + ", ".join(f"i32 {i}" for i in range(start, start + half)) + ">")
                      for start in (0, half))
            v, width, n = rounded(rule(self, f"<{half} x {ct}>", [lo, hi], flags), half), half, half
        lanes = [self.op_in(f"extractelement <{width} x {ct}> {v}, i64 {i}") for i in range(n)] + rest
        out = lanes[0]
        for lane in lanes[1:]:
            out = rounded(scalar(self, ct, [out, lane], flags), 1)
        return self.from_compute(out, d)

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

