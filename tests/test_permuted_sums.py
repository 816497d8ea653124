"""Sums over permuted views (`kernel_opts.order_reduce_ranges`) and over several reduce loops that stay apart
(`block_sum.chained`): their loops nest in memory order and merge where memory is contiguous, and what stays apart is
summed a loop at a time, each loop in a register of its own, so float32 sums round about as jax's (XLA's tree) do.
Errors are against float64's. The Tensors are on "CPU": these are the CPU's kernels (a GPU's sums are its threads')."""
from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.block_sum import nested_sums
from tgfx.lowering.kernel_opts import merge_reduce_ranges, order_reduce_ranges, split_ranges
from tgfx.lowering.linearize import linearize
from tgfx.lowering.rangeify import rangeify
from tgfx.lowering.render_llvm import render_llvm
from tgfx.lowering.symbolic import pm_symbolic

EPS = float(np.finfo(np.float32).eps)


def g(slot: int, n: int) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dtypes.float32, (), (slot, n))


def kernel(value: UOp, axes: tuple[int, ...], op: Ops = Ops.ADD) -> UOp:
    red = UOp(Ops.REDUCE_AXIS, dtypes.float32, (value,), (op, axes))
    out = g(0, max(math.prod(red.shape), 1))
    # (a reshaped view's axes read through divisions are ranges of their own: `index_level`'s order of passes)
    return split_ranges(graph_rewrite(rangeify(UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (out, red)),))), pm_symbolic))


def view(slot: int, shape: tuple[int, ...], perm: tuple[int, ...] | None = None) -> UOp:
    x = UOp(Ops.RESHAPE, dtypes.float32, (g(slot, math.prod(shape)),), shape)
    return x if perm is None else UOp(Ops.PERMUTE, dtypes.float32, (x,), perm)


def shuffled(slot: int, n: int, h: int, w: int, c: int) -> UOp:
    """A pixel shuffle of an (n, h, w, 4c) value to (n, 2h, 2w, c), as the VQ-VAE's decoder writes it."""
    y = view(slot, (n, h, w, 2, 2, c), (0, 1, 3, 2, 4, 5))
    return UOp(Ops.RESHAPE, dtypes.float32, (y,), (n, 2 * h, 2 * w, c))


def reduce_loops(sink: UOp) -> list[int]:
    """The reduce loops of `sink` as they nest (by id), by their steps."""
    return [u.src[0].arg for u in sorted((u for u in sink.toposort() if u.op is Ops.RANGE and u.arg[1] == "reduce"),
                                         key=lambda r: r.arg[0])]


def test_the_loops_of_a_sum_over_a_transposed_view_nest_in_memory_order_and_merge():
    """The full sum of a transposed (4, 8, 3) value nested its loops as the view's axes, the innermost read 24 apart,
    and `merge_reduce_ranges` merged none; in memory order they are the contiguous value's one loop of 96, the same
    kernel. So are a max's, and a row max's over a transposed pair of axes (loops of 8 and 3 read 1 and 3 apart)."""
    for op in (Ops.ADD, Ops.MAX):
        transposed = kernel(view(1, (4, 8, 3), (2, 1, 0)), (0, 1, 2), op)
        assert merge_reduce_ranges(transposed) is transposed
        assert reduce_loops(order_reduce_ranges(transposed)) == [4, 8, 3]
        assert merge_reduce_ranges(order_reduce_ranges(transposed)) is \
            merge_reduce_ranges(kernel(view(1, (4, 8, 3)), (0, 1, 2), op))
    rows = kernel(view(1, (4, 8, 3), (0, 2, 1)), (1, 2), Ops.MAX)
    assert reduce_loops(merge_reduce_ranges(rows)) == [3, 8]
    assert reduce_loops(merge_reduce_ranges(order_reduce_ranges(rows))) == [24]


def test_a_pixel_shuffled_sum_nests_in_the_larger_strides_order_and_sums_a_loop_a_register():
    """The VQ-VAE's reconstruction loss: a pixel-shuffled (2, 4, 4, 12) value against a contiguous (2, 8, 8, 3) one,
    squared and summed. Its loops nested the rows, columns and channels outside the shuffle's two pairs (channels read
    at stride 1 outside pairs read 3 and 6 apart); in the order of the larger of each axis' strides the batch and rows
    merge (8), then the row pair (2), the columns (4), the column pair and the channels (6). The four loops stayed one
    register's 384 additions: `nested_sums` chains them, a REDUCE and a register a loop (also where LLVM vectorises the
    innermost loop: a loop around another is none of its vectoriser's), and a lone loop a vectoriser takes is left."""
    diff = shuffled(1, 2, 4, 4, 3) - view(2, (2, 8, 8, 3))
    sink = kernel(diff * diff, (0, 1, 2, 3))
    ordered = merge_reduce_ranges(order_reduce_ranges(sink))
    assert reduce_loops(merge_reduce_ranges(sink)) == [8, 4, 3, 2, 2]
    assert reduce_loops(ordered) == [8, 2, 4, 6]
    for vectorised in (False, True):
        lin, acc_of = linearize(nested_sums(ordered, vectorised=vectorised))
        assert [u.src[0].arg for u in lin if u.op is Ops.RANGE] == [8, 2, 4, 6]
        structure = [u.op for u in lin if u.op in (Ops.RANGE, Ops.DEFINE_ACC)]
        assert structure == [Ops.DEFINE_ACC, Ops.RANGE] * 4
        assert len(acc_of) == 4
        render_llvm("k", lin, acc_of, [g(0, 1), g(1, 384), g(2, 384)])
    row = kernel(view(1, (3, 4096)), (1,))
    assert nested_sums(row, vectorised=True) is row
    assert nested_sums(row) is not row


def test_the_reduce_loops_of_a_row_kernel_are_ordered_together_or_not_at_all():
    """A softmax-like kernel over transposed pairs of axes: its max and its sum reduce over the same two ranges, which
    trade ids together (the sum's loops read the max's value, once). A contraction's loops are the heuristics' to
    order: left."""
    x = view(1, (4, 8, 3), (0, 2, 1))
    big = UOp(Ops.REDUCE_AXIS, dtypes.float32, (x,), (Ops.MAX, (1, 2)))
    shifted = x - UOp(Ops.EXPAND, dtypes.float32, (big,), (4, 3, 8))
    sink = kernel(shifted * shifted, (1, 2))
    reduces = [u for u in merge_reduce_ranges(order_reduce_ranges(sink)).toposort() if u.op is Ops.REDUCE]
    assert sorted(len(u.src) for u in reduces) == [2, 2]
    assert reduce_loops(merge_reduce_ranges(order_reduce_ranges(sink))) == [24, 24]
    a = view(1, (3, 8, 5), (0, 2, 1))
    b = UOp(Ops.EXPAND, dtypes.float32, (view(2, (1, 5, 8)),), (3, 5, 8))
    contraction = kernel(a * b, (1, 2))
    assert order_reduce_ranges(contraction) is contraction


def bound(n: int) -> float:
    """A sum of n float32s' error bound, of the sum of magnitudes: a tree's, whose levels' roundings add as their root
    (partial sums' roundings are independent), and a leaf of a few dozen steps in order (up to 3 roundings here)."""
    return EPS * (2 + math.sqrt(math.log2(n)))


def error(got: tg.Tensor, want: np.ndarray, scale: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - want) / np.maximum(scale, 1e-30)))


def test_a_pixel_shuffled_mean_rounds_as_jax_does():
    """The VQ-VAE's reconstruction loss at the bench's sizes (`bench/ported_seqgen.py`): 98,304 squared differences
    summed in one register, 3.5e-6 off float64's; now 4.8e-8 (jax 7.2e-8)."""
    rng = np.random.default_rng(0)
    y = rng.standard_normal((32, 16, 16, 12)).astype(np.float32)
    x = rng.standard_normal((32, 32, 32, 3)).astype(np.float32)

    def loss(y, x):  # noqa: ANN001, ANN202 -- numpy's and tgfx's arrays alike
        n, h, w, _ = y.shape
        z = y.reshape(n, h, w, 2, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(n, 2 * h, 2 * w, 3)
        return ((z - x) ** 2).mean()
    want = loss(y.astype(np.float64), x.astype(np.float64))
    got = float(tg.jit(loss)(tg.asarray(y, device="CPU"), tg.asarray(x, device="CPU")))
    assert abs(got - want) / want < 1.5e-7


@settings(max_examples=20)
@given(shape=st.lists(st.integers(1, 64), min_size=2, max_size=4), data=st.data())
def test_sums_over_permuted_views_round_as_a_tree_does(shape: list[int], data: st.DataObject) -> None:
    """Any permutation, any set of axes summed: each sum within a tree's bound of float64's (`bound`), which a run of
    a few thousand additions in one register exceeds (a transposed (57, 42) value's full sum was 9.1 roundings of its
    magnitudes off; a transposed (3, 4,096, 7) value's 4.8e-7 of it, now 2.3e-8, jax's)."""
    assume(2_000 <= math.prod(shape) <= 200_000)
    perm = data.draw(st.permutations(range(len(shape))))
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    x = np.random.default_rng(math.prod(shape)).random(shape).astype(np.float32)
    got = tnp.sum(tnp.transpose(tg.asarray(x, device="CPU"), perm), axis=axes)
    t = x.astype(np.float64).transpose(perm)
    n = math.prod(t.shape[a] for a in axes)
    assert error(got, t.sum(axes), np.abs(t).sum(axes)) <= bound(n), (shape, perm, axes)


def test_permuted_sums_of_every_order_of_three_axes():
    """Each of the 6 orders of a (24, 40, 36) value, summed over each of the 7 sets of axes: float64's to a tree's
    rounding (and the same as a contiguous copy's sum to within it)."""
    x = np.random.default_rng(1).random((24, 40, 36)).astype(np.float32)
    xt = tg.asarray(x, device="CPU")
    for perm in itertools.permutations(range(3)):
        t = x.astype(np.float64).transpose(perm)
        for k in (1, 2, 3):
            for axes in itertools.combinations(range(3), k):
                n = math.prod(t.shape[a] for a in axes)
                got = tnp.sum(tnp.transpose(xt, perm), axis=axes)
                assert error(got, t.sum(axes), np.abs(t).sum(axes)) <= bound(n), (perm, axes)
