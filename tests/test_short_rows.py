"""Reductions over short rows (softmax, log_softmax, logsumexp, layernorm, max of rows a few vectors long): the rows
as a vector's lanes (`heuristics.across_rows_opts`), each row's elements as copies read and written through square
tiles transposed in registers (`render_wide.find_wide_tiles`). Counted, never timed: the options chosen, the vector
width of the rendered code, no horizontal reduce and no scatter; and the values are numpy's on many shapes."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import index_kernels, opt_kinds
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices.target import Target, target_for
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import render_kernel
from tgfx.lowering.heuristics import hand_coded_opts
from tgfx.lowering.kernel_opts import Opt, apply_opt, ranges
from tgfx.lowering.optimize import apply_hand_coded

# the two x86 vector widths: AVX-512 (16 float lanes) and AVX2 (8); options and IR only, so any host renders them
AVX512, AVX2 = "znver4", "haswell"


def _target(cpu: str) -> Target:
    return target_for(cpu).with_cores(1)


def _kernels(fn, shape: tuple[int, ...]) -> list[UOp]:  # noqa: ANN001
    return index_kernels(fn(tg.asarray(np.zeros(shape, np.float32))))


def _layernorm(x: tg.Tensor) -> tg.Tensor:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / tnp.sqrt(v + 1e-5)


def _np_layernorm(x: np.ndarray) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5)


@pytest.mark.parametrize("cpu,lanes", [(AVX512, 16), (AVX2, 8)])
def test_a_softmax_of_short_rows_takes_the_rows_as_lanes(cpu: str, lanes: int) -> None:
    """softmax over rows of 16: both reduces and the output's row loop whole as copies, the rows a vector of the
    target's lanes; rendered, the reads and writes are `lanes` vectors a tile, transposed by shuffles, with no
    horizontal reduce (no value's lane extracted), no scatter and the division one vector op."""
    (sink,) = _kernels(lambda x: tg.nn.softmax(x, axis=-1), (256, 16))
    target = _target(cpu)
    opts = hand_coded_opts(sink, target)
    assert opt_kinds(opts, sink) == [("UNROLL", "reduce", 0), ("UNROLL", "reduce", 0), ("UPCAST", "loop", 0),
                                ("UPCAST", "loop", lanes)]
    with tg.config.Context(TGFX_CPU=cpu):
        out, applied = apply_hand_coded(sink, target)
        ir, _, _ = render_kernel("k", out, applied, target)
    vt = f"<{lanes} x float>"
    assert not [u for u in out.toposort() if u.op is Ops.REDUCE]
    assert not re.search(r"extractelement <\d+ x float>", ir) and "scatter" not in ir and "gather" not in ir
    assert len(re.findall(rf"load {vt}", ir)) == 16 and len(re.findall(rf"store {vt}", ir)) == 16
    assert len(re.findall(rf"fdiv {vt}", ir)) == 16 and not re.search(r"fdiv float", ir)


@pytest.mark.parametrize("cpu,lanes", [(AVX512, 16), (AVX2, 8)])
def test_a_logsumexp_of_short_rows_is_vertical(cpu: str, lanes: int) -> None:
    """logsumexp over rows of 16 is two kernels (the max, then the sum of exps and its log); each takes the rows as
    lanes: the max and the sum are vector ops across the row's copies, the log one vector op for `lanes` rows, stored
    as one vector."""
    target = _target(cpu)
    for sink in _kernels(lambda x: tg.nn.logsumexp(x, axis=-1), (512, 16)):
        opts = hand_coded_opts(sink, target)
        assert opt_kinds(opts, sink) == [("UNROLL", "reduce", 0), ("UPCAST", "loop", lanes)]
        with tg.config.Context(TGFX_CPU=cpu):
            out, applied = apply_hand_coded(sink, target)
            ir, _, _ = render_kernel("k", out, applied, target)
        assert not re.search(r"extractelement <\d+ x float>", ir) and "scatter" not in ir
        assert len(re.findall(rf"store <{lanes} x float>", ir)) == 1


def test_rows_longer_than_a_few_vectors_or_plain_sums_stay_along_the_row() -> None:
    """A row of more than SHORT_ROW vectors (the long rows' path is as fast as JAX's), and a plain sum (its loads are
    its cost: 11 -> 27 us across rows), keep their options; so does a row that no vector of 8 or more divides (rows
    of 4: LLVM vectorises the loop of rows at full width itself)."""
    target = _target(AVX512)
    for fn, shape in (((lambda x: tg.nn.softmax(x, axis=-1)), (64, 1024)), ((lambda x: x.sum(-1)), (256, 16)),
                      ((lambda x: tg.nn.softmax(x, axis=-1)), (64, 10)), ((lambda x: tg.nn.softmax(x, axis=-1)),
                                                                           (64, 4))):
        for sink in _kernels(fn, shape):
            assert all(o.amount != 0 for o in hand_coded_opts(sink, target)), (shape, hand_coded_opts(sink, target))
    # a softmax's rows of 64 are more than TRANSCENDENTAL_ROW vectors of AVX-512 (its copies of exp: 10x the compile
    # time for a sixth off the run time); a layernorm's are not more than SHORT_ROW, AVX2's 8 lanes aside
    (sink,) = _kernels(lambda x: tg.nn.softmax(x, axis=-1), (64, 64))
    assert all(o.amount != 0 for o in hand_coded_opts(sink, _target(AVX512)))
    (sink,) = _kernels(_layernorm, (64, 64))
    assert all(o.amount != 0 for o in hand_coded_opts(sink, _target(AVX2)))
    assert any(o.amount == 0 for o in hand_coded_opts(sink, _target(AVX512)))


def test_transcendental_rows_longer_than_a_vector_need_a_full_width_tile() -> None:
    """Rows of two AVX-512 vectors whose elements take a tanh (a GNN's `(tanh(h) * w).sum(-1)`): 1024 rows take the
    rows as 16 lanes, but 1000 rows, which only 8 divide, stay along the row (a half-width tile of 32 tanh copies
    ran 2-3x slower at 4x the compile); rows of one vector take the narrower tile."""
    target = _target(AVX512)
    w = tg.asarray(np.ones(32, np.float32))
    for rows, tiled in ((1024, True), (1000, False)):
        (sink,) = _kernels(lambda h: (tnp.tanh(h) * w).sum(-1), (rows, 32))
        opts = hand_coded_opts(sink, target)
        assert any(o.amount == 0 for o in opts) == tiled, (rows, opts)
    (sink,) = _kernels(lambda h: (tnp.tanh(h) * w[:16]).sum(-1), (1000, 16))
    assert ("UPCAST", "loop", 8) in opt_kinds(hand_coded_opts(sink, target), sink)


def test_unroll_and_upcast_by_zero_take_the_whole_range_as_copies() -> None:
    """UNROLL by 0 leaves no reduce range and no REDUCE (the copies combined by a tree of the reduce's op); UPCAST by
    0 leaves no loop and a store per index."""
    (sink,) = _kernels(lambda x: tg.nn.softmax(x, axis=-1), (8, 4))
    rngs = {r.arg[0]: r for r in ranges(sink).values()}
    reduces = [i for i, r in rngs.items() if r.arg[1] == "reduce"]
    col = max(i for i, r in rngs.items() if r.arg[1] == "loop" and r.src[0].arg == 4)
    for i in reduces:
        sink = apply_opt(sink, Opt("UNROLL", i, 0))
    assert not [u for u in sink.toposort() if u.op is Ops.REDUCE]
    assert not [r for r in ranges(sink).values() if r.arg[1] == "reduce"]
    sink = apply_opt(sink, Opt("UPCAST", col, 0))
    assert len(sink.src) == 4 and col not in {r.arg[0] for r in ranges(sink).values()}


def _rows(draw, n: int, r: int, dtype: np.dtype) -> np.ndarray:  # noqa: ANN001
    seed = draw(st.integers(0, 2**31 - 1))
    x = (np.random.default_rng(seed).standard_normal((r, n)) * 4).astype(np.float32)
    special = draw(st.sampled_from(["none", "-inf row", "nan", "+inf", "-inf some"]))
    if special == "-inf row":
        x[r // 2] = -np.inf
    elif special == "nan":
        x[r - 1, n // 2] = np.nan
    elif special == "+inf":
        x[0, n - 1] = np.inf
    elif special == "-inf some":
        x[:, :: max(n // 3, 1)] = -np.inf
    return x.astype(dtype)


@st.composite
def _cases(draw):  # noqa: ANN001, ANN202
    n = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 10, 12, 16, 24, 31, 32, 48, 64, 80]))
    r = draw(st.sampled_from([1, 3, 8, 16, 24, 48, 64, 100]))
    dtype = draw(st.sampled_from([np.float32, np.float32, np.float16, dtypes.bfloat16]))
    np_dtype = np.float32 if dtype is dtypes.bfloat16 else dtype
    return _rows(draw, n, r, np_dtype), dtype, draw(st.booleans())


def _np_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))
    return e / e.sum(-1, keepdims=True)


def _np_logsumexp(x: np.ndarray, keepdims: bool) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.exp(x - m).sum(-1, keepdims=True)) + m
    return out if keepdims else out[..., 0]


@settings(max_examples=40)
@given(_cases())
def test_short_row_reductions_match_numpy(case) -> None:  # noqa: ANN001
    """softmax, log_softmax, logsumexp (keepdims or not), layernorm and max over rows of 1..80 (odd, not a vector's
    multiple, shorter than one), any number of rows, float32 and half-float inputs, rows of -inf, NaNs, infs."""
    x, dtype, keepdims = case
    t = tg.asarray(x).astype(dtype) if dtype is dtypes.bfloat16 else tg.asarray(x)
    ref = np.asarray(t.astype(dtypes.float32)).astype(np.float64)   # the inputs as tgfx holds them
    half = dtype is not np.float32
    tol = {"rtol": 2e-2, "atol": 2e-2} if half else {"rtol": 2e-5, "atol": 2e-6}
    with np.errstate(all="ignore"):
        want = {"softmax": _np_softmax(ref), "log_softmax": ref - _np_logsumexp(ref, True),
                "logsumexp": _np_logsumexp(ref, keepdims), "layernorm": _np_layernorm(ref), "max": ref.max(-1)}
    got = {"softmax": tg.nn.softmax(t, axis=-1), "log_softmax": tg.nn.log_softmax(t, axis=-1),
           "logsumexp": tg.nn.logsumexp(t, axis=-1, keepdims=keepdims), "layernorm": _layernorm(t),
           "max": t.max(-1)}
    # layernorm's (x - m) loses what rounding m to the dtype loses, relative to the row's spread: for a row whose mean
    # is far from zero against its deviation ([-3.2628, -3.2702]: |m| / sd = 890) no float32 layernorm is closer than
    # about eps |m| / sd, numpy's own in float32 included. That much more is allowed on such rows; a row centred near
    # zero adds at most 2 eps
    eps = float(np.finfo(np.float32).eps) if not half else 2.0 ** (-7 if dtype is dtypes.bfloat16 else -10)
    with np.errstate(all="ignore"):
        spread = np.abs(ref.mean(-1, keepdims=True)) / np.sqrt(ref.var(-1, keepdims=True) + 1e-5)
    allowed = tol["atol"] + 2 * eps * np.nan_to_num(spread)
    for name, value in got.items():
        actual = np.asarray(value.astype(dtypes.float32))
        if name == "layernorm":
            close = np.isclose(actual, want[name], rtol=tol["rtol"], atol=allowed, equal_nan=True)
            assert close.all(), (name, actual[~close], want[name][~close],
                                 np.broadcast_to(allowed, close.shape)[~close])
        else:
            np.testing.assert_allclose(actual, want[name], err_msg=name, **tol)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_short_rows_on_other_axes_and_under_jit(axis: int) -> None:
    """logsumexp and softmax of a 3-d value over each axis (the contiguous one takes the rows as lanes, the others a
    column's path), jitted, keepdims: numpy's values."""
    x = (np.random.default_rng(axis + 5).standard_normal((32, 16, 16)) * 3).astype(np.float32)
    x[3, 4] = -np.inf
    f = tg.jit(lambda v: (tg.nn.logsumexp(v, axis=axis, keepdims=True), tg.nn.softmax(v, axis=axis)))
    lse, sm = f(tg.asarray(x))
    m = x.max(axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(x - m)
    with np.errstate(all="ignore"):   # (x[3, 4] is a row of -inf along the last axis: -inf, and NaNs, as JAX's)
        np.testing.assert_allclose(lse.numpy(), np.log(e.sum(axis, keepdims=True)) + m, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(sm.numpy(), e / e.sum(axis, keepdims=True), rtol=2e-5, atol=2e-6)


def test_rows_as_lanes_with_a_scale_and_rows_a_vector_does_not_divide() -> None:
    """A layernorm times a scale read along the row (the same for every row: a scalar load a copy) takes the rows as
    lanes; 1000 rows of 16, which 16 lanes do not divide, take 8."""
    target = _target(AVX512)
    (sink,) = _kernels(lambda x: _layernorm(x) * x[0], (256, 16))
    assert [o.amount for o in hand_coded_opts(sink, target) if o.op == "UPCAST"] == [0, 16]
    (sink,) = _kernels(lambda x: tg.nn.softmax(x, axis=-1), (1000, 16))
    assert [o.amount for o in hand_coded_opts(sink, target) if o.op == "UPCAST"] == [0, 8]
    x = np.random.default_rng(3).standard_normal((1000, 16)).astype(np.float32)
    np.testing.assert_allclose(tg.nn.softmax(tg.asarray(x), axis=-1).numpy(), _np_softmax(x), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose((_layernorm(tg.asarray(x)) * tg.asarray(x)[0]).numpy(), _np_layernorm(x) * x[0],
                               rtol=2e-5, atol=2e-5)
