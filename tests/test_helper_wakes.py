"""Whether a parallel EXEC wakes the sleeping helper threads (`@parallel` in tgfx/devices/processor.ll).

Waking a sleeping helper costs the processor a system call, and the helper the time until the scheduler runs it on
a core: a few microseconds on a quiet host, milliseconds where other processes hold the cores or the wake-up queues
the helper behind the processor itself. A job shorter than that is run by the processor alone (a 512 x 64 x 64
matmul in 8 parts on a loaded 2-core host: 38.7 us median either way, 46 us at the 90th percentile instead of 64).
The processor decides from its program's last run and the running averages of what wakes cost; these tests set
those averages and count the wakes (`W_WAKES`, `W_WAKES_SKIPPED`), never time anything."""
from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import native_programs

from tgfx.devices import get_device, native
from tgfx.devices.cpu import cpu_count
from tgfx.devices.hcq import Engine, HCQDevice, Program

KERNEL_IR = r"""
; bufs[0][core] = core (int64)
define void @write_core(ptr %bufs, ptr %vals, i64 %core) {
  %b0 = load ptr, ptr %bufs
  %p = getelementptr i64, ptr %b0, i64 %core
  store i64 %core, ptr %p
  ret void
}
"""
N = 64          # core ids of the test's job
HOUR = 1 << 60  # an arrival time no job outlasts (in `stamp` units: ns or time-stamp counter ticks)

pytestmark = pytest.mark.skipif(cpu_count() < 2, reason="needs a helper thread")


@pytest.fixture(scope="module")
def write_core() -> Program:
    return native_programs(KERNEL_IR, ("write_core",))["write_core"]


@pytest.fixture
def cpu0() -> Iterator[HCQDevice]:
    dev = get_device("CPU:0")
    rt = native.runtime()
    saved = rt.wake_mode, int(rt.g[native.G_WAKE_LATENCY]), int(rt.g[native.G_WAKE_COST])
    yield dev
    dev.synchronize()
    rt.wake_mode, rt.g[native.G_WAKE_LATENCY], rt.g[native.G_WAKE_COST] = saved


def _run_with_helpers_asleep(dev: HCQDevice, prog: Program) -> tuple[int, int]:
    """Run `prog` over N core ids once every helper sleeps (as they do after a moment without jobs); returns the
    (wakes, skipped wakes) it added, after checking every core id ran."""
    rt, ctl = native.runtime(), dev.processors[Engine.COMPUTE].ctl
    sleepers = rt.g[native.G_EPOCH + 1:native.G_EPOCH + 2].view(np.int32)   # (the count after the epoch word)
    deadline = time.monotonic() + 10
    while sleepers[0] < len(rt.helpers) and time.monotonic() < deadline:
        time.sleep(0.001)
    assert sleepers[0] == len(rt.helpers), "the helpers did not fall asleep"
    wakes, skipped = int(ctl[native.W_WAKES]), int(ctl[native.W_WAKES_SKIPPED])
    buf = dev.allocator.alloc(8 * N)
    dev.exec_sync(prog, [buf], global_size=N)
    got = np.frombuffer(dev.allocator.read(buf, 8 * N), np.int64)
    np.testing.assert_array_equal(got, np.arange(N))
    return int(ctl[native.W_WAKES]) - wakes, int(ctl[native.W_WAKES_SKIPPED]) - skipped


def test_a_job_shorter_than_the_helpers_arrival_lets_them_sleep(cpu0: HCQDevice, write_core: Program) -> None:
    rt = native.runtime()
    rt.wake_mode = 0
    rt.g[native.G_COSTS + (write_core.id & native.COST_MASK)] = 0   # (its time not known: its first run)
    assert _run_with_helpers_asleep(cpu0, write_core) == (1, 0)    # a job of unknown length wakes them
    rt.g[native.G_WAKE_LATENCY], rt.g[native.G_WAKE_COST] = HOUR, 0
    assert _run_with_helpers_asleep(cpu0, write_core) == (0, 1)    # known now, and shorter than an hour: not
    rt.g[native.G_WAKE_LATENCY], rt.g[native.G_WAKE_COST] = 0, 0
    assert _run_with_helpers_asleep(cpu0, write_core) == (1, 0)    # longer than a wake that costs nothing


def test_a_skipped_wake_lets_the_arrival_estimate_decay(cpu0: HCQDevice, write_core: Program) -> None:
    """What a wake was measured to cost may no longer hold (the processes that held the cores gone): each skipped
    wake shrinks the estimates (the helpers' arrival, the wake's cost) by 2^-LATENCY_DECAY, so a wake is tried, and
    measured, again."""
    rt = native.runtime()
    rt.wake_mode = 0
    _run_with_helpers_asleep(cpu0, write_core)                     # (its time known)
    rt.g[native.G_WAKE_LATENCY], rt.g[native.G_WAKE_COST] = HOUR, HOUR
    assert _run_with_helpers_asleep(cpu0, write_core) == (0, 1)
    decayed = HOUR - (HOUR >> native.LATENCY_DECAY)
    assert rt.g[native.G_WAKE_LATENCY] == decayed and rt.g[native.G_WAKE_COST] == decayed


def test_wake_mode_always_and_never(cpu0: HCQDevice, write_core: Program) -> None:
    rt = native.runtime()
    _run_with_helpers_asleep(cpu0, write_core)                     # (its time known)
    rt.g[native.G_WAKE_LATENCY], rt.g[native.G_WAKE_COST] = HOUR, 0
    rt.wake_mode = 1
    assert _run_with_helpers_asleep(cpu0, write_core) == (1, 0)
    rt.wake_mode = 2
    rt.g[native.G_WAKE_LATENCY] = 0
    assert _run_with_helpers_asleep(cpu0, write_core) == (0, 1)
    with pytest.raises(ValueError, match="wake_mode must be 0"):
        rt.wake_mode = 3
