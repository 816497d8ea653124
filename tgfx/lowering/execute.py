"""execute: the runtime's side of buffers (the memory behind BUFFER nodes, copies in and out) and the encoding of
one LINEAR command into a queue. Programs (tgfx/lowering/program.py) are built from these."""
from __future__ import annotations

import ctypes
from collections.abc import Iterable
from typing import Any

import numpy as np

from tgfx import config
from tgfx.counters import counters
from tgfx.devices import get_device
from tgfx.devices.queue import HWQueue, Label
from tgfx.devices.target import host_target
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, buffers, prod
from tgfx.lowering.layout import copy_source, new_buffer


def buffer_nbytes(buf: UOp) -> int:
    """The bytes of device memory behind BUFFER `buf` (an empty buffer still gets one element)."""
    return max(buf.arg[2], 1) * buf.dtype.itemsize


def memory_of(buf: UOp) -> object | None:
    """The device memory behind BUFFER `buf`, or None before anything wrote it."""
    return buffers.get(id(buf))


def buffer_memory(buf: UOp, allocate: bool = True) -> object:
    """The device memory behind BUFFER `buf`, allocated on first use. The runtime's map holds it for as long as the
    node lives (`tgfx.ir.uop.buffers`); queues already submitted keep it alive until they complete."""
    mem = buffers.get(id(buf))
    if mem is None:
        uid, device, size = buf.arg
        assert allocate or size == 0, f"buffer {uid} was read before it was written"
        mem = buffers[id(buf)] = get_device(device).allocator.alloc(buffer_nbytes(buf))
        counters.alloc_count += 1
    return mem


def host_view(mem: Any, device: str, dtype: np.dtype) -> np.ndarray | None:
    """A numpy array of `dtype` over memory `mem` of `device`, written through in place (a jit's buffers for Python
    scalar and numpy arguments, refilled every call: the allocator's fill costs 1.5 us more), or None where the
    device's memory is not the host's, or `mem` holds no byte."""
    if not get_device(device).host_memory or not mem.nbytes:
        return None
    return np.ctypeslib.as_array((ctypes.c_char * mem.nbytes).from_address(mem.ptr)).view(dtype)


def register_memory(buf: UOp, mem: object) -> object:
    """Back BUFFER `buf` with device memory the caller allocated (a planned arena's view, a leased output); returns
    `mem`."""
    buffers[id(buf)] = mem
    return mem


RANGE_OPS = frozenset({Ops.RESHAPE, Ops.SHRINK, Ops.DYNAMIC_SHRINK})   # what may be a range of a buffer


def range_view(u: UOp) -> UOp | None:
    """`u` as a buffer of its own, without a kernel or a copy, when it is a contiguous range of a computed buffer in
    host memory (a row of a split key, `x[3]`, `x[2:5]`: reshapes and leading-axis shrinks): a new BUFFER (viewed in
    `u`'s shape) whose memory is that range of the other's. None otherwise (another device's memory: its kernels may
    assume aligned buffers)."""
    if u.op not in RANGE_OPS:
        return None
    base, off = copy_source(u)
    # (what it views first: most roots that are reshapes are reshaped results of ops, `sum(x)`'s, and those are
    # realised with nothing more read of them)
    if base.op is not Ops.BUFFER or u.dtype.is_complex or (size := prod(u.shape)) == 0 or \
            (mem := buffers.get(id(base))) is None or not get_device(base.arg[1]).host_memory:
        return None
    view = new_buffer(base.arg[1], size, u.dtype)
    register_memory(view, mem.view(off * u.dtype.itemsize, size * u.dtype.itemsize))   # both marked `shared`
    return view if u.shape == (size,) else UOp(Ops.RESHAPE, u.dtype, (view,), u.shape)


def copyin(buf: UOp, data: np.ndarray) -> None:
    """Host bytes into BUFFER `buf`: memory allocated here is filled directly (no queue has it yet: a store for host
    memory, where a queued COPY and its wait cost `tg.asarray` of a small array ~20 of its ~27 us), memory that
    queues may use is copied after their work."""
    fresh = id(buf) not in buffers
    mem = buffer_memory(buf)
    allocator = get_device(buf.arg[1]).allocator
    (allocator.fill if fresh else allocator.copyin)(mem, np.ascontiguousarray(data).reshape(-1).view(np.uint8))


def copyout(buf: UOp) -> np.ndarray:
    """BUFFER `buf`'s contents as a new host array (flat, of its dtype)."""
    if not buf.arg[2]:
        return np.empty(0, dtype=buf.dtype.np)
    return get_device(buf.arg[1]).allocator.read(buffer_memory(buf, allocate=False),
                                                 buf.arg[2] * buf.dtype.itemsize).view(buf.dtype.np)


def read_first(buf: UOp) -> bool | int | float | complex:
    """BUFFER `buf`'s first element as a Python scalar (a one-element result's value: `float(sum(x))`). Host memory
    is read where it lies, once the device is done, as a ctypes scalar of its type (`copyout`'s array, its view and
    its element were 2 of an eager read's 20 us); other memory, and types ctypes has none of, through `copyout`."""
    device = get_device(buf.arg[1])
    if device.host_memory and (scalar := _CTYPES.get(buf.dtype)) is not None and buf.arg[2]:
        device.synchronize()
        return scalar.from_address(buffer_memory(buf, allocate=False).ptr).value
    return copyout(buf)[0].item()


# ctypes' scalar of each dtype a Python scalar reads exactly (a float32's value is a Python float, as numpy's item)
_CTYPES = {dtypes.bool: ctypes.c_bool, dtypes.int8: ctypes.c_int8, dtypes.int16: ctypes.c_int16,
           dtypes.int32: ctypes.c_int32, dtypes.int64: ctypes.c_int64, dtypes.uint8: ctypes.c_uint8,
           dtypes.uint16: ctypes.c_uint16, dtypes.uint32: ctypes.c_uint32, dtypes.uint64: ctypes.c_uint64,
           dtypes.float32: ctypes.c_float, dtypes.float64: ctypes.c_double}


def device_kernel(device: Any, ast: UOp) -> Any:
    """Kernel AST `ast` compiled and loaded for `device`, cached: the host's LLVM for a CPU device (`lower_kernel`),
    PTX the driver loads for a GPU (`render_nvptx.gpu_kernel`). An object with `program` (what an EXEC of it runs)
    and `global_size`."""
    if device.compiles_on_host:
        from tgfx.lowering import lower_kernel
        return lower_kernel(ast)
    from tgfx.lowering.render_nvptx import gpu_kernel
    return gpu_kernel(device, ast)


def append_command(q: HWQueue, call: UOp, labels: list[dict[int, Label]]) -> None:
    """Append one LINEAR command to `q`: a kernel, a copy, or a control command (BLOCK, LABEL, JUMP, WORD; labels
    are scoped by block, one dict per open block). Buffers are allocated as they are met: a program patches its
    inputs and outputs per call, and planned its intermediates before."""
    body, bufs = call.src[0], call.src[1:]
    mems = [buffer_memory(b) for b in bufs]

    def label(i: int) -> Label:
        return labels[-1].setdefault(i, Label(f"L{i}"))

    if body.op is Ops.SINK:
        from tgfx.lowering.lifted import argument_memory, choose  # (it reads lowering/constants.py, which reads this)
        device = get_device(bufs[0].arg[1])   # (it is compiled for the output's device)
        # a kernel seen before with other float constants reads them from buffers after its own (`lifted.py`)
        ast, consts = choose(body)
        ck = device_kernel(device, ast)
        if consts:
            mems += argument_memory(device.allocator, consts)
        # a CPU kernel may read a trip count from its values (`runtime_trips`); a GPU kernel takes none
        q.exec(ck.program, mems, getattr(ck, "vals", ()), global_size=ck.global_size)
    elif body.op is Ops.COPY:
        if len(body.arg) == 3:
            nbytes, src_offset, dst_offset = body.arg
            q.copy(mems[0], mems[1], nbytes, dst_offset=dst_offset, src_offset=src_offset)
        else:
            nbytes, dst_stride, src_stride, count = body.arg
            q.copy(mems[0], mems[1], nbytes, index=mems[2], dst_stride=dst_stride, src_stride=src_stride,
                   count=count)
    elif body.op is Ops.CALLBACK:   # a host callback: the processor calls it with the GIL, between kernels
        q.exec(body.arg.program(bool(call.arg)), mems)
    elif body.op is Ops.BLOCK:
        if body.arg[0]:
            q.begin_block()
            labels.append({})
        else:
            q.end_block()
            labels.pop()
    elif body.op is Ops.LABEL:
        q.place(label(body.arg))
    elif body.op is Ops.JUMP:
        cmp, value, target = body.arg
        q.jump(label(target), mems[0] if mems else None, cmp, value, width=bufs[0].dtype.itemsize if bufs else 8)
    elif body.op is Ops.WORD:
        (q.write if body.arg[0] == "set" else q.add)(mems[0], body.arg[1])
    else:
        raise AssertionError(f"unknown LINEAR command {body.op}")


def command_device(call: UOp, current: object) -> object:
    """The device a command runs on: a block's own, a kernel's output's, else the queue's it is appended to."""
    body, bufs = call.src[0], call.src[1:]
    if body.op is Ops.BLOCK:
        return get_device(body.arg[1])
    return get_device(bufs[0].arg[1]) if body.op is Ops.SINK or current is None else current


def is_tiny(calls: Iterable[UOp]) -> bool:
    """Whether a program touches at most `TGFX_INLINE_BYTES` (by default one core's L2 cache, from the target
    description): it then runs on the calling thread when its device is idle (hcq "Inline submissions"), where waking
    the device's processor would cost more than the work. An eager `(x * 2 + 1).sum()` of 256 KB spent 47 us waiting
    for the wake-up of a 14 us kernel."""
    limit = int(config.INLINE_BYTES)
    if limit < 0:
        limit = host_target().l2
    touched = {b for c in calls for b in c.src[1:]}
    return sum(buffer_nbytes(b) for b in touched) <= limit
