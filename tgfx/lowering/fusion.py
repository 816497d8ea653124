"""fusion: where values are materialised (`find_realizes`): the requested outputs, `CONTIGUOUS` and `COPY`, and
values that would otherwise be recomputed at a cost (a reduce read through an `EXPAND` or by several kernels, a costly
elementwise value shared, a scatter's updates, a gather's table); everything else fuses into the kernel reading it."""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tgfx.devices.target import host_target
from tgfx.dtypes import dtypes
from tgfx.ir.control import BODIED, n_bodies
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.inline import substitute_outside_calls, walk
from tgfx.lowering.layout import (
    _VIEWS,
    Axes,
    _dot_layout,
    _iota_like,
    _is_contraction,
    _is_expanding,
    _layout,
    _onehot_index,
    _root_base,
    _unit_free,
    _view_base,
    buffer_view,
    concat_pieces,
    copy_source,
    is_concat,
    is_onehot,
)


@dataclass
class ScheduleCtx:
    realize: set[UOp] = field(default_factory=set)
    rounded: dict[UOp, UOp] = field(default_factory=dict)   # a reduce -> its rounding, all that reads it (`_rounded`)

    def is_leaf(self, u: UOp, root: UOp) -> bool:
        return u is not root and (u in self.realize or u.op in (Ops.BUFFER, Ops.CONST, Ops.IOTA))

    def store(self, reduces: Iterable[UOp]) -> bool:
        """Store each of `reduces`, as its rounding where that is all that reads it; whether any is new."""
        fresh = {self.rounded.get(r, r) for r in reduces} - self.realize
        self.realize |= fresh
        return bool(fresh)


def _rounded(order: list[UOp]) -> dict[UOp, UOp]:
    """The reduces in `order` read only through a rounding to a half float (a bfloat16 matmul's result, summed in
    float32), by that rounding: stored, it is the reduce kernel's epilogue, once an element and half the bytes,
    where stored as summed every kernel reading it rounded it again, and one reading it as a matmul's operand (the
    cast's cost) stored the rounding first in a kernel of its own (a bfloat16 transformer step: 12 of them)."""
    parents: dict[UOp, set[UOp]] = {}
    for u in order:
        for s in u.src:
            parents.setdefault(s, set()).add(u)
    def only_reader(u: UOp) -> UOp | None:
        ps = parents.get(u, ())
        return next(iter(ps)) if len(ps) == 1 else None
    out = {}
    for u in order:
        if u.op is Ops.REDUCE_AXIS and u.dtype.is_float and u.dtype.itemsize > 2:
            c = only_reader(u)
            while c is not None and c.op is Ops.RESHAPE:   # (a matmul's result without its reduced unit axis)
                c = only_reader(c)
            if c is not None and c.op is Ops.CAST and c.dtype in (dtypes.bfloat16, dtypes.float16):
                out[u] = c
    return out


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


def _shared_limit(u: UOp, kernels: int) -> int:
    """What an elementwise value that `kernels` kernels compute must cost per element to be stored once: SHARED_COST
    computed again in all by the kernels but one. A chain of couplings (realnvp's `x = kept + (1 - mask) * (x * exp(s)
    + t)`, about 15 ops an element a step) has each step computed again by the later steps' kernels: with SHARED_COST
    alone the limit, a kernel computed up to five steps (E_512_2_* 73k, 145k, ... 435k flops in realnvp's step, 2.6M
    in all); now three at most (1.3M), and no kernel more. A value of RECOMPUTE_MIN elements or more keeps SHARED_COST
    (and SHARED_READS): a residual stream stored where its blocks' kernels were the same block after block (a deeper
    network compiled new kernels for each block when its layer norms' inputs were stored too)."""
    return -(-SHARED_COST // (kernels - 1)) if prod(u.shape) < RECOMPUTE_MIN else SHARED_COST


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
    out, taken = set(), set()
    for red in scatters:
        u = red
        while u not in roots and len(users.get(u, ())) == 1 and (p := next(iter(users[u]))).op in \
                (Ops.RESHAPE, Ops.PERMUTE):
            u = p
        p = next(iter(users[u])) if u not in roots and len(users.get(u, ())) == 1 else None
        combined = p is not None and p.op is red.arg[0] and p.dtype == red.dtype and len(set(p.src)) == 2
        # two scatters added (an embedding table gathered twice: word2vec's contexts and negatives): the first's
        # loop starts from the second, stored on its own; as the operand of the first's kernel it was a reduce
        # comparing every row with every update (5,000 x 64 rows, 6,144 updates: 24 ms; 0.13 as two loops)
        out.add(p if combined and p not in taken else red)
        taken.add(p)
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


def _onehot_indices(u: UOp, ctx: ScheduleCtx) -> list[UOp]:
    """The costly values a one-hot mask `u` compares with its arange (`idx == arange`, and-ed for several axes), to be
    stored in its place: a gather reads its mask as one load at the index (`gather.collapse_onehot`), so what it costs
    is the index's computation, not the broadcast compare. A DQN's minibatch drawn by `randint` from a 8,192-row replay
    buffer gathered five columns by one hashed index: its mask stored whole, 256 x 8,192 bytes, then each gather a
    reduce over all 8,192 rows (2 x 680 us of a 3 ms step); its index stored, each gather is 256 loads."""
    if not is_onehot(u):
        return []
    masks, out = [_view_base(u)], []
    while masks:
        m = masks.pop()
        if m.op is Ops.AND:
            masks.extend(_view_base(s) for s in m.src)
        elif (idx := _onehot_index(m)) is not None and (base := _view_base(idx)).op in GroupOp.Elementwise and \
                base not in ctx.realize:
            out.append(base)
    return out


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


def _rounded_reads(u: UOp, ctx: ScheduleCtx, root: UOp) -> list[UOp]:
    """The reduces whose rounding (`ctx.rounded`) the elementwise graph under `u` evaluates."""
    roundings = {c: r for r, c in ctx.rounded.items()}
    return [roundings[x] for x in _evaluated(u, ctx, root) if x in roundings]


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


def made_where_it_goes(u: UOp) -> bool:
    """Whether COPY `u` moves a constant (a graph of no device: `tnp.zeros(n)`, a loop's start placed on its
    device): computed where it is read, as any constant, on the destination (stored first, it was a kernel on the
    default device and a copy for every constant a loop on another device starts from: `expi` on CPU:1 ran 33
    kernels and 14 copies, on CPU:0 21 and 7)."""
    return u.src[0].device is None and isinstance(u.arg, str) and u.tag != "in place"


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
            # one read where it lies (shared memory) is part of the kernel that reads it, and so is a constant
            if u.tag != "in place" and not made_where_it_goes(u):
                realize.add(u)
            if not made_where_it_goes(u) and (base := copy_source(u.src[0])[0]).op is not Ops.BUFFER:
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
    ctx = ScheduleCtx(realize, _rounded(order))
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
                        changed |= ctx.store(plain)
                    elif expanded and u not in ctx.realize and not _row_reduce(u, axes, root):
                        changed |= ctx.store([u])
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
                    # (a rounding of a reduce there is that reduce's epilogue instead: `_rounded`)
                    if not ctx.store(_rounded_reads(base, ctx, root)):
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
                changed |= ctx.store(others)
            if (unstored := [r for r in tops if r not in ctx.realize and not _gather(r)]) and \
                    _recompute_cost(root, ctx, root, EPILOGUE_COST) >= EPILOGUE_COST:
                # an epilogue this costly (noise drawn for each output: a hash of its index) runs once per lane of the
                # reduce's register tile, unrolled: stored first, the reduce keeps its tile and the epilogue is a loop
                # (a gather has no tile: it is one load an element)
                changed |= ctx.store(unstored)
            if tile_read:
                # an epilogue that reads a tile of another buffer is carried by the contraction's accumulator vectors
                # (`w - lr * x.T @ g`, a residual add: one kernel). Not when every operand runs along the reduced
                # axis in memory (`g @ w.T` with no transposed copy): the tile's vectors then run along that axis, each
                # output a scalar, and so is its epilogue, an exp there one scalar polynomial an output (a graph
                # attention step's ELU gradient: 507 us fused, 57 + a vectorised elementwise kernel stored first)
                for red in contractions:
                    if red not in ctx.realize and _dot_layout(red, unknown=True):
                        changed |= ctx.store([red])
            if len(ctx.realize) == n_stored:
                walks[root] = ({v[0] for v in seen}, len(added), reduces, values)
        if changed:
            continue   # a reduce several kernels read is decided on the kernels as the other rules leave them
        for red, kernels in users.items():
            if len(kernels) > 1 and red not in ctx.realize and not _stored_gather(red, ctx):
                changed |= ctx.store([red])
        if changed:
            continue
        # an elementwise value as costly as SHARED_COST that several kernels compute (a dropout mask's hash, in the
        # forward and in the gradient: 50 us each for 128 x 512) is stored once, the outermost such value first (what
        # it is computed from is then read by one kernel only); then those that read SHARED_READS stored values whole
        several = [u for u in reversed(order) if len(shared.get(u, ())) > 1 and u not in ctx.realize]
        costly = next((u for u in several if _recompute_cost(u, ctx, u, limit := _shared_limit(u, len(shared[u])))
                       >= limit), None)
        if costly is not None:
            ctx.realize.update(_onehot_indices(costly, ctx) or (costly,))
            changed = True
            continue
        # (the values reading SHARED_READS stored values, all at once: a residual stream is one such value a block, each
        # inside the next, and one at a time the schedule walked every kernel again for each: 1 s for 4 blocks)
        if wide := [u for u in several if prod(u.shape) >= RECOMPUTE_MIN and _whole_reads(u, ctx) >= SHARED_READS]:
            ctx.realize.update(wide)
            changed = True
    return ctx.realize

