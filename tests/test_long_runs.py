"""A computation longer than the wait timeout is healthy: waits give up only when no device makes progress."""
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import numpy as np, tgfx as tg, tgfx.numpy as tnp
    from tgfx.devices.hcq import DEFAULT_TIMEOUT_S
    assert DEFAULT_TIMEOUT_S == 0.05
    rng = np.random.default_rng(0)
    a = tg.asarray(rng.standard_normal((2048, 2048)).astype(np.float32) / 45)
    big = (a @ a).numpy()            # one kernel longer than the timeout
    np.testing.assert_allclose(big[:4, :4], (a.numpy() @ a.numpy())[:4, :4], rtol=1e-3, atol=1e-4)
    w = tg.asarray(rng.standard_normal((512, 512)).astype(np.float32) / 23)
    step = tg.jit(lambda x: tg.lax.fori_loop(0, 60, lambda i, x: tnp.tanh(x @ w), x))
    x = tg.asarray(rng.standard_normal((512, 512)).astype(np.float32))
    out = step(x).numpy()            # a device loop of many kernels, far longer than the timeout
    ref = x.numpy()
    for _ in range(60):
        ref = np.tanh(ref @ w.numpy())
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-4)
    print("ok")
""")


def test_a_computation_longer_than_the_wait_timeout_completes() -> None:
    env = {**os.environ, "TGFX_WAIT_TIMEOUT": "0.05"}
    run = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


def test_an_eager_value_chained_over_thousands_of_steps_is_read_at_the_end() -> None:
    """`r = 0.9 * r + 0.1 * loss` in an eager loop, read once after 3,000 steps: the lazy graph was 9,000 ops deep
    (a RecursionError hashing it, at 200 steps; after that, one fused kernel of 9,000 ops, 5 s to compile and a new
    one for every length). An eager value that deep is computed when it is made (`tensor.LAZY_DEPTH`): the same
    piece of chain each time, so a handful of compiles; the value is numpy's."""
    import numpy as np

    import tgfx as tg
    from tgfx.counters import counters
    loss = tg.asarray(np.float32(2.0))
    r, want = tg.asarray(np.float32(0.0)), np.float32(0.0)
    counters.reset()
    for i in range(3000):
        r = r * 0.9 + loss * (0.1 + (i % 3) * 0.01)
        want = want * np.float32(0.9) + np.float32(2.0) * np.float32(0.1 + (i % 3) * 0.01)
    assert abs(float(r) - float(want)) < 1e-4
    assert counters.compile_count <= 6


def test_a_trace_thousands_of_ops_deep_lowers() -> None:
    """A jitted Python loop of 1,500 steps: a graph as deep, hashed, scheduled and lowered without recursing per
    level (UOp.key, shape and the kernel's range dependencies were recursive)."""
    import numpy as np

    import tgfx as tg

    def f(x):  # noqa: ANN001, ANN202
        for _ in range(1500):
            x = x * 0.999 + 0.001
        return x
    x = np.linspace(0, 1, 8, dtype=np.float32)
    want = x.copy()
    for _ in range(1500):
        want = want * np.float32(0.999) + np.float32(0.001)
    np.testing.assert_allclose(tg.jit(f)(tg.asarray(x)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_a_step_on_an_eagerly_gathered_batch_replays_and_keeps_its_learning_rate_in_its_own_buffers(monkeypatch):
    """A training loop: each step's batch gathered eagerly (`x[perm[i:i + b]]`, a lazy value when the step is called)
    and its learning rate a new Python float. The step replays its program (the fast path: no PyTreeDef built) after
    computing the batch, and writes the rate into the program's own scalar buffers. A lazy argument sent every call
    down the general path, which made each step's rate an interned constant buffer of its own: 20,000 steps of a user's
    run held 4,096 of them (the pool's bound), one allocated and filled each step."""
    import numpy as np

    import tgfx as tg
    import tgfx.numpy as tnp
    import tgfx.transforms.jit as jit_module
    from tgfx.lowering import constants

    rng = np.random.default_rng(0)
    xs = rng.standard_normal((32, 4)).astype(np.float32)
    perm = rng.permutation(32).astype(np.int32)
    x, p = tg.asarray(xs), tg.asarray(perm)
    step = tg.jit(lambda w, xb, lr: w - lr * tnp.tanh(xb @ w).sum(axis=0))
    w, want = tg.asarray(np.ones(4, np.float32)), np.ones(4, np.float32)

    def run(i: int, lr: float) -> None:
        nonlocal w, want
        xb = x[p[(i % 4) * 8:(i % 4) * 8 + 8]]   # four batches: the eager gather's constants are the same each epoch
        w = step(w, xb, lr)
        want = want - np.float32(lr) * np.tanh(xs[perm[(i % 4) * 8:(i % 4) * 8 + 8]] @ want).sum(axis=0)

    for i in range(8):   # traces, then finds its fast signature
        run(i, 0.01)
    pool = len(constants._pool)
    calls = []
    real_flatten = jit_module.tree_flatten
    monkeypatch.setattr(jit_module, "tree_flatten", lambda *a, **k: calls.append(1) or real_flatten(*a, **k))
    for i in range(8, 108):
        run(i, 0.01 / (1 + i))   # a learning-rate schedule: a new value every step
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-4, atol=1e-5)
    assert calls == [] and step.trace_count == 1
    assert len(constants._pool) == pool


def test_an_eager_training_loop_never_read_computes_each_step_once() -> None:
    """JAX's pytrees tutorial trains an MLP eagerly for 100 steps and reads the loss at the end. The parameters are
    never read: when one grew `tensor.LAZY_DEPTH` deep it was computed alone, and the others (larger, or not nodes of
    its graph but readers of it) kept the whole history, which they computed again when they grew deep in turn:
    6,832 kernels for 90 steps here (the tutorial's 164 s, JAX's 14 s). Held Tensors that share a deep graph's
    history are computed with it, so every parameter's graph stays a few steps long; the values are those of the
    loop read at every step."""
    import numpy as np

    import tgfx as tg
    import tgfx.numpy as tnp
    from tgfx.counters import counters
    rng = np.random.default_rng(0)
    init = [dict(w=(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), b=np.ones(b, np.float32))
            for a, b in ((1, 16), (16, 16), (16, 1))]
    x = rng.standard_normal((32, 1)).astype(np.float32)

    def loss(params, x, y):
        *hidden, last = params
        for layer in hidden:
            x = tg.nn.relu(x @ layer["w"] + layer["b"])
        return tnp.mean((x @ last["w"] + last["b"] - y) ** 2)

    def train(read_every_step: bool) -> list:
        params = init
        for _ in range(90):
            grads = tg.grad(loss)(params, x, x ** 2)
            params = tg.tree.map(lambda p, g: p - 0.01 * g, params, grads)
            if read_every_step:
                tg.block_until_ready(params)
        return params
    counters.reset()
    lazy = train(False)
    assert counters.kernel_count < 2500
    assert max(len(p.uop.toposort()) for p in tg.tree.leaves(lazy)) < 2000
    for got, want in zip(tg.tree.leaves(lazy), tg.tree.leaves(train(True)), strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_a_training_loop_holds_the_same_buffers_nodes_and_code_after_30_45_and_60_epochs() -> None:
    """A user's loop for 180 steps: a shuffle per epoch, batches gathered eagerly (8, 8, then a smaller last one: two
    traces), a key split per step, a learning-rate schedule in Python, float(loss) each step, a second jitted function
    (an evaluation) every 10 epochs. What the process holds (device buffers, live UOps, interned constants, compiled
    code, compiles) is the same after 30, 45 and 60 epochs: nothing grows with the steps. (Each epoch's new rate was
    an interned constant buffer more, to 4,096 of them: 20,000 steps of such a run held 4,637 buffers, 723 now.)"""
    import gc
    import math

    import numpy as np

    import tgfx as tg
    import tgfx.numpy as tnp
    from tgfx.devices.programs import Buffer
    from tgfx.ir import uop
    from tgfx.lowering import constants
    from tgfx.lowering.compile import code_stats

    def held() -> dict[str, int]:
        gc.collect()
        return {"buffers": sum(1 for o in gc.get_objects() if type(o) is Buffer), "nodes": len(uop._cache),
                "constants": len(constants._pool), "code": code_stats().kernels, "compiles": tg.counters.compile_count}

    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((20, 4)).astype(np.float32), rng.integers(0, 3, 20).astype(np.int32)
    x, y = tg.asarray(xs), tg.asarray(ys)

    @tg.jit
    def step(w, xb, yb, lr, key):  # noqa: ANN001, ANN202
        def loss(w):  # noqa: ANN001, ANN202
            logits = xb @ w * tg.random.bernoulli(key, 0.9, (xb.shape[0], 3))
            return -tnp.mean(tnp.take_along_axis(tg.nn.log_softmax(logits), yb[:, None], axis=1))
        value, grad = tg.value_and_grad(loss)(w)
        return w - lr * grad, value

    evaluate = tg.jit(lambda w: (tnp.argmax(x @ w, axis=1) == y).mean())
    w, key, seen = tg.asarray(np.zeros((4, 3), np.float32)), tg.random.key(0), []
    for epoch in range(60):
        key, k = tg.random.split(key)
        perm = tg.random.permutation(k, 20)
        for i in range(0, 20, 8):
            key, k = tg.random.split(key)
            w, value = step(w, x[perm[i:i + 8]], y[perm[i:i + 8]], 0.1 * math.cos(epoch / 60), k)
            assert math.isfinite(float(value))
        if epoch % 10 == 0:
            assert 0 <= float(evaluate(w)) <= 1
        if epoch in (29, 44, 59):
            seen.append(held())
    assert seen[0] == seen[1] == seen[2]
    assert step.trace_count == 2 and evaluate.trace_count == 1
