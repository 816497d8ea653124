"""The hardware-command-queue (HCQ) interface: signals, queues, programs, allocators and command processors.

This module is the one interface a new backend implements (with `runtime.py`, the host runtime, its errors, the
host's waits on signal words and its fault table, and `programs.py`, memory and programs: it exports their names),
and it imports nothing of any backend: the CPU backend (`tgfx/devices/cpu.py`, with its native processor in
`native.py` and the host side of its rings in `processor.py`) builds on it, as a second backend would. Everything
that runs on a device goes through it: the host builds an `HWQueue` of packets, encodes it into a `CommandBuffer` (a
flat array of 64-bit words; both in `tgfx/devices/queue.py`, which writes the words from `PACKETS`), and submits it
to one of the device's engines, whose `CommandProcessor` consumes the packets in order, off the Python thread (on
the CPU: native code on a native thread, which never takes the GIL).

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

import contextlib
import enum
import itertools
import json
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from tgfx.config import DEBUG, Flag
from tgfx.devices import runtime
from tgfx.devices.programs import Allocator, Buffer, KernelFn, Program, _callback, _refuse_in_callback, host_buffer
from tgfx.devices.runtime import (
    _FAULT_ERRORS,
    _PROCESSORS,
    _REPORTED,
    ForkedRuntimeError,
    HCQCallbackError,
    HCQError,
    HCQExecError,
    HCQNoWriterError,
    HCQTimeoutError,
    HostRuntime,
    _drain_faults,
    _host_wait,
    _processors_lock,
    _report,
    _Stall,
    host_runtime,
    in_forked_child,
    refuse_in_forked_child,
    register_host_runtime,
)
from tgfx.devices.runtime import FOREVER_NS as FOREVER_NS
from tgfx.devices.runtime import HOST_SPIN_NS as HOST_SPIN_NS

# every wait, on the host or in a queue, gives up once this long passed with no progress on any engine (no EXEC or
# COPY running or retiring: a long healthy computation never times out); TGFX_WAIT_TIMEOUT=2 makes a hang show in
# seconds while debugging (it is read at import: command buffers encode it into their WAIT packets)
DEFAULT_TIMEOUT_S = float(Flag("TGFX_WAIT_TIMEOUT", 30.0).value)
PROFILE_EVENTS_KEPT = 100_000       # per device; older profile events are dropped
_SUBMITTERS = 4096                   # per device: the threads of its latest submissions, for their faults
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
        if fid in _REPORTED:   # (dead to the processors too: drop it, unless one attached another meanwhile)
            host_runtime().cas(self.addr + 8 * S_ERROR, fid, 0)
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
        if not self._mem[S_ERROR] or (at := int(self._mem[S_ERROR_AT])) > upto:
            return
        err = self.error
        if err is not None and not err.reported:
            _report(err)
            if self._device is not None:   # (a device timeline: its submission `at` was some thread's)
                self._device._owe(err, at)
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

    wptr: int   # words ever written (`submit` sets it back over words an interrupt kept from being published)

    @property
    def published(self) -> int:
        """Words the processor may read (`wptr` when a write finished)."""
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
        # the thread that made each recent submission (by timeline value, modulo `_SUBMITTERS`), and the faults other
        # threads' waits reported first, owed to the thread whose submission raised them (`_owe`)
        self._submitters: list[threading.Thread | None] = [None] * _SUBMITTERS
        self._owed: dict[int, tuple[threading.Thread, HCQError]] = {}
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
        if runtime._forked_from is not None:             # (`in_forked_child`, read inline: this runs every submit)
            host_runtime()                                # raises: this is a fork of the process that runs them
        if _callback.name is not None:
            _refuse_in_callback(f"a submission to {self.name}")
        proc = self.processors[cb.engine]
        proc.keep_events()                                # before the processor overwrites them
        with self._submit_lock:
            value = self.timeline_value + 1
            self._submitters[value % _SUBMITTERS] = threading.current_thread()
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
                    try:
                        proc.run_inline(cb._body_addr, cb._body_words)
                    except BaseException:   # Ctrl-C as the run returned: it ran, and is counted as below
                        if self.timeline.words[0] >= value:
                            self.timeline_value = value
                        raise
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
            try:
                if DEBUG.value >= 1 and (who := launcher()) is not None:   # (before the write: it may run at once)
                    proc.launches.append(mark := [start, 1 << 62, who])
                    ring.write(w, cb.starts, proc.label)
                    mark[1] = ring.wptr
                else:
                    ring.write(w, cb.starts, proc.label)
                self._keep(value, refs, cb, proc, start, ring.wptr)
            except BaseException:
                # Ctrl-C part way (it lands between any two steps): words the processor cannot see yet are taken
                # back, as if never submitted; a submission it can see runs, so it is recorded as every one is (its
                # memory held until it is done, its value counted), then the interrupt raised. Before, the next
                # submission published the taken-back words too, run on memory freed since, or took the same value
                if ring.published <= start:
                    ring.wptr = start
                else:
                    self._keep(value, refs, cb, proc, start, ring.wptr)
                raise
        return Fence(self, cb.engine, value)

    def _keep(self, value: int, refs: Any, cb: Submission, proc: CommandProcessor, start: int, end: int) -> None:
        """Keep submission `value` (ring words `start`..`end` of `proc`) until the timeline passes it: the command
        buffer itself too, not only `refs` (a jitted program dropped while its replay runs, `tg.jit(f)(x)` in a loop,
        would otherwise free the arena its kernels are still writing). Called again after an interrupt: once."""
        with self._lock:
            if not self._inflight or self._inflight[-1][0] != value:
                self._inflight.append((value, refs, cb, proc, start, end))
        self.timeline_value = value
        self._last_processor = proc

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
        if self._owed:
            self._raise_owed()
        sig.raise_error(value)

    def _owe(self, err: HCQError, value: int) -> None:
        """`err`, the fault of submission `value`, was raised by a wait of the calling thread: if another thread made
        that submission, its next wait on this device raises it too. (A pool thread's wait reported the fault of
        another's call first, and that thread read its results, never computed, with no error.) The runtime cannot
        tell whether the waiting thread's values depend on the failed ones, so it raises there too."""
        thread = self._submitters[value % _SUBMITTERS] if value > self.timeline_value - _SUBMITTERS else None
        if thread is not None and thread is not threading.current_thread() and thread.is_alive():
            with self._lock:
                self._owed = {k: v for k, v in self._owed.items() if v[0].is_alive()}
                self._owed.setdefault(thread.ident, (thread, err))

    def _raise_owed(self) -> None:
        """Raise the fault owed to the calling thread (`_owe`), if there is one."""
        me = threading.current_thread()
        with self._lock:
            owed = self._owed.get(me.ident)
            if owed is None or owed[0] is not me:
                return
            del self._owed[me.ident]
        raise owed[1]

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
        if mem[0] >= self.timeline_value and not mem[S_ERROR] and not self._errors and not self._owed and \
                self._faults[0] == runtime._faults_drained and DEBUG.value < 1:
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
            if who.level >= 2 and program is not None:   # (SPEC section 7: its options, GFLOP/s and GB/s)
                if dur > 0:
                    line += f"  {program.flops / dur:8.2f} GFLOP/s {program.mem_bytes / dur:8.2f} GB/s"
                line += f"  opts=[{', '.join(map(repr, program.opts))}]"
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


# the interface a backend implements is this module's: the names of runtime.py and programs.py are part of it
__all__ = ["Allocator", "Buffer", "CommandProcessor", "Engine", "Fence", "ForkedRuntimeError", "HCQCallbackError",
           "HCQDevice", "HCQError", "HCQExecError", "HCQNoWriterError", "HCQTimeoutError", "HostRuntime", "KernelFn",
           "ProfileEvent", "Program", "Ring", "Signal", "Submission", "Sym", "chrome_trace", "export_chrome_trace",
           "host_buffer", "host_runtime", "in_forked_child", "refuse_in_forked_child", "register_host_runtime"]
