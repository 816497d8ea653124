"""How JAX users structure their code, timed by `bench/programs.py` (its docstring lists them): Equinox-style modules
(pytree classes, static fields, filtered partitions, a jitted method, NamedTuple optimiser states), mixed precision
over a scan of checkpointed layers, tensor networks, pooling and associative scans, callbacks in a jitted step, an
adjoint ODE, stochastic variational inference and an actor-critic loop whose environment is written in jnp."""
from __future__ import annotations

import dataclasses
import functools
import math
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

from bench.frameworks import Fw, Step, adam, adam_program, adam_state, init


def _lib(fw: Fw) -> SimpleNamespace:
    """What these programs use beyond `Fw`, spelt alike for both libraries."""
    if fw.name == "jax":
        import jax
        import jax.experimental
        import jax.experimental.ode
        return SimpleNamespace(tree_util=jax.tree_util, checkpoint=jax.checkpoint,
                               policies=jax.checkpoint_policies, pure_callback=jax.pure_callback,
                               io_callback=jax.experimental.io_callback, ShapeDtypeStruct=jax.ShapeDtypeStruct,
                               odeint=jax.experimental.ode.odeint, bfloat16=jax.numpy.bfloat16)
    import tgfx as tg
    return SimpleNamespace(tree_util=tg.tree_util, checkpoint=tg.checkpoint, policies=tg.checkpoint_policies,
                           pure_callback=tg.pure_callback, io_callback=tg.io_callback,
                           ShapeDtypeStruct=tg.ShapeDtypeStruct, odeint=tg.experimental.ode.odeint,
                           bfloat16=tg.dtypes.bfloat16)


def _partition(fw: Fw, tree: Any, spec: Any) -> tuple[Any, Any]:
    """Equinox's `partition`: the leaves where `spec` is True, None elsewhere; and the others."""
    return (fw.tree_map(lambda x, s: x if s else None, tree, spec),
            fw.tree_map(lambda x, s: None if s else x, tree, spec))


def _combine(fw: Fw, a: Any, b: Any) -> Any:
    """Equinox's `combine`: each leaf from whichever tree has it (not None)."""
    return fw.tree_map(lambda x, y: y if x is None else x, a, b, is_leaf=lambda v: v is None)


class AdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


@dataclasses.dataclass(frozen=True)
class Hyper:                      # hashable: a static argument of the jitted step
    lr: float = 3e-3
    b1: float = 0.9
    b2: float = 0.999


def eqx(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    lib = _lib(fw)
    d_in, hidden, classes, b = (8, 16, 4, 32) if quick else (64, 256, 10, 256)
    rng = np.random.default_rng(0)

    @lib.tree_util.register_pytree_node_class
    class Linear:
        def __init__(self, w: Any, bias: Any) -> None:
            self.w, self.bias = w, bias

        def __call__(self, x: Any) -> Any:
            return x @ self.w + self.bias

        def tree_flatten(self) -> tuple:
            return (self.w, self.bias), None

        @classmethod
        def tree_unflatten(cls, aux: Any, children: Any) -> Linear:
            return cls(*children)

    @functools.partial(lib.tree_util.register_dataclass, data_fields=["layers", "mean", "std"],
                       meta_fields=["activation"])
    @dataclasses.dataclass
    class MLP:
        layers: list
        mean: Any                 # input normalisation: buffers, not trained
        std: Any
        activation: str = "tanh"

        def __call__(self, x: Any) -> Any:
            act = getattr(fw.nn, self.activation)
            x = (x - self.mean) / self.std
            for layer in self.layers[:-1]:
                x = act(layer(x))
            return self.layers[-1](x)

    sizes = (d_in, hidden, hidden, classes)
    model = MLP([Linear(fw.asarray(init(rng, i, o)), fw.asarray(np.zeros(o, np.float32)))
                 for i, o in zip(sizes, sizes[1:], strict=False)],
                fw.asarray(rng.standard_normal(d_in).astype(np.float32)),
                fw.asarray(rng.uniform(0.5, 2, d_in).astype(np.float32)))
    spec = dataclasses.replace(fw.tree_map(lambda _: True, model), mean=False, std=False)
    centres = rng.standard_normal((classes, d_in)).astype(np.float32) * 2
    labels = rng.integers(0, classes, 9 * b)
    xs = (centres[labels] + rng.standard_normal((9 * b, d_in))).astype(np.float32)
    onehots = np.eye(classes, dtype=np.float32)[labels]
    test_x, test_y = fw.asarray(xs[8 * b:]), fw.asarray(labels[8 * b:].astype(np.int32))

    def loss(trainable: Any, static: Any, x: Any, y: Any) -> Any:
        m = _combine(fw, trainable, static)
        return -(fw.log_softmax(m(x)) * y).sum(-1).mean()

    @functools.partial(fw.jit, static_argnums=(0,))
    def step(h: Hyper, trainable: Any, static: Any, opt: AdamState, x: Any, y: Any) -> Any:
        value, g = fw.value_and_grad(loss)(trainable, static, x, y)
        count = opt.count + 1
        mu = fw.tree_map(lambda m, g: h.b1 * m + (1 - h.b1) * g, opt.mu, g)
        nu = fw.tree_map(lambda v, g: h.b2 * v + (1 - h.b2) * g * g, opt.nu, g)
        c1, c2 = 1 - h.b1 ** count, 1 - h.b2 ** count
        trainable = fw.tree_map(lambda p, m, v: p - h.lr * (m / c1) / (xp.sqrt(v / c2) + 1e-8), trainable, mu, nu)
        return trainable, AdamState(count, mu, nu), value

    predict = fw.jit(MLP.__call__)   # a jitted method: the module is its first argument, a pytree
    trainable, static = _partition(fw, model, spec)
    zeros = fw.tree_map(lambda a: a * 0, trainable)
    state = [trainable, AdamState(fw.asarray(np.zeros((), np.float32)), zeros, zeros)]
    hyper = Hyper()

    def run(i: int) -> Any:
        j = slice((i % 8) * b, (i % 8 + 1) * b)
        state[0], state[1], value = step(hyper, state[0], static, state[1], fw.asarray(xs[j]), fw.asarray(onehots[j]))
        accuracy = (predict(_combine(fw, state[0], static), test_x).argmax(-1) == test_y).mean()
        return value + accuracy
    return run


def remat(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    lib = _lib(fw)
    bf16 = lib.bfloat16
    layers, b, t, d, heads, vocab = (12, 2, 8, 16, 4, 32) if quick else (12, 8, 64, 128, 4, 256)
    dh = d // heads
    rng = np.random.default_rng(0)

    def stack(*shape: int, scale: float) -> Any:
        return fw.asarray((rng.standard_normal((layers, *shape)) * scale).astype(np.float32))
    master = {"emb": fw.asarray(init(rng, vocab, d, scale=0.1)),
              "blocks": {"n1": fw.asarray(np.ones((layers, d), np.float32)), "qkv": stack(d, 3 * d, scale=d ** -0.5),
                         "o": stack(d, d, scale=d ** -0.5 / math.sqrt(layers)),
                         "n2": fw.asarray(np.ones((layers, d), np.float32)), "up": stack(d, 4 * d, scale=d ** -0.5),
                         "down": stack(4 * d, d, scale=(4 * d) ** -0.5 / math.sqrt(layers))}}
    causal = fw.asarray(np.tril(np.ones((t, t), bool)))

    def rms(x: Any, g: Any) -> Any:   # in float32, back to bfloat16
        x32 = x.astype(xp.float32)
        return (x32 / xp.sqrt((x32 * x32).mean(-1, keepdims=True) + 1e-6) * g.astype(xp.float32)).astype(bf16)

    def head(q: Any, k: Any, v: Any) -> Any:   # one head: (b, t, dh) each
        s = (q @ k.transpose(0, 2, 1)).astype(xp.float32) / math.sqrt(dh)
        s = xp.where(causal, s, -1e9)
        return fw.softmax(s, axis=-1).astype(bf16) @ v

    def block(x: Any, p: Any) -> tuple[Any, None]:
        q, k, v = xp.split((rms(x, p["n1"]) @ p["qkv"]).reshape(b, t, 3, heads, dh), 3, axis=2)
        o = fw.vmap(head, in_axes=2, out_axes=2)(q[:, :, 0], k[:, :, 0], v[:, :, 0])   # (b, t, heads, dh)
        x = x + o.reshape(b, t, d) @ p["o"]
        x = x + fw.nn.gelu(rms(x, p["n2"]) @ p["up"]) @ p["down"]
        return x, None
    body = lib.checkpoint(block, policy=lib.policies.dots_with_no_batch_dims_saveable)

    def loss(master: Any, tokens: Any, targets: Any) -> Any:
        p = fw.tree_map(lambda a: a.astype(bf16), master)
        x, _ = lax.scan(body, p["emb"][tokens], p["blocks"])
        logits = (x @ p["emb"].T).astype(xp.float32)
        per_example = lax.map(lambda lt: -xp.take_along_axis(fw.log_softmax(lt[0]), lt[1][:, None], axis=-1).mean(),
                              (logits, targets))
        return per_example.mean()

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, scale: Any, tokens: Any, targets: Any) -> Any:
        value, g = fw.value_and_grad(lambda p: loss(p, tokens, targets) * scale)(p)
        g = fw.tree_map(lambda g: g / scale, g)
        finite = xp.stack([xp.isfinite(leaf).all() for leaf in lib.tree_util.tree_leaves(g)]).all()
        new_p, new_m, new_v, new_n = adam(fw, p, m, v, n, g, 1e-3)
        keep = lambda new, old: xp.where(finite, new, old)   # noqa: E731 - a skipped step on overflow
        p, m, v = (fw.tree_map(keep, a, b_) for a, b_ in ((new_p, p), (new_m, m), (new_v, v)))
        scale = xp.where(finite, scale, scale / 2)
        return p, m, v, xp.where(finite, new_n, n), scale, value / scale
    text = rng.integers(0, vocab, (8 * b, t + 1)).astype(np.int32)
    text[:, 1::2] = (text[:, 0::2][:, :text[:, 1::2].shape[1]] * 3 + 1) % vocab   # a learnable rule
    state = [*adam_state(fw, master), fw.asarray(np.float32(2.0 ** 15))]

    def run(i: int) -> Any:
        rows = text[(i % 8) * b:(i % 8 + 1) * b]
        *state[:], value = step(*state, fw.asarray(rows[:, :-1]), fw.asarray(rows[:, 1:]))
        return value
    return run


def mps(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    lib = _lib(fw)
    sites, bond, classes, b = (8, 4, 3, 16) if quick else (32, 16, 10, 128)
    rng = np.random.default_rng(0)
    # near-identity cores (the usual initialisation: a product of them neither vanishes nor explodes)
    eye = np.broadcast_to(np.eye(bond, dtype=np.float32)[:, None, :], (bond, 2, bond))
    params = {"cores": fw.asarray((eye + 0.1 * rng.standard_normal((sites, bond, 2, bond))).astype(np.float32)),
              "left": fw.asarray(np.ones(bond, np.float32) / math.sqrt(bond)),
              "out": fw.asarray(init(rng, bond, bond, classes))}
    pixels = rng.uniform(0, 1, (8 * b, sites)).astype(np.float32)
    labels = (pixels[:, : sites // 2].sum(1) * classes / (sites // 2)).astype(np.int32).clip(0, classes - 1)
    seen: list[float] = []

    def features(x: Any) -> Any:   # (b, sites) -> (b, sites, 2): the local feature map of Stoudenmire and Schwab
        return xp.stack([xp.cos(math.pi / 2 * x), xp.sin(math.pi / 2 * x)], -1)

    def logits(p: Any, x: Any) -> Any:
        phi = features(x)
        half = sites // 2
        v = xp.broadcast_to(p["left"], (x.shape[0], bond))
        for i in range(half):              # contracted from the left, a site at a time
            v = xp.einsum("bl,lpr,bp->br", v, p["cores"][i], phi[:, i])
            v = v / xp.linalg.norm(v, axis=-1, keepdims=True)
        w = xp.ones((x.shape[0], bond), xp.float32) / math.sqrt(bond)
        for i in range(sites - 1, half - 1, -1):   # and from the right
            w = xp.einsum("lpr,bp,br->bl", p["cores"][i], phi[:, i], w)
            w = w / xp.linalg.norm(w, axis=-1, keepdims=True)
        return xp.einsum("bl,lrc,br->bc", v, p["out"], w) * 4

    def accuracy(lg: np.ndarray, y: np.ndarray) -> np.ndarray:   # a numpy metric, called from the jitted step
        return np.asarray((np.asarray(lg).argmax(-1) == np.asarray(y)).mean(), np.float32)

    def log(value: np.ndarray) -> None:
        seen.append(float(value))

    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, x: Any, y: Any) -> Any:
        def loss(p: Any) -> Any:
            lg = logits(p, x)
            return -xp.take_along_axis(fw.log_softmax(lg), y[:, None], axis=-1).mean(), lg
        (value, lg), g = fw.value_and_grad(loss, has_aux=True)(p)
        acc = lib.pure_callback(accuracy, lib.ShapeDtypeStruct((), xp.float32), lg, y)
        lib.io_callback(log, None, value)
        p, m, v, n = adam(fw, p, m, v, n, g, 1e-2)
        return p, m, v, n, value + acc
    state = adam_state(fw, params)

    def run(i: int) -> Any:
        j = slice((i % 8) * b, (i % 8 + 1) * b)
        *state[:], value = step(*state, fw.asarray(pixels[j]), fw.asarray(labels[j]))
        return value
    return run


def pool_scan(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    b, size, c, classes = (4, 8, 4, 3) if quick else (32, 32, 16, 10)
    rng = np.random.default_rng(0)
    dims = ("NHWC", "HWIO", "NHWC")
    params = {"conv": fw.asarray(init(rng, 3, 3, 1, c, scale=1 / 3)), "cb": fw.asarray(np.zeros(c, np.float32)),
              "decay": fw.asarray(np.full(2 * c, 2.0, np.float32)), "inp": fw.asarray(init(rng, 2 * c, 2 * c)),
              "head": fw.asarray(init(rng, 4 * c, classes))}
    labels = rng.integers(0, classes, 8 * b)
    freq = (1 + labels)[:, None, None] * np.linspace(0, math.pi, size)[None, :, None]
    images = (np.sin(freq + rng.uniform(0, 6, (8 * b, 1, 1))) * np.ones((1, 1, size)) +
              0.3 * rng.standard_normal((8 * b, size, size)))[..., None].astype(np.float32)
    onehots = np.eye(classes, dtype=np.float32)[labels]

    def combine(a: Any, z: Any) -> Any:   # (a1, u1) then (a2, u2): h -> a2 (a1 h + u1) + u2
        return a[0] * z[0], z[0] * a[1] + z[1]

    def loss(p: Any, x: Any, y: Any) -> Any:
        h = fw.nn.relu(lax.conv_general_dilated(x, p["conv"], (1, 1), "SAME", dimension_numbers=dims) + p["cb"])
        mx = lax.reduce_window(h, -xp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        avg = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
        feats = xp.concatenate([mx, avg], -1)                        # (b, size/2, size/2, 2c)
        seq = feats.reshape(b, -1, 2 * c) @ p["inp"]                  # rows read as one sequence
        decay = xp.broadcast_to(fw.sigmoid(p["decay"]), seq.shape)
        _, hs = lax.associative_scan(combine, (decay, seq), axis=1)  # h_t = a h_{t-1} + u_t
        running = lax.associative_scan(lax.add, hs, axis=1) / xp.arange(1, seq.shape[1] + 1)[None, :, None]
        z = xp.concatenate([hs[:, -1], running[:, -1]], -1)
        return -(fw.log_softmax(z @ p["head"]) * y).sum(-1).mean()

    def batch_of(i: int) -> tuple[Any, ...]:
        j = slice((i % 8) * b, (i % 8 + 1) * b)
        return fw.asarray(images[j]), fw.asarray(onehots[j])
    return adam_program(fw, loss, params, batch_of, lr=1e-2)


def odeint_adjoint(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    lib = _lib(fw)
    n, hidden, times = (8, 16, 5) if quick else (64, 64, 20)
    rng = np.random.default_rng(0)
    params = {"w1": fw.asarray(init(rng, 2, hidden)), "b1": fw.asarray(np.zeros(hidden, np.float32)),
              "w2": fw.asarray(init(rng, hidden, 2, scale=0.1))}
    ts = np.linspace(0, 2, times).astype(np.float32)
    y0s = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    true_a = np.array([[-0.1, 2.0], [-2.0, -0.1]], np.float32)        # a damped spiral, y' = y^3 A
    truth = [y0s]
    for dt in np.diff(ts):                                            # its trajectory, fine RK4 steps in numpy
        y = truth[-1].astype(np.float64)
        for _ in range(50):
            f = lambda y: (y ** 3) @ true_a   # noqa: E731
            h = dt / 50
            k1 = f(y)
            k2 = f(y + h / 2 * k1)
            k3 = f(y + h / 2 * k2)
            k4 = f(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        truth.append(y.astype(np.float32))
    target = fw.asarray(np.stack(truth))                              # (times, n, 2)
    y0, t = fw.asarray(y0s), fw.asarray(ts)

    def field(y: Any, _t: Any, p: Any) -> Any:
        return xp.tanh((y ** 3) @ p["w1"] + p["b1"]) @ p["w2"]

    def loss(p: Any) -> Any:
        ys = lib.odeint(field, y0, t, p, rtol=1e-5, atol=1e-6)
        return xp.abs(ys - target).mean()

    state = adam_state(fw, params)

    @fw.jit
    def step(p: Any, m: Any, v: Any, k: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p)
        return (*adam(fw, p, m, v, k, g, 1e-2), value)

    def run(i: int) -> Any:
        *state[:], value = step(*state)
        return value
    return run


def svi(fw: Fw, quick: bool) -> Step:
    xp = fw.xp
    n, d, particles = (64, 4, 8) if quick else (1024, 32, 64)
    rng = np.random.default_rng(0)
    w_true = rng.standard_normal(d).astype(np.float32)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w_true))).astype(np.float32)
    data = (fw.asarray(x), fw.asarray(y))
    params = {"mu": fw.asarray(np.zeros(d, np.float32)), "log_sigma": fw.asarray(np.full(d, -1.0, np.float32))}

    def log_joint(w: Any, x: Any, y: Any) -> Any:   # log p(y | x, w) + log N(w; 0, I)
        z = x @ w
        return (y * fw.log_sigmoid(z) + (1 - y) * fw.log_sigmoid(-z)).sum() - 0.5 * (w * w).sum()

    def neg_elbo(q: Any, key: Any, x: Any, y: Any) -> Any:
        eps = fw.normal(key, (particles, d))
        ws = q["mu"] + xp.exp(q["log_sigma"]) * eps                  # the reparameterisation trick
        energy = fw.vmap(log_joint, in_axes=(0, None, None))(ws, x, y).mean()
        entropy = q["log_sigma"].sum() + 0.5 * d * (1 + math.log(2 * math.pi))
        return -(energy + entropy) / x.shape[0]

    @fw.jit
    def step(q: Any, m: Any, v: Any, k: Any, key: Any) -> Any:
        key, sub = fw.split(key)
        value, g = fw.value_and_grad(neg_elbo)(q, sub, *data)
        return (*adam(fw, q, m, v, k, g, 5e-2), key, value)
    state = [*adam_state(fw, params), fw.key(0)]

    def run(i: int) -> Any:
        *state[:], value = step(*state)
        return value
    return run


def actor_critic(fw: Fw, quick: bool) -> Step:
    xp, lax = fw.xp, fw.lax
    envs, horizon, hidden = (8, 16, 16) if quick else (64, 128, 64)
    gamma, lam = 0.99, 0.95
    rng = np.random.default_rng(0)

    def mlp(o: int, scale: float) -> dict[str, Any]:
        return {"w1": fw.asarray(init(rng, 4, hidden)), "b1": fw.asarray(np.zeros(hidden, np.float32)),
                "w2": fw.asarray(init(rng, hidden, o, scale=scale)), "b2": fw.asarray(np.zeros(o, np.float32))}
    params = {"pi": mlp(2, 0.01), "v": mlp(1, 1.0)}

    def net(p: Any, s: Any) -> Any:
        return xp.tanh(s @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]

    def env_step(s: Any, a: Any, key: Any) -> tuple[Any, Any, Any]:   # cart-pole (Barto et al.), Euler steps
        x, x_dot, th, th_dot = s[0], s[1], s[2], s[3]
        force = xp.where(a == 1, 10.0, -10.0)
        cos, sin = xp.cos(th), xp.sin(th)
        temp = (force + 0.05 * th_dot ** 2 * sin) / 1.1
        th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * th_acc * cos / 1.1
        s = xp.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, th + 0.02 * th_dot, th_dot + 0.02 * th_acc])
        done = (xp.abs(s[0]) > 2.4) | (xp.abs(s[2]) > 0.2095)
        fresh = fw.uniform(key, (4,)) * 0.1 - 0.05
        return xp.where(done, fresh, s), xp.asarray(1.0, xp.float32), done.astype(xp.float32)

    def rollout(p: Any, s: Any, key: Any) -> Any:
        def one(carry: Any, _: Any) -> Any:
            s, key = carry
            key, k_act, k_env = fw.split(key, 3)
            a = fw.categorical(k_act, net(p["pi"], s))
            s2, r, done = fw.vmap(env_step)(s, a, fw.split(k_env, envs))
            return (s2, key), (s, a, r, done)
        (s, key), traj = lax.scan(one, (s, key), None, length=horizon)
        return s, key, traj

    def loss(p: Any, traj: Any, last: Any) -> Any:
        s, a, r, done = traj
        v = net(p["v"], s)[..., 0]                                    # (horizon, envs)
        v_next = xp.concatenate([v[1:], net(p["v"], last)[None, :, 0]], 0)

        def gae(adv: Any, xs: Any) -> Any:                            # generalised advantages, a reverse scan
            r, done, v, v_next = xs
            delta = r + gamma * v_next * (1 - done) - v
            adv = delta + gamma * lam * (1 - done) * adv
            return adv, adv
        _, adv = lax.scan(gae, xp.zeros(envs, xp.float32), (r, done, fw.stop_gradient(v), fw.stop_gradient(v_next)),
                          reverse=True)
        logp = fw.log_softmax(net(p["pi"], s))
        chosen = xp.take_along_axis(logp, a[..., None], axis=-1)[..., 0]
        entropy = -(xp.exp(logp) * logp).sum(-1).mean()
        returns = adv + fw.stop_gradient(v)
        return -(chosen * adv).mean() + 0.5 * ((returns - v) ** 2).mean() - 0.01 * entropy, r.mean() * 0 + done.mean()

    @fw.jit
    def update(p: Any, m: Any, v: Any, n: Any, s: Any, key: Any) -> Any:
        s, key, traj = rollout(p, s, key)
        (value, _), g = fw.value_and_grad(loss, has_aux=True)(p, traj, s)
        return (*adam(fw, p, m, v, n, g, 3e-3), s, key, value)
    start = fw.asarray(rng.uniform(-0.05, 0.05, (envs, 4)).astype(np.float32))
    state = [*adam_state(fw, params), start, fw.key(0)]

    def run(i: int) -> Any:
        *state[:], value = update(*state)
        return value
    return run
