"""Long float32 sums round about as a pairwise tree does (`block_sum.nested_sums`): a sum whose loop LLVM's vectoriser
leaves (a column sum over an UPCAST's lanes, the sum of a split row's parts) is summed in nested levels, each in a
register of its own, not in one run along its loop. Errors are of the largest sum, against float64's; jax's (XLA's
tree) and numpy's beside each bound. The pass is the CPU renderer's: the Tensors are on "CPU" also where the default
device is a GPU (a GPU's row sums are its threads' partial sums, then a tree in shared memory)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp


def error(got: tg.Tensor, x: np.ndarray, axis: int) -> float:
    """The largest error of a sum of `x` along `axis`, of the largest sum, against float64's."""
    want = x.astype(np.float64).sum(axis)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(want)))


@pytest.mark.parametrize(("shape", "axis", "bound"), [
    # a column sum of 4,096 rows, along its loop in one register: 2.85e-6 (numpy the same), now 1.6e-7; jax 1.55e-7
    ((4096, 1024), 0, 4e-7),
    # 65,537 rows (prime) in parts of uneven length: 4.2e-7, now 3.8e-8; jax 5.3e-8, numpy 6.2e-6
    ((65537, 3), 0, 1.5e-7),
    # 20,000 rows of 7 columns: 3.95e-7, now 1.07e-7; jax 8.8e-8, numpy 3.9e-6
    ((20000, 7), 0, 1.5e-7),
    # long rows, summed in 500 parts whose sum ran down the parts in one register: 3.2e-7, now 1.06e-7; jax 4.5e-8,
    # numpy 6.3e-8
    ((16, 1_000_000), 1, 1.5e-7),
])
def test_a_long_sum_rounds_as_a_tree_does(shape: tuple[int, int], axis: int, bound: float) -> None:
    x = np.random.default_rng(0).random(shape).astype(np.float32)
    assert error(tnp.sum(tg.asarray(x, device="CPU"), axis=axis), x, axis) < bound


def test_a_column_mean_rounds_as_a_tree_does() -> None:
    """A column mean over 4,096 rows was 7.1e-7 off float64's (its sum's rounding), now 1.5e-7 (jax 1.55e-7)."""
    x = np.random.default_rng(0).random((4096, 1024)).astype(np.float32)
    mean = np.asarray(tnp.mean(tg.asarray(x, device="CPU"), axis=0), np.float64)
    want = x.astype(np.float64).mean(0)
    assert np.max(np.abs(mean - want)) / np.max(np.abs(want)) < 4e-7


def test_a_column_variance_rounds_as_a_tree_does() -> None:
    """A column variance over 4,096 rows, a sum of squares, was summed as a contraction is (`block_sums`: blocks of
    512 steps, BLAS's rounding): 4.5e-7 off float64's; as a plain sum, in levels, 1.2e-7 (jax 1.7e-7, numpy
    3.2e-6)."""
    x = np.random.default_rng(0).random((4096, 1024)).astype(np.float32)
    var = np.asarray(tnp.var(tg.asarray(x, device="CPU"), axis=0), np.float64)
    want = x.astype(np.float64).var(0)
    assert np.max(np.abs(var - want)) / np.max(np.abs(want)) < 3e-7


@settings(max_examples=12)
@given(rows=st.integers(65, 5000), cols=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_column_sums_of_any_length_are_float64s_rounded(rows: int, cols: int, seed: int) -> None:
    """Lengths of every factoring (primes sum their last steps in a loop of their own): each sum is float64's to
    within a few roundings of its size, whatever the split."""
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    got = np.asarray(tnp.sum(tg.asarray(x, device="CPU"), axis=0), np.float64)
    want = x.astype(np.float64).sum(0)
    scale = np.abs(x).astype(np.float64).sum(0)
    assert np.all(np.abs(got - want) <= 1e-6 * scale)
