"""jax.nn's later activations in tg.nn: values against numpy's formulas over hypothesis-drawn arrays, gradients at the
kinks as JAX defines them and by finite differences elsewhere, logmeanexp's axes and masks, dtypes, jit and vmap,
errors; and jax.nn itself as the oracle when jax is installed."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
from tgfx.dtypes import dtypes


def _np_softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x, 0.0)


def _np_log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - exp(-x)) accurate in float64 at both ends (either form alone cancels at one of them)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x < math.log(2), np.log(-np.expm1(-x)), np.log1p(-np.exp(-x)))


def _np_relu6(x: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x, 0.0), 6.0)


REF = {   # name: numpy formula in float64
    "relu6": _np_relu6,
    "hard_sigmoid": lambda x: _np_relu6(x + 3) / 6,
    "hard_silu": lambda x: x * _np_relu6(x + 3) / 6,
    "hard_swish": lambda x: x * _np_relu6(x + 3) / 6,
    "mish": lambda x: x * np.tanh(_np_softplus(x)),
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "sparse_plus": lambda x: np.where(x <= -1, 0.0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: 0.5 * np.clip(x + 1, 0.0, 2.0),
    "identity": lambda x: x,
    "tanh": np.tanh,
}

arrays = hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5),
                    elements=st.floats(-12, 12, width=32))


@pytest.mark.parametrize("name", sorted(REF))
@settings(max_examples=15)
@given(x=arrays)
def test_values_match_numpy(name: str, x: np.ndarray) -> None:
    got = getattr(tg.nn, name)(tg.asarray(x))
    assert got.shape == x.shape and got.dtype == dtypes.float32
    np.testing.assert_allclose(got.numpy(), REF[name](x.astype(np.float64)), rtol=2e-6, atol=2e-6)


@settings(max_examples=20)
@given(x=hnp.arrays(np.float32, hnp.array_shapes(max_dims=2, max_side=6),
                    elements=st.floats(2.0 ** -10, 80, width=32)))
def test_log1mexp_matches_numpy(x: np.ndarray) -> None:
    want = _np_log1mexp(x.astype(np.float64))
    np.testing.assert_allclose(tg.nn.log1mexp(tg.asarray(x)).numpy(), want, rtol=5e-6, atol=1e-30)


def test_log1mexp_edges() -> None:
    out = tg.nn.log1mexp(tg.asarray(np.float32([0.0, -1.0, 1e-10, 100.0, math.inf]))).numpy()
    assert out[0] == -np.inf and np.isnan(out[1])
    np.testing.assert_allclose(out[2], math.log(1e-10), rtol=1e-6)     # no cancellation near 0
    assert -1e-40 < out[3] <= 0.0                                       # exp(-100) is below float32's normals
    np.testing.assert_allclose(tg.nn.log1mexp(tg.asarray(np.float32(30.0))).numpy(), -math.exp(-30.0), rtol=1e-6)
    assert out[4] == 0.0


# ---- gradients ----
KINKS = [  # (name, x, the derivative JAX gives there)
    ("relu6", 0.0, 0.0), ("relu6", 6.0, 0.0), ("relu6", 3.0, 1.0), ("relu6", -1.0, 0.0), ("relu6", 7.0, 0.0),
    ("hard_sigmoid", -3.0, 0.0), ("hard_sigmoid", 3.0, 0.0), ("hard_sigmoid", 0.0, 1 / 6),
    ("hard_silu", -3.0, 0.0), ("hard_silu", 3.0, 1.0), ("hard_silu", 0.0, 0.5), ("hard_swish", 3.0, 1.0),
    ("sparse_plus", -1.0, 0.0), ("sparse_plus", 1.0, 1.0), ("sparse_plus", 0.0, 0.5),
    ("sparse_sigmoid", -1.0, 0.25), ("sparse_sigmoid", 1.0, 0.25), ("sparse_sigmoid", 0.0, 0.5),
    ("sparse_sigmoid", 2.0, 0.0), ("soft_sign", 0.0, 1.0), ("squareplus", 0.0, 0.5), ("mish", 0.0, 0.6),
    ("identity", 0.0, 1.0), ("tanh", 0.0, 1.0), ("log1mexp", 0.0, math.inf), ("log1mexp", math.log(2), 1.0),
]


@pytest.mark.parametrize(("name", "x", "want"), KINKS)
def test_gradient_at_kinks(name: str, x: float, want: float) -> None:
    g = float(tg.grad(getattr(tg.nn, name))(tg.asarray(np.float32(x))).numpy())
    assert g == pytest.approx(want, rel=1e-6, abs=1e-7)


SMOOTH = ["relu6", "hard_sigmoid", "hard_silu", "mish", "soft_sign", "squareplus", "sparse_plus", "sparse_sigmoid",
          "log1mexp"]


@pytest.mark.parametrize("name", SMOOTH)
def test_gradient_finite_differences(name: str) -> None:
    """Away from the kinks the gradient is the derivative: central differences in float64."""
    x = np.float64([0.3, 0.9, 1.7, 2.5, 4.2, 5.5] if name == "log1mexp" else [-4.5, -2.2, -0.6, 0.4, 1.6, 2.7, 5.1])
    g = tg.grad(lambda v: getattr(tg.nn, name)(v).sum())(tg.asarray(x.astype(np.float32))).numpy()
    f = REF.get(name, _np_log1mexp)
    h = 1e-6
    np.testing.assert_allclose(g, (f(x + h) - f(x - h)) / (2 * h), rtol=1e-4, atol=1e-6)


def test_log1mexp_gradient_is_jax_rule() -> None:
    """The derivative is 1 / expm1(x) (JAX's custom rule): finite and accurate far out, where the plain chain rule
    through log1p(-exp(-x)) would also work but the masked branch would poison x near 0."""
    x = np.float32([1e-3, 0.5, 3.0, 30.0])
    g = tg.grad(lambda v: tg.nn.log1mexp(v).sum())(tg.asarray(x)).numpy()
    np.testing.assert_allclose(g, 1 / np.expm1(x.astype(np.float64)), rtol=2e-6)
    second = tg.grad(tg.grad(tg.nn.log1mexp))(tg.asarray(np.float32(0.5))).numpy()
    np.testing.assert_allclose(second, -math.exp(0.5) / math.expm1(0.5) ** 2, rtol=1e-5)


# ---- logmeanexp ----
@settings(max_examples=20)
@given(data=st.data())
def test_logmeanexp_matches_numpy(data: st.DataObject) -> None:
    x = data.draw(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                             elements=st.floats(-30, 30, width=32)))
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    keepdims = data.draw(st.booleans())
    mask = data.draw(st.one_of(st.none(), hnp.arrays(np.bool_, x.shape)))
    x64 = x.astype(np.float64)
    kept = x64 if mask is None else np.where(mask, x64, -np.inf)
    count = np.sum(np.ones_like(x64) if mask is None else mask, axis=axis, keepdims=keepdims)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.max(kept, axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        lse = np.log(np.sum(np.exp(kept - m), axis=axis, keepdims=True)) + m
        want = (lse if keepdims else np.squeeze(lse, axis)) - np.log(count)
    got = tg.nn.logmeanexp(tg.asarray(x), axis=axis, keepdims=keepdims,
                           where=None if mask is None else tg.asarray(mask)).numpy()
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_logmeanexp_stable_and_integer_input() -> None:
    big = tg.nn.logmeanexp(tg.asarray(np.float32([1000.0, 1000.0, 1000.0]))).numpy()
    assert big == pytest.approx(1000.0)
    out = tg.nn.logmeanexp(tg.asarray(np.int32([[0, 2], [1, 1]])), axis=1)
    assert out.dtype == dtypes.float32
    np.testing.assert_allclose(out.numpy(), [math.log((1 + math.e ** 2) / 2), 1.0], rtol=1e-6)
    # a slice with nothing selected: log(0 / 0), NaN as in JAX
    assert np.isnan(tg.nn.logmeanexp(tg.asarray(np.float32([1.0, 2.0])), where=tg.asarray([False, False])).numpy())
    # logsumexp takes the same mask
    np.testing.assert_allclose(tg.nn.logsumexp(tg.asarray(np.float32([1.0, 5.0, 2.0])),
                                               where=tg.asarray([True, False, True])).numpy(), np.logaddexp(1, 2),
                               rtol=1e-6)


def test_logmeanexp_gradient_is_masked_softmax() -> None:
    x = np.float32([[0.5, -1.0, 2.0], [0.0, 0.3, -0.2]])
    w = np.array([[True, False, True], [True, True, True]])
    g = tg.grad(lambda v: tg.nn.logmeanexp(v, axis=1, where=tg.asarray(w)).sum())(tg.asarray(x)).numpy()
    e = np.where(w, np.exp(x.astype(np.float64)), 0.0)
    np.testing.assert_allclose(g, e / e.sum(1, keepdims=True), rtol=1e-6, atol=1e-7)


# ---- dtypes, jit, vmap, errors ----
@pytest.mark.parametrize("name", sorted(set(REF) | {"log1mexp"}))
def test_dtypes(name: str) -> None:
    f = getattr(tg.nn, name)
    for d in (dtypes.float16, dtypes.bfloat16):
        assert f(tg.asarray(np.float32([0.5, 2.0])).astype(d)).dtype == d
    ints = f(tg.asarray(np.int32([1, 2])))
    assert ints.dtype == (dtypes.int32 if name == "identity" else dtypes.float32)


def test_jit_and_vmap_agree_with_eager() -> None:
    names = sorted(set(REF) | {"log1mexp"})
    x = tg.asarray(np.float32([[0.2, 1.5, 3.0, 6.5], [0.7, 2.0, 4.5, 9.0]]))

    def all_of(v: tg.Tensor) -> tuple[tg.Tensor, ...]:
        return (*(getattr(tg.nn, n)(v) for n in names), tg.nn.logmeanexp(v, axis=-1))
    eager = all_of(x)
    for got in (tg.jit(all_of)(x), tg.vmap(all_of)(x)):
        for a, b in zip(got, eager, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
    jitted = tg.jit(tg.grad(lambda v: (tg.nn.relu6(v) + tg.nn.log1mexp(v) + tg.nn.sparse_sigmoid(v)).sum()))
    np.testing.assert_allclose(jitted(tg.asarray(np.float32([1.0, 6.0]))).numpy(),
                               [1.0 + 1 / math.expm1(1.0) + 0.25, 0.0 + 1 / math.expm1(6.0)], rtol=1e-6)


def test_squareplus_b() -> None:
    x = np.float32([-2.0, 0.0, 3.0])
    np.testing.assert_allclose(tg.nn.squareplus(tg.asarray(x), b=0.0).numpy(), np.maximum(x, 0))   # b = 0: relu
    b = np.float32([1.0, 9.0, 0.5])
    np.testing.assert_allclose(tg.nn.squareplus(tg.asarray(x), tg.asarray(b)).numpy(), (x + np.sqrt(x * x + b)) / 2,
                               rtol=1e-6)


def test_errors() -> None:
    x = tg.asarray(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"logmeanexp: `where` of shape \(2, 2\) does not broadcast to x's shape"):
        tg.nn.logmeanexp(x, axis=1, where=tg.asarray(np.ones((2, 2), bool)))
    with pytest.raises(ValueError, match="logmeanexp"):
        tg.nn.logmeanexp(x, axis=2)
    with pytest.raises(ValueError, match=r"logsumexp: `where` of shape \(4,\)"):
        tg.nn.logsumexp(x, where=tg.asarray(np.ones(4, bool)))


# ---- jax.nn as the oracle ----
@pytest.mark.parametrize("name", sorted(set(REF) | {"log1mexp"}))
def test_against_jax(name: str) -> None:
    jax = pytest.importorskip("jax")
    x = np.float32([-7, -6, -3.5, -3, -1, -0.5, 0, 0.5, 1, 2.9, 3, 5.9, 6, 6.1, 40])
    if name == "log1mexp":
        x = np.abs(x)
    ours, theirs = getattr(tg.nn, name), getattr(jax.nn, name)
    np.testing.assert_allclose(ours(tg.asarray(x)).numpy(), np.asarray(theirs(x)), rtol=3e-7, atol=1e-7)
    g = [float(tg.grad(ours)(tg.asarray(v)).numpy()) for v in x]
    np.testing.assert_allclose(g, [float(jax.grad(theirs)(v)) for v in x], rtol=3e-6, atol=1e-7)


def test_logmeanexp_against_jax() -> None:
    jax = pytest.importorskip("jax")
    x = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    w = np.random.RandomState(1).rand(3, 4) > 0.3
    for kw in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}, {"axis": 1, "where": w}):
        ours = tg.nn.logmeanexp(tg.asarray(x), **{k: tg.asarray(v) if k == "where" else v for k, v in kw.items()})
        np.testing.assert_allclose(ours.numpy(), np.asarray(jax.nn.logmeanexp(x, **kw)), rtol=1e-6)
