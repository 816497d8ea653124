"""`jax.flatten_util`: a pytree of arrays as one flat vector, and the function that turns such a vector back into
the pytree: what an optimiser written for vectors (`tgfx.scipy.optimize.minimize`, a hand-written L-BFGS, a
Hessian-vector product over all parameters) needs from a model's parameters.

>>> flat, unravel = ravel_pytree({"w": tnp.ones((2, 3)), "b": tnp.zeros(3)})
>>> flat.shape                                        # the leaves in tree order ('b' before 'w'), raveled
(9,)
>>> unravel(flat)["w"].shape
(2, 3)
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import DType, dtypes
from tgfx.tensor import Tensor
from tgfx.tree import PyTreeDef, tree_flatten, tree_unflatten


@dataclass(frozen=True)
class _Unravel:
    """`ravel_pytree`'s inverse: hashable (its structure, shapes and dtypes), so it can be a static argument of jit.
    With leaves of one dtype it takes a vector of any dtype (as JAX's); with several, the promoted one, and casts
    each piece back to its leaf's."""
    treedef: PyTreeDef
    shapes: tuple[tuple[int, ...], ...]
    from_dtypes: tuple[DType, ...] | None   # None: one dtype, no casts
    to_dtype: DType | None

    def __call__(self, flat: Any) -> Any:
        flat = tnp.asarray(flat)
        size = sum(int(np.prod(s)) for s in self.shapes)
        if flat.shape != (size,):
            raise ValueError(f"unravel: expected a 1-d array of shape ({size},), the size of the pytree it was made "
                             f"from, got shape {flat.shape}")
        if self.from_dtypes is not None and flat.dtype != self.to_dtype:
            raise TypeError(f"unravel: given an array of dtype {flat.dtype.name}, but expected dtype "
                            f"{self.to_dtype.name} (the leaves' promoted dtype); cast it with .astype first")
        pieces, start = [], 0
        for i, shape in enumerate(self.shapes):
            n = int(np.prod(shape))
            piece = flat[start:start + n].reshape(shape)
            pieces.append(piece if self.from_dtypes is None else piece.astype(self.from_dtypes[i]))
            start += n
        return tree_unflatten(self.treedef, pieces)


def ravel_pytree(pytree: Any) -> tuple[Tensor, Callable[[Tensor], Any]]:
    """Ravel a pytree of arrays and scalars into one 1-d array, and return it with the function that unravels such
    an array back into the pytree (`jax.flatten_util.ravel_pytree`). The leaves are raveled in tree order and
    concatenated in their promoted dtype; unravel casts each piece back to its leaf's dtype. A pytree without leaves
    ravels to an empty float32 array.

    >>> params = {"w": tnp.ones((3, 2)), "b": tnp.zeros(2)}
    >>> flat, unravel = ravel_pytree(params)
    >>> res = tg.scipy.optimize.minimize(lambda v: loss(unravel(v)), flat, method="BFGS")
    >>> fitted = unravel(res.x)
    """
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return tnp.zeros((0,), dtypes.float32), _Unravel(treedef, (), None, None)
    arrays = [tnp.asarray(x) for x in leaves]
    from_dtypes = tuple(a.dtype for a in arrays)
    to_dtype = tnp.result_type(*from_dtypes)
    shapes = tuple(tuple(a.shape) for a in arrays)
    flat = tnp.concatenate([a.astype(to_dtype).reshape(-1) for a in arrays])
    if all(d == to_dtype for d in from_dtypes):
        return flat, _Unravel(treedef, shapes, None, None)
    return flat, _Unravel(treedef, shapes, from_dtypes, to_dtype)


__all__ = ["ravel_pytree"]
