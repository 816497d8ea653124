"""Creation: constants, ranges and masks. Constant Tensors are views of a scalar: they cost no memory."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tgfx.dtypes import DType, dtypes, promote_types, to_dtype, weak_kind
from tgfx.numpy import _elementwise as ew
from tgfx.tensor import ArrayLike, Tensor, to_tensor

Shape = int | Sequence[int]


def asarray(x: ArrayLike, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """A Tensor from a Tensor (no copy unless the dtype or device changes), numpy array, list or scalar."""
    return Tensor(x, dtype=dtype, device=device)


def array(x: ArrayLike, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return Tensor(x, dtype=dtype, device=device)


def full(shape: Shape, fill_value: ArrayLike, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    if isinstance(fill_value, Tensor):
        t = fill_value.astype(dtype) if dtype is not None else fill_value
        return t.expand(tuple(shape) if not isinstance(shape, int) else (shape,))
    return Tensor.full(shape, fill_value, dtype=dtype, device=device)


def zeros(shape: Shape, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return Tensor.full(shape, 0, dtype=dtype or dtypes.default_float, device=device)


def ones(shape: Shape, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return Tensor.full(shape, 1, dtype=dtype or dtypes.default_float, device=device)


def empty(shape: Shape, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return zeros(shape, dtype=dtype, device=device)


def full_like(x: ArrayLike, fill_value: ArrayLike, dtype: DType | str | None = None) -> Tensor:
    x = to_tensor(x)
    return full(x.shape, fill_value, dtype=dtype or x.dtype)


def zeros_like(x: ArrayLike, dtype: DType | str | None = None) -> Tensor:
    return full_like(x, 0, dtype)


def ones_like(x: ArrayLike, dtype: DType | str | None = None) -> Tensor:
    return full_like(x, 1, dtype)


def arange(start: float, stop: float | None = None, step: float = 1, dtype: DType | str | None = None) -> Tensor:
    if step == 0:
        raise ValueError("arange: step must not be zero")
    return Tensor.arange(start, stop, step, dtype=dtype)


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: DType | str | None = None,
             axis: int = 0) -> Tensor:
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    d = to_dtype(dtype) if dtype is not None else promote_types(weak_kind(start), weak_kind(stop), "f*")
    div = (num - 1) if endpoint else num
    if num == 0:
        return Tensor(np.zeros(0, dtype=d.np), dtype=d)
    step = (stop - start) / div if div > 0 else 0.0
    i = Tensor.arange(num, dtype=dtypes.float64 if d == dtypes.float64 else dtypes.float32)
    out = i * step + start
    if endpoint and num > 1:  # the last sample is exactly `stop`, as numpy guarantees
        out = ew.where(Tensor.arange(num, dtype=dtypes.int32) == num - 1, stop, out)
    if not d.is_float:  # numpy and JAX round integer samples toward -inf, not toward zero as a cast would
        out = ew.floor(out)
    return out.astype(d)


def eye(n: int, m: int | None = None, k: int = 0, dtype: DType | str | None = None) -> Tensor:
    m = n if m is None else m
    i = Tensor.arange(n, dtype=dtypes.int32).reshape(n, 1)
    j = Tensor.arange(m, dtype=dtypes.int32).reshape(1, m)
    return ew.equal(j - i, k).astype(dtype or dtypes.default_float)


def identity(n: int, dtype: DType | str | None = None) -> Tensor:
    return eye(n, dtype=dtype)


def tri(n: int, m: int | None = None, k: int = 0, dtype: DType | str | None = None) -> Tensor:
    m = n if m is None else m
    i = Tensor.arange(n, dtype=dtypes.int32).reshape(n, 1)
    j = Tensor.arange(m, dtype=dtypes.int32).reshape(1, m)
    return ew.less_equal(j - i, k).astype(dtype or dtypes.default_float)


def tril(x: ArrayLike, k: int = 0) -> Tensor:
    x = to_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"tril: input must be at least 2-d, got shape {x.shape}")
    mask = tri(x.shape[-2], x.shape[-1], k, dtype=dtypes.bool)
    return ew.where(mask, x, 0).astype(x.dtype)


def triu(x: ArrayLike, k: int = 0) -> Tensor:
    x = to_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"triu: input must be at least 2-d, got shape {x.shape}")
    mask = tri(x.shape[-2], x.shape[-1], k - 1, dtype=dtypes.bool)
    return ew.where(mask, 0, x).astype(x.dtype)
