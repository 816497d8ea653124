"""Sorting with static shapes, by one of two algorithms chosen per row length.

Short rows: each element's rank is counted, then elements are scattered to their ranks.

    rank[i] = #{j : x[j] < x[i]  or  (x[j] == x[i] and j < i)}

is a permutation of 0..n-1 (ties broken by position, so the sort is stable), computed by one fused compare-and-sum
kernel. `argsort` then picks, for each rank r, the i with rank[i] == r, and `sort` the x[i]: a second one-hot
reduce. Two kernels, O(n^2) compares per sorted row, no data-dependent control flow.

Long rows (a dataset's permutation, an argsort of 60,000 scores): a bitonic network over the row padded to a power
of two m, O(m log^2 m) compares in log2(m) (log2(m) + 1) / 2 dependent passes. Each pass is one step of a
`tg.lax.fori_loop` (compiled once: the pass's partner distance and direction are read from a table by the step),
whose element i compares itself with element i ^ j, read by a gather (one load, tgfx/lowering/gather.py). Elements
carry their position and compare by (value, position), so this sort is stable too, and padding sorts last. The
network is used where its passes cost less than the n^2 compares (`_use_network`).

In both, NaNs compare greater than everything and equal to each other, so they go last as numpy's sort puts them.
Complex values compare by real part, then imaginary part, each in that order (JAX's and numpy's).
"""
from __future__ import annotations

import numpy as np

from tgfx.dtypes import dtypes, uint_of
from tgfx.function import function
from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.numpy._complex import imag, real
from tgfx.numpy._indexing import _zero
from tgfx.tensor import ArrayLike, Tensor, normalize_axis, to_tensor


def _less(a: Tensor, b: Tensor) -> Tensor:
    """a < b in the order that puts NaN last (complex values: by the real parts, then the imaginary parts)."""
    if a.dtype.is_complex:
        ra, rb = real(a), real(b)
        return ew.logical_or(_less(ra, rb), ew.logical_and(_equal(ra, rb), _less(imag(a), imag(b))))
    if not a.dtype.is_float:
        return a < b
    return ew.logical_or(a < b, ew.logical_and(ew.isnan(b), ew.logical_not(ew.isnan(a))))


def _equal(a: Tensor, b: Tensor) -> Tensor:
    if a.dtype.is_complex:
        return ew.logical_and(_equal(real(a), real(b)), _equal(imag(a), imag(b)))
    if not a.dtype.is_float:
        return a == b
    return ew.logical_or(a == b, ew.logical_and(ew.isnan(a), ew.isnan(b)))


def _ranks(x: Tensor) -> Tensor:
    """The stable ascending rank of each element along the last axis (int32, x's shape)."""
    n = x.shape[-1]
    key = x.astype(dtypes.int8) if x.dtype.is_bool else x
    xi = key.reshape(key.shape + (1,))          # the element being ranked, along axis -2
    xj = key.reshape(key.shape[:-1] + (1, n))   # every element it is compared with, along axis -1
    i = Tensor.arange(n, dtype=dtypes.int32).reshape(n, 1)
    j = Tensor.arange(n, dtype=dtypes.int32).reshape(1, n)
    before = ew.logical_or(_less(xj, xi), ew.logical_and(_equal(xj, xi), j < i))
    return before.astype(dtypes.int32)._reduce(Ops.ADD, -1, False)


def _to_ranks(values: Tensor, ranks: Tensor) -> Tensor:
    """out[..., r] = values[..., i] for the i with ranks[..., i] == r (a one-hot sum over i)."""
    n = ranks.shape[-1]
    r = Tensor.arange(n, dtype=dtypes.int32).reshape(n, 1)
    hit = ranks.reshape(ranks.shape[:-1] + (1, n)) == r
    v = values.reshape(values.shape[:-1] + (1, n))
    return hit.where(v, _zero(values.dtype))._reduce(Ops.MAX if values.dtype.is_bool else Ops.ADD, -1, False)


# what one pass of the network costs beside its compares, in compares: a kernel launch and a loop step on the device
# take microseconds, which the rank sort's vectorised compares (a fraction of a nanosecond each) fill about this many of
PASS_OVERHEAD_COMPARES = 1 << 14


def _network_passes(m: int) -> list[tuple[int, int]]:
    """The (block size k, partner distance j) of each pass of a bitonic network over m = 2^p elements."""
    out, k = [], 2
    while k <= m:
        j = k // 2
        while j >= 1:
            out.append((k, j))
            j //= 2
        k *= 2
    return out


def _use_network(n: int) -> bool:
    """Whether rows of `n` sort faster by the bitonic network than by counting ranks (n^2 compares)."""
    m = 1 << max(n - 1, 1).bit_length()
    return n * n > len(_network_passes(m)) * (m + PASS_OVERHEAD_COMPARES)


def _argsort_network(x: Tensor) -> Tensor:
    """The stable ascending argsort of each row along the last axis, by the bitonic network (see the module)."""
    from tgfx import lax
    from tgfx.numpy._indexing import take_along_axis
    n = x.shape[-1]
    m = 1 << (n - 1).bit_length()
    key = x.astype(dtypes.int8) if x.dtype.is_bool else x
    if m > n:   # padding: any value, positions >= n sort last whatever it is
        key = key.pad_zeros(((0, 0),) * (key.ndim - 1) + ((0, m - n),))
    pos = Tensor.arange(m, dtype=dtypes.int32)
    passes = np.array(_network_passes(m), np.int32)
    ks, js = Tensor(passes[:, 0].copy()), Tensor(passes[:, 1].copy())

    def before(ka: Tensor, ia: Tensor, kb: Tensor, ib: Tensor) -> Tensor:
        """(ka, ia) sorts before (kb, ib): by value then position; a padding position after every real one."""
        by_value = ew.logical_or(_less(ka, kb), ew.logical_and(_equal(ka, kb), ia < ib))
        return ew.logical_or(ia >= n, ib >= n).where(ia < ib, by_value)

    def one_pass(step: Tensor, carry: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        key, idx = carry
        k, j = ks[step], js[step]
        partner = ew.bitwise_xor(pos, j).expand(key.shape)
        other_key = take_along_axis(key, partner, -1, mode="clip")
        other_idx = take_along_axis(idx, partner, -1, mode="clip")
        # the lower element of a pair keeps the smaller of the two in an ascending block, the larger in a descending
        keep_min = ew.bitwise_and(pos, j) == 0
        ascending = ew.bitwise_and(pos, k) == 0
        take = (keep_min == ascending).where(before(other_key, other_idx, key, idx),
                                             before(key, idx, other_key, other_idx))
        return take.where(other_key, key), take.where(other_idx, idx)

    _, idx = lax.fori_loop(0, len(passes), one_pass, (key, pos.expand(key.shape)))
    return idx[..., :n] if m > n else idx


# eagerly, the network's traced body is kept per shape and dtype: a sort is a schedule's replay, not a trace of its
# loop and an abstraction of the graph each call (10,000 floats: 1.7 ms of Python before the 1.8 ms sort)
_argsort_network_traced = function(_argsort_network, cache=True)


def _order_key(x: Tensor) -> Tensor:
    """Unsigned integers ordered as the floats x, NaN last (above +inf) and -0.0 equal to 0.0, as `sort` orders them:
    a non-negative float's bits with the sign bit set, a negative one's inverted; every NaN the largest integer."""
    u = uint_of(x.dtype)
    sign = Tensor.full((), 1 << (x.dtype.bits - 1), u)
    b = (x == 0).where(_zero(x.dtype), x).bitcast(u)
    key = (ew.bitwise_and(b, sign) != 0).where(ew.invert(b), ew.bitwise_or(b, sign))
    return ew.isnan(x).where(Tensor.full((), (1 << x.dtype.bits) - 1, u), key)


def kth_smallest(x: Tensor, k: Tensor) -> Tensor:
    """The k-th smallest (from 0) float along x's last axis, NaNs last as in `sort`, for each k along k's last axis
    (k: int32 of shape x.shape[:-1] + (q,), each in [0, n)). Where the rows are long, a bitwise search on `_order_key`
    instead of a sort: the largest key c with #{key < c} <= k is the k-th smallest, built from the top bit down in
    one counting pass a bit (32 for float32, `tg.lax.fori_loop` steps), where the bitonic network takes
    log2(n) (log2(n) + 1) / 2 passes that each also move the row (65,536 elements: 136; a median 17 -> 0.4 ms)."""
    if not x.dtype.is_float or x.dtype.itemsize < 4 or not _use_network(x.shape[-1]):
        return _take(sort(x, axis=-1), k)
    from tgfx import lax
    k = k.expand(x.shape[:-1] + k.shape[-1:])
    key = _order_key(x).reshape(x.shape[:-1] + (1, x.shape[-1]))
    bits = x.dtype.bits
    table = Tensor(np.array([1 << (bits - 1 - i) for i in range(bits)], key.dtype.np))

    def step(i: Tensor, c: Tensor) -> Tensor:
        cand = ew.bitwise_or(c, table[i])
        below = (key < cand.reshape(cand.shape + (1,))).astype(dtypes.int32)._reduce(Ops.ADD, -1, False)
        return (below <= k).where(cand, c)

    c = lax.fori_loop(0, bits, step, Tensor.full(k.shape, 0, key.dtype))
    # read the element itself, so the gradient reaches it: the (k - #{key < c})-th of those equal to c in position
    # order, the one a stable sort puts at k (as JAX's sort routes the gradient of tied values)
    from tgfx.numpy import _reduce as rd
    wanted = c.reshape(c.shape + (1,))
    below = (key < wanted).astype(dtypes.int32)._reduce(Ops.ADD, -1, False)
    equal = key == wanted
    nth = rd.cumsum(equal.astype(dtypes.int32), axis=-1) == (k - below + 1).reshape(k.shape + (1,))
    return _take(x, rd.argmax(ew.logical_and(equal, nth), axis=-1).astype(dtypes.int32))


def _take(x: Tensor, k: Tensor) -> Tensor:
    from tgfx.numpy._indexing import take_along_axis
    return take_along_axis(x, k, -1, mode="clip")


def _last_axis(x: Tensor, axis: int | None, fn: str) -> tuple[Tensor, int | None]:
    if axis is None:
        return x.reshape(-1), None
    if x.ndim == 0:
        raise np.exceptions.AxisError(f"{fn}: axis {axis} is out of bounds for a 0-d Tensor; use axis=None")
    axis = normalize_axis(axis, x.ndim, fn)
    return x.permute(*(a for a in range(x.ndim) if a != axis), axis), axis


def _restore(t: Tensor, axis: int | None, ndim: int) -> Tensor:
    if axis is None:
        return t
    order = list(range(ndim - 1))
    order.insert(axis, ndim - 1)
    return t.permute(*order)


def _argsort_last(x: Tensor, descending: bool) -> Tensor:
    n = x.shape[-1]
    if descending:  # JAX: reverse, stable ascending sort, reverse back; equal elements keep their order
        return (n - 1) - _argsort_last(x.flip(-1), False).flip(-1)
    if n <= 1 or x.size == 0:
        return Tensor.full(x.shape, 0, dtypes.int32)
    if _use_network(n):
        return _argsort_network_traced(x)
    iota = Tensor.arange(n, dtype=dtypes.int32).expand(x.shape)
    return _to_ranks(iota, _ranks(x))


def argsort(a: ArrayLike, axis: int | None = -1, kind: str | None = None, stable: bool = True,
            descending: bool = False) -> Tensor:
    """numpy.argsort: the indices (the default integer, int64 with x64, as JAX) that sort `a` along `axis` (the
    flattened `a` when None).

    Always stable (`stable` and `kind` are accepted for numpy/JAX compatibility); NaNs sort last. With
    `descending=True` the order is reversed but equal elements keep their original order, as in JAX.
    Cost: two kernels, O(n^2) compares per row of length n; long rows a bitonic network, O(n log^2 n).

    >>> tnp.argsort(tnp.asarray([3.0, 1.0, float("nan"), 1.0])).tolist()
    [1, 3, 0, 2]
    """
    x = to_tensor(a)
    t, ax = _last_axis(x, axis, "argsort")
    return _restore(_argsort_last(t, descending), ax, x.ndim).astype(dtypes.default_int)


def sort(a: ArrayLike, axis: int | None = -1, kind: str | None = None, stable: bool = True,
         descending: bool = False) -> Tensor:
    """numpy.sort: `a` sorted ascending along `axis` (the flattened `a` when None), NaNs last; a new Tensor.

    `descending=True` sorts largest first (NaNs first, as JAX). Cost: as `argsort`'s.
    -0.0 and 0.0 compare equal: their order is their input order, and each keeps its sign.
    """
    x = to_tensor(a)
    t, ax = _last_axis(x, axis, "sort")
    if t.shape[-1] <= 1 or t.size == 0:
        return x if axis is not None else t
    if _use_network(t.shape[-1]):
        from tgfx.numpy._indexing import take_along_axis
        out = take_along_axis(t, _argsort_network_traced(t), -1, mode="clip")
    else:
        out = _to_ranks(t, _ranks(t))
    return _restore(out.flip(-1) if descending else out, ax, x.ndim)
