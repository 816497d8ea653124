"""Indexing: numpy basic indexing as movement ops; integer-array gathers and `.at[]` scatters as one-hot reduces.

Basic indices (ints, slices with any step, None, Ellipsis) are views: shrink, flip, a pad and reshape for strides,
and a reshape. Integer-array ("advanced") indices pick positions that depend on data, which static shapes express
by comparing every index with every position (tinygrad's approach):

    x[idx]  ==  sum_j where(idx[..., None] == arange(n)[j], x[..., j], 0)

The compare, the where and the sum fuse into one kernel whose loop runs over (output element, source position).
So a gather costs O(out.size * n1 * n2 ...) work for the indexed axes' lengths n1, n2, ..., in one kernel, and a
scatter O(x.size * index.size) in one or two kernels. Basic indices around the arrays cost nothing: they are movement
ops on either side of the one-hot reduce. The scatters (`x.at[index].set(v)` and friends) are `_scatter.py`'s, on
this module's plans of an index.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgfx.dtypes import DType, dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.constants import view_chain
from tgfx.numpy import _elementwise as ew
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, keep_weak, normalize_axis, prod, to_tensor

_MASK_HINT = ("Use tnp.where(mask, x, fill) to select or update with a static shape, or x[tnp.nonzero(mask, size=N)] "
              "for the first N selected elements, as in JAX")


# ---- index items ----
def _is_basic(i: Any) -> bool:
    return i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer)) and not isinstance(i, bool)


@dataclass(frozen=True)
class _MaskPart:
    """One axis of a concrete host boolean mask, as the integer positions np.nonzero found along it."""

    positions: np.ndarray
    size: int  # the mask's length along this axis, which must equal the indexed axis


def signed_index(i: Tensor) -> Tensor:
    """An integer index Tensor as the signed type that holds all its values: int32, or int64 for 64-bit and uint32
    ones (exact in either x64 mode: tgfx's own arithmetic)."""
    wide = i.dtype.itemsize == 8 or i.dtype == dtypes.uint32
    return i.cast(dtypes.int64 if wide else dtypes.int32)


def _index_array(i: Any, device: str | tuple[str, ...] | None = None) -> Tensor:
    """An integer index array (Tensor, numpy array, list) as a Tensor of a signed integer dtype."""
    if isinstance(i, Tensor):
        if i.dtype.is_bool:
            raise IndexError(f"a boolean Tensor of shape {i.shape} cannot be an index array here: its shape depends on "
                             f"the data. {_MASK_HINT}")
        if not i.dtype.is_int:
            raise IndexError(f"arrays used as indices must be of integer type, got a {i.dtype.name} Tensor")
        return signed_index(i)
    arr = np.asarray(i)
    if arr.dtype == object:
        raise IndexError(f"only integers, slices, None, Ellipsis and integer arrays are valid indices, got {i!r}")
    if arr.size == 0 and arr.dtype.kind == "f":  # x[[]]: numpy reads an empty list as an empty integer index
        arr = arr.astype(np.int32)
    if arr.dtype.kind not in "iu":
        raise IndexError(f"arrays used as indices must be of integer type, got {arr.dtype} from {i!r}")
    lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
    if not (lo >= -2**31 and hi < 2**31):
        # out of every axis an int32 can index: clamped all the same (an int64 index array would be narrowed, and
        # wrap, without x64)
        arr = np.clip(arr, -2**31, 2**31 - 1)
        lo, hi = max(lo, -2**31), min(hi, 2**31 - 1)
    if arr.ndim == 0:  # a scalar index is a constant, not a buffer
        return Tensor.full((), int(arr), dtypes.int32)
    t = Tensor(arr.astype(np.int32), device=device)   # where the indexed Tensor is (host data follows it, as in JAX)
    view_chain(t.uop)[1].__dict__["host_range"] = (lo, hi)   # its values, known here (see `_normalize`)
    return t



def _index_items(index: Any, device: str | tuple[str, ...] | None = None) -> list[Any]:
    """The index as a list of basic items, `_MaskPart`s and integer index Tensors."""
    items = list(index) if isinstance(index, tuple) else [index]
    out: list[Any] = []
    for i in items:
        if _is_basic(i):
            out.append(i)
        elif isinstance(i, Tensor) and i.dtype.is_bool or not isinstance(i, Tensor) and np.asarray(i).dtype == np.bool_:
            # (a 0-d one, a scalar boolean, was made an index of an axis of its own by `_scalar_bools_as_axes`)
            mask = _host_mask(i) if isinstance(i, Tensor) else np.asarray(i)
            out += [_MaskPart(p, s) for p, s in zip(np.nonzero(mask), mask.shape, strict=True)]
        else:
            out.append(_index_array(i, device))
    return out


def _host_mask(mask: Tensor) -> np.ndarray:
    """A boolean Tensor index's value, read as JAX reads a concrete mask; a traced one is an error saying what to
    use."""
    from tgfx.numpy._data_dependent import host_value
    from tgfx.trace_state import NonConcreteBooleanIndexError
    return host_value(mask, "boolean mask index", "the mask", _MASK_HINT, NonConcreteBooleanIndexError)


def _is_scalar_bool(i: Any) -> bool:
    """A 0-d boolean index: a Python or numpy bool, a 0-d boolean array or Tensor."""
    if isinstance(i, Tensor):
        return i.dtype.is_bool and i.ndim == 0
    return isinstance(i, (bool, np.bool_)) or isinstance(i, np.ndarray) and i.dtype == np.bool_ and i.ndim == 0


def _host_bool(i: Any) -> bool:
    return bool(_host_mask(i)) if isinstance(i, Tensor) else bool(i)


def _scalar_bools_as_axes(x: Tensor, index: Any) -> tuple[Tensor, Any]:
    """numpy's scalar booleans in an index (Python or numpy bools, concrete 0-d boolean arrays or Tensors), as JAX's:
    each indexes a new length-1 axis of x with the index array [0] (True) or [] (False), so it adds an axis of length 1
    or 0 where numpy's rules for index arrays put it (`x[0, True]` is (1, ...) like x[0][None], `x[..., False]` has a
    last axis of 0, `x[arr, True]` is x[arr]). Returns x with those axes inserted and the index with the arrays in the
    booleans' places; a boolean that is the only index besides slices, None and Ellipsis is a slice of its axis (a
    view, not a gather)."""
    items = list(index) if isinstance(index, tuple) else [index]
    flags = [_is_scalar_bool(i) for i in items]
    if not any(flags):
        return x, index
    lone = sum(flags) == 1 and all(f or i is None or i is Ellipsis or isinstance(i, slice) for i, f in zip(items, flags,
                                                                                                      strict=True))
    shape, sizes, out = [], iter(x.shape), []
    for i in _expand_index(items, x.ndim + sum(flags)):
        if _is_scalar_bool(i):
            n = int(_host_bool(i))
            shape.append(1)
            out.append(slice(0, n) if lone else _index_array(np.arange(n), x.uop.device))
        else:
            shape += [next(sizes)] if i is not None else []
            out.append(i)
    return x.reshape(tuple(shape)), tuple(out)


def _expand_index(index: Any, ndim: int) -> list[Any]:
    idx = list(index) if isinstance(index, (tuple, list)) else [index]
    n_ell = sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for Tensor: Tensor is {ndim}-dimensional, but {used} were indexed")
    if n_ell:
        k = next(j for j, i in enumerate(idx) if i is Ellipsis)  # not .index: Tensor == is elementwise
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


def _is_eager(x: Tensor) -> bool:
    """Whether a view of `x` may start at runtime offsets: outside every trace (under `jit` a Python int is part of
    the program, as in JAX) and on one device."""
    from tgfx import trace_state
    return not trace_state.active() and not isinstance(x.uop.device, tuple)


def shrink_at(x: Tensor, bounds: Sequence[tuple[int, int]]) -> Tensor:
    """x.shrink(bounds) where each axis that is cut has its start a runtime value: eager `x[i]` for 20 values of i
    is one schedule and one compiled kernel, not 20 (the size of the view is its shape, and stays static)."""
    axes = tuple(a for a, ((lo, hi), n) in enumerate(zip(bounds, x.shape, strict=True)) if hi - lo < n)
    if not axes or not _is_eager(x):
        return x.shrink(bounds)
    starts = tuple(UOp.const(dtypes.int32, bounds[a][0]) for a in axes)
    shape = tuple(hi - lo for lo, hi in bounds)
    return Tensor(UOp(Ops.DYNAMIC_SHRINK, x.dtype, (x.uop, *starts), (axes, shape)))


def pad_at(y: Tensor, bounds: Sequence[tuple[int, int]], shape: tuple[int, ...]) -> Tensor:
    """y placed at `bounds` in zeros of `shape` (the inverse of `shrink_at`), its starts runtime values as there."""
    axes = tuple(a for a, ((lo, hi), n) in enumerate(zip(bounds, shape, strict=True)) if hi - lo < n)
    if not axes or not _is_eager(y):
        return y.pad_zeros(tuple((lo, n - hi) for (lo, hi), n in zip(bounds, shape, strict=True)))
    starts = tuple(UOp.const(dtypes.int32, bounds[a][0]) for a in axes)
    return Tensor(UOp(Ops.DYNAMIC_PAD, y.dtype, (y.uop, *starts), (axes, tuple(shape))))


def window_at(op: Ops, x: Tensor, starts: Sequence[int | Tensor], inner: Sequence[int],
              outer: Sequence[int]) -> Tensor | None:
    """`x` cut (DYNAMIC_SHRINK) or placed (DYNAMIC_PAD) at `starts` along the axes where `inner` (the window) is
    shorter than `outer`: a view whose starts are read at run time (clamped into range), so a kernel reads or writes
    the window where it lies; a loop that updates its carry by such a window writes it in place
    (tgfx/lowering/inplace.py). None where no start is a Tensor, or `x` is sharded (its parts are cut otherwise)."""
    if not any(isinstance(s, Tensor) for s in starts) or isinstance(x.uop.device, tuple):
        return None
    axes = tuple(a for a, (k, n) in enumerate(zip(inner, outer, strict=True)) if k != n)
    if not axes:
        return x
    srcs = tuple(s.uop if isinstance(s, Tensor) else UOp.const(dtypes.int32, s) for s in (starts[a] for a in axes))
    return Tensor(UOp(op, x.dtype, (x.uop, *srcs), (axes, tuple(outer if op is Ops.DYNAMIC_PAD else inner))))


def _apply_basic(x: Tensor, plan: _Basic) -> Tensor:
    y = shrink_at(x, plan.bounds)
    y = y.flip(plan.flips) if plan.flips else y
    y = _stride(y, plan.steps) if any(s > 1 for s in plan.steps) else y
    return y.reshape(plan.out_shape) if plan.out_shape != y.shape else y


def _unapply_basic(y: Tensor, plan: _Basic) -> Tensor:
    """Put a view back where it came from: a Tensor of x's shape, zero (False) outside the view."""
    y = y.reshape(plan.strided_shape)
    if any(s > 1 for s in plan.steps):
        y = _unstride(y, plan.steps, tuple(hi - lo for lo, hi in plan.bounds))
    y = y.flip(plan.flips) if plan.flips else y
    return pad_at(y, plan.bounds, plan.in_shape)


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


# ---- advanced indexing: where the arrays point, and where their broadcast axes land ----
@dataclass(frozen=True)
class _Plan:
    """x[index] = the gather of `idxs` along `axes` of the basic view y = _apply_basic(x, basic).

    The gather's result has the index arrays' broadcast axes `bshape` first, then y's other axes in order; numpy moves
    the broadcast axes to position `pos` when the advanced indices (arrays and ints) sit next to each other.
    """

    basic: _Basic
    axes: tuple[int, ...]
    idxs: tuple[Tensor, ...]
    bshape: tuple[int, ...]
    pos: int

    @property
    def rest(self) -> tuple[int, ...]:
        return tuple(a for a in range(len(self.basic.out_shape)) if a not in self.axes)

    @property
    def out_shape(self) -> tuple[int, ...]:
        rest = tuple(self.basic.out_shape[a] for a in self.rest)
        return rest[:self.pos] + self.bshape + rest[self.pos:]


def _plan(x: Tensor, index: Any, oob_int: str = "raise") -> _Plan | None:
    """Split an index into its basic part and its index arrays, following numpy's rules.

    An int out of range raises IndexError (`oob_int="raise"`), is clamped into the axis (`"clip"`: JAX's `x[11]` on
    10 elements reads x[9], and `x[-12]` x[0]), makes the whole index select nothing (`"drop"`: the plan is None) or
    becomes a 0-d index array that the gather's mode handles (`"array"`). An empty axis has no position to clamp to:
    an int into it raises whatever `oob_int` says.
    """
    raw = _index_items(index, x.uop.device)
    items = _expand_index(raw, x.ndim)
    if oob_int != "raise":
        dims = iter(range(x.ndim))
        for k, i in enumerate(items):
            d = next(dims) if i is not None else None
            if isinstance(i, (int, np.integer)) and not -x.shape[d] <= int(i) < x.shape[d]:
                if oob_int == "drop":
                    return None
                if oob_int == "clip" and x.shape[d]:
                    items[k] = min(max(int(i) + x.shape[d] if i < 0 else int(i), 0), x.shape[d] - 1)
                elif oob_int == "clip":
                    raise IndexError(f"index {int(i)} is out of bounds for axis {d} with size 0")
                else:
                    items[k] = _index_array(int(i), x.uop.device)
    if not any(isinstance(i, (Tensor, _MaskPart)) for i in items):
        return _Plan(_basic_plan(x.shape, items), (), (), (), 0)
    basic, axes, arrays, adv = [], [], [], []
    dim = ydim = before = 0
    for k, i in enumerate(items):
        if isinstance(i, _MaskPart):
            if x.shape[dim] != i.size and i.size:   # an empty boolean axis selects nothing from any axis, as numpy
                raise IndexError(f"boolean index did not match indexed array along axis {dim}; size of axis is "
                                 f"{x.shape[dim]} but size of corresponding boolean axis is {i.size}")
            i = _index_array(i.positions, x.uop.device)
        if isinstance(i, Tensor):
            axes.append(ydim)
            arrays.append(i)
            basic.append(slice(None))
            adv.append(k)
        else:
            if isinstance(i, (int, np.integer)):
                adv.append(k)
            elif not adv:
                before += 1
            basic.append(i)
        dim += i is not None
        ydim += not isinstance(i, (int, np.integer))
    try:
        bshape = broadcast_shapes(*(t.shape for t in arrays))
    except ValueError as e:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                         f"{' '.join(str(t.shape) for t in arrays)}") from e
    adjacent = adv[-1] - adv[0] + 1 == len(adv) and not _ellipsis_between(raw)
    return _Plan(_basic_plan(x.shape, basic), tuple(axes), tuple(arrays), bshape, before if adjacent else 0)


def _ellipsis_between(raw: list[Any]) -> bool:
    """Whether an Ellipsis stands between two advanced items (ints, index arrays, mask parts): numpy and JAX then put
    the broadcast axes first, also where it stands for no axes (`x[:, 0, ..., [1, 0], :]` of a 4-d x)."""
    adv = [k for k, i in enumerate(raw) if not (i is None or i is Ellipsis or isinstance(i, slice))]
    return any(i is Ellipsis and adv[0] < k < adv[-1] for k, i in enumerate(raw)) if adv else False


def _normalize(idx: Tensor, n: int, mode: str) -> Tensor:
    """Indices into an axis of length n: negative ones count from the end, then `mode` treats the rest.

    "clip" clamps into [0, n-1]; "wrap" takes them modulo n; "fill" and "drop" leave them out of range, where they
    match no position of the one-hot compare. Indices from host data whose range needs none of it are left as they
    are (an eager `x[np_idx]` of a batch loader spent a third of its time on these ops).
    """
    base = view_chain(idx.uop)[1]
    lo, hi = (base.arg, base.arg) if base.op is Ops.CONST else base.__dict__.get("host_range", (-1, n))
    if lo >= 0 and (hi < n or mode in ("fill", "drop")):
        return idx
    if mode == "wrap":
        return ew.remainder(idx, n)
    idx = ew.where(idx < 0, idx + n, idx)
    return ew.clip(idx, 0, n - 1) if mode == "clip" else idx


def _in_range(idx: Tensor, n: int) -> Tensor:
    return ew.logical_and(idx >= 0, idx < n)


def _zero(d: DType) -> Tensor:
    """What a one-hot sum adds where it does not pick: -0.0 for floats (both parts of a complex value), so that with
    the sum's own -0.0 start it returns the picked value bit for bit (a -0.0 too) where the lowering keeps the sum
    (tgfx/lowering/gather.py)."""
    if d.is_complex:
        return Tensor.full((), complex(-0.0, -0.0), d)
    return Tensor.full((), False if d.is_bool else -0.0 if d.is_float else 0, d)


def _sum_exact(t: Tensor, axes: tuple[int, ...]) -> Tensor:
    """Sum in t's own dtype (no integer widening): with one nonzero term per output this is exact."""
    if not axes:
        return t
    return t._reduce(Ops.MAX if t.dtype.is_bool else Ops.ADD, axes, False)


def _fill_value(d: DType) -> bool | int | float:
    """JAX's default fill for out-of-range gathers: NaN, the most negative int, the largest unsigned, True."""
    if d.is_float:
        return float("nan")
    if d.is_bool:
        return True
    return (1 << d.bits) - 1 if d.is_unsigned else -(1 << (d.bits - 1))


def _check_mode(mode: str | None, allowed: tuple[str, ...], default: str, fn: str) -> str:
    mode = default if mode is None else mode
    if mode == "promise_in_bounds":
        return default
    if mode not in allowed:
        raise ValueError(f"{fn}: unsupported mode {mode!r}; use one of {', '.join(repr(m) for m in allowed)}")
    return mode


def _gather(x: Tensor, plan: _Plan, mode: str, fill_value: ArrayLike | None) -> Tensor:
    """x[index] for a plan with index arrays: a where-and-sum over the indexed positions, which the lowering turns
    into one load per output element (tgfx/lowering/gather.py)."""
    y = _apply_basic(x, plan.basic)
    rest = plan.rest
    ns = tuple(y.shape[a] for a in plan.axes)
    nb, nr, k = len(plan.bshape), len(rest), len(plan.axes)
    out_shape = plan.bshape + tuple(y.shape[a] for a in rest)
    if 0 in ns and prod(plan.bshape) and mode != "fill":
        raise IndexError(f"cannot gather from an axis of size 0 (Tensor of shape {x.shape}, index {plan.bshape})")
    idxs = [_normalize(i.expand(plan.bshape), n, mode) for i, n in zip(plan.idxs, ns, strict=True)]
    if prod(out_shape) == 0 or 0 in ns:  # nothing to read: an empty result, or only fills
        out = Tensor.full(out_shape, 0 if mode != "fill" else _fill_value(x.dtype) if fill_value is None else
                          fill_value, x.dtype)
    else:
        # (index axes, indexed axes, the rest): the sum's gradient, a scatter, then comes out in y's own layout, its
        # indexed rows outermost (an embedding table's gradient was stored features x rows, each update's row a
        # strided column, then transposed: 2.4 ms for 5,120 rows of 64 into 20,000; 0.3 now)
        yp = y.permute(*plan.axes, *rest)
        yb = yp.reshape((1,) * nb + yp.shape).expand(plan.bshape + ns + out_shape[nb:])
        mask = None
        for j, (idx, n) in enumerate(zip(idxs, ns, strict=True)):
            pos = Tensor.arange(n, dtype=idx.dtype).reshape((1,) * nb + tuple(n if a == j else 1 for a in range(k)) +
                                                            (1,) * nr)
            hit = idx.reshape(plan.bshape + (1,) * (k + nr)) == pos
            mask = hit if mask is None else ew.logical_and(mask, hit)
        out = _sum_exact(mask.where(yb, _zero(x.dtype)), tuple(range(nb, nb + k)))
        if mode == "fill":
            valid = None
            for idx, n in zip(idxs, ns, strict=True):
                v = _in_range(idx, n)
                valid = v if valid is None else ew.logical_and(valid, v)
            fv = _fill_value(x.dtype) if fill_value is None else fill_value
            out = valid.reshape(plan.bshape + (1,) * nr).where(out, to_tensor(fv, like=out)).astype(x.dtype)
    if plan.pos:
        out = out.permute(*range(nb, nb + plan.pos), *range(nb), *range(nb + plan.pos, nb + nr))
    return out


def getitem(x: Tensor, index: Any, mode: str | None = None, fill_value: ArrayLike | None = None) -> Tensor:
    """x[index] with numpy's rules for basic and integer-array indices (JAX's for out-of-range array entries).

    Basic indices (ints, slices, None, Ellipsis) are views, and an int out of range raises IndexError as in numpy.
    Integer arrays (Tensors, numpy arrays, lists) broadcast together; their axes replace the indexed axes in place
    when the advanced indices are adjacent, and go first otherwise. Negative entries count from the end, and as in
    JAX an entry still out of range is clamped into range (`mode="clip"`, the default); `mode="fill"` returns
    `fill_value` there instead (NaN for floats by default) and `mode="wrap"` takes it modulo the axis length.
    A Tensor index is an array even when it is 0-d: `x[i]` with `i` a traced value (an argument under `jit`, a
    `tg.lax.fori_loop` step, a `vmap`ped index) or an eager integer scalar Tensor reads `x[clip(i + n if i < 0 else
    i, 0, n - 1)]`, as in JAX. A Python int out of range is an IndexError, as in numpy (JAX clamps it too): it is
    part of the program, not data, and an index past the end there is a bug to report, not to hide.

    A boolean mask (a Tensor or numpy array) is read and turned into integer positions on the host, as numpy and
    JAX do; while tracing (`jit`, `vmap`) a Tensor mask's value is not known, and that is an error saying to use
    `tnp.where(mask, x, fill)` or `x[tnp.nonzero(mask, size=N)]`, as in JAX.

    Cost: one kernel that loops over (output element, indexed source position), i.e. out.size * n1 * n2 * ... for
    the lengths n_i of the axes indexed by arrays.

    >>> x = tnp.arange(12).reshape(3, 4)
    >>> x[[2, 0], 1:3].tolist()
    [[9, 10], [1, 2]]
    """
    return keep_weak(_getitem(x, index, mode, fill_value), x)   # elements of a weakly typed x are, as JAX's


def _getitem(x: Tensor, index: Any, mode: str | None, fill_value: ArrayLike | None) -> Tensor:
    x, index = _scalar_bools_as_axes(x, index)   # x[True] (a new axis), x[False] (a new empty axis), x[0, True]
    if mode in (None, "clip") and (items := _window_items(x, index)) is not None and \
            all(not isinstance(i, int) or 0 <= i < n for i, n in zip(items, x.shape, strict=True)):
        # one position along some axes, one by a traced index: a view at runtime starts (clamped), no gather
        starts, window = _window(x, items)
        y = window_at(Ops.DYNAMIC_SHRINK, x, starts, window, x.shape)
        return y.reshape(tuple(n for i, n in zip(items, x.shape, strict=True) if i is None))
    plan = _plan(x, index, "clip" if mode in (None, "clip") else "array")   # JAX clamps a static int too
    mode = _check_mode(mode, ("clip", "fill", "drop", "wrap"), "clip", "getitem")
    mode = "fill" if mode == "drop" else mode
    assert plan is not None, "only oob_int='drop' gives no plan"
    if not plan.axes:
        return _apply_basic(x, plan.basic)
    return _gather(x, plan, mode, fill_value)


def _window_items(x: Tensor, index: Any) -> list[int | Tensor | None] | None:
    """Per axis of x: None where `index` takes the axis whole, else the one position it picks (a Python int, or a 0-d
    integer Tensor, negatives counted from the end): when the index is only those, with at least one Tensor (a
    loop's step `i`), on one device. None for any other index."""
    if not isinstance(index, (tuple, Tensor)) or isinstance(x.uop.device, tuple) or x.size == 0 or \
            any(i is None for i in (index if isinstance(index, tuple) else ())):
        return None
    try:
        items = _expand_index(index, x.ndim)
    except IndexError:
        return None
    out: list[int | Tensor | None] = []
    for i, n in zip(items, x.shape, strict=True):
        if isinstance(i, slice) and i == slice(None):
            out.append(None)
        elif isinstance(i, Tensor) and i.shape == () and i.dtype.is_int:
            out.append(_normalize(signed_index(i), n, "drop"))   # (negatives counted from the end, no more)
        elif isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            out.append(int(i) + n if i < 0 else int(i))
        else:
            return None
    return out if any(isinstance(i, Tensor) for i in out) else None


def _window(x: Tensor, items: list[int | Tensor | None]) -> tuple[list[int | Tensor], tuple[int, ...]]:
    """The starts and window shape of `_window_items`' positions: 1 along a picked axis, whole along the others."""
    return [0 if i is None else i for i in items], tuple(n if i is None else 1 for i, n in zip(items, x.shape,
                                                                                                strict=True))


# ---- take and take_along_axis ----
def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: ArrayLike | None = None) -> Tensor:
    """numpy.take: elements of `a` at `indices` along `axis` (of the flattened `a` when axis is None).

    Out-of-range indices follow jnp.take: `mode="fill"` (the default) gives `fill_value` (NaN for floats, the most
    negative int for signed ints) and negative indices count from the end; "wrap" wraps; "clip" clamps into the
    axis, negative indices to 0 (as `np.take` and `jnp.take`, unlike indexing's `.at[i].get(mode="clip")`).
    "raise" (numpy's) checks indices known on the host. `unique_indices` and `indices_are_sorted` are JAX's promises,
    which tgfx does not need; `out` is numpy's and must be None (Tensors are immutable). The arguments are in JAX's
    order. Cost: one kernel, one load per output element.
    """
    if out is not None:
        raise ValueError("take: out= is not supported (Tensors are immutable, as JAX's arrays); use the result")
    x = to_tensor(a)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis(axis, x.ndim, "take")
    idx = _index_array(indices, x.uop.device)
    if mode == "raise":   # numpy's default (np.take(tensor, ...) passes it): for indices known on the host
        from tgfx.numpy._data_dependent import host_value
        n, host = x.shape[axis], host_value(idx, "take", "the indices", "use mode='fill' or 'clip' under tracing")
        if host.size and not (-n <= host.min() and host.max() < n):
            raise IndexError(f"take: index {host.max() if host.max() >= n else host.min()} is out of bounds for axis "
                             f"{axis} with size {n}")
        mode = "fill"
    mode = _check_mode(mode, ("fill", "clip", "wrap"), "fill", "take")
    if x.shape[axis] == 0 and idx.size:   # whatever the mode, as jnp.take
        raise IndexError(f"take: cannot take from axis {axis} of size 0 (a of shape {x.shape}) with indices of shape "
                         f"{idx.shape}")
    if mode == "clip" and x.shape[axis]:
        idx = ew.clip(idx, 0, x.shape[axis] - 1)
    return getitem(x, (slice(None),) * axis + (idx,), mode, fill_value)


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None = -1, mode: str | None = None,
                    fill_value: ArrayLike | None = None) -> Tensor:
    """numpy.take_along_axis: out[..., j, ...] = arr[..., indices[..., j, ...], ...] along `axis` (the last by
    default, as numpy 2.3's and the array API standard's; None: along the flattened arr).

    `indices` has arr's number of dimensions and its other axes broadcast against arr's. Out-of-range indices as
    `take` (default "fill"); from an axis of length 0 the result is zeros, whatever the mode, as JAX's. Cost: one
    kernel, one load per output element.
    """
    x = to_tensor(arr)
    idx = _index_array(indices, x.uop.device)
    if axis is None:
        if idx.ndim != 1:
            raise ValueError(f"take_along_axis: with axis=None the indices must be 1-d, got shape {idx.shape}")
        x, axis = x.reshape(-1), 0
    if idx.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices and arr must have the same number of dimensions, got shapes "
                         f"{idx.shape} and {x.shape}")
    axis = normalize_axis(axis, x.ndim, "take_along_axis")
    mode = _check_mode(mode, ("fill", "clip", "wrap"), "fill", "take_along_axis")
    fv = _fill_value(x.dtype) if fill_value is None else fill_value
    n = x.shape[axis]
    try:
        shape = broadcast_shapes(_without(x.shape, axis), _without(idx.shape, axis), name="take_along_axis")
    except ValueError as e:
        raise ValueError(f"take_along_axis: indices of shape {idx.shape} do not broadcast against arr of shape "
                         f"{x.shape} outside axis {axis}") from e
    shape = shape[:axis] + (idx.shape[axis],) + shape[axis:]                   # the result's
    if prod(shape) == 0 or n == 0:
        return Tensor.full(shape, 0, x.dtype)
    i = _normalize(idx, n, mode)
    # a one-hot sum over a new last axis, the result in arr's own layout (summed over the moved axis and moved back,
    # it was stored transposed: written a row a column)
    xm = x.permute(*(a for a in range(x.ndim) if a != axis), axis)
    xb = xm.reshape(xm.shape[:axis] + (1,) + xm.shape[axis:]).expand(shape + (n,))
    hit = i.reshape(i.shape + (1,)) == Tensor.arange(n, dtype=i.dtype)
    out = _sum_exact(hit.where(xb, _zero(x.dtype)), (len(shape),))
    if mode == "fill":
        out = _in_range(i, n).where(out, to_tensor(fv, like=out)).astype(x.dtype)
    return out


def _without(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
    return shape[:axis] + shape[axis + 1:]
