"""multi: sharded values become per-device graphs, and ALLREDUCEs become rings of copies and adds (SPEC §6).

A sharded value is `MULTI(part_0, ..., part_{n-1}; arg=axis)`: part i lives on the i-th device of the tuple, `axis`
is the axis split evenly across the devices, or None when every device holds the whole value (replicated), or blocks
over a device grid (`tgfx/ir/blocks.py`: one (ways, stride) per array axis; a mesh's dp x tp layouts). On a grid an
elementwise op takes the finest layout its operands agree on (each device its block of a less split operand: a view),
views keep the splits they can, and a reduce over split axes all-reduces over each subgroup of devices that differ
only in those axes' digits (a "model" group, a "data" group), not over all of them. Ops on
sharded values are ordinary ops whose device is the tuple. `pm_multi` pushes MULTI up through them, one op per device:

- elementwise ops map part by part; a replicated or device-less operand is sliced to each device's piece (a view);
- movement ops keep the sharded axis where they can (a permute, a reshape that keeps the split) and all-gather
  first where they cannot (a pad, shrink or flip across it, a reshape that splits it unevenly);
- a reduce over the sharded axis is a per-device partial reduce plus an `ALLREDUCE`;
- `MSELECT(x; (i, axis))` is device i's piece of x laid out along `axis` (None: all of x), which resharding and the
  gradient of a MULTI are made of; `COPY` to one device gathers.

`pm_allreduce` then lowers each ALLREDUCE. Over devices whose memory is this process's host memory
(`HCQDevice.host_memory`: `CPU:0`, `CPU:1`, ... share one address space) the first device reads every part where it
lies into one result, which every other device reads where it lies, with no copies (`direct_all_reduce`; the program
makes each kernel wait for the devices that wrote what it reads). Otherwise it is a ring over the devices: a
reduce-scatter (n-1 steps; each device sends one chunk to the next, which combines it with its own) and an all-gather
(n-1 steps of forwarding). Each step is a `COPY` onto the next device's copy engine and an add kernel; the timeline
signals of the devices order them. Every device moves 2(n-1)/n of the value, the optimum for a ring.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tgfx.dtypes import dtypes
from tgfx.ir import blocks
from tgfx.ir.blocks import Layout
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat
from tgfx.ir.uop import UOp, prod


class ShardingError(ValueError):
    """Sharded values that cannot be combined (different device tuples, a sharded value with a one-device one)."""


Parts = list[UOp]


def device_parts(u: UOp) -> tuple[UOp, ...]:
    """The one-device values a value is made of: a sharded value's parts, else the value itself."""
    return u.src if u.op is Ops.MULTI else (u,)


# ---- per-device building blocks ----
def piece_shape(shape: tuple[int, ...], layout: Layout, n: int) -> tuple[int, ...]:
    return shape if layout is None else blocks.part_shape(shape, blocks.splits(layout, len(shape), n))


def _shrink_axis(u: UOp, axis: int, lo: int, hi: int) -> UOp:
    """`u[lo:hi]` along `axis`, taken inside a broadcast (an EXPAND's piece is the EXPAND of its source's piece, or of
    its source where the axis is the broadcast one): a device's piece of a replicated operand then reads as the whole
    program's does (a weight gradient's batch-and-sequence sum over a broadcast input is still a contraction, whose
    reduce axes merge: as a SHRINK of an EXPAND it was not, and its per-device kernel ran 2-4x slower per FLOP)."""
    if (lo, hi) == (0, u.shape[axis]):
        return u
    if u.op is Ops.EXPAND:
        shape = tuple(hi - lo if a == axis else s for a, s in enumerate(u.shape))
        src = u.src[0]
        inner = src if src.shape[axis] == 1 else _shrink_axis(src, axis, lo, hi)
        return UOp(Ops.EXPAND, u.dtype, (inner,), shape)
    return UOp(Ops.SHRINK, u.dtype, (u,), tuple((lo, hi) if a == axis else (0, s) for a, s in enumerate(u.shape)))


def piece(u: UOp, layout: Layout, i: int, n: int) -> UOp:
    """Device i's piece of a whole value `u` laid out over `n` devices as `layout` says (a view)."""
    if layout is None:
        return u
    for a, ((w, _), b) in enumerate(zip(bl := blocks.splits(layout, len(u.shape), n), blocks.block_of(bl, i),
                                         strict=True)):
        if w > 1:
            size = u.shape[a] // w
            u = _shrink_axis(u, a, b * size, (b + 1) * size)
    return u


def concat(xs: list[UOp], axis: int) -> UOp:
    """`xs` joined along `axis` on the device they share: each padded to the whole, then added (OR for bool)."""
    total = sum(x.shape[axis] for x in xs)
    combine = Ops.OR if xs[0].dtype == dtypes.bool else Ops.ADD
    out, at = None, 0
    for x in xs:
        pad = tuple((at, total - at - x.shape[axis]) if a == axis else (0, 0) for a in range(len(x.shape)))
        padded = x if at == 0 and x.shape[axis] == total else UOp(Ops.PAD, x.dtype, (x,), pad)
        out = padded if out is None else UOp(combine, x.dtype, (out, padded))
        at += x.shape[axis]
    assert out is not None
    return out


def concat_by_copies(xs: list[UOp]) -> UOp:
    """1-D `xs` joined, materialised by copying each piece into place: `CONTIGUOUS(joined, *pieces)` tagged with
    ("concat", offsets) for the scheduler, whose value is the joined graph."""
    offsets = [sum(x.shape[0] for x in xs[:i]) for i in range(len(xs))]
    kept = [(x, at) for x, at in zip(xs, offsets, strict=True) if x.shape[0]]
    return UOp(Ops.CONTIGUOUS, xs[0].dtype, (concat(xs, 0), *(x for x, _ in kept)),
               tag=("concat", tuple(at for _, at in kept)))


def copy_to(u: UOp, device: str) -> UOp:
    return u if u.device == device else UOp(Ops.COPY, u.dtype, (u,), device)


def gather(m: UOp, device: str) -> UOp:
    """The whole of sharded value `m` on one device."""
    devices = m.device
    if any("@" in d for d in devices):  # the tuple spans processes ("CPU:k@p"): an MPI all-gather
        from tgfx.lowering.multi_process import gather_across
        return gather_across(m, device)
    if m.arg is None:
        return m.src[devices.index(device)] if device in devices else copy_to(m.src[0], device)
    if type(m.arg) is int:
        return concat([copy_to(p, device) for p in m.src], m.arg)
    # a grid layout: one replica of each block (the device's own where it holds one), joined axis by axis
    bl = m.arg
    mine = blocks.block_of(bl, devices.index(device)) if device in devices else None
    held: dict[tuple[int, ...], UOp] = {}
    for i, p in enumerate(m.src):
        b = blocks.block_of(bl, i)
        if b not in held or b == mine and p.device == device:
            held[b] = p
    held = {b: copy_to(p, device) for b, p in held.items()}
    for a in reversed(range(len(bl))):
        if bl[a][0] > 1:
            rows: dict[tuple[int, ...], list[UOp]] = {}
            for b in sorted(held):
                rows.setdefault(b[:a] + (0,) + b[a + 1:], []).append(held[b])
            held = {b: concat(xs, a) for b, xs in rows.items()}
    return held[(0,) * len(bl)]


def reshard(m: UOp, axis: Layout) -> Parts:
    """The parts of sharded value `m` laid out as `axis` says instead (None: replicated) on the same devices."""
    n, devices = len(m.src), m.device
    if m.arg == axis:
        return list(m.src)
    if m.arg is None:  # each device already has everything: keep its piece
        return [piece(p, axis, i, n) for i, p in enumerate(m.src)]
    if axis is None:  # all-gather
        return [gather(m, d) for d in devices]
    if type(m.arg) is not int or type(axis) is not int:
        have, want = blocks.splits(m.arg, len(m.shape), n), blocks.splits(axis, len(m.shape), n)
        if all(h in (w, blocks.WHOLE) for h, w in zip(have, want, strict=True)):
            # every axis split alike or whole here: each device keeps its block of its part (a view)
            finer = tuple(w if h == blocks.WHOLE else blocks.WHOLE for h, w in zip(have, want, strict=True))
            return [piece(p, finer, i, n) for i, p in enumerate(m.src)]
        return [piece(gather(m, d), axis, i, n) for i, d in enumerate(devices)]
    if any("@" in d for d in devices):  # across processes: each takes its new pieces from an all-gather
        return [piece(gather(m, d), axis, i, n) for i, d in enumerate(devices)]
    # all-to-all: device i's new piece is, from every part, its slice i along the new axis, joined along the old one
    return [concat([copy_to(piece(p, axis, i, n), d) for p in m.src], m.arg) for i, d in enumerate(devices)]


def multi(parts: Parts, axis: int | None) -> UOp:
    return UOp(Ops.MULTI, parts[0].dtype, tuple(parts), axis)


# ---- pm_multi: push MULTI up through every op ----
def _devices_of(x: UOp, srcs: tuple[UOp, ...]) -> tuple[str, ...]:
    tuples = {s.device for s in srcs if s.op is Ops.MULTI}
    singles = {s.device for s in srcs if s.op is not Ops.MULTI and s.device is not None}
    if len(tuples) > 1 or singles:
        raise ShardingError(f"{x.op.name} combines values on different devices: "
                            f"{', '.join(map(str, sorted(tuples | singles, key=str)))}; move them to the same device "
                            f"(tuple) first with tg.device_put or tg.shard")
    return tuples.pop()


def multi_elementwise(x: UOp) -> UOp | None:
    if not any(s.op is Ops.MULTI for s in x.src):
        return None
    devices = _devices_of(x, x.src)
    n = len(devices)
    axes = [s.arg for s in x.src if s.op is Ops.MULTI and s.arg is not None]
    if len(axes) > 1 and not all(type(a) is int for a in axes):
        axis = blocks.join(axes, len(x.shape), n)   # a device grid: the finest layout the operands agree on
    else:
        axis = axes[0] if axes else None
    per_src = [reshard(s, axis) if s.op is Ops.MULTI else [piece(s, axis, i, n) for i in range(n)] for s in x.src]
    return multi([x.replace(src=tuple(ps[i] for ps in per_src)) for i in range(n)], axis)


def reshape_axis(old: tuple[int, ...], new: tuple[int, ...], axis: int, n: int) -> int | None:
    """Where the sharded axis lands after a reshape, if the split survives it (same elements before it, and the new
    axis divides evenly), else None."""
    before = prod(old[:axis])
    for a in range(len(new)):
        if prod(new[:a]) == before and new[a] % n == 0 and new[a] >= n:
            return a
        if prod(new[:a]) > before:
            break
    return None


def grid_movement(x: UOp, m: UOp) -> Layout | bool:
    """The layout a view keeps of grid layout `m.arg`, or False where a split does not survive it."""
    bl, n = m.arg, len(m.src)
    split = [a for a, (w, _) in enumerate(bl) if w > 1]
    if x.op is Ops.PERMUTE:
        return tuple(bl[a] for a in x.arg)
    if x.op is Ops.EXPAND:
        return bl
    if x.op is Ops.RESHAPE:
        moved = {a: reshape_axis(m.shape, x.arg, a, bl[a][0]) for a in split}
        if None in moved.values() or len(set(moved.values())) < len(moved):
            return False
        new = [blocks.WHOLE] * len(x.arg)
        for a, b in moved.items():
            new[b] = bl[a]
        return blocks.canonical(tuple(new), n)
    if x.op in (Ops.PAD, Ops.SHRINK):
        return bl if all(x.arg[a] in ((0, 0), (0, m.shape[a])) for a in split) else False
    if x.op is Ops.FLIP:
        return bl if not set(split) & set(x.arg) else False
    return False


def multi_movement(x: UOp, m: UOp) -> UOp:
    n, axis = len(m.src), m.arg

    def each(arg_of: object, new_axis: Layout) -> UOp:
        return multi([x.replace(src=(p,), arg=arg_of) for p in m.src], new_axis)

    if axis is None:
        return each(x.arg, None)
    if type(axis) is not int:
        if (new := grid_movement(x, m)) is False:
            return multi([x.replace(src=(full,)) for full in reshard(m, None)], None)
        bl = blocks.splits(new, len(x.shape), n)
        if x.op is Ops.SHRINK:
            return each(tuple((0, s) if w > 1 else b for b, s, (w, _) in zip(x.arg, m.src[0].shape, bl, strict=True)),
                        new)
        arg = blocks.part_shape(x.arg, bl) if x.op in (Ops.EXPAND, Ops.RESHAPE) else x.arg
        return each(arg, new)
    if x.op is Ops.PERMUTE:
        return each(x.arg, x.arg.index(axis))
    if x.op is Ops.EXPAND:
        return each(piece_shape(x.arg, axis, n), axis)
    if x.op is Ops.RESHAPE and (a := reshape_axis(m.shape, x.arg, axis, n)) is not None:
        return each(piece_shape(x.arg, a, n), a)
    if x.op is Ops.PAD and x.arg[axis] == (0, 0):
        return each(x.arg, axis)
    if x.op is Ops.SHRINK and x.arg[axis] == (0, m.shape[axis]):
        part = m.shape[axis] // n
        return each(tuple((0, part) if a == axis else b for a, b in enumerate(x.arg)), axis)
    if x.op is Ops.FLIP and axis not in x.arg:
        return each(x.arg, axis)
    # the split does not survive this view: every device gathers the whole value and applies it
    return multi([x.replace(src=(full,)) for full in reshard(m, None)], None)


def multi_reduce(x: UOp, m: UOp) -> UOp:
    op, axes = x.arg
    partials = [x.replace(src=(p,)) for p in m.src]
    if type(m.arg) is not int and m.arg is not None:
        crossed = tuple(a for a in axes if m.arg[a][0] > 1)
        if not crossed:
            return multi(partials, m.arg)
        # the devices holding the blocks one result combines: those whose index differs only in the reduced digits
        groups: dict[int, list[int]] = {}
        for i in range(len(partials)):
            groups.setdefault(blocks.group_key(m.arg, crossed, i), []).append(i)
        out: list[UOp] = [partials[0]] * len(partials)
        for members in groups.values():
            for i, r in zip(members, all_reduce([partials[i] for i in members], op).src, strict=True):
                out[i] = r
        left = tuple(blocks.WHOLE if a in crossed else s for a, s in enumerate(m.arg))
        return multi(out, blocks.canonical(left, len(partials)))
    if m.arg is None or m.arg not in axes:
        return multi(partials, m.arg)
    return all_reduce(partials, op)


def all_reduce(partials: Parts, op: Ops) -> UOp:
    """Replicated `op`-combination of per-device partial values (lowered to a ring by pm_allreduce)."""
    ar = UOp(Ops.ALLREDUCE, partials[0].dtype, tuple(partials), op, tag="ring")
    return multi([UOp(Ops.MSELECT, ar.dtype, (ar,), (i, None)) for i in range(len(partials))], None)


def multi_copy(x: UOp, m: UOp) -> UOp | None:
    if isinstance(x.arg, str):
        return gather(m, x.arg)
    devices, axis = x.arg
    if devices == m.device:
        return multi(reshard(m, axis), axis)
    whole = gather(m, devices[0]) if devices[0] in m.device else gather(m, m.device[0])
    return scatter(whole, devices, axis)


def scatter(u: UOp, devices: tuple[str, ...], axis: Layout) -> UOp:
    """A one-device (or device-less) value laid out as `axis` says (None: replicated) across `devices`."""
    n = len(devices)
    return multi([copy_to(piece(u, axis, i, n), d) for i, d in enumerate(devices)], axis)


def _check_calls(call: UOp) -> None:
    for a in call.src[1:]:
        if isinstance(a.device, tuple):
            raise ShardingError(f"{call.arg[0] if isinstance(call.arg, tuple) else call.arg}: precompiled functions "
                                f"and custom kernels take one-device arguments; gather the sharded argument first "
                                f"(tg.device_put(x, 'CPU:0'))")


pm_multi = PatternMatcher([
    (UPat(GroupOp.Elementwise | {Ops.CONTIGUOUS}, name="x"), multi_elementwise),
    (UPat(GroupOp.Movement, src=(UPat(Ops.MULTI, name="m"),), name="x"), multi_movement),
    (UPat(Ops.REDUCE_AXIS, src=(UPat(Ops.MULTI, name="m"),), name="x"), multi_reduce),
    (UPat(Ops.COPY, src=(UPat(Ops.MULTI, name="m"),), name="x"), multi_copy),
    # a one-device (or device-less) value sent to a device tuple
    (UPat(Ops.COPY, custom=lambda x: isinstance(x.arg, tuple), name="x"),
     lambda x: scatter(x.src[0], *x.arg) if x.src[0].op is not Ops.MULTI else None),
    (UPat(Ops.MSELECT, src=(UPat(Ops.MULTI, name="m"),), name="x"), lambda x, m: reshard(m, x.arg[1])[x.arg[0]]),
    # an explicit collective written by the user (psum): its parts are already per device
    (UPat(Ops.ALLREDUCE, custom=lambda u: u.tag is None, name="x"), lambda x: all_reduce(list(x.src), x.arg)),
    (UPat(Ops.CALL, name="call"), lambda call: _check_calls(call)),
])


# ---- pm_allreduce: ALLREDUCE to a ring of copies and combines ----
def _combine(op: Ops, a: UOp, b: UOp) -> UOp:
    return UOp(op, a.dtype, (a, b))


def ring_reduce_scatter(parts: Parts, op: Ops, chunk: Callable[[UOp, int], UOp]) -> Parts:
    """Device e ends with chunk e of the reduced value; `chunk(value, k)` is chunk k of one device's value."""
    n = len(parts)
    devices = [p.device for p in parts]
    acc = [[chunk(p, k) for k in range(n)] for p in parts]
    for s in range(n - 1):
        sends = [(d, (d - s - 1) % n) for d in range(n)]
        for d, k in sends:
            e = (d + 1) % n
            acc[e][k] = _combine(op, acc[e][k], copy_to(acc[d][k], devices[e]))
    return [acc[e][e] for e in range(n)]


def ring_all_gather(chunks: Parts) -> list[Parts]:
    """Every device ends with every device's chunk (in device order), forwarded around the ring."""
    n = len(chunks)
    devices = [c.device for c in chunks]
    have = [[chunks[e] if k == e else None for k in range(n)] for e in range(n)]
    for s in range(n - 1):
        for d in range(n):
            k, e = (d - s) % n, (d + 1) % n
            have[e][k] = copy_to(have[d][k], devices[e])  # type: ignore[arg-type]
    return have  # type: ignore[return-value]


def ring_all_reduce(parts: Parts, op: Ops) -> Parts:
    n, shape = len(parts), parts[0].shape
    if n == 1:
        return list(parts)
    size = prod(shape)
    bounds = [(k * size // n, (k + 1) * size // n) for k in range(n)]
    flat = [p if p.shape == (size,) else UOp(Ops.RESHAPE, p.dtype, (p,), (size,)) for p in parts]
    by_device = {f.device: f for f in flat}

    def chunk(p: UOp, k: int) -> UOp:
        return _shrink_axis(by_device[p.device], 0, *bounds[k])

    gathered = ring_all_gather(ring_reduce_scatter(parts, op, chunk))
    # the chunks are contiguous ranges of the result: the scheduler assembles a "concat" with copies, not a kernel
    joined = [concat_by_copies(cs) for cs in gathered]
    return [UOp(Ops.RESHAPE, j.dtype, (j,), shape) if shape != (size,) else j for j in joined]


def share_memory(devices: tuple[str, ...]) -> bool:
    """Whether a kernel on any of `devices` can read the memory of every other where it lies (`host_memory`)."""
    from tgfx.devices import get_device
    return all(get_device(d).host_memory for d in devices)


def read_in_place(u: UOp, device: str) -> UOp:
    """`u` as a value on `device` that a kernel there reads where it lies, in the memory of `u`'s device (which
    `device` shares): a COPY tagged "in place", which the scheduler never makes a copy of (a kernel runs on its
    first operand's device, so this also places a combination that starts with another device's part)."""
    return u if u.device == device else UOp(Ops.COPY, u.dtype, (u,), device, tag="in place")


def direct_all_reduce(parts: Parts, op: Ops) -> Parts:
    """An all-reduce over devices that share memory, with no copies: the first device combines every part, read where
    it lies, into the result (one kernel, spread over the cores as any kernel is), and every other device's replica is
    that result, read where it lies too (`read_in_place`). A replica a kernel reads is read from the first device's
    memory; a replica that is a result is the same memory seen as its device's buffer (the schedule's alias, which
    makes that device wait for the kernel). n parts are read and one result written, as numpy's sum of the same
    arrays does; the earlier form, each device combining every part into its own replica, wrote n results (1.8 and
    2.8 times numpy's time over 2 and 4 devices, 2026-12-04)."""
    if len(parts) == 1:
        return list(parts)
    home = parts[0].device
    total = parts[0]
    for theirs in parts[1:]:   # the parts combined in device order
        total = _combine(op, total, read_in_place(theirs, home))
    total = UOp(Ops.CONTIGUOUS, total.dtype, (total,))
    return [total] + [read_in_place(total, p.device) for p in parts[1:]]


def bucket_allreduces(sink: UOp) -> UOp:
    """Independent ALLREDUCEs of one kind (devices, op, dtype) become one ring over their values laid end to end, as
    data-parallel frameworks bucket gradients: one ring's copies and synchronisation instead of one per parameter.

    Two ALLREDUCEs are independent when neither feeds the other; ALLREDUCEs with the same number of ALLREDUCEs below
    them are, so merging them creates no cycle."""
    level: dict[UOp, int] = {}
    groups: dict[tuple, list[UOp]] = {}
    for u in sink.toposort():
        level[u] = max((level[s] + (s.op is Ops.ALLREDUCE) for s in u.src), default=0)
        # over devices that share memory an all-reduce is one kernel per device already, with no ring to share
        if u.op is Ops.ALLREDUCE and u.tag == "ring" and len(u.src) > 1 and not share_memory(u.device):
            groups.setdefault((level[u], u.device, u.arg, u.dtype), []).append(u)
    mapping: dict[UOp, UOp] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        n = len(members[0].src)
        sizes = [prod(m.shape) for m in members]
        offsets = [sum(sizes[:k]) for k in range(len(members))]
        joined = [concat_by_copies([UOp(Ops.RESHAPE, m.dtype, (m.src[i],), (size,)) for m, size in
                                    zip(members, sizes, strict=True)]) for i in range(n)]
        big = UOp(Ops.ALLREDUCE, members[0].dtype, tuple(joined), members[0].arg, tag="ring")
        for m, size, at in zip(members, sizes, offsets, strict=True):
            for i in range(n):
                whole = UOp(Ops.MSELECT, m.dtype, (big,), (i, None))
                mapping[UOp(Ops.MSELECT, m.dtype, (m,), (i, None))] = UOp(Ops.RESHAPE, m.dtype, (
                    _shrink_axis(whole, 0, at, at + size),), m.shape)
    return sink.substitute(mapping) if mapping else sink


@dataclass
class RingCtx:
    rings: dict[UOp, Parts] = field(default_factory=dict)


def lower_allreduce(ctx: RingCtx, x: UOp, ar: UOp) -> UOp:
    if ar not in ctx.rings:
        lower = direct_all_reduce if share_memory(ar.device) else ring_all_reduce
        ctx.rings[ar] = lower(list(ar.src), ar.arg)
    return ctx.rings[ar][x.arg[0]]


pm_allreduce = PatternMatcher([
    (UPat(Ops.MSELECT, src=(UPat(Ops.ALLREDUCE, name="ar"),), name="x"), lower_allreduce),
])


def has_multi(sink: UOp) -> bool:
    """Whether any node of the graph is sharded (a device tuple), so the multi passes have work to do."""
    from tgfx.lowering.inline import walk
    return any(isinstance(u.device, tuple) or u.op is Ops.MULTI for u in walk(sink))


def group_by_device(calls: list[UOp]) -> list[UOp]:
    """The commands of a LINEAR that spans devices reordered so that each device's kernels run back to back: the
    program submits one segment per run of one device's commands (`Program._encode`), and the walk that schedules
    per-device graphs alternates between their parts op by op (a tensor-parallel step: 146 segments for 136
    kernels). Every command keeps its order against each command it shares a buffer with where either writes it;
    among the commands that are ready, the current device's kernels come first (those reading another device's
    memory too: they go on in its queue behind one wait), then copies (each a segment of its own), then the next
    device's. A LINEAR with loops, branches,
    callbacks or collectives between processes is kept as it is."""
    from tgfx.lowering.control import reads, writes
    if not calls or any(c.src[0].op not in (Ops.SINK, Ops.COPY) for c in calls):
        return calls
    devices = [c.src[1].arg[1] for c in calls]
    if len(set(devices)) == 1:
        return calls
    after: list[list[int]] = [[] for _ in calls]   # i -> the commands that wait for i
    waits = [0] * len(calls)
    last_write: dict[UOp, int] = {}
    read_since: dict[UOp, list[int]] = {}
    for i, c in enumerate(calls):
        before: set[int] = set()
        written = set(writes(c))
        for b in set(reads(c)) | written:
            if (w := last_write.get(b)) is not None:
                before.add(w)
            if b in written:
                before.update(read_since.pop(b, ()))
                last_write[b] = i
            else:
                read_since.setdefault(b, []).append(i)
        before.discard(i)
        for j in before:
            after[j].append(i)
        waits[i] = len(before)
    # a copy is a segment of its own (on a copy engine); a kernel, one reading another device's memory too, goes on
    # in its device's queue (`Program._encode`)
    alone = [c.src[0].op is not Ops.SINK for c in calls]
    ready = [i for i in range(len(calls)) if not waits[i]]
    out: list[UOp] = []
    current = devices[0]
    while ready:
        pick = min((i for i in ready if devices[i] == current and not alone[i]), default=None)
        if pick is None:
            pick = min((i for i in ready if alone[i]), default=None)
        if pick is None:
            pick = min(ready)
            current = devices[pick]
        ready.remove(pick)
        out.append(calls[pick])
        for j in after[pick]:
            waits[j] -= 1
            if not waits[j]:
                ready.append(j)
    assert len(out) == len(calls), "group_by_device: a cycle among the commands' buffers"
    return out
