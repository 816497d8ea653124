"""tg.experimental.ode.odeint: values against scipy.integrate.solve_ivp, the adjoint gradient against finite
differences of a float64 scipy solution, pytree states, jit, vmap and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.experimental.ode import odeint

integrate = pytest.importorskip("scipy.integrate")

TS = np.array([0.0, 0.4, 1.3], np.float32)
Y0 = np.array([1.0, 2.0], np.float32)
W = np.array([[0.5, -1.0], [1.0, 0.2]], np.float32)


def coupled(y: tg.Tensor, t: tg.Tensor, k: tg.Tensor) -> tg.Tensor:
    return -k * y + tnp.sin(t) * y[::-1]


def scipy_solve(rhs: object, y0: np.ndarray, ts: np.ndarray) -> np.ndarray:
    sol = integrate.solve_ivp(rhs, (ts[0], ts[-1]), y0, t_eval=ts, rtol=1e-12, atol=1e-12)
    return sol.y.T


def coupled_np(y0: np.ndarray, ts: np.ndarray, k: float) -> np.ndarray:
    return scipy_solve(lambda t, y: -k * y + np.sin(t) * y[::-1], y0, ts)


def central(f: object, x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x = np.asarray(x, np.float64)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        d = np.zeros(x.shape)
        d[i] = eps
        out[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return out


def test_values_match_scipy_at_the_requested_times() -> None:
    ts = np.linspace(0.0, 2.0, 7).astype(np.float32)
    got = odeint(coupled, tnp.asarray(Y0), tnp.asarray(ts), 0.7)
    assert got.shape == (7, 2) and got.dtype == tg.dtypes.float32
    np.testing.assert_allclose(np.asarray(got), coupled_np(Y0.astype(np.float64), ts, 0.7), rtol=2e-6, atol=2e-6)


def test_pytree_state_and_args() -> None:
    def rhs(s: dict, t: tg.Tensor, c: tuple) -> dict:
        return {"x": s["v"], "v": -c[0] * s["x"] - c[1] * s["v"]}
    out = odeint(rhs, {"x": tnp.asarray([1.0]), "v": tnp.asarray([0.0])}, tnp.asarray(TS), (4.0, 0.3))
    want = scipy_solve(lambda t, y: [y[1], -4.0 * y[0] - 0.3 * y[1]], [1.0, 0.0], TS.astype(np.float64))
    assert set(out) == {"x", "v"} and out["x"].shape == (3, 1)
    np.testing.assert_allclose(np.asarray(out["x"])[:, 0], want[:, 0], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(np.asarray(out["v"])[:, 0], want[:, 1], rtol=2e-6, atol=2e-6)


def test_adjoint_gradient_of_y0_t_and_args_matches_finite_differences() -> None:
    def loss(y0: tg.Tensor, ts: tg.Tensor, k: tg.Tensor) -> tg.Tensor:
        return (odeint(coupled, y0, ts, k) ** 2).sum()

    def loss_np(y0: np.ndarray, ts: np.ndarray, k: float) -> float:
        return float((coupled_np(y0, ts, k) ** 2).sum())

    y0, ts, k = Y0.astype(np.float64), TS.astype(np.float64), 0.7
    g_y0, g_t, g_k = tg.grad(loss, argnums=(0, 1, 2))(tnp.asarray(Y0), tnp.asarray(TS), tnp.asarray(np.float32(k)))
    np.testing.assert_allclose(np.asarray(g_y0), central(lambda v: loss_np(v, ts, k), y0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(g_t), central(lambda v: loss_np(y0, v, k), ts), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(float(g_k), central(lambda v: loss_np(y0, ts, float(v)), np.array(k)), rtol=1e-4)


def neural_loss_np(w: np.ndarray, y0: np.ndarray) -> float:
    return float(scipy_solve(lambda t, y: np.tanh(w @ y), y0, TS.astype(np.float64))[-1].sum())


def test_gradient_of_closed_over_parameters_eager_and_under_jit() -> None:
    # JAX's neural-ODE shape: the dynamics close over the parameters being trained
    def loss(w: tg.Tensor, y0: tg.Tensor) -> tg.Tensor:
        return odeint(lambda y, t: tnp.tanh(w @ y), y0, tnp.asarray(TS))[-1].sum()

    w64, y64 = W.astype(np.float64), Y0.astype(np.float64)
    want_w = central(lambda v: neural_loss_np(v, y64), w64)
    want_y = central(lambda v: neural_loss_np(w64, v), y64)
    for grad in (tg.grad(loss, argnums=(0, 1)), tg.jit(tg.grad(loss, argnums=(0, 1)))):
        g_w, g_y = grad(tnp.asarray(W), tnp.asarray(Y0))
        np.testing.assert_allclose(np.asarray(g_w), want_w, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np.asarray(g_y), want_y, rtol=1e-4, atol=1e-4)


def test_jit_and_vmap_agree_with_each_solve() -> None:
    ts, k = tnp.asarray(TS), tnp.asarray(np.float32(0.7))
    starts = np.array([[1.0, 2.0], [3.0, -1.0], [0.0, 0.5]], np.float32)
    batched = tg.vmap(lambda y0: odeint(coupled, y0, ts, k))(tnp.asarray(starts))
    jitted = tg.jit(lambda y0: odeint(coupled, y0, ts, k))
    assert batched.shape == (3, 3, 2)
    for i, y0 in enumerate(starts):
        want = coupled_np(y0.astype(np.float64), TS.astype(np.float64), 0.7)
        np.testing.assert_allclose(np.asarray(batched[i]), want, rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(np.asarray(jitted(tnp.asarray(y0))), want, rtol=2e-6, atol=2e-6)


def test_hmax_bounds_the_step_and_keeps_the_answer() -> None:
    ts = np.array([0.0, 1.0], np.float32)
    got = odeint(lambda y, t: -y, tnp.ones(1), tnp.asarray(ts), hmax=0.05)
    np.testing.assert_allclose(np.asarray(got)[:, 0], np.exp(-ts), rtol=2e-6)


def test_bad_input_errors_name_the_argument() -> None:
    with pytest.raises(TypeError, match="odeint: the \\*args"):
        odeint(lambda y, t, s: y, tnp.ones(2), tnp.asarray(TS), "fast")
    with pytest.raises(ValueError, match="odeint: t must be a 1-d array"):
        odeint(lambda y, t: y, tnp.ones(2), tnp.ones((2, 2)))
    with pytest.raises(TypeError, match="odeint: func must be a function"):
        odeint(3.0, tnp.ones(2), tnp.asarray(TS))
    with pytest.raises(ValueError, match="odeint: func must return dy/dt with y's structure"):
        odeint(lambda y, t: tnp.ones(3), tnp.ones(2), tnp.asarray(TS))


def test_per_example_gradients_under_vmap() -> None:
    def loss(y0: tg.Tensor, k: tg.Tensor) -> tg.Tensor:
        return odeint(lambda y, t, k: -k * y, y0, tnp.asarray([0.0, 0.5, 1.0]), k)[-1].sum()
    ks = np.array([0.5, 1.0, 2.0], np.float32)
    got = tg.vmap(tg.grad(loss, argnums=1), in_axes=(None, 0))(tnp.ones(2), tnp.asarray(ks))
    np.testing.assert_allclose(np.asarray(got), -2 * np.exp(-ks), rtol=1e-5)   # d/dk of 2 exp(-k)
