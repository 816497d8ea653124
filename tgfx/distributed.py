"""`tg.distributed`: one program over several processes (hosts), on MPI (the optional extra `distributed`).

Launch N processes with an MPI launcher; each runs the same script (JAX's multi-controller model)::

    mpiexec -n 2 python train.py                             # two processes on this machine
    mpiexec -n 8 -hostfile hosts python train.py             # eight, over the hosts listed in `hosts`

and calls `tg.distributed.initialize()` first. Then `tg.devices()` lists the devices of every process, by global
name: device k of process p is `"CPU:k@p"`, except this process's own, which keep their plain names `"CPU:k"`
(`"CPU:k@<this process>"` is accepted as a synonym). So on process 0 of 2, `tg.devices()` is
`["CPU:0", "CPU:0@1"]`, on process 1 `["CPU:0@0", "CPU:0"]`: the same devices in the same (global) order.
`TGFX_CPU_DEVICES=n` gives every process n devices.

A Tensor sharded over a tuple that spans processes is global: its shape is the whole value's, and each process
holds the parts on its own devices (the others are placeholders). Build one from each process's batch with
`make_array_from_process_local_data`, or with `tg.shard(x, tg.devices(), axis)` from a value every process has.
Ops on global Tensors run per process on the local parts; a reduction over the sharded axis (a sum, a mean, a
gradient of replicated parameters) is an MPI all-reduce run by the process's network engine
(`tgfx/devices/network.py`), which overlaps with the local devices' kernels. `grad`, `jit` and `tg.lax` compose
as on one process: a jitted data-parallel step traces once per process and replays with no Python per
collective. Read a global Tensor with `process_allgather` (the whole value, on every process) or `local_parts`.

Failure: an uncaught exception in any process aborts them all (`MPI_Abort`, as `python -m mpi4py` does), a
collective that does not complete within `TGFX_WAIT_TIMEOUT` seconds (30) aborts them all, and processes that reach
different collectives (different shapes; a process at `process_allgather` while another is at
`make_array_from_process_local_data`) raise `DistributedMismatchError`, naming what each reached, before the
mismatched collective runs. A process that ends normally tells the others at exit, so one still waiting in a
collective raises that error naming it ("process 1 reached the end of its script"), instead of waiting.
"""
from __future__ import annotations

import atexit
import faulthandler
import os
import sys
import traceback
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import numpy as np

from tgfx.devices import network
from tgfx.devices.network import DistributedError, DistributedMismatchError, ProcessGroup
from tgfx.ir.ops import Ops
from tgfx.lowering.multi import multi
from tgfx.lowering.multi_process import remote_placeholder
from tgfx.tensor import Tensor, normalize_axis

# environment variables MPI launchers set in the processes they start (Hydra/MPICH, Open MPI, PMIx, Slurm)
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "MPI_LOCALRANKID")


def initialize(devices_per_process: int | None = None, *, initialization_timeout: float = 300) -> None:
    """Join the processes an MPI launcher started (`MPI.COMM_WORLD`); idempotent.

    devices_per_process: the CPU devices each process drives (default: `len(tg.local_devices())` before the call,
        see `tg.devices`); every process must give the same number.
    initialization_timeout: seconds to wait for every process the launcher started to join (MPI_Init; JAX's
        argument of the same name, the same default). Past it, this process prints "Timeout" and where it waited
        (`initialize`), and exits with status 1, which ends the others: a process that never calls `initialize`
        (or died before it) left the rest waiting for ever.

    Raises:
        DistributedError: mpi4py is not installed (`pip install 'tgfx[distributed]'`), the process was not started
            by an MPI launcher, the MPI cannot be called from several threads, or the processes disagree on the
            number of devices.
    """
    if network.group().mpi is not None:
        return
    # MPI_Init runs on this import and holds the GIL until every launched process has joined, so no Python thread
    # can end a wait for one that never comes: faulthandler's watchdog (a C thread) does
    faulthandler.dump_traceback_later(initialization_timeout, exit=True)
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(f"tg.distributed.initialize() needs mpi4py and an MPI ({e}): pip install "
                               f"'tgfx[distributed]' (mpi4py and MPICH from PyPI), or mpi4py built against your "
                               f"cluster's MPI") from None
    finally:
        faulthandler.cancel_dump_traceback_later()
    world = MPI.COMM_WORLD
    if world.Get_size() == 1 and not any(v in os.environ for v in _LAUNCHER_VARS):
        raise DistributedError("tg.distributed.initialize(): this process was not started by an MPI launcher; run "
                               "the script with `mpiexec -n N python script.py` (or srun under Slurm)")
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise DistributedError(f"tg.distributed.initialize(): the MPI library gives thread level "
                               f"{MPI.Query_thread()}, but tgfx's network engine calls MPI from its own thread and "
                               f"needs MPI_THREAD_MULTIPLE; use an MPI built with thread support (MPICH, Open MPI)")
    if devices_per_process is None:
        from tgfx.transforms.shard import devices as local_list
        devices_per_process = len(local_list())
    ctl = world.Dup()
    counts = ctl.allgather(int(devices_per_process))
    if len(set(counts)) != 1:
        raise DistributedError(f"tg.distributed.initialize(): the processes drive different numbers of devices "
                               f"{counts}; give every process the same TGFX_CPU_DEVICES")
    network.set_group(ProcessGroup(world.Get_rank(), world.Get_size(), int(devices_per_process), world.Dup(), ctl,
                                   MPI))
    if world.Get_size() > 1:
        _abort_on_uncaught_exception()
        atexit.register(_announce_end)


def _abort_on_uncaught_exception() -> None:
    """An uncaught exception in one process ends every process (MPI_Abort), instead of leaving the others blocked
    in a collective the dead process will never reach."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        try:
            previous(kind, value, tb)
        except Exception:  # noqa: BLE001 -- the traceback is printed either way
            traceback.print_exception(kind, value, tb)
        g = network.group()
        network.abort_every_process(f"tgfx process {g.index} of {g.count} raised {kind.__name__}")
    sys.excepthook = hook


def _announce_end() -> None:
    """At a normal exit, once this process's network engine has run what it was given: tell the others (a process
    still waiting in a collective fails naming this one, instead of hanging)."""
    from tgfx.lowering import multi_process
    if multi_process._net is not None:
        try:
            multi_process._net.synchronize()
        except Exception:  # noqa: BLE001 -- a collective that failed already said so; the others still hear of the end
            pass
    network.announce_end()


def is_initialized() -> bool:
    """Whether `initialize` ran in this process."""
    return network.group().mpi is not None


def process_index() -> int:
    """This process's index among the processes (MPI rank), 0 in a single process (`jax.process_index`)."""
    return network.group().index


def process_count() -> int:
    """The number of processes (MPI size), 1 without `initialize` (`jax.process_count`)."""
    return network.group().count


def _device_tuple(devices: Sequence[str], fn: str) -> tuple[str, ...]:
    from tgfx.transforms.shard import _devices
    return _devices(devices, fn)


def _layout_of(sharding: Any, ndim: int, fn: str) -> tuple[tuple[str, ...], Any]:
    """The device tuple and split axis a JAX sharding gives an array of rank `ndim` (size 0 divides any way)."""
    from tgfx.sharding import layout
    devs, axis = layout(sharding, (0,) * ndim, fn)
    return ((devs,) if isinstance(devs, str) else devs), axis


def make_array_from_process_local_data(devices: Any, local_data: Any, axis: Any = 0, *,
                                       global_shape: Sequence[int] | None = None) -> Tensor:
    """The global Tensor whose parts on this process's devices come from `local_data` (JAX's name); every process
    calls it with its own data of the same shape and dtype.

    devices: the device tuple, spanning processes (e.g. `tg.devices()`), or a sharding over them, as JAX takes it
        (`NamedSharding(mesh, P("data"))`, which says the split axis; then the third argument is JAX's optional
        `global_shape`, as `global_shape=` is: checked against the shape the processes' data make).
    local_data: this process's rows: split evenly along `axis` over this process's devices in the tuple, in their
        order; the global shape along `axis` is that of `local_data` times the processes' share. With
        `axis=None` the value is replicated: every process passes the same whole value.

    >>> batch = tg.make_array_from_process_local_data(tg.devices(), x_local)   # x_local: (32, 64) per process
    >>> batch.shape                                                           # (64, 64) with 2 processes
    >>> batch = tg.make_array_from_process_local_data(NamedSharding(mesh, P("data")), x_local, (64, 64))

    Raises:
        ValueError: this process holds no device of the tuple, `local_data` does not split evenly, or
            `global_shape` is not the shape the processes' data make.
        DistributedMismatchError: the processes pass different shapes or dtypes (compared across processes, before
            anything runs; the message names each process's), or one is at another collective.
    """
    from tgfx.sharding import Sharding
    x = local_data if isinstance(local_data, Tensor) else Tensor(np.asarray(local_data))
    if isinstance(devices, Sharding):
        if isinstance(axis, Sequence):   # (JAX's third argument)
            global_shape, axis = axis, 0
        elif axis != 0:
            raise ValueError(f"make_array_from_process_local_data: axis={axis!r} goes with a device tuple; "
                             f"{devices!r} says which axis it splits")
        sharding = devices
        devices, axis = _layout_of(sharding, x.ndim, "make_array_from_process_local_data")
        if type(axis) is tuple:
            raise NotImplementedError(f"make_array_from_process_local_data: {sharding!r} splits several array axes; "
                                      f"across processes tgfx splits one axis (P('data') on a 1-D mesh of "
                                      f"tg.devices()) or none (P())")
    devs = _device_tuple(devices, "make_array_from_process_local_data")
    out = _from_process_local(devs, x, axis)
    if global_shape is not None and tuple(out.shape) != tuple(global_shape):
        raise ValueError(f"make_array_from_process_local_data: global_shape={global_shape}, but the processes' local "
                         f"data of shape {x.shape} make a global array of shape {out.shape}")
    return out


def _from_process_local(devs: tuple[str, ...], x: Tensor, axis: int | None) -> Tensor:
    mine = [i for i, d in enumerate(devs) if not network.is_remote(d)]
    if axis is not None:
        axis = normalize_axis(axis, x.ndim, "make_array_from_process_local_data")
    g = network.group()
    if g.ctl is not None:   # (the shapes in the checked record: one collective a batch)
        network.host_agree(f"make_array_from_process_local_data of {x.dtype.name}{list(x.shape)} for {len(mine)} "
                           f"device(s)")
    if not mine:
        raise ValueError(f"make_array_from_process_local_data: process {g.index} holds none of the devices {devs}")
    if axis is not None and x.shape[axis] % len(mine):
        raise ValueError(f"make_array_from_process_local_data: axis {axis} of the local data of shape {x.shape} does "
                         f"not split evenly over this process's {len(mine)} devices")
    size = x.shape[axis] // len(mine) if axis is not None else 0
    piece_shape = x.shape if axis is None else tuple(size if a == axis else s for a, s in enumerate(x.shape))
    parts = []
    for i, d in enumerate(devs):
        if network.is_remote(d):
            parts.append(remote_placeholder(d, piece_shape, x.dtype))
            continue
        k = mine.index(i)
        piece = x if axis is None else x[tuple(slice(k * size, (k + 1) * size) if a == axis else slice(None)
                                                for a in range(x.ndim))]
        parts.append(piece.to(d).realize().uop)
    return Tensor(multi(parts, axis))


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Any, arrays: Sequence[Any]) -> Tensor:
    """The global Tensor of `shape` laid out as `sharding` says, from this process's pieces (JAX's name): `arrays`
    holds one one-device Tensor per device of this process in the sharding's device order (`local_parts` gives them
    back), each of the piece's shape, on that device.

    >>> parts = [tg.device_put(piece, d) for piece, d in zip(np.split(x_local, n_local), tg.local_devices())]
    >>> x = tg.make_array_from_single_device_arrays((64, 8), NamedSharding(mesh, P("data")), parts)

    Raises:
        ValueError: not one array per local device, a piece of another shape or dtype, or on another device.
    """
    from tgfx.sharding import layout
    shape = tuple(int(s) for s in shape)
    devs, axis = layout(sharding, shape, "make_array_from_single_device_arrays")
    if type(axis) is tuple:
        raise NotImplementedError(f"make_array_from_single_device_arrays: {sharding!r} splits several array axes; "
                                  f"across processes tgfx splits one axis or none")
    if isinstance(devs, str):
        devs = (devs,)
    mine = [d for d in devs if not network.is_remote(d)]
    pieces = [a if isinstance(a, Tensor) else Tensor(np.asarray(a)) for a in arrays]
    if len(pieces) != len(mine):
        raise ValueError(f"make_array_from_single_device_arrays: {len(pieces)} arrays for this process's "
                         f"{len(mine)} devices {mine} of the sharding; pass one per device, in that order")
    piece_shape = shape if axis is None else tuple(n // len(devs) if a == axis else n for a, n in enumerate(shape))
    dtype = pieces[0].dtype if pieces else None
    for i, (p, d) in enumerate(zip(pieces, mine, strict=True)):
        if p.shape != piece_shape or p.dtype != dtype or p.device != d:
            raise ValueError(f"make_array_from_single_device_arrays: arrays[{i}] is {p.dtype.name}{list(p.shape)} on "
                             f"{p.device}, but the piece of a {list(shape)} array for {d} is "
                             f"{dtype.name}{list(piece_shape)} on {d}")
    if len(devs) == 1:
        return pieces[0]
    it = iter(pieces)
    parts = [remote_placeholder(d, piece_shape, dtype) if network.is_remote(d) else next(it).realize().uop
             for d in devs]
    return Tensor(multi(parts, axis))


def local_parts(x: Tensor) -> list[Tensor]:
    """The parts of global Tensor `x` that this process holds, in device order (one-device Tensors)."""
    u = x.realize().uop
    if u.op is not Ops.MULTI:
        return [x]
    return [Tensor(p) for p in u.src if not network.is_remote(p.device)]


def _spans(x: Any) -> bool:
    return isinstance(x, Tensor) and network.spans_processes(x.device if type(x.device) is tuple else (x.device,))


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Every leaf of `in_tree` gathered from every process, as numpy arrays, on every process (every process calls
    it; `jax.experimental.multihost_utils.process_allgather`). A global Tensor (one spanning the processes) gives
    its whole value; a process's own value (numpy, a scalar, a Tensor on its devices) gives every process's,
    stacked along a new leading axis in process order, or with `tiled=True` concatenated along axis 0.

    >>> tg.distributed.process_allgather(params)                 # global, replicated: the value
    >>> tg.distributed.process_allgather(np.float32(local_loss))  # shape (process_count(),)
    """
    from tgfx.tree import tree_flatten, tree_unflatten
    leaves, treedef = tree_flatten(in_tree)
    if not leaves:
        return in_tree
    g = network.group()
    mine: list[Any] = []
    for leaf in leaves:
        if _spans(leaf):
            u = leaf.realize().uop
            # (replicated: the first part is the value, sent by the process that holds it)
            held = range(1 if u.arg is None else len(u.src))
            mine.append({i: Tensor(u.src[i]).numpy() for i in held if not network.is_remote(u.src[i].device)})
        else:
            mine.append(np.asarray(leaf.numpy() if isinstance(leaf, Tensor) else leaf))
    every = network.host_allgather("process_allgather", mine) if g.ctl is not None else [mine]
    out = []
    for k, leaf in enumerate(leaves):
        if _spans(leaf):
            u = leaf.uop
            parts: dict[int, np.ndarray] = {}
            for theirs in every:
                parts.update(theirs[k])
            out.append(parts[0] if u.arg is None else
                       np.concatenate([parts[i] for i in range(len(u.src))], axis=u.arg))
        else:
            values = [theirs[k] for theirs in every]
            out.append(np.concatenate([np.atleast_1d(v) for v in values]) if tiled else np.stack(values))
    return tree_unflatten(treedef, out)


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """Process 0's `in_tree` (a pytree of arrays) on every process, its leaves as Tensors on this process's default
    device (`jax.experimental.multihost_utils.broadcast_one_to_all`); every process calls it with a tree of the same
    structure. `is_source`: whether this process is the one whose values are sent (default: process 0); exactly one
    process may be.

    >>> seed = tg.distributed.broadcast_one_to_all(np.int32(time.time_ns() % 2**31))   # one seed for all

    Raises:
        ValueError: no process or several are the source.
    """
    from tgfx.tree import tree_flatten, tree_unflatten
    g = network.group()
    source = g.index == 0 if is_source is None else bool(is_source)
    leaves, treedef = tree_flatten(in_tree)
    host = [np.asarray(leaf.numpy() if isinstance(leaf, Tensor) else leaf) if source else None for leaf in leaves]
    if g.ctl is not None:
        every = network.host_allgather("broadcast_one_to_all", (source, host if source else None))
        sources = [p for p, (s, _) in enumerate(every) if s]
        if len(sources) != 1:
            raise ValueError(f"broadcast_one_to_all: processes {sources} pass is_source=True; exactly one process "
                             f"must be the source")
        host = every[sources[0]][1]
    elif not source:
        raise ValueError("broadcast_one_to_all: is_source=False in the only process; exactly one process must be the "
                         "source")
    return tree_unflatten(treedef, [Tensor(h) for h in host])


def sync_global_devices(name: str) -> None:
    """Wait until every process has reached this call, with the same `name`, and this process's devices have run
    everything submitted before it (`jax.experimental.multihost_utils.sync_global_devices`): e.g. after process 0
    writes a checkpoint, before the others read it.

    Raises:
        DistributedMismatchError: a process reached another call (`sync_global_devices` of another name, another
            collective, or the end of its script), naming what each reached.
    """
    from tgfx.devices import opened_devices
    for dev in opened_devices():
        dev.synchronize()
    if network.group().ctl is not None:
        network.host_agree(f"sync_global_devices({name!r})")


__all__ = ["initialize", "is_initialized", "process_index", "process_count", "make_array_from_process_local_data",
           "make_array_from_single_device_arrays", "local_parts", "process_allgather", "broadcast_one_to_all",
           "sync_global_devices", "DistributedError", "DistributedMismatchError"]
