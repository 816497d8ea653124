"""native: the CPU command processor, written in LLVM IR and run on native threads that never take the GIL.

`hcq.py` documents what the processor does (signals, errors, profiling) and `packets.py` its packets (the table
the IR below reads its payload words from); this module is the machinery: the shared-memory layouts, the IR of the
processor loop and its helpers, compiled once per process on first use, the threads (started with `pthread_create`
through ctypes) and the host's bindings (`doorbell`, `store_wake`, `wait_ge`, `cas`), which ctypes calls with the
GIL released. Its `Runtime` is the process's `hcq.HostRuntime`.

Threads
-------
Each engine has one processor thread (`tgfx_processor(ctl)`) that consumes its ring. An EXEC with global_size N > 1
is posted as a job in the engine's control block; a process-wide pool of helper threads (`tgfx_helper(g)`, one per
core but one) joins it, and every thread claims core ids with an atomic fetch-add until all N are taken. The
processor also runs core ids itself, then closes the job and waits until every helper that joined has left.

Waiting
-------
Every word a thread may sleep on is a 64-bit counter followed by a 32-bit count of sleepers. A waiter polls for a
few microseconds, then registers as a sleeper and futex-waits on the counter's low 32 bits (little-endian); a
writer stores the counter and issues FUTEX_WAKE only when it sees a sleeper. Both sides use sequentially consistent
operations on the two words, so a wake is never lost (a value that changes by a multiple of 2**32 between a
waiter's read and its sleep is the exception; it costs at most the waiter's timeout slice).

Polling pays only while the thread that will write the word has a core of its own, so: an idle processor polls
for the next packet only while it runs on another core than the host thread that last rang its doorbell, and a host
wait only on another core than the processor; and a processor or helper that loses its core while polling (the
cores are oversubscribed, e.g. by other processes) stops polling for its next `SPIN_HOLDOFF` waits, then polls
for longer and longer again (an adaptive budget, `adaptive_wait`).

Shared memory is allocated with libc and never freed while a thread may still use it: a processor closed at
interpreter exit may still be finishing a kernel, and numpy's memory would already be gone.
"""
from __future__ import annotations

import ctypes
import hashlib
import platform
import string
import sys
import threading
import time
from pathlib import Path
from typing import cast

import numpy as np

from tgfx.devices.hcq import FOREVER_NS, S_ERROR, S_ERROR_AT, HostRuntime, host_runtime, register_host_runtime
from tgfx.devices.packets import (
    COPY_INDEXED,
    EXEC_HOST_FN,
    FLAGS_SHIFT,
    JUMP_ALWAYS,
    JUMP_EQ,
    JUMP_GE,
    JUMP_LT,
    JUMP_NE,
    JUMP_WIDTH_SHIFT,
    NWORDS_MASK,
    NWORDS_SHIFT,
    OP_MASK,
    PACKETS,
    RING_WORDS,
    Op,
    packet_offsets,
)
from tgfx.diskcache import cache_path, read_bytes, write_atomic

# ---------------------------------------------------------------------------------------------------------------
# layouts (int64 word indices)

# a processor's control block: host-written words, processor-written words and constants on separate cache lines
W_WPTR, W_CLOSED, W_HOST_CPU = 0, 2, 3         # words the host wrote to the ring; 1 asks the loop to exit; its core
W_RPTR, W_EXITED = 8, 10                       # words consumed (the host sleeps on it for room); 1 once exited
W_BUSY, W_RETIRED = 12, 13                     # 1 while an EXEC or COPY runs; EXECs and COPYs retired so far
W_SPIN = 14                                    # the processor's adaptive spin state (2 words, its own)
W_RING, W_NWORDS, W_TIMELINE, W_INDEX, W_EVENTS, W_EVENT_CAP, W_GLOBAL = 16, 17, 18, 19, 20, 21, 22
W_PROCESSOR_CPU = 23                           # the core the processor last ran a packet on
W_JOB_FN, W_JOB_BUFS, W_JOB_VALS, W_JOB_GS, W_JOB_CLOSED = 24, 25, 26, 27, 28   # the parallel EXEC in progress
W_JOB_NEXT = 32                                # the next core id to claim
W_JOB_NEGJOINED = 40                           # minus the number of helpers inside the job
W_JOB_JOINS = 42                               # helpers' joins of open jobs of this engine so far (a count for tests)
W_POISON, W_EVENTS_W = 44, 45                  # fault of this submission; profile events written so far
CTL_WORDS = 48
# the words a thread sleeps on (`tgfx_wait_ge`, `adaptive_wait`): each is followed by its 32-bit count of sleepers,
# a word no other field may take (W_JOB_JOINS after W_JOB_NEGJOINED counted the processor's sleeps as joins, and a
# host waiting for room in the ring added itself to W_BUSY, which the processor's plain stores then erased: a lost
# wake-up, and a busy count off by one)
SLEEP_WORDS = (W_WPTR, W_RPTR, W_EXITED, W_JOB_NEGJOINED)

# a profile event: program id (0: a copy), global size (or bytes copied), start and end (`stamp` ticks), and the ring
# word the processor was at (the packet's, or the BLOCK's that holds it; where the ring was for a run inline)
EVENT_WORDS = 5
# per engine, twice a full ring of the smallest EXEC or COPY packets: a submit (and a submit waiting for room in the
# ring) takes the events out once they fill half of this, so however far the processor runs ahead of a host that
# submits nothing more it cannot lap the host; only a BLOCK that loops on the device can (the host counts what was
# overwritten: `CommandProcessor.events_lost`)
EVENT_CAP = 2 * RING_WORDS // min(PACKETS[op].min_words for op in (Op.EXEC, Op.COPY))

# the process-wide block: fault counter, the helpers' wake-up epoch, the job board (every CPU engine's control block)
# and the fault table
G_FAULTS, G_EPOCH, G_SHUTDOWN, G_NBOARD, G_BOARD = 0, 8, 16, 17, 24
# Progress: each engine counts its own EXECs and COPYs (W_BUSY, W_RETIRED: plain stores by its one processor, no
# locked add on a shared line per packet); G_RETIRED is what other backends count (`cuda_translate.count_retired`).
# `progress` sums them over the board. A wait gives up only after its timeout passes with neither any running nor one
# retired: a long healthy computation never times out
G_RETIRED = 392
BOARD_SLOTS = 256                              # engines that may post parallel jobs (one slot each)
G_FAULT_TABLE = 512
FAULT_WORDS, FAULT_CAP = 8, 1024               # record: id (== id while unreported), kind, engine, a, b, c, d
G_WORDS = G_FAULT_TABLE + FAULT_WORDS * FAULT_CAP

F_OPCODE, F_WAIT_TIMEOUT, F_HOST_EXEC, F_CONTROL, F_INDEX = 1, 2, 3, 4, 5   # fault kinds; see fault_error
# F_CONTROL causes (its word a)
CONTROL_OUTSIDE_BLOCK, CONTROL_TARGET, CONTROL_OVERRUN = 1, 2, 3

IDLE_SLICE_NS = 100_000_000    # sleeping threads recheck whether they were closed this often
PREEMPT_GAP_NS = 20_000        # a gap this long between two polls of a spinning thread means it lost its core
SPIN_HOLDOFF = 64              # and it sleeps without spinning for its next this many waits
PROCESSOR_SPIN_NS = 50_000     # an idle processor spins this long for the next packet before it sleeps
HELPER_SPIN_NS = 20_000        # a helper spins this long for the next parallel job
JOIN_SPIN_NS = 100_000         # a processor spins this long for helpers to finish their last core id

# ---------------------------------------------------------------------------------------------------------------
# the IR

# the processor loop and its helpers, a template of `string.Template` (processor.ll beside this module)
_IR = (Path(__file__).parent / "processor.ll").read_text()


def _invariant_tsc() -> bool:
    """Whether the profile events can use the x86 time-stamp counter: it ticks at one rate whatever the core's
    frequency or sleep state (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo), and the kernel keeps its own clock
    on it (the clocksource `tsc`: it found the cores' counters in step, so a packet's two stamps may come from two
    cores)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            source = f.read().strip()
    except OSError:
        return False
    return "constant_tsc" in flags and "nonstop_tsc" in flags and source == "tsc"


STAMPS_ARE_TICKS = _invariant_tsc()


def _relax() -> tuple[str, str]:
    """The spin-wait hint of this CPU (declaration, call)."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i686", "i386"):
        return "declare void @llvm.x86.sse2.pause()", "call void @llvm.x86.sse2.pause()"
    if machine in ("aarch64", "arm64"):
        return "declare void @llvm.aarch64.hint(i32)", "call void @llvm.aarch64.hint(i32 1)"
    return "", ""


_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}


def runtime_ir() -> str:
    """The processor's IR for this machine: `_IR` with this module's layouts and the packet table's field words."""
    sys_futex = _SYS_FUTEX.get(platform.machine().lower())
    if not sys.platform.startswith("linux") or sys_futex is None or sys.byteorder != "little":
        raise RuntimeError(f"the CPU command processor needs Linux futexes on a little-endian x86_64 or aarch64 "
                           f"host; this is {sys.platform} on {platform.machine()}")
    relax_decl, relax_call = _relax()
    if STAMPS_ARE_TICKS:
        relax_decl += "\ndeclare i64 @llvm.readcyclecounter()"
        stamp_body = "%t = call i64 @llvm.readcyclecounter()\n  ret i64 %t"
    else:
        stamp_body = "%t = call i64 @now()\n  ret i64 %t"
    consts = {k.lower(): v for k, v in globals().items() if k.isupper() and isinstance(v, int)}
    # the interface's layouts: a signal's words, the header's bits, and the flags as the processor sees them
    # (shifted down by FLAGS_SHIFT)
    consts.update(s_error=S_ERROR, s_error_at=S_ERROR_AT, op_mask=OP_MASK, nwords_shift=NWORDS_SHIFT,
                  nwords_mask=NWORDS_MASK, flags_shift=FLAGS_SHIFT, exec_host_fn_bit=EXEC_HOST_FN >> FLAGS_SHIFT,
                  copy_indexed_bit=COPY_INDEXED >> FLAGS_SHIFT, jump_cmp_mask=(1 << JUMP_WIDTH_SHIFT) - 1,
                  jump_width_shift=JUMP_WIDTH_SHIFT, jump_always=JUMP_ALWAYS, jump_eq=JUMP_EQ, jump_ne=JUMP_NE,
                  jump_lt=JUMP_LT, jump_ge=JUMP_GE)
    consts.update({f"op_{op.name.lower()}": int(op) for op in Op})
    fields = packet_offsets()
    assert not consts.keys() & fields.keys(), "a layout constant and a packet field share a name in the IR"
    consts.update(fields)
    return string.Template(_IR).substitute(consts, relax_decl=relax_decl, relax_call=relax_call, sys_futex=sys_futex,
                                           stamp_body=stamp_body,
                                           forever=FOREVER_NS, idle_slice=IDLE_SLICE_NS,
                                           processor_spin=PROCESSOR_SPIN_NS, helper_spin=HELPER_SPIN_NS,
                                           join_spin=JOIN_SPIN_NS, preempt_gap=PREEMPT_GAP_NS,
                                           holdoff=SPIN_HOLDOFF)


# ---------------------------------------------------------------------------------------------------------------
# compiled runtime and threads

_libc = ctypes.CDLL(None, use_errno=True)
_libc.aligned_alloc.restype = ctypes.c_void_p
_libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
_libc.pthread_detach.argtypes = [ctypes.c_ulong]


def alloc_words(n: int) -> tuple[np.ndarray, int]:
    """`n` zeroed int64 words of libc memory, 64-byte aligned, as (numpy view, address). Never freed."""
    nbytes = max(64, (8 * n + 63) // 64 * 64)
    addr = _libc.aligned_alloc(64, nbytes)
    if not addr:
        raise MemoryError(f"could not allocate {nbytes} bytes for the command processor")
    ctypes.memset(addr, 0, nbytes)
    return np.ctypeslib.as_array((ctypes.c_int64 * n).from_address(addr)), addr


def _runtime_engine() -> object:
    """An MCJIT engine holding the processor's code (an engine of our own: the devices sit below the compiler, and
    this is no kernel compile, not counted). Its object file is kept in the disk cache, keyed by the IR, the LLVM and
    the host CPU: optimising and emitting it took ~120 ms of every process's first device use."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    tm = llvm.Target.from_default_triple().create_target_machine(cpu=cpu, features=features, opt=2)
    ir = runtime_ir()
    text = f"{ir}|llvm{'.'.join(map(str, llvm.llvm_version_info))}|{cpu}|{features}"
    path = cache_path("runtime", f"{hashlib.sha256(text.encode()).hexdigest()}.o")
    data = read_bytes(path)
    obj = data[32:] if data is not None and hashlib.sha256(data[32:]).digest() == data[:32] else None   # whole?
    if obj is None:
        mod = llvm.parse_assembly(ir)
        mod.verify()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
        pb.getModulePassManager().run(mod, pb)
        obj = tm.emit_object(mod)
        write_atomic(path, hashlib.sha256(obj).digest() + obj)
    ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    ee.add_object_file(llvm.ObjectFileRef.from_data(obj))
    ee.finalize_object()
    return ee


class Runtime(HostRuntime):
    """The compiled processor: ctypes bindings to its host functions, thread entry points and the global block.
    It is the process's `HostRuntime` (registered below): host waits, the fault table and the progress counts."""

    def __init__(self) -> None:
        self.ee = _runtime_engine()
        # the threads run this code until the process ends: never let the engine be collected, even at exit
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(self.ee))
        addr = self.ee.get_function_address
        i64, vp = ctypes.c_int64, ctypes.c_void_p
        self.store_wake = ctypes.CFUNCTYPE(None, vp, i64)(addr("tgfx_store_wake"))
        self.wake = ctypes.CFUNCTYPE(None, vp)(addr("tgfx_wake"))
        self.cas = ctypes.CFUNCTYPE(i64, vp, i64, i64)(addr("tgfx_cas"))
        self.wait_ge = ctypes.CFUNCTYPE(i64, vp, i64, i64, i64, vp, vp)(addr("tgfx_wait_ge"))
        self.doorbell = ctypes.CFUNCTYPE(None, vp, i64)(addr("tgfx_doorbell"))
        self.run_inline = ctypes.CFUNCTYPE(None, vp, vp, i64)(addr("tgfx_run_inline"))
        self._progress = ctypes.CFUNCTYPE(None, vp, vp)(addr("tgfx_progress"))
        self._clock_pair = ctypes.CFUNCTYPE(None, vp)(addr("tgfx_clock_pair"))
        self.processor_fn, self.helper_fn = addr("tgfx_processor"), addr("tgfx_helper")
        self.g, self.g_addr = alloc_words(G_WORDS)
        self.faults = self.g[G_FAULT_TABLE:].reshape(FAULT_CAP, FAULT_WORDS)
        self.fault_counter = self.g[G_FAULTS:G_FAULTS + 1]
        self.fault_capacity = FAULT_CAP
        self.helpers: list[int] = []
        self.lock = threading.Lock()
        self._calibration = self.clock_pair()

    def clock_pair(self) -> tuple[float, int]:
        """(a `stamp`, the CLOCK_MONOTONIC ns read at the same moment)."""
        out = (ctypes.c_int64 * 3)()
        self._clock_pair(out)
        return (out[0] + out[2]) / 2, out[1]

    def stamps_to_ns(self, stamps: np.ndarray) -> np.ndarray:
        """Profile event stamps as CLOCK_MONOTONIC ns: time-stamp counter ticks through the line between two clock
        pairs, the runtime's first and one read now, at least a millisecond apart (off by about one clock read, tens
        of ns, plus what NTP slewed the clock unevenly in between); ns already where the events use the clock."""
        if not STAMPS_ARE_TICKS:
            return stamps
        (t0, ns0), (t1, ns1) = self._calibration, self.clock_pair()
        while ns1 - ns0 < 1_000_000 or t1 <= t0:   # at most once a process: events drained in its first ms
            time.sleep(0.001)
            t1, ns1 = self.clock_pair()
        rate = (ns1 - ns0) / (t1 - t0)
        return np.rint(ns0 + (stamps - t0) * rate).astype(np.int64)

    def fault_record(self, fault_id: int) -> list[int]:
        """The fault table's record for `fault_id`: (id, kind, engine index, a, b, c, d, 0)."""
        return self.faults[(fault_id - 1) % FAULT_CAP].tolist()

    def clear_fault(self, fault_id: int) -> None:
        """Mark `fault_id` reported (its record's id word becomes 0, unless a newer fault took the record)."""
        self.cas(self.g_addr + 8 * (G_FAULT_TABLE + FAULT_WORDS * ((fault_id - 1) % FAULT_CAP)), fault_id, 0)

    def progress(self) -> tuple[int, int]:
        """(EXECs and COPYs running now, retired so far), over every engine."""
        out = (ctypes.c_int64 * 2)()
        self._progress(self.g_addr, out)
        return out[0], out[1]

    def start_thread(self, fn: int, arg: int) -> int:
        """Run native `void *fn(void *arg)` on a new pthread; returns its pthread_t."""
        tid = ctypes.c_ulong()
        err = _libc.pthread_create(ctypes.byref(tid), None, fn, arg)
        if err:
            raise OSError(err, f"pthread_create failed for the command processor: errno {err}")
        return tid.value

    def start_helpers(self, n: int) -> None:
        """Make sure `n` pool threads run parallel EXECs (they live until the process exits)."""
        with self.lock:
            while len(self.helpers) < n:
                tid = self.start_thread(self.helper_fn, self.g_addr)
                _libc.pthread_detach(tid)
                self.helpers.append(tid)

    def post_board(self, ctl_addr: int) -> int:
        """Give an engine a slot on the job board, so helpers join its parallel EXECs; returns the slot."""
        with self.lock:
            free = np.flatnonzero(self.g[G_BOARD:G_BOARD + BOARD_SLOTS] == 0)
            if not len(free):
                raise RuntimeError(f"more than {BOARD_SLOTS} engines are open at once")
            slot = int(free[0])
            self.g[G_BOARD + slot] = ctl_addr
            self.g[G_NBOARD] = max(int(self.g[G_NBOARD]), slot + 1)
            return slot

    def clear_board(self, slot: int) -> None:
        """Give a closed engine's slot back."""
        with self.lock:
            self.g[G_BOARD + slot] = 0

    def shutdown(self) -> None:
        """Ask the pool threads to exit (at interpreter exit)."""
        self.g[G_SHUTDOWN] = 1
        self.wake(self.g_addr + 8 * G_EPOCH)


def runtime() -> Runtime:
    """The process's compiled runtime, built on first use (`hcq.host_runtime`, which also refuses a forked child)."""
    return cast(Runtime, host_runtime())


register_host_runtime(Runtime)


def join_thread(tid: int) -> None:
    """pthread_join (ctypes releases the GIL); call it only once the thread has exited."""
    _libc.pthread_join(tid, None)
