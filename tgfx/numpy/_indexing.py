"""Indexing: numpy basic indexing (ints, slices with any step, None, Ellipsis) as movement ops."""
from __future__ import annotations

from typing import Any

import numpy as np

from tgfx.tensor import Tensor


def _expand_index(index: Any, ndim: int) -> list[Any]:
    idx = list(index) if isinstance(index, tuple) else [index]
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


def _is_basic(i: Any) -> bool:
    return i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer)) and not isinstance(i, bool)


def basic_getitem(x: Tensor, index: Any) -> Tensor:
    """x[index] for basic indices: shrink, flip and stride through a reshape; nothing is copied."""
    idx = _expand_index(index, x.ndim)
    bounds, flips, steps, out_shape, keep = [], [], [], [], []
    dim = 0
    for i in idx:
        if i is None:
            keep.append("new")
            continue
        n = x.shape[dim]
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            cnt = len(range(start, stop, step))
            if step > 0:
                lo, hi = start, start + (cnt - 1) * step + 1 if cnt else start
            else:
                lo, hi = (start + (cnt - 1) * step, start + 1) if cnt else (start, start)
            bounds.append((lo, max(lo, hi)))
            flips.append(step < 0)
            steps.append(abs(step))
            keep.append(cnt)
        else:
            k = int(i)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {dim} with size {n}")
            k %= n
            bounds.append((k, k + 1))
            flips.append(False)
            steps.append(1)
            keep.append("drop")
        dim += 1
    y = x.shrink(tuple(bounds))
    y = y.flip(tuple(a for a, f in enumerate(flips) if f)) if any(flips) else y
    if any(s > 1 for s in steps):
        y = _stride(y, steps)
    # drop integer-indexed axes, add None axes
    shape, it = [], iter(y.shape)
    for k in keep:
        if k == "new":
            shape.append(1)
        elif k == "drop":
            next(it)
        else:
            shape.append(next(it))
    out_shape = tuple(shape)
    return y.reshape(out_shape) if out_shape != y.shape else y


def _stride(y: Tensor, steps: list[int]) -> Tensor:
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
    return y.reshape(tuple(s for s, k in zip(_unsplit(y.shape, steps), steps, strict=True)))


def _unsplit(shape: tuple[int, ...], steps: list[int]) -> list[int]:
    out, dim = [], 0
    for k in steps:
        out.append(shape[dim])
        dim += 2 if k > 1 else 1
    return out


def getitem(x: Tensor, index: Any) -> Tensor:
    items = index if isinstance(index, tuple) else (index,)
    if all(_is_basic(i) for i in items):
        return basic_getitem(x, index)
    raise NotImplementedError(f"advanced indexing with {index!r} is not supported yet")
