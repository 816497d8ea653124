"""Functions whose result shape depends on the data, as JAX has them: `nonzero`, `unique_*` (and boolean-mask
indexing in `_indexing`) read their input to the host when it is concrete; while tracing (`jit`, `vmap`, loop
bodies) the shape must be static, so they take `size=` (and `fill_value=`) and run on the device with that many
result slots, or raise an error naming `size=`. `searchsorted` has a static shape and always runs on the device.

The device forms count, as the sort does, with one-hot compare-and-sum kernels: O(n * size) work, no data-dependent
control flow.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tgfx.dtypes import dtypes
from tgfx.function import function
from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _reduce as rd
from tgfx.numpy import _sort
from tgfx.tensor import ArrayLike, Tensor, prod, promote, to_tensor


class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


_SIZE_HINT = ("Pass size=N (and fill_value=) for a result of N slots, as in JAX, or compute it outside the traced "
              "function")


def host_value(x: Tensor, fn: str, what: str, hint: str = _SIZE_HINT, error: type | None = None) -> np.ndarray:
    """x's value for a function whose result shape depends on it; while tracing, an error (of class `error`, a
    ConcretizationError's) that says what to do instead (pass size=)."""
    from tgfx.function import ConcretizationError
    try:
        return x.numpy()
    except ConcretizationError as e:
        raise (error or ConcretizationError)(
            f"{fn}: the result's shape depends on the values of {what} ({x.dtype.name}{list(x.shape)}), which are not "
            f"known while tracing (jit, vmap, a loop body). {hint}.\n{e}") from None


def _index_dtype() -> Any:
    return dtypes.default_int


def _iota(n: int) -> Tensor:
    return Tensor.arange(n, dtype=dtypes.int32)


def _first_slots(hit: Tensor, slot: Tensor, size: int) -> Tensor:
    """For k < size, the position i with hit[i] and slot[i] == k (0 if none): a one-hot sum over i."""
    n = hit.shape[0]
    k = _iota(size).reshape(size, 1)
    onehot = ew.logical_and(hit.reshape(1, n), slot.reshape(1, n) == k)
    return onehot.where(_iota(n).reshape(1, n), 0)._reduce(Ops.ADD, 1, False)


# ---- nonzero ----
def nonzero(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | tuple | None = None) -> tuple[
        Tensor, ...]:
    """The indices of the non-zero elements, one index Tensor per axis (numpy.nonzero, in C order).

    Without `size` the value is read (eagerly only: inside `jit` that is an error naming `size`). With `size=N`
    the result has N entries, computed on the device: the first N non-zero positions, the rest `fill_value` (0 by
    default; a tuple gives one per axis), as jnp.nonzero.

    >>> tnp.nonzero(tnp.asarray([0, 3, 0, 5]))[0].tolist()
    [1, 3]
    """
    x = to_tensor(a)
    if x.ndim == 0:
        raise ValueError("nonzero: a 0-d Tensor has no axes to index; use tnp.atleast_1d(x) first")
    if size is None:
        host = host_value(x, "nonzero", "its argument")
        return tuple(Tensor(p.astype(_index_dtype().np), dtype=_index_dtype(), device=x.device)
                     for p in np.nonzero(host))
    size = int(size)
    if size < 0:
        raise ValueError(f"nonzero: size must be non-negative, got {size}")
    mask = ew._bool(x).reshape(-1)
    pos = rd.cumsum(mask.astype(dtypes.int32)) - 1 if mask.shape[0] else mask.astype(dtypes.int32)
    flat = _first_slots(mask, pos, size) if mask.shape[0] else Tensor.full((size,), 0, dtypes.int32)
    valid = _iota(size) < rd.sum(mask.astype(dtypes.int32))
    fills = fill_value if isinstance(fill_value, tuple) else (0 if fill_value is None else fill_value,) * x.ndim
    if len(fills) != x.ndim:
        raise ValueError(f"nonzero: fill_value has {len(fills)} entries, one per axis of the shape {x.shape} is "
                         f"needed")
    out = []
    for i, (n, fill) in enumerate(zip(x.shape, fills, strict=True)):
        stride = max(prod(x.shape[i + 1:]), 1)   # (with no elements, every entry is a fill)
        coord = (flat // stride) % n if n else flat
        out.append(valid.where(coord, fill).astype(_index_dtype()))
    return tuple(out)


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Tensor:
    """The indices of the non-zero elements as rows (numpy.argwhere): `nonzero`'s Tensors stacked on axis 1."""
    from tgfx.numpy._movement import stack
    x = to_tensor(a)
    if x.ndim == 0:
        raise ValueError("argwhere: a 0-d Tensor has no axes to index; use tnp.atleast_1d(x) first")
    return stack(list(nonzero(x, size=size, fill_value=fill_value)), axis=1)


def flatnonzero(a: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Tensor:
    """The indices of the non-zero elements of the flattened `a` (numpy.flatnonzero)."""
    return nonzero(to_tensor(a).reshape(-1), size=size, fill_value=fill_value)[0]


# ---- unique ----
def _unique_host(x: Tensor, fn: str) -> UniqueAllResult:
    host = host_value(x, fn, "its argument").reshape(-1)
    values, indices, inverse, counts = np.unique_all(host)  # NaNs are distinct, as in the standard and JAX
    idx = _index_dtype()

    def index(v: np.ndarray) -> Tensor:
        return Tensor(np.asarray(v).astype(idx.np), dtype=idx, device=x.device)

    return UniqueAllResult(Tensor(values, dtype=x.dtype, device=x.device), index(indices),
                           index(inverse.reshape(x.shape)), index(counts))


def _unique_device(x: Tensor, size: int, fill_value: ArrayLike | None) -> UniqueAllResult:
    """unique_all with `size` result slots, on the device: sort, mark where a new value starts, number the runs."""
    flat = x.reshape(-1)
    n = flat.shape[0]
    if n == 0:
        raise ValueError(f"unique: size={size} slots of an empty Tensor have no value to fill; pass a non-empty one")
    perm = _sort.argsort(flat)
    srt = flat[perm]
    starts = ew.logical_or(_iota(n) == 0, ew.not_equal(srt, _shift(srt)))  # NaN != NaN: each its own
    run = rd.cumsum(starts.astype(dtypes.int32)) - 1  # the slot of each sorted element
    first = _first_slots(starts, run, size)           # where slot k's run starts in the sorted order
    valid = _iota(size) < rd.sum(starts.astype(dtypes.int32))
    fill = srt[0] if fill_value is None else fill_value  # JAX: the smallest value
    values = valid.where(srt[first], fill).astype(x.dtype)
    idx = _index_dtype()
    indices = valid.where(perm[first], perm[0]).astype(idx)
    # (a scatter-add of ones: a loop over the elements, where comparing every slot with every element was size x n)
    counts = Tensor.full((size,), 0, dtypes.int32).at[run].add(1).astype(idx)
    inverse = Tensor.full((n,), 0, dtypes.int32).at[perm].set(run).astype(idx).reshape(x.shape)
    return UniqueAllResult(values, indices, inverse, counts)


# eagerly, one traced body per signature: the sort, its runs and slots are one schedule's replay. As an eager graph
# it was cut every 32 ops, and each later piece sorted again (a value computed from a function's result is no
# sibling): four sorts for one unique (1e5 ints: 99 ms a call)
_unique_device_traced = function(_unique_device, cache=True)


def _shift(srt: Tensor) -> Tensor:
    """srt moved one place later; its first slot repeats the first value (slot 0 is a start anyway)."""
    from tgfx.numpy._movement import concatenate
    return concatenate([srt[:1], srt[:-1]])


def _unique(x: ArrayLike, size: int | None, fill_value: ArrayLike | None, fn: str) -> UniqueAllResult:
    t = to_tensor(x)
    if size is None:
        return _unique_host(t, fn)
    if int(size) < 1:
        raise ValueError(f"{fn}: size must be positive, got {size}")
    return _unique_device_traced(t, int(size), fill_value)


def unique_all(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> UniqueAllResult:
    """The sorted unique values of `x` with the index of each one's first occurrence, the index into `values` of
    every element (`inverse_indices`, x's shape) and each value's count. NaNs are all distinct, as in JAX and the
    standard. Without `size` the values are read (eagerly only); with `size=N`, N slots computed on the device,
    the rest `fill_value` (the smallest value by default) with count 0, as jnp.unique_all.

    >>> tnp.unique_all(tnp.asarray([3, 1, 1])).counts.tolist()
    [2, 1]
    """
    return _unique(x, size, fill_value, "unique_all")


def unique_counts(x: ArrayLike, /, *, size: int | None = None,
                  fill_value: ArrayLike | None = None) -> UniqueCountsResult:
    """The sorted unique values of `x` and their counts (see `unique_all` for `size`)."""
    r = _unique(x, size, fill_value, "unique_counts")
    return UniqueCountsResult(r.values, r.counts)


def unique_inverse(x: ArrayLike, /, *, size: int | None = None,
                   fill_value: ArrayLike | None = None) -> UniqueInverseResult:
    """The sorted unique values of `x` and, for each element, the index of its value (see `unique_all`)."""
    r = _unique(x, size, fill_value, "unique_inverse")
    return UniqueInverseResult(r.values, r.inverse_indices)


def unique_values(x: ArrayLike, /, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Tensor:
    """The sorted unique values of `x`, flattened (see `unique_all` for `size`)."""
    return _unique(x, size, fill_value, "unique_values").values


# ---- searchsorted ----
def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike | None = None, *,
                 method: str = "scan") -> Tensor:
    """Where each `v` would be inserted into the sorted 1-d `a` to keep it sorted (numpy.searchsorted; int32, as JAX's
    in either x64 mode): the number of elements of `a` before it, those less than it (`side="left"`) or not greater
    (`"right"`), in the order that puts NaNs last. `sorter` (argsort of `a`) sorts an unsorted `a` first. A short
    `a` is one kernel of len(a) * v.size compares; from SEARCH_BISECT elements on, a binary search as numpy's:
    log2(len(a)) halvings, each a load of `a` at every query's midpoint (1e5 queries into 1e4: 36 -> under 1 ms).
    `method` is JAX's choice of algorithm ("scan", "scan_unrolled", "sort" or "compare_all"): each gives the same
    answer, and tgfx chooses by len(a) as above whichever is named.

    >>> tnp.searchsorted(tnp.asarray([1, 2, 2, 3]), 2).item()
    1
    """
    s = to_tensor(a)
    if s.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-d, got shape {s.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in SEARCH_METHODS:
        raise ValueError(f"searchsorted: method must be one of {', '.join(map(repr, SEARCH_METHODS))} (as JAX's), got "
                         f"{method!r}")
    if sorter is not None:
        s = s[to_tensor(sorter)]
    q = to_tensor(v)
    s, q = promote(s, q, "searchsorted")
    n = s.shape[0]
    out = dtypes.int32 if n <= np.iinfo(np.int32).max else dtypes.int64   # JAX's, in either x64 mode
    if n >= SEARCH_BISECT:
        return _bisect_traced(s, q, side).astype(out)
    col = s.reshape((1,) * q.ndim + (n,))
    row = q.reshape(q.shape + (1,))
    before = _sort._less(col, row) if side == "left" else ew.logical_not(_sort._less(row, col))
    return rd.sum(before.astype(dtypes.int32), axis=-1, dtype=out)


SEARCH_BISECT = 64   # a sorted array this long is searched by halving (log2 n loads a query), not compared whole
SEARCH_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")   # jnp.searchsorted's; all give one answer


def _bisect(s: Tensor, q: Tensor, side: str) -> Tensor:
    """For each query, the first position of the sorted `s` whose element is not before it (`side="left"`: a[i] <
    q goes right; "right": a[i] <= q), by halving [lo, hi) from [0, n): the steps are unrolled, static, so the
    whole search is elementwise work on the queries with a load of `s` a step."""
    from tgfx.numpy._indexing import take
    n = s.shape[0]
    lo = Tensor.full(q.shape, 0, dtypes.int32)
    hi = Tensor.full(q.shape, n, dtypes.int32)
    for _ in range(n.bit_length()):
        mid = (lo + hi) // 2
        at = take(s, mid, mode="clip")
        right = _sort._less(at, q) if side == "left" else ew.logical_not(_sort._less(q, at))
        active = lo < hi
        lo = ew.logical_and(active, right).where(mid + 1, lo)
        hi = ew.logical_and(active, ew.logical_not(right)).where(mid, hi)
    return lo


# eagerly, the search's traced body is kept per signature: a call replays its schedule (the unrolled halvings as an
# eager graph: 12.6 ms a call for 1e5 queries into 1e4, against 1.4 under jit)
_bisect_traced = function(_bisect, cache=True)
