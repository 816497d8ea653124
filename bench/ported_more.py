"""More programs ported from JAX users' code, timed by `bench/programs.py` (its docstring lists them): MAML's
meta-gradient, Hamiltonian Monte Carlo, a deep equilibrium layer with an implicit backward and L-BFGS."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam, adam_state, init


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

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, x: Any, y: Any) -> Any:
        value, g = fw.value_and_grad(meta_loss)(p, x, y)             # a gradient of gradients
        p, m, v, n = adam(fw, p, m, v, n, g, 1e-3)
        return p, m, v, n, value
    state = adam_state(fw, params)

    def run(i: int) -> Any:
        *state[:], value = step(*state, fw.asarray(xs[i % 8]), fw.asarray(ys[i % 8]))
        return value
    return run


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

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, x: Any, y: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, x, y)
        p, m, v, n = adam(fw, p, m, v, n, g, 1e-3)
        return p, m, v, n, value
    state = adam_state(fw, params)

    def run(i: int) -> Any:
        j = (i % 8) * n
        *state[:], value = step(*state, fw.asarray(images[j:j + n]), fw.asarray(labels[j:j + n]))
        return value
    return run


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
