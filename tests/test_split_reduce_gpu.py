"""Sums and maxima with few outputs split over a GPU's SMs (tgfx/lowering/split_reduce.py's `gpu_split`): the split
chosen or not and its parts from a small made-up GPU target, the exact graph of the rewrite, the launch model
(`gpu_cost`) of the kernels an H200 gets, and the values through the emulating CUDA driver against numpy."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tgfx as tg
from tests.test_cuda_runtime import emulated, emulated_programs  # noqa: F401 (fixtures)
from tgfx import lax
from tgfx.devices.target import GPU_DEFAULT, GPUTarget
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import index_level
from tgfx.lowering import schedule as schedule_module
from tgfx.lowering.gpu_cost import LaunchCost, launch_cost
from tgfx.lowering.inline import inline
from tgfx.lowering.layout import new_buffer
from tgfx.lowering.optimize_gpu import optimize_gpu
from tgfx.lowering.split_reduce import Split, gpu_split, split_reduces

# a GPU of 4 SMs of 256 threads: 1024 threads fill it, a default block is 256
SMALL = GPUTarget("small", (9, 0), 4, threads_per_sm=256)


def lazy(*shape: int, dtype=dtypes.float32) -> tg.Tensor:  # noqa: ANN001
    """A Tensor of `shape` stored in a buffer not yet written: enough to schedule, no memory."""
    n = int(np.prod(shape))
    return tg.Tensor(new_buffer("CPU", n, dtype)).reshape(shape)


def the_reduce(t: tg.Tensor) -> UOp:
    (red,) = [u for u in inline(UOp(Ops.SINK, None, (t.uop,))).toposort() if u.op is Ops.REDUCE_AXIS]
    return red


def test_a_full_sum_is_split_into_adjacent_parts_that_fill_the_gpu() -> None:
    """A sum of 2^20 floats: one output, a block of 256 threads on a GPU that holds 1024. Split along its one axis
    into as many parts as the GPU holds threads, the parts its inner factor (thread k sums k, k + 1024, ...: a warp's
    loads adjacent); twice the SMs, twice the parts."""
    red = the_reduce(lazy(1 << 20).sum())
    assert gpu_split(red, SMALL) == Split(0, 1024, True, 1 << 20)
    assert gpu_split(red, dataclasses.replace(SMALL, sms=8)) == Split(0, 2048, True, 1 << 20)
    # each part at least MIN_GPU_PART_REDUCE (64) steps: 2^20 / 64 = 16384 parts at most
    assert gpu_split(red, dataclasses.replace(SMALL, sms=128)) == Split(0, 16384, True, 1 << 20)


def test_a_column_sum_is_split_into_runs_of_rows() -> None:
    """A column sum of (65536, 8): its outputs run along memory, so a warp's threads take the columns and the parts
    are runs of rows (the outer factor): 8 outputs x 128 parts fill the 1024 threads."""
    assert gpu_split(the_reduce(lazy(65536, 8).sum(0)), SMALL) == Split(0, 128, False, 65536)
    # a weight gradient x.T @ g of a batch of 4096: 64 outputs, 16 parts
    x, g = lazy(4096, 8), lazy(4096, 8)
    red = the_reduce(x.T @ g)
    split = gpu_split(red, SMALL)
    assert red.src[0].shape[split.axis] == 4096 and (split.parts, split.inner) == (16, False)


def test_what_is_not_split_on_a_gpu() -> None:
    """Outputs that fill the GPU a thread each; rows whose blocks fill it (8 rows of a block of 256 threads, their
    reads adjacent), or rows too short for more parts than such a block has threads (2 rows of 600: 9 parts at
    most); fewer elements than the threads that fill the GPU, or nothing to sum; a product; a gather."""
    assert gpu_split(the_reduce(lazy(4096, 64).sum(1)), SMALL) is None
    assert gpu_split(the_reduce(lazy(8, 65536).sum(1)), SMALL) is None
    assert gpu_split(the_reduce(lazy(2, 600).sum(1)), SMALL) is None
    assert gpu_split(the_reduce(lazy(0, 600).sum(1)), SMALL) is None
    assert gpu_split(the_reduce(lazy(600, 0).sum(1)), SMALL) is None
    assert gpu_split(the_reduce(lazy(64, 2).sum(0)), SMALL) is None
    assert gpu_split(the_reduce(lazy(65536).prod()), SMALL) is None
    table, idx = tg.asarray(np.zeros((65536, 4), np.float32)), tg.asarray(np.array([3, 4464], np.int32))
    reds = [u for u in inline(UOp(Ops.SINK, None, (table[idx].uop,))).toposort() if u.op is Ops.REDUCE_AXIS]
    assert all(gpu_split(r, SMALL) is None for r in reds)


def test_a_length_of_few_factors_is_padded_for_a_sum_not_a_max() -> None:
    """65537 (a prime) divides into no parts: a sum pads it with zeros to a multiple of the parts (a warp's multiple:
    1024 parts of 65 steps); a max cannot (zero is not its identity) and stays a block."""
    assert gpu_split(the_reduce(lazy(65537).sum()), SMALL) == Split(0, 1024, True, 65 * 1024)
    assert gpu_split(the_reduce(lazy(65537).max()), SMALL) is None
    assert gpu_split(the_reduce(lazy(65536).max()), SMALL) == Split(0, 1024, True, 65536)
    assert gpu_split(the_reduce(lazy(65536, dtype=dtypes.int32).sum()), SMALL) == Split(0, 1024, True, 65536)


def test_the_rewrite_of_a_full_sum_and_a_column_sum() -> None:
    """The exact graphs: partial sums of the parts (a stored value, the parts last for an inner split, first for an
    outer one) and their sum, reshaped to the sum's shape."""
    x = lazy(65536)
    red = the_reduce(x.sum())
    (out,) = split_reduces([red], SMALL)
    src = red.src[0]
    part = UOp(Ops.REDUCE_AXIS, red.dtype, (UOp(Ops.RESHAPE, src.dtype, (src,), (64, 1024)),), (Ops.ADD, (0,)))
    partial = UOp(Ops.CONTIGUOUS, red.dtype, (UOp(Ops.PERMUTE, red.dtype, (part,), (0, 1)),))
    total = UOp(Ops.REDUCE_AXIS, red.dtype, (partial,), (Ops.ADD, (1,)))
    assert out is UOp(Ops.RESHAPE, red.dtype, (total,), red.shape)
    red = the_reduce(lazy(65536, 8).sum(0))
    (out,) = split_reduces([red], SMALL)
    src = red.src[0]
    part = UOp(Ops.REDUCE_AXIS, red.dtype, (UOp(Ops.RESHAPE, src.dtype, (src,), (128, 512, 8)),), (Ops.ADD, (1,)))
    partial = UOp(Ops.CONTIGUOUS, red.dtype, (UOp(Ops.PERMUTE, red.dtype, (part,), (0, 1, 2)),))
    total = UOp(Ops.REDUCE_AXIS, red.dtype, (partial,), (Ops.ADD, (0,)))
    assert out is UOp(Ops.RESHAPE, red.dtype, (total,), red.shape)


def gpu_kernels(t: tg.Tensor, monkeypatch: pytest.MonkeyPatch, target: GPUTarget = GPU_DEFAULT) -> list[LaunchCost]:
    """The launch model on `target` of each kernel `t` schedules into, its sums split as for that GPU."""
    monkeypatch.setattr(schedule_module, "split_reduces", lambda roots, _: split_reduces(roots, target))
    linear, _ = schedule_module.schedule(list(inline(UOp(Ops.SINK, None, (t.uop,))).src))
    return [launch_cost(optimize_gpu(index_level(c.src[0], pieces=False), target)[0], target)
            for c in linear.src if c.src[0].op is Ops.SINK]


def test_a_64m_float_sum_launches_enough_threads_to_fill_an_h200(monkeypatch: pytest.MonkeyPatch) -> None:
    """x.sum() of 64M floats was one block (256 threads of the H200's 270336). Now its partial sums launch a thread
    for each of 524288 parts (2^19, the first power of two past 132 x 2048), every load coalesced, 128 steps each;
    their sum one block."""
    first, second = gpu_kernels(lazy(64 << 20).sum(), monkeypatch)
    assert first.threads >= GPU_DEFAULT.sms * GPU_DEFAULT.threads_per_sm and first.fill >= 1, str(first)
    assert not first.uncoalesced and first.trips == 128, str(first)
    assert second.threads == GPU_DEFAULT.block_threads() and second.trips == 2048, str(second)


def test_the_cnns_weight_gradients_partial_kernel_is_coalesced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CNN step's second weight gradient (3 x 3 x 16 x 32 outputs of NHWC operands, summed over a batch of 128
    and 8 x 8 positions) was 4608 blocks whose threads split the batch and the image: 32 sectors a warp access
    where 4 would do. Split over the batch, its partial sums are a thread (a register tile) an output of each part,
    a warp along the output channels: every access coalesced or a broadcast, the GPU filled past `fill_threads`."""
    x, g, w = lazy(128, 8, 8, 16), lazy(128, 8, 8, 32), lazy(3, 3, 16, 32)
    dims = ("NHWC", "HWIO", "NHWC")
    dw = tg.grad(lambda w: (lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dims) * g).sum())(w)
    (partial,) = [c for c in gpu_kernels(dw, monkeypatch) if c.trips > 64]
    assert not partial.uncoalesced, str(partial)
    assert partial.threads >= GPU_DEFAULT.fill_threads(), str(partial)
    # before: its one kernel, a block an output (as without the split), read 32 sectors a warp access
    monkeypatch.setattr(schedule_module, "split_reduces", lambda roots, _: roots)
    linear, _ = schedule_module.schedule(list(inline(UOp(Ops.SINK, None, (dw.uop,))).src))
    (whole,) = [launch_cost(optimize_gpu(index_level(c.src[0], pieces=False), GPU_DEFAULT)[0], GPU_DEFAULT)
                for c in linear.src if c.src[0].op is Ops.SINK]
    assert whole.uncoalesced and max(a.sectors for a in whole.accesses) == 32


@pytest.mark.parametrize("shape, axis, dtype", [
    ((1 << 20,), None, np.float32),      # a full sum: 8192 parts on the H200 the emulated driver reports
    ((1000003,), None, np.float32),      # a prime length: padded with zeros
    ((1000003,), None, np.int32),        # integers: exact in any order
    ((3, 200003), 1, np.float32),        # a few long rows, of a prime length
    ((100000, 7), 0, np.float32),        # a column sum: runs of rows
    ((100003, 7), 0, np.float32),        # ... of a prime length
    ((200000, 3), 0, np.int64),
    ((1 << 16, 12), 0, np.float64),
])
def test_split_sums_and_maxima_on_the_emulated_gpu_are_numpys(emulated_programs, shape, axis, dtype) -> None:  # noqa: ANN001, F811
    """Sums, maxima and minima of few outputs on CUDA:0 (each kernel the GPU options' code run as loops on the
    CPU), split for the emulated device's target, against numpy."""
    rng = np.random.default_rng(0)
    a = (rng.integers(-1000, 1000, shape) if np.dtype(dtype).kind == "i" else rng.standard_normal(shape)).astype(dtype)
    x = tg.device_put(a, "CUDA:0")
    exact = np.dtype(dtype).kind == "i"
    tol = {} if exact else {"rtol": 1e-4 if dtype == np.float32 else 1e-10, "atol": 1e-3}
    want = a.astype(np.float64).sum(axis)
    drv, dev = emulated_programs
    drv.calls.clear()
    got = x.sum(axis).numpy()
    # split for the device's own target: the partial sums, then their sum
    assert gpu_split(the_reduce(x.sum(axis)), dev.target) is not None
    assert [c[0] for c in drv.calls].count("cuLaunchKernel") == 2
    (np.testing.assert_array_equal if exact else lambda g, w: np.testing.assert_allclose(g, w, **tol))(got, want)
    np.testing.assert_array_equal(x.max(axis).numpy(), a.max(axis))
    np.testing.assert_array_equal(x.min(axis).numpy(), a.min(axis))
