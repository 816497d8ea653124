"""`shard`: Tensors split or replicated across a tuple of devices, and collectives on them (SPEC §6).

>>> import numpy as np, tgfx as tg
>>> devs = ("CPU:0", "CPU:1")
>>> x = tg.shard(tg.asarray(np.arange(8.0).reshape(4, 2)), devs, axis=0)   # rows 0-1 on CPU:0, rows 2-3 on CPU:1
>>> x.device
('CPU:0', 'CPU:1')
>>> float((x * 2).sum())      # per-device partial sums, then an all-reduce ring
56.0

A sharded Tensor is a `MULTI` node: one part per device and the axis it is split along (None: every device holds
the whole value), or blocks over a device grid (`tgfx/ir/blocks.py`: a NamedSharding on a 2-D mesh, dp x tp).
Everything else is ordinary: ops on sharded Tensors build ordinary graph nodes whose device is the
tuple, `grad` and `jit` see nothing special, and the lowering (`tgfx/lowering/multi.py`) turns the graph into one
graph per device, with all-reduce rings where a reduction crosses devices. Data-parallel training is a sharded batch
and replicated parameters; tensor-parallel layers shard a weight along its output (or input) axis.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx.devices import DEFAULT_DEVICE, canonical_device, network, process_devices
from tgfx.devices import backend_named as _backend
from tgfx.devices import list_devices as devices
from tgfx.dtypes import canonicalize_dtype
from tgfx.ir import blocks
from tgfx.ir.blocks import Layout
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.multi import ShardingError, multi
from tgfx.lowering.multi_process import remote_placeholder
from tgfx.placement import mark
from tgfx.tensor import Tensor, normalize_axis
from tgfx.tree import keystr, tree_broadcast, tree_flatten, tree_flatten_with_path, tree_unflatten

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


def piece_index(shape: tuple[int, ...], layout: Layout, i: int, n: int) -> tuple[slice, ...]:
    """The slice of a value of `shape` that device i of n holds in `layout`."""
    bl = blocks.splits(layout, len(shape), n)
    size = blocks.part_shape(shape, bl)
    return tuple(slice(k * s, (k + 1) * s) for k, s in zip(blocks.block_of(bl, i), size, strict=True))


def sharding(x: Tensor) -> tuple[Devices, Layout] | None:
    """`(devices, axis)` of a sharded Tensor whose layout is known (a MULTI), None for a one-device Tensor. `axis` is
    the axis split across the devices, None where each holds the whole value, or a block layout over a device grid
    (`tgfx/ir/blocks.py`: one (ways, stride) per array axis) for a NamedSharding on a mesh of two or more axes."""
    u = x.uop
    if u.op is Ops.MULTI:
        return u.device, u.arg
    if isinstance(u.device, tuple):
        x.realize()
        return x.uop.device, x.uop.arg
    return None


def shard(x: Tensor | np.ndarray, devices: str | Sequence[str], axis: int | None = None) -> Tensor:
    """`x` split evenly along `axis` across `devices` (each device gets one contiguous piece), or replicated on
    every device when `axis` is None. Sharding a sharded Tensor reshards it (all-to-all, gather or split).

    >>> w = tg.shard(tg.zeros((512, 256)), ("CPU:0", "CPU:1"), axis=1)   # columns 0-127 on CPU:0, the rest on CPU:1

    Raises:
        ValueError: the axis is out of range, or its size does not divide by the number of devices; a device name is
            unknown or repeated.
    """
    if not isinstance(x, (Tensor, np.ndarray, np.generic)):
        x = Tensor(x)
    shape = x.shape
    devs = _devices(devices, "shard")
    if axis is not None:
        axis = normalize_axis(axis, len(shape), "shard")
        if shape[axis] % len(devs):
            raise ValueError(f"shard: axis {axis} of a Tensor of shape {shape} has size {shape[axis]}, which does "
                             f"not divide evenly across the {len(devs)} devices {devs}; pad it, or shard another axis")
    return place(x, devs, axis)


def place(x: Tensor | np.ndarray, devs: Devices, axis: Layout) -> Tensor:
    """`x` laid out over the (checked) device tuple `devs` as `axis` says: an axis split evenly (`shard`), None
    (replicated), or a block layout over a device grid (`tgfx/ir/blocks.py`, a `NamedSharding` on a 2-D mesh) whose
    splits divide `x`'s axes."""
    if type(axis) is tuple and any(network.is_remote(d) for d in devs):
        raise NotImplementedError(f"a block layout over a device grid ({blocks.describe(axis, len(devs))}) on devices "
                                  f"{devs} that span processes is not supported; across processes, split one axis "
                                  f"over every device (P(('data', 'model'))) or replicate")
    host = None if isinstance(x, Tensor) else np.asarray(x)
    if host is not None and len(devs) > 1:
        # host data: each device's piece written into its memory, as `Tensor(data, device=d)` is (no program, no
        # copy between devices: a data-parallel step's batch was a buffer on the first device and a copy program).
        # Another process's piece is that process's to write (each places the same value): here a placeholder
        pieces = [host[piece_index(host.shape, axis, i, len(devs)) + (...,)] for i in range(len(devs))]
        return Tensor(multi([remote_placeholder(d, p.shape, canonicalize_dtype(host.dtype)) if network.is_remote(d)
                             else Tensor(np.ascontiguousarray(p), device=d).uop
                             for p, d in zip(pieces, devs, strict=True)], axis))
    if host is not None:
        x = Tensor(host)
    if len(devs) == 1:
        return x.to(devs[0])
    u = x.uop
    if u.op is Ops.MULTI and u.device == devs and u.arg == axis:
        return x
    if isinstance(u.device, tuple) and u.device != devs:
        u = UOp(Ops.COPY, x.dtype, (u,), u.device[0])  # another device tuple: gather, then split
    # (on the same device tuple, the lowering reshards in place: device i keeps or fetches its new piece; a COPY, not
    # the MULTI of those pieces, so that a gradient flows through it, as through any COPY)
    return Tensor(UOp(Ops.COPY, x.dtype, (u,), (devs, axis)))


# ---- the devices, and placing pytrees on them (JAX's names) ----
def local_devices(process_index: int | None = None, backend: str | None = None) -> list[str]:
    """The devices process `process_index` drives (None: this one), by their canonical names: `devices(backend)` in
    a single process; after `tg.distributed.initialize()`, this process's "CPU:k" or another's "CPU:k@p"."""
    g = network.group()
    if g.count == 1 or _backend(backend, "local_devices") == "cuda":
        if process_index not in (None, 0, g.index):
            raise ValueError(f"local_devices: process_index={process_index!r}, but tgfx runs as one process (index "
                             f"0); launch several with mpiexec and call tg.distributed.initialize()")
        return devices(backend)
    p = g.index if process_index is None else process_index
    if not 0 <= p < g.count:
        raise ValueError(f"local_devices: process_index={process_index!r}, but there are {g.count} processes")
    return process_devices(p)


def device_count(backend: str | None = None) -> int:
    """`len(devices())`: see `devices` for how the count is configured."""
    return len(devices(backend))


def local_device_count(backend: str | None = None) -> int:
    """`len(local_devices())`."""
    return len(local_devices(backend=backend))


def _default_device() -> str:
    return canonical_device(DEFAULT_DEVICE)


def _leaves(tree: Any, fn: str) -> tuple[list[tuple[Any, Any]], Any]:
    """The (path, leaf) pairs of `tree`, every leaf an array: a Tensor, a numpy array or a Python/numpy scalar."""
    flat, treedef = tree_flatten_with_path(tree)
    for path, leaf in flat:
        if not isinstance(leaf, (Tensor, np.ndarray, np.generic, bool, int, float)):
            where = f" at {keystr(path)}" if path else ""
            raise TypeError(f"{fn}: the leaf{where} is a {type(leaf).__name__}, not an array; the leaves of what "
                            f"is placed on devices must be Tensors, numpy arrays or scalars")
    return flat, treedef


def _on(leaf: Any, device: str) -> Tensor:
    """`leaf` on one device, committed there (`tgfx/placement.py`): a Tensor copied there (if it is elsewhere), host
    data written there directly (on the default device its buffer is marked committed)."""
    if isinstance(leaf, Tensor):
        return leaf.to(device)
    out = Tensor(leaf, device=device)
    return out if canonical_device(device) != _default_device() else Tensor(mark(out.uop))


def _has_sharding(device: Any) -> bool:
    """Whether `device_put`'s `device` is a sharding or a pytree holding one (not a name or a device tuple)."""
    from tgfx import sharding as shardings
    if device is None or isinstance(device, str):
        return False
    if isinstance(device, (shardings.Sharding, shardings.PartitionSpec)):
        return True
    return any(isinstance(s, (shardings.Sharding, shardings.PartitionSpec)) for s in
               tree_flatten(device, is_leaf=lambda s: isinstance(s, (shardings.Sharding, shardings.PartitionSpec)))[0])


def shardings_per_leaf(shardings: Any, tree: Any) -> list[Any]:
    """One entry of `shardings` (a sharding, a PartitionSpec, None, or a pytree of them that is a prefix of `tree`'s
    structure) per leaf of `tree`: what `jit(in_shardings=)` and `lax.with_sharding_constraint` place each leaf by
    (None: the leaf as it is)."""
    from tgfx.sharding import PartitionSpec, Sharding
    is_leaf = lambda s: s is None or isinstance(s, (Sharding, PartitionSpec))  # noqa: E731
    return tree_flatten(tree_broadcast(shardings, tree, is_leaf=is_leaf), is_leaf=is_leaf)[0]


def put(leaf: Any, sharding: Any, what: str) -> Any:
    """`leaf` laid out as `sharding` says (None: left where it is, host data on the default device)."""
    from tgfx import sharding as shardings
    if sharding is None:
        return leaf if isinstance(leaf, Tensor) else Tensor(leaf, device=_default_device())
    shape = leaf.shape if isinstance(leaf, (Tensor, np.ndarray, np.generic)) else np.shape(leaf)
    devs, axis = shardings.layout(sharding, tuple(shape), what)
    if type(devs) is str:
        return _on(leaf, devs)
    return place(leaf if isinstance(leaf, (Tensor, np.ndarray, np.generic)) else Tensor(leaf), devs, axis)


def device_put(x: Any, device: str | Sequence[str] | None = None, axis: int | None = None) -> Any:
    """`x` (a Tensor, or any pytree of Tensors, numpy arrays and scalars) on `device`, in the same structure.

    device: one device ("CPU:1"): every leaf is copied there (a sharded Tensor is gathered); a device tuple:
        every leaf is `shard(leaf, device, axis)`; None: host data goes to the default device ("CPU:0") and Tensors
        stay where they are, as in JAX; a sharding (`tg.sharding.NamedSharding(mesh, P("data"))`,
        `SingleDeviceSharding`), or a pytree of them that is a prefix of `x`'s structure: each leaf laid out as its
        sharding says (`tgfx/sharding.py`), as `jax.device_put(x, sharding)`.

    >>> params = tg.device_put({"w": np.ones((2, 2)), "b": 0.0}, "CPU:1")   # {'b': Tensor on CPU:1, 'w': ...}
    >>> batch = tg.device_put(images, NamedSharding(mesh, P("data")))        # rows split over the mesh's devices

    Raises:
        TypeError: a leaf is not an array (the message names its pytree path).
        ValueError: `axis` is given with one device or a sharding; see `shard` for the device tuple's errors, and
            `NamedSharding.layout` for a sharding's (an axis that does not divide, a spec longer than the rank).
        NotImplementedError: a sharding whose layout tgfx's device tuples cannot hold (see `tgfx/sharding.py`).
    """
    from tgfx import sharding as shardings
    if isinstance(device, shardings.Sharding) and isinstance(x, (Tensor, np.ndarray)):   # (a step's batch)
        if axis is not None:
            raise ValueError(f"device_put: axis={axis} goes with a device tuple; a sharding says which axes it splits")
        return put(x, device, "device_put")
    if _has_sharding(device):
        if axis is not None:
            raise ValueError(f"device_put: axis={axis} goes with a device tuple; a sharding says which axes it splits")
        flat, _ = _leaves(x, "device_put")
        is_leaf = lambda s: isinstance(s, (shardings.Sharding, shardings.PartitionSpec))  # noqa: E731
        per_leaf = tree_flatten(tree_broadcast(device, x, is_leaf=is_leaf), is_leaf=is_leaf)[0]
        return tree_unflatten(tree_flatten(x)[1], [put(leaf, s, f"device_put{keystr(path)}")
                                                   for (path, leaf), s in zip(flat, per_leaf, strict=True)])
    flat, treedef = _leaves(x, "device_put")
    if isinstance(device, str) and axis is not None:
        raise ValueError(f"device_put: axis={axis} needs a device tuple, got the single device {device!r}")
    out = []
    for _, leaf in flat:
        if device is None:
            out.append(leaf if isinstance(leaf, Tensor) else Tensor(leaf, device=_default_device()))
        elif isinstance(device, str):
            out.append(_on(leaf, device))
        else:
            out.append(shard(leaf if isinstance(leaf, Tensor) else Tensor(leaf), device, axis))
    return tree_unflatten(treedef, out)


def _stacked(pieces: list[Tensor], devs: Devices) -> Tensor:
    """One Tensor whose row i (a new leading axis) is `pieces[i]`, held by device i."""
    rows = [p.reshape((1, *p.shape)) for p in pieces]
    return rows[0] if len(rows) == 1 else from_parts(rows, axis=0)


def device_put_replicated(x: Any, devices: Sequence[str]) -> Any:
    """A copy of `x` (a Tensor or any pytree of arrays) on each of `devices`, stacked along a new leading axis of
    size `len(devices)` and sharded along it: row i lives on `devices[i]` (`jax.device_put_replicated`'s layout,
    what per-device code such as pmap-style steps expects). `tree_map(lambda t: t[0], out)` gives `x` back.
    For one value replicated with its own shape, use `shard(x, devices)` (axis None).

    >>> w = tg.device_put_replicated(tnp.ones(3), ("CPU:0", "CPU:1"))
    >>> w.shape, tg.sharding(w)
    ((2, 3), (('CPU:0', 'CPU:1'), 0))

    Raises:
        ValueError: `devices` is empty, names a device twice or names an unknown device.
        TypeError: a leaf of `x` is not an array.
    """
    devs = _devices(devices, "device_put_replicated")
    flat, treedef = _leaves(x, "device_put_replicated")
    return tree_unflatten(treedef, [_stacked([_on(leaf, d) for d in devs], devs) for _, leaf in flat])


def device_put_sharded(shards: Sequence[Any], devices: Sequence[str]) -> Any:
    """`shards[i]` on `devices[i]`, stacked along a new leading axis (`jax.device_put_sharded`): every shard is a
    pytree of the same structure whose leaves have the same shapes and dtypes, and each leaf of the result has
    shape `(len(devices), *leaf.shape)`, sharded along axis 0.

    >>> xs = tg.device_put_sharded([np.zeros(4), np.ones(4)], ("CPU:0", "CPU:1"))
    >>> xs.shape, tg.parts(xs)[1].device
    ((2, 4), 'CPU:1')

    Raises:
        ValueError: `len(shards) != len(devices)`, the shards' structures, shapes or dtypes differ (the message
            names the shard and the pytree path), or a device name is unknown or repeated.
    """
    devs = _devices(devices, "device_put_sharded")
    if isinstance(shards, (str, bytes)) or not isinstance(shards, Sequence):
        raise TypeError(f"device_put_sharded: shards must be a sequence (one pytree per device), got "
                        f"{type(shards).__name__}")
    if len(shards) != len(devs):
        raise ValueError(f"device_put_sharded: len(shards) = {len(shards)} must equal len(devices) = {len(devs)} "
                         f"(one shard per device of {devs})")
    flat0, treedef = _leaves(shards[0], "device_put_sharded")
    columns: list[list[Tensor]] = [[] for _ in flat0]
    for i, (tree, d) in enumerate(zip(shards, devs, strict=True)):
        flat, td = _leaves(tree, "device_put_sharded")
        if td != treedef:
            raise ValueError(f"device_put_sharded: shard {i} has structure {td}, but shard 0 has {treedef}; every "
                             f"shard must be a pytree of the same structure")
        for k, (path, leaf) in enumerate(flat):
            t = _on(leaf, d)
            ref = columns[k][0] if columns[k] else t
            if (t.shape, t.dtype) != (ref.shape, ref.dtype):
                where = f" at {keystr(path)}" if path else ""
                raise ValueError(f"device_put_sharded: shard {i}{where} is {t.dtype.name}{list(t.shape)}, but shard 0 "
                                 f"is {ref.dtype.name}{list(ref.shape)}; shards must have equal shapes and dtypes")
            columns[k].append(t)
    return tree_unflatten(treedef, [_stacked(col, devs) for col in columns])


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
        elif type(axis) is tuple:   # blocks over a device grid: each device's ranges
            cells = [f"{d}  [{', '.join(f'{s.start}:{s.stop}' for s in piece_index(x.shape, axis, i, len(devs)))}]"
                     for i, d in enumerate(devs)]
            title = f"{head} {blocks.describe(axis, len(devs))} over {len(devs)} devices"
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


__all__ = ["shard", "device_put", "device_put_replicated", "device_put_sharded", "devices", "local_devices",
           "device_count", "local_device_count", "sharding", "parts", "from_parts", "psum", "pmax", "all_gather",
           "reduce_scatter", "visualize_sharding", "ShardingError"]
