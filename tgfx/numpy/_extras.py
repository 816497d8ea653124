"""The rest of jax.numpy's commonly used names: index tricks (`r_`, `c_`, `mgrid`, `ogrid`, `ix_`, `s_`), selection
(`piecewise`, `choose`, `compress`, `extract`, functional `place` and `put`), bits (`packbits`, `unpackbits`,
`bitwise_count`), multi-dimensional histograms, window functions, and numpy's abstract scalar types with
`issubdtype`. Each is a composition of existing tnp functions, so it fuses, traces under `jit`/`vmap` and
differentiates as they do; `trim_zeros`, `choose(mode="raise")` and `compress`/`extract` without `size=` read values
to the host, and say what to pass instead when they are traced.
"""
from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tgfx.dtypes import FRONT_END, DType, dtypes, to_dtype, to_inexact
from tgfx.dtypes import promote_types as _promote_kinds
from tgfx.numpy import _creation as cr
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _movement as mv
from tgfx.numpy import _reduce as rd
from tgfx.tensor import ArrayLike, Tensor, normalize_axis, promotion_kind, to_tensor

# ---- numpy's abstract scalar types, as JAX re-exports them; `issubdtype` places tgfx's DTypes among them ----
generic, number, inexact, floating, complexfloating = np.generic, np.number, np.inexact, np.floating, np.complexfloating
integer, signedinteger, unsignedinteger = np.integer, np.signedinteger, np.unsignedinteger
character, flexible = np.character, np.flexible
# JAX's aliases name the 64-bit types; like tnp.float64 they become 32-bit outside x64 mode when used as a dtype
float_ = double = dtypes.float64
single = dtypes.float32
int_ = dtypes.int64
uint = dtypes.uint64
complex_ = cdouble = dtypes.complex128
csingle = dtypes.complex64

s_ = np.s_
index_exp = np.index_exp


def _np_type(x: Any) -> Any:
    """A dtype-like argument as numpy understands it: DTypes (and Tensors) by their numpy dtype; bfloat16, which numpy
    lacks, stays a DType."""
    if isinstance(x, Tensor):
        x = x.dtype
    if isinstance(x, str) and x == "bfloat16":
        x = dtypes.bfloat16
    if isinstance(x, DType):
        return x.scalar if x.scalar is dtypes.bfloat16 else x.scalar.np
    if isinstance(x, type) and issubclass(x, np.generic):
        return x
    return np.dtype(x)


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """Whether dtype `arg1` is `arg2` or below it in numpy's type hierarchy (`generic` > `number` > `inexact` >
    `floating` ...). Either may be a tgfx DType, a numpy dtype or scalar type, or a name; bfloat16 is a `floating`.

    >>> tnp.issubdtype(tnp.float32, tnp.floating), tnp.issubdtype(tnp.int8, tnp.unsignedinteger)
    (True, False)
    """
    a, b = _np_type(arg1), _np_type(arg2)
    if a is dtypes.bfloat16 or b is dtypes.bfloat16:
        if b is dtypes.bfloat16:
            return a is dtypes.bfloat16
        return isinstance(b, type) and b in (np.floating, np.inexact, np.number, np.generic)
    return bool(np.issubdtype(a, b))


FRONT_END["issubdtype"] = issubdtype   # (`tg.dtypes.issubdtype`: tgfx/dtypes.py)


def iterable(y: Any) -> bool:
    """Whether `y` can be iterated over (a 0-d Tensor cannot), as numpy.iterable.

    >>> tnp.iterable(tnp.zeros(3)), tnp.iterable(tnp.zeros(()))
    (True, False)
    """
    try:
        iter(y)
    except TypeError:
        return False
    return True


# ---- index tricks ----
def _slice_range(s: slice, where: str) -> Tensor:
    """A slice of an index trick as a 1-d range: arange(start, stop, step), or `n` points from start to stop
    inclusive when the step is an imaginary number `nj`, as numpy's."""
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if s.stop is None:
        raise ValueError(f"{where}: each slice needs a stop, got {s}")
    if isinstance(step, complex):
        return cr.linspace(start, s.stop, int(abs(step)), endpoint=True)
    return cr.arange(start, s.stop, step)


def _grid_ranges(key: Any, where: str) -> tuple[list[Tensor], bool]:
    keys = key if isinstance(key, tuple) else (key,)
    ranges = []
    for k in keys:
        if not isinstance(k, slice):
            raise TypeError(f"{where}: index with slices (start:stop:step, or start:stop:nj for n points), got {k!r}")
        ranges.append(_slice_range(k, where))
    d = _promote_kinds(*(r.dtype for r in ranges)) if ranges else dtypes.default_int
    return [r.astype(d) for r in ranges], isinstance(key, tuple)


class _Grid:
    """`mgrid[...]` / `ogrid[...]`: the index grid of the slices' ranges, dense (stacked, as numpy.mgrid) or open
    (a list of broadcastable vectors)."""

    def __init__(self, sparse: bool, name: str) -> None:
        self.sparse, self.name = sparse, name

    def __getitem__(self, key: Any) -> Tensor | list[Tensor]:
        ranges, many = _grid_ranges(key, self.name)
        if not many:
            return ranges[0]
        n = len(ranges)
        vecs = [r.reshape(tuple(-1 if a == i else 1 for a in range(n))) for i, r in enumerate(ranges)]
        if self.sparse:
            return vecs
        shape = tuple(r.shape[0] for r in ranges)
        return mv.stack([v.expand(shape) for v in vecs])


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")


class _Concatenator:
    """`r_[...]` / `c_[...]`: concatenates arrays, scalars and slice ranges along an axis, as numpy's. A leading string
    "axis[,ndmin[,trans1d]]" sets where: the axis, the least number of dimensions each piece is raised to, and where a
    piece's own axes go among them (numpy's rules)."""

    def __init__(self, axis: int, ndmin: int, trans1d: int, name: str) -> None:
        self.axis, self.ndmin, self.trans1d, self.name = axis, ndmin, trans1d, name

    def _directive(self, item: str) -> tuple[int, int, int]:
        if item in ("r", "c"):
            raise NotImplementedError(f"{self.name}: matrix directives ('r', 'c') are not supported, as in JAX")
        try:
            vec = [int(v) for v in item.split(",")]
        except ValueError:
            raise ValueError(f"{self.name}: the directive {item!r} must be integers 'axis[,ndmin[,trans1d]]'") from None
        if not 1 <= len(vec) <= 3:
            raise ValueError(f"{self.name}: the directive {item!r} has more than three integers")
        axis, ndmin, trans1d = vec + [self.ndmin, self.trans1d][len(vec) - 1:]
        return axis, ndmin, trans1d

    def __getitem__(self, key: Any) -> Tensor:
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        if items and isinstance(items[0], str):
            axis, ndmin, trans1d = self._directive(items.pop(0))
        pieces: list[Tensor] = []
        kinds: list[Any] = []
        for item in items:
            if isinstance(item, str):
                raise ValueError(f"{self.name}: a string directive may only come first, got {item!r} later")
            if isinstance(item, slice):
                t = _slice_range(item, self.name)
                kinds.append(t.dtype)
                if ndmin > 1:
                    t = t.reshape((1,) * (ndmin - 1) + t.shape)
                    if trans1d != -1:
                        t = mv.swapaxes(t, -1, trans1d)
            else:
                kinds.append(promotion_kind(item))
                t = to_tensor(item)
                nd = t.ndim
                if nd < ndmin:
                    t = t.reshape((1,) * (ndmin - nd) + t.shape)
                    if trans1d != -1:
                        # numpy's placement of the piece's own axes among the new leading ones
                        k2, k1 = ndmin - nd, trans1d if trans1d >= 0 else trans1d + ndmin - nd + 1
                        axes = list(range(ndmin))
                        t = mv.transpose(t, axes[:k1] + axes[k2:] + axes[k1:k2])
            pieces.append(t)
        if not pieces:
            return Tensor(np.zeros(0, dtypes.default_float.np), dtype=dtypes.default_float)
        d = _promote_kinds(*kinds)
        return mv.concatenate([p.astype(d) for p in pieces], axis=axis)


r_ = _Concatenator(0, 1, -1, "r_")
c_ = _Concatenator(-1, 2, 0, "c_")


def ix_(*args: ArrayLike) -> tuple[Tensor, ...]:
    """An open mesh from 1-d integer index arrays: the i-th result has shape (1, ..., len(args[i]), ..., 1), so
    `x[ix_(rows, cols)]` is the cross product of rows and cols. Boolean arguments are not supported, as in JAX.

    >>> x[tnp.ix_(tnp.asarray([0, 2]), tnp.asarray([1, 3]))]     # shape (2, 2)
    """
    out = []
    for i, a in enumerate(args):
        t = to_tensor(a)
        if t.ndim != 1:
            raise ValueError(f"ix_: argument {i} must be 1-dimensional, got shape {t.shape}")
        if t.dtype.is_bool:
            raise NotImplementedError(f"ix_: argument {i} is boolean, which is not supported, as in JAX; pass "
                                      f"tnp.nonzero(mask)[0] instead")
        if t.shape[0] == 0:
            t = t.astype(dtypes.default_int)
        out.append(t.reshape(tuple(-1 if a == i else 1 for a in range(len(args)))))
    return tuple(out)


# ---- construction and selection ----
def fromfunction(function: Callable[..., Any], shape: Sequence[int], *, dtype: DType | str | type = float,
                 **kwargs: Any) -> Any:
    """`function` applied to the index grid of `shape`: out[i, j, ...] = function(i, j, ...), the indices of type
    `dtype`. The function is mapped with `tg.vmap` over each axis, as in JAX, so it may be any function of scalars.

    >>> tnp.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=int).tolist()
    [[0, 10, 20], [1, 11, 21]]
    """
    from tgfx.transforms.vmap import vmap
    shape = tuple(operator.index(s) for s in shape)
    d = to_dtype(dtype)
    n = len(shape)
    fn = lambda *idx: function(*idx, **kwargs)
    for i in range(n - 1, -1, -1):  # the outermost map is over axis 0, so out[i, j, ...] = function(i, j, ...)
        fn = vmap(fn, in_axes=tuple(0 if a == i else None for a in range(n)))
    return fn(*(cr.arange(s, dtype=d) for s in shape))


def piecewise(x: ArrayLike, condlist: Sequence[ArrayLike] | ArrayLike, funclist: Sequence[Any], *args: Any,
              **kw: Any) -> Tensor:
    """funclist[i](x) where condlist[i] is true (the last true condition wins, as numpy's); with one more function
    than conditions, the last one applies where none is true, else 0. A function may be a constant. Every function is
    evaluated on all of `x` and the results are selected, so gradients flow through each piece.

    >>> tnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2])
    """
    t = to_tensor(x)
    if isinstance(condlist, (list, tuple)):
        conds = [to_tensor(c) for c in condlist]
    else:  # one boolean array, or a stack of them along a leading axis
        c = to_tensor(condlist)
        conds = list(c) if c.ndim == t.ndim + 1 else [c]
    nc, nf = len(conds), len(funclist)
    if nf not in (nc, nc + 1):
        raise ValueError(f"piecewise: funclist has {nf} functions for {nc} conditions; give one per condition, and "
                         f"optionally one more for where none holds")
    for i, c in enumerate(conds):
        if not c.dtype.is_bool:
            raise TypeError(f"piecewise: condlist[{i}] must be boolean, got {c.dtype.name}")

    def piece(f: Any) -> Tensor:
        v = f(t, *args, **kw) if callable(f) else f
        return to_tensor(v).astype(t.dtype) if isinstance(v, Tensor) else Tensor.full(t.shape, v, t.dtype)

    out = piece(funclist[nc]) if nf == nc + 1 else Tensor.full(t.shape, 0, t.dtype)
    for c, f in zip(conds, funclist[:nc], strict=True):  # later conditions override earlier ones
        out = ew.where(c, piece(f), out)
    return mv.broadcast_to(out, t.shape) if out.shape != t.shape else out


def trim_zeros(filt: ArrayLike, trim: str = "fb") -> Tensor:
    """The 1-d `filt` without its leading ('f' in `trim`) and trailing ('b') zeros. The result's length depends on
    the values, so they are read (eagerly only, as in JAX: under `jit` it is an error).

    >>> tnp.trim_zeros(tnp.asarray([0, 0, 1, 2, 0])).tolist()
    [1, 2]
    """
    from tgfx.numpy._data_dependent import host_value
    t = to_tensor(filt)
    if t.ndim != 1:
        raise ValueError(f"trim_zeros: filt must be 1-d, got shape {t.shape}")
    if not set(trim.lower()) <= {"f", "b"}:
        raise ValueError(f"trim_zeros: trim must be a combination of 'f' and 'b', got {trim!r}")
    nz = np.flatnonzero(host_value(t, "trim_zeros", "filt", hint="Trim outside the traced function"))
    if nz.size == 0:
        return t[:0]
    start = int(nz[0]) if "f" in trim.lower() else 0
    stop = int(nz[-1]) + 1 if "b" in trim.lower() else t.shape[0]
    return t[start:stop]


def _selected_positions(condition: Tensor, n: int, size: int | None, fn: str) -> Tensor:
    """The positions < n where the 1-d boolean `condition` holds: `size` of them (n, an out-of-range position, for
    the missing ones) computed on the device, or all of them read to the host."""
    from tgfx.numpy._data_dependent import host_value, nonzero
    if size is not None:
        return nonzero(condition, size=operator.index(size), fill_value=n)[0]
    host = host_value(condition, fn, "condition")
    return Tensor(np.flatnonzero(host).astype(np.int32), dtype=dtypes.int32)


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *, size: int | None = None,
             fill_value: ArrayLike = 0, out: None = None) -> Tensor:
    """The slices of `a` along `axis` (of the flattened `a` when None) where the 1-d `condition` is true. Without
    `size` the condition is read (eagerly only; under `jit` pass `size=`): with `size=N` the result has N slices
    along `axis`, the missing ones `fill_value`, as JAX's.

    >>> tnp.compress(tnp.asarray([True, False, True]), tnp.asarray([1, 2, 3])).tolist()
    [1, 3]
    """
    if out is not None:
        raise NotImplementedError("compress: out= is not supported, as in JAX; use the returned array")
    c = to_tensor(condition)
    if c.ndim != 1:
        raise ValueError(f"compress: condition must be 1-d, got shape {c.shape}")
    x = to_tensor(a)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis(axis, x.ndim, "compress")
    n = x.shape[axis]
    c = ew.not_equal(c, 0) if not c.dtype.is_bool else c
    if c.shape[0] > n:
        from tgfx.function import ConcretizationError
        from tgfx.numpy._data_dependent import host_value
        try:
            extra = host_value(c[n:], "compress", "condition").any()
        except ConcretizationError:  # traced: entries past the end select nothing, so drop them unread
            extra = False
        if extra:
            raise ValueError(f"compress: condition has {c.shape[0]} entries, and one past a's axis length {n} is true")
        c = c[:n]
    idx = _selected_positions(c, n, size, "compress")
    from tgfx.numpy._indexing import take
    return take(x, idx, axis=axis, mode="fill", fill_value=fill_value)


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None, fill_value: ArrayLike = 0) -> Tensor:
    """The elements of `arr` where `condition` is non-zero, flattened (compress of the raveled arrays). Without
    `size` the condition is read (eagerly only; under `jit` pass `size=`, missing slots being `fill_value`).

    >>> tnp.extract(x > 0, x)
    """
    c, x = to_tensor(condition), to_tensor(arr)
    if c.shape != x.shape:
        raise ValueError(f"extract: condition (shape {c.shape}) and arr (shape {x.shape}) must have the same shape")
    return compress(c.reshape(-1), x.reshape(-1), size=size, fill_value=fill_value)


def choose(a: ArrayLike, choices: Sequence[ArrayLike], out: None = None, mode: str = "raise") -> Tensor:
    """choices[a] elementwise: out[i...] = choices[a[i...]][i...], everything broadcast together. Out-of-range `a`
    is an error with mode="raise" (which reads `a`, so under `jit` use "wrap" or "clip"), wraps or clamps otherwise.

    >>> tnp.choose(tnp.asarray([0, 1, 0]), [tnp.asarray([1, 2, 3]), tnp.asarray([10, 20, 30])]).tolist()
    [1, 20, 3]
    """
    if out is not None:
        raise NotImplementedError("choose: out= is not supported, as in JAX; use the returned array")
    idx = to_tensor(a)
    if not (idx.dtype.is_int or idx.dtype.is_bool):
        raise TypeError(f"choose: a must be integers, got {idx.dtype.name}")
    cs = list(choices)
    k = len(cs)
    if k == 0:
        raise ValueError("choose: choices must hold at least one array")
    if mode == "raise":
        from tgfx.numpy._data_dependent import host_value
        host = host_value(idx, "choose", "a", hint="Pass mode='wrap' or mode='clip' to choose under jit")
        if host.size and (host.min() < 0 or host.max() >= k):
            raise ValueError(f"choose: a holds values outside [0, {k}) for {k} choices; pass mode='wrap' or 'clip'")
    elif mode == "wrap":
        idx = ew.remainder(idx, k)
    elif mode == "clip":
        idx = ew.clip(idx, 0, k - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    d = _promote_kinds(*(promotion_kind(c) for c in cs))
    out_t = to_tensor(cs[0]).astype(d)
    for i in range(1, k):  # a few static choices: one fused chain of selects
        out_t = ew.where(idx == i, to_tensor(cs[i]).astype(d), out_t)
    return mv.broadcast_to(out_t, mv.broadcast_shapes(out_t.shape, idx.shape)) if out_t.shape != idx.shape else out_t


_INPLACE = "{}: Tensors are immutable, so it cannot modify arr in place; pass inplace=False to get the updated copy, " \
           "as in JAX"


def place(arr: ArrayLike, mask: ArrayLike, vals: ArrayLike, *, inplace: bool = True) -> Tensor:
    """A copy of `arr` whose elements where `mask` is true take `vals` in order (repeated cyclically when shorter),
    as numpy.place; JAX's form, which needs `inplace=False`.

    >>> tnp.place(tnp.zeros(4), tnp.asarray([True, False, True, True]), tnp.asarray([1.0, 2.0]), inplace=False)
    """
    if inplace:
        raise ValueError(_INPLACE.format("place"))
    x, m, v = to_tensor(arr), to_tensor(mask), to_tensor(vals)
    if m.shape != x.shape:
        raise ValueError(f"place: mask (shape {m.shape}) must have arr's shape {x.shape}")
    flat_m = ew.not_equal(m.reshape(-1), 0) if not m.dtype.is_bool else m.reshape(-1)
    v = v.reshape(-1)
    if v.shape[0] == 0:
        raise ValueError("place: vals is empty; it needs at least one value (numpy's rule)")
    # the k-th true position of the mask gets vals[k % len(vals)]
    k = rd.cumsum(flat_m.astype(dtypes.int32)) - 1
    from tgfx.numpy._indexing import take
    picked = take(v, ew.remainder(ew.maximum(k, 0), v.shape[0]), mode="clip").astype(x.dtype)
    return ew.where(flat_m, picked, x.reshape(-1)).reshape(x.shape)


def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str | None = None, *, inplace: bool = True) -> Tensor:
    """A copy of `a` with its flattened elements at `ind` set to `v` (repeated cyclically to ind's length); JAX's
    form, which needs `inplace=False`. As in JAX, with mode=None an index in [-n, -1] counts from the end and any
    other out of range is clamped; "clip" clamps every index to [0, n - 1] (so -1 is 0); "wrap" takes it modulo n.

    >>> tnp.put(tnp.zeros(4), tnp.asarray([0, 2]), 1.0, inplace=False).tolist()
    [1.0, 0.0, 1.0, 0.0]
    """
    if inplace:
        raise ValueError(_INPLACE.format("put"))
    x = to_tensor(a)
    i = to_tensor(ind).reshape(-1)
    if not i.dtype.is_int:
        raise TypeError(f"put: ind must be integers, got {i.dtype.name}")
    vals = to_tensor(v).astype(x.dtype).reshape(-1)
    n = x.size
    if i.shape[0] == 0 or vals.shape[0] == 0:
        return x
    if vals.shape[0] != i.shape[0]:
        from tgfx.numpy._misc import resize
        vals = resize(vals, i.shape[0])
    if mode == "clip":
        i = ew.clip(i, 0, n - 1)
    elif mode == "wrap":
        i = ew.remainder(i, n)
    elif mode == "raise":
        raise NotImplementedError("put: mode='raise' is not supported, as in JAX; use mode=None, 'clip' or 'wrap'")
    elif mode is not None:
        raise ValueError(f"put: mode must be None, 'clip' or 'wrap', got {mode!r}")
    else:
        i = ew.clip(ew.where(i < 0, i + n, i), 0, n - 1)
    return x.reshape(-1).at[i].set(vals).reshape(x.shape)


# ---- bits ----
def _bits_axis(a: ArrayLike, axis: int | None, fn: str) -> tuple[Tensor, int]:
    t = to_tensor(a)
    if not (t.dtype.is_int or t.dtype.is_bool):
        raise TypeError(f"{fn}: a must be integers or booleans, got {t.dtype.name}")
    if axis is None:
        return t.reshape(-1), 0
    return t, normalize_axis(axis, t.ndim, fn)


def _bit_weights(bitorder: str, fn: str) -> list[int]:
    if bitorder not in ("big", "little"):
        raise ValueError(f"{fn}: bitorder must be 'big' or 'little', got {bitorder!r}")
    return [1 << (7 - b) for b in range(8)] if bitorder == "big" else [1 << b for b in range(8)]


def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big") -> Tensor:
    """The non-zero-ness of `a`'s elements packed eight to a uint8 along `axis` (of the flattened `a` when None),
    the first element in the highest bit ("big") or lowest ("little"); the axis is padded with zeros to a multiple
    of 8.

    >>> tnp.packbits(tnp.asarray([1, 0, 1])).tolist()
    [160]
    """
    t, axis = _bits_axis(a, axis, "packbits")
    w = _bit_weights(bitorder, "packbits")
    n = t.shape[axis]
    m = -(-n // 8)
    bits = ew.not_equal(t, 0).astype(dtypes.uint8)
    bits = mv.pad(bits, [(0, 8 * m - n) if i == axis else (0, 0) for i in range(t.ndim)])
    bits = bits.reshape(bits.shape[:axis] + (m, 8) + bits.shape[axis + 1:])
    weights = Tensor(np.asarray(w, np.uint8), dtype=dtypes.uint8).reshape((8,) + (1,) * (t.ndim - axis - 1))
    return rd.sum(ew.multiply(bits, weights), axis=axis + 1, dtype=dtypes.uint8)


def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Tensor:
    """The bits of the uint8 `a` along `axis` (of the flattened `a` when None) as a uint8 array of 0s and 1s, eight
    per element, the highest first ("big") or the lowest ("little"); `count` keeps that many (a negative one drops
    as many from the end; more than there are pads zeros).

    >>> tnp.unpackbits(tnp.asarray([160], dtype=tnp.uint8)).tolist()
    [1, 0, 1, 0, 0, 0, 0, 0]
    """
    t = to_tensor(a)
    if t.dtype is not dtypes.uint8:
        raise TypeError(f"unpackbits: a must be uint8, got {t.dtype.name}; cast it with a.astype(tnp.uint8)")
    t, axis = _bits_axis(t, axis, "unpackbits")
    w = _bit_weights(bitorder, "unpackbits")
    shift = Tensor(np.asarray([int(math.log2(b)) for b in w], np.uint8), dtype=dtypes.uint8)
    shift = shift.reshape((8,) + (1,) * (t.ndim - axis - 1))
    x = t.reshape(t.shape[:axis + 1] + (1,) + t.shape[axis + 1:])
    bits = ew.bitwise_and(ew.right_shift(x, shift), 1).astype(dtypes.uint8)
    bits = bits.reshape(t.shape[:axis] + (8 * t.shape[axis],) + t.shape[axis + 1:])
    if count is None:
        return bits
    total = bits.shape[axis]
    count = operator.index(count)
    if -count > total:
        raise ValueError(f"unpackbits: count={count} drops more than the {total} bits along the axis")
    keep = max(total + count, 0) if count < 0 else count
    sl = tuple(slice(0, min(keep, total)) if i == axis else slice(None) for i in range(bits.ndim))
    bits = bits[sl]
    if keep > total:
        bits = mv.pad(bits, [(0, keep - total) if i == axis else (0, 0) for i in range(bits.ndim)])
    return bits


def bitwise_count(x: ArrayLike, /) -> Tensor:
    """The number of 1 bits in the absolute value of each integer of `x`, as uint8 (numpy.bitwise_count).

    >>> tnp.bitwise_count(tnp.asarray([0, 7, -8])).tolist()
    [0, 3, 1]
    """
    t = to_tensor(x)
    if not (t.dtype.is_int or t.dtype.is_bool):
        raise TypeError(f"bitwise_count: x must be integers or booleans, got {t.dtype.name}")
    if t.dtype.is_bool:
        return t.astype(dtypes.uint8)
    u_name = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}[t.dtype.itemsize]
    u = getattr(dtypes, u_name)
    v = (ew.abs(t) if not t.dtype.is_unsigned else t).bitcast(u)
    # SWAR: sums of adjacent 1-, 2-, 4-bit fields, then of bytes, ... up to the type's width
    bits = 8 * t.dtype.itemsize
    pattern = {1: 0x55, 2: 0x33, 4: 0x0F}
    width = 1
    while width < bits:
        byte = pattern.get(width)
        mask = int.from_bytes(bytes([byte] * (bits // 8)), "little") if byte is not None else \
            int("".join(("0" * width + "1" * width) * (bits // (2 * width))), 2)
        m = Tensor.full((), mask, u)
        v = ew.add(ew.bitwise_and(v, m), ew.bitwise_and(ew.right_shift(v, Tensor.full((), width, u)), m))
        width *= 2
    return v.astype(dtypes.uint8)


# ---- histograms in several dimensions ----
def histogramdd(sample: ArrayLike, bins: ArrayLike | Sequence[ArrayLike] = 10,
                range: Sequence[Any] | None = None,  # noqa: A002 - numpy's keyword
                weights: ArrayLike | None = None, density: bool | None = None) -> tuple[Tensor, list[Tensor]]:
    """numpy.histogramdd of the (N, D) `sample`: (counts of shape (bins_0, ..., bins_{D-1}), the D edge arrays).
    `bins` is one number of bins or array of edges for every dimension, or one per dimension; `range` a (min, max)
    pair or None per dimension. Each dimension bins as `tnp.histogram` (the last edge counts in the last bin). As
    JAX's (not numpy's floats): counts are the default int without `weights`, else the sums of the weights, in the
    float type sample and weights promote to; `density=True` divides them, as floats of that type, by the total and
    the cell volumes. Cost: one kernel of prod(bins) * N compares.

    >>> counts, (ex, ey) = tnp.histogramdd(tnp.asarray([[0.0, 0.0], [1.0, 1.0]]), bins=2)
    """
    from tgfx.numpy._data_dependent import searchsorted
    from tgfx.numpy._stats import histogram_bin_edges
    s = to_tensor(sample)
    if s.ndim == 1:
        s = s.reshape(-1, 1)
    if s.ndim != 2:
        raise ValueError(f"histogramdd: sample must be an (N, D) array, got shape {s.shape}")
    n, nd = s.shape
    if weights is None:
        s = s.astype(to_inexact(s.dtype))
        w = None
    else:
        w = to_tensor(weights)
        if w.shape != (n,):
            raise ValueError(f"histogramdd: weights must have shape ({n},), one per sample, got {w.shape}")
        d = to_inexact(_promote_kinds(s.dtype, w.dtype))   # int32 sample, float16 weights: float16, as JAX
        s, w = s.astype(d), w.astype(d)
    if isinstance(bins, (int, np.integer)):
        per_dim = [bins] * nd
    else:
        per_dim = list(bins)
        if len(per_dim) != nd:
            raise ValueError(f"histogramdd: bins has {len(per_dim)} entries for {nd} dimensions; give one per "
                             f"dimension, or one for all")
    if range is not None and len(range) != nd:
        raise ValueError(f"histogramdd: range has {len(range)} entries for {nd} dimensions; give a (min, max) pair "
                         f"or None per dimension")
    edges, cell = [], None
    for i in builtins.range(nd):
        col = s[:, i]
        e = histogram_bin_edges(col, per_dim[i], None if range is None else range[i])
        nb = e.shape[0] - 1
        # the bin of each value, as tnp.histogram: edges[k] <= x < edges[k+1], the last edge in the last bin
        k = searchsorted(e, col, side="right").astype(dtypes.int32) - 1
        k = ew.where(col == e[nb], nb - 1, k)
        inside = ew.logical_and(k >= 0, k < nb)
        cell = ew.where(inside, k, -1) if cell is None else ew.where(ew.logical_and(cell >= 0, inside),
                                                                     cell * nb + k, -1)
        edges.append(e)
    shape = tuple(e.shape[0] - 1 for e in edges)
    total = math.prod(shape)
    hit = cell.reshape(1, n) == Tensor.arange(total, dtype=dtypes.int32).reshape(total, 1)
    if w is None:
        counts = rd.sum(hit, axis=1).astype(dtypes.default_int)
    else:
        counts = rd.sum(ew.where(hit, w.reshape(1, n), Tensor.full((), 0, w.dtype)), axis=1)
    counts = counts.reshape(shape)
    if density:
        counts = counts.astype(s.dtype)
        counts = ew.true_divide(counts, rd.sum(counts))
        for i, e in enumerate(edges):
            widths = (e[1:] - e[:-1]).reshape(tuple(-1 if a == i else 1 for a in builtins.range(nd)))
            counts = ew.true_divide(counts, widths)
    return counts, edges


def histogram2d(x: ArrayLike, y: ArrayLike, bins: ArrayLike | Sequence[ArrayLike] = 10,
                range: Sequence[Any] | None = None,  # noqa: A002 - numpy's keyword
                weights: ArrayLike | None = None, density: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """numpy.histogram2d of the points (x[i], y[i]): (counts of shape (x bins, y bins), x edges, y edges), binned as
    `histogramdd` (with its types: x and y promote together first). `bins` is a number or edges for both axes, or a
    pair of them.

    >>> counts, xedges, yedges = tnp.histogram2d(x, y, bins=(4, 3))
    """
    xt, yt = to_tensor(x), to_tensor(y)
    if xt.ndim != 1 or xt.shape != yt.shape:
        raise ValueError(f"histogram2d: x and y must be 1-d of the same length, got shapes {xt.shape} and {yt.shape}")
    nb = 1 if isinstance(bins, (int, np.integer)) or (isinstance(bins, Tensor) and bins.ndim == 0) else len(bins)
    if nb not in (1, 2):
        bins = [bins, bins]  # one array of edges for both axes
    elif nb == 1 and not isinstance(bins, (int, np.integer)):
        bins = [bins[0], bins[0]]
    d = _promote_kinds(xt.dtype, yt.dtype)   # as JAX's stack of the two: int32 and float16 points are float16
    counts, (ex, ey) = histogramdd(mv.stack([xt.astype(d), yt.astype(d)], axis=1), bins, range, weights, density)
    return counts, ex, ey


# ---- window functions ----
def _window_n(m: int, fn: str) -> int:
    try:
        return operator.index(m)
    except TypeError:
        raise TypeError(f"{fn}: M must be a static Python int (the window length), got {type(m).__name__}") from None


def _window(m: int, fn: str, values: Callable[[int], Tensor]) -> Tensor:
    """A window of M points in the default float type: empty for M < 1, [1.0] for M = 1, else `values(M)`."""
    m = _window_n(m, fn)
    d = dtypes.default_float
    if m < 1:
        return Tensor(np.zeros(0, d.np), dtype=d)
    if m == 1:
        return Tensor.full((1,), 1.0, d)
    return values(m)


def _symmetric_points(m: int) -> Tensor:
    """n = 1-M, 3-M, ..., M-1: the points numpy's symmetric windows are functions of."""
    return cr.arange(1 - m, m, 2, dtype=dtypes.default_float)


def _cosine_window(m: int, coeffs: tuple[float, ...], fn: str) -> Tensor:
    """sum_k coeffs[k] * cos(k * pi * n / (M - 1)) for n = 1-M, 3-M, ..., M-1: numpy's symmetric cosine windows."""
    def values(m: int) -> Tensor:
        n = _symmetric_points(m)
        out = Tensor.full((m,), coeffs[0], dtypes.default_float)
        for k, c in enumerate(coeffs[1:], start=1):
            out = out + c * ew.cos(n * (k * math.pi / (m - 1)))
        return out
    return _window(m, fn, values)


def bartlett(M: int) -> Tensor:  # noqa: N803 - numpy's argument name
    """The Bartlett (triangular) window of M points, in the default float type.

    >>> tnp.bartlett(5).tolist()
    [0.0, 0.5, 1.0, 0.5, 0.0]
    """
    return _window(M, "bartlett", lambda m: 1.0 - ew.abs(_symmetric_points(m)) / (m - 1))


def blackman(M: int) -> Tensor:  # noqa: N803
    """The Blackman window of M points: 0.42 - 0.5 cos(2 pi n / (M-1)) + 0.08 cos(4 pi n / (M-1))."""
    return _cosine_window(M, (0.42, 0.5, 0.08), "blackman")


def hamming(M: int) -> Tensor:  # noqa: N803
    """The Hamming window of M points: 0.54 - 0.46 cos(2 pi n / (M-1))."""
    return _cosine_window(M, (0.54, 0.46), "hamming")


def hanning(M: int) -> Tensor:  # noqa: N803
    """The Hann window of M points: 0.5 - 0.5 cos(2 pi n / (M-1)).

    >>> tnp.hanning(3).tolist()
    [0.0, 1.0, 0.0]
    """
    return _cosine_window(M, (0.5, 0.5), "hanning")


def i0(x: ArrayLike) -> Tensor:
    """The modified Bessel function of the first kind, order 0, elementwise in a float type (scipy.special.i0).

    >>> float(tnp.i0(0.0))
    1.0
    """
    from tgfx.scipy.special import i0 as _i0
    t = to_tensor(x)
    if t.dtype.is_complex:
        raise TypeError("i0: complex arguments are not supported, as in JAX")
    return _i0(t.astype(to_inexact(t.dtype)))


def kaiser(M: int, beta: ArrayLike) -> Tensor:  # noqa: N803
    """The Kaiser window of M points with shape parameter `beta`: i0(beta sqrt(1 - (2n/(M-1) - 1)^2)) / i0(beta).

    >>> tnp.kaiser(3, 0.0).tolist()
    [1.0, 1.0, 1.0]
    """
    def values(m: int) -> Tensor:
        d = dtypes.default_float
        b = to_tensor(beta).astype(d)
        alpha = (m - 1) / 2.0
        r = (cr.arange(0, m, dtype=d) - alpha) / alpha
        return i0(b * ew.sqrt(ew.maximum(1.0 - r * r, 0.0))) / i0(b)
    return _window(M, "kaiser", values)
