"""tg.scipy.optimize: minimize (BFGS) and line_search, against known minima, scipy, and JAX when installed."""
import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.scipy import optimize


def rosen(x: tg.Tensor) -> tg.Tensor:
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.x64
def test_bfgs_finds_the_rosenbrock_minimum_as_scipy_does() -> None:
    scipy_optimize = pytest.importorskip("scipy.optimize")
    x0 = np.array([-1.2, 1.0, -0.5, 0.3])
    res = optimize.minimize(rosen, tnp.asarray(x0), method="BFGS")
    assert res.success.item() and res.status.item() == 0
    np.testing.assert_allclose(res.x.numpy(), np.ones(4), atol=1e-6)
    assert res.fun.item() < 1e-12 and np.abs(res.jac.numpy()).max() < 1e-5
    want = scipy_optimize.minimize(lambda x: np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2), x0,
                                   method="BFGS")
    np.testing.assert_allclose(res.x.numpy(), want.x, atol=1e-4)   # (both stop once |grad| < 1e-5)
    # its inverse Hessian estimate stays symmetric positive definite, and is rough near the true one at the minimum
    h = res.hess_inv.numpy()
    np.testing.assert_allclose(h, h.T, rtol=1e-9, atol=1e-12)
    assert np.linalg.eigvalsh(h).min() > 0
    np.testing.assert_allclose(h @ tg.hessian(rosen)(res.x).numpy(), np.eye(4), atol=0.35)


@pytest.mark.x64
def test_bfgs_on_a_quadratic_with_args_under_jit() -> None:
    rng = np.random.default_rng(0)
    m = rng.standard_normal((6, 6))
    a, b = m @ m.T + 6 * np.eye(6), rng.standard_normal(6)

    def quadratic(x: tg.Tensor, a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
        return 0.5 * x @ a @ x - b @ x

    run = tg.jit(lambda a, b: optimize.minimize(quadratic, tnp.zeros(6), args=(a, b), method="BFGS", tol=1e-10))
    res = run(tnp.asarray(a), tnp.asarray(b))
    np.testing.assert_allclose(res.x.numpy(), np.linalg.solve(a, b), rtol=1e-9, atol=1e-10)
    assert res.success.item() and res.nit.item() <= 12 and res.nfev.item() >= res.nit.item()
    capped = optimize.minimize(quadratic, tnp.zeros(6), args=(tnp.asarray(a), tnp.asarray(b)), method="bfgs",
                               options={"maxiter": 2})
    assert capped.nit.item() == 2 and capped.status.item() == 1 and not capped.success.item()


@pytest.mark.x64
def test_line_search_meets_the_strong_wolfe_conditions() -> None:
    def f(x: tg.Tensor) -> tg.Tensor:
        return tnp.sum((x - 3.0) ** 4) + tnp.sum(x ** 2)

    xk = tnp.asarray([0.0, 1.0])
    g = tg.grad(f)(xk)
    res = optimize.line_search(f, xk, -g)
    assert not res.failed.item() and res.status.item() == 0
    a = res.a_k.item()
    f0, d0 = f(xk).item(), -float(g @ g)
    x1 = xk - a * g
    assert f(x1).item() <= f0 + 1e-4 * a * d0
    assert abs(float(tg.grad(f)(x1) @ -g)) <= 0.9 * abs(d0)
    np.testing.assert_allclose(res.f_k.item(), f(x1).item(), rtol=1e-12)


def test_minimize_errors_name_the_argument() -> None:
    x0 = tnp.zeros(3)
    with pytest.raises(ValueError, match="method 'CG'"):
        optimize.minimize(rosen, x0, method="CG")
    with pytest.raises(TypeError, match="args must be a tuple"):
        optimize.minimize(rosen, x0, args=[1.0], method="BFGS")
    with pytest.raises(ValueError, match="x0 must be a 1-d array"):
        optimize.minimize(rosen, tnp.zeros((2, 2)), method="BFGS")
    with pytest.raises(ValueError, match="unknown options"):
        optimize.minimize(rosen, x0, method="BFGS", options={"maxfun": 3})


@pytest.mark.x64
def test_bfgs_takes_jaxs_steps() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jopt = pytest.importorskip("jax.scipy.optimize")
    x0 = np.array([-1.2, 1.0, -0.5, 0.3])
    with jax.enable_x64(True):
        want = jopt.minimize(lambda x: jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2),
                             jnp.asarray(x0), method="BFGS")
    got = optimize.minimize(rosen, tnp.asarray(x0), method="BFGS")
    assert (got.nit.item(), got.nfev.item()) == (int(want.nit), int(want.nfev))
    np.testing.assert_allclose(got.x.numpy(), np.asarray(want.x), rtol=1e-10)
