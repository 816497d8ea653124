"""Reductions with numpy's `axis` (int, tuple, negative, None) and `keepdims`, and JAX's result dtypes."""
from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence

import numpy as np

from tgfx.dtypes import DType, dtypes, max_value, min_value, to_dtype, to_inexact
from tgfx.function import function
from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.numpy._movement import concatenate
from tgfx.tensor import ArrayLike, Tensor, normalize_axes, to_tensor

Axis = int | Sequence[int] | None


def _axes(x: Tensor, axis: Axis, name: str) -> tuple[int, ...]:
    """The reduced axes, non-negative; numpy's AxisError naming `name` for an axis out of range (also of a 0-d)."""
    if axis is None:
        return tuple(range(x.ndim))
    if isinstance(axis, (int, np.integer)):
        ax: tuple = (axis,)
    else:
        try:
            ax = tuple(axis)
        except TypeError:
            raise TypeError(f"{name}: axis must be an integer or a tuple of integers, got {axis!r}") from None
    if x.ndim == 0 and ax:
        raise np.exceptions.AxisError(f"{name}: axis {ax[0]} is out of bounds for a Tensor of dimension 0")
    return normalize_axes(ax, x.ndim, name)


def _axis(x: Tensor, axis: int, name: str) -> int:
    return _axes(x, int(axis), name)[0]


def _sum_dtype(d: DType) -> DType:
    """JAX: bool and integers narrower than the default integer sum in its width (unsigned stay unsigned): int32
    without x64, int64 with it (where int32 sums in int64, as jnp.sum's)."""
    if d.is_bool:
        return dtypes.default_int
    if d.is_int and d.itemsize < dtypes.default_int.itemsize:
        return (dtypes.uint64 if dtypes.default_int.itemsize == 8 else dtypes.uint32) if d.is_unsigned else \
            dtypes.default_int
    return d


def half_compute(d: DType) -> DType | None:
    """float32 for float16 and bfloat16, else None: JAX sums and multiplies half floats in float32 and rounds the
    result once (jnp.sum's and jnp.prod's upcast, XLA's for a dot), where summing in the half type loses the small
    terms (4096 float16 0.1s add up to 256, not 409.6)."""
    return dtypes.float32 if d.is_float and d.itemsize < 4 else None


def _count(x: Tensor, axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def where_mask(where: ArrayLike | None, x: Tensor, name: str) -> Tensor | None:
    """`where=` as a bool Tensor of x's shape (None stays None): the elements a reduction reads."""
    if where is None:
        return None
    w = to_tensor(where)
    if not w.dtype.is_bool:
        raise TypeError(f"{name}: where must be a bool array, got {w.dtype.name}; pass e.g. where=(w != 0)")
    try:
        return w.expand(x.shape)
    except ValueError:
        raise ValueError(f"{name}: where of shape {w.shape} does not broadcast to the input's shape {x.shape}") \
            from None


def _selected(x: Tensor, where: ArrayLike | None, identity: float | int | bool, name: str) -> Tensor:
    """x with the reduction's identity where `where=` is False, as JAX's (x itself without a mask): the elements left
    out get a zero gradient."""
    mask = where_mask(where, x, name)
    return x if mask is None else ew.where(mask, x, Tensor.full((), identity, x.dtype))


def _initial(initial: ArrayLike, d: DType, name: str) -> Tensor:
    """`initial=` as a scalar of the reduction's dtype (numpy and JAX combine it with each slice's result)."""
    init = to_tensor(initial)
    if init.ndim:
        raise ValueError(f"{name}: initial must be a scalar, got shape {init.shape}")
    return init.astype(d)


def _reduced_shape(x: Tensor, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    return tuple(1 if a in axes else s for a, s in enumerate(x.shape) if keepdims or a not in axes)


def _sum_or_prod(x: ArrayLike, axis: Axis, dtype: DType | str | None, keepdims: bool, initial: ArrayLike | None,
                 where: ArrayLike | None, name: str, product: bool) -> Tensor:
    """sum or prod in JAX's dtypes (`_sum_dtype`): of the elements where `where=` is True, and `initial`."""
    x = to_tensor(x)
    axes = _axes(x, axis, name)
    if dtype is None and (wide := half_compute(x.dtype)) is not None:  # JAX's upcast, only without dtype=
        return _sum_or_prod(x.widened(wide), axis, None, keepdims, initial, where, name, product).astype(x.dtype)
    x = _selected(x.astype(to_dtype(dtype) if dtype is not None else _sum_dtype(x.dtype)), where, int(product), name)
    if not product:
        out = x._reduce(Ops.ADD, axes, keepdims)
    elif x.dtype.is_complex:
        from tgfx.numpy._complex import prod as complex_prod
        out = complex_prod(x, axes, keepdims)
    else:
        out = x._reduce(Ops.MUL, axes, keepdims)
    if initial is None:
        return out
    return (ew.multiply if product else ew.add)(out, _initial(initial, out.dtype, name))


def sum(x: ArrayLike, axis: Axis = None, dtype: DType | str | None = None, keepdims: bool = False, *,  # noqa: A001
        initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
    """numpy's sum with JAX's dtypes: of the elements where `where=` is True, plus `initial`.

    >>> tnp.sum(tnp.asarray([[1, 2], [3, 4]]), axis=1, where=tnp.asarray([True, False]), initial=10).tolist()
    [11, 13]
    """
    if axis is None and dtype is None and initial is None and where is None and type(x) is Tensor and \
            x.dtype.kind == "f" and x.dtype.itemsize >= 4:
        # (a float32/float64 Tensor's total, the metric or loss an eager loop reads: the reduce `_sum_or_prod` builds,
        # without its dtype, axis and mask steps, a tenth of an eager sum's time)
        return x._reduce(Ops.ADD, None, keepdims)
    return _sum_or_prod(x, axis, dtype, keepdims, initial, where, "sum", product=False)


def prod(x: ArrayLike, axis: Axis = None, dtype: DType | str | None = None, keepdims: bool = False, *,
         initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Tensor:
    """numpy's prod with JAX's dtypes: of the elements where `where=` is True, times `initial`."""
    return _sum_or_prod(x, axis, dtype, keepdims, initial, where, "prod", product=True)


def _check_nonempty(x: Tensor, axes: tuple[int, ...], name: str) -> None:
    if builtins.any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity "
                         f"(shape {x.shape}, axis {axes}); pass initial= to give an empty slice a value")


def _extreme(x: ArrayLike, axis: Axis, keepdims: bool, initial: ArrayLike | None, where: ArrayLike | None, name: str,
             largest: bool) -> Tensor:
    """max or min: of the elements where `where=` is True, and `initial` (which an empty slice is). Neither has an
    identity, so `where=` needs `initial=`, as numpy and JAX say."""
    x = to_tensor(x)
    axes = _axes(x, axis, name)
    if initial is None:
        if where is not None:
            raise ValueError(f"{name}: a where= mask needs initial= ({name} has no identity to give a slice where "
                             f"nothing is selected)")
        _check_nonempty(x, axes, name)
    identity = min_value(x.dtype) if largest else max_value(x.dtype)
    x = _selected(x, where, identity, name)
    if _count(x, axes) == 0:
        out = Tensor.full(_reduced_shape(x, axes, keepdims), identity, x.dtype)
    elif x.dtype.is_complex:
        out = _complex_extreme(x, axes, keepdims, name, largest)
    elif largest:
        out = x._reduce(Ops.MAX, axes, keepdims)
    elif x.dtype.is_float:
        out = ew.negative(ew.negative(x)._reduce(Ops.MAX, axes, keepdims))
    else:
        out = ew.invert(ew.invert(x)._reduce(Ops.MAX, axes, keepdims))
    if initial is None:
        return out
    return (ew.maximum if largest else ew.minimum)(out, _initial(initial, x.dtype, name))


def _complex_extreme(x: Tensor, axes: tuple[int, ...], keepdims: bool, name: str, largest: bool) -> Tensor:
    """max or min of complex x in JAX's lexicographic order (`tnp.less`): the extreme real part, then the extreme
    imaginary part among the elements that have it. A NaN real part wins, as a float max's NaN does, with the
    imaginary parts of the elements that have one."""
    from tgfx.numpy._complex import from_parts, imag, real
    re, im = real(x), imag(x)
    r = _extreme(re, axes, True, None, None, name, largest)
    tied = ew.logical_or(ew.equal(re, r), ew.logical_and(ew.isnan(re), ew.isnan(r)))
    far = min_value(im.dtype) if largest else max_value(im.dtype)
    i = _extreme(ew.where(tied, im, far), axes, True, None, None, name, largest)
    out = from_parts(r, i)
    return out if keepdims else out.reshape(_reduced_shape(x, axes, False))


def max(x: ArrayLike, axis: Axis = None, keepdims: bool = False, *, initial: ArrayLike | None = None,  # noqa: A001
        where: ArrayLike | None = None) -> Tensor:
    """numpy's max: of the elements where `where=` is True (then `initial=` is needed) and `initial`.

    >>> tnp.max(tnp.asarray([[1, 5], [3, 4]]), axis=1, where=tnp.asarray([True, False]), initial=2).tolist()
    [2, 3]
    """
    return _extreme(x, axis, keepdims, initial, where, "max", largest=True)


def min(x: ArrayLike, axis: Axis = None, keepdims: bool = False, *, initial: ArrayLike | None = None,  # noqa: A001
        where: ArrayLike | None = None) -> Tensor:
    """numpy's min: of the elements where `where=` is True (then `initial=` is needed) and `initial`."""
    return _extreme(x, axis, keepdims, initial, where, "min", largest=False)


amax, amin = max, min


def _divide(s: Tensor, n: Tensor | int | float) -> Tensor:
    """s / n in s's dtype: an integer one truncates toward zero, as jax.lax.div (JAX's mean with an integer dtype=);
    a float sum of nothing is NaN."""
    if s.dtype.is_int:
        from tgfx._lax_ops import div
        return div(s, n if isinstance(n, Tensor) else Tensor.full((), n, s.dtype))
    return s / n if isinstance(n, Tensor) or n else s * float("nan")


def mean(x: ArrayLike, axis: Axis = None, dtype: DType | str | None = None, keepdims: bool = False, *,
         where: ArrayLike | None = None) -> Tensor:
    """The mean in floats: integers as `to_inexact` (int32 -> float32, int64 -> float64), as JAX. An integer dtype=
    sums and divides in that dtype, as JAX's (truncating: mean([1, 2, 4], dtype=int32) is 2). With `where=`, the
    mean of the selected elements (NaN where none is).

    >>> tnp.mean(tnp.asarray([1.0, 2.0, 6.0]), where=tnp.asarray([True, True, False])).item()
    1.5
    """
    if axis is None and dtype is None and where is None and not keepdims and type(x) is Tensor and \
            x.uop.dtype.kind == "f" and x.uop.dtype.itemsize >= 4:
        # (a float32/float64 Tensor's mean, an eager metric's: `sum`'s total over the count, without the dtype, axis
        # and mask steps below, which give these same nodes)
        n = 1
        for d in x.uop.shape:
            n *= d
        total = x._reduce(Ops.ADD, None, False)
        return ew.true_divide(total, n) if n else total * float("nan")   # (`_divide` of a float total)
    x = to_tensor(x)
    if dtype is None and (wide := half_compute(x.dtype)) is not None:  # summed and divided in float32, as JAX's
        return mean(x.widened(wide), axis, None, keepdims, where=where).astype(x.dtype)
    axes = _axes(x, axis, "mean")
    d = to_dtype(dtype) if dtype is not None else to_inexact(x.dtype)
    mask = where_mask(where, x, "mean")
    n = _count(x, axes) if mask is None else sum(mask, axis=axes, dtype=d, keepdims=keepdims)
    return _divide(sum(x, axis=axes, dtype=d, keepdims=keepdims, where=mask), n)


def abs2(d: Tensor) -> Tensor:
    """|d|^2, real: d * d, and re^2 + im^2 of a complex d (as JAX's var, real(d * conj(d)))."""
    if not d.dtype.is_complex:
        return d * d
    from tgfx.numpy._complex import conj, real
    return real(d * conj(d))


def _var_dtypes(d: DType, dtype: DType | str | None, name: str) -> tuple[DType, DType]:
    """JAX's dtypes of a variance: the one it is computed in (half floats in float32, as JAX and numpy: squares of
    small deviations underflow float16) and the one it is returned in (`dtype`, or a complex input's real dtype, an
    integer's `to_inexact`)."""
    if dtype is None:
        comp, out = to_inexact(d), to_inexact(d).real
    else:
        comp = out = to_dtype(dtype)
        if d.is_complex and not out.is_complex:
            raise ValueError(f"{name}: dtype={out.name} for complex values is not supported (as in JAX): the "
                             f"variance is real, returned as {d.real.name} without dtype=, or pass a complex dtype")
    return (dtypes.float32 if comp.is_float and comp.itemsize < 4 else comp), out


def variance(x: Tensor, axes: tuple[int, ...], ddof: int | float, keepdims: bool, dtype: DType | str | None,
             keep: Tensor | None, known_mean: ArrayLike | None, name: str) -> tuple[Tensor, Tensor, DType]:
    """The sum of |x - mean|^2 over the elements `keep` selects (all without it) in the dtype it is computed in, the
    degrees of freedom (their count less ddof), and the dtype the variance is returned in. `known_mean` is a
    precomputed mean (keepdims shape). var and nanvar (`keep` without the NaNs) share it."""
    comp, out = _var_dtypes(x.dtype, dtype, name)
    x = x.astype(comp)
    m = mean(x, axis=axes, dtype=comp, keepdims=True, where=keep) if known_mean is None else \
        to_tensor(known_mean).astype(comp)
    dev = x - m
    if keep is not None:  # the deviations left out (NaN ones too) replaced after the subtraction: zero gradient
        dev = ew.where(keep, dev, Tensor.full((), 0, comp))
    sq = abs2(dev)
    ss = sum(sq, axis=axes, dtype=sq.dtype, keepdims=keepdims)
    n = Tensor.full(ss.shape, _count(x, axes), sq.dtype) if keep is None else \
        sum(keep, axis=axes, dtype=sq.dtype, keepdims=keepdims)
    return ss, n - ddof, out


def _ddof(ddof: int | float, correction: int | float | None, name: str) -> int | float:
    """numpy's `ddof` or the standard's `correction` (the same number), not both."""
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError(f"{name}: ddof and correction are the same argument (numpy's and the array API's name); "
                         f"pass one of them")
    return correction


def _var(x: ArrayLike, axis: Axis, ddof: int | float, keepdims: bool, dtype: DType | str | None,
         where: ArrayLike | None, known_mean: ArrayLike | None, correction: int | float | None, name: str) -> Tensor:
    x = to_tensor(x)
    ss, dof, out = variance(x, _axes(x, axis, name), _ddof(ddof, correction, name), keepdims, dtype,
                            where_mask(where, x, name), known_mean, name)
    none_left = dof <= 0
    v = _divide(ss, ew.where(none_left, Tensor.full((), 1, dof.dtype), dof)).astype(out)
    return ew.where(none_left, float("nan"), v)


def var(x: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False, *, dtype: DType | str | None = None,
        where: ArrayLike | None = None, mean: ArrayLike | None = None,
        correction: int | float | None = None) -> Tensor:
    """The variance, sum(|x - mean|^2) / (count - ddof), of the elements where `where=` is True; NaN where no degrees
    of freedom are left, as JAX's. `mean=` gives a precomputed mean (keepdims shape).

    >>> tnp.var(tnp.asarray([1.0, 3.0, 100.0]), where=tnp.asarray([True, True, False])).item()
    1.0
    """
    return _var(x, axis, ddof, keepdims, dtype, where, mean, correction, "var")


def std(x: ArrayLike, axis: Axis = None, ddof: int = 0, keepdims: bool = False, *, dtype: DType | str | None = None,
        where: ArrayLike | None = None, mean: ArrayLike | None = None,
        correction: int | float | None = None) -> Tensor:
    """The square root of `var` (same arguments); dtype= must be inexact, as JAX's."""
    if dtype is not None and not to_dtype(dtype).is_inexact:
        raise ValueError(f"std: dtype must be a float or complex type (a square root's), got {to_dtype(dtype).name}")
    v = _var(x, axis, ddof, keepdims, dtype, where, mean, correction, "std")
    return ew.sqrt(v)


def any(x: ArrayLike, axis: Axis = None, keepdims: bool = False, *,  # noqa: A001
        where: ArrayLike | None = None) -> Tensor:
    """Whether any element (of those where `where=` is True) is nonzero."""
    x = to_tensor(x)
    return _selected(ew._bool(x), where, False, "any")._reduce(Ops.MAX, _axes(x, axis, "any"), keepdims)


def all(x: ArrayLike, axis: Axis = None, keepdims: bool = False, *,  # noqa: A001
        where: ArrayLike | None = None) -> Tensor:
    """Whether every element (of those where `where=` is True) is nonzero."""
    x = to_tensor(x)
    none_false = _selected(ew.logical_not(x), where, False, "all")._reduce(Ops.MAX, _axes(x, axis, "all"), keepdims)
    return ew.logical_not(none_false)


def _arg_reduce(x: Tensor, axis: int | None, keepdims: bool, name: str, negate: bool) -> Tensor:
    if x.dtype.is_complex:
        raise TypeError(f"{name}: complex values are not supported, as in jnp.{name} (max, min and sort order them "
                        f"by real then imaginary part); pass real(x), imag(x) or abs(x)")
    if axis is None:
        _check_nonempty(x, tuple(range(x.ndim)), name)
        flat = x.reshape(-1)
        out = _arg_reduce(flat, 0, False, name, negate)
        return out.reshape((1,) * x.ndim) if keepdims else out
    axis = _axis(x, axis, name)
    _check_nonempty(x, (axis,), name)
    return _arg_compiled(axis, keepdims, negate)(x)


_arg_jits: dict[tuple[int, bool, bool], Callable[[Tensor], Tensor]] = {}


def _arg_compiled(axis: int, keepdims: bool, negate: bool) -> Callable[[Tensor], Tensor]:
    """`_arg_along` for these static arguments as a `tg.jit`, as JAX jits its argmax: an eager call (an accuracy
    metric between training steps) replays a compiled program instead of building the dozen ops' graph again
    (`(logits.argmax(-1) == y).mean()`: 260 us of eager graph a call, jax's 68); inside a trace it is inlined."""
    key = (axis, keepdims, negate)
    if (f := _arg_jits.get(key)) is None:
        from tgfx.transforms.jit import jit
        f = _arg_jits.setdefault(key, jit(lambda x: _arg_along(x, axis, keepdims, negate)))
    return f


def _arg_along(x: Tensor, axis: int, keepdims: bool, negate: bool) -> Tensor:
    """The index of the first maximum (minimum when `negate`) along `axis`; NaN counts as the maximum, as numpy's."""
    v = x if not negate else (ew.negative(x) if x.dtype.is_float else ew.invert(x))
    m = v._reduce(Ops.MAX, axis, True)
    hit = ew.equal(v, m)
    if v.dtype.is_float:  # numpy returns the first NaN
        hit = ew.logical_or(hit, ew.isnan(v))
    n = x.shape[axis]
    iota = Tensor.arange(n, dtype=dtypes.int32).reshape((n,) + (1,) * (x.ndim - axis - 1))
    # the first hit: the largest reversed index among the hits
    rev = ew.where(hit, n - 1 - iota, -1)
    out = ((n - 1) - rev._reduce(Ops.MAX, axis, True)).astype(dtypes.default_int)   # JAX's: int64 with x64
    return out if keepdims else out.reshape(tuple(s for i, s in enumerate(x.shape) if i != axis))


def argmax(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _arg_reduce(to_tensor(x), axis, keepdims, "argmax", negate=False)


def argmin(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _arg_reduce(to_tensor(x), axis, keepdims, "argmin", negate=True)


def _cumulative(x: Tensor, axis: int | None, op: Ops, dtype: DType | str | None, name: str) -> Tensor:
    """A running sum or product in the input's dtype, as jnp.cumsum's (int8 wraps; only bool counts in the default
    integer, as `sum`); `dtype=bool` accumulates the truth values (x != 0) in integers and casts the result back."""
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = _axis(x, axis, name)
    out = to_dtype(dtype) if dtype is not None else _sum_dtype(x.dtype) if x.dtype.is_bool else x.dtype
    if out.is_bool:  # [-1, 1] must count as two true values, not cancel
        x = ew._bool(x)
    x = x.astype(_sum_dtype(out) if out.is_bool else out)
    return scan(x, axis, False, *(_SUMS if op is Ops.ADD else _PRODUCTS)).astype(out)


def masked_sum(v: Tensor, keep: Tensor, axis: int) -> Tensor:
    """The sum of the kept values along `axis`; the others are -0.0 for floats, which adds to any value exactly (a
    cumsum's first element -0.0 stays -0.0, as numpy's)."""
    return ew.where(keep, v, Tensor.full((), -0.0 if v.dtype.is_float else 0, v.dtype))._reduce(Ops.ADD, axis, False)


def masked_product(v: Tensor, keep: Tensor, axis: int) -> Tensor:
    kept = ew.where(keep, v, Tensor.full((), 1, v.dtype))
    if v.dtype.is_complex:  # the reduce has no complex MUL: a tree of complex products, as `prod`'s
        from tgfx.numpy._complex import prod as complex_prod
        return complex_prod(kept, (axis,), False)
    return kept._reduce(Ops.MUL, axis, False)


# a scan of an axis up to this long is one masked reduce (n^2 work); a longer one is a loop
SCAN_TRIANGLE_MAX = 32

Pair = Callable[[Tensor, Tensor], Tensor]        # an associative combination, the earlier prefix on the left
Masked = Callable[[Tensor, Tensor, int], Tensor]  # (values, keep, axis) -> the reduction of the kept values


def scan(x: Tensor, axis: int, reverse: bool, pair: Pair, masked: Masked | None) -> Tensor:
    """The inclusive scan of `x` along `axis` (see `_scan`): eagerly, its traced body is kept per signature, so a
    call is a schedule's replay (`pair` and `masked` module-level functions: their identity is part of the key).
    Without `masked`, log2(n) doubling steps of `pair` (max and min: a masked maximum over a triangle is a chain of
    NaN-propagating compares that no vector takes, 5 ms for 10,000 elements against 0.1 for the steps)."""
    return _scan_traced(x, axis, reverse, pair, masked)


def _scan(x: Tensor, axis: int, reverse: bool, pair: Pair, masked: Masked | None) -> Tensor:
    """The inclusive scan of `x` along `axis` (from the end with `reverse`) under `pair`, whose reduction of the
    values a boolean mask keeps is `masked`: cumsum, cumprod, cummax, ... (`tnp` and `tg.lax` share it).

    A short axis (up to SCAN_TRIANGLE_MAX) is one masked reduce of a triangle, which fuses into what reads it; a
    longer one a loop (`_scan_loop`). Without `masked`, log2(n) doubling steps of `pair`."""
    n = x.shape[axis]
    if n <= 1:
        return x
    if masked is not None and n > SCAN_TRIANGLE_MAX:
        return _scan_loop(x, axis, reverse, pair)
    last = x if axis == x.ndim - 1 else x.permute(*[a for a in range(x.ndim) if a != axis], axis)
    src = last.flip(-1) if reverse else last
    out = _doubling(src, pair) if masked is None else _triangle(src, masked)
    out = out.flip(-1) if reverse else out
    if axis == x.ndim - 1:
        return out
    inv = list(range(x.ndim - 1))
    inv.insert(axis, x.ndim - 1)
    return out.permute(*inv)


def _scan_loop(x: Tensor, axis: int, reverse: bool, pair: Pair) -> Tensor:
    """A sum's or product's scan as `tg.lax.scan` over the axis, the other elements a step's lanes: one loop
    kernel (its steps a sequential range, the lanes vectors, each step's slice stored as it goes;
    tgfx/lowering/loop_kernel.py), O(n) work in numpy's order, and a gradient that is the reverse loop. The blocked
    triangles it replaces did O(n sqrt(n)) work in 4 kernels (a cumsum of 1e5: 1.6 ms, now 0.07) and their product
    reduces' gradient multiplied every output's other factors for each input (cumprod's of 256 x 512: 11.7 ms, jax
    0.6; now 0.3). The running value starts at the reduction of nothing (-0.0 for a float sum: -0.0 + v is v)."""
    from tgfx.lax import scan as lax_scan
    from tgfx.numpy._movement import moveaxis
    xs = moveaxis(x, axis, 0)
    none = 1 if pair is ew.multiply else -0.0 if x.dtype.is_float else 0
    start = Tensor.full(xs.shape[1:], none, x.dtype)

    def step(c: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        c = pair(c, v)
        return c, c

    return moveaxis(lax_scan(step, start, xs, reverse=reverse)[1], 0, axis)


_SUMS, _PRODUCTS = (ew.add, masked_sum), (ew.multiply, masked_product)
_scan_traced = function(_scan, cache=True)


def _doubling(x: Tensor, pair: Pair) -> Tensor:
    """Hillis and Steele's scan of the last axis: step k combines each element with the one 2^k before it; each step
    stored (the next reads it twice: fused, the reads would double a step)."""
    n, k = x.shape[-1], 1
    while k < n:
        x = store(concatenate([x[..., :k], pair(x[..., :-k], x[..., k:])], axis=-1))
        k *= 2
    return x


def _store_backward(grads: Tensor, call: object) -> tuple[Tensor]:
    return (grads.contiguous(),)


# x stored to a buffer, and its gradient too: a CONTIGUOUS alone passes the cotangent on unstored, and the backward of
# a scan's steps, fused into one kernel, would repeat each step's reads as the forward would
store = function(lambda t: t.contiguous(), grad_fxn=_store_backward)


def _triangle(x: Tensor, masked: Masked) -> Tensor:
    """out[..., i] = the reduction of x[..., j] for j <= i: x repeated along a new axis j, masked, reduced over it."""
    n = x.shape[-1]
    rows = x.reshape(x.shape[:-1] + (1, n)).expand(x.shape[:-1] + (n, n))
    i = Tensor.arange(n, dtype=dtypes.int32).reshape(n, 1)
    j = Tensor.arange(n, dtype=dtypes.int32).reshape(1, n)
    return masked(rows, ew.less_equal(j, i).expand(rows.shape), x.ndim)


def cumsum(x: ArrayLike, axis: int | None = None, dtype: DType | str | None = None) -> Tensor:
    return _cumulative(to_tensor(x), axis, Ops.ADD, dtype, "cumsum")


def cumprod(x: ArrayLike, axis: int | None = None, dtype: DType | str | None = None) -> Tensor:
    return _cumulative(to_tensor(x), axis, Ops.MUL, dtype, "cumprod")
