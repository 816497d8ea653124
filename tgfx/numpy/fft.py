"""`tgfx.numpy.fft`: numpy's discrete Fourier transforms, as tgfx programs (no numpy on the host).

A transform along one axis works on the value as one real Tensor (B, n, 2, C): the transformed axis, its (re, im)
parts, the axes after it flattened into the C columns and those before it into the batch B (`_transform`). Along an
axis with others after it, the first stage reads a complex value's (re, im) pairs where they lie (every other float
along C) and the result is a view of the last stage's output; along the last axis, the axis before it is the columns:
the pairs are stored transposed into that layout (one transpose of rows of 2n floats), and the result is read back
transposed. `fftn` transforms the array's last axis last: its transposes are then the only copies. On that value:

- a length that is a product of small factors is a mixed-radix Stockham transform: for n = r m, the input rows
  n1 m + n2 (n1 < r), each stage is one kernel, a contraction over (n1, p) with, for each of the m sub-sequences n2,
  the real 2r x 2r block of the size-r DFT with the twiddles exp(-2 pi i k1 n2 / n) folded in (a constant table,
  so no pass of its own). Its output, stored (n2, k1, q, columns), is the input of the next stage as it lies (the m
  axis transformed the same way, with r times the columns), and the last stage's is the output in natural order
  (Stockham's self-sorting order: no transpose at the end). The radices (at most 16, or a prime up to 64 as a direct
  DFT) are chosen by a cost model of the target: a stage is a pass over memory plus 8 r flops an element
  (`_radices`);
- a longer length with a large prime factor is Bluestein's chirp z-transform: a convolution of the chirped input
  with the chirp, done with power-of-two transforms of length m >= 2n - 1.

Every table (cos / sin of 2 pi (j k mod n) / n, the chirp's angle pi (j^2 mod 2n) / n) is computed on the host in
float64 from the integer angle and rounded once: a constant the trace makes itself (so a traced function captures
no buffer), uploaded once per trace instead of recomputed by a kernel per call, or per step of a loop.
Gradients come from these ops: the adjoint of a DFT is the conjugate DFT, which reverse mode builds from the
transposed matmuls. `rfft` of an even length n is one complex transform of length n / 2 of the samples paired
(even + i odd) and a post-processing pass; `irfft` to an even length the reverse (the imaginary parts of the DC and
Nyquist terms are ignored, as numpy's); odd lengths transform the real input as complex (the Hermitian extension
for `irfft`). Over several axes (`rfftn`, `irfftn`) the other axes are transformed between the paired transform
and that pass (`irfftn`: after it), which then reads each term's partner at the negated frequency of every axis: one
pass whatever the number of axes, which writes the result (`irfftn`: which reads the input), built in pieces whose
reads are plain views (`_with_partners`).

Results are complex64 (complex128 for float64 input in x64 mode), numpy's `norm` ("backward", "ortho",
"forward") and `n` / `s` / `axis` / `axes` arguments as numpy's.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from tgfx.devices.target import host_target
from tgfx.dtypes import DType, dtypes, to_complex
from tgfx.function import function
from tgfx.ir.ops import Ops
from tgfx.numpy import _movement as mv
from tgfx.numpy._complex import from_pairs, pairs
from tgfx.numpy._creation import arange
from tgfx.tensor import ArrayLike, Tensor, normalize_axes, normalize_axis, to_tensor

MAX_RADIX = 16   # the largest composite radix of a stage
MAX_DIRECT = 64  # a prime factor up to this is one stage (a direct DFT); a larger one makes the length Bluestein's
# a stage's pass reads and writes 16 bytes a complex float32 element; its matmul does 8 r flops an element, in FMAs of
# a vector's lanes (2 lanes' flops) on about two pipes at half their peak (a 2r-deep contraction keeps no tile of
# accumulators long): a lane's FMA per ~4 bytes moved where a pass streams about a quarter of a cache line a cycle. So
# the arithmetic of a radix of lanes / STAGE_LANES_PER_RADIX costs about what the pass costs
STAGE_LANES_PER_RADIX = 4


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


def _table(a: np.ndarray, like: Tensor) -> Tensor:
    """A host table of `like`'s real dtype as a constant of the trace (uploaded once: a jitted function's, or a cached
    body's, constant) on `like`'s device, the value it combines with (on the default device, it failed every
    transform of a value on another: a GPU's, a second CPU's): computed in float64 and rounded once, where cos and sin
    computed in the graph in float32 were off by an ulp, and each call (each step of a loop) ran a kernel per table."""
    return Tensor(np.ascontiguousarray(a, dtype=like.dtype.np), device=like.uop.device)


def _cos_sin(k: np.ndarray, period: int, like: Tensor) -> tuple[Tensor, Tensor]:
    c, s = _cos_sin_host(k, period)
    return _table(c, like), _table(s, like)


def _stage_block(r: int, m: int, inverse: bool, like: Tensor) -> Tensor:
    """A Stockham stage's matrices: for each sub-sequence n2 < m, the size-r DFT with the twiddles of its outputs
    folded in, exp(-+2 pi i (n1 k1 m + k1 n2) / (r m)), as a real block from the inputs (n1, p) to the outputs
    (k1, q) (p, q the parts): (m, r, 2, r, 2) indexed [n2, k1, q, n1, p], [[c, -s], [s, c]] over (q, p)."""
    k1 = np.arange(r, dtype=np.int64)[:, None]
    c, s = _cos_sin_host(k1 * k1.T * m + np.arange(m, dtype=np.int64)[:, None, None] * k1, r * m)
    s = s if inverse else -s
    return _table(np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], 2), like)


# ---- the transform of axis 1 of a (B, n, 2, C) value, unnormalised ----
@functools.cache
def _radices(n: int, lanes: int) -> tuple[int, ...] | None:
    """The stages of a transform of length n, smallest radix first, or None where n has a prime factor over
    MAX_DIRECT (Bluestein's). Up to MAX_RADIX it is one stage (a direct DFT: one kernel, where the passes of more
    would cost more than their arithmetic saves on a short axis); beyond, the factorisation with the least cost, a
    stage costing its pass plus its arithmetic, r / (lanes / STAGE_LANES_PER_RADIX) passes' worth (with 16 lanes:
    256 is 4, 8, 8, not 16, 16, whose stages' matmuls were twice as long as their passes), fewer stages on a tie."""
    if n <= MAX_RADIX:
        return (n,)
    balance = max(lanes / STAGE_LANES_PER_RADIX, 1.0)
    best: dict[int, tuple[float, tuple[int, ...]] | None] = {1: (0.0, ())}

    def plan(k: int) -> tuple[float, tuple[int, ...]] | None:
        if k not in best:
            options = []
            for r in range(2, min(k, MAX_DIRECT) + 1):
                if k % r or (r > MAX_RADIX and any(r % d == 0 for d in range(2, r))) or (rest := plan(k // r)) is None:
                    continue
                options.append((rest[0] + 1 + r / balance, len(rest[1]) + 1, tuple(sorted((r, *rest[1])))))
            best[k] = min(options)[::2] if options else None
        return best[k]
    found = plan(n)
    return None if found is None else found[1]


def _columns(x: Tensor, inverse: bool, pairs: bool = False) -> Tensor:
    """The DFT (inverse: without the 1/n) along axis 1 of x, a (B, n, 2, C) value, or with `pairs` (B, n, C, 2)
    pairs: the (B, n, 2, C) value, in natural order, stored."""
    b, n = x.shape[:2]
    c = x.shape[2] if pairs else x.shape[3]
    if n == 1:
        return x.permute(0, 1, 3, 2) if pairs else x
    radices = _radices(n, host_target().lanes(x.dtype.itemsize))
    if radices is None:
        return _bluestein(x.permute(0, 1, 3, 2) if pairs else x, inverse)
    done = 1   # the product of the radices done: the outputs' digits so far
    for r in radices:
        m = n // (done * r)
        # out[b, n2, k1, K, q, C] = sum over (n1, p) of block[n2, k1, q, n1, p] x[b, n1, n2, K, p, C], K the digits
        # done: the input as it lies (b, n1 m + n2, K, p, C) (the first stage's may be pairs, (b, n, C, p), read a
        # step of 2 along C), the output the next stage's input as it lies
        if done == 1 and pairs:
            xe = x.reshape(b, r, m, 1, c, 2).permute(0, 2, 3, 4, 1, 5)
        else:
            xe = x.reshape(b, r, m, done, 2, c).permute(0, 2, 3, 5, 1, 4)
        xe = xe.reshape(b, m, 1, done, 1, c, r, 2)
        x = (xe * _stage_block(r, m, inverse, x).reshape(m, r, 1, 2, 1, r, 2)).sum(axis=(-2, -1))
        done *= r
    # stored as it is: a kernel writing the stage's outputs in another order (a result's interleaved pairs, the next
    # axis's transpose) strided its vectors' stores (fft of 128 x 128 rows: that stage 5 -> 24 us); in its own shape:
    # reshaped first, its loops would be the (n, 2, C) loops, the stage's digits cut from them by divisions, no axis
    # left for a register tile
    return x.contiguous().reshape(b, n, 2, c)


# eagerly, a transform's traced body is kept per signature: a call replays its schedule instead of building its
# stages and tables as an eager graph again (rfft of 64 x 4096: 6.2 ms a call, 1.1 under jit)
_columns_traced = function(_columns, cache=True)


def _cmul(x: Tensor, c: Tensor, s: Tensor) -> Tensor:
    """The (B, n, 2, C) value x times c + i s (each (n, 1) or broadcast against (B, n, C))."""
    re, im = x[:, :, 0], x[:, :, 1]
    return mv.stack([re * c - im * s, re * s + im * c], 2)


def _bluestein(x: Tensor, inverse: bool) -> Tensor:
    """X_k = c_k sum_j (x_j c_j) conj(c_{k-j}), c_j = exp(-+i pi j^2 / n): a circular convolution of length
    m >= 2n - 1 (a power of two) done with power-of-two transforms."""
    n = x.shape[1]
    m = 1 << (2 * n - 2).bit_length()
    j = np.arange(n, dtype=np.int64)
    c, s = _cos_sin_host(j * j, 2 * n)
    s = s if inverse else -s
    chirp = (_table(c[:, None], x), _table(s[:, None], x))
    a = mv.pad(_cmul(x, *chirp), [(0, 0), (0, m - n), (0, 0), (0, 0)]).contiguous()
    # conj(c) at 0 .. n-1 and, wrapped around, at m-n+1 .. m-1
    b = np.zeros((1, m, 2, 1))
    b[0, :n, 0, 0], b[0, :n, 1, 0] = c, -s
    b[0, m - n + 1:] = b[0, n - 1:0:-1]
    fb = _columns(_table(b, x), False)
    conv = _columns(_cmul(_columns(a, False), fb[:, :, 0], fb[:, :, 1]).contiguous(), True)[:, :n] * (1 / m)
    return _cmul(conv, *chirp)


# ---- an axis of a complex value's pairs as the (B, n, 2, C) value and back ----
def _stored(t: Tensor) -> bool:
    """Whether t is a stored value as it lies in memory (a buffer, a function's or jit's argument, a value stored
    for its consumers, through reshapes): a kernel reads it where it is, no copy needed to lay it out."""
    u = t.uop
    while u.op in (Ops.RESHAPE, Ops.AS_PAIRS, Ops.AS_COMPLEX):
        u = u.src[0]
    return u.op in (Ops.BUFFER, Ops.PARAM, Ops.CONTIGUOUS, Ops.COPY)


def _transform(p: Tensor, axis: int, inverse: bool, scale: float = 1.0) -> Tensor:
    """The DFT (inverse: without the 1/n), times `scale`, along `axis` of the complex value whose pairs are p (a
    last axis of 2): its pairs (a view of the last stage's planes).

    Along an axis with others after it (C columns, the axes before it B), the first stage reads the pairs where they
    lie, every other float along C (stored first if they are computed, or a view of another layout); along the last
    axis the axis before it is the columns, the pairs of each (C, n) plane stored transposed to (n, 2, C) (rows of
    2n floats: one transpose), and the result is read back transposed by its consumer."""
    shape, n = p.shape[:-1], p.shape[axis]
    b = math.prod(shape[:axis])
    if axis < len(shape) - 1:
        x = (p if _stored(p) else p.contiguous()).reshape(b, n, -1, 2)   # (stored in its own shape: see _columns)
        y = _columns_traced(x, inverse, True).permute(0, 1, 3, 2)
    else:
        c = shape[-2] if len(shape) > 1 else 1
        y = _columns_traced(p.reshape(b // c, c, n, 2).permute(0, 2, 3, 1).contiguous(), inverse)
        y = y.permute(0, 3, 1, 2)
    return (y * scale if scale != 1.0 else y).reshape(p.shape)


def _span(x: Tensor, axis: int, start: int, stop: int | None) -> Tensor:
    return x[(slice(None),) * axis + (slice(start, stop),)]


def _with_partners(fn: Callable[[Tensor, Tensor], Tensor], x: Tensor, q: Tensor, axes: Sequence[int]) -> Tensor:
    """fn(x, q'), q' the value q at the negated index (-k mod n) along each of `axes`, built in pieces along them:
    index 0 (its own partner) and the rest (whose partners are the rest flipped). A concatenation of plain views,
    which the kernel computing it stores piece by piece, where a roll's masks computed each element from every
    piece's reads (irfft2's pre-processing of 128 x 65: 68 us) and a gather was a kernel of its own."""
    if not axes:
        return fn(x, q)
    ax, rest = axes[0], axes[1:]
    if x.shape[ax] == 1:
        return _with_partners(fn, x, q, rest)
    head = _with_partners(fn, _span(x, ax, 0, 1), _span(q, ax, 0, 1), rest)
    tail = _with_partners(fn, _span(x, ax, 1, None), mv.flip(_span(q, ax, 1, None), ax), rest)
    return mv.concatenate([head, tail], ax)


def _table_along(t: np.ndarray, axis: int, ndim: int, like: Tensor) -> Tensor:
    """Host table t of (k, part) as a constant that broadcasts against an `ndim`-d value of pairs, k along `axis`:
    stored by part (a kernel vectorised along k reads each part's table side by side, not every other element)."""
    return _table(t.T, like).T.reshape(t.shape[0], *[1] * (ndim - axis - 2), 2)


# ---- real input and output of even length: one complex transform of half the length ----
def _rfft_even(x: Tensor, axes: Sequence[int]) -> Tensor:
    """The pairs of the unnormalised `rfftn` of real x over `axes` (as they are, the last one of even length n):
    z = x[0::2] + i x[1::2] along the last axis transformed at length h = n / 2, then every other axis, and then
    X[k] = E[k] + w^k O[k] for k = 0 .. h, w = exp(-2 pi i / n), from the transforms of the even and odd samples
    E[k] = (Z[k] + conj Z'[h - k]) / 2 and O[k] = (Z[k] - conj Z'[h - k]) / 2i (Z[h] = Z[0]), Z' the transform at
    the negated frequencies of the other axes (the conjugate of a transform is the transform of the conjugate
    there): half the work of transforming x as complex, and no imaginary zeros carried through every stage. Each
    part of X is a sum of products of the parts of Z and Z' with tables (no stack of two computed parts: a kernel
    storing pairs so computed both parts of every element), in pieces along the last axis and the others
    (`_with_partners`)."""
    last, n, nd = axes[-1], x.shape[axes[-1]], x.ndim + 1
    h = n // 2
    z = mv.moveaxis(mv.moveaxis(x, last, -1).reshape(*x.shape[:last], *x.shape[last + 1:], h, 2), -2, last)
    z = _transform(z, last, False)
    for ax in axes[-2::-1]:
        z = _transform(z, ax, False)
    conj = _table(np.array([1.0, -1.0]), x)

    def post(k: np.ndarray) -> Callable[[Tensor, Tensor], Tensor]:
        """X = (F + conj R) / 2 + T0 B_re + T1 B_im, B = F - conj R, at the frequencies k of the piece."""
        c, s = _cos_sin_host(k, n)
        t0, t1 = (_table_along(np.stack(t, -1) / 2, last, nd, x) for t in ((-s, -c), (c, -s)))
        return lambda f, r: (f + r * conj) * 0.5 + t0 * (f - r * conj)[..., :1] + t1 * (f - r * conj)[..., 1:]
    # pieces along the last axis: its first vector's worth of frequencies, whose partners h - k wrap around at k = 0
    # (read through a mask), the rest, whose partners are the others flipped (a whole number of vectors for a power
    # of two: split at k = 1 instead, 63 of 64 were no vectors at all), and k = h, whose Z is Z[0] and partner Z[0]
    split = min(h, host_target().lanes(x.dtype.itemsize))
    first = _span(z, last, 0, 1)
    wrapped = mv.flip(mv.concatenate([_span(z, last, h - split + 1, h), first], last), last)
    pieces = [_with_partners(post(np.arange(split)), _span(z, last, 0, split), wrapped, axes[:-1])]
    if split < h:
        pieces.append(_with_partners(post(np.arange(split, h)), _span(z, last, split, h),
                                     mv.flip(_span(z, last, 1, h - split + 1), last), axes[:-1]))
    pieces.append(_with_partners(post(np.array([h])), first, first, axes[:-1]))
    return mv.concatenate(pieces, last)


def _irfft_even(p: Tensor, axes: Sequence[int], n: int) -> Tensor:
    """n real outputs (n even) along the last of `axes` of the unnormalised inverse DFT over `axes` of the Hermitian
    X whose terms 0 .. n / 2 along that axis have the pairs p (the other axes as they are): with X' the value whose
    imaginary parts of the DC and Nyquist terms are ignored (as numpy's; over the other axes, X' there is the mean
    of X and the conjugate of X at the negated frequencies: its inverse transform over them is the real part of X's),
    E[k] = X'[k] + conj X''[h - k] and O[k] = (X'[k] - conj X''[h - k]) w^-k (twice the transforms of the even and
    odd outputs; X'' is X' at the negated frequencies of the other axes), the inverse transform of E + i O over
    the other axes and at length h = n / 2 along the last is x[0::2] + i x[1::2]. As in `_rfft_even`, parts are
    sums of products with tables, and the partners pieces."""
    last, h, nd = axes[-1], n // 2, p.ndim
    edge = np.r_[0.5, np.zeros(h - 1), 0.5][:, None] * np.ones((1, 2))
    sign = np.array([1.0, -1.0])   # conj
    # X' = X (1 - e) + conj(X'') e, conj X'' = conj(X'') (1 - e) + X e (e: 1/2 at the DC and Nyquist terms). (One
    # piece with these tables, not its edges apart: a kernel takes one loop's elements as vectors, and the others'
    # would stay scalar)
    keep, mix, keep_conj, both = (_table_along(t, last, nd, p)
                                  for t in (1 - edge, edge * sign, (1 - edge) * sign, edge))
    c, s = _cos_sin_host(np.arange(h), n)
    t0, t1 = (_table_along(np.stack(t, -1), last, nd, p) for t in ((-s, c), (-c, -s)))

    def pre(x: Tensor, q: Tensor) -> Tensor:
        """E + i O = F + G + T0 D_re + T1 D_im, F = X'[k], G = conj X''[h - k], D = F - G."""
        f = _span(x * keep + q * mix, last, 0, h)
        g = _span(mv.flip(q * keep_conj + x * both, last), last, 0, h)
        d = f - g
        return f + g + t0 * d[..., :1] + t1 * d[..., 1:]
    z = _with_partners(pre, p, p, axes[:-1])
    for ax in axes[:-1]:
        z = _transform(z, ax, True)
    out = mv.moveaxis(_transform(z, last, True), last, -2)               # x[2j + p] at (..., j, ..., p)
    return mv.moveaxis(out.reshape(*out.shape[:-2], n), -1, last)


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


def _resize(t: Tensor, axis: int, n: int) -> Tensor:
    """Axis `axis` cropped or zero-padded to n, as numpy's `n`."""
    have = t.shape[axis]
    if n < have:
        return _span(t, axis, 0, n)
    if n > have:
        return mv.pad(t, [(0, 0)] * axis + [(0, n - have)] + [(0, 0)] * (t.ndim - axis - 1))
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
    return from_pairs(_transform(_resize(pairs(a), ax, n), ax, inverse, _norm_scale(norm, n, inverse)))


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
    a = to_tensor(a)
    if a.dtype.is_complex:
        raise TypeError(f"rfft: the input must be real, got {a.dtype.name}; use fft for complex input")
    ax = _along(a, axis, "rfft")
    n = _check_n(a.shape[ax] if n is None else n, "rfft")
    if n % 2:
        out = fft(a, n, ax, norm)
        return _span(out, ax, 0, n // 2 + 1)
    return _rfftn_even(a, [ax], [n], norm)


def _rfftn_even(a: Tensor, axes: Sequence[int], sizes: Sequence[int], norm: str | None) -> Tensor:
    """`rfftn` of real a over distinct `axes` of `sizes`, the last one even."""
    x = a.astype(to_complex(a.dtype).real)
    for ax, n in zip(axes, sizes, strict=True):
        x = _resize(x, ax, n)
    scale = math.prod(_norm_scale(norm, n, False) for n in sizes)
    out = _rfft_even(x, axes)
    # stored: a consumer reading it in pieces of its own (an inverse transform's terms and their partners) computed
    # these pieces again at each of its reads (a spectral solver's step: 229 us for that kernel, 9 stored)
    return from_pairs(out * scale if scale != 1.0 else out).contiguous()


def irfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of `rfft`: n real outputs (default 2 (m - 1) for m inputs) from the non-negative frequency terms,
    as numpy.fft.irfft (the imaginary parts of the zero and Nyquist terms are ignored)."""
    a = _complex_input(a)
    ax = _along(a, axis, "irfft")
    n = _check_n(2 * (a.shape[ax] - 1) if n is None else n, "irfft")
    if n % 2 == 0:
        return _irfftn_even(a, [ax], [n], norm)
    half = n // 2 + 1
    p = _resize(pairs(a), ax, half)
    tail = n - half
    if tail:   # the Hermitian extension: X[n - k] = conj(X[k]) for 0 < k < n - n // 2
        p = mv.concatenate([p, mv.flip(_span(p, ax, 1, tail + 1), ax) * _table(np.array([1.0, -1.0]), p)], ax)
    return _transform(p, ax, True, _norm_scale(norm, n, True))[..., 0]


def _irfftn_even(a: Tensor, axes: Sequence[int], sizes: Sequence[int], norm: str | None) -> Tensor:
    """`irfftn` of complex a over distinct `axes` of `sizes`, the last one (the output's length there) even."""
    # stored first when it is computed: the pre-processing reads each term and its partner, and computed there, a
    # spectral solver's products were computed twice an element, in each of its pieces (24 us against 9 a step)
    p = pairs(a if _stored(a) else a.contiguous())
    for ax, n in zip(axes, [*sizes[:-1], sizes[-1] // 2 + 1], strict=True):
        p = _resize(p, ax, n)
    scale = math.prod(_norm_scale(norm, n, True) for n in sizes)
    out = _irfft_even(p, axes, sizes[-1])
    return out * scale if scale != 1.0 else out


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
    """`one` (fft or ifft) over each of `axes`: the transforms commute, so the array's last axis, if one of them, goes
    last (the others read the input's pairs where they lie; it is the one that transposes, in and out, and its
    output's transpose back is the result's), the others from the last of `axes` back, as numpy's."""
    a = _complex_input(a)
    axes, sizes = _axes_and_sizes(a, s, axes, who)
    order = sorted(zip(axes[::-1], sizes[::-1], strict=True), key=lambda t: t[0] == a.ndim - 1)
    for ax, n in order:
        a = one(a, n, ax, norm)
    return a


def rfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Tensor:
    """The n-dimensional transform of real input: `rfft` over the last axis, `fft` over the others (an even last
    length: one paired transform, the others' transforms, and one post-processing pass)."""
    a = to_tensor(a)
    if a.dtype.is_complex:
        raise TypeError(f"rfftn: the input must be real, got {a.dtype.name}; use fftn for complex input")
    axes, sizes = _axes_and_sizes(a, s, axes, "rfftn")
    sizes = [_check_n(a.shape[ax] if n is None else n, "rfftn") for ax, n in zip(axes, sizes, strict=True)]
    if sizes[-1] % 2 == 0 and len(set(axes)) == len(axes):
        return _rfftn_even(a, axes, sizes, norm)
    out = rfft(a, sizes[-1], axes[-1], norm)
    for ax, n in zip(axes[-2::-1], sizes[-2::-1], strict=True):
        out = fft(out, n, ax, norm)
    return out


def irfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Tensor:
    """The inverse of `rfftn`: `ifft` over all but the last axis, `irfft` over it (its size s[-1], default
    2 (m - 1)); an even last size is one pre-processing pass and the transforms."""
    a = _complex_input(a)
    axes, sizes = _axes_and_sizes(a, s, axes, "irfftn")
    sizes = [_check_n(a.shape[ax] if n is None else n, "irfftn") for ax, n in zip(axes[:-1], sizes[:-1], strict=True)
             ] + [_check_n(2 * (a.shape[axes[-1]] - 1) if sizes[-1] is None else sizes[-1], "irfftn")]
    if sizes[-1] % 2 == 0 and len(set(axes)) == len(axes):
        return _irfftn_even(a, axes, sizes, norm)
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
