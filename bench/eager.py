"""Eager ops, one at a time, tgfx against jax: `python -m bench.eager [--only a,b] [--repeat 7] [--frameworks ...]`.

Users write eager code between jitted steps (schedules, key splitting, metrics, data prep); what matters there is
what one small op costs from the call to its result being ready. Each row runs one op on small arrays (16 floats,
4 x 4 and 16 x 16 matrices) and waits for its result (`block_until_ready`; `float(x)` is its own wait), so tgfx's
lazy graph is realised and compiled-program lookup, dispatch and the queue's round trip are all in the time, as
jax's asynchronous dispatch's are in its. The inputs are made once; a sample runs the op enough times to last
`--sample-ms` (20 ms); the median of `--repeat` samples is reported, in microseconds per op, with tgfx's time over
jax's (lower is better, below 1 means tgfx is faster). The first call of each op (its compile) is not timed: two
warm-up calls run first.

Run it from the checkout to measure (`cd /tmp/x && /tmp/jaxenv/bin/python -m bench.eager`): `python -m` puts the
current directory first on the path, so that checkout's `tgfx` is the one timed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

X = np.linspace(-2.0, 2.0, 16, dtype=np.float32)
Y = np.linspace(1.0, 3.0, 16, dtype=np.float32)
A = (np.arange(16, dtype=np.float32).reshape(4, 4) % 5) / 5
B = (np.arange(256, dtype=np.float32).reshape(16, 16) % 7) / 7
I = np.arange(16, dtype=np.int32)


class Lib:
    """The few names the ops need, for one framework; `inputs` are its copies of X, Y, A, B, I and a key."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "tgfx":
            import tgfx as tg
            import tgfx.numpy as tnp
            self.xp, self.random, self.asarray = tnp, tg.random, tg.asarray
            self.key = tg.random.key(0)
        else:
            import jax
            import jax.numpy as jnp
            jax.config.update("jax_platforms", "cpu")
            self.xp, self.random, self.asarray = jnp, jax.random, jnp.asarray
            self.key = jax.random.PRNGKey(0)
        self.x, self.y, self.a, self.b, self.i = (self.asarray(v) for v in (X, Y, A, B, I))
        self.between_steps(name)

    def between_steps(self, name: str) -> None:
        """What the "between steps" rows use: a learning-rate schedule (tgfx.optim's optax-style one; optax's own
        formula in jax.numpy, jax has no optax here) and an example_libraries step size, a step counter that moves
        every call (a schedule sees a new step number each time, as in a training loop), a computed loss, ten
        metrics, two 20-leaf pytrees and a host batch."""
        if name == "tgfx":
            import tgfx as tg
            from tgfx import optim
            from tgfx.example_libraries import optimizers
            self.schedule = optim.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 1000, 1e-5)
            self.tree_map, jit = tg.tree.tree_map, tg.jit
        else:
            import jax
            from jax.example_libraries import optimizers
            self.schedule = _optax_warmup_cosine_decay(0.0, 1e-3, 100, 1000, 1e-5)
            self.tree_map, jit = jax.tree_util.tree_map, jax.jit
        self.poly = optimizers.polynomial_decay(1e-3, 1000, 1e-5, 2.0)
        self.steps = 0
        self.loss = jit(lambda x: self.xp.sum(x * x))(self.x).block_until_ready()
        self.metrics = [self.loss * k for k in range(10)]
        self.acc = {f"w{k}": self.asarray(np.full((4, 4), k, np.float32)) for k in range(20)}
        self.grads = {f"w{k}": self.asarray(np.full((4, 4), 0.5, np.float32)) for k in range(20)}
        for t in (*self.metrics, *self.acc.values(), *self.grads.values()):
            t.block_until_ready()
        self.batch = np.arange(256 * 784, dtype=np.float32).reshape(256, 784) / (256 * 784)

    def step(self) -> int:
        """The next step number, 0 to 1199 (warmup, decay and past its end), then round again."""
        self.steps += 1
        return (self.steps - 1) % 1200


def _optax_warmup_cosine_decay(init: float, peak: float, warmup: int, decay_steps: int, end: float) -> Callable:
    """optax.warmup_cosine_decay_schedule, as optax writes it (join_schedules of a linear and a cosine one)."""
    import jax.numpy as jnp

    def linear(count: Any) -> Any:
        frac = 1 - jnp.clip(count, 0, warmup) / warmup
        return (init - peak) * frac + peak

    def cosine(count: Any) -> Any:
        steps = decay_steps - warmup
        count = jnp.minimum(count, steps)
        decayed = (1 - end / peak) * 0.5 * (1 + jnp.cos(jnp.pi * count / steps)) + end / peak
        return peak * decayed

    def schedule(step: Any) -> Any:
        return jnp.where(step < warmup, linear(step), cosine(step - warmup))
    return schedule


# (name, op on a Lib) -> a result to wait for (an array, or a float already read)
OPS: list[tuple[str, Callable[[Lib], Any]]] = [
    ("x + 1", lambda L: L.x + 1),
    ("x * y", lambda L: L.x * L.y),
    ("exp(x)", lambda L: L.xp.exp(L.x)),
    ("sum(x)", lambda L: L.xp.sum(L.x)),
    ("x.reshape(4, 4)", lambda L: L.x.reshape(4, 4)),
    ("a.T", lambda L: L.a.T),
    ("x[3]", lambda L: L.x[3]),
    ("x[1:5]", lambda L: L.x[1:5]),
    ("x.at[3].set(0)", lambda L: L.x.at[3].set(0.0)),
    ("stack([x, y, x])", lambda L: L.xp.stack([L.x, L.y, L.x])),
    ("concatenate([x, y])", lambda L: L.xp.concatenate([L.x, L.y])),
    ("where(x > 0, x, y)", lambda L: L.xp.where(L.x > 0, L.x, L.y)),
    ("a @ a (4x4)", lambda L: L.a @ L.a),
    ("b @ b (16x16)", lambda L: L.b @ L.b),
    ("split(key)", lambda L: L.random.split(L.key)),
    ("normal(key, (16,))", lambda L: L.random.normal(L.key, (16,))),
    ("x.astype(int32)", lambda L: L.x.astype(L.xp.int32)),
    ("x < y", lambda L: L.x < L.y),
    ("float(sum(x))", lambda L: float(L.xp.sum(L.x))),
    ("x[2].item()", lambda L: L.x[2].item()),
    ("i * 3 + 1 (int32)", lambda L: L.i * 3 + 1),
    ("mean(x * y + 1)", lambda L: L.xp.mean(L.x * L.y + 1)),
]

# what users run eagerly between jitted steps: a schedule of a moving step number, a loss and metrics read, gradients
# accumulated over a pytree, a key split and used, a host batch put on the device
BETWEEN: list[tuple[str, Callable[[Lib], Any]]] = [
    ("warmup_cosine(step)", lambda L: L.schedule(L.step())),
    ("polynomial_decay(step)", lambda L: L.poly(L.step())),
    ("float(loss)", lambda L: float(L.loss)),
    ("mean(stack(metrics))", lambda L: L.xp.mean(L.xp.stack(L.metrics))),
    ("tree_map(+, acc, grads)", lambda L: list(L.tree_map(lambda a, b: a + b, L.acc, L.grads).values())),
    ("where(x>0,x,0).sum().item", lambda L: L.xp.where(L.x > 0, L.x, 0).sum().item()),
    ("split(key); normal(sub,4)", lambda L: L.random.normal(L.random.split(L.key)[1], (4,))),
    ("asarray(batch 256x784)", lambda L: L.asarray(L.batch)),
]


def wait(r: Any) -> Any:
    if isinstance(r, float | int):
        return r
    for t in r if isinstance(r, tuple | list) else (r,):
        t.block_until_ready()
    return r


def run_op(op: Callable[[Lib], Any], lib: Lib, repeat: int, sample_s: float = 0.02,
           clock: Callable[[], float] = time.process_time) -> float:
    """Median microseconds per call of `wait(op(lib))`, over `repeat` samples of at least `sample_s` each, by
    `clock` (the process's CPU time by default: its threads' too, the queue's; a loaded host's wall clock is
    noise)."""
    for _ in range(2):
        wait(op(lib))
    n = 1
    while True:   # calls per sample: enough to last sample_s
        t = clock()
        for _ in range(n):
            wait(op(lib))
        dt = clock() - t
        if dt >= sample_s:
            break
        n = max(2 * n, int(n * sample_s / max(dt, 1e-9)) + 1)
    samples = [dt / n]
    for _ in range(repeat - 1):
        t = clock()
        for _ in range(n):
            wait(op(lib))
        samples.append((clock() - t) / n)
    return statistics.median(samples) * 1e6


def check(name: str, libs: list[Lib]) -> str:
    """'' when every framework's result agrees with the first's, else what differs."""
    op = dict(OPS + BETWEEN)[name]
    got = []
    for lib in libs:
        lib.steps = 517   # (a schedule's step: the same for each framework)
        r = op(lib)
        got.append(np.asarray([np.asarray(t) for t in r] if isinstance(r, list) else r))
    if name.startswith(("split", "normal")):   # different generators: compare shapes only
        return "" if all(g.shape == got[0].shape for g in got) else f"shapes {[g.shape for g in got]}"
    for lib, g in zip(libs[1:], got[1:], strict=True):
        if g.shape != got[0].shape or not np.allclose(g, got[0], rtol=1e-5, atol=1e-6):
            return f"{lib.name} differs from {libs[0].name}"
    return ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated substrings of op names")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--frameworks", default="tgfx,jax")
    p.add_argument("--sample-ms", type=float, default=20.0, help="the least time a sample runs for")
    p.add_argument("--clock", choices=("process", "wall"), default="process",
                   help="process CPU time (all its threads) or wall-clock time")
    args = p.parse_args(argv)
    libs = []
    for name in args.frameworks.split(","):
        try:
            libs.append(Lib(name))
        except ImportError as e:
            print(f"# {name} skipped: {e}")
    only = [s for s in args.only.split(",") if s]
    clock = time.process_time if args.clock == "process" else time.perf_counter
    print(f"# eager ops, us per op with its wait ({args.clock} time), median of {args.repeat}; load average "
          f"{os.getloadavg()[0]:.1f}")
    for title, table in (("op", OPS), ("between steps", BETWEEN)):
        ops = [(n, op) for n, op in table if not only or any(s in n for s in only)]
        if not ops:
            continue
        print(f"{title:26s}" + "".join(f"{lib.name:>10s}" for lib in libs) + ("   tgfx/jax" if len(libs) > 1 else ""))
        ratios = []
        for name, op in ops:
            times = [run_op(op, lib, args.repeat, args.sample_ms / 1000, clock) for lib in libs]
            bad = check(name, libs) if len(libs) > 1 else ""
            line = f"{name:26s}" + "".join(f"{t:10.1f}" for t in times)
            if len(libs) > 1:
                ratios.append(times[0] / times[1])
                line += f"{ratios[-1]:11.2f}"
            print(line + (f"   WRONG: {bad}" if bad else ""))
        if ratios:
            print(f"{'geometric mean':26s}" + " " * 10 * len(libs) + f"{np.exp(np.mean(np.log(ratios))):11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
