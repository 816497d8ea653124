"""The rest of `jax.lax` that programs call: special functions, shape helpers, scatter variants, approximate top-k,
precision and bit helpers, `fft`, implicit differentiation (`custom_root`, `custom_linear_solve`) and the
placement helpers (`optimization_barrier`, `with_sharding_constraint`, `platform_dependent`).

Each is a composition of existing tgfx ops: the special functions are `tgfx.scipy.special`'s under lax's dtype rule
(every operand of one float dtype, no promotion: `lax.igamma(x_f32, 2)` is a TypeError, as in JAX), the shapes are
`tgfx.numpy` movement, the scatters `_lax_gather`'s, `approx_max_k` is the exact `top_k`, `fft` is `tnp.fft`.

`custom_root` and `custom_linear_solve` differentiate by the implicit function theorem, not through the solver:
the solution is a constant of the graph (`stop_gradient`), and the derivative enters through a correction whose
value is exactly zero, -J^-1 (f(x*) - stop_gradient(f(x*))) for a root x* of f, whose derivative is JAX's
-J^-1 df/dparams. So the solver may be anything (a `while_loop`, a host computation), closed-over parameters of `f`
or `matvec` get their gradients with no bookkeeping, and nothing is added to a call that is not differentiated.

>>> tg.lax.igamma(tnp.asarray([1.0, 2.0]), tnp.asarray([2.0, 2.0]))              # [0.86466473, 0.5939942]
>>> tg.lax.split(tnp.arange(6), [1, 2, 3])                                       # [[0], [1, 2], [3, 4, 5]]
>>> tg.lax.reduce_precision(tnp.asarray(1 / 3), exponent_bits=5, mantissa_bits=10)   # 0.33325195, float16's
"""
from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from typing import Any

from tgfx import _lax_gather, _lax_scan
from tgfx._lax_gather import ScatterDimensionNumbers
from tgfx._lax_ops import FLOAT, INT, NUMBER, check_kind, same_dtypes, same_shapes
from tgfx._lax_ops import operand as _operand  # (lax's own argument is called operand)
from tgfx.devices import DEFAULT_DEVICE
from tgfx.dtypes import dtypes, to_dtype, uint_of
from tgfx.function import Function, function
from tgfx.numpy import _elementwise as ew
from tgfx.tensor import ArrayLike, Tensor, normalize_axis, static_int
from tgfx.trace_state import current
from tgfx.transforms.grad import stop_gradient
from tgfx.tree import tree_flatten, tree_leaves, tree_map, tree_unflatten


# ---- special functions: tgfx.scipy.special under lax's dtype rule ----
def _floats(name: str, *args: ArrayLike) -> list[Tensor]:
    """The operands of one float dtype (lax does not promote), broadcast as lax broadcasts."""
    ts = [_operand(a) for a in args]
    same_dtypes(name, ts)
    check_kind(name, ts[0], FLOAT)
    return same_shapes(name, ts) if len(ts) > 1 else ts


def igamma(a: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularised lower incomplete gamma function P(a, x), as `jax.lax.igamma` (`tg.scipy.special.gammainc`);
    a and x of one float dtype. Differentiable in both.

    >>> tg.lax.igamma(tnp.asarray(2.0), tnp.asarray(1.0))      # 0.26424112
    """
    from tgfx.scipy import special  # (imported on use: tgfx.scipy imports tgfx.lax)
    return special.gammainc(*_floats("igamma", a, x))


def igammac(a: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x), as `jax.lax.igammac`
    (`tg.scipy.special.gammaincc`, accurate where Q is small)."""
    from tgfx.scipy import special
    return special.gammaincc(*_floats("igammac", a, x))


def igamma_grad_a(a: ArrayLike, x: ArrayLike) -> Tensor:
    """dP(a, x)/da, as `jax.lax.igamma_grad_a` (XLA's series and continued fraction carrying the derivative in a);
    NaN for a <= 0 or x < 0. The 16-bit floats are computed in float32."""
    from tgfx.scipy._special_gamma import _igamma_grad_a_value
    at, xt = _floats("igamma_grad_a", a, x)
    d = at.dtype
    if d.itemsize < 4:
        return _igamma_grad_a_value(at.astype(dtypes.float32), xt.astype(dtypes.float32)).astype(d)
    return _igamma_grad_a_value(at, xt)


def random_gamma_grad(a: ArrayLike, x: ArrayLike) -> Tensor:
    """d x / d a for x a standard gamma sample of shape a (the implicit reparameterisation gradient
    -(dP/da) / (dP/dx)), as `jax.lax.random_gamma_grad`: what `tg.random.gamma` differentiates with. Its own
    derivative is not defined (NaN), as JAX has none."""
    from tgfx._random_dists import _gamma_grad_call
    return _gamma_grad_call(*_floats("random_gamma_grad", a, x))


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularised incomplete beta function I_x(a, b), as `jax.lax.betainc` (`tg.scipy.special.betainc`);
    differentiable in x."""
    from tgfx.scipy import special
    return special.betainc(*_floats("betainc", a, b, x))


def polygamma(m: ArrayLike, x: ArrayLike) -> Tensor:
    """The m-th derivative of digamma, as `jax.lax.polygamma`: m is a float of x's dtype holding a non-negative
    integer (NaN otherwise); differentiable in x.

    >>> tg.lax.polygamma(tnp.asarray(1.0), tnp.asarray([1.0, 2.0]))    # [1.644934, 0.644934]
    """
    from tgfx.scipy import special
    mt, xt = _floats("polygamma", m, x)
    whole = ew.logical_and(mt == ew.floor(mt), mt >= 0)
    order = ew.where(whole, mt, 0.0).astype(dtypes.int32)
    return ew.where(whole, special.polygamma(order, xt), math.nan)


def zeta(x: ArrayLike, q: ArrayLike) -> Tensor:
    """The Hurwitz zeta function sum_n (n + q)^-x, as `jax.lax.zeta` (`tg.scipy.special.zeta`); differentiable."""
    from tgfx.scipy import special
    return special.zeta(*_floats("zeta", x, q))


def bessel_i0e(x: ArrayLike) -> Tensor:
    """exp(-|x|) I0(x), as `jax.lax.bessel_i0e` (floats; `tg.scipy.special.i0e`)."""
    from tgfx.scipy import special
    return special.i0e(*_floats("bessel_i0e", x))


def bessel_i1e(x: ArrayLike) -> Tensor:
    """exp(-|x|) I1(x), as `jax.lax.bessel_i1e` (floats; `tg.scipy.special.i1e`)."""
    from tgfx.scipy import special
    return special.i1e(*_floats("bessel_i1e", x))


# ---- shapes ----
def stack(operands: Sequence[ArrayLike], axis: int = 0) -> Tensor:
    """The operands (one shape, one dtype: lax does not promote) stacked along a new axis, as `jax.lax.stack`.

    >>> tg.lax.stack([tnp.ones(2), tnp.zeros(2)], axis=1)      # [[1, 0], [1, 0]]
    """
    from tgfx.numpy import stack as tnp_stack
    ts = [_operand(o) for o in operands]
    if not ts:
        raise ValueError("lax.stack: needs at least one operand, got an empty sequence")
    same_dtypes("stack", ts, "stack")
    if len({t.shape for t in ts}) > 1:
        raise TypeError(f"lax.stack: every operand must have the same shape, got {', '.join(str(t.shape) for t in ts)}")
    return tnp_stack(ts, axis=normalize_axis(axis, ts[0].ndim + 1, "lax.stack"))


def unstack(x: ArrayLike, axis: int = 0) -> tuple[Tensor, ...]:
    """The slices of x along `axis`, that axis removed, as `jax.lax.unstack`.

    >>> tg.lax.unstack(tnp.arange(6).reshape(2, 3), axis=1)    # ([0, 3], [1, 4], [2, 5])
    """
    t = _operand(x)
    if t.ndim == 0:
        raise ValueError("lax.unstack: the operand is a scalar; it needs an axis to unstack along")
    ax = normalize_axis(axis, t.ndim, "lax.unstack")
    return tuple(t[(slice(None),) * ax + (i,)] for i in range(t.shape[ax]))


def split(operand: ArrayLike, sizes: Sequence[int], axis: int = 0) -> list[Tensor]:
    """`operand` cut along `axis` into consecutive pieces of the given `sizes` (which sum to that axis' length), as
    `jax.lax.split` (not `tnp.split`: sizes, not indices or a count).

    >>> tg.lax.split(tnp.arange(6), [1, 2, 3])                # [[0], [1, 2], [3, 4, 5]]
    """
    t = _operand(operand)
    ax = normalize_axis(axis, t.ndim, "lax.split")
    sz = list(sizes) if isinstance(sizes, Sequence) and not isinstance(sizes, str) else None
    if sz is None or not all(static_int(s) is not None and s >= 0 for s in sz):
        raise ValueError(f"lax.split: sizes must be a sequence of non-negative ints, got {sizes!r}")
    sz = [int(s) for s in sz]
    if sum(sz) != t.shape[ax]:
        raise ValueError(f"lax.split: the sizes {tuple(sz)} sum to {sum(sz)}, but axis {ax} of the operand (shape "
                         f"{t.shape}) has {t.shape[ax]} elements; they must be equal")
    out, start = [], 0
    for s in sz:
        out.append(t[(slice(None),) * ax + (slice(start, start + s),)])
        start += s
    return out



def tile(operand: ArrayLike, reps: Sequence[int]) -> Tensor:
    """`operand` repeated reps[i] times along each axis i (one rep per axis, unlike `tnp.tile`), as `jax.lax.tile`.

    >>> tg.lax.tile(tnp.asarray([[1, 2], [3, 4]]), (2, 1)).shape      # (4, 2)
    """
    from tgfx.numpy import tile as tnp_tile
    t = _operand(operand)
    r = tuple(reps) if isinstance(reps, Sequence) else None
    if r is None or len(r) != t.ndim or not all(static_int(v) is not None and v >= 0 for v in r):
        raise TypeError(f"lax.tile: reps must be one non-negative int per axis of the operand (shape {t.shape}, "
                        f"{t.ndim} axes), got {reps!r}")
    return tnp_tile(t, tuple(int(v) for v in r))


def broadcast_to_rank(x: ArrayLike, rank: int) -> Tensor:
    """x with leading size-1 axes added up to `rank` axes, as `jax.lax.broadcast_to_rank`.

    >>> tg.lax.broadcast_to_rank(tnp.ones(3), 3).shape        # (1, 1, 3)
    """
    t = _operand(x)
    if static_int(rank) is None or rank < t.ndim:
        raise ValueError(f"lax.broadcast_to_rank: rank must be an int at least the operand's rank {t.ndim} (shape "
                         f"{t.shape}), got {rank!r}")
    return t.reshape((1,) * (int(rank) - t.ndim) + t.shape)


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Tensor:
    """An array of this shape and dtype whose contents a program must not rely on, as `jax.lax.empty`: zeros, as
    JAX's are. `out_sharding` is accepted and ignored."""
    return Tensor.full(tuple(int(s) for s in shape), 0, to_dtype(dtype))


# ---- scatter variants and index_take ----
def scatter_sub(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: Any = None) -> Tensor:
    """`scatter` that subtracts the updates (repeated starts accumulate), as `jax.lax.scatter_sub`: a
    `scatter_add` of -updates (integers wrap around as in JAX); differentiable in `operand` and `updates`.

    >>> dn = tg.lax.ScatterDimensionNumbers((), (0,), (0,))
    >>> tg.lax.scatter_sub(tnp.zeros(3), tnp.asarray([[1], [1]]), tnp.ones(2), dn).tolist()   # [0, -2, 0]
    """
    u = _operand(updates)
    check_kind("scatter_sub", u, NUMBER, "updates")
    return _lax_gather._scatter("scatter_sub", "add", operand, scatter_indices, ew.negative(u), dimension_numbers,
                                mode)


def scatter_apply(operand: ArrayLike, scatter_indices: ArrayLike, func: Callable[[Tensor], Tensor],
                  dimension_numbers: ScatterDimensionNumbers, *, update_shape: Sequence[int] = (),
                  indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Tensor:
    """`operand` with `func` applied to the elements the scatter addresses, as `jax.lax.scatter_apply`
    (`update_shape` is the shape updates would have). An element addressed k times gets func applied k times, as
    in JAX; `func` must be elementwise (it is applied to the whole operand, each element kept where addressed).

    >>> dn = tg.lax.ScatterDimensionNumbers((), (0,), (0,))
    >>> tg.lax.scatter_apply(tnp.arange(4.0), tnp.asarray([[1], [3]]), tnp.square, dn, update_shape=(2,))
    ... # [0, 1, 2, 9]
    """
    x = _operand(operand)
    ones = Tensor.full(tuple(update_shape), 1, dtypes.int32)
    hits = _lax_gather._scatter("scatter_apply", "add", Tensor.full(x.shape, 0, dtypes.int32), scatter_indices, ones,
                                dimension_numbers, mode)
    return apply_counted("lax.scatter_apply", x, hits, func, unique_indices or math.prod(ones.shape) <= 1)


def apply_counted(who: str, x: Tensor, hits: Tensor, func: Callable[[Tensor], Tensor], once: bool) -> Tensor:
    """x with the elementwise `func` applied `hits` times at each element (`once`: hits is at most 1): a
    while_loop over the largest count, each step applying it where the count is not yet reached."""
    from tgfx.lax import while_loop

    def apply(v: Tensor, where: Tensor) -> Tensor:
        y = func(v)
        if not isinstance(y, Tensor) or (y.shape, y.dtype) != (v.shape, v.dtype):
            got = f"{y.dtype.name}{list(y.shape)}" if isinstance(y, Tensor) else type(y).__name__
            raise TypeError(f"{who}: func must be elementwise, returning the operand's shape and dtype "
                            f"{v.dtype.name}{list(v.shape)}, got {got}")
        return ew.where(where, y, v)

    out = apply(x, hits > 0)
    if once:
        return out

    def more(c: tuple) -> Tensor:       # an element addressed more than k times still needs func
        return (c[1] < hits).any()

    def again(c: tuple) -> tuple:
        return apply(c[0], c[1] < hits), c[1] + 1
    return while_loop(more, again, (out, Tensor.full((), 1, dtypes.int32)))[0]


def index_take(src: ArrayLike, idxs: Sequence[ArrayLike], axes: Sequence[int]) -> Tensor:
    """src at the points (idxs[0][i], idxs[1][i], ...) of its `axes`, the other axes kept after the point axis, as
    `jax.lax.index_take`; indices wrap around (-1 is the last).

    >>> tg.lax.index_take(tnp.arange(12).reshape(3, 4), (tnp.asarray([0, 2]), tnp.asarray([1, -1])), (0, 1))  # [1, 11]
    """
    from tgfx.numpy import moveaxis
    t = _operand(src)
    ax = [normalize_axis(a, t.ndim, "lax.index_take") for a in axes]
    ix = [_operand(i) for i in idxs]
    if len(ix) != len(ax) or len(set(ax)) != len(ax):
        raise ValueError(f"lax.index_take: needs one index array per axis in axes (distinct), got {len(ix)} index "
                         f"arrays for axes {tuple(axes)}")
    for k, i in enumerate(ix):
        if not i.dtype.is_int or i.ndim != 1:
            raise TypeError(f"lax.index_take: idxs[{k}] must be a 1-d integer array, got {i.dtype.name}{list(i.shape)}")
    moved = moveaxis(t, ax, list(range(len(ax))))
    return moved[tuple(ew.remainder(i, t.shape[a]) for i, a in zip(ix, ax, strict=True))]


# ---- approximate top-k: exact here ----
def _approx_k(name: str, operand: ArrayLike, k: int, reduction_dimension: int, recall_target: float,
              aggregate_to_topk: bool, largest: bool) -> tuple[Tensor, Tensor]:
    from tgfx.numpy import take_along_axis
    t = _operand(operand)
    check_kind(name, t, FLOAT)
    if t.ndim == 0:
        raise TypeError(f"lax.{name}: the operand must have at least one axis, got a scalar")
    ax = normalize_axis(reduction_dimension, t.ndim, f"lax.{name}")
    n = t.shape[ax]
    if static_int(k) is None or not 0 <= k <= n:
        raise ValueError(f"lax.{name}: k must be an int from 0 to the size of reduction_dimension {ax} ({n}, operand "
                         f"shape {t.shape}), got {k!r}")
    k = int(k)
    if not 0 < recall_target <= 1:
        raise ValueError(f"lax.{name}: recall_target must be in (0, 1], got {recall_target!r}")
    k = k if aggregate_to_topk else n   # unaggregated: JAX's CPU fallback returns the whole axis, in order
    key = _lax_scan._order_key(t)
    _, idx = _lax_scan.top_k(key if largest else ew.invert(key), k, axis=ax)   # ~key: the order reversed exactly
    return take_along_axis(t, idx, ax), idx


def approx_max_k(operand: ArrayLike, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple[Tensor, Tensor]:
    """The k largest entries along `reduction_dimension` (a float operand) and their int32 indices, as
    `jax.lax.approx_max_k`, NaN ordered as `top_k` orders it: exact here (`top_k`, recall 1, as JAX's CPU
    fallback), so `recall_target` and `reduction_input_size_override` change nothing. `aggregate_to_topk=False`
    returns the whole axis sorted, as that fallback does. Differentiable in the operand.

    >>> vals, idx = tg.lax.approx_max_k(tnp.asarray([3.0, 1.0, 4.0, 1.0, 5.0]), 2)      # [5, 4], [4, 2]
    """
    return _approx_k("approx_max_k", operand, k, reduction_dimension, recall_target, aggregate_to_topk, True)


def approx_min_k(operand: ArrayLike, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple[Tensor, Tensor]:
    """The k smallest entries along `reduction_dimension` and their int32 indices, smallest first (lower index first
    among equals), as `jax.lax.approx_min_k`; exact, as `approx_max_k`.

    >>> vals, idx = tg.lax.approx_min_k(tnp.asarray([3.0, 1.0, 4.0, 1.0, 5.0]), 2)      # [1, 1], [1, 3]
    """
    return _approx_k("approx_min_k", operand, k, reduction_dimension, recall_target, aggregate_to_topk, False)


# ---- precision and bits ----
_MANTISSA_BITS = {dtypes.float16: 10, dtypes.bfloat16: 7, dtypes.float32: 23, dtypes.float64: 52}


def _bit_int(name: str, what: str, v: Any, low: int) -> int:
    if static_int(v) is None or v < low:
        raise ValueError(f"lax.reduce_precision: {what} must be an int >= {low}, got {v!r}")
    return int(v)


def _reduce_precision_bits(x: Tensor, exponent_bits: int, mantissa_bits: int) -> Tensor:
    """XLA's ReducePrecision on the bits: round the mantissa to nearest even, then flush what the narrower exponent
    cannot hold (overflow to inf, below its smallest normal to zero, sign kept); NaN stays the input's NaN."""
    d = x.dtype
    src_m, nbits = _MANTISSA_BITS[d], d.bits
    src_e = nbits - 1 - src_m
    u = uint_of(d)
    bits = x.bitcast(u)
    if mantissa_bits < src_m:
        shift = src_m - mantissa_bits
        last = 1 << shift
        bias = ((bits & last) >> shift) + ((last >> 1) - 1)          # ties go to the even neighbour
        bits = (bits + bias) & (((1 << nbits) - 1) ^ (last - 1))
    if exponent_bits < src_e:
        exp_mask = ((1 << src_e) - 1) << src_m
        src_bias, dst_bias = (1 << (src_e - 1)) - 1, (1 << (exponent_bits - 1)) - 1
        exp = bits & exp_mask
        signed_zero = bits & (1 << (nbits - 1))
        bits = ew.where(exp > ((src_bias + dst_bias) << src_m), signed_zero | exp_mask,
                        ew.where(exp <= ((src_bias - dst_bias) << src_m), signed_zero, bits))
    return ew.where(ew.isnan(x), x, bits.bitcast(d))


def reduce_precision(operand: float | ArrayLike, exponent_bits: int, mantissa_bits: int) -> Tensor:
    """`operand` rounded to a float format with `exponent_bits` and `mantissa_bits` and back, as
    `jax.lax.reduce_precision` (XLA's semantics: round to nearest even, overflow to inf, values below the format's
    smallest normal flushed to a signed zero, NaN kept). Linear for differentiation: the gradient is the incoming
    one reduced the same way, as JAX's.

    >>> tg.lax.reduce_precision(tnp.asarray([1 / 3, 70000.0]), 5, 10)          # [0.33325195, inf]: float16's
    """
    x = _operand(operand)
    check_kind("reduce_precision", x, FLOAT)
    e, m = _bit_int("reduce_precision", "exponent_bits", exponent_bits, 1), \
        _bit_int("reduce_precision", "mantissa_bits", mantissa_bits, 0)

    def backward(g: Tensor, call: Any) -> tuple[Tensor]:
        return (reduce_precision(g, e, m),)
    return function(lambda v: _reduce_precision_bits(v, e, m), grad_fxn=backward)(x)


def mulhi(x: ArrayLike, y: ArrayLike, /) -> Tensor:
    """The upper N bits of the 2N-bit product of N-bit integers, as `jax.lax.mulhi` (two's complement for signed
    types: mulhi(-7, 3) is -1).

    Four half-width partial products in N-bit unsigned arithmetic (so 64-bit operands need no 128-bit type), then
    the signed correction hi(x * y) = hi_unsigned - (x < 0 ? y : 0) - (y < 0 ? x : 0).

    >>> tg.lax.mulhi(tnp.asarray(2 ** 31 + 5, "uint32"), tnp.asarray(7, "uint32"))     # 3
    """
    a, b = same_shapes("mulhi", [_operand(x), _operand(y)])
    same_dtypes("mulhi", [a, b])
    check_kind("mulhi", a, INT)
    d = a.dtype
    u, half = uint_of(d), d.bits // 2
    ua, ub = a.bitcast(u), b.bitcast(u)
    low = (1 << half) - 1
    a0, a1, b0, b1 = ua & low, ua >> half, ub & low, ub >> half
    p01, p10 = a0 * b1, a1 * b0
    mid = ((a0 * b0) >> half) + (p01 & low) + (p10 & low)
    hi = a1 * b1 + (p01 >> half) + (p10 >> half) + (mid >> half)
    if d.kind == "i":
        zero = Tensor.full((), 0, u)
        hi = hi - ew.where(a < 0, ub, zero) - ew.where(b < 0, ua, zero)
    return hi.bitcast(d)


# ---- fft ----
class FftType(enum.IntEnum):
    """Which transform `fft` computes, as `jax.lax.FftType`."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


def fft(x: ArrayLike, fft_type: FftType | str, fft_lengths: Sequence[int]) -> Tensor:
    """The 1-d, 2-d or 3-d discrete Fourier transform over the last len(fft_lengths) axes, as `jax.lax.fft`
    (`tnp.fft`'s transforms, unnormalised forward, 1/n inverse). FFT and IFFT are complex to complex, RFFT real to
    the n // 2 + 1 non-negative frequencies of the last axis, IRFFT back to `fft_lengths` real values. The
    transformed axes must already have the lengths `fft_lengths` (n // 2 + 1 for IRFFT's last).

    >>> tg.lax.fft(tnp.arange(4.0).astype("complex64"), "FFT", (4,))    # [6, -2+2j, -2, -2-2j]
    """
    from tgfx.numpy import fft as tfft
    t = _operand(x)
    try:
        kind = fft_type if isinstance(fft_type, FftType) else FftType[str(fft_type).upper()]
    except KeyError:
        raise ValueError(f"lax.fft: fft_type must be a tg.lax.FftType or one of 'FFT', 'IFFT', 'RFFT', 'IRFFT', got "
                         f"{fft_type!r}") from None
    lengths = tuple(fft_lengths)
    k = len(lengths)
    if not 1 <= k <= 3 or k > t.ndim:
        raise ValueError(f"lax.fft: only 1-d, 2-d and 3-d transforms over axes the operand has are supported; got "
                         f"fft_lengths={lengths} for an operand of shape {t.shape}")
    axes = tuple(range(t.ndim - k, t.ndim))
    want = lengths[:-1] + (lengths[-1] // 2 + 1,) if kind is FftType.IRFFT else lengths
    if t.shape[-k:] != want:
        raise ValueError(f"lax.fft: the operand's last {k} axes {t.shape[-k:]} must be {want} for {kind.name} with "
                         f"fft_lengths={lengths}")
    if kind is FftType.RFFT:
        if t.dtype.is_complex:
            raise TypeError(f"lax.fft: RFFT takes a real operand, got {t.dtype.name}")
        return tfft.rfftn(t, axes=axes)
    if kind is FftType.IRFFT:
        return tfft.irfftn(t, s=lengths, axes=axes)
    return (tfft.fftn if kind is FftType.FFT else tfft.ifftn)(t, axes=axes)


# ---- implicit differentiation ----
def _check_tree(who: str, what: str, tree: Any, like: Any, like_what: str) -> None:
    got, want = tree_flatten(tree)[1], tree_flatten(like)[1]
    if got != want:
        raise TypeError(f"{who}: {what} must have the structure of {like_what} ({want!r}), got {got!r}")


def _zero_with_tangent(tree: Any) -> Any:
    """v - stop_gradient(v) for every leaf: exactly zero, with v's derivative."""
    return tree_map(lambda v: v - stop_gradient(v), tree)


def custom_root(f: Callable, initial_guess: Any, solve: Callable[[Callable, Any], Any],
                tangent_solve: Callable[[Callable, Any], Any], has_aux: bool = False) -> Any:
    """`solve(f, initial_guess)`, a root x* of f, differentiated by the implicit function theorem, as
    `jax.lax.custom_root`.

    Derivatives are with respect to the values `f` closes over (its parameters), never through `solve` (which may
    be a `while_loop`, or not differentiable at all): dx* = -J^-1 df, J = df/dx at x*, with J^-1 applied by
    `tangent_solve(g, y)`, which solves g(x) = y for the linear map g (f linearised at x*): `lambda g, y: y /
    g(1.0)` for a scalar, `lambda g, y: tnp.linalg.solve(tg.jacobian(g)(y), y)` for a small vector. Reverse mode
    differentiates through `tangent_solve` (as JAX transposes it), so it must be written with differentiable ops.
    `initial_guess` gets no gradient. With `has_aux`, `solve` returns (solution, aux) and so does this (aux without
    gradient). Higher derivatives (grad of grad, `hessian`) are JAX's too: under n nested differentiations the
    correction is n.bit_length() Newton steps from x* (each exactly zero in value), so J and df see x*'s own
    dependence on the parameters.

    >>> def sqrt(a):    # the root of x^2 - a by Newton's method, differentiable in a
    ...     newton = lambda f, x0: tg.lax.fori_loop(0, 20, lambda i, x: x - f(x) / (2 * x), x0)
    ...     return tg.lax.custom_root(lambda x: x * x - a, 1.0, newton, lambda g, y: y / g(1.0))
    >>> tg.grad(sqrt)(tnp.asarray(4.0))        # 0.25
    """
    who = "custom_root"
    out = solve(f, initial_guess)
    sol, aux = out if has_aux else (out, None)
    if has_aux and not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"{who}: with has_aux=True, solve must return a pair (solution, aux), got {type(out).__name__}")
    _check_tree(who, "the solution solve returns", sol, initial_guess, "initial_guess")
    levels = len(current().differentiating)   # (outside a differentiation the correction is zero: none is made)
    if levels:
        x = tree_map(stop_gradient, sol)
        # A Newton step from x (f linearised at x, its value unchanged) has the root's first derivatives when x has
        # none, and from an x whose derivatives are right up to order k, up to order 2k + 1: a second derivative
        # (grad of grad, a hessian) sees x*'s own dependence on the parameters through J and f only after two steps.
        for _ in range(levels.bit_length()):
            x = _newton_step(who, f, x, tangent_solve, initial_guess)
        sol = x
    return (sol, tree_map(stop_gradient, aux)) if has_aux else sol


def _newton_step(who: str, f: Callable, x: Any, tangent_solve: Callable, initial_guess: Any) -> Any:
    """x - J^-1 (f(x) - f(x)'s value), J = df/dx at x by `tangent_solve`: x's value, with the derivatives of the
    root near x (the correction is exactly zero, its derivative that of a Newton step)."""
    residual = f(x)
    _check_tree(who, "f's result", residual, initial_guess, "initial_guess")

    def linearised(t: Any) -> Any:   # t -> J t, at x
        tangent = tree_map(lambda v, like: _operand(v).astype(like.dtype), t, x)
        return _jvp(f, (x,), (tangent,))[1]
    delta = tangent_solve(linearised, _zero_with_tangent(residual))
    _check_tree(who, "tangent_solve's result", delta, initial_guess, "initial_guess")
    return tree_map(lambda v, dv: v - dv, x, delta)


def _jvp(f: Callable, primals: tuple, tangents: tuple) -> tuple:
    from tgfx.transforms.jvp import jvp
    return jvp(f, primals, tangents)


def _inverse(matvec: Callable, solve: Callable, transpose_solve: Callable | None, x: Any, has_aux: bool) -> Callable:
    """v -> A^-1 v for a v that is always zero (so is its value), with A^-1's derivative: reverse mode by
    `transpose_solve` on A's transpose (without one, by the transpose of `solve`, which must then be differentiable,
    where JAX raises), forward mode by `solve`."""
    from tgfx.custom import custom_vjp
    from tgfx.transforms.control_grad import in_forward_mode
    from tgfx.transforms.grad import vjp

    def first(r: Any) -> Any:
        return r[0] if has_aux else r

    def zero(v: Any) -> Any:
        return tree_map(lambda leaf: leaf * 0, v)

    # forward mode transposes the backward, which is never evaluated there: a node whose transpose is A^-1 by `solve`
    # stands in for A^-T g, as JAX's JVP calls solve (transposing transpose_solve, or solve's transpose, went through
    # its loop: a while_loop CG, jax.scipy's cg, had no jvp at all, and a fixed-step one linearised at zero gave NaN)
    def by_solve(g: Any) -> Any:
        leaves, tree = tree_flatten(g)
        slots: dict[int, int] = {}
        at = [slots.setdefault(id(v), len(slots)) for v in leaves]   # (the call's inputs: each Tensor once)

        def transpose(ts: tuple, call: Any) -> tuple:
            out: list[Any] = [None] * len(call.inputs)
            for k, v in zip(at, tree_leaves(first(solve(matvec, tree_unflatten(tree, list(ts))))), strict=True):
                out[k] = v if out[k] is None else out[k] + v
            return tuple(out)
        return tree_unflatten(tree, list(Function(lambda *vs: tuple(v * 0 for v in vs), grad_fxn=transpose,
                                                  name="custom_linear_solve.transpose")(*leaves)))

    def backward(_: None, g: Any) -> tuple:
        if in_forward_mode():
            return (by_solve(g),)
        if transpose_solve is None:   # solve's transpose: its pullback (at g; a solve written with linear ops)
            return (vjp(lambda t: first(solve(matvec, t)), g)[1](g)[0],)

        def vecmat(w: Any) -> Any:
            return vjp(matvec, x)[1](w)[0]
        return (first(transpose_solve(vecmat, g)),)
    inv = custom_vjp(zero)
    inv.defvjp(lambda v: (zero(v), None), backward)
    return inv


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable[[Callable, Any], Any],
                        transpose_solve: Callable[[Callable, Any], Any] | None = None, symmetric: bool = False,
                        has_aux: bool = False) -> Any:
    """`solve(matvec, b)`, the x with matvec(x) = b, differentiated implicitly, as `jax.lax.custom_linear_solve`.

    Not through `solve` (a `while_loop` conjugate gradient, say): dx = A^-1 (db - dA x), A the linear map `matvec`,
    differentiable in `b` and in what `matvec` closes over. Reverse mode applies A^-T by `transpose_solve(vecmat,
    g)`, `vecmat` being matvec's transpose (by `tg.vjp`); `symmetric=True` uses `solve` for it. Without either,
    reverse mode differentiates through `solve` instead (where JAX raises), which must then be written with
    differentiable ops. Forward mode (`jvp`, `jacfwd`) solves with `solve`, as JAX's, whatever it is written with.
    With `has_aux`, `solve` (and `transpose_solve`) return (solution, aux), and so does this.

    >>> A = tnp.asarray([[4.0, 1.0], [1.0, 3.0]])
    >>> def f(b):
    ...     return tg.lax.custom_linear_solve(lambda x: A @ x, b, lambda mv, y: tnp.linalg.solve(A, y), symmetric=True)
    >>> tg.grad(lambda b: f(b).sum())(tnp.ones(2))       # A^-T @ 1 = [0.1818, 0.2727]
    """
    who = "custom_linear_solve"
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    out = solve(matvec, b)
    if has_aux and not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"{who}: with has_aux=True, solve must return a pair (solution, aux), got {type(out).__name__}")
    x, aux = out if has_aux else (out, None)
    _check_tree(who, "the solution solve returns", x, b, "b")
    for i, (s, t) in enumerate(zip(tree_leaves(x), tree_leaves(b), strict=True)):
        if getattr(s, "shape", None) != getattr(_operand(t), "shape", None):
            raise ValueError(f"{who}: solve's result leaf {i} has shape {getattr(s, 'shape', None)}, but b's has "
                             f"{_operand(t).shape}; solve(matvec, b) must return an x of b's shapes")
    levels = len(current().differentiating)
    if levels:
        x = tree_map(stop_gradient, x)
        for _ in range(levels.bit_length()):   # (Newton steps, as custom_root's: two for a second derivative)
            ax = matvec(x)
            _check_tree(who, "matvec's result", ax, b, "b")
            residual = tree_map(lambda bb, v: _operand(bb) - v, b, ax)   # b - A x: zero, with db - dA x - A dx
            delta = _inverse(matvec, solve, transpose_solve, x, has_aux)(_zero_with_tangent(residual))
            x = tree_map(lambda v, dv: v + dv, x, delta)
    return (x, tree_map(stop_gradient, aux)) if has_aux else x


# ---- placement: nothing to do on one device ----
def optimization_barrier(operand: Any, /) -> Any:
    """`operand` (a pytree of arrays) unchanged, as `jax.lax.optimization_barrier`: in XLA it stops computations
    being moved across it; tgfx's scheduler does not move work across a value's uses in the way that matters, so
    it is the identity (leaves converted to arrays)."""
    return tree_map(_operand, operand)


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """`x` (a pytree) laid out as `shardings` says (a sharding, a PartitionSpec under `with mesh:`, or a pytree of
    them that is a prefix of `x`'s structure; None leaves a leaf as it is), as `jax.lax.with_sharding_constraint`:
    inside `jit` the program computes the value in that layout, moving data between devices where it must; outside,
    it is `tg.device_put(x, shardings)`. See `tgfx/sharding.py` for the layouts tgfx maps a sharding onto.

    >>> h = tg.lax.with_sharding_constraint(h, NamedSharding(mesh, P("data", None)))   # rows split over the mesh
    """
    from tgfx.transforms.shard import put, shardings_per_leaf
    from tgfx.tree import keystr, tree_flatten_with_path, tree_unflatten
    if shardings is None:
        return x
    flat, treedef = tree_flatten_with_path(x)
    per_leaf = shardings_per_leaf(shardings, x)
    return tree_unflatten(treedef, [leaf if s is None else put(leaf, s, f"with_sharding_constraint{keystr(path)}")
                                    for (path, leaf), s in zip(flat, per_leaf, strict=True)])


_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")


def platform_dependent(*args: Any, default: Callable | None = None, **per_platform: Callable) -> Any:
    """`per_platform[p](*args)` for the platform p the computation runs on, else `default(*args)`, as
    `jax.lax.platform_dependent`. The platform is that of the first array argument's device (the default device
    when there is none): "cpu" for tgfx's CPU devices, "cuda" for its CUDA ones.

    >>> tg.lax.platform_dependent(x, cpu=lambda x: x + 1, default=lambda x: x - 1)     # x + 1 on the CPU
    """
    for name in per_platform:
        if name not in _PLATFORMS:
            hint = " (use 'cuda' or 'rocm')" if name == "gpu" else ""
            raise ValueError(f"lax.platform_dependent: unknown platform {name!r}{hint}; the platforms are "
                             f"{', '.join(_PLATFORMS)}")
    device = next((t.device for t in tree_leaves(args) if isinstance(t, Tensor) and isinstance(t.device, str)),
                  DEFAULT_DEVICE)
    platform = "cuda" if device.upper().startswith("CUDA") else "cpu"
    branch = per_platform.get(platform, default)
    if branch is None:
        raise NotImplementedError(f"lax.platform_dependent: no branch for platform {platform!r} (device {device!r}) "
                                  f"and no default=; give {platform}= or default=")
    return branch(*args)


__all__ = ["igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "betainc", "polygamma", "zeta", "bessel_i0e",
           "bessel_i1e", "stack", "unstack", "split", "tile", "broadcast_to_rank", "empty", "scatter_sub",
           "scatter_apply", "index_take", "approx_max_k", "approx_min_k", "reduce_precision", "mulhi", "FftType",
           "fft", "custom_root", "custom_linear_solve", "optimization_barrier", "with_sharding_constraint",
           "platform_dependent"]
