"""The CUDA backend's translation of packets into driver calls on an engine's stream (`Translator`: a pure function
of the packet words over a `Driver`, so that it is tested without a GPU), and what it needs to know about memory.

Per packet (`tgfx/devices/packets.py`):

    EXEC       cuLaunchKernel: the packet's buf_ptr and val words, in place, are the kernel's parameter buffer
               (kernel ABI: one 8-byte parameter per word, buffers first); global_size counts threads along x, the
               grid is global_size / block.x blocks
    COPY       cuMemcpy{HtoD,DtoH,DtoD,Peer}Async; host memory that is not pinned goes through a pinned staging
               buffer, copied to or from by a native host function run in stream order (a pageable copy would
               block the submitting thread until the stream's earlier WAITs pass)
    WAIT       cuStreamWaitValue64(signal, value, GEQ) on the signal's page, registered with cuMemHostRegister:
               the same 64-bit host words the CPU devices wait on and write
    SIGNAL     cuStreamWriteValue64, then a native host function that wakes host threads asleep on the word (a GPU
               write does not wake a futex). Measured on an H200: waking them from a Python thread after an event
               instead made a tiny jitted call 2x slower (the GIL changed hands around every driver call)
    TIMESTAMP  a native host function that stores CLOCK_MONOTONIC (the CPU devices' clock) in ns, then wakes
    BARRIER    nothing: a stream runs in order, and its value writes are fenced
    BLOCK, JUMP, WRITE, ADD, indexed COPY: device-side control flow (`tg.lax` loops and branches), which a stream
               cannot express, is driven from the host: such a submission is translated on the engine's control
               thread (`CUDARing`; later submissions of the engine queue behind it, so the submitting thread never
               waits), which walks the BLOCK itself. WRITE and ADD become cuStreamWriteValue64 of the value the host
               computes; a JUMP, an ADD or an indexed COPY reads its word on the host: from the words WRITE and ADD
               set (a loop counter: the host knows it, and issues a counted loop's steps with no wait), else (a
               while loop's predicate, a branch index, a counter copied from a trip count) after the stream has run
               up to it, one wait and an 8-byte read per use. Kernels only read the words WRITE and ADD set (the
               lowering's counters, `tgfx/lowering/control.py`); a COPY into one makes the host read it again
    EXEC of a host program (`EXEC_HOST_FN`: `tg.debug.print`, `pure_callback`, ...): on the control thread too, once
               the stream has run up to it: its buffers are read into host memory (`Program.host_buffers`: their
               sizes), the Python function runs, and the buffers it writes go back through pinned staging on the
               stream; an exception it raises is the device's error (`HCQExecError`, raised by the next
               synchronisation, as on the CPU) and the submission goes on

Every EXEC and COPY is bracketed by two events for the profile (`Issued.timed`).

A submission without host-driven control is translated once into a `Plan` (`Translator.prepare`): its launches with
their driver arguments built, kept while its words array lives and its static words (headers, kernels, global sizes)
are unchanged. A replay (a jitted call) then issues those launches, reading only the words that change per call (the
timeline's WAIT and SIGNAL, copies): a 19-kernel MLP train step took 273 Python calls a replay, 9 a kernel, and
the driver wrapper built eleven ctypes arguments per launch.
"""
from __future__ import annotations

import bisect
import ctypes
import functools
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgfx.devices.cuda_driver import (
    CU_MEMHOSTALLOC_DEVICEMAP,
    CU_MEMHOSTALLOC_PORTABLE,
    CU_MEMHOSTREGISTER_DEVICEMAP,
    CU_MEMHOSTREGISTER_PORTABLE,
    CudaError,
    Driver,
)
from tgfx.devices.hcq import (
    _SIGNALS,
    HCQError,
    HCQExecError,
    Program,
    host_runtime,
)
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
    Op,
)
from tgfx.devices.programs import _PROGRAMS

PAGE = 4096
STAGING_MIN = 64 << 10      # staging buffers come in powers of two from this size
STAGING_KEPT = 8            # idle staging buffers kept per size

_EXEC, _COPY, _WAIT, _SIGNAL, _TIMESTAMP = (PACKETS[op] for op in (Op.EXEC, Op.COPY, Op.WAIT, Op.SIGNAL,
                                                                    Op.TIMESTAMP))
# the translator's hot path reads opcodes and payload words as plain ints
_OP_EXEC, _OP_COPY, _OP_WAIT, _OP_SIGNAL, _OP_TIMESTAMP = (int(p.op) for p in (_EXEC, _COPY, _WAIT, _SIGNAL,
                                                                                _TIMESTAMP))
_OP_BLOCK, _OP_JUMP, _OP_WRITE, _OP_ADD = int(Op.BLOCK), int(Op.JUMP), int(Op.WRITE), int(Op.ADD)
# control flow on device words: a stream cannot run it, the host drives it (`Translator.host_driven`)
_CONTROL = frozenset((_OP_BLOCK, _OP_JUMP, _OP_WRITE, _OP_ADD))
_EXEC_PROGRAM, _EXEC_GLOBAL_SIZE, _EXEC_NBUFS, _EXEC_NVALS = (_EXEC.word(n) for n in ("program_id", "global_size",
                                                                                       "nbufs", "nvals"))
_EXEC_FIXED = _EXEC.fixed_words
_COPY_DST, _COPY_SRC, _COPY_NBYTES = (_COPY.word(n) for n in ("dst", "src", "nbytes"))
_WAIT_SIGNAL, _WAIT_VALUE = _WAIT.word("signal"), _WAIT.word("value")
_SIGNAL_SIGNAL, _SIGNAL_VALUE = _SIGNAL.word("signal"), _SIGNAL.word("value")
_TIMESTAMP_SIGNAL = _TIMESTAMP.word("signal")
_COPY_INDEX, _COPY_DST_STRIDE, _COPY_SRC_STRIDE, _COPY_COUNT = (_COPY.word(n) for n in ("index_ptr", "dst_stride",
                                                                                       "src_stride", "count"))
_JUMP_WORD, _JUMP_VALUE, _JUMP_OFFSET = (PACKETS[Op.JUMP].word(n) for n in ("word_ptr", "value", "offset"))
_WRITE_WORD, _WRITE_VALUE = PACKETS[Op.WRITE].word("word_ptr"), PACKETS[Op.WRITE].word("value")
_ADD_WORD, _ADD_VALUE = PACKETS[Op.ADD].word("word_ptr"), PACKETS[Op.ADD].word("value")


class CudaBackendError(HCQError):
    """A submission the CUDA backend cannot run, or a failure it saw on the device."""


# ---------------------------------------------------------------------------------------------------------------
# what the translation needs to know about addresses

class AddressMap:
    """Address ranges and their owners: device allocations (owner: the CUDADevice) and pinned host memory (owner:
    "pinned"). What a COPY's direction, and whether it needs staging, is read from."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ranges: dict[int, tuple[int, Any]] = {}     # start -> (end, owner)
        self._lock = threading.Lock()

    def add(self, start: int, nbytes: int, owner: Any) -> None:
        with self._lock:
            bisect.insort(self._starts, start)
            self._ranges[start] = (start + max(nbytes, 1), owner)

    def remove(self, start: int) -> None:
        with self._lock:
            if self._ranges.pop(start, None) is not None:
                self._starts.pop(bisect.bisect_left(self._starts, start))

    def owner(self, addr: int) -> Any:
        """The owner of the range holding `addr`, or None (pageable host memory)."""
        with self._lock:
            i = bisect.bisect_right(self._starts, addr) - 1
            if i < 0:
                return None
            end, owner = self._ranges[self._starts[i]]
            return owner if addr < end else None


MEMORY = AddressMap()   # the process's: device addresses are unique across contexts (unified addressing)


class HostPages:
    """Host pages registered with the driver (`cuMemHostRegister`, portable and mapped), so that streams can wait
    on and write signals in them. A signal's words stay registered for the life of the process (so does the
    Signal, kept here: its page must not be freed while registered)."""

    def __init__(self, drv: Driver, memory: AddressMap) -> None:
        self.drv, self.memory = drv, memory
        self._device_addr: dict[int, int] = {}     # host page -> its device address
        self._keep: list[Any] = []
        self._lock = threading.Lock()

    def device_addr(self, addr: int, keep: Any = None) -> int:
        """The device address of host word `addr` (registering its page on first use)."""
        page = addr & ~(PAGE - 1)
        base = self._device_addr.get(page)
        if base is None:
            with self._lock:
                if (base := self._device_addr.get(page)) is None:
                    if self.memory.owner(addr) != "pinned":   # memory the driver allocated is mapped already
                        self.drv.cuMemHostRegister(page, PAGE, CU_MEMHOSTREGISTER_PORTABLE |
                                                   CU_MEMHOSTREGISTER_DEVICEMAP)
                    base = self._device_addr[page] = self.drv.cuMemHostGetDevicePointer(page)
                    if keep is not None:
                        self._keep.append(keep)
        return base + (addr - page)


class Staging:
    """Pinned host buffers for copies from and to pageable memory, reused by size (powers of two)."""

    def __init__(self, drv: Driver, memory: AddressMap) -> None:
        self.drv, self.memory = drv, memory
        self._free: dict[int, list[int]] = {}
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> tuple[int, Callable[[], None]]:
        """A pinned buffer of at least `nbytes` and the function that gives it back."""
        size = max(STAGING_MIN, 1 << max(nbytes - 1, 0).bit_length())
        with self._lock:
            free = self._free.setdefault(size, [])
            ptr = free.pop() if free else 0
        if not ptr:
            ptr = self.drv.cuMemHostAlloc(size, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)
            self.memory.add(ptr, size, "pinned")
        return ptr, functools.partial(self._give, size, ptr)

    def _give(self, size: int, ptr: int) -> None:
        with self._lock:
            free = self._free[size]
            if len(free) < STAGING_KEPT:
                free.append(ptr)
                return
        self.memory.remove(ptr)
        self.drv.cuMemFreeHost(ptr)


# ---------------------------------------------------------------------------------------------------------------
# native host functions run by the driver in stream order (`cuLaunchHostFunc`): no Python, no GIL

_HOST_FNS_IR = r"""
declare i32 @clock_gettime(i32, ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

; job = {dst, src, nbytes}: a staging copy
define void @tgfx_cuda_copy(ptr %job) {
  %d = load ptr, ptr %job
  %sp = getelementptr i64, ptr %job, i64 1
  %s = load ptr, ptr %sp
  %np = getelementptr i64, ptr %job, i64 2
  %n = load i64, ptr %np
  call void @llvm.memcpy.p0.p0.i64(ptr %d, ptr %s, i64 %n, i1 false)
  fence seq_cst
  ret void
}

; *sig = CLOCK_MONOTONIC in ns (the CPU devices' clock: time.perf_counter_ns)
define void @tgfx_cuda_timestamp(ptr %sig) {
  %ts = alloca [2 x i64]
  %r = call i32 @clock_gettime(i32 1, ptr %ts)
  %s = load i64, ptr %ts
  %np = getelementptr i64, ptr %ts, i64 1
  %n = load i64, ptr %np
  %ns = mul i64 %s, 1000000000
  %t = add i64 %ns, %n
  store atomic i64 %t, ptr %sig seq_cst, align 8
  ret void
}
"""


@dataclass(frozen=True)
class HostFns:
    """Addresses of `void fn(void *)` functions for `cuLaunchHostFunc`."""
    wake: int        # wake every thread asleep on a signal word (the native runtime's `tgfx_wake`)
    copy: int        # run a staging copy job {dst, src, nbytes}
    timestamp: int   # store the clock in a signal word


@functools.cache
def native_host_fns() -> HostFns:
    """The host functions, compiled once per process (llvmlite, as the CPU processor is)."""
    import llvmlite.binding as llvm
    rt = host_runtime()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
    mod = llvm.parse_assembly(_HOST_FNS_IR)
    mod.verify()
    ee = llvm.create_mcjit_compiler(mod, tm)
    ee.finalize_object()
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(ee))   # driver threads may call into it until the process ends
    wake = ctypes.cast(rt.wake, ctypes.c_void_p).value   # type: ignore[attr-defined]
    return HostFns(int(wake or 0), ee.get_function_address("tgfx_cuda_copy"),
                   ee.get_function_address("tgfx_cuda_timestamp"))


# ---------------------------------------------------------------------------------------------------------------
# programs

class CUDAProgram(Program):
    """A kernel loaded on a CUDA device: a CUfunction launched with `block` threads per block.

    Args:
        name: the kernel's name (its PTX entry).
        function: the CUfunction handle.
        block: threads per block (x, y, z).
        grid_yz: blocks along the grid's y and z axes (x comes from the EXEC's global_size).
        shared_bytes: dynamic shared memory per block.
        device: the name of the device it was loaded on (a CUfunction belongs to one context).
        keepalive: what owns the module (it is unloaded when that is collected).
        params: the 8-byte parameters the kernel takes (an EXEC must give that many words), None: not known.
    """

    def __init__(self, name: str, function: int, block: Sequence[int], grid_yz: Sequence[int] = (1, 1),
                 shared_bytes: int = 0, device: str = "", keepalive: Any = None, params: int | None = None) -> None:
        super().__init__(name, function, keepalive)
        self.block = tuple(int(b) for b in (*block, 1, 1)[:3])
        self.grid_yz = tuple(int(g) for g in (*grid_yz, 1, 1)[:2])
        self.shared_bytes, self.device, self.params = int(shared_bytes), device, params

    def grid(self, global_size: int) -> tuple[int, int, int]:
        """The grid for an EXEC of `global_size` threads along x."""
        return (-(-global_size // self.block[0]), *self.grid_yz)


# ---------------------------------------------------------------------------------------------------------------
# packets -> driver calls

@dataclass
class Issued:
    """What translating one submission left to hold until it completes, and what it ran."""
    keep: list[Any] = field(default_factory=list)            # staging jobs, parameter words
    release: list[Callable[[], None]] = field(default_factory=list)   # staging buffers to give back
    kernels: list[str] = field(default_factory=list)
    timed: list[tuple[str, int, int, int, int]] = field(default_factory=list)  # (name, start ev, end ev, nbytes, gs)
    events: list[int] = field(default_factory=list)          # the events `timed` uses, each once
    who: Any = None    # the thread that submitted it, if its DEBUG lines are wanted (`hcq.Launcher`)


def _raise(err: HCQError) -> None:
    raise err


@dataclass(eq=False)
class Plan:
    """A submission decided once (`Translator.prepare`): `steps` are, in order, a launch prepared with its driver
    arguments `(launch, kernel name, global size)`, or a packet translated when it is issued `(None, at)` (a WAIT,
    SIGNAL, COPY or TIMESTAMP: their words change per call). `index` and `values` are the words the steps were
    decided from; `host_driven`: the submission has device-side control flow (no steps: the control thread walks it)."""
    words: weakref.ref
    index: np.ndarray
    values: np.ndarray
    steps: list[tuple[Any, ...]]
    host_driven: bool


class Translator:
    """Turns packets into calls on `drv` for one engine's `stream`: a pure function of the words over the driver
    surface, tested with a recording double of `Driver`.

    Args:
        drv: the driver (or a double of it).
        stream: the engine's CUstream.
        label: "device/engine", for errors.
        device: the engine's device (its `ctx` is what peer copies name), compared with address owners.
        memory: which addresses are device memory (of which device) or pinned host memory.
        pages: the registry of host pages streams wait on and write.
        staging: pinned buffers for copies from and to pageable memory.
        host_fns: the native host functions.
        timeline: the address of the device's timeline signal (its WAITs on values this engine wrote are skipped).
        events: a source of CUevents for profiling (None: no profile events).
    """

    def __init__(self, drv: Any, stream: int, label: str, device: Any, memory: AddressMap, pages: HostPages,
                 staging: Staging, host_fns: HostFns, timeline: int = 0,
                 events: Callable[[], int] | None = None) -> None:
        self.drv, self.stream, self.label, self.device = drv, stream, label, device
        self.memory, self.pages, self.staging, self.host_fns = memory, pages, staging, host_fns
        self.timeline, self.events = timeline, events
        self.timeline_written = 0    # the latest value of the device's timeline this stream writes
        self._mark = 0               # the event recorded after the stream's latest operation, 0: none
        self._known: dict[int, int] = {}   # control words' values, as this submission's WRITEs and ADDs set them
        self._sync_event = 0         # recorded to wait for the stream before the host reads a control word
        self.alive: Callable[[], bool] = lambda: True   # False once the engine is closed (a host-driven loop stops)
        self.fault: Callable[[HCQError], None] = _raise  # what a host program's exception becomes (the device's error)
        self._launches: dict[int, tuple[Callable[[], None], str, int]] = {}   # `run`'s EXECs by payload word
        self._plans: dict[int, Plan] = {}   # id(words) -> its plan, while the words array lives (one submitting thread)

    @staticmethod
    def host_driven(words: np.ndarray, starts: Sequence[int]) -> bool:
        """Whether the submission holds control flow on device words (BLOCK, JUMP, WRITE, ADD, an indexed COPY),
        which the host drives: it may wait for the stream, so it is translated on the engine's control thread."""
        for at in starts[:-1]:
            hdr = int(words[at])
            op = hdr & OP_MASK
            if op in _CONTROL or op == _OP_COPY and hdr & COPY_INDEXED or op == _OP_EXEC and hdr & EXEC_HOST_FN:
                return True
        return False

    def run(self, words: np.ndarray, starts: Sequence[int]) -> Issued:
        """Issue the packets of `words` (`starts`: packet boundaries, ending with len(words))."""
        issued, w, base = self._begin(words)
        self._launches = {}
        for at in starts[:-1].tolist() if isinstance(starts, np.ndarray) else starts[:-1]:
            self._packet(w, at, base, issued)
        return issued

    def _begin(self, words: np.ndarray) -> tuple[Issued, list[int], int]:
        """A submission's translation starts: what it issues (holding `words`), its words as ints, their address."""
        self._mark = 0
        self._known = {}
        return Issued(keep=[words]), words.tolist(), words.ctypes.data

    def prepare(self, words: np.ndarray, starts: np.ndarray) -> Plan:
        """The plan of submission `words` (`starts`: its packet boundaries): the one made when this array was last
        submitted if its static words are unchanged (a replay's command buffer), else a new one."""
        plan = self._plans.get(id(words))
        if plan is not None and plan.words() is words and np.array_equal(words[plan.index], plan.values):
            return plan
        w, base = words.tolist(), words.ctypes.data
        index, steps = [], []
        host_driven = self.host_driven(words, starts)
        for at in starts[:-1].tolist() if not host_driven else ():
            hdr = w[at]
            index.append(at)
            if hdr & OP_MASK == _OP_EXEC:
                p = at + 1
                index += [p + _EXEC_PROGRAM, p + _EXEC_GLOBAL_SIZE, p + _EXEC_NBUFS, p + _EXEC_NVALS]
                steps.append(self._launch(w, p, base, (hdr >> NWORDS_SHIFT) & NWORDS_MASK))
            elif hdr & OP_MASK in (_OP_COPY, _OP_WAIT, _OP_SIGNAL, _OP_TIMESTAMP):
                steps.append((None, at))
        key, plans = id(words), self._plans
        # the callback runs as the array dies, before another array can take its id
        plan = Plan(weakref.ref(words, lambda _: plans.pop(key, None)), np.array(index, np.int64),
                    words[index], steps, host_driven)
        plans[key] = plan
        return plan

    def replay(self, plan: Plan, words: np.ndarray) -> Issued:
        """Issue the submission of `plan` (not host-driven) from its current `words`."""
        issued, w, base = self._begin(words)
        for step in plan.steps:
            if step[0] is None:
                self._packet(w, step[1], base, issued)
            else:
                self._launched(issued, step)
        return issued

    def _packet(self, w: list[int], at: int, base: int, issued: Issued) -> None:
        hdr = w[at]
        op = hdr & OP_MASK
        p = at + 1   # payload
        if op == _OP_EXEC:
            if hdr & EXEC_HOST_FN:
                self._host_exec(w, p, base, issued)
            else:
                self._exec(w, p, base, issued, (hdr >> NWORDS_SHIFT) & NWORDS_MASK)
        elif op == _OP_COPY:
            if hdr & COPY_INDEXED:
                self._indexed_copy(w, p, issued)
            else:
                self._copy(w[p + _COPY_DST], w[p + _COPY_SRC], w[p + _COPY_NBYTES], issued)
        elif op == _OP_WAIT:
            self._wait(w[p + _WAIT_SIGNAL], w[p + _WAIT_VALUE])
        elif op == _OP_SIGNAL:
            self._signal(w[p + _SIGNAL_SIGNAL], w[p + _SIGNAL_VALUE])
        elif op == _OP_TIMESTAMP:
            sig = w[p + _TIMESTAMP_SIGNAL]
            self.drv.cuLaunchHostFunc(self.stream, self.host_fns.timestamp, sig)
            self.drv.cuLaunchHostFunc(self.stream, self.host_fns.wake, sig)
            self._mark = 0
        elif op == _OP_BLOCK:
            self._block(w, p, p + ((hdr >> NWORDS_SHIFT) & NWORDS_MASK), base, issued)
        elif op == _OP_WRITE:
            self._write(w[p + _WRITE_WORD], w[p + _WRITE_VALUE])
        elif op == _OP_ADD:
            word = w[p + _ADD_WORD]
            self._write(word, self._word(word, 8, issued) + w[p + _ADD_VALUE])
        elif op == _OP_JUMP:
            raise CudaBackendError(f"{self.label}: a JUMP outside a BLOCK (a malformed submission: a JUMP moves only "
                                   f"within the BLOCK that holds it)")
        # NOP and BARRIER: nothing (a stream runs in order; its value writes are fenced)

    # ---- control flow, driven by the host ----
    def _block(self, w: list[int], begin: int, end: int, base: int, issued: Issued) -> None:
        """Run a BLOCK's packets in w[begin:end], its JUMPs decided here (the CPU processor's `run_block`)."""
        starts, at = [], begin
        while at < end:
            starts.append(at)
            at += 1 + ((w[at] >> NWORDS_SHIFT) & NWORDS_MASK)
        if at != end:
            raise CudaBackendError(f"{self.label}: the packets of a BLOCK of {end - begin} words overrun it")
        index = {a: k for k, a in enumerate(starts)}
        index[end] = len(starts)
        k = 0
        while k < len(starts):
            at = starts[k]
            hdr = w[at]
            if hdr & OP_MASK != _OP_JUMP:
                self._packet(w, at, base, issued)
                k += 1
                continue
            if not self._taken(w, at + 1, hdr >> FLAGS_SHIFT, issued):
                k += 1
                continue
            target = (starts[k + 1] if k + 1 < len(starts) else end) + w[at + 1 + _JUMP_OFFSET]
            dest = index.get(target)
            if dest is None:
                raise CudaBackendError(f"{self.label}: a JUMP to word {target - begin} of a BLOCK of {end - begin} "
                                       f"words, which is not a packet of it")
            if dest <= k:
                self._check_alive()
            k = dest

    def _check_alive(self) -> None:
        if not self.alive():
            raise CudaBackendError(f"{self.label} was closed while the host drove a loop on it")

    def _taken(self, w: list[int], p: int, flags: int, issued: Issued) -> bool:
        cmp = flags & ((1 << JUMP_WIDTH_SHIFT) - 1)
        if cmp == JUMP_ALWAYS:
            return True
        word = self._word(w[p + _JUMP_WORD], (flags >> JUMP_WIDTH_SHIFT) & 0xF, issued)
        value = w[p + _JUMP_VALUE]
        if cmp == JUMP_EQ:
            return word == value
        if cmp == JUMP_NE:
            return word != value
        if cmp == JUMP_LT:
            return word < value
        if cmp == JUMP_GE:
            return word >= value
        raise CudaBackendError(f"{self.label}: a JUMP with comparison code {cmp}, which no packet has")

    def _word(self, addr: int, width: int, issued: Issued) -> int:
        """The signed `width`-byte device word at `addr`: the value WRITE and ADD gave it, else read after the stream
        has run up to here."""
        if width not in (1, 2, 4, 8):
            raise CudaBackendError(f"{self.label}: a device word of {width} bytes (1, 2, 4 or 8)")
        bits = 8 * width
        value = self._known.get(addr)
        if value is None:
            self._drain(issued)
            out = ctypes.c_int64(0)
            try:
                self.drv.cuMemcpyDtoH(ctypes.addressof(out), addr, width)
            except CudaError as e:
                raise e.at(f"reading the {width}-byte control word at {addr:#x} on {self.label}") from None
            value = out.value
        value &= (1 << bits) - 1
        return value - (1 << bits) if value >> (bits - 1) else value

    def _drain(self, issued: Issued) -> None:
        """Wait until the stream has run everything issued so far (polling an event: the wait ends when the GPU gets
        there, however long that takes; a failure on the device is raised)."""
        if not self._sync_event:
            self._sync_event = self.drv.cuEventCreate()
        self.drv.cuEventRecord(self._sync_event, self.stream)
        pause = 0.0
        while True:
            try:
                if self.drv.cuEventQuery(self._sync_event):
                    break
            except CudaError as e:
                kernels = ", ".join(dict.fromkeys(issued.kernels)) or "no kernels"
                raise CudaBackendError(f"{self.label} failed while the host drove a loop or branch ({kernels}): "
                                       f"{e}") from e
            self._check_alive()
            time.sleep(pause)
            pause = min(2 * pause + 1e-5, 1e-3)
        count_retired(1)      # the GPU moved: a host wait on this device is not a stall

    def _write(self, addr: int, value: int) -> None:
        value = (value + (1 << 63)) % (1 << 64) - (1 << 63)     # an int64, as the CPU processor's ADD wraps
        self._mark = 0
        try:
            self.drv.cuStreamWriteValue64(self.stream, addr, value)
        except CudaError as e:
            raise e.at(f"writing control word {addr:#x} on {self.label}") from None
        self._known[addr] = value

    def _host_exec(self, w: list[int], p: int, base: int, issued: Issued) -> None:
        """Run a host program (a callback) on this thread once the stream has reached it, on host copies of its
        buffers; the ones it writes go back in stream order."""
        pid, nbufs = w[p + _EXEC_PROGRAM], w[p + _EXEC_NBUFS]
        prog = _PROGRAMS.get(pid)
        sizes = prog.host_buffers if prog is not None else None
        if prog is None or prog.addr is not None or sizes is None or len(sizes) != nbufs:
            what = repr(prog) if prog is not None else f"program #{pid} (no longer alive)"
            raise CudaBackendError(f"{self.label}: EXEC of host program {what}, which does not say the sizes of its "
                                   f"{nbufs} buffers (Program.host_buffers), so they cannot be copied to the host")
        self._drain(issued)
        ptrs, host = (ctypes.c_uint64 * max(nbufs, 1))(), []
        for k, (addr, nbytes) in enumerate(zip(w[p + _EXEC_FIXED:p + _EXEC_FIXED + nbufs], sizes, strict=True)):
            if self._where(addr) in (None, "pinned"):
                ptrs[k] = addr
                continue
            buf = np.empty(max(nbytes, 1), np.uint8)
            if nbytes:
                self.drv.cuMemcpyDtoH(buf.ctypes.data, addr, nbytes)
            host.append((k, addr, nbytes, buf))
            ptrs[k] = buf.ctypes.data
        vals = base + 8 * (p + _EXEC_FIXED + nbufs)
        try:
            for core in range(w[p + _EXEC_GLOBAL_SIZE]):
                prog.call(ctypes.addressof(ptrs), vals, core)
        except Exception as e:  # noqa: BLE001 -- the user's exception, raised on the host by the next synchronisation
            err = HCQExecError(f"{self.label}: EXEC of {prog.name!r} failed: {type(e).__name__}: {e}")
            err.__cause__ = e
            self.fault(err)
        for k, addr, nbytes, buf in host:
            if k < prog.host_writes and nbytes:
                issued.keep.append(buf)        # read by the staging copy when the stream gets there
                self._copy(addr, buf.ctypes.data, nbytes, issued)
        issued.kernels.append(prog.name)

    def _indexed_copy(self, w: list[int], p: int, issued: Issued) -> None:
        i, count = self._word(w[p + _COPY_INDEX], 8, issued), w[p + _COPY_COUNT]
        if not 0 <= i < count:
            raise CudaBackendError(f"{self.label}: a COPY indexed by the device word at {w[p + _COPY_INDEX]:#x}, "
                                   f"which holds {i}, outside 0..{count - 1}")
        self._copy(w[p + _COPY_DST] + i * w[p + _COPY_DST_STRIDE], w[p + _COPY_SRC] + i * w[p + _COPY_SRC_STRIDE],
                   w[p + _COPY_NBYTES], issued)

    def _timed(self, issued: Issued, name: str, nbytes: int, gs: int, issue: Callable[[], None]) -> None:
        """Issue a kernel or copy between two events. The event after one is the event before the next when nothing
        else went to the stream between them: a run of kernels records one event per kernel, not two."""
        if self.events is None:
            issue()
            return
        start = self._mark
        if not start:
            start = self.events()
            self.drv.cuEventRecord(start, self.stream)
            issued.events.append(start)
        issue()
        end = self.events()
        self.drv.cuEventRecord(end, self.stream)
        issued.events.append(end)
        issued.timed.append((name, start, end, nbytes, gs))
        self._mark = end

    def _exec(self, words: list[int], p: int, base: int, issued: Issued, nwords: int) -> None:
        # a loop's BLOCK issues its launches once an iteration: each is prepared once a submission (its packet words
        # do not change while it runs)
        if (prepared := self._launches.get(p)) is None:
            prepared = self._launches[p] = self._launch(words, p, base, nwords)
        self._launched(issued, prepared)

    def _launched(self, issued: Issued, prepared: tuple[Callable[[], None], str, int]) -> None:
        """Issue a prepared launch (`_launch`'s), timed for the profile."""
        launch, name, gs = prepared
        self._timed(issued, name, 0, gs, launch)
        issued.kernels.append(name)

    def _launch(self, words: list[int], p: int, base: int, nwords: int) -> tuple[Callable[[], None], str, int]:
        """The EXEC packet at payload `p` as a prepared launch, the kernel's name and the global size."""
        pid = words[p + _EXEC_PROGRAM]
        prog = _PROGRAMS.get(pid)
        if not isinstance(prog, CUDAProgram):
            what = repr(prog) if prog is not None else f"program #{pid} (no longer alive)"
            raise CudaBackendError(f"{self.label}: EXEC of {what}, which is not a kernel loaded on a CUDA device: "
                                   f"kernels for CUDA devices come from CUDADevice.lower_kernel")
        if prog.device and self.device is not None and prog.device != self.device.name:
            raise CudaBackendError(f"{self.label}: kernel {prog.name!r} was loaded on {prog.device}; a CUfunction "
                                   f"runs only in its own device's context")
        gs = words[p + _EXEC_GLOBAL_SIZE]
        nargs = words[p + _EXEC_NBUFS] + words[p + _EXEC_NVALS]
        assert _EXEC_FIXED + nargs == nwords, "EXEC payload and its argument counts disagree"
        if prog.params is not None and nargs != prog.params:
            raise CudaBackendError(f"{self.label}: EXEC of kernel {prog.name!r} with {nargs} argument words, but it "
                                   f"takes {prog.params} 8-byte parameters")
        params = base + 8 * (p + _EXEC_FIXED)   # the argument words, in place: the driver copies them
        grid = prog.grid(gs)
        where = f"kernel {prog.name!r} on {self.label}, grid {grid}, block {prog.block}"
        launch = self.drv.prepare_launch(prog.fn_addr, grid, prog.block, prog.shared_bytes, self.stream, params,
                                         8 * nargs, where)
        return launch, prog.name, gs

    def _where(self, addr: int) -> Any:
        return self.memory.owner(addr)

    def _copy(self, dst: int, src: int, nbytes: int, issued: Issued) -> None:
        if nbytes == 0:
            return
        if self._known:     # a control word written over: read it again when it is next used
            for addr in [a for a in self._known if dst <= a < dst + nbytes]:
                del self._known[addr]
        d, s = self._where(dst), self._where(src)
        dev_d, dev_s = d not in (None, "pinned"), s not in (None, "pinned")
        drv, stream = self.drv, self.stream

        def staged(host_dst: int, host_src: int) -> None:   # a memcpy on the host, in stream order
            job = np.array([host_dst, host_src, nbytes], dtype=np.int64)
            issued.keep.append(job)
            drv.cuLaunchHostFunc(stream, self.host_fns.copy, job.ctypes.data)

        def issue() -> None:
            if dev_d and dev_s:
                if d is s or d.ctx == s.ctx:        # one device, or logical devices of one GPU
                    drv.cuMemcpyDtoDAsync(dst, src, nbytes, stream)
                else:
                    drv.cuMemcpyPeerAsync(dst, d.ctx, src, s.ctx, nbytes, stream)
            elif dev_d:
                if s == "pinned":
                    drv.cuMemcpyHtoDAsync(dst, src, nbytes, stream)
                else:
                    buf, give = self.staging.take(nbytes)
                    issued.release.append(give)
                    staged(buf, src)
                    drv.cuMemcpyHtoDAsync(dst, buf, nbytes, stream)
            elif dev_s:
                if d == "pinned":
                    drv.cuMemcpyDtoHAsync(dst, src, nbytes, stream)
                else:
                    buf, give = self.staging.take(nbytes)
                    issued.release.append(give)
                    drv.cuMemcpyDtoHAsync(buf, src, nbytes, stream)
                    staged(dst, buf)
            else:
                staged(dst, src)
        try:
            self._timed(issued, "copy", nbytes, 0, issue)
        except CudaError as e:
            raise e.at(f"copy of {nbytes} B from {src:#x} to {dst:#x} on {self.label}") from None

    def _wait(self, sig: int, value: int) -> None:
        if sig == self.timeline and value <= self.timeline_written:
            return   # this stream wrote it: stream order already has it
        self._mark = 0
        try:
            self.drv.cuStreamWaitValue64(self.stream, self.pages.device_addr(sig, _SIGNALS.get(sig)), value)
        except CudaError as e:
            raise e.at(f"WAIT for signal {sig:#x} >= {value} on {self.label}") from None

    def _signal(self, sig: int, value: int) -> None:
        self._mark = 0
        try:
            self.drv.cuStreamWriteValue64(self.stream, self.pages.device_addr(sig, _SIGNALS.get(sig)), value)
            self.drv.cuLaunchHostFunc(self.stream, self.host_fns.wake, sig)
        except CudaError as e:
            raise e.at(f"SIGNAL {sig:#x} = {value} on {self.label}") from None
        if sig == self.timeline:
            self.timeline_written = value


def count_retired(n: int) -> None:
    """Count `n` completed GPU operations as progress, as the CPU's processors count retired packets: a host wait gives
    up only after `TGFX_WAIT_TIMEOUT` without progress anywhere (`hcq._Stall`), so a long run of GPU submissions
    must be seen to move. The count is the native runtime's (a compare-and-swap: its threads add to it too)."""
    from tgfx.devices import native
    rt = native.runtime()
    addr = rt.g_addr + 8 * native.G_RETIRED
    old = int(rt.g[native.G_RETIRED])
    while (seen := rt.cas(addr, old, old + n)) != old:
        old = seen


