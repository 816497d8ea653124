"""vmap through tg.lax loops (LOOP's batching rule, tgfx/transforms/vmap_control.py): the rule on tiny graphs, every
loop kind against the unbatched loop run on each example, compositions with grad / jacfwd / hessian / jit / itself,
the library's loops (cholesky, solve, gamma), and counts showing the batched loop stays one loop.

The reference for `vmap(f)(*args)` is the unbatched `f` on each example in a Python loop, stacked along out_axes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import check_vmap, per_example, rand

import tgfx as tg
import tgfx.numpy as tnp
import tgfx.scipy.linalg as sla
from tgfx.dtypes import dtypes
from tgfx.ir.control import INDEX_DTYPE, LoopSpec
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.transforms.vmap import batch_graph, broadcast_front

f32 = dtypes.float32




def loops_of(*ts: tg.Tensor) -> list[UOp]:
    """The LOOPs a result reads (outside loop bodies: a loop nested in a body is part of its loop)."""
    from tgfx.lowering.inline import walk
    return [u for u in walk(UOp(Ops.SINK, None, tuple(t.uop for t in ts))) if u.op is Ops.LOOP]


# ---- the rule itself, on tiny graphs: hash-consing makes == exact ----
def _p(slot: int, shape: tuple[int, ...], dtype: Any = f32) -> UOp:
    return UOp(Ops.PARAM, dtype, (), (slot, shape, "CPU:0"))


def test_batching_rule_builds_one_loop_over_the_batched_body() -> None:
    """LOOP(c -> c * c + k): a batched init carry gives the same loop over a body batched in slot 2, with the
    unbatched const broadcast inside it; a batched const makes the carry batched too, broadcast at entry."""
    i, k_p, c_p = _p(0, (), INDEX_DTYPE), _p(1, (3,)), _p(2, (3,))
    spec = LoopSpec("f", 1, 1, 0, 4, "CPU:0")
    k, c = _p(5, (3,)), _p(6, (3,))
    loop = UOp(Ops.LOOP, None, (UOp(Ops.TUPLE, None, (c_p * c_p + k_p,)), k, c), spec)
    out = UOp(Ops.GETTUPLE, f32, (loop,), 0)
    c_b, cp_b, k_b, kp_b = _p(6, (2, 3)), _p(2, (2, 3)), _p(5, (2, 3)), _p(1, (2, 3))

    (got,), flags = batch_graph([out], {c: c_b}, 2)
    want = UOp(Ops.LOOP, None, (UOp(Ops.TUPLE, None, (cp_b * cp_b + broadcast_front(k_p, 2),)), k, c_b), spec)
    assert got is UOp(Ops.GETTUPLE, f32, (want,), 0) and flags == [True]

    (got,), flags = batch_graph([out], {k: k_b}, 2)
    want = UOp(Ops.LOOP, None, (UOp(Ops.TUPLE, None, (cp_b * cp_b + kp_b,)), k_b, broadcast_front(c, 2)), spec)
    assert got is UOp(Ops.GETTUPLE, f32, (want,), 0) and flags == [True]
    assert i not in got.toposort()  # the index is unused here


# ---- fori_loop with static bounds ----
def test_fori_loop_matches_per_example_over_in_axes_and_out_axes() -> None:
    x, w = rand(4, 3), rand(3, 3, seed=1) * 0.5
    f = lambda x, w: tg.lax.fori_loop(0, 5, lambda i, c: tnp.tanh(c @ w) + x * i, x)  # noqa: E731
    check_vmap(f, (x, w), (0, None))
    check_vmap(f, (x.T.copy(), w), (1, None), out_axes=1)
    check_vmap(f, (x, np.stack([w, w * 2, -w, w.T])), (0, 0))
    check_vmap(f, (x[0], np.stack([w, w * 2])), (None, 0))


def test_batched_fori_loop_is_one_loop_and_an_elementwise_one_one_kernel() -> None:
    x, b = rand(6, 5), rand(6, 5, seed=1)
    out = tg.vmap(lambda x, b: tg.lax.fori_loop(0, 50, lambda i, c: c * 0.9 + b, x))(tg.asarray(x), tg.asarray(b))
    (loop,) = loops_of(out)
    assert loop.arg.length == 50 and loop.src[0].src[0].shape == (6, 5)   # not unrolled, not one loop per example
    tg.counters.reset()
    out.realize()
    assert tg.counters.kernel_count == 1    # an elementwise body stays one kernel with the steps inside it
    want = x
    for _ in range(50):
        want = want * np.float32(0.9) + b
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_carry_the_body_makes_batched_is_broadcast_at_entry() -> None:
    """(a, b) -> (b, a + x): b is batched after one step, a after two (the fixed point takes two rounds); c stays
    unbatched and is one value, not a copy per example."""
    x = rand(4, 3)

    def f(x: tg.Tensor) -> tuple:
        return tg.lax.fori_loop(0, 3, lambda i, s: (s[1], s[0] + x, s[2] * 2.0), (tnp.zeros(3), tnp.ones(3),
                                                                                      tnp.ones(2)))
    check_vmap(f, (x,), (0,))
    (loop,) = loops_of(*tg.vmap(f)(tg.asarray(x)))
    _, init, _, _ = loop.arg.operands(loop)
    assert [u.shape for u in init] == [(4, 3), (4, 3), (2,)]


# ---- scan ----
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_xs_and_ys(reverse: bool) -> None:
    def f(h: tg.Tensor, xs: dict) -> tuple:
        def step(c: tg.Tensor, x: dict) -> tuple:
            c = tnp.tanh(c * x["a"] + x["b"].sum())
            return c, {"c": c, "s": c.sum()}
        return tg.lax.scan(step, h, xs, reverse=reverse)
    h, a, b = rand(4, 3), rand(6, 4, 3, seed=1), rand(6, 4, 2, seed=2)
    check_vmap(f, (h, {"a": a, "b": b}), (0, 1))                        # batched carry and xs (the batch axis second)
    check_vmap(f, (h[0], {"a": a, "b": b}), (None, 1))                  # unbatched init, made batched by the xs
    check_vmap(f, (h, {"a": a[:, 0], "b": b[:, 0]}), (0, None))         # unbatched xs
    check_vmap(f, (h.T.copy(), {"a": a, "b": b}), (1, 1), out_axes=1)   # the stacked ys with the batch axis second


# ---- while_loop ----
def test_while_loop_with_a_batched_predicate_runs_every_example_its_own_steps() -> None:
    """Each example doubles until its sum passes 20: they stop after 2, 3, 5 and 0 steps, and the counter each
    returns says so; the finished ones keep their carry (a select per example), as in JAX."""
    x = np.array([[4.0, 3.0], [1.0, 2.0], [0.3, 0.4], [30.0, 1.0]], np.float32)

    def f(x: tg.Tensor) -> tuple:
        return tg.lax.while_loop(lambda s: s[1].sum() < 20.0, lambda s: (s[0] + 1, s[1] * 2.0), (0, x))
    n, _ = check_vmap(f, (x,), (0,))
    assert n.tolist() == [2, 3, 5, 0]
    (loop,) = loops_of(*tg.vmap(f)(tg.asarray(x)))
    assert loop.arg.cond and loop.arg.n_carry == 3     # the counter, the values, and each example's step count
    check_vmap(lambda x: tg.lax.while_loop(lambda c: c.sum() < 20.0, lambda c: c * 2.0, x, max_steps=2), (x,), (0,))
    # the predicate batched through a const only: the unbatched carry becomes batched
    lims = np.array([0.5, 3.0, 7.2, -1.0], np.float32)
    out = check_vmap(lambda lim: tg.lax.while_loop(lambda c: c < lim, lambda c: c + 1.0, 0.0), (lims,), (0,))
    assert out.tolist() == [1.0, 3.0, 8.0, 0.0]


def test_while_loop_with_an_unbatched_predicate_stops_every_example_together() -> None:
    x = rand(4, 3)

    def f(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.while_loop(lambda s: s[0] < 4, lambda s: (s[0] + 1, tnp.sin(s[1]) + x), (0, x))[1]
    check_vmap(f, (x,), (0,))
    (loop,) = loops_of(tg.vmap(f)(tg.asarray(x)))
    assert loop.arg.n_carry == 2 and not any(u.op is Ops.WHERE for u in loop.src[0].toposort())  # no select


# ---- fori_loop with Tensor bounds (the trip count read on the device) ----
def test_fori_loop_with_traced_bounds() -> None:
    x = rand(4, 3)
    body = lambda i, c: c * 0.5 + i.astype(f32)   # noqa: E731
    f = lambda x, lo, hi: tg.lax.fori_loop(lo, hi, body, x)   # noqa: E731
    lo, hi = np.array([0, 2, 3, 1], np.int32), np.array([5, 2, 7, 0], np.int32)
    check_vmap(f, (x, lo, hi), (0, 0, 0))                        # each example its own trip count
    check_vmap(f, (x, lo[0], hi), (0, None, 0))
    check_vmap(f, (x, lo[0], hi[0]), (0, None, None))            # an unbatched trip count stays the loop's own
    jf = tg.jit(tg.vmap(f))
    for seed in range(3):
        h = np.random.default_rng(seed).integers(0, 6, 4).astype(np.int32)
        np.testing.assert_allclose(jf(tg.asarray(x), tg.asarray(lo), tg.asarray(h)).numpy(),
                                   per_example(f, (x, lo, h), (0, 0, 0)), rtol=1e-6)
    assert jf.trace_count == 1


# ---- compositions ----
def test_vmap_of_vmap_and_loops_in_loops() -> None:
    def f(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
        def outer(c: tg.Tensor, r: tg.Tensor) -> tuple:
            c = tg.lax.fori_loop(0, 3, lambda i, d: tnp.sin(d) * w + r, c)
            return c, c.sum()
        return tg.lax.scan(outer, x, tnp.stack([x, x * 2.0]))[1]
    x, w = rand(2, 3, 4), rand(2, 4, seed=1)
    got = tg.vmap(tg.vmap(f, in_axes=(0, None)), in_axes=(0, 0))(tg.asarray(x), tg.asarray(w))
    assert len(loops_of(got)) == 1
    want = np.stack([per_example(f, (x[i], w[i]), (0, None)) for i in range(2)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_loops_inside_functions_and_jit_under_vmap() -> None:
    """A FUNCTION body holding a LOOP: the loop body's PARAMs are its own, not the function's slots of the same
    type (hash-consing makes them the same UOps)."""
    x = rand(4, 3)
    f = tg.jit(lambda x: tg.lax.fori_loop(0, 3, lambda i, c: tnp.sin(c) + x, x))
    check_vmap(f, (x,), (0,))
    g = tg.function(lambda x, w: tg.lax.scan(lambda c, r: (c + r * w, c * r), x, tnp.stack([x, x]))[1])
    check_vmap(g, (x, x[0]), (0, None))
    check_vmap(g, (x[0], x), (None, 0))


def _fori_loss(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
    return (tg.lax.fori_loop(0, 4, lambda i, c: tnp.sin(c) * w + c * 0.5, x) ** 2).sum()


def _scan_loss(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
    return tg.lax.scan(lambda c, r: (tnp.tanh(c * w + r), (c * r).sum()), x, tnp.stack([w, w * 0.5, -w]))[1].sum()


def _while_loss(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
    return tg.lax.while_loop(lambda c: (c * c).sum() < 30.0, lambda c: c * 1.5 + w * 0.1, x, max_steps=20).sum()


@pytest.mark.parametrize("loss", [_fori_loss, _scan_loss, _while_loss])
def test_vmap_of_grad_and_grad_of_vmap(loss: Callable) -> None:
    x, w = rand(4, 3) + 1.0, rand(3, seed=1)
    check_vmap(tg.grad(loss, argnums=(0, 1)), (x, w), (0, None), tol=1e-4)      # per-example gradients
    total = lambda x, w: tg.vmap(loss, in_axes=(0, None))(x, w).sum()   # noqa: E731
    gx, gw = tg.grad(total, argnums=(0, 1))(tg.asarray(x), tg.asarray(w))
    px, pw = per_example(tg.grad(loss, argnums=(0, 1)), (x, w), (0, None))
    np.testing.assert_allclose(gx.numpy(), px, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw.numpy(), pw.sum(0), rtol=1e-4, atol=1e-4)


def _finite_jacobian(f: Callable, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    cols = []
    for j in range(x.size):
        d = np.zeros_like(x)
        d.flat[j] = h
        cols.append((np.asarray(f(tg.asarray(x + d))) - np.asarray(f(tg.asarray(x - d)))) / (2 * h))
    return np.stack(cols, axis=-1).reshape(*np.shape(cols[0]), *x.shape)


@pytest.mark.x64
def test_jacfwd_and_hessian_of_a_fori_loop_match_finite_differences() -> None:
    w = tg.asarray(np.array([0.7, -0.3, 1.1]))
    step = lambda i, c: tnp.sin(c) * w + c * c * 0.1   # noqa: E731
    f = lambda x: tg.lax.fori_loop(0, 4, step, x)   # noqa: E731
    x = np.array([0.4, -0.2, 0.9])
    np.testing.assert_allclose(tg.jacfwd(f)(tg.asarray(x)).numpy(), _finite_jacobian(f, x), rtol=1e-6, atol=1e-8)
    loss = lambda x: (f(x) ** 2).sum()   # noqa: E731
    hess = tg.hessian(loss)(tg.asarray(x)).numpy()
    np.testing.assert_allclose(hess, _finite_jacobian(tg.grad(loss), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tg.jacrev(tg.grad(loss))(tg.asarray(x)).numpy(), hess, rtol=1e-9, atol=1e-12)


# ---- the library's loops ----
def test_cholesky_and_solve_per_example() -> None:
    a = rand(5, 4, 4)
    spd = a @ a.transpose(0, 2, 1) + 4 * np.eye(4, dtype=np.float32)
    check_vmap(lambda m: sla.cholesky(m, lower=True), (spd,), (0,), tol=1e-4)
    check_vmap(lambda m: sla.cholesky(m), (spd,), (0,), tol=1e-4)
    b = rand(5, 4, seed=1)
    check_vmap(tnp.linalg.solve, (spd, b), (0, 0), tol=1e-4)
    check_vmap(tnp.linalg.solve, (spd[0], b), (None, 0), tol=1e-4)
    check_vmap(tg.grad(lambda m, b: tnp.linalg.solve(m, b).sum()), (spd, b), (0, 0), tol=1e-3)


def test_gamma_with_a_batched_shape_parameter() -> None:
    """gamma's rejection sampler is one while loop over the elements: under vmap each example takes its own steps
    and draws what the unbatched call draws for it."""
    key = tg.random.key(0)
    a = np.array([0.3, 1.0, 2.5, 7.0], np.float32)
    check_vmap(lambda a: tg.random.gamma(key, a), (a,), (0,), tol=1e-6)
    keys = tg.random.split(key, 4)
    check_vmap(lambda k, a: tg.random.gamma(k, a, shape=(3,)), (keys, a), (0, 0), tol=1e-6)
    check_vmap(tg.grad(lambda a: tg.random.gamma(key, a)), (a,), (0,), tol=1e-5)


# ---- counting: a batched loop compiles and submits what a short one does ----
def test_a_1000_step_vmapped_loop_runs_the_work_of_a_10_step_one() -> None:
    """Under jit: one trace, and equal compile and kernel-submission counts for 10 and 1,000 steps (the bodies
    differ by a constant, so neither reuses the other's kernels)."""
    w = tg.asarray(rand(8, 8) * 0.1)
    x = tg.asarray(rand(4, 8))

    def make(n: int, c: float) -> Callable:
        return tg.jit(tg.vmap(lambda x: tg.lax.fori_loop(0, n, lambda i, h: tnp.tanh(h @ w) * c + x, x)))

    def counts(f: Callable) -> tuple[int, int]:
        tg.counters.reset()
        f(x).realize()
        return tg.counters.compile_count, tg.counters.kernel_count
    small, big = make(10, 0.25), make(1000, 0.5)
    assert counts(small) == counts(big)
    big(x)
    assert big.trace_count == 1
