"""A whole training script as a JAX user writes it, timed by `bench/programs.py` (`training`) and on its own by
`python -m bench.ported_training [--quick] [--steps N]`, which reports process CPU time per step and in total and
the traces of each jitted function, tgfx beside jax.

What it does, each part the way optax/flax users spell it (tgfx's side through `tg.optim`; jax's through the same
arithmetic written out as optax computes it, since optax is not a dependency):

- the model: a 3-layer MLP classifier with dropout after each hidden layer, a key per layer;
- the optimiser: `chain(clip_by_global_norm(1), adamw(warmup_cosine_decay_schedule(...), mask=matrices))`, the
  schedule read from the step counter inside the optimiser's state (an int32 array), an EMA of the parameters, and
  gradient accumulation over micro-batches by `lax.scan`; the jitted step donates the state (`donate_argnums`);
- keys: `key, sub = split(key)` every step outside the step, `fold_in(sub, step)` inside it, then a key per
  micro-batch (`fold_in` by the scan's index) and one per layer (`split`);
- eager code between steps: the loss read back every step (`float`), a running mean in Python, `debug.print` in the
  step, an eval (a second jitted function, on a batch of another shape) every `eval_every` steps, a checkpoint saved
  every `save_every` steps (tgfx: `tg.save`; jax: `np.savez`) and, once, training resumed from one;
- data: a numpy loader that shuffles each epoch with numpy and hands numpy arrays to the step; an epoch's last batch
  is a partial one (another shape: one more trace, not one per epoch).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, init


@dataclass(frozen=True)
class Sizes:
    d_in: int
    hidden: int
    classes: int
    batch: int          # a full batch; the epoch's last one is `last` rows
    last: int
    micro: int          # micro-batches a batch is split into (gradient accumulation)
    eval_rows: int
    eval_every: int
    save_every: int
    warmup: int
    decay: int

    @property
    def rows(self) -> int:
        return self.batch * 6 + self.last


QUICK = Sizes(d_in=16, hidden=32, classes=4, batch=32, last=16, micro=4, eval_rows=48, eval_every=5, save_every=7,
              warmup=4, decay=40)
FULL = Sizes(d_in=64, hidden=256, classes=10, batch=256, last=128, micro=4, eval_rows=512, eval_every=10,
             save_every=30, warmup=20, decay=200)
RATE, MAX_NORM, WEIGHT_DECAY, EMA_DECAY, DROPOUT = 3e-3, 1.0, 1e-2, 0.99, 0.1


# ---- the optimiser: tgfx's tg.optim, and the same for jax written out as optax computes it ----
def optimiser(fw: Fw, s: Sizes) -> tuple[Callable, Callable]:
    """(init(params) -> state, update(grads, state, params) -> (updates, state)) of clip_by_global_norm then adamw at
    a warm-up + cosine rate, the weight decay on matrices only."""
    def matrices(p: Any) -> Any:
        return fw.tree_map(lambda x: x.ndim > 1, p)
    if fw.name == "tgfx":
        import tgfx as tg
        rate = tg.optim.warmup_cosine_decay_schedule(0.0, RATE, s.warmup, s.decay)
        opt = tg.optim.chain(tg.optim.clip_by_global_norm(MAX_NORM),
                             tg.optim.adamw(rate, weight_decay=WEIGHT_DECAY, mask=matrices))
        return opt.init, opt.update
    xp = fw.xp
    b1, b2, eps = 0.9, 0.999, 1e-8

    def schedule(count: Any) -> Any:   # optax.warmup_cosine_decay_schedule (join_schedules of linear and cosine)
        warm = RATE * xp.clip(count, 0, s.warmup) / s.warmup
        t = xp.clip(count - s.warmup, 0, s.decay - s.warmup)
        return xp.where(count < s.warmup, warm, RATE * 0.5 * (1 + xp.cos(math.pi * t / (s.decay - s.warmup))))

    def init_state(p: Any) -> Any:
        zeros = fw.tree_map(xp.zeros_like, p)
        return {"count": xp.zeros((), xp.int32), "mu": zeros, "nu": fw.tree_map(xp.zeros_like, p)}

    def update(g: Any, st: Any, p: Any) -> Any:
        leaves = [leaf for leaf in _leaves(fw, g)]
        norm = xp.sqrt(sum((leaf * leaf).sum() for leaf in leaves))
        g = fw.tree_map(lambda x: xp.where(norm < MAX_NORM, x, x / norm * MAX_NORM), g)
        mu = fw.tree_map(lambda m, x: (1 - b1) * x + b1 * m, st["mu"], g)
        nu = fw.tree_map(lambda v, x: (1 - b2) * x * x + b2 * v, st["nu"], g)
        n = (st["count"] + 1).astype(xp.float32)
        u = fw.tree_map(lambda m, v: (m / (1 - b1 ** n)) / (xp.sqrt(v / (1 - b2 ** n)) + eps), mu, nu)
        u = fw.tree_map(lambda d, x, on: d + WEIGHT_DECAY * x if on else d, u, p, matrices(p))
        lr = schedule(st["count"])
        return fw.tree_map(lambda d: -lr * d, u), {"count": st["count"] + 1, "mu": mu, "nu": nu}
    return init_state, update


def _leaves(fw: Fw, tree: Any) -> list:
    if fw.name == "tgfx":
        import tgfx as tg
        return tg.tree.leaves(tree)
    import jax
    return jax.tree.leaves(tree)


def _library(fw: Fw) -> tuple[Callable, Callable, Callable, Callable]:
    """(debug_print, save(path, tree), load(path, like), traces(jitted) -> int) of the framework."""
    if fw.name == "tgfx":
        import tgfx as tg
        return (tg.debug.print, lambda path, tree: tg.save(path + ".safetensors", tree),
                lambda path, like: tg.load(path + ".safetensors", like=like), lambda f: f.trace_count)
    import jax

    def save(path: str, tree: Any) -> None:
        np.savez(path + ".npz", *[np.asarray(x) for x in jax.tree.leaves(tree)])

    def load(path: str, like: Any) -> Any:
        with np.load(path + ".npz") as f:
            return jax.tree.unflatten(jax.tree.structure(like), [jax.numpy.asarray(f[k]) for k in f.files])
    return jax.debug.print, save, load, lambda f: f._cache_size()


# ---- the script ----
@dataclass
class Trainer:
    """The script's state and its step; `train(i)` runs step i with the eager code around it."""
    fw: Fw
    s: Sizes
    ckpt_dir: str
    log: io.StringIO = field(default_factory=io.StringIO)     # what debug.print wrote
    losses: list[float] = field(default_factory=list)
    evals: list[tuple[int, float, float]] = field(default_factory=list)  # (step, accuracy, EMA's accuracy)
    running: float = 0.0

    def __post_init__(self) -> None:
        fw, s = self.fw, self.s
        xp = fw.xp
        rng = np.random.default_rng(0)
        centers = rng.standard_normal((s.classes, s.d_in)).astype(np.float32) * 0.3
        labels = rng.integers(0, s.classes, s.rows + s.eval_rows).astype(np.int32)
        feats = centers[labels] + rng.standard_normal((len(labels), s.d_in)).astype(np.float32)
        self.x, self.y = feats[:s.rows], labels[:s.rows]
        self.x_eval, self.y_eval = feats[s.rows:], labels[s.rows:]
        sizes = [s.d_in, s.hidden, s.hidden, s.classes]
        self.params = [{"w": fw.asarray(init(rng, i, o)), "b": fw.asarray(np.zeros(o, np.float32))}
                       for i, o in zip(sizes[:-1], sizes[1:], strict=True)]
        opt_init, opt_update = optimiser(fw, s)
        self.opt_state = opt_init(self.params)
        self.ema = fw.tree_map(lambda p: p * 1, self.params)
        self.key = fw.key(0)
        self.loader = np.random.default_rng(1)
        self.order: list[np.ndarray] = []
        self.debug_print, self.save, self.load, self.traces = _library(fw)
        layers = len(self.params)

        def forward(p: Any, x: Any, key: Any) -> Any:
            keys = fw.split(key, layers - 1) if key is not None else [None] * (layers - 1)
            for layer, k in zip(p[:-1], keys, strict=True):
                x = fw.nn.relu(x @ layer["w"] + layer["b"])
                if k is not None:   # dropout, a key per layer
                    x = xp.where(fw.random.bernoulli(k, 1 - DROPOUT, x.shape), x / (1 - DROPOUT), 0.0)
            return x @ p[-1]["w"] + p[-1]["b"]

        def loss_fn(p: Any, x: Any, y: Any, key: Any) -> Any:
            logp = fw.log_softmax(forward(p, x, key))
            return -xp.take_along_axis(logp, y[:, None], axis=1).mean()

        def step(params: Any, opt_state: Any, ema: Any, x: Any, y: Any, key: Any, i: Any) -> Any:
            key = fw.random.fold_in(key, i)
            xs = x.reshape(s.micro, x.shape[0] // s.micro, x.shape[1])
            ys = y.reshape(s.micro, y.shape[0] // s.micro)

            def micro(acc: Any, batch: Any) -> Any:   # gradient accumulation
                j, xm, ym = batch
                value, g = fw.value_and_grad(loss_fn)(params, xm, ym, fw.random.fold_in(key, j))
                total, grads = acc
                return (total + value, fw.tree_map(lambda a, b: a + b, grads, g)), None
            zeros = fw.tree_map(xp.zeros_like, params)
            (total, grads), _ = fw.lax.scan(micro, (xp.zeros((), xp.float32), zeros),
                                            (xp.arange(s.micro), xs, ys))
            grads = fw.tree_map(lambda g: g / s.micro, grads)
            updates, opt_state = opt_update(grads, opt_state, params)
            params = fw.tree_map(lambda p, u: p + u, params, updates)
            ema = fw.tree_map(lambda e, p: EMA_DECAY * e + (1 - EMA_DECAY) * p, ema, params)
            loss = total / s.micro
            self.debug_print("step {i}: loss {loss}", i=i, loss=loss)
            return params, opt_state, ema, loss

        def accuracy(p: Any, x: Any, y: Any) -> Any:
            return (forward(p, x, None).argmax(-1) == y).astype(xp.float32).mean()
        self.step = fw.jit(step, donate_argnums=(0, 1, 2))
        self.accuracy = fw.jit(accuracy)

    def batch(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Step i's batch: epochs of shuffled rows, each ending with a partial batch."""
        per_epoch = self.s.rows // self.s.batch + 1
        epoch, j = divmod(i, per_epoch)
        while len(self.order) <= epoch:
            self.order.append(self.loader.permutation(self.s.rows))
        rows = self.order[epoch][j * self.s.batch:(j + 1) * self.s.batch]
        return self.x[rows], self.y[rows]

    def train(self, i: int) -> float:
        fw = self.fw
        x, y = self.batch(i)
        self.key, sub = fw.split(self.key)
        with contextlib.redirect_stdout(self.log):
            self.params, self.opt_state, self.ema, loss = self.step(self.params, self.opt_state, self.ema, x, y,
                                                                    sub, i)
            value = float(loss)
        self.losses.append(value)
        self.running += (value - self.running) / len(self.losses)
        if (i + 1) % self.s.eval_every == 0:
            self.evals.append((i, float(self.accuracy(self.params, self.x_eval, self.y_eval)),
                               float(self.accuracy(self.ema, self.x_eval, self.y_eval))))
        if (i + 1) % self.s.save_every == 0:
            self.save(os.path.join(self.ckpt_dir, f"ckpt{i + 1}"), self.state())
        return value

    def state(self) -> dict[str, Any]:
        return {"params": self.params, "opt": self.opt_state, "ema": self.ema, "key": self.key}

    def restore(self, step: int) -> None:
        """Go back to the checkpoint saved after `step` steps: its arrays, and the loader's numpy state."""
        st = self.load(os.path.join(self.ckpt_dir, f"ckpt{step}"), self.state())
        self.params, self.opt_state, self.ema, self.key = st["params"], st["opt"], st["ema"], st["key"]
        self.losses = self.losses[:step]


def training(fw: Fw, quick: bool) -> Step:
    """bench/programs.py's Step: step i of the script (its eager code included); the loss as the framework's
    array."""
    t = Trainer(fw, QUICK if quick else FULL, tempfile.mkdtemp(prefix="tgfx-training-"))
    return lambda i: fw.asarray(np.float32(t.train(i)))


@dataclass
class Run:
    cpu_s: float
    step_cpu_ms: list[float]
    traces: tuple[int, int]
    losses: list[float]
    evals: list[tuple[int, float, float]]
    resumed: bool
    printed: int


def run_script(fw: Fw, s: Sizes, steps: int) -> Run:
    """The script end to end: `steps` steps, then back to the last checkpoint and on again to `steps`; CPU time of
    each step (the first, compiling ones included) and of all of it."""
    with tempfile.TemporaryDirectory(prefix="tgfx-training-") as ckpt:
        t0 = time.process_time()
        trainer = Trainer(fw, s, ckpt)
        per_step = []
        for i in range(steps):
            a = time.process_time()
            trainer.train(i)
            per_step.append((time.process_time() - a) * 1e3)
        first = list(trainer.losses)
        back = (steps // s.save_every) * s.save_every
        trainer.restore(back)
        # the loader's shuffles are drawn at each epoch's first step from one generator: drawn again the same
        for i in range(back, steps):
            trainer.train(i)
        cpu = time.process_time() - t0
        return Run(cpu, per_step, (trainer.traces(trainer.step), trainer.traces(trainer.accuracy)), first,
                   trainer.evals, trainer.losses == first, trainer.log.getvalue().count("\n"))


def main(argv: list[str] | None = None) -> int:
    from bench.frameworks import jax_fw, tgfx_fw
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args(argv)
    s = QUICK if args.quick else FULL
    from tgfx import config
    config.CACHE_DIR.value = tempfile.mkdtemp(prefix="tgfx-training-cache-")   # a cold first call, as jax's
    runs = {fw.name: run_script(fw, s, args.steps) for fw in (tgfx_fw(), jax_fw())}
    tg_run, jx = runs["tgfx"], runs["jax"]
    print(f"{'':6s} {'total cpu s':>11s} {'first step ms':>13s} {'step ms (median of rest)':>24s} {'traces':>8s} "
          f"{'resumed':>8s} {'printed':>8s} {'last loss':>10s}")
    for name, r in runs.items():
        rest = sorted(r.step_cpu_ms[1:])[len(r.step_cpu_ms[1:]) // 2]
        print(f"{name:6s} {r.cpu_s:11.2f} {r.step_cpu_ms[0]:13.1f} {rest:24.2f} {str(r.traces):>8s} "
              f"{str(r.resumed):>8s} {r.printed:8d} {r.losses[-1]:10.5f}")
    med = [sorted(r.step_cpu_ms[1:])[len(r.step_cpu_ms[1:]) // 2] for r in (tg_run, jx)]
    print(f"tgfx/jax: total {tg_run.cpu_s / jx.cpu_s:.2f}, per step {med[0] / med[1]:.2f}")
    worst = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(tg_run.losses, jx.losses, strict=True))
    print(f"largest relative loss difference {worst:.2e}; evals tgfx {tg_run.evals[-1]} jax {jx.evals[-1]}")
    return 0 if worst < 1e-3 and tg_run.resumed and jx.resumed and tg_run.traces == jx.traces else 1


if __name__ == "__main__":
    sys.exit(main())
