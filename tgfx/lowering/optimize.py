"""optimize: per-kernel options on ranges, applied as graph rewrites of the index-level kernel (SPEC §7).

An option is `Opt(op, axis, amount)`; `axis` names a range by its id (rangeify numbers the output axes first, then
each reduce's axes). Options:

- UPCAST: split an output range by `amount` and unroll the inner part. Where every buffer access the inner part
  reaches reads or writes it side by side (stride 1: the columns of a matmul tile, the elements of a row), it
  becomes a "vector" range: one `<amount x T>` value per node that depends on it, which the renderer emits as LLVM
  vector instructions (`vector_lanes`). Otherwise each store (and each reduce feeding it) is replicated per lane;
  LLVM's SLP vectoriser turns adjacent lanes into vector instructions, and lanes that read the same element share
  the load (register blocking).
- UNROLL: the same for a reduce range: `amount` consecutive iterations are combined in one loop iteration. Where
  the lanes' accesses are side by side it is a vector range too: each reduce over the range becomes a reduce over its
  outer part whose accumulator is a vector of `amount` partial results, and a REDUCE over the vector range that
  combines them after the loop (a horizontal reduce); otherwise each reduce is replicated per lane.
  UPCAST or UNROLL by 0 takes the whole range as copies, never a vector, and leaves no range (`_whole_copies`).
- THREAD: split an output range across `amount` cores: the kernel receives its core id (a `SPECIAL`) and the runtime
  launches it with `global_size = amount`.
- PADTO: round a range up to a multiple of `amount`, so a 1000-wide axis can be UPCAST by 16. The extra iterations
  are masked: a load whose offset could leave its buffer is clamped to offset 0, a store is gated (`STORE(idx, v,
  gate)`, which the renderer branches around), a reduce over the range adds its identity. At most doubles the range.
- SWAP: exchange the loop order of two output ranges (`axis` and `amount` are their ids). The linearizer nests loops
  by id, so the two ranges trade ids: after `SWAP(0, 2)`, range 0 is the old range 2, now outermost.
- GLOBAL, LOCAL, GROUP: a GPU's grid, block threads and grouped reductions (`optimize_gpu.py`); not applied on the
  CPU.

Options apply in order, each to the result of the last; an axis keeps its id through UPCAST, UNROLL, THREAD and PADTO
(the outer part of a split keeps it). An option that does not fit the kernel raises `KernelOptError`, which search
skips. `hand_coded_opts` picks the defaults from the target (`tgfx/devices/target.py`: vector width and registers,
cores): register-block contractions (UPCAST a stride-1 output axis by two vectors' lanes and a reused one by as many
rows as the registers hold) and spread large kernels over the cores. With `BEAM=n`, `optimize` searches instead
(`tgfx/lowering/search.py`); `use_opts` forces a list on every kernel lowered inside it (tests, experiments).
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tgfx import config
from tgfx.devices.target import CACHE_LINE, PAGE_BYTES, STLB_PAGES, TRANSCENDENTAL_OPS, Target
from tgfx.dtypes import dtypes
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.linearize import is_vector_range, range_deps, reduces_inside
from tgfx.lowering.packs import MAX_STEP, split_offset, square_tiles
from tgfx.lowering.rangeify import clamp, reduce_identity
from tgfx.lowering.symbolic import divmods, pm_symbolic, sum_terms


class KernelOptError(ValueError):
    pass


@dataclass(frozen=True)
class Opt:
    op: str
    axis: int
    amount: int

    def __repr__(self) -> str:
        return f"Opt({self.op}, {self.axis}, {self.amount})"


def _padding(n: int, multiple: int) -> int:
    """What padding `n` up to a multiple of `multiple` adds."""
    return _round_up(n, multiple) - n


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def ranges(sink: UOp) -> dict[int, UOp]:
    return {u.arg[0]: u for u in sink.toposort() if u.op is Ops.RANGE}


def _carried(sink: UOp) -> bool:
    """Whether `sink` is a loop kernel's (`loop_kernel.py`: its carries are REDUCEs with a tuple arg)."""
    return any(u.op is Ops.REDUCE and isinstance(u.arg, tuple) for u in sink.toposort())


def _split(sink: UOp, opt: Opt, kind: str) -> tuple[UOp, UOp, int]:
    if opt.op not in ("THREAD", "UPCAST") and _carried(sink):
        raise KernelOptError(f"{opt}: a loop kernel's carries are stepped in order; only THREAD and a vector UPCAST "
                             f"of its elements apply")
    rng = ranges(sink).get(opt.axis)
    if rng is None or rng.arg[1] != kind:
        raise KernelOptError(f"{opt}: no {kind} range {opt.axis} in this kernel")
    size = rng.src[0].arg
    if opt.amount <= 1 or size % opt.amount:
        raise KernelOptError(f"{opt}: range of size {size} does not split by {opt.amount}")
    outer = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, size // opt.amount),), rng.arg)
    return rng, outer, size


def _lane_copies(root: UOp, rng: UOp, lanes: list[UOp]) -> list[UOp]:
    """`root` with range `rng` replaced by each of `lanes`, rebuilding only the nodes that depend on it (a lane shares
    the rest of the graph with the other lanes): those nodes are found once, in order, and each lane replays them."""
    if rng not in range_deps(root):
        return [root] * len(lanes)
    dependent = [u for u in root.toposort(lambda u: u.src if rng in range_deps(u) else ()) if rng in range_deps(u)]
    out = []
    for lane in lanes:
        new: dict[UOp, UOp] = {rng: lane}
        get = new.get
        for u in dependent:
            if u is not rng:
                new[u] = UOp(u.op, u.dtype, tuple([get(s, s) for s in u.src]), u.arg, u.tag)
        out.append(new[root])
    return out


def _steps_as_one(index: UOp, outer: UOp, inner: UOp) -> bool:
    """Whether `index` steps through ranges `outer` and `inner` as through one, `outer * n + inner` (n: the size of
    `inner`), each scaled alike (or reads along neither)."""
    c = _coef(index, inner)
    return c is not None and _coef(index, outer) == inner.src[0].arg * c


def merge_loops(sink: UOp) -> UOp:
    """Adjacent output loops that every index steps through as one loop, `outer * n + inner` (an elementwise kernel
    over a contiguous (512, 10) value), become one loop of their product. Kept apart, LLVM unrolls the short inner
    loop and vectorises the outer one with gathers and scatters at stride n (slow to compile and to run).

    The pair is replaced by `merged // n` and `merged % n` and the kernel simplified; the merge stands when that
    leaves no more divisions than there were (every index folded `(m // n) * n + m % n` back to m)."""
    if any(u.op is Ops.REDUCE and isinstance(u.arg, tuple) for u in sink.toposort()):
        return sink   # a loop kernel's carries
    while True:
        nodes = sink.toposort()
        loops = sorted((u for u in nodes if u.op is Ops.RANGE and u.arg[1] == "loop"), key=lambda r: r.arg[0])
        indexes = [u.src[1] for u in nodes if u.op is Ops.INDEX]
        divisions = divmods(nodes)
        for outer, inner in zip(loops, loops[1:], strict=False):
            n = inner.src[0].arg
            if not indexes or not all(_steps_as_one(i, outer, inner) for i in indexes):
                continue
            merged = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, outer.src[0].arg * n),), outer.arg)
            new = graph_rewrite(sink.substitute({outer: merged // n, inner: merged % n}), pm_symbolic,
                                name="merge loops")
            if divmods(new.toposort()) <= divisions:
                sink = new
                break
        else:
            return sink


# an output loop is split (`split_ranges`) only into inner loops this long: what a vector of floats takes (AVX2's 8)
MIN_SPLIT_LOOP = 8


def split_ranges(sink: UOp, kinds: tuple[str, ...] = ("reduce", "loop")) -> UOp:
    """A reduce range read as `r // k` and `r % k` (a sum over heads x head dims that an operand stores apart: the
    gradient of attention's input projections, `dq @ wq.T` with dq laid out by head) becomes two reduce ranges,
    `hi * k + lo`, so that every index is affine in each: such a contraction got no register tile, and its loads were
    scalar and strided (a transformer step's `dx`: 136 ms). The split stands when it leaves fewer divisions. So does an
    output range (of a kind in `kinds`), `lo` its innermost loop: the bias gradient of those projections (a sum over
    batch and sequence of a value laid out by head) had no axis a vector could take."""
    if "loop" in kinds and any(u.op is Ops.REDUCE and (isinstance(u.arg, tuple) or u.src[0].op is Ops.MUL)
                               for u in sink.toposort()):
        # (not a loop kernel's, whose carries are stepped in order, nor a contraction's: its packed operand's panels
        # are read as `j // n` and `j % n` on purpose, `_lane_coef` reads the tile's lanes through them)
        kinds = tuple(k for k in kinds if k != "loop")
    while True:
        nodes = sink.toposort()
        divisions = divmods(nodes)
        # (an output range only if it is the innermost loop, `lo` the next one inside it as the loops nest by id, and
        # `lo` no shorter than a vector: a pooling gradient's rows split into pairs ran 3x slower)
        inner = max((u for u in nodes if u.op is Ops.RANGE and u.arg[1] == "loop"), key=lambda r: r.arg[0],
                    default=None)
        found = next(((u.src[0], u.src[1].arg) for u in nodes if u.op in (Ops.IDIV, Ops.MOD) and
                      u.src[0].op is Ops.RANGE and u.src[0].arg[1] in kinds and u.src[1].op is Ops.CONST and
                      (u.src[0].arg[1] == "reduce" or u.src[0] is inner and u.src[1].arg >= MIN_SPLIT_LOOP) and
                      1 < u.src[1].arg < u.src[0].src[0].arg and u.src[0].src[0].arg % u.src[1].arg == 0), None)
        if found is None:
            return sink
        rng, k = found
        hi = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, rng.src[0].arg // k),), rng.arg)
        lo = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, k),),
                 (max(u.arg[0] for u in nodes if u.op is Ops.RANGE) + 1, rng.arg[1]))
        new: dict[UOp, UOp] = {rng: hi * k + lo}
        for u in nodes:
            if u is rng:
                continue
            src = tuple(new[s] if s is not rng or u.op is not Ops.REDUCE else s for s in u.src)
            if u.op is Ops.REDUCE and rng in u.src[1:]:
                src = (src[0], *(r for s in src[1:] for r in ((hi, lo) if s is rng else (s,))))
            new[u] = u if src == u.src else u.replace(src=src)
        split = graph_rewrite(new[sink], pm_symbolic, name="split ranges")
        if divmods(split.toposort()) >= divisions:
            return sink
        sink = split


def _without_term(e: UOp, rng: UOp) -> tuple[UOp, int] | None:
    """The sum `e` less one term `rng` or `rng * c` (c constant), and c (None if `rng` is no such term of it)."""
    if e is rng:
        return e.const_like(0), 1
    if e.op is Ops.MUL and e.src[0] is rng and e.src[1].op is Ops.CONST:
        return e.const_like(0), e.src[1].arg
    if e.op is not Ops.ADD:
        return None
    for i, s in enumerate(e.src):
        if (found := _without_term(s, rng)) is not None:
            rest, c = found
            return (rest + e.src[1 - i] if not (rest.op is Ops.CONST and rest.arg == 0) else e.src[1 - i]), c
    return None


def hoist_lane(sink: UOp, rng: UOp) -> UOp:
    """Masked reads `buf[where(c, e + rng * s, 0)]` of the range about to be upcast, as `buf[where(c, e, 0) + rng * s]`.

    A padded read (a convolution's input) is clamped to offset 0 lane by lane, and after UPCAST the lanes'
    `where(c_j, e + j * s, 0)` are no evenly spaced addresses to LLVM or the renderer's packs: they are gathered,
    element by element. With the lane outside the clamp the lanes read `base + j * s` from one base, a vector load
    (every s-th element of one: a strided convolution's), and only the value's select stays per lane (the edge lanes'
    masks differ; the middle ones' are the same after simplification). Both forms read e + rng * s where c holds;
    where it does not the new one reads offset rng * s, which is inside the buffer when the range's reads are."""
    def rewrite(idx: UOp) -> UOp | None:
        buf, off = idx.src[0], idx.src[1]
        if buf.op is not Ops.DEFINE_GLOBAL or off.op is not Ops.WHERE or off.src[2].op is not Ops.CONST or \
                off.src[2].arg != 0:
            return None
        found = _without_term(off.src[1], rng)
        if found is None or rng in range_deps(found[0]) or not 0 < found[1] or \
                (rng.src[0].arg - 1) * found[1] >= buf.arg[1]:
            return None
        rest, step = found
        return idx.replace(src=(buf, off.src[0].where(rest, 0) + (rng if step == 1 else rng * step), *idx.src[2:]))
    reads = {u.src[0] for u in sink.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX}   # never a store's
    mapping = {u: new for u in reads if (new := rewrite(u)) is not None}
    return sink.substitute(mapping) if mapping else sink


# UPCAST and UNROLL make vector ranges where they fit (`vector_lanes`); False: lanes are always copies (tests compare
# the two)
VECTOR_UPCAST = True


def unit_stride(index: UOp, lane: UOp) -> bool:
    """Whether `index` is a sum whose one term `lane` is the only one depending on it: the lanes read side by side."""
    found = 0
    for t in sum_terms(index):
        if t is lane:
            found += 1
        elif lane in range_deps(t):
            return False
    return found == 1


def masked_unit_stride(index: UOp, lane: UOp) -> tuple[UOp, UOp, list[UOp]] | None:
    """(valid, e, rest) if `index` is `where(valid, e, 0)` plus terms `rest` that do not depend on `lane`, with `e`
    read side by side by the lanes and `valid` computed outside any reduce loop (a padded axis's tail): a read the
    renderer loads as one masked vector from lane 0 of `e + rest` (a lane whose mask fails reads nothing). None
    otherwise. A convolution's padded input, whose validity changes with the kernel's taps inside the reduce loop, is
    not: as a vector its mask took as many vector compares as the loop has FMAs (the CNN step's second convolution
    190 -> 230 us); its lanes stay copies, whose masks the renderer builds from each lane's folded condition."""
    terms = sum_terms(index)
    clamped = [t for t in terms if lane in range_deps(t)]
    if len(clamped) != 1 or (w := clamped[0]).op is not Ops.WHERE or w.src[2].op is not Ops.CONST or \
            w.src[2].arg != 0 or not unit_stride(w.src[1], lane) or \
            any(r.arg[1] == "reduce" for r in range_deps(w.src[0])):
        return None
    return w.src[0], w.src[1], [t for t in terms if t is not w]


def vector_lanes(sink: UOp, rng: UOp, outer: UOp, amount: int) -> UOp | None:
    """`sink` with `rng` as `outer * amount + lane`, `lane` a range of kind "vector" that stays one node: everything
    depending on it is a vector of `amount` values (SPEC §7's expand, done in the renderer), where copies per lane
    cost the options, linearizer and renderer `amount` times the nodes (a 32 x 8 matmul tile: 256 copies of its
    update, 30 ms of Python, and LLVM's SLP vectoriser rebuilding the vectors). For a reduce range (UNROLL), each
    reduce over it sums a vector of partial results, which a REDUCE over `lane` combines (`_lanes_reduced`).

    The lanes' accesses: side by side (a vector load or store), a padded axis side by side (a masked load or
    store), a read strided by a constant outside any reduce loop (a transpose's: the renderer reads a square of them,
    another UPCAST's copies, as rows it transposes in registers, else element by element), a store strided by a
    constant of a reduce's result (a scatter, once per output: a weight gradient's columns) or by at most MAX_STEP
    (the renderer's masked store of the lanes spread). None where a
    vector does not fit (lane copies stay): a second vector range, any other access, float16/bfloat16 values
    (computed in float per lane)."""
    nodes = sink.toposort()
    if any(is_vector_range(u) for u in nodes):
        return None
    lane = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, amount),),
               (max(u.arg[0] for u in nodes if u.op is Ops.RANGE) + 1, "vector"))
    reduced = rng.arg[1] == "reduce"
    out = graph_rewrite(_lanes_reduced(nodes, rng, outer, lane) if reduced else
                        sink.substitute({rng: outer * amount + lane}), pm_symbolic, name="vector lanes")
    stored = {st.src[0]: st.src[1] for st in out.src if st.op is Ops.STORE}
    tiled = _store_tiles(list(stored), lane, amount)
    # (an UPCAST's lanes reach the stores; an UNROLL's end in the REDUCEs that combine them)
    for u in out.toposort() if reduced else out.toposort(lambda u: u.src if lane in range_deps(u) else ()):
        if lane not in range_deps(u):
            continue
        if u.dtype in (dtypes.float16, dtypes.bfloat16):
            return None
        if u.op is not Ops.INDEX or unit_stride(u.src[1], lane):
            continue
        if u.src[0].op is not Ops.DEFINE_GLOBAL:
            return None
        if u in stored:   # a padded axis's store (masked: PADTO gates it too), a reduce's result, strided, or a
            # store a short step apart (a complex value's parts into its pairs: one masked vector store each)
            step = _coef(u.src[1], lane)
            if masked_unit_stride(u.src[1], lane) is None and (step is None or u.src[1].op is Ops.WHERE or
                                                               not reduces_inside(stored[u]) and u not in tiled and
                                                               not (step != 1 and abs(step) <= MAX_STEP)):
                return None
        elif masked_unit_stride(u.src[1], lane) is None and (u.src[1].op is Ops.WHERE or _coef(u.src[1], lane) is None
                                                         or any(r.arg[1] == "reduce" for r in range_deps(u))):
            return None   # a strided read in a reduce loop: a gather each step (a convolution's weights)
    return out


def _store_tiles(indexes: list[UOp], lane: UOp, amount: int) -> set[UOp]:
    """The strided store `indexes` that make square tiles: `amount` copies (another range's, whole) at offsets
    `m + c + lane * s` for c = j .. j + amount - 1, which the renderer transposes in registers and stores as `amount`
    vectors (`render_llvm.find_wide_tiles`), not as a scatter each."""
    groups: dict[tuple, dict[int, UOp]] = {}
    for idx in indexes:
        if idx.src[1].op is not Ops.WHERE and (step := _coef(idx.src[1], lane)) not in (None, 0, 1):
            terms, const = split_offset(idx.src[1])
            groups.setdefault((idx.src[0], terms, step), {})[const] = idx
    return {idx for by_const in groups.values() for tile in square_tiles(by_const, amount) for idx in tile}


def _lanes_reduced(nodes: list[UOp], rng: UOp, outer: UOp, lane: UOp) -> UOp:
    """The kernel (`nodes`: its toposort) with reduce range `rng` as `outer * amount + lane`: each REDUCE over it a
    REDUCE over `outer` (and its other ranges), a vector of the lanes' partial results, inside a REDUCE over `lane`
    that combines them."""
    new: dict[UOp, UOp] = {rng: outer * lane.src[0].arg + lane}
    for u in nodes:
        if u is rng:
            continue
        src = tuple(new[s] for s in u.src)
        if u.op is Ops.REDUCE and rng in u.src[1:]:
            partial = UOp(Ops.REDUCE, u.dtype, (src[0], *(outer if r is rng else r for r in u.src[1:])), u.arg)
            new[u] = UOp(Ops.REDUCE, u.dtype, (partial, lane), u.arg)
        else:
            new[u] = u if src == u.src else u.replace(src=src)
    return new[nodes[-1]]


def upcast(sink: UOp, opt: Opt, vector: bool = True) -> UOp:
    """UPCAST (see the module docstring); `vector` False: lanes are copies (the GPU's, whose renderer reads them as a
    thread's vector loads)."""
    if opt.amount == 0:
        return _whole_copies(sink, opt, "loop")
    rng, outer, _ = _split(sink, opt, "loop")
    if vector and VECTOR_UPCAST and (vec := vector_lanes(sink, rng, outer, opt.amount)) is not None:
        return vec
    if _carried(sink):   # (each carry one register: its elements may be one vector's lanes, not copies)
        raise KernelOptError(f"{opt}: a loop kernel's elements are upcast only as one vector")
    sink = hoist_lane(sink, rng)
    lanes = [outer * opt.amount + c for c in range(opt.amount)]
    stores = [copy for st in sink.src for copy in _lane_copies(st, rng, lanes)]
    return UOp(Ops.SINK, None, tuple(dict.fromkeys(stores)), sink.arg)


def unroll(sink: UOp, opt: Opt, vector: bool = True) -> UOp:
    """Each reduce over the range becomes `amount` partial reduces over its lanes, combined after the loop: one
    vector accumulator where the lanes fit a vector range (`vector_lanes`), else independent accumulators (which the
    linearizer puts in one loop and SLP vectorises)."""
    if opt.amount == 0:
        return _whole_copies(sink, opt, "reduce")
    rng, outer, _ = _split(sink, opt, "reduce")
    if vector and VECTOR_UPCAST and (vec := vector_lanes(sink, rng, outer, opt.amount)) is not None:
        return vec
    sink = hoist_lane(sink, rng)
    lanes = [outer * opt.amount + c for c in range(opt.amount)]
    mapping = {}
    for red in (u for u in sink.toposort() if u.op is Ops.REDUCE and rng in u.src[1:]):
        others = tuple(outer if r is rng else r for r in red.src[1:])
        mapping[red] = _combined(red, [UOp(Ops.REDUCE, red.dtype, (copy, *others), red.arg)
                                       for copy in _lane_copies(red.src[0], rng, lanes)])
    return sink.substitute(mapping)


def _combined(red: UOp, parts: list[UOp]) -> UOp:
    """`parts` of reduce `red`, combined by its op in a balanced tree."""
    while len(parts) > 1:
        parts = [UOp(red.arg, red.dtype, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def _whole_copies(sink: UOp, opt: Opt, kind: str) -> UOp:
    """UPCAST or UNROLL by 0: the whole range as copies, one per index (a constant), and no range left: an output
    loop's stores are replicated per index, a reduce over it combines its copies (a balanced tree). Never a vector
    range, so that one may be made of another axis (`across_rows_opts`: a short row's elements as copies, the rows as
    a vector's lanes)."""
    if _carried(sink):
        raise KernelOptError(f"{opt}: a loop kernel's carries are stepped in order")
    rng = ranges(sink).get(opt.axis)
    if rng is None or rng.arg[1] != kind:
        raise KernelOptError(f"{opt}: no {kind} range {opt.axis} in this kernel")
    lanes = [UOp.const(dtypes.index, c) for c in range(rng.src[0].arg)]
    if kind == "loop":
        stores = [copy for st in sink.src for copy in _lane_copies(st, rng, lanes)]
        return UOp(Ops.SINK, None, tuple(dict.fromkeys(stores)), sink.arg)
    mapping = {}
    for red in (u for u in sink.toposort() if u.op is Ops.REDUCE and rng in u.src[1:]):
        others = tuple(r for r in red.src[1:] if r is not rng)
        mapping[red] = _combined(red, [UOp(Ops.REDUCE, red.dtype, (copy, *others), red.arg) if others else copy
                                       for copy in _lane_copies(red.src[0], rng, lanes)])
    return sink.substitute(mapping)


def thread(sink: UOp, opt: Opt) -> UOp:
    rng, outer, size = _split(sink, opt, "loop")
    if any(u.op is Ops.SPECIAL for u in sink.toposort()):
        raise KernelOptError(f"{opt}: the kernel is already split across cores")
    core = UOp(Ops.SPECIAL, dtypes.index, (), ("core", opt.amount))
    return sink.substitute({rng: core * (size // opt.amount) + outer})


def padto(sink: UOp, opt: Opt) -> UOp:
    """The range runs to the next multiple of `amount`; what the extra iterations would do is masked off."""
    rng = ranges(sink).get(opt.axis)
    if rng is None:
        raise KernelOptError(f"{opt}: no range {opt.axis} in this kernel")
    size = rng.src[0].arg
    padded = _round_up(size, opt.amount) if opt.amount > 1 else size
    if padded == size:
        raise KernelOptError(f"{opt}: range of size {size} is already a multiple of {opt.amount}")
    if padded > 2 * size:
        raise KernelOptError(f"{opt}: padding range of size {size} to {padded} would more than double its work")
    return pad_range(sink, rng, padded)


def pad_range(sink: UOp, rng: UOp, padded: int) -> UOp:
    """`sink` with range `rng` running to `padded` (its id kept), the extra iterations masked (PADTO's rewrite; the
    GPU's thread splits pad by more than double)."""
    size = rng.src[0].arg
    new_rng = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, padded),), rng.arg)
    valid = new_rng < UOp.const(dtypes.index, size)
    new: dict[UOp, UOp] = {}
    for u in sink.toposort():
        src = tuple(new[s] for s in u.src)
        v = new_rng if u is rng else u if src == u.src else u.replace(src=src)
        if v.op is Ops.INDEX and v.src[0].op is Ops.DEFINE_GLOBAL and new_rng in range_deps(v.src[1]):
            v = v.replace(src=(v.src[0], clamp(v.src[0], v.src[1], valid)))  # in bounds, so still safe to hoist
        elif v.op is Ops.REDUCE and new_rng in v.src[1:]:
            val = v.src[0]
            v = v.replace(src=(valid.where(val, val.const_like(reduce_identity(v.arg, val.dtype))), *v.src[1:]))
        elif v.op is Ops.STORE and new_rng in range_deps(v):
            v = v.replace(src=(*v.src[:2], valid if len(v.src) == 2 else v.src[2] & valid))
        new[u] = v
    return new[sink]


def swap(sink: UOp, opt: Opt) -> UOp:
    rngs = ranges(sink)
    a, b = rngs.get(opt.axis), rngs.get(opt.amount)
    if a is None or b is None or a is b or a.arg[1] != "loop" or b.arg[1] != "loop":
        raise KernelOptError(f"{opt}: needs two different output (loop) ranges, got ids {opt.axis} and {opt.amount}")
    # simultaneous: when the sizes match, `a`'s replacement is `b` itself and the other way round
    a_new, b_new = UOp(Ops.RANGE, dtypes.index, a.src, b.arg), UOp(Ops.RANGE, dtypes.index, b.src, a.arg)
    return sink.substitute({a: a_new, b: b_new})


_APPLY = {"UPCAST": upcast, "UNROLL": unroll, "THREAD": thread, "PADTO": padto, "SWAP": swap}
OPT_OPS = tuple(_APPLY)  # the options the CPU applies


def fold_gated_store(st: UOp, gate: UOp) -> UOp | None:
    return UOp(Ops.STORE, None, st.src[:2]) if gate.arg else None


def drop_never_stores(x: UOp) -> UOp | None:
    kept = tuple(s for s in x.src if not (len(s.src) == 3 and s.src[2].op is Ops.CONST and not s.src[2].arg))
    return x.replace(src=kept) if len(kept) < len(x.src) else None


pm_fold_gates = PatternMatcher([
    # a store the bounds prove always (or never) valid after an UPCAST of a padded range loses its gate (or itself)
    (UPat(Ops.STORE, src=(UPat(), UPat(), UPat.cvar("gate")), name="st"), fold_gated_store),
    (UPat(Ops.SINK, name="x"), drop_never_stores),
], pure=True)


_pm_after_opt = pm_symbolic + pm_fold_gates


def apply_opt(sink: UOp, opt: Opt, simplify: bool = True) -> UOp:
    if opt.op not in _APPLY:
        raise KernelOptError(f"{opt}: {opt.op} is not supported on the CPU")
    out = _APPLY[opt.op](sink, opt)
    return graph_rewrite(out, _pm_after_opt, name="symbolic after opt") if simplify else out


def apply_opts(sink: UOp, opts: Sequence[Opt]) -> UOp:
    """Apply every option in order; the first that does not fit raises `KernelOptError`."""
    for opt in opts:
        sink = apply_opt(sink, opt)
    return sink


_forced: contextvars.ContextVar[tuple[Opt, ...] | None] = contextvars.ContextVar("forced_opts", default=None)


@contextlib.contextmanager
def use_opts(opts: Sequence[Opt]) -> Iterator[None]:
    """Lower every kernel compiled inside the block with exactly `opts` (no heuristics, no search).

    An option that does not fit a kernel raises `KernelOptError` when that kernel is lowered, so run one kernel at a
    time. Kernels compiled with forced options are cached apart from the default ones.

    >>> import numpy as np, tgfx as tg
    >>> a, b = tg.asarray(np.ones((10, 3), np.float32)), tg.asarray(np.ones((3, 1000), np.float32))
    >>> with use_opts([Opt("PADTO", 1, 16), Opt("UPCAST", 1, 16)]):
    ...     float((a @ b).numpy().sum())
    30000.0
    """
    token = _forced.set(tuple(opts))
    try:
        yield
    finally:
        _forced.reset(token)


def forced_opts() -> tuple[Opt, ...] | None:
    """The options `use_opts` forces here, or None."""
    return _forced.get()


def global_size(sink: UOp) -> int:
    """How many core ids the kernel is launched with."""
    return max((u.arg[1] for u in sink.toposort() if u.op is Ops.SPECIAL), default=1)


def _coef(index: UOp, rng: UOp) -> int | None:
    """The constant stride of `rng` in an index that is a sum of terms, each a constant multiple of a range or of such
    a sum, or its negation (a flipped axis) (None if it appears non-linearly). A masked index `where(valid, i, 0)`
    (a padded read) strides as i does where it reads."""
    while index.op is Ops.WHERE and index.src[2].op is Ops.CONST:
        index = index.src[1]
    total = 0
    for t in sum_terms(index):
        scale = 1
        if t.op is Ops.MUL and t.src[1].op is Ops.CONST:
            t, scale = t.src[0], t.src[1].arg
        if t.op is Ops.NEG:   # a flipped axis: (-r) * c
            t, scale = t.src[0], -scale
        if t is rng:
            total += scale
        elif rng in range_deps(t):
            if t.op is not Ops.ADD or (inner := _coef(t, rng)) is None:   # (a flipped sum: -(i * 16 + lane) * 2)
                return None
            total += scale * inner
    return total


def _lane_coef(index: UOp, rng: UOp, amount: int) -> int | None:
    """The stride between the lanes of `rng` split by `amount` in `index`: `_coef` where the range appears linearly;
    else (a packed operand's `(j // nr) * K * nr + j % nr`, tgfx/lowering/schedule.py) the stride of the lane once
    the range is `outer * amount + lane` and the index simplified, None if that is not linear either."""
    if (c := _coef(index, rng)) is not None or rng.src[0].arg % amount:
        return c
    lane = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, amount),), (-1, "loop"))
    outer = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, rng.src[0].arg // amount),), (-2, "loop"))
    split = graph_rewrite(index.substitute({rng: outer * amount + lane}), pm_symbolic, name="lane stride")
    return _coef(split, lane)


def _vector_axis(loops: list[UOp], loads: list[UOp], hot: list[UOp], amount: int, pad: bool) -> UOp | None:
    """An output range to vectorise by `amount`: some load reads it contiguously, no load inside the reduce loop reads
    it strided (a gather), and it splits by `amount` or, with `pad`, pads to a multiple of it at most doubling."""
    for r in reversed(loops):
        n = r.src[0].arg
        fits = n % amount == 0 or (pad and _round_up(n, amount) <= 2 * n)
        if fits and any(_lane_coef(i, r, amount) == 1 for i in loads) and \
                all(_lane_coef(i, r, amount) in (0, 1) for i in hot):
            return r
    return None


# a reduce shorter than this is no contraction worth a register tile: the tile's accumulators are set up and stored
# once per output, which costs as much as the few products it would keep in registers
MIN_CONTRACTION = 8
# the most arithmetic ops an element a short contiguous sum may compute to be UNROLLed into a vector of partial sums
SHORT_SUM_OPS = 4
# a sum along a contiguous axis keeps this many vector accumulators (a chain of vector adds waits on each add)
SUM_CHAINS = 4
# an elementwise kernel's innermost row this many vectors long or shorter is one LLVM unrolls whole (see
# hand_coded_opts): it is rendered as vectors instead
SHORT_ROW = 4


def _plain_sum(red: UOp) -> bool:
    """Whether reduce `red` sums a value of at most SHORT_SUM_OPS plain arithmetic ops an element (index math aside)
    and nothing costly (`GroupOp.Costly`)."""
    values = [u for u in red.src[0].toposort() if u.op in GroupOp.ALU and u.dtype is not None and
              not u.dtype.is_int and u.dtype != dtypes.index]
    return len(values) <= SHORT_SUM_OPS and not any(u.op in GroupOp.Costly for u in values)


def _vector_sum(red: UOp) -> bool:
    """Whether reduce `red` sums a value of plain arithmetic, divisions and square roots (each one vector instruction
    a vector of lanes), no transcendental."""
    return not any(u.op in GroupOp.Transcendental for u in red.src[0].toposort())


def _selecting_extremum(reds: list[UOp]) -> bool:
    """Whether a max reduce (a min is one of negated values) takes a value chosen by a WHERE (`max(where(x == inf,
    -inf, x))`): LLVM folds the select into the loop's recurrence (`select(c, acc, max(acc, x))`), which its loop
    vectoriser does not take as a reduction, so the row stays scalar (4096 rows of 1024: 10-20 ms, the plain max
    0.3-0.6)."""
    return any(red.arg is Ops.MAX and any(u.op is Ops.WHERE for u in red.src[0].toposort()) for red in reds)


def _largest_divisor(n: int, most: int) -> int:
    """The largest divisor of `n` that is at most `most`."""
    return next(d for d in range(min(n, most), 0, -1) if n % d == 0)


def _itemsize(sink: UOp) -> int:
    """Bytes of a vector lane of the kernel: its widest stored or loaded value, and at least 4 (half floats compute in
    float, and narrower integers keep 32-bit tiles: a vector of bytes would unroll 64 lanes per row)."""
    nodes = sink.toposort()
    values = [u for u in nodes if u.op is Ops.LOAD] + [u.src[1] for u in nodes if u.op is Ops.STORE]
    return max([4, *(v.dtype.itemsize for v in values if v.dtype is not None)])


def _masked(index: UOp, rng: UOp) -> bool:
    """Whether a read is clamped by a mask that depends on `rng` (a padded read along it)."""
    return index.op is Ops.WHERE and rng in range_deps(index.src[0])


def masked_contraction_opts(loops: list[UOp], loads: list[UOp], hot: list[UOp], target: Target,
                            itemsize: int) -> list[Opt]:
    """Register tile of a contraction whose contiguous operand is a padded read: a direct convolution (implicit GEMM).

    The output axis vectorised is one the padded input reads contiguously (a convolution's output column, whose
    input is read through `where(valid, index, 0)`, `hoist_lane` making its lanes adjacent); the axis blocked is one
    that read does not vary along (the output channel), so each vector of input is loaded once per reduce step and
    multiplied by a broadcast weight per row, as a matmul's tile reuses its B vector. The tile is one vector wide by
    `conv_tile_rows` rows: a vector of a padded read is assembled from the edge lanes' loads (their masks differ) and
    needs registers of its own beside the accumulators (with AVX-512, 16 x 8 ran 2.6x faster than 32 x 8). An axis
    a whole vector does not divide gets half a vector, then a quarter (small images). A strided convolution's input is
    read every s-th element along the output column, masked or not: the renderer loads s vectors and keeps every s-th
    lane (`tgfx/lowering/packs.py`), so it takes the same tile."""
    rows = target.conv_tile_rows()
    lanes = target.lanes(itemsize)
    for amount in (lanes, lanes // 2, lanes // 4):
        if amount < 4:
            break
        for vec in reversed(loops):
            steps = {i: _coef(i, vec) for i in loads}
            padded = [i for i, c in steps.items() if c == 1 and _masked(i, vec) or c is not None and 1 < c <= MAX_STEP]
            if vec.src[0].arg % amount or not padded or \
                    not all(steps[i] is not None and 0 <= steps[i] <= MAX_STEP for i in hot):
                continue
            blk = next((r for r in reversed(loops) if r is not vec and r.src[0].arg % rows == 0 and
                        all(_coef(i, r) == 0 for i in padded) and any(_coef(i, r) not in (0, None) for i in loads)),
                       None)
            if blk is None:
                continue
            return [Opt("UPCAST", vec.arg[0], amount), *_whole_rows(vec, amount, lanes, loops, loads, blk),
                    Opt("UPCAST", blk.arg[0], rows)]
    return []


def _whole_rows(vec: UOp, amount: int, lanes: int, loops: list[UOp], loads: list[UOp], blk: UOp) -> list[Opt]:
    """Where `vec` is a whole axis shorter than a vector (an 8 x 8 image's rows), the UPCAST of the axis outside it
    that every read and the store step through as rows of `vec` (an image's rows: `row * width + column`), so that
    consecutive rows fill the vector: its lanes stay adjacent in memory, and a padded read is one masked load."""
    size = vec.src[0].arg
    if size != amount or amount >= lanes:
        return []
    for row in reversed(loops):
        if row is vec or row is blk or row.src[0].arg % (lanes // amount):
            continue
        if all(_steps_as_one(i, row, vec) for i in loads):
            return [Opt("UPCAST", row.arg[0], lanes // amount)]
    return []


def dot_product_opts(loops: list[UOp], reduces: list[UOp], hot: list[UOp], target: Target,
                     itemsize: int) -> list[Opt]:
    """Register tile of a contraction whose operands both run along the reduce in memory (attention's `q @ k.T`, an
    `x @ w.T` whose w is not copied transposed first): no output axis is a vector of any load, but the reduce is.
    UNROLL by a vector's lanes makes each accumulator a vector of partial sums (packs), and UPCAST of two output
    axes, each read by another operand, a tile of them: each step loads one vector per row and per column and
    multiplies every pair (rows x columns FMAs for rows + columns loads); the lanes are summed after the loop.
    Without it each output was its own dot product (attention's scores: 3.8x slower)."""
    lanes = target.lanes(itemsize)
    red = None
    for amount in (a for a in (lanes, lanes // 2, lanes // 4) if a >= 4):   # a reduce of 24 (features): 3 halves
        red = next((r for r in reduces if r.src[0].arg % amount == 0 and all(_coef(i, r) in (0, 1) for i in hot) and
                    sum(_coef(i, r) == 1 for i in hot) >= 2), None)
        if red is not None:
            break
    if red is None:
        return []
    opts, picked = [Opt("UNROLL", red.arg[0], amount)], []
    for amount in target.dot_tile()[::-1]:   # the columns (innermost, the store's axis), then the rows
        ax = next((r for r in reversed(loops) if r not in picked and r.src[0].arg % amount == 0 and any(
            _coef(i, r) not in (0, None) and all(_coef(i, p) == 0 for p in picked) for i in hot)), None)
        if ax is not None:
            picked.append(ax)
            opts.append(Opt("UPCAST", ax.arg[0], amount))
    return opts if picked else []


# rows whose elements take a transcendental go across rows up to this many vectors: longer, their exps outweigh the
# horizontal reduces saved, and the copies of the exp's polynomial cost 10x the compile time (softmax 4096 x 64: 40 ->
# 430 ms for 320 -> 274 us a call)
TRANSCENDENTAL_ROW = 2


def across_rows_opts(sink: UOp, loops: list[UOp], reduces: list[UOp], loads: list[UOp], red_nodes: list[UOp],
                     row_kernel: bool, target: Target) -> list[Opt]:
    """Reduces along rows of at most SHORT_ROW vectors, stored contiguous (a softmax, layernorm or log-softmax row
    kernel; a logsumexp's sum of exps, a max): the rows as a vector's lanes, each row's elements as copies. Each
    reduce over a row is UNROLLed whole (by 0: copies, no loop) and so is the output's row loop, then the row axis
    is UPCAST by `w` lanes: every step reads `w` rows as a square of `w` x `w` the renderer transposes in registers
    (`render_llvm.find_wide_tiles`), each row's max and sum are vertical vector ops across the copies, its exp, log,
    division or square root one vector op for `w` rows, and the output's square is transposed back and stored as
    `w` row vectors. Kept along the row (LLVM's loop vectoriser, or a vector of the row's lanes), each row ended in
    horizontal reduces of one vector (a NaN-propagating max: a chain of 8 blends and compares) and a scalar epilogue:
    single core, Emerald Rapids, AVX-512: softmax 8192 x 16 250 -> 134 us, log_softmax 555 -> 132, logsumexp
    286 -> 100 (its max kernel and its exp-sum kernel), layernorm 4096 x 64 257 -> 114; not softmax 4096 x 64
    (TRANSCENDENTAL_ROW). Not a plain sum (4096 x 64: 11 -> 27 us, its loads are the cost). `w`: a
    power of two up to a vector's lanes (the target's) dividing the row and the rows (1000 rows of 16: 8), at least
    MIN_SPLIT_LOOP."""
    lanes = target.lanes(_itemsize(sink))
    sizes = {r.src[0].arg for r in reduces}
    if len(sizes) != 1 or len(sink.src) != 1 or _carried(sink):
        return []
    n = sizes.pop()
    st = sink.src[0]
    if st.op is not Ops.STORE or len(st.src) != 2 or st.src[0].op is not Ops.INDEX or \
            st.src[0].src[0].op is not Ops.DEFINE_GLOBAL or n > SHORT_ROW * lanes or \
            any(len(red.src) != 2 for red in red_nodes) or \
            any(u.dtype in (dtypes.float16, dtypes.bfloat16) for u in sink.toposort()) or \
            any(u.op is Ops.LOAD for i in loads for u in i.toposort()):   # (a gather: no tile)
        return []
    if not row_kernel and all(red.arg is Ops.ADD and _plain_sum(red) for red in red_nodes):
        return []
    transcendental = any(u.op in GroupOp.Transcendental for u in sink.toposort())
    if n > TRANSCENDENTAL_ROW * lanes and transcendental:
        return []
    out = st.src[0].src[1]
    col = None
    if row_kernel:   # the output's row: the innermost loop, the store's side by side, each reduce's loops outside it
        col = loops[-1]
        if col.src[0].arg != n or _coef(out, col) != 1 or \
                any(set(loops) - {col} - range_deps(red) for red in red_nodes):
            return []
    along = [*reduces, *([col] if col is not None else [])]
    # the rows: a loop each row's reads step through by a constant, and the output's by one (a value a row) or, with
    # the row's own loop, by a constant (a row of values)
    row_reads = [i for i in loads if any(_coef(i, r) != 0 for r in along)]
    if any(_coef(i, r) not in (0, 1) for i in row_reads for r in along):
        return []
    # (a read along the row that is the same for every row, a layernorm's scale, is one scalar load a copy)
    row = next((r for r in reversed(loops) if r is not col and
                (_coef(out, r) == 1 if col is None else _coef(out, r) not in (0, 1, None)) and
                any(_coef(i, r) not in (0, 1, None) for i in row_reads) and
                all(_coef(i, r) not in (1, None) for i in row_reads)), None)
    # (rows of fewer than MIN_SPLIT_LOOP elements, a tile narrower than it: LLVM's loop vectoriser takes the loop of
    # rows at the full width itself, and 4 lanes of 4 rows ran 2-3x slower: softmax 8192 x 4 26 -> 71 us)
    w = next((a for a in (lanes, lanes // 2, lanes // 4) if a >= MIN_SPLIT_LOOP and n % a == 0 and row is not None
              and row.src[0].arg % a == 0), None)
    if w is None or w < lanes < n and transcendental:
        # (rows of more than a vector whose elements take a transcendental, in a tile narrower than a vector: its
        # half-width polynomials ran slower than along the row, at 4x the compile: AVX-512, a GNN's 1000 x 32
        # `(tanh(h) * w).sum(-1)`, 8 rows wide, 33-45 -> 13-26 us and 125 -> 36 ms of CPU; logsumexp 56-60 -> 38-45 us)
        return []
    return [*(Opt("UNROLL", r.arg[0], 0) for r in sorted(reduces, key=lambda r: r.arg[0])),
            *([Opt("UPCAST", col.arg[0], 0)] if col is not None else []), Opt("UPCAST", row.arg[0], w)]


# a register tile taller than a power of two (`Target.padded_tile_rows`) pads its row axis by at most this share of it
TILE_PAD_SHARE = 32
# a register tile's rows are padded by at most this share to run along an axis whose vectors they share
ROW_PAD_SHARE = 8
# a loop that splits unevenly over the cores is padded to a multiple of them by at most this share of it
THREAD_PAD_SHARE = 8


def hand_coded_opts(sink: UOp, target: Target) -> list[Opt]:
    """Default options for `target`: register blocking for contractions, and threads for big kernels."""
    if config.NOOPT:
        return []
    rngs = ranges(sink)
    loops = [r for r in sorted(rngs.values(), key=lambda r: r.arg[0]) if r.arg[1] == "loop"]
    reduces = [r for r in rngs.values() if r.arg[1] == "reduce"]
    loads = [u.src[0].src[1] for u in sink.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX]
    work = 1
    for r in rngs.values():
        work *= r.src[0].arg
    # the loads inside the reduce loop, which an output axis must not turn into gathers to be vectorised
    hot = [i for i in loads if any(_coef(i, r) != 0 for r in reduces)]
    opts: list[Opt] = []
    red_size = 1
    for r in reduces:
        red_size *= r.src[0].arg
    itemsize = _itemsize(sink)
    lanes = target.lanes(itemsize)
    # a row kernel (softmax, layernorm: tgfx/lowering/schedule.py fuses a row's reduces into the kernel that reads
    # them): reduces that only outer loops depend on, run once per row before its inner loops. LLVM's loop vectoriser
    # takes each of its loops (the reductions too); a register tile would turn it off and leave them scalar
    red_nodes = [u for u in sink.toposort() if u.op is Ops.REDUCE and not isinstance(u.arg, tuple)]
    row_kernel = any(not set(loops) <= range_deps(red) for red in red_nodes)
    # reduces side by side (`tanh(x @ a) + y @ b`, a gradient's sum of products) run one after the other, not nested:
    # the product of every range counted them as nested (64 x 8 outputs of two 32-long sums as 524,288 iterations,
    # split 8 ways on 2 cores: 21-45 us a call, a reverse scan's step, where one thread takes 3)
    siblings = len(set(red_nodes)) > 1 and all(r.arg[1] in ("loop", "reduce") for r in rngs.values())
    if row_kernel or siblings:   # the loops it runs: each (row's) reduce's passes, and the output's
        work = math.prod(r.src[0].arg for r in loops) + sum(
            math.prod(r.src[0].arg for r in (*range_deps(red), *red.src[1:])) for red in set(red_nodes))
    work *= 1 + TRANSCENDENTAL_OPS * _inner_transcendentals(sink, reduces or loops)
    if reduces:
        # reduces over rows a few vectors long: the rows as a vector's lanes (see `across_rows_opts`)
        opts += across_rows_opts(sink, loops, reduces, loads, red_nodes, row_kernel, target)
    contraction = bool(reduces) and not row_kernel and red_size >= MIN_CONTRACTION and len(sink.src) == 1 and not opts
    if contraction:
        opts += masked_contraction_opts(loops, loads, hot, target, itemsize)
    if contraction and not opts:
        # a contraction: vectorise an output axis some input reads contiguously, block another that an input reuses.
        # The tile (two vector registers of lanes by as many rows as the registers hold: 32 x 8 with AVX-512, 16 x 4
        # with AVX2) keeps every accumulator in a register.
        # An axis that does not split is padded (PADTO, masked), e.g. the 10 classes of a classifier's last layer.
        choices = target.contraction_tiles(itemsize)
        for pad, (vec_amt, blk_amt) in ((pad, c) for pad in (False, True) for c in choices):
            vec = _vector_axis(loops, loads, hot, vec_amt, pad)
            if vec is None or not any(_coef(i, vec) == 0 for i in loads):
                continue
            if vec.src[0].arg % vec_amt:
                opts.append(Opt("PADTO", vec.arg[0], vec_amt))
            opts.append(Opt("UPCAST", vec.arg[0], vec_amt))
            reused = [r for r in reversed(loops) if r is not vec and any(_coef(i, r) == 0 for i in loads)]
            # rows along which the loads of vectors stay the same first: each vector read then serves every row of
            # the tile, a scalar of the other operand broadcast per row (rows along which only that operand stays,
            # an FFT stage's blocks reused across its columns' digits, loaded a vector per row and step: 19 -> 6 us)
            vectors = [i for i in hot if _lane_coef(i, vec, vec_amt) == 1]
            same = [r for r in reused if all(_coef(i, r) == 0 for i in vectors)]
            reused.sort(key=lambda r: r not in same)
            plain = list(opts)   # the tile's rows: a power of two
            blk = next((r for r in reused if r.src[0].arg % blk_amt == 0), None)
            if blk is not None and blk not in same and (pad := next(
                    (r for r in same if _padding(r.src[0].arg, blk_amt) <= r.src[0].arg // ROW_PAD_SHARE), None)):
                # rows along which the vectors stay the same, padded (attention's 65 queries of a head: 72), rather
                # than rows that load other vectors (its images: two loads an FMA): a ViT's 32 x 4 heads' scores of
                # 65 x 65 x 16 ran at 18 GFLOP/s
                plain.append(Opt("PADTO", pad.arg[0], blk_amt))
                blk = pad
            if blk is not None:
                plain.append(Opt("UPCAST", blk.arg[0], blk_amt))
            elif (rows := max(((_largest_divisor(r.src[0].arg, blk_amt), r) for r in reused),
                              key=lambda t: t[0], default=(1, None)))[0] * 2 >= blk_amt:
                # no axis splits into the tile's rows (a weight gradient's 10 classes): as many rows as divide one,
                # not a tile one row high that loads a vector of each operand per FMA
                plain.append(Opt("UPCAST", rows[1].arg[0], rows[0]))
            if blk_amt == target.tile_rows() < (wide := target.padded_tile_rows()) and (tall_axis := next(
                    (r for r in reused if r.src[0].arg % wide == 0 or
                     _round_up(r.src[0].arg, wide) - r.src[0].arg <= r.src[0].arg // TILE_PAD_SHARE), None)):
                # the taller tile the registers hold, its axis padded if need be (1024 rows: 1026, masked), unless
                # its blocks split over fewer threads (256 rows on 96 cores: 64 blocks of 4, 43 of 6)
                tall = [*opts, *[Opt("PADTO", tall_axis.arg[0], wide)] * bool(tall_axis.src[0].arg % wide),
                        Opt("UPCAST", tall_axis.arg[0], wide)]
                if _threads(sink, loops, tall, work, itemsize, target)[1] >= \
                        _threads(sink, loops, plain, work, itemsize, target)[1]:
                    plain = tall
            if blk is not None and vec_amt < 2 * target.lanes(itemsize) and (taps := next(
                    (r for r in reused if r is not blk and 2 <= r.src[0].arg <= target.tile_rows() and
                     r.src[0].arg * vec_amt * blk_amt <= 2 * target.lanes(itemsize) * target.tile_rows() and
                     r in same), None)):
                # a tile of one vector (an output axis of 16 channels with AVX-512) holds a quarter of the registers'
                # accumulators: rows along a short second axis the vectors do not vary along too (a 3 x 3 kernel
                # gradient's taps, x read at neighbouring columns), whole, where each pass of the reduce re-read the
                # output gradient per tap, from memory: 16 -> 16 channels of 64 x 32 x 32, 14.7 -> 4.2-5.4 ms
                plain.append(Opt("UPCAST", taps.arg[0], taps.src[0].arg))
            red = max(reduces, key=lambda r: r.src[0].arg)
            if len(plain) == len(opts) and red.src[0].arg >= 4 * SUM_CHAINS and \
                    (chains := next((c for c in range(SUM_CHAINS, 1, -1) if red.src[0].arg % c == 0), None)):
                # a tile one row high (`X.T @ e` with few features): each step's FMAs would wait on the last step's,
                # so the reduce keeps independent accumulators, summed after the loop (1000 x 24: 2.9 -> 1.1 us)
                plain.append(Opt("UNROLL", red.arg[0], chains))
            opts = plain
            if (swap := _panel_order(vec, opts, red_size, itemsize, target)) is not None:
                opts.append(swap)
            break
    if contraction and not opts:
        opts += dot_product_opts(loops, reduces, hot, target, itemsize)
    if reduces and not row_kernel and not opts:
        # a reduction over an outer axis (a column sum): vectorise an output axis that every load reads contiguously
        # or not at all, so each step of the reduce adds a vector of loads into a vector of accumulators. An axis
        # narrower than a vector, or not a multiple of one, is padded (masked lanes) to a vector or a part of one
        # (a table's 12 features summed over 20,000 rows were 12 scalar chains: 100 -> 30 us)
        vec, amount = None, lanes
        for amount, pad in ((a, pad) for a in (lanes, lanes // 2, lanes // 4) if a >= 4 for pad in (False, True)):
            if (vec := _vector_axis(loops, loads, hot, amount, pad)) is not None:
                break
        if vec is not None:
            if vec.src[0].arg % amount:
                opts.append(Opt("PADTO", vec.arg[0], amount))
            opts.append(Opt("UPCAST", vec.arg[0], amount))
            # each step's add waits on the last one's: independent accumulators, side by side along the output axis
            # where it has vectors enough (a step of the reduce then reads a run of a row, not one vector of it a page
            # from the last: each 16 columns of 1024 x 4096 swept 1024 pages, 2.7-4.9 ms; 64 columns, 0.7 ms, numpy's
            # time), and the rest along the reduce, summed after it (30 -> 22 us for 20,000 rows of 12)
            wide = next((c for c in range(SUM_CHAINS, 1, -1) if vec.src[0].arg % (amount * c) == 0), 1)
            if wide > 1:
                opts.append(Opt("UPCAST", vec.arg[0], wide))
            red = max(reduces, key=lambda r: r.src[0].arg)
            if wide < SUM_CHAINS and red.src[0].arg >= 4 * SUM_CHAINS and (chains := next(
                    (c for c in range(SUM_CHAINS // wide, 1, -1) if red.src[0].arg % c == 0), None)):
                opts.append(Opt("UNROLL", red.arg[0], chains))
    if reduces and not row_kernel and not opts and len(sink.src) == 1:
        # a sum along memory whose contiguous reduce axis is shorter than a vector (a convolution's bias gradient:
        # each channel's 8 pixels of a row, then rows, then images): no output axis is a vector of the loads and
        # LLVM's loop vectoriser does not take a loop of 8, which stayed a scalar chain of adds (0.5 GFLOP/s). The
        # axis whole, UNROLLed, is independent partial sums (which SLP vectorises), summed after the loop: 224 -> 12 us
        along = [r for r in reduces if all(_coef(i, r) in (0, 1) for i in hot) and any(_coef(i, r) == 1 for i in hot)]
        short = [r for r in along if 4 <= r.src[0].arg <= lanes and r.src[0].arg & (r.src[0].arg - 1) == 0]
        # a longer one inside other reduce loops (a batch norm's statistics of NCHW rows of 32), or a row of a few
        # vectors: vectors of partial sums (UNROLL by a vector's lanes, a vector range) in SUM_CHAINS independent
        # accumulators, summed once an output. LLVM's loop vectoriser sums each row's vector to a scalar at the row's
        # end, and made 15x the loop's code: 152 -> 28 us for 32 channels of 32 x 32 x 32, 16 -> 9 ms of LLVM. (A sum
        # of long rows alone is as fast its way: 4096 rows of 1024, 92-97 us, 105-117 this way.)
        long = [r for r in along if r.src[0].arg % lanes == 0 and
                (len(reduces) > 1 or r.src[0].arg <= SHORT_ROW * lanes or not loops or _selecting_extremum(red_nodes))]
        # (only a few plain ops an element: a costly value, a loss's logs and exps, copied per lane is no vector; a
        # longer axis's lanes are a vector range, unless its values are half floats or its element calls the C library
        # or a polynomial: a VAE's softplus loss summed so ran 10 -> 17 us)
        if short and all(_plain_sum(red) for red in red_nodes):
            opts.append(Opt("UNROLL", short[0].arg[0], short[0].src[0].arg))
        elif long and not any(u.dtype in (dtypes.float16, dtypes.bfloat16) for u in sink.toposort()) and \
                not any(_masked(i, long[0]) for i in hot) and all(_vector_sum(red) for red in red_nodes):
            opts.append(Opt("UNROLL", long[0].arg[0], lanes))
            if chains := next((c for c in range(SUM_CHAINS, 1, -1) if long[0].src[0].arg // lanes % c == 0), None):
                opts.append(Opt("UNROLL", long[0].arg[0], chains))
    if not reduces and len(sink.src) == 1 and sink.src[0].src[0].op is Ops.INDEX:
        # a transpose: the store runs along one axis, a load along another. A square tile of lanes on both reads and
        # writes whole vectors (the shuffles between are LLVM's) instead of striding through one side. Not where an
        # element also gathers (its address read from memory: a sort's `take_along_axis` by the sorted order,
        # transposed back): each of the tile's lanes is a gather of its own, no vector, and the tile of 16 x 16 of them
        # took 0.7 s to compile (a sort of 16 columns of 1024, 21 us a call)
        out = sink.src[0].src[0].src[1]
        gathers = any(u.op is Ops.LOAD for i in loads for u in i.toposort())
        s_ax = next((r for r in loops if _coef(out, r) == 1 and r.src[0].arg % lanes == 0), None)
        l_ax = None if s_ax is None or gathers else next((r for r in loops if r is not s_ax and
                                                          r.src[0].arg % lanes == 0 and any(
            _coef(i, r) == 1 and _coef(i, s_ax) not in (0, 1, None) for i in loads)), None)
        if l_ax is not None:
            opts += [Opt("UPCAST", s_ax.arg[0], lanes), Opt("UPCAST", l_ax.arg[0], lanes)]
        elif s_ax is not None and any(_coef(i, s_ax) not in (0, 1, None) for i in loads):
            # no second axis splits into lanes (a 10 x 512 transpose): vector stores of loads gathered along the
            # store's axis, where LLVM's loop vectoriser would build interleaved groups of the stride (big and slow
            # to compile)
            opts.append(Opt("UPCAST", s_ax.arg[0], lanes))
        elif s_ax is not None and s_ax is loops[-1] and s_ax.src[0].arg <= SHORT_ROW * lanes and \
                all(_coef(i, s_ax) in (0, 1) for i in loads) and any(
                    _coef(i, r) not in (0, None) and _coef(out, r) != _coef(i, r) for i in loads for r in loops):
            # rows of a few vectors, read and written along them, but read elsewhere in a different order (packing
            # `g` into panels for `x.T @ g`): LLVM unrolls the short row loop whole and vectorises the loop outside
            # it instead, with a gather and a scatter per vector (20x slower). The row as vectors of lanes is no loop
            opts.append(Opt("UPCAST", s_ax.arg[0], lanes))
    if not reduces and not opts:
        opts += _panel_copy_opts(sink, loops, loads, itemsize)
    if not reduces and not opts and (ax := _short_step_axis(sink, loops, loads, lanes)) is not None:
        opts.append(Opt("UPCAST", ax.arg[0], lanes))
        # and the elements between a store's steps (a pair's two parts) as copies: one iteration computes what they
        # share (a part read by both) once, and writes every element of the vectors' span
        steps = {abs(c) for st in sink.src if ax in range_deps(st) and (c := _coef(st.src[0].src[1], ax))}
        if (pair := next((r for r in reversed(loops) if r is not ax and r.src[0].arg in steps and
                          all(_coef(st.src[0].src[1], r) == 1 for st in sink.src if r in range_deps(st))), None)):
            opts.append(Opt("UPCAST", pair.arg[0], pair.src[0].arg))
    carried = any(r.arg[1] == "carry" for r in rngs.values())
    if loops and not opts and carried and loops[-1].src[0].arg > 1:
        # a loop kernel (`loop_kernel.py`): its steps are the innermost loop, sequential, so LLVM vectorises nothing;
        # the elements as vector lanes make each step's arithmetic vectors (the Sturm counts of eigh's bisection,
        # 128 shifts x 128 rows: 170 -> 20 us). Fewer elements than a vector's lanes, or not a multiple of them, are
        # padded (masked lanes): each element's steps are a chain of dependent divisions, one vector the same chain
        # (12 shifts x 12 rows, scalar: 1.13 us a bisection step)
        size = loops[-1].src[0].arg
        amount = min(lanes, 1 << (size - 1).bit_length())
        if size % amount:
            opts.append(Opt("PADTO", loops[-1].arg[0], amount))
        opts.append(Opt("UPCAST", loops[-1].arg[0], amount))
    if reduces and not row_kernel and not opts and loops and not carried and target.threads(work, itemsize) == 1 \
            and not any(
                all(_coef(i, r) in (0, 1) for i in hot) and any(_coef(i, r) == 1 for i in hot) for r in reduces):
        # (not split over cores, whose parts are independent already, nor a sum along memory, which LLVM's loop
        # vectoriser takes: rows of 512 as lane copies were scalar chains each)
        opts += _independent_sums(loops, lanes)
    if not reduces and not opts and (swap := _long_loop_inside(sink, loops, lanes)) is not None:
        opts.append(swap)
    if not reduces and (swap := _page_order(sink, loops, loads, opts)) is not None:
        opts.append(swap)
    opts += _thread_opts(sink, loops, opts, work, itemsize, target)
    return opts


def _panel_copy_opts(sink: UOp, loops: list[UOp], loads: list[UOp], itemsize: int) -> list[Opt]:
    """A copy into panels narrower than a cache line (a matmul's row operand packed for its register tile: (2048,
    1024) into 128 panels of 2048 rows of 8 floats): its innermost loop, a panel's row, is read and written
    contiguously, and the panels are what the read continues into. Panel by panel, each row's line was fetched
    once per panel for 32 of its 64 bytes, a page a row (2048 rows 4 KiB apart: a TLB miss each). The row as one
    vector and as many panels side by side as fill two lines read each line once: 2.2-2.5 -> 0.8 ms."""
    if len(sink.src) != 1 or sink.src[0].src[0].op is not Ops.INDEX or len(loops) < 2 or \
            any(u.op is Ops.LOAD for i in loads for u in i.toposort()):
        return []
    out, inner = sink.src[0].src[0].src[1], loops[-1]
    n = inner.src[0].arg
    along = [i for i in loads if _coef(i, inner) == 1]
    if _coef(out, inner) != 1 or n < 2 or n & (n - 1) or n * itemsize >= CACHE_LINE or not along or \
            any(_coef(i, inner) not in (0, 1) for i in loads):
        return []
    panel = next((r for r in loops if r is not inner and all(_coef(i, r) == n for i in along) and
                  _coef(out, r) not in (0, 1, n, None)), None)
    if panel is None or (amount := _largest_divisor(panel.src[0].arg, 2 * CACHE_LINE // (n * itemsize))) < 2:
        return []
    return [Opt("UPCAST", inner.arg[0], n), Opt("UPCAST", panel.arg[0], amount)]


def _short_step_axis(sink: UOp, loops: list[UOp], loads: list[UOp], lanes: int) -> UOp | None:
    """An elementwise kernel's axis to take as vectors where no store runs along one: each store two elements apart
    along it (a complex value's parts, interleaved in its pairs) and each load a short step apart, none gathered; the
    renderer reads and writes such lanes as masked vectors. LLVM's loop vectoriser took the innermost axis, the
    pair's 2, and stored element by element (irfft2's pre-processing of 128 x 65 pairs, in pieces: 38 -> 7 us).
    (Not rows of 4 or more: their lanes' masked stores are 4 a vector, against the loop they would have been.)"""
    if any(st.op is not Ops.STORE or st.src[0].op is not Ops.INDEX for st in sink.src) or \
            any(u.op is Ops.LOAD for i in loads for u in i.toposort()):
        return None
    for r in reversed(loops):
        # (the stores of the pieces outside this loop, a kernel storing its output piece by piece, aside)
        steps = [_coef(st.src[0].src[1], r) for st in sink.src if r in range_deps(st)]
        if r.src[0].arg % lanes or not steps or any(c is None or abs(c) != 2 for c in steps) or \
                any(c is None or abs(c) > MAX_STEP for i in loads if r in range_deps(i) for c in [_coef(i, r)]):
            continue
        return r
    return None


# value operations an element takes for a short innermost loop to be swapped outside a long one (`_long_loop_inside`)
HEAVY_ELEMENT_OPS = 32


def _long_loop_inside(sink: UOp, loops: list[UOp], lanes: int) -> Opt | None:
    """SWAP of an elementwise kernel's innermost loop, shorter than half a vector, with its longest outer loop where
    each element is costly (`HEAVY_ELEMENT_OPS` operations on values or more: a hash, a polynomial): the loops did not
    merge (a row of 4 reads a bias along it), LLVM's loop vectoriser takes no loop of 4, and each element's long
    computation ran scalar. With the long loop inside, it is a loop of vectors whose stores are strided (Threefry's
    bits for 64 x 4 logits plus a bias, a categorical draw in REINFORCE's scan: 2.3 -> 0.8 us, BEAM's choice)."""
    if len(loops) < 2 or loops[-1].src[0].arg * 2 >= lanes:
        return None
    outer = max(loops[:-1], key=lambda r: r.src[0].arg)
    if outer.src[0].arg < lanes or \
            sum(1 for u in sink.toposort() if u.op in GroupOp.ALU and u.dtype != dtypes.index) < HEAVY_ELEMENT_OPS:
        return None
    return Opt("SWAP", outer.arg[0], loops[-1].arg[0])


def _independent_sums(loops: list[UOp], lanes: int) -> list[Opt]:
    """A small kernel's sums that nothing above took (sibling reduces read at different strides, an output read
    through divisions, sums too short for a tile): each output one chain of dependent adds, one output after
    another. The innermost output loop as `lanes` copies (fewer where it is shorter) makes as many independent chains
    the core overlaps, whose loads and stores SLP may join into vectors. A reverse scan's step of REINFORCE (64 x 8
    outputs, a tanh and two short sums) 19.5 -> 4.5 us, 2.2 -> 1.3 ms its training step (BEAM found the same)."""
    size = loops[-1].src[0].arg
    amount = next((a for a in (lanes, lanes // 2, lanes // 4, 2) if a > 1 and size % a == 0), None)
    return [Opt("UPCAST", loops[-1].arg[0], amount)] if amount else []


def _panel_order(vec: UOp, opts: list[Opt], red_size: int, itemsize: int,
                 target: Target) -> Opt | None:
    """SWAP of a register-tiled contraction's two tiled axes where its vector operand does not stay in cache between
    the tile's rows. A tile reads a panel of the vector operand B (`red_size` x the tile's lanes) and a block of the
    broadcast one A (the tile's rows x `red_size`) once; with the row blocks outside the panels, every row block reads
    all of B again, and with the panels outside, every panel reads all of A again. B's panel row is the tile's
    lanes a step and A's the tile's rows (two vectors of B against 8 floats of A with AVX-512), so when B does not
    fit half of L2 (the rest holds A's block and what streams through), the panels go outside: each panel stays in L2
    while the row blocks sweep past it, and only A's narrower stream comes from further out. (Emerald Rapids, 2 MB of
    L2 against a 4 MB B: 1024^3 112 -> 155 GFLOP/s, numpy 176; on a Zen 5, whose L3 fed B fast enough, rows outside
    had matched numpy.)"""
    ups = [o for o in opts if o.op == "UPCAST"]
    if len(ups) < 2 or ups[0].axis != vec.arg[0]:
        return None
    blk = ups[1].axis
    lanes = ups[0].amount
    b_bytes = red_size * vec.src[0].arg * itemsize
    panel_bytes = red_size * lanes * itemsize
    if blk > vec.arg[0] or not target.panels_outside_rows(b_bytes, panel_bytes):
        return None
    return Opt("SWAP", blk, vec.arg[0])


def _thread_opts(sink: UOp, loops: list[UOp], opts: list[Opt], work: int, itemsize: int,
                 target: Target) -> list[Opt]:
    """The THREAD option after `opts` (none when one core is enough). Where no loop splits evenly over as many cores
    as the work is worth (a column reduce's 200 outputs as 25 vectors of 8, on 2 cores), the largest loop that
    pads to a multiple of more cores by at most an eighth of it, each thread's share then smaller, is padded (its
    extra iterations masked)."""
    axis, n = _threads(sink, loops, opts, work, itemsize, target)
    sizes = _thread_sizes(sink, loops, opts)
    for more in range(min(target.threads(work, itemsize, _chunks(sink)), target.cores), n, -1):
        # (and a thread's share shrinks: 64 blocks on 96 cores are one a thread either way; padded for the cores,
        # not for more parts than cores)
        pad = [a for a in sizes if 0 < _round_up(sizes[a], more) - sizes[a] <= sizes[a] // THREAD_PAD_SHARE and
               -(-sizes[a] // more) * n < sizes[a]]
        if pad:
            axis = max(pad, key=lambda a: (sizes[a], -a))
            return [Opt("PADTO", axis, more), Opt("THREAD", axis, more)]
    return [Opt("THREAD", axis, n)] if n > 1 else []


def _chunks(sink: UOp) -> bool:
    """Whether the kernel may be split into more parts than cores (`Target.threads`): not one each part of which
    walks all of something, the updates of a scatter (a GNN's segment sums in 8 parts: 3.7x slower than in 2) or a
    loop kernel's steps."""
    return not any(u.op is Ops.RANGE and u.arg[1] in ("scatter", "carry") for u in sink.toposort())


def _pages(index: UOp, rng: UOp, itemsize: int) -> int:
    """How many pages a sweep of loop `rng` touches through `index`: each step another page when its stride is one
    or more (its trips), else about one."""
    c = _coef(index, rng)
    return rng.src[0].arg if c is None or abs(c) * itemsize >= PAGE_BYTES else 1


def _page_order(sink: UOp, loops: list[UOp], loads: list[UOp], opts: list[Opt]) -> Opt | None:
    """SWAP for a copy whose inner loop steps a page a step through more pages than the second-level TLB holds, where
    the loop outside it touches fewer: packing `g` (4096 x 1024) into panels of 32 columns read 4096 rows a page apart
    for each panel, a TLB miss a row (8.4 ms); rows outside, each sweep of the panels writes 32 pages (1.1-1.6 ms).
    With 512 rows (512 pages, which the TLB holds) the swap was slower: 76-134 us against 159-199."""
    upcast = {o.axis for o in opts}
    free = [r for r in loops if r.arg[0] not in upcast and r.src[0].arg > 1]
    if len(free) < 2 or len(sink.src) != 1 or sink.src[0].src[0].op is not Ops.INDEX:
        return None
    itemsize = _itemsize(sink)
    store = sink.src[0].src[0].src[1]
    accesses = [*loads, store]
    if _coef(store, loops[-1]) != 1 or loops[-1].src[0].arg * itemsize < CACHE_LINE:
        return None   # (swapped, each step would write less than a line to each of many places: panels of 8 floats
        # of a 4096 x 1024 operand, 9.4 -> 13.2 ms)
    for outer, inner in reversed(list(itertools.pairwise(free))):   # innermost pair first (a tile's rows inside)
        if max(_pages(i, inner, itemsize) for i in accesses) > STLB_PAGES >= \
                max(_pages(i, outer, itemsize) for i in accesses):
            return Opt("SWAP", outer.arg[0], inner.arg[0])
    return None


def _inner_transcendentals(sink: UOp, inner: list[UOp]) -> int:
    """How many transcendentals the kernel evaluates every iteration of its innermost loops (`inner`: the reduces,
    or the loops of a kernel without any): a logsumexp's exp-sum of 256 x 200 is 51,200 iterations, below a thread's
    share of plain ones, but 33 us on one core."""
    return sum(1 for u in sink.toposort() if u.op in GroupOp.Transcendental and set(inner) <= range_deps(u))


def _thread_sizes(sink: UOp, loops: list[UOp], opts: list[Opt]) -> dict[int, int]:
    """The sizes, after `opts`, of the loops a THREAD option may split: those every store runs in (a kernel storing
    pieces of its output, tgfx/lowering/rangeify.py: a loop of one piece would leave the other pieces to every
    thread whole)."""
    sizes = {r.arg[0]: r.src[0].arg for r in loops if all(r in range_deps(st) for st in sink.src)}
    for o in opts:
        if o.op == "SWAP":   # (its amount is the other range's id)
            if o.axis in sizes and o.amount in sizes:
                sizes[o.axis], sizes[o.amount] = sizes[o.amount], sizes[o.axis]
        elif o.axis in sizes and o.op == "PADTO":
            sizes[o.axis] = _round_up(sizes[o.axis], o.amount)
        elif o.axis in sizes:
            sizes[o.axis] = sizes[o.axis] // o.amount if o.amount else 1   # (0: the whole range, copies)
    return sizes


def _threads(sink: UOp, loops: list[UOp], opts: list[Opt], work: int, itemsize: int,
             target: Target) -> tuple[int, int]:
    """(axis, threads) of the THREAD option after `opts`: the outermost loop (`_thread_sizes`) that splits evenly
    over the most threads the work is worth; threads 1 when none is worth it."""
    if target.threads(work, itemsize) <= 1:
        return 0, 1
    sizes = _thread_sizes(sink, loops, opts)
    chunks = _chunks(sink)
    splits = {a: target.thread_split(sizes[a], work, itemsize, chunks) for a in sorted(sizes)}
    if any(u.op is Ops.RANGE and u.arg[1] == "scatter" for u in sink.toposort()) and \
            not any(u.op in GroupOp.Transcendental for u in sink.toposort()):
        # a scatter's loops split over cores are each update's row (its updates, in order, are the sequential
        # range): every core streams through all the rows, and a core's share of each, below a page, is not all a
        # core reads, the hardware prefetcher streaming on into its neighbours' (65,536 rows of 64 floats into 4,096
        # on 2 cores: 1.2-1.4 ms as halves of rows, 0.87 whole on one). Not where computing the updates costs more
        # than reading them (an exp of each: `fusion._scatter_value_expands`)
        row = math.prod(sizes.values()) * itemsize
        splits = {a: n if row // n >= PAGE_BYTES else 1 for a, n in splits.items()}
    outer = max(splits, key=lambda a: (splits[a], -a), default=None)
    return (0, 1) if outer is None else (outer, splits[outer])


def opt_mode(opts: Sequence[Opt] | None, target: Target) -> str:
    """What decides a kernel's options, as part of its compiled-program cache key: the options themselves when they
    are given (forced, or found by a search), else the heuristics or the search width; and the target, which the
    heuristics read and the code is compiled for."""
    if opts is not None:
        what = "opts:" + ",".join(f"{o.op}.{o.axis}.{o.amount}" for o in opts)
    elif config.NOOPT:
        what = "noopt"
    else:
        what = f"beam{int(config.BEAM)}" if config.BEAM > 0 else "hand"
    return f"{what}@{target.key}"


def apply_hand_coded(sink: UOp, target: Target) -> tuple[UOp, list[Opt]]:
    """Apply the default options for `target`, skipping any that does not fit."""
    applied = []
    opts = hand_coded_opts(sink, target)
    # a THREAD split of a loop no other option touches goes first: the same kernel, but its substitution then walks
    # the graph before the upcasts copy it lane by lane
    early = [o for o in opts if o.op == "THREAD" and all(p.axis != o.axis for p in opts if p is not o)]
    for opt in early + [o for o in opts if o not in early]:
        try:  # the index arithmetic is simplified once, after the last option (each pass is a whole-graph rewrite)
            sink = apply_opt(sink, opt, simplify=False)
            applied.append(opt)
        except KernelOptError:
            continue
    return (graph_rewrite(sink, _pm_after_opt, name="symbolic after opts") if applied else sink), applied


def optimize(sink: UOp, target: Target, name: str = "", kernel_key: str | None = None,
             opts: Sequence[Opt] | None = None) -> tuple[UOp, list[Opt]]:
    """The kernel with its options applied, and them: `opts` exactly when given; else with `BEAM=n` those a timed
    search finds for `kernel_key` (cached on disk), else the defaults for `target`."""
    if opts is not None:
        return apply_opts(sink, opts), list(opts)
    if config.BEAM > 0 and not config.NOOPT and kernel_key is not None:
        from tgfx.lowering.search import beam_search
        return beam_search(sink, kernel_key, name, int(config.BEAM), target)
    return apply_hand_coded(sink, target)
