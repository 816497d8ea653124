"""Gradients of random programs against central finite differences in float64.

Each example is a random expression over a (3, 5) input: elementwise functions, products and quotients of
subexpressions, row and column reductions broadcast back (the fused row kernels of softmax and layer norm, with their
register buffers), selects, abs and copysign (bit tricks in the front end), gathers with repeated indices, cumulative
sums, `.at[].add`, sorts, transposes and matmuls. The argument is sometimes itself a lazy
value (|x|, x * 1.5 + 0.25), as a value computed just before the call is. Two silent gradient bugs had this shape: a
row kernel that read a register buffer it never wrote (NaNs), and an argument built with abs (zeros).
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
from helpers import build_program, numeric_grad, program_trees
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp

Expr = Callable[[tg.Tensor], tg.Tensor]

_UNARY: dict[str, Expr] = {
    "sin": tnp.sin, "cos": tnp.cos, "tanh": tnp.tanh, "exp": lambda a: tnp.exp(tnp.clip(a, -3.0, 3.0)),
    "softplus": lambda a: tnp.log1p(tnp.exp(-tnp.abs(a))) + tnp.maximum(a, 0.0), "sq": lambda a: a * a,
    "smooth_abs": lambda a: tnp.sqrt(a * a + 1.0), "log1p_sq": lambda a: tnp.log1p(a * a),
    "copysign": lambda a: tnp.copysign(a, -1.0) * a, "abs_sq": lambda a: tnp.abs(a) * a,
    "row_sum": lambda a: a * a.sum(axis=1, keepdims=True),
    "col_mean": lambda a: a - a.mean(axis=0, keepdims=True),
    "row_norm": lambda a: a / tnp.sqrt((a * a).sum(axis=1, keepdims=True) + 1.0),
    "softmax": lambda a: tnp.exp(a - a.max(axis=1, keepdims=True)) / tnp.exp(a - a.max(axis=1, keepdims=True)).sum(
        axis=1, keepdims=True),
    "scaled": lambda a: tnp.sin(a / (a.sum(axis=1, keepdims=True) + 10.0)),
    "gather": lambda a: a[:, np.array([4, 0, 2, 2, 1])],   # repeats: the backward adds into one column twice
    "cumsum": lambda a: tnp.cumsum(a, axis=1),
    "at_add": lambda a: a.at[:, 1].add(a[:, 3] * 2.0),
    "sort": lambda a: tnp.sort(a, axis=1) * np.arange(1.0, 6.0),
    "transposed": lambda a: (a.T * np.arange(1.0, 4.0)).T,
    # random bits (threefry's hash rounds, whose shared values once hung a jitted gradient in find_packs)
    "noise": lambda a: a + tg.random.normal(tg.random.key(3), a.shape, a.dtype) * 0.1,
}
_BINARY: dict[str, Callable[[tg.Tensor, tg.Tensor], tg.Tensor]] = {
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / (1.0 + b * b),
    "where": lambda a, b: tnp.where(a > b, a * 2.0, b), "max": tnp.maximum,
    "matmul": lambda a, b: a @ (b.T @ b) / 5.0,   # (3, 5) @ (5, 5): a contraction kernel and its two backwards
}
_PROGRAMS = program_trees(_UNARY, _BINARY, max_leaves=5)
_build = functools.partial(build_program, unary=_UNARY, binary=_BINARY)


@settings(max_examples=25)
@given(tree=_PROGRAMS, seed=st.integers(0, 2**16), lazy=st.sampled_from(["none", "abs", "affine"]))
@example(tree=("mul", ("x",), ("softmax", ("x",))), seed=0, lazy="none")      # the bugs it found, always run
@example(tree=("abs_sq", ("row_norm", ("x",))), seed=0, lazy="none")
@example(tree=("scaled", ("x",)), seed=0, lazy="abs")
@example(tree=("copysign", ("matmul", ("x",), ("gather", ("x",)))), seed=3, lazy="affine")
@example(tree=("exp", ("noise", ("x",))), seed=4, lazy="none")
def test_random_programs_gradients_match_finite_differences(tree: tuple, seed: int, lazy: str) -> None:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((3, 5))
    w = rng.standard_normal((3, 5))
    with tg.Context(TGFX_ENABLE_X64=1):
        weights = tg.asarray(w)

        def f(x: tg.Tensor) -> tg.Tensor:
            return (_build(tree, x) * weights).sum()

        def argument(b: np.ndarray) -> tg.Tensor:
            t = tg.asarray(b)
            return tnp.abs(t) if lazy == "abs" else t * 1.5 + 0.25 if lazy == "affine" else t
        value_at = {"none": lambda b: b, "abs": np.abs, "affine": lambda b: b * 1.5 + 0.25}[lazy]
        got = tg.grad(f)(argument(base)).numpy()
        want = numeric_grad(lambda b: float(f(tg.asarray(b)).numpy()), value_at(base))
        jitted = tg.jit(tg.grad(f))(argument(base)).numpy()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{tree} ({lazy} argument)")
    np.testing.assert_allclose(jitted, got, rtol=1e-9, atol=1e-12, err_msg=f"{tree} under jit")


@settings(max_examples=15)
@given(tree=_PROGRAMS, seed=st.integers(0, 2**16))
def test_random_programs_under_vmap_are_their_per_example_loop(tree: tuple, seed: int) -> None:
    """vmap of a random program (and of its gradient) over a batch of 4 equals the program run on each example:
    the batched graph schedules and fuses differently (a batch axis outside every row kernel)."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((4, 3, 5)).astype(np.float32)
    w = tg.asarray(rng.standard_normal((3, 5)).astype(np.float32))

    def f(x: tg.Tensor) -> tg.Tensor:
        return (_build(tree, x) * w).sum()
    batched = tg.vmap(f)(tg.asarray(xs)).numpy()
    looped = np.stack([f(tg.asarray(x)).numpy() for x in xs])
    np.testing.assert_allclose(batched, looped, rtol=2e-4, atol=2e-5, err_msg=str(tree))
    batched_grads = tg.jit(tg.vmap(tg.grad(f)))(tg.asarray(xs)).numpy()
    looped_grads = np.stack([tg.grad(f)(tg.asarray(x)).numpy() for x in xs])
    np.testing.assert_allclose(batched_grads, looped_grads, rtol=2e-4, atol=2e-5, err_msg=f"{tree} gradients")


def _np_softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


_UNARY_NP: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "exp": lambda a: np.exp(np.clip(a, -3.0, 3.0)),
    "softplus": lambda a: np.log1p(np.exp(-np.abs(a))) + np.maximum(a, 0.0), "sq": lambda a: a * a,
    "smooth_abs": lambda a: np.sqrt(a * a + 1.0), "log1p_sq": lambda a: np.log1p(a * a),
    "copysign": lambda a: np.copysign(a, -1.0) * a, "abs_sq": lambda a: np.abs(a) * a,
    "row_sum": lambda a: a * a.sum(axis=1, keepdims=True), "col_mean": lambda a: a - a.mean(axis=0, keepdims=True),
    "row_norm": lambda a: a / np.sqrt((a * a).sum(axis=1, keepdims=True) + 1.0), "softmax": _np_softmax,
    "scaled": lambda a: np.sin(a / (a.sum(axis=1, keepdims=True) + 10.0)),
    "gather": lambda a: a[:, np.array([4, 0, 2, 2, 1])], "cumsum": lambda a: np.cumsum(a, axis=1),
    "at_add": lambda a: np.concatenate([a[:, :1], a[:, 1:2] + a[:, 3:4] * 2.0, a[:, 2:]], axis=1),
    "sort": lambda a: np.sort(a, axis=1) * np.arange(1.0, 6.0), "transposed": lambda a: (a.T * np.arange(1.0, 4.0)).T,
    "noise": lambda a: a + tg.random.normal(tg.random.key(3), a.shape, "float32").numpy().astype(a.dtype) * 0.1,
}
_BINARY_NP: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / (1.0 + b * b),
    "where": lambda a, b: np.where(a > b, a * 2.0, b), "max": np.maximum, "matmul": lambda a, b: a @ (b.T @ b) / 5.0,
}


_build_np = functools.partial(build_program, unary=_UNARY_NP, binary=_BINARY_NP)


@settings(max_examples=25)
@given(tree=_PROGRAMS, seed=st.integers(0, 2**16))
def test_random_programs_compute_numpys_values(tree: tuple, seed: int) -> None:
    """The forward values of random programs (float32, eager and jitted, several outputs read at once: shared work,
    siblings) against numpy's in float64."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    want = _build_np(tree, x.astype(np.float64))
    t = tg.asarray(x)
    out = _build(tree, t)
    also = out.sum(axis=0)   # a second reader of the same value, computed in the same schedule
    tg.realize(out, also)
    scale = np.maximum(1.0, np.abs(want))
    np.testing.assert_allclose(out.numpy() / scale, want / scale, rtol=0, atol=2e-5, err_msg=str(tree))
    np.testing.assert_allclose(also.numpy(), want.sum(axis=0), rtol=1e-4, atol=1e-4 * np.abs(want).sum())
    np.testing.assert_allclose(tg.jit(lambda v: _build(tree, v))(t).numpy(), out.numpy(), rtol=1e-5, atol=1e-6,
                               err_msg=f"{tree} under jit")


@settings(max_examples=10)
@given(tree=_PROGRAMS, seed=st.integers(0, 2**16), steps=st.integers(1, 4), kind=st.sampled_from(["fori", "scan"]))
def test_random_loop_bodies_differentiate_as_their_unrolled_loop(tree: tuple, seed: int, steps: int,
                                                                 kind: str) -> None:
    """A random program as the body of a `fori_loop` or `scan` (compiled once, run on the device, differentiated by
    a loop running the other way over saved carries) against the same steps unrolled in Python: values and
    gradients."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 5))
    xs = rng.standard_normal((steps, 3, 5))
    with tg.Context(TGFX_ENABLE_X64=1):
        seq = tg.asarray(xs)

        def body(c: tg.Tensor, x_t: tg.Tensor) -> tg.Tensor:
            return tnp.tanh(_build(tree, c) + x_t) * 0.5 + c * 0.5

        def looped(c: tg.Tensor) -> tg.Tensor:
            if kind == "fori":
                return tg.lax.fori_loop(0, steps, lambda i, c: body(c, seq[i]), c).sum()
            return tg.lax.scan(lambda c, x_t: (body(c, x_t), c.sum()), c, seq)[0].sum()

        def unrolled(c: tg.Tensor) -> tg.Tensor:
            for i in range(steps):
                c = body(c, seq[i])
            return c.sum()
        np.testing.assert_allclose(looped(tg.asarray(x)).numpy(), unrolled(tg.asarray(x)).numpy(), rtol=1e-10,
                                   err_msg=f"{tree} {kind}")
        np.testing.assert_allclose(tg.grad(looped)(tg.asarray(x)).numpy(), tg.grad(unrolled)(tg.asarray(x)).numpy(),
                                   rtol=1e-8, atol=1e-10, err_msg=f"{tree} {kind} gradient")
