"""The modes of `tnp.pad` past the index-copying ones (constant, edge, reflect, symmetric, wrap, in `_movement.py`):
per-side constants, `linear_ramp`, the statistics modes (`maximum`, `minimum`, `mean`, `median`), `empty`, and the
odd reflections. Each pads one axis at a time, in order, as JAX's `jnp.pad` does, so the corners come out as JAX's."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _movement as mv
from tgfx.numpy._creation import linspace
from tgfx.numpy._reduce import max as amax
from tgfx.numpy._reduce import mean
from tgfx.numpy._reduce import min as amin
from tgfx.numpy._stats import median
from tgfx.tensor import ArrayLike, Tensor, to_tensor

STAT_MODES = ("maximum", "minimum", "mean", "median")


def _pairs(v: ArrayLike, ndim: int, name: str) -> list[tuple]:
    """A per-axis (before, after) table from a scalar, a pair or one pair per axis, as numpy broadcasts them."""
    if isinstance(v, Tensor):
        if v.ndim == 0:
            return [(v, v)] * ndim
        if v.shape not in ((2,), (1, 2), (ndim, 2), (1,), (ndim, 1)):
            raise ValueError(f"pad: {name} of shape {v.shape} does not broadcast to ({ndim}, 2)")
        v = v.reshape(v.shape if v.ndim == 2 else (1, v.shape[0]))
        return [(v[min(i, v.shape[0] - 1), 0], v[min(i, v.shape[0] - 1), -1]) for i in range(ndim)]
    try:
        table = np.broadcast_to(np.asarray(v), (ndim, 2))
    except ValueError:
        raise ValueError(f"pad: {name}={v!r} does not broadcast to one (before, after) pair per axis "
                         f"({ndim} axes)") from None
    return [(table[i, 0].item(), table[i, 1].item()) for i in range(ndim)]


def _side(x: Tensor, ax: int, n: int, value: ArrayLike) -> Tensor:
    """`n` copies along `ax` of `value` (a scalar, or a slice of x of length 1 along `ax`), in x's dtype."""
    shape = tuple(n if a == ax else s for a, s in enumerate(x.shape))
    return mv.broadcast_to(to_tensor(value).astype(x.dtype), shape)


def _slab(x: Tensor, ax: int, lo: int, hi: int) -> Tensor:
    """x[..., lo:hi, ...] along `ax`."""
    return x.shrink(tuple((lo, hi) if i == ax else (0, s) for i, s in enumerate(x.shape)))


def _join(x: Tensor, ax: int, before: Tensor, after: Tensor) -> Tensor:
    parts = [p for p in (before, x, after) if p.shape[ax]]
    return mv.concat(parts, ax) if len(parts) > 1 else parts[0]


def pad_constant(x: Tensor, pw: tuple[tuple[int, int], ...], constant_values: ArrayLike) -> Tensor:
    """Each side of each axis filled with its own constant (`constant_values` broadcast to (ndim, 2))."""
    for ax, ((b, a), (cb, ca)) in enumerate(zip(pw, _pairs(constant_values, x.ndim, "constant_values"), strict=True)):
        x = _join(x, ax, _side(x, ax, b, cb), _side(x, ax, a, ca))
    return x


def pad_linear_ramp(x: Tensor, pw: tuple[tuple[int, int], ...], end_values: ArrayLike) -> Tensor:
    """A ramp from each side's end value to the edge (the edge excluded), as numpy's and JAX's `linear_ramp`."""
    for ax, ((b, a), (eb, ea)) in enumerate(zip(pw, _pairs(end_values, x.ndim, "end_values"), strict=True)):
        n = x.shape[ax]
        first = mv.squeeze(_slab(x, ax, 0, 1), ax)
        last = mv.squeeze(_slab(x, ax, n - 1, n), ax)
        before = linspace(eb, first, b, endpoint=False, dtype=x.dtype, axis=ax)
        after = linspace(ea, last, a, endpoint=False, dtype=x.dtype, axis=ax).flip(ax)
        x = _join(x, ax, before, after)
    return x


def pad_stat(x: Tensor, pw: tuple[tuple[int, int], ...], mode: str, stat_length: ArrayLike | None) -> Tensor:
    """Each side filled with a statistic (max, min, mean or median) of the `stat_length` elements next to it (all
    of the axis when None); integer arrays take the rounded statistic, as JAX's."""
    stat: Callable[..., Tensor] = {"maximum": amax, "minimum": amin, "mean": mean, "median": median}[mode]
    lengths = None if stat_length is None else _pairs(stat_length, x.ndim, "stat_length")
    for ax, (b, a) in enumerate(pw):
        n = x.shape[ax]
        if lengths is None:
            sb = sa = stat(x, axis=ax, keepdims=True)
        else:
            lb, la = (int(v) for v in lengths[ax])
            if lb <= 0 or la <= 0:
                raise ValueError(f"pad: stat_length {lengths[ax]} of axis {ax} yields no value for padding; give "
                                 f"lengths of at least 1")
            lb, la = min(lb, n), min(la, n)
            sb = stat(_slab(x, ax, 0, lb), axis=ax, keepdims=True)
            sa = stat(_slab(x, ax, n - la, n), axis=ax, keepdims=True)
        if x.dtype.is_int:
            sb, sa = ew.round(sb), ew.round(sa)
        x = _join(x, ax, _side(x, ax, b, sb), _side(x, ax, a, sa))
    return x


def pad_reflect_odd(x: Tensor, pw: tuple[tuple[int, int], ...], mode: str) -> Tensor:
    """'reflect' / 'symmetric' with `reflect_type="odd"`: each reflected chunk is mirrored through the edge value
    (2 * edge - x), chunk by chunk, as numpy's and JAX's."""
    for ax, (b, a) in enumerate(pw):
        n = x.shape[ax]
        if n == 0 or b == a == 0:
            continue
        offset = 1 if mode == "reflect" and n > 1 else 0
        for before, padding in ((True, b), (False, a)):
            while padding > 0:
                m = x.shape[ax]
                cur = min(padding, n - offset)
                padding -= cur
                lo, hi = ((offset, offset + cur) if before else
                          (m - cur - offset, m if mode == "symmetric" or n == 1 else m - 1))
                edge = _slab(x, ax, 0, 1) if before else _slab(x, ax, m - 1, m)
                chunk = _slab(x, ax, lo, hi).flip(ax)
                chunk = (2 * edge - chunk).astype(x.dtype)
                x = mv.concat([chunk, x] if before else [x, chunk], ax)
    return x


def pad_empty(x: Tensor, pw: tuple[tuple[int, int], ...]) -> Tensor:
    """Uninitialised padding is zeros, as JAX's (`jnp.empty` is `jnp.zeros`)."""
    return x.pad_zeros(pw)
