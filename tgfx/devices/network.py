"""The network between processes: which process this is, the devices of the others, and the engine that runs MPI.

Device tuples may span processes (`tg.distributed.initialize()`, under `mpiexec`). A device of another process is
named `"CPU:<k>@<p>"` (device k of process p); this process's own devices keep their plain names (`"CPU:<k>"`, the
same device as `"CPU:<k>@<this process>"`). This module is below the lowering and imports no MPI until
`initialize` runs, so a single-process tgfx never loads it.

- `RemoteDevice`: a device of another process. It has a name and an allocator that hands out placeholder memory
  (address 0), so a global Tensor's remote parts are ordinary BUFFER nodes; reading, writing or running anything on
  one is an error that says which process holds it.
- `NetworkDevice` ("NET", one per process): a device whose engines run network collectives. Its queues are
  ordinary HCQ queues on a native command processor: a WAIT on the producer's timeline, an EXEC of a host program
  that starts a non-blocking MPI operation (`Iallreduce`, `Iallgather`, `Ireduce_scatter_block`) on the buffers'
  host memory in place and drives it
  to completion (MPI's own progress, in `Test`, which runs without the GIL), then the submission's SIGNAL. Kernels
  on the local devices keep running meanwhile; consumers wait on the NET timeline as on any device's.
- Failure: every collective (the engine's, and the host's: `host_allgather`) first exchanges a record of itself
  (kind, op, dtype, element count; the host call's name) across the processes (`agree`), so ranks running different
  programs fail with `DistributedMismatchError`, naming what each process reached, before any collective of
  mismatched sizes blocks. A process that ends normally says so (`announce_end`, at exit), so one still waiting
  fails naming it; a collective that does not complete within `TGFX_WAIT_TIMEOUT` seconds (a rank stopped
  calling) aborts every process through `MPI_Abort` with a message saying so.
"""
from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import stat
import struct
import sys
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgfx import forksafe
from tgfx.devices.cpu import CPUDevice
from tgfx.devices.hcq import DEFAULT_TIMEOUT_S, Buffer, Program

NET_NAME = "NET"


class DistributedError(RuntimeError):
    """A multi-process program cannot run as written (no MPI, a device of another process used locally, ...)."""


class DistributedMismatchError(DistributedError):
    """The processes reached collectives that differ (kind, reduction, dtype or size): they run different programs."""


@dataclass
class ProcessGroup:
    """This process's place among the processes: `index` of `count`, with `devices_per_process` CPU devices each.
    `comm` (MPI.COMM_WORLD duplicated) carries the network engine's collectives, `ctl` (another duplicate) the host's
    (signature checks at creation of global Tensors, gathers to the host), so the two threads never interleave
    collectives on one communicator."""
    index: int = 0
    count: int = 1
    devices_per_process: int = 1
    comm: Any = None
    ctl: Any = None
    mpi: Any = None


_group = ProcessGroup()
_groups_lock = forksafe.lock()
_subcomms: dict[tuple[int, ...], Any] = {}


def group() -> ProcessGroup:
    """This process's `ProcessGroup` (index 0 of 1 until `tg.distributed.initialize()`)."""
    return _group


def set_group(g: ProcessGroup) -> None:
    global _group
    _group = g


def process_of(name: str) -> int:
    """The process a canonical device name lives in: `"CPU:1@2"` -> 2, a local name -> this process."""
    at = name.rfind("@")
    return _group.index if at < 0 else int(name[at + 1:])


def is_remote(name: Any) -> bool:
    """Whether a device name (or any device attribute: None, a tuple) is one device of another process."""
    return type(name) is str and "@" in name


def spans_processes(devices: tuple[str, ...]) -> bool:
    return any("@" in d for d in devices)


# ---- devices of other processes ----
_REMOTE_MEMORY = b""   # what a placeholder Buffer "owns" (None would mean freed)


class RemoteAllocator:
    """Placeholder memory for the parts a process does not hold: an address of 0 that nothing may read or write."""

    def __init__(self, device: RemoteDevice) -> None:
        self.device = device

    def alloc(self, nbytes: int) -> Buffer:
        return Buffer(self.device, nbytes, 0, _REMOTE_MEMORY)  # type: ignore[arg-type]

    def _refuse(self, *_: Any, **__: Any) -> None:
        raise DistributedError(self.device.refusal("read or written from this process"))

    copyin = copyout = fill = read = _refuse


class RemoteDevice:
    """Device `name` ("CPU:<k>@<p>") of another process: this process holds none of its memory and runs nothing on
    it. `synchronize` returns at once (the process that owns it waits for its own work)."""

    timeline_value = 0
    host_memory = False        # not this process's memory: nothing here reads it where it lies
    compiles_on_host = False

    def __init__(self, name: str) -> None:
        self.name = name
        self.process = process_of(name)
        self.allocator = RemoteAllocator(self)

    def __repr__(self) -> str:
        return f"<RemoteDevice {self.name}>"

    def refusal(self, what: str) -> str:
        return (f"{self.name} is a device of process {self.process}, and this is process {_group.index}: its memory "
                f"cannot be {what}; each process reads its own parts (tg.distributed.local_parts(x)), or gathers "
                f"the whole value on every process with tg.distributed.process_allgather(x)")

    def synchronize(self, timeout: float | None = None) -> None:
        return None

    def submit(self, *_: Any, **__: Any) -> Any:
        raise DistributedError(self.refusal("used by a queue"))

    def close(self) -> None:
        return None

    @property
    def profile_events(self) -> list:
        return []


# ---- the network engine ----
class NetworkDevice(CPUDevice):
    """The process's network engine ("NET"): CPU command processors whose EXECs are MPI collectives (host programs)
    on buffers of this process's CPU devices, which share its host memory."""

    executes_on_host_memory = True


_MPI_OPS = {"ADD": "SUM", "MAX": "MAX", "MUL": "PROD"}
_MPI_TYPES = {"float32": "FLOAT", "float64": "DOUBLE", "int32": "INT32_T", "int64": "INT64_T", "uint8": "UINT8_T",
              "int8": "INT8_T", "int16": "INT16_T", "uint32": "UINT32_T", "bool": "C_BOOL"}


def check_collective(kind: str, op: str, dtype_name: str) -> None:
    """Raise if MPI cannot run this collective (the lowering calls it while building the program)."""
    if kind == "allgather" and dtype_name in _MPI_TYPES:
        return
    what = kind.replace("all", "an all-")
    if dtype_name not in _MPI_TYPES:
        raise DistributedError(f"{what} across processes of {dtype_name} values: MPI has no {dtype_name} type here; "
                               f"cast to float32 (or a supported type: {', '.join(sorted(_MPI_TYPES))}) first")
    if op not in _MPI_OPS:
        raise DistributedError(f"{what} across processes with {op}: only {sorted(_MPI_OPS)} reduce over MPI")


def subcomm(processes: tuple[int, ...]) -> Any:
    """The network communicator of `processes` (sorted): COMM_WORLD's duplicate when all of them, else a group made
    once (MPI_Comm_create_group: collective over those processes only, which all build the same program)."""
    g = _group
    if processes == tuple(range(g.count)):
        return g.comm
    with _groups_lock:
        comm = _subcomms.get(processes)
        if comm is None:
            comm = _subcomms[processes] = g.comm.Create_group(g.comm.Get_group().Incl(list(processes)))
        return comm


# ---- every process at the same collective: checked first, by exchanging what each reached ----
_CALL_BYTES = 128   # a call's record: an 8-byte hash of its description, then the description (cut to fit)
END_OF_SCRIPT = "the end of its script (it calls no more collectives)"


def _call_record(what: str) -> np.ndarray:
    out = np.zeros(_CALL_BYTES, np.uint8)
    out[:8] = np.frombuffer(hashlib.sha256(what.encode()).digest()[:8], np.uint8)
    text = what.encode()[:_CALL_BYTES - 8]
    out[8:8 + len(text)] = np.frombuffer(text, np.uint8)
    return out


def _calls_of(records: np.ndarray) -> list[str]:
    return [bytes(r[8:]).rstrip(b"\0").decode(errors="replace") for r in records]


def mismatch_message(what: str, calls: list[str], processes: Sequence[int]) -> str:
    """What a process that reached `what` says when the processes (`calls[i]`: process `processes[i]`'s) differ."""
    others = "; ".join(f"process {p} reached {c}" for p, c in zip(processes, calls, strict=True) if c != what)
    return (f"process {_group.index} reached {what}, but {others}: every process must run the same program (the "
            f"same collectives in the same order, on arrays of the same global shapes; the same number of steps)")


def agree(comm: Any, what: str, processes: Sequence[int], timeout_s: float) -> None:
    """Check that every process of `comm` (processes `processes`) reached the same call `what` before any of them
    starts it: a collective of a different kind or size would block or corrupt memory instead of failing.

    Raises:
        DistributedMismatchError: naming what each differing process reached (the end of its script, for one that
            ended normally: see `announce_end`); every process raises it, from the same records.
    """
    mine = _call_record(what)
    every = np.empty((len(processes), _CALL_BYTES), np.uint8)
    _drive(comm.Iallgather(mine, every), f"the check that every process reached {what}", timeout_s)
    if not (every[:, :8] == mine[:8]).all():
        raise DistributedMismatchError(mismatch_message(what, _calls_of(every), processes))


def host_agree(what: str) -> None:
    """`agree` on the host's communicator: every process has reached the call `what` (a barrier that checks; one
    collective). Not done within `TGFX_WAIT_TIMEOUT` seconds (a process stopped), it aborts every process."""
    g = _group
    agree(g.ctl, what, range(g.count), DEFAULT_TIMEOUT_S)


def host_allgather(what: str, value: Any) -> list[Any]:
    """Every process's `value` (any picklable object), in process order: for host work all processes do together
    (`what` names it in errors), on the host's communicator. Checked first (`host_agree`), so a process at another
    call (or at its end) is an error naming both, not a hang or another call's data."""
    host_agree(what)
    return _group.ctl.allgather(value)


def announce_end() -> None:
    """Tell the other processes that this one ended normally (at exit, after `initialize`): a process still waiting
    in a collective (host or network) sees `END_OF_SCRIPT` where its own call should be and raises, naming this
    one, instead of hanging until its timeout (or for ever, on the host). When every process ends, the records
    match and each returns. Waits without a deadline (another may compute long before its end); a mismatch here
    aborts every process, saying what the others reached."""
    g = _group
    mine = _call_record(END_OF_SCRIPT)
    pending = []
    for comm in (g.comm, g.ctl):
        every = np.empty((g.count, _CALL_BYTES), np.uint8)
        pending.append((comm.Iallgather(mine, every), every))
    while pending:
        waiting = []
        for req, every in pending:
            if not req.Test():
                waiting.append((req, every))
            elif not (every[:, :8] == mine[:8]).all():
                abort_every_process(f"tgfx process {g.index} of {g.count}: "
                                    f"{mismatch_message(END_OF_SCRIPT, _calls_of(every), range(g.count))}")
        pending = waiting
        time.sleep(0.001)


def _host_view(ptr: int, nbytes: int, dtype: np.dtype) -> np.ndarray:
    """The memory at `ptr` as a writable numpy array, without a copy (what MPI reads and writes in place)."""
    if nbytes == 0:
        return np.empty(0, dtype)
    return np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), dtype=dtype)


def _drive(req: Any, what: str, timeout_s: float) -> None:
    """Run the request to completion: `Test` drives MPI's progress (without the GIL) until it is done. Not done
    within `timeout_s` means a process died or stopped calling collectives: abort them all, saying why."""
    deadline = time.monotonic() + timeout_s
    spins = 0
    while not req.Test():
        spins += 1
        if spins & 1023 == 0:
            if time.monotonic() > deadline:
                _abort(f"{what} did not complete within {timeout_s:g} s (TGFX_WAIT_TIMEOUT): another process died "
                       f"or stopped before reaching it")
            time.sleep(0)   # let other Python threads run between bursts of polling


def _abort(message: str) -> None:
    abort_every_process(f"tgfx process {_group.index} of {_group.count}: {message}")


READER_QUIET_S = 0.2   # a launcher that reads nothing of this process's output for this long has stopped reading it


def abort_every_process(message: str) -> None:
    """Say `message` on stderr and end every process of the group (MPI_Abort), once the launcher has read what this
    process wrote: the abort kills the processes, and output still in their pipes was lost (a traceback's last
    lines, this message) in about one abort in five."""
    sys.stderr.write(f"{message}; aborting every process (MPI_Abort)\n")
    sys.stdout.flush()
    sys.stderr.flush()
    _wait_output_read()
    _group.mpi.COMM_WORLD.Abort(1)


def _wait_output_read() -> None:
    """Wait while this process's stdout and stderr pipes hold bytes their reader has not taken, for as long as it
    keeps taking them (output to files and terminals is written already)."""
    last, since = -1, time.monotonic()
    while True:
        pending = 0
        for fd in (1, 2):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    pending += struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]
            except OSError:
                continue
        if pending == 0:
            return
        if pending != last:
            last, since = pending, time.monotonic()
        elif time.monotonic() - since > READER_QUIET_S:
            return
        time.sleep(0.001)


class Collective:
    """One network collective of a program: a host program the NET engine EXECs with buffers (out, in).

    Attributes:
        kind: "allreduce" (out: the reduction of every process's in), "allgather" (out: every process's in, in
            process order) or "reduce_scatter" (out: block p of the reduction, in process p).
        op: the reduction ("ADD", "MAX", "MUL"; "NONE" for an all-gather).
        dtype: its numpy dtype.
        count: elements of `in` per process.
        processes: the processes taking part (sorted).
    """

    def __init__(self, kind: str, op: str, dtype: np.dtype, count: int, processes: tuple[int, ...]) -> None:
        self.kind, self.op, self.dtype, self.count, self.processes = kind, op, np.dtype(dtype), count, processes
        check_collective(kind, op, self.dtype.name)
        g = _group
        if g.mpi is None:
            raise DistributedError("a collective across processes needs tg.distributed.initialize() first")
        self.comm = subcomm(processes)
        self.mpi_op = getattr(g.mpi, _MPI_OPS[op]) if kind != "allgather" else None
        self.mpi_type = getattr(g.mpi, _MPI_TYPES[self.dtype.name])
        self.nbytes = count * self.dtype.itemsize
        self.out_count = count * len(processes) if kind == "allgather" else \
            count // len(processes) if kind == "reduce_scatter" else count
        how = f" ({op})" if kind != "allgather" else ""
        self.what = (f"{kind.replace('all', 'all-').replace('_', '-')}{how} of {count} {self.dtype.name} values across "
                     f"processes {list(processes)}")
        self.program = Program(f"mpi_{kind}_{op.lower()}_{count}", self._run)
        self.runs = 0

    def __repr__(self) -> str:
        return f"<Collective {self.what}>"

    def _run(self, bufs_addr: int, vals_addr: int, core: int) -> None:
        """The EXEC body, on the NET engine's thread: check that every process runs this same collective, then run
        it in place on the buffers' memory."""
        timeout = DEFAULT_TIMEOUT_S
        ptrs = (ctypes.c_uint64 * 2).from_address(bufs_addr)
        out = _host_view(int(ptrs[0]), self.out_count * self.dtype.itemsize, self.dtype)
        src = _host_view(int(ptrs[1]), self.nbytes, self.dtype)
        agree(self.comm, f"an {self.what}", self.processes, timeout)
        if self.kind == "allgather":
            req = self.comm.Iallgather([src, self.count, self.mpi_type], [out, self.count, self.mpi_type])
        elif self.kind == "reduce_scatter":
            # (mpi4py's send count is per block: the receive count)
            req = self.comm.Ireduce_scatter_block([src, self.out_count, self.mpi_type],
                                                  [out, self.out_count, self.mpi_type], op=self.mpi_op)
        else:
            req = self.comm.Iallreduce([src, self.count, self.mpi_type], [out, self.count, self.mpi_type],
                                       op=self.mpi_op)
        _drive(req, f"the {self.what}", timeout)
        self.runs += 1


__all__ = ["ProcessGroup", "RemoteDevice", "NetworkDevice", "Collective", "DistributedError",
           "DistributedMismatchError", "group", "set_group", "process_of", "is_remote", "spans_processes",
           "subcomm", "check_collective", "agree", "host_agree", "host_allgather", "announce_end", "mismatch_message",
           "END_OF_SCRIPT", "NET_NAME"]
