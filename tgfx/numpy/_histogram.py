"""Counting into bins as jax.numpy has it: histogram, histogram_bin_edges, bincount, digitize.

Counting is a one-hot compare-and-sum over (bin, element), O(bins * n) work in one kernel. Only `bincount` without
`length=` has a data-dependent shape: it reads its input eagerly and, while tracing, asks for `length=`. `_stats.py`
re-exports these names.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from tgfx.dtypes import dtypes, to_inexact
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce as rd
from tgfx.numpy._stats import _compute_dtype, _promote_inexact
from tgfx.tensor import ArrayLike, Tensor, to_tensor


def _bins_arg(bins: ArrayLike, name: str) -> int | Tensor:
    """An int number of bins, or a 1-d Tensor of edges."""
    if isinstance(bins, str):
        raise NotImplementedError(f"{name}: bins given by name ({bins!r}) are not supported; pass a number of bins "
                                  f"or an array of edges")
    if isinstance(bins, (int, np.integer)):
        if bins < 1:
            raise ValueError(f"{name}: bins must be a positive number of bins, got {bins}")
        return int(bins)
    t = to_tensor(bins)
    if t.ndim == 0:
        raise TypeError(f"{name}: bins must be a Python int (a static number of bins) or a 1-d array of edges, got "
                        f"a 0-d {t.dtype.name} Tensor")
    if t.ndim != 1 or t.shape[0] < 1:
        raise ValueError(f"{name}: bins must be a 1-d array of at least one edge, got shape {t.shape}")
    return t


def histogram_bin_edges(a: ArrayLike, bins: ArrayLike = 10, range: Sequence[ArrayLike] | None = None,  # noqa: A002
                        weights: ArrayLike | None = None) -> Tensor:
    """numpy.histogram_bin_edges: `bins + 1` evenly spaced edges over `range` (a's min and max by default; a
    zero-width range widens by 0.5 each way), or the given edges as floats. `weights` is unused, as in JAX.

    >>> tnp.histogram_bin_edges(tnp.asarray([0.0, 1.0, 4.0]), bins=2).tolist()
    [0.0, 2.0, 4.0]
    """
    x = to_tensor(a)
    d = to_inexact(x.dtype)
    b = _bins_arg(bins, "histogram_bin_edges")
    if isinstance(b, Tensor):
        return b.astype(d)
    if range is None:
        if x.size == 0:
            lo, hi = Tensor.full((), 0.0, d), Tensor.full((), 1.0, d)
        else:
            lo, hi = rd.min(x).astype(d), rd.max(x).astype(d)
    else:
        r = to_tensor(range) if not isinstance(range, (list, tuple)) else None
        if (r is not None and r.shape != (2,)) or (r is None and len(range) != 2):
            raise ValueError(f"histogram_bin_edges: range must be None or a (min, max) pair, got {range!r}")
        lo, hi = (r[0], r[1]) if r is not None else (to_tensor(range[0]), to_tensor(range[1]))
        lo, hi = lo.astype(d), hi.astype(d)
    same = lo == hi
    lo, hi = ew.where(same, lo - 0.5, lo), ew.where(same, hi + 0.5, hi)
    # as linspace: start + i * step, the last edge exactly `hi`
    i = Tensor.arange(b + 1, dtype=_compute_dtype(d))
    edges = (i * ((hi - lo) / b).astype(i.dtype) + lo.astype(i.dtype)).astype(d)
    return ew.where(Tensor.arange(b + 1, dtype=dtypes.int32) == b, hi, edges)


def histogram(a: ArrayLike, bins: ArrayLike = 10, range: Sequence[ArrayLike] | None = None,  # noqa: A002
              weights: ArrayLike | None = None, density: bool | None = None) -> tuple[Tensor, Tensor]:
    """numpy.histogram of the flattened `a`: (counts, edges). Bin i holds edges[i] <= x < edges[i + 1], the last one
    its right edge too; values outside the edges (and NaNs) are not counted. Counts are floats (the sum of `weights`,
    ones by default), as JAX's; `density=True` divides them by the total and the bin widths.
    Cost: one kernel of bins * a.size compares.

    >>> counts, edges = tnp.histogram(tnp.asarray([1.0, 2.0, 2.0, 4.0]), bins=3)
    >>> counts.tolist()
    [1.0, 2.0, 1.0]
    """
    from tgfx.numpy._data_dependent import searchsorted
    x = to_tensor(a)
    if weights is None:
        (x,) = _promote_inexact(x)
        w = None
    else:
        w = to_tensor(weights)
        if w.shape != x.shape:
            raise ValueError(f"histogram: weights must have a's shape {x.shape}, got {w.shape}")
        x, w = _promote_inexact(x, w)
        w = w.reshape(-1)
    x = x.reshape(-1)
    edges = histogram_bin_edges(x, bins, range)
    ne = edges.shape[0]
    # which bin: the count of edges <= x, the last edge counting in the last bin; 0 and ne are outside
    idx = searchsorted(edges, x, side="right").astype(dtypes.int32)
    idx = ew.where(x == edges[ne - 1], ne - 1, idx)
    k = Tensor.arange(1, ne, dtype=dtypes.int32).reshape(ne - 1, 1)
    hit = idx.reshape(1, x.shape[0]) == k
    if w is None:
        counts = rd.sum(hit, axis=1).astype(x.dtype)
    else:
        counts = rd.sum(ew.where(hit, w.reshape(1, x.shape[0]), Tensor.full((), 0, w.dtype)), axis=1)
    if density:
        widths = edges[1:] - edges[:-1]
        counts = ew.true_divide(ew.true_divide(counts, widths), rd.sum(counts))
    return counts, edges


def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0, *,
             length: int | None = None) -> Tensor:
    """numpy.bincount: out[k] = the number of elements of the 1-d integer `x` equal to k (the sum of their
    `weights`), for k < length. `length` defaults to max(minlength, max(x) + 1), which reads `x` (eagerly only:
    under jit pass `length=`, as in JAX). As JAX's: negative values count in bin 0, values >= length are dropped,
    and the result has weights' dtype (the default int without weights). Cost: one kernel of length * x.size
    compares.

    >>> tnp.bincount(tnp.asarray([0, 1, 1, 3])).tolist()
    [1, 2, 0, 1]
    """
    t = to_tensor(x)
    if t.dtype.is_bool:
        t = t.astype(dtypes.int32)
    if not t.dtype.is_int:
        raise TypeError(f"bincount: x must be integers, got {t.dtype.name}; cast it with x.astype(int)")
    if t.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got shape {t.shape}")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    if length is None:
        from tgfx.numpy._data_dependent import host_value
        host = host_value(t, "bincount", "x", hint="Pass length=N (the number of bins), as in JAX")
        length = max(minlength, int(host.max()) + 1 if host.size else 0)
    length = operator.index(length)
    if length < 0:
        raise ValueError(f"bincount: length must be non-negative, got {length}")
    if weights is None:
        w = None
        d = dtypes.default_int
    else:
        w = to_tensor(weights)
        if w.shape != t.shape:
            raise ValueError(f"bincount: weights must have x's shape {t.shape}, got {w.shape}")
        d = w.dtype
    if length == 0 or t.shape[0] == 0:
        return Tensor.full((length,), 0, d)
    n = t.shape[0]
    k = Tensor.arange(length, dtype=t.dtype).reshape(length, 1)
    hit = ew.maximum(t, 0).reshape(1, n) == k
    if w is None:
        return rd.sum(hit, axis=1, dtype=d)
    zero = Tensor.full((), False if d.is_bool else 0, d)
    return rd.sum(ew.where(hit, w.reshape(1, n), zero), axis=1, dtype=d).astype(d)


def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *, method: str | None = None) -> Tensor:
    """numpy.digitize: for each x, the index of the bin it falls in among monotonic `bins` (increasing or
    decreasing): with increasing bins, i such that bins[i-1] <= x < bins[i] (bins[i-1] < x <= bins[i] with
    `right=True`), 0 below and len(bins) above. `method` is accepted for JAX compatibility.

    >>> tnp.digitize(tnp.asarray([0.5, 1.0, 2.5]), tnp.asarray([1.0, 2.0, 3.0])).tolist()
    [0, 1, 2]
    """
    from tgfx.numpy._data_dependent import searchsorted
    v, b = to_tensor(x), to_tensor(bins)
    if b.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-d, got shape {b.shape}")
    nb = b.shape[0]
    if nb == 0:
        return Tensor.full(v.shape, 0, dtypes.int32)
    side = "left" if right else "right"
    up = searchsorted(b, v, side=side)
    down = nb - searchsorted(b.flip(0), v, side=side)
    return ew.where(b[nb - 1] >= b[0], up, down).astype(dtypes.int32)
