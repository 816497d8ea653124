"""Compiled code and programs have an owner and a bound (issue #15.6): retracing a jitted function over many shapes,
or running eager ops over many shapes, keeps a bounded number of kernels, code engines and programs alive, and memory
stops growing; a deleted jitted function releases its programs; a kernel evicted from the cache while a live program
runs it keeps its code; threads making their first calls at once each get the right answer (issue #15.3)."""
from __future__ import annotations

import gc
import os
import pathlib
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.config import Context
from tgfx.lowering import compile as compile_mod
from tgfx.lowering import forget_compiled
from tgfx.lowering.compile import code_stats

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOUNDS = {"TGFX_KERNEL_CACHE_SIZE": 8, "TGFX_SCHEDULE_CACHE_SIZE": 8, "TGFX_JIT_CACHE_SIZE": 4}


def on_cpu(x: np.ndarray) -> tg.Tensor:
    """`x` on the CPU, whatever the default device (`-p tests.emulated_cuda` makes it CUDA:0, whose emulating driver
    holds a CPU kernel for each GPU kernel it is given): these tests count the CPU's compiled code and its graphs."""
    return tg.asarray(x, device="CPU")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def programs_alive() -> int:
    """Encoded programs (jitted signatures' and eager templates') alive in this process."""
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "JitProgram" or
               type(o).__name__ == "Program" and type(o).__module__ == "tgfx.lowering.program")


def held_elsewhere() -> tuple[int, int]:
    """Kernels and programs that other tests' live functions still hold: the caches emptied, what stays alive."""
    forget_compiled()
    gc.collect()
    return code_stats().kernels, programs_alive()


def retrace(g: tg.jit, sizes: range) -> None:
    for n in sizes:
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_allclose(g(on_cpu(x)).numpy(), x * 3 + 1)


def test_retracing_keeps_a_bounded_number_of_kernels_and_programs_and_releases_them_with_the_function():
    with Context(**BOUNDS):
        kernels, programs = held_elsewhere()
        g = tg.jit(lambda x: x * 3 + 1)
        retrace(g, range(1, 121))         # 120 signatures, one new kernel each
        gc.collect()
        assert g.trace_count == 120
        stats = code_stats()
        # the kernel LRU, plus the kernels of the jit cache's programs
        assert stats.kernels <= kernels + BOUNDS["TGFX_KERNEL_CACHE_SIZE"] + BOUNDS["TGFX_JIT_CACHE_SIZE"]
        assert stats.owners <= stats.kernels
        progs = [weakref.ref(p) for p, _ in g._cache.values()]
        assert len(progs) == BOUNDS["TGFX_JIT_CACHE_SIZE"]
        del g
        gc.collect()
        assert all(p() is None for p in progs)   # a deleted jitted function releases its programs
        assert programs_alive() <= programs + BOUNDS["TGFX_SCHEDULE_CACHE_SIZE"]
        retrace(tg.jit(lambda x: x * 3 + 1), range(1, 3))   # and retracing it again works


def test_eager_ops_over_many_shapes_keep_bounded_schedules_and_kernels():
    from tgfx.lowering.schedule import _templates
    with Context(**BOUNDS):
        kernels, programs = held_elsewhere()
        for n in range(1, 61):
            x = on_cpu(np.arange(n, dtype=np.float32))
            for _ in range(2):       # a template's second use encodes an eager program
                np.testing.assert_allclose((tnp.exp(x / n) * 2).numpy(), np.exp(np.arange(n) / n) * 2, rtol=1e-6)
        gc.collect()
        assert len(_templates) <= BOUNDS["TGFX_SCHEDULE_CACHE_SIZE"]
        assert programs_alive() <= programs + BOUNDS["TGFX_SCHEDULE_CACHE_SIZE"]
        # the kernel LRU, plus those of the templates' programs (each holds its one kernel)
        assert code_stats().kernels <= kernels + BOUNDS["TGFX_KERNEL_CACHE_SIZE"] + BOUNDS["TGFX_SCHEDULE_CACHE_SIZE"]


def test_memory_stops_growing_while_retracing():
    """Three rounds of 50 new signatures: after the first (which fills the caches), a round adds at most 3 MiB, 60 KiB
    per retrace, less than a kernel's machine code, IR, schedule and encoded program hold when nothing is released
    (before owners and bounds, a round grew by 4.3-4.7 MiB; with them by 0.4 MiB). Compiles go to a compile worker,
    as they do once a process has compiled TGFX_IN_PROCESS_COMPILES kernels (LLVM keeps memory after each optimiser
    run in the process that runs it)."""
    grew = []
    with Context(**BOUNDS, TGFX_IN_PROCESS_COMPILES=0, TGFX_COMPILE_WORKERS=1):
        for r in range(3):
            gc.collect()
            before = rss_bytes()
            g = tg.jit(lambda x: x * 5 - 2)
            for n in range(1000 + 50 * r, 1050 + 50 * r):
                x = np.ones(n, np.float32)
                np.testing.assert_allclose(g(on_cpu(x)).numpy(), x * 5 - 2)
            del g
            gc.collect()
            grew.append(rss_bytes() - before)
    assert max(grew[1:]) < 3 << 20, f"memory grew by {[g >> 10 for g in grew]} KiB per round"


def kernel_level_nodes() -> int:
    """Live nodes that only the lowering of a kernel makes (its loops, their indices, reduces and accumulators)."""
    from tgfx.ir.ops import Ops
    from tgfx.ir.uop import UOp
    only_lowering = {Ops.INDEX, Ops.RANGE, Ops.REDUCE, Ops.END, Ops.LOAD}
    return sum(1 for o in gc.get_objects() if type(o) is UOp and o.op in only_lowering)


def a_new_program(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:   # a matmul, a reduce, a transcendental: a few kernels
    h = tnp.tanh(a @ b + 0.25)
    return (h - h.mean(axis=0)) * tnp.exp(-h.sum(axis=1, keepdims=True))


def test_a_first_call_keeps_no_kernel_graph_of_the_lowering_alive():
    # each compiled kernel keeps its tensor-level AST (a cache key); its loops, indices and loads are the lowering's
    # own and are garbage once the code is compiled. The interning table kept them alive: spectral's first call left
    # 20.5k nodes, 1,261 of them INDEXes; resnet's 37k, and 185k objects the collector walked in every full collection
    a, b = (np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in ((37, 29), (29, 41)))
    while gc.collect():                 # what the collector can free is freed
        pass
    before = kernel_level_nodes()
    g = tg.jit(a_new_program)
    g(on_cpu(a), on_cpu(b)).numpy()
    while gc.collect():
        pass
    assert kernel_level_nodes() <= before
    assert g(on_cpu(a), on_cpu(b)).shape == (37, 41)


def test_a_first_call_frees_its_kernel_graphs_without_the_cyclic_collector():
    # the lowering's graphs hold no cycle (a sink's cached order, a RANGE's own ranges, a REDUCE's own reduces held
    # the node itself): they are freed as the kernels are compiled, not by the collection after the trace, which
    # walked them all first (resnet: 185k objects, 36 ms), nor by the next full ones
    a, b = (np.random.default_rng(1).standard_normal(s).astype(np.float32) for s in ((23, 31), (31, 19)))
    while gc.collect():
        pass
    before = kernel_level_nodes()
    gc.disable()
    try:
        g = tg.jit(a_new_program)
        g(on_cpu(a), on_cpu(b)).numpy()
        assert kernel_level_nodes() <= before
    finally:
        gc.enable()


def kernel_asts() -> int:
    """Live kernel ASTs (tensor level: a SINK of STOREs into buffers by slot)."""
    from tgfx.ir.ops import Ops
    from tgfx.ir.uop import UOp
    return sum(1 for o in gc.get_objects() if type(o) is UOp and o.op is Ops.SINK and o.src and
               all(s.op is Ops.STORE and s.src[0].op is Ops.DEFINE_GLOBAL for s in o.src))


def test_kernels_nothing_runs_or_caches_are_freed_with_their_asts():
    # what is derived of a kernel's AST (the slots it stores, whether it updates a window in place) is kept on the AST,
    # not in caches keyed by it, which held 1,024 and 4,096 ASTs past the kernel cache's bound and their programs' life
    with Context(**BOUNDS):
        held = kernel_asts()
        g = tg.jit(lambda x: tnp.cumsum(x * 3, axis=0) + x.sum())
        for n in range(2, 42):
            x = np.arange(n, dtype=np.float32)
            np.testing.assert_allclose(g(on_cpu(x)).numpy(), np.cumsum(x * 3) + x.sum(), rtol=1e-5)
        del g
        forget_compiled()
        gc.collect()
        assert kernel_asts() <= held + 2 * BOUNDS["TGFX_SCHEDULE_CACHE_SIZE"], (held, kernel_asts())


def test_code_memory_is_released_when_nothing_holds_its_kernels():
    gc.collect()
    before = code_stats()
    with Context(TGFX_KERNEL_CACHE_SIZE=1, TGFX_SCHEDULE_CACHE_SIZE=1):
        for n in range(1, 70):          # 69 kernels: more than two code engines' worth
            np.testing.assert_allclose((on_cpu(np.ones(n, np.float32)) * 4 + 3).numpy(), np.full(n, 7.0))
    forget_compiled()
    gc.collect()
    after = code_stats()
    # no kernel held: at most the engine that new objects go into stays, besides what was held before
    assert after.kernels <= before.kernels and after.owners <= before.owners + 1, (before, after)


def test_an_evicted_kernel_that_a_live_program_runs_keeps_its_code():
    x = np.random.default_rng(0).standard_normal(37).astype(np.float32)
    with Context(TGFX_KERNEL_CACHE_SIZE=1, TGFX_SCHEDULE_CACHE_SIZE=1):
        g = tg.jit(lambda a: tnp.sin(a) * 7.5 + a)
        np.testing.assert_allclose(g(on_cpu(x)).numpy(), np.sin(x) * 7.5 + x, rtol=1e-5, atol=1e-6)
        (prog, _), = g._cache.values()
        codes = {id(p.keepalive) for seg in prog.segments for p in seg.cb.programs}
        for n in range(2, 12):          # other kernels push g's out of the kernel cache
            (on_cpu(np.ones(n, np.float32)) * 2 - 1).numpy()
        forget_compiled()
        gc.collect()
        assert all(p.keepalive is not None and id(p.keepalive) in codes for seg in prog.segments
                   for p in seg.cb.programs)
        for _ in range(3):               # the program still runs the code it encoded
            np.testing.assert_allclose(g(on_cpu(x)).numpy(), np.sin(x) * 7.5 + x, rtol=1e-5, atol=1e-6)


def test_a_kernel_lowered_again_while_its_code_is_alive_shares_that_code():
    from tgfx.lowering import lower_kernel
    from tgfx.lowering.schedule import schedule
    ast = schedule([(on_cpu(np.ones(13, np.float32)) * 9).uop])[0].src[0].src[0]
    first = lower_kernel(ast)
    forget_compiled()
    again = lower_kernel(ast)
    assert again is not first and again.code is first.code


def test_past_its_in_process_budget_this_process_compiles_in_workers_which_are_replaced(monkeypatch):
    if not compile_mod.compile_workers():
        pytest.skip("no compile worker on a one-core machine")
    ir = "define void @k(ptr %b, ptr %v, i64 %c) {\n  ret void\n}\n"
    comp = compile_mod.compiler()
    monkeypatch.setattr(compile_mod, "WORKER_COMPILES", 2)
    with Context(TGFX_IN_PROCESS_COMPILES=comp.compiled, TGFX_COMPILE_WORKERS=1):
        here = comp.compiled
        pids = []
        for _ in range(5):
            assert compile_mod.compile_llvm(ir)[:4] == b"\x7fELF"
            pids.append({w.proc.pid for w in compile_mod.compile_workers()})
        assert comp.compiled == here                    # none compiled in this process
        assert len(set().union(*pids)) >= 3             # workers retire after WORKER_COMPILES and new ones start


THREADS = textwrap.dedent("""
    import threading
    import numpy as np
    import tgfx as tg, tgfx.numpy as tnp

    barrier = threading.Barrier(4)
    errors = []

    def first_call(k):
        n = 5 + 7 * k
        x = np.arange(n, dtype=np.float32) / n
        try:
            barrier.wait()
            eager = (tnp.tanh(tg.asarray(x)) * (k + 1)).numpy()
            jitted = tg.jit(lambda a: tnp.exp(a) - k)(tg.asarray(x)).numpy()
            if not (np.allclose(eager, np.tanh(x) * (k + 1), rtol=1e-5) and np.allclose(jitted, np.exp(x) - k,
                                                                                     rtol=1e-5)):
                errors.append(f"thread {k}: wrong values")
        except Exception as e:
            errors.append(f"thread {k}: {e!r}")

    threads = [threading.Thread(target=first_call, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("ok" if not errors else errors)
""")


def test_threads_making_their_first_calls_at_once_get_their_own_right_answers(tmp_path):
    for run in range(4):    # fresh processes, fresh kernel caches: every first call compiles and loads code
        env = {**os.environ, "TGFX_CACHE_DIR": str(tmp_path / str(run))}
        out = subprocess.run([sys.executable, "-c", THREADS], capture_output=True, text=True, timeout=300, cwd=ROOT,
                             env=env)
        assert out.returncode == 0, f"run {run} exited with {out.returncode}: {out.stderr[-3000:]}"
        assert out.stdout.strip() == "ok", out.stdout
