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
