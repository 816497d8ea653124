"""Train a small MLP classifier with `tg.grad` + `tg.jit` on the CPU.

The data is a synthetic two-spiral problem made here (no downloads). The training step is one jitted function: the
first call traces and compiles it, every later call replays the compiled kernels.

    python examples/train_mlp.py
"""
from __future__ import annotations

import time

import numpy as np

import tgfx as tg
import tgfx.numpy as tnp


def spirals(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.uniform(0.05, 1, n)) * 3 * np.pi
    label = rng.integers(0, 2, n)
    r = t / (3 * np.pi)
    ang = t + np.pi * label
    x = np.stack([r * np.cos(ang), r * np.sin(ang)], 1) + rng.normal(0, 0.02, (n, 2))
    return x.astype(np.float32), label.astype(np.int32)


def init(sizes: list[int], seed: int = 0) -> list[dict[str, tg.Tensor]]:
    rng = np.random.default_rng(seed)
    return [{"w": tg.asarray((rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32)),
             "b": tg.asarray(np.zeros(b, np.float32))} for a, b in zip(sizes[:-1], sizes[1:], strict=True)]


def forward(params: list[dict[str, tg.Tensor]], x: tg.Tensor) -> tg.Tensor:
    for layer in params[:-1]:
        x = tnp.maximum(x @ layer["w"] + layer["b"], 0)
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params: list[dict[str, tg.Tensor]], x: tg.Tensor, y_onehot: tg.Tensor) -> tg.Tensor:
    logits = forward(params, x)
    logits = logits - logits.max(axis=1, keepdims=True)
    logp = logits - tnp.log(tnp.exp(logits).sum(axis=1, keepdims=True))
    return -(logp * y_onehot).sum(axis=1).mean()


@tg.jit
def step(params: list[dict[str, tg.Tensor]], x: tg.Tensor, y_onehot: tg.Tensor, lr: float):
    loss, grads = tg.value_and_grad(loss_fn)(params, x, y_onehot)
    new = tg.tree.tree_map(lambda p, g: p - lr * g, params, grads)
    return new, loss


def main() -> None:
    x, y = spirals(1024)
    onehot = np.eye(2, dtype=np.float32)[y]
    params = init([2, 64, 64, 2])
    xs, ys = tg.asarray(x), tg.asarray(onehot)
    t0 = time.perf_counter()
    for i in range(301):
        params, loss = step(params, xs, ys, 0.1)
        if i == 0:
            print(f"first step (trace + compile): {(time.perf_counter() - t0) * 1e3:.0f} ms")
            t1 = time.perf_counter()
        if i % 50 == 0:
            print(f"step {i:4d}  loss {loss.item():.4f}")
    dt = (time.perf_counter() - t1) / 300
    acc = (np.argmax(forward(params, xs).numpy(), 1) == y).mean()
    print(f"{dt * 1e3:.2f} ms/step after the first, {step.trace_count} trace(s), train accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
