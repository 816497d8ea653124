"""`tgfx.scipy.sparse.linalg`: the iterative solvers `cg` and `bicgstab`, as `jax.scipy.sparse.linalg`.

A is a function (a matrix-free operator: `lambda v: laplacian(v)`) or a square matrix; b and x0 are arrays or
pytrees of arrays (the operator maps that structure to itself). Each solve is one device loop (`tg.lax.while_loop`)
until |r|^2 <= max(tol^2 |b|^2, atol^2) (scipy's non-legacy rule) or `maxiter` steps (default 10 times b's size).
The loop bodies, their order of operations and the stopping tests are JAX's, so the iterates are the same up to
rounding. The solve is differentiated implicitly (`tg.lax.custom_linear_solve`), not through the loop: the gradient
with respect to b, or to what A closes over, solves once more with the transposed operator (A itself for cg,
which needs A symmetric positive definite). `info` is None, as in JAX: test the residual to know it converged.

>>> from tgfx.scipy.sparse.linalg import cg
>>> x, _ = cg(lambda v: A @ v, b, tol=1e-6)
>>> x, _ = cg(A, b, M=lambda r: r / tnp.diagonal(A))     # a Jacobi preconditioner
"""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import tgfx.numpy as tnp
from tgfx.lax import custom_linear_solve, while_loop
from tgfx.tensor import Tensor, to_tensor
from tgfx.tree import tree_leaves, tree_map, tree_structure

Operator = Callable[[Any], Any]


def _vdot_real(x: Tensor, y: Tensor) -> Tensor:
    """Re(x^H y) without the real-imaginary cross terms (z^H M z of a Hermitian positive definite M is real)."""
    out = tnp.vdot(tnp.real(x), tnp.real(y))
    if x.dtype.is_complex or y.dtype.is_complex:
        out = out + tnp.vdot(tnp.imag(x), tnp.imag(y))
    return out


def _vdot_real_tree(x: Any, y: Any) -> Tensor:
    return sum(tree_leaves(tree_map(_vdot_real, x, y)))


def _vdot_tree(x: Any, y: Any) -> Tensor:
    return sum(tree_leaves(tree_map(tnp.vdot, x, y)))


def _mul(scalar: Tensor, tree: Any) -> Any:
    return tree_map(lambda v: scalar * v, tree)


def _add(x: Any, y: Any) -> Any:
    return tree_map(operator.add, x, y)


def _sub(x: Any, y: Any) -> Any:
    return tree_map(operator.sub, x, y)


def _identity(x: Any) -> Any:
    return x


def _matvec(f: Any, name: str, what: str) -> Operator:
    """A function of vectors from `f`: a callable as it is, a square matrix as `f @ v`."""
    if callable(f):
        return f
    if hasattr(f, "shape") or hasattr(f, "__array__"):
        m = to_tensor(f)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError(f"{name}: the {what} must be a square matrix or a function of vectors, but has shape "
                             f"{m.shape}")
        return functools.partial(tnp.matmul, m)
    raise TypeError(f"{name}: the {what} must be a function or a square matrix, got {type(f).__name__}")


def _cg_solve(A: Operator, b: Any, x0: Any, *, maxiter: int, tol: float, atol: float, M: Operator) -> Any:
    bs = _vdot_real_tree(b, b)
    atol2 = tnp.maximum(tnp.square(tol) * bs, tnp.square(atol))

    def cond_fun(value: tuple) -> Tensor:
        _, r, gamma, _, k = value
        rs = tnp.real(gamma) if M is _identity else _vdot_real_tree(r, r)
        return (rs > atol2) & (k < maxiter)

    def body_fun(value: tuple) -> tuple:
        x, r, gamma, p, k = value
        ap = A(p)
        alpha = gamma / _vdot_real_tree(p, ap).astype(dtype)
        x = _add(x, _mul(alpha, p))
        r = _sub(r, _mul(alpha, ap))
        z = M(r)
        gamma_next = _vdot_real_tree(r, z).astype(dtype)
        p = _add(z, _mul(gamma_next / gamma, p))
        return x, r, gamma_next, p, k + 1

    r0 = _sub(b, A(x0))
    p0 = z0 = M(r0)
    dtype = tnp.result_type(*tree_leaves(p0))
    gamma0 = _vdot_real_tree(r0, z0).astype(dtype)
    x_final, *_ = while_loop(cond_fun, body_fun, (x0, r0, gamma0, p0, 0))
    return x_final


def _bicgstab_solve(A: Operator, b: Any, x0: Any, *, maxiter: int, tol: float, atol: float, M: Operator) -> Any:
    bs = _vdot_real_tree(b, b)
    atol2 = tnp.maximum(tnp.square(tol) * bs, tnp.square(atol))

    def cond_fun(value: tuple) -> Tensor:
        _, r, *_, k = value
        return (_vdot_real_tree(r, r) > atol2) & (k < maxiter) & (k >= 0)   # k < 0: a breakdown

    def body_fun(value: tuple) -> tuple:
        x, r, rhat, alpha, omega, rho, p, q, k = value
        rho_ = _vdot_tree(rhat, r)
        beta = rho_ / rho * alpha / omega
        p_ = _add(r, _mul(beta, _sub(p, _mul(omega, q))))
        phat = M(p_)
        q_ = A(phat)
        alpha_ = rho_ / _vdot_tree(rhat, q_)
        s = _sub(r, _mul(alpha_, q_))
        exit_early = _vdot_real_tree(s, s) < atol2
        shat = M(s)
        t = A(shat)
        omega_ = _vdot_tree(t, s) / _vdot_tree(t, t)
        x_ = tree_map(functools.partial(tnp.where, exit_early), _add(x, _mul(alpha_, phat)),
                      _add(x, _add(_mul(alpha_, phat), _mul(omega_, shat))))
        r_ = tree_map(functools.partial(tnp.where, exit_early), s, _sub(s, _mul(omega_, t)))
        k_ = tnp.where((omega_ == 0) | (alpha_ == 0), -11, k + 1)
        k_ = tnp.where(rho_ == 0, -10, k_)
        return x_, r_, rhat, alpha_, omega_, rho_, p_, q_, k_

    r0 = _sub(b, A(x0))
    one = tnp.ones((), tnp.result_type(*tree_leaves(b)))
    x_final, *_ = while_loop(cond_fun, body_fun, (x0, r0, r0, one, one, one, r0, r0, 0))
    return x_final


def _isolve(name: str, solve: Callable, A: Any, b: Any, x0: Any, tol: float, atol: float, maxiter: int | None,
            M: Any, check_symmetric: bool) -> tuple[Any, None]:
    b = tree_map(to_tensor, b)
    x0 = tree_map(tnp.zeros_like, b) if x0 is None else tree_map(to_tensor, x0)
    if maxiter is None:
        maxiter = 10 * sum(leaf.size for leaf in tree_leaves(b))   # scipy's default
    A = _matvec(A, name, "linear operator A")
    M = _identity if M is None else _matvec(M, name, "preconditioner M")
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"{name}: x0 and b must have matching tree structure: {tree_structure(x0)} vs "
                         f"{tree_structure(b)}")
    shapes = [leaf.shape for leaf in tree_leaves(b)]
    if [leaf.shape for leaf in tree_leaves(x0)] != shapes:
        raise ValueError(f"{name}: arrays in x0 and b must have matching shapes: "
                         f"{[leaf.shape for leaf in tree_leaves(x0)]} vs {shapes}")
    isolve = functools.partial(solve, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    # real-valued positive definite operators are symmetric: the transposed solve is the solve itself
    symmetric = check_symmetric and not any(leaf.dtype.is_complex for leaf in tree_leaves(b))
    x = custom_linear_solve(A, b, solve=isolve, transpose_solve=isolve, symmetric=symmetric)
    return x, None


def cg(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
       M: Any = None) -> tuple[Any, None]:
    """Solve A x = b by conjugate gradients, as `jax.scipy.sparse.linalg.cg`: A (a function or a matrix) must be
    symmetric (Hermitian) positive definite, and so must the preconditioner M, an approximation of A's inverse.
    Returns `(x, None)`.

    >>> A = tnp.asarray([[4.0, 1.0], [1.0, 3.0]])
    >>> x, _ = cg(lambda v: A @ v, tnp.asarray([1.0, 2.0]))    # [0.0909, 0.6364]
    """
    return _isolve("cg", _cg_solve, A, b, x0, tol, atol, maxiter, M, check_symmetric=True)


def bicgstab(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
             M: Any = None) -> tuple[Any, None]:
    """Solve A x = b by the biconjugate gradient stabilised method, as `jax.scipy.sparse.linalg.bicgstab`: for any
    nonsingular A (a function or a matrix), with an optional preconditioner M. Returns `(x, None)`; a breakdown
    (rho, alpha or omega zero) stops the loop where it is."""
    return _isolve("bicgstab", _bicgstab_solve, A, b, x0, tol, atol, maxiter, M, check_symmetric=False)


__all__ = ["cg", "bicgstab"]
