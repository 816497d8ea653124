"""The CPU backend: host memory, and command processors that run kernels on a shared pool of worker threads.

`CPU:0`, `CPU:1`, ... are separate devices (own memory, queues and timeline) on the same host, so multi-device
programs run on one machine. An EXEC with global_size N calls the kernel for core ids 0..N-1, split into
contiguous chunks over up to `os.cpu_count()` threads; ctypes releases the GIL during each native call.
"""
from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from tgfx.devices.hcq import Allocator, Buffer, CommandProcessor, Engine, HCQDevice, Program

ALIGN = 64
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def cpu_count() -> int:
    """The number of worker threads an EXEC is spread over."""
    return os.cpu_count() or 1


def _worker_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=cpu_count(), thread_name_prefix="tgfx-cpu-worker")
        return _pool


def _run_cores(program: Program, bufs_addr: int, vals_addr: int, lo: int, hi: int) -> None:
    call = program.call
    for core in range(lo, hi):
        call(bufs_addr, vals_addr, core)


class CPUAllocator(Allocator):
    """64-byte-aligned, zero-filled host memory backed by numpy arrays."""

    def alloc(self, nbytes: int) -> Buffer:
        """Allocate `nbytes` on this CPU device."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate {nbytes} bytes on {self.device.name}")
        raw = np.zeros(nbytes + ALIGN, dtype=np.uint8)
        ptr = raw.ctypes.data
        return Buffer(self.device, nbytes, ptr + (-ptr) % ALIGN, raw)


class CPUCommandProcessor(CommandProcessor):
    """Runs EXECs on the worker pool (one chunk on its own thread) and COPYs with memmove."""

    def run_exec(self, program: Program, bufs_addr: int, vals_addr: int, global_size: int) -> None:
        """Call the kernel for every core id, in parallel chunks, and wait for all of them."""
        nchunks = min(global_size, cpu_count())
        if nchunks == 1:
            _run_cores(program, bufs_addr, vals_addr, 0, global_size)
            return
        bounds = [global_size * i // nchunks for i in range(nchunks + 1)]
        pool = _worker_pool()
        futures: list[Future[None]] = [pool.submit(_run_cores, program, bufs_addr, vals_addr, bounds[i], bounds[i + 1])
                                       for i in range(1, nchunks)]
        error: BaseException | None = None
        try:
            _run_cores(program, bufs_addr, vals_addr, bounds[0], bounds[1])
        except BaseException as e:  # noqa: BLE001 -- first wait for the other chunks: they read the ring
            error = e
        for f in futures:
            if (e := f.exception()) is not None and error is None:
                error = e
        if error is not None:
            raise error

    def run_copy(self, dst: int, src: int, nbytes: int) -> None:
        """memmove (ctypes releases the GIL)."""
        if nbytes:
            ctypes.memmove(dst, src, nbytes)


class CPUDevice(HCQDevice):
    """A CPU device with a compute and a copy engine, each consumed by its own daemon thread.

    Args:
        name: its canonical name, "CPU:<n>" (get devices with `tgfx.devices.get_device`, which caches them).
    """

    def create_allocator(self) -> Allocator:
        """Host memory."""
        return CPUAllocator(self)

    def create_processor(self, engine: Engine) -> CommandProcessor:
        """A ring consumed by a daemon thread."""
        return CPUCommandProcessor(self, engine)
