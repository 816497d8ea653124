"""Whole training scripts as users write them, timed end to end: `python -m bench.ported_scripts [--quick]
[--only a,b]` runs each script under tgfx and under jax in one process and reports CPU time (the process's and its
children's: tgfx compiles in worker processes) and wall time of the whole script, of its first epoch (tracing and
compiling) and of the later ones, tgfx beside jax, and whether the two agree on every value the script logged.

`bench/programs.py` times one step of a model; these time the glue around the steps, which is most of what a small
script costs: eager code between jitted steps. Each script is written once, against `Lib` (the names both libraries
spell alike: `tgfx.numpy` or `jax.numpy` as `jnp`, `tree_util`, `random`, ...), from the same numpy data and initial
values; each is a generator that yields its epoch's record, so a caller can count what each epoch traced and compiled.

- `classifier`: an MLP on numpy features, SGD with momentum (the velocity a pytree beside the params) at a step-decay
  rate passed as a Python float, `float(loss)` logged every few steps, a metrics dict of running means (loss and
  `jnp.argmax` accuracy) updated eagerly, an eval pass each epoch at another batch size with a partial last batch,
  the params and velocity saved each epoch (tgfx: `tg.save`; jax: `np.savez`), a Python-side early stop on the loss;
- `augment`: a small NHWC CNN on images augmented outside `jit` (random flips and noise from keys split every step),
  the gradient from a jitted `value_and_grad`, its global norm computed eagerly, clipping and Adam written as
  `tree_util.tree_map`s outside `jit` (the optimiser state a dict pytree), an eval each epoch with a partial batch;
- `regression`: a ridge regression on polynomial features with Adam inside the jitted step (its state a pytree), a
  cosine rate computed eagerly as an array each step, weight decay by `tree_map` between steps, validation loss each
  epoch and early stopping with patience, the best params kept as numpy arrays and saved with `np.savez`;
- `autoencoder`: a denoising autoencoder (noise and dropout keys split outside `jit`, passed in), an EMA of the
  params updated eagerly by `tree_map` after every step, the EMA evaluated each epoch at another batch size, a metrics
  dict, the EMA saved each epoch;
- `charrnn`: a character GRU over `lax.scan` with a warm-up rate computed eagerly as an array, gradient clipping in
  the step, perplexity on held-out text each epoch, and a greedy sample of a few characters, one jitted cell call and
  one `int(jnp.argmax(...))` per character.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

Lib = SimpleNamespace   # jnp, jit, value_and_grad, lax, nn, random, tree_util, asarray, save(path, tree), name


def tgfx_lib() -> Lib:
    import tgfx as tg
    import tgfx.numpy as jnp

    def save(path: str, tree: Any) -> None:
        tg.save(path + ".safetensors", tree)
    return Lib(name="tgfx", jnp=jnp, jit=tg.jit, value_and_grad=tg.value_and_grad, lax=tg.lax, nn=tg.nn,
               random=tg.random, tree_util=tg.tree_util, asarray=tg.asarray, save=save)


def jax_lib() -> Lib:
    import jax
    import jax.numpy as jnp

    def save(path: str, tree: Any) -> None:
        np.savez(path + ".npz", *[np.asarray(x) for x in jax.tree_util.tree_leaves(tree)])
    return Lib(name="jax", jnp=jnp, jit=jax.jit, value_and_grad=jax.value_and_grad, lax=jax.lax, nn=jax.nn,
               random=jax.random, tree_util=jax.tree_util, asarray=jnp.asarray, save=save)


@dataclass
class Epoch:
    """What a script logged in one epoch: every value read back to Python, by name, in order."""
    logged: dict[str, list[float]] = field(default_factory=dict)

    def log(self, name: str, value: float) -> None:
        self.logged.setdefault(name, []).append(value)


Script = Callable[..., Iterator[Epoch]]   # (lib, quick, checkpoint directory, epochs=its own) -> its epochs


def _init(rng: np.random.Generator, i: int, o: int) -> np.ndarray:
    return (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32)


def _blobs(rng: np.random.Generator, n: int, d: int, classes: int, spread: float = 1.0) -> tuple:
    centers = rng.standard_normal((classes, d)).astype(np.float32) * 1.5
    y = rng.integers(0, classes, n).astype(np.int32)
    return (centers[y] + spread * rng.standard_normal((n, d))).astype(np.float32), y


# ---- the scripts ----
def classifier(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp, tree_util = lib.jnp, lib.tree_util
    d_in, hidden, classes, n_train, n_eval, batch, eval_batch, n_epochs, log_every = (
        (8, 16, 4, 200, 70, 32, 48, 3, 2) if quick else (32, 256, 10, 8192, 2000, 128, 384, 5, 10))
    rng = np.random.default_rng(0)
    x_all, y_all = _blobs(rng, n_train + n_eval, d_in, classes, spread=1.0 if quick else 2.5)
    x_train, y_train, x_eval, y_eval = x_all[:n_train], y_all[:n_train], x_all[n_train:], y_all[n_train:]
    params = {"w1": lib.asarray(_init(rng, d_in, hidden)), "b1": jnp.zeros(hidden),
              "w2": lib.asarray(_init(rng, hidden, classes)), "b2": jnp.zeros(classes)}
    velocity = tree_util.tree_map(jnp.zeros_like, params)

    def forward(p: Any, x: Any) -> Any:
        return lib.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def loss_fn(p: Any, x: Any, y: Any) -> Any:
        logits = forward(p, x)
        return -jnp.mean(jnp.take_along_axis(lib.nn.log_softmax(logits), y[:, None], axis=1)), logits

    @lib.jit
    def train_step(p: Any, v: Any, x: Any, y: Any, lr: float) -> Any:
        (loss, logits), g = lib.value_and_grad(loss_fn, has_aux=True)(p, x, y)
        v = tree_util.tree_map(lambda v, g: 0.9 * v + g, v, g)
        p = tree_util.tree_map(lambda p, v: p - lr * v, p, v)
        return p, v, loss, logits

    predict = lib.jit(forward)
    for epoch in range(epochs or n_epochs):
        rec = Epoch()
        lr = 0.05 * 0.5 ** (epoch // 2)                       # step decay, a Python float
        order = rng.permutation(n_train)
        metrics = {"loss": jnp.zeros(()), "accuracy": jnp.zeros(())}
        for i, start in enumerate(range(0, n_train - batch + 1, batch)):    # the remainder dropped
            rows = order[start:start + batch]
            y = lib.asarray(y_train[rows])
            params, velocity, loss, logits = train_step(params, velocity, x_train[rows], y, lr)
            accuracy = jnp.mean(jnp.argmax(logits, axis=-1) == y)
            metrics = {k: m + (new - m) / (i + 1) for (k, m), new in zip(metrics.items(), (loss, accuracy),
                                                                          strict=True)}
            if i % log_every == 0:
                rec.log("loss", float(loss))
        correct = 0
        for start in range(0, n_eval, eval_batch):             # the last batch partial
            logits = predict(params, x_eval[start:start + eval_batch])
            correct += int(jnp.sum(jnp.argmax(logits, axis=-1) == lib.asarray(y_eval[start:start + eval_batch])))
        rec.log("eval_accuracy", correct / n_eval)
        rec.log("train_loss", float(metrics["loss"]))
        rec.log("train_accuracy", float(metrics["accuracy"]))
        lib.save(os.path.join(ckpt, f"classifier_{epoch}"), {"params": params, "velocity": velocity})
        yield rec
        if rec.logged["train_loss"][-1] < 0.05:              # early stop
            return


def augment(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp, tree_util, random = lib.jnp, lib.tree_util, lib.random
    size, channels, classes, n_train, n_eval, batch, eval_batch, n_epochs = (
        (8, 4, 3, 96, 40, 16, 24, 3) if quick else (16, 16, 10, 2048, 500, 64, 128, 3))
    rng = np.random.default_rng(1)
    y_all = rng.integers(0, classes, n_train + n_eval).astype(np.int32)
    pattern = rng.standard_normal((classes, size, size, 1)).astype(np.float32)
    images = (pattern[y_all] + 0.5 * rng.standard_normal((len(y_all), size, size, 1))).astype(np.float32)
    x_train, y_train, x_eval, y_eval = images[:n_train], y_all[:n_train], images[n_train:], y_all[n_train:]
    params = {"conv1": lib.asarray((rng.standard_normal((3, 3, 1, channels)) / 3).astype(np.float32)),
              "conv2": lib.asarray((rng.standard_normal((3, 3, channels, channels)) / (3 * math.sqrt(channels)))
                                   .astype(np.float32)),
              "dense": lib.asarray(_init(rng, channels, classes)), "bias": jnp.zeros(classes)}
    opt = {"count": 0, "mu": tree_util.tree_map(jnp.zeros_like, params),
           "nu": tree_util.tree_map(jnp.zeros_like, params)}

    def conv(x: Any, w: Any, stride: int) -> Any:
        return lib.lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def forward(p: Any, x: Any) -> Any:
        h = lib.nn.relu(conv(x, p["conv1"], 1))
        h = lib.nn.relu(conv(h, p["conv2"], 2))
        return h.mean(axis=(1, 2)) @ p["dense"] + p["bias"]

    def loss_fn(p: Any, x: Any, y: Any) -> Any:
        return -jnp.mean(jnp.take_along_axis(lib.nn.log_softmax(forward(p, x)), y[:, None], axis=1))

    grad_fn = lib.jit(lib.value_and_grad(loss_fn))
    predict = lib.jit(forward)
    key = random.PRNGKey(0)
    for _ in range(epochs or n_epochs):
        rec = Epoch()
        order = rng.permutation(n_train)
        for start in range(0, n_train - batch + 1, batch):
            rows = order[start:start + batch]
            key, flip_key, noise_key = random.split(key, 3)      # augmentation, outside jit
            x = lib.asarray(x_train[rows])
            flip = random.bernoulli(flip_key, 0.5, (batch, 1, 1, 1))
            x = jnp.where(flip, x[:, :, ::-1, :], x) + 0.1 * random.normal(noise_key, x.shape)
            loss, grads = grad_fn(params, x, y_train[rows])
            norm = jnp.sqrt(sum(jnp.sum(g * g) for g in tree_util.tree_leaves(grads)))   # eagerly
            scale = jnp.minimum(1.0, 1.0 / (norm + 1e-6))
            grads = tree_util.tree_map(lambda g: g * scale, grads)   # noqa: B023 (called here, by tree_map)
            opt["count"] += 1                                    # Adam, eagerly
            opt["mu"] = tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, opt["mu"], grads)
            opt["nu"] = tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, opt["nu"], grads)
            c1, c2 = 1 - 0.9 ** opt["count"], 1 - 0.999 ** opt["count"]
            params = tree_util.tree_map(lambda p, m, v: p - 0.01 * (m / c1) / (jnp.sqrt(v / c2) + 1e-8),  # noqa: B023
                                        params, opt["mu"], opt["nu"])
            rec.log("loss", float(loss))
            rec.log("grad_norm", float(norm))
        correct = 0
        for start in range(0, n_eval, eval_batch):
            logits = predict(params, x_eval[start:start + eval_batch])
            correct += int((jnp.argmax(logits, axis=-1) == lib.asarray(y_eval[start:start + eval_batch])).sum())
        rec.log("eval_accuracy", correct / n_eval)
        yield rec


def regression(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp, tree_util = lib.jnp, lib.tree_util
    degree, n_train, n_val, batch, n_epochs, patience = ((5, 240, 60, 40, 6, 2) if quick else
                                                          (12, 20000, 4000, 200, 8, 2))
    rng = np.random.default_rng(2)
    t = rng.uniform(-1, 1, n_train + n_val).astype(np.float32)
    target = (np.sin(3 * t) + 0.1 * rng.standard_normal(t.shape)).astype(np.float32)
    feats = np.stack([t ** k for k in range(1, degree + 1)], axis=1).astype(np.float32)
    x_train, y_train, x_val, y_val = feats[:n_train], target[:n_train], feats[n_train:], target[n_train:]
    params = {"w": jnp.zeros(degree), "b": jnp.zeros(())}
    opt_state = {"mu": tree_util.tree_map(jnp.zeros_like, params), "nu": tree_util.tree_map(jnp.zeros_like, params),
                 "count": jnp.zeros((), jnp.int32)}

    def mse(p: Any, x: Any, y: Any) -> Any:
        return jnp.mean((x @ p["w"] + p["b"] - y) ** 2)

    @lib.jit
    def step(p: Any, st: Any, x: Any, y: Any, lr: Any) -> Any:
        loss, g = lib.value_and_grad(mse)(p, x, y)
        count = st["count"] + 1
        mu = tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, st["mu"], g)
        nu = tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, st["nu"], g)
        c1, c2 = 1 - 0.9 ** count, 1 - 0.999 ** count
        p = tree_util.tree_map(lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + 1e-8), p, mu, nu)
        return p, {"mu": mu, "nu": nu, "count": count}, loss

    evaluate = lib.jit(mse)
    steps_per_epoch, best, bad = n_train // batch, math.inf, 0
    total = steps_per_epoch * (epochs or n_epochs)
    for epoch in range(epochs or n_epochs):
        rec = Epoch()
        order = rng.permutation(n_train)
        for i in range(steps_per_epoch):
            rows = order[i * batch:(i + 1) * batch]
            k = epoch * steps_per_epoch + i
            lr = 0.05 * 0.5 * (1 + jnp.cos(jnp.pi * k / total))        # an eager array each step
            params, opt_state, loss = step(params, opt_state, x_train[rows], y_train[rows], lr)
            params = tree_util.tree_map(lambda p: p * (1 - 1e-4), params)   # decoupled weight decay, eagerly
            if i % 3 == 0:
                rec.log("loss", float(loss))
        val = float(evaluate(params, x_val, y_val))
        rec.log("val_loss", val)
        if val < best - 1e-4:
            best, bad = val, 0
            best_params = {k: np.asarray(v) for k, v in params.items()}
            np.savez(os.path.join(ckpt, f"regression_best_{lib.name}.npz"), **best_params)
        else:
            bad += 1
        yield rec
        if bad >= patience:                                   # early stop
            return


def autoencoder(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp, tree_util, random = lib.jnp, lib.tree_util, lib.random
    d, hidden, code, n_train, n_eval, batch, eval_batch, n_epochs, log_every = (
        (12, 16, 4, 160, 50, 32, 20, 3, 2) if quick else (64, 256, 16, 8192, 1000, 128, 300, 3, 8))
    rng = np.random.default_rng(3)
    basis = rng.standard_normal((code, d)).astype(np.float32)
    data = (np.tanh(rng.standard_normal((n_train + n_eval, code))) @ basis).astype(np.float32)
    x_train, x_eval = data[:n_train], data[n_train:]
    params = {"enc": {"w": lib.asarray(_init(rng, d, hidden)), "b": jnp.zeros(hidden),
                      "w2": lib.asarray(_init(rng, hidden, code))},
              "dec": {"w": lib.asarray(_init(rng, code, hidden)), "b": jnp.zeros(hidden),
                      "w2": lib.asarray(_init(rng, hidden, d))}}
    ema = tree_util.tree_map(lambda p: p, params)

    def reconstruct(p: Any, x: Any, key: Any) -> Any:
        h = jnp.tanh(x @ p["enc"]["w"] + p["enc"]["b"])
        if key is not None:                                    # dropout on the hidden layer
            h = jnp.where(lib.random.bernoulli(key, 0.9, h.shape), h / 0.9, 0.0)
        z = h @ p["enc"]["w2"]
        return jnp.tanh(z @ p["dec"]["w"] + p["dec"]["b"]) @ p["dec"]["w2"]

    def loss_fn(p: Any, noisy: Any, clean: Any, key: Any) -> Any:
        return jnp.mean((reconstruct(p, noisy, key) - clean) ** 2)

    @lib.jit
    def step(p: Any, noisy: Any, clean: Any, key: Any) -> Any:
        loss, g = lib.value_and_grad(loss_fn)(p, noisy, clean, key)
        return tree_util.tree_map(lambda p, g: p - 0.05 * g, p, g), loss

    eval_loss = lib.jit(lambda p, x: jnp.sum(jnp.mean((reconstruct(p, x, None) - x) ** 2, axis=1)))
    key = random.PRNGKey(42)
    for epoch in range(epochs or n_epochs):
        rec = Epoch()
        metrics = {"loss": 0.0, "steps": 0}
        order = rng.permutation(n_train)
        for i, start in enumerate(range(0, n_train - batch + 1, batch)):
            clean = lib.asarray(x_train[order[start:start + batch]])
            key, noise_key, drop_key = random.split(key, 3)
            noisy = clean + 0.1 * random.normal(noise_key, clean.shape)
            params, loss = step(params, noisy, clean, drop_key)
            ema = tree_util.tree_map(lambda e, p: 0.9 * e + 0.1 * p, ema, params)
            metrics["loss"] = metrics["loss"] + loss          # a running sum of arrays, read once an epoch
            metrics["steps"] += 1
            if i % log_every == 0:
                rec.log("loss", float(loss))
        total = 0.0
        for start in range(0, n_eval, eval_batch):
            total += float(eval_loss(ema, x_eval[start:start + eval_batch]))
        rec.log("train_loss", float(metrics["loss"]) / metrics["steps"])
        rec.log("ema_eval_loss", total / n_eval)
        lib.save(os.path.join(ckpt, f"autoencoder_{epoch}"), ema)
        yield rec


def charrnn(lib: Lib, quick: bool, ckpt: str, epochs: int = 0) -> Iterator[Epoch]:
    jnp, tree_util = lib.jnp, lib.tree_util
    hidden, seq, batch, n_epochs, sample_len, warmup = (16, 8, 8, 3, 4, 5) if quick else (128, 32, 32, 3, 16, 20)
    text = np.frombuffer(b"the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. "
                         * (4 if quick else 60), np.uint8)
    chars = np.unique(text)
    ids = np.searchsorted(chars, text).astype(np.int32)
    vocab = len(chars)
    split = len(ids) * 9 // 10
    train, held = ids[:split], ids[split:]
    rng = np.random.default_rng(4)
    params = {"emb": lib.asarray((rng.standard_normal((vocab, hidden)) * 0.1).astype(np.float32)),
              "wx": lib.asarray(_init(rng, hidden, 3 * hidden)), "wh": lib.asarray(_init(rng, hidden, 3 * hidden)),
              "b": jnp.zeros(3 * hidden), "out": lib.asarray(_init(rng, hidden, vocab))}

    def cell(p: Any, h: Any, tok: Any) -> Any:
        gx, gh = p["emb"][tok] @ p["wx"] + p["b"], h @ p["wh"]
        r = lib.nn.sigmoid(gx[..., :hidden] + gh[..., :hidden])
        z = lib.nn.sigmoid(gx[..., hidden:2 * hidden] + gh[..., hidden:2 * hidden])
        n = jnp.tanh(gx[..., 2 * hidden:] + r * gh[..., 2 * hidden:])
        return (1 - z) * n + z * h

    def loss_fn(p: Any, xs: Any, ys: Any) -> Any:
        def body(h: Any, xy: Any) -> Any:
            h = cell(p, h, xy[0])
            logp = lib.nn.log_softmax(h @ p["out"])
            return h, -jnp.take_along_axis(logp, xy[1][:, None], axis=1)[:, 0]
        _, nll = lib.lax.scan(body, jnp.zeros((xs.shape[1], hidden)), (xs, ys))
        return nll.mean()

    @lib.jit
    def step(p: Any, xs: Any, ys: Any, lr: Any) -> Any:
        loss, g = lib.value_and_grad(loss_fn)(p, xs, ys)
        norm = jnp.sqrt(sum(jnp.sum(x * x) for x in tree_util.tree_leaves(g)))
        g = tree_util.tree_map(lambda x: x * jnp.minimum(1.0, 5.0 / norm), g)
        return tree_util.tree_map(lambda p, g: p - lr * g, p, g), loss

    evaluate = lib.jit(loss_fn)
    next_char = lib.jit(lambda p, h, tok: (lambda h: (h, h @ p["out"]))(cell(p, h, tok)))

    def windows(stream: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = np.stack([stream[s:s + seq + 1] for s in starts], axis=1)   # (seq + 1, batch)
        return w[:-1], w[1:]
    k = 0
    for _ in range(epochs or n_epochs):
        rec = Epoch()
        starts = rng.permutation(len(train) - seq - 1)
        for i in range(0, len(starts) - batch + 1, batch):
            xs, ys = windows(train, starts[i:i + batch])
            lr = jnp.minimum(1.0, (k + 1) / warmup) * 0.5          # warm-up, an eager array
            params, loss = step(params, xs, ys, lr)
            k += 1
            if (i // batch) % 4 == 0:
                rec.log("loss", float(loss))
        held_starts = np.arange(0, len(held) - seq - 1, seq)
        xs, ys = windows(held, held_starts)
        rec.log("perplexity", float(jnp.exp(evaluate(params, xs, ys))))
        h, tok, sample = jnp.zeros((1, hidden)), int(train[0]), []
        for _ in range(sample_len):                             # greedy, one character at a time
            h, logits = next_char(params, h, lib.asarray(np.array([tok], np.int32)))
            tok = int(jnp.argmax(logits[0]))
            sample.append(tok)
        for s in sample:
            rec.log("sample", float(s))
        yield rec


SCRIPTS: dict[str, Script] = {"classifier": classifier, "augment": augment, "regression": regression,
                              "autoencoder": autoencoder, "charrnn": charrnn}


# ---- the runner ----
@dataclass
class Timed:
    epochs: list[Epoch]
    cpu_s: list[float]          # process CPU time of each epoch (the first: tracing and compiling included)
    wall_s: list[float]

    @property
    def total_cpu(self) -> float:
        return sum(self.cpu_s)

    @property
    def total_wall(self) -> float:
        return sum(self.wall_s)


def cpu_time() -> float:
    """Process CPU time, this process's threads and its child processes' (tgfx's compile workers), live or ended."""
    import resource
    total = time.process_time()
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    total += ended.ru_utime + ended.ru_stime
    tick, me = os.sysconf("SC_CLK_TCK"), str(os.getpid())
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:                    # ppid; utime and stime are fields 14 and 15 of stat
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def run_script(lib: Lib, name: str, quick: bool, scripts: dict[str, Script] | None = None) -> Timed:
    """The whole script (of `scripts`, this module's by default), its setup counted in its first epoch."""
    out = Timed([], [], [])
    with tempfile.TemporaryDirectory(prefix=f"scripts-{lib.name}-") as ckpt:
        c0, w0 = cpu_time(), time.perf_counter()
        for rec in (scripts or SCRIPTS)[name](lib, quick, ckpt):
            c1, w1 = cpu_time(), time.perf_counter()
            out.epochs.append(rec)
            out.cpu_s.append(c1 - c0)
            out.wall_s.append(w1 - w0)
            c0, w0 = c1, w1
    return out


def agree(a: list[Epoch], b: list[Epoch], rtol: float = 1e-2) -> bool:
    """The same epochs logging the same names, each value within rtol (an accuracy within 2%). The rounding of the
    two compilers' fusions differs in the last bit, and training grows it: `augment`'s clipped, Adam-normalised steps
    at the full size differ by 3e-7 (relative) in the first epoch and by 5e-3 in the third. The quick sizes agree to
    1e-5 (tests/test_real_programs_g.py)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.logged.keys() != y.logged.keys():
            return False
        for k in x.logged:
            u, v = np.asarray(x.logged[k]), np.asarray(y.logged[k])
            if u.shape != v.shape or not np.allclose(u, v, rtol=rtol, atol=2e-2 if "accuracy" in k else 1e-6):
                return False
    return True


def main(argv: list[str] | None = None, scripts: dict[str, Script] | None = None,
         libs: tuple[Callable[[], Lib], Callable[[], Lib]] | None = None, doc: str | None = None) -> int:
    """Run `scripts` (this module's by default) under the libraries `libs` makes (tgfx's, then jax's)."""
    scripts = scripts or SCRIPTS
    make_tgfx, make_jax = libs or (tgfx_lib, jax_lib)
    ap = argparse.ArgumentParser(description=(doc or __doc__).splitlines()[0])
    ap.add_argument("--only", default=",".join(scripts), help=f"comma-separated, of: {','.join(scripts)}")
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--frameworks", default="tgfx,jax")
    args = ap.parse_args(argv)
    from tgfx import config
    config.CACHE_DIR.value = tempfile.mkdtemp(prefix="tgfx-scripts-")   # a cold first epoch, as jax's
    made = [make_tgfx()]
    if "jax" in args.frameworks.split(","):
        try:
            made.append(make_jax())
        except ImportError:
            print("jax is not installed: tgfx only")
    print(f"{'script':12s} {'lib':5s} {'epochs':>6s} {'cpu s':>7s} {'wall s':>7s} {'1st cpu':>8s} {'later cpu':>9s}"
          f"  tgfx/jax cpu (whole, 1st, later)")
    failed = False
    for name in [n for n in args.only.split(",") if n]:
        runs = {lib.name: run_script(lib, name, args.quick, scripts) for lib in made}
        for lib_name, r in runs.items():
            later = sum(r.cpu_s[1:]) / max(len(r.cpu_s) - 1, 1)
            note = ""
            if lib_name == "jax":
                t = runs["tgfx"]
                t_later = sum(t.cpu_s[1:]) / max(len(t.cpu_s) - 1, 1)
                ok = agree(t.epochs, r.epochs)
                failed |= not ok
                note = (f"  {t.total_cpu / r.total_cpu:.2f}, {t.cpu_s[0] / r.cpu_s[0]:.2f}, "
                        f"{t_later / max(later, 1e-9):.2f}" + ("" if ok else "  VALUES DIFFER"))
            print(f"{name:12s} {lib_name:5s} {len(r.epochs):6d} {r.total_cpu:7.2f} {r.total_wall:7.2f} "
                  f"{r.cpu_s[0]:8.2f} {later:9.2f}{note}")
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
