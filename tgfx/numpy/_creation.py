"""Creation: constants, ranges and masks. Constant Tensors are views of a scalar: they cost no memory."""
from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx.devices import DEFAULT_DEVICE
from tgfx.dtypes import DType, dtypes, promote_types, scalar_kind, to_dtype
from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.placement import is_committed, mark
from tgfx.tensor import (
    ArrayLike,
    Tensor,
    broadcast,
    canonical_device,
    check_python_ints,
    is_weak,
    promotion_kind,
    static_int,
    to_tensor,
    weak,
    weak_input,
)

Shape = int | Sequence[int]


def _holds_tensor(x: Any) -> bool:
    return isinstance(x, Tensor) or (isinstance(x, (list, tuple)) and builtins.any(_holds_tensor(v) for v in x))


def _stack_nested(x: list | tuple, dtype: DType | None) -> Tensor:
    """A (nested) list of Tensors, arrays and scalars as one Tensor: the leaves stacked level by level, lazily, so
    traced Tensors (inside `jit`, `grad`) stack like concrete ones and nothing is read back to the host. The dtype is
    the JAX promotion of the leaves' (Python scalars weakly typed), unless `dtype` is given."""
    leaves: list[Tensor | bool | int | float] = []

    def convert(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [convert(e) for e in v]
        leaves.append(v if isinstance(v, (Tensor, bool, int, float, complex)) else Tensor(np.asarray(v)))
        return leaves[-1]

    tree = convert(x)
    d = dtype if dtype is not None else promote_types(*(promotion_kind(v) for v in leaves))

    def build(v: Any, where: str) -> Tensor:
        if not isinstance(v, list):
            return (v if isinstance(v, Tensor) else Tensor.full((), v, d)).astype(d)
        if not v:
            raise ValueError(f"array: {where} is an empty list beside lists that hold Tensors; it has no shape to "
                             f"stack")
        parts = [build(e, f"{where}[{i}]") for i, e in enumerate(v)]
        if len({p.shape for p in parts}) > 1:
            listed = ", ".join(f"{where}[{i}] {p.shape}" for i, p in enumerate(parts))
            raise ValueError(f"array: the elements of {where} have different shapes ({listed}); the elements of a "
                             f"list must all have one shape")
        from tgfx.numpy._movement import stack
        return stack(parts)

    return build(tree, "x")


def _place(t: Tensor, device: str | None) -> Tensor:
    """t on `device` when one is asked for (a constant is placed there, as the standard's `device=` says), committed
    there (`tgfx/placement.py`: a user's `device=` is a placement, as JAX's)."""
    if device is None:
        return t
    device = canonical_device(device)
    return t._on(device) if device != DEFAULT_DEVICE else t.to(device)


def _like(out: Tensor, x: Tensor) -> Tensor:
    """`out` (a `*_like` result made without a device) where x is, as JAX's: on x's device, laid out over x's device
    tuple as x is, committed to the default device when x is (uncommitted otherwise)."""
    d = x.uop.device
    if type(d) is tuple:
        from tgfx.transforms.shard import place
        return place(out, d, x.uop.arg if x.uop.op is Ops.MULTI else None)
    if d is None or d == DEFAULT_DEVICE:
        return out.to(d) if d is not None and is_committed(x) else out
    return out._on(d)


def asarray(x: ArrayLike, dtype: DType | str | None = None, device: str | None = None, copy: bool | None = None,
            ) -> Tensor:
    """A Tensor from a Tensor (no copy unless the dtype or device changes), numpy array, list or scalar.

    A (nested) list holding Tensors stacks them, traced ones too (`tnp.asarray([loss, acc])` inside `jit`).
    `copy=True` always gives a new buffer; `copy=False` returns a Tensor itself and is a ValueError where that is
    not possible (host data, a dtype or device change), as the standard says. A Python int that does not fit the
    integer type is an OverflowError, as in JAX.
    """
    if copy is False:
        if not isinstance(x, Tensor):
            raise ValueError(f"asarray(copy=False): a {type(x).__name__} must be copied into a Tensor; pass "
                             f"copy=None to copy only when needed")
        if dtype is not None and to_dtype(dtype) != x.dtype or device is not None and \
                canonical_device(device) != x.device:
            raise ValueError(f"asarray(copy=False): a {x.dtype.name} Tensor on {x.device} cannot become "
                             f"{dtype or x.dtype} on {device or x.device} without a copy; pass copy=None")
    out = array(x, dtype=dtype, device=device)
    if isinstance(x, Tensor) and out.uop is x.uop:
        return out.contiguous() if copy else x
    return out


def array(x: ArrayLike, dtype: DType | str | None = None, device: str | None = None, copy: bool = True) -> Tensor:
    """As `asarray` (tgfx Tensors are immutable, so there is nothing to copy)."""
    if isinstance(x, (list, tuple)) and _holds_tensor(x):
        return Tensor(_stack_nested(x, None if dtype is None else to_dtype(dtype)), device=device)
    out = Tensor(x, dtype=dtype, device=device)
    out = weak(out) if dtype is None and weak_input(x) else out   # `asarray(2.0)` is weakly typed, as in JAX
    if device is None or isinstance(device, (tuple, list)) or canonical_device(device) != DEFAULT_DEVICE:
        return out   # (on another device, or sharded: committed by construction)
    # a user's device= commits (`tgfx/placement.py`): a Tensor is copied, host data's fresh buffer marked
    if isinstance(x, Tensor):
        return out.to(DEFAULT_DEVICE)
    placed = Tensor(mark(out.uop))
    return weak(placed) if is_weak(out) else placed


def full(shape: Shape, fill_value: ArrayLike, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """`fill_value` in every element; weakly typed without a dtype when the fill is (a Python number), as JAX's."""
    if isinstance(fill_value, Tensor):
        t = fill_value.astype(dtype) if dtype is not None else fill_value
        return _place(t.expand((s,) if (s := static_int(shape)) is not None else tuple(shape)), device)
    if type(fill_value) is int and dtype is None:
        # the dtype comes from the int, as asarray's does: one that does not fit it is an OverflowError, not a
        # wrapped value (`full((2,), 2**40)` was [0, 0]). A given dtype converts the fill as numpy and JAX do (-1 is
        # 255 as uint8).
        check_python_ints(np.asarray(fill_value, dtype=object), dtypes.default_int)
    out = Tensor.full(shape, fill_value, dtype=dtype)
    return _place(weak(out) if dtype is None and weak_input(fill_value) else out, device)


def zeros(shape: Shape, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return _place(Tensor.full(shape, 0, dtype=dtype or dtypes.default_float), device)


def ones(shape: Shape, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return _place(Tensor.full(shape, 1, dtype=dtype or dtypes.default_float), device)


def empty(shape: Shape, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return zeros(shape, dtype=dtype, device=device)


def full_like(x: ArrayLike, fill_value: ArrayLike, dtype: DType | str | None = None, device: str | None = None,
              ) -> Tensor:
    """`full` of x's shape, dtype (weakly typed when x is, as JAX's) and device, unless others are given."""
    x = to_tensor(x)
    out = full(x.shape, fill_value, dtype=dtype or x.dtype, device=device)
    out = out if device is not None else _like(out, x)
    return weak(Tensor(out.uop)) if dtype is None and is_weak(x) else out   # (a new Tensor: out may be the fill)


def zeros_like(x: ArrayLike, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return full_like(x, 0, dtype, device)


def ones_like(x: ArrayLike, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    return full_like(x, 1, dtype, device)


def arange(start: float, stop: float | None = None, step: float | None = None, dtype: DType | str | None = None,
           device: str | None = None) -> Tensor:
    """start, start + step, ... up to `stop` (0 to `start` without one), as jnp.arange: the dtype is the promotion of
    the bounds given (Python numbers weak) unless `dtype` says. A range of bools is a TypeError, as in JAX (its iota
    takes numbers only; numpy's arange(3, dtype=bool) is [False, True, True]).

    >>> tnp.arange(1, 2, 0.25)          # [1., 1.25, 1.5, 1.75]
    """
    if step == 0:
        raise ValueError("arange: step must not be zero")
    given = [v for v in (start, stop, step) if v is not None]
    d = to_dtype(dtype) if dtype is not None else promote_types(*map(scalar_kind, given))
    if d.is_bool:
        why = "asked for" if dtype is not None else f"the type of the bounds {given}"
        raise TypeError(f"arange: a range of bools is not defined (dtype bool, {why}), as in JAX; make a range of "
                        f"integers and compare it (tnp.arange(n) > 0)")
    return _place(Tensor.arange(start, stop, 1 if step is None else step, dtype=d), device)


def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: DType | str | None = None, axis: int = 0, *, device: str | None = None) -> Any:
    """`num` evenly spaced samples from `start` to `stop` (`stop` too with `endpoint`), as `jnp.linspace`. `start`
    and `stop` may be arrays (broadcast together): the samples run along a new axis, at `axis` of the result. With
    `retstep`, `(samples, step)`. Integer dtypes round the samples toward -inf, as numpy.

    >>> tnp.linspace(0.0, 1.0, 5)                                   # [0, 0.25, 0.5, 0.75, 1]
    >>> tnp.linspace(tnp.asarray([0.0, 10.0]), 20.0, 3, axis=1)     # [[0, 10, 20], [10, 15, 20]]
    """
    num = int(num)
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    if dtype is not None:
        d = to_dtype(dtype)
    else:
        d = promote_types(promotion_kind(start), promotion_kind(stop), "f*")
        d = d if d.is_inexact else dtypes.default_float
    div = (num - 1) if endpoint else num
    work = d if d.is_inexact else dtypes.default_float
    lo, hi = to_tensor(start).astype(work), to_tensor(stop).astype(work)
    lo, hi = broadcast(lo, hi, name="linspace")
    nd = lo.ndim
    if not -nd - 1 <= axis <= nd:
        raise np.exceptions.AxisError(f"linspace: axis {axis} is out of bounds for a result of dimension {nd + 1}")
    step = (hi - lo) / div if div > 0 else hi * 0.0
    i = Tensor.arange(num, dtype=work).reshape(*lo.shape, num) if nd == 0 else \
        Tensor.arange(num, dtype=work).reshape(*(1,) * nd, num)
    out = lo.reshape(*lo.shape, 1) + i * step.reshape(*step.shape, 1)
    if endpoint and num > 1:  # the last sample is exactly `stop`, as numpy guarantees
        last = Tensor.arange(num, dtype=dtypes.int32).reshape(*(1,) * nd, num) == num - 1
        out = ew.where(last, hi.reshape(*hi.shape, 1), out)
    if not d.is_float and not d.is_complex:   # numpy and JAX round integer samples toward -inf, not toward zero
        out = ew.floor(out)
    out = out.astype(d)
    axis = axis % (nd + 1)
    if axis != nd:
        out = out.permute(*range(axis), nd, *range(axis, nd))
    out = _place(out, device)
    if not retstep:
        return out
    if div <= 0:  # no interval between samples (num=0, or num=1 with endpoint): a NaN step, as numpy's and JAX's
        step = Tensor.full((), float("nan"), work)
    return out, step.astype(d) if d.is_inexact else step


def eye(N: int, M: int | None = None, k: int = 0, dtype: DType | str | None = None, *,
        device: str | None = None) -> Tensor:
    """An N x M (N x N without M) matrix with ones on diagonal k; numpy's and JAX's parameter names."""
    M = N if M is None else M
    i = Tensor.arange(N, dtype=dtypes.int32).reshape(N, 1)
    j = Tensor.arange(M, dtype=dtypes.int32).reshape(1, M)
    return _place(ew.equal(j - i, _offset(k, N, M)).astype(dtype or dtypes.default_float), device)


def _offset(k: Any, N: int, M: int) -> Any:
    """A diagonal offset past the matrix (|k| beyond 2**31 included) as the nearest one just outside it: j - i of an
    N x M matrix lies in [-(N - 1), M - 1], so the answer is the same and k fits the int32 compare."""
    return builtins.max(-N, builtins.min(int(k), M)) if isinstance(k, (int, np.integer)) else k


def identity(n: int, dtype: DType | str | None = None, *, device: str | None = None) -> Tensor:
    return eye(n, dtype=dtype, device=device)


def tri(N: int, M: int | None = None, k: int = 0, dtype: DType | str | None = None) -> Tensor:
    """An N x M (N x N without M) matrix with ones on and below diagonal k; numpy's and JAX's parameter names. float32
    by default in either x64 mode, as jnp.tri (unlike eye's default float)."""
    M = N if M is None else M
    i = Tensor.arange(N, dtype=dtypes.int32).reshape(N, 1)
    j = Tensor.arange(M, dtype=dtypes.int32).reshape(1, M)
    return ew.less_equal(j - i, _offset(k, N, M)).astype(dtype or dtypes.float32)


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


def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list[Tensor]:
    """numpy.meshgrid: coordinate grids from 1-d coordinate vectors, as broadcast views (no memory).

    indexing="xy" (the default) swaps the first two axes of the grids (Cartesian: x varies along columns),
    "ij" keeps the inputs' order (matrix indexing). `sparse=True` returns the vectors shaped to broadcast against
    each other instead of broadcast to the full grid. `copy` is accepted for numpy compatibility.

    >>> xx, yy = tnp.meshgrid(tnp.arange(3), tnp.arange(2))     # both (2, 3)
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    ts = [to_tensor(x) for x in xi]
    for i, t in enumerate(ts):
        if t.ndim != 1:
            raise ValueError(f"meshgrid: every input must be 1-d, argument {i} has shape {t.shape}")
    n = len(ts)
    shape = [t.shape[0] for t in ts]
    axes = list(range(n))
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
        axes[0], axes[1] = 1, 0
    out = []
    for t, ax in zip(ts, axes, strict=True):
        v = t.reshape(tuple(t.shape[0] if a == ax else 1 for a in range(n)))
        out.append(v if sparse else v.expand(tuple(shape)))
    return out
