"""`tg.sharding`: JAX's spelling of a layout -- `Mesh`, `PartitionSpec` (`P`), `NamedSharding`, `SingleDeviceSharding`
-- mapped onto tgfx's own: a device tuple and the axis split across it (`tg.shard(x, devices, axis)`, SPEC §6), or
blocks over the grid of a mesh's devices (`tgfx/ir/blocks.py`).

>>> import numpy as np, tgfx as tg
>>> from tgfx.sharding import Mesh, NamedSharding, PartitionSpec as P
>>> mesh = Mesh(np.array(tg.devices()), ("data",))          # with TGFX_CPU_DEVICES=2: CPU:0 and CPU:1
>>> x = tg.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("data", None)))
>>> tg.sharding(x)                                         # the layout it maps to
(('CPU:0', 'CPU:1'), 0)
>>> x.sharding
NamedSharding(mesh=Mesh('data': 2), spec=P('data', None))

A mesh axis named at position i of a spec splits array axis i over that mesh axis's devices; `None` (or a spec shorter
than the array's rank) leaves an axis whole. A spec that splits one array axis over every mesh axis longer than 1 (a
1-D mesh, or `P(("data", "model"))` on a 2-D one) is a device tuple in the order the spec names the mesh axes and that
axis; one that splits nothing is replicated. Any other spec -- dp x tp's `P("data", None)` (rows replicated over
"model"), `P(None, "model")`, `P("data", "model")` -- is a block layout over the mesh's devices in row-major order:
one `(ways, stride)` per array axis, device i holding block `(i // stride) % ways` along it. An array axis split over
several mesh axes needs them to be neighbours in the mesh's order (`P(("a", "c"))` on an ("a", "b", "c") mesh with b
longer than 1 is a NotImplementedError that names the spec).

>>> mesh = Mesh(np.array(tg.devices()).reshape(2, 2), ("data", "model"))   # with TGFX_CPU_DEVICES=4
>>> tg.sharding(tg.device_put(np.ones((8, 4)), NamedSharding(mesh, P("data", None))))
(('CPU:0', 'CPU:1', 'CPU:2', 'CPU:3'), ((2, 2), (1, 1)))

`tg.sharding(x)` itself, called, is still the layout of `x`: `(devices, axis)` (axis an int, None, or a block
layout), None for a one-device Tensor.
"""
from __future__ import annotations

import contextlib
import math
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgfx.devices import canonical_device, network
from tgfx.devices import list_devices as _list_devices

Layout = tuple[str | tuple[str, ...], int | None]   # (a device, None) or (a device tuple, the axis split or None)


class PartitionSpec(tuple):
    """How each array axis is split over mesh axes (`jax.sharding.PartitionSpec`, alias `P`): entry i is None (axis i
    whole), a mesh axis name, or a tuple of names (split over their devices together, the first name's outermost).
    Axes past the spec's length are whole: `P()` replicates, `P("data")` splits the leading axis."""

    def __new__(cls, *parts: Any) -> PartitionSpec:
        for p in parts:
            ok = p is None or isinstance(p, str) or (isinstance(p, tuple) and all(isinstance(n, str) for n in p))
            if not ok:
                raise TypeError(f"PartitionSpec: an entry must be None, a mesh axis name or a tuple of names, got "
                                f"{p!r} in P{tuple(parts)!r}")
        return super().__new__(cls, parts)

    def __repr__(self) -> str:
        return f"P({', '.join(map(repr, self))})"

    def names(self, i: int) -> tuple[str, ...]:
        """The mesh axes array axis i is split over (none past the spec's end)."""
        p = self[i] if i < len(self) else None
        return () if p is None else (p,) if isinstance(p, str) else p


P = PartitionSpec


class Mesh:
    """Devices in an n-dimensional grid with a name per grid axis (`jax.sharding.Mesh`). `devices` is an array (or
    nested lists) of device names, e.g. `np.array(tg.devices())` or `np.array(tg.devices()).reshape(2, 2)`.

    Usable as a context manager (`with mesh:`), which makes it the mesh of a bare `PartitionSpec` given to
    `tg.lax.with_sharding_constraint` or of a `shard_map` without one.

    Raises:
        ValueError: the number of names is not the grid's rank, a name repeats, or a device is unknown or repeated.
    """

    def __init__(self, devices: Any, axis_names: str | Sequence[str], *, axis_types: Any = None) -> None:
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        grid = np.asarray(devices, dtype=object)
        if grid.ndim != len(names):
            raise ValueError(f"Mesh: devices of shape {grid.shape} need {grid.ndim} axis name(s), got {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"Mesh: axis names {names} repeat a name")
        flat = [canonical_device(getattr(d, "name", d)) for d in grid.flat]
        if len(set(flat)) != len(flat):
            raise ValueError(f"Mesh: devices {flat} name a device more than once")
        self.devices = np.array(flat, dtype=object).reshape(grid.shape)
        self.devices.flags.writeable = False
        self.axis_names = names
        self.axis_types = axis_types

    @property
    def shape(self) -> OrderedDict[str, int]:
        return OrderedDict(zip(self.axis_names, self.devices.shape, strict=True))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return int(self.devices.size)

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: int(d.split(":")[1].split("@")[0]), otypes=[int])(self.devices)

    def _key(self) -> tuple:
        return (tuple(self.devices.flat), self.devices.shape, self.axis_names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Mesh({', '.join(f'{n!r}: {s}' for n, s in self.shape.items())})"

    def __enter__(self) -> Mesh:
        _context().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _context().pop()


_local = threading.local()


def _context() -> list[Mesh]:
    if not hasattr(_local, "meshes"):
        _local.meshes = []
    return _local.meshes


def get_mesh() -> Mesh | None:
    """The mesh of the innermost `with mesh:` (or `set_mesh`) in this thread, None outside one."""
    stack = _context()
    return stack[-1] if stack else None


@contextlib.contextmanager
def set_mesh(mesh: Mesh) -> Iterator[Mesh]:
    """`with tg.sharding.set_mesh(mesh):` -- the same as `with mesh:`."""
    with mesh:
        yield mesh


use_mesh = set_mesh


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], axis_types: Any = None, *,
              devices: Sequence[str] | None = None) -> Mesh:
    """A mesh of the first `prod(axis_shapes)` devices of `devices` (default `tg.devices()`), laid out row-major
    (`jax.make_mesh`).

    >>> tg.make_mesh((2,), ("data",))     # with TGFX_CPU_DEVICES=2
    Mesh('data': 2)

    Raises:
        ValueError: fewer devices than the mesh needs (set TGFX_CPU_DEVICES, or XLA_FLAGS as for JAX).
    """
    shape = tuple(int(s) for s in axis_shapes)
    need = math.prod(shape)
    have = list(_list_devices() if devices is None else devices)
    if len(have) < need:
        raise ValueError(f"make_mesh: a mesh of shape {shape} needs {need} devices, but {len(have)} are listed "
                         f"({have}); set TGFX_CPU_DEVICES={need} (or XLA_FLAGS=--xla_force_host_platform_device_count="
                         f"{need}) before the first tg.devices(), or pass devices=")
    return Mesh(np.array(have[:need], dtype=object).reshape(shape), axis_names, axis_types=axis_types)


class Sharding:
    """What every sharding answers (`jax.sharding.Sharding`); subclasses give `layout(shape)`."""

    def layout(self, shape: tuple[int, ...], what: str = "sharding") -> Layout:
        raise NotImplementedError

    @property
    def device_set(self) -> set[str]:
        raise NotImplementedError

    @property
    def num_devices(self) -> int:
        return len(self.device_set)

    @property
    def addressable_devices(self) -> set[str]:
        """The devices of this process (under `tg.distributed`, the others' are not addressable from it)."""
        return {d for d in self.device_set if not network.is_remote(d)}

    @property
    def is_fully_addressable(self) -> bool:
        return self.addressable_devices == self.device_set

    @property
    def is_fully_replicated(self) -> bool:
        raise NotImplementedError

    def shard_shape(self, global_shape: Sequence[int]) -> tuple[int, ...]:
        """The shape of each device's piece of an array of `global_shape`."""
        shape = tuple(global_shape)
        from tgfx.ir import blocks
        devs, axis = self.layout(shape, "shard_shape")
        if axis is None:
            return shape
        return blocks.part_shape(shape, blocks.splits(axis, len(shape), len(devs)))

    def is_equivalent_to(self, other: Sharding, ndim: int) -> bool:
        """Whether both lay out an array of rank `ndim` the same way (on the same devices, split alike)."""
        shape = (0,) * ndim   # (size 0 divides by anything: only the layout is compared)
        return self.layout(shape) == other.layout(shape)


class SingleDeviceSharding(Sharding):
    """The whole array on one device (`jax.sharding.SingleDeviceSharding`)."""

    def __init__(self, device: str, *, memory_kind: Any = None) -> None:
        self.device = canonical_device(getattr(device, "name", device))

    def layout(self, shape: tuple[int, ...], what: str = "sharding") -> Layout:
        return self.device, None

    @property
    def device_set(self) -> set[str]:
        return {self.device}

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SingleDeviceSharding) and other.device == self.device

    def __hash__(self) -> int:
        return hash(("single", self.device))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self.device!r})"


class NamedSharding(Sharding):
    """An array laid out over `mesh` as `spec` says (`jax.sharding.NamedSharding`); see the module's docstring for
    the layouts tgfx maps it onto.

    Raises:
        ValueError: the spec names an axis the mesh lacks, or names a mesh axis twice.
    """

    def __init__(self, mesh: Mesh, spec: PartitionSpec | None = None, *, memory_kind: Any = None) -> None:
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding: mesh must be a tg.sharding.Mesh, got {type(mesh).__name__}")
        spec = PartitionSpec() if spec is None else spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
        used = [n for i in range(len(spec)) for n in spec.names(i)]
        for n in used:
            if n not in mesh.axis_names:
                raise ValueError(f"NamedSharding: mesh axis {n!r} of {spec!r} is not found in the mesh {mesh!r} "
                                 f"(its axes: {mesh.axis_names})")
        if len(set(used)) != len(used):
            raise ValueError(f"NamedSharding: {spec!r} names a mesh axis more than once; each mesh axis splits at "
                             f"most one array axis")
        self.mesh, self.spec = mesh, spec
        self._layouts: dict[tuple[int, ...], Layout] = {}   # by shape: a step's batch asks every step

    def layout(self, shape: tuple[int, ...], what: str = "sharding") -> Layout:
        """`(devices, axis)`, tgfx's layout of an array of `shape` under this sharding."""
        shape = tuple(shape)
        if (hit := self._layouts.get(shape)) is None:
            hit = self._layouts[shape] = self._layout(shape, what)
        return hit

    def _layout(self, shape: tuple[int, ...], what: str) -> Layout:
        mesh, spec = self.mesh, self.spec
        if len(spec) > len(shape):
            raise ValueError(f"{what}: {self!r} is only valid for values of rank at least {len(spec)}, but was "
                             f"applied to a value of rank {len(shape)} (shape {shape})")
        split = []
        for i, n in enumerate(shape):
            ways = math.prod(mesh.shape[a] for a in spec.names(i))
            if n % ways:
                raise ValueError(f"{what}: {self!r} splits array axis {i} {ways} ways, but it has size {n} (the "
                                 f"full shape is {shape}); the axis must divide evenly over the mesh {mesh!r}")
            if ways > 1:
                split.append(i)
        flat = tuple(mesh.devices.flat)
        if not split:
            return (flat[0], None) if len(flat) == 1 else (flat, None)
        if len(split) == 1:
            axis = split[0]
            names = [a for a in spec.names(axis) if mesh.shape[a] > 1]
            if not [a for a in mesh.axis_names if mesh.shape[a] > 1 and a not in names]:
                # split over every mesh axis longer than 1: one distinct piece per device, the devices in the order
                # the spec names the mesh axes
                order = [mesh.axis_names.index(a) for a in names] + \
                    [k for k, a in enumerate(mesh.axis_names) if a not in names]
                return tuple(np.transpose(mesh.devices, order).flat), axis
        return flat, self._grid(shape, what)

    def _grid(self, shape: tuple[int, ...], what: str) -> Any:
        """The block layout (`tgfx/ir/blocks.py`) over the mesh's devices in row-major order: array axis i split over
        mesh axes that follow one another in the mesh (the spec's first name outermost) reads those digits of the
        device index."""
        from tgfx.ir import blocks
        mesh, spec = self.mesh, self.spec
        sizes = mesh.axis_sizes
        out = []
        for i in range(len(shape)):
            ks = [mesh.axis_names.index(a) for a in spec.names(i) if mesh.shape[a] > 1]
            if not ks:
                out.append(blocks.WHOLE)
                continue
            between = [k for k in range(ks[0], ks[-1] + 1) if sizes[k] > 1]
            if between != ks:
                raise NotImplementedError(
                    f"{what}: {self!r} splits array axis {i} over mesh axes {spec.names(i)}, which are not "
                    f"neighbours in the mesh's order {mesh.axis_names} (outermost first); tgfx lays a block out over "
                    f"mesh axes that follow one another. Name them in the mesh's order, or reorder the mesh")
            out.append((math.prod(sizes[k] for k in ks), math.prod(sizes[ks[-1] + 1:])))
        return blocks.canonical(tuple(out), mesh.size)

    @property
    def device_set(self) -> set[str]:
        return set(self.mesh.devices.flat)

    @property
    def is_fully_replicated(self) -> bool:
        return all(self.mesh.shape[a] == 1 for i in range(len(self.spec)) for a in self.spec.names(i))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedSharding) and (self.mesh, self.spec) == (other.mesh, other.spec)

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


def layout(sharding: Sharding | PartitionSpec, shape: tuple[int, ...], what: str) -> Layout:
    """tgfx's layout of an array of `shape` placed by `sharding` (a bare PartitionSpec: over the mesh of `with mesh:`).

    Raises:
        TypeError: `sharding` is not a Sharding (or a PartitionSpec).
        ValueError: a PartitionSpec outside `with mesh:`; see `NamedSharding.layout`.
    """
    if isinstance(sharding, PartitionSpec):
        mesh = get_mesh()
        if mesh is None:
            raise ValueError(f"{what}: a bare {sharding!r} needs a mesh: pass NamedSharding(mesh, {sharding!r}), or "
                             f"call inside `with mesh:`")
        sharding = NamedSharding(mesh, sharding)
    if not isinstance(sharding, Sharding):
        raise TypeError(f"{what}: expected a sharding (NamedSharding, SingleDeviceSharding or a PartitionSpec under "
                        f"`with mesh:`), got {type(sharding).__name__} {sharding!r}")
    out = sharding.layout(shape, what)
    if type(out[0]) is tuple:
        _placed[(out[0], out[1], len(shape))] = sharding
    return out


# the sharding each layout was last placed with, by (devices, axis, rank): `x.sharding` gives back what the user wrote
_placed: dict[tuple, Sharding] = {}


def sharding_of(x: Any) -> Sharding:
    """`x.sharding`: the sharding `x` was placed with (the latest one that gives its layout), else a SingleDevice-
    Sharding for a one-device Tensor, else a NamedSharding over a 1-D mesh of its devices named "devices"."""
    from tgfx.transforms.shard import sharding as layout_of
    lay = layout_of(x)
    if lay is None:
        return SingleDeviceSharding(x.device)
    devs, axis = lay
    if (hit := _placed.get((devs, axis, x.ndim))) is not None:
        return hit
    if type(axis) is tuple:
        return _grid_sharding(devs, axis)
    spec = PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), "devices",
                                                               *([None] * (x.ndim - axis - 1)))
    return NamedSharding(Mesh(np.array(devs, dtype=object), ("devices",)), spec)


def _grid_sharding(devs: tuple[str, ...], bl: tuple) -> NamedSharding:
    """A NamedSharding that gives block layout `bl` over `devs`: over a mesh a sharding was placed with on these
    devices, when each split reads a run of its axes, else over a mesh made of the splits' digits."""
    meshes = {s.mesh for s in _placed.values() if isinstance(s, NamedSharding) and tuple(s.mesh.devices.flat) == devs}
    for mesh in sorted(meshes, key=repr):
        sizes = mesh.axis_sizes
        runs: dict[tuple[int, int], tuple[str, ...]] = {}   # (ways, stride) -> the shortest run of axes giving it
        for i in range(len(sizes)):
            for j in range(i + 1, len(sizes) + 1):
                runs.setdefault((math.prod(sizes[i:j]), math.prod(sizes[j:])), mesh.axis_names[i:j])
        if all(w == 1 or (w, st) in runs for w, st in bl):
            entries = [None if w == 1 else runs[(w, st)] for w, st in bl]
            spec = PartitionSpec(*(e if e is None or len(e) > 1 else e[0] for e in entries))
            return NamedSharding(mesh, spec)
    shape, names, named, at = [], [], {}, len(devs)
    for st, w in sorted({(st, w) for w, st in bl if w > 1}, reverse=True):   # the digits, outermost first
        if at // (st * w) > 1:   # digits no split reads: replicas
            shape.append(at // (st * w))
            names.append(f"replica{len(names)}")
        named[(w, st)] = f"devices{len(names)}"
        shape.append(w)
        names.append(named[(w, st)])
        at = st
    if at > 1:
        shape.append(at)
        names.append(f"replica{len(names)}")
    mesh = Mesh(np.array(devs, dtype=object).reshape(shape), tuple(names))
    return NamedSharding(mesh, PartitionSpec(*(None if w == 1 else named[(w, st)] for w, st in bl)))


@dataclass(frozen=True)
class Shard:
    """One device's piece of an array (`jax.Shard`): where it lives, which slice of the whole it is, and its data."""
    device: str
    index: tuple[slice, ...]
    replica_id: int
    data: Any


def addressable_shards(x: Any) -> list[Shard]:
    """`x.addressable_shards`: one `Shard` per device of this process that `x` lies on (under `tg.distributed`,
    the other processes' pieces are theirs to read)."""
    from tgfx.transforms.shard import parts
    from tgfx.transforms.shard import sharding as layout_of
    lay = layout_of(x)
    whole = tuple(slice(None) for _ in x.shape)
    if lay is None:
        return [Shard(x.device, whole, 0, x)]
    from tgfx.ir import blocks
    devs, axis = lay
    bl = blocks.splits(axis, x.ndim, len(devs))
    size = blocks.part_shape(x.shape, bl)
    out, seen = [], {}
    for i, (d, p) in enumerate(zip(devs, parts(x), strict=True)):
        b = blocks.block_of(bl, i)
        index = tuple(slice(None) if w == 1 else slice(k * n, (k + 1) * n)
                      for (w, _), k, n in zip(bl, b, size, strict=True))
        if not network.is_remote(d):
            out.append(Shard(d, index, seen.get(b, 0), p))
        seen[b] = seen.get(b, 0) + 1
    return out


class _CallableModule(types.ModuleType):
    """This module, callable as `tg.sharding(x)` (the layout `(devices, axis)` of `x`, None on one device), which it
    was before it held JAX's sharding classes: one name for both, as `tg.devices` is."""

    def __call__(self, x: Any) -> tuple[tuple[str, ...], int | None] | None:
        from tgfx.transforms.shard import sharding as layout_of
        return layout_of(x)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["Mesh", "PartitionSpec", "P", "NamedSharding", "SingleDeviceSharding", "Sharding", "Shard", "make_mesh",
           "get_mesh", "set_mesh", "use_mesh", "layout", "sharding_of", "addressable_shards"]
