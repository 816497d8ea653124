"""Movement: reshapes, transposes, broadcasting, padding, joining and splitting. All are views until lowering."""
from __future__ import annotations

import ctypes
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tgfx.devices import get_device
from tgfx.dtypes import DType, dtypes, is_python_scalar, promote_weak, to_dtype
from tgfx.ir.uop import UOp, buffers
from tgfx.lowering.eager import note_signature
from tgfx.lowering.execute import range_view
from tgfx.numpy import _elementwise as ew
from tgfx.tensor import (
    ArrayLike,
    ShapeError,
    Tensor,
    _is_weak_tensor,
    _reshape_uop,
    _scalar_operand,
    broadcast_shapes,
    is_realized,
    lazy_node,
    normalize_axes,
    normalize_axis,
    on_one_device,
    promotion_kind,
    static_int,
    to_tensor,
    weak,
)
from tgfx.trace_state import active


def reshape(x: ArrayLike, shape: int | Sequence[int], order: str = "C", *, copy: bool | None = None) -> Tensor:
    """x with a new shape: a view (`copy=False` asks for one, always possible here), or a new buffer with
    `copy=True`. `order="F"` reads and writes the elements with the first index changing fastest, as numpy's (the
    reversed axes reshaped in C order); 'A' is JAX's NotImplementedError."""
    x = to_tensor(x)
    if order == "F":
        new = (shape,) if isinstance(shape, int) else tuple(shape)
        out = transpose(transpose(x).reshape(new[::-1]))
    elif order == "C":
        out = x.reshape(shape)
    else:
        raise NotImplementedError(f"reshape: order={order!r}; use 'C' or 'F'")
    return out.contiguous() if copy else out


def ravel(x: ArrayLike, order: str = "C") -> Tensor:
    """x flattened, in C order or (`order="F"`) the first index changing fastest."""
    return reshape(x, -1, order)


def transpose(x: ArrayLike, axes: Sequence[int] | None = None) -> Tensor:
    if axes is None and type(x) is Tensor and len((u := x.uop).shape) >= 2:
        # (`x.T`, reversed axes: the node `permute` builds, without normalising and checking each axis)
        return x._view(UOp(Ops.PERMUTE, u.dtype, (u,), tuple(range(len(u.shape) - 1, -1, -1))))
    x = to_tensor(x)
    return x.permute(*(tuple(reversed(range(x.ndim))) if axes is None else axes)) if x.ndim else x


def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Tensor:
    x = to_tensor(x)
    a, b = normalize_axis(axis1, x.ndim, "swapaxes"), normalize_axis(axis2, x.ndim, "swapaxes")
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return x.permute(*perm)


def moveaxis(x: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    x = to_tensor(x)
    src = normalize_axes(source, x.ndim, "moveaxis")
    dst = normalize_axes(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} need the same number of axes")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return x.permute(*order)


def broadcast_to(x: ArrayLike, shape: Sequence[int]) -> Tensor:
    return to_tensor(x).expand(tuple(shape))


def broadcast_arrays(*xs: ArrayLike) -> list[Tensor]:
    ts = [to_tensor(x) for x in xs]
    shape = broadcast_shapes(*(t.shape for t in ts), name="broadcast_arrays")
    return [t.expand(shape) for t in ts]


def expand_dims(x: ArrayLike, axis: int | Sequence[int]) -> Tensor:
    x = to_tensor(x)
    nd = x.ndim + (1 if static_int(axis) is not None else len(axis))
    axes = normalize_axes(axis, nd, "expand_dims")
    it = iter(x.shape)
    return x.reshape(tuple(1 if i in axes else next(it) for i in range(nd)))


def squeeze(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Tensor:
    x = to_tensor(x)
    if axis is None:
        axes = tuple(i for i, s in enumerate(x.shape) if s == 1)
    else:
        axes = normalize_axes(axis, x.ndim, "squeeze")
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one "
                             f"(axis {bad[0]} of shape {x.shape})")
    return x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in axes))


def flip(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Tensor:
    return to_tensor(x).flip(axis)


def fliplr(x: ArrayLike) -> Tensor:
    return flip(x, 1)


def flipud(x: ArrayLike) -> Tensor:
    return flip(x, 0)


def _pad_widths(pad_width: int | Sequence, ndim: int) -> tuple[tuple[int, int], ...]:
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (ndim, 2)) if ndim else np.zeros((0, 2), np.int64)
    if (pw < 0).any():
        raise ValueError(f"pad: negative pad widths are not allowed, got {pad_width}")
    return tuple((int(b), int(a)) for b, a in pw)


def pad(x: ArrayLike, pad_width: int | Sequence, mode: str | Callable[..., Any] = "constant",
        constant_values: ArrayLike = 0, *, stat_length: ArrayLike | None = None, end_values: ArrayLike = 0,
        reflect_type: str = "even", **kwargs: Any) -> Tensor:
    """numpy.pad, as `jnp.pad`: modes 'constant' (`constant_values` a scalar or per-side pairs), 'edge', 'reflect' and
    'symmetric' (`reflect_type` 'even' or 'odd'), 'wrap', 'linear_ramp' (to `end_values`), the statistics 'maximum',
    'minimum', 'mean' and 'median' (of the `stat_length` elements next to each side), and 'empty' (zeros).

    `mode` may be a function `mode(vector, (before, after), axis, kwargs) -> vector`, as jnp.pad's: x is padded with
    zeros, then each axis in turn has every 1-d slice along it replaced by what the function returns for it (the
    extra keyword arguments of the call are its `kwargs`).

    >>> tnp.pad(tnp.arange(2.0), 1, lambda v, w, axis, kw: v.at[:w[0]].set(kw["fill"]), fill=7.0)   # [7, 0, 1, 0]
    """
    from tgfx.numpy import _pad
    x = to_tensor(x)
    pw = _pad_widths(pad_width, x.ndim)
    if callable(mode):
        from tgfx.numpy._sets import apply_along_axis
        padded = x.pad_zeros(pw)
        for ax in range(x.ndim):
            padded = apply_along_axis(mode, ax, padded, pw[ax], ax, kwargs)
        return padded
    if kwargs:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(kwargs)}; those are passed "
                         f"to a mode that is a function")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    if mode == "constant":
        if static_int(constant_values) is not None or isinstance(constant_values, (float, bool)):
            padded = x.pad_zeros(pw)
            if constant_values == 0:
                return padded
            inside = Tensor.full(x.shape, True).pad_zeros(pw)
            return ew.where(inside, padded, constant_values).astype(x.dtype)
        return _pad.pad_constant(x, pw, constant_values)
    if mode == "empty":
        return _pad.pad_empty(x, pw)
    modes = ("edge", "reflect", "symmetric", "wrap", "linear_ramp", *_pad.STAT_MODES)
    if mode not in modes:
        raise ValueError(f"pad: unsupported mode {mode!r}; use 'constant', 'empty' or one of {modes}")
    for ax in (ax for ax, (b, a) in enumerate(pw) if x.shape[ax] == 0 and (b or a)):
        raise ValueError(f"pad: can't extend empty axis {ax} using mode {mode!r}")
    if mode == "linear_ramp":
        return _pad.pad_linear_ramp(x, pw, end_values)
    if mode in _pad.STAT_MODES:
        return _pad.pad_stat(x, pw, mode, stat_length)
    if reflect_type == "odd" and mode in ("reflect", "symmetric"):
        return _pad.pad_reflect_odd(x, pw, mode)
    for ax, (b, a) in enumerate(pw):
        if b == 0 and a == 0:
            continue
        n = x.shape[ax]
        # the whole padded axis as source indices into x: _take_axis joins them as a few runs of slices
        x = _take_axis(x, ax, [_pad_source(p, n, mode) for p in range(-b, n + a)])
    return x


def _runs(idx: list[int]) -> list[tuple[int, int, int]]:
    """`idx` cut into maximal runs (start, length, step) with step +1, -1 or 0."""
    runs: list[tuple[int, int, int]] = []
    for i in idx:
        if runs:
            start, n, step = runs[-1]
            if n == 1 and i - start in (-1, 0, 1):
                runs[-1] = (start, 2, i - start)
                continue
            if n > 1 and i == start + n * step:
                runs[-1] = (start, n + 1, step)
                continue
        runs.append((i, 1, 0))
    return runs


def _take_axis(x: Tensor, ax: int, idx: list[int]) -> Tensor:
    """x indexed along `ax` by a static list of indices: one slice per run of neighbouring indices (flipped where
    they descend, broadcast where they repeat), joined together. A reflect pad of width k is a few runs, not k."""
    pieces = []
    for start, n, step in _runs(idx):
        lo, hi = (start, start + n) if step > 0 else (start - n + 1, start + 1) if step < 0 else (start, start + 1)
        piece = x.shrink(tuple((lo, hi) if a == ax else (0, s) for a, s in enumerate(x.shape)))
        if step < 0:
            piece = piece.flip(ax)
        elif step == 0 and n > 1:
            piece = piece.expand(tuple(n if a == ax else s for a, s in enumerate(x.shape)))
        pieces.append(piece)
    return concatenate(pieces, axis=ax) if len(pieces) > 1 else pieces[0]


def _pad_source(p: int, n: int, mode: str) -> int:
    """The source index of padded position p (inside [0, n) itself): reflect skips the edge, symmetric repeats it."""
    if mode == "edge":
        return min(max(p, 0), n - 1)
    if mode == "wrap":
        return p % n
    period = 2 * n - 2 if mode == "reflect" else 2 * n
    if period == 0:
        return 0
    j = p % period
    if j < n:
        return j
    return period - j if mode == "reflect" else period - 1 - j


def joined(xs: Sequence[ArrayLike], name: str, names: Sequence[str] | None = None,
           dtype: DType | str | type | None = None) -> tuple[list[Tensor], bool]:
    """The arrays a join (concatenate, stack, ...) takes, as Tensors of their JAX result type, and whether that type is
    weak. Python scalars and weakly typed Tensors are weak, as in JAX: `stack([int8 x, 3])` is int8 (the 3 converted
    as `x + 3` converts it) and `stack([int8 x, 2.5])` a weak float32.

    A list or tuple among them is a TypeError naming it (`names`, else `arrays[i]`), as in JAX: numpy reads
    `concatenate([[1, 2], [3]])` as two arrays, JAX refuses nested sequences (the join's arrays must be arrays).
    A `dtype` converts each array to it (strongly typed), as the `dtype=` of JAX's joins."""
    xs = list(xs)
    if dtype is None and xs and type(xs[0]) is Tensor:
        d, dev = xs[0].uop.dtype, xs[0].uop.device
        for x in xs:   # (a loop, not `all` of a generator: each of those steps is a call, and eager joins run this)
            if type(x) is not Tensor or x.uop.dtype is not d or _is_weak_tensor(x) or x.uop.device != dev:
                break
        else:
            return xs, False   # (Tensors of one dtype and device, none weak, the common case: nothing to do)
    for i, x in enumerate(xs):
        if isinstance(x, (list, tuple)):
            what = names[i] if names is not None else f"arrays[{i}]"
            raise TypeError(f"{name}: {what} is a {type(x).__name__}; {name} takes arrays and scalars, not nested "
                            f"sequences, as jnp.{name} (make it an array with tnp.asarray({what}))")
    items = [x if is_python_scalar(x) else to_tensor(x) for x in xs]
    if not items:
        raise ValueError(f"{name}: need at least one array to {name}")
    if dtype is not None:
        d = to_dtype(dtype)
        ts, weak_result = [x.cast(d) if isinstance(x, Tensor) else _scalar_operand(x, d, name) for x in items], False
    else:
        d, weak_result = promote_weak(*map(promotion_kind, items))
        ts = [x.cast(d) if isinstance(x, Tensor) else _scalar_operand(x, d, name) for x in items]
    d0 = ts[0].uop.device
    for t in ts:
        if t.uop.device != d0:   # uncommitted arrays go where the committed ones are (`tgfx/placement.py`)
            return list(on_one_device(ts, name)), weak_result
    return ts, weak_result


def concatenate(xs: Sequence[ArrayLike], axis: int | None = 0, dtype: DType | str | type | None = None) -> Tensor:
    """The arrays joined along an existing `axis` (all flattened first when None), in their JAX result type (Python
    scalars are weak: see `joined`) or `dtype`."""
    ts, weak_result = joined(xs, "concatenate", dtype=dtype)
    if axis is None:
        ts, axis = [t.reshape(-1) for t in ts], 0
    return concat(ts, axis, weak_result)


def concat(ts: list[Tensor], axis: int, weak_result: bool = False) -> Tensor:
    """Tensors of one dtype (`joined`'s) joined along `axis`; weakly typed with `weak_result`."""
    out = _concat(ts, axis)
    return weak(out) if weak_result else out


def _concat(ts: list[Tensor], axis: int) -> Tensor:
    return _join([t.uop for t in ts], axis)


def _join(us: list[UOp], axis: int) -> Tensor:
    """Nodes `us` of one dtype joined along `axis` (concatenate's, on the pieces' nodes: `stack` gives it the
    reshapes of its pieces, without a Tensor for each)."""
    first = us[0].shape
    nd = len(first)
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    if type(axis) is not int or not 0 <= axis < nd:
        axis = normalize_axis(axis, nd, "concatenate")
    total = 0
    for u in us:   # (loops, not generators, here and below: each of their steps is a call)
        s = u.shape
        if len(s) != nd or s[:axis] != first[:axis] or s[axis + 1:] != first[axis + 1:]:
            raise ShapeError(f"concatenate: all input array dimensions except for the concatenation axis {axis} must "
                             f"match, got shapes {[u.shape for u in us]}")
        total += s[axis]
    if len(us) >= HOST_CONCAT_MIN and (host := _host_values(us)) is not None:
        return Tensor(np.concatenate(host, axis=axis), dtype=us[0].dtype, device=us[0].device)
    d = us[0].dtype
    if d.kind == "b":
        out, off = None, 0
        for u in us:
            p = Tensor(u).pad_zeros(_pads(nd, axis, off, u.shape[axis], total))
            out = p if out is None else ew.logical_or(out, p)
            off += u.shape[axis]
        return out
    # each piece padded to the whole and the pieces added, built as nodes (a Tensor and its promotion and broadcast
    # tests per piece and per add cost `stack` of three 16-float vectors 90 of its 140 us). A float piece is padded
    # with -0.0, the zero that adds to every value exactly (-0.0 + 0.0 is 0.0): negated, padded with zeros, negated
    # back. Each node a Tensor would have been is computed where such a Tensor would have been (`lazy_node`)
    negated = d.kind == "f" or d.kind == "c"
    out, off = None, 0
    lazy = True   # (no node computed on the way for growing too deep: the join's one form, which `_note_join` notes)
    for u in us:
        n = u.shape[axis]
        p, pads = u, _pads(nd, axis, off, n, total)
        if negated:
            p = lazy_node(q := UOp(_NEG, d, (p,)))
            lazy = lazy and p is q
        if off or n != total:   # (`any(pads[axis])`: not the whole)
            p = lazy_node(q := UOp(_PAD, d, (p,), pads))
            lazy = lazy and p is q
        if negated:
            p = lazy_node(q := UOp(_NEG, d, (p,)))
            lazy = lazy and p is q
        if out is None:
            out = p
        else:
            out = lazy_node(q := UOp(_ADD, d, (out, p)))
            lazy = lazy and out is q
        off += n
    if lazy and out.op is _ADD and "op_signature" not in out.__dict__:
        _note_join(out, us, axis)
    return Tensor(out)


def _note_join(out: UOp, us: list[UOp], axis: int) -> None:
    """A join of computed values (each a buffer or a view of one in another shape) is one form per its pieces' shapes
    and views, its axis, dtype and device and which pieces are the same buffer: its signature is noted once per form
    (`note_signature`), so that reading it finds its program without describing its graph."""
    bases, form = [], []
    for u in us:
        b = u.src[0] if u.op is _RESHAPE else u
        if b.op is not _BUFFER or b.arg[0] < 0:
            return
        form.append((u.op, u.arg, u.tag, b.arg[2]))
        bases.append(b)
    inputs = list(dict.fromkeys(bases))
    note_signature(out, ("join", axis, out.dtype, bases[0].arg[1], tuple(form), tuple(map(inputs.index, bases))),
                   inputs)


def _pads(nd: int, axis: int, off: int, n: int, total: int) -> tuple[tuple[int, int], ...]:
    """The PAD widths that place a piece of `n` at `off` along `axis` of a join `total` long."""
    pads = [(0, 0)] * nd
    pads[axis] = (off, total - off - n)
    return tuple(pads)


# Eager concatenations of this many values or more that are all in host memory (a batch stacked from a list of
# samples) are joined on the host: as a graph, their kernel depended on which inputs were the same buffer (a sample
# drawn twice), and each such pattern compiled anew (1.3 s a call for 128 samples drawn from 1,000); jax 0.6 ms.
HOST_CONCAT_MIN = 8


def _host_values(us: list[UOp]) -> list[np.ndarray] | None:
    """The values of nodes `us`, read without kernels: outside any trace, when each is computed (or a contiguous range
    of a computed value) on one device whose memory is the host's. None otherwise.

    A computed buffer (or a view of one in another shape) is read where it lies, as a numpy view of its memory once
    the device is done, copied once by the join (`mean(stack(metrics))` of ten losses read each through `numpy()`:
    a Tensor, a wait and a copy each, half of its 98 us); a range, or a bfloat16 (numpy has no such type), through
    `numpy()` as before."""
    if active():
        return None
    device = us[0].device
    if not isinstance(device, str) or not (dev := get_device(device)).host_memory:
        return None
    out: list[np.ndarray] = []
    for u in us:
        if u.device != device:
            return None
        b = u if u.op is _BUFFER else u.src[0] if u.op is _RESHAPE and u.src[0].op is _BUFFER else None
        if b is not None and b.dtype is not dtypes.bfloat16 and (mem := buffers.get(id(b))) is not None and \
                (n := b.arg[2]):   # (its bytes, read once the device is done: below)
            out.append(np.frombuffer((ctypes.c_char * (n * b.dtype.itemsize)).from_address(mem.ptr),
                                     b.dtype.np).reshape(u.shape))
            continue
        if not is_realized(u) and (u := range_view(u)) is None:
            return None
        out.append(Tensor(u).numpy())   # (a range of a computed value: its memory, found once)
    dev.synchronize()   # (what was queued to write the buffers viewed above is done before the join reads them)
    return out


from tgfx.ir.ops import Ops  # noqa: E402

_ADD, _NEG, _PAD, _BUFFER, _RESHAPE = Ops.ADD, Ops.NEG, Ops.PAD, Ops.BUFFER, Ops.RESHAPE


def stack(xs: Sequence[ArrayLike], axis: int = 0, out: None = None, dtype: DType | str | type | None = None) -> Tensor:
    """The arrays (of one shape) joined along a new `axis`, in their JAX result type (see `joined`) or `dtype`."""
    if out is not None:
        raise NotImplementedError("stack: the out argument is not supported, as in JAX (Tensors are immutable)")
    ts, weak_result = joined(xs, "stack", dtype=dtype)
    first = ts[0].uop.shape
    for t in ts:
        if t.uop.shape != first:
            raise ValueError(f"stack: all input arrays must have the same shape, got {[t.shape for t in ts]}")
    if type(axis) is not int or not 0 <= axis <= len(first):
        axis = normalize_axis(axis, len(first) + 1, "stack")
    shape = first[:axis] + (1,) + first[axis:]   # (expand_dims of each, without its tests or a Tensor)
    us = []
    for t in ts:
        us.append(lazy_node(_reshape_uop(t.uop, shape)))
    out = _join(us, axis)
    return weak(out) if weak_result else out


def vstack(xs: Sequence[ArrayLike], dtype: DType | str | type | None = None) -> Tensor:
    """The arrays, each made at least 2-d, joined along axis 0 (Python scalars weak, as `stack`'s)."""
    ts, weak_result = joined(xs, "vstack", dtype=dtype)
    return concat([atleast_2d(t) for t in ts], 0, weak_result)


def hstack(xs: Sequence[ArrayLike], dtype: DType | str | type | None = None) -> Tensor:
    """The arrays, each made at least 1-d, joined along axis 1 (axis 0 for 1-d ones; Python scalars weak)."""
    ts, weak_result = joined(xs, "hstack", dtype=dtype)
    ts = [t.reshape(1) if t.ndim == 0 else t for t in ts]
    return concat(ts, 0 if ts[0].ndim == 1 else 1, weak_result)


def atleast_2d(x: ArrayLike) -> Tensor:
    x = to_tensor(x)
    return x.reshape((1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x


def split(x: ArrayLike, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    x = to_tensor(x)
    axis = normalize_axis(axis, x.ndim, "split")
    n = x.shape[axis]
    if (k := static_int(indices_or_sections)) is not None:
        if k <= 0 or n % k:
            raise ValueError(f"split: array split does not result in an equal division (axis {axis} of length {n} "
                             f"into {k} sections); use array_split or give split indices")
        bounds = [i * (n // k) for i in range(k + 1)]
    else:
        bounds = [0, *[operator.index(i) for i in indices_or_sections], n]
        if any(b > c for b, c in zip(bounds[:-1], bounds[1:], strict=True)):
            # JAX's: the pieces' sizes are the differences of the indices (numpy's negative and out-of-order
            # indices would give sizes below zero)
            raise ValueError(f"split: indices {list(bounds[1:-1])} along axis {axis} of length {n} must be "
                             f"nondecreasing and within [0, {n}]")
    return [x.shrink(tuple((bounds[i], max(bounds[i], bounds[i + 1])) if a == axis else (0, s)
                           for a, s in enumerate(x.shape))) for i in range(len(bounds) - 1)]


def array_split(x: ArrayLike, sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """x cut into `sections` pieces whose sizes differ by at most one (the longer ones first), or at the given
    indices, as `split`."""
    x = to_tensor(x)
    if static_int(sections) is None:
        return split(x, sections, axis)
    sections = static_int(sections)
    n = x.shape[normalize_axis(axis, x.ndim, "array_split")]
    q, r = divmod(n, sections)
    idx, acc = [], 0
    for i in range(sections - 1):
        acc += q + (1 if i < r else 0)
        idx.append(acc)
    return split(x, idx, axis)


def tile(x: ArrayLike, reps: int | Sequence[int]) -> Tensor:
    x = to_tensor(x)
    reps = (r,) if (r := static_int(reps)) is not None else tuple(int(v) for v in reps)
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    x = x.reshape((1,) * (nd - x.ndim) + x.shape)
    # (r0, s0, r1, s1, ...) broadcast then flattened pairwise
    inter = x.reshape(tuple(v for s in x.shape for v in (1, s)))
    big = inter.expand(tuple(v for r, s in zip(reps, x.shape, strict=True) for v in (r, s)))
    return big.reshape(tuple(r * s for r, s in zip(reps, x.shape, strict=True)))


def repeat(x: ArrayLike, repeats: int | Sequence[int], axis: int | None = None, *,
           total_repeat_length: int | None = None) -> Tensor:
    """Each element of `x` along `axis` (of the flattened x when None) `repeats` times (one count, or one per element).
    `total_repeat_length`, as JAX's, fixes the result's length: a longer sum is cut, a shorter one repeats the last
    element; it lets the counts be a traced Tensor (each output position gathers the element whose running count
    passes it)."""
    x = to_tensor(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis(axis, x.ndim, "repeat")
    if total_repeat_length is not None:
        return _repeat_to_length(x, repeats, axis, operator.index(total_repeat_length))
    if static_int(repeats) is not None:
        repeats = static_int(repeats)
    else:
        reps = [int(r) for r in repeats]
        if len(reps) == 1:
            repeats = reps[0]
        else:
            if len(reps) != x.shape[axis]:
                raise ValueError(f"repeat: {len(reps)} repeats for axis {axis} of length {x.shape[axis]}")
            return _take_axis(x, axis, [i for i, r in enumerate(reps) for _ in range(r)]) if sum(reps) else \
                x.shrink(tuple((0, 0) if a == axis else (0, s) for a, s in enumerate(x.shape)))
    if repeats < 0:
        raise ValueError(f"repeat: negative repeats {repeats}")
    shp = x.shape
    y = x.reshape(shp[:axis + 1] + (1,) + shp[axis + 1:])
    y = y.expand(shp[:axis + 1] + (repeats,) + shp[axis + 1:])
    return y.reshape(shp[:axis] + (shp[axis] * repeats,) + shp[axis + 1:])


def _repeat_to_length(x: Tensor, repeats: ArrayLike, axis: int, total: int) -> Tensor:
    from tgfx.numpy._data_dependent import searchsorted
    from tgfx.numpy._indexing import take
    from tgfx.numpy._reduce import cumsum
    n = x.shape[axis]
    if total < 0:
        raise ValueError(f"repeat: total_repeat_length must be at least 0, got {total}")
    counts = to_tensor(repeats)
    if counts.ndim > 1 or counts.ndim == 1 and counts.shape[0] not in (1, n):
        raise ValueError(f"repeat: repeats of shape {counts.shape} for axis {axis} of length {n}")
    if not counts.dtype.is_int:
        raise TypeError(f"repeat: repeats must be integers, got {counts.dtype.name}")
    ends = cumsum(broadcast_to(counts, (n,)))
    source = ew.minimum(searchsorted(ends, Tensor.arange(total, dtype=ends.dtype), side="right"), max(n - 1, 0))
    return take(x, source, axis=axis)


def roll(x: ArrayLike, shift: ArrayLike | Sequence[ArrayLike], axis: int | Sequence[int] | None = None) -> Tensor:
    """numpy.roll. A static shift is two slices joined; a traced one (an integer Tensor, e.g. a loop's index, as JAX
    allows) a gather at (i - shift) mod n."""
    x = to_tensor(x)
    if axis is None:
        return roll(x.reshape(-1), shift, 0).reshape(x.shape)
    # an axis may repeat: it is rolled once per shift given for it
    axes = tuple(normalize_axis(a, x.ndim, "roll") for a in ((axis,) if static_int(axis) is not None else axis))
    shifts = [shift] if static_int(shift) is not None or isinstance(shift, Tensor) and shift.ndim == 0 else \
        list(shift) if isinstance(shift, (Sequence, Tensor, np.ndarray)) else None
    if shifts is None or not all(static_int(s) is not None or isinstance(s, Tensor) and s.ndim == 0 and
                                 s.dtype.is_int for s in shifts):
        raise TypeError(f"roll: shift must be an int, an integer scalar Tensor or a sequence of them, got {shift!r}")
    # shifts and axes broadcast against each other, as numpy's and JAX's (one axis rolled by several shifts, in turn)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    elif len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes {axes}; give one shift per axis")
    for s, ax in zip(shifts, axes, strict=True):
        n = x.shape[ax]
        if n == 0:
            continue
        if isinstance(s, Tensor):
            from tgfx.numpy._indexing import take
            x = take(x, ew.remainder(Tensor.arange(n, dtype=s.dtype) - s, n), axis=ax)
            continue
        s = int(s) % n
        if s == 0:
            continue
        a, b = split(x, [n - s], ax)
        x = concatenate([b, a], axis=ax)
    return x
