"""The eager programs a process keeps are bounded by the bytes they hold (TGFX_PROGRAM_CACHE_MB), not only by their
count: each holds its arenas and up to `POOL_DEPTH` idle outputs per output, so a run over many shapes of large
arrays kept ~1 MiB per shape of (n, 256) floats until 1,024 programs (500 shapes of (n, 1024): +560 MB of RSS). A
program evicted while a submission of it is still queued is freed, and its submission computes the right values."""
from __future__ import annotations

import gc
import weakref

import numpy as np

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.config import Context
from tgfx.lowering import forget_compiled
from tgfx.lowering.program import POOL_DEPTH, Program


def programs_alive() -> list[Program]:
    return [o for o in gc.get_objects() if type(o) is Program]


def test_eager_programs_over_many_large_shapes_hold_at_most_the_byte_budget() -> None:
    forget_compiled()
    gc.collect()
    before = {id(p) for p in programs_alive()}
    budget = 4 << 20
    with Context(TGFX_PROGRAM_CACHE_MB=budget / 2**20, TGFX_SCHEDULE_CACHE_SIZE=1024):
        for n in range(256, 296):   # 40 shapes, each output 1-1.2 MiB: 2-2.3 MiB of pooled outputs a program
            x = np.linspace(-1, 1, n * 1024, dtype=np.float32).reshape(n, 1024)
            for _ in range(2):   # (the second run takes the first's output from the pool)
                got = (tnp.exp(tg.asarray(x) * 2) - 1).numpy()
                np.testing.assert_allclose(got, np.exp(x * 2) - 1, rtol=1e-5, atol=1e-6)
        gc.collect()
        new = [p for p in programs_alive() if id(p) not in before]
        # what each holds is at least its pooled outputs; together no more than the budget (the newest always stays)
        assert all(p.nbytes >= POOL_DEPTH * n * 1024 * 4 for p in new)
        assert 1 <= len(new) <= 2, f"{len(new)} programs of {[p.nbytes >> 10 for p in new]} KiB alive"
        assert sum(p.nbytes for p in new) <= budget
        del new
    with Context(TGFX_PROGRAM_CACHE_MB=0, TGFX_SCHEDULE_CACHE_SIZE=8):   # 0: bound by their count only
        for n in range(1, 21):
            x = np.arange(n, dtype=np.float32)
            np.testing.assert_allclose((tg.asarray(x) * 3).numpy(), x * 3)
        gc.collect()
        assert len([p for p in programs_alive() if id(p) not in before]) <= 8


def test_a_program_evicted_while_its_submission_is_queued_is_freed_and_its_result_is_right() -> None:
    forget_compiled()
    n = 1 << 20   # large enough not to run inline on the caller
    a = np.linspace(0, 1, 256 * 256, dtype=np.float32).reshape(256, 256)
    with Context(TGFX_PROGRAM_CACHE_MB=1e-6):   # every new program evicts the one before
        slow = tg.asarray(a)
        for _ in range(8):   # work queued ahead, so that what follows waits in the queue
            slow = tnp.tanh(slow @ slow)
        slow.realize()
        x = np.linspace(-1, 1, n, dtype=np.float32)
        first = (tnp.sin(tg.asarray(x)) * 2).realize()   # submitted behind the matmuls, not waited for
        from tgfx.lowering import _kept
        held = weakref.ref(_kept.values()[-1])
        second = (tnp.cos(tg.asarray(x)) + 1).realize()
        gc.collect()
        assert held() is None   # evicted and freed while its submission may still be queued
        np.testing.assert_allclose(first.numpy(), np.sin(x) * 2, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(second.numpy(), np.cos(x) + 1, rtol=1e-5, atol=1e-6)
        expect = a
        for _ in range(8):
            expect = np.tanh(expect @ expect)
        np.testing.assert_allclose(slow.numpy(), expect, rtol=1e-4, atol=1e-5)
