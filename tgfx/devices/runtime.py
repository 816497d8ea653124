"""The host runtime every device relies on (`HostRuntime`: host waits on signal words, the fault table, progress
counters), provided by a backend (`register_host_runtime`), with the runtime's errors and what a fork of a process
whose devices ran may still do (`refuse_in_forked_child`); and the host's side of it: the wait on a signal word
(`_host_wait`, with its timeout `_Stall`), the drain of the fault table into errors (`_drain_faults`), and the
registry of command processors the table names. Part of the HCQ interface (`tgfx/devices/hcq.py`)."""
from __future__ import annotations

import atexit
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from tgfx import forksafe


class HCQError(RuntimeError):
    """An error raised by the runtime. `reported` is set once the error has been raised to the host."""
    reported: bool = False
    fault_id: int = 0          # the processor's fault record it came from (0: raised on the host)


class HCQTimeoutError(HCQError, TimeoutError):
    """A wait (on the host or in a queue) did not see its signal reach the awaited value in time."""


class HCQExecError(HCQError):
    """A packet failed in a command processor; `__cause__` is the original exception."""


class HCQNoWriterError(HCQError):
    """The host waits for a signal value that no submitted queue will write (a lost or never-made submission): raised
    as soon as that is known, instead of a timeout."""


class HCQCallbackError(HCQError):
    """A host callback computed or read Tensors with tgfx while it ran between a device's kernels: that would wait on
    a device that waits for the callback."""


class ForkedRuntimeError(HCQError):
    """The process is a fork of one whose devices ran: their threads, rings and kernels in flight stayed there."""


# ---------------------------------------------------------------------------------------------------------------
# the host runtime

class HostRuntime:
    """The process-wide host services every device relies on, provided by a backend (`register_host_runtime`): the
    CPU backend's native runtime (`tgfx/devices/native.py`) is one.

    A signal is a word in host-visible memory (see "Signals in memory"); the host blocks on one with `wait_ge`, which
    must not hold the GIL, and writes one with `store_wake`. Command processors record faults in a process-wide table
    of records (`fault_record`), counted by `fault_counter`, and count the EXECs and COPYs they run and retire
    (`progress`), which is how a wait tells a stalled device from a long computation.
    """

    fault_counter: np.ndarray
    """A one-element int64 view of the count of faults ever recorded (read on every synchronize: keep it cheap)."""
    fault_capacity: int
    """How many fault records the table keeps; older ones are overwritten."""

    def store_wake(self, addr: int, value: int) -> None:
        """Store the int64 `value` at `addr` and wake every thread asleep on the word."""
        raise NotImplementedError

    def wait_ge(self, addr: int, value: int, timeout_ns: int, spin_ns: int, abort: int | None,
                avoid: int | None) -> int:
        """Wait until the int64 at `addr` is >= `value` (signed), at most `timeout_ns`; returns the value last seen.

        Spins for `spin_ns` first, unless the calling thread runs on the core whose number is at address `avoid`;
        gives up early once the word at address `abort` (if any) is nonzero. Runs without the GIL."""
        raise NotImplementedError

    def cas(self, addr: int, expected: int, new: int) -> int:
        """Compare-and-swap the int64 at `addr`; returns the old value."""
        raise NotImplementedError

    def fault_record(self, fault_id: int) -> list[int]:
        """The table's record for fault `fault_id`: (id, kind, engine index, a, b, c, d, 0). Its first word is
        `fault_id` only while the fault is recorded and not yet reported; an older or newer fault's id otherwise."""
        raise NotImplementedError

    def clear_fault(self, fault_id: int) -> None:
        """Mark fault `fault_id` reported: processors stop attaching it to the signals they write."""
        raise NotImplementedError

    def progress(self) -> tuple[int, int]:
        """(EXECs and COPYs running now, those retired so far), over every engine of the process."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Stop the runtime's threads, at interpreter exit."""


_runtime_factory: Callable[[], HostRuntime] | None = None
_runtime: HostRuntime | None = None
_runtime_lock = threading.Lock()
_forked_from: int | None = None     # in a child forked after the runtime started: the parent's pid


def register_host_runtime(factory: Callable[[], HostRuntime]) -> None:
    """Make `factory` build the process's `HostRuntime`, on first use (a backend calls this when imported)."""
    global _runtime_factory
    _runtime_factory = factory


def host_runtime() -> HostRuntime:
    """The process's host runtime, built on first use.

    Raises:
        ForkedRuntimeError: this process is a fork of one whose runtime had started.
    """
    global _runtime
    if _forked_from is not None:
        raise ForkedRuntimeError(
            f"tgfx's devices were started in process {_forked_from}, and this process is a fork of it: the device "
            f"threads, their rings and the kernels in flight stayed in the parent. Start worker processes with "
            f"multiprocessing's 'spawn' or 'forkserver' method (multiprocessing.set_start_method('spawn')), or fork "
            f"before tgfx computes anything")
    rt = _runtime
    if rt is None:
        with _runtime_lock:
            if _runtime is None:
                if _runtime_factory is None:
                    raise RuntimeError("no device backend registered a host runtime; import tgfx.devices first")
                _runtime = _runtime_factory()
                atexit.register(_shutdown_at_exit)
            rt = _runtime
    return rt


def refuse_in_forked_child() -> None:
    """Raise `ForkedRuntimeError` in a fork of a process whose runtime had started; nothing otherwise. Called where
    a computation starts (an eager graph realised, a jitted call), before it takes the locks of caches, compiles and
    programs: a thread of the parent may have held one when it forked, and in the child no thread would release it
    (the child would hang on it instead of failing)."""
    if _forked_from is not None:
        host_runtime()


def in_forked_child() -> bool:
    """Whether this process is a fork of one whose runtime had started (its devices' threads stayed there)."""
    return _forked_from is not None


def _shutdown_at_exit() -> None:
    if _runtime is not None and _forked_from is None:   # a forked child has no threads of its own to stop
        _runtime.shutdown()


def _after_fork_in_child() -> None:
    """A fork copies only the forking thread: a child of a process whose runtime runs fails at once on the devices
    (not in a wait for threads that do not exist), and a child forked before it started builds its own. A child
    forked while another thread was starting it is the first kind: that thread was in LLVM, whose locks the child
    cannot take back."""
    global _forked_from, _runtime_lock
    if _runtime is not None or _runtime_lock.locked():
        _forked_from = os.getppid()
    _runtime_lock = threading.Lock()     # the parent may have held it while forking


os.register_at_fork(after_in_child=_after_fork_in_child)


# ---------------------------------------------------------------------------------------------------------------
# faults and waits: the host's side of the fault table and of a wait on a signal word (`hcq.py` builds its signals,
# devices and command processors on them, and re-exports FOREVER_NS and HOST_SPIN_NS)

FOREVER_NS = 1 << 62                # a timeout that never passes (packets hold timeouts in int64 ns)
HOST_SPIN_NS = 10_000               # a host wait spins this long before it sleeps
_HOST_SLICE_NS = 100_000_000        # a host wait returns to Python this often (so Ctrl-C gets through)

# every engine ever opened (`hcq.CommandProcessor`), by index (faults name their engine by it)
_PROCESSORS: list[Any] = []
_processors_lock = forksafe.lock()

_FAULT_ERRORS: dict[int, HCQError] = {}          # fault id -> its error, from the drain until it is reported
# the ids of the faults reported last (at most a fault table's worth): a signal still carrying one drops it at its
# next read (`Signal.error`), so its waits take the fast path again (7 Python calls more a wait, after a fault, until)
_REPORTED: OrderedDict[int, None] = OrderedDict()
_faults_lock = forksafe.lock()
_faults_drained = 0


def _drain_faults() -> None:
    """Turn the faults processors recorded since the last drain into HCQErrors on their devices' error lists."""
    global _faults_drained
    rt = host_runtime()
    if int(rt.fault_counter[0]) == _faults_drained:
        return
    with _faults_lock:
        count = int(rt.fault_counter[0])
        while _faults_drained < count:
            fid = _faults_drained + 1
            rec = rt.fault_record(fid)
            if rec[0] != fid and fid > count - rt.fault_capacity:
                break                         # still being written: the next drain takes it
            _faults_drained = fid
            if rec[0] != fid:
                continue                      # overwritten by newer faults before anyone drained it
            proc = _PROCESSORS[rec[2]]
            err = proc.fault_error(rec[1], *rec[3:7])
            err.fault_id = fid
            _FAULT_ERRORS[fid] = err
            with proc.device._lock:
                proc.device._errors.append(err)


def _report(err: HCQError) -> None:
    """Mark `err` raised: no host wait raises it again, and queues stop passing it on to the signals they write."""
    err.reported = True
    if err.fault_id:
        _FAULT_ERRORS.pop(err.fault_id, None)
        rt = host_runtime()
        rt.clear_fault(err.fault_id)
        with _faults_lock:
            _REPORTED[err.fault_id] = None
            while len(_REPORTED) > rt.fault_capacity:
                _REPORTED.popitem(last=False)


class _Stall:
    """A wait's timeout. With `restart` it counts only time without progress: it restarts while an EXEC or COPY runs
    anywhere or one retired since it last started, so a wait on a long, healthy computation never gives up (a
    device that stopped making progress does, `timeout` seconds after its last packet); without, it is a plain
    deadline (a slice of a longer wait)."""

    def __init__(self, timeout: float, restart: bool = True) -> None:
        self.timeout = min(timeout, FOREVER_NS / 1e9)
        self.deadline = time.monotonic() + self.timeout
        self.mark = host_runtime().progress()[1] if restart else None

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def stalled(self) -> bool:
        """At the deadline: True if nothing moved (or it does not restart), else the deadline restarts."""
        if self.mark is None:
            return True
        running, retired = host_runtime().progress()
        if not running and retired == self.mark:
            return True
        self.mark, self.deadline = retired, time.monotonic() + self.timeout
        return False


def _host_wait(addr: int, value: int, timeout: float, avoid: int | None = None, until_stalled: bool = False) -> bool:
    """Wait until the signal-like word at `addr` is >= `value`, natively with the GIL released; False on timeout
    (with `until_stalled`, once `timeout` passed with no progress anywhere: `_Stall`).

    The wait spins first, unless this thread runs on the core whose number is at address `avoid` (the core of the
    processor that will write the word: spinning there would only keep it from running)."""
    rt = host_runtime()
    clock = _Stall(timeout, restart=until_stalled)
    spin = HOST_SPIN_NS
    while True:
        left = int(clock.left() * 1e9)
        if rt.wait_ge(addr, value, max(0, min(left, _HOST_SLICE_NS)), spin, None, avoid) >= value:
            return True
        if left <= _HOST_SLICE_NS and clock.stalled():
            return False
        spin = 0
