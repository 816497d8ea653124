"""Programs ported from JAX users' code, timed by `bench/programs.py` (its docstring lists them): a spectral
Navier-Stokes solver, a graph attention network, CMA-ES, Sinkhorn transport, a diffusion model's training step, an
HMM's forward algorithm and REINFORCE."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam, adam_state, batch, carried, init, sgd_step


def spectral(fw: Fw, quick: bool) -> Step:
    fft = fw.xp.fft
    n, substeps, nu, dt = (16, 10, 1e-3, 0.02) if quick else (64, 10, 1e-3, 0.01)
    k, kr = np.fft.fftfreq(n, 1 / n), np.fft.rfftfreq(n, 1 / n)
    kx, ky = np.meshgrid(k, kr, indexing="ij")                       # the rfft2 half-plane, (n, n // 2 + 1)
    k2 = kx ** 2 + ky ** 2
    ikx, iky = (fw.asarray((1j * a).astype(np.complex64)) for a in (kx, ky))
    inv_k2 = fw.asarray((1 / np.where(k2 == 0, 1, k2)).astype(np.float32))
    visc = fw.asarray((nu * k2).astype(np.float32))
    keep = fw.asarray(((np.abs(kx) < n / 3) & (np.abs(ky) < n / 3)).astype(np.float32))   # the 2/3 rule
    rng = np.random.default_rng(0)
    w0 = np.fft.irfft2(np.fft.rfft2(rng.standard_normal((n, n))) * np.exp(-k2 / 16) * (k2 > 0), s=(n, n))
    w0 = (w0 / w0.std()).astype(np.float32)                         # a smooth random vorticity, mean zero

    def real(a: Any) -> Any:
        return fft.irfft2(a, s=(n, n))

    def rhs(w_hat: Any) -> Any:
        psi_hat = w_hat * inv_k2                                     # -lap psi = w
        u, v = real(iky * psi_hat), real(-ikx * psi_hat)             # velocity (d psi / dy, -d psi / dx)
        advect = u * real(ikx * w_hat) + v * real(iky * w_hat)       # the nonlinear term in real space
        return -fft.rfft2(advect) * keep - visc * w_hat

    def rk2(i: Any, w_hat: Any) -> Any:
        return w_hat + dt * rhs(w_hat + dt / 2 * rhs(w_hat))

    @fw.jit
    def step(w: Any) -> Any:
        w = real(fw.lax.fori_loop(0, substeps, rk2, fft.rfft2(w)))
        return w, 0.5 * (w * w).mean()                               # the enstrophy
    return carried(step, fw.asarray(w0))


def gat(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    nodes, edges, heads, d, classes = (64, 256, 2, 8, 4) if quick else (512, 4096, 4, 16, 8)
    rng = np.random.default_rng(0)
    loops = np.arange(nodes, dtype=np.int32)                         # self-loops: no node without a message
    senders, receivers = (fw.asarray(np.concatenate([loops, rng.integers(0, nodes, edges).astype(np.int32)]))
                          for _ in range(2))
    feats = fw.asarray(rng.standard_normal((nodes, d)).astype(np.float32))
    labels = fw.asarray(np.eye(classes, dtype=np.float32)[rng.integers(0, classes, nodes)])

    def layer(f_in: int, f_out: int) -> dict[str, Any]:
        src, dst = (fw.asarray(init(rng, heads, f_out, scale=0.3)) for _ in range(2))
        return {"w": fw.asarray(init(rng, f_in, heads * f_out)), "src": src, "dst": dst}
    params = [layer(d, d), layer(heads * d, classes)]

    def attend(p: Any, h: Any) -> Any:
        z = (h @ p["w"]).reshape(nodes, heads, -1)
        e = (z * p["src"]).sum(-1)[senders] + (z * p["dst"]).sum(-1)[receivers]      # (edges, heads)
        e = xp.where(e > 0, e, 0.2 * e)                              # leaky relu
        a = xp.exp(e - fw.segment_max(e, receivers, nodes)[receivers])              # the softmax over each receiver
        a = a / fw.segment_sum(a, receivers, nodes)[receivers]
        return fw.segment_sum(z[senders] * a[..., None], receivers, nodes)         # (nodes, heads, f_out)

    def loss(p: Any, h: Any) -> Any:
        h = attend(p[0], h).reshape(nodes, -1)
        h = xp.where(h > 0, h, xp.exp(xp.minimum(h, 0)) - 1)        # elu
        logits = attend(p[1], h).mean(1)                             # the heads averaged
        return -(fw.log_softmax(logits) * labels).sum(-1).mean()

    step = sgd_step(fw, loss, 1.0)
    return carried(step, params, feats)


def cmaes(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    n = 4 if quick else 16
    lam = 4 + int(3 * math.log(n))
    mu = lam // 2
    w = np.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
    w /= w.sum()
    mueff = float(1 / (w ** 2).sum())
    cs, cc = (mueff + 2) / (n + mueff + 5), 4 / (n + 4)
    c1 = 2 / ((n + 1.3) ** 2 + mueff)
    cmu = min(1 - c1, 2 * (mueff - 2 + 1 / mueff) / ((n + 2) ** 2 + mueff))
    damps, chi = 1 + cs + 2 * max(0.0, math.sqrt((mueff - 1) / (n + 1)) - 1), math.sqrt(n) * (1 - 1 / (4 * n))
    by_rank = fw.asarray(np.concatenate([w, np.zeros(lam - mu)]).astype(np.float32))   # the weight of each rank

    def rosenbrock(x: Any) -> Any:
        return (100 * (x[:, 1:] - x[:, :-1] ** 2) ** 2 + (1 - x[:, :-1]) ** 2).sum(-1)

    @fw.jit
    def generation(m: Any, sigma: Any, cov: Any, ps: Any, pc: Any, key: Any) -> Any:
        ev, b = xp.linalg.eigh(cov)
        d = xp.sqrt(xp.maximum(ev, 1e-20))
        root, inv_root = (b * d) @ b.T, (b / d) @ b.T                # C^(1/2), C^(-1/2): free of eigh's signs
        y = fw.normal(key, (lam, n)) @ root
        f = rosenbrock(m + sigma * y)
        rank = (f[None, :] < f[:, None]).sum(1)                      # each sample's place, best first
        wts = by_rank[rank]
        y_w = wts @ y
        ps = (1 - cs) * ps + math.sqrt(cs * (2 - cs) * mueff) * (inv_root @ y_w)
        pc = (1 - cc) * pc + math.sqrt(cc * (2 - cc) * mueff) * y_w
        cov = (1 - c1 - cmu) * cov + c1 * pc[:, None] * pc[None, :] + cmu * (y.T * wts) @ y   # rank-one + rank-mu
        sigma = sigma * xp.exp(cs / damps * (xp.sqrt((ps * ps).sum()) / chi - 1))
        return m + sigma * y_w, sigma, cov, ps, pc, f.min()
    zeros = np.zeros(n, np.float32)
    state = [fw.asarray(zeros), fw.asarray(np.float32(0.3)), fw.asarray(np.eye(n, dtype=np.float32)),
             fw.asarray(zeros), fw.asarray(zeros), fw.key(0)]

    def run(i: int) -> Any:
        state[5], sub = fw.split(state[5])
        *state[:5], best = generation(*state[:5], sub)
        return best
    return run


def sinkhorn(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    n, iters, eps = (32, 50, 0.05) if quick else (256, 50, 0.05)
    rng = np.random.default_rng(0)
    x0 = fw.asarray(rng.standard_normal((n, 2)).astype(np.float32) * 0.5)
    y = fw.asarray((rng.standard_normal((n, 2)) * [0.3, 0.6] + [1.0, 0.5]).astype(np.float32))
    log_w = -math.log(n)                                             # uniform weights on both clouds

    def transport(x: Any) -> Any:
        c = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)

        def update(i: Any, fg: Any) -> Any:
            f, g = fg
            f = -eps * fw.logsumexp((g[None, :] - c) / eps + log_w, axis=1)
            g = -eps * fw.logsumexp((f[:, None] - c) / eps + log_w, axis=0)
            return f, g
        zero = xp.zeros(n, dtype=xp.float32)
        f, g = fw.lax.fori_loop(0, iters, update, (zero, zero))
        plan = xp.exp((f[:, None] + g[None, :] - c) / eps + 2 * log_w)
        return (plan * c).sum()

    @fw.jit
    def step(x: Any) -> Any:
        value, g = fw.value_and_grad(transport)(x)
        return x - 0.1 * n * g, value                                # each point moved by its own gradient
    return carried(step, x0)


def ddpm(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, hidden, steps, half = (64, 32, 100, 4) if quick else (256, 128, 1000, 8)
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((8, 2)) * 2                        # data: a mixture of eight Gaussians
    data = (centres[rng.integers(0, 8, 8 * b)] + 0.1 * rng.standard_normal((8 * b, 2))).astype(np.float32)
    alpha_bar = np.cumprod(1 - np.linspace(1e-4, 0.02, steps))
    signal, noise_scale = (fw.asarray(a.astype(np.float32)) for a in (np.sqrt(alpha_bar), np.sqrt(1 - alpha_bar)))
    freqs = fw.asarray(np.exp(-math.log(10000) * np.arange(half) / half).astype(np.float32))
    sizes = [(2 + 2 * half, hidden), (hidden, hidden), (hidden, 2)]
    params = [{"w": fw.asarray(init(rng, i, o)), "b": fw.asarray(np.zeros(o, np.float32))} for i, o in sizes]

    def loss(p: Any, x0: Any, t: Any, noise: Any) -> Any:
        xt = signal[t][:, None] * x0 + noise_scale[t][:, None] * noise
        angle = t[:, None].astype(xp.float32) * freqs[None, :]
        h = xp.concatenate([xt, xp.sin(angle), xp.cos(angle)], axis=-1)   # the sinusoidal time embedding
        for layer in p[:-1]:
            h = h @ layer["w"] + layer["b"]
            h = h * fw.sigmoid(h)                                    # silu
        return ((h @ p[-1]["w"] + p[-1]["b"] - noise) ** 2).mean()

    b1, b2, lr = 0.9, 0.999, 1e-3

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, x0: Any, key: Any) -> Any:
        kt, kn = fw.split(key)
        value, g = fw.value_and_grad(loss)(p, x0, fw.randint(kt, (b,), 0, steps), fw.normal(kn, (b, 2)))
        p, m, v, n = adam(fw, p, m, v, n, g, lr, b1, b2)
        return p, m, v, n, value
    state = [*adam_state(fw, params), fw.key(0)]

    def run(i: int) -> Any:
        state[4], sub = fw.split(state[4])
        *state[:4], value = step(*state[:4], *batch(fw, i, b, data), sub)
        return value
    return run


def hmm(fw: Fw, quick: bool) -> Step:
    states, symbols, t, b = (4, 8, 16, 4) if quick else (16, 32, 256, 8)
    rng = np.random.default_rng(0)
    true_trans = rng.dirichlet(np.ones(states) * 0.3, states)        # sequences drawn from another HMM
    true_emit = rng.dirichlet(np.ones(symbols) * 0.3, states)
    hidden = np.zeros((8 * b, t), np.int64)
    for j in range(1, t):
        hidden[:, j] = (true_trans[hidden[:, j - 1]].cumsum(1) > rng.random((8 * b, 1))).argmax(1)
    seqs = (true_emit[hidden].cumsum(2) > rng.random((8 * b, t, 1))).argmax(2).T.astype(np.int32)   # (t, 8 b)
    params = {"init": fw.asarray(np.zeros(states, np.float32)), "trans": fw.asarray(init(rng, states, states)),
              "emit": fw.asarray(init(rng, states, symbols))}

    def loss(p: Any, obs: Any) -> Any:
        log_trans, log_emit = fw.log_softmax(p["trans"]), fw.log_softmax(p["emit"]).T   # (s, s), (symbols, s)

        def forward(alpha: Any, o: Any) -> Any:
            return fw.logsumexp(alpha[:, :, None] + log_trans[None], axis=1) + log_emit[o], None
        alpha, _ = fw.lax.scan(forward, fw.log_softmax(p["init"])[None, :] + log_emit[obs[0]], obs[1:])
        return -fw.logsumexp(alpha, axis=1).mean() / t                # the negative log-likelihood per step

    step = sgd_step(fw, loss, 2.0)
    state = [params]

    def run(i: int) -> Any:
        state[0], value = step(state[0], fw.asarray(np.ascontiguousarray(seqs[:, (i % 8) * b:(i % 8 + 1) * b])))
        return value
    return run


def reinforce(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, horizon, hidden, gamma = (8, 8, 16, 0.95) if quick else (64, 32, 32, 0.95)
    rng = np.random.default_rng(0)
    moves = fw.asarray(np.array([[0.1, 0], [-0.1, 0], [0, 0.1], [0, -0.1]], np.float32))   # a walk on the plane
    params = {"w1": fw.asarray(init(rng, 2, hidden)), "b1": fw.asarray(np.zeros(hidden, np.float32)),
              "w2": fw.asarray(init(rng, hidden, 4, scale=0.1))}
    starts = fw.asarray(rng.uniform(-1, 1, (b, 2)).astype(np.float32))

    def loss(p: Any, key: Any) -> Any:
        def act(s: Any, k: Any) -> Any:
            logits = xp.tanh(s @ p["w1"] + p["b1"]) @ p["w2"]
            a = fw.categorical(k, logits)
            logp = xp.take_along_axis(fw.log_softmax(logits), a[:, None], axis=1)[:, 0]
            s = s + moves[a]
            return s, (logp, -(s * s).sum(-1))                       # reward: closeness to the origin
        _, (logp, reward) = fw.lax.scan(act, starts, fw.split(key, horizon))

        def discount(ret: Any, r: Any) -> Any:
            ret = r + gamma * ret
            return ret, ret
        _, returns = fw.lax.scan(discount, xp.zeros(b, dtype=xp.float32), reward, reverse=True)
        adv = fw.stop_gradient(returns - returns.mean(1, keepdims=True))   # a baseline: the batch's mean return
        return -(logp * adv).mean(), reward.sum(0).mean()

    b1, b2, lr = 0.9, 0.999, 1e-2

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, key: Any) -> Any:
        (_, ret), g = fw.value_and_grad(loss, has_aux=True)(p, key)
        p, m, v, n = adam(fw, p, m, v, n, g, lr, b1, b2)
        return p, m, v, n, ret
    state = [*adam_state(fw, params), fw.key(0)]

    def run(i: int) -> Any:
        state[4], sub = fw.split(state[4])
        *state[:4], value = step(*state[:4], sub)
        return value                                                 # the batch's mean return
    return run
