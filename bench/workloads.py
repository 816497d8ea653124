"""The workloads, and how numpy and tgfx run each one (the other peers are in `bench/peers.py`).

A workload says what it computes, how big, and how its speed is reported; `inputs` makes its data in numpy with a
fixed seed, so every framework starts from the same numbers. An implementation takes the sizes and those inputs and
returns a `Case`: `call()` runs one iteration and waits until its result is computed, `read()` gives the latest
result as numpy arrays. The runner checks `read()` after the first call against numpy's, then times `call()`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Inputs = dict[str, Any]


@dataclass(frozen=True)
class Sizes:
    matmul: int                              # n of an n×n×n matmul
    gelu: int                                # elements
    softmax: tuple[int, int]                 # rows, columns
    mlp: tuple[int, ...]                     # layer widths, input first
    batch: int                               # MLP batch
    lr: float                                # MLP SGD learning rate
    dispatch: int                            # elements of the tiny jitted function
    conv: tuple[int, int, int, int, int]     # batch, in channels, out channels, height, width (3×3, stride 1, pad 1)
    allreduce: int = 16 * 2**20              # float32 elements per device of the all-reduce (and of the copy)
    vae: tuple[int, int, int, int] = (64, 256, 16, 128)  # VAE pixels, hidden width, latent size, batch
    gp: int = 128                            # training points of the Gaussian process
    cnn: tuple[int, int, int] = (128, 16, 32)              # CNN step on 8x8 digits: batch, conv1 and conv2 channels
    mnist: tuple[int, int, int, int] = (784, 1024, 10, 128)  # mnist_classifier_fromscratch: widths, batch
    attention: tuple[int, int, int, int] = (8, 4, 128, 64)   # bfloat16 attention: batch, heads, tokens, head width


FULL = Sizes(matmul=1024, gelu=16 * 2**20, softmax=(4096, 1024), mlp=(784, 512, 512, 10), batch=128, lr=0.01,
             dispatch=16, conv=(16, 64, 64, 32, 32), vae=(64, 256, 16, 128), gp=128)
QUICK = Sizes(matmul=128, gelu=2**16, softmax=(256, 128), mlp=(16, 8, 8, 4), batch=8, lr=0.01,
              dispatch=16, conv=(2, 8, 8, 8, 8), allreduce=4096, vae=(16, 8, 4, 8), gp=8, cnn=(8, 4, 8),
              mnist=(64, 32, 10, 8), attention=(2, 2, 16, 8))


@dataclass
class Case:
    call: Callable[[], Any]                   # one iteration; returns once its result is computed
    read: Callable[[], list[np.ndarray]]      # the latest result, as numpy arrays


@dataclass(frozen=True)
class Workload:
    name: str                                  # what --only takes
    title: Callable[[Sizes], str]              # the table's first column
    metric: str                                # "GFLOP/s" or "GB/s" (throughput from `work`), or "ms" / "us" (time)
    work: Callable[[Sizes], float] | None      # flops or bytes per call, for throughput metrics
    inputs: Callable[[Sizes], Inputs] | None   # None for a workload the runner measures in child processes
    rtol: float = 1e-4
    atol: float = 1e-5


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def matmul_inputs(s: Sizes) -> Inputs:
    rng = _rng()
    return {"a": rng.standard_normal((s.matmul, s.matmul), np.float32),
            "b": rng.standard_normal((s.matmul, s.matmul), np.float32)}


def gelu_inputs(s: Sizes) -> Inputs:
    return {"x": _rng().standard_normal(s.gelu, np.float32)}


def softmax_inputs(s: Sizes) -> Inputs:
    return {"x": _rng().standard_normal(s.softmax, np.float32) * 3}


def mlp_inputs(s: Sizes) -> Inputs:
    """He-initialised weights (a flat list w0, b0, w1, b1, ...), a batch of inputs and one-hot labels."""
    rng = _rng()
    params = []
    for a, b in zip(s.mlp[:-1], s.mlp[1:], strict=True):
        params += [(rng.standard_normal((a, b), np.float32) * np.float32(math.sqrt(2 / a))),
                   rng.standard_normal(b, np.float32) * np.float32(0.1)]
    x = rng.standard_normal((s.batch, s.mlp[0]), np.float32)
    y = np.eye(s.mlp[-1], dtype=np.float32)[rng.integers(0, s.mlp[-1], s.batch)]
    return {"params": params, "x": x, "y": y}


def dispatch_inputs(s: Sizes) -> Inputs:
    return {"v": np.arange(s.dispatch, dtype=np.float32)}


def allreduce_inputs(n: int) -> Callable[[Sizes], Inputs]:
    def inputs(s: Sizes) -> Inputs:
        rng = _rng()
        return {"parts": [rng.standard_normal(s.allreduce, np.float32) for _ in range(n)]}
    return inputs


def copy_inputs(s: Sizes) -> Inputs:
    return {"x": _rng().standard_normal(s.allreduce, np.float32)}


def conv_inputs(s: Sizes) -> Inputs:
    n, cin, cout, h, w = s.conv
    rng = _rng()
    return {"x": rng.standard_normal((n, cin, h, w), np.float32),
            "w": rng.standard_normal((cout, cin, 3, 3), np.float32) * np.float32(1 / math.sqrt(9 * cin))}


def digits_images(n: int) -> np.ndarray:
    """n of the 8x8 handwritten digits examples/train_digits.py trains on (scikit-learn's), as (n, 1, 8, 8) pixels in
    [0, 1], and their labels; uniform noise and random labels where scikit-learn is not installed."""
    rng = _rng()
    try:
        from sklearn.datasets import load_digits
        data = load_digits()
        x, y = (data.data[:n] / 16.0).astype(np.float32), data.target[:n]
    except ImportError:
        x, y = rng.uniform(0, 1, (n, 64)).astype(np.float32), rng.integers(0, 10, n)
    return x.reshape(n, 1, 8, 8), np.eye(10, dtype=np.float32)[y]


def cnn_inputs(s: Sizes) -> Inputs:
    """He-initialised CNN params (w1, b1, w2, b2 of the 3x3 convolutions, OIHW; w3, b3 of the dense layer), a batch
    of digits and one-hot labels."""
    b, c1, c2 = s.cnn
    rng = _rng()
    x, y = digits_images(b)
    params = [rng.standard_normal((c1, 1, 3, 3), np.float32) * np.float32(math.sqrt(2 / 9)),
              np.zeros(c1, np.float32),
              rng.standard_normal((c2, c1, 3, 3), np.float32) * np.float32(math.sqrt(2 / (9 * c1))),
              np.zeros(c2, np.float32),
              rng.standard_normal((c2, 10), np.float32) * np.float32(math.sqrt(1 / c2)),
              np.zeros(10, np.float32)]
    return {"params": params, "x": x, "y": y}


def attention_inputs(s: Sizes) -> Inputs:
    return dict(zip("qkv", _rng().standard_normal((3, *s.attention), np.float32), strict=True))


def mnist_inputs(s: Sizes) -> Inputs:
    """The params of JAX's mnist_classifier_fromscratch (`param_scale * randn`, scale 0.1: w0, b0, w1, b1, ...), a
    batch of synthetic images and one-hot labels."""
    *widths, batch = s.mnist
    rng = _rng()
    params = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        params += [rng.standard_normal((a, b), np.float32) * np.float32(MNIST_SCALE),
                   rng.standard_normal(b, np.float32) * np.float32(MNIST_SCALE)]
    x = rng.uniform(0, 1, (batch, widths[0])).astype(np.float32)
    y = np.eye(widths[-1], dtype=np.float32)[rng.integers(0, widths[-1], batch)]
    return {"params": params, "x": x, "y": y}


def _adam_state(rng: np.random.Generator, params: list[np.ndarray]) -> dict[str, Any]:
    """Adam's state a hundred steps into a run (so the first update is not the sign of the gradient, which rounding
    can flip where a gradient is near 0, and every framework's result can be compared)."""
    return {"mu": [rng.standard_normal(p.shape, np.float32) * np.float32(1e-2) for p in params],
            "nu": [rng.uniform(0.5e-4, 1.5e-4, p.shape).astype(np.float32) for p in params],
            "count": np.int32(100)}


def vae_inputs(s: Sizes) -> Inputs:
    """The VAE's params (LeCun-normal weights, zero biases: w1, b1 .. w4, b4 of encoder and decoder), Adam's state,
    a batch of binary images, a key, and the noise `eps` the step draws from that key.

    `eps` is what `normal(split(key)[1], (batch, latent))` gives (tgfx's generator, bit for bit jax.random's, checked
    by tests/test_random.py): numpy's reference step takes it as given, the others draw it inside their step."""
    import tgfx as tg
    pixels, hidden, latent, batch = s.vae
    rng = _rng()
    params = []
    for a, b in ((pixels, hidden), (hidden, 2 * latent), (latent, hidden), (hidden, pixels)):
        params += [rng.standard_normal((a, b), np.float32) * np.float32(1 / math.sqrt(a)), np.zeros(b, np.float32)]
    key = np.array([0, 42], np.uint32)
    # drawn on the CPU whatever device the benchmark runs on: the inputs are host data, the same for every row
    eps = tg.random.normal(tg.random.split(tg.asarray(key, device="CPU"))[1], (batch, latent)).numpy()
    x = (rng.uniform(size=(batch, pixels)) < 0.3).astype(np.float32)
    return {"params": params, **_adam_state(rng, params), "key": key, "x": x, "eps": eps}


def gp_inputs(s: Sizes) -> Inputs:
    """The GP's log hyperparameters (amplitude, lengthscale, noise), Adam's state, and `s.gp` noisy samples of sin
    at sorted points in [0, 2 pi] (x as (n, 1), y centred)."""
    rng = _rng()
    params = [np.float32(0.0), np.float32(0.0), np.float32(math.log(0.3))]
    state = _adam_state(rng, [np.asarray(p) for p in params])
    state["mu"], state["nu"] = [np.float32(m) for m in state["mu"]], [np.float32(v) for v in state["nu"]]
    x = np.sort(rng.uniform(0, 2 * np.pi, s.gp)).astype(np.float32)[:, None]
    y = (np.sin(x[:, 0]) + 0.1 * rng.standard_normal(s.gp)).astype(np.float32)
    return {"params": params, **state, "x": x, "y": y - y.mean()}


WORKLOADS = [
    Workload("matmul", lambda s: f"matmul {s.matmul}x{s.matmul}x{s.matmul}", "GFLOP/s",
             lambda s: 2 * s.matmul**3, matmul_inputs, rtol=1e-3, atol=1e-3),
    Workload("gelu", lambda s: f"gelu(x*1.5+0.5), {s.gelu / 2**20:g}M", "GB/s",
             lambda s: 2 * 4 * s.gelu, gelu_inputs, rtol=1e-4, atol=1e-5),
    Workload("softmax", lambda s: f"softmax rows {s.softmax[0]}x{s.softmax[1]}", "GB/s",
             lambda s: 2 * 4 * s.softmax[0] * s.softmax[1], softmax_inputs, rtol=1e-4, atol=1e-6),
    Workload("mlp", lambda s: f"mlp step {'-'.join(map(str, s.mlp))} b{s.batch}", "ms", None, mlp_inputs,
             rtol=1e-3, atol=1e-5),
    Workload("firstcall", lambda s: "mlp step first call", "ms", None, None, rtol=1e-3, atol=1e-5),
    Workload("dispatch", lambda s: f"dispatch v+1, {s.dispatch} floats", "us", None, dispatch_inputs,
             rtol=0, atol=0),
    Workload("conv2d", lambda s: "conv2d 3x3 {1}->{2} {3}x{4} b{0}".format(*s.conv), "GFLOP/s",
             lambda s: 2 * s.conv[0] * s.conv[2] * s.conv[3] * s.conv[4] * s.conv[1] * 9, conv_inputs,
             rtol=1e-3, atol=1e-4),
    Workload("copy", lambda s: f"copy {4 * s.allreduce / 2**20:g} MB, CPU:0 -> CPU:1", "GB/s",
             lambda s: 4 * s.allreduce, copy_inputs, rtol=0, atol=0),
    Workload("allreduce2", lambda s: f"all-reduce {4 * s.allreduce / 2**20:g} MB over 2 devices", "GB/s",
             lambda s: 4 * s.allreduce, allreduce_inputs(2), rtol=1e-6, atol=1e-6),
    Workload("allreduce4", lambda s: f"all-reduce {4 * s.allreduce / 2**20:g} MB over 4 devices", "GB/s",
             lambda s: 4 * s.allreduce, allreduce_inputs(4), rtol=1e-6, atol=1e-6),
    Workload("vae", lambda s: "vae step {}-{}-{} b{}".format(*s.vae), "ms", None, vae_inputs,
             rtol=1e-3, atol=1e-5),
    Workload("gp", lambda s: f"gp step, {s.gp} points", "ms", None, gp_inputs, rtol=1e-3, atol=1e-5),
    Workload("cnn_step", lambda s: "cnn step 8x8 digits conv3x3 1-{1}-{2} b{0}".format(*s.cnn), "ms", None,
             cnn_inputs, rtol=1e-3, atol=1e-5),
    Workload("mnist_step", lambda s: "mnist_classifier_fromscratch step {}-{}-{} tanh b{}".format(*s.mnist), "ms",
             None, mnist_inputs, rtol=1e-3, atol=1e-5),
    # mixed precision: float32 inputs cast to bfloat16, every op in bfloat16 (rounded after each, as JAX's), the
    # matmuls summed in float32; checked against numpy's float32 result to bfloat16's precision
    Workload("bf16_attention", lambda s: "bf16 attention softmax(q k^T / sqrt(d)) v, {}x{}x{}x{}".format(*s.attention),
             "GFLOP/s", lambda s: 4 * math.prod(s.attention) * s.attention[2], attention_inputs, rtol=3e-2, atol=3e-2),
]
WORKLOADS_BY_NAME = {w.name: w for w in WORKLOADS}
GELU_C = math.sqrt(2 / math.pi)
GP_JITTER = 1e-6  # on the diagonal of the GP's covariance, as examples/gaussian_process.py adds
MNIST_SCALE, MNIST_LR = 0.1, 0.001  # mnist_classifier_fromscratch's param_scale and step_size

# (workload, framework) -> implementation; filled by the @impl decorator here and in bench/peers.py.
IMPLS: dict[tuple[str, str], Callable[[Sizes, Inputs], Case]] = {}


def impl(workload: str, framework: str) -> Callable:
    def register(fn: Callable[[Sizes, Inputs], Case]) -> Callable[[Sizes, Inputs], Case]:
        IMPLS[(workload, framework)] = fn
        return fn
    return register


def stateful(step: Callable[[Any], Any], state: Any, read: Callable[[Any], list[np.ndarray]]) -> Case:
    """A Case whose every call feeds the previous result back in (an MLP training loop)."""
    box = [state]

    def call() -> Any:
        box[0] = step(box[0])
        return box[0]
    return Case(call, lambda: read(box[0]))


# ---------------------------------------------------------------------------------------------------------------
# numpy: the reference every other framework is checked against; plain numpy, with numpy's BLAS for matmuls.
# ---------------------------------------------------------------------------------------------------------------

def np_gelu(x: np.ndarray) -> np.ndarray:
    y = x * np.float32(1.5) + np.float32(0.5)
    return np.float32(0.5) * y * (np.float32(1) + np.tanh(np.float32(GELU_C) * (y + np.float32(0.044715) * y * y * y)))


def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q @ k.swapaxes(-1, -2) * np.float32(1 / math.sqrt(q.shape[-1]))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ v


def np_mlp_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray, lr: float) -> tuple[list[np.ndarray], float]:
    """One SGD step of the ReLU MLP with softmax cross-entropy, forward and backward written out by hand."""
    ws, bs = params[0::2], params[1::2]
    acts = [x]
    for w, b in zip(ws[:-1], bs[:-1], strict=True):
        acts.append(np.maximum(acts[-1] @ w + b, 0))
    logits = acts[-1] @ ws[-1] + bs[-1]
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -(logp * y).sum(axis=1).mean()
    d = (np.exp(logp) - y) / np.float32(x.shape[0])
    grads: list[np.ndarray] = []
    for i in reversed(range(len(ws))):
        grads[:0] = [acts[i].T @ d, d.sum(axis=0)]
        if i:
            d = (d @ ws[i].T) * (acts[i] > 0)
    lr32 = np.float32(lr)
    return [p - lr32 * g for p, g in zip(params, grads, strict=True)], float(loss)


def np_conv2d(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """3×3 convolution, stride 1, padding 1, as im2col + one matmul (NCHW input, OIHW weight)."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2)  # n, c, 9, h, w
    out = w.reshape(w.shape[0], c * 9) @ cols.reshape(n, c * 9, h * wd)
    return out.reshape(n, w.shape[0], h, wd)


def np_conv3x3(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np_conv2d` plus a bias, and the column matrix (n, c * 9, h * w) its backward needs."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2).reshape(n, c * 9, -1)
    out = (w.reshape(w.shape[0], c * 9) @ cols).reshape(n, w.shape[0], h, wd)
    return out + b[:, None, None], cols


def np_conv3x3_grads(x_shape: tuple[int, ...], cols: np.ndarray, w: np.ndarray,
                     g: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of `np_conv3x3` (x, w, b) from the output gradient g: the kernel's g times the columns, the input's
    the columns' gradient summed back into the padded image (col2im)."""
    n, c, h, wd = x_shape
    o = w.shape[0]
    g2 = g.reshape(n, o, h * wd)
    dw = np.einsum("nop,nkp->ok", g2, cols).reshape(w.shape)
    dcols = (w.reshape(o, c * 9).T @ g2).reshape(n, c, 9, h, wd)
    dxp = np.zeros((n, c, h + 2, wd + 2), np.float32)
    for k in range(9):
        i, j = divmod(k, 3)
        dxp[:, :, i:i + h, j:j + wd] += dcols[:, :, k]
    return dxp[:, :, 1:-1, 1:-1], dw, g.sum(axis=(0, 2, 3))


def np_cnn_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray, lr: float) -> tuple[list[np.ndarray], float]:
    """One SGD step of the digits CNN (conv 3x3, relu, conv 3x3, relu, mean over the image, dense, softmax
    cross-entropy), forward and backward written out by hand."""
    w1, b1, w2, b2, w3, b3 = params
    z1, cols1 = np_conv3x3(x, w1, b1)
    a1 = np.maximum(z1, 0)
    z2, cols2 = np_conv3x3(a1, w2, b2)
    a2 = np.maximum(z2, 0)
    pooled = a2.mean(axis=(2, 3))
    logits = pooled @ w3 + b3
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -(logp * y).sum(axis=1).mean()
    d = (np.exp(logp) - y) / np.float32(x.shape[0])
    dw3, db3 = pooled.T @ d, d.sum(axis=0)
    dz2 = np.broadcast_to((d @ w3.T)[:, :, None, None] / np.float32(a2.shape[2] * a2.shape[3]), a2.shape) * (z2 > 0)
    da1, dw2, db2 = np_conv3x3_grads(a1.shape, cols2, w2, dz2)
    _, dw1, db1 = np_conv3x3_grads(x.shape, cols1, w1, da1 * (z1 > 0))
    lr32 = np.float32(lr)
    grads = [dw1, db1, dw2, db2, dw3, db3]
    return [p - lr32 * g for p, g in zip(params, grads, strict=True)], float(loss)


def np_mnist_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """mnist_classifier_fromscratch's `update`: SGD on the tanh MLP's mean negative log-likelihood, by hand."""
    ws, bs = params[0::2], params[1::2]
    acts = [x]
    for w, b in zip(ws[:-1], bs[:-1], strict=True):
        acts.append(np.tanh(acts[-1] @ w + b))
    logits = acts[-1] @ ws[-1] + bs[-1]
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    d = (np.exp(logp) * y.sum(axis=1, keepdims=True) - y) / np.float32(x.shape[0])
    grads: list[np.ndarray] = []
    for i in reversed(range(len(ws))):
        grads[:0] = [acts[i].T @ d, d.sum(axis=0)]
        if i:
            d = (d @ ws[i].T) * (1 - acts[i] * acts[i])
    return [p - np.float32(MNIST_LR) * g for p, g in zip(params, grads, strict=True)]


def np_softplus(a: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.float32(0), a)


def np_sigmoid(a: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(np.float32(0), -a))


def np_adam(params: list[np.ndarray], grads: list[np.ndarray], mu: list[np.ndarray], nu: list[np.ndarray],
            count: np.int32, lr: float, b1: float = 0.9, b2: float = 0.999,
            eps: float = 1e-8) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], np.int32]:
    """One Adam step: new params, first and second moments, step count."""
    f = np.float32
    mu = [f(b1) * m + f(1 - b1) * g for m, g in zip(mu, grads, strict=True)]
    nu = [f(b2) * v + f(1 - b2) * g * g for v, g in zip(nu, grads, strict=True)]
    count = np.int32(count + 1)
    c1, c2 = f(1) - f(b1) ** f(count), f(1) - f(b2) ** f(count)
    params = [p - f(lr) * (m / c1) / (np.sqrt(v / c2) + f(eps)) for p, m, v in zip(params, mu, nu, strict=True)]
    return params, mu, nu, count


def np_vae_step(st: dict[str, Any], x: np.ndarray, eps: np.ndarray, lr: float) -> dict[str, Any]:
    """One Adam step on the VAE's negative ELBO (Bernoulli decoder, Gaussian encoder, reparameterised with the given
    noise `eps`), forward and backward written out by hand. `st` holds params, mu, nu, count (and the loss)."""
    w1, b1, w2, b2, w3, b3, w4, b4 = st["params"]
    n, latent = eps.shape
    a1 = x @ w1 + b1
    h1 = np_softplus(a1)
    o = h1 @ w2 + b2
    mean, log_var = o[:, :latent], o[:, latent:]
    std = np.exp(np.float32(0.5) * log_var)
    z = mean + std * eps
    a2 = z @ w3 + b3
    h2 = np_softplus(a2)
    logits = h2 @ w4 + b4
    nll = (np_softplus(logits) - x * logits).sum(axis=1)
    kl = np.float32(-0.5) * (1 + log_var - mean * mean - np.exp(log_var)).sum(axis=1)
    loss = (nll + kl).mean()
    inv_n = np.float32(1 / n)
    d_logits = (np_sigmoid(logits) - x) * inv_n
    d_a2 = (d_logits @ w4.T) * np_sigmoid(a2)
    d_z = d_a2 @ w3.T
    d_mean = d_z + mean * inv_n
    d_log_var = d_z * eps * std * np.float32(0.5) + np.float32(0.5) * (np.exp(log_var) - 1) * inv_n
    d_o = np.concatenate([d_mean, d_log_var], axis=1)
    d_a1 = (d_o @ w2.T) * np_sigmoid(a1)
    grads = [x.T @ d_a1, d_a1.sum(0), h1.T @ d_o, d_o.sum(0), z.T @ d_a2, d_a2.sum(0), h2.T @ d_logits,
             d_logits.sum(0)]
    params, mu, nu, count = np_adam(st["params"], grads, st["mu"], st["nu"], st["count"], lr)
    return {"params": params, "mu": mu, "nu": nu, "count": count, "loss": np.float32(loss)}


def np_gp_step(st: dict[str, Any], x: np.ndarray, y: np.ndarray, lr: float) -> dict[str, Any]:
    """One Adam step on the GP's negative log marginal likelihood (RBF kernel, log hyperparameters), its gradient
    by hand: d nll / dK = (K^-1 - a a^T) / 2 with a = K^-1 y, in float64 (the answer the float32 ones approximate)."""
    log_amp, log_ls, log_noise = (float(p) for p in st["params"])
    x64, y64, n = x.astype(np.float64), y.astype(np.float64), len(y)
    sq = ((x64[:, None, :] - x64[None, :, :]) ** 2).sum(axis=-1)
    amp2, ls2, noise2 = math.exp(2 * log_amp), math.exp(2 * log_ls), math.exp(2 * log_noise)
    e = np.exp(-0.5 * sq / ls2)
    k = amp2 * e + (noise2 + GP_JITTER) * np.eye(n)
    chol = np.linalg.cholesky(k)
    k_inv = np.linalg.inv(k)
    a = k_inv @ y64
    nll = 0.5 * y64 @ a + np.log(np.diag(chol)).sum() + 0.5 * n * math.log(2 * math.pi)
    w = 0.5 * (k_inv - np.outer(a, a))
    grads = [np.float32((w * 2 * amp2 * e).sum()), np.float32((w * amp2 * e * sq / ls2).sum()),
             np.float32(np.trace(w) * 2 * noise2)]
    params, mu, nu, count = np_adam(st["params"], grads, st["mu"], st["nu"], st["count"], lr)
    return {"params": params, "mu": mu, "nu": nu, "count": count, "loss": np.float32(nll)}


def read_adam_run(st: dict[str, Any]) -> list[np.ndarray]:
    """What an optimiser workload's result is checked on: the new params, then the loss (any arrays numpy reads)."""
    return [*(np.asarray(p) for p in st["params"]), np.asarray(st["loss"], np.float32)]


def _np_case(fn: Callable[..., np.ndarray], *args: np.ndarray) -> Case:
    box: list[np.ndarray] = []

    def call() -> np.ndarray:
        box[:] = [fn(*args)]
        return box[0]
    return Case(call, lambda: list(box))


@impl("matmul", "numpy")
def numpy_matmul(s: Sizes, d: Inputs) -> Case:
    return _np_case(np.matmul, d["a"], d["b"])


@impl("gelu", "numpy")
def numpy_gelu(s: Sizes, d: Inputs) -> Case:
    return _np_case(np_gelu, d["x"])


@impl("softmax", "numpy")
def numpy_softmax(s: Sizes, d: Inputs) -> Case:
    return _np_case(np_softmax, d["x"])


@impl("mlp", "numpy")
def numpy_mlp(s: Sizes, d: Inputs) -> Case:
    x, y = d["x"], d["y"]
    return stateful(lambda st: np_mlp_step(st[0], x, y, s.lr), (list(d["params"]), 0.0),
                    lambda st: [*st[0], np.float32(st[1])])


@impl("dispatch", "numpy")
def numpy_dispatch(s: Sizes, d: Inputs) -> Case:
    return _np_case(lambda v: v + np.float32(1), d["v"])


@impl("copy", "numpy")
def numpy_copy(s: Sizes, d: Inputs) -> Case:
    out = np.empty_like(d["x"])
    return _np_case(lambda x: np.copyto(out, x) or out, d["x"])


def _numpy_allreduce(s: Sizes, d: Inputs) -> Case:
    """What an all-reduce computes, on one host: the sum of every device's value (into a preallocated buffer)."""
    out = np.empty_like(d["parts"][0])

    def total(*parts: np.ndarray) -> np.ndarray:
        np.add(parts[0], parts[1], out=out)
        for p in parts[2:]:
            np.add(out, p, out=out)
        return out
    return _np_case(total, *d["parts"])


IMPLS[("allreduce2", "numpy")] = IMPLS[("allreduce4", "numpy")] = _numpy_allreduce


@impl("conv2d", "numpy")
def numpy_conv2d(s: Sizes, d: Inputs) -> Case:
    return _np_case(np_conv2d, d["x"], d["w"])


@impl("cnn_step", "numpy")
def numpy_cnn_step(s: Sizes, d: Inputs) -> Case:
    x, y = d["x"], d["y"]
    return stateful(lambda st: np_cnn_step(st[0], x, y, s.lr), (list(d["params"]), 0.0),
                    lambda st: [*st[0], np.float32(st[1])])


@impl("mnist_step", "numpy")
def numpy_mnist_step(s: Sizes, d: Inputs) -> Case:
    x, y = d["x"], d["y"]
    return stateful(lambda params: np_mnist_step(params, x, y), list(d["params"]), list)


@impl("vae", "numpy")
def numpy_vae(s: Sizes, d: Inputs) -> Case:
    x, eps = d["x"], d["eps"]
    state = {k: d[k] for k in ("params", "mu", "nu", "count")}
    return stateful(lambda st: np_vae_step(st, x, eps, s.lr), state, read_adam_run)


@impl("gp", "numpy")
def numpy_gp(s: Sizes, d: Inputs) -> Case:
    x, y = d["x"], d["y"]
    state = {k: d[k] for k in ("params", "mu", "nu", "count")}
    return stateful(lambda st: np_gp_step(st, x, y, s.lr), state, read_adam_run)


# ---------------------------------------------------------------------------------------------------------------
# tgfx: every workload under tg.jit, so a timed call replays compiled kernels.
# ---------------------------------------------------------------------------------------------------------------

def _tg_put(a: np.ndarray) -> Any:
    import tgfx as tg
    return tg.asarray(a).block_until_ready()


def _tg_case(fn: Callable, *args: np.ndarray) -> Case:
    import tgfx as tg
    f = tg.jit(fn)
    xs = [_tg_put(a) for a in args]
    box: list[Any] = []

    def call() -> Any:
        box[:] = [f(*xs).block_until_ready()]
        return box[0]
    return Case(call, lambda: [box[0].numpy()])


def tg_gelu(x: Any) -> Any:
    import tgfx.numpy as tnp
    y = x * 1.5 + 0.5
    return 0.5 * y * (1 + tnp.tanh(GELU_C * (y + 0.044715 * y * y * y)))


def tg_softmax(x: Any) -> Any:
    import tgfx.numpy as tnp
    e = tnp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def tg_mlp_loss(params: list[Any], x: Any, y: Any) -> Any:
    import tgfx.numpy as tnp
    h = x
    for i in range(0, len(params) - 2, 2):
        h = tnp.maximum(h @ params[i] + params[i + 1], 0)
    logits = h @ params[-2] + params[-1]
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - tnp.log(tnp.exp(z).sum(axis=1, keepdims=True))
    return -(logp * y).sum(axis=1).mean()


def tg_mlp_step_fn(lr: float) -> Callable:
    """`tg.jit` of one SGD step: `value_and_grad` of the loss, then the update; returns (new params, loss)."""
    import tgfx as tg

    @tg.jit
    def step(params: list[Any], x: Any, y: Any) -> tuple[list[Any], Any]:
        loss, grads = tg.value_and_grad(tg_mlp_loss)(params, x, y)
        return [p - lr * g for p, g in zip(params, grads, strict=True)], loss
    return step


def tg_adam(params: list[Any], grads: list[Any], mu: list[Any], nu: list[Any], count: Any, lr: Any,
            b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple[list[Any], list[Any], list[Any], Any]:
    """Adam as the VAE example writes it (its learning rate is an argument of the jitted step)."""
    import tgfx as tg
    import tgfx.numpy as tnp
    mu = [b1 * m + (1 - b1) * g for m, g in zip(mu, grads, strict=True)]
    nu = [b2 * v + (1 - b2) * g * g for v, g in zip(nu, grads, strict=True)]
    count = count + 1
    t = count.astype(tg.dtypes.float32)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    params = [p - lr * (m / c1) / (tnp.sqrt(v / c2) + eps) for p, m, v in zip(params, mu, nu, strict=True)]
    return params, mu, nu, count


def tg_vae_loss(params: list[Any], x: Any, eps: Any) -> Any:
    """The negative ELBO of examples/train_vae.py, over a flat parameter list (w1, b1 .. w4, b4)."""
    import tgfx as tg
    import tgfx.numpy as tnp
    w1, b1, w2, b2, w3, b3, w4, b4 = params
    latent = eps.shape[1]
    o = tg.nn.softplus(x @ w1 + b1) @ w2 + b2
    mean, log_var = o[:, :latent], o[:, latent:]
    z = mean + tnp.exp(0.5 * log_var) * eps
    logits = tg.nn.softplus(z @ w3 + b3) @ w4 + b4
    nll = (tg.nn.softplus(logits) - x * logits).sum(axis=1)
    kl = -0.5 * (1 + log_var - mean * mean - tnp.exp(log_var)).sum(axis=1)
    return (nll + kl).mean()


def tg_vae_step() -> Callable:
    """`tg.jit` of the VAE example's step, less its binarisation: split the key, draw the noise (materialised, as
    the example does: see bench/README.md), value_and_grad, Adam with the learning rate as a Python float argument."""
    import tgfx as tg

    @tg.jit
    def step(st: dict[str, Any], x: Any, lr: float) -> tuple[dict[str, Any], Any]:
        key, k_eps = tg.random.split(st["key"])
        eps = tg.random.normal(k_eps, (x.shape[0], st["params"][2].shape[1] // 2)).contiguous()  # see README
        loss, grads = tg.value_and_grad(tg_vae_loss)(st["params"], x, eps)
        params, mu, nu, count = tg_adam(st["params"], grads, st["mu"], st["nu"], st["count"], lr)
        return {"params": params, "mu": mu, "nu": nu, "count": count, "key": key}, loss
    return step


def tg_gp_nll(params: list[Any], x: Any, y: Any) -> Any:
    """examples/gaussian_process.py's negative log marginal likelihood, over (log amplitude, log lengthscale,
    log noise): `tgfx.scipy.linalg.cholesky` and `cho_solve`."""
    import tgfx.numpy as tnp
    import tgfx.scipy.linalg as sla
    log_amp, log_ls, log_noise = params
    n = x.shape[0]
    sq = ((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=-1)
    k = tnp.exp(2 * log_amp) * tnp.exp(-0.5 * sq / tnp.exp(2 * log_ls))
    chol = sla.cholesky(k + (tnp.exp(2 * log_noise) + GP_JITTER) * tnp.eye(n), lower=True)
    alpha = sla.cho_solve((chol, True), y)
    return 0.5 * (y * alpha).sum() + tnp.log(tnp.einsum("ii->i", chol)).sum() + 0.5 * n * math.log(2 * math.pi)


def tg_gp_step(lr: float) -> Callable:
    """`tg.jit` of the GP example's step: value_and_grad of the NLL, then `tg.optim.adam`."""
    import tgfx as tg
    opt = tg.optim.adam(lr)

    @tg.jit
    def step(params: list[Any], state: Any, x: Any, y: Any) -> tuple[list[Any], Any, Any]:
        nll, grads = tg.value_and_grad(tg_gp_nll)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return tg.optim.apply_updates(params, updates), state, nll
    return step


def tg_conv2d(x: Any, w: Any) -> Any:
    """3×3 convolution, stride 1, padding 1, as a user writes it: `tg.nn.conv2d`, one direct-convolution kernel (the
    input read through index arithmetic, its padding a mask: no im2col or padded copy)."""
    import tgfx as tg
    return tg.nn.conv2d(x, w, padding=1)


@impl("matmul", "tgfx")
def tgfx_matmul(s: Sizes, d: Inputs) -> Case:
    return _tg_case(lambda a, b: a @ b, d["a"], d["b"])


@impl("gelu", "tgfx")
def tgfx_gelu(s: Sizes, d: Inputs) -> Case:
    return _tg_case(tg_gelu, d["x"])


@impl("bf16_attention", "numpy")
def numpy_attention(s: Sizes, d: Inputs) -> Case:
    return _np_case(np_attention, d["q"], d["k"], d["v"])


@impl("bf16_attention", "tgfx")
def tgfx_attention(s: Sizes, d: Inputs) -> Case:
    import tgfx as tg
    import tgfx.numpy as tnp

    def attention(q: Any, k: Any, v: Any) -> Any:
        q, k, v = (a.astype(tnp.bfloat16) for a in (q, k, v))
        p = tg.nn.softmax(q @ k.swapaxes(-1, -2) * (1 / math.sqrt(q.shape[-1])), axis=-1)
        return (p @ v).astype(tnp.float32)
    return _tg_case(attention, d["q"], d["k"], d["v"])


@impl("softmax", "tgfx")
def tgfx_softmax(s: Sizes, d: Inputs) -> Case:
    return _tg_case(tg_softmax, d["x"])


@impl("mlp", "tgfx")
def tgfx_mlp(s: Sizes, d: Inputs) -> Case:
    step = tg_mlp_step_fn(s.lr)
    x, y = _tg_put(d["x"]), _tg_put(d["y"])

    def advance(st: tuple[list[Any], Any]) -> tuple[list[Any], Any]:
        params, loss = step(st[0], x, y)
        return params, loss.block_until_ready()
    return stateful(advance, ([_tg_put(p) for p in d["params"]], None),
                    lambda st: [*(p.numpy() for p in st[0]), st[1].numpy()])


@impl("dispatch", "tgfx")
def tgfx_dispatch(s: Sizes, d: Inputs) -> Case:
    return _tg_case(lambda v: v + 1, d["v"])


@impl("copy", "tgfx")
def tgfx_copy(s: Sizes, d: Inputs) -> Case:
    import tgfx as tg
    f = tg.jit(lambda x: x.to("CPU:1"))
    x = _tg_put(d["x"])
    box: list[Any] = []

    def call() -> Any:
        box[:] = [f(x).block_until_ready()]
        return box[0]
    return Case(call, lambda: [box[0].numpy()])


def _tgfx_allreduce(s: Sizes, d: Inputs) -> Case:
    """`psum` of one value per CPU device, replayed under jit: one kernel reading every part where it lies (CPU devices
    share memory; a ring of copies and adds on other backends)."""
    import tgfx as tg
    f = tg.jit(lambda *parts: tg.psum(parts))
    parts = [tg.asarray(p).to(f"CPU:{i}").block_until_ready() for i, p in enumerate(d["parts"])]
    box: list[Any] = []

    def call() -> Any:
        box[:] = [f(*parts).block_until_ready()]
        return box[0]
    return Case(call, lambda: [tg.parts(box[0])[-1].numpy()])


IMPLS[("allreduce2", "tgfx")] = IMPLS[("allreduce4", "tgfx")] = _tgfx_allreduce


@impl("conv2d", "tgfx")
def tgfx_conv2d(s: Sizes, d: Inputs) -> Case:
    return _tg_case(tg_conv2d, d["x"], d["w"])


def tg_cnn_loss(params: list[Any], x: Any, y: Any) -> Any:
    """The digits CNN's loss: `tg.nn.conv2d` (direct convolutions, NCHW), relu, mean over the image, dense, softmax
    cross-entropy."""
    import tgfx as tg
    import tgfx.numpy as tnp
    w1, b1, w2, b2, w3, b3 = params
    h = tg.nn.relu(tg.nn.conv2d(x, w1, b1, padding=1))   # relu's gradient at 0 is 0 (maximum's would be 1/2:
    h = tg.nn.relu(tg.nn.conv2d(h, w2, b2, padding=1))   # the digits' blank border convolves to exactly 0)
    logits = h.mean(axis=(2, 3)) @ w3 + b3
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - tnp.log(tnp.exp(z).sum(axis=1, keepdims=True))
    return -(logp * y).sum(axis=1).mean()


def tg_mnist_loss(params: list[Any], x: Any, y: Any) -> Any:
    """mnist_classifier_fromscratch's `loss`, spelled in tgfx."""
    import tgfx.numpy as tnp
    import tgfx.scipy.special as tsp
    h = x
    for i in range(0, len(params) - 2, 2):
        h = tnp.tanh(tnp.dot(h, params[i]) + params[i + 1])
    logits = tnp.dot(h, params[-2]) + params[-1]
    preds = logits - tsp.logsumexp(logits, axis=1, keepdims=True)
    return -tnp.mean(tnp.sum(preds * y, axis=1))


def _tg_train(step: Callable, s: Sizes, d: Inputs, with_loss: bool) -> Case:
    params = [_tg_put(p) for p in d["params"]]
    x, y = _tg_put(d["x"]), _tg_put(d["y"])
    if not with_loss:
        def update(ps: list[Any]) -> list[Any]:
            new = step(ps, x, y)
            new[-1].block_until_ready()
            return new
        return stateful(update, params, lambda ps: [p.numpy() for p in ps])

    def advance(st: tuple[list[Any], Any]) -> tuple[list[Any], Any]:
        new, loss = step(st[0], x, y)
        return new, loss.block_until_ready()
    return stateful(advance, (params, None), lambda st: [*(p.numpy() for p in st[0]), st[1].numpy()])


@impl("cnn_step", "tgfx")
def tgfx_cnn_step(s: Sizes, d: Inputs) -> Case:
    import tgfx as tg

    @tg.jit
    def step(params: list[Any], x: Any, y: Any) -> tuple[list[Any], Any]:
        loss, grads = tg.value_and_grad(tg_cnn_loss)(params, x, y)
        return [p - s.lr * g for p, g in zip(params, grads, strict=True)], loss
    return _tg_train(step, s, d, with_loss=True)


@impl("mnist_step", "tgfx")
def tgfx_mnist_step(s: Sizes, d: Inputs) -> Case:
    import tgfx as tg

    @tg.jit
    def update(params: list[Any], x: Any, y: Any) -> list[Any]:
        grads = tg.grad(tg_mnist_loss)(params, x, y)
        return [p - MNIST_LR * g for p, g in zip(params, grads, strict=True)]
    return _tg_train(update, s, d, with_loss=False)


@impl("vae", "tgfx")
def tgfx_vae(s: Sizes, d: Inputs) -> Case:
    import tgfx as tg
    step, x = tg_vae_step(), _tg_put(d["x"])
    state = tg.tree.tree_map(lambda a: _tg_put(np.asarray(a)), {k: d[k] for k in ("params", "mu", "nu", "count",
                                                                                  "key")})

    def advance(st: tuple[dict[str, Any], Any]) -> tuple[dict[str, Any], Any]:
        new, loss = step(st[0], x, s.lr)
        return new, loss.block_until_ready()
    return stateful(advance, (state, None), lambda st: read_adam_run({**st[0], "loss": st[1]}))


@impl("gp", "tgfx")
def tgfx_gp(s: Sizes, d: Inputs) -> Case:
    import tgfx as tg
    step, x, y = tg_gp_step(s.lr), _tg_put(d["x"]), _tg_put(d["y"])
    params = [_tg_put(np.asarray(p)) for p in d["params"]]
    state = tg.optim.AdamState(_tg_put(np.asarray(d["count"])), [_tg_put(np.asarray(m)) for m in d["mu"]],
                               [_tg_put(np.asarray(v)) for v in d["nu"]])

    def advance(st: tuple[list[Any], Any, Any]) -> tuple[list[Any], Any, Any]:
        params, state, nll = step(st[0], st[1], x, y)
        return params, state, nll.block_until_ready()
    return stateful(advance, (params, state, None), lambda st: read_adam_run({"params": st[0], "loss": st[2]}))


def reference(workload: str, s: Sizes, d: Inputs) -> list[np.ndarray]:
    """numpy's result of one call, what every framework's first call is checked against."""
    case = IMPLS[(workload, "numpy")](s, d)
    case.call()
    return case.read()
