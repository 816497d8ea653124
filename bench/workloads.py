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


FULL = Sizes(matmul=1024, gelu=16 * 2**20, softmax=(4096, 1024), mlp=(784, 512, 512, 10), batch=128, lr=0.01,
             dispatch=16, conv=(16, 64, 64, 32, 32))
QUICK = Sizes(matmul=128, gelu=2**16, softmax=(256, 128), mlp=(16, 8, 8, 4), batch=8, lr=0.01,
              dispatch=16, conv=(2, 8, 8, 8, 8), allreduce=4096)


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
]
WORKLOADS_BY_NAME = {w.name: w for w in WORKLOADS}
GELU_C = math.sqrt(2 / math.pi)

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


def tg_conv2d(x: Any, w: Any) -> Any:
    """3×3 convolution, stride 1, padding 1: im2col with `tnp.pad`, slices and `tnp.stack`, then one matmul.

    The column matrix is materialised with `.contiguous()`, as numpy's im2col is: fused into the matmul, its padded,
    stacked loads make that kernel tens of times slower (see bench/README.md).
    """
    import tgfx.numpy as tnp
    n, c, h, wd = x.shape
    xp = tnp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = tnp.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2)
    out = w.reshape(w.shape[0], c * 9) @ cols.reshape(n, c * 9, h * wd).contiguous()
    return out.reshape(n, w.shape[0], h, wd)


@impl("matmul", "tgfx")
def tgfx_matmul(s: Sizes, d: Inputs) -> Case:
    return _tg_case(lambda a, b: a @ b, d["a"], d["b"])


@impl("gelu", "tgfx")
def tgfx_gelu(s: Sizes, d: Inputs) -> Case:
    return _tg_case(tg_gelu, d["x"])


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
    """`psum` of one value per CPU device: a ring of copies and adds, replayed under jit."""
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


def reference(workload: str, s: Sizes, d: Inputs) -> list[np.ndarray]:
    """numpy's result of one call, what every framework's first call is checked against."""
    case = IMPLS[(workload, "numpy")](s, d)
    case.call()
    return case.read()
