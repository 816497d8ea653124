"""`tnp.linalg`'s least squares, condition numbers, chained products and tensor solves, as `jax.numpy.linalg` has
them: each a composition of the factorisations in `tnp.linalg` (the SVD, LU), so each is differentiable through
their own backwards and traces under `jit` and `vmap`.

>>> x, resid, rank, s = tnp.linalg.lstsq(a, b)                  # min ||a x - b||, from the SVD
>>> tnp.linalg.cond(a), tnp.linalg.multi_dot([a, b, c, d])
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce as rd
from tgfx.tensor import ArrayLike, Tensor, to_tensor


def _finfo_eps(t: Tensor) -> float:
    return float(np.finfo(np.float64 if t.dtype.name == "float64" else np.float32).eps)


# ---- least squares ----
def lstsq(a: ArrayLike, b: ArrayLike, rcond: float | ArrayLike | None = None, *,
          numpy_resid: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(x, resid, rank, s): the x minimising ||a x - b||_2 (`jax.numpy.linalg.lstsq`), from the reduced SVD of a.

    `a` is (m, n) and `b` is (m,) or (m, k): x is (n,) or (n, k), the minimum-norm solution over the singular values
    s (descending, (min(m, n),)) above rcond * s[0] (default eps * max(m, n), as JAX; a negative rcond means eps).
    rank is their number (int32). resid is the squared 2-norm of each column of b - a x, (k,) or (1,) for a vector
    b, always (JAX's default, so the shape is static); with `numpy_resid=True` it is empty where numpy's is (rank < n
    or m <= n), which needs the rank on the host and so is not available under `jit`. Differentiable through the
    SVD's backward (NaN at repeated singular values, as JAX's).

    >>> x, _, _, _ = tnp.linalg.lstsq(tg.asarray([[1.0, 2.0], [3.0, 4.0]]), tg.asarray([5.0, 6.0]))  # [-4., 4.5]

    Raises ValueError when a and b have different numbers of rows, TypeError when a is not 2-d or b not 1-d or 2-d.
    """
    from tgfx.numpy import _creation as cr
    from tgfx.numpy._linalg import matmul
    from tgfx.numpy.linalg import _inexact, _real_matrix, svd
    at, bt = _inexact("lstsq", a, b)
    if at.ndim != 2:
        raise TypeError(f"lstsq: a must be two-dimensional (m, n), got shape {at.shape}")
    if bt.ndim not in (1, 2):
        raise TypeError(f"lstsq: b must be one- or two-dimensional, (m,) or (m, k), got shape {bt.shape}")
    if at.shape[0] != bt.shape[0]:
        raise ValueError(f"lstsq: a and b must have the same number of rows, got shapes {at.shape} and {bt.shape}")
    at = _real_matrix("lstsq", at)
    vector = bt.ndim == 1
    b2 = bt[:, None] if vector else bt
    m, n = at.shape
    if at.size == 0:
        s, rank = cr.zeros((0,), at.dtype), cr.zeros((), "int32")
        x = cr.zeros((n, b2.shape[1]), at.dtype)
    else:
        eps = _finfo_eps(at)
        if rcond is None:
            cut = eps * max(m, n)
        else:
            (r,) = _inexact("lstsq", rcond)
            cut = ew.where(r < 0, eps, r).astype(at.dtype)
        u, s, vt = svd(at, full_matrices=False)
        keep = (s > 0) & (s >= cut * s[0])
        rank = rd.sum(keep.astype("int32"))
        s_inv = ew.where(keep, 1.0 / ew.where(keep, s, 1.0), 0.0).astype(at.dtype)
        x = matmul(vt.T, s_inv[:, None] * matmul(u.T, b2))
    if numpy_resid and (m <= n or _host_rank(rank) < n):
        resid = cr.zeros((0,), at.dtype)
    else:
        r = b2 - matmul(at, x)
        resid = rd.sum(r * r, axis=0)          # (k,), or (1,) for a vector b, as JAX's
    return (x[:, 0] if vector else x), resid, rank, s


def _host_rank(rank: Tensor) -> int:
    from tgfx.numpy._data_dependent import host_value
    return int(host_value(rank, "lstsq", "the rank", "numpy_resid=True makes resid's shape depend on the rank, as "
                                                     "numpy's; use numpy_resid=False (the default) under jit"))


# ---- condition numbers ----
def cond(x: ArrayLike, p: int | float | str | None = None) -> Tensor:
    """The condition number of a matrix or of each of a stack (..., m, n) (`jax.numpy.linalg.cond`):
    norm(x, p) * norm(inv(x), p), or for p None / 2 / -2 the ratio of the extreme singular values (any m, n).

    Other orders (1, -1, inf, -inf, 'fro', 'nuc') need square matrices and go through `inv`; where that gives NaN
    for a singular matrix without NaNs in it, the answer is inf, as JAX's.

    >>> tnp.linalg.cond(tg.asarray([[1.0, 2.0], [2.0, 1.0]]))    # 3.0

    Raises ValueError for fewer than 2 dimensions, an empty matrix, or a non-square one with p not in (None, 2, -2).
    """
    from tgfx.numpy.linalg import _inexact, inv, norm, svdvals
    (t,) = _inexact("cond", x)
    if t.ndim < 2:
        raise ValueError(f"cond: x must be a matrix or a stack of them (at least 2-d), got shape {t.shape}")
    if t.shape[-1] == 0 or t.shape[-2] == 0:
        raise ValueError(f"cond: x must not be empty, got shape {t.shape}")
    if p is None or p == 2:
        s = svdvals(t)
        return s[..., 0] / s[..., -1]
    if p == -2:
        s = svdvals(t)
        r = s[..., -1] / s[..., 0]
    else:
        if t.shape[-1] != t.shape[-2]:
            raise ValueError(f"cond: with p={p!r} x must be square (..., n, n), got shape {t.shape}; use p=None, 2 or "
                             f"-2 for a rectangular matrix")
        r = norm(t, p, axis=(-2, -1)) * norm(inv(t), p, axis=(-2, -1))
    return ew.where(ew.isnan(r) & ~rd.any(ew.isnan(t), axis=(-2, -1)), np.inf, r)


# ---- chained products ----
def _chain_order(dims: list[int]) -> list[list[int]]:
    """split[i][j]: where the optimal product of matrices i..j splits, by the classic O(k^3) dynamic programme over
    the static shapes (matrix i is dims[i] x dims[i + 1]; cost counts scalar multiplications, as numpy's)."""
    k = len(dims) - 1
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = math.inf
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s
    return split


def multi_dot(arrays: Sequence[ArrayLike], *, precision: Any = None) -> Tensor:
    """The product arrays[0] @ arrays[1] @ ... in the order with the fewest multiplications for their (static)
    shapes (`jax.numpy.linalg.multi_dot`). All must be 2-d but the first, which may be a row vector (n,), and the
    last, which may be a column vector (n,); the result drops their axes as `matmul` would. `precision` is accepted
    for JAX compatibility and ignored.

    >>> tnp.linalg.multi_dot([x, y, z])      # (x @ y) @ z or x @ (y @ z), whichever is cheaper

    Raises ValueError for fewer than two arrays, wrong numbers of dimensions, or inner sizes that do not match.
    """
    from tgfx.numpy._linalg import matmul
    ts = [to_tensor(a) for a in arrays]
    if len(ts) < 2:
        raise ValueError(f"multi_dot: needs at least two arrays, got {len(ts)}")
    shapes = [t.shape for t in ts]
    if ts[0].ndim not in (1, 2) or ts[-1].ndim not in (1, 2) or any(t.ndim != 2 for t in ts[1:-1]):
        raise ValueError(f"multi_dot: the arrays must all be 2-d, but the first and last, which may be 1-d; got shapes "
                         f"{shapes}")
    if any(x.shape[-1] != y.shape[0] for x, y in zip(ts[:-1], ts[1:], strict=True)):
        raise ValueError(f"multi_dot: the last axis of each array must match the first of the next; got shapes "
                         f"{shapes}")
    first, last = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = [ts[0][None, :] if first else ts[0], *ts[1:-1], ts[-1][:, None] if last else ts[-1]]
    dims = [mats[0].shape[0]] + [t.shape[1] for t in mats]
    split = _chain_order(dims)

    def product(i: int, j: int) -> Tensor:
        return mats[i] if i == j else matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    out = product(0, len(mats) - 1)
    if first:
        out = out[0]
    return out[..., 0] if last else out


# ---- tensor inverses and solves ----
def tensorinv(a: ArrayLike, ind: int = 2) -> Tensor:
    """The inverse of `a` under `tensordot(., ., ind)` (`jax.numpy.linalg.tensorinv`): a reshaped to a square
    matrix (prod(a.shape[:ind]) rows), inverted, and shaped (*a.shape[ind:], *a.shape[:ind]).

    >>> ainv = tnp.linalg.tensorinv(a, ind=2)        # tensordot(ainv, tensordot(a, x, 2), 2) == x

    Raises ValueError for ind <= 0 or when the two products of sizes differ.
    """
    from tgfx.numpy.linalg import inv
    t = to_tensor(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got ind={ind}")
    rows, cols = t.shape[:ind], t.shape[ind:]
    if math.prod(rows) != math.prod(cols):
        raise ValueError(f"tensorinv: the product of a's first ind={ind} sizes {rows} must equal that of the rest "
                         f"{cols}; got shape {t.shape}")
    return inv(t.reshape(math.prod(rows), math.prod(cols))).reshape(*cols, *rows)


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: tuple[int, ...] | None = None) -> Tensor:
    """The x with tensordot(a, x, x.ndim) == b (`jax.numpy.linalg.tensorsolve`): `axes` of a are moved to its end
    first; then a is (*b.shape, *x.shape), reshaped to a square matrix and solved by LU.

    >>> x = tnp.linalg.tensorsolve(a, b)                 # a (2, 3, 6), b (2, 3): x (6,)

    Raises ValueError when a's leading shape is not b's or the remaining sizes do not multiply to b's size.
    """
    from tgfx.numpy.linalg import solve
    from tgfx.tensor import normalize_axis
    at, bt = to_tensor(a), to_tensor(b)
    if axes is not None:   # each of axes moved to the end in turn, as numpy's: the others keep their order
        moved = [normalize_axis(ax, at.ndim, "tensorsolve") for ax in axes]
        at = at.transpose(*[i for i in range(at.ndim) if i not in moved], *moved)
    out_shape = at.shape[bt.ndim:]
    if at.shape[:bt.ndim] != bt.shape:
        raise ValueError(f"tensorsolve: after moving axes to the end, a's leading shape must be b's; got a.shape="
                         f"{at.shape}, b.shape={bt.shape}")
    if bt.size != math.prod(out_shape):
        raise ValueError(f"tensorsolve: a's trailing sizes {out_shape} must multiply to b's size {bt.size}; got "
                         f"a.shape={at.shape}, b.shape={bt.shape}")
    return solve(at.reshape(bt.size, math.prod(out_shape)), bt.reshape(-1)).reshape(out_shape)
