"""Model families ported from JAX users' code, timed by `bench/programs.py` (its docstring lists them): a diffusion
model's U-Net denoiser, NeRF, a linear recurrent unit (its recurrence by `lax.associative_scan`, and by `lax.scan`)
and a Mamba-style selective scan."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.frameworks import Fw, Step, adam_program, dense, init


def linear(fw: Fw, rng: np.random.Generator, i: int, o: int, scale: float | None = None) -> dict[str, Any]:
    """A dense layer's params ({"w", "b"}, `dense`'s), the bias zero."""
    return {"w": fw.asarray(init(rng, i, o, scale=scale)), "b": fw.asarray(np.zeros(o, np.float32))}


def unet(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    b, size, chans, groups, temb = (4, 8, (8, 16), 4, 16) if quick else (16, 32, (32, 64, 128), 8, 64)
    steps, half = 1000, temb // 4
    rng = np.random.default_rng(0)
    dims = ("NHWC", "HWIO", "NHWC")

    def conv_p(i: int, o: int, k: int = 3) -> dict[str, Any]:
        return {"w": fw.asarray(init(rng, k, k, i, o, scale=1 / math.sqrt(k * k * i))),
                "b": fw.asarray(np.zeros(o, np.float32))}

    def block_p(i: int, o: int) -> dict[str, Any]:
        return {"conv1": conv_p(i, o), "conv2": conv_p(o, o), "time": linear(fw, rng, temb, o),
                "g1": fw.asarray(np.ones(i, np.float32)), "b1": fw.asarray(np.zeros(i, np.float32)),
                "g2": fw.asarray(np.ones(o, np.float32)), "b2": fw.asarray(np.zeros(o, np.float32)),
                "skip": fw.asarray(init(rng, i, o))}
    wider = list(zip(chans, chans[1:], strict=False))                 # each level's channels and the next one's
    params = {"time1": linear(fw, rng, 2 * half, temb), "time2": linear(fw, rng, temb, temb),
              "stem": conv_p(3, chans[0]), "down": [block_p(c, c) for c in chans[:-1]],
              "pool": [conv_p(c, n) for c, n in wider], "mid": block_p(chans[-1], chans[-1]),
              "upconv": [conv_p(n, c) for c, n in wider], "up": [block_p(2 * c, c) for c in chans[:-1]],
              "out": conv_p(chans[0], 3)}
    freqs = fw.asarray(np.exp(-math.log(10000) * np.arange(half) / half).astype(np.float32))
    alpha_bar = np.cumprod(1 - np.linspace(1e-4, 0.02, steps))
    signal, noise_scale = (fw.asarray(a.astype(np.float32)) for a in (np.sqrt(alpha_bar), np.sqrt(1 - alpha_bar)))
    yy, xx = np.meshgrid(np.linspace(-1, 1, size), np.linspace(-1, 1, size), indexing="ij")
    blobs = rng.uniform(-0.7, 0.7, (8 * b, 3, 2))                    # images: three coloured blobs each
    images = np.exp(-((xx - blobs[..., 0, None, None]) ** 2 + (yy - blobs[..., 1, None, None]) ** 2) * 8)
    images = (2 * images.transpose(0, 2, 3, 1) - 1).astype(np.float32)   # (8b, size, size, 3), NHWC
    noises = rng.standard_normal(images.shape).astype(np.float32)
    times = rng.integers(0, steps, 8 * b).astype(np.int32)

    def conv(p: Any, x: Any, stride: int = 1) -> Any:
        return lax.conv_general_dilated(x, p["w"], (stride, stride), "SAME", dimension_numbers=dims) + p["b"]

    def up(p: Any, x: Any) -> Any:                                    # a transposed convolution, twice the size
        return lax.conv_transpose(x, p["w"], (2, 2), "SAME", dimension_numbers=dims) + p["b"]

    def group_norm(x: Any, g: Any, beta: Any, eps: float = 1e-5) -> Any:
        n, h, w, c = x.shape
        xg = x.reshape(n, h, w, groups, c // groups)
        m = xg.mean((1, 2, 4), keepdims=True)
        v = ((xg - m) ** 2).mean((1, 2, 4), keepdims=True)
        return ((xg - m) / xp.sqrt(v + eps)).reshape(n, h, w, c) * g + beta

    def block(p: Any, x: Any, t: Any) -> Any:                         # a residual block, the time added inside
        h = conv(p["conv1"], fw.nn.silu(group_norm(x, p["g1"], p["b1"])))
        h = h + dense(p["time"], t)[:, None, None, :]
        h = conv(p["conv2"], fw.nn.silu(group_norm(h, p["g2"], p["b2"])))
        return x @ p["skip"] + h

    def denoise(p: Any, x: Any, t: Any) -> Any:
        angle = t[:, None].astype(xp.float32) * freqs[None, :]
        t = xp.concatenate([xp.sin(angle), xp.cos(angle)], axis=-1)  # the sinusoidal time embedding
        t = dense(p["time2"], fw.nn.silu(dense(p["time1"], t)))
        h, skips = conv(p["stem"], x), []
        for down, pool in zip(p["down"], p["pool"], strict=True):    # each level down: half the size
            h = block(down, h, t)
            skips.append(h)
            h = conv(pool, h, 2)
        h = block(p["mid"], h, t)
        for up_p, upconv, skip in reversed(list(zip(p["up"], p["upconv"], skips, strict=True))):
            h = block(up_p, xp.concatenate([up(upconv, h), skip], axis=-1), t)   # the skip by concatenation
        return conv(p["out"], fw.nn.silu(h))

    def loss(p: Any, x0: Any, noise: Any, t: Any) -> Any:
        xt = signal[t][:, None, None, None] * x0 + noise_scale[t][:, None, None, None] * noise
        return ((denoise(p, xt, t) - noise) ** 2).mean()

    def batch_of(i: int) -> tuple[Any, ...]:
        j = slice((i % 8) * b, (i % 8 + 1) * b)
        return tuple(fw.asarray(a[j]) for a in (images, noises, times))
    return adam_program(fw, loss, params, batch_of, lr=2e-4)


def nerf(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    rays, samples, width, depth, skip = (64, 16, 32, 4, 2) if quick else (1024, 64, 128, 8, 4)
    pos_freqs, dir_freqs, near, far = 10, 4, 2.0, 6.0
    rng = np.random.default_rng(0)
    pos_in, dir_in = 3 + 6 * pos_freqs, 3 + 6 * dir_freqs
    trunk = [linear(fw, rng, pos_in if i == 0 else width + (pos_in if i == skip else 0), width) for i in range(depth)]
    params = {"trunk": trunk, "sigma": linear(fw, rng, width, 1), "feature": linear(fw, rng, width, width),
              "view": linear(fw, rng, width + dir_in, width // 2), "rgb": linear(fw, rng, width // 2, 3)}
    # rays from cameras on a sphere of radius 4 towards the origin, a coloured ball as the scene (its colour the target)
    origins = rng.standard_normal((8 * rays, 3))
    origins = 4 * origins / np.linalg.norm(origins, axis=-1, keepdims=True)
    dirs = -origins / 4 + 0.2 * rng.standard_normal((8 * rays, 3))
    dirs = dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)
    closest = origins + (-(origins * dirs).sum(-1, keepdims=True)) * dirs
    hit = (np.linalg.norm(closest, axis=-1, keepdims=True) < 1.0)
    targets = np.where(hit, 0.5 + 0.5 * np.tanh(closest * 2), 0.0)   # colour by where the ray passes the ball
    bins = np.linspace(near, far, samples + 1)[None, :-1]            # stratified samples: one per bin, jittered
    depths = bins + rng.uniform(0, (far - near) / samples, (8 * rays, samples))
    origins, dirs, targets, depths = (a.astype(np.float32) for a in (origins, dirs, targets, depths))

    def encode(x: Any, freqs: int) -> Any:                            # positional encoding: sin, cos of 2^k x
        scaled = (x[..., None, :] * (2.0 ** np.arange(freqs, dtype=np.float32))[:, None]).reshape(*x.shape[:-1], -1)
        return xp.concatenate([x, xp.sin(scaled), xp.cos(scaled)], axis=-1)

    def field(p: Any, points: Any, view: Any) -> tuple[Any, Any]:
        x = encode(points, pos_freqs)
        h = x
        for i, layer in enumerate(p["trunk"]):
            if i == skip:
                h = xp.concatenate([h, x], axis=-1)
            h = fw.nn.relu(dense(layer, h))
        sigma = fw.nn.relu(dense(p["sigma"], h))[..., 0]
        h = xp.concatenate([dense(p["feature"], h), encode(view, dir_freqs)], axis=-1)
        return sigma, fw.nn.sigmoid(dense(p["rgb"], fw.nn.relu(dense(p["view"], h))))

    def render(p: Any, o: Any, d: Any, t: Any) -> Any:
        points = o[:, None, :] + t[..., None] * d[:, None, :]         # (rays, samples, 3)
        view = xp.broadcast_to(d[:, None, :], points.shape)
        sigma, rgb = field(p, points, view)
        delta = xp.concatenate([t[:, 1:] - t[:, :-1], xp.full((t.shape[0], 1), 1e10, dtype=xp.float32)], axis=-1)
        alpha = 1 - xp.exp(-sigma * delta)
        trans = xp.cumprod(1 - alpha + 1e-10, axis=-1)                # the transmittance, exclusive:
        trans = xp.concatenate([xp.ones_like(trans[:, :1]), trans[:, :-1]], axis=-1)   # what reaches each sample
        weights = alpha * trans
        return (weights[..., None] * rgb).sum(1)

    def loss(p: Any, o: Any, d: Any, t: Any, target: Any) -> Any:
        return ((render(p, o, d, t) - target) ** 2).mean()

    def batch_of(i: int) -> tuple[Any, ...]:
        j = slice((i % 8) * rays, (i % 8 + 1) * rays)
        return tuple(fw.asarray(a[j]) for a in (origins, dirs, depths, targets))
    return adam_program(fw, loss, params, batch_of, lr=5e-4)


def _lru(fw: Fw, quick: bool, associative: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    b, length, features, d, state, classes = (2, 16, 4, 16, 16, 4) if quick else (8, 1024, 4, 64, 64, 10)
    rng = np.random.default_rng(0)

    def lru_p() -> dict[str, Any]:                                    # the LRU paper's initialisation
        radius = np.sqrt(rng.uniform(0.9 ** 2, 0.999 ** 2, state))   # eigenvalues in a ring near the unit circle
        theta = rng.uniform(0, np.pi / 10, state)
        gamma = np.sqrt(1 - radius ** 2)
        return {"nu_log": np.log(-np.log(radius)), "theta_log": np.log(theta), "gamma_log": np.log(gamma),
                "b_re": init(rng, d, state, scale=1 / math.sqrt(2 * d)), "b_im": init(rng, d, state,
                                                                                     scale=1 / math.sqrt(2 * d)),
                "c_re": init(rng, state, d, scale=1 / math.sqrt(state)), "c_im": init(rng, state, d,
                                                                                     scale=1 / math.sqrt(state)),
                "d": rng.standard_normal(d), "ln_g": np.ones(d), "ln_b": np.zeros(d),
                "mlp1": init(rng, d, 2 * d), "mlp2": init(rng, d, d)}
    params = {"encoder": linear(fw, rng, features, d), "head": linear(fw, rng, d, classes),
              "layers": [{k: fw.asarray(np.asarray(v, np.float32)) for k, v in lru_p().items()} for _ in range(2)]}
    # sequences of noise whose class is which feature drifts most: a signal spread over the whole sequence
    labels = rng.integers(0, classes, 8 * b)
    drift = np.eye(classes, features)[labels][:, None, :] * np.linspace(0, 1, length)[None, :, None]
    seqs = (rng.standard_normal((8 * b, length, features)) + 0.5 * drift).astype(np.float32)
    onehots = np.eye(classes, dtype=np.float32)[labels]

    def combine(a: Any, c: Any) -> Any:                               # (l1, u1) then (l2, u2): x -> l2 (l1 x + u1) + u2
        (ar, ai, ur, ui), (br, bi, vr, vi) = a, c
        return (br * ar - bi * ai, br * ai + bi * ar, br * ur - bi * ui + vr, br * ui + bi * ur + vi)

    def recurrence(lr: Any, li: Any, ur: Any, ui: Any) -> tuple[Any, Any]:   # x_k = lambda x_{k-1} + u_k, complex
        if associative:
            lrs, lis = (xp.broadcast_to(a, ur.shape) for a in (lr, li))
            _, _, xr, xi = lax.associative_scan(combine, (lrs, lis, ur, ui), axis=1)
            return xr, xi

        def step(x: Any, u: Any) -> Any:
            xr, xi = x
            x = (lr * xr - li * xi + u[0], lr * xi + li * xr + u[1])
            return x, x
        zero = xp.zeros((ur.shape[0], state), dtype=xp.float32)
        _, (xr, xi) = lax.scan(step, (zero, zero), (ur.transpose(1, 0, 2), ui.transpose(1, 0, 2)))
        return xr.transpose(1, 0, 2), xi.transpose(1, 0, 2)

    def lru_layer(p: Any, u: Any) -> Any:                             # u: (b, length, d)
        mod = xp.exp(-xp.exp(p["nu_log"]))
        lr, li = mod * xp.cos(xp.exp(p["theta_log"])), mod * xp.sin(xp.exp(p["theta_log"]))
        gamma = xp.exp(p["gamma_log"])
        xr, xi = recurrence(lr, li, u @ p["b_re"] * gamma, u @ p["b_im"] * gamma)
        return xr @ p["c_re"] - xi @ p["c_im"] + u * p["d"]           # Re(C x) + D u

    def loss(p: Any, x: Any, y: Any) -> Any:
        h = dense(p["encoder"], x)
        for lp in p["layers"]:
            z = fw.nn.gelu(lru_layer(lp, layer_norm(xp, lp["ln_g"], lp["ln_b"], h)))
            g = z @ lp["mlp1"]
            h = h + (g[..., :d] * fw.nn.sigmoid(g[..., d:])) @ lp["mlp2"]   # a GLU
        logits = dense(p["head"], h.mean(1))
        return -(fw.log_softmax(logits) * y).sum(-1).mean()

    def batch_of(i: int) -> tuple[Any, ...]:
        j = slice((i % 8) * b, (i % 8 + 1) * b)
        return fw.asarray(seqs[j]), fw.asarray(onehots[j])
    return adam_program(fw, loss, params, batch_of, lr=1e-3)


def layer_norm(xp: Any, g: Any, beta: Any, x: Any, eps: float = 1e-5) -> Any:
    m = x.mean(-1, keepdims=True)
    return (x - m) / xp.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * g + beta


def lru(fw: Fw, quick: bool) -> Step:
    return _lru(fw, quick, associative=True)


def lru_scan(fw: Fw, quick: bool) -> Step:
    return _lru(fw, quick, associative=False)


def mamba(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    b, length, d, state, vocab, layers = (2, 32, 16, 4, 32, 1) if quick else (8, 256, 64, 16, 256, 2)
    inner, rank, width = 2 * d, max(d // 16, 1), 4
    rng = np.random.default_rng(0)

    def layer_p() -> dict[str, Any]:
        dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), inner))  # mamba's dt initialisation
        return {"norm": fw.asarray(np.ones(d, np.float32)), "in": fw.asarray(init(rng, d, 2 * inner)),
                "conv": fw.asarray(init(rng, width, 1, inner, scale=1 / math.sqrt(width))),
                "conv_b": fw.asarray(np.zeros(inner, np.float32)),
                "x": fw.asarray(init(rng, inner, rank + 2 * state)), "dt": linear(fw, rng, rank, inner),
                "dt_b": fw.asarray((dt + np.log(-np.expm1(-dt))).astype(np.float32)),   # softplus^-1(dt)
                "a_log": fw.asarray(np.log(np.tile(np.arange(1, state + 1, dtype=np.float32), (inner, 1)))),
                "d": fw.asarray(np.ones(inner, np.float32)), "out": fw.asarray(init(rng, inner, d))}
    params = {"emb": fw.asarray(init(rng, vocab, d, scale=1 / math.sqrt(d))),
              "layers": [layer_p() for _ in range(layers)], "norm": fw.asarray(np.ones(d, np.float32))}
    # token sequences from a random sparse Markov chain: there is something to predict
    trans = rng.dirichlet(np.ones(vocab) * 0.05, vocab)
    tokens = np.zeros((8 * b, length + 1), np.int64)
    tokens[:, 0] = rng.integers(0, vocab, 8 * b)
    for j in range(1, length + 1):
        tokens[:, j] = (trans[tokens[:, j - 1]].cumsum(1) > rng.random((8 * b, 1))).argmax(1)
    tokens = np.minimum(tokens, vocab - 1).astype(np.int32)

    def rms_norm(g: Any, x: Any) -> Any:
        return x / xp.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g

    def selective_scan(u: Any, dt: Any, a: Any, bm: Any, cm: Any, dd: Any) -> Any:
        da = xp.exp(dt[..., None] * a)                                # (b, length, inner, state): discretised A
        dbu = dt[..., None] * bm[:, :, None, :] * u[..., None]        # and B x

        def step(h: Any, x: Any) -> Any:
            da_t, dbu_t, c_t = x
            h = da_t * h + dbu_t
            return h, (h * c_t[:, None, :]).sum(-1)
        h0 = xp.zeros((u.shape[0], inner, state), dtype=xp.float32)
        _, ys = lax.scan(step, h0, (da.transpose(1, 0, 2, 3), dbu.transpose(1, 0, 2, 3), cm.transpose(1, 0, 2)))
        return ys.transpose(1, 0, 2) + u * dd

    def mamba_block(p: Any, x: Any) -> Any:
        xz = rms_norm(p["norm"], x) @ p["in"]
        u, z = xz[..., :inner], xz[..., inner:]
        u = lax.conv_general_dilated(u, p["conv"], (1,), [(width - 1, 0)], dimension_numbers=("NWC", "WIO", "NWC"),
                                     feature_group_count=inner) + p["conv_b"]   # causal, depthwise
        u = fw.nn.silu(u)
        proj = u @ p["x"]
        dt = fw.nn.softplus(dense(p["dt"], proj[..., :rank]) + p["dt_b"])
        bm, cm = proj[..., rank:rank + state], proj[..., rank + state:]
        y = selective_scan(u, dt, -xp.exp(p["a_log"]), bm, cm, p["d"])
        return x + (y * fw.nn.silu(z)) @ p["out"]

    def loss(p: Any, tok: Any) -> Any:
        x = p["emb"][tok[:, :-1]]
        for lp in p["layers"]:
            x = mamba_block(lp, x)
        logits = rms_norm(p["norm"], x) @ p["emb"].T                  # the embedding tied
        target = (tok[:, 1:, None] == xp.arange(vocab)).astype(xp.float32)
        return -(fw.log_softmax(logits) * target).sum(-1).mean()

    return adam_program(fw, loss, params, lambda i: (fw.asarray(tokens[(i % 8) * b:(i % 8 + 1) * b]),), lr=1e-3)
