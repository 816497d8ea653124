"""Statistics as jax.numpy has them: NaN-ignoring reductions, order statistics (quantiles, medians), weighted averages,
covariance, and counting into bins (histogram, bincount, digitize).

Everything is a composition of tnp ops with static shapes, so it works under `jit` and `vmap` and differentiates where
JAX's does. Order statistics sort (`_sort.sort`) and read the k-th elements with a one-hot `take_along_axis`; counting
into bins is a one-hot compare-and-sum over (bin, element), O(bins * n) work in one kernel. Only `bincount` without
`length=` has a data-dependent shape: it reads its input eagerly and, while tracing, asks for `length=`.
"""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import numpy as np

from tgfx.dtypes import DType, dtypes, max_value, min_value, promote_types, to_dtype, to_inexact
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce as rd
from tgfx.numpy import _sort
from tgfx.numpy._indexing import take_along_axis
from tgfx.numpy._reduce import Axis
from tgfx.tensor import ArrayLike, Tensor, is_weak, to_tensor

_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")   # jnp.quantile's


def _no_out(out: None, name: str) -> None:
    if out is not None:
        raise NotImplementedError(f"{name}: the 'out' argument is not supported (Tensors are immutable); use the "
                                  f"returned Tensor")


def _fill(x: Tensor, drop: Tensor | None, value: float | int | bool) -> Tensor:
    """x with `value` where `drop` is true (x itself where there is nothing to drop)."""
    return x if drop is None else ew.where(drop, Tensor.full((), value, x.dtype), x)


def _nan_or_masked(x: Tensor, mask: Tensor | None) -> Tensor | None:
    """Where an element is left out: a NaN, or False in `where=`; None if nothing can be."""
    nan = ew.isnan(x) if x.dtype.is_inexact else None
    out = None if mask is None else ew.logical_not(mask)
    if nan is None:
        return out
    return nan if out is None else ew.logical_or(nan, out)


# ---- sums and products ----
def _nan_sum_like(a: ArrayLike, axis: Axis, dtype: DType | str | None, keepdims: bool, initial: ArrayLike | None,
                  where: ArrayLike | None, name: str, product: bool) -> Tensor:
    """sum or prod (and their `where=` and `initial=`) with the NaNs counted as the identity, as JAX's."""
    x = to_tensor(a)
    x = _fill(x, ew.isnan(x) if x.dtype.is_inexact else None, 1 if product else 0)
    return rd._sum_or_prod(x, axis, dtype, keepdims, initial, where, name, product)


def nansum(a: ArrayLike, axis: Axis = None, dtype: DType | str | None = None, out: None = None,
           keepdims: bool = False, initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
    """numpy.nansum: the sum with NaNs counted as zero (all-NaN sums to 0); `where=False` elements are left out too.
    Integer and bool inputs sum as `sum` does (JAX's dtypes).

    >>> tnp.nansum(tnp.asarray([1.0, float("nan"), 2.0])).item()
    3.0
    """
    _no_out(out, "nansum")
    return _nan_sum_like(a, axis, dtype, keepdims, initial, where, "nansum", product=False)


def nanprod(a: ArrayLike, axis: Axis = None, dtype: DType | str | None = None, out: None = None,
            keepdims: bool = False, initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
    """numpy.nanprod: the product with NaNs counted as one (all-NaN gives 1).

    >>> tnp.nanprod(tnp.asarray([2.0, float("nan"), 3.0])).item()
    6.0
    """
    _no_out(out, "nanprod")
    return _nan_sum_like(a, axis, dtype, keepdims, initial, where, "nanprod", product=True)


# ---- extremes ----
def _nan_extreme(a: ArrayLike, axis: Axis, keepdims: bool, initial: ArrayLike | None, where: ArrayLike | None,
                 name: str, largest: bool) -> Tensor:
    """nanmax/nanmin: max/min (and their `where=` and `initial=`) with NaNs replaced by the reduction's identity; an
    all-NaN slice is NaN unless `initial` is given (then it is `initial`), as JAX's."""
    x = to_tensor(a)
    axes = rd._axes(x, axis, name)
    nan = ew.isnan(x) if x.dtype.is_inexact else None
    filled = _fill(x, nan, min_value(x.dtype) if largest else max_value(x.dtype))
    out = rd._extreme(filled, axes, keepdims, initial, where, name, largest)
    if initial is None and nan is not None:
        out = ew.where(rd.all(nan, axis=axes, keepdims=keepdims), Tensor.full((), float("nan"), x.dtype), out)
    return out


def nanmax(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
    """numpy.nanmax: the largest non-NaN element; NaN where a slice is all NaN (unless `initial` is given).

    >>> tnp.nanmax(tnp.asarray([1.0, float("nan"), 3.0])).item()
    3.0
    """
    _no_out(out, "nanmax")
    return _nan_extreme(a, axis, keepdims, initial, where, "nanmax", largest=True)


def nanmin(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
    """numpy.nanmin: the smallest non-NaN element; NaN where a slice is all NaN (unless `initial` is given).

    >>> tnp.nanmin(tnp.asarray([float("nan"), 2.0, 3.0])).item()
    2.0
    """
    _no_out(out, "nanmin")
    return _nan_extreme(a, axis, keepdims, initial, where, "nanmin", largest=False)


def _nan_arg(a: ArrayLike, axis: int | None, keepdims: bool | None, name: str, largest: bool) -> Tensor:
    x = to_tensor(a)
    keepdims = bool(keepdims)
    if not x.dtype.is_float:
        return (rd.argmax if largest else rd.argmin)(x, axis=axis, keepdims=keepdims)
    if axis is None:
        flat = _nan_arg(x.reshape(-1), 0, False, name, largest)
        return flat.reshape((1,) * x.ndim) if keepdims else flat
    ax = rd._axis(x, operator.index(axis), name)
    rd._check_nonempty(x, (ax,), name)
    nan = ew.isnan(x)
    filled = _fill(x, nan, -float("inf") if largest else float("inf"))
    best = (rd.max if largest else rd.min)(filled, axis=ax, keepdims=True)
    # the first non-NaN element equal to the extreme (numpy's answer also where it is +-inf, as in [nan, -inf])
    hit = ew.logical_and(ew.equal(filled, best), ew.logical_not(nan))
    n = x.shape[ax]
    iota = Tensor.arange(n, dtype=dtypes.int32).reshape((n,) + (1,) * (x.ndim - ax - 1))
    first = rd.min(ew.where(hit, iota, n), axis=ax, keepdims=keepdims)
    return ew.where(first == n, -1, first).astype(dtypes.default_int)


def nanargmax(a: ArrayLike, axis: int | None = None, out: None = None, keepdims: bool | None = None) -> Tensor:
    """numpy.nanargmax: the index (the default integer) of the first largest non-NaN element; -1 where a slice is all
    NaN, as JAX's (numpy raises).

    >>> tnp.nanargmax(tnp.asarray([1.0, float("nan"), 3.0])).item()
    2
    """
    _no_out(out, "nanargmax")
    return _nan_arg(a, axis, keepdims, "nanargmax", largest=True)


def nanargmin(a: ArrayLike, axis: int | None = None, out: None = None, keepdims: bool | None = None) -> Tensor:
    """numpy.nanargmin: the index (int32) of the first smallest non-NaN element; -1 where a slice is all NaN.

    >>> tnp.nanargmin(tnp.asarray([float("nan"), 2.0, 1.0])).item()
    2
    """
    _no_out(out, "nanargmin")
    return _nan_arg(a, axis, keepdims, "nanargmin", largest=False)


def ptp(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False) -> Tensor:
    """numpy.ptp: the range, max - min, along `axis` (in the input's dtype: unsigned ranges wrap as numpy's do).

    >>> tnp.ptp(tnp.asarray([[4, 9], [2, 5]]), axis=1).tolist()
    [5, 3]
    """
    _no_out(out, "ptp")
    x = to_tensor(a)
    if x.dtype.is_bool:
        raise TypeError("ptp: the range of a bool array is not defined (max - min is a subtraction); pass "
                        "a.astype(int) or use tnp.any(a) != tnp.all(a)")
    return ew.subtract(rd.max(x, axis=axis, keepdims=keepdims), rd.min(x, axis=axis, keepdims=keepdims))


# ---- mean, variance ----
def _compute_dtype(d: DType) -> DType:
    """Half floats accumulate in float32, as JAX's mean and var (squares of small deviations underflow float16)."""
    return dtypes.float32 if d.is_float and d.itemsize < 4 else d


def nanmean(a: ArrayLike, axis: Axis = None, dtype: DType | str | None = None, out: None = None,
            keepdims: bool = False, where: ArrayLike | None = None) -> Tensor:
    """numpy.nanmean: the mean of the non-NaN elements (those with `where=True`); NaN for an all-NaN slice. Integers
    average as floats (`to_inexact`, as `mean`).

    >>> tnp.nanmean(tnp.asarray([1.0, float("nan"), 3.0])).item()
    2.0
    """
    _no_out(out, "nanmean")
    x = to_tensor(a)
    if x.dtype.is_int or x.dtype.is_bool:
        # no NaN to leave out: `mean`, as JAX's (a dtype= sums in that dtype, wrapping as numpy's does)
        return rd.mean(x, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    axes = rd._axes(x, axis, "nanmean")
    d = to_dtype(dtype) if dtype is not None else to_inexact(x.dtype)
    comp = _compute_dtype(d)
    drop = _nan_or_masked(x, rd.where_mask(where, x, "nanmean"))
    xc = _fill(x.astype(comp), drop, 0)
    if drop is None:
        count: Tensor | int = rd._count(x, axes)
    else:
        count = rd.sum(ew.logical_not(drop), axis=axes, dtype=comp, keepdims=keepdims)
    total = rd.sum(xc, axis=axes, keepdims=keepdims)
    if isinstance(count, int) and count == 0:
        return (total * float("nan")).astype(d)
    return ew.true_divide(total, count).astype(d)


def nanvar(a: ArrayLike, axis: Axis = None, dtype: DType | str | None = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: ArrayLike | None = None, mean: ArrayLike | None = None) -> Tensor:
    """numpy.nanvar: the variance of the non-NaN elements, sum((x - mean)^2) / (count - ddof); NaN where no degrees
    of freedom are left (an all-NaN slice among them), as JAX's. `mean=` gives a precomputed mean (keepdims shape).

    >>> tnp.nanvar(tnp.asarray([1.0, float("nan"), 3.0])).item()
    1.0
    """
    _no_out(out, "nanvar")
    x = to_tensor(a)
    drop = _nan_or_masked(x, rd.where_mask(where, x, "nanvar"))
    ss, dof, d = rd.variance(x, rd._axes(x, axis, "nanvar"), ddof, keepdims, dtype,
                             None if drop is None else ew.logical_not(drop), mean, "nanvar")
    none_left = dof <= 0
    v = rd._divide(ss, ew.where(none_left, Tensor.full((), 1, dof.dtype), dof))
    return ew.where(none_left, float("nan"), v).astype(d)   # (JAX's order: an integer dtype= stays integer)


def nanstd(a: ArrayLike, axis: Axis = None, dtype: DType | str | None = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: ArrayLike | None = None, mean: ArrayLike | None = None) -> Tensor:
    """numpy.nanstd: the square root of `nanvar` (same arguments).

    >>> tnp.nanstd(tnp.asarray([1.0, float("nan"), 3.0])).item()
    1.0
    """
    _no_out(out, "nanstd")
    v = nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where, mean=mean)
    return ew.sqrt(v).astype(v.dtype)


# ---- cumulative ----
def nancumsum(a: ArrayLike, axis: int | None = None, dtype: DType | str | None = None, out: None = None) -> Tensor:
    """numpy.nancumsum: the running sum with NaNs counted as zero.

    >>> tnp.nancumsum(tnp.asarray([1.0, float("nan"), 2.0])).tolist()
    [1.0, 1.0, 3.0]
    """
    _no_out(out, "nancumsum")
    x = to_tensor(a)
    return rd.cumsum(_fill(x, ew.isnan(x) if x.dtype.is_inexact else None, 0), axis=axis, dtype=dtype)


def nancumprod(a: ArrayLike, axis: int | None = None, dtype: DType | str | None = None, out: None = None) -> Tensor:
    """numpy.nancumprod: the running product with NaNs counted as one.

    >>> tnp.nancumprod(tnp.asarray([2.0, float("nan"), 3.0])).tolist()
    [2.0, 2.0, 6.0]
    """
    _no_out(out, "nancumprod")
    x = to_tensor(a)
    return rd.cumprod(_fill(x, ew.isnan(x) if x.dtype.is_inexact else None, 1), axis=axis, dtype=dtype)


# ---- quantiles ----
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


# ---- weighted average, covariance ----
def _promote_inexact(*xs: Tensor) -> list[Tensor]:
    d = to_inexact(promote_types(*(x.dtype for x in xs)))
    return [x.astype(d) for x in xs]


def average(a: ArrayLike, axis: Axis = None, weights: ArrayLike | None = None, returned: bool = False,
            keepdims: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """numpy.average: sum(a * weights) / sum(weights) along `axis` (the mean without weights). `weights` has a's
    shape, or, with `axis`, the shape of the reduced axes (in the order `axis` names them). `returned=True` also
    returns the sum of the weights, broadcast to the average's shape.

    >>> tnp.average(tnp.asarray([1.0, 2.0, 4.0]), weights=tnp.asarray([2.0, 1.0, 1.0])).item()
    2.0
    """
    x = to_tensor(a)
    axes = rd._axes(x, axis, "average")
    if weights is None:
        (x,) = _promote_inexact(x)
        avg = rd.mean(x, axis=axes, keepdims=keepdims)
        wsum = Tensor.full((), rd._count(x, axes), avg.dtype)
    else:
        x, w = _promote_inexact(x, to_tensor(weights))
        if w.shape != x.shape:
            if axis is None:
                raise ValueError(f"average: weights of shape {w.shape} differ from a's shape {x.shape}; pass axis= "
                                 f"to weight along some axes only")
            want = tuple(x.shape[ax] for ax in axes)
            if w.shape != want:
                raise ValueError(f"average: weights must have a's shape {x.shape} or the reduced axes' shape {want} "
                                 f"(axis={axis}), got {w.shape}")
            order = sorted(range(len(axes)), key=lambda i: axes[i])
            w = w.permute(*order).reshape(tuple(s if i in axes else 1 for i, s in enumerate(x.shape)))
        wsum = rd.sum(w.expand(x.shape), axis=axes, keepdims=keepdims)
        avg = ew.true_divide(rd.sum(ew.multiply(x, w), axis=axes, keepdims=keepdims), wsum)
    if returned:
        return avg, wsum.expand(avg.shape)
    return avg


def cov(m: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: ArrayLike | None = None, aweights: ArrayLike | None = None,
        dtype: DType | str | None = None) -> Tensor:
    """numpy.cov: the covariance matrix of the variables in the rows of `m` (columns with `rowvar=False`), and of
    `y`'s too; normalised by N - 1 (N with `bias=True`, N - ddof with `ddof`). `fweights` (integer repeat counts) and
    `aweights` (relative weights) weight the observations; negative weights count as their magnitude, as JAX's.
    One variable gives a 0-d result.

    >>> tnp.cov(tnp.asarray([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    from tgfx.numpy._linalg import dot
    from tgfx.numpy._movement import atleast_2d, concatenate
    xs = [to_tensor(m)] + ([] if y is None else [to_tensor(y)])
    for name, t in zip(("m", "y"), xs, strict=False):
        if t.ndim > 2:
            raise ValueError(f"cov: {name} has more than 2 dimensions (shape {t.shape}); pass one row per variable")
    xs = _promote_inexact(*xs)
    if dtype is not None and not to_dtype(dtype).is_inexact:
        raise ValueError(f"cov: dtype must be a float or complex type, got {to_dtype(dtype).name}")
    mm = xs[0]
    x = atleast_2d(mm)
    if not rowvar and mm.ndim != 1:
        x = x.permute(1, 0)
    if x.shape[0] == 0:
        return Tensor.full((0, 0), 0, x.dtype)
    if y is not None:
        y2 = atleast_2d(xs[1])
        if not rowvar and y2.shape[0] != 1:
            y2 = y2.permute(1, 0)
        if y2.shape[1] != x.shape[1]:
            raise ValueError(f"cov: m and y must have the same number of observations, got {x.shape[1]} and "
                             f"{y2.shape[1]}")
        x = concatenate([x, y2], axis=0)
    p, n = x.shape
    if n == 0:
        return Tensor.full(() if p == 1 else (p, p), float("nan"), x.dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    w = None
    if fweights is not None:
        fw = to_tensor(fweights)
        _check_obs_weights(fw, n, "fweights")
        if not (fw.dtype.is_int or fw.dtype.is_bool):
            raise TypeError(f"cov: fweights must be integers (repeat counts), got {fw.dtype.name}")
        w = ew.absolute(fw)
    aw = None
    if aweights is not None:
        aw = to_tensor(aweights)
        _check_obs_weights(aw, n, "aweights")
        aw = ew.absolute(aw)
        w = aw if w is None else ew.multiply(w, aw)
    if dtype is not None:
        x = x.astype(dtype)
        w = None if w is None else w.astype(dtype)
    if w is None:
        avg = rd.mean(x, axis=1)
        f: Tensor | int = n - ddof
    else:
        x, w = _promote_inexact(x, w)
        avg, wsum = average(x, axis=1, weights=w, returned=True)
        wsum = wsum[0]
        if ddof == 0:
            f = wsum
        elif aw is None:
            f = wsum - ddof
        else:
            f = wsum - ddof * rd.sum(ew.multiply(w, aw.astype(w.dtype))) / wsum
    x = x - avg.reshape(p, 1)
    xw = x if w is None else x * w.reshape(1, n)
    if xw.dtype.is_complex:
        from tgfx.numpy._standard import conj
        xw = conj(xw)
    c = ew.true_divide(dot(x, xw.permute(1, 0)), f)
    return c.reshape(()) if p == 1 else c


def _check_obs_weights(w: Tensor, n: int, name: str) -> None:
    if w.ndim != 1:
        raise ValueError(f"cov: {name} must be 1-d (one weight per observation), got shape {w.shape}")
    if w.shape[0] != n:
        raise ValueError(f"cov: {name} has {w.shape[0]} entries for {n} observations")


def corrcoef(x: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True,
             dtype: DType | str | None = None) -> Tensor:
    """numpy.corrcoef: Pearson correlation coefficients, cov(x, y) / (std_i std_j), clipped to [-1, 1].

    >>> tnp.corrcoef(tnp.asarray([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:  # one variable: 1, or NaN for a constant one (0 / 0), as numpy
        return ew.true_divide(c, c)
    p = c.shape[0]
    from tgfx.numpy._linalg import diagonal
    std = ew.sqrt(diagonal(c))
    c = ew.true_divide(ew.true_divide(c, std.reshape(p, 1)), std.reshape(1, p))
    if c.dtype.is_complex:
        raise NotImplementedError("corrcoef: complex inputs are not supported")
    return ew.clip(c, -1, 1).astype(c.dtype)


# ---- counting into bins ----
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
