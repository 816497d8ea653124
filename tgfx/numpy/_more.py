"""The rest of `jax.numpy`'s names that ported programs meet: `diagflat`, `matvec`/`vecmat`, `spacing`,
`sort_complex`, `mask_indices`, `poly`/`polydiv`, host I/O (`frombuffer`, `fromstring`, `save`, `load`,
`savez`), printing (`array_repr`, `array_str`), `einsum_path`, and the constants and types `euler_gamma`, `dtype`,
`ComplexWarning`.

The array functions are compositions of tnp ops with static shapes, so they work eagerly, under `jit` and `vmap`,
and are differentiable where JAX's are. The host ones (I/O, printing, `einsum_path`) run numpy on the host, as
JAX's do; `fromiter` raises as JAX's does (it consumes an iterator, which a traced function must not).

>>> tnp.diagflat(tnp.asarray([[1, 2], [3, 4]]))     # the 4x4 diagonal matrix of 1, 2, 3, 4
>>> tnp.poly(tnp.asarray([1.0, 2.0]))               # (x - 1)(x - 2) = x^2 - 3x + 2: [1., -3., 2.]
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import IO, Any

import numpy as np

from tgfx.dtypes import DType, dtypes, finfo
from tgfx.numpy import _elementwise as ew
from tgfx.numpy._poly import _promote
from tgfx.numpy._standard import conj
from tgfx.tensor import ArrayLike, Tensor, to_tensor

euler_gamma = 0.5772156649015329   # the Euler-Mascheroni constant, np.euler_gamma
dtype = np.dtype                   # jnp.dtype is numpy's: tnp.dtype(tnp.float32) == np.dtype("float32")
ComplexWarning = np.exceptions.ComplexWarning


# ---- matrices and vectors ----

def diagflat(v: ArrayLike, k: int = 0) -> Tensor:
    """numpy.diagflat: the flattened `v` laid on the k-th diagonal of a square matrix of zeros (side v.size + |k|).

    >>> tnp.diagflat(tnp.asarray([1, 2]), k=-1)      # [[0, 0, 0], [1, 0, 0], [0, 2, 0]]
    """
    from tgfx.numpy._linalg import diag
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"diagflat: k must be an int (the diagonal's offset), got {type(k).__name__} {k!r}")
    return diag(to_tensor(v).reshape(-1), int(k))


def _matrix_vector(fn: str, x1: ArrayLike, x2: ArrayLike, mat_first: bool) -> tuple[Tensor, Tensor]:
    a, b = _promote(fn, x1, x2)
    mat, vec = (a, b) if mat_first else (b, a)
    mname, vname = ("x1", "x2") if mat_first else ("x2", "x1")
    if mat.ndim < 2 or vec.ndim < 1:
        raise ValueError(f"{fn}: {mname} must be a (stack of) matrices and {vname} a (stack of) vectors, got shapes "
                         f"{a.shape} and {b.shape}")
    k = mat.shape[-1] if mat_first else mat.shape[-2]
    if vec.shape[-1] != k:
        raise ValueError(f"{fn}: the contracted axis differs: {mname} has shape {mat.shape}, {vname} has shape "
                         f"{vec.shape} (its last axis must be {k})")
    return a, b


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """numpy.matvec: the matrix-vector product over the last axes, `x1[..., i, j] x2[..., j]`, batch axes
    broadcast: shapes (..., M, N) and (..., N) give (..., M).

    >>> tnp.matvec(tnp.asarray([[1.0, 2.0], [3.0, 4.0]]), tnp.asarray([1.0, 1.0]))   # [3., 7.]
    """
    from tgfx.numpy._linalg import matmul
    a, b = _matrix_vector("matvec", x1, x2, True)
    return matmul(a, b[..., None])[..., 0]


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Tensor:
    """numpy.vecmat: the vector-matrix product over the last axes, `conj(x1[..., i]) x2[..., i, j]` (the vector is
    conjugated, as in numpy), batch axes broadcast: shapes (..., N) and (..., N, M) give (..., M).

    >>> tnp.vecmat(tnp.asarray([1.0, 1.0]), tnp.asarray([[1.0, 2.0], [3.0, 4.0]]))   # [4., 6.]
    """
    from tgfx.numpy._linalg import matmul
    a, b = _matrix_vector("vecmat", x1, x2, False)
    return matmul(conj(a)[..., None, :], b)[..., 0, :]


# ---- floating point ----

def spacing(x: ArrayLike, /) -> Tensor:
    """numpy.spacing: the distance from x to the next representable number away from zero (negative for negative
    x), as jnp.spacing computes it; integers are promoted to float. Complex input is an error.

    >>> tnp.spacing(tnp.asarray([1.0, -1.0]))        # [1.1920929e-07, -1.1920929e-07]
    """
    (t,) = _promote("spacing", x, inexact=True)
    if t.dtype.is_complex:
        raise ValueError(f"spacing is not defined for complex inputs, got {t.dtype.name}")
    inf = Tensor.full((), float("inf"), t.dtype)
    if t.dtype == dtypes.float16:   # numpy's float16 spacing steps towards +inf (JAX follows it)
        return ew.nextafter(t, inf) - t
    out = ew.nextafter(t, ew.copysign(inf, t)) - t
    fi = finfo(t.dtype)   # the smallest subnormal: the smallest normal times the step at 1
    tiny = ew.copysign(Tensor.full((), float(fi.smallest_normal) * float(fi.eps), t.dtype), t)
    return ew.where(out == 0, tiny, out)


def _complex_of(d: DType) -> DType:
    return dtypes.complex128 if d in (dtypes.float64, dtypes.int64, dtypes.uint64, dtypes.complex128) else \
        dtypes.complex64


def sort_complex(a: ArrayLike) -> Tensor:
    """numpy.sort_complex: sorted along the last axis, by real part then imaginary part, as a complex array
    (complex64, or complex128 for 64-bit input in x64 mode).

    >>> tnp.sort_complex(tnp.asarray([1 + 2j, 1 - 1j, 0 + 5j]))   # [0+5j, 1-1j, 1+2j]
    """
    from tgfx.numpy._sort import sort
    t = to_tensor(a)
    if t.ndim == 0:
        raise ValueError("sort_complex: a must have at least one axis, got a 0-d array")
    return sort(t, axis=-1).astype(_complex_of(t.dtype))


# ---- index helpers ----

def mask_indices(n: int, mask_func: Callable[[Tensor, int], Tensor], k: int = 0, *,
                 size: int | None = None) -> tuple[Tensor, Tensor]:
    """numpy.mask_indices: the (row, column) indices where `mask_func(ones((n, n)), k)` is nonzero, e.g.
    `tnp.triu` for the upper triangle. The count depends on the mask's values; they are constants, so this works
    under `jit` too, and `size=` (JAX's) fixes the count, padding with zeros.

    >>> rows, cols = tnp.mask_indices(3, tnp.triu, 1)   # [0, 0, 1], [1, 2, 2]
    """
    from tgfx.numpy._creation import ones
    from tgfx.numpy._data_dependent import nonzero
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise TypeError(f"mask_indices: n must be a non-negative int (the matrix side), got {n!r}")
    if not callable(mask_func):
        raise TypeError(f"mask_indices: mask_func must be a function like tnp.triu, got {type(mask_func).__name__}")
    mask = mask_func(ones((int(n), int(n))), k)
    if not isinstance(mask, Tensor) or mask.shape != (n, n):
        got = mask.shape if isinstance(mask, Tensor) else type(mask).__name__
        raise ValueError(f"mask_indices: mask_func must return an ({n}, {n}) array, got {got}")
    rows, cols = nonzero(mask, size=size)
    return rows, cols


# ---- polynomials ----

def _characteristic(a: Tensor) -> Tensor:
    """The coefficients of det(x I - a), highest power first, by the Faddeev-LeVerrier recurrence: n matrix
    products, no eigenvalues (JAX goes through a general eigensolver, which tgfx does not have)."""
    from tgfx.numpy._creation import eye
    from tgfx.numpy._linalg import matmul, trace
    from tgfx.numpy._movement import stack
    n = a.shape[0]
    ident = eye(n, dtype=a.dtype)
    coeffs, m = [Tensor.full((), 1, a.dtype)], ident
    for k in range(1, n + 1):
        am = matmul(a, m)
        c = trace(am) * (-1.0 / k)
        coeffs.append(c)
        m = am + c * ident
    return stack(coeffs)


def poly(seq_of_zeros: ArrayLike) -> Tensor:
    """numpy.poly: the coefficients (highest power first, leading 1) of the monic polynomial with the given roots,
    or, for a square matrix, of its characteristic polynomial. The result is inexact.

    For a real matrix the result is real, as numpy's is (JAX's is complex, from its eigenvalues); it comes from the
    Faddeev-LeVerrier recurrence, accurate for the small matrices this is used on.

    >>> tnp.poly(tnp.asarray([[1.0, 2.0], [3.0, 4.0]]))    # x^2 - 5x - 2: [1., -5., -2.]

    Raises:
        ValueError: the input is neither 1-d nor a non-empty square matrix.
    """
    (z,) = _promote("poly", seq_of_zeros, inexact=True)
    z = z.reshape(1) if z.ndim == 0 else z
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        return _characteristic(z)
    if z.ndim != 1:
        raise ValueError(f"poly: input must be 1d or non-empty square 2d array, got shape {z.shape}")
    a = Tensor.full((1,), 1, z.dtype)
    for k in range(z.shape[0]):   # multiply by (x - z_k): a shifted copy of the coefficients, scaled, subtracted
        a = a.pad_zeros([(0, 1)]) - z[k] * a.pad_zeros([(1, 0)])
    return a if z.shape[0] else Tensor.full((), 1, z.dtype)


def polydiv(u: ArrayLike, v: ArrayLike, *, trim_leading_zeros: bool = False) -> tuple[Tensor, Tensor]:
    """numpy.polydiv: `(q, r)` with `u = q * v + r`, coefficients highest power first, as JAX computes it: q has
    max(len(u) - len(v) + 1, 1) coefficients and r keeps u's length (its leading entries are zeros, up to
    rounding), so the shapes are static. `trim_leading_zeros=True` drops r's leading near-zeros (|r| < sqrt(eps)),
    as numpy does; the length then depends on the values, so it works eagerly only.

    >>> q, r = tnp.polydiv(tnp.asarray([1.0, -3.0, 2.0]), tnp.asarray([1.0, -1.0]))   # q = [1., -2.], r = 0
    """
    from tgfx.numpy._creation import zeros
    uu, vv = _promote("polydiv", u, v, inexact=True)
    if uu.ndim != 1 or vv.ndim != 1 or vv.shape[0] == 0:
        raise ValueError(f"polydiv: u and v must be 1-d coefficient arrays (v non-empty), got shapes {uu.shape} and "
                         f"{vv.shape}")
    m, n = uu.shape[0] - 1, vv.shape[0] - 1
    scale = 1.0 / vv[0]
    q = zeros((max(m - n + 1, 1),), uu.dtype)
    for k in range(m - n + 1):   # long division, one static step per quotient coefficient
        d = scale * uu[k]
        q = q.at[k].set(d)
        uu = uu.at[k:k + n + 1].add(-d * vv)
    if trim_leading_zeros:
        from tgfx.numpy._data_dependent import host_value
        tol = float(np.sqrt(finfo(uu.dtype).eps))
        big = np.flatnonzero(np.abs(host_value(uu, "polydiv", "the remainder",
                                               hint="Pass trim_leading_zeros=False (the default) under jit")) >= tol)
        uu = uu[int(big[0]):] if big.size else uu[:0]
    return q, uu


# ---- host data in and out ----

def frombuffer(buffer: bytes | Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Tensor:  # noqa: A002
    """numpy.frombuffer, then an array: the bytes of `buffer` read as `dtype` (default float, which becomes
    float32 outside x64 mode, as in JAX).

    >>> tnp.frombuffer(b"\\x01\\x02", dtype=tnp.uint8)    # [1, 2]
    """
    from tgfx.numpy._creation import asarray
    return asarray(np.frombuffer(buffer, dtype=np.dtype(dtype), count=count, offset=offset))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Tensor:  # noqa: A002
    """numpy.fromstring with a separator (JAX requires `sep`; the binary mode is `frombuffer`).

    >>> tnp.fromstring("1 2 3", dtype=int, sep=" ")     # [1, 2, 3]
    """
    from tgfx.numpy._creation import asarray
    return asarray(np.fromstring(string, dtype=np.dtype(dtype), count=count, sep=sep))


def fromiter(*args: Any, **kwargs: Any) -> Tensor:
    """Not implemented, as in JAX: reading an iterator is a side effect a traced function must not have.

    Raises:
        NotImplementedError: always; build the array with `tnp.asarray(np.fromiter(...))` outside traced code.
    """
    raise NotImplementedError("tnp.fromiter() is not implemented because it may be non-pure and thus unsafe under "
                              "jit and other transformations (as jnp.fromiter); use tnp.asarray(np.fromiter(...)) "
                              "outside traced functions instead")


save = np.save      # np.save reads a Tensor through __array__, as it reads a JAX array
savez = np.savez


def load(file: IO[bytes] | str | os.PathLike, *args: Any, **kwargs: Any) -> Any:
    """numpy.load, with an array result as a Tensor (as jnp.load); bfloat16 saved by JAX (ml_dtypes), which numpy
    stores as 2-byte void, is recovered. An `.npz` archive comes back as numpy's NpzFile. (`save` writes what
    `np.asarray` gives: a bfloat16 Tensor is saved as float32.)
    """
    from tgfx.numpy._creation import asarray
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == np.dtype("V2"):   # bfloat16's bits, read as such
            from tgfx.lax import bitcast_convert_type
            return bitcast_convert_type(asarray(out.view(np.uint16)), dtypes.bfloat16)
        try:
            out = asarray(out)
        except TypeError:   # a dtype tgfx has no type for (strings, objects): numpy's array, as jnp.load leaves it
            pass
    return out


# ---- printing ----

def array_repr(arr: ArrayLike, max_line_width: int | None = None, precision: int | None = None,
               suppress_small: bool | None = None) -> str:
    """numpy.array_repr of the array's value (read to the host)."""
    return np.array_repr(np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a: ArrayLike, max_line_width: int | None = None, precision: int | None = None,
              suppress_small: bool | None = None) -> str:
    """numpy.array_str of the array's value (read to the host)."""
    return np.array_str(np.asarray(a), max_line_width, precision, suppress_small)


def _shape_only(x: Any) -> Any:
    """An operand as numpy sees it for planning: its shape and dtype, no data (a zero-stride view)."""
    if isinstance(x, Tensor):
        return np.broadcast_to(np.zeros((), np.float32), x.shape)
    return x


def einsum_path(subscripts: Any, /, *operands: Any, optimize: bool | str | list = "auto") -> tuple[list, str]:
    """The contraction order for `einsum(subscripts, *operands)` and numpy's report on it, as jnp.einsum_path:
    `(path, description)` with `path` a list of index tuples (what `tnp.einsum`'s `optimize=` takes). The plan is
    numpy's (`np.einsum_path`); "auto" and True mean its "greedy" search. Only the operands' shapes are read.

    >>> path, info = tnp.einsum_path("ij,jk,kl->il", tnp.ones((2, 3)), tnp.ones((3, 4)), tnp.ones((4, 5)))
    """
    if optimize is True or optimize == "auto":
        optimize = "greedy"
    elif optimize is False:
        optimize = ["einsum_path", *[(0, 1)] * max(len(operands) - 1, 0)]   # left to right, as written
    elif isinstance(optimize, Sequence) and not isinstance(optimize, str) and optimize[:1] != ["einsum_path"]:
        optimize = ["einsum_path", *optimize]
    path, info = np.einsum_path(_shape_only(subscripts), *[_shape_only(x) for x in operands], optimize=optimize)
    return [tuple(int(i) for i in step) for step in path[1:]], info


__all__ = ["ComplexWarning", "array_repr", "array_str", "diagflat", "dtype", "einsum_path", "euler_gamma",
           "frombuffer", "fromiter", "fromstring", "load", "mask_indices", "matvec", "poly", "polydiv", "save",
           "savez", "sort_complex", "spacing", "vecmat"]
