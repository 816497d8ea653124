"""schedule: a graph of tensor ops to a LINEAR list of kernel CALLs, in dependency order.

1. decide where values are materialised: the requested outputs, `CONTIGUOUS` and `COPY`, and reduces that would
   otherwise be recomputed (a reduce read through an `EXPAND`, or by more than one kernel);
2. everything else is fused into the kernel of the materialised value that reads it;
3. each kernel's AST refers to its buffers by slot (`DEFINE_GLOBAL`), never by identity, so equal computations on
   different data have the same `key` and share one compiled program.
"""
from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tgfx import config
from tgfx.devices import DEFAULT_DEVICE as DEFAULT_DEVICE  # where constants and host data go (TGFX_DEVICE)
from tgfx.devices import get_device
from tgfx.devices.target import PAGE_BYTES, STLB_PAGES, TLB_PAGES, Target, host_target, rows_outrun_tlb
from tgfx.dtypes import dtypes
from tgfx.ir.control import BODIED, n_bodies
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.spec import check_stage
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.complex import lower_complex, pairs_view
from tgfx.lowering.inline import params_of, substitute_outside_calls, walk
from tgfx.lowering.inplace import window_update
from tgfx.lowering.lru import LRU
from tgfx.lowering.rangeify import pad_pieces
from tgfx.lowering.symbolic import sum_terms

_buffer_uid = itertools.count(1)
# Rules of cost, the same on every CPU (what varies by CPU, the vector width, comes from the target description):
# a transposed copy of an operand is one more pass over it (and a kernel launch); a contraction reading it this many
# times amortises that many times over (see _transposed_operand)
REUSE_TO_TRANSPOSE = 16


def new_buffer(device: str, size: int, dtype) -> UOp:  # noqa: ANN001
    """A fresh BUFFER node; its memory is allocated when a kernel first writes it."""
    return UOp(Ops.BUFFER, dtype, (), (next(_buffer_uid), device, size))


def buffer_view(u: UOp) -> UOp | None:
    """The BUFFER under `u` if `u` reads it contiguously in order (a reshape of it), else None."""
    if u.op is Ops.BUFFER:
        return u
    if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER:
        return u.src[0]
    return None


def _copied_by_kernel(u: UOp) -> bool:
    """Whether COPY `u` between two devices that share memory (`host_memory`: CPU:0, CPU:1, ...) runs as a kernel on
    the destination that reads the source where it lies, spread over the cores as any kernel is, instead of one
    `memmove` on the copy engine's thread: one that moves at least `min_thread_work` elements a core (64 MB from
    CPU:0 to CPU:1: 8.2 ms as a memmove, 7.2 with numpy's copyto, 4.6 as a kernel on 2 cores). A smaller one stays a
    memmove (no kernel to compile for a small `device_put`)."""
    if u.tag == "in place" or not isinstance(u.arg, str) or not isinstance(u.src[0].device, str) or \
            u.src[0].device == u.arg:
        return False   # (a value of no device yet, a constant, is made where it goes)
    src, dst = get_device(u.src[0].device), get_device(u.arg)
    if not (src.host_memory and dst.host_memory and dst.compiles_on_host):
        return False
    target = host_target()
    return prod(u.shape) >= 2 * target.min_thread_work(max(u.dtype.itemsize, 4)) and target.cores > 1


def copy_source(u: UOp) -> tuple[UOp, int]:
    """The value a COPY reads and the element offset into it. Reshapes and leading-axis shrinks of a contiguous
    value are contiguous ranges of its buffer, so they are copied straight out of it (a shard of a buffer, a chunk of
    an all-reduce ring) instead of through a kernel. So is a row picked by a constant index (`x[3]`: a dynamic shrink
    whose start is a literal)."""
    off = 0
    while True:
        if u.op is Ops.RESHAPE:
            u = u.src[0]
        elif u.op is Ops.SHRINK and all(b == (0, s) for b, s in zip(u.arg[1:], u.src[0].shape[1:], strict=True)):
            off += u.arg[0][0] * prod(u.src[0].shape[1:])
            u = u.src[0]
        elif u.op is Ops.DYNAMIC_SHRINK and u.arg[0] == (0,) and u.src[1].op is Ops.CONST and \
                u.arg[1][1:] == u.src[0].shape[1:] and 0 <= u.src[1].arg <= u.src[0].shape[0] - u.arg[1][0]:
            off += u.src[1].arg * prod(u.src[0].shape[1:])
            u = u.src[0]
        else:
            return u, off


def concat_pieces(u: UOp) -> list[tuple[UOp, int]]:
    """The pieces of a `CONTIGUOUS(joined, *pieces)` tagged ("concat", offsets) and their element offsets."""
    return list(zip(u.src[1:], u.tag[1], strict=True))


def is_concat(u: UOp) -> bool:
    return u.op is Ops.CONTIGUOUS and isinstance(u.tag, tuple) and u.tag[0] == "concat"


def _unreshaped(u: UOp) -> UOp:
    """What `u` reshapes, through any number of RESHAPEs (the same elements in the same order)."""
    while u.op is Ops.RESHAPE:
        u = u.src[0]
    return u


def _root_base(r: UOp) -> UOp:
    """What a requested result is a view of: a reshape of a value materialised anyway (CONTIGUOUS, COPY) needs no
    kernel of its own."""
    base = _unreshaped(r)
    return base if base.op in (Ops.CONTIGUOUS, Ops.COPY, Ops.NETWORK) else r


def _is_expanding(u: UOp) -> bool:
    return u.op is Ops.EXPAND and any(a != b for a, b in zip(u.src[0].shape, u.arg, strict=True))


def _is_contraction(red: UOp) -> bool:
    """A sum of products of two broadcast operands (a matmul)."""
    src = red.src[0]
    return red.arg[0] is Ops.ADD and src.op is Ops.MUL and all(_is_expanding(e) for e in src.src)


@dataclass
class ScheduleCtx:
    realize: set[UOp] = field(default_factory=set)

    def is_leaf(self, u: UOp, root: UOp) -> bool:
        return u is not root and (u in self.realize or u.op in (Ops.BUFFER, Ops.CONST, Ops.IOTA))


RECOMPUTE_COST = 4   # an elementwise graph this costly (a transcendental, or four plain ops) is not recomputed
RECOMPUTE_MIN = 1 << 16  # ... by a broadcast to this many elements (smaller, a kernel launch costs more than it saves)
# ... and one this costly (`relu(h + b)`: two ops) is not recomputed as a matmul's operand, which each block of the
# register tile's columns evaluates again (relu(h + b) @ w, 128x512 @ 512x512: 560 us fused, ~340 stored; the MLP step
# 1.6-1.9 -> 1.2-1.3 ms). A convolution's padded input keeps a cheap activation fused: its taps share it in registers
RECOMPUTE_COST_OPERAND = 2
# ... and one this costly that a contraction reads through a broadcast along its outputs while it varies along the
# reduce (the gradient `X.T @ (y - sigmoid(X @ w))`) is evaluated in the reduce loop once a step, as scalars beside the
# output axis's vectors: stored first from this many elements on, it is a vector loop (1000 x 24: 36 -> 4 us)
COSTLY_OPERAND_MIN = 64
# a reduce whose kernel then computes this much per element of it (a random normal's hash and inverse error
# function: about 300) is stored first (see realize_set); an activation, a bias, a softmax's exp and division stay
EPILOGUE_COST = 32
# an elementwise value this costly that several kernels compute is stored once (a dropout mask's threefry hash:
# about 125); an FFT's twiddles and chirps (about 35) are recomputed, cheaper than a kernel and a buffer each
SHARED_COST = 64
# ... and one of RECOMPUTE_MIN elements or more that reads this many stored values whole (no broadcast) is stored
# once too (a smaller one costs less than a kernel's launch to compute again): a transformer's residual
# stream (x + attention + mlp, block after block), left to be recomputed, was read back from every earlier block's
# outputs by each of its layer norms' kernels (a last block's read 19 buffers), and each block's kernels were
# different ones (40 row kernels to compile for 4 blocks, not 10)
SHARED_READS = 3
# (these count operations and launches, whose relative costs are alike on every CPU this targets)


_VIEWS = (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.SHRINK, Ops.FLIP, Ops.DYNAMIC_SHRINK)


def _view_base(u: UOp, pads: bool = False) -> UOp:
    """What view `u` is of (with `pads`, also through zero padding: a padded convolution's input)."""
    while u.op in _VIEWS or pads and u.op is Ops.PAD:
        u = u.src[0]
    return u


def _iota_like(u: UOp) -> bool:
    """An arange: a view of IOTA, cast, scaled and shifted by constants. Each source is asked once, and the first
    that is neither ends the walk: asking each twice (is any an arange, then is every one a constant or an arange)
    walked every path of a chain of adds and products, 2^depth of them (the gradient of a RealNVP flow's six
    couplings: 2 million calls; its first call 3.9-4.8 s, 3.2-3.5 s asking once)."""
    u = _view_base(u)
    if u.op is Ops.IOTA:
        return True
    if u.op not in (Ops.CAST, Ops.ADD, Ops.MUL):
        return False
    arange = False
    for s in u.src:
        if _view_base(s).op is Ops.CONST:
            continue
        if not _iota_like(s):
            return False
        arange = True
    return arange


def _onehot_index(cmp: UOp) -> UOp | None:
    """The index side of `idx == arange` (a gather's one-hot mask), else None."""
    if cmp.op is not Ops.CMPEQ:
        return None
    a, b = cmp.src
    return a if _iota_like(b) else b if _iota_like(a) else None


def is_onehot(u: UOp) -> bool:
    """A one-hot mask: `idx == arange`, or several of them and-ed (an index into several axes)."""
    u = _view_base(u)
    if u.op is Ops.AND:
        return all(is_onehot(s) for s in u.src)
    return _onehot_index(u) is not None


# a one-hot reduce from this many updates or more is a scatter (`gather.collapse_scatter`) ...
SCATTER_MIN = 64
# ... onto this many rows or more (a segment_sum into a few segments, `.at[category].add(rows)`): the reduce reads
# every update once per row and column, a column's reads strided by the row's width (16 categories' sums of 20,000
# rows of 64 features: 250 ms, 1.0 ms as a loop; into 2 rows: 16 ms, 1.0); a short row into 2 rows, the reduce's two
# passes are faster (20,000 rows of 4: 0.08 ms, 0.17 as a loop), but not by much
SCATTER_MIN_ROWS = 2
# a sum of this many padded pieces or more (a concatenation, a stack: `tnp.concatenate` adds up PADs) is stored
CONCAT_STORE_PIECES = 8


def _stored_concatenations(order: list[UOp]) -> set[UOp]:
    """The heads of sums of CONCAT_STORE_PIECES padded pieces or more: stored, a read of one is a load. Fused, each
    read at a position walks the whole chain of pieces (all but one zero there), and a kernel that reads such a
    value along a chain of its own (the gradient of a Python-unrolled scan reads its stacked outputs row by row) walked
    it once per read: a 32-step unrolled scan's gradient took 7 s to lower."""
    pieces: dict[UOp, int] = {}
    inner: set[UOp] = set()
    for u in order:
        if u.op is Ops.PAD or u.op is Ops.NEG and u.src[0].op is Ops.PAD:   # (a float piece is negated twice)
            pieces[u] = 1
        elif u.op is Ops.ADD and all(pieces.get(x, 0) for x in u.src):
            pieces[u] = sum(pieces[x] for x in u.src)
            inner.update(x for x in u.src if x.op is Ops.ADD)
    return {u for u, n in pieces.items() if n >= CONCAT_STORE_PIECES and u not in inner}


def _padded_contractions(order: list[UOp]) -> set[UOp]:
    """The contractions (through views) that a PAD in a sum of padded pieces reads (a float piece negated twice, as
    `tnp.concatenate` makes it, too)."""
    def unnegated(u: UOp) -> UOp:
        return u.src[0] if u.op is Ops.NEG else u
    out = set()
    for u in order:
        if u.op is Ops.ADD and all(unnegated(x).op in (Ops.PAD, Ops.ADD) for x in u.src):
            for x in map(unnegated, u.src):
                if x.op is Ops.PAD and (base := _view_base(unnegated(_view_base(x.src[0])))).op is Ops.REDUCE_AXIS \
                        and _is_contraction(base):
                    out.add(base)
    return out


def _padded_reduces(order: list[UOp]) -> set[UOp]:
    """The reduces a PAD reads (through elementwise ops and views) whose loops, fused, would run at every padded
    position for nothing (the position's value is masked to zero, not skipped) RECOMPUTE_MIN times or more: the
    gradient of `w[400:]` for a flat parameter vector pads a bias's gradient, a sum over the batch, into the whole
    vector, and each of its 408 elements ran the sum over 1000 rows (36 us; a 4008-element pad of a sum over
    100,000 rows: 160 ms, 0.1 ms stored)."""
    out = set()
    for u in order:
        if u.op is not Ops.PAD:
            continue
        added = prod(u.shape) - prod(u.src[0].shape)
        for x in u.src[0].toposort(lambda x: x.src if x.op in _VIEWS or x.op in GroupOp.Elementwise else ()):
            if x.op is Ops.REDUCE_AXIS and added * prod(x.src[0].shape[a] for a in x.arg[1]) >= RECOMPUTE_MIN:
                out.add(x)
    return out


def _varying(u: UOp) -> set[int]:
    """The axes along which `u` varies: not of size 1, not broadcast (`_layout`'s constant axes)."""
    return set(_unit_free(u.shape or ())) - _layout(u)[1]


def _unexpanded(u: UOp) -> UOp:
    """`u` under its broadcasts along unit axes (they keep the axes' numbering)."""
    while u.op is Ops.EXPAND and len(u.src[0].shape) == len(u.shape):
        u = u.src[0]
    return u


def _scatter_reduce(red: UOp) -> bool:
    """Whether `red` sums (or maxes, or multiplies) `where(idx == arange & ..., v, identity)` with the indices
    varying along the reduced axes and the aranges along output axes: a scatter (`x.at[idx].add(v)`,
    jax.ops.segment_sum, the gradient of a gather; `t[i[:, None], j[None, :]]`'s matches rows and columns), onto
    SCATTER_MIN_ROWS rows or more from SCATTER_MIN updates or more. Written as a reduce it compares every output
    with every update (an embedding table's gradient: vocabulary x tokens x width); stored on its own, its kernel
    becomes a loop over the updates (`gather.collapse_scatter`)."""
    body = _unexpanded(red.src[0])
    if red.arg[0] not in (Ops.ADD, Ops.MAX, Ops.MUL):
        return False
    if body.op is Ops.WHERE and _view_base(body.src[2]).op is Ops.CONST:
        cond = body.src[0]
    elif red.arg[0] is Ops.MAX and body.dtype == dtypes.bool:   # where any update lands
        cond = body
    else:
        return False
    axes = set(red.arg[1])
    if prod(red.src[0].shape[a] for a in axes) < SCATTER_MIN:
        return False
    conds, stack = [], [_unexpanded(cond)]
    while stack:
        c = stack.pop()
        if c.op is Ops.AND and c.dtype == dtypes.bool:
            stack.extend(_unexpanded(x) for x in c.src)
        else:
            conds.append(c)
    covered, outputs = set(), 1   # the reduced axes the matched indices vary along; the outputs they pick among
    for c in conds:
        if c.op is not Ops.CMPEQ:
            continue
        for idx, pos in (c.src, c.src[::-1]):
            if _iota_like(pos) and not _iota_like(idx) and not _varying(pos) & axes and _varying(idx) & axes:
                covered |= _varying(idx) & axes
                outputs *= prod(c.shape[a] for a in _varying(pos))
                break
    return covered == axes and outputs >= SCATTER_MIN_ROWS


# the walk of a kernel in `find_realizes` has passed a scatter's broadcast of its updates (`_scatter_value_expands`),
# and no other: a reduce there is computed once an update, as one stored first would be; a gather is one load there
_UPDATES = "updates"


def _scatter_value_expands(red: UOp) -> set[UOp]:
    """The broadcasts of a scatter's updates along its output rows (`where(idx == arange, broadcast(v), identity)`,
    through views) where each update's row is a vector's lanes or more: `gather.collapse_scatter` evaluates each
    update once, where it lands (not once a row, as the broadcast says), its row a vector loop, as a kernel storing
    the updates first would (`segment_sum(exp(x) * 2, ids)` of 4,096 rows of 64: 200-230 us stored first, 135-140
    fused). A shorter row (a GAT's attention logits, 4 heads) would be scalar code in the updates' sequential loop
    (two such scatters of one gradient took 150 us each, 12 stored first): its costly updates are stored first, a
    vector loop."""
    body = _unexpanded(red.src[0])
    if body.op is not Ops.WHERE:
        return set()
    updates = prod(red.src[0].shape[a] for a in red.arg[1])
    out, u = set(), body.src[1]
    while u.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND):
        if u.op is Ops.EXPAND and prod(u.src[0].shape) // updates >= host_target().lanes(u.dtype.itemsize):
            out.add(u)
        u = u.src[0]
    return out


def _scatter_roots(scatters: list[UOp], order: list[UOp], roots: set[UOp]) -> set[UOp]:
    """The nodes stored for the scatters (`_scatter_reduce`): each on its own, or, where the only use of one is to
    be combined into an operand by its own reduction (`x.at[idx].add(v)`: x + the scatter; segment_max: max(-inf,
    the scatter)), through reshapes and permutes, that combination: `gather.collapse_scatter` starts the updates'
    loop from the operand (one kernel, where the scatter and the sum were two: 65,536 rows of 64 features into
    4,096, 1.2 MB more written and read)."""
    if not scatters:
        return set()
    users: dict[UOp, set[UOp]] = {}
    for u in order:
        for s in u.src[n_bodies(u):]:
            users.setdefault(s, set()).add(u)
    out = set()
    for red in scatters:
        u = red
        while u not in roots and len(users.get(u, ())) == 1 and (p := next(iter(users[u]))).op in \
                (Ops.RESHAPE, Ops.PERMUTE):
            u = p
        p = next(iter(users[u])) if u not in roots and len(users.get(u, ())) == 1 else None
        combined = p is not None and p.op is red.arg[0] and p.dtype == red.dtype and len(set(p.src)) == 2
        out.add(p if combined else red)
    return out


def _gather(red: UOp) -> bool:
    """Whether `red` picks one value per output (`where(idx == arange, v, identity)` summed over the indexed axis: a
    gather, which its kernel reads as one load at the index, `gather.collapse_onehot`), not a scatter."""
    body = red.src[0]
    return red.arg[0] in (Ops.ADD, Ops.MAX) and body.op is Ops.WHERE and is_onehot(body.src[0]) and \
        _view_base(body.src[2]).op is Ops.CONST and not _scatter_reduce(red)


def _stored_gather(red: UOp, ctx: ScheduleCtx) -> bool:
    """A gather of stored values (a loop carry read at a partner's index): each kernel reading it loads at the index
    itself, as cheap as loading a stored copy of the gather (a bitonic sort's pass gathered its keys and positions
    in two kernels of their own, then read them in a third)."""
    if not _gather(red):
        return False
    base = _view_base(red.src[0].src[1], pads=True)
    return base.op is Ops.BUFFER or base in ctx.realize


def _evaluated(u: UOp, ctx: ScheduleCtx, root: UOp, scalars: bool = False) -> Iterator[UOp]:
    """The nodes of the elementwise graph under `u` that the kernel of `root` evaluates: up to its leaves, stored
    values and reduces; its scalar part (which LLVM hoists out of the loops) only with `scalars`."""
    seen, stack = set(), [u]
    while stack:
        x = stack.pop()
        if x in seen or ctx.is_leaf(x, root) or x.op is Ops.REDUCE_AXIS or not (scalars or x.shape):
            continue
        seen.add(x)
        yield x
        stack.extend(x.src)


def _rounds_to_bfloat16(x: UOp) -> bool:
    """A cast of a wider float to bfloat16: a round to nearest even in integer ops (about seven), where a cast
    between other floats is one instruction (float16's with F16C) and a widening from bfloat16 a shift."""
    return x.op is Ops.CAST and x.dtype is dtypes.bfloat16 and x.src[0].dtype.is_float and \
        x.src[0].dtype.itemsize > 2


def _recompute_cost(u: UOp, ctx: ScheduleCtx, root: UOp, limit: int = RECOMPUTE_COST) -> int:
    """What evaluating the elementwise graph under `u` costs per element (`_evaluated`), counted up to `limit`:
    plain ops 1, transcendentals, divisions and roundings to bfloat16 4."""
    cost = 0
    for x in _evaluated(u, ctx, root):
        if x.op in GroupOp.ALU or _rounds_to_bfloat16(x):
            cost += 4 if x.op in GroupOp.Costly or x.op is Ops.CAST else 1
            if cost >= limit:
                break
    return cost


def _whole_reads(u: UOp, ctx: ScheduleCtx) -> int:
    """How many stored values (buffers, values `ctx` stores) the elementwise graph under `u` reads element for
    element, not through a broadcast (a bias, a row's statistic): what evaluating it costs in memory streams."""
    leaves, seen, stack = set(), set(), [(u, False)]
    while stack:
        x, expanded = stack.pop()
        if (x, expanded) in seen or x.op is Ops.CONST:
            continue
        seen.add((x, expanded))
        if ctx.is_leaf(x, u) or x.op is Ops.REDUCE_AXIS:
            if not expanded:
                leaves.add(x)
            continue
        stack.extend((s, expanded or _is_expanding(x)) for s in x.src)
    return len(leaves)


Axes = tuple[int | None, ...]   # for each axis of a node, the axis of the kernel's output it runs along (None: unit)


def _source_axes(u: UOp, axes: Axes) -> Axes | None:
    """Where the axes of `u`'s (first) source run in the kernel's output, given where `u`'s run; None when a view
    mixes them (a real reshape, a shrink, a pad, a flip), so that nothing is known."""
    if u.op in (Ops.EXPAND, Ops.REDUCE_AXIS) or u.op not in GroupOp.Movement and u.src and \
            all(s.shape == u.shape for s in u.src):   # elementwise, casts, CONTIGUOUS: the same axes
        return axes
    if u.op is Ops.PERMUTE:
        out: list[int | None] = [None] * len(axes)
        for i, a in enumerate(u.arg):
            out[a] = axes[i]
        return tuple(out)
    if u.op is Ops.RESHAPE and _unit_free(u.shape or ()) and \
            [u.shape[i] for i in _unit_free(u.shape)] == [u.src[0].shape[i] for i in _unit_free(u.src[0].shape)]:
        kept = iter(axes[i] for i in _unit_free(u.shape))
        return tuple(next(kept) if n != 1 else None for n in u.src[0].shape)
    return None


def _varies_outer_only(u: UOp, axes: Axes | None, root: UOp, along: list[int]) -> bool:
    """Whether `u` (its axes `along` varying) varies only along outer axes of the kernel of `root`: the linearizer
    then places it before the inner loops, once per outer iteration, not once per element."""
    if axes is None:
        return False
    kept = {axes[a] for a in along}
    free = _unit_free(root.shape or ())
    if None in kept or not kept <= set(free):   # (an axis the kernel reduces is its innermost loop)
        return False
    return all(a > k for a in free if a not in kept for k in kept)


def _stepped_operand(u: UOp, axes: Axes | None, root: UOp, ctx: ScheduleCtx) -> bool:
    """Whether the broadcast `u`, read by a reduce in the kernel of `root`, repeats COSTLY_OPERAND_MIN or more
    elements with a transcendental along an output axis while they vary along a reduced one: the kernel evaluates
    them in its reduce loop, once a step, not as vectors (`COSTLY_OPERAND_MIN`)."""
    if axes is None or prod(u.src[0].shape) < COSTLY_OPERAND_MIN or len(axes) != len(u.shape):
        return False
    out = root.shape or ()
    spread = [a for a, (m, n) in enumerate(zip(u.src[0].shape, u.shape, strict=True)) if m == 1 and n > 1]
    if not any(axes[a] is not None and out[axes[a]] > 1 for a in spread) or \
            not any(u.src[0].shape[a] > 1 and (axes[a] is None or out[axes[a]] == 1) for a in range(len(axes))):
        return False
    return any(x.op in GroupOp.Transcendental for x in _evaluated(u.src[0], ctx, root, scalars=True))


# a reduce summing a transcendental of another reduce's outputs, read element for element (a logistic loss,
# `logaddexp(0, x @ w).mean()`), stores that reduce first from this many of its outputs on (fewer: a launch costs more)
NESTED_COSTLY_MIN = 256


def _costly_of_reduces(red: UOp, ctx: ScheduleCtx, root: UOp) -> list[UOp]:
    """The reduces, not yet stored and of NESTED_COSTLY_MIN outputs or more, whose outputs the reduce `red` (in the
    kernel of `root`) reads element for element while each of its elements takes a transcendental. Fused, every
    element of `red` is a reduce loop of its own, so `red`'s loop is no vector loop and its exps and logs run as
    scalar polynomials (a logistic loss of 2048 x 64: 105 us a call, 13 ns an exp; stored, the matrix-vector product
    and a vector loop: 6 + 5 us). Not a reduce read through a broadcast (a row's max: a row kernel's), nor one whose
    own elements take transcendentals (a logsumexp's sums of exps, against which one log a row is little)."""
    inner, costly, seen, stack = [], False, set(), [red.src[0]]
    while stack:
        x = stack.pop()
        if x in seen or ctx.is_leaf(x, root) or _is_expanding(x):
            continue
        seen.add(x)
        if x.op is Ops.REDUCE_AXIS:
            inner.append(x)
            continue
        costly |= x.op in GroupOp.Transcendental
        stack.extend(x.src)
    return [r for r in inner if prod(r.shape) >= NESTED_COSTLY_MIN and not _gather(r) and
            not any(x.op in GroupOp.Transcendental for x in _evaluated(r.src[0], ctx, root))] if costly else []


def _plain_reduces(root: UOp, ctx: ScheduleCtx) -> set[UOp]:
    """The reduces in the kernel of `root` read directly, not through a broadcast as a row's statistic is (a matmul
    whose rows are normalised)."""
    plain, seen, stack = set(), set(), [(root, False)]
    while stack:
        u, expanded = stack.pop()
        if (u, expanded) in seen:
            continue
        seen.add((u, expanded))
        if u is not root and u.op is Ops.REDUCE_AXIS:
            if not expanded:
                plain.add(u)
            expanded = False   # what the reduce reads is read by it directly
        stack.extend((s, expanded or _is_expanding(u)) for s in u.src if not ctx.is_leaf(s, root))
    return plain


def _row_reduce(red: UOp, axes: Axes | None, root: UOp) -> bool:
    """Whether the reduce `red`, read through a broadcast by the kernel of `root`, can be computed inside it once per
    row: its output varies only along outer axes of the kernel (so the linearizer places it before the inner loops,
    once per row, and not per element), it reduces over the rest, and a row stays in cache between the reduce's pass
    and the kernel's (softmax, layernorm: one kernel, each row read from memory once)."""
    if red.src[0].shape != root.shape or not _varies_outer_only(red, axes, root, _unit_free(red.shape)):
        return False
    return host_target().row_fits_cache(prod(red.src[0].shape[a] for a in red.arg[1]) * red.src[0].dtype.itemsize)


def _literal_like(u: UOp) -> bool:
    """An arange or a constant (through views): what the kernels reading it compute in place, never load."""
    return _iota_like(u) or _view_base(u).op is Ops.CONST


def _stored_aranges_apart(roots: list[UOp]) -> list[UOp]:
    """A loop, branch or call reads its operands from buffers; one that is an arange or a constant is stored as its
    own CONTIGUOUS copy, so it stays an arange or a constant for the graph's other uses: a one-hot gather by it is a
    load at the index only while it sees the positions it compares with and the constant it fills with
    (`gather.py`). A permutation's first round gathers from the arange that its sort's loop also reads; stored, every
    output was compared with every position (60,000 of them: a 14 GB buffer). `cumsum(x[idx])` of a vector: the
    scan's loop starts from the scalar -0.0 that the gather fills with; stored, the gather read its fill from that
    buffer and stayed a one-hot reduce (20,000 elements: 35 ms, 0.03 as a load)."""
    sink = UOp(Ops.SINK, None, tuple(roots))
    if not any(u.op in BODIED and any(_literal_like(a) for a in u.src[n_bodies(u):]) for u in walk(sink)):
        return roots

    def apart(u: UOp, ops: tuple[UOp, ...]) -> tuple[UOp, ...]:
        if u.op not in BODIED:
            return ops
        return tuple(UOp(Ops.CONTIGUOUS, a.dtype, (a,)) if buffer_view(a) is None and _literal_like(a) else a
                     for a in ops)
    # (one rebuild in graph order: a loop reading another's results is rebuilt once, on the new one; a map of loops
    # rebuilt from their old sources kept both, twice the loops)
    return list(substitute_outside_calls(sink, {}, apart).src)


def find_realizes(roots: list[UOp]) -> set[UOp]:
    """The nodes that get their own buffer."""
    realize = {_root_base(r) for r in roots if buffer_view(r) is None}
    order = walk(UOp(Ops.SINK, None, tuple(roots)))
    for u in order:
        if u.op in (Ops.CALL, Ops.LOOP, Ops.SWITCH):
            # opaque calls, loops and branches read buffers and write their own
            realize.update(a for a in u.src[n_bodies(u):] if buffer_view(a) is None)
        elif u.op is Ops.GETTUPLE:
            realize.add(u)
        elif u.op is Ops.NETWORK:  # a collective between processes reads and writes whole buffers
            realize.update((u,) if buffer_view(u.src[0]) is not None else (u, u.src[0]))
        elif u.op is Ops.COPY:
            if u.tag != "in place":   # one read where it lies (shared memory) is part of the kernel that reads it
                realize.add(u)
            if (base := copy_source(u.src[0])[0]).op is not Ops.BUFFER:
                realize.add(base)
        elif is_concat(u):
            realize.add(u)
            realize.update(base for x, _ in concat_pieces(u) if (base := copy_source(x)[0]).op is not Ops.BUFFER)
        elif u.op is Ops.CONTIGUOUS and buffer_view(u.src[0]) is None:
            realize.add(u)
    # scatters are kernels of their own (or their operand's, `_scatter_roots`): `gather.collapse_scatter` makes them a
    # loop over their updates, each evaluated once (not once per row, as the reduce's broadcast says)
    scatters = [u for u in order if u.op is Ops.REDUCE_AXIS and _scatter_reduce(u)]
    realize.update(_scatter_roots(scatters, order, set(roots)))
    scatter_expands = set().union(*map(_scatter_value_expands, scatters))
    realize.update(_stored_concatenations(order))
    # a contraction that is a padded piece of a sum (the gradient of `q, k, v = split(x @ w, 3)`: dq, dk and dv
    # side by side) is stored first: fused, every element of the sum ran every piece's reduce loop, masked, and
    # without the contraction's register tile (a transformer's attention gradient, 8 x 64 x 192: 336 us; stored,
    # three tiled matmuls and a copy)
    realize.update(_padded_contractions(order))
    realize.update(_padded_reduces(order))
    ctx = ScheduleCtx(realize)
    # a kernel's walk that stored nothing, with the nodes it visited and the reduces and elementwise values it
    # computes: the same walk again until one of those nodes is stored (the rounds below store a few values each,
    # and walked every kernel each time: a ViT step's 38 rounds over 250 kernels took 3 s)
    walks: dict[UOp, tuple[set[UOp], int, list[UOp], list[UOp]]] = {}
    added = list(ctx.realize)   # the stored nodes in the order they were added (the set only grows)
    known = set(added)
    changed = True
    while changed:
        changed = False
        users: dict[UOp, set[UOp]] = {}
        shared: dict[UOp, set[UOp]] = {}   # elementwise values, by the kernels that compute them
        # the kernels in graph order (what one stores decides what the next reads): a set's order is the nodes'
        # addresses, which made the schedule differ between two builds of the same program
        stored = [u for u in order if u in ctx.realize]
        if len(stored) < len(ctx.realize):   # (every stored node is one of the graph's, but never drop one)
            stored += list(ctx.realize - set(stored))
        for root in stored:
            if len(ctx.realize) != len(known):
                fresh = ctx.realize - known
                added += fresh
                known.update(fresh)
            if (walk_of := walks.get(root)) is not None and \
                    not any(u in walk_of[0] for u in itertools.islice(added, walk_of[1], None)):
                for u in walk_of[2]:
                    users.setdefault(u, set()).add(root)
                for u in walk_of[3]:
                    shared.setdefault(u, set()).add(root)
                continue
            n_stored = len(ctx.realize)
            reduces, values = [], []   # what this kernel computes, for `users` and `shared`
            # walk the kernel of `root`, remembering whether the path from root passed an expanding EXPAND (or only
            # a scatter's of its updates, _UPDATES), whether it is inside a reduce, and where the axes of each node
            # run in the kernel's output (`_source_axes`)
            seen: set[tuple[UOp, bool | str, bool, Axes | None]] = set()
            stack: list[tuple[UOp, bool | str, bool, Axes | None]] = [(root, False, False,
                                                                  tuple(range(len(root.shape or ()))))]
            contractions, tops, tile_read = [], [], False
            onehot: set[UOp] = set()   # index sides of one-hot masks under `root`
            while stack:
                u, expanded, inside, axes = stack.pop()
                if (u, expanded, inside, axes) in seen:
                    continue
                seen.add((u, expanded, inside, axes))
                if u.op is Ops.REDUCE_AXIS and (nested := _costly_of_reduces(u, ctx, root)):
                    ctx.realize.update(nested)
                    changed = True
                if u is not root and u.op is Ops.REDUCE_AXIS:
                    users.setdefault(u, set()).add(root)
                    reduces.append(u)
                    if expanded == _UPDATES and _gather(u):
                        expanded = False   # (a gather in a scatter's updates is one load an update, as they are)
                    if expanded and u not in ctx.realize and _row_reduce(u, axes, root) and \
                            (plain := _plain_reduces(root, ctx) - ctx.realize):
                        # a row kernel reads its rows in each pass: a reduce it reads directly (a matmul whose rows
                        # it normalises) is stored first, or it would be computed once per pass, without its tile
                        ctx.realize.update(plain)
                        changed = True
                    elif expanded and u not in ctx.realize and not _row_reduce(u, axes, root):
                        ctx.realize.add(u)
                        changed = True
                        continue
                    if not inside:
                        tops.append(u)
                    if not inside and _is_contraction(u):
                        contractions.append(u)
                if u is not root and u.op in GroupOp.Elementwise and u.shape:
                    shared.setdefault(u, set()).add(root)
                    values.append(u)
                if (idx := _onehot_index(u)) is not None:
                    onehot.add(idx)
                # (a gather's one-hot mask and index are not evaluated per element of their broadcast: the kernel's
                # sum over the indexed axis becomes one load at the index, tgfx/lowering/gather.py)
                if inside and _is_expanding(u) and u not in scatter_expands and (prod(u.arg) >= RECOMPUTE_MIN or
                                                    _stepped_operand(u, axes, root, ctx)) and u not in onehot and \
                        not is_onehot(u.src[0]) and not _iota_like(u.src[0]) and \
                        (base := _view_base(u.src[0], pads=True)) not in ctx.realize and \
                        base.op in GroupOp.Elementwise and \
                        _recompute_cost(base, ctx, root) >= (RECOMPUTE_COST if base is not _view_base(u.src[0])
                                                             else RECOMPUTE_COST_OPERAND) and \
                        not _varies_outer_only(u.src[0], axes, root, _unit_free(u.src[0].shape or ())):
                    # an operand of a reduce read through a broadcast (a matmul's) is evaluated once per element of
                    # the broadcast axis: costly elementwise work there (an activation, a random hash) is stored first
                    # (sigmoid(a) @ w: 559 us fused, 91 us stored, for a 128x256 @ 256x64). A padded convolution's
                    # input too: the gradient of a batch norm and a max pool, fused into the next convolution's input
                    # gradient, ran once per tap and output channel, and without the convolution's tile (a ResNet
                    # step: 600 ms of 625 in that kernel)
                    ctx.realize.add(base)
                    changed = True
                    continue
                src_axes = None if axes is None else _source_axes(u, axes)
                past = _UPDATES if u in scatter_expands and not expanded else expanded or _is_expanding(u)
                for s in u.src:
                    if not ctx.is_leaf(s, root):
                        stack.append((s, past, inside or u.op is Ops.REDUCE_AXIS,
                                      src_axes if src_axes is not None and len(s.shape or ()) == len(src_axes)
                                      else None))
                    elif not (expanded or _is_expanding(u) or inside) and s.op is not Ops.CONST:
                        tile_read = True   # a stored value read whole, outside any reduce: an epilogue's tile
            if contractions and (others := [r for r in tops if r not in contractions and r not in ctx.realize]):
                # another reduce beside a contraction is computed once per lane of the contraction's register tile,
                # unrolled (a max pool's gradient: the count of each window's maxima beside the next layer's input
                # gradient, 200 KB of IR and 0.9 s in LLVM): stored first, each of its outputs is one load
                ctx.realize.update(others)
                changed = True
            if (unstored := [r for r in tops if r not in ctx.realize and not _gather(r)]) and \
                    _recompute_cost(root, ctx, root, EPILOGUE_COST) >= EPILOGUE_COST:
                # an epilogue this costly (noise drawn for each output: a hash of its index) runs once per lane of the
                # reduce's register tile, unrolled: stored first, the reduce keeps its tile and the epilogue is a loop
                # (a gather has no tile: it is one load an element)
                ctx.realize.update(unstored)
                changed = True
            if tile_read:
                # an epilogue that reads a tile of another buffer is carried by the contraction's accumulator vectors
                # (`w - lr * x.T @ g`, a residual add: one kernel). Not when every operand runs along the reduced
                # axis in memory (`g @ w.T` with no transposed copy): the tile's vectors then run along that axis, each
                # output a scalar, and so is its epilogue, an exp there one scalar polynomial an output (a graph
                # attention step's ELU gradient: 507 us fused, 57 + a vectorised elementwise kernel stored first)
                for red in contractions:
                    if red not in ctx.realize and _dot_layout(red, unknown=True):
                        ctx.realize.add(red)
                        changed = True
            if len(ctx.realize) == n_stored:
                walks[root] = ({v[0] for v in seen}, len(added), reduces, values)
        if changed:
            continue   # a reduce several kernels read is decided on the kernels as the other rules leave them
        for red, kernels in users.items():
            if len(kernels) > 1 and red not in ctx.realize and not _stored_gather(red, ctx):
                ctx.realize.add(red)
                changed = True
        if changed:
            continue
        # an elementwise value as costly as SHARED_COST that several kernels compute (a dropout mask's hash, in the
        # forward and in the gradient: 50 us each for 128 x 512) is stored once, the outermost such value first (what
        # it is computed from is then read by one kernel only); then those that read SHARED_READS stored values whole
        several = [u for u in reversed(order) if len(shared.get(u, ())) > 1 and u not in ctx.realize]
        costly = next((u for u in several if _recompute_cost(u, ctx, u, SHARED_COST) >= SHARED_COST), None)
        if costly is not None:
            ctx.realize.add(costly)
            changed = True
            continue
        # (the values reading SHARED_READS stored values, all at once: a residual stream is one such value a block, each
        # inside the next, and one at a time the schedule walked every kernel again for each: 1 s for 4 blocks)
        if wide := [u for u in several if prod(u.shape) >= RECOMPUTE_MIN and _whole_reads(u, ctx) >= SHARED_READS]:
            ctx.realize.update(wide)
            changed = True
    return ctx.realize


def kernel_ast(root: UOp, out_buf: UOp, realized: dict[UOp, UOp]) -> tuple[UOp, list[UOp]]:
    """The AST computing `root` into slot 0, and the buffers of its slots."""
    bufs = [out_buf]
    slot: dict[UOp, int] = {out_buf: 0}

    def global_of(buf: UOp) -> UOp:
        if buf not in slot:
            slot[buf] = len(bufs)
            bufs.append(buf)
        if buf.dtype.is_complex:  # read as its (re, im) pairs (tgfx/lowering/complex.py)
            g = UOp(Ops.DEFINE_GLOBAL, buf.dtype.real, (), (slot[buf], 2 * buf.arg[2]))
            return UOp(Ops.RESHAPE, g.dtype, (g,), (buf.arg[2], 2))
        return UOp(Ops.DEFINE_GLOBAL, buf.dtype, (), (slot[buf], buf.arg[2]))

    new: dict[UOp, UOp] = {}
    stack: list[tuple[UOp, bool]] = [(root, False)]
    while stack:
        u, ready = stack.pop()
        if u in new:
            continue
        if u is not root and u in realized:
            g = global_of(realized[u])
            new[u] = UOp(Ops.RESHAPE, g.dtype, (g,), u.shape if not u.dtype.is_complex else (*u.shape, 2))
            continue
        if u.op is Ops.BUFFER:
            new[u] = global_of(u)
            continue
        assert u.op not in (Ops.CALL, Ops.PARAM, Ops.FUNCTION), f"{u.op} inside a kernel"
        if not ready:
            stack.append((u, True))
            stack.extend((s, False) for s in u.src if s not in new)
            continue
        src = tuple(new[s] for s in u.src)
        if u.op in (Ops.CONTIGUOUS, Ops.COPY, Ops.AS_COMPLEX, Ops.AS_PAIRS):
            # materialisation is this kernel's store; an in-place read of another device's memory reads its buffer;
            # a complex value is its pairs here
            new[u] = src[0]
        elif u.dtype is not None and u.dtype.is_complex and u.op in GroupOp.Movement:
            new[u] = pairs_view(u, src[0])   # a result's view of a stored complex value: a view of its pairs
        else:
            new[u] = u if src == u.src else u.replace(src=src)
    value = new[root]
    out = UOp(Ops.DEFINE_GLOBAL, out_buf.dtype.real, (), (0, out_buf.arg[2] * (2 if out_buf.dtype.is_complex else 1)))
    return UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (out, value)),)), bufs


def _unit_free(shape: tuple[int, ...]) -> list[int]:
    return [i for i, n in enumerate(shape) if n != 1]


def _layout(u: UOp) -> tuple[int | None, frozenset[int]]:
    """How `u` is laid out in memory, as far as a contraction's loads care: the axis along which consecutive
    elements are adjacent (-1: any, for a value constant along all its varying axes; None: none, or unknown), and
    the axes along which it is constant (broadcast, or of size 1). Views (reshapes, permutes, broadcasts) of a
    buffer or of a value stored row-major (a reduce, if it is materialised), and elementwise combinations of them.
    Kept on the node: a pure function of the graph under it (a transformer step's schedule asked it 27,000 times for
    119 operands)."""
    if (hit := u.__dict__.get("_layout")) is not None:
        return hit
    out = u.__dict__["_layout"] = _layout_of(u)
    return out


def _layout_of(u: UOp) -> tuple[int | None, frozenset[int]]:
    shape = u.shape or ()
    units = frozenset(i for i, n in enumerate(shape) if n == 1)
    if u.op is Ops.BUFFER:
        return (0 if u.arg[2] > 1 else -1), units
    if u.op is Ops.CONST:
        return -1, frozenset(range(len(shape)))
    if u.op in GroupOp.ALU or u.op is Ops.CAST:
        parts = [_layout(s) for s in u.src]
        const = frozenset.intersection(*(c for _, c in parts))
        axes = {a for a, _ in parts if a is not None and a != -1}

        def fits(a: int) -> bool:  # every operand runs along `a` in memory, or does not vary along it
            return all(b == a or b == -1 or a in c for b, c in parts)
        valid = [a for a in axes if fits(a)]
        if len(valid) == 1:
            return valid[0], const
        return (-1 if not axes and all(b is not None for b, _ in parts) else None), const
    if u.op not in (Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND):   # a reduce, a copy, ...: stored row-major if stored
        rest = [i for i in range(len(shape)) if i not in units]
        return (rest[-1] if rest else -1), units
    src = u.src[0]
    a, const = _layout(src)
    if u.op is Ops.PERMUTE:
        return (a if a is None or a == -1 else u.arg.index(a)), frozenset(u.arg.index(c) for c in const)
    if u.op is Ops.EXPAND:
        grown = frozenset(i for i, (x, y) in enumerate(zip(src.shape, shape, strict=True)) if x != y)
        return (None if a in grown else a), const | grown
    old_rest, new_rest = _unit_free(src.shape), _unit_free(shape)
    if [src.shape[i] for i in old_rest] == [shape[i] for i in new_rest]:   # a reshape that only adds or drops 1s
        moved = {o: n for o, n in zip(old_rest, new_rest, strict=True)}
        return (a if a is None or a == -1 else moved[a]), units | frozenset(moved[c] for c in const if c in moved)
    if a is not None and a != -1 and (y := _regrouped_axis(src.shape, shape, a)) is not None:
        return y, units   # the axes around it regrouped (a batch and its sequence, einsum's contracted axes as one)
    base = src
    while base.op is Ops.RESHAPE:
        base = base.src[0]
    # any other reshape keeps the layout only of a value stored row-major, whose last axis runs along memory
    stored = base.op not in GroupOp.Movement and base.op not in GroupOp.ALU and base.op is not Ops.CAST
    return (new_rest[-1] if stored and new_rest else None), units


def _regrouped_axis(old: tuple[int, ...], new: tuple[int, ...], a: int) -> int | None:
    """The axis of shape `new` that old axis `a` becomes in a reshape from `old`, when it keeps its length as the
    innermost axis of its group (the runs of axes whose products match): elements adjacent along it stay adjacent
    along that axis (`(t, b, j) -> (j, t, b) -> (1, j, t * b)`: j). None when it is split or merged with axes inside
    it."""
    olds, news = _unit_free(old), _unit_free(new)
    i = j = 0
    while i < len(olds) and j < len(news):
        gi, gj, po, pn = [olds[i]], [news[j]], old[olds[i]], new[news[j]]
        while po != pn:
            if po < pn and i + len(gi) < len(olds):
                gi.append(olds[i + len(gi)])
                po *= old[gi[-1]]
            elif pn < po and j + len(gj) < len(news):
                gj.append(news[j + len(gj)])
                pn *= new[gj[-1]]
            else:
                return None
        if a in gi:
            return gj[-1] if gi[-1] == a and new[gj[-1]] == old[a] else None
        i, j = i + len(gi), j + len(gj)
    return None


def _is_view(u: UOp) -> bool:
    """Whether `u` only moves a stored buffer around (no arithmetic): a buffer, or a result of a loop or a branch
    (stored by it: the stacked operands of a recurrent weight's gradient, `control_grad._Stacked`)."""
    while u.op in GroupOp.Movement or u.op is Ops.DYNAMIC_SHRINK:
        u = u.src[0]
    return u.op is Ops.BUFFER or u.op is Ops.GETTUPLE and u.src[0].op in (Ops.LOOP, Ops.SWITCH)


def _stored_operand(u: UOp) -> bool:
    """Whether a contraction's operand `u` is stored before the contraction reads it: a view of a buffer, or of an
    elementwise value that `realize_set` stores anyway as a matmul operand (it costs `RECOMPUTE_COST_OPERAND`: the
    weight gradient's `g = dh * (1 - h * h)` in `x.T @ g`), so that a copy of it in another layout costs no more."""
    if _is_view(u):
        return True
    base = _elementwise_value(u)
    return base is not None and _recompute_cost(base, ScheduleCtx(), base) >= RECOMPUTE_COST_OPERAND


def _elementwise_value(u: UOp) -> UOp | None:
    """The elementwise value `u` views (no padding), unless it is an arange or a one-hot mask, which the lowering
    reads as index arithmetic and never stores; else None."""
    base = _view_base(u)
    ok = base is _view_base(u, pads=True) and base.op in GroupOp.Elementwise and not _iota_like(base) and \
        not is_onehot(base)
    return base if ok else None


def _dot_layout(red: UOp, unknown: bool = False) -> bool:
    """Whether a one-axis contraction's operands all run along its reduced axis in memory: each output a dot product
    of two stride-1 walks, no output axis readable as vectors. With `unknown`, an operand whose layout is not known
    yet (a value computed for it: the gradient of a loss) counts as running along its last varying axis, as it does
    once stored."""
    if len(red.arg[1]) != 1:
        return False
    ax = red.arg[1][0]

    def along(v: UOp) -> bool:
        a = _layout(v)[0]
        return a == ax or unknown and a is None and _view_base(v).op in GroupOp.ALU and \
            max((j for j, n in enumerate(v.shape) if n != 1), default=-1) == ax
    return all(along(e.src[0]) for e in red.src[0].src)


def _transposed_operand(red: UOp) -> UOp | None:
    """`a @ w.T` as a contraction: when the reduced axis runs along memory in both operands, every load in the loop
    is a dot product's stride-1 walk and no output axis can be read as vectors. A stored operand reused at least
    `REUSE_TO_TRANSPOSE` times is then read through a transposed copy, so the other output axis becomes contiguous
    in it: the contraction is a plain `a @ b`, for one extra pass over the smaller such operand. The reduce with that
    operand replaced, or None."""
    if len(red.arg[1]) != 1 or not _is_contraction(red):
        return None
    src, ax = red.src[0], red.arg[1][0]
    if not _dot_layout(red, unknown=True):
        return None

    def gains(v: UOp) -> bool:  # the axis the copy makes contiguous is as long as the narrowest contraction tile
        rest = [n for j, n in enumerate(v.shape) if j != ax and n != 1]
        tiles = host_target().contraction_tiles(max(v.dtype.itemsize, 4))
        return bool(rest) and rest[-1] >= min(lanes for lanes, _ in tiles)
    # the smaller operand; of two alike, the one along the output's last axis, whose copy the tile then reads as its
    # vectors with the output stored along its rows (`_packed_operand` packs it straight from the view: `a @ b.T` of
    # 1024^3, 24-30 ms copying `a` -> 11-12 ms, `a @ b`'s 10-11.5). That one too when its copy is no bigger than the
    # output: the other's puts the tile's vectors down the output's columns, stored a lane at a time, and over a short
    # reduce those stores are the kernel's time (64 x 16 @ (512 x 16).T, 64 chains' logits of HMC: 83 us, 7 with the
    # 512 x 16 operand copied)
    last = max((j for j, n in enumerate(src.shape) if n != 1 and j != ax), default=None)
    candidates = [(prod(e.src[0].shape), last is None or e.src[0].shape[last] == 1, i) for i, e in enumerate(src.src)
                  if _copyable(e.src[0]) and gains(e.src[0]) and
                  prod(e.arg) // prod(e.src[0].shape) >= REUSE_TO_TRANSPOSE]
    if not candidates or src.shape[ax] < 2:
        return None
    along_last = [c for c in candidates if not c[1] and c[0] <= prod(src.shape) // src.shape[ax]]
    i = min(along_last or candidates)[2]
    e = src.src[i]
    v = e.src[0]
    perm = (ax, *(j for j in range(len(v.shape)) if j != ax))
    inv = tuple(perm.index(j) for j in range(len(perm)))
    copy = UOp(Ops.CONTIGUOUS, v.dtype, (UOp(Ops.PERMUTE, v.dtype, (v,), perm),))
    operand = e.replace(src=(UOp(Ops.PERMUTE, v.dtype, (copy,), inv),))
    return red.replace(src=(src.replace(src=tuple(operand if j == i else o for j, o in enumerate(src.src))),))


def _copyable(v: UOp) -> bool:
    """Whether a transposed copy of contraction operand `v` costs one pass over it: a view of a buffer, or an
    elementwise value of views and of reduces (stored before a contraction reads them: attention's keys, a projection's
    output plus its bias, sliced per head), which the copy then computes once where the contraction computed each
    element once per use."""
    if _is_view(v):
        return True
    base = _elementwise_value(v)
    if base is None:
        return False
    stack, seen = [base], set()   # each node once: a value's sources may share nodes
    while stack:
        u = stack.pop()
        if u in seen or _is_view(u) or u.op in (Ops.CONST, Ops.REDUCE_AXIS):
            continue
        if u.op not in GroupOp.Movement and u.op not in GroupOp.Elementwise:
            return False
        seen.add(u)
        stack.extend(u.src)
    return True


def _transposed_copy(u: UOp) -> UOp | None:
    """The copy `_transposed_operand` made that view `u` reads (a CONTIGUOUS of a view of a buffer), else None."""
    base = _view_base(u)
    return base if base.op is Ops.CONTIGUOUS and _is_view(base.src[0]) else None


# set while the body of a loop or branch is scheduled (`template_of`)
_in_repeated_body: contextvars.ContextVar[bool] = contextvars.ContextVar("in_repeated_body", default=False)


def _copies_own_panels(k: int, n: int, rows: int, itemsize: int, target: Target) -> bool:
    """Whether the kernel of a contraction whose vector operand `w` (k x n) is a buffer copies its panels of `w`
    itself (tgfx/lowering/panel_buffer.py), so that no kernel need pack `w` first: its `rows` split into the register
    tile's rows (the heuristics then give it a row tile), `w` is too big for its panels to stay inside the tile's row
    blocks (`optimize._panel_order` puts them outside: each panel is read by every row block in turn), and a panel
    fits the cache (`Target.panel_fits_cache`). Not in a loop's body (`template_of`): a constant's pack runs once."""
    if _in_repeated_body.get():
        return False
    nr, mr = target.contraction_tiles(itemsize)[0]
    panel = k * nr * itemsize
    return rows % mr == 0 and target.panels_outside_rows(k * n * itemsize, panel) and target.panel_fits_cache(panel)


def _packed_operand(red: UOp) -> UOp | None:
    """`x @ w` where the tile's panel of `w` spans more pages than the TLB holds: a register tile reads a narrow
    panel of `w` (the tile's vector lanes wide), one row of it a step of the reduce loop, so with rows of a page or
    more each step lands on another page, and with rows of half a page every other step (784 x 512 float32: 392
    pages a panel). Such a panel also keeps few of its lines in the first-level cache: rows a power of two apart
    share its sets. As BLAS does, such a stored operand, reused at least `REUSE_TO_TRANSPOSE` times, is read through
    a packed copy: panels of the tile's width, each contiguous, so a panel is a sequential stream (`K x N` to
    `N/nr x K x nr`; the contraction reads it through a view, and UPCAST's lanes give back contiguous vector loads).
    Only the operand the tile reads as vectors is packed: the one that runs in memory along the output's last axis
    (the one hand_coded_opts vectorises); the other's few elements a step are broadcast. (AVX2 class, the MLP step's
    128 x 784 @ 784 x 512: 1068 -> 553 us, with 94 us of packing.) Where the vector operand is a buffer whose panels
    the contraction's own kernel copies as it goes (`_copies_own_panels`), no kernel packs it: that copy was a whole
    extra pass over it. The reduce with that operand replaced, or None."""
    if len(red.arg[1]) != 1 or not _is_contraction(red):
        return None
    src, ax = red.src[0], red.arg[1][0]
    if not get_device(red.device if isinstance(red.device, str) else DEFAULT_DEVICE).compiles_on_host:
        return None   # pages and TLB entries are the CPU's concern; a GPU's tile reads its panel through its caches
    target = host_target()
    last = max((j for j, n in enumerate(src.shape) if n != 1 and j != ax), default=None)
    for i, e in enumerate(src.src):
        v = e.src[0]
        rest = [j for j, n in enumerate(v.shape) if n != 1]
        lay = _layout(v)[0]
        copied = _transposed_copy(v)
        if not (_stored_operand(v) or copied) or len(rest) != 2 or ax not in rest or lay not in rest or lay == ax:
            continue
        # the vector operand (along the output's last axis) in panels of the tile's lanes; the broadcast one, stored
        # transposed (x in x.T @ g: each step of the reduce reads a tile's rows side by side, a row of x a page
        # apart), in panels of the tile's rows once its sweep outgrows the second-level TLB (a transformer's 4096
        # tokens: 7.3 -> 5.6 ms for 256 x 4096 @ 4096 x 1024), or the first-level one when it outgrows half of L2 too:
        # each panel of the other operand then reads it again from L3, a page a step, where no prefetcher follows
        # (`a.T @ b` of 1024^3: 28 -> 12.5-16 ms, `a @ b`'s 9-13; the MLP step's 128 rows of 400 KB: no faster, left)
        vector = lay == last
        itemsize = max(v.dtype.itemsize, 4)
        width = target.contraction_tiles(itemsize)[0][0] if vector else target.tile_rows()
        k, n = v.shape[ax], v.shape[lay]
        pages = k * min(n * v.dtype.itemsize, PAGE_BYTES)
        far = pages > STLB_PAGES * PAGE_BYTES or pages > TLB_PAGES * PAGE_BYTES and v.size * itemsize > target.l2 // 2
        if not (rows_outrun_tlb(k, n * v.dtype.itemsize) if vector else far) or n % width or \
                prod(e.arg) // prod(v.shape) < REUSE_TO_TRANSPOSE:
            continue
        if vector and _is_view(v) and not copied and _copies_own_panels(k, n, prod(e.arg) // prod(v.shape), itemsize,
                                                                        target):
            continue   # a pass over w that the contraction's kernel makes itself, panel by panel, in its cache
        if copied:   # packed from what the transposed copy would have read: one copy, not a copy and its pack
            v = v.substitute({copied: copied.src[0]})
        rows = v if rest == [ax, lay] else \
            UOp(Ops.PERMUTE, v.dtype, (UOp(Ops.RESHAPE, v.dtype, (v,), (n, k)),), (1, 0))   # (k, n) in memory order
        panels = UOp(Ops.RESHAPE, v.dtype, (rows,), (k, n // width, width))
        packed = UOp(Ops.CONTIGUOUS, v.dtype, (UOp(Ops.PERMUTE, v.dtype, (panels,), (1, 0, 2)),))
        view = UOp(Ops.PERMUTE, v.dtype, (packed,), (1, 0, 2))
        if rest != [ax, lay]:
            view = UOp(Ops.PERMUTE, v.dtype, (UOp(Ops.RESHAPE, v.dtype, (view,), (k, n)),), (1, 0))
        operand = e.replace(src=(UOp(Ops.RESHAPE, v.dtype, (view,), v.shape),))
        return red.replace(src=(src.replace(src=tuple(operand if j == i else o for j, o in enumerate(src.src))),))
    return None


def _split_sum_of_contractions(red: UOp) -> UOp | None:
    """A sum of contractions over the same axes, `sum(a1 * b1 + a2 * b2 + ...)`, as the sum of each one's reduce. The
    gradient of a value that several matmuls read one broadcast of (attention's input, read by the query, key and
    value projections) accumulates their products before the reduce: as one reduce it is no contraction, so its
    operands get no transposed or packed copies and the kernel no register tile (a transformer step's `dx`, with
    the heads laid out apart: 136 ms, 4 GFLOP/s). Each product then is a matmul of its own."""
    if red.arg[0] is not Ops.ADD or red.src[0].op is not Ops.ADD:
        return None
    terms = sum_terms(red.src[0])
    if not all(t.op is Ops.MUL and all(_is_expanding(e) for e in t.src) for t in terms):
        return None
    parts = [UOp(Ops.REDUCE_AXIS, red.dtype, (t,), red.arg) for t in terms]
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def _unbroadcast(u: UOp, axis: int) -> UOp | None:
    """`u` with its `axis` of size 1, where every value under it is a broadcast along that axis (EXPANDs, and
    elementwise ops of them), else None."""
    if u.shape[axis] == 1:
        return u
    shape = tuple(1 if a == axis else n for a, n in enumerate(u.shape))
    if (base := _view_base(u)).op is Ops.CONST and not base.shape:   # a scalar broadcast (a gradient's seed)
        one = UOp(Ops.RESHAPE, base.dtype, (base,), (1,) * len(shape))
        return UOp(Ops.EXPAND, base.dtype, (one,), shape)
    if u.op is Ops.EXPAND:
        src = u.src[0]
        if src.shape[axis] != 1:
            return None
        return src if shape == src.shape else UOp(Ops.EXPAND, u.dtype, (src,), shape)
    if u.op in GroupOp.ALU or u.op is Ops.CAST:
        srcs = [_unbroadcast(s, axis) for s in u.src]
        return None if any(s is None for s in srcs) else UOp(u.op, u.dtype, tuple(srcs), u.arg)
    return None


def _reduce_before_broadcast(red: UOp) -> UOp | None:
    """A reduce of a value that is a broadcast along an axis it keeps (the gradient of a `.sum()` loss through a
    matmul: ones @ w.T, each output row the same sum) as the reduce of the value without that axis, broadcast after:
    attention's weights' gradient under a summed loss was a 32 x 8 x 128 x 128 kernel summing the same 32 values for
    every row (15 ms)."""
    src = red.src[0]
    if red.arg[0] is not Ops.ADD or src.op is not Ops.MUL or prod(src.shape) < RECOMPUTE_MIN:
        return None   # (a scatter's any-hit mask, a max over a broadcast index, stays in its one kernel)
    for axis in (a for a, n in enumerate(red.shape) if n > 1):
        if (narrow := _unbroadcast(src, axis)) is not None:
            src = narrow
    if src is red.src[0]:
        return None
    small = UOp(Ops.REDUCE_AXIS, red.dtype, (src,), red.arg)
    return UOp(Ops.EXPAND, red.dtype, (small,), red.shape)


def _merge_reduce_axes(red: UOp) -> UOp | None:
    """A contraction over adjacent axes that both operands vary along (a weight's gradient summed over a batch and
    its sequence, (B, T, I) and (B, T, J) to (I, J)) as one over their product: one reduce axis, which
    `_transposed_operand` and `_packed_operand` know (the (4096, 1024) operand of a transformer's up projection,
    read row by row a page apart, was not packed: 85 GFLOP/s; packed, 160)."""
    axes = red.arg[1]
    if len(axes) < 2 or red.arg[0] is not Ops.ADD or not _is_contraction(red) or \
            list(axes) != list(range(axes[0], axes[0] + len(axes))):
        return None
    src = red.src[0]
    a, n = axes[0], len(axes)
    merged = (*src.shape[:a], prod(src.shape[a:a + n]), *src.shape[a + n:])
    operands = []
    for e in src.src:
        v = e.src[0]
        if any(v.shape[i] != src.shape[i] for i in axes):
            return None   # broadcast along a reduced axis: not one axis of it
        flat = (*v.shape[:a], prod(v.shape[a:a + n]), *v.shape[a + n:])
        operands.append(UOp(Ops.EXPAND, e.dtype, (UOp(Ops.RESHAPE, v.dtype, (v,), flat),), merged))
    one = UOp(Ops.REDUCE_AXIS, red.dtype, (UOp(Ops.MUL, src.dtype, tuple(operands)),), (Ops.ADD, (a,)))
    return UOp(Ops.RESHAPE, red.dtype, (one,), red.shape)


# reduces rewritten before the kernels are chosen: a broadcast's sum taken before it, a batch's axes as one, a sum of
# matmuls as matmuls, and a contraction's operands read through transposed or packed copies where that pays
pm_transpose_operands = PatternMatcher([(UPat(Ops.REDUCE_AXIS, name="red"), _reduce_before_broadcast),
                                        (UPat(Ops.REDUCE_AXIS, name="red"), _merge_reduce_axes),
                                        (UPat(Ops.REDUCE_AXIS, name="red"), _split_sum_of_contractions),
                                        (UPat(Ops.REDUCE_AXIS, name="red"), _transposed_operand),
                                        (UPat(Ops.REDUCE_AXIS, name="red"), _packed_operand)])


def schedule(roots: list[UOp]) -> tuple[UOp, dict[UOp, UOp]]:
    """LINEAR of CALLs computing `roots`, and each root's result as a view of a buffer."""
    given = roots
    # complex values are computed as their (re, im) pairs: no kernel sees a complex type
    roots = lower_complex(roots)
    roots = list(graph_rewrite(UOp(Ops.SINK, None, tuple(roots)), pm_transpose_operands, name="transpose").src)
    # a result that is another device's value read in place is materialised by its COPY (an alias where it can be)
    roots = [r.src[0] if r.op is Ops.CONTIGUOUS and r.src[0].op is Ops.COPY and r.src[0].tag == "in place" else r
             for r in roots]
    roots = _stored_aranges_apart(roots)
    realize = find_realizes(roots)
    results_of = {_root_base(r) for r in roots}
    realized: dict[UOp, UOp] = {}  # node -> its BUFFER
    calls: list[UOp] = []
    for u in walk(UOp(Ops.SINK, None, tuple(roots))):
        if u.op is Ops.CALL:
            calls.extend(schedule_call(u, realized))
            continue
        if u.op in (Ops.LOOP, Ops.SWITCH):
            calls.extend(schedule_control(u, realized))
            continue
        if u not in realize:
            continue
        if u.op is Ops.GETTUPLE:
            continue  # its CALL filled `realized`
        if u.op is Ops.COPY and _copied_by_kernel(u):
            out = realized[u] = new_buffer(u.arg, prod(u.shape), u.dtype)
            ast, bufs = kernel_ast(u, out, realized)   # (a kernel on the destination reading the source in place)
            calls.append(UOp(Ops.CALL, None, (ast, *bufs)))
            continue
        if u.op is Ops.COPY:
            base, off = copy_source(u.src[0])
            src_buf = base if base.op is Ops.BUFFER else realized[base]
            dst = new_buffer(u.arg, prod(u.shape), u.dtype)
            nbytes, offset = dst.arg[2] * u.dtype.itemsize, off * u.dtype.itemsize
            # a result read in place from memory this device shares, and computed here, is that memory (an alias)
            alias = u.tag == "in place" and u in results_of and base.op is not Ops.BUFFER and off == 0 and \
                prod(base.shape) == dst.arg[2]
            calls.append(UOp(Ops.CALL, None, (UOp(Ops.COPY, None, (), (nbytes, offset, 0), tag="alias" if alias else
                                                  None), dst, src_buf)))
            realized[u] = dst
            continue
        if u.op is Ops.NETWORK:  # the network engine runs it on (out, in)
            dst = realized[u] = new_buffer(u.device, prod(u.shape), u.dtype)
            src = buffer_view(u.src[0]) or realized[u.src[0]]
            calls.append(UOp(Ops.CALL, None, (UOp(Ops.NETWORK, None, (), u.arg), dst, src)))
            continue
        if is_concat(u):  # pieces copied into place
            out = realized[u] = new_buffer(u.device or DEFAULT_DEVICE, prod(u.shape), u.dtype)
            for x, at in concat_pieces(u):
                base, off = copy_source(x)
                size = u.dtype.itemsize
                arg = (prod(x.shape) * size, off * size, at * size)
                calls.append(UOp(Ops.CALL, None, (UOp(Ops.COPY, None, (), arg), out,
                                                  base if base.op is Ops.BUFFER else realized[base])))
            continue
        if u.op is Ops.CONTIGUOUS and (base := _unreshaped(u.src[0])) in realized:
            # (a reshape of a stored value is its buffer: an embedding table's gradient, its scatter's (1, rows,
            # width) stored as (rows, width), was copied, 1.5 ms for 32,000 x 256)
            realized[u] = realized[base]
            continue
        out = new_buffer(u.device or DEFAULT_DEVICE, prod(u.shape), u.dtype)
        realized[u] = out
        if prod(u.shape) == 0:
            continue
        ast, bufs = kernel_ast(u, out, realized)
        calls.append(UOp(Ops.CALL, None, (ast, *bufs)))
    results: dict[UOp, UOp] = {}
    for g, r in zip(given, roots, strict=True):
        buf = realized.get(_root_base(r)) or buffer_view(r)
        results[g] = r if buf is None else (buf if buf.shape == r.shape else UOp(Ops.RESHAPE, r.dtype, (buf,), r.shape))
    calls = merge_siblings(calls)
    # an alias of memory that is no result would be memory the program reuses: copied instead
    kept = {buffer_view(r) for r in results.values()}
    calls = [c.replace(src=(c.src[0].replace(tag=None), *c.src[1:])) if is_alias(c) and c.src[2] not in kept else c
             for c in calls]
    return UOp(Ops.LINEAR, None, tuple(calls)), results


# at most this many outputs one kernel of merged siblings stores (each is a stream of the loop and the registers of
# its pending values)
SIBLING_OUTPUTS = 4


def _elementwise_outputs(call: UOp) -> tuple[int, ...] | None:
    """The output shape of a kernel that stores whole elementwise values (no reduce but gathers, no window), else
    None."""
    ast = call.src[0]
    if ast.op is not Ops.SINK or isinstance(ast.arg, str) or \
            any(st.op is not Ops.STORE or st.src[0].op is not Ops.DEFINE_GLOBAL for st in ast.src):
        return None
    shapes = {st.src[1].shape for st in ast.src}
    if len(shapes) != 1 or any(u.op is Ops.REDUCE_AXIS and not _gather(u) for u in ast.toposort()) or \
            (len(ast.src) == 1 and window_update(ast) is not None) or any(pad_pieces(st.src[1]) for st in ast.src):
        return None   # (a gather is one load an element; a window update may run in place, storing the window alone;
        # a concatenation is stored piece by piece, each its own loop, which no other output shares)
    return shapes.pop()


def _written(call: UOp) -> list[UOp] | None:
    """The buffers a command of `schedule` writes (`control.writes`), None for one that is not a kernel or a copy: a
    loop's or a branch's, which `merge_siblings` does not move anything past."""
    from tgfx.lowering.control import writes
    return writes(call) if call.src[0].op in (Ops.SINK, Ops.COPY, Ops.NETWORK) else None   # (a callback: None)


def _into_slots(ast: UOp, call: UOp, bufs: list[UOp]) -> UOp:
    """`ast` (of kernel `call`, or some of its stores) with each buffer slot renumbered to that buffer's place in
    `bufs`, which takes the buffers it lacks at its end."""
    renumber = {}
    for g in (u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL):
        if (buf := call.src[1 + g.arg[0]]) not in bufs:
            bufs.append(buf)
        renumber[g] = g.replace(arg=(bufs.index(buf), *g.arg[1:]))
    return ast.substitute(renumber)


def _merged(a: UOp, b: UOp) -> UOp | None:
    """Kernel `a` storing `b`'s outputs too: b's buffers renumbered into a's slots, and what b reads of a's outputs
    element for element (its own element: a view of the same shape) taken from the value a stores, not loaded back.
    None where b reads one of a's outputs otherwise (another element's)."""
    bufs = list(a.src[1:])
    b_ast = _into_slots(b.src[0], b, bufs)
    stored = {st.src[0]: st.src[1] for st in a.src[0].src}   # a's output globals -> the values it stores there
    nodes = b_ast.toposort()
    if any(u in stored for u in nodes):
        own: dict[UOp, UOp] = {}
        for g, value in stored.items():
            for u in (u for u in nodes if g in u.src):
                if u.op is not Ops.RESHAPE or u.shape != value.shape or u.dtype != value.dtype or \
                        any(u in v.src and v.op in GroupOp.Movement for v in nodes):
                    return None   # (another element's: its value computed again there, or loaded)
                own[u] = value
        b_ast = b_ast.substitute(own)   # (a's outputs are a's slots already: no buffer was added for them)
    ast = UOp(Ops.SINK, None, (*a.src[0].src, *b_ast.src), a.src[0].arg)
    return UOp(Ops.CALL, None, (ast, *bufs))


def merge_siblings(calls: list[UOp]) -> list[UOp]:
    """Elementwise kernels of the same output shape on one device, as one kernel storing each output: what they read
    in common is read once, and what they compute in common computed once (a bitonic sort's pass updates its keys and
    their positions from the same compares, Adam its moments and its parameters from the same gradient, an LSTM cell
    its state and its output from the state). A kernel is merged into an earlier one that reads a buffer it reads too
    (unrelated values merged by shape alone made kernels that differ with a network's depth), or that stores what it
    reads element for element (`_merged`), when nothing between them writes what it reads (it runs earlier then); up
    to SIBLING_OUTPUTS outputs a kernel."""
    out: list[tuple[UOp, tuple[int, ...] | None, list[UOp] | None]] = []   # (command, its shape, what it writes)
    for c in calls:
        shape = _elementwise_outputs(c)
        merged = None
        if shape is not None:
            reads = set(c.src[1:])
            for i in range(len(out) - 1, -1, -1):
                prev, prev_shape, written = out[i]
                if written is None:
                    break
                if prev_shape == shape and prev.src[1].arg[1] == c.src[1].arg[1] and \
                        len(prev.src[0].src) < SIBLING_OUTPUTS and reads & set(prev.src[1:]) and \
                        (merged := _merged(prev, c)) is not None:
                    out[i] = (merged, shape, written + _written(c))
                    break
                if reads & set(written):
                    break
        if merged is None:
            out.append((c, shape, _written(c)))
    return [c for c, _, _ in out]


def kernel_of_stores(stores: list[UOp], call: UOp) -> UOp:
    """A kernel CALL storing `stores` (some of kernel `call`'s), its buffers renumbered to those they use."""
    bufs: list[UOp] = []
    sink = _into_slots(UOp(Ops.SINK, None, tuple(stores), call.src[0].arg), call, bufs)
    return UOp(Ops.CALL, None, (sink, *bufs))


def is_alias(call: UOp) -> bool:
    """Whether LINEAR command `call` is a COPY whose destination is its source's memory, seen from the destination's
    device (which shares it): no bytes move, the destination's device waits for the source's writer."""
    return call.src[0].op is Ops.COPY and call.src[0].tag == "alias"


def _arg_buffer(a: UOp, realized: dict[UOp, UOp]) -> UOp:
    return buffer_view(a) or realized[a]


def schedule_call(call: UOp, realized: dict[UOp, UOp]) -> list[UOp]:
    """An opaque CALL: a custom kernel runs as written; a precompiled function replays its cached schedule."""
    args = [_arg_buffer(a, realized) for a in call.src[1:]]
    body = call.src[0]
    outs = call_outputs(call)
    if body.op is Ops.SINK:  # a custom kernel: outputs take the first slots, then the inputs
        if not body.src:   # custom kernels store something; forward mode's loop placeholder is never evaluated
            raise RuntimeError(f"internal error: {body.arg} has no kernel to run (a forward-mode placeholder was "
                               f"evaluated); please report the program")
        out_bufs = [new_buffer(dev, prod(shape), dt) for shape, dt, dev in outs]
        for i, b in enumerate(out_bufs):
            realized[UOp(Ops.GETTUPLE, b.dtype, (call,), i)] = b
        return [UOp(Ops.CALL, None, (body, *out_bufs, *args))]
    if body.op is Ops.CALLBACK:   # a host callback: the processor runs it on (results, [token], arguments)
        out_bufs = [new_buffer(dev, prod(shape), dt) for shape, dt, dev in outs]
        for i, b in enumerate(out_bufs):
            realized[UOp(Ops.GETTUPLE, b.dtype, (call,), i)] = b
        return [UOp(Ops.CALL, None, (body, *out_bufs, *args), call.arg[3])]
    tpl = template_of(body)
    linear, results = tpl.instantiate(args)
    for i, r in enumerate(results):
        realized[UOp(Ops.GETTUPLE, r.dtype, (call,), i)] = buffer_view(r)
    return list(linear.src)


def schedule_control(u: UOp, realized: dict[UOp, UOp]) -> list[UOp]:
    """A LOOP or SWITCH: its body scheduled once, between control commands (tgfx/lowering/control.py)."""
    from tgfx.lowering.control import schedule_loop, schedule_switch
    args = [_arg_buffer(a, realized) for a in u.src[n_bodies(u):]]
    cmds, results = (schedule_loop if u.op is Ops.LOOP else schedule_switch)(u, args)
    for i, r in enumerate(results):
        realized[UOp(Ops.GETTUPLE, r.dtype, (u,), i)] = r
    return cmds


def call_outputs(call: UOp) -> list[tuple[tuple[int, ...], object, str]]:
    body = call.src[0]
    if body.op in (Ops.SINK, Ops.CALLBACK):
        return list(call.arg[2])
    return [(r.shape, r.dtype, r.device or DEFAULT_DEVICE) for r in body.src]


# ---- schedule templates: a schedule computed once per graph key, replayed with other buffers ----
def placeholder(slot: int, dtype, device: str, size: int) -> UOp:  # noqa: ANN001
    """An input buffer by position; its uid is fixed, so a graph's key does not depend on which buffers it reads."""
    return UOp(Ops.BUFFER, dtype, (), (-1 - slot, device, size))


class ScheduleTemplate:
    """The LINEAR for a graph whose inputs are placeholders; `instantiate` binds real buffers and fresh outputs."""

    def __init__(self, roots: list[UOp], n_inputs: int, key: str = "") -> None:
        self.key = key       # its entry in `_templates`
        self.roots = roots   # kept alive: the same graph built again is these nodes, their keys already computed
        self.programs: dict[str, Any] = {}   # its eager programs by kernel-option mode (eager_program)
        self.linear, results = schedule(roots)
        if config.SPEC:
            check_stage(self.linear, "linear")
        self.results = [results[r] for r in roots]
        self.n_inputs = n_inputs
        from tgfx.counters import counters
        counters.schedule_count += 1

    def instantiate(self, inputs: list[UOp]) -> tuple[UOp, list[UOp]]:
        def bind(b: UOp) -> UOp:  # placeholders are the inputs; every other buffer is made fresh
            return inputs[-1 - b.arg[0]] if b.arg[0] < 0 else new_buffer(b.arg[1], b.arg[2], b.dtype)
        mapping: dict[UOp, UOp] = {}
        result_bufs = [b for r in self.results if (b := buffer_view(r)) is not None]
        for b in [b for call in self.linear.src for b in call.src[1:]] + result_bufs:
            if b not in mapping:
                mapping[b] = bind(b)
        calls = tuple(c.replace(src=(c.src[0], *(mapping[b] for b in c.src[1:]))) for c in self.linear.src)
        return UOp(Ops.LINEAR, None, calls), [r.substitute(mapping) for r in self.results]


# by graph key; an evicted template's eager programs are released with it, once no submission still runs them
_templates: LRU[str, ScheduleTemplate] = LRU(lambda: int(config.SCHEDULE_CACHE_SIZE))


def _cached_template(key: str, roots: list[UOp], n_inputs: int,
                     check: Callable[[], None] | None = None) -> ScheduleTemplate:
    # the schedule reads the target (vector widths: _transposed_operand); the input count is no part of the graph
    # where an input is read by nothing once the graph is inlined (a function's unused argument), yet the programs
    # kept on the template take their output slots after that many inputs. `check` runs before a new one is made
    key = f"{key}|{n_inputs}|{host_target().key}"
    tpl = _templates.get(key)
    if tpl is None:
        if check is not None:
            check()
        tpl = _templates.setdefault(key, ScheduleTemplate(roots, n_inputs, key))
    return tpl


def _only_params(body: UOp) -> None:
    """SPEC: a body holds only PARAMs. A template is scheduled once for every call of its body, so a buffer in it
    would be one of the template's own and read as zeros (three of a differential check's silent zero gradients
    were): a transform that builds a body must make such a value one of its arguments."""
    if (buf := next((u for u in body.toposort() if u.op is Ops.BUFFER), None)) is not None:
        raise RuntimeError(f"internal error: the body of a function, loop or branch holds a concrete buffer "
                           f"({buf.dtype.name}[{buf.arg[2]}] on {buf.arg[1]}) where it may only read its PARAMs; "
                           f"please report it with the program that raised it")


def template_of(body: UOp, repeated: bool = False) -> ScheduleTemplate:
    """The cached schedule of a precompiled function's body, its PARAMs bound to placeholders by slot. `repeated`: the
    body of a loop or a branch (tgfx/lowering/control.py). A loop's kernels that read only its constants run once,
    before it, so there a contraction's vector operand is packed by a kernel of its own (run once for a constant),
    not copied panel by panel by the contraction's kernel every step (`_copies_own_panels`); a branch's body is
    scheduled the same way (a body may be both)."""
    params = params_of(body)
    mapping = {p: UOp(Ops.RESHAPE, p.dtype, (placeholder(k, p.dtype, p.arg[2], prod(p.arg[1])),), p.arg[1])
               if p.arg[1] != (prod(p.arg[1]),) else placeholder(k, p.dtype, p.arg[2], prod(p.arg[1]))
               for k, p in params.items()}
    roots = [substitute_outside_calls(r, mapping) for r in body.src]
    token = _in_repeated_body.set(repeated or _in_repeated_body.get())
    try:
        return _cached_template(("body:" if _in_repeated_body.get() else "call:") + body.key, roots, len(params),
                                lambda: _only_params(body))
    finally:
        _in_repeated_body.reset(token)


__all__ = ["schedule", "new_buffer", "buffer_view"]
