"""An eager op's results recycled (`Program._reuse`, for programs that run inline): a result nothing holds any more
comes back, node and memory, as the result of the call after next, so a repeated small op builds no output node and
leases no memory. Counted by the buffers' numbers (each new BUFFER node takes the next), never by time; and what may
still read a result's memory (a Tensor, a view of its memory, another device's queue, a placement mark) keeps it."""
from __future__ import annotations

import ctypes

import numpy as np
from helpers import run_threads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, buffers
from tgfx.lowering import _programs
from tgfx.lowering.eager import describe

X = np.linspace(-2.0, 2.0, 16, dtype=np.float32)


def _uid(t: tg.Tensor) -> int:
    """The number of the BUFFER a computed Tensor is (a view of)."""
    u = t.uop
    return (u.src[0] if u.op is Ops.RESHAPE else u).arg[0]


def _read(mem: object, n: int) -> np.ndarray:
    """`n` float32s of host memory `mem` (a Buffer), copied."""
    return np.ctypeslib.as_array((ctypes.c_float * n).from_address(mem.ptr)).copy()


def test_a_dropped_result_comes_back_two_calls_later() -> None:
    """`exp(x)` and `sum(x)` (a reshape of its buffer) in a loop that drops each result: two buffers, taken in turn,
    every value right."""
    x = tg.asarray(X)
    for op, want in ((tnp.exp, np.exp(X)), (tnp.sum, np.sum(X))):
        uids = []
        for _ in range(6):
            r = op(x).block_until_ready()
            np.testing.assert_allclose(r.numpy(), want, rtol=1e-6)
            uids.append(_uid(r))
            del r
        assert len(set(uids[2:])) == 2 and uids[2:] == uids[2:4] * 2, uids


def test_a_held_result_keeps_its_buffer_and_its_value() -> None:
    """Results kept in a list, or a view of one's memory (`r[2:5]`, no copy: `range_view`), or its Buffer alone (as
    a copy to another device holds it until it ran): each keeps its memory, which no later call writes."""
    xs = [tg.asarray(X + k) for k in range(6)]
    kept = [tnp.exp(x).block_until_ready() for x in xs]
    assert len({_uid(r) for r in kept}) == 6
    for k, r in enumerate(kept):
        np.testing.assert_allclose(r.numpy(), np.exp(X + k), rtol=1e-6)
    y = tg.asarray(X)
    r = (y * 3.0).block_until_ready()
    view = r[2:5].realize()
    del r
    u = (y * 3.0).block_until_ready()
    mem = buffers[id(u.uop)]
    uid = _uid(u)
    del u
    for k in range(4):
        out = tg.asarray(X + k) * 3.0
        np.testing.assert_allclose(out.numpy(), (X + k) * 3.0, rtol=1e-6)
        assert _uid(out) != uid
        del out
    np.testing.assert_allclose(view.numpy(), X[2:5] * 3.0, rtol=1e-6)
    np.testing.assert_allclose(_read(mem, 16), X * 3.0, rtol=1e-6)


def test_a_recycled_eager_result_is_committed_only_by_its_own_operands() -> None:
    """A result of a committed operand comes back as the result of uncommitted ones: uncommitted then."""
    c = tg.device_put(X, "CPU:0")
    u = tg.asarray(X)
    r = (c * 2.0).block_until_ready()
    assert r.committed
    del r
    for _ in range(4):
        r = (u * 2.0).block_until_ready()
        assert not r.committed
        del r
    assert (c * 2.0).block_until_ready().committed


def test_only_a_program_run_inline_recycles() -> None:
    """A program larger than what runs inline (`TGFX_INLINE_BYTES`) keeps no results: its memory is not held twice
    over between calls."""
    small, big = tg.asarray(X), tg.asarray(np.ones(1 << 20, np.float32))
    for x, recycles in ((small, True), (big, False)):
        t = x * 2.5 + 1
        key = describe(UOp(Ops.SINK, None, (t.uop,))).key
        t.realize()
        prog = _programs.peek(key)()   # (held weakly: `tgfx.lowering._keep` owns it)
        assert (prog.recent is not None) is recycles and prog.inline is recycles


def test_threads_recycling_one_program() -> None:
    """Threads running one op on their own inputs, dropping most results and keeping some: every value right."""
    errors: list[str] = []

    def worker(t: int) -> None:
        x = tg.asarray(X + t)
        kept = []
        for k in range(200):
            r = x * 1.5 + 0.5
            if k % 7 == 0:
                kept.append(r)
            elif not np.allclose(r.numpy(), (X + t) * 1.5 + 0.5, rtol=1e-6):
                errors.append(f"thread {t} call {k}")
        errors.extend(f"thread {t} kept" for r in kept if not np.allclose(r.numpy(), (X + t) * 1.5 + 0.5, rtol=1e-6))
    assert run_threads(worker, 4, 1e-6)
    assert not errors, errors[:5]


def test_a_pytrees_leaves_of_one_shape_allocate_nothing_step_after_step() -> None:
    """`tree_map(lambda a, b: a + b, acc, grads)` over 20 leaves of one shape, each read, step after step: one program
    holds 20 results at once, and a slot of small outputs keeps that many idle allocations (`pool_depth`), so from the
    second step on no output memory is allocated (16 allocations a step when a slot kept two); every value right."""
    acc = {f"w{k}": tg.asarray(np.full((4, 4), k, np.float32), device="CPU") for k in range(20)}
    grads = {f"w{k}": tg.asarray(np.full((4, 4), 0.5, np.float32), device="CPU") for k in range(20)}
    for step in range(4):
        tg.counters.reset()
        out = tg.tree.tree_map(lambda a, b: a + b, acc, grads)
        for t in out.values():
            t.block_until_ready()
        if step >= 2:
            assert tg.counters.alloc_count == 0, (step, tg.counters.alloc_count)
        for k in range(20):
            np.testing.assert_array_equal(out[f"w{k}"].numpy(), np.full((4, 4), k + 0.5, np.float32))
        del out
    # small slots keep up to POOL_BYTES of idle outputs, at most POOL_MOST; a large one POOL_DEPTH
    from tgfx.lowering.program import POOL_DEPTH, pool_depth
    assert pool_depth(64) >= 20 and pool_depth(1 << 20) == POOL_DEPTH and pool_depth(0) >= POOL_DEPTH


def test_threads_holding_many_results_of_one_program() -> None:
    """Threads each holding 24 results of one small program at once, then dropping them all (leases coming back to
    one free list from every thread): every value right, and the free list never longer than its depth."""
    from tgfx.lowering.program import _recycling
    errors: list[str] = []

    def worker(t: int) -> None:
        x = tg.asarray(X + t, device="CPU")
        for k in range(30):
            held = [x * 1.25 + float(j) for j in range(24)]
            for j, r in enumerate(held):
                if not np.allclose(r.numpy(), (X + t) * 1.25 + j, rtol=1e-6):
                    errors.append(f"thread {t} round {k} result {j}")
            del held
    assert run_threads(worker, 4, 1e-6)
    assert not errors, errors[:5]
    for prog in list(_recycling):
        for spec in prog.out_specs:
            if spec is not None and spec[0] != "alias" and spec[5] is not None:
                assert len(spec[5]) <= spec[5].maxlen
