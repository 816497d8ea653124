"""Linear algebra: matmul and dot as a broadcast multiply and a sum, so they fuse with what surrounds them; the
diagonal of a matrix as a view."""
from __future__ import annotations

from typing import Any

from tgfx.dtypes import DType, to_dtype
from tgfx.function import function
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.eager import note_signature
from tgfx.numpy import _reduce
from tgfx.tensor import (
    ArrayLike,
    ShapeError,
    Tensor,
    _is_weak_tensor,
    broadcast_shapes,
    normalize_axis,
    promote,
    to_tensor,
)


def _preferred(x: Tensor, y: Tensor, preferred_element_type: DType | str | None) -> tuple[Tensor, Tensor]:
    """Both operands in `preferred_element_type` (JAX's accumulation type, e.g. int8 @ int8 summed in int32)."""
    if preferred_element_type is None:
        return x, y
    d = to_dtype(preferred_element_type)
    return x.astype(d), y.astype(d)


def matmul(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
           preferred_element_type: DType | str | None = None) -> Tensor:
    """numpy.matmul: batched, with 1-d operands promoted and their axis removed afterwards.

    `precision` is accepted and ignored, as on JAX's CPU backend (every product is computed in the operands' type);
    `preferred_element_type` computes (and returns) the product in that dtype."""
    if preferred_element_type is None and (out := _fast_matmul(a, b)) is not None:
        return out
    x, y = promote(to_tensor(a), to_tensor(b), "matmul")
    x, y = _preferred(x, y, preferred_element_type)
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
        raise ShapeError(f"matmul: contraction dimension mismatch: shapes {sa} and {sb} "
                         f"(size {x.shape[-1]} is different from {y.shape[-2]})")
    batch = broadcast_shapes(x.shape[:-2], y.shape[:-2], name="matmul")
    m, k, n = x.shape[-2], x.shape[-1], y.shape[-1]
    # half floats multiply and sum in float32, as XLA's half dots; cast before the broadcast, so that the backward's
    # sums over the broadcast axis are float32 sums too (and the cotangent is rounded to the half type once)
    d, wide = x.dtype, _reduce.half_compute(x.dtype)
    if wide is not None:
        x, y = x.widened(wide), y.widened(wide)
    xe = x.reshape(x.shape[:-2] + (m, k, 1)).expand(batch + (m, k, n))
    ye = y.reshape(y.shape[:-2] + (1, k, n)).expand(batch + (m, k, n))
    if wide is not None:
        out = _reduce.sum(xe * ye, axis=-2)
    elif x.dtype.is_bool:
        out = _reduce.any(xe * ye, axis=-2)
    else:
        out = _reduce.sum(xe * ye, axis=-2, dtype=x.dtype)
    if d != out.dtype:
        out = out.astype(d)
    if xv:
        out = out.reshape(out.shape[:-2] + (n,))
    if yv:
        out = out.reshape(out.shape[:-1])
    return out


def _fast_matmul(a: Any, b: Any) -> Tensor | None:
    """`a @ b` of two 2-d float32/float64 Tensors of one dtype and device (an eager layer's product), its nodes built
    directly: the graph `matmul` builds (tested node for node), without its promotion, broadcasting and axis logic
    (30 -> 5 us of an eager product's Python); None for anything else (half floats: matmul sums them in float32)."""
    if type(a) is not Tensor or type(b) is not Tensor:
        return None
    xu, yu = a.uop, b.uop
    d = xu.dtype
    if yu.dtype is not d or d.kind != "f" or d.itemsize < 4 or len(xu.shape) != 2 or len(yu.shape) != 2 \
            or xu.device != yu.device or xu.shape[1] != yu.shape[0] or _is_weak_tensor(a) or _is_weak_tensor(b):
        return None
    (m, k), n = xu.shape, yu.shape[1]
    xe, ye = _operand(xu, (m, k, 1), (m, k, n)), _operand(yu, (1, k, n), (m, k, n))
    red = UOp(Ops.REDUCE_AXIS, d, (UOp(Ops.MUL, d, (xe, ye)),), (Ops.ADD, (1,)))
    out = UOp(Ops.RESHAPE, d, (red,), (m, n))
    xb = xu.src[0] if xu.op is Ops.RESHAPE else xu   # (what `_operand` views: a BUFFER for a computed matrix)
    yb = yu.src[0] if yu.op is Ops.RESHAPE else yu
    if xb.op is Ops.BUFFER and yb.op is Ops.BUFFER and xb.arg[0] >= 0 and yb.arg[0] >= 0 and \
            "op_signature" not in out.__dict__:
        # the product of two computed matrices is one form per (m, k, n, dtype, device, one matrix or two): its
        # signature is found once per form, not by a walk of its nodes at each call
        note_signature(out, (m, k, n, d, xb.arg[1], xb is yb), [xb] if xb is yb else [xb, yb])
    return Tensor(out)


def _operand(u: UOp, shape: tuple[int, ...], full: tuple[int, ...]) -> UOp:
    """`_expand_uop(_reshape_uop(u, shape), full)` for a matrix `u` and 3-d shapes, without asking the new reshape
    its shape (a call per step of two generators, for each operand of each eager product)."""
    src = u.src[0] if u.op is Ops.RESHAPE else u
    r = src if src.shape == shape else UOp(Ops.RESHAPE, u.dtype, (src,), shape)
    return r if shape == full else UOp(Ops.EXPAND, u.dtype, (r,), full)


def dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
        preferred_element_type: DType | str | None = None) -> Tensor:
    """numpy.dot: scalars multiply, 1-d/2-d is matmul, N-d contracts the last axis of a with the second-to-last of b.

    `precision` and `preferred_element_type` as in `matmul`."""
    x, y = _preferred(to_tensor(a), to_tensor(b), preferred_element_type)
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
    """numpy.vdot: the dot product of the flattened arrays, the first conjugated (sum(conj(a) * b)).

    >>> tnp.vdot(tnp.asarray([1 + 2j, 3j]), tnp.asarray([1.0, 1.0])).item()     # (1-5j)
    """
    from tgfx.numpy._complex import conj
    return dot(conj(to_tensor(a)).reshape(-1), to_tensor(b).reshape(-1))


def inner(a: ArrayLike, b: ArrayLike) -> Tensor:
    x, y = to_tensor(a), to_tensor(b)
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    from tgfx.numpy._movement import moveaxis
    return dot(x, moveaxis(y, -1, -2) if y.ndim >= 2 else y)


def outer(a: ArrayLike, b: ArrayLike) -> Tensor:
    x, y = to_tensor(a).reshape(-1), to_tensor(b).reshape(-1)
    return x.reshape(-1, 1) * y.reshape(1, -1)


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """numpy.diagonal: the diagonal `offset` above the main one (below, if negative) of the matrices spanned by
    axis1 and axis2, as a new last axis. A view, no arithmetic: the (n, n) block flattened, padded by n and read with
    stride n + 1.

    >>> tnp.diagonal(tnp.arange(6).reshape(2, 3), offset=1)     # [1, 5]
    """
    x = to_tensor(a)
    if x.ndim < 2:
        raise ValueError(f"diagonal: a must be at least 2-d, got shape {x.shape}")
    ax1, ax2 = normalize_axis(axis1, x.ndim, "diagonal"), normalize_axis(axis2, x.ndim, "diagonal")
    if ax1 == ax2:
        raise ValueError(f"diagonal: axis1 and axis2 must be different axes, got {axis1} and {axis2}")
    offset = int(offset)
    rest = [i for i in range(x.ndim) if i not in (ax1, ax2)]
    x = x.permute(*rest, ax1, ax2)
    batch, (rows, cols) = x.shape[:-2], x.shape[-2:]
    r0, c0 = max(-offset, 0), max(offset, 0)
    n = max(0, min(rows - r0, cols - c0))
    x = x.shrink([(0, s) for s in batch] + [(min(r0, rows), min(r0, rows) + n), (min(c0, cols), min(c0, cols) + n)])
    if n <= 1:
        return x.reshape(batch + (n,))
    return _square_diagonal(x)


def _strided_diagonal(x: Tensor) -> Tensor:
    """The diagonal of the (..., n, n) block x as a view: flattened, padded by n and read with stride n + 1."""
    batch, n = x.shape[:-2], x.shape[-1]
    flat = x.reshape(batch + (n * n,)).pad_zeros([(0, 0)] * len(batch) + [(0, n)])
    return flat.reshape(batch + (n, n + 1)).shrink([(0, s) for s in batch] + [(0, n), (0, 1)]).reshape(batch + (n,))


def _diagonal_backward(g: Tensor, call: Any) -> tuple[Tensor]:
    """g on the diagonal of zeros, by comparing row and column: the view's own gradient read g back at flat
    positions i n + j through (i n + j) % (n + 1), a 64-bit remainder an element that no vector takes (the gradient of
    a contrastive loss's diagonal over 512 x 512 logits: 0.7 ms, a quarter of the step)."""
    from tgfx.dtypes import dtypes
    from tgfx.numpy._creation import eye
    from tgfx.numpy._elementwise import where
    n = g.shape[-1]
    return (where(eye(n, dtype=dtypes.bool), g.reshape(g.shape[:-1] + (1, n)), Tensor.full((), 0, g.dtype)),)


_square_diagonal = function(_strided_diagonal, grad_fxn=_diagonal_backward)


def diag(v: ArrayLike, k: int = 0) -> Tensor:
    """numpy.diag: a 1-d `v` laid on the k-th diagonal of a square matrix of zeros (side len(v) + |k|), or the k-th
    diagonal of a 2-d `v`.

    >>> tnp.diag(tnp.asarray([1, 2]), k=1)      # [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    """
    x = to_tensor(v)
    k = int(k)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ValueError(f"diag: v must be 1-d or 2-d, got shape {x.shape}")
    from tgfx.numpy._creation import eye
    from tgfx.numpy._elementwise import where
    n = x.shape[0]
    m = n + abs(k)
    padded = x.pad_zeros([(0, abs(k))])   # entry i sits in row i (k >= 0) or in column i (k < 0)
    return where(eye(m, m, k, dtype="bool"), padded.reshape(m, 1) if k >= 0 else padded.reshape(1, m),
                 Tensor.full((), 0, x.dtype))


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: DType | str | None = None) -> Tensor:
    """numpy.trace: the sum of `diagonal(a, offset, axis1, axis2)`, summed as `sum` would (small integers in int32).

    >>> tnp.trace(tnp.eye(3))                   # 3.0
    """
    return _reduce.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
