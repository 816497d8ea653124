"""QR, the symmetric eigendecomposition and the SVD as tgfx programs, for `tnp.linalg` (qr, eigh, eigvalsh, svd,
svdvals, pinv, matrix_rank). Real float32 / float64 only.

- QR: Householder reflections as LAPACK's geqrf makes them (beta = -sign(alpha) ||x||, no reflection where the
  column below the diagonal is zero), one `tg.lax.scan` step a column with the reflector as the step's stacked
  output, then Q = H_0 ... H_{k-1} E by a reverse scan: the same Q and R as numpy's, up to rounding. Unblocked: a
  step is a few O(mn) kernels (128 x 64: 64 steps, 15 ms a call with Q, within 1.3 eps ||A|| of LAPACK's R); a
  blocked (compact WY) step would trade them for panel products plus the panel's triangle T written out entry by
  entry as the Cholesky panel is, which pays only where launches, not the O(mn^2) arithmetic, dominate.
- eigh: from HOUSEHOLDER_MIN rows on, through a tridiagonal matrix (`_tridiagonal.py`: Householder, bisection, inverse
  iteration); below, cyclic Jacobi with the round-robin ("caterpillar") ordering: the n / 2 pairs of a round are
  disjoint, so a round rotates them all at once, elementwise (the pairs are always the indices (2k, 2k + 1); between
  rounds the indices move one place round a ring, a static permutation of the rows and columns, so a sweep of n - 1
  rounds meets every pair once and ends in the order it began). Sweeps run in a `tg.lax.while_loop` until the
  off-diagonal part is below eps ||A||_F (quadratic convergence: 5-10 sweeps). Rotation angles as in Golub & Van
  Loan's sym.schur2, with the pair's own entries updated by Rutishauser's formulas (a_pq := 0 exactly).
- SVD: one-sided Jacobi (Hestenes) on the columns of A (A^T when wide), the same rounds and rotations on the pair's
  Gram entries (||a_p||^2, ||a_q||^2, a_p . a_q) computed from the columns each round. Singular values are the
  final column norms, so small ones keep their relative accuracy (an eigh of A^T A would square the condition number
  and lose every singular value below sqrt(eps) ||A||). U is the Householder QR of the sorted rotated columns (which
  are U S): it is orthonormal whatever the rank, and `full_matrices` completes it for free.

Each is a `tg.function` whose backward is JAX's rule transposed (jax/_src/lax/linalg.py: qr_jvp_rule,
eigh_jvp_rule, svd_jvp_rule; pinv's custom_jvp), so a gradient costs a few matmuls and a triangular solve, never a
differentiated loop. Like JAX, the QR gradient needs m >= n and reduced Q, the SVD gradient reduced U and V, and
vectors' gradients are infinite at repeated eigen- or singular values.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.function import function
from tgfx.lax import fori_loop, scan, while_loop
from tgfx.scipy._tridiagonal import bidiagonal_svd, householder_eigh
from tgfx.scipy.linalg import _col, _index, _solve
from tgfx.tensor import Tensor

_MAX_SWEEPS = 30   # Jacobi converges in 5-10 sweeps; a bound for NaN or inf input, which never converges


def _mt(x: Tensor) -> Tensor:
    return tnp.swapaxes(x, -1, -2)


def _mm(x: Tensor, y: Tensor) -> Tensor:
    return tnp.matmul(x, y)


def _eps(x: Tensor) -> float:
    return float(np.finfo(np.float64 if x.dtype == dtypes.float64 else np.float32).eps)


def _unit_scale(a: Tensor) -> tuple[Tensor, Tensor]:
    """(a / c, c) with c the power of two nearest below max |a| of each matrix (1 for a zero or non-finite one): the
    sums of squares below then neither overflow nor underflow for any finite a (LAPACK's norms scale the same way)."""
    big = tnp.max(tnp.abs(a), axis=(-2, -1), keepdims=True)
    ok = (big > 0) & (big < np.inf)
    c = tnp.where(ok, tnp.exp2(tnp.floor(tnp.log2(tnp.where(ok, big, 1.0)))), 1.0)
    return a / c, c


# ---- QR ----
def _householder(a: Tensor, accumulate: bool = False) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """(r, us, scales): R (the (..., m, n) matrix with the reflections applied; zero below the diagonal), and the
    reflectors H_j = I - scale_j u_j u_j^T stacked (min(m, n), ..., m) and (min(m, n), ...), u_j zero above row j.
    One column a step: x = r[j:, j], beta = -sign(x_0) ||x||, u = x - beta e_0, as LAPACK's dlarfg.

    With `accumulate`, (r, Q^T, None): Q^T = H_{k-1} ... H_0 (..., m, m), each reflection applied to [a | I] in the
    step that makes it, and no reflectors: one loop of k steps of five kernels with no stacked outputs, where the
    reflectors' loop and then Q's reverse loop were two, with three copies a step."""
    m, n = a.shape[-2:]
    if accumulate:   # [a | I]: Q^T's columns take each reflection in the same kernels as R's
        a = tnp.concatenate([a, tnp.broadcast_to(tnp.eye(m, dtype=a.dtype), a.shape[:-2] + (m, m))], axis=-1)
    rows, cols = _index(m), _index(a.shape[-1])

    def step(r: Tensor, j: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        at = cols == j
        x = _col(r, at).contiguous()
        below = tnp.where(rows > j, x, 0.0)
        # alpha and sigma in one reduce kernel; u, scale and R_jj stored in one small kernel: the kernels reading
        # them would otherwise work them out again for every element (the column's sum too: a 40 x 72 update with
        # them fused in was 2.9 us a step, 0.2 stored)
        stats = tnp.sum(tnp.stack([tnp.where(rows == j, x, 0.0), below * below], axis=-2), axis=-1)
        alpha, sigma = stats[..., 0], stats[..., 1]
        norm = tnp.sqrt(alpha * alpha + sigma)
        beta = tnp.where(alpha >= 0, -norm, norm)
        reflect = sigma > 0          # nothing below the diagonal: H = I (LAPACK's tau = 0), R_jj = alpha
        u = tnp.where(reflect[..., None], tnp.where(rows == j, (alpha - beta)[..., None], below), 0.0)
        # 2 / u^T u, with u^T u = (alpha - beta)^2 + sigma = 2 ||x|| (||x|| + |alpha|)
        scale = tnp.where(reflect, 1.0 / tnp.where(reflect, norm * (norm + tnp.abs(alpha)), 1.0), 0.0)
        diag = tnp.where(reflect, beta, alpha)
        packed = tnp.concatenate([u, scale[..., None], diag[..., None]], axis=-1).contiguous()
        u, scale, diag = packed[..., :m], packed[..., m], packed[..., m + 1]
        w = scale[..., None] * tnp.sum(r * u[..., :, None], axis=-2)
        out = r - u[..., :, None] * w[..., None, :]
        # column j is (beta, 0, ...) exactly below row j - 1
        col_j = at[None, :] & (rows[:, None] >= j)
        out = tnp.where(col_j, tnp.where(rows[:, None] == j, diag[..., None, None], 0.0), out)
        return out, (u, scale)

    if accumulate:   # (fori_loop: the step index is the loop's counter, not a slice copied in a step)
        r = fori_loop(0, min(m, n), lambda j, r: step(r, j)[0], a)
        return r[..., :n], r[..., n:], None
    r, (us, scales) = scan(step, a, _index(min(m, n)))
    return r, us, scales


def _apply_reflectors(us: Tensor, scales: Tensor, e: Tensor) -> Tensor:
    """H_0 H_1 ... H_{k-1} e, the last reflector applied first."""
    def step(q: Tensor, xs: tuple[Tensor, Tensor]) -> tuple[Tensor, None]:
        u, s = xs
        w = s[..., None] * tnp.sum(q * u[..., :, None], axis=-2)
        return q - u[..., :, None] * w[..., None, :], None

    return scan(step, e, (us, scales), reverse=True)[0]


def qr_factor(a: Tensor, complete: bool) -> tuple[Tensor, Tensor]:
    """(Q, R) of a (..., m, n): Q (..., m, k) and R (..., k, n), k = min(m, n) (k = m when `complete`). Not
    differentiable by itself: `qr_fns` are."""
    m, n = a.shape[-2:]
    k = m if complete else min(m, n)
    unit, c = _unit_scale(a)
    if m <= min(2 * k, ACCUMULATE_MAX_ROWS):   # Q^T accumulated beside R (`_householder`)
        r, qt, _ = _householder(unit, accumulate=True)
        return _mt(qt[..., :k, :]), tnp.triu(r[..., :k, :]) * c
    r, us, scales = _householder(unit)
    e = tnp.broadcast_to(tnp.eye(m, k, dtype=a.dtype), a.shape[:-2] + (m, k))
    return _apply_reflectors(us, scales, e), tnp.triu(r[..., :k, :]) * c


# a QR of at most this many rows (and at most twice as many as Q's columns) accumulates Q^T beside R in one loop,
# where launches, not arithmetic, are its time (12 x 12: 40 -> 34 us a call); larger ones apply the stored reflectors
# to I afterwards: Q^T's m x m update is as much work as that, but a 40 x 40 one is a scalar kernel (1.7 us a step,
# 40 x 32: 64 -> 91 us) and from 64 rows on both ways ran the same
ACCUMULATE_MAX_ROWS = 16


def _copyltu(x: Tensor) -> Tensor:
    """The symmetric matrix with x's lower triangle."""
    return tnp.tril(x) + _mt(tnp.tril(x, -1))


def _qr_backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor]:
    """JAX's qr_jvp_rule transposed (m >= n, reduced Q): with M = R Rbar^T - Qbar^T Q,
    abar = (Qbar + Q copyltu(M)) R^-T. Raises where JAX's rule does: m < n, or a complete Q of a tall matrix."""
    (qbar, rbar), (a,), (q, r) = grads, call.inputs, call.outputs
    m, n = a.shape[-2:]
    if m < n or q.shape[-1] != n:
        raise NotImplementedError(f"qr: the gradient needs a matrix with at least as many rows as columns and "
                                  f"mode='reduced' (or 'r'), as in JAX; got shape {a.shape} with Q of shape "
                                  f"{q.shape}")
    mm = _mm(r, _mt(rbar)) - _mm(_mt(qbar), q)
    b = qbar + _mm(q, _copyltu(mm))
    return (_solve(r, b, transpose=True, lower=False, unit=False, right=True),)


def _qr_reduced(a: Tensor) -> tuple[Tensor, Tensor]:
    return qr_factor(a, False)


def _qr_complete(a: Tensor) -> tuple[Tensor, Tensor]:
    return qr_factor(a, True)


qr_fns = {False: function(_qr_reduced, grad_fxn=_qr_backward, cache=True),
          True: function(_qr_complete, grad_fxn=_qr_backward, cache=True)}


# ---- Jacobi rounds, shared by eigh and the SVD ----
# The pairs of a round are (2k, 2k + 1): an axis of even length N is viewed as (N / 2, 2), the pair's partner is a
# flip of the last of those, and a rotation is elementwise. Between rounds the indices move round the ring
# top[1:] + reversed(bottom) by one place (index 0 stays), so that after N - 1 rounds every pair has met once and
# the order is the one the sweep began with.
def _angle(app: Tensor, aqq: Tensor, apq: Tensor, skip: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(t, c, s) of the rotation J = [[c, s], [-s, c]] with (J^T [[app, apq], [apq, aqq]] J)_pq = 0 (Golub & Van
    Loan, sym.schur2): tau = (aqq - app) / 2 apq, t = sign(tau) / (|tau| + sqrt(1 + tau^2)); none where `skip`."""
    tau = (aqq - app) / (2.0 * tnp.where(skip, 1.0, apq))
    t = tnp.where(tau >= 0, 1.0, -1.0) / (tnp.abs(tau) + tnp.sqrt(1.0 + tau * tau))
    t = tnp.where(skip, 0.0, t)
    c = 1.0 / tnp.sqrt(1.0 + t * t)
    return t, c, t * c


def _stored_coefficients(t: Tensor, c: Tensor, s: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(t, c, s) stored as one small Tensor: every element of a rotation reads them, and would otherwise work out
    the square roots and divisions again (a 6 x 6 round was 80 us of recomputation, stored it is under 1 us)."""
    m = tnp.stack([t, c, s], axis=-1).contiguous()
    return m[..., 0], m[..., 1], m[..., 2]


def _signed(s: Tensor) -> Tensor:
    """(-s, s) on a new last axis: what the partner contributes to a pair's first and second entry."""
    return tnp.stack([-s, s], axis=-1)


def _rotate_rows(x: Tensor, c: Tensor, s: Tensor) -> Tensor:
    """J^T x for the round's rotations (c, s (..., N / 2)): row p := c x_p - s x_q, row q := s x_p + c x_q."""
    k = x.shape[-1]
    x4 = x.reshape(x.shape[:-2] + (x.shape[-2] // 2, 2, k))
    out = c[..., :, None, None] * x4 + _signed(s)[..., None] * tnp.flip(x4, axis=-2)
    return out.reshape(x.shape)


def _rotate_cols(x: Tensor, c: Tensor, s: Tensor) -> Tensor:
    """x J: column p := c x_p - s x_q, column q := s x_p + c x_q."""
    x4 = x.reshape(x.shape[:-1] + (x.shape[-1] // 2, 2))
    out = c[..., None, :, None] * x4 + _signed(s)[..., None, :, :] * tnp.flip(x4, axis=-1)
    return out.reshape(x.shape)


def _ring(top: Tensor, bot: Tensor, axis: int) -> tuple[Tensor, Tensor]:
    h = top.shape[axis]

    def part(x: Tensor, lo: int, hi: int) -> Tensor:
        return x[(Ellipsis, slice(lo, hi)) + (slice(None),) * (-1 - axis)]
    return (tnp.concatenate([part(top, 0, 1), part(bot, 0, 1), part(top, 1, h - 1)], axis=axis),
            tnp.concatenate([part(bot, 1, h), part(top, h - 1, h)], axis=axis))


def _next_rows(x: Tensor) -> Tensor:
    """The rows in the next round's order: tops (even rows) t0 b0 t1 ... t_{h-2}, bottoms b1 ... b_{h-1} t_{h-1}."""
    h = x.shape[-2] // 2
    if h == 1:
        return x
    x4 = x.reshape(x.shape[:-2] + (h, 2, x.shape[-1]))
    top, bot = _ring(x4[..., :, 0, :], x4[..., :, 1, :], -2)
    return tnp.stack([top, bot], axis=-2).reshape(x.shape)


def _next_cols(x: Tensor) -> Tensor:
    h = x.shape[-1] // 2
    if h == 1:
        return x
    x4 = x.reshape(x.shape[:-1] + (h, 2))
    top, bot = _ring(x4[..., 0], x4[..., 1], -1)
    return tnp.stack([top, bot], axis=-1).reshape(x.shape)


def _pad_even(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """x with a zero row / column added on each of `axes` when its length is odd: the padding index pairs with
    others only at a zero entry, so it is never rotated, and is cut off afterwards."""
    if x.shape[axes[0]] % 2 == 0:
        return x
    return x.pad_zeros([(0, 1 if i - x.ndim in axes else 0) for i in range(x.ndim)])


def _eye_like(x: Tensor, n: int) -> Tensor:
    return tnp.broadcast_to(tnp.eye(n, dtype=x.dtype), x.shape[:-2] + (n, n))


def _sweeps(step: Callable[[Any], Any], init: Any, rounds: int, converged: Callable[[Any], Tensor],
            begin: Callable[[Any], Any] = lambda c: c) -> Any:
    """Sweeps of `rounds` Jacobi rounds (`step`, a fori_loop on the device; `begin` first) while `converged` is
    false anywhere in the batch, at most _MAX_SWEEPS."""
    def sweep(state: tuple[Any, Tensor]) -> tuple[Any, Tensor]:
        carry, count = state
        return fori_loop(0, rounds, lambda _, c: step(c), begin(carry)), count + 1

    def more(state: tuple[Any, Tensor]) -> Tensor:
        carry, count = state
        return (count < _MAX_SWEEPS) & ~converged(carry)

    return while_loop(more, sweep, (init, tnp.zeros((), dtypes.int32)))[0]


# ---- eigh ----
def _jacobi_eigh(s: Tensor, vectors: bool) -> tuple[Tensor, Tensor | None]:
    """(w, v) for the symmetric s (..., n, n), w ascending; v None unless `vectors`."""
    n = s.shape[-1]
    s, scale = _unit_scale(s)
    a = _pad_even(s, (-2, -1))
    big_n = a.shape[-1]
    h = big_n // 2
    block = tnp.eye(h, dtype=dtypes.bool)[:, None, :, None]          # a pair's own 2 x 2 block
    tol2 = (_eps(s) * _eps(s)) * tnp.sum(s * s, axis=(-2, -1))
    off_mask = ~tnp.eye(big_n, dtype=dtypes.bool)

    def step(carry: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        a, v = carry
        d = tnp.diagonal(a.reshape(a.shape[:-2] + (h, 2, h, 2)), axis1=-4, axis2=-2)     # (..., 2, 2, h)
        app, aqq, apq = d[..., 0, 0, :], d[..., 1, 1, :], d[..., 0, 1, :]
        t, c, sn = _stored_coefficients(*_angle(app, aqq, apq, apq == 0))
        r = _rotate_cols(_rotate_rows(a, c, sn), c, sn)
        # the pair's own entries by Rutishauser's formulas: a_pp - t a_pq, a_qq + t a_pq, and a_pq = 0 exactly
        pair = tnp.stack([tnp.stack([app - t * apq, tnp.zeros_like(t)], axis=-1),
                          tnp.stack([tnp.zeros_like(t), aqq + t * apq], axis=-1)], axis=-2)   # (..., h, 2, 2)
        # stored before the permutation, and between its row and column halves: each element of a permuted view
        # works out what it reads once per piece of the view (n = 32, 372 rounds: 2.5 ms of device time; the
        # rotation fused into the permutation 775 ms, the two halves of the permutation fused 20 ms)
        r4 = tnp.where(block, pair[..., :, :, None, :], r.reshape(r.shape[:-2] + (h, 2, h, 2))).contiguous()
        a = _next_cols(_next_rows(r4.reshape(a.shape)).contiguous())
        return (a, _next_cols(_rotate_cols(v, c, sn).contiguous()) if vectors else v)

    def converged(carry: tuple[Tensor, Tensor]) -> Tensor:
        a = carry[0]
        return tnp.all(tnp.sum(tnp.where(off_mask, a * a, 0.0), axis=(-2, -1)) <= tol2)

    v0 = _eye_like(a, big_n) if vectors else tnp.zeros((), a.dtype)
    a, v = _sweeps(step, (a, v0), big_n - 1, converged)
    w = tnp.diagonal(a, axis1=-2, axis2=-1)[..., :n] * scale[..., 0]
    order = tnp.argsort(w, axis=-1)
    w = tnp.take_along_axis(w, order, axis=-1)
    if not vectors:
        return w, None
    v = v[..., :n, :n]
    return w, tnp.take_along_axis(v, tnp.broadcast_to(order[..., None, :], v.shape), axis=-1)


def _eigh_backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor]:
    """JAX's eigh_jvp_rule transposed: sbar = V (diag(wbar) + F o (V^T Vbar)) V^T, F_ij = 1 / (w_j - w_i) off the
    diagonal, 0 on it."""
    (wbar, vbar), (w, v) = grads, call.outputs
    n = w.shape[-1]
    eye = tnp.eye(n, dtype=w.dtype)
    f = 1.0 / (eye + w[..., None, :] - w[..., :, None]) - eye
    inner = eye * wbar[..., None, :] + f * _mm(_mt(v), vbar)
    return (_mm(_mm(v, inner), _mt(v)),)


def _eigvalsh_backward(wbar: Tensor, call: Any) -> tuple[Tensor]:
    # the vectors from the differentiable eigh, so that a second derivative goes through its backward, not the loop
    (s,) = call.inputs
    _, v = eigh_fn(s)
    return (_mm(v * wbar[..., None, :], _mt(v)),)


# from this many rows on, eigh goes through a tridiagonal matrix (`_tridiagonal.py`): O(n^3) in n steps, where the
# Jacobi sweeps are 5-10 of n rounds each (n = 128: 110 ms, jax 0.75)
HOUSEHOLDER_MIN = 12


def _eigh(s: Tensor) -> tuple[Tensor, Tensor]:
    if s.shape[-1] >= HOUSEHOLDER_MIN:
        return householder_eigh(s, True)
    return _jacobi_eigh(s, True)


def _eigvalsh(s: Tensor) -> Tensor:
    if s.shape[-1] >= HOUSEHOLDER_MIN:
        return householder_eigh(s, False)[0]
    return _jacobi_eigh(s, False)[0]


eigh_fn = function(_eigh, grad_fxn=_eigh_backward, cache=True)
eigvalsh_fn = function(_eigvalsh, grad_fxn=_eigvalsh_backward, cache=True)


# ---- SVD ----
def _jacobi_columns(a: Tensor, vectors: bool) -> tuple[Tensor, Tensor | None]:
    """(a V, V^T) with a V's columns orthogonal (one-sided Jacobi); a (..., m, n), m >= n; V^T None unless
    `vectors`."""
    n = a.shape[-1]
    x = _pad_even(a, (-1,))
    big_n = x.shape[-1]
    eps = _eps(a)

    def step(carry: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        x, v, worst = carry
        x4 = x.reshape(x.shape[:-1] + (big_n // 2, 2))
        xp, xq = x4[..., 0], x4[..., 1]
        gram = tnp.sum(tnp.stack([xp * xp, xq * xq, xp * xq], axis=-1), axis=-3)     # one reduce kernel, not three
        app, aqq, apq = gram[..., 0], gram[..., 1], gram[..., 2]
        ratio = tnp.abs(apq) / tnp.sqrt(tnp.where(apq == 0, 1.0, app * aqq))
        _, c, sn = _stored_coefficients(*_angle(app, aqq, apq, ratio <= eps))
        worst = tnp.maximum(worst, tnp.max(ratio, axis=-1))
        # V^T is kept (J^T V^T: its rows rotate), so that no kernel writes a transposed copy (a second to compile)
        # rotated, stored, then permuted: a permuted view of the rotation was up to 25x slower (40 x 32: 1.1 ms of
        # device time for the 248 rounds, fused 0.8-34 ms)
        return (_next_cols(_rotate_cols(x, c, sn).contiguous()),
                _next_rows(_rotate_rows(v, c, sn).contiguous()) if vectors else v, worst)

    def converged(carry: tuple[Tensor, Tensor, Tensor]) -> Tensor:
        return tnp.all(carry[2] <= eps)

    def begin(carry: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        return carry[0], carry[1], tnp.zeros_like(carry[2])

    # `worst` is the largest |a_p . a_q| / (|a_p| |a_q|) met in the sweep: none above eps, none rotated, done
    v0 = _eye_like(x, big_n) if vectors else tnp.zeros((), a.dtype)
    x, v, _ = _sweeps(step, (x, v0, tnp.full(a.shape[:-2], np.inf, a.dtype)), big_n - 1, converged, begin)
    return x[..., :n], (v[..., :n, :n] if vectors else None)


def svd_factor(a: Tensor, full_matrices: bool, vectors: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """(s, U, Vt) of a (..., m, n), s descending; U and Vt None unless `vectors`."""
    m, n = a.shape[-2:]
    if m < n:
        s, u, vt = svd_factor(_mt(a), full_matrices, vectors)
        return (s, None, None) if not vectors else (s, _mt(vt), _mt(u))
    unit, scale = _unit_scale(a)
    if n >= HOUSEHOLDER_MIN:   # V through a bidiagonal matrix, then x = a V = U S
        s, v = bidiagonal_svd(unit, vectors)
        if not vectors:
            return s * scale[..., 0], None, None
        x, vt = _mm(unit, v), _mt(v)
    else:
        x, vt = _jacobi_columns(unit, vectors)      # U S / scale: U from it as it is, S scaled back
    s = tnp.sqrt(tnp.sum(x * x, axis=-2)) * scale[..., 0]
    order = tnp.argsort(-s, axis=-1)
    s = tnp.take_along_axis(s, order, axis=-1)
    if not vectors:
        return s, None, None
    x = tnp.take_along_axis(x, tnp.broadcast_to(order[..., None, :], x.shape), axis=-1)
    vt = tnp.take_along_axis(vt, tnp.broadcast_to(order[..., :, None], vt.shape), axis=-2)
    # x = U S: U is x's Q, signed so that R's diagonal (+-s) is positive; orthonormal at any rank
    q, r = qr_factor(x, full_matrices)
    sign = tnp.where(tnp.diagonal(r, axis1=-2, axis2=-1) < 0, -1.0, 1.0).astype(a.dtype)
    if q.shape[-1] > n:
        sign = tnp.concatenate([sign, tnp.ones(sign.shape[:-1] + (q.shape[-1] - n,), a.dtype)], axis=-1)
    # a NaN in `a` is NaN in every s; QR of x's NaN columns kept Q's identity, a U that looked right: NaN, as JAX's
    sign = tnp.where(tnp.isnan(s).any(axis=-1, keepdims=True), np.nan, sign).astype(a.dtype)
    return s, q * sign[..., None, :], vt


def _svd_backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor]:
    """JAX's svd_jvp_rule transposed (reduced U and V): with F_ij = 1 / (s_j^2 - s_i^2) off the diagonal,
    Gu = F o (U^T Ubar), Gv = F o (V^T Vbar),
    abar = U (diag(sbar) + (Gu + Gu^T) S + S (Gv + Gv^T)) V^T
           + (I - U U^T) Ubar S^-1 V^T (m > n) + U S^-1 Vbar^T (I - V V^T) (m < n)."""
    (sbar, ubar, vtbar), (a,), (s, u, vt) = grads, call.inputs, call.outputs
    m, n = a.shape[-2:]
    k = s.shape[-1]
    if u.shape[-1] != k or vt.shape[-2] != k:
        raise NotImplementedError(f"svd: the gradient of U and Vh needs full_matrices=False, as in JAX; a has shape "
                                  f"{a.shape}")
    v, vbar = _mt(vt), _mt(vtbar)
    eye = tnp.eye(k, dtype=s.dtype)
    sq = s * s
    f = 1.0 / (eye + sq[..., None, :] - sq[..., :, None]) - eye
    gu, gv = f * _mm(_mt(u), ubar), f * _mm(_mt(v), vbar)
    inner = (eye * sbar[..., None, :] + (gu + _mt(gu)) * s[..., None, :] + s[..., :, None] * (gv + _mt(gv)))
    out = _mm(_mm(u, inner), vt)
    if m > n:
        ub = ubar / s[..., None, :]
        out = out + _mm(ub - _mm(u, _mm(_mt(u), ub)), vt)
    if m < n:
        vb = vbar / s[..., None, :]
        out = out + _mm(u, _mt(vb - _mm(v, _mm(vt, vb))))
    return (out,)


def _svdvals_backward(sbar: Tensor, call: Any) -> tuple[Tensor]:
    (a,) = call.inputs
    _, u, vt = svd_fns[False](a)      # differentiable: a second derivative goes through svd's backward
    return (_mm(u * sbar[..., None, :], vt),)


def _svd_reduced(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return svd_factor(a, False, True)


def _svd_full(a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return svd_factor(a, True, True)


def _svdvals(a: Tensor) -> Tensor:
    return svd_factor(a, False, False)[0]


svd_fns = {False: function(_svd_reduced, grad_fxn=_svd_backward, cache=True),
           True: function(_svd_full, grad_fxn=_svd_backward, cache=True)}
svdvals_fn = function(_svdvals, grad_fxn=_svdvals_backward, cache=True)


# ---- pseudo-inverse ----
def _pinv(a: Tensor, rtol: Tensor) -> Tensor:
    """V diag(1/s) U^T over the singular values above rtol * max(s), rtol broadcast over the batch."""
    s, u, vt = svd_factor(a, False, True)
    keep = s > rtol[..., None] * s[..., :1]
    inv = tnp.where(keep, 1.0 / tnp.where(keep, s, 1.0), 0.0)
    return _mm(_mt(vt * inv[..., :, None]), _mt(u))


def _pinv_hermitian(a: Tensor, rtol: Tensor) -> Tensor:
    """V diag(1/w) V^T over the eigenvalues with |w| above rtol * max |w|."""
    w, v = _jacobi_eigh(a, True)
    keep = tnp.abs(w) > rtol[..., None] * tnp.max(tnp.abs(w), axis=-1, keepdims=True)
    inv = tnp.where(keep, 1.0 / tnp.where(keep, w, 1.0), 0.0)
    return _mm(v * inv[..., None, :], _mt(v))


def _pinv_backward(g: Tensor, call: Any) -> tuple[Tensor, None]:
    """JAX's pinv custom_jvp (Golub & Pereyra 1973) transposed: for P = pinv(A),
    abar = -P^T Pbar P^T + (I - A P) Pbar^T P P^T + P^T P Pbar^T (I - P A)."""
    (a, _), (p,) = call.inputs, call.outputs
    pt, gt = _mt(p), _mt(g)
    x = _mm(gt, _mm(p, pt))
    y = _mm(_mm(pt, p), gt)
    return -_mm(_mm(pt, g), pt) + x - _mm(a, _mm(p, x)) + y - _mm(_mm(y, p), a), None


pinv_fns = {False: function(_pinv, grad_fxn=_pinv_backward, cache=True),
            True: function(_pinv_hermitian, grad_fxn=_pinv_backward, cache=True)}
