"""Tensor operators and numpy-style methods, attached to `Tensor` from the numpy functions (one implementation)."""
from __future__ import annotations

from typing import Any

from tgfx.dtypes import DType
from tgfx.numpy import _creation, _indexing, _interop, _linalg, _math, _misc, _scatter, _sort, _standard
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _movement as mv
from tgfx.numpy import _reduce as rd
from tgfx.tensor import Tensor


def _binop(fn: Any) -> tuple[Any, Any]:
    # (the function itself as the operator, not a lambda calling it: a call less for every eager `x + 1`)
    return fn, (lambda self, other: fn(other, self))


_OPERATORS = {
    "add": ew.add, "sub": ew.subtract, "mul": ew.multiply, "truediv": ew.true_divide, "floordiv": ew.floor_divide,
    "mod": ew.remainder, "pow": ew.power, "matmul": _linalg.matmul, "and": ew.bitwise_and, "or": ew.bitwise_or,
    "xor": ew.bitwise_xor, "lshift": ew.left_shift, "rshift": ew.right_shift,
    "divmod": _math.divmod,   # (`divmod(x, 2)`, as numpy's and jax's arrays: not the standard's, which has none)
}


def _logical_or_bitwise(bitwise: Any, logical: Any) -> Any:
    def fn(a: Any, b: Any) -> Tensor:
        ta = a if isinstance(a, Tensor) else None
        tb = b if isinstance(b, Tensor) else None
        if all(t is None or t.dtype.is_bool for t in (ta, tb)) and all(isinstance(v, (Tensor, bool)) for v in (a, b)):
            return logical(a, b)
        return bitwise(a, b)
    return fn


_OPERATORS["and"] = _logical_or_bitwise(ew.bitwise_and, ew.logical_and)
_OPERATORS["or"] = _logical_or_bitwise(ew.bitwise_or, ew.logical_or)
_OPERATORS["xor"] = _logical_or_bitwise(ew.bitwise_xor, ew.logical_xor)

for _name, _fn in _OPERATORS.items():
    _fwd, _rev = _binop(_fn)
    setattr(Tensor, f"__{_name}__", _fwd)
    setattr(Tensor, f"__r{_name}__", _rev)

def _dtype_call(self: DType, x: Any) -> Tensor:
    """`x` as an array of this type, as JAX's scalar types are called (`asarray(x, dtype=...)`): a scalar gives a 0-d
    Tensor, not a numpy scalar. (Set here, by the numpy layer, on the base layer's DType.)

    >>> tnp.float32(2.0)           # a 0-d float32 Tensor
    >>> tnp.int32([1.7, 2.0])      # int32 [1, 2]
    """
    if self.count != 1:
        raise TypeError(f"{self!r} is a vector type of kernels, not a type of arrays; call {self.scalar!r}")
    return _creation.asarray(x, dtype=self)


DType.__call__ = _dtype_call
Tensor.__neg__ = lambda self: ew.negative(self)
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = lambda self: ew.absolute(self)
Tensor.__invert__ = lambda self: ew.invert(self)
Tensor.__lt__, Tensor.__le__, Tensor.__gt__, Tensor.__ge__ = ew.less, ew.less_equal, ew.greater, ew.greater_equal
Tensor.__eq__, Tensor.__ne__ = ew.equal, ew.not_equal
Tensor.__getitem__ = _indexing.getitem

# methods with numpy's names
for _name, _fn in {
    "sum": rd.sum, "mean": rd.mean, "max": rd.max, "min": rd.min, "prod": rd.prod, "argmax": rd.argmax,
    "argmin": rd.argmin, "var": rd.var, "std": rd.std, "any": rd.any, "all": rd.all, "cumsum": rd.cumsum,
    "cumprod": rd.cumprod, "transpose_axes": mv.transpose, "swapaxes": mv.swapaxes, "squeeze": mv.squeeze,
    "ravel": mv.ravel, "repeat": mv.repeat, "clip": ew.clip, "round": ew.round, "dot": _linalg.dot,
    "diagonal": _linalg.diagonal, "trace": _linalg.trace,
}.items():
    setattr(Tensor, _name, _fn)

Tensor.transpose = lambda self, *axes: mv.transpose(self, axes[0] if len(axes) == 1 and not isinstance(
    axes[0], int) else (axes or None))
Tensor.T = property(lambda self: mv.transpose(self))
Tensor.mT = property(lambda self: mv.swapaxes(self, -1, -2))
Tensor.flatten = lambda self: self.reshape(-1)
Tensor.zeros_like = lambda self: _creation.zeros_like(self)

# indexing updates, gathers and sorting (JAX's Array methods: they return new Tensors)
Tensor.at = property(lambda self: _scatter.IndexUpdateHelper(self))
Tensor.take = lambda self, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False, \
    fill_value=None: _indexing.take(self, indices, axis, out, mode, fill_value=fill_value)
Tensor.sort = lambda self, axis=-1, *, stable=True, descending=False: _sort.sort(self, axis, stable=stable,
                                                                                  descending=descending)
Tensor.argsort = lambda self, axis=-1, *, stable=True, descending=False: _sort.argsort(self, axis, stable=stable,
                                                                                        descending=descending)

# the array API standard's array methods
Tensor.__array_namespace__ = _interop.array_namespace
Tensor.to_device = _interop.to_device
Tensor.__dlpack__ = _interop.dlpack
Tensor.__dlpack_device__ = _interop.dlpack_device
Tensor.__complex__ = lambda self: complex(self.item())
# complex parts (JAX's Array has them as properties and a method)
Tensor.real = property(lambda self: _standard.real(self))
Tensor.imag = property(lambda self: _standard.imag(self))
Tensor.conj = Tensor.conjugate = lambda self: _standard.conj(self)


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    raise TypeError(f"Tensors are immutable: x[{index!r}] = v cannot update one in place; use x = x.at[{index!r}]"
                    f".set(v), which returns the updated Tensor (as JAX's arrays)")


Tensor.__setitem__ = _setitem


# more of JAX's Array methods, from the functions of the same names
def _view(self: Tensor, dtype: Any = None) -> Tensor:
    """The bits of this Tensor read as `dtype` (numpy's and JAX's `view`): the last axis scales by the ratio of the
    item sizes."""
    from tgfx._lax_shape import bitcast_convert_type
    from tgfx.dtypes import to_dtype
    if dtype is None:
        return self
    d = to_dtype(dtype)
    old, new = self.dtype.itemsize, d.itemsize
    if old == new:
        return bitcast_convert_type(self, d)
    if self.ndim == 0 or (new > old and self.shape[-1] * old % new):
        raise ValueError(f"view: a Tensor of shape {self.shape} and dtype {self.dtype.name} cannot be viewed as "
                         f"{d.name}: its last axis of {self.shape[-1] if self.ndim else 0} x {old} bytes must be a "
                         f"whole number of {new}-byte items")
    if new < old:
        out = bitcast_convert_type(self, d)
        return out.reshape(*self.shape[:-1], self.shape[-1] * (old // new))
    return bitcast_convert_type(self.reshape(*self.shape[:-1], self.shape[-1] * old // new, new // old), d)


def _nonzero(self: Tensor, *, size: int | None = None, fill_value: Any = None) -> tuple[Tensor, ...]:
    from tgfx.numpy._data_dependent import nonzero
    return nonzero(self, size=size, fill_value=fill_value)


def _searchsorted(self: Tensor, v: Any, side: str = "left", sorter: Any = None, *, method: str = "scan") -> Tensor:
    from tgfx.numpy._data_dependent import searchsorted
    return searchsorted(self, v, side, sorter, method=method)


def _ptp(self: Tensor, axis: Any = None, out: None = None, keepdims: bool = False) -> Tensor:
    from tgfx.numpy._stats import ptp
    return ptp(self, axis=axis, out=out, keepdims=keepdims)


def _argpartition(self: Tensor, kth: int, axis: int = -1) -> Tensor:
    from tgfx.numpy._sets import argpartition
    return argpartition(self, kth, axis=axis)


Tensor.view = _view
Tensor.nonzero = _nonzero
Tensor.searchsorted = _searchsorted
Tensor.ptp = _ptp
Tensor.argpartition = _argpartition
Tensor.copy = lambda self, order=None: _misc.copy(self, order)
Tensor.itemsize = property(lambda self: self.dtype.itemsize)
Tensor.tobytes = lambda self, order="C": self.numpy().tobytes(order)
Tensor.devices = lambda self: set(self.device) if isinstance(self.device, tuple) else {self.device}
