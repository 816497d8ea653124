"""tg.scipy.sparse.linalg's cg and bicgstab (jax.scipy.sparse.linalg's): solutions against numpy's dense solve, with
matrices and matrix-free operators, pytrees, preconditioners, x0, maxiter, complex systems, under jit (one device
loop, no retrace) and differentiated implicitly (the gradient solves with the transposed operator)."""
from __future__ import annotations

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.scipy.sparse.linalg import bicgstab, cg


def _spd(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, n))
    return (q @ q.T / n + np.eye(n)).astype(np.float32)


def test_the_module_is_where_jax_has_it() -> None:
    assert tg.scipy.sparse.linalg.cg is cg and tg.scipy.sparse.linalg.bicgstab is bicgstab


@pytest.mark.parametrize("solver", [cg, bicgstab])
def test_solves_a_matrix_and_a_matrix_free_operator(solver) -> None:
    a = _spd(40)
    b = np.random.default_rng(1).standard_normal(40).astype(np.float32)
    want = np.linalg.solve(a.astype(np.float64), b)
    x, info = solver(tnp.asarray(a), tnp.asarray(b), tol=1e-6)
    assert info is None
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-4, atol=1e-4)
    A = tnp.asarray(a)
    x, _ = solver(lambda v: A @ v, tnp.asarray(b), tol=1e-6)
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-4, atol=1e-4)


def test_cg_with_a_preconditioner_x0_and_a_pytree() -> None:
    a, c = _spd(30, 2), _spd(20, 3)
    b = {"u": np.ones(30, np.float32), "v": np.arange(20, dtype=np.float32)}
    A, C = tnp.asarray(a), tnp.asarray(c)
    op = lambda t: {"u": A @ t["u"], "v": C @ t["v"]}   # noqa: E731
    jacobi = lambda t: {"u": t["u"] / tnp.diagonal(A), "v": t["v"] / tnp.diagonal(C)}   # noqa: E731
    x0 = {"u": tnp.ones(30), "v": tnp.zeros(20)}
    x, _ = cg(op, {k: tnp.asarray(v) for k, v in b.items()}, x0=x0, M=jacobi, tol=1e-6)
    np.testing.assert_allclose(x["u"].numpy(), np.linalg.solve(a, b["u"]), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(x["v"].numpy(), np.linalg.solve(c, b["v"]), rtol=1e-4, atol=1e-4)


def test_maxiter_stops_the_loop_and_bicgstab_solves_a_nonsymmetric_system() -> None:
    a = _spd(50, 4)
    b = np.ones(50, np.float32)
    x1, _ = cg(tnp.asarray(a), tnp.asarray(b), maxiter=1)   # one step from 0: along b, the exact line minimum
    alpha = (b @ b) / (b @ a @ b)
    np.testing.assert_allclose(x1.numpy(), alpha * b, rtol=1e-5)
    n = a + np.triu(np.full((50, 50), 0.02, np.float32), 1)
    x, _ = bicgstab(tnp.asarray(n), tnp.asarray(b), tol=1e-6)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(n, b), rtol=1e-4, atol=1e-4)


def test_a_complex_hermitian_system() -> None:
    rng = np.random.default_rng(5)
    q = rng.standard_normal((16, 16)) + 1j * rng.standard_normal((16, 16))
    a = (q @ q.conj().T / 16 + np.eye(16)).astype(np.complex64)
    b = (rng.standard_normal(16) + 1j * rng.standard_normal(16)).astype(np.complex64)
    x, _ = cg(tnp.asarray(a), tnp.asarray(b), tol=1e-6)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-4, atol=1e-4)


def test_under_jit_a_new_right_hand_side_does_not_retrace() -> None:
    a = _spd(32, 6)
    A = tnp.asarray(a)
    solve = tg.jit(lambda b: cg(lambda v: A @ v, b, tol=1e-6)[0])
    for seed in range(3):
        b = np.random.default_rng(seed).standard_normal(32).astype(np.float32)
        np.testing.assert_allclose(solve(tnp.asarray(b)).numpy(), np.linalg.solve(a, b), rtol=1e-4, atol=1e-4)
    assert solve.trace_count == 1


@pytest.mark.parametrize("solver", [cg, bicgstab])
def test_gradients_are_implicit_through_the_operator_and_b(solver) -> None:
    # f(b, s) = sum(x), (s I + K) x = b: df/db = (s I + K)^-T 1, df/ds = -x . (s I + K)^-T 1
    k = _spd(12, 7)
    K = tnp.asarray(k)
    b = np.linspace(-1, 1, 12).astype(np.float32)

    def f(b: tg.Tensor, s: tg.Tensor) -> tg.Tensor:
        return solver(lambda v: s * v + K @ v, b, tol=1e-7)[0].sum()
    gb, gs = tg.grad(f, argnums=(0, 1))(tnp.asarray(b), tnp.asarray(np.float32(2.0)))
    m = 2.0 * np.eye(12) + k.astype(np.float64)
    w = np.linalg.solve(m.T, np.ones(12))
    np.testing.assert_allclose(gb.numpy(), w, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(gs.numpy(), -np.linalg.solve(m, b) @ w, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("solver", [cg, bicgstab])
def test_forward_mode_and_hessians_solve_with_the_operator(solver) -> None:
    # jvp transposes the backward: A^-T by the solver's while loop had no transpose ("cannot differentiate the while
    # loop ... in reverse mode"); JAX's JVP solves A dx = db - dA x
    k = _spd(6, 8)
    m = 2.0 * np.eye(6) + k.astype(np.float64)
    b = np.linspace(-1, 1, 6).astype(np.float32)
    x = np.linalg.solve(m, b)

    def solve(b: tg.Tensor, s: tg.Tensor) -> tg.Tensor:
        return solver(lambda v: s * v + tnp.asarray(k) @ v, b, tol=1e-7)[0]
    s2 = tnp.asarray(np.float32(2.0))
    _, t = tg.jvp(solve, (tnp.asarray(b), s2), (tnp.ones(6), tnp.asarray(np.float32(0.5))))
    np.testing.assert_allclose(t.numpy(), np.linalg.solve(m, np.ones(6) - 0.5 * x), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(tg.jacfwd(solve)(tnp.asarray(b), s2).numpy(), np.linalg.inv(m), rtol=1e-3, atol=1e-4)
    # d2/db2 sum(x^3) = A^-T diag(6 x) A^-1
    hess = tg.hessian(lambda b: (solve(b, s2) ** 3).sum())(tnp.asarray(b)).numpy()
    inv = np.linalg.inv(m)
    np.testing.assert_allclose(hess, inv.T @ np.diag(6 * x) @ inv, rtol=1e-3, atol=1e-4)


def test_errors_name_the_solver_and_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="cg: the linear operator A must be a square matrix"):
        cg(tnp.ones((3, 4)), tnp.ones(3))
    with pytest.raises(ValueError, match="bicgstab: arrays in x0 and b must have matching shapes"):
        bicgstab(lambda v: v, tnp.ones(3), x0=tnp.ones(4))
    with pytest.raises(TypeError, match="cg: the preconditioner M must be a function or a square matrix"):
        cg(lambda v: v, tnp.ones(3), M="jacobi")
