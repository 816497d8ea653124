"""Tensor cores (tgfx/lowering/tensor_cores.py, the TC option) without a GPU: the fragment layout of mma m16n8k16 as
PTX's ISA states it, the op's expansion for the CPU against a 16x8x16 matmul, the rewrite of float16 and bfloat16
contractions (matmuls aligned and odd, batched, with an epilogue, convolutions) run on the emulating CUDA driver
against numpy's float32-accumulated answer rounded to the dtype, the PTX ptxas assembles (the mma instruction in it,
no spills), the heuristics' choice from the target, and GPU_TC=0."""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.lowering as lowering
from tests.test_cuda_runtime import emulated, emulated_programs  # noqa: F401 (fixtures)
from tests.test_nvptx import SPILL_BOUND, _lowered, _one_kernel, cpu, needs_ptxas, ptxas_report
from tgfx import config
from tgfx.devices.target import GPU_DEFAULT, GPUTarget
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import KernelOptError, Opt
from tgfx.lowering.optimize_gpu import optimize_gpu, thread_loops
from tgfx.lowering.render_nvptx import kernel_ir, ptx_of
from tgfx.lowering.tensor_cores import TC_LAYOUTS, a_element, b_element, c_element, contraction

rng = np.random.default_rng(0)
HALF = {"float16": dtypes.float16, "bfloat16": dtypes.bfloat16}

# PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"; lane = 4 * groupID + threadID_in_group.
# A (16 x 16, .row): a0, a1 at row groupID, a2, a3 at groupID + 8, a4, a5 at groupID, a6, a7 at groupID + 8; column
# threadID_in_group * 2 + (i & 1) for a0..a3, 8 more for a4..a7
A_ROWS, A_COLS = (0, 0, 8, 8, 0, 0, 8, 8), (0, 1, 0, 1, 8, 9, 8, 9)   # + groupID, + 2 * threadID_in_group
# B (16 x 8, .col): row threadID_in_group * 2 + (i & 1) for b0, b1, 8 more for b2, b3; column groupID
B_ROWS = (0, 1, 8, 9)                                                  # + 2 * threadID_in_group
# C and D (16 x 8): c0, c1 at row groupID, c2, c3 at groupID + 8; column threadID_in_group * 2 + (i & 1)
C_ROWS, C_COLS = (0, 0, 8, 8), (0, 1, 0, 1)


def test_fragment_layout_is_ptxs() -> None:
    held = {"a": set(), "b": set(), "c": set()}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for i in range(8):
            assert a_element(i, g, t) == (g + A_ROWS[i], 2 * t + A_COLS[i])
            held["a"].add(a_element(i, g, t))
        for i in range(4):
            assert b_element(i, g, t) == (2 * t + B_ROWS[i], g)
            assert c_element(i, g, t) == (g + C_ROWS[i], 2 * t + C_COLS[i])
            held["b"].add(b_element(i, g, t))
            held["c"].add(c_element(i, g, t))
    # every element of each matrix held by exactly one lane's register
    assert (len(held["a"]), len(held["b"]), len(held["c"])) == (256, 128, 128)


def _run_on_cpu(ast: UOp, sink: UOp, *args: Any) -> np.ndarray:
    """What index-level kernel `sink` (in place of `ast`, the one kernel of `a @ b`), its thread ids turned back into
    loops, computes on the CPU from `args`."""
    orig = lowering.lower_kernel

    def hook(x, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        assert x.key == ast.key
        return orig(thread_loops(sink), *a, **k)
    lowering.forget_compiled()
    lowering.lower_kernel = hook
    try:
        return (args[0] @ args[1]).numpy()
    finally:
        lowering.lower_kernel = orig
        lowering.forget_compiled()


def test_expanded_mma_is_a_16x8x16_matmul() -> None:
    # one warp's mma on a tiny graph, its fragments loaded as the ISA's table says, C a value of each lane's own
    # (4 * lane + i, so a C element at the wrong place shows): D = A @ B + C, exact in float16 for small integers
    a = rng.integers(-3, 4, (16, 16)).astype(np.float16)
    b = rng.integers(-3, 4, (16, 8)).astype(np.float16)
    ta, tb = cpu(a), cpu(b)
    ast, _ = _one_kernel(lambda x, y: x @ y, ta, tb)
    slots = {u.arg[0]: u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL}
    out, src_a, src_b = slots[0], *sorted((u for s, u in slots.items() if s), key=lambda u: -u.arg[1])  # (by size)
    f16, idx = dtypes.float16, dtypes.index
    lane = UOp(Ops.SPECIAL, idx, (), ("lidx0", 32))
    g, t = lane // 4, lane % 4

    def load(buf: UOp, at: UOp) -> UOp:
        return UOp(Ops.LOAD, f16, (UOp(Ops.INDEX, f16, (buf, at)),))
    frag_a = [load(src_a, (g + A_ROWS[i]) * 16 + t * 2 + A_COLS[i]) for i in range(8)]
    frag_b = [load(src_b, (t * 2 + B_ROWS[i]) * 8 + g) for i in range(4)]
    frag_c = [(lane * 4 + i).cast(dtypes.float32) for i in range(4)]
    stores = []
    for i in range(4):
        d = UOp(Ops.WMMA, dtypes.float32, (*frag_a, *frag_b, *frag_c), i)
        at = UOp(Ops.INDEX, f16, (out, (g + C_ROWS[i]) * 8 + t * 2 + C_COLS[i]))
        stores.append(UOp(Ops.STORE, None, (at, d.cast(f16))))
    got = _run_on_cpu(ast, UOp(Ops.SINK, None, tuple(stores)), ta, tb)
    c = np.zeros((16, 8), np.float32)
    for lane_id in range(32):
        for i in range(4):
            c[lane_id // 4 + C_ROWS[i], 2 * (lane_id % 4) + C_COLS[i]] = 4 * lane_id + i
    np.testing.assert_array_equal(got.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32) + c)


def _half(x: np.ndarray, dtype: str) -> tg.Tensor:
    """`x` as a realized tgfx array of `dtype`."""
    out = cpu(x.astype(np.float32)).astype(HALF[dtype])
    out.numpy()
    return out


def _rounded_within_an_ulp(got: np.ndarray, want32: np.ndarray, scale: np.ndarray, steps: int, dtype: str) -> None:
    """`got` (in `dtype`) is float32 sum `want32` rounded to `dtype`: the same, or apart by at most one unit of its
    last place plus what two float32 sums of `steps` terms in different orders (the tensor core's 16 steps at a time,
    numpy's) may differ by, 2 * steps * 2**-24 * (the sum of the terms' magnitudes, `scale`): one ulp where the two
    round to either side of a halfway point, more only where the terms cancel to much less than their magnitudes."""
    want = cpu(want32).astype(HALF[dtype]).astype(dtypes.float32).numpy()
    got = np.asarray(got, np.float32)
    bits = 11 if dtype == "float16" else 8
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(want), 1e-30))) - (bits - 1))
    off = np.abs(got - want)
    bound = ulp + 2 * steps * 2.0 ** -24 * scale
    assert (off <= bound).all(), (off.max(), np.argmax(off / bound))
    assert (off == 0).mean() > 0.95, (off == 0).mean()


CASES = [
    ("matmul", (33, 65, 17)),      # M, K, N: every axis past a tile's end
    ("matmul", (128, 128, 128)),
    ("matmul", (16, 16, 16)),      # one mma's depth: no reduce loop (its one step's mma was hoisted above the
                                   # accumulators, which the renderer read for its C before they were defined)
    ("batched", (3, 40, 48, 24)),  # a batch axis (grid x)
    ("epilogue", (70, 100, 40)),   # relu(a @ b + bias) fused after the sum
    ("conv", (2, 8, 10, 10, 16)),  # batch, channels, image, output channels: 3x3 SAME (masked reads)
    ("matmul", (1100, 40, 1200)),  # blocks of 128 x 64 staged in shared memory, past every axis's end
    ("transposed", (1100, 40, 1200)),   # ... A's tile [step][row], B's [column][step]: ldmatrix the other way
]


def _case(kind: str, shape: tuple[int, ...], dtype: str) -> tuple[Any, Any, np.ndarray, np.ndarray, int]:
    """(function, its half-precision arguments, numpy's float32 answer from the same values, the sums of its terms'
    magnitudes, the terms a sum)."""
    if kind == "conv":
        n, c, h, w, o = shape
        x, k = _half(rng.standard_normal((n, c, h, w)), dtype), _half(rng.standard_normal((o, c, 3, 3)), dtype)
        x32, k32 = x.astype(dtypes.float32).to("CPU"), k.astype(dtypes.float32).to("CPU")
        want, scale = (tg.lax.conv(p, q, (1, 1), "SAME").numpy() for p, q in ((x32, k32), (abs(x32), abs(k32))))
        return (lambda p, q: tg.lax.conv(p, q, (1, 1), "SAME")), (x, k), want, scale, c * 9
    *batch, m, k, n = shape
    if kind == "transposed":   # A stored K by M, B stored N by K: shared tiles the other way round, read transposed
        a, b = _half(rng.standard_normal((k, m)), dtype), _half(rng.standard_normal((n, k)), dtype)
        a32, b32 = a.astype(dtypes.float32).numpy().T, b.astype(dtypes.float32).numpy().T
        return (lambda p, q: p.T @ q.T), (a, b), a32 @ b32, np.abs(a32) @ np.abs(b32), k
    a, b = _half(rng.standard_normal((*batch, m, k)), dtype), _half(rng.standard_normal((*batch, k, n)), dtype)
    a32, b32 = a.astype(dtypes.float32).numpy(), b.astype(dtypes.float32).numpy()
    scale = np.matmul(np.abs(a32), np.abs(b32))
    if kind == "epilogue":
        bias = _half(rng.standard_normal(n), dtype)
        # (the sum rounded to the dtype, then the bias added in the dtype: what the kernel's epilogue computes)
        s = cpu(a32 @ b32).astype(HALF[dtype])
        want = tg.nn.relu(s + bias).astype(dtypes.float32).numpy()
        return (lambda p, q, r: tg.nn.relu(p @ q + r)), (a, b, bias), want, scale, k
    return (lambda p, q: p @ q), (a, b), np.matmul(a32, b32), scale, k


def _check(kind: str, got: np.ndarray, want: np.ndarray, scale: np.ndarray, steps: int, dtype: str) -> None:
    if kind == "epilogue":   # (rounded twice: to the dtype after the sum, and after the bias)
        np.testing.assert_allclose(got, want, rtol=2 ** -7 if dtype == "bfloat16" else 2 ** -10, atol=1e-2)
    else:
        _rounded_within_an_ulp(got, want, scale, steps, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("kind", "shape"), CASES)
def test_emulated_half_contractions_on_tensor_cores_compute_numpys_answers(
        emulated_programs: Any, kind: str, shape: tuple[int, ...], dtype: str) -> None:  # noqa: F811
    drv, dev = emulated_programs
    fn, args, want, scale, steps = _case(kind, shape, dtype)
    drv.gpu_options.clear()
    got = fn(*(tg.device_put(x, "CUDA:0") for x in args)).astype(dtypes.float32).numpy()
    assert [o.op for o in drv.gpu_options].count("TC") == 1, drv.gpu_options
    _check(kind, got, want, scale, steps, dtype)


def _with_options(fn: Any, args: tuple, opts: list[Opt]) -> np.ndarray:
    """`fn(*args)` on the CPU, its one tensor-core contraction kernel (the one TC fits) replaced by its GPU form with
    `opts`, the thread ids turned back into loops (`thread_loops`)."""
    orig, taken = lowering.lower_kernel, []

    def hook(x, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        sink = lowering.index_level(x, pieces=False)
        if contraction(sink) is not None:
            taken.append(x)
            return orig(thread_loops(optimize_gpu(sink, GPU_DEFAULT, opts)[0]), *a, **k)
        return orig(x, *a, **k)
    lowering.forget_compiled()
    lowering.lower_kernel = hook
    try:
        out = fn(*args).astype(dtypes.float32).numpy()
    finally:
        lowering.lower_kernel = orig
        lowering.forget_compiled()
    assert len(taken) == 1
    return out


@pytest.mark.parametrize("layout", range(len(TC_LAYOUTS)))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("kind", "shape"), [
    ("matmul", (150, 70, 90)),      # past a block's end along M, N and K (128 x 64 outputs, 32 steps: layout 1)
    ("matmul", (256, 64, 128)),     # blocks that divide every axis: no masks
    ("transposed", (150, 70, 90)),  # A contiguous along M, B along K
    ("transposed", (256, 64, 128)),
    ("batched", (2, 40, 48, 72)),
    ("epilogue", (70, 100, 40)),
    ("conv", (2, 8, 10, 10, 16)),   # merged axes (the image's batch, rows and columns; channels and taps)
])
def test_each_layout_computes_numpys_answers(layout: int, dtype: str, kind: str, shape: tuple[int, ...]) -> None:
    fn, args, want, scale, steps = _case(kind, shape, dtype)
    axis = contraction(lowering.index_level(_lowered(fn, *args)[0][0], pieces=False)).k[0].arg[0] \
        if kind != "epilogue" else 2
    got = _with_options(fn, args, [Opt("TC", axis, layout)])
    _check(kind, got, want, scale, steps, dtype)


@needs_ptxas
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_every_half_contraction_assembles_with_the_mma_instruction(dtype: str) -> None:
    for kind, shape in CASES:
        fn, args, *_ = _case(kind, shape, dtype)
        asts, _ = _lowered(fn, *args)
        tc = [ast for ast in asts if any(o.op == "TC" for o in kernel_ir(ast)[3])]
        assert len(tc) == 1, (kind, [lowering.kernel_name(a) for a in asts])
        ptx, name, dims = ptx_of(tc[0], GPU_DEFAULT)
        short = "bf16" if dtype == "bfloat16" else "f16"
        mmas = ptx.count(f"mma.sync.aligned.m16n8k16.row.col.f32.{short}.{short}.f32")
        assert mmas >= 1 and dims.block[0] == 32, (kind, mmas, dims)
        if kind in ("matmul", "batched"):   # the accumulators summed by the mma (its C), not by adds of its results
            assert "add.f32" not in ptx and "fma.rn.f32" not in ptx, kind
        if kernel_ir(tc[0])[3][0].amount != 0:   # blocks staged through shared memory: fragments by ldmatrix
            assert ptx.count("bar.sync") == 2 and "st.shared" in ptx and "ld.shared" not in ptx, kind
            # x @ w: A's rows contiguous along K, B's along N (its matrices read transposed); x.T @ w.T the other way
            trans = ("", ".trans") if kind == "matmul" else (".trans", "")
            assert f"ldmatrix.sync.aligned.m8n8.x4{trans[0]}.shared.b16" in ptx, kind
            assert f"ldmatrix.sync.aligned.m8n8.x2{trans[1]}.shared.b16" in ptx, kind
        report = ptxas_report(ptx)
        spills = int(re.search(r"(\d+) bytes spill stores", report).group(1))
        assert spills <= SPILL_BOUND, (kind, report)


def test_the_rewrite_is_warps_of_mma_tiles_over_merged_axes() -> None:
    a, b = _half(rng.standard_normal((33, 65)), "bfloat16"), _half(rng.standard_normal((65, 17)), "bfloat16")
    ast, _ = _one_kernel(lambda x, y: x @ y, a, b)
    sink = lowering.index_level(ast, pieces=False)
    c = contraction(sink)
    assert c is not None and [r.src[0].arg for r in (*c.m, *c.k, *c.n)] == [33, 65, 17] and not c.batch
    out, applied = optimize_gpu(sink, GPU_DEFAULT)
    assert applied == [Opt("TC", c.k[0].arg[0], 0)]   # (warps of one tile: too few outputs for blocks of 128 x 64)
    nodes = out.toposort()
    mmas = [u for u in nodes if u.op is Ops.WMMA]
    assert sorted(u.arg for u in mmas) == [0, 1, 2, 3] and len({u.src for u in mmas}) == 1   # one mma, four results
    assert all(s.dtype == dtypes.bfloat16 for s in mmas[0].src[:12])
    reds = [u for u in nodes if u.op is Ops.REDUCE]
    assert len(reds) == 4 and {r.src[1].src[0].arg for r in reds} == {5}   # 65 steps: 5 of 16, the last masked
    assert len(out.src) == 4 and all(len(st.src) == 3 for st in out.src)   # four stores a lane, gated at the edges
    # 3 tiles of 16 rows and 3 of 8 columns, 2 x 2 warps a block: blocks of (32, 2, 2) threads, (1, 2, 2) of them
    _, _, dims, _ = kernel_ir(ast)
    assert dims.block == (32, 2, 2) and dims.grid == (1, 2, 2), dims


def test_heuristics_take_tensor_cores_only_where_they_fit() -> None:
    def opts(fn: Any, *args: Any, target: GPUTarget = GPU_DEFAULT) -> list[Opt]:
        ast, _ = _one_kernel(fn, *args)
        return optimize_gpu(lowering.index_level(ast, pieces=False), target)[1]
    mm = (lambda x, y: x @ y)
    a, b = _half(rng.standard_normal((64, 64)), "float16"), _half(rng.standard_normal((64, 64)), "float16")
    assert opts(mm, a, b) == [Opt("TC", 2, 0)]   # too few outputs for blocks: warps of one tile
    # blocks of 128 x 64 where they give each of an H200's 132 SMs one, else of 64 x 64
    big = [_half(rng.standard_normal(s), "bfloat16") for s in ((2048, 64), (64, 2048), (1024, 64), (64, 1024))]
    assert opts(mm, *big[:2]) == [Opt("TC", 2, 1)] and opts(mm, *big[2:]) == [Opt("TC", 2, 2)]
    assert "TC" not in [o.op for o in opts(mm, a, b, target=GPUTarget("T4", (7, 5), 40))]   # no m16n8k16 before sm_80
    f32 = cpu(rng.standard_normal((64, 64)).astype(np.float32))
    assert "TC" not in [o.op for o in opts(mm, f32, f32)]                 # float32: the FMA tiles
    assert "TC" not in [o.op for o in opts(mm, a, b[:, :1])]              # a matrix-vector product: one column
    assert "TC" not in [o.op for o in opts(mm, a[:, :8], b[:8])]          # 8 steps: less than one mma's
    assert "TC" not in [o.op for o in opts(lambda x: x.sum(axis=1), a)]   # a sum, no product
    ast, _ = _one_kernel(mm, a, b)
    for after in (Opt("GROUP", 3, 32), Opt("UNROLL", 3, 2)):   # (a search's actions on the TC kernel's K steps)
        with pytest.raises(KernelOptError, match="TC comes alone"):
            optimize_gpu(lowering.index_level(ast, pieces=False), GPU_DEFAULT, [Opt("TC", 2, 0), after])
    with pytest.raises(KernelOptError, match="not a float16/bfloat16 contraction"):
        ast, _ = _one_kernel(mm, f32, f32)
        optimize_gpu(lowering.index_level(ast, pieces=False), GPU_DEFAULT, [Opt("TC", 2, 4)])


def test_gpu_tc_0_turns_tensor_cores_off_and_is_part_of_the_jit_key() -> None:
    a, b = _half(rng.standard_normal((128, 64)), "bfloat16"), _half(rng.standard_normal((64, 128)), "bfloat16")
    ast, _ = _one_kernel(lambda x, y: x @ y, a, b)
    with tg.Context(GPU_TC=0):
        plain = kernel_ir(ast)[3]
        ptx_plain = ptx_of(ast, GPU_DEFAULT)[0]
        off = config.codegen()
    assert "TC" not in [o.op for o in plain] and "mma.sync" not in ptx_plain
    assert kernel_ir(ast)[3][0].op == "TC" and "mma.sync" in ptx_of(ast, GPU_DEFAULT)[0]   # (cached apart)
    assert "GPU_TC" in config.CODEGEN and off != config.codegen()
