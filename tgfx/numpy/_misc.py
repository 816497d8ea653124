"""The rest of jax.numpy's array manipulation: comparisons of whole arrays, joining, splitting, inserting and
deleting, products (cross, kron), selection, sequences (logspace), index helpers and dtype questions (the elementwise
math is `_math.py`). Each is a composition of the elementwise, movement and reduce functions, so it fuses, traces under
`jit`/`vmap` and differentiates as they do; only `delete` and `ravel_multi_index(mode="raise")` read values to the
host, and say what to pass instead when they are traced.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tgfx.dtypes import DType, dtypes, to_dtype, to_inexact
from tgfx.dtypes import promote_types as _promote_kinds
from tgfx.numpy import _creation as cr
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _movement as mv
from tgfx.numpy import _reduce as rd
from tgfx.tensor import ArrayLike, Tensor, broadcast, normalize_axis, promote, promotion_kind, to_tensor, weak
from tgfx.tensor import broadcast_shapes as _broadcast_shapes

Shape = int | Sequence[int]


def _const(v: ArrayLike, d: DType) -> Tensor:
    """A scalar or array argument (a tolerance, a fill value) as dtype `d`, as JAX converts them."""
    return to_tensor(v).astype(d) if isinstance(v, Tensor) or not isinstance(v, (bool, int, float)) else \
        Tensor.full((), v, d)


# ---- whole-array comparisons ----
def isclose(a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """|a - b| <= atol + rtol * |b| elementwise, in the float type of a and b (integers compare as floats).

    Equal infinities are close, NaNs only with `equal_nan=True`.

    >>> tnp.isclose(tnp.asarray([1.0, 2.0]), tnp.asarray([1.0 + 1e-7, 2.1]))    # [True, False]
    """
    x, y = ew._promote_inexact(a, b, "isclose")
    x, y = broadcast(x, y, name="isclose")
    rd_ = x.dtype.real
    rt, at = _const(rtol, rd_), _const(atol, rd_)
    in_range = ew.less_equal(ew.absolute(x - y), at + rt * ew.absolute(y))
    out = ew.logical_or(ew.equal(x, y), ew.logical_and(ew.isfinite(y), in_range))
    return ew.logical_or(out, ew.logical_and(ew.isnan(x), ew.isnan(y))) if equal_nan else out


def allclose(a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08,
             equal_nan: bool = False) -> Tensor:
    """Whether every element of a is `isclose` to b's, as a 0-d bool Tensor."""
    return rd.all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Tensor:
    """Whether a1 and a2 have the same shape and elements (a 0-d bool Tensor); NaNs are equal with `equal_nan`."""
    x, y = to_tensor(a1), to_tensor(a2)
    if x.shape != y.shape:
        return Tensor.full((), False)
    eq = ew.equal(x, y)
    if equal_nan:
        eq = ew.logical_or(eq, ew.logical_and(ew.isnan(x), ew.isnan(y)))
    return rd.all(eq)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """Whether a1 and a2 broadcast to each other and are equal elementwise (a 0-d bool Tensor)."""
    try:
        eq = ew.equal(a1, a2)
    except ValueError:  # shapes that do not broadcast are simply not equivalent
        return Tensor.full((), False)
    return rd.all(eq)


# ---- dimensions, joining and splitting ----
def _atleast(x: ArrayLike, nd: int) -> Tensor:
    t = to_tensor(x)
    if t.ndim >= nd:
        return t
    if nd == 3:  # numpy's placement: a vector is (1, n, 1), a matrix (n, m, 1)
        return t.reshape({0: (1, 1, 1), 1: (1, *t.shape, 1), 2: (*t.shape, 1)}[t.ndim])
    return t.reshape((1,) * (nd - t.ndim) + t.shape)


def atleast_1d(*arys: ArrayLike) -> Tensor | list[Tensor]:
    """Each argument with at least one axis (a 0-d one becomes shape (1,)); one argument gives a Tensor, several a
    list."""
    out = [_atleast(x, 1) for x in arys]
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys: ArrayLike) -> Tensor | list[Tensor]:
    """Each argument with at least three axes: () -> (1, 1, 1), (n,) -> (1, n, 1), (n, m) -> (n, m, 1)."""
    out = [_atleast(x, 3) for x in arys]
    return out[0] if len(out) == 1 else out


def _join_rows(x: Tensor, row_nd: int, axis: int, fn: str) -> Tensor:
    """The rows of array `x` (its first axis), each lifted to `row_nd` axes as dstack (`_atleast`) or column_stack
    lifts it, joined along `axis`: one transpose and reshape instead of a concatenation of len(x) pieces."""
    if x.ndim == 0:
        raise ValueError(f"{fn}: a 0-d Tensor is not a sequence of arrays to join; pass a list or an array with at "
                         f"least one axis")
    k, row = x.shape[0], x.shape[1:]
    lifted = ((1, 1, 1), (1, *row, 1), (*row, 1))[len(row)] if row_nd == 3 and len(row) < 3 else \
        (math.prod(row), 1) if row_nd == 2 and len(row) < 2 else row
    y = mv.moveaxis(x.reshape((k, *lifted)), 0, axis)
    return y.reshape(lifted[:axis] + (k * lifted[axis],) + lifted[axis + 1:])


def column_stack(tup: Sequence[ArrayLike] | Tensor) -> Tensor:
    """1-d and 0-d arrays as columns (2-d ones as they are), joined side by side along axis 1.

    >>> tnp.column_stack([tnp.arange(3), tnp.arange(3) * 10])        # shape (3, 2)
    """
    if isinstance(tup, (Tensor, np.ndarray)):
        return _join_rows(to_tensor(tup), 2, 1, "column_stack")
    ts, weak_result = mv.joined(tup, "column_stack")
    return mv.concat([t.reshape(-1, 1) if t.ndim < 2 else t for t in ts], 1, weak_result)


def dstack(tup: Sequence[ArrayLike] | Tensor, dtype: DType | str | None = None) -> Tensor:
    """The arrays, each made at least 3-d (`atleast_3d`), joined along the third axis; `dtype` casts the result."""
    if isinstance(tup, (Tensor, np.ndarray)):
        out = _join_rows(to_tensor(tup), 3, 2, "dstack")
    else:
        ts, weak_result = mv.joined(tup, "dstack")
        out = mv.concat([_atleast(t, 3) for t in ts], 2, weak_result)
    return out if dtype is None else out.astype(dtype)


def _split(fn: str, ary: ArrayLike, indices_or_sections: Any, axis: int) -> list[Tensor]:
    x = to_tensor(ary)
    axis = normalize_axis(axis, x.ndim, fn)
    ios = indices_or_sections
    if isinstance(ios, (Tensor, np.ndarray)):  # (a concrete array of cut indices, or a 0-d section count)
        ios = np.asarray(ios).tolist()
    ios = [operator.index(i) for i in ios] if isinstance(ios, (list, tuple)) else operator.index(ios)
    return mv.split(x, ios, axis)


def hsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike) -> list[Tensor]:
    """`split` along axis 1 (axis 0 for a 1-d array): equal sections for an int, else cuts at the given indices."""
    return _split("hsplit", ary, indices_or_sections, 0 if to_tensor(ary).ndim == 1 else 1)


def vsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike) -> list[Tensor]:
    """`split` along axis 0."""
    return _split("vsplit", ary, indices_or_sections, 0)


def dsplit(ary: ArrayLike, indices_or_sections: int | Sequence[int] | ArrayLike) -> list[Tensor]:
    """`split` along axis 2."""
    return _split("dsplit", ary, indices_or_sections, 2)


def _leaves(xs: Any, where: str) -> list[Any]:
    """The arrays of block's nested lists, in order."""
    if isinstance(xs, tuple):
        raise ValueError(f"block: {where} is a tuple; block takes nested lists (tuples are not allowed, as in JAX)")
    if not isinstance(xs, list):
        return [xs]
    if not xs:
        raise ValueError(f"block: {where} is an empty list")
    return [leaf for i, x in enumerate(xs) for leaf in _leaves(x, f"{where}[{i}]")]


def _block(xs: Any, where: str, leaves: Iterator[Tensor]) -> tuple[Tensor, int]:
    """The nested lists `xs` assembled, their arrays taken in order from `leaves`, and the depth they sit at."""
    if not isinstance(xs, list):
        return next(leaves), 1
    parts = [_block(x, f"{where}[{i}]", leaves) for i, x in enumerate(xs)]
    depths = {d for _, d in parts}
    if len(depths) > 1:
        raise ValueError(f"block: the lists in {where} are nested to different depths ({sorted(depths)}); every "
                         f"array must sit at the same depth")
    depth = depths.pop()
    rank = max(depth, *(t.ndim for t, _ in parts))
    return mv.concat([_atleast(t, rank) for t, _ in parts], -depth), depth + 1


def block(arrays: ArrayLike | list) -> Tensor:
    """An array assembled from nested lists of blocks: the innermost lists join along the last axis, the next
    along the second last, and so on (numpy.block).

    >>> tnp.block([[tnp.eye(2), tnp.zeros((2, 1))], [tnp.ones((1, 2)), tnp.ones((1, 1))]])     # shape (3, 3)
    """
    ts, weak_result = mv.joined(_leaves(arrays, "arrays"), "block")   # one type for all, Python scalars weak
    out = _block(arrays, "arrays", iter(ts))[0]
    return weak(out) if weak_result else out


def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Tensor:
    """`values` joined after `arr` along `axis` (both flattened when axis is None; a Python scalar is weak, as in
    `stack`)."""
    (a, v), weak_result = mv.joined([arr, values], "append", ("arr", "values"))
    if axis is None:
        return mv.concat([a.reshape(-1), v.reshape(-1)], 0, weak_result)
    return mv.concat([a, v], axis, weak_result)


def _static_index(obj: Any, fn: str) -> np.ndarray | None:
    """A slice-free index argument known on the host as an integer numpy array, or None for a Tensor."""
    if isinstance(obj, Tensor):
        return None
    idx = np.asarray(obj)
    if idx.dtype.kind not in "iu":
        if idx.size == 0:
            return idx.astype(np.int64)
        raise ValueError(f"{fn}: index array must be integer typed; got {obj!r} of dtype {idx.dtype}")
    return idx.astype(np.int64)


def insert(arr: ArrayLike, obj: ArrayLike | slice, values: ArrayLike, axis: int | None = None) -> Tensor:
    """`values` inserted into `arr` before the indices `obj` along `axis` (flattened when None), as numpy.insert.

    A static `obj` (int, list, slice, numpy array) builds the result from slices; a Tensor `obj` (traced ones too)
    places every element with one-hot gathers, O(n * (n + len(obj))) along the axis.

    >>> tnp.insert(tnp.arange(4), 2, 9)          # [0, 1, 9, 2, 3]
    """
    a = to_tensor(arr)
    if axis is None:
        a, axis = a.reshape(-1), 0
    axis = normalize_axis(axis, a.ndim, "insert")
    n = a.shape[axis]
    idx: np.ndarray | Tensor | None = np.arange(*obj.indices(n)) if isinstance(obj, slice) else _static_index(obj,
                                                                                                               "insert")
    if idx is None:
        idx = to_tensor(obj)
        if not idx.dtype.is_int:
            raise ValueError(f"insert: index array must be integer typed; got a {idx.dtype.name} Tensor")
    if idx.ndim > 1:
        raise ValueError(f"insert: obj must be a slice, a one-dimensional array or a scalar; got shape {idx.shape}")
    v = to_tensor(values).astype(a.dtype)
    if v.ndim > a.ndim:
        raise ValueError(f"insert: values of shape {v.shape} have more axes than arr of shape {a.shape}")
    v = v.reshape((1,) * (a.ndim - v.ndim) + v.shape)
    if math.prod(idx.shape) == 1:   # one index: every value goes there (a scalar index turns values' first axis)
        if idx.ndim == 0:
            v = mv.moveaxis(v, 0, axis)
        n_ins = v.shape[axis]
        idx = np.full(n_ins, int(idx.reshape(-1)[0])) if isinstance(idx, np.ndarray) else \
            idx.reshape(1).expand((n_ins,))
    else:
        if len(idx) != v.shape[axis] and v.shape[axis] != 1:
            raise ValueError(f"insert: {len(idx)} indices in obj but {v.shape[axis]} values along axis {axis} (values "
                             f"of shape {to_tensor(values).shape}); give one value, or one per index")
        n_ins = len(idx)
        idx = np.broadcast_to(idx, (n_ins,)) if isinstance(idx, np.ndarray) else idx.expand((n_ins,))
    if n_ins == 0:
        return a
    target = a.shape[:axis] + (n_ins,) + a.shape[axis + 1:]
    try:
        v = v.expand(target)
    except ValueError:
        raise ValueError(f"insert: values of shape {to_tensor(values).shape} do not broadcast to {target}, the "
                         f"shape of {n_ins} slices of arr {a.shape} along axis {axis}") from None
    both = mv.concatenate([a, v], axis=axis)
    if isinstance(idx, np.ndarray):
        idx = np.clip(np.where(idx < 0, idx + n, idx), 0, n)
        at: list[list[int]] = [[] for _ in range(n + 1)]
        for j in np.argsort(idx, kind="stable"):
            at[idx[j]].append(n + int(j))
        order = [s for p in range(n + 1) for s in at[p] + ([p] if p < n else [])]
        return mv._take_axis(both, axis, order) if order else both
    return _take_positions(both, axis, _insert_sources(idx, n))


def _insert_sources(idx: Tensor, n: int) -> Tensor:
    """For each output position of insert, where it comes from in concatenate([arr, values]): an element i of arr
    lands at i + #{j: idx[j] <= i}, value j at idx[j] + its rank among equal-or-smaller indices (a stable sort)."""
    m = idx.shape[0]
    i32 = dtypes.int32
    k = ew.clip(ew.where(idx < 0, idx + n, idx), 0, n).cast(i32)
    j = Tensor.arange(m, dtype=i32)
    before = ew.logical_or(k.reshape(1, m) < k.reshape(m, 1), ew.logical_and(k.reshape(1, m) == k.reshape(m, 1),
                                                                              j.reshape(1, m) < j.reshape(m, 1)))
    val_pos = k + rd.sum(before.astype(i32), axis=1, dtype=i32)
    i = Tensor.arange(n, dtype=i32)
    arr_pos = i + rd.sum((k.reshape(m, 1) <= i.reshape(1, n)).astype(i32), axis=0, dtype=i32)
    p = Tensor.arange(n + m, dtype=i32).reshape(n + m, 1)
    src_arr = rd.sum(ew.where(arr_pos.reshape(1, n) == p, i.reshape(1, n), 0), axis=1, dtype=i32)
    src_val = rd.sum(ew.where(val_pos.reshape(1, m) == p, (j + n).reshape(1, m), 0), axis=1, dtype=i32)
    return src_arr + src_val


def _take_positions(x: Tensor, axis: int, src: Tensor) -> Tensor:
    from tgfx.numpy._indexing import take
    return take(x, src, axis=axis, mode="clip")


def delete(arr: ArrayLike, obj: ArrayLike | slice, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Tensor:
    """`arr` without the entries `obj` (an int, slice, integer or boolean array) along `axis` (flattened when None).

    The result's length depends on obj's values: a static obj is fine anywhere; a Tensor obj is read to the host,
    unless `assume_unique_indices=True` promises unique integer indices, which computes on the device (under `jit`
    too) as in JAX.

    >>> tnp.delete(tnp.arange(5), [0, 3])        # [1, 2, 4]
    """
    a = to_tensor(arr)
    if axis is None:
        a, axis = a.reshape(-1), 0
    axis = normalize_axis(axis, a.ndim, "delete")
    n = a.shape[axis]
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_)):
        if not -n <= obj < n:
            raise IndexError(f"delete: index {obj} is out of bounds for axis {axis} with size {n}")
        return mv._take_axis(a, axis, [i for i in range(n) if i != obj % n]) if n > 1 else \
            a.shrink(tuple((0, 0) if d == axis else (0, s) for d, s in enumerate(a.shape)))
    if isinstance(obj, Tensor) and obj.dtype.is_int and assume_unique_indices:
        return _delete_unique(a, axis, obj)
    if isinstance(obj, slice):
        host = np.arange(n)[obj]
    elif isinstance(obj, Tensor):
        from tgfx.numpy._data_dependent import host_value
        host = host_value(obj, "delete", "obj", "Pass assume_unique_indices=True with unique integer indices to "
                          "delete on the device, as in JAX")
    else:
        host = np.asarray(obj)
    keep = np.ones(n, dtype=bool)
    if host.dtype == np.bool_:
        if host.shape != (n,):
            raise ValueError(f"delete: a boolean obj must be one-dimensional with the length {n} of axis {axis}, got "
                             f"shape {host.shape}")
        keep = ~host
    elif host.dtype.kind in "iu" or host.size == 0:
        host = host.astype(np.int64)
        bad = host[(host < -n) | (host >= n)]
        if bad.size:
            raise IndexError(f"delete: index {int(bad[0])} is out of bounds for axis {axis} with size {n}")
        keep[host] = False
    else:
        raise ValueError(f"delete: obj must be integer or bool, got dtype {host.dtype}")
    kept = np.flatnonzero(keep).tolist()
    if not kept:
        return a.shrink(tuple((0, 0) if d == axis else (0, s) for d, s in enumerate(a.shape)))
    return mv._take_axis(a, axis, kept)


def _delete_unique(a: Tensor, axis: int, obj: Tensor) -> Tensor:
    """delete with unique integer indices on the device: the kept position i of the result is i plus the number of
    deleted indices at or before it (JAX's case 3a)."""
    from tgfx.numpy._sort import sort
    n = a.shape[axis]
    o = obj.reshape(-1).cast(dtypes.int32)
    o = sort(ew.clip(ew.where(o < 0, o + n, o), 0, n)) - Tensor.arange(o.shape[0], dtype=dtypes.int32)
    i = Tensor.arange(n - o.shape[0], dtype=dtypes.int32)
    i = i + rd.sum((i.reshape(1, -1) >= o.reshape(-1, 1)).astype(dtypes.int32), axis=0, dtype=dtypes.int32)
    return _take_positions(a, axis, i)


def resize(a: ArrayLike, new_shape: Shape) -> Tensor:
    """a's elements, repeated cyclically in C order, filling an array of `new_shape` (zeros if a is empty)."""
    x = to_tensor(a).reshape(-1)
    shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    shape = tuple(operator.index(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"resize: all elements of new_shape must be non-negative, got {shape}")
    size = math.prod(shape)
    if x.size == 0 or size == 0:
        return Tensor.full(shape, 0, x.dtype)
    reps = -(-size // x.size)
    return mv.tile(x, reps).shrink(((0, size),)).reshape(shape)


def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Tensor:
    """m rotated by 90 degrees k times, from the first of `axes` towards the second.

    >>> tnp.rot90(tnp.asarray([[1, 2], [3, 4]]))       # [[2, 4], [1, 3]]
    """
    x = to_tensor(m)
    if x.ndim < 2:
        raise ValueError(f"rot90: m must have at least two axes, got shape {x.shape}")
    a1, a2 = (normalize_axis(a, x.ndim, "rot90") for a in axes)
    if a1 == a2:
        raise ValueError(f"rot90: axes must be different, got {tuple(axes)}")
    k = operator.index(k) % 4
    if k == 0:
        return x
    if k == 2:
        return x.flip((a1, a2))
    perm = list(range(x.ndim))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return x.flip(a2).permute(perm) if k == 1 else x.permute(perm).flip(a2)


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Tensor:
    """`axis` moved to sit before `start` (numpy's older form of `moveaxis`)."""
    x = to_tensor(a)
    axis = normalize_axis(axis, x.ndim, "rollaxis")
    start = operator.index(start)
    if not -x.ndim <= start <= x.ndim:
        raise np.exceptions.AxisError(f"rollaxis: start={start} must satisfy {-x.ndim} <= start <= {x.ndim}")
    start += x.ndim if start < 0 else 0
    return mv.moveaxis(x, axis, start - 1 if start > axis else start)


def copy(a: ArrayLike, order: str | None = None) -> Tensor:
    """A copy of `a` in a new buffer (Tensors are immutable: this only matters for aliasing and donation)."""
    if order not in (None, "K", "A", "C"):
        raise NotImplementedError(f"copy: order={order!r}; tgfx stores arrays in C order only")
    return cr.asarray(a, copy=True)


# ---- products and selection ----
def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Tensor:
    """The cross product of 3-vectors (or 2-vectors, given a zero third component) along axisa of a and axisb of b,
    broadcast over the other axes, the result's vector axis at axisc; `axis` sets all three. Two 2-vectors give the
    scalar z component.

    >>> tnp.cross(tnp.asarray([1.0, 0, 0]), tnp.asarray([0.0, 1, 0]))       # [0, 0, 1]
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    u, v = to_tensor(a), to_tensor(b)
    u = mv.moveaxis(u, normalize_axis(axisa, u.ndim, "cross"), -1)
    v = mv.moveaxis(v, normalize_axis(axisb, v.ndim, "cross"), -1)
    if u.shape[-1] not in (2, 3) or v.shape[-1] not in (2, 3):
        raise ValueError(f"cross: the vector axes must have 2 or 3 elements, got {u.shape[-1]} (axisa={axisa} of "
                         f"shape {to_tensor(a).shape}) and {v.shape[-1]} (axisb={axisb} of shape {to_tensor(b).shape})")
    u0, u1, v0, v1 = u[..., 0], u[..., 1], v[..., 0], v[..., 1]
    if u.shape[-1] == 2 and v.shape[-1] == 2:
        return u0 * v1 - u1 * v0
    u2 = u[..., 2] if u.shape[-1] == 3 else None
    v2 = v[..., 2] if v.shape[-1] == 3 else None
    # a missing third component is zero: its products are left out, not computed with zeros
    c0 = u1 * v2 - u2 * v1 if u2 is not None and v2 is not None else u1 * v2 if v2 is not None else -(u2 * v1)
    c1 = u2 * v0 - u0 * v2 if u2 is not None and v2 is not None else u2 * v0 if u2 is not None else -(u0 * v2)
    c2 = u0 * v1 - u1 * v0
    out = mv.stack(broadcast(c0, c1, c2, name="cross"))
    return mv.moveaxis(out, 0, normalize_axis(axisc, out.ndim, "cross"))


def kron(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The Kronecker product: blocks a[i, j, ...] * b, laid out in a's shape.

    >>> tnp.kron(tnp.eye(2), tnp.ones((2, 2)))       # shape (4, 4), two ones blocks on the diagonal
    """
    x, y = promote(a, b, "kron")
    nd = max(x.ndim, y.ndim)
    x, y = x.reshape((1,) * (nd - x.ndim) + x.shape), y.reshape((1,) * (nd - y.ndim) + y.shape)
    xs = x.reshape(tuple(v for s in x.shape for v in (s, 1)))
    ys = y.reshape(tuple(v for s in y.shape for v in (1, s)))
    return ew.multiply(xs, ys).reshape(tuple(p * q for p, q in zip(x.shape, y.shape, strict=True)))


def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike], default: ArrayLike = 0) -> Tensor:
    """choicelist[i] where condlist[i] is the first true condition, `default` where none is; all broadcast together.

    >>> tnp.select([x < 0, x > 1], [-x, x * 2], default=x)
    """
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist and choicelist must have the same length, got {len(condlist)} and "
                         f"{len(choicelist)}")
    if not condlist:
        raise ValueError("select: condlist must be non-empty")
    d = _promote_kinds(*(promotion_kind(v) for v in (default, *choicelist)))
    out = to_tensor(default) if isinstance(default, Tensor) else default
    for c, v in zip(reversed(condlist), reversed(choicelist), strict=True):  # the first true condition wins
        out = ew.where(to_tensor(c), v, out)
    return to_tensor(out).astype(d)


# ---- sequences ----
def _spaced(start: ArrayLike, stop: ArrayLike, num: int, endpoint: bool, axis: int, d: DType, fn: str) -> Tensor:
    """JAX's linspace of array bounds: start * (1 - t) + stop * t for t = i / div, the samples along `axis`."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"{fn}: number of samples, {num}, must be non-negative")
    s, e = to_tensor(start).astype(d), to_tensor(stop).astype(d)
    shape = _broadcast_shapes(s.shape, e.shape, name=fn)
    s, e = s.expand(shape), e.expand(shape)
    axis = normalize_axis(axis, len(shape) + 1, fn)
    bshape = shape[:axis] + (1,) + shape[axis:]
    div = num - 1 if endpoint else num
    if num == 0:
        return Tensor.full(shape[:axis] + (0,) + shape[axis:], 0, d)
    if num == 1:
        return s.reshape(bshape)
    step = (Tensor.arange(div, dtype=d.real) * (1 / div)).astype(d)
    step = step.reshape(tuple(div if i == axis else 1 for i in range(len(bshape))))
    out = s.reshape(bshape) * (1.0 - step) + e.reshape(bshape) * step
    return mv.concatenate([out, e.reshape(bshape)], axis) if endpoint else out


def _sequence_dtype(start: ArrayLike, stop: ArrayLike, dtype: DType | str | None) -> tuple[DType, DType]:
    d = to_inexact(_promote_kinds(promotion_kind(start), promotion_kind(stop))) if dtype is None else to_dtype(dtype)
    return d, to_inexact(d)


def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, base: ArrayLike = 10.0,
             dtype: DType | str | None = None, axis: int = 0) -> Tensor:
    """base ** linspace(start, stop, num): `num` samples evenly spaced on a log scale (start and stop may be
    arrays, their samples along `axis`).

    >>> tnp.logspace(0, 3, 4)        # [1, 10, 100, 1000]
    """
    d, comp = _sequence_dtype(start, stop, dtype)
    return ew.power(base, _spaced(start, stop, num, endpoint, axis, comp, "logspace")).astype(d)


def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
              dtype: DType | str | None = None, axis: int = 0) -> Tensor:
    """`num` samples from start to stop in a geometric progression (both of one sign; NaN where either is 0 or the
    signs differ, as JAX).

    >>> tnp.geomspace(1, 1000, 4)        # [1, 10, 100, 1000]
    """
    d, comp = _sequence_dtype(start, stop, dtype)
    s, e = to_tensor(start).astype(comp), to_tensor(stop).astype(comp)
    sign = ew.sign(s)
    lin = _spaced(ew.log10(s / sign), ew.log10(e / sign), num, endpoint, 0, comp, "geomspace")
    res = sign * ew.power(10.0, lin)
    return mv.moveaxis(res, 0, normalize_axis(axis, res.ndim, "geomspace")).astype(d)


# ---- index helpers ----
def _index_tensor(a: np.ndarray) -> Tensor:
    return Tensor(np.asarray(a, dtype=np.int64), dtype=dtypes.default_int)


def _tri_indices(np_fn: Any, name: str, where: str):  # noqa: ANN202
    def fn(n: int, k: int = 0, m: int | None = None) -> tuple[Tensor, Tensor]:
        n, k = operator.index(n), operator.index(k)
        return tuple(_index_tensor(i) for i in np_fn(n, k, n if m is None else operator.index(m)))

    def from_(arr: ArrayLike, k: int = 0) -> tuple[Tensor, Tensor]:
        shape = tuple(arr.shape) if hasattr(arr, "shape") else to_tensor(arr).shape
        if len(shape) != 2:
            raise ValueError(f"{name}_from: only 2-d inputs are accepted, got shape {shape}")
        return fn(shape[0], k, shape[1])
    fn.__name__, from_.__name__ = fn.__qualname__, from_.__qualname__ = name, f"{name}_from"
    fn.__doc__ = f"(rows, cols) of the {where} diagonal k of an (n, m) array (m = n by default), in row-major order."
    from_.__doc__ = f"`{name}` for the shape of the 2-d `arr`."
    return fn, from_


tril_indices, tril_indices_from = _tri_indices(np.tril_indices, "tril_indices", "lower triangle: on and below")
triu_indices, triu_indices_from = _tri_indices(np.triu_indices, "triu_indices", "upper triangle: on and above")


def diag_indices(n: int, ndim: int = 2) -> tuple[Tensor, ...]:
    """`ndim` copies of arange(n): the index of the main diagonal of an (n, n, ...) array."""
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be non-negative, got n={n}, ndim={ndim}")
    return (Tensor.arange(n, dtype=dtypes.default_int),) * ndim


def diag_indices_from(arr: ArrayLike) -> tuple[Tensor, ...]:
    """`diag_indices` for `arr`, which must be at least 2-d with all axes of one length."""
    shape = to_tensor(arr).shape
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: the array must be at least 2-d with all axes of equal length, got shape "
                         f"{shape}")
    return diag_indices(shape[0], len(shape))


def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *, inplace: bool = True) -> Tensor:
    """A copy of `a` with its main diagonal set to `val` (a scalar, or values repeated along the diagonal), as JAX's
    `fill_diagonal(..., inplace=False)`; Tensors are immutable, so inplace=True is an error, as in JAX.

    >>> tnp.fill_diagonal(tnp.zeros((3, 3)), tnp.asarray([1.0, 2, 3]), inplace=False)
    """
    if inplace:
        raise NotImplementedError("fill_diagonal: Tensors are immutable; pass inplace=False to get the filled copy")
    if wrap:
        raise NotImplementedError("fill_diagonal: wrap=True is not implemented, as in JAX; use wrap=False")
    x, v = to_tensor(a), to_tensor(val)
    if x.ndim < 2:
        raise ValueError(f"fill_diagonal: the array must be at least 2-d, got shape {x.shape}")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise ValueError(f"fill_diagonal: all axes must have equal length for ndim > 2, got shape {x.shape}")
    n = min(x.shape)
    if v.ndim:
        flat = v.reshape(-1)
        if flat.shape[0] == 0:
            raise ValueError("fill_diagonal: val is empty; it needs at least one value")
        v = resize(flat, n)
        v = v.pad_zeros(((0, x.shape[0] - n),)).reshape((x.shape[0],) + (1,) * (x.ndim - 1))
    rows = Tensor.arange(x.shape[0], dtype=dtypes.int32).reshape((-1,) + (1,) * (x.ndim - 1))
    on = None
    for ax in range(1, x.ndim):
        col = Tensor.arange(x.shape[ax], dtype=dtypes.int32).reshape(tuple(-1 if i == ax else 1 for i in range(x.ndim)))
        on = rows == col if on is None else ew.logical_and(on, rows == col)
    return ew.where(on, v.astype(x.dtype), x)


def indices(dimensions: Sequence[int], dtype: DType | str | None = None, sparse: bool = False,
            ) -> Tensor | tuple[Tensor, ...]:
    """The index grid of an array of shape `dimensions`: out[i] holds each element's index along axis i (one
    Tensor of shape (len(dimensions), *dimensions)); `sparse=True` gives the broadcastable vectors instead.

    >>> tnp.indices((2, 3))[1]       # [[0, 1, 2], [0, 1, 2]]
    """
    d = dtypes.default_int if dtype is None else to_dtype(dtype)
    dims = tuple(operator.index(s) for s in dimensions)
    out = []
    for i, n in enumerate(dims):
        v = Tensor.arange(n, dtype=d).reshape(tuple(n if a == i else 1 for a in range(len(dims))))
        out.append(v if sparse else v.expand(dims))
    if sparse:
        return tuple(out)
    return mv.stack(out) if out else Tensor(np.zeros(0, d.np), dtype=d)


def unravel_index(indices: ArrayLike, shape: Shape) -> tuple[Tensor, ...]:
    """The coordinates, in an array of `shape`, of flat (C-order) `indices`: one Tensor per axis. Out-of-range
    indices are clamped, as in JAX (numpy raises).

    >>> tnp.unravel_index(tnp.asarray([5, 7]), (2, 4))       # ([1, 1], [1, 3])
    """
    idx = to_tensor(indices)
    if not idx.dtype.is_int:
        raise TypeError(f"unravel_index: indices must be integers, got {idx.dtype.name}")
    dims = [operator.index(s) for s in ((shape,) if isinstance(shape, (int, np.integer)) else shape)]
    out: list[Tensor] = [idx] * len(dims)
    for i in reversed(range(len(dims))):
        idx, out[i] = ew.floor_divide(idx, dims[i]), ew.remainder(idx, dims[i])
    over = idx > 0
    under = Tensor.full((), False) if idx.dtype.is_unsigned else idx < -1
    return tuple(ew.where(over, s - 1, ew.where(under, 0, o)).astype(idx.dtype) for s, o in zip(dims, out,
                                                                                                 strict=True))


def ravel_multi_index(multi_index: Sequence[ArrayLike], dims: Sequence[int], mode: str = "raise", order: str = "C",
                      *, dtype: DType | str | None = None) -> Tensor:
    """The flat index of coordinates `multi_index` in an array of shape `dims` (C or F order).

    mode "raise" checks the coordinates on the host (so it needs concrete values: under `jit` use "clip", which
    clamps, "wrap", which wraps, or "ignore").

    >>> tnp.ravel_multi_index((tnp.asarray([1, 1]), tnp.asarray([1, 3])), (2, 4))     # [5, 7]
    """
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} coordinate arrays for {len(dims)} dims {tuple(dims)}")
    shape = tuple(operator.index(s) for s in dims)
    ts = [to_tensor(i) for i in multi_index]
    for k, t in enumerate(ts):
        if not t.dtype.is_int:
            raise TypeError(f"ravel_multi_index: only integer coordinates are allowed, multi_index[{k}] is "
                            f"{t.dtype.name}")
    d = _promote_kinds("i*", *(promotion_kind(i) for i in multi_index)) if dtype is None else to_dtype(dtype)
    if not d.is_int:
        raise ValueError(f"ravel_multi_index: dtype={d.name} is not an integer type")
    if math.prod(shape) - 1 > np.iinfo(d.np).max:
        raise ValueError(f"ravel_multi_index: dtype={d.name} cannot hold the flat indices of dims {shape}; pass a "
                         f"wider dtype=")
    if mode == "raise":
        from tgfx.numpy._data_dependent import host_value
        for k, (t, s) in enumerate(zip(ts, shape, strict=True)):
            v = host_value(t, "ravel_multi_index", f"multi_index[{k}]", "Use mode='clip' or mode='wrap' under jit")
            if v.size and (v.min() < 0 or v.max() >= s):
                raise ValueError(f"ravel_multi_index: invalid entry in coordinates array multi_index[{k}] for an "
                                 f"axis of length {s}")
    elif mode == "clip":
        ts = [ew.clip(t, 0, s - 1) for t, s in zip(ts, shape, strict=True)]
    elif mode == "wrap":
        ts = [ew.remainder(t, s) for t, s in zip(ts, shape, strict=True)]
    elif mode != "ignore":
        raise ValueError(f"ravel_multi_index: invalid mode={mode!r}; expected 'raise', 'wrap', 'clip' or 'ignore'")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: invalid order={order!r}; expected 'C' or 'F'")
    strides = np.cumprod((1,) + shape[:-1]) if order == "F" else np.cumprod((1,) + shape[1:][::-1])[::-1]
    out = Tensor.full((), 0, d)
    for t, s in zip(ts, strides, strict=True):
        out = out + t.astype(d) * int(s)
    return out


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Tensor:
    """Whether each element of `element` is in `test_elements` (negated with `invert`), in element's shape.

    method "auto"/"compare_all" compares every pair (O(n*m), one kernel); "binary_search"/"sort" sort
    test_elements and search them (O(n log m) comparisons after the sort).

    >>> tnp.isin(tnp.arange(5), tnp.asarray([1, 3]))        # [False, True, False, True, False]
    """
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"isin: method={method!r} is not implemented; options are 'compare_all', 'binary_search', "
                         f"'sort' and 'auto'")
    e, t = promote(element, test_elements, "isin")
    shape = e.shape
    e, t = e.reshape(-1), t.reshape(-1)
    if e.shape[0] == 0 or t.shape[0] == 0:
        return Tensor.full(shape, bool(invert))
    if method in ("auto", "compare_all"):
        hit = rd.any(e.reshape(-1, 1) == t.reshape(1, -1), axis=1)
    else:
        from tgfx.numpy._data_dependent import searchsorted
        from tgfx.numpy._sort import sort
        srt = sort(t)
        pos = ew.minimum(searchsorted(srt, e), t.shape[0] - 1)
        hit = _take_positions(srt, 0, pos) == e
    return (ew.logical_not(hit) if invert else hit).reshape(shape)


# ---- scalars, dtypes and shapes ----
def isscalar(element: Any) -> bool:
    """Whether `element` is a scalar: a Python or numpy scalar, or a 0-d Tensor or numpy array."""
    if np.isscalar(element):
        return True
    return isinstance(element, (Tensor, np.ndarray)) and element.ndim == 0


_WEAK_TYPES = {int: "i*", float: "f*", complex: "c*"}
_WEAK_AS_DTYPE = {"i*": "int64", "f*": "float64", "c*": "complex128"}


def promote_types(a: Any, b: Any) -> DType:
    """The dtype JAX's promotion gives two operands of dtypes a and b (dtypes, names, numpy or Python types).

    Python's int, float and complex are weak, as in JAX: promote_types(int8, int) is int8. The result is the type as
    named, as jnp.promote_types gives it: promote_types(int64, int32) is int64 without x64 mode too, and a weak
    result is the kind's 64-bit type (promote_types(int32, float) is float64).
    """
    from tgfx.dtypes import _lub
    from tgfx.numpy._standard import _declared_dtype
    kinds = [_WEAK_TYPES[x] if x in _WEAK_TYPES else _declared_dtype(x) for x in (a, b)]
    lub = _lub(*(k if isinstance(k, str) else k.name for k in kinds))
    return _declared_dtype(_WEAK_AS_DTYPE[lub]) if lub in _WEAK_AS_DTYPE else _promote_kinds(*kinds)


def broadcast_shapes(*shapes: Shape) -> tuple[int, ...]:
    """The shape that arrays of these shapes broadcast to (ints are 1-d shapes); a ValueError if they do not.

    >>> tnp.broadcast_shapes((3, 1), (1, 4), (5, 1, 1))     # (5, 3, 4)
    """
    if not shapes:
        return ()
    tups = [(operator.index(s),) if isinstance(s, (int, np.integer)) else tuple(operator.index(v) for v in s)
            for s in shapes]
    return _broadcast_shapes(*tups, name="broadcast_shapes")

