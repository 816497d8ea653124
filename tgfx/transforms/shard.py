"""`shard`: Tensors split or replicated across a tuple of devices, and collectives on them (SPEC §6).

>>> import numpy as np, tgfx as tg
>>> devs = ("CPU:0", "CPU:1")
>>> x = tg.shard(tg.asarray(np.arange(8.0).reshape(4, 2)), devs, axis=0)   # rows 0-1 on CPU:0, rows 2-3 on CPU:1
>>> x.device
('CPU:0', 'CPU:1')
>>> float((x * 2).sum())      # per-device partial sums, then an all-reduce ring
56.0

A sharded Tensor is a `MULTI` node: one part per device and the axis it is split along (None: every device holds
the whole value). Everything else is ordinary: ops on sharded Tensors build ordinary graph nodes whose device is the
tuple, `grad` and `jit` see nothing special, and the lowering (`tgfx/lowering/multi.py`) turns the graph into one
graph per device, with all-reduce rings where a reduction crosses devices. Data-parallel training is a sharded batch
and replicated parameters; tensor-parallel layers shard a weight along its output (or input) axis.
"""
from __future__ import annotations

from collections.abc import Sequence

from tgfx.devices import canonical_device
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.multi import ShardingError, multi
from tgfx.tensor import Tensor, normalize_axis

Devices = tuple[str, ...]


def _devices(devices: str | Sequence[str], what: str) -> Devices:
    if isinstance(devices, str):
        devices = (devices,)
    try:
        out = tuple(canonical_device(d) for d in devices)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
    if not out:
        raise ValueError(f"{what}: the device tuple is empty")
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: devices {tuple(devices)} name a device more than once")
    return out


def sharding(x: Tensor) -> tuple[Devices, int | None] | None:
    """`(devices, axis)` of a sharded Tensor whose layout is known (a MULTI), None for a one-device Tensor."""
    u = x.uop
    if u.op is Ops.MULTI:
        return u.device, u.arg
    if isinstance(u.device, tuple):
        x.realize()
        return x.uop.device, x.uop.arg
    return None


def shard(x: Tensor, devices: str | Sequence[str], axis: int | None = None) -> Tensor:
    """`x` split evenly along `axis` across `devices` (each device gets one contiguous piece), or replicated on
    every device when `axis` is None. Sharding a sharded Tensor reshards it (all-to-all, gather or split).

    >>> w = tg.shard(tg.zeros((512, 256)), ("CPU:0", "CPU:1"), axis=1)   # columns 0-127 on CPU:0, the rest on CPU:1

    Raises:
        ValueError: the axis is out of range, or its size does not divide by the number of devices; a device name is
            unknown or repeated.
    """
    if not isinstance(x, Tensor):
        x = Tensor(x)
    devs = _devices(devices, "shard")
    if axis is not None:
        axis = normalize_axis(axis, x.ndim, "shard")
        if x.shape[axis] % len(devs):
            raise ValueError(f"shard: axis {axis} of a Tensor of shape {x.shape} has size {x.shape[axis]}, which does "
                             f"not divide evenly across the {len(devs)} devices {devs}; pad it, or shard another axis")
    if len(devs) == 1:
        return x.to(devs[0])
    u = x.uop
    if u.op is Ops.MULTI and u.device == devs and u.arg == axis:
        return x
    if isinstance(u.device, tuple):
        if u.device == devs:  # reshard in place: device i keeps (or fetches) its new piece
            return Tensor(multi([UOp(Ops.MSELECT, x.dtype, (u,), (i, axis)) for i in range(len(devs))], axis))
        u = UOp(Ops.COPY, x.dtype, (u,), u.device[0])  # another device tuple: gather, then split
    return Tensor(UOp(Ops.COPY, x.dtype, (u,), (devs, axis)))


def device_put(x: Tensor, device: str | Sequence[str], axis: int | None = None) -> Tensor:
    """`x` on one device (gathering it if sharded), or on a device tuple (`shard(x, device, axis)`)."""
    if not isinstance(x, Tensor):
        x = Tensor(x)
    if isinstance(device, str):
        if axis is not None:
            raise ValueError(f"device_put: axis={axis} needs a device tuple, got the single device {device!r}")
        return x.to(device)
    return shard(x, device, axis)


def parts(x: Tensor) -> list[Tensor]:
    """The per-device parts of a sharded Tensor, each a one-device Tensor (for code written per device)."""
    if sharding(x) is None:
        raise ShardingError(f"parts: the Tensor of shape {x.shape} on {x.device} is not sharded")
    return [Tensor(p) for p in x.uop.src]


def from_parts(pieces: Sequence[Tensor], axis: int | None = None) -> Tensor:
    """The sharded Tensor whose part i is `pieces[i]` (each on its own device): joined along `axis`, or, with
    `axis=None`, a replicated Tensor whose parts the caller promises are equal (see `psum` for parts that differ)."""
    pieces = list(pieces)
    if not pieces or not all(isinstance(p, Tensor) and isinstance(p.device, str) for p in pieces):
        raise ShardingError("from_parts: expected one-device Tensors, one per device")
    if len({p.device for p in pieces}) != len(pieces):
        raise ShardingError(f"from_parts: parts on {[p.device for p in pieces]}: each device must appear once")
    if len({(p.shape, p.dtype) for p in pieces}) != 1:
        raise ShardingError(f"from_parts: parts have different shapes or dtypes: "
                            f"{[(p.shape, p.dtype.name) for p in pieces]}")
    if axis is not None:
        axis = normalize_axis(axis, pieces[0].ndim, "from_parts")
    return Tensor(multi([p.uop for p in pieces], axis))


def _collective(pieces: Sequence[Tensor], op: Ops) -> Tensor:
    x = from_parts(pieces)  # checks them
    return Tensor(UOp(Ops.ALLREDUCE, x.dtype, x.uop.src, op))


def psum(pieces: Sequence[Tensor]) -> Tensor:
    """The sum of one value per device, replicated on every device (an all-reduce ring)."""
    return _collective(pieces, Ops.ADD)


def pmax(pieces: Sequence[Tensor]) -> Tensor:
    """The elementwise maximum of one value per device, replicated on every device."""
    return _collective(pieces, Ops.MAX)


def all_gather(x: Tensor) -> Tensor:
    """A sharded Tensor made replicated: every device gets the whole value."""
    s = sharding(x)
    if s is None:
        raise ShardingError(f"all_gather: the Tensor of shape {x.shape} on {x.device} is not sharded")
    return shard(x, s[0], None)


def reduce_scatter(pieces: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The sum of one value per device, sharded along `axis`: device i gets piece i of the sum."""
    total = psum(pieces)
    return shard(total, total.device, axis)


def visualize_sharding(x: Tensor) -> str:
    """A text picture of how `x` is laid out over its devices (like JAX's `visualize_array_sharding`).

    >>> print(tg.visualize_sharding(tg.shard(tg.zeros((4, 6)), ("CPU:0", "CPU:1"), axis=0)))
    float32[4, 6] sharded along axis 0 over 2 devices
    ┌──────────────────────┐
    │ CPU:0  rows 0:2      │
    ├──────────────────────┤
    │ CPU:1  rows 2:4      │
    └──────────────────────┘
    """
    head = f"{x.dtype.name}{list(x.shape)}"
    s = sharding(x)
    if s is None:
        cells = [f"{x.device}  all"]
        title = f"{head} on {x.device}"
    else:
        devs, axis = s
        if axis is None:
            cells = [f"{d}  all (replica)" for d in devs]
            title = f"{head} replicated on {len(devs)} devices"
        else:
            size = x.shape[axis] // len(devs)
            what = "rows" if axis == 0 else "cols" if axis == x.ndim - 1 else f"axis {axis}"
            cells = [f"{d}  {what} {i * size}:{(i + 1) * size}" for i, d in enumerate(devs)]
            title = f"{head} sharded along axis {axis} over {len(devs)} devices"
    width = max(len(c) for c in cells) + 8
    lines = [title, "┌" + "─" * width + "┐"]
    for i, c in enumerate(cells):
        if i:
            lines.append("├" + "─" * width + "┤")
        lines.append("│ " + c.ljust(width - 1) + "│")
    lines.append("└" + "─" * width + "┘")
    return "\n".join(lines)


__all__ = ["shard", "device_put", "sharding", "parts", "from_parts", "psum", "pmax", "all_gather", "reduce_scatter",
           "visualize_sharding", "ShardingError"]
