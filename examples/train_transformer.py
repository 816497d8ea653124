"""Train a small character-level transformer on a text it ships inline, with `tg.jit(tg.value_and_grad)` and Adam.

    python examples/train_transformer.py                 # 60 steps, the loss printed every 10
    python examples/train_transformer.py --steps 200 --dim 64 --seq 32

The model is functional, as JAX programs write it: a params pytree of Tensors and a pure
`Transformer.apply(params, tokens)`. A token embedding plus a learned position embedding, `--layers` pre-norm blocks
of causal multi-head attention (`tg.nn.MultiHeadAttention`) and a GELU MLP (`tg.nn.Linear`, `tg.nn.gelu`), each behind
a `tg.nn.LayerNorm`, then a final layer norm and a projection to the vocabulary; softmax cross-entropy against the
next character. The whole training step (forward, backward, Adam update) is one jitted function, traced once and
replayed every step. With the defaults the loss falls from about 3.6 (ln 29 is 3.37) to about 1.3 in 60 steps.
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import tgfx as tg
import tgfx.numpy as tnp

TEXT = ("the quick brown fox jumps over the lazy dog. "
        "a journey of a thousand miles begins with a single step. "
        "to be or not to be, that is the question. "
        "all that glitters is not gold. ") * 8
VOCAB = sorted(set(TEXT))


def encode(text: str) -> np.ndarray:
    """Character ids (int32) of `text`, in the vocabulary of `TEXT`."""
    index = {c: i for i, c in enumerate(VOCAB)}
    return np.array([index[c] for c in text], dtype=np.int32)


class Transformer:
    """A decoder-only transformer's hyperparameters; `init` and `apply` are pure functions over a params pytree."""

    def __init__(self, vocab: int, seq: int, dim: int, heads: int, layers: int) -> None:
        self.vocab, self.seq, self.dim, self.layers = vocab, seq, dim, layers
        self.embed = tg.nn.Embedding(vocab, dim, embedding_init=tg.nn.initializers.normal(0.02))
        self.pos = tg.nn.Embedding(seq, dim, embedding_init=tg.nn.initializers.normal(0.02))
        self.norm = tg.nn.LayerNorm()
        self.attn = tg.nn.MultiHeadAttention(heads, causal=True)
        self.up, self.down = tg.nn.Linear(4 * dim), tg.nn.Linear(dim)
        self.head = tg.nn.Linear(vocab)

    def init(self, key: tg.Tensor, batch: int) -> dict[str, Any]:
        """Fresh parameters for batches of `batch` sequences."""
        x, hidden = (batch, self.seq, self.dim), (batch, self.seq, 4 * self.dim)
        k = iter(tg.random.split(key, 3 + 3 * self.layers))
        blocks = [{"ln1": self.norm.init(key, x), "attn": self.attn.init(next(k), x), "ln2": self.norm.init(key, x),
                   "up": self.up.init(next(k), x), "down": self.down.init(next(k), hidden)}
                  for _ in range(self.layers)]
        return {"embed": self.embed.init(next(k), (batch, self.seq)), "pos": self.pos.init(next(k), (self.seq,)),
                "blocks": blocks, "ln_f": self.norm.init(key, x), "head": self.head.init(next(k), x)}

    def apply(self, params: dict[str, Any], tokens: tg.Tensor) -> tg.Tensor:
        """Logits (batch, seq, vocab) for int32 `tokens` (batch, seq): position t sees tokens 0..t only."""
        x = self.embed.apply(params["embed"], tokens) + self.pos.apply(params["pos"], tnp.arange(self.seq))
        for blk in params["blocks"]:      # pre-norm residual blocks
            x = x + self.attn.apply(blk["attn"], self.norm.apply(blk["ln1"], x))
            x = x + self.down.apply(blk["down"], tg.nn.gelu(self.up.apply(blk["up"], self.norm.apply(blk["ln2"], x))))
        return self.head.apply(params["head"], self.norm.apply(params["ln_f"], x))


def make_step(model: Transformer, opt: tg.optim.GradientTransformation) -> tg.jit:
    def loss_fn(params: Any, tokens: tg.Tensor, targets: tg.Tensor) -> tg.Tensor:
        logits = model.apply(params, tokens)
        return tg.nn.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    @tg.jit
    def train_step(params: Any, state: Any, tokens: tg.Tensor, targets: tg.Tensor) -> tuple[Any, Any, tg.Tensor]:
        loss, grads = tg.value_and_grad(loss_fn)(params, tokens, targets)
        updates, state = opt.update(grads, state, params)
        return tg.optim.apply_updates(params, updates), state, loss
    return train_step


def main(argv: list[str] | None = None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=16, help="context length in characters")
    ap.add_argument("--dim", type=int, default=32, help="model width")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args(argv)
    if args.dim % args.heads:
        ap.error(f"--dim {args.dim} must be divisible by --heads {args.heads}")

    data = encode(TEXT)
    model = Transformer(len(VOCAB), args.seq, args.dim, args.heads, args.layers)
    params = model.init(tg.random.key(args.seed), args.batch)
    opt = tg.optim.adam(args.lr)
    state = opt.init(params)
    step = make_step(model, opt)
    rng = np.random.default_rng(args.seed)
    print(f"transformer: {len(data)} characters, vocabulary {len(VOCAB)}, {args.layers} blocks of width {args.dim} "
          f"with {args.heads} heads, context {args.seq}, batch {args.batch}")

    losses: list[float] = []
    start = time.perf_counter()
    for i in range(1, args.steps + 1):
        at = rng.integers(0, len(data) - args.seq - 1, size=args.batch)
        window = np.stack([data[a:a + args.seq + 1] for a in at])
        params, state, loss = step(params, state, tg.asarray(window[:, :-1]), tg.asarray(window[:, 1:]))
        losses.append(float(loss))
        if i == 1 or i % args.log_every == 0 or i == args.steps:
            print(f"step {i:4d}/{args.steps}  loss {losses[-1]:.4f}", flush=True)
    wall = time.perf_counter() - start
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} in {args.steps} steps, {wall:.1f} s "
          f"(train step traced {step.trace_count} time(s))")
    return losses[-1]


if __name__ == "__main__":
    main()
