"""float16/bfloat16 kernels take float32's vector options: their lanes are widened to `<W x float>` (float16's
`<W x half>` by fpext, bfloat16's `<W x i16>` bits shifted up), computed, and rounded back after every op by the
scalar's own ops on every lane (`render_llvm.to_compute` / `from_compute` with a width). Counted, never timed: the
options chosen and the vector types in the rendered IR on both x86 vector widths; and the values equal the scalar
kernel's (NOOPT) bit for bit."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import index_kernels

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices.target import Target, target_for
from tgfx.dtypes import DType, dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import render_kernel
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.optimize import apply_hand_coded

AVX512, AVX2 = "znver4", "haswell"
HALVES = [dtypes.bfloat16, dtypes.float16]
_MEM = {dtypes.bfloat16: "i16", dtypes.float16: "half"}


def _target(cpu: str) -> Target:
    return target_for(cpu).with_cores(1)


def _kernels(fn, shape: tuple[int, ...], dtype: DType) -> list[UOp]:  # noqa: ANN001
    return index_kernels(fn(tg.asarray(np.zeros(shape, np.float32)).astype(dtype).realize()))   # (a 16-bit buffer)


def _ir(sink: UOp, cpu: str) -> str:
    target = _target(cpu)
    with tg.config.Context(TGFX_CPU=cpu):
        out, applied = apply_hand_coded(sink, target)
        ir, _, _ = render_kernel("k", out, applied, target)
    return ir


def _masked_max(x: tg.Tensor) -> tg.Tensor:
    return tnp.where(tnp.tril(tnp.ones(x.shape[-2:], bool)), x, -1e4).max(-1)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("cpu,lanes", [(AVX512, 16), (AVX2, 8)])
def test_a_half_softmax_of_short_rows_takes_the_rows_as_lanes(cpu: str, lanes: int, dtype: DType) -> None:
    """A softmax over half rows of 16 takes float32's options (the rows as lanes, the row's elements as copies): its
    reads are vectors of the 16-bit type, its arithmetic vectors of float, its stores vectors of the 16-bit type, and
    no lane is taken out of a vector (the scalar kernel had no options: one element at a time)."""
    (sink,) = _kernels(lambda x: tg.nn.softmax(x, axis=-1), (256, 16), dtype)
    opts = hand_coded_opts(sink, _target(cpu))
    assert [(o.op, o.amount) for o in opts][-1] == ("UPCAST", lanes) and any(o.amount == 0 for o in opts)
    ir = _ir(sink, cpu)
    mem, vt = f"<{lanes} x {_MEM[dtype]}>", f"<{lanes} x float>"
    assert len(re.findall(rf"load {mem}", ir)) == 16 and len(re.findall(rf"store {mem}", ir)) == 16
    assert len(re.findall(rf"fdiv {vt}", ir)) == 16 and not re.search(r"fdiv float", ir)
    assert not re.search(r"extractelement <\d+ x (float|half|i16)>", ir) and "scatter" not in ir and "gather" not in ir


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("cpu,lanes", [(AVX512, 16), (AVX2, 8)])
def test_half_row_reductions_take_vector_options(cpu: str, lanes: int, dtype: DType) -> None:
    """A masked max over half rows of 32 takes the rows as lanes (its max a vector op across the row's copies); a
    sum of half rows of 32 (summed in float32, as JAX's) is vectors of partial sums, their lanes combined once: both
    float32's options."""
    (sink,) = _kernels(_masked_max, (8, 32, 32), dtype)
    opts = hand_coded_opts(sink, _target(cpu))
    assert [(o.op, o.amount) for o in opts] == [("UNROLL", 0), ("UPCAST", lanes)]
    assert opts == hand_coded_opts(_kernels(_masked_max, (8, 32, 32), dtypes.float32)[0], _target(cpu))
    ir = _ir(sink, cpu)
    assert re.search(rf"load <{lanes} x {_MEM[dtype]}>", ir) and re.search(rf"maximum\.v{lanes}f32", ir)
    (sink,) = _kernels(lambda x: x.sum(-1), (256, 32), dtype)
    (same,) = _kernels(lambda x: x.sum(-1), (256, 32), dtypes.float32)
    opts = hand_coded_opts(sink, _target(cpu))
    assert opts == hand_coded_opts(same, _target(cpu)) and [(o.op, o.amount) for o in opts][0] == ("UNROLL", lanes)
    assert re.search(rf"fadd [^\n]*<{lanes} x float>", _ir(sink, cpu))


def _bits(t: tg.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.astype(tnp.float32).numpy() if t.dtype is dtypes.bfloat16 else t.numpy()).view(
        np.uint32 if t.dtype in (dtypes.bfloat16, dtypes.float32) else np.uint16)


FUNCTIONS = {
    "softmax": lambda x: tg.nn.softmax(x, axis=-1), "log_softmax": lambda x: tg.nn.log_softmax(x, axis=-1),
    "masked_max": _masked_max, "max": lambda x: x.max(-1), "sum": lambda x: x.sum(-1),
    "layernorm": lambda x: (x - x.mean(-1, keepdims=True)) / tnp.sqrt(x.var(-1, keepdims=True) + 1e-5),
    "scaled": lambda x: x * 2 + 1, "gelu": tg.nn.gelu, "recip": lambda x: 1 / x,
    "row_scale": lambda x: x * x.max(-1, keepdims=True),
}


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_half_vector_kernels_equal_the_scalar_kernels_bit_for_bit(name: str, dtype: DType) -> None:
    """The vector kernels' values are the scalar kernel's (NOOPT: no options, one element at a time), bit for bit:
    every lane rounds back to the 16-bit type after every op, as the scalar does; with infinities, a NaN, subnormals
    and values near the type's largest among normal ones."""
    x = (np.random.default_rng(1).standard_normal((4, 16, 32)) * 3).astype(np.float32)
    x[0, 0, :6] = [np.inf, -np.inf, 1e-40, 3e-6, 65000.0, -3e38]
    x[1, 2, 5] = np.nan
    t = tg.asarray(x).astype(dtype)
    fn = FUNCTIONS[name]
    vector = tg.jit(fn)(t)
    with tg.config.Context(NOOPT=1):
        scalar = tg.jit(fn)(t)
    np.testing.assert_array_equal(_bits(vector), _bits(scalar))


def _roundings(ir: str) -> int:
    """bfloat16 rounds to nearest even in the IR: each adds 0x7FFF to the float's bits."""
    return len(re.findall(r"add (<\d+ x )?i32>? [^\n]*32767", ir))


@pytest.mark.parametrize("cpu", [AVX512, AVX2])
def test_a_bfloat16_negation_or_maximum_is_not_rounded_again(cpu: str) -> None:
    """A bfloat16 negation, or maximum of bfloat16 values (a relu's, a softmax's row maximum `-max(-x, -big)`), is a
    bfloat16 value already: its round to nearest even is left out, vector and scalar kernels alike (seven integer ops
    a lane each); a product beside them still rounds. A softmax over rows of 16 keeps 3 of its 7 roundings an
    element (its exp's argument, the exp, the division): 113 -> 50 in its kernel."""
    relu = lambda x: tnp.maximum(-x, 0.0) * 3   # noqa: E731
    (sink,) = _kernels(relu, (64, 64), dtypes.bfloat16)
    assert _roundings(_ir(sink, cpu)) == 1
    with tg.config.Context(NOOPT=1):
        assert _roundings(_ir(sink, cpu)) == 1
    (sink,) = _kernels(lambda x: tnp.maximum(x, 0.1), (64, 64), dtypes.bfloat16)   # (0.1 made a bfloat16)
    assert _roundings(_ir(sink, cpu)) == 0
    (sink,) = _kernels(lambda x: tg.nn.softmax(x, axis=-1), (256, 16), dtypes.bfloat16)
    # (and once a row, 16 rows a vector: its sum, and its maximum, taken in float32 and rounded back: `half.widen_max`)
    assert _roundings(_ir(sink, cpu)) == 3 * 16 + 2


@pytest.mark.parametrize("name", ["neg_max", "abs_by_max", "relu"])
def test_unrounded_bfloat16_negations_and_maxima_equal_numpy_rounded(name: str) -> None:
    """Their values, vector and scalar kernels, are numpy's float32 ones rounded to bfloat16 (the quiet NaN for a NaN),
    bit for bit, with infinities, a NaN and subnormals (no arithmetic on them: nothing flushed)."""
    from tgfx.dtypes import bf16_to_f32, f32_to_bf16
    fns = {"neg_max": (lambda x: -tnp.maximum(-x, -x * 0.5), lambda x: -np.maximum(-x, _bf(-x * np.float32(0.5)))),
           "abs_by_max": (lambda x: tnp.maximum(-x, x), lambda x: np.maximum(-x, x)),
           "relu": (lambda x: tnp.maximum(x, 0.0), lambda x: np.maximum(x, np.float32(0)))}
    x = (np.random.default_rng(2).standard_normal((4, 16, 32)) * 3).astype(np.float32)
    x[0, 0, :6] = [np.inf, -np.inf, 1e-40, -3e-39, 65000.0, -3e38]   # (no -0.0: numpy's maximum(0.0, -0.0) is -0.0)
    x[1, 2, 5] = np.nan
    xb = bf16_to_f32(f32_to_bf16(x))
    fn, ref = fns[name]
    with np.errstate(invalid="ignore", over="ignore"):
        want = f32_to_bf16(ref(xb))
    t = tg.asarray(x).astype(dtypes.bfloat16)
    for noopt in (0, 1):
        with tg.config.Context(NOOPT=noopt):
            got = f32_to_bf16(tg.jit(fn)(t).astype(tnp.float32).numpy())
        np.testing.assert_array_equal(got, want)


def _bf(x: np.ndarray) -> np.ndarray:
    from tgfx.dtypes import bf16_to_f32, f32_to_bf16
    return bf16_to_f32(f32_to_bf16(x))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("cpu,lanes", [(AVX512, 16), (AVX2, 8)])
def test_a_half_row_maximum_of_long_rows_takes_vectors_of_partial_maxima(cpu: str, lanes: int, dtype: DType) -> None:
    """A max over half rows of 128 (an attention's scaled scores, 128 keys) is vectors of partial maxima along the row
    (UNROLL by a vector's lanes), as float32's rows of a few vectors: its 16-bit accumulator, widened and rounded back
    each step, is no reduction LLVM's loop vectoriser takes, and the rows stayed scalar loops (30 ms for 8 x 4 x 128
    bfloat16 rows, 233 us so). The same bits as the scalar kernel's, NaN and infinities among them."""
    fn = lambda x: (x * 0.125).max(-1)   # noqa: E731
    (sink,) = _kernels(fn, (64, 128), dtype)
    assert ("UNROLL", lanes) in [(o.op, o.amount) for o in hand_coded_opts(sink, _target(cpu))]
    assert re.search(rf"maximum\.v{lanes}f32", _ir(sink, cpu))
    x = (np.random.default_rng(3).standard_normal((64, 128)) * 3).astype(np.float32)
    x[0, :3], x[1, 7], x[2, 100] = [np.inf, -np.inf, 1e-40], np.nan, -np.inf
    t = tg.asarray(x).astype(dtype)
    vector = tg.jit(fn)(t)
    with tg.config.Context(NOOPT=1):
        scalar = tg.jit(fn)(t)
    np.testing.assert_array_equal(_bits(vector), _bits(scalar))


def test_a_half_maximum_is_taken_in_float32() -> None:
    """`half.widen_max` on a bfloat16 row maximum of `-max(-x, -big)` (a softmax's): a float32 maximum of float32
    negations and maxima of the widened loads, rounded back to bfloat16 once; no bfloat16 op is left under it."""
    (sink,) = _kernels(lambda x: (-tnp.maximum(-x, -3e38)).max(-1), (8, 128), dtypes.bfloat16)
    (red,) = [u for u in sink.toposort() if u.op is Ops.REDUCE]
    assert red.dtype == dtypes.float32 and red.arg is Ops.MAX
    (cast,) = [u for u in sink.toposort() if red in u.src]
    assert cast.op is Ops.CAST and cast.dtype == dtypes.bfloat16
    under = [u for u in red.src[0].toposort() if u.op in (Ops.NEG, Ops.MAX, Ops.CONST) and u.dtype.is_float]
    assert {u.op for u in under} == {Ops.NEG, Ops.MAX, Ops.CONST} and all(u.dtype == dtypes.float32 for u in under)
    (load,) = [u for u in red.src[0].toposort() if u.op is Ops.LOAD]
    assert load.dtype == dtypes.bfloat16 and [u.op for u in red.src[0].toposort() if load in u.src] == [Ops.CAST]


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("cpu", [AVX512, AVX2])
def test_a_half_softmax_of_long_rows_vectorises_its_row_maximum(cpu: str, dtype: DType) -> None:
    """A half softmax over rows of 128 is one row kernel LLVM's loop vectoriser takes whole: its row maximum too (a
    vector maximum reduction), now that the maximum is float32's of float32 negations (`half.widen_max`). Before, the
    16-bit accumulator rounded back each step, and the quiet-NaN select of each negation, kept the maximum's loop
    scalar: bfloat16 rows of 128, 8 x 4 x 128 of them, 22-28 ms (float16 0.6 ms), 0.7-3.3 ms so. The same bits as the
    scalar kernel's."""
    from tgfx.lowering.compile import optimized_ir
    fn = lambda x: tg.nn.softmax(x, axis=-1)   # noqa: E731
    (sink,) = _kernels(fn, (64, 128), dtype)
    with tg.config.Context(TGFX_CPU=cpu):
        assert re.search(r"llvm\.vector\.reduce\.fmaximum\.v\d+f32", optimized_ir(_ir(sink, cpu), _target(cpu)))
    x = (np.random.default_rng(4).standard_normal((64, 128)) * 3).astype(np.float32)
    x[0, :3], x[1, 7], x[2, :] = [np.inf, -np.inf, 1e-40], np.nan, -np.inf
    t = tg.asarray(x).astype(dtype)
    vector = tg.jit(fn)(t)
    with tg.config.Context(NOOPT=1):
        scalar = tg.jit(fn)(t)
    np.testing.assert_array_equal(_bits(vector), _bits(scalar))
