"""Small and narrow matmuls on the CPU: a layer's few outputs (`h @ w` with w (64, 2): a flow's scale, a regression
head) and their weight gradients (`h.T @ g` with g (512, 2)) get register tiles that fill the vectors and keep enough
accumulators (`heuristics.narrow_output_opts`, the rows of a whole short axis), an axis no tile splits is padded to
whole vectors, and all compute what numpy does."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
from tgfx import config
from tgfx.devices.target import FMA_CHAINS, Target, native_target, target_for
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import index_level, render_kernel
from tgfx.lowering.inline import inline
from tgfx.lowering.optimize import apply_hand_coded
from tgfx.lowering.schedule import schedule

CPUS = ["haswell", "skylake-avx512"]


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def on_cpu(x: np.ndarray) -> tg.Tensor:
    return tg.asarray(x, device="CPU")


def kernels(expr: tg.Tensor) -> list[UOp]:
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (expr.uop,))).src))
    return [c.src[0] for c in linear.src]


def sizes(ast: UOp) -> dict[int, int]:
    """Each range's size by its id, before any option."""
    return {u.arg[0]: u.src[0].arg for u in index_level(ast).toposort() if u.op is Ops.RANGE}


def runnable(cpu: str) -> str:
    """`TGFX_CPU` for running code made for `cpu` here: `cpu` where this host has its vector instructions."""
    return cpu if target_for(cpu).enabled <= native_target().enabled else ""


def amount_of(opts: list, op: str, axis: int) -> int | None:  # noqa: ANN001
    """The amount of the option `op` on `axis` in `opts` (None if there is none)."""
    return next((o.amount for o in opts if o.op == op and o.axis == axis), None)


@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("n", [2, 3])
def test_a_layers_few_outputs_are_vectors_along_the_reduce(cpu: str, n: int) -> None:
    """`h @ w + b` with w (64, n), n filling at most half the narrowest tile's vector (AVX-512: 8 lanes; AVX2: 4):
    each accumulator is a vector of partial sums along h's row (UNROLL of the reduce by a vector's lanes), the n
    outputs whole as copies, rows of h blocked, no lane padded. It was padded to a vector of 4 along the outputs, the
    rows not blocked: one FMA a step for n products (AVX-512, n = 2: 10.1 us, 3.4 so)."""
    t = target_for(cpu)
    narrowest = min(c for c, _ in t.contraction_tiles())
    (ast,) = kernels(on_cpu(rand(512, 64)) @ on_cpu(rand(64, n, seed=1)) + on_cpu(rand(n, seed=2)))
    size = sizes(ast)
    _, opts = apply_hand_coded(index_level(ast), t)
    if 2 * n > narrowest:   # (AVX2's 4 lanes take 3 outputs padded to 4, most lanes used)
        assert not any(o.op == "UPCAST" and o.amount == 0 for o in opts)
        return
    red = next(i for i, s in size.items() if s == 64)
    col = next(i for i, s in size.items() if s == n)
    assert amount_of(opts, "UNROLL", red) == t.lanes()
    assert amount_of(opts, "UPCAST", col) == 0
    assert not any(o.op == "PADTO" for o in opts)
    rows = next(o.amount for o in opts if o.op == "UPCAST" and size[o.axis] == 512)
    assert rows > 1
    # each (row, output) pair one accumulator, a vector of the lanes' partial sums; none scalar
    sink, _ = apply_hand_coded(index_level(ast), t)
    ir = render_kernel("k", sink, opts, t)[0]
    assert len(re.findall(rf"%vacc\d+ = alloca <{t.lanes()} x float>", ir)) == rows * n
    assert "alloca float" not in ir


@pytest.mark.parametrize("cpu", CPUS)
def test_a_narrow_sum_of_transcendentals_is_not_unrolled_into_copies(cpu: str) -> None:
    """The narrow-output tile is for products, whose loads are the cost: a sum of 20,000 rows of 3 columns whose
    every element takes transcendentals (a Dirichlet sample's implicit gradient, five of them) was unrolled by a
    vector's lanes with the 3 columns as copies, 48 copies of the math, and took 3 s of LLVM for that one kernel
    (test_random_dists' beta and Dirichlet gradients: 5.5 -> 9.6 s of CPU). A product beside it keeps its tile."""
    t = target_for(cpu)
    x, w = on_cpu(rand(20000, 1)), on_cpu(rand(20000, 3, seed=1))
    (ast,) = kernels((tg.numpy.exp(x * w) * tg.numpy.log(tg.numpy.abs(w) + 1) * x).sum(0))
    _, opts = apply_hand_coded(index_level(ast), t)
    assert not any(o.op == "UNROLL" and o.amount >= t.lanes() for o in opts), opts
    assert not any(o.op == "UPCAST" and o.amount == 0 for o in opts), opts
    if 2 * 3 <= min(c for c, _ in t.contraction_tiles()):   # (AVX2's 4 lanes take 3 outputs padded to 4)
        (ast,) = kernels((x * w).sum(0))   # (the same shapes, a product: the narrow tile)
        _, opts = apply_hand_coded(index_level(ast), t)
        assert any(o.op == "UPCAST" and o.amount == 0 for o in opts), opts


@pytest.mark.parametrize("cpu", CPUS)
def test_a_whole_short_axis_is_the_tiles_rows(cpu: str) -> None:
    """`h.T @ g` with g (512, 2), a weight gradient of a layer's 2 outputs: the 2 outputs are the tile's rows (each
    vector of h serves both), though fewer than half the tile's (AVX-512's 8), and its accumulators, too few to keep
    the FMA units busy, are made `FMA_CHAINS` by independent ones along the reduce. It was a tile one row high, a
    vector of h loaded per FMA (AVX-512: 2.4 us, 1.5 so)."""
    t: Target = target_for(cpu)
    (ast,) = kernels(on_cpu(rand(512, 64)).T @ on_cpu(rand(512, 2, seed=1)))
    size = sizes(ast)
    _, opts = apply_hand_coded(index_level(ast), t)
    red = next(i for i, s in size.items() if s == 512)
    col = next(i for i, s in size.items() if s == 2)
    vec = next(o for o in opts if o.op == "UPCAST" and size[o.axis] == 64)
    assert amount_of(opts, "UPCAST", col) == 2
    if 2 * 2 < t.tile_rows():   # (AVX2's 2 rows are half its tile's: rows it took before, not a whole short axis's)
        chains = amount_of(opts, "UNROLL", red) or 1
        assert (vec.amount // t.lanes()) * 2 * chains >= FMA_CHAINS


@pytest.mark.parametrize("cpu", CPUS)
def test_a_matmul_that_fills_a_tile_keeps_it(cpu: str) -> None:
    """Neither rule touches a matmul whose axes fill the tile: 512 x 64 @ 64 x 64 is two vectors by `tile_rows`,
    split over the cores, nothing unrolled."""
    t = target_for(cpu)
    (ast,) = kernels(on_cpu(rand(512, 64)) @ on_cpu(rand(64, 64, seed=1)))
    _, opts = apply_hand_coded(index_level(ast), t)
    lanes, rows = t.contraction_tiles()[0]
    ups = sorted(o.amount for o in opts if o.op == "UPCAST")
    assert ups in (sorted([lanes, rows]), sorted([lanes, t.padded_tile_rows()]))
    assert not any(o.op == "UNROLL" for o in opts)


@pytest.mark.parametrize(("cpu", "lanes"), [("haswell", 8), ("skylake-avx512", 16)])
def test_an_axis_no_vector_tile_splits_pads_to_whole_vectors(cpu: str, lanes: int) -> None:
    """100 x 100 @ 100 x 100: no tile's vectors split the 100 columns. A tile of whole vectors padded by at most an
    eighth (`VECTOR_PAD_SHARE`), the least padding first, not AVX2's 4 lanes that split it (a half-empty register
    each FMA: 53 us on one core, 32 padded to 104), nor AVX-512's two vectors padded to 128 (23 us, 21 to 112)."""
    t = target_for(cpu).with_cores(1)
    (ast,) = kernels(on_cpu(rand(100, 100)) @ on_cpu(rand(100, 100, seed=1)))
    _, opts = apply_hand_coded(index_level(ast), t)
    col = max(i for i, s in sizes(ast).items() if s == 100 and i < 2)
    assert amount_of(opts, "PADTO", col) == lanes and amount_of(opts, "UPCAST", col) == lanes


@st.composite
def _shapes(draw):  # noqa: ANN001, ANN202
    m = draw(st.sampled_from([1, 3, 8, 17, 64, 100, 512]))
    n = draw(st.sampled_from([1, 2, 3, 4, 5, 8]))
    k = draw(st.sampled_from([1, 4, 8, 9, 16, 24, 33, 64, 80, 512]))
    return m, n, k, draw(st.sampled_from(["x @ w + b", "x.T @ g", "g @ w.T"])), draw(st.sampled_from(CPUS))


@settings(max_examples=30)
@given(_shapes())
def test_narrow_matmuls_compute_what_numpy_does(case) -> None:  # noqa: ANN001
    """A layer's few outputs and its gradients, on shapes with remainders (rows, outputs and reduces not a multiple of
    any tile), for AVX2 and AVX-512 (where this host runs it), against numpy in float64."""
    m, n, k, form, cpu = case
    x, w, b = rand(m, k), rand(k, n, seed=1), rand(n, seed=2)
    with config.Context(TGFX_CPU=runnable(cpu)):
        if form == "x @ w + b":
            got, want = tg.jit(lambda x, w, b: x @ w + b)(on_cpu(x), on_cpu(w), on_cpu(b)), x.astype(np.float64) @ w + b
        elif form == "x.T @ g":
            g = rand(m, n, seed=3)
            got, want = tg.jit(lambda x, g: x.T @ g)(on_cpu(x), on_cpu(g)), x.T.astype(np.float64) @ g
        else:
            g = rand(m, n, seed=3)
            got, want = tg.jit(lambda g, w: g @ w.T)(on_cpu(g), on_cpu(w)), g.astype(np.float64) @ w.T
        got = got.numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, np.sqrt(k)))
