"""`tg.lax.dynamic_slice`, `dynamic_update_slice` and their `_in_dim` / `_index_in_dim` spellings.

A start index is a Python int or an integer scalar Tensor (a `jit` argument, a `fori_loop` step, a `vmap`ped value).
As in JAX, a negative start counts from the end, and every start is then clamped to [0, dim - size], so the slice
always lies inside the operand. An int start is a static view (shrink, pad); with a Tensor start the slice is a
DYNAMIC_SHRINK view (its starts read at run time: one load per element, at the start's offset) and the update
`where(window, DYNAMIC_PAD(update), operand)`, the window a DYNAMIC_PAD of all-True. A loop that updates its carry
that way writes the window in place (tgfx/lowering/inplace.py). `grad` and `jvp` transpose the two views into each
other; `vmap` keeps them for unbatched starts and turns a batched start into a gather. A sharded operand is sliced
through `tnp`'s integer-array indexing instead (x[start + arange(size)], a one-hot sum the lowering makes a load).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.numpy._indexing import getitem, shrink_at, signed_index, window_at
from tgfx.numpy._scatter import scatter
from tgfx.tensor import ArrayLike, Tensor, normalize_axis, to_tensor

Start = int | Tensor


def _start_list(fn: str, x: Tensor, start_indices: Any) -> list[Start]:
    """One start per axis of x: a Python int or an integer scalar Tensor (a 1-d Tensor gives one per element)."""
    if isinstance(start_indices, Tensor):
        if start_indices.ndim != 1:
            raise TypeError(f"{fn}: start_indices must be a sequence of scalars or a 1-d integer Tensor, got a "
                            f"Tensor of shape {start_indices.shape}")
        items: list[Any] = [start_indices[i] for i in range(start_indices.shape[0])]
    elif isinstance(start_indices, (Sequence, np.ndarray)) and not isinstance(start_indices, str):
        items = list(start_indices)
    else:
        raise TypeError(f"{fn}: start_indices must be a sequence with one start per axis of the operand, got "
                        f"{start_indices!r}")
    if len(items) != x.ndim:
        raise ValueError(f"{fn}: start_indices has {len(items)} entries but the operand of shape {x.shape} has "
                         f"{x.ndim} axes; give one start per axis")
    return [_start(fn, f"start_indices[{a}]", i) for a, i in enumerate(items)]


def _start(fn: str, what: str, i: Any) -> Start:
    if isinstance(i, Tensor):
        if i.shape != () or not i.dtype.is_int:
            raise TypeError(f"{fn}: {what} must be an integer scalar, got a {i.dtype.name}{list(i.shape)} Tensor")
        return signed_index(i)
    v = np.asarray(i)
    if v.ndim or v.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {what} must be an int or an integer scalar Tensor, got {i!r}")
    return int(v)


def _clamp(start: Start, dim: int, size: int) -> Start:
    """JAX's start: negative counts from the end, then clamped to [0, dim - size]. Static when it can only be 0."""
    if isinstance(start, int):
        start = start + dim if start < 0 else start
        return min(max(start, 0), dim - size)
    if dim == size:
        return 0
    return ew.clip(ew.where(start < 0, start + dim, start), 0, dim - size)


def _sizes(fn: str, x: Tensor, slice_sizes: Any) -> tuple[int, ...]:
    sizes = tuple(slice_sizes) if isinstance(slice_sizes, (Sequence, np.ndarray)) else None
    if sizes is None or len(sizes) != x.ndim:
        raise ValueError(f"{fn}: slice_sizes must have one size per axis of the operand of shape {x.shape}, got "
                         f"{slice_sizes!r}")
    for a, (k, n) in enumerate(zip(sizes, x.shape, strict=True)):
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 0 <= k <= n:
            raise ValueError(f"{fn}: slice_sizes[{a}] = {k!r} must be an int between 0 and the operand's axis "
                             f"length {n} (operand shape {x.shape})")
    return tuple(int(k) for k in sizes)


def _along(axis: int, index: Any) -> tuple[Any, ...]:
    return (slice(None),) * axis + (index,)


def dynamic_slice(operand: ArrayLike, start_indices: Sequence[ArrayLike] | Tensor,
                  slice_sizes: Sequence[int]) -> Tensor:
    """operand[s0:s0 + k0, s1:s1 + k1, ...] for starts that may be traced values, as `jax.lax.dynamic_slice`.

    `start_indices` has one start per axis (Python ints, integer scalar Tensors, or a 1-d integer Tensor);
    `slice_sizes` one static size per axis. A negative start counts from the end; then each start is clamped to
    [0, dim - size], so the slice is always in bounds and has shape `slice_sizes`. Differentiable in `operand`.

    Cost: int starts are a view; each Tensor start is one gather kernel, one load per output element.

    >>> x = tnp.arange(10.0)
    >>> tg.lax.dynamic_slice(x, (8,), (4,)).tolist()        # clamped: [6., 7., 8., 9.]
    >>> tg.lax.fori_loop(0, 4, lambda i, acc: acc + tg.lax.dynamic_slice(x, (2 * i,), (2,)), tnp.zeros(2))
    """
    x = to_tensor(operand)
    starts = _start_list("dynamic_slice", x, start_indices)
    sizes = _sizes("dynamic_slice", x, slice_sizes)
    starts = [_clamp(s, n, k) for s, n, k in zip(starts, x.shape, sizes, strict=True)]
    if (view := window_at(Ops.DYNAMIC_SHRINK, x, starts, sizes, x.shape)) is not None:
        return view
    y = shrink_at(x, tuple((s, s + k) if isinstance(s, int) else (0, n)
                           for s, n, k in zip(starts, x.shape, sizes, strict=True)))
    for axis, (s, k) in enumerate(zip(starts, sizes, strict=True)):
        if isinstance(s, Tensor):
            y = getitem(y, _along(axis, s + Tensor.arange(k, dtype=s.dtype)))
    return y


def dynamic_update_slice(operand: ArrayLike, update: ArrayLike, start_indices: Sequence[ArrayLike] | Tensor) -> Tensor:
    """operand with operand[s0:s0 + k0, ...] replaced by `update` (of shape (k0, ...)), as
    `jax.lax.dynamic_update_slice`: a new Tensor.

    Starts as in `dynamic_slice` (negative counts from the end, then clamped to [0, dim - k], so all of `update`
    lands). `update` has the operand's number of axes and dtype. Differentiable in `operand` and `update`.

    >>> tg.lax.dynamic_update_slice(tnp.zeros(5), tnp.ones(2), (4,)).tolist()     # [0., 0., 0., 1., 1.]
    """
    fn = "dynamic_update_slice"
    x, u = to_tensor(operand), to_tensor(update)
    if u.ndim != x.ndim or any(k > n for k, n in zip(u.shape, x.shape, strict=True)):
        raise ValueError(f"{fn}: update of shape {u.shape} must have the operand's {x.ndim} axes and fit inside its "
                         f"shape {x.shape}")
    if u.dtype != x.dtype:
        raise TypeError(f"{fn}: update and operand must have the same dtype, got {u.dtype.name} and {x.dtype.name}; "
                        f"cast the update with .astype({x.dtype.name})")
    starts = [_clamp(s, n, k) for s, n, k in zip(_start_list(fn, x, start_indices), x.shape, u.shape, strict=True)]
    if u.size == 0:   # nothing lands
        return x
    if all(isinstance(s, int) for s in starts):
        return scatter(x, tuple(slice(s, s + k) for s, k in zip(starts, u.shape, strict=True)), u, "set")
    if (placed := window_at(Ops.DYNAMIC_PAD, u, starts, u.shape, x.shape)) is not None:
        inside = window_at(Ops.DYNAMIC_PAD, Tensor.full(u.shape, True, dtypes.bool), starts, u.shape,
                                    x.shape)
        return inside.where(placed, x)
    placed, inside = u, None
    for axis, (s, k, n) in enumerate(zip(starts, u.shape, x.shape, strict=True)):
        if isinstance(s, int) and k == n:   # the whole axis: nothing to place or select
            continue
        pos = Tensor.arange(n, dtype=s.dtype if isinstance(s, Tensor) else dtypes.int32)
        if isinstance(s, int):
            placed = placed.pad_zeros(tuple((s, n - s - k) if a == axis else (0, 0) for a in range(x.ndim)))
        else:
            placed = getitem(placed, _along(axis, ew.clip(pos - s, 0, k - 1)))
        hit = ew.logical_and(pos >= s, pos < s + k).reshape(tuple(n if a == axis else 1 for a in range(x.ndim)))
        inside = hit if inside is None else ew.logical_and(inside, hit)
    return inside.where(placed, x)


def dynamic_slice_in_dim(operand: ArrayLike, start_index: ArrayLike, slice_size: int, axis: int = 0) -> Tensor:
    """`dynamic_slice` along one axis: operand[..., start:start + slice_size, ...], as
    `jax.lax.dynamic_slice_in_dim`."""
    x = to_tensor(operand)
    axis = normalize_axis(axis, x.ndim, "dynamic_slice_in_dim")
    starts: list[Any] = [0] * x.ndim
    starts[axis] = start_index
    return dynamic_slice(x, starts, tuple(slice_size if a == axis else n for a, n in enumerate(x.shape)))


def dynamic_update_slice_in_dim(operand: ArrayLike, update: ArrayLike, start_index: ArrayLike, axis: int) -> Tensor:
    """`dynamic_update_slice` along one axis (update spans the other axes whole), as
    `jax.lax.dynamic_update_slice_in_dim`."""
    x = to_tensor(operand)
    axis = normalize_axis(axis, x.ndim, "dynamic_update_slice_in_dim")
    starts: list[Any] = [0] * x.ndim
    starts[axis] = start_index
    return dynamic_update_slice(x, update, starts)


def dynamic_index_in_dim(operand: ArrayLike, index: ArrayLike, axis: int = 0, keepdims: bool = True) -> Tensor:
    """operand[..., index, ...] along `axis` for a possibly traced index (clamped as `dynamic_slice`), as
    `jax.lax.dynamic_index_in_dim`; `keepdims=False` drops the axis."""
    x = to_tensor(operand)
    axis = normalize_axis(axis, x.ndim, "dynamic_index_in_dim")
    y = dynamic_slice_in_dim(x, index, 1, axis)
    return y if keepdims else y.reshape(x.shape[:axis] + x.shape[axis + 1:])


def dynamic_update_index_in_dim(operand: ArrayLike, update: ArrayLike, index: ArrayLike, axis: int) -> Tensor:
    """operand with operand[..., index, ...] along `axis` replaced by `update` (with or without that axis), as
    `jax.lax.dynamic_update_index_in_dim`."""
    x, u = to_tensor(operand), to_tensor(update)
    axis = normalize_axis(axis, x.ndim, "dynamic_update_index_in_dim")
    if u.ndim == x.ndim - 1:
        u = u.reshape(u.shape[:axis] + (1,) + u.shape[axis:])
    return dynamic_update_slice_in_dim(x, u, index, axis)
