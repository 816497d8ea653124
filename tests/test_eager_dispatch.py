"""Eager dispatch: what a repeated eager op costs, by counts (walks, abstractions, schedules, compiles), and the
description that finds its program (`tgfx/lowering/eager.py`): equal exactly where the abstract graphs are."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tgfx as tg
import tgfx._realize
import tgfx.lowering
import tgfx.lowering.schedule
import tgfx.numpy as tnp
from tgfx import config
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher
from tgfx.ir.spec import spec
from tgfx.ir.uop import UOp
from tgfx.lowering import eager
from tgfx.lowering.eager import abstract_graph, describe

X = np.arange(16, dtype=np.float32)
A = (np.arange(256, dtype=np.float32).reshape(16, 16) % 7) / 7
M = np.arange(64, dtype=np.float32)

# (name, op on (x, a, m), numpy's answer, walks (`describe`) per realise)
OPS: list[tuple[str, Callable, Callable, int]] = [
    ("x + 1", lambda x, a, m: x + 1, lambda: X + 1, 0),   # (its signature instead: `op_signature`)
    ("sum(x * 2 + 1)", lambda x, a, m: tnp.sum(x * 2.0 + 1), lambda: np.sum(X * 2 + 1), 0),   # (a chain of ops)
    ("a @ a", lambda x, a, m: a @ a, lambda: A @ A, 0),
    ("m[8:40].reshape(4, 8) * 1.0", lambda x, a, m: m[8:40].reshape(4, 8) * 1.0, lambda: M[8:40].reshape(4, 8), 1),
]


@pytest.mark.parametrize("name,op,want,walks", OPS, ids=[o[0] for o in OPS])
def test_a_repeated_eager_op_walks_its_graph_once_and_builds_nothing(monkeypatch: pytest.MonkeyPatch, name: str,
                                                                     op: Callable, want: Callable, walks: int) -> None:
    """Realised again, an eager op's graph is walked once (`describe`: no other toposort of it, no content hash),
    its program found by that description in one lookup, or not walked at all where it is one op over buffers and
    constants (found by its signature): no template lookup, no abstract graph, no rewrite rule tried on any node, no
    schedule, no compile, no allocation (the output's memory comes back from the result before)."""
    x, a, m = tg.asarray(X), tg.asarray(A), tg.asarray(M)
    np.testing.assert_allclose(op(x, a, m).numpy(), want(), rtol=1e-6)   # (compiled here, once)
    kernels = tg.counters.kernel_count
    op(x, a, m).realize()
    kernels = tg.counters.kernel_count - kernels
    calls = {"describe": 0, "toposort": 0, "abstract": 0, "key": 0, "template": 0, "program": 0, "rewrite": 0}

    def counting(name: str, fn: Callable) -> Callable:
        def spy(*args, **kwargs):   # noqa: ANN002, ANN003, ANN202
            calls[name] += 1
            return fn(*args, **kwargs)
        return spy
    _count_describes(monkeypatch, counting("describe", eager.describe))
    monkeypatch.setattr(UOp, "_toposort", counting("toposort", UOp._toposort))
    monkeypatch.setattr(eager, "abstract_graph", counting("abstract", eager.abstract_graph))
    key = UOp.__dict__["key"]
    monkeypatch.setattr(key, "func", counting("key", key.func))
    monkeypatch.setattr(tgfx.lowering, "graph_template", counting("template", tgfx.lowering.graph_template))
    monkeypatch.setattr(tgfx.lowering, "eager_program", counting("program", tgfx.lowering.eager_program))
    rewrite = PatternMatcher.rewrite

    def counting_rewrites(pm: PatternMatcher, u: UOp, ctx: object = None) -> UOp | None:
        calls["rewrite"] += pm is not spec   # (SPEC=1 checks each new node with the spec's matcher: not a pass)
        return rewrite(pm, u, ctx)
    monkeypatch.setattr(PatternMatcher, "rewrite", counting_rewrites)
    tg.counters.reset()
    for _ in range(5):
        op(x, a, m).realize()
    assert calls == {"describe": 5 * walks, "toposort": 0, "abstract": 0, "key": 0, "template": 0, "program": 0,
                     "rewrite": 0}, calls
    assert (tg.counters.schedule_count, tg.counters.compile_count, tg.counters.alloc_count) == (0, 0, 0)
    assert tg.counters.kernel_count == 5 * kernels
    np.testing.assert_allclose(op(x, a, m).numpy(), want(), rtol=1e-6)


def test_a_program_is_found_for_the_mode_it_was_lowered_in() -> None:
    """The description names the kernel-option mode and the target: another mode (NOOPT, subnormals kept) finds
    another program, and back in the first, the first one again (compiled once). On the CPU, whose flag that is."""
    x = tg.asarray(np.full(8, 1e-30, np.float32), device="CPU")
    want = {1: 0.0, 0: np.float32(1e-30) * np.float32(1e-10)}   # (a float32 subnormal, flushed or not)
    compiles = []
    for _ in range(2):
        for flush in (1, 0):
            with config.Context(TGFX_FLUSH_DENORMALS=flush):
                assert (x * 1e-10).numpy()[0] == want[flush]
        with config.Context(NOOPT=1):
            assert (x * 1e-10).numpy()[0] == 0.0
        compiles.append(tg.counters.compile_count)
    assert compiles[1] == compiles[0]


def _count_describes(monkeypatch: pytest.MonkeyPatch, spy: Callable) -> None:
    for module in (eager, tgfx.lowering, tgfx._realize):
        monkeypatch.setattr(module, "describe", spy)


def test_siblings_in_the_graph_cost_no_second_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lazy Tensor still held that the realised graph computes (an optimiser's moment) is realised with it; the
    graph with it as one more root is the same walk, so it is not walked again. A view of one is not a node of the
    graph: then the graph of all three roots is walked once more."""
    x = tg.asarray(X)
    walks = []
    _count_describes(monkeypatch, lambda sink, *a: walks.append(len(sink.src)) or describe(sink, *a))
    for _ in range(3):
        m = x * 2.0
        y = m + 1.0
        y.realize()
        assert walks == [1] and m.uop.op is Ops.BUFFER, walks
        np.testing.assert_allclose(m.numpy() + 1, y.numpy())
        walks.clear()
        m = x * 3.0
        v = m.reshape(4, 4)
        y = m + 1.0
        y.realize()
        assert walks == [1, 3] and v.uop.op in (Ops.BUFFER, Ops.RESHAPE) and m.uop.op is Ops.BUFFER, walks
        np.testing.assert_allclose(v.numpy().reshape(-1), X * 3)
        walks.clear()


def _graph(t: tg.Tensor) -> UOp:
    return UOp(Ops.SINK, None, (t.uop,))


def test_describe_names_the_inputs_the_abstract_graph_reads() -> None:
    """The description's inputs are the abstract graph's placeholders in order: buffers, then each use of a lifted
    constant an argument of its own (two uses of 2.5: two), a dynamic view's start whatever its value."""
    x, y = tg.asarray(X), tg.asarray(X * 3)
    i = tg.asarray(np.int32(5))
    for t in (x * 2.5 + y * 2.5, x + x, (x + 1) * 0, tnp.where(x > 3.5, x, y) - 7.0,
              tg.lax.dynamic_slice(x, (i,), (4,)), x[3:9] * 4.0, tnp.full((3,), 2.5) + 0.5):
        d = describe(_graph(t))
        inputs, abstract = abstract_graph(d.nodes, d.device)
        assert inputs == d.inputs
        assert sorted(-1 - u.arg[0] for u in abstract.toposort() if u.op is Ops.BUFFER and u.arg[0] < 0) == \
            list(range(len(inputs)))
    assert describe(_graph(x * 2.5 + y * 2.5)).inputs[1::2] != describe(_graph(x * 2.5 + y * 2.5)).inputs[:1]
    assert len(describe(_graph(x * 2.5 + y * 2.5)).inputs) == 4


def test_descriptions_are_equal_exactly_where_the_graphs_differ_only_in_buffers_and_lifted_values() -> None:
    x, y, z = tg.asarray(X), tg.asarray(X + 1), tg.asarray(X + 2)
    w = tg.asarray(np.arange(8, dtype=np.float32))
    n = tg.asarray(np.arange(16, dtype=np.int32))

    def key(t: tg.Tensor) -> tuple:
        return describe(_graph(t)).key
    assert key(x * 2.5 + y) == key(z * 7.0 + x)              # other buffers, another value
    assert key(x[2:10] * 3.0) == key(x[5:13] * 4.0) != key(w * 3.0)   # (a shrink's bounds are the graph's)
    assert key(n * 3) == key(n * 7) != key(n * 1)             # 0 and 1 stay literals: folding needs them
    assert key(x * 2.0) != key(x * 1.0) != key(x * 0.0) != key(x * -0.0)
    assert key(x + x) != key(x + y)                           # a buffer read twice is not two buffers
    assert key(x * 2.5 + y * 2.5) == key(x * 2.5 + y * 3.5)   # (each use of a constant is an argument)
    assert key(x * 2.5 + x * 2.5) != key(x * 2.5 + x * 3.5)   # (one node, read twice)
    assert key(x + 1.5) != key(x - 1.5) and key(x + 1.5) != key(w + 1.5) != key(n + 3)
    assert key(tnp.sum(x * 2.0)) != key(tnp.max(x * 2.0)) != key(x * 2.0)
    a, b = tg.asarray(np.int32(3)), tg.asarray(np.int32(9))
    assert key(tg.lax.dynamic_slice(x, (a,), (4,))) == key(tg.lax.dynamic_slice(y, (b,), (4,)))


def test_a_graph_across_devices_lifts_no_constant() -> None:
    x = tg.device_put(tg.asarray(X), "CPU:0")
    y = tg.device_put(tg.asarray(X), "CPU:1")
    t = x * 2.5 + tg.device_put(y, "CPU:0") * 3.5
    d = describe(_graph(t))
    assert d.device is None and all(u.op is Ops.BUFFER and u.arg[0] >= 0 for u in d.inputs) and len(d.inputs) == 2
    np.testing.assert_allclose(t.numpy(), X * 6.0, rtol=1e-6)


def test_a_peek_reads_an_entry_without_refreshing_it() -> None:
    from tgfx.lowering.lru import LRU
    cache: LRU[str, int] = LRU(lambda: 2)
    cache["a"], cache["b"] = 1, 2
    assert cache.peek("a") == 1 and cache.peek("c") is None
    cache["c"] = 3                       # "a" was read but not refreshed: first in, first out
    assert "a" not in cache and list(cache) == ["b", "c"]
    assert cache.get("b") == 2
    cache["d"] = 4                       # a get refreshes: "c" goes
    assert list(cache) == ["b", "d"]


def test_an_eager_program_makes_its_outputs_without_per_output_tests() -> None:
    """An eager program's outputs are all fresh and its results views of them (`Program.plain`); a jitted call that
    donates its input still writes the result into it (the general path)."""
    from tgfx.lowering import _programs
    x = tg.asarray(X)
    t = x * 2.5 + 1
    key = describe(_graph(t)).key
    t.realize()
    assert _programs.peek(key)().plain   # (the map holds it weakly: the eager program cache owns it)

    @tg.jit(donate_argnums=0)
    def bump(v: tg.Tensor) -> tg.Tensor:
        return v + 1.0
    v = tg.asarray(X)
    # (the buffer by its number: a reference to the node would be a holder of it, and the call would take a copy)
    uid = (v.uop.src[0] if v.uop.op is Ops.RESHAPE else v.uop).arg[0]
    y = bump(v)
    np.testing.assert_allclose(y.numpy(), X + 1)
    assert (y.uop.src[0] if y.uop.op is Ops.RESHAPE else y.uop).arg[0] == uid


def test_a_scalar_operand_is_broadcast_by_the_same_nodes_every_step() -> None:
    """`x + 1.5` in a loop: the constant's CONST, RESHAPE and EXPAND are kept and found, not built and freed every
    step; -0.0 is another operand than 0.0, and a subtraction's negated constant another than the addition's."""
    import gc
    import weakref
    x = tg.asarray(X)
    kept = weakref.ref((x + 1.5).uop.src[1])
    gc.collect()
    assert kept() is not None and (x + 1.5).uop.src[1] is kept() and (1.5 * x).uop.src[0] is kept()
    assert kept().op is Ops.EXPAND and kept().src[0].src[0].arg == 1.5
    assert (x * -0.0).uop.src[1] is not (x * 0.0).uop.src[1]
    np.testing.assert_array_equal(np.signbit((x * -0.0).numpy()), np.signbit(X * -0.0))
    assert (x - 1.5).uop.src[1] is not kept()
    np.testing.assert_allclose(((x + 1.5) - (x - 1.5)).numpy(), np.full(16, 3.0, np.float32))


def test_siblings_ask_about_aranges_and_traced_values_only_where_the_graph_has_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A held value the graph computes is realised with it, an arange (a view of IOTA, scaled) is not: it is
    recomputed where it is read. Whether a value is one is asked only of a graph with an IOTA, and which values read
    a trace's PARAMs or call a FUNCTION only of a graph with one (the description knows)."""
    asked = {"iota": 0, "params": 0}

    def counting(name: str, fn: Callable) -> Callable:
        def spy(*args):   # noqa: ANN002, ANN202
            asked[name] += 1
            return fn(*args)
        return spy
    monkeypatch.setattr(tgfx.lowering.layout, "_iota_like", counting("iota", tgfx.lowering.layout._iota_like))
    monkeypatch.setattr(tgfx._realize, "_with_params", counting("params", tgfx._realize._with_params))
    x = tg.asarray(X)
    m = x * 2.0
    (m + 1.0).realize()
    assert m.uop.op is Ops.BUFFER and asked == {"iota": 0, "params": 0}
    r = tnp.arange(16, dtype=tnp.float32) * 2.0
    (r + x).realize()
    assert r.uop.op is not Ops.BUFFER and asked["iota"] > 0 and asked["params"] == 0
    np.testing.assert_allclose(r.numpy(), np.arange(16) * 2.0)


def test_constants_and_their_views_are_described_where_they_are_read() -> None:
    """`x + 2.5` walks the buffer, the add and the SINK: the constant's CONST, RESHAPE and EXPAND are described at
    the add (an argument here, a value for a literal 0 or 1, also through a longer chain of views), and the abstract
    graph is the same whether the nodes given to it hold them or not."""
    from tgfx.lowering.constants import graph_device
    from tgfx.lowering.inline import walk
    x = tg.asarray(X.reshape(4, 4))
    for t, n in ((x + 2.5, 4), (x * 1.0, 4), (x + tnp.full((4,), 3.5).reshape(1, 4).T, 4), (tnp.full((3,), 2.5), 1)):
        sink = _graph(t)
        d = describe(sink)
        assert len(d.nodes) == n and all(u.op is not Ops.CONST for u in d.nodes), [u.op for u in d.nodes]
        nodes = walk(sink)
        assert abstract_graph(nodes, graph_device(nodes) or d.device) == abstract_graph(d.nodes, d.device)
    np.testing.assert_allclose((x + tnp.full((4,), 3.5).reshape(1, 4).T).numpy(), X.reshape(4, 4) + 3.5)
    np.testing.assert_allclose(tnp.full((3,), 2.5).numpy(), np.full(3, 2.5))
