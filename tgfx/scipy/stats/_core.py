"""The sample statistics of `jax.scipy.stats`: `mode`, `rankdata` and `sem`, each with JAX's arguments, NaN policy
and dtypes.

All three sort (or reduce) along one axis and need no data-dependent shapes, so they run under `jit` and `vmap`:
runs of equal values are found in the sorted data by comparing neighbours, and a run's first and last position by
cumulative max / min, never by `unique` or `nonzero`.

>>> from tgfx.scipy import stats
>>> stats.mode(tg.asarray([1.0, 2.0, 2.0, 3.0]))                  # ModeResult(mode=2.0, count=2)
>>> stats.rankdata(tg.asarray([3.0, 1.0, 4.0, 1.0]))              # [3., 1.5, 4., 1.5]
>>> stats.sem(tg.asarray([1.0, 2.0, 3.0, 4.0]))                   # 0.6454972
"""
from __future__ import annotations

import math
from typing import NamedTuple

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.lax import cummax, cummin
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor, static_int

_METHODS = ("average", "min", "max", "dense", "ordinal")


class ModeResult(NamedTuple):
    """The most common value along an axis and how often it occurs."""
    mode: Tensor
    count: Tensor


def _check_nan_policy(name: str, nan_policy: str) -> None:
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"{name}: illegal nan_policy value {nan_policy!r}; expected one of 'propagate', 'omit', "
                         f"'raise'")
    if nan_policy == "omit":
        raise NotImplementedError(f"{name}: nan_policy='omit' is not implemented (as in JAX); drop the NaNs first")
    if nan_policy == "raise":
        raise NotImplementedError(f"{name}: nan_policy='raise' would need to read the data on the host, which a "
                                  f"compiled program cannot; check for NaNs outside {name} (as JAX asks)")


def _axis(name: str, axis: int, ndim: int) -> int:
    if static_int(axis) is None or not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis!r} is out of range for an array of {ndim} dimension(s); pass an int in "
                         f"[{-ndim}, {ndim}) or None")
    return int(axis) % ndim


def _run_bounds(s: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """For s sorted along its last axis: (where a run of equal values starts, the position of each entry's run's
    first element, of its last element). NaNs count as equal to each other (JAX's `unique` does so)."""
    n = s.shape[-1]
    same = (s[..., 1:] == s[..., :-1]) | (tnp.isnan(s[..., 1:]) & tnp.isnan(s[..., :-1]))
    starts = tnp.concatenate([tnp.ones(s.shape[:-1] + (1,), dtype=tnp.bool_), ~same], axis=-1)
    ends = tnp.concatenate([~same, tnp.ones(s.shape[:-1] + (1,), dtype=tnp.bool_)], axis=-1)
    idx = tnp.broadcast_to(tnp.arange(n, dtype=tnp.int32), s.shape)
    first = cummax(tnp.where(starts, idx, 0), axis=s.ndim - 1)
    last = cummin(tnp.where(ends, idx, n - 1), axis=s.ndim - 1, reverse=True)
    return starts, first, last


def mode(a: ArrayLike, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False) -> ModeResult:
    """The most common value along `axis` (all of `a` for None) and its count, as `jax.scipy.stats.mode`.

    Ties go to the smallest value; NaNs count as one value (which sorts last). The counts have the default int
    type (int32, int64 in x64 mode); an empty axis gives mode NaN and count 0 in the default float type (JAX's).
    `keepdims` keeps the reduced axis with length 1.

    >>> mode(tg.asarray([[1.0, 2.0], [1.0, 3.0], [2.0, 3.0]]))    # ModeResult(mode=[1., 3.], count=[2, 2])

    Raises ValueError for an unknown nan_policy or an axis out of range; NotImplementedError for 'omit' and 'raise'.
    """
    _check_nan_policy("mode", nan_policy)
    x = tnp.atleast_1d(tnp.asarray(a))
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x = x.reshape(-1, 1)
        ax = 0
    else:
        ax = _axis("mode", axis, x.ndim)
        rest = tuple(s for i, s in enumerate(x.shape) if i != ax)
        out_shape = x.shape[:ax] + (1,) + x.shape[ax + 1:] if keepdims else rest
    x = tnp.moveaxis(x, ax, -1)
    if x.shape[-1] == 0:
        return ModeResult(tnp.full(out_shape, math.nan, dtypes.default_float),
                          tnp.zeros(out_shape, dtypes.default_float))
    s = tnp.sort(x, axis=-1)
    _, first, _ = _run_bounds(s)
    run = tnp.arange(s.shape[-1], dtype=tnp.int32) - first + 1      # the count so far within each run
    count = tnp.max(run, axis=-1).astype(dtypes.default_int)       # JAX's unique counts: the default int
    at = tnp.argmax(run, axis=-1)                                      # the end of the first (smallest) longest run
    values = tnp.take_along_axis(s, at[..., None], axis=-1)[..., 0]
    return ModeResult(values.reshape(out_shape), count.reshape(out_shape))


def _rank_last_axis(x: Tensor, method: str) -> Tensor:
    """The ranks of x along its last axis, in the default float type."""
    out = dtypes.default_float
    n = x.shape[-1]
    sorter = tnp.argsort(x, axis=-1, stable=True)
    inv = tnp.argsort(sorter, axis=-1, stable=True)              # the inverse permutation: each entry's sorted slot
    if method == "ordinal":
        return (inv + 1).astype(out)
    s = tnp.take_along_axis(x, sorter, axis=-1)
    same = s[..., 1:] == s[..., :-1]
    starts = tnp.concatenate([tnp.ones(s.shape[:-1] + (1,), dtype=tnp.bool_), ~same], axis=-1)
    if method == "dense":
        sorted_ranks = tnp.cumsum(starts.astype(tnp.int32), axis=-1).astype(out)
    else:
        ends = tnp.concatenate([~same, tnp.ones(s.shape[:-1] + (1,), dtype=tnp.bool_)], axis=-1)
        idx = tnp.broadcast_to(tnp.arange(n, dtype=tnp.int32), s.shape)
        low = (cummax(tnp.where(starts, idx, 0), axis=s.ndim - 1) + 1).astype(out)
        high = (cummin(tnp.where(ends, idx, n - 1), axis=s.ndim - 1, reverse=True) + 1).astype(out)
        sorted_ranks = low if method == "min" else high if method == "max" else 0.5 * (low + high)
    return tnp.take_along_axis(sorted_ranks, inv, axis=-1)


def rankdata(a: ArrayLike, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate") -> Tensor:
    """The ranks (from 1) of the data, as `jax.scipy.stats.rankdata`: of the flattened array for axis=None, else of
    every 1-d slice along `axis`. Ties get the mean of their ranks ('average'), the lowest ('min'), the highest
    ('max'), consecutive ranks without gaps ('dense') or distinct ranks in order of appearance ('ordinal').

    A slice holding a NaN is all NaN (the whole result for axis=None). The result has the default float type.

    >>> rankdata(tg.asarray([3, 1, 4, 1]), method="min")           # [3., 1., 4., 1.]

    Raises ValueError for an unknown method or nan_policy; NotImplementedError for nan_policy 'omit' and 'raise'.
    """
    _check_nan_policy("rankdata", nan_policy)
    if method not in _METHODS:
        raise ValueError(f"rankdata: unknown method {method!r}; expected one of {', '.join(map(repr, _METHODS))}")
    x = tnp.asarray(a)
    if axis is None:
        flat = x.reshape(1, -1)
        ranks = _rank_last_axis(flat, method)
        return tnp.where(tnp.any(tnp.isnan(flat)), math.nan, ranks).reshape(-1)
    ax = _axis("rankdata", axis, x.ndim)
    moved = tnp.moveaxis(x, ax, -1)
    ranks = _rank_last_axis(moved, method)
    ranks = tnp.where(tnp.any(tnp.isnan(moved), axis=-1, keepdims=True), math.nan, ranks)
    return tnp.moveaxis(ranks, -1, ax)


def sem(a: ArrayLike, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False) -> Tensor:
    """The standard error of the mean, std(a, ddof) / sqrt(n), along `axis` (all of `a` for None), as
    `jax.scipy.stats.sem`. nan_policy='omit' leaves NaNs out of both the deviation and n.

    >>> sem(tg.asarray([[1.0, 2.0], [3.0, 5.0]]), axis=None)      # 0.8539126

    Raises ValueError for a nan_policy other than 'propagate' and 'omit', or an axis out of range.
    """
    (b,) = promote_args_inexact("sem", a)
    if axis is not None:
        axis = _axis("sem", axis, b.ndim)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return tnp.std(b, axis=axis, ddof=ddof, keepdims=keepdims) / math.sqrt(size) if size else \
            tnp.full(tnp.std(b, axis=axis, ddof=ddof, keepdims=keepdims).shape, math.nan, b.dtype)
    if nan_policy == "omit":
        count = tnp.sum(~tnp.isnan(b), axis=axis, keepdims=keepdims)
        return tnp.nanstd(b, axis=axis, ddof=ddof, keepdims=keepdims) / tnp.sqrt(count).astype(b.dtype)
    raise ValueError(f"sem: nan_policy {nan_policy!r} is not supported; use 'propagate' or 'omit'")


__all__ = ["ModeResult", "mode", "rankdata", "sem"]
