"""Programs of gathers, scatters and selections, timed by `bench/programs.py` (its docstring lists them): word2vec's
skip-gram with negative sampling, a mixture-of-experts layer with top-2 routing, beam search of a GRU language model,
and a CTC loss."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam_program, dense, init, sgd_step


def linear(fw: Fw, rng: np.random.Generator, i: int, o: int) -> dict[str, Any]:
    """A dense layer's params ({"w", "b"}, `dense`'s), the bias zero."""
    return {"w": fw.asarray(init(rng, i, o)), "b": fw.asarray(np.zeros(o, np.float32))}


def word2vec(fw: Fw, quick: bool) -> Step:
    vocab, d, b, negatives, window = (200, 16, 64, 5, 2) if quick else (5000, 64, 1024, 5, 2)
    rng = np.random.default_rng(0)
    freq = 1 / np.arange(1, vocab + 1)                                # a Zipfian corpus
    corpus = rng.choice(vocab, 20 * b, p=freq / freq.sum())
    noise = freq ** 0.75 / (freq ** 0.75).sum()                       # negatives from the unigram^(3/4) distribution
    batches = []
    for _ in range(8):
        at = rng.integers(window, len(corpus) - window, b)
        offset = rng.choice([o for o in range(-window, window + 1) if o], b)
        batches.append(tuple(fw.asarray(a.astype(np.int32)) for a in
                             (corpus[at], corpus[at + offset], rng.choice(vocab, (b, negatives), p=noise))))
    params = {"in": fw.asarray(rng.uniform(-0.5 / d, 0.5 / d, (vocab, d)).astype(np.float32)),
              "out": fw.asarray(init(rng, vocab, d, scale=0.1))}

    def loss(p: Any, center: Any, context: Any, negative: Any) -> Any:
        c = p["in"][center]                                           # (b, d): gathered rows; their gradient a
        pos = (c * p["out"][context]).sum(-1)                         # scatter-add into the table
        neg = (c[:, None, :] * p["out"][negative]).sum(-1)            # (b, negatives)
        return -(fw.log_sigmoid(pos) + fw.log_sigmoid(-neg).sum(-1)).mean()

    step = sgd_step(fw, loss, 0.02 * b)                               # word2vec's rate a pair, about, on the mean
    state = [params]

    def run(i: int) -> Any:
        state[0], value = step(state[0], *batches[i % 8])
        return value
    return run


def moe(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    n, d, hidden, experts, k = (32, 16, 32, 4, 2) if quick else (512, 64, 128, 8, 2)
    capacity = int(1.25 * n * k / experts)                            # Switch's capacity factor 1.25
    rng = np.random.default_rng(0)
    params = {"router": fw.asarray(init(rng, d, experts)),
              "w1": fw.asarray(init(rng, experts, d, hidden, scale=1 / math.sqrt(d))),
              "b1": fw.asarray(np.zeros((experts, 1, hidden), np.float32)),
              "w2": fw.asarray(init(rng, experts, hidden, d, scale=1 / math.sqrt(hidden))),
              "out": linear(fw, rng, d, 1)}
    teacher = rng.standard_normal((d, 4))
    xs = rng.standard_normal((8, n, d)).astype(np.float32)
    ys = np.sin(xs @ teacher).sum(-1, keepdims=True).astype(np.float32)

    def one_hot(idx: Any, size: int) -> Any:
        return (idx[..., None] == xp.arange(size)).astype(xp.float32)

    def layer(p: Any, x: Any) -> tuple[Any, Any]:
        probs = fw.softmax(x @ p["router"])                           # (n, experts)
        gates, chosen = fw.lax.top_k(probs, k)                        # (n, k) each
        gates = gates / gates.sum(-1, keepdims=True)
        mask = one_hot(chosen, experts)                               # (n, k, experts)
        # each token's place in its expert's queue: first choices before second ones, in token order (GShard)
        position = xp.cumsum(mask.transpose(1, 0, 2).reshape(k * n, experts), axis=0).reshape(k, n, experts)
        position = position.transpose(1, 0, 2) * mask - 1             # -1 where not routed there
        kept = mask * (position < capacity)                           # tokens over capacity are dropped
        slot = one_hot(xp.maximum(position, 0).astype(xp.int32), capacity) * kept[..., None]   # (n, k, e, c)
        dispatch = slot.sum(1)                                        # (n, experts, capacity)
        combine = (gates[:, :, None, None] * slot).sum(1)
        inputs = xp.einsum("nec,nd->ecd", dispatch, x)
        h = fw.gelu(xp.einsum("ecd,edh->ech", inputs, p["w1"]) + p["b1"])
        y = xp.einsum("nec,ecd->nd", combine, xp.einsum("ech,ehd->ecd", h, p["w2"]))
        share = mask[:, 0].mean(0)                                    # the fraction first routed to each expert
        aux = experts * (share * probs.mean(0)).sum()                 # Switch's load-balancing loss
        return x + y, aux

    def loss(p: Any, x: Any, target: Any) -> Any:
        h, aux = layer(p, x)
        return ((dense(p["out"], h) - target) ** 2).mean() + 0.01 * aux

    return adam_program(fw, loss, params, lambda i: (fw.asarray(xs[i % 8]), fw.asarray(ys[i % 8])))


def beam(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    b, width, vocab, hidden, length = (2, 4, 16, 16, 8) if quick else (16, 4, 256, 256, 32)
    rng = np.random.default_rng(0)
    p = {"emb": fw.asarray(init(rng, vocab, hidden, scale=1.0)), "wx": fw.asarray(init(rng, hidden, 3 * hidden)),
         "wh": fw.asarray(init(rng, hidden, 3 * hidden)), "b": fw.asarray(np.zeros(3 * hidden, np.float32)),
         "wo": fw.asarray(init(rng, hidden, vocab, scale=3 / math.sqrt(hidden)))}

    def gru(h: Any, tok: Any) -> tuple[Any, Any]:                     # -> the new state and the next token's log-probs
        x, hh = p["emb"][tok] @ p["wx"] + p["b"], h @ p["wh"]
        r = fw.sigmoid(x[..., :hidden] + hh[..., :hidden])
        z = fw.sigmoid(x[..., hidden:2 * hidden] + hh[..., hidden:2 * hidden])
        n = xp.tanh(x[..., 2 * hidden:] + r * hh[..., 2 * hidden:])
        h = (1 - z) * n + z * h
        return h, fw.log_softmax(h @ p["wo"])

    def expand(carry: Any, _: Any) -> Any:
        h, tok, score = carry                                          # (b, width, hidden), (b, width), (b, width)
        h, logp = gru(h, tok)
        total = (score[..., None] + logp).reshape(b, width * vocab)
        score, flat = lax.top_k(total, width)
        parent, tok = flat // vocab, (flat % vocab).astype(xp.int32)
        h = xp.take_along_axis(h, parent[..., None], axis=1)          # each new beam's parent's state
        return (h, tok, score), (tok, parent)

    def rescore(h: Any, tok: Any) -> Any:                             # the best sequence's log-prob, teacher-forced
        h, logp = gru(h, tok[0])
        return h, xp.take_along_axis(logp, tok[1][:, None], axis=1)[:, 0]

    @fw.jit
    def search(first: Any) -> Any:
        h0 = xp.zeros((b, width, hidden), dtype=xp.float32)
        start = xp.broadcast_to(first[:, None], (b, width))
        score0 = xp.broadcast_to(xp.asarray([0.0] + [-1e9] * (width - 1), dtype=xp.float32), (b, width))
        (_, _, score), (toks, parents) = lax.scan(expand, (h0, start, score0), None, length=length)

        def back(beam_at: Any, step: Any) -> Any:                      # follow the back-pointers from the last step
            tok, parent = step
            picked = xp.take_along_axis(tok, beam_at[:, None], axis=1)[:, 0]
            return xp.take_along_axis(parent, beam_at[:, None], axis=1)[:, 0], picked
        _, seq = lax.scan(back, xp.argmax(score, axis=1), (toks, parents), reverse=True)   # (length, b)
        seq = xp.concatenate([first[None], seq], axis=0)
        _, logps = lax.scan(rescore, xp.zeros((b, hidden), dtype=xp.float32), xp.stack([seq[:-1], seq[1:]], 1))
        return logps.sum(0).mean()    # the best beam's score, if the backtrace found its tokens

    def run(i: int) -> Any:
        return search(fw.asarray(((np.arange(b) + i) % vocab).astype(np.int32)))
    return run


def ctc(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    b, t, feats, hidden, symbols, longest = (4, 16, 8, 16, 7, 4) if quick else (16, 64, 32, 64, 27, 16)
    classes, s = symbols + 1, 2 * longest + 1                         # class 0 the blank; extended labels
    rng = np.random.default_rng(0)
    lengths = rng.integers(longest // 2, longest + 1, 8 * b)
    labels = rng.integers(1, classes, (8 * b, longest)) * (np.arange(longest) < lengths[:, None])
    extended = np.zeros((8 * b, s), np.int32)
    extended[:, 1::2] = labels                                        # blank, l1, blank, l2, ..., blank
    skip = np.zeros((8 * b, s), bool)                                 # s-2 -> s allowed: a label unlike the one before
    skip[:, 3::2] = labels[:, 1:] != labels[:, :-1]
    ends = np.stack([2 * lengths - 1, 2 * lengths], 1).astype(np.int32)
    frames = (rng.standard_normal((8 * b, feats, 1, t)) +           # frames that hint at the labels, spread in time
              np.repeat(np.eye(classes, feats)[extended], t // s + 1, 1)[:, :t].transpose(0, 2, 1)[:, :, None])
    frames = frames.astype(np.float32)
    params = {"conv1": fw.asarray(init(rng, hidden, feats, 1, 5, scale=1 / math.sqrt(5 * feats))),
              "conv2": fw.asarray(init(rng, hidden, hidden, 1, 5, scale=1 / math.sqrt(5 * hidden))),
              "out": linear(fw, rng, hidden, classes)}
    never = -1e5                                                      # log(0), finite so gradients stay finite

    def loss(p: Any, x: Any, ext: Any, can_skip: Any, end: Any) -> Any:
        h = xp.tanh(fw.conv(xp.tanh(fw.conv(x, p["conv1"])), p["conv2"]))          # (b, hidden, 1, t)
        logp = fw.log_softmax(dense(p["out"], h[:, :, 0].transpose(2, 0, 1)))      # (t, b, classes)
        emit = xp.take_along_axis(logp, xp.broadcast_to(ext[None], (t, b, s)), axis=2)   # (t, b, s)

        def forward(alpha: Any, e: Any) -> Any:
            pad = xp.full((b, 1), never, dtype=xp.float32)
            one = xp.concatenate([pad, alpha[:, :-1]], 1)
            two = xp.where(can_skip, xp.concatenate([pad, pad, alpha[:, :-2]], 1), never)
            m = xp.maximum(xp.maximum(alpha, one), two)
            alpha = m + xp.log(xp.exp(alpha - m) + xp.exp(one - m) + xp.exp(two - m)) + e
            return alpha, None
        start = xp.where(xp.arange(s) < 2, emit[0], never)
        alpha, _ = lax.scan(forward, start, emit[1:])
        return -fw.logsumexp(xp.take_along_axis(alpha, end, axis=1), axis=1).mean() / t

    def batch_of(i: int) -> tuple[Any, ...]:
        j = slice((i % 8) * b, (i % 8 + 1) * b)
        return tuple(fw.asarray(a[j]) for a in (frames, extended, skip, ends))
    return adam_program(fw, loss, params, batch_of, lr=3e-3)
