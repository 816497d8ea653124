"""A signal's handler (Ctrl-C's KeyboardInterrupt) runs between any two bytecodes of the main thread, finalisers
included: whatever it cuts short must leave the runtime computing right values, and nothing for another thread or a
later call to wait on for ever. Each test raises the interrupt at the one point that broke, deterministically."""
from __future__ import annotations

import sys
import threading
import weakref
from typing import Any

import numpy as np
import pytest

import tgfx as tg
from tests.test_thread_races import run_each
from tgfx import _realize
from tgfx.dtypes import dtypes
from tgfx.ir import uop as uop_module
from tgfx.ir.uop import UOp
from tgfx.lowering.execute import buffer_memory, memory_of
from tgfx.lowering.layout import new_buffer


def _interrupt_at_call_of(code: Any) -> Any:
    """A trace function raising KeyboardInterrupt as `code` starts, once: where a signal's handler runs when the signal
    arrived just before (a function's first instruction checks for pending signals)."""
    def trace(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            sys.settrace(None)
            raise KeyboardInterrupt
    return trace


def test_a_buffer_node_made_where_an_interrupted_finaliser_left_memory_gets_memory_of_its_own(monkeypatch) -> None:
    # a KeyboardInterrupt in UOp.__del__ (printed and dropped: 'Exception ignored in UOp.__del__') skipped dropping the
    # dead BUFFER node's memory from the runtime's map, filed by the node's id; the next BUFFER node made at that
    # address was given it: Ctrl-C in an eager training loop, then tg.asarray of a 16 KiB array raised 'copyin of
    # 16384 B does not fit in <Buffer CPU:0 4 B>', and a kernel writing a larger output would have run past its end
    small = new_buffer("CPU", 4, dtypes.float32)
    buffer_memory(small)
    dead, gone = id(small), weakref.ref(small)
    ignored: list[str] = []   # (what Python's hook prints; pytest's would keep the finaliser's frame, and the node)
    monkeypatch.setattr(sys, "unraisablehook", lambda u: ignored.append(type(u.exc_value).__name__))
    sys.settrace(_interrupt_at_call_of(UOp.__del__.__code__))
    try:
        del small
    finally:
        sys.settrace(None)
    assert gone() is None and ignored == ["KeyboardInterrupt"]
    for key in [k for k, ref in uop_module._cache.items() if ref() is None]:   # (the entry its finaliser left)
        del uop_module._cache[key]
    for _ in range(1000):   # (CPython gives the next object of its size the block just freed: the first, as a rule)
        big = new_buffer("CPU", 1 << 12, dtypes.float32)
        if id(big) == dead:
            break
    else:
        raise AssertionError("no new node was made at the dead node's address")
    assert memory_of(big) is None
    assert buffer_memory(big).nbytes == 4 << 12
    x = tg.Tensor(np.arange(1 << 12, dtype=np.float32), device="CPU")
    np.testing.assert_array_equal(np.asarray(x * 2), np.arange(1 << 12, dtype=np.float32) * 2)


class _InterruptedAfterFiling(dict):
    """`_realize._computing` whose first `setdefault` files the claim and then raises KeyboardInterrupt: a signal
    handled as that call returns (Python runs pending handlers after a call)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = True

    def setdefault(self, key: Any, default: Any = None) -> Any:
        got = super().setdefault(key, default)
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt
        return got


def test_a_read_interrupted_as_it_claims_a_value_leaves_no_claim_for_another_thread_to_wait_on(monkeypatch) -> None:
    # while other threads run, a read files a claim on the graph it computes (held locked until its result is in),
    # and other threads reading the same value wait for it. The claim was taken before the try that drops it: Ctrl-C
    # right after left it filed and locked, and the next thread to read that value waited for ever
    shared = tg.Tensor(np.arange(8, dtype=np.float32), device="CPU") * 3 + 1
    computing = _InterruptedAfterFiling()
    monkeypatch.setattr(_realize, "_computing", computing)
    go = threading.Event()

    def other() -> Any:   # (a thread alive while the main one reads: reads take claims only then)
        assert go.wait(60)
        return np.asarray(shared)
    runner = threading.Thread(target=lambda: got.append(run_each(other, timeout=30)), daemon=True)
    got: list[Any] = []
    runner.start()
    with pytest.raises(KeyboardInterrupt):
        np.asarray(shared)
    assert not computing   # nothing left filed
    go.set()
    runner.join(60)
    assert got, "the other thread's read hung"
    np.testing.assert_array_equal(got[0][0], np.arange(8, dtype=np.float32) * 3 + 1)
