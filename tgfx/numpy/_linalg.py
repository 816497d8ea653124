"""Linear algebra: matmul and dot as a broadcast multiply and a sum, so they fuse with what surrounds them."""
from __future__ import annotations

from tgfx.numpy import _reduce
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, promote, to_tensor


def matmul(a: ArrayLike, b: ArrayLike) -> Tensor:
    """numpy.matmul: batched, with 1-d operands promoted and their axis removed afterwards."""
    x, y = promote(to_tensor(a), to_tensor(b), "matmul")
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"matmul: operands must be at least 1-d, got shapes {x.shape} and {y.shape}; use multiply")
    xv, yv = x.ndim == 1, y.ndim == 1
    if xv:
        x = x.reshape(1, x.shape[0])
    if yv:
        y = y.reshape(y.shape[0], 1)
    if x.shape[-1] != y.shape[-2]:
        sa = tuple(a.shape) if hasattr(a, "shape") else x.shape
        sb = tuple(b.shape) if hasattr(b, "shape") else y.shape
        raise ValueError(f"matmul: contraction dimension mismatch: shapes {sa} and {sb} "
                         f"(size {x.shape[-1]} is different from {y.shape[-2]})")
    batch = broadcast_shapes(x.shape[:-2], y.shape[:-2], name="matmul")
    m, k, n = x.shape[-2], x.shape[-1], y.shape[-1]
    xe = x.reshape(x.shape[:-2] + (m, k, 1)).expand(batch + (m, k, n))
    ye = y.reshape(y.shape[:-2] + (1, k, n)).expand(batch + (m, k, n))
    out = _reduce.sum(xe * ye, axis=-2) if not x.dtype.is_bool else _reduce.any(xe * ye, axis=-2)
    if x.dtype != out.dtype:
        out = out.astype(x.dtype)
    if xv:
        out = out.reshape(out.shape[:-2] + (n,))
    if yv:
        out = out.reshape(out.shape[:-1])
    return out


def dot(a: ArrayLike, b: ArrayLike) -> Tensor:
    """numpy.dot: scalars multiply, 1-d/2-d is matmul, N-d contracts the last axis of a with the second-to-last of b."""
    x, y = to_tensor(a), to_tensor(b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    if y.ndim <= 2:
        return matmul(x, y)
    # a[..., k] with b[..., k, n]: b's contraction axis first, the rest flattened
    from tgfx.numpy._movement import moveaxis
    yk = moveaxis(y, -2, 0)  # (k, *rest)
    flat = yk.reshape(yk.shape[0], -1)
    res = matmul(x, flat)
    return res.reshape(x.shape[:-1] + yk.shape[1:])


def vdot(a: ArrayLike, b: ArrayLike) -> Tensor:
    return dot(to_tensor(a).reshape(-1), to_tensor(b).reshape(-1))


def inner(a: ArrayLike, b: ArrayLike) -> Tensor:
    x, y = to_tensor(a), to_tensor(b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    from tgfx.numpy._movement import moveaxis
    return dot(x, moveaxis(y, -1, -2) if y.ndim >= 2 else y)


def outer(a: ArrayLike, b: ArrayLike) -> Tensor:
    x, y = to_tensor(a).reshape(-1), to_tensor(b).reshape(-1)
    return x.reshape(-1, 1) * y.reshape(1, -1)
