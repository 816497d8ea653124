"""The symmetric eigenproblem through a tridiagonal matrix, as LAPACK's syevx solves it, for `tnp.linalg.eigh` of
matrices past a dozen rows and for `eigh_tridiagonal`'s vectors. Real float32 / float64, leading batch axes.

- Householder tridiagonalisation (LAPACK's sytd2, lower): one `tg.lax.scan` step a column, A := H A H as a
  matrix-vector product and a symmetric rank-2 update of the whole matrix (the reflector is zero on the rows done),
  the reflectors the scan's stacked outputs. O(n^3) work in n steps of O(n^2), where cyclic Jacobi did 5-10 sweeps of
  n rounds of O(n^2) (n = 512: seconds).
- The eigenvalues of T: bisection of all of them at once on Sturm counts (dstebz; one scan over T's rows a halving,
  vectorised over the eigenvalues), to an absolute width of eps ||T||.
- The eigenvectors of T: inverse iteration (dstein) from fixed pseudo-random vectors, all eigenvalues at once: two
  solves of (T - w_j I) y = x by Gaussian elimination with partial pivoting (a zero pivot replaced by eps ||T||;
  off-diagonal entries below LAPACK's splitting bound zero), the vectors orthonormalised by a Householder QR after
  each, and up to two more while a residual is above n eps ||T|| (large clusters of a nearly split T). An isolated
  eigenvalue's vector is its eigenvector after the first solve; a cluster's (a repeated eigenvalue) start in
  different directions and end as an orthonormal basis of its invariant subspace.
- A's eigenvectors: the reflectors applied to T's (`_apply_reflectors`, a reverse scan).
- The SVD (`bidiagonal_svd`): Householder bidiagonalisation (gebd2), then the singular values as the non-negative
  eigenvalues of the bidiagonal's Golub-Kahan tridiagonal matrix and the right vectors from its eigenvectors, by the
  same bisection and inverse iteration (LAPACK's bdsvdx).
"""
from __future__ import annotations

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.lax import fori_loop, scan, while_loop
from tgfx.scipy.linalg import _col, _index
from tgfx.tensor import Tensor


def _info(x: Tensor) -> np.finfo:
    return np.finfo(np.float64 if x.dtype == dtypes.float64 else np.float32)


def _reflector(x: Tensor, at: Tensor, past: Tensor, on: Tensor | bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """(v, tau, beta) of the Householder reflector I - tau v v^T taking x's entry at the one-hot `at` and those
    `past` it (the mask) to (beta, 0, ...), as LAPACK's dlarfg: beta = -sign(alpha) ||x||, v 1 at `at`; none (tau 0,
    beta = alpha) where nothing past is nonzero or `on` is false."""
    alpha = tnp.sum(tnp.where(at, x, 0.0), axis=-1)
    below = tnp.where(past, x, 0.0)
    sigma = tnp.sum(below * below, axis=-1)
    norm = tnp.sqrt(alpha * alpha + sigma)
    beta = tnp.where(alpha >= 0, -norm, norm)
    reflect = sigma > 0
    if on is not True:   # (a Python True joined in would be a captured constant: the function's extra input)
        reflect = reflect & on
    tau = tnp.where(reflect, (beta - alpha) / tnp.where(reflect, beta, 1.0), 0.0)
    v = tnp.where(at, 1.0, below * (1.0 / tnp.where(reflect, alpha - beta, 1.0))[..., None])
    return v, tau, tnp.where(reflect, beta, alpha)


def tridiagonalize(a: Tensor, accumulate: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """(d, e, vs, taus) with a = Q T Q^T, T symmetric tridiagonal with diagonal d (..., n) and off-diagonal e
    (..., n - 1), Q = H_0 ... H_{n-3}, H_k = I - tau_k v_k v_k^T, v_k (n - 2, ..., n) zero on rows <= k and 1 on
    row k + 1. `a` (..., n, n), n >= 3, symmetric (both triangles read).

    With `accumulate`, (d, e, Q^T, None): each reflection applied to Q^T (from I) in the step that makes it, so no
    reflector is stacked (two copies a step) and none applied in a reverse loop afterwards (for small n, where the
    launches are the time: `householder_eigh`)."""
    n = a.shape[-1]
    idx = _index(n)

    def step(a: Tensor, k: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor]]:
        v, tau, e = _reflector(_col(a, idx == k), idx == k + 1, idx > k + 1)   # column k below the diagonal
        # A := H A H = A - v w^T - w v^T, p = tau A v, w = p - (tau / 2 p.v) v
        p = tau[..., None] * tnp.matmul(a, v[..., :, None])[..., 0]
        w = p - (0.5 * tau * tnp.sum(p * v, axis=-1))[..., None] * v
        a = a - v[..., :, None] * w[..., None, :] - w[..., :, None] * v[..., None, :]
        return a, (v, tau, e)

    if accumulate:
        def both(carry: tuple[Tensor, Tensor], k: Tensor) -> tuple[tuple[Tensor, Tensor], Tensor]:
            a, (v, tau, e) = step(carry[0], k)
            qt = carry[1]
            vqt = tau[..., None] * tnp.sum(qt * v[..., :, None], axis=-2)
            return (a, qt - v[..., :, None] * vqt[..., None, :]), e
        qt0 = tnp.broadcast_to(tnp.eye(n, dtype=a.dtype), a.shape)
        (a, qt), es = scan(both, (a, qt0), _index(n - 2))
    else:
        a, (vs, taus, es) = scan(step, a, _index(n - 2))
    d = tnp.diagonal(a, axis1=-2, axis2=-1)
    last = tnp.sum(tnp.where((idx == n - 1)[:, None] & (idx == n - 2)[None, :], a, 0.0), axis=(-2, -1))
    e = tnp.concatenate([tnp.moveaxis(es, 0, -1), last[..., None]], axis=-1)
    return (d, e, qt, None) if accumulate else (d, e, vs, taus)


def sturm_counts(d: Tensor, e2: Tensor, pivmin: Tensor, perturb0: Tensor, x: Tensor) -> Tensor:
    """For each shift x (..., k), the number of eigenvalues of the tridiagonal matrix (diagonal d (..., n), squared
    off-diagonal e2 (..., n - 1)) below it: the negative pivots of the LDL^T factorisation of T - x I, one row a scan
    step (a pivot within pivmin of zero pushed to -pivmin, as LAPACK's dstebz; a first pivot of exactly zero is
    perturb0, as JAX's)."""
    q = d[..., :1] - x
    count = (q < 0).astype(dtypes.int32)
    q = tnp.where(q == 0, perturb0, q)

    def step(carry: tuple[Tensor, Tensor], row: tuple[Tensor, Tensor]) -> tuple[tuple[Tensor, Tensor], None]:
        q, count = carry
        d_i, b2 = row
        q = d_i[..., None] - b2[..., None] / q - x
        low = q <= pivmin
        return (tnp.where(low, tnp.minimum(q, -pivmin), q), count + low.astype(dtypes.int32)), None

    (_, count), _ = scan(step, (q, count), (tnp.moveaxis(d[..., 1:], -1, 0), tnp.moveaxis(e2, -1, 0)))
    return count


def bisect(d: Tensor, e: Tensor, first: int, count: int, tol: Tensor | float | None = None) -> Tensor:
    """The eigenvalues of indices first, ..., first + count - 1 (ascending) of the symmetric tridiagonal matrix
    (d (..., n), e (..., n - 1)): all halved at once from the Gershgorin interval to an absolute width of
    max(tol, eps ||T||), at most mantissa-bits + 1 halvings (LAPACK's dstebz). (Every constant is made from iota: a
    `tg.function` calling this captures no buffers.)"""
    info = _info(d)
    eps = float(info.eps)
    n = d.shape[-1]
    e_abs = tnp.abs(e)
    zero = tnp.zeros(d.shape[:-1] + (1,), d.dtype)
    radius = tnp.concatenate([e_abs, zero], axis=-1) + tnp.concatenate([zero, e_abs], axis=-1)
    top = tnp.max(d + radius, axis=-1, keepdims=True)
    bottom = tnp.min(d - radius, axis=-1, keepdims=True)
    t_norm = tnp.maximum(tnp.abs(bottom), tnp.abs(top))
    safemin = max(1.0 / float(info.max), (1.0 + eps) * float(info.tiny))
    e2 = e * e
    pivmin = safemin * tnp.maximum(1.0, tnp.max(e2, axis=-1, keepdims=True)) if n > 1 else \
        tnp.full(zero.shape, safemin, d.dtype)
    perturb0 = (eps * e_abs[..., :1]) ** 2 if n > 1 else zero
    abs_tol = eps * t_norm if tol is None else tnp.maximum(tol, eps * t_norm)
    slack = n * 2.1 * eps * t_norm + 2 * 2.1 * pivmin
    lower = tnp.broadcast_to(bottom - slack, d.shape[:-1] + (count,))
    upper = tnp.broadcast_to(top + slack, d.shape[:-1] + (count,))
    want = tnp.arange(count, dtype=dtypes.int32) + first

    def halve(_: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        low, up = state
        mid = 0.5 * (low + up)
        below = sturm_counts(d, e2, pivmin, perturb0, mid) <= want
        return tnp.where(below, mid, low), tnp.where(below, up, mid)

    # every interval of a matrix starts as wide as the others, so the halvings that take them all to abs_tol are
    # known before the first: a loop of that many (its trip count read on the device), not a while loop testing every
    # interval after each halving (its test two more kernels a halving: a 12 x 12 eigh's 24 halvings ran 463 -> 414
    # packets)
    width = (upper - lower)[..., 0]
    tol_all = abs_tol[..., 0]
    ratio = width / tnp.where(tol_all > 0, tol_all, 1.0)
    halvings = tnp.where((tol_all > 0) & (ratio < 2.0 ** (info.nmant + 1)),
                         tnp.ceil(tnp.log2(tnp.maximum(ratio, 1.0))), info.nmant + 1)
    # (a zero from iota, not the Python 0: a loop bound that is a Tensor makes the other one a buffer)
    low, up = fori_loop(tnp.zeros((), dtypes.int32), tnp.max(halvings).astype(dtypes.int32), halve, (lower, upper))
    return tnp.where(t_norm > 0, 0.5 * (low + up), 0.0)   # (the zero matrix's: exactly 0, not the slack's halving)


def _solve_shifted(d: Tensor, e: Tensor, w: Tensor, b: Tensor, tiny: Tensor) -> Tensor:
    """y with (T - w_j I) y_j = b_j for every j: T (d (..., n), e (..., n - 1)), w (..., k), b (..., n, k).
    Gaussian elimination with partial pivoting (LAPACK's dlagtf / dlagts): one scan over the rows eliminating the
    subdiagonal, a row of U (three entries, a swap making two above the diagonal) and of the right-hand side its
    stacked outputs, then back substitution by a reverse scan; a pivot below `tiny` is `tiny` (inverse iteration
    wants the near-singular system's growth, not an infinity)."""
    n = d.shape[-1]
    rows_d = tnp.moveaxis(d[..., None] - w[..., None, :], -2, 0)                 # (n, ..., k)
    rows_b = tnp.moveaxis(b, -2, 0)
    sub = tnp.moveaxis(tnp.broadcast_to(e[..., None], e.shape + (w.shape[-1],)), -2, 0)   # (n - 1, ..., k)
    sup = tnp.concatenate([sub[1:], tnp.zeros_like(sub[:1])], axis=0)           # e_{i+1}, 0 past the end

    def pivot(p: Tensor) -> Tensor:
        return tnp.where(tnp.abs(p) < tiny, tnp.where(p < 0, -tiny, tiny), p)

    def eliminate(carry: tuple[Tensor, Tensor, Tensor], row: tuple[Tensor, ...]) -> tuple[tuple, tuple]:
        p, q, r = carry                  # the active row i: p at column i, q at i + 1, right-hand side r
        e_i, c_next, e_next, b_next = row   # row i + 1: e_i at column i, c_next at i + 1, e_next at i + 2
        swap = tnp.abs(e_i) > tnp.abs(p)
        u0 = pivot(tnp.where(swap, e_i, p))
        u1, u2 = tnp.where(swap, c_next, q), tnp.where(swap, e_next, 0.0)
        y = tnp.where(swap, b_next, r)
        m = tnp.where(swap, p, e_i) / u0
        other_q, other_s, other_r = tnp.where(swap, q, c_next), tnp.where(swap, 0.0, e_next), \
            tnp.where(swap, r, b_next)
        return (other_q - m * u1, other_s - m * u2, other_r - m * y), (u0, u1, u2, y)

    (p, _, r), (u0, u1, u2, y) = scan(eliminate, (rows_d[0], tnp.broadcast_to(sub[0], rows_d[0].shape), rows_b[0]),
                                      (sub, rows_d[1:], sup, rows_b[1:]))
    x_last = r / pivot(p)

    def back(carry: tuple[Tensor, Tensor], row: tuple[Tensor, ...]) -> tuple[tuple[Tensor, Tensor], Tensor]:
        x1, x2 = carry                   # x_{i+1}, x_{i+2}
        u0, u1, u2, y = row
        x = (y - u1 * x1 - u2 * x2) / u0
        return (x, x1), x

    _, xs = scan(back, (x_last, tnp.zeros_like(x_last)), (u0, u1, u2, y), reverse=True)
    return tnp.moveaxis(tnp.concatenate([xs, x_last[None]], axis=0), 0, -2) if n > 1 else x_last[..., None, :]


def _normalized(x: Tensor) -> Tensor:
    big = tnp.max(tnp.abs(x), axis=-2, keepdims=True)
    x = x / tnp.where(big > 0, big, 1.0)
    return x / tnp.sqrt(tnp.sum(x * x, axis=-2, keepdims=True))


def _start(n: int, k: int, dtype: object) -> Tensor:
    """Inverse iteration's start vectors (n, k), pseudo-random in [-1, 1) and different for every column (a
    cluster's vectors must start apart): an integer hash of (i, j) (a Weyl step, then murmur3's finaliser), from
    iota (no buffer). Multiplies, shifts and xors of uint32 lanes: the fractional part of a large multiple of sin it
    replaces called the C library's sin an element (its large arguments: 2.6 us at n = 12, 264 us at n = 128)."""
    i = tnp.arange(n, dtype=dtypes.uint32)[:, None]
    j = tnp.arange(k, dtype=dtypes.uint32)[None, :]
    h = i * 0x9E3779B1 + j * 0x85EBCA77 + 0x27D4EB2F   # (Python ints: constants, where numpy's were buffers)
    for shift, mul in ((15, 0x2C1B3C6D), (12, 0x297A2D39)):
        h = (h ^ (h >> shift)) * mul
    h = h ^ (h >> 15)
    return (h >> 8).astype(dtype) * (2.0 / (1 << 24)) - 1.0


def tridiagonal_vectors(d: Tensor, e: Tensor, w: Tensor) -> Tensor:
    """The eigenvectors (..., n, k) of the tridiagonal matrix (d, e) for its eigenvalues w (..., k), ascending:
    inverse iteration, two solves from fixed pseudo-random vectors, each followed by a QR of the k vectors (see the
    module)."""
    from tgfx.scipy._decomp import qr_factor
    n, k = d.shape[-1], w.shape[-1]
    info = _info(d)
    t_norm = tnp.max(tnp.abs(d), axis=-1) + (2 * tnp.max(tnp.abs(e), axis=-1) if n > 1 else 0.0)
    tiny = (float(info.eps) * tnp.where(t_norm > 0, t_norm, 1.0))[..., None]
    x = tnp.broadcast_to(_start(n, k, d.dtype), d.shape[:-1] + (n, k))
    if n > 1:   # off-diagonal entries below eps (|d_i| + |d_i+1|) split T (LAPACK's criterion): zero, exactly
        e = tnp.where(tnp.abs(e) <= float(info.eps) * (tnp.abs(d[..., :-1]) + tnp.abs(d[..., 1:])), 0.0, e)
    def iterate(x: Tensor) -> Tensor:
        # orthonormalised after each solve (dstein's reorthogonalisation, all clusters at once): a cluster's vectors
        # all grow towards its nearest eigenvectors, and a QR only at the end left its basis mixed with rounding noise
        # from outside the subspace (a 6-fold singular value: residual 1e-4, now 5e-7)
        return qr_factor(_normalized(_solve_shifted(d, e, w, x, tiny)), complete=False)[0]

    def residual(x: Tensor) -> Tensor:   # max |T x_j - w_j x_j| over the batch, a tridiagonal product
        r = d[..., :, None] * x - w[..., None, :] * x
        if n > 1:
            r = r + tnp.concatenate([e[..., :, None] * x[..., 1:, :], tnp.zeros_like(x[..., :1, :])], axis=-2) + \
                tnp.concatenate([tnp.zeros_like(x[..., :1, :]), e[..., :, None] * x[..., :-1, :]], axis=-2)
        return tnp.max(tnp.abs(r) / tnp.where(t_norm > 0, t_norm, 1.0)[..., None, None])

    # two iterations, then up to MORE_ITERATIONS more while some vector's residual is above RESIDUAL_ULPS n eps ||T||
    # (large clusters of a nearly split T: a 16-fold eigenvalue of a 62 x 62 matrix needed a third)
    x = iterate(iterate(x))
    bound = RESIDUAL_ULPS * n * float(info.eps)

    def more(state: tuple[Tensor, Tensor]) -> Tensor:
        x, i = state
        return (i < MORE_ITERATIONS) & (residual(x) > bound)

    return while_loop(more, lambda st: (iterate(st[0]), st[1] + 1), (x, tnp.zeros((), dtypes.int32)))[0]


RESIDUAL_ULPS = 1.0   # inverse iteration stops once every vector's residual is below this many n eps ||T||
MORE_ITERATIONS = 2   # ... or after this many more than two


def householder_eigh(s: Tensor, vectors: bool) -> tuple[Tensor, Tensor | None]:
    """(w, v) of the symmetric s (..., n, n), n >= 3, w ascending; v None unless `vectors` (see the module)."""
    from tgfx.scipy._decomp import ACCUMULATE_MAX_ROWS, _apply_reflectors, _unit_scale
    unit, c = _unit_scale(s)
    n = s.shape[-1]
    # small: Q^T made with T (`tridiagonalize`), A's vectors Q Z one product (12 x 12: 500 -> 460 packets run)
    accumulate = vectors and n <= ACCUMULATE_MAX_ROWS
    d, e, vs, taus = tridiagonalize(unit, accumulate)
    w = bisect(d, e, 0, n)
    if not vectors:
        return w * c[..., 0], None
    z = tridiagonal_vectors(d, e, w)
    return w * c[..., 0], tnp.matmul(tnp.swapaxes(vs, -1, -2), z) if accumulate else _apply_reflectors(vs, taus, z)


# ---- the SVD through a bidiagonal matrix ----
def bidiagonalize(a: Tensor) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """(d, e, (vs, taus), (us, sigmas)) with a = Q_L B Q_R^T, B upper bidiagonal with diagonal d (..., n) and
    superdiagonal e (..., n - 1) (LAPACK's gebd2): Q_L = H_0 ... H_{n-1}, H_k = I - tau_k v_k v_k^T (v_k zero above
    row k) from the left, Q_R = G_0 ... G_{n-3}, G_k = I - sigma_k u_k u_k^T (u_k zero left of column k + 1) from the
    right (G_{n-2}, G_{n-1}: I). `a` (..., m, n), m >= n >= 2; one scan step a column and row."""
    m, n = a.shape[-2:]
    rows, cols = _index(m), _index(n)

    def step(a: Tensor, k: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
        v, tau, d = _reflector(_col(a, cols == k), rows == k, rows > k)
        a = a - v[..., :, None] * (tau[..., None] * tnp.matmul(v[..., None, :], a)[..., 0, :])[..., None, :]
        row = tnp.sum(tnp.where((rows == k)[:, None], a, 0.0), axis=-2)                   # (..., n): row k
        u, sigma, e = _reflector(row, cols == k + 1, cols > k + 1, k < n - 2)
        a = a - (sigma[..., None] * tnp.matmul(a, u[..., :, None])[..., 0])[..., :, None] * u[..., None, :]
        return a, (v, tau, u, sigma, d, e)

    _, (vs, taus, us, sigmas, d, e) = scan(step, a, _index(n))
    return tnp.moveaxis(d, 0, -1), tnp.moveaxis(e, 0, -1)[..., : n - 1], (vs, taus), (us, sigmas)


def bidiagonal_svd(a: Tensor, vectors: bool) -> tuple[Tensor, Tensor | None]:
    """(s, V) of a (..., m, n), m >= n >= 2: s (..., n) descending, V's columns (..., n, n) the right singular
    vectors (None unless `vectors`). The singular values of the bidiagonal B are the n non-negative eigenvalues of
    its Golub-Kahan matrix, the 2n x 2n tridiagonal with zero diagonal and off-diagonal (d_0, e_0, d_1, ..., d_{n-1}),
    by bisection; its eigenvectors interleave B's right and left singular vectors (v_0, u_0, v_1, u_1, ...), by
    inverse iteration (LAPACK's bdsvdx). V = Q_R times B's, orthonormalised."""
    from tgfx.scipy._decomp import _apply_reflectors, qr_factor
    n = a.shape[-1]
    d, e, _, (us, sigmas) = bidiagonalize(a)
    off = tnp.stack([d[..., :-1], e], axis=-1).reshape(d.shape[:-1] + (2 * n - 2,))
    off = tnp.concatenate([off, d[..., -1:]], axis=-1)                                 # (..., 2n - 1)
    zero = tnp.zeros(d.shape[:-1] + (2 * n,), d.dtype)
    s = bisect(zero, off, n, n)                                                       # ascending, >= 0
    if not vectors:
        return tnp.flip(tnp.maximum(s, 0.0), axis=-1), None
    z = tridiagonal_vectors(zero, off, s)                                             # (..., 2n, n)
    vb = qr_factor(z.reshape(z.shape[:-2] + (n, 2, n))[..., :, 0, :], complete=False)[0]
    return tnp.flip(tnp.maximum(s, 0.0), axis=-1), tnp.flip(_apply_reflectors(us, sigmas, vb), axis=-1)
