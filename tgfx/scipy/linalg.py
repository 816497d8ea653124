"""`tgfx.scipy.linalg`: Cholesky and LU factorisations and triangular solves, as `jax.scipy.linalg` has them (the
Cholesky factorisation here, the triangular solves in `_triangular.py`, the LU factorisation in `_lu.py`); its
other decompositions and matrix functions (det, inv, solve, eigh, lu, qr, svd, polar, expm, solve_sylvester,
hessenberg, eigh_tridiagonal: `_linalg_more.py`) and special matrices (toeplitz, hankel, circulant, block_diag, dft,
hilbert, pascal, ...: `_linalg_special.py`) are written on them.

All are tgfx programs whose loops run on the device and compile once whatever their trip count, with no shape
depending on the data; leading batch axes are carried through every step. The Cholesky factorisation goes by
panels of 8 columns a loop step (`_cholesky_panels`), each panel's diagonal block written out entry by entry; the
triangular solves are a `tg.lax.fori_loop` over the n rows (or columns), or past a few dozen rows a scan over blocks
of B rows (the inverses of the diagonal blocks first, then a block a step, its products taken off the rest of b:
n / B + B steps). Each is a `tg.function` with its own backward (more triangular solves), so `grad` costs O(n^3)
time and O(n^2) memory, not the n saved carries a differentiated loop would keep. The LU factorisation
(`lu_factor`, partial pivoting) is one loop of n unblocked steps, or from 128 rows a loop over panels of 32 columns
(`_lu_panels`); `tnp.linalg`'s solve, inv, det and slogdet are written on it, with their own backwards.

As in scipy, only one triangle of the input is read (the lower one for `lower=True`); the other may hold anything,
NaN included. The gradient is that of the function as computed, so it is zero on the triangle not read; for a
symmetric perturbation (a covariance built symmetrically from parameters) it is the same as JAX's. A matrix that is
not positive definite gives NaNs, as in JAX (there is no error: the values are not known while tracing).

>>> import tgfx.scipy.linalg as sla
>>> c, low = sla.cho_factor(cov, lower=True)
>>> x = sla.cho_solve((c, low), b)                        # cov^-1 b
>>> z = sla.solve_triangular(c, b, lower=True)            # L^-1 b
>>> x = sla.lu_solve(sla.lu_factor(a), b)                 # a^-1 b for any square a
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tgfx.numpy as tnp
from tgfx.function import function
from tgfx.lax import fori_loop, scan

# the triangular solves and the matrix helpers (`_triangular.py`), and the LU factorisation and what `tnp.linalg`
# writes on it (`_lu.py`): the Cholesky factorisation below is built on the first; both are this module's names too
from tgfx.scipy._lu import _det_fn as _det_fn
from tgfx.scipy._lu import _lu_loop as _lu_loop
from tgfx.scipy._lu import _slogdet_fn as _slogdet_fn
from tgfx.scipy._lu import general_solve as general_solve
from tgfx.scipy._lu import lu_factor as lu_factor
from tgfx.scipy._lu import lu_solve as lu_solve
from tgfx.scipy._triangular import _abt, _atb, _blocks, _check_square, _index, _pad_identity, _solve, solve_triangular
from tgfx.scipy._triangular import _col as _col
from tgfx.scipy._triangular import _system as _system
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor

Scalars = list[list[Tensor | None]]   # a small matrix held as its entries, each a Tensor of the batch shape


def _stored(e: Scalars, like: Tensor) -> Scalars:
    """The entries e (None: zero; rows of any length) stored as one Tensor (`contiguous`), as entries of it again. A
    kernel works out every entry it stores from what it reads, so entries written out from others and not stored
    would be worked out again for every element of every kernel that reads them."""
    zero = tnp.zeros_like(like)
    width = max(len(r) for r in e)
    m = tnp.stack([tnp.stack([zero if j >= len(r) or r[j] is None else r[j] for j in range(width)], axis=-1)
                   for r in e], axis=-2).contiguous()
    return [[m[..., i, j] if j < len(r) and r[j] is not None else None for j in range(width)] for i, r in enumerate(e)]


def _chol4(d: Callable[[int, int], Tensor]) -> tuple[Scalars, list[Tensor]]:
    """The Cholesky factor L of a 4 x 4 block given its entries on and below the diagonal (d(i, j), i >= j), and
    the reciprocals of its diagonal, stored: written out entry by entry with the arithmetic of the column-by-column
    algorithm, so the block is one small kernel instead of a loop of four steps."""
    low: Scalars = [[None] * 4 for _ in range(4)]
    for j in range(4):
        v = d(j, j)
        for m in range(j):
            v = v - low[j][m] * low[j][m]
        low[j][j] = tnp.sqrt(v)
        for i in range(j + 1, 4):
            v = d(i, j)
            for m in range(j):
                v = v - low[i][m] * low[j][m]
            low[i][j] = v / low[j][j]
    out = _stored([*low, [1.0 / low[j][j] for j in range(4)]], d(0, 0))
    return out[:4], out[4]


def _chol8(ent: Callable[[int, int], Tensor]) -> tuple[Scalars, list[Tensor]]:
    """The Cholesky factor of an 8 x 8 block given its entries on and below the diagonal, and the reciprocals of its
    diagonal: the two 4 x 4 diagonal blocks written out (`_chol4`), the one below them by substitution, each stored."""
    l11, r11 = _chol4(ent)
    low: Scalars = [[None] * 4 for _ in range(4)]
    for i in range(4):   # L21 = D21 L11^-T by substitution: through L11^-1 it was up to 2x less accurate
        for j in range(4):
            v = ent(4 + i, j)
            for m in range(j):
                v = v - low[i][m] * l11[j][m]
            low[i][j] = v / l11[j][j]
    l21 = _stored(low, ent(0, 0))
    s22 = _stored([[ent(4 + i, 4 + j) - sum(l21[i][m] * l21[j][m] for m in range(4)) if j <= i else None
                    for j in range(4)] for i in range(4)], ent(0, 0))
    l22, r22 = _chol4(lambda i, j: s22[i][j])
    return [[*l11[i], None, None, None, None] for i in range(4)] + [[*l21[i], *l22[i]] for i in range(4)], r11 + r22


_PANEL = 8   # columns of L (rows of U) a step of the blocked factorisation


def _cholesky_panels(a: Tensor, lower: bool) -> Tensor:
    """The Cholesky factor of the symmetric matrix whose lower (upper) triangle `a` holds, right-looking by panels of
    8 columns of L (rows of U = L^T), one loop step a panel: the panel's 8 x 8 diagonal block is factored written out
    (`_chol8`, a few small kernels), the panel's columns follow by substitution against it, one stored vector each,
    and their outer products come off the trailing matrix in one elementwise kernel. The arithmetic is that of the
    column-by-column algorithm, so it is as accurate (measured on GP covariances in float32: LAPACK's spotrf's error
    or less; through the inverses of 4 x 4 or 8 x 8 blocks it was up to 3x or 7x worse). The panels are the loop's
    stacked outputs, so no step writes into an n x n factor: n / 8 steps of about 16 small kernels, where the
    column-by-column loop took n steps of six (at n = 128: about 100 us, from 260)."""
    n = a.shape[-1]
    pad = -n % _PANEL
    if pad:   # an identity tail, factored to itself, makes n a multiple of the panel
        return _cholesky_panels(_pad_identity(a, pad), lower)[..., :n, :n]
    nb = n // _PANEL
    idx = _index(n)

    def step(rest: Tensor, s: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
        # the panel: columns (rows) s*8... of the trailing matrix, valid on and below (right of) the diagonal
        panel = _blocks(rest, s, nb, -1 if lower else -2)                     # (..., n, 8) or (..., 8, n)
        d = _blocks(panel, s, nb, -2 if lower else -1)
        fac, rec = _chol8((lambda i, j: d[..., i, j]) if lower else (lambda i, j: d[..., j, i]))   # rec: 1 / L_jj
        # the panel's columns of L (rows of U) by substitution against the block's factor, one stored vector each:
        # through the inverses of the groups of four it was up to 3x less accurate than LAPACK
        c: list[Tensor] = []
        for j in range(_PANEL):
            v = panel[..., :, j] if lower else panel[..., j, :]
            for m in range(j):
                v = v - c[m] * fac[j][m][..., None]
            at = s * _PANEL + j
            c.append(tnp.where(idx > at, v * rec[j][..., None], tnp.where(idx == at, fac[j][j][..., None], 0.0))
                     .contiguous())
        # the rank-8 update of the trailing matrix: one elementwise kernel of outer products of the vectors
        return rest - sum(v[..., :, None] * v[..., None, :] for v in c), tnp.stack(c, axis=-1 if lower else -2)

    tri = tnp.tril(a) if lower else tnp.triu(a)
    _, panels = scan(step, tri, _index(nb))                          # (nb, ..., n, 8) or (nb, ..., 8, n)
    if lower:   # L[..., i, s*8 + j] = panels[s, ..., i, j]: the block axis moves in, the 8 stay innermost. Stored:
        # every kernel reading the view would work out the permuted index (divisions) element by element
        return tnp.moveaxis(panels, 0, -2).reshape(a.shape).contiguous()
    return tnp.moveaxis(panels, 0, -3).reshape(a.shape)


def _cholesky_complex(a: Tensor, lower: bool) -> Tensor:
    """The Cholesky factor of the Hermitian matrix whose lower (upper) triangle `a` holds, column by column in a
    loop: L[:, j] = (a[:, j] - L conj(L[j, :])) / L[j, j], L[j, j] the square root of the real remainder; U = L^H.
    Differentiated through the loop."""
    if not lower:
        return tnp.conj(tnp.swapaxes(_cholesky_complex(tnp.conj(tnp.swapaxes(a, -1, -2)), True), -1, -2))
    n = a.shape[-1]
    idx = _index(n)
    tri = tnp.tril(a)

    def step(j: Tensor, fac: Tensor) -> Tensor:
        at = idx == j
        row = tnp.sum(tnp.where(at[:, None], fac, 0), axis=-2)             # L[j, :]
        col = tnp.sum(tnp.where(at[None, :], tri, 0), axis=-1)             # a[:, j]
        v = col - tnp.matmul(fac, tnp.conj(row)[..., None])[..., 0]
        d = tnp.sqrt(tnp.real(tnp.sum(tnp.where(at, v, 0), axis=-1)))
        new = tnp.where(idx > j, v / d[..., None], tnp.where(at, d[..., None].astype(a.dtype), 0))
        return tnp.where(at[None, :], new[..., :, None], fac)
    return fori_loop(0, n, step, tnp.zeros_like(a))


def _phi(x: Tensor, lower: bool) -> Tensor:
    """The lower (upper) triangle of x with its diagonal halved."""
    n = x.shape[-1]
    return (tnp.tril(x) if lower else tnp.triu(x)) - 0.5 * x * tnp.eye(n, dtype=x.dtype)


def _cholesky_backward(lower: bool) -> Any:
    def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor]:
        """For L = chol(S), S the symmetric matrix read from tril(a), dS's cotangent is sym(G) with
        G = L^-T phi(L^T Lbar) L^-1 (Murray 2016, arXiv:1602.07527); a's counts each off-diagonal entry twice (it
        appears in S twice), which is phi(Y) for Y = L^-T (P + P^T) L^-1, P = phi(L^T Lbar). For U = L^T the same
        with every product transposed."""
        g, (fac,) = grads, call.outputs
        g = tnp.tril(g) if lower else tnp.triu(g)
        x = _atb(fac, g) if lower else _abt(fac, g)   # L^T Lbar (stored: its transpose is read as a view)
        n = fac.shape[-1]
        rows, cols = _index(n)[:, None], _index(n)[None, :]
        p_sym = tnp.where(rows < cols, tnp.swapaxes(x, -1, -2), x)   # P + P^T
        w = _solve(fac, p_sym, transpose=lower, lower=lower, unit=False, right=False)
        y = _solve(fac, w, transpose=not lower, lower=lower, unit=False, right=True)
        return (_phi(y, lower),)
    return backward


def _cholesky_lower(a: Tensor) -> Tensor:
    return _cholesky_panels(a, True)


def _cholesky_upper(a: Tensor) -> Tensor:
    return _cholesky_panels(a, False)


_cholesky_fns = {True: function(_cholesky_lower, grad_fxn=_cholesky_backward(True), cache=True),
                 False: function(_cholesky_upper, grad_fxn=_cholesky_backward(False), cache=True)}


def cholesky(a: ArrayLike, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Tensor:
    """The Cholesky factor of a symmetric positive definite matrix (`jax.scipy.linalg.cholesky`).

    Upper by default, as in scipy: a = U^T U; with `lower=True`, a = L L^T (L L^H for a complex Hermitian `a`). Only
    that triangle of `a` is read. `a` may have leading batch axes (..., n, n). Not positive definite: NaNs.
    `overwrite_a` and `check_finite` are accepted for scipy compatibility and have no effect.

    >>> cholesky(tg.asarray([[4.0, 2.0], [2.0, 5.0]]), lower=True)    # [[2, 0], [1, 2]]

    Raises ValueError when `a` is not square (or a stack of square matrices).
    """
    (t,) = promote_args_inexact("cholesky", a)
    n = _check_square("cholesky", "a", t)
    if n == 0:
        return t
    if t.dtype.is_complex:
        return _cholesky_complex(t, bool(lower))
    return _cholesky_fns[bool(lower)](t)


def cho_factor(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Tensor, bool]:
    """(c, lower): the Cholesky factor of `a` and which triangle it is, for `cho_solve` (`jax.scipy.linalg.cho_factor`).

    Unlike scipy, the other triangle of c holds zeros, not what `a` held there (JAX does the same).

    >>> c_and_lower = cho_factor(cov)
    >>> x = cho_solve(c_and_lower, b)
    """
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower: tuple[ArrayLike, bool], b: ArrayLike, overwrite_b: bool = False,
              check_finite: bool = True) -> Tensor:
    """The x with a x = b, given `cho_factor(a)` (`jax.scipy.linalg.cho_solve`): two triangular solves.

    `b` is (n,) or (n, k), with leading batch axes that broadcast with c's.

    >>> x = cho_solve(cho_factor(cov, lower=True), b)
    """
    if not (isinstance(c_and_lower, tuple) and len(c_and_lower) == 2):
        raise TypeError(f"cho_solve: the first argument must be the pair (c, lower) that cho_factor returns, got "
                        f"{type(c_and_lower).__name__}")
    c, low = c_and_lower
    y = solve_triangular(c, b, trans=0 if low else 1, lower=low)
    return solve_triangular(c, y, trans=1 if low else 0, lower=low)


# scipy's other decompositions and matrix functions, and the special matrices, written on the solves above
from tgfx.scipy._linalg_more import det as det  # noqa: E402 - they import this module's functions
from tgfx.scipy._linalg_more import eigh as eigh  # noqa: E402
from tgfx.scipy._linalg_more import eigh_tridiagonal as eigh_tridiagonal  # noqa: E402
from tgfx.scipy._linalg_more import expm as expm  # noqa: E402
from tgfx.scipy._linalg_more import hessenberg as hessenberg  # noqa: E402
from tgfx.scipy._linalg_more import inv as inv  # noqa: E402
from tgfx.scipy._linalg_more import lu as lu  # noqa: E402
from tgfx.scipy._linalg_more import polar as polar  # noqa: E402
from tgfx.scipy._linalg_more import qr as qr  # noqa: E402
from tgfx.scipy._linalg_more import solve as solve  # noqa: E402
from tgfx.scipy._linalg_more import solve_sylvester as solve_sylvester  # noqa: E402
from tgfx.scipy._linalg_more import svd as svd  # noqa: E402
from tgfx.scipy._linalg_special import block_diag as block_diag  # noqa: E402
from tgfx.scipy._linalg_special import circulant as circulant  # noqa: E402
from tgfx.scipy._linalg_special import companion as companion  # noqa: E402
from tgfx.scipy._linalg_special import convolution_matrix as convolution_matrix  # noqa: E402
from tgfx.scipy._linalg_special import dft as dft  # noqa: E402
from tgfx.scipy._linalg_special import fiedler as fiedler  # noqa: E402
from tgfx.scipy._linalg_special import fiedler_companion as fiedler_companion  # noqa: E402
from tgfx.scipy._linalg_special import hadamard as hadamard  # noqa: E402
from tgfx.scipy._linalg_special import hankel as hankel  # noqa: E402
from tgfx.scipy._linalg_special import helmert as helmert  # noqa: E402
from tgfx.scipy._linalg_special import hilbert as hilbert  # noqa: E402
from tgfx.scipy._linalg_special import invhilbert as invhilbert  # noqa: E402
from tgfx.scipy._linalg_special import invpascal as invpascal  # noqa: E402
from tgfx.scipy._linalg_special import leslie as leslie  # noqa: E402
from tgfx.scipy._linalg_special import pascal as pascal  # noqa: E402
from tgfx.scipy._linalg_special import toeplitz as toeplitz  # noqa: E402

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix", "det",
           "dft", "eigh", "eigh_tridiagonal", "expm", "fiedler", "fiedler_companion", "hadamard", "hankel", "helmert",
           "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu", "lu_factor", "lu_solve",
           "pascal", "polar", "qr", "solve", "solve_sylvester", "solve_triangular", "svd", "toeplitz"]
