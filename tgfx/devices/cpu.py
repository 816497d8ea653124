"""The CPU backend: host memory, and native command processors that run kernels on all cores.

`CPU:0`, `CPU:1`, ... are separate devices (own memory, queues and timeline) on the same host, so multi-device
programs run on one machine. Each engine's ring is consumed by the native loop of `tgfx/devices/native.py` on a
thread of its own; an EXEC with global_size N calls the kernel for core ids 0..N-1 on that thread and a
process-wide pool of `cpu_count() - 1` native helper threads. No packet takes the GIL, except the EXEC of a
Python `Program` (a ctypes callback).
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from tgfx.devices import native
from tgfx.devices.hcq import Allocator, Buffer, CommandProcessor, Engine
from tgfx.devices.processor import RingProcessor
from tgfx.devices.queue import QueueAllocator, QueueDevice
from tgfx.devices.target import host_cores

ALIGN = 64
SMALL_ALLOC = 1 << 20                 # allocations up to this size come from ctypes, larger ones from numpy
CLOSE_TIMEOUT_NS = 1_000_000_000      # how long `close` waits for a processor to finish its packet


@functools.cache
def cpu_count() -> int:
    """The number of threads an EXEC is spread over (the processor's own and the helpers): this machine's cores,
    which kernels' THREAD splits are chosen for unless `TGFX_CORES` describes another machine (its parts are then
    claimed by these threads as they finish one)."""
    return host_cores()


def _size(nbytes: int) -> str:
    """`nbytes` in the largest binary unit it fills: '128.0 TiB'."""
    size, unit = float(nbytes), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            break
        size /= 1024
    return f"{size:.1f} {unit}"


class CPUAllocator(QueueAllocator):
    """64-byte-aligned, zero-filled host memory backed by numpy arrays."""

    def alloc(self, nbytes: int) -> Buffer:
        """Allocate `nbytes` on this CPU device."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes on {self.device.name}")
        if nbytes <= SMALL_ALLOC:     # a ctypes array: its address is cheap to read (a numpy array's costs ~1 us)
            raw = (ctypes.c_char * (nbytes + ALIGN))()
            ptr = ctypes.addressof(raw)
        else:                         # calloc'd by numpy: the pages are zeroed lazily, as they are first touched
            try:
                raw = np.zeros(nbytes + ALIGN, dtype=np.uint8)
            except MemoryError:   # (numpy's own words name a uint8 array of one more cache line: not the user's)
                raise MemoryError(f"{self.device.name} is out of memory: a buffer of {_size(nbytes)} ({nbytes} B) "
                                  f"could not be allocated; compute smaller pieces (a smaller batch, a loop), or "
                                  f"drop Tensors no longer needed") from None
            ptr = raw.ctypes.data
        return Buffer(self.device, nbytes, ptr + (-ptr) % ALIGN, raw)

    def fill(self, buf: Buffer, src: np.ndarray) -> None:
        """Host memory: a store, not a queued copy (nothing queued reads a buffer just allocated)."""
        data = np.ascontiguousarray(src)
        if data.nbytes > buf.nbytes:
            raise ValueError(f"fill of {data.nbytes} B does not fit in {buf!r}")
        ctypes.memmove(buf.ptr, data.ctypes.data, data.nbytes)

    def copyout(self, dst: np.ndarray | memoryview, buf: Buffer, timeout: float | None = None) -> None:
        """Host memory: the host waits for the device's earlier work, then copies itself (no COPY packet for the copy
        engine to wake up for: `float(loss)` in an eager loop took 31 us that way, a few now)."""
        host = self.copyout_destination(dst, buf)
        self.device.synchronize(timeout)
        ctypes.memmove(host.ptr, buf.ptr, host.nbytes)

    def read(self, buf: Buffer, nbytes: int) -> np.ndarray:
        """Host memory: a numpy copy of it once the device is done (no destination to wrap: `float(loss)` and
        `np.asarray(x)` of a small result 3 -> 0.6 us)."""
        if nbytes > buf.nbytes:
            raise ValueError(f"read of {nbytes} B reads past the end of {buf!r}")
        self.device.synchronize()
        return np.frombuffer((ctypes.c_char * nbytes).from_address(buf.ptr), dtype=np.uint8).copy()


class CPUCommandProcessor(RingProcessor):
    """Runs the native processor loop (`tgfx_processor`) on a pthread of its own."""

    _thread: int | None = None
    _board_slot: int | None = None

    def start(self) -> None:
        """Start the helper pool (once per process), post this engine on its job board, start the loop."""
        rt = native.runtime()
        rt.start_helpers(cpu_count() - 1)
        self._board_slot = rt.post_board(self.ctl_addr)
        self._thread = rt.start_thread(rt.processor_fn, self.ctl_addr)
        self.run_inline = functools.partial(rt.run_inline, self.ctl_addr)

    def close(self) -> None:
        """Stop the loop and join its thread; a thread still busy after a second is left to finish on its own."""
        super().close()
        rt = native.runtime()
        if self._thread is None:
            return
        if rt.wait_ge(self.ctl_addr + 8 * native.W_EXITED, 1, CLOSE_TIMEOUT_NS, 0, None, None) >= 1:
            native.join_thread(self._thread)
            if self._board_slot is not None:
                rt.clear_board(self._board_slot)
        self._thread = self._board_slot = None


class CPUDevice(QueueDevice):
    """A CPU device with a compute and a copy engine, each consumed by its own native thread.

    Args:
        name: its canonical name, "CPU:<n>" (get devices with `tgfx.devices.get_device`, which caches them).
    """

    host_memory = True

    def create_allocator(self) -> Allocator:
        """Host memory."""
        return CPUAllocator(self)

    def create_processor(self, engine: Engine) -> CommandProcessor:
        """A ring consumed by a native thread."""
        return CPUCommandProcessor(self, engine)

    compiles_on_host = True
