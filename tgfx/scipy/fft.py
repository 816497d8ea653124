"""`tgfx.scipy.fft`: the discrete cosine transform (`dct`, `dctn`) and its inverse (`idct`, `idctn`), as
`jax.scipy.fft` has them: type 2 only, with the "backward" (default) and "ortho" normalisations.

Each 1-d transform is one complex FFT of length N (`tgfx.numpy.fft`) between two fixed permutations of the axis and
a twiddle by e^(-i pi k / 2N) (Makhoul's algorithm, as JAX); the n-d ones apply it along each axis in turn. The
twiddles are constants worked out in float64 on the host. All of it traces under `jit` and `vmap` and is linear,
hence differentiable.

>>> from tgfx.scipy import fft
>>> y = fft.dct(tg.asarray([1.0, 2.0, 3.0]))                 # [12.0, -3.4641016, 0.0]
>>> fft.idct(y)                                              # [1.0, 2.0, 3.0]
>>> fft.dctn(img, norm="ortho")                              # the orthonormal 2-d DCT-II
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import DType, to_inexact
from tgfx.lax import complex as lax_complex
from tgfx.scipy._util import compute_dtype
from tgfx.tensor import ArrayLike, Tensor, normalize_axis, to_tensor


def _check(fn: str, x: ArrayLike, type: int, norm: str | None) -> Tensor:  # noqa: A002 - scipy's name
    t = to_tensor(x)
    if type != 2:
        raise NotImplementedError(f"{fn}: type={type!r} is not supported; only the DCT of type 2 is, as in "
                                  f"jax.scipy.fft")
    if norm not in (None, "backward", "ortho"):
        raise ValueError(f"{fn}: norm={norm!r} is not supported; use None (the same as 'backward') or 'ortho'")
    # the FFT runs in complex64 or complex128, so a 16-bit float comes out float32, as in JAX
    d = t.dtype if t.dtype.is_complex else compute_dtype(to_inexact(t.dtype))
    return t if t.dtype == d else t.astype(d)


def _resized(x: Tensor, n: int | None, axis: int, fn: str) -> Tensor:
    """x zero-padded or truncated to n along `axis`."""
    if n is None or n == x.shape[axis]:
        return x
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{fn}: the transform length n must be a positive integer, got {n!r}")
    if n < x.shape[axis]:
        return tnp.take(x, np.arange(n), axis=axis)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, n - x.shape[axis])
    return tnp.pad(x, widths)


def _interleave_order(n: int) -> np.ndarray:
    """The permutation v = x[order]: the even entries forwards, then the odd ones backwards."""
    return np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)[::-1]])


def _along(v: np.ndarray, axis: int, ndim: int, d: DType) -> Tensor:
    """The 1-d constant v shaped to broadcast along `axis` of an ndim-d array."""
    return to_tensor(v.astype(d.np)).reshape(tuple(-1 if a == axis else 1 for a in range(ndim)))


def _ortho_scale(n: int) -> np.ndarray:
    """The factors that make the DCT-II orthonormal: 1 / sqrt(4n) for k = 0, 1 / sqrt(2n) after."""
    s = np.full(n, 1 / math.sqrt(2 * n))
    s[0] = 1 / math.sqrt(4 * n)
    return s


def _dct_real(x: Tensor, axis: int, norm: str | None) -> Tensor:
    n = x.shape[axis]
    d = x.dtype
    spectrum = tnp.fft.fft(tnp.take(x, _interleave_order(n), axis=axis), axis=axis)
    # y[k] = 2 Re(V[k] e^(-i pi k / 2n)) = 2 (Re V cos + Im V sin)
    theta = np.pi * np.arange(n) / (2 * n)
    scale = 2 * (_ortho_scale(n) if norm == "ortho" else np.ones(n))
    re, im = tnp.real(spectrum), tnp.imag(spectrum)
    return re * _along(scale * np.cos(theta), axis, x.ndim, d) + im * _along(scale * np.sin(theta), axis, x.ndim, d)


def _idct_real(x: Tensor, axis: int, norm: str | None) -> Tensor:
    n = x.shape[axis]
    d = x.dtype
    # undo the normalisation and the twiddle: z[k] = c[k] y[k] e^(i pi k / 2n), then x = Re ifft(z), un-permuted
    if norm == "ortho":
        c = _ortho_scale(n) * (2 * n)
    else:
        c = np.ones(n)
        c[0] = 0.5
    theta = np.pi * np.arange(n) / (2 * n)
    z = lax_complex(x * _along(c * np.cos(theta), axis, x.ndim, d), x * _along(c * np.sin(theta), axis, x.ndim, d))
    v = tnp.real(tnp.fft.ifft(z, axis=axis))
    return tnp.take(v, np.argsort(_interleave_order(n)), axis=axis)


def _per_part(f: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """f applied to a complex x's real and imaginary parts separately (the transforms are real-linear)."""
    if x.dtype.is_complex:
        return lax_complex(f(tnp.real(x)), f(tnp.imag(x)))
    return f(x)


def dct(x: ArrayLike, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002 - scipy's name
        norm: str | None = None) -> Tensor:
    """The discrete cosine transform of type 2 along `axis` (scipy.fft.dct):
    y[k] = 2 sum_j x[j] cos(pi k (2j + 1) / 2N), times 1 / sqrt(4N) at k = 0 and 1 / sqrt(2N) elsewhere for
    norm="ortho". `n` zero-pads or truncates the axis first. Integers become the default float; a complex input
    is transformed part by part.

    >>> dct(tg.asarray([1.0, 2.0, 3.0]))                    # [12.0, -3.4641016, 0.0]
    >>> dct(tg.asarray([1.0, 2.0, 3.0]), norm="ortho")      # [3.4641016, -1.4142135, 0.0]
    """
    t = _check("dct", x, type, norm)
    if t.ndim == 0:
        raise ValueError("dct: x must have at least one axis, got a scalar")
    ax = normalize_axis(axis, t.ndim, "dct")
    t = _resized(t, n, ax, "dct")
    return _per_part(lambda p: _dct_real(p, ax, norm), t)


def idct(x: ArrayLike, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002 - scipy's name
         norm: str | None = None) -> Tensor:
    """The inverse of `dct` of type 2 (scipy.fft.idct, a DCT of type 3 scaled): idct(dct(x)) == x for both
    norms. `n` zero-pads or truncates the axis first.

    >>> idct(dct(tg.asarray([1.0, 2.0, 3.0])))              # [1.0, 2.0, 3.0]
    """
    t = _check("idct", x, type, norm)
    if t.ndim == 0:
        raise ValueError("idct: x must have at least one axis, got a scalar")
    ax = normalize_axis(axis, t.ndim, "idct")
    t = _resized(t, n, ax, "idct")
    return _per_part(lambda p: _idct_real(p, ax, norm), t)


def _axes_and_sizes(fn: str, t: Tensor, s: int | Sequence[int] | None,
                    axes: int | Sequence[int] | None) -> tuple[tuple[int, ...], list[int | None]]:
    """The axes an n-d transform runs along and the length of each (None: as it is), as scipy.fft.dctn reads s and
    axes: without axes, the last len(s) axes, or all of them."""
    sizes = None
    if s is not None:
        sizes = [operator.index(s)] if isinstance(s, (int, np.integer)) else [operator.index(v) for v in s]
        if len(sizes) > t.ndim:
            raise ValueError(f"{fn}: s must have at most x.ndim ({t.ndim}) entries, got s={s!r}")
    if axes is None:
        ax = tuple(range(t.ndim - len(sizes), t.ndim)) if sizes is not None else tuple(range(t.ndim))
    else:
        raw = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
        ax = tuple(normalize_axis(a, t.ndim, fn) for a in raw)
        if len(set(ax)) != len(ax):
            raise ValueError(f"{fn}: axes must not repeat an axis, got axes={axes!r}")
        if sizes is not None and len(sizes) != len(ax):
            raise ValueError(f"{fn}: s and axes must have the same length when both are given, got s={s!r} and "
                             f"axes={axes!r}")
    return ax, list(sizes) if sizes is not None else [None] * len(ax)


def dctn(x: ArrayLike, type: int = 2, s: int | Sequence[int] | None = None,  # noqa: A002 - scipy's name
         axes: int | Sequence[int] | None = None, norm: str | None = None) -> Tensor:
    """The n-d discrete cosine transform of type 2 (scipy.fft.dctn): `dct` along each of `axes` (all axes by
    default, or the last len(s)), each first zero-padded or truncated to its entry of `s`.

    >>> dctn(tnp.ones((2, 3)))                              # [[24, 0, 0], [0, 0, 0]]
    """
    return _nd("dctn", _dct_real, x, type, s, axes, norm)


def idctn(x: ArrayLike, type: int = 2, s: int | Sequence[int] | None = None,  # noqa: A002 - scipy's name
          axes: int | Sequence[int] | None = None, norm: str | None = None) -> Tensor:
    """The inverse of `dctn` (scipy.fft.idctn): `idct` along each of `axes`, sizes as `dctn`.

    >>> idctn(dctn(img, norm="ortho"), norm="ortho")        # img
    """
    return _nd("idctn", _idct_real, x, type, s, axes, norm)


def _nd(fn: str, one: Callable[[Tensor, int, str | None], Tensor], x: ArrayLike,
        type: int, s: int | Sequence[int] | None,  # noqa: A002 - scipy's name
        axes: int | Sequence[int] | None, norm: str | None) -> Tensor:
    """`one` (the real 1-d transform along an axis) along each of the axes, each resized first, as dctn and idctn."""
    t = _check(fn, x, type, norm)
    ax, sizes = _axes_and_sizes(fn, t, s, axes)
    for a, size in zip(ax, sizes, strict=True):
        t = _resized(t, size, a, fn)
    for a in ax:
        t = _per_part(lambda p, a=a: one(p, a, norm), t)
    return t

