"""A small kernel's reduce along memory of a length no vector takes (a classifier's 30 classes): independent
accumulators (`reduce_chains.chain_opts`), not one scalar chain per output, which LLVM's loop vectoriser (off for
small kernels) left it. Counted, never timed: the options chosen; and the values are numpy's over lengths 3..100,
NaN and infinite rows included."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import index_kernels, opt_kinds
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices.target import Target, target_for
from tgfx.ir.uop import UOp
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.kernel_opts import Opt
from tgfx.lowering.optimize import use_opts

# the two x86 vector widths: AVX-512 (16 float lanes) and AVX2 (8); options only, so any host picks them
CPUS = ["znver4", "haswell"]


def _target(cpu: str) -> Target:
    return target_for(cpu).with_cores(1)


def _kernels(fn, shape: tuple[int, ...]) -> list[UOp]:  # noqa: ANN001
    return index_kernels(fn(tg.asarray(np.zeros(shape, np.float32))))


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize(("n", "want"), [
    # 30 classes: 3 chains of 10 (the row max of a log-softmax: 3.4 -> 0.5 us, AVX-512)
    (30, [("UNROLL", "reduce", 3)]),
    (100, [("UNROLL", "reduce", 4)]),
    (26, [("UNROLL", "reduce", 2)]),
    # a prime length: padded with the reduce's identity to 4 chains of 8
    (31, [("PADTO", "reduce", 4), ("UNROLL", "reduce", 4)]),
    (7, [("PADTO", "reduce", 4), ("UNROLL", "reduce", 4)]),
])
@pytest.mark.parametrize("reduce", [tnp.max, tnp.min, tnp.sum])
def test_a_small_odd_reduce_along_memory_keeps_independent_chains(cpu: str, n: int, want: list, reduce) -> None:  # noqa: ANN001
    (sink,) = _kernels(lambda x: reduce(x, axis=1, keepdims=True), (32, n))
    assert opt_kinds(hand_coded_opts(sink, _target(cpu)), sink) == want


@pytest.mark.parametrize("cpu", CPUS)
def test_a_large_or_transcendental_reduce_is_left_to_the_loop_vectoriser(cpu: str) -> None:
    """Not where the kernel is too big to be small (LLVM's loop vectoriser takes it, and an UNROLL would turn that
    off), nor where each element takes a transcendental (a logsumexp's exp-sum: not small either)."""
    (big,) = _kernels(lambda x: tnp.max(x, axis=1, keepdims=True), (4096, 30))
    assert not [o for o in hand_coded_opts(big, _target(cpu)) if o.op in ("UNROLL", "PADTO")]
    exp_sum = _kernels(lambda x: tnp.sum(tnp.exp(x), axis=1, keepdims=True), (32, 30))[-1]
    assert not [o for o in hand_coded_opts(exp_sum, _target(cpu)) if o.op in ("UNROLL", "PADTO")]


def _rows(n: int, seed: int) -> np.ndarray:
    """32 rows of n: normal values, a row with a NaN, one with +inf, one with -inf, one of all -inf, one of NaN and
    inf, each at a position that varies with the seed (any chain's lane)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, n)).astype(np.float32)
    at = rng.integers(0, n, 4)
    x[1, at[0]] = np.nan
    x[2, at[1]] = np.inf
    x[3, at[2]] = -np.inf
    x[4] = -np.inf
    x[5, at[3]], x[5, (at[3] + 1) % n] = np.inf, np.nan
    return x


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 100), seed=st.integers(0, 2**16))
def test_small_reduces_match_numpy(n: int, seed: int) -> None:
    """max and min exactly numpy's (NaN wherever a row has one), sums within float32's rounding of float64's."""
    x = _rows(n, seed)
    t = tg.asarray(x)
    np.testing.assert_array_equal(np.asarray(tnp.max(t, axis=1)), x.max(1))
    np.testing.assert_array_equal(np.asarray(tnp.min(t, axis=1)), x.min(1))
    fin = x[6:]
    got = np.asarray(tnp.sum(tg.asarray(fin), axis=1), np.float64)
    want = fin.astype(np.float64).sum(1)
    assert np.all(np.abs(got - want) <= n * np.finfo(np.float32).eps * np.abs(fin).sum(1))
    s = np.asarray(tnp.sum(t, axis=1))
    np.testing.assert_array_equal(np.isnan(s[:6]), np.isnan(x[:6].sum(1)))


def test_log_softmax_over_30_classes_matches_numpy() -> None:
    """The reproducer: a GRU step's `-take_along_axis(log_softmax(h @ w), y)` over 30 classes, jitted."""
    rng = np.random.default_rng(0)
    h = rng.standard_normal((32, 128)).astype(np.float32)
    w = rng.standard_normal((128, 30)).astype(np.float32)
    y = rng.integers(0, 30, 32).astype(np.int32)
    f = tg.jit(lambda h, w, y: -tnp.take_along_axis(tg.nn.log_softmax(h @ w), y[:, None], axis=1)[:, 0])
    z = h.astype(np.float64) @ w.astype(np.float64)
    lse = z.max(1) + np.log(np.exp(z - z.max(1, keepdims=True)).sum(1))
    np.testing.assert_allclose(np.asarray(f(tg.asarray(h), tg.asarray(w), tg.asarray(y))),
                               lse - z[np.arange(32), y], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
@pytest.mark.parametrize("n", [3, 7, 30])
def test_half_float_sums_in_odd_chains(dtype, n: int) -> None:  # noqa: ANN001
    """A half float's sum in 3 chains (a vector range of 3 lanes) is combined two lanes and the odd one: the odd lane
    set aside left two lanes, which were halved to a `<1 x float>` rounded as a scalar, and LLVM rejected the IR (a
    float16 cumsum of 3 elements, once 3 chains were chosen). Forced, and as the heuristics pick."""
    x = np.random.default_rng(n).uniform(-4, 4, (4, n)).astype(np.float32)
    t = tg.asarray(x).astype(tg.dtypes.bfloat16 if dtype == "bfloat16" else tg.dtypes.float16)
    want = np.asarray(t.astype(tg.dtypes.float32)).astype(np.float64).sum(1)
    eps = 2.0 ** (-8 if dtype == "bfloat16" else -11)
    bound = 2 * n * eps * np.abs(np.asarray(t.astype(tg.dtypes.float32))).sum(1)
    forced = [Opt("UNROLL", 1, 3)] if n % 3 == 0 else [Opt("PADTO", 1, 3), Opt("UNROLL", 1, 3)]
    with use_opts(forced):
        got = np.asarray(tnp.sum(t, axis=1).astype(tg.dtypes.float32), np.float64)
    assert np.all(np.abs(got - want) <= bound)
    got = np.asarray(tnp.sum(t, axis=1).astype(tg.dtypes.float32), np.float64)
    assert np.all(np.abs(got - want) <= bound)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_a_half_float_cumsum_of_three_in_three_chains_renders(dtype) -> None:  # noqa: ANN001
    """The cumsum's window sum in half floats, its 3 elements one vector range of 3 lanes: the odd lane set aside
    left two, which were halved to a `<1 x float>` rounded as a scalar, and LLVM rejected the IR."""
    t = tg.asarray(np.array([1, 2, 3], np.float32)).astype(tg.dtypes.bfloat16 if dtype == "bfloat16"
                                                           else tg.dtypes.float16)
    t = tg.asarray(np.asarray(t))   # (realized: the cumsum alone is the kernel)
    with use_opts([Opt("UNROLL", 1, 3)]):
        got = tnp.cumsum(t).astype(tg.dtypes.float32)
        np.testing.assert_array_equal(np.asarray(got), [1, 3, 6])
