"""`tg.checkpoint` / `tg.remat` (jax.checkpoint): the same values and derivatives, through every transform."""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp


def rand(*shape: int, seed: int = 0) -> tg.Tensor:
    return tg.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def block(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
    return tnp.sin(tnp.tanh(x @ w)).sum()


def test_values_and_gradients_are_the_function_s() -> None:
    x, w = rand(4, 3), rand(3, 2, seed=1)
    assert tg.checkpoint(block)(x, w).item() == pytest.approx(block(x, w).item(), rel=1e-6)
    for got, want in zip(tg.grad(tg.checkpoint(block), argnums=(0, 1))(x, w), tg.grad(block, argnums=(0, 1))(x, w),
                         strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert tg.remat is tg.checkpoint


def test_the_backward_is_built_from_the_inputs() -> None:
    # the custom backward runs f's VJP from the inputs it kept: a counter of f's runs sees the second run
    runs = []

    def f(w: tg.Tensor) -> tg.Tensor:
        runs.append(1)
        return (tnp.tanh(w) ** 2).sum()
    tg.grad(tg.checkpoint(f))(rand(5))
    assert len(runs) == 2


def test_under_jit_vmap_and_second_order() -> None:
    x, w = rand(4, 3), rand(3, 2, seed=1)
    want = tg.grad(block, argnums=1)(x, w).numpy()
    np.testing.assert_allclose(tg.jit(tg.grad(tg.checkpoint(block), argnums=1))(x, w).numpy(), want, rtol=1e-5)
    cube = tg.checkpoint(lambda v: (v ** 3).sum())
    np.testing.assert_allclose(tg.hessian(cube)(tnp.arange(3.0)).numpy(), np.diag([0.0, 6.0, 12.0]))
    np.testing.assert_allclose(tg.vmap(tg.grad(cube))(tnp.ones((2, 3))).numpy(), np.full((2, 3), 3.0))


def test_a_checkpointed_scan_body() -> None:
    def step(f: object) -> object:
        return lambda c, xi: (f(c, xi), c.sum())

    def body(c: tg.Tensor, xi: tg.Tensor) -> tg.Tensor:
        return tnp.sin(c * xi + 1.0)

    def loss(f: object) -> object:
        return lambda c: tg.lax.scan(step(f), c, tnp.arange(1.0, 4.0))[0].sum()
    c = rand(2)
    np.testing.assert_allclose(tg.grad(loss(tg.checkpoint(body)))(c).numpy(), tg.grad(loss(body))(c).numpy(),
                               rtol=1e-6)


def test_values_it_closes_over_get_their_gradients() -> None:
    # a checkpointed function reading weights from its closure (a scan body's, a layer's): the custom rule gave
    # cotangents to its arguments only, so the weights' gradient was zero, silently (JAX differentiates them)
    x = rand(4, 3)

    def loss(w: tg.Tensor, remat: bool) -> tg.Tensor:
        layer = (lambda v: tnp.sin(v @ w)) if not remat else tg.checkpoint(lambda v: tnp.sin(v @ w))
        return layer(x).sum()

    def scan_loss(w: tg.Tensor, remat: bool) -> tg.Tensor:
        body = lambda c, xi: (tnp.tanh(c * w[:, 0] + xi), c)   # noqa: E731
        return tg.lax.scan(tg.checkpoint(body) if remat else body, tnp.zeros(3), x)[1].sum()
    w = rand(3, 2, seed=1)
    for f in (loss, scan_loss):
        want = tg.grad(f)(w, False).numpy()
        assert np.abs(want).sum() > 0
        for got in (tg.grad(f)(w, True), tg.jit(tg.grad(f), static_argnums=1)(w, True)):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    # second order, and under vmap; a value computed from the closed-over one is differentiated through to it
    cubic = lambda v: (lambda u: tg.checkpoint(lambda z: (z * v ** 3).sum())(u))(tnp.ones(3))   # noqa: E731
    np.testing.assert_allclose(tg.hessian(cubic)(tnp.arange(3.0)).numpy(), np.diag([0.0, 6.0, 12.0]))
    np.testing.assert_allclose(tg.vmap(tg.grad(lambda v: tg.checkpoint(lambda: (v * v).sum())()))(
        tnp.ones((2, 3))).numpy(), np.full((2, 3), 2.0))
    # a checkpoint inside one: the inner call's body (its own graph, its own PARAMs) is no value closed over
    nested = lambda w: tg.checkpoint(lambda v: tg.checkpoint(lambda u: tnp.sin(u @ w))(v).sum())(x)   # noqa: E731
    np.testing.assert_allclose(tg.grad(nested)(w).numpy(), tg.grad(loss)(w, False).numpy(), rtol=1e-5, atol=1e-6)


def test_closed_over_values_whose_uses_are_built_anew_each_run() -> None:
    # the rule runs the function again on the custom call's inputs; a node computed from a closed-over value and a
    # NumPy argument, or a constant the function makes, is a new node each run, so passing that node (not the
    # closed-over value) as an input of the call left the value's gradient zero, silently
    x, c = np.array([0.5, -0.3, 1.0], np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    y = rand(3, seed=2)
    numpy_arg = lambda y: tg.checkpoint(lambda a: tnp.tanh(a) * y)(x).sum()   # noqa: E731
    np.testing.assert_allclose(tg.grad(numpy_arg)(y).numpy(), np.tanh(x), rtol=1e-6)
    nested = lambda y: tg.checkpoint(lambda a: tg.checkpoint(lambda u: tnp.tanh(u) * y)(a))(x).sum()   # noqa: E731
    np.testing.assert_allclose(tg.grad(nested)(y).numpy(), np.tanh(x), rtol=1e-6)
    made_inside = lambda y: tg.checkpoint(lambda a: tnp.tanh(a) + y * np.array(c))(tnp.asarray(x)).sum()   # noqa: E731
    np.testing.assert_allclose(tg.jit(tg.grad(made_inside))(y).numpy(), c)


def test_a_constant_it_makes_inside_a_branch_or_a_loop_body() -> None:
    # the backward of a branch or a loop body runs the function again, and a NumPy constant in it is a new buffer of
    # that backward body, where it read as zeros: wrong gradients, silently. Such buffers are operands of the backward
    c = np.array([0.5, -1.0, 2.0], np.float32)
    x, y = rand(3), rand(3, seed=1)
    f = lambda a, b: tg.checkpoint(lambda t: tnp.tanh(t) * c)(a) * b   # noqa: E731
    branch = lambda a, b: tg.lax.cond(True, f, lambda a, b: a, a, b).sum()   # noqa: E731
    gx, gy = tg.grad(branch, argnums=(0, 1))(x, y)
    t = np.tanh(x.numpy())
    np.testing.assert_allclose(gx.numpy(), (1 - t ** 2) * c * y.numpy(), rtol=1e-5)
    np.testing.assert_allclose(gy.numpy(), t * c, rtol=1e-5)
    steps = tnp.asarray([0.5, 1.0])
    loop = lambda a, b: tg.lax.scan(lambda s, k: (s + f(a * k, b).sum(), None), 0.0, steps)[0]   # noqa: E731
    gx, gy = tg.grad(loop, argnums=(0, 1))(x, y)
    want_x = sum(k * (1 - np.tanh(k * x.numpy()) ** 2) * c * y.numpy() for k in (0.5, 1.0))
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-5)
    np.testing.assert_allclose(gy.numpy(), sum(np.tanh(k * x.numpy()) * c for k in (0.5, 1.0)), rtol=1e-5)


def test_a_constant_it_makes_inside_a_loop_body_under_forward_mode() -> None:
    # the same for a loop's JVP (forward mode carries a tangent beside each carry, in a body the rule builds anew)
    c = np.array([0.5, -1.0, 2.0], np.float32)
    x, y = rand(3), rand(3, seed=1)
    f = lambda a, b: tg.checkpoint(lambda t: tnp.tanh(t) * c)(a) * b   # noqa: E731
    twice = lambda a: tg.lax.while_loop(lambda s: s[1] < 2, lambda s: (f(s[0], y), s[1] + 1), (a, 0))[0]   # noqa: E731
    _, t = tg.jvp(twice, (x,), (tnp.ones(3),))
    once = np.tanh(x.numpy()) * c * y.numpy()
    want = (1 - np.tanh(once) ** 2) * c * y.numpy() * (1 - np.tanh(x.numpy()) ** 2) * c * y.numpy()
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)
    steps = tnp.asarray([0.5, 1.0])
    _, t = tg.jvp(lambda a: tg.lax.scan(lambda s, k: (s + f(a * k, y).sum(), None), 0.0, steps)[0], (x,), (y,))
    dx = sum(k * (1 - np.tanh(k * x.numpy()) ** 2) * c * y.numpy() for k in (0.5, 1.0))
    np.testing.assert_allclose(t.numpy(), (dx * y.numpy()).sum(), rtol=1e-5)


def test_forward_mode_through_a_checkpointed_while_loop() -> None:
    # checkpoint's rule pulls back with vjp, which built a reverse-mode pullback even for forward mode to transpose,
    # and a while loop has none: jvp raised where JAX's JVP of a checkpoint is the function's
    def loop(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:   # a * b ** 3 + b ** 2 + b + 1
        return tg.lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * b + 1.0, c[1] + 1), (a, 0))[0]
    x, y = rand(3), rand(3, seed=1)
    tx, ty = rand(3, seed=2), rand(3, seed=3)
    a, b = x.numpy(), y.numpy()
    want = tx.numpy() * b ** 3 + ty.numpy() * (3 * a * b ** 2 + 2 * b + 1)
    _, t = tg.jvp(tg.checkpoint(loop), (x, y), (tx, ty))
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)
    with pytest.raises(TypeError, match="max_steps"):   # reverse mode still has no way through it
        tg.grad(lambda a: tg.checkpoint(loop)(a, y).sum())(x)


def test_static_and_keyword_arguments() -> None:
    x, w = rand(4, 3), rand(3, 2, seed=1)
    power = tg.checkpoint(lambda x, n, w=None: (tnp.tanh(x @ w) ** n).sum(), static_argnums=(1,))
    np.testing.assert_allclose(tg.grad(lambda w: power(x, 3, w=w))(w).numpy(),
                               tg.grad(lambda w: (tnp.tanh(x @ w) ** 3).sum())(w).numpy(), rtol=1e-5)
    # decorator form with arguments; an integer array argument gets no gradient and is still read
    pick = tg.checkpoint(static_argnums=())(lambda v, i: (v[i] ** 2).sum())
    np.testing.assert_array_equal(tg.grad(pick)(tnp.arange(4.0), tg.asarray(np.int32(2))).numpy(), [0, 0, 4, 0])


def test_errors_name_what_is_wrong() -> None:
    with pytest.raises(TypeError, match="expected a function"):
        tg.checkpoint(3)
    with pytest.raises(TypeError, match="static_argnums must be ints"):
        tg.checkpoint(lambda x: x, static_argnums=("x",))
    with pytest.raises(ValueError, match=r"static_argnums \[2\] out of range"):
        tg.checkpoint(lambda x: x, static_argnums=(2,))(tnp.ones(2))


def attention_block(w: tg.Tensor, h: tg.Tensor) -> tg.Tensor:
    q = h @ w
    return h + tg.nn.softmax(q @ tnp.swapaxes(h, -1, -2)) @ h


def softmax_block(w: tg.Tensor, h: tg.Tensor) -> tg.Tensor:
    return h + tg.nn.softmax(h @ w)


def layers(block: object, remat: bool) -> object:
    def loss(ws: list, x: tg.Tensor) -> tg.Tensor:
        h = x
        for w in ws:
            h = (tg.checkpoint(block) if remat else block)(w, h)
        return (h * h).sum()
    return loss


@pytest.mark.x64
@pytest.mark.parametrize("block", [softmax_block, attention_block])
@pytest.mark.parametrize("n", [2, 3])
def test_checkpointed_layers_with_a_stop_gradient_under_jit(block: object, n: int) -> None:
    # softmax shifts by a stop_gradient(max): layer 2's backward pulls back from layer 1's output, which holds that
    # mark; stripped as the pullback left, it rebuilt the placeholder of that output, which stayed in the gradient
    # (an escaped tracer under jit, a PARAM inside a kernel in a scan body). Eager grad read the placeholder's value
    ws = [rand(8, 8, seed=1 + i) * 0.5 for i in range(n)]
    x = rand(5, 8)
    want = tg.grad(layers(block, False))(ws, x)
    for got in (tg.grad(layers(block, True))(ws, x), tg.jit(tg.grad(layers(block, True)))(ws, x)):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    # and against central differences, in float64, along a random direction
    ws64 = [tg.asarray(w.numpy().astype(np.float64)) for w in ws]
    x64 = tg.asarray(x.numpy().astype(np.float64))
    ds = [np.random.default_rng(10 + i).standard_normal(w.shape) for i, w in enumerate(ws)]
    g64 = tg.jit(tg.grad(layers(block, True)))(ws64, x64)
    loss, eps = layers(block, False), 1e-6
    fd = (loss([tg.asarray(w.numpy() + eps * d) for w, d in zip(ws64, ds, strict=True)], x64).item()
          - loss([tg.asarray(w.numpy() - eps * d) for w, d in zip(ws64, ds, strict=True)], x64).item()) / (2 * eps)
    assert sum(float(np.vdot(g.numpy(), d)) for g, d in zip(g64, ds, strict=True)) == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("block", [softmax_block, attention_block])
def test_checkpointed_layers_in_a_scan_body_under_jit(block: object) -> None:
    # gradient accumulation over microbatches, as a training step writes it
    ws = [rand(8, 8, seed=1 + i) * 0.5 for i in range(2)]
    xs = rand(3, 2, 5, 8)

    def step(remat: bool) -> object:
        def run(ws: list, xs: tg.Tensor) -> list:
            def micro(acc: list, x: tg.Tensor) -> tuple:
                g = tg.grad(layers(block, remat))(ws, x)
                return [a + b for a, b in zip(acc, g, strict=True)], None
            return tg.lax.scan(micro, [tnp.zeros_like(w) for w in ws], xs)[0]
        return run
    want = step(False)(ws, xs)
    for g, w in zip(tg.jit(step(True))(ws, xs), want, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


def test_checkpointed_layers_under_vmap_and_second_order() -> None:
    ws = [rand(8, 8, seed=1 + i) * 0.5 for i in range(2)]
    xs = rand(2, 5, 8)
    per_example = lambda remat: tg.vmap(tg.grad(layers(softmax_block, remat)), in_axes=(None, 0))   # noqa: E731
    want = per_example(False)(ws, xs)
    for g, w in zip(tg.jit(per_example(True))(ws, xs), want, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    small = [rand(3, 3, seed=1 + i) * 0.5 for i in range(2)]
    hess = lambda remat: tg.hessian(lambda x: layers(softmax_block, remat)(small, x))   # noqa: E731
    x = rand(2, 3)
    np.testing.assert_allclose(tg.jit(hess(True))(x).numpy(), hess(False)(x).numpy(), rtol=1e-5, atol=1e-5)


def test_jax_code_naming_a_checkpoint_policy_runs_with_the_same_values_and_gradients():
    """`jax.checkpoint(f, policy=jax.checkpoint_policies.X)` is how JAX code checkpoints a scan's layers; the names
    exist (tgfx's checkpoint does not read the policy: the values and gradients are those without it), and each policy
    says what JAX's says when asked about a primitive."""
    rng = np.random.default_rng(0)
    ws = tg.asarray(rng.standard_normal((4, 3, 3)).astype(np.float32))
    x = tg.asarray(rng.standard_normal((2, 3)).astype(np.float32))

    def block(h: tg.Tensor, w: tg.Tensor) -> tuple[tg.Tensor, None]:
        return tnp.tanh(tg.ad_checkpoint.checkpoint_name(h @ w, "pre")), None

    def loss(ws: tg.Tensor, body: object) -> tg.Tensor:
        return (tg.lax.scan(body, x, ws)[0] ** 2).sum()
    want = tg.grad(loss)(ws, block)
    p = tg.checkpoint_policies
    for policy in (p.dots_with_no_batch_dims_saveable, p.nothing_saveable, p.everything_saveable, p.dots_saveable,
                   p.save_only_these_names("pre"), p.save_anything_except_these_names("pre"),
                   p.save_from_both_policies(p.dots_saveable, p.nothing_saveable)):
        got = tg.grad(loss)(ws, tg.checkpoint(block, policy=policy))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)

    class Prim:
        name = "dot_general"
    plain, batched = ((((1,), (0,)), ((), ())), (((2,), (1,)), ((0,), (0,))))
    assert p.dots_with_no_batch_dims_saveable(Prim(), dimension_numbers=plain)
    assert not p.dots_with_no_batch_dims_saveable(Prim(), dimension_numbers=batched)
    assert p.dots_saveable(Prim()) and not p.nothing_saveable(Prim()) and p.everything_saveable(Prim())
    assert p.save_only_these_names("pre")(Prim(), name="pre") and not p.save_only_these_names("pre")(Prim(), name="q")
    assert tg.ad_checkpoint.checkpoint is tg.checkpoint
    with pytest.raises(TypeError, match="checkpoint_name: the name must be a str"):
        tg.ad_checkpoint.checkpoint_name(x, 3)
