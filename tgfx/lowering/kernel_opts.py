"""kernel_opts: per-kernel options on ranges, applied as graph rewrites of the index-level kernel (SPEC §7).

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
  launches it with `global_size = amount`. A second THREAD splits another range too, over the product of the two
  amounts (`thread`).
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
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


def _merged_range(sink: UOp, outer: UOp, inner: UOp) -> UOp:
    """`sink` with reduce ranges `outer` and `inner` read as one, `merged // n` and `merged % n` (n: the size of
    `inner`; `merged` keeps `outer`'s id), each REDUCE over both reducing over `merged` in `outer`'s place. Not
    simplified."""
    n = inner.src[0].arg
    merged = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, outer.src[0].arg * n),), outer.arg)
    new: dict[UOp, UOp] = {outer: merged // n, inner: merged % n}
    for u in sink.toposort():
        if u in new:
            continue
        if u.op is Ops.REDUCE and outer in u.src[1:]:
            src = (new[u.src[0]], *(merged if s is outer else new[s] for s in u.src[1:] if s is not inner))
        else:
            src = tuple(new[s] for s in u.src)
        new[u] = u if src == u.src else u.replace(src=src)
    return new[sink]


def _tiled_product(v: UOp) -> bool:
    """Whether `v` is a product whose factors vary along different output loops (a matmul's, a convolution's: the
    register tiles' reuse), not a square or a product of values of the same elements."""
    if v.op not in (Ops.MUL, Ops.MULACC):
        return False
    loops = [{r for r in range_deps(s) if r.arg[1] == "loop"} for s in v.src[:2]]
    return loops[0] != loops[1]


def _loops_reorderable(nodes: list[UOp]) -> bool:
    """Whether the reduce loops of a kernel (its `nodes`) may be merged or nest in another order: not a contraction's
    (`_tiled_product`: its tiles' reduce loops, a convolution's window, are the heuristics' to order), nor a loop
    kernel's carries, which step through the loop in order."""
    return not any(u.op is Ops.REDUCE and (isinstance(u.arg, tuple) or _tiled_product(u.src[0])) for u in nodes)


def merge_reduce_ranges(sink: UOp) -> UOp:
    """Adjacent reduce ranges of a plain sum, max or product that every index steps through as one, `outer * n +
    inner`, become one reduce range of their product: a full sum of a contiguous (32, 32, 32, 3) value was four nested
    loops, the innermost 3 long, which no vector takes: a scalar loop of one register, 98,304 additions in order (1e-6
    of the sum off float64's, jax's 7e-8; 117 us, 25 us as one loop of vectors). Both ranges must be reduced by the
    same REDUCEs, and the merge stands when it leaves no more divisions than there were (`merge_loops`' rule). Not a
    contraction's (`_tiled_product`: its tiles' reduce loops, a convolution's window, are the heuristics' to order),
    nor a loop kernel's carries."""
    if not _loops_reorderable(sink.toposort()):
        return sink
    while True:
        nodes = sink.toposort()
        reduces = [u for u in nodes if u.op is Ops.REDUCE]
        loops = sorted((u for u in nodes if u.op is Ops.RANGE and u.arg[1] == "reduce"), key=lambda r: r.arg[0])
        indexes = [u.src[1] for u in nodes if u.op is Ops.INDEX]
        divisions = divmods(nodes)
        for outer, inner in zip(loops, loops[1:], strict=False):
            if any((outer in r.src[1:]) != (inner in r.src[1:]) for r in reduces) or \
                    not all(_steps_as_one(i, outer, inner) for i in indexes):
                continue
            new = graph_rewrite(_merged_range(sink, outer, inner), pm_symbolic, name="merge reduce ranges")
            if divmods(new.toposort()) <= divisions:
                sink = new
                break
        else:
            return sink


def _stride(indexes: list[UOp], rng: UOp) -> int | None:
    """The largest stride of reduce range `rng` in any of `indexes` (None: one reads it non-linearly)."""
    coefs = [_coef(i, rng) for i in indexes]
    return None if None in coefs else max((abs(c) for c in coefs), default=0)


def order_reduce_ranges(sink: UOp) -> UOp:
    """The reduce ranges of each plain sum, max or product nest in stride order, the longest stride outermost (each
    range's the largest of any index's), so that `merge_reduce_ranges` can merge the axes adjacent in memory: the
    ranges of a sum over a permuted view nest as the view's axes do, the innermost read at a buffer's stride. A
    transposed (3, 4,096, 7) value's full sum was a loop of 7 around one of 12,288 read 7 apart (one register, in
    order: 4.8e-7 off float64's, jax's 2.3e-8); in memory order it is one contiguous loop. The loops of a reduce nest by
    id (`linearize`): its ranges trade ids. Only ranges that every REDUCE reading one reduces over together (a row
    kernel's max and sum over the same row), and none read non-linearly; not a contraction's nor a loop kernel's
    (`merge_reduce_ranges`)."""
    nodes = sink.toposort()
    if not _loops_reorderable(nodes):
        return sink
    reduces = [u for u in nodes if u.op is Ops.REDUCE]
    indexes = [u.src[1] for u in nodes if u.op is Ops.INDEX]
    mapping: dict[UOp, UOp] = {}
    for group in {tuple(sorted(u.src[1:], key=lambda r: r.arg[0])) for u in reduces}:
        if len(group) < 2 or any(r.op is not Ops.RANGE or r.arg[1] != "reduce" or r in mapping for r in group) or \
                any(set(u.src[1:]) & set(group) and set(u.src[1:]) != set(group) for u in reduces):
            continue
        strides = [_stride(indexes, r) for r in group]
        if None in strides:
            continue
        order = sorted(range(len(group)), key=lambda k: -strides[k])   # (stable: equal strides keep their order)
        for r, k in zip(group, order, strict=True):
            if group[k] is not r:
                mapping[group[k]] = group[k].replace(arg=r.arg)
    return graph_rewrite(sink.substitute(mapping), pm_symbolic, name="order reduce ranges") if mapping else sink


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
        split = graph_rewrite(split_range(sink, *found), pm_symbolic, name="split ranges")
        if divmods(split.toposort()) >= divisions:
            return sink
        sink = split


def split_range(sink: UOp, rng: UOp, k: int, nest: Callable[[UOp], bool] = lambda red: False) -> UOp:
    """`sink` with range `rng` read as two, `hi * k + lo` (`hi` keeps its id, `lo` gets a new one, the highest: loops
    nest by id, so it is the innermost): a REDUCE over `rng` reduces over both, or, where `nest(reduce)` (a reduce over
    `rng` alone), over `lo` in a REDUCE of its own inside one over `hi` (`block_sum`). Not simplified."""
    nodes = sink.toposort()
    hi = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, rng.src[0].arg // k),), rng.arg)
    lo = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, k),),
             (max(u.arg[0] for u in nodes if u.op is Ops.RANGE) + 1, rng.arg[1]))
    new: dict[UOp, UOp] = {rng: hi * k + lo}
    for u in nodes:
        if u is rng:
            continue
        if u.op is Ops.REDUCE and rng in u.src[1:]:
            if len(u.src) == 2 and nest(u):
                new[u] = u.replace(src=(u.replace(src=(new[u.src[0]], lo)), hi))
                continue
            src = (new[u.src[0]], *(r for s in u.src[1:] for r in ((hi, lo) if s is rng else (new[s],))))
        else:
            src = tuple(new[s] for s in u.src)
        new[u] = u if src == u.src else u.replace(src=src)
    return new[sink]


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
    read side by side by the lanes and `valid` computed outside any reduce loop (a padded axis's tail) or the same
    for every lane (one compare a step of the reduce: a shifted row summed, an interleave's slot): a read the renderer
    loads as one masked vector from lane 0 of `e + rest` (a lane whose mask fails reads nothing). None otherwise. A
    convolution's padded input, whose validity changes with the kernel's taps inside the reduce loop and along the
    lanes, is not: as a vector its mask took as many vector compares as the loop has FMAs (the CNN step's second
    convolution 190 -> 230 us); its lanes stay copies, whose masks the renderer builds from each lane's folded
    condition."""
    terms = sum_terms(index)
    clamped = [t for t in terms if lane in range_deps(t)]
    if len(clamped) != 1 or (w := clamped[0]).op is not Ops.WHERE or w.src[2].op is not Ops.CONST or \
            w.src[2].arg != 0 or not unit_stride(w.src[1], lane) or \
            (lane in range_deps(w.src[0]) and any(r.arg[1] == "reduce" for r in range_deps(w.src[0]))):
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
    another UPCAST's copies, as rows it transposes in registers, else element by element), any other read outside
    reduce loops element by element (a group norm's statistics at `channel // 8`, loaded once an output vector: as
    lane copies, a U-Net's scale gradient was 64 copies of its 60-op element, 300 KB of IR, 0.45 s to compile, 46 KB
    and 0.09 s as vectors, and it ran 1.5 ms against 1.7-2.0), a store strided by a
    constant of a reduce's result (a scatter, once per output: a weight gradient's columns) or by at most MAX_STEP
    (the renderer's masked store of the lanes spread). None where a
    vector does not fit (lane copies stay): a second vector range, any other access. float16/bfloat16 lanes compute
    as the scalar's: widened to float, rounded back after every op (`render_wide.wide_alu`)."""
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
        elif masked_unit_stride(u.src[1], lane) is None and (u.src[1].op is Ops.WHERE or
                                                         any(r.arg[1] == "reduce" for r in range_deps(u))):
            return None   # a strided read in a reduce loop: a gather each step (a convolution's weights)
    return out


def _store_tiles(indexes: list[UOp], lane: UOp, amount: int) -> set[UOp]:
    """The strided store `indexes` that make square tiles: `amount` copies (another range's, whole) at offsets
    `m + c + lane * s` for c = j .. j + amount - 1, which the renderer transposes in registers and stores as `amount`
    vectors (`render_wide.find_wide_tiles`), not as a scatter each."""
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


def unroll(sink: UOp, opt: Opt, vector: bool = True, in_register: bool = False) -> UOp:
    """Each reduce over the range becomes `amount` partial reduces over its lanes, combined after the loop: one
    vector accumulator where the lanes fit a vector range (`vector_lanes`), else independent accumulators (which the
    linearizer puts in one loop and SLP vectorises). `in_register`: the lanes combined inside the one reduce, each
    step adding them all to its one register (a GPU register tile's, `optimize_gpu.unroll_lanes`)."""
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
        copies = _lane_copies(red.src[0], rng, lanes)
        mapping[red] = UOp(Ops.REDUCE, red.dtype, (_combined(red, copies), *others), red.arg) if in_register else \
            _combined(red, [UOp(Ops.REDUCE, red.dtype, (copy, *others), red.arg) for copy in copies])
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
    """Range `opt.axis` split over `opt.amount` core ids. In a kernel already split over `a` of them (a THREAD before
    this one), over the product: the kernel is launched with `a * amount` ids, the earlier split taking `id // amount`
    and this one `id % amount` (a column sum's partial sums: their 16 parts by the 4 blocks of its 1024 columns on 64
    cores, neither loop alone long enough for them)."""
    rng, outer, size = _split(sink, opt, "loop")
    share = size // opt.amount
    if (old := next((u for u in sink.toposort() if u.op is Ops.SPECIAL), None)) is None:
        core = UOp(Ops.SPECIAL, dtypes.index, (), ("core", opt.amount))
        return sink.substitute({rng: core * share + outer})
    amount = UOp.const(dtypes.index, opt.amount)
    core = UOp(Ops.SPECIAL, dtypes.index, (), ("core", old.arg[1] * opt.amount))
    return sink.substitute({old: core // amount, rng: (core % amount) * share + outer})


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
    nodes = sink.toposort()
    stored = {u.src[0] for u in nodes if u.op is Ops.STORE}   # (a store's index stays whole: its mask is the select)
    for u in nodes:
        src = tuple(new[s] for s in u.src)
        v = new_rng if u is rng else u if src == u.src else u.replace(src=src)
        if v.op is Ops.INDEX and v.src[0].op is Ops.DEFINE_GLOBAL and new_rng in range_deps(v.src[1]):
            off = clamp(v.src[0], v.src[1], valid) if u in stored else _clamp_padded(v.src[0], v.src[1], valid, new_rng)
            v = v.replace(src=(v.src[0], off))
        elif v.op is Ops.REDUCE and new_rng in v.src[1:]:
            val = v.src[0]
            v = v.replace(src=(valid.where(val, val.const_like(reduce_identity(v.arg, val.dtype))), *v.src[1:]))
        elif v.op is Ops.STORE and new_rng in range_deps(v):
            v = v.replace(src=(*v.src[:2], valid if len(v.src) == 2 else v.src[2] & valid))
        new[u] = v
    return new[sink]


def _clamp_padded(buf: UOp, off: UOp, valid: UOp, rng: UOp) -> UOp:
    """Offset `off` of a read of `buf` in a kernel whose range `rng` is padded (`valid`: the iteration is a real one),
    clamped in bounds (`rangeify.clamp`: every read stays safe to hoist). Only the terms that depend on `rng` are
    clamped where the others alone stay in the buffer: the select is then computed once for each value of the padded
    range, not at every step of the loops inside it. Around the whole offset it was a select each step of the reduce
    for each padded row of a register tile (AVX2's 16 x 6 tile over 1024 rows padded to 1026: two rows' index
    selects, 4 of the 24 instructions of each step, the front end's whole slack)."""
    terms = sum_terms(off)
    rest = [t for t in terms if rng not in range_deps(t)]
    if not rest or len(rest) == len(terms) or (off.vmin >= 0 and off.vmax < buf.arg[1]):
        return clamp(buf, off, valid)
    outer = rest[0]
    for t in rest[1:]:
        outer = outer + t
    if outer.vmin < 0 or outer.vmax >= buf.arg[1]:
        return clamp(buf, off, valid)
    inner = next(t for t in terms if rng in range_deps(t))
    for t in (t for t in terms if rng in range_deps(t) and t is not inner):
        inner = inner + t
    return valid.where(inner, inner.const_like(0)) + outer


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


def simplify_after_opts(sink: UOp, name: str = "symbolic after opts") -> UOp:
    """The index simplifier, then the gates it proved constant folded. Two passes, not one of both matchers: the
    simplifier's own memo (`PatternMatcher.memo`) then skips what an earlier pass simplified already (the kernel's
    index level, an UPCAST's vector lanes), where a combined matcher walked and tried every node again: spectral's
    21 kernels spent 58 ms there, 9 of the 20 rewrites changing nothing. Equivalent: the gate rules match only STORE
    and SINK, which no simplifier rule does, and what they return (a store without its gate, a SINK of fewer
    stores) gives the simplifier nothing new. Nor are the gate rules walked over a kernel with no gated store (a
    PADTO's), where they cannot match: fno's 96 such walks cost 25 ms and changed one kernel."""
    sink = graph_rewrite(sink, pm_symbolic, name=name)
    if not any(u.op is Ops.STORE and len(u.src) == 3 for u in sink.toposort()):
        return sink
    return graph_rewrite(sink, pm_fold_gates, name=name + ": gates")


def apply_opt(sink: UOp, opt: Opt, simplify: bool = True) -> UOp:
    if opt.op not in _APPLY:
        raise KernelOptError(f"{opt}: {opt.op} is not supported on the CPU")
    out = _APPLY[opt.op](sink, opt)
    return simplify_after_opts(out, name="symbolic after opt") if simplify else out


def apply_opts(sink: UOp, opts: Sequence[Opt]) -> UOp:
    """Apply every option in order; the first that does not fit raises `KernelOptError`."""
    for opt in opts:
        sink = apply_opt(sink, opt)
    return sink


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
    else (a packed operand's `(j // nr) * K * nr + j % nr`, tgfx/lowering/operands.py) the stride of the lane once
    the range is `outer * amount + lane` and the index simplified, None if that is not linear either."""
    if (c := _coef(index, rng)) is not None or rng.src[0].arg % amount:
        return c
    lane = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, amount),), (-1, "loop"))
    outer = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, rng.src[0].arg // amount),), (-2, "loop"))
    split = graph_rewrite(index.substitute({rng: outer * amount + lane}), pm_symbolic, name="lane stride")
    return _coef(split, lane)

