"""A small transformer trains under `tg.jit(tg.value_and_grad)` with Adam; a jitted program's memory outlives its
replay; a host wait for a timeline value that nothing will write raises at once (issue 21, item 3).

The step that "never finished" (`HCQTimeoutError ... waiting for signal 'CPU:0.timeline' to reach 245; it is at
244 (no submitted queue writes it)`) came from a use-after-free: a replay handed the device only its inputs and
outputs to keep alive, so a jitted function dropped while its replay still ran (`tg.jit(f)(x)` written in a training
loop) freed the arena its kernels were writing. The freed memory was reused by the host (objects, command words), and
what the kernels wrote into it crashed the process or wedged the device. Each test here says what the right answer
is; ordering is made with a gate (a queue WAIT on a host-set signal), never with wall-clock time.
"""
from __future__ import annotations

import gc
import importlib.util
import os
import re
import sys
import types
import weakref
from collections.abc import Iterator

import numpy as np
import pytest

import tgfx as tg
from tgfx.devices import get_device
from tgfx.devices.cpu import CPUDevice
from tgfx.devices.hcq import (
    Engine,
    Fence,
    HCQDevice,
    HCQNoWriterError,
    HCQTimeoutError,
    Signal,
)
from tgfx.devices.packets import Op, header
from tgfx.devices.queue import HWQueue
from tgfx.lowering.execute import memory_of

_PATH = os.path.join(os.path.dirname(__file__), "..", "examples", "train_transformer.py")


def _example() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("train_transformer", _PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["train_transformer"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def gate() -> Iterator[Signal]:
    """A host signal that queues can wait on; set to 1 at the end of the test whatever happens, so no queue of a
    shared device stays blocked behind it."""
    sig = Signal(0, name="gate")
    yield sig
    sig.value = 1


@pytest.fixture
def private() -> Iterator[HCQDevice]:
    """A device of this test's own, for tests that leave its timeline wedged on purpose."""
    dev = CPUDevice("CPU:nowriter")
    yield dev
    dev.close()


# ---- the transformer trains ----
def test_transformer_example_trains(capsys: pytest.CaptureFixture) -> None:
    # two blocks of causal attention + layer norm + GELU MLP, Adam, one jitted step traced once and replayed
    final = _example().main(["--steps", "20", "--log-every", "5"])
    out = capsys.readouterr().out
    first, last = (float(v) for v in re.search(r"loss ([0-9.]+) -> ([0-9.]+)", out).groups())
    assert last == pytest.approx(final, abs=1e-4)      # printed to 4 places
    assert np.isfinite(last) and last < first - 0.7       # from ~ln(vocab) + 0.5 to well below ln(vocab)
    assert "traced 1 time(s)" in out


def test_transformer_step_made_in_the_loop_trains() -> None:
    # the spelling: `tg.jit(tg.value_and_grad(loss))` written inside the loop (a new jitted function every
    # step, dropped while its replay may still run), Adam outside it. This crashed or wedged the device before.
    ex = _example()
    model = ex.Transformer(len(ex.VOCAB), seq=16, dim=32, heads=4, layers=2)   # the example's: kernels compile once
    params = model.init(tg.random.key(0), 8)
    opt = tg.optim.adam(1e-2)
    state = opt.init(params)
    data = ex.encode(ex.TEXT)

    def loss_fn(p: dict, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        return tg.nn.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y).mean()

    rng = np.random.default_rng(0)
    losses = []
    for _ in range(4):                              # every step traces again (a new function): a few are enough
        at = rng.integers(0, len(data) - 17, size=8)
        w = np.stack([data[a:a + 17] for a in at])
        loss, grads = tg.jit(tg.value_and_grad(loss_fn))(params, tg.asarray(w[:, :-1]), tg.asarray(w[:, 1:]))
        updates, state = opt.update(grads, state, params)
        params = tg.optim.apply_updates(params, updates)
        losses.append(loss)
    values = [float(v) for v in losses]
    assert np.all(np.isfinite(values)) and values[-1] < values[0]


# ---- the root cause: a replay keeps its program's memory alive ----
def _program(f: tg.jit) -> object:
    return next(iter(f._cache.values()))[0]


def test_a_dropped_jitted_function_keeps_its_memory_until_its_replay_is_done(gate: Signal) -> None:
    dev = get_device("CPU")
    x = tg.device_put(np.arange(16, dtype=np.float32).reshape(4, 4), dev.name)
    f = tg.jit(lambda a: (a @ a) @ a)              # two kernels: the first product lives in the program's arena
    f(x).block_until_ready()
    prog = _program(f)
    assert prog.intermediates, "the graph must have an intermediate for this test to mean anything"
    arena = weakref.ref(memory_of(prog.intermediates[0])._mem)
    HWQueue().wait(gate, 1).submit(dev)           # the device is busy: the replay goes to the ring, behind the gate
    y = f(x)
    assert dev.timeline._mem[0] < dev.timeline_value
    del f, prog
    gc.collect()
    # the replay has not run yet: its kernels will write the arena, so it must still be there
    assert arena() is not None
    gate.value = 1
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_allclose(y.numpy(), a @ a @ a)
    dev.synchronize()
    HWQueue().submit(dev).wait()                   # a later submission retires it: the memory is let go then
    gc.collect()
    assert arena() is None


def test_a_submitted_command_buffer_keeps_its_memory_without_refs(gate: Signal) -> None:
    # the runtime's own promise, whatever `refs` the caller passes: what the words point at lives until the fence
    dev = get_device("CPU")
    buf = dev.allocator.alloc(2 << 20)             # numpy-backed: its owner can be watched with a weak reference
    src = dev.allocator.alloc(2 << 20)
    owner = weakref.ref(buf._mem)
    HWQueue().wait(gate, 1).submit(dev)
    cb = HWQueue(Engine.COPY).copy(buf, src, 2 << 20).encode()
    fence = dev.submit(cb, refs=None)
    del cb, buf
    gc.collect()
    assert owner() is not None
    gate.value = 1
    fence.wait()


# ---- a host wait for a value that nothing will write raises at once ----
def test_a_wait_past_the_last_submission_raises_at_once() -> None:
    dev = get_device("CPU")
    dev.synchronize()
    beyond = dev.timeline_value + 2
    with pytest.raises(HCQNoWriterError, match=rf"'CPU:0.timeline' to reach {beyond}: only {beyond - 2} "
                                               r"submissions were made to CPU:0"):
        Fence(dev, Engine.COMPUTE, beyond).wait(timeout=30)
    with pytest.raises(HCQNoWriterError, match="no submitted queue writes"):
        dev.timeline.wait(beyond, timeout=30)


def test_a_submission_consumed_without_its_signal_raises_at_once(private: HCQDevice, gate: Signal) -> None:
    # the lost submission of the issue, made on purpose: its final SIGNAL is turned into a NOP in the ring before the
    # processor gets there, so the processor consumes it and nothing ever writes its timeline value
    HWQueue().wait(gate, 1).submit(private)
    fence = HWQueue().submit(private)
    value, _, _, proc, _, end = private._inflight[-1]
    assert value == fence.value
    proc.ring.words[(end - 3) % proc.ring.nwords] = header(Op.NOP, 2)
    gate.value = 1
    with pytest.raises(HCQNoWriterError, match=rf"consumed submission {fence.value} .* never wrote its final SIGNAL"):
        fence.wait(timeout=30)                     # raised within a check interval, not after 30 s


def test_a_submission_in_a_closed_engine_raises_at_once(private: HCQDevice) -> None:
    private.close()
    fence = HWQueue().submit(private)
    with pytest.raises(HCQNoWriterError, match=rf"submission {fence.value} .* CPU:nowriter/compute, which is closed"):
        fence.wait(timeout=30)


def test_a_timeout_names_the_packet_the_engine_is_blocked_on(gate: Signal) -> None:
    # a slow or blocked submission is not a lost one: the timeout says what its engine is running
    dev = get_device("CPU")
    fence = HWQueue().wait(gate, 1).submit(dev)
    with pytest.raises(HCQTimeoutError, match=rf"to reach {fence.value}; it is at {fence.value - 1}: submission "
                                              rf"{fence.value} is in the ring of CPU:0/compute .* WAIT for signal "
                                              r"'gate' to reach 1, now 0"):
        fence.wait(timeout=0.3)
    gate.value = 1
    fence.wait()
