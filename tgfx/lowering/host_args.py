"""host_args: the buffers a numpy argument of a jitted program is copied into, call after call.

A training loop hands its jitted step a numpy batch every call (`step(params, x_train[rows], y_train[rows])`). Made
a Tensor first, each batch cost a new device buffer (allocated, registered, its UOp made) and a Tensor around it:
14.6 us for a call with one 12-element numpy argument where the same call with a device array took 5.8 (jax 6.7).
Here the program owns `HOST_BUFFERS` buffers per numpy argument and copies the batch into one that no call may still
read (no call holds it now, and the device's timeline has passed the value it had after the last call that did), as
`ScalarArgs` does for Python scalars. With none free, the caller makes a Tensor of the batch as before.
"""
from __future__ import annotations

import threading

import numpy as np

from tgfx.devices import get_device
from tgfx.devices.hcq import Buffer
from tgfx.dtypes import DType
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.execute import buffer_memory, host_view
from tgfx.lowering.layout import new_buffer

HOST_BUFFERS = 3   # buffers a numpy argument of a program cycles through: a step queued behind one still running


class HostBuffer:
    """One buffer of a `HostArgs`: its BUFFER (a RESHAPE of it: the argument's shape), its memory, a numpy view of
    that memory (host memory), whether a call holds it, and the timeline value it may be read until."""
    __slots__ = ("buf", "arg", "mem", "view", "held", "until")

    def __init__(self, buf: UOp, arg: UOp, mem: Buffer, view: np.ndarray | None) -> None:
        self.buf, self.arg, self.mem, self.view = buf, arg, mem, view
        self.held, self.until = False, 0


class HostArgs:
    """The buffers one numpy argument (of one shape and dtype: the program's signature fixes them) is copied into."""

    def __init__(self, device: str, shape: tuple[int, ...], dtype: DType) -> None:
        self.device, self.shape, self.dtype = device, shape, dtype
        self.lock = threading.Lock()
        self.entries: list[HostBuffer] = []

    def take(self, data: np.ndarray) -> HostBuffer | None:
        """A buffer holding `data`'s values (C-ordered, of this argument's dtype), held by the caller until
        `release`; None if none is free."""
        dev = get_device(self.device)
        with self.lock:
            done = dev.timeline.value
            entry = next((e for e in self.entries if not e.held and e.until <= done), None)
            if entry is None:
                if len(self.entries) >= HOST_BUFFERS:
                    return None
                size = data.size
                buf = new_buffer(self.device, size, self.dtype)
                mem = buffer_memory(buf)
                view = host_view(mem, self.device, data.dtype)
                arg = buf if len(self.shape) == 1 else UOp(Ops.RESHAPE, self.dtype, (buf,), self.shape)
                entry = HostBuffer(buf, arg, mem, view)
                self.entries.append(entry)
            entry.held = True
        if entry.view is not None:
            entry.view[:] = data.reshape(-1)
        elif data.size:
            dev.allocator.fill(entry.mem, np.ascontiguousarray(data).reshape(-1).view(np.uint8))
        return entry

    def release(self, entry: HostBuffer) -> None:
        """A call that holds `entry` has submitted (or failed): it may be read until the timeline passes this value."""
        with self.lock:
            entry.held = False
            entry.until = max(entry.until, get_device(self.device).timeline_value)

