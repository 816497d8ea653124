"""`tg.lax.linalg`: `jax.lax.linalg`'s decompositions, with lax's argument conventions and return structures.

Thin wrappers over `tgfx.numpy.linalg` and `tgfx.scipy.linalg` (which hold the algorithms and their backward
rules): `cholesky` symmetrises its input, `triangular_solve` takes `left_side` / `transpose_a` flags instead of
scipy's `trans`, `qr` and `svd` default to full matrices, `eigh` returns the eigenvectors first, `lu` returns
(lu, pivots, permutation). The imports are inside the functions: `tgfx.scipy.linalg` is built on `tgfx.lax`'s
loops, and `tgfx.lax` re-exports this module.

>>> v, w = tg.lax.linalg.eigh(tg.asarray([[2.0, 1.0], [1.0, 2.0]]))         # w = [1., 3.]
>>> x = tg.lax.linalg.triangular_solve(l, b, left_side=True, lower=True)   # l @ x == b
"""
from __future__ import annotations

from typing import Any

from tgfx.tensor import ArrayLike, Tensor, to_tensor

__all__ = ["cholesky", "eigh", "householder_product", "lu", "lu_pivots_to_permutation", "qr", "svd", "triangular_solve",
           "tridiagonal_solve"]


def _matrix(fn: str, x: ArrayLike, what: str = "x") -> Tensor:
    t = to_tensor(x)
    if t.ndim < 2:
        raise ValueError(f"lax.linalg.{fn}: {what} must be a matrix or a stack of them (shape (..., m, n)), got shape "
                         f"{t.shape}")
    return t


def _square(fn: str, t: Tensor, what: str = "x") -> None:
    if t.shape[-1] != t.shape[-2]:
        raise ValueError(f"lax.linalg.{fn}: {what} must be square (shape (..., n, n)), got shape {t.shape}")


def cholesky(x: ArrayLike, *, symmetrize_input: bool = True) -> Tensor:
    """The lower Cholesky factor L (x = L L^H) of a positive definite matrix or of each of a stack, as
    `jax.lax.linalg.cholesky`. With `symmetrize_input` (the default) x is first replaced by (x + x^H) / 2; without,
    only its lower triangle is read. Not positive definite: NaNs. Differentiable.

    >>> tg.lax.linalg.cholesky(tg.asarray([[4.0, 2.0], [2.0, 5.0]]))     # [[2, 0], [1, 2]]
    """
    from tgfx.numpy.linalg import cholesky as chol
    t = _matrix("cholesky", x)
    _square("cholesky", t)
    return chol(t, symmetrize_input=symmetrize_input)


def triangular_solve(a: ArrayLike, b: ArrayLike, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False, unit_diagonal: bool = False) -> Tensor:
    """The x with op(a) x = b (`left_side=True`) or x op(a) = b (the default, as lax), for a triangular `a`, as
    `jax.lax.linalg.triangular_solve`.

    op(a) is a, a^T (`transpose_a`), conj(a) (`conjugate_a`) or a^H (both). Only the triangle `lower` names is read
    (upper by default), and with `unit_diagonal` not its diagonal. `a` is (..., m, m) and `b` (..., m, n) for
    `left_side`, (..., n, m) otherwise, with the same batch axes. Differentiable in a and b.

    >>> l = tg.asarray([[2.0, 0.0], [1.0, 1.0]])
    >>> tg.lax.linalg.triangular_solve(l, tg.asarray([[2.0], [3.0]]), left_side=True, lower=True)   # [[1.], [2.]]
    """
    from tgfx.numpy._complex import conj
    from tgfx.scipy.linalg import solve_triangular
    fn = "triangular_solve"
    at, bt = _matrix(fn, a, "a"), _matrix(fn, b, "b")
    _square(fn, at, "a")
    m = at.shape[-1]
    if at.ndim != bt.ndim or at.shape[:-2] != bt.shape[:-2] or (bt.shape[-2] if left_side else bt.shape[-1]) != m:
        want = f"(..., {m}, n)" if left_side else f"(..., n, {m})"
        raise ValueError(f"lax.linalg.{fn}: b must have shape {want} with a's batch axes {at.shape[:-2]} to match a "
                         f"of shape {at.shape} (left_side={left_side}), got shape {bt.shape}")
    if conjugate_a and at.dtype.is_complex:
        at = conj(at)
    if left_side:   # op(a) x = b
        return solve_triangular(at, bt, trans=1 if transpose_a else 0, lower=lower, unit_diagonal=unit_diagonal)
    # x op(a) = b  is  op(a)^T x^T = b^T
    xt = solve_triangular(at, bt.swapaxes(-1, -2), trans=0 if transpose_a else 1, lower=lower,
                          unit_diagonal=unit_diagonal)
    return xt.swapaxes(-1, -2)


def qr(x: ArrayLike, *, pivoting: bool = False, full_matrices: bool = True, use_magma: Any = None) -> Any:
    """(q, r) with x = q r, as `jax.lax.linalg.qr`: q (..., m, m) and r (..., m, n) by default (`full_matrices`,
    lax's default, unlike numpy's), else q (..., m, k) and r (..., k, n), k = min(m, n). Householder reflections;
    differentiable as JAX's (m >= n, reduced). `pivoting=True` is not supported.

    >>> q, r = tg.lax.linalg.qr(a, full_matrices=False)
    """
    from tgfx.numpy.linalg import qr as np_qr
    if pivoting:
        raise NotImplementedError("lax.linalg.qr: pivoting=True (column-pivoted QR) is not supported; call it with "
                                  "pivoting=False")
    q, r = np_qr(_matrix("qr", x), mode="complete" if full_matrices else "reduced")
    return q, r


def eigh(x: ArrayLike, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index: tuple[int, int] | None = None) -> tuple[Tensor, Tensor]:
    """(v, w): the eigenvectors (columns of v) and ascending eigenvalues w of a symmetric matrix or of each of a
    stack, as `jax.lax.linalg.eigh` (eigenvectors first, unlike numpy). With `symmetrize_input` (the default) x is
    replaced by (x + x^T) / 2, else only the triangle `lower` names is read. `subset_by_index=(lo, hi)` keeps the
    eigenpairs lo..hi-1. The eigenvalues always come sorted (an order `sort_eigenvalues=False` allows).
    Differentiable as `tnp.linalg.eigh`.

    >>> v, w = tg.lax.linalg.eigh(tg.asarray([[2.0, 1.0], [1.0, 2.0]]))    # w = [1., 3.]
    """
    from tgfx.numpy.linalg import eigh as np_eigh
    t = _matrix("eigh", x)
    _square("eigh", t)
    w, v = np_eigh(t, UPLO="L" if lower else "U", symmetrize_input=symmetrize_input)
    if subset_by_index is not None:
        lo, hi = subset_by_index
        n = t.shape[-1]
        if not 0 <= lo <= hi <= n:
            raise ValueError(f"lax.linalg.eigh: subset_by_index = {subset_by_index} must be (lo, hi) with "
                             f"0 <= lo <= hi <= {n}")
        w, v = w[..., lo:hi], v[..., lo:hi]
    return v, w


def svd(x: ArrayLike, *, full_matrices: bool = True, compute_uv: bool = True,
        subset_by_index: tuple[int, int] | None = None, algorithm: Any = None) -> Any:
    """(u, s, vh) with x = u diag(s) vh, s descending, as `jax.lax.linalg.svd`: u (..., m, m) and vh (..., n, n) by
    default (`full_matrices`), else k = min(m, n) columns / rows; `compute_uv=False` returns s alone.
    `subset_by_index=(lo, hi)` keeps singular values lo..hi-1 (and their vectors); `algorithm` is accepted and
    ignored (one-sided Jacobi). Differentiable as `tnp.linalg.svd`.

    >>> u, s, vh = tg.lax.linalg.svd(a, full_matrices=False)
    """
    from tgfx.numpy.linalg import svd as np_svd
    t = _matrix("svd", x)
    k = min(t.shape[-2:])
    lo, hi = (0, k) if subset_by_index is None else subset_by_index
    if not 0 <= lo <= hi <= k:
        raise ValueError(f"lax.linalg.svd: subset_by_index = {subset_by_index} must be (lo, hi) with 0 <= lo <= hi "
                         f"<= min(m, n) = {k}")
    if not compute_uv:
        return np_svd(t, compute_uv=False)[..., lo:hi]
    u, s, vh = np_svd(t, full_matrices=full_matrices and subset_by_index is None)
    if subset_by_index is not None:
        u, s, vh = u[..., lo:hi], s[..., lo:hi], vh[..., lo:hi, :]
    return u, s, vh


def lu(x: ArrayLike) -> tuple[Tensor, Tensor, Tensor]:
    """(lu, pivots, permutation) of a square matrix or of each of a stack, with partial pivoting, as
    `jax.lax.linalg.lu`: lu holds U and L's multipliers below the diagonal (L's unit diagonal implied); row i was
    swapped with row pivots[i] at step i (int32); permutation[i] (int32) is the row of x that row i of P x is, so
    x[permutation] == L @ U. Square matrices only (lax's also factors rectangular ones).

    >>> lu, piv, perm = tg.lax.linalg.lu(a)
    """
    from tgfx.dtypes import dtypes
    from tgfx.scipy._util import promote_args_inexact
    from tgfx.scipy.linalg import _lu_loop
    (t,) = promote_args_inexact("lax.linalg.lu", _matrix("lu", x))
    _square("lu", t)
    if t.shape[-1] == 0:
        from tgfx.numpy._creation import zeros
        z = zeros(t.shape[:-1], dtypes.int32)
        return t, z, z
    out, piv, perm = _lu_loop(t)
    return out, piv.astype(dtypes.int32), perm.astype(dtypes.int32)



def lu_pivots_to_permutation(pivots: ArrayLike, permutation_size: int) -> Tensor:
    """The permutation (int32, length `permutation_size`) that LU's row swaps make, as
    `jax.lax.linalg.lu_pivots_to_permutation`: start from 0 .. size - 1 and at step i swap entries i and pivots[i].
    Leading batch axes of `pivots` are kept.

    >>> tg.lax.linalg.lu_pivots_to_permutation(tg.asarray([2, 2, 2], dtype="int32"), 4)   # [2, 0, 1, 3]
    """
    import tgfx.numpy as tnp
    from tgfx.dtypes import dtypes
    from tgfx.lax import fori_loop
    piv = to_tensor(pivots)
    if piv.ndim < 1 or not piv.dtype.is_int:
        raise TypeError(f"lax.linalg.lu_pivots_to_permutation: pivots must be an integer array (..., k), got "
                        f"{piv.dtype.name} of shape {piv.shape}")
    k, size = piv.shape[-1], int(permutation_size)
    if size < k:
        raise ValueError(f"lax.linalg.lu_pivots_to_permutation: permutation_size {size} is less than the number of "
                         f"pivots {k}")
    piv = piv.astype(dtypes.int32)
    at = tnp.arange(size, dtype=dtypes.int32)
    perm = tnp.broadcast_to(at, piv.shape[:-1] + (size,))

    def swap(i: Tensor, p: Tensor) -> Tensor:
        j = tnp.take_along_axis(piv, tnp.broadcast_to(i, piv.shape[:-1] + (1,)), axis=-1)   # (..., 1)
        p_i = tnp.take_along_axis(p, tnp.broadcast_to(i, p.shape[:-1] + (1,)), axis=-1)
        p_j = tnp.take_along_axis(p, j, axis=-1)
        return tnp.where(at == i, p_j, tnp.where(at == j, p_i, p))
    return fori_loop(0, k, swap, perm) if k else perm


def tridiagonal_solve(dl: ArrayLike, d: ArrayLike, du: ArrayLike, b: ArrayLike, *,
                      perturb_singular: bool = False) -> Tensor:
    """The x with T x = b for the tridiagonal T of sub-diagonal `dl`, diagonal `d` and super-diagonal `du`, as
    `jax.lax.linalg.tridiagonal_solve`: dl, d, du are (..., m) (dl[..., 0] and du[..., -1] are not read), b is
    (..., m, n). By the Thomas algorithm (elimination without pivoting, as JAX's generic lowering: stable for
    diagonally dominant or positive definite T), a forward and a backward `lax.scan` over the rows; differentiable.

    >>> tg.lax.linalg.tridiagonal_solve(dl, d, du, b[:, None])[:, 0]
    """
    import tgfx.numpy as tnp
    from tgfx.lax import scan
    from tgfx.scipy._util import promote_args_inexact
    if perturb_singular:
        raise NotImplementedError("lax.linalg.tridiagonal_solve: perturb_singular=True is not supported")
    dl, d, du, b = promote_args_inexact("lax.linalg.tridiagonal_solve", dl, d, du, b)
    if not (dl.shape == d.shape == du.shape) or d.ndim < 1:
        raise ValueError(f"lax.linalg.tridiagonal_solve: dl, d and du must have one shape (..., m), got {dl.shape}, "
                         f"{d.shape}, {du.shape}")
    if b.ndim != d.ndim + 1 or b.shape[:-1] != d.shape:
        raise ValueError(f"lax.linalg.tridiagonal_solve: b must be (..., m, n) for diagonals of shape {d.shape}, got "
                         f"shape {b.shape}")
    if d.shape[-1] == 0:
        return b
    rows = lambda v: tnp.moveaxis(v, -1, 0)   # noqa: E731 - the row axis in front, for the scans
    lower, diag, upper, rhs = rows(dl), rows(d), rows(du), tnp.moveaxis(b, -2, 0)

    def forward(carry: tuple[Tensor, Tensor], row: tuple) -> tuple:
        c_prev, y_prev = carry
        l_i, d_i, u_i, b_i = row
        pivot = d_i - l_i * c_prev
        c_i, y_i = u_i / pivot, (b_i - l_i[..., None] * y_prev) / pivot[..., None]
        return (c_i, y_i), (c_i, y_i)
    zero_c = tnp.zeros_like(diag[0])
    _, (c, y) = scan(forward, (zero_c, tnp.zeros_like(rhs[0])), (lower.at[0].set(0.0), diag, upper, rhs))

    def backward(x_next: Tensor, row: tuple) -> tuple:
        c_i, y_i = row
        x_i = y_i - c_i[..., None] * x_next
        return x_i, x_i
    _, x = scan(backward, tnp.zeros_like(rhs[0]), (c.at[-1].set(0.0), y), reverse=True)
    return tnp.moveaxis(x, 0, -2)


def householder_product(a: ArrayLike, taus: ArrayLike) -> Tensor:
    """The first n columns of Q = H_0 H_1 ... H_{k-1} from QR's Householder reflectors, as
    `jax.lax.linalg.householder_product` (LAPACK's orgqr / ungqr): H_i = I - taus[i] v_i v_i^H with v_i zero above
    row i, one at row i and a[i + 1:, i] below. `a` is (..., m, n) with m >= n, `taus` (..., k) with k <= n.

    >>> q = tg.lax.linalg.householder_product(a, taus)     # a, taus from LAPACK's geqrf
    """
    import tgfx.numpy as tnp
    from tgfx.numpy._complex import conj
    from tgfx.scipy._util import promote_args_inexact
    a_t, tau = promote_args_inexact("lax.linalg.householder_product", _matrix("householder_product", a), taus)
    m, n = a_t.shape[-2:]
    k = tau.shape[-1] if tau.ndim else -1
    if m < n or tau.ndim != a_t.ndim - 1 or k > n or tau.shape[:-1] != a_t.shape[:-2]:
        raise ValueError(f"lax.linalg.householder_product: a must be (..., m, n) with m >= n and taus (..., k) with "
                         f"k <= n and a's batch axes, got shapes {a_t.shape} and {tau.shape}")
    rows = tnp.arange(m)[:, None]
    below = rows > tnp.arange(n)[None, :]
    v = tnp.where(below, a_t, tnp.where(rows == tnp.arange(n)[None, :], tnp.ones((), a_t.dtype), 0.0))
    q = tnp.broadcast_to(tnp.eye(m, n, dtype=a_t.dtype), a_t.shape)
    for i in range(k - 1, -1, -1):   # Q = H_i Q, the last reflector first
        v_i = v[..., :, i:i + 1]
        q = q - tau[..., i, None, None] * v_i @ (tnp.swapaxes(conj(v_i), -1, -2) @ q)
    return q
