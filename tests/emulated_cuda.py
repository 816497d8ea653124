"""`python -m pytest -p tests.emulated_cuda tests/test_ops_reduce.py ...`: any test file with CUDA:0 as the default
device over the emulating driver (`test_cuda_runtime.EmulatedDriver`), on a machine without a GPU.

Every kernel a test compiles takes the GPU's options for an H200's target (grid axes, register tiles with unrolled
reduces, grouped rows), is turned back into loops over its thread ids (`optimize_gpu.thread_loops`) and runs on the
CPU: what the GPU options rewrote is checked by each test's own comparison with numpy, as on a GPU. The PTX is not
run (tests/test_nvptx.py assembles it; `bench/gpu_check.sh` runs it). Tests that assert the CPU's own paths (its
compile counts, host-memory views, its processors) name "CPU" themselves and do not depend on the default device. At
the end it prints how often each GPU option was applied. Subprocesses a test starts do not get the emulation: they run
on the CPU (TGFX_DEVICE is taken out of the environment once tgfx has read it; with it they would look for a driver
this machine does not have)."""
from __future__ import annotations

import collections
import os
from typing import Any

os.environ["TGFX_DEVICE"] = "CUDA"
APPLIED: list[str] = []
REAL: dict[str, Any] = {}   # what the emulation replaces: render_nvptx's kernel functions (test_cuda_runtime's
                            # `emulated` puts them back: its tests check them on their own driver), cuda's counts


class _Unrecorded(list):
    """The double's call log, kept empty: it records every driver call, without bound over a test run."""

    def append(self, item: Any) -> None:
        pass


def install() -> Any:
    """Make this process's CUDA:0 the emulating driver's (its call log kept empty), each kernel the CPU's code of its
    GPU-optimised form, the options' names appended to `APPLIED`; returns the driver."""
    import tgfx.lowering.render_nvptx as render_nvptx
    from tests.test_cuda_runtime import EmulatedDriver, add_one, gpu_options_on_cpu
    from tgfx.devices import cuda
    drv = EmulatedDriver({"add_one": add_one})
    drv.calls = _Unrecorded()
    REAL.update(device_count=cuda.device_count, available_count=cuda.available_count)
    cuda.load_driver, cuda.device_count, cuda.available_count = lambda: drv, lambda: 1, lambda: 1

    def cpu_stand_in(device: Any, ast: Any) -> Any:
        run, opts, name = gpu_options_on_cpu(ast, device.target)
        APPLIED.extend(o.op for o in opts)
        drv.kernels[name] = run
        return device.load_kernel("(emulated)", name, ((1,), (1,)))
    REAL.update(gpu_kernel=render_nvptx.gpu_kernel, preload=render_nvptx.preload)
    render_nvptx.gpu_kernel, render_nvptx.preload = cpu_stand_in, lambda kernels: None
    return drv


def pytest_configure(config: Any) -> None:
    install()
    import tgfx.devices
    assert tgfx.devices.DEFAULT_DEVICE == "CUDA:0", tgfx.devices.DEFAULT_DEVICE
    del os.environ["TGFX_DEVICE"]   # read once, at import: a subprocess a test starts runs on the CPU


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"emulated CUDA:0: GPU options applied {dict(collections.Counter(APPLIED))}")
