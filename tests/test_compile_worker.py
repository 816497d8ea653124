"""The compile worker process (tgfx/lowering/llvm_worker.py): it compiles beside this process when this one is
busy, produces the same object code, reports LLVM's errors, and a worker that dies leaves the compile here."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import tgfx as tg
from tgfx.config import Context
from tgfx.lowering import compile as compile_mod

IR = """
define void @k(ptr %bufs, ptr %vals, i64 %core) {
  %b0 = load ptr, ptr %bufs
  %x = load float, ptr %b0
  %y = fmul float %x, 3.0
  store float %y, ptr %b0
  ret void
}
"""


@pytest.fixture
def worker() -> compile_mod.CompileWorker:
    workers = compile_mod.compile_workers()
    if not workers:
        pytest.skip("no compile worker on a one-core machine")
    return workers[0]


def held(lock: threading.Lock, seconds: float) -> threading.Thread:
    """A thread holding `lock` for `seconds` (this process "busy compiling")."""
    ready = threading.Event()

    def hold() -> None:
        with lock:
            ready.set()
            threading.Event().wait(seconds)
    t = threading.Thread(target=hold)
    t.start()
    ready.wait(5)
    return t


def test_a_busy_process_compiles_in_the_worker_to_the_same_object(worker):
    here = compile_mod.compiler().compile(IR)
    with compile_mod.compiler().busy:                 # this process is busy: the compile goes to the worker
        there = compile_mod.compile_llvm(IR)
    assert there == here and worker.proc.poll() is None


def test_llvm_errors_in_the_worker_reach_the_caller(worker):
    with compile_mod.compiler().busy, pytest.raises(RuntimeError, match="LLVM failed in the compile worker"):
        compile_mod.compile_llvm("define void @broken( {")
    assert worker.proc.poll() is None                # the worker keeps serving
    with compile_mod.compiler().busy:
        assert compile_mod.compile_llvm(IR) == compile_mod.compiler().compile(IR)


def test_a_dead_worker_leaves_the_compile_to_this_process(worker):
    worker.proc.kill()
    worker.proc.wait(5)
    busy = held(compile_mod.compiler().busy, 0.3)     # busy a while: the dead worker is tried first
    try:
        assert compile_mod.compile_llvm(IR) == compile_mod.compiler().compile(IR)
    finally:
        busy.join(5)
    assert all(w.proc.poll() is None for w in compile_mod.compile_workers())   # and a new one is started


def test_a_program_compiles_in_the_worker_and_runs_right(worker, tmp_path, monkeypatch):
    calls = []
    real = compile_mod.CompileWorker.compile
    monkeypatch.setattr(compile_mod.CompileWorker, "compile",
                        lambda self, ir, target=None: calls.append(1) or real(self, ir, target))
    x = np.random.default_rng(0).standard_normal((16, 24)).astype(np.float32)
    c = float(np.random.default_rng().integers(1, 1 << 20))   # new constants: new kernels, compiled now

    def f(a):
        h = tg.numpy.tanh(a @ a.T) * c
        return (h - h.max(axis=1, keepdims=True)).sum(axis=0), (a * c).T @ a, tg.numpy.exp(a / c).sum(axis=1)

    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        tg.counters.reset()
        busy = held(compile_mod.compiler().busy, 2.0)   # this process busy at first: the first compile goes out
        try:
            got = [o.numpy() for o in tg.jit(f)(tg.asarray(x))]
        finally:
            busy.join(10)
    assert tg.counters.compile_count >= 4 and len(calls) >= 1
    h = np.tanh(x @ x.T) * np.float32(c)
    want = [(h - h.max(axis=1, keepdims=True)).sum(axis=0), (x * np.float32(c)).T @ x, np.exp(x / np.float32(c)).sum(1)]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-4 * np.abs(b).max())


def _adds(n: int, width: int) -> str:
    """A module of `n` independent float adds of neighbouring elements, which SLP vectorises, preferring `width`-bit
    vectors (as the renderer writes for its target)."""
    body = [f"  %pa{i} = getelementptr float, ptr %a, i64 {i}\n  %va{i} = load float, ptr %pa{i}\n"
            f"  %pb{i} = getelementptr float, ptr %b, i64 {i}\n  %vb{i} = load float, ptr %pb{i}\n"
            f"  %s{i} = fadd float %va{i}, %vb{i}\n  %po{i} = getelementptr float, ptr %o, i64 {i}\n"
            f"  store float %s{i}, ptr %po{i}" for i in range(n)]
    return ("define void @k(ptr noalias %a, ptr noalias %b, ptr noalias %o) #0 {\n" + "\n".join(body) +
            f'\n  ret void\n}}\nattributes #0 = {{ "prefer-vector-width"="{width}" }}\n')


def test_slp_builds_vectors_of_at_most_256_bits():
    """LLVM's SLP vectoriser builds vectors of at most `SLP_MAX_BITS` (256) for an AVX-512 target: trying 16 lanes of
    every group of scalar chains first took 500 ms of LLVM for an FNO kernel whose 12 strided accumulators became no
    vector at all. A target preferring narrower vectors keeps its own width. The same in the compile worker."""
    import re

    import llvmlite.binding as llvm

    from tgfx.devices.target import target_for
    from tgfx.lowering import llvm_worker
    t = target_for("skylake-avx512")
    for width, lanes in ((512, 8), (128, 4)):
        mod = llvm.parse_assembly(_adds(16, width))
        llvm_worker.optimize(mod, compile_mod.target_machine(t))
        assert set(re.findall(r"<(\d+) x float>", str(mod))) == {str(lanes)}
    # the worker's option is set per module as this process's is: the same object code
    workers = compile_mod.compile_workers()
    if workers:
        ir = _adds(16, 512)
        assert workers[0].compile(ir, t) == compile_mod.compiler().compile(ir, t)
