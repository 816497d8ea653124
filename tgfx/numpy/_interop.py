"""Exchange with other array libraries: DLPack (`numpy.from_dlpack(x)` reads a CPU Tensor's buffer in place, and
`tnp.from_dlpack` takes any DLPack producer) and the standard's `__array_namespace__`."""
from __future__ import annotations

from typing import Any

import numpy as np

from tgfx.dtypes import dtypes
from tgfx.tensor import Tensor, canonical_device

_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")
_DL_CPU = 1  # DLPack's kDLCPU


class _HostView:
    """A Tensor's host buffer as numpy's array interface, holding the buffer's node and its memory alive (the memory
    does not return to a program's pool while the node lives) for as long as any array made from it does."""

    def __init__(self, keep: Any, ptr: int, shape: tuple[int, ...], typestr: str, readonly: bool) -> None:
        self.keep = keep
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, readonly), "version": 3}


def host_view(x: Tensor, readonly: bool = True) -> np.ndarray:
    """x's computed value as a numpy array over its CPU buffer, without a copy: realised and waited for first."""
    from tgfx._realize import realize
    from tgfx.lowering.execute import buffer_memory
    from tgfx.lowering.layout import buffer_view
    if not isinstance(x.device, str) or not x.device.startswith("CPU"):
        raise BufferError(f"DLPack: a Tensor on {x.device!r} has no single host buffer to share; move it with "
                          f"x.to_device('CPU') first")
    if x.dtype == dtypes.bfloat16:
        raise BufferError("DLPack: numpy has no bfloat16; convert with x.astype(tnp.float32) first")
    u = realize(x)[0]
    buf = buffer_view(u)
    assert buf is not None, "realize left a Tensor that is not a buffer"
    x.block_until_ready()
    mem = buffer_memory(buf)  # a zero-size buffer has no memory yet: allocate its (empty) one
    return np.asarray(_HostView((u, buf, mem), mem.ptr, x.shape, x.dtype.np.str, readonly))


def dlpack(x: Tensor, *, stream: Any = None, max_version: tuple[int, int] | None = None, dl_device: Any = None,
           copy: bool | None = None) -> Any:
    """`x.__dlpack__()`: a DLPack capsule of x's CPU buffer, shared, not copied (unless copy=True). Marked read-only
    for consumers of DLPack 1.0 and later (Tensors are immutable); an older consumer gets no such flag, as from JAX."""
    if dl_device is not None and tuple(dl_device) != (_DL_CPU, 0):
        raise BufferError(f"DLPack: tgfx shares CPU buffers only, not to device {dl_device}")
    readonly = max_version is not None and tuple(max_version) >= (1, 0)
    arr = host_view(x, readonly)
    if copy:
        arr = arr.copy()
    return arr.__dlpack__(stream=stream, max_version=max_version) if max_version is not None else arr.__dlpack__(
        stream=stream)


def dlpack_device(x: Tensor) -> tuple[int, int]:
    """`x.__dlpack_device__()`: (kDLCPU, 0) for a Tensor on any CPU device."""
    if not isinstance(x.device, str) or not x.device.startswith("CPU"):
        raise BufferError(f"DLPack: a Tensor on {x.device!r} is not in host memory; use x.to_device('CPU')")
    return (_DL_CPU, 0)


def from_dlpack(x: Any, /, *, device: str | None = None, copy: bool | None = None) -> Tensor:
    """A Tensor from any object with `__dlpack__` (a numpy array, a torch CPU tensor, a JAX array): its value is
    copied into a tgfx buffer (`copy=False` is a ValueError: tgfx owns its buffers), a tgfx Tensor is itself (on
    `device`: itself when it is there already, as `to_device`)."""
    if isinstance(x, Tensor):
        out = x if device is None else to_device(x, device)
        if copy is False and out is not x:
            raise ValueError(f"from_dlpack(copy=False): moving a Tensor from {x.device} to {device} copies it")
        return out.contiguous() if copy and out is x else out
    if copy is False:
        raise ValueError("from_dlpack(copy=False): tgfx copies into buffers it owns; pass copy=None or True")
    return Tensor(np.from_dlpack(x), device=device)


def array_namespace(x: Tensor, /, *, api_version: str | None = None) -> Any:
    """`x.__array_namespace__()`: the `tgfx.numpy` module."""
    if api_version is not None and api_version not in _API_VERSIONS:
        raise ValueError(f"__array_namespace__: api_version {api_version!r} is not one tgfx.numpy implements "
                         f"({', '.join(_API_VERSIONS)})")
    import tgfx.numpy
    return tgfx.numpy


def to_device(x: Tensor, device: str | tuple[str, ...], /, *, stream: Any = None) -> Tensor:
    """`x.to_device(device)`: x copied to `device` (itself if it is there, committed or not: the standard's method
    moves, it does not place; `tg.device_put` commits)."""
    if stream is not None:
        raise ValueError("to_device: tgfx orders copies on its own queues; stream must be None")
    return x if isinstance(device, str) and canonical_device(device) == x.device else x.to(device)



