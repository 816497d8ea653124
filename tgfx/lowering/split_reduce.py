"""split_reduce: a sum with few outputs over a long reduce is split over the CPU's cores (split-K).

A kernel is spread over the cores by its output loops (THREAD splits an output range). A sum with too few outputs
to give every part of the split a register tile of its own -- a convolution's weight gradient, 3 x 3 x 3 x 32 = 864
outputs each summed over 256 x 24 x 24 positions; `x.T @ y` with a small result; a column sum of a long table --
ran on one core (the weight gradient: 20 ms, 19 GFLOP/s), or with its few output blocks each re-reading the whole
long operand. Such a sum is two, before the kernels are chosen:

    REDUCE_AXIS(ADD, src, axes)
        ->  partial = CONTIGUOUS(PERMUTE(REDUCE_AXIS(ADD, RESHAPE(src, (.., p, n / p, ..)), axes'), (p first)))
            RESHAPE(REDUCE_AXIS(ADD, partial, (0,)), red.shape)

one reduce axis of size n split in `p` parts, the parts an output axis of the partial sums (their outermost, which
the kernel's THREAD splits over the cores; its register tile and cache blocking are the heuristics' as before, over a
reduce p times shorter), and their sum, a small reduce that fuses into what reads it (an optimiser's update) or is a
small kernel of its own. The parts come from the target (`Target.threads` for its cores, its L2 size), never a
constant of this host: enough that a part's share of what the sum reads stays in L2, so that each output's pass over
the reduce reads it there, not from memory (the weight gradient re-read its 19 MB output gradient once per each of
its 27 taps and input channels; in 32 parts, 0.6 MB each, 20 -> 5 ms on 2 cores). Floats summed in another order
differ in their last bits, as any blocked sum does.
"""
from __future__ import annotations

from tgfx.devices import DEFAULT_DEVICE, get_device
from tgfx.devices.target import Target
from tgfx.dtypes import dtypes
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.fusion import _gather, _scatter_reduce

# each part's share of the reduce is at least this many steps: the partial sums are p times the outputs, written and
# read back once; over a shorter reduce they cost about what the split saves
MIN_PART_REDUCE = 256
# ... and the partial sums (written once, read back once) are at most this share of the bytes the sum reads
PARTIALS_SHARE = 8


def read_bytes(red: UOp) -> int:
    """Bytes of the stored values reduce `red` reads (each once): the buffers, copies, reduces and calls' results
    under its source's movement and elementwise ops."""
    seen, stack, total = set(), [red.src[0]], 0
    while stack:
        u = stack.pop()
        if u in seen:
            continue
        seen.add(u)
        if u.op in GroupOp.Movement or u.op in GroupOp.Elementwise:
            stack.extend(u.src)
        elif u.op is not Ops.CONST and u.dtype is not None:
            total += prod(u.shape) * u.dtype.itemsize
    return total


def split_parts(red: UOp, target: Target) -> tuple[int, int]:
    """(axis, parts) to split sum `red` over (module docstring), or (0, 1) for none: a float sum on the CPU whose
    work `Target.threads` spreads over more than one part but whose outputs cannot give each part a register tile
    (`contraction_tiles`' largest), or, on one core too, whose outputs are more than one tile and whose reads outgrow
    half of L2 (each tile's pass re-read them from memory: the weight gradient below on one core, 20.4 -> 4.8 ms).
    Into at least as many parts as its work is worth (`Target.threads`), and enough
    that a part's share of what it reads fits half of L2: each output's pass over the reduce then reads it from
    there, not from memory (the weight gradient's 864 passes of its 20 MB, in 32 parts of 0.6 MB); along the
    outermost reduce axis that splits evenly so, each part `MIN_PART_REDUCE` steps or more, and the partial sums at
    most `PARTIALS_SHARE` of what it reads. Not a gather or a scatter, whose kernels are a load at an index and a loop
    over updates (`fusion._gather`, `_scatter_reduce`)."""
    if red.arg[0] is not Ops.ADD or red.dtype not in (dtypes.float32, dtypes.float64):
        return 0, 1
    if not get_device(red.device if isinstance(red.device, str) else DEFAULT_DEVICE).compiles_on_host:
        return 0, 1   # (a GPU's kernel groups its reduce across threads itself: optimize_gpu's GROUP)
    src = red.src[0]
    outputs, work = prod(red.shape), prod(src.shape)
    itemsize = red.dtype.itemsize
    lanes, rows = target.contraction_tiles(itemsize)[0]
    threads = target.threads(work, itemsize)
    if _gather(red) or _scatter_reduce(red):
        return 0, 1
    nbytes = read_bytes(red)
    cached = -(-nbytes // (target.l2 // 2))   # parts whose share of the reads fits half of L2
    # cores left idle: fewer outputs than a register tile for each part; or, on any number of cores, outputs of
    # more than one tile, each tile's pass over the reduce re-reading from memory what outgrows L2
    idle = threads >= 2 and outputs < threads * lanes * rows
    if not idle and not (cached >= 2 and outputs > lanes * rows):
        return 0, 1
    want = max(threads, cached)
    most = min(work // outputs // MIN_PART_REDUCE, nbytes // PARTIALS_SHARE // (outputs * itemsize))
    for axis in sorted(red.arg[1]):
        n = src.shape[axis]
        if (parts := next((d for d in range(want, min(n, most) + 1) if n % d == 0), None)) is not None:
            return axis, parts
    return 0, 1


def do_split(ctx: tuple[Target, set[UOp]], red: UOp) -> UOp | None:
    target, made = ctx
    if red in made or (split := split_parts(red, target))[1] == 1:
        return None
    axis, parts = split
    src = red.src[0]
    shape = (*src.shape[:axis], parts, src.shape[axis] // parts, *src.shape[axis + 1:])
    axes = tuple(sorted({a + (a >= axis) for a in red.arg[1]}))   # the part's own share and the other reduce axes
    part = UOp(Ops.REDUCE_AXIS, red.dtype, (UOp(Ops.RESHAPE, src.dtype, (src,), shape),), (Ops.ADD, axes))
    made.add(part)
    order = (axis, *(a for a in range(len(shape)) if a != axis))
    partial = UOp(Ops.CONTIGUOUS, red.dtype, (UOp(Ops.PERMUTE, red.dtype, (part,), order),))
    total = UOp(Ops.REDUCE_AXIS, red.dtype, (partial,), (Ops.ADD, (0,)))
    made.add(total)
    return UOp(Ops.RESHAPE, red.dtype, (total,), red.shape)


# a sum too few outputs wide for the cores as partial sums of its reduce's parts, and their sum
pm_split_reduces = PatternMatcher([(UPat(Ops.REDUCE_AXIS, name="red"), do_split)])


def split_reduces(roots: list[UOp], target: Target) -> list[UOp]:
    """`roots` with each sum `split_parts` splits as partial sums and their sum (module docstring)."""
    return list(graph_rewrite(UOp(Ops.SINK, None, tuple(roots)), pm_split_reduces, ctx=(target, set()),
                              name="split reduces").src)


__all__ = ["split_parts", "split_reduces"]
