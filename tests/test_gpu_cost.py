"""The static launch and memory model of GPU kernels (tgfx/lowering/gpu_cost.py), on hand-built index-level kernels
with the options given: threads and fill, a thread's loops, and each warp access's stride and 32-byte sectors
(coalesced copies, a transposed read, broadcasts, an UPCAST's copies, masked lanes, a gather). No device."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tgfx as tg
from tgfx.devices.target import GPU_DEFAULT, GPUTarget
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.gpu_cost import LaunchCost, launch_cost
from tgfx.lowering.kernel_opts import Opt
from tgfx.lowering.optimize_gpu import optimize_gpu
from tgfx.lowering.symbolic import NotStatic, evaluate

# an H200's 132 SMs, each holding 2048 threads
TARGET = GPU_DEFAULT
F32 = dtypes.float32


def buf(slot: int, size: int, dtype=F32) -> UOp:  # noqa: ANN001
    return UOp(Ops.DEFINE_GLOBAL, dtype, (), (slot, size))


def rng(axis: int, size: int, kind: str = "loop") -> UOp:
    return UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, size),), (axis, kind))


def load(b: UOp, index: UOp) -> UOp:
    return UOp(Ops.LOAD, b.dtype, (UOp(Ops.INDEX, b.dtype, (b, index)),))


def store(b: UOp, index: UOp, value: UOp) -> UOp:
    return UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (UOp(Ops.INDEX, b.dtype, (b, index)), value)),))


def cost(sink: UOp, opts: list[Opt], target: GPUTarget = TARGET) -> LaunchCost:
    return launch_cost(optimize_gpu(sink, target, opts)[0], target)


def access(c: LaunchCost, kind: str, slot: int) -> list:
    return [a for a in c.accesses if a.kind == kind and a.buffer == slot]


def copy(rows: int, cols: int, transposed: bool = False) -> UOp:
    """out[i, j] = a[i, j] (or a[j, i]: `a` is (cols, rows))."""
    i, j = rng(0, rows), rng(1, cols)
    src = j * rows + i if transposed else i * cols + j
    return store(buf(0, rows * cols), i * cols + j, load(buf(1, rows * cols), src))


def test_a_coalesced_copy() -> None:
    c = cost(copy(64, 256), [Opt("GLOBAL", 1, 128), Opt("GLOBAL", 0, 1)])
    assert (c.grid, c.block, c.threads) == ((2, 64, 1), (128, 1, 1), 64 * 256)
    assert c.resident == 132 * 2048 and c.fill == pytest.approx(64 * 256 / (132 * 2048))
    assert c.trips == 1 and c.loops == ()
    (ld,), (st,) = access(c, "load", 1), access(c, "store", 0)
    # 32 threads on 32 adjacent floats: 128 bytes, four sectors
    assert (ld.stride, ld.sectors, st.stride, st.sectors) == (1, 4, 1, 4)
    assert not c.uncoalesced and all(b.efficiency == 1.0 for b in c.buffers)


def test_a_transposed_read_touches_a_sector_a_thread() -> None:
    c = cost(copy(64, 256, transposed=True), [Opt("GLOBAL", 1, 128), Opt("GLOBAL", 0, 1)])
    (ld,), (st,) = access(c, "load", 1), access(c, "store", 0)
    assert (ld.stride, ld.sectors, ld.dense_sectors) == (64, 32, 4)
    assert (st.stride, st.sectors) == (1, 4)
    (bad,) = c.uncoalesced
    assert (bad.kind, bad.buffer, bad.sectors, bad.efficiency) == ("load", 1, 32, 4 / 32)
    # threads along the other axis: the load is coalesced, the store strided
    c = cost(copy(64, 256, transposed=True), [Opt("GLOBAL", 0, 64), Opt("GLOBAL", 1, 1)])
    assert (access(c, "load", 1)[0].stride, access(c, "store", 0)[0].stride) == (1, 256)
    assert [(b.kind, b.buffer) for b in c.uncoalesced] == [("store", 0)]


def test_a_broadcast_is_one_sector_for_the_warp() -> None:
    i, j = rng(0, 64), rng(1, 256)
    row, col = buf(1, 64), buf(2, 256)
    sink = store(buf(0, 64 * 256), i * 256 + j, load(row, i) + load(col, j))
    c = cost(sink, [Opt("GLOBAL", 1, 256), Opt("GLOBAL", 0, 1)])
    (r,), (k,) = access(c, "load", 1), access(c, "load", 2)
    assert (r.stride, r.sectors, r.broadcast) == (0, 1, True)
    assert (k.stride, k.sectors, k.broadcast) == (1, 4, False)
    assert [b.broadcasts for b in c.buffers if b.kind == "load"] == [1, 0] and not c.uncoalesced
    assert "load  buf1: 1 accesses, every one a broadcast" in str(c)


def test_an_upcasts_copies_are_strided_each_and_adjacent_together() -> None:
    c = cost(copy(64, 256), [Opt("UPCAST", 1, 4), Opt("GLOBAL", 1, 64), Opt("GLOBAL", 0, 1)])
    loads = access(c, "load", 1)
    assert c.threads == 64 * 64 and len(loads) == 4
    assert {(a.stride, a.sectors) for a in loads} == {(4, 16)}   # each: every fourth float of 512 bytes
    (b,) = [b for b in c.buffers if b.kind == "load"]
    assert (b.sectors, b.dense_sectors, b.efficiency) == (16, 16, 1.0) and b.coalesced


def test_lanes_past_the_end_and_a_reduce_loop() -> None:
    # 40 columns in blocks of 32: the middle block (the second) has 8 threads inside; each sums 100 rows
    i, j, k = rng(0, 4), rng(1, 40), rng(2, 100, "reduce")
    red = UOp(Ops.REDUCE, F32, (load(buf(1, 4 * 100 * 40), i * 4000 + k * 40 + j), k), Ops.ADD)
    c = cost(store(buf(0, 160), i * 40 + j, red), [Opt("GLOBAL", 1, 32), Opt("GLOBAL", 0, 1)])
    assert (c.grid, c.block, c.threads) == ((2, 4, 1), (32, 1, 1), 256)
    assert c.trips == 100 and c.loops == (("reduce2", 100),)
    (ld,) = access(c, "load", 1)
    assert len(ld.addresses) == 8 and (ld.stride, ld.sectors, ld.dense_sectors) == (1, 1, 1)


def test_a_gather_has_no_static_address() -> None:
    i = rng(0, 1024)
    idx = buf(2, 1024, dtypes.int32)
    at = load(idx, i).cast(dtypes.index)
    c = cost(store(buf(0, 1024), i, load(buf(1, 4096), at)), [Opt("GLOBAL", 0, 128)])
    (g,) = access(c, "load", 1)
    assert (g.stride, g.sectors) == (None, None)
    assert [(b.kind, b.buffer) for b in c.uncoalesced] == [("load", 1)]
    assert access(c, "load", 2)[0].stride == 1


def test_fill_follows_the_target() -> None:
    small = dataclasses.replace(TARGET, sms=8, threads_per_sm=1024)
    c = cost(copy(64, 256), [Opt("GLOBAL", 1, 128), Opt("GLOBAL", 0, 1)], small)
    assert c.resident == 8 * 1024 and c.fill == 2.0
    t = GPUTarget.from_attributes("x", {"COMPUTE_CAPABILITY_MAJOR": 8, "COMPUTE_CAPABILITY_MINOR": 6,
                                        "MAX_THREADS_PER_MULTIPROCESSOR": 1536})
    assert t.threads_per_sm == 1536


def test_evaluate_truncates_as_the_ir() -> None:
    r = rng(0, 10)
    assert evaluate((r * 7 - 20) // 3, {r: 1}) == -4 and evaluate((r * 7 - 20) % 3, {r: 1}) == -1
    with pytest.raises(KeyError, match="RANGE"):
        evaluate(r + 1, {})
    with pytest.raises(NotStatic):
        evaluate(load(buf(1, 10, dtypes.int32), r).cast(dtypes.index) + 1, {r: 2})


def test_debug_3_prints_each_gpu_kernels_model(capsys: pytest.CaptureFixture) -> None:
    import tgfx.lowering as lowering
    from tgfx.lowering.render_nvptx import kernel_ir
    seen = []
    orig = lowering.lower_kernel

    def hook(ast, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(ast)
        return orig(ast, *a, **k)
    lowering.forget_compiled()
    lowering.lower_kernel = hook
    try:
        (tg.asarray(np.ones((64, 48), np.float32), device="CPU").T + 1.0).numpy()   # the CPU's lowering, hooked
    finally:
        lowering.lower_kernel = orig
    capsys.readouterr()
    with tg.Context(DEBUG=3):
        _, name, dims, _ = kernel_ir(seen[-1])
    out = capsys.readouterr().out
    assert f"{name}: grid {dims.grid} block {dims.block}" in out and "sectors a warp" in out


def _conv_kernel(x: tuple[int, ...], w: tuple[int, ...]) -> UOp:
    """The index-level kernel of a 3x3 "SAME" convolution of NCHW `x` by OIHW `w` (as the GPU lowers it)."""
    import tgfx.lowering as lowering
    from tests.test_nvptx import _one_kernel, f32
    ast, _ = _one_kernel(lambda a, b: tg.lax.conv(a, b, (1, 1), "SAME"), f32(*x), f32(*w))
    return lowering.index_level(ast, pieces=False)


def _weights(c: LaunchCost, size: int, sink: UOp) -> int:
    (slot,) = {u.arg[0] for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL and u.arg[1] == size}
    return slot


@pytest.mark.parametrize("x, w", [((128, 16, 8, 8), (32, 16, 3, 3)),     # the cnn step's second convolution
                                  ((16, 64, 32, 32), (64, 64, 3, 3))])   # the conv2d bench row
def test_a_convolutions_kernel_fills_the_gpu_with_coalesced_accesses(x: tuple, w: tuple) -> None:
    # a register tile a thread only as large as leaves a default block on every SM: the cnn step's convolution
    # (262144 outputs) took 4 x 8 tiles, 8192 threads (two warps an SM; 5.8 of the step's 7.5 ms on an H200), the
    # conv2d row's 32768; and the block's threads beside the image columns on the image rows (the nearest axis in
    # memory), not the output channels (a warp read 16 weights 576 bytes apart)
    sink = _conv_kernel(x, w)
    gpu, opts = optimize_gpu(sink, TARGET)
    c = launch_cost(gpu, TARGET)
    assert c.threads >= TARGET.fill_threads() == 132 * 256, (c.threads, opts)
    assert not c.uncoalesced, str(c)
    assert all(a.broadcast for a in access(c, "load", _weights(c, w[0] * w[1] * 9, sink)))
    assert c.trips == w[1] * 9   # the reduce over input channels and taps, in each thread
    # on a GPU of 16 SMs the same outputs fill it with whole tiles (4 x 8)
    few = dataclasses.replace(TARGET, sms=16)
    lanes, rows = few.contraction_tile()
    assert [o.amount for o in optimize_gpu(sink, few)[1] if o.op == "UPCAST"] == [lanes, rows]
