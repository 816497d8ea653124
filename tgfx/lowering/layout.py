"""layout: what the scheduler asks of a value as stored: buffers and views of them, the view a value is read
through, the axis a layout runs along, and the shapes of values it recognises (an iota, a one-hot, a contraction)."""
from __future__ import annotations

import itertools

from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp, prod

buffer_uids = itertools.count(1)


def new_buffer(device: str, size: int, dtype) -> UOp:  # noqa: ANN001
    """A fresh BUFFER node; its memory is allocated when a kernel first writes it."""
    return UOp(Ops.BUFFER, dtype, (), (next(buffer_uids), device, size))


def buffer_view(u: UOp) -> UOp | None:
    """The BUFFER under `u` if `u` reads it contiguously in order (a reshape of it), else None."""
    if u.op is Ops.BUFFER:
        return u
    if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER:
        return u.src[0]
    return None


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


Axes = tuple[int | None, ...]   # for each axis of a node, the axis of the kernel's output it runs along (None: unit)


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

