"""`tg.custom_vjp` and `tg.custom_jvp` (JAX's API), and the structure of a custom backward's `grad_outputs`.

Gradients are checked against central finite differences (float64) and against the plain function's gradient;
rules that differ from the true derivative on purpose check that the rule is what runs."""
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp

pytestmark = pytest.mark.x64
RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal(3), RNG.standard_normal(3)


def fd_grad(f: Any, args: list[np.ndarray], argnum: int, h: float = 1e-6) -> np.ndarray:
    """d sum(f) / d args[argnum] by central differences."""
    base = [a.copy() for a in args]
    out = np.zeros_like(base[argnum])
    for k in np.ndindex(out.shape):
        up, down = [a.copy() for a in base], [a.copy() for a in base]
        up[argnum][k] += h
        down[argnum][k] -= h
        out[k] = (float(f(*map(tg.asarray, up)).sum()) - float(f(*map(tg.asarray, down)).sum())) / (2 * h)
    return out


# ---- custom_vjp ----
@tg.custom_vjp
def sin_times(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    return tnp.sin(x) * y


def _sin_times_fwd(x: tg.Tensor, y: tg.Tensor) -> tuple:
    return sin_times(x, y), (tnp.cos(x), tnp.sin(x), y, "a Python residual")


def _sin_times_bwd(res: tuple, g: tg.Tensor) -> tuple:
    cos_x, sin_x, y, note = res
    assert note == "a Python residual" and isinstance(g, tg.Tensor)
    return cos_x * g * y, sin_x * g


sin_times.defvjp(_sin_times_fwd, _sin_times_bwd)


def plain_sin_times(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    return tnp.sin(x) * y


def test_custom_vjp_value_and_gradients_match_finite_differences_and_the_plain_function() -> None:
    x, y = tg.asarray(X), tg.asarray(Y)
    np.testing.assert_allclose(sin_times(x, y).numpy(), np.sin(X) * Y)
    gx, gy = tg.grad(lambda x, y: sin_times(x, y).sum(), argnums=(0, 1))(x, y)
    px, py = tg.grad(lambda x, y: plain_sin_times(x, y).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx.numpy(), px.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gy.numpy(), py.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), fd_grad(sin_times, [X, Y], 0), rtol=1e-6)
    np.testing.assert_allclose(gy.numpy(), fd_grad(sin_times, [X, Y], 1), rtol=1e-6)


def test_custom_vjp_composes_with_jit_vmap_and_second_order() -> None:
    x, y = tg.asarray(X), tg.asarray(Y)
    g = tg.grad(lambda x: sin_times(x, y).sum())
    np.testing.assert_allclose(tg.jit(g)(x).numpy(), np.cos(X) * Y, rtol=1e-12)
    per_example = tg.vmap(tg.grad(lambda a, b: sin_times(a, b)))(x, y)
    np.testing.assert_allclose(per_example.numpy(), np.cos(X) * Y, rtol=1e-12)
    # second order differentiates fwd's residuals and the backward: -sin(x) * y
    gg = tg.grad(lambda x: g(x).sum())(x)
    np.testing.assert_allclose(gg.numpy(), -np.sin(X) * Y, rtol=1e-10)
    # the rule runs per example under grad of vmap
    gv = tg.grad(lambda xs: tg.vmap(lambda r: sin_times(r, y))(xs).sum())(tg.asarray(np.stack([X, 2 * X])))
    np.testing.assert_allclose(gv.numpy(), np.cos(np.stack([X, 2 * X])) * Y, rtol=1e-12)
    # forward mode is reverse mode transposed: it goes through the rule too
    _, t = tg.jvp(lambda x: sin_times(x, y), (x,), (tg.asarray(np.ones(3)),))
    np.testing.assert_allclose(t.numpy(), np.cos(X) * Y, rtol=1e-12)


def test_the_rule_is_what_runs_and_outside_grad_the_function_is_called() -> None:
    calls = []

    @tg.custom_vjp
    def clip_gradient(x: tg.Tensor) -> tg.Tensor:
        calls.append("fun")
        return x

    def fwd(x: tg.Tensor) -> tuple:
        calls.append("fwd")
        return clip_gradient(x), None     # fwd may call the function itself

    clip_gradient.defvjp(fwd, lambda res, g: (tnp.clip(g, -1.0, 1.0),))
    np.testing.assert_allclose(clip_gradient(tg.asarray(X)).numpy(), X)
    assert calls == ["fun"]
    g = tg.grad(lambda x: (3.0 * clip_gradient(x)).sum())(tg.asarray(X))
    np.testing.assert_allclose(g.numpy(), np.ones(3))
    assert calls == ["fun", "fwd", "fun"]


def test_custom_vjp_pytrees_nondiff_argnums_and_a_tensor_passed_twice() -> None:
    @partial(tg.custom_vjp, nondiff_argnums=(0,))
    def apply(fn: Any, p: dict) -> tuple:
        return fn(p["a"]) * p["b"], p["b"]

    def fwd(fn: Any, p: dict) -> tuple:
        return apply(fn, p), p

    def bwd(fn: Any, p: dict, g: tuple) -> tuple:
        g0, g1 = g   # the output's structure: a pair
        return ({"a": 10.0 * g0 * p["b"], "b": g0 * fn(p["a"]) + g1},)

    apply.defvjp(fwd, bwd)
    a, b = tg.asarray(X), tg.asarray(Y)
    g = tg.grad(lambda p: sum(o.sum() for o in apply(tnp.sin, p)))({"a": a, "b": b})
    np.testing.assert_allclose(g["a"].numpy(), 10.0 * Y)
    np.testing.assert_allclose(g["b"].numpy(), np.sin(X) + 1)
    # one Tensor as both arguments: its gradient is the sum of the two cotangents
    g2 = tg.grad(lambda x: sin_times(x, x).sum())(a)
    np.testing.assert_allclose(g2.numpy(), np.cos(X) * X + np.sin(X), rtol=1e-12)


def test_custom_vjp_errors_name_the_argument_and_shapes() -> None:
    @tg.custom_vjp
    def f(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        return x * y

    x, y = tg.asarray(X), tg.asarray(np.ones((2, 3)))
    with pytest.raises(TypeError, match="no rule was set.*defvjp"):
        f(x, x)
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))
    with pytest.raises(TypeError, match=r"one cotangent per differentiable argument \(2: x, y\).*length 1"):
        tg.grad(lambda x: f(x, x).sum())(x)
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g.sum(0), g))
    with pytest.raises(TypeError, match=r"cotangent of shape \(3,\) for argument x, which has shape \(2, 3\)"):
        tg.grad(lambda y: f(y, y).sum())(y)
    with pytest.raises(TypeError, match="keyword arguments"):
        f(x, y=x)


# ---- custom_jvp ----
@tg.custom_jvp
def log1pexp(x: tg.Tensor) -> tg.Tensor:
    return tnp.log1p(tnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1 - 1 / (1 + tnp.exp(x)))


def test_custom_jvp_gives_the_stable_derivative_where_the_plain_one_is_nan() -> None:
    x = tg.asarray(np.array([-3.0, 0.0, 2.0, 800.0]))
    g = tg.grad(lambda x: log1pexp(x).sum())(x)
    np.testing.assert_allclose(g.numpy(), 1 / (1 + np.exp(-np.array([-3.0, 0.0, 2.0, 800.0]))), rtol=1e-12)
    plain = tg.grad(lambda x: tnp.log1p(tnp.exp(x)).sum())(x)
    assert np.isnan(plain.numpy()[-1])   # inf / inf: why the rule exists
    small = np.array([-3.0, 0.0, 2.0])
    np.testing.assert_allclose(g.numpy()[:3], fd_grad(log1pexp, [small], 0), rtol=1e-6)


def test_custom_jvp_forward_mode_second_order_jit_and_vmap() -> None:
    x = tg.asarray(X)
    _, t = tg.jvp(log1pexp, (x,), (tg.asarray(np.full(3, 2.0)),))
    sig = 1 / (1 + np.exp(-X))
    np.testing.assert_allclose(t.numpy(), 2 * sig, rtol=1e-12)
    gg = tg.grad(lambda x: tg.grad(lambda x: log1pexp(x).sum())(x).sum())(x)
    np.testing.assert_allclose(gg.numpy(), sig * (1 - sig), rtol=1e-10)
    np.testing.assert_allclose(tg.jit(tg.grad(lambda x: log1pexp(x).sum()))(x).numpy(), sig, rtol=1e-12)
    np.testing.assert_allclose(tg.vmap(tg.grad(log1pexp))(x).numpy(), sig, rtol=1e-12)
    gv = tg.grad(lambda xs: tg.vmap(log1pexp)(xs).sum())(tg.asarray(np.stack([X, -X])))
    np.testing.assert_allclose(gv.numpy(), 1 / (1 + np.exp(-np.stack([X, -X]))), rtol=1e-12)


def test_numpy_and_python_number_arguments_are_arrays_under_differentiation() -> None:
    # an argument no differentiation reaches may be a NumPy array or a Python number (grad leaves the arguments it
    # does not differentiate as they were given): the function computed a NumPy result from it, which the custom call
    # could not pass on (an error); JAX makes such arguments arrays
    @partial(tg.custom_jvp, nondiff_argnums=(0,))
    def pj(n: int, x: Any) -> Any:
        return x ** n
    pj.defjvp(lambda n, p, t: (pj(n, p[0]), n * p[0] ** (n - 1) * t[0]))

    @partial(tg.custom_vjp, nondiff_argnums=(0,))
    def pv(n: int, x: Any) -> Any:
        return x ** n
    pv.defvjp(lambda n, x: (pv(n, x), x), lambda n, x, g: (n * x ** (n - 1) * g,))
    x, y = np.array([0.5, -0.3, 1.0], np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    for p in (pj, pv):
        for c in (x, 1.5, np.float32(1.5)):
            got = tg.grad(lambda y: (p(3, c) * y + p(2, y)).sum())(tnp.asarray(y))   # noqa: B023
            np.testing.assert_allclose(got.numpy(), np.asarray(c, np.float32) ** 3 + 2 * y, rtol=1e-6)
        _, t = tg.jvp(lambda y: p(3, x) * y, (tnp.asarray(y),), (tnp.ones(3, tnp.float32),))   # noqa: B023
        np.testing.assert_allclose(t.numpy(), x ** 3, rtol=1e-6)


def test_a_rule_reading_a_constant_inside_a_traced_function() -> None:
    # grad of a jitted (or tg.function) body calling a custom rule whose backward reads a constant it closes over (a
    # NumPy array, a concrete Tensor): that buffer sat inside the backward FUNCTION's body, read there as zeros, so the
    # gradient was zero, silently; it is an argument of the backward now, as of the forward's body
    x, w = np.array([0.5, -0.3, 1.0], np.float32), np.array([1.0, 2.0, 3.0], np.float32)

    def scaled(w: Any) -> Any:
        @tg.custom_vjp
        def h(a: Any) -> Any:
            return a * 2.0
        h.defvjp(lambda a: (h(a), None), lambda r, g: (g * w,))
        return h
    for wrap in (tg.jit, tg.function, partial(tg.function, allow_implicit=True)):
        for c in (w, tnp.asarray(w)):
            got = tg.grad(lambda a: wrap(lambda u: scaled(c)(u))(a).sum())(x)   # noqa: B023
            np.testing.assert_allclose(got.numpy(), w)
    # a checkpoint closing over a value that is not differentiated, under jit: the same backward
    ck = tg.grad(lambda a, b: tg.jit(lambda u, v: tg.checkpoint(lambda t: tnp.sin(t) * v)(u))(a, b).sum())(x, w)
    np.testing.assert_allclose(ck.numpy(), np.cos(x) * w, rtol=1e-6)


def test_defjvps_one_rule_per_argument_and_nondiff_argnums() -> None:
    @tg.custom_jvp
    def f(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        return x * y

    f.defjvps(lambda t, ans, x, y: t * y, lambda t, ans, x, y: 2 * t * x)   # d/dy doubled: the rule runs
    gx, gy = tg.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1))(tg.asarray(X), tg.asarray(Y))
    np.testing.assert_allclose(gx.numpy(), Y)
    np.testing.assert_allclose(gy.numpy(), 2 * X)

    @partial(tg.custom_jvp, nondiff_argnums=(1,))
    def power(x: tg.Tensor, k: int) -> tg.Tensor:
        return x ** k

    @power.defjvp
    def _(k: int, primals: tuple, tangents: tuple) -> tuple:
        (x,), (t,) = primals, tangents
        return power(x, k), k * x ** (k - 1) * t

    g = tg.grad(lambda x: power(x, 3).sum())(tg.asarray(X))
    np.testing.assert_allclose(g.numpy(), 3 * X ** 2, rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), fd_grad(lambda x: power(x, 3), [X], 0), rtol=1e-6)


def test_a_jvp_rule_that_is_not_linear_in_the_tangents_is_an_error() -> None:
    @tg.custom_jvp
    def f(x: tg.Tensor) -> tg.Tensor:
        return x * x

    f.defjvp(lambda p, t: (f(p[0]), t[0] * t[0]))
    with pytest.raises(TypeError, match="not linear in the tangents"):
        tg.grad(lambda x: f(x).sum())(tg.asarray(X))


def test_a_jvp_rule_written_with_a_loop_runs_in_forward_mode() -> None:
    # JAX's jvp runs the rule on the tangents; tgfx's transposed its transpose, which a loop in the rule does not
    # have ("not linear in the tangents ... carries them through a loop"): jvp and jacfwd raised
    for loop in ("fori", "while"):
        @tg.custom_jvp
        def f(x: tg.Tensor) -> tg.Tensor:
            return tnp.sin(x) * 2

        def rule(p: tuple, t: tuple, loop: str = loop) -> tuple:   # 2 cos(x) t, the factor 2 summed as 1 + 1/2 + ...
            if loop == "fori":
                s = tg.lax.fori_loop(0, 40, lambda i, v: 0.5 * v + t[0], tnp.zeros_like(t[0]))
            else:
                s = tg.lax.while_loop(lambda c: c[1] < 40, lambda c: (0.5 * c[0] + t[0], c[1] + 1),
                                      (tnp.zeros_like(t[0]), 0))[0]
            return f(p[0]), tnp.cos(p[0]) * s
        f.defjvp(rule)
        x = tg.asarray(X)
        _, t = tg.jvp(f, (x,), (tnp.ones_like(x),))
        np.testing.assert_allclose(t.numpy(), 2 * np.cos(X), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(tg.jacfwd(lambda x: f(x).sum())(x).numpy(), 2 * np.cos(X), rtol=1e-5, atol=1e-6)


def test_a_jvp_rule_with_a_counted_loop_transposes_under_grad() -> None:
    """grad of a custom_jvp whose rule sums its tangent with a fori_loop or a scan (the carry linear in the tangent):
    JAX transposes the rule's loop; tgfx raised 'jvp ... is not linear in the tangents', since the loop's backward
    took the forward's saved carries (and the tangent they were computed from) as operands it never read. The
    values jax 0.10.2 gives: 2 cos(x). A rule that is not linear in its tangent still raises."""
    def make(kind: str) -> Callable:
        @tg.custom_jvp
        def f(x: tg.Tensor) -> tg.Tensor:
            return tnp.sin(x) * 2

        @f.defjvp
        def rule(p: tuple, t: tuple) -> tuple:
            (x,), (dx,) = p, t
            if kind == "fori":      # four halves of cos(x) dx
                s = tg.lax.fori_loop(0, 4, lambda i, a: a + tnp.cos(x) * dx * 0.5, tnp.zeros_like(dx))
            elif kind == "scan":    # 1 + 1/2 + 1/4 + ... of cos(x) dx, forty terms
                s = tg.lax.scan(lambda a, _: (0.5 * a + tnp.cos(x) * dx, None), tnp.zeros_like(dx), None, length=40)[0]
            else:                   # carries dx * dx: not a JVP
                s = tg.lax.fori_loop(0, 2, lambda i, a: a + tnp.cos(x) * dx * dx, tnp.zeros_like(dx))
            return f(x), s
        return f
    x = tg.asarray(X.astype(np.float32))
    for kind in ("fori", "scan"):
        f = make(kind)
        np.testing.assert_allclose(tg.grad(lambda v, f=f: f(v).sum())(x).numpy(), 2 * np.cos(X), rtol=1e-5, atol=1e-6)
        _, pullback = tg.vjp(f, x)
        np.testing.assert_allclose(pullback(tnp.asarray(Y.astype(np.float32)))[0].numpy(), 2 * np.cos(X) * Y,
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tg.grad(lambda v: make("fori")(v).sum())(tg.asarray([0.3, 1.2])).numpy(),
                               [1.910673, 0.7247154], rtol=1e-6)
    with pytest.raises(TypeError, match="is not linear in the tangents"):
        tg.grad(lambda v: make("square")(v).sum())(x)


# ---- a custom backward's grad_outputs have the function's return structure ----
def test_grad_outputs_mirror_the_return_structure() -> None:
    seen = []

    def back(g: Any, call: Any) -> tuple:
        seen.append(type(g).__name__ if not isinstance(g, dict) else sorted(g))
        gs = [g] if isinstance(g, tg.Tensor) else list(g.values()) if isinstance(g, dict) else list(g)
        total = sum(gs[1:], gs[0])
        return (total * 2,)

    one = tg.function(lambda x: x * 2, grad_fxn=back)
    pair = tg.function(lambda x: (x * 2, x * 3), grad_fxn=back)
    named = tg.function(lambda x: {"a": x * 2, "b": x * 3}, grad_fxn=back)
    x = tg.asarray(X)
    np.testing.assert_allclose(tg.grad(lambda x: one(x).sum())(x).numpy(), np.full(3, 2.0))
    np.testing.assert_allclose(tg.grad(lambda x: sum(o.sum() for o in pair(x)))(x).numpy(), np.full(3, 4.0))
    np.testing.assert_allclose(tg.grad(lambda x: named(x)["b"].sum())(x).numpy(), np.full(3, 2.0))
    assert seen == ["Tensor", "tuple", ["a", "b"]]


def test_a_rule_inside_a_loop_or_branch_body_is_the_one_differentiated() -> None:
    """A custom_vjp / custom_jvp called in a scan, fori_loop, while_loop (max_steps) or cond body: its rule gives the
    gradient through the loop, as in JAX. The bodies were inlined when the loop was built, the call's rule with them,
    so the plain function's derivative was taken instead: silently, cos(x) for a rule returning 100 g."""
    @tg.custom_vjp
    def scaled(x):
        return tnp.sin(x)
    scaled.defvjp(lambda x: (tnp.sin(x), x), lambda x, g: (100.0 * g,))

    @tg.custom_jvp
    def safe_log1pexp(x):
        return tnp.log(1.0 + tnp.exp(x))
    safe_log1pexp.defjvps(lambda t, ans, x: t * tg.nn.sigmoid(x))   # the plain derivative is NaN at x = 100

    x = tg.asarray(0.5)
    # two steps of the rule: 100 * 100
    assert tg.grad(lambda x: tg.lax.scan(lambda c, _: (scaled(c), None), x, None, length=2)[0])(x).item() == 1e4
    assert tg.grad(lambda x: tg.lax.fori_loop(0, 2, lambda i, c: scaled(c), x))(x).item() == 1e4
    assert tg.jit(tg.grad(lambda x: tg.lax.fori_loop(0, 2, lambda i, c: scaled(c), x)))(x).item() == 1e4
    assert tg.grad(lambda x: tg.lax.cond(x > 0, scaled, tnp.cos, x))(x).item() == 100.0
    wl = lambda x: tg.lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, scaled(c[1])), (0, x),  # noqa: E731
                                     max_steps=4)[1]
    assert tg.grad(wl)(x).item() == 1e4
    xs = tg.asarray(np.array([0.1, 0.2, 0.3], np.float32))
    np.testing.assert_array_equal(tg.vmap(tg.grad(lambda x: tg.lax.fori_loop(0, 2, lambda i, c: scaled(c), x)))(xs)
                                  .numpy(), [1e4] * 3)
    # the jvp rule's stable derivative through a loop: the plain one is exp(100) / (1 + exp(100)) = inf / inf
    big = tg.asarray(100.0)
    g = tg.grad(lambda x: tg.lax.scan(lambda c, _: (c, safe_log1pexp(c)), x, None, length=3)[1].sum())(big)
    assert g.item() == pytest.approx(3.0)
    # and the values are the function's own
    assert tg.lax.fori_loop(0, 2, lambda i, c: scaled(c), x).item() == pytest.approx(np.sin(np.sin(0.5)), rel=1e-6)


def test_custom_vjp_closing_over_a_differentiated_value_is_an_error() -> None:
    # the rule gives cotangents to the function's arguments only: a value it reads from its closure that is being
    # differentiated lost its gradient, silently (0.0 here); JAX refuses it, and so does tgfx, naming the function
    def loss(w: tg.Tensor) -> tg.Tensor:
        return _sin_times(w)(tnp.ones(3)).sum()
    with pytest.raises(TypeError, match=r"custom_vjp .*scaled_sin: .*closure.*Pass the value as an argument"):
        tg.grad(loss)(tg.asarray(0.3))
    with pytest.raises(TypeError, match="scaled_sin"):
        tg.jit(tg.grad(loss))(tg.asarray(0.3))
    # also where an argument is computed from that value (its gradient through the argument alone, silently)
    with pytest.raises(TypeError, match=r"custom_vjp .*scaled_sin: .*closure"):
        tg.grad(lambda w: _sin_times(w)(w * 2.0).sum())(tg.asarray(0.3))
    # a closed-over value that is not differentiated is a constant of the rule, as in JAX
    w = tg.asarray(0.3)
    np.testing.assert_allclose(tg.grad(lambda x: _sin_times(w)(x).sum())(tnp.ones(3)).numpy(),
                               np.full(3, 0.3 * np.cos(0.3)), rtol=1e-6)


def _sin_times(w: tg.Tensor) -> Any:
    @tg.custom_vjp
    def scaled_sin(x: tg.Tensor) -> tg.Tensor:
        return tnp.sin(x * w)
    scaled_sin.defvjp(lambda x: (scaled_sin(x), x), lambda x, g: (g * w * tnp.cos(x * w),))
    return scaled_sin


def test_custom_jvp_closing_over_a_differentiated_value_is_an_error() -> None:
    # the same for a custom JVP: its transpose gives cotangents to the arguments only, and the closed-over value's
    # derivative was zero, silently, eagerly and under jit
    def scaled(w: tg.Tensor) -> Any:
        @tg.custom_jvp
        def scaled_sin(x: tg.Tensor) -> tg.Tensor:
            return tnp.sin(x * w)
        scaled_sin.defjvp(lambda p, t: (scaled_sin(p[0]), t[0] * w * tnp.cos(p[0] * w)))
        return scaled_sin

    def loss(w: tg.Tensor) -> tg.Tensor:
        return scaled(w)(tnp.ones(3)).sum()
    w = tg.asarray(0.3)
    for run in (tg.grad(loss), tg.jit(tg.grad(loss)), lambda w: tg.jvp(loss, (w,), (w,))):
        with pytest.raises(TypeError, match=r"custom_jvp .*scaled_sin: .*closure.*Pass the value as an argument"):
            run(w)
    np.testing.assert_allclose(tg.grad(lambda x: scaled(w)(x).sum())(tnp.ones(3)).numpy(),
                               np.full(3, 0.3 * np.cos(0.3)), rtol=1e-6)


def test_second_derivative_of_a_fixed_point_whose_fwd_calls_it() -> None:
    # JAX's custom derivative tutorial: a fixed point (an unbounded while_loop) with a custom_vjp whose fwd calls the
    # fixed point and whose bwd solves another one. Under grad(grad(.)) the call in fwd is the custom function again
    # for the outer level (it was the plain while loop, which reverse mode cannot differentiate: a TypeError)
    @partial(tg.custom_vjp, nondiff_argnums=(0,))
    def fixed_point(f, a, x0):
        def body(c):
            return c[1], f(a, c[1])
        return tg.lax.while_loop(lambda c: tnp.abs(c[0] - c[1]) > 1e-6, body, (x0, f(a, x0)))[1]

    def fwd(f, a, x0):
        x = fixed_point(f, a, x0)
        return x, (a, x)

    def bwd(f, res, g):
        a, x = res
        _, vjp_a = tg.vjp(lambda a: f(a, x), a)
        u = fixed_point(lambda packed, u: packed[2] + tg.vjp(lambda x: f(packed[0], x), packed[1])[1](u)[0],
                        (a, x, g), g)
        return vjp_a(u)[0], tnp.zeros_like(x)
    fixed_point.defvjp(fwd, bwd)

    def newton_sqrt(a):
        return fixed_point(lambda a, x: 0.5 * (x + a / x), a, a)
    np.testing.assert_allclose(newton_sqrt(2.0).item(), np.sqrt(2.0), rtol=1e-6)
    np.testing.assert_allclose(tg.grad(newton_sqrt)(2.0).item(), 0.5 / np.sqrt(2.0), rtol=1e-5)
    np.testing.assert_allclose(tg.grad(tg.grad(newton_sqrt))(2.0).item(), -0.25 * 2.0 ** -1.5, rtol=1e-4)


def test_custom_jvp_with_python_control_flow_on_its_primals_under_grad() -> None:
    # JAX's custom derivative tutorial: called eagerly under grad, a custom_jvp's function and its rule see concrete
    # primals, so `if x > 0` picks the branch (the function's trace raised a concretization error); under jit or vmap
    # the values are not known, and it still raises
    @tg.custom_jvp
    def f(x):
        return tnp.sin(x) if x > 0 else tnp.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), (2 * t if x > 0 else 3 * t)
    assert tg.grad(f)(1.0).item() == 2.0 and tg.grad(f)(-1.0).item() == 3.0
    np.testing.assert_allclose(tg.grad(lambda x: f(x) * f(x))(-1.0).item(), 6 * np.cos(-1.0), rtol=1e-6)
    np.testing.assert_allclose(f(1.0).item(), np.sin(1.0), rtol=1e-6)
    with pytest.raises(tg.ConcretizationError, match="argument x"):
        tg.jit(tg.grad(f))(1.0)
    with pytest.raises(tg.ConcretizationError):
        tg.vmap(tg.grad(f))(tnp.asarray([1.0, -1.0]))


def test_a_rule_that_pulls_back_with_vjp_twice_in_a_row_under_jit() -> None:
    # each call's bwd pulls back with tg.vjp from its inputs (as checkpoint's does); the second call's input is the
    # first's output, whose softmax holds a stop_gradient mark: that pullback left a placeholder in the gradient,
    # an escaped tracer under jit
    def plain(w: tg.Tensor, h: tg.Tensor) -> tg.Tensor:
        return h + tg.nn.softmax(h @ w)
    layer = tg.custom_vjp(plain)
    layer.defvjp(lambda w, h: (plain(w, h), (w, h)), lambda res, g: tg.vjp(plain, *res)[1](g))

    def loss(f: Any) -> Any:
        return lambda w0, w1, x: (f(w1, f(w0, x)) ** 2).sum()
    w0, w1, x = RNG.standard_normal((4, 4)), RNG.standard_normal((4, 4)), RNG.standard_normal((3, 4))
    got = tg.jit(tg.grad(loss(layer), argnums=(0, 1)))(*map(tg.asarray, (w0, w1, x)))
    for i, g in enumerate(got):
        np.testing.assert_allclose(g.numpy(), fd_grad(loss(plain), [w0, w1, x], i), rtol=1e-6, atol=1e-8)


def test_hessian_of_a_custom_jvp_whose_rule_calls_it() -> None:
    # JAX's external-callbacks tutorial: a Bessel function by pure_callback whose custom_jvp rule calls the function
    # itself (jv(v - 1, z)), and its hessian. The rule, transposed by the inner grad after that level ended, called
    # the plain function for the outer level, whose callback has no derivative (a ValueError); it is the custom
    # function there too. Here sin by callback, its rule cos(x) = sin(x + pi/2) by itself
    @tg.custom_jvp
    def sin(x):
        return tg.pure_callback(lambda v: np.sin(v).astype(v.dtype), tg.ShapeDtypeStruct(x.shape, x.dtype), x)

    @sin.defjvp
    def sin_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return sin(x), t * sin(x + np.pi / 2)
    x = tnp.asarray(np.float32(2.0))
    for second in (tg.hessian(sin), tg.grad(tg.grad(sin)), tg.jacfwd(tg.grad(sin)), tg.jacrev(tg.grad(sin))):
        np.testing.assert_allclose(second(x).item(), -np.sin(2.0), rtol=1e-5)


def test_forward_mode_through_vmap_of_a_custom_jvp() -> None:
    """jvp, jacfwd and linearize of vmap(f) for a custom_jvp f raised EscapedTracerError (the rule's node, batched
    by vmap, ran its rule on the primals of a vmap that had returned), and once that ran, each example's tangent was
    the sum of every example's (the node's placeholder value was a constant, so vmap took it as the same for every
    example and summed the tangents arriving at it). jax 0.10.2: the rule, example by example."""
    @tg.custom_jvp
    def softplus(x: tg.Tensor) -> tg.Tensor:
        return tnp.log1p(tnp.exp(x))
    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] / (1 + tnp.exp(-p[0]))))
    x = tg.asarray(X)
    sig = 1 / (1 + np.exp(-X))
    _, t = tg.jvp(tg.vmap(softplus), (x,), (tg.asarray(Y),))
    np.testing.assert_allclose(t.numpy(), sig * Y, rtol=1e-12)
    np.testing.assert_allclose(tg.jacfwd(tg.vmap(softplus))(x).numpy(), np.diag(sig), rtol=1e-12)
    np.testing.assert_allclose(tg.linearize(tg.vmap(softplus), x)[1](tg.asarray(Y)).numpy(), sig * Y, rtol=1e-12)
    np.testing.assert_allclose(tg.jacrev(tg.vmap(softplus))(x).numpy(), np.diag(sig), rtol=1e-12)
    w = tg.asarray(Y)   # an unmapped primal, mapped tangents
    per_t = tg.vmap(lambda t: tg.jvp(softplus, (w,), (t,))[1])(tg.asarray(np.stack([X, 2 * X])))
    np.testing.assert_allclose(per_t.numpy(), np.stack([X, 2 * X]) / (1 + np.exp(-Y)), rtol=1e-12)
