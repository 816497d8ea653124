"""`tgfx.numpy.linalg`: norms, linear solves, inverses and determinants with `jax.numpy.linalg`'s names and semantics.

`solve`, `inv`, `det` and `slogdet` factor the matrix by LU with partial pivoting (`tgfx.scipy.linalg.lu_factor`'s
loop: n steps on the device, compiled once whatever n is), then run triangular solves. Each is a `tg.function` with
its own backward (`solve`: bbar = a^-T xbar, abar = -bbar x^T; `det`: abar = g det(a) a^-T), so a gradient costs a
few more solves, not a differentiated loop. Leading batch axes broadcast. A singular matrix gives infs and NaNs in a
solve or inverse and a zero determinant, as in JAX (there is no error: values are not known while tracing).

>>> x = tnp.linalg.solve(a, b)                      # a x = b
>>> tnp.linalg.norm(x), tnp.linalg.norm(a, "fro"), tnp.linalg.norm(a, 1, axis=(-2, -1))
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce as rd
from tgfx.tensor import ArrayLike, Tensor, normalize_axis, static_int

Ord = int | float | str | None


def _inexact(name: str, *xs: ArrayLike) -> list[Tensor]:
    from tgfx.scipy._util import promote_args_inexact
    return promote_args_inexact(name, *xs)


def _square(name: str, a: Tensor) -> int:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: a must be a square matrix or a stack of them (shape (..., n, n)), got shape "
                         f"{a.shape}")
    return a.shape[-1]


# ---- norms ----
def _vector_norm(x: Tensor, ord: Ord, axis: tuple[int, ...], keepdims: bool) -> Tensor:  # noqa: A002 - numpy's name
    if ord is None or ord == 2:
        return ew.sqrt(rd.sum(rd.abs2(x), axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid order {ord!r} for a vector norm (use None, 0, 1, 2, tnp.inf, -tnp.inf or a "
                         f"number)")
    if ord == np.inf:   # as JAX's amax(|x|, initial=0): 0 for no elements, and ties with 0 share its gradient
        return rd.max(ew.absolute(x), axis=axis, keepdims=keepdims, initial=0)
    if ord == -np.inf:
        return rd.min(ew.absolute(x), axis=axis, keepdims=keepdims)
    if ord == 0:   # the number of nonzeros, in x's float type
        return rd.sum(ew.not_equal(x, 0).astype(ew.absolute(x).dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return rd.sum(ew.absolute(x), axis=axis, keepdims=keepdims)
    p = float(ord)
    return ew.power(rd.sum(ew.power(ew.absolute(x), p), axis=axis, keepdims=keepdims), 1.0 / p)


def _matrix_norm(x: Tensor, ord: Ord, rows: int, cols: int, keepdims: bool) -> Tensor:  # noqa: A002
    if ord is None or ord in ("fro", "f"):
        return ew.sqrt(rd.sum(rd.abs2(x), axis=(rows, cols), keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum of |x| (sum over the rows); inf: the largest row sum (sum over the columns)
        inner, outer = (rows, cols) if ord in (1, -1) else (cols, rows)
        sums = rd.sum(ew.absolute(x), axis=inner, keepdims=True)
        out = rd.max(sums, axis=outer, keepdims=True) if ord in (1, np.inf) else rd.min(sums, axis=outer,
                                                                                         keepdims=True)
        return out if keepdims else out.reshape(tuple(s for i, s in enumerate(x.shape) if i not in (rows, cols)))
    if ord in ("nuc", 2, -2):   # from the singular values (`svdvals`): their sum, the largest, the smallest
        from tgfx.numpy._movement import moveaxis
        sv = svdvals(moveaxis(x, (rows, cols), (-2, -1)))
        out = rd.sum(sv, axis=-1) if ord == "nuc" else sv[..., 0] if ord == 2 else sv[..., -1]
        if keepdims:
            return out.reshape(tuple(1 if i in (rows, cols) else s for i, s in enumerate(x.shape)))
        return out
    raise ValueError(f"norm: invalid order {ord!r} for a matrix norm (use None, 'fro', 'nuc', 1, -1, 2, -2, tnp.inf "
                     f"or -tnp.inf)")


def norm(x: ArrayLike, ord: Ord = None, axis: int | Sequence[int] | None = None,  # noqa: A002 - numpy's name
         keepdims: bool = False) -> Tensor:
    """A vector or matrix norm (`jax.numpy.linalg.norm`), in x's float type (integers as the default float).

    `axis` None: the 2-norm of all of x when `ord` is None (any number of axes, as numpy), else x must be 1-d (a
    vector norm) or 2-d (a matrix norm). An int axis: vector norms along it; a pair of axes: matrix norms over them.

    Vector orders: None / 2 (Euclidean), 1 (sum of |x|), inf / -inf (largest / smallest |x|), 0 (the number of
    nonzeros) and any other p (sum(|x|^p)^(1/p)). Matrix orders: None / 'fro' (Frobenius), 1 / -1 (largest /
    smallest column sum of |x|), inf / -inf (largest / smallest row sum), 2 / -2 (largest / smallest singular
    value) and 'nuc' (their sum), the last three from `svdvals`.

    The gradient at x = 0 is JAX's: finite for orders 1, inf, -inf and 0 (ties at a max share its gradient), NaN for
    the 2-norm and p-norms (d sqrt(s) at s = 0).

    >>> tnp.linalg.norm(tg.asarray([3.0, -4.0]))                 # 5.0
    >>> tnp.linalg.norm(tg.asarray([[1.0, -2.0], [3.0, 4.0]]), 1)   # 6.0, the largest column sum
    """
    (t,) = _inexact("norm", x)
    if axis is None:
        if ord is None:
            out = ew.sqrt(rd.sum(rd.abs2(t)))
            return out.reshape((1,) * t.ndim) if keepdims else out
        if t.ndim not in (1, 2):
            raise ValueError(f"norm: with ord={ord!r} and no axis, x must be 1-d or 2-d, got shape {t.shape}; give "
                             f"axis= to take norms over some of its axes")
        axes: tuple[int, ...] = tuple(range(t.ndim))
    elif isinstance(axis, (int, np.integer)):
        axes = (normalize_axis(axis, t.ndim, "norm"),)
    else:
        axes = tuple(normalize_axis(a, t.ndim, "norm") for a in axis)
    if len(axes) == 1:
        return _vector_norm(t, ord, axes, keepdims)
    if len(axes) == 2:
        if axes[0] == axes[1]:
            raise ValueError(f"norm: the two axes of a matrix norm must be different, got axis={axis!r}")
        return _matrix_norm(t, ord, axes[0], axes[1], keepdims)
    raise ValueError(f"norm: axis must be an int or a pair of ints, got axis={axis!r}")


# ---- solves, inverses, determinants (LU with partial pivoting, tgfx/scipy/_lu.py) ----
def solve(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The x with a x = b for a square `a` (`jax.numpy.linalg.solve`), by LU with partial pivoting.

    a is (..., n, n). As in JAX (and numpy 2), b is a vector only when it is 1-d, shape (n,), giving x of shape
    (..., n); otherwise b is (..., n, k) and the batch axes of a and b broadcast. Differentiable in both: the
    backward is a solve with a^T (bbar = a^-T xbar) and an outer product (abar = -bbar x^T).

    >>> tnp.linalg.solve(tg.asarray([[3.0, 1.0], [1.0, 2.0]]), tg.asarray([9.0, 8.0]))   # [2., 3.]

    Raises ValueError when a is not square or b's length (rows) does not match it.
    """
    from tgfx.scipy.linalg import general_solve
    at, bt = _inexact("solve", a, b)
    n = _square("solve", at)
    vector = bt.ndim == 1
    if (bt.shape[0] if vector else bt.shape[-2] if bt.ndim >= 2 else -1) != n:
        raise ValueError(f"solve: b must have shape ({n},) or (..., {n}, k) to match a of shape {at.shape}, got "
                         f"shape {bt.shape}")
    x = general_solve(at, bt[:, None] if vector else bt)
    return x[..., 0] if vector else x


def inv(a: ArrayLike) -> Tensor:
    """The inverse of a square matrix, or of each of a stack (..., n, n) (`jax.numpy.linalg.inv`): `solve` with the
    identity. Singular: infs and NaNs.

    >>> tnp.linalg.inv(tg.asarray([[2.0, 0.0], [0.0, 4.0]]))     # [[0.5, 0.], [0., 0.25]]
    """
    from tgfx.numpy._creation import eye
    from tgfx.numpy._movement import broadcast_to
    from tgfx.scipy.linalg import general_solve
    (at,) = _inexact("inv", a)
    n = _square("inv", at)
    return general_solve(at, broadcast_to(eye(n, dtype=at.dtype), at.shape))


def det(a: ArrayLike) -> Tensor:
    """The determinant of a square matrix, or of each of a stack (..., n, n) (`jax.numpy.linalg.det`). As JAX's: a
    2 x 2 or 3 x 3 matrix by its cofactor expansion (exact for integer entries: a singular one gives 0, and the
    gradient is its cofactors, also where it is singular); a larger one the product of U's diagonal, signed by the
    row swaps, with the cofactor matrix for gradient (`_adjugate`: det(a) a^-T where a is invertible, finite for a
    singular one of rank n - 1 or below).

    >>> tnp.linalg.det(tg.asarray([[1.0, 2.0], [3.0, 4.0]]))     # -2.0
    """
    from tgfx.numpy._creation import ones
    from tgfx.scipy.linalg import _det_fn
    (at,) = _inexact("det", a)
    n = _square("det", at)
    if n == 0:
        return ones(at.shape[:-2], at.dtype)
    if n in (2, 3):
        return _det_by_cofactors(at)
    return _det_fn(at)


def _det_by_cofactors(a: Tensor) -> Tensor:
    """det of 2 x 2 or 3 x 3 matrices (..., n, n) as JAX's `_det_2x2` / `_det_3x3` sum their products."""
    def e(i: int, j: int) -> Tensor:
        return a[..., i, j]
    if a.shape[-1] == 2:
        return e(0, 0) * e(1, 1) - e(0, 1) * e(1, 0)
    return (e(0, 0) * e(1, 1) * e(2, 2) + e(0, 1) * e(1, 2) * e(2, 0) + e(0, 2) * e(1, 0) * e(2, 1)
            - e(0, 2) * e(1, 1) * e(2, 0) - e(0, 0) * e(1, 2) * e(2, 1) - e(0, 1) * e(1, 0) * e(2, 2))


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """(sign, log|det a|) (`jax.numpy.linalg.slogdet`): the log-determinant without det's overflow; sign is -1, 0 or
    1 and a singular matrix gives (0, -inf). Differentiable in the log: its gradient is a^-T. `method` is JAX's
    'lu' (the default) or 'qr'; both are computed by LU with partial pivoting here (the same answer).

    >>> sign, logdet = tnp.linalg.slogdet(cov)
    """
    from tgfx.numpy._creation import ones, zeros
    from tgfx.scipy.linalg import _slogdet_fn
    if method not in (None, "lu", "qr"):
        raise ValueError(f"slogdet: method must be 'lu' or 'qr', got {method!r}")
    (at,) = _inexact("slogdet", a)
    n = _square("slogdet", at)
    if n == 0:
        return SlogdetResult(ones(at.shape[:-2], at.dtype), zeros(at.shape[:-2], at.dtype))
    sign, logdet = _slogdet_fn(at)
    return SlogdetResult(sign, logdet)  # a named pair, as jnp's


# ---- the array API's linalg extension: the names that need no factorisation ----
def matrix_transpose(x: ArrayLike, /) -> Tensor:
    from tgfx.numpy._standard import matrix_transpose as mt
    return mt(x)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Tensor:
    from tgfx.numpy._standard import vecdot as vd
    return vd(x1, x2, axis=axis)


def matmul(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    from tgfx.numpy._linalg import matmul as mm
    return mm(x1, x2)


def tensordot(x1: ArrayLike, x2: ArrayLike, /, *, axes: int | tuple = 2) -> Tensor:
    from tgfx.numpy._einsum import tensordot as td
    return td(x1, x2, axes=axes)


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """The outer product of two vectors (1-d only, as the standard says; numpy's flattens)."""
    from tgfx.numpy._linalg import outer as op
    a, b = Tensor(x1) if not isinstance(x1, Tensor) else x1, Tensor(x2) if not isinstance(x2, Tensor) else x2
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"linalg.outer: needs two 1-d Tensors, got shapes {a.shape} and {b.shape}")
    return op(a, b)


def diagonal(x: ArrayLike, /, *, offset: int = 0) -> Tensor:
    """The diagonals of the matrices in the last two axes (numpy's diagonal takes the first two)."""
    from tgfx.numpy._linalg import diagonal as dg
    return dg(x, offset=offset, axis1=-2, axis2=-1)


def trace(x: ArrayLike, /, *, offset: int = 0, dtype: object = None) -> Tensor:
    """The sums along the diagonals of the matrices in the last two axes."""
    from tgfx.numpy._linalg import trace as tr
    return tr(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def vector_norm(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False,
                ord: int | float = 2) -> Tensor:  # noqa: A002 - the standard's name
    """The vector norm over `axis` (all of x when None; a tuple of axes is one vector)."""
    (t,) = _inexact("vector_norm", x)
    axes = tuple(range(t.ndim)) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(normalize_axis(a, t.ndim, "vector_norm") for a in axes)
    return _vector_norm(t, ord, axes, keepdims)


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: Ord = "fro") -> Tensor:  # noqa: A002
    """The matrix norm of the matrices in the last two axes ('fro', 'nuc', 1, -1, 2, -2, inf, -inf; see `norm`)."""
    (t,) = _inexact("matrix_norm", x)
    if t.ndim < 2:
        raise ValueError(f"matrix_norm: needs a Tensor of at least 2 dimensions, got shape {t.shape}")
    return _matrix_norm(t, ord, t.ndim - 2, t.ndim - 1, keepdims)


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Tensor:
    """The cross product of 3-vectors along `axis` (broadcast over the other axes)."""
    a, b = ew._operands(x1, x2, "cross")
    ax = normalize_axis(axis, a.ndim, "cross")
    if a.shape[ax] != 3:
        raise ValueError(f"cross: the vectors along axis {axis} must have 3 elements, got shape {a.shape}")
    from tgfx.numpy._movement import moveaxis, stack
    u, v = moveaxis(a, ax, 0), moveaxis(b, ax, 0)
    out = stack([u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]])
    return moveaxis(out, 0, ax)


def matrix_power(x: ArrayLike, n: int, /) -> Tensor:
    """x multiplied by itself n times, by repeated squaring (the inverse's powers for n < 0; the identity for 0)."""
    from tgfx.numpy._creation import eye
    from tgfx.numpy._linalg import matmul as mm
    t = x if isinstance(x, Tensor) else Tensor(x)
    size = _square("matrix_power", t)
    if (power := static_int(n)) is None:
        raise TypeError(f"matrix_power: the exponent n must be a Python int, got {n!r} ({type(n).__name__})")
    n = power
    if n < 0:
        t, n = inv(t), -n
    out = None
    while n:
        if n & 1:
            out = t if out is None else mm(out, t)
        n >>= 1
        if n:
            t = mm(t, t)
    return out if out is not None else eye(size, dtype=t.dtype).expand(t.shape)


# ---- factorisations (tgfx/scipy/_decomp.py: Householder QR, Jacobi eigh and SVD) ----
class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


def _real_matrix(name: str, x: ArrayLike) -> Tensor:
    """x as a float32 / float64 Tensor of at least 2 dimensions (integers as the default float)."""
    (t,) = _inexact(name, x)
    if t.dtype.name not in ("float32", "float64"):
        raise TypeError(f"{name}: takes real float32 or float64 matrices (complex ones are not supported yet), got "
                        f"{t.dtype.name}; convert with .astype(tnp.float32)")
    if t.ndim < 2:
        raise ValueError(f"{name}: needs a matrix or a stack of them (shape (..., m, n)), got shape {t.shape}")
    return t


def cholesky(x: ArrayLike, /, *, upper: bool = False, symmetrize_input: bool = True) -> Tensor:
    """The Cholesky factor of a symmetric (Hermitian) positive definite matrix or of each of a stack (..., n, n)
    (`jax.numpy.linalg.cholesky`): L with x = L L^T (L L^H), or with `upper=True` U = L^T (L^H), x = U^T U. As JAX,
    x is first symmetrised, (x + x^H) / 2, so that its gradient is symmetric too; `symmetrize_input=False` reads only
    the one triangle, as numpy (the same factor for a symmetric x, and the same gradient along symmetric directions).
    Not positive definite: NaNs (numpy raises; the values are not known while tracing). `tgfx.scipy.linalg`'s
    blocked factorisation, with its own backward (complex: a loop, differentiated through).

    >>> tnp.linalg.cholesky(tg.asarray([[4.0, 2.0], [2.0, 5.0]]))     # [[2, 0], [1, 2]]
    """
    from tgfx.scipy.linalg import cholesky as chol
    (t,) = _inexact("cholesky", x)
    if not t.dtype.is_complex:
        t = _real_matrix("cholesky", t)
    _square("cholesky", t)
    return chol(_symmetrized(t) if symmetrize_input else t, lower=not upper)


def _symmetrized(t: Tensor) -> Tensor:
    """(t + t^H) / 2, JAX's `symmetrize_input`."""
    other = t.swapaxes(-1, -2)
    return (t + (other.conj() if t.dtype.is_complex else other)) / 2


def qr(a: ArrayLike, mode: str = "reduced") -> QRResult | Tensor:
    """The QR factorisation a = Q R of a matrix or of each of a stack (..., m, n) (`numpy.linalg.qr`), by Householder
    reflections as LAPACK's geqrf makes them: Q and R are numpy's, up to rounding (R's diagonal may be negative).

    mode 'reduced': QRResult(Q (..., m, k), R (..., k, n)), k = min(m, n); 'complete': Q (..., m, m), R (..., m, n);
    'r': R alone (k rows); 'full' is 'reduced' (numpy's old name, as JAX reads it). Differentiable as JAX's qr is:
    for m >= n, mode 'reduced' or 'r' (other cases raise NotImplementedError when differentiated, as in JAX).

    >>> q, r = tnp.linalg.qr(a)
    """
    from tgfx.scipy._decomp import qr_fns
    if mode == "full":
        mode = "reduced"
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r} (JAX's 'raw', the Householder "
                         f"reflectors, is not supported)")
    t = _real_matrix("qr", a)
    m, n = t.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    if min(m, n) == 0:
        from tgfx.numpy._creation import eye, zeros
        q, r = eye(m, k, dtype=t.dtype).expand(t.shape[:-2] + (m, k)), zeros(t.shape[:-2] + (k, n), t.dtype)
    else:
        q, r = qr_fns[mode == "complete" and m > n](t)
    return r if mode == "r" else QRResult(q, r)


def _symmetric(name: str, a: ArrayLike, uplo: str | None, symmetrize_input: bool) -> Tensor:
    """The symmetric matrix a is taken for: (a + a^T) / 2 with `symmetrize_input` (JAX's default), else the one whose
    lower (UPLO 'L' or None) or upper ('U') triangle a holds, the other not read (numpy's)."""
    from tgfx.numpy._creation import tril, triu
    if uplo not in ("L", "U", None):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {uplo!r}")
    t = _real_matrix(name, a)
    _square(name, t)
    if symmetrize_input:
        return _symmetrized(t)
    half = tril(t) if uplo != "U" else triu(t)
    strict = tril(t, -1) if uplo != "U" else triu(t, 1)
    return half + strict.swapaxes(-1, -2)


def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:  # noqa: N803
    """The eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix or of each of a stack
    (`jax.numpy.linalg.eigh`), by cyclic Jacobi rotations on the device (sweeps until the off-diagonal part is below
    eps times the norm, typically 5-10). As JAX, a is first symmetrised, (a + a^T) / 2 (its gradient is then
    symmetric); with `symmetrize_input=False` only the triangle UPLO names ('L', the default, or 'U') is read, as
    numpy. An eigenvector's sign is not fixed (nor, for a repeated eigenvalue, its basis): compare invariants
    (a v = w v, v^T v = I), not the vectors.

    Differentiable as JAX's: abar = V (diag(wbar) + F o (V^T Vbar)) V^T, F_ij = 1 / (w_j - w_i), symmetrised (or
    on the triangle read, with `symmetrize_input=False`); the eigenvectors' gradient is infinite at repeated
    eigenvalues, the eigenvalues' is not.

    >>> w, v = tnp.linalg.eigh(tg.asarray([[2.0, 1.0], [1.0, 2.0]]))    # w = [1., 3.]
    """
    from tgfx.scipy._decomp import eigh_fn
    s = _symmetric("eigh", a, UPLO, symmetrize_input)
    if s.shape[-1] == 0:
        from tgfx.numpy._creation import zeros
        return EighResult(zeros(s.shape[:-1], s.dtype), s)
    w, v = eigh_fn(s)
    return EighResult(w, v)


def eigvalsh(a: ArrayLike, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Tensor:  # noqa: N803
    """The eigenvalues of a symmetric matrix (or a stack of them), ascending (`jax.numpy.linalg.eigvalsh`; a
    symmetrised as `eigh` says): `eigh` without accumulating the eigenvectors (the backward computes them)."""
    from tgfx.scipy._decomp import eigvalsh_fn
    s = _symmetric("eigvalsh", a, UPLO, symmetrize_input)
    if s.shape[-1] == 0:
        from tgfx.numpy._creation import zeros
        return zeros(s.shape[:-1], s.dtype)
    return eigvalsh_fn(s)


def _svd_hermitian(t: Tensor, compute_uv: bool) -> Any:
    """numpy's svd(hermitian=True): from eigh, S = |w| descending, U = V, Vh = (sign(w) V)^T in that order."""
    from tgfx.numpy._indexing import take_along_axis
    from tgfx.numpy._sort import argsort
    w, v = eigh(t)
    order = argsort(-ew.absolute(w), axis=-1)
    s = take_along_axis(ew.absolute(w), order, axis=-1)
    if not compute_uv:
        return s
    u = take_along_axis(v, order[..., None, :].expand(v.shape), axis=-1)
    signs = take_along_axis(ew.where(w < 0, -1.0, 1.0).astype(t.dtype), order, axis=-1)
    return SVDResult(u, s, (u * signs[..., None, :]).swapaxes(-1, -2))


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False) -> SVDResult | Tensor:
    """The singular value decomposition a = U diag(S) Vh of a matrix or of each of a stack (..., m, n)
    (`numpy.linalg.svd`), S descending, by one-sided Jacobi rotations of a's columns (of a^T's when wide) on the
    device; U is the QR factor of the rotated columns, so it is orthonormal whatever a's rank. Singular vectors'
    signs (and bases for repeated singular values) are not fixed: compare invariants.

    `full_matrices` (the default, as numpy): U (..., m, m) and Vh (..., n, n), else k = min(m, n) columns / rows.
    `compute_uv=False` returns S alone (`svdvals`). `hermitian=True` takes a symmetric a through `eigh`.
    Differentiable as JAX's: S always; U and Vh with full_matrices=False (or a square a), NaN or infinite at
    repeated or zero singular values as in JAX.

    >>> u, s, vh = tnp.linalg.svd(a, full_matrices=False)
    """
    from tgfx.scipy._decomp import svd_fns
    t = _real_matrix("svd", a)
    m, n = t.shape[-2:]
    if hermitian:
        _square("svd", t)
        return _svd_hermitian(t, compute_uv)
    if not compute_uv:
        return svdvals(t)
    if min(m, n) == 0:
        from tgfx.numpy._creation import eye, zeros
        ku, kv = (m, n) if full_matrices else (0, 0)
        return SVDResult(eye(m, ku, dtype=t.dtype).expand(t.shape[:-2] + (m, ku)), zeros(t.shape[:-2] + (0,), t.dtype),
                         eye(kv, n, dtype=t.dtype).expand(t.shape[:-2] + (kv, n)))
    s, u, vh = svd_fns[bool(full_matrices) and m != n](t)
    return SVDResult(u, s, vh)


def svdvals(x: ArrayLike, /) -> Tensor:
    """The singular values of a matrix or of each of a stack, descending (the array API's `svdvals`): `svd` without
    the vectors (its backward, U diag(sbar) Vh, computes them)."""
    from tgfx.scipy._decomp import svdvals_fn
    t = _real_matrix("svdvals", x)
    if min(t.shape[-2:]) == 0:
        from tgfx.numpy._creation import zeros
        return zeros(t.shape[:-2] + (0,), t.dtype)
    return svdvals_fn(t)


def _relative_tolerance(name: str, rcond: Any, rtol: Any, default: Any) -> Any:
    if rcond is not None and rtol is not None:
        raise ValueError(f"{name}: give rtol or rcond (its older name), not both")
    return default if rcond is None and rtol is None else rtol if rtol is not None else rcond


def pinv(a: ArrayLike, rcond: ArrayLike | None = None, hermitian: bool = False, *,
         rtol: ArrayLike | None = None) -> Tensor:
    """The Moore-Penrose pseudo-inverse of a matrix or of each of a stack (..., m, n) -> (..., n, m)
    (`jax.numpy.linalg.pinv`): V diag(1/s) U^T over the singular values above rtol * max(s) (`rcond` is rtol's
    older name; rtol may be an array over the batch).

    The default rtol is JAX's, 10 * max(m, n) * eps: numpy's 1e-15 would invert rounding noise in float32. With
    `hermitian=True` a symmetric a goes through `eigh`. Differentiable by Golub and Pereyra's formula (JAX's
    custom_jvp), where the rank does not change.

    >>> tnp.linalg.pinv(tg.asarray([[1.0, 2.0], [2.0, 4.0]]))    # rank 1: [[0.04, 0.08], [0.08, 0.16]]
    """
    from tgfx.numpy._creation import zeros
    from tgfx.scipy._decomp import pinv_fns
    t = _real_matrix("pinv", a)
    m, n = t.shape[-2:]
    if hermitian:   # only the lower triangle is read, as numpy's eigh-based pinv
        t = _symmetric("pinv", t, "L", symmetrize_input=False)
    eps = float(np.finfo(np.float64 if t.dtype.name == "float64" else np.float32).eps)
    tol = _relative_tolerance("pinv", rcond, rtol, 10.0 * max(m, n) * eps)
    if min(m, n) == 0:
        return zeros(t.shape[:-2] + (n, m), t.dtype)
    if not isinstance(tol, Tensor):   # host data goes where the matrix is (made on the default device, it failed)
        tol = Tensor(np.asarray(tol), device=t.uop.device)
    (tol_t,) = _inexact("pinv", tol)
    return pinv_fns[bool(hermitian)](t, tol_t.astype(t.dtype))


def matrix_rank(A: ArrayLike, tol: ArrayLike | None = None, hermitian: bool = False, *,  # noqa: N803 - numpy's
                rtol: ArrayLike | None = None) -> Tensor:
    """The number of singular values above tol (absolute), or above rtol * max(s) (default rtol max(m, n) * eps,
    as numpy), of a matrix or of each of a stack (`numpy.linalg.matrix_rank`); an int Tensor. A vector or scalar:
    1 unless all zero. `hermitian=True` takes the singular values from `eigvalsh`.

    >>> tnp.linalg.matrix_rank(tg.asarray([[1.0, 2.0], [2.0, 4.0]]))    # 1
    """
    (t,) = _inexact("matrix_rank", A)
    if t.ndim < 2:
        return rd.any(ew.not_equal(t, 0)).astype(rd.sum(ew.not_equal(t, 0)).dtype)
    t = _real_matrix("matrix_rank", t)
    m, n = t.shape[-2:]
    s = ew.absolute(eigvalsh(t)) if hermitian else svdvals(t)
    if tol is not None and rtol is not None:
        raise ValueError("matrix_rank: give tol (absolute) or rtol (relative), not both")
    if tol is None:
        eps = float(np.finfo(np.float64 if t.dtype.name == "float64" else np.float32).eps)
        (r,) = _inexact("matrix_rank", max(m, n) * eps if rtol is None else rtol)
        cut = r.astype(t.dtype)[..., None] * rd.max(s, axis=-1, keepdims=True) if s.shape[-1] else r[..., None]
    else:
        (cut,) = _inexact("matrix_rank", tol)
        cut = cut.astype(t.dtype)[..., None]
    return rd.sum(ew.greater(s, cut), axis=-1)


# least squares, condition numbers, chained products and tensor solves, written on the functions above
from tgfx.numpy._linalg_more import cond as cond  # noqa: E402 - it imports this module's functions
from tgfx.numpy._linalg_more import lstsq as lstsq  # noqa: E402
from tgfx.numpy._linalg_more import multi_dot as multi_dot  # noqa: E402
from tgfx.numpy._linalg_more import tensorinv as tensorinv  # noqa: E402
from tgfx.numpy._linalg_more import tensorsolve as tensorsolve  # noqa: E402

__all__ = ["EighResult", "QRResult", "SVDResult", "cholesky", "cond", "cross", "det", "diagonal", "eigh", "eigvalsh",
           "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot",
           "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv",
           "tensorsolve", "trace", "vecdot", "vector_norm"]
