"""Races between threads of one user program, each forced by barriers into the interleaving that broke it, so every
run takes the racy path: the right answer, or a clear error in the thread that caused it, and nothing left for the
other threads to trip on."""
from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

import numpy as np
import pytest

from tgfx import config, lowering
from tgfx.devices.target import host_target
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.lru import LRU


def run_each(*works: Any, timeout: float = 60.0) -> list[Any]:
    """Each of `works` on a thread of its own, all at once; their results, or the first error raised in one of them.
    A thread still running after `timeout` fails the test (a hang is a failure, not a wait for ever)."""
    results: list[Any] = [None] * len(works)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = works[i]()
        except BaseException as e:  # noqa: BLE001 -- raised again in the test's thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(works))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


def _scaled(n: int) -> UOp:
    """The kernel `out = x * 2.5` over n float32s: every n the same code (the length is read at run time), each n a
    kernel of its own name."""
    def g(slot: int) -> UOp:
        return UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (slot, n))
    c = UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, 2.5),), (1,)),),
            (n,))
    y = UOp(Ops.MUL, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (g(1),), (n,)), c))
    return UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0), y)),))


class _MissTogether(LRU):
    """`lowering._same_code` whose lookups of one code wait for each other: both threads miss, then both insert."""

    def __init__(self, parties: int) -> None:
        super().__init__(lambda: 1024)
        self.barrier = threading.Barrier(parties, timeout=60)

    def get(self, key: Any, default: Any = None) -> Any:
        got = super().get(key, default)
        self.barrier.wait()
        return got


def test_two_threads_compiling_kernels_of_the_same_code_at_once_each_get_a_kernel(monkeypatch, tmp_path) -> None:
    # kernels of one code under two names, lowered at once: both missed the code cache, the second to insert took
    # the first's object (which defines only the first's symbol) under its own name, and failed to load it ("has no
    # symbol"); each must run, on the one object
    from tgfx.config import Context
    asts = [_scaled(5), _scaled(9)]
    target = host_target()
    assert len({lowering._code_key(lowering.kernel_source(a, target), target) for a in asts}) == 1
    assert len({lowering.kernel_name(a) for a in asts}) == 2
    lowering.forget_compiled()
    monkeypatch.setattr(lowering, "_same_code", _MissTogether(len(asts)))
    with Context(TGFX_CACHE_DIR=str(tmp_path)):   # (nothing from the disk cache; each thread is given the override)
        kernels = run_each(*[config.carry(lambda a=a: lowering.lower_kernel(a)) for a in asts])
    lowering.forget_compiled()
    # one object, loaded once, under the symbol of the kernel that inserted it
    assert kernels[0].name == kernels[1].name and kernels[0].code.addr == kernels[1].code.addr



@pytest.mark.parametrize("pooled", [False, True])
def test_two_threads_lowering_the_same_kernels_at_once_compile_each_once(monkeypatch, tmp_path, pooled: bool) -> None:
    # eight threads' first eager op (or jitted program, `prelower`'s pool) at once compiled each of its kernels in
    # every thread that missed the code cache before another entered it: the code is entered as pending before it
    # compiles, and the others wait for that compile
    import tgfx as tg
    from tgfx.config import Context
    asts = [_scaled(6), _scaled(10)]
    lowering.forget_compiled()
    monkeypatch.setattr(lowering, "_same_code", _MissTogether(2))
    with Context(TGFX_CACHE_DIR=str(tmp_path)):   # (nothing from the disk cache; each thread is given the override)
        tg.counters.reset()
        if pooled:   # (each thread's program: both kernels, compiled on its own queue's thread)
            run_each(*[config.carry(lambda: lowering.prelower(asts))] * 2)
            kernels = [lowering.lower_kernel(a) for a in asts]
        else:
            kernels = run_each(*[config.carry(lambda: lowering.lower_kernel(asts[0]))] * 2)
    lowering.forget_compiled()
    assert tg.counters.compile_count == 1
    assert len({k.code.addr for k in kernels}) == 1 and all(k.code.addr for k in kernels)


def _blocked(thread: threading.Thread, codes: set[Any]) -> bool:
    """Whether `thread` is running one of `codes` now (somewhere in its stack)."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def _first_calls_at_once(body: Any, first_in: threading.Event, go: threading.Event, n: int = 8) -> tuple[Any, dict]:
    """`jit(body)` called by n threads: the first enters its trace (`body` sets `first_in`, then waits for `go`), the
    others make their call meanwhile; `go` is set once each of them waits (for that trace, or in a `body` of its own).
    The jitted function, and each thread's result or error."""
    import tgfx as tg
    f = tg.jit(body)
    x = tg.asarray(np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4))
    results: dict[int, Any] = {}

    def call(i: int) -> None:
        try:
            results[i] = f(x).numpy()
        except Exception as e:  # noqa: BLE001 -- the test looks at it
            results[i] = e
    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(n)]
    threads[0].start()
    assert first_in.wait(60)       # the first thread is inside its trace
    for t in threads[1:]:
        t.start()
    waits = {body.__code__, threading.Event.wait.__code__}
    for t in threads[1:]:
        for _ in range(6000):
            if _blocked(t, waits) or not t.is_alive():
                break
            threading.Event().wait(0.01)
    go.set()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return f, results


XN = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)


def test_threads_calling_a_jitted_function_first_at_once_trace_it_once() -> None:
    # eight threads of a pool making their first call of one function at once each traced, scheduled and compiled it
    # (JAX traces it once): the others must wait for the one trace and replay its program
    import tgfx.numpy as tnp
    go, first_in = threading.Event(), threading.Event()

    def body(x: Any) -> Any:
        first_in.set()
        assert go.wait(60)
        return tnp.tanh(x) @ x.T + 1
    f, results = _first_calls_at_once(body, first_in, go)
    assert f.trace_count == 1
    assert len(results) == 8 and all(np.allclose(r, np.tanh(XN) @ XN.T + 1, rtol=1e-5) for r in results.values())


def test_a_trace_failing_while_other_threads_wait_for_it_fails_only_its_own_call() -> None:
    # the threads waiting for a trace that raises trace for themselves: the error is the first thread's alone
    import tgfx.numpy as tnp
    go, first_in = threading.Event(), threading.Event()

    def body(x: Any) -> Any:
        if not first_in.is_set():
            first_in.set()
            assert go.wait(60)
            raise ValueError("the first trace fails")
        return tnp.tanh(x) @ x.T + 1
    f, results = _first_calls_at_once(body, first_in, go)
    assert isinstance(results[0], ValueError) and str(results[0]) == "the first trace fails"
    assert all(np.allclose(results[i], np.tanh(XN) @ XN.T + 1, rtol=1e-5) for i in range(1, 8))


def test_a_compile_interrupted_by_ctrl_c_is_compiled_again_by_the_next_lowering(monkeypatch, tmp_path) -> None:
    # the code being compiled is entered as pending: an interrupted compile must not leave it pending (the next
    # lowering of that code would wait for it for ever), nor remembered as failed
    from tgfx.config import Context
    real = lowering.compile_llvm
    calls = []

    def interrupted_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(lowering, "compile_llvm", interrupted_once)
    lowering.forget_compiled()
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        with pytest.raises(KeyboardInterrupt):
            lowering.lower_kernel(_scaled(7))
        kernel = run_each(config.carry(lambda: lowering.lower_kernel(_scaled(7))))[0]
    lowering.forget_compiled()
    assert len(calls) == 2 and kernel.code.addr


def _adding_while_iterated(objects: weakref.WeakSet, make: Any, run: Any) -> None:
    """`run()` while another thread adds `make()` to `objects` as the first of its members is read: a trace hook in
    WeakSet's iteration does it, on this thread, at the line that other thread would run between two items."""
    added: list[Any] = []

    def hook(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code is weakref.WeakSet.__iter__.__code__ and event == "line" and frame.f_locals.get("item") \
                is not None and not added:
            added.append(make())
            objects.add(added[0])
        return hook
    sys.settrace(hook)
    try:
        run()
    finally:
        sys.settrace(None)


class _Recycling:
    """A program with no recycled results (`Program.recent`), as `recycled_holders` reads one."""
    recent: tuple = ()


@pytest.mark.parametrize("which", ["clear_caches", "recycled_holders"])
def test_a_registry_read_while_another_thread_adds_to_it(which: str) -> None:
    # tg.clear_caches beside a thread making jitted functions, a donating call beside one whose program keeps its
    # first results: iterating the WeakSet of live ones raised "Set changed size during iteration"
    import tgfx as tg
    from tgfx.lowering import program
    from tgfx.transforms import jit
    tg.jit(lambda v: v + 1)(np.ones(2, np.float32))
    program._recycling.add(kept := _Recycling())
    if which == "clear_caches":
        _adding_while_iterated(jit._live, lambda: tg.jit(lambda v: v * 2), tg.clear_caches)
    else:
        _adding_while_iterated(program._recycling, _Recycling, program.recycled_holders)
    assert kept in program._recycling


def test_a_failed_call_is_an_error_in_its_thread_even_after_another_threads_wait_raised_it() -> None:
    # a pool thread's wait on the device raised the fault of another thread's call first (it cannot tell whether its
    # values depend on the failed ones), and that thread then read its results, never computed, with no error
    import tgfx as tg
    from tgfx.devices.hcq import HCQExecError

    def fails(v: np.ndarray) -> np.ndarray:
        raise ValueError("a callback of thread A fails")
    bad = tg.jit(lambda v: tg.pure_callback(fails, tg.ShapeDtypeStruct(v.shape, v.dtype), v) * 2)
    good = tg.jit(lambda v: v + 1)
    x = tg.asarray(np.ones(4, np.float32), device="CPU")   # (the CPU's queues, whatever the default device)
    good(x).block_until_ready()
    submitted, b_waited = threading.Event(), threading.Event()

    def a() -> str:
        out = bad(x)            # (submitted; nothing waits for it yet)
        submitted.set()
        assert b_waited.wait(60)
        try:
            out.numpy()
        except HCQExecError as e:
            return str(e)
        return "no error"

    def b() -> str:
        assert submitted.wait(60)
        try:
            good(x).numpy()
            return "no error"
        except HCQExecError as e:
            return str(e)
        finally:
            b_waited.set()
    seen_a, _ = run_each(a, b)
    assert "a callback of thread A fails" in seen_a
    np.testing.assert_array_equal(good(x).numpy(), np.full(4, 2, np.float32))   # and nothing is owed to this thread


def test_threads_lowering_one_kernel_at_once_lower_it_once(monkeypatch, tmp_path) -> None:
    # eight threads' first eager op at once lowered each of its kernels in most of them (25 lowerings of 4 kernels,
    # ~1-20 ms of Python each): a thread whose kernel another is lowering waits for that lowering
    from tgfx.config import Context
    real = lowering.kernel_source
    entered, go = threading.Event(), threading.Event()
    calls = []

    def slow_first(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            entered.set()
            assert go.wait(60)
        return real(*args, **kwargs)
    monkeypatch.setattr(lowering, "kernel_source", slow_first)
    lowering.forget_compiled()
    ast = _scaled(13)
    kernels: dict[int, Any] = {}

    def lower(i: int) -> None:
        kernels[i] = lowering.lower_kernel(ast)
    with Context(TGFX_CACHE_DIR=str(tmp_path)):   # (nothing from the disk cache; each thread is given the override)
        first = threading.Thread(target=config.carry(lambda: lower(0)), daemon=True)
        first.start()
        assert entered.wait(60)
        second = threading.Thread(target=config.carry(lambda: lower(1)), daemon=True)
        second.start()
        waits = {threading.Condition.wait.__code__, slow_first.__code__}
        for _ in range(6000):   # the second thread waits for the first's lowering (or, before, lowers it itself)
            if _blocked(second, waits) or not second.is_alive():
                break
            threading.Event().wait(0.01)
        go.set()
        for t in (first, second):
            t.join(60)
    lowering.forget_compiled()
    assert not first.is_alive() and not second.is_alive(), "a thread hung"
    assert len(calls) == 1 and kernels[0].code.addr == kernels[1].code.addr


def _reads_of_a_shared_value(monkeypatch: pytest.MonkeyPatch, fail_first: bool) -> tuple[list[Any], list[str]]:
    """Four threads reading one lazy Tensor (`np.asarray`), the first to compute it held inside its computation until
    the other three wait for it (or have found it computed); with `fail_first`, that computation raises. What each
    read gave (an array or the error), and the computations run ("ok" or "failed")."""
    import tgfx as tg
    import tgfx._realize as realize_mod
    import tgfx.numpy as tnp
    x = tg.asarray(XN)
    shared = tnp.tanh(x @ x.T + 1).sum(axis=0) * 2   # lazy: computed by whichever thread reads it first
    runs: list[str] = []
    first_in, waiting = threading.Event(), threading.Semaphore(0)
    lock = threading.Lock()

    def computing(real: Any) -> Any:
        def compute(*args: Any) -> Any:
            with lock:
                first = not runs
                runs.append("failed" if first and fail_first else "ok")
            if first:
                first_in.set()
                for _ in range(3):   # the other three threads wait for this computation's result
                    assert waiting.acquire(timeout=60), "a reader did not wait for the shared value"
                if fail_first:
                    raise RuntimeError("the first computation fails")
            return real(*args)
        return compute

    def waited(real: Any) -> Any:
        def wait(claim: Any) -> Any:
            waiting.release()
            return real(claim)
        return wait
    monkeypatch.setattr(realize_mod, "realize_op", computing(realize_mod.realize_op))
    monkeypatch.setattr(realize_mod, "lower_realize", computing(realize_mod.lower_realize))
    monkeypatch.setattr(realize_mod, "_result_of", waited(realize_mod._result_of))

    def read(first: bool) -> Any:
        if not first:
            assert first_in.wait(60)
        try:
            return np.asarray(shared)
        except RuntimeError as e:
            return e
    return run_each(lambda: read(True), *(lambda: read(False) for _ in range(3))), runs


def test_threads_reading_one_lazy_value_at_once_compute_it_once(monkeypatch) -> None:
    # four threads reading a value none had computed each computed its graph (the same kernels four times): the
    # others now wait for the first one's result, as they would for JAX's eagerly computed array
    got, runs = _reads_of_a_shared_value(monkeypatch, fail_first=False)
    want = (np.tanh(XN @ XN.T + 1).sum(axis=0) * 2).astype(np.float32)
    assert runs == ["ok"]
    assert all(np.allclose(g, want, rtol=1e-5) for g in got)


def test_threads_waiting_for_a_value_whose_computation_fails_compute_it_themselves(monkeypatch) -> None:
    # the error is the first reader's alone: the waiting ones are not left blocked, nor handed its failure
    got, runs = _reads_of_a_shared_value(monkeypatch, fail_first=True)
    want = (np.tanh(XN @ XN.T + 1).sum(axis=0) * 2).astype(np.float32)
    assert isinstance(got[0], RuntimeError) and str(got[0]) == "the first computation fails"
    assert runs == ["failed", "ok", "ok", "ok"]
    assert all(np.allclose(g, want, rtol=1e-5) for g in got[1:])


def test_a_read_computes_no_lazy_tensor_another_thread_made_of_the_same_expression() -> None:
    # UOps are hash-consed: two threads that each sum one computed array hold the same node without sharing anything.
    # A read in one thread took the other's Tensor of it as a sibling (a value of its graph) and computed it in its
    # own schedule, and once its graph grew LAZY_DEPTH deep, any Tensor of the other thread that reads the node too:
    # which values a thread stored (so how its kernels fused and rounded) depended on what other threads read
    # meanwhile. Six threads each running an eager loop of sharded sums differed from the same loops run one after
    # another by 1-4 ulps (at step 14, 21 or 28 of 30) in most runs; each thread's Tensors are its own reads' now
    import tgfx as tg
    import tgfx.numpy as tnp
    from tgfx.tensor import LAZY_DEPTH, is_realized
    shared = tg.Tensor(np.arange(16, dtype=np.float32).reshape(4, 4), device="CPU")
    made, read = threading.Event(), threading.Event()
    col = np.arange(16, dtype=np.float32).reshape(4, 4).sum(axis=0)

    def other() -> tuple[bool, bool, Any, Any]:
        total = tnp.sum(shared, axis=0)           # the same node as the reader's
        scaled = tnp.sum(shared, axis=0) * 3      # a value that reads it
        made.set()
        assert read.wait(60)
        lazy = (not is_realized(total.uop), not is_realized(scaled.uop))   # as this thread left them
        return *lazy, np.asarray(total), np.asarray(scaled)

    def reader() -> Any:
        assert made.wait(60)
        try:
            near = np.asarray(tnp.sum(shared, axis=0) + 1)
            deep = tnp.sum(shared, axis=0)
            for _ in range(LAZY_DEPTH + 2):       # computed as it grows past LAZY_DEPTH, with what reads its nodes
                deep = deep * 0.5 + 1
            return near, np.asarray(deep)
        finally:
            read.set()
    (total_lazy, scaled_lazy, total, scaled), (near, deep) = run_each(other, reader)
    assert total_lazy and scaled_lazy
    np.testing.assert_array_equal(total, col)
    np.testing.assert_array_equal(scaled, col * 3)
    np.testing.assert_array_equal(near, col + 1)
    want = col.copy()
    for _ in range(LAZY_DEPTH + 2):
        want = want * np.float32(0.5) + np.float32(1)
    np.testing.assert_allclose(deep, want, rtol=1e-6)
