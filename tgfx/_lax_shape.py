"""`jax.lax`'s shape operations, selections, constants and conversions.

Every axis argument is static (Python ints), so each function is a few view ops of the graph (RESHAPE, PERMUTE,
EXPAND, PAD, SHRINK, FLIP), at most one `where`, and no data copy of its own: they fuse into whatever reads them,
and `grad`, `vmap` and `jit` go through them with no rules of their own. As the rest of `tg.lax`, they do not
promote: `concatenate`, `select`, `select_n`, `clamp` and `pad` need operands of one dtype.

>>> x = tnp.arange(6.0).reshape(2, 3)
>>> tg.lax.broadcast_in_dim(tnp.arange(3.0), (2, 3), (1,))             # rows of [0, 1, 2]
>>> tg.lax.pad(tnp.asarray([1.0, 2.0, 3.0]), 0.0, [(1, -1, 1)])        # [0, 1, 0, 2, 0]: interior padding
>>> tg.lax.convert_element_type(tnp.asarray([1e10, float("nan")]), "int32")   # [2147483647, 0]: saturating
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx._lax_ops import BOOL, INT, check_kind, same_dtypes
from tgfx._lax_ops import operand as _arg  # (lax's own argument is called operand)
from tgfx.dtypes import DType, max_value, min_value, to_dtype, uint_of
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _movement as mv
from tgfx.tensor import ArrayLike, Tensor, is_weak, normalize_axes, normalize_axis


def _ints(name: str, what: str, v: Any, n: int | None = None) -> tuple[int, ...]:
    """A static sequence of Python ints (with `n` entries when given), or a TypeError naming the argument."""
    if isinstance(v, Tensor) or not isinstance(v, (Sequence, np.ndarray)) or isinstance(v, str):
        raise TypeError(f"lax.{name}: {what} must be a sequence of Python ints, got {v!r}")
    out = []
    for i in v:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"lax.{name}: {what} must be a sequence of Python ints, got {v!r}")
        out.append(int(i))
    if n is not None and len(out) != n:
        raise TypeError(f"lax.{name}: {what} must have {n} entries (one per axis), got {v!r}")
    return tuple(out)


# ---- shapes ----
def broadcast_in_dim(operand: ArrayLike, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Tensor:
    """operand broadcast to `shape`, its axis i becoming axis broadcast_dimensions[i], as `jax.lax.broadcast_in_dim`.

    Each of operand's axes has size 1 or the size of the axis it lands on; the other axes of `shape` are new.

    >>> tg.lax.broadcast_in_dim(tnp.ones((3, 1)), (2, 3, 4), (1, 2)).shape      # (2, 3, 4)
    """
    x = _arg(operand)
    shape = _ints("broadcast_in_dim", "shape", shape)
    dims = _ints("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions, x.ndim)
    if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
        raise TypeError(f"lax.broadcast_in_dim: broadcast_dimensions {dims} must be distinct axes of the result shape "
                        f"{shape}")
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise TypeError(f"lax.broadcast_in_dim: operand axis {i} has size {x.shape[i]}, which must be 1 or the "
                            f"size {shape[d]} of result axis {d} (operand shape {x.shape}, shape {shape}, "
                            f"broadcast_dimensions {dims})")
    order = sorted(range(x.ndim), key=lambda i: dims[i])   # operand axes in the order they land
    x = x.permute(order) if x.ndim else x
    where = {dims[i]: x.shape[k] for k, i in enumerate(order)}
    return x.reshape(tuple(where.get(a, 1) for a in range(len(shape)))).expand(shape)


def broadcast(operand: ArrayLike, sizes: Sequence[int]) -> Tensor:
    """operand with new leading axes of `sizes`, as `jax.lax.broadcast`: shape sizes + operand.shape."""
    x = _arg(operand)
    sizes = _ints("broadcast", "sizes", sizes)
    return broadcast_in_dim(x, sizes + x.shape, tuple(range(len(sizes), len(sizes) + x.ndim)))


def reshape(operand: ArrayLike, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Tensor:
    """operand in the shape `new_sizes` (same size; no -1), as `jax.lax.reshape`; with `dimensions`, the operand is
    first transposed to that axis order.

    >>> tg.lax.reshape(tnp.arange(6).reshape(2, 3), (3, 2), (1, 0))      # [[0, 3], [1, 4], [2, 5]]
    """
    x = _arg(operand)
    sizes = _ints("reshape", "new_sizes", new_sizes)
    if any(s < 0 for s in sizes):
        raise TypeError(f"lax.reshape: new_sizes must all be non-negative (no -1 in lax), got {sizes}")
    if dimensions is not None:
        x = transpose(x, dimensions)
    if math.prod(sizes) != x.size:
        raise TypeError(f"lax.reshape: new_sizes {sizes} ({math.prod(sizes)} elements) must keep the size of the "
                        f"operand of shape {x.shape} ({x.size} elements)")
    return x.reshape(sizes)


def transpose(operand: ArrayLike, permutation: Sequence[int]) -> Tensor:
    """operand's axes in the order `permutation`, as `jax.lax.transpose`."""
    x = _arg(operand)
    perm = _ints("transpose", "permutation", permutation, x.ndim)
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"lax.transpose: permutation {perm} is not a permutation of the {x.ndim} axes of the "
                         f"operand of shape {x.shape}")
    return x.permute(perm) if x.ndim else x


def rev(operand: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """operand reversed along `dimensions`, as `jax.lax.rev`."""
    x = _arg(operand)
    dims = _ints("rev", "dimensions", dimensions)
    return x.flip(normalize_axes(dims, x.ndim, "lax.rev")) if dims else x


def squeeze(array: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """array without its size-1 axes `dimensions`, as `jax.lax.squeeze`."""
    x = _arg(array)
    dims = normalize_axes(_ints("squeeze", "dimensions", dimensions), x.ndim, "lax.squeeze")
    bad = [d for d in dims if x.shape[d] != 1]
    if bad:
        raise ValueError(f"lax.squeeze: axis {bad[0]} of the operand of shape {x.shape} has size {x.shape[bad[0]]}; "
                         f"only size-1 axes can be squeezed")
    return x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in dims))


def expand_dims(array: ArrayLike, dimensions: Sequence[int]) -> Tensor:
    """array with new size-1 axes at `dimensions` (axes of the result), as `jax.lax.expand_dims`."""
    return mv.expand_dims(_arg(array), _ints("expand_dims", "dimensions", dimensions))


def collapse(operand: ArrayLike, start_dimension: int, stop_dimension: int | None = None) -> Tensor:
    """operand with axes [start_dimension, stop_dimension) merged into one, as `jax.lax.collapse` (the bounds are
    a Python slice's: negative counts from the end, None is the end).

    >>> tg.lax.collapse(tnp.ones((2, 3, 4, 5)), 1, 3).shape      # (2, 12, 5)
    """
    x = _arg(operand)
    lo, hi, _ = builtins.slice(start_dimension, stop_dimension).indices(x.ndim)
    if hi < lo:
        raise ValueError(f"lax.collapse: stop_dimension {stop_dimension} must not be before start_dimension "
                         f"{start_dimension} (operand shape {x.shape})")
    return x.reshape(x.shape[:lo] + (math.prod(x.shape[lo:hi]),) + x.shape[hi:])


# ---- slices ----
def slice(operand: ArrayLike, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Tensor:
    """operand[start:limit:stride] on every axis, with static bounds, as `jax.lax.slice`.

    Bounds must lie in [0, dim] with start <= limit; strides are positive (default 1). For traced starts use
    `lax.dynamic_slice`.

    >>> tg.lax.slice(tnp.arange(10), (2,), (9,), (3,)).tolist()      # [2, 5, 8]
    """
    x = _arg(operand)
    starts = _ints("slice", "start_indices", start_indices, x.ndim)
    limits = _ints("slice", "limit_indices", limit_indices, x.ndim)
    steps = (1,) * x.ndim if strides is None else _ints("slice", "strides", strides, x.ndim)
    for a, (s, e, st, n) in enumerate(zip(starts, limits, steps, x.shape, strict=True)):
        if not 0 <= s <= e <= n or st < 1:
            raise ValueError(f"lax.slice: on axis {a} of the operand of shape {x.shape}, start {s}, limit {e} and "
                             f"stride {st} must satisfy 0 <= start <= limit <= {n} and stride >= 1")
    x = x.shrink(tuple(zip(starts, limits, strict=True)))
    if any(st > 1 for st in steps):
        x = x[tuple(builtins.slice(None, None, st) for st in steps)]
    return x


def slice_in_dim(operand: ArrayLike, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0) -> Tensor:
    """`slice` along one axis, as `jax.lax.slice_in_dim`: None is the axis's start or end, a negative index counts
    from the end."""
    x = _arg(operand)
    axis = normalize_axis(axis, x.ndim, "lax.slice_in_dim")
    n = x.shape[axis]
    s = 0 if start_index is None else start_index + n if start_index < 0 else start_index
    e = n if limit_index is None else limit_index + n if limit_index < 0 else limit_index
    starts, limits, steps = [0] * x.ndim, list(x.shape), [1] * x.ndim
    starts[axis], limits[axis], steps[axis] = s, e, stride
    return slice(x, starts, limits, steps)


def index_in_dim(operand: ArrayLike, index: int, axis: int = 0, keepdims: bool = True) -> Tensor:
    """operand[..., index, ...] along `axis` (static; negative counts from the end), as `jax.lax.index_in_dim`;
    the axis is kept with size 1 unless keepdims=False."""
    x = _arg(operand)
    axis = normalize_axis(axis, x.ndim, "lax.index_in_dim")
    n = x.shape[axis]
    i = index + n if index < 0 else index
    if not 0 <= i < n:
        raise IndexError(f"lax.index_in_dim: index {index} is out of bounds for axis {axis} with size {n}")
    out = slice_in_dim(x, i, i + 1, 1, axis)
    return out if keepdims else out.reshape(x.shape[:axis] + x.shape[axis + 1:])


def _pad_with_zeros(x: Tensor, config: tuple[tuple[int, int, int], ...]) -> Tensor:
    """x with `interior` zeros between neighbours, then low/high zeros at the ends (negative: elements dropped)."""
    for a, (lo, hi, interior) in enumerate(config):
        n = x.shape[a]
        if interior and n > 1:
            # each element followed by `interior` zeros (a new axis padded, then merged), less the last run of zeros
            before, after = x.shape[:a], x.shape[a + 1:]
            x = x.reshape(before + (n, 1) + after)
            x = x.pad_zeros(((0, 0),) * (a + 1) + ((0, interior),) + ((0, 0),) * len(after))
            x = x.reshape(before + (n * (interior + 1),) + after)
            x = x.shrink(tuple((0, n + (n - 1) * interior) if b == a else (0, s) for b, s in enumerate(x.shape)))
        m = x.shape[a]
        x = x.pad_zeros(tuple((max(lo, 0), max(hi, 0)) if b == a else (0, 0) for b in range(x.ndim)))
        drop_lo, drop_hi = max(-lo, 0), max(-hi, 0)
        if drop_lo or drop_hi:
            end = m + max(lo, 0) + max(hi, 0) - drop_hi
            x = x.shrink(tuple((drop_lo, end) if b == a else (0, s) for b, s in enumerate(x.shape)))
    return x


def pad(operand: ArrayLike, padding_value: ArrayLike, padding_config: Sequence[tuple[int, int, int]]) -> Tensor:
    """operand padded with `padding_value`, as `jax.lax.pad`: one (low, high, interior) triple per axis.

    `interior` values go between each pair of neighbours, then `low` before and `high` after; a negative low or
    high drops that many elements from that end instead. `padding_value` is a scalar of the operand's dtype (it
    may be a traced value). The result's axis has low + high + n + (n - 1) * interior elements.

    >>> tg.lax.pad(tnp.asarray([1.0, 2.0, 3.0]), -1.0, [(-2, 3, 2)]).tolist()     # [-1, 2, -1, -1, 3, -1, -1, -1]
    """
    x, v = _arg(operand), _arg(padding_value)
    same_dtypes("pad", [x, v])
    if v.shape != ():
        raise TypeError(f"lax.pad: padding_value must be a scalar, got shape {v.shape}")
    config = tuple(_ints("pad", f"padding_config[{a}]", c, 3) for a, c in enumerate(padding_config))
    if len(config) != x.ndim:
        raise ValueError(f"lax.pad: padding_config has {len(config)} triples but the operand of shape {x.shape} has "
                         f"{x.ndim} axes; give one (low, high, interior) triple per axis")
    for a, (lo, hi, interior) in enumerate(config):
        n = x.shape[a]
        if interior < 0 or lo + hi + n + builtins.max(n - 1, 0) * interior < 0:
            raise ValueError(f"lax.pad: padding_config[{a}] = {(lo, hi, interior)} is invalid for an axis of size {n}: "
                             f"interior must be >= 0 and the padded size low + high + n + (n - 1) * interior >= 0")
    padded = _pad_with_zeros(x, config)
    if isinstance(padding_value, (bool, int, float)) and padding_value == 0:
        return padded
    inside = _pad_with_zeros(Tensor.full(x.shape, True), config)
    return ew.where(inside, padded, v)


def concatenate(operands: Sequence[ArrayLike], dimension: int) -> Tensor:
    """The operands joined along `dimension`, as `jax.lax.concatenate` (one dtype; the other axes equal)."""
    ts = [_arg(o) for o in operands]
    if not ts:
        raise ValueError("lax.concatenate: needs at least one operand")
    same_dtypes("concatenate", ts, "concatenate")
    return mv.concatenate(ts, dimension)


# ---- selections ----
def select(pred: ArrayLike, on_true: ArrayLike, on_false: ArrayLike) -> Tensor:
    """on_true where pred else on_false, as `jax.lax.select`: pred is bool, a scalar or of the cases' shape; the
    cases have one shape and dtype."""
    return select_n(pred, on_false, on_true)


def select_n(which: ArrayLike, *cases: ArrayLike) -> Tensor:
    """cases[which] elementwise, as `jax.lax.select_n`: `which` is bool (two cases at most) or an integer array,
    a scalar or of the cases' shape; the cases have one shape and dtype. An index out of range picks the last case
    (JAX leaves it undefined).

    >>> tg.lax.select_n(tnp.asarray([2, 0]), tnp.ones(2), tnp.zeros(2), tnp.full(2, 5.0)).tolist()    # [5., 1.]
    """
    w = _arg(which)
    ts = [_arg(c) for c in cases]
    if not ts:
        raise ValueError("lax.select_n: needs at least one case")
    same_dtypes("select_n", ts, "where")
    if len({t.shape for t in ts}) > 1:
        raise TypeError(f"lax.select_n: the cases must have the same shapes, got {[t.shape for t in ts]}")
    check_kind("select_n", w, BOOL + INT, "which")
    if w.dtype.is_bool and len(ts) > 2:
        raise TypeError(f"lax.select_n: a bool `which` selects between at most 2 cases, got {len(ts)}")
    if w.shape not in ((), ts[0].shape):
        raise TypeError(f"lax.select_n: which must be a scalar or have the cases' shape {ts[0].shape}, got "
                        f"{w.shape}")
    if w.dtype.is_bool:
        return ts[0] if len(ts) == 1 else ew.where(w, ts[1], ts[0])
    out = ts[-1]
    for i in range(len(ts) - 2, -1, -1):
        out = ew.where(w == i, ts[i], out)
    return out


def clamp(min: ArrayLike, x: ArrayLike, max: ArrayLike) -> Tensor:  # noqa: A002 - JAX's names
    """x limited to [min, max], as `jax.lax.clamp` (min and max are scalars or of x's shape; one dtype).

    The derivative is JAX's: x's where min < x < max, min's where min > x (and min < max), max's where max < x; at a
    tie with a bound none of them has one (where `tnp.clip` splits it)."""
    lo, t, hi = _arg(min), _arg(x), _arg(max)
    same_dtypes("clamp", [lo, t, hi], "clip")
    for what, b in (("min", lo), ("max", hi)):
        if b.shape not in ((), t.shape):
            raise TypeError(f"lax.clamp requires {what}.shape == operand.shape or {what}.shape == (), got "
                            f"{what}.shape={b.shape}, operand.shape={t.shape}")
    from tgfx.transforms.grad import stop_gradient
    value = stop_gradient(ew.minimum(ew.maximum(t, lo), hi))   # (NaN stays NaN, and a bound's tie its value)
    below = ew.logical_and(ew.greater(lo, t), ew.less(lo, hi))
    return ew.where(ew.logical_and(ew.greater(t, lo), ew.less(t, hi)), t,
                    ew.where(below, lo, ew.where(ew.less(hi, t), hi, value)))


# ---- constants ----
def iota(dtype: DType | str | type, size: int) -> Tensor:
    """[0, 1, ..., size - 1] as `dtype`, as `jax.lax.iota`."""
    return Tensor.arange(size, dtype=to_dtype(dtype))


def broadcasted_iota(dtype: DType | str | type, shape: Sequence[int], dimension: int) -> Tensor:
    """An array of `shape` whose entries are their index along `dimension`, as `jax.lax.broadcasted_iota`.

    >>> tg.lax.broadcasted_iota("int32", (2, 3), 1).tolist()      # [[0, 1, 2], [0, 1, 2]]
    """
    shape = _ints("broadcasted_iota", "shape", shape)
    dimension = normalize_axis(dimension, len(shape), "lax.broadcasted_iota")
    return broadcast_in_dim(iota(dtype, shape[dimension]), shape, (dimension,))


def full(shape: Sequence[int], fill_value: ArrayLike, dtype: DType | str | type | None = None) -> Tensor:
    """An array of `shape` filled with the scalar `fill_value`, as `jax.lax.full` (dtype: the fill's by default)."""
    v = _arg(fill_value)
    if v.shape != ():
        raise TypeError(f"lax.full must be called with a scalar fill_value, got fill_value.shape {v.shape}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else _ints("full", "shape", shape)
    v = v if dtype is None else convert_element_type(v, dtype)
    return v.reshape((1,) * len(shape)).expand(shape) if shape else v


def full_like(x: ArrayLike, fill_value: ArrayLike, dtype: DType | str | type | None = None,
              shape: Sequence[int] | None = None) -> Tensor:
    """`full` with x's shape and dtype unless given, as `jax.lax.full_like`."""
    t = _arg(x)
    return full(t.shape if shape is None else shape, fill_value, t.dtype if dtype is None else dtype)


# ---- conversions ----
def convert_element_type(operand: ArrayLike, new_dtype: DType | str | type) -> Tensor:
    """operand as `new_dtype`, as `jax.lax.convert_element_type`.

    Float to integer truncates toward zero and saturates, as XLA: out-of-range values become the type's min or max
    and NaN becomes 0 (numpy's astype leaves them undefined). Complex to real keeps the real part (no warning);
    anything to bool is x != 0.
    """
    x = _arg(operand)
    d = to_dtype(new_dtype)
    if x.dtype == d:
        return x if not is_weak(x) else Tensor(x.uop)   # strongly typed, as JAX's conversion of a weak value
    if x.dtype.is_complex and not d.is_complex:
        from tgfx.numpy._complex import real
        x = real(x)
    if d.is_bool:
        return ew.not_equal(x, Tensor.full((), 0, x.dtype))
    if x.dtype.is_float and d.is_int:
        lo, hi = min_value(d), max_value(d)
        too_low, too_high = x <= float(lo), x >= float(hi + 1)   # both bounds are exact powers of two in a float
        inside = ew.logical_not(ew.logical_or(ew.logical_or(too_low, too_high), ew.isnan(x)))
        cast = ew.where(inside, x, Tensor.full((), 0, x.dtype)).cast(d)   # only in-range values reach the cast
        out = ew.where(too_high, Tensor.full((), hi, d), cast)
        return ew.where(too_low, Tensor.full((), lo, d), out)
    return x.cast(d)


def bitcast_convert_type(operand: ArrayLike, new_dtype: DType | str | type) -> Tensor:
    """operand's bits read as `new_dtype`, as `jax.lax.bitcast_convert_type` (little-endian, as XLA on CPU).

    Same width: same shape. To a narrower type: a new trailing axis of width ratio (uint32 -> 4 uint8, low byte
    first). To a wider type: the trailing axis, of exactly the width ratio, is merged away. Bool and complex only
    convert to themselves.

    >>> tg.lax.bitcast_convert_type(tnp.asarray(1.0), "int32").item()       # 1065353216
    """
    x = _arg(operand)
    d = to_dtype(new_dtype)
    if x.dtype == d:
        return x
    for what, t in (("operand", x.dtype), ("new_dtype", d)):
        if t.is_bool or t.is_complex:
            raise TypeError(f"lax.bitcast_convert_type: {what} is {t.name}; bool and complex values convert only to "
                            f"their own type (operand {x.dtype.name}, new_dtype {d.name})")
    if x.dtype.itemsize == d.itemsize:
        return x.bitcast(d)
    wide, narrow = (uint_of(x.dtype), uint_of(d)) if x.dtype.itemsize > d.itemsize else (uint_of(d), uint_of(x.dtype))
    ratio, bits = wide.itemsize // narrow.itemsize, narrow.bits
    offsets = Tensor.arange(ratio, dtype=wide) * bits   # each narrow part's place in the wide word
    if x.dtype.itemsize > d.itemsize:
        w = x.bitcast(wide).reshape(x.shape + (1,))
        return ((w >> offsets) & ((1 << bits) - 1)).cast(narrow).bitcast(d)
    if not x.shape or x.shape[-1] != ratio:
        raise TypeError(f"lax.bitcast_convert_type: converting {x.dtype.name} to the wider {d.name} needs a last axis "
                        f"of size {ratio}, got shape {x.shape}")
    parts = x.bitcast(narrow).cast(wide) << offsets
    from tgfx.numpy._reduce import sum as total
    return total(parts, axis=-1, dtype=wide).bitcast(d)   # the parts do not overlap: their sum is their OR



def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape NumPy broadcasting gives arrays of `shapes`, as `jax.lax.broadcast_shapes`: ranks aligned from the
    right, each axis the one size that is not 1. Incompatible shapes are a ValueError naming them.

    >>> tg.lax.broadcast_shapes((2, 1), (3,))     # (2, 3)
    """
    from tgfx.numpy._misc import broadcast_shapes as numpy_broadcast_shapes
    try:
        return numpy_broadcast_shapes(*(tuple(s) for s in shapes))
    except (ValueError, TypeError) as e:
        raise ValueError(f"lax.broadcast_shapes: incompatible shapes for broadcasting: "
                         f"{', '.join(str(tuple(s)) for s in shapes)}") from e


def dtype(x: Any, *, canonicalize: bool = False) -> DType:
    """The tgfx dtype of an array, a Python or NumPy scalar, or a dtype specifier (a name, a NumPy dtype, a Python
    type), as `jax.lax.dtype`: Python scalars take the default types, 64-bit types are 32-bit without x64.
    `canonicalize` is accepted for JAX's signature: tgfx's dtypes are always canonical.

    >>> tg.lax.dtype(1.0), tg.lax.dtype(tnp.ones(2, tnp.int8)), tg.lax.dtype("float16")   # float32, int8, float16
    """
    from tgfx.dtypes import dtypes
    if isinstance(x, Tensor):
        return x.dtype
    if isinstance(x, bool):
        return dtypes.bool
    if isinstance(x, (int, float, complex)):
        return to_dtype(type(x))
    if isinstance(x, (np.ndarray, np.generic)):
        return to_dtype(x.dtype)
    if hasattr(x, "dtype") and not isinstance(x, type):
        return to_dtype(x.dtype)
    return to_dtype(x)
