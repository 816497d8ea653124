"""execute: run a LINEAR of CALLs on the devices, allocating buffers on first use."""
from __future__ import annotations

import weakref

import numpy as np

from tgfx.counters import counters
from tgfx.devices import get_device
from tgfx.devices.hcq import HWQueue
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp

# BUFFER uid -> device memory; an entry is freed when its BUFFER node is garbage collected
_memory: dict[int, object] = {}


def _free(uid: int) -> None:
    _memory.pop(uid, None)


def buffer_memory(buf: UOp, allocate: bool = True) -> object:
    uid, device, size = buf.arg
    mem = _memory.get(uid)
    if mem is None:
        assert allocate or size == 0, f"buffer {uid} was read before it was written"
        mem = get_device(device).allocator.alloc(max(size, 1) * buf.dtype.itemsize)
        _memory[uid] = mem
        weakref.finalize(buf, _free, uid)
    return mem


def register_memory(buf: UOp, mem: object) -> None:
    """Back BUFFER `buf` with device memory the caller allocated (a planned arena's view)."""
    uid = buf.arg[0]
    if uid not in _memory:
        weakref.finalize(buf, _free, uid)
    _memory[uid] = mem


def copyin(buf: UOp, data: np.ndarray) -> None:
    mem = buffer_memory(buf)
    get_device(buf.arg[1]).allocator.copyin(mem, np.ascontiguousarray(data).reshape(-1).view(np.uint8))


def copyout(buf: UOp) -> np.ndarray:
    out = np.empty(buf.arg[2], dtype=buf.dtype.np)
    if buf.arg[2]:
        get_device(buf.arg[1]).allocator.copyout(out.view(np.uint8), buffer_memory(buf, allocate=False))
    return out


def run_linear(linear: UOp) -> None:
    """Submit every CALL to its device's queues; returns at once. Reading a result waits for it."""
    from tgfx.lowering import lower_kernel
    pending: tuple[object, HWQueue] | None = None  # (device, queue) collecting consecutive kernels

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            pending[1].submit(pending[0])
            pending = None

    for call in linear.src:
        body, bufs = call.src[0], call.src[1:]
        if body.op is Ops.COPY:
            flush()
            dst, src = bufs
            nbytes, src_offset, dst_offset = body.arg
            get_device(dst.arg[1]).copy(buffer_memory(dst), buffer_memory(src, allocate=False), nbytes,
                                        dst_offset=dst_offset, src_offset=src_offset)
            counters.copy_count += 1
            continue
        ck = lower_kernel(body)
        mems = [buffer_memory(b, allocate=(i == 0)) for i, b in enumerate(bufs)]
        dev = get_device(bufs[0].arg[1])
        if pending is None or pending[0] is not dev:
            flush()
            pending = (dev, HWQueue())
        pending[1].exec(ck, mems, global_size=ck.global_size)
        counters.kernel_count += 1
    flush()
