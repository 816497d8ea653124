"""Devices by name: "CPU" (an alias of "CPU:0"), "CPU:0", "CPU:1", ... each with its own memory and queues, and, where
an NVIDIA driver is installed, "CUDA" (an alias of "CUDA:0"), "CUDA:0", "CUDA:1", ... (`tgfx/devices/cuda.py`). After
`tg.distributed.initialize()`, "CPU:<k>@<p>" is device k of process p (see `tgfx/devices/network.py`).

The default device, where host data and constants go, is "CPU:0" unless the environment variable `TGFX_DEVICE` (or
`DEVICE`) names another, e.g. `TGFX_DEVICE=CUDA`; it is read once, at import.
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import types

from tgfx import config, forksafe
from tgfx.devices import network
from tgfx.devices.cpu import CPUDevice
from tgfx.devices.hcq import HCQDevice, in_forked_child

Device = HCQDevice

_NAME = re.compile(r"(CPU|CUDA)(?::([0-9]+))?(?:@([0-9]+))?")
_devices: dict[str, HCQDevice] = {}
_devices_lock = forksafe.lock()


# names of this process's devices, canonical (a name with a process, "CPU:1@p", depends on the process group)
_canonical: dict[str, str] = {}


def canonical_device(name: str) -> str:
    """The canonical form of a device name: "CPU" -> "CPU:0", "CPU:01" -> "CPU:1", "CUDA" -> "CUDA:0"; "CPU:1@p" is
    "CPU:1" in process p itself and stays "CPU:1@p" (a device of another process) everywhere else.

    Raises:
        ValueError: `name` is not "CPU", "CPU:<n>", "CPU:<n>@<process>" with a process that exists, "CUDA" or
            "CUDA:<n>", or names a CUDA device this machine lacks.
        CudaDriverNotFound: `name` is a CUDA device, and no CUDA driver is installed.
    """
    if type(name) is str and (hit := _canonical.get(name)) is not None:
        return hit
    m = _NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None or (m.group(1) == "CUDA" and m.group(3) is not None):
        raise ValueError(f"unknown device {name!r}; devices are named 'CPU' (the same as 'CPU:0') or 'CPU:<n>' "
                         f"with n = 0, 1, 2, ... (each a separate device with its own memory), 'CUDA' or "
                         f"'CUDA:<n>' for NVIDIA GPUs, or 'CPU:<n>@<p>' for device n of process p after "
                         f"tg.distributed.initialize()")
    kind, n = m.group(1), int(m.group(2) or 0)
    if kind == "CUDA":
        _check_cuda(n)
        out = _canonical[name] = f"CUDA:{n}"
        return out
    local = f"CPU:{n}"
    if m.group(3) is None:
        _canonical[name] = local
        return local
    g = network.group()
    p = int(m.group(3))
    if p >= g.count:
        raise ValueError(f"device {name!r} names process {p}, but there are {g.count} process(es)" +
                         ("; launch with mpiexec and call tg.distributed.initialize() first" if g.count == 1 else ""))
    return local if p == g.index else f"{local}@{p}"


def _check_cuda(n: int) -> None:
    """Raise at once (not when the first kernel runs) if CUDA:n does not exist here."""
    from tgfx.devices.cuda import device_count
    count = device_count()
    if n >= count:
        raise ValueError(f"unknown device 'CUDA:{n}': the CUDA driver reports {count} GPU{'s' if count != 1 else ''} "
                         f"on this machine" + (f" (CUDA:0 .. CUDA:{count - 1})" if count else
                                               "; use the CPU devices ('CPU', 'CPU:1', ...) instead"))


def _default_device() -> str:
    """The default device: what TGFX_DEVICE (or DEVICE) names, else "CPU:0". A CUDA device named there is checked
    when first used, so that importing tgfx never fails for it."""
    for var in ("TGFX_DEVICE", "DEVICE"):
        name = os.environ.get(var)
        if name:
            m = _NAME.fullmatch(name.upper())
            if m is None or m.group(3) is not None:
                raise ValueError(f"{var}={name!r} names no device; set it to 'CPU', 'CPU:<n>', 'CUDA' or 'CUDA:<n>' "
                                 f"(or unset it for the CPU)")
            return f"{m.group(1)}:{int(m.group(2) or 0)}"
    return "CPU:0"


DEFAULT_DEVICE = _default_device()


def get_device(name: str = DEFAULT_DEVICE) -> HCQDevice:
    """The device named `name`, created on first use and cached: `get_device("CPU") is get_device("CPU:0")`."""
    dev = _devices.get(name)  # a canonical name already opened: no parsing, no lock (dispatch calls this per call)
    if dev is not None:
        return dev
    canon = canonical_device(name)
    with _devices_lock:
        dev = _devices.get(canon)
        if dev is None:
            if canon.startswith("CUDA:"):
                from tgfx.devices.cuda import CUDADevice
                dev = _devices[canon] = CUDADevice(canon)
            elif "@" in canon:
                dev = _devices[canon] = network.RemoteDevice(canon)  # type: ignore
            else:
                dev = _devices[canon] = CPUDevice(canon)
        return dev


def cuda_device_names() -> list[str]:
    """The CUDA devices of this machine, ["CUDA:0", ...]; empty without a driver or a GPU."""
    from tgfx.devices.cuda import available_count
    return [f"CUDA:{i}" for i in range(available_count())]


def register_device(dev: HCQDevice) -> None:
    """Add a device made elsewhere (the network engine) to the registry, so it is listed and closed at exit."""
    with _devices_lock:
        _devices[dev.name] = dev


def opened_devices() -> list[HCQDevice]:
    """Every device created so far, in order of creation (e.g. to export a profile of all of them); devices of other
    processes are only names here, and are not listed."""
    with _devices_lock:
        return [d for d in _devices.values() if not isinstance(d, network.RemoteDevice)]


@atexit.register
def _close_devices() -> None:
    if in_forked_child():   # its devices' threads are the parent's, and stay there
        return
    for dev in opened_devices():
        dev.close()


# ---- the devices of this process (`tg.devices()`, JAX's listing) ----
# how many CPU devices `list_devices()` lists (0: XLA_FLAGS' --xla_force_host_platform_device_count, else 1)
CPU_DEVICES = config.Flag("TGFX_CPU_DEVICES", 0)
_XLA_COUNT = re.compile(r"--xla_force_host_platform_device_count=([0-9]+)")


def backend_named(backend: str | None, fn: str) -> str:
    """The backend a device listing is of: "cpu" or "cuda" ("gpu" is JAX's name for it); None: the default device's."""
    if backend is None:
        return "cuda" if DEFAULT_DEVICE.startswith("CUDA") else "cpu"
    name = {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}.get(str(backend).lower())
    if name is None:
        raise ValueError(f"{fn}: unknown backend {backend!r}; tgfx's backends are 'cpu' and 'cuda' ('gpu'), or None "
                         f"for the default device's")
    return name


def list_devices(backend: str | None = None) -> list[str]:
    """The devices of this process, by name: `["CPU:0", "CPU:1", ...]`, as `jax.devices()` lists its devices.

    The list is configured, not discovered, so that code which sizes its work by `device_count()` sees the same
    number on every run: `TGFX_CPU_DEVICES=n` (an environment variable, or `tg.Context(TGFX_CPU_DEVICES=n)`) lists
    n devices; unset, the count JAX programs set with `XLA_FLAGS=--xla_force_host_platform_device_count=n` is used,
    and without either there is one device, `["CPU:0"]` (as JAX has one CPU device by default). Every `"CPU:<k>"`
    is still a separate device with its own memory that any function accepts by name, listed here or not.

    >>> with tg.Context(TGFX_CPU_DEVICES=2):
    ...     tg.devices()
    ['CPU:0', 'CPU:1']

    CUDA devices are listed by `devices("cuda")` (JAX's `jax.devices("gpu")`), and by `devices()` when the default
    device is one (`TGFX_DEVICE=CUDA`): every GPU the driver reports, none without a driver.

    Raises:
        ValueError: `backend` is not None, "cpu", "cuda" or "gpu".
    """
    if backend_named(backend, "devices") == "cuda":
        return cuda_device_names()
    g = network.group()
    if g.count > 1:  # after tg.distributed.initialize(): every process's, in process order (tgfx/distributed.py)
        return [d for p in range(g.count) for d in process_devices(p)]
    n = int(CPU_DEVICES.value)
    if n <= 0:
        m = _XLA_COUNT.search(os.environ.get("XLA_FLAGS", ""))
        n = int(m.group(1)) if m else 1
    return [f"CPU:{i}" for i in range(max(n, 1))]


def process_devices(p: int) -> list[str]:
    return [canonical_device(f"CPU:{k}@{p}") for k in range(network.group().devices_per_process)]


class _CallablePackage(types.ModuleType):
    """This package, callable as the JAX-style listing `tg.devices(backend=None)` (`list_devices`): the
    one name is both, so `tg.devices("cuda")` lists and `import tgfx.devices.target` still finds the submodule (an
    attribute `tgfx.devices` bound to the function hid the package from submodule imports)."""

    def __call__(self, backend: str | None = None) -> list[str]:
        return list_devices(backend)


sys.modules[__name__].__class__ = _CallablePackage
