"""Kernel options on tiny graphs (exact structure), and optimised kernels against numpy."""
import numpy as np
import pytest

import tgfx as tg
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.optimize import KernelOptError, Opt, apply_opt, global_size, hand_coded_opts, ranges
from tgfx.lowering.rangeify import rangeify
from tgfx.lowering.symbolic import pm_symbolic
from tgfx.lowering.transcendental import pm_transcendental


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


def test_upcast_replicates_the_store_per_lane():
    sink = matmul_sink(4, 8, 16)
    out = apply_opt(sink, Opt("UPCAST", 1, 4))
    assert len(out.src) == 4
    assert ranges(out)[1].src[0].arg == 4  # the range now counts groups of lanes
    assert len({u for u in out.toposort() if u.op is Ops.REDUCE}) == 4


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
    opts = hand_coded_opts(matmul_sink(64, 64, 64), cores=2)
    assert [o.op for o in opts] == ["UPCAST", "UPCAST", "THREAD"]


def test_a_padded_convolution_gets_register_blocking():
    """tg.nn.conv2d with padding reads its input through a masked, linear index: the heuristic sees the stride-1
    output column and vectorises it (a mod left in the index made every load look non-linear)."""
    from tgfx.lowering.inline import pm_inline
    from tgfx.lowering.schedule import schedule
    x = tg.asarray(np.ones((2, 8, 16, 16), np.float32))
    w = tg.asarray(np.ones((8, 8, 3, 3), np.float32))
    inlined = graph_rewrite(UOp(Ops.SINK, None, (tg.nn.conv2d(x, w, padding=1).uop,)), pm_inline)
    linear, _ = schedule(list(inlined.src))
    (call,) = linear.src
    ast = call.src[0].arg if call.src[0].op is Ops.KERNEL else call.src[0]
    sink = graph_rewrite(rangeify(ast), pm_symbolic)
    assert not any(u.op is Ops.MOD for u in sink.toposort())
    assert [o.op for o in hand_coded_opts(sink, cores=1)] == ["UPCAST", "UPCAST"]

def test_transcendental_rewrites_leave_no_library_calls_for_float32():
    x = UOp(Ops.VARIABLE, dtypes.float32, (), ("x", 0, 0))
    out = graph_rewrite(UOp(Ops.TANH, dtypes.float32, (UOp(Ops.EXP, dtypes.float32, (x,)),)), pm_transcendental)
    assert not {u.op for u in out.toposort()} & {Ops.EXP, Ops.TANH, Ops.EXP2}
    x64 = UOp(Ops.VARIABLE, dtypes.float64, (), ("x", 0, 0))
    assert graph_rewrite(UOp(Ops.EXP, dtypes.float64, (x64,)), pm_transcendental).op is Ops.EXP


@pytest.mark.parametrize("m,k,n", [(64, 64, 64), (33, 17, 48), (128, 256, 96), (5, 300, 7), (96, 8, 512)])
def test_optimised_matmuls_match_numpy(m, k, n):
    rng = np.random.default_rng(m * k + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose((tg.asarray(a) @ tg.asarray(b)).numpy(), a @ b, rtol=2e-5, atol=2e-5)


def test_float32_transcendentals_are_accurate_to_a_few_ulp():
    import tgfx.numpy as tnp
    xs = np.concatenate([np.linspace(-100, 88, 20001), [0, -0.0, 1e-7, np.nan, np.inf, -np.inf]]).astype(np.float32)
    for f, ref, ulps in ((tnp.exp, np.exp, 2), (tnp.exp2, np.exp2, 2), (tnp.tanh, np.tanh, 4)):
        got = f(tg.asarray(xs)).numpy()
        want = ref(xs.astype(np.float64)).astype(np.float32)
        normal = np.isfinite(want) & (np.abs(want) > np.finfo(np.float32).tiny)
        np.testing.assert_allclose(got[normal], want[normal], rtol=ulps * 2.0 ** -23, atol=0)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
