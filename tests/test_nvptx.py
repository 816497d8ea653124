"""NVPTX code generation without a GPU: every kernel of a table of programs (elementwise, unary, binary, reduce,
movement, matmul, softmax, layernorm, conv, scatter, gather, cumsum, loops, gradients) rendered for sm_90 and
assembled by `ptxas`, which must accept each without spilling registers; the GPU target description; the GPU
options' rewrites checked against numpy by running the same index-level kernels on the CPU."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tgfx as tg
import tgfx.lowering as lowering
import tgfx.lowering.operands as operands
from tgfx.devices.target import GPU_DEFAULT, GPUTarget
from tgfx.ir.ops import Ops
from tgfx.lowering.kernel_opts import Opt
from tgfx.lowering.render_nvptx import kernel_ir, libdevice_path, ptx_of

PTXAS = shutil.which("ptxas")
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas (the CUDA toolkit) is not on PATH")
# bytes of spill stores a kernel may have: none (every kernel of the table fits its register budget today)
SPILL_BOUND = 0

rng = np.random.default_rng(0)


def cpu(x: np.ndarray) -> tg.Tensor:
    """`x` on the CPU, whatever the default device: these tests take the kernels the CPU lowers (a hook on
    `lowering.lower_kernel`) and render or rewrite them for the GPU themselves (under `-p tests.emulated_cuda` a
    Tensor on CUDA:0 reaches `lower_kernel` only as the emulator's thread loops)."""
    return tg.asarray(x, device="CPU")


def f32(*shape: int) -> tg.Tensor:
    return cpu(rng.standard_normal(shape).astype(np.float32))


def _programs() -> list:
    """Small programs whose kernels stand for those of the op test suite, and their results."""
    tnp = tg.numpy
    x, y, v = f32(16, 33), f32(16, 33), f32(1000)
    m, w = f32(8, 24), f32(24, 12)
    outs = [
        x + y, x * 2.0 - y, tnp.maximum(x, y), tnp.where(x > y, x, y), x / (tnp.abs(y) + 1.0), x ** 2,
        tnp.sin(x), tnp.cos(x), tnp.tan(x), tnp.exp(x), tnp.log(tnp.abs(x) + 1), tnp.tanh(x), tnp.sqrt(tnp.abs(x)),
        tnp.arctan2(x, y), tnp.power(tnp.abs(x), y), tnp.expm1(x), tnp.log1p(tnp.abs(x)), tnp.arcsin(x * 0.1),
        tnp.sinh(x), tnp.floor(x), tnp.mod(x, 1.5), tnp.exp2(x), tnp.log2(tnp.abs(x) + 1), tg.scipy.special.erf(x),
        x.astype(tg.dtypes.float16) * 3, x.astype(tg.dtypes.bfloat16) + 1, x.astype(tg.dtypes.float64) ** 0.5,
        tnp.sin(x.astype(tg.dtypes.float64)), tnp.exp(x.astype(tg.dtypes.float16)),
        (x * 10).astype(tg.dtypes.int32) // 3, (x * 10).astype(tg.dtypes.int32) % 7,
        (x * 10).astype(tg.dtypes.int64) << 2, (x * 10).astype(tg.dtypes.uint8) >> 1, (x > 0) & (y < 0),
        x.sum(), x.sum(axis=0), x.sum(axis=1), x.max(axis=1), x.prod(axis=0), tnp.argmax(x, axis=1),
        (x > 0).any(axis=1), v.sum(), v.astype(tg.dtypes.float16).sum(), x.astype(tg.dtypes.int64).sum(axis=1),
        x.astype(tg.dtypes.float64).max(axis=0), x.mean(axis=1), x.var(axis=0),
        x.T + 1, x[::2, 3:20], tnp.flip(x, 1), tnp.pad(x, ((1, 2), (3, 0))), tnp.concatenate([x, y], 0),
        x.reshape(33, 16) * 2, tnp.broadcast_to(v[:33], (16, 33)) + x, tnp.tile(m, (2, 3)),
        m @ w, tnp.einsum("ij,jk->ik", m, w), tnp.einsum("bij,bjk->bik", f32(3, 8, 16), f32(3, 16, 8)),
        f32(64, 64) @ f32(64, 64), f32(256, 64) @ f32(64, 1024), tg.nn.softmax(x, axis=-1),
        tg.nn.log_softmax(x, axis=-1), tg.nn.softmax(f32(4, 600), axis=-1), tg.nn.gelu(x), tg.nn.relu(x),
        (x - x.mean(axis=1, keepdims=True)) / tnp.sqrt(x.var(axis=1, keepdims=True) + 1e-5),
        tg.lax.conv(f32(2, 3, 10, 10), f32(4, 3, 3, 3), (1, 1), "SAME"),
        tg.lax.conv(f32(128, 8, 8, 8), f32(32, 8, 3, 3), (1, 1), "SAME"),   # a batch: more output axes than a grid
        tnp.cumsum(v), tnp.cumsum(x, axis=0), tnp.take(v, cpu(np.array([3, 1, 999, 0])), axis=0),
        x[cpu(np.array([0, 5, 15])), :], tnp.zeros((16, 33), device="CPU").at[cpu(np.array([1, 3, 1]))].add(y[:3]),
        tnp.sort(v[:64]), tnp.arange(100, device="CPU") * 2, tnp.eye(7, device="CPU"),
        tnp.linspace(0, 1, 50, device="CPU"),
    ]
    tg.realize(*outs)

    def loss(p: tg.Tensor, q: tg.Tensor) -> tg.Tensor:
        return (tg.nn.softmax(tnp.tanh(p @ q), axis=-1) ** 2).sum()
    outs += tg.jit(tg.grad(loss, argnums=(0, 1)))(m, w)
    outs.append(tg.lax.fori_loop(0, 5, lambda i, c: c * 1.5 + 1.0, f32(8)))
    outs += tg.lax.scan(lambda c, a: (c + a, c * a), f32(4), f32(6, 4))
    return outs


@pytest.fixture(scope="module")
def kernels() -> list:
    """Every kernel AST the programs lower (a hook on `lower_kernel`, after the process forgot what it compiled)."""
    seen: dict = {}
    orig = lowering.lower_kernel

    def hook(ast, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen[ast.key] = ast
        return orig(ast, *args, **kwargs)
    lowering.forget_compiled()
    lowering.lower_kernel = hook
    try:
        with tg.Context(TGFX_ENABLE_X64=1):   # float64 and int64 kernels too
            _programs()
    finally:
        lowering.lower_kernel = orig
    return list(seen.values())


def _ptxas(path: Path) -> tuple[int, str]:
    r = subprocess.run([PTXAS, "-arch=sm_90", "-v", str(path), "-o", "/dev/null"], capture_output=True, text=True,
                       timeout=120)
    return r.returncode, r.stderr


def ptxas_report(ptx: str) -> str:
    """ptxas's report (-v: registers, shared memory, spills) of `ptx` for sm_90; the test fails if it rejects it."""
    with tempfile.TemporaryDirectory() as d:
        (path := Path(d) / "k.ptx").write_text(ptx)
        rc, report = _ptxas(path)
    assert rc == 0, report
    return report


@needs_ptxas
def test_every_kernel_assembles_for_sm90(kernels: list) -> None:
    # (outputs, not kernels: elementwise siblings of one shape are one kernel storing each, `schedule.merge_siblings`)
    outputs = sum(len(ast.src) for ast in kernels)
    assert outputs >= 80, f"the table lowered only {outputs} outputs in {len(kernels)} kernels"
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, ast in enumerate(kernels):
            ptx, name, dims = ptx_of(ast, GPU_DEFAULT)
            assert f".entry {name}(" in ptx and ".target sm_90" in ptx
            assert ".extern .func" not in ptx, f"{name} calls a function ptxas cannot resolve"
            p = Path(d) / f"k{i}.ptx"
            p.write_text(ptx)
            paths.append((p, name))
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda pn: (pn[1], *_ptxas(pn[0])), paths))
    failures = [(n, err) for n, rc, err in results if rc != 0]
    assert not failures, f"ptxas rejected {len(failures)} kernels; first: {failures[0]}"
    spills = {n: int(s) for n, rc, err in results for s in re.findall(r"(\d+) bytes spill stores", err)
              if int(s) > SPILL_BOUND}
    assert not spills, f"kernels spill registers: {spills}"


def test_every_kernel_spreads_its_outputs_over_threads(kernels: list) -> None:
    # a thread computes one register tile: every output axis is spread over the grid, also past its three axes (a
    # convolution's batch, channels, rows and columns: the fourth shares an axis of blocks, not a loop in each thread)
    from tgfx.ir.ops import Ops
    for ast in kernels:
        sink = lowering.index_level(ast, pieces=False)   # (as the GPU lowers it: without per-piece stores)
        outputs = math.prod(u.src[0].arg for u in sink.toposort() if u.op is Ops.RANGE and u.arg[1] == "loop")
        _, name, dims, opts = kernel_ir(ast)
        if any(o.op == "GROUP" for o in opts) or any(u.op is Ops.REDUCE and isinstance(u.arg, tuple)
                                                     for u in sink.toposort()):
            continue   # a block a row, or a loop kernel's one thread
        tile = math.prod(o.amount for o in opts if o.op == "UPCAST")
        threads = math.prod(dims.grid) * math.prod(dims.block)
        assert threads * tile >= outputs, (name, outputs, threads, opts)


def test_gpu_target_from_driver_attributes() -> None:
    attrs = {"COMPUTE_CAPABILITY_MAJOR": 8, "COMPUTE_CAPABILITY_MINOR": 6, "MULTIPROCESSOR_COUNT": 84,
             "MAX_THREADS_PER_BLOCK": 1024, "MAX_REGISTERS_PER_BLOCK": 65536, "WARP_SIZE": 32,
             "MAX_SHARED_MEMORY_PER_BLOCK": 49152, "MAX_GRID_DIM_Z": 1000}
    t = GPUTarget.from_attributes("NVIDIA RTX A6000", attrs)
    assert (t.cpu, t.features, t.sms, t.max_grid) == ("sm_86", "+ptx80", 84, (2 ** 31 - 1, 65535, 1000))
    assert GPU_DEFAULT.cpu == "sm_90" and GPUTarget("x", (10, 0), 148).features == "+ptx86"   # sm_100 needs 8.6
    assert t.key != GPU_DEFAULT.key and t.register_budget(1024) == 64 and t.register_budget(128) == 255
    assert [t.group_threads(n) for n in (5, 32, 33, 200, 10 ** 6)] == [32, 32, 64, 256, 256]


def _lowered(fn, *args):  # noqa: ANN001, ANN002, ANN202
    """The ASTs of the kernels `fn(*args)` lowers (each once), and its result, scheduled as for a GPU on any host: no
    operand packed by a kernel of its own first (`operands._packed_operand`, the CPU's, sized by the host's L2 and
    TLB: on a host of 1 MiB of L2 a core a 4096 x 4096 matmul's panels are packed apart; a GPU's device skips it)."""
    seen = {}
    orig = lowering.lower_kernel

    def hook(ast, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen[ast.key] = ast
        return orig(ast, *a, **k)
    lowering.forget_compiled()
    lowering.lower_kernel = hook
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(operands, "get_device", lambda name: types.SimpleNamespace(compiles_on_host=False))
            out = fn(*args)
            out.numpy()
    finally:
        lowering.lower_kernel = orig
    return list(seen.values()), out


def _one_kernel(fn, *args):  # noqa: ANN001, ANN002, ANN202
    """The AST of the one kernel `fn(*args)` lowers."""
    asts, out = _lowered(fn, *args)
    assert len(asts) == 1, [lowering.kernel_name(a) for a in asts]
    return asts[0], out


def test_cache_keys_and_code_follow_the_target() -> None:
    ast, _ = _one_kernel(lambda a: a * 3.0 + 1.0, f32(64, 64))
    other = GPUTarget("A100", (8, 0), 108)
    ptx90, ptx80 = ptx_of(ast, GPU_DEFAULT)[0], ptx_of(ast, other)[0]
    assert ".target sm_90" in ptx90 and ".target sm_80" in ptx80
    assert ptx_of(ast, GPU_DEFAULT)[0] is ptx90   # the memory cache, per target


def test_every_buffer_slot_is_a_parameter_also_one_never_read() -> None:
    # the zero-size part of a concatenation is a buffer slot the kernel never reads; the EXEC still gives it a word,
    # so the kernel takes one parameter a slot
    tnp = tg.numpy
    ast, _ = _one_kernel(lambda e, x: tnp.concatenate([e, x]), cpu(np.zeros((0, 3), np.float32)), f32(2, 3))
    ptx, name, dims = ptx_of(ast)
    assert dims.params == 3
    entry = ptx[ptx.index(f".entry {name}("):]
    assert entry[:entry.index(")")].count(".param") == 3


def test_elementwise_kernel_loads_16_bytes_a_thread() -> None:
    ast, _ = _one_kernel(lambda a, b: a * b + 1.0, f32(256, 256), f32(256, 256))
    ptx, name, dims = ptx_of(ast)
    # 4 floats a thread, 16384 threads: blocks of 64 (two warps) give each of the 132 SMs at least one
    assert dims.params == 3 and math.prod(dims.block) == 64 and math.prod(dims.grid) == 256
    assert ptx.count("ld.global.nc.v4") == 2 and ptx.count("st.global.v4") == 1
    assert f".reqntid {dims.block[0]}, {dims.block[1]}, {dims.block[2]}" in ptx


def test_row_reduction_is_one_block_a_row() -> None:
    ast, _ = _one_kernel(lambda a: tg.nn.softmax(a, axis=-1), f32(8, 1000))
    ir, name, dims, opts = kernel_ir(ast)
    assert dims.grid == (8, 1, 1) and dims.block == (256, 1, 1)
    assert {o.op for o in opts} == {"GLOBAL", "GROUP", "LOCAL"}
    ptx = ptx_of(ast)[0]
    assert "shfl.sync.bfly.b32" in ptx and "bar.sync" in ptx and ".shared" in ptx


@pytest.mark.skipif(libdevice_path() is None, reason="no CUDA toolkit (libdevice) found")
def test_libdevice_is_internalised() -> None:
    ast, _ = _one_kernel(lambda a: tg.numpy.sin(a) * tg.numpy.arctan2(a, 2.0), f32(64))
    ptx = ptx_of(ast)[0]
    # libdevice's ~350 functions linked in: only what the kernel calls is left, inlined into it
    assert ".extern" not in ptx and ".func" not in ptx and ptx.count(".entry") == 1
    assert len(ptx) < 40_000, len(ptx)


def _gpu_programs() -> list:
    """Programs whose kernels take every GPU option: odd sizes (guards, masked strides), rows of several widths."""
    tnp = tg.numpy
    x, v, m, c = f32(16, 33), f32(1000), f32(7, 600), f32(16, 3, 10, 10)
    return [
        x * 2.0 + 1.0, tnp.sin(x) + x.T.T, f32(256, 256) * 3.0, v.sum(), x.sum(axis=0), x.sum(axis=1), m.max(axis=1),
        tnp.argmax(m, axis=1), (m > 1.0).any(axis=1),
        (m * 2).astype(tg.dtypes.int32).astype(tg.dtypes.float16).sum(axis=1),   # exact in float16 in any order
        (m * 100).astype(tg.dtypes.int32).sum(axis=1), tg.nn.softmax(m, axis=-1), tg.nn.log_softmax(x, axis=0),
        (m - m.mean(axis=1, keepdims=True)) / tnp.sqrt(m.var(axis=1, keepdims=True) + 1e-5),
        f32(8, 100) @ f32(100, 12), f32(40, 3) @ f32(3, 50), f32(256, 64) @ f32(64, 1024), tnp.cumsum(x, axis=1),
        tg.lax.conv(f32(2, 3, 10, 10), f32(4, 3, 3, 3), (1, 1), "SAME"), f32(3, 5, 7, 9).sum(axis=(1, 3)),
        -(tg.nn.log_softmax(m, axis=1) * (m > 0)).sum(axis=1).mean(),   # rows' reduces inside one over the rows
        # a convolution's kernel gradient: a block for each of its four output axes' rows, the fourth sharing z
        tg.grad(lambda k: (tg.lax.conv(c, k, (1, 1), "SAME") ** 2).sum())(f32(4, 3, 3, 3)),
    ]


def _with_gpu_options(programs: Callable[[], list], seed: int) -> tuple[list, list, list]:
    """`programs` run twice on the same inputs (module `rng` from `seed`), with the CPU's kernels and with every kernel
    taking the GPU's options for an H200, its thread ids turned back into loops (`thread_loops`), run on the CPU:
    (the CPU's results, the GPU options' results, the options applied)."""
    from tgfx.lowering.optimize_gpu import optimize_gpu, thread_loops
    state = np.random.default_rng(seed).bit_generator.state   # the same inputs whatever ran before
    orig = lowering.lower_kernel
    applied: list = []

    def hook(ast, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        sink, opts = optimize_gpu(lowering.index_level(ast, pieces=False), GPU_DEFAULT)
        applied.extend(opts)
        return orig(thread_loops(sink), *a, **k)
    results = []
    for gpu in (False, True):
        rng.bit_generator.state = state
        lowering.forget_compiled()
        lowering.lower_kernel = hook if gpu else orig
        try:
            results.append([np.asarray(o.numpy()) for o in programs()])
        finally:
            lowering.lower_kernel = orig
            lowering.forget_compiled()
    return results[0], results[1], applied


def test_gpu_options_compute_what_the_cpu_does() -> None:
    """Every kernel with the GPU's options, its thread ids turned back into loops (`thread_loops`), run on the CPU:
    the results are those of the CPU's own kernels."""
    want, got, applied = _with_gpu_options(_gpu_programs, 1)
    assert {o.op for o in applied} >= {"GLOBAL", "LOCAL", "GROUP", "UPCAST"}
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"program {i}")


def test_every_kernel_with_gpu_options_computes_what_the_cpu_does() -> None:
    """The op suite's kernels (`_programs`, float64 and int64 too) with the GPU's options for an H200, their thread
    ids turned back into loops, run on the CPU: every result is the CPU kernels' (integers and booleans exactly,
    floats within the rounding of a reduce's other order)."""
    with tg.Context(TGFX_ENABLE_X64=1):
        want, got, applied = _with_gpu_options(_programs, 2)
    assert {o.op for o in applied} >= {"GLOBAL", "LOCAL", "GROUP", "UPCAST"}
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"result {i}"
        if g.dtype.kind == "f" and g.dtype.itemsize >= 4:
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=f"result {i}")
        elif g.dtype.kind == "f":   # float16 / bfloat16 (as float32): a sum's order moves it by its rounding
            np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=1e-2, atol=1e-2,
                                       err_msg=f"result {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"result {i}")


def test_contraction_gets_a_register_tile_with_vector_loads() -> None:
    # a reduce shorter than TLB_PAGES: the CPU schedule does not pack b into panels first (operands._packed_operand);
    # outputs enough for a whole tile a thread to fill the GPU (`GPUTarget.fill_threads`)
    ast, _ = _one_kernel(lambda a, b: a @ b, f32(1024, 32), f32(32, 2048))
    ir, name, dims, opts = kernel_ir(ast)
    lanes, rows = GPU_DEFAULT.contraction_tile()
    assert [o for o in opts if o.op == "UPCAST"] == [Opt("UPCAST", 1, lanes), Opt("UPCAST", 0, rows)]
    assert math.prod(dims.grid) * math.prod(dims.block) * lanes * rows == 1024 * 2048
    ptx = ptx_of(ast)[0]
    assert ptx.count("ld.global.nc.v4") >= 1 and ptx.count("st.global.v4") == rows


def test_unroll_on_the_gpu_is_lane_copies() -> None:
    """The NVPTX renderer has no vector ranges: an UNROLL (a BEAM candidate on the GPU) replicates the reduce per lane
    where the CPU's makes its lanes a vector range."""
    from tgfx.lowering.optimize_gpu import apply_gpu_opt
    ast, _ = _one_kernel(lambda a: a.sum(-1), f32(64, 32))
    sink = apply_gpu_opt(lowering.index_level(ast), Opt("UNROLL", 1, 4))
    assert not any(u.op is Ops.RANGE and u.arg[1] == "vector" for u in sink.toposort())
    assert len([u for u in sink.toposort() if u.op is Ops.REDUCE]) == 4


def test_a_fourth_output_axis_shares_an_axis_of_blocks() -> None:
    """A convolution's four output axes on a grid of three: GLOBAL(axis, 1) past the third shares the last axis (its
    index the remainder and quotient of both), computing what the CPU does; a padded axis cannot be shared, nor can
    a fourth axis take threads."""
    from tgfx.lowering.kernel_opts import KernelOptError
    from tgfx.lowering.optimize_gpu import optimize_gpu, thread_loops
    x, w = f32(2, 3, 10, 10), f32(4, 3, 3, 3)
    ast, out = _one_kernel(lambda a, b: tg.lax.conv(a, b, (1, 1), "SAME"), x, w)
    opts = [Opt("GLOBAL", 3, 16), Opt("GLOBAL", 2, 2), Opt("GLOBAL", 1, 1), Opt("GLOBAL", 0, 1)]
    sink, _ = optimize_gpu(lowering.index_level(ast, pieces=False), GPU_DEFAULT, opts)
    _, name, dims, _ = kernel_ir(ast, opts=opts)
    assert dims.grid == (1, 5, 4 * 2) and dims.block == (16, 2, 1)
    assert not any(u.op is Ops.RANGE and u.arg[1] == "loop" for u in sink.toposort())   # each thread one output
    # the last axis may have threads too when they divide it: the fourth axis's index is then the quotient
    shared = [*opts[:2], Opt("GLOBAL", 1, 2), Opt("GLOBAL", 0, 1)]
    assert kernel_ir(ast, opts=shared)[2].grid == (1, 5, 4) and kernel_ir(ast, opts=shared)[2].block == (16, 2, 2)
    orig = lowering.lower_kernel
    for taken in (opts, shared):
        seen = []

        def hook(a, *args, taken=taken, seen=seen, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
            seen.append(a)
            return orig(thread_loops(optimize_gpu(lowering.index_level(a, pieces=False), GPU_DEFAULT, taken)[0]),
                        *args, **k)
        lowering.forget_compiled()
        lowering.lower_kernel = hook
        try:
            got = tg.lax.conv(x, w, (1, 1), "SAME").numpy()
        finally:
            lowering.lower_kernel = orig
            lowering.forget_compiled()
        assert len(seen) == 1
        np.testing.assert_allclose(got, out.numpy(), rtol=1e-6, atol=1e-6, err_msg=str(taken))
    for bad, why in (([*opts[:2], Opt("GLOBAL", 1, 3), Opt("GLOBAL", 0, 1)], "padded"),
                     ([*opts[:3], Opt("GLOBAL", 0, 2)], "three axes are taken")):
        with pytest.raises(KernelOptError, match=why):
            optimize_gpu(lowering.index_level(ast, pieces=False), GPU_DEFAULT, bad)


def test_a_convolutions_kernel_gradient_is_a_block_a_tap_and_channel_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    # a row kernel (a reduce over the batch and the image a block, GROUP) with four output axes: each a grid axis of
    # blocks, the fourth sharing z; none a loop in every thread. (Scheduled as for a GPU: the CPU's schedule splits
    # such a sum over its cores first, `split_reduce`; a GPU's groups it in a block.)
    from tgfx.lowering import schedule
    monkeypatch.setattr(schedule, "split_reduces", lambda roots, target: roots)
    schedule._templates.clear()
    x, k = f32(32, 3, 10, 10), f32(4, 3, 3, 3)   # a batch of a warp: a block's threads share it
    asts, _ = _lowered(tg.grad(lambda k: (tg.lax.conv(x, k, (1, 1), "SAME") * x[:, :1]).sum()), k)
    grads = [kernel_ir(ast)[2:] for ast in asts if ast.src[0].src[0].arg[1] == k.size]
    grads = [(dims, opts) for dims, opts in grads if any(o.op == "GROUP" for o in opts)]
    assert len(grads) == 1, grads
    dims, opts = grads[0]
    assert [o.op for o in opts].count("GLOBAL") == 4, opts
    assert math.prod(dims.grid) == k.size and dims.block == (32, 1, 1), dims   # a block an output
    # its threads split the batch, rows and columns together (one range: adjacent threads on adjacent columns),
    # not the batch alone (each thread's reads a whole image from its neighbour's)
    from tgfx.lowering.optimize_gpu import optimize_gpu
    (ast,) = [a for a in asts if a.src[0].src[0].arg[1] == k.size and "GROUP" in str(kernel_ir(a)[3])]
    sink, _ = optimize_gpu(lowering.index_level(ast, pieces=False), GPU_DEFAULT)
    assert [u.src[0].arg for u in sink.toposort() if u.op is Ops.RANGE and u.arg[1] == "reduce"] == [32 * 10 * 10 // 32]


def test_a_register_tiles_unrolled_lanes_are_fma_chains_of_16_byte_row_loads() -> None:
    """The GPU's contraction tile unrolls its reduce by a vector's lanes, summed in each accumulator: a 4 x 8 tile's
    four steps read each of its eight rows once, 16 bytes at a time, beside the other operand's four vectors, for
    128 FMAs chained in the tile's 32 registers (not 32 scalar row loads for them, nor 128 partial registers).
    (Without shared tiles, `GPU_SMEM=0`: with them the tile reads its steps from shared memory, test_gpu_shared.py.)"""
    ast, _ = _one_kernel(lambda a, b: a @ b, f32(1024, 64), f32(64, 2048))
    with tg.Context(GPU_SMEM=0):
        _, _, _, opts = kernel_ir(ast)
        ptx = ptx_of(ast)[0]
    assert Opt("UNROLL", 2, 4) in opts, opts
    loop = ptx[ptx.index("$L__BB0_"):]
    loop = loop[:loop.index("bra")]
    assert loop.count("fma.rn.f32") == 128 and loop.count("ld.global.nc.v4") == 12, loop
    assert loop.count("ld.global") == 12 and "add.f32" not in loop


@pytest.mark.parametrize("op", ["sum", "max", "prod"])
def test_a_chained_update_combines_every_term_into_the_register(op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`chained_update` (the GPU renderer's) rendered by the CPU's renderer and run: a reduce of `a op b` updates its
    register by `(acc op a) op b`, every term once, for sums, maxima and products."""
    from tgfx.lowering.render_llvm import LLVMRenderer
    chains: list = []
    real = LLVMRenderer.chained_update
    monkeypatch.setattr(LLVMRenderer, "chain_updates", True)
    monkeypatch.setattr(LLVMRenderer, "chained_update", lambda self, u: (chains.append(u), real(self, u))[1])
    a, b, c = (rng.uniform(0.5, 1.5, (6, 40)).astype(np.float32) for _ in range(3))
    fn = {"sum": (lambda x, y, z: (x + y + z).sum(axis=1), lambda x, y, z: (x + y + z).sum(axis=1)),
          "max": (lambda x, y, z: tg.numpy.maximum(tg.numpy.maximum(x, y), z).max(axis=1),
                  lambda x, y, z: np.maximum(np.maximum(x, y), z).max(axis=1)),
          "prod": (lambda x, y, z: (x * y * z).prod(axis=1), lambda x, y, z: (x * y * z).prod(axis=1))}[op]
    lowering.forget_compiled()
    with tg.Context(NOOPT=1):   # plain loops: the update is the renderer's scalar one
        got = fn[0](cpu(a), cpu(b), cpu(c)).numpy()
    lowering.forget_compiled()
    assert chains and all(len(u.src[1].src) == 2 and u.src[1].src[0].op is u.op for u in chains), chains
    np.testing.assert_allclose(got, fn[1](a, b, c), rtol=1e-5)


def test_a_convolutions_tile_blocks_output_channels_beside_image_columns() -> None:
    """A convolution's register tile: a vector's lanes along the image row, its rows along the output channels (each
    image load serves every channel of the tile, each weight every lane), not along image rows (whose loads are each
    their own): on sm_90 its inner loop does 2.5 FMAs a load or more (it did 32 FMAs for 33 loads)."""
    ast, _ = _one_kernel(lambda a, b: tg.lax.conv(a, b, (1, 1), "SAME"), f32(32, 64, 32, 32), f32(64, 64, 3, 3))
    _, _, _, opts = kernel_ir(ast)
    lanes, rows = GPU_DEFAULT.contraction_tile()
    assert [o for o in opts if o.op == "UPCAST"] == [Opt("UPCAST", 3, lanes), Opt("UPCAST", 1, rows)], opts
    ptx = ptx_of(ast)[0]
    first_back = ptx.index("bra")   # the innermost loop: from the last label before the first branch back
    inner = ptx[ptx.rindex("$L__BB0_", 0, first_back):first_back]
    assert inner.count("fma.rn.f32") >= 2.5 * inner.count("ld.global"), inner


def test_a_contraction_without_a_tile_reads_its_rows_16_bytes_at_a_time() -> None:
    """A batch of 128 through a layer of 512 has too few outputs for register tiles (a thread an output): its reduce
    is unrolled by a vector's lanes all the same, each row's four values one 16-byte load (2 loads an FMA were 1.25)."""
    ast, _ = _one_kernel(lambda a, b: a @ b, f32(128, 784), f32(784, 512))
    _, _, _, opts = kernel_ir(ast)
    assert Opt("UNROLL", 2, 4) in opts and not any(o.op == "UPCAST" for o in opts), opts
    ptx = ptx_of(ast)[0]
    first_back = ptx.index("bra")
    inner = ptx[ptx.rindex("$L__BB0_", 0, first_back):first_back]
    assert "ld.global.nc.v4" in inner and inner.count("ld.global") <= 1.25 * inner.count("fma.rn.f32"), inner
