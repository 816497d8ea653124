"""Programs of simulation and scientific machine learning, timed by `bench/programs.py` (its docstring lists them):
Lennard-Jones molecular dynamics, a Kalman filter's likelihood and gradient with a bootstrap particle filter, a
Fourier neural operator and a heat equation's adjoint. Each is written as a JAX user writes it: `jax.numpy`
spelling, one jitted step, the loops `lax.fori_loop`s and `lax.scan`s."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam_program, carried, init


def md(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    n, substeps, dt, cutoff = (64, 10, 0.004, 2.5) if quick else (512, 10, 0.004, 2.5)
    box = (n / 0.8) ** (1 / 3)                                        # a liquid's density, 0.8 (reduced units)
    side = math.ceil(n ** (1 / 3))
    rng = np.random.default_rng(0)
    lattice = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n]
    r0 = ((lattice + 0.5 + 0.05 * rng.standard_normal((n, 3))) * box / side).astype(np.float32)
    v0 = rng.standard_normal((n, 3))
    v0 = ((v0 - v0.mean(0)) * math.sqrt(1.0 / v0.var())).astype(np.float32)     # temperature about 1, no drift
    e_cut = 4 * (cutoff ** -12 - cutoff ** -6)                        # shifted to zero at the cutoff

    def energy(r: Any) -> Any:                                        # jax-md's lennard_jones_pair, all pairs
        d = r[:, None, :] - r[None, :, :]
        d = d - box * xp.round(d / box)                               # the minimum image
        r2 = (d * d).sum(-1)
        near = (r2 < cutoff * cutoff) & ~xp.eye(n, dtype=bool)
        inv6 = (1 / xp.where(near, r2, 1.0)) ** 3                     # safe where masked: finite gradients
        return 0.5 * xp.where(near, 4 * (inv6 * inv6 - inv6) - e_cut, 0.0).sum()

    def force(r: Any) -> Any:
        return -fw.grad(energy)(r)

    def verlet(i: Any, state: Any) -> Any:
        r, v, f = state
        v = v + 0.5 * dt * f
        r = xp.mod(r + dt * v, box)                                   # jax-md's periodic shift
        f = force(r)
        return r, v + 0.5 * dt * f, f

    @fw.jit
    def step(state: Any) -> Any:
        r, v, f = lax.fori_loop(0, substeps, verlet, state)
        return (r, v, f), energy(r) + 0.5 * (v * v).sum()             # the total energy, conserved
    r0 = fw.asarray(r0)
    return carried(step, (r0, fw.asarray(v0), fw.jit(force)(r0)))


def filters(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    dx, dy, t, particles = (4, 2, 16, 100) if quick else (4, 2, 100, 1000)
    rng = np.random.default_rng(0)
    theta = 0.3                                                       # the true model: a damped rotation in 2 planes
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    a_true = 0.95 * np.kron(np.eye(2), rot)
    c_true = rng.standard_normal((dy, dx)) / 2
    xs, ys = np.zeros(dx), []
    for _ in range(t):
        xs = a_true @ xs + 0.3 * rng.standard_normal(dx)
        ys.append(c_true @ xs + 0.5 * rng.standard_normal(dy))
    ys = fw.asarray(np.array(ys, np.float32))
    params = {"a": fw.asarray((0.9 * np.eye(dx) + 0.05 * rng.standard_normal((dx, dx))).astype(np.float32)),
              "c": fw.asarray((c_true + 0.1 * rng.standard_normal((dy, dx))).astype(np.float32)),
              "q": fw.asarray((0.5 * np.eye(dx)).astype(np.float32)),     # Q = q q^T + 1e-3 I
              "log_r": fw.asarray(np.zeros(dy, np.float32))}

    def model(p: Any) -> tuple[Any, Any, Any, Any]:
        return p["a"], p["c"], p["q"] @ p["q"].T + 1e-3 * xp.eye(dx), xp.diag(xp.exp(p["log_r"]))

    def kalman(p: Any) -> Any:                                        # the exact log-likelihood of ys
        a, c, q, r = model(p)

        def update(carry: Any, y: Any) -> Any:
            m, cov = carry
            m, cov = a @ m, a @ cov @ a.T + q                         # predict
            s = c @ cov @ c.T + r
            resid = y - c @ m
            gain = xp.linalg.solve(s, c @ cov).T                      # cov c^T s^-1 (s symmetric)
            _, logdet = xp.linalg.slogdet(s)
            ll = -0.5 * (resid @ xp.linalg.solve(s, resid) + logdet + dy * math.log(2 * math.pi))
            return (m + gain @ resid, cov - gain @ s @ gain.T), ll
        _, lls = lax.scan(update, (xp.zeros(dx), xp.eye(dx)), ys)
        return lls.sum()

    def particle(p: Any, key: Any) -> Any:                            # a bootstrap filter's estimate of the same
        a, c, q, r = model(p)
        noise = xp.linalg.cholesky(q)
        r_inv, r_logdet = 1 / xp.diag(r), p["log_r"].sum()

        def update(carry: Any, y: Any) -> Any:
            x, key = carry
            key, k_move, k_pick = fw.split(key, 3)
            x = x @ a.T + fw.normal(k_move, (particles, dx)) @ noise.T
            resid = y - x @ c.T
            logw = -0.5 * ((resid * resid * r_inv).sum(-1) + r_logdet + dy * math.log(2 * math.pi))
            top = logw.max()
            w = xp.exp(logw - top)
            ll = top + xp.log(w.mean())
            edges = xp.cumsum(w / w.sum())                             # systematic resampling
            u = (xp.arange(particles) + fw.uniform(k_pick, ())) / particles
            pick = xp.minimum(xp.searchsorted(edges, u), particles - 1)
            return (x[pick], key), ll
        start = fw.normal(key, (particles, dx))
        _, lls = lax.scan(update, (start, key), ys)
        return lls.sum()

    @fw.jit
    def step(p: Any, key: Any) -> Any:
        key, k_run = fw.split(key)
        value, g = fw.value_and_grad(kalman)(p)
        p = fw.tree_map(lambda p, g: p + 1e-3 * g, p, g)             # a step up the likelihood
        return (p, key), (value + particle(p, k_run)) / (2 * t)       # the two estimates' mean, per step
    state = [(params, fw.key(0))]

    def run(i: int) -> Any:
        state[0], value = step(*state[0])
        return value
    return run


def fno(fw: Fw, quick: bool) -> Step:
    xp, fft = fw.xp, fw.xp.fft
    b, grid, width, modes, layers = (2, 16, 8, 4, 2) if quick else (8, 64, 32, 12, 4)
    rng = np.random.default_rng(0)
    k2 = np.add.outer(np.fft.fftfreq(grid, 1 / grid) ** 2, np.fft.rfftfreq(grid, 1 / grid) ** 2)
    fields = np.fft.irfft2(np.fft.rfft2(rng.standard_normal((8 * b, grid, grid))) * np.exp(-k2 / 32), s=(grid, grid))
    fields /= fields.std()
    target = np.fft.irfft2(np.fft.rfft2(fields) * np.exp(-k2 / 64), s=(grid, grid))   # heat flow for a while
    fields, target = fields[..., None].astype(np.float32), target[..., None].astype(np.float32)
    coords = np.stack(np.meshgrid(*[np.linspace(0, 1, grid)] * 2, indexing="ij"), -1).astype(np.float32)

    def spectral_weights() -> dict[str, Any]:                         # complex weights as (real, imaginary) pairs
        scale = 1 / (width * width)
        return {part: fw.asarray((scale * rng.uniform(size=(2, width, width, modes, modes))).astype(np.float32))
                for part in ("re", "im")}
    params = {"lift": {"w": fw.asarray(init(rng, 3, width)), "b": fw.asarray(np.zeros(width, np.float32))},
              "layers": [{"spectral": spectral_weights(), "w": fw.asarray(init(rng, width, width)),
                          "b": fw.asarray(np.zeros(width, np.float32))} for _ in range(layers)],
              "proj": {"w": fw.asarray(init(rng, width, 128)), "b": fw.asarray(np.zeros(128, np.float32)),
                       "w2": fw.asarray(init(rng, 128, 1)), "b2": fw.asarray(np.zeros(1, np.float32))}}
    grid_xy = fw.asarray(coords)

    def spectral_conv(w: Any, x: Any) -> Any:                          # x (b, h, w, c): keep the low modes
        weights = w["re"] + 1j * w["im"]                               # (2, c_in, c_out, m, m)
        xh = fft.rfft2(x, axes=(1, 2))                                 # (b, h, w // 2 + 1, c)
        low = xp.einsum("bxyi,ioxy->bxyo", xh[:, :modes, :modes], weights[0])
        high = xp.einsum("bxyi,ioxy->bxyo", xh[:, -modes:, :modes], weights[1])
        out = xp.zeros(xh.shape, dtype=xh.dtype)
        out = out.at[:, :modes, :modes].set(low).at[:, -modes:, :modes].set(high)
        return fft.irfft2(out, s=(grid, grid), axes=(1, 2))

    def loss(p: Any, a: Any, u: Any) -> Any:
        x = xp.concatenate([a, xp.broadcast_to(grid_xy, (a.shape[0], grid, grid, 2))], -1)
        x = x @ p["lift"]["w"] + p["lift"]["b"]
        for i, layer in enumerate(p["layers"]):
            x = spectral_conv(layer["spectral"], x) + x @ layer["w"] + layer["b"]
            x = fw.gelu(x) if i < layers - 1 else x
        y = fw.gelu(x @ p["proj"]["w"] + p["proj"]["b"]) @ p["proj"]["w2"] + p["proj"]["b2"]
        return (xp.sqrt(((y - u) ** 2).sum((1, 2, 3)) / (u * u).sum((1, 2, 3)))).mean()   # relative L2

    def batch_of(i: int) -> tuple[Any, Any]:
        j = slice((i % 8) * b, (i % 8 + 1) * b)
        return fw.asarray(fields[j]), fw.asarray(target[j])
    return adam_program(fw, loss, params, batch_of)


def heat(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    n, steps, dt = (32, 50, 0.1) if quick else (128, 50, 0.1)
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, n, endpoint=False)
    blobs = sum(np.exp(-((x[:, None] - cx) ** 2 + (x[None] - cy) ** 2) / 0.005) for cx, cy in rng.uniform(0, 1, (6, 2)))
    kappa = 0.5 + 0.4 * np.sin(2 * np.pi * x)[:, None] * np.cos(2 * np.pi * x)[None]   # a conductivity field

    def solve(u: Any, log_kappa: Any) -> Any:                         # div(kappa grad u), flux form, periodic
        k = xp.exp(log_kappa)
        kx, ky = (k + xp.roll(k, -1, 0)) / 2, (k + xp.roll(k, -1, 1)) / 2   # kappa on the cells' faces

        def euler(i: Any, u: Any) -> Any:
            fx, fy = kx * (xp.roll(u, -1, 0) - u), ky * (xp.roll(u, -1, 1) - u)
            return u + dt * (fx - xp.roll(fx, 1, 0) + fy - xp.roll(fy, 1, 1))
        return lax.fori_loop(0, steps, euler, u)

    observed = np.asarray(fw.jit(solve)(fw.asarray(blobs.astype(np.float32)),
                                        fw.asarray(np.log(kappa).astype(np.float32))))
    observed = fw.asarray((observed + 0.01 * rng.standard_normal((n, n))).astype(np.float32))

    def loss(p: Any) -> Any:                                          # recover the start and the conductivity
        u0, log_kappa = p
        misfit = ((solve(u0, log_kappa) - observed) ** 2).mean()
        smooth = ((xp.roll(log_kappa, 1, 0) - log_kappa) ** 2 + (xp.roll(log_kappa, 1, 1) - log_kappa) ** 2).mean()
        return misfit + 1e-3 * smooth

    @fw.jit
    def step(p: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p)
        return fw.tree_map(lambda p, g: p - n * n / 4 * g, p, g), value
    start = (fw.asarray(np.zeros((n, n), np.float32)), fw.asarray(np.full((n, n), math.log(0.5), np.float32)))
    return carried(step, start)
