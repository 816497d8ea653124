"""Set operations (`unique`, the `*1d` functions), sorting by several keys and partial sorts, putting and applying
functions along axes, and `vectorize`, as jax.numpy has them.

Where numpy's result shape depends on the data (`unique`, the set operations), the device form computes `size`
result slots (JAX's `size=`/`fill_value=`); without `size` the result is computed with a static upper bound of
slots and the number of valid ones read to the host, eagerly only (as `_data_dependent.py`). Set operations compare
every element with every other: O(n * m) work, no sort network beyond `argsort`'s.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from tgfx.dtypes import dtypes
from tgfx.numpy import _data_dependent as dd
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _movement as mv
from tgfx.numpy import _reduce as rd
from tgfx.numpy import _sort
from tgfx.numpy._poly import _along, _promote
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, normalize_axis, to_tensor


# ---- unique and set operations ----
def _unique_flat(x: Tensor, size: int | None, fill_value: ArrayLike | None, equal_nan: bool,
                 fn: str) -> tuple[dd.UniqueAllResult, Tensor]:
    """unique_all of the flat x, with all NaNs one value when `equal_nan` (unique_all keeps each NaN apart, as the
    standard), and the number of valid slots (an int32 scalar)."""
    if x.shape[0] == 0 and size is not None:
        if fill_value is None:
            raise ValueError(f"{fn}: an empty input with size={size} has no value to fill the slots with; pass "
                             f"fill_value=")
        zeros = Tensor.full((int(size),), 0, dd._index_dtype())
        values = Tensor.full((int(size),), 0, x.dtype) + to_tensor(fill_value).astype(x.dtype)
        return dd.UniqueAllResult(values, zeros, Tensor.full(x.shape, 0, dd._index_dtype()), zeros), \
            Tensor.full((), 0, dtypes.int32)
    merge = equal_nan and x.dtype.is_float and x.shape[0] > 0
    r = dd._unique(x, size, None if merge else fill_value, fn)
    valid = r.counts > 0
    count = rd.sum(valid.astype(dtypes.int32))
    if not merge:
        return r, count
    slot = dd._iota(r.values.shape[0])
    nan = ew.logical_and(ew.isnan(r.values), valid)
    k = rd.sum(ew.logical_and(valid, ew.logical_not(nan)).astype(dtypes.int32))   # the non-NaN values come first
    distinct = rd.max(ew.where(ew.isnan(x), -1, r.inverse_indices)) + 1              # in all, past the slots too
    count = k + rd.any(nan).astype(dtypes.int32)                                   # and then one NaN, if any
    ok, below = slot < count, slot < k
    fill = r.values[0] if fill_value is None else to_tensor(fill_value).astype(x.dtype)   # JAX: the smallest value
    nan_count = rd.sum(ew.isnan(x).astype(r.counts.dtype))
    counts = below.where(r.counts, ok.where(nan_count, 0)).astype(r.counts.dtype)
    out = dd.UniqueAllResult(ok.where(r.values, fill).astype(x.dtype), ok.where(r.indices, r.indices[0]),
                             ew.minimum(r.inverse_indices, distinct).astype(r.inverse_indices.dtype), counts)
    if size is None:   # eager: the exact number of unique values
        n = int(count.item())
        out = dd.UniqueAllResult(out.values[:n], out.indices[:n], out.inverse_indices, out.counts[:n])
    return out, count


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None,
           fill_value: ArrayLike | None = None, sorted: bool = True) -> Tensor | tuple[Tensor, ...]:  # noqa: A002
    """The sorted unique elements of the flattened array (numpy.unique), optionally with the index of each one's
    first occurrence, the index of every element's value (`ar`'s shape) and the counts.

    NaNs count as one value unless `equal_nan=False`. Without `size` the values are read (eagerly only); with
    `size=N` there are N slots computed on the device, those past the unique values holding `fill_value` (the
    smallest value by default) with count 0, as jnp.unique. With `axis`, the unique slices along it (rows for
    axis=0), sorted lexicographically, the inverse 1-d. `sorted` is accepted for JAX compatibility.

    >>> tnp.unique(tnp.asarray([3, 1, 3, 2])).tolist()
    [1, 2, 3]
    >>> tnp.unique(tnp.asarray([3, 1, 3]), return_counts=True, size=3, fill_value=0)[1].tolist()
    [1, 2, 0]
    """
    x = to_tensor(ar)
    if axis is not None and x.ndim != 1:
        r = _unique_slices(x, normalize_axis(axis, x.ndim, "unique"), None if size is None else int(size),
                           fill_value)
    else:
        if axis is not None:
            normalize_axis(axis, 1, "unique")
        r, _ = _unique_flat(x.reshape(-1), None if size is None else int(size), fill_value, equal_nan, "unique")
        r = dd.UniqueAllResult(r.values, r.indices, r.inverse_indices.reshape(x.shape), r.counts)
    out = (r.values,) + ((r.indices,) if return_index else ()) + \
        ((r.inverse_indices,) if return_inverse else ()) + ((r.counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def _unique_slices(x: Tensor, axis: int, size: int | None, fill_value: ArrayLike | None) -> dd.UniqueAllResult:
    """unique's result along `axis`: the distinct slices x[..., i, ...] in lexicographic order, the index of each
    one's first occurrence, every slice's (a 1-d inverse, as jnp.unique's) and the counts. Each slice gets the
    lexicographic rank of the first slice equal to it, so the slices' unique values are the unique ranks."""
    moved = mv.moveaxis(x, axis, 0)
    n = moved.shape[0]
    rows = moved.reshape(n, int(np.prod(moved.shape[1:])))
    if n == 0 or rows.shape[1] == 0:
        k = min(n, 1) if size is None else size
        empty = Tensor.full((k,), 0, dd._index_dtype())
        values = Tensor.full((k, *moved.shape[1:]), 0, x.dtype)
        return dd.UniqueAllResult(mv.moveaxis(values, 0, axis), empty, Tensor.full((n,), 0, dd._index_dtype()),
                                  Tensor.full((k,), n, dd._index_dtype()))
    order = lexsort([rows[:, j] for j in reversed(range(rows.shape[1]))])
    rank = _sort.argsort(order)
    first = rd.argmax(rd.all(ew.equal(rows.reshape(n, 1, -1), rows.reshape(1, n, -1)), axis=2), axis=1)
    r, count = _unique_flat(rank[first], size, None, False, "unique")
    values = rows[r.indices]
    if fill_value is not None:
        values = (dd._iota(values.shape[0]) < count).reshape(-1, 1).where(values, to_tensor(fill_value))
    values = values.astype(x.dtype).reshape(values.shape[0], *moved.shape[1:])
    return dd.UniqueAllResult(mv.moveaxis(values, 0, axis), r.indices, r.inverse_indices, r.counts)


def _unique_slots(x: Tensor, assume_unique: bool, fn: str, sort: bool = True) -> tuple[Tensor, Tensor]:
    """x's sorted unique values in x.size slots and which slots hold one (the rest repeat the smallest value).
    With `assume_unique`, x itself (sorted when `sort`)."""
    n = x.shape[0]
    if assume_unique or n == 0:
        return _sort.sort(x) if sort and n > 1 else x, Tensor.full((n,), True, dtypes.bool)
    r, count = _unique_flat(x, n, None, True, fn)
    return r.values, dd._iota(n) < count


def _isin(a: Tensor, b: Tensor) -> Tensor:
    """For each element of 1-d a, whether it equals an element of 1-d b (NaN equals nothing)."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return Tensor.full(a.shape, False, dtypes.bool)
    return rd.any(ew.equal(a.reshape(-1, 1), b.reshape(1, -1)), axis=1)


def _compact(values: Tensor, mask: Tensor, size: int | None, fn: str) -> tuple[Tensor, Tensor, Tensor]:
    """The values where mask holds, in order, in `size` slots (the exact number when None: eagerly only), which
    slots are valid, and the number of valid ones."""
    count = rd.sum(mask.astype(dtypes.int32))
    if size is None:
        from tgfx.function import ConcretizationError
        try:
            size = int(count.numpy())
        except ConcretizationError as e:
            raise ConcretizationError(f"{fn}: the result's length depends on the values of the arguments, which are "
                                      f"not known while tracing (jit, vmap, a loop body). {dd._SIZE_HINT}.\n{e}") \
                from None
    size = int(size)
    if size < 0:
        raise ValueError(f"{fn}: size must be non-negative, got {size}")
    valid = dd._iota(size) < count
    if values.shape[0] == 0:
        return Tensor.full((size,), 0, values.dtype), valid, count
    return values[dd.nonzero(mask, size=size)[0]], valid, count


def _jax_fill(vals: Tensor, valid: Tensor) -> Tensor:
    """JAX's default fill of intersect1d and setxor1d: the smallest result (NaN if one is NaN), 0 if none."""
    if vals.shape[0] == 0:
        return Tensor.full((), 0, vals.dtype)
    return rd.min(valid.where(vals, rd.max(valid.where(vals, 0)))).astype(vals.dtype)


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None,
              fill_value: ArrayLike | None = None) -> Tensor:
    """The unique values of ar1 that are not in ar2, sorted (numpy.setdiff1d); with `assume_unique`, ar1's
    elements not in ar2 in their order. `size=N`: N slots, the rest `fill_value` (0 by default), as JAX; without
    it the values are read (eagerly only).

    >>> tnp.setdiff1d(tnp.asarray([5, 1, 3, 1]), tnp.asarray([3, 4])).tolist()
    [1, 5]
    """
    x1, x2 = to_tensor(ar1).reshape(-1), to_tensor(ar2).reshape(-1)
    fill = to_tensor(0 if fill_value is None else fill_value).astype(x1.dtype)
    if x1.shape[0] == 0:
        return Tensor.full((0 if size is None else int(size),), 0, x1.dtype) + fill
    u1, ok = _unique_slots(x1, assume_unique, "setdiff1d", sort=False)
    vals, valid, _ = _compact(u1, ew.logical_and(ok, ew.logical_not(_isin(u1, x2))), size, "setdiff1d")
    return valid.where(vals, fill).astype(x1.dtype)


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Tensor:
    """The sorted unique values in either array (numpy.union1d); `size` and `fill_value` as `unique`.

    >>> tnp.union1d(tnp.asarray([3, 1]), tnp.asarray([2, 1])).tolist()
    [1, 2, 3]
    """
    both = mv.concatenate([to_tensor(ar1).reshape(-1), to_tensor(ar2).reshape(-1)])
    return _unique_flat(both, None if size is None else int(size), fill_value, True, "union1d")[0].values


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None,
             fill_value: ArrayLike | None = None) -> Tensor:
    """The sorted values in exactly one of the arrays (numpy.setxor1d). `size=N`: N slots, the rest
    `fill_value` (by default the smallest result, as JAX); without it the values are read (eagerly only).

    >>> tnp.setxor1d(tnp.asarray([1, 2, 3]), tnp.asarray([2, 3, 4])).tolist()
    [1, 4]
    """
    x1, x2 = _promote("setxor1d", ar1, ar2)
    x1, x2 = x1.reshape(-1), x2.reshape(-1)
    u1, ok1 = _unique_slots(x1, assume_unique, "setxor1d")
    u2, ok2 = _unique_slots(x2, assume_unique, "setxor1d")
    cand = mv.concatenate([u1, u2])
    keep = mv.concatenate([ew.logical_and(ok1, ew.logical_not(_isin(u1, x2))),
                           ew.logical_and(ok2, ew.logical_not(_isin(u2, x1)))])
    if cand.shape[0] > 1:   # the kept values of both, merged in order
        order = lexsort([cand, ew.logical_not(keep)])
        cand, keep = cand[order], keep[order]
    vals, valid, _ = _compact(cand, keep, size, "setxor1d")
    fill = _jax_fill(vals, valid) if fill_value is None else fill_value
    return valid.where(vals, fill).astype(cand.dtype)


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: ArrayLike | None = None) -> Tensor | tuple[Tensor, ...]:
    """The sorted unique values in both arrays (numpy.intersect1d); with `return_indices`, also the index of each
    one's first occurrence in ar1 and in ar2. `size=N`: N slots, the rest `fill_value` (by default the smallest
    result, as JAX) with indices len(ar1) and len(ar2); without it the values are read (eagerly only).

    >>> tnp.intersect1d(tnp.asarray([3, 1, 2]), tnp.asarray([2, 5, 3]), return_indices=True)[1].tolist()
    [2, 0]
    """
    x1, x2 = _promote("intersect1d", ar1, ar2)
    x1, x2 = x1.reshape(-1), x2.reshape(-1)
    u1, ok = _unique_slots(x1, assume_unique, "intersect1d")
    vals, valid, _ = _compact(u1, ew.logical_and(ok, _isin(u1, x2)), size, "intersect1d")
    fill = _jax_fill(vals, valid) if fill_value is None else fill_value
    out = valid.where(vals, fill).astype(x1.dtype)
    if not return_indices:
        return out
    idx = dd._index_dtype()

    def first(x: Tensor) -> Tensor:
        if x.shape[0] == 0 or vals.shape[0] == 0:
            return Tensor.full(vals.shape, x.shape[0], idx)
        hit = ew.equal(x.reshape(1, -1), vals.reshape(-1, 1)).astype(dtypes.int32)
        return valid.where(rd.argmax(hit, axis=1), x.shape[0]).astype(idx)

    return out, first(x1), first(x2)


# ---- sorting by several keys, partial sorts ----
def lexsort(keys: ArrayLike | Sequence[ArrayLike], axis: int = -1) -> Tensor:
    """The indices that sort by several keys along `axis` (numpy.lexsort): the LAST key is the primary one, ties
    are broken by the one before, and so on; stable. One stable argsort per key, NaNs last.

    >>> tnp.lexsort([tnp.asarray([1, 0, 2]), tnp.asarray([0, 1, 0])]).tolist()    # by the 2nd, then the 1st
    [0, 2, 1]
    """
    from tgfx.numpy._indexing import take_along_axis
    ks = [keys[i] for i in range(keys.shape[0])] if isinstance(keys, Tensor) else [to_tensor(k) for k in keys]
    if not ks:
        raise TypeError("lexsort: needs a sequence of at least one key")
    if len({k.shape for k in ks}) > 1:
        raise ValueError(f"lexsort: all keys must have the same shape, got {[k.shape for k in ks]}")
    if ks[0].ndim == 0:   # (on the keys' device: a result of theirs)
        return Tensor.full((), 0, dtypes.default_int, device=ks[0].uop.device if isinstance(ks[0].uop.device, str)
                           else None)
    axis = normalize_axis(axis, ks[0].ndim, "lexsort")
    order = _sort.argsort(ks[0], axis=axis)
    for k in ks[1:]:   # a stable sort by a more significant key keeps the order of the less significant ones
        order = take_along_axis(order, _sort.argsort(take_along_axis(k, order, axis, mode="clip"), axis=axis), axis,
                                mode="clip")
    return order.astype(dtypes.default_int)


def _partition_args(a: ArrayLike, kth: int, axis: int, fn: str) -> tuple[Tensor, int, int]:
    x = to_tensor(a)
    if x.dtype.is_complex:
        raise NotImplementedError(f"{fn}: complex dtypes are not supported, as in jnp.{fn}")
    axis = normalize_axis(axis, x.ndim, fn) if x.ndim else -1
    if x.ndim == 0 or not -x.shape[axis] <= int(kth) < x.shape[axis]:
        raise ValueError(f"{fn}: kth={kth} is out of bounds for axis {axis} of the shape {x.shape}")
    return x, int(kth) % x.shape[axis], axis


def partition(a: ArrayLike, kth: int, axis: int = -1) -> Tensor:
    """`a` with its elements along `axis` arranged so that the kth is where a sort would put it, the smaller ones
    before it and the larger after (numpy.partition). As jnp.partition: the first kth + 1 come out sorted
    ascending and the rest descending (NaNs count as the largest). Costs a full sort.

    >>> tnp.partition(tnp.asarray([5, 1, 4, 2, 3]), 1).tolist()
    [1, 2, 5, 4, 3]
    """
    x, k, axis = _partition_args(a, kth, axis, "partition")
    s = _sort.sort(x, axis=axis)
    return mv.concatenate([_along(s, axis, 0, k + 1), _along(s, axis, k + 1, None).flip(axis)], axis=axis)


def argpartition(a: ArrayLike, kth: int, axis: int = -1) -> Tensor:
    """The indices that partition `a` along `axis` (numpy.argpartition). As jnp.argpartition: the indices (int32, its
    top_k's, in either x64 mode) of the kth + 1 smallest elements in sorted order, then the others' in increasing
    index order. Costs a full sort.

    >>> tnp.argpartition(tnp.asarray([5, 1, 4, 2, 3]), 1).tolist()
    [1, 3, 0, 2, 4]
    """
    x, k, axis = _partition_args(a, kth, axis, "argpartition")
    order = _sort.argsort(x, axis=axis).astype(dtypes.int32)
    rest = _along(order, axis, k + 1, None)
    return mv.concatenate([_along(order, axis, 0, k + 1), _sort.sort(rest, axis=axis)], axis=axis)


# ---- putting and applying along axes ----
def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None, inplace: bool = True, *,
                   mode: str | None = None) -> Tensor:
    """A copy of arr with `values` put at `indices` along `axis` (numpy.put_along_axis, functional): the inverse of
    `take_along_axis`. Tensors are immutable, so, as in JAX, `inplace=False` must be passed. `mode` as `.at[].set`.

    >>> tnp.put_along_axis(tnp.zeros((2, 2)), tnp.asarray([[1], [0]]), 7.0, axis=1, inplace=False).tolist()
    [[0.0, 7.0], [7.0, 0.0]]
    """
    if inplace:
        raise ValueError("put_along_axis: Tensors are immutable and cannot be modified in place; pass inplace=False "
                         "to get the updated copy, as in JAX")
    x, idx = to_tensor(arr), to_tensor(indices)
    shape = x.shape
    if axis is None:
        x, axis = x.reshape(-1), 0
    if idx.ndim != x.ndim:
        raise ValueError(f"put_along_axis: indices and arr must have the same number of dimensions, got shapes "
                         f"{idx.shape} and {x.shape}")
    axis = normalize_axis(axis, x.ndim, "put_along_axis")
    v = to_tensor(values)
    try:
        v = mv.broadcast_to(v, idx.shape)
    except ValueError:
        raise ValueError(f"put_along_axis: values of shape {v.shape} do not broadcast to the indices' shape "
                         f"{idx.shape}") from None
    index = tuple(idx if a == axis else dd._iota(n).reshape(tuple(n if b == a else 1 for b in range(x.ndim)))
                  for a, n in enumerate(x.shape))
    return x.at[index].set(v, mode=mode).reshape(shape)


def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: ArrayLike, *args: Any, **kwargs: Any) -> Tensor:
    """func1d applied to every 1-d slice of arr along `axis` (numpy.apply_along_axis), by `tg.vmap` over the other
    axes: one batched trace, no Python loop. The result's axes from func1d replace `axis`.

    >>> tnp.apply_along_axis(lambda v: v[0] + v[-1], 1, tnp.asarray([[1, 2, 3], [4, 5, 6]])).tolist()
    [4, 10]
    """
    from tgfx.transforms.vmap import vmap
    x = to_tensor(arr)
    axis = normalize_axis(axis, x.ndim, "apply_along_axis")

    def func(a: Tensor) -> Tensor:
        return func1d(a, *args, **kwargs)

    for i in range(1, x.ndim - axis):   # the axes after `axis`, innermost first, go after func1d's result axes
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(x)


def apply_over_axes(func: Callable[[Tensor, int], Tensor], a: ArrayLike, axes: Sequence[int]) -> Tensor:
    """func(a, axis) applied for each axis in turn, each result fed to the next (numpy.apply_over_axes); a result
    with one axis fewer gets it back as length 1, so the rank is kept.

    >>> tnp.apply_over_axes(tnp.sum, tnp.ones((2, 3, 4)), [0, 2]).shape
    (1, 3, 1)
    """
    x = to_tensor(a)
    for axis in axes:
        b = to_tensor(func(x, axis))
        if b.ndim == x.ndim - 1:
            b = mv.expand_dims(b, axis)
        elif b.ndim != x.ndim:
            raise ValueError(f"apply_over_axes: func returned shape {b.shape} for axis {axis} of shape {x.shape}; "
                             f"it must keep the rank or drop that one axis")
        x = b
    return x


# ---- vectorize ----
_ARG = r"\((?:\w+(?:,\w+)*)?\)"   # one argument's core dimensions: "(m,n)", "()"
_SIGNATURE = rf"^{_ARG}(?:,{_ARG})*->{_ARG}(?:,{_ARG})*$"


def _parse_signature(signature: str) -> list[list[tuple[str, ...]]]:
    """'(m,n),(n)->(m)' as the core dimension names of each input and of each output."""
    sig = signature.replace(" ", "")
    if not re.match(_SIGNATURE, sig):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}; expected e.g. '(m,n),(n)->(m)'")
    return [[tuple(re.findall(r"\w+", arg)) for arg in re.findall(_ARG, side)] for side in sig.split("->")]


def _core_sizes(sizes: dict[str, int], shape: tuple[int, ...], core: tuple[str, ...], context: str,
                is_input: bool) -> None:
    """Check `shape`'s trailing core dimensions against, and record them in, `sizes`."""
    if len(shape) < len(core) or not is_input and len(shape) != len(core):
        raise ValueError(f"vectorize: {'input' if is_input else 'output'} of shape {shape} does not match the core "
                         f"dimensions {core} {context}")
    for name, n in zip(core, shape[len(shape) - len(core):], strict=True):
        if sizes.setdefault(name, n) != n:
            raise ValueError(f"vectorize: inconsistent size for core dimension {name!r}: {n} vs {sizes[name]} "
                             f"{context}")


def vectorize(pyfunc: Callable[..., Any], *, excluded: Collection[int | str] = frozenset(),
              signature: str | None = None) -> Callable[..., Any]:
    """`pyfunc` made to broadcast over leading axes (jnp.vectorize): `tg.vmap` once per broadcast axis, one batched
    trace, not numpy's Python loop.

    By default pyfunc takes scalars; `signature` (a gufunc signature such as '(n),(n)->()') names the core
    dimensions each argument keeps, the others broadcast. Positions and keywords in `excluded`, None arguments
    and (unlike JAX, which drops them) other keyword arguments are passed to pyfunc unvectorized.

    >>> dot = tnp.vectorize(lambda a, b: (a * b).sum(), signature="(n),(n)->()")
    >>> dot(tnp.ones((4, 3)), tnp.ones(3)).shape
    (4,)
    """
    if any(not isinstance(e, (str, int)) or isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"vectorize: excluded may hold only argument positions (non-negative ints) and keyword "
                         f"names, got {excluded!r}")
    cores = None if signature is None else _parse_signature(signature)

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from tgfx.numpy._creation import asarray
        from tgfx.transforms.vmap import vmap
        context = f"on vectorized function with excluded={set(excluded)!r} and signature={signature!r}"
        keep = [i for i in range(len(args)) if i not in excluded]   # the arguments the signature describes
        in_core = cores[0] if cores else [()] * len(keep)
        if len(in_core) != len(keep):
            raise TypeError(f"vectorize: wrong number of positional arguments: expected {len(in_core)}, got "
                            f"{len(keep)} {context}")
        if any(c and args[i] is None for c, i in zip(in_core, keep, strict=True)):
            raise ValueError(f"vectorize: a None argument must have core dimensions () {context}")
        dyn = [i for i in keep if args[i] is not None]   # None arguments pass through, as in JAX
        in_core = [c for c, i in zip(in_core, keep, strict=True) if args[i] is not None]
        ts = [asarray(args[i]) for i in dyn]
        sizes: dict[str, int] = {}
        for t, core in zip(ts, in_core, strict=True):
            _core_sizes(sizes, t.shape, core, context, True)
        outer = [t.shape[:t.ndim - len(c)] for t, c in zip(ts, in_core, strict=True)]
        batch = broadcast_shapes(*outer, name="vectorize") if outer else ()

        def func(*xs: Tensor) -> Any:
            full = list(args)
            for i, x in zip(dyn, xs, strict=True):
                full[i] = x
            out = pyfunc(*full, **kwargs)
            if cores:   # the outputs' core dimensions must be the signature's
                outs = out if isinstance(out, tuple) else (out,)
                if len(outs) != len(cores[1]) or len(cores[1]) > 1 and not isinstance(out, tuple):
                    raise TypeError(f"vectorize: the function returned {len(outs)} outputs, the signature has "
                                    f"{len(cores[1])} {context}")
                known = dict(sizes)
                for o, core in zip(outs, cores[1], strict=True):
                    _core_sizes(known, tuple(np.shape(o)) if not isinstance(o, Tensor) else o.shape, core, context,
                                False)
            return out

        # vmap once per broadcast axis, innermost first; arguments of length 1 there (or lacking it) are not mapped
        squeezed = [t.reshape(tuple(n for n in o if n != 1) + t.shape[len(o):]) for t, o in zip(ts, outer, strict=True)]
        filled = [(1,) * (len(batch) - len(o)) + tuple(o) for o in outer]
        vf, expand = func, []
        for d in range(len(batch) - 1, -1, -1):
            in_axes = tuple(None if f[d] == 1 else 0 for f in filled)
            if all(a is None for a in in_axes):
                expand.append(d)
            else:
                vf = vmap(vf, in_axes=in_axes)
        result = vf(*squeezed)
        if not expand:
            return result
        if isinstance(result, tuple):
            return tuple(mv.expand_dims(r, sorted(expand)) for r in result)
        return mv.expand_dims(result, sorted(expand))

    return wrapped


__all__ = ["apply_along_axis", "apply_over_axes", "argpartition", "intersect1d", "lexsort", "partition",
           "put_along_axis", "setdiff1d", "setxor1d", "union1d", "unique", "vectorize"]
