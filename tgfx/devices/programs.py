"""Device memory and programs of the HCQ interface (`tgfx/devices/hcq.py`): `Buffer`, `Allocator` (a backend's
memory and host copies), `Program` (a compiled kernel, or a Python function run as a host callback, with the
callback's guard `running_callback`)."""
from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import itertools
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tgfx.devices.runtime import HCQCallbackError

_HOST_EXCEPTIONS: dict[int, BaseException] = {}  # token a host callback returned -> the exception it raised
_host_tokens = itertools.count(1)


class Buffer:
    """Device memory: `nbytes` at integer address `ptr` on `device` (an `hcq.HCQDevice`; None for host memory).

    `_mem` is the object that owns the memory; queues hold it (not the Buffer) until their fence passes, so
    freeing a Buffer that a submitted queue still uses is safe. `shared` marks memory that other Buffers are views
    of (or that is a view itself): nothing may write into it in place as if it were one value's alone.
    """

    __slots__ = ("device", "nbytes", "ptr", "_mem", "shared", "__weakref__")

    def __init__(self, device: Any, nbytes: int, ptr: int, mem: Any, shared: bool = False) -> None:
        self.device, self.nbytes, self.ptr, self._mem, self.shared = device, nbytes, ptr, mem, shared

    def __repr__(self) -> str:
        where = self.device.name if self.device is not None else "host"
        return f"<Buffer {where} {self.nbytes} B at {self.ptr:#x}{' freed' if self._mem is None else ''}>"

    @property
    def freed(self) -> bool:
        """True once the buffer was handed back to its allocator."""
        return self._mem is None

    def view(self, offset: int, nbytes: int) -> Buffer:
        """A sub-buffer sharing this memory (and keeping it alive), e.g. a slice of a planned arena; both are marked
        `shared` from then on."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise ValueError(f"view [{offset}, {offset + nbytes}) is outside {self!r}")
        self.shared = True
        # (`owner`, read without a call for a plain Buffer: an eager `x[3]` makes a view)
        return Buffer(self.device, nbytes, self.ptr + offset, self._mem if type(self) is Buffer else self.owner,
                      shared=True)

    def part(self, offset: int, nbytes: int) -> Buffer:
        """A sub-buffer for one copy out of this memory, dropped after it (an element read, `float(y[i])`): unlike
        `view`, it marks nothing `shared`, so a result read this way stays one value's alone (a jitted step whose
        loss was read each step could take back none of its results, `Program._reuse`, nor donate it in place)."""
        if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
            raise ValueError(f"part [{offset}, {offset + nbytes}) is outside {self!r}")
        return Buffer(self.device, nbytes, self.ptr + offset, self._mem if type(self) is Buffer else self.owner,
                      self.shared)

    @property
    def owner(self) -> Any:
        """What another Buffer over this memory holds to keep it (its `_mem`): the memory's owner, or this Buffer
        itself where dropping it does more than drop the memory (a program's leased output hands it back to a pool:
        `tgfx.lowering.program._Leased`)."""
        return self._mem


def host_buffer(array: np.ndarray | memoryview | bytes) -> Buffer:
    """Wrap C-contiguous host memory as a `Buffer` with device None (a COPY source or destination)."""
    arr = np.asarray(array) if isinstance(array, np.ndarray) else np.frombuffer(array, dtype=np.uint8)
    if not arr.flags.c_contiguous:
        raise ValueError(f"host memory must be C-contiguous, got an array with strides {arr.strides}")
    return Buffer(None, arr.nbytes, arr.ctypes.data, arr)


class Allocator:
    """Allocates a device's memory and moves bytes between it and the host.

    A backend implements `alloc`, `copyin`, `copyout` and `fill` (and may extend `free`). `copyin` and `copyout`
    are ordered after everything submitted to the device before (`tgfx.devices.queue.QueueAllocator` runs them on
    the copy engine, for host memory the device can read; a GPU backend would use pinned staging buffers).
    """

    def __init__(self, device: Any) -> None:   # an hcq.HCQDevice (which imports this module)
        self.device = device

    def alloc(self, nbytes: int) -> Buffer:
        """Allocate `nbytes` (at least 64-byte aligned) and return a Buffer on this device."""
        raise NotImplementedError

    def free(self, buf: Buffer) -> None:
        """Give `buf` back. Queues already submitted keep its memory alive until they complete."""
        if buf.device is not self.device:
            raise ValueError(f"{buf!r} does not belong to {self.device.name}")
        if buf._mem is None:
            raise ValueError(f"{buf!r} was already freed")
        buf._mem = None

    def copyin(self, buf: Buffer, src: np.ndarray | memoryview | bytes, timeout: float | None = None) -> None:
        """Copy host bytes into the start of `buf`, after all earlier work on the device; returns when it is done.
        Backend hook (`tgfx.devices.queue.QueueAllocator` does it with a COPY packet)."""
        raise NotImplementedError

    def fill(self, buf: Buffer, src: np.ndarray) -> None:
        """Copy host bytes into the start of `buf`, memory no submitted queue uses yet (just allocated), so the copy
        need not wait for the device's earlier work. A backend whose memory the host can write implements this with
        a plain store; `QueueAllocator`'s is `copyin`."""
        raise NotImplementedError

    def copyout(self, dst: np.ndarray | memoryview, buf: Buffer, timeout: float | None = None) -> None:
        """Copy the first `dst.nbytes` bytes of `buf` into writable host memory `dst`, after all earlier work.
        Backend hook."""
        raise NotImplementedError

    def read(self, buf: Buffer, nbytes: int) -> np.ndarray:
        """The first `nbytes` bytes of `buf`, after all earlier work, as a new host array (uint8): `copyout` into
        one, unless the backend reads its memory more directly."""
        out = np.empty(nbytes, dtype=np.uint8)
        self.copyout(out, buf)
        return out


KernelFn = Callable[[int, int, int], None]
_KERNEL_CTYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_HOST_KERNEL_CTYPE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_PROGRAMS: weakref.WeakValueDictionary[int, Program] = weakref.WeakValueDictionary()   # id -> Program
# id -> name, for profile events and faults read after their program was collected: the names of live programs and
# of the last `COLLECTED_NAMES` collected (one per program ever made was a process's every eager shape's, for good)
_PROGRAM_NAMES: dict[int, str] = {}
COLLECTED_NAMES = 4096
_collected: collections.deque[int] = collections.deque()   # the collected ones whose names are kept, oldest first


def _forget_name(pid: int) -> None:
    """Program `pid` was collected: its name stays for the events still to be read, until `COLLECTED_NAMES` newer."""
    _collected.append(pid)
    while len(_collected) > COLLECTED_NAMES:
        try:
            _PROGRAM_NAMES.pop(_collected.popleft(), None)
        except IndexError:   # (another thread's collection took the last one)
            break


_program_ids = itertools.count(1)


class _CallbackState(threading.local):
    name: str | None = None   # the host callback this thread runs now (a processor's, or inline); a class default:
    # a thread-local attribute never set is then found at once, where a missing one costs an exception per submit


_callback = _CallbackState()


@contextlib.contextmanager
def running_callback(name: str) -> Iterator[None]:
    """Mark the calling thread as running host callback `name` (a user's Python function run as a device command):
    until it returns, a submission or a blocking wait from it raises `HCQCallbackError` instead of waiting on a
    device that waits for the callback (the device's processor runs it, or the caller runs it inline holding the
    device's submit lock: either hung for good)."""
    outer = _callback.name
    _callback.name = name
    try:
        yield
    finally:
        _callback.name = outer


def _refuse_in_callback(what: str) -> None:
    if (name := _callback.name) is not None:
        raise HCQCallbackError(
            f"{name} used tgfx ({what}) while it ran as a host callback between a device's kernels: it would wait on "
            f"a device that waits for the callback to return. Compute with numpy inside a callback (its arguments "
            f"are numpy arrays), and pass the Tensors it needs as arguments instead of reading them there")


def _call_host_kernel(fn: KernelFn, bufs: int | None, vals: int | None, core: int) -> int:
    """Run a Python program for one core id on a processor thread (ctypes takes the GIL); 0, or an error token."""
    try:
        fn(bufs or 0, vals or 0, core)
        return 0
    except BaseException as e:  # noqa: BLE001 -- every fault must reach the host, never unwind into native code
        token = next(_host_tokens)
        _HOST_EXCEPTIONS[token] = e
        return token


class Program:
    """A compiled kernel: `void kernel(void **bufs, int64_t *vals, int64_t core_id)`.

    Args:
        name: the kernel's name, for profiles, DEBUG output and errors.
        fn: the native function's address (e.g. llvmlite's `ee.get_function_address(name)`), or a Python
            callable `fn(bufs_addr, vals_addr, core_id)` (host functions, tests). The processor calls a Python
            callable through a ctypes callback, which takes the GIL, for one core id after another.
        keepalive: anything that owns the code (an llvmlite ExecutionEngine) and must outlive the program.

    Attributes:
        addr: the native address, or None for a Python callable.
        fn_addr: the address EXEC packets call: `addr`, or the callback's trampoline (marked `EXEC_HOST_FN`).
        host_buffers: a Python callable's buffer sizes in bytes, in EXEC order, and `host_writes` how many leading
            buffers it writes: what a device whose memory the host cannot read (CUDA) copies around the call; None
            where unknown (such a program then runs only on devices in host memory).
    """

    host_buffers: tuple[int, ...] | None = None
    host_writes: int = 0

    def __init__(self, name: str, fn: int | KernelFn, keepalive: Any = None) -> None:
        self.name, self.keepalive = name, keepalive
        # cost estimates from the compiler, for DEBUG>=2 throughput lines (0 when unknown)
        self.flops: int = int(getattr(keepalive, "flops", 0) or 0)
        self.mem_bytes: int = int(getattr(keepalive, "mem_bytes", 0) or 0)
        # the kernel options the compiler applied (`Opt`s of tgfx/lowering/kernel_opts.py), for DEBUG>=2 lines
        self.opts: tuple[Any, ...] = tuple(getattr(keepalive, "opts", ()) or ())
        if isinstance(fn, int):
            if fn == 0:
                raise ValueError(f"program {name!r}: function address is 0 (was the symbol found?)")
            self.addr: int | None = fn
            self.call: KernelFn = _KERNEL_CTYPE(fn)   # ctypes releases the GIL during the call
            self.fn_addr: int = fn
        else:
            self.addr, self.call = None, fn
            self._trampoline = _HOST_KERNEL_CTYPE(functools.partial(_call_host_kernel, fn))
            self.fn_addr = ctypes.cast(self._trampoline, ctypes.c_void_p).value or 0
        self.id = next(_program_ids)
        _PROGRAMS[self.id] = self
        _PROGRAM_NAMES[self.id] = name
        weakref.finalize(self, _forget_name, self.id)

    def __repr__(self) -> str:
        where = f"at {self.addr:#x}" if self.addr is not None else "(python)"
        return f"<Program {self.name!r} #{self.id} {where}>"

    @staticmethod
    def of(kernel: Any) -> Program:
        """`kernel` itself if a Program, else a Program for any object with `name` and native `addr` (such as the
        compiler's CompiledKernel), created once per (name, addr) and kept for the life of the process."""
        if isinstance(kernel, Program):
            return kernel
        name, addr = getattr(kernel, "name", None), getattr(kernel, "addr", None)
        if not isinstance(name, str) or not isinstance(addr, int):
            raise TypeError(f"exec needs a Program or an object with `name: str` and `addr: int`, got {kernel!r:.80}")
        if (prog := _NATIVE_PROGRAMS.get((name, addr))) is None:
            prog = _NATIVE_PROGRAMS[(name, addr)] = Program(name, addr, keepalive=kernel)
        return prog


_NATIVE_PROGRAMS: dict[tuple[str, int], Program] = {}

