"""`tg.lax.add`, `mul`, `max`, `min`: the binary operations `tg.lax.reduce_window` reduces with, as functions.

They are numpy's `add`, `multiply`, `maximum` and `minimum` (with numpy's broadcasting and JAX's type promotion,
where `jax.lax` asks for equal shapes and dtypes), so code written against `jax.lax` runs unchanged.

>>> tg.lax.max(tnp.arange(3.0), 1.0).tolist()          # [1.0, 1.0, 2.0]
"""
from __future__ import annotations

from tgfx.numpy import _elementwise as ew
from tgfx.tensor import ArrayLike, Tensor


def add(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x + y, as `jax.lax.add`."""
    return ew.add(x, y)


def mul(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x * y, as `jax.lax.mul`."""
    return ew.multiply(x, y)


def max(x: ArrayLike, y: ArrayLike) -> Tensor:  # noqa: A001 - JAX's name
    """The elementwise maximum, as `jax.lax.max` (NaN wins, as numpy's maximum)."""
    return ew.maximum(x, y)


def min(x: ArrayLike, y: ArrayLike) -> Tensor:  # noqa: A001 - JAX's name
    """The elementwise minimum, as `jax.lax.min` (NaN wins, as numpy's minimum)."""
    return ew.minimum(x, y)
