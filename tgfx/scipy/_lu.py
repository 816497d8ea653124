"""The LU factorisation with partial pivoting as `jax.scipy.linalg` has it (`lu_factor`, `lu_solve`), and the
general solve, determinant and log-determinant `tnp.linalg` is written on (`general_solve`, `_det_fn`,
`_slogdet_fn`, each with its own backward). `tgfx.scipy.linalg` re-exports these names.

The factorisation is one loop of n unblocked steps, or from 128 rows a loop over panels of 32 columns
(`_lu_panels`); the solves are triangular solves (`_triangular.py`).
"""
from __future__ import annotations

from typing import Any

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.function import function
from tgfx.lax import fori_loop, scan
from tgfx.scipy._triangular import (
    _TRANS,
    _abt,
    _blocks,
    _check_square,
    _col,
    _index,
    _pad_identity,
    _row,
    _solve,
    _substitute,
)
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, to_tensor

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
