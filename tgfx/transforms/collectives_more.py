"""The collectives whose result differs between the examples of the axis: `lax.ppermute`, `lax.pshuffle`,
`lax.psum_scatter`, `lax.all_to_all`, and `lax.axis_size`, as JAX has them inside `vmap(axis_name=)`, `pmap` and
`shard_map`.

As the reducing collectives of `collectives.py`, each is built where it is called from the whole batch of `x` (the
axis in front), as plain array ops over that axis: a ppermute is a gather of the batch's rows, a psum_scatter a sum
then a split of the sum over the examples, an all_to_all a transpose of the axis with a split axis of x. The result
is handed back per example. Under `shard_map` the axis is the one split over the devices, so the multi-device
lowering runs these ops: psum_scatter's sum is the all-reduce, the gathers and transposes move the blocks between
devices by copies.

>>> tg.vmap(lambda x: tg.lax.ppermute(x, "i", [(0, 1), (1, 2), (2, 0)]), axis_name="i")(tnp.arange(3.0))   # [2, 0, 1]
>>> tg.vmap(lambda x: tg.lax.psum_scatter(x, "i"), axis_name="i")(tnp.eye(2))                             # [1, 1]
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx.tensor import Tensor, normalize_axis, to_tensor
from tgfx.transforms.collectives import _bound_at, _names, _over, _stack
from tgfx.tree import tree_map

__all__ = ["all_to_all", "axis_size", "ppermute", "pshuffle", "psum_scatter"]


def _one_name(axis_name: Any, fn: str) -> Any:
    names = _names(axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"lax.{fn}: one axis name is supported, got {axis_name!r}; nest the calls per axis")
    return names[0]


def _no_groups(fn: str, groups: Any) -> None:
    if groups is not None:
        raise NotImplementedError(f"lax.{fn}: axis_index_groups is not supported")


def _axis(axis_name: Any, fn: str) -> tuple[Any, int]:
    """The one axis name a call of `lax.fn` names, and its size (the examples along it)."""
    name = _one_name(axis_name, fn)
    return name, _stack()[_bound_at(name, f"lax.{fn}")].size


def _check_split(fn: str, what: str, shape: tuple[int, ...], size: int, n: int, name: Any, tiled: bool,
                 hint: str = "") -> None:
    """That `what` of x (of `size`) is the axis's size `n`, or with `tiled` a multiple of it."""
    if (size != n) if not tiled else (size % n != 0):
        raise ValueError(f"lax.{fn}: {what} of x (shape {shape}) must be {'a multiple of ' if tiled else ''}the size "
                         f"{n} of axis {name!r}{hint}")


def axis_size(axis_name: Any) -> int:
    """The number of examples along the vmap (or pmap, or shard_map mesh) axis `axis_name`, the product for a tuple
    of names, as `jax.lax.axis_size`: a Python int.

    >>> tg.vmap(lambda x: x / tg.lax.axis_size("i"), axis_name="i")(tnp.ones(4))   # [0.25, 0.25, 0.25, 0.25]
    """
    return math.prod(_stack()[_bound_at(name, "lax.axis_size")].size for name in _names(axis_name))


def ppermute(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """Send each example's `x` (a pytree) to another, as `jax.lax.ppermute`: for each pair (source, destination) of
    `perm`, the destination's result is the source's x; an example that is no pair's destination gets zeros. No two
    pairs may share a source or a destination.

    >>> tg.vmap(lambda x: tg.lax.ppermute(x, "i", [(0, 1), (1, 0)]), axis_name="i")(tnp.asarray([1.0, 2.0]))  # [2, 1]
    """
    import tgfx.numpy as tnp
    name, n = _axis(axis_name, "ppermute")
    pairs = [tuple(p) for p in perm]
    if any(len(p) != 2 for p in pairs):
        raise ValueError(f"lax.ppermute: perm must be a sequence of (source, destination) pairs, got {perm!r}")
    for who, values in (("source", [p[0] for p in pairs]), ("destination", [p[1] for p in pairs])):
        if any(not isinstance(v, (int, np.integer)) or not 0 <= v < n for v in values):
            raise ValueError(f"lax.ppermute: every {who} in perm must be an index in [0, {n}) (the size of axis "
                             f"{name!r}), got perm {perm!r}")
        if len(set(values)) != len(values):
            raise ValueError(f"lax.ppermute: perm names a {who} twice: {perm!r}")
    source = [-1] * n
    for s, d in pairs:
        source[d] = int(s)

    def combine(b: Tensor, k: int) -> Tensor:
        moved = tnp.take(b, tnp.asarray(np.array([max(s, 0) for s in source], np.int32)), axis=0)
        if all(s >= 0 for s in source):
            return moved
        received = np.array([s >= 0 for s in source]).reshape((n,) + (1,) * (b.ndim - 1))
        return tnp.where(tnp.asarray(received), moved, tnp.zeros((), b.dtype))
    return tree_map(lambda leaf: _over(to_tensor(leaf), name, "lax.ppermute", combine, each=True), x)


def pshuffle(x: Any, axis_name: Any, perm: Sequence[int]) -> Any:
    """Example i's result is example perm[i]'s `x` (a pytree), as `jax.lax.pshuffle`; `perm` must be a permutation of
    the axis's positions.

    >>> tg.vmap(lambda x: tg.lax.pshuffle(x, "i", [2, 0, 1]), axis_name="i")(tnp.arange(3.0))   # [2, 0, 1]
    """
    name, n = _axis(axis_name, "pshuffle")
    if sorted(int(p) for p in perm) != list(range(n)):
        raise ValueError(f"lax.pshuffle: perm must be a permutation of range({n}) (the size of axis {name!r}), got "
                         f"{list(perm)!r}")
    return ppermute(x, name, [(int(p), i) for i, p in enumerate(perm)])


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, axis_index_groups: Any = None,
                 tiled: bool = False) -> Any:
    """The sum of `x` (a pytree) over the examples of `axis_name`, split along `scatter_dimension` between them, as
    `jax.lax.psum_scatter`: example i gets the sum's i-th index along that dimension (whose size must be the axis
    size), or with `tiled` its i-th block (the size a multiple of the axis size; the dimension is kept).

    >>> tg.vmap(lambda x: tg.lax.psum_scatter(x, "i"), axis_name="i")(tnp.ones((2, 2)))   # [2, 2]: example i, sum[i]
    """
    import tgfx.numpy as tnp
    _no_groups("psum_scatter", axis_index_groups)
    name, n = _axis(axis_name, "psum_scatter")

    def one(leaf: Any) -> Tensor:
        t = to_tensor(leaf)
        d = normalize_axis(scatter_dimension, t.ndim, "lax.psum_scatter")
        size = t.shape[d]
        _check_split("psum_scatter", f"dimension {d}", t.shape, size, n, name, tiled,
                     "" if tiled else " (tiled=False); tiled=True splits it into blocks")

        def combine(b: Tensor, k: int) -> Tensor:
            total = b.sum(0)
            at = k + d
            if tiled:
                total = total.reshape(total.shape[:at] + (n, size // n) + total.shape[at + 1:])
            return tnp.moveaxis(total, at, 0)
        return _over(t, name, "lax.psum_scatter", combine, each=True)
    return tree_map(one, x)


def all_to_all(x: Any, axis_name: Any, split_axis: int, concat_axis: int, *, axis_index_groups: Any = None,
               tiled: bool = False) -> Any:
    """Split each example's `x` (a pytree) along `split_axis` into one piece per example, send piece j to example j,
    and put the pieces received together along `concat_axis`, as `jax.lax.all_to_all`. Without `tiled`, x's
    split_axis has the axis's size and is removed, and the pieces are stacked into a new axis at `concat_axis`; with
    it, split_axis is cut into blocks and they are concatenated along concat_axis.

    >>> xs = tnp.arange(8.0).reshape(2, 2, 2)            # example i's x[j] goes to example j's result[..., i]
    >>> tg.vmap(lambda x: tg.lax.all_to_all(x, "i", 0, 1), axis_name="i")(xs)
    """
    import tgfx.numpy as tnp
    _no_groups("all_to_all", axis_index_groups)
    name, n = _axis(axis_name, "all_to_all")

    def one(leaf: Any) -> Tensor:
        t = to_tensor(leaf)
        s = normalize_axis(split_axis, t.ndim, "lax.all_to_all")
        c = normalize_axis(concat_axis, t.ndim, "lax.all_to_all")
        size = t.shape[s]
        _check_split("all_to_all", f"split_axis {s}", t.shape, size, n, name, tiled)

        def combine(b: Tensor, k: int) -> Tensor:   # b: (sender j, B1..Bk, x...)
            at = 1 + k + s
            if tiled:
                b = b.reshape(b.shape[:at] + (n, size // n) + b.shape[at + 1:])
            pieces = tnp.moveaxis(b, at, 0)          # (receiver i, sender j, B1..Bk, x without the split, ...)
            out = tnp.moveaxis(pieces, 1, 1 + k + c)
            if not tiled:
                return out
            at = 1 + k + c                            # the senders' blocks, sender-major, into concat_axis
            return out.reshape(out.shape[:at] + (n * out.shape[at + 1],) + out.shape[at + 2:])
        return _over(t, name, "lax.all_to_all", combine, each=True)
    return tree_map(one, x)
