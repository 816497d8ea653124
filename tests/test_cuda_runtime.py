"""The CUDA backend's runtime (tgfx/devices/cuda.py).

Without a GPU: the translation of packets into driver calls, checked against a recording double of the driver API
(`FakeDriver`: libcuda's C calls, nothing of tgfx's compiler), the native host functions streams run, and what a
machine without a driver says. With a GPU (`-m gpu`; skipped without libcuda.so.1): the same paths on the real
driver, with a hand-written PTX kernel that follows the backend's kernel ABI.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tgfx import config
from tgfx.devices import cuda as cuda_module
from tgfx.devices.cuda import CUDACommandProcessor, launch_dims
from tgfx.devices.cuda_driver import CUDA_ERROR_NOT_READY, CudaError
from tgfx.devices.cuda_translate import (
    AddressMap,
    CudaBackendError,
    CUDAProgram,
    HostFns,
    HostPages,
    Staging,
    Translator,
    native_host_fns,
)
from tgfx.devices.hcq import Buffer, Engine, Signal, Sym, host_buffer, host_runtime
from tgfx.devices.queue import HWQueue, Label

STREAM = 0x5EA
REAL_DEVICE_COUNT, REAL_AVAILABLE_COUNT = cuda_module.device_count, cuda_module.available_count   # before fixtures
if "device_count" in getattr(sys.modules.get("tests.emulated_cuda"), "REAL", {}):   # the copy pytest collects under
    REAL_DEVICE_COUNT, REAL_AVAILABLE_COUNT = (sys.modules["tests.emulated_cuda"].REAL[k]   # the plugin, which
                                               for k in ("device_count", "available_count"))   # replaced them first
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # (the bench is not installed)
DEVICE_OFFSET = 1 << 44          # the fake driver maps host page p to device address p + DEVICE_OFFSET
HOST_FNS = HostFns(wake=0xA1, copy=0xA2, timestamp=0xA3)


# what the driver reported for an H200 (driver 580.159, bench/gpu_check.sh on 2026-12-04)
H200_ATTRIBUTES = {
    "max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, "warp_size": 32,
    "max_registers_per_block": 65536, "clock_rate_khz": 1980000, "sm_count": 132, "memory_clock_rate_khz": 3201000,
    "memory_bus_width": 6016, "l2_cache_size": 62914560, "unified_addressing": 1, "cc_major": 9, "cc_minor": 0,
    "max_shared_memory_per_sm": 233472, "max_registers_per_sm": 65536, "max_shared_memory_per_block_optin": 232448,
    "max_blocks_per_sm": 32, "stream_mem_ops_64": 1}


class FakeDriver:
    """A recording double of the driver API surface (`tgfx.devices.cuda_driver.Driver`): every call is appended to
    `calls` as (name, args); host allocations and events come from counters; `ready` says which events completed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self._next = 0x10000
        self.ready: dict[int, bool | CudaError] = {}
        self.host_allocs: list[int] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cu"):
            raise AttributeError(name)

        def record(*args: Any) -> Any:
            self.calls.append((name, args))
            if name == "cuMemHostGetDevicePointer":
                return args[0] + DEVICE_OFFSET
            if name in ("cuMemHostAlloc", "cuEventCreate"):
                self._next += 0x100000
                if name == "cuMemHostAlloc":
                    self.host_allocs.append(self._next)
                return self._next
            if name == "cuEventQuery":
                state = self.ready.get(args[0], True)
                if isinstance(state, CudaError):
                    raise state
                return state
            if name == "cuEventElapsedTime":
                return 0.5
            return True if name == "cuMemHostRegister" else None
        return record

    def prepare_launch(self, fn: int, grid: Any, block: Any, shared_bytes: int, stream: int, params: int,
                       nbytes: int, where: str) -> Any:
        """The real driver's prepared launch: here a `cuLaunchKernel` of the same arguments, recorded when it runs,
        and its failure said with `where`."""
        self.calls.append(("prepare_launch", (fn, grid, block, shared_bytes, stream, params, nbytes)))

        def launch() -> None:
            try:
                self.cuLaunchKernel(fn, grid, block, shared_bytes, stream, params, nbytes)
            except CudaError as e:
                raise e.at(where) from None
        return launch

    def named(self, *names: str) -> list[tuple[str, tuple[Any, ...]]]:
        return [c for c in self.calls if c[0] in names]


STREAM_OPS = ("cuStreamWaitValue64", "cuStreamWriteValue64", "cuLaunchHostFunc", "cuLaunchKernel", "cuMemcpyHtoDAsync",
              "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemcpyPeerAsync")


def fake_device(name: str, ctx: int) -> SimpleNamespace:
    return SimpleNamespace(name=name, ctx=ctx)


@pytest.fixture
def env() -> SimpleNamespace:
    drv, memory = FakeDriver(), AddressMap()
    dev0, dev1 = fake_device("CUDA:0", 0xC0), fake_device("CUDA:1", 0xC1)
    timeline = Signal(0, name="CUDA:0.timeline")
    tr = Translator(drv, STREAM, "CUDA:0/compute", dev0, memory, HostPages(drv, memory), Staging(drv, memory),
                    HOST_FNS, timeline.addr, events=None)

    def device_buffer(dev: SimpleNamespace, nbytes: int, ptr: int) -> Buffer:
        memory.add(ptr, nbytes, dev)
        return Buffer(None, nbytes, ptr, b"owned")   # device None: the encoder only needs the address
    return SimpleNamespace(drv=drv, memory=memory, dev0=dev0, dev1=dev1, timeline=timeline, tr=tr,
                           buf=device_buffer)


def submit(env: SimpleNamespace, q: HWQueue, value: int) -> Any:
    """Encode `q` and fill in the timeline WAIT/SIGNAL words as `HCQDevice.submit` does, then translate."""
    cb = q.encode()
    cb.words[1], cb.words[2] = env.timeline.addr, value - 1
    cb.words[-2], cb.words[-1] = env.timeline.addr, value
    return cb, env.tr.run(cb.words, cb.starts)


def dev_addr(addr: int) -> int:
    return (addr & ~4095) + DEVICE_OFFSET + (addr & 4095)


# ---- packets -> driver calls ----
def test_wait_exec_signal_become_stream_waits_launches_and_writes(env: SimpleNamespace) -> None:
    out, inp = env.buf(env.dev0, 4000, 0x7000_0000), env.buf(env.dev0, 4000, 0x7100_0000)
    prog = CUDAProgram("add_one", 0xF00, block=(128, 1, 1), device="CUDA:0")
    other, done = Signal(0, name="other"), Signal(0, name="done")
    q = HWQueue().wait(other, 5).exec(prog, [out, inp], vals=(1000,), global_size=1000).signal(done, 7)
    cb, issued = submit(env, q, 3)
    calls = env.drv.named(*STREAM_OPS)
    assert [c[0] for c in calls] == ["cuStreamWaitValue64", "cuStreamWaitValue64", "cuLaunchKernel",
                                     "cuStreamWriteValue64", "cuLaunchHostFunc", "cuStreamWriteValue64",
                                     "cuLaunchHostFunc"]
    # the leading timeline WAIT (for submission 2) and the queue's own, on the registered pages' device addresses
    assert calls[0][1] == (STREAM, dev_addr(env.timeline.addr), 2)
    assert calls[1][1] == (STREAM, dev_addr(other.addr), 5)
    fn, grid, block, smem, stream, params, nbytes = calls[2][1]
    assert (fn, grid, block, smem, stream, nbytes) == (0xF00, (8, 1, 1), (128, 1, 1), 0, STREAM, 24)
    # the parameter buffer is the packet's argument words, in place: buffers, then values
    assert np.frombuffer(ctypes.string_at(params, nbytes), np.int64).tolist() == [out.ptr, inp.ptr, 1000]
    assert params == cb.words.ctypes.data + 8 * (int(cb.starts[2]) + 1 + 5)
    # a SIGNAL writes the value from the stream, then wakes host sleepers on the host word
    assert calls[3][1] == (STREAM, dev_addr(done.addr), 7) and calls[4][1] == (STREAM, HOST_FNS.wake, done.addr)
    assert calls[5][1] == (STREAM, dev_addr(env.timeline.addr), 3)
    assert calls[6][1] == (STREAM, HOST_FNS.wake, env.timeline.addr)
    assert issued.kernels == ["add_one"]
    pages = {c[1][0] for c in env.drv.named("cuMemHostRegister")}
    assert pages == {a & ~4095 for a in (env.timeline.addr, other.addr, done.addr)}   # each page registered once


def test_a_replay_issues_the_launches_its_plan_prepared_and_reads_what_changes_per_call(env: SimpleNamespace) -> None:
    """A command buffer submitted again (a jitted call) is translated once: the second submission issues the same
    prepared launch (its parameters read in place, so a patched buffer needs no new plan) and reads the timeline's
    WAIT and SIGNAL words afresh; a changed global size makes a new plan; the plan goes with its words."""
    import gc
    out, inp, other = (env.buf(env.dev0, 4000, a) for a in (0x7000_0000, 0x7100_0000, 0x7200_0000))
    prog = CUDAProgram("add_one", 0xF00, block=(128, 1, 1), device="CUDA:0")
    cb = HWQueue().exec(prog, [out, inp], vals=(Sym("n", 1000),), global_size=Sym("n", 1000)).encode()

    def replay(cb: Any, value: int) -> Any:
        cb.words[1], cb.words[2] = env.timeline.addr, value - 1
        cb.words[-2], cb.words[-1] = env.timeline.addr, value
        plan = env.tr.prepare(cb.words, cb.starts)
        env.tr.replay(plan, cb.words)
        return plan
    first = replay(cb, 1)
    cb.patch_buffers({0: other})
    assert replay(cb, 2) is first and not first.host_driven
    assert len(env.drv.named("prepare_launch")) == 1
    cb.patch_vals({"n": 64})
    assert replay(cb, 3) is not first
    launches = [c[1] for c in env.drv.named("cuLaunchKernel")]
    assert [(grid, params) for _, grid, _, _, _, params, _ in launches] == \
        [((8, 1, 1), cb.words.ctypes.data + 8 * (int(cb.starts[1]) + 1 + 5))] * 2 + [((1, 1, 1), launches[0][5])]
    assert [c[1][2] for c in env.drv.named("cuStreamWriteValue64")] == [1, 2, 3]   # each replay's own SIGNAL
    assert np.frombuffer(ctypes.string_at(launches[0][5], 24), np.int64).tolist() == [other.ptr, inp.ptr, 64]
    del cb
    gc.collect()
    assert env.tr._plans == {}


def test_a_stream_skips_waits_for_timeline_values_it_wrote_itself(env: SimpleNamespace) -> None:
    submit(env, HWQueue(), 1)     # waits for 0: the initial value
    submit(env, HWQueue(), 2)     # waits for 1, which this stream wrote
    env.tr.timeline_written = 0   # as if another stream had written it
    submit(env, HWQueue(), 3)
    waits = env.drv.named("cuStreamWaitValue64")
    writes = [c[1][2] for c in env.drv.named("cuStreamWriteValue64")]
    assert [c[1][2] for c in waits] == [2] and writes == [1, 2, 3]


def test_copies_pick_the_direction_and_stage_pageable_host_memory(env: SimpleNamespace) -> None:
    a0, b0 = env.buf(env.dev0, 256, 0x7000_0000), env.buf(env.dev0, 256, 0x7100_0000)
    a1 = env.buf(env.dev1, 256, 0x9000_0000)
    host = np.arange(64, dtype=np.float32)
    pinned = Buffer(None, 256, 0x5000_0000, b"pinned")
    env.memory.add(pinned.ptr, 256, "pinned")
    q = HWQueue(Engine.COPY)
    q.copy(a0, host_buffer(host), 256).copy(host_buffer(host), b0, 256).copy(b0, a0, 128, 64, 32)
    q.copy(a1, a0, 256).copy(a0, pinned, 256).copy(pinned, a0, 16)
    submit(env, q, 1)
    copies = env.drv.named("cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemcpyPeerAsync",
                           "cuLaunchHostFunc")[:-1]   # the last is the timeline's wake
    staging_in, staging_out = env.drv.host_allocs
    names = [c[0] for c in copies]
    assert names == ["cuLaunchHostFunc", "cuMemcpyHtoDAsync",      # pageable -> pinned staging -> device
                     "cuMemcpyDtoHAsync", "cuLaunchHostFunc",      # device -> pinned staging -> pageable
                     "cuMemcpyDtoDAsync", "cuMemcpyPeerAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync"]
    job_in = np.frombuffer(ctypes.string_at(copies[0][1][2], 24), np.int64).tolist()
    assert copies[0][1][:2] == (STREAM, HOST_FNS.copy) and job_in == [staging_in, host.ctypes.data, 256]
    assert copies[1][1] == (a0.ptr, staging_in, 256, STREAM)
    assert copies[2][1] == (staging_out, b0.ptr, 256, STREAM)
    assert np.frombuffer(ctypes.string_at(copies[3][1][2], 24), np.int64).tolist() == \
        [host.ctypes.data, staging_out, 256]
    assert copies[4][1] == (b0.ptr + 64, a0.ptr + 32, 128, STREAM)
    assert copies[5][1] == (a1.ptr, 0xC1, a0.ptr, 0xC0, 256, STREAM)          # a peer copy names both contexts
    assert copies[6][1] == (a0.ptr, pinned.ptr, 256, STREAM)                   # pinned memory needs no staging
    assert copies[7][1] == (pinned.ptr, a0.ptr, 16, STREAM)


def test_a_counted_loop_is_driven_by_the_host_without_waiting_for_the_stream(env: SimpleNamespace) -> None:
    """WRITE i, 0; top: EXEC body(i); ADD i, 1; JUMP i < 3 -> top: the host knows i from the WRITE and ADDs, so it
    issues three launches and the counter's stream writes, and never reads the device."""
    i = env.buf(env.dev0, 8, 0x7000_0000)
    prog = CUDAProgram("body", 0xF00, block=(32,), device="CUDA:0")
    top, q = Label("top"), HWQueue()
    with q.block():
        q.write(i, 0).place(top).exec(prog, [i]).add(i, 1).jump(top, i, "<", 3)
    cb = q.encode()
    assert Translator.host_driven(cb.words, cb.starts)
    assert not Translator.host_driven(*(lambda c: (c.words, c.starts))(HWQueue().exec(prog, [i]).encode()))
    _, issued = submit(env, q, 1)
    ops = [(c[0], c[1][1:3]) for c in env.drv.named("cuLaunchKernel", "cuStreamWriteValue64", "cuMemcpyDtoH")
           if c[0] != "cuStreamWriteValue64" or c[1][1] == i.ptr]
    assert ops == [("cuStreamWriteValue64", (i.ptr, 0)), ("cuLaunchKernel", ((1, 1, 1), (32, 1, 1))),
                   ("cuStreamWriteValue64", (i.ptr, 1)), ("cuLaunchKernel", ((1, 1, 1), (32, 1, 1))),
                   ("cuStreamWriteValue64", (i.ptr, 2)), ("cuLaunchKernel", ((1, 1, 1), (32, 1, 1))),
                   ("cuStreamWriteValue64", (i.ptr, 3))]
    assert issued.kernels == ["body"] * 3 and env.drv.named("cuEventRecord") == []
    assert len(env.drv.named("prepare_launch")) == 1      # the loop's launch is prepared once, issued three times


def test_a_word_the_device_computed_is_read_after_the_stream_reaches_it(env: SimpleNamespace) -> None:
    """A JUMP on a word no WRITE set (a while loop's predicate, a branch index) waits for the stream (an event) and
    reads the word; a COPY over a counter makes the next ADD read it; an indexed COPY moves by the counter."""
    pred, n, i = (env.buf(env.dev0, 8, 0x7000_0000 + k * 0x100_0000) for k in range(3))
    xs, x = env.buf(env.dev0, 64, 0x7400_0000), env.buf(env.dev0, 8, 0x7500_0000)
    reads = {pred.ptr: [1, 1, 0], i.ptr: [5]}     # what the device words hold when the host reads them

    def dtoh(dst: int, src: int, nbytes: int) -> None:
        env.drv.calls.append(("cuMemcpyDtoH", (dst, src, nbytes)))
        ctypes.c_int64.from_address(dst).value = reads[src].pop(0)
    env.drv.cuMemcpyDtoH = dtoh
    prog = CUDAProgram("cond", 0xF00, block=(32,), device="CUDA:0")
    top, end, q = Label("top"), Label("end"), HWQueue()
    with q.block():
        q.copy(i, n, 8).add(i, -1).place(top).exec(prog, [pred, i]).jump(end, pred, "==", 0)
        q.copy(x, xs, 8, index=i, src_stride=8, count=8).add(i, 1).jump(top)
        q.place(end)
    submit(env, q, 1)
    srcs = [c[1][1] for c in env.drv.named("cuMemcpyDtoDAsync")]
    assert srcs == [n.ptr, xs.ptr + 8 * 4, xs.ptr + 8 * 5]      # i = 5 - 1 = 4, then 5
    assert [c[1][1:] for c in env.drv.named("cuMemcpyDtoH")] == [(i.ptr, 8), *[(pred.ptr, 8)] * 3]
    assert len(env.drv.named("cuEventRecord")) == 4 and len(env.drv.named("cuLaunchKernel")) == 3
    # a one-byte word compares signed, as the CPU processor's
    env.drv.calls.clear()
    reads[pred.ptr] = [0xFF]
    q = HWQueue()
    with q.block():
        q.jump(end, pred, "<", 0, width=1).exec(prog, [pred, i]).place(end)
    submit(env, q, 2)
    assert env.drv.named("cuLaunchKernel") == []


def test_malformed_control_flow_is_an_error_naming_the_engine(env: SimpleNamespace) -> None:
    i, xs = env.buf(env.dev0, 8, 0x7000_0000), env.buf(env.dev0, 64, 0x7100_0000)
    q = HWQueue().write(i, 8).copy(i, xs, 8, index=i, src_stride=8, count=8)
    with pytest.raises(CudaBackendError, match=r"CUDA:0/compute: a COPY indexed by the device word .* holds 8, "
                                               r"outside 0..7"):
        submit(env, q, 1)


def test_exec_of_a_cpu_kernel_or_another_devices_kernel_is_an_error(env: SimpleNamespace) -> None:
    from tgfx.devices.hcq import Program
    out = env.buf(env.dev0, 16, 0x7000_0000)
    with pytest.raises(CudaBackendError, match="'cpu_kernel'.*not a kernel loaded on a CUDA device"):
        submit(env, HWQueue().exec(Program("cpu_kernel", 0xC0DE), [out]), 1)
    with pytest.raises(CudaBackendError, match=r"host program <Program 'host_fn'.*does not say the sizes of its 1 "
                                               r"buffers \(Program.host_buffers\)"):
        submit(env, HWQueue().exec(Program("host_fn", lambda *a: None), [out]), 1)
    with pytest.raises(CudaBackendError, match="'k1' was loaded on CUDA:1"):
        submit(env, HWQueue().exec(CUDAProgram("k1", 0xF01, (32,), device="CUDA:1"), [out]), 1)
    with pytest.raises(CudaBackendError, match="'k2' with 1 argument words, but it takes 2 8-byte parameters"):
        submit(env, HWQueue().exec(CUDAProgram("k2", 0xF02, (32,), device="CUDA:0", params=2), [out]), 1)


def test_driver_errors_name_the_call_the_kernel_and_the_device(env: SimpleNamespace) -> None:
    def fail(*args: Any) -> None:
        raise CudaError("cuLaunchKernel", 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested")
    env.drv.cuLaunchKernel = fail
    prog = CUDAProgram("big_kernel", 0xF00, block=(1024,), device="CUDA:0")
    with pytest.raises(CudaError, match=r"cuLaunchKernel failed with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES .*kernel "
                                        r"'big_kernel' on CUDA:0/compute, grid \(1, 1, 1\), block \(1024, 1, 1\)"):
        submit(env, HWQueue().exec(prog, [env.buf(env.dev0, 16, 0x7000_0000)]), 1)


def test_launch_dims_forms() -> None:
    assert launch_dims(((4, 2), 256)) == ((4, 2, 1), (256, 1, 1), 0)
    dims = SimpleNamespace(grid=(8, 1, 1), block=(16, 16, 1), params=3)   # render_nvptx.LaunchDims' fields
    assert launch_dims(dims) == ((8, 1, 1), (16, 16, 1), 0)
    assert launch_dims({"grid": [3, 1, 1], "block": 128}) == ((3, 1, 1), (128, 1, 1), 0)
    prog = CUDAProgram("k", 0xF00, block=(256,), grid_yz=(2,))
    assert prog.grid(1) == (1, 2, 1) and prog.grid(256) == (1, 2, 1) and prog.grid(257) == (2, 2, 1)


# ---- the ring: completion, retirement and asynchronous failures ----
def test_ring_read_pointer_follows_completion_events_and_raises_device_failures() -> None:
    drv, memory = FakeDriver(), AddressMap()
    timeline, records = Signal(0), []
    dev = SimpleNamespace(name="CUDA:7", ctx=0xC7, drv=drv, make_current=lambda: None, timeline=timeline,
                          pages=HostPages(drv, memory), staging=Staging(drv, memory),
                          _record=lambda ev, prog, who=None: records.append(ev))
    proc = CUDACommandProcessor(dev, Engine.COMPUTE)   # type: ignore[arg-type]
    proc.start()
    prog = CUDAProgram("k", 0xF00, block=(64,), device="CUDA:7")
    out = Buffer(None, 64, 0x7000_0000, b"x")
    memory.add(out.ptr, 64, dev)
    cb = HWQueue().exec(prog, [out]).encode()
    cb.words[1], cb.words[2], cb.words[-2], cb.words[-1] = timeline.addr, 0, timeline.addr, 1
    proc.ring.write(cb.words, cb.starts, proc.label)
    done = drv.named("cuEventRecord")[-1][1][0]   # recorded after the submission's last packet
    drv.ready[done] = False
    assert proc.ring.wptr == len(cb.words) and proc.ring.rptr == 0
    drv.ready[done] = True
    retired = host_runtime().progress()[1]
    assert proc.ring.rptr == len(cb.words)
    assert host_runtime().progress()[1] == retired + 2    # the submission and its kernel: progress for host waits
    proc.drain_events()
    assert [(e.device, e.queue, e.name, e.end_ns - e.start_ns) for e in records] == [("CUDA:7", "compute", "k", 0)]
    cb.words[2], cb.words[-1] = 1, 2
    proc.ring.write(cb.words, cb.starts, proc.label)
    done = drv.named("cuEventRecord")[-1][1][0]
    drv.ready[done] = CudaError("cuEventQuery", 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access")
    with pytest.raises(CudaBackendError, match=r"CUDA:7/compute failed while running a submission \(k\).*"
                                               r"CUDA_ERROR_ILLEGAL_ADDRESS"):
        proc.ring.rptr   # noqa: B018 -- the poll is what raises
    assert proc.ring.rptr == 2 * len(cb.words)   # consumed: a host wait then says it will never be written
    assert CUDA_ERROR_NOT_READY == 600


def test_a_running_gpu_kernel_is_progress_for_host_waits_and_a_held_stream_is_not() -> None:
    """While the oldest submission's kernel runs (its start event passed, its end not) a poll counts progress, so a
    host wait never gives up on one long kernel; a stream held by a WAIT before the kernel counts nothing."""
    from tgfx.devices import cuda
    drv, memory = FakeDriver(), AddressMap()
    timeline = Signal(0)
    dev = SimpleNamespace(name="CUDA:7", ctx=0xC7, drv=drv, make_current=lambda: None, timeline=timeline,
                          pages=HostPages(drv, memory), staging=Staging(drv, memory),
                          _record=lambda ev, prog, who=None: None)
    proc = CUDACommandProcessor(dev, Engine.COMPUTE)   # type: ignore[arg-type]
    proc.start()
    out = Buffer(None, 64, 0x7000_0000, b"x")
    memory.add(out.ptr, 64, dev)
    cb = HWQueue().exec(CUDAProgram("long", 0xF00, block=(64,), device="CUDA:7"), [out]).encode()
    cb.words[1], cb.words[2], cb.words[-2], cb.words[-1] = timeline.addr, 0, timeline.addr, 1
    proc.ring.write(cb.words, cb.starts, proc.label)
    start, end, done = (c[1][0] for c in drv.named("cuEventRecord")[-3:])
    for ev in (end, done):
        drv.ready[ev] = False
    for started, counted in ((False, 0), (True, 1)):
        drv.ready[start] = started
        proc.ring._beat = 0.0
        retired = host_runtime().progress()[1]
        assert proc.ring.rptr == 0
        assert host_runtime().progress()[1] == retired + counted
    retired = host_runtime().progress()[1]
    assert proc.ring.rptr == 0 and host_runtime().progress()[1] == retired    # at most once every HEARTBEAT_S
    from tgfx.devices.hcq import DEFAULT_TIMEOUT_S
    assert cuda.HEARTBEAT_S < DEFAULT_TIMEOUT_S / 4     # seen several times before a wait would give up


# ---- the native host functions streams run ----
def test_native_host_functions_copy_and_timestamp() -> None:
    fns = native_host_fns()
    src, dst = np.arange(100, dtype=np.uint8), np.zeros(100, dtype=np.uint8)
    job = np.array([dst.ctypes.data, src.ctypes.data, 100], dtype=np.int64)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fns.copy)(job.ctypes.data)
    assert (dst == src).all()
    sig = Signal(0)
    before = time.perf_counter_ns()
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fns.timestamp)(sig.addr)
    assert before <= sig.value <= time.perf_counter_ns()    # the CPU devices' clock
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fns.wake)(sig.addr)   # a wake with no sleepers is harmless


# ---- a machine without a driver ----
NO_DRIVER = {**os.environ, "TGFX_CUDA_LIBRARY": "/nonexistent/libcuda.so.1"}


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env={**NO_DRIVER, **env},
                          capture_output=True, text=True, timeout=120)


def test_without_a_driver_cuda_is_absent_and_asking_for_it_says_why() -> None:
    r = _run("""
        import numpy as np, tgfx as tg
        assert tg.devices() == ["CPU:0"] and tg.devices("cuda") == [] and tg.devices("gpu") == []
        x = tg.asarray(np.ones(3, np.float32))
        try:
            tg.device_put(x, "CUDA:0")
        except RuntimeError as e:
            print("ERROR", type(e).__name__, e)
        print((x + 1).numpy().tolist())
    """, TGFX_DEVICE="")
    assert r.returncode == 0, r.stderr
    assert "ERROR CudaDriverNotFound no CUDA driver was found" in r.stdout
    assert "TGFX_DEVICE" in r.stdout and "'CPU'" in r.stdout     # how to pick a device instead
    assert "[2.0, 2.0, 2.0]" in r.stdout                          # the CPU still works


def test_tgfx_device_cuda_without_a_driver_errors_clearly() -> None:
    r = _run("""
        import numpy as np, tgfx as tg
        print((tg.asarray(np.ones(3, np.float32)) + 1).numpy())
    """, TGFX_DEVICE="CUDA")
    assert r.returncode != 0
    assert "CudaDriverNotFound: no CUDA driver was found" in r.stderr and "unset TGFX_DEVICE" in r.stderr
    r = _run("import tgfx", TGFX_DEVICE="TPU")
    assert r.returncode != 0 and "TGFX_DEVICE='TPU' names no device" in r.stderr


# ---- the whole device over an emulating double of the driver: every stream operation runs when it is issued ----
class EmulatedDriver(FakeDriver):
    """A double of the driver API that carries out what a GPU would, on host memory, at the time of the call:
    copies are memmoves, value waits check the word (the tests only issue waits that are satisfied), value writes
    store, host functions run (the real native ones), and a launch runs the Python function registered under the
    kernel's name on the parameter words the driver was given. It checks the device's plumbing end to end (memory,
    signal pages, staging, the timeline's writes and wakes, the kernel ABI), never a compiler."""

    def __init__(self, kernels: dict[str, Any]) -> None:
        super().__init__()
        self.kernels, self._mem, self._functions = kernels, {}, {}
        self._recorded: dict[int, float] = {}   # event -> when it was recorded (every operation runs when issued)
        self.failed = False        # the next launch faults: the stream runs nothing more, its events report it
        self.dead = False

    def _alloc(self, nbytes: int) -> int:
        buf = ctypes.create_string_buffer(nbytes + 256)
        ptr = ctypes.addressof(buf) + (-ctypes.addressof(buf)) % 256
        self._mem[ptr] = buf
        return ptr

    def attributes(self, dev: int) -> dict[str, int]:
        return dict(H200_ATTRIBUTES)

    def cuDeviceGetAttribute(self, attrib: int, dev: int) -> int:
        """An H200's, by `target.CU_DEVICE_ATTRIBUTES` code: what its target description is made from."""
        from tgfx.devices.target import CU_DEVICE_ATTRIBUTES
        h200 = {"MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_GRID_DIM_X": 2**31 - 1,
                "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535, "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
                "WARP_SIZE": 32, "MAX_REGISTERS_PER_BLOCK": 65536, "MULTIPROCESSOR_COUNT": 132,
                "L2_CACHE_SIZE": 62914560, "MAX_THREADS_PER_MULTIPROCESSOR": 2048, "COMPUTE_CAPABILITY_MAJOR": 9,
                "COMPUTE_CAPABILITY_MINOR": 0, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 233472,
                "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536}
        return h200[next(k for k, code in CU_DEVICE_ATTRIBUTES.items() if code == attrib)]

    def cuDeviceGet(self, ordinal: int) -> int:
        return ordinal

    def cuDeviceGetName(self, dev: int) -> str:
        return "emulated GPU"

    def cuDevicePrimaryCtxRetain(self, dev: int) -> int:
        return 0xC0 + dev

    def cuMemAlloc(self, nbytes: int) -> int:
        self.calls.append(("cuMemAlloc", (nbytes,)))
        return self._alloc(nbytes)

    def cuMemHostAlloc(self, nbytes: int, flags: int) -> int:
        self.calls.append(("cuMemHostAlloc", (nbytes, flags)))
        return self._alloc(nbytes)

    def cuMemFree(self, ptr: int) -> None:
        self._mem.pop(ptr)

    def cuMemHostGetDevicePointer(self, ptr: int) -> int:
        return ptr       # unified addressing: the host's address

    def _copy(self, name: str, dst: int, src: int, nbytes: int) -> None:
        self.calls.append((name, (dst, src, nbytes)))
        ctypes.memmove(dst, src, nbytes)

    def cuMemcpyHtoDAsync(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy("cuMemcpyHtoDAsync", dst, src, nbytes)

    def cuMemcpyDtoHAsync(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy("cuMemcpyDtoHAsync", dst, src, nbytes)

    def cuMemcpyDtoDAsync(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy("cuMemcpyDtoDAsync", dst, src, nbytes)

    def cuMemcpyHtoD(self, dst: int, src: int, nbytes: int) -> None:
        self._copy("cuMemcpyHtoD", dst, src, nbytes)

    def cuMemcpyDtoH(self, dst: int, src: int, nbytes: int) -> None:
        self._copy("cuMemcpyDtoH", dst, src, nbytes)

    def cuStreamWaitValue64(self, stream: int, addr: int, value: int, flags: int = 0) -> None:
        self.calls.append(("cuStreamWaitValue64", (stream, addr, value)))
        word = ctypes.c_int64.from_address(addr)
        deadline = time.monotonic() + 10
        while word.value < value:    # another engine's thread may still be writing it
            assert time.monotonic() < deadline, f"an emulated stream WAIT for {value} at {addr:#x} never passed"
            time.sleep(1e-4)

    def cuStreamWriteValue64(self, stream: int, addr: int, value: int, flags: int = 0) -> None:
        self.calls.append(("cuStreamWriteValue64", (stream, addr, value)))
        if self.dead:
            return
        ctypes.c_int64.from_address(addr).value = value

    def cuLaunchHostFunc(self, stream: int, fn: int, data: int) -> None:
        self.calls.append(("cuLaunchHostFunc", (stream, fn, data)))
        if self.dead:
            return
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fn)(data)

    def cuModuleLoadData(self, image: bytes) -> int:
        return len(self._functions) + 1

    def cuModuleGetFunction(self, module: int, name: str) -> int:
        handle = 0xF000 + len(self._functions)
        self._functions[handle] = name
        return handle

    def cuLaunchKernel(self, fn: int, grid: Any, block: Any, smem: int, stream: int, params: int,
                       nbytes: int) -> None:
        self.calls.append(("cuLaunchKernel", (fn, grid, block, smem, stream, params, nbytes)))
        if self.failed:
            self.dead = True
        if self.dead:
            return
        words = np.frombuffer(ctypes.string_at(params, nbytes), np.int64).tolist()
        self.kernels[self._functions[fn]](grid[0] * block[0], *words)

    def cuEventQuery(self, event: int) -> bool:
        if self.dead:
            raise CudaError("cuEventQuery", 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access")
        return True

    def cuEventRecord(self, event: int, stream: int) -> None:
        self.calls.append(("cuEventRecord", (event, stream)))
        self._recorded[event] = time.perf_counter()

    def cuEventElapsedTime(self, start: int, end: int) -> float:
        return (self._recorded[end] - self._recorded[start]) * 1e3


def _f32(ptr: int, n: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(ptr))


def add_one(threads: int, out: int, inp: int, n: int) -> None:
    """What ADD_ONE_PTX below computes, for the emulated driver."""
    assert threads >= n
    _f32(out, n)[:] = _f32(inp, n) + 1


def gpu_options_on_cpu(ast: Any, target: Any, opts: Any = None) -> tuple[Any, list, str]:
    """What the emulated driver runs for kernel AST `ast`: its kernel with the GPU options for `target` (`opts`, or
    the heuristics'), thread ids turned back into loops (`optimize_gpu.thread_loops`), compiled for the CPU and run
    on the launch's parameter words; the options applied; and its name: the GPU kernel's (`render_nvptx.kernel_ir`'s),
    with the trip count the CPU kernel passes (two kernels that differ only in their length share one CPU kernel:
    `runtime_trips`)."""
    from tgfx import config
    from tgfx.lowering import index_level, kernel_name, lower_kernel
    from tgfx.lowering.gpu_cost import launch_cost
    from tgfx.lowering.optimize_gpu import optimize_gpu, thread_loops
    sink, applied = optimize_gpu(index_level(ast, pieces=False), target, opts)
    if config.DEBUG >= 3:   # the launch model `kernel_ir` prints on a GPU
        print(f"{launch_cost(sink, target, kernel_name(ast))}\n  options {applied}")
    ck = lower_kernel(thread_loops(sink))

    vals = (ctypes.c_int64 * max(len(ck.vals), 1))(*ck.vals)   # the CPU kernel's own (a trip count: runtime_trips)

    def run(threads: int, *words: int) -> None:
        bufs = (ctypes.c_void_p * len(words))(*words)
        for core in range(ck.global_size):
            ck.program.call(ctypes.addressof(bufs), ctypes.addressof(vals), core)
    return run, applied, kernel_name(ast) + "".join(f"_n{v}" for v in ck.vals)


@pytest.fixture
def emulated(monkeypatch: pytest.MonkeyPatch) -> Any:
    import tgfx.devices as devices
    from tgfx.devices import cuda
    from tgfx.lowering import render_nvptx
    drv = EmulatedDriver({"add_one": add_one})
    plugin = sys.modules.get("tests.emulated_cuda")   # (-p tests.emulated_cuda: this driver's kernels are PTX)
    for name in ("gpu_kernel", "preload") if plugin else ():
        monkeypatch.setattr(render_nvptx, name, plugin.REAL[name])
    monkeypatch.setattr(cuda, "load_driver", lambda: drv)
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda, "available_count", lambda: 1)
    dev = cuda.CUDADevice("CUDA:0")
    monkeypatch.setitem(devices._devices, "CUDA:0", dev)
    yield drv, dev
    dev.close()


def test_emulated_device_copies_launches_and_signals(emulated: Any) -> None:
    drv, dev = emulated
    k = dev.load_kernel("(emulated)", "add_one", ((4,), (256,)))
    assert k.global_size == 1024 and k.program.block == (256, 1, 1)
    n = 1000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    inp, out = dev.allocator.alloc(4 * n), dev.allocator.alloc(4 * n)
    dev.allocator.copyin(inp, x)                  # pageable -> staging (native memcpy) -> device
    dev.exec_sync(k.program, [out, inp], vals=(n,), global_size=k.global_size)
    y = np.zeros(n, np.float32)
    dev.allocator.copyout(y, out)                 # the host waits for the device, then a synchronous copy
    np.testing.assert_array_equal(y, x + 1)
    assert [c[0] for c in drv.calls].count("cuLaunchKernel") == 1
    assert [c[1][:2] for c in drv.named("cuMemcpyDtoH")] == [(y.ctypes.data, out.ptr)]
    # the timeline advanced once per submission (the copy in, the kernel), written from the streams
    assert dev.timeline.value == dev.timeline_value == 2
    assert any(e.name == "add_one" for e in dev.profile_events)
    # a CPU queue waits for a CUDA signal and the other way round, on the same host words
    from tgfx.devices import get_device
    cpu, flag = get_device("CPU:0"), dev.new_signal(0, name="flag")
    HWQueue().signal(flag, 4).submit(dev)
    HWQueue().wait(flag, 4).submit(cpu).wait(timeout=10)
    gate = cpu.new_signal(0)
    HWQueue().signal(gate, 1).submit(cpu).wait(timeout=10)
    HWQueue().wait(gate, 1).submit(dev).wait(timeout=10)


def test_emulated_device_put_round_trips_and_pushes_copies_to_the_host(emulated: Any) -> None:
    import tgfx as tg
    drv, dev = emulated
    assert tg.devices("cuda") == ["CUDA:0"]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tg.device_put(x, "CUDA:0")
    assert t.device == "CUDA:0"
    np.testing.assert_array_equal(t.numpy(), x)
    drv.calls.clear()
    back = tg.device_put(t, "CPU:1")
    np.testing.assert_array_equal(back.numpy(), x)
    # CUDA -> CPU ran on the GPU's copy engine (a CPU engine cannot read device memory): into staging, then a memcpy
    assert [c[0] for c in drv.named("cuMemcpyDtoHAsync", "cuMemcpyHtoDAsync")] == ["cuMemcpyDtoHAsync"]


def test_emulated_device_failure_is_raised_by_the_next_wait_naming_the_kernel(emulated: Any) -> None:
    drv, dev = emulated
    k = dev.load_kernel("(emulated)", "add_one", ((1,), (32,)))
    buf = dev.allocator.alloc(128)
    drv.failed = True
    fence = HWQueue().exec(k.program, [buf, buf], vals=(32,), global_size=32).submit(dev)
    with pytest.raises(CudaBackendError, match=r"CUDA:0/compute failed while running a submission \(add_one\).*"
                                               r"CUDA_ERROR_ILLEGAL_ADDRESS"):
        fence.wait(timeout=10)



def test_emulated_control_flow_fault_is_raised_by_the_next_wait(emulated: Any) -> None:
    """An indexed COPY out of range (the CPU processor's fault) found by the control thread: the fence's wait raises it,
    naming the engine and the index."""
    drv, dev = emulated
    i, xs, x = dev.allocator.alloc(8), dev.allocator.alloc(64), dev.allocator.alloc(8)
    q = HWQueue()
    with q.block():
        q.write(i, 9).copy(x, xs, 8, index=i, src_stride=8, count=8)
    with pytest.raises(CudaBackendError, match=r"CUDA:0/compute could not run a submission with device-side control "
                                               r"flow: .* holds 9, outside 0..7"):
        q.submit(dev).wait(timeout=10)

@pytest.fixture
def emulated_programs(emulated: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The emulated device, whose kernels are the CPU's code for the same kernel ASTs with the GPU's options applied
    for the device's target, their thread ids turned back into loops (`optimize_gpu.thread_loops`; the emulated
    launch runs it on the parameter words): what programs, jit replays, constants and copies do on a CUDA device,
    and what the GPU options rewrote in their kernels, is then checked end to end against numpy. The PTX itself is
    not run here (tests/test_nvptx.py assembles it; `-m gpu` runs it)."""
    drv, dev = emulated
    drv.gpu_options = []   # the GPU options the kernels took

    def cpu_stand_in(device: Any, ast: Any) -> Any:
        run, opts, name = gpu_options_on_cpu(ast, device.target)
        drv.gpu_options.extend(opts)
        drv.kernels[name] = run
        return device.load_kernel("(emulated)", name, ((1,), (1,)))
    import tgfx.lowering.render_nvptx as render_nvptx
    monkeypatch.setattr(render_nvptx, "gpu_kernel", cpu_stand_in)
    monkeypatch.setattr(render_nvptx, "preload", lambda kernels: None)   # the stand-ins, not PTX, run here
    return drv, dev


def test_preload_renders_here_and_compiles_and_loads_on_pool_threads(emulated: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A program's GPU kernels are compiled and loaded before it is encoded: NVPTX IR rendered on the calling thread,
    PTX compiled (LLVM) and loaded by the driver on pool threads; each once, and then found by `gpu_kernel`."""
    import threading

    import tgfx as tg
    import tgfx.lowering as lowering
    import tgfx.numpy as tnp
    from tgfx.devices.target import GPU_DEFAULT
    from tgfx.lowering import render_nvptx
    drv, dev = emulated
    dev.__dict__["target"] = GPU_DEFAULT   # an H200's (the emulated driver reads no attribute by code)
    asts: list[Any] = []
    real = lowering.lower_kernel

    def capture(ast: Any, *a: Any, **k: Any) -> Any:
        asts.append(ast)
        return real(ast, *a, **k)
    monkeypatch.setattr(lowering, "lower_kernel", capture)
    lowering.forget_compiled()
    x = tg.asarray(np.ones((8, 33), np.float32), device="CPU")   # the CPU's lowering gives the kernel ASTs
    tg.realize(tnp.exp(x) / tnp.exp(x).sum(axis=1, keepdims=True), x.T @ x, x * 3)
    assert len(set(asts)) >= 3
    loads: list[str] = []
    load = drv.cuModuleLoadData
    monkeypatch.setattr(drv, "cuModuleLoadData", lambda image: (loads.append(threading.current_thread().name),
                                                               load(image))[1])
    tg.counters.reset()
    render_nvptx.preload([(dev, a) for a in asts])
    assert len(loads) == len(set(asts)) and all(name.startswith("tgfx-ptx") for name in loads)
    assert tg.counters.compile_count == len(set(asts))
    assert all(render_nvptx.gpu_kernel(dev, a) is render_nvptx._loaded[(dev.name, a.key, "hand")] for a in asts)
    render_nvptx.preload([(dev, a) for a in asts])   # loaded already: nothing again
    assert len(loads) == len(set(asts))
    # a thread inside `Context(NOOPT=1)` gets its kernels without the GPU options, not those loaded with them (nor
    # does a thread outside get its kernels)
    hand = render_nvptx.gpu_kernel(dev, asts[0])
    with config.Context(NOOPT=1):
        plain = render_nvptx.gpu_kernel(dev, asts[0])
        assert plain is not hand and render_nvptx.gpu_kernel(dev, asts[0]) is plain
    assert render_nvptx.gpu_kernel(dev, asts[0]) is hand and len(loads) == len(set(asts)) + 1


def test_emulated_programs_run_jit_grad_and_copies_on_a_cuda_device(emulated_programs: Any) -> None:
    import tgfx as tg
    import tgfx.numpy as tnp
    drv, dev = emulated_programs
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32)
    ta, tb = tg.device_put(a, "CUDA:0"), tg.device_put(b, "CUDA:0")
    np.testing.assert_allclose((ta * 2 + 1).numpy(), a * 2 + 1, rtol=1e-6)      # eager, with constants
    f = tg.jit(lambda x, y: tnp.tanh(x) @ y + 1)
    for i in range(3):   # the first call encodes, the others replay with their inputs patched in
        out = f(ta + i, tb)
        assert out.device == "CUDA:0"
        np.testing.assert_allclose(out.numpy(), np.tanh(a + i) @ b + 1, rtol=1e-5, atol=1e-5)
    g = tg.grad(lambda x: (x * x).sum())(ta)
    np.testing.assert_allclose(g.numpy(), 2 * a, rtol=1e-6)
    h = tg.jit(lambda x, c: (x.to("CPU:0") * 3, c.to("CUDA:0") - 1))        # copies both ways inside a program
    on_cpu, on_gpu = h(ta, tg.asarray(b))
    assert (on_cpu.device, on_gpu.device) == ("CPU:0", "CUDA:0")
    np.testing.assert_allclose(on_cpu.numpy(), a * 3, rtol=1e-6)
    np.testing.assert_allclose(on_gpu.numpy(), b - 1, rtol=1e-6)
    assert len(drv.named("cuLaunchKernel")) > 5
    m, k = rng.standard_normal((7, 600)).astype(np.float32), rng.standard_normal((256, 64)).astype(np.float32)
    kw = rng.standard_normal((64, 1024)).astype(np.float32)
    tm, tk, tkw = tg.device_put(m, "CUDA:0"), tg.device_put(k, "CUDA:0"), tg.device_put(kw, "CUDA:0")
    e = np.exp(m - m.max(axis=1, keepdims=True))
    np.testing.assert_allclose(tg.nn.softmax(tm, axis=-1).numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5,
                               atol=1e-7)   # a block a row: its max and sum split over the block's threads
    np.testing.assert_allclose((tk @ tkw).numpy(), k @ kw, rtol=1e-4, atol=1e-4)   # a register tile a thread
    assert {o.op for o in drv.gpu_options} >= {"GLOBAL", "LOCAL", "GROUP", "UPCAST"}



def lax_loops_and_branches_on_cuda0() -> None:
    """`tg.lax` loops and branches on CUDA:0 against numpy: scan (jitted), fori_loop, while_loop, cond, and the
    gradient of a scan (its backward a reversed loop)."""
    import tgfx as tg
    import tgfx.numpy as tnp
    from tests.helpers import numeric_grad
    rng = np.random.default_rng(5)
    w, xs = rng.standard_normal((4, 4)).astype(np.float32) / 2, rng.standard_normal((6, 4)).astype(np.float32)
    tw, txs, zeros = (tg.device_put(a, "CUDA:0") for a in (w, xs, np.zeros(4, np.float32)))

    def cell(h: Any, x: Any) -> Any:
        h = tnp.tanh(h @ tw + x)
        return h, h.sum()
    h, ys = tg.jit(lambda xs: tg.lax.scan(cell, zeros, xs))(txs)
    ref_h, ref_ys = np.zeros(4, np.float32), []
    for x in xs:
        ref_h = np.tanh(ref_h @ w + x)
        ref_ys.append(ref_h.sum())
    assert h.device == "CUDA:0"
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ys.numpy(), ref_ys, rtol=1e-5, atol=1e-5)
    out, ref = tg.lax.fori_loop(0, 5, lambda i, c: c * 0.5 + tnp.sin(c) @ tw, txs[0]), xs[0]
    for _ in range(5):
        ref = ref * 0.5 + np.sin(ref) @ w
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)
    n = tg.lax.while_loop(lambda c: c[1] < 100.0, lambda c: (c[0] + 1, c[1] * 3.0),
                          (tg.device_put(np.int32(0), "CUDA:0"), tg.device_put(np.float32(1.5), "CUDA:0")))
    assert int(n[0].numpy()) == 4 and float(n[1].numpy()) == 1.5 * 81
    for p, fn in ((-1.0, np.cos), (2.0, np.sin)):
        r = tg.lax.cond(tg.device_put(np.float32(p), "CUDA:0") > 0, tnp.sin, tnp.cos, txs)
        np.testing.assert_allclose(r.numpy(), fn(xs), rtol=1e-6, atol=1e-6)
    g = tg.grad(lambda w: tg.lax.scan(lambda h, x: (tnp.tanh(h @ w + x), None), zeros, txs)[0].sum())(tw)

    def loss(w: np.ndarray) -> float:
        h = np.zeros(4)
        for x in xs:
            h = np.tanh(h @ w + x)
        return float(h.sum())
    np.testing.assert_allclose(g.numpy(), numeric_grad(loss, w.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_emulated_while_loop_after_a_counted_loop_reads_its_own_predicate(emulated_programs: Any) -> None:
    """One jitted program: a fori_loop whose trip count is read on the device, then a while loop. The host drives
    both and keeps the counter values it wrote; the while loop's predicate once took the counter's memory (freed
    after the first loop) and was read as the stale count: the loop left after one step, whatever n."""
    import tgfx as tg
    import tgfx.numpy as tnp
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((3, 3)) * 0.5).astype(np.float32)
    x0 = rng.standard_normal((2, 3)).astype(np.float32)
    tw, tx = tg.device_put(w, "CUDA:0"), tg.device_put(x0, "CUDA:0")
    for n in (2, 3):
        def f(x: Any, hi: Any, n: int = n) -> Any:
            dyn = tg.lax.fori_loop(0, hi, lambda i, c: tnp.tanh(c @ tw) + i.astype(tg.dtypes.float32), x)
            cnt = tg.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, tnp.tanh(c[1] @ tw) + c[1]),
                                    (tg.device_put(np.int32(0), "CUDA:0"), x))
            return dyn, cnt
        dyn, (k, y) = tg.jit(f)(tx, tg.device_put(np.int32(n), "CUDA:0"))
        want_dyn, want_y = x0, x0
        for step in range(n):
            want_dyn, want_y = np.tanh(want_dyn @ w) + step, np.tanh(want_y @ w) + want_y
        assert int(k.numpy()) == n
        np.testing.assert_allclose(dyn.numpy(), want_dyn, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-5, atol=1e-5)


def test_emulated_lax_loops_and_branches_run_on_a_cuda_device(emulated_programs: Any) -> None:
    """The host drives the loops' counters and predicates on the engine's control thread; a counted loop issues
    its steps with no read of the device."""
    import threading

    import tgfx as tg
    drv, dev = emulated_programs
    threads: set[str] = set()
    launch = drv.cuLaunchKernel

    def on_thread(*args: Any) -> None:
        threads.add(threading.current_thread().name)
        launch(*args)
    drv.cuLaunchKernel = on_thread
    lax_loops_and_branches_on_cuda0()
    assert "tgfx-CUDA:0/compute-control" in threads
    x = tg.device_put(np.ones(3, np.float32), "CUDA:0")
    reads, launches = len(drv.named("cuMemcpyDtoH")), len(drv.named("cuLaunchKernel"))
    out = tg.lax.fori_loop(0, 7, lambda i, c: c.sum() * 0.25 + c * i, x)
    ref = np.ones(3, np.float32)
    for i in range(7):
        ref = ref.sum() * 0.25 + ref * i
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
    assert len(drv.named("cuMemcpyDtoH")) == reads + 1     # the result's copy out: the loop read nothing
    assert len(drv.named("cuLaunchKernel")) >= launches + 7


def test_a_profile_read_after_synchronize_has_a_host_driven_loops_kernels(emulated_programs: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU runs a host-driven submission's timeline SIGNAL before the control thread records the completion
    event after it: `synchronize` returned, and the profile read then lacked the loop's kernels until the control
    thread caught up (test_linalg_decomp's eigh over the emulated plugin saw no kernels, at random). A profile read
    once the timeline passed everything waits for the control thread to finish issuing; here it is made slow."""
    import threading
    import time

    import tgfx as tg
    import tgfx.numpy as tnp
    from tgfx.devices.cuda import CUDARing
    drv, dev = emulated_programs
    issue = CUDARing._issue

    def slow(ring: CUDARing, *args: Any) -> Any:
        out = issue(ring, *args)
        if threading.current_thread().name.endswith("-control"):
            slowed.append(1)
            time.sleep(0.1)   # after the submission's packets, before its completion event counts as issued
        return out
    slowed: list[int] = []
    monkeypatch.setattr(CUDARing, "_issue", slow)
    qr = tg.jit(tnp.linalg.qr)   # (a loop over the columns, driven by the control thread)
    a = np.random.default_rng(0).standard_normal((12, 12)).astype(np.float32)
    x = tg.device_put(a, "CUDA:0")
    for _ in range(3):
        dev.synchronize()
        dev.clear_profile()
        q, r = qr(x)
        np.testing.assert_allclose(q.numpy() @ r.numpy(), a, atol=1e-4)
        dev.synchronize()
        assert sum(e.name != "copy" for e in dev.profile_events) >= 12, list(dev.profile_events)
    assert slowed


def test_emulated_host_callbacks_run_on_a_cuda_device(emulated_programs: Any, capsys: pytest.CaptureFixture) -> None:
    """debug.print, pure_callback and a failing debug.callback on CUDA:0, eagerly, under jit and in a scan body: the
    control thread reads the arguments back from the device and writes the results to it, in stream order."""
    import tgfx as tg
    import tgfx.numpy as tnp
    from tgfx.devices.hcq import HCQExecError
    drv, dev = emulated_programs
    x = tg.device_put(np.arange(3, dtype=np.float32), "CUDA:0")
    tg.debug.print("x={x}", x=x * 2)

    @tg.jit
    def f(x: Any) -> Any:
        y = tg.pure_callback(lambda v: np.cumsum(v), tg.ShapeDtypeStruct((3,), tnp.float32), x + 1)
        tg.debug.print("y={}", y)
        return y * 10
    np.testing.assert_allclose(f(x).numpy(), [10, 30, 60])

    def body(c: Any, xi: Any) -> Any:
        tg.debug.print("c={c} xi={xi}", c=c, xi=xi)
        return c + xi, c
    c, _ = tg.lax.scan(body, tg.device_put(np.float32(0), "CUDA:0"), x)
    assert float(c.numpy()) == 3.0
    assert capsys.readouterr().out.splitlines() == [
        "x=[0. 2. 4.]", "y=[1. 3. 6.]", "c=0.0 xi=0.0", "c=0.0 xi=1.0", "c=1.0 xi=2.0"]

    def boom(v: Any) -> None:
        raise ZeroDivisionError("division by zero")
    g = tg.jit(lambda x: (tg.debug.callback(boom, x), x + 1)[1])
    with pytest.raises(HCQExecError, match=r"CUDA:0/compute: EXEC of 'callback debug.callback\(.*boom\)' failed: "
                                           r"ZeroDivisionError") as info:
        g(x).numpy()
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    np.testing.assert_allclose(tg.jit(lambda x: x * 2)(x).numpy(), [0, 2, 4])     # the device runs on


def test_emulated_two_logical_devices_on_one_gpu_train_data_parallel(emulated_programs: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """TGFX_CUDA_DEVICES=2 on a machine with one GPU: CUDA:0 and CUDA:1 are two devices (their own streams, memory and
    timelines) in the GPU's one context; a data-parallel gradient over them is numpy's, and the copies between them
    are device-to-device copies within the context, no peer copies."""
    import tgfx as tg
    import tgfx.numpy as tnp
    from tgfx.devices import cuda
    drv, dev0 = emulated_programs
    monkeypatch.setattr(cuda.CUDA_DEVICES, "value", 2)
    monkeypatch.setattr(cuda, "_count", lambda: 1)                  # the driver reports one GPU
    monkeypatch.setattr(cuda, "device_count", REAL_DEVICE_COUNT)
    monkeypatch.setattr(cuda, "available_count", REAL_AVAILABLE_COUNT)
    devices = sys.modules["tgfx.devices"]
    dev1 = cuda.CUDADevice("CUDA:1")
    monkeypatch.setitem(devices._devices, "CUDA:1", dev1)
    assert tg.devices("cuda") == ["CUDA:0", "CUDA:1"]
    assert (dev1.gpu_ordinal, dev1.ctx) == (0, dev0.ctx) and dev1.timeline is not dev0.timeline
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    pair = ("CUDA:0", "CUDA:1")
    tx, tw = tg.shard(x, pair, axis=0), tg.shard(w, pair)
    drv.calls.clear()
    g = tg.jit(tg.grad(lambda w, x: tnp.tanh(x @ w).sum()))(tw, tx)
    np.testing.assert_allclose(np.asarray(g.numpy()), x.T @ (1 - np.tanh(x @ w) ** 2), rtol=1e-5, atol=1e-5)
    assert drv.named("cuMemcpyPeerAsync") == []
    def kinds(dev: Any) -> set[str]:   # the kernels a device ran, by name less its AST's hash (its device's part)
        return {e.name.split("_n")[0].rsplit("_", 1)[0] for e in dev.profile_events if e.name != "copy"}
    assert kinds(dev0) & kinds(dev1)   # both ran the step's kernels
    moved = tg.device_put(tg.device_put(x, "CUDA:0"), "CUDA:1")
    assert moved.device == "CUDA:1"
    np.testing.assert_array_equal(moved.numpy(), x)
    assert drv.named("cuMemcpyDtoDAsync") and drv.named("cuMemcpyPeerAsync") == []
    dev1.close()


# ---- on a GPU ----
# the kernel ABI: one 8-byte parameter per packet word (buffers, then values); global thread id along x
ADD_ONE_PTX = """
.version 8.0
.target sm_{sm}
.address_size 64
.visible .entry add_one(.param .u64 out, .param .u64 inp, .param .u64 n)
{{
  .reg .pred %p; .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .f32 %f<3>;
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x;
  mad.lo.s32 %r1, %r1, %r2, %r3; cvt.s64.s32 %rd1, %r1;
  ld.param.u64 %rd2, [n]; setp.ge.s64 %p, %rd1, %rd2; @%p bra DONE;
  ld.param.u64 %rd3, [out]; ld.param.u64 %rd4, [inp];
  shl.b64 %rd5, %rd1, 2; add.s64 %rd6, %rd4, %rd5; add.s64 %rd7, %rd3, %rd5;
  ld.global.f32 %f1, [%rd6]; add.f32 %f2, %f1, 0f3F800000; st.global.f32 [%rd7], %f2;
DONE:
  ret;
}}
"""


def _cuda0() -> Any:
    from tgfx.devices import get_device
    return get_device("CUDA:0")


@pytest.mark.gpu
def test_gpu_kernel_copies_and_signals_on_the_driver() -> None:
    dev = _cuda0()
    sm = dev.attrs["cc_major"] * 10 + dev.attrs["cc_minor"]
    k = dev.load_kernel(ADD_ONE_PTX.format(sm=sm), "add_one", ((4,), (256,)))
    n = 1000
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    inp, out = dev.allocator.alloc(4 * n), dev.allocator.alloc(4 * n)
    dev.allocator.copyin(inp, x)
    dev.exec_sync(k.program, [out, inp], vals=(n,), global_size=k.global_size)
    y = np.empty(n, np.float32)
    dev.allocator.copyout(y, out)
    np.testing.assert_array_equal(y, x + 1)
    # a CPU signal a CUDA stream waits for, and a CUDA signal the host waits for
    gate, flag = Signal(0, name="gate"), dev.new_signal(0, name="flag")
    fence = HWQueue().wait(gate, 1).exec(k.program, [inp, out], vals=(n,), global_size=k.global_size) \
        .signal(flag, 5).submit(dev)
    time.sleep(0.05)
    assert flag.value == 0 and not fence.done         # the stream is held by the WAIT
    gate.value = 1
    flag.wait(5, timeout=10)
    fence.wait(timeout=10)
    dev.allocator.copyout(y, inp)
    np.testing.assert_array_equal(y, (x + 1) + 1)    # two float32 additions, rounded each
    assert any(e.name == "add_one" and e.end_ns >= e.start_ns for e in dev.profile_events)


@pytest.mark.gpu
def test_gpu_lax_loops_and_branches() -> None:
    _cuda0()
    lax_loops_and_branches_on_cuda0()


@pytest.mark.gpu
def test_gpu_beam_search_times_candidates_on_the_gpu(tmp_path: Any) -> None:
    """BEAM=1 on the GPU: a softmax's row kernel takes the options a search timed by CUDA events finds, and is right."""
    import tgfx as tg
    _cuda0()
    m = np.random.default_rng(6).standard_normal((64, 1000)).astype(np.float32)
    with tg.Context(BEAM=1, BEAM_BUDGET=10, TGFX_CACHE_DIR=str(tmp_path)):
        before = tg.counters.search_compile_count
        out = tg.nn.softmax(tg.device_put(m, "CUDA:0"), axis=-1).numpy()
        assert tg.counters.search_compile_count > before
    e = np.exp(m - m.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


@pytest.mark.gpu
def test_gpu_device_put_and_copies_between_devices() -> None:
    import tgfx as tg
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    on_gpu = tg.device_put(x, "CUDA:0")
    assert on_gpu.device == "CUDA:0"
    np.testing.assert_array_equal(on_gpu.numpy(), x)
    back = tg.device_put(on_gpu, "CPU:1")
    np.testing.assert_array_equal(back.numpy(), x)
    if len(tg.devices("cuda")) > 1:
        np.testing.assert_array_equal(tg.device_put(on_gpu, "CUDA:1").numpy(), x)


@pytest.mark.gpu
def test_gpu_module_load_failure_shows_the_jit_log() -> None:
    dev = _cuda0()
    want = r"cuModuleLoadDataEx failed .*loading kernel 'broken' on CUDA:0.*JIT log: .*'bogus'"
    with pytest.raises(CudaError, match=want):
        dev.load_kernel(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry broken() { bogus; }",
                        "broken", (1, 1))


@pytest.mark.gpu
def test_gpu_compiled_programs_run() -> None:
    pytest.importorskip("tgfx.lowering.render_nvptx", reason="the NVPTX code generator is not in this build")
    import tgfx as tg
    import tgfx.numpy as tnp
    x = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    t = tg.device_put(x, "CUDA:0")
    np.testing.assert_allclose((t * 2 + 1).numpy(), x * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(tnp.sum(t, axis=1).numpy(), x.sum(axis=1), rtol=1e-5, atol=1e-5)
    f = tg.jit(lambda a: tnp.tanh(a) @ a.T)
    np.testing.assert_allclose(f(t).numpy(), np.tanh(x) @ x.T, rtol=1e-4, atol=1e-4)



@pytest.mark.gpu
def test_gpu_two_logical_devices_train_data_parallel() -> None:
    """TGFX_CUDA_DEVICES=2 on the GPU machine (one GPU): a data-parallel gradient over CUDA:0 and CUDA:1, in a fresh
    process (the flag is read when the devices are made)."""
    _cuda0()
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import numpy as np, tgfx as tg, tgfx.numpy as tnp
        assert tg.devices("cuda")[:2] == ["CUDA:0", "CUDA:1"], tg.devices("cuda")
        rng = np.random.default_rng(7)
        x, w = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 8)).astype(np.float32)
        pair = ("CUDA:0", "CUDA:1")
        g = tg.jit(tg.grad(lambda w, x: tnp.tanh(x @ w).sum()))(tg.shard(w, pair), tg.shard(x, pair, axis=0))
        np.testing.assert_allclose(g.numpy(), x.T @ (1 - np.tanh(x @ w) ** 2), rtol=1e-4, atol=1e-4)
        print("ok")
        """)], env={**os.environ, "TGFX_CUDA_DEVICES": "2"}, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


# ---- programs: a copy into host memory from memory the host's engines cannot read ----
def test_a_copy_into_host_memory_is_pushed_by_a_source_whose_memory_the_host_cannot_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU's memory is not host memory: a copy from it to a CPU device runs on the GPU's copy engine, and the CPU
    device's later work waits for it. Checked on two CPU devices, one of them marked as not host memory, so the
    order of the segments is exercised (and its results checked) without a GPU."""
    import tgfx as tg
    from tgfx.devices import get_device
    from tgfx.lowering import program
    monkeypatch.setattr(get_device("CPU:1"), "host_memory", False)
    copies: list[str] = []
    segment = program.Program._segment

    def record(self: Any, dev: Any, queue: HWQueue, used: list, index: dict, *dep: Any) -> Any:
        if queue.engine is Engine.COPY:
            copies.append(dev.name)
        return segment(self, dev, queue, used, index, *dep)
    monkeypatch.setattr(program.Program, "_segment", record)
    x = np.arange(8, dtype=np.float32)
    f = tg.jit(lambda a: (a * 2).to("CPU:0") + 1)
    for i in range(3):      # replays: the fences between the devices order each call after the one before
        a = tg.device_put(x + i, "CPU:1")
        np.testing.assert_array_equal(f(a).numpy(), (x + i) * 2 + 1)
    assert copies == ["CPU:1"]   # one program, its copy on the source's engine
    copies.clear()
    g = tg.jit(lambda a: (a + 1).to("CPU:1") * 3)    # into CPU:1 (not host memory): the destination's engine
    np.testing.assert_array_equal(g(tg.device_put(x, "CPU:0")).numpy(), (x + 1) * 3)
    assert copies == ["CPU:1"]


def test_a_cpu_kernels_beam_search_times_it_on_the_cpu_when_cuda_is_the_default_device(
        emulated: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """With CUDA:0 the default device (TGFX_DEVICE=CUDA) and BEAM=n, a kernel of Tensors on the CPU is searched with
    its candidates timed on CPU:0: they were timed on the default device, whose stream refused them (an EXEC of a
    CPU program on CUDA:0, a CudaBackendError)."""
    import tgfx as tg
    import tgfx.devices as devices
    from tgfx.lowering import forget_compiled
    from tgfx.lowering import search as cpu_search
    monkeypatch.setattr(cpu_search, "get_device", lambda name="CUDA:0": devices.get_device(name))   # the default
    cpu_search.clear_cache()
    forget_compiled()
    x = np.random.default_rng(5).standard_normal((64, 300)).astype(np.float32)
    try:
        with tg.Context(BEAM=1, BEAM_BUDGET=5, TGFX_CACHE_DIR=str(tmp_path)):
            searches = tg.counters.search_count
            out = (tg.asarray(x, device="CPU") * 3.0).sum(axis=1).numpy()
            assert tg.counters.search_count > searches
    finally:
        cpu_search.clear_cache()
        forget_compiled()
    np.testing.assert_allclose(out, x.sum(1) * 3, rtol=1e-4)


def test_beam_searches_a_kernels_gpu_options_on_the_device_and_caches_them_by_its_target(
        emulated: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """With BEAM=n a CUDA kernel's options come from a search timed on the device (its events around each launch):
    each candidate rendered for the GPU, compiled to PTX and loaded by the driver; the result is cached by the kernel
    and the GPU target (its name and compute capability), so a second lookup searches nothing. The emulated driver
    runs each loaded kernel as the CPU's code of the candidate's GPU options, thread ids as loops."""
    import dataclasses

    import tgfx as tg
    from tgfx.lowering import forget_compiled, index_level, render_nvptx
    from tgfx.lowering import search as cpu_search
    from tgfx.lowering.search_gpu import gpu_actions, gpu_beam_search
    drv, dev = emulated
    real_kernel_ir = render_nvptx.kernel_ir
    asts: dict = {}

    def kernel_ir(ast: Any, target: Any, opts: Any = None) -> Any:   # the real rendering, and the kernel's stand-in
        ir, name, dims, applied = real_kernel_ir(ast, target, opts)
        drv.kernels[name] = gpu_options_on_cpu(ast, target, applied)[0]
        asts[ast.key] = ast
        return ir, name, dims, applied
    monkeypatch.setattr(render_nvptx, "kernel_ir", kernel_ir)
    monkeypatch.setattr(render_nvptx, "_loaded", {})
    cpu_search.clear_cache()
    forget_compiled()
    m = np.random.default_rng(4).standard_normal((7, 300)).astype(np.float32)
    e = np.exp(m - m.max(axis=1, keepdims=True))
    with tg.Context(BEAM=1, BEAM_BUDGET=30, TGFX_CACHE_DIR=str(tmp_path)):
        searches, candidates = tg.counters.search_count, tg.counters.search_compile_count
        out = tg.nn.softmax(tg.device_put(m, "CUDA:0"), axis=-1).numpy()
        searches, candidates = tg.counters.search_count - searches, tg.counters.search_compile_count - candidates
        np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
        assert searches >= len(asts) >= 1 and candidates > 2 * len(asts)   # each search timed several candidates
        # another process (nothing in memory) reads the entry: it searches nothing, and finds the same options
        searched = {k: cpu_search.cached_search(k, 1, dev.target) for k in asts}
        assert [k for k, opts in searched.items() if opts] == list(asts)   # each kernel searched has its entry
        cpu_search.clear_cache()
        n = tg.counters.search_count
        assert all(gpu_beam_search(dev, asts[k], 1) == opts for k, opts in searched.items())
        assert tg.counters.search_count == n
        # another GPU (its name or compute capability) has found nothing yet
        other = dataclasses.replace(dev.target, capability=(10, 0))
        assert all(cpu_search.cached_search(k, 1, other) is None for k in asts)
    # what a search tries comes from the target: thread counts of warps, up to the block's most
    sink = index_level(next(iter(asts.values())), pieces=False)
    counts = {o.amount for o in gpu_actions(sink, dev.target) if o.op in ("LOCAL", "GROUP")}
    assert counts and all(n % dev.target.warp_size == 0 and n <= dev.target.max_threads_per_block for n in counts)


def test_the_emulated_cuda_plugin_runs_a_test_file_on_cuda0() -> None:
    """`-p tests.emulated_cuda` (README): test_lax's double-buffered loops, with CUDA:0 the default device over the
    emulating driver and the GPU's options: they pass (a while loop after a fori_loop left after one step there, its
    counter's memory reused), and the plugin says which options the kernels took."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.emulated_cuda", "tests/test_lax.py", "-q", "-n",
                        "0", "-p", "no:cacheprovider", "-k", "double_buffered"], capture_output=True, text=True,
                       timeout=600, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    applied = next(line for line in r.stdout.splitlines() if line.startswith("emulated CUDA:0: GPU options applied"))
    assert "'GLOBAL'" in applied and "'GROUP'" in applied, applied


def test_emulated_bench_steps_on_cuda_compute_numpys_answers() -> None:
    """The bench's GPU rows at their full sizes (the MLP, CNN and digits train steps, a convolution, a matmul, a
    softmax, the VAE and GP steps) with CUDA:0 as the default device over the emulating driver: every kernel takes
    the GPU's options for an H200 (register tiles with unrolled reduces, grouped rows, every output axis on the grid),
    run on the CPU as thread loops, and each row's result is numpy's (the bench's own check)."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import tgfx
        from tests import emulated_cuda
        emulated_cuda.install()
        from bench import workloads as W
        from bench.run import mismatch
        for name in ("mlp", "cnn_step", "mnist_step", "conv2d", "matmul", "softmax", "vae", "gp"):
            wl = W.WORKLOADS_BY_NAME[name]
            d = wl.inputs(W.FULL)
            ref, case = W.IMPLS[(name, "numpy")](W.FULL, d), W.IMPLS[(name, "tgfx")](W.FULL, d)
            ref.call()
            case.call()
            print(name, mismatch(case.read(), ref.read(), wl))
        print("devices", tgfx.devices(), "options", sorted(set(emulated_cuda.APPLIED)))
    """)], env={**os.environ, "TGFX_DEVICE": "CUDA", "PYTHONPATH": REPO}, capture_output=True, text=True,
        timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    for name in ("mlp", "cnn_step", "mnist_step", "conv2d", "matmul", "softmax", "vae", "gp"):
        assert rows[name] == "None", (name, rows[name])   # (what differs, else None)
    assert "'CUDA:0'" in rows["devices"] and "'UNROLL'" in rows["devices"] and "'GROUP'" in rows["devices"], rows
