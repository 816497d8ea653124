"""`tgfx.numpy.fft`: numpy's discrete Fourier transforms, as tgfx programs (no numpy on the host).

A transform along one axis works on the (re, im) parts as two real Tensors with that axis last:

- a length that is a product of small factors is a mixed-radix Cooley-Tukey: the axis of n = r * m becomes
  (r, m); a DFT of size r along the r axis is one real matmul ([re; im] times the 2r x 2r block [[c, -s], [s, c]]
  of cos and sin tables); the twiddles exp(-2 pi i k1 n2 / n) multiply; the m axis is transformed the same way
  (recursively); a transpose of the two axes gives the output order. The radices are at most 16, the smallest
  outermost, so n = 1024 is three matmul stages (4, 16, 16);
- a length up to 64 with no such factor (a prime) is a direct DFT (one matmul pair);
- a longer length with a large prime factor is Bluestein's chirp z-transform: a convolution of the chirped input
  with the chirp, done with power-of-two transforms of length m >= 2n - 1.

Every table (cos / sin of 2 pi (j k mod n) / n, the chirp's angle pi (j^2 mod 2n) / n) is computed on the host in
float64 from the integer angle and rounded once: a constant the trace makes itself (so a traced function captures
no buffer), uploaded once per trace instead of recomputed by a kernel per call, or per step of a loop.
Gradients come from these ops: the adjoint of a DFT is the conjugate DFT, which reverse mode builds from the
transposed matmuls. `rfft` of an even length n is one complex transform of length n / 2 of the samples paired
(even + i odd) and a post-processing pass; `irfft` to an even length the reverse (the imaginary parts of the DC and
Nyquist terms are ignored, as numpy's); odd lengths transform the real input as complex (the Hermitian extension
for `irfft`).

Results are complex64 (complex128 for float64 input in x64 mode), numpy's `norm` ("backward", "ortho",
"forward") and `n` / `s` / `axis` / `axes` arguments as numpy's.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tgfx.dtypes import DType, dtypes, to_complex
from tgfx.function import function
from tgfx.numpy import _movement as mv
from tgfx.numpy._complex import pairs
from tgfx.numpy._creation import arange, zeros
from tgfx.numpy._linalg import matmul
from tgfx.tensor import ArrayLike, Tensor, normalize_axes, normalize_axis, to_tensor

Parts = tuple[Tensor, Tensor]
MAX_RADIX = 16   # the largest DFT done as one matmul stage of a mixed-radix transform
MAX_DIRECT = 64  # lengths up to this with no factor <= MAX_RADIX are one direct DFT; longer ones Bluestein


# ---- tables, computed on the host once per trace ----
def _cos_sin_host(k: np.ndarray, period: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of 2 pi k / period in float64, the angle reduced in integers (exact), quarter turns exact values
    (cos(pi/2) is 6e-17, not 0: a 4-point transform of ones would not be exactly [4, 0, 0, 0], as numpy's is)."""
    k = np.asarray(k, np.int64) % period
    theta = k * (2 * math.pi / period)
    c, s = np.cos(theta), np.sin(theta)
    quarter = (k * 4) % period == 0
    q = (k * 4) // period
    c = np.where(quarter, np.select([q == 0, q == 2], [1.0, -1.0], 0.0), c)
    s = np.where(quarter, np.select([q == 1, q == 3], [1.0, -1.0], 0.0), s)
    return c, s


def _table(a: np.ndarray, real: DType) -> Tensor:
    """A host table as a constant of the trace (uploaded once: a jitted function's, or a cached body's, constant):
    computed in float64 and rounded once, where cos and sin computed in the graph in float32 were off by an ulp, and
    each call (each step of a loop) ran a kernel per table."""
    return to_tensor(np.ascontiguousarray(a, dtype=real.np))


def _cos_sin(k: np.ndarray, period: int, real: DType) -> Parts:
    c, s = _cos_sin_host(k, period)
    return _table(c, real), _table(s, real)


def _dft_block(n: int, inverse: bool, real: DType) -> Tensor:
    """The n x n DFT matrix exp(-+2 pi i j k / n) as the real 2n x 2n block [[c, s], [-s, c]]: [re, im] @ it is
    [re c - im s, re s + im c], the product's real and imaginary parts from one matmul."""
    j = np.arange(n, dtype=np.int64)
    c, s = _cos_sin_host(j[:, None] * j[None, :], n)
    s = s if inverse else -s
    return _table(np.block([[c, s], [-s, c]]), real)


def _twiddles(r: int, m: int, inverse: bool, real: DType) -> Parts:
    """exp(-+2 pi i k1 n2 / (r m)) for k1 < r, n2 < m: an (r, m) table of each part."""
    c, s = _cos_sin_host(np.arange(r, dtype=np.int64)[:, None] * np.arange(m, dtype=np.int64)[None, :], r * m)
    return _table(c, real), _table(s if inverse else -s, real)


def _cmul(a: Parts, b: Parts) -> Parts:
    return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]


# ---- one axis (the last), unnormalised ----
def _radix(n: int) -> int | None:
    """The radix of the outermost stage: n itself up to MAX_RADIX; else the smallest of n's factors taken greedily
    (largest first, each <= MAX_RADIX), so the outer stages' matmuls run along long trailing axes and the innermost
    DFT is the largest (1024 is 4, 16, 16). None if n has no factor <= MAX_RADIX."""
    if n <= MAX_RADIX:
        return n
    factors, rest = [], n
    while (r := next((r for r in range(min(rest, MAX_RADIX), 1, -1) if rest % r == 0), None)) is not None:
        factors.append(r)
        rest //= r
    return min(factors, default=None)


def _transform(x: Parts, inverse: bool) -> Parts:
    """The DFT (inverse: without the 1/n) of the last axis of the complex value with parts x."""
    n = x[0].shape[-1]
    if n == 1:
        return x
    r = _radix(n)
    if r == n or (r is None and n <= MAX_DIRECT):
        return _direct(x, inverse)
    if r is None:
        return _bluestein(x, inverse)
    return _cooley_tukey(x, r, inverse)


# eagerly, a transform's traced body is kept per signature: a call replays its schedule instead of building its
# stages and tables as an eager graph again (rfft of 64 x 4096: 6.2 ms a call, 1.1 under jit)
_transform_traced = function(_transform, cache=True)


def _direct(x: Parts, inverse: bool) -> Parts:
    """x @ W as one real matmul: [re, im] (stored, with whatever elementwise work came before) @ the block matrix."""
    n = x[0].shape[-1]
    y = matmul(mv.concatenate(list(x), -1).contiguous(), _dft_block(n, inverse, x[0].dtype)).contiguous()
    return y[..., :n], y[..., n:]


def _cooley_tukey(x: Parts, r: int, inverse: bool) -> Parts:
    """n = r m: input index r-major (n1 m + n2), output index k1 + r k2. The size-r DFT along the r axis is one
    matmul, the block matrix's transpose @ [re; im] stacked along that axis."""
    lead, n = x[0].shape[:-1], x[0].shape[-1]
    m = n // r
    re, im = (t.reshape(*lead, r, m) for t in x)
    y = matmul(mv.swapaxes(_dft_block(r, inverse, re.dtype), 0, 1), mv.concatenate([re, im], -2).contiguous())
    y = y.contiguous()
    re, im = _cmul((y[..., :r, :], y[..., r:, :]), _twiddles(r, m, inverse, re.dtype))
    re, im = _transform((re, im), inverse)   # the m axis: the outputs of a stored matmul, read transposed next
    return tuple(mv.swapaxes(t, -1, -2).reshape(*lead, n) for t in (re, im))


# ---- one leading axis of a (n, columns) value: every stage a matmul along contiguous rows ----
def _transform_cols(x: Parts, inverse: bool) -> Parts:
    """The DFT (inverse: without the 1/n) of axis 0 of the (n, c) parts x, each column a signal: an axis of a
    multi-dimensional transform other than the last (fft2's columns) is transformed where it lies, the other axes
    flattened into the columns, instead of being moved last and back (a transposed read and write per stage)."""
    n = x[0].shape[0]
    if n == 1:
        return x
    r = _radix(n)
    if r == n or (r is None and n <= MAX_DIRECT):
        y = matmul(mv.swapaxes(_dft_block(n, inverse, x[0].dtype), 0, 1), mv.concatenate(list(x), 0).contiguous())
        y = y.contiguous()
        return y[:n], y[n:]
    if r is None:   # Bluestein, along rows
        y = _transform(tuple(t.T for t in x), inverse)
        return tuple(t.T for t in y)
    return _stockham(x, r, inverse)


def _stockham(x: Parts, r: int, inverse: bool) -> Parts:
    """n = r m along axis 0 of (n, c): the size-r DFT of the rows n1 m + n2 (n1 < r) is one matmul of the block
    matrix with [re; im] as (2r, m c); the twiddles multiply; the (r, m, c) result is swapped to (m, r c), whose
    axis 0 is transformed the same way, its output row k2 holding outputs k1 + r k2 in order (Stockham's
    self-sorting order: no transpose at the end)."""
    n, c = x[0].shape
    m = n // r
    re, im = (t.reshape(r, m * c) for t in x)
    y = matmul(mv.swapaxes(_dft_block(r, inverse, re.dtype), 0, 1), mv.concatenate([re, im], 0).contiguous())
    y = y.contiguous()
    tr, ti = _twiddles(r, m, inverse, re.dtype)
    re, im = _cmul((y[:r].reshape(r, m, c), y[r:].reshape(r, m, c)), (tr.reshape(r, m, 1), ti.reshape(r, m, 1)))
    re, im = _transform_cols(tuple(mv.swapaxes(t, 0, 1).reshape(m, r * c) for t in (re, im)), inverse)
    return re.reshape(n, c), im.reshape(n, c)


_transform_cols_traced = function(_transform_cols, cache=True)


def _bluestein(x: Parts, inverse: bool) -> Parts:
    """X_k = c_k sum_j (x_j c_j) conj(c_{k-j}), c_j = exp(-+i pi j^2 / n): a circular convolution of length
    m >= 2n - 1 (a power of two) done with power-of-two transforms."""
    lead, n = x[0].shape[:-1], x[0].shape[-1]
    real = x[0].dtype
    m = 1 << (2 * n - 2).bit_length()
    j = np.arange(n, dtype=np.int64)
    c, s = _cos_sin(j * j, 2 * n, real)
    chirp = (c, s if inverse else -s)
    a = _cmul(x, chirp)
    a = tuple(mv.pad(t, [(0, 0)] * len(lead) + [(0, m - n)]) for t in a)
    # conj(c) at 0 .. n-1 and, wrapped around, at m-n+1 .. m-1
    gap = zeros(m - 2 * n + 1, dtype=real)
    b = tuple(mv.concatenate([t, gap, mv.flip(t[1:], 0)]) for t in (chirp[0], -chirp[1]))
    fa, fb = _transform(a, False), _transform(b, False)
    conv = _transform(_cmul(fa, fb), True)
    conv = tuple(t[..., :n] * (1 / m) for t in conv)
    return _cmul(conv, chirp)


# ---- real input and output of even length: one complex transform of half the length ----
def _rfft_even(x: Tensor) -> Parts:
    """The n // 2 + 1 first terms of the DFT of real x (last axis, n even): z = x[0::2] + i x[1::2] transformed at
    length h = n / 2, then X[k] = E[k] + w^k O[k] for k = 0 .. h, w = exp(-2 pi i / n), with the transforms of the
    even and odd samples E[k] = (Z[k] + conj Z[h - k]) / 2 and O[k] = (Z[k] - conj Z[h - k]) / 2i (Z[h] = Z[0]):
    half the work of transforming x as complex, and no imaginary zeros carried through every stage."""
    lead, n = x.shape[:-1], x.shape[-1]
    h = n // 2
    z = x.reshape(*lead, h, 2)
    zr, zi = _transform_traced((z[..., 0], z[..., 1]), False)
    fr, fi = (mv.concatenate([t, t[..., :1]], -1) for t in (zr, zi))   # Z[k], k = 0 .. h
    rr, ri = mv.flip(fr, -1), mv.flip(fi, -1)                          # Z[h - k]
    er, ei = (fr + rr) * 0.5, (fi - ri) * 0.5
    o_r, o_i = (fi + ri) * 0.5, (rr - fr) * 0.5
    c, s = _cos_sin(np.arange(h + 1), n, x.dtype)
    return er + c * o_r + s * o_i, ei + c * o_i - s * o_r


def _irfft_even(xr: Tensor, xi: Tensor, n: int) -> Tensor:
    """n real outputs (n even) of the unnormalised inverse DFT of the Hermitian X whose terms 0 .. n / 2 are (xr, xi):
    from E[k] = X[k] + conj X[h - k] and O[k] = (X[k] - conj X[h - k]) w^-k (twice the transforms of the even and
    odd outputs), z = inverse transform of E + i O at length h = n / 2 is x[0::2] + i x[1::2]. The imaginary parts
    of X[0] and X[h] are ignored, as numpy's."""
    lead, h = xr.shape[:-1], n // 2
    xi = xi * _table(np.r_[0.0, np.ones(h - 1), 0.0], xi.dtype)
    rr, ri = mv.flip(xr, -1)[..., :h], mv.flip(xi, -1)[..., :h]         # X[h - k], k = 0 .. h - 1
    fr, fi = xr[..., :h], xi[..., :h]
    dr, di = fr - rr, fi + ri
    c, s = _cos_sin(np.arange(h), n, xr.dtype)
    br, bi = dr * c - di * s, dr * s + di * c
    zr, zi = _transform_traced((fr + rr - bi, fi - ri + br), True)
    return mv.stack([zr, zi], -1).reshape(*lead, n)


# ---- the public functions ----
def _norm_scale(norm: str | None, n: int, inverse: bool) -> float:
    if norm is None or norm == "backward":
        return 1 / n if inverse else 1.0
    if norm == "ortho":
        return 1 / math.sqrt(n)
    if norm == "forward":
        return 1.0 if inverse else 1 / n
    raise ValueError(f'fft: invalid norm {norm!r}; use "backward" (the default), "ortho" or "forward"')


def _complex_input(a: ArrayLike) -> Tensor:
    a = to_tensor(a)
    return a.astype(to_complex(a.dtype)) if not a.dtype.is_complex else a


def _parts(a: Tensor) -> Parts:
    p = pairs(a)
    return p[..., 0], p[..., 1]


def _pack(x: Parts) -> Tensor:
    from tgfx.numpy._complex import from_parts
    return from_parts(*x)


def _resize(t: Tensor, n: int) -> Tensor:
    """The last axis cropped or zero-padded to n, as numpy's `n`."""
    have = t.shape[-1]
    if n < have:
        return t[..., :n]
    if n > have:
        return mv.pad(t, [(0, 0)] * (t.ndim - 1) + [(0, n - have)])
    return t


def _check_n(n: int, who: str) -> int:
    if int(n) < 1:
        raise ValueError(f"{who}: invalid number of data points ({n}) specified; n must be at least 1")
    return int(n)


def _along(a: Tensor, axis: int, who: str) -> int:
    if a.ndim == 0:
        raise ValueError(f"{who}: the input is 0-d; a transform needs an axis")
    return normalize_axis(axis, a.ndim, who)


def _c2c(a: ArrayLike, n: int | None, axis: int, norm: str | None, inverse: bool, who: str) -> Tensor:
    a = _complex_input(a)
    ax = _along(a, axis, who)
    n = _check_n(a.shape[ax] if n is None else n, who)
    if ax != a.ndim - 1 and math.prod(a.shape) > a.shape[ax]:   # transformed where it lies: the rest are columns
        a = mv.moveaxis(a, ax, 0)
        rest = a.shape[1:]
        x = tuple(mv.moveaxis(_resize(mv.moveaxis(t, 0, -1), n), -1, 0).reshape(n, -1) for t in _parts(a))
        out = tuple(t.reshape(n, *rest) for t in _transform_cols_traced(x, inverse))
        return mv.moveaxis(_pack(_scaled(out, norm, n, inverse)), 0, ax)
    a = mv.moveaxis(a, ax, -1)
    x = tuple(_resize(t, n) for t in _parts(a))
    out = _transform_traced(x, inverse)
    return mv.moveaxis(_pack(_scaled(out, norm, n, inverse)), -1, ax)


def _scaled(x: Parts, norm: str | None, n: int, inverse: bool) -> Parts:
    scale = _norm_scale(norm, n, inverse)
    return tuple(t * scale for t in x) if scale != 1.0 else x


def fft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The one-dimensional discrete Fourier transform along `axis`, as numpy.fft.fft: `n` crops or zero-pads that
    axis first; `norm` is "backward" (the default: no scaling), "ortho" (1/sqrt(n)) or "forward" (1/n).

    >>> tnp.fft.fft(tnp.asarray([1.0, 0.0, 0.0, 0.0]))   # [1, 1, 1, 1] as complex64
    """
    return _c2c(a, n, axis, norm, False, "fft")


def ifft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of `fft` (1/n by default), as numpy.fft.ifft."""
    return _c2c(a, n, axis, norm, True, "ifft")


def rfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The transform of real input: its n // 2 + 1 non-negative frequency terms, as numpy.fft.rfft."""
    return _rfft(a, n, axis, norm, "rfft")


def _rfft(a: ArrayLike, n: int | None, axis: int, norm: str | None, who: str, stored: bool = False) -> Tensor:
    """`rfft`; `stored`: an even length's real and imaginary parts are each stored whole by a kernel of their own,
    for `rfftn`'s next transform to read. Fused into that transform's first stage, the post-processing (`_rfft_even`'s
    flipped reads) was computed through the stage's (r, m c) view of its operand: a scalar loop of masked reads
    (rfft2 on one core, 64 x 64: 20 -> 17 us; 256 x 256: 366 -> 314). A lone rfft keeps its one kernel, without the
    pass that pairs stored parts."""
    a = to_tensor(a)
    if a.dtype.is_complex:
        raise TypeError(f"{who}: the input must be real, got {a.dtype.name}; use fft for complex input")
    ax = _along(a, axis, who)
    n = _check_n(a.shape[ax] if n is None else n, who)
    if n % 2:
        out = fft(a, n, ax, norm)
        return mv.moveaxis(mv.moveaxis(out, ax, -1)[..., :n // 2 + 1], -1, ax)
    x = _resize(mv.moveaxis(a.astype(to_complex(a.dtype).real), ax, -1), n)
    parts = _scaled(_rfft_even(x), norm, n, False)
    return mv.moveaxis(_pack(tuple(t.contiguous() for t in parts) if stored else parts), -1, ax)


def irfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of `rfft`: n real outputs (default 2 (m - 1) for m inputs) from the non-negative frequency terms,
    as numpy.fft.irfft (the imaginary parts of the zero and Nyquist terms are ignored)."""
    a = _complex_input(a)
    ax = _along(a, axis, "irfft")
    a = mv.moveaxis(a, ax, -1)
    n = _check_n(2 * (a.shape[-1] - 1) if n is None else n, "irfft")
    half = n // 2 + 1
    re, im = (_resize(t, half) for t in _parts(a))
    if n % 2 == 0:
        out = _irfft_even(re, im, n)
    else:   # the Hermitian extension: X[n - k] = conj(X[k]) for 0 < k < n - n // 2
        tail = n - half
        if tail:
            re = mv.concatenate([re, mv.flip(re[..., 1:tail + 1], -1)], axis=-1)
            im = mv.concatenate([im, -mv.flip(im[..., 1:tail + 1], -1)], axis=-1)
        out, _ = _transform_traced((re, im), True)
    scale = _norm_scale(norm, n, True)
    out = out * scale if scale != 1.0 else out
    return mv.moveaxis(out, -1, ax)


_SWAPPED_NORM = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _swapped(norm: str | None) -> str:
    if norm not in _SWAPPED_NORM:
        _norm_scale(norm, 1, False)   # raises the error naming the valid norms
    return _SWAPPED_NORM[norm]


def hfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The transform of a Hermitian-symmetric signal given by its first half: n real outputs (default 2 (m - 1)), as
    numpy.fft.hfft (`irfft` of the conjugate, with the normalisation's direction swapped)."""
    from tgfx.numpy._complex import conj
    return irfft(conj(_complex_input(a)), n, axis, _swapped(norm))


def ihfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of `hfft`: the n // 2 + 1 non-negative frequency terms of a real signal, as numpy.fft.ihfft
    (the conjugate of `rfft`, with the normalisation's direction swapped)."""
    from tgfx.numpy._complex import conj
    return conj(rfft(a, n, axis, _swapped(norm)))


def _axes_and_sizes(a: Tensor, s: Sequence[int] | None, axes: Sequence[int] | None, who: str,
                    ) -> tuple[list[int], list[int | None]]:
    """numpy's rules: `axes` defaults to the last len(s) axes, or to all; `s` to the input's sizes."""
    if axes is None:
        axes = list(range(a.ndim - len(s), a.ndim)) if s is not None else list(range(a.ndim))
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{who}: s has {len(s)} sizes but there are {len(axes)} axes; give one size per axis")
    axes = [normalize_axis(x, a.ndim, who) for x in axes]
    return axes, list(s) if s is not None else [None] * len(axes)


def fftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Tensor:
    """The n-dimensional transform over `axes` (all by default), `s` the sizes, as numpy.fft.fftn."""
    return _c2cn(a, s, axes, norm, fft, "fftn")


def ifftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """The inverse of `fftn`, as numpy.fft.ifftn."""
    return _c2cn(a, s, axes, norm, ifft, "ifftn")


def _c2cn(a: ArrayLike, s: Sequence[int] | None, axes: Sequence[int] | None, norm: str | None,
          one: Callable[..., Tensor], who: str) -> Tensor:
    """`one` (fft or ifft) over each of `axes`, the last first."""
    a = _complex_input(a)
    axes, sizes = _axes_and_sizes(a, s, axes, who)
    for ax, n in zip(axes[::-1], sizes[::-1], strict=True):
        a = one(a, n, ax, norm)
    return a


def rfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """The n-dimensional transform of real input: `rfft` over the last axis, `fft` over the others."""
    a = to_tensor(a)
    axes, sizes = _axes_and_sizes(a, s, axes, "rfftn")
    out = _rfft(a, sizes[-1], axes[-1], norm, "rfftn", stored=len(axes) > 1)
    for ax, n in zip(axes[-2::-1], sizes[-2::-1], strict=True):
        out = fft(out, n, ax, norm)
    return out


def irfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Tensor:
    """The inverse of `rfftn`: `ifft` over all but the last axis, `irfft` over it (its size s[-1], default
    2 (m - 1))."""
    a = _complex_input(a)
    axes, sizes = _axes_and_sizes(a, s, axes, "irfftn")
    for ax, n in zip(axes[:-1], sizes[:-1], strict=True):
        a = ifft(a, n, ax, norm)
    return irfft(a, sizes[-1], axes[-1], norm)


def fft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None) -> Tensor:
    return fftn(a, s, axes, norm)


def ifft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Tensor:
    return ifftn(a, s, axes, norm)


def rfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Tensor:
    return rfftn(a, s, axes, norm)


def irfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Tensor:
    return irfftn(a, s, axes, norm)


def fftfreq(n: int, d: float = 1.0, *, dtype: DType | None = None, device: str | None = None) -> Tensor:
    """The sample frequencies of an n-point transform: [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d n), in the
    default float type (as jnp.fft.fftfreq)."""
    n = _check_n(n, "fftfreq")
    k = arange(n, dtype=dtypes.int32)
    k = (k <= (n - 1) // 2).where(k, k - n)
    out = k.astype(dtype or dtypes.default_float) * (1 / (d * n))
    return out if device is None else out.to(device)


def rfftfreq(n: int, d: float = 1.0, *, dtype: DType | None = None, device: str | None = None) -> Tensor:
    """The sample frequencies of `rfft`'s n // 2 + 1 outputs: [0, 1, ..., n // 2] / (d n)."""
    n = _check_n(n, "rfftfreq")
    out = arange(n // 2 + 1, dtype=dtypes.int32).astype(dtype or dtypes.default_float) * (1 / (d * n))
    return out if device is None else out.to(device)


def _shift(x: ArrayLike, axes: int | Sequence[int] | None, sign: int) -> Tensor:
    x = to_tensor(x)
    axes = list(range(x.ndim)) if axes is None else list(normalize_axes(axes, x.ndim, "fftshift"))
    return mv.roll(x, [sign * (x.shape[a] // 2) for a in axes], axes) if axes else x


def fftshift(x: ArrayLike, axes: int | Sequence[int] | None = None) -> Tensor:
    """The zero-frequency term moved to the centre (a roll by n // 2 along each axis), as numpy.fft.fftshift."""
    return _shift(x, axes, 1)


def ifftshift(x: ArrayLike, axes: int | Sequence[int] | None = None) -> Tensor:
    """The inverse of `fftshift` (a roll by -(n // 2))."""
    return _shift(x, axes, -1)
