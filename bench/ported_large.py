"""Programs at realistic CPU sizes, timed by `bench/programs.py` (its docstring lists them): a GPT-style language
model and a ResNet-style CNN, each step tens to hundreds of milliseconds, so that the kernels' speed (matmuls,
convolutions, attention, normalisation backward, the optimizer update) counts, not dispatch."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, attention, dense, init, layer_norm


def gpt(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, t, d, h, layers, vocab = (2, 16, 32, 4, 2, 64) if quick else (16, 128, 256, 4, 4, 2048)
    steps, peak, warmup, clip, decay = 1000, 3e-4, 10, 1.0, 0.1
    rng = np.random.default_rng(0)

    def lin(i: int, o: int, scale: float = 0.02) -> dict[str, Any]:
        return {"w": fw.asarray(init(rng, i, o, scale=scale)), "b": fw.asarray(np.zeros(o, np.float32))}

    def norm() -> dict[str, Any]:
        return {"g": fw.asarray(np.ones(d, np.float32)), "b": fw.asarray(np.zeros(d, np.float32))}
    out_scale = 0.02 / math.sqrt(2 * layers)                            # GPT-2's scaled residual projections
    params = {"emb": fw.asarray(init(rng, vocab, d, scale=0.02)), "pos": fw.asarray(init(rng, t, d, scale=0.01)),
              "blocks": [{"n1": norm(), "qkv": lin(d, 3 * d), "o": lin(d, d, out_scale), "n2": norm(),
                          "up": lin(d, 4 * d), "down": lin(4 * d, d, out_scale)} for _ in range(layers)],
              "nf": norm()}
    causal = fw.asarray(np.tril(np.ones((t, t), bool)))

    def self_attention(p: Any, x: Any) -> Any:
        qkv = dense(p["qkv"], x).reshape(b, t, 3, h, d // h).transpose(2, 0, 3, 1, 4)
        return dense(p["o"], attention(xp, qkv[0], qkv[1], qkv[2], causal))

    def loss(p: Any, tokens: Any, targets: Any) -> Any:
        x = p["emb"][tokens] + p["pos"]
        for blk in p["blocks"]:
            x = x + self_attention(blk, layer_norm(xp, blk["n1"], x))
            x = x + dense(blk["down"], fw.gelu(dense(blk["up"], layer_norm(xp, blk["n2"], x))))
        logits = layer_norm(xp, p["nf"], x) @ p["emb"].T                   # the output projection tied to the embedding
        return -xp.take_along_axis(fw.log_softmax(logits), targets[..., None], axis=-1).mean()

    def leaves(tree: Any) -> list[Any]:
        if isinstance(tree, dict):
            return [a for k in sorted(tree) for a in leaves(tree[k])]
        return [a for part in tree for a in leaves(part)] if isinstance(tree, list) else [tree]

    b1, b2 = 0.9, 0.95
    decayed = fw.tree_map(lambda a: float(a.ndim >= 2), params)       # AdamW decays matrices, not gains or biases

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, tokens: Any, targets: Any, lr: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, tokens, targets)
        norm2 = sum((a * a).sum() for a in leaves(g))
        scale = xp.minimum(1.0, clip / xp.sqrt(norm2 + 1e-12))        # clipping by the global norm
        g = fw.tree_map(lambda a: a * scale, g)
        m = fw.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = fw.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        n = n + 1
        c1, c2 = 1 - b1 ** n, 1 - b2 ** n
        p = fw.tree_map(lambda p, m, v, wd: p - lr * ((m / c1) / (xp.sqrt(v / c2) + 1e-8) + decay * wd * p),
                        p, m, v, decayed)
        return p, m, v, n, value

    def zeros() -> Any:
        return fw.tree_map(lambda a: a * 0, params)
    state = [params, zeros(), zeros(), fw.asarray(np.zeros((), np.float32))]
    corpus = rng.integers(0, vocab, 8 * b * (t + 1)).astype(np.int32)
    corpus = np.where(rng.random(corpus.shape) < 0.5, np.roll(corpus, 1) * 7 % vocab, corpus).astype(np.int32)
    windows = corpus.reshape(8 * b, t + 1)

    def rate(i: int) -> float:                                         # linear warm-up, then a cosine decay
        if i < warmup:
            return peak * (i + 1) / warmup
        return peak * 0.5 * (1 + math.cos(math.pi * min(i - warmup, steps) / steps))

    def run(i: int) -> Any:
        rows = windows[(i % 8) * b:(i % 8 + 1) * b]
        *state[:], value = step(*state, fw.asarray(rows[:, :-1]), fw.asarray(rows[:, 1:]),
                                fw.asarray(np.float32(rate(i))))
        return value
    return run


def resnet(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, hw, widths = (4, 8, (4, 8, 8)) if quick else (64, 32, (16, 32, 64))
    lr, momentum, decay, classes = 0.05, 0.9, 5e-4, 10
    rng = np.random.default_rng(0)

    def he(k: int, i: int, o: int) -> Any:                             # HWIO
        return fw.asarray(init(rng, k, k, i, o, scale=math.sqrt(2 / (k * k * i))))

    def bn_params(c: int) -> tuple[dict[str, Any], dict[str, Any]]:
        return ({"g": fw.asarray(np.ones(c, np.float32)), "b": fw.asarray(np.zeros(c, np.float32))},
                {"mean": fw.asarray(np.zeros(c, np.float32)), "var": fw.asarray(np.ones(c, np.float32))})
    params: dict[str, Any] = {"stem": he(3, 3, widths[0])}
    stats: dict[str, Any] = {}
    params["stem_bn"], stats["stem_bn"] = bn_params(widths[0])
    c_in = widths[0]
    for s, c in enumerate(widths):
        for k in range(2):
            name, stride = f"s{s}b{k}", (2 if s > 0 and k == 0 else 1)
            blk: dict[str, Any] = {"c1": he(3, c_in, c), "c2": he(3, c, c)}
            bstats: dict[str, Any] = {}
            blk["bn1"], bstats["bn1"] = bn_params(c)
            blk["bn2"], bstats["bn2"] = bn_params(c)
            if stride != 1 or c_in != c:
                blk["proj"] = he(1, c_in, c)
                blk["bnp"], bstats["bnp"] = bn_params(c)
            params[name], stats[name] = blk, bstats
            c_in = c
    params["fc"] = {"w": fw.asarray(init(rng, c_in, classes)), "b": fw.asarray(np.zeros(classes, np.float32))}

    def conv(x: Any, w: Any, stride: int) -> Any:
        pad = w.shape[0] // 2
        return fw.lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad), (pad, pad)],
                                           dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def bn(p: Any, x: Any, new: dict[str, Any], name: str) -> Any:
        m = x.mean((0, 1, 2))                                          # training mode: the batch's statistics
        v = ((x - m) ** 2).mean((0, 1, 2))
        new[name] = {"mean": fw.stop_gradient(m), "var": fw.stop_gradient(v)}
        return (x - m) / xp.sqrt(v + 1e-5) * p["g"] + p["b"]

    def loss(p: Any, x: Any, y: Any) -> Any:
        new: dict[str, Any] = {}
        x = xp.maximum(bn(p["stem_bn"], conv(x, p["stem"], 1), new, "stem_bn"), 0)
        for s in range(len(widths)):
            for k in range(2):
                name, stride = f"s{s}b{k}", (2 if s > 0 and k == 0 else 1)
                blk, new[name] = p[name], {}
                z = xp.maximum(bn(blk["bn1"], conv(x, blk["c1"], stride), new[name], "bn1"), 0)
                z = bn(blk["bn2"], conv(z, blk["c2"], 1), new[name], "bn2")
                if "proj" in blk:                                      # the strided downsample's 1x1 projection
                    x = bn(blk["bnp"], conv(x, blk["proj"], stride), new[name], "bnp")
                x = xp.maximum(x + z, 0)
        logits = x.mean((1, 2)) @ p["fc"]["w"] + p["fc"]["b"]
        return -(fw.log_softmax(logits) * y).sum(-1).mean(), new

    @fw.jit
    def step(p: Any, mom: Any, st: Any, x: Any, y: Any) -> Any:
        (value, new), g = fw.value_and_grad(loss, has_aux=True)(p, x, y)
        st = fw.tree_map(lambda run, now: 0.9 * run + 0.1 * now, st, new)   # running statistics, carried
        mom = fw.tree_map(lambda m, g, p: momentum * m + g + decay * p, mom, g, p)
        return fw.tree_map(lambda p, m: p - lr * m, p, mom), mom, st, value
    images = rng.standard_normal((8 * b, hw, hw, 3)).astype(np.float32)
    labels = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, 8 * b)]
    state = [params, fw.tree_map(lambda a: a * 0, params), stats]

    def run(i: int) -> Any:
        j = (i % 8) * b
        *state[:], value = step(*state, fw.asarray(images[j:j + b]), fw.asarray(labels[j:j + b]))
        return value
    return run
