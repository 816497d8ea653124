"""The CPU target description (tgfx/devices/target.py): what it reads from the machine and from LLVM, the kernel
options it gives, and that code chosen and compiled for one target never stands in for another's."""
from __future__ import annotations

import re
from dataclasses import replace

import llvmlite.binding as llvm
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import config
from tgfx.devices import target
from tgfx.devices.target import Target, check_runnable, host_target, native_target, read_caches, target_for
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import index_level, render_kernel
from tgfx.lowering.compile import cache_key, compile_llvm, compile_workers, compiler, optimized_ir, target_machine
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.inline import inline
from tgfx.lowering.kernel_opts import Opt
from tgfx.lowering.optimize import apply_hand_coded, opt_mode
from tgfx.lowering.schedule import schedule

AVX2, AVX512 = "haswell", "skylake-avx512"
HOST_AVX512 = "avx512f" in native_target().enabled
needs_avx512 = pytest.mark.skipif(not HOST_AVX512, reason="this host has no AVX-512: code for it cannot run here")


def on_cpu(x: np.ndarray) -> tg.Tensor:
    """`x` on the CPU, whatever the default device (`-p tests.emulated_cuda` makes it CUDA:0): these are
    the CPU targets' kernels."""
    return tg.asarray(x, device="CPU")


def matmul_ast(m: int, k: int, n: int, cpu: str = "") -> UOp:
    """The kernel of `a @ b` as scheduled for `cpu` (default: this machine's), the last: a b whose panels span many
    pages is packed first, in panels as wide as that CPU's tile."""
    rng = np.random.default_rng(0)
    a, b = (on_cpu(rng.standard_normal(s).astype(np.float32)) for s in ((m, k), (k, n)))
    sink = inline(UOp(Ops.SINK, None, ((a @ b).uop,)))
    with config.Context(TGFX_CPU=cpu):
        *_, call = schedule(list(sink.src))[0].src
    assert any(u.op is Ops.REDUCE_AXIS for u in call.src[0].toposort())
    return call.src[0]


def vector_widths(ir: str) -> set[int]:
    """The float vector widths in (optimised) LLVM IR."""
    return {int(n) for n in re.findall(r"<(\d+) x float>", ir)}


# ---- the same kernel for two classes of CPU ----
def test_the_same_kernel_gets_each_targets_vector_width():
    ast = matmul_ast(64, 64, 128)
    widths, opts, fmas = {}, {}, {}
    for cpu in (AVX2, AVX512):
        t = target_for(cpu)
        sink, opts[cpu] = apply_hand_coded(index_level(ast), t)
        ir, _, _ = render_kernel("k", sink, opts[cpu], t)
        widths[cpu] = vector_widths(optimized_ir(ir, t))
        mod = llvm.parse_assembly(ir)
        compiler().optimize(mod, t)
        fmas[cpu] = set(re.findall(r"vfmadd\w*\s+%([xyz])mm", target_machine(t).emit_assembly(mod)))
    # the register tile: two vectors by as many rows as the registers hold (16 registers with AVX2: 6 rows, the 64
    # padded to 66; 32 with AVX-512: 8); a row of it is one vector of two registers' lanes in the IR, each FMA one
    # register's in the machine code
    assert [o for o in opts[AVX2] if o.op in ("UPCAST", "PADTO")] == [Opt("UPCAST", 1, 16), Opt("PADTO", 0, 6),
                                                                      Opt("UPCAST", 0, 6)]
    assert [o for o in opts[AVX512] if o.op == "UPCAST"] == [Opt("UPCAST", 1, 32), Opt("UPCAST", 0, 8)]
    assert max(widths[AVX2]) == 16 and max(widths[AVX512]) == 32
    assert fmas[AVX2] == {"y"} and fmas[AVX512] == {"z"}


@pytest.mark.parametrize("cpu", [AVX2, pytest.param(AVX512, marks=needs_avx512), "x86-64"])
def test_tgfx_cpu_compiles_for_that_cpu_and_runs_right(cpu):
    # x86-64: the baseline (SSE2, 16-byte vectors, no FMA) every x86-64 machine runs
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((96, 80)).astype(np.float32), rng.standard_normal((80, 200)).astype(np.float32)
    tg.counters.reset()
    with config.Context(TGFX_CPU=cpu):
        assert host_target().cpu == cpu
        got = (on_cpu(a) @ on_cpu(b)).numpy()
        soft = tg.nn.softmax(on_cpu(b), axis=-1).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=2e-5, atol=2e-5)
    e = np.exp(b - b.max(-1, keepdims=True))
    np.testing.assert_allclose(soft, e / e.sum(-1, keepdims=True), rtol=2e-5, atol=1e-7)
    assert tg.counters.compile_count >= 2   # compiled for this target, none reused from another


def test_avx2_tiles_are_six_rows_tall_padding_the_rows_when_it_costs_little():
    """With AVX2's 16 registers a contraction's tile is 16 x 6 (12 accumulators beside the operands; 16 x 4 left the
    FMA units no slack: the AVX2 class's 1024^3 matmul 211 -> 237 GFLOP/s). Rows that 6 does not divide are padded
    (masked) when that adds at most 1/32 of them (100 -> 102; not 10 -> 12), and not when the padded blocks would
    split over fewer threads than the power-of-two tile's (256 rows on 96 cores). AVX-512's tile stays 32 x 8."""
    assert target_for(AVX2).padded_tile_rows() == 6 and target_for(AVX512).padded_tile_rows() == 8
    for (m, k, n), want in (((100, 64, 128), [Opt("UPCAST", 1, 16), Opt("PADTO", 0, 6), Opt("UPCAST", 0, 6)]),
                            ((96, 64, 128), [Opt("UPCAST", 1, 16), Opt("UPCAST", 0, 6)]),
                            ((10, 64, 128), [Opt("UPCAST", 1, 16), Opt("UPCAST", 0, 2)])):
        opts = hand_coded_opts(index_level(matmul_ast(m, k, n, AVX2)), target_for(AVX2).with_cores(1))
        assert opts == want, (m, opts)
    many = hand_coded_opts(index_level(matmul_ast(256, 256, 384, AVX2)), target_for(AVX2).with_cores(96))
    assert Opt("UPCAST", 0, 4) in many and not any(o.op == "PADTO" for o in many)
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((100, 64)).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)
    with config.Context(TGFX_CPU=AVX2):
        got = (on_cpu(a) @ on_cpu(b)).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=2e-5, atol=2e-5)


def _product_on_each_class(m: int, k: int, n: int, seed: int) -> None:
    """An (m, k) @ (k, n) product compiled for each CPU class this host runs (AVX2, and AVX-512 where it has it) is
    numpy's in float64, within float32's rounding."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    for cpu in (AVX2, AVX512) if HOST_AVX512 else (AVX2,):
        with config.Context(TGFX_CPU=cpu):
            got = (on_cpu(a) @ on_cpu(b)).numpy()
        np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_the_best_tile_pads_an_axis_it_splits_by_little_before_a_narrower_one_splits_it():
    """1000 columns (8 x 125) take each class's two-vector tile padded (AVX2 to 1008, AVX-512 to 1024: at most a
    `TILE_PAD_SHARE` of them), not a one-vector tile that splits them, whose 2 (AVX2) or 4 (AVX-512) accumulators left
    the FMA units waiting on their own results: a 1000^3 matmul ran at a quarter of 1024^3's GFLOP/s (one thread,
    alternated: AVX2 10-16 -> 36-41, AVX-512 18-20 -> 40-55). An axis the tile would pad by more (24, 40 or 200
    columns) keeps the tile that splits it, unless a tile of one whole vector pads it by little (AVX-512's 200)."""
    from tgfx.lowering.heuristics import TILE_PAD_SHARE
    for cpu, (lanes, rows) in ((AVX2, (16, 6)), (AVX512, (32, 8))):
        t = target_for(cpu).with_cores(1)
        assert (1024 - 1000 if cpu == AVX512 else 1008 - 1000) <= 1000 // TILE_PAD_SHARE
        for m in (1000, 64):
            opts = hand_coded_opts(index_level(matmul_ast(m, 256, 1000, cpu)), t)
            assert opts[:2] == [Opt("PADTO", 1, lanes), Opt("UPCAST", 1, lanes)] and \
                Opt("UPCAST", 0, rows) in opts, (cpu, m, opts)
        for n in (24, 40, 200):
            opts = hand_coded_opts(index_level(matmul_ast(64, 256, n, cpu)), t)
            if cpu == AVX512 and n == 200:
                # one whole vector padded by at most VECTOR_PAD_SHARE (to 208) before half a vector that splits it
                # (one core, 64 x 256 @ 256 x 200: 64.9 -> 58.2 us)
                assert opts[:2] == [Opt("PADTO", 1, 16), Opt("UPCAST", 1, 16)], opts
                continue
            assert not any(o.op == "PADTO" for o in opts) and opts[0].op == "UPCAST" and opts[0].axis == 1 and \
                n % opts[0].amount == 0 and opts[0].amount < lanes, (cpu, n, opts)
    _product_on_each_class(100, 300, 1000, seed=5)


def test_a_tile_one_vector_wide_keeps_the_fma_units_busy_on_both_classes():
    """A tile of one vector (or half of one), for an output axis the two-vector tile does not split, has as many
    rows as keep the FMA units busy (`FMA_CHAINS`, 8) on AVX2's 16 registers as on AVX-512's 32, not half the full
    tile's rows (AVX2 8 x 2 and 4 x 2, AVX-512 16 x 4 and 8 x 4: 2 or 4 accumulators, each FMA waiting on its own
    last result). One thread, alternated with the build before on this loaded host: 512 x 512 @ 512 x 40 AVX2 31-32 ->
    86-87 GFLOP/s (numpy 89-93), AVX-512 54-55 -> 78-87; 256 x 256 @ 256 x 24 AVX2 28-32 -> 76-77, AVX-512 47-49 ->
    73-78; a classifier's 10 classes (128 x 1024 @ 1024 x 10, AVX-512) 48-51 -> 32-33 us."""
    assert target_for(AVX2).contraction_tiles() == ((16, 4), (8, 8), (4, 8))
    assert target_for(AVX512).contraction_tiles() == ((32, 8), (16, 8), (8, 8))
    for cpu in (AVX2, AVX512):
        t = target_for(cpu).with_cores(1)
        assert t.narrow_tile_rows() == target.FMA_CHAINS
        opts = hand_coded_opts(index_level(matmul_ast(512, 512, 40, cpu)), t)
        assert opts[:2] == [Opt("UPCAST", 1, 8), Opt("UPCAST", 0, 8)], (cpu, opts)
    opts = hand_coded_opts(index_level(matmul_ast(128, 1024, 10, AVX512)), target_for(AVX512).with_cores(1))
    assert opts == [Opt("PADTO", 1, 16), Opt("UPCAST", 1, 16), Opt("UPCAST", 0, 8)], opts
    _product_on_each_class(96, 512, 40, seed=6)


def test_panels_go_outside_the_row_blocks_when_b_outgrows_half_of_l2(monkeypatch):
    """A register-tiled contraction walks B's panels outside the tile's row blocks (SWAP) when B does not fit half of
    L2, so each panel stays in L2 while the row blocks pass it (Emerald Rapids' 2 MB L2 and a 4 MB B: 112 -> 155
    GFLOP/s); where B fits, rows stay outside. The L2 size is the target's, not this machine's."""
    sink = index_level(matmul_ast(256, 512, 1024, AVX512))   # B: 2 MB
    t = target_for(AVX512).with_cores(1)
    small, big = replace(t, l2=1 << 20), replace(t, l2=8 << 20)
    assert hand_coded_opts(sink, small) == [Opt("UPCAST", 1, 32), Opt("UPCAST", 0, 8), Opt("SWAP", 0, 1)]
    assert hand_coded_opts(sink, big) == [Opt("UPCAST", 1, 32), Opt("UPCAST", 0, 8)]
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((96, 512)).astype(np.float32), rng.standard_normal((512, 1024)).astype(np.float32)
    native = native_target()
    monkeypatch.setattr(target, "native_target", lambda: replace(native, l2=1 << 20))
    with config.Context(TGFX_CPU=""):
        assert host_target().l2 == 1 << 20
        got = (on_cpu(a) @ on_cpu(b)).numpy()   # (96 rows: 12 blocks of 8 pass each of 32 panels)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)   # sums of 512 float32s


def test_a_kernel_compiled_for_one_target_is_not_used_for_another():
    x = on_cpu(np.arange(4096, dtype=np.float32).reshape(64, 64))
    with config.Context(TGFX_CPU=""):   # this machine's own
        (x @ x).numpy()
    tg.counters.reset()
    with config.Context(TGFX_CPU=AVX2 if native_target().cpu != AVX2 else "x86-64"):
        (x @ x).numpy()
    assert tg.counters.compile_count == 1   # the in-memory kernel (this machine's) was not taken
    with config.Context(TGFX_CPU=""):
        (x @ x).numpy()
    assert tg.counters.compile_count == 1   # and this machine's is still there


def test_cache_keys_differ_by_target():
    avx2, avx512 = target_for(AVX2), target_for(AVX512)
    assert cache_key("k|hand", avx2) != cache_key("k|hand", avx512)
    assert cache_key("k|hand", avx2) != cache_key("k|hand", avx2.with_cores(avx2.cores + 1))
    assert cache_key("k|hand", avx2) != cache_key("k|hand", replace(avx2, l2=avx2.l2 * 2))
    assert cache_key("k|hand", avx2) == cache_key("k|hand", target_for(AVX2))
    assert opt_mode(None, avx2) != opt_mode(None, avx512)
    assert opt_mode([Opt("UPCAST", 0, 4)], avx2) != opt_mode([Opt("UPCAST", 0, 4)], avx512)


def test_the_compile_worker_compiles_for_the_target_it_is_sent():
    if not compile_workers():
        pytest.skip("no compile worker on a one-core machine")
    ast = matmul_ast(16, 32, 64)
    t = target_for(AVX2)
    sink, opts = apply_hand_coded(index_level(ast), t)
    ir, _, _ = render_kernel("k_worker", sink, opts, t)
    with compiler().busy:   # this process busy: the compile goes to the worker
        there = compile_llvm(ir, target=t)
    assert there == compiler().compile(ir, t)
    if HOST_AVX512:   # and not what this machine's own target gives
        assert there != compiler().compile(ir, native_target())


# ---- the override flag ----
def test_tgfx_cpu_names_another_cpu_and_keeps_this_machines_cores_and_caches():
    with config.Context(TGFX_CPU="znver3"):
        t = host_target()
    native = native_target()
    assert (t.cpu, t.vector_bytes, t.vector_registers, t.fma) == ("znver3", 32, 16, True)
    assert (t.cores, t.l1d, t.l2, t.l3) == (native.cores, native.l1d, native.l2, native.l3)
    with config.Context(TGFX_CPU=""):
        assert host_target() is native
    with config.Context(TGFX_CPU=native.cpu):
        assert host_target() is native
    assert target_for("x86-64").vector_bytes == 16 and not target_for("x86-64").fma


def test_an_unknown_cpu_name_is_an_error_that_names_the_flag():
    with config.Context(TGFX_CPU="znver33"), pytest.raises(ValueError, match=r"TGFX_CPU='znver33'.*znver3"):
        host_target()


def kernel_parts(expr: tg.Tensor) -> tuple[int, ...]:
    """The parts each kernel of `expr` is split into over the cores (its global size), as scheduled for the target
    the flags give now."""
    from tgfx.lowering import kernel_source
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (expr.uop,))).src))
    return tuple(kernel_source(c.src[0], host_target()).global_size for c in linear.src if c.src[0].op is Ops.SINK)


@pytest.mark.parametrize("cpu", [AVX2, pytest.param(AVX512, marks=needs_avx512)])
def test_tgfx_cores_describes_a_many_core_machine_whose_splits_scale_with_it(cpu):
    """`TGFX_CORES=64` describes a 64-core server of the class TGFX_CPU names: every split over cores is chosen for
    64 of them, while this host's own threads claim the parts and run them. A 1024^3 matmul's row blocks, the split-K
    parts of `x.T @ y` of (65536, 8) and of a full sum of 4M floats: on 2 cores 8 parts each (`CHUNKS_PER_CORE` a
    core); on 64 a multiple of 64, up to 4 a core (the matmul's 1024 rows in blocks of the tile's rows: 128 of 8
    with AVX-512, 256 of 4 with AVX2, whose 6-row tile would split unevenly), and the partial sums' sum one part."""
    rng = np.random.default_rng(4)
    a, x = rng.standard_normal((1024, 1024)).astype(np.float32), rng.standard_normal((65536, 8)).astype(np.float32)
    big = rng.standard_normal((4096, 1024)).astype(np.float32)
    ta, tx, tbig = on_cpu(a), on_cpu(x), on_cpu(big)
    cases = {"matmul": lambda: ta @ ta, "x.T @ x": lambda: tx.T @ tx, "sum": lambda: tbig.sum()}
    parts = {}
    for cores in (2, 64):
        with config.Context(TGFX_CPU=cpu, TGFX_CORES=cores):
            t = host_target()
            assert (t.cpu, t.cores, t.l2) == (cpu, cores, native_target().l2)
            parts[cores] = {name: kernel_parts(f()) for name, f in cases.items()}
    assert parts[2] == {"matmul": (8,), "x.T @ x": (8, 1), "sum": (8, 1)}
    assert parts[64]["matmul"] == ((128,) if cpu == AVX512 else (256,))
    for name in ("x.T @ x", "sum"):
        first, rest = parts[64][name]
        assert first % 64 == 0 and 64 <= first <= 64 * target.CHUNKS_PER_CORE and rest == 1, (name, parts[64])
    with config.Context(TGFX_CPU=cpu, TGFX_CORES=64):   # 256 parts on this host's threads: numpy's results
        got = [f().numpy() for f in cases.values()]
    np.testing.assert_allclose(got[0], a.astype(np.float64) @ a, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got[1], x.T.astype(np.float64) @ x, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(got[2], big.astype(np.float64).sum(), rtol=1e-4, atol=1e-1)


def test_a_jitted_function_compiles_again_for_another_core_count_and_bad_counts_name_the_flag():
    f = tg.jit(lambda a: a @ a)
    a = on_cpu(np.ones((256, 256), np.float32))
    f(a).numpy()
    tg.counters.reset()
    with config.Context(TGFX_CORES=64):
        assert float(f(a).numpy()[0, 0]) == 256.0
    assert tg.counters.compile_count >= 1   # its split chosen for 64 cores: not the program compiled for this host's
    for bad in ("many", -4, 2.5):
        with config.Context(TGFX_CORES=bad), pytest.raises(ValueError, match=rf"TGFX_CORES={bad!r}.*whole number"):
            host_target()


def test_code_for_a_cpu_this_machine_lacks_is_refused_before_it_runs(monkeypatch):
    haswell_machine = replace(native_target(), cpu=AVX2, features=target.cpu_features(AVX2))
    monkeypatch.setattr(target, "native_target", lambda: haswell_machine)
    check_runnable(target_for(AVX2))
    with pytest.raises(RuntimeError, match=r"TGFX_CPU='skylake-avx512' compiles for avx512f, which this machine"):
        check_runnable(replace(haswell_machine, cpu=AVX512, features=target.cpu_features(AVX512)))


# ---- what the machine says ----
def write_cache(root, index: int, level: str, kind: str, size: str) -> None:  # noqa: ANN001
    d = root / f"index{index}"
    d.mkdir()
    (d / "level").write_text(level + "\n")
    (d / "type").write_text(kind + "\n")
    (d / "size").write_text(size + "\n")


def test_cache_sizes_are_read_from_sysfs(tmp_path):
    write_cache(tmp_path, 0, "1", "Data", "48K")
    write_cache(tmp_path, 1, "1", "Instruction", "32K")
    write_cache(tmp_path, 2, "2", "Unified", "2048K")
    write_cache(tmp_path, 3, "3", "Unified", "96M")
    assert read_caches(tmp_path) == {"l1d": 48 << 10, "l2": 2 << 20, "l3": 96 << 20}


def test_missing_or_garbled_cache_levels_fall_back(tmp_path):
    write_cache(tmp_path, 0, "1", "Data", "lots")
    write_cache(tmp_path, 1, "2", "Unified", "512K")
    (tmp_path / "index2").mkdir()   # no files
    assert read_caches(tmp_path) == {**target.FALLBACK_CACHES, "l2": 512 << 10}
    assert read_caches(tmp_path / "absent") == target.FALLBACK_CACHES


# ---- the options it gives ----
def test_register_tiles_fit_the_register_file():
    for cpu in (AVX2, AVX512, "x86-64"):
        t = target_for(cpu)
        for vec, rows in t.contraction_tiles():
            accumulators = -(-vec // t.lanes()) * rows
            assert accumulators + target.OPERAND_REGISTERS <= t.vector_registers
        assert t.max_tile_lanes() == max(v * r for v, r in t.contraction_tiles())
    assert target_for(AVX512).contraction_tiles()[0] == (32, 8)
    assert target_for(AVX2).contraction_tiles()[0] == (16, 4)
    assert target_for(AVX512).contraction_tiles(8)[0] == (16, 8)   # float64: half the lanes


def test_threads_split_evenly_and_only_when_the_work_pays():
    t = Target("znver3", "+avx,+avx2,+fma", cores=96)
    per_thread = t.min_thread_work()
    assert t.threads(per_thread - 1) == 1 and t.threads(10 * per_thread) == 10
    # work for more parts than cores: up to CHUNKS_PER_CORE a core, each at least a thread's share, so that a core
    # slowed by something else claims fewer of them
    assert t.threads(10 ** 9) == 96 * target.CHUNKS_PER_CORE and t.threads(200 * per_thread) == 192
    assert t.thread_split(1024, 10 ** 9) == 64       # no multiple of 96 divides 1024: the most threads that do
    assert t.thread_split(96 * 4, 10 ** 9) == 384 and t.thread_split(96 * 6, 10 ** 9) == 288   # a multiple of 96
    two = t.with_cores(2)
    assert two.thread_split(12, 10 ** 9) == 6 and two.thread_split(9, 10 ** 9) == 1   # not 3: one core would take 2
    assert t.with_cores(1).threads(10 ** 9) == 1
    assert t.thread_split(1000, 3 * per_thread) == 2  # three threads' work, and 3 does not divide 1000
    assert t.thread_split(97, 10 ** 9) == 1           # a prime: no even split
    # a matmul on many cores is split over the most threads that divide a loop (on 96 cores it was not threaded at
    # all: neither loop divides by 96). With 16 x 4 tiles its loops are 256 / 4 = 64 and 384 / 16 = 24 long; 64 row
    # blocks leave a third of the cores idle, so the column blocks are split too, over the product: 64 x 6 = 384
    # parts, 4 a core (`heuristics._second_thread`)
    opts = hand_coded_opts(index_level(matmul_ast(256, 256, 384, AVX2)), target_for(AVX2).with_cores(96))
    assert opts[-2:] == [Opt("THREAD", 0, 64), Opt("THREAD", 1, 6)]
    assert hand_coded_opts(index_level(matmul_ast(256, 256, 384, AVX2)), target_for(AVX2).with_cores(64))[-1] == \
        Opt("THREAD", 0, 64)   # (on 64 cores, a row block a core: one split, as before)



def test_a_scatter_is_split_over_the_cores_not_into_more_parts():
    """Each part of a scatter's kernel walks all of its updates (`gather.collapse_scatter`): split into 4 parts a core,
    a GNN's segment sums of 5,000 edges into 1,000 x 32 nodes ran 3.7x slower. A plain kernel of the same size is."""
    rng = np.random.default_rng(0)
    idx = on_cpu(rng.integers(0, 1000, 5000).astype(np.int32))
    vals = on_cpu(rng.standard_normal((5000, 32)).astype(np.float32))
    for t in (idx, vals):
        t.realize()
    two = host_target().with_cores(2)
    kernels = [index_level(c.src[0]) for c in schedule([tnp.zeros((1000, 32)).at[idx].add(vals).uop])[0].src
               if c.src[0].op is Ops.SINK]
    scatters = [k for k in kernels if any(u.op is Ops.RANGE and u.arg[1] == "scatter" for u in k.toposort())]
    assert scatters and all(o.amount <= 2 for k in scatters for o in hand_coded_opts(k, two) if o.op == "THREAD")
    plain = index_level(schedule([tnp.exp(vals * 2.0).uop])[0].src[-1].src[0])
    assert any(o.op == "THREAD" and o.amount > 2 and o.amount % 2 == 0 for o in hand_coded_opts(plain, two))
    got = tnp.zeros((1000, 32)).at[idx].add(vals).numpy()
    want = np.zeros((1000, 32), np.float32)
    np.add.at(want, idx.numpy(), vals.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def reduce_ast(fn, shape: tuple[int, ...]) -> UOp:
    """The last kernel of `fn(x)` for an x of `shape`, as scheduled for this machine."""
    x = on_cpu(np.random.default_rng(0).random(shape).astype(np.float32))
    sink = inline(UOp(Ops.SINK, None, (fn(x).uop,)))
    return schedule(list(sink.src))[0].src[-1].src[0]


def test_a_transcendental_an_iteration_makes_a_kernel_worth_threads():
    # logsumexp's exp-sum over 256 x 200 (Sinkhorn's step): 51,200 iterations, fewer than two threads' share of plain
    # ones, but an exp's polynomial each (33 us on one core); the max over the same rows stays on one core
    two = host_target().with_cores(2)
    assert two.threads(256 * 200) == 1
    exp_sum = hand_coded_opts(index_level(reduce_ast(lambda x: tg.numpy.exp(x / 0.05).sum(1), (256, 200))), two)
    plain_sum = hand_coded_opts(index_level(reduce_ast(lambda x: (x / 0.05).sum(1), (256, 200))), two)
    assert any(o.op == "THREAD" and o.amount % 2 == 0 for o in exp_sum), exp_sum   # (parts for both cores)
    assert not any(o.op == "THREAD" for o in plain_sum), plain_sum


def test_a_loop_that_splits_unevenly_is_padded_for_the_threads():
    # Sinkhorn's other step, a column logsumexp of (f[:, None] - C) / eps: its 200 outputs as vectors of 8 are 25 of
    # them, no even split over 2 cores, so 26, one masked
    two = host_target().with_cores(2)
    ast = index_level(reduce_ast(lambda x: tg.numpy.exp((x[:, :1] - x) / 0.05).sum(0), (256, 200)))
    opts = hand_coded_opts(ast, two)
    thread = next(o for o in opts if o.op == "THREAD")
    assert Opt("PADTO", thread.axis, 2) in opts and thread.amount == 2, opts
    # and the padded kernel's results are numpy's (the masked vector writes nothing past the 200 outputs)
    x = np.random.default_rng(1).random((256, 200)).astype(np.float32)
    got = tg.jit(lambda x: tg.scipy.special.logsumexp((x[:, :1] - x) / 0.05, axis=0))(on_cpu(x)).numpy()
    want = np.log(np.exp((x[:, :1] - x).astype(np.float64) / 0.05).sum(0))
    np.testing.assert_allclose(got, want, rtol=1e-5)

def test_the_vectorised_inner_loop_is_not_padded_into_pieces_for_more_threads():
    """A many-core target does not pad an elementwise kernel's inner loop, which LLVM vectorises whole, into shares
    its vectors do not divide, for a few more threads: the digits MLP's tanh(x @ w + b) (128 x 1024, a transcendental
    an element: work for 34 of 64 AVX-512 cores) had its 1024 columns padded to 1054 in 34 parts of 31, each row of a
    part a vector and 15 scalar steps (158 us on 2 cores, against 40 for its 128 rows in 32 parts)."""
    ast = index_level(reduce_ast(lambda x: tnp.tanh(x + x[0]), (128, 1024)))
    assert hand_coded_opts(ast, target_for(AVX512).with_cores(64)) == [Opt("THREAD", 0, 32)]
    for cpu in (AVX2, AVX512):
        t = target_for(cpu)
        for cores in range(2, 129):
            opts = hand_coded_opts(ast, t.with_cores(cores))
            padded = {o.axis: o.amount for o in opts if o.op == "PADTO"}
            for o in opts:
                if o.op == "THREAD" and o.axis == 1:   # (the columns: their parts are each a whole of vectors)
                    assert -(-1024 // padded.get(1, 1)) * padded.get(1, 1) // o.amount % t.lanes() == 0, (cores, opts)
    x = np.random.default_rng(2).standard_normal((128, 1024)).astype(np.float32)
    with config.Context(TGFX_CORES=64):   # (the host's threads claim the 64 cores' parts)
        got = tg.jit(lambda x: tnp.tanh(x + x[0]))(on_cpu(x)).numpy()
    np.testing.assert_allclose(got, np.tanh(x + x[0]), rtol=2e-6, atol=1e-6)


def test_matmul_cache_blocks_fit_the_caches():
    for cpu in (AVX2, AVX512):
        t = target_for(cpu)
        nr, mr = t.contraction_tiles()[0]
        k, m, n = t.matmul_blocks()
        assert k & (k - 1) == 0 and m % mr == 0 and n % nr == 0
        assert (nr + mr) * k * 4 <= t.l1d // 2 and m * k * 4 <= max(t.l2 // 2, mr * k * 4)
        assert k * n * 4 <= max(t.l3 // 2, k * nr * 4)
    # twice the L1d, twice the depth (from a size of our own: this host's may round to the same power of two)
    small_l1, big_l1 = (replace(target_for(AVX2), l1d=size << 10) for size in (32, 64))
    assert big_l1.matmul_blocks()[0] == 2 * small_l1.matmul_blocks()[0]


def test_the_search_tries_amounts_up_to_the_targets_vectors():
    from tgfx.lowering.search import actions
    sink = index_level(matmul_ast(64, 64, 64))
    for cpu, most in ((AVX2, 8), (AVX512, 16)):
        ups = {a.amount for a in actions(sink, [], target_for(cpu)) if a.op == "UPCAST"}
        assert max(ups) == most


def test_a_convolution_tile_keeps_the_fma_units_busy_on_both_classes():
    """A direct convolution's tile is one vector wide by `conv_tile_rows` output channels: 8 independent accumulators
    (FMA_CHAINS) on AVX2 as on AVX-512 (AVX2 had 4, as many rows as a two-vector matmul tile: its FMAs waited on
    their own results). Without mask registers the padded read's mask is 32-bit lanes compared with zero, not i1
    lanes inserted one by one (which LLVM packed and widened at every use)."""
    from tgfx.devices.target import FMA_CHAINS
    from tgfx.lowering import kernel_source
    assert target_for(AVX2).conv_tile_rows() == target_for(AVX512).conv_tile_rows() == FMA_CHAINS
    x, w = on_cpu(np.ones((4, 16, 8, 8), np.float32)), on_cpu(np.ones((32, 16, 3, 3), np.float32))
    sink = UOp(Ops.SINK, None, (tg.nn.conv2d(x, w, padding=1).uop,))
    linear, _ = schedule(list(inline(sink).src))
    (ast,) = [c.src[0] for c in linear.src]
    ir = kernel_source(ast, target_for(AVX2)).ir
    assert "icmp ne <8 x i32>" in ir and not re.search(r"insertelement <8 x i1>", ir)
