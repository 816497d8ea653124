"""How jax, torch and tinygrad run each workload, each the way a user of that library would write it, on the CPU.

Every import happens inside the implementation, so this module loads without any peer installed; the runner asks
`importlib` which peers are there before it calls one.

- jax: `jax.jit` of each function on the CPU device; the MLP, CNN and MNIST steps are `jax.jit` of
  `jax.value_and_grad` (or `jax.grad`) + SGD, the VAE and GP steps the same with Adam written out (as
  `jax.example_libraries.optimizers`), `jax.random` and `jax.scipy.linalg`.
- torch: plain eager mode (no `torch.compile`); the MLP step is autograd + an SGD update under `torch.no_grad`.
- tinygrad: `TinyJit` of each function (it captures on the second call and replays from the third); the MLP step
  computes gradients with `Tensor.gradient` and updates parameters in place with `assign`.
"""
from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from bench.workloads import GELU_C, GP_JITTER, MNIST_LR, Case, Inputs, Sizes, impl, read_adam_run, stateful

# ---------------------------------------------------------------------------------------------------------------
# jax
# ---------------------------------------------------------------------------------------------------------------


def _gpu() -> bool:
    """Whether the peers run on the GPU (`python -m bench --device CUDA`)."""
    return os.environ.get("BENCH_DEVICE", "CPU") == "CUDA"


def _jax() -> Any:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # an accelerator would not be the CPU benchmark
    import jax
    return jax


def _jax_put(a: np.ndarray) -> Any:
    jax = _jax()
    return jax.device_put(a, jax.devices("gpu" if _gpu() else "cpu")[0]).block_until_ready()


def _jax_case(fn: Callable, *args: np.ndarray) -> Case:
    jax = _jax()
    f = jax.jit(fn)
    xs = [_jax_put(a) for a in args]
    box: list[Any] = []

    def call() -> Any:
        box[:] = [f(*xs).block_until_ready()]
        return box[0]
    return Case(call, lambda: [np.asarray(box[0])])


def jax_mlp_loss(params: list[Any], x: Any, y: Any) -> Any:
    jax = _jax()
    h = x
    for i in range(0, len(params) - 2, 2):
        h = jax.nn.relu(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    return -(jax.nn.log_softmax(logits, axis=1) * y).sum(axis=1).mean()


@impl("matmul", "jax")
def jax_matmul(s: Sizes, d: Inputs) -> Case:
    return _jax_case(lambda a, b: a @ b, d["a"], d["b"])


@impl("gelu", "jax")
def jax_gelu(s: Sizes, d: Inputs) -> Case:
    jax = _jax()
    return _jax_case(lambda x: jax.nn.gelu(x * 1.5 + 0.5, approximate=True), d["x"])


@impl("softmax", "jax")
def jax_softmax(s: Sizes, d: Inputs) -> Case:
    jax = _jax()
    return _jax_case(lambda x: jax.nn.softmax(x, axis=1), d["x"])


@impl("bf16_attention", "jax")
def jax_attention(s: Sizes, d: Inputs) -> Case:
    jax = _jax()
    jnp = jax.numpy

    def attention(q: Any, k: Any, v: Any) -> Any:
        q, k, v = (a.astype(jnp.bfloat16) for a in (q, k, v))
        p = jax.nn.softmax(q @ k.swapaxes(-1, -2) * (1 / math.sqrt(q.shape[-1])), axis=-1)
        return (p @ v).astype(jnp.float32)
    return _jax_case(attention, d["q"], d["k"], d["v"])


@impl("mlp", "jax")
def jax_mlp(s: Sizes, d: Inputs) -> Case:
    jax = _jax()

    @jax.jit
    def step(params: list[Any], x: Any, y: Any) -> tuple[list[Any], Any]:
        loss, grads = jax.value_and_grad(jax_mlp_loss)(params, x, y)
        return [p - s.lr * g for p, g in zip(params, grads, strict=True)], loss

    x, y = _jax_put(d["x"]), _jax_put(d["y"])

    def advance(st: tuple[list[Any], Any]) -> tuple[list[Any], Any]:
        params, loss = step(st[0], x, y)
        return jax.block_until_ready((params, loss))
    return stateful(advance, ([_jax_put(p) for p in d["params"]], None),
                    lambda st: [*(np.asarray(p) for p in st[0]), np.asarray(st[1])])


def jax_adam(params: list[Any], grads: list[Any], mu: list[Any], nu: list[Any], count: Any, lr: Any,
             b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple[list[Any], list[Any], list[Any], Any]:
    """Adam as `jax.example_libraries.optimizers.adam` writes it, with the learning rate an argument."""
    jnp = _jax().numpy
    mu = [b1 * m + (1 - b1) * g for m, g in zip(mu, grads, strict=True)]
    nu = [b2 * v + (1 - b2) * g * g for v, g in zip(nu, grads, strict=True)]
    count = count + 1
    t = count.astype(jnp.float32)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    params = [p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps) for p, m, v in zip(params, mu, nu, strict=True)]
    return params, mu, nu, count


def jax_vae_loss(params: list[Any], x: Any, eps: Any) -> Any:
    jax = _jax()
    jnp = jax.numpy
    w1, b1, w2, b2, w3, b3, w4, b4 = params
    latent = eps.shape[1]
    o = jax.nn.softplus(x @ w1 + b1) @ w2 + b2
    mean, log_var = o[:, :latent], o[:, latent:]
    z = mean + jnp.exp(0.5 * log_var) * eps
    logits = jax.nn.softplus(z @ w3 + b3) @ w4 + b4
    nll = (jax.nn.softplus(logits) - x * logits).sum(axis=1)
    kl = -0.5 * (1 + log_var - mean * mean - jnp.exp(log_var)).sum(axis=1)
    return (nll + kl).mean()


def _jax_adam_case(step: Callable, s: Sizes, d: Inputs, *data: np.ndarray) -> Case:
    """A training loop of `step(state, *data, lr) -> (state, loss)` from the workload's params and Adam state."""
    jax = _jax()
    state = jax.tree.map(lambda a: _jax_put(np.asarray(a)), {k: d[k] for k in ("params", "mu", "nu", "count", "key")
                                                             if k in d})
    args = [_jax_put(a) for a in data]

    def advance(st: tuple[dict[str, Any], Any]) -> tuple[dict[str, Any], Any]:
        return jax.block_until_ready(step(st[0], *args, s.lr))
    return stateful(advance, (state, None), lambda st: read_adam_run({**st[0], "loss": st[1]}))


@impl("vae", "jax")
def jax_vae(s: Sizes, d: Inputs) -> Case:
    jax = _jax()

    @jax.jit
    def step(st: dict[str, Any], x: Any, lr: float) -> tuple[dict[str, Any], Any]:
        key, k_eps = jax.random.split(st["key"])
        eps = jax.random.normal(k_eps, (x.shape[0], st["params"][2].shape[1] // 2))
        loss, grads = jax.value_and_grad(jax_vae_loss)(st["params"], x, eps)
        params, mu, nu, count = jax_adam(st["params"], grads, st["mu"], st["nu"], st["count"], lr)
        return {"params": params, "mu": mu, "nu": nu, "count": count, "key": key}, loss
    return _jax_adam_case(step, s, d, d["x"])


def jax_gp_nll(params: list[Any], x: Any, y: Any) -> Any:
    """JAX's examples/gaussian_process_regression.py's objective, with log hyperparameters."""
    jax = _jax()
    jnp, jsl = jax.numpy, jax.scipy.linalg
    log_amp, log_ls, log_noise = params
    n = x.shape[0]
    sq = ((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=-1)
    k = jnp.exp(2 * log_amp) * jnp.exp(-0.5 * sq / jnp.exp(2 * log_ls))
    chol = jsl.cholesky(k + (jnp.exp(2 * log_noise) + GP_JITTER) * jnp.eye(n), lower=True)
    alpha = jsl.cho_solve((chol, True), y)
    return 0.5 * (y * alpha).sum() + jnp.log(jnp.diag(chol)).sum() + 0.5 * n * jnp.log(2 * jnp.pi)


@impl("gp", "jax")
def jax_gp(s: Sizes, d: Inputs) -> Case:
    jax = _jax()

    @jax.jit
    def step(st: dict[str, Any], x: Any, y: Any, lr: float) -> tuple[dict[str, Any], Any]:
        nll, grads = jax.value_and_grad(jax_gp_nll)(st["params"], x, y)
        params, mu, nu, count = jax_adam(st["params"], grads, st["mu"], st["nu"], st["count"], lr)
        return {"params": params, "mu": mu, "nu": nu, "count": count}, nll
    return _jax_adam_case(step, s, d, d["x"], d["y"])


@impl("dispatch", "jax")
def jax_dispatch(s: Sizes, d: Inputs) -> Case:
    return _jax_case(lambda v: v + 1, d["v"])


@impl("conv2d", "jax")
def jax_conv2d(s: Sizes, d: Inputs) -> Case:
    jax = _jax()
    return _jax_case(lambda x, w: jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)),
                                                               dimension_numbers=("NCHW", "OIHW", "NCHW")),
                     d["x"], d["w"])


def jax_cnn_loss(params: list[Any], x: Any, y: Any) -> Any:
    jax = _jax()
    w1, b1, w2, b2, w3, b3 = params

    def conv(h: Any, w: Any, b: Any) -> Any:
        return jax.lax.conv_general_dilated(h, w, (1, 1), ((1, 1), (1, 1))) + b[None, :, None, None]
    h = jax.nn.relu(conv(jax.nn.relu(conv(x, w1, b1)), w2, b2))
    logits = h.mean(axis=(2, 3)) @ w3 + b3
    return -(jax.nn.log_softmax(logits, axis=1) * y).sum(axis=1).mean()


def jax_mnist_loss(params: list[Any], x: Any, y: Any) -> Any:
    """mnist_classifier_fromscratch's `predict` and `loss`, as the example writes them."""
    jax = _jax()
    jnp = jax.numpy
    h = x
    for i in range(0, len(params) - 2, 2):
        h = jnp.tanh(jnp.dot(h, params[i]) + params[i + 1])
    logits = jnp.dot(h, params[-2]) + params[-1]
    preds = logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)
    return -jnp.mean(jnp.sum(preds * y, axis=1))


@impl("cnn_step", "jax")
def jax_cnn_step(s: Sizes, d: Inputs) -> Case:
    jax = _jax()

    @jax.jit
    def step(params: list[Any], x: Any, y: Any) -> tuple[list[Any], Any]:
        loss, grads = jax.value_and_grad(jax_cnn_loss)(params, x, y)
        return [p - s.lr * g for p, g in zip(params, grads, strict=True)], loss

    x, y = _jax_put(d["x"]), _jax_put(d["y"])

    def advance(st: tuple[list[Any], Any]) -> tuple[list[Any], Any]:
        return jax.block_until_ready(step(st[0], x, y))
    return stateful(advance, ([_jax_put(p) for p in d["params"]], None),
                    lambda st: [*(np.asarray(p) for p in st[0]), np.asarray(st[1])])


@impl("mnist_step", "jax")
def jax_mnist_step(s: Sizes, d: Inputs) -> Case:
    jax = _jax()

    @jax.jit
    def update(params: list[Any], x: Any, y: Any) -> list[Any]:
        grads = jax.grad(jax_mnist_loss)(params, x, y)
        return [p - MNIST_LR * g for p, g in zip(params, grads, strict=True)]

    x, y = _jax_put(d["x"]), _jax_put(d["y"])
    return stateful(lambda params: jax.block_until_ready(update(params, x, y)), [_jax_put(p) for p in d["params"]],
                    lambda params: [np.asarray(p) for p in params])


# ---------------------------------------------------------------------------------------------------------------
# torch (eager)
# ---------------------------------------------------------------------------------------------------------------


def _torch_put(a: np.ndarray) -> Any:
    import torch
    return torch.from_numpy(a.copy()).to("cuda" if _gpu() else "cpu")


def _torch_sync() -> None:
    """A GPU call returns before its kernels ran: wait, as the other frameworks' calls do."""
    if _gpu():
        import torch
        torch.cuda.synchronize()


def _torch_case(fn: Callable, *args: np.ndarray) -> Case:
    import torch
    xs = [_torch_put(a) for a in args]
    box: list[Any] = []

    def call() -> Any:
        with torch.no_grad():
            box[:] = [fn(*xs)]
        _torch_sync()
        return box[0]
    return Case(call, lambda: [box[0].cpu().numpy()])


@impl("matmul", "torch")
def torch_matmul(s: Sizes, d: Inputs) -> Case:
    return _torch_case(lambda a, b: a @ b, d["a"], d["b"])


@impl("gelu", "torch")
def torch_gelu(s: Sizes, d: Inputs) -> Case:
    import torch.nn.functional as F
    return _torch_case(lambda x: F.gelu(x * 1.5 + 0.5, approximate="tanh"), d["x"])


@impl("bf16_attention", "torch")
def torch_attention(s: Sizes, d: Inputs) -> Case:
    import torch

    def attention(q: Any, k: Any, v: Any) -> Any:
        q, k, v = (a.to(torch.bfloat16) for a in (q, k, v))
        p = torch.softmax(q @ k.transpose(-1, -2) * (1 / math.sqrt(q.shape[-1])), dim=-1)
        return (p @ v).float()
    return _torch_case(attention, d["q"], d["k"], d["v"])


@impl("softmax", "torch")
def torch_softmax(s: Sizes, d: Inputs) -> Case:
    import torch
    return _torch_case(lambda x: torch.softmax(x, dim=1), d["x"])


@impl("mlp", "torch")
def torch_mlp(s: Sizes, d: Inputs) -> Case:
    import torch
    params = [_torch_put(p).requires_grad_() for p in d["params"]]
    x, y = _torch_put(d["x"]), _torch_put(d["y"])

    def step(loss: Any) -> Any:
        h = x
        for i in range(0, len(params) - 2, 2):
            h = torch.relu(h @ params[i] + params[i + 1])
        logits = h @ params[-2] + params[-1]
        loss = -(torch.log_softmax(logits, dim=1) * y).sum(dim=1).mean()
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= s.lr * p.grad
                p.grad = None
        _torch_sync()
        return loss.detach()
    return stateful(step, None, lambda loss: [*(p.detach().cpu().numpy().copy() for p in params),
                                              loss.cpu().numpy()])


@impl("dispatch", "torch")
def torch_dispatch(s: Sizes, d: Inputs) -> Case:
    return _torch_case(lambda v: v + 1, d["v"])


@impl("conv2d", "torch")
def torch_conv2d(s: Sizes, d: Inputs) -> Case:
    import torch.nn.functional as F
    return _torch_case(lambda x, w: F.conv2d(x, w, padding=1), d["x"], d["w"])


def _torch_sgd(params: list[Any], loss_fn: Callable[[], Any], lr: float) -> Any:
    import torch
    loss = loss_fn()
    loss.backward()
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None
    return loss.detach()


@impl("cnn_step", "torch")
def torch_cnn_step(s: Sizes, d: Inputs) -> Case:
    import torch
    import torch.nn.functional as F
    params = [torch.from_numpy(p.copy()).requires_grad_() for p in d["params"]]
    x, y = torch.from_numpy(d["x"].copy()), torch.from_numpy(d["y"].copy())

    def loss() -> Any:
        w1, b1, w2, b2, w3, b3 = params
        h = torch.relu(F.conv2d(torch.relu(F.conv2d(x, w1, b1, padding=1)), w2, b2, padding=1))
        logits = h.mean(dim=(2, 3)) @ w3 + b3
        return -(torch.log_softmax(logits, dim=1) * y).sum(dim=1).mean()
    return stateful(lambda _: _torch_sgd(params, loss, s.lr), None,
                    lambda loss: [*(p.detach().numpy().copy() for p in params), loss.numpy()])


@impl("mnist_step", "torch")
def torch_mnist_step(s: Sizes, d: Inputs) -> Case:
    import torch
    params = [torch.from_numpy(p.copy()).requires_grad_() for p in d["params"]]
    x, y = torch.from_numpy(d["x"].copy()), torch.from_numpy(d["y"].copy())

    def loss() -> Any:
        h = x
        for i in range(0, len(params) - 2, 2):
            h = torch.tanh(h @ params[i] + params[i + 1])
        logits = h @ params[-2] + params[-1]
        return -(torch.log_softmax(logits, dim=1) * y).sum(dim=1).mean()
    return stateful(lambda _: _torch_sgd(params, loss, MNIST_LR), None,
                    lambda _: [p.detach().numpy().copy() for p in params])


# ---------------------------------------------------------------------------------------------------------------
# tinygrad (TinyJit)
# ---------------------------------------------------------------------------------------------------------------


def _tinygrad() -> tuple[Any, Any, str]:
    # tinygrad's default device may be an accelerator, and constants go to the default device: make it the CPU.
    dev = os.environ.get("BENCH_TINYGRAD_DEVICE", "CPU")
    os.environ.setdefault("DEV", dev)  # tinygrad >= 0.11 reads DEV when it first picks its default
    from tinygrad import Device, Tensor, TinyJit
    with contextlib.suppress(Exception):  # older tinygrad: the default is an attribute (newer ones raise here)
        Device.DEFAULT = dev
    Device[dev]  # opening it fails here, with tinygrad's own message, when the device cannot run (e.g. no compiler)
    return Tensor, TinyJit, dev


def _tiny_sync(dev: str) -> None:
    from tinygrad import Device
    Device[dev].synchronize()


def _tiny_case(fn: Callable, *args: np.ndarray) -> Case:
    Tensor, TinyJit, dev = _tinygrad()
    f = TinyJit(lambda *xs: fn(*xs).realize())
    xs = [Tensor(a.copy(), device=dev).realize() for a in args]
    box: list[Any] = []

    def call() -> Any:
        box[:] = [f(*xs)]
        _tiny_sync(dev)
        return box[0]
    return Case(call, lambda: [box[0].numpy()])


@impl("matmul", "tinygrad")
def tinygrad_matmul(s: Sizes, d: Inputs) -> Case:
    return _tiny_case(lambda a, b: a @ b, d["a"], d["b"])


@impl("gelu", "tinygrad")
def tinygrad_gelu(s: Sizes, d: Inputs) -> Case:
    def gelu(x: Any) -> Any:
        y = x * 1.5 + 0.5
        return 0.5 * y * (1 + (GELU_C * (y + 0.044715 * y * y * y)).tanh())
    return _tiny_case(gelu, d["x"])


@impl("softmax", "tinygrad")
def tinygrad_softmax(s: Sizes, d: Inputs) -> Case:
    return _tiny_case(lambda x: x.softmax(axis=1), d["x"])


@impl("mlp", "tinygrad")
def tinygrad_mlp(s: Sizes, d: Inputs) -> Case:
    Tensor, TinyJit, dev = _tinygrad()
    params = [Tensor(p.copy(), device=dev).realize() for p in d["params"]]
    x, y = Tensor(d["x"].copy(), device=dev).realize(), Tensor(d["y"].copy(), device=dev).realize()

    def gradients(loss: Any) -> list[Any]:
        if hasattr(loss, "gradient"):  # tinygrad >= 0.10
            return list(loss.gradient(*params))
        for p in params:
            p.requires_grad, p.grad = True, None
        loss.backward()
        return [p.grad for p in params]

    @TinyJit
    def step(x: Any, y: Any) -> Any:
        h = x
        for i in range(0, len(params) - 2, 2):
            h = (h @ params[i] + params[i + 1]).relu()
        logits = h @ params[-2] + params[-1]
        loss = -(logits.log_softmax(axis=1) * y).sum(axis=1).mean()
        for p, g in zip(params, gradients(loss), strict=True):
            p.assign(p.detach() - s.lr * g)
        Tensor.realize(loss, *params)
        return loss

    def advance(loss: Any) -> Any:
        loss = step(x, y)
        _tiny_sync(dev)
        return loss
    return stateful(advance, None, lambda loss: [*(p.numpy() for p in params), loss.numpy()])


@impl("dispatch", "tinygrad")
def tinygrad_dispatch(s: Sizes, d: Inputs) -> Case:
    return _tiny_case(lambda v: v + 1, d["v"])


@impl("conv2d", "tinygrad")
def tinygrad_conv2d(s: Sizes, d: Inputs) -> Case:
    return _tiny_case(lambda x, w: x.conv2d(w, padding=1), d["x"], d["w"])


def unusable(framework: str) -> str | None:
    """None when the installed peer can run here, else why not (the runner skips it and says so)."""
    try:
        if framework == "jax":
            _jax().devices("gpu" if _gpu() else "cpu")
        elif framework == "torch":
            import torch
            if _gpu() and not torch.cuda.is_available():
                return "this torch build has no CUDA, or it sees no GPU"
            # float32 products in float32, as tgfx and numpy compute them (cuDNN's convolutions default to TF32)
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        elif framework == "tinygrad":
            _tinygrad()
    except Exception as e:
        lines = str(e).strip().splitlines()
        return f"{type(e).__name__}: {lines[-1] if lines else ''}"[:120]
    return None
