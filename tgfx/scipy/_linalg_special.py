"""`tgfx.scipy.linalg`'s special-matrix constructors, as `jax.scipy.linalg` has them.

Those built from arrays (`toeplitz`, `hankel`, `circulant`, `leslie`, `companion`, `fiedler`, `fiedler_companion`,
`convolution_matrix`, `block_diag`) gather their entries with static index tables, so they are one kernel each,
trace under `jit`, are differentiable in their inputs, and take leading batch axes as JAX's vectorised forms do.
Those that take only a size (`hilbert`, `invhilbert`, `pascal`, `invpascal`, `helmert`, `hadamard`, `dft`) are
constants of that static size: their entries are worked out exactly on the host (integers exactly, the rest in
float64) and rounded once to the result type, where JAX evaluates binomials through lgamma in float32.

>>> toeplitz(tg.asarray([1.0, 2.0, 3.0]))          # [[1, 2, 3], [2, 1, 2], [3, 2, 1]]
>>> block_diag(a, b, c)                             # a, b, c along the diagonal of one matrix
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import to_dtype
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, to_tensor


def _vector(x: ArrayLike) -> Tensor:
    """x as a Tensor of at least one axis (a scalar becomes a vector of one, as jnp.atleast_1d)."""
    t = to_tensor(x)
    return t.reshape(1) if t.ndim == 0 else t


def _common_batch(name: str, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """x (..., m) and y (..., n) with their batch axes broadcast against each other."""
    batch = broadcast_shapes(x.shape[:-1], y.shape[:-1], name=name)
    return tnp.broadcast_to(x, batch + x.shape[-1:]), tnp.broadcast_to(y, batch + y.shape[-1:])


def _gather(v: Tensor, index: np.ndarray) -> Tensor:
    """v[..., index] for a static integer table `index` (one kernel)."""
    return tnp.take(v, index, axis=-1)


def _grid(m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(m)[:, None], np.arange(n)[None, :]


# ---- built from arrays ----
def toeplitz(c: ArrayLike, r: ArrayLike | None = None) -> Tensor:
    """The Toeplitz matrix with first column c and first row r (`jax.scipy.linalg.toeplitz`): T[i, j] = c[i - j]
    on and below the diagonal, r[j - i] above it (r[0] is ignored). r defaults to conj(c), a Hermitian matrix.
    c (..., m) and r (..., n) give (..., m, n), their batch axes broadcast.

    >>> toeplitz(tg.asarray([1.0, 2.0, 3.0]), tg.asarray([1.0, 4.0]))     # [[1, 4], [2, 1], [3, 2]]
    """
    ct = _vector(c)
    rt = tnp.conj(ct) if r is None else _vector(r)
    ct, rt = _common_batch("toeplitz", ct, rt)
    m, n = ct.shape[-1], rt.shape[-1]
    dtype = tnp.result_type(ct, rt)
    if m == 0 or n == 0:
        return tnp.zeros(ct.shape[:-1] + (m, n), dtype)
    # c reversed, then r past its first entry: T[i, j] = elems[m - 1 - i + j]
    elems = tnp.concatenate([tnp.flip(ct, axis=-1).astype(dtype), rt[..., 1:].astype(dtype)], axis=-1)
    i, j = _grid(m, n)
    return _gather(elems, m - 1 - i + j)


def hankel(c: ArrayLike, r: ArrayLike | None = None) -> Tensor:
    """The Hankel matrix with first column c and last row r (`jax.scipy.linalg.hankel`): H[i, j] = c[i + j] while
    i + j < m, then r[i + j - m + 1] (r[0] is ignored). r defaults to zeros like c. c (..., m) and r (..., n) give
    (..., m, n), their batch axes broadcast.

    >>> hankel(tg.asarray([1.0, 2.0, 3.0]))              # [[1, 2, 3], [2, 3, 0], [3, 0, 0]]

    Raises ValueError for a scalar c or r.
    """
    ct = to_tensor(c)
    rt = tnp.zeros_like(ct) if r is None else to_tensor(r)
    for what, t in (("c", ct), ("r", rt)):
        if t.ndim == 0:
            raise ValueError(f"hankel: {what} must be at least 1-dimensional, got a scalar")
    ct, rt = _common_batch("hankel", ct, rt)
    m, n = ct.shape[-1], rt.shape[-1]
    dtype = tnp.result_type(ct, rt)
    if m == 0 or n == 0:
        return tnp.zeros(ct.shape[:-1] + (m, n), dtype)
    elems = tnp.concatenate([ct.astype(dtype), rt[..., 1:].astype(dtype)], axis=-1)
    i, j = _grid(m, n)
    return _gather(elems, i + j)


def circulant(c: ArrayLike) -> Tensor:
    """The circulant matrix with first column c (`jax.scipy.linalg.circulant`): C[i, j] = c[(i - j) mod n], so
    C x is the cyclic convolution of c and x. c (..., n) gives (..., n, n).

    >>> circulant(tg.asarray([1.0, 2.0, 3.0]))        # [[1, 3, 2], [2, 1, 3], [3, 2, 1]]
    """
    ct = _vector(c)
    n = ct.shape[-1]
    i, j = _grid(n, n)
    return _gather(ct, (i - j) % n) if n else tnp.zeros(ct.shape[:-1] + (0, 0), ct.dtype)


def leslie(f: ArrayLike, s: ArrayLike) -> Tensor:
    """The Leslie matrix of fecundities f (..., n) and survival rates s (..., n - 1) (`jax.scipy.linalg.leslie`):
    f in the first row, s on the subdiagonal, zeros elsewhere; (..., n, n) in their promoted dtype.

    >>> leslie(tg.asarray([0.1, 2.0, 1.0]), tg.asarray([0.2, 0.8]))  # [[.1, 2, 1], [.2, 0, 0], [0, .8, 0]]

    Raises ValueError when f has fewer than 2 entries or s does not have one fewer than f.
    """
    ft, st = _vector(f), _vector(s)
    if ft.shape[-1] < 2:
        raise ValueError(f"leslie: f must have at least 2 entries along its last axis, got shape {ft.shape}")
    if st.shape[-1] != ft.shape[-1] - 1:
        raise ValueError(f"leslie: s must have one entry fewer than f along the last axis; got f shape {ft.shape} "
                         f"and s shape {st.shape}")
    ft, st = _common_batch("leslie", ft, st)
    dtype = tnp.result_type(ft, st)
    n = ft.shape[-1]
    i, j = _grid(n, n)
    sub = tnp.concatenate([st.astype(dtype), tnp.zeros(st.shape[:-1] + (1,), dtype)], axis=-1)   # s[j] at (j+1, j)
    zero = tnp.zeros((), dtype)
    return tnp.where(i == 0, ft.astype(dtype)[..., None, :], tnp.where(i == j + 1, sub[..., None, :], zero))


def companion(a: ArrayLike) -> Tensor:
    """The companion matrix of the polynomial with coefficients a (highest degree first, a[0] != 0)
    (`jax.scipy.linalg.companion`): first row -a[1:] / a[0], ones on the subdiagonal; (..., n - 1, n - 1) for a
    (..., n), in a float type. Its eigenvalues are the polynomial's roots. A zero a[0] gives infs or NaNs (no check,
    as JAX: the values are not known while tracing).

    >>> companion(tg.asarray([1.0, -3.0, 2.0]))          # [[3, -2], [1, 0]]

    Raises ValueError when a has fewer than 2 entries along its last axis.
    """
    (t,) = promote_args_inexact("companion", a)
    t = t.reshape(1) if t.ndim == 0 else t
    if t.shape[-1] < 2:
        raise ValueError(f"companion: a must have at least 2 entries along its last axis, got shape {t.shape}")
    m = t.shape[-1] - 1
    first = -t[..., 1:] / t[..., :1]
    i, j = _grid(m, m)
    return tnp.where(i == 0, first[..., None, :], tnp.asarray(i == j + 1).astype(t.dtype))


def fiedler(a: ArrayLike) -> Tensor:
    """The symmetric Fiedler matrix F[i, j] = |a[i] - a[j]| (`jax.scipy.linalg.fiedler`); a (..., n) gives
    (..., n, n).

    >>> fiedler(tg.asarray([1.0, 4.0, 6.0]))           # [[0, 3, 5], [3, 0, 2], [5, 2, 0]]
    """
    t = _vector(a)
    return tnp.abs(t[..., :, None] - t[..., None, :])


def fiedler_companion(a: ArrayLike) -> Tensor:
    """The Fiedler companion matrix of the polynomial with coefficients a (highest degree first)
    (`jax.scipy.linalg.fiedler_companion`): pentadiagonal, with the same characteristic polynomial as `companion`'s
    matrix; (..., n - 1, n - 1) for a (..., n), in a float type.

    >>> fiedler_companion(tg.asarray([1.0, -2.0, 5.0, -1.0]))

    Raises ValueError when a's last axis is empty.
    """
    (t,) = promote_args_inexact("fiedler_companion", a)
    t = t.reshape(1) if t.ndim == 0 else t
    if t.shape[-1] == 0:
        raise ValueError(f"fiedler_companion: a's last axis must not be empty, got shape {t.shape}")
    n = t.shape[-1] - 1
    if n == 0:
        return tnp.zeros(t.shape[:-1] + (0, 0), t.dtype)
    t = t / t[..., :1]
    if n == 1:
        return -t[..., 1:, None]
    i, j = _grid(n, n)
    even, odd = i % 2 == 0, i % 2 == 1
    zero, one = tnp.zeros((), t.dtype), tnp.ones((), t.dtype)
    top = -t[..., 1, None, None]                               # c[0, 0]
    above = -_gather(t, np.minimum(i + 2, n) + 0 * j)          # c[i, i + 1] for even i
    below = -_gather(t, np.minimum(i + 1, n) + 0 * j)          # c[i, i - 1] for even i >= 2
    # the layout, row by row (JAX's): each condition picks one entry of the pentadiagonal band
    out = tnp.where((i == 0) & (j == 0), top, zero)
    out = tnp.where((i == 1) & (j == 0), one, out)
    out = tnp.where((j == i + 1) & even, above, out)
    out = tnp.where((j == i + 2) & even, one, out)
    out = tnp.where((j == i - 1) & even & (i >= 2), below, out)
    return tnp.where((j == i - 2) & odd & (i >= 3), one, out)


def convolution_matrix(a: ArrayLike, n: int, mode: str = "full") -> Tensor:
    """The Toeplitz matrix A with A @ v == tnp.convolve(a, v, mode) for v of length n
    (`jax.scipy.linalg.convolution_matrix`). a (..., m) gives (..., k, n) with k = m + n - 1 ('full'), max(m, n)
    ('same') or max(m, n) - min(m, n) + 1 ('valid').

    >>> convolution_matrix(tg.asarray([1.0, 2.0]), 3)      # [[1, 0, 0], [2, 1, 0], [0, 2, 1], [0, 0, 2]]

    Raises ValueError for a scalar or empty a, n < 1, or an unknown mode.
    """
    t = to_tensor(a)
    if t.ndim == 0:
        raise ValueError("convolution_matrix: a must be at least 1-dimensional, got a scalar")
    m = t.shape[-1]
    if m < 1:
        raise ValueError(f"convolution_matrix: a must have at least one entry along its last axis, got shape "
                         f"{t.shape}")
    n = int(n)
    if n < 1:
        raise ValueError(f"convolution_matrix: n must be a positive integer, got n={n}")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"convolution_matrix: mode must be 'full', 'valid' or 'same', got {mode!r}")
    pad = [(0, 0)] * (t.ndim - 1) + [(0, n - 1)]
    az, raz = tnp.pad(t, pad), tnp.pad(tnp.flip(t, axis=-1), pad)
    length = m + n - 1
    if mode == "same":
        trim = min(n, m) - 1
        tb, te = trim // 2, trim - trim // 2
    elif mode == "valid":
        tb = te = min(n, m) - 1
    else:
        tb = te = 0
    return toeplitz(az[..., tb:length - te], raz[..., length - n - tb:length - tb])


def block_diag(*arrs: ArrayLike) -> Tensor:
    """The block-diagonal matrix with the given arrays (each at most 2-d; scalars and vectors as rows) along its
    diagonal, zeros elsewhere, in their promoted dtype (`jax.scipy.linalg.block_diag`). No arrays: shape (1, 0).

    >>> block_diag(tg.asarray([[1.0, 2.0]]), tg.asarray(3.0))     # [[1, 2, 0], [0, 0, 3]]

    Raises ValueError for an argument of more than 2 dimensions.
    """
    ts = [to_tensor(a) for a in arrs] if arrs else [tnp.zeros((1, 0))]
    for k, t in enumerate(ts):
        if t.ndim > 2:
            raise ValueError(f"block_diag: every argument must have at most 2 dimensions, got shape {t.shape} at "
                             f"argument {k}")
    dtype = tnp.result_type(*ts)
    mats = [t.reshape((1,) * (2 - t.ndim) + t.shape).astype(dtype) for t in ts]
    total = sum(t.shape[1] for t in mats)
    rows, col = [], 0
    for t in mats:
        rows.append(tnp.pad(t, [(0, 0), (col, total - col - t.shape[1])]))
        col += t.shape[1]
    return tnp.concatenate(rows, axis=0)


# ---- constants of a static size, worked out on the host ----
def _size(name: str, n: int) -> int:
    try:
        n = int(n)
    except TypeError as e:
        raise TypeError(f"{name}: n must be a Python int (a static size), got {type(n).__name__}") from e
    if n < 0:
        raise ValueError(f"{name}: n must be non-negative, got n={n}")
    return n


def _default_float() -> Any:
    return to_dtype(float)


def hilbert(n: int) -> Tensor:
    """The n x n Hilbert matrix H[i, j] = 1 / (i + j + 1) in the default float type (`jax.scipy.linalg.hilbert`).

    >>> hilbert(3)          # [[1, 1/2, 1/3], [1/2, 1/3, 1/4], [1/3, 1/4, 1/5]]
    """
    i, j = _grid(_size("hilbert", n), n)
    return tnp.asarray(1.0 / (i + j + 1.0), dtype=_default_float())


def invhilbert(n: int) -> Tensor:
    """The inverse of the n x n Hilbert matrix, from its closed form in binomial coefficients
    (`jax.scipy.linalg.invhilbert`), worked out in exact integers and rounded once to the default float type (its
    entries grow fast: they pass float32's exact integers at n = 5 and its range at n = 14; scipy's `exact=True`
    is not offered, as in JAX).

    >>> invhilbert(2)       # [[4, -6], [-6, 12]]
    """
    n = _size("invhilbert", n)
    out = [[(-1) ** (i + j) * (i + j + 1) * math.comb(n + i, n - j - 1) * math.comb(n + j, n - i - 1)
            * math.comb(i + j, i) ** 2 for j in range(n)] for i in range(n)]
    return tnp.asarray(np.array(out, dtype=np.float64).reshape(n, n), dtype=_default_float())


def _pascal_lower(n: int, inverse: bool) -> list[list[int]]:
    return [[(-1) ** (i - j) * math.comb(i, j) if inverse else math.comb(i, j) for j in range(n)] for i in range(n)]


_KINDS = ("symmetric", "lower", "upper")


def _pascal_kind(name: str, kind: str | None) -> str:
    kind = "symmetric" if kind is None else kind
    if kind not in _KINDS:
        raise ValueError(f"{name}: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    return kind


def _pascal_matrix(n: int, kind: str, inverse: bool) -> np.ndarray:
    low = np.array(_pascal_lower(n, inverse), dtype=object).reshape(n, n)
    if kind == "lower":
        out = low
    elif kind == "upper":
        out = low.T
    else:   # P = L L^T; its inverse is L^-T L^-1
        out = low.T.dot(low) if inverse else low.dot(low.T)
    return np.array(out, dtype=np.float64).reshape(n, n)


def pascal(n: int, kind: str | None = None) -> Tensor:
    """The n x n Pascal matrix (`jax.scipy.linalg.pascal`): kind 'symmetric' (the default, P[i, j] = C(i + j, i)),
    'lower' (C(i, j)) or 'upper' (its transpose). float32, as JAX's, the binomials computed exactly and rounded once.

    >>> pascal(3)           # [[1, 1, 1], [1, 2, 3], [1, 3, 6]]

    Raises ValueError for an unknown kind.
    """
    kind = _pascal_kind("pascal", kind)
    return tnp.asarray(_pascal_matrix(_size("pascal", n), kind, False), dtype="float32")


def invpascal(n: int, kind: str | None = None) -> Tensor:
    """The inverse of `pascal(n, kind)` (`jax.scipy.linalg.invpascal`) in the default float type: for the lower
    kind (-1)^(i - j) C(i, j), the upper its transpose, the symmetric L^-T L^-1, worked out in exact integers.

    >>> invpascal(3)        # [[3, -3, 1], [-3, 5, -2], [1, -2, 1]]

    Raises ValueError for an unknown kind.
    """
    kind = _pascal_kind("invpascal", kind)
    return tnp.asarray(_pascal_matrix(_size("invpascal", n), kind, True), dtype=_default_float())


def helmert(n: int, full: bool = False) -> Tensor:
    """The Helmert matrix of order n (`jax.scipy.linalg.helmert`): for k = 1 .. n - 1, row k - 1 is
    (1, ..., 1, -k, 0, ..., 0) / sqrt(k (k + 1)) (k ones), orthonormal contrasts; (n - 1, n), or with `full=True`
    (n, n) with a first row of 1 / sqrt(n). In the default float type.

    >>> helmert(3, full=True) @ helmert(3, full=True).T     # the identity

    Raises ValueError for n < 1.
    """
    n = _size("helmert", n)
    if n < 1:
        raise ValueError(f"helmert: n must be a positive integer, got n={n}")
    i, j = _grid(n - 1, n)
    k = i + 1.0
    h = np.where(j <= i, 1.0, np.where(j == i + 1, -k, 0.0)) / np.sqrt(k * (k + 1.0))
    if full:
        h = np.concatenate([np.full((1, n), 1.0 / np.sqrt(n)), h], axis=0)
    return tnp.asarray(h, dtype=_default_float())


def hadamard(n: int, dtype: Any = int) -> Tensor:
    """The n x n Hadamard matrix of Sylvester's construction, H H^T = n I (`jax.scipy.linalg.hadamard`); n a
    positive power of 2; int32 by default (JAX's int).

    >>> hadamard(2)         # [[1, 1], [1, -1]]

    Raises ValueError when n is not a positive power of 2.
    """
    n = _size("hadamard", n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"hadamard: n must be a positive power of 2, got n={n}")
    h = np.ones((1, 1), np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return tnp.asarray(h, dtype=to_dtype(dtype))


def dft(n: int, scale: str | None = None, *, dtype: Any = None) -> Tensor:
    """The n x n discrete Fourier transform matrix W[i, j] = exp(-2 pi i j sqrt(-1) / n), so W @ x == fft(x)
    (`jax.scipy.linalg.dft`); `scale` None (unscaled), 'sqrtn' (1 / sqrt(n): unitary) or 'n' (1 / n). In the default
    complex type or `dtype` (a complex one). The angles are reduced exactly (i j mod n) before the exponential.

    >>> dft(2)              # [[1, 1], [1, -1]]

    Raises ValueError for an unknown scale or a dtype that is not complex.
    """
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ValueError(f"dft: scale must be None, 'sqrtn' or 'n', got {scale!r}")
    d = to_dtype(complex if dtype is None else dtype)
    if not d.is_complex:
        raise ValueError(f"dft: dtype must be a complex floating-point type, got {d.name}")
    n = _size("dft", n)
    i, j = _grid(n, n)
    w = np.exp(-2j * np.pi * ((i * j) % max(n, 1)) / max(n, 1))
    w = w / np.sqrt(n) if scale == "sqrtn" else w / n if scale == "n" else w
    return tnp.asarray(w, dtype=d)
