"""float32 sin and cos as polynomial arithmetic (`tgfx/lowering/transcendental.py`): their error in ulps against numpy's
float64 values rounded, over dense sweeps, every magnitude of float32 and the floats nearest a multiple of pi/2; their
special values; and the kernels they make: no C library call, vector code for AVX-512 and AVX2.
(exp, exp2, log, log2 and log1p are checked in tests/test_optimize.py.)"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices.target import target_for
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering import kernel_source
from tgfx.lowering.compile import optimized_ir
from tgfx.lowering.inline import inline
from tgfx.lowering.schedule import schedule
from tgfx.lowering.transcendental import pm_transcendental

# measured: 1.24 ulp at most (numpy's own float32 sin and cos: 1.45)
ULPS = 1.3
# the floats whose x * 2/pi is nearest an integer, for their exponent (found by search over every float32 significand
# of the exponent): the reduction must keep the few significant bits of their small remainder. The first is the
# nearest of all float32, 2^-29.9 from a multiple of pi/2.
HARD = [7.729178919452902e+28, 21999384576.0, 1.5458357838905804e+29, 252.89820861816406, 4.638183382783466e+25,
        1522788990976.0, 8.11762663906456e+22, 1.135447918516746e+26, 380.1327209472656, 11356.857421875, 3.1415927,
        1.5707964, 2.7544919e36, 3.4028235e38]


def _ulps(fn: str, x: np.ndarray) -> np.ndarray:
    """tgfx's float32 `fn` against numpy's float64 one, in ulps of the float32 result."""
    got = getattr(tnp, fn)(tg.asarray(x)).numpy().astype(np.float64)
    want = getattr(np, fn)(x.astype(np.float64))
    return np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)


def _magnitudes(n: int, seed: int) -> np.ndarray:
    """Random float32 of every magnitude, both signs: 2^-30 to float32's largest."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n) * 2.0 ** rng.integers(-30, 127, n)
    return x.astype(np.float32)


@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_float32_sin_and_cos_are_within_ulps_at_every_magnitude(fn: str) -> None:
    dense = np.linspace(-10, 10, 400_001, dtype=np.float32)
    large = np.linspace(0, 2e5, 400_001, dtype=np.float32)
    hard = np.array(HARD + [-h for h in HARD], np.float32)
    for x in (dense, large, _magnitudes(400_000, 0), hard):
        assert _ulps(fn, x).max() <= ULPS


@settings(max_examples=30)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=64))
def test_float32_sin_and_cos_of_any_finite_float_are_within_ulps(xs: list[float]) -> None:
    x = np.array(xs, np.float32)
    assert _ulps("sin", x).max() <= ULPS and _ulps("cos", x).max() <= ULPS


def test_float32_sin_and_cos_special_values() -> None:
    # inf and nan give nan; sin keeps the sign of zero and is x itself where x^3/6 is below half an ulp (denormals
    # too); cos of a tiny x is 1
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 1e-30, -2e-4, 3e-5, 3.4028235e38, -3.4028235e38],
                 np.float32)
    with np.errstate(invalid="ignore"):
        want_sin = np.sin(x.astype(np.float64)).astype(np.float32)
        want_cos = np.cos(x.astype(np.float64)).astype(np.float32)
    got_sin, got_cos = tnp.sin(tg.asarray(x)).numpy(), tnp.cos(tg.asarray(x)).numpy()
    np.testing.assert_array_equal(got_sin, want_sin)
    np.testing.assert_array_equal(np.signbit(got_sin), np.signbit(want_sin))
    np.testing.assert_array_equal(got_cos, want_cos)


@pytest.mark.parametrize("d", [dtypes.float16, dtypes.bfloat16], ids=str)
def test_16bit_sin_and_cos_compute_in_float32(d) -> None:  # noqa: ANN001
    x = np.concatenate([np.linspace(-20, 20, 4001), _magnitudes(2000, 1).astype(np.float64)]).astype(np.float32)
    x = np.asarray(tg.asarray(x).astype(d).astype(dtypes.float32).numpy(), np.float32)   # representable in d
    for fn in ("sin", "cos"):
        got = getattr(tnp, fn)(tg.asarray(x).astype(d)).astype(dtypes.float32).numpy()
        want = tg.asarray(getattr(np, fn)(x.astype(np.float64)).astype(np.float32)).astype(d).astype(dtypes.float32)
        np.testing.assert_array_equal(got, want.numpy())


@pytest.mark.parametrize("d", [dtypes.float16, dtypes.bfloat16], ids=str)
@pytest.mark.parametrize("fn,lo,hi", [("exp", -20, 11), ("exp2", -24, 15), ("tanh", -10, 10), ("log", 1e-3, 6e4),
                                      ("log2", 1e-3, 6e4), ("log1p", -0.99, 6e4), ("expm1", -20, 11)])
def test_16bit_exp_log_and_tanh_compute_in_float32(d, fn: str, lo: float, hi: float) -> None:  # noqa: ANN001
    # float32's polynomial then one rounding to the 16-bit type: that of numpy's float32 value, but for the few
    # values whose float32 results straddle a 16-bit rounding boundary (one float32 ulp of polynomial error)
    x = np.concatenate([np.linspace(lo, hi, 4001), [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    x = np.asarray(tg.asarray(x).astype(d).astype(dtypes.float32).numpy(), np.float32)   # representable in d
    with np.errstate(all="ignore"):
        f32 = getattr(np, fn)(x.astype(np.float64)).astype(np.float32)
    got = getattr(tnp, fn)(tg.asarray(x).astype(d)).astype(dtypes.float32).numpy()
    want = tg.asarray(f32).astype(d).astype(dtypes.float32).numpy()
    mine = getattr(tnp, fn)(tg.asarray(x)).astype(d).astype(dtypes.float32).numpy()   # float32's, rounded
    np.testing.assert_array_equal(got, mine)
    assert np.mean(got == want) > 0.995 or np.array_equal(got, want, equal_nan=True)
    np.testing.assert_allclose(got, want, rtol=2.0 ** -7 if d == dtypes.bfloat16 else 2.0 ** -10)


def test_transcendental_rewrites_leave_no_library_calls_for_float32_and_16_bits_only():
    for d in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        x = UOp(Ops.VARIABLE, d, (), ("x", 0, 0))
        ops = (Ops.SIN, Ops.COS, Ops.EXP, Ops.EXP2, Ops.TANH, Ops.LOG, Ops.LOG2, Ops.LOG1P, Ops.EXPM1)
        for op in ops:
            out = graph_rewrite(UOp(op, d, (x,)), pm_transcendental)
            assert not {u.op for u in out.toposort()} & set(ops) and out.dtype == d
    x64 = UOp(Ops.VARIABLE, dtypes.float64, (), ("x", 0, 0))
    assert graph_rewrite(UOp(Ops.SIN, dtypes.float64, (x64,)), pm_transcendental).op is Ops.SIN


@pytest.mark.parametrize("cpu,lanes", [("znver4", 8), ("haswell", 4)])
def test_a_sin_kernel_is_vector_code_without_calls(cpu: str, lanes: int) -> None:
    """sin(x) + cos(2x) over 4096 floats: optimised for the target, the kernel calls no `sinf`/`cosf` (or LLVM's
    intrinsics for them) and computes in vectors: LLVM's loop vectoriser takes as many lanes as a register holds
    doubles (the reduction's type), the floats in vectors as long."""
    x = tg.asarray(np.zeros(4096, np.float32))
    out = tnp.sin(x) + tnp.cos(x * 2.0)
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (out.uop,))).src))
    (call,) = linear.src
    target = target_for(cpu).with_cores(1)
    with tg.config.Context(TGFX_CPU=cpu):
        ir = optimized_ir(kernel_source(call.src[0], target).ir, target)
    assert not re.search(r"call [^\n]*@(llvm\.)?(sin|cos)", ir)
    assert re.search(rf"fadd [^\n]*<{lanes} x double>", ir) and re.search(rf"fadd [^\n]*<{lanes} x float>", ir)


def test_the_gradients_of_sin_and_cos_are_cos_and_minus_sin():
    x = np.linspace(-7, 7, 101, dtype=np.float32)
    ds = tg.grad(lambda t: tnp.sin(t).sum())(tg.asarray(x)).numpy()
    dc = tg.grad(lambda t: tnp.cos(t).sum())(tg.asarray(x)).numpy()
    np.testing.assert_allclose(ds, np.cos(x), rtol=2e-7, atol=1e-7)
    np.testing.assert_allclose(dc, -np.sin(x), rtol=2e-7, atol=1e-7)
    d2 = tg.grad(tg.grad(lambda t: tnp.sin(t)))(tg.asarray(np.float32(0.5))).numpy()
    np.testing.assert_allclose(d2, -np.sin(np.float32(0.5)), rtol=2e-7)
