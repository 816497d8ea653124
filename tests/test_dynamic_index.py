"""Eager integer indices and slice starts are runtime values: one schedule and one compiled kernel per shape, not
one per index value (issue #18). Under `jit` a Python int stays part of the program, as in JAX."""
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.rangeify import rangeify
from tgfx.lowering.symbolic import pm_symbolic

A = (np.arange(10 * 12, dtype=np.float32).reshape(10, 12) * 0.5 - 7).astype(np.float32)


def counts_after_first(f: Callable[[int], Any], values: list[int]) -> tuple[int, int]:
    """(compiles, schedules) for `f` over `values` after its first value: what each new value costs."""
    f(values[0])
    tg.counters.reset()
    for v in values[1:]:
        f(v)
    return tg.counters.compile_count, tg.counters.schedule_count


def one_hot(a: np.ndarray, i: int) -> np.ndarray:
    b = a.copy()
    b[i] = 1.0
    return b


CASES: list[tuple[str, Callable[[tg.Tensor, int], Any], Callable[[np.ndarray, int], Any], list[int]]] = [
    ("x[i]", lambda x, i: (x[i] * 2).sum(), lambda a, i: (a[i] * 2).sum(), list(range(10))),
    ("x[-i]", lambda x, i: (x[-i] * 2).sum(), lambda a, i: (a[-i] * 2).sum(), list(range(1, 11))),
    ("x[i, j]", lambda x, i: x[i, (7 * i) % 12] * 3, lambda a, i: a[i, (7 * i) % 12] * 3, list(range(10))),
    ("x[i:i+3]", lambda x, i: x[i:i + 3].sum(0), lambda a, i: a[i:i + 3].sum(0), list(range(8))),
    ("x[:, i:i+4:2]", lambda x, i: x[:, i:i + 4:2] + 1, lambda a, i: a[:, i:i + 4:2] + 1, list(range(8))),
    ("x[i, ::-1]", lambda x, i: x[i, ::-1] - 1, lambda a, i: a[i, ::-1] - 1, list(range(10))),
    ("dynamic_slice", lambda x, i: tg.lax.dynamic_slice(x, (i, i + 1), (2, 5)) * 2,
     lambda a, i: a[min(i, 8):min(i, 8) + 2, min(i + 1, 7):min(i + 1, 7) + 5] * 2, list(range(10))),
    ("dynamic_index_in_dim", lambda x, i: tg.lax.dynamic_index_in_dim(x, i, 1, keepdims=False) + 1,
     lambda a, i: a[:, i] + 1, list(range(12))),
    ("dynamic_update_slice", lambda x, i: tg.lax.dynamic_update_slice(x, tnp.ones((2, 3)), (i, 2)),
     lambda a, i: np.concatenate([a[:min(i, 8)], np.concatenate(
         [a[min(i, 8):min(i, 8) + 2, :2], np.ones((2, 3), np.float32), a[min(i, 8):min(i, 8) + 2, 5:]], 1),
         a[min(i, 8) + 2:]]), list(range(10))),
    ("at[i].set", lambda x, i: x.at[i].set(1.0), one_hot, list(range(10))),
    ("at[i, 3:].add", lambda x, i: x.at[i, 3:].add(2.0),
     lambda a, i: a + np.where((np.arange(10)[:, None] == i) & (np.arange(12) >= 3), 2, 0).astype(np.float32),
     list(range(10))),
]


@pytest.mark.parametrize("name,f,ref,values", CASES, ids=[c[0] for c in CASES])
def test_a_new_index_value_compiles_and_schedules_nothing(name: str, f: Callable, ref: Callable,
                                                          values: list[int]) -> None:
    x = tg.asarray(A)
    got: dict[int, np.ndarray] = {}

    def run(i: int) -> None:
        got[i] = np.asarray(f(x, i).numpy())
    assert counts_after_first(run, values) == (0, 0), name
    for i in values:
        np.testing.assert_array_equal(got[i], ref(A, i), err_msg=f"{name} at i={i}")


def test_twenty_rows_are_one_compile() -> None:
    x = tnp.arange(10000.0).reshape(100, 100)
    x.block_until_ready()
    tg.counters.reset()
    sums = [float((x[i] * 2).sum()) for i in range(20)]   # not inside `assert`: pytest would hold x[i] * 2
    assert sums == [float((np.arange(10000.0).reshape(100, 100)[i] * 2).sum()) for i in range(20)]
    assert (tg.counters.compile_count, tg.counters.schedule_count, tg.counters.kernel_count) == (1, 1, 20)


def test_eager_index_is_a_dynamic_view_with_a_constant_start() -> None:
    x = tg.asarray(A)
    u = x[3].uop
    assert u.op is Ops.RESHAPE and u.src[0].op is Ops.DYNAMIC_SHRINK
    view = u.src[0]
    assert view.arg == ((0,), (1, 12)) and view.src[1] is UOp.const(dtypes.int32, 3)
    # an axis taken whole needs no start
    assert x[:, 2:5].uop.arg == ((1,), (10, 3))


def test_element_reads_still_copy_one_element() -> None:
    x = tg.asarray(A)
    x.block_until_ready()
    tg.counters.reset()
    vals = [float(x[i, j]) for i in (0, 4, 9) for j in (0, 5, -1)]
    assert vals == [float(A[i, j]) for i in (0, 4, 9) for j in (0, 5, -1)]
    assert tg.counters.kernel_count == 0 and tg.counters.compile_count == 0


def test_out_of_range_python_int_clamps_as_in_jax_and_compiles_nothing_new() -> None:
    x = tg.asarray(A)
    np.testing.assert_array_equal(x[9].numpy(), A[9])
    tg.counters.reset()
    np.testing.assert_array_equal(x[10].numpy(), A[9])       # JAX reads x[10] of 10 rows as x[9]
    assert float(x[2, -13]) == float(A[2, 0])                # and x[2, -13] of 12 columns as x[2, 0]
    assert tg.counters.compile_count == 0


def test_under_jit_python_ints_stay_static_and_traced_ones_work() -> None:
    x = tg.asarray(A)
    f = tg.jit(lambda v, i: v[i] * 2, static_argnums=1)
    for i in (0, 3, 3, -1):
        np.testing.assert_array_equal(f(x, i).numpy(), A[i] * 2)
    assert f.trace_count == 3   # one trace per static value, as in JAX
    g = tg.jit(lambda v, i: v[i] * 2)
    for i in (0, 3, -1, 25):   # a traced index is clamped, as JAX's dynamic index is
        want = A[min(max(i + 10 if i < 0 else i, 0), 9)] * 2
        np.testing.assert_array_equal(g(x, tg.asarray(np.int32(i))).numpy(), want)
    assert g.trace_count == 1


def test_grad_through_eager_indexing_of_a_function() -> None:
    rows = [tg.grad(lambda v, i=i: (v[i] ** 2).sum())(tg.asarray(A)).numpy() for i in (1, 4)]
    for i, g in zip((1, 4), rows, strict=True):
        np.testing.assert_allclose(g, np.where(np.arange(10)[:, None] == i, 2 * A, 0))


# ---- the pass: a constant start lowers to exactly the static view's index ----
def test_rangeify_of_a_constant_start_is_the_static_shrink() -> None:
    buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (1, 120))
    x = UOp(Ops.RESHAPE, dtypes.float32, (buf,), (10, 12))
    out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (0, 14))
    dyn = UOp(Ops.DYNAMIC_SHRINK, dtypes.float32, (x, UOp.const(dtypes.int32, 4), UOp.const(dtypes.int32, 5)),
              ((0, 1), (2, 7)))
    static = UOp(Ops.SHRINK, dtypes.float32, (x,), ((4, 6), (5, 12)))
    lower = lambda v: graph_rewrite(rangeify(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (out, v)),))),  # noqa: E731
                                    pm_symbolic)
    assert lower(dyn) is lower(static)
    # and a constant start of a dynamic pad is the static pad, its validity mask included
    pad_out = UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (0, 12 * 15))
    lower_pad = lambda v: graph_rewrite(rangeify(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (pad_out, v)),))),  # noqa: E731
                                        pm_symbolic)
    dpad = UOp(Ops.DYNAMIC_PAD, dtypes.float32, (x, UOp.const(dtypes.int32, 2), UOp.const(dtypes.int32, 3)),
               ((0, 1), (12, 15)))
    assert lower_pad(dpad) is lower_pad(UOp(Ops.PAD, dtypes.float32, (x,), ((2, 0), (3, 0))))
    # a start read from a buffer is clamped into range: its bounds are [0, n - k] however it was written
    start = UOp(Ops.RESHAPE, dtypes.int32, (UOp(Ops.DEFINE_GLOBAL, dtypes.int32, (), (2, 1)),), ())
    dyn = UOp(Ops.DYNAMIC_SHRINK, dtypes.float32, (x, start), ((0,), (3, 12)))
    sink = lower(dyn)
    offsets = [u.src[1] for u in sink.toposort() if u.op is Ops.INDEX and u.src[0] is buf]
    assert len(offsets) == 1 and (offsets[0].vmin, offsets[0].vmax) == (0, 119)


# ---- values against numpy for any basic index ----
@st.composite
def basic_index(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple]:
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    items: list[Any] = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "all"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-n - 1, n + 1)
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, -1, -2]))))
        else:
            items.append(slice(None))
    return shape, tuple(items)


@settings(max_examples=40)
@given(basic_index(), st.sampled_from(["get", "set", "add"]))
def test_basic_indices_match_numpy(case: tuple, op: str) -> None:
    shape, idx = case
    a = (np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 3 % 7 - 2).astype(np.float32)
    x = tg.asarray(a)
    if op == "get":
        np.testing.assert_array_equal(x[idx].numpy(), a[idx])
        return
    want = a.copy()
    if op == "set":
        want[idx] = 5.0
        got = x.at[idx].set(5.0)
    else:
        want[idx] += 5.0
        got = x.at[idx].add(5.0)
    np.testing.assert_array_equal(got.numpy(), want)


def test_gradient_rules_of_the_dynamic_views_put_the_gradient_back_at_the_same_starts() -> None:
    from tgfx.transforms.grad import compute_gradient
    x = tg.asarray(A)
    y = x[3:5, 2:4].uop   # DYNAMIC_SHRINK over the buffer
    assert y.op is Ops.DYNAMIC_SHRINK
    g = compute_gradient(y, tnp.ones((2, 2)).uop, [x.uop])[x.uop]
    assert g.op is Ops.DYNAMIC_PAD and g.src[1:] == y.src[1:]
    np.testing.assert_array_equal(tg.Tensor(g).numpy(), np.pad(np.ones((2, 2), np.float32), ((3, 5), (2, 8))))
    back = compute_gradient(g, tg.asarray(A).uop, [tnp.ones((2, 2)).uop])
    np.testing.assert_array_equal(tg.Tensor(next(iter(back.values()))).numpy(), A[3:5, 2:4])
