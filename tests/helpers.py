"""Shared pieces of the numerical tests: dtype lists, hypothesis strategies and `assert_close` against numpy.

The reference for every op is numpy, computed in the numpy dtype that stores the tgfx dtype (float32 for bfloat16,
whose results are then rounded to bfloat16, as tgfx rounds after every op). Values compare exactly for integers and
bool, and within a per-dtype tolerance for floats; NaNs must match NaNs and infinities must match in sign.
"""
from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
from tgfx.dtypes import DType, bf16_to_f32, dtypes, f32_to_bf16
from tgfx.tree import tree_leaves, tree_map

FLOATS: tuple[DType, ...] = (dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64)
SIGNED: tuple[DType, ...] = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
UNSIGNED: tuple[DType, ...] = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
INTS: tuple[DType, ...] = SIGNED + UNSIGNED
NUMERIC: tuple[DType, ...] = FLOATS + INTS
ALL: tuple[DType, ...] = NUMERIC + (dtypes.bool,)

# (rtol, atol) for one correctly rounded operation; transcendental functions get `TRANSCENDENTAL_ULPS` times more,
# since libm, LLVM's intrinsics and numpy's SIMD loops may each be a few ulp off.
TOLERANCE: dict[DType, tuple[float, float]] = {
    dtypes.float64: (1e-12, 1e-14),
    dtypes.float32: (1e-5, 1e-6),
    dtypes.float16: (1e-3, 1e-4),  # eps 2**-10: one ulp
    dtypes.bfloat16: (8e-3, 1e-3),  # eps 2**-7: one ulp
}
TRANSCENDENTAL_ULPS = 4


def eps(d: DType) -> float:
    """Machine epsilon of a float dtype."""
    return 2.0 ** -7 if d == dtypes.bfloat16 else float(np.finfo(d.np).eps)


def np_dtype(d: DType) -> np.dtype:
    """The numpy dtype numpy computes a tgfx dtype's reference in (bfloat16 has none: float32)."""
    return np.dtype(np.float32) if d == dtypes.bfloat16 else d.np


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16, returned as float32."""
    return bf16_to_f32(f32_to_bf16(np.asarray(x, np.float32)))


def to_tensor(x: np.ndarray, d: DType | None = None) -> tg.Tensor:
    """`x` as a tgfx Tensor of dtype `d` (default: x's own dtype)."""
    return tg.asarray(np.asarray(x), dtype=d)


# ---- hypothesis strategies ----
def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4) -> st.SearchStrategy:
    """Small shapes, including 0-d (`()`) and zero-size ones unless min_dims / min_side exclude them."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def broadcastable_shapes(shape: tuple[int, ...]) -> st.SearchStrategy:
    """Shapes that broadcast with `shape` (size-1 axes, fewer axes, or one more leading axis)."""
    return hnp.broadcastable_shapes(shape, min_dims=0, max_dims=len(shape) + 1, max_side=4)


def _representable(v: float, width: int, up: bool) -> float:
    """The float of `width` bits nearest `v` on the inside of a bound (hypothesis wants exact bounds)."""
    t = np.dtype(f"float{width}").type
    r = t(v)
    if (up and r < v) or (not up and r > v):
        r = np.nextafter(r, t(np.inf if up else -np.inf))
    return float(r)


def elements(d: DType, lo: float | None = None, hi: float | None = None, nonzero: bool = False,
             allow_special: bool = False) -> st.SearchStrategy:
    """Scalar values of dtype `d` within [lo, hi] (default: a range where products of a few values don't overflow)."""
    if d.is_bool:
        return st.booleans()
    if d.is_int:
        info = np.iinfo(d.np)
        lo_i = int(info.min) if lo is None else max(int(lo), int(info.min))
        hi_i = int(info.max) if hi is None else min(int(hi), int(info.max))
        s = st.integers(lo_i, hi_i)
        return s.filter(lambda v: v != 0) if nonzero else s
    width = 16 if d in (dtypes.float16, dtypes.bfloat16) else d.bits
    lo_f = _representable(-100.0 if lo is None else lo, width, up=True)
    hi_f = _representable(100.0 if hi is None else hi, width, up=False)
    s = st.floats(lo_f, hi_f, width=width, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    if d == dtypes.bfloat16:
        s = s.map(lambda v: float(bf16_round(np.float32(v))))
        s = s.filter(lambda v: lo_f <= v <= hi_f)
    if nonzero:
        s = s.filter(lambda v: abs(v) > 1e-2)
    if allow_special:
        s = st.one_of(s, st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, -0.0]))
    return s


def arrays(d: DType, shape: tuple[int, ...] | st.SearchStrategy, **kw: Any) -> st.SearchStrategy:
    """numpy arrays holding values of tgfx dtype `d` (bfloat16 as float32 values exactly representable in it)."""
    return hnp.arrays(np_dtype(d), shape, elements=elements(d, **kw))


# ---- comparing ----
def expected_values(expected: Any, d: DType) -> np.ndarray:
    """numpy's result in the representation `Tensor.numpy()` gives for dtype `d`."""
    e = np.asarray(expected)
    if d == dtypes.bfloat16:
        return bf16_round(e.astype(np.float32))
    with np.errstate(all="ignore"):
        return e.astype(d.np)


def assert_close(result: tg.Tensor, expected: Any, dtype: DType | None = None, rtol: float | None = None,
                 atol: float | None = None, ulps: float = 1) -> None:
    """`result` equals numpy's `expected`: same shape, dtype `dtype` (default: result's own), values within the
    dtype's tolerance times `ulps` (floats) or exactly (integers, bool)."""
    assert isinstance(result, tg.Tensor), f"expected a tgfx Tensor, got {type(result).__name__}"
    if dtype is not None:
        assert result.dtype == dtype, f"result dtype {result.dtype.name}, expected {dtype.name}"
    d = result.dtype
    got = result.numpy()
    want = expected_values(expected, d)
    assert got.shape == want.shape, f"result shape {got.shape}, expected {want.shape}"
    if not d.is_float:
        np.testing.assert_array_equal(got, want)
        return
    r0, a0 = TOLERANCE[d]
    rtol = r0 * ulps if rtol is None else rtol
    atol = a0 * ulps if atol is None else atol
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg="NaNs differ")
    inf = np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf], err_msg="infinities differ")
    np.testing.assert_allclose(g[~inf], w[~inf], rtol=rtol, atol=atol, equal_nan=True)


def native_programs(ir: str, names: tuple[str, ...]) -> dict[str, Any]:
    """Hand-written LLVM IR kernels (the HCQ calling convention: bufs, vals, core id) as runtime `Program`s, compiled
    in an MCJIT engine of their own that the programs keep alive."""
    import llvmlite.binding as llvm

    from tgfx.devices.hcq import Program
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine()
    ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    mod = llvm.parse_assembly(ir)
    mod.verify()
    ee.add_module(mod)
    ee.finalize_object()
    return {name: Program(name, ee.get_function_address(name), keepalive=ee) for name in names}


def run_threads(worker: Any, n: int, switch_interval: float, timeout: float = 60.0) -> bool:
    """Run `worker(t)` for t in range(n) on n threads, switching between them as often as `switch_interval` (seconds)
    asks; True when all of them finished within `timeout`."""
    import sys
    import threading
    interval = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)
    try:
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=timeout)
    finally:
        sys.setswitchinterval(interval)
    return not any(th.is_alive() for th in threads)


# ---- vmap's reference: the unbatched function on each example, stacked ----
def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def per_example(f: Callable, args: tuple, in_axes: tuple, out_axes: int = 0) -> Any:
    """`f` on each example (a Python loop), the results stacked along out_axes."""
    n = next(np.shape(tree_leaves(a)[0])[ax] for a, ax in zip(args, in_axes, strict=True) if ax is not None)

    def example(a: Any, ax: int | None, i: int) -> Any:
        return tree_map(lambda leaf: tg.asarray(leaf if ax is None else np.take(leaf, i, axis=ax)), a)
    outs = [tree_map(np.asarray, f(*(example(a, ax, i) for a, ax in zip(args, in_axes, strict=True))))
            for i in range(n)]
    return tree_map(lambda *xs: np.stack(xs, axis=out_axes), *outs)


def check_vmap(f: Callable, args: tuple, in_axes: tuple, out_axes: int = 0, tol: float = 1e-5) -> Any:
    got = tg.vmap(f, in_axes=in_axes, out_axes=out_axes)(*(tree_map(tg.asarray, a) for a in args))
    want = per_example(f, args, in_axes, out_axes)
    for g, w in zip(tree_leaves(got), tree_leaves(want), strict=True):
        assert g.shape == w.shape and g.dtype.np == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g.numpy(), w, rtol=tol, atol=tol)
    return got


def close(got: Any, want: Any, rtol: float = 2e-5, atol: float = 1e-5, dtype: Any = None) -> None:
    """`got` equals `want` in shape, to the tolerances (NaNs equal), and in dtype when one is given."""
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    if dtype is not None:
        assert g.dtype == np.dtype(dtype), (g.dtype, dtype)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


# ---- random programs, for the fuzz tests: a tree of op names over one input ("x",) ----
def program_trees(unary: dict[str, Any], binary: dict[str, Any], max_leaves: int) -> st.SearchStrategy:
    """Trees of the unary and binary ops' names over the leaf ("x",)."""
    return st.recursive(st.just(("x",)), lambda inner: st.one_of(
        st.tuples(st.sampled_from(sorted(unary)), inner),
        st.tuples(st.sampled_from(sorted(binary)), inner, inner)), max_leaves=max_leaves)


def build_program(tree: tuple, x: Any, unary: dict[str, Callable], binary: dict[str, Callable]) -> Any:
    """The value of `tree` at x, each op name looked up in `unary` or `binary`."""
    if tree[0] == "x":
        return x
    if len(tree) == 2:
        return unary[tree[0]](build_program(tree[1], x, unary, binary))
    return binary[tree[0]](build_program(tree[1], x, unary, binary), build_program(tree[2], x, unary, binary))


def numeric_grad(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The gradient of `f` at `x` by central differences, one element at a time (float64 `x` for tight checks)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def count_calls(fn: Callable[[], Any], c_calls: bool = False) -> tuple[int, Any]:
    """`fn()`'s calls of Python functions (with `c_calls`, of C functions too), as `sys.setprofile` sees them, and its
    result: the measure of the call-count bounds that stand in for times (an eager op's, a jit replay's). `fn`'s own
    call (a lambda around what is measured) is not counted."""
    calls = 0
    events = ("call", "c_call") if c_calls else ("call",)

    def count(frame: object, event: str, arg: object) -> None:
        nonlocal calls
        calls += event in events
    sys.setprofile(count)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return calls - 1, out


def count_opcodes(fn: Callable[[], Any]) -> tuple[int, Any]:
    """`fn()`'s bytecodes executed in Python frames (`sys.settrace` with opcode events), and its result: the measure
    of work a loop without calls does (a replay's per-word patching), which `count_calls` cannot see."""
    ops = 0

    def local(frame: Any, event: str, arg: object) -> Any:
        nonlocal ops
        ops += event == "opcode"
        return local

    def start(frame: Any, event: str, arg: object) -> Any:
        frame.f_trace_opcodes = True
        return local
    sys.settrace(start)
    try:
        out = fn()
    finally:
        sys.settrace(None)
    return ops, out


@contextlib.contextmanager
def as_in_a_fresh_process() -> Iterator[None]:
    """Within it, this process holds what a fresh one would for a count of calls (the bounds above are measured so):
    no lazy Tensor of the tests that ran before in this worker (each eager read asks whether one it holds is a value
    of its graph, 3 calls more; they are computed, and those that cannot be, tracers that escaped their trace on
    purpose, are out of the registry meanwhile) and no committed Tensor (a replay then commits its results, a call or
    two a result: 3234 calls against 1627 for 800 results). What the tests before left is put back after."""
    from tgfx.placement import marked
    from tgfx.tensor import _lazy
    gc.collect()
    hidden = {}
    for key, ref in list(_lazy.items()):
        if (t := ref()) is not None:
            try:
                t.realize()
            except Exception:  # noqa: BLE001 -- (a traced value that escaped its trace: it cannot be computed)
                hidden[key] = _lazy.pop(key, ref)
    committed = dict(marked)
    marked.clear()
    try:
        yield
    finally:
        marked.update(committed)
        for key, ref in hidden.items():
            if ref() is not None:
                _lazy.setdefault(key, ref)


def index_kernels(out: tg.Tensor) -> list[Any]:
    """The index-level kernels (`tgfx.lowering.index_level`) a lazy Tensor's graph is scheduled into, in order: what
    the heuristics choose options for."""
    from tgfx.ir.ops import Ops
    from tgfx.ir.uop import UOp
    from tgfx.lowering import index_level
    from tgfx.lowering.inline import inline
    from tgfx.lowering.schedule import schedule
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (out.uop,))).src))
    return [index_level(c.src[0]) for c in linear.src]


def opt_kinds(opts: list[Any], sink: Any) -> list[tuple[str, str, int]]:
    """Kernel options as (op, the kind of range they take, amount): what a heuristic chose, whatever the axes' numbers
    are."""
    from tgfx.lowering.kernel_opts import ranges
    kinds = {r.arg[0]: r.arg[1] for r in ranges(sink).values()}
    return [(o.op, kinds.get(o.axis, "?"), o.amount) for o in opts]
