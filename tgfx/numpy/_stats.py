"""Statistics as jax.numpy has them: NaN-ignoring reductions, weighted averages and covariance; order statistics
(quantiles, medians: `_quantile.py`) and counting into bins (histogram, bincount, digitize: `_histogram.py`) are
re-exported from their own modules at the end, and use the helpers here.

Everything is a composition of tnp ops with static shapes, so it works under `jit` and `vmap` and differentiates where
JAX's does.
"""
from __future__ import annotations

import operator

from tgfx.dtypes import DType, dtypes, max_value, min_value, promote_types, to_dtype, to_inexact
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce as rd
from tgfx.numpy._reduce import Axis
from tgfx.tensor import ArrayLike, Tensor, to_tensor


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


# order statistics and counting into bins, in modules of their own (they use the helpers above)
from tgfx.numpy._histogram import bincount as bincount  # noqa: E402
from tgfx.numpy._histogram import digitize as digitize  # noqa: E402
from tgfx.numpy._histogram import histogram as histogram  # noqa: E402
from tgfx.numpy._histogram import histogram_bin_edges as histogram_bin_edges  # noqa: E402
from tgfx.numpy._quantile import median as median  # noqa: E402
from tgfx.numpy._quantile import nanmedian as nanmedian  # noqa: E402
from tgfx.numpy._quantile import nanpercentile as nanpercentile  # noqa: E402
from tgfx.numpy._quantile import nanquantile as nanquantile  # noqa: E402
from tgfx.numpy._quantile import percentile as percentile  # noqa: E402
from tgfx.numpy._quantile import quantile as quantile  # noqa: E402
