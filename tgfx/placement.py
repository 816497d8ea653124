"""Committed and uncommitted Tensors: where an op runs whose operands lie on different devices (JAX's rule).

A Tensor is COMMITTED to its placement (a device, or the device tuple of a sharded Tensor) when a user put it there:
`tg.device_put(x, device)`, `tg.shard`, `x.to(device)`, `device=` on creation, and every result of an op one of
whose operands is committed. Everything else is UNCOMMITTED and lies on the default device: what `tg.asarray`,
`tnp.zeros`, `tg.random.key` / `split` make, and what ops compute from uncommitted values alone.

An op whose operands lie on different placements runs where its committed operands are: an uncommitted operand is
copied there (replicated over a device tuple), so a data-parallel step takes `key = tg.random.split(key)` or Adam's
step count `tg.asarray(0)` beside sharded parameters as JAX's does. Two committed operands on different placements
are an error naming both. Sharded Tensors and Tensors on any other device than the default are committed by
construction (nothing uncommitted is made there); a Tensor on the default device is committed when its graph reads
a value placed there (`mark`), and the buffer it is computed into is marked in turn (`carry`).

None of this runs on the eager hot path: operands on one device (every op of a one-device program) are never asked,
and realising a value looks for marked nodes among the inputs its description already lists (a loop, no walk) only
while a value committed to the default device lives.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tgfx.devices import DEFAULT_DEVICE
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.program import recycled_forget

if TYPE_CHECKING:
    from tgfx.tensor import Tensor

Placement = str | tuple[str, ...]

# nodes on the default device a user placed there (the COPY of `x.to("CPU:0")`, the buffer `device_put` of host data
# filled), and the buffers values computed from them were realised into; by id, popped when the node dies (so the
# table is empty, and `carry` a truthiness test, while no such value lives)
marked: dict[int, weakref.ref] = {}
recycled_forget.append(marked)   # (a program's recycled result is a new value: committed only if marked again)


def mark(u: UOp) -> UOp:
    """Node `u` (on the default device) committed: every value computed from it is. A view of a buffer marks the
    buffer too (what an eager op's inputs are: `_realize` looks there, not at the views)."""
    for v in (u, u.src[0]) if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER else (u,):
        key = id(v)
        marked[key] = weakref.ref(v, functools.partial(marked.pop, key))   # (called with the ref: pop's default)
    return u


def _reads_marked(u: UOp) -> bool:
    stack, seen = [u], {id(u)}
    while stack:
        v = stack.pop()
        if (r := marked.get(id(v))) is not None and r() is v:
            return True
        for s in v.src:
            if id(s) not in seen:
                seen.add(id(s))
                stack.append(s)
    return False


def is_committed(x: Tensor) -> bool:
    """Whether `x` is committed to its placement (see the module's docstring); a constant never is."""
    d = x.uop.device
    if d is None:
        return False
    if type(d) is not str or d != DEFAULT_DEVICE:
        return True
    return bool(marked) and _reads_marked(x.uop)


def carry(old: UOp, new: UOp) -> None:
    """A value computed from a committed one (graph `old`) realised into `new`: `new` is committed too. Only called
    while `marked` is not empty."""
    if new is not old and new.device == DEFAULT_DEVICE and _reads_marked(old):
        mark(new)


def commit(x: Tensor) -> Tensor:
    """`x` committed to the device it is on (for `device_put(x, device)`, `x.to(device)`): a Tensor on another device
    than the default, or sharded, already is; one on the default device is a marked copy unless it is committed
    (a copy, so that `x` itself stays uncommitted, as JAX's `device_put` leaves its argument)."""
    from tgfx.tensor import Tensor, is_weak, weak
    if is_committed(x):
        return x
    out = Tensor(mark(UOp(Ops.COPY, x.dtype, (x.uop,), DEFAULT_DEVICE)))
    return weak(out) if is_weak(x) else out


def describe(x: Tensor) -> str:
    """`x`'s type and placement, as an error names an operand."""
    d, head = x.uop.device, f"{x.dtype.name}{list(x.shape)}"
    if type(d) is str:
        return f"{head} on {d}"
    u = x.uop
    if u.op is Ops.MULTI or u.op is Ops.COPY:   # (placed: its layout is the node's; `shard`'s COPY: (devices, axis))
        from tgfx.ir.blocks import describe as layout_words
        axis = u.arg if u.op is Ops.MULTI else u.arg[1]
        words = layout_words(axis, len(d)).replace("split", "sharded")
        return f"{head} {words} on {d}"
    return f"{head} sharded on {d}"   # (a value computed from sharded ones: its layout is known once it is)


def move(x: Tensor, placement: Placement) -> Tensor:
    """Uncommitted `x` where `placement` is (replicated over a device tuple), weakly typed if it is."""
    from tgfx.tensor import Tensor, is_weak, weak
    if type(placement) is str:
        return x.to(placement)
    from tgfx.transforms.shard import shard
    out = shard(x, placement)
    return weak(Tensor(out.uop)) if is_weak(x) else out


def common_placement(ts: Sequence[Tensor], name: str) -> Placement | None:
    """The placement of the committed Tensors among `ts` (None: none is committed). Two committed ones on different
    placements raise a ValueError naming both."""
    found: Tensor | None = None
    for t in ts:
        if is_committed(t):
            if found is None:
                found = t
            elif t.uop.device != found.uop.device:
                raise ValueError(f"{name}: operands are committed to different devices: {describe(found)} and "
                                 f"{describe(t)}; put one where the other is with tg.device_put(x, device) or "
                                 f"tg.shard(x, devices, axis) (an uncommitted operand, made without a device, "
                                 f"goes where its committed partners are)")
    return None if found is None else found.uop.device


def place_operands(ts: Sequence[Tensor], name: str) -> Sequence[Tensor]:
    """`ts`, operands of one op on different placements, where their committed ones are (see the module's
    docstring)."""
    target = common_placement(ts, name)
    if target is None:
        listed = ", ".join(describe(t) for t in ts if t.uop.device is not None)
        raise ValueError(f"{name}: operands are on different devices ({listed}); move them to one device, or to the "
                         f"same device tuple, with tg.device_put(x, device) or tg.shard(x, devices, axis)")
    return [t if t.uop.device is None or t.uop.device == target else move(t, target) for t in ts]
