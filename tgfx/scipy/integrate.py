"""`tgfx.scipy.integrate`: integration of sampled functions, as `jax.scipy.integrate` has it (`trapezoid`).

>>> from tgfx.scipy import integrate
>>> integrate.trapezoid(tg.asarray([1, 2, 3, 2, 3, 2, 1]))                              # 13.0
>>> integrate.trapezoid(tg.asarray([1, 2, 3, 2, 3, 2, 1]), tg.asarray([0, 2, 5, 7, 10, 15, 20]))   # 43.0
"""
from __future__ import annotations

import tgfx.numpy as tnp
from tgfx.tensor import ArrayLike, Tensor


def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: ArrayLike = 1.0, axis: int = -1) -> Tensor:
    """The integral of the samples y along `axis` by the composite trapezoidal rule (scipy.integrate.trapezoid):
    the sum of (x[i + 1] - x[i]) * (y[i] + y[i + 1]) / 2, at the sample points `x` (1-d, or y's shape) or, without
    them, spaced `dx` apart. Types as JAX's: integers up to 32 bits become float32 (with x64 too), a Python `dx` is
    weakly typed (float16 y stays float16); differentiable in y, x and dx.

    >>> x = tnp.linspace(0, 2 * math.pi, 1000)
    >>> trapezoid(tnp.sin(x) ** 2, x)           # ~ pi
    """
    return tnp.trapezoid(y, x, dx, axis)
