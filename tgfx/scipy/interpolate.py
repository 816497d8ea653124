"""`tgfx.scipy.interpolate`: interpolation on a rectilinear grid (`RegularGridInterpolator`), as
`jax.scipy.interpolate` has it: linear and nearest, with a fill value outside the grid.

The interpolator is a pytree (its grid, values and fill value are the leaves), so it can be passed into and returned
from `jit`-ted functions; evaluating it is a `searchsorted` per axis and one gather per cell corner, differentiable in
the values and (linear) in the query points.

>>> from tgfx.scipy.interpolate import RegularGridInterpolator
>>> f = RegularGridInterpolator((tg.asarray([1, 2, 3]), tg.asarray([4, 5, 6])),
...                             tg.asarray([[10, 20, 30], [40, 50, 60], [70, 80, 90]]))
>>> f(tg.asarray([[1.5, 4.5], [2.2, 5.8]]))                 # [30.0, 64.0]
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import tgfx.numpy as tnp
from tgfx.dtypes import DType, dtypes, promote_types, to_inexact
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor, promotion_kind, to_tensor
from tgfx.tree import register_pytree_node

_METHODS = ("linear", "nearest")


def _check_method(method: str) -> None:
    if method not in _METHODS:
        raise ValueError(f"RegularGridInterpolator: method={method!r} is not supported; use 'linear' or 'nearest', as "
                         f"in jax.scipy.interpolate")


def _points(xi: Any, ndim: int) -> Tensor:
    """The query points as one (..., ndim) array: from a tuple of ndim coordinate arrays (broadcast together), or
    an array whose last axis holds the coordinates (a 1-d one is a list of points)."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        parts = [to_tensor(p) for p in xi]
        d = to_inexact(promote_types(*(p.dtype for p in parts)))
        return tnp.stack([p.astype(d) for p in tnp.broadcast_arrays(*parts)], axis=-1)
    t = to_tensor(xi)
    if t.ndim <= 1:
        t = t.reshape(-1, ndim)
    return t


class RegularGridInterpolator:
    """A function interpolating `values` given on the grid `points` (scipy.interpolate.RegularGridInterpolator, as
    JAX has it).

    `points` is a sequence of N strictly increasing 1-d arrays, the grid along each of values' first N axes (values
    may have more axes: each grid point then holds an array). `method` is 'linear' (multilinear in each cell) or
    'nearest'. A query point outside the grid gets `fill_value` (NaN by default), or with fill_value=None the value
    extrapolated from the edge cell. `bounds_error=True` is not supported, as in JAX: the check would read traced
    values. As in JAX, the grid is not checked to be increasing (a decreasing axis gives wrong values silently).

    Calling it with points of shape (..., N) (or a tuple of N arrays that broadcast together) gives values of shape
    (...) + values.shape[N:].

    >>> x, y = tnp.linspace(0, 1, 5), tnp.linspace(0, 2, 9)
    >>> f = RegularGridInterpolator((x, y), x[:, None] + y[None, :])
    >>> f(tg.asarray([[0.3, 1.1], [2.0, 0.0]]))             # [1.4, nan]
    >>> f(tg.asarray([[0.3, 1.1]]), method="nearest")        # [1.25]
    """

    def __init__(self, points: Sequence[ArrayLike], values: ArrayLike, method: str = "linear",
                 bounds_error: bool = False, fill_value: ArrayLike | None = math.nan) -> None:
        _check_method(method)
        if bounds_error:
            raise NotImplementedError("RegularGridInterpolator: bounds_error=True is not supported, as in JAX: the "
                                      "check would read the query points to the host; leave it False and test the "
                                      "result for fill_value (NaN by default)")
        (vals,) = promote_args_inexact("RegularGridInterpolator", values)
        grid = tuple(to_tensor(p) for p in points)
        if len(grid) > vals.ndim:
            raise ValueError(f"RegularGridInterpolator: there are {len(grid)} point arrays, but values (shape "
                             f"{vals.shape}) has only {vals.ndim} axes")
        for i, g in enumerate(grid):
            if g.ndim != 1 or g.shape[0] != vals.shape[i]:
                raise ValueError(f"RegularGridInterpolator: points[{i}] must be 1-d with values.shape[{i}] = "
                                 f"{vals.shape[i]} entries, got shape {g.shape}")
            if g.shape[0] < 2:
                raise ValueError(f"RegularGridInterpolator: points[{i}] has {g.shape[0]} entries; every axis of the "
                                 f"grid needs at least 2")
            if g.dtype.is_complex:
                raise ValueError(f"RegularGridInterpolator: points[{i}] must be real, got dtype {g.dtype.name}")
        fill = None
        if fill_value is not None:
            kind = promotion_kind(fill_value)
            if _kind_rank(kind) > _kind_rank(vals.dtype):
                raise ValueError(f"RegularGridInterpolator: fill_value (of kind {getattr(kind, 'name', kind)}) must be "
                                 f"None or of a kind that casts to the values' dtype {vals.dtype.name} (no complex "
                                 f"fill for real values)")
            fill = to_tensor(fill_value)
        self.method = method
        self.bounds_error = bounds_error
        self.grid = grid
        self.values = vals
        self.fill_value = fill

    def __call__(self, xi: Any, method: str | None = None) -> Tensor:
        method = self.method if method is None else method
        _check_method(method)
        ndim = len(self.grid)
        pts = _points(xi, ndim)
        if pts.ndim == 0 or pts.shape[-1] != ndim:
            raise ValueError(f"RegularGridInterpolator: the query points xi (shape {pts.shape}) must have {ndim} "
                             f"coordinates along their last axis, one per axis of the grid")
        lead = pts.shape[:-1]
        flat = pts.reshape(-1, ndim)
        indices, fractions, outside = self._find_indices(flat)
        result = self._linear(indices, fractions) if method == "linear" else self._nearest(indices, fractions)
        if self.fill_value is not None:
            mask = outside.reshape(outside.shape + (1,) * (result.ndim - 1))
            result = tnp.where(mask, self.fill_value.astype(result.dtype), result)
        return result.reshape(lead + self.values.shape[ndim:])

    def _find_indices(self, xi: Tensor) -> tuple[list[Tensor], list[Tensor], Tensor]:
        """Per axis, the cell each point lies in (clamped to the edge cells) and its position in the cell in [0, 1]
        (outside it when extrapolating); and whether the point is outside the grid."""
        indices, fractions = [], []
        outside = tnp.zeros((xi.shape[0],), dtypes.bool)
        for k, g in enumerate(self.grid):
            x = xi[:, k]
            i = tnp.clip(tnp.searchsorted(g, x) - 1, 0, g.shape[0] - 2)
            lo, hi = g[i], g[i + 1]
            indices.append(i)
            fractions.append((x - lo) / (hi - lo))
            outside = outside | (x < g[0]) | (x > g[-1])
        return indices, fractions, outside

    def _linear(self, indices: list[Tensor], fractions: list[Tensor]) -> Tensor:
        trailing = (None,) * (self.values.ndim - len(indices))
        result = None
        for corner in itertools.product((0, 1), repeat=len(indices)):
            weight = None
            for upper, t in zip(corner, fractions, strict=True):
                w = t if upper else 1 - t
                weight = w if weight is None else weight * w
            assert weight is not None
            term = self.values[tuple(i + c for i, c in zip(indices, corner, strict=True))] * weight[(slice(None),) +
                                                                                                   trailing]
            result = term if result is None else result + term
        assert result is not None
        return result

    def _nearest(self, indices: list[Tensor], fractions: list[Tensor]) -> Tensor:
        return self.values[tuple(tnp.where(t <= 0.5, i, i + 1) for i, t in zip(indices, fractions, strict=True))]


def _kind_rank(kind: DType | str) -> int:
    """The place of a dtype (or a Python scalar's weak kind) in bool < int < float < complex: numpy's
    can_cast(..., 'same_kind') holds when the source's place is not above the target's."""
    if isinstance(kind, str):
        return {"bool": 0, "i*": 1, "f*": 2, "c*": 3}[kind]
    return 0 if kind.is_bool else 1 if kind.is_int else 3 if kind.is_complex else 2


def _unflatten(aux: tuple[str, bool], children: tuple[Any, ...]) -> RegularGridInterpolator:
    """Rebuilt without __init__: the leaves may be tracers, or placeholders in a tree of vmap axes."""
    f = object.__new__(RegularGridInterpolator)
    f.method, f.bounds_error = aux
    f.grid, f.values, f.fill_value = children
    return f


register_pytree_node(
    RegularGridInterpolator,
    lambda f: ((f.grid, f.values, f.fill_value), (f.method, f.bounds_error)),
    _unflatten,
)
