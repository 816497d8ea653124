"""`tgfx.scipy.linalg`'s decompositions and matrix functions beyond the Cholesky and LU solves, with scipy's keywords
as `jax.scipy.linalg` has them (`overwrite_*`, `check_finite`, `lwork`, `turbo`, `lapack_driver` accepted and
ignored).

`det`, `inv`, `solve`, `eigh`, `qr` and `svd` adapt `tnp.linalg`'s (LU with partial pivoting, Householder QR,
Jacobi eigh and SVD) to scipy's signatures; `lu` returns P, L, U from the same LU loop (rectangular matrices padded
square with zeros, which the pivoting never picks); `polar` comes from the SVD. `expm` is JAX's Pade approximant
with scaling and squaring; `solve_sylvester` solves the Kronecker-sum system (m n unknowns) by LU, for small
matrices; `hessenberg` is a loop of Householder reflections as LAPACK's gehrd makes them; `eigh_tridiagonal`
bisects Sturm counts for the eigenvalues, as JAX does, and takes eigenvectors from `eigh` of the dense matrix.

>>> p, l, u = tsp.linalg.lu(a)                      # a = p @ l @ u
>>> tsp.linalg.expm(tg.asarray([[0.0, 1.0], [-1.0, 0.0]]))    # a rotation by one radian
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.function import function
from tgfx.lax import fori_loop
from tgfx.scipy._tridiagonal import bisect, tridiagonal_vectors
from tgfx.scipy._util import promote_args_inexact
from tgfx.scipy.linalg import _check_square, _col, _index, _lu_loop, _system, cho_factor, cho_solve, solve_triangular
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes


def _mt(x: Tensor) -> Tensor:
    return tnp.swapaxes(x, -1, -2)


def _matrix(name: str, a: ArrayLike) -> Tensor:
    (t,) = promote_args_inexact(name, a)
    if t.ndim < 2:
        raise ValueError(f"{name}: a must be a matrix or a stack of them (shape (..., m, n)), got shape {t.shape}")
    return t


# ---- scipy's signatures over tnp.linalg ----
def det(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Tensor:
    """The determinant of a square matrix or of each of a stack (..., n, n) (`jax.scipy.linalg.det`): see
    `tnp.linalg.det` (cofactors for 2 x 2 and 3 x 3, else LU; its gradient the cofactor matrix).

    >>> det(tg.asarray([[1.0, 2.0], [3.0, 4.0]]))      # -2.0
    """
    return tnp.linalg.det(a)


def inv(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> Tensor:
    """The inverse of a square matrix or of each of a stack (..., n, n) (`jax.scipy.linalg.inv`): see
    `tnp.linalg.inv`. Singular: infs and NaNs, no error.

    >>> inv(tg.asarray([[2.0, 0.0], [0.0, 4.0]]))      # [[0.5, 0], [0, 0.25]]
    """
    return tnp.linalg.inv(a)


_ASSUME = ("gen", "sym", "her", "pos")


def _pos_solve(lower: bool) -> Any:
    def forward(a: Tensor, b: Tensor) -> Tensor:
        return cho_solve(cho_factor(a, lower=lower), b)

    def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor, Tensor]:
        # JAX's custom_linear_solve with the full matrix-vector product a x: bbar = a^-1 xbar (a symmetric),
        # abar = -bbar x^T on the whole of a, though the solve reads one triangle
        g, (a, _), (x,) = grads, call.inputs, call.outputs
        gb = forward(a, g)
        return -tnp.matmul(gb, _mt(x)), gb

    forward.__name__ = forward.__qualname__ = f"solve_pos_{'lower' if lower else 'upper'}"
    return function(forward, grad_fxn=backward, cache=True)


_pos_solvers = {True: _pos_solve(True), False: _pos_solve(False)}


def solve(a: ArrayLike, b: ArrayLike, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Tensor:
    """The x with a x = b (`jax.scipy.linalg.solve`). `assume_a` 'gen', 'sym' and 'her' solve by LU
    (`tnp.linalg.solve`: b is a vector only when 1-d); 'pos' by Cholesky of the triangle `lower` names (upper by
    default, as scipy), b (..., n) a vector per matrix when it has one axis fewer than a, else (..., n, k), with
    JAX's gradient (abar = -a^-1 xbar x^T over all of a). Singular or not positive definite: infs or NaNs.

    >>> solve(tg.asarray([[3.0, 1.0], [1.0, 2.0]]), tg.asarray([9.0, 8.0]), assume_a="pos")   # [2., 3.]

    Raises ValueError for an unknown assume_a, a non-square a, or b's rows not matching it.
    """
    if assume_a not in _ASSUME:
        raise ValueError(f"solve: assume_a must be one of {list(_ASSUME)}, got {assume_a!r}")
    if assume_a != "pos":
        return tnp.linalg.solve(a, b)
    at, b2, n, vector = _system("solve", a, b)
    batch = broadcast_shapes(at.shape[:-2], b2.shape[:-2], name="solve")
    at, b2 = tnp.broadcast_to(at, batch + at.shape[-2:]), tnp.broadcast_to(b2, batch + b2.shape[-2:])
    x = b2 if n == 0 else _pos_solvers[bool(lower)](at, b2)
    return x[..., 0] if vector else x


def eigh(a: ArrayLike, b: ArrayLike | None = None, lower: bool = True, eigvals_only: bool = False,
         overwrite_a: bool = False, overwrite_b: bool = False, turbo: bool = True, eigvals: None = None,
         type: int = 1, check_finite: bool = True) -> Tensor | tuple[Tensor, Tensor]:  # noqa: A002 - scipy's name
    """(w, v): the eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix or of each of a stack
    (`jax.scipy.linalg.eigh`), reading the lower triangle (`lower=True`, the default) or the upper one; w alone with
    `eigvals_only=True`. See `tnp.linalg.eigh` (Jacobi rotations; JAX's gradient).

    >>> w, v = eigh(tg.asarray([[2.0, 1.0], [1.0, 2.0]]))     # w = [1., 3.]

    Raises NotImplementedError for the generalised problem (b), eigvals= or type != 1, as JAX.
    """
    if b is not None:
        raise NotImplementedError("eigh: only the standard problem (b=None) is implemented, as in JAX")
    if type != 1:
        raise NotImplementedError(f"eigh: only type=1 is implemented, as in JAX; got type={type}")
    if eigvals is not None:
        raise NotImplementedError("eigh: only eigvals=None is implemented, as in JAX (use eigh_tridiagonal's "
                                  "select='i' for a tridiagonal matrix)")
    uplo = "L" if lower else "U"
    if eigvals_only:
        return tnp.linalg.eigvalsh(a, UPLO=uplo)
    w, v = tnp.linalg.eigh(a, UPLO=uplo)
    return w, v


def lu(a: ArrayLike, permute_l: bool = False, overwrite_a: bool = False,
       check_finite: bool = True) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, Tensor]:
    """(P, L, U) with a = P @ L @ U (`jax.scipy.linalg.lu`), by LU with partial pivoting: P (..., m, m) a
    permutation matrix in a's float type, L (..., m, k) unit lower triangular, U (..., k, n) upper triangular,
    k = min(m, n). With `permute_l=True`, (P @ L, U). Any m, n: a rectangular a is padded square with zero rows or
    columns, which the pivoting never moves above a row of a's. Differentiable through the loop.

    >>> p, l, u = lu(tg.asarray([[1.0, 2.0], [3.0, 4.0]]))   # p = [[0, 1], [1, 0]], l = [[1, 0], [1/3, 1]]
    """
    t = _matrix("lu", a)
    m, n = t.shape[-2:]
    k, size = min(m, n), max(m, n)
    if k == 0:
        p = tnp.broadcast_to(tnp.eye(m, dtype=t.dtype), t.shape[:-2] + (m, m))
        low = tnp.broadcast_to(tnp.eye(m, k, dtype=t.dtype), t.shape[:-2] + (m, k))
        up = tnp.zeros(t.shape[:-2] + (k, n), t.dtype)
    else:
        sq = tnp.pad(t, [(0, 0)] * (t.ndim - 2) + [(0, size - m), (0, size - n)]) if m != n else t
        fac, _, perm = _lu_loop(sq)
        # perm[i] is the row of a that row i of L U is: a = P L U with P[r, i] = (perm[i] == r)
        p = (perm[..., None, :m] == _index(m)[:, None]).astype(t.dtype)
        low = tnp.tril(fac, -1)[..., :m, :k] + tnp.eye(m, k, dtype=t.dtype)
        up = tnp.triu(fac)[..., :k, :n]
    if permute_l:
        return tnp.matmul(p, low), up
    return p, low, up


_QR_MODES = {"full": "complete", "economic": "reduced", "r": "r"}


def qr(a: ArrayLike, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple[Tensor, ...]:
    """The QR factorisation a = Q R (`jax.scipy.linalg.qr`), by Householder reflections (`tnp.linalg.qr`). mode
    'full' (the default): Q (..., m, m), R (..., m, n); 'economic': Q (..., m, k), R (..., k, n), k = min(m, n);
    'r': the 1-tuple (R,) with R (..., m, n), as scipy's.

    >>> q, r = qr(a, mode="economic")

    Raises ValueError for another mode ('raw' included) and NotImplementedError for pivoting=True.
    """
    if mode not in _QR_MODES:
        raise ValueError(f"qr: mode must be 'full', 'economic' or 'r', got {mode!r} ('raw' is not supported)")
    if pivoting:
        raise NotImplementedError("qr: pivoting=True (column-pivoted QR) is not implemented")
    t = _matrix("qr", a)
    if mode == "r":
        r = tnp.linalg.qr(t, "r")
        m, n = t.shape[-2:]
        if m > n:   # full_matrices: R has m rows, the ones past n zero
            r = tnp.concatenate([r, tnp.zeros(t.shape[:-2] + (m - n, n), r.dtype)], axis=-2)
        return (r,)
    q, r = tnp.linalg.qr(t, _QR_MODES[mode])
    return q, r


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Tensor | tuple[Tensor, Tensor, Tensor]:
    """(U, s, Vh) with a = U diag(s) Vh, s descending (`jax.scipy.linalg.svd`), or s alone for `compute_uv=False`:
    see `tnp.linalg.svd` (one-sided Jacobi; JAX's gradient). `lapack_driver` is accepted and ignored.

    >>> u, s, vh = svd(a, full_matrices=False)
    """
    out = tnp.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def polar(a: ArrayLike, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Tensor, Tensor]:
    """(u, p): the polar decomposition a = u p (side 'right', p (..., n, n)) or a = p u (side 'left', p
    (..., m, m)) of a (..., m, n) (`jax.scipy.linalg.polar`): u = U Vh and p = V diag(s) Vh (U diag(s) U^T) from
    the reduced SVD, u with orthonormal columns (rows when n > m), p symmetric positive semidefinite.

    Both methods ('qdwh', the default, and 'svd') compute it from the SVD, accurate for every shape and side (JAX's
    QDWH iteration supports only m >= n for 'right' and m < n for 'left'); `eps` and `max_iterations`, QDWH's
    stopping rule, are accepted and ignored.

    >>> u, p = polar(a)                                  # u @ p == a

    Raises ValueError for fewer than 2 dimensions, an unknown side or an unknown method.
    """
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"polar: method must be 'qdwh' or 'svd', got {method!r}")
    t = _matrix("polar", a)
    u, s, vh = tnp.linalg.svd(t, full_matrices=False)
    unitary = tnp.matmul(u, vh)
    if side == "right":
        return unitary, tnp.matmul(_mt(vh) * s[..., None, :], vh)
    return unitary, tnp.matmul(u * s[..., None, :], _mt(u))


# ---- the matrix exponential: Pade approximants with scaling and squaring (JAX's, after Higham 2005) ----
_PADE = {3: (120., 60., 12., 1.),
         5: (30240., 15120., 3360., 420., 30., 1.),
         7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
         9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880., 3960., 90., 1.),
         13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
              10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)}
# per precision: the largest 1-norm each degree is used up to (the last degree beyond), and the 1-norm the scaling
# brings A down to
_DEGREES = {"float64": ((3, 5, 7, 9, 13), (1.495585217958292e-002, 2.539398330063230e-001, 9.504178996162932e-001,
                                           2.097847961257068e+000), 5.371920351148152),
            "float32": ((3, 5, 7), (4.258730016922831e-001, 1.880152677804762e+000), 3.925724783138660)}


def _pade(a: Tensor, powers: dict[int, Tensor], eye: Tensor, m: int) -> tuple[Tensor, Tensor]:
    """(U, V): the odd and even parts of the degree-m Pade numerator, p_m(A) = U + V and q_m(A) = V - U."""
    b = _PADE[m]
    if m < 13:
        odd = sum((b[k] * powers[k - 1] for k in range(3, m + 1, 2)), b[1] * eye)
        even = sum((b[k] * powers[k] for k in range(2, m + 1, 2)), b[0] * eye)
        return tnp.matmul(a, odd), even
    a2, a4, a6 = powers[2], powers[4], powers[6]
    u = tnp.matmul(a, tnp.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
                   + b[1] * eye)
    v = tnp.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    return u, v


def expm(A: ArrayLike, *, upper_triangular: bool = False, max_squarings: int = 16) -> Tensor:  # noqa: N803
    """The matrix exponential of a square matrix or of each of a stack (..., n, n) (`jax.scipy.linalg.expm`), by
    JAX's scaling and squaring: A / 2^s has 1-norm at most ~3.9 (float32) or ~5.4 (float64), the Pade approximant of
    the degree its 1-norm calls for (3, 5, 7 in float32; up to 13 in float64) is solved for, then squared s times.
    A matrix that needs more than `max_squarings` squarings gives NaNs, as in JAX. `upper_triangular=True` solves
    the Pade system by back substitution. Every degree is worked out and the right one selected per matrix (a stack
    mixes them); differentiable through the products, the solve and the squarings.

    >>> expm(tg.asarray([[0.0, 1.0], [0.0, 0.0]]))      # [[1, 1], [0, 1]]

    Raises ValueError for a non-square A and TypeError for a dtype other than float32 / float64.
    """
    (a,) = promote_args_inexact("expm", A)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"expm: A must be a square matrix or a stack of them (shape (..., n, n)), got shape {a.shape}")
    if a.dtype.name not in _DEGREES:
        raise TypeError(f"expm: takes float32 or float64 matrices, got {a.dtype.name}")
    n = a.shape[-1]
    if n == 0:
        return a
    degrees, bounds, max_norm = _DEGREES[a.dtype.name]
    norm1 = tnp.max(tnp.sum(tnp.abs(a), axis=-2), axis=-1)[..., None, None]      # the 1-norm: largest column sum
    squarings = tnp.maximum(0.0, tnp.floor(tnp.log2(norm1 / max_norm)))
    a = a / tnp.exp2(squarings)
    eye = tnp.eye(n, dtype=a.dtype)
    powers = {2: tnp.matmul(a, a)}   # A^2 .. A^(d - 1) for the largest degree d below 13 (13 needs up to A^6)
    for k in range(4, max(d for d in degrees if d < 13), 2):
        powers[k] = tnp.matmul(powers[k - 2], powers[2])
    # the degree is chosen by the unscaled norm, as JAX's (digitize over the bounds)
    which = sum((norm1 >= bound).astype(dtypes.int32) for bound in bounds)
    u, v = _pade(a, powers, eye, degrees[-1])
    for i in range(len(degrees) - 2, -1, -1):
        ui, vi = _pade(a, powers, eye, degrees[i])
        u, v = tnp.where(which == i, ui, u), tnp.where(which == i, vi, v)
    p, q = u + v, v - u
    r = solve_triangular(q, p) if upper_triangular else tnp.linalg.solve(q, p)

    def square(i: Tensor, r: Tensor) -> Tensor:
        return tnp.where(i < squarings, tnp.matmul(r, r), r)

    r = fori_loop(0, max_squarings, square, r)
    return tnp.where(squarings > max_squarings, np.nan, r)


# ---- Sylvester equations ----
def solve_sylvester(A: ArrayLike, B: ArrayLike, C: ArrayLike, *, method: str = "schur",  # noqa: N803
                    tol: float = 1e-8) -> Tensor:
    """The X with A X + X B = C (`jax.scipy.linalg.solve_sylvester`); A (..., m, m), B (..., n, n), C (..., m, n),
    batch axes broadcast.

    Solved as the Kronecker-sum system (A (x) I_n + I_m (x) B^T) vec(X) = vec(C) of m n unknowns by LU with partial
    pivoting, whatever `method` ('schur' or 'eigen') says: exact for any A and B with no eigenvalue of A equal to
    minus one of B's, but O((m n)^3), so for small matrices (m n up to a few hundred). tgfx has no Schur or general
    eigendecomposition yet. A singular system gives infs or NaNs; `tol` (JAX's NaN cut-off on |eig(A)_i + eig(B)_j|,
    which needs those eigenvalues) is accepted and ignored. Differentiable in A, B and C through the solve.

    >>> x = solve_sylvester(a, b, c)                     # a @ x + x @ b == c

    Raises ValueError for shapes that do not fit (A m x m, B n x n, C m x n) and for an unknown method.
    """
    if method not in ("schur", "eigen"):
        raise ValueError(f"solve_sylvester: method must be 'schur' or 'eigen', got {method!r}")
    a, b, c = promote_args_inexact("solve_sylvester", A, B, C)
    if c.ndim < 2 or a.ndim < 2 or b.ndim < 2 or a.shape[-2:] != (c.shape[-2],) * 2 or \
            b.shape[-2:] != (c.shape[-1],) * 2:
        raise ValueError(f"solve_sylvester: A must be (..., m, m), B (..., n, n) and C (..., m, n); got A {a.shape}, "
                         f"B {b.shape}, C {c.shape}")
    m, n = c.shape[-2:]
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2], name="solve_sylvester")
    if m == 0 or n == 0:
        return tnp.zeros(batch + (m, n), c.dtype)
    # row-major vec: (A X)[i, j] = sum_k A[i, k] X[k, j] and (X B)[i, j] = sum_l B[l, j] X[i, l]
    eye_m, eye_n = tnp.eye(m, dtype=c.dtype), tnp.eye(n, dtype=c.dtype)
    kron = (a[..., :, None, :, None] * eye_n[:, None, :] + eye_m[:, None, :, None] * _mt(b)[..., None, :, None, :])
    kron = tnp.broadcast_to(kron, batch + (m, n, m, n)).reshape(batch + (m * n, m * n))
    rhs = tnp.broadcast_to(c, batch + (m, n)).reshape(batch + (m * n, 1))
    return tnp.linalg.solve(kron, rhs).reshape(batch + (m, n))


# ---- Hessenberg reduction ----
def hessenberg(a: ArrayLike, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> Tensor | tuple[Tensor, Tensor]:
    """The upper Hessenberg form H = Q^T a Q of a square matrix or of each of a stack (`jax.scipy.linalg.hessenberg`),
    with Q (orthogonal) for `calc_q=True`. Householder reflections as LAPACK's gehrd makes them (a reflection
    I - tau v v^T a column, v[j + 1] = 1, beta = -sign(alpha) ||x||, none where the column below the subdiagonal is
    already zero), so H and Q match scipy's up to rounding; one loop step a column, each O(n^2). Differentiable
    through the loop.

    >>> h, q = hessenberg(a, calc_q=True)                # q @ h @ q.T == a

    Raises ValueError for a non-square a and TypeError for a complex one.
    """
    (t,) = promote_args_inexact("hessenberg", a)
    n = _check_square("hessenberg", "a", t)
    if t.dtype.is_complex:
        raise TypeError(f"hessenberg: takes real matrices (complex ones are not supported yet), got {t.dtype.name}")
    if n == 0:
        return (t, t) if calc_q else t
    idx = _index(n)

    def step(j: Tensor, carry: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        h = carry[0]
        x = _col(h, idx == j)                                           # column j, (..., n)
        alpha = tnp.sum(tnp.where(idx == j + 1, x, 0.0), axis=-1, keepdims=True)
        tail = tnp.where(idx > j + 1, x, 0.0)
        sigma = tnp.sum(tail * tail, axis=-1, keepdims=True)
        skip = sigma == 0
        norm = tnp.sqrt(alpha * alpha + sigma)
        beta = tnp.where(alpha >= 0, -norm, norm)
        tau = tnp.where(skip, 0.0, (beta - alpha) / tnp.where(skip, 1.0, beta))
        v = tnp.where(idx == j + 1, 1.0, tail / tnp.where(skip, 1.0, alpha - beta))     # (..., n)
        # H := (I - tau v v^T) H (I - tau v v^T), Q := Q (I - tau v v^T)
        h = h - (tau * v)[..., :, None] * tnp.matmul(v[..., None, :], h)
        h = h - tnp.matmul(h, v[..., :, None]) * (tau * v)[..., None, :]
        if len(carry) == 1:
            return (h,)
        q = carry[1]
        return h, q - tnp.matmul(q, v[..., :, None]) * (tau * v)[..., None, :]

    init = (t, tnp.broadcast_to(tnp.eye(n, dtype=t.dtype), t.shape)) if calc_q else (t,)
    out = fori_loop(0, max(n - 2, 0), step, init)
    h = tnp.triu(out[0], -1)
    return (h, out[1]) if calc_q else h


# ---- symmetric tridiagonal eigenproblem (`_tridiagonal.py`) ----
def eigh_tridiagonal(d: ArrayLike, e: ArrayLike, *, eigvals_only: bool = False, select: str = "a",
                     select_range: tuple[float, float] | None = None, tol: float | None = None,
                     key: Any = None) -> Tensor | tuple[Tensor, Tensor]:
    """The eigenvalues (ascending) of the symmetric tridiagonal matrix with diagonal d (n,) and off-diagonal e
    (n - 1,), and with `eigvals_only=False` its eigenvectors as columns (`jax.scipy.linalg.eigh_tridiagonal`).

    The eigenvalues are JAX's: bisection of all of them at once on Sturm counts, from the Gershgorin interval to an
    absolute width of max(tol, eps ||T||) (at most mantissa-bits + 1 halvings). `select='a'` gives all n;
    `select='i'` with select_range=(lo, hi) those of indices lo..hi. The eigenvectors come from inverse iteration, as
    JAX's, from fixed pseudo-random vectors (`key`, JAX's seed for them, is accepted and ignored), orthonormalised
    (`tgfx/scipy/_tridiagonal.py`); their signs are not fixed.

    >>> eigh_tridiagonal(tg.asarray([2.0, 2.0]), tg.asarray([1.0]), eigvals_only=True)   # [1., 3.]

    Raises TypeError when d and e differ in dtype or are not float32 / float64, ValueError for shapes that do not fit
    or a bad select_range, NotImplementedError for select='v' (as JAX).
    """
    alpha, beta = tnp.asarray(d), tnp.asarray(e)
    if alpha.dtype != beta.dtype:
        raise TypeError(f"eigh_tridiagonal: d and e must have the same dtype, got {alpha.dtype.name} and "
                        f"{beta.dtype.name}")
    if alpha.dtype.name not in ("float32", "float64"):
        raise TypeError(f"eigh_tridiagonal: takes float32 or float64 d and e, got {alpha.dtype.name}")
    if alpha.ndim != 1 or beta.shape != (max(alpha.shape[0] - 1, 0),):
        raise ValueError(f"eigh_tridiagonal: d must be (n,) and e (n - 1,), got shapes {alpha.shape} and {beta.shape}")
    n = alpha.shape[0]
    if select == "a":
        targets = np.arange(n)
    elif select == "i":
        if select_range is None:
            raise ValueError("eigh_tridiagonal: select='i' needs select_range=(lo, hi)")
        lo, hi = (int(v) for v in select_range)
        if lo > hi or lo < 0 or hi >= max(n, 1):
            raise ValueError(f"eigh_tridiagonal: select_range must be (lo, hi) with 0 <= lo <= hi < {n}, got "
                             f"{select_range}")
        targets = np.arange(lo, hi + 1)
    elif select == "v":
        raise NotImplementedError("eigh_tridiagonal: select='v' is not implemented (its result size depends on the "
                                  "values), as in JAX")
    else:
        raise ValueError(f"eigh_tridiagonal: select must be 'a', 'i' or 'v', got {select!r}")
    if n <= 1:
        return alpha if eigvals_only else (alpha, tnp.eye(n, dtype=alpha.dtype))
    w = bisect(alpha, beta, int(targets[0]), len(targets), tol)
    return w if eigvals_only else (w, tridiagonal_vectors(alpha, beta, w))
