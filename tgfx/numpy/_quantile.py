"""Order statistics as jax.numpy has them: quantile, percentile and median, and their NaN-ignoring forms.

Each slice is sorted (`_sort.sort`; without weights only its two order statistics are selected, `_sort.kth_smallest`)
and the k-th elements are read with a one-hot `take_along_axis`. The NaN-ignoring reductions these sit beside, and
the helpers they share, are in `_stats.py`, which re-exports these names.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tgfx.dtypes import dtypes, promote_types, to_inexact
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce as rd
from tgfx.numpy import _sort
from tgfx.numpy._indexing import take_along_axis
from tgfx.numpy._stats import _compute_dtype, _fill, _no_out
from tgfx.tensor import ArrayLike, Tensor, is_weak, to_tensor

_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")   # jnp.quantile's


def _to_last_axis(x: Tensor, axis: int | Sequence[int] | None, name: str) -> tuple[Tensor, tuple[int, ...]]:
    """x with the reduced axes merged into one last axis (the others in order before it), and the reduced axes."""
    if axis is not None and not isinstance(axis, (int, np.integer)):
        axis = tuple(axis)
        if len(set(a % max(x.ndim, 1) for a in axis)) != len(axis):
            raise ValueError(f"{name}: repeated axis in {axis}")
    axes = rd._axes(x, axis, name)
    keep = tuple(a for a in range(x.ndim) if a not in axes)
    moved = x.permute(*keep, *axes)
    return moved.reshape(tuple(x.shape[a] for a in keep) + (rd._count(x, axes),)), axes


def _weights(w: ArrayLike, x: Tensor, axis: int | Sequence[int] | None, method: str, name: str) -> Tensor:
    """`weights=` as JAX takes them: real, for method="inverted_cdf" only, shaped as `a` or (with `axis`) as the
    reduced axes, which they broadcast along."""
    wt = to_tensor(w)
    if wt.dtype.is_complex:
        raise ValueError(f"{name}: weights must be real, got {wt.dtype.name}")
    if method != "inverted_cdf":
        raise NotImplementedError(f"{name}: method={method!r} does not take weights; only 'inverted_cdf' does "
                                  f"(as in JAX)")
    if wt.shape == x.shape:
        return wt
    axes = rd._axes(x, axis, name) if axis is not None else None
    if axes is None or wt.shape != tuple(x.shape[a] for a in sorted(axes)):
        raise ValueError(f"{name}: weights of shape {wt.shape} must have a's shape {x.shape}" +
                         ("" if axes is None else f" or the reduced axes' {tuple(x.shape[a] for a in sorted(axes))}"))
    return wt.reshape(tuple(s if a in axes else 1 for a, s in enumerate(x.shape))).expand(x.shape)


def _inverted_cdf(srt: Tensor, weights: Tensor | None, qs: Tensor, index: Callable[[Tensor], Tensor],
                  ignore_nan: bool) -> Tensor:
    """numpy's method="inverted_cdf", as JAX computes it: the first sorted element whose running weight reaches q
    times the slice's total (each weighs 1 without weights=; a NaN nothing). A negative or NaN weight makes the
    slice's quantiles NaN, as does an all-NaN slice."""
    nan = ew.isnan(srt)
    w = Tensor.full(srt.shape, 1, srt.dtype) if weights is None else weights
    bad = ew.logical_or(w < 0, ew.isnan(w))
    cum = rd.cumsum(_fill(w, ew.logical_or(bad, nan), 0), axis=-1)
    target = qs * cum[..., -1:]                          # (..., len(q))
    below = ew.less(cum[..., None, :], target[..., :, None])
    out = take_along_axis(srt, index(rd.sum(below, axis=-1, dtype=srt.dtype)), -1, mode="clip")
    force = rd.any(bad, axis=-1, keepdims=True)
    if ignore_nan:
        force = ew.logical_or(force, rd.all(nan, axis=-1, keepdims=True))
    return _fill(out, force, float("nan"))


def _quantile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None, method: str, keepdims: bool,
              ignore_nan: bool, name: str, weights: ArrayLike | None = None) -> Tensor:
    """The q-th quantiles (q in [0, 1]) by sorting each slice: the order statistics at floor and ceil of
    q * (n - 1), combined by `method`; n is the slice's length, or its count of non-NaNs when they are ignored
    (NaNs sort last, so the first n sorted elements are the non-NaN ones); "inverted_cdf" reads the cumulative
    weights (`_inverted_cdf`). The q axis comes first, as JAX's."""
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"{name}: method must be one of {', '.join(map(repr, _QUANTILE_METHODS))}, got {method!r}")
    x = to_tensor(a)
    if x.dtype.is_complex:
        raise ValueError(f"{name}: quantiles of complex values are not defined (they have no order); pass the real "
                         f"part or the magnitude")
    w = None if weights is None else _weights(weights, x, axis, method, name)
    x = x.astype(to_inexact(x.dtype if w is None else promote_types(x.dtype, w.dtype)))
    qt = to_tensor(q) if not isinstance(q, (int, float)) else None
    if qt is not None and qt.ndim > 1:
        raise ValueError(f"{name}: q must be a scalar or 1-d, got shape {qt.shape}")
    comp = _compute_dtype(x.dtype)
    if qt is not None and not is_weak(qt):
        comp = promote_types(comp, to_inexact(qt.dtype))
    qv = Tensor.full((), float(q), comp) if qt is None else qt.astype(comp)
    flat, axes = _to_last_axis(x.astype(comp), axis, name)
    n = flat.shape[-1]
    if n == 0:
        raise ValueError(f"{name}: cannot take a quantile of an empty slice (shape {x.shape}, axis {axis})")
    if w is None and method != "inverted_cdf":  # the two order statistics only, selected (no sort of long rows)
        srt, wsrt = None, None
    elif w is None:
        srt, wsrt = _sort.sort(flat, axis=-1), None
    else:  # the weights in the data's sorted order
        order = _sort.argsort(flat, axis=-1)
        srt = take_along_axis(flat, order, -1, mode="clip")
        wsrt = take_along_axis(_to_last_axis(w.astype(comp), axis, name)[0], order, -1, mode="clip")
    qs = qv.reshape((1,) * (flat.ndim - 1) + (qv.size,))  # the quantiles along a last axis, beside the data's
    nan = ew.isnan(flat)
    if ignore_nan:
        count: Tensor | int = rd.sum(ew.logical_not(nan), axis=-1, dtype=comp, keepdims=True)
    else:
        count = n
    pos = qs * (count - 1)
    low, high = ew.floor(pos), ew.ceil(pos)
    frac = pos - low

    def index(p: Tensor) -> Tensor:
        return ew.clip(p, 0, ew.maximum(count - 1, 0) if isinstance(count, Tensor) else n - 1).astype(dtypes.int32)

    if srt is None:
        from tgfx.numpy._movement import concatenate
        both = _sort.kth_smallest(flat, index(concatenate([low, high], axis=-1)))
        lo, hi = both[..., :qv.size], both[..., qv.size:]
    else:
        lo = take_along_axis(srt, index(low), -1, mode="clip")
        hi = take_along_axis(srt, index(high), -1, mode="clip")
    if method == "inverted_cdf":
        out = _inverted_cdf(srt, wsrt, qs, index, ignore_nan)
    elif method == "linear":  # numpy's lerp: exact at both ends, and equal neighbours (infinities too) give themselves
        diff = hi - lo
        lerp = ew.where(frac >= 0.5, hi - diff * (1 - frac), lo + diff * frac)
        out = ew.where(lo == hi, lo, lerp)
    elif method == "lower":
        out = lo
    elif method == "higher":
        out = hi
    elif method == "nearest":  # as JAX: a tie (frac == 0.5) takes the lower one (numpy rounds the index to even)
        out = ew.where(frac <= 0.5, lo, hi)
    else:
        out = (lo + hi) * 0.5
    if not ignore_nan:  # one NaN makes the slice's quantiles NaN
        out = ew.where(rd.any(nan, axis=-1, keepdims=True), Tensor.full((), float("nan"), comp), out)
    # the q axis first, then the kept axes (or every axis, reduced ones as 1, with keepdims)
    rest = rd._reduced_shape(x, axes, keepdims)
    out = out.permute(out.ndim - 1, *range(out.ndim - 1))
    out = out.reshape((qv.size,) + rest) if qv.ndim else out.reshape(rest)
    return out.astype(x.dtype)


def quantile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
             overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
             weights: ArrayLike | None = None) -> Tensor:
    """numpy.quantile: the q-th quantiles (q a scalar or 1-d, in [0, 1]) along `axis` (an int, a tuple, or None for
    all), with `method` "linear" (the default), "lower", "higher", "midpoint", "nearest" or "inverted_cdf" (the
    first element whose cumulative weight reaches q of the total; the only one that takes `weights`, shaped as `a`
    or as the reduced axes, as JAX's). A slice holding a NaN gives NaN. With a 1-d q the result has q's axis first.
    Floats result (integers as `to_inexact`). Cost: a sort of each slice, and two one-hot reads per quantile.

    >>> tnp.quantile(tnp.asarray([1.0, 2.0, 3.0, 4.0]), 0.5).item()
    2.5
    >>> tnp.quantile(tnp.asarray([1.0, 2.0, 3.0, 4.0, 10.0]), 0.3, method="inverted_cdf").item()
    2.0
    """
    _no_out(out, "quantile")
    return _quantile(a, q, axis, method, keepdims, False, "quantile", weights)


def nanquantile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
                overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
                weights: ArrayLike | None = None) -> Tensor:
    """numpy.nanquantile: `quantile` of the non-NaN elements of each slice; NaN for an all-NaN slice.

    >>> tnp.nanquantile(tnp.asarray([1.0, float("nan"), 3.0]), 0.5).item()
    2.0
    """
    _no_out(out, "nanquantile")
    return _quantile(a, q, axis, method, keepdims, True, "nanquantile", weights)


def percentile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
               weights: ArrayLike | None = None) -> Tensor:
    """numpy.percentile: `quantile` with q in percent, [0, 100].

    >>> tnp.percentile(tnp.asarray([1.0, 2.0, 3.0, 5.0]), 50).item()
    2.5
    """
    _no_out(out, "percentile")
    return _quantile(a, _percent(q), axis, method, keepdims, False, "percentile", weights)


def nanpercentile(a: ArrayLike, q: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None,
                  overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
                  weights: ArrayLike | None = None) -> Tensor:
    """numpy.nanpercentile: `nanquantile` with q in percent, [0, 100].

    >>> tnp.nanpercentile(tnp.asarray([1.0, float("nan"), 3.0]), 50).item()
    2.0
    """
    _no_out(out, "nanpercentile")
    return _quantile(a, _percent(q), axis, method, keepdims, True, "nanpercentile", weights)


def _percent(q: ArrayLike) -> ArrayLike:
    if isinstance(q, (int, float)):
        return q / 100
    t = to_tensor(q)
    return ew.true_divide(t, 100)


def median(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Tensor:
    """numpy.median: the middle element of each sorted slice, or the mean of the middle two; NaN if it holds a NaN.

    >>> tnp.median(tnp.asarray([[3.0, 1.0, 2.0], [4.0, 6.0, 5.0]]), axis=1).tolist()
    [2.0, 5.0]
    """
    _no_out(out, "median")
    return _quantile(a, 0.5, axis, "midpoint", keepdims, False, "median")


def nanmedian(a: ArrayLike, axis: int | Sequence[int] | None = None, out: None = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Tensor:
    """numpy.nanmedian: the median of the non-NaN elements of each slice; NaN for an all-NaN slice.

    >>> tnp.nanmedian(tnp.asarray([1.0, float("nan"), 2.0])).item()
    1.5
    """
    _no_out(out, "nanmedian")
    return _quantile(a, 0.5, axis, "midpoint", keepdims, True, "nanmedian")

