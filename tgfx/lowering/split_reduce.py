"""split_reduce: a sum with few outputs over a long reduce is split over the CPU's cores or a GPU's SMs (split-K).

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

On a GPU (`gpu_split`, from the device's `GPUTarget`: its SMs and the threads each holds) a sum or max of fewer
outputs than fill the GPU a thread each is split into enough parts that its partial sums do, a thread an output of a
part, adjacent threads on adjacent elements: the parts the inner factor of a reduce axis along memory (a full sum:
thread k sums k, k + p, ...; the parts kept last, so the sum of the parts reads them adjacent too), or the outer one
where an output axis runs along memory (a weight gradient's channels, which a warp's threads then take). By the
launch model (`gpu_cost`) on an H200: a full sum of 64M floats, one block of 256 threads, is 524288 threads (fill
1.94); the CNN step's 3 x 3 x 16 x 32 weight gradient, 75.5M sectors read (32 a warp access), is 0.8M (coalesced)
and 0.3M for the sum of its 64 parts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tgfx.devices import DEFAULT_DEVICE, get_device
from tgfx.devices.target import GPUTarget, Target
from tgfx.dtypes import dtypes
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.fusion import _gather, _scatter_reduce
from tgfx.lowering.layout import _layout

# each part's share of the reduce is at least this many steps: the partial sums are p times the outputs, written and
# read back once; over a shorter reduce they cost about what the split saves
MIN_PART_REDUCE = 256
# ... and the partial sums (written once, read back once) are at most this share of the bytes the sum reads
PARTIALS_SHARE = 8
# a GPU part's reduce is at least this many steps of its thread where the split is for the threads it launches (a sum
# along memory): the thread's one store of a partial is then a small share of its loads; and at least
# MIN_GPU_RUN where the split is what makes a warp's loads adjacent (its threads on an output axis): a block an
# output read 8 times the sectors (the VAE's 64 x 256 weight gradient over a batch of 128: 2 parts of 64 left its
# 32768 partial sums a block each again, 32 sectors a warp access; 8 parts of 16, a thread each, 4)
MIN_GPU_PART_REDUCE = 64
MIN_GPU_RUN = 16


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
    most `PARTIALS_SHARE` of what it reads; where none does, into those parts of the multiple of them that an axis
    holds, the rest summed apart (`_uneven`). Where no axis splits into that many and the outputs are too few for a
    tile on every core (a many-core target's column sum), into as many as the reduce allows, fewer than the work is
    worth: their kernel takes the rest of the cores from its outputs (`thread_opts._second_thread`). Not a gather or
    a scatter, whose kernels are a load at an index and a loop over updates (`fusion._gather`, `_scatter_reduce`)."""
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
    if most >= want:
        return _uneven(red, want)
    if outputs >= target.cores * lanes * rows:
        return 0, 1
    # a reduce too short for as many parts as the work is worth, of outputs too few for a tile on every core (a
    # column sum of 4096 x 1024, 4 tiles, on 64 cores): in as many parts as it allows, their partial sums' kernel
    # split over the parts and its outputs both (`thread_opts._second_thread`): 16 parts of 256 rows, 64 threads
    fewer = [(d, -axis) for axis in sorted(red.arg[1]) for d in range(min(src.shape[axis], most, want), 1, -1)
             if src.shape[axis] % d == 0]
    return (-max(fewer)[1], max(fewer)[0]) if fewer else _uneven(red, min(most, want))


def _uneven(red: UOp, parts: int) -> tuple[int, int]:
    """(axis, parts) for a reduce none of whose axes divides into `parts`: its outermost axis long enough that the
    rest past the parts' multiple (summed apart, `do_split`) is at most an eighth of it, else its longest. A
    count of rows of few factors (65,537, prime) left a column sum on one core, each column summed in one run whose
    rounding grew with its length: 5.8e-6 of the sum off float64's where 1,000,000 rows in 16 parts were 3.6e-8."""
    shape = red.src[0].shape
    long = [a for a in sorted(red.arg[1]) if shape[a] >= 8 * parts]
    axis = long[0] if long else max(sorted(red.arg[1]), key=lambda a: shape[a])
    return (axis, parts) if parts >= 2 and shape[axis] >= parts else (0, 1)


@dataclass(frozen=True)
class Split:
    """How a reduce is split: its reduce axis `axis`, padded with zeros (a sum's identity) to `length` (a GPU's: its
    loads are masked for free), or cut to `length` and the rest summed apart (the CPU's: a masked load is scalar,
    which kept a padded column sum's loads from vectors, 2.5 ms where 1.1 ms does), in `parts`
    parts; `inner`: the parts are the axis's inner factor (part k sums elements k, k + parts, ...: adjacent parts on
    adjacent elements), else its outer one (part k a run of `length / parts` adjacent elements)."""
    axis: int
    parts: int
    inner: bool = False
    length: int = 0


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def gpu_split(red: UOp, target: GPUTarget) -> Split | None:
    """The split of reduce `red` on GPU `target`, or None. A reduce of fewer outputs than `fill_threads` is a block
    an output (`optimize_gpu.hand_coded_gpu_opts`: its threads split the reduce): that launches too few threads to
    fill the GPU where the outputs are few (a full sum: one block of 132 SMs), and reads far-apart elements in each
    warp access where the reduce does not run along memory (a weight gradient of NHWC operands: a warp's 32 threads
    on 32 images, 32 sectors an access where 4 would do). One whose reduce axes are all shorter than a warp is a
    thread an output instead: split only where that leaves an SM less than a warp (the quick cnn_bn's weight
    gradients: 576 threads of 2048 steps each). Split so that the partial sums are enough outputs for a
    thread each to fill every SM (`sms * threads_per_sm`; at least two parts, each `MIN_GPU_PART_REDUCE` or
    `MIN_GPU_RUN` steps or more), each thread looping over its part, adjacent threads on adjacent elements:

    - the reduce runs along memory (`layout._layout`: a full sum, a few long rows): that axis, the parts its inner
      factor (thread k reads k, k + parts, ...: a warp's loads adjacent), kept last in the partial sums (a warp's
      stores adjacent, and the sum of the parts reads each output's parts adjacent). Not where a block a row already
      fills the GPU (`group_threads` a row over its outputs: a softmax of 4096 rows), nor into no more parts than
      such a block has threads: its threads read adjacent elements.
    - an output axis runs along memory (a weight gradient's channels, a column sum): the parts the outer factor of a
      reduce axis (a run of it each, the CPU's split), first in the partial sums; a warp's threads then run along
      that output axis (`_grid_axes`), coalesced.

    Among the axes that divide evenly, the fewest parts that fill the GPU, else the most the reduce allows; a sum
    whose axis divides into too few is padded with zeros to a multiple of the parts. Sums (floats and integers:
    integer sums are exact in any order) and maxima (a min is one of a negation); not a gather or a scatter."""
    op, dtype = red.arg[0], red.dtype
    if op not in (Ops.ADD, Ops.MAX) or dtype is None or not (dtype.is_float or dtype.is_int):
        return None
    if _gather(red) or _scatter_reduce(red):
        return None
    src = red.src[0]
    outputs, work, fill = prod(red.shape), prod(src.shape), target.fill_threads()
    if outputs >= fill or work < fill * MIN_GPU_RUN:
        return None   # a thread an output fills the GPU; too few elements for a run each of the threads that would
    if max(src.shape[a] for a in red.arg[1]) < target.warp_size and outputs >= target.sms * target.warp_size:
        return None   # a thread an output (a reduce too short for a block's threads), a warp or more each SM
    along = _layout(src)[0]
    inner = along in red.arg[1]
    if inner and outputs * target.group_threads(src.shape[along]) >= fill:
        return None   # a block a row fills the GPU, its threads on adjacent elements
    most = work // outputs // (MIN_GPU_PART_REDUCE if inner else MIN_GPU_RUN)
    good = -(-target.sms * target.threads_per_sm // outputs)
    if most < 2:
        return None
    # (parts, axis) that divide an axis evenly: the fewest that fill the GPU, else the most; the outermost axis of
    # equals
    options = [(d, axis) for axis in ([along] if inner else sorted(red.arg[1]))
               for d in _divisors(src.shape[axis]) if 2 <= d <= most]
    filling = [o for o in options if o[0] >= good]
    pick = min(filling) if filling else max(options, key=lambda o: (o[0], -o[1]), default=None)
    best = None if pick is None else Split(pick[1], pick[0], inner, src.shape[pick[1]])
    enough = -(-fill // outputs)
    if op is Ops.ADD and (best is None or best.parts < enough):
        # too few parts divide the axis (a length of few factors: 65537): pad it with zeros to a multiple of them
        axis = along if inner else max(sorted(red.arg[1]), key=lambda a: src.shape[a])
        n = src.shape[axis]
        parts = min(good, most, n)
        if inner and parts > target.warp_size:
            parts -= parts % target.warp_size
        if parts >= 2 and (best is None or parts > best.parts):
            best = Split(axis, parts, inner, -(-n // parts) * parts)
    if inner and best is not None and best.parts <= target.group_threads(src.shape[along]):
        return None   # no more threads than a block a row has (a softmax of 7 rows of 600: 8 parts of 75)
    return best


def _split_of(red: UOp, target: Target | GPUTarget) -> Split | None:
    """The split of reduce `red`: by `target` where it is a GPU's (a test's), else by its device's: the CPU's
    (`split_parts` with `target`), or a GPU's own target (`gpu_split`)."""
    if isinstance(target, GPUTarget):
        return gpu_split(red, target)
    if isinstance(red.device, str) and not (dev := get_device(red.device)).compiles_on_host and \
            isinstance(gpu := getattr(dev, "target", None), GPUTarget):
        return gpu_split(red, gpu)
    axis, parts = split_parts(red, target)
    n = red.src[0].shape[axis]
    return None if parts == 1 else Split(axis, parts, False, n - n % parts)


def do_split(ctx: tuple[Target | GPUTarget, set[UOp]], red: UOp) -> UOp | None:
    target, made = ctx
    if red in made or (split := _split_of(red, target)) is None:
        return None
    src, axis, parts = red.src[0], split.axis, split.parts
    n, tail = src.shape[axis], None
    if split.length > n:
        pads = tuple((0, split.length - n) if a == axis else (0, 0) for a in range(len(src.shape)))
        src = UOp(Ops.PAD, src.dtype, (src,), pads)
    elif split.length < n:
        # the rows past the parts' multiple, summed apart and added to the parts' sum
        def cut(lo: int, hi: int) -> UOp:
            return UOp(Ops.SHRINK, src.dtype, (src,), tuple((lo, hi) if a == axis else (0, d)
                                                             for a, d in enumerate(src.shape)))
        src, tail = cut(0, split.length), UOp(Ops.REDUCE_AXIS, red.dtype, (cut(split.length, n),), red.arg)
        made.add(tail)
    factors = (split.length // parts, parts) if split.inner else (parts, split.length // parts)
    shape = (*src.shape[:axis], *factors, *src.shape[axis + 1:])
    # the part's own share (the factor that is not the parts) and the other reduce axes
    share, at = (axis, axis + 1) if split.inner else (axis + 1, axis)
    axes = tuple(sorted(share if a == axis else a + (a > axis) for a in red.arg[1]))
    part = UOp(Ops.REDUCE_AXIS, red.dtype, (UOp(Ops.RESHAPE, src.dtype, (src,), shape),), (red.arg[0], axes))
    made.add(part)
    rest = tuple(a for a in range(len(shape)) if a != at)
    order = (*rest, at) if split.inner else (at, *rest)
    partial = UOp(Ops.CONTIGUOUS, red.dtype, (UOp(Ops.PERMUTE, red.dtype, (part,), order),))
    total = UOp(Ops.REDUCE_AXIS, red.dtype, (partial,), (red.arg[0], (len(shape) - 1 if split.inner else 0,)))
    made.add(total)
    whole = UOp(Ops.RESHAPE, red.dtype, (total,), red.shape)
    return whole if tail is None else whole + tail


# a sum too few outputs wide for the cores, or for a GPU's SMs, as partial sums of its reduce's parts, and their sum
pm_split_reduces = PatternMatcher([(UPat(Ops.REDUCE_AXIS, name="red"), do_split)])


def split_reduces(roots: list[UOp], target: Target | GPUTarget) -> list[UOp]:
    """`roots` with each sum `split_parts` splits (on the CPU `target`; a GPU device's reduce by its own target,
    `gpu_split`; every reduce by `target` where that is a GPU's) as partial sums and their sum (module docstring)."""
    return list(graph_rewrite(UOp(Ops.SINK, None, tuple(roots)), pm_split_reduces, ctx=(target, set()),
                              name="split reduces").src)


__all__ = ["Split", "gpu_split", "split_parts", "split_reduces"]
