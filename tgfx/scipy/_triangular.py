"""Triangular solves as `jax.scipy.linalg` has them (`solve_triangular`), and the matrix helpers the factorisations
written on them share (`_check_square`, `_index`, `_row`, `_col`, `_atb`, `_abt`). `tgfx.scipy.linalg` re-exports
these names; the Cholesky factorisation (there) and the LU one (`_lu.py`) are built on them.

A solve is a `tg.lax.fori_loop` over the n rows (or columns), or past a few dozen rows a scan over blocks of B rows
(the inverses of the diagonal blocks first, then a block a step, its products taken off the rest of b: n / B + B
steps); a `tg.function` with its own backward (more triangular solves).
"""
from __future__ import annotations

from typing import Any

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.function import function
from tgfx.lax import fori_loop, scan
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes


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
