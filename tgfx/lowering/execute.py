"""execute: run a LINEAR of CALLs on the devices, allocating buffers on first use."""
from __future__ import annotations

import time
import weakref

import numpy as np

from tgfx import config
from tgfx.counters import counters
from tgfx.devices import get_device
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
        assert allocate, f"buffer {uid} was read before it was written"
        mem = get_device(device).allocator.alloc(max(size, 1) * buf.dtype.itemsize)
        _memory[uid] = mem
        weakref.finalize(buf, _free, uid)
    return mem


def copyin(buf: UOp, data: np.ndarray) -> None:
    mem = buffer_memory(buf)
    get_device(buf.arg[1]).allocator.copyin(mem, np.ascontiguousarray(data).reshape(-1).view(np.uint8))


def copyout(buf: UOp) -> np.ndarray:
    out = np.empty(buf.arg[2], dtype=buf.dtype.np)
    if buf.arg[2]:
        get_device(buf.arg[1]).allocator.copyout(out.view(np.uint8), buffer_memory(buf, allocate=False))
    return out


def run_linear(linear: UOp) -> None:
    from tgfx.lowering import lower_kernel
    for call in linear.src:
        body, bufs = call.src[0], call.src[1:]
        if body.op is Ops.COPY:
            dst, src = bufs
            get_device(dst.arg[1]).copy(buffer_memory(dst), buffer_memory(src, allocate=False), body.arg)
            counters.copy_count += 1
            continue
        ck = lower_kernel(body)
        mems = [buffer_memory(b, allocate=(i == 0)) for i, b in enumerate(bufs)]
        dev = get_device(bufs[0].arg[1])
        st = time.perf_counter()
        dev.exec_sync(ck, mems)
        counters.kernel_count += 1
        if config.DEBUG >= 1:
            print(f"{ck.name:40s} {len(bufs)} bufs  {(time.perf_counter() - st) * 1e6:9.1f} us")
