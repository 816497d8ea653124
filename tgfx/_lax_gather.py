"""`tg.lax.gather`, `scatter` and its combining forms, and the general `reduce`, with `jax.lax`'s semantics.

A lax gather reads, for every batch position G of `start_indices` (all its axes but the last), one window of the
operand starting at the index vector start_indices[G]. Rather than a primitive of its own it is written as one
integer-array index of the operand: the axes the index vector (or a batching axis) addresses get an index array
start + iota over the window, laid out as (batch axes, window axes); every other axis is a static slice [0:size].
That index is `tnp`'s one-hot gather (`numpy/_indexing.py`), which the lowering turns into one load per output
element (`tgfx/lowering/gather.py`), and which `grad`, `jvp`, `vmap` and `jit` already go through. A scatter is the
same index handed to the `.at[]` machinery (`set`, `add`, `multiply`, `min`, `max`).

Out-of-bounds starts follow the mode: `GatherScatterMode.CLIP` clamps each start into [0, dim - window], and
`FILL_OR_DROP` (a scatter's default) fills a gather's whole window with `fill_value`, and drops a scatter's whole
update window, when any of its starts lies outside that range. `PROMISE_IN_BOUNDS` (a gather's default, as in JAX) is
treated as CLIP, what JAX's CPU and GPU gathers do with it. Negative starts are
out of bounds (lax does not count them from the end, unlike numpy indexing).

`reduce` recognises the monoids JAX recognises (add, mul, max, min, bitwise and, or, xor, also as `tnp` functions or
lambdas computing them) and lowers each operand to the matching `reduce_*`.

>>> x = tnp.arange(12.0).reshape(3, 4)
>>> dn = tg.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
>>> tg.lax.gather(x, tnp.asarray([[2], [0]]), dn, (1, 4)).tolist()           # x[[2, 0]]: rows 2 and 0
>>> tg.lax.reduce(x, 0.0, tg.lax.add, (1,)).tolist()                          # [6., 22., 38.]
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from tgfx import _lax_elementwise as lax_ew
from tgfx import _lax_ops, _lax_scan
from tgfx._lax_ops import operand as _arg
from tgfx.dtypes import DType, dtypes, max_value, min_value
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.numpy import _elementwise as ew
from tgfx.numpy._indexing import _fill_value, getitem, signed_index
from tgfx.numpy._scatter import scatter as _at_scatter
from tgfx.tensor import ArrayLike, Tensor, prod, to_tensor
from tgfx.tree import tree_flatten, tree_unflatten


class GatherScatterMode(enum.Enum):
    """How `gather` and `scatter` treat a window that does not lie inside the operand, as `jax.lax`'s enum.

    CLIP clamps the start into range; FILL_OR_DROP (the default) fills a gathered window with `fill_value` and drops
    a scattered one; PROMISE_IN_BOUNDS says the caller guarantees in-range starts, and is treated as CLIP."""

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(s: str | GatherScatterMode | None) -> GatherScatterMode:
        """A mode from its enum value or JAX's strings: None, "fill" and "drop" are FILL_OR_DROP, "clip" CLIP."""
        if isinstance(s, GatherScatterMode):
            return s
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "clip":
            return GatherScatterMode.CLIP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f"mode must be a tg.lax.GatherScatterMode or one of 'clip', 'fill', 'drop', "
                         f"'promise_in_bounds' (or None), got {s!r}")


class GatherDimensionNumbers(NamedTuple):
    """Which axes of `gather`'s output hold the window (`offset_dims`), which operand axes of window size 1 are left
    out of it (`collapsed_slice_dims`), which operand axis each entry of an index vector starts (`start_index_map`),
    and the operand axes (`operand_batching_dims`) that run along start_indices' batch axes
    (`start_indices_batching_dims`) instead of being indexed, as `jax.lax.GatherDimensionNumbers`."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """Which axes of the updates hold the window (`update_window_dims`), which operand axes of window size 1 the
    window leaves out (`inserted_window_dims`), which operand axis each entry of an index vector starts
    (`scatter_dims_to_operand_dims`), and the batching axes, as `jax.lax.ScatterDimensionNumbers`."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


# ---- the index both share ----
def _dims(fn: str, name: str, v: Any, bound: int, what: str, *, is_sorted: bool = False) -> tuple[int, ...]:
    """A tuple of distinct axis numbers in [0, bound), or an error naming the field."""
    if isinstance(v, (int, np.integer)) or not isinstance(v, (Sequence, np.ndarray)):
        raise TypeError(f"{fn}: dimension_numbers.{name} must be a tuple of ints, got {v!r}")
    t = tuple(v)
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and 0 <= d < bound for d in t):
        raise ValueError(f"{fn}: dimension_numbers.{name} = {t} must hold axes of the {what}, in [0, {bound})")
    if len(set(t)) != len(t):
        raise ValueError(f"{fn}: dimension_numbers.{name} = {t} repeats an axis")
    if is_sorted and list(t) != sorted(t):
        raise ValueError(f"{fn}: dimension_numbers.{name} = {t} must be sorted")
    return tuple(int(d) for d in t)


def _indices(fn: str, start_indices: ArrayLike, name: str) -> Tensor:
    idx = to_tensor(start_indices)
    if not idx.dtype.is_int:
        raise TypeError(f"{fn}: {name} must have an integer dtype, got {idx.dtype.name}{list(idx.shape)}")
    if idx.ndim == 0:
        raise ValueError(f"{fn}: {name} must have at least one axis (the last holds the index vectors), got a "
                         f"scalar; use shape (..., 1) for one index per position")
    return signed_index(idx)


class _Index(NamedTuple):
    """An operand window per batch position, as an index: `items` indexes the operand permuted to `order` (the
    addressed axes first), giving (batch, window axes of the addressed axes, every other axis sliced)."""

    order: tuple[int, ...]
    items: tuple[Any, ...]
    valid: Tensor | None   # (batch,): whether each window lies inside the operand (None: all do)
    layout: tuple[Any, ...]   # what each axis of the indexed result is: ("b", i), ("w", d) or ("c", d) (collapsed)


def _window_index(fn: str, shape: tuple[int, ...], idx: Tensor, starts_to: tuple[int, ...], sizes: tuple[int, ...],
                  dropped: tuple[int, ...], op_batch: tuple[int, ...], idx_batch: tuple[int, ...],
                  mode: GatherScatterMode) -> _Index:
    """The index shared by gather and scatter: batch axes idx.shape[:-1], window `sizes` per operand axis, index
    vectors addressing the axes `starts_to`, operand axes `op_batch` running along idx's axes `idx_batch`, and the
    axes in `dropped` (collapsed / inserted, and the batching ones) of size 1 left out of the window."""
    batch = idx.shape[:-1]
    nb = len(batch)
    addressed = sorted(set(starts_to) | set(op_batch))
    others = [d for d in range(len(shape)) if d not in addressed]
    windows = [d for d in addressed if d not in dropped]   # addressed axes whose window is an axis of the result
    bshape = batch + tuple(sizes[d] for d in windows)
    items: list[Any] = []
    valid = None
    for d in addressed:
        if d in starts_to:
            s = idx[..., starts_to.index(d)]
            hi = shape[d] - sizes[d]
            if mode == GatherScatterMode.FILL_OR_DROP:
                ok = ew.logical_and(s >= 0, s <= hi)
                valid = ok if valid is None else ew.logical_and(valid, ok)
            s = ew.clip(s, 0, hi)
        else:   # a batching axis: window j of the batch reads position j of this axis
            j = idx_batch[op_batch.index(d)]
            s = Tensor.arange(batch[j], dtype=idx.dtype).reshape(tuple(batch[j] if a == j else 1 for a in range(nb)))
        s = s.reshape(s.shape + (1,) * len(windows))
        if d in windows:
            w = windows.index(d)
            s = s + Tensor.arange(sizes[d], dtype=idx.dtype).reshape((1,) * nb + tuple(
                sizes[d] if a == w else 1 for a in range(len(windows))))
        items.append(s.expand(bshape))
    items += [slice(0, sizes[d]) for d in others]
    layout = tuple(("b", i) for i in range(nb)) + tuple(("w", d) for d in windows) + tuple(
        ("c" if d in dropped else "w", d) for d in others)
    return _Index(tuple(addressed + others), tuple(items), valid, layout)


def _check_sizes(fn: str, shape: tuple[int, ...], sizes: Any, name: str) -> tuple[int, ...]:
    if not isinstance(sizes, (Sequence, np.ndarray)) or len(sizes) != len(shape):
        raise ValueError(f"{fn}: {name} must have one size per axis of the operand of shape {shape}, got {sizes!r}")
    for a, (k, n) in enumerate(zip(sizes, shape, strict=True)):
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 0 <= k <= n:
            raise ValueError(f"{fn}: {name}[{a}] = {k!r} must be an int between 0 and the operand's axis length {n} "
                             f"(operand shape {shape})")
    return tuple(int(k) for k in sizes)


# ---- gather ----
def gather(operand: ArrayLike, start_indices: ArrayLike, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, indices_are_sorted: bool = False, unique_indices: bool = False,
           mode: str | GatherScatterMode | None = None, fill_value: ArrayLike | None = None) -> Tensor:
    """Windows of `operand` at the starts in `start_indices`, as `jax.lax.gather` (XLA's Gather).

    `start_indices` is (*batch, K): an index vector of K starts per batch position, entry k starting operand axis
    `start_index_map[k]`. Each window has `slice_sizes` (one per operand axis); the axes in `collapsed_slice_dims`
    (size 1) are left out, the rest are the output axes `offset_dims` in operand order, and the batch axes fill the
    other output positions in order. `operand_batching_dims` / `start_indices_batching_dims` pair operand axes with
    batch axes (window j reads position j there). Out-of-bounds windows: see `GatherScatterMode` (default, as JAX's:
    the start clamped; with "fill", filled with `fill_value`, NaN for floats, the least signed / greatest unsigned
    int, True). `indices_are_sorted` and
    `unique_indices` are hints with no effect here. Differentiable in `operand`; works under `jit` and `vmap`.

    Cost: one kernel, one load per output element (an index of the operand, see this module's docstring).

    >>> x = tnp.arange(12.0).reshape(3, 4)
    >>> dn = tg.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    >>> tg.lax.gather(x, tnp.asarray([[2], [0]]), dn, (1, 2), mode="clip").tolist()   # [[8., 9.], [0., 1.]]
    """
    fn = "gather"
    x = _arg(operand)
    idx = _indices(fn, start_indices, "start_indices")
    dn = dimension_numbers
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(f"{fn}: dimension_numbers must be a tg.lax.GatherDimensionNumbers, got {type(dn).__name__}")
    m = GatherScatterMode.from_any(GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    n, batch = x.ndim, idx.shape[:-1]
    sizes = _check_sizes(fn, x.shape, slice_sizes, "slice_sizes")
    collapsed = _dims(fn, "collapsed_slice_dims", dn.collapsed_slice_dims, n, "operand", is_sorted=True)
    starts_to = _dims(fn, "start_index_map", dn.start_index_map, n, "operand")
    op_batch = _dims(fn, "operand_batching_dims", dn.operand_batching_dims, n, "operand", is_sorted=True)
    idx_batch = _dims(fn, "start_indices_batching_dims", dn.start_indices_batching_dims, len(batch),
                      "start_indices' batch axes (all but the last)")
    if len(starts_to) != idx.shape[-1]:
        raise ValueError(f"{fn}: start_indices of shape {idx.shape} has index vectors of {idx.shape[-1]} entries but "
                         f"dimension_numbers.start_index_map = {starts_to} has {len(starts_to)}")
    if len(op_batch) != len(idx_batch):
        raise ValueError(f"{fn}: dimension_numbers.operand_batching_dims = {op_batch} and start_indices_batching_dims "
                         f"= {idx_batch} must have the same length")
    if set(collapsed) & set(op_batch):
        raise ValueError(f"{fn}: an axis cannot be both collapsed and batching ({collapsed} and {op_batch})")
    for d in collapsed + op_batch:
        if sizes[d] != 1:
            raise ValueError(f"{fn}: slice_sizes[{d}] = {sizes[d]} must be 1: axis {d} is collapsed or batching")
    for d, j in zip(op_batch, idx_batch, strict=True):
        if x.shape[d] != batch[j]:
            raise ValueError(f"{fn}: operand axis {d} (length {x.shape[d]}) is batched with start_indices axis {j} "
                             f"(length {batch[j]}): they must have the same length")
    windows = [d for d in range(n) if d not in collapsed and d not in op_batch]
    rank = len(batch) + len(windows)
    offset = _dims(fn, "offset_dims", dn.offset_dims, rank, f"output (rank {rank})", is_sorted=True)
    if len(offset) != len(windows):
        raise ValueError(f"{fn}: dimension_numbers.offset_dims = {offset} must have one entry per operand axis that "
                         f"is neither collapsed nor batching ({len(windows)}: axes {tuple(windows)})")
    # the output's axes: window axes at offset_dims in operand order, batch axes at the other positions in order
    target, wi, bi = [], iter(windows), iter(range(len(batch)))
    for p in range(rank):
        target.append(("w", next(wi)) if p in offset else ("b", next(bi)))
    out_shape = tuple(batch[t[1]] if t[0] == "b" else sizes[t[1]] for t in target)
    fv = _fill_value(x.dtype) if fill_value is None else fill_value
    if prod(out_shape) == 0 or 0 in x.shape:   # nothing to read: an empty result, or only fills
        return Tensor.full(out_shape, fv if m == GatherScatterMode.FILL_OR_DROP else 0, x.dtype)
    ix = _window_index(fn, x.shape, idx, starts_to, sizes, collapsed + op_batch, op_batch, idx_batch, m)
    y = x.permute(*ix.order)
    if any(isinstance(i, Tensor) for i in ix.items):
        y = getitem(y, ix.items, mode="clip")
    else:   # no axis is addressed: every batch position reads the same window
        y = getitem(y, ix.items)
        y = y.reshape((1,) * len(batch) + y.shape).expand(batch + y.shape)
    kept = [k for k, t in enumerate(ix.layout) if t[0] != "c"]
    y = y.reshape(tuple(y.shape[k] for k in kept))
    layout = [ix.layout[k] for k in kept]
    if ix.valid is not None:
        ok = ix.valid.reshape(batch + (1,) * (len(layout) - len(batch)))
        y = ok.where(y, to_tensor(fv, like=y)).astype(x.dtype)
    return y.permute(*(layout.index(t) for t in target))


# ---- scatter ----
def _scatter(fn: str, op: str, operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
             dimension_numbers: ScatterDimensionNumbers, mode: str | GatherScatterMode | None) -> Tensor:
    x = _arg(operand)
    idx = _indices(fn, scatter_indices, "scatter_indices")
    u = to_tensor(updates)
    dn = dimension_numbers
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(f"{fn}: dimension_numbers must be a tg.lax.ScatterDimensionNumbers, got {type(dn).__name__}")
    if u.dtype != x.dtype:
        raise TypeError(f"{fn}: updates ({u.dtype.name}) must have the operand's dtype {x.dtype.name}; cast them with "
                        f".astype({x.dtype.name})")
    m = GatherScatterMode.from_any(mode)
    n, batch = x.ndim, idx.shape[:-1]
    window_dims = _dims(fn, "update_window_dims", dn.update_window_dims, u.ndim, f"updates (shape {u.shape})",
                        is_sorted=True)
    inserted = _dims(fn, "inserted_window_dims", dn.inserted_window_dims, n, "operand", is_sorted=True)
    starts_to = _dims(fn, "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims, n, "operand")
    op_batch = _dims(fn, "operand_batching_dims", dn.operand_batching_dims, n, "operand", is_sorted=True)
    idx_batch = _dims(fn, "scatter_indices_batching_dims", dn.scatter_indices_batching_dims, len(batch),
                      "scatter_indices' batch axes (all but the last)")
    if len(starts_to) != idx.shape[-1]:
        raise ValueError(f"{fn}: scatter_indices of shape {idx.shape} has index vectors of {idx.shape[-1]} entries "
                         f"but dimension_numbers.scatter_dims_to_operand_dims = {starts_to} has {len(starts_to)}")
    if len(op_batch) != len(idx_batch) or set(inserted) & set(op_batch):
        raise ValueError(f"{fn}: dimension_numbers.operand_batching_dims = {op_batch} must pair one to one with "
                         f"scatter_indices_batching_dims = {idx_batch} and not overlap inserted_window_dims")
    windows = [d for d in range(n) if d not in inserted and d not in op_batch]
    scatter_axes = [a for a in range(u.ndim) if a not in window_dims]
    want = tuple(u.shape[a] for a in scatter_axes)
    if len(window_dims) != len(windows) or want != batch:
        raise ValueError(f"{fn}: updates of shape {u.shape} must have the batch axes {batch} of scatter_indices "
                         f"(shape {idx.shape}) and one window axis (update_window_dims = {window_dims}) per operand "
                         f"axis neither inserted nor batching ({len(windows)}: axes {tuple(windows)})")
    sizes = [1] * n
    for d, a in zip(windows, window_dims, strict=True):
        if u.shape[a] > x.shape[d]:
            raise ValueError(f"{fn}: the update window along operand axis {d} has {u.shape[a]} elements, more than "
                             f"the operand's {x.shape[d]} (operand shape {x.shape}, updates shape {u.shape})")
        sizes[d] = u.shape[a]
    for d, j in zip(op_batch, idx_batch, strict=True):
        if x.shape[d] != batch[j]:
            raise ValueError(f"{fn}: operand axis {d} (length {x.shape[d]}) is batched with scatter_indices axis {j} "
                             f"(length {batch[j]}): they must have the same length")
    if u.size == 0:
        return x
    ix = _window_index(fn, x.shape, idx, starts_to, tuple(sizes), inserted + op_batch, op_batch, idx_batch, m)
    items = list(ix.items)
    if ix.valid is not None:   # a window out of bounds: every one of its positions is pushed past the end, dropped
        first = ix.order[0]
        items[0] = ix.valid.reshape(ix.valid.shape + (1,) * (items[0].ndim - ix.valid.ndim)).where(
            items[0], items[0] + x.shape[first])
    # the updates in the index's layout: batch axes, then the window axes of the index's result in its order
    labels: list[Any] = [None] * u.ndim
    for i, a in enumerate(scatter_axes):
        labels[a] = ("b", i)
    for d, a in zip(windows, window_dims, strict=True):
        labels[a] = ("w", d)
    kept = [t for t in ix.layout if t[0] != "c"]
    v = u.permute(*(labels.index(t) for t in kept)).reshape(tuple(
        batch[t[1]] if t[0] == "b" else sizes[t[1]] for t in ix.layout))
    y = x.permute(*ix.order)
    if any(isinstance(i, Tensor) for i in items):
        y = _at_scatter(y, tuple(items), v, op, mode="drop")
    else:   # no axis is addressed: every batch position lands on the same window
        v = v.reshape((prod(batch),) + v.shape[len(batch):])
        if op in ("min", "max"):   # along a new axis indexed by zeros, so that ties share the gradient as JAX's (a
            # min/max folded first gave the operand half of it)
            hits = Tensor.full((v.shape[0],), 0, dtypes.int32, device=y.device)
            y = _at_scatter(y.reshape((1,) + y.shape), (hits, *items), v, op).reshape(y.shape)
        else:
            folded = _lax_scan.reduce_sum(v, (0,)) if op == "add" else v[-1] if op == "set" else \
                _lax_scan.reduce_prod(v, (0,))
            y = _at_scatter(y, tuple(items), folded, op)
    return y.permute(*np.argsort(ix.order).tolist())


def scatter(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
            dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | GatherScatterMode | None = None) -> Tensor:
    """`operand` with windows of `updates` written at the starts in `scatter_indices`, as `jax.lax.scatter`.

    `scatter_indices` is (*batch, K); `updates` has the batch axes (in order, at the positions not in
    `update_window_dims`) and one window axis per operand axis not in `inserted_window_dims` (nor batching), at
    `update_window_dims`. Index vector entry k starts operand axis `scatter_dims_to_operand_dims[k]`. Where windows
    overlap, the last in C order of the batch wins (JAX leaves it unspecified). Out-of-bounds windows: see
    `GatherScatterMode` (default: dropped). Differentiable in `operand` and `updates`.

    >>> dn = tg.lax.ScatterDimensionNumbers((), (0,), (0,))
    >>> tg.lax.scatter(tnp.zeros(4), tnp.asarray([[1], [3]]), tnp.asarray([5.0, 6.0]), dn).tolist()  # [0, 5, 0, 6]
    """
    return _scatter("scatter", "set", operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_add(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None) -> Tensor:
    """`scatter` that adds the updates (repeated starts accumulate), as `jax.lax.scatter_add`; differentiable in
    `operand` and `updates`.

    >>> dn = tg.lax.ScatterDimensionNumbers((), (0,), (0,))
    >>> tg.lax.scatter_add(tnp.zeros(3), tnp.asarray([[1], [1]]), tnp.ones(2), dn).tolist()          # [0, 2, 0]
    """
    return _scatter("scatter_add", "add", operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_mul(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None) -> Tensor:
    """`scatter` that multiplies by the updates, as `jax.lax.scatter_mul`."""
    return _scatter("scatter_mul", "multiply", operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_min(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None) -> Tensor:
    """`scatter` that keeps the minimum of the operand and the updates, as `jax.lax.scatter_min`."""
    return _scatter("scatter_min", "min", operand, scatter_indices, updates, dimension_numbers, mode)


def scatter_max(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None) -> Tensor:
    """`scatter` that keeps the maximum of the operand and the updates, as `jax.lax.scatter_max`."""
    return _scatter("scatter_max", "max", operand, scatter_indices, updates, dimension_numbers, mode)


# ---- reduce ----
_MONOIDS: dict[str, Callable] = {"add": lax_ew.add, "mul": lax_ew.mul, "max": lax_ew.max, "min": lax_ew.min,
                                 "and": _lax_ops.bitwise_and, "or": _lax_ops.bitwise_or, "xor": _lax_ops.bitwise_xor}
_KNOWN: dict[Callable, str] = {**{f: name for name, f in _MONOIDS.items()}, ew.add: "add", ew.multiply: "mul",
                               ew.maximum: "max", ew.minimum: "min", ew.bitwise_and: "and", ew.bitwise_or: "or",
                               ew.bitwise_xor: "xor"}
_REDUCERS: dict[str, Callable] = {"add": _lax_scan.reduce_sum, "mul": _lax_scan.reduce_prod,
                                  "max": _lax_scan.reduce_max, "min": _lax_scan.reduce_min,
                                  "and": _lax_scan.reduce_and, "or": _lax_scan.reduce_or, "xor": _lax_scan.reduce_xor}
_SUPPORTED = ("tg.lax.add, mul, max, min, bitwise_and, bitwise_or or bitwise_xor (or tnp's, or a function computing "
              "one of them per operand, such as lambda a, b: a + b)")


def _monoids(computation: Callable, leaves: list[Tensor], tree: Any) -> list[str]:
    """Which monoid `computation` applies to each operand: looked up when it is one of the known functions, else
    found by tracing it on scalar stand-ins and comparing its graph (hash-consing makes the comparison exact)."""
    try:
        known = _KNOWN.get(computation)
    except TypeError:   # an unhashable callable: not one of them, but maybe one by its graph
        known = None
    if known is not None and len(leaves) == 1:
        return [known]
    a = [Tensor(UOp(Ops.PARAM, t.dtype, (), (-1, (), "CPU"), tag=("reduce", 0, i))) for i, t in enumerate(leaves)]
    b = [Tensor(UOp(Ops.PARAM, t.dtype, (), (-1, (), "CPU"), tag=("reduce", 1, i))) for i, t in enumerate(leaves)]
    try:
        got, _ = tree_flatten(computation(tree_unflatten(tree, a), tree_unflatten(tree, b)))
    except Exception:  # noqa: BLE001 - anything it cannot do on scalars rules it out
        got = None
    names = []
    for i in range(len(leaves)):
        found = None
        if got is not None and len(got) == len(leaves) and isinstance(got[i], Tensor):
            for name, f in _MONOIDS.items():
                try:
                    if got[i].uop is f(a[i], b[i]).uop or got[i].uop is f(b[i], a[i]).uop:
                        found = name
                        break
                except TypeError:   # (a bitwise monoid of floats)
                    continue
        if found is None:
            raise NotImplementedError(f"reduce: computation must be {_SUPPORTED}; got {computation!r}, which is "
                                      f"not one of them for operand {i} ({leaves[i].dtype.name}). General "
                                      f"reductions are not supported: write it with tg.lax.scan or associative_scan")
        names.append(found)
    return names


def _identity(op: str, d: DType) -> Any:
    if op in ("add", "or", "xor"):
        return False if d.is_bool else 0
    if op == "mul":
        return True if d.is_bool else 1
    if op == "and":
        return True if d.is_bool else -1 if not d.is_unsigned else (1 << d.bits) - 1
    return min_value(d) if op == "max" else max_value(d)


def _is_identity(init: Any, op: str, d: DType) -> bool:
    if isinstance(init, Tensor):
        return False
    v = np.asarray(init)
    return v.ndim == 0 and bool(v == np.asarray(_identity(op, d)))


def reduce(operands: Any, init_values: Any, computation: Callable, dimensions: Sequence[int]) -> Any:
    """Reduce `operands` over `dimensions` with `computation`, starting from `init_values`, as `jax.lax.reduce`.

    `operands` is an array or a pytree of them (all of one shape), `init_values` scalars of the same structure,
    and `computation(x, y)` takes and returns that structure. As JAX's fast path, the computations supported are the
    monoids: tg.lax.add, mul, max, min, bitwise_and, bitwise_or, bitwise_xor (or tnp's, or functions computing
    them, each operand on its own); each operand becomes the matching `reduce_*` (in its dtype). An `init_value`
    that is not the monoid's identity (0, 1, -inf, ...) is combined with the result once. Anything else raises
    NotImplementedError. Differentiable where the `reduce_*` is.

    >>> tg.lax.reduce(tnp.arange(6.0).reshape(2, 3), -tnp.inf, tg.lax.max, (1,)).tolist()   # [2., 5.]
    """
    leaves, tree = tree_flatten(operands)
    inits, init_tree = tree_flatten(init_values)
    if not leaves or len(inits) != len(leaves):
        raise ValueError(f"reduce: init_values must have one scalar per operand ({len(leaves)}), got {len(inits)}")
    xs = [_arg(t) for t in leaves]
    if len({t.shape for t in xs}) > 1:
        raise ValueError(f"reduce: all operands must have the same shape, got {[t.shape for t in xs]}")
    for i, v in enumerate(inits):
        if np.ndim(v) != 0 and not (isinstance(v, Tensor) and v.ndim == 0):
            raise ValueError(f"reduce: init_values[{i}] must be a scalar, got shape {np.shape(v)}")
    if isinstance(dimensions, (int, np.integer)) or not isinstance(dimensions, (Sequence, np.ndarray)):
        raise TypeError(f"reduce: dimensions must be a sequence of ints (e.g. (0,)), got {dimensions!r}")
    dims = tuple(int(d) for d in dimensions)
    for d in dims:
        if not 0 <= d < xs[0].ndim:
            raise ValueError(f"reduce: dimensions = {dims} must be axes of the operands of shape {xs[0].shape}")
    outs = []
    for x, op, init in zip(xs, _monoids(computation, xs, tree), inits, strict=True):
        r = _REDUCERS[op](x, dims)
        if not _is_identity(init, op, x.dtype):
            r = _MONOIDS[op](r, to_tensor(init, like=r) if not isinstance(init, Tensor) else init.astype(r.dtype))
        outs.append(r.astype(x.dtype))
    return tree_unflatten(tree, outs)
