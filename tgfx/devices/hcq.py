"""The hardware-command-queue (HCQ) interface: signals, queues, programs, allocators and command processors.

This module is the one interface a new backend implements, and it imports nothing of any backend: the CPU backend
(`tgfx/devices/cpu.py`, with its native processor in `native.py` and the host side of its rings in
`processor.py`) builds on it, as a second backend would. Everything that runs on a device goes through it: the
host builds an `HWQueue` of packets, encodes it into a `CommandBuffer` (a flat array of 64-bit words; both in
`tgfx/devices/queue.py`, which writes the words from `PACKETS`), and submits it to one of the device's engines,
whose `CommandProcessor` consumes the packets in order, off the Python thread (on the CPU: native code on a
native thread, which never takes the GIL).

A backend provides a `HostRuntime` (the process's host waits, fault table and progress counters;
`register_host_runtime`), and subclasses `HCQDevice` (`create_allocator`, `create_processor`, `exec_sync`,
`copy`), `Allocator` and `CommandProcessor`.

Packets
-------
A command buffer and a ring are arrays of int64 words: packets, whose layouts are the one table
`tgfx/devices/packets.py` (`PACKETS`; its docstring renders it). Buffer and signal pointers in them are integer
addresses. An EXEC's `buf_ptr` and `val` words are the kernel's arguments in place: a CPU kernel receives pointers
into the ring itself. Kernel calling convention (fixed; the compiler relies on it)::

    void kernel(void **bufs, int64_t *vals, int64_t core_id)

`bufs` holds the buffer base pointers in argument order, `vals` the int64 symbolic values (may be empty), and
an EXEC with global_size N calls the kernel N times with core_id 0..N-1, in parallel over the CPU's cores.

Signals in memory
-----------------
A signal is four int64 words: the value; the count of threads asleep on it (a futex on the value's low 32 bits);
the id of the fault attached to a write (0: none); and the value that write stored. Writers store the value, then
wake sleepers if there are any; waiters (queues and the host alike) spin a few microseconds, then sleep.

Submissions
-----------
Every submission is bracketed by the runtime: a leading WAIT on the device's timeline signal for the previous
submission, and a trailing SIGNAL of the next timeline value. So the submissions to one device run one after
another whatever engine they go to, `submit` returns a `Fence` on that timeline value, and the memory and
programs a submission references stay alive until its fence passes: the device holds the command buffer (what it
was encoded with) and the caller's `refs` (what was patched in since), and drops them lazily, at the next submit or
wait that sees the timeline past them. Dependencies between devices are explicit: a `signal` on one device's queue
and a `wait` on another's (or a wait on the other device's fence).

A device knows the writer of every value of its timeline: value n is written by submission n, which ran inline or
sits in one engine's ring at known words. A host wait on the timeline therefore never waits for a value nothing will
write: one beyond the last submission, a submission in the ring of a closed engine, or one the processor consumed
without writing its final SIGNAL raises `HCQNoWriterError` at once (or within `_WRITER_CHECK_S`), naming the
submission; a real timeout names the packet the engine is still running (a kernel, or the WAIT it is blocked on).

Inline submissions: `submit(cb, inline=True)` runs a command buffer on the calling thread instead of the ring
when its device is idle (the timeline has passed every earlier submission) and the buffer has no WAIT of its own.
The calling thread runs the processor's own packet code (natively, with the GIL released), so signals, faults,
profile events and parallel EXECs behave as on the ring; what it saves is the processor's wake-up and the host's
wait, microseconds that dominate a tiny submission. The submission is complete when `submit` returns. Callers ask
for it only for small work (jit does, for programs that move little memory), as XLA's CPU client runs cheap
computations on the caller's thread: a long submission run inline would keep the host from working ahead.

Replay: a `CommandBuffer` keeps, for each distinct buffer (a "slot", numbered in order of first use) and each
named `Sym` value, the word positions that hold it, so `patch_buffers` / `patch_vals` rewrite just those words
and a later `submit` costs one copy into the ring.

Errors: a packet that fails (a Python program that raises, a WAIT that times out, an unknown opcode) is recorded
as a fault in a process-wide table; it poisons the rest of that submission, so every signal the faulting engine
writes until the end of the submission carries it, and it propagates through WAIT packets to other devices'
signals. It is raised once, as an `HCQError`, by the first host `wait`, `Fence.wait` or `synchronize` that sees
it. The engine keeps running the following packets, so the device stays usable. A native kernel that crashes
takes the process with it.

Profiling: the processor timestamps every EXEC and COPY into a ring of events per engine, with the ring word it was
at, which the host drains lazily into `HCQDevice.profile_events`. With `DEBUG>=1` the next host wait prints them: the
events of each submission as the thread that submitted it asked, tagged with its name (`Launcher`), whichever
thread drains them.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import enum
import functools
import itertools
import json
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from tgfx import forksafe
from tgfx.config import DEBUG, Flag

# every wait, on the host or in a queue, gives up once this long passed with no progress on any engine (no EXEC or
# COPY running or retiring: a long healthy computation never times out); TGFX_WAIT_TIMEOUT=2 makes a hang show in
# seconds while debugging (it is read at import: command buffers encode it into their WAIT packets)
DEFAULT_TIMEOUT_S = float(Flag("TGFX_WAIT_TIMEOUT", 30.0).value)
FOREVER_NS = 1 << 62                # a timeout that never passes (packets hold timeouts in int64 ns)
PROFILE_EVENTS_KEPT = 100_000       # per device; older profile events are dropped
HOST_SPIN_NS = 10_000               # a host wait spins this long before it sleeps
_HOST_SLICE_NS = 100_000_000        # a host wait returns to Python this often (so Ctrl-C gets through)
_WRITER_CHECK_S = 0.1               # a blocked host wait checks this often that its signal still has a writer

# a signal's words (see "Signals in memory"): the value, its sleepers, the fault attached to a write (0: none) and
# the value that write stored
S_VALUE, S_WAITERS, S_ERROR, S_ERROR_AT = 0, 1, 2, 3
SIGNAL_WORDS = 4


class Engine(enum.Enum):
    """The queues of a device. Each engine has its own ring and command processor."""
    COMPUTE = "compute"
    COPY = "copy"

    __hash__ = object.__hash__   # members are singletons; Enum's own hash runs Python on every processor lookup


# ---------------------------------------------------------------------------------------------------------------
# errors

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
# faults and waits

_FAULT_ERRORS: dict[int, HCQError] = {}          # fault id -> its error, from the drain until it is reported
_HOST_EXCEPTIONS: dict[int, BaseException] = {}  # token a host callback returned -> the exception it raised
_host_tokens = itertools.count(1)
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
        host_runtime().clear_fault(err.fault_id)


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


# ---------------------------------------------------------------------------------------------------------------
# signals

_SIGNALS: weakref.WeakValueDictionary[int, Signal] = weakref.WeakValueDictionary()   # address -> Signal


def word_view(words: np.ndarray) -> memoryview:
    """The int64 words of `words` as a memoryview, whose items are Python ints: 2.5x cheaper to read and write one
    than through numpy's scalars (a jitted call reads and writes a dozen words of signals and packets)."""
    return memoryview(words).cast("B").cast("q")


class Signal:
    """A 64-bit word in device-visible memory holding a monotonically increasing timeline value.

    Queues write it with SIGNAL (and TIMESTAMP) packets and block on it with WAIT packets; the host reads
    `value` and blocks in `wait`, which spins briefly and then sleeps on a futex in native code, with the GIL
    released. The word is the first of four (see "Signals in memory" above).

    Args:
        value: the initial value.
        name: a name for error messages and traces (default `sig<n>`).
        owner: the name of the device that created it (for error messages); None for a host signal.
    """

    _names = itertools.count()

    def __init__(self, value: int = 0, *, name: str | None = None, owner: str | None = None) -> None:
        self._mem = np.zeros(SIGNAL_WORDS, dtype=np.int64)
        self._mem[S_VALUE] = value
        self.addr: int = self._mem.ctypes.data
        # the same words for the runtime's per-call reads (an item of a memoryview is a Python int, 2.5x cheaper than
        # a numpy scalar's: a jitted call's submit and wait read it four times)
        self.words = word_view(self._mem)
        self.name = name if name is not None else f"sig{next(Signal._names)}"
        self.owner = owner
        self.last_writer: str | None = None       # "host" after a host write
        self.expected_writer: str | None = None   # "device/engine" of the last submission that will write it
        self.is_timeline = False                   # a device timeline: written only by the runtime
        self._device: HCQDevice | None = None      # the device whose timeline it is
        _SIGNALS[self.addr] = self

    def __repr__(self) -> str:
        return f"Signal({self.name!r}, value={self.value}, owner={self.owner!r})"

    @property
    def value(self) -> int:
        """The current value of the word."""
        return int(self._mem[S_VALUE])

    @value.setter
    def value(self, value: int) -> None:
        host_runtime().store_wake(self.addr, value)
        self.last_writer = "host"

    @property
    def error(self) -> HCQError | None:
        """The unreported fault attached to a write of this signal, if any."""
        fid = int(self._mem[S_ERROR])
        if not fid:
            return None
        _drain_faults()
        return _FAULT_ERRORS.get(fid)

    def _wait_for(self, value: int, timeout: float) -> bool:
        """Block until the value is >= `value`; False on timeout. Never raises the attached error."""
        return bool(self._mem[S_VALUE] >= value) or _host_wait(self.addr, value, timeout, until_stalled=True)

    def _timeout_message(self, value: int, timeout: float, waiter: str, seen: int | None = None,
                         writer: str | None = None) -> str:
        """What a timed-out wait says; `writer` describes the submission that should write the value (a device
        timeline's, which the device knows), else the signal's last known writer is named."""
        owner = f" (owned by {self.owner})" if self.owner else ""
        seen = self.value if seen is None else seen
        head = f"{waiter} timed out: for {timeout:g} s no device made progress (no kernel or copy ran or " \
               f"finished) while it waited for signal {self.name!r}{owner} to reach {value}; it is at {seen}"
        if writer is not None:
            return (f"{head}: {writer}. A WAIT that is never satisfied (a signal of another device nothing "
                    f"writes?); TGFX_WAIT_TIMEOUT sets how long a stall may last.")
        source = self.expected_writer or self.last_writer
        who = f"it is written by {source}" if source else "no submitted queue writes it"
        return (f"{head} ({who}). A queue that should signal it may be blocked on a WAIT that never completes, or "
                f"its signal packet was never submitted.")

    def raise_error(self, upto: int) -> None:
        """Raise the fault attached to a write of a value <= `upto`, unless a host wait already reported it."""
        if not self._mem[S_ERROR] or self._mem[S_ERROR_AT] > upto:
            return
        err = self.error
        if err is not None and not err.reported:
            _report(err)
            raise err

    def wait(self, value: int, timeout: float | None = None) -> None:
        """Block the calling thread until the signal is >= `value`.

        Args:
            value: the awaited timeline value.
            timeout: seconds; None means `DEFAULT_TIMEOUT_S`. A wait never blocks forever.

        Raises:
            HCQTimeoutError: the value was not reached in time; the message names the signal, its owner, the
                queue expected to write it, and the awaited and seen values.
            HCQNoWriterError: (a device timeline) no submitted queue will write `value`; raised once that is known.
            HCQError: a packet upstream of the write failed (raised once, by the first wait that sees it).
        """
        if self._device is not None:     # a timeline: its device knows which submission writes each value
            self._device._wait_timeline(value, timeout, Engine.COMPUTE)
            return
        timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
        if not self._wait_for(value, timeout):
            raise HCQTimeoutError(self._timeout_message(value, timeout, "host wait"))
        if DEBUG >= 1:
            _drain_all_events()
        self.raise_error(value)


@dataclass(frozen=True)
class Sym:
    """A named 64-bit value in a packet (an EXEC val or global size, a WAIT or SIGNAL value).

    Every occurrence of the same name in a queue holds the same value, which `CommandBuffer.patch_vals`
    can change before a later submit, e.g. `{"n": 17}` for a dynamic shape or a new cross-device signal value.
    """
    name: str
    value: int


class Fence:
    """The completion of one submission: the device's timeline signal reaching `value`."""

    __slots__ = ("device", "engine", "value")

    def __init__(self, device: HCQDevice, engine: Engine, value: int) -> None:
        self.device, self.engine, self.value = device, engine, value

    def __repr__(self) -> str:
        return f"Fence({self.device.name}/{self.engine.value}, {self.value})"

    @property
    def signal(self) -> Signal:
        """The signal to WAIT on from another queue: `queue.wait(fence.signal, fence.value)`."""
        return self.device.timeline

    @property
    def done(self) -> bool:
        """Whether the submission has completed (does not raise its errors)."""
        return self.device.timeline.value >= self.value

    def wait(self, timeout: float | None = None) -> None:
        """Block until the submission completed; raises its (or an earlier unreported) fault, or a timeout."""
        self.device._wait_timeline(self.value, timeout, self.engine)


# ---------------------------------------------------------------------------------------------------------------
# memory and programs

class Buffer:
    """Device memory: `nbytes` at integer address `ptr` on `device` (None for host memory).

    `_mem` is the object that owns the memory; queues hold it (not the Buffer) until their fence passes, so
    freeing a Buffer that a submitted queue still uses is safe. `shared` marks memory that other Buffers are views
    of (or that is a view itself): nothing may write into it in place as if it were one value's alone.
    """

    __slots__ = ("device", "nbytes", "ptr", "_mem", "shared", "__weakref__")

    def __init__(self, device: HCQDevice | None, nbytes: int, ptr: int, mem: Any, shared: bool = False) -> None:
        self.device, self.nbytes, self.ptr, self._mem, self.shared = device, nbytes, ptr, mem, shared

    def __repr__(self) -> str:
        where = self.device.name if self.device is not None else "host"
        return f"<Buffer {where} {self.nbytes} B at {self.ptr:#x}{' freed' if self._mem is None else ''}>"

    @property
    def freed(self) -> bool:
        """True once the buffer was handed back to its allocator."""
        return self._mem is None

    def view(self, offset: int, nbytes: int) -> Buffer:
        """A sub-buffer sharing this memory (and keeping it alive), e.g. a slice of a planned arena; both are marked
        `shared` from then on."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise ValueError(f"view [{offset}, {offset + nbytes}) is outside {self!r}")
        self.shared = True
        return Buffer(self.device, nbytes, self.ptr + offset, self._mem, shared=True)


def host_buffer(array: np.ndarray | memoryview | bytes) -> Buffer:
    """Wrap C-contiguous host memory as a `Buffer` with device None (a COPY source or destination)."""
    arr = np.asarray(array) if isinstance(array, np.ndarray) else np.frombuffer(array, dtype=np.uint8)
    if not arr.flags.c_contiguous:
        raise ValueError(f"host memory must be C-contiguous, got an array with strides {arr.strides}")
    return Buffer(None, arr.nbytes, arr.ctypes.data, arr)


class Allocator:
    """Allocates a device's memory and moves bytes between it and the host.

    A backend implements `alloc`, `copyin`, `copyout` and `fill` (and may extend `free`). `copyin` and `copyout`
    are ordered after everything submitted to the device before (`tgfx.devices.queue.QueueAllocator` runs them on
    the copy engine, for host memory the device can read; a GPU backend would use pinned staging buffers).
    """

    def __init__(self, device: HCQDevice) -> None:
        self.device = device

    def alloc(self, nbytes: int) -> Buffer:
        """Allocate `nbytes` (at least 64-byte aligned) and return a Buffer on this device."""
        raise NotImplementedError

    def free(self, buf: Buffer) -> None:
        """Give `buf` back. Queues already submitted keep its memory alive until they complete."""
        if buf.device is not self.device:
            raise ValueError(f"{buf!r} does not belong to {self.device.name}")
        if buf._mem is None:
            raise ValueError(f"{buf!r} was already freed")
        buf._mem = None

    def copyin(self, buf: Buffer, src: np.ndarray | memoryview | bytes, timeout: float | None = None) -> None:
        """Copy host bytes into the start of `buf`, after all earlier work on the device; returns when it is done.
        Backend hook (`tgfx.devices.queue.QueueAllocator` does it with a COPY packet)."""
        raise NotImplementedError

    def fill(self, buf: Buffer, src: np.ndarray) -> None:
        """Copy host bytes into the start of `buf`, memory no submitted queue uses yet (just allocated), so the copy
        need not wait for the device's earlier work. A backend whose memory the host can write implements this with
        a plain store; `QueueAllocator`'s is `copyin`."""
        raise NotImplementedError

    def copyout(self, dst: np.ndarray | memoryview, buf: Buffer, timeout: float | None = None) -> None:
        """Copy the first `dst.nbytes` bytes of `buf` into writable host memory `dst`, after all earlier work.
        Backend hook."""
        raise NotImplementedError

    def read(self, buf: Buffer, nbytes: int) -> np.ndarray:
        """The first `nbytes` bytes of `buf`, after all earlier work, as a new host array (uint8): `copyout` into
        one, unless the backend reads its memory more directly."""
        out = np.empty(nbytes, dtype=np.uint8)
        self.copyout(out, buf)
        return out


KernelFn = Callable[[int, int, int], None]
_KERNEL_CTYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_HOST_KERNEL_CTYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_PROGRAMS: weakref.WeakValueDictionary[int, Program] = weakref.WeakValueDictionary()   # id -> Program
_PROGRAM_NAMES: dict[int, str] = {}       # id -> name, for profile events and faults of programs since collected
_program_ids = itertools.count(1)


class _CallbackState(threading.local):
    name: str | None = None   # the host callback this thread runs now (a processor's, or inline); a class default:
    # a thread-local attribute never set is then found at once, where a missing one costs an exception per submit


_callback = _CallbackState()


@contextlib.contextmanager
def running_callback(name: str) -> Iterator[None]:
    """Mark the calling thread as running host callback `name` (a user's Python function run as a device command):
    until it returns, a submission or a blocking wait from it raises `HCQCallbackError` instead of waiting on a
    device that waits for the callback (the device's processor runs it, or the caller runs it inline holding the
    device's submit lock: either hung for good)."""
    outer = _callback.name
    _callback.name = name
    try:
        yield
    finally:
        _callback.name = outer


def _refuse_in_callback(what: str) -> None:
    if (name := _callback.name) is not None:
        raise HCQCallbackError(
            f"{name} used tgfx ({what}) while it ran as a host callback between a device's kernels: it would wait on "
            f"a device that waits for the callback to return. Compute with numpy inside a callback (its arguments "
            f"are numpy arrays), and pass the Tensors it needs as arguments instead of reading them there")


def _call_host_kernel(fn: KernelFn, bufs: int | None, vals: int | None, core: int) -> int:
    """Run a Python program for one core id on a processor thread (ctypes takes the GIL); 0, or an error token."""
    try:
        fn(bufs or 0, vals or 0, core)
        return 0
    except BaseException as e:  # noqa: BLE001 -- every fault must reach the host, never unwind into native code
        token = next(_host_tokens)
        _HOST_EXCEPTIONS[token] = e
        return token


class Program:
    """A compiled kernel: `void kernel(void **bufs, int64_t *vals, int64_t core_id)`.

    Args:
        name: the kernel's name, for profiles, DEBUG output and errors.
        fn: the native function's address (e.g. llvmlite's `ee.get_function_address(name)`), or a Python
            callable `fn(bufs_addr, vals_addr, core_id)` (host functions, tests). The processor calls a Python
            callable through a ctypes callback, which takes the GIL, for one core id after another.
        keepalive: anything that owns the code (an llvmlite ExecutionEngine) and must outlive the program.

    Attributes:
        addr: the native address, or None for a Python callable.
        fn_addr: the address EXEC packets call: `addr`, or the callback's trampoline (marked `EXEC_HOST_FN`).
        host_buffers: a Python callable's buffer sizes in bytes, in EXEC order, and `host_writes` how many leading
            buffers it writes: what a device whose memory the host cannot read (CUDA) copies around the call; None
            where unknown (such a program then runs only on devices in host memory).
    """

    host_buffers: tuple[int, ...] | None = None
    host_writes: int = 0

    def __init__(self, name: str, fn: int | KernelFn, keepalive: Any = None) -> None:
        self.name, self.keepalive = name, keepalive
        # cost estimates from the compiler, for DEBUG>=2 throughput lines (0 when unknown)
        self.flops: int = int(getattr(keepalive, "flops", 0) or 0)
        self.mem_bytes: int = int(getattr(keepalive, "mem_bytes", 0) or 0)
        if isinstance(fn, int):
            if fn == 0:
                raise ValueError(f"program {name!r}: function address is 0 (was the symbol found?)")
            self.addr: int | None = fn
            self.call: KernelFn = _KERNEL_CTYPE(fn)   # ctypes releases the GIL during the call
            self.fn_addr: int = fn
        else:
            self.addr, self.call = None, fn
            self._trampoline = _HOST_KERNEL_CTYPE(functools.partial(_call_host_kernel, fn))
            self.fn_addr = ctypes.cast(self._trampoline, ctypes.c_void_p).value or 0
        self.id = next(_program_ids)
        _PROGRAMS[self.id] = self
        _PROGRAM_NAMES[self.id] = name

    def __repr__(self) -> str:
        where = f"at {self.addr:#x}" if self.addr is not None else "(python)"
        return f"<Program {self.name!r} #{self.id} {where}>"

    @staticmethod
    def of(kernel: Any) -> Program:
        """`kernel` itself if a Program, else a Program for any object with `name` and native `addr` (such as the
        compiler's CompiledKernel), created once per (name, addr) and kept for the life of the process."""
        if isinstance(kernel, Program):
            return kernel
        name, addr = getattr(kernel, "name", None), getattr(kernel, "addr", None)
        if not isinstance(name, str) or not isinstance(addr, int):
            raise TypeError(f"exec needs a Program or an object with `name: str` and `addr: int`, got {kernel!r:.80}")
        if (prog := _NATIVE_PROGRAMS.get((name, addr))) is None:
            prog = _NATIVE_PROGRAMS[(name, addr)] = Program(name, addr, keepalive=kernel)
        return prog


_NATIVE_PROGRAMS: dict[tuple[str, int], Program] = {}


# ---------------------------------------------------------------------------------------------------------------
# command processors

class ProfileEvent(NamedTuple):
    """One exec or copy as the device saw it (device clock, ns)."""
    device: str
    queue: str
    name: str
    start_ns: int
    end_ns: int
    nbytes: int = 0
    global_size: int = 0


class Ring(Protocol):
    """The words a processor consumes packets from, as the device writes them (`CommandProcessor.ring`)."""

    @property
    def wptr(self) -> int:
        """Words ever written."""
        ...

    @property
    def rptr(self) -> int:
        """Words the processor has consumed (a submission is consumed once it is done or the processor moved on)."""
        ...

    def write(self, words: np.ndarray, starts: np.ndarray, label: str) -> None:
        """Append whole packets (`starts`: their boundaries, ending with `len(words)`) and make them visible."""
        ...


class Submission(Protocol):
    """What `HCQDevice.submit` needs of an encoded queue (`tgfx.devices.queue.CommandBuffer` is one)."""
    engine: Engine
    words: np.ndarray       # packets: words[0:4] the leading timeline WAIT, words[-3:] the trailing SIGNAL
    word_view: memoryview   # the same words, for the per-call writes of a replay (see Signal.words)
    starts: np.ndarray      # packet boundaries, ending with len(words)
    inline_ok: bool         # no WAIT but the leading one: it may run on the submitting thread
    _body_addr: int         # the address and length of the words after the leading WAIT (what runs inline)
    _body_words: int
    _signals_written: list[Signal]


_PROCESSORS: list[CommandProcessor] = []   # every engine ever opened, by index (faults name their engine by it)
_processors_lock = forksafe.lock()


class Launcher(NamedTuple):
    """Who submitted work, for its `DEBUG` lines: whichever thread waits on the device or reads its profile prints
    them (the device runs off the Python threads), each as the submitting thread's `DEBUG` level asks (none below 1),
    tagged with its name when it is not the main thread."""
    thread: str
    level: int


def launcher() -> Launcher | None:
    """This thread as a `Launcher`, or None when its `DEBUG` is below 1 (its work prints no lines)."""
    level = int(DEBUG.value)
    if level < 1:
        return None
    me = threading.current_thread()
    return Launcher("" if me is threading.main_thread() else me.name, level)


def launcher_at(launches: deque[list[Any]], at: int) -> Launcher | None:
    """The launcher of the submission holding ring word `at` in `launches` (`CommandProcessor.launches`), dropping
    those before it: events come in ring order. None where its thread asked for no lines."""
    while launches and launches[0][1] <= at:
        launches.popleft()
    return launches[0][2] if launches and launches[0][0] < at else None


class CommandProcessor:
    """The host side of one engine: what consumes its packets, in order, off the Python thread.

    A backend implements `start` (run the consumer), `ring` (where `HCQDevice.submit` writes packets), `describe`,
    `fault_error`, `keep_events` and `drain_events`, and may extend `close` and set `run_inline` and `cpu_addr`.

    Attributes:
        device, engine: whose engine it is; `label` is "device/engine", for messages.
        index: its number in the process, which fault records name it by (`HostRuntime.fault_record`).
        closed: set by `close`; a closed engine runs nothing more.
        cpu_addr: the address of a word holding the core the consumer last ran on (a host wait does not spin
            there), or None.
        run_inline: `run_inline(words_addr, nwords)` runs packets on the calling thread as the processor would
            (see "Inline submissions"); None where the host cannot run them.
        events_lost: profile events the processor recorded and overwrote before the host took them out (since the
            device's last `clear_profile`).
        launches: the ring words of the submissions whose launching thread had `DEBUG>=1`, oldest first: `[start,
            end, launcher]` (`Launcher`), for the `DEBUG` lines of their events (`HCQDevice.submit`).
    """

    events_lost: int = 0

    ring: Ring
    cpu_addr: int | None = None
    run_inline: Callable[[int, int], None] | None = None

    def __init__(self, device: HCQDevice, engine: Engine) -> None:
        self.device, self.engine = device, engine
        self.label = f"{device.name}/{engine.value}"
        self.closed = False
        self.launches: deque[list[Any]] = deque()
        with _processors_lock:
            self.index = len(_PROCESSORS)
            _PROCESSORS.append(self)

    def start(self) -> None:
        """Start consuming the ring. Backend hook."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop once idle; packets left in the ring are dropped."""
        self.closed = True

    def describe(self, at: int) -> str:
        """The packet at ring word `at` (a count of words, as `ring.rptr`), for an error message: the one the
        processor is running while its `rptr` stays there. Backend hook."""
        return f"ring word {at}"

    def fault_error(self, kind: int, a: int, b: int, c: int, d: int) -> HCQError:
        """The exception for a fault this engine recorded (kind and words a..d of its record). Backend hook."""
        return HCQError(f"{self.label}: fault of kind {kind}")

    def keep_events(self) -> None:
        """Called by every submit: copy profile events out before the processor overwrites them. Backend hook."""

    def drain_events(self) -> None:
        """Move the events recorded since the last drain to the device's profile (`HCQDevice._record`)."""


def _drain_all_events() -> None:
    for proc in list(_PROCESSORS):
        proc.drain_events()


# ---------------------------------------------------------------------------------------------------------------
# devices

class HCQDevice:
    """A device: an allocator, one command processor per `Engine`, and a timeline signal.

    A backend subclasses it and implements `create_allocator` and `create_processor`.

    Attributes:
        name: the canonical device name, e.g. "CPU:1".
        timeline: the signal every submission to this device advances by one (see `submit`).
        timeline_value: the value the latest submission will write when it completes.
        profile_events: the last `PROFILE_EVENTS_KEPT` execs and copies (see `export_chrome_trace`).
        host_memory: (class attribute) see below.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.timeline = Signal(0, name=f"{name}.timeline", owner=name)
        self.timeline.is_timeline = True
        self.timeline._device = self
        self.timeline_value = 0
        self._profile: deque[ProfileEvent] = deque(maxlen=PROFILE_EVENTS_KEPT)
        self._errors: list[HCQError] = []
        # the ring submissions not yet retired: (timeline value, refs, command buffer, processor, the ring's write
        # pointer before and after its words); what keeps their memory alive, and what a stuck host wait checks
        self._inflight: deque[tuple[int, Any, Submission, CommandProcessor, int, int]] = deque()
        self._lock = threading.Lock()                   # guards _inflight and _errors
        self._submit_lock = threading.Lock()
        self.allocator = self.create_allocator()
        self._faults = word_view(host_runtime().fault_counter)   # (read per synchronize: see Signal.words)
        self.processors = {engine: self.create_processor(engine) for engine in Engine}
        self._last_processor = self.processors[Engine.COMPUTE]     # of the latest submission
        for proc in self.processors.values():
            proc.start()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def create_allocator(self) -> Allocator:
        """Backend hook: this device's allocator."""
        raise NotImplementedError

    def create_processor(self, engine: Engine) -> CommandProcessor:
        """Backend hook: the command processor of `engine`."""
        raise NotImplementedError

    host_memory: bool = False
    """Whether this device's memory is this process's host memory (the CPU's). A kernel on any other such device can
    read it where it lies (an all-reduce over them needs no copies). A copy between devices runs on the destination's
    copy engine, unless the destination's memory is host memory and the source's is not: a CPU's engine cannot read
    a GPU's memory, so the source's engine pushes it. False for a backend whose memory only its own engines reach."""

    compiles_on_host: bool = False
    """Whether this device runs code the host's LLVM compiles for the host's CPU (`tgfx.lowering.lower_kernel`; a
    program's kernels are then compiled side by side on threads before it is encoded: `tgfx.lowering.prelower`);
    else it loads PTX (`load_kernel`, tgfx/lowering/render_nvptx.py's `gpu_kernel`)."""

    def new_signal(self, value: int = 0, name: str | None = None) -> Signal:
        """A signal in this device's memory."""
        return Signal(value, name=name, owner=self.name)

    @property
    def profile_events(self) -> deque[ProfileEvent]:
        """The last `PROFILE_EVENTS_KEPT` execs and copies, drained from the processors' event rings."""
        for proc in self.processors.values():
            proc.drain_events()
        return self._profile

    def submit(self, cb: Submission, refs: Any = None, inline: bool = False) -> Fence:
        """Write `cb` into its engine's ring, bracketed by timeline WAIT/SIGNAL; returns the submission's fence.

        Until the fence passes, the runtime keeps alive `cb` (so the memory, programs and signals it was encoded
        with) and `refs`: whatever the caller pointed its words at since (a replay's inputs and outputs). With
        `inline` (and `cb.inline_ok`), run it on this thread instead when the device is idle: the returned fence
        has passed."""
        if _forked_from is not None:
            host_runtime()                                # raises: this is a fork of the process that runs them
        if _callback.name is not None:
            _refuse_in_callback(f"a submission to {self.name}")
        proc = self.processors[cb.engine]
        proc.keep_events()                                # before the processor overwrites them
        with self._submit_lock:
            value = self.timeline_value + 1
            if inline and cb.inline_ok and proc.run_inline is not None and self.timeline.words[0] == value - 1:
                # idle (everything submitted before has completed): run it here; it skips the leading WAIT
                if self._inflight:
                    self._retire(value - 1)
                w = cb.word_view
                w[-2], w[-1] = self.timeline.addr, value
                self._last_processor = proc
                if DEBUG.value >= 1 and (who := launcher()) is not None:
                    # what ran before it drained first (by their `launches`): everything submitted has run, so the
                    # events that follow are this run's, whatever ring word the processor is still at (it may not
                    # have stepped past the last SIGNAL yet)
                    proc.drain_events()
                    proc.launches.clear()
                    proc.launches.append(mark := [-1, 1 << 62, who])
                    proc.run_inline(cb._body_addr, cb._body_words)
                    proc.drain_events()
                    with contextlib.suppress(ValueError):   # (another thread's drain may have passed it already)
                        proc.launches.remove(mark)
                else:
                    proc.run_inline(cb._body_addr, cb._body_words)
                # counted once it has run: a submitted value always has a writer that ran or is in a ring (a run
                # cut short without its final SIGNAL is then seen by the next wait, see `_lost`)
                self.timeline_value = value
                return Fence(self, cb.engine, value)
            self._retire(int(self.timeline._mem[0]))
            w = cb.words
            w[1], w[2], w[-2], w[-1] = self.timeline.addr, value - 1, self.timeline.addr, value
            for sig in cb._signals_written:
                sig.expected_writer = proc.label
            ring = proc.ring
            start = ring.wptr
            if DEBUG.value >= 1 and (who := launcher()) is not None:   # (before the write: it may run at once)
                proc.launches.append(mark := [start, 1 << 62, who])
                ring.write(w, cb.starts, proc.label)
                mark[1] = ring.wptr
            else:
                ring.write(w, cb.starts, proc.label)
            # the command buffer itself is held, not only `refs`: a jitted program dropped while its replay runs
            # (`tg.jit(f)(x)` in a loop) would otherwise free the arena its kernels are still writing
            entry = (value, refs, cb, proc, start, ring.wptr)
            with self._lock:
                self._inflight.append(entry)
            self.timeline_value = value
            self._last_processor = proc
        return Fence(self, cb.engine, value)

    def _retire(self, value: int) -> None:
        """Drop the references of submissions up to `value` (the timeline has passed them)."""
        inflight = self._inflight
        if inflight and inflight[0][0] <= value:
            with self._lock:
                while inflight and inflight[0][0] <= value:
                    inflight.popleft()

    def _wait_timeline(self, value: int, timeout: float | None, engine: Engine) -> None:
        timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
        sig = self.timeline
        if sig._mem[0] < value:
            self._block_on_timeline(value, timeout, f"host wait on {self.name}/{engine.value}")
        self._retire(value)
        if DEBUG >= 1:
            _drain_all_events()
        sig.raise_error(value)

    def _block_on_timeline(self, value: int, timeout: float, waiter: str) -> None:
        """Block until the timeline reaches `value`. Every `_WRITER_CHECK_S` (and before the first wait, for what
        is cheap to see) it checks that the submission which writes `value` still can: a value that nothing will
        write raises `HCQNoWriterError` then, naming the submission, instead of a timeout long after."""
        sig = self.timeline
        if value > self.timeline_value:
            raise HCQNoWriterError(f"{waiter} for signal {sig.name!r} to reach {value}: {self._lost(value)}")
        _refuse_in_callback(waiter)
        clock = _Stall(timeout)
        while True:
            left = clock.left()
            if _host_wait(sig.addr, value, min(left, _WRITER_CHECK_S), self._last_processor.cpu_addr):
                return
            if (why := self._lost(value)) is not None:
                raise HCQNoWriterError(f"{waiter} for signal {sig.name!r} to reach {value} (it is at {sig.value}): "
                                       f"{why}")
            if left <= _WRITER_CHECK_S and clock.stalled():
                raise HCQTimeoutError(sig._timeout_message(value, timeout, waiter, writer=self._writer_state(value)))

    def _pending(self, value: int) -> list[tuple[int, Any, Submission, CommandProcessor, int, int]]:
        """The ring submissions up to `value` the timeline has not passed, oldest first."""
        with self._lock:
            return [e for e in self._inflight if e[0] <= value]

    def _lost(self, value: int) -> str | None:
        """Why no submission will ever write timeline `value`, or None while one still may."""
        if value > self.timeline_value:
            return (f"only {self.timeline_value} submissions were made to {self.name}, so no submitted queue writes "
                    f"{value} (a fence of another device, or of a submission that was never made?)")
        mem = self.timeline._mem
        passed = int(mem[0])
        pending = [e for e in self._pending(value) if e[0] > passed]    # retired lazily: some may be done
        for v, _, cb, proc, start, end in pending:
            if proc.closed:
                return f"submission {v} ({cb!r}) is in the ring of {proc.label}, which is closed: nothing runs it"
            # rptr first: the processor writes a submission's final SIGNAL before it moves rptr past it
            if proc.ring.rptr >= end and mem[0] < v:
                return (f"the processor of {proc.label} consumed submission {v} ({cb!r}, ring words {start}..{end}) "
                        f"and never wrote its final SIGNAL")
        # a ring submission stays in `_inflight` until the timeline passes it, so one the timeline has not passed and
        # that is not there ran inline, which writes its final SIGNAL before `submit` returns
        in_rings = {e[0] for e in pending}
        inline = next((v for v in range(passed + 1, value + 1) if v not in in_rings), None)
        if inline is not None and mem[0] < inline:    # read again: the timeline may have passed it meanwhile
            return (f"submission {inline} ran inline on the submitting thread and ended without its final SIGNAL "
                    f"(its engine was closed during the run, or its packets are malformed)")
        return None

    def _writer_state(self, value: int) -> str:
        """What the device is doing instead of writing `value`: the oldest pending submission and its engine's
        current packet (a kernel still running, or a WAIT that is not satisfied)."""
        pending = [e for e in self._pending(value) if e[0] > self.timeline._mem[0]]
        if not pending:
            return f"submission {value} is complete"
        v, _, cb, proc, start, end = pending[0]
        at = proc.ring.rptr
        what = (f"submission {value} is in the ring of {proc.label}" if v == value else
                f"submission {value} waits for submission {v} on {proc.label}")
        return f"{what} ({cb!r}, ring words {start}..{end}), whose processor is at {proc.describe(at)}"

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait for everything submitted so far, then raise any fault not yet reported."""
        mem = self.timeline.words
        if mem[0] >= self.timeline_value and not mem[S_ERROR] and not self._errors and \
                self._faults[0] == _faults_drained and DEBUG.value < 1:
            if self._inflight:                  # done, and nothing to raise: the common case, a few reads
                self._retire(self.timeline_value)
            return
        self._wait_timeline(self.timeline_value, timeout, Engine.COMPUTE)
        _drain_faults()
        if not self._errors:
            return
        with self._lock:
            errors, self._errors = [e for e in self._errors if not e.reported], []
        for e in errors:
            _report(e)
        if errors:
            raise errors[0]

    def exec_sync(self, program: Program | Any, bufs: Sequence[Buffer], vals: Sequence[int] = (), global_size: int = 1,
                  timeout: float | None = None) -> None:
        """Run one kernel and wait for it: the simplest way to launch (tests, eager, BEAM timing). Backend hook
        (`tgfx.devices.queue.QueueDevice` submits one EXEC)."""
        raise NotImplementedError

    def copy(self, dst: Buffer, src: Buffer, nbytes: int, dst_offset: int = 0, src_offset: int = 0) -> Fence:
        """Copy on this device's copy engine, after all work submitted so far to `src`'s device; returns at once.

        Later submissions to this device are ordered after it; wait on the fence before reading `dst` elsewhere.
        Backend hook."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop the command processors (at interpreter exit)."""
        for proc in self.processors.values():
            proc.close()

    def clear_profile(self) -> None:
        """Forget the recorded profile events."""
        self.profile_events.clear()
        for proc in self.processors.values():
            proc.events_lost = 0

    @property
    def profile_events_lost(self) -> int:
        """EXECs and COPYs since `clear_profile` whose events were overwritten in a processor's event ring before
        the host took them out (a BLOCK that loops on the device for more iterations than the ring holds while the
        host waits): `profile_events` lacks them."""
        _ = self.profile_events
        return sum(proc.events_lost for proc in self.processors.values())

    def _record(self, ev: ProfileEvent, program: Program | None, who: Launcher | None = None) -> None:
        """Keep `ev` in the profile, and print its line if the thread that launched it (`who`) asked for them."""
        self._profile.append(ev)
        if who is not None:
            size = f"{ev.nbytes:>10d} B" if ev.name == "copy" else f"gs={ev.global_size:<9d}"
            dur = ev.end_ns - ev.start_ns
            line = f"*** {ev.device + '/' + ev.queue:<14s} {ev.name:<40s} {size} {dur / 1e3:10.2f} us"
            if who.level >= 2 and program is not None and dur > 0:
                line += f"  {program.flops / dur:8.2f} GFLOP/s {program.mem_bytes / dur:8.2f} GB/s"
            print(f"{line}  [{who.thread}]" if who.thread else line)


# ---------------------------------------------------------------------------------------------------------------
# profiling

def chrome_trace(devices: Iterable[HCQDevice]) -> dict[str, Any]:
    """The devices' profile events as a Chrome / Perfetto trace: one process per device, one track per queue (and,
    where some were lost, `otherData.events_lost`: how many per device)."""
    devices = list(devices)
    events: list[dict[str, Any]] = []
    for pid, dev in enumerate(devices):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": dev.name}})
        for tid, engine in enumerate(Engine):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": engine.value}})
        tids = {engine.value: tid for tid, engine in enumerate(Engine)}
        for ev in list(dev.profile_events):
            args = {"nbytes": ev.nbytes} if ev.name == "copy" else {"global_size": ev.global_size}
            events.append({"name": ev.name, "ph": "X", "pid": pid, "tid": tids[ev.queue], "ts": ev.start_ns / 1e3,
                           "dur": (ev.end_ns - ev.start_ns) / 1e3, "args": args})
    lost = {dev.name: n for dev in devices if (n := dev.profile_events_lost)}
    return {"traceEvents": events, "displayTimeUnit": "ns", **({"otherData": {"events_lost": lost}} if lost else {})}


def export_chrome_trace(devices: Iterable[HCQDevice], path: str | None = None) -> str:
    """`chrome_trace` as JSON text, also written to `path` when given (open it in ui.perfetto.dev)."""
    text = json.dumps(chrome_trace(devices))
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return text


__all__ = ["Allocator", "Buffer", "CommandProcessor", "Engine", "Fence", "ForkedRuntimeError", "HCQDevice", "HCQError",
           "HCQExecError", "HCQNoWriterError", "HCQTimeoutError", "HostRuntime", "ProfileEvent", "Program", "Ring",
           "Signal", "Submission", "Sym", "chrome_trace", "export_chrome_trace", "host_buffer", "host_runtime",
           "register_host_runtime"]
