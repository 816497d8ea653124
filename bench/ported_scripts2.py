"""More whole training scripts as users write them, timed end to end as `bench/ported_scripts.py`'s are (its runner,
its conventions): `python -m bench.ported_scripts2 [--quick] [--only a,b]`. Each script is written once against `Lib`
(the names tgfx and jax spell alike), from the same numpy data, and yields its epochs' logged values; these cover glue
the first five do not:

- `gan`: a generator and a discriminator, each with its own Adam (two optimiser-state pytrees), two jitted steps
  alternating on noise drawn eagerly from keys split every step, both losses read back and summed eagerly, and a fixed
  noise batch pushed through the generator every epoch;
- `maml`: MAML on sine-wave regression: the jitted outer step differentiates through the inner SGD steps (a grad of a
  grad) of every task, mapped over tasks by `vmap`; the tasks' amplitudes, phases and points drawn eagerly from keys
  split each step; an eval of the adaptation on fixed test tasks each epoch;
- `transformer`: a small character transformer LM with dropout (its key split every step, outside `jit`), a warm-up +
  cosine rate computed in Python and passed as a float, global-norm clipping in the step, a held-out perplexity each
  epoch over batches of another size with a partial last one, and a checkpoint (params, Adam state, key) saved in
  the middle of the first epoch and resumed from disk by freshly built jitted functions, as a restarted process would;
- `data_parallel`: an MLP classifier on two devices (tgfx: CPU:0 and CPU:1; jax: two host devices), the batch split
  across them and the params replicated, eager metrics on the sharded outputs, the predictions gathered to the host
  into a numpy confusion matrix, and a sharded eval pass;
- `plateau`: an MLP regression whose Python-float rate is dropped when the validation loss stops improving, the best
  params kept (the Tensors themselves) and early stopping with patience: Python control flow on eager values.
"""
from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from bench import ported_scripts as ps
from bench.ported_scripts import Epoch, Lib, Script, _blobs, _init

DEVICES = 2   # data_parallel's: CPU:0 and CPU:1 (tgfx), the first two host devices (jax)


def tgfx_lib() -> Lib:
    import tgfx as tg
    lib = ps.tgfx_lib()
    devs = tuple(f"CPU:{i}" for i in range(DEVICES))

    def load(path: str, like: Any) -> Any:
        return tg.load(path + ".safetensors", like=like)
    lib.grad, lib.vmap, lib.load = tg.grad, tg.vmap, load
    lib.shard = lambda x, axis: tg.shard(x, devs, axis)
    return lib


def jax_lib() -> Lib:
    flag = f"--xla_force_host_platform_device_count={DEVICES}"   # read by jax when it first imports
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    lib = ps.jax_lib()

    def load(path: str, like: Any) -> Any:
        with np.load(path + ".npz") as f:
            leaves = [jnp.asarray(f[f"arr_{i}"]) for i in range(len(f.files))]
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(like), leaves)

    def shard(x: Any, axis: int | None) -> Any:
        if len(jax.devices()) < DEVICES:
            raise RuntimeError(f"jax has {len(jax.devices())} device(s), data_parallel needs {DEVICES}: jax was "
                               f"imported before XLA_FLAGS={flag} was set")
        mesh = Mesh(np.array(jax.devices()[:DEVICES]), ("d",))
        spec = PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), "d")
        return jax.device_put(x, NamedSharding(mesh, spec))
    lib.grad, lib.vmap, lib.load, lib.shard = jax.grad, jax.vmap, load, shard
    return lib


def _adam(lib: Lib, p: Any, st: Any, g: Any, lr: Any) -> tuple[Any, Any]:
    """One Adam update inside a jitted step; `st` is {"mu", "nu", "count"} (the count an int32 array)."""
    jnp, tree_map = lib.jnp, lib.tree_util.tree_map
    count = st["count"] + 1
    mu = tree_map(lambda m, g: 0.9 * m + 0.1 * g, st["mu"], g)
    nu = tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, st["nu"], g)
    c1, c2 = 1 - 0.9 ** count, 1 - 0.999 ** count
    p = tree_map(lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), p, mu, nu)
    return p, {"mu": mu, "nu": nu, "count": count}


def _adam_state(lib: Lib, params: Any) -> dict[str, Any]:
    jnp, tree_map = lib.jnp, lib.tree_util.tree_map
    return {"mu": tree_map(jnp.zeros_like, params), "nu": tree_map(jnp.zeros_like, params),
            "count": jnp.zeros((), jnp.int32)}


# ---- the scripts ----
def gan(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp, random, nn = lib.jnp, lib.random, lib.nn
    z_dim, hidden, batch, steps, n_epochs, log_every, n_fixed = (
        (4, 16, 32, 6, 3, 2, 16) if quick else (8, 128, 256, 60, 4, 10, 512))
    rng = np.random.default_rng(5)
    angles = rng.integers(0, 8, 4096) * (2 * np.pi / 8)            # a ring of eight Gaussians
    real = (np.stack([np.cos(angles), np.sin(angles)], 1) * 2 + 0.05 * rng.standard_normal((4096, 2)))
    real = real.astype(np.float32)
    g_params = {"w1": lib.asarray(_init(rng, z_dim, hidden)), "b1": jnp.zeros(hidden),
                "w2": lib.asarray(_init(rng, hidden, hidden)), "b2": jnp.zeros(hidden),
                "w3": lib.asarray(_init(rng, hidden, 2)), "b3": jnp.zeros(2)}
    d_params = {"w1": lib.asarray(_init(rng, 2, hidden)), "b1": jnp.zeros(hidden),
                "w2": lib.asarray(_init(rng, hidden, 1)), "b2": jnp.zeros(1)}
    g_opt, d_opt = _adam_state(lib, g_params), _adam_state(lib, d_params)

    def generate(p: Any, z: Any) -> Any:
        h = jnp.tanh(z @ p["w1"] + p["b1"])
        h = jnp.tanh(h @ p["w2"] + p["b2"])
        return h @ p["w3"] + p["b3"]

    def discriminate(p: Any, x: Any) -> Any:
        return (nn.leaky_relu(x @ p["w1"] + p["b1"], 0.2) @ p["w2"] + p["b2"])[:, 0]

    def d_loss_fn(dp: Any, gp: Any, x: Any, z: Any) -> Any:
        fake = generate(gp, z)
        return jnp.mean(nn.softplus(-discriminate(dp, x))) + jnp.mean(nn.softplus(discriminate(dp, fake)))

    def g_loss_fn(gp: Any, dp: Any, z: Any) -> Any:
        return jnp.mean(nn.softplus(-discriminate(dp, generate(gp, z))))   # the non-saturating loss

    @lib.jit
    def d_step(dp: Any, st: Any, gp: Any, x: Any, z: Any) -> Any:
        loss, g = lib.value_and_grad(d_loss_fn)(dp, gp, x, z)
        dp, st = _adam(lib, dp, st, g, 2e-3)
        return dp, st, loss

    @lib.jit
    def g_step(gp: Any, st: Any, dp: Any, z: Any) -> Any:
        loss, g = lib.value_and_grad(g_loss_fn)(gp, dp, z)
        gp, st = _adam(lib, gp, st, g, 2e-3)
        return gp, st, loss

    sample = lib.jit(generate)
    key = random.PRNGKey(0)
    fixed_z = random.normal(random.PRNGKey(7), (n_fixed, z_dim))      # the same noise every epoch
    for _ in range(epochs or n_epochs):
        rec = Epoch()
        d_sum, g_sum = 0.0, 0.0
        for i in range(steps):
            key, d_key, g_key = random.split(key, 3)
            x = real[rng.integers(0, len(real), batch)]
            d_params, d_opt, d_loss = d_step(d_params, d_opt, g_params, x, random.normal(d_key, (batch, z_dim)))
            g_params, g_opt, g_loss = g_step(g_params, g_opt, d_params, random.normal(g_key, (batch, z_dim)))
            d_sum, g_sum = d_sum + d_loss, g_sum + g_loss            # eager running sums, read once an epoch
            if i % log_every == 0:
                rec.log("d_loss", float(d_loss))
                rec.log("g_loss", float(g_loss))
        rec.log("d_mean", float(d_sum) / steps)
        rec.log("g_mean", float(g_sum) / steps)
        fake = sample(g_params, fixed_z)
        radius = jnp.sqrt(jnp.sum(fake * fake, axis=1))
        rec.log("fixed_radius_mean", float(radius.mean()))
        rec.log("fixed_radius_std", float(jnp.std(radius)))
        rec.log("fixed_first", float(fake[0, 0]))
        yield rec


def maml(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp, random, tree_map = lib.jnp, lib.random, lib.tree_util.tree_map
    hidden, tasks, shots, inner_steps, steps, n_epochs, n_test = (
        (16, 4, 5, 2, 5, 3, 3) if quick else (40, 16, 10, 2, 40, 3, 16))
    alpha = 0.01
    rng = np.random.default_rng(6)
    params = {"w1": lib.asarray(_init(rng, 1, hidden)), "b1": jnp.zeros(hidden),
              "w2": lib.asarray(_init(rng, hidden, hidden)), "b2": jnp.zeros(hidden),
              "w3": lib.asarray(_init(rng, hidden, 1)), "b3": jnp.zeros(1)}
    opt = _adam_state(lib, params)

    def net(p: Any, x: Any) -> Any:
        h = jnp.tanh(x @ p["w1"] + p["b1"])
        h = jnp.tanh(h @ p["w2"] + p["b2"])
        return h @ p["w3"] + p["b3"]

    def mse(p: Any, x: Any, y: Any) -> Any:
        return jnp.mean((net(p, x) - y) ** 2)

    def adapt(p: Any, x: Any, y: Any) -> Any:
        for _ in range(inner_steps):                                  # inner SGD, differentiated through
            g = lib.grad(mse)(p, x, y)
            p = tree_map(lambda p, g: p - alpha * g, p, g)
        return p

    def task_loss(p: Any, xs: Any, ys: Any, xq: Any, yq: Any) -> Any:
        return mse(adapt(p, xs, ys), xq, yq)

    def meta_loss(p: Any, xs: Any, ys: Any, xq: Any, yq: Any) -> Any:
        return jnp.mean(lib.vmap(task_loss, in_axes=(None, 0, 0, 0, 0))(p, xs, ys, xq, yq))

    @lib.jit
    def outer_step(p: Any, st: Any, xs: Any, ys: Any, xq: Any, yq: Any) -> Any:
        loss, g = lib.value_and_grad(meta_loss)(p, xs, ys, xq, yq)   # a grad of the inner grads
        p, st = _adam(lib, p, st, g, 1e-3 if not quick else 5e-3)
        return p, st, loss

    @lib.jit
    def evaluate(p: Any, xs: Any, ys: Any, xq: Any, yq: Any) -> Any:
        before = lib.vmap(mse, in_axes=(None, 0, 0))(p, xq, yq)
        after = lib.vmap(task_loss, in_axes=(None, 0, 0, 0, 0))(p, xs, ys, xq, yq)
        return before, after

    def sample_tasks(key: Any, n: int) -> tuple[Any, ...]:
        k_amp, k_phase, k_s, k_q = random.split(key, 4)
        amp = random.uniform(k_amp, (n, 1, 1), minval=0.1, maxval=5.0)
        phase = random.uniform(k_phase, (n, 1, 1), minval=0.0, maxval=math.pi)
        xs = random.uniform(k_s, (n, shots, 1), minval=-5.0, maxval=5.0)
        xq = random.uniform(k_q, (n, shots, 1), minval=-5.0, maxval=5.0)
        return xs, amp * jnp.sin(xs - phase), xq, amp * jnp.sin(xq - phase)

    test_tasks = sample_tasks(random.PRNGKey(99), n_test)              # fixed held-out tasks
    key = random.PRNGKey(1)
    for _ in range(epochs or n_epochs):
        rec = Epoch()
        for i in range(steps):
            key, task_key = random.split(key)
            params, opt, loss = outer_step(params, opt, *sample_tasks(task_key, tasks))
            if i % 2 == 0:
                rec.log("meta_loss", float(loss))
        before, after = evaluate(params, *test_tasks)
        rec.log("test_before", float(before.mean()))
        rec.log("test_after", float(after.mean()))
        rec.log("test_improved", float(jnp.sum(after < before)))
        yield rec


def transformer(lib: Lib, quick: bool, ckpt: str, epochs: int = 0, resume: bool = True) -> Iterator[Epoch]:
    """With `resume`, the state is saved at step `resume_at` of the first epoch and the rest of the run reads it back
    from disk and builds its jitted functions anew; without, it is saved and the run goes on as it was. The two
    log the same values (tests/test_real_programs_f.py)."""
    jnp, random, nn, tree_util = lib.jnp, lib.random, lib.nn, lib.tree_util
    d, heads, layers, seq, batch, eval_batch, n_epochs, steps, warmup, resume_at, log_every = (
        (16, 2, 1, 8, 8, 5, 3, 8, 3, 4, 2) if quick else (64, 4, 2, 32, 32, 24, 3, 40, 10, 17, 5))
    text = np.frombuffer(b"the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. "
                         * (3 if quick else 40), np.uint8)
    ids = np.searchsorted(np.unique(text), text).astype(np.int32)
    vocab, split = int(ids.max()) + 1, len(ids) * 4 // 5
    train, held = ids[:split], ids[split:]
    rng = np.random.default_rng(7)

    def norm() -> dict[str, Any]:
        return {"g": jnp.ones(d), "b": jnp.zeros(d)}
    params = {"emb": lib.asarray((rng.standard_normal((vocab, d)) * 0.1).astype(np.float32)),
              "pos": lib.asarray((rng.standard_normal((seq, d)) * 0.1).astype(np.float32)),
              "blocks": [{"n1": norm(), "qkv": lib.asarray(_init(rng, d, 3 * d)), "proj": lib.asarray(_init(rng, d, d)),
                          "n2": norm(), "up": lib.asarray(_init(rng, d, 4 * d)), "up_b": jnp.zeros(4 * d),
                          "down": lib.asarray(_init(rng, 4 * d, d)), "down_b": jnp.zeros(d)} for _ in range(layers)],
              "nf": norm(), "head": lib.asarray(_init(rng, d, vocab))}
    state = {"params": params, "opt": _adam_state(lib, params), "key": random.PRNGKey(3)}

    def layer_norm(p: Any, x: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]

    def forward(p: Any, tokens: Any, key: Any) -> Any:
        b, t = tokens.shape
        x = p["emb"][tokens] + p["pos"][:t]
        causal = jnp.tril(jnp.ones((t, t), bool))
        for i, blk in enumerate(p["blocks"]):
            q, k, v = jnp.split(layer_norm(blk["n1"], x) @ blk["qkv"], 3, axis=-1)
            q, k, v = (a.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3) for a in (q, k, v))
            scores = jnp.where(causal, q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads), -1e9)
            att = (nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d) @ blk["proj"]
            if key is not None:                                      # dropout on the attention's output
                att = jnp.where(random.bernoulli(random.fold_in(key, i), 0.9, att.shape), att / 0.9, 0.0)
            x = x + att
            x = x + nn.gelu(layer_norm(blk["n2"], x) @ blk["up"] + blk["up_b"]) @ blk["down"] + blk["down_b"]
        return layer_norm(p["nf"], x) @ p["head"]

    def nll(p: Any, xs: Any, ys: Any, key: Any) -> Any:
        logp = nn.log_softmax(forward(p, xs, key))
        return -jnp.take_along_axis(logp, ys[..., None], axis=-1)[..., 0]

    def build() -> tuple[Any, Any]:
        """The jitted step and eval, as a script (or a restarted one) builds them."""
        @lib.jit
        def step(p: Any, st: Any, xs: Any, ys: Any, key: Any, lr: float) -> Any:
            loss, g = lib.value_and_grad(lambda p: nll(p, xs, ys, key).mean())(p)
            norm = jnp.sqrt(sum(jnp.sum(x * x) for x in tree_util.tree_leaves(g)))
            g = tree_util.tree_map(lambda x: x * jnp.minimum(1.0, 1.0 / (norm + 1e-6)), g)   # clip to norm 1
            p, st = _adam(lib, p, st, g, lr)
            return p, st, loss, norm
        return step, lib.jit(lambda p, xs, ys: nll(p, xs, ys, None).sum())

    def rate(k: int, total: int) -> float:
        if k < warmup:
            return 3e-3 * (k + 1) / warmup
        return 3e-3 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (k - warmup) / (total - warmup))))

    def windows(stream: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = np.stack([stream[s:s + seq + 1] for s in starts])
        return w[:, :-1], w[:, 1:]

    step, eval_sum = build()
    n_epochs = epochs or n_epochs
    held_starts = np.arange(0, len(held) - seq - 1, seq // 2)          # not a multiple of eval_batch
    for epoch in range(n_epochs):
        rec = Epoch()
        order = np.random.default_rng([7, epoch]).permutation(len(train) - seq - 1)   # a resume reads it again
        for i in range(steps):
            k = epoch * steps + i
            xs, ys = windows(train, order[i * batch:(i + 1) * batch])
            key, drop_key = random.split(state["key"])
            p, st, loss, norm = step(state["params"], state["opt"], xs, ys, drop_key, rate(k, n_epochs * steps))
            state = {"params": p, "opt": st, "key": key}
            if i % log_every == 0:
                rec.log("loss", float(loss))
                rec.log("grad_norm", float(norm))
            if k + 1 == resume_at:
                path = os.path.join(ckpt, f"transformer_{lib.name}")
                lib.save(path, state)
                with open(path + ".json", "w") as f:
                    json.dump({"step": k + 1}, f)
                if resume:                                           # as a restarted process: all from disk
                    del state, step, eval_sum, p, st
                    with open(path + ".json") as f:
                        assert json.load(f)["step"] == k + 1
                    fresh = {"params": params, "opt": _adam_state(lib, params), "key": random.PRNGKey(0)}
                    state = lib.load(path, fresh)
                    step, eval_sum = build()
        total = 0.0
        for s in range(0, len(held_starts), eval_batch):                # the last batch partial
            xs, ys = windows(held, held_starts[s:s + eval_batch])
            total += float(eval_sum(state["params"], xs, ys))
        rec.log("perplexity", math.exp(total / (len(held_starts) * seq)))
        yield rec


def data_parallel(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp, tree_util = lib.jnp, lib.tree_util
    d_in, hidden, classes, n_train, n_eval, batch, eval_batch, n_epochs, log_every = (
        (8, 16, 4, 192, 70, 32, 24, 3, 2) if quick else (32, 256, 10, 8192, 2002, 256, 512, 3, 8))
    rng = np.random.default_rng(8)
    x_all, y_all = _blobs(rng, n_train + n_eval, d_in, classes, spread=1.0 if quick else 2.5)
    x_train, y_train, x_eval, y_eval = x_all[:n_train], y_all[:n_train], x_all[n_train:], y_all[n_train:]
    params = {"w1": lib.shard(_init(rng, d_in, hidden), None), "b1": lib.shard(np.zeros(hidden, np.float32), None),
              "w2": lib.shard(_init(rng, hidden, classes), None), "b2": lib.shard(np.zeros(classes, np.float32), None)}
    velocity = tree_util.tree_map(jnp.zeros_like, params)

    def forward(p: Any, x: Any) -> Any:
        return lib.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def loss_fn(p: Any, x: Any, y: Any) -> Any:
        logits = forward(p, x)
        return -jnp.mean(jnp.take_along_axis(lib.nn.log_softmax(logits), y[:, None], axis=1)), logits

    @lib.jit
    def step(p: Any, v: Any, x: Any, y: Any) -> Any:
        (loss, logits), g = lib.value_and_grad(loss_fn, has_aux=True)(p, x, y)   # the grads all-reduced
        v = tree_util.tree_map(lambda v, g: 0.9 * v + g, v, g)
        return tree_util.tree_map(lambda p, v: p - 0.05 * v, p, v), v, loss, logits

    predict = lib.jit(forward)
    for _ in range(epochs or n_epochs):
        rec = Epoch()
        order = rng.permutation(n_train)
        confusion = np.zeros((classes, classes), np.int64)
        correct = jnp.zeros(())
        for i, start in enumerate(range(0, n_train - batch + 1, batch)):
            rows = order[start:start + batch]
            x, y = lib.shard(x_train[rows], 0), lib.shard(y_train[rows], 0)     # each device half the batch
            params, velocity, loss, logits = step(params, velocity, x, y)
            correct = correct + jnp.sum(jnp.argmax(logits, axis=-1) == y)       # eager, on the sharded arrays
            np.add.at(confusion, (y_train[rows], np.asarray(jnp.argmax(logits, axis=-1))), 1)   # to the host
            if i % log_every == 0:
                rec.log("loss", float(loss))
        rec.log("train_accuracy", float(correct) / (n_train // batch * batch))
        rec.log("confusion_diagonal", float(np.trace(confusion)))
        eval_correct = 0
        for start in range(0, n_eval, eval_batch):                              # the last batch partial (even)
            logits = predict(params, lib.shard(x_eval[start:start + eval_batch], 0))
            eval_correct += int(jnp.sum(jnp.argmax(logits, axis=-1) == lib.shard(y_eval[start:start + eval_batch], 0)))
        rec.log("eval_accuracy", eval_correct / n_eval)
        rec.log("w1_norm", float(jnp.sqrt(jnp.sum(params["w1"] ** 2))))
        yield rec


def plateau(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp = lib.jnp
    hidden, n_train, n_val, batch, n_epochs, patience, drop_after, lr = (
        (16, 256, 64, 32, 12, 3, 1, 0.1) if quick else (128, 16384, 4096, 256, 12, 3, 1, 0.02))
    rng = np.random.default_rng(9)
    x_all = rng.uniform(-2, 2, (n_train + n_val, 2)).astype(np.float32)
    y_all = (np.sin(2 * x_all[:, :1]) * np.cos(x_all[:, 1:]) + 0.3 * rng.standard_normal((len(x_all), 1)))
    y_all = y_all.astype(np.float32)
    x_train, y_train, x_val, y_val = x_all[:n_train], y_all[:n_train], x_all[n_train:], y_all[n_train:]
    params = {"w1": lib.asarray(_init(rng, 2, hidden)), "b1": jnp.zeros(hidden),
              "w2": lib.asarray(_init(rng, hidden, 1)), "b2": jnp.zeros(1)}

    def mse(p: Any, x: Any, y: Any) -> Any:
        return jnp.mean((jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - y) ** 2)

    @lib.jit
    def step(p: Any, x: Any, y: Any, lr: float) -> Any:
        loss, g = lib.value_and_grad(mse)(p, x, y)
        return lib.tree_util.tree_map(lambda p, g: p - lr * g, p, g), loss

    val_loss = lib.jit(mse)
    n_epochs = epochs or n_epochs
    best, best_params, bad, since_drop = math.inf, params, 0, 0
    for epoch in range(n_epochs):
        rec = Epoch()
        order = rng.permutation(n_train)
        for start in range(0, n_train, batch):
            rows = order[start:start + batch]
            params, loss = step(params, x_train[rows], y_train[rows], lr)
        rec.log("last_loss", float(loss))
        val = float(val_loss(params, x_val, y_val))
        rec.log("val_loss", val)
        rec.log("lr", lr)
        if val < best - 1e-3:                                       # Python control flow on eager values
            best, best_params, bad, since_drop = val, params, 0, 0
        else:
            bad, since_drop = bad + 1, since_drop + 1
            if since_drop > drop_after:                              # a plateau: drop the rate
                lr, since_drop = lr * 0.3, 0
        if bad >= patience or epoch == n_epochs - 1:                 # early stop, or the last: the best params back
            rec.log("best_val_loss", float(val_loss(best_params, x_val, y_val)))
            yield rec
            return
        yield rec


SCRIPTS: dict[str, Script] = {"gan": gan, "maml": maml, "transformer": transformer, "data_parallel": data_parallel,
                              "plateau": plateau}


def main(argv: list[str] | None = None) -> int:
    return ps.main(argv, SCRIPTS, (tgfx_lib, jax_lib), __doc__)


if __name__ == "__main__":
    sys.exit(main())
