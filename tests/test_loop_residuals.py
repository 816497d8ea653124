"""A differentiated loop's backward reads the forward's reductions (`control_grad._residuals`): the saving forward
stacks the body's REDUCE_AXIS results the VJP reads, and the backward scans them instead of recomputing them. The
gradients stay those of finite differences of numpy references, through scan, fori_loop and while_loop, second order,
vmap, jit and checkpoint (whose body still recomputes)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from helpers import numeric_grad

import tgfx as tg
import tgfx.numpy as tnp
import tgfx.transforms.control_grad as control_grad
from tgfx.ir.ops import Ops
from tgfx.lowering.inline import walk

pytestmark = pytest.mark.x64   # float64 values, for finite differences


@contextmanager
def no_residuals() -> Iterator[None]:
    """Within: no reduce is saved (the backward recomputes every one, as before residuals)."""
    ratio, control_grad.RESIDUAL_RATIO = control_grad.RESIDUAL_RATIO, 0
    try:
        yield
    finally:
        control_grad.RESIDUAL_RATIO = ratio


def loops(t: tg.Tensor) -> dict[str, list]:
    """The LOOP nodes of t's graph: the backward ones, the saving forward ones and the others."""
    out: dict[str, list] = {"backward": [], "saving": [], "plain": []}
    for u in t.uop.toposort():
        if u.op is Ops.LOOP:
            out["backward" if u.arg.name.endswith("_backward") else "saving" if u.arg.save else "plain"].append(u)
    return out


def reduces(body: object) -> list:
    return [u.arg[0] for u in walk(body) if u.op is Ops.REDUCE_AXIS]


def kernels(step: Callable, want: tg.Tensor) -> int:
    """The kernels a second call of the jitted `step` on C runs (checking its result)."""
    step(tg.asarray(C)).numpy()
    tg.counters.reset()
    np.testing.assert_allclose(step(tg.asarray(C)).numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    return tg.counters.kernel_count


def np_logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = a.max(axis, keepdims=True)
    return np.squeeze(np.log(np.exp(a - m).sum(axis, keepdims=True)) + m, axis)


# ---- sinkhorn: a fori_loop of two logsumexps ----
def sinkhorn(fori: Callable, lse: Callable, zeros: Callable) -> Callable:
    def loss(c: object) -> object:
        def update(i: object, fg: tuple) -> tuple:
            f, g = fg
            f = -0.5 * lse(g[None, :] - c / 0.5, 1)
            g = -0.5 * lse(f[:, None] - c / 0.5, 0)
            return f, g
        f, g = fori(0, 6, update, (zeros(c.shape[0]), zeros(c.shape[1])))
        return (f * f).sum() + (g * g * 0.5 + g).sum()
    return loss


def py_fori(lo: int, hi: int, body: Callable, init: object) -> object:
    for i in range(lo, hi):
        init = body(i, init)
    return init


tg_sinkhorn = sinkhorn(tg.lax.fori_loop, lambda a, ax: tg.nn.logsumexp(a, axis=ax), lambda n: tnp.zeros(n, "float64"))
np_sinkhorn = sinkhorn(py_fori, np_logsumexp, np.zeros)
C = np.random.default_rng(0).standard_normal((5, 4))


def test_the_backward_of_a_loop_of_logsumexps_runs_no_reduce_of_the_forward() -> None:
    """The forward stacks each logsumexp's row maxima and sums (4 residual ys of a row or a column each); the backward
    body keeps only the VJP's own sums (of the cotangents), no maximum, and has 2 kernels fewer."""
    g = tg.grad(tg_sinkhorn)(tg.asarray(C))
    found = loops(g)
    g.numpy()
    (bw,), (fwd,) = found["backward"], found["saving"]
    assert reduces(fwd.src[0]).count(Ops.MAX) == 2
    assert len(fwd.src[0].src) - fwd.arg.n_carry == 4   # the residual ys: two maxima, two sums
    assert sorted(u.shape for u in fwd.src[0].src[2:]) == [(1, 4), (1, 4), (5, 1), (5, 1)]
    assert reduces(bw.src[0]) == [Ops.ADD, Ops.ADD]
    with no_residuals():
        g_old = tg.grad(tg_sinkhorn)(tg.asarray(C))
        (bw_old,) = loops(g_old)["backward"]
        assert Counter(reduces(bw_old.src[0])) == {Ops.MAX: 2, Ops.ADD: 4}
        recomputed = kernels(tg.jit(tg.grad(tg_sinkhorn)), g)
    # the backward body's kernels, encoded twice (a device loop's body one way and back): 2 fewer each
    assert recomputed - kernels(tg.jit(tg.grad(tg_sinkhorn)), g) == 4
    np.testing.assert_allclose(g.numpy(), numeric_grad(np_sinkhorn, C), rtol=1e-6, atol=1e-8)


def test_value_and_grad_still_runs_the_forward_once() -> None:
    from tgfx.ir.uop import UOp
    from tgfx.lowering.control import merge_saved_loops
    from tgfx.lowering.inline import inline
    v, g = tg.value_and_grad(tg_sinkhorn)(tg.asarray(C))
    sink = merge_saved_loops(inline(UOp(Ops.SINK, None, (v.uop, g.uop))))
    assert sorted((u.arg.reverse, u.arg.save) for u in sink.toposort() if u.op is Ops.LOOP) == \
        [(False, True), (True, False)]
    assert v.item() == pytest.approx(np_sinkhorn(C), rel=1e-12)


# ---- scan and while_loop bodies with reductions ----
def hmm_loss(scan: Callable, lse: Callable) -> Callable:
    """An HMM's forward algorithm: a scan of logsumexps over a transition matrix, emissions as xs."""
    def loss(trans: object, emit: object) -> object:
        def step(alpha: object, e: object) -> tuple:
            alpha = lse(alpha[:, :, None] + trans[None], 1) + e
            return alpha, alpha.max(axis=1)
        alpha, peaks = scan(step, emit[0], emit[1:])
        return lse(alpha, 1).sum() + (peaks * peaks).sum() * 0.1
    return loss


def py_scan(f: Callable, init: object, xs: np.ndarray) -> tuple:
    ys = []
    for x in xs:
        init, y = f(init, x)
        ys.append(y)
    return init, np.stack(ys)


def test_scan_of_logsumexps_matches_finite_differences() -> None:
    rng = np.random.default_rng(1)
    trans, emit = rng.standard_normal((3, 3)), rng.standard_normal((6, 2, 3))
    f = hmm_loss(tg.lax.scan, lambda a, ax: tg.nn.logsumexp(a, axis=ax))
    ref = hmm_loss(py_scan, np_logsumexp)
    gt, ge = tg.grad(f, argnums=(0, 1))(tg.asarray(trans), tg.asarray(emit))
    (bw,) = loops(gt)["backward"]
    assert Ops.MAX not in reduces(bw.src[0])   # the maxima are read from the forward (the ys' one too)
    np.testing.assert_allclose(gt.numpy(), numeric_grad(lambda t: ref(t, emit), trans), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ge.numpy(), numeric_grad(lambda e: ref(trans, e), emit), rtol=1e-6, atol=1e-8)


def softmax_walk(while_loop: Callable, np_mode: bool) -> Callable:
    """A while loop (max_steps) whose body normalises a softmax and whose step count depends on the values."""
    xp = np if np_mode else tnp

    def loss(w: object, v0: object) -> object:
        def cond(c: tuple) -> object:
            return (c[1] < 7) & (c[0].sum() < 40.0)

        def body(c: tuple) -> tuple:
            v, n = c
            z = v @ w
            e = xp.exp(z - z.max(axis=-1, keepdims=True))
            return v + e / e.sum(axis=-1, keepdims=True) * 3.0, n + 1
        v, _ = while_loop(cond, body, (v0, xp.asarray(0) if np_mode else tnp.asarray(0)))
        return (v * v).sum()
    return loss


def py_while(cond: Callable, body: Callable, init: tuple) -> tuple:
    while bool(cond(init)):
        init = body(init)
    return init


def test_while_loop_with_a_softmax_matches_finite_differences() -> None:
    rng = np.random.default_rng(2)
    w, v0 = rng.standard_normal((3, 3)) * 0.5, rng.standard_normal((2, 3))
    f = softmax_walk(lambda c, b, i: tg.lax.while_loop(c, b, i, max_steps=10), False)
    ref = softmax_walk(py_while, True)
    gw, gv = tg.grad(f, argnums=(0, 1))(tg.asarray(w), tg.asarray(v0))
    (bw,) = loops(gw)["backward"]
    assert bw.arg.dynamic and Ops.MAX not in reduces(bw.src[0])
    np.testing.assert_allclose(gw.numpy(), numeric_grad(lambda a: ref(a, v0), w), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gv.numpy(), numeric_grad(lambda a: ref(w, a), v0), rtol=1e-6, atol=1e-8)
    got = tg.jit(tg.grad(f, argnums=(0, 1)))(tg.asarray(w), tg.asarray(v0))
    np.testing.assert_allclose(got[0].numpy(), gw.numpy(), rtol=1e-12, atol=1e-12)


# ---- what the policy keeps ----
def test_a_reduce_of_the_consts_only_or_over_the_budget_is_recomputed() -> None:
    """A reduce of the loop's constants is the same every step (not saved), and residuals stay within
    RESIDUAL_RATIO times the carries: a matmul product 8 times a carry's size is recomputed."""
    rng = np.random.default_rng(3)
    w, x = tg.asarray(rng.standard_normal((4, 32))), tg.asarray(rng.standard_normal((2, 4)))

    def f(w: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
        def body(i: object, c: tg.Tensor) -> tg.Tensor:
            scale = (w * w).sum()   # the consts only
            return tnp.tanh((c @ w)[:, :4] / scale)
        return tg.lax.fori_loop(0, 3, body, x).sum()
    g = tg.grad(f)(w, x)
    (fwd,) = loops(g)["saving"]
    assert len(fwd.src[0].src) == fwd.arg.n_carry   # (2, 32) = 8 x the carry's (2, 4): over the budget of 4
    ratio, control_grad.RESIDUAL_RATIO = control_grad.RESIDUAL_RATIO, 8
    try:
        g8 = tg.grad(f)(w, x)
    finally:
        control_grad.RESIDUAL_RATIO = ratio
    (fwd8,) = loops(g8)["saving"]
    assert [u.size for u in fwd8.src[0].src[fwd8.arg.n_carry:]] == [2 * 32]   # the product, not the consts' sum
    np.testing.assert_allclose(g8.numpy(), g.numpy(), rtol=1e-12)


# ---- other transforms ----
def test_second_order_through_a_loop_with_residuals() -> None:
    """grad of grad: the first backward reads the residual ys, whose cotangents flow back through the forward; and the
    hessian (jacfwd of jacrev)."""
    c = tg.asarray(C)
    unrolled = sinkhorn(py_fori, lambda a, ax: tg.nn.logsumexp(a, axis=ax), lambda n: tnp.zeros(n, "float64"))
    got = tg.grad(lambda c: (tg.grad(tg_sinkhorn)(c) ** 2).sum())(c)
    want = tg.grad(lambda c: (tg.grad(unrolled)(c) ** 2).sum())(c)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-12)
    # forward over reverse: the backward's residual slices get tangents from the forward's JVP
    np.testing.assert_allclose(tg.hessian(tg_sinkhorn)(c).numpy(), tg.hessian(unrolled)(c).numpy(), rtol=1e-9,
                               atol=1e-12)


def test_vmap_of_grad_and_grad_of_vmap() -> None:
    cs = np.random.default_rng(4).standard_normal((3, 5, 4))
    want = np.stack([tg.grad(tg_sinkhorn)(tg.asarray(c)).numpy() for c in cs])
    np.testing.assert_allclose(tg.vmap(tg.grad(tg_sinkhorn))(tg.asarray(cs)).numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tg.grad(lambda c: tg.vmap(tg_sinkhorn)(c).sum())(tg.asarray(cs)).numpy(), want,
                               rtol=1e-10, atol=1e-12)


def test_vmap_of_grad_of_a_while_loop_whose_examples_stop_at_different_steps() -> None:
    """A batched predicate: the forward's residual ys hold zeros at the steps an example did not take, and the
    backward, which takes only each example's own steps, never reads them."""
    rng = np.random.default_rng(7)
    w, v0 = rng.standard_normal((3, 3)) * 0.5, rng.standard_normal((4, 2, 3)) * 3 + 4
    f = softmax_walk(lambda c, b, i: tg.lax.while_loop(c, b, i, max_steps=10), False)
    ref = softmax_walk(py_while, True)
    # each step adds 3 to each row's sum: an example stops after min(7, ceil((40 - sum) / 6)) steps
    assert len({min(7, max(0, int(np.ceil((40 - v.sum()) / 6)))) for v in v0}) > 1
    got = tg.vmap(tg.grad(f, argnums=(0, 1)), in_axes=(None, 0))(tg.asarray(w), tg.asarray(v0))
    for gw, gv, v in zip(got[0].numpy(), got[1].numpy(), v0, strict=True):
        np.testing.assert_allclose(gw, numeric_grad(lambda a, v=v: ref(a, v), w), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(gv, numeric_grad(lambda a: ref(w, a), v), rtol=1e-6, atol=1e-8)


def test_a_checkpointed_body_still_recomputes() -> None:
    """Reduces inside `tg.checkpoint` are the checkpoint's to recompute: none is saved, and the gradient is the same."""
    rng = np.random.default_rng(5)
    x, xs = tg.asarray(rng.standard_normal((2, 3))), tg.asarray(rng.standard_normal((4, 2, 3)))

    def cell(h: tg.Tensor, e: tg.Tensor) -> tg.Tensor:
        return tg.nn.logsumexp(h[:, :, None] + e[:, None, :], axis=1)

    def loss(cell: Callable) -> Callable:
        return lambda x: tg.lax.scan(lambda h, e: (cell(h, e), None), x, xs)[0].sum()
    g = tg.grad(loss(tg.checkpoint(cell)))(x)
    (fwd,) = loops(g)["saving"]
    assert len(fwd.src[0].src) == fwd.arg.n_carry
    plain = tg.grad(loss(cell))(x)
    (fwd_plain,) = loops(plain)["saving"]
    assert len(fwd_plain.src[0].src) > fwd_plain.arg.n_carry
    np.testing.assert_allclose(g.numpy(), plain.numpy(), rtol=1e-12)


def test_jvp_and_linearize_take_the_forward_mode_way() -> None:
    c, t = tg.asarray(C), tg.asarray(np.random.default_rng(6).standard_normal(C.shape))
    _, dy = tg.jvp(tg_sinkhorn, (c,), (t,))
    fd = (np_sinkhorn(C + 1e-6 * t.numpy()) - np_sinkhorn(C - 1e-6 * t.numpy())) / 2e-6
    assert dy.item() == pytest.approx(fd, rel=1e-6)
    _, lin = tg.linearize(tg_sinkhorn, c)
    assert lin(t).item() == pytest.approx(fd, rel=1e-6)


def test_a_loop_linear_in_its_carry_is_not_run_again_for_its_backward() -> None:
    """The VJP of a step linear in its carry (a + sin(x), a * 0.9) reads no saved carry: the backward loop takes
    zeros for those operands, so the saving forward (a second run of the loop, kept for the saved carries only) is
    not built, and jit runs one kernel less (5, was 6). A step that reads its carry nonlinearly still saves it."""
    x = tg.asarray(np.array([0.5, 1.5, 2.0]))

    def linear(v: tg.Tensor) -> tg.Tensor:
        return tg.lax.fori_loop(0, 10, lambda i, a: a * 0.9 + tnp.sin(v), tnp.zeros(3)).sum()

    def squared(v: tg.Tensor) -> tg.Tensor:
        return tg.lax.fori_loop(0, 10, lambda i, a: a * a * 0.1 + tnp.sin(v), tnp.zeros(3)).sum()
    g = tg.grad(linear)(x)
    assert [len(v) for v in loops(g).values()] == [1, 0, 0]
    np.testing.assert_allclose(g.numpy(), np.cos(x.numpy()) * sum(0.9 ** k for k in range(10)), rtol=1e-12)
    assert len(loops(tg.grad(squared)(x))["saving"]) == 1
    np.testing.assert_allclose(tg.grad(squared)(x).numpy(), numeric_grad(lambda v: squared(tg.asarray(v)).item(),
                                                                            x.numpy()), rtol=1e-6)
