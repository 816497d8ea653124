"""rangeify: give a kernel explicit loops.

Input: `SINK(STORE(DEFINE_GLOBAL out, value), ...)` where `value` is a tensor-level graph (elementwise, movement,
REDUCE_AXIS) over `DEFINE_GLOBAL` inputs viewed through movement ops. Output: scalar index-level code. Each output
dimension becomes a `RANGE`; each movement op becomes index arithmetic on the way down to the loads (reshape -> div/mod,
permute -> reorder, expand -> drop the index, shrink -> offset, flip -> reversed index, pad -> a validity mask with
`WHERE`); each reduce gets its own reduce `RANGE`s and becomes `REDUCE(value, *ranges)`. Loads are
`LOAD(INDEX(buf, offset))` with the offset clamped to 0 where the mask says the element is padding, so every load is
in bounds and safe to hoist.

A value is requested at `(node, index tuple, valid mask)`; the same request is lowered once. The walk uses an
explicit stack, so a chain of 100k elementwise ops lowers without recursion.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tgfx.dtypes import dtypes, min_value
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp

Index = tuple[UOp, ...]
Request = tuple[UOp, Index, UOp | None]


@dataclass
class RangeifyCtx:
    next_range: int = 0
    reduce_ranges: dict[Request, tuple[UOp, ...]] = field(default_factory=dict)
    starts: dict[tuple[UOp, int], UOp] = field(default_factory=dict)  # a dynamic view's start, lowered and clamped

    def new_range(self, size: int, kind: str) -> UOp:
        if size == 1:
            return UOp.const(dtypes.index, 0)
        r = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, size),), (self.next_range, kind))
        self.next_range += 1
        return r


def _c(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def _and(a: UOp | None, b: UOp) -> UOp:
    return b if a is None else a & b


# Index arithmetic with constants folded as it is built, so that a read at a known position knows whether a PAD
# covers it (`pad_valid`): the pieces of a concatenation that a position is not in are not walked at all. A
# Python-unrolled scan's gradient reads its stacked outputs back row by row, each read a sum over every row's
# padded piece, all but one zero; walked with unfolded masks, the requests grew as n^4.6 (12 steps: 933,972
# requests, 11 s to lower; 20 steps: 68 s).
def _const(u: UOp) -> int | None:
    return u.arg if u.op is Ops.CONST else None


def _add(a: UOp, b: int) -> UOp:
    ca = _const(a)
    return _c(ca + b) if ca is not None else a if b == 0 else a + b


def _mul(a: UOp, k: int) -> UOp:
    ca = _const(a)
    return _c(ca * k) if ca is not None else a if k == 1 else a * k


def _plus(a: UOp, b: UOp) -> UOp:
    ca, cb = _const(a), _const(b)
    return _add(b, ca) if ca is not None else _add(a, cb) if cb is not None else a + b


def _floordiv(a: UOp, k: int) -> UOp:
    ca = _const(a)
    return a if k == 1 else _c(ca // k) if ca is not None and ca >= 0 else a // k


def _mod(a: UOp, k: int) -> UOp:
    ca = _const(a)
    return _c(0) if k == 1 else _c(ca % k) if ca is not None and ca >= 0 else a % k


def linear_index(idx: Index, shape: tuple[int, ...]) -> UOp:
    """Row-major flat offset of `idx` in `shape`."""
    out, stride = _c(0), 1
    for i, s in reversed(list(zip(idx, shape, strict=True))):
        if s != 1:
            out = _plus(out, _mul(i, stride))
        stride *= s
    return out


def unflatten(flat: UOp, shape: tuple[int, ...]) -> Index:
    """The index in `shape` of a flat offset within it. The outermost axis needs no `% s`: the offset is below the
    total size by construction, and a needless mod stays in the index wherever the bounds cannot show that (an offset
    shifted by padding is negative exactly where its read is masked off)."""
    out, stride = [], 1
    outer = next((a for a, s in enumerate(shape) if s != 1), len(shape))
    for a in reversed(range(len(shape))):
        s = shape[a]
        out.append(_c(0) if s == 1 else _floordiv(flat, stride) if a == outer else _mod(_floordiv(flat, stride), s))
        stride *= s
    return tuple(reversed(out))


# ---- index rules: how a node's index maps to its sources' indices ----
def reshape_groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """The axes of a reshape from `old` to `new` (both without axes of size 1) in groups that reshape on their own:
    cut wherever the products of the axes before are equal on both sides ((32, 16, 16, 2, 2, 3) -> (32, 16, 16, 12):
    three axes kept, and (2, 2, 3) -> (12))."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old):
        g_old, g_new, p_old, p_new = [i], [j], old[i], new[j]
        i, j = i + 1, j + 1
        while p_old != p_new:
            if p_old < p_new:
                g_old.append(i)
                p_old, i = p_old * old[i], i + 1
            else:
                g_new.append(j)
                p_new, j = p_new * new[j], j + 1
        groups.append((g_old, g_new))
    return groups


def idx_reshape(u: UOp, idx: Index) -> Index:
    old = u.src[0].shape
    if 0 in old:   # (an empty value: nothing is read)
        return unflatten(linear_index(idx, u.arg), old)
    keep_old = [a for a, s in enumerate(old) if s != 1]
    keep_new = [a for a, s in enumerate(u.arg) if s != 1]
    out: list[UOp] = [_c(0)] * len(old)
    # each group of axes reshaped on its own: a reshape that splits one axis (a pixel shuffle's channels read as
    # (2, 2, 3)) leaves the others' indexes as they are, where the whole flat offset unflattened put a division and a
    # remainder of every axis into each (a convolution's gradient read through one: its input's channels, rows and
    # columns, padded, each a division of one flat sum in the reduce's inner loop)
    for g_old, g_new in reshape_groups(tuple(old[a] for a in keep_old), tuple(u.arg[a] for a in keep_new)):
        olds, news = [keep_old[a] for a in g_old], [keep_new[a] for a in g_new]
        if len(olds) == 1 and len(news) == 1:
            out[olds[0]] = idx[news[0]]
            continue
        flat = linear_index(tuple(idx[a] for a in news), tuple(u.arg[a] for a in news))
        for a, i in zip(olds, unflatten(flat, tuple(old[a] for a in olds)), strict=True):
            out[a] = i
    return tuple(out)


def idx_permute(u: UOp, idx: Index) -> Index:
    out: list[UOp] = [_c(0)] * len(idx)
    for i, p in enumerate(u.arg):
        out[p] = idx[i]
    return tuple(out)


def idx_expand(u: UOp, idx: Index) -> Index:
    return tuple(_c(0) if s == 1 else i for i, s in zip(idx, u.src[0].shape, strict=True))


def idx_shrink(u: UOp, idx: Index) -> Index:
    return tuple(_add(i, b) for i, (b, _) in zip(idx, u.arg, strict=True))


def idx_flip(u: UOp, idx: Index) -> Index:
    return tuple(_c(s - 1) - i if a in u.arg else i for a, (i, s) in enumerate(zip(idx, u.shape, strict=True)))


def idx_pad(u: UOp, idx: Index) -> Index:
    return tuple(_add(i, -b) for i, (b, _) in zip(idx, u.arg, strict=True))


def pad_valid(u: UOp, idx: Index) -> UOp | None:
    """Where a read of PAD `u` at `idx` is inside its source: None for everywhere, a CONST False for nowhere (a
    known position in the padding)."""
    valid = None
    for i, (b, a), s in zip(idx, u.arg, u.src[0].shape, strict=True):
        if (ci := _const(i)) is not None:
            if not b <= ci < b + s:
                return UOp.const(dtypes.bool, False)
            continue
        if b:
            valid = _and(valid, _c(b - 1) < i)
        if a:
            valid = _and(valid, i < _c(b + s))
    return valid


movement_index: dict[Ops, Callable[[UOp, Index], Index]] = {
    Ops.RESHAPE: idx_reshape, Ops.PERMUTE: idx_permute, Ops.EXPAND: idx_expand, Ops.SHRINK: idx_shrink,
    Ops.FLIP: idx_flip, Ops.PAD: idx_pad,
}


# ---- views at runtime offsets (DYNAMIC_SHRINK, DYNAMIC_PAD) ----
def lowered_start(ctx: RangeifyCtx, start: UOp, hi: int) -> UOp:
    """A dynamic view's start as an index value: its scalar (a kernel argument's one element, or a constant),
    clamped to [0, hi]. The builders only make starts in range; the clamp keeps every load in bounds all the same,
    and gives the start the bounds the index rules need (it is loop-invariant: the linearizer hoists it)."""
    if (done := ctx.starts.get((start, hi))) is None:
        v = lower_value(ctx, (start, (), None)).cast(dtypes.index)
        done = ctx.starts[(start, hi)] = -((-v.maximum(_c(0))).maximum(_c(-hi)))
    return done


def dynamic_starts(ctx: RangeifyCtx, u: UOp) -> dict[int, tuple[UOp, int]]:
    """Each dynamic axis of `u`, with its lowered start and the length of the shorter side along it."""
    axes, shape = u.arg
    inner, outer = (shape, u.src[0].shape) if u.op is Ops.DYNAMIC_SHRINK else (u.src[0].shape, shape)
    return {a: (lowered_start(ctx, s, outer[a] - inner[a]), inner[a]) for a, s in zip(axes, u.src[1:], strict=True)}


def dynamic_pad_valid(ctx: RangeifyCtx, u: UOp, idx: Index) -> UOp | None:
    valid = None
    for a, (s, k) in dynamic_starts(ctx, u).items():
        valid = _and(valid, (s - 1 < idx[a]) & (idx[a] < s + k))
    return valid


def reduce_identity(op: Ops, dtype: Any) -> Any:
    if op is Ops.ADD:   # -0.0 is a float sum's identity (0.0 + -0.0 is 0.0): a one-hot sum of -0.0 fills picks a
        return -0.0 if dtype.is_float else 0   # -0.0 as it is (a sum of -0.0s is -0.0, where numpy's is 0.0)
    if op is Ops.MUL:
        return 1
    return min_value(dtype)


def clamp(buf: UOp, off: UOp, valid: UOp) -> UOp:
    """Offset `off` of a read of `buf` that matters only where `valid` holds, clamped to 0 where it does not, unless
    it stays in the buffer anyway (a bias read beside a padded image): every read is in bounds and safe to hoist, and
    an unclamped one is a load the vector lanes of a tile share (the read's value is masked by whatever made it
    conditional: the PAD above it, PADTO's gated store or masked reduce)."""
    return valid.where(off, _c(0)) if off.vmin < 0 or off.vmax >= buf.arg[1] else off


def _requests(ctx: RangeifyCtx, req: Request) -> list[Request]:
    u, idx, valid = req
    if u.op in movement_index:
        if u.op is Ops.PAD:
            pv = pad_valid(u, idx)
            if pv is not None and pv.op is Ops.CONST:   # (all padding: a zero, its source not read)
                return []
            return [(u.src[0], idx_pad(u, idx), valid if pv is None else _and(valid, pv))]
        return [(u.src[0], movement_index[u.op](u, idx), valid)]
    if u.op in (Ops.DYNAMIC_SHRINK, Ops.DYNAMIC_PAD):
        starts, sign = dynamic_starts(ctx, u), 1 if u.op is Ops.DYNAMIC_SHRINK else -1
        src_idx = tuple(i + starts[a][0] * sign if a in starts else i for a, i in enumerate(idx))
        if u.op is Ops.DYNAMIC_PAD:
            pv = dynamic_pad_valid(ctx, u, idx)
            valid = valid if pv is None else _and(valid, pv)
        return [(u.src[0], src_idx, valid)]
    if u.op is Ops.REDUCE_AXIS:
        axes = u.arg[1]
        rngs = tuple(ctx.new_range(s, "reduce") for a, s in enumerate(u.src[0].shape) if a in axes)
        ctx.reduce_ranges[req] = rngs
        it = iter(rngs)
        return [(u.src[0], tuple(next(it) if a in axes else i for a, i in enumerate(idx)), valid)]
    if u.op in GroupOp.Elementwise:
        return [(s, idx, valid) for s in u.src]
    if u.op in (Ops.CONST, Ops.DEFINE_GLOBAL, Ops.IOTA):
        return []
    raise NotImplementedError(f"rangeify: no rule for {u.op} inside a kernel")


def _build(ctx: RangeifyCtx, req: Request, vals: list[UOp]) -> UOp:
    u, idx, valid = req
    if u.op is Ops.CONST:
        return u
    if u.op is Ops.IOTA:
        return idx[0]
    if u.op is Ops.DEFINE_GLOBAL:
        off = idx[0] if valid is None else clamp(u, idx[0], valid)
        return UOp(Ops.LOAD, u.dtype, (UOp(Ops.INDEX, u.dtype, (u, off)),))
    if u.op is Ops.PAD:
        pv = pad_valid(u, idx)
        if pv is not None and pv.op is Ops.CONST:
            return UOp.const(u.dtype, 0)
        return vals[0] if pv is None else pv.where(vals[0], vals[0].const_like(0))
    if u.op in movement_index or u.op is Ops.DYNAMIC_SHRINK:
        return vals[0]
    if u.op is Ops.DYNAMIC_PAD:
        pv = dynamic_pad_valid(ctx, u, idx)
        return vals[0] if pv is None else pv.where(vals[0], vals[0].const_like(0))
    if u.op is Ops.REDUCE_AXIS:
        rngs = tuple(r for r in ctx.reduce_ranges[req] if r.op is Ops.RANGE)
        if any(r.op is Ops.RANGE and r.src[0].arg == 0 for r in ctx.reduce_ranges[req]):
            # a reduction of nothing: a sum's is 0.0, as numpy's and JAX's (its accumulator starts at -0.0 only so
            # that the terms' own zeros decide the sign)
            return UOp.const(u.dtype, 0 if u.arg[0] is Ops.ADD else reduce_identity(u.arg[0], u.dtype))
        return vals[0] if not rngs else UOp(Ops.REDUCE, u.dtype, (vals[0], *rngs), u.arg[0])
    return UOp(u.op, u.dtype, tuple(vals), u.arg)


def lower_value(ctx: RangeifyCtx, root: Request) -> UOp:
    done: dict[Request, UOp] = {}
    stack: list[tuple[Request, list[Request] | None]] = [(root, None)]
    while stack:
        req, kids = stack.pop()
        if req in done:
            continue
        if kids is None:
            kids = _requests(ctx, req)
            stack.append((req, kids))
            stack.extend((k, None) for k in kids if k not in done)
        else:
            done[req] = _build(ctx, req, [done[k] for k in kids])
    return done[root]


# the most pieces an output splits into along several axes (each piece computes the value once more in the code):
# a 3-D stencil's rolls, 3 intervals an axis
MAX_PIECES = 27


# ... and a value this costly (ALU ops above its PADs: a random draw's threefry hash is about 125) is split along its
# innermost padded axis only: each piece is a copy of its code, and 3 x 3 boxes of an Ising model's Metropolis
# half-sweep (a uniform draw and an exp per site, its neighbours by rolls) were 122 KB of LLVM IR a kernel, 1.2 s of a
# 1.8 s first call; 3 pieces along the rows are 16 KB, and as fast (a row's reads unmasked, its rows' masks one
# condition a row)
COSTLY_PIECE_OPS = 64


def _nested_pads(val: UOp) -> list[tuple[UOp, tuple[int, ...]]]:
    """The PADs `val` reads through elementwise ops, and those their sources read so, each with where its output
    starts in `val` (the pads outside it added up)."""
    out, seen = [], set()
    stack: list[tuple[UOp, tuple[int, ...]]] = [(val, (0,) * len(val.shape))]
    while stack:
        u, at = stack.pop()
        if (u, at) in seen:
            continue
        seen.add((u, at))
        if u.op is Ops.PAD:
            out.append((u, at))
            stack.append((u.src[0], tuple(o + p[0] for o, p in zip(at, u.arg, strict=True))))
        elif u.op in GroupOp.Elementwise:
            stack.extend((s, at) for s in u.src)
    return out


def _unit_axes(val: UOp) -> dict[int, int] | None:
    """For a RESHAPE that only adds or drops axes of size 1: each axis of its source longer than 1 -> that axis in
    the output (None for any other reshape)."""
    src = val.src[0]
    ins = [a for a, n in enumerate(src.shape) if n != 1]
    outs = [a for a, n in enumerate(val.shape) if n != 1]
    if [src.shape[a] for a in ins] != [val.shape[a] for a in outs]:
        return None
    return dict(zip(ins, outs, strict=True))


def pad_pieces(val: UOp, grid_numel: int = 0) -> dict[int, list[int]] | None:
    """Where the output of an elementwise kernel whose value adds up padded pieces (a concatenation, the gradient of
    slices: an LSTM's four gates, or rolls: a stencil's neighbours) splits, as {axis: boundaries from 0 to its size}:
    the PADs the value reads directly, through elementwise ops only, are several. In each interval (along several
    axes, each box of the grid of intervals) every such PAD is its source or zero, known without a mask, and a PAD
    further down (a roll of a roll) a mask the interval's bounds fold. None when no axis is padded, the kernel
    reduces (a lone PAD, zeros around a value, stays a mask), or no loop would be left for the pieces to share, for
    threads to split: unless the output is split along several axes and has at most `grid_numel` elements (it runs on
    one core anyway). The game of life's 8 rolled neighbours of a 256 x 256 board, 3 x 3 pieces: 750 -> 25 us, masked
    reads that LLVM's loop vectoriser left scalar become plain loops of vectors."""
    if val.op is Ops.RESHAPE and (axes := _unit_axes(val)) is not None:
        # a value reshaped only by axes of size 1 (a scan's gradient of its carried gates, (64, 384) stored as (64, 1,
        # 384)) splits where its source does: looked at through the RESHAPE, no PAD was found and every element of
        # an LSTM's or GRU's gate gradients computed all its gates, masked (sst2's: 3x its sigmoids and tanhs, scalar)
        inner = pad_pieces(val.src[0], grid_numel)
        return None if inner is None or not inner.keys() <= axes.keys() else {axes[a]: b for a, b in inner.items()}
    pads = [u for u in val.toposort(lambda u: u.src if u.op in GroupOp.Elementwise else ()) if u.op is Ops.PAD]
    axes = sorted({a for p in pads for a, pad in enumerate(p.arg) if pad != (0, 0)})
    if len(pads) < 2 or not axes or any(u.op is Ops.REDUCE_AXIS for u in val.toposort()):
        return None
    nested = _nested_pads(val)

    def split(along: list[int]) -> dict[int, list[int]] | None:
        if not any(n > 1 for a, n in enumerate(val.shape) if a not in along) and \
                (len(along) == 1 or math.prod(val.shape) > grid_numel):
            return None   # (pieces of a vector, or a grid of the whole output: no loop they share for threads)
        # (a PAD's pieces inside a piece split it too: concatenate([x, concatenate([sin(a), cos(a)])]) is three
        # pieces, each computing its own function; as two, every element of the second computed both, masked)
        bounds = {a: sorted({0, val.shape[a], *(b for p, at in nested
                                                for b in (at[a] + p.arg[a][0], at[a] + p.shape[a] - p.arg[a][1]))})
                  for a in along}
        return bounds if math.prod(len(b) - 1 for b in bounds.values()) <= MAX_PIECES else None
    # along the axes of the pieces' own pieces too (irfft2's terms at negated frequencies, concatenated along the rows
    # within each piece along the columns, were masks there), where that grid is small enough
    inner = sorted({a for p, _ in nested for a, pad in enumerate(p.arg) if pad != (0, 0)})
    if len(axes) > 1 and sum(u.op in GroupOp.ALU for u in val.toposort(
            lambda u: u.src if u.op in GroupOp.Elementwise else ())) >= COSTLY_PIECE_OPS:
        return split(axes[-1:])
    return (split(inner) if inner != axes else None) or split(axes)


def _window_store(ctx: RangeifyCtx, dst: UOp, val: UOp) -> UOp:
    """STORE(DYNAMIC_SHRINK(RESHAPE(out), *starts), val): `val` stored into the window of `out` (viewed in the
    window's outer shape) at the starts, its loops over the window only."""
    base, outer = dst.src[0].src[0], dst.src[0].shape
    starts = dynamic_starts(ctx, dst)
    idx = tuple(ctx.new_range(s, "loop") for s in val.shape)
    at = tuple(i + starts[a][0] if a in starts else i for a, i in enumerate(idx))
    v = lower_value(ctx, (val, idx, None))
    return UOp(Ops.STORE, None, (UOp(Ops.INDEX, base.dtype, (base, linear_index(at, outer))), v))


pm_one_reshape = PatternMatcher([
    (UPat(Ops.RESHAPE, src=(UPat(Ops.RESHAPE, name="inner"),), name="x"),
     lambda x, inner: x.replace(src=inner.src)),
])


def rangeify(ast: UOp, pieces: bool = True, grid_numel: int = 0) -> UOp:
    """Lower a tensor-level kernel AST to index-level code with explicit RANGEs. With `pieces`, an output that adds
    up padded pieces (`pad_pieces`; `grid_numel` as there) is stored piece by piece, each over its interval of each
    split axis with its own loop (the other axes' loops are shared), so that each element computes only its piece:
    unsplit, every element computed every piece and masked all but one away, with gathered loads (an LSTM's gate
    gradients: 4x the transcendentals, and scalar)."""
    # a reshape of a reshape is one reshape: a stored value read in another shape (a stage's output stored in its
    # digits, read as rows) is one flat index, not unflattened into the stored shape and flattened again, whose
    # divisions the simplifier could not fold through a flipped axis
    ast = graph_rewrite(ast, pm_one_reshape, name="one reshape")
    ctx = RangeifyCtx()
    stores = []
    loops: dict[tuple[int, ...], tuple[UOp, ...]] = {}   # the output loops of each whole store, by its shape
    for st in ast.src:
        dst, val = st.src
        shape = val.shape
        if dst.op is Ops.DYNAMIC_SHRINK:   # a window of the output at runtime starts (`tgfx/lowering/inplace.py`)
            stores.append(_window_store(ctx, dst, val))
            continue
        split = pad_pieces(val, grid_numel) if pieces else None
        if split is None:
            # outputs of one shape (`schedule`'s sibling kernels, merged) share their loops: each element computes
            # what they have in common once
            if shape not in loops:
                loops[shape] = tuple(ctx.new_range(s, "loop") for s in shape)
            idxs = [loops[shape]]
        else:
            # the pieces' loops numbered where the axis they split is, so that they nest in the axes' order (numbered
            # after every axis, they were innermost: a concatenation along rows walked each piece down its columns,
            # a cache line a step, 360 us for two 256 x 256 pieces, 25 along columns)
            per_axis = []
            for a, s in enumerate(shape):
                ats = []
                for lo, hi in itertools.pairwise(split[a]) if a in split else [(0, s)]:
                    at = ctx.new_range(hi - lo, "loop")
                    ats.append(at + lo if lo else at)
                per_axis.append(ats)
            idxs = list(itertools.product(*per_axis))
        for idx in idxs:
            v = lower_value(ctx, (val, idx, None))
            stores.append(UOp(Ops.STORE, None, (UOp(Ops.INDEX, dst.dtype, (dst, linear_index(idx, shape))), v)))
    return UOp(Ops.SINK, None, tuple(stores), ast.arg)


__all__ = ["rangeify", "linear_index", "unflatten", "reduce_identity", "clamp"]
