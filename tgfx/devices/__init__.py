"""Devices by name: "CPU" (an alias of "CPU:0"), "CPU:0", "CPU:1", ... each with its own memory and queues; after
`tg.distributed.initialize()`, "CPU:<k>@<p>" is device k of process p (see `tgfx/devices/network.py`)."""
from __future__ import annotations

import atexit
import re
import threading

from tgfx.devices import network
from tgfx.devices.cpu import CPUDevice
from tgfx.devices.hcq import HCQDevice

Device = HCQDevice
DEFAULT_DEVICE = "CPU"

_NAME = re.compile(r"CPU(?::([0-9]+))?(?:@([0-9]+))?")
_devices: dict[str, HCQDevice] = {}
_devices_lock = threading.Lock()


def canonical_device(name: str) -> str:
    """The canonical form of a device name: "CPU" -> "CPU:0", "CPU:01" -> "CPU:1"; "CPU:1@p" is "CPU:1" in process
    p itself and stays "CPU:1@p" (a device of another process) everywhere else.

    Raises:
        ValueError: `name` is not "CPU", "CPU:<n>" or "CPU:<n>@<process>" with a process that exists.
    """
    m = _NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"unknown device {name!r}; devices are named 'CPU' (the same as 'CPU:0') or 'CPU:<n>' "
                         f"with n = 0, 1, 2, ... (each a separate device with its own memory), or 'CPU:<n>@<p>' for "
                         f"device n of process p after tg.distributed.initialize()")
    local = f"CPU:{int(m.group(1) or 0)}"
    if m.group(2) is None:
        return local
    g = network.group()
    p = int(m.group(2))
    if p >= g.count:
        raise ValueError(f"device {name!r} names process {p}, but there are {g.count} process(es)" +
                         ("; launch with mpiexec and call tg.distributed.initialize() first" if g.count == 1 else ""))
    return local if p == g.index else f"{local}@{p}"


def get_device(name: str = DEFAULT_DEVICE) -> HCQDevice:
    """The device named `name`, created on first use and cached: `get_device("CPU") is get_device("CPU:0")`."""
    dev = _devices.get(name)  # a canonical name already opened: no parsing, no lock (dispatch calls this per call)
    if dev is not None:
        return dev
    canon = canonical_device(name)
    with _devices_lock:
        dev = _devices.get(canon)
        if dev is None:
            dev = _devices[canon] = network.RemoteDevice(canon) if "@" in canon else CPUDevice(canon)  # type: ignore
        return dev


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
    for dev in opened_devices():
        dev.close()
