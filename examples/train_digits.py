"""Train an MLP on the handwritten digits scikit-learn ships (8x8 images, 10 classes), with `tg.jit(grad)` and Adam.

    python -m pip install -e '.[examples]' && python examples/train_digits.py
    python examples/train_digits.py --devices 2      # data-parallel on CPU:0 and CPU:1: same result
    python examples/train_digits.py --plot loss.png  # the loss curve, with matplotlib installed
    mpiexec -n 2 python examples/train_digits.py --distributed   # data-parallel over 2 processes: same result

The model is `tg.nn` layers over a parameter pytree; the optimizer is `tg.optim.adam`; the whole training step
(forward, backward, Adam update) is one jitted function, traced once and replayed for every batch. With
`--devices N` the batch is sharded along its first axis and the parameters and optimizer state are replicated:
each device computes the gradient of its part of the batch and an all-reduce ring sums them. With `--distributed`
(under mpiexec) the devices are every process's (`tg.distributed`), and MPI all-reduces the gradients between them.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

import tgfx as tg

MODEL = tg.nn.Sequential(tg.nn.Linear(128), tg.nn.relu, tg.nn.Linear(128), tg.nn.relu, tg.nn.Linear(10))


def load_digits(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The 1,797 digits as float32 pixels in [0, 1], split 80/20 into train and test sets."""
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError:
        sys.exit("this example needs scikit-learn for its data set: python -m pip install -e '.[examples]'")
    data = sk_load_digits()
    x, y = (data.data / 16.0).astype(np.float32), data.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(x))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def loss_fn(params: Any, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    logits = MODEL.apply(params, x)
    return tg.nn.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def make_step(opt: tg.optim.GradientTransformation) -> tg.jit:
    @tg.jit
    def train_step(params: Any, state: Any, x: tg.Tensor, y: tg.Tensor) -> tuple[Any, Any, tg.Tensor]:
        loss, grads = tg.value_and_grad(loss_fn)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return tg.optim.apply_updates(params, updates), state, loss
    return train_step


@tg.jit
def correct(params: Any, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    """How many of the batch the model classifies right."""
    return (MODEL.apply(params, x).argmax(axis=-1) == y).astype(tg.dtypes.int32).sum()


def main(argv: list[str] | None = None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--devices", type=int, default=1, help="train data-parallel on CPU:0 .. CPU:<n-1>")
    ap.add_argument("--distributed", action="store_true",
                    help="train data-parallel over the devices of every process (run under mpiexec -n N)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", metavar="PNG", help="write the loss curve here (needs matplotlib)")
    args = ap.parse_args(argv)
    if args.batch % args.devices:
        ap.error(f"--batch {args.batch} must divide evenly across --devices {args.devices}")

    devices = tuple(f"CPU:{i}" for i in range(args.devices))
    if args.distributed:  # every process runs this script and keeps its part of each batch (tg.distributed)
        tg.distributed.initialize()
        devices = tuple(tg.devices())
        if args.batch % len(devices):
            ap.error(f"--batch {args.batch} must divide evenly across the {len(devices)} devices {devices}")
    x_train, y_train, x_test, y_test = load_digits(args.seed)

    def place(a: Any, batch_axis: bool) -> tg.Tensor:
        """A Tensor on the training device(s): batches split across them, everything else replicated."""
        t = a if isinstance(a, tg.Tensor) else tg.asarray(a)
        return t if len(devices) == 1 else tg.shard(t, devices, axis=0 if batch_axis else None)

    params = MODEL.init(tg.random.key(args.seed), (args.batch, x_train.shape[1]))
    opt = tg.optim.adam(args.lr)
    state = opt.init(params)
    params = tg.tree.tree_map(lambda p: place(p, False), params)
    state = tg.tree.tree_map(lambda s: place(s, False), state)
    step = make_step(opt)

    # the test set in batches of the training batch size (the remainder as one smaller batch)
    test_batches = [(place(x_test[i:i + args.batch], True), place(y_test[i:i + args.batch], True))
                    for i in range(0, len(x_test) - len(x_test) % args.batch, args.batch)]
    rest = len(x_test) % args.batch
    tail = (tg.asarray(x_test[-rest:]), tg.asarray(y_test[-rest:])) if rest else None

    def test_accuracy() -> float:
        hits = sum(int(correct(params, xb, yb)) for xb, yb in test_batches)
        if tail is not None:
            gathered = params if len(devices) == 1 else tg.tree.tree_map(lambda p: tg.device_put(p, "CPU:0"), params)
            hits += int(correct(gathered, *tail))
        return hits / len(x_test)

    rng = np.random.default_rng(args.seed)
    n_batches = len(x_train) // args.batch   # whole batches only: one shape, one trace
    where = tg.tree.tree_leaves(params)[0].device if len(devices) == 1 else \
        f"{len(devices)} devices ({', '.join(devices)}), data-parallel"   # one: the default (TGFX_DEVICE=CUDA: a GPU)
    if args.distributed:
        where += f" over {tg.process_count()} processes"
    say = print if tg.process_index() == 0 else (lambda *a, **k: None)   # one process reports
    say(f"digits: {len(x_train)} train / {len(x_test)} test images, {n_batches} batches of {args.batch}, on {where}")
    losses: list[float] = []
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        order = rng.permutation(len(x_train))
        epoch_loss = []
        for b in range(n_batches):
            idx = order[b * args.batch:(b + 1) * args.batch]
            params, state, loss = step(params, state, place(x_train[idx], True), place(y_train[idx], True))
            epoch_loss.append(loss)
        mean_loss = float(np.mean([float(v) for v in epoch_loss]))
        losses.append(mean_loss)
        acc = test_accuracy()
        say(f"epoch {epoch:3d}/{args.epochs}  loss {mean_loss:.4f}  test accuracy {100 * acc:5.1f}%  "
              f"({time.perf_counter() - t0:.2f} s)", flush=True)
    wall = time.perf_counter() - start
    say(f"test accuracy {100 * acc:.1f}% after {args.epochs} epochs in {wall:.1f} s "
          f"({wall / args.epochs:.3f} s per epoch; train step traced {step.trace_count} time(s))")
    if args.plot and tg.process_index() == 0:
        plot(losses, args.plot)
    return acc


def plot(losses: list[float], path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"not writing {path}: matplotlib is not installed (python -m pip install matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(range(1, len(losses) + 1), losses, marker="o", markersize=3)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    ax.set_yscale("log")
    ax.set_title("tgfx: MLP on sklearn digits")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote the loss curve to {path}")


if __name__ == "__main__":
    main()
