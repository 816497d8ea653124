"""cuda_driver: ctypes bindings to the CUDA driver API (`libcuda.so.1`), the surface the CUDA backend calls.

No CUDA Python package is needed: the driver library ships with the NVIDIA driver, and `cuda.h`'s declarations are
written out below. Every method of `Driver` is one C call, named as in `cuda.h`, that takes Python values (ints for
handles and addresses) and returns the call's out-parameter; a CUresult other than CUDA_SUCCESS raises `CudaError`
naming the call, the driver's name and text for the code, and what it was done for. The backend
(`tgfx/devices/cuda.py`) calls only these methods, so its translation of packets into driver calls can be tested
against a recording double of this class on machines without a GPU (`tests/test_cuda_runtime.py`).

Exports are versioned: `cuda.h` maps `cuMemAlloc` to `cuMemAlloc_v2`, `cuStreamWaitValue64` to
`cuStreamWaitValue64_v2`, `cuEventElapsedTime` to `cuEventElapsedTime_v2` (CUDA 12.8+), ... Each binding lists its
candidates, newest first, and takes the first the library exports (`_SIGNATURES`).
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

# ---- constants from cuda.h (CUDA 13.0) ----
CUDA_SUCCESS = 0
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_NOT_READY = 600
CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712

CU_STREAM_NON_BLOCKING = 0x1
CU_EVENT_DEFAULT = 0x0
CU_STREAM_WAIT_VALUE_GEQ = 0x0        # (int64_t)(*addr - value) >= 0: a cyclic compare, as the CPU's signed one
CU_STREAM_WRITE_VALUE_DEFAULT = 0x0   # ordered after the stream's earlier work, with a memory barrier
CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_DEVICEMAP = 0x01, 0x02
CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_DEVICEMAP = 0x01, 0x02
CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE = 0x00, 0x01, 0x02
CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 3, 4
CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 5, 6
CU_JIT_LOG_VERBOSE = 12
JIT_LOG_BYTES = 16 << 10

# CUdevice_attribute: the ones the backend and the GPU target read
ATTRIBUTES = {
    "max_threads_per_block": 1,
    "max_shared_memory_per_block": 8,
    "warp_size": 10,
    "max_registers_per_block": 12,
    "clock_rate_khz": 13,
    "sm_count": 16,
    "memory_clock_rate_khz": 36,
    "memory_bus_width": 37,
    "l2_cache_size": 38,
    "unified_addressing": 41,
    "cc_major": 75,
    "cc_minor": 76,
    "max_shared_memory_per_sm": 81,
    "max_registers_per_sm": 82,
    "max_shared_memory_per_block_optin": 97,
    "max_blocks_per_sm": 106,
    "stream_mem_ops_64": 122,
}

LIBRARY = "libcuda.so.1"
# TGFX_CUDA_LIBRARY names another driver library (a path): for machines where it is not on the loader's path
LIBRARY_ENV = "TGFX_CUDA_LIBRARY"


class CudaError(RuntimeError):
    """A driver call returned an error.

    Attributes:
        call: the C function, e.g. "cuLaunchKernel".
        code: the CUresult; name and text: the driver's `cuGetErrorName` / `cuGetErrorString` for it.
        where: what the call was for (the kernel, the copy, the device), "" when not known.
    """

    def __init__(self, call: str, code: int, name: str, text: str, where: str = "") -> None:
        self.call, self.code, self.name, self.text, self.where = call, code, name, text, where
        super().__init__(f"{call} failed with {name} ({code}): {text}" + (f" [{where}]" if where else ""))

    def at(self, where: str) -> CudaError:
        """The same error, saying what the call was for."""
        return CudaError(self.call, self.code, self.name, self.text, f"{where}; {self.where}" if self.where else where)


class CudaDriverNotFound(RuntimeError):
    """No CUDA driver library could be loaded (a machine without an NVIDIA driver)."""


# name -> (candidate exports, newest first; argument types). Every function returns a CUresult (c_int).
_P, _U, _I, _Z, _U64 = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint64
_PP, _PI, _PZ, _PU64 = (ctypes.POINTER(t) for t in (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint64))
_SIGNATURES: dict[str, tuple[tuple[str, ...], tuple[Any, ...]]] = {
    "cuInit": (("cuInit",), (_U,)),
    "cuDriverGetVersion": (("cuDriverGetVersion",), (_PI,)),
    "cuGetErrorName": (("cuGetErrorName",), (_I, ctypes.POINTER(ctypes.c_char_p))),
    "cuGetErrorString": (("cuGetErrorString",), (_I, ctypes.POINTER(ctypes.c_char_p))),
    "cuDeviceGetCount": (("cuDeviceGetCount",), (_PI,)),
    "cuDeviceGet": (("cuDeviceGet",), (_PI, _I)),
    "cuDeviceGetName": (("cuDeviceGetName",), (ctypes.c_char_p, _I, _I)),
    "cuDeviceGetAttribute": (("cuDeviceGetAttribute",), (_PI, _I, _I)),
    "cuDeviceTotalMem": (("cuDeviceTotalMem_v2",), (_PZ, _I)),
    "cuDeviceCanAccessPeer": (("cuDeviceCanAccessPeer",), (_PI, _I, _I)),
    "cuDevicePrimaryCtxRetain": (("cuDevicePrimaryCtxRetain",), (_PP, _I)),
    "cuDevicePrimaryCtxRelease": (("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"), (_I,)),
    "cuCtxSetCurrent": (("cuCtxSetCurrent",), (_P,)),
    "cuCtxEnablePeerAccess": (("cuCtxEnablePeerAccess",), (_P, _U)),
    "cuMemAlloc": (("cuMemAlloc_v2",), (_PU64, _Z)),
    "cuMemFree": (("cuMemFree_v2",), (_U64,)),
    "cuMemHostAlloc": (("cuMemHostAlloc",), (_PP, _Z, _U)),
    "cuMemFreeHost": (("cuMemFreeHost",), (_P,)),
    "cuMemHostRegister": (("cuMemHostRegister_v2", "cuMemHostRegister"), (_P, _Z, _U)),
    "cuMemHostGetDevicePointer": (("cuMemHostGetDevicePointer_v2",), (_PU64, _P, _U)),
    "cuMemsetD8Async": (("cuMemsetD8Async",), (_U64, ctypes.c_ubyte, _Z, _P)),
    "cuModuleLoadDataEx": (("cuModuleLoadDataEx",), (_PP, _P, _U, _PI, _PP)),
    "cuModuleGetFunction": (("cuModuleGetFunction",), (_PP, _P, ctypes.c_char_p)),
    "cuModuleUnload": (("cuModuleUnload",), (_P,)),
    "cuLaunchKernel": (("cuLaunchKernel",), (_P, _U, _U, _U, _U, _U, _U, _U, _P, _PP, _PP)),
    "cuStreamCreate": (("cuStreamCreate",), (_PP, _U)),
    "cuStreamDestroy": (("cuStreamDestroy_v2", "cuStreamDestroy"), (_P,)),
    "cuStreamSynchronize": (("cuStreamSynchronize",), (_P,)),
    "cuStreamWaitValue64": (("cuStreamWaitValue64_v2", "cuStreamWaitValue64"), (_P, _U64, _U64, _U)),
    "cuStreamWriteValue64": (("cuStreamWriteValue64_v2", "cuStreamWriteValue64"), (_P, _U64, _U64, _U)),
    "cuLaunchHostFunc": (("cuLaunchHostFunc",), (_P, _P, _P)),
    "cuMemcpyHtoDAsync": (("cuMemcpyHtoDAsync_v2",), (_U64, _P, _Z, _P)),
    "cuMemcpyDtoHAsync": (("cuMemcpyDtoHAsync_v2",), (_P, _U64, _Z, _P)),
    "cuMemcpyDtoDAsync": (("cuMemcpyDtoDAsync_v2",), (_U64, _U64, _Z, _P)),
    "cuMemcpyPeerAsync": (("cuMemcpyPeerAsync",), (_U64, _P, _U64, _P, _Z, _P)),
    "cuMemcpyAsync": (("cuMemcpyAsync",), (_U64, _U64, _Z, _P)),
    "cuMemcpyHtoD": (("cuMemcpyHtoD_v2",), (_U64, _P, _Z)),
    "cuMemcpyDtoH": (("cuMemcpyDtoH_v2",), (_P, _U64, _Z)),
    "cuEventCreate": (("cuEventCreate",), (_PP, _U)),
    "cuEventRecord": (("cuEventRecord",), (_P, _P)),
    "cuEventQuery": (("cuEventQuery",), (_P,)),
    "cuEventSynchronize": (("cuEventSynchronize",), (_P,)),
    "cuEventElapsedTime": (("cuEventElapsedTime_v2", "cuEventElapsedTime"), (ctypes.POINTER(ctypes.c_float), _P, _P)),
    "cuEventDestroy": (("cuEventDestroy_v2", "cuEventDestroy"), (_P,)),
}


def _bind(lib: ctypes.CDLL, name: str) -> Any:
    exports, argtypes = _SIGNATURES[name]
    for export in exports:
        fn = getattr(lib, export, None)
        if fn is not None:
            fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
            return fn
    raise CudaDriverNotFound(f"the CUDA driver library exports none of {', '.join(exports)}: the driver is older than "
                             f"this backend needs (CUDA 12.0 or newer); update the NVIDIA driver")


class Driver:
    """The CUDA driver API, one method per C call (named as in `cuda.h`, without the `_v2` suffixes).

    Handles (CUcontext, CUmodule, CUfunction, CUstream, CUevent) and addresses (CUdeviceptr, host pointers) are
    Python ints. Methods that have one out-parameter return it. Every non-success CUresult raises `CudaError`.

    Args:
        lib: the loaded driver library (`load_driver` loads `libcuda.so.1`).
    """

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self._fns = {name: _bind(lib, name) for name in _SIGNATURES}
        self.lock = threading.Lock()   # the module loads' JIT log buffers

    # ---- errors ----
    def error_name(self, code: int) -> tuple[str, str]:
        """`cuGetErrorName` and `cuGetErrorString` of `code` (placeholders for a code the driver does not know)."""
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        ok = self._fns["cuGetErrorName"](code, ctypes.byref(name)) == CUDA_SUCCESS and name.value
        ok2 = self._fns["cuGetErrorString"](code, ctypes.byref(text)) == CUDA_SUCCESS and text.value
        return (name.value.decode() if ok else f"CUresult {code}",
                text.value.decode() if ok2 else "(the driver has no text for this code)")

    def check(self, call: str, code: int) -> None:
        """Raise `CudaError` for a failed `call`."""
        if code != CUDA_SUCCESS:
            raise CudaError(call, code, *self.error_name(code))

    def _call(self, name: str, *args: Any) -> int:
        code = self._fns[name](*args)
        self.check(name, code)
        return code

    def _out(self, name: str, ctype: Any, *args: Any) -> int:
        out = ctype()
        self._call(name, ctypes.byref(out), *args)
        return int(out.value or 0)

    # ---- initialisation and devices ----
    def cuInit(self, flags: int = 0) -> None:
        self._call("cuInit", flags)

    def cuDriverGetVersion(self) -> int:
        return self._out("cuDriverGetVersion", ctypes.c_int)

    def cuDeviceGetCount(self) -> int:
        return self._out("cuDeviceGetCount", ctypes.c_int)

    def cuDeviceGet(self, ordinal: int) -> int:
        return self._out("cuDeviceGet", ctypes.c_int, ordinal)

    def cuDeviceGetName(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", buf, len(buf), dev)
        return buf.value.decode(errors="replace")

    def cuDeviceGetAttribute(self, attrib: int, dev: int) -> int:
        return self._out("cuDeviceGetAttribute", ctypes.c_int, attrib, dev)

    def cuDeviceTotalMem(self, dev: int) -> int:
        return self._out("cuDeviceTotalMem", ctypes.c_size_t, dev)

    def cuDeviceCanAccessPeer(self, dev: int, peer: int) -> bool:
        return bool(self._out("cuDeviceCanAccessPeer", ctypes.c_int, dev, peer))

    def cuDevicePrimaryCtxRetain(self, dev: int) -> int:
        return self._out("cuDevicePrimaryCtxRetain", ctypes.c_void_p, dev)

    def cuDevicePrimaryCtxRelease(self, dev: int) -> None:
        self._call("cuDevicePrimaryCtxRelease", dev)

    def cuCtxSetCurrent(self, ctx: int) -> None:
        self._call("cuCtxSetCurrent", ctx)

    def cuCtxEnablePeerAccess(self, peer_ctx: int) -> None:
        """Let the current context read and write `peer_ctx`'s memory (already enabled is no error)."""
        code = self._fns["cuCtxEnablePeerAccess"](peer_ctx, 0)
        if code != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
            self.check("cuCtxEnablePeerAccess", code)

    # ---- memory ----
    def cuMemAlloc(self, nbytes: int) -> int:
        return self._out("cuMemAlloc", ctypes.c_uint64, nbytes)

    def cuMemFree(self, ptr: int) -> None:
        self._call("cuMemFree", ptr)

    def cuMemHostAlloc(self, nbytes: int, flags: int) -> int:
        return self._out("cuMemHostAlloc", ctypes.c_void_p, nbytes, flags)

    def cuMemFreeHost(self, ptr: int) -> None:
        self._call("cuMemFreeHost", ptr)

    def cuMemHostRegister(self, ptr: int, nbytes: int, flags: int) -> bool:
        """Page-lock and map host memory; False if it was registered already."""
        code = self._fns["cuMemHostRegister"](ptr, nbytes, flags)
        if code == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
            return False
        self.check("cuMemHostRegister", code)
        return True

    def cuMemHostGetDevicePointer(self, ptr: int) -> int:
        return self._out("cuMemHostGetDevicePointer", ctypes.c_uint64, ptr, 0)

    def cuMemsetD8Async(self, ptr: int, value: int, nbytes: int, stream: int) -> None:
        self._call("cuMemsetD8Async", ptr, value, nbytes, stream)

    # ---- modules ----
    def cuModuleLoadData(self, image: bytes) -> int:
        """Load a PTX (JIT-compiled by the driver) or cubin image. A failure's `CudaError.where` holds the JIT's
        error log (what ptxas said)."""
        log = ctypes.create_string_buffer(JIT_LOG_BYTES)
        opts = (ctypes.c_int * 3)(CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE)
        vals = (ctypes.c_void_p * 3)(ctypes.addressof(log), JIT_LOG_BYTES, 1)
        data = image if image.endswith(b"\0") else image + b"\0"   # PTX is read as a C string
        mod = ctypes.c_void_p()
        code = self._fns["cuModuleLoadDataEx"](ctypes.byref(mod), data, 3, opts, vals)
        if code != CUDA_SUCCESS:
            text = log.value.decode(errors="replace").strip()
            raise CudaError("cuModuleLoadDataEx", code, *self.error_name(code),
                            f"JIT log: {text}" if text else "the JIT wrote no log")
        return int(mod.value or 0)

    def cuModuleGetFunction(self, module: int, name: str) -> int:
        return self._out("cuModuleGetFunction", ctypes.c_void_p, module, name.encode())

    def cuModuleUnload(self, module: int) -> None:
        self._call("cuModuleUnload", module)

    # ---- launches and streams ----
    def cuLaunchKernel(self, fn: int, grid: Sequence[int], block: Sequence[int], shared_bytes: int, stream: int,
                       params: int, nbytes: int) -> None:
        """Launch `fn` with its parameters packed at host address `params` (`nbytes`: one 8-byte word per parameter,
        the kernel ABI of `tgfx/devices/cuda.py`). The driver copies them before it returns."""
        self.prepare_launch(fn, grid, block, shared_bytes, stream, params, nbytes, "")()

    def prepare_launch(self, fn: int, grid: Sequence[int], block: Sequence[int], shared_bytes: int, stream: int,
                       params: int, nbytes: int, where: str) -> Callable[[], None]:
        """`cuLaunchKernel` with these arguments, as a call of no arguments: a replay issues the same launches
        every call (its parameter words change in place at `params`), and building the call's parameter list
        (the size word, the `extra` array, the ctypes conversions of eleven arguments) cost more Python than the
        call itself: 6.2 us a launch through `cuLaunchKernel`, 1.7 prepared (measured over a stub C function). A
        failure raises `CudaError` saying `where`."""
        size = ctypes.c_size_t(nbytes)
        extra = (ctypes.c_void_p * 5)(CU_LAUNCH_PARAM_BUFFER_POINTER, params, CU_LAUNCH_PARAM_BUFFER_SIZE,
                                      ctypes.addressof(size), CU_LAUNCH_PARAM_END) if nbytes else None
        raw = self._fns["cuLaunchKernel"]
        # the arguments as ctypes values already: a call converts no Python ints (1.7 against 3.1 us a call)
        args = (ctypes.c_void_p(fn), *map(ctypes.c_uint, (*grid, *block, shared_bytes)), ctypes.c_void_p(stream),
                None, extra)

        def launch() -> None:
            code = raw(*args)
            if code:
                raise CudaError("cuLaunchKernel", code, *self.error_name(code), where)
        launch.keep = size      # type: ignore[attr-defined]  -- `extra` points at it
        return launch

    def cuStreamCreate(self, flags: int = CU_STREAM_NON_BLOCKING) -> int:
        return self._out("cuStreamCreate", ctypes.c_void_p, flags)

    def cuStreamDestroy(self, stream: int) -> None:
        self._call("cuStreamDestroy", stream)

    def cuStreamSynchronize(self, stream: int) -> None:
        self._call("cuStreamSynchronize", stream)

    def cuStreamWaitValue64(self, stream: int, addr: int, value: int, flags: int = CU_STREAM_WAIT_VALUE_GEQ) -> None:
        self._call("cuStreamWaitValue64", stream, addr, value & (2 ** 64 - 1), flags)

    def cuStreamWriteValue64(self, stream: int, addr: int, value: int,
                             flags: int = CU_STREAM_WRITE_VALUE_DEFAULT) -> None:
        self._call("cuStreamWriteValue64", stream, addr, value & (2 ** 64 - 1), flags)

    def cuLaunchHostFunc(self, stream: int, fn: int, user_data: int) -> None:
        """Run native `void fn(void *user_data)` on a driver thread once the stream's earlier work is done."""
        self._call("cuLaunchHostFunc", stream, fn, user_data)

    # ---- copies ----
    def cuMemcpyHtoDAsync(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._call("cuMemcpyHtoDAsync", dst, src, nbytes, stream)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._call("cuMemcpyDtoHAsync", dst, src, nbytes, stream)

    def cuMemcpyDtoDAsync(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._call("cuMemcpyDtoDAsync", dst, src, nbytes, stream)

    def cuMemcpyPeerAsync(self, dst: int, dst_ctx: int, src: int, src_ctx: int, nbytes: int, stream: int) -> None:
        self._call("cuMemcpyPeerAsync", dst, dst_ctx, src, src_ctx, nbytes, stream)

    def cuMemcpyAsync(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._call("cuMemcpyAsync", dst, src, nbytes, stream)

    def cuMemcpyHtoD(self, dst: int, src: int, nbytes: int) -> None:
        """A copy that returns once the source is read (pageable memory is staged by the driver)."""
        self._call("cuMemcpyHtoD", dst, src, nbytes)

    def cuMemcpyDtoH(self, dst: int, src: int, nbytes: int) -> None:
        """A copy that returns once it is done."""
        self._call("cuMemcpyDtoH", dst, src, nbytes)

    # ---- events ----
    def cuEventCreate(self, flags: int = CU_EVENT_DEFAULT) -> int:
        return self._out("cuEventCreate", ctypes.c_void_p, flags)

    def cuEventRecord(self, event: int, stream: int) -> None:
        if code := self._fns["cuEventRecord"](event, stream):   # without `_call`'s frames: one a kernel a replay
            self.check("cuEventRecord", code)

    def cuEventQuery(self, event: int) -> bool:
        """True once the event's work is done, False while it is not (CUDA_ERROR_NOT_READY); raises the error of
        a stream that failed."""
        code = self._fns["cuEventQuery"](event)
        if code == CUDA_ERROR_NOT_READY:
            return False
        self.check("cuEventQuery", code)
        return True

    def cuEventSynchronize(self, event: int) -> None:
        self._call("cuEventSynchronize", event)

    def cuEventElapsedTime(self, start: int, end: int) -> float:
        """Milliseconds between two completed events."""
        ms = ctypes.c_float()
        self._call("cuEventElapsedTime", ctypes.byref(ms), start, end)
        return float(ms.value)

    def cuEventDestroy(self, event: int) -> None:
        self._call("cuEventDestroy", event)

    # ---- conveniences over the calls ----
    def attributes(self, dev: int) -> dict[str, int]:
        """Every attribute of `ATTRIBUTES` for device `dev`; 0 for one an older driver does not know."""
        out = {}
        for name, code in ATTRIBUTES.items():
            value = ctypes.c_int()
            ok = self._fns["cuDeviceGetAttribute"](ctypes.byref(value), code, dev) == CUDA_SUCCESS
            out[name] = value.value if ok else 0
        return out


_driver_lock = threading.Lock()


@functools.cache
def _load(path: str) -> Driver:
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise CudaDriverNotFound(
            f"no CUDA driver was found: {path} could not be loaded ({e}). The CUDA backend needs an NVIDIA GPU and "
            f"its driver; without one use the CPU devices ('CPU', 'CPU:1', ...): unset TGFX_DEVICE (or set "
            f"TGFX_DEVICE=CPU), and name a CPU device in device_put / shard") from None
    drv = Driver(lib)
    drv.cuInit(0)
    return drv


def load_driver() -> Driver:
    """The process's driver, loaded and initialised (`cuInit`) on first use.

    Raises:
        CudaDriverNotFound: `libcuda.so.1` (or the library `TGFX_CUDA_LIBRARY` names) cannot be loaded.
        CudaError: cuInit failed (e.g. CUDA_ERROR_NO_DEVICE, a driver and kernel module that do not match).
    """
    with _driver_lock:
        return _load(os.environ.get(LIBRARY_ENV) or LIBRARY)


__all__ = ["ATTRIBUTES", "CudaDriverNotFound", "CudaError", "Driver", "load_driver"]
