"""Matmuls on the CPU: register tiles rendered as vectors (tgfx/lowering/packs.py), operands with page-long rows read
through packed panels (schedule's `_packed_operand`), and their values on shapes that fit no block."""
from __future__ import annotations

import math
import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import config, lowering
from tgfx.counters import counters
from tgfx.devices.target import Target, host_target, native_target, target_for
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import index_level, kernel_source, llvm_worker, render_kernel
from tgfx.lowering import schedule as schedule_module
from tgfx.lowering.compile import target_machine
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.inline import inline
from tgfx.lowering.kernel_opts import Opt, upcast
from tgfx.lowering.llvm_worker import NO_LSR
from tgfx.lowering.optimize import apply_hand_coded
from tgfx.lowering.schedule import schedule


def kernels(expr: tg.Tensor, cores: int | None = None) -> list[UOp]:
    """The kernels of `expr`, scheduled for this CPU with `cores` cores if given (one: a sum with few outputs stays
    one kernel, not partial sums over the cores, tgfx/lowering/split_reduce.py)."""
    sink = inline(UOp(Ops.SINK, None, (expr.uop,)))
    with pytest.MonkeyPatch.context() as mp:
        if cores is not None:
            mp.setattr(schedule_module, "host_target", lambda: host_target().with_cores(cores))
        linear, _ = schedule(list(sink.src))
    return [c.src[0] for c in linear.src]


def rendered(ast: UOp, target) -> str:  # noqa: ANN001
    sink, opts = apply_hand_coded(index_level(ast), target)
    return render_kernel("k", sink, opts, target)[0]


def on_cpu(x: np.ndarray) -> tg.Tensor:
    """`x` on the CPU, whatever the default device (`-p tests.emulated_cuda` makes it CUDA:0): these are its kernels."""
    return tg.asarray(x, device="CPU")


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_a_register_tile_is_vector_accumulators(cpu: str) -> None:
    """The tile's columns are a vector range: each of its rows is one `<cols x float>` accumulator (two registers
    of lanes), one vector update each per step of the reduce loop, with a bias and tanh epilogue as without: 16 x 6
    floats are 6 accumulators of 16 with AVX2 (its 64 rows padded to 66), 32 x 8 are 8 of 32 with AVX-512 (SLP used
    to rebuild them from scalars, and around an epilogue built shuffles and spills instead)."""
    x, w, b = (on_cpu(rand(*s)) for s in ((64, 48), (48, 64), (64,)))
    for epilogue, expr in enumerate((x @ w, tnp.tanh(x @ w + b))):
        (ast,) = kernels(expr)
        t = target_for(cpu)
        ir = rendered(ast, t)
        cols, rows = t.contraction_tiles()[0][0], t.padded_tile_rows()
        assert len(re.findall(rf"%acc\d+ = alloca <{cols} x float>", ir)) == rows
        assert "alloca float" not in ir   # no scalar accumulator left
        # each set to the identity before the loop, and updated once a step in it
        assert len(re.findall(rf"store <{cols} x float> [^,]+, ptr %acc", ir)) == 2 * rows
        assert len(re.findall(rf"load <{cols} x float>, ptr %t", ir)) == 1 + epilogue   # w's row, b
        assert "gather" not in ir and not re.search(r"insertelement <\d+ x float> %t\d+, float %t\d+, i64 [1-9]", ir)


def test_a_long_contraction_rounds_as_blas_does() -> None:
    """`x.T @ g` and `a @ x` of 4,096 steps (512 x 512 outputs, register tiles: not split over the cores) sum each
    block of their reduce loop in a register of its own (`block_sum.py`), as BLAS sums its panels: 5.5e-7 of the
    largest output off float64's, numpy's 4.7e-7; summed in one register over all the steps, 3.4e-6."""
    x, g = rand(4096, 512) + 1, rand(4096, 512, seed=1) + 1
    for got, want in ((on_cpu(x).T @ on_cpu(g), x.T.astype(np.float64) @ g),
                      (on_cpu(np.ascontiguousarray(g.T)) @ on_cpu(x), g.T.astype(np.float64) @ x)):
        assert np.abs(got.numpy() - want).max() / np.abs(want).max() < 1.5e-6


def test_an_epilogue_transcendental_is_decomposed_after_the_options_once_per_row() -> None:
    """The tile's rows each copy one TANH of the vector range's lanes through the options' rewrites, not its
    polynomial (a 32 x 8 tile of an RNN cell spent 120 ms copying and simplifying those, lane by lane); the renderer
    decomposes them, so no library call is left."""
    x, w, b = (on_cpu(rand(*s)) for s in ((64, 48), (48, 64), (64,)))
    (ast,) = kernels(tnp.tanh(x @ w + b))
    t = native_target()
    sink, opts = apply_hand_coded(index_level(ast), t)
    cols, rows = t.contraction_tiles()[0]
    assert sum(u.op is Ops.TANH for u in sink.toposort()) == rows
    ir = render_kernel("k", sink, opts, t)[0]
    assert "tanh" not in ir and "call float @" not in ir and not re.search(r"call <[^@]*@(?!llvm\.)", ir)


def test_a_vector_range_reads_padded_transposed_and_strided_lanes() -> None:
    """The vector range's other accesses (`kernel_opts.vector_lanes`): a classifier's 10 columns padded to a vector are
    one masked load of w and one masked store a row (no lane past the tenth touches memory), a weight gradient's 10
    columns stored 10 apart by a scatter of each accumulator, and a transpose's strided columns read as the
    rows of a square transposed in registers (no element loaded alone)."""
    t = host_target()
    x, w, g = rand(64, 128), rand(128, 10), rand(64, 10)
    (ast,) = kernels(on_cpu(x) @ on_cpu(w))
    sink, opts = apply_hand_coded(index_level(ast), t)
    ir = render_kernel("k", sink, opts, t)[0]
    rows = next(o.amount for o in opts if o.op == "UPCAST" and o.axis == 0)
    assert len(re.findall(r"call <\d+ x float> @llvm.masked.load", ir)) == 1   # w's row, shared by the tile's rows
    assert len(re.findall(r"call void @llvm.masked.store", ir)) == rows and "store float" not in ir
    (ast,) = kernels(tnp.sum(on_cpu(x)[:, :, None] * on_cpu(g)[:, None, :], axis=0))   # x.T @ g
    sink, opts = apply_hand_coded(index_level(ast), t)
    assert any(u.op is Ops.RANGE and u.arg[1] == "vector" for u in sink.toposort())
    ir = render_kernel("k", sink, opts, t)[0]
    copies = math.prod(o.amount for o in opts if o.op == "UPCAST") // opts[0].amount
    assert len(re.findall(r"call void @llvm.masked.scatter", ir)) == copies and "store float" not in ir
    (ast,) = kernels(on_cpu(rand(256, 256)).T * 2)
    ir = rendered(ast, t)
    lanes = t.lanes()
    assert "load float" not in ir and len(re.findall(rf"load <{lanes} x float>", ir)) == lanes
    assert len(re.findall(rf"store <{lanes} x float>", ir)) == lanes
    np.testing.assert_allclose((on_cpu(x) @ on_cpu(w)).numpy(), x @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tnp.sum(on_cpu(x)[:, :, None] * on_cpu(g)[:, None, :], axis=0).numpy(),
                               x.T @ g, rtol=1e-4, atol=1e-4)


def test_a_register_transpose_fences_its_rounds_from_x86_shuffle_search() -> None:
    """A square of w row vectors transposed in registers (log2 w rounds of w shuffles) passes each round but the last
    through `llvm.arithmetic.fence`, which LLVM's optimiser keeps and which emits no instruction: x86 instruction
    selection searched every chain of up to 8 shuffles for a cheaper one (fno's 8 x 8 tiles: 38 of a kernel's 50 ms
    of code generation). w (log2 w - 1) fences, each between two rounds of shuffles, and the same values."""
    t = host_target()
    x = rand(256, 256)
    (ast,) = kernels(on_cpu(x).T * 2)
    ir = rendered(ast, t)
    w = t.lanes()
    fences = re.findall(rf"(%\S+) = call <{w} x float> @llvm.arithmetic.fence.v{w}f32\(<{w} x float> (%\S+)\)", ir)
    assert len(fences) == w * (w.bit_length() - 2)
    pairs = re.findall(rf"(%\S+) = shufflevector <{w} x float> %\S+, <{w} x float> %", ir)   # two rows interleaved
    assert len(pairs) == w * (w.bit_length() - 1)
    shuffled = set(pairs)
    assert all(src in shuffled for _, src in fences)   # each fences one shuffle's result
    assert "arithmetic.fence" in lowering.compile.optimized_ir(ir, t)   # and the optimiser keeps it for ISel
    np.testing.assert_array_equal((on_cpu(x).T * 2).numpy(), x.T * 2)
    sse = target_for("x86-64")   # 4 lanes, two rounds: one fenced
    assert len(re.findall(r"= call <4 x float> @llvm.arithmetic.fence", rendered(ast, sse))) == 4


def test_a_sum_along_a_short_contiguous_axis_is_a_vector_of_partial_sums() -> None:
    """A convolution's bias gradient, an NCHW value summed over N, H and W: W (8) was the only axis read side by side,
    too short for LLVM's loop vectoriser, and the sum stayed a scalar chain of adds (224 -> 12 us in the CNN step).
    H and W are one reduce loop of 64 (`merge_reduce_ranges`), UNROLLed by a vector's lanes: independent partial
    sums in vector accumulators (their lanes added after the loop); a costly element (exp) is not unrolled."""
    t = host_target()
    g = rand(32, 16, 8, 8)
    (ast,) = kernels(tnp.sum(on_cpu(g), axis=(0, 2, 3)), cores=1)
    sink, opts = apply_hand_coded(index_level(ast), t)
    assert Opt("UNROLL", 2, t.lanes()) in opts
    ir = render_kernel("k", sink, opts, t)[0]
    accs = re.findall(r"%acc\d+ = alloca (.*)", ir)
    assert accs and set(accs) == {f"<{t.lanes()} x float>"}   # the partial sums, vectors
    np.testing.assert_allclose(tnp.sum(on_cpu(g), axis=(0, 2, 3)).numpy(), g.sum((0, 2, 3)), rtol=1e-4)
    (ast,) = kernels(tnp.sum(tnp.exp(on_cpu(g)), axis=(0, 2, 3)))
    assert not any(o.op == "UNROLL" for o in apply_hand_coded(index_level(ast), t)[1])


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_a_sum_along_a_long_contiguous_axis_is_vectors_of_partial_sums(cpu: str) -> None:
    """A batch norm's statistics of NCHW rows (32 channels of 32 x 32 x 32, rows of 32): no output axis is read side
    by side, and LLVM's loop vectoriser made 15x the loop's code of the row loop, 4-5x slower than this. The row
    axis UNROLLed by a vector's lanes is a vector range, its outer part UNROLLed again into independent vector
    accumulators (SUM_CHAINS at most), also for a costly element (a division). On more than one core the first kernel
    is the parts' partial sums (tgfx/lowering/split_reduce.py), their rows the same."""
    t = target_for(cpu)
    lanes = t.lanes()
    x, s = rand(32, 32, 32, 32), rand(32, seed=1) + 1
    ast = kernels(tnp.sum(on_cpu(x) / on_cpu(s)[:, None, None], axis=(0, 2, 3)))[0]
    sink, opts = apply_hand_coded(index_level(ast), t)
    unrolls = [o.amount for o in opts if o.op == "UNROLL"]
    assert unrolls == [lanes, min(32 * 32 // lanes, 4)]   # (rows and columns one reduce loop: merge_reduce_ranges)
    ir = render_kernel("k", sink, opts, t)[0]
    assert re.findall(r"%acc\d+ = alloca (.*)", ir) == [f"<{lanes} x float>"] * unrolls[1]
    np.testing.assert_allclose(tnp.sum(on_cpu(x) / on_cpu(s)[:, None, None], axis=(0, 2, 3)).numpy(),
                               (x / s[:, None, None]).sum((0, 2, 3)), rtol=1e-4)


def test_a_small_kernel_of_vectors_is_left_to_run_as_written() -> None:
    """A 128 x 256 column sum whose 256 columns are a vector range: 16 vector loads and adds a row, 6,000 vector
    instructions, which count once each towards SMALL_KERNEL_OPS (counted per lane, 65,000, LLVM's unroller was let
    loose on its reduce loop: 31 ms of LLVM for a kernel of 2 us). Its loops are marked for LLVM to leave alone."""
    x = rand(128, 256)
    (ast,) = kernels(tnp.sum(on_cpu(x), axis=0))
    sink, opts = apply_hand_coded(index_level(ast), host_target())
    assert any(u.op is Ops.RANGE and u.arg[1] == "vector" for u in sink.toposort())
    assert "llvm.loop.unroll.disable" in render_kernel("k", sink, opts, host_target())[0]
    np.testing.assert_allclose(tnp.sum(on_cpu(x), axis=0).numpy(), x.sum(0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_a_column_sum_of_two_layouts_is_vectors_of_one_gathered_from_the_other(cpu: str) -> None:
    """A bias gradient of two branches' gradients added, one as an FFT's last stage lays it out (its 32 channels 8
    floats apart): no output axis every load reads contiguously, and each of the 32 channels was a scalar loop over all
    32,768 rows of both, every line fetched once per channel (2.4 ms). The channels are vectors, the other load's lanes
    gathered (0.4 ms); a plain transposed sum beside another reduce keeps its options (see hand_coded_opts)."""
    g, h = rand(4096, 32), rand(512, 32, 8, seed=1)
    e = tnp.sum(on_cpu(g) + on_cpu(h).transpose(0, 2, 1).reshape(4096, 32), axis=0)
    (ast,) = kernels(e, cores=1)
    t = target_for(cpu)
    sink, opts = apply_hand_coded(index_level(ast), t)
    out = next(u for u in index_level(ast).toposort() if u.op is Ops.RANGE and u.src[0].arg == 32)
    assert Opt("UPCAST", out.arg[0], t.lanes()) in opts, opts
    np.testing.assert_allclose(e.numpy(), (g + h.transpose(0, 2, 1).reshape(4096, 32)).sum(0), rtol=1e-4, atol=1e-4)


def test_packed_accumulators_compute_what_numpy_does() -> None:
    """Tiles as vectors on odd shapes: remainders of no tile, K = 1, one column, padded columns, a column sum, an
    unrolled dot product, a fused epilogue."""
    for m, k, n in ((7, 1, 33), (37, 19, 1), (5, 70, 10), (64, 9, 96), (3, 300, 17)):
        a, b = rand(m, k, seed=1), rand(k, n, seed=2)
        np.testing.assert_allclose((on_cpu(a) @ on_cpu(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
    x = rand(96, 40)
    np.testing.assert_allclose(tnp.sum(on_cpu(x), axis=0).numpy(), x.sum(0), rtol=1e-5, atol=1e-5)
    v = rand(4096)
    np.testing.assert_allclose(float(on_cpu(v) @ on_cpu(v)), v @ v, rtol=1e-4)
    w, bias = rand(40, 64), rand(64)
    np.testing.assert_allclose(tnp.tanh(on_cpu(x) @ on_cpu(w) + on_cpu(bias)).numpy(),
                               np.tanh(x @ w + bias), rtol=1e-5, atol=1e-5)


@pytest.fixture
def l2_of(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """Sets this machine's L2 size (bytes) for what is scheduled in the test: the packing rules read it."""
    from dataclasses import replace

    from tgfx.devices import target
    native = native_target()

    def use(nbytes: int) -> None:
        monkeypatch.setattr(target, "native_target", lambda: replace(native, l2=nbytes))
    with config.Context(TGFX_CPU=""):
        yield use


def test_an_operand_with_page_long_rows_is_read_through_packed_panels(l2_of) -> None:  # noqa: ANN001
    """`x @ w` where the tile's panel of w spans more pages than a TLB holds (64; 128 rows of 4 KB, 256 of 2 KB): one
    copy of w into panels of the tile's width, then the matmul (2 kernels); a panel over 64 pages or fewer, too
    little reuse, or the operand the tile broadcasts rather than reads as vectors (x in `x.T @ g`) while it fits half
    of L2 is read as it is (1 kernel: at 64 pages packing gained nothing in the MLP step and cost three kernels'
    compiles)."""
    l2_of(2 << 20)
    w = on_cpu(rand(128, 1024))
    is_reduce = [lambda ks: [any(u.op is Ops.REDUCE_AXIS for u in k.toposort()) for k in ks]][0]
    assert is_reduce(kernels(on_cpu(rand(64, 128)) @ w)) == [False, True]
    assert is_reduce(kernels(on_cpu(rand(64, 256)) @ on_cpu(rand(256, 512)))) == [False, True]  # 2 KB rows
    assert is_reduce(kernels(on_cpu(rand(64, 128)) @ on_cpu(rand(128, 512)))) == [True]   # 64 pages
    assert is_reduce(kernels(on_cpu(rand(64, 64)) @ on_cpu(rand(64, 512)))) == [True]     # 32 pages
    assert is_reduce(kernels(on_cpu(rand(64, 32)) @ on_cpu(rand(32, 1024)))) == [True]    # 32 pages
    assert is_reduce(kernels(on_cpu(rand(4, 128)) @ w)) == [True]                             # 4 rows of x
    x, g = on_cpu(rand(128, 1024)), on_cpu(rand(128, 16))   # a weight gradient as grad writes it
    assert is_reduce(kernels(tnp.sum(x[:, :, None] * g[:, None, :], axis=0))) == [True]   # x broadcast
    # the matmul reading the panels is still a vector tile: one contiguous vector load of a panel's row, no gather
    t = host_target()
    ir = rendered(kernels(on_cpu(rand(64, 128)) @ w)[1], t)
    cols = t.contraction_tiles()[0][0]
    assert len(re.findall(rf"load <{cols} x float>, ptr %t", ir)) == 1
    assert f"%acc0 = alloca <{cols} x float>" in ir and "gather" not in ir


def test_an_operand_one_panel_wide_is_not_packed(l2_of) -> None:  # noqa: ANN001
    """`x.T @ y` with y exactly as wide as the tile's vectors (its rows outrun the TLB): one panel of y is y as it
    lies, so it is read as it is, and the schedule ends (its copy, read as a stored operand again, was packed again
    without end: (65536, 32) failed to schedule). The product is numpy's."""
    l2_of(64 << 20)   # (x, broadcast, then fits half of L2: no pack of it either)
    cols = host_target().contraction_tiles()[0][0]
    x, y = rand(4096, cols), rand(4096, cols, seed=1)
    assert len(kernels(on_cpu(x).T @ on_cpu(y), cores=1)) == 1
    np.testing.assert_allclose((on_cpu(x).T @ on_cpu(y)).numpy(), x.T @ y, rtol=1e-4, atol=1e-3)


def test_transposed_operands_of_a_big_product_are_packed_in_one_copy(l2_of) -> None:  # noqa: ANN001
    """`a.T @ b` and `a @ b.T` of 1024^3. The operand the tile broadcasts (a.T: 8 rows side by side, a row of `a` a
    page apart each step) is packed into panels of the tile's rows when it outgrows half of L2: each of b's panels
    reads it again from L3, a page a step, which no prefetcher follows (28 -> 12.5-16 ms, `a @ b`'s 10-13). b, the
    operand read as vectors, is copied panel by panel by the matmul itself where its panels go outside the row blocks
    (a 4 MB b against half of a 1 MB L2: `panel_buffer`), and packed by a kernel of its own where they do not (a 16 MB
    L2; a 4 MB a.T then fits half of it, and is not packed). `b.T` is packed straight from b's rows: one copy (a
    transposed copy and then its panels was two; unpacked, 24-30 ms). The copies are whole: the products are numpy's."""
    a, b = rand(1024, 1024), rand(1024, 1024, seed=1)
    ta, tb = on_cpu(a), on_cpu(b)
    mr, nr = host_target().tile_rows(), host_target().contraction_tiles()[0][0]
    for l2, copy in ((1 << 20, f"E_{1024 // mr}_1024_{mr}_"), (16 << 20, f"E_{1024 // nr}_1024_{nr}_")):
        l2_of(l2)
        ks = kernels(ta.T @ tb)
        assert [any(u.op is Ops.REDUCE_AXIS for u in k.toposort()) for k in ks] == [False, True]
        assert lowering.kernel_name(ks[0]).startswith(copy), (l2, lowering.kernel_name(ks[0]))
        assert ("%reg0 = alloca" in rendered(ks[1], host_target())) is (l2 == 1 << 20)
    l2_of(1 << 20)
    ks = kernels(ta @ tb.T)
    assert [any(u.op is Ops.REDUCE_AXIS for u in k.toposort()) for k in ks] == [False, True]
    np.testing.assert_allclose((ta.T @ tb).numpy(), a.T.astype(np.float64) @ b, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose((ta @ tb.T).numpy(), a.astype(np.float64) @ b.T, rtol=1e-3, atol=1e-3)


def test_an_einsum_over_two_axes_reads_its_operand_through_packed_panels() -> None:
    """`einsum("tbi,tbj->ij")` (a weight's gradient over a sequence and a batch) views each operand through a permute
    and a reshape joining t and b: j still runs along memory, which the packing needs to know (unpacked, the tile read
    a row of b a page apart each step: 28 ms, against 9 for the same product as `a.reshape(-1, i).T @ b.reshape(-1,
    j)`). Both forms are a copy into panels and the matmul."""
    from tgfx.lowering.layout import _regrouped_axis
    assert _regrouped_axis((1, 1024, 32, 32), (1, 1024, 1024), 1) == 1       # the axes after it joined
    assert _regrouped_axis((32, 32, 1024), (1024, 1024), 2) == 1             # the axes before it joined
    assert _regrouped_axis((4, 8), (2, 2, 8), 1) == 2                         # the axes before it split
    assert _regrouped_axis((32, 32, 1024), (1024, 1024), 1) is None          # joined with the axis inside it
    assert _regrouped_axis((8,), (2, 4), 0) is None                           # split itself
    a, b = on_cpu(rand(8, 16, 64)), on_cpu(rand(8, 16, 1024, seed=1))
    is_reduce = [any(u.op is Ops.REDUCE_AXIS for u in k.toposort()) for k in kernels(tnp.einsum("tbi,tbj->ij", a, b))]
    assert is_reduce == [False, True]
    np.testing.assert_allclose(tnp.einsum("tbi,tbj->ij", a, b).numpy(),
                               np.einsum("tbi,tbj->ij", a.numpy(), b.numpy()), rtol=1e-4, atol=1e-4)


def schedule_of(*exprs: tg.Tensor) -> list[UOp]:
    sink = inline(UOp(Ops.SINK, None, tuple(e.uop for e in exprs)))
    linear, _ = schedule(list(sink.src))
    return [c.src[0] for c in linear.src]


def _ops(ast: UOp, *ops: Ops) -> list[Ops]:
    return [u.op for u in ast.toposort() if u.op in ops]


def test_a_weight_gradients_computed_operand_is_stored_as_packed_panels() -> None:
    """`x.T @ g` of an MLP layer's weight gradient, `g = d * (1 - h * h)`: g is stored before the contraction anyway
    (it costs two ops per element, see schedule's RECOMPUTE_COST_OPERAND), and its rows are a page long, so it is stored
    straight into the panels the tile reads (the AVX2 tile read g's rows a page apart at 0.64 of the forward's rate:
    the MNIST step's weight gradient 1527 -> ~940 us, the forward's 926). A cheap operand (one op) stays fused."""
    x, d, h = (on_cpu(rand(*s, seed=i)) for i, s in enumerate(((128, 96), (128, 1024), (128, 1024))))
    pack, mm = schedule_of(x.T @ (d * (1 - h * h)))
    assert _ops(pack, Ops.REDUCE_AXIS) == [] and Ops.PERMUTE in _ops(pack, Ops.PERMUTE)
    assert _ops(mm, Ops.REDUCE_AXIS, Ops.MUL).count(Ops.MUL) == 1   # reads the panels: g is not computed again
    assert len(schedule_of(x.T @ (d * 2))) == 1


def test_a_copy_into_panels_narrower_than_a_line_reads_whole_lines() -> None:
    """Packing (2048, 1024) into 128 panels of 8 floats (a weight gradient's row operand, a GPT step's MLP): each
    panel's row is one vector and 4 panels go side by side, so each row's two lines are read once (panel by panel
    each was fetched for 32 of its bytes, a page a row: 2.2-2.5 -> 0.8 ms). Panels of a line or more are left alone."""
    target = Target("znver4", "+avx,+avx2,+fma,+avx512f", cores=1)
    g = on_cpu(rand(48, 1024))
    for width, panels in ((8, 4), (4, 8), (16, None)):
        (ast,) = kernels(g.reshape(48, 1024 // width, width).transpose(1, 0, 2) * 1.0)
        sink = index_level(ast)
        opts = hand_coded_opts(sink, target)
        ids = {r.src[0].arg: r.arg[0] for r in sink.toposort() if r.op is Ops.RANGE}
        if panels is None:
            assert Opt("UPCAST", ids[1024 // width], 4) not in opts, opts
        else:
            assert opts[:2] == [Opt("UPCAST", ids[width], width), Opt("UPCAST", ids[1024 // width], panels)], opts
    out = g.reshape(48, 128, 8).transpose(1, 0, 2) * 1.0
    np.testing.assert_array_equal(out.numpy(), g.numpy().reshape(48, 128, 8).transpose(1, 0, 2))


def test_a_forward_matmuls_epilogue_stays_in_its_kernel_beside_the_packed_gradient() -> None:
    """The gradient of a tanh MLP: the packed copy of `d * (1 - h * h)` reads h = tanh(x @ w + b), and so, before `h`
    is decided stored, does the forward's kernel: x @ w looked read by two kernels and was stored apart from its tanh
    (a third kernel). A reduce read by several kernels is decided once the other rules have settled."""
    rng = np.random.default_rng(0)
    params = [on_cpu(rng.standard_normal(s).astype(np.float32) * 0.1) for s in ((32, 1024), (1024,), (1024, 10),
                                                                                     (10,))]
    x, y = on_cpu(rand(64, 32)), on_cpu(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)])

    def loss(p: list[tg.Tensor], x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        logits = tnp.tanh(x @ p[0] + p[1]) @ p[2] + p[3]
        return -tnp.mean(tnp.sum((logits - tg.nn.logsumexp(logits, axis=1, keepdims=True)) * y, axis=1))
    grads = tg.grad(loss)(params, x, y)
    with_tanh = [k for k in schedule_of(*grads) if Ops.TANH in _ops(k, Ops.TANH)]
    assert len(with_tanh) == 1 and Ops.REDUCE_AXIS in _ops(with_tanh[0], Ops.REDUCE_AXIS)
    # the values: backpropagation by hand
    w0, b0, w1, b1 = (p.numpy() for p in params)
    xn, yn = x.numpy(), y.numpy()
    h = np.tanh(xn @ w0 + b0)
    logits = h @ w1 + b1
    sm = np.exp(logits - logits.max(1, keepdims=True))
    dl = (sm / sm.sum(1, keepdims=True) - yn) / len(xn)
    dh = (dl @ w1.T) * (1 - h * h)
    for g, want in zip(grads, (xn.T @ dh, dh.sum(0), h.T @ dl, dl.sum(0)), strict=True):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_an_axis_no_tile_row_count_divides_is_blocked_by_a_divisor(cpu: str) -> None:
    """A classifier's weight gradient `h.T @ d` with d (batch, 10): 10 rows of no tile (8 with AVX-512, 4 with AVX2),
    so the tile was one row high, a load of each operand per FMA (the MNIST step's 1024 x 10 gradient: 53 us; 11 with
    5 rows). It takes the most rows that divide the axis, at least half the tile's."""
    t = target_for(cpu)
    lanes, rows = t.contraction_tiles()[0]
    h, d = rand(128, 1024), rand(128, 10, seed=1)
    (ast,) = kernels(tnp.sum(on_cpu(h)[:, :, None] * on_cpu(d)[:, None, :], axis=0))
    _, opts = apply_hand_coded(index_level(ast), t)
    assert sorted(o.amount for o in opts if o.op == "UPCAST") == sorted([lanes, max(n for n in (5, 2) if n <= rows)])
    with config.Context(TGFX_CPU=cpu if target_for(cpu).enabled <= native_target().enabled else ""):
        got = tg.jit(lambda h, d: h.T @ d)(on_cpu(h), on_cpu(d)).numpy()
    np.testing.assert_allclose(got, h.T @ d, rtol=1e-4, atol=1e-4)


def test_a_reduce_with_a_costly_epilogue_is_stored_before_it() -> None:
    """Noise added to a matmul or a column sum (a private SGD step's gradient sums): the hash that draws each output's
    noise is some 300 ops, which the reduce's register tile unrolled once per lane (an IR of 2.5 MB, 7 s in LLVM, for
    a 32 x 10 gradient). The reduce is stored first and the noise added by an elementwise kernel; a cheap epilogue (a
    bias and tanh) stays in the reduce's kernel. The values are the same either way."""
    x, w, k = on_cpu(rand(64, 48)), on_cpu(rand(48, 32)), tg.random.PRNGKey(0)
    noise = tg.random.normal(k, (64, 32)).numpy()
    cases = [(lambda x, w, k: x @ w + tg.random.normal(k, (64, 32)), x.numpy() @ w.numpy() + noise, 2),
             (lambda x, w, k: tnp.sum(x, axis=0) + tg.random.normal(k, (48,)),
              x.numpy().sum(0) + tg.random.normal(k, (48,)).numpy(), 2),
             (lambda x, w, k: tnp.tanh(x @ w + 1), np.tanh(x.numpy() @ w.numpy() + 1), 1)]
    for f, want, n in cases:
        step = tg.jit(f)
        step(x, w, k)
        counters.reset()
        np.testing.assert_allclose(step(x, w, k).numpy(), want, rtol=1e-5, atol=1e-5)
        assert counters.kernel_count == n


def test_a_costly_value_two_kernels_compute_is_stored_once() -> None:
    """Dropout in a training step: the mask (a threefry hash per element, some 300 ops) is read by the forward's
    `where(keep, h / p, 0)` and by the gradient's; each kernel hashed it again (50 us each for 128 x 512). It is stored
    once and read by both: one kernel of the step hashes. Values as numpy's, with the same bits."""
    x, w = rand(128, 64), rand(64, 32, seed=1)
    key = tg.device_put(tg.random.PRNGKey(3), "CPU")

    def loss(w, x, key):
        h = tnp.maximum(x @ w, 0)
        keep = tg.random.bernoulli(key, 0.9, h.shape)
        return tnp.sum(tnp.where(keep, h / 0.9, 0) ** 2)
    step = tg.jit(tg.value_and_grad(loss))
    value, grad = step(on_cpu(w), on_cpu(x), key)
    keep = tg.random.bernoulli(key, 0.9, (128, 32)).numpy()
    h = np.maximum(x @ w, 0)
    np.testing.assert_allclose(float(value), np.sum(np.where(keep, h / 0.9, 0) ** 2), rtol=1e-4)
    np.testing.assert_allclose(grad.numpy(), x.T @ (2 * np.where(keep, h / 0.9, 0) / 0.9 * keep * (h > 0)),
                               rtol=1e-4, atol=1e-4)
    counters.reset()
    step(on_cpu(w), on_cpu(x), key)
    lazy = tg.value_and_grad(loss)(on_cpu(w), on_cpu(x), key)   # eager: the same graph, not yet run
    hashing = [k for k in schedule_of(*lazy) if sum(u.op is Ops.XOR for u in k.toposort()) >= 16]
    assert len(hashing) == 1 and counters.kernel_count == len(schedule_of(*lazy))


def test_a_reduce_beside_a_contraction_is_stored_before_it() -> None:
    """`(x @ w) / count` where count is another reduce of the same shape (a max pool's gradient divides the next
    layer's input gradient by each window's count of maxima): the contraction's register tile computed the count once
    per lane, unrolled (200 KB of IR, 0.9 s in LLVM, in a private SGD step). It is stored first: two kernels, each
    one reduce."""
    x, w, c = on_cpu(rand(64, 48)), on_cpu(rand(48, 32, seed=1)), on_cpu(np.abs(rand(64, 32, 4)) + 1)
    expr = (x @ w) / tnp.sum(c, axis=-1)
    assert [_ops(k, Ops.REDUCE_AXIS) for k in schedule_of(expr)] == [[Ops.REDUCE_AXIS]] * 2
    np.testing.assert_allclose(expr.numpy(), (x.numpy() @ w.numpy()) / c.numpy().sum(-1), rtol=1e-5, atol=1e-6)


def test_a_kernel_with_a_vector_range_is_compiled_without_slp() -> None:
    """A kernel whose vectors the renderer wrote is marked for the compiler to skip LLVM's SLP vectoriser (it searched
    a weight gradient's epilogue of per-lane loads for vectors: 99 -> 34 ms of LLVM, the same machine code); a kernel
    of lane copies, which SLP vectorises, is not. Either way the kernel compiles and computes numpy's values."""
    from tgfx.lowering.llvm_worker import NO_SLP
    t = host_target()
    x, w = rand(64, 48), rand(48, 64, seed=1)
    (tile,) = kernels(on_cpu(x) @ on_cpu(w))
    assert NO_SLP in rendered(tile, t)
    # lane copies: an UPCAST without a vector range (what the renderer writes where a vector does not fit; a
    # float16 transpose was such a kernel until half floats took vectors too, so the copies are asked for here)
    (copies,) = kernels(on_cpu(rand(512, 512)).T + 1)
    opt = Opt("UPCAST", 0, 4)
    sink = upcast(index_level(copies), opt, vector=False)
    assert not any(u.op is Ops.RANGE and u.arg[1] == "vector" for u in sink.toposort())
    assert NO_SLP not in render_kernel("k", sink, [opt], t)[0]
    np.testing.assert_allclose((on_cpu(x) @ on_cpu(w)).numpy(), x @ w, rtol=1e-4, atol=1e-4)


def test_a_hashing_kernel_is_compiled_without_loop_strength_reduction() -> None:
    """A random draw's kernel (threefry: the loop index mixed into every sum of the hash) is marked for the compiler
    to skip LLVM's loop strength reduction (250-400 ms of code generation for 16 elements of noise, 8 without); a
    matmul is not. Marked or not, the module compiles and the draw is what it is without the mark."""
    f = tg.jit(lambda k, g: g + tg.random.normal(k, (16,)))
    k, g = tg.device_put(tg.random.PRNGKey(3), "CPU"), on_cpu(rand(16))
    got = f(k, g).numpy()
    np.testing.assert_array_equal(got, g.numpy() + tg.random.normal(k, (16,)).numpy())
    names = {p.name for seg in next(iter(f._cache.values()))[0].segments for p in seg.cb.programs}
    held = [lowering._kernels.get(key) for key in list(lowering._kernels)]
    hashing = [k.ast for k in held if k is not None and k.name in names and Ops.XOR in _ops(k.ast, Ops.XOR)]
    assert hashing and all(NO_LSR in kernel_source(ast, host_target()).ir for ast in hashing)
    x, w = on_cpu(rand(64, 48)), on_cpu(rand(48, 32))
    assert NO_LSR not in rendered(kernels(x @ w)[0], host_target())


@pytest.mark.parametrize("cpu", ["", "znver3"])
def test_packed_matmuls_compute_what_numpy_does(cpu: str) -> None:
    """Packed panels for the native target and for AVX2 (different panel widths): columns a multiple of the panel
    or not (then unpacked), K = 1 and K past the TLB bound, an epilogue, under jit, and the gradient w.r.t. w."""
    if cpu and not target_for(cpu).enabled <= native_target().enabled | {"avx2", "fma", "avx"}:
        pytest.skip(f"{cpu} code does not run here")
    with config.Context(TGFX_CPU=cpu):
        for m, k, n in ((9, 70, 1024), (3, 65, 1040), (17, 1, 1024), (16, 64, 1056)):
            a, b = rand(m, k, seed=3), rand(k, n, seed=4)
            np.testing.assert_allclose((on_cpu(a) @ on_cpu(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
        x, w, bias = rand(24, 96), rand(96, 1024), rand(1024)
        f = tg.jit(lambda x, w, b: tnp.tanh(x @ w + b))
        np.testing.assert_allclose(f(on_cpu(x), on_cpu(w), on_cpu(bias)).numpy(), np.tanh(x @ w + bias),
                                   rtol=1e-5, atol=1e-5)
        gw = tg.grad(lambda w: tnp.sum(tnp.tanh(on_cpu(x) @ w)))(on_cpu(w)).numpy()
        np.testing.assert_allclose(gw, x.T @ (1 - np.tanh(x @ w) ** 2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_a_matmul_copies_its_panel_of_w_itself(cpu: str) -> None:
    """A training step's forward `x @ w` (128 x 784 @ 784 x 1024, 3 MB of w against 2 MB of L2): the tile's panel of w
    (784 rows a page apart, the tile's lanes wide) is copied by the matmul's own kernel into a buffer on its core's
    stack, once a panel, before the loop over x's row blocks, and the reduce reads its vectors from there
    (`tgfx/lowering/panel_buffer.py`); no kernel packs w beforehand (that pack was a full pass over w: 122-136 of
    the forward's 770-820 us, AVX-512 on 2 cores). The schedule is the same for both targets, the buffer each tile's
    width."""
    with config.Context(TGFX_CPU=cpu):
        t = host_target()
        l2 = t.l2
        x, w = on_cpu(rand(128, 784)), on_cpu(rand(784, 1024, seed=1))
        (ast,) = kernels(x @ w)
        ir = rendered(ast, t)
    nr = t.contraction_tiles()[0][0]
    if 784 * 1024 * 4 <= l2 // 2:
        pytest.skip("w fits half of this machine's L2: its panels stay inside the row blocks")
    assert f"%reg0 = alloca [{784 * nr} x float], align 64" in ir
    # one store of a row of w a step of the copy's loop, and every vector of w the reduce reads comes from the buffer
    buf_ptrs = set(re.findall(r"(%t\d+) = getelementptr float, ptr %reg0", ir))
    stores = re.findall(rf"store <{nr} x float> %t\d+, ptr (%t\d+)", ir)
    loads = re.findall(rf"load <{nr} x float>, ptr (%t\d+), align", ir)
    assert len(loads) == 2 and all(p in buf_ptrs for p in stores[:1]) and sum(p in buf_ptrs for p in loads) == 1


@pytest.mark.parametrize("cpu", ["", "znver3"])
def test_panel_buffered_matmuls_compute_what_numpy_does(l2_of, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
                                                        cpu: str) -> None:
    """Matmuls whose kernel copies its panels of w (a 256 KB L2: w over 128 KB, a panel up to 64 KB), and shapes
    around them, each with the kernels it gets: one that copies its panels, or w packed by a kernel first (M not a
    multiple of the tile's rows: no row tile to put inside the panels; K too deep for a panel in L2), or w read as it
    is (N not a multiple of the tile's lanes, padded; K of one row; M too short to reuse a panel). Then an epilogue,
    under jit, and the gradients; for the native target and for AVX2 (a narrower panel, and M padded to its 6-row
    tile: PADTO)."""
    if cpu and not target_for(cpu).enabled <= native_target().enabled | {"avx2", "fma", "avx"}:
        pytest.skip(f"{cpu} code does not run here")
    from dataclasses import replace

    from tgfx.devices import target
    l2_of(256 << 10)   # (and the named target's: this machine's caches, as l2_of has them)
    monkeypatch.setattr(target, "_named_target",
                        lambda name: replace(target.native_target(), cpu=name, features=target.cpu_features(name)))
    with config.Context(TGFX_CPU=cpu):
        _check_panel_buffered_matmuls()


def _check_panel_buffered_matmuls() -> None:
    t = host_target()
    assert t.l2 == 256 << 10
    for m, k, n, want in ((128, 300, 512, "copies"), (200, 257, 256, "copies"), (64, 480, 2048, "copies"),
                          (40, 500, 768, "copies"), (37, 130, 1024, "packed"), (33, 333, 1056, "packed"),
                          (50, 2048, 256, "packed"), (90, 200, 1000, "as is"), (16, 1, 8192, "as is"),
                          (8, 400, 512, "as is")):
        a, b = rand(m, k, seed=3), rand(k, n, seed=4)
        ks = kernels(on_cpu(a) @ on_cpu(b))
        copies = ["%reg0 = alloca" in rendered(ast, t) for ast in ks]
        got = "copies" if copies == [True] else "packed" if copies == [False, False] else "as is"
        assert got == want and len(ks) == (2 if want == "packed" else 1), (m, k, n, copies)
        np.testing.assert_allclose((on_cpu(a) @ on_cpu(b)).numpy(), a.astype(np.float64) @ b,
                                   rtol=1e-4, atol=1e-4 * math.sqrt(k))
    x, w, bias = rand(96, 384), rand(384, 1024), rand(1024)
    f = tg.jit(lambda x, w, b: tnp.tanh(x @ w + b))
    np.testing.assert_allclose(f(on_cpu(x), on_cpu(w), on_cpu(bias)).numpy(), np.tanh(x @ w + bias),
                               rtol=1e-5, atol=1e-5)
    gx, gw = tg.grad(lambda x, w: tnp.sum(tnp.tanh(x @ w)), argnums=(0, 1))(on_cpu(x), on_cpu(w))
    d = 1 - np.tanh(x @ w) ** 2
    np.testing.assert_allclose(gw.numpy(), x.T @ d, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gx.numpy(), d @ w.T, rtol=1e-4, atol=1e-4)


_PATTERNS = (("vstore", r"store <\d+ x float> %t\d+, ptr %t"), ("store", r"store float"),
             ("gather", r"insertelement <\d+ x float> %t\d+, float %t\d+, i64 [1-9]"))   # lanes 1.. of a gather


def _counts(ir: str) -> dict[str, int]:
    return {k: len(re.findall(p, ir)) for k, p in _PATTERNS}


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_upcast_tiles_store_vectors(cpu: str) -> None:
    """An upcast tile's stores side by side are one `<lanes x float>` store each (SLP used to rebuild them from
    scalars, most of a cold first call's LLVM time): a 512 x 512 transpose's lanes x lanes tile (its loads lanes row
    vectors, transposed in registers), a 10 x 512 transpose
    with its store axis alone upcast (LLVM's loop vectoriser built interleaved groups of stride 10 for it), and a
    matmul tile's epilogue, stored from its accumulator vectors as they are (no gather)."""
    t = target_for(cpu)
    lanes = t.lanes()
    (ast,) = kernels(on_cpu(rand(512, 512)).T + 1)
    ir = rendered(ast, t)     # read as lanes row vectors, transposed in registers: no scalar load
    assert _counts(ir)["vstore"] == lanes and _counts(ir)["store"] == 0 and "load float" not in ir
    assert len(re.findall(rf"load <{lanes} x float>", ir)) == lanes
    (ast,) = kernels(on_cpu(rand(512, 10)).T + 1)
    assert _counts(rendered(ast, t)) == {"vstore": 1, "store": 0, "gather": lanes - 1}
    x, w, b = (on_cpu(rand(*s)) for s in ((64, 48), (48, 64), (64,)))
    (ast,) = kernels(tnp.tanh(x @ w + b))
    cols, rows = t.contraction_tiles()[0]
    got = _counts(rendered(ast, t))   # a row of the tile's vector range is one store
    assert got["store"] == 0 and got["gather"] == 0 and got["vstore"] == rows


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_short_rows_read_in_another_order_are_vectors(cpu: str) -> None:
    """Packing a computed operand into panels a tile wide (`(128, 1024)` to `(1024 / nr, 128, nr)`): rows of a few
    vectors, read along them but a page apart. Left to LLVM, it unrolled the short row whole and vectorised the loop
    outside it, with a gather and a scatter per vector (AVX-512: 170 us for 512 KB, 15 with vectors)."""
    t = target_for(cpu)
    lanes, nr = t.lanes(), t.contraction_tiles()[0][0]   # nr: two vectors
    d, h = on_cpu(rand(128, 1024)), on_cpu(rand(128, 1024, seed=1))
    (ast,) = kernels((d * (1 - h * h)).reshape(128, 1024 // nr, nr).transpose(1, 0, 2) + 0)
    sink, opts = apply_hand_coded(index_level(ast), t)
    assert [o.op for o in opts if o.op != "THREAD"] == ["UPCAST"]
    ir = render_kernel("k", sink, opts, t)[0]
    assert _counts(ir) == {"vstore": 1, "store": 0, "gather": 0}   # a vector a step of the row's loop
    assert len(re.findall(rf"load <{lanes} x float>", ir)) == 2 and "load float" not in ir


def test_packing_a_tall_operand_walks_its_rows_outside_the_panels() -> None:
    """Packing a 4096 x 1024 operand into panels of two vectors read, for each panel, 4096 rows a page apart: more
    pages than the second-level TLB holds, a miss a row (8.4 ms). Rows outside the panels (SWAP), each sweep writes
    as many pages as there are panels (1.1-1.6 ms); 128 rows a page apart stay as they were (the TLB holds them)."""
    t = host_target()
    nr = t.contraction_tiles()[0][0]
    for rows, swapped in ((4096, True), (128, False)):
        d, h = on_cpu(rand(rows, 1024)), on_cpu(rand(rows, 1024, seed=1))
        expr = (d * (1 - h * h)).reshape(rows, 1024 // nr, nr).transpose(1, 0, 2) + 0
        (ast,) = kernels(expr)
        _, opts = apply_hand_coded(index_level(ast), t)
        assert any(o.op == "SWAP" for o in opts) is swapped, (rows, opts)
    want = (d.numpy() * (1 - h.numpy() ** 2)).reshape(128, 1024 // nr, nr).transpose(1, 0, 2)
    np.testing.assert_allclose(expr.numpy(), want, rtol=1e-6)


def test_a_transposed_operand_with_a_long_sweep_is_read_from_row_panels() -> None:
    """x.T @ g with x's rows a page long (a weight's gradient over 2048 tokens): each step of the reduce reads a
    tile's rows side by side from another row of x, more pages a sweep than the second-level TLB holds; x is read
    from panels of the tile's rows, each contiguous (a transformer's 4096 tokens: 7.3 -> 5.6 ms). With 128 rows (the
    MLP step's) it is not packed: no faster there."""
    t = host_target()
    mr = t.tile_rows()
    for rows, packed in ((2048, True), (128, False)):
        x, g = on_cpu(rand(rows, 1024)), on_cpu(rand(rows, 64, seed=1))
        names = [lowering.kernel_name(ast) for ast in kernels(x.T @ g)]
        assert any(n.startswith(f"E_{1024 // mr}_{rows}_{mr}_") for n in names) is packed, (rows, names)
    np.testing.assert_allclose((x.T @ g).numpy(), x.numpy().T.astype(np.float64) @ g.numpy(), rtol=1e-4, atol=1e-4)
    x, g = on_cpu(rand(2048, 1024)), on_cpu(rand(2048, 64, seed=1))
    np.testing.assert_allclose((x.T @ g).numpy(), x.numpy().T.astype(np.float64) @ g.numpy(), rtol=1e-4, atol=1e-3)


def _loop_hints(ir: str) -> list[list[str]]:
    """For each loop of a rendered kernel, innermost first as they close, the hints its back edge carries."""
    md = dict(re.findall(r"^(!\d+) = (.*)$", ir, re.M))
    return [[md[h] for h in re.findall(r"!\d+", md[loop])[1:]] if loop else []
            for loop in re.findall(r"br i1 [^\n]*label %L\w+\.end(?:, !llvm\.loop (!\d+))?", ir)]


def test_llvm_unrolls_only_the_reduce_loops_of_kernels_with_a_reduce() -> None:
    """An elementwise kernel's loops are vectorised and interleaved by LLVM and not unrolled further (copying a
    computed operand into packed panels compiled in 23-37 ms unrolled, 5 without, and ran no faster); a matmul's
    reduce loop may be, and no loop around another loop is (LLVM unrolled a row sum's loops over rows whole once it
    had unrolled the sum: 38 KB of optimised IR for 16 x 64 rows of 128, 4 KB without, and 61 ms to compile)."""
    t = host_target()
    d, h = on_cpu(rand(256, 1024)), on_cpu(rand(256, 1024, seed=1))
    (ast,) = kernels((d * (1 - h * h)).reshape(256, 32, 32).transpose(1, 0, 2) + 0)
    assert all('!{!"llvm.loop.unroll.disable"}' in hints for hints in _loop_hints(rendered(ast, t)))
    (ast,) = kernels(on_cpu(rand(256, 64)) @ on_cpu(rand(64, 256)))
    reduce_loop, *outer = _loop_hints(rendered(ast, t))
    assert '!{!"llvm.loop.unroll.disable"}' not in reduce_loop and outer
    assert all('!{!"llvm.loop.unroll.disable"}' in hints for hints in outer)
    x = rand(16, 64, 128)
    (ast,) = kernels(on_cpu(x).mean(-1, keepdims=True))
    ir = rendered(ast, t)
    row, *outer = _loop_hints(ir)
    assert row == [] and outer and all(hints == ['!{!"llvm.loop.unroll.disable"}'] for hints in outer)
    mod = llvm.parse_assembly(ir)
    llvm_worker.optimize(mod, target_machine(t))
    assert len(re.findall(r"load <\d+ x float>", str(mod))) <= 2 * 128 // t.lanes()   # one row's sum, once
    np.testing.assert_allclose(on_cpu(x).mean(-1, keepdims=True).numpy(), x.mean(-1, keepdims=True), rtol=1e-5,
                               atol=1e-6)
    # a loop around only short loops (SHORT_LOOP trips, which LLVM unrolls whole) is left to LLVM: a convolution's
    # bias gradient over 128 images of 8 rows of 8 pixels ran 15 -> 17 us with its image loop's hint (its rows and
    # pixels are one loop of 64 now, merge_reduce_ranges, in vectors: 20-25 -> 16-20 us; read transposed too, once
    # its loops nest in memory order, order_reduce_ranges: the same code); 8 pixels of rows of 16, two short loops
    g = rand(128, 16, 8, 8)
    (ast,) = kernels(tnp.sum(on_cpu(g).transpose(0, 1, 3, 2), axis=(0, 2, 3)), cores=1)
    assert rendered(ast, t) == rendered(kernels(tnp.sum(on_cpu(g), axis=(0, 2, 3)), cores=1)[0], t)
    (ast,) = kernels(tnp.sum(on_cpu(rand(128, 16, 8, 16))[..., :8], axis=(0, 2, 3)), cores=1)
    ir = rendered(ast, t)
    trips = [int(n) for n in re.findall(r"icmp slt i64 %t\d+, (\d+)\n\s+br i1", ir)]
    hinted = ['!{!"llvm.loop.unroll.disable"}' in hints for hints in _loop_hints(ir)]
    # (innermost first: the pixels unrolled whole, the rows, the images' 128 in two levels, 8 of 16 (block_sum's
    # nested sums), the inner one around only the short loops; then the channels)
    assert trips == [1, 8, 16, 8, 8] and hinted == [False, False, False, True, True]


def test_vector_stores_compute_what_numpy_does() -> None:
    """Transposes whose axes split into lanes, one of them, or neither; a tile with a fused epilogue; a kernel that
    reads what it writes keeps its scalar stores in order."""
    for shape in ((512, 512), (512, 10), (10, 512), (48, 80), (33, 17)):
        a = rand(*shape)
        np.testing.assert_array_equal((on_cpu(a).T * 2).numpy(), a.T * 2)
    a = rand(64, 96)
    np.testing.assert_allclose(tnp.exp(on_cpu(a)).T.reshape(96, 8, 8).sum(1).numpy(),
                               np.exp(a).T.reshape(96, 8, 8).sum(1), rtol=1e-5)
    i = np.arange(300, dtype=np.int32) % 7
    np.testing.assert_allclose(on_cpu(np.zeros(7, np.float32)).at[on_cpu(i)].add(1.0).numpy(),
                               np.bincount(i, minlength=7).astype(np.float32))


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_attention_scores_are_a_dot_product_tile(cpu: str) -> None:
    """q @ k.T over heads sliced from one qkv matrix: both operands run along the reduce (the head dimension) in
    memory and no output axis is a vector of either. The reduce is unrolled by a vector's lanes into vector
    accumulators (a vector range: one node per accumulator, not one per lane), a tile of rows x 4 of them (4 x 4 with
    AVX-512, 2 x 4 with AVX2), each step loading one vector per row and per column; before, each score was its own
    dot product (3.8x slower)."""
    b, t, nh, hd = 2, 16, 2, 32
    x, w = on_cpu(rand(b, t, 8)).realize(), on_cpu(rand(8, 3 * nh * hd, seed=1)).realize()
    qkv = x @ w   # computed in the same graph (a stored qkv's k would be copied transposed, a plain a @ b)
    q, k = (qkv[..., i * nh * hd:(i + 1) * nh * hd].reshape(b, t, nh, hd).transpose(0, 2, 1, 3) for i in range(2))
    scores = q @ k.transpose(0, 1, 3, 2)
    ast = kernels(scores)[-1]
    tg_t = target_for(cpu)
    sink, opts = apply_hand_coded(index_level(ast), tg_t)
    rows, cols = tg_t.dot_tile()
    assert [(o.op, o.amount) for o in opts if o.op != "THREAD"] == [("UNROLL", tg_t.lanes()), ("UPCAST", cols),
                                                                     ("UPCAST", rows)]
    ir = render_kernel("k", sink, opts, tg_t)[0]
    assert any(u.op is Ops.RANGE and u.arg[1] == "vector" for u in sink.toposort())
    assert re.findall(r"%acc\d+ = alloca (.*)", ir) == [f"<{tg_t.lanes()} x float>"] * (rows * cols)
    a = qkv.numpy().reshape(b, t, 3, nh, hd)
    ref = np.einsum("bind,bjnd->bnij", a[:, :, 0], a[:, :, 1])
    np.testing.assert_allclose(scores.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cpu", ["znver3", "skylake-avx512"])
def test_a_register_tiles_reduce_loop_is_unrolled_and_nothing_else_is(cpu: str) -> None:
    """A step of a tile's reduce loop is its FMAs beside loads, broadcasts, index arithmetic and the loop's own add,
    compare and branch: more instructions than the front end issues while the FMAs run (AVX2's 16 x 6 tile: 29 for
    12 FMAs), and LLVM left the loop rolled. The renderer asks for TILE_REDUCE_UNROLL steps on that loop alone (1024^3,
    alternated: AVX2 159 -> 193 GFLOP/s, AVX-512 266-283 -> 293-305); other kernels' loops keep their hints."""
    from tgfx.lowering.render_llvm import TILE_REDUCE_UNROLL
    t = target_for(cpu)
    count = f'!"llvm.loop.unroll.count", i32 {TILE_REDUCE_UNROLL}'
    x, w = rand(256, 512), rand(512, 256, seed=1)
    tile = next(k for k in kernels(on_cpu(x) @ on_cpu(w)) if any(u.op is Ops.REDUCE_AXIS for u in k.toposort()))
    ir = rendered(tile, t)
    assert count in ir
    tiled = [line for line in ir.splitlines() if "!llvm.loop !2" in line]
    assert len(tiled) == 1   # the reduce loop's back edge, and no other loop's
    (plain,) = kernels(on_cpu(x) * 2.0 + 1.0)
    assert count not in rendered(plain, t)
    np.testing.assert_allclose((on_cpu(x) @ on_cpu(w)).numpy(), x @ w, rtol=1e-4, atol=1e-4)


def _avx512_tile(e: tg.Tensor) -> tuple[str, list[UOp]]:
    """The one kernel of `e` with AVX-512's default options, a register tile (UPCAST), rendered: its IR and program."""
    (ast,) = kernels(e)
    t = target_for("skylake-avx512")
    sink, opts = apply_hand_coded(index_level(ast), t)
    assert any(o.op == "UPCAST" for o in opts), opts
    ir, lin, _ = render_kernel("k", sink, opts, t)
    return ir, lin


def test_a_tile_whose_step_reads_many_values_is_not_unrolled() -> None:
    """A Fourier layer's weight gradient, x_hat times the output's gradient summed over 8 images per mode: a tile of
    16 x 8 with AVX-512 whose step reads 17 values. Those loads are already more instructions than the unroll is
    for, and four steps of them were addresses of the reduce loop's index that LLVM's loop strength reduction searched
    together: 250-320 ms of code generation per kernel, 80 rolled, run time the same (a 64 x 64 FNO's four: 0.27-0.46
    ms either way). No loop asks for TILE_REDUCE_UNROLL steps; the values hold."""
    from tgfx.lowering.render_llvm import TILE_STEP_LOADS, step_loads
    a, b = rand(8, 12, 12, 32, 2), rand(8, 12, 12, 32, seed=1)   # x_hat's real parts, every other float
    e = tnp.einsum("bxyi,bxyo->ioxy", on_cpu(a)[..., 0], on_cpu(b))
    ir, lin = _avx512_tile(e)
    assert max(step_loads(lin).values()) > TILE_STEP_LOADS
    assert "!llvm.loop !2" not in ir
    np.testing.assert_allclose(e.numpy(), np.einsum("bxyi,bxyo->ioxy", a[..., 0], b), rtol=1e-4, atol=1e-4)


def test_the_reduce_loops_around_a_tile_step_that_reads_many_values_stay_rolled() -> None:
    """The same weight gradient over two reduce axes that do not merge (the images, then the modes along x, read
    transposed): a loop of 4 images around the tile's loop of 8. LLVM unrolled such short loops whole by itself, and
    searched the straight line of loads with its SLP vectoriser and loop strength reduction (the FNO's lifting weight
    gradient, loops of 2 and 4 around a step of 28 loads: 250 ms of LLVM, no vector built; 60 with them rolled, and
    it ran as fast). The loop around is kept rolled; the tile's own loop keeps the hints it had."""
    from tgfx.lowering.render_llvm import TILE_STEP_LOADS, step_loads
    a, b = rand(4, 8, 8, 32, 2), rand(4, 8, 8, 32, seed=1)
    e = tnp.einsum("bxyi,byxo->ioy", on_cpu(a)[..., 0], on_cpu(b))
    ir, lin = _avx512_tile(e)
    reduces = [u for u in lin if u.op is Ops.RANGE and u.arg[1] == "reduce"]
    assert [r.src[0].arg for r in reduces] == [4, 8]
    ends = [u for u in lin if u.op is Ops.END and u.src[0] in reduces]
    assert step_loads(lin)[ends[0]] > TILE_STEP_LOADS   # (the inner loop's END comes first)
    loop_ids = dict(re.findall(r"!(\d+) = distinct !\{!\d+, (.*)\}", ir))
    md = [loop_ids[m] for m in re.findall(r"label %L\d+\.end, !llvm\.loop !(\d+)", ir)]
    unroll_off = re.search(r'!(\d+) = !\{!"llvm.loop.unroll.disable"\}', ir).group(1)
    assert f"!{unroll_off}" not in md[0] and f"!{unroll_off}" in md[1]   # the tile's loop, then the loop around it
    np.testing.assert_allclose(e.numpy(), np.einsum("bxyi,byxo->ioy", a[..., 0], b), rtol=1e-4, atol=1e-4)


def test_attention_scores_copy_their_keys_transposed_and_tile_along_the_queries() -> None:
    """q @ k^T of heads (32 images x 4 heads, 65 tokens of 16), q and k slices of a projection plus its bias: k (an
    elementwise value of a stored product, read by all 65 queries) is copied transposed once, so the scores are a
    plain tile with the keys along its vectors; the tile's rows run along the queries, whose key vectors they share,
    padded 65 -> 72, not along the images, whose rows would each load other vectors (a ViT step 25.3 -> 20.5 ms)."""
    x, w, b = on_cpu(rand(32, 65, 64)), on_cpu(rand(64, 192, seed=1) / 8), on_cpu(rand(192, seed=2))
    qkv = (x @ w + b).reshape(32, 65, 3, 4, 16).transpose(2, 0, 3, 1, 4)
    scores = qkv[0] @ qkv[1].swapaxes(-1, -2)
    asts = kernels(scores)
    last = asts[-1]
    assert any(u.op is Ops.REDUCE_AXIS for u in last.toposort())
    assert len(asts) == 3     # the projection, the keys' transposed copy, the scores
    t = host_target()
    _, opts = apply_hand_coded(index_level(last), t)
    sizes = {r.arg[0]: r.src[0].arg for r in index_level(last).toposort() if r.op is Ops.RANGE}
    queries = next(a for a, n in sizes.items() if n == 65 and any(o.op == "UPCAST" and o.axis == a and o.amount > 1
                                                                    and o.amount < 16 for o in opts))
    assert Opt("PADTO", queries, t.tile_rows()) in opts, opts
    qkv_np = (x.numpy() @ w.numpy() + b.numpy()).reshape(32, 65, 3, 4, 16).transpose(2, 0, 3, 1, 4)
    np.testing.assert_allclose(scores.numpy(), qkv_np[0] @ qkv_np[1].swapaxes(-1, -2), rtol=1e-4, atol=1e-4)
