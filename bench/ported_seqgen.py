"""Sequence and generative models ported from JAX users' code, timed by `bench/programs.py` (its docstring lists
them): a seq2seq LSTM that learns addition, an SST-2 style GRU text classifier over padded batches, a PixelCNN with
a discretised logistic mixture, a Hamiltonian neural network integrated by RK4, a jraph-style graph network on padded
molecule batches and a VQ-VAE with codebook EMA updates."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam, adam_program, adam_state, dense, init


def linear(fw: Fw, rng: np.random.Generator, i: int, o: int, scale: float | None = None) -> dict[str, Any]:
    """A dense layer's params ({"w", "b"}, `dense`'s), the bias zero."""
    return {"w": fw.asarray(init(rng, i, o, scale=scale)), "b": fw.asarray(np.zeros(o, np.float32))}


def lstm_p(fw: Fw, rng: np.random.Generator, i: int, h: int) -> dict[str, Any]:
    return {"wx": fw.asarray(init(rng, i, 4 * h)), "wh": fw.asarray(init(rng, h, 4 * h)),
            "b": fw.asarray(np.zeros(4 * h, np.float32))}


def lstm_cell(fw: Fw, p: Any, carry: dict[str, Any], x: Any) -> dict[str, Any]:
    """One LSTM step (flax's OptimizedLSTMCell: the four gates one product, split), the carry a dict {"h", "c"}."""
    xp = fw.xp
    h = carry["h"].shape[-1]
    z = x @ p["wx"] + carry["h"] @ p["wh"] + p["b"]
    i, f, g, o = fw.sigmoid(z[:, :h]), fw.sigmoid(z[:, h:2 * h]), xp.tanh(z[:, 2 * h:3 * h]), fw.sigmoid(z[:, 3 * h:])
    c = f * carry["c"] + i * g
    return {"h": o * xp.tanh(c), "c": c}


def seq2seq(fw: Fw, quick: bool) -> Step:
    """Addition as a sequence to sequence task (the Keras/flax seq2seq example): "123+045" reversed into an LSTM
    encoder, its final carry starting an LSTM decoder fed the answer's digits (teacher forcing) after a start token,
    cross-entropy, Adam; then a greedy decode of a held-out batch (a `scan` feeding back its argmax), whose digit
    accuracy is added to the loss (so the decoded tokens must agree too)."""
    xp, lax = fw.xp, fw.lax
    b, digits, emb, hidden = (8, 2, 8, 32) if quick else (64, 3, 32, 128)
    vocab, plus, start = 12, 10, 11
    t_out = digits + 1
    rng = np.random.default_rng(0)
    params = {"emb": fw.asarray(init(rng, vocab, emb, scale=1.0)), "enc": lstm_p(fw, rng, emb, hidden),
              "dec": lstm_p(fw, rng, emb, hidden), "out": linear(fw, rng, hidden, vocab)}

    def encode(n: np.ndarray, width: int) -> np.ndarray:
        return (n[:, None] // 10 ** np.arange(width - 1, -1, -1)[None, :]) % 10

    def problems(count: int) -> tuple[np.ndarray, np.ndarray]:
        a, c = rng.integers(0, 10 ** digits, count), rng.integers(0, 10 ** digits, count)
        query = np.concatenate([encode(a, digits), np.full((count, 1), plus), encode(c, digits)], 1)[:, ::-1]
        return np.ascontiguousarray(query).astype(np.int32), encode(a + c, t_out).astype(np.int32)
    queries, answers = problems(8 * b)
    held_q, held_a = (fw.asarray(a) for a in problems(b))

    def encoder(p: Any, query: Any) -> Any:
        zeros = xp.zeros((query.shape[0], hidden), dtype=xp.float32)
        carry, _ = lax.scan(lambda c, x: (lstm_cell(fw, p["enc"], c, x), None), {"h": zeros, "c": zeros},
                            p["emb"][query.T])
        return carry

    def loss(p: Any, query: Any, answer: Any) -> Any:
        inputs = xp.concatenate([xp.full((answer.shape[0], 1), start, dtype=xp.int32), answer[:, :-1]], 1)

        def step(c: Any, x: Any) -> Any:
            c = lstm_cell(fw, p["dec"], c, x)
            return c, c["h"]
        _, hs = lax.scan(step, encoder(p, query), p["emb"][inputs.T])
        logp = fw.log_softmax(dense(p["out"], hs))                    # (t_out, b, vocab)
        return -xp.take_along_axis(logp, answer.T[..., None], axis=-1).mean()

    @fw.jit
    def greedy(p: Any, query: Any, answer: Any) -> Any:
        def step(state: Any, _: Any) -> Any:
            c, tok = state
            c = lstm_cell(fw, p["dec"], c, p["emb"][tok])
            tok = dense(p["out"], c["h"]).argmax(-1).astype(xp.int32)
            return (c, tok), tok
        first = xp.full((query.shape[0],), start, dtype=xp.int32)
        _, toks = lax.scan(step, (encoder(p, query), first), None, length=t_out)
        return (toks.T == answer).astype(xp.float32).mean()
    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, query: Any, answer: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, query, answer)
        p, m, v, n = adam(fw, p, m, v, n, g, 1e-2)
        return p, m, v, n, value
    state = adam_state(fw, params)

    def run(i: int) -> Any:
        j = (i % 8) * b
        *state[:], value = step(*state, fw.asarray(queries[j:j + b]), fw.asarray(answers[j:j + b]))
        return value + greedy(state[0], held_q, held_a)
    return run


def sst2(fw: Fw, quick: bool) -> Step:
    """An SST-2 style sentiment classifier: token embeddings, sentences of varying length padded to one width with a
    mask, a GRU over the padded batch (a padded step keeps its state), the outputs mean-pooled under the mask, two
    classes' softmax cross-entropy; AdamW (matrices decayed, as optax.adamw's mask) at a warm-up then cosine rate
    computed in the jitted step from the step count."""
    xp, lax = fw.xp, fw.lax
    b, t, vocab, emb, hidden = (8, 12, 100, 16, 16) if quick else (64, 48, 4000, 64, 128)
    warmup, total, peak, decay = 4, 200, 3e-3, 1e-2
    rng = np.random.default_rng(0)
    params = {"emb": fw.asarray(init(rng, vocab, emb, scale=0.1)),
              "gru": {"wx": fw.asarray(init(rng, emb, 3 * hidden)), "wh": fw.asarray(init(rng, hidden, 3 * hidden)),
                      "b": fw.asarray(np.zeros(3 * hidden, np.float32))},
              "head": linear(fw, rng, hidden, 2)}
    polarity = rng.standard_normal(vocab)                             # each word's sentiment, unknown to the model
    lengths = rng.integers(3, t + 1, 8 * b)
    tokens = rng.integers(1, vocab, (8 * b, t)) * (np.arange(t)[None, :] < lengths[:, None])
    labels = ((polarity[tokens] * (tokens > 0)).sum(1) > 0).astype(np.int32)
    tokens, lengths = tokens.astype(np.int32), lengths.astype(np.int32)

    def gru(p: Any, h: Any, x: Any) -> Any:
        gx, gh = x @ p["wx"] + p["b"], h @ p["wh"]
        r = fw.sigmoid(gx[:, :hidden] + gh[:, :hidden])
        z = fw.sigmoid(gx[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden])
        n = xp.tanh(gx[:, 2 * hidden:] + r * gh[:, 2 * hidden:])
        return (1 - z) * n + z * h

    def loss(p: Any, tok: Any, length: Any, label: Any) -> Any:
        mask = (xp.arange(t)[None, :] < length[:, None]).astype(xp.float32)   # (b, t)

        def step(h: Any, xm: Any) -> Any:
            x, m = xm
            new = gru(p["gru"], h, x)
            h = xp.where(m[:, None] > 0, new, h)
            return h, h * m[:, None]
        h0 = xp.zeros((tok.shape[0], hidden), dtype=xp.float32)
        _, hs = lax.scan(step, h0, (p["emb"][tok.T], mask.T))
        pooled = hs.sum(0) / mask.sum(1)[:, None]
        logp = fw.log_softmax(dense(p["head"], pooled))
        return -xp.take_along_axis(logp, label[:, None], axis=1).mean()

    def schedule(n: Any) -> Any:                                      # optax.warmup_cosine_decay_schedule
        frac = xp.clip((n - warmup) / (total - warmup), 0.0, 1.0)
        return xp.where(n < warmup, peak * n / warmup, peak * 0.5 * (1 + xp.cos(math.pi * frac)))

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, tok: Any, length: Any, label: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, tok, length, label)
        lr = schedule(n)
        m = fw.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = fw.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        n = n + 1
        c1, c2 = 1 - 0.9 ** n, 1 - 0.999 ** n

        def update(p: Any, m: Any, v: Any) -> Any:
            wd = decay * p if p.ndim > 1 else 0.0
            return p - lr * ((m / c1) / (xp.sqrt(v / c2) + 1e-8) + wd)
        return fw.tree_map(update, p, m, v), m, v, n, value
    state = adam_state(fw, params)

    def run(i: int) -> Any:
        j = (i % 8) * b
        *state[:], value = step(*state, *(fw.asarray(a[j:j + b]) for a in (tokens, lengths, labels)))
        return value
    return run


def pixelcnn(fw: Fw, quick: bool) -> Step:
    """A PixelCNN on grayscale NHWC images: a 7 x 7 mask-A convolution, residual 3 x 3 mask-B convolutions (kernels
    times a causal mask, `conv_general_dilated`), a 1 x 1 head giving a mixture of discretised logistics per pixel
    (PixelCNN++'s likelihood: the logistic's mass over each of 256 bins, the edge bins open, `logsumexp` over the
    mixture), its negative log-likelihood by Adam."""
    xp, lax = fw.xp, fw.lax
    b, size, c, layers, mix = (4, 8, 8, 2, 3) if quick else (16, 16, 32, 4, 5)
    rng = np.random.default_rng(0)
    dims = ("NHWC", "HWIO", "NHWC")

    def causal(k: int, centre: bool) -> Any:                         # 1 where a pixel sees its input, HWIO
        m = np.zeros((k, k, 1, 1), np.float32)
        m[:k // 2] = 1
        m[k // 2, :k // 2 + int(centre)] = 1
        return fw.asarray(m)
    mask_a, mask_b = causal(7, False), causal(3, True)
    params = {"in": {"w": fw.asarray(init(rng, 7, 7, 1, c, scale=1 / math.sqrt(24))),
                     "b": fw.asarray(np.zeros(c, np.float32))},
              "res": [{"w": fw.asarray(init(rng, 3, 3, c, c, scale=1 / math.sqrt(4 * c))),
                       "b": fw.asarray(np.zeros(c, np.float32))} for _ in range(layers)],
              "out": linear(fw, rng, c, 3 * mix, scale=0.1)}
    yy, xx = np.meshgrid(np.linspace(-1, 1, size), np.linspace(-1, 1, size), indexing="ij")
    centres = rng.uniform(-0.6, 0.6, (8 * b, 2, 1, 1))
    images = np.exp(-((xx - centres[:, 0]) ** 2 + (yy - centres[:, 1]) ** 2) * 4) * 2 - 1
    images = (np.round((images + 1) * 127.5) / 127.5 - 1).astype(np.float32)[..., None]   # 256 levels in [-1, 1]

    def mconv(p: Any, x: Any, mask: Any) -> Any:
        return lax.conv_general_dilated(x, p["w"] * mask, (1, 1), "SAME", dimension_numbers=dims) + p["b"]

    def nll(x: Any, out: Any) -> Any:                                # PixelCNN++'s discretized_mix_logistic_loss
        logits, means, log_s = out[..., :mix], out[..., mix:2 * mix], xp.maximum(out[..., 2 * mix:], -7.0)
        centred, inv_s = x - means, xp.exp(-log_s)
        plus, minus, mid = inv_s * (centred + 1 / 255), inv_s * (centred - 1 / 255), inv_s * centred
        softplus = fw.nn.softplus
        cdf_delta = fw.sigmoid(plus) - fw.sigmoid(minus)
        log_pdf_mid = mid - log_s - 2 * softplus(mid)
        inner = xp.where(cdf_delta > 1e-5, xp.log(xp.maximum(cdf_delta, 1e-12)), log_pdf_mid - math.log(127.5))
        log_p = xp.where(x < -0.999, plus - softplus(plus), xp.where(x > 0.999, -softplus(minus), inner))
        return -fw.logsumexp(log_p + fw.log_softmax(logits), -1).mean()

    def loss(p: Any, x: Any) -> Any:
        h = fw.nn.relu(mconv(p["in"], x, mask_a))
        for layer in p["res"]:
            h = h + fw.nn.relu(mconv(layer, h, mask_b))
        return nll(x, dense(p["out"], h))
    return adam_program(fw, loss, params, lambda i: (fw.asarray(images[(i % 8) * b:(i % 8 + 1) * b]),), lr=2e-3)


def hnn(fw: Fw, quick: bool) -> Step:
    """A Hamiltonian neural network on a pendulum (Greydanus et al.): an MLP's scalar H(q, p), the vector field its
    symplectic gradient (dH/dp, -dH/dq, a `grad` inside the model), fitted to the true derivatives and, integrated
    by RK4 in a `lax.scan`, to the true trajectories; the loss differentiated (a gradient of gradients through the
    scan), Adam."""
    xp, lax = fw.xp, fw.lax
    n, hidden, steps, dt = (16, 16, 5, 0.1) if quick else (128, 128, 20, 0.1)
    rng = np.random.default_rng(0)
    params = [linear(fw, rng, 2, hidden), linear(fw, rng, hidden, hidden), linear(fw, rng, hidden, 1)]

    def true_field(s: np.ndarray) -> np.ndarray:
        return np.stack([s[:, 1], -np.sin(s[:, 0])], 1)

    def rk4_np(s: np.ndarray, h: float) -> np.ndarray:
        k1 = true_field(s)
        k2 = true_field(s + h / 2 * k1)
        k3 = true_field(s + h / 2 * k2)
        return s + h / 6 * (k1 + 2 * k2 + 2 * k3 + true_field(s + h * k3))
    starts = np.stack([rng.uniform(-2, 2, 8 * n), rng.uniform(-1, 1, 8 * n)], 1)
    path, s = [], starts
    for _ in range(steps):
        for _ in range(10):                                           # the truth at a tenth of the step
            s = rk4_np(s, dt / 10)
        path.append(s)
    starts, derivs = starts.astype(np.float32), true_field(starts).astype(np.float32)
    paths = np.ascontiguousarray(np.stack(path, 1).astype(np.float32))   # (8n, steps, 2)

    def hamiltonian(p: Any, s: Any) -> Any:
        h = s
        for layer in p[:-1]:
            h = xp.tanh(dense(layer, h))
        return dense(p[-1], h)[:, 0]

    def field(p: Any, s: Any) -> Any:
        dh = fw.grad(lambda s: hamiltonian(p, s).sum())(s)
        return xp.stack([dh[:, 1], -dh[:, 0]], 1)

    def loss(p: Any, s0: Any, ds: Any, path: Any) -> Any:
        def rk4(s: Any, _: Any) -> Any:
            k1 = field(p, s)
            k2 = field(p, s + dt / 2 * k1)
            k3 = field(p, s + dt / 2 * k2)
            s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + field(p, s + dt * k3))
            return s, s
        _, traj = lax.scan(rk4, s0, None, length=steps)
        return ((field(p, s0) - ds) ** 2).mean() + ((traj.transpose(1, 0, 2) - path) ** 2).mean()
    return adam_program(fw, loss, params, lambda i: tuple(fw.asarray(a[(i % 8) * n:(i % 8 + 1) * n])
                                                          for a in (starts, derivs, paths)), lr=3e-3)


def graphnet(fw: Fw, quick: bool) -> Step:
    """A jraph-style graph network on ogbg-molpcba-like batches: molecules of varying size padded into one graph
    batch (padding edges and nodes belong to a padding graph, as jraph.pad_with_graphs), atom and bond types
    embedded, each layer updating edges from their ends, nodes from the sum and the max (`segment_sum`,
    `segment_max`; an empty segment's -inf read as 0) of their incoming edges, and graphs from the mean of their
    nodes; multi-task logits, the sigmoid cross-entropy of the labels that are present (molpcba's are mostly
    missing), Adam."""
    xp = fw.xp
    graphs, nmax, d, layers, tasks = (4, 10, 16, 2, 8) if quick else (32, 30, 64, 3, 128)
    atoms, bonds = 16, 4
    nodes_pad, edges_pad = graphs * nmax + 1, graphs * nmax * 4 + 1
    rng = np.random.default_rng(0)

    def molecule_batch() -> tuple[np.ndarray, ...]:
        atom, node_graph = np.zeros(nodes_pad, np.int32), np.full(nodes_pad, graphs, np.int32)
        send, recv = np.full(edges_pad, nodes_pad - 1, np.int32), np.full(edges_pad, nodes_pad - 1, np.int32)
        bond = np.zeros(edges_pad, np.int32)
        first, e = 0, 0
        for g in range(graphs):
            size = int(rng.integers(nmax // 2, nmax + 1))
            atom[first:first + size] = rng.integers(0, atoms, size)
            node_graph[first:first + size] = g
            pairs = [(i, i + 1) for i in range(size - 1)] + [tuple(rng.choice(size, 2, replace=False))
                                                              for _ in range(size // 3)]
            for a, c in pairs:                                        # bonds both ways, as ogb's graphs
                kind = rng.integers(0, bonds)
                send[e:e + 2], recv[e:e + 2], bond[e:e + 2] = (first + a, first + c), (first + c, first + a), kind
                e += 2
            first += size
        labels = rng.integers(0, 2, (graphs + 1, tasks)).astype(np.float32)
        present = (rng.uniform(size=(graphs + 1, tasks)) < 0.3).astype(np.float32)
        present[graphs] = 0                                           # the padding graph has no labels
        return atom, bond, send, recv, node_graph, labels, present
    data = [tuple(fw.asarray(a) for a in molecule_batch()) for _ in range(8)]

    def mlp_p(i: int, o: int) -> list[dict[str, Any]]:
        return [linear(fw, rng, i, o), linear(fw, rng, o, o)]
    params = {"atom": fw.asarray(init(rng, atoms, d, scale=1.0)), "bond": fw.asarray(init(rng, bonds, d, scale=1.0)),
              "layers": [{"edge": mlp_p(3 * d, d), "node": mlp_p(3 * d, d)} for _ in range(layers)],
              "head": linear(fw, rng, d, tasks)}

    def mlp(p: Any, x: Any) -> Any:
        return dense(p[1], fw.nn.relu(dense(p[0], x)))

    def loss(p: Any, atom: Any, bond: Any, send: Any, recv: Any, node_graph: Any, labels: Any, present: Any) -> Any:
        h, e = p["atom"][atom], p["bond"][bond]
        for lp in p["layers"]:
            e = e + mlp(lp["edge"], xp.concatenate([e, h[send], h[recv]], -1))
            biggest = fw.segment_max(e, recv, nodes_pad)
            biggest = xp.where(xp.isfinite(biggest), biggest, 0.0)
            h = h + mlp(lp["node"], xp.concatenate([h, fw.segment_sum(e, recv, nodes_pad), biggest], -1))
        counts = fw.segment_sum(xp.ones((nodes_pad, 1), dtype=xp.float32), node_graph, graphs + 1)
        pooled = fw.segment_sum(h, node_graph, graphs + 1) / xp.maximum(counts, 1.0)
        x = dense(p["head"], pooled)
        bce = fw.nn.relu(x) - x * labels + xp.log1p(xp.exp(-xp.abs(x)))   # optax.sigmoid_binary_cross_entropy
        return (bce * present).sum() / xp.maximum(present.sum(), 1.0)
    return adam_program(fw, loss, params, lambda i: data[i % 8], lr=1e-3)


def vqvae(fw: Fw, quick: bool) -> Step:
    """A VQ-VAE (van den Oord et al., as the Haiku example writes it) on NHWC images: a strided convolutional encoder,
    each latent vector quantised to its nearest code (distances by one product, an argmin), the straight-through
    estimator (z + stop_gradient(q - z)), a decoder of 3 x 3 convolutions and a pixel shuffle back to full size, the
    reconstruction plus 0.25 of the commitment loss by Adam, and the codebook updated in the same jitted step by
    exponential moving averages of the codes' counts and sums (Laplace-smoothed)."""
    xp, lax = fw.xp, fw.lax
    b, size, c, d, codes = (4, 8, 8, 4, 16) if quick else (32, 32, 64, 16, 128)
    decay, eps, beta = 0.99, 1e-5, 0.25
    rng = np.random.default_rng(0)
    dims = ("NHWC", "HWIO", "NHWC")

    def conv_p(k: int, i: int, o: int) -> dict[str, Any]:
        return {"w": fw.asarray(init(rng, k, k, i, o, scale=1 / math.sqrt(k * k * i))),
                "b": fw.asarray(np.zeros(o, np.float32))}
    params = {"enc1": conv_p(4, 3, c), "enc2": conv_p(3, c, d), "dec1": conv_p(3, d, c), "dec2": conv_p(3, c, 12)}
    codebook = init(rng, codes, d, scale=1.0)
    ema = {"count": fw.asarray(np.ones(codes, np.float32)), "sum": fw.asarray(codebook),
           "codebook": fw.asarray(codebook)}
    yy, xx = np.meshgrid(np.linspace(-1, 1, size), np.linspace(-1, 1, size), indexing="ij")
    blobs = rng.uniform(-0.7, 0.7, (8 * b, 3, 2))
    images = np.exp(-((xx - blobs[..., 0, None, None]) ** 2 + (yy - blobs[..., 1, None, None]) ** 2) * 6)
    images = np.ascontiguousarray(images.transpose(0, 2, 3, 1) - 0.5).astype(np.float32)

    def conv(p: Any, x: Any, stride: int = 1) -> Any:
        return lax.conv_general_dilated(x, p["w"], (stride, stride), "SAME", dimension_numbers=dims) + p["b"]

    def encoder(p: Any, x: Any) -> Any:
        return conv(p["enc2"], fw.nn.relu(conv(p["enc1"], x, 2)))

    def decoder(p: Any, z: Any) -> Any:
        y = conv(p["dec2"], fw.nn.relu(conv(p["dec1"], z)))          # (b, size/2, size/2, 2 * 2 * 3)
        n, h, w, _ = y.shape
        return y.reshape(n, h, w, 2, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(n, 2 * h, 2 * w, 3)

    def quantise(z: Any, cb: Any) -> tuple[Any, Any]:
        flat = z.reshape(-1, d)
        dist = (flat * flat).sum(1, keepdims=True) - 2 * flat @ cb.T + (cb * cb).sum(1)[None, :]
        idx = dist.argmin(1)
        return cb[idx].reshape(z.shape), idx

    def loss(p: Any, cb: Any, x: Any) -> Any:
        z = encoder(p, x)
        q, idx = quantise(z, cb)
        commit = ((z - fw.stop_gradient(q)) ** 2).mean()
        recon = ((decoder(p, z + fw.stop_gradient(q - z)) - x) ** 2).mean()
        return recon + beta * commit, (z, idx)

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, ema: Any, x: Any) -> Any:
        (value, (z, idx)), g = fw.value_and_grad(loss, has_aux=True)(p, ema["codebook"], x)
        p, m, v, n = adam(fw, p, m, v, n, g, 1e-3)
        onehot = (idx[:, None] == xp.arange(codes)[None, :]).astype(xp.float32)
        count = decay * ema["count"] + (1 - decay) * onehot.sum(0)
        total = decay * ema["sum"] + (1 - decay) * onehot.T @ z.reshape(-1, d)
        smoothed = (count + eps) / (count.sum() + codes * eps) * count.sum()
        return p, m, v, n, {"count": count, "sum": total, "codebook": total / smoothed[:, None]}, value
    state = adam_state(fw, params) + [ema]

    def run(i: int) -> Any:
        *state[:], value = step(*state, fw.asarray(images[(i % 8) * b:(i % 8 + 1) * b]))
        return value
    return run
