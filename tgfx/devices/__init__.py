"""Devices by name: "CPU" (an alias of "CPU:0"), "CPU:0", "CPU:1", ... each with its own memory and queues."""
from __future__ import annotations

import atexit
import re
import threading

from tgfx.devices.cpu import CPUDevice
from tgfx.devices.hcq import HCQDevice

Device = HCQDevice
DEFAULT_DEVICE = "CPU"

_NAME = re.compile(r"CPU(?::([0-9]+))?")
_devices: dict[str, HCQDevice] = {}
_devices_lock = threading.Lock()


def canonical_device(name: str) -> str:
    """The canonical form of a device name: "CPU" -> "CPU:0", "CPU:01" -> "CPU:1".

    Raises:
        ValueError: `name` is not "CPU" or "CPU:<n>".
    """
    m = _NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"unknown device {name!r}; devices are named 'CPU' (the same as 'CPU:0') or 'CPU:<n>' "
                         f"with n = 0, 1, 2, ... (each a separate device with its own memory)")
    return f"CPU:{int(m.group(1) or 0)}"


def get_device(name: str = DEFAULT_DEVICE) -> HCQDevice:
    """The device named `name`, created on first use and cached: `get_device("CPU") is get_device("CPU:0")`."""
    dev = _devices.get(name)  # a canonical name already opened: no parsing, no lock (dispatch calls this per call)
    if dev is not None:
        return dev
    canon = canonical_device(name)
    with _devices_lock:
        dev = _devices.get(canon)
        if dev is None:
            dev = _devices[canon] = CPUDevice(canon)
        return dev


def opened_devices() -> list[HCQDevice]:
    """Every device created so far, in order of creation (e.g. to export a profile of all of them)."""
    with _devices_lock:
        return list(_devices.values())


@atexit.register
def _close_devices() -> None:
    for dev in opened_devices():
        dev.close()
