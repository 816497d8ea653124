"""Sums with few outputs over a long reduce split over the cores (tgfx/lowering/split_reduce.py): how many parts for a
target of 1, 2, 8 and 32 cores, the kernels and their thread split, and the values against numpy."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
from tgfx import config, lax
from tgfx.devices.target import Target, host_target
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import kernel_source
from tgfx.lowering import schedule as schedule_module
from tgfx.lowering.inline import inline
from tgfx.lowering.kernel_opts import Opt
from tgfx.lowering.optimize import use_opts
from tgfx.lowering.schedule import schedule
from tgfx.lowering.split_reduce import split_parts


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def on_cpu(x: np.ndarray) -> tg.Tensor:
    """`x` on the CPU, whatever the default device (`-p tests.emulated_cuda` makes it CUDA:0, whose kernels group
    their reduces across threads instead of splitting them: tests/test_split_reduce_gpu.py): the CPU's splits."""
    return tg.asarray(x, device="CPU")


def big_cache(cores: int) -> Target:
    """This CPU with `cores` cores and an L2 that holds any operand here: the parts are then the cores' alone."""
    return dataclasses.replace(host_target().with_cores(cores), l2=1 << 30)


def kernels(expr: tg.Tensor, target: Target, monkeypatch: pytest.MonkeyPatch) -> list[UOp]:
    monkeypatch.setattr(schedule_module, "host_target", lambda: target)
    sink = inline(UOp(Ops.SINK, None, (expr.uop,)))
    linear, _ = schedule(list(sink.src))
    return [c.src[0] for c in linear.src]


@pytest.mark.parametrize("cores", [1, 2, 8, 32])
def test_a_weight_gradient_over_a_long_batch_is_split_over_the_cores(cores: int, monkeypatch) -> None:  # noqa: ANN001
    """`x.T @ y` of (65536, 8): 64 outputs, too few to give each core a register tile of its own, each summed over
    65,536 rows. On one core it is one kernel; on k cores the rows are `Target.threads` parts (k a core, up to 4 a
    core with work for them), the partial sums a kernel that THREAD splits into as many parts, and their sum a second
    kernel on one core."""
    target = big_cache(cores)
    x, y = on_cpu(rand(65536, 8)), on_cpu(rand(65536, 8, seed=1))
    ks = kernels(x.T @ y, target, monkeypatch)
    parts = target.threads(64 * 65536)
    if cores == 1:
        assert parts == 1 and len(ks) == 1
        assert kernel_source(ks[0], target).global_size == 1
        return
    assert parts >= cores and len(ks) == 2
    first, second = (kernel_source(k, target) for k in ks)
    assert ks[0].src[0].src[0].arg[1] == parts * 64   # the partial sums: a part's 8 x 8 each
    assert first.global_size == parts and second.global_size == 1


@pytest.mark.parametrize("cores", [2, 8, 32])
def test_a_part_of_the_reduce_fits_half_of_l2(cores: int) -> None:
    """The conv weight gradient's reduce (256 images x 24 x 24 positions, 864 outputs, 20.6 MB read) is split into
    enough parts that a part's share fits half of L2 (2 MB: 21 parts, 32 dividing the batch), and at least as many as
    the cores' threads: each output's pass over its part then reads the cache, not memory. On one core too, unless
    the whole fits."""
    x, w, g = on_cpu(rand(256, 24, 24, 3)), on_cpu(rand(3, 3, 3, 32)), on_cpu(rand(256, 24, 24, 32))
    dims = ("NHWC", "HWIO", "NHWC")
    dw = tg.grad(lambda w: (lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dims) * g).sum())(w)
    (red,) = [u for u in inline(UOp(Ops.SINK, None, (dw.uop,))).toposort() if u.op is Ops.REDUCE_AXIS]
    target = dataclasses.replace(host_target().with_cores(cores), l2=2 << 20)
    axis, parts = split_parts(red, target)
    assert red.src[0].shape[axis] == 256   # the batch
    assert parts == max(32, target.threads(256 * 24 * 24 * 864))
    assert split_parts(red, target.with_cores(1)) == (axis, 32)   # (one core: parts for the cache alone)
    assert split_parts(red, dataclasses.replace(target, l2=64 << 20).with_cores(1)) == (0, 1)   # all in L2


def test_what_is_not_split(monkeypatch) -> None:  # noqa: ANN001
    """Outputs enough for every part's tile (a 256 x 256 product), a short reduce, a max, and a gather (a one-hot
    sum over a table's rows: one load at the index) stay one kernel."""
    target = big_cache(8)

    def reduces(expr: tg.Tensor) -> int:
        return sum(any(u.op is Ops.REDUCE_AXIS for u in k.toposort()) for k in kernels(expr, target, monkeypatch))
    a, b = on_cpu(rand(16384, 256)), on_cpu(rand(16384, 256, seed=1))
    assert reduces(a.T @ b) == 1
    assert reduces(on_cpu(rand(64, 8)).T @ on_cpu(rand(64, 8))) == 1
    assert reduces(on_cpu(rand(65536, 8)).max(0)) == 1
    table, idx = on_cpu(rand(65536, 4)), on_cpu(np.array([3, 4464], np.int32))
    assert len(kernels(table[idx], target, monkeypatch)) == 1


@pytest.mark.parametrize("cores", [2, 8])
def test_a_prime_count_of_rows_is_split_too(cores: int, monkeypatch) -> None:  # noqa: ANN001
    """A column sum of 1,000,003 rows (prime) has no even split: its rows past the parts' multiple are summed apart
    and added to the parts' sum, not padded (a masked load is scalar). It ran on one core, each column one run of
    additions: 1.6e-5 of the sum off float64's (jax 3.9e-8, numpy's pairwise sum 6e-8); split, it is as near as the
    sum of an even count of rows (1,000,008: 2.5e-7)."""
    target = big_cache(cores)
    x = np.random.default_rng(0).standard_normal((1_000_003, 3)).astype(np.float32) + 3
    ks = kernels(on_cpu(x).sum(0), target, monkeypatch)
    assert len(ks) == 2 and kernel_source(ks[0], target).global_size == target.threads(x.size)
    assert not any(u.op is Ops.WHERE for k in ks for u in k.toposort())   # no masked load
    monkeypatch.setattr(schedule_module, "host_target", lambda: target)
    ref = x.astype(np.float64).sum(0)
    assert np.abs(on_cpu(x).sum(0).numpy() - ref).max() / ref.max() < 2e-6


@settings(max_examples=12, deadline=None)
@given(rows=st.sampled_from([4096, 12288, 65536, 65537]), cols=st.integers(1, 24), cores=st.sampled_from([2, 8, 32]))
def test_split_sums_are_numpys(rows: int, cols: int, cores: int) -> None:
    """`x.T @ y`, a column sum and a weight gradient over a batch and its positions, split (rows that divide into the
    parts) or not (65,537 rows, prime but for one), against numpy's float64 sums."""
    x, y = rand(rows, cols), rand(rows, 3, seed=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(schedule_module, "host_target", lambda: big_cache(cores))
        xt = tg.asarray(x)
        np.testing.assert_allclose((xt.T @ tg.asarray(y)).numpy(), x.T.astype(np.float64) @ y, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(xt.sum(0).numpy(), x.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
        g, xs = rand(rows // 16, 4, 4, 8, seed=2), rand(rows // 16, 4, 4, cols, seed=3)
        dw = tg.numpy.einsum("bhwi,bhwo->io", tg.asarray(xs), tg.asarray(g)).numpy()
        np.testing.assert_allclose(dw, np.einsum("bhwi,bhwo->io", xs.astype(np.float64), g), rtol=1e-4, atol=1e-3)


def test_a_second_thread_splits_another_loop_over_the_product_of_the_two() -> None:
    """THREAD(0, 4) then THREAD(1, 2) of a transpose's 64 x 4 loops: launched with 8 core ids, the first split taking
    `id // 2`, the second `id % 2`: every element is written once, as numpy's. (A third splits the product again.)"""
    x = rand(4, 64)
    opts = [Opt("THREAD", 0, 4), Opt("THREAD", 1, 2)]
    with use_opts(opts):
        got = (tg.asarray(x).T * 2.0 + 1.0).numpy()
    np.testing.assert_array_equal(got, x.T * 2.0 + 1.0)
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, ((tg.asarray(x).T * 2.0 + 1.0).uop,))).src))
    assert kernel_source(linear.src[0].src[0], host_target(), opts).global_size == 8
    assert kernel_source(linear.src[0].src[0], host_target(), [*opts, Opt("THREAD", 0, 2)]).global_size == 16


def reduction_parts(expr: tg.Tensor) -> int:
    """The most parts any kernel of `expr` is split into over the cores, as scheduled for the target the flags give."""
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (expr.uop,))).src))
    return max(kernel_source(c.src[0], host_target()).global_size for c in linear.src if c.src[0].op is Ops.SINK)


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
def test_reductions_of_few_outputs_use_every_core_of_a_many_core_target(cpu: str) -> None:
    """A column sum of 4096 x 1024 (and of 2048 x 512), a weight gradient `x.T @ g` over a batch of 65,536 and a
    batch norm's mean over (N, H, W) of an NCHW tensor: on a target of 64 cores, in at least as many parts as there
    are cores or as the work is worth (`Target.threads`), whichever is fewer. The column sums were 16 and 8 parts
    (AVX-512) from 16 cores up: their reduce too short for more split-K parts than that, and their partial sums'
    kernel split over the parts alone; it is now split over the parts and the columns both. On 2 cores, a part a
    core or more. (Parts are counted for code of either width; this host runs what it can.)"""
    rng = np.random.default_rng(5)
    arrays = {"sum 4096x1024": (4096, 1024), "sum 2048x512": (2048, 512), "x": (65536, 64), "g": (65536, 32),
              "nchw": (32, 64, 32, 32)}
    a = {k: rng.standard_normal(s).astype(np.float32) for k, s in arrays.items()}
    t = {k: tg.asarray(v) for k, v in a.items()}
    cases = {"sum 4096x1024": (lambda: t["sum 4096x1024"].sum(0), 4096 * 1024),
             "sum 2048x512": (lambda: t["sum 2048x512"].sum(0), 2048 * 512),
             "x.T @ g": (lambda: t["x"].T @ t["g"], 65536 * 64 * 32),
             "batch norm mean": (lambda: t["nchw"].mean((0, 2, 3)), 32 * 64 * 32 * 32)}
    for cores in (2, 64):
        with config.Context(TGFX_CPU=cpu, TGFX_CORES=cores):
            target = host_target()
            for name, (f, work) in cases.items():
                parts = reduction_parts(f())
                assert parts >= min(cores, target.threads(work)), (name, cores, parts)
    with config.Context(TGFX_CORES=64):   # this host's own code, split for 64 cores: numpy's results
        got = {name: f().numpy() for name, (f, _) in cases.items()}
    for name in ("sum 4096x1024", "sum 2048x512"):
        np.testing.assert_allclose(got[name], a[name].astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got["x.T @ g"], a["x"].T.astype(np.float64) @ a["g"], rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(got["batch norm mean"], a["nchw"].astype(np.float64).mean((0, 2, 3)), rtol=1e-4,
                               atol=1e-5)
