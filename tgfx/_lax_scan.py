"""`jax.lax`'s reductions, cumulative reductions, sorts, `top_k`, `associative_scan`, `map` and `dot_general`.

Reductions keep the operand's dtype (`reduce_sum` of int8 is int8, as in lax; `tnp.sum` widens it). The bitwise
reductions of integers (`reduce_and`, `reduce_or`, `reduce_xor`) are reductions of the bits: each element is split
into its bits along a new axis, the bits are reduced (min, max, sum mod 2) and put back together.

`associative_scan` is JAX's parallel prefix (Blelloch): combine neighbouring pairs, scan the half-length result
recursively, then fill in the even positions: about 2 log2(n) levels of vectorised calls of `fn`, each over a
strided view of the whole axis, never a loop over elements. The cumulative reductions are `tnp`'s blocked scan
(`tgfx/numpy/_reduce.py`: triangles within blocks of about sqrt(n), then across them): a few kernels.

Sorts are stable and put NaNs last (the order of `tnp.sort`); sorting several operands sorts the first `num_keys`
lexicographically and carries the rest along by a gather of the permutation. `top_k` is a stable descending
argsort, so equal values come out lowest index first, and its values are a gather, differentiable in the operand.

>>> tg.lax.associative_scan(tnp.add, tnp.arange(5))                      # [0, 1, 3, 6, 10]
>>> tg.lax.top_k(tnp.asarray([9.0, 3.0, 6.0, 4.0, 10.0]), 3)             # ([10., 9., 6.], [4, 0, 2])
>>> tg.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))               # a batched matmul: (B, M, K) x (B, K, N)
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from tgfx._lax_ops import BOOL, COMPLEX, FLOAT, INT, NUMBER, check_kind
from tgfx._lax_ops import operand as _arg  # (lax's own argument is called operand)
from tgfx._lax_shape import slice_in_dim
from tgfx.dtypes import DType, dtypes, max_value, min_value, to_dtype, uint_of
from tgfx.function import function
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _linalg, _reduce, _sort
from tgfx.numpy._indexing import take_along_axis
from tgfx.numpy._movement import concatenate, stack
from tgfx.tensor import ArrayLike, Tensor, normalize_axes, normalize_axis, promote, static_int
from tgfx.tree import tree_flatten, tree_unflatten


# ---- reductions ----
def _axes(name: str, x: Tensor, axes: Sequence[int]) -> tuple[int, ...]:
    if isinstance(axes, (int, Tensor)) or not isinstance(axes, Sequence):
        raise TypeError(f"lax.{name}: axes must be a sequence of ints (e.g. (0,)), got {axes!r}")
    return normalize_axes(tuple(axes), x.ndim, f"lax.{name}")


def _reduced_shape(x: Tensor, axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for i, s in enumerate(x.shape) if i not in axes)


def _empty(x: Tensor, axes: tuple[int, ...]) -> bool:
    return any(x.shape[a] == 0 for a in axes)


def reduce_sum(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """The sum over `axes`, in the operand's dtype, as `jax.lax.reduce_sum`."""
    x = _arg(operand)
    check_kind("reduce_sum", x, NUMBER)
    ax = _axes("reduce_sum", x, axes)
    return _reduce.sum(x, axis=ax, dtype=x.dtype) if ax else x


def reduce_prod(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """The product over `axes`, in the operand's dtype, as `jax.lax.reduce_prod`."""
    x = _arg(operand)
    check_kind("reduce_prod", x, NUMBER)
    ax = _axes("reduce_prod", x, axes)
    return _reduce.prod(x, axis=ax, dtype=x.dtype) if ax else x


def _extremum(name: str, operand: ArrayLike, axes: Sequence[int], fn: Callable, empty: Callable) -> Tensor:
    x = _arg(operand)
    check_kind(name, x, BOOL + INT + FLOAT + COMPLEX)   # complex in `tnp.less`'s order, as JAX's
    ax = _axes(name, x, axes)
    if not ax:
        return x
    if _empty(x, ax):   # the reduction's identity, as lax (numpy's max of nothing is an error)
        return Tensor.full(_reduced_shape(x, ax), empty(x.dtype), x.dtype)
    return fn(x, axis=ax)


def reduce_max(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """The maximum over `axes`, as `jax.lax.reduce_max` (NaN wins; over nothing, the dtype's least value)."""
    return _extremum("reduce_max", operand, axes, _reduce.max, min_value)


def reduce_min(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """The minimum over `axes`, as `jax.lax.reduce_min` (NaN wins; over nothing, the dtype's greatest value)."""
    return _extremum("reduce_min", operand, axes, _reduce.min, max_value)


def _bitwise_reduce(name: str, operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    x = _arg(operand)
    check_kind(name, x, BOOL + INT)
    ax = _axes(name, x, axes)
    if not ax:
        return x
    how = name[len("reduce_"):]
    if x.dtype.is_bool:
        b = x.astype(dtypes.int32)
    else:   # each element's bits along a new last axis, so the reduction runs over bits of 0 and 1
        u = uint_of(x.dtype)
        shifts = Tensor.arange(x.dtype.bits, dtype=u)
        b = (x.bitcast(u).reshape(x.shape + (1,)) >> shifts) & 1
    if _empty(x, ax):
        r = Tensor.full(_reduced_shape(b, ax), 1 if how == "and" else 0, b.dtype)
    elif how == "and":
        r = _reduce.min(b, axis=ax)
    elif how == "or":
        r = _reduce.max(b, axis=ax)
    else:
        r = _reduce.sum(b, axis=ax, dtype=b.dtype) & 1   # (a count that wraps keeps its parity)
    if x.dtype.is_bool:
        return r != 0
    return _reduce.sum(r << shifts, axis=-1, dtype=r.dtype).bitcast(x.dtype)   # distinct bits: the sum is the OR


def reduce_and(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """The AND over `axes` (all, for bool), as `jax.lax.reduce_and`; over nothing, all bits set."""
    return _bitwise_reduce("reduce_and", operand, axes)


def reduce_or(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """The OR over `axes` (any, for bool), as `jax.lax.reduce_or`."""
    return _bitwise_reduce("reduce_or", operand, axes)


def reduce_xor(operand: ArrayLike, axes: Sequence[int]) -> Tensor:
    """The XOR over `axes` (odd parity, for bool), as `jax.lax.reduce_xor`."""
    return _bitwise_reduce("reduce_xor", operand, axes)


def _arg_extremum(name: str, fn: Callable, operand: ArrayLike, axis: int, index_dtype: Any) -> Tensor:
    x = _arg(operand)
    check_kind(name, x, BOOL + INT + FLOAT)
    if static_int(axis) is None:
        raise TypeError(f"lax.{name}: axis must be a Python int, got {axis!r}")
    axis = int(axis)
    d = to_dtype(index_dtype)
    if not d.is_int:
        raise TypeError(f"lax.{name}: index_dtype must be an integer type, got {d.name}")
    return fn(x, axis=normalize_axis(axis, x.ndim, f"lax.{name}")).astype(d)


def argmax(operand: ArrayLike, axis: int, index_dtype: Any) -> Tensor:
    """The index of the first maximum along `axis`, as `index_dtype`, as `jax.lax.argmax` (a NaN is the maximum)."""
    return _arg_extremum("argmax", _reduce.argmax, operand, axis, index_dtype)


def argmin(operand: ArrayLike, axis: int, index_dtype: Any) -> Tensor:
    """The index of the first minimum along `axis`, as `index_dtype`, as `jax.lax.argmin` (a NaN is the minimum)."""
    return _arg_extremum("argmin", _reduce.argmin, operand, axis, index_dtype)


# ---- associative_scan ----


def _interleave(a: Tensor, b: Tensor, axis: int) -> Tensor:
    """[a0, b0, a1, b1, ...] along `axis`; a has as many elements as b, or one more."""
    n_out = a.shape[axis] + b.shape[axis]
    if b.shape[axis] < a.shape[axis]:   # b padded to a's length, the pad cut off after merging
        b = b.pad_zeros(tuple((0, 1) if i == axis else (0, 0) for i in range(b.ndim)))
    pairs = stack([a, b], axis + 1)
    merged = pairs.reshape(a.shape[:axis] + (2 * a.shape[axis],) + a.shape[axis + 1:])
    return merged.shrink(tuple((0, n_out) if i == axis else (0, s) for i, s in enumerate(merged.shape)))


def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """The inclusive scan of `elems` along `axis` under the associative `fn`, as `jax.lax.associative_scan`:
    [e0, fn(e0, e1), fn(fn(e0, e1), e2), ...]; with `reverse`, from the end: [..., fn(fn(z, y), x), fn(z, y), z].

    `elems` is a pytree of arrays with the same length along `axis`; `fn(a, b)` takes and returns pytrees of that
    structure and is applied elementwise over the axis (vectorised: it receives whole slices). `fn` need not be
    commutative: the left operand is always the earlier prefix. The scan is a parallel prefix of O(log n)
    vectorised levels (Blelloch's, as JAX's implementation), so the graph grows with log n, not n.

    >>> tg.lax.associative_scan(tnp.add, tnp.arange(4), reverse=True).tolist()    # [6, 6, 5, 3]
    >>> # affine maps x -> a x + b composed left to right: prefix compositions of (a, b) pairs
    >>> tg.lax.associative_scan(lambda f, g: (g[0] * f[0], g[0] * f[1] + g[1]), (a, b))
    """
    leaves, tree = tree_flatten(elems)
    if not leaves:
        raise ValueError("lax.associative_scan: elems has no arrays to scan")
    xs = [_arg(e) for e in leaves]
    if any(t.ndim == 0 for t in xs):
        raise ValueError(f"lax.associative_scan: every leaf of elems needs the scanned axis {axis}; got shapes "
                         f"{[t.shape for t in xs]}")
    ax = normalize_axis(axis, xs[0].ndim, "lax.associative_scan")
    lengths = {t.shape[ax] if t.ndim > ax else None for t in xs}
    if len(lengths) != 1 or None in lengths:
        raise ValueError(f"lax.associative_scan: every leaf of elems must have the same length along axis {axis}, "
                         f"got shapes {[t.shape for t in xs]}")
    if reverse:
        xs = [t.flip(ax) for t in xs]

    def combine(a: list[Tensor], b: list[Tensor]) -> list[Tensor]:
        out, out_tree = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
        if out_tree != tree:
            raise TypeError(f"lax.associative_scan: fn must return the structure of elems, {tree!r}, got {out_tree!r}")
        out = [_arg(t) for t in out]
        for t, ref in zip(out, a, strict=True):
            if t.shape != ref.shape:
                raise TypeError(f"lax.associative_scan: fn must return arrays of its operands' shapes (applied "
                                f"elementwise over the scanned axis); got {t.shape} for operands of shape {ref.shape}")
        return out

    def sl(ts: list[Tensor], start: int, stop: int | None, step: int = 1) -> list[Tensor]:
        return [slice_in_dim(t, start, stop, step, ax) for t in ts]

    def scan(ts: list[Tensor]) -> list[Tensor]:
        n = ts[0].shape[ax]
        if n < 2:
            return ts
        # each level stored (contiguous): a level reads the one below two or three times, and fused through every
        # level those reads would multiply, n-fold in work and kernel size
        pairs = [_reduce.store(t) for t in combine(sl(ts, 0, -1, 2), sl(ts, 1, None, 2))]
        odd = scan(pairs)                                           # prefixes ending at positions 1, 3, 5, ...
        if n % 2 == 0:
            even = combine(sl(odd, 0, -1), sl(ts, 2, None, 2))      # ... and at 2, 4, ..., each from the one before
        else:
            even = combine(odd, sl(ts, 2, None, 2))
        even = [_concat(first, e, ax) for first, e in zip(sl(ts, 0, 1), even, strict=True)]
        return [_reduce.store(_interleave(e, o, ax)) for e, o in zip(even, odd, strict=True)]

    out = scan(xs)
    if reverse:
        out = [t.flip(ax) for t in out]
    return tree_unflatten(tree, out)


def _concat(a: Tensor, b: Tensor, axis: int) -> Tensor:
    """a then b along `axis` (b may be empty)."""
    return a if b.shape[axis] == 0 else concatenate([a, b], axis)


# ---- cumulative reductions ----
def _cumulative(name: str, operand: ArrayLike, axis: int, reverse: bool, kinds: str, pair: Callable,
                masked: Callable) -> Tensor:
    x = _arg(operand)
    check_kind(name, x, kinds)
    if x.ndim == 0:
        raise ValueError(f"lax.{name}: the operand must have at least one axis, got a scalar")
    return _reduce.scan(x, normalize_axis(axis, x.ndim, f"lax.{name}"), reverse, pair, masked)


def cumsum(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Tensor:
    """The running sum along `axis` (from the end with `reverse`), in the operand's dtype, as `jax.lax.cumsum`.

    >>> tg.lax.cumsum(tnp.arange(4), reverse=True).tolist()      # [6, 6, 5, 3]
    """
    return _cumulative("cumsum", operand, axis, reverse, NUMBER, ew.add, _reduce.masked_sum)


def cumprod(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Tensor:
    """The running product along `axis`, in the operand's dtype, as `jax.lax.cumprod`."""
    return _cumulative("cumprod", operand, axis, reverse, NUMBER, ew.multiply, _reduce.masked_product)


def _cum_extremum(name: str, operand: ArrayLike, axis: int, reverse: bool, pair: Callable) -> Tensor:
    x = _arg(operand)
    if x.dtype.is_float and x.ndim > 0:
        # JAX's derivative: that of its associative_scan of max (min), whose ties split a gradient in halves down
        # the scan's tree, so the same tree gives the same shares (the doubling steps' tree gives others)
        # (traced once per signature, as `_reduce.scan`: an eager call replays its schedule)
        return _extremum_scan(x, normalize_axis(axis, x.ndim, f"lax.{name}"), reverse, pair)
    return _cumulative(name, x, axis, reverse, INT + FLOAT + COMPLEX, pair, None)


def _extremum_scan_body(x: Tensor, axis: int, reverse: bool, pair: Callable) -> Tensor:
    return associative_scan(pair, x, reverse=reverse, axis=axis)


_extremum_scan = function(_extremum_scan_body, cache=True)


def cummax(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Tensor:
    """The running maximum along `axis`, as `jax.lax.cummax` (a NaN stays from where it appears; complex values in
    `tnp.less`'s order). Its derivative at ties is JAX's (see `_cum_extremum`)."""
    return _cum_extremum("cummax", operand, axis, reverse, ew.maximum)


def cummin(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Tensor:
    """The running minimum along `axis`, as `jax.lax.cummin`."""
    return _cum_extremum("cummin", operand, axis, reverse, ew.minimum)


def cumlogsumexp(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Tensor:
    """The running log(sum(exp(x))) along `axis`, computed stably, as `jax.lax.cumlogsumexp` (floats)."""
    return _cumulative("cumlogsumexp", operand, axis, reverse, FLOAT, ew.logaddexp, None)


# ---- sorting ----
def _stable_order(keys: list[Tensor]) -> Tensor:
    """The stable permutation (int32) that sorts the rows of `keys` (last axis) lexicographically, NaNs last: a
    stable sort by the last key, then by each earlier one (least significant first)."""
    perm = _sort.argsort(keys[-1], axis=-1)
    for k in reversed(keys[:-1]):
        perm = take_along_axis(perm, _sort.argsort(take_along_axis(k, perm, -1, mode="clip"), axis=-1), -1,
                               mode="clip")
    return perm


def sort(operand: Tensor | Sequence[Tensor], dimension: int = -1, is_stable: bool = True,
         num_keys: int = 1) -> Tensor | tuple[Tensor, ...]:
    """operand sorted ascending along `dimension`, as `jax.lax.sort`; always stable; NaNs last.

    Given a sequence of operands (one shape), they are sorted together: by the first `num_keys` of them,
    lexicographically, the others carried along; the result is a tuple. Complex keys order by real part, then
    imaginary part.

    >>> keys, vals = tg.lax.sort((tnp.asarray([2, 1, 2, 1]), tnp.asarray([1.0, 2.0, 0.0, 5.0])))
    >>> vals.tolist()                                  # [2., 5., 1., 0.]: equal keys keep their order
    """
    single = not isinstance(operand, (list, tuple))
    ts = [_arg(operand)] if single else [_arg(o) for o in operand]
    if not ts:
        raise ValueError("lax.sort: needs at least one operand")
    if len({t.shape for t in ts}) > 1:
        raise TypeError(f"lax.sort: the operands must have the same shape, got {[t.shape for t in ts]}")
    if static_int(num_keys) is None or not 1 <= num_keys <= len(ts):
        raise ValueError(f"lax.sort: num_keys must be an int from 1 to the number of operands ({len(ts)}), got "
                         f"{num_keys!r}")
    num_keys = int(num_keys)
    if ts[0].ndim == 0:
        raise TypeError("lax.sort: the operands must have at least one axis, got scalars")
    ax = normalize_axis(dimension, ts[0].ndim, "lax.sort")
    if single:
        return _sort.sort(ts[0], axis=ax)
    last = [t.permute(*(a for a in range(t.ndim) if a != ax), ax) for t in ts]   # the sorted axis last
    perm = _stable_order(last[:num_keys])
    inv = list(range(ts[0].ndim - 1))
    inv.insert(ax, ts[0].ndim - 1)
    out = tuple(take_along_axis(t, perm, -1, mode="clip").permute(*inv) for t in last)
    return out[0] if single else out


def sort_key_val(keys: ArrayLike, values: ArrayLike, dimension: int = -1,
                 is_stable: bool = True) -> tuple[Tensor, Tensor]:
    """`keys` sorted along `dimension` with `values` permuted alike, as `jax.lax.sort_key_val` (stable)."""
    k, v = sort((_arg(keys), _arg(values)), dimension, is_stable, 1)
    return k, v


def top_k(operand: ArrayLike, k: int, *, axis: int = -1) -> tuple[Tensor, Tensor]:
    """The `k` largest entries along `axis` and their int32 indices, largest first, as `jax.lax.top_k`.

    Floats are ordered as JAX orders them here, by their bits: -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN; equal
    values come out lower index first. Differentiable in the operand: the values are a gather of it.
    A small `k` is k rounds of a row maximum and the first index holding it, k passes over the data (JAX's CPU top_k
    selects too; a sort of 64 rows of 1,000 took 5 ms for k = 5, the rounds 0.04 ms); a larger one sorts.

    >>> vals, idx = tg.lax.top_k(tnp.asarray([1.0, 3.0, 3.0, 2.0]), 2)     # [3., 3.], [1, 2]
    """
    x = _arg(operand)
    check_kind("top_k", x, BOOL + INT + FLOAT)
    if x.ndim == 0:
        raise TypeError("lax.top_k: the operand must have at least one axis, got a scalar")
    ax = normalize_axis(axis, x.ndim, "lax.top_k")
    n = x.shape[ax]
    if static_int(k) is None or not 0 <= k <= n:
        raise ValueError(f"lax.top_k: k must be an int from 0 to the axis length {n} (operand shape {x.shape}), got "
                         f"{k!r}")
    k = int(k)
    last = x.permute(*(a for a in range(x.ndim) if a != ax), ax) if ax != x.ndim - 1 else x
    key = _order_key(last)
    stages = math.ceil(math.log2(max(n, 2)))
    if k <= min(TOP_K_SELECT, stages * (stages + 1)):
        idx = _select_traced(key, k) if k else Tensor.full(key.shape[:-1] + (0,), 0, dtypes.int32)
    else:
        idx = _sort.argsort(key, axis=-1, descending=True)[..., :k].astype(dtypes.int32)   # stable, as JAX's int32
    vals = take_along_axis(last, idx, -1, mode="clip")
    if ax != x.ndim - 1:
        inv = list(range(x.ndim - 1))
        inv.insert(ax, x.ndim - 1)
        vals, idx = vals.permute(*inv), idx.permute(*inv)
    return vals, idx


# top_k selects the k largest one at a time, k passes of two row reductions, while that is cheaper than a sort: its
# network has log2(n) (log2(n) + 1) / 2 stages (55 for n = 1,024), each one costs about two passes or more (64 x 1,000:
# a sort took 500 passes' time, 4,096 x 64 43), and each pass is a kernel in the program (at most this many)
TOP_K_SELECT = 64


def _order_key(x: Tensor) -> Tensor:
    """Integers that order as `top_k` orders `x`: floats by their bits (the sign bit flips the order of the rest)."""
    if x.dtype.is_bool:
        return x.astype(dtypes.int32)
    if not x.dtype.is_float:
        return x
    i = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[x.dtype.itemsize]
    bits = x.bitcast(i)
    return ew.bitwise_xor(bits, ew.bitwise_and(ew.right_shift(bits, i.itemsize * 8 - 1), max_value(i)))


def _select_largest(key: Tensor, k: int) -> Tensor:
    """The int32 positions of the `k` largest of each row of `key` (integers), largest first, lower index first
    among equals: each round takes the largest (key, -position) pair below the last one taken, so a round reads
    only the one before it (a mask of all taken so far grew a term a round: k^2 work)."""
    n = key.shape[-1]
    pos = Tensor.arange(n, dtype=dtypes.int32)
    low = min_value(key.dtype)
    picked: list[Tensor] = []
    best = i = None
    for _ in range(k):
        left = None if i is None else ew.logical_or(key < best, ew.logical_and(key == best, pos > i))
        avail = key if left is None else ew.where(left, key, low)
        best = _reduce.max(avail, axis=-1, keepdims=True)
        hit = avail == best if left is None else ew.logical_and(left, avail == best)
        i = _reduce.min(ew.where(hit, pos, n), axis=-1, keepdims=True)
        picked.append(i)
    return concatenate(picked, axis=-1)


# (a traced function: eagerly, one node in its caller's graph and its schedule kept per signature, where its 2 k rounds
# of ops grew the graph deep enough to be cut into pieces: 28 kernels for k = 5)
_select_traced = function(_select_largest, cache=True)


# ---- map ----
def map(f: Callable, xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001 - JAX's name
    """[f(x) for x in xs] stacked, over the leading axis of every leaf of `xs`, as `jax.lax.map`.

    A `lax.scan` with no carry: `f` is traced once and the loop runs on the device, one element at a time (less
    memory than `vmap`). `batch_size` is accepted for JAX compatibility and ignored.

    >>> tg.lax.map(lambda row: row.sum(), tnp.ones((3, 4))).tolist()     # [4., 4., 4.]
    """
    from tgfx import lax
    return lax.scan(lambda carry, x: (carry, f(x)), (), xs)[1]


# ---- dot products ----
def dot_general(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: DType | str | None = None) -> Tensor:
    """A general tensor contraction, as `jax.lax.dot_general`.

    dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), each a sequence of axes. The
    result's axes are the batch axes, then lhs's remaining axes, then rhs's, each in their order. Operands of
    different dtypes promote (as JAX's dot_general); `preferred_element_type` computes and returns the product in
    that type (int8 operands summed in int32). `precision` is accepted and ignored, as on JAX's CPU backend.

    >>> tg.lax.dot_general(a, b, (((1,), (0,)), ((), ())))                  # a @ b for matrices
    >>> tg.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))).shape       # (B, M, N) from (B, M, K), (B, K, N)
    """
    x, y = promote(_arg(lhs), _arg(rhs), "lax.dot_general")
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        lc, rc, lb, rb = (tuple(int(d) for d in dims) for dims in (lc, rc, lb, rb))
    except (TypeError, ValueError):
        raise TypeError(f"lax.dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), sequences of ints, got {dimension_numbers!r}") from None
    for side, dims, t in (("lhs", lc + lb, x), ("rhs", rc + rb, y)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < t.ndim for d in dims):
            raise TypeError(f"lax.dot_general: the {side} contracting and batch dims {dims} must be distinct axes of "
                            f"the {side} of shape {t.shape}")
    for what, ld, rd in (("contracting", lc, rc), ("batch", lb, rb)):
        ls, rs = tuple(x.shape[d] for d in ld), tuple(y.shape[d] for d in rd)
        if ls != rs:
            raise TypeError(f"lax.dot_general requires {what} dimensions to have the same shape, got lhs {what} dims "
                            f"{ld} of shape {ls} and rhs {what} dims {rd} of shape {rs} (lhs {x.shape}, rhs "
                            f"{y.shape})")
    if preferred_element_type is not None:
        d = to_dtype(preferred_element_type)
        x, y = x.astype(d), y.astype(d)
    lf = tuple(a for a in range(x.ndim) if a not in lc + lb)
    rf = tuple(a for a in range(y.ndim) if a not in rc + rb)
    batch = tuple(x.shape[d] for d in lb)
    m = tuple(x.shape[d] for d in lf)
    n = tuple(y.shape[d] for d in rf)
    k = math.prod(x.shape[d] for d in lc)
    # (batch, M, K) @ (batch, K, N): a broadcast multiply and a sum, fused into one kernel by matmul
    xm = (x.permute(*lb, *lf, *lc) if x.ndim else x).reshape(batch + (math.prod(m), k))
    ym = (y.permute(*rb, *rc, *rf) if y.ndim else y).reshape(batch + (k, math.prod(n)))
    return _linalg.matmul(xm, ym).reshape(batch + m + n)


def dot(lhs: ArrayLike, rhs: ArrayLike, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: DType | str | None = None) -> Tensor:
    """The vector-vector, matrix-vector or matrix-matrix product, as `jax.lax.dot` (lhs's last axis contracted with
    rhs's first); with `dimension_numbers`, `dot_general`.

    >>> tg.lax.dot(tnp.ones((2, 3)), tnp.ones(3)).tolist()      # [3., 3.]
    """
    x, y = _arg(lhs), _arg(rhs)
    if dimension_numbers is None:
        if x.ndim not in (1, 2) or y.ndim not in (1, 2):
            raise ValueError(f"lax.dot: dimension_numbers must be given except for the un-batched matrix-matrix, "
                             f"matrix-vector and vector-vector products; got lhs shape {x.shape}, rhs shape "
                             f"{y.shape}")
        dimension_numbers = (((x.ndim - 1,), (0,)), ((), ()))
    return dot_general(x, y, dimension_numbers, precision, preferred_element_type)


def batch_matmul(lhs: ArrayLike, rhs: ArrayLike, precision: Any = None) -> Tensor:
    """The batched matrix product of (..., M, K) and (..., K, N) with equal batch axes, as `jax.lax.batch_matmul`."""
    x, y = _arg(lhs), _arg(rhs)
    if x.ndim < 2 or x.ndim != y.ndim:
        raise ValueError(f"lax.batch_matmul requires arguments of the same rank, at least 2; got lhs shape {x.shape} "
                         f"and rhs shape {y.shape}")
    if x.shape[:-2] != y.shape[:-2]:
        raise ValueError(f"lax.batch_matmul requires equal batch axes, got lhs shape {x.shape} and rhs shape "
                         f"{y.shape}")
    b = tuple(range(x.ndim - 2))
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), (b, b)), precision)
