"""tg.nn: activations, losses and layers against numpy references written here, gradients by central differences
(test_grad's `check_grads`), kernel counts, and the errors a user gets for inputs and params that do not fit.

References are computed in float64 from the definitions: convolution and pooling by explicit loops over output
positions, attention by hand with its masks, normalisations from their formulas.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from helpers import TRANSCENDENTAL_ULPS, assert_close
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grad import T, check_grads

import tgfx as tg
from tgfx import nn
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops

RNG = np.random.default_rng(0)


def rand(*shape: int, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape) * scale


# ---- numpy references ----
def np_sigmoid(x: np.ndarray) -> np.ndarray:
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + z), z / (1 + z))


def np_erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


def np_logsumexp(x: np.ndarray, axis: int | tuple | None = -1, keepdims: bool = False) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def np_softmax(x: np.ndarray, axis: int | tuple = -1) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x: np.ndarray, axis: int | tuple = -1) -> np.ndarray:
    return x - np_logsumexp(x, axis, keepdims=True)


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946   # jax.nn.selu's

ACTIVATIONS: dict[str, tuple[Callable, Callable]] = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "leaky_relu": (lambda x: nn.leaky_relu(x, 0.2), lambda x: np.where(x >= 0, x, 0.2 * x)),
    "sigmoid": (nn.sigmoid, np_sigmoid),
    "silu": (nn.silu, lambda x: x * np_sigmoid(x)),
    "softplus": (nn.softplus, lambda x: np.logaddexp(0, x)),
    "gelu_tanh": (nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "gelu_exact": (lambda x: nn.gelu(x, approximate=False), lambda x: 0.5 * x * (1 + np_erf(x / np.sqrt(2)))),
    "elu": (lambda x: nn.elu(x, 1.5), lambda x: np.where(x > 0, x, 1.5 * np.expm1(np.minimum(x, 0)))),
    "selu": (nn.selu, lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0)))),
    "celu": (lambda x: nn.celu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(np.minimum(x, 0) / 0.7))),
    "hard_tanh": (nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    "log_sigmoid": (nn.log_sigmoid, lambda x: -np.logaddexp(0, -x)),
    "softmax": (nn.softmax, np_softmax),
    "log_softmax": (nn.log_softmax, np_log_softmax),
    "softmax_axis0": (lambda x: nn.softmax(x, axis=0), lambda x: np_softmax(x, 0)),
    "softmax_axes": (lambda x: nn.softmax(x, axis=(0, 1)), lambda x: np_softmax(x, (0, 1))),
    "log_softmax_axis0": (lambda x: nn.log_softmax(x, axis=0), lambda x: np_log_softmax(x, 0)),
    "logsumexp": (lambda x: nn.logsumexp(x, axis=1), lambda x: np_logsumexp(x, 1)),
    "logsumexp_all": (nn.logsumexp, lambda x: np_logsumexp(x, None)),
    "logsumexp_keepdims": (lambda x: nn.logsumexp(x, axis=0, keepdims=True), lambda x: np_logsumexp(x, 0, True)),
}


# ---- activations ----
@pytest.mark.x64
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_matches_numpy(name: str, dtype: tg.DType) -> None:
    f, ref = ACTIVATIONS[name]
    x = rand(3, 5, seed=1, scale=3.0).astype(dtype.np)
    x[0, 0] = 0.0
    out = f(tg.asarray(x))
    assert out.dtype == dtype
    assert_close(out, ref(x.astype(np.float64)), ulps=8 * TRANSCENDENTAL_ULPS)


@settings(max_examples=25)
@given(st.lists(st.floats(-60, 60, width=32), min_size=1, max_size=12), st.sampled_from(list(ACTIVATIONS)))
def test_activation_hypothesis(values: list[float], name: str) -> None:
    f, ref = ACTIVATIONS[name]
    x = np.array(values, np.float32).reshape(1, -1)
    want = ref(x.astype(np.float64))
    # float32 rounding of the argument scales the error by |x f'(x) / f(x)| (up to ~60 for gelu's tail)
    assert_close(f(tg.asarray(x)), want, rtol=2e-5 * 60, atol=1e-6 * 60)


def test_activations_keep_half_precision() -> None:
    x = np.linspace(-4, 4, 9).astype(np.float16)
    for name, (f, ref) in ACTIVATIONS.items():
        out = f(tg.asarray(x.reshape(1, 9)))
        assert out.dtype == dtypes.float16, name
        assert_close(out, ref(x.reshape(1, 9).astype(np.float64)), rtol=4e-3, atol=4e-3)


def test_integer_input_computes_in_float() -> None:
    assert nn.sigmoid(tg.asarray([0, 1])).dtype == dtypes.float32
    assert nn.relu(tg.asarray([-1, 2])).tolist() == [0, 2]


def test_extreme_values_stay_finite_in_value_and_gradient() -> None:
    x = np.array([-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0], np.float32)
    for name in ("sigmoid", "silu", "softplus", "gelu_tanh", "gelu_exact", "elu", "log_softmax", "softmax",
                 "logsumexp_all", "selu", "celu", "log_sigmoid", "hard_tanh"):
        f, ref = ACTIVATIONS[name]
        out = f(tg.asarray(x.reshape(1, -1)))
        assert np.all(np.isfinite(out.numpy())), name
        g = tg.grad(lambda t, f=f: f(t).sum())(tg.asarray(x))
        assert np.all(np.isfinite(g.numpy())), (name, g.numpy())
    assert nn.sigmoid(tg.asarray(np.float32(-100.0))).item() == pytest.approx(3.720076e-44, rel=1e-2)
    assert nn.logsumexp(tg.asarray([1000.0, 1000.0])).item() == pytest.approx(1000 + math.log(2))
    np.testing.assert_allclose(nn.log_softmax(tg.asarray([0.0, -200.0])).numpy(), [0.0, -200.0], atol=1e-6)


def test_sigmoid_and_silu_evaluate_one_exp() -> None:
    """exp(-|x|) serves both branches of the tail-safe sigmoid: an exp per branch (one of them masked out) made
    sigmoid and silu twice JAX's time; the values are the two branches' very same expressions."""
    x = tg.asarray(np.linspace(-30, 30, 61, dtype=np.float32))
    for f in (nn.sigmoid, nn.silu):
        assert sum(u.op is Ops.EXP for u in f(x).uop.toposort()) == 1
    v = np.linspace(-30, 30, 61, dtype=np.float32)
    e = np.exp(-np.abs(v))
    np.testing.assert_allclose(nn.sigmoid(x).numpy(), np.where(v >= 0, 1 / (1 + e), e / (1 + e)), rtol=3e-7)


def test_gradients_at_zero() -> None:
    """At the kink or branch point x == 0, JAX's values: relu 0 (a max-based relu would give 0.5), softplus and
    sigmoid their smooth derivatives 0.5 and 0.25 (an |x|-based form gives 0 for softplus), elu alpha."""
    x = tg.asarray([-1.0, 0.0, 2.0])
    assert tg.grad(lambda t: nn.relu(t).sum())(x).tolist() == [0.0, 0.0, 1.0]
    assert tg.grad(lambda t: nn.softplus(t).sum())(x).numpy()[1] == 0.5
    assert tg.grad(lambda t: nn.sigmoid(t).sum())(x).numpy()[1] == 0.25
    assert tg.grad(lambda t: nn.elu(t, 1.5).sum())(x).numpy()[1] == 1.5
    assert tg.grad(lambda t: nn.leaky_relu(t, 0.1).sum())(x).tolist() == pytest.approx([0.1, 1.0, 1.0])
    assert tg.grad(lambda t: nn.celu(t, 0.5).sum())(x).numpy()[1] == 1.0
    assert tg.grad(lambda t: nn.selu(t).sum())(x).numpy()[1] == pytest.approx(SELU_SCALE * SELU_ALPHA)
    assert tg.grad(lambda t: nn.log_sigmoid(t).sum())(x).numpy()[1] == 0.5
    # hard_tanh: 1 on the closed interval [-1, 1], its ends included (JAX's where-based definition)
    edges = tg.asarray([-2.0, -1.0, 0.0, 1.0, 2.0])
    assert tg.grad(lambda t: nn.hard_tanh(t).sum())(edges).tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_softmax_family_with_infinities() -> None:
    ninf = -np.inf
    x = np.array([[ninf, ninf, ninf], [0.0, ninf, 1.0], [np.inf, 0.0, 1.0]], np.float32)
    lse = nn.logsumexp(tg.asarray(x), axis=1).numpy()
    assert lse[0] == ninf and lse[2] == np.inf
    assert lse[1] == pytest.approx(np.log(1 + np.e))
    sm = nn.softmax(tg.asarray(x[1:2])).numpy()
    np.testing.assert_allclose(sm, np_softmax(np.array([[0.0, ninf, 1.0]])), rtol=1e-6)
    # a row holding +inf is shifted by its largest entry below it: a large finite entry beside the inf does not
    # overflow (float16's exp(11.78) does), so it is 0 and only the inf is NaN, in every dtype
    for dtype, big in ((np.float16, 11.78), (np.float32, 100.0)):
        row = tg.asarray(np.array([[-4.0, big, np.inf, ninf]], dtype))
        np.testing.assert_array_equal(nn.softmax(row).numpy(), np.array([[0, 0, np.nan, 0]], dtype))
        np.testing.assert_array_equal(nn.log_softmax(row).numpy()[0, [0, 1, 3]], [ninf] * 3)
        assert nn.logsumexp(row, axis=1).numpy()[0] == np.inf


def test_softmax_family_where_and_logsumexp_scales() -> None:
    """`softmax(x, where=mask)` / `log_softmax(x, where=mask)` (an attention mask, as jax.nn spells it) leave the
    masked entries out: the others are numpy's softmax of the kept ones, the masked are 0 / -inf and get no gradient,
    and a row with none kept is all 0 / -inf. `jax.nn.logsumexp` takes scipy's `b` and `return_sign` too."""
    x = rand(3, 5).astype(np.float32)
    mask = np.array([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
    sm = nn.softmax(tg.asarray(x), where=tg.asarray(mask)).numpy()
    lsm = nn.log_softmax(tg.asarray(x), axis=-1, where=tg.asarray(mask)).numpy()
    for r in (0, 2):
        keep = mask[r]
        np.testing.assert_allclose(sm[r, keep], np_softmax(x[r, keep][None])[0], rtol=1e-6)
        np.testing.assert_allclose(lsm[r, keep], np_log_softmax(x[r, keep][None])[0], rtol=1e-5, atol=1e-6)
    assert (sm[~mask] == 0).all() and (lsm[~mask] == -np.inf).all()
    g = tg.grad(lambda t: (nn.softmax(t, where=tg.asarray(mask)) * tg.asarray(x)).sum())(tg.asarray(x)).numpy()
    assert (g[~mask] == 0).all() and np.isfinite(g).all() and np.abs(g[0, mask[0]]).sum() > 0
    b = np.array([1.0, -2.0, 0.5, 0.0, 1.0], np.float32)
    out, sign = nn.logsumexp(tg.asarray(x), axis=1, b=tg.asarray(b), return_sign=True)
    total = (b * np.exp(x)).sum(1)
    np.testing.assert_allclose(out.numpy(), np.log(np.abs(total)), rtol=1e-5)
    np.testing.assert_array_equal(sign.numpy(), np.sign(total))
    masked = nn.logsumexp(tg.asarray(x), axis=1, b=tg.asarray(np.abs(b)), where=tg.asarray(mask[0])).numpy()
    np.testing.assert_allclose(masked, np.log((np.abs(b) * np.exp(x) * mask[0]).sum(1)), rtol=1e-5)


def test_softmax_of_rows_is_one_kernel_and_its_gradient_fuses() -> None:
    # each row's max and exp-sum are computed inside the kernel that normalises it (one pass over memory)
    x = tg.asarray(rand(8, 16).astype(np.float32)).realize()
    tg.counters.reset()
    got = nn.softmax(x).numpy()
    assert tg.counters.kernel_count == 1
    np.testing.assert_allclose(got, np_softmax(x.numpy()), rtol=1e-6, atol=1e-7)
    for f in (nn.log_softmax, nn.layer_norm, nn.standardize):
        tg.counters.reset()
        f(x).realize()
        assert tg.counters.kernel_count == 1, f.__name__
    tg.counters.reset()
    tg.grad(lambda t: (nn.log_softmax(t) * t).sum())(x).realize()
    assert tg.counters.kernel_count <= 6


@pytest.mark.x64
@pytest.mark.parametrize("name", ["sigmoid", "silu", "softplus", "gelu_tanh", "gelu_exact", "elu", "softmax",
                                  "log_softmax", "softmax_axes", "logsumexp", "logsumexp_all", "leaky_relu", "selu",
                                  "celu", "hard_tanh", "log_sigmoid"])
def test_activation_gradient(name: str) -> None:
    f, _ = ACTIVATIONS[name]
    check_grads(f, rand(3, 4, seed=2, scale=2.0) + 0.05)


def test_log_sigmoid_tails() -> None:
    out = nn.log_sigmoid(tg.asarray(np.array([-1000.0, -100.0, 30.0, 1000.0], np.float32))).numpy()
    np.testing.assert_allclose(out, [-1000.0, -100.0, -np.exp(-30.0), 0.0], rtol=1e-6)   # -log1p(e^-30), not 0


@pytest.mark.x64
def test_glu_matches_numpy_and_names_an_odd_axis() -> None:
    x = rand(3, 4, 6, seed=9)
    for axis in (-1, 1, 0):
        half = x.shape[axis] // 2
        if x.shape[axis] % 2:
            with pytest.raises(ValueError, match=r"glu: axis 0 of x \(shape \(3, 4, 6\)\) must have an even length"):
                nn.glu(T(x), axis)
            continue
        a, b = np.split(x, 2, axis=axis)
        out = nn.glu(T(x), axis=axis)
        assert out.shape[axis] == half
        assert_close(out, a * np_sigmoid(b))
    check_grads(nn.glu, rand(2, 4, seed=10))


# ---- one_hot ----
def test_one_hot_matches_numpy() -> None:
    ids = np.array([[0, 3, 1], [2, 5, -1]])
    eye = np.vstack([np.eye(4), np.zeros((1, 4))])
    ref = eye[np.where((ids >= 0) & (ids < 4), ids, 4)]
    out = nn.one_hot(tg.asarray(ids.astype(np.int32)), 4)
    assert out.dtype == dtypes.float32
    np.testing.assert_array_equal(out.numpy(), ref)
    np.testing.assert_array_equal(nn.one_hot(tg.asarray(ids), 4, axis=0).numpy(), np.moveaxis(ref, -1, 0))
    np.testing.assert_array_equal(nn.one_hot(tg.asarray(ids), 4, dtype=dtypes.int32, axis=1).numpy(),
                                  np.moveaxis(ref, -1, 1).astype(np.int32))


def test_one_hot_errors() -> None:
    with pytest.raises(TypeError, match="integer class indices"):
        nn.one_hot(tg.asarray([0.0, 1.0]), 3)
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        nn.one_hot(tg.asarray([0, 1]), 3, axis=3)


# ---- losses ----
def test_cross_entropies_match_numpy() -> None:
    logits = rand(6, 5, seed=3, scale=3.0)
    labels = np.array([0, 4, 2, 2, 1, 3])
    onehot = np.eye(5)[labels]
    soft = np_softmax(rand(6, 5, seed=4))
    want = -np_log_softmax(logits)[np.arange(6), labels]
    assert_close(nn.softmax_cross_entropy_with_integer_labels(T(logits), T(labels)), want)
    assert_close(nn.softmax_cross_entropy(T(logits), T(onehot)), want)
    assert_close(nn.softmax_cross_entropy(T(logits), T(soft)), -(soft * np_log_softmax(logits)).sum(-1))
    batched = rand(2, 3, 5, seed=5)
    lab = np.array([[1, 0, 4], [3, 3, 2]])
    want_b = -np.take_along_axis(np_log_softmax(batched), lab[..., None], -1)[..., 0]
    assert_close(nn.softmax_cross_entropy_with_integer_labels(T(batched), T(lab.astype(np.int32))), want_b)


@pytest.mark.x64
def test_mse_and_squared_error() -> None:
    p, t = rand(4, 3, seed=6), rand(4, 3, seed=7)
    assert_close(nn.squared_error(T(p), T(t)), (p - t) ** 2)
    assert nn.mse(T(p), T(t)).item() == pytest.approx(np.mean((p - t) ** 2), rel=1e-12)


@pytest.mark.x64
def test_loss_gradients() -> None:
    labels = T(np.array([0, 4, 2]))
    check_grads(lambda x: nn.softmax_cross_entropy_with_integer_labels(x, labels), rand(3, 5, seed=8))
    check_grads(lambda x, y: nn.softmax_cross_entropy(x, nn.softmax(y)), rand(3, 5, seed=9), rand(3, 5, seed=10))
    check_grads(lambda p, t: nn.mse(p, t), rand(3, 2, seed=11), rand(3, 2, seed=12))


def test_loss_errors() -> None:
    logits = T(rand(3, 5))
    with pytest.raises(TypeError, match="must be integer class indices.*softmax_cross_entropy"):
        nn.softmax_cross_entropy_with_integer_labels(logits, T(np.zeros(3)))
    with pytest.raises(ValueError, match=r"got logits \(3, 5\) and labels \(3, 1\) \(expected \(3,\)\)"):
        nn.softmax_cross_entropy_with_integer_labels(logits, T(np.zeros((3, 1), np.int32)))
    with pytest.raises(ValueError, match="same shape.*integer_labels"):
        nn.softmax_cross_entropy(logits, T(np.zeros(3, np.int32)))
    with pytest.raises(ValueError, match=r"mse: predictions and targets must have the same shape, got \(3,\) and "
                                         r"\(3, 1\)"):
        nn.mse(T(np.zeros(3)), T(np.zeros((3, 1))))


# ---- convolution and pooling ----
def np_pads(padding: object, in_hw: tuple[int, int], k: tuple[int, int], s: tuple[int, int],
            d: tuple[int, int]) -> list[tuple[int, int]]:
    """Padding per spatial axis; SAME from TensorFlow's documented rule (out = ceil(in / stride))."""
    if padding == "VALID":
        return [(0, 0), (0, 0)]
    if padding == "SAME":
        out = []
        for i, kk, ss, dd in zip(in_hw, k, s, d, strict=True):
            o = -(-i // ss)
            total = max((o - 1) * ss + (kk - 1) * dd + 1 - i, 0)
            out.append((total // 2, total - total // 2))
        return out
    if isinstance(padding, int):
        return [(padding, padding)] * 2
    return [tuple(p) if isinstance(p, (tuple, list)) else (p, p) for p in padding]


def np_conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int | tuple, padding: object,
              dilation: int | tuple, groups: int = 1) -> np.ndarray:
    s = (stride, stride) if isinstance(stride, int) else stride
    d = (dilation, dilation) if isinstance(dilation, int) else dilation
    (kh, kw), o, cg = w.shape[2:], w.shape[0], w.shape[1]
    pads = np_pads(padding, x.shape[2:], (kh, kw), s, d)
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    oh = (xp.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (xp.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    og = o // groups
    out = np.zeros((x.shape[0], o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * s[0], i * s[0] + d[0] * (kh - 1) + 1, d[0])
            cols = slice(j * s[1], j * s[1] + d[1] * (kw - 1) + 1, d[1])
            win = xp[:, :, rows, cols]
            for g in range(groups):
                out[:, g * og:(g + 1) * og, i, j] = np.einsum("nckl,ockl->no", win[:, g * cg:(g + 1) * cg],
                                                              w[g * og:(g + 1) * og])
    return out if b is None else out + b[None, :, None, None]


CONVS = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 0, 1, 1),
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, "SAME", 1, 1),
    ((1, 2, 9, 8), (3, 2, 3, 2), 2, "SAME", 1, 1),
    ((1, 2, 9, 8), (3, 2, 3, 3), (2, 3), 1, 1, 1),
    ((1, 2, 10, 9), (2, 2, 3, 3), 1, 2, 2, 1),
    ((1, 2, 10, 9), (2, 2, 3, 2), 3, "SAME", (2, 1), 1),
    ((1, 4, 6, 6), (6, 2, 3, 3), 1, ((1, 0), (0, 2)), 1, 2),
    ((2, 4, 5, 5), (4, 1, 3, 3), 2, "VALID", 1, 4),
    ((1, 1, 4, 4), (1, 1, 4, 4), 1, 0, 1, 1),
    ((1, 3, 5, 5), (2, 3, 1, 1), 2, 0, 1, 1),
    ((1, 2, 8, 8), (2, 2, 2, 2), 2, 0, 1, 1),
]


@pytest.mark.x64
@pytest.mark.parametrize("case", CONVS, ids=[str(i) for i in range(len(CONVS))])
def test_conv2d_matches_loops(case: tuple) -> None:
    xs, ws, stride, padding, dilation, groups = case
    x, w, b = rand(*xs, seed=13), rand(*ws, seed=14), rand(ws[0], seed=15)
    out = nn.conv2d(T(x), T(w), T(b), stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert_close(out, np_conv2d(x, w, b, stride, padding, dilation, groups), rtol=1e-11, atol=1e-12)


@settings(max_examples=12)
@given(st.data())
def test_conv2d_hypothesis(data: st.DataObject) -> None:
    k = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    s = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    d = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    padding = data.draw(st.sampled_from(["SAME", "VALID", 0, 1, 2]))
    span = [dd * (kk - 1) + 1 for kk, dd in zip(k, d, strict=True)]
    hw = tuple(data.draw(st.integers(sp, sp + 5)) for sp in span)
    x, w = rand(1, 2, *hw, seed=16).astype(np.float32), rand(3, 2, *k, seed=17).astype(np.float32)
    out = nn.conv2d(tg.asarray(x), tg.asarray(w), stride=s, padding=padding, dilation=d)
    ref = np_conv2d(x.astype(np.float64), w.astype(np.float64), None, s, padding, d)
    assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_conv2d_is_one_kernel() -> None:
    x = tg.asarray(rand(2, 8, 12, 12).astype(np.float32)).realize()
    w = tg.asarray(rand(16, 8, 3, 3).astype(np.float32)).realize()
    b = tg.asarray(rand(16).astype(np.float32)).realize()
    tg.counters.reset()
    nn.relu(nn.conv2d(x, w, b, stride=2, padding="SAME")).realize()
    assert tg.counters.kernel_count == 1


@pytest.mark.x64
@pytest.mark.parametrize("case", [CONVS[0], CONVS[2], CONVS[3], CONVS[4], CONVS[5], CONVS[6], CONVS[7], CONVS[10]],
                         ids=["plain", "same_stride", "stride_unreached_column", "dilated", "stride3_dilated",
                              "groups", "depthwise", "stride_equals_kernel"])
def test_conv2d_gradient(case: tuple) -> None:
    xs, ws, stride, padding, dilation, groups = case
    check_grads(lambda x, w, b: nn.conv2d(x, w, b, stride, padding, dilation, groups),
                rand(*xs, seed=18), rand(*ws, seed=19), rand(ws[0], seed=20))


@pytest.mark.x64
def test_conv2d_gradient_is_two_convolution_kernels_and_differentiable_again() -> None:
    """The backward is written as convolutions (custom grad_fxn): forward + input gradient + kernel gradient is three
    convolution kernels. Channels first, the kernel gradient reads x and the output gradient through channels-last
    copies (two kernels) and stores its sum (KH, KW, C, O), so the returned OIHW gradient is one more (a copy of 864
    bytes here; a training step's update reads the sum where it lies). The backward is itself differentiable (second
    order through it, by central differences)."""
    x = tg.asarray(rand(2, 4, 9, 9).astype(np.float32)).realize()
    w = tg.asarray(rand(6, 4, 3, 3).astype(np.float32)).realize()
    tg.counters.reset()
    gx, gw = tg.grad(lambda x, w: (nn.conv2d(x, w, padding=1) ** 2).sum(), argnums=(0, 1))(x, w)
    tg.realize(gx, gw)
    assert tg.counters.kernel_count == 3 + 2 + 1
    w64 = T(rand(3, 2, 3, 3, seed=23))
    check_grads(lambda t: tg.grad(lambda u: (nn.conv2d(u, w64, stride=2, padding=1) ** 2).sum())(t),
                rand(1, 2, 6, 5, seed=24))

def np_pool(x: np.ndarray, k: tuple[int, int], s: tuple[int, int], pads: list, reduce: Callable,
            fill: float) -> np.ndarray:
    xp = np.pad(x, [(0, 0), (0, 0), *pads], constant_values=fill)
    oh, ow = (xp.shape[2] - k[0]) // s[0] + 1, (xp.shape[3] - k[1]) // s[1] + 1
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = reduce(xp[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]], axis=(2, 3))
    return out


@pytest.mark.parametrize("window,stride,padding", [(2, None, 0), (3, 2, 1), ((2, 3), (1, 2), 0), (3, 1, "SAME")])
def test_pooling_matches_loops(window: int | tuple, stride: int | tuple | None, padding: object) -> None:
    x = rand(2, 3, 7, 8, seed=21)
    k = (window, window) if isinstance(window, int) else window
    s = k if stride is None else ((stride, stride) if isinstance(stride, int) else stride)
    pads = np_pads(padding, x.shape[2:], k, s, (1, 1))
    assert_close(nn.max_pool2d(T(x), window, stride, padding), np_pool(x, k, s, pads, np.max, -np.inf))
    assert_close(nn.avg_pool2d(T(x), window, stride, padding), np_pool(x, k, s, pads, np.mean, 0.0))


@pytest.mark.x64
def test_pooling_gradient() -> None:
    x = rand(1, 2, 6, 6, seed=22)
    check_grads(lambda t: nn.max_pool2d(t, 2), x)
    check_grads(lambda t: nn.avg_pool2d(t, 3, 2, padding=1), x)


def test_conv_and_pool_errors() -> None:
    x, w = T(rand(1, 3, 5, 5)), T(rand(4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"input must be 4-d \(N, C, H, W\), got shape \(3, 5, 5\).*x\[None\]"):
        nn.conv2d(T(rand(3, 5, 5)), w)
    with pytest.raises(ValueError, match=r"input has 2 channels .* kernel of shape \(4, 3, 3, 3\) expects 3"):
        nn.conv2d(T(rand(1, 2, 5, 5)), w)
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\)"):
        nn.conv2d(x, w, T(rand(3)))
    with pytest.raises(ValueError, match="groups=2 must be a positive int dividing"):
        nn.conv2d(x, w, groups=2)
    with pytest.raises(ValueError, match="larger than the padded input"):
        nn.conv2d(T(rand(1, 3, 2, 2)), w)
    with pytest.raises(ValueError, match="padding must be 'SAME', 'VALID'"):
        nn.conv2d(x, w, padding="FULL")
    with pytest.raises(ValueError, match="stride must be an int >= 1"):
        nn.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="max_pool2d: input must be 4-d"):
        nn.max_pool2d(T(rand(5, 5)), 2)


# ---- normalisation ----
def np_layer_norm(x: np.ndarray, scale: np.ndarray | None, bias: np.ndarray | None, axes: tuple,
                  eps: float) -> np.ndarray:
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    y = (x - m) / np.sqrt(v + eps)
    return y * (1 if scale is None else scale) + (0 if bias is None else bias)


def test_layer_norm_and_rms_norm_match_numpy() -> None:
    x, sc, bi = rand(3, 4, 5, seed=23), rand(5, seed=24), rand(5, seed=25)
    assert_close(nn.layer_norm(T(x), T(sc), T(bi)), np_layer_norm(x, sc, bi, (-1,), 1e-5))
    assert_close(nn.layer_norm(T(x), epsilon=0.1), np_layer_norm(x, None, None, (-1,), 0.1))
    sc2 = rand(4, 5, seed=26)
    assert_close(nn.layer_norm(T(x), T(sc2), axis=(1, 2)), np_layer_norm(x, sc2, None, (1, 2), 1e-5))
    ms = (x ** 2).mean(-1, keepdims=True)
    assert_close(nn.rms_norm(T(x), T(sc)), x / np.sqrt(ms + 1e-6) * sc)
    x16 = (rand(2, 300, seed=27) * 300 + 1000).astype(np.float16)   # sum of squares overflows float16
    out = nn.layer_norm(tg.asarray(x16))
    assert out.dtype == dtypes.float16
    assert_close(out, np_layer_norm(x16.astype(np.float64), None, None, (-1,), 1e-5), rtol=5e-3, atol=5e-3)
    assert_close(nn.rms_norm(tg.asarray(x16)), x16 / np.sqrt((x16.astype(np.float64) ** 2).mean(-1, keepdims=True)),
                 rtol=5e-3, atol=5e-3)


@pytest.mark.x64
def test_normalisation_gradients() -> None:
    x = rand(3, 6, seed=28)
    check_grads(lambda t, s, b: nn.layer_norm(t, s, b), x, rand(6, seed=29), rand(6, seed=30))
    check_grads(lambda t, s: nn.rms_norm(t, s), x, rand(6, seed=31))


@pytest.mark.x64
def test_standardize_matches_numpy_and_jax_definition() -> None:
    x = rand(3, 4, 5, seed=32) * 2 + 1
    want = np_layer_norm(x, None, None, (-1,), 1e-5)
    assert_close(nn.standardize(T(x)), want, rtol=1e-10, atol=1e-12)
    assert_close(nn.standardize(T(x), algorithm="stable"), want, rtol=1e-10, atol=1e-12)
    assert_close(nn.standardize(T(x), axis=(0, 2), epsilon=0.1), np_layer_norm(x, None, None, (0, 2), 0.1))
    assert_close(nn.standardize(T(x), axis=None), np_layer_norm(x, None, None, (0, 1, 2), 1e-5))
    # given statistics are used as they are, broadcast against x; a given mean enters mean(x^2) - mean^2 (JAX's)
    m, v = rand(3, 4, 1, seed=33), rand(5, seed=34) ** 2
    assert_close(nn.standardize(T(x), mean=T(m), variance=T(v)), (x - m) / np.sqrt(v + 1e-5))
    fast = np.maximum((x ** 2).mean(-1, keepdims=True) - m ** 2, 0)
    assert_close(nn.standardize(T(x), mean=T(m)), (x - m) / np.sqrt(fast + 1e-5))
    assert nn.standardize(tg.asarray(np.array([[1, 2, 3]], np.int32))).dtype == dtypes.float32
    x16 = (rand(2, 300, seed=35) * 300 + 1000).astype(np.float16)
    out = nn.standardize(tg.asarray(x16), algorithm="stable")
    assert out.dtype == dtypes.float16
    assert_close(out, np_layer_norm(x16.astype(np.float64), None, None, (-1,), 1e-5), rtol=5e-3, atol=5e-3)
    with pytest.raises(ValueError, match="algorithm must be 'fast' or 'stable', got 'exact'"):
        nn.standardize(T(x), algorithm="exact")


def test_standardize_statistics_over_where() -> None:
    """JAX's `where=` (it was an unexpected keyword): mean and variance over the masked elements only, every element
    standardised."""
    x = np.array([[1.0, 2.0, 3.0, 100.0], [4.0, -4.0, 0.0, 1.0]], np.float32)
    w = np.array([[True, True, True, False], [True, True, False, False]])
    for algorithm in ("fast", "stable"):
        m = np.array([[2.0], [0.0]], np.float32)
        v = np.array([[2 / 3], [16.0]], np.float32)
        assert_close(nn.standardize(tg.asarray(x), where=w, algorithm=algorithm), (x - m) / np.sqrt(v + 1e-5),
                     rtol=1e-6, atol=1e-6)


@pytest.mark.x64
def test_standardize_gradients() -> None:
    x = rand(3, 6, seed=36)
    check_grads(nn.standardize, x)
    check_grads(lambda t: nn.standardize(t, axis=0, algorithm="stable"), x)
    check_grads(lambda t, m, v: nn.standardize(t, mean=m, variance=v), x, rand(3, 1, seed=37),
                rand(3, 1, seed=38) ** 2 + 0.5)


def test_normalisation_errors() -> None:
    with pytest.raises(ValueError, match=r"layer_norm: scale must have the shape of the normalised axes \(1,\) .* "
                                         r"i.e. \(5,\), got \(4,\)"):
        nn.layer_norm(T(rand(3, 5)), T(rand(4)))


# ---- attention ----
def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None,
                 causal: bool = False, bias: np.ndarray | None = None) -> np.ndarray:
    """By hand: per batch b and head n, softmax over keys of q.k / sqrt(H), masked entries excluded."""
    bsz, t, nh, h = q.shape
    s = k.shape[1]
    out = np.zeros_like(q)
    for b in range(bsz):
        for n in range(nh):
            logits = q[b, :, n] @ k[b, :, n].T / np.sqrt(h)
            if bias is not None:
                logits = logits + np.broadcast_to(bias, (bsz, nh, t, s))[b, n]
            keep = np.ones((t, s), bool)
            if mask is not None:
                keep &= np.broadcast_to(mask, (bsz, nh, t, s))[b, n]
            if causal:
                keep &= np.arange(s)[None, :] <= np.arange(t)[:, None]
            logits = np.where(keep, logits, -np.inf)
            w = np.exp(logits - logits.max(-1, keepdims=True))
            out[b, :, n] = (w / w.sum(-1, keepdims=True)) @ v[b, :, n]
    return out


def test_attention_matches_by_hand() -> None:
    q, k, v = rand(2, 5, 3, 4, seed=32), rand(2, 6, 3, 4, seed=33), rand(2, 6, 3, 4, seed=34)
    assert_close(nn.dot_product_attention(T(q), T(k), T(v)), np_attention(q, k, v))
    qs = rand(2, 6, 3, 4, seed=35)
    assert_close(nn.dot_product_attention(T(qs), T(k), T(v), is_causal=True), np_attention(qs, k, v, causal=True))
    mask = np.random.default_rng(36).random((2, 1, 5, 6)) < 0.7
    mask[..., 0] = True  # no row fully masked: the -inf reference is then exact
    bias = rand(1, 3, 5, 6, seed=37)
    assert_close(nn.dot_product_attention(T(q), T(k), T(v), T(bias), T(mask)), np_attention(q, k, v, mask, bias=bias))
    assert_close(nn.dot_product_attention(T(q), T(k), T(v), scale=0.3),
                 np_attention(q * 0.3 * 2, k, v))  # the reference divides by sqrt(4) = 2


@pytest.mark.x64
def test_attention_fully_masked_row_is_uniform_not_nan() -> None:
    q, k, v = rand(1, 2, 1, 4, seed=38), rand(1, 3, 1, 4, seed=39), rand(1, 3, 1, 4, seed=40)
    mask = np.array([[[[False, False, False], [True, True, False]]]])
    out = nn.dot_product_attention(T(q), T(k), T(v), mask=T(mask)).numpy()
    np.testing.assert_allclose(out[0, 0, 0], v[0, :, 0].mean(0), rtol=1e-12)
    np.testing.assert_allclose(out[0, 1], np_attention(q[:, 1:], k[:, :2], v[:, :2])[0, 0], rtol=1e-12)


@pytest.mark.x64
def test_attention_gradient() -> None:
    check_grads(lambda q, k, v: nn.dot_product_attention(q, k, v, is_causal=True),
                rand(1, 4, 2, 3, seed=41), rand(1, 4, 2, 3, seed=42), rand(1, 4, 2, 3, seed=43))


def test_attention_errors() -> None:
    q = T(rand(2, 5, 3, 4))
    with pytest.raises(ValueError, match="same shape .* heads N and head size H"):
        nn.dot_product_attention(q, T(rand(2, 6, 3, 4)), T(rand(2, 6, 3, 5)))
    with pytest.raises(TypeError, match="mask must be boolean"):
        nn.dot_product_attention(q, q, q, mask=T(np.ones((5, 5))))
    with pytest.raises(ValueError, match=r"\(\.\.\., T, N, H\)"):
        nn.dot_product_attention(T(rand(5, 4)), T(rand(5, 4)), T(rand(5, 4)))


# ---- modules with hand-made params ----
def P(x: np.ndarray) -> tg.Tensor:
    return tg.asarray(np.asarray(x, np.float64))


def test_linear_apply_and_errors() -> None:
    x, w, b = rand(2, 3, seed=44), rand(3, 4, seed=45), rand(4, seed=46)
    layer = nn.Linear(4)
    assert_close(layer.apply({"kernel": P(w), "bias": P(b)}, P(x)), x @ w + b)
    assert_close(nn.Linear(4, use_bias=False).apply({"kernel": P(w)}, P(x)), x @ w)
    with pytest.raises(nn.ModuleError, match=r"Linear\(features=4.*\): expected input with 3 features on its last "
                                             r"axis \(kernel shape \(3, 4\)\), got input of shape \(2, 5\)"):
        layer.apply({"kernel": P(w), "bias": P(b)}, P(rand(2, 5)))
    with pytest.raises(nn.ModuleError, match=r"params have keys \['bias', 'kernal'\], expected \['bias', 'kernel'\] "
                                             r"\(missing \['kernel'\], unexpected \['kernal'\]\)"):
        layer.apply({"kernal": P(w), "bias": P(b)}, P(x))
    with pytest.raises(nn.ModuleError, match=r"params\['bias'\] has shape \(3,\), expected \(4,\)"):
        layer.apply({"kernel": P(w), "bias": P(b[:3])}, P(x))
    with pytest.raises(nn.ModuleError, match=r"params\['kernel'\] must be a Tensor, got ndarray"):
        layer.apply({"kernel": w, "bias": P(b)}, P(x))


@pytest.mark.x64
def test_conv_norm_embedding_modules_apply() -> None:
    x, w, b = rand(2, 3, 6, 6, seed=47), rand(5, 3, 3, 3, seed=48), rand(5, seed=49)
    conv = nn.Conv2d(5, 3, stride=2)
    assert_close(conv.apply({"kernel": P(w), "bias": P(b)}, P(x)), np_conv2d(x, w, b, 2, "SAME", 1))
    with pytest.raises(nn.ModuleError, match=r"expected input \(N, 3, H, W\) for the kernel of shape \(5, 3, 3, 3\), "
                                             r"got input of shape \(2, 4, 6, 6\)"):
        conv.apply({"kernel": P(w), "bias": P(b)}, P(rand(2, 4, 6, 6)))
    h, sc, bi = rand(2, 3, 5, seed=50), rand(5, seed=51), rand(5, seed=52)
    assert_close(nn.LayerNorm().apply({"scale": P(sc), "bias": P(bi)}, P(h)), np_layer_norm(h, sc, bi, (-1,), 1e-5))
    assert_close(nn.RMSNorm(epsilon=1e-3).apply({"scale": P(sc)}, P(h)),
                 h / np.sqrt((h ** 2).mean(-1, keepdims=True) + 1e-3) * sc)
    table = rand(7, 4, seed=53)
    ids = np.array([[0, 6, 3], [3, 3, 1]], np.int32)
    assert_close(nn.Embedding(7, 4).apply({"embedding": P(table)}, tg.asarray(ids)), table[ids])
    with pytest.raises(nn.ModuleError, match="input must be integer ids, got dtype float64"):
        nn.Embedding(7, 4).apply({"embedding": P(table)}, P(ids))
    check_grads(lambda t: nn.Embedding(7, 4).apply({"embedding": t}, tg.asarray(ids)), table)


def mha_params(e: int, seed: int) -> dict:
    return {n: {"kernel": P(rand(e, e, seed=seed + i)), "bias": P(rand(e, seed=seed + 10 + i))}
            for i, n in enumerate(("query", "key", "value", "out"))}


def np_mha(p: dict, x: np.ndarray, heads: int, causal: bool, kv: np.ndarray | None = None) -> np.ndarray:
    kv = x if kv is None else kv
    lin = {n: (p[n]["kernel"].numpy(), p[n]["bias"].numpy()) for n in p}

    def proj(n: str, t: np.ndarray) -> np.ndarray:
        y = t @ lin[n][0] + lin[n][1]
        return y.reshape(y.shape[:-1] + (heads, -1))
    o = np_attention(proj("query", x), proj("key", kv), proj("value", kv), causal=causal)
    return o.reshape(o.shape[:2] + (-1,)) @ lin["out"][0] + lin["out"][1]


@pytest.mark.x64
def test_multi_head_attention_apply() -> None:
    p, x = mha_params(8, 60), rand(2, 5, 8, seed=54)
    assert_close(nn.MultiHeadAttention(2).apply(p, P(x)), np_mha(p, x, 2, False))
    assert_close(nn.MultiHeadAttention(4, causal=True).apply(p, P(x)), np_mha(p, x, 4, True))
    kv = rand(2, 7, 8, seed=55)
    assert_close(nn.MultiHeadAttention(2).apply(p, P(x), P(kv)), np_mha(p, x, 2, False, kv))
    with pytest.raises(nn.ModuleError, match=r"MultiHeadAttention\(num_heads=3.*E divisible by num_heads=3"):
        nn.MultiHeadAttention(3).apply(p, P(x))
    bad = dict(p, key={"kernel": P(rand(8, 8)), "bias": P(rand(7))})
    with pytest.raises(nn.ModuleError, match=r"at params\['key'\]: params\['bias'\] has shape \(7,\), expected "
                                             r"\(8,\)"):
        nn.MultiHeadAttention(2).apply(bad, P(x))


@pytest.mark.x64
def test_multi_head_attention_gradient() -> None:
    x = rand(1, 3, 4, seed=56)
    base = mha_params(4, 70)
    wq = base["query"]["kernel"].numpy()

    def f(xx: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
        params = dict(base, query={"kernel": w, "bias": base["query"]["bias"]})
        return nn.MultiHeadAttention(2, causal=True).apply(params, xx)
    check_grads(f, x, wq)


def test_sequential_apply_and_param_paths() -> None:
    model = nn.Sequential(nn.Linear(4), nn.relu, nn.LayerNorm(), nn.Linear(2))
    x = rand(3, 5, seed=57)
    w0, b0, w3, b3 = rand(5, 4, seed=58), rand(4, seed=59), rand(4, 2, seed=60), rand(2, seed=61)
    params = {"layers_0": {"kernel": P(w0), "bias": P(b0)},
              "layers_2": {"scale": P(np.ones(4)), "bias": P(np.zeros(4))},
              "layers_3": {"kernel": P(w3), "bias": P(b3)}}
    h = np_layer_norm(np.maximum(x @ w0 + b0, 0), None, None, (-1,), 1e-5)
    assert_close(model.apply(params, P(x)), h @ w3 + b3)
    with pytest.raises(nn.ModuleError, match=r"Linear\(features=2.*\) at params\['layers_3'\]: expected input with 3 "
                                             r"features"):
        model.apply(dict(params, layers_3={"kernel": P(rand(3, 2)), "bias": P(b3)}), P(x))
    with pytest.raises(nn.ModuleError, match=r"Sequential\(.*\): params have keys \['layers_0', 'layers_2'\], "
                                             r"expected \['layers_0', 'layers_2', 'layers_3'\] \(missing "
                                             r"\['layers_3'\]"):
        model.apply({k: params[k] for k in ("layers_0", "layers_2")}, P(x))
    outer = nn.Sequential(model, nn.gelu)
    with pytest.raises(nn.ModuleError, match=r"at params\['layers_0'\]\['layers_2'\]: params have keys \['scale'\]"):
        outer.apply({"layers_0": dict(params, layers_2={"scale": P(np.ones(4))})}, P(x))
    with pytest.raises(TypeError, match="Sequential: layer 1 must be a Module or a function, got int"):
        nn.Sequential(nn.Linear(2), 3)


def test_dropout_module_needs_a_key_in_training() -> None:
    x = P(rand(2, 3))
    assert nn.Dropout(0.5).apply({}, x, deterministic=True) is x
    with pytest.raises(nn.ModuleError, match=r"Dropout\(rate=0.5\): needs a random key in training.*"
                                             r"deterministic=True"):
        nn.Dropout(0.5).apply({}, x)
    with pytest.raises(ValueError, match="rate must be a float in"):
        nn.dropout(x, 1.5, None)


# ---- initialisers and init (tg.random) ----
INITS = {
    "glorot_uniform": (nn.initializers.glorot_uniform(), "uniform", lambda fi, fo: 2 / (fi + fo)),
    "xavier_uniform": (nn.initializers.xavier_uniform(), "uniform", lambda fi, fo: 2 / (fi + fo)),
    "glorot_normal": (nn.initializers.glorot_normal(), "truncated", lambda fi, fo: 2 / (fi + fo)),
    "lecun_normal": (nn.initializers.lecun_normal(), "truncated", lambda fi, fo: 1 / fi),
    "lecun_uniform": (nn.initializers.lecun_uniform(), "uniform", lambda fi, fo: 1 / fi),
    "he_normal": (nn.initializers.he_normal(), "truncated", lambda fi, fo: 2 / fi),
    "kaiming_normal": (nn.initializers.kaiming_normal(), "truncated", lambda fi, fo: 2 / fi),
    "he_uniform": (nn.initializers.he_uniform(), "uniform", lambda fi, fo: 2 / fi),
    "fan_out_normal": (nn.initializers.variance_scaling(3.0, "fan_out", "normal"), "normal", lambda fi, fo: 3 / fo),
}


@pytest.mark.parametrize("name", list(INITS))
def test_variance_scaling_statistics(name: str) -> None:
    """Sample variance within 3% of scale / fan over 120,000 draws (its standard error is 0.4%); uniform draws reach
    but never pass sqrt(3 var); truncated ones stop at 2 standard deviations of the untruncated normal."""
    init, kind, variance = INITS[name]
    fan_in, fan_out = 400, 300
    w = init(tg.random.key(1), (fan_in, fan_out), dtypes.float32)
    assert w.shape == (fan_in, fan_out) and w.dtype == dtypes.float32
    a = w.numpy().astype(np.float64)
    var = variance(fan_in, fan_out)
    assert abs(a.mean()) < 3 * math.sqrt(var / a.size) * 2
    assert a.var() == pytest.approx(var, rel=0.03)
    if kind == "uniform":
        limit = math.sqrt(3 * var)
        assert np.abs(a).max() <= limit and np.abs(a).max() > 0.999 * limit
    if kind == "truncated":
        bound = 2 * math.sqrt(var) / 0.87962566103423978
        assert np.abs(a).max() <= bound * (1 + 1e-6) and np.abs(a).max() > 0.99 * bound


def test_fans_of_a_conv_kernel_include_the_window() -> None:
    """(O, I, KH, KW) with in_axis=1, out_axis=0: fan_in = I * KH * KW (JAX's receptive field rule)."""
    w = nn.initializers.he_uniform(in_axis=1, out_axis=0)(tg.random.key(2), (64, 32, 5, 5)).numpy()
    limit = math.sqrt(3 * 2 / (32 * 25))
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.999 * limit


@pytest.mark.x64
def test_simple_initialisers() -> None:
    k = tg.random.key(3)
    assert nn.initializers.zeros(k, (2, 3), dtypes.float16).numpy().tolist() == [[0, 0, 0]] * 2
    assert nn.initializers.ones(k, (2,)).numpy().tolist() == [1, 1]
    assert nn.initializers.constant(0.5)(k, (3,)).numpy().tolist() == [0.5] * 3
    n = nn.initializers.normal(0.5)(k, (20000,)).numpy()
    assert n.std() == pytest.approx(0.5, rel=0.03)
    u = nn.initializers.uniform(0.5)(k, (20000,)).numpy()
    assert u.min() >= 0 and u.max() < 0.5 and u.mean() == pytest.approx(0.25, rel=0.03)
    t = nn.initializers.truncated_normal(1.0, lower=-1.0, upper=0.5)(k, (20000,)).numpy()
    assert t.min() > -1.0 and t.max() < 0.5 and t.min() < -0.99 and t.max() > 0.49
    a, b = (nn.initializers.lecun_normal()(tg.random.key(s), (8, 8)).numpy() for s in (4, 4))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, nn.initializers.lecun_normal()(tg.random.key(5), (8, 8)).numpy())
    assert nn.initializers.he_normal()(k, (4, 4), dtypes.float64).dtype == dtypes.float64
    with pytest.raises(TypeError, match="needs a float dtype, got int32"):
        nn.initializers.normal()(k, (2,), dtypes.int32)
    with pytest.raises(ValueError, match="at least 2 axes to tell fan-in from fan-out, got \\(5,\\)"):
        nn.initializers.glorot_uniform()(k, (5,))


def test_initialisers_match_jax() -> None:
    """Uniform- and normal-based initialisers bit for bit; truncated-normal ones (built on tg.random.erfinv) to an
    ulp."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    ji, ti = jax.nn.initializers, nn.initializers
    jk, tk = jax.random.PRNGKey(7), tg.random.key(7)
    for make, shape, exact in [(lambda m: m.glorot_uniform(), (5, 4), True), (lambda m: m.he_uniform(), (7, 3), True),
                               (lambda m: m.normal(0.5), (6,), True), (lambda m: m.uniform(0.5), (6,), True),
                               (lambda m: m.variance_scaling(2.0, "fan_out", "normal"), (3, 9), True),
                               (lambda m: m.lecun_normal(in_axis=1, out_axis=0), (3, 2, 3, 3), False)]:
        want = np.asarray(make(ji)(jk, shape, jnp.float32))
        got = make(ti)(tk, shape, dtypes.float32).numpy()
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=3e-7)


def test_module_init_shapes_and_apply() -> None:
    model = nn.Sequential(nn.Conv2d(8, 3, stride=2), nn.relu, nn.Conv2d(4, (3, 3), padding="VALID", use_bias=False),
                          lambda x: x.reshape(x.shape[0], -1), nn.LayerNorm(), nn.Dropout(0.5), nn.Linear(10))
    key = tg.random.key(0)
    params = model.init(key, (2, 3, 16, 16))
    shapes = tg.tree.tree_map(lambda p: p.shape, params)
    assert shapes == {"layers_0": {"kernel": (8, 3, 3, 3), "bias": (8,)}, "layers_2": {"kernel": (4, 8, 3, 3)},
                      "layers_4": {"scale": (144,), "bias": (144,)}, "layers_5": {},
                      "layers_6": {"kernel": (144, 10), "bias": (10,)}}
    x = tg.asarray(rand(2, 3, 16, 16).astype(np.float32))
    again = model.init(key, x)           # an example input gives the same params as its shape
    for a, b in zip(tg.tree.tree_leaves(params), tg.tree.tree_leaves(again), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    y = model.apply(params, x, deterministic=True)
    p = tg.tree.tree_map(lambda t: t.numpy().astype(np.float64), params)
    h = np.maximum(np_conv2d(x.numpy().astype(np.float64), p["layers_0"]["kernel"], p["layers_0"]["bias"], 2,
                             "SAME", 1), 0)
    h = np_conv2d(h, p["layers_2"]["kernel"], None, 1, "VALID", 1).reshape(2, -1)
    h = np_layer_norm(h, p["layers_4"]["scale"], p["layers_4"]["bias"], (-1,), 1e-5)
    assert_close(y, h @ p["layers_6"]["kernel"] + p["layers_6"]["bias"], rtol=1e-4, atol=1e-4)
    emb = nn.Sequential(nn.Embedding(50, 16), nn.MultiHeadAttention(4, causal=True), nn.RMSNorm())
    ep = emb.init(key, (3, 7))          # a shape: the Embedding's example input is int32
    assert tg.tree.tree_map(lambda t: t.shape, ep)["layers_1"]["out"]["kernel"] == (16, 16)
    assert emb.apply(ep, tg.asarray(np.zeros((3, 7), np.int32))).shape == (3, 7, 16)


def test_linear_init_variance() -> None:
    w = nn.Linear(300).init(tg.random.key(9), (2, 400))["kernel"].numpy()
    assert w.var() == pytest.approx(1 / 400, rel=0.03)


def test_dropout_statistics_and_keys() -> None:
    x = tg.asarray(np.ones((200, 100), np.float32))
    y = nn.dropout(x, 0.3, tg.random.key(0)).numpy()
    kept = y != 0
    assert kept.mean() == pytest.approx(0.7, abs=0.01)
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(nn.dropout(x, 0.3, tg.random.key(0)).numpy(), y)
    assert not np.array_equal(nn.dropout(x, 0.3, tg.random.key(1)).numpy(), y)
    assert nn.dropout(x, 0.0, tg.random.key(0)) is x
    assert not nn.dropout(x, 1.0, tg.random.key(0)).numpy().any()
    model = nn.Sequential(nn.Dropout(0.5), nn.Dropout(0.5))
    a = nn.Sequential(nn.Dropout(0.5)).apply({"layers_0": {}}, x, key=tg.random.key(2)).numpy() != 0
    both = model.apply({"layers_0": {}, "layers_1": {}}, x, key=tg.random.key(2)).numpy() != 0
    assert both.mean() == pytest.approx(0.25, abs=0.01)        # the two layers draw different masks
    assert a.mean() == pytest.approx(0.5, abs=0.01)
    g = tg.grad(lambda t: nn.dropout(t, 0.3, tg.random.key(0)).sum())(x).numpy()
    np.testing.assert_allclose(g, y, rtol=1e-6)                  # the gradient is the same mask, scaled


def test_attention_dropout_needs_a_key() -> None:
    mha = nn.MultiHeadAttention(2, dropout_rate=0.2)
    x = tg.asarray(rand(2, 4, 8).astype(np.float32))
    p = mha.init(tg.random.key(0), x)
    with pytest.raises(nn.ModuleError, match="needs a random key for attention dropout"):
        mha.apply(p, x)
    a = mha.apply(p, x, key=tg.random.key(1)).numpy()
    b = mha.apply(p, x, deterministic=True).numpy()
    assert a.shape == b.shape == (2, 4, 8) and not np.allclose(a, b)


def test_training_a_small_cnn_under_jit() -> None:
    """A conv net with dropout learns a synthetic task (is the bright square on the left or the right?) with Adam
    under jit: one trace for every step (the dropout key is an argument), and the loss falls to a small fraction of
    where it started."""
    rng = np.random.default_rng(0)
    n = 32
    labels = rng.integers(0, 2, n)
    imgs = rng.normal(0, 0.3, (n, 1, 8, 8)).astype(np.float32)
    for i, lab in enumerate(labels):
        c = 1 + 4 * lab
        imgs[i, 0, 2:5, c:c + 2] += 2.0
    model = nn.Sequential(nn.Conv2d(4, 3), nn.relu, lambda x: nn.max_pool2d(x, 2),
                          lambda x: x.reshape(x.shape[0], -1), nn.Dropout(0.1), nn.Linear(2))
    params = model.init(tg.random.key(0), (n, 1, 8, 8))
    opt = tg.optim.adam(0.05)
    state = opt.init(params)
    x, y = tg.asarray(imgs), tg.asarray(labels.astype(np.int32))

    @tg.jit
    def step(params: dict, state: object, x: tg.Tensor, y: tg.Tensor, key: tg.Tensor) -> tuple:
        def loss_fn(p: dict) -> tg.Tensor:
            return nn.softmax_cross_entropy_with_integer_labels(model.apply(p, x, key=key), y).mean()
        loss, grads = tg.value_and_grad(loss_fn)(params)
        updates, state = opt.update(grads, state, params)
        return tg.optim.apply_updates(params, updates), state, loss

    losses = []
    for i in range(25):
        params, state, loss = step(params, state, x, y, tg.random.fold_in(tg.random.key(1), i))
        losses.append(loss.item())
    assert step.trace_count == 1
    assert losses[-1] < 0.1 and losses[-1] < losses[0] / 4
