"""What the programs of `bench/programs.py` need of a library (`Fw`), for tgfx and for jax, and the helpers they
share."""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Fw:
    """What a program needs of a library, spelt alike for both."""
    name: str
    xp: Any                 # tgfx.numpy / jax.numpy
    jit: Callable
    value_and_grad: Callable
    grad: Callable
    vjp: Callable
    vmap: Callable
    lax: Any
    tree_map: Callable
    asarray: Callable
    key: Callable           # seed -> key
    split: Callable
    normal: Callable        # (key, shape) -> standard normal
    log_softmax: Callable
    sigmoid: Callable
    gelu: Callable
    conv: Callable          # NCHW x, OIHW w, "SAME", stride 1
    categorical: Callable   # (key, logits) -> a sample
    segment_sum: Callable   # (data, segment_ids, num_segments) -> per-segment sums
    segment_max: Callable   # (data, segment_ids, num_segments) -> per-segment maxima
    logsumexp: Callable     # (a, axis) -> log(sum(exp(a), axis))
    randint: Callable       # (key, shape, minval, maxval) -> int32 draws
    stop_gradient: Callable
    uniform: Callable       # (key, shape) -> draws in [0, 1)
    custom_vjp: Callable    # JAX's decorator class, nondiff_argnums included
    permutation: Callable   # (key, n) -> a permutation of range(n)
    softmax: Callable
    log_sigmoid: Callable
    nn: Any                 # tgfx.nn / jax.nn (silu, softplus, relu, gelu, ...)
    scipy: Any              # tgfx.scipy / jax.scipy (linalg.solve_triangular, special.logsumexp, ...)
    random: Any             # tgfx.random / jax.random (bernoulli, choice, ... beyond the names above)
    shard: Callable         # (x, axis) -> x split along axis over SHARDS devices (None: replicated on each), as a
                            # placement outside jit and a sharding constraint inside it

    def sync(self, x: Any) -> float:
        return float(x)


SHARDS = 2   # the sharded programs' devices: CPU:0 and CPU:1 (tgfx), the first two host devices (jax)


def tgfx_fw() -> Fw:
    import tgfx as tg
    import tgfx.numpy as tnp
    import tgfx.scipy as tsp
    conv = lambda x, w: tg.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))  # noqa: E731
    devs = tuple(f"CPU:{i}" for i in range(SHARDS))

    def shard(x: Any, axis: int | None) -> Any:
        return tg.shard(x, devs, axis)
    return Fw("tgfx", tnp, tg.jit, tg.value_and_grad, tg.grad, tg.vjp, tg.vmap, tg.lax, tg.tree.map, tg.asarray,
              tg.random.key, tg.random.split, tg.random.normal, tg.nn.log_softmax, tg.nn.sigmoid, tg.nn.gelu, conv,
              tg.random.categorical, tg.ops.segment_sum, tg.ops.segment_max, tg.nn.logsumexp, tg.random.randint,
              tg.stop_gradient, tg.random.uniform, tg.custom_vjp,
              tg.random.permutation, tg.nn.softmax, tg.nn.log_sigmoid, tg.nn, tsp, tg.random, shard)


def jax_fw() -> Fw:
    # SHARDS host devices for the sharded programs, set before jax first imports (it reads XLA_FLAGS then); the other
    # programs' arrays stay on the first, as they would without it
    flag = f"--xla_force_host_platform_device_count={SHARDS}"
    if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
    import jax
    import jax.numpy as jnp
    import jax.scipy
    import jax.scipy.linalg
    conv = lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))  # noqa: E731
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    def shard(x: Any, axis: int | None) -> Any:
        if len(jax.devices()) < SHARDS:
            raise RuntimeError(f"jax has {len(jax.devices())} device(s), the sharded programs need {SHARDS}: jax was "
                               f"imported before XLA_FLAGS={flag} was set")
        mesh = Mesh(np.array(jax.devices()[:SHARDS]), ("d",))
        spec = PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), "d")
        return jax.device_put(x, NamedSharding(mesh, spec))
    return Fw("jax", jnp, jax.jit, jax.value_and_grad, jax.grad, jax.vjp, jax.vmap, jax.lax, jax.tree.map, jnp.asarray,
              jax.random.PRNGKey, jax.random.split, jax.random.normal, jax.nn.log_softmax, jax.nn.sigmoid,
              jax.nn.gelu, conv, jax.random.categorical, jax.ops.segment_sum, jax.ops.segment_max, jax.nn.logsumexp,
              jax.random.randint, jax.lax.stop_gradient, jax.random.uniform, jax.custom_vjp,
              jax.random.permutation, jax.nn.softmax, jax.nn.log_sigmoid, jax.nn, jax.scipy, jax.random, shard)


Step = Callable[[int], Any]   # step i -> the loss (not yet read)


def batch(fw: Fw, i: int, b: int, *arrays: np.ndarray) -> tuple[Any, ...]:
    """Step i's batch of each array: its rows (i % 8) * b onwards, b of them, on the framework's device."""
    j = (i % 8) * b
    return tuple(fw.asarray(a[j:j + b]) for a in arrays)


def init(rng: np.random.Generator, *shape: int, scale: float | None = None) -> np.ndarray:
    return (rng.standard_normal(shape) * (scale if scale is not None else 1 / math.sqrt(shape[0]))).astype(np.float32)


def sgd_step(fw: Fw, loss: Callable, lr: float) -> Callable:
    """The jitted step `(p, *batch) -> (p - lr * grad, loss)` of `loss(p, *batch)`."""
    @fw.jit
    def step(p: Any, *args: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, *args)
        return fw.tree_map(lambda p, g: p - lr * g, p, g), value
    return step


def adam_state(fw: Fw, params: Any) -> list[Any]:
    """[params, m, v, n]: what `adam` updates, its moments zero and its step count a float32 zero."""
    def zeros() -> Any:
        return fw.tree_map(lambda a: a * 0, params)
    return [params, zeros(), zeros(), fw.asarray(np.zeros((), np.float32))]


def adam(fw: Fw, p: Any, m: Any, v: Any, n: Any, g: Any, lr: float, b1: float = 0.9, b2: float = 0.999) -> tuple:
    """One Adam update of the pytree `p` by its gradient `g` (moments `m`, `v`, step count `n`, a float array):
    the new (p, m, v, n), as optax.adam writes it."""
    m = fw.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
    v = fw.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
    n = n + 1
    c1, c2 = 1 - b1 ** n, 1 - b2 ** n
    return fw.tree_map(lambda p, m, v: p - lr * (m / c1) / (fw.xp.sqrt(v / c2) + 1e-8), p, m, v), m, v, n


def dense(p: Any, x: Any) -> Any:
    """A linear layer: x @ w + b (`p`: {"w", "b"})."""
    return x @ p["w"] + p["b"]


def layer_norm(xp: Any, p: Any, x: Any, eps: float = 1e-5) -> Any:
    """Layer normalisation over the last axis, scaled and shifted (`p`: {"g", "b"}; `xp`: the framework's numpy)."""
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / xp.sqrt(v + eps) * p["g"] + p["b"]


def attention(xp: Any, q: Any, k: Any, v: Any, mask: Any = None) -> Any:
    """Softmax attention of heads (b, h, t, dh): softmax(q k^T / sqrt(dh)) @ v, scores where `mask` is False set to
    -1e9 first, the heads merged back into (b, t, h * dh)."""
    b, h, t, dh = q.shape
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    if mask is not None:
        s = xp.where(mask, s, -1e9)
    w = xp.exp(s - s.max(-1, keepdims=True))
    y = (w / w.sum(-1, keepdims=True)) @ v
    return y.transpose(0, 2, 1, 3).reshape(b, t, h * dh)


def adam_program(fw: Fw, loss: Callable, params: Any, batch_of: Callable[[int], tuple], lr: float = 1e-3) -> Step:
    """The program's Step of Adam on `loss(params, *batch)`, one jitted step, the batch of step i `batch_of(i)`."""
    @fw.jit
    def step(p: Any, m: Any, v: Any, n: Any, *xs: Any) -> Any:
        value, g = fw.value_and_grad(loss)(p, *xs)
        p, m, v, n = adam(fw, p, m, v, n, g, lr)
        return p, m, v, n, value
    state = adam_state(fw, params)

    def run(i: int) -> Any:
        *state[:], value = step(*state, *batch_of(i))
        return value
    return run


def carried(step: Callable, state: Any, *args: Any) -> Step:
    """The program's Step for a jitted `step(state, *args) -> (state, loss)` on fixed arguments, its state carried
    from call to call."""
    box = [state]

    def run(i: int) -> Any:
        box[0], value = step(box[0], *args)
        return value
    return run
