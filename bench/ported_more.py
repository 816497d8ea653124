"""More programs ported from JAX users' code, timed by `bench/programs.py` (its docstring lists them): MAML's
meta-gradient, Hamiltonian Monte Carlo, a deep equilibrium layer with an implicit backward, L-BFGS, PPO with GAE, a
vision transformer and a RealNVP flow."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam, adam_program, adam_state, attention, batch, dense, init, layer_norm


def maml(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    tasks, shots, hidden, inner, alpha = (4, 5, 16, 2, 0.01) if quick else (16, 10, 40, 3, 0.01)
    rng = np.random.default_rng(0)
    sizes = [(1, hidden), (hidden, hidden), (hidden, 1)]
    params = [{"w": fw.asarray(init(rng, i, o, scale=math.sqrt(2 / i))), "b": fw.asarray(np.zeros(o, np.float32))}
              for i, o in sizes]
    amp, phase = rng.uniform(0.1, 5, (8, tasks, 1, 1)), rng.uniform(0, math.pi, (8, tasks, 1, 1))
    xs = rng.uniform(-5, 5, (8, tasks, 2 * shots, 1))                 # sinusoid tasks: support, then query points
    ys = (amp * np.sin(xs + phase)).astype(np.float32)
    xs = xs.astype(np.float32)

    def net(p: Any, x: Any) -> Any:
        for layer in p[:-1]:
            x = xp.maximum(x @ layer["w"] + layer["b"], 0)
        return x @ p[-1]["w"] + p[-1]["b"]

    def mse(p: Any, x: Any, y: Any) -> Any:
        return ((net(p, x) - y) ** 2).mean()

    def task_loss(p: Any, x: Any, y: Any) -> Any:
        def adapt(i: Any, q: Any) -> Any:                             # the inner SGD loop, differentiated through
            g = fw.grad(mse)(q, x[:shots], y[:shots])
            return fw.tree_map(lambda a, g: a - alpha * g, q, g)
        return mse(fw.lax.fori_loop(0, inner, adapt, p), x[shots:], y[shots:])

    def meta_loss(p: Any, x: Any, y: Any) -> Any:
        return fw.vmap(task_loss, in_axes=(None, 0, 0))(p, x, y).mean()

    # a gradient of gradients
    return adam_program(fw, meta_loss, params, lambda i: (fw.asarray(xs[i % 8]), fw.asarray(ys[i % 8])))


def hmc(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    chains, n, d, leaps, moves, eps = (8, 64, 4, 5, 2, 0.05) if quick else (64, 512, 16, 10, 10, 0.02)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((n, d)).astype(np.float32)
    y_np = (rng.random(n) < 1 / (1 + np.exp(-x_np @ rng.standard_normal(d)))).astype(np.float32)
    x, y = fw.asarray(x_np), fw.asarray(y_np)

    def potential(w: Any) -> Any:                                     # a logistic regression's negative log posterior
        z = x @ w
        return (xp.logaddexp(0.0, z) - y * z).sum() + 0.5 * (w * w).sum()

    def transition(key: Any, q: Any) -> Any:                          # one chain's HMC move
        kp, ku = fw.split(key)
        p0 = fw.normal(kp, (d,))

        def leapfrog(i: Any, qp: Any) -> Any:
            q, p = qp
            p = p - eps / 2 * fw.grad(potential)(q)
            q = q + eps * p
            return q, p - eps / 2 * fw.grad(potential)(q)
        q1, p1 = fw.lax.fori_loop(0, leaps, leapfrog, (q, p0))
        energy = potential(q) + 0.5 * (p0 * p0).sum() - potential(q1) - 0.5 * (p1 * p1).sum()
        accept = fw.uniform(ku, ()) < xp.exp(energy)                 # Metropolis
        return xp.where(accept, q1, q)

    @fw.jit
    def sample(q: Any, key: Any) -> Any:
        def move(q: Any, k: Any) -> Any:
            return fw.vmap(transition)(fw.split(k, chains), q), None
        q, _ = fw.lax.scan(move, q, fw.split(key, moves))
        return q, fw.vmap(potential)(q).mean()
    state = [fw.asarray((0.1 * rng.standard_normal((chains, d))).astype(np.float32)), fw.key(0)]

    def run(i: int) -> Any:
        state[1], sub = fw.split(state[1])
        state[0], value = sample(state[0], sub)
        return value                                                  # the chains' mean potential
    return run


def deq(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    n, d, h, classes, most = (32, 8, 16, 4, 30) if quick else (256, 32, 128, 10, 60)
    rng = np.random.default_rng(0)
    params = {"u": fw.asarray(init(rng, d, h)), "w": fw.asarray(init(rng, h, h, scale=0.3 / math.sqrt(h))),
              "b": fw.asarray(np.zeros(h, np.float32)), "out": fw.asarray(init(rng, h, classes))}
    centres = rng.standard_normal((classes, d)) * 1.5
    labels_np = rng.integers(0, classes, 8 * n)
    images = (centres[labels_np] + rng.standard_normal((8 * n, d))).astype(np.float32)
    labels = np.eye(classes, dtype=np.float32)[labels_np]

    def solve(f: Any, z0: Any) -> Any:                                # z = f(z) by iteration, to a tolerance
        def unsettled(c: Any) -> Any:
            z_prev, z, i = c
            return (((z - z_prev) ** 2).sum() > 1e-8) & (i < most)

        def iterate(c: Any) -> Any:
            _, z, i = c
            return z, f(z), i + 1
        return lax.while_loop(unsettled, iterate, (z0, f(z0), xp.zeros((), dtype=xp.int32)))[1]

    def cell(p: Any, x: Any, z: Any) -> Any:
        return xp.tanh(z @ p["w"] + x @ p["u"] + p["b"])

    def fixed_point(f: Any, p: Any, x: Any) -> Any:
        return solve(lambda z: f(p, x, z), xp.zeros((x.shape[0], h), dtype=xp.float32))
    fixed_point = fw.custom_vjp(fixed_point, nondiff_argnums=(0,))

    def fixed_point_fwd(f: Any, p: Any, x: Any) -> Any:
        z = fixed_point(f, p, x)
        return z, (p, x, z)

    def fixed_point_bwd(f: Any, res: Any, z_bar: Any) -> Any:        # the adjoint by another fixed point
        p, x, z = res
        _, vjp_px = fw.vjp(lambda p, x: f(p, x, z), p, x)
        _, vjp_z = fw.vjp(lambda z: f(p, x, z), z)
        return vjp_px(solve(lambda u: vjp_z(u)[0] + z_bar, xp.zeros_like(z)))
    fixed_point.defvjp(fixed_point_fwd, fixed_point_bwd)

    def loss(p: Any, x: Any, y: Any) -> Any:
        z = fixed_point(cell, p, x)
        return -(fw.log_softmax(z @ p["out"]) * y).sum(-1).mean()

    return adam_program(fw, loss, params, lambda i: (fw.asarray(images[(i % 8) * n:(i % 8 + 1) * n]),
                                                     fw.asarray(labels[(i % 8) * n:(i % 8 + 1) * n])))


def lbfgs(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    n, d, m, iters, lam = (128, 8, 4, 10, 1e-2) if quick else (2048, 64, 8, 30, 1e-2)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((8, n, d)).astype(np.float32)
    y_np = (rng.random((8, n)) < 1 / (1 + np.exp(-x_np @ rng.standard_normal(d)))).astype(np.float32)

    def objective(w: Any, x: Any, y: Any) -> Any:                    # L2-regularised logistic regression
        z = x @ w
        return (xp.logaddexp(0.0, z) - y * z).mean() + 0.5 * lam * (w * w).sum()

    def direction(g: Any, s: Any, yv: Any, rho: Any, k: Any) -> Any:  # the two-loop recursion over a ring of m pairs
        def newest_first(i: Any, qa: Any) -> Any:
            q, alpha = qa
            j = (k - 1 - i + m) % m
            a = rho[j] * (s[j] @ q)                                   # an unfilled slot has rho 0: no effect
            return q - a * yv[j], alpha.at[j].set(a)
        q, alpha = lax.fori_loop(0, m, newest_first, (g, xp.zeros(m, dtype=xp.float32)))
        last = (k - 1 + m) % m                                        # the newest pair scales the first step
        kept = rho[last] > 0
        gamma = xp.where(kept, 1 / xp.where(kept, rho[last] * (yv[last] @ yv[last]), 1.0), 1.0)

        def oldest_first(i: Any, r: Any) -> Any:
            j = (k + i) % m
            return r + s[j] * (alpha[j] - rho[j] * (yv[j] @ r))
        return -lax.fori_loop(0, m, oldest_first, gamma * q)

    @fw.jit
    def fit(x: Any, y: Any) -> Any:
        def iterate(it: Any, state: Any) -> Any:
            w, f, g, s, yv, rho, k = state
            p = direction(g, s, yv, rho, k)
            slope = g @ p

            def too_far(c: Any) -> Any:                                # backtracking to Armijo's condition
                t, f_t = c
                return (f_t > f + 1e-4 * t * slope) & (t > 1e-6)

            def halve(c: Any) -> Any:
                t = c[0] / 2
                return t, objective(w + t * p, x, y)
            t, _ = lax.while_loop(too_far, halve, (xp.ones((), dtype=xp.float32), objective(w + p, x, y)))
            w_new = w + t * p
            f_new, g_new = fw.value_and_grad(objective)(w_new, x, y)
            sk, yk, j = w_new - w, g_new - g, k % m
            sy = sk @ yk
            rho = rho.at[j].set(xp.where(sy > 1e-10, 1 / xp.where(sy > 1e-10, sy, 1.0), 0.0))
            return w_new, f_new, g_new, s.at[j].set(sk), yv.at[j].set(yk), rho, k + 1
        w0 = xp.zeros(d, dtype=xp.float32)
        f0, g0 = fw.value_and_grad(objective)(w0, x, y)
        ring = xp.zeros((m, d), dtype=xp.float32)
        state = (w0, f0, g0, ring, ring, xp.zeros(m, dtype=xp.float32), xp.zeros((), dtype=xp.int32))
        return lax.fori_loop(0, iters, iterate, state)[1]             # the final objective

    def run(i: int) -> Any:
        return fit(fw.asarray(x_np[i % 8]), fw.asarray(y_np[i % 8]))
    return run


def ppo(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    envs, horizon, hidden, epochs, minibatches = (8, 8, 16, 2, 2) if quick else (32, 64, 64, 4, 4)
    gamma, lam, clip = 0.99, 0.95, 0.2
    rng = np.random.default_rng(0)
    moves = fw.asarray(np.array([[0.1, 0], [-0.1, 0], [0, 0.1], [0, -0.1]], np.float32))   # a walk on the plane
    params = {"w1": fw.asarray(init(rng, 2, hidden)), "b1": fw.asarray(np.zeros(hidden, np.float32)),
              "pi": fw.asarray(init(rng, hidden, 4, scale=0.01)), "v": fw.asarray(init(rng, hidden, 1))}
    starts = fw.asarray(rng.uniform(-1, 1, (envs, 2)).astype(np.float32))
    samples = envs * horizon

    def heads(p: Any, s: Any) -> Any:                                 # the policy's logits and the value, one torso
        h = xp.tanh(s @ p["w1"] + p["b1"])
        return h @ p["pi"], (h @ p["v"])[..., 0]

    def pick(logp_all: Any, a: Any) -> Any:
        return xp.take_along_axis(logp_all, a[:, None], axis=1)[:, 0]

    def rollout(p: Any, key: Any) -> Any:
        def act(s: Any, k: Any) -> Any:
            logits, v = heads(p, s)
            a = fw.categorical(k, logits)
            nxt = xp.clip(s + moves[a], -2.0, 2.0)
            return nxt, (s, a, pick(fw.log_softmax(logits), a), v, -(nxt * nxt).sum(-1))
        last, traj = lax.scan(act, starts, fw.split(key, horizon))
        return traj, heads(p, last)[1]

    def gae(r: Any, v: Any, v_last: Any) -> Any:                      # advantages by a reverse scan
        def back(adv: Any, step: Any) -> Any:
            r, v, v_next = step
            adv = r + gamma * v_next - v + gamma * lam * adv
            return adv, adv
        v_next = xp.concatenate([v[1:], v_last[None]], axis=0)
        _, adv = lax.scan(back, xp.zeros(envs, dtype=xp.float32), (r, v, v_next), reverse=True)
        return adv, adv + v

    def loss(p: Any, s: Any, a: Any, logp_old: Any, adv: Any, ret: Any) -> Any:   # clipped surrogate, value, entropy
        logits, v = heads(p, s)
        logp_all = fw.log_softmax(logits)
        ratio = xp.exp(pick(logp_all, a) - logp_old)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        surrogate = xp.minimum(ratio * adv, xp.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
        entropy = -(xp.exp(logp_all) * logp_all).sum(-1).mean()
        return -surrogate + 0.5 * ((v - ret) ** 2).mean() - 0.01 * entropy

    @fw.jit
    def update(p: Any, m: Any, v: Any, n: Any, key: Any) -> Any:
        k_roll, k_perm = fw.split(key)
        (s, a, logp, values, r), v_last = rollout(p, k_roll)
        adv, ret = gae(r, values, v_last)
        flat = [x.reshape(samples, *x.shape[2:]) for x in (s, a, logp, adv, ret)]

        def epoch(state: Any, k: Any) -> Any:                         # minibatches of a shuffled rollout
            def minibatch(state: Any, rows: Any) -> Any:
                p, m, v, n = state
                g = fw.grad(loss)(p, *(x[rows] for x in flat))
                return adam(fw, p, m, v, n, g, 3e-4), None
            return lax.scan(minibatch, state, fw.permutation(k, samples).reshape(minibatches, -1))[0], None
        (p, m, v, n), _ = lax.scan(epoch, (p, m, v, n), fw.split(k_perm, epochs))
        return p, m, v, n, heads(p, starts)[1].mean()
    state = [*adam_state(fw, params), fw.key(0)]

    def run(i: int) -> Any:
        state[4], sub = fw.split(state[4])
        *state[:4], value = update(*state[:4], sub)
        return value             # the critic's value of the start states (a rollout's mean return is no number
    return run                   # to compare: one draw the libraries' roundings tip apart changes a trajectory)


def vit(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, size, patch, d, heads, classes = (4, 8, 4, 16, 2, 4) if quick else (32, 32, 4, 64, 4, 10)
    grid, c = size // patch, 3
    tokens = grid * grid + 1                                          # the patches and a class token
    rng = np.random.default_rng(0)

    def lin(i: int, o: int) -> dict[str, Any]:
        return {"w": fw.asarray(init(rng, i, o)), "b": fw.asarray(np.zeros(o, np.float32))}

    def norm() -> dict[str, Any]:
        return {"g": fw.asarray(np.ones(d, np.float32)), "b": fw.asarray(np.zeros(d, np.float32))}
    params = {"embed": lin(patch * patch * c, d), "cls": fw.asarray(init(rng, 1, d, scale=0.02)),
              "pos": fw.asarray(init(rng, tokens, d, scale=0.02)),
              "blocks": [{"n1": norm(), "qkv": lin(d, 3 * d), "o": lin(d, d), "n2": norm(), "up": lin(d, 2 * d),
                          "down": lin(2 * d, d)} for _ in range(2)], "nf": norm(), "head": lin(d, classes)}
    images = rng.standard_normal((8 * b, c, size, size)).astype(np.float32)
    labels = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, 8 * b)]

    def self_attention(p: Any, x: Any) -> Any:
        qkv = dense(p["qkv"], x).reshape(b, tokens, 3, heads, d // heads).transpose(2, 0, 3, 1, 4)
        return dense(p["o"], attention(xp, qkv[0], qkv[1], qkv[2]))

    def loss(p: Any, x: Any, y: Any) -> Any:
        x = x.reshape(b, c, grid, patch, grid, patch).transpose(0, 2, 4, 3, 5, 1)   # patches, (b, n, p * p * c)
        x = dense(p["embed"], x.reshape(b, grid * grid, patch * patch * c))
        x = xp.concatenate([xp.broadcast_to(p["cls"], (b, 1, d)), x], axis=1) + p["pos"]
        for blk in p["blocks"]:
            x = x + self_attention(blk, layer_norm(xp, blk["n1"], x, 1e-6))
            x = x + dense(blk["down"], fw.gelu(dense(blk["up"], layer_norm(xp, blk["n2"], x, 1e-6))))
        logits = dense(p["head"], layer_norm(xp, p["nf"], x[:, 0], 1e-6))       # the class token's
        return -(fw.log_softmax(logits) * y).sum(-1).mean()

    return adam_program(fw, loss, params, lambda i: batch(fw, i, b, images, labels))


def realnvp(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    b, hidden, couplings = (64, 16, 2) if quick else (512, 64, 6)
    rng = np.random.default_rng(0)
    angle = rng.uniform(0, math.pi, 8 * b)                            # two moons, a little noise
    upper = rng.random(8 * b) < 0.5
    moons = np.stack([np.where(upper, np.cos(angle), 1 - np.cos(angle)),
                      np.where(upper, np.sin(angle), 0.5 - np.sin(angle))], 1)
    data = (moons + 0.05 * rng.standard_normal((8 * b, 2))).astype(np.float32)
    masks = fw.asarray(np.array([[1, 0], [0, 1]] * (couplings // 2), np.float32))   # alternating halves

    def mlp(i: int, o: int, scale: float) -> list[dict[str, Any]]:
        return [{"w": fw.asarray(init(rng, i, hidden)), "b": fw.asarray(np.zeros(hidden, np.float32))},
                {"w": fw.asarray(init(rng, hidden, hidden)), "b": fw.asarray(np.zeros(hidden, np.float32))},
                {"w": fw.asarray(init(rng, hidden, o, scale=scale)), "b": fw.asarray(np.zeros(o, np.float32))}]
    params = [{"s": mlp(2, 2, 0.01), "t": mlp(2, 2, 0.01)} for _ in range(couplings)]

    def net(p: Any, h: Any) -> Any:
        for layer in p[:-1]:
            h = xp.maximum(h @ layer["w"] + layer["b"], 0)
        return h @ p[-1]["w"] + p[-1]["b"]

    def log_prob(p: Any, x: Any) -> Any:                              # data -> latent, the log-det of each coupling
        log_det = xp.zeros(x.shape[0], dtype=xp.float32)
        for k, layer in enumerate(p):
            mask = masks[k]
            kept = x * mask
            s = xp.tanh(net(layer["s"], kept)) * (1 - mask)           # bounded log-scales of the other half
            x = kept + (1 - mask) * (x * xp.exp(s) + net(layer["t"], kept))
            log_det = log_det + s.sum(-1)
        return -0.5 * (x * x).sum(-1) - math.log(2 * math.pi) + log_det

    def loss(p: Any, x: Any) -> Any:
        return -log_prob(p, x).mean()                                 # maximum likelihood

    return adam_program(fw, loss, params, lambda i: batch(fw, i, b, data))
