"""Direct convolution (implicit GEMM): `tg.nn.conv2d` / `tg.lax.conv_general_dilated` run as one register-tiled kernel
that reads the input through index arithmetic, its padding a mask.

Counted, not timed: the kernel's options (one vector of output columns by `conv_tile_rows` output channels, from the
target), its vector accumulators and the one masked vector load of the padded read a step, one kernel and three
buffers (no im2col or padded copy). Values against the float64 numpy reference of test_lax_conv on shapes where
that tile applies; the gradients (the input's and the kernel's, written as convolutions) by central differences.
"""
from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from test_grad import check_grads
from test_lax_conv import np_conv

import tgfx as tg
from tgfx import lax
from tgfx.devices.target import Target
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import index_level, kernel_source
from tgfx.lowering.compile import optimized_ir
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.inline import inline
from tgfx.lowering.kernel_opts import Opt, apply_opt, ranges
from tgfx.lowering.schedule import schedule

AVX2 = Target("znver3", "+avx,+avx2,+fma", cores=1)
AVX512 = Target("znver4", "+avx,+avx2,+fma,+avx512f", cores=1)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def kernel_asts(*outs: tg.Tensor) -> list[UOp]:
    """The kernel ASTs that compute `outs`, in order."""
    inlined = inline(UOp(Ops.SINK, None, tuple(o.uop for o in outs)))
    linear, _ = schedule(list(inlined.src))
    return [call.src[0] for call in linear.src]


def only_kernel(out: tg.Tensor) -> UOp:
    (ast,) = kernel_asts(out)
    return ast


def axis_of(sink: UOp, size: int, first: bool = False) -> int:
    """The id of the (last, or first) output range of `size`."""
    ids = [i for i, r in sorted(ranges(sink).items()) if r.arg[1] == "loop" and r.src[0].arg == size]
    return ids[0] if first else ids[-1]


# ---- the register tile ----
@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_a_padded_convolution_tiles_output_columns_by_output_channels(target: Target) -> None:
    """NCHW, padding 1: a vector of output columns (the padded input read contiguously along them) by `conv_tile_rows`
    output channels (which that read does not vary along), sized by the target: 8 x 4 with AVX2, 16 x 8 with
    AVX-512."""
    x, w = tg.asarray(rand(2, 8, 16, 32)), tg.asarray(rand(16, 8, 3, 3))
    sink = index_level(only_kernel(tg.nn.conv2d(x, w, padding=1)))
    opts = hand_coded_opts(sink, target)
    assert opts[:2] == [Opt("UPCAST", axis_of(sink, 32), target.lanes()), Opt("UPCAST", axis_of(sink, 16, True),
                                                                                target.conv_tile_rows())]


def test_narrow_images_fill_a_vector_with_whole_rows() -> None:
    """8 x 8 images (the digits): the 8 columns are half an AVX-512 vector, so two rows (16 adjacent elements of the
    image) make one; AVX2's 8 lanes take one row. Either way 8 output channels (`conv_tile_rows`)."""
    x, w = tg.asarray(rand(4, 16, 8, 8)), tg.asarray(rand(32, 16, 3, 3))
    sink = index_level(only_kernel(tg.nn.conv2d(x, w, padding=1)))
    cols, rows = axis_of(sink, 8), axis_of(sink, 8, first=True)
    assert hand_coded_opts(sink, AVX512)[:3] == [Opt("UPCAST", cols, 8), Opt("UPCAST", rows, 2), Opt("UPCAST", 1, 8)]
    assert hand_coded_opts(sink, AVX2)[:2] == [Opt("UPCAST", cols, 8), Opt("UPCAST", 1, 8)]
    ir = kernel_source(only_kernel(tg.nn.conv2d(x, w, padding=1)), AVX512).ir
    assert len(re.findall(r"%vacc\d+ = alloca <16 x float>", ir)) == 8
    assert "alloca float" not in ir


def _accumulators(ir: str) -> tuple[int, int]:
    """(vector, scalar) accumulators of a kernel's IR."""
    return len(re.findall(r"%vacc\d+ = alloca <", ir)), len(re.findall(r"%acc\d+ = alloca float", ir))


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_a_fused_activation_of_the_input_keeps_the_vector_tile(target: Target) -> None:
    """conv2d(relu(h + b)): the previous layer's bias and relu are computed in the convolution's read of h. The bias
    is read unclamped (its offset is in bounds), the lanes' different edge masks are one mask vector, and the padded
    read of h one masked load: vector accumulators, none scalar (scalar, the kernel ran 8x slower)."""
    h, b, w = tg.asarray(rand(4, 16, 8, 8)), tg.asarray(rand(16)), tg.asarray(rand(32, 16, 3, 3))
    ir = kernel_source(only_kernel(tg.nn.conv2d(tg.nn.relu(h + b.reshape(16, 1, 1)), w, padding=1)), target).ir
    assert _accumulators(ir) == (target.conv_tile_rows(), 0)
    assert len(re.findall(r"call <\d+ x float> @llvm.masked.load", ir)) == 1


def test_the_input_gradient_through_a_relu_keeps_the_vector_tile() -> None:
    """The input gradient of conv2d under a relu, `conv(where(x > 0, g, 0), flipped w)` with g broadcast over the
    pixels (a mean's gradient): the lanes read the same g and differ by the relu's mask, which reads x lane by
    lane; they pack by what the mask reads."""
    # (on the CPU by name: a GPU splits this reduce of 4096 outputs over its SMs first, `split_reduce.gpu_split`)
    x, g, w = (tg.asarray(rand(*s), device="CPU") for s in ((4, 32, 8, 8), (4, 32, 1, 1), (32, 16, 3, 3)))
    dy = tg.numpy.where(x > 0, tg.numpy.broadcast_to(g, (4, 32, 8, 8)), 0.0)
    dx = lax.conv_general_dilated(dy, w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1], (1, 1), "SAME")
    ir = kernel_source(only_kernel(dx), AVX512).ir
    assert _accumulators(ir) == (AVX512.conv_tile_rows(), 0)


@pytest.mark.x64
def test_fused_activation_convolution_values_and_gradients() -> None:
    """A two-layer convolution with the first layer's bias and relu fused into the second's read, its relu's mask
    in the input gradient's read: float64 gradients by central differences, float32 values and gradients (the
    kernels of the digits CNN's step) against numpy and float64."""
    x = rand(3, 4, 8, 8, seed=8)
    args = (rand(8, seed=9), rand(8, 4, 3, 3, seed=10), rand(8, 8, 3, 3, seed=11))

    def f(b1: tg.Tensor, w1: tg.Tensor, w2: tg.Tensor) -> tg.Tensor:
        h = tg.nn.relu(tg.nn.conv2d(tg.asarray(x).astype(b1.dtype), w1, padding=1) + b1.reshape(8, 1, 1))
        return tg.nn.relu(tg.nn.conv2d(h, w2, padding=1)).mean(axis=(2, 3))

    h = np.maximum(np_conv(x, args[1], (1, 1), "SAME") + args[0][:, None, None], 0)
    ref = np.maximum(np_conv(h, args[2], (1, 1), "SAME"), 0).mean(axis=(2, 3))
    np.testing.assert_allclose(f(*map(tg.asarray, args)).numpy(), ref, rtol=1e-4, atol=1e-5)
    check_grads(f, *(a.astype(np.float64) for a in args))
    loss = lambda *a: f(*a).sum()   # noqa: E731
    g32 = tg.grad(loss, argnums=(0, 1, 2))(*map(tg.asarray, args))
    g64 = tg.grad(loss, argnums=(0, 1, 2))(*(tg.asarray(a.astype(np.float64)) for a in args))
    for a, b in zip(g32, g64, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_upcast_keeps_the_lane_outside_the_padding_clamp() -> None:
    """After UPCAST of the output columns, the padded input's lanes read `where(valid, base, 0) + j`: the lanes whose
    masks agree share one clamped base (one WHERE), so their addresses are adjacent. Clamped lane by lane
    (`where(valid, base + j, 0)`) each had its own."""
    x, w = tg.asarray(rand(1, 2, 4, 16)), tg.asarray(rand(8, 2, 3, 3))
    sink = index_level(only_kernel(tg.nn.conv2d(x, w, padding=1)))
    (xbuf,) = {u.src[0].arg[0] for u in sink.toposort() if u.op is Ops.INDEX and u.src[1].op is Ops.WHERE}
    out = apply_opt(sink, Opt("UPCAST", axis_of(sink, 16), 16))
    reads = {u.src[1] for u in out.toposort() if u.op is Ops.INDEX and u.src[0].arg[0] == xbuf}
    assert len(reads) >= 16
    bases = {s for i in reads for s in i.toposort() if s.op is Ops.WHERE}
    assert len(bases) <= 3   # the first lane's, the last lane's, and the fourteen between share one


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_the_padded_read_is_one_masked_vector_load_into_vector_accumulators(target: Target) -> None:
    """The tile's accumulators are vector registers (packs: its edge lanes, masked, pack with the others), and the
    padded read of x a step is one `llvm.masked.load` of a vector (lanes where the mask fails read nothing), not a
    gather of clamped scalar reads."""
    x, w = tg.asarray(rand(2, 4, 8, 32)), tg.asarray(rand(8, 4, 3, 3))
    ir = kernel_source(only_kernel(tg.nn.conv2d(x, w, padding=1)), target).ir
    lanes, rows = target.lanes(), target.conv_tile_rows()
    assert len(re.findall(rf"%vacc\d+ = alloca <{lanes} x float>", ir)) == rows
    assert len(re.findall(rf"call <{lanes} x float> @llvm.masked.load.v{lanes}f32", ir)) == 1
    assert "masked.gather" not in optimized_ir(ir, target)


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize("kernel,padding", [(3, 1), (1, 0)], ids=["3x3_padded", "1x1_unpadded"])
def test_a_strided_convolution_reads_every_other_element_as_one_masked_load(target: Target, kernel: int,
                                                                           padding: int) -> None:
    """Stride 2: the input is read every other element along the output columns. The tile is the stride-1 one (a
    vector of output columns by `conv_tile_rows` output channels, vector accumulators), and its read a step is one
    masked load of two vectors' worth of elements, only the read ones enabled, of which a shuffle keeps every other
    (padded or not: the unpadded read's mask is a constant). No tile, each lane was a scalar read (25x slower)."""
    x, w = tg.asarray(rand(2, 8, 16, 64)), tg.asarray(rand(16, 8, kernel, kernel))
    ast = only_kernel(tg.nn.conv2d(x, w, stride=2, padding=padding))
    sink = index_level(ast)
    lanes, rows = target.lanes(), target.conv_tile_rows()
    assert hand_coded_opts(sink, target)[:2] == [Opt("UPCAST", axis_of(sink, 32), lanes),
                                                 Opt("UPCAST", axis_of(sink, 16, True), rows)]
    ir = kernel_source(ast, target).ir
    assert len(re.findall(rf"%vacc\d+ = alloca <{lanes} x float>", ir)) == rows
    assert len(re.findall(rf"call <{2 * lanes} x float> @llvm.masked.load.v{2 * lanes}f32", ir)) == 1
    every_other = ", ".join(f"i32 {2 * i}" for i in range(lanes))
    assert f"<{lanes} x i32> <{every_other}>" in ir
    assert "masked.gather" not in optimized_ir(ir, target)


def test_the_input_gradient_of_a_strided_convolution_multiplies_no_zeros() -> None:
    """With stride 2 the input's gradient is one stride-1 convolution per phase of the input (even and odd rows and
    columns: 4), each with the kernel taps that reach it and a register tile, and an elementwise kernel interleaving
    them: as many products as the forward's. (The convolution of the stride-dilated gradient multiplied zeros in 3
    of 4 products, through a parity mask no tile took.)"""
    x, w = tg.asarray(rand(2, 8, 16, 32)).realize(), tg.asarray(rand(16, 8, 3, 3)).realize()
    out = tg.nn.conv2d(x, w, stride=2, padding=1)
    _, vjp = tg.vjp(lambda x: tg.nn.conv2d(x, w, stride=2, padding=1), x)
    (gx,) = vjp(tg.asarray(rand(*out.shape)).realize())
    forward = kernel_source(only_kernel(out), AVX512).flops
    sources = [kernel_source(a, AVX512) for a in kernel_asts(gx)]
    phases = [src for src in sources if src.name.startswith("r_")]
    assert len(phases) == 4 and len(sources) == 5
    assert all(any(o.op == "UPCAST" for o in src.opts) for src in phases)
    assert sum(src.flops for src in phases) <= 1.05 * forward


# ---- one kernel, no im2col ----
def test_the_convolution_is_one_kernel_of_three_buffers() -> None:
    """One kernel reading x and w and writing the output: no im2col matrix and no padded copy of x (NCHW: its padded
    read is the tile's vector, one masked load)."""
    x, w = rand(2, 8, 16, 16), rand(16, 8, 3, 3)
    xt, wt = tg.asarray(x).realize(), tg.asarray(w).realize()
    out = lax.conv_general_dilated(xt, wt, (1, 1), "SAME")
    sink = index_level(only_kernel(out))
    sizes = sorted(u.arg[1] for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL)
    assert sizes == sorted([x.size, w.size, 2 * 16 * 16 * 16])
    tg.counters.reset()
    out.realize()
    assert tg.counters.kernel_count == 1


def _masked_loads(sink: UOp) -> int:
    return sum(u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[1].op is Ops.WHERE
               for u in sink.toposort())


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_an_nhwc_convolution_reads_its_input_stored_padded(target: Target) -> None:
    """NHWC: the tile is output channels by output columns and each row reads one input element a step, broadcast;
    through the padding's mask that was a masked scalar load and a register broadcast per row (pixelcnn's 3 x 3
    convolutions 904 -> 650 us stored padded, AVX-512). The padded input is stored channels last by a kernel of its
    own (x's size padded), and the convolution reads it with no mask, keeping its tile."""
    x, w = rand(2, 16, 16, 8), rand(3, 3, 8, 32)
    xt, wt = tg.Tensor(x, device="CPU").realize(), tg.Tensor(w, device="CPU").realize()
    out = lax.conv_general_dilated(xt, wt, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    pad, conv = (index_level(a) for a in kernel_asts(out))
    assert [u.arg[1] for u in pad.toposort() if u.op is Ops.DEFINE_GLOBAL][0] == 2 * 18 * 18 * 8
    assert _masked_loads(conv) == 0
    sizes = sorted(u.arg[1] for u in conv.toposort() if u.op is Ops.DEFINE_GLOBAL)
    assert sizes == sorted([2 * 18 * 18 * 8, w.size, 2 * 16 * 16 * 32])
    opts = hand_coded_opts(conv, target)
    assert Opt("UPCAST", axis_of(conv, 32), 2 * target.lanes()) in opts and \
        Opt("UPCAST", axis_of(conv, 16), target.tile_rows()) in opts, opts
    tg.counters.reset()
    out.realize()
    assert tg.counters.kernel_count == 2


def test_an_nhwc_input_gradient_reads_the_output_gradient_stored_padded() -> None:
    """The same for a stride-1 NHWC input gradient (a correlation of the padded g with the flipped kernel); the
    kernel's gradient keeps reading x through the mask (`conv_nd`: its taps along a row)."""
    x = tg.Tensor(rand(2, 16, 16, 8), device="CPU").realize()
    w = tg.Tensor(rand(3, 3, 8, 32, seed=1), device="CPU").realize()
    g = tg.Tensor(rand(2, 16, 16, 32, seed=2), device="CPU").realize()
    nhwc = ("NHWC", "HWIO", "NHWC")
    _, vjp = tg.vjp(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=nhwc), x, w)
    dx, dw = vjp(g)
    (dx_ast,) = [a for a in map(index_level, kernel_asts(dx)) if any(u.op is Ops.REDUCE for u in a.toposort())]
    assert _masked_loads(dx_ast) == 0
    assert all(_masked_loads(index_level(a)) for a in kernel_asts(dw) if
               any(u.op is Ops.REDUCE for u in index_level(a).toposort()))


def test_an_nhwc_convolution_is_stored_channels_last_for_its_per_channel_sums() -> None:
    """An NHWC convolution's output is stored (N, H, W, O), as its caller reads it: a batch norm's per-channel
    statistics of it are then sums of vectors of channels (an UPCAST of the channel axis). Stored channels first and
    read through the NHWC view, each channel's elements were 1024 floats apart: no vector, a core per two channels
    (a ResNet step's batch norms, 0.8 GB/s: 39 of 328 ms)."""
    x, w = tg.asarray(rand(4, 16, 16, 8)).realize(), tg.asarray(rand(3, 3, 8, 16, seed=1)).realize()
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    m = y.mean(axis=(0, 1, 2))
    _, conv_ast, *sums = kernel_asts(((y - m) ** 2).mean(axis=(0, 1, 2)))   # (the padded x; a batch norm's mean
    # and variance of y)
    conv = index_level(conv_ast)
    assert any(o.op == "UPCAST" for o in hand_coded_opts(conv, AVX512))
    for ast in sums:
        sink = index_level(ast)
        assert Opt("UPCAST", axis_of(sink, 16), 16) in hand_coded_opts(sink, AVX512), ast
    np.testing.assert_allclose(y.numpy(), np_conv(x.numpy().transpose(0, 3, 1, 2), w.numpy().transpose(3, 2, 0, 1),
                                                  (1, 1), [(1, 1), (1, 1)]).transpose(0, 2, 3, 1), rtol=1e-4,
                               atol=1e-4)


def test_an_nhwc_input_gradient_is_stored_channels_last_for_its_per_channel_sums() -> None:
    """The same for the input gradient of a stride-1 NHWC convolution (one correlation of g with the flipped
    kernel): stored (N, H, W, C), so the previous batch norm's backward sums of it are vectors of channels."""
    x, w = tg.asarray(rand(4, 16, 16, 16)).realize(), tg.asarray(rand(3, 3, 16, 32, seed=1)).realize()
    g = tg.asarray(rand(4, 16, 16, 32, seed=2)).realize()
    nhwc = ("NHWC", "HWIO", "NHWC")
    _, vjp = tg.vjp(lambda x: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=nhwc), x)
    (dx,) = vjp(g)
    m = dx.mean(axis=(0, 1, 2))
    *_, sum_ast = kernel_asts(((dx - m) ** 2).mean(axis=(0, 1, 2)))
    sink = index_level(sum_ast)
    assert Opt("UPCAST", axis_of(sink, 16), 16) in hand_coded_opts(sink, AVX512), sum_ast


@pytest.mark.parametrize(("channels", "target", "rows"), [(16, AVX2, 2), (16, AVX512, 4), (32, AVX512, 4)],
                         ids=["16-avx2", "16-avx512", "32-avx512"])
def test_a_kernel_gradient_takes_the_taps_along_a_row_as_rows(channels: int, target: Target, rows: int) -> None:
    """The kernel gradient of a 3 x 3 NHWC convolution: the taps along a row are rows of the tile too, each pass of
    the reduce over the batch's pixels serving three taps (it re-read the gradient per tap). 16 -> 16 channels with
    AVX-512 are one vector, a quarter of the registers' accumulators, and the tile is 16 x 4 x 3 (14.7 -> 3.6 ms).
    Two vectors are the full tile, whose rows are halved for the taps where the registers hold the accumulators:
    16 -> 16 with AVX2, 16 x 2 x 3, 12 accumulators of 16 registers beside the operands (AVX2 code on an AVX-512
    host, 64 x 32 x 32 images: 16.4 -> 5.5 ms at best, alternated); 32 -> 32 with AVX-512, 32 x 4 x 3 (was 32 x 8),
    each vector of the output gradient serving 12 accumulators and a third fewer passes over it (the resnet
    program's kernel gradient, 64 x 16 x 16 images: 2.35 -> 1.74 ms at best, alternated)."""
    x = tg.asarray(rand(2, 8, 8, channels)).realize()
    w = tg.asarray(rand(3, 3, channels, channels, seed=1)).realize()
    g = tg.asarray(rand(2, 8, 8, channels, seed=2)).realize()
    nhwc = ("NHWC", "HWIO", "NHWC")
    _, vjp = tg.vjp(lambda w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=nhwc), w)
    (ast,) = kernel_asts(vjp(g)[0])
    sink = index_level(ast)
    opts = hand_coded_opts(sink, target)
    assert [o for o in opts if o.op == "UPCAST"] == [Opt("UPCAST", axis_of(sink, channels), channels),
                                                     Opt("UPCAST", axis_of(sink, channels, first=True), rows),
                                                     Opt("UPCAST", axis_of(sink, 3), 3)], opts
    np.testing.assert_allclose(vjp(g)[0].numpy(), np.asarray(jax_free_kernel_grad(x.numpy(), g.numpy())), rtol=1e-4,
                               atol=1e-4)


def jax_free_kernel_grad(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """dw[kh, kw, i, o] = sum over n, h, w of padded x[n, h + kh, w + kw, i] * g[n, h, w, o], in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    hh, ww = g.shape[1:3]
    return np.stack([np.stack([np.einsum("nhwi,nhwo->io", xp[:, a:a + hh, b:b + ww], g) for b in range(3)])
                     for a in range(3)])


# ---- values and gradients ----
CASES: dict[str, tuple[tuple, tuple, dict]] = {   # lhs shape, rhs shape, conv_general_dilated's keywords
    "nchw_same": ((2, 3, 6, 16), (8, 3, 3, 3), dict(window_strides=(1, 1), padding="SAME")),
    "nchw_asymmetric_pad": ((1, 2, 5, 16), (8, 2, 3, 3), dict(window_strides=(1, 1), padding=((2, 0), (1, 2)))),
    "nchw_dilated": ((1, 2, 7, 16), (8, 2, 3, 3), dict(window_strides=(1, 1), padding="SAME", rhs_dilation=(2, 2))),
    "nchw_stride2": ((1, 2, 7, 32), (8, 2, 3, 3), dict(window_strides=(2, 2), padding="SAME")),
    "nchw_stride3_1x1": ((2, 3, 7, 48), (8, 3, 1, 1), dict(window_strides=(3, 3), padding="VALID")),
    "nchw_stride2_4x4": ((1, 2, 9, 32), (8, 2, 4, 4), dict(window_strides=(2, 2), padding=((1, 2), (2, 1)))),
    "nchw_groups": ((1, 4, 4, 16), (16, 2, 3, 3), dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    "nhwc": ((2, 5, 8, 4), (3, 3, 4, 16), dict(window_strides=(1, 1), padding="SAME",
                                               dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "nhwc_stride_dilation": ((1, 9, 9, 4), (3, 3, 4, 8), dict(window_strides=(2, 1), padding="SAME",
                                                               rhs_dilation=(1, 2),
                                                               dimension_numbers=("NHWC", "HWIO", "NHWC"))),
}


def _np_kw(kw: dict) -> dict:
    out = {k: v for k, v in kw.items() if k in ("window_strides", "padding", "rhs_dilation", "dimension_numbers")}
    out["strides"] = out.pop("window_strides")
    out["fgc"] = kw.get("feature_group_count", 1)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_direct_convolution_matches_numpy(name: str) -> None:
    xs, ws, kw = CASES[name]
    x, w = rand(*xs, seed=1), rand(*ws, seed=2)
    out = lax.conv_general_dilated(tg.asarray(x), tg.asarray(w), **kw)
    np.testing.assert_allclose(out.numpy(), np_conv(x, w, **_np_kw(kw)), rtol=3e-5, atol=3e-5)


def _conv_fn(kw: dict) -> Callable[[tg.Tensor, tg.Tensor], tg.Tensor]:
    return lambda x, w: lax.conv_general_dilated(x, w, **kw)


@pytest.mark.x64
@pytest.mark.parametrize("name", ["nchw_same", "nchw_stride2", "nchw_stride3_1x1", "nchw_stride2_4x4", "nchw_groups",
                                  "nhwc_stride_dilation"])
def test_direct_convolution_gradients(name: str) -> None:
    """The input's and the kernel's gradients (the kernel's read channels last) by central differences, float64."""
    xs, ws, kw = CASES[name]
    check_grads(_conv_fn(kw), rand(*xs, seed=3).astype(np.float64), rand(*ws, seed=4).astype(np.float64))


def test_kernel_gradient_values_in_float32() -> None:
    """The gradients of a padded NCHW convolution (the input's a direct convolution with the flipped kernel, the
    kernel's a contraction of channels-last copies stored (KH, KW, C, O)) against numpy's."""
    x, w, g = rand(2, 8, 6, 16, seed=5), rand(16, 8, 3, 3, seed=6), rand(2, 16, 6, 16, seed=7)
    gx, gw = tg.grad(lambda x, w: (tg.nn.conv2d(x, w, padding=1) * tg.asarray(g)).sum(), argnums=(0, 1))(
        tg.asarray(x), tg.asarray(w))
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref_w = np.zeros(w.shape)
    ref_x = np.zeros(xp.shape)
    for i in range(3):
        for j in range(3):
            ref_w[:, :, i, j] = np.einsum("nohw,nchw->oc", g, xp[:, :, i:i + 6, j:j + 16])
            ref_x[:, :, i:i + 6, j:j + 16] += np.einsum("nohw,oc->nchw", g, w[:, :, i, j])
    np.testing.assert_allclose(gw.numpy(), ref_w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gx.numpy(), ref_x[:, :, 1:-1, 1:-1], rtol=1e-4, atol=1e-4)


# ---- a ResNet-style block: the backward keeps every convolution's tile ----
def test_a_disjoint_pooling_gradient_is_elementwise() -> None:
    """2 x 2 max pooling with stride 2: the windows do not overlap, so the window view is a reshape and its gradient
    one elementwise kernel over x (beside the window max and its tie count, 2 x 2 reduces). The tiled view's gradient
    was a 5 x 5 windowed sum of masked reads."""
    x = tg.asarray(rand(2, 4, 8, 8)).realize()
    gx = tg.grad(lambda x: (tg.nn.max_pool2d(x, 2) ** 2).sum())(x)
    sinks = [index_level(a) for a in kernel_asts(gx)]
    reduces = [[r.src[0].arg for r in ranges(s).values() if r.arg[1] == "reduce"] for s in sinks]
    assert all(r in ([], [2, 2]) for r in reduces) and reduces[-1] == []
    ref = x.numpy().reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5))
    big = ref.repeat(2, axis=2).repeat(2, axis=3)
    np.testing.assert_allclose(gx.numpy(), np.where(x.numpy() == big, 2 * big, 0), rtol=1e-6)


def test_a_resnet_block_backward_keeps_every_convolution_tile() -> None:
    """conv -> batch norm -> relu -> max pool -> stride-2 conv -> batch norm -> relu, and its gradient: the batch
    norm's and the max pool's backward are stored before the convolution gradients that read them through the
    padding (fused, they ran once per tap and output channel, without the convolution's tile: 600 of 625 ms of a
    small ResNet step), so every convolution kernel, forward or backward, has its register tile."""
    def bn(h: tg.Tensor) -> tg.Tensor:
        m = h.mean(axis=(0, 2, 3), keepdims=True)
        v = ((h - m) ** 2).mean(axis=(0, 2, 3), keepdims=True)
        return (h - m) / tg.numpy.sqrt(v + 1e-5)

    def loss(w1: tg.Tensor, w2: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
        h = tg.nn.max_pool2d(tg.nn.relu(bn(tg.nn.conv2d(x, w1, padding=1))), 2)
        return (tg.nn.relu(bn(tg.nn.conv2d(h, w2, stride=2, padding=1))) ** 2).mean()

    w1, w2, x = (tg.asarray(rand(*s, seed=i)).realize() for i, s in enumerate([(16, 8, 3, 3), (32, 16, 3, 3),
                                                                               (4, 8, 32, 32)]))
    grads = tg.grad(loss, argnums=(0, 1, 2))(w1, w2, x)
    convs = 0
    for ast in kernel_asts(*grads):   # a convolution's kernel reads or writes a kernel-sized buffer, and sums
        sink = index_level(ast)
        sizes = {u.arg[1] for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL}
        if sizes & {w1.size, w2.size} and any(r.arg[1] == "reduce" for r in ranges(sink).values()):
            convs += 1
            assert any(o.op == "UPCAST" for o in hand_coded_opts(sink, AVX512)), ast
    # the two forwards, the first's input gradient, the second's four phases, the two kernel gradients
    assert convs == 9


@pytest.mark.parametrize("dn", [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC")], ids=["nchw", "nhwc"])
def test_a_transposed_convolution_multiplies_no_zeros(dn: tuple[str, str, str]) -> None:
    """A stride-2 transposed convolution (lhs dilation 2) is the input gradient of a strided convolution: one
    stride-1 convolution per output phase with the taps that reach it, and one kernel interleaving them, which for
    NHWC writes the result in place (no transposed copy after). Correlating the dilated input multiplied zeros in 3
    of 4 products (121 ms for 32 x 32 x 32 x 16 to 8 channels; jax 3.5). Its gradients are a strided convolution
    and that convolution's kernel gradient."""
    last = dn[0] == "NHWC"
    x = rand(2, 8, 8, 6) if last else rand(2, 6, 8, 8)
    w = rand(4, 4, 6, 5) if last else rand(5, 6, 4, 4)
    conv_t = lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=dn)   # noqa: E731
    xt, wt = tg.asarray(x).realize(), tg.asarray(w).realize()
    out = conv_t(xt, wt)
    sources = [kernel_source(a, AVX512) for a in kernel_asts(out)]
    phases = [src for src in sources if src.name.startswith("r_")]
    assert len(phases) == 4 and len(sources) == 5 + last   # (NHWC: and the kernel copied with its channels innermost)
    # as many products as the strided convolution it is the transpose of (up to the vector lanes its 5 output
    # channels are padded to; the dilated input's correlation was 4 times as many)
    adjoint = lax.conv_general_dilated(tg.asarray(rand(2, 5, 16, 16)).realize(), tg.asarray(rand(6, 5, 4, 4)).realize(),
                                       (2, 2), [(1, 1), (1, 1)])
    assert sum(src.flops for src in phases) <= 1.25 * kernel_source(only_kernel(adjoint), AVX512).flops
    ref = np_conv(x, w, (1, 1), [(2, 2), (2, 2)], lhs_dilation=(2, 2), dimension_numbers=dn)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.x64
@pytest.mark.parametrize("dn", [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC")], ids=["nchw", "nhwc"])
def test_the_gradients_of_a_transposed_convolution_by_differences(dn: tuple[str, str, str]) -> None:
    x, w = (rand(1, 5, 5, 3), rand(3, 3, 3, 2)) if dn[0] == "NHWC" else (rand(1, 3, 5, 5), rand(2, 3, 3, 3))
    x, w = x.astype(np.float64), w.astype(np.float64)
    check_grads(lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=dn), x, w)
    check_grads(lambda x, w: lax.conv_transpose(x, w, (2, 3), [(1, 2), (0, 1)], dimension_numbers=dn), x, w)
