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


def initialize(devices_per_process: int | None = None) -> None:
    """Join the processes an MPI launcher started (`MPI.COMM_WORLD`); idempotent.

    devices_per_process: the CPU devices each process drives (default: `len(tg.local_devices())` before the call,
        see `tg.devices`); every process must give the same number.

    Raises:
        DistributedError: mpi4py is not installed (`pip install 'tgfx[distributed]'`), the process was not started
            by an MPI launcher, the MPI cannot be called from several threads, or the processes disagree on the
            number of devices.
    """
    if network.group().mpi is not None:
        return
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(f"tg.distributed.initialize() needs mpi4py and an MPI ({e}): pip install "
                               f"'tgfx[distributed]' (mpi4py and MPICH from PyPI), or mpi4py built against your "
                               f"cluster's MPI") from None
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


def make_array_from_process_local_data(devices: Sequence[str], local_data: Any, axis: int | None = 0) -> Tensor:
    """The global Tensor whose parts on this process's devices come from `local_data` (JAX's name); every process
    calls it with its own data of the same shape and dtype.

    devices: the device tuple, spanning processes (e.g. `tg.devices()`).
    local_data: this process's rows: split evenly along `axis` over this process's devices in the tuple, in their
        order; the global shape along `axis` is that of `local_data` times the processes' share. With
        `axis=None` the value is replicated: every process passes the same whole value.

    >>> batch = tg.make_array_from_process_local_data(tg.devices(), x_local)   # x_local: (32, 64) per process
    >>> batch.shape                                                           # (64, 64) with 2 processes

    Raises:
        ValueError: this process holds no device of the tuple, `local_data` does not split evenly, or the processes
            pass different shapes or dtypes (compared across processes, before anything runs).
    """
    devs = _device_tuple(devices, "make_array_from_process_local_data")
    x = local_data if isinstance(local_data, Tensor) else Tensor(np.asarray(local_data))
    mine = [i for i, d in enumerate(devs) if not network.is_remote(d)]
    if axis is not None:
        axis = normalize_axis(axis, x.ndim, "make_array_from_process_local_data")
    g = network.group()
    if g.ctl is not None:
        seen = network.host_allgather("make_array_from_process_local_data", (tuple(x.shape), x.dtype.name,
                                                                               len(mine)))
        if len(set(seen)) != 1:
            raise ValueError(f"make_array_from_process_local_data: the processes pass different local data (shape, "
                             f"dtype, local devices) {seen}; every process must pass the same shape and dtype, for "
                             f"the same number of its devices")
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


def local_parts(x: Tensor) -> list[Tensor]:
    """The parts of global Tensor `x` that this process holds, in device order (one-device Tensors)."""
    u = x.realize().uop
    if u.op is not Ops.MULTI:
        return [x]
    return [Tensor(p) for p in u.src if not network.is_remote(p.device)]


def process_allgather(x: Tensor) -> np.ndarray:
    """The whole value of global Tensor `x` as a numpy array, on every process (every process calls it): the
    processes exchange their parts over MPI (`jax.experimental.multihost_utils.process_allgather`)."""
    u = x.realize().uop
    g = network.group()
    if u.op is not Ops.MULTI or g.ctl is None or not any(network.is_remote(p.device) for p in u.src):
        return x.numpy()
    mine = {i: np.asarray(Tensor(p).numpy()) for i, p in enumerate(u.src) if not network.is_remote(p.device)}
    if u.arg is None:  # replicated: any process's part is the value, but every process must call the collective
        network.host_allgather("process_allgather", None)
        return next(iter(mine.values()))
    parts: dict[int, np.ndarray] = {}
    for theirs in network.host_allgather("process_allgather", mine):
        parts.update(theirs)
    return np.concatenate([parts[i] for i in range(len(u.src))], axis=u.arg)


__all__ = ["initialize", "is_initialized", "process_index", "process_count", "make_array_from_process_local_data",
           "local_parts", "process_allgather", "DistributedError", "DistributedMismatchError"]
