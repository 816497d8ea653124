"""The compile worker process (tgfx/lowering/llvm_worker.py): it compiles beside this process when this one is
busy, produces the same object code, reports LLVM's errors, and a worker that dies leaves the compile here."""
from __future__ import annotations

import pathlib
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


def held(lock: threading.Lock, seconds: float, until: threading.Event | None = None) -> threading.Thread:
    """A thread holding `lock` for `seconds`, or until `until` is set (this process "busy compiling")."""
    ready = threading.Event()

    def hold() -> None:
        with lock:
            ready.set()
            (until or threading.Event()).wait(seconds)
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
    went_out = threading.Event()
    real = compile_mod.CompileWorker.compile
    monkeypatch.setattr(compile_mod.CompileWorker, "compile",
                        lambda self, ir, target=None: calls.append(1) or went_out.set() or real(self, ir, target))
    x = np.random.default_rng(0).standard_normal((16, 24)).astype(np.float32)
    c = float(np.random.default_rng().integers(1, 1 << 20))   # new constants: new kernels, compiled now

    def f(a):
        h = tg.numpy.tanh(a @ a.T) * c
        return (h - h.max(axis=1, keepdims=True)).sum(axis=0), (a * c).T @ a, tg.numpy.exp(a / c).sum(axis=1)

    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        tg.counters.reset()
        # this process busy at first (until a compile went out: the lowering before it takes seconds on a busy host)
        busy = held(compile_mod.compiler().busy, 60.0, went_out)
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


def _run_k(addr: int, value: float) -> float:
    """Call a kernel compiled from `IR` (its buffer's one float times 3) on `value`."""
    import ctypes
    buf = (ctypes.c_float * 1)(value)
    bufs = (ctypes.c_void_p * 1)(ctypes.addressof(buf))
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(addr)(ctypes.addressof(bufs), None, 0)
    return buf[0]


def _queued(irs: list[str]) -> list[compile_mod.Objects]:
    """The `Objects` of kernels `k0`, `k1`, ... of `irs` through a `CompileQueue` whose first compile waits for LLVM
    (this process's compiler and every worker busy) while the rest are queued: one module for `k0`, one for the rest."""
    from tgfx.devices.target import host_target
    held_locks = [compile_mod.compiler().busy, *(w.lock for w in compile_mod.compile_workers())]
    with Context(TGFX_COMPILE_WORKERS=0), compile_mod.CompileQueue(1) as queue:
        for lock in held_locks:   # LLVM busy: the queue's first compile waits for it
            lock.acquire()
        try:
            first = queue.submit(irs[0], "k0", host_target())
            for _ in range(1000):   # (until the queue's thread has taken it)
                with queue.cond:
                    if not queue.pending:
                        break
                threading.Event().wait(0.005)
            rest = [queue.submit(ir, f"k{i}", host_target()) for i, ir in enumerate(irs) if i]
        finally:
            for lock in held_locks:
                lock.release()
        return [f.result(60) for f in (first, *rest)]


def test_kernels_queued_behind_a_compile_are_compiled_as_one_module_loaded_once(tmp_path):
    """A `CompileQueue` thread compiles what waits when it is free as one module (LLVM builds its code generation
    pipeline per module: 2.8 ms for an empty kernel): five kernels, the last four queued while the first waits for
    LLVM, are two modules. The four share one object file, loaded once, each kernel at its own symbol, and each
    kernel's disk cache entry names that object and the symbols it defines: read back, it is the same code."""
    from tgfx.lowering import KernelObject
    irs = [IR.replace("@k(", f"@k{i}(") for i in range(5)]
    tg.counters.reset()
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        got = _queued(irs)
        assert (tg.counters.compile_count, tg.counters.module_count) == (5, 2)
        assert got[0].symbols == ("k0",) and all(g is got[1] for g in got[1:])
        assert got[1].symbols == ("k1", "k2", "k3", "k4")
        codes = [compile_mod.load_object(f"batch-test-{i}", f"k{i}", g.obj, symbols=g.symbols)
                 for i, g in enumerate(got)]
        assert [_run_k(c.addr, 1.5 + i) for i, c in enumerate(codes)] == [3 * (1.5 + i) for i in range(5)]
        import hashlib
        owner = codes[1].owner   # the batch's object was added once, and defines its four kernels there
        assert {c.owner for c in codes[1:]} == {owner} and hashlib.sha256(got[1].obj).digest() in owner.objects
        assert {"k1", "k2", "k3", "k4"} <= owner.symbols
        # another object defining k3 (compiled alone) goes to another engine: no engine defines a symbol twice
        alone = compile_mod.load_object("batch-test-alone", "k3", compile_mod.compile_llvm(irs[3]))
        assert alone.owner is not owner and _run_k(alone.addr, 2.0) == 6.0
        # the disk cache: each of the batch's kernels, its entry the batch's object and symbols
        ko = KernelObject("k3", got[3].obj, 1, "hand", symbols=got[3].symbols)
        compile_mod.write_cached("batch-test-key", ko.meta(), ko.obj)
        back = KernelObject.from_meta(*compile_mod.read_cached("batch-test-key"))
        assert (back.obj, back.symbols) == (got[3].obj, ("k1", "k2", "k3", "k4"))
        assert compile_mod.load_object("batch-test-again", "k3", back.obj, symbols=back.symbols).addr == codes[3].addr



def test_a_kernel_of_a_batch_keeps_its_engine_until_it_is_released_too(monkeypatch):
    """A batch's kernels (`CompileQueue`) are one object in one engine (`CodeOwner`), which lives while any of them is
    held: with its siblings released, the last one held still runs from the same address; released too, the engine
    is disposed of. (A batch's engine lives as long as its longest-held kernel: at most `BATCH_KERNELS` kernels' code
    kept for one.)"""
    import gc
    import hashlib
    import weakref
    monkeypatch.setattr(compile_mod, "OWNER_KERNELS", 4)   # the batch fills its engine: the next object opens another
    monkeypatch.setattr(compile_mod, "_open_owner", None)
    irs = [IR.replace("@k(", f"@sib{i}(") for i in range(5)]
    tg.counters.reset()
    got = _queued(irs)
    assert (tg.counters.compile_count, tg.counters.module_count) == (5, 2)
    gc.collect()
    engines = compile_mod.code_stats().owners
    codes = {i: compile_mod.load_object(f"sibling-{i}", f"sib{i}", got[i].obj, symbols=got[i].symbols)
             for i in (1, 2, 3, 4, 0)}
    assert compile_mod.code_stats().owners == engines + 2   # the batch's engine, and k0's
    engine = weakref.ref(compile_mod._owner_of[hashlib.sha256(got[1].obj).digest()])   # the batch's object's
    assert codes[0].owner is not engine()
    addr = codes[4].addr
    for i in (1, 2, 3):
        del codes[i]
    gc.collect()
    assert engine() is not None and [compile_mod.loaded(f"sibling-{i}") for i in (1, 2, 3)] == [None] * 3
    assert _run_k(addr, 2.5) == 7.5 and compile_mod.loaded("sibling-4").addr == addr
    del codes[4]
    gc.collect()
    assert engine() is None and compile_mod.code_stats().owners == engines + 1   # k0's engine only
    assert _run_k(codes[0].addr, 1.5) == 4.5

# a new process: each kernel k<i> read from the disk cache under key batch-disk-<i> (or compiled from IR and cached, as
# `lower_kernel` does, when its entry or object is missing or corrupt), loaded and run on 1.5 + i
_READ_BACK = """
import ctypes, json, sys
import tgfx as tg
from tgfx.lowering import KernelObject
from tgfx.lowering import compile as compile_mod
IR = sys.stdin.read()
out = []
for i in range(5):
    key = f"batch-disk-{i}"
    if (cached := compile_mod.read_cached(key)) is None:
        ko = KernelObject(f"k{i}", compile_mod.compile_llvm(IR.replace("@k(", f"@k{i}(")), 1, "hand")
        compile_mod.write_cached(key, ko.meta(), ko.obj)
    else:
        ko = KernelObject.from_meta(*cached)
    code = compile_mod.load_object(key, ko.name, ko.obj, symbols=ko.symbols)
    buf = (ctypes.c_float * 1)(1.5 + i)
    bufs = (ctypes.c_void_p * 1)(ctypes.addressof(buf))
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(code.addr)(ctypes.addressof(bufs), None, 0)
    out.append(buf[0])
print(json.dumps({"out": out, "compiles": tg.counters.compile_count, "reads": tg.counters.cached_object_reads,
                  "loaded": sum(len(o.objects) for o in compile_mod._owners)}))
"""


def _read_back(cache: pathlib.Path) -> dict:
    import json
    import os
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", _READ_BACK], input=IR, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TGFX_CACHE_DIR": str(cache)})
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_a_batch_object_is_cached_once_for_its_kernels_and_recompiled_when_corrupt(tmp_path):
    """A batch's kernels' disk cache entries name one object file, stored once under its digest (each entry held the
    whole object: spectral + fno + gmm_em's cache was 608 KiB, 276 KiB before batches). A new process reads that
    object once for its four kernels, compiles nothing and runs them right; a truncated or corrupted object is no
    object: its kernels are compiled again (and right), and cached again."""
    from tgfx.lowering import KernelObject
    irs = [IR.replace("@k(", f"@k{i}(") for i in range(5)]
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        got = _queued(irs)
        for i, g in enumerate(got):
            ko = KernelObject(f"k{i}", g.obj, 1, "hand", symbols=g.symbols)
            compile_mod.write_cached(f"batch-disk-{i}", ko.meta(), ko.obj)
    objects = sorted((tmp_path / "objects").rglob("*.o"))
    assert sorted(p.stat().st_size for p in objects) == sorted([len(got[0].obj), len(got[1].obj)])
    want = [3 * (1.5 + i) for i in range(5)]
    assert _read_back(tmp_path) == {"out": want, "compiles": 0, "reads": 2, "loaded": 2}
    batch = next(p for p in objects if p.read_bytes() == got[1].obj)
    for spoil in (lambda b: b[:len(b) // 2], lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:]):
        batch.write_bytes(spoil(got[1].obj))
        assert _read_back(tmp_path) == {"out": want, "compiles": 4, "reads": 1, "loaded": 5}
        assert _read_back(tmp_path) == {"out": want, "compiles": 0, "reads": 5, "loaded": 5}   # each alone now
        for i in range(1, 5):   # back to the batch's entries (the alone ones' objects stay, unused)
            ko = KernelObject(f"k{i}", got[1].obj, 1, "hand", symbols=got[1].symbols)
            with Context(TGFX_CACHE_DIR=str(tmp_path)):
                compile_mod.write_cached(f"batch-disk-{i}", ko.meta(), ko.obj)


_PROGRAM = """
import json
import numpy as np
import tgfx as tg
from tgfx.devices.target import native_target
from tgfx.lowering import compile as compile_mod
compile_mod.WORKER_BACKLOG = 0   # the worker joins at the second compile, however fast LLVM keeps up
x = np.random.default_rng(0).standard_normal((16, 24)).astype(np.float32)

def f(a):
    h = tg.numpy.tanh(a @ a.T) * 7.0
    return (h - h.max(axis=1, keepdims=True)).sum(axis=0), (a * 3.0).T @ a, tg.numpy.exp(a / 5.0).sum(axis=1)

got = [o.numpy() for o in tg.jit(f)(tg.asarray(x))]
h = np.tanh(x @ x.T) * np.float32(7)
want = [(h - h.max(axis=1, keepdims=True)).sum(axis=0), (x * np.float32(3)).T @ x, np.exp(x / np.float32(5)).sum(1)]
for a, b in zip(got, want, strict=True):
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-4 * np.abs(b).max())
print(json.dumps({"compiles": tg.counters.compile_count, "workers": len(compile_mod._worker_list),
                  "cores": native_target().cores}))
"""


def test_a_program_found_in_the_disk_cache_starts_no_compile_worker(tmp_path):
    """A program's first call in a process that finds all its kernels in the disk cache compiles nothing, so it starts
    no compile worker (a Python process importing LLVM: it was started for every program of 4 kernels or more, and
    ran beside the first call's lowering for nothing). A process that compiles them starts one (on 2 cores or more)."""
    import json
    import os
    import subprocess
    import sys

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "TGFX_CACHE_DIR": str(tmp_path), "TGFX_COMPILE_WORKERS": "1"})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])
    cold = run()
    assert cold["compiles"] >= 4 and cold["workers"] == (1 if cold["cores"] > 1 else 0)
    assert run() == {**cold, "compiles": 0, "workers": 0}


def test_compile_workers_join_a_queue_only_once_kernels_wait_behind_its_compiles():
    """A `CompileQueue` starts its own thread at the first kernel and asks for the compile workers' threads (`more`,
    which starts the workers) only when `WORKER_BACKLOG` kernels wait: a program whose compiles keep up with its
    lowering starts no worker (spectral's first call: 180 ms of a worker's CPU for a few of its 21 kernels)."""
    from tgfx.devices.target import host_target
    irs = [IR.replace("@k(", f"@k{i}(") for i in range(12)]
    asked: list[int] = []

    def more() -> int:
        asked.append(1)
        return 0
    with Context(TGFX_COMPILE_WORKERS=0):
        with compile_mod.CompileQueue(1, more) as queue:   # each compile done before the next kernel: no backlog
            for i in range(6):
                queue.submit(irs[i], f"k{i}", host_target()).result(60)
        assert asked == [] and len(queue.threads) == 1
        busy = compile_mod.compiler().busy
        with compile_mod.CompileQueue(1, more) as queue:
            busy.acquire()   # LLVM busy: the queue's first compile waits, the next kernels queue behind it
            try:
                futures = [queue.submit(irs[0], "k0", host_target())]
                for _ in range(1000):   # (until the queue's thread has taken it)
                    with queue.cond:
                        if not queue.pending:
                            break
                    threading.Event().wait(0.005)
                for i in range(1, 1 + compile_mod.WORKER_BACKLOG):
                    futures.append(queue.submit(irs[i], f"k{i}", host_target()))
                assert asked == []   # WORKER_BACKLOG - 1 waited at the last submit
                futures += [queue.submit(irs[i], f"k{i}", host_target()) for i in range(5, 8)]
                assert asked == [1]   # asked once, when WORKER_BACKLOG waited
            finally:
                busy.release()
            assert all(len(f.result(60).obj) > 0 for f in futures)
