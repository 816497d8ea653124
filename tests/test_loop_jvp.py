"""Forward mode through loops: `jvp`, `jacfwd` and `hessian` run a loop's JVP (a tangent carried beside each float
carry, const and slice), so loops with no bound on their steps (a while loop without max_steps, a fori_loop with
Tensor bounds) have a forward mode, as in JAX. References: the same loop unrolled in Python with the step count the
loop takes, differentiated through tgfx, and closed forms."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.tree import tree_leaves, tree_map


def close(a: Any, b: Any, tol: float = 1e-5) -> None:
    la, lb = tree_leaves(a), tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def newton_sqrt(a: tg.Tensor) -> tg.Tensor:
    """sqrt(a) by Newton's iteration until converged: a while loop whose step count depends on a."""
    return tg.lax.while_loop(lambda c: (tnp.abs(c * c - a) > 1e-6 * a).any(), lambda c: 0.5 * (c + a / c), a)


def test_jvp_through_an_unbounded_while_loop_reads_the_tangent_of_a_const() -> None:
    a = tg.asarray(np.array([2.0, 9.0, 0.25], np.float32))
    t = tg.asarray(np.array([1.0, -2.0, 0.5], np.float32))
    y, dy = tg.jvp(newton_sqrt, (a,), (t,))
    close(y, np.sqrt(a.numpy()))
    close(dy, t.numpy() / (2 * np.sqrt(a.numpy())))
    close(tg.jacfwd(newton_sqrt)(a), np.diag(1 / (2 * np.sqrt(a.numpy()))))
    close(tg.jit(lambda a, t: tg.jvp(newton_sqrt, (a,), (t,)))(a, t), (y, dy))


def test_jvp_through_a_while_loop_with_an_integer_carry_matches_the_unrolled_loop() -> None:
    w = tg.asarray(np.array([[0.9, 0.2], [-0.3, 0.8]], np.float32))

    def body(c: tuple) -> tuple:
        i, x = c
        return i + 1, x * 1.2 + 0.1 * tnp.sin(w @ x)

    def f(x: tg.Tensor) -> tuple:
        return tg.lax.while_loop(lambda c: (c[0] < 50) & (tnp.abs(c[1]).sum() < 5.0), body, (0, x))
    x, tx = tg.asarray(np.array([0.3, -0.2], np.float32)), tg.asarray(np.array([1.0, 0.5], np.float32))
    steps = int(f(x)[0])
    assert 0 < steps < 50

    def unrolled(x: tg.Tensor) -> tuple:
        c = (tg.asarray(np.int32(0)), x)
        for _ in range(steps):
            c = body(c)
        return c
    (i, y), (_, dy) = tg.jvp(f, (x,), (tx,))
    (ri, ry), (_, rdy) = tg.jvp(unrolled, (x,), (tx,))
    assert int(i) == steps
    close((y, dy), (ry, rdy))


def test_a_carry_no_tangent_reaches_has_a_zero_tangent() -> None:
    def f(x: tg.Tensor) -> tuple:
        return tg.lax.while_loop(lambda c: c[0].sum() < 10.0, lambda c: (c[0] * 2.0, c[1] + 1.0), (x, tnp.ones(2)))
    (y, k), (dy, dk) = tg.jvp(f, (tnp.ones(2),), (tnp.ones(2),))
    close((y, k, dy, dk), (np.full(2, 8.0), np.full(2, 4.0), np.full(2, 8.0), np.zeros(2)))


def test_jvp_through_a_fori_loop_with_tensor_bounds() -> None:
    def f(x: tg.Tensor, n: tg.Tensor) -> tg.Tensor:
        return tg.lax.fori_loop(0, n, lambda i, c: tnp.sin(c) * (i + 1.0), x)
    x, t, n = tnp.asarray([0.5, 1.0]), tnp.asarray([1.0, 2.0]), tg.asarray(np.int32(4))

    def unrolled(x: tg.Tensor) -> tg.Tensor:
        for i in range(4):
            x = tnp.sin(x) * (i + 1.0)
        return x
    close(tg.jvp(lambda x: f(x, n), (x,), (t,)), tg.jvp(unrolled, (x,), (t,)))
    close(tg.jit(lambda x, t, n: tg.jvp(lambda x: f(x, n), (x,), (t,)))(x, t, n), tg.jvp(unrolled, (x,), (t,)))


def py_scan(f: Callable, init: Any, xs: Any, reverse: bool = False) -> Any:
    n = tree_leaves(xs)[0].shape[0]
    carry, ys = init, []
    for i in (reversed(range(n)) if reverse else range(n)):
        carry, y = f(carry, tree_map(lambda x, i=i: x[i], xs))
        ys.append(y)
    ys = ys[::-1] if reverse else ys
    return carry, tree_map(lambda *s: tnp.stack(s), *ys)


@pytest.mark.parametrize("reverse", [False, True])
def test_jvp_of_a_scan_runs_one_forward_loop(reverse: bool) -> None:
    w = tg.asarray(np.array([[0.5, -0.4, 0.1], [0.2, 0.3, -0.6], [0.1, 0.1, 0.4]], np.float32))

    def step(c: tg.Tensor, x: tuple) -> tuple:
        xf, k = x
        c = tnp.tanh(c @ w + xf) * (k + 1)
        return c, (c.sum() * xf, k * 2)

    def f(init: tg.Tensor, xs: tg.Tensor, w_: tg.Tensor) -> Any:
        nonlocal w
        w = w_
        return tg.lax.scan(step, init, (xs, tnp.arange(5)), reverse=reverse)

    def ref(init: tg.Tensor, xs: tg.Tensor, w_: tg.Tensor) -> Any:
        nonlocal w
        w = w_
        return py_scan(step, init, (xs, tnp.arange(5)), reverse=reverse)
    rng = np.random.default_rng(0)
    prim = (tg.asarray(rng.standard_normal(3).astype(np.float32)), tg.asarray(rng.standard_normal((5, 3)).astype(
        np.float32)), w)
    tans = tuple(tg.asarray(rng.standard_normal(p.shape).astype(np.float32)) for p in prim)
    out, tout = tg.jvp(f, prim, tans)
    graph = UOp(Ops.TUPLE, None, tuple(t.uop for t in tree_leaves((out, tout))))
    loops = [u.arg for u in graph.toposort() if u.op is Ops.LOOP]
    # forward mode: one loop with the tangents beside the primals, which the primal results read too; no saved
    # carries, nothing running backwards
    assert len(loops) == 1 and not loops[0].save and loops[0].reverse == reverse
    close((out, tout), tg.jvp(ref, prim, tans))
    close(tg.vmap(lambda t: tg.jvp(f, prim, (t, *tans[1:]))[1])(tnp.stack([tans[0], 2 * tans[0]])),
          tg.vmap(lambda t: tg.jvp(ref, prim, (t, *tans[1:]))[1])(tnp.stack([tans[0], 2 * tans[0]])))


def test_hessian_through_a_scan_is_forward_over_reverse() -> None:
    def f(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.scan(lambda c, xi: (c * tnp.sin(xi) + xi * xi, None), x[0], x)[0]

    def ref(x: tg.Tensor) -> tg.Tensor:
        return py_scan(lambda c, xi: (c * tnp.sin(xi) + xi * xi, xi), x[0], x)[0]
    x = tnp.asarray([0.3, -1.2, 0.7, 2.0])
    close(tg.hessian(f)(x), tg.hessian(ref)(x), 1e-4)


def test_second_order_forward_mode_through_an_unbounded_while_loop() -> None:
    a, t = tnp.asarray([4.0, 2.0]), tnp.asarray([1.0, 1.0])

    def d(a: tg.Tensor) -> tg.Tensor:
        return tg.jvp(newton_sqrt, (a,), (t,))[1]
    _, dd = tg.jvp(d, (a,), (t,))
    close(dd, -0.25 * a.numpy() ** -1.5, 1e-4)   # d^2/da^2 sqrt(a)


def test_second_order_forward_mode_through_a_jitted_while_loop() -> None:
    # the placeholder standing for the loop's transposed JVP built that JVP over the loop as the forward body had it;
    # in the function's backward its operands are that body's PARAMs, renumbered, so the JVP read other slots and
    # the second derivative was zero, silently
    x, y = tnp.asarray([0.3, -0.5, 0.8]), tnp.asarray([0.7, 1.2, -0.4])

    def loop(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:   # a * b ** 2
        return tg.lax.while_loop(lambda c: c[1] < 2, lambda c: (c[0] * b, c[1] + 1), (a, 0))[0]
    want = 2 * x.numpy() * y.numpy() ** 2   # d/db (x * b ** 2) along y, at b = y
    for wrap in (tg.jit, tg.function):
        inner = lambda b: tg.jvp(lambda a: wrap(loop)(a, b), (x,), (x,))[1]   # noqa: B023, E731
        close(tg.jvp(inner, (y,), (y,))[1], want)
        close(tg.linearize(inner, y)[1](y), want)


def test_reverse_mode_where_no_path_runs_through_an_unbounded_loop() -> None:
    # jacfwd of a while loop whose tangents do not depend on its primal carries: reverse mode over it with respect to
    # the loop's start needs no reverse mode of the loop (JAX's partial evaluation finds none); it raised for max_steps
    def loop(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:   # a * b ** 3 + b ** 2 + b + 1
        return tg.lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * b + 1.0, c[1] + 1), (a, 0))[0]
    x, y = tnp.asarray([0.3, -0.5, 0.8]), tnp.asarray([0.7, 1.2, -0.4])
    ga = tg.grad(lambda a, b: tg.jacfwd(loop)(a, b).sum())(x, y)   # the Jacobian is diag(b ** 3)
    close(ga, np.zeros(3))
    close(tg.grad(lambda a: tg.jvp(lambda u: loop(u, y), (a,), (tnp.ones(3),))[1].sum())(x), np.zeros(3))
    # nor a loop whose differentiated operand reaches it only through a stop_gradient
    ga, gb = tg.grad(lambda a, b: (loop(tg.stop_gradient(a), 1.0) * b).sum(), argnums=(0, 1))(x, y)
    close(ga, np.zeros(3))
    close(gb, x.numpy() + 3.0)


def test_reverse_mode_through_the_forward_mode_of_an_unbounded_loop_still_names_max_steps() -> None:
    with pytest.raises(TypeError, match="max_steps"):
        tg.grad(lambda a: tg.jvp(newton_sqrt, (a,), (tnp.ones(2),))[1].sum())(tnp.asarray([4.0, 2.0]))


def test_a_custom_jvp_rule_may_run_reverse_mode_through_a_loop_under_forward_mode() -> None:
    def h(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.scan(lambda c, xi: (c * tnp.sin(xi), None), 1.0, x)[0]

    @tg.custom_jvp
    def f(x: tg.Tensor) -> tg.Tensor:
        return h(x)

    @f.defjvp
    def f_jvp(p: tuple, t: tuple) -> tuple:
        return f(p[0]), (tg.grad(h)(p[0]) * t[0]).sum()   # reverse mode inside the rule stays reverse mode
    x, t = tnp.asarray([0.3, 1.0, 2.0]), tnp.asarray([1.0, -1.0, 0.5])
    close(tg.jvp(f, (x,), (t,)), tg.jvp(h, (x,), (t,)))


def test_a_custom_jvp_rule_carrying_tangents_through_a_loop() -> None:
    @tg.custom_jvp
    def s(a: tg.Tensor) -> tg.Tensor:
        return tnp.sqrt(a)

    @s.defjvp
    def s_jvp(p: tuple, t: tuple) -> tuple:
        y = s(p[0])
        return y, tg.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 1.0), (0, t[0] / (2 * y)))[1]
    # forward mode runs the rule, as JAX's jvp does; reverse mode transposes it, which the while loop cannot take
    assert float(tg.jvp(s, (tnp.asarray([4.0]),), (tnp.ones(1),))[1][0]) == 0.25
    with pytest.raises(TypeError, match="cannot differentiate the while loop of .*s_jvp"):
        tg.grad(lambda a: s(a).sum())(tnp.asarray([4.0]))


def test_jvp_through_a_precompiled_function_and_a_custom_backward_with_loops() -> None:
    @tg.function(precompile=True)
    def scanned(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.scan(lambda c, xi: (tnp.sin(c) * xi + c, None), x[0], x)[0]

    def unrolled(x: tg.Tensor) -> tg.Tensor:
        c = x[0]
        for i in range(x.shape[0]):
            c = tnp.sin(c) * x[i] + c
        return c
    x, t = tnp.asarray([0.3, -1.2, 0.7, 2.0]), tnp.asarray([1.0, 0.5, -0.25, 2.0])
    close(tg.jvp(scanned, (x,), (t,)), tg.jvp(unrolled, (x,), (t,)))
    # a factorisation whose backward runs triangular solves (loops) on the cotangent: forward mode transposes them
    a = np.random.default_rng(2).standard_normal((40, 40)).astype(np.float32)
    a = tg.asarray(a @ a.T + 40 * np.eye(40, dtype=np.float32))
    ta = tg.asarray(np.eye(40, dtype=np.float32) * 0.5)
    chol, dchol = tg.jvp(tnp.linalg.cholesky, (a,), (ta,))
    eps = 1e-2
    fd = (tnp.linalg.cholesky(a + eps * ta).numpy() - tnp.linalg.cholesky(a - eps * ta).numpy()) / (2 * eps)
    np.testing.assert_allclose(dchol.numpy(), fd, rtol=2e-2, atol=2e-3)
