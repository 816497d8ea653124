"""`tgfx.scipy.linalg`: Cholesky and LU factorisations and triangular solves, as `jax.scipy.linalg` has them; its
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
from tgfx.dtypes import dtypes
from tgfx.function import function
from tgfx.lax import fori_loop, scan
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, to_tensor


def _check_square(name: str, what: str, a: Tensor) -> int:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name}: {what} must be a square matrix or a stack of them (shape (..., n, n)), got shape "
                         f"{a.shape}")
    return a.shape[-1]


def _index(n: int) -> Tensor:
    return tnp.arange(n, dtype=dtypes.int32)


# Every step below reads the row or column it needs with a masked sum over the matrix instead of slicing a
# transposed copy: a transposed elementwise kernel is tiled lane by lane both ways and takes over a second to compile
# at n = 64, where these sums compile in milliseconds and cost O(n^2) a step, like the step's own product.
def _row(x: Tensor, at: Tensor) -> Tensor:
    """x[..., i, :] for the one-hot mask at = (idx == i)."""
    return tnp.sum(tnp.where(at[:, None], x, 0.0), axis=-2)


def _col(x: Tensor, at: Tensor) -> Tensor:
    """x[..., :, i] for the one-hot mask at = (idx == i)."""
    return tnp.sum(tnp.where(at, x, 0.0), axis=-1)


def _product(x: Tensor, y: Tensor, transpose_x: bool) -> Tensor:
    """x^T y (`transpose_x`, x (..., k, m), y (..., k, n)) or x y^T (x (..., m, k), y (..., n, k)), one row of the
    result a step: row i is y^T times column i of x, or y times row i of x.

    x^T y is one matmul. x y^T is a loop rather than one contraction kernel (unless thin: then it is elementwise):
    tgfx schedules x y^T as a transposed copy of y and a matmul, and at n = 64 its transposed-copy kernel (a 16 x 16
    tile of float32 lanes) and its register-tiled matmul take about a second each to compile, where each step here is
    a matrix-vector product that compiles in milliseconds."""
    if transpose_x:
        # a matmul with a transposed left operand reads it in place: fast to compile and to run. Stored: two of
        # them fused into one select (the Cholesky backward's P + P^T) make a kernel 1 GFLOP/s slow (4 ms at n = 128)
        return tnp.matmul(tnp.swapaxes(x, -1, -2), y).contiguous()
    if x.shape[-1] <= 8:  # a thin contraction (the outer product of a vector solve) is elementwise
        return tnp.sum(x[..., :, None, :] * y[..., None, :, :], axis=-1)
    m = x.shape[-1] if transpose_x else x.shape[-2]
    idx = _index(m)
    n = y.shape[-1] if transpose_x else y.shape[-2]
    out = tnp.zeros(broadcast_shapes(x.shape[:-2], y.shape[:-2]) + (m, n), x.dtype)

    def step(i: Tensor, acc: Tensor) -> Tensor:
        at = idx == i
        if transpose_x:
            r = tnp.sum(y * _col(x, at)[..., :, None], axis=-2)
        else:
            r = tnp.sum(y * _row(x, at)[..., None, :], axis=-1)
        return tnp.where(at[:, None], r[..., None, :], acc)

    return fori_loop(0, m, step, out)


def _atb(x: Tensor, y: Tensor) -> Tensor:
    return _product(x, y, True)


def _abt(x: Tensor, y: Tensor) -> Tensor:
    return _product(x, y, False)


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


# ---- triangular solves ----
def _substitute(a: Tensor, b: Tensor, transpose: bool, lower: bool, unit: bool, right: bool) -> Tensor:
    """x with M x = b (or x M = b when `right`), M = op(tri(a)): op the transpose or not, tri the lower or upper
    triangle with a's diagonal or ones; a (..., n, n), b (..., n, k) (or (..., k, n)) of the same batch shape.

    One unknown row (column) a step: x[i] = (b[i] - M[i, :] x) / M[i, i], in the order that has every other term of
    the sum known already: forward for a lower M, backward for an upper one (the other way round for `right`)."""
    n = a.shape[-1]
    idx = _index(n)
    below = lower != transpose          # whether M is lower triangular
    forward = below != right

    def step(k: Tensor, x: Tensor) -> Tensor:
        i = k if forward else (n - 1) - k
        at = idx == i
        # row i of M (for `right`, column i): a row or a column of a
        m = _col(a, at) if transpose != right else _row(a, at)
        d = tnp.sum(tnp.where(at, m, 0.0), axis=-1)
        m = tnp.where(idx < i if below != right else idx > i, m, 0.0)
        if right:
            xi = _col(b, at) - tnp.sum(x * m[..., None, :], axis=-1)
        else:
            xi = _row(b, at) - tnp.sum(m[..., :, None] * x, axis=-2)
        if not unit:
            xi = xi / d[..., None]
        return tnp.where(at, xi[..., :, None], x) if right else tnp.where(at[:, None], xi[..., None, :], x)

    return fori_loop(0, n, step, tnp.zeros_like(b))


def _substitute_unrolled(a: Tensor, b: Tensor, transpose: bool, lower: bool, unit: bool) -> Tensor:
    """`_substitute` (M x = b, not `right`) for a small n, unrolled in Python: each row of x an elementwise value of
    b's row and the rows before it, all of them one kernel storing x once. The loop rewrites the whole x a step, n
    passes over it and a reduce each (a Gaussian mixture's 8 x 8 Cholesky factors against 8 x 8,192 points: 2.7 ms a
    solve, 64% of its EM step); unrolled the rows are computed from registers."""
    n = a.shape[-1]
    below = lower != transpose

    def m(i: int, j: int) -> Tensor:   # M[i, j], one scalar a matrix of the batch, broadcast along b's columns
        return (a[..., j, i] if transpose else a[..., i, j])[..., None]

    rows: dict[int, Tensor] = {}
    for i in range(n) if below else range(n - 1, -1, -1):
        xi = b[..., i, :]
        for j in range(i) if below else range(n - 1, i, -1):
            xi = xi - m(i, j) * rows[j]
        rows[i] = xi if unit else xi / m(i, i)
    return tnp.stack([rows[i] for i in range(n)], axis=-2)


def _pad_identity(a: Tensor, pad: int) -> Tensor:
    """a (..., n, n) with `pad` more rows and columns, zero but for ones on their diagonal."""
    n = a.shape[-1]
    a = tnp.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, pad), (0, pad)])
    return a + tnp.where(_index(n + pad) >= n, 1.0, 0.0).astype(a.dtype) * tnp.eye(n + pad, dtype=a.dtype)


def _block_size(n: int) -> int:
    """The block of the blocked solves: about sqrt(n), so the B inner steps and the n / B outer ones balance."""
    return 8 if n <= 64 else 16 if n <= 256 else 32


def _blocks(x: Tensor, s: Tensor, nb: int, axis: int) -> Tensor:
    """Block s of x along `axis` (-1 or -2) of length nb * B: a masked sum over the block axis of a reshape, the
    same O(size) read as `_row`, without a transposed copy."""
    shape = x.shape[:-2] + ((nb, x.shape[-2] // nb, x.shape[-1]) if axis == -2 else
                            (x.shape[-2], nb, x.shape[-1] // nb))
    at = _index(nb) == s
    return tnp.sum(tnp.where(at[:, None, None] if axis == -2 else at[:, None], x.reshape(shape), 0.0),
                   axis=-3 if axis == -2 else -2)


def _substitute_blocked(a: Tensor, b: Tensor, transpose: bool, lower: bool, unit: bool, right: bool) -> Tensor:
    """`_substitute` by blocks of B rows (columns for `right`): the inverses of M's nb = n / B diagonal blocks come
    first, all at once (B steps of `_substitute` batched over the blocks), then one step a block, right-looking:
    x_s = M_ss^-1 rest_s, and rest, b less the products of the blocks solved so far, loses x_s's column block of M.
    The blocks of x are the loop's stacked outputs, so no step writes into an n x k x (at n = k = 128 that select
    was 10 us a step, the update is 6), and no step reads all of a more than once. n / B + B steps instead of n."""
    n = a.shape[-1]
    bs = _block_size(n)
    pad = -n % bs
    if pad:   # an identity tail, solved to zeros, makes n a multiple of the block
        a = _pad_identity(a, pad)
        b = tnp.pad(b, [(0, 0)] * (b.ndim - 2) + ([(0, 0), (0, pad)] if right else [(0, pad), (0, 0)]))
    m = n + pad
    nb = m // bs
    tri = tnp.tril(a, -1 if unit else 0) if lower else tnp.triu(a, 1 if unit else 0)
    batch = a.shape[:-2]
    bid = _index(nb)
    diag = tnp.sum(tnp.where((bid[:, None] == bid[None, :])[:, None, :, None], tri.reshape(batch + (nb, bs, nb, bs)),
                             0.0), axis=-2)                                         # (..., nb, B, B)
    eye = tnp.broadcast_to(tnp.eye(bs, dtype=a.dtype), diag.shape)
    inv = _substitute(diag, eye, transpose, lower, unit, False)                    # M_ss^-1, every s at once
    below = lower != transpose
    forward = below != right

    def step(rest: Tensor, s: Tensor) -> tuple[Tensor, Tensor]:
        # rest is b less the products of the blocks of x solved so far: x_s = M_ss^-1 rest_s, then x_s's column block
        # of M comes off rest (zero on the rows already solved, M being triangular)
        inv_s = tnp.sum(tnp.where((bid == s)[:, None, None], inv, 0.0), axis=-3)
        # the update is B outer products in one elementwise kernel with the subtraction (a matmul and a subtraction
        # were two kernels, 1.5x the time at n = k = 128)
        if right:      # x_s = rest_s M_ss^-1; M[s, :] a row block of tri
            x_s = tnp.matmul(_blocks(rest, s, nb, -1), inv_s)
            row = _blocks(tri, s, nb, -2).contiguous()
            return rest - sum(x_s[..., :, j, None] * row[..., j, None, :] for j in range(bs)), x_s
        x_s = tnp.matmul(inv_s, _blocks(rest, s, nb, -2))
        if transpose:  # M[:, s] a row block of tri transposed
            blk = _blocks(tri, s, nb, -2).contiguous()
            cols = [blk[..., j, :] for j in range(bs)]
        else:
            blk = _blocks(tri, s, nb, -1).contiguous()
            cols = [blk[..., :, j] for j in range(bs)]
        return rest - sum(c[..., :, None] * x_s[..., j, None, :] for j, c in enumerate(cols)), x_s

    # the blocks of x are the loop's stacked outputs, so no step writes into an n x k carry but for rest's update
    _, xs = scan(step, b, bid, reverse=not forward)                 # (nb, ..., B, k) or (nb, ..., k, B)
    if right:
        x = tnp.moveaxis(xs, 0, -2).reshape(b.shape).contiguous()
    else:
        x = tnp.moveaxis(xs, 0, -3).reshape(b.shape)
    if pad:
        x = x[..., :n] if right else x[..., :n, :]
    return x


def _solve(a: Tensor, b: Tensor, transpose: bool, lower: bool, unit: bool, right: bool = False) -> Tensor:
    """x with op(tri(a)) x = b (x op(tri(a)) = b when `right`); a (..., n, n) and b (..., n, k) (or (..., k, n))
    with broadcast batch axes. A `tg.function` with its own backward."""
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], name="solve_triangular")
    a = tnp.broadcast_to(a, batch + a.shape[-2:])
    b = tnp.broadcast_to(b, batch + b.shape[-2:])
    return _solver(transpose, lower, unit, right)(a, b)


_solvers: dict[tuple[bool, bool, bool, bool], Any] = {}
_UNROLLED_MAX = 8   # the largest n solved by `_substitute_unrolled`


def _solver(transpose: bool, lower: bool, unit: bool, right: bool) -> Any:
    """The `tg.function` solving op(tri(a)) x = b for one combination of the flags (made once, then reused)."""
    flags = (transpose, lower, unit, right)
    if flags in _solvers:
        return _solvers[flags]

    def solve(a: Tensor, b: Tensor) -> Tensor:
        # x tri(a)^T contracts both last axes, a transposed copy that takes seconds to compile: unblocked
        if a.shape[-1] <= _UNROLLED_MAX and not right:
            return _substitute_unrolled(a, b, transpose, lower, unit)
        if a.shape[-1] <= 2 * _block_size(a.shape[-1]) or (right and transpose):
            return _substitute(a, b, transpose, lower, unit, right)
        return _substitute_blocked(a, b, transpose, lower, unit, right)

    def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor, Tensor]:
        # x = M^-1 b: bbar = M^-T xbar, Mbar = -bbar x^T (x = b M^-1: bbar = xbar M^-T, Mbar = -x^T bbar), and
        # abar is Mbar (transposed back when M = tri(a)^T) on the triangle that was read
        g, (a, _), (x,) = grads, call.inputs, call.outputs
        gb = _solver(not transpose, lower, unit, right)(a, g)
        if right:
            gm = -(_atb(gb, x) if transpose else _atb(x, gb))
        else:
            gm = -(_abt(x, gb) if transpose else _abt(gb, x))
        ga = tnp.tril(gm, -1 if unit else 0) if lower else tnp.triu(gm, 1 if unit else 0)
        return ga, gb

    name = f"solve_triangular_{'T' if transpose else 'N'}{'L' if lower else 'U'}{'_unit' if unit else ''}"
    solve.__qualname__ = solve.__name__ = name + ("_right" if right else "")
    _solvers[flags] = function(solve, grad_fxn=backward, cache=True)
    return _solvers[flags]


_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def solve_triangular(a: ArrayLike, b: ArrayLike, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False, debug: Any = None,
                     check_finite: bool = True) -> Tensor:
    """The x with a x = b for a triangular `a` (`jax.scipy.linalg.solve_triangular`), by substitution.

    Only the triangle `lower` names is read (upper by default, as in scipy), and with `unit_diagonal=True` not even
    its diagonal (taken as ones). `trans` 0 / "N" solves a x = b, 1 / "T" and 2 / "C" (the same for real a) solve
    a^T x = b. `a` is (..., n, n); `b` is (..., n), a vector per matrix, when it has one axis fewer than a, else
    (..., n, k); the batch axes broadcast. A zero on the diagonal gives infs and NaNs, as in JAX. `overwrite_b`,
    `debug` and `check_finite` are accepted for scipy compatibility and have no effect.

    >>> solve_triangular(tg.asarray([[2.0, 0.0], [1.0, 1.0]]), tg.asarray([2.0, 3.0]), lower=True)   # [1., 2.]

    Raises ValueError when `a` is not square or b's rows do not match a's size, and for an unknown `trans`.
    """
    if isinstance(trans, bool) or trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    at, bt, n, vector = _system("solve_triangular", a, b)
    x = bt if n == 0 else _solve(at, bt, _TRANS[trans], bool(lower), bool(unit_diagonal))
    return x[..., 0] if vector else x


def _system(fn: str, a: ArrayLike, b: ArrayLike) -> tuple[Tensor, Tensor, int, bool]:
    """(a, b as (..., n, k), n, whether b was a vector (..., n)) of a solve of a square a: b is a vector per matrix
    when it has one axis fewer than a."""
    at, bt = promote_args_inexact(fn, a, b)
    n = _check_square(fn, "a", at)
    vector = bt.ndim == at.ndim - 1
    if bt.ndim == 0 or (bt.shape[-1] if vector else bt.shape[-2] if bt.ndim >= 2 else -1) != n:
        raise ValueError(f"{fn}: b must have shape (..., {n}) or (..., {n}, k) to match a of shape {at.shape}, got "
                         f"shape {bt.shape}")
    return at, bt[..., None] if vector else bt, n, vector



# ---- LU with partial pivoting ----
_LU_PANEL = 32           # columns a step of the blocked factorisation
_LU_BLOCKED_FROM = 128   # its size from which it is faster than the unblocked loop (at 96: 0.58 ms, unblocked 0.43)


def _lu_loop(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(lu, piv, perm) with P a = L U, as LAPACK's getrf computes them: one column a step, the row with the largest
    |entry| on or below the diagonal (the first, on a tie) swapped up, then its multiples taken off the rows below.
    lu holds U and, below the diagonal, L's multipliers (L's unit diagonal implied); piv[k] is the row swapped with
    row k at step k; perm[i] is the row of a that row i of P a is. A zero pivot (a singular matrix) is left as it is
    with its zero column below, as LAPACK does: U then has a zero on its diagonal, and solving with it gives infs.
    From _LU_BLOCKED_FROM rows by panels (`_lu_panels`), the same pivots and the same arithmetic in another order."""
    n = a.shape[-1]
    if n >= _LU_BLOCKED_FROM:
        return _lu_panels(a)
    idx = _index(n)

    def step(k: Tensor, carry: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        lu, piv, perm = carry
        lu, perm, p = _eliminate(lu, perm, k, idx, k)
        return lu, tnp.where(idx == k, p[..., None], piv), perm

    start = tnp.broadcast_to(idx, a.shape[:-1])
    return fori_loop(0, n, step, (a, start, start))


def _eliminate(m: Tensor, order: Tensor, k: Tensor, cols: Tensor, j: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """One step of elimination with partial pivoting on the rows of m (..., n, w): the row p >= k with the largest
    |entry| in column j (cols: the column numbers, `_index(w)`) swaps with row k, as its entry in `order` (..., n)
    does, and the multiples of it that zero column j below row k come off the rows below (the multipliers stored in
    column j, the columns left of j untouched). (m, order, p)."""
    idx = _index(m.shape[-2])
    at_j = cols == j
    p = tnp.argmax(tnp.where(idx >= k, tnp.abs(_col(m, at_j)), -1.0), axis=-1).astype(idx.dtype)  # (int64 in x64)
    at_k, at_p = idx == k, idx == p[..., None]                                  # (..., n): the pivot row
    row_k, row_p = _row(m, at_k), tnp.sum(tnp.where(at_p[..., :, None], m, 0.0), axis=-2)
    m = tnp.where(at_k[:, None], row_p[..., None, :], tnp.where(at_p[..., :, None], row_k[..., None, :], m))
    o_k, o_p = (tnp.sum(tnp.where(x, order, 0), axis=-1, keepdims=True, dtype=order.dtype) for x in (at_k, at_p))
    order = tnp.where(at_k, o_p, tnp.where(at_p, o_k, order))
    pivot = tnp.sum(tnp.where(at_j, row_p, 0.0), axis=-1, keepdims=True)
    mult = tnp.where(idx > k, _col(m, at_j) / tnp.where(pivot == 0, 1.0, pivot), 0.0)    # (..., n)
    rest = tnp.where(cols > j, row_p, 0.0)                                               # U's row k, right of j
    below = (idx > k)[:, None]
    return tnp.where(below & at_j, mult[..., :, None], m - mult[..., :, None] * rest[..., None, :]), order, p


def _lu_panels(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """`_lu_loop` right-looking by panels of B columns, a loop step a panel s (columns c = s B ...): the panel is
    factored column by column (`_eliminate` on n x B, B inner steps), its row swaps are applied to the rest of the
    matrix at once (a gather of rows), U's rows c ... c + B right of it follow by substitution against the panel's
    unit lower block L11 (U12 = L11^-1 A12), and L21 U12 comes off the trailing matrix in one matmul. Written into
    all rows, with the multipliers of each row below c (L11's below the diagonal for the panel's own rows), that one
    product also leaves U12 in the panel's rows. Each step reads the whole n x n matrix a few times, where the
    unblocked loop's n steps each did (solve at n = 256: 2.5 ms, from 4.3; at 512: 11-13, from 29)."""
    n = a.shape[-1]
    bs = _LU_PANEL
    pad = -n % bs
    if pad:   # an identity tail, factored to itself with no swap, makes n a multiple of the panel
        lu, piv, perm = _lu_panels(_pad_identity(a, pad))
        return lu[..., :n, :n], piv[..., :n], perm[..., :n]
    nb, batch = n // bs, a.shape[:-2]
    idx, cols, bid = _index(n), _index(bs), _index(nb)
    start = tnp.broadcast_to(idx, batch + (n,))

    def step(carry: tuple[Tensor, Tensor], s: Tensor) -> tuple[tuple[Tensor, Tensor], Tensor]:
        w, perm = carry
        c = s * bs

        def column(j: Tensor, pc: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
            panel, src, piv = pc
            panel, src, p = _eliminate(panel, src, c + j, cols, j)
            return panel, src, tnp.where(cols == j, p[..., None], piv)

        panel, src, piv = fori_loop(0, bs, column, (_blocks(w, s, nb, -1), start,
                                                     tnp.zeros(batch + (bs,), dtypes.int32)))
        wp = tnp.take_along_axis(w, src[..., :, None], axis=-2)              # the panel's swaps, on every column
        u12 = _substitute(_blocks(panel, s, nb, -2), _blocks(wp, s, nb, -2), False, True, True, False)
        low = tnp.where(cols < (idx - c)[:, None], panel, 0.0)                # each row's multipliers
        rest = (wp - tnp.matmul(low, u12)).reshape(batch + (n, nb, bs))
        w = tnp.where((bid == s)[:, None], panel[..., :, None, :],
                      tnp.where((bid > s)[:, None], rest, wp.reshape(rest.shape)))
        return (w.reshape(a.shape), tnp.take_along_axis(perm, src, axis=-1)), piv

    (lu, perm), pivs = scan(step, (a, start), bid)
    return lu, tnp.moveaxis(pivs, 0, -2).reshape(batch + (n,)), perm


def _rows(b: Tensor, order: Tensor) -> Tensor:
    """b's rows in the order `order` (..., n): row i is b[order[i]], one gather (P b for P one-hot, without the
    n^2 k product)."""
    return tnp.take_along_axis(b, order[..., :, None], axis=-2)


def _inverse_permutation(perm: Tensor) -> Tensor:
    """inv with inv[perm[i]] = i: P^T's order."""
    n = perm.shape[-1]
    hit = perm[..., :, None] == _index(n)                                   # (..., i, j): perm[i] == j
    return tnp.sum(tnp.where(hit, _index(n)[:, None], 0), axis=-2, dtype=dtypes.int32)


def _lu_solve(lu: Tensor, perm: Tensor, b: Tensor, transpose: bool) -> Tensor:
    """x with a x = b (a^T x = b for `transpose`), given P a = L U; b (..., n, k) with the batch of lu.

    a x = b is L U x = P b; a^T = U^T L^T P, so a^T x = b is x = P^T L^-T U^-T b. Two triangular solves either way,
    each differentiable by its own backward; P's row order is a gather."""
    if not transpose:
        y = _solve(lu, _rows(b, perm), transpose=False, lower=True, unit=True)
        return _solve(lu, y, transpose=False, lower=False, unit=False)
    z = _solve(lu, b, transpose=True, lower=False, unit=False)
    return _rows(_solve(lu, z, transpose=True, lower=True, unit=True), _inverse_permutation(perm))


def _general_solve(a: Tensor, b: Tensor) -> Tensor:
    lu, _, perm = _lu_loop(a)
    return _lu_solve(lu, perm, b, transpose=False)


def _general_solve_backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor, Tensor]:
    """x = a^-1 b: bbar = a^-T xbar, abar = -bbar x^T. The factorisation is written again here, the same graph as
    the forward's, so it is computed once; being plain tgfx ops (not this function's outputs), it differentiates
    correctly under a second `grad`."""
    g, (a, _), (x,) = grads, call.inputs, call.outputs
    lu, _, perm = _lu_loop(a)
    gb = _lu_solve(lu, perm, g, transpose=True)
    return -_abt(gb, x), gb


_general_solve_fn = function(_general_solve, grad_fxn=_general_solve_backward, cache=True)


def general_solve(a: Tensor, b: Tensor) -> Tensor:
    """x with a x = b for square a (..., n, n) and b (..., n, k), batch axes broadcast; both of one float dtype.
    A `tg.function` whose backward is two more solves (with a^T), not a differentiated loop. For `tnp.linalg`."""
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], name="solve")
    a = tnp.broadcast_to(a, batch + a.shape[-2:])
    b = tnp.broadcast_to(b, batch + b.shape[-2:])
    return b if a.shape[-1] == 0 else _general_solve_fn(a, b)


def _slogdet(a: Tensor) -> tuple[Tensor, Tensor]:
    lu, piv, _ = _lu_loop(a)
    d = tnp.diagonal(lu, axis1=-2, axis2=-1)
    swaps = tnp.sum((piv != _index(a.shape[-1])).astype(dtypes.int32), axis=-1)
    parity = tnp.where((swaps & 1) == 1, -1.0, 1.0).astype(a.dtype)
    sign = tnp.where(tnp.any(d == 0, axis=-1), 0.0, parity * tnp.prod(tnp.sign(d), axis=-1))   # +0, not -0 (JAX's)
    return sign.astype(a.dtype), tnp.sum(tnp.log(tnp.abs(d)), axis=-1)


def _det(a: Tensor) -> Tensor:
    lu, piv, _ = _lu_loop(a)
    swaps = tnp.sum((piv != _index(a.shape[-1])).astype(dtypes.int32), axis=-1)
    parity = tnp.where((swaps & 1) == 1, -1.0, 1.0).astype(a.dtype)
    return parity * tnp.prod(tnp.diagonal(lu, axis1=-2, axis2=-1), axis=-1)


def _inverse_transpose(a: Tensor) -> Tensor:
    lu, _, perm = _lu_loop(a)
    eye = tnp.broadcast_to(tnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    return _lu_solve(lu, perm, eye, transpose=True)


def _adjugate(a: Tensor) -> Tensor:
    """adj(a), which is det(a) a^-1 where a is invertible, from a's LU factors without dividing by U's last pivot
    (JAX's `_cofactor_solve` with b = I): a singular a of rank n - 1 gets its cofactors (a rank-1 matrix), one of a
    lower rank zeros, where det(a) a^-1 is 0 * inf = NaN.

    With P a = L U: det(a) U^-1 L^-1 P. U's corner u_nn is replaced by 1 / (s u_11 ... u_(n-1)(n-1)), s the
    permutation's sign, and the rows of L^-1 P above the last scaled by det(a): the back substitution then gives
    det(a) U^-1 (...) without dividing by u_nn. A rank below n - 1 leaves U singular even so (a zero pivot above the
    corner, or a corner 1 / 0): its substitution is not finite, and the adjugate is zero."""
    n = a.shape[-1]
    if n == 1:
        return tnp.ones_like(a)
    lu, piv, perm = _lu_loop(a)
    idx = _index(n)
    swaps = tnp.sum((piv != idx).astype(dtypes.int32), axis=-1)
    sign = tnp.where((swaps & 1) == 1, -1.0, 1.0).astype(a.dtype)
    partial = tnp.cumprod(tnp.diagonal(lu, axis1=-2, axis2=-1), axis=-1) * sign[..., None]
    det, minor = partial[..., -1], partial[..., -2]
    last = idx == n - 1
    lu = tnp.where(last[:, None] & last, 1.0 / minor[..., None, None], lu)
    low_rank = ~tnp.all(tnp.isfinite(_solve(lu, tnp.ones(a.shape[:-1] + (1,), a.dtype), False, False, False)),
                        axis=(-2, -1))
    eye = tnp.broadcast_to(tnp.eye(n, dtype=a.dtype), a.shape)
    y = _solve(lu, _rows(eye, perm), transpose=False, lower=True, unit=True)
    y = tnp.where(last[:, None], y, y * det[..., None, None])
    x = _solve(lu, y, transpose=False, lower=False, unit=False)
    return tnp.where(low_rank[..., None, None], 0.0, x)


def _det_backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor]:
    """d det(a) = tr(adj(a) da): abar = g adj(a)^T, the cofactor matrix, as JAX's (it is det(a) a^-T where a is
    invertible, and finite where a is singular: the gradient of det at [[x, 1], [1, 1]] is 1 at x = 1)."""
    g, (a,) = grads, call.inputs
    return (g[..., None, None] * tnp.swapaxes(_adjugate(a), -1, -2),)


def _slogdet_backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor]:
    """The sign is piecewise constant; d log|det a| = tr(a^-1 da): abar = g a^-T."""
    (_, g), (a,) = grads, call.inputs
    return (g[..., None, None] * _inverse_transpose(a),)


_det_fn = function(_det, grad_fxn=_det_backward, cache=True)
_slogdet_fn = function(_slogdet, grad_fxn=_slogdet_backward, cache=True)


def lu_factor(a: ArrayLike, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Tensor, Tensor]:
    """(lu, piv): the LU factorisation of a square `a` with partial pivoting (`jax.scipy.linalg.lu_factor`).

    lu holds U on and above the diagonal and L's multipliers below it (L has ones on its diagonal); row i was
    swapped with row piv[i] (int32), in order, as LAPACK's getrf returns them. `a` may be batched (..., n, n). A
    tgfx loop of n steps; differentiable (through the loop: prefer `lu_solve`'s or `tnp.linalg.solve`'s own
    backward where you only need a solve).

    >>> lu, piv = lu_factor(a)
    >>> x = lu_solve((lu, piv), b)
    """
    (t,) = promote_args_inexact("lu_factor", a)
    _check_square("lu_factor", "a", t)
    if t.shape[-1] == 0:
        return t, tnp.zeros(t.shape[:-1], dtypes.int32)
    lu, piv, _ = _lu_loop(t)
    return lu, piv


def _perm_from_piv(piv: Tensor) -> Tensor:
    """The permutation the sequence of row swaps piv makes: perm starts as 0..n-1 and has entries k and piv[k]
    swapped at step k."""
    n = piv.shape[-1]
    idx = _index(n)

    def step(k: Tensor, perm: Tensor) -> Tensor:
        at = idx == k
        p = tnp.sum(tnp.where(at, piv, 0), axis=-1, keepdims=True)
        at_p = idx == p
        perm_k, perm_p = (tnp.sum(tnp.where(m, perm, 0), axis=-1, keepdims=True, dtype=perm.dtype) for m in (at, at_p))
        return tnp.where(at, perm_p, tnp.where(at_p, perm_k, perm))

    return fori_loop(0, n, step, tnp.broadcast_to(idx, piv.shape))


def lu_solve(lu_and_piv: tuple[ArrayLike, ArrayLike], b: ArrayLike, trans: int | str = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Tensor:
    """The x with a x = b (trans 0 / "N") or a^T x = b (1 / "T", 2 / "C"), given `lu_factor(a)`
    (`jax.scipy.linalg.lu_solve`). `b` is (..., n) when it has one axis fewer than lu, else (..., n, k).

    Raises ValueError when b's rows do not match a's size, and for an unknown `trans`.
    """
    if not (isinstance(lu_and_piv, tuple) and len(lu_and_piv) == 2):
        raise TypeError(f"lu_solve: the first argument must be the pair (lu, piv) that lu_factor returns, got "
                        f"{type(lu_and_piv).__name__}")
    if isinstance(trans, bool) or trans not in _TRANS:
        raise ValueError(f"lu_solve: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    lu, bt = promote_args_inexact("lu_solve", lu_and_piv[0], b)
    piv = to_tensor(lu_and_piv[1])
    n = _check_square("lu_solve", "lu", lu)
    vector = bt.ndim == lu.ndim - 1
    if bt.ndim == 0 or (bt.shape[-1] if vector else bt.shape[-2] if bt.ndim >= 2 else -1) != n:
        raise ValueError(f"lu_solve: b must have shape (..., {n}) or (..., {n}, k) to match lu of shape {lu.shape}, "
                         f"got shape {bt.shape}")
    if piv.shape != lu.shape[:-1]:
        raise ValueError(f"lu_solve: piv must have shape {lu.shape[:-1]} to match lu of shape {lu.shape}, got "
                         f"shape {piv.shape}")
    if vector:
        bt = bt[..., None]
    if n:
        batch = broadcast_shapes(lu.shape[:-2], bt.shape[:-2], name="lu_solve")
        lu = tnp.broadcast_to(lu, batch + lu.shape[-2:])
        perm = tnp.broadcast_to(_perm_from_piv(piv.astype(dtypes.int32)), batch + (n,))
        bt = _lu_solve(lu, perm, tnp.broadcast_to(bt, batch + bt.shape[-2:]), _TRANS[trans])
    return bt[..., 0] if vector else bt


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
