"""Sharded training programs, timed by `bench/programs.py` (its docstring lists them): data- and tensor-parallel
steps over two devices (tgfx: CPU:0 and CPU:1; jax: two host devices by XLA_FLAGS), placed by `fw.shard` (tgfx's
`tg.shard`, jax's `device_put` of a `NamedSharding`) and jitted as they are, the collectives implicit."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam, adam_state, attention, dense, init, layer_norm


def dp_mlp(fw: Fw, quick: bool) -> Step:
    """JAX's spmd_mnist_classifier_fromscratch: a batch split along axis 0 over the devices, the parameters
    replicated, one jitted step of SGD with momentum whose gradient's all-reduce the sharding implies."""
    xp = fw.xp
    n, sizes, lr, mass = (32, (64, 32, 32, 10), 0.05, 0.9) if quick else (256, (784, 1024, 1024, 10), 0.05, 0.9)
    rng = np.random.default_rng(0)
    params = [{"w": fw.shard(init(rng, i, o), None), "b": fw.shard(np.zeros(o, np.float32), None)}
              for i, o in zip(sizes[:-1], sizes[1:], strict=True)]
    teacher = rng.standard_normal((sizes[0], sizes[-1]))
    images = rng.standard_normal((8 * n, sizes[0])).astype(np.float32)
    labels = np.eye(sizes[-1], dtype=np.float32)[(images @ teacher).argmax(1)]

    def loss(p: Any, x: Any, y: Any) -> Any:
        for layer in p[:-1]:
            x = xp.tanh(dense(layer, x))
        return -(fw.log_softmax(dense(p[-1], x)) * y).sum(-1).mean()

    @fw.jit
    def step(p: Any, v: Any, x: Any, y: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, x, y)
        v = fw.tree_map(lambda v, g: mass * v - lr * g, v, g)
        return fw.tree_map(lambda p, v: p + v, p, v), v, value
    state = [params, fw.tree_map(lambda a: a * 0, params)]

    def run(i: int) -> Any:
        j = (i % 8) * n
        x, y = fw.shard(images[j:j + n], 0), fw.shard(labels[j:j + n], 0)
        state[0], state[1], value = step(*state, x, y)
        return value
    return run


def tp_mlp(fw: Fw, quick: bool) -> Step:
    """A small pre-norm transformer-ish model whose MLP blocks are Megatron's: the first weight split by columns,
    the second by rows, the hidden activations split with them, one all-reduce per block (the second matmul's
    partial sums); embedding, norms and head replicated; Adam on every parameter where it lies."""
    xp = fw.xp
    b, t, d, hidden, layers, vocab = (4, 8, 16, 64, 2, 32) if quick else (16, 64, 256, 1024, 2, 256)
    rng = np.random.default_rng(0)

    def norm() -> dict[str, Any]:
        return {"g": fw.shard(np.ones(d, np.float32), None), "b": fw.shard(np.zeros(d, np.float32), None)}
    params = {"emb": fw.shard(init(rng, vocab, d, scale=0.1), None),
              "blocks": [{"n": norm(),
                          "up": {"w": fw.shard(init(rng, d, hidden), 1),          # columns: each device's hidden units
                                 "b": fw.shard(np.zeros(hidden, np.float32), 0)},
                          "down": {"w": fw.shard(init(rng, hidden, d), 0),        # rows: the same hidden units
                                   "b": fw.shard(np.zeros(d, np.float32), None)}} for _ in range(layers)],
              "nf": norm(), "head": {"w": fw.shard(init(rng, d, vocab), None),
                                     "b": fw.shard(np.zeros(vocab, np.float32), None)}}
    tokens_np = rng.integers(0, vocab, (8, b, t + 1)).astype(np.int32)

    def loss(p: Any, tokens: Any, targets: Any) -> Any:
        x = p["emb"][tokens]
        for blk in p["blocks"]:
            h = fw.gelu(dense(blk["up"], layer_norm(xp, blk["n"], x)))   # (b, t, hidden) split along hidden
            x = x + dense(blk["down"], h)                                 # partial sums, all-reduced
        logits = dense(p["head"], layer_norm(xp, p["nf"], x))
        return -xp.take_along_axis(fw.log_softmax(logits), targets[..., None], axis=-1).mean()

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, tokens: Any, targets: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, tokens, targets)
        p, m, v, n = adam(fw, p, m, v, n, g, 3e-3)
        return p, m, v, n, value
    state = adam_state(fw, params)   # (its step count uncommitted: replicated where the parameters are)

    def run(i: int) -> Any:
        w = tokens_np[i % 8]
        *state[:], value = step(*state, w[:, :-1], w[:, 1:])   # host data: replicated where the step runs
        return value
    return run


def dp_transformer(fw: Fw, quick: bool) -> Step:
    """A data-parallel transformer language model: token batches split along axis 0, parameters replicated; dropout
    from a key split eagerly every step, a warm-up-then-cosine learning rate computed in Python between steps and
    passed in as an array, Adam."""
    xp = fw.xp
    b, t, d, h, layers, vocab = (4, 8, 16, 2, 1, 32) if quick else (16, 64, 128, 4, 2, 256)
    steps, peak, warmup, rate = 100, 3e-3, 5, 0.1
    rng = np.random.default_rng(0)

    def lin(i: int, o: int) -> dict[str, Any]:
        return {"w": fw.shard(init(rng, i, o), None), "b": fw.shard(np.zeros(o, np.float32), None)}

    def norm() -> dict[str, Any]:
        return {"g": fw.shard(np.ones(d, np.float32), None), "b": fw.shard(np.zeros(d, np.float32), None)}
    params = {"emb": fw.shard(init(rng, vocab, d, scale=0.1), None),
              "pos": fw.shard(init(rng, t, d, scale=0.02), None),
              "blocks": [{"n1": norm(), "qkv": lin(d, 3 * d), "o": lin(d, d), "n2": norm(), "up": lin(d, 4 * d),
                          "down": lin(4 * d, d)} for _ in range(layers)],
              "nf": norm(), "head": lin(d, vocab)}
    causal = fw.asarray(np.tril(np.ones((t, t), bool)))   # uncommitted: it goes where the activations are
    text = rng.integers(0, vocab, (8, b, t + 1)).astype(np.int32)

    def self_attention(p: Any, x: Any) -> Any:
        qkv = dense(p["qkv"], x).reshape(x.shape[0], t, 3, h, d // h).transpose(2, 0, 3, 1, 4)
        return dense(p["o"], attention(xp, qkv[0], qkv[1], qkv[2], causal))

    def dropout(key: Any, x: Any) -> Any:
        keep = fw.uniform(key, x.shape) >= rate
        return xp.where(keep, x / (1 - rate), 0.0)

    def loss(p: Any, key: Any, tokens: Any, targets: Any) -> Any:
        x = p["emb"][tokens] + p["pos"]
        keys = fw.split(key, len(p["blocks"]))
        for blk, k in zip(p["blocks"], keys, strict=True):
            x = x + self_attention(blk, layer_norm(xp, blk["n1"], x))
            x = x + dropout(k, dense(blk["down"], fw.gelu(dense(blk["up"], layer_norm(xp, blk["n2"], x)))))
        logits = dense(p["head"], layer_norm(xp, p["nf"], x))
        return -xp.take_along_axis(fw.log_softmax(logits), targets[..., None], axis=-1).mean()

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, key: Any, tokens: Any, targets: Any, lr: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, key, tokens, targets)
        p, m, v, n = adam(fw, p, m, v, n, g, lr)
        return p, m, v, n, value
    state = adam_state(fw, params)   # (its step count uncommitted: replicated where the parameters are)
    box = [fw.key(0)]

    def run(i: int) -> Any:
        box[0], sub = fw.split(box[0])                                    # eagerly, every step (uncommitted)
        lr = peak * min(1.0, (i + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(i, steps) / steps))
        w = text[i % 8]
        *state[:], value = step(*state, sub, fw.shard(w[:, :-1], 0), fw.shard(w[:, 1:], 0),
                                np.float32(lr))                      # host data: placed where the step runs
        return value
    return run
