"""Shared-memory tiles of GPU contractions (`optimize_gpu.stage_shared`, the SHARED option): the rewrite on a tiny
matmul (shared buffers, barriers, the reduce split in steps), its results with the thread ids turned back into loops
(`thread_loops`) against numpy at sizes the tiles do not divide, the PTX ptxas assembles (shared memory, no spills),
the heuristics' choice from the target, and matmuls end to end on the emulating CUDA driver."""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.lowering as lowering
from tests.test_cuda_runtime import emulated, emulated_programs  # noqa: F401 (fixtures)
from tests.test_nvptx import _one_kernel, cpu, needs_ptxas, ptxas_report
from tgfx.devices.target import GPU_DEFAULT, GPUTarget
from tgfx.ir.ops import Ops
from tgfx.lowering.kernel_opts import KernelOptError, Opt
from tgfx.lowering.optimize_gpu import optimize_gpu, thread_loops
from tgfx.lowering.render_nvptx import kernel_ir, ptx_of

rng = np.random.default_rng(0)
# a 4 x 8 register tile a thread, blocks of 8 x 4 threads (32 x 32 outputs), 8 reduce steps a tile
TILE = [Opt("UPCAST", 1, 4), Opt("UPCAST", 0, 8), Opt("GLOBAL", 1, 8), Opt("GLOBAL", 0, 4), Opt("SHARED", 2, 8)]


def _matmul(m: int, k: int, n: int, dtype: Any = np.float32) -> tuple[Any, np.ndarray, np.ndarray]:
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    ast, _ = _one_kernel(lambda x, y: x @ y, cpu(a), cpu(b))
    return ast, a, b


def _on_cpu(ast: Any, opts: list[Opt], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a @ b` by the kernel `ast` with `opts` for an H200, its thread ids turned back into loops, run on the CPU."""
    orig = lowering.lower_kernel

    def hook(x, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        assert x.key == ast.key
        return orig(thread_loops(optimize_gpu(lowering.index_level(x, pieces=False), GPU_DEFAULT, opts)[0]),
                    *args, **kwargs)
    lowering.forget_compiled()
    lowering.lower_kernel = hook
    try:
        return (cpu(a) @ cpu(b)).numpy()
    finally:
        lowering.lower_kernel = orig
        lowering.forget_compiled()


def test_shared_tiles_are_block_buffers_filled_between_barriers() -> None:
    ast, a, b = _matmul(64, 32, 128)
    sink, applied = optimize_gpu(lowering.index_level(ast, pieces=False), GPU_DEFAULT, TILE)
    nodes = sink.toposort()
    # a's tile: 8 steps x (4 threads x 8 rows); b's: 8 steps x (8 threads x 4 lanes)
    assert sorted(u.arg[1] for u in nodes if u.op is Ops.DEFINE_LOCAL) == [8 * 32, 8 * 32]
    waits = [u for u in nodes if u.op is Ops.BARRIER]
    assert len(waits) == 2 and {w.src[0].op for w in waits} == {Ops.RANGE, Ops.REDUCE}   # before the fill, after it
    steps = [u for u in nodes if u.op is Ops.REDUCE and len(u.src) == 3]
    assert len(steps) == 32 and all([r.src[0].arg for r in red.src[1:]] == [4, 8] for red in steps)
    assert not any(u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL and u in red.src[0].toposort()
                   and u.src[0] not in {f for w in waits for f in w.toposort()} for red in steps for u in nodes)
    np.testing.assert_allclose(_on_cpu(ast, TILE, a, b), a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("shape", "opts"), [
    # blocks past both ends (33 rows on 8 threads, 65 columns on 16), 17 steps in tiles of 8: the last masked
    ((33, 17, 65), [Opt("GLOBAL", 1, 16), Opt("GLOBAL", 0, 8), Opt("SHARED", 2, 8)]),
    # a register tile, blocks past both ends, one tile of 16 steps for 17 (the fill's share not a whole step)
    ((40, 17, 100), [*TILE[:2], Opt("GLOBAL", 1, 16), Opt("GLOBAL", 0, 4), Opt("SHARED", 2, 16)]),
    ((40, 17, 100), [*TILE[:2], Opt("GLOBAL", 1, 16), Opt("GLOBAL", 0, 4), Opt("SHARED", 2, 4)]),
    ((64, 32, 128), TILE),
])
def test_shared_tiles_compute_what_numpy_does_at_edges(shape: tuple[int, int, int], opts: list[Opt]) -> None:
    ast, a, b = _matmul(*shape)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(_on_cpu(ast, opts, a, b), want, rtol=1e-5, atol=1e-5)


def test_shared_tiles_refuse_what_they_cannot_stage() -> None:
    ast, _, _ = _matmul(64, 32, 128)
    sink = lowering.index_level(ast, pieces=False)
    for bad, why in (([Opt("SHARED", 2, 8)], "one thread"),
                     ([*TILE[:4], Opt("SHARED", 0, 8)], "no reduce range"),
                     ([*TILE[:4], Opt("SHARED", 2, 1)], "one step"),
                     ([*TILE, Opt("SHARED", 2, 8)], "SHARED comes last"),
                     ([*TILE, Opt("GLOBAL", 1, 1)], "SHARED comes last")):
        with pytest.raises(KernelOptError, match=why):
            optimize_gpu(sink, GPU_DEFAULT, bad)
    small = GPUTarget("small", (8, 6), 84, shared_per_block=1024)
    with pytest.raises(KernelOptError, match="bytes of shared tiles"):
        optimize_gpu(sink, small, TILE)


@needs_ptxas
def test_shared_tiles_assemble_with_their_shared_memory_and_no_spills() -> None:
    ast, _, _ = _matmul(64, 32, 128)
    ptx = ptx_of(ast, GPU_DEFAULT, TILE)[0]
    assert ptx.count("bar.sync") == 2 and "ld.shared.v4" in ptx and "st.shared" in ptx
    report = ptxas_report(ptx)
    assert re.search(r"\b(\d+) bytes smem", report).group(1) == str(2 * 8 * 32 * 4), report
    assert re.search(r"\b(\d+) bytes spill stores", report).group(1) == "0", report


@needs_ptxas
@pytest.mark.parametrize(("shape", "dtype"), [((4096, 4096, 4096), np.float32), ((1000, 1000, 1000), np.float32),
                                              ((1024, 256, 1024), np.float16)])
def test_large_matmuls_stage_their_operands_in_shared_memory(shape: tuple[int, int, int], dtype: Any) -> None:
    """The heuristics' tile, from the target: a warp along the vectorised axis, the rest of the block along the
    blocked one; reduce steps a tile as many as a quarter of a block's shared memory holds (a power of two, fewer
    where they divide the reduce). Its inner steps are unrolled whole: each a thread's tile of FMAs from 16-byte
    shared reads; each outer step's fill reads the operands 16 bytes a thread."""
    m, k, n = shape
    ast, _, _ = _matmul(m, k, n, dtype)
    with tg.Context(GPU_TC=0):   # (a float16 contraction's tiles without tensor cores: test_tensor_cores.py has them)
        _, _, dims, opts = kernel_ir(ast)
        ptx = ptx_of(ast, GPU_DEFAULT)[0]
    lanes, rows = (o.amount for o in opts[:2])   # (the tile of the kernel's arithmetic: float16 sums in float32)
    assert opts[:2] == [Opt("UPCAST", 1, lanes), Opt("UPCAST", 0, rows)], opts
    threads, warp = GPU_DEFAULT.block_threads(), GPU_DEFAULT.warp_size
    depth = GPU_DEFAULT.shared_tile_depth(warp * lanes + threads // warp * rows, 4)
    while k % depth:
        depth //= 2
    assert opts[-1] == Opt("SHARED", 2, depth) and dims.block == (warp, threads // warp, 1), opts
    report = ptxas_report(ptx)
    smem = int(re.search(r"\b(\d+) bytes smem", report).group(1))
    assert smem == depth * (warp * lanes + threads // warp * rows) * np.dtype(dtype).itemsize, report
    assert smem <= GPU_DEFAULT.shared_per_block // 4
    assert re.search(r"\b(\d+) bytes spill stores", report).group(1) == "0", report
    if dtype == np.float32:
        assert ptx.count("fma.rn.f32") == depth * lanes * rows, ptx
        assert ptx.count("ld.shared.v4") == depth * (lanes + rows) // 4, ptx
        assert "ld.global.nc.v4" in ptx


def test_gpu_smem_0_turns_shared_tiles_off() -> None:
    ast, _, _ = _matmul(1024, 64, 1024)
    with tg.Context(GPU_SMEM=0):
        _, _, _, plain = kernel_ir(ast)
        ptx_plain = ptx_of(ast, GPU_DEFAULT)[0]
    _, _, _, staged = kernel_ir(ast)
    assert not any(o.op == "SHARED" for o in plain) and Opt("UNROLL", 2, 4) in plain, plain
    assert staged[-1].op == "SHARED"
    assert "bar.sync" not in ptx_plain and "bar.sync" in ptx_of(ast, GPU_DEFAULT)[0]   # (cached apart)
    # too few outputs to fill the GPU with blocks of tiles: no tile at all, as before
    small, _, _ = _matmul(64, 32, 128)
    assert not any(o.op == "SHARED" for o in kernel_ir(small)[3])


def test_gpu_target_reads_shared_memory_and_threads_an_sm() -> None:
    attrs = {"COMPUTE_CAPABILITY_MAJOR": 8, "COMPUTE_CAPABILITY_MINOR": 6, "MAX_SHARED_MEMORY_PER_BLOCK": 16384,
             "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 102400, "MAX_THREADS_PER_MULTIPROCESSOR": 1536}
    t = GPUTarget.from_attributes("A6000", attrs)
    assert (t.shared_per_block, t.shared_per_sm, t.threads_per_sm) == (16384, 102400, 1536)
    assert (GPU_DEFAULT.shared_per_sm, GPU_DEFAULT.threads_per_sm) == (228 << 10, 2048)
    # 192 float32 a step (a 128 x 64 block tile): 16 steps in a quarter of 48 KiB; 4 in a quarter of 16 KiB
    assert GPU_DEFAULT.shared_tile_depth(192) == 16 and t.shared_tile_depth(192) == 4
    assert t.shared_tile_depth(4096) == 0   # not even two steps


@pytest.mark.parametrize(("shape", "dtype"), [
    ((1000, 1000, 1000), np.float32),   # blocks past both ends, 8 steps a tile
    ((520, 17, 600), np.float32),       # blocks past both ends, the last tile's steps masked
    ((520, 52, 600), np.float16),
    ((8, 256, 64, 256), np.float32),    # a batch: the grid's third axis
])
def test_emulated_matmuls_with_shared_tiles_compute_numpys_answers(emulated_programs: Any,  # noqa: F811
                                                                   shape: tuple[int, ...], dtype: Any) -> None:
    drv, dev = emulated_programs
    batch, (m, k, n) = shape[:-3], shape[-3:]
    a = rng.standard_normal((*batch, m, k)).astype(dtype)
    b = rng.standard_normal((*batch, k, n)).astype(dtype)
    bias = rng.standard_normal(n).astype(dtype)
    with tg.Context(GPU_TC=0):   # (float16 without tensor cores: test_tensor_cores.py has them)
        got = tg.nn.relu(tg.device_put(cpu(a), "CUDA:0") @ tg.device_put(cpu(b), "CUDA:0") +
                         tg.device_put(cpu(bias), "CUDA:0")).numpy()
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    assert any(o.op == "SHARED" for o in drv.gpu_options), drv.gpu_options
    tol = 2e-2 if dtype == np.float16 else 1e-4
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
