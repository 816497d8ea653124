"""Inline submissions: `submit(..., inline=True)` runs a command buffer on the calling thread when its device is
idle, with the processor's own packet code; otherwise it goes through the ring as always.

Whether a submission ran inline is read off the ring (its write pointer does not move), never off a clock.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import native_programs
from test_hcq import KERNELS_IR, Gate, download, upload

from tgfx.devices import get_device
from tgfx.devices.cpu import cpu_count
from tgfx.devices.hcq import Engine, HCQDevice, HCQExecError, Program, chrome_trace
from tgfx.devices.queue import HWQueue


@pytest.fixture(scope="module")
def k() -> dict[str, Program]:
    return native_programs(KERNELS_IR, ("add1", "write_core", "gate", "append"))


@pytest.fixture
def cpu0() -> Iterator[HCQDevice]:
    dev = get_device("CPU:0")
    dev.synchronize()
    yield dev
    dev.synchronize()          # no fault may leak out of a test unreported


def ring_words(dev: HCQDevice, engine: Engine = Engine.COMPUTE) -> int:
    return dev.processors[engine].ring.wptr


def test_an_idle_device_runs_it_before_submit_returns(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    a = upload(cpu0, np.zeros(4, dtype=np.float32))
    before, value = ring_words(cpu0), cpu0.timeline_value
    fence = HWQueue().exec(k["add1"], [a], global_size=4).exec(k["add1"], [a], global_size=2).submit(cpu0, inline=True)
    assert fence.done and fence.value == value + 1 == cpu0.timeline.value
    assert ring_words(cpu0) == before                  # the ring never saw it
    np.testing.assert_array_equal(download(a, np.float32, 4), [2, 2, 1, 1])


def test_a_busy_device_takes_it_through_the_ring_in_order(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    out = upload(cpu0, np.zeros(1, dtype=np.int64))
    gate = Gate()
    first = HWQueue().exec(k["gate"], [out], vals=(gate.signal.addr,)).submit(cpu0)   # writes 1 once released
    before = ring_words(cpu0)
    later = HWQueue().exec(k["write_core"], [out]).submit(cpu0, inline=True)
    assert not later.done and ring_words(cpu0) > before
    gate.release()
    later.wait()
    assert first.done
    assert download(out, np.int64, 1)[0] == 0          # gate wrote 1 first, then write_core wrote core id 0


def test_a_queue_that_waits_never_runs_inline(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    a = upload(cpu0, np.zeros(1, dtype=np.float32))
    go = cpu0.new_signal(name="go")
    cb = HWQueue().wait(go, 1).exec(k["add1"], [a]).encode()
    assert not cb.inline_ok
    fence = cb.submit(cpu0, inline=True)               # would block this thread on `go`: it goes to the ring
    assert not fence.done
    go.value = 1
    fence.wait()
    assert download(a, np.float32, 1)[0] == 1


def test_a_fault_inline_is_reported_once_and_the_device_stays_usable(cpu0: HCQDevice,
                                                                      k: dict[str, Program]) -> None:
    def boom(bufs: int, vals: int, core: int) -> None:
        raise ValueError(f"bad core {core}")

    a = upload(cpu0, np.zeros(2, dtype=np.float32))
    before = ring_words(cpu0)
    fence = HWQueue().exec(Program("boom", boom), [a]).exec(k["add1"], [a], global_size=2).submit(cpu0, inline=True)
    assert fence.done and ring_words(cpu0) == before
    with pytest.raises(HCQExecError, match=r"CPU:0/compute: EXEC of 'boom' failed: ValueError: bad core 0"):
        fence.wait()
    cpu0.synchronize()                                 # reported once
    np.testing.assert_array_equal(download(a, np.float32, 2), [1, 1])   # the packets after the fault still ran
    HWQueue().exec(k["add1"], [a]).submit(cpu0, inline=True).wait()
    np.testing.assert_array_equal(download(a, np.float32, 2), [2, 1])


def test_a_parallel_exec_inline_runs_every_core_id(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    n = 4 * cpu_count()
    out = upload(cpu0, np.full(n, -1, dtype=np.int64))
    before = ring_words(cpu0)
    HWQueue().exec(k["write_core"], [out], global_size=n).submit(cpu0, inline=True).wait()
    assert ring_words(cpu0) == before
    np.testing.assert_array_equal(download(out, np.int64, n), np.arange(n))


def test_an_inline_signal_releases_a_queue_on_another_device(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    cpu1 = get_device("CPU:1")
    a1 = upload(cpu1, np.zeros(1, dtype=np.float32))
    ready = cpu0.new_signal(name="ready")
    waiting = HWQueue().wait(ready, 1).exec(k["add1"], [a1]).submit(cpu1)
    assert not waiting.done
    HWQueue().signal(ready, 1).submit(cpu0, inline=True)
    waiting.wait()
    assert download(a1, np.float32, 1)[0] == 1
    cpu1.synchronize()


def test_inline_runs_are_profiled(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    a = upload(cpu0, np.zeros(1, dtype=np.float32))
    cpu0.clear_profile()
    HWQueue().exec(k["add1"], [a]).submit(cpu0, inline=True).wait()
    (ev,) = [e for e in cpu0.profile_events if e.name == "add1"]
    assert ev.queue == "compute" and ev.end_ns >= ev.start_ns > 0


def test_profile_events_past_the_event_ring_are_all_kept_in_order(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    # submissions of 1,000 execs, three times round the processor's event ring (taken out of it as it wraps): every
    # one is a profile event, oldest first
    from tgfx.devices.native import EVENT_CAP
    a = upload(cpu0, np.zeros(1, dtype=np.float32))
    cpu0.synchronize()
    cpu0.clear_profile()
    q = HWQueue()
    for _ in range(1000):
        q.exec(k["add1"], [a])
    cb = q.encode()
    subs = 3 * EVENT_CAP // 1000 + 1
    for _ in range(subs):
        cb.submit(cpu0)
    cpu0.synchronize()
    events = [e for e in cpu0.profile_events if e.name == "add1"]
    assert len(events) == 1000 * subs and download(a, np.float32, 1)[0] == 1000 * subs
    assert all(x.start_ns <= y.start_ns for x, y in zip(events, events[1:], strict=False))


def test_profile_events_of_a_submission_longer_than_the_ring_are_all_kept(cpu0: HCQDevice,
                                                                          k: dict[str, Program]) -> None:
    # one submission of 1.5 * EVENT_CAP execs (several times the ring's words), written while the processor is held
    # at a gate: the host waits for room again and again while the processor runs on, and takes the events out as
    # it waits (it used to take them only at the start of a submit: 90% were overwritten)
    from tgfx.devices.native import EVENT_CAP
    a, out = upload(cpu0, np.zeros(1, dtype=np.float32)), upload(cpu0, np.zeros(1, dtype=np.int64))
    cpu0.synchronize()
    cpu0.clear_profile()
    gate = Gate()
    HWQueue().exec(k["gate"], [out], vals=(gate.signal.addr,)).submit(cpu0)
    n = 3 * EVENT_CAP // 2
    q = HWQueue()
    for _ in range(n):
        q.exec(k["add1"], [a])
    assert q.encode().words.size > 2 * cpu0.processors[Engine.COMPUTE].ring.nwords
    threading.Timer(0.05, gate.release).start()
    q.submit(cpu0)
    cpu0.synchronize()
    assert download(a, np.float32, 1)[0] == n
    assert len([e for e in cpu0.profile_events if e.name == "add1"]) == n and cpu0.profile_events_lost == 0


def test_profile_events_a_device_loop_overwrites_are_counted(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    # a BLOCK looping on the device while the host waits records more events than the event ring holds: the
    # oldest are overwritten, and counted (tg.profile warns with the count), never silently missing
    from tgfx.devices.native import EVENT_CAP
    from tgfx.devices.queue import Label
    a, counter = upload(cpu0, np.zeros(1, dtype=np.float32)), cpu0.allocator.alloc(8)
    cpu0.synchronize()
    cpu0.clear_profile()
    n, top, q = EVENT_CAP + 1000, Label("top"), HWQueue()
    with q.block():
        q.write(counter, 0).place(top).exec(k["add1"], [a]).add(counter, 1).jump(top, counter, "<", n)
    q.submit(cpu0).wait()
    kept = len([e for e in cpu0.profile_events if e.name == "add1"])
    assert download(a, np.float32, 1)[0] == n
    assert kept <= EVENT_CAP and kept + cpu0.profile_events_lost == n
    assert chrome_trace([cpu0])["otherData"]["events_lost"] == {"CPU:0": n - kept}
    cpu0.clear_profile()
    assert cpu0.profile_events_lost == 0


def test_profile_events_are_on_the_host_clock_and_retire_as_progress(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    # the processor stamps events with the time-stamp counter where it is invariant; the host converts them to
    # CLOCK_MONOTONIC ns (time.monotonic_ns), so they fall between host reads around the run. Each EXEC retires once
    # into the engine's own count, which host waits read as progress
    import time

    from tgfx.devices.hcq import host_runtime
    a = upload(cpu0, np.zeros(1, dtype=np.float32))
    cpu0.synchronize()
    cpu0.clear_profile()
    retired = host_runtime().progress()[1]
    before = time.monotonic_ns()
    q = HWQueue()
    for _ in range(50):
        q.exec(k["add1"], [a])
    q.submit(cpu0).wait()
    after = time.monotonic_ns()
    assert host_runtime().progress() == (0, retired + 50)
    events = [e for e in cpu0.profile_events if e.name == "add1"]
    assert len(events) == 50 and download(a, np.float32, 1)[0] == 50
    slack = 1_000    # ns: the calibration's two clock reads
    assert all(before - slack <= e.start_ns <= e.end_ns <= after + slack for e in events)


def test_copies_in_and_out_run_inline_on_an_idle_device(cpu0: HCQDevice) -> None:
    before = ring_words(cpu0, Engine.COPY)
    buf = upload(cpu0, np.arange(5, dtype=np.int64))
    np.testing.assert_array_equal(download(buf, np.int64, 5), np.arange(5))
    assert ring_words(cpu0, Engine.COPY) == before


def test_threads_submitting_inline_at_once_lose_nothing(cpu0: HCQDevice, k: dict[str, Program]) -> None:
    log = np.zeros(1 + 4 * 200, dtype=np.int64)        # log[0] counts the entries
    errors: list[BaseException] = []

    def submitter(t: int) -> None:
        try:
            for i in range(200):
                HWQueue().exec(k["append"], [], vals=(log.ctypes.data, t * 1000 + i)).submit(cpu0, inline=True)
        except BaseException as e:  # noqa: BLE001 -- reported below, on the test's thread
            errors.append(e)

    threads = [threading.Thread(target=submitter, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    cpu0.synchronize()
    assert not errors and log[0] == 800
    entries = log[1:]
    assert sorted(entries) == sorted(t * 1000 + i for t in range(4) for i in range(200))
    for t in range(4):                                 # each thread's submissions ran in its order
        mine = [e for e in entries if e // 1000 == t]
        assert mine == sorted(mine)


def test_an_eager_program_within_one_cores_l2_runs_inline(cpu0: HCQDevice) -> None:
    """Programs are inline by what they touch against the target's L2 of one core (TGFX_INLINE_BYTES=-1, the
    default): an eager reduction of a quarter of it runs on the caller, one of twice it goes through the ring."""
    import tgfx as tg
    from tgfx.devices.target import host_target
    ring = cpu0.processors[Engine.COMPUTE].ring
    for fraction, inline in ((4, True), (0.5, False)):
        n = int(host_target().l2 / fraction) // 4
        x = tg.asarray(np.ones(n, np.float32), device="CPU")   # cpu0's ring, whatever the default device
        x.block_until_ready()
        (x * 2).sum().numpy()                     # compiled (and run) once first
        x2 = tg.asarray(np.full(n, 2, np.float32), device="CPU")
        x2.block_until_ready()
        before = ring.wptr
        assert float((x2 * 2).sum()) == 4 * n
        assert (ring.wptr == before) is inline, (fraction, n)
