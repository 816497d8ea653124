"""Kernel options on tiny graphs (exact structure), and optimised kernels against numpy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import Tensor
from tgfx.devices.target import host_target, target_for
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering import heuristics, index_level, kernel_opts
from tgfx.lowering import schedule as schedule_module
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.kernel_opts import KernelOptError, Opt, apply_opt, apply_opts, global_size, ranges
from tgfx.lowering.linearize import linearize
from tgfx.lowering.optimize import use_opts
from tgfx.lowering.rangeify import rangeify
from tgfx.lowering.schedule import schedule
from tgfx.lowering.search import actions
from tgfx.lowering.symbolic import pm_symbolic
from tgfx.lowering.transcendental import pm_transcendental


def on_cpu(x: np.ndarray) -> tg.Tensor:
    """`x` on the CPU, whatever the default device (`-p tests.emulated_cuda` makes it CUDA:0): these are
    the CPU's kernel options."""
    return tg.asarray(x, device="CPU")


def on_cores(n):
    """This machine's target with `n` cores."""
    return host_target().with_cores(n)


def g(slot, n):
    return UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (slot, n))


def matmul_sink(m, k, n):
    a = UOp(Ops.RESHAPE, dtypes.float32, (g(1, m * k),), (m, k, 1))
    b = UOp(Ops.RESHAPE, dtypes.float32, (g(2, k * n),), (1, k, n))
    prod = UOp(Ops.EXPAND, dtypes.float32, (a,), (m, k, n)) * UOp(Ops.EXPAND, dtypes.float32, (b,), (m, k, n))
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (prod,), (Ops.ADD, (1,)))
    out = UOp(Ops.RESHAPE, dtypes.float32, (red,), (m, n))
    ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, m * n), out)),))
    return graph_rewrite(rangeify(ast), pm_symbolic)


def test_upcast_of_an_axis_read_side_by_side_is_a_vector_range():
    """The columns of a matmul (b and the output read and write them side by side) become one range of kind
    "vector": one store, one reduce, whose values the renderer computes as vectors of the lanes."""
    sink = matmul_sink(4, 8, 16)
    out = apply_opt(sink, Opt("UPCAST", 1, 4))
    assert len(out.src) == 1
    assert ranges(out)[1].src[0].arg == 4  # the range now counts groups of lanes
    (vec,) = [u for u in out.toposort() if u.op is Ops.RANGE and u.arg[1] == "vector"]
    assert vec.src[0].arg == 4 and len({u for u in out.toposort() if u.op is Ops.REDUCE}) == 1
    # the rows (a reads them 8 apart, not side by side) stay copies per lane, of the vector range's store
    out2 = apply_opt(out, Opt("UPCAST", 0, 2))
    assert len(out2.src) == 2 and all(vec in st.toposort() for st in out2.src)


def test_unroll_of_a_reduce_read_side_by_side_is_a_vector_range():
    """UNROLL of a matmul's reduce (a and b both read along it side by side once b is read transposed): one reduce over
    the outer part whose value is a vector of the lanes' partial sums, and a REDUCE over the vector range combining
    them after the loop, not one reduce per lane."""
    a = UOp(Ops.RESHAPE, dtypes.float32, (g(1, 4 * 32),), (4, 1, 32))
    b = UOp(Ops.RESHAPE, dtypes.float32, (g(2, 8 * 32),), (1, 8, 32))
    prod = UOp(Ops.EXPAND, dtypes.float32, (a,), (4, 8, 32)) * UOp(Ops.EXPAND, dtypes.float32, (b,), (4, 8, 32))
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (prod,), (Ops.ADD, (2,)))
    ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, 32), UOp(Ops.RESHAPE, dtypes.float32, (red,), (4, 8)))),))
    out = apply_opt(graph_rewrite(rangeify(ast), pm_symbolic), Opt("UNROLL", 2, 8))
    (vec,) = [u for u in out.toposort() if u.op is Ops.RANGE and u.arg[1] == "vector"]
    reduces = [u for u in out.toposort() if u.op is Ops.REDUCE]
    assert len(reduces) == 2 and reduces[1].src[1:] == (vec,) and reduces[1].src[0] is reduces[0]
    assert reduces[0].src[1:] == (ranges(out)[2],) and ranges(out)[2].src[0].arg == 4
    # an exp per element (no vector rule: lane by lane) and odd lanes (combined by halves, the odd one alone)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 24)).astype(np.float32)
    for amount in (8, 6, 3):
        with use_opts([Opt("UNROLL", 1, amount)]):
            np.testing.assert_allclose(tnp.exp(on_cpu(x)).sum(-1).numpy(), np.exp(x).sum(-1), rtol=1e-5)
            np.testing.assert_array_equal(on_cpu(x).max(-1).numpy(), x.max(-1))
            np.testing.assert_array_equal((on_cpu(x) > 1).any(-1).numpy(), (x > 1).any(-1))
            i = (x * 100).astype(np.int32)
            np.testing.assert_array_equal(tnp.sum(on_cpu(i), -1).numpy(), i.sum(-1))
    x[2, 5] = np.nan   # a NaN anywhere in a row is its max (no lane's combine drops it)
    with use_opts([Opt("UNROLL", 1, 8)]):
        np.testing.assert_array_equal(on_cpu(x).max(-1).numpy(), x.max(-1))


def test_upcast_replicates_the_store_per_lane(monkeypatch):
    monkeypatch.setattr(kernel_opts, "VECTOR_UPCAST", False)
    sink = matmul_sink(4, 8, 16)
    out = apply_opt(sink, Opt("UPCAST", 1, 4))
    assert len(out.src) == 4
    assert ranges(out)[1].src[0].arg == 4  # the range now counts groups of lanes
    assert len({u for u in out.toposort() if u.op is Ops.REDUCE}) == 4
    # lanes a transpose reads apart are copies whatever the toggle says
    monkeypatch.setattr(kernel_opts, "VECTOR_UPCAST", True)
    out = apply_opt(sink, Opt("UPCAST", 0, 4))
    assert len(out.src) == 4 and not any(u.op is Ops.RANGE and u.arg[1] == "vector" for u in out.toposort())


@pytest.mark.parametrize("vector", [False, True])
def test_vector_ranges_and_lane_copies_compute_alike(monkeypatch, vector):
    """Kernels whose upcast axis is a vector range (elementwise with integer math and casts, a reduce over an outer
    axis, a tile with a tanh epilogue, a masked store of a padded axis) against numpy, both ways."""
    from tgfx import config, lowering
    monkeypatch.setattr(kernel_opts, "VECTOR_UPCAST", vector)
    monkeypatch.setattr(config.DISK_CACHE, "value", 0)   # the toggle is not part of a compiled kernel's key
    lowering.forget_compiled()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    w = rng.standard_normal((48, 96)).astype(np.float32)
    i = rng.integers(-1000, 1000, (64, 48)).astype(np.int32)
    with use_opts([Opt("UPCAST", 0, 16)]):   # elementwise kernels' axes are one loop
        np.testing.assert_allclose(tnp.tanh(on_cpu(x) * 2 + 1).numpy(), np.tanh(x * 2 + 1), rtol=1e-6, atol=1e-6)
        got = ((on_cpu(i) // 7) % 5 + (on_cpu(i) >> 3)).astype(tnp.float32) / 3
        np.testing.assert_allclose(got.numpy(), ((i // 7) % 5 + (i >> 3)).astype(np.float32) / 3, rtol=1e-6)
        np.testing.assert_array_equal(tnp.maximum(on_cpu(i), 3).numpy(), np.maximum(i, 3))
        np.testing.assert_array_equal((on_cpu(x) > 0).numpy(), x > 0)
    with use_opts([Opt("UPCAST", 0, 16)]):
        np.testing.assert_allclose(tnp.sum(on_cpu(x), axis=0).numpy(), x.sum(0), rtol=1e-5, atol=1e-5)
    with use_opts([Opt("UPCAST", 1, 32), Opt("UPCAST", 0, 8)]):
        np.testing.assert_allclose(tnp.tanh(on_cpu(x) @ on_cpu(w)).numpy(), np.tanh(x @ w), rtol=1e-5,
                                   atol=1e-5)
    with use_opts([Opt("PADTO", 0, 64), Opt("UPCAST", 0, 64)]):   # 63 elements padded: the store is masked
        np.testing.assert_allclose((on_cpu(x[:7, :9]) * 3).numpy(), x[:7, :9] * 3, rtol=1e-6)
    lowering.forget_compiled()


def test_lane_copies_are_the_graph_substituted_lane_by_lane():
    """`_lane_copies` replays only the nodes that depend on the range, once per lane: each copy is exactly what a
    whole-graph substitution makes, and what does not depend on the range is shared, not copied."""
    from tgfx.lowering.kernel_opts import _lane_copies
    sink = matmul_sink(4, 8, 16)
    store, rng = sink.src[0], ranges(sink)[1]
    lanes = [rng.const_like(3) * 4 + j for j in range(4)]
    copies = _lane_copies(store, rng, lanes)
    assert copies == [store.substitute({rng: lane}) for lane in lanes]
    a_read = next(u for u in store.toposort() if u.op is Ops.LOAD and rng not in u.toposort())
    assert all(a_read in c.toposort() for c in copies)
    assert _lane_copies(a_read, rng, lanes) == [a_read] * 4   # nothing to replace


def test_thread_splits_a_range_over_core_ids():
    out = apply_opt(matmul_sink(4, 8, 16), Opt("THREAD", 0, 2))
    assert global_size(out) == 2
    assert ranges(out)[0].src[0].arg == 2
    assert any(u.op is Ops.SPECIAL for u in out.toposort())


def test_unroll_splits_a_reduce_into_lane_accumulators():
    out = apply_opt(matmul_sink(4, 8, 16), Opt("UNROLL", 2, 4))
    reds = {u for u in out.toposort() if u.op is Ops.REDUCE}
    assert len(reds) == 4 and all(r.src[1].src[0].arg == 2 for r in reds)


def test_invalid_options_raise_kernel_opt_error():
    sink = matmul_sink(4, 8, 16)
    with pytest.raises(KernelOptError):
        apply_opt(sink, Opt("UPCAST", 1, 5))  # 16 does not split by 5
    with pytest.raises(KernelOptError):
        apply_opt(sink, Opt("UPCAST", 2, 2))  # range 2 is a reduce range
    with pytest.raises(KernelOptError):
        apply_opt(sink, Opt("LOCAL", 0, 2))  # a GPU option


def test_contractions_get_register_blocking_and_threads():
    opts = hand_coded_opts(matmul_sink(64, 64, 64), on_cores(2))
    assert [o.op for o in opts] == ["UPCAST", "UPCAST", "THREAD"]


def reduce_sink(m, n, axis):
    """The sum over `axis` of an m x n row-major matrix."""
    x = UOp(Ops.RESHAPE, dtypes.float32, (g(1, m * n),), (m, n))
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (x,), (Ops.ADD, (axis,)))
    out = UOp(Ops.RESHAPE, dtypes.float32, (red,), ((n,) if axis == 0 else (m,)))
    ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, n if axis == 0 else m), out)),))
    return graph_rewrite(rangeify(ast), pm_symbolic)


def test_a_column_sum_adds_vectors_of_a_contiguous_row():
    # summing over the outer axis: the output axis is contiguous in the load, so it is vectorised (one vector of
    # accumulators per step down the column); summing a row is not (its output axis would be a gather): a long row
    # is LLVM's to vectorise, a row of a few vectors is vectors of partial sums (the reduce UNROLLed by the lanes)
    # (and the column's steps are SUM_CHAINS independent vectors of accumulators: side by side along the row, so a
    # step reads a run of it, not a vector of it a row's length from the last; down the column where the row is
    # narrower, summed after the loop)
    lanes = on_cores(1).lanes()
    assert hand_coded_opts(reduce_sink(128, 512, axis=0), on_cores(1)) == \
        [Opt("UPCAST", 0, lanes), Opt("UPCAST", 0, 4)]
    assert hand_coded_opts(reduce_sink(128, 2 * lanes, axis=0), on_cores(1)) == \
        [Opt("UPCAST", 0, lanes), Opt("UPCAST", 0, 2), Opt("UNROLL", 1, 2)]
    assert hand_coded_opts(reduce_sink(128, 3 * lanes, axis=0), on_cores(1)) == \
        [Opt("UPCAST", 0, lanes), Opt("UPCAST", 0, 3)]
    x = np.random.default_rng(1).standard_normal((300, 40 * lanes)).astype(np.float32)
    np.testing.assert_allclose(tg.jit(lambda a: a.sum(0))(on_cpu(x)).numpy(), x.astype(np.float64).sum(0),
                               rtol=1e-5, atol=1e-4)
    assert hand_coded_opts(reduce_sink(128, 512, axis=1), on_cores(1)) == []
    assert [(o.op, o.amount) for o in hand_coded_opts(reduce_sink(128, 2 * lanes, axis=1), on_cores(1))] == \
        [("UNROLL", lanes), ("UNROLL", 2)]


def test_a_sum_of_one_hot_rows_is_vectors_along_the_axis_it_stores_contiguously():
    """A mixture of experts' dispatch mask: each token's two choices of (expert, slot) as one-hot rows over the 160
    slots, summed over the choices. No load reads the slots (the one-hot is a compare with them), the experts are read
    side by side: the vectors run along the slots, which the store writes side by side, not along the experts, each
    lane's store 160 apart (a 512 x 8 x 160 mask: 2.4 ms, 0.14 along the slots)."""
    rng = np.random.default_rng(0)
    n, k, e, c = 64, 2, 8, 160
    pos = rng.integers(-1, c, (n, k, e)).astype(np.int32)
    gate = rng.random((n, k, e)).astype(np.float32)

    def mask(pos, gate):
        return ((pos[..., None] == tnp.arange(c, dtype=tnp.int32)) * gate[..., None]).sum(1)
    linear, _ = schedule([mask(on_cpu(pos), on_cpu(gate)).uop])
    (call,) = linear.src
    sink = index_level(call.src[0])
    store = sink.src[0].src[0].src[1]
    slots = next(r for r in ranges(sink).values() if r.src[0].arg == c)
    vectors = [o for o in hand_coded_opts(sink, on_cores(1)) if o.op == "UPCAST"]
    assert vectors and vectors[0].axis == slots.arg[0], vectors
    assert kernel_opts._coef(store, slots) == 1
    want = ((pos[..., None] == np.arange(c)) * gate[..., None]).sum(1)
    np.testing.assert_allclose(tg.jit(mask)(on_cpu(pos), on_cpu(gate)).numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("width", [31, 33])
def test_a_short_row_of_costly_elements_is_padded_vectors(width):
    """An elementwise kernel whose rows (a bias along them keeps them a loop of their own) are a few vectors long but
    not a multiple of one, each element a log and an exp: LLVM's loop vectoriser left the row scalar (a CTC step's
    log-sum-exp over 16 x 31, 4.8 us; 2.1 as vectors of 16, one lane padding). The row is padded to the widest
    vectors that pad it by at most a quarter (33: vectors of 8, 40) and taken as vectors; the values are numpy's."""
    rng = np.random.default_rng(0)
    x, b = rng.standard_normal((16, width)).astype(np.float32), rng.standard_normal(width).astype(np.float32)

    def f(x, b):
        return tnp.log(tnp.exp(x - b) + 1.0)
    linear, _ = schedule([f(on_cpu(x), on_cpu(b)).uop])
    sink = index_level(linear.src[-1].src[0])
    row = next(r for r in ranges(sink).values() if r.src[0].arg == width)
    lanes = on_cores(1).lanes()
    amount = next(a for a in (lanes, lanes // 2, lanes // 4) if -width % a <= width // 4)
    assert hand_coded_opts(sink, on_cores(1)) == [Opt("PADTO", row.arg[0], amount), Opt("UPCAST", row.arg[0], amount)]
    np.testing.assert_allclose(tg.jit(f)(on_cpu(x), on_cpu(b)).numpy(), np.log(np.exp(x - b) + 1), rtol=1e-5,
                               atol=1e-6)


def test_a_column_sum_of_a_few_columns_pads_them_to_a_vector():
    """12 features summed over 20,000 rows: the 12 columns are a vector of 16 lanes (4 masked), or 6 half of one,
    not 12 scalar chains (100 -> 22 us); the sums are right."""
    lanes = on_cores(1).lanes()
    for cols, amount in ((lanes - 4, lanes), (lanes // 2 - 2, lanes // 2)):
        assert hand_coded_opts(reduce_sink(20000, cols, axis=0), on_cores(1)) == \
            [Opt("PADTO", 0, amount), Opt("UPCAST", 0, amount), Opt("UNROLL", 1, 4)]
    x = np.random.default_rng(0).standard_normal((2001, 12)).astype(np.float32)
    got = tg.jit(lambda a: a.sum(0))(on_cpu(x)).numpy()
    np.testing.assert_allclose(got, x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-4)
    got = tg.jit(lambda a: a.mean(0))(on_cpu(x[:, :5])).numpy()
    np.testing.assert_allclose(got, x[:, :5].astype(np.float64).mean(0), rtol=1e-5, atol=1e-6)


def full_reduce_sink(n, op):
    x = g(1, n)
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (x,), (n,)),), (op, (0,)))
    ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, 1), UOp(Ops.RESHAPE, dtypes.float32, (red,), ()))),))
    return graph_rewrite(rangeify(ast), pm_symbolic)


@pytest.mark.parametrize("cpu", ["znver5", "znver3"])
def test_a_full_reduction_keeps_vectors_of_partial_results(cpu):
    # a whole array to one value has no output axis to vectorise; a short one is a kernel LLVM's vectoriser is kept
    # from, and a max (NaN-propagating) it would not take: the reduce as vectors of lanes in independent chains
    # (the max of 512 logits in a decode step: 3.25 -> 0.11 us)
    target = target_for(cpu).with_cores(1)
    lanes = target.lanes()
    assert lanes == (16 if cpu == "znver5" else 8)
    for n, op in ((512, Ops.MAX), (4096, Ops.ADD), (1 << 16, Ops.MAX)):
        assert [(o.op, o.amount) for o in hand_coded_opts(full_reduce_sink(n, op), target)] == \
            [("UNROLL", lanes), ("UNROLL", 4)]
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    x[77] = np.nan
    assert np.isnan(tnp.max(on_cpu(x)).numpy())
    x[77] = 5.0
    assert tnp.max(on_cpu(x)).numpy() == x.max() and tnp.min(on_cpu(x)).numpy() == x.min()
    np.testing.assert_allclose(tnp.sum(on_cpu(x)).numpy(), x.astype(np.float64).sum(), rtol=1e-5)


@pytest.mark.parametrize("cpu", ["znver5", "znver3"])
def test_a_row_max_of_selected_values_is_vectors_of_partial_maxima(cpu):
    # max(where(x == inf, -inf, x)) over long rows: LLVM folds the select into the loop's recurrence
    # (select(c, acc, max(acc, x))), which its loop vectoriser does not take, so it was a scalar chain (4096 rows of
    # 1024: 19 ms, the plain max 0.6): the reduce as vectors of partial maxima instead. A plain row max stays LLVM's
    import math
    target = target_for(cpu).with_cores(1)
    lanes = target.lanes()

    def opts(fn) -> list[tuple[str, int]]:  # noqa: ANN001
        linear, _ = schedule([fn(on_cpu(np.zeros((64, 1024), np.float32))).uop])
        return [(o.op, o.amount) for o in hand_coded_opts(index_level(linear.src[0].src[0]), target)]
    selected = lambda x: tnp.max(tnp.where(x == math.inf, -math.inf, x), axis=-1)  # noqa: E731
    assert ("UNROLL", lanes) in opts(selected)
    assert not any(op == "UNROLL" for op, _ in opts(lambda x: tnp.max(x, axis=-1)))
    x = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32)
    x[3, 5], x[7, :] = np.inf, np.inf
    x[9, 100] = np.nan
    want = np.where(x == np.inf, -np.inf, x).max(-1)
    np.testing.assert_array_equal(selected(on_cpu(x)).numpy(), want)


def test_a_transpose_is_tiled_in_vector_squares():
    # out[k, i] = a[i, k]: the store runs along i and the load along k; both get lanes (a square tile)
    n = 64
    a = UOp(Ops.RESHAPE, dtypes.float32, (g(1, n * n),), (n, n))
    t = UOp(Ops.PERMUTE, dtypes.float32, (a,), (1, 0))
    sink = graph_rewrite(rangeify(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, n * n), t)),))), pm_symbolic)
    opts = hand_coded_opts(sink, on_cores(1))
    assert [o.op for o in opts] == ["UPCAST", "UPCAST"] and {o.axis for o in opts} == {0, 1}
    assert hand_coded_opts(graph_rewrite(rangeify(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, n * n), a)),))),
                                         pm_symbolic), on_cores(1)) == []      # a plain copy: nothing to tile
    x = np.arange(n * n, dtype=np.float32).reshape(n, n)
    np.testing.assert_array_equal(tg.jit(lambda v: v.T.contiguous())(on_cpu(x)).numpy(), x.T)


def test_transposes_stored_side_by_side_are_tiled_in_vector_squares():
    # out1[k, i] = a[i, k], out2[k, i] = a[i, k + n]: one kernel stores both (the keys and values of a fused
    # qkv, each transposed per head) at the same index. Both stores run along i and the loads along k: the square
    # tile reads and writes whole vectors, where the loop along i read one float a line (gpt's 16 x 128 tokens:
    # 13 -> 1.7 ms)
    n = 64
    a = UOp(Ops.RESHAPE, dtypes.float32, (g(2, n * 2 * n),), (n, 2 * n))
    halves = [UOp(Ops.PERMUTE, dtypes.float32, (UOp(Ops.SHRINK, dtypes.float32, (a,), ((0, n), (lo, lo + n))),), (1, 0))
              for lo in (0, n)]
    stores = (UOp(Ops.STORE, None, (g(0, n * n), halves[0])), UOp(Ops.STORE, None, (g(1, n * n), halves[1])))
    sink = graph_rewrite(rangeify(UOp(Ops.SINK, None, stores)), pm_symbolic)
    assert len(sink.src) == 2
    lanes = on_cores(1).lanes()
    opts = hand_coded_opts(sink, on_cores(1))
    assert [(o.op, o.amount) for o in opts] == [("UPCAST", lanes)] * 2 and {o.axis for o in opts} == {0, 1}
    # each element also read through a division along the tile's axis (b[k, i // 2], as a max pool's gradient reads):
    # that load is element by element per lane, and the square copied the whole element per lane (cnn_bn's pool and
    # batch norm backward: slower than vectors along the store's axis alone)
    b = UOp(Ops.RESHAPE, dtypes.float32, (g(3, n * n // 2),), (n, n // 2, 1))
    b = UOp(Ops.RESHAPE, dtypes.float32, (UOp(Ops.EXPAND, dtypes.float32, (b,), (n, n // 2, 2)),), (n, n))
    t = UOp(Ops.PERMUTE, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (g(2, n * n),), (n, n)),), (1, 0))
    sink = index_level(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, n * n), t * b)),
                                            UOp(Ops.STORE, None, (g(1, n * n), t + b)))))
    assert [(o.op, o.amount) for o in hand_coded_opts(sink, on_cores(1))] == [("UPCAST", lanes)]
    x = np.arange(n * 2 * n, dtype=np.float32).reshape(n, 2 * n)
    k, v = tg.jit(lambda t: ((t[:, :n].T + 1).contiguous(), (t[:, n:].T * 2).contiguous()))(on_cpu(x))
    np.testing.assert_array_equal(k.numpy(), x[:, :n].T + 1)
    np.testing.assert_array_equal(v.numpy(), x[:, n:].T * 2)


def test_the_transposed_pieces_of_a_concatenation_are_tiled_in_vector_squares():
    # out[0] = a.T + b.T, out[1] = c.T + d.T (an FNO's real and imaginary weight gradients, each two products' sums
    # laid out by mode, transposed back and stacked): one kernel stores both pieces, a constant apart in one buffer.
    # The square tile covers both, where the loop along the store read one float a page (7.5 ms in the FNO step)
    from tests.test_cpu_matmul import kernels
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((144, 32)).astype(np.float32) for _ in range(4)]
    a, b, c, d = (on_cpu(x) for x in xs)
    out = tnp.stack([(a + b).T, (c + d).T])
    (ast,) = kernels(out)
    sink = index_level(ast)
    assert len(sink.src) == 2
    lanes = on_cores(1).lanes()
    assert [(o.op, o.amount) for o in hand_coded_opts(sink, on_cores(1))] == [("UPCAST", lanes)] * 2
    np.testing.assert_array_equal(out.numpy(), np.stack([(xs[0] + xs[1]).T, (xs[2] + xs[3]).T]))


def test_a_transpose_read_through_a_pad_gets_no_square_tile():
    # out[i, k] = a[k, i - 1] (0 at i = 0): a padded slice of a transposed operand, as NeRF's gradient reads the sample
    # spacings shifted by one. No vector takes a read both masked and strided along the store's axis, so the square's
    # 16 x 16 lanes were each a copy of the whole element (690 KB of IR, 4 s of LLVM for 64 operations, 180 us a run
    # against 99 us without lanes); an unmasked operand beside it still takes the square
    n = 64
    a = UOp(Ops.PERMUTE, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (g(1, n * n),), (n, n)),), (1, 0))
    shifted = UOp(Ops.PAD, dtypes.float32, (UOp(Ops.SHRINK, dtypes.float32, (a,), ((0, n), (0, n - 1))),),
                  ((0, 0), (1, 0)))
    b = UOp(Ops.PERMUTE, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (g(2, n * n),), (n, n)),), (1, 0))

    def opts(x: UOp) -> list[str]:
        store = UOp(Ops.STORE, None, (g(0, n * n), UOp(Ops.EXP2, dtypes.float32, (x * b,))))
        return [o.op for o in hand_coded_opts(index_level(UOp(Ops.SINK, None, (store,))), on_cores(1))]
    assert "UPCAST" not in opts(shifted)
    assert opts(a) == ["UPCAST", "UPCAST"]
    x, y = (np.random.default_rng(i).standard_normal((n, n)).astype(np.float32) for i in range(2))
    got = tg.jit(lambda x, y: tnp.exp2(tnp.pad(x.T[:, :-1], ((0, 0), (1, 0))) * y.T))(on_cpu(x), on_cpu(y))
    np.testing.assert_allclose(got.numpy(), np.exp2(np.pad(x.T[:, :-1], ((0, 0), (1, 0))) * y.T), rtol=1e-5)


def test_a_read_masked_along_the_reduce_alone_is_a_vector_of_the_lanes():
    # out[j] = sum_i x[i + 1, j] (0 past the end): the read's mask changes along the reduce but is the same for every
    # lane j, one compare a step: the lanes are one masked vector load. They were copies of the whole element (an
    # LRU's scan gradient, its interleaved levels' masks: 16 scalar copies of its transcendentals, 305 KB of IR, 34
    # KB as a vector). (A mask that changes along the lanes too, a convolution's padded input, keeps lane copies)
    from tgfx.lowering.kernel_opts import is_vector_range
    n, m = 64, 16
    x = UOp(Ops.RESHAPE, dtypes.float32, (g(1, n * m),), (n, m))
    shifted = UOp(Ops.PAD, dtypes.float32, (UOp(Ops.SHRINK, dtypes.float32, (x,), ((1, n), (0, m))),), ((0, 1), (0, 0)))
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (UOp(Ops.EXP2, dtypes.float32, (shifted,)),), (Ops.ADD, (0,)))
    out = UOp(Ops.RESHAPE, dtypes.float32, (red,), (m,))
    sink = index_level(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, m), out)),)))
    (lane_axis,) = [a for a, r in ranges(sink).items() if r.arg[1] == "loop"]
    assert any(is_vector_range(u) for u in apply_opt(sink, Opt("UPCAST", lane_axis, m)).toposort())
    v = np.random.default_rng(0).standard_normal((n, m)).astype(np.float32)
    got = tg.jit(lambda t: tnp.exp2(tnp.pad(t[1:], ((0, 1), (0, 0)))).sum(0))(on_cpu(v))
    np.testing.assert_allclose(got.numpy(), np.exp2(np.pad(v[1:], ((0, 1), (0, 0)))).sum(0), rtol=1e-5)


def test_a_read_of_a_groups_statistic_is_loaded_lane_by_lane_into_a_vector():
    # out[b, c] = sum_p x[b, p, c] * exp2(x[b, p, c] * s[b, c // 8]) (a group norm's scale gradient reads its groups'
    # statistics at channel // 8, not linear in the lanes): outside the reduce loop, the read is loaded element by
    # element into a vector once an output vector, and the element is computed as vectors. Its lanes were copies: a
    # U-Net's gradient of 64 lanes was 64 copies of its 60-op element, 300 KB of IR and 0.45 s to compile (46 KB,
    # 0.09 s as vectors)
    from tgfx.lowering.kernel_opts import is_vector_range
    b, p, c, group = 2, 32, 32, 8
    x = UOp(Ops.RESHAPE, dtypes.float32, (g(1, b * p * c),), (b, p, c))
    s = UOp(Ops.RESHAPE, dtypes.float32, (g(2, b * c // group),), (b, 1, c // group, 1))
    s = UOp(Ops.RESHAPE, dtypes.float32, (UOp(Ops.EXPAND, dtypes.float32, (s,), (b, p, c // group, group)),), (b, p, c))
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (x * UOp(Ops.EXP2, dtypes.float32, (x * s,)),), (Ops.ADD, (1,)))
    out = UOp(Ops.RESHAPE, dtypes.float32, (red,), (b, c))
    sink = index_level(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, b * c), out)),)))
    (lane_axis,) = [a for a, r in ranges(sink).items() if r.arg[1] == "loop" and r.src[0].arg == c]
    vectors = apply_opt(sink, Opt("UPCAST", lane_axis, 16))
    assert len(vectors.src) == 1 and sum(is_vector_range(u) for u in vectors.toposort()) == 1
    assert sum(u.op is Ops.EXP2 for u in vectors.toposort()) == 1   # one vector exp, not one per lane
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((b, p, c)).astype(np.float32)
    sv = rng.standard_normal((b, c // group)).astype(np.float32)
    want = (xv * np.exp2(xv * np.repeat(sv, group, axis=1)[:, None, :])).sum(1)
    for opts in ([Opt("UPCAST", lane_axis, 16)], [Opt("UPCAST", lane_axis, 16), Opt("UPCAST", lane_axis, 2)],
                 [Opt("UPCAST", lane_axis, 4)]):
        with use_opts(opts):
            got = tg.jit(lambda t, u: (t * tnp.exp2(t * tnp.repeat(u, group, axis=1)[:, None, :])).sum(1))(
                on_cpu(xv), on_cpu(sv))
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


def test_a_transpose_that_gathers_gets_no_square_tile():
    # out[k, i] = x[i, idx[i, k]] (`take_along_axis` by a sorted order, transposed back, as `tnp.sort(z, axis=0)` of
    # 16 columns does): every lane of a square tile would gather on its own, 256 copies of the load (0.7 s of LLVM).
    # Only the store's axis gets lanes; the values are numpy's
    from tgfx.lowering.inline import inline
    rows, cols = 1024, 16
    x = on_cpu(np.random.default_rng(0).standard_normal((cols, rows)).astype(np.float32))
    idx = on_cpu(np.argsort(np.random.default_rng(1).standard_normal((cols, rows)), axis=1).astype(np.int32))
    out = tnp.take_along_axis(x, idx, axis=1).T
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (out.uop,))).src))
    (ast,) = [call.src[0] for call in linear.src]
    sink = index_level(ast)
    lanes = on_cores(1).lanes()
    assert any(u.op is Ops.LOAD for u in sink.toposort()) and \
        [(o.op, o.amount) for o in hand_coded_opts(sink, on_cores(1))] == [("UPCAST", lanes)]
    np.testing.assert_array_equal(out.numpy(), np.take_along_axis(x.numpy(), idx.numpy(), axis=1).T)


def test_contractions_never_vectorise_an_axis_the_reduce_would_gather():
    # a @ b.T: both inputs are contiguous along the reduce axis and neither output axis is: vectorising n would load
    # b's column one float at a time. The reduce is the vector instead (a dot-product tile: UNROLL by the lanes, its
    # partial sums vector accumulators), and the output axes are only blocked (UPCAST by the tile's rows and columns)
    m, k, n = 64, 64, 64
    a = UOp(Ops.RESHAPE, dtypes.float32, (g(1, m * k),), (m, 1, k))
    b = UOp(Ops.RESHAPE, dtypes.float32, (g(2, n * k),), (1, n, k))
    prod = UOp(Ops.EXPAND, dtypes.float32, (a,), (m, n, k)) * UOp(Ops.EXPAND, dtypes.float32, (b,), (m, n, k))
    red = UOp(Ops.RESHAPE, dtypes.float32, (UOp(Ops.REDUCE_AXIS, dtypes.float32, (prod,), (Ops.ADD, (2,))),), (m, n))
    bias = UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (g(3, n),), (1, n)),), (m, n))
    ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, m * n), red + bias)),))
    sink = graph_rewrite(rangeify(ast), pm_symbolic)
    target = on_cores(1)   # the bias's contiguous n does not count
    rows, cols = target.dot_tile()
    assert hand_coded_opts(sink, target) == [Opt("UNROLL", 2, target.lanes()), Opt("UPCAST", 1, cols),
                                             Opt("UPCAST", 0, rows)]


def test_a_matrix_vector_product_is_a_dot_product_tile_of_partial_sum_vectors():
    # X @ w with 24 features (a logistic regression's logits): no output axis is a vector of any load, the reduce
    # is, by half a vector where a whole one does not divide it; the rows are blocked. Each row was a scalar chain
    # (1000 x 24: 5.2 -> 0.9 us)
    m, k = 1000, 24
    a = UOp(Ops.RESHAPE, dtypes.float32, (g(1, m * k),), (m, k))
    w = UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (g(2, k),), (1, k)),), (m, k))
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (a * w,), (Ops.ADD, (1,)))
    ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, m), UOp(Ops.RESHAPE, dtypes.float32, (red,), (m,)))),))
    sink = graph_rewrite(rangeify(ast), pm_symbolic)
    target = on_cores(1)
    amount = next(n for n in (target.lanes(), target.lanes() // 2, target.lanes() // 4) if k % n == 0)
    opts = hand_coded_opts(sink, target)
    assert opts[0] == Opt("UNROLL", 1, amount) and [o.op for o in opts[1:]] == ["UPCAST"], opts
    x = np.random.default_rng(0).standard_normal((m, k)).astype(np.float32)
    v = np.random.default_rng(1).standard_normal(k).astype(np.float32)
    np.testing.assert_allclose((Tensor(x) @ Tensor(v)).numpy(), x @ v, rtol=1e-5, atol=1e-5)


def test_a_contraction_tile_one_row_high_keeps_independent_accumulators():
    # X.T @ e with 24 features: the tile is the 24 outputs (one row), so the reduce keeps several accumulators
    # (UNROLL of the reduce), each step's FMAs not waiting on the last step's
    m, k = 1000, 24
    x = UOp(Ops.RESHAPE, dtypes.float32, (g(1, m * k),), (m, k))
    e = UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (g(2, m),), (m, 1)),), (m, k))
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (x * e,), (Ops.ADD, (0,)))
    ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, k), UOp(Ops.RESHAPE, dtypes.float32, (red,), (k,)))),))
    opts = hand_coded_opts(graph_rewrite(rangeify(ast), pm_symbolic), on_cores(1))
    assert [o.op for o in opts] == ["UPCAST", "UNROLL"] and opts[1].amount == heuristics.SUM_CHAINS, opts
    xs = np.random.default_rng(0).standard_normal((m, k)).astype(np.float32)
    es = np.random.default_rng(1).standard_normal(m).astype(np.float32)
    np.testing.assert_allclose((Tensor(xs).T @ Tensor(es)).numpy(), xs.T @ es, rtol=1e-4, atol=1e-4)


def test_a_small_kernel_is_left_to_llvms_vectoriser_only_when_it_has_a_transcendental():
    # a small kernel (under SMALL_KERNEL_OPS) is rendered with the loop vectoriser off, as it runs about as long as
    # its launch; not one computing exp's polynomial, whose scalars cost 8-16x its vectors (200 rows: 2.1 -> 0.1 us)
    from tgfx.lowering import render_kernel
    x = UOp(Ops.RESHAPE, dtypes.float32, (g(1, 200),), (200,))
    off = '"llvm.loop.vectorize.enable", i1 false'
    for value, vectorised in ((x * x, False), (UOp(Ops.EXP2, dtypes.float32, (x,)), True)):
        ast = UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, 200), value)),))
        ir, _, _ = render_kernel("k", graph_rewrite(rangeify(ast), pm_symbolic), [])
        assert (off not in ir) == vectorised


def test_a_padded_convolution_gets_register_blocking():
    """tg.nn.conv2d with padding reads its input through a masked, linear index: the heuristic sees the stride-1
    output column and vectorises it (a mod left in the index made every load look non-linear)."""
    from tgfx.lowering.inline import inline
    from tgfx.lowering.schedule import schedule
    x = on_cpu(np.ones((2, 8, 16, 16), np.float32))
    w = on_cpu(np.ones((8, 8, 3, 3), np.float32))
    inlined = inline(UOp(Ops.SINK, None, (tg.nn.conv2d(x, w, padding=1).uop,)))
    linear, _ = schedule(list(inlined.src))
    (call,) = linear.src
    ast = call.src[0]
    sink = graph_rewrite(rangeify(ast), pm_symbolic)
    assert not any(u.op is Ops.MOD for u in sink.toposort())
    assert [o.op for o in hand_coded_opts(sink, on_cores(1))] == ["UPCAST", "UPCAST"]

def test_transcendental_rewrites_leave_no_library_calls_for_float32():
    x = UOp(Ops.VARIABLE, dtypes.float32, (), ("x", 0, 0))
    out = graph_rewrite(UOp(Ops.TANH, dtypes.float32, (UOp(Ops.EXP, dtypes.float32, (x,)),)), pm_transcendental)
    assert not {u.op for u in out.toposort()} & {Ops.EXP, Ops.TANH, Ops.EXP2}
    x64 = UOp(Ops.VARIABLE, dtypes.float64, (), ("x", 0, 0))
    assert graph_rewrite(UOp(Ops.EXP, dtypes.float64, (x64,)), pm_transcendental).op is Ops.EXP
    for op in (Ops.LOG, Ops.LOG2, Ops.LOG1P, Ops.EXPM1):
        out = graph_rewrite(UOp(op, dtypes.float32, (x,)), pm_transcendental)
        assert not {u.op for u in out.toposort()} & {Ops.LOG, Ops.LOG2, Ops.LOG1P, Ops.EXP, Ops.EXP2, Ops.EXPM1}


def test_float32_exp_builds_its_powers_of_two_without_float_to_int_casts():
    # 2^n for the integer-valued n of exp's range reduction: its bits from n + 1.5 * 2^23, not a cast, whose JAX
    # semantics (saturate, NaN to 0) cost seven ops a lane for an n known in range (an exp-sum kernel: 176 -> 111 us)
    x = UOp(Ops.VARIABLE, dtypes.float32, (), ("x", 0, 0))
    for op in (Ops.EXP, Ops.EXP2):
        out = graph_rewrite(UOp(op, dtypes.float32, (x,)), pm_transcendental)
        assert not [u for u in out.toposort() if u.op is Ops.CAST]
    v = np.concatenate([np.linspace(-110, 95, 100001, dtype=np.float32), [0, -0.0, 88.72, 88.73, -87.3, -103.97]])
    v = v.astype(np.float32)
    with np.errstate(all="ignore"):
        want = np.exp(v.astype(np.float64)).astype(np.float32)
    got = tnp.exp(on_cpu(v)).numpy()
    normal = (want >= np.finfo(np.float32).tiny) & (want < np.inf)  # (denormals flush to zero: FLUSH_DENORMALS)
    ulp = np.abs(got[normal].astype(np.float64) - want[normal]) / np.spacing(want[normal])
    assert ulp.max() <= 1
    np.testing.assert_array_equal(got[want == np.inf], np.inf)
    np.testing.assert_array_equal(got[want == 0], 0)


@pytest.mark.parametrize("name,ulps", [("log", 1), ("log2", 1), ("log1p", 2)])
def test_float32_logs_are_within_ulps_of_the_correctly_rounded_value(name, ulps):
    # over the whole float32 range, denormals included, and their edges: 0, 1, inf, -1, nan, negatives
    rng = np.random.default_rng(0)
    x = np.concatenate([np.exp(rng.uniform(-100, 88, 20000)), [0, 1e-45, 1e-40, 1.17e-38, 1, 0.7071067, 0.70710677,
                                                               2, np.inf, -1, -3.5, np.nan, 3.4e38]])
    if name == "log1p":
        x = np.concatenate([x - 1, rng.uniform(-1, 1, 5000), [-1, 1e-8, -1e-8, 3e-7, -0.9999999]])
    x = x.astype(np.float32)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x.astype(np.float64)).astype(np.float32)
        got = getattr(tnp, name)(on_cpu(x)).numpy()
        finite = np.isfinite(want)
        ulp = np.abs(got[finite].astype(np.float64) - want[finite]) / np.spacing(np.abs(want[finite]))
    assert ulp.max() <= ulps
    np.testing.assert_array_equal(got[~finite], want[~finite])


def test_float32_expm1_is_within_a_few_ulps_of_the_correctly_rounded_value():
    # exp's and log's few ulp through Kahan's correction: tiny arguments, both sides of 0, exp's overflow and
    # underflow edges, and the special values
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-20, 20, 20000), np.logspace(-30, 1.9, 3000), -np.logspace(-30, 2, 3000),
                        [0, -0.0, 1e-45, -1e-45, 88.7, 88.8, 100, -104, -200, 3e38, -3e38, np.inf, -np.inf, np.nan]])
    x = x.astype(np.float32)
    with np.errstate(all="ignore"):
        want = np.expm1(x.astype(np.float64)).astype(np.float32)
        got = tnp.expm1(on_cpu(x)).numpy()
        finite = np.isfinite(want)
        ulp = np.abs(got[finite].astype(np.float64) - want[finite]) / np.spacing(np.abs(want[finite]))
    assert ulp.max() <= 3, (ulp.max(), x[finite][ulp.argmax()])
    np.testing.assert_array_equal(got[~finite], want[~finite])
    assert np.signbit(got[x == 0]).tolist() == np.signbit(x[x == 0]).tolist()


@pytest.mark.parametrize("m,k,n", [(64, 64, 64), (33, 17, 48), (128, 256, 96), (5, 300, 7), (96, 8, 512),
                                   (128, 64, 10), (64, 32, 1000)])
def test_optimised_matmuls_match_numpy(m, k, n):
    rng = np.random.default_rng(m * k + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose((on_cpu(a) @ on_cpu(b)).numpy(), a @ b, rtol=2e-5, atol=2e-5)
    # a @ b.T with enough rows reads b through a transposed copy (tgfx/lowering/schedule.py); same answer
    bt = np.ascontiguousarray(b.T)
    np.testing.assert_allclose((on_cpu(a) @ on_cpu(bt).T).numpy(), a @ b, rtol=2e-5, atol=2e-5)


def test_a_classifier_width_is_padded_to_whole_vectors():
    # 10 columns split by no vector width: the heuristic pads them (masked) to one vector and blocks the rows
    opts = hand_coded_opts(matmul_sink(64, 64, 10), on_cores(1))
    assert [o.op for o in opts] == ["PADTO", "UPCAST", "UPCAST"]
    assert opts[0].axis == opts[1].axis == 1 and opts[0].amount == opts[1].amount


def test_rows_that_no_tile_divides_are_padded_to_the_tiles_rows():
    # a weight gradient's 191 inputs (a skip connection's concatenation, 128 + 63): a prime, no divisor near the tile's
    # rows, so they are padded (masked) to a multiple of them, not a tile one row high (NeRF's: 280 -> 95 ms)
    target = on_cores(1)
    rows = target.contraction_tiles(4)[0][1]
    opts = hand_coded_opts(matmul_sink(191, 256, 128), target)
    assert opts[-2:] == [Opt("PADTO", 0, rows), Opt("UPCAST", 0, rows)], opts
    rng = np.random.default_rng(0)
    x, e = rng.standard_normal((512, 191)).astype(np.float32), rng.standard_normal((512, 128)).astype(np.float32)
    np.testing.assert_allclose((on_cpu(x).T @ on_cpu(e)).numpy(), x.T @ e, rtol=1e-4, atol=1e-4)


def test_layout_follows_views_and_broadcasts():
    from tgfx.lowering.layout import _layout
    f32 = dtypes.float32
    buf = UOp(Ops.BUFFER, f32, (), (10**12, "CPU:0", 128 * 10))
    x = UOp(Ops.RESHAPE, f32, (buf,), (128, 10))
    assert _layout(x) == (1, frozenset())
    assert _layout(UOp(Ops.PERMUTE, f32, (x,), (1, 0)))[0] == 0
    row = UOp(Ops.REDUCE_AXIS, f32, (x,), (Ops.ADD, (1,)))            # (128, 1), stored row-major if stored
    bcast = UOp(Ops.EXPAND, f32, (row,), (128, 10))
    assert _layout(bcast) == (0, frozenset({1}))
    # a softmax-like row: x / its row sum runs along axis 1 (the sum does not vary along it)
    assert _layout(UOp(Ops.FDIV, f32, (x, bcast)))[0] == 1
    assert _layout(x + UOp(Ops.PERMUTE, f32, (UOp(Ops.RESHAPE, f32, (buf,), (10, 128)),), (1, 0)))[0] is None


def test_a_transposed_operand_is_read_through_a_copy_only_when_reused_enough():
    from tgfx.lowering.inline import inline

    def kernels(expr) -> list[bool]:  # noqa: ANN001 -- per kernel: whether it reduces
        sink = inline(UOp(Ops.SINK, None, (expr.uop,)))
        linear, _ = schedule(list(sink.src))
        return [any(u.op is Ops.REDUCE_AXIS for u in c.src[0].toposort()) for c in linear.src]
    w = on_cpu(np.ones((32, 64), np.float32))
    g = on_cpu(np.ones((64, 32), np.float32))
    # the target's narrowest contraction tile decides whether a copy pays (schedules only: nothing runs, so the
    # AVX-512 class is scheduled on any host)
    for cpu, four_rows in (("znver4", [True]), ("znver3", [False, True])):
        with tg.config.Context(TGFX_CPU=cpu):
            assert kernels(on_cpu(np.ones((64, 64), np.float32)) @ w.T) == [False, True]  # w.T copied, a @ b
            # 4 rows: a dot product each where the narrowest tile is 8 lanes (AVX-512); AVX2's 4-lane tile pays
            assert kernels(on_cpu(np.ones((4, 64), np.float32)) @ w.T) == four_rows
            assert kernels(on_cpu(np.ones((64, 64), np.float32)) @ g) == [True]            # a @ b as it is


def test_a_short_reduce_copies_the_operand_along_the_output_s_rows():
    # q @ x.T of q (64, 16), x (512, 16) (64 HMC chains' logits): copying the smaller q put the tile's vectors down
    # the output's columns, each stored a lane at a time, and over a reduce of 16 those stores were the kernel's time
    # (80 us on one core); x's copy is no bigger than the output, and with it the tile stores whole rows (7.5 us)
    from tgfx.lowering.operands import _transposed_operand
    rng = np.random.default_rng(0)
    q, x = (on_cpu(rng.standard_normal(s).astype(np.float32)) for s in ((64, 16), (512, 16)))
    red = next(u for u in (q @ x.T).uop.toposort() if u.op is Ops.REDUCE_AXIS)
    assert [u.shape for u in _transposed_operand(red).toposort() if u.op is Ops.CONTIGUOUS] == [(16, 1, 512)]
    np.testing.assert_allclose(tg.jit(lambda q, x: q @ x.T)(q, x).numpy(), q.numpy() @ x.numpy().T, rtol=1e-5,
                               atol=1e-5)
    # a long reduce keeps the smaller copy: the stores are few against its FMAs (and the other copy bigger)
    a, w = (on_cpu(rng.standard_normal(s).astype(np.float32)) for s in ((128, 784), (256, 784)))
    red = next(u for u in (a @ w.T).uop.toposort() if u.op is Ops.REDUCE_AXIS)
    assert [u.shape for u in _transposed_operand(red).toposort() if u.op is Ops.CONTIGUOUS] == [(784, 128, 1)]


def test_float32_transcendentals_are_accurate_to_a_few_ulp():
    import tgfx.numpy as tnp
    xs = np.concatenate([np.linspace(-100, 88, 20001), [0, -0.0, 1e-7, np.nan, np.inf, -np.inf]]).astype(np.float32)
    for f, ref, ulps in ((tnp.exp, np.exp, 2), (tnp.exp2, np.exp2, 2), (tnp.tanh, np.tanh, 4)):
        got = f(on_cpu(xs)).numpy()
        want = ref(xs.astype(np.float64)).astype(np.float32)
        normal = np.isfinite(want) & (np.abs(want) > np.finfo(np.float32).tiny)
        np.testing.assert_allclose(got[normal], want[normal], rtol=ulps * 2.0 ** -23, atol=0)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])


# ---- every option, and combinations, on kernels built through the public API, against numpy ----
_rng = np.random.default_rng(0)
# name -> (function of Tensors or numpy arrays, inputs); the functions are the same code for both
KERNELS = {
    # y broadcast down the rows keeps the two loops apart (a contiguous elementwise kernel is one loop: merge_loops)
    "elementwise": (lambda x, y: x * 2 + y, [_rng.standard_normal((7, 33)), _rng.standard_normal((1, 33))]),
    "sum_axis0": (lambda x: x.sum(axis=0), [_rng.standard_normal((13, 6, 11))]),
    "sum_axis1": (lambda x: x.sum(axis=1), [_rng.standard_normal((6, 13, 11))]),
    # (y broadcast down the first axis keeps the output's two loops apart, as above)
    "sum_axis2": (lambda x, y: (x * y).sum(axis=2),
                  [_rng.standard_normal((5, 6, 12)), _rng.standard_normal((1, 6, 12))]),
    # all negative: a padded reduce that adds 0 instead of the identity (-inf) would show
    "max_axis1": (lambda x: x.max(axis=1), [-np.abs(_rng.standard_normal((6, 13, 5))) - 1]),
    "matmul": (lambda a, b: a @ b, [_rng.standard_normal((33, 17)), _rng.standard_normal((17, 45))]),
    "broadcast": (lambda x, y: x * y - 1, [_rng.standard_normal((7, 1)), _rng.standard_normal((1, 12))]),
    "transposed": (lambda x: x.T + 1, [_rng.standard_normal((9, 14))]),
}


def _inputs(name):
    return [a.astype(np.float32) for a in KERNELS[name][1]]


def _sink(name):
    fn, arrays = KERNELS[name][0], _inputs(name)
    linear, _ = schedule([fn(*[on_cpu(a) for a in arrays]).uop])
    assert len(linear.src) == 1
    return index_level(linear.src[0].src[0])


def _check(name, opts):
    fn, arrays = KERNELS[name][0], _inputs(name)
    tg.counters.reset()
    with use_opts(opts):
        got = fn(*[on_cpu(a) for a in arrays]).numpy()
    assert tg.counters.kernel_count == 1
    np.testing.assert_allclose(got, fn(*arrays), rtol=1e-5, atol=1e-5, err_msg=f"{name} with {opts}")


@pytest.mark.parametrize("name", KERNELS)
def test_every_single_option_gives_numpys_answer(name):
    acts = actions(_sink(name), [], on_cores(3))
    # every kind of option on every kernel (UNROLL where a reduce range splits; a prime one is padded instead)
    # (SWAP where two output loops remain: sum_axis0's are contiguous, one loop after merge_loops)
    ops = {"UPCAST", "PADTO", "THREAD"} | ({"UNROLL"} if name == "sum_axis2" else set()) | \
        ({"SWAP"} if len(_loops(_sink(name))) > 1 else set())
    assert ops <= {a.op for a in acts}
    for act in acts:
        _check(name, [act])


# ranges by id: output axes first, then reduce axes (rangeify's numbering)
COMBOS = [
    ("elementwise", [Opt("PADTO", 1, 16), Opt("UPCAST", 1, 16)]),
    ("elementwise", [Opt("PADTO", 1, 8), Opt("UPCAST", 1, 8), Opt("PADTO", 0, 4), Opt("THREAD", 0, 2)]),
    ("elementwise", [Opt("SWAP", 0, 1), Opt("PADTO", 1, 8), Opt("UPCAST", 1, 4)]),
    ("sum_axis0", [Opt("PADTO", 2, 8), Opt("UNROLL", 2, 8), Opt("UPCAST", 0, 3), Opt("THREAD", 0, 2)]),
    ("sum_axis1", [Opt("PADTO", 2, 4), Opt("UNROLL", 2, 4), Opt("PADTO", 1, 4), Opt("UPCAST", 1, 4)]),
    ("sum_axis2", [Opt("PADTO", 2, 16), Opt("UNROLL", 2, 16), Opt("SWAP", 0, 1)]),
    ("sum_axis2", [Opt("UNROLL", 2, 4), Opt("UNROLL", 2, 3), Opt("PADTO", 1, 4), Opt("UPCAST", 1, 8)]),
    ("max_axis1", [Opt("PADTO", 2, 8), Opt("UNROLL", 2, 2), Opt("UNROLL", 2, 4), Opt("UPCAST", 1, 5)]),
    ("matmul", [Opt("PADTO", 1, 16), Opt("UPCAST", 1, 16), Opt("PADTO", 0, 4), Opt("UPCAST", 0, 4),
                Opt("PADTO", 2, 4), Opt("UNROLL", 2, 4), Opt("THREAD", 0, 3)]),
    ("matmul", [Opt("SWAP", 0, 1), Opt("PADTO", 0, 16), Opt("UPCAST", 0, 8), Opt("THREAD", 1, 3)]),
    ("matmul", [Opt("PADTO", 0, 8), Opt("PADTO", 0, 16)]),  # padding twice: only the second rounds up further
    ("broadcast", [Opt("PADTO", 0, 4), Opt("UPCAST", 0, 4), Opt("PADTO", 1, 8), Opt("UPCAST", 1, 8),
                   Opt("SWAP", 0, 1)]),
    ("transposed", [Opt("SWAP", 0, 1), Opt("PADTO", 0, 4), Opt("UPCAST", 0, 4), Opt("THREAD", 1, 2)]),
]


@pytest.mark.parametrize("name,opts", COMBOS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(COMBOS)])
def test_option_combinations_give_numpys_answer(name, opts):
    _check(name, opts)


@settings(max_examples=30)
@given(st.sampled_from(["matmul", "sum_axis1", "max_axis1", "transposed"]),
       st.lists(st.integers(0, 10 ** 6), max_size=4))
def test_random_option_sequences_give_numpys_answer(name, picks):
    """A random walk through the search's own moves: whatever the search could pick must be right."""
    sink, opts = _sink(name), []
    for p in picks:
        acts = actions(sink, opts, on_cores(3))
        try:
            sink = apply_opts(sink, [acts[p % len(acts)]])
            opts.append(acts[p % len(acts)])
        except KernelOptError:
            pass
    _check(name, opts)


def test_padto_masks_loads_stores_and_reduce_contributions():
    sink = matmul_sink(5, 7, 9)  # ranges 0 (5), 1 (9), reduce 2 (7)
    out = apply_opt(sink, Opt("PADTO", 1, 4))
    assert ranges(out)[1].src[0].arg == 12
    (st_,) = out.src
    assert len(st_.src) == 3 and st_.src[2] is (ranges(out)[1] < 9)  # the store is gated on the real size
    b_index = next(u for u in out.toposort() if u.op is Ops.INDEX and u.src[0].arg[0] == 2)
    # b's offset could leave b: clamped, the select around the padded range's term alone (the reduce's term stays in
    # b by itself): one select a column, outside the reduce loop, not one each step of it
    n, k = ranges(out)[1], ranges(out)[2]
    assert b_index.src[1] is (n < 9).where(n, n.const_like(0)) + k * 9, b_index.src[1]
    assert st_.src[0].src[1].op is Ops.WHERE   # a store's index stays whole: its select is the vector store's mask
    red = apply_opt(sink, Opt("PADTO", 2, 4))
    (reduce_,) = [u for u in red.toposort() if u.op is Ops.REDUCE]
    assert reduce_.src[1].src[0].arg == 8 and reduce_.src[0].op is Ops.WHERE and reduce_.src[0].src[2].arg == 0
    assert len(red.src[0].src) == 2  # a padded reduce range needs no gate on the store


def test_padto_then_upcast_keeps_gates_only_on_lanes_that_can_be_padding(monkeypatch):
    monkeypatch.setattr(kernel_opts, "VECTOR_UPCAST", False)
    out = apply_opts(matmul_sink(4, 8, 1000), [Opt("PADTO", 1, 16), Opt("UPCAST", 1, 16)])
    # 1008 = 63 * 16: lanes 0..7 always land below 1000, lanes 8..15 are padding in the last group
    assert sorted(len(s.src) for s in out.src) == [2] * 8 + [3] * 8
    # as a vector range: one store, gated by the lanes' validity (a masked store)
    monkeypatch.setattr(kernel_opts, "VECTOR_UPCAST", True)
    (st,) = apply_opts(matmul_sink(4, 8, 1000), [Opt("PADTO", 1, 16), Opt("UPCAST", 1, 16)]).src
    assert len(st.src) == 3 and any(u.op is Ops.RANGE and u.arg[1] == "vector" for u in st.src[2].toposort())


def test_swap_exchanges_the_loop_order():
    sink = matmul_sink(4, 8, 16)
    lin, _ = linearize(apply_opt(sink, Opt("SWAP", 0, 1)))
    assert [u.src[0].arg for u in lin if u.op is Ops.RANGE] == [16, 4, 8]  # n outermost, then m, then k
    lin, _ = linearize(sink)
    assert [u.src[0].arg for u in lin if u.op is Ops.RANGE] == [4, 16, 8]
    square = matmul_sink(8, 8, 8)
    assert apply_opt(apply_opt(square, Opt("SWAP", 0, 1)), Opt("SWAP", 1, 0)) is square


def test_options_that_do_not_fit_raise_kernel_opt_error():
    sink = matmul_sink(4, 8, 16)  # ranges 0 (4), 1 (16), reduce 2 (8)
    bad = [Opt("PADTO", 1, 8),    # 16 is a multiple of 8 already
           Opt("PADTO", 0, 16),   # 4 -> 16 would quadruple the work
           Opt("PADTO", 0, 1), Opt("PADTO", 7, 4),
           Opt("SWAP", 0, 0), Opt("SWAP", 0, 2),  # the same range; a reduce range
           Opt("SWAP", 0, 9), Opt("THREAD", 2, 2), Opt("UNROLL", 0, 2), Opt("GROUP", 0, 2)]
    for opt in bad:
        with pytest.raises(KernelOptError):
            apply_opt(sink, opt)
    with pytest.raises(KernelOptError):
        apply_opts(matmul_sink(5, 8, 16), [Opt("PADTO", 0, 4), Opt("UPCAST", 0, 3)])  # 8 does not split by 3


def test_forced_options_that_do_not_fit_reach_the_user():
    with pytest.raises(KernelOptError, match="UPCAST"), use_opts([Opt("UPCAST", 0, 5)]):
        (on_cpu(np.ones((4, 4), np.float32)) + 1).numpy()


@pytest.mark.parametrize("cpu", ["", "haswell"])
def test_a_contraction_with_a_tile_epilogue_is_one_kernel_rendered_as_vectors(cpu):
    # w - lr * (x.T @ g) and a residual add: the epilogue reads a tile of another buffer, loaded, combined and stored
    # as the accumulators' vectors after the reduce loop (once LLVM's SLP vectoriser had to rebuild the tile and gave
    # up, every lane scalar, 26x slower, and such contractions were stored first: one more pass over the output and a
    # kernel launch, 0.1 of an MLP's SGD step). A bias (one row broadcast) is fused too.
    import re

    from tgfx.lowering import render_kernel
    from tgfx.lowering.compile import optimized_ir
    from tgfx.lowering.inline import inline
    from tgfx.lowering.optimize import apply_hand_coded
    rng = np.random.default_rng(0)
    x, gr, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((128, 96), (128, 64), (96, 64), (64,)))

    def kernels(expr) -> list[UOp]:  # noqa: ANN001
        sink = inline(UOp(Ops.SINK, None, (expr.uop,)))
        linear, _ = schedule(list(sink.src))
        return [c.src[0] for c in linear.src]
    target = target_for(cpu) if cpu else host_target()
    upd = on_cpu(w) - 0.01 * (on_cpu(x).T @ on_cpu(gr))
    res = on_cpu(x).T @ on_cpu(gr) + on_cpu(w)
    for expr in (upd, res):
        ks = kernels(expr)
        assert len(ks) == 1 and any(u.op is Ops.REDUCE_AXIS for u in ks[0].toposort())
        sink, opts = apply_hand_coded(index_level(ks[0]), target)
        ir, _, _ = render_kernel("k", sink, opts, target)
        # the epilogue as vectors: the other buffer's tile loaded whole, every result stored as a vector
        opt = optimized_ir(ir, target)
        assert re.search(r"store <\d+ x float>", opt) and not re.search(r"store float", opt)
    np.testing.assert_allclose(upd.numpy(), w - 0.01 * (x.T @ gr), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(res.numpy(), x.T @ gr + w, rtol=1e-5, atol=1e-5)
    assert len(kernels(on_cpu(x) @ on_cpu(w) + on_cpu(b))) == 1


def test_a_dot_product_contraction_with_a_computed_operand_reads_the_other_through_a_transposed_copy():
    # g @ w.T with w stored (64, 32) and g computed (a gradient adding a transposed term: no layout of its own until
    # it is stored, row-major): every operand runs along the summed axis, each output a dot product and its epilogue
    # scalar. w is read through a transposed copy, as for two stored operands, so the tile's vectors run along the
    # output and so does an epilogue (a graph attention step's ELU gradient, exp of a stored tile: 507 us fused as
    # dot products, 57 as a plain matmul)
    from tgfx.lowering.layout import _dot_layout
    from tgfx.lowering.operands import _transposed_operand
    rng = np.random.default_rng(0)
    p, q, w = (on_cpu(rng.standard_normal(s).astype(np.float32)) for s in ((512, 32), (32, 512), (64, 32)))
    red = next(u for u in ((p + q.T) @ w.T).uop.toposort() if u.op is Ops.REDUCE_AXIS)
    assert not _dot_layout(red) and _dot_layout(red, unknown=True)
    copied = _transposed_operand(red)
    assert copied is not None and any(u.op is Ops.CONTIGUOUS for u in copied.toposort())
    z = rng.standard_normal((512, 64)).astype(np.float32)
    out = tg.jit(lambda p, q, w, z: ((p + q.T) @ w.T) * tnp.where(z > 0, 1.0, tnp.exp(z)))(p, q, w, on_cpu(z))
    np.testing.assert_allclose(out.numpy(), ((p.numpy() + q.numpy().T) @ w.numpy().T) * np.where(z > 0, 1, np.exp(z)),
                               rtol=1e-4, atol=1e-4)


# ---- contiguous output axes are one loop ----
def _loops(sink: UOp) -> list[int]:
    return [u.src[0].arg for u in sink.toposort() if u.op is Ops.RANGE and u.arg[1] == "loop"]


def test_a_contiguous_elementwise_kernel_is_one_loop():
    """w - lr * g over (512, 10): the two output axes every index steps through as `i * 10 + j` become one loop of
    5120 (kept apart, LLVM unrolled the 10 and vectorised the 512 with gathers), and the values are numpy's."""
    w, g = np.arange(5120, dtype=np.float32).reshape(512, 10), np.ones((512, 10), np.float32)
    out = on_cpu(w) - 0.5 * on_cpu(g)
    linear, _ = schedule([out.uop])
    sink = index_level(linear.src[0].src[0])
    assert _loops(sink) == [5120]
    assert not any(u.op in (Ops.IDIV, Ops.MOD) for u in sink.toposort())
    np.testing.assert_array_equal(out.numpy(), w - 0.5)


@pytest.mark.parametrize("fn,shape", [(lambda x, b: x + b, (16, 10)), (lambda x, b: x.T + 1, (16, 10)),
                                      (lambda x, b: x.reshape(4, 5, 8).sum(axis=1), (20, 8))],
                         ids=["row_broadcast", "transpose", "reduce_between"])
def test_axes_an_index_does_not_step_through_as_one_stay_apart(fn, shape):
    """A bias broadcast down the rows (read at j alone), a transpose (read at j * 16 + i), a reduce's output axes
    with its reduce axis between them (read at i * 40 + k * 8 + j): two loops, and the values are numpy's."""
    x, b = np.arange(160, dtype=np.float32).reshape(shape), np.ones((1, 10), np.float32)
    out = fn(on_cpu(x), on_cpu(b))
    linear, _ = schedule([out.uop])
    sink = index_level(linear.src[-1].src[0])
    assert len(_loops(sink)) == 2
    np.testing.assert_allclose(out.numpy(), fn(x, b))


def test_an_output_range_read_by_head_split_becomes_two_loops():
    """The bias gradient of attention's projections sums over batch and sequence a value laid out by head: its output
    axis (heads x head dims) is read as `r // 32 * 2048 + r % 32`, no axis a vector could take. Split into two loops
    (`split_ranges` on output ranges), the head dims are contiguous and vectorised (35 -> 6.8 us)."""
    y = np.random.default_rng(0).standard_normal((16, 4, 64, 32)).astype(np.float32)
    fn = lambda v: v.transpose(0, 2, 1, 3).reshape(16, 64, 128).sum((0, 1))  # noqa: E731
    with pytest.MonkeyPatch.context() as mp:   # (one kernel: on more cores, partial sums first, split_reduce.py)
        mp.setattr(schedule_module, "host_target", lambda: on_cores(1))
        linear, _ = schedule([fn(on_cpu(y)).uop])
    (ast,) = [c.src[0] for c in linear.src]
    sink = index_level(ast)
    loops = [r for r in ranges(sink).values() if r.arg[1] == "loop"]
    assert sorted(r.src[0].arg for r in loops) == [4, 32]
    assert any(o.op == "UPCAST" for o in hand_coded_opts(sink, on_cores(1)))
    np.testing.assert_allclose(fn(on_cpu(y)).numpy(), fn(y), rtol=1e-5, atol=1e-4)


def test_reduces_side_by_side_count_as_one_after_the_other_for_threads():
    """`tanh(x @ a) + einsum(y, b)`: two sums of 32 for each of 64 x 8 outputs, 32,768 iterations in all. Counted as
    the product of every range (as if nested: 524,288), the kernel was split 8 ways on 2 cores (21-45 us a call in
    a reverse scan's step, 10 ms when a worker thread waited on a busy host); one thread takes 2-4 us."""
    rng = np.random.default_rng(0)
    x, a, y, b = (on_cpu(rng.standard_normal(s).astype(np.float32))
                  for s in [(64, 32), (32, 8), (64, 4, 8), (4, 8, 8)])
    out = tnp.tanh(x @ a) + tnp.einsum("bai,aij->bj", y, b)
    linear, _ = schedule([out.uop])
    assert len(linear.src) == 1
    sink = index_level(linear.src[0].src[0])
    assert len({u for u in sink.toposort() if u.op is Ops.REDUCE}) == 2
    assert not any(o.op == "THREAD" for o in hand_coded_opts(sink, on_cores(2)))
    # four times the rows is work enough for two threads
    x4, y4 = (on_cpu(rng.standard_normal((1024, *s)).astype(np.float32)) for s in [(32,), (4, 8)])
    linear, _ = schedule([(tnp.tanh(x4 @ a) + tnp.einsum("bai,aij->bj", y4, b)).uop])
    assert any(o.op == "THREAD" for o in hand_coded_opts(index_level(linear.src[0].src[0]), on_cores(2)))
    want = np.tanh(x.numpy() @ a.numpy()) + np.einsum("bai,aij->bj", y.numpy(), b.numpy())
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


def test_a_small_kernels_sums_that_no_tile_takes_are_independent_chains():
    """REINFORCE's reverse-scan step: a tanh's gradient plus two sums read at different strides, in one kernel, got
    no option: one output at a time, each a chain of dependent adds (19.5 us). The innermost output loop as lane
    copies makes independent chains (BEAM's choice too: 4.5 us); a kernel big enough for threads keeps its split."""
    rng = np.random.default_rng(0)
    g, u, v, y, b, dz, z, w = (on_cpu(rng.standard_normal(s).astype(np.float32)) for s in
                               [(64, 8), (64, 8), (64, 8), (64, 8, 4), (8, 4, 8), (64, 32), (64, 32), (32, 8)])
    out = g * (1 - tnp.tanh(u + v) ** 2) + tnp.einsum("bla,jal->bj", y, b) + (dz * (1 - z * z)) @ w
    linear, _ = schedule([out.uop])
    assert len(linear.src) == 1
    sink = index_level(linear.src[0].src[0])
    assert len({u for u in sink.toposort() if u.op is Ops.REDUCE}) == 2
    for target in (on_cores(2), target_for("haswell").with_cores(2)):
        assert [o.op for o in hand_coded_opts(sink, target)] == ["UPCAST"], hand_coded_opts(sink, target)
    want = (g.numpy() * (1 - np.tanh(u.numpy() + v.numpy()) ** 2) + np.einsum("bla,jal->bj", y.numpy(), b.numpy())
            + (dz.numpy() * (1 - z.numpy() ** 2)) @ w.numpy())
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


def test_a_costly_elementwise_kernels_long_loop_goes_inside_a_short_one():
    """Threefry's bits for 64 x 4 logits plus a bias along the rows of 4 (a categorical draw): the loops do not merge
    (the bias reads the 4 alone), LLVM vectorises no loop of 4, and each element's hash ran scalar. The long loop is
    swapped inside; a cheap element (x * 2 + bias) keeps its order (strided stores would cost more than it saves)."""
    def kernel_opts(f, *args):   # (loop sizes, options) of each kernel of f's jitted program
        jitted = tg.jit(f)
        out = jitted(*args)
        prog = next(iter(jitted._cache._d.values()))[0]
        sinks = [index_level(c.src[0]) for c in prog.calls if c.src[0].op is Ops.SINK]
        return out, [(sorted(r.src[0].arg for r in ranges(k).values()), [o.op for o in hand_coded_opts(k, on_cores(1))])
                     for k in sinks]
    key = tg.device_put(tg.random.PRNGKey(3), "CPU")
    bias = on_cpu(np.arange(4, dtype=np.float32))
    got, seen = kernel_opts(lambda k, b: tg.random.uniform(k, (64, 4)) + b, key, bias)
    assert ([4, 64], ["SWAP"]) in seen, seen
    np.testing.assert_allclose(got.numpy() - np.arange(4), tg.random.uniform(key, (64, 4)).numpy(), rtol=1e-6,
                               atol=1e-6)
    got, seen = kernel_opts(lambda x, b: x * 2 + b, on_cpu(np.ones((64, 4), np.float32)), bias)
    assert seen == [([4, 64], [])], seen
    np.testing.assert_allclose(got.numpy(), 2 + np.arange(4)[None].repeat(64, 0))


def test_a_contractions_tile_rows_are_those_its_vector_operand_is_reused_along():
    """An FFT stage out[k, K, c] = sum_n w[k, n] x[n, K, c]: both k and K are output axes one operand does not vary
    along. The tile's rows are k, along which the vectors of x (read along c) stay the same, each broadcast against
    a row's scalar of w; rows along K loaded a vector of x per row and step (a 128-point stage: 19 -> 6 us)."""
    k, n, big, c = 8, 16, 16, 128
    w = UOp(Ops.RESHAPE, dtypes.float32, (g(1, k * n),), (k, 1, 1, n))
    x = UOp(Ops.RESHAPE, dtypes.float32, (UOp(Ops.PERMUTE, dtypes.float32, (
        UOp(Ops.RESHAPE, dtypes.float32, (g(2, n * big * c),), (n, big, c)),), (1, 2, 0)),), (1, big, c, n))
    shape = (k, big, c, n)
    prod = UOp(Ops.EXPAND, dtypes.float32, (w,), shape) * UOp(Ops.EXPAND, dtypes.float32, (x,), shape)
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (prod,), (Ops.ADD, (3,)))
    out = UOp(Ops.RESHAPE, dtypes.float32, (red,), (k, big, c))
    sink = graph_rewrite(rangeify(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (g(0, k * big * c), out)),))),
                         pm_symbolic)
    loops = {r.src[0].arg: r.arg[0] for r in ranges(sink).values() if r.arg[1] == "loop"}
    ups = [o for o in hand_coded_opts(sink, on_cores(1)) if o.op == "UPCAST"]
    assert ups[0].axis == loops[c] and ups[1].axis == loops[k], ups


def test_pairs_written_from_planes_are_vectors_of_both_parts():
    """A complex value's pairs written from its (re, im) planes and a table of pairs: every store two elements apart
    along the frequencies, no axis a store runs along. The frequencies as vectors (the renderer's masked loads and
    stores a step of 2 apart) and the pair's two parts as copies; LLVM took the pair axis of 2, element by element."""
    planes = np.random.default_rng(0).standard_normal((3, 2, 64)).astype(np.float32)
    table = np.random.default_rng(1).standard_normal((64, 2)).astype(np.float32)
    f = lambda x, t: x.transpose(0, 2, 1) * t + x[:, ::-1].transpose(0, 2, 1)
    jitted = tg.jit(f)
    got = jitted(tnp.asarray(planes), tnp.asarray(table))
    np.testing.assert_allclose(got.numpy(), f(planes, table), rtol=1e-6)
    prog = next(iter(jitted._cache._d.values()))[0]
    (sink,) = [index_level(c.src[0]) for c in prog.calls if c.src[0].op is Ops.SINK]
    loops = {r.src[0].arg: r.arg[0] for r in ranges(sink).values() if r.arg[1] == "loop"}
    assert hand_coded_opts(sink, on_cores(1)) == [Opt("UPCAST", loops[64], host_target().lanes(4)),
                                                   Opt("UPCAST", loops[2], 2)]


def test_a_flipped_sums_stride_is_its_negation():
    """The index of a flipped axis split into lanes, -(i * 16 + lane) * 2 + 129, steps by -2 along the lane (a
    masked vector load from the last lane's address, reversed), not a gather of unknown stride."""
    i = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, 4),), (0, "loop"))
    lane = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, 16),), (1, "vector"))
    flipped = (-(i * 16 + lane)) * 2 + 129
    assert kernel_opts._coef(flipped, lane) == -2 and kernel_opts._coef(flipped, i) == -32
    assert kernel_opts._coef(flipped * flipped, lane) is None


def test_simplifying_after_an_option_that_simplified_already_tries_no_rule(monkeypatch):
    """An UPCAST's vector lanes come out of the index simplifier; the simplification after the options then finds
    every node in the simplifier's memo and tries no rule (a matcher of the simplifier and the gate rules together,
    memoised apart, tried each rule on every node again: 58 ms of spectral's first call, 9 of its 20 passes changing
    nothing). With a PADTO's gated store it gives what the two matchers together give."""
    from tgfx.ir.pattern import PatternMatcher
    from tgfx.lowering.kernel_opts import pm_fold_gates, simplify_after_opts
    tries = []
    real = PatternMatcher.rewrite
    monkeypatch.setattr(PatternMatcher, "rewrite", lambda self, u, ctx=None: tries.append(u) or real(self, u, ctx))
    sink = matmul_sink(3, 11, 48)     # (sizes no other test uses: nodes no earlier pass has memoised)
    plain = apply_opt(sink, Opt("UPCAST", 1, 4), simplify=False)
    tries.clear()
    assert apply_opt(sink, Opt("UPCAST", 1, 4)) is plain and simplify_after_opts(plain) is plain
    assert tries == []
    padded = apply_opt(apply_opt(matmul_sink(5, 7, 45), Opt("PADTO", 1, 48), simplify=False), Opt("UPCAST", 1, 16),
                       simplify=False)
    assert any(u.op is Ops.STORE and len(u.src) == 3 for u in padded.toposort())
    assert simplify_after_opts(padded) is graph_rewrite(padded, pm_symbolic + pm_fold_gates)
