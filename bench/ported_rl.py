"""Programs ported from JAX users' code, timed by `bench/programs.py` (its docstring lists them): DQN with a replay
buffer in the jitted step, a checkerboard Metropolis Ising model, Gaussian-mixture EM, a WaveNet stack of dilated
causal convolutions and SimCLR's contrastive loss."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam, adam_program, adam_state, carried, dense, init


def linear(fw: Fw, rng: np.random.Generator, i: int, o: int, scale: float | None = None) -> dict[str, Any]:
    """A dense layer's params ({"w", "b"}, `dense`'s), the bias zero."""
    return {"w": fw.asarray(init(rng, i, o, scale=scale)), "b": fw.asarray(np.zeros(o, np.float32))}


def dqn(fw: Fw, quick: bool) -> Step:
    xp, rnd = fw.xp, fw.random
    envs, capacity, b, hidden, sync_every = (8, 128, 32, 32, 2) if quick else (64, 8192, 256, 128, 10)
    obs, actions, gamma = 4, 4, 0.95
    rng = np.random.default_rng(0)
    params = [linear(fw, rng, obs, hidden), linear(fw, rng, hidden, hidden), linear(fw, rng, hidden, actions)]
    moves = fw.asarray(np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], np.float32) * 0.1)

    def q_values(p: Any, s: Any) -> Any:
        for layer in p[:-1]:
            s = fw.nn.relu(dense(layer, s))
        return dense(p[-1], s)

    def huber(x: Any) -> Any:                                         # optax.huber_loss, delta 1
        return xp.where(xp.abs(x) < 1, 0.5 * x * x, xp.abs(x) - 0.5)

    def td_loss(p: Any, target: Any, s: Any, a: Any, r: Any, s2: Any, done: Any) -> Any:
        q = xp.take_along_axis(q_values(p, s), a[:, None], axis=1)[:, 0]
        y = r + gamma * (1 - done) * q_values(target, s2).max(-1)
        return huber(q - fw.stop_gradient(y)).mean()

    @fw.jit
    def step(p: Any, target: Any, opt: Any, buf: Any, ptr: Any, size: Any, s: Any, key: Any, eps: Any) -> Any:
        key, k_explore, k_action, k_sample, k_reset = fw.split(key, 5)
        # act epsilon-greedily on every environment, and step them: a point on the plane walking to its goal
        greedy = q_values(p, s).argmax(-1).astype(xp.int32)
        a = xp.where(fw.uniform(k_explore, (envs,)) < eps, fw.randint(k_action, (envs,), 0, actions), greedy)
        pos = xp.clip(s[:, :2] + moves[a], -1.0, 1.0)
        dist = xp.sqrt(((pos - s[:, 2:]) ** 2).sum(-1))
        done = (dist < 0.15).astype(xp.float32)
        s2 = xp.concatenate([pos, s[:, 2:]], axis=-1)
        # the transitions into the ring buffer, then a minibatch sampled from what it holds
        at = (ptr + xp.arange(envs)) % capacity
        buf = {"s": buf["s"].at[at].set(s), "a": buf["a"].at[at].set(a), "r": buf["r"].at[at].set(-dist),
               "s2": buf["s2"].at[at].set(s2), "done": buf["done"].at[at].set(done)}
        ptr, size = (ptr + envs) % capacity, xp.minimum(size + envs, capacity)
        j = fw.randint(k_sample, (b,), 0, size)
        value, g = fw.value_and_grad(td_loss)(p, target, buf["s"][j], buf["a"][j], buf["r"][j], buf["s2"][j],
                                               buf["done"][j])
        p, *opt = adam(fw, p, *opt, g, 1e-3)
        fresh = rnd.uniform(k_reset, (envs, obs), minval=-1.0, maxval=1.0)   # a finished walk starts anew
        s = xp.where(done[:, None] > 0, fresh, s2)
        return p, opt, buf, ptr, size, s, key, value

    zeros = lambda *shape: fw.asarray(np.zeros(shape, np.float32))   # noqa: E731
    buf = {"s": zeros(capacity, obs), "a": fw.asarray(np.zeros(capacity, np.int32)), "r": zeros(capacity),
           "s2": zeros(capacity, obs), "done": zeros(capacity)}
    _, *opt = adam_state(fw, params)
    state = {"p": params, "target": params, "opt": opt, "buf": buf, "ptr": fw.asarray(np.int32(0)),
             "size": fw.asarray(np.int32(0)), "s": fw.asarray(rng.uniform(-1, 1, (envs, obs)).astype(np.float32)),
             "key": fw.key(0)}

    def run(i: int) -> Any:
        if i % sync_every == 0:                                       # the target network: a copy, now and then
            state["target"] = fw.tree_map(xp.copy, state["p"])
        eps = max(0.05, 1.0 - i / 20)                                 # exploration decays: a Python float a step
        (state["p"], state["opt"], state["buf"], state["ptr"], state["size"], state["s"], state["key"],
         value) = step(state["p"], state["target"], state["opt"], state["buf"], state["ptr"], state["size"],
                       state["s"], state["key"], eps)
        return value
    return run


def ising(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    n, sweeps, beta = (16, 10, 0.44) if quick else (256, 50, 0.44)
    rng = np.random.default_rng(0)
    spins = fw.asarray(rng.choice(np.array([-1, 1], np.float32), (n, n)))
    rows, cols = np.indices((n, n))
    black = (rows + cols) % 2 == 0
    colours = fw.asarray(np.stack([black, ~black]))

    def neighbours(s: Any) -> Any:                                    # periodic: the four nearest by rolls
        return xp.roll(s, 1, 0) + xp.roll(s, -1, 0) + xp.roll(s, 1, 1) + xp.roll(s, -1, 1)

    def half_sweep(s: Any, colour: Any, key: Any) -> Any:             # Metropolis on one colour: its sites are
        d_e = 2 * s * neighbours(s)                                   # independent given the other's
        flip = colour & (fw.uniform(key, (n, n)) < xp.exp(-beta * d_e))
        return xp.where(flip, -s, s)

    def sweep(i: Any, carry: Any) -> Any:
        s, key = carry
        key, k_black, k_white = fw.split(key, 3)
        s = half_sweep(s, colours[0], k_black)
        return half_sweep(s, colours[1], k_white), key

    @fw.jit
    def step(carry: Any) -> Any:
        s, key = lax.fori_loop(0, sweeps, sweep, carry)
        energy = -(s * (xp.roll(s, 1, 0) + xp.roll(s, 1, 1))).sum() / (n * n)
        return (s, key), (xp.abs(s.mean()), energy)                   # the magnetisation and the energy per site

    box = [(spins, fw.key(0))]

    def run(i: int) -> Any:
        box[0], (_, energy) = step(box[0])
        return energy
    return run


def gmm_em(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    n, d, k, iters = (512, 2, 3, 4) if quick else (8192, 8, 8, 10)
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((k, d)) * 3
    scales = rng.uniform(0.3, 1.0, (k, d, d)) * (rng.random((k, d, d)) < 0.5) + np.eye(d) * 0.5
    labels = rng.integers(0, k, n)
    x = fw.asarray((centres[labels] + np.einsum("nij,nj->ni", scales[labels], rng.standard_normal((n, d))))
                   .astype(np.float32))
    eye = fw.asarray(np.eye(d, dtype=np.float32))
    start = (fw.asarray(np.full(k, 1 / k, np.float32)), fw.asarray(np.asarray(x)[:k] * 1.0),
             fw.asarray(np.tile(np.eye(d, dtype=np.float32), (k, 1, 1))))

    def log_joint(w: Any, mu: Any, cov: Any) -> Any:                  # log w_k + log N(x_n | mu_k, cov_k): (n, k)
        chol = xp.linalg.cholesky(cov)
        diff = x[None] - mu[:, None]                                  # (k, n, d)
        z = fw.scipy.linalg.solve_triangular(chol, diff.transpose(0, 2, 1), lower=True)   # (k, d, n)
        _, logdet = xp.linalg.slogdet(cov)
        lp = xp.log(w)[:, None] - 0.5 * ((z * z).sum(1) + logdet[:, None] + d * math.log(2 * math.pi))
        return lp.T

    def em(i: Any, params: Any) -> Any:
        lp = log_joint(*params)
        resp = xp.exp(lp - fw.logsumexp(lp, 1)[:, None])              # the E step: responsibilities
        nk = resp.sum(0)
        mu = resp.T @ x / nk[:, None]                                 # the M step: weights, means, covariances
        diff = x[None] - mu[:, None]
        cov = xp.einsum("nk,kni,knj->kij", resp, diff, diff) / nk[:, None, None] + 1e-4 * eye
        return nk / n, mu, cov

    @fw.jit
    def step(params: Any) -> Any:
        params = lax.fori_loop(0, iters, em, params)
        return params, -fw.logsumexp(log_joint(*params), 1).mean()   # the negative mean log-likelihood
    return carried(step, start)


def wavenet(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    b, length, classes, ch, skip_ch, dilations = ((2, 64, 32, 8, 16, (1, 2, 4, 8)) if quick else
                                                  (4, 1024, 256, 32, 64, tuple(2 ** i for i in range(10))))
    width = 2
    rng = np.random.default_rng(0)

    def layer_p() -> dict[str, Any]:
        return {"filter": fw.asarray(init(rng, width, ch, 2 * ch, scale=1 / math.sqrt(width * ch))),
                "filter_b": fw.asarray(np.zeros(2 * ch, np.float32)), "res": linear(fw, rng, ch, ch),
                "skip": linear(fw, rng, ch, skip_ch)}
    params = {"embed": fw.asarray(init(rng, classes, ch, scale=1.0)), "layers": [layer_p() for _ in dilations],
              "out1": linear(fw, rng, skip_ch, skip_ch), "out2": linear(fw, rng, skip_ch, classes)}
    # audio: a few sines of random pitch and some noise, mu-law quantised to `classes` levels
    t = np.arange(length + 1) / 4000
    freqs, phases = rng.uniform(100, 600, (8 * b, 3)), rng.uniform(0, 2 * np.pi, (8 * b, 3))
    wave = np.sin(2 * np.pi * freqs[:, :, None] * t + phases[:, :, None]).sum(1) / 3
    wave = np.clip(wave + 0.05 * rng.standard_normal(wave.shape), -1, 1)
    mu = classes - 1
    audio = ((np.sign(wave) * np.log1p(mu * np.abs(wave)) / np.log1p(mu) + 1) / 2 * mu + 0.5).astype(np.int32)

    def causal_conv(x: Any, w: Any, dilation: int) -> Any:           # left padding only: no sample sees the future
        return lax.conv_general_dilated(x, w, (1,), [(dilation * (width - 1), 0)], rhs_dilation=(dilation,),
                                        dimension_numbers=("NWC", "WIO", "NWC"))

    def loss(p: Any, audio: Any) -> Any:
        x, skips = p["embed"][audio[:, :-1]], 0.0
        for lp, dilation in zip(p["layers"], dilations, strict=True):
            h = causal_conv(x, lp["filter"], dilation) + lp["filter_b"]
            h = xp.tanh(h[..., :ch]) * fw.sigmoid(h[..., ch:])        # the gated activation
            skips = skips + dense(lp["skip"], h)
            x = x + dense(lp["res"], h)
        logits = dense(p["out2"], fw.nn.relu(dense(p["out1"], fw.nn.relu(skips))))
        return -xp.take_along_axis(fw.log_softmax(logits), audio[:, 1:, None], axis=-1).mean()

    return adam_program(fw, loss, params, lambda i: (fw.asarray(audio[(i % 8) * b:(i % 8 + 1) * b]),), lr=1e-3)


def simclr(fw: Fw, quick: bool) -> Step:
    xp, lax, rnd = fw.xp, fw.lax, fw.random
    b, size, crop, ch, hidden, out, tau = (8, 12, 8, 4, 16, 8, 0.5) if quick else (128, 32, 24, 32, 128, 64, 0.5)
    rng = np.random.default_rng(0)
    dims = ("NHWC", "HWIO", "NHWC")
    params = {"c1": fw.asarray(init(rng, 3, 3, 3, ch, scale=1 / math.sqrt(27))),
              "c2": fw.asarray(init(rng, 3, 3, ch, 2 * ch, scale=1 / math.sqrt(9 * ch))),
              "h1": linear(fw, rng, 2 * ch, hidden), "h2": linear(fw, rng, hidden, out)}
    yy, xx = np.meshgrid(np.linspace(-1, 1, size), np.linspace(-1, 1, size), indexing="ij")
    blobs = rng.uniform(-0.7, 0.7, (8 * b, 3, 2))                    # images: three coloured blobs each
    images = np.exp(-((xx - blobs[..., 0, None, None]) ** 2 + (yy - blobs[..., 1, None, None]) ** 2) * 8)
    images = images.transpose(0, 2, 3, 1).astype(np.float32)         # (8b, size, size, 3), NHWC

    def augment(key: Any, x: Any) -> Any:                            # a random crop, flip and brightness per image
        k_crop, k_flip, k_bright = fw.split(key, 3)
        at = fw.randint(k_crop, (b, 2), 0, size - crop + 1)
        x = fw.vmap(lambda img, a: lax.dynamic_slice(img, (a[0], a[1], 0), (crop, crop, 3)))(x, at)
        x = xp.where(rnd.bernoulli(k_flip, 0.5, (b, 1, 1, 1)), x[:, :, ::-1], x)
        return x * rnd.uniform(k_bright, (b, 1, 1, 1), minval=0.6, maxval=1.4)

    def encode(p: Any, x: Any) -> Any:
        x = fw.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dims))
        x = fw.nn.relu(lax.conv_general_dilated(x, p["c2"], (2, 2), "SAME", dimension_numbers=dims))
        return dense(p["h2"], fw.nn.relu(dense(p["h1"], x.mean((1, 2)))))   # pooled, then the projection head

    def nt_xent(p: Any, x: Any, key: Any) -> Any:
        k1, k2 = fw.split(key)
        z = encode(p, xp.concatenate([augment(k1, x), augment(k2, x)]))   # (2b, out): two views of each image
        z = z / xp.sqrt((z * z).sum(-1, keepdims=True) + 1e-12)
        sim = z @ z.T / tau
        sim = xp.where(xp.eye(2 * b, dtype=bool), -1e9, sim)          # no image is its own negative
        positive = xp.concatenate([xp.arange(b, 2 * b), xp.arange(b)])
        return (fw.logsumexp(sim, 1) - sim[xp.arange(2 * b), positive]).mean()

    @fw.jit
    def step(p: Any, mom: Any, x: Any, key: Any) -> Any:
        value, g = fw.value_and_grad(nt_xent)(p, x, key)
        mom = fw.tree_map(lambda m, g: 0.9 * m + g, mom, g)
        return fw.tree_map(lambda p, m: p - 0.1 * m, p, mom), mom, value
    state = [params, fw.tree_map(lambda a: a * 0, params), fw.key(0)]

    def run(i: int) -> Any:
        state[2], sub = fw.split(state[2])
        state[0], state[1], value = step(state[0], state[1], fw.asarray(images[(i % 8) * b:(i % 8 + 1) * b]), sub)
        return value
    return run
