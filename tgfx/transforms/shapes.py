"""`tg.eval_shape` and `tg.ShapeDtypeStruct`: what a function returns, its shapes and dtypes, without computing it.

As `jax.eval_shape`: the function is traced as `tg.jit` traces it (its array arguments become inputs), and only the
types of the results are read, so no kernel is compiled or run. Arguments may be arrays or `ShapeDtypeStruct`s
(which stand for an array of that shape and dtype: a model's parameters can be sized before any memory exists).

>>> tg.eval_shape(lambda x, w: tnp.tanh(x @ w), tg.ShapeDtypeStruct((128, 784), tnp.float32), w)
ShapeDtypeStruct(shape=(128, 256), dtype=float32)
>>> tg.eval_shape(init, tg.random.key(0))       # a params tree of ShapeDtypeStructs, nothing allocated
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tgfx.dtypes import DType, of_numpy, to_dtype
from tgfx.function import Function
from tgfx.numpy import zeros
from tgfx.tensor import Tensor
from tgfx.tree import tree_map


class ShapeDtypeStruct:
    """A shape and a dtype: an array's type without its values (`jax.ShapeDtypeStruct`). `sharding` is accepted
    and kept, for code that passes one."""

    __slots__ = ("shape", "dtype", "sharding")

    def __init__(self, shape: Any, dtype: DType | str | type | np.dtype, sharding: Any = None) -> None:
        try:
            self.shape = tuple(int(d) for d in shape)
        except TypeError:
            raise TypeError(f"ShapeDtypeStruct: shape must be a sequence of ints, got {shape!r}") from None
        if any(d < 0 for d in self.shape):
            raise ValueError(f"ShapeDtypeStruct: shape {self.shape} has a negative dimension")
        self.dtype = to_dtype(dtype)
        self.sharding = sharding

    @classmethod
    def like(cls, x: Any) -> ShapeDtypeStruct:
        """The type of `x`, as `jax.ShapeDtypeStruct.like`: a Tensor's or ShapeDtypeStruct's shape, dtype and
        sharding, or the shape and dtype `tg.asarray(x)` would have (a numpy float64 array is float32 without x64).
        JAX's callback tutorials give a callback its result type as `ShapeDtypeStruct.like(x)`."""
        if isinstance(x, (Tensor, ShapeDtypeStruct)):
            return cls(x.shape, x.dtype, getattr(x, "sharding", None))
        if isinstance(x, (bool, int, float, complex)):
            return cls((), Tensor(x).dtype)
        a = np.asarray(x)
        return cls(a.shape, of_numpy(a.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))


def _stand_in(x: Any) -> Any:
    """An argument leaf as something the trace takes: a ShapeDtypeStruct is a lazy zeros of its type (a constant:
    nothing is allocated), a numpy array a Tensor; the rest as it is."""
    if isinstance(x, ShapeDtypeStruct):
        return zeros(x.shape, x.dtype)
    return Tensor(x) if isinstance(x, np.ndarray) else x


def _type_of(x: Any) -> Any:
    if isinstance(x, Tensor):
        return ShapeDtypeStruct(x.shape, x.dtype)
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapeDtypeStruct(np.shape(x), x.dtype)
    return x


def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of `fun(*args, **kwargs)` as a pytree of `ShapeDtypeStruct`s (`jax.eval_shape`),
    traced, not computed: no kernel is compiled or run. Arguments (any pytrees) may hold arrays, Tensors or
    `ShapeDtypeStruct`s; Python scalars are passed as they are.

    Raises:
        TypeError: `fun` is not callable.
    """
    if not callable(fun):
        raise TypeError(f"eval_shape: expected a function, got {type(fun).__name__}")
    is_struct = lambda x: isinstance(x, ShapeDtypeStruct)  # noqa: E731
    args, kwargs = tree_map(_stand_in, (args, kwargs), is_leaf=is_struct)

    def typed(*a: Any, **k: Any) -> Any:   # Python and numpy scalars among the results are arrays too, as in JAX
        return tree_map(lambda x: Tensor(x) if isinstance(x, (bool, int, float, complex, np.generic, np.ndarray))
                        else x, fun(*a, **k))
    typed.__name__ = getattr(fun, "__name__", "eval_shape")
    return tree_map(_type_of, Function(typed, allow_implicit=True, name=typed.__name__)(*args, **kwargs))


__all__ = ["ShapeDtypeStruct", "eval_shape"]
