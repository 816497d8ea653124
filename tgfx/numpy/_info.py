"""Array facts as functions (`ndim`, `shape`, `size`, for Tensors and anything numpy takes) and numpy's print
options, which Tensor's repr honours: it prints its value through numpy (JAX re-exports the same functions)."""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy import get_printoptions as get_printoptions
from numpy import printoptions as printoptions
from numpy import set_printoptions as set_printoptions

from tgfx.tensor import Tensor, normalize_axis


def ndim(a: Any) -> int:
    """The number of axes of a Tensor, array, nested list or scalar (`numpy.ndim`); reads no values."""
    return a.ndim if isinstance(a, Tensor) else int(np.ndim(a))


def shape(a: Any) -> tuple[int, ...]:
    """The shape of a Tensor, array, nested list or scalar (`numpy.shape`); reads no values."""
    return a.shape if isinstance(a, Tensor) else tuple(np.shape(a))


def size(a: Any, axis: int | None = None) -> int:
    """The number of elements, or the length of `axis` (`numpy.size`); reads no values."""
    if not isinstance(a, Tensor):
        return int(np.size(a, axis))
    return a.size if axis is None else a.shape[normalize_axis(axis, a.ndim, "size")]


__all__ = ["ndim", "shape", "size", "get_printoptions", "printoptions", "set_printoptions"]
