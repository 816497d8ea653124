"""`with tg.profile("trace.json"): ...`: a Chrome/Perfetto trace of every kernel and copy run inside the block."""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from tgfx.devices import get_device, opened_devices
from tgfx.devices.hcq import export_chrome_trace


@contextlib.contextmanager
def profile(path: str) -> Iterator[None]:
    """Record the device timestamps of everything that runs in the block and write them to `path` as a Chrome trace
    (one track per device queue, with kernel names and durations; open it in ui.perfetto.dev)."""
    get_device("CPU:0")
    for dev in opened_devices():
        dev.synchronize()
        dev.clear_profile()
    try:
        yield
    finally:
        devices = opened_devices()
        for dev in devices:
            dev.synchronize()
        export_chrome_trace(devices, path)
        if lost := {dev.name: n for dev in devices if (n := dev.profile_events_lost)}:
            warnings.warn(f"tg.profile({path!r}): the trace lacks kernels and copies that ran on the device while "
                          f"the host waited, overwritten before they were read ({lost}); a loop run on the device "
                          f"records more than its event ring holds", RuntimeWarning, stacklevel=3)
