"""row_buffer: a row kernel computes a costly per-element value once, in its reduce, and reads it back for its output.

A row kernel (softmax, `tgfx/lowering/fusion.py` fuses a row's reduces into the kernel that reads them) walks each
row more than once: `e = exp(x - max)` is summed in one loop over the row and divided by that sum in the next, so
each element's exp is computed twice (two thirds of a float32 softmax's arithmetic). Where the row fits the cache,
the reduce loop also stores each `e` into a register buffer the size of the row (`DEFINE_REG`, on the stack of the
core running the row), and the output loop loads it instead of computing it again:

    REDUCE(ADD, e(rr), rr)        ->  REDUCE(ADD, AFTER(e(rr), STORE(INDEX(reg, rr), e(rr))), rr)
    STORE(out[ro], e(ro) / sum)   ->  STORE(out[ro], LOAD(INDEX(reg, ro)) / sum)

The buffer is written by the reduce's loop before the output's loop reads it: the reduce runs only in loops opened
before the output's range (the linearizer places it before opening that range), which this pass requires.
"""
from __future__ import annotations

from tgfx.devices.target import Target
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.linearize import is_block_reduce, range_deps
from tgfx.lowering.loop_kernel import is_carry

# what is worth a store and a load from the cache instead of computing it again: transcendentals, roots, divisions
COSTLY = (GroupOp.Unary - {Ops.NEG, Ops.TRUNC, Ops.FLOOR, Ops.CEIL, Ops.RINT}) | {Ops.FDIV, Ops.POW, Ops.ATAN2}


def _costly(u: UOp, rr: UOp) -> bool:
    """Whether computing `u` along `rr` takes a costly op per element (what it reads once per row does not count)."""
    return any(n.op in COSTLY and rr in range_deps(n) for n in u.toposort())


def _shared_values(value: UOp, rr: UOp, ro: UOp, outputs: set[UOp]) -> list[UOp]:
    """The largest parts of the reduce's `value` that run along `rr`, are costly, and that the outputs compute along
    `ro` as well (the same graph with `ro` for `rr`)."""
    found, seen, stack = [], set(), [value]
    while stack:
        u = stack.pop()
        if u in seen or rr not in range_deps(u):
            continue
        seen.add(u)
        if u.op in GroupOp.ALU and u.substitute({rr: ro}) in outputs and _costly(u, rr):
            found.append(u)
            continue
        stack.extend(u.src)
    return found


def row_buffers(sink: UOp, target: Target) -> UOp:
    """`sink` with each costly value a row reduce and its kernel's outputs both compute kept in a register buffer
    (module docstring); unchanged when there is none, or the row does not fit `target`'s cache.

    One reduce at a time, each on the graph the ones before it left: a reduce may read another (a softmax gradient's
    sums read the softmax's own sum), and the outputs' values it shares are found in the graph as it is now. (Done
    for all reduces of the first graph at once, a reduce rewritten inside another was lost with its stores, and the
    outputs read register buffers nothing wrote: NaNs.)"""
    if not any(u.op in COSTLY for u in sink.toposort()):
        return sink
    n_regs, nbytes = 0, 0   # the buffers so far, and their bytes: all of them must fit, together, on the stack
    while (step := _buffer_one_reduce(sink, target, n_regs, nbytes)) is not None:
        sink, n_regs, nbytes = step
    return sink


def _keeps(red: UOp) -> bool:
    """Whether a reduce already stores values of its row (a round before this one buffered it)."""
    return any(u.op is Ops.AFTER and u.src[1].op is Ops.STORE and u.src[1].src[0].src[1] is red.src[1]
               for u in red.src[0].toposort())


def _buffer_one_reduce(sink: UOp, target: Target, n_regs: int, nbytes: int) -> tuple[UOp, int, int] | None:
    """The first row reduce (sources first) with costly values its kernel's outputs compute too, those values stored
    in register buffers by the reduce and loaded by the outputs: (the new sink, buffers, bytes), or None."""
    nodes = sink.toposort()
    stores = [st for st in sink.src if st.op is Ops.STORE]
    outputs = set(nodes)   # what the stores compute (and the reduces they read)
    loops = sorted({r for st in stores for r in range_deps(st) if r.arg[1] == "loop"}, key=lambda r: r.arg[0])
    # a row reduce: one an output loop runs after (a register tile's reduces run inside all of them)
    reduces = [u for u in nodes if u.op is Ops.REDUCE and len(u.src) == 2 and not is_carry(u)
               and not is_block_reduce(u) and u.src[1].op is Ops.RANGE and not set(loops) <= range_deps(u)]
    for red in reduces:
        rr, outer = red.src[1], range_deps(red)
        size = rr.src[0].arg
        if not _costly(red.src[0], rr) or _keeps(red):   # a matmul's products: nothing to keep
            continue
        for ro in loops:
            # a loop of the outputs as long as the row, opened after every loop the reduce runs in
            if ro.src[0].arg != size or ro in outer or \
                    any(r.arg[0] > ro.arg[0] for r in outer):
                continue
            shared = [x for x in _shared_values(red.src[0], rr, ro, outputs) if range_deps(x) - {rr} <= outer]
            more = sum(size * x.dtype.itemsize for x in shared)
            if not shared or not target.row_fits_cache(nbytes + more):
                continue
            # every store at once: one shared value may hold another (a gradient's cos(x / s) and x / s), and a
            # substitution one at a time rewrote the outer one's node before its own substitution could find it
            writes, loads = {}, {}
            for x in shared:
                reg = UOp(Ops.DEFINE_REG, x.dtype, (), (n_regs, size))
                n_regs += 1
                writes[x] = UOp(Ops.AFTER, x.dtype, (x, UOp(Ops.STORE, None, (UOp(Ops.INDEX, x.dtype, (reg, rr)), x))))
                loads[x.substitute({rr: ro})] = UOp(Ops.LOAD, x.dtype, (UOp(Ops.INDEX, x.dtype, (reg, ro)),))
            new_red = red.replace(src=(red.src[0].substitute(writes), rr))
            # the outputs read the loads, and everything else that read the reduce reads the new one
            return sink.substitute({red: new_red, **loads}), n_regs, nbytes + more
    return None


__all__ = ["row_buffers", "COSTLY"]
