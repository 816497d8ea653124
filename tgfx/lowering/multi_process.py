"""multi_process: device tuples that span processes become this process's graph plus network collectives.

In the multi-controller model every process runs the same program on a global value whose parts are spread over
the processes' devices (`tg.distributed`); each process computes only the parts on its own devices. After
`pm_multi` has made every op one op per device, this stage (run by `lower_multi`, between the bucketing of
all-reduces and their rings):

1. keeps the roots on this process's devices (`keep_local`): the other processes compute theirs; this process's
   results hold placeholders for them (BUFFERs on `RemoteDevice`s, which own no memory);
2. rewrites each ALLREDUCE whose devices span processes (`pm_cross_process`; a device's own piece of one, one
   device per process, is a reduce-scatter instead): the local parts are combined on the
   first local device (an ordinary ring when the process has several), a `NETWORK` node all-reduces that over the
   processes (one MPI collective on the network engine, `tgfx/devices/network.py`), and each other local device
   gets a copy;
3. checks that nothing else reads a device of another process: data moves between processes only through the
   collectives, and a copy from another process's part is an error naming it.

Gathers of values sharded across processes (to one device, to replicated, and reshards between axes, which take
their pieces of the gathered value) are `gather_across`, which `multi.gather` calls for such tuples: the process's
own parts joined, then a `NETWORK` all-gather of the processes' blocks.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tgfx.devices import network
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.multi import ShardingError, concat, copy_to


def has_remote(nodes: list[UOp]) -> bool:
    """Whether any node of the graph lives on (or spans) another process's device."""
    return any(_remote_in(u.device) for u in nodes)


def _remote_in(device: object) -> bool:
    return network.is_remote(device) or (type(device) is tuple and network.spans_processes(device))


def keep_local(roots: list[UOp]) -> tuple[list[UOp], Callable[[list[UOp]], list[UOp]]]:
    """The roots this process computes (those on its own devices), and the function that puts placeholders for the
    other processes' parts back between their results."""
    local = [r for r in roots if not network.is_remote(r.device)]
    holes = {i: remote_placeholder(r.device, r.shape, r.dtype) for i, r in enumerate(roots)
             if network.is_remote(r.device)}
    if not holes:
        return roots, list

    def fill(results: list[UOp]) -> list[UOp]:
        it = iter(results)
        return [holes[i] if i in holes else next(it) for i in range(len(roots))]
    return local, fill


def remote_placeholder(device: str, shape: tuple[int, ...], dtype: object) -> UOp:
    """A part held by another process: a BUFFER on its device (placeholder memory here, so programs can bind it
    like any input), viewed in `shape`."""
    from tgfx.devices import get_device
    from tgfx.lowering.execute import buffer_nbytes, register_memory
    from tgfx.lowering.layout import new_buffer
    buf = new_buffer(device, prod(shape), dtype)
    register_memory(buf, get_device(device).allocator.alloc(buffer_nbytes(buf)))
    return buf if shape == (prod(shape),) else UOp(Ops.RESHAPE, buf.dtype, (buf,), shape)


@dataclass
class CrossCtx:
    done: dict[UOp, list[UOp | None]] = field(default_factory=dict)


def all_reduce_across(ar: UOp) -> list[UOp | None]:
    """Per device of `ar`: this process's devices get the all-reduced value, the others None."""
    devices = ar.device
    local = [s for s in ar.src if not network.is_remote(s.device)]
    if not local:
        return [None] * len(devices)
    op = ar.arg
    network.check_collective("allreduce", op.name, ar.dtype.name)
    if len(local) > 1:  # the process's own devices first, with the ring they use within a process
        ring = UOp(Ops.ALLREDUCE, ar.dtype, tuple(local), op, tag="ring")
        first = UOp(Ops.MSELECT, ar.dtype, (ring,), (0, None))
    else:
        first = local[0]
    red = first.src[0] if first.op is Ops.RESHAPE else first
    if red.op is Ops.REDUCE_AXIS and all(red.src[0].shape[a] == 1 for a in red.arg[1]):
        # one row per process (a sum over an axis of size 1): MPI reads the rows where they are, no kernel copies them
        rows = red.src[0]
        while rows.op is Ops.RESHAPE:
            rows = rows.src[0]
        first = rows if rows.shape == first.shape else UOp(Ops.RESHAPE, first.dtype, (rows,), first.shape)
    processes = tuple(sorted({network.process_of(d) for d in devices}))
    net = UOp(Ops.NETWORK, ar.dtype, (first,), ("allreduce", op.name, processes, first.shape))
    return [None if network.is_remote(d) else copy_to(net, d) for d in devices]


def gather_across(m: UOp, device: str) -> UOp:
    """The whole of `m`, sharded over a tuple that spans processes, on this process's `device`: its own parts joined,
    then an MPI all-gather of every process's block (a placeholder when `device` is another process's)."""
    devices, axis = m.device, m.arg
    if network.is_remote(device):
        return remote_placeholder(device, m.shape, m.dtype)
    local = [p for p in m.src if not network.is_remote(p.device)]
    if axis is None:  # replicated: this process's replica
        return copy_to(local[0], device) if local else _no_part(m, device)
    if not local:
        return _no_part(m, device)
    procs = [network.process_of(d) for d in devices]
    if procs != sorted(procs):
        raise ShardingError(f"gathering a value sharded over {devices}: across processes, the tuple must list each "
                            f"process's devices together, in process order (as tg.devices() does)")
    block = concat([copy_to(p, device) for p in local], axis)
    # the all-gather stacks the processes' blocks along the first axis: move the sharded axis there and back
    order = (axis, *(a for a in range(len(block.shape)) if a != axis))
    lead = block if axis == 0 else UOp(Ops.PERMUTE, block.dtype, (block,), order)
    processes = tuple(sorted(set(procs)))
    shape = (lead.shape[0] * len(processes), *lead.shape[1:])
    net = UOp(Ops.NETWORK, m.dtype, (UOp(Ops.CONTIGUOUS, m.dtype, (lead,)),), ("allgather", "NONE", processes, shape))
    return net if axis == 0 else UOp(Ops.PERMUTE, net.dtype, (net,), tuple(order.index(a) for a in range(len(order))))


def _no_part(m: UOp, device: str) -> UOp:
    raise ShardingError(f"this process holds no part of the value sharded over {m.device}, so it cannot gather it on "
                        f"{device}; only the processes of the tuple can")


def lower_cross(ctx: CrossCtx, x: UOp, ar: UOp) -> UOp | None:
    if not network.spans_processes(ar.device):
        return None
    if ar not in ctx.done:
        ctx.done[ar] = all_reduce_across(ar)
    return ctx.done[ar][x.arg[0]]


def reduce_scatter_across(s: UOp) -> UOp | None:
    """Device i's piece (along the leading axis) of an all-reduce across processes (seen through reshapes), with one
    device per process in process order: an MPI reduce-scatter, which moves half of what the all-reduce would
    (ZeRO-style sharded gradients: `tg.shard(x.sum(axis=0), devices, axis=0)`)."""
    x = s.src[0]
    while x.op is Ops.RESHAPE:   # a reshape keeps the flat order, so a leading-axis piece stays a contiguous block
        x = x.src[0]
    if x.op is not Ops.MSELECT or x.src[0].op is not Ops.ALLREDUCE:
        return None
    ar = x.src[0]
    devices, i, n = ar.device, x.arg[0], len(ar.device)
    procs = [network.process_of(d) for d in devices]
    if not network.spans_processes(devices) or x.arg[1] is not None or len(set(procs)) != n or procs != sorted(procs):
        return None
    shape = s.src[0].shape
    size = shape[0] // n if shape and shape[0] % n == 0 else 0
    if not size or s.arg != ((i * size, (i + 1) * size), *((0, d) for d in shape[1:])):
        return None
    network.check_collective("allreduce", ar.arg.name, ar.dtype.name)
    return UOp(Ops.NETWORK, ar.dtype, (ar.src[i],), ("reduce_scatter", ar.arg.name, tuple(procs), s.shape))


pm_cross_process = PatternMatcher([
    (UPat(Ops.SHRINK, name="s"), reduce_scatter_across),
    (UPat(Ops.MSELECT, src=(UPat(Ops.ALLREDUCE, name="ar"),), name="x"), lower_cross),
])


def check_local(sink: UOp) -> None:
    """Raise if the per-process graph still reads a part of another process (other than through a collective)."""
    from tgfx.lowering.inline import walk
    for u in walk(sink):
        if u.op is Ops.COPY and network.is_remote(u.src[0].device):
            raise ShardingError(
                f"this program copies a value of shape {u.src[0].shape} from {u.src[0].device} (another process) to "
                f"{u.device}: between processes tgfx moves data only through collectives of whole sharded values "
                f"(reductions over the sharded axis, gathers, reshards); shard the value over a device tuple that "
                f"spans the processes (tg.shard, tg.make_array_from_process_local_data) and compute on that")
        if network.is_remote(u.device) and u.op is not Ops.BUFFER:
            raise ShardingError(f"{u.op.name} of shape {u.shape} on {u.device} (another process) is part of this "
                                f"process's program; each process computes only the parts on its own devices")


def lower_cross_process(sink: UOp) -> UOp:
    """The per-process graph of a SINK of one-device roots on this process's devices (see the module docstring)."""
    # (top down: a piece of an all-reduce is seen before the all-reduce itself, to become a reduce-scatter)
    sink = graph_rewrite(sink, pm_cross_process, ctx=CrossCtx(), bottom_up=True, name="cross process")
    check_local(sink)
    # a result that is a view of a collective's output is that output (its buffer), not a copy of it
    return sink.replace(src=tuple(_view_of_network(r) or r for r in sink.src))


def _view_of_network(r: UOp) -> UOp | None:
    if r.op is not Ops.CONTIGUOUS:
        return None
    base = r.src[0]
    while base.op is Ops.RESHAPE:
        base = base.src[0]
    return r.src[0] if base.op is Ops.NETWORK else None


# ---- the program side: a NETWORK command's collective ----
_collectives: dict[tuple, network.Collective] = {}


_net: network.NetworkDevice | None = None


def network_device() -> network.NetworkDevice:
    """The process's network engine, started on first use (the devices registry closes it at exit)."""
    global _net
    if _net is None:
        from tgfx.devices import register_device
        _net = network.NetworkDevice(network.NET_NAME)
        register_device(_net)
    return _net


class _Bound:
    """A NETWORK command's collective with the engine that runs it."""

    def __init__(self, collective: network.Collective) -> None:
        self.program = collective.program
        self.device = network_device()
        self.collective = collective


def collective_of(call: UOp) -> _Bound:
    """The collective a LINEAR's NETWORK command runs (one per kind, reduction, dtype and size, made once)."""
    kind, op, processes, _ = call.src[0].arg
    src = call.src[2]
    key = (kind, op, processes, src.dtype, src.arg[2])
    coll = _collectives.get(key)
    if coll is None:
        coll = _collectives[key] = network.Collective(kind, op, src.dtype.np, src.arg[2], processes)
    return _Bound(coll)


__all__ = ["keep_local", "lower_cross_process", "has_remote", "remote_placeholder", "collective_of",
           "pm_cross_process"]
