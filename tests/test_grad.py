"""grad and friends: every op's rule against central differences, vjp/jvp transposition, second order, the API.

The op table is JAX's `check_grads` in miniature: for each function, in float64 and along random directions,
forward mode (jvp) must match central differences, reverse mode (vjp) must match them through an inner product, and
⟨vjp(u), t⟩ must equal ⟨u, jvp(t)⟩ to rounding. Inputs stay away from kinks (abs at 0, max ties, floor at
integers); ties and zeros get their own tests with exact values.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.inline import inline
from tgfx.transforms import grad as grad_module
from tgfx.transforms.grad import compute_gradient, pm_gradient


def T(x: Any, dtype: Any = None) -> tg.Tensor:
    """A Tensor of x (0-d arrays through a 1-element buffer: tg.asarray of 0-d comes back 1-d, reported)."""
    x = np.asarray(x)
    return tg.asarray(x.reshape(1), dtype=dtype).reshape(()) if x.ndim == 0 else tg.asarray(x, dtype=dtype)


def rand(*shape: int, lo: float = -2.0, hi: float = 2.0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def away(*shape: int, seed: int = 0) -> np.ndarray:
    """Values in ±[0.3, 2] at k + 0.3 .. k + 0.7 fractions: away from 0, from integers and from half-integers."""
    r = np.random.default_rng(seed)
    mag = r.integers(0, 2, shape) + r.uniform(0.3, 0.45, shape)
    return np.where(r.integers(0, 2, shape) == 1, mag, -mag)


def distinct(*shape: int, seed: int = 0) -> np.ndarray:
    """Values at least 0.1 apart: no ties for max/min/sort."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.37 - n * 0.15).reshape(shape)


def check_grads(f: Callable, *xs: np.ndarray, rtol: float = 1e-6, atol: float = 1e-7, seed: int = 1) -> None:
    """f's jvp and vjp against central differences along a random direction, and their transposition identity."""
    rng = np.random.default_rng(seed)
    ts = [rng.standard_normal(np.shape(x)) for x in xs]
    args = [T(x) for x in xs]
    out, pullback = tg.vjp(f, *args)
    u = rng.standard_normal(out.shape)
    cts = pullback(T(u))
    _, dy = tg.jvp(f, args, [T(t) for t in ts])
    tg.realize(out, *cts, dy)
    eps = 1e-6
    plus = f(*[T(x + eps * t) for x, t in zip(xs, ts, strict=True)]).numpy()
    minus = f(*[T(x - eps * t) for x, t in zip(xs, ts, strict=True)]).numpy()
    fd = (plus - minus) / (2 * eps)
    assert dy.shape == out.shape and dy.dtype == out.dtype
    np.testing.assert_allclose(dy.numpy(), fd, rtol=rtol * 10, atol=atol * 10, err_msg="jvp vs differences")
    for c, x in zip(cts, xs, strict=True):
        assert c.shape == np.shape(x) and c.dtype == dtypes.float64
    reverse = sum(float(np.vdot(c.numpy(), t)) for c, t in zip(cts, ts, strict=True))
    np.testing.assert_allclose(reverse, np.vdot(u, fd), rtol=rtol, atol=atol * max(1, fd.size),
                               err_msg="vjp vs differences")
    np.testing.assert_allclose(reverse, np.vdot(u, dy.numpy()), rtol=1e-9, atol=1e-12,
                               err_msg="<vjp(u), t> != <u, jvp(t)>")


def logsumexp(x: tg.Tensor, axis: int = -1) -> tg.Tensor:
    m = tnp.max(x, axis=axis, keepdims=True)
    return tnp.log(tnp.sum(tnp.exp(x - m), axis=axis, keepdims=True)) + m


def softmax(x: tg.Tensor, axis: int = -1) -> tg.Tensor:
    e = tnp.exp(x - tnp.max(x, axis=axis, keepdims=True))
    return e / tnp.sum(e, axis=axis, keepdims=True)


A23, B23, B3, B21 = rand(2, 3), rand(2, 3, seed=1), rand(3, seed=2), rand(2, 1, seed=3)
POS, UNIT = rand(2, 3, lo=0.5, hi=2.0), rand(2, 3, lo=-0.8, hi=0.8)

UNARY = {
    "neg": (tnp.negative, A23), "exp": (tnp.exp, A23), "exp2": (tnp.exp2, A23), "expm1": (tnp.expm1, A23),
    "log": (tnp.log, POS), "log2": (tnp.log2, POS), "log10": (tnp.log10, POS), "log1p": (tnp.log1p, UNIT),
    "sqrt": (tnp.sqrt, POS), "reciprocal": (tnp.reciprocal, POS), "sin": (tnp.sin, A23), "cos": (tnp.cos, A23),
    "tan": (tnp.tan, UNIT), "arcsin": (tnp.arcsin, UNIT), "arccos": (tnp.arccos, UNIT), "arctan": (tnp.arctan, A23),
    "sinh": (tnp.sinh, A23), "cosh": (tnp.cosh, A23), "tanh": (tnp.tanh, A23),
    "erf": (lambda x: x._unary(Ops.ERF), A23), "abs": (tnp.abs, away(2, 3)), "square": (tnp.square, A23),
    "cube": (lambda x: x ** 3, A23), "pow_half": (lambda x: x ** 0.5, POS),
    "sign": (lambda x: tnp.sign(x) * x, away(2, 3)),
    "floor": (lambda x: tnp.floor(x) * x, away(2, 3)), "ceil": (lambda x: tnp.ceil(x) * x, away(2, 3)),
    "trunc": (lambda x: tnp.trunc(x) * x, away(2, 3)), "rint": (lambda x: tnp.rint(x) * x, away(2, 3)),
    "relu": (lambda x: tnp.maximum(x, 0), away(2, 3)), "clip": (lambda x: tnp.clip(x, -1.0, 1.0), away(2, 3)),
    "sigmoid": (lambda x: 1 / (1 + tnp.exp(-x)), A23),
}

BINARY = {
    "add": (tnp.add, A23, B3), "subtract": (tnp.subtract, A23, B21), "multiply": (tnp.multiply, A23, B3),
    "divide": (tnp.divide, A23, POS), "maximum": (tnp.maximum, distinct(2, 3), distinct(2, 3, seed=1) + 0.05),
    "minimum": (tnp.minimum, distinct(2, 3), distinct(3, seed=1) + 0.05), "power": (tnp.power, POS, A23),
    "arctan2": (tnp.arctan2, A23, B23), "fmod": (tnp.fmod, away(2, 3) * 3, np.full((2, 3), 0.9)),
    "remainder": (tnp.remainder, away(2, 3) * 3, np.full((2, 3), 0.9)),
    "where": (lambda x, y: tnp.where(x > y, x * y, x + y), distinct(2, 3), distinct(2, 3, seed=1) + 0.05),
    "hypot": (lambda x, y: tnp.sqrt(x * x + y * y), POS, B23),
}

SHAPE = {
    "reshape": (lambda x: x.reshape(3, 2) * T(np.arange(6.0).reshape(3, 2)), A23),
    "transpose": (lambda x: x.T, A23), "broadcast_to": (lambda x: tnp.broadcast_to(x, (2, 3)) * T(A23), B3),
    "pad": (lambda x: tnp.pad(x, ((1, 0), (2, 1))), A23),
    "pad_reflect": (lambda x: tnp.pad(x, ((0, 1), (2, 1)), mode="reflect"), A23),
    "pad_value": (lambda x: tnp.pad(x, 1, constant_values=2.0), A23),
    "slice": (lambda x: x[1:, ::2], rand(3, 5)), "slice_neg_step": (lambda x: x[::-1, 3:0:-2], rand(3, 5)),
    "index": (lambda x: x[None, 1, :, None], A23), "flip": (lambda x: tnp.flip(x, 1), A23),
    "concatenate": (lambda x, y: tnp.concatenate([x, y * 2, x], axis=1), A23, B23),
    "stack": (lambda x, y: tnp.stack([x, y], axis=1), A23, B23),
    "split": (lambda x: sum(p * (i + 1) for i, p in enumerate(tnp.split(x, [1, 2], axis=1))), A23),
    "tile": (lambda x: tnp.tile(x, (2, 1)), A23), "repeat": (lambda x: tnp.repeat(x, 2, axis=1), A23),
    "roll": (lambda x: tnp.roll(x, 1, axis=1), A23), "swapaxes": (lambda x: tnp.swapaxes(x, 0, 1), A23),
    "expand_squeeze": (lambda x: tnp.squeeze(tnp.expand_dims(x, 1), 1) * x, A23),
    "moveaxis": (lambda x: tnp.moveaxis(x, 0, -1), rand(2, 3, 2)),
}

REDUCE = {
    "sum": (lambda x: tnp.sum(x, axis=1), A23), "sum_all": (tnp.sum, A23), "mean": (lambda x: x.mean(0), A23),
    "max": (lambda x: tnp.max(x, axis=1), distinct(2, 3)), "min": (lambda x: tnp.min(x, axis=0), distinct(2, 3)),
    "max_all": (tnp.max, distinct(2, 3)), "prod": (lambda x: tnp.prod(x, axis=1), A23),
    "prod_axes": (lambda x: tnp.prod(x, axis=(0, 2)), rand(2, 2, 2, lo=0.5, hi=1.5)),
    "var": (lambda x: tnp.var(x, axis=1), A23), "std": (lambda x: tnp.std(x, axis=0), A23),
    "cumsum": (lambda x: tnp.cumsum(x, axis=1), A23), "cumprod": (lambda x: tnp.cumprod(x, axis=1), A23),
    "logsumexp": (logsumexp, A23), "softmax": (softmax, A23),
    "log_softmax": (lambda x: x - logsumexp(x), A23),
}

LINALG = {
    "matmul": (tnp.matmul, A23, rand(3, 4, seed=5)), "matvec": (tnp.matmul, A23, B3),
    "batched": (tnp.matmul, rand(2, 2, 3), rand(3, 2, seed=5)), "dot": (tnp.dot, B3, rand(3, seed=6)),
    "outer": (tnp.outer, B3, rand(2, seed=6)),
    "einsum": (lambda x, y: tnp.einsum("ij,kj->ik", x, y), A23, B23),
    "einsum_trace": (lambda x: tnp.einsum("ii->", x), rand(3, 3)),
    "tensordot": (lambda x, y: tnp.tensordot(x, y, axes=([1], [0])), A23, rand(3, 2, seed=7)),
}

INDEXING = {
    "gather": (lambda x: x[T(np.array([2, 0, 2]))], rand(3, 4)),
    "gather_2d": (lambda x: x[T(np.array([1, 0])), T(np.array([3, 3]))], rand(3, 4)),
    "take_along_axis": (lambda x: tnp.take_along_axis(x, T(np.array([[0, 2], [1, 1]])), axis=1), A23),
    "at_set": (lambda x: x.at[T(np.array([1, 0]))].set(x[T(np.array([0, 1]))] * 3), A23),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", UNARY)
def test_unary(name: str) -> None:
    check_grads(*UNARY[name])


@pytest.mark.x64
@pytest.mark.parametrize("name", BINARY)
def test_binary(name: str) -> None:
    check_grads(*BINARY[name])


@pytest.mark.x64
@pytest.mark.parametrize("name", SHAPE)
def test_movement(name: str) -> None:
    check_grads(*SHAPE[name])


@pytest.mark.x64
@pytest.mark.parametrize("name", REDUCE)
def test_reduce(name: str) -> None:
    check_grads(*REDUCE[name])


@pytest.mark.x64
@pytest.mark.parametrize("name", LINALG)
def test_linalg(name: str) -> None:
    check_grads(*LINALG[name])


@pytest.mark.x64
@pytest.mark.parametrize("name", INDEXING)
def test_indexing(name: str) -> None:
    check_grads(*INDEXING[name])


@pytest.mark.x64
def test_sort() -> None:
    check_grads(lambda x: tnp.sort(x, axis=1) * T(np.arange(3.0)), distinct(2, 3))


@pytest.mark.x64
def test_at_add() -> None:
    check_grads(lambda x: x.at[T(np.array([1, 0, 1]))].add(x[T(np.array([0, 0, 1]))] * 2), A23)


# ---- values the differences can't check: ties, zeros, kinks ----
def test_max_ties_split_equally() -> None:
    x = T(np.array([3.0, 1.0, 3.0, 3.0]))
    np.testing.assert_allclose(tg.grad(tnp.max)(x).numpy(), [1 / 3, 0, 1 / 3, 1 / 3])
    np.testing.assert_allclose(tg.grad(lambda x: tnp.maximum(x, x).sum())(x).numpy(), [1, 1, 1, 1])
    np.testing.assert_allclose(tg.grad(lambda x: tnp.maximum(x, 3.0).sum())(x).numpy(), [0.5, 0, 0.5, 0.5])
    np.testing.assert_allclose(tg.grad(tnp.min)(T(np.array([-1.0, 2.0, -1.0]))).numpy(), [0.5, 0, 0.5])


def test_abs_at_zero_and_relu_kink() -> None:
    x = T(np.array([-2.0, 0.0, 2.0]))
    np.testing.assert_allclose(tg.grad(lambda x: tnp.abs(x).sum())(x).numpy(), [-1, 1, 1])  # JAX: sign, 1 at 0
    np.testing.assert_allclose(tg.grad(lambda x: tnp.maximum(x, 0.0).sum())(x).numpy(), [0, 0.5, 1])


@pytest.mark.parametrize("exact_max", [128, 1], ids=["masked", "divide"])
def test_prod_with_zeros(monkeypatch: pytest.MonkeyPatch, exact_max: int) -> None:
    monkeypatch.setattr(grad_module, "PROD_EXACT_MAX", exact_max)
    g = tg.grad(lambda x: tnp.prod(x, axis=1).sum())
    x = np.array([[2.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    np.testing.assert_allclose(g(T(x)).numpy(), [[0, 24, 0, 0], [0, 0, 0, 0], [24, 12, 8, 6]])


def test_prod_second_order_at_zero_is_exact() -> None:
    x = np.array([2.0, 0.0, 3.0])
    want = np.array([[0, 3, 0], [3, 0, 2], [0, 2, 0]])  # d2/dxi dxj prod = prod of the others
    np.testing.assert_allclose(tg.hessian(tnp.prod)(T(x)).numpy(), want)


def test_pow_at_zero_like_jax() -> None:
    g = tg.grad(lambda x, y: (x ** y).sum(), argnums=(0, 1))
    gx, gy = g(T(np.array([0.0, 2.0])), T(np.array([0.0, 2.0])))
    np.testing.assert_allclose(gx.numpy(), [0, 4])
    np.testing.assert_allclose(gy.numpy(), [0, 4 * np.log(2)])


@pytest.mark.x64
def test_cast_passes_gradient_back_in_source_dtype() -> None:
    x = np.array([1.5, -2.0, 3.0])
    g = tg.grad(lambda x: (x.astype(tnp.float32) ** 2).sum())(T(x))
    assert g.dtype == dtypes.float64
    np.testing.assert_allclose(g.numpy(), 2 * x)
    g = tg.grad(lambda x: (x.astype(tnp.int32).astype(tnp.float64) * x).sum())(T(x))  # no gradient through ints
    np.testing.assert_allclose(g.numpy(), x.astype(np.int32))


def test_copy_sends_gradient_back_to_source_device() -> None:
    x = T(np.array([0.5, -1.0]))
    g = tg.grad(lambda x: (x.to("CPU:1") * x.to("CPU:1")).sum())(x)
    assert g.device == x.device   # CPU:0, or the default device that TGFX_DEVICE names
    with tg.Context(SPEC=0):  # the scheduler builds COPY calls that SPEC=1 rejects (reported)
        np.testing.assert_allclose(g.numpy(), [1.0, -2.0])


# ---- second order ----
HESSIAN_CASES = {
    "sin_x2": (lambda x: (tnp.sin(x) * x * x).sum(), rand(3)),
    "logsumexp": (lambda x: logsumexp(x).sum(), rand(4)),
    "quadratic": (lambda x: x @ T(rand(3, 3, seed=3)) @ x, rand(3)),
    "softmax_ce": (lambda x: -(softmax(x) * T(np.array([0.0, 1.0, 0.0]))).sum(), rand(3)),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", HESSIAN_CASES)
def test_hessian_against_differences_of_grad(name: str) -> None:
    f, x = HESSIAN_CASES[name]
    h = tg.hessian(f)(T(x)).numpy()
    eps, g = 1e-5, tg.grad(f)
    fd = np.stack([(g(T(x + eps * e)).numpy() - g(T(x - eps * e)).numpy()) / (2 * eps) for e in np.eye(len(x))])
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(h, h.T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tg.jacrev(tg.jacrev(f))(T(x)).numpy(), h, rtol=1e-9, atol=1e-12)


def test_grad_of_grad() -> None:
    x = T(np.array(0.7))
    np.testing.assert_allclose(tg.grad(tg.grad(tnp.sin))(x).numpy(), -np.sin(0.7))
    np.testing.assert_allclose(tg.grad(tg.grad(tg.grad(lambda x: x ** 4)))(x).numpy(), 24 * 0.7)
    np.testing.assert_allclose(tg.grad(tg.grad(tnp.tanh))(x).numpy(), -2 * np.tanh(0.7) * (1 - np.tanh(0.7) ** 2))


@pytest.mark.x64
def test_jacobians_shapes_and_values() -> None:
    w = rand(2, 3)
    f = lambda x: tnp.tanh(T(w) @ x)  # noqa: E731
    x = rand(3, seed=1)
    want = (1 - np.tanh(w @ x) ** 2)[:, None] * w
    for jac in (tg.jacrev, tg.jacfwd):
        j = jac(f)(T(x))
        assert j.shape == (2, 3)
        np.testing.assert_allclose(j.numpy(), want, rtol=1e-12)
    jd = tg.jacrev(lambda p: {"y": p["a"] * 2, "z": p["a"].sum()})({"a": T(x)})
    assert jd["y"]["a"].shape == (3, 3) and jd["z"]["a"].shape == (3,)
    np.testing.assert_allclose(jd["y"]["a"].numpy(), 2 * np.eye(3))


def test_jacobians_of_zero_size_inputs_and_outputs() -> None:
    # jacfwd folded its columns with reshape(n, -1), which cannot infer a size from no elements; jacrev's empty
    # batch of pullbacks still read the cotangent's stand-in, an escaped tracer when the Jacobian was read
    empty = tnp.zeros((2, 0))
    for jac in (tg.jacrev, tg.jacfwd):
        j = jac(lambda x: tnp.sum(x) + tnp.arange(2.0))(empty)
        assert j.shape == (2, 2, 0)
        j = jac(lambda x: x[:0] * 2.0)(T(rand(3)))
        assert j.shape == (0, 3) and j.numpy().shape == (0, 3)   # (jacrev's read its cotangent's stand-in)
        j = jac(lambda x: x * 2.0)(empty)
        assert j.shape == (2, 0, 2, 0) and j.numpy().shape == (2, 0, 2, 0)
        j = jac(lambda x: (x * 2.0, tnp.sum(x ** 2)))(T(np.array([1.0, 2.0])))
        assert j[0].numpy().tolist() == [[2.0, 0.0], [0.0, 2.0]] and j[1].numpy().tolist() == [2.0, 4.0]


# ---- an MLP against a hand-written numpy backward ----
def mlp_data(layers: tuple[int, ...], batch: int = 4, seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed)
    pairs = enumerate(zip(layers, layers[1:], strict=False))
    params = {f"w{i}": r.standard_normal((a, b)) / np.sqrt(a) for i, (a, b) in pairs}
    params |= {f"b{i}": r.standard_normal(b) * 0.1 for i, b in enumerate(layers[1:])}
    x = r.standard_normal((batch, layers[0]))
    y = np.eye(layers[-1])[r.integers(0, layers[-1], batch)]
    return params, x, y


def mlp_loss(p: dict, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    n = len([k for k in p if k.startswith("w")])
    h = x
    for i in range(n):
        h = h @ p[f"w{i}"] + p[f"b{i}"]
        h = tnp.maximum(h, 0) if i < n - 1 else h
    return -tnp.mean(tnp.sum(y * (h - logsumexp(h, axis=1)), axis=1))


def numpy_mlp_grad(p: dict, x: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    n = len([k for k in p if k.startswith("w")])
    acts, pre, h = [x], [], x
    for i in range(n):
        z = h @ p[f"w{i}"] + p[f"b{i}"]
        pre.append(z)
        h = np.maximum(z, 0) if i < n - 1 else z
        acts.append(h)
    z = h - h.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    loss = -(y * logp).sum(1).mean()
    dz = (np.exp(logp) - y) / len(x)
    grads = {}
    for i in reversed(range(n)):
        grads[f"w{i}"], grads[f"b{i}"] = acts[i].T @ dz, dz.sum(0)
        dz = (dz @ p[f"w{i}"].T) * (pre[i - 1] > 0) if i else None
    return loss, grads


@pytest.mark.x64
def test_mlp_matches_numpy_backward() -> None:
    p, x, y = mlp_data((5, 6, 4, 3))
    value, g = tg.value_and_grad(mlp_loss)({k: T(v) for k, v in p.items()}, T(x), T(y))
    want_loss, want = numpy_mlp_grad(p, x, y)
    tg.realize(value, *g.values())
    np.testing.assert_allclose(value.numpy(), want_loss, rtol=1e-12)
    assert sorted(g) == sorted(want)
    for k in want:
        np.testing.assert_allclose(g[k].numpy(), want[k], rtol=1e-10, atol=1e-12, err_msg=k)


def test_mlp_backward_reuses_forward_kernels() -> None:
    p, x, y = mlp_data((5, 7, 3), batch=8)
    args = ({k: T(v.astype(np.float32)) for k, v in p.items()}, T(x.astype(np.float32)), T(y.astype(np.float32)))
    tg.counters.reset()
    mlp_loss(*args).realize()
    forward = tg.counters.kernel_count
    value, g = tg.value_and_grad(mlp_loss)(*args)
    tg.counters.reset()
    tg.realize(value, *g.values())
    # 5 forward kernels (2 matmuls, max, sum of exp, loss), then one kernel per parameter gradient, one for the
    # gradient through the hidden layer, and three small (batch,) reduces of the softmax backward: 13 in all, none
    # of them a forward matmul again
    assert forward == 5
    assert tg.counters.kernel_count <= 13
    jitted = tg.jit(tg.value_and_grad(mlp_loss))
    v2, g2 = jitted(*args)
    np.testing.assert_allclose(v2.numpy(), value.numpy(), rtol=1e-6)
    for k in g:
        np.testing.assert_allclose(g2[k].numpy(), g[k].numpy(), rtol=1e-5, atol=1e-6)


# ---- the API: pytrees, argnums, aux, decorators, methods ----
def test_pytree_params_and_argnums() -> None:
    params = {"w": T(rand(3)), "b": (T(np.array(0.5)), [T(rand(2, seed=2))])}
    f = lambda p, s: (p["w"] * s).sum() * p["b"][0] + (p["b"][1][0] ** 2).sum()  # noqa: E731
    g = tg.grad(f)(params, 2.0)
    assert tg.tree.tree_structure(g) == tg.tree.tree_structure(params)
    np.testing.assert_allclose(g["w"].numpy(), 2.0 * 0.5 * np.ones(3))
    np.testing.assert_allclose(g["b"][0].numpy(), 2.0 * rand(3).sum())
    np.testing.assert_allclose(g["b"][1][0].numpy(), 2 * rand(2, seed=2))
    gp, gs = tg.grad(f, argnums=(0, 1))(params, T(np.array(2.0)))
    np.testing.assert_allclose(gs.numpy(), rand(3).sum() * 0.5)
    assert tg.grad(f, argnums=1)(params, 2.0).shape == ()


@pytest.mark.x64
def test_has_aux_and_value_and_grad() -> None:
    def f(x: tg.Tensor) -> tuple[tg.Tensor, dict]:
        y = tnp.sin(x)
        return (y * y).sum(), {"y": y, "n": 3}
    x = rand(3)
    g, aux = tg.grad(f, has_aux=True)(T(x))
    np.testing.assert_allclose(g.numpy(), 2 * np.sin(x) * np.cos(x))
    np.testing.assert_allclose(aux["y"].numpy(), np.sin(x))
    assert aux["n"] == 3
    (v, aux), g2 = tg.value_and_grad(f, has_aux=True)(T(x))
    np.testing.assert_allclose(v.numpy(), (np.sin(x) ** 2).sum())
    y, pullback, aux = tg.vjp(f, T(x), has_aux=True)
    np.testing.assert_allclose(pullback(1.0)[0].numpy(), g.numpy())


def test_decorator_forms_and_methods() -> None:
    @tg.grad
    def a(x: tg.Tensor) -> tg.Tensor:
        return (x * x).sum()

    @tg.grad(argnums=1)
    def b(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        return (x * y).sum()

    class Model(NamedTuple):
        scale: float

        @tg.grad
        def loss_grad(self, w: tg.Tensor) -> tg.Tensor:
            return (w * w).sum() * self.scale

        @tg.value_and_grad(argnums=(0, 1))
        def both(self, w: tg.Tensor, v: tg.Tensor) -> tg.Tensor:
            return (w * v).sum() * self.scale

    x = T(np.array([1.0, 2.0]))
    np.testing.assert_allclose(a(x).numpy(), [2, 4])
    np.testing.assert_allclose(b(x, x * 3).numpy(), [1, 2])
    assert a.__name__ == "a"
    m = Model(3.0)
    np.testing.assert_allclose(m.loss_grad(x).numpy(), [6, 12])
    value, (gw, gv) = m.both(x, x)
    np.testing.assert_allclose(gw.numpy(), [3, 6])


def test_vjp_and_jvp_over_pytrees() -> None:
    def f(p: dict, s: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
        return p["a"] * s, (p["a"] ** 2).sum()
    a, s = rand(3), np.array(1.5)
    out, pullback = tg.vjp(f, {"a": T(a)}, T(s))
    ga, gs = pullback((T(np.ones(3)), T(np.array(2.0))))
    np.testing.assert_allclose(ga["a"].numpy(), s + 4 * a)
    np.testing.assert_allclose(gs.numpy(), a.sum())
    (y, z), (dy, dz) = tg.jvp(f, ({"a": T(a)}, T(s)), ({"a": T(np.ones(3))}, T(np.array(0.0))))
    np.testing.assert_allclose(dy.numpy(), np.full(3, s))
    np.testing.assert_allclose(dz.numpy(), 2 * a.sum())


def test_same_tensor_twice_and_closures_are_told_apart() -> None:
    x = T(np.array([1.0, 2.0]))
    gx, gy = tg.grad(lambda a, b: (a * b * x).sum(), argnums=(0, 1))(x, x)  # x in the closure is a constant
    np.testing.assert_allclose(gx.numpy(), [1, 4])
    np.testing.assert_allclose(gy.numpy(), [1, 4])
    assert tg.grad(lambda a: (x * 2).sum())(x).numpy().tolist() == [0, 0]  # output independent of the input


def test_stop_gradient() -> None:
    x = T(np.array([1.0, 2.0]))
    f = lambda x: (x * tg.stop_gradient(x)).sum()  # noqa: E731
    np.testing.assert_allclose(tg.grad(f)(x).numpy(), [1, 2])
    np.testing.assert_allclose(tg.grad(lambda x: tg.grad(f)(x).sum())(x).numpy(), [0, 0])  # at every order
    assert tg.stop_gradient(x) is x  # outside a differentiation it is the identity
    tree = tg.stop_gradient({"a": x, "n": 1})
    assert tree["n"] == 1


def test_python_control_flow_on_traced_values() -> None:
    def f(x: tg.Tensor) -> tg.Tensor:
        return (x * x).sum() if x.sum() > 0 else -(x.sum())
    np.testing.assert_allclose(tg.grad(f)(T(np.array([1.0, 2.0]))).numpy(), [2, 4])
    np.testing.assert_allclose(tg.grad(f)(T(np.array([-1.0, -2.0]))).numpy(), [-1, -1])


def test_reading_a_value_inside_grad_keeps_its_gradient() -> None:
    def f(x: tg.Tensor) -> tg.Tensor:
        y = x * 2
        y.numpy()  # e.g. print(y)
        return (y * y).sum()
    np.testing.assert_allclose(tg.grad(f)(T(np.array([1.0, 2.0]))).numpy(), [8, 16])


def test_results_hold_no_placeholders() -> None:
    x = T(rand(3))
    y, g = tg.value_and_grad(lambda x: tnp.sin(x).sum())(x)
    for u in (y.uop, g.uop):
        assert not any(n.tag is not None for n in u.toposort()), "differentiation markers leaked into a result"
    assert y.uop is tnp.sin(x).sum().uop  # the forward graph is the undifferentiated one, so its kernels are shared


# ---- errors, as JAX gives them ----
def test_errors() -> None:
    x = T(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match=r"scalar-output functions. Output had shape: \(3,\)"):
        tg.grad(tnp.sin)(x)
    with pytest.raises(TypeError, match="argument 0 has dtype int32"):
        tg.grad(lambda x: x.sum())(T(np.array([1, 2], np.int32)))
    with pytest.raises(TypeError, match=r"argument 1\['a'\] has dtype bool"):
        tg.grad(lambda x, p: x.sum(), argnums=1)(x, {"a": T(np.array([True]))})
    with pytest.raises(TypeError, match="real-valued .* outputs.*int32"):
        tg.grad(lambda x: x.astype(tnp.int32).sum())(x)
    with pytest.raises(TypeError, match=r"argnums=\(0, 2\) requires at least 3 positional arguments.*got only 2"):
        tg.grad(lambda a, b: a.sum(), argnums=(0, 2))(x, x)
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
        tg.grad(tnp.sum, argnums="0")
    with pytest.raises(TypeError, match="has_aux=True expects the function to return a pair"):
        tg.grad(lambda x: x.sum(), has_aux=True)(x)
    with pytest.raises(TypeError, match="Output was a PyTreeDef"):
        tg.grad(lambda x: (x.sum(), x.sum()))(x)
    with pytest.raises(TypeError, match="not an array"):
        tg.grad(lambda s: 1.0)("hello")
    _, pullback = tg.vjp(tnp.sin, x)
    with pytest.raises(ValueError, match=r"should have shape \(3,\)"):
        pullback(T(np.ones(2)))
    with pytest.raises(TypeError, match="must be tuples or lists"):
        tg.jvp(tnp.sin, x, x)


# ---- the rule table, on the graph alone ----
def test_every_front_end_op_has_a_gradient_rule() -> None:
    front_end = GroupOp.ALU | GroupOp.Movement | GroupOp.Defines | {Ops.CAST, Ops.BITCAST, Ops.REDUCE_AXIS,
                                                                      Ops.CONTIGUOUS, Ops.COPY, Ops.TUPLE,
                                                                      Ops.GETTUPLE, Ops.BIND}
    missing = sorted(op.name for op in front_end if op not in pm_gradient.by_op)
    assert not missing, f"no gradient rule for {missing}"


def test_compute_gradient_sums_paths_and_leaves_unused_paths_empty() -> None:
    x = UOp(Ops.BUFFER, dtypes.float32, (), (10**9, "CPU:0", 3))
    y = UOp(Ops.BUFFER, dtypes.float32, (), (10**9 + 1, "CPU:0", 3))
    one = grad_module._full(x, 1.0)
    g = compute_gradient(x * y + x, one, [x, y])
    assert g[x] in (one + one * y, one * y + one) and g[y] is one * x
    assert compute_gradient(y * y, one, [x]) == {}  # no path: the symbolic zero, nothing built
    stopped = UOp(Ops.CONTIGUOUS, x.dtype, (x,), tag=grad_module.STOP)
    assert compute_gradient(stopped * y, one, [x]) == {}
    assert compute_gradient(x.cast(dtypes.int32).cast(dtypes.float32), one, [x]) == {}


def test_leave_trace_binds_a_placeholder_whose_input_it_rewrites() -> None:
    # a pullback built inside a custom rule (checkpoint's, run while an outer grad walks its graph, after that grad's
    # trace ended) leaves with its stop_gradient marks stripped; its placeholder's input holding one (the layer
    # before's forward) was rebuilt before its rule looked it up by node, so it stayed in the result: a value bound
    # to the trace's input, which jit then took for a closed-over input and an escaped tracer
    x = UOp(Ops.BUFFER, dtypes.float32, (), (10**9, "CPU:0", 3))
    marked = UOp(Ops.CONTIGUOUS, x.dtype, (x,), tag=grad_module.STOP)
    y = x * marked
    ph = grad_module._placeholder(y)
    tr = grad_module.Traced("t", (0,), [y], [ph], [tg.tree.tree_structure(0)], [ph * ph], tg.tree.tree_structure(0))
    assert grad_module.leave_trace(tr, [ph * ph]) == [(x * x) * (x * x)]


def test_jacobians_do_not_grow_with_their_size():
    # the basis is a batch axis (vmap's pass), not one graph per row: a 4x4 and a 64x64 Jacobian run as many kernels
    def counts(n):
        x = tg.asarray(np.linspace(0.1, 1.0, n).astype(np.float32))
        out = []
        for jac in (tg.jacrev, tg.jacfwd):
            tg.counters.reset()
            j = jac(lambda v: tnp.sin(v) * v.sum())(x).numpy()
            v = np.linspace(0.1, 1.0, n).astype(np.float32)
            want = np.diag(np.cos(v) * v.sum()) + np.sin(v)[:, None]
            np.testing.assert_allclose(j, want, rtol=1e-5, atol=1e-5)
            out.append(tg.counters.kernel_count)
        return out
    assert counts(4) == counts(64)


def test_bit_trick_ops_differentiate_and_leave_arguments_built_with_them_alone() -> None:
    """abs and copysign are bit operations in the front end; the gradient walk rewrites them into selects first.
    That rewrite must not touch what an argument is made of: grad(f)(|v|), whose argument is a lazy |v|, gave zeros
    (the argument's node was rewritten into a new one that no path reached). copysign by a Python scalar (its sign
    bits broadcast from a scalar) had no rule and gave zeros too."""
    v = np.array([0.2, -0.5, 1.4], np.float32)
    lazy = tnp.abs(tg.asarray(v))
    np.testing.assert_allclose(tg.grad(lambda t: (t ** 2).sum())(lazy + 0.1).numpy(), 2 * (np.abs(v) + 0.1))
    np.testing.assert_allclose(tg.grad(lambda t: tnp.exp(t).sum())(lazy).numpy(), np.exp(np.abs(v)), rtol=1e-6)
    np.testing.assert_allclose(tg.vjp(lambda t: tnp.abs(t) * t, lazy)[1](tnp.ones(3))[0].numpy(), 2 * np.abs(v))
    np.testing.assert_allclose(tg.grad(lambda t: tnp.abs(t).sum())(v).numpy(), np.sign(v))
    np.testing.assert_array_equal(tg.grad(lambda t: tnp.copysign(t, -1.0).sum())(v).numpy(), -np.sign(v))
    np.testing.assert_array_equal(tg.grad(lambda t: tnp.copysign(t, 2.0).sum())(v).numpy(), np.sign(v))
    signs = tg.asarray(np.array([-1.0, 1.0, -1.0], np.float32))
    np.testing.assert_array_equal(tg.grad(lambda t: tnp.copysign(t, signs).sum())(v).numpy(), [-1, -1, -1])
    np.testing.assert_array_equal(tg.grad(lambda t: tnp.copysign(t, -1.0).sum())(lazy).numpy(), [-1, -1, -1])
    np.testing.assert_array_equal(tg.grad(lambda s: tnp.copysign(tg.asarray(v), s).sum())(signs).numpy(), [0, 0, 0])


def test_an_abs_off_the_gradient_path_is_not_rewritten_so_the_value_is_computed_once() -> None:
    """The bit-trick rewrite rewrites only what lies on a path to the arguments: an abs in a loop under
    stop_gradient (Sinkhorn's marginal error in a while_loop) rewrote there made a second copy of the loop for the
    gradient beside the value's (value_and_grad, or an aux output, ran every iteration twice)."""
    def f(x: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor]:
        c = tg.stop_gradient(x)
        v = tg.lax.fori_loop(0, 5, lambda i, v: tnp.abs(v - c).mean() + v, 0.0)
        return (x * v).sum() + tnp.abs(x).sum(), v
    x = tg.asarray(np.arange(-3.0, 5.0, dtype=np.float32))
    (value, v), g = tg.value_and_grad(f, has_aux=True)(x)
    graph = inline(UOp(Ops.SINK, None, (value.uop, v.uop, g.uop)))
    assert sum(u.op is Ops.LOOP for u in graph.toposort()) == 1
    want_v = 0.0
    for _ in range(5):
        want_v += np.abs(want_v - np.arange(-3.0, 5.0)).mean()
    np.testing.assert_allclose(v.numpy(), want_v, rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), want_v + np.where(np.arange(-3.0, 5.0) < 0, -1, 1), rtol=1e-6)  # 1 at 0


def test_a_nested_differentiation_at_an_abs_leaves_its_placeholder_alone() -> None:
    """jvp(f, (|a|,), ...) with a nonlinear f differentiates f's pullback, whose graph holds jvp's placeholder for
    the primal |a|: the bit-trick rewrite rewrote that placeholder (its source, abs) into a new node the jvp's trace
    never bound, and a traced function then read it as a captured value (FunctionError; under jit, an escaped
    tracer). At a = -2: d/da [-2|a| a] = -4|a| = -8 and d/da [-2 sg(|a|) a] = -2|a| = -4."""
    a = tg.asarray(np.float32(-2.0))
    slope = lambda a, sg: tg.jvp(lambda x: x * x, ((tg.stop_gradient if sg else lambda x: x)(tnp.abs(a)),),  # noqa: E731
                                  (tnp.ones_like(a),))[1]
    for sg, want in ((False, -8.0), (True, -4.0)):
        f = lambda a, sg=sg: slope(a, sg) * -a   # noqa: E731
        np.testing.assert_allclose(tg.function(lambda a, sg=sg: slope(a, sg))(a).numpy(), 4.0)
        np.testing.assert_allclose(tg.grad(f)(a).numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(tg.jit(tg.grad(f))(a).numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(tg.grad(lambda a, f=f: tg.function(f)(a))(a).numpy(), want, rtol=1e-6)


def test_a_python_float_argument_is_weakly_typed_inside_the_transform() -> None:
    # jax 0.10.2: the function sees x = 2.0 weakly typed, so x * h for a float16 h is float16 (value 6.0 as float16);
    # tgfx's stand-in was a strong float32, and value_and_grad's value, vjp's and jvp's outputs were float32
    h = tnp.asarray(np.array([1.0, 1.0, 1.0], np.float16))
    value, g = tg.value_and_grad(lambda x: tnp.sum(x * h))(2.0)
    assert value.dtype == dtypes.float16 and value.item() == 6.0
    assert g.dtype == dtypes.float32 and g.item() == 3.0
    out, pullback = tg.vjp(lambda x: x * h, 2.0)
    assert out.dtype == dtypes.float16 and pullback(tnp.ones(3, tnp.float16))[0].item() == 3.0
    y, dy = tg.jvp(lambda x: x * h, (2.0,), (1.0,))
    assert y.dtype == dtypes.float16 and y.tolist() == [2.0, 2.0, 2.0] and dy.tolist() == [1.0, 1.0, 1.0]
    # a value computed from the weak argument alone stays weak (~float32[] in JAX); a strong argument's does not
    assert str(tg.typeof(tg.value_and_grad(lambda x: x * 2.0)(2.0)[0])) == "~float32[]"
    assert str(tg.typeof(tg.value_and_grad(lambda x: x * 2.0)(tnp.ones(()))[0])) == "float32[]"


def test_the_gradient_of_a_weakly_typed_input_is_weakly_typed() -> None:
    # jax 0.10.2: grad gives an input's gradient the input's type, weak_type included, however it was computed
    def typeof(x: Any) -> str:
        return str(tg.typeof(x))
    assert typeof(tg.grad(lambda x: x * x)(2.0)) == "~float32[]"
    assert typeof(tg.grad(lambda x: x * tnp.float16(2))(2.0)) == "~float32[]"   # (computed in float16)
    assert typeof(tg.grad(lambda x: x * tnp.float32(3))(2.0)) == "~float32[]"
    assert typeof(tg.grad(lambda x: (x * x).sum())(tnp.broadcast_to(tnp.asarray(2.0), (2,)))) == "~float32[2]"
    assert typeof(tg.grad(lambda x: x * x)(tnp.float32(2.0))) == "float32[]"
    gx, gy = tg.grad(lambda x, y: x * y, argnums=(0, 1))(2.0, tnp.float32(3))
    assert (typeof(gx), typeof(gy), gx.item(), gy.item()) == ("~float32[]", "float32[]", 3.0, 2.0)
    g = tg.grad(lambda p: p["a"] * p["b"])({"a": 2.0, "b": tnp.float32(3)})
    assert (typeof(g["a"]), typeof(g["b"])) == ("~float32[]", "float32[]")
    value, g = tg.value_and_grad(lambda x: tg.lax.fori_loop(0, 3, lambda i, c: c * x, 1.0))(2.0)
    assert (typeof(value), typeof(g), value.item(), g.item()) == ("~float32[]", "~float32[]", 8.0, 12.0)


def test_gradients_at_an_input_as_deep_as_a_lazy_graph_grows() -> None:
    """An input whose lazy graph is exactly LAZY_DEPTH deep (an eager optimiser's parameter after a few updates): the
    transform's placeholder over it made the graph one deeper, so its Tensor was computed at once and held the value,
    not the placeholder: the gradient with respect to it was zero (an Adam bias's gradient at step 5, silently)."""
    from tgfx.tensor import LAZY_DEPTH, lazy_depth
    c = tg.asarray(np.ones(4, np.float32))
    while lazy_depth(c.uop) < LAZY_DEPTH:
        c = c * 1.01
    assert lazy_depth(c.uop) == LAZY_DEPTH
    np.testing.assert_array_equal(tg.grad(lambda c: (c * 3).sum())(c).numpy(), np.full(4, 3, np.float32))
    _, tangent = tg.jvp(lambda c: c * 3, (c,), (tnp.ones(4),))
    np.testing.assert_array_equal(tangent.numpy(), np.full(4, 3, np.float32))


def test_check_grads_jax_spelling() -> None:
    # jax.test_util.check_grads, as JAX's autodiff tutorials call it on a logistic regression loss up to second order
    # (ModuleNotFoundError before); it catches a wrong custom rule in either mode
    from tgfx.test_util import check_grads
    inputs = T(np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30]], np.float32))
    targets = T(np.array([1.0, 1.0, 0.0], np.float32))

    def loss(w: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
        p = 0.5 * (tnp.tanh((inputs @ w + b) / 2) + 1)
        return -tnp.sum(tnp.log(p * targets + (1 - p) * (1 - targets)))
    check_grads(loss, (T(np.array([0.3, -0.2, 0.5], np.float32)), T(np.float32(0.1))), order=2)
    check_grads(lambda x: tnp.sin(x) * x, (1.5,), order=3)

    wrong_vjp = tg.custom_vjp(tnp.sin)
    wrong_vjp.defvjp(lambda x: (tnp.sin(x), x), lambda x, g: (g * 2.0,))
    with pytest.raises(AssertionError, match="VJP cotangent projection"):
        check_grads(wrong_vjp, (T(np.ones(3, np.float32)),), order=1, modes=["rev"])
    wrong_jvp = tg.custom_jvp(tnp.sin)
    wrong_jvp.defjvp(lambda primals, tangents: (tnp.sin(primals[0]), tangents[0] * 2.0))
    with pytest.raises(AssertionError, match="JVP tangent"):
        check_grads(wrong_jvp, (T(np.ones(3, np.float32)),), order=1, modes=["fwd"])
