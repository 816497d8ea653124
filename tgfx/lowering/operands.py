"""operands: reduces rewritten before the kernels are chosen (`pm_transpose_operands`): a broadcast's sum taken
before it, a batch's axes as one, a sum of matmuls as matmuls, and a contraction's operands read through transposed
or packed copies where that pays."""
from __future__ import annotations

import contextvars
import functools
import operator
from collections.abc import Callable

from tgfx.devices import DEFAULT_DEVICE, get_device
from tgfx.devices.target import PAGE_BYTES, STLB_PAGES, TLB_PAGES, Target, host_target, rows_outrun_tlb
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.fusion import RECOMPUTE_COST_OPERAND, RECOMPUTE_MIN, ScheduleCtx, _recompute_cost, _scatter_reduce
from tgfx.lowering.layout import (
    _dot_layout,
    _elementwise_value,
    _is_contraction,
    _is_expanding,
    _is_view,
    _layout,
    _view_base,
)
from tgfx.lowering.symbolic import sum_terms

# Rules of cost, the same on every CPU (what varies by CPU, the vector width, comes from the target description):
# a transposed copy of an operand is one more pass over it (and a kernel launch); a contraction reading it this many
# times amortises that many times over (see _transposed_operand)
REUSE_TO_TRANSPOSE = 16
# a batched contraction with no vector axis at all (see _batched_operand) gains a vector's lanes from a copy of an
# operand, which pays for its pass at this many reads of each element
REUSE_TO_BATCH = 4


def _stored_operand(u: UOp) -> bool:
    """Whether a contraction's operand `u` is stored before the contraction reads it: a view of a buffer, or of an
    elementwise value that `realize_set` stores anyway as a matmul operand (it costs `RECOMPUTE_COST_OPERAND`: the
    weight gradient's `g = dh * (1 - h * h)` in `x.T @ g`), so that a copy of it in another layout costs no more."""
    if _is_view(u):
        return True
    base = _elementwise_value(u)
    return base is not None and _recompute_cost(base, ScheduleCtx(), base) >= RECOMPUTE_COST_OPERAND


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
    n = len(src.src[i].src[0].shape)
    return _through_copy(red, i, (ax, *(j for j in range(n) if j != ax)))


def _through_copy(red: UOp, i: int, perm: tuple[int, ...]) -> UOp:
    """Contraction `red` with its operand `i` read through a copy laid out in axis order `perm` (a CONTIGUOUS of its
    permutation, permuted back)."""
    src = red.src[0]
    e = src.src[i]
    v = e.src[0]
    inv = tuple(perm.index(j) for j in range(len(perm)))
    copy = UOp(Ops.CONTIGUOUS, v.dtype, (UOp(Ops.PERMUTE, v.dtype, (v,), perm),))
    operand = e.replace(src=(UOp(Ops.PERMUTE, v.dtype, (copy,), inv),))
    return red.replace(src=(src.replace(src=tuple(operand if j == i else o for j, o in enumerate(src.src))),))


def _batched_operand(red: UOp) -> UOp | None:
    """A batched contraction (a matmul per batch element, both operands varying along the batch axes: a Fourier
    layer's `einsum("bxyi,ioxy->bxyo")` per mode (x, y)) whose operands run in memory along none of their own axes
    (b of one, o of the other), nor both along the reduced one (`_transposed_operand`'s dot products): no output
    axis is a vector of one operand that the other broadcasts, and its kernel was scalar loads a stride apart (the
    FNO's 8 x 32 by 32 x 32 per mode, 12 x 12 modes: 4.3 ms). The smaller copyable operand read at least
    REUSE_TO_BATCH times is read through a copy laid out with the reduced axis and then one of its own axes last,
    which the tile's vectors then run along. The reduce with that operand replaced, or None."""
    if len(red.arg[1]) != 1 or not _is_contraction(red) or _dot_layout(red, unknown=True):
        return None
    src, ax = red.src[0], red.arg[1][0]
    values = [e.src[0] for e in src.src]
    varying = [{j for j, n in enumerate(v.shape) if n != 1} for v in values]
    batch = set.intersection(*varying) - {ax}
    own = [vs - batch - {ax} for vs in varying]
    lays = [_layout(v)[0] for v in values]   # (a value computed for it: its layout unknown until stored, no copy)
    if not batch or any(lay is None or lay in mine for lay, mine in zip(lays, own, strict=True)):
        return None
    candidates = [(prod(v.shape), i) for i, (v, e) in enumerate(zip(values, src.src, strict=True))
                  if own[i] and ax in varying[i] and _copyable(v) and prod(e.arg) // prod(v.shape) >= REUSE_TO_BATCH]
    if not candidates:
        return None
    i = min(candidates)[1]
    last = max(own[i])
    return _through_copy(red, i, (*(j for j in range(len(values[i].shape)) if j not in (ax, last)), ax, last))


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
    blocks (`heuristics._panel_order` puts them outside: each panel is read by every row block in turn), and a panel
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
        if not (rows_outrun_tlb(k, n * v.dtype.itemsize) if vector else far) or n % width or n == width or \
                prod(e.arg) // prod(v.shape) < REUSE_TO_TRANSPOSE:
            # (one panel as wide as the operand is the operand as it lies: its copy read as a stored operand again
            # was packed again, without end: `x.T @ y` of (65536, 32) each failed to schedule)
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


def _signed_terms(x: UOp) -> list[tuple[bool, UOp]]:
    """The terms of a sum, each with whether it is negated: through ADDs, NEGs and the product and addend of a MULACC
    (a complex product's real part is `fma(ar, br, -(ai * bi))`, tgfx/lowering/complex.py)."""
    if x.op is Ops.NEG:
        return [(not neg, t) for neg, t in _signed_terms(x.src[0])]
    if x.op is Ops.MULACC:
        return [(False, UOp(Ops.MUL, x.dtype, x.src[:2])), *_signed_terms(x.src[2])]
    if x.op is Ops.ADD:
        return [(neg, t) for term in sum_terms(x) for neg, t in _signed_terms(term)]
    return [(False, x)]


def _split_sum(red: UOp, term_splits: Callable[[UOp], bool]) -> UOp | None:
    """`red`, a sum over a sum of terms, as the sum of each term's reduce (negated where the term is), where
    `term_splits` holds for every term."""
    if red.arg[0] is not Ops.ADD or red.src[0].op not in (Ops.ADD, Ops.MULACC):
        return None
    terms = _signed_terms(red.src[0])
    if not all(term_splits(t) for _, t in terms):
        return None
    sums = (UOp(Ops.REDUCE_AXIS, red.dtype, (t,), red.arg) for _, t in terms)
    return functools.reduce(operator.add, (UOp(Ops.NEG, red.dtype, (r,)) if neg else r
                                           for (neg, _), r in zip(terms, sums, strict=True)))


def _split_sum_of_contractions(red: UOp) -> UOp | None:
    """A sum of contractions over the same axes, `sum(a1 * b1 + a2 * b2 + ...)`, as the sum of each one's reduce. The
    gradient of a value that several matmuls read one broadcast of (attention's input, read by the query, key and
    value projections) accumulates their products before the reduce: as one reduce it is no contraction, so its
    operands get no transposed or packed copies and the kernel no register tile (a transformer step's `dx`, with
    the heads laid out apart: 136 ms, 4 GFLOP/s). Each product then is a matmul of its own."""
    return _split_sum(red, lambda t: t.op is Ops.MUL and all(_is_expanding(e) for e in t.src))


def _split_sum_of_scatters(red: UOp) -> UOp | None:
    """A sum of scatters onto the same rows, `sum(where(i1 == r, v1, 0) + where(i2 == r, v2, 0))`, as the sum of each
    one's reduce. The gradient of a table gathered twice by as many indices (one embedding for a skip-gram's centers
    and contexts, a graph's node features by senders and by receivers) adds the two one-hot masks before the reduce of
    the broadcast both gathers read: as one reduce it is no scatter (`fusion._scatter_reduce`), and its kernel compared
    every row with every update (300 rows, 2 x 200 updates, beside a third scatter: a reduce of 200 in the rows' loop).
    Each is then a loop over its updates."""
    return _split_sum(red, lambda t: _scatter_reduce(UOp(Ops.REDUCE_AXIS, red.dtype, (t,), red.arg)))


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
# matmuls as matmuls (`pm_reshape_reduces`), and a contraction's operands read through transposed or packed copies
# where that pays
pm_reshape_reduces = PatternMatcher([(UPat(Ops.REDUCE_AXIS, name="red"), _reduce_before_broadcast),
                                     (UPat(Ops.REDUCE_AXIS, name="red"), _merge_reduce_axes),
                                     (UPat(Ops.REDUCE_AXIS, name="red"), _split_sum_of_contractions),
                                     (UPat(Ops.REDUCE_AXIS, name="red"), _split_sum_of_scatters)])
pm_transpose_operands = pm_reshape_reduces + PatternMatcher([(UPat(Ops.REDUCE_AXIS, name="red"), _transposed_operand),
                                                             (UPat(Ops.REDUCE_AXIS, name="red"), _packed_operand),
                                                             (UPat(Ops.REDUCE_AXIS, name="red"), _batched_operand)])
