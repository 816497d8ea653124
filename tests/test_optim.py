"""tg.optim: each optimizer against a hand-written numpy reference over several steps (momentum, Nesterov, bias
correction, decoupled weight decay, schedules), trace counts of a jitted train step, and the errors for trees that do
not match."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import optim
from tgfx.dtypes import dtypes

STEPS = 6


def params_np(seed: int = 0) -> dict:
    r = np.random.default_rng(seed)
    return {"w": r.standard_normal((3, 2)), "inner": {"b": r.standard_normal(2)}}


def grads_np(step: int) -> dict:
    """A different gradient at every step (not a function of the params: the update rule alone is under test)."""
    return params_np(100 + step)


def to_tg(tree: dict) -> dict:
    return tg.tree.tree_map(lambda a: tg.asarray(a), tree)


def run(opt: optim.GradientTransformation, steps: int = STEPS) -> dict:
    p = to_tg(params_np())
    state = opt.init(p)
    for t in range(steps):
        updates, state = opt.update(to_tg(grads_np(t)), state, p)
        p = optim.apply_updates(p, updates)
    assert int(state.count.item() if hasattr(state, "count") else steps) == steps
    return tg.tree.tree_map(lambda a: a.numpy(), p)


def leaves(tree: dict) -> list[np.ndarray]:
    return [tree["w"], tree["inner"]["b"]]


def assert_trees_close(got: dict, want: dict, rtol: float = 1e-12) -> None:
    for g, w in zip(leaves(got), leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-14)


# ---- numpy references, written from the papers' update rules ----
def np_sgd(lr: float | Callable, momentum: float = 0.0, nesterov: bool = False) -> dict:
    p = params_np()
    vel = {k: np.zeros_like(v) for k, v in [("w", p["w"]), ("b", p["inner"]["b"])]}
    for t in range(STEPS):
        g = grads_np(t)
        rate = lr(t) if callable(lr) else lr
        for k, (param, grad) in {"w": (p["w"], g["w"]), "b": (p["inner"]["b"], g["inner"]["b"])}.items():
            vel[k] = grad + momentum * vel[k]
            direction = grad + momentum * vel[k] if nesterov else (vel[k] if momentum else grad)
            param -= rate * direction
    return p


def np_adam(lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0,
            weight_decay: float = 0.0, decay_b: bool = True) -> dict:
    p = params_np()
    m = {"w": np.zeros((3, 2)), "b": np.zeros(2)}
    v = {"w": np.zeros((3, 2)), "b": np.zeros(2)}
    for t in range(1, STEPS + 1):
        g = grads_np(t - 1)
        for k, (param, grad) in {"w": (p["w"], g["w"]), "b": (p["inner"]["b"], g["inner"]["b"])}.items():
            m[k] = b1 * m[k] + (1 - b1) * grad
            v[k] = b2 * v[k] + (1 - b2) * grad ** 2
            m_hat, v_hat = m[k] / (1 - b1 ** t), v[k] / (1 - b2 ** t)
            step = m_hat / (np.sqrt(v_hat + eps_root) + eps)
            if weight_decay and (k == "w" or decay_b):
                step = step + weight_decay * param      # decoupled: added after the adaptive scaling
            param -= lr * step
    return p


# ---- against the references ----
@pytest.mark.x64
@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True), (0.5, True)])
def test_sgd_matches_numpy(momentum: float, nesterov: bool) -> None:
    assert_trees_close(run(optim.sgd(0.1, momentum, nesterov)), np_sgd(0.1, momentum, nesterov))


@pytest.mark.x64
def test_adam_matches_numpy() -> None:
    assert_trees_close(run(optim.adam(0.01)), np_adam(0.01))
    assert_trees_close(run(optim.adam(0.05, b1=0.5, b2=0.9, eps=1e-3, eps_root=1e-4)),
                       np_adam(0.05, 0.5, 0.9, 1e-3, 1e-4))


@pytest.mark.x64
def test_adamw_matches_numpy_with_decoupled_decay_and_mask() -> None:
    assert_trees_close(run(optim.adamw(0.01, weight_decay=0.1)), np_adam(0.01, weight_decay=0.1))
    masked = optim.adamw(0.01, weight_decay=0.1, mask=lambda p: tg.tree.tree_map(lambda x: x.ndim > 1, p))
    assert_trees_close(run(masked), np_adam(0.01, weight_decay=0.1, decay_b=False))


@pytest.mark.x64
def test_adamw_decay_is_not_rescaled_by_the_second_moment() -> None:
    """With zero gradients the moments stay 0, so Adam does not move and AdamW shrinks each param by exactly
    lr * wd * p per step; Adam with L2 folded into the gradient would instead move by about lr per step."""
    p = {"w": tg.asarray(np.array([2.0, -4.0]))}
    opt = optim.adamw(0.1, weight_decay=0.5)
    state = opt.init(p)
    zero = {"w": tg.asarray(np.zeros(2))}
    for _ in range(3):
        u, state = opt.update(zero, state, p)
        p = optim.apply_updates(p, u)
    np.testing.assert_allclose(p["w"].numpy(), np.array([2.0, -4.0]) * (1 - 0.1 * 0.5) ** 3, rtol=1e-12)
    u, _ = optim.adam(0.1).update(zero, optim.adam(0.1).init(p), p)
    assert np.all(u["w"].numpy() == 0)


@pytest.mark.x64
def test_schedule_gets_the_update_count_from_zero() -> None:
    seen = []

    def lr(count: tg.Tensor) -> tg.Tensor:
        seen.append(count)
        return 0.1 / (1.0 + count.astype(dtypes.float64))
    assert_trees_close(run(optim.sgd(lr, momentum=0.9)), np_sgd(lambda t: 0.1 / (1 + t), momentum=0.9))
    assert [int(c.item()) for c in seen] == list(range(STEPS))
    assert all(c.dtype == dtypes.int32 and c.shape == () for c in seen)


def np_linear(t: int, a: float, b: float, n: int, begin: int = 0) -> float:
    return a + (b - a) * min(max(t - begin, 0), n) / n


def np_cosine(t: int, a: float, n: int, alpha: float = 0.0) -> float:
    return a * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * min(t, n) / n)) + alpha)


def test_schedules_match_their_formulas() -> None:
    counts = list(range(0, 25, 3))
    cases = [
        (optim.linear_schedule(1.0, 0.1, 10, transition_begin=4), lambda t: np_linear(t, 1.0, 0.1, 10, 4)),
        (optim.cosine_decay_schedule(0.5, 12, alpha=0.1), lambda t: np_cosine(t, 0.5, 12, 0.1)),
        (optim.warmup_cosine_decay_schedule(0.0, 1.0, 5, 20, end_value=0.05),
         lambda t: np_linear(t, 0.0, 1.0, 5) if t < 5 else np_cosine(t - 5, 0.95, 15) + 0.05),
        (optim.constant_schedule(0.3), lambda t: 0.3),
    ]
    for schedule, ref in cases:
        got = [float(tnp.asarray(schedule(tg.asarray(np.int32(t)))).item()) for t in counts]
        np.testing.assert_allclose(got, [ref(t) for t in counts], rtol=1e-6, atol=1e-7)


@pytest.mark.x64
def test_clip_by_global_norm_and_chain() -> None:
    g = grads_np(0)
    norm = math.sqrt(sum(float((x ** 2).sum()) for x in leaves(g)))
    clip = optim.clip_by_global_norm(norm / 2)
    clipped, _ = clip.update(to_tg(g), clip.init(None))
    for c, x in zip(leaves(tg.tree.tree_map(lambda a: a.numpy(), clipped)), leaves(g), strict=True):
        np.testing.assert_allclose(c, x / 2, rtol=1e-6)
    unclipped, _ = optim.clip_by_global_norm(norm * 2).update(to_tg(g), optim.EmptyState())
    np.testing.assert_allclose(unclipped["w"].numpy(), g["w"], rtol=1e-12)
    big = {"h": tg.asarray(np.full(4, 300.0, np.float16))}          # its float16 sum of squares would overflow
    half, _ = optim.clip_by_global_norm(60.0).update(big, optim.EmptyState())
    assert half["h"].dtype == dtypes.float16
    np.testing.assert_allclose(half["h"].numpy(), 30.0, rtol=1e-3)
    chained = optim.chain(optim.clip_by_global_norm(1e9), optim.adam(0.01))
    p = to_tg(params_np())
    state = chained.init(p)
    for t in range(STEPS):
        u, state = chained.update(to_tg(grads_np(t)), state, p)
        p = optim.apply_updates(p, u)
    assert_trees_close(tg.tree.tree_map(lambda a: a.numpy(), p), np_adam(0.01), rtol=1e-9)


def test_half_precision_params_keep_their_dtype() -> None:
    p = {"w": tg.asarray(np.ones(4, np.float16))}
    opt = optim.adam(optim.linear_schedule(1e-2, 1e-3, 10))
    state = opt.init(p)
    u, state = opt.update({"w": tg.asarray(np.full(4, 0.5, np.float16))}, state, p)
    assert u["w"].dtype == dtypes.float16 and state.mu["w"].dtype == dtypes.float16
    new = optim.apply_updates(p, u)
    assert new["w"].dtype == dtypes.float16
    np.testing.assert_allclose(new["w"].numpy(), 1 - 1e-2, rtol=1e-3)


# ---- a jitted train step ----
@pytest.mark.x64
def test_jitted_train_step_traces_once() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((8, 3)), rng.standard_normal(8)
    A, B = tg.asarray(a), tg.asarray(b)

    def loss_fn(p: dict) -> tg.Tensor:
        r = A @ p["w"] + p["c"] - B
        return (r * r).mean()

    for opt in (optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 0.1, 3, 12), weight_decay=0.01),
                optim.sgd(0.05, momentum=0.9, nesterov=True)):
        @tg.jit
        def step(p: dict, s: object) -> tuple:
            loss, g = tg.value_and_grad(loss_fn)(p)
            u, s = opt.update(g, s, p)  # noqa: B023 - each loop iteration jits its own optimizer
            return optim.apply_updates(p, u), s, loss

        p = {"w": tg.asarray(np.zeros(3)), "c": tg.asarray(np.zeros(()))}
        state = opt.init(p)
        eager_p, eager_s = p, state
        kernels = []
        for _ in range(12):
            tg.counters.reset()
            p, state, loss = step(p, state)
            loss.block_until_ready()
            kernels.append(tg.counters.kernel_count)
            _, g = tg.value_and_grad(loss_fn)(eager_p)
            u, eager_s = opt.update(g, eager_s, eager_p)
            eager_p = optim.apply_updates(eager_p, u)
        assert step.trace_count == 1
        assert len(set(kernels[1:])) == 1          # every replay runs the same program
        assert int(state.count.item()) == 12
        np.testing.assert_allclose(p["w"].numpy(), eager_p["w"].numpy(), rtol=1e-10)


# ---- errors ----
def test_grads_that_do_not_match_the_state() -> None:
    p = to_tg(params_np())
    opt = optim.adam(0.1)
    state = opt.init(p)
    bad = {"w": p["w"], "inner": {"bias": p["inner"]["b"]}}
    with pytest.raises(ValueError, match=r"adam.update: grads do not have the structure of the params this state "
                                         r"was made for \(by init\); they differ at path \['inner'\]"):
        opt.update(bad, state, p)
    with pytest.raises(ValueError, match=r"sgd.update: grads do not have the structure.*path \['inner'\]"):
        optim.sgd(0.1, momentum=0.9).update(bad, optim.sgd(0.1, momentum=0.9).init(p), p)
    with pytest.raises(ValueError, match=r"apply_updates: updates do not have the structure of params; they differ "
                                         r"at path \['inner'\]"):
        optim.apply_updates(p, bad)


def test_optimizer_argument_errors() -> None:
    p = to_tg(params_np())
    with pytest.raises(ValueError, match="weight decay needs the params"):
        optim.adamw(0.1).update(p, optim.adamw(0.1).init(p))
    with pytest.raises(TypeError, match="params must be float Tensors, got one of dtype int32"):
        optim.adam(0.1).init({"steps": tg.asarray(np.zeros(2, np.int32))})
    with pytest.raises(ValueError, match=r"b2 must be in \[0, 1\), got 1.0"):
        optim.adam(0.1, b2=1.0)
    with pytest.raises(ValueError, match="nesterov=True needs momentum"):
        optim.sgd(0.1, nesterov=True)
    with pytest.raises(TypeError, match="learning_rate must be a float or a schedule"):
        optim.sgd("0.1")
    with pytest.raises(ValueError, match="weight decay mask must be a pytree of bools with the params' structure"):
        optim.adamw(0.1, mask={"w": True}).update(p, optim.adamw(0.1).init(p), p)
