"""A jitted function's programs are bounded by the bytes they hold (TGFX_JIT_CACHE_MB), and those of every jitted
function together (TGFX_JIT_TOTAL_MB), not only by their count: each holds its arenas and its recent and pooled
outputs, so an MLP step called with 200 batch sizes kept 200 programs (+735 MB of RSS; +331 MB with the bounds, the
rest the kernel cache's 1,024 kernels). An evicted program is freed (its fast-path entry too), a call of its
signature traces again and computes the right values, and one evicted while its submission is still queued computes
that submission's right values."""
from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
from helpers import as_in_a_fresh_process, count_calls

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import config
from tgfx.config import Context
from tgfx.lowering.program import Program
from tgfx.transforms.jit_cache import jitted

COLS = 1024


def run(g: tg.jit, n: int) -> None:
    x = np.linspace(-1, 1, n * COLS, dtype=np.float32).reshape(n, COLS)
    np.testing.assert_allclose(g(tg.asarray(x)).numpy(), x * 3 + 1, rtol=1e-6)


def programs_of(g: tg.jit) -> list[Program]:
    return [p for p, _ in g._cache.values()]


def test_a_jitted_functions_programs_over_many_large_shapes_hold_at_most_its_byte_budget() -> None:
    budget = 8 << 20
    with Context(TGFX_JIT_CACHE_MB=budget / 2**20, TGFX_JIT_CACHE_SIZE=256):
        g = tg.jit(lambda x: x * 3 + 1)
        held = []
        for n in range(256, 296):   # 40 signatures, each output 1-1.2 MiB: 3-3.5 MiB of kept outputs a program
            run(g, n)
            held.append(len(g._cache))
            progs = programs_of(g)
            assert sum(p.nbytes for p in progs) <= budget or len(progs) == 1
            del progs
        assert g.trace_count == 40
        assert max(held[5:]) <= 2 and min(held[5:]) >= 1, held   # flat after the first few, not one per shape
        evicted = weakref.ref(programs_of(g)[0])
        for n in range(300, 303):
            run(g, n)
        gc.collect()
        assert evicted() is None   # freed: neither the fast path's entries nor `jitted` keep it
        assert all(v[0] in programs_of(g) for v in g._fast.values())
        run(g, 256)   # an evicted signature traces again, and computes its values
        assert g.trace_count == 44
    with Context(TGFX_JIT_CACHE_MB=0, TGFX_JIT_CACHE_SIZE=3):   # 0: bound by their count only
        g = tg.jit(lambda x: x * 3 + 1)
        for n in range(1, 21):
            run(g, n)
        assert len(g._cache) == 3


def test_all_jitted_functions_programs_hold_at_most_the_total_budget_the_least_recently_run_out_first() -> None:
    budget = 12 << 20
    with Context(TGFX_JIT_TOTAL_MB=budget / 2**20, TGFX_JIT_CACHE_MB=0):
        fs = [tg.jit(lambda x: x * 3 + 1) for _ in range(6)]
        hot = fs[0]
        run(hot, 256)
        totals = []
        for i, f in enumerate(fs[1:]):
            for n in range(260, 264):
                run(f, n + 8 * i)
                run(hot, 256)   # run between the others: it stays the most recently run
                totals.append(sum(p.nbytes for g in fs for p in programs_of(g)))
        assert max(totals) <= budget, [t >> 20 for t in totals]
        assert hot.trace_count == 1 and len(hot._cache) == 1
        assert sum(len(f._cache) for f in fs[1:-1]) < 4 * 4   # the earlier functions lost programs to the later
        assert jitted.nbytes <= budget
        old = fs[1]
        traced = old.trace_count
        run(old, 260)   # its first signature, evicted: traced again
        assert old.trace_count == traced + 1
    del fs, hot, old
    gc.collect()


def test_a_program_evicted_while_its_submission_waits_in_the_queue_computes_that_submissions_values() -> None:
    """The first call's program is evicted (every new program evicts the one before) while its submission waits
    behind a host callback that blocks until the evictions and new allocations are done: its arenas and outputs are
    the submission's until its fence passes, never handed to the calls that follow."""
    release = threading.Event()

    def block(x: np.ndarray) -> np.ndarray:
        assert release.wait(60), "the test never released the callback"
        return x

    def slow(x: tg.Tensor) -> tg.Tensor:
        y = tg.pure_callback(block, tg.ShapeDtypeStruct(x.shape, x.dtype), x)
        return tnp.tanh(y * 0.5) @ x.T + 1   # an intermediate in the program's arena, then an output

    def fast(x: tg.Tensor) -> tg.Tensor:
        return x * 3 + 1

    # (nothing runs inline on this thread, which the callback would block)
    with Context(TGFX_JIT_TOTAL_MB=1e-6, TGFX_JIT_CACHE_MB=0, TGFX_INLINE_BYTES=0):
        s, g = tg.jit(slow), tg.jit(fast)
        x = np.linspace(-1, 1, 64 * 256, dtype=np.float32).reshape(64, 256)
        first = s(tg.asarray(x))   # queued, blocked in its callback
        prog = weakref.ref(programs_of(s)[0])
        others = []
        for n in range(64, 72):   # new programs, each evicting the one before; their outputs allocated and written
            xs = np.full((n, 256), 7.0, np.float32)
            others.append((g(tg.asarray(xs)), xs * 3 + 1))
        assert len(s._cache) == 0
        release.set()
        gc.collect()
        np.testing.assert_allclose(first.numpy(), np.tanh(x * 0.5) @ x.T + 1, rtol=1e-4, atol=1e-4)
        for got, want in others:
            np.testing.assert_allclose(got.numpy(), want)
        del first
        gc.collect()
        assert prog() is None


def test_a_step_donating_its_parameters_weighs_none_of_them_and_two_batch_sizes_do_not_evict_each_other() -> None:
    """An optimizer step writes its results into its donated parameters: its program holds none of their memory
    (it weighed twice the parameters, pools it never fills, so under a budget below that two batch sizes called in
    turn evicted each other and traced again on every call)."""
    n = 1 << 20   # 4 MiB of parameters
    step = tg.jit(lambda p, x: p - 0.5 * (x.sum() / x.shape[0]), donate_argnums=0)
    p, want = tg.asarray(np.zeros(n, np.float32)), 0.0
    with Context(TGFX_JIT_CACHE_MB=2, TGFX_JIT_TOTAL_MB=2):
        for k in range(6):
            b = 3 + k % 2
            p = step(p, tg.asarray(np.ones((b, 8), np.float32)))
            want -= 0.5 * 8
        np.testing.assert_allclose(p.numpy()[:4], want)
        assert all(prog.nbytes < n for prog in programs_of(step))
        assert step.trace_count == 2


def test_threads_calling_one_function_over_shapes_while_every_trace_evicts_and_another_clears_get_right_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list = []
    stop = threading.Event()
    f = tg.jit(lambda x, s: tnp.tanh(x * s).sum(axis=-1) + 1)

    def calls(i: int) -> None:
        try:
            for k in range(24):
                n = 1 + (k + i) % 5
                x = np.linspace(-1, 1, n * 64, dtype=np.float32).reshape(n, 64)
                np.testing.assert_allclose(f(tg.asarray(x), 0.5).numpy(), np.tanh(x * 0.5).sum(-1) + 1, rtol=1e-5,
                                           atol=1e-5)
        except Exception as e:   # (reported by the main thread)
            errors.append(e)

    def clears() -> None:
        while not stop.is_set():
            f.clear_cache()
            stop.wait(0.001)

    # every new program evicts every other, in every thread: a `Context` sets a flag for its own thread only, so the
    # callers' inserts evicted nothing, and the programs traced after the clearer's last clear stayed (up to 5 of
    # them: failed 5 runs in 16)
    monkeypatch.setattr(config.JIT_TOTAL_MB, "value", 1e-6)
    threads = [threading.Thread(target=calls, args=(i,)) for i in range(3)]
    clearer = threading.Thread(target=clears)
    for t in [*threads, clearer]:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    clearer.join()
    assert not errors, errors[0]
    gc.collect()
    assert len(f._cache) <= 1 and all(v[0] in programs_of(f) for v in f._fast.values())


def test_a_replay_refreshes_no_cache_and_the_least_recently_run_is_evicted_all_the_same() -> None:
    """A fast-path replay reads its function's fast entries with one lookup and refreshes neither its function's cache
    nor `jitted`: running the program stamps it (`Program.last_run`), and an insert that must evict orders the
    entries by those stamps. Its Python and C calls, from the call to its result's wait, stay at 44 (51 before: four
    for the two caches' refreshes, three more for the fast entries' `LRU.get`); the program run least recently is
    still the one evicted, however the caches were ordered when the programs were inserted."""
    f, g = tg.jit(lambda x: x + 1), tg.jit(lambda x: x * 2)
    # (on the CPU whatever the default device: the bound counts the CPU queue's submission)
    xs = [tg.Tensor(np.full(n, 1.0, np.float32), device="CPU") for n in (4, 5, 6)]
    for x in xs:   # three signatures of f, one of g: the caches hold several entries each
        f(x).block_until_ready()
    g(xs[0]).block_until_ready()
    f(xs[0]).block_until_ready()
    least = None
    with as_in_a_fresh_process():   # (another test's committed Tensors, alive in this worker, add a commit, 9 calls)
        for _ in range(5):   # (the least of a few: a busy device's queue, not run inline, is another path)
            calls, out = count_calls(lambda: f(xs[0]).block_until_ready(), c_calls=True)
            np.testing.assert_array_equal(out.numpy(), np.full(4, 2.0, np.float32))
            least = calls if least is None else min(least, calls)
    assert least <= 45, least   # (the last: `setprofile` itself)
    with Context(TGFX_JIT_CACHE_SIZE=3):
        for x in (xs[2], xs[0], xs[1]):   # run order: n=6, 4, 5; inserted: 4, 5, 6
            f(x).block_until_ready()
        f(tg.asarray(np.ones(7, np.float32))).block_until_ready()   # a fourth signature evicts one: n=6's
        assert sorted(p.inputs[0].arg[2] for p in programs_of(f)) == [4, 5, 7]
        traced = f.trace_count
        for x in xs[:2]:
            f(x).block_until_ready()
        assert f.trace_count == traced


def test_an_lru_with_recency_evicts_by_the_values_stamps_and_keeps_the_newest() -> None:
    """`LRU(recency=...)`: the entries' order when one must go is their values' stamps, least recent first (equal
    stamps in insertion order), the entry just inserted last whatever its stamp; within the bound nothing is
    reordered."""
    from tgfx.lowering.lru import LRU
    stamps = {}
    lru: LRU[str, str] = LRU(lambda: 3, recency=lambda v: stamps[v])
    for k, s in (("a", 5), ("b", 1), ("c", 3)):
        stamps[k] = s
        lru[k] = k
    assert list(lru) == ["a", "b", "c"]
    stamps["d"] = 0
    lru["d"] = "d"   # evicts b (stamp 1); d stays, though its stamp is the least
    assert list(lru) == ["c", "a", "d"]
    stamps["c"], stamps["e"] = 9, 2
    lru["e"] = "e"   # evicts d (0), then the order a (5), c (9), e
    assert list(lru) == ["a", "c", "e"]
    budget: LRU[str, str] = LRU(lambda: 10, lambda: 10, lambda v: 4, recency=lambda v: stamps[v])
    for k in ("a", "c", "e"):
        budget[k] = k
    assert list(budget) == ["c", "e"] and budget.nbytes == 8   # a (5) went, not c (9)


def test_a_dead_programs_id_taken_by_a_new_program_drops_only_the_dead_entry() -> None:
    # a program collected leaves its id in `_dead`, to drop its entry before the next insert; CPython allocates the
    # next program at the same address often, and another thread could insert that one under the id first: the id's
    # pop then dropped the live program's entry, which no eviction would ever forget from its function's cache. Now
    # only an entry holding the dead reference is dropped
    from tgfx.transforms import jit_cache

    class Stand:   # (a program's stand-in: weakly referable)
        pass
    f = tg.jit(lambda x: x + 1)
    gone = Stand()
    dead = weakref.ref(gone)
    del gone
    gc.collect()
    assert dead() is None
    live = Stand()
    pid = 1 << 60   # (an id no real program has)
    jitted[pid] = (weakref.ref(f), "key", weakref.ref(live), 0)   # the new program, inserted under the dead one's id
    jit_cache._dead.append((pid, dead))
    try:
        f(tg.asarray(np.ones(3, np.float32))).block_until_ready()   # a trace: `track` drops the dead ids first
        assert pid in jitted and jitted.peek(pid)[2]() is live
        jit_cache._dead.append((pid, jitted.peek(pid)[2]))   # (as if `live` itself had died: its entry goes)
        tg.jit(lambda x: x * 3)(tg.asarray(np.ones(3, np.float32))).block_until_ready()
        assert pid not in jitted
    finally:
        jitted.pop(pid)
