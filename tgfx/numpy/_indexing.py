"""Indexing: numpy basic indexing as movement ops; integer-array gathers and `.at[]` scatters as one-hot reduces.

Basic indices (ints, slices with any step, None, Ellipsis) are views: shrink, flip, a pad and reshape for strides,
and a reshape. Integer-array ("advanced") indices pick positions that depend on data, which static shapes express
by comparing every index with every position (tinygrad's approach):

    x[idx]  ==  sum_j where(idx[..., None] == arange(n)[j], x[..., j], 0)

The compare, the where and the sum fuse into one kernel whose loop runs over (output element, source position).
So a gather costs O(out.size * n1 * n2 ...) work for the indexed axes' lengths n1, n2, ..., in one kernel, and a
scatter O(x.size * index.size) in one or two kernels. Basic indices around the arrays cost nothing: they are movement
ops on either side of the one-hot reduce.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgfx.dtypes import DType, dtypes
from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, normalize_axis, prod, to_tensor

_MASK_HINT = ("boolean mask indexing gives a shape that depends on the data, which tgfx's static shapes cannot "
              "express; use tnp.where(mask, x, fill) to select, x.at[...] to update, or pass the mask as a numpy "
              "array (a concrete host mask is turned into integer indices)")


# ---- index items ----
def _is_basic(i: Any) -> bool:
    return i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer)) and not isinstance(i, bool)


@dataclass(frozen=True)
class _MaskPart:
    """One axis of a concrete host boolean mask, as the integer positions np.nonzero found along it."""

    positions: np.ndarray
    size: int  # the mask's length along this axis, which must equal the indexed axis


def _index_array(i: Any) -> Tensor:
    """An integer index array (Tensor, numpy array, list) as a Tensor of a signed integer dtype."""
    if isinstance(i, Tensor):
        if i.dtype.is_bool:
            raise IndexError(f"cannot index with a boolean Tensor of shape {i.shape}: {_MASK_HINT}")
        if not i.dtype.is_int:
            raise IndexError(f"arrays used as indices must be of integer type, got a {i.dtype.name} Tensor")
        wide = i.dtype.itemsize == 8 or i.dtype == dtypes.uint32
        return i.astype(dtypes.int64 if wide else dtypes.int32)
    arr = np.asarray(i)
    if arr.dtype == object:
        raise IndexError(f"only integers, slices, None, Ellipsis and integer arrays are valid indices, got {i!r}")
    if arr.size == 0 and arr.dtype.kind == "f":  # x[[]]: numpy reads an empty list as an empty integer index
        arr = arr.astype(np.int32)
    if arr.dtype.kind not in "iu":
        raise IndexError(f"arrays used as indices must be of integer type, got {arr.dtype} from {i!r}")
    fits = arr.size == 0 or (int(arr.min()) >= -2**31 and int(arr.max()) < 2**31)
    return Tensor(arr.astype(np.int32 if fits else np.int64))


def _index_items(index: Any) -> list[Any]:
    """The index as a list of basic items, `_MaskPart`s and integer index Tensors."""
    items = list(index) if isinstance(index, tuple) else [index]
    out: list[Any] = []
    for i in items:
        if _is_basic(i):
            out.append(i)
        elif isinstance(i, (bool, np.bool_)):
            raise IndexError(f"a scalar boolean index ({i!r}) is not supported; use None to add an axis")
        elif not isinstance(i, Tensor) and np.asarray(i).dtype == np.bool_:
            mask = np.asarray(i)
            if mask.ndim == 0:
                raise IndexError("a 0-d boolean index is not supported; use None to add an axis")
            out += [_MaskPart(p, s) for p, s in zip(np.nonzero(mask), mask.shape, strict=True)]
        else:
            out.append(_index_array(i))
    return out


def _expand_index(index: Any, ndim: int) -> list[Any]:
    idx = list(index) if isinstance(index, (tuple, list)) else [index]
    n_ell = sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for Tensor: Tensor is {ndim}-dimensional, but {used} were indexed")
    if n_ell:
        k = idx.index(Ellipsis)
        idx[k:k + 1] = [slice(None)] * (ndim - used)
    else:
        idx += [slice(None)] * (ndim - used)
    return idx


# ---- basic indexing: a plan of movement ops, applied forwards for a view and backwards for an update ----
@dataclass(frozen=True)
class _Basic:
    """x[basic index] = reshape(stride(flip(shrink(x)))); each step is kept so the view can be put back."""

    in_shape: tuple[int, ...]
    bounds: tuple[tuple[int, int], ...]
    flips: tuple[int, ...]
    steps: tuple[int, ...]
    strided_shape: tuple[int, ...]
    out_shape: tuple[int, ...]


def _basic_plan(shape: tuple[int, ...], items: Sequence[Any]) -> _Basic:
    """The plan for expanded basic items (None, slices and in-range ints, one per axis apart from None)."""
    bounds, flips, steps, strided, out = [], [], [], [], []
    dim = 0
    for i in items:
        if i is None:
            out.append(1)
            continue
        n = shape[dim]
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            cnt = len(range(start, stop, step))
            if step > 0:
                lo, hi = (start, start + (cnt - 1) * step + 1) if cnt else (start, start)
            else:
                lo, hi = (start + (cnt - 1) * step, start + 1) if cnt else (start, start)
            bounds.append((lo, max(lo, hi)))
            flips.append(step < 0)
            steps.append(abs(step))
            strided.append(cnt)
            out.append(cnt)
        else:
            k = int(i)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {dim} with size {n}")
            k %= n
            bounds.append((k, k + 1))
            flips.append(False)
            steps.append(1)
            strided.append(1)
        dim += 1
    return _Basic(tuple(shape), tuple(bounds), tuple(a for a, f in enumerate(flips) if f), tuple(steps),
                  tuple(strided), tuple(out))


def _apply_basic(x: Tensor, plan: _Basic) -> Tensor:
    y = x.shrink(plan.bounds)
    y = y.flip(plan.flips) if plan.flips else y
    y = _stride(y, plan.steps) if any(s > 1 for s in plan.steps) else y
    return y.reshape(plan.out_shape) if plan.out_shape != y.shape else y


def _unapply_basic(y: Tensor, plan: _Basic) -> Tensor:
    """Put a view back where it came from: a Tensor of x's shape, zero (False) outside the view."""
    y = y.reshape(plan.strided_shape)
    if any(s > 1 for s in plan.steps):
        y = _unstride(y, plan.steps, tuple(hi - lo for lo, hi in plan.bounds))
    y = y.flip(plan.flips) if plan.flips else y
    return y.pad_zeros(tuple((lo, n - hi) for (lo, hi), n in zip(plan.bounds, plan.in_shape, strict=True)))


def basic_getitem(x: Tensor, index: Any) -> Tensor:
    """x[index] for basic indices: shrink, flip and stride through a reshape; nothing is copied."""
    return _apply_basic(x, _basic_plan(x.shape, _expand_index(index, x.ndim)))


def _stride(y: Tensor, steps: Sequence[int]) -> Tensor:
    """Every steps[a]-th element along each axis a: pad to a multiple, split the axis, keep the first column."""
    pads = tuple((0, (-s) % k) if k > 1 else (0, 0) for s, k in zip(y.shape, steps, strict=True))
    y = y.pad_zeros(pads)
    split_shape = tuple(v for s, k in zip(y.shape, steps, strict=True) for v in ((s // k, k) if k > 1 else (s,)))
    y = y.reshape(split_shape)
    bounds, dim = [], 0
    for k in steps:
        if k > 1:
            bounds += [(0, y.shape[dim]), (0, 1)]
            dim += 2
        else:
            bounds.append((0, y.shape[dim]))
            dim += 1
    y = y.shrink(tuple(bounds))
    return y.reshape(tuple(_unsplit(y.shape, steps)))


def _unstride(y: Tensor, steps: Sequence[int], sizes: Sequence[int]) -> Tensor:
    """The inverse of `_stride`: each element back at every steps[a]-th position of an axis of length sizes[a]."""
    split = tuple(v for s, k in zip(y.shape, steps, strict=True) for v in ((s, 1) if k > 1 else (s,)))
    pads = tuple(p for k in steps for p in (((0, 0), (0, k - 1)) if k > 1 else ((0, 0),)))
    y = y.reshape(split).pad_zeros(pads)
    y = y.reshape(tuple(s * k for s, k in zip(_unsplit(y.shape, steps), steps, strict=True)))
    return y.shrink(tuple((0, n) for n in sizes))


def _unsplit(shape: tuple[int, ...], steps: Sequence[int]) -> list[int]:
    """The leading size of each axis of a shape where axes with step > 1 were split in two."""
    out, dim = [], 0
    for k in steps:
        out.append(shape[dim])
        dim += 2 if k > 1 else 1
    return out
