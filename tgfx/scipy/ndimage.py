"""`tgfx.scipy.ndimage`: interpolation of an n-d array at arbitrary coordinates (`map_coordinates`), as
`jax.scipy.ndimage` has it: nearest (order 0) and linear (order 1) interpolation, with JAX's boundary modes.

Each of the 2^ndim corners of the interpolation cell is one gather from the input, weighted and summed, so the whole
interpolation is a few fused kernels; it traces under `jit` and `vmap` and is differentiable in the input (and, for
order 1, in the coordinates, piecewise).

>>> from tgfx.scipy import ndimage
>>> img = tnp.arange(12.0).reshape(3, 4)
>>> ndimage.map_coordinates(img, [tg.asarray([0.5, 1.5]), tg.asarray([1.5, 2.5])], order=1)    # [3.5, 8.5]
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import tgfx.numpy as tnp
from tgfx.dtypes import promote_types, to_inexact
from tgfx.lax import round as lax_round
from tgfx.tensor import ArrayLike, Tensor, to_tensor


def _mirror(index: Tensor, size: int) -> Tensor:
    """scipy's 'mirror' (d c b | a b c d | c b a): a triangular wave of period 2 (size - 1)."""
    if size == 1:   # a period of 0: every index is the one element
        return tnp.zeros_like(index)
    s = size - 1
    return tnp.abs((index + s) % (2 * s) - s)


def _reflect(index: Tensor, size: int) -> Tensor:
    """scipy's 'reflect' (d c b a | a b c d | d c b a): the mirror of the half-integer grid."""
    return tnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


# how each mode maps an index outside [0, size) into it; 'constant' keeps it (the value there is cval)
_INDEX_FIXERS: dict[str, Callable[[Tensor, int], Tensor]] = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: tnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _nearest(coordinate: Tensor) -> list[tuple[Tensor, Tensor | None]]:
    """The (index, weight) of the nearest grid point (halves rounded away from zero, as JAX); weight None is 1."""
    index = coordinate if coordinate.dtype.is_int else lax_round(coordinate)
    return [(index.astype("int32"), None)]


def _linear(coordinate: Tensor, d: str) -> list[tuple[Tensor, Tensor | None]]:
    """The two grid points around the coordinate and their linear weights."""
    c = coordinate.astype(d)
    lower = tnp.floor(c)
    upper_weight = c - lower
    index = lower.astype("int32")
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input: ArrayLike, coordinates: Sequence[ArrayLike], order: int,  # noqa: A002 - scipy's name
                    mode: str = "constant", cval: ArrayLike = 0.0) -> Tensor:
    """The input interpolated at the given coordinates (scipy.ndimage.map_coordinates, as JAX has it).

    `coordinates` is a sequence of input.ndim arrays, the i-th holding the positions along axis i; they broadcast
    together to the result's shape. `order` is 0 (nearest grid point, halves rounded away from zero) or 1 (linear).
    `mode` says what lies outside the input: 'constant' (`cval`), 'nearest' (the edge value), 'wrap' (periodic),
    'mirror' (d c b | a b c d | c b a) or 'reflect' (d c b a | a b c d | d c b a). As in JAX, 'constant' and 'wrap'
    behave as scipy's 'grid-constant' and 'grid-wrap' (the grid extends past the last sample before it repeats or
    turns to cval; see jax-ml/jax#11097). The result has the input's dtype (an integer input is rounded).

    >>> img = tnp.arange(12.0).reshape(3, 4)
    >>> map_coordinates(img, [tg.asarray([0.5, 1.5]), tg.asarray([1.5, 2.5])], order=1)      # [3.5, 8.5]
    >>> map_coordinates(img, [tg.asarray([-1.0]), tg.asarray([0.0])], order=0, mode="wrap")  # [8.0]
    """
    x = to_tensor(input)
    if isinstance(coordinates, (Tensor,)) or not isinstance(coordinates, Sequence):
        raise TypeError(f"map_coordinates: coordinates must be a sequence (list or tuple) of input.ndim arrays, one "
                        f"per axis of the input (shape {x.shape}), got {type(coordinates).__name__}")
    coords = [to_tensor(c) for c in coordinates]
    if len(coords) != x.ndim:
        raise ValueError(f"map_coordinates: coordinates must be a sequence of input.ndim arrays, one per axis of the "
                         f"input (shape {x.shape}, ndim {x.ndim}), got {len(coords)}")
    if x.ndim == 0:
        raise ValueError("map_coordinates: the input must have at least one axis, got a scalar")
    if any(s == 0 for s in x.shape):
        raise ValueError(f"map_coordinates: the input must not be empty, got shape {x.shape}")
    for i, c in enumerate(coords):
        if c.dtype.is_complex or c.dtype.is_bool:
            raise TypeError(f"map_coordinates: coordinates[{i}] must be real numbers, got dtype {c.dtype.name}")
    fixer = _INDEX_FIXERS.get(mode)
    if fixer is None:
        raise NotImplementedError(f"map_coordinates: mode={mode!r} is not supported; the modes are "
                                  f"{', '.join(map(repr, _INDEX_FIXERS))}, as in jax.scipy.ndimage")
    # the weights are worked in the inexact type of the input and the coordinates, as JAX's products promote
    d = to_inexact(promote_types(x.dtype, *(c.dtype for c in coords)))
    if order == 0:
        nodes = [_nearest(c) for c in coords]
    elif order == 1:
        nodes = [_linear(c, d) for c in coords]
    else:
        raise NotImplementedError(f"map_coordinates: order={order!r} is not supported; only order 0 (nearest) and 1 "
                                  f"(linear) are, as in jax.scipy.ndimage")
    # per axis: (index inside the input, whether the unfixed index was inside, weight)
    per_axis = []
    for nodes_i, size in zip(nodes, x.shape, strict=True):
        fixed = []
        for index, weight in nodes_i:
            if mode == "constant":   # out-of-range reads are replaced by cval; read in range so the gather is safe
                valid = (index >= 0) & (index < size)
                fixed.append((tnp.clip(index, 0, size - 1), valid, weight))
            else:
                fixed.append((fixer(index, size), None, weight))
        per_axis.append(fixed)
    cv = to_tensor(cval).astype(x.dtype)
    result = None
    for corner in itertools.product(*per_axis):
        indices, valids, weights = zip(*corner, strict=True)
        value = x[tuple(indices)]
        masks = [v for v in valids if v is not None]
        if masks:
            ok = masks[0]
            for m in masks[1:]:
                ok = ok & m
            value = tnp.where(ok, value, cv)
        value = value.astype(d)
        for w in weights:
            if w is not None:
                value = value * w
        result = value if result is None else result + value
    assert result is not None
    if x.dtype.is_int:
        result = lax_round(result)
    return result.astype(x.dtype)
