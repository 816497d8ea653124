"""The CPU backend's host side of an engine: the ring a submission is written into, and `RingProcessor` (the
interface's `CommandProcessor`), whose control block, fault records and profile events it shares with the native
loop that consumes the ring."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from tgfx.devices import native
from tgfx.devices.hcq import (
    _SIGNALS,
    DEFAULT_TIMEOUT_S,
    PROFILE_EVENTS_KEPT,
    CommandProcessor,
    Engine,
    HCQDevice,
    HCQError,
    HCQExecError,
    HCQTimeoutError,
    ProfileEvent,
    _host_wait,
    launcher_at,
    word_view,
)
from tgfx.devices.packets import OP_MASK, PACKETS, RING_WORDS, Op, header
from tgfx.devices.programs import _HOST_EXCEPTIONS, _PROGRAM_NAMES, _PROGRAMS

_EXEC, _WAIT = PACKETS[Op.EXEC], PACKETS[Op.WAIT]


class Ring:
    """A ring of packet words shared by the host (writer) and one command processor (reader).

    `wptr` and `rptr` count words ever written and consumed; they live in the processor's control block, where
    the processor reads `wptr` and publishes `rptr`. A packet never straddles the end (the writer pads with a
    NOP), and the writer only writes words the processor has consumed, so packets are read in place. A writer that
    waited for room calls `after_wait` (the processor ran on meanwhile: its profile events are taken out).
    """

    def __init__(self, ctl: np.ndarray, ctl_addr: int, nwords: int = RING_WORDS) -> None:
        self.words, self.base = native.alloc_words(nwords)
        self.nwords = nwords
        self.wptr = 0
        self.after_wait: Callable[[], None] = lambda: None
        self._ctl, self._ctl_addr = ctl, ctl_addr
        ctl[native.W_RING], ctl[native.W_NWORDS] = self.base, nwords

    @property
    def rptr(self) -> int:
        """Words the processor has consumed."""
        return int(self._ctl[native.W_RPTR])

    @property
    def published(self) -> int:
        """Words the processor may read: `wptr` as last published (a writer interrupted before publishing takes the
        words after it back)."""
        return int(self._ctl[native.W_WPTR])

    def _publish(self) -> None:
        # a sequentially consistent store in native code: the words written before it are visible to the reader
        native.runtime().doorbell(self._ctl_addr, self.wptr)

    def _reserve(self, n: int, deadline: float, label: str) -> None:
        need = self.wptr + n - self.nwords      # rptr must reach this before n more words fit
        if self.rptr >= need:
            return
        self._publish()
        if not _host_wait(self._ctl_addr + 8 * native.W_RPTR, need, deadline - time.monotonic(), until_stalled=True):
            raise HCQTimeoutError(f"{label}: the ring stayed full and no device made progress (the engine is "
                                  f"blocked in a WAIT) until the submit timed out")
        self.after_wait()

    def write(self, words: np.ndarray, starts: np.ndarray, label: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Append whole packets (`starts`: packet boundaries) and advance the write pointer (one writer at a time)."""
        i, total = 0, len(words)
        pos = self.wptr % self.nwords
        if total <= min(self.nwords - pos, self.nwords - (self.wptr - self.rptr)):   # the common case
            self.words[pos:pos + total] = words
            self.wptr += total
            self._publish()
            return
        deadline = time.monotonic() + timeout
        while i < total:
            pos = self.wptr % self.nwords
            to_end = self.nwords - pos
            plen = int(starts[np.searchsorted(starts, i, "right")]) - i
            if plen > to_end:      # the next packet would straddle the end: pad, then wrap
                self._reserve(to_end, deadline, label)
                self.words[pos] = header(Op.NOP, to_end - 1)
                self.wptr += to_end
                continue
            self._reserve(plen, deadline, label)
            room = min(self.nwords - (self.wptr - self.rptr), to_end)
            j = int(starts[np.searchsorted(starts, i + room, "right") - 1])
            self.words[pos:pos + j - i] = words[i:j]
            self.wptr += j - i
            i = j
        self._publish()


class RingProcessor(CommandProcessor):
    """The host side of one engine: its ring, control block and profile-event ring, shared with the processor.

    The control block (layout in `tgfx/devices/native.py`) holds the ring's `wptr` (the host's doorbell: the
    processor sleeps on it when idle), `rptr`, a closed flag, the device's timeline address, the poison of the
    submission in progress and the profile-event counter. A subclass implements `start`, which runs a consumer of
    exactly this memory (`CPUCommandProcessor` starts the native loop on a native thread), and may extend `close`.
    """

    def __init__(self, device: HCQDevice, engine: Engine, ring_words: int = RING_WORDS) -> None:
        super().__init__(device, engine)
        self.ctl, self.ctl_addr = native.alloc_words(native.CTL_WORDS)
        self._ctl_view = word_view(self.ctl)     # (read per submit: see hcq.Signal.words)
        self.ring = Ring(self.ctl, self.ctl_addr, ring_words)
        self.ring.after_wait = self.keep_events
        events, events_addr = native.alloc_words(native.EVENT_CAP * native.EVENT_WORDS)
        self.events = events.reshape(native.EVENT_CAP, native.EVENT_WORDS)
        self._events_read = 0
        self._stashed: list[np.ndarray] = []        # raw rows taken out of the ring, not yet ProfileEvents
        self._stashed_rows = 0                      # how many
        self._events_lock = threading.Lock()
        ctl = self.ctl
        ctl[native.W_TIMELINE], ctl[native.W_INDEX], ctl[native.W_GLOBAL] = \
            device.timeline.addr, self.index, native.runtime().g_addr
        ctl[native.W_EVENTS], ctl[native.W_EVENT_CAP] = events_addr, native.EVENT_CAP
        ctl[native.W_HOST_CPU] = ctl[native.W_PROCESSOR_CPU] = -1
        # no parallel job is open until the processor posts one: a helper that joined a zeroed (open-looking) job
        # block would bump its claim counter and make the first real job skip core id 0
        ctl[native.W_JOB_CLOSED] = 1
        self.cpu_addr = self.ctl_addr + 8 * native.W_PROCESSOR_CPU     # where it notes the core it runs on

    def close(self) -> None:
        """Ask the processor to stop once it is idle (or at its next WAIT slice); packets left are dropped."""
        if self.closed:
            return
        super().close()
        self.ctl[native.W_CLOSED] = 1                  # the processor polls it; the wake's syscall orders the store
        native.runtime().wake(self.ctl_addr + 8 * native.W_WPTR)

    def fault_error(self, kind: int, a: int, b: int, c: int, d: int) -> HCQError:
        """The exception for a fault this engine recorded (kind and words a..d as in `native.F_*`)."""
        if kind == native.F_HOST_EXEC:            # a: exception token, b: program id, c: core id
            exc = _HOST_EXCEPTIONS.pop(a, None)
            what = f"EXEC of {_PROGRAM_NAMES.get(b, f'program #{b}')!r}"
            err = HCQExecError(f"{self.label}: {what} failed: {type(exc).__name__}: {exc}")
            err.__cause__ = exc
            return err
        if kind == native.F_WAIT_TIMEOUT:         # a: signal address, b: awaited value, c: seen, d: timeout ns
            sig = _SIGNALS.get(a)
            waiter = f"WAIT packet on {self.label}"
            if sig is None:
                return HCQTimeoutError(f"{waiter} timed out: for {d / 1e9:g} s no device made progress while it "
                                       f"waited for the signal at {a:#x} to reach {b}; it is at {c}")
            return HCQTimeoutError(sig._timeout_message(b, d / 1e9, waiter, seen=c))
        if kind == native.F_OPCODE:               # a: the opcode
            return HCQError(f"{self.label}: unknown packet opcode {a}")
        if kind == native.F_CONTROL:              # a: the cause, b: the packet's word position in its block
            what = {native.CONTROL_OUTSIDE_BLOCK: "a JUMP outside any BLOCK",
                    native.CONTROL_TARGET: f"a JUMP at word {b} by {c} words leaves its BLOCK of {d} words",
                    native.CONTROL_OVERRUN: f"the packet at word {b} runs past the end of its BLOCK of {c} words"}
            return HCQError(f"{self.label}: {what.get(a, f'control fault {a}')}")
        if kind == native.F_INDEX:                # a: the index, b: the count
            return HCQError(f"{self.label}: indexed COPY with index {a}, outside [0, {b})")
        return HCQError(f"{self.label}: fault of unknown kind {kind}")

    def describe(self, at: int) -> str:
        """The packet at ring word `at`, read without synchronisation (a packet just finished may show)."""
        words = self.ring.words
        pos = at % self.ring.nwords
        op = int(words[pos]) & OP_MASK
        where = f"ring word {at}"
        if op == Op.EXEC:
            pid = int(words[pos + 1 + _EXEC.word("program_id")])
            gs = int(words[pos + 1 + _EXEC.word("global_size")])
            return f"{where}: EXEC of {_PROGRAM_NAMES.get(pid, f'program #{pid}')!r} (global size {gs})"
        if op == Op.WAIT:
            addr = int(words[pos + 1 + _WAIT.word("signal")])
            sig = _SIGNALS.get(addr)
            name = repr(sig.name) if sig is not None else f"at {addr:#x}"
            now = f", now {sig.value}" if sig is not None else ""
            return f"{where}: WAIT for signal {name} to reach {int(words[pos + 1 + _WAIT.word('value')])}{now}"
        if op == Op.BLOCK:
            return f"{where}: a BLOCK (a loop or branch run on the device)"
        return f"{where}: {Op(op).name if op in {o.value for o in Op} else f'opcode {op}'}"

    def keep_events(self) -> None:
        """Stash the events once the event ring is half full (`events_pending > EVENT_CAP // 2`, spelled out: this
        runs on every submit)."""
        if self._ctl_view[native.W_EVENTS_W] > self._events_read + native.EVENT_CAP // 2:
            self.stash_events()

    def _take_events(self) -> np.ndarray:
        """The raw rows (program id, size, start, end) recorded since the last take, oldest first."""
        written = int(self.ctl[native.W_EVENTS_W])
        first = max(self._events_read, written - native.EVENT_CAP)
        a, b = first % native.EVENT_CAP, written % native.EVENT_CAP
        # slices, not an index array (taken every 2,048 events: a GP step's 794 commands paid 15 us a step for it)
        rows = self.events[a:b].copy() if a < b or first == written else \
            np.concatenate((self.events[a:], self.events[:b]))
        # rows the processor overwrote (or was overwriting) while they were copied
        lapped = max(0, int(self.ctl[native.W_EVENTS_W]) + 1 - native.EVENT_CAP - first)
        self.events_lost += first - self._events_read + lapped
        self._events_read = written
        return rows[lapped:]

    def stash_events(self) -> None:
        """Copy the events recorded so far out of the ring before the processor overwrites them, as raw rows: no
        Python object per event (a submit does this when the ring is half full); `drain_events` converts them."""
        with self._events_lock:
            self._stashed.append(rows := self._take_events())
            self._stashed_rows += len(rows)
            while self._stashed_rows > PROFILE_EVENTS_KEPT + native.EVENT_CAP:
                self._stashed_rows -= len(self._stashed.pop(0))

    def drain_events(self) -> None:
        """Move the events the processor recorded since the last drain to the device's profile (and print the lines
        of those whose launching thread had DEBUG>=1: `hcq.Launcher`)."""
        with self._events_lock:
            if self._events_read == int(self.ctl[native.W_EVENTS_W]) and not self._stashed:
                return
            chunks, self._stashed, self._stashed_rows = [*self._stashed, self._take_events()], [], 0
            rows = np.concatenate(chunks)
            # (matched while the lock keeps the events in order: an earlier one's submission is dropped from
            # `launches` as a later one's is found)
            whose = [launcher_at(self.launches, at) for at in rows[:, 4].tolist()] if self.launches else \
                [None] * len(rows)
        dev = self.device
        rows[:, 2:4] = native.runtime().stamps_to_ns(rows[:, 2:4])
        for (pid, size, start, end, _), who in zip(rows.tolist(), whose, strict=True):
            if pid == 0:
                dev._record(ProfileEvent(dev.name, self.engine.value, "copy", start, end, size, 0), None, who)
            else:
                name = _PROGRAM_NAMES.get(pid, f"program #{pid}")
                dev._record(ProfileEvent(dev.name, self.engine.value, name, start, end, 0, size), _PROGRAMS.get(pid),
                            who)

    @property
    def events_pending(self) -> int:
        """Events recorded and not drained yet."""
        return int(self.ctl[native.W_EVENTS_W]) - self._events_read
