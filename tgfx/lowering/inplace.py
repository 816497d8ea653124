"""inplace: a kernel that replaces a window of a buffer, run on that buffer itself.

`lax.dynamic_update_slice(x, u, starts)` at traced starts (and `x.at[i].set(v)`) is `where(window, u placed at
starts, x)`: the window a DYNAMIC_PAD of all-True (under vmap, broadcast along the batch), the update a DYNAMIC_PAD
of `u`, at the same starts. Stored into a buffer of its own, its kernel copies all of `x` (a KV cache of 256 x 128
floats, 128 KiB a step, to change one row). Where the output may be `x`'s own memory (a loop carry whose old value
nothing reads after the update, `control._in_place_carries`; a jitted call's donated argument,
`control.donated_windows`), the elements outside the window are already there, and the kernel stores `u` into the
window only:

    STORE(out, WHERE(DYNAMIC_PAD(True), DYNAMIC_PAD(u, *s), x))   ->   STORE(DYNAMIC_SHRINK(out, *s), u)

whose loops run over the window (`rangeify._window_store`). The starts must not read `x`, and the update reads it
only as the window itself through elementwise ops (`x.at[i].add(v)`: the old row plus v): each element is read by
the iteration that then stores it.
"""
from __future__ import annotations

from typing import NamedTuple

from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp


class WindowUpdate(NamedTuple):
    """A kernel storing a window update: its output's slot, the slot of the buffer it updates, and the kernel that
    stores the update alone into the window of its output (valid once the output is that buffer)."""
    out: int
    base: int
    ast: UOp


def _all_true(u: UOp) -> bool:
    while u.op in GroupOp.Movement:
        u = u.src[0]
    return u.op is Ops.CONST and u.arg is True


def _window(u: UOp) -> tuple[tuple[int, ...], tuple[int, ...], tuple[UOp, ...]] | None:
    """(axes, shape, starts) of a window mask: all-True placed at starts, possibly broadcast along new leading axes
    (vmap's unbatched mask beside a batched update), else None."""
    shape = u.shape
    if u.op is Ops.EXPAND:
        u = u.src[0]
    if u.op is Ops.RESHAPE:
        lead = len(u.shape) - len(u.src[0].shape)
        if lead < 0 or u.shape[lead:] != u.src[0].shape or any(n != 1 for n in u.shape[:lead]):
            return None
        u = u.src[0]
    if u.op is not Ops.DYNAMIC_PAD or not _all_true(u.src[0]):
        return None
    lead = len(shape) - len(u.shape)
    return tuple(a + lead for a in u.arg[0]), shape, u.src[1:]


def _reads_only_the_window(update: UOp, base: UOp, axes: tuple[int, ...], outer: tuple[int, ...],
                           starts: tuple[UOp, ...]) -> bool:
    """Whether `update` reads `base` only as the window itself (DYNAMIC_SHRINK at the same starts of `base` viewed in
    the same shape `outer`: `x.at[i].add(v)` reads the old row), through elementwise ops and reshapes: element j of
    the update reads element j of the window, which the in-place store then overwrites in the same iteration. (The
    same starts of another view of `base`, (3, 4, 2) read as (4, 3, 2), are another place: a window overlapping the
    one stored, which the store overwrote before it was read.)"""
    reaches = set()
    for u in update.toposort():
        if u is base or any(s in reaches for s in u.src):
            reaches.add(u)
    stack = [update]
    while stack:
        u = stack.pop()
        if u not in reaches or (u.op is Ops.DYNAMIC_SHRINK and u.arg == (axes, update.shape) and
                                u.src[0].shape == outer and u.src[1:] == starts and _whole(u.src[0]) is base):
            continue
        if u.op not in GroupOp.Elementwise and u.op is not Ops.RESHAPE:   # (a reshape keeps the row-major order)
            return False
        stack.extend(u.src)
    return True


def _whole(u: UOp) -> UOp | None:
    """The DEFINE_GLOBAL that `u` reads whole, in order (reshapes of it), else None."""
    while u.op is Ops.RESHAPE:
        u = u.src[0]
    return u if u.op is Ops.DEFINE_GLOBAL else None


def window_update(ast: UOp) -> WindowUpdate | None:
    """`ast` as a window update of one of its inputs (see the module doc), or None. Kept on the AST: a cache keyed by
    ASTs kept 1,024 of them alive past their kernels and programs."""
    if (hit := ast.__dict__.get("window_update", _UNSEEN)) is _UNSEEN:
        hit = ast.__dict__["window_update"] = _window_update(ast)
    return hit


_UNSEEN = object()


def _window_update(ast: UOp) -> WindowUpdate | None:
    if len(ast.src) != 1 or (st := ast.src[0]).op is not Ops.STORE or len(st.src) != 2:
        return None
    out, val = st.src
    if out.op is not Ops.DEFINE_GLOBAL or val.op is not Ops.WHERE:
        return None
    window, placed, rest = val.src
    base = _whole(rest)
    if placed.op is not Ops.DYNAMIC_PAD or _window(window) != (*placed.arg, placed.src[1:]) or base is None or \
            base is out or base.arg[1] != out.arg[1] or base.dtype != out.dtype:
        return None
    update, starts = placed.src[0], placed.src[1:]
    axes, shape = placed.arg
    if any(base in s.toposort() for s in starts) or not _reads_only_the_window(update, base, axes, shape, starts):
        return None
    view = UOp(Ops.RESHAPE, out.dtype, (out,), shape)
    target = UOp(Ops.DYNAMIC_SHRINK, out.dtype, (view, *placed.src[1:]), (axes, update.shape))
    return WindowUpdate(out.arg[0], base.arg[0], ast.replace(src=(UOp(Ops.STORE, None, (target, update)),)))


__all__ = ["WindowUpdate", "window_update"]
