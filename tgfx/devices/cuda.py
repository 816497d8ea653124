"""The CUDA backend (experimental): NVIDIA GPUs as `CUDA:0`, `CUDA:1`, ..., driven through the driver API.

Each device uses its GPU's primary context and has the two engines of every tgfx device, each a CUDA stream. A
submission's packets (`tgfx/devices/packets.py`) are translated into driver calls on the engine's stream when it is
written to the engine's ring (`CUDARing`; the translation, packet by packet, is `tgfx/devices/cuda_translate.py`),
and the stream is the queue that runs them. A submission with control flow on device words (a `tg.lax` loop or
branch) or a host callback is translated on the engine's control thread, which may wait for the stream; later
submissions of the engine queue behind it there, so the submitting thread never waits for the GPU.

Every EXEC and COPY is bracketed by two events for the profile; a submission ends with an event whose completion
moves the ring's read pointer. An asynchronous failure (a kernel's illegal address, a launch that failed) surfaces
when the host next polls the submission's events, as a `CudaError` naming the device and the submission's kernels.
Device memory is cached by size (`CUDAAllocator`): `cuMemFree` waits for the whole GPU.

Kernels are compiled to PTX by `tgfx.lowering.render_nvptx.ptx_of` and loaded with `cuModuleLoadDataEx` (the
driver JIT-compiles PTX; no toolkit is needed at run time).
"""
from __future__ import annotations

import functools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgfx.config import DEBUG, Flag
from tgfx.devices.cuda_driver import (
    CUDA_ERROR_NO_DEVICE,
    CUDA_ERROR_OUT_OF_MEMORY,
    CudaDriverNotFound,
    CudaError,
    Driver,
    load_driver,
)
from tgfx.devices.cuda_translate import (
    MEMORY,
    CudaBackendError,
    CUDAProgram,
    HostPages,
    Issued,
    Plan,
    Staging,
    Translator,
    count_retired,
    native_host_fns,
)
from tgfx.devices.hcq import (
    Allocator,
    Buffer,
    CommandProcessor,
    Engine,
    HCQError,
    Launcher,
    ProfileEvent,
    launcher,
)
from tgfx.devices.queue import QueueAllocator, QueueDevice

ALIGN = 256                 # cuMemAlloc's alignment
CUDA_DEVICES = Flag("TGFX_CUDA_DEVICES", 0)   # logical CUDA devices over the GPUs (0: one per GPU)
TIMED_KEPT = 256            # retired submissions whose profile events are read together, at the latest
HEARTBEAT_S = 0.5           # how often a poll may look for a running kernel (progress for host waits)

# ---------------------------------------------------------------------------------------------------------------
# programs

def launch_dims(dims: Any) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, shared bytes) from a renderer's launch dimensions: an object with `grid` and `block` (and
    `shared`) attributes (`render_nvptx.LaunchDims`), a mapping with those keys, or `(grid, block)`; grid and block
    are ints or up to three ints."""
    if hasattr(dims, "grid") and hasattr(dims, "block"):
        grid, block, shared = dims.grid, dims.block, getattr(dims, "shared", 0)
    elif isinstance(dims, dict):
        grid, block, shared = dims["grid"], dims["block"], dims.get("shared", 0)
    else:
        grid, block = dims
        shared = 0

    def three(v: Any) -> tuple[int, int, int]:
        t = (int(v),) if isinstance(v, (int, np.integer)) else tuple(int(x) for x in v)
        return (*t, 1, 1, 1)[:3]  # type: ignore[return-value]
    return three(grid), three(block), int(shared)


@dataclass(frozen=True)
class CUDAKernel:
    """A kernel compiled and loaded for a CUDA device: what `append_command` launches (`program`, `global_size`)."""
    name: str
    program: CUDAProgram
    global_size: int
    ptx: str = field(repr=False, default="")


class _Module:
    """Owns a CUmodule: unloaded when the last program of it is collected."""

    def __init__(self, drv: Driver, ctx: int, handle: int) -> None:
        self.drv, self.ctx, self.handle = drv, ctx, handle

    def __del__(self) -> None:
        try:
            self.drv.cuCtxSetCurrent(self.ctx)
            self.drv.cuModuleUnload(self.handle)
        except Exception:  # noqa: BLE001 -- at interpreter exit the driver may be gone
            pass


# ---------------------------------------------------------------------------------------------------------------
# engines: a ring whose writes are translated onto a stream

class CUDARing:
    """The ring of a CUDA engine (`hcq.Ring`): a write translates the packets onto the engine's stream at once (the
    stream is the real queue) and records an event after them; `rptr` counts the words of submissions whose event
    has completed. Polling it retires them: their staging buffers go back, their profile events are read, and an
    asynchronous failure on the device is raised.

    A submission with control flow on device words (`Translator.host_driven`) is translated on the engine's control
    thread instead, which may wait for the stream before it decides a JUMP; every later submission of the engine
    queues behind it there until the queue is empty, so the stream sees them in order and the submitting thread
    never waits for the GPU."""

    def __init__(self, proc: CUDACommandProcessor) -> None:
        self.proc = proc
        self.wptr = 0
        self._rptr = 0
        # [wptr after it, completion event (0: not issued yet), what it issued, the error its translation raised]
        self._pending: deque[list[Any]] = deque()
        # for the control thread, in order: words, packet starts, its `_pending` entry, its launcher
        self._jobs: deque[tuple[np.ndarray, np.ndarray, list[Any], Launcher | None]] = deque()
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._beat = 0.0           # when `_heartbeat` last looked

    @property
    def published(self) -> int:
        """Words issued (`hcq.Ring`): a write issues what it counts, so all of `wptr`."""
        return self.wptr

    @property
    def rptr(self) -> int:
        """Words of the submissions the GPU has completed (polls their events)."""
        self.poll()
        return self._rptr

    def write(self, words: np.ndarray, starts: np.ndarray, label: str) -> None:
        """Translate whole submissions onto the stream (hcq's `Ring.write`; one submitting thread at a time)."""
        proc = self.proc
        proc.device.make_current()
        self.poll()
        plan = proc.translator.prepare(words, starts)
        who = launcher() if DEBUG.value >= 1 else None   # (the submitting thread's: for its events' DEBUG lines)
        with self._wake:
            if self._jobs or plan.host_driven:
                entry = [self.wptr + len(words), 0, None, None]
                with self._lock:
                    self.wptr += len(words)
                    self._pending.append(entry)
                # copies: a replay patches its command buffer's words for the next call before this one is issued
                self._jobs.append((words.copy(), np.array(starts), entry, who))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._control, name=f"tgfx-{proc.label}-control",
                                                    daemon=True)
                    self._thread.start()
                self._wake.notify()
                return
        done, issued = self._issue(words, starts, plan)
        issued.who = who
        with self._lock:
            self.wptr += len(words)
            self._pending.append([self.wptr, done, issued, None])

    def _issue(self, words: np.ndarray, starts: np.ndarray, plan: Plan | None = None) -> tuple[int, Issued]:
        """Translate one submission (from its `plan` when it has one) onto the stream and record its completion
        event after it."""
        proc = self.proc
        issued = proc.translator.run(words, starts) if plan is None else proc.translator.replay(plan, words)
        done = proc.event()
        proc.drv.cuEventRecord(done, proc.stream)
        return done, issued

    def _control(self) -> None:
        """The control thread: translate queued submissions in order; a job leaves the queue once issued, so that
        `write` translates on its own thread again only when nothing is ahead of it."""
        proc = self.proc
        while True:
            with self._wake:
                while not self._jobs:
                    if proc.closed:
                        return
                    self._wake.wait()
                words, starts, entry, who = self._jobs[0]
            try:
                proc.device.make_current()
                done, entry[2] = self._issue(words, starts)
                entry[2].who = who
                entry[1] = done          # last: a poll takes an entry with its event as issued
            except Exception as e:  # noqa: BLE001 -- raised to the host by the submission's poll
                entry[3] = e
            with self._wake:
                self._jobs.popleft()
                self._wake.notify_all()   # (`settle`)

    def settle(self, timeout: float) -> None:
        """Wait until the control thread has issued every submission queued for it. For a profile read once the
        device's timeline has passed them: the GPU may run a host-driven submission's last packet (its timeline
        SIGNAL) before the control thread records the completion event after it, and until then `poll` cannot
        retire it (a profile read right after `synchronize` missed its kernels, at random)."""
        if threading.current_thread() is self._thread:
            return
        deadline = time.monotonic() + timeout
        with self._wake:
            while self._jobs and self._thread is not None and self._thread.is_alive():
                if (left := deadline - time.monotonic()) <= 0 or not self._wake.wait(left):
                    return

    def poll(self) -> None:
        """Retire the submissions that completed, in order; raise the failure of one that did not."""
        proc = self.proc
        if not self._pending:
            return
        proc.device.make_current()
        with self._lock:
            while self._pending:
                end, done, issued, error = self._pending[0]
                if error is not None:
                    self._rptr = end
                    self._pending.popleft()
                    raise CudaBackendError(f"{proc.label} could not run a submission with device-side control flow: "
                                           f"{error}") from error
                if not done:
                    return            # still with the control thread
                try:
                    if not proc.drv.cuEventQuery(done):
                        self._heartbeat(issued)
                        return
                except CudaError as e:
                    self._rptr = end   # consumed: nothing more runs on this context after such a failure
                    self._pending.popleft()
                    kernels = ", ".join(dict.fromkeys(issued.kernels)) or "no kernels"
                    raise CudaBackendError(f"{proc.label} failed while running a submission ({kernels}): {e}. A "
                                           f"kernel's illegal address or a failed launch leaves the device unusable "
                                           f"until the process restarts") from e
                self._pending.popleft()
                self._rptr = end
                proc.retire(done, issued)
                count_retired(1 + len(issued.timed))

    def _heartbeat(self, issued: Issued) -> None:
        """Count progress while a kernel or copy of the oldest submission runs (its start event passed, its end not),
        at most once every `HEARTBEAT_S`: a host wait (`hcq._Stall`) then never gives up on one long GPU kernel, as
        it does not on a running CPU kernel, while a stream held by a WAIT that nothing satisfies still stalls."""
        now = time.monotonic()
        if now - self._beat < HEARTBEAT_S:
            return
        self._beat = now
        query = self.proc.drv.cuEventQuery
        for _, start, end, _, _ in issued.timed:
            if not query(end):
                if query(start):
                    count_retired(1)
                return

    def describe(self, at: int) -> str:
        with self._lock:
            for end, done, issued, _ in self._pending:
                if end > at:
                    if not done:
                        return f"the submission ending at ring word {end}, with the host driving its control flow"
                    kernels = ", ".join(dict.fromkeys(issued.kernels)) or "copies and signals"
                    return f"the submission ending at ring word {end} ({kernels}), issued to the stream"
        return f"ring word {at}"


class CUDACommandProcessor(CommandProcessor):
    """One engine of a CUDA device: a non-blocking stream, fed by `CUDARing`."""

    def __init__(self, device: CUDADevice, engine: Engine) -> None:
        super().__init__(device, engine)
        self.device: CUDADevice = device
        self.drv = device.drv
        self.ring = CUDARing(self)
        self.stream = 0
        self._free_events: list[int] = []
        self._done_events: deque[tuple[ProfileEvent, Launcher | None]] = deque()
        self._untimed: deque[Issued] = deque()     # retired submissions whose event times are not read yet
        self._ref_event, self._ref_ns = 0, 0

    def start(self) -> None:
        """Create the stream, and the reference event profile times are measured from."""
        dev = self.device
        dev.make_current()
        self.stream = self.drv.cuStreamCreate()
        self._ref_event = self.event()
        self.drv.cuEventRecord(self._ref_event, self.stream)
        self.drv.cuEventSynchronize(self._ref_event)
        self._ref_ns = time.perf_counter_ns()
        self.translator = Translator(self.drv, self.stream, self.label, dev, MEMORY, dev.pages, dev.staging,
                                     native_host_fns(), dev.timeline.addr, self.event)
        self.translator.alive = lambda: not self.closed
        self.translator.fault = self._fault

    def _fault(self, err: HCQError) -> None:
        """A host program failed: the device's error, raised by its next synchronisation (as the CPU's faults)."""
        with self.device._lock:
            self.device._errors.append(err)

    def event(self) -> int:
        """A CUevent from the pool."""
        return self._free_events.pop() if self._free_events else self.drv.cuEventCreate()

    def retire(self, done: int, issued: Issued) -> None:
        """A submission completed: give back its staging buffers and its completion event; its profile events are
        read when the profile is (`drain_events`), or once `TIMED_KEPT` submissions wait for that, so a call that
        nobody profiles pays for no reads of event times."""
        for give in issued.release:
            give()
        self._free_events.append(done)
        if issued.timed:
            self._untimed.append(issued)
            if len(self._untimed) > TIMED_KEPT:
                self._read_times()

    def _read_times(self) -> None:
        """Turn the events of retired submissions into profile events, and give the events back."""
        elapsed = self.drv.cuEventElapsedTime
        while self._untimed:
            issued = self._untimed.popleft()
            ns = {ev: self._ref_ns + int(elapsed(self._ref_event, ev) * 1e6) for ev in issued.events}
            for name, start, end, nbytes, gs in issued.timed:
                self._done_events.append((ProfileEvent(self.device.name, self.engine.value, name, ns[start],
                                                       ns[end], nbytes, gs), issued.who))
            self._free_events += issued.events

    def describe(self, at: int) -> str:
        return self.ring.describe(at)

    def drain_events(self) -> None:
        """Move the profile events of completed submissions to the device's profile."""
        dev = self.device
        # all submitted work has run: the control thread, if still at some of it, has only its completion event to
        # record
        if self.ring._jobs and dev.timeline.words[0] >= dev.timeline_value:
            self.ring.settle(HEARTBEAT_S)
        try:
            self.ring.poll()
        except CudaBackendError:
            pass    # raised to the host by its wait, not by a profile read
        if self._untimed:
            self.device.make_current()
            self._read_times()
        while self._done_events:
            ev, who = self._done_events.popleft()
            self.device._record(ev, None, who)

    def close(self) -> None:
        """Stop taking submissions (the stream is left to the driver: the context outlives the device object); the
        control thread stops, a loop it drives at its next backward jump."""
        super().close()
        with self.ring._wake:
            self.ring._wake.notify_all()


# ---------------------------------------------------------------------------------------------------------------
# memory

class _DeviceMemory:
    """Owns one allocation of `CUDAAllocator`; gives it back to the allocator's cache when collected (queues hold it
    until their fence passes, so the GPU is done with it)."""

    __slots__ = ("device", "ptr", "size")

    def __init__(self, device: CUDADevice, ptr: int, size: int) -> None:
        self.device, self.ptr, self.size = device, ptr, size

    def __del__(self) -> None:
        try:
            self.device.allocator.give_back(self.ptr, self.size)
        except Exception:  # noqa: BLE001 -- at interpreter exit the allocator may be gone
            pass


class CUDAAllocator(QueueAllocator):
    """Device memory; copies to and from the host are COPY packets on the copy engine.

    Memory comes from `cuMemAlloc` and, once its buffer is collected, goes back to a cache of free blocks by size
    rather than to `cuMemFree`, which waits for the whole device and costs a driver round trip: a jitted step that
    allocates the same sizes every call reuses them. An allocation the GPU cannot satisfy empties the cache and tries
    again."""

    device: CUDADevice

    def __init__(self, device: CUDADevice) -> None:
        super().__init__(device)
        self._free: dict[int, list[int]] = {}   # size -> free blocks (list appends and pops are atomic: see give_back)

    def alloc(self, nbytes: int) -> Buffer:
        """Allocate `nbytes` of device memory (256-byte aligned; not zeroed)."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes on {self.device.name}")
        dev = self.device
        size = -(-max(nbytes, 1) // ALIGN) * ALIGN
        try:
            ptr = self._free.get(size, []).pop()
        except IndexError:
            ptr = self._fresh(size, nbytes)
        return Buffer(dev, nbytes, ptr, _DeviceMemory(dev, ptr, size))

    def fill(self, buf: Buffer, src: np.ndarray) -> None:
        """Memory no submitted queue uses yet (just allocated): a synchronous `cuMemcpyHtoD` from where `src` lies,
        with no queue, staging buffer or host function of ours (the driver stages pageable memory itself)."""
        data = np.ascontiguousarray(src)
        if data.nbytes > buf.nbytes:
            raise ValueError(f"fill of {data.nbytes} B does not fit in {buf!r}")
        if data.nbytes:
            self.device.make_current()
            try:
                self.device.drv.cuMemcpyHtoD(buf.ptr, data.ctypes.data, data.nbytes)
            except CudaError as e:
                raise e.at(f"filling {data.nbytes} B of {buf!r}") from None

    def copyout(self, dst: np.ndarray | memoryview, buf: Buffer, timeout: float | None = None) -> None:
        """Copy the first `dst.nbytes` bytes of `buf` into writable host memory `dst`, after all earlier work: the
        host waits for the device (as it would for the copy), then `cuMemcpyDtoH` copies synchronously, with no
        staging buffer or host function of ours in a stream's path."""
        host = self.copyout_destination(dst, buf)
        self.device.synchronize(timeout)
        if host.nbytes:
            self.device.make_current()
            try:
                self.device.drv.cuMemcpyDtoH(host.ptr, buf.ptr, host.nbytes)
            except CudaError as e:
                raise e.at(f"copying {host.nbytes} B out of {buf!r}") from None

    def _fresh(self, size: int, nbytes: int) -> int:
        dev = self.device
        dev.make_current()
        try:
            try:
                ptr = dev.drv.cuMemAlloc(size)
            except CudaError as e:
                if e.code != CUDA_ERROR_OUT_OF_MEMORY or not self.release_cached():
                    raise
                ptr = dev.drv.cuMemAlloc(size)
        except CudaError as e:
            raise e.at(f"allocating {nbytes} B on {dev.name} ({dev.gpu_name})") from None
        MEMORY.add(ptr, size, dev)
        return ptr

    def give_back(self, ptr: int, size: int) -> None:
        """A block no buffer holds any more (called from a finalizer, on any thread: it takes no lock)."""
        self._free.setdefault(size, []).append(ptr)

    def release_cached(self) -> int:
        """Free every cached block with `cuMemFree`; returns how many bytes that gave back to the driver."""
        dev, freed = self.device, 0
        dev.make_current()
        for size, blocks in list(self._free.items()):
            while True:
                try:
                    ptr = blocks.pop()
                except IndexError:
                    break
                MEMORY.remove(ptr)
                dev.drv.cuMemFree(ptr)
                freed += size
        return freed


# ---------------------------------------------------------------------------------------------------------------
# devices

@functools.cache
def _shared(drv: Driver) -> tuple[HostPages, Staging]:
    """The process's registered host pages and staging buffers (pinned memory is portable: one set for every
    context)."""
    return HostPages(drv, MEMORY), Staging(drv, MEMORY)


class CUDADevice(QueueDevice):
    """An NVIDIA GPU: its primary context, a stream per engine, device memory, PTX kernels.

    Args:
        name: its canonical name, "CUDA:<n>" (get devices with `tgfx.devices.get_device`, which caches them).

    Raises:
        CudaDriverNotFound: no CUDA driver is installed.
        ValueError: the machine has no GPU numbered n.
        CudaBackendError: the GPU cannot wait on and write 64-bit signals from a stream.
    """

    compiles_on_host = False

    def __init__(self, name: str) -> None:
        self.drv = load_driver()
        ordinal = int(name.split(":")[1])
        count = device_count()
        if ordinal >= count:
            raise ValueError(f"{name}: this machine has {count} CUDA device{'s' if count != 1 else ''} "
                             f"(CUDA:0{f' .. CUDA:{count - 1}' if count > 1 else ''})")
        self.ordinal = ordinal
        # logical devices (TGFX_CUDA_DEVICES) take the GPUs in turn, each its own streams, memory and timeline in its
        # GPU's primary context
        self.gpu_ordinal = ordinal % max(int(self.drv.cuDeviceGetCount() or 1), 1)
        self.cu_device = self.drv.cuDeviceGet(self.gpu_ordinal)
        self.gpu_name = self.drv.cuDeviceGetName(self.cu_device)
        self.ctx = self.drv.cuDevicePrimaryCtxRetain(self.cu_device)
        self.make_current()
        self.attrs = self.drv.attributes(self.cu_device)
        if not self.attrs["stream_mem_ops_64"]:
            raise CudaBackendError(f"{name} ({self.gpu_name}) does not support 64-bit stream memory operations "
                                   f"(cuStreamWaitValue64), which the CUDA backend's signals need; update the "
                                   f"NVIDIA driver")
        self.pages, self.staging = _shared(self.drv)
        super().__init__(name)
        self.timeline_page = self.pages.device_addr(self.timeline.addr, self.timeline)

    def make_current(self) -> None:
        """Make this device's context current on the calling thread (driver calls act on the current one)."""
        self.drv.cuCtxSetCurrent(self.ctx)

    def create_allocator(self) -> Allocator:
        """Device memory."""
        return CUDAAllocator(self)

    def create_processor(self, engine: Engine) -> CommandProcessor:
        """A stream."""
        return CUDACommandProcessor(self, engine)

    @functools.cached_property
    def target(self) -> Any:
        """The GPU target kernels are compiled for (`tgfx.devices.target.GPUTarget`, from the driver's attributes)."""
        from tgfx.devices import target
        gpu_target = getattr(target, "GPUTarget", None)
        if gpu_target is None:
            raise CudaBackendError("this build of tgfx has no GPU target description (tgfx.devices.target.GPUTarget)"
                                   "; the NVPTX code generator is needed to compile kernels for CUDA")
        names = getattr(target, "CU_DEVICE_ATTRIBUTES", {})
        attrs = {k: self.drv.cuDeviceGetAttribute(code, self.cu_device) for k, code in names.items()}
        return gpu_target.from_attributes(self.gpu_name, attrs)

    def load_kernel(self, ptx: str | bytes, name: str, dims: Any) -> CUDAKernel:
        """Load PTX (JIT-compiled by the driver) and return its kernel `name`, launched with `dims` (see
        `launch_dims`): an EXEC of it runs grid.x * block.x threads along x."""
        grid, block, shared = launch_dims(dims)
        image = ptx.encode() if isinstance(ptx, str) else ptx
        self.make_current()
        try:
            module = self.drv.cuModuleLoadData(image)
            fn = self.drv.cuModuleGetFunction(module, name)
        except CudaError as e:
            raise e.at(f"loading kernel {name!r} on {self.name} ({self.gpu_name})") from None
        prog = CUDAProgram(name, fn, block, grid[1:], shared, self.name, _Module(self.drv, self.ctx, module),
                           getattr(dims, "params", None))
        text = ptx if isinstance(ptx, str) else ptx.decode(errors="replace")
        return CUDAKernel(name, prog, grid[0] * block[0], text)


@functools.cache
def _count() -> int:
    try:
        return load_driver().cuDeviceGetCount()
    except CudaError as e:
        if e.code == CUDA_ERROR_NO_DEVICE:
            return 0
        raise


def device_count() -> int:
    """The CUDA devices: one per GPU the driver reports, or `TGFX_CUDA_DEVICES=n` logical devices over them (CUDA:i on
    GPU i mod the GPUs, each with its own streams, memory and timeline in that GPU's primary context: a machine with
    one GPU runs multi-device programs, their copies and collectives, as several devices). Raises
    `CudaDriverNotFound` without a driver."""
    gpus, logical = _count(), int(CUDA_DEVICES.value)
    return logical if gpus and logical > 0 else gpus


def available_count() -> int:
    """The CUDA devices of this machine: 0 without a driver (or with one that reports none)."""
    try:
        return device_count()
    except (CudaDriverNotFound, CudaError):
        return 0


__all__ = ["CUDAAllocator", "CUDADevice", "CUDAKernel", "CUDAProgram", "CudaBackendError", "available_count",
           "device_count", "launch_dims"]
