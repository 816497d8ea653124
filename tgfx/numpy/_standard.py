"""The array API standard's names (2024.12) that numpy spells differently or lacks, and its introspection: dtype
queries (`can_cast`, `isdtype`, `result_type`), `__array_namespace_info__`, and small functions built on the rest."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx.dtypes import ALL_DTYPES, FRONT_END, DType, dtypes, from_numpy, promote_types, to_dtype
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _movement as mv
from tgfx.numpy import _reduce as rd
from tgfx.tensor import ArrayLike, Tensor, canonical_device, is_weak, normalize_axis, promotion_kind, to_tensor

__array_api_version__ = "2024.12"


# ---- movement and linear algebra under the standard's names ----
def concat(arrays: Sequence[ArrayLike], /, *, axis: int | None = 0) -> Tensor:
    """The standard's `concatenate` (the arrays joined along `axis`, flattened first when None)."""
    return mv.concatenate(arrays, axis=axis)


def permute_dims(x: ArrayLike, /, axes: Sequence[int]) -> Tensor:
    """The standard's `transpose` with explicit axes."""
    return to_tensor(x).permute(*axes)


def matrix_transpose(x: ArrayLike, /) -> Tensor:
    """The last two axes swapped (`x.mT`); needs at least two axes."""
    x = to_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: needs a Tensor of at least 2 dimensions, got shape {x.shape}")
    return mv.swapaxes(x, -1, -2)


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    """The slices of `x` along `axis`, as a tuple (views; the inverse of `stack`)."""
    x = to_tensor(x)
    if x.ndim == 0:
        raise ValueError("unstack: a 0-d Tensor has no axis to unstack")
    axis = normalize_axis(axis, x.ndim, "unstack")
    moved = mv.moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(x.shape[axis]))


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Tensor:
    """The dot product of vectors along `axis` (broadcast over the other axes): sum(conj(x1) * x2, axis), the first
    vector conjugated as the standard says (a no-op for real ones)."""
    a, b = ew._operands(x1, x2, "vecdot")
    if a.ndim == 0:
        raise ValueError("vecdot: needs arrays of at least one dimension")
    ax = normalize_axis(axis, a.ndim, "vecdot")
    t1, t2 = to_tensor(x1), to_tensor(x2)
    if any(t.ndim and t.shape[ax - a.ndim] != a.shape[ax] for t in (t1, t2) if -t.ndim <= ax - a.ndim):
        raise ValueError(f"vecdot: the arrays' lengths along axis {axis} differ ({t1.shape} and {t2.shape})")
    if a.dtype.is_complex:
        a = conj(a)
    return rd.sum(ew.multiply(a, b), axis=ax, dtype=None if a.dtype.is_bool else a.dtype)  # jnp.vecdot's dtype


def astype(x: ArrayLike, dtype: DType | str | type, /, *, copy: bool = True, device: str | None = None) -> Tensor:
    """x as `dtype` (Tensors are immutable: `copy` only decides whether the result may be `x` itself)."""
    return to_tensor(x).astype(dtype, copy=copy, device=device)


# ---- dtype queries ----
def _dtype_arg(x: Any) -> DType:
    if isinstance(x, (np.ndarray, np.generic)):   # a NumPy array or scalar stands for its dtype, a strong one
        return to_dtype(x.dtype)
    return x.dtype if isinstance(x, Tensor) else to_dtype(x)


def _declared_dtype(x: Any) -> DType:
    """The dtype `x` names, as named: int64 stays int64 outside x64 mode (a question about the types, as
    jnp.can_cast's `can_cast(uint32, int64)` is True, not about what an array of them would become)."""
    if isinstance(x, (Tensor, DType)):
        return x.dtype if isinstance(x, Tensor) else x
    try:
        return from_numpy(np.dtype(x))
    except TypeError:
        return to_dtype(x)


def can_cast(from_: Any, to: Any, /) -> bool:
    """Whether `from_` (a dtype or Tensor) converts to `to` without loss by the promotion rules, as jnp.can_cast:
    numpy's 'safe' casting (bfloat16 by JAX's lattice: from bool and 8-bit integers, to float32 and float64)."""
    a, b = _declared_dtype(from_), _declared_dtype(to)
    if dtypes.bfloat16 in (a, b):
        if a == b:
            return True
        return a.is_bool or (a.is_int and a.itemsize == 1) if b == dtypes.bfloat16 else b.is_complex or \
            b in (dtypes.float32, dtypes.float64)
    return bool(np.can_cast(a.np, b.np, "safe"))


_KINDS = {
    "bool": lambda d: d.is_bool,
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.is_int,
    "real floating": lambda d: d.is_float,
    "complex floating": lambda d: d.is_complex,
    "numeric": lambda d: not d.is_bool,
}


def isdtype(dtype: DType, kind: DType | str | tuple) -> bool:
    """Whether `dtype` is of `kind`: a dtype, one of 'bool', 'signed integer', 'unsigned integer', 'integral',
    'real floating', 'complex floating', 'numeric', or a tuple of these (true if any matches). Types as named:
    `isdtype(float32, float64)` is False outside x64 mode too."""
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    d = _declared_dtype(dtype)
    if isinstance(kind, str) and kind in _KINDS:
        return _KINDS[kind](d)
    if isinstance(kind, str) and kind not in {x.name for x in ALL_DTYPES}:
        raise ValueError(f"isdtype: unknown kind {kind!r}; kinds are {', '.join(map(repr, _KINDS))} or a dtype")
    return d == _declared_dtype(kind)


def result_type(*arrays_and_dtypes: Any) -> DType:
    """The dtype that operations on these operands (Tensors, dtypes, Python scalars) compute in, by JAX's promotion:
    Python scalars and weakly typed Tensors are weak (`result_type(tnp.int8, 1)` is int8)."""
    if not arrays_and_dtypes:
        raise ValueError("result_type: needs at least one array or dtype")
    kinds: list[DType | str] = []
    for x in arrays_and_dtypes:
        if x is int or x is float or x is complex:   # the Python types are weak, as their values (JAX's)
            x = x(0)
        kinds.append(promotion_kind(x) if isinstance(x, (Tensor, bool, int, float, complex)) else _dtype_arg(x))
    if len(kinds) == 1 and isinstance(kinds[0], str):
        return promote_types(kinds[0])
    return promote_types(*kinds)


def _all_weak(args: Sequence[Any]) -> bool:
    """Whether every one of `args` is weakly typed: a Python number or type, or a weakly typed Tensor
    (`tg.dtypes.result_type(..., return_weak_type_flag=True)`)."""
    return all(isinstance(a, (int, float, complex)) and not isinstance(a, bool) or a in (int, float, complex)
               or isinstance(a, Tensor) and is_weak(a) for a in args)


FRONT_END.update(result_type=result_type, all_weak=_all_weak)   # (`tg.dtypes.result_type`: tgfx/dtypes.py)


# ---- small functions ----
def count_nonzero(x: ArrayLike, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    """The number of non-zero elements along `axis` (all when None), in the default integer type."""
    x = to_tensor(x)
    return rd.sum(ew._bool(x).astype(dtypes.default_int), axis=axis, keepdims=keepdims)


def _cumulative(x: ArrayLike, axis: int | None, dtype: DType | str | None, include_initial: bool, name: str,
                fn: Any, initial: int) -> Tensor:
    x = to_tensor(x)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{name}: axis must be given for a Tensor of {x.ndim} dimensions (shape {x.shape})")
        axis = 0
    if x.ndim == 0:
        raise ValueError(f"{name}: needs a Tensor of at least one dimension")
    axis = normalize_axis(axis, x.ndim, name)
    out = fn(x, axis=axis, dtype=dtype)
    if include_initial:
        first = Tensor.full(tuple(1 if a == axis else s for a, s in enumerate(out.shape)), initial, out.dtype)
        out = mv.concatenate([first, out], axis=axis)
    return out


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None, dtype: DType | str | None = None,
                   include_initial: bool = False) -> Tensor:
    """Running sums along `axis` (required past 1-d); `include_initial` starts with a 0 (one element longer). Narrow
    integers sum in the default integer, as `sum` (JAX's; `cumsum` and `cumulative_prod` keep the input's dtype)."""
    if dtype is None:
        dtype = rd._sum_dtype(to_tensor(x).dtype)
    return _cumulative(x, axis, dtype, include_initial, "cumulative_sum", rd.cumsum, 0)


def cumulative_prod(x: ArrayLike, /, *, axis: int | None = None, dtype: DType | str | None = None,
                    include_initial: bool = False) -> Tensor:
    """Running products along `axis` (required past 1-d); `include_initial` starts with a 1."""
    return _cumulative(x, axis, dtype, include_initial, "cumulative_prod", rd.cumprod, 1)


def diff(a: ArrayLike, /, n: int = 1, axis: int = -1, prepend: ArrayLike | None = None,
         append: ArrayLike | None = None) -> Tensor:
    """The n-th discrete difference along `axis` (numpy.diff); booleans differ by `!=`, as numpy. `prepend` and
    `append` join `a` in their promotion with it, a Python scalar weakly (int16 with prepend=-1 stays int16), as
    JAX's; n=0 returns `a` itself, without them.

    >>> tnp.diff(tnp.asarray([1, 2, 4]), prepend=0).tolist()
    [1, 1, 2]
    """
    x = to_tensor(a)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    if x.ndim == 0:
        raise ValueError("diff: needs a Tensor of at least one dimension")
    axis = normalize_axis(axis, x.ndim, "diff")
    if n == 0:
        return x
    d = promote_types(*(promotion_kind(e) for e in (prepend, x, append) if e is not None))
    parts = []
    for extra in (prepend, append):
        if extra is None:
            parts.append(None)
            continue
        e = to_tensor(extra).astype(d)
        shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape)) if e.ndim == 0 else e.shape
        parts.append(e.expand(shape))
    x = mv.concatenate([p for p in (parts[0], x, parts[1]) if p is not None], axis=axis)
    for _ in range(n):
        m = x.shape[axis]
        if m <= 1:  # nothing left to difference: empty along axis, as numpy
            return x.shrink(tuple((0, 0) if i == axis else (0, s) for i, s in enumerate(x.shape)))
        hi = x.shrink(tuple((1, m) if i == axis else (0, s) for i, s in enumerate(x.shape)))
        lo = x.shrink(tuple((0, m - 1) if i == axis else (0, s) for i, s in enumerate(x.shape)))
        x = ew.not_equal(hi, lo) if x.dtype.is_bool else ew.subtract(hi, lo)
    return x


def empty_like(x: ArrayLike, /, *, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """A Tensor shaped as `x` (zeros: tgfx's empty is zeros, a constant that costs no memory)."""
    from tgfx.numpy._creation import zeros_like
    return zeros_like(x, dtype=dtype, device=device)


# ---- introspection: `tnp.__array_namespace_info__()` ----
class ArrayNamespaceInfo:
    """What `tgfx.numpy` supports, as the standard's inspection API asks."""

    def capabilities(self) -> dict[str, Any]:
        # boolean-mask indexing and nonzero/unique work eagerly (not under jit without size=): data-dependent
        # shapes are supported as JAX supports them, so False, as jax.numpy reports
        return {"boolean indexing": False, "data-dependent shapes": False, "max dimensions": 64}

    def default_device(self) -> str:
        return canonical_device(None)

    def devices(self) -> list[str]:
        from tgfx.transforms.shard import devices
        return list(devices())

    def default_dtypes(self, *, device: str | None = None) -> dict[str, DType]:
        return {"real floating": dtypes.default_float, "complex floating": dtypes.default_complex,
                "integral": dtypes.default_int, "indexing": dtypes.default_int}

    def dtypes(self, *, device: str | None = None, kind: str | tuple | None = None) -> dict[str, DType]:
        """The standard's dtypes in this x64 mode (no 64-bit ones without it); tgfx's float16 and bfloat16 are
        extras the standard does not name."""
        from tgfx import config
        supported = [d for d in ALL_DTYPES if d not in (dtypes.float16, dtypes.bfloat16) and (
            config.X64 or d.itemsize < 8 or d == dtypes.complex64)]
        return {d.name: d for d in supported if kind is None or isdtype(d, kind)}


def __array_namespace_info__() -> ArrayNamespaceInfo:  # noqa: N807 - the standard's name
    return ArrayNamespaceInfo()


# ---- complex parts (tgfx/numpy/_complex.py); a real Tensor is its own real part and conjugate ----
def conj(x: ArrayLike, /) -> Tensor:
    """The complex conjugate: a real Tensor is its own."""
    from tgfx.numpy._complex import conj as complex_conj
    return complex_conj(to_tensor(x))


conjugate = conj


def real(x: ArrayLike, /) -> Tensor:
    """The real part (of a complex64 Tensor, float32): a real Tensor itself."""
    from tgfx.numpy._complex import real as complex_real
    return complex_real(to_tensor(x))


def imag(x: ArrayLike, /) -> Tensor:
    """The imaginary part: zeros of a real Tensor's shape and dtype."""
    from tgfx.numpy._complex import imag as complex_imag
    return complex_imag(to_tensor(x))
