"""render_tiles: the renderer's register tiles as vectors (tgfx/lowering/packs.py): lanes of scalar accumulators
packed into vector registers, their loads side by side or masked, square tiles read by columns transposed in
registers; a mixin of `LLVMRenderer`."""
from __future__ import annotations

from collections.abc import Iterator

from tgfx.dtypes import DType
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.llvm_rules import (
    _UPDATE_FLAGS,
    _VALUE_OPS,
    _VECTOR_OPS,
    _side_by_side,
    _suffix,
    alu_rules,
    compute_type,
    mem_type,
    reg_type,
)
from tgfx.lowering.packs import (
    MAX_STEP,
    Pack,
    StorePack,
    direct_load,
    masked_read,
    split_offset,
    strided,
    unclamped_offset,
)


class RegisterTiles:
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

