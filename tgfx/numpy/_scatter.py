"""Scatters: `x.at[index].set(v)`, `.add`, `.multiply`, `.min`, `.max`, ... (JAX's functional index updates).

An update reads the index as `_indexing` plans a gather (`_plan`: basic indices as movement ops around the
integer-array part) and runs it backwards: each value lands on the positions its index names by the one-hot compare
of the module docstring of `_indexing`, reduced over the index entries (`_scatter_view`), then combined with x.
An index of whole axes and single runtime positions (`x.at[i].set(row)` in a loop) is a window update instead.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tgfx.dtypes import DType, dtypes
from tgfx.ir.ops import Ops
from tgfx.numpy import _elementwise as ew
from tgfx.numpy._indexing import (
    _check_mode,
    _expand_index,
    _gather,
    _host_mask,
    _in_range,
    _index_array,
    _is_basic,
    _is_scalar_bool,
    _normalize,
    _Plan,
    _plan,
    _scalar_bools_as_axes,
    _sum_exact,
    _unapply_basic,
    _window,
    _window_items,
    _zero,
    getitem,
    window_at,
)
from tgfx.tensor import ArrayLike, Tensor, prod


def _identity(op: str, d: DType) -> bool | int | float:
    """The value that leaves `op`'s reduction unchanged."""
    if op == "add":
        return False if d.is_bool else 0
    if op == "multiply":
        return True if d.is_bool else 1
    big = op == "min"
    if d.is_bool:
        return big
    if d.is_float:
        return float("inf") if big else float("-inf")
    if d.is_unsigned:
        return (1 << d.bits) - 1 if big else 0
    return (1 << (d.bits - 1)) - 1 if big else -(1 << (d.bits - 1))


def _reduce_as(t: Tensor, op: str, axes: tuple[int, ...]) -> Tensor:
    """Reduce with `op` in t's own dtype; min is max of the order-reversed values, bool has only MAX."""
    if not axes:
        return t
    if t.dtype.is_bool:
        if op in ("add", "max"):
            return t._reduce(Ops.MAX, axes, False)
        return ew.logical_not(ew.logical_not(t)._reduce(Ops.MAX, axes, False))
    if op == "min":
        flip = ew.negative if t.dtype.is_float else ew.invert
        return flip(flip(t)._reduce(Ops.MAX, axes, False))
    return t._reduce({"add": Ops.ADD, "multiply": Ops.MUL, "max": Ops.MAX}[op], axes, False)


def _lands_as_identity(op: str, d: DType) -> bool:
    """Whether `op` combines a value with the scatter's identity into that value bit for bit, so that where no update
    lands the combined result is the operand's own, with no mask of where they land: adding -0.0 (`_zero`), taking
    the maximum with -inf or the smallest integer, the minimum with their opposites, multiplying a real by 1. Not
    `set`, nor a complex product (an infinite part times 0 is NaN) or extremum."""
    return op == "add" or (op in ("max", "min", "multiply") and not d.is_complex)


def _scatter_view(y_shape: tuple[int, ...], plan: _Plan, u: Tensor, op: str,
                  mode: str) -> tuple[Tensor, Tensor | None]:
    """The updates u (laid out as index axes then y's other axes) reduced onto the view's positions, and where any
    landed (None where `_lands_as_identity`: the reduce holds the identity there). One kernel loops over (view
    element, index position); `set` first finds the last index to hit each position (a second, smaller kernel), so
    that the last update in C order wins, as numpy's assignment does."""
    rest = plan.rest
    ns = tuple(y_shape[a] for a in plan.axes)
    nb, nr, k = len(plan.bshape), len(rest), len(plan.axes)
    red = tuple(range(nr + k, nr + k + nb))
    # (indexed axes, y's other axes, index axes): the reduce comes out in y's own layout, its indexed rows outermost,
    # each update's row written whole (segment_sum of 5,000 rows of 32 into 1,000 was stored features x segments,
    # an update a strided column, then transposed)
    # u is broadcast over the indexed axes in its own layout and then permuted (a view either way, the same kernel):
    # its gradient, the sum of the scatter's over those axes (a gather), then comes out in u's layout too (as
    # u.permute(...).expand(...), segment_sum's gradient was stored features x rows: a strided gather, 230 us for
    # 5,000 rows of 32)
    full = ns + tuple(y_shape[a] for a in rest) + plan.bshape
    ub = u.reshape(plan.bshape + (1,) * k + u.shape[nb:]).expand(plan.bshape + full[:k + nr]) \
        .permute(*range(nb, nb + k + nr), *range(nb))
    mask = None
    for j, (i, n) in enumerate(zip(plan.idxs, ns, strict=True)):
        idx = _normalize(i.expand(plan.bshape), n, mode)
        pos = Tensor.arange(n, dtype=idx.dtype).reshape(tuple(n if a == j else 1 for a in range(k)) + (1,) * nr +
                                                        (1,) * nb)
        hit = idx.reshape((1,) * (nr + k) + plan.bshape) == pos
        mask = hit if mask is None else ew.logical_and(mask, hit)
    if op == "set":
        order = Tensor.arange(prod(plan.bshape), dtype=dtypes.int32).reshape((1,) * (nr + k) + plan.bshape)
        last = mask.where(order, -1)._reduce(Ops.MAX, red, True) if nb else mask.where(order, -1)
        vals = _sum_exact((order == last).where(ub, _zero(u.dtype)), red)
        landed = (last >= 0).reshape(ns + (1,) * nr)
    else:
        ident = _zero(u.dtype) if op == "add" else Tensor.full((), _identity(op, u.dtype), u.dtype)
        vals = _reduce_as(mask.where(ub, ident), op, red)
        if _lands_as_identity(op, u.dtype):
            # (a mask of where updates land was a scatter of its own, a kernel as long as the values' and another
            # to combine them: x.at[idx].add(v) for 65,536 rows of 64 into 4,096 spent 0.2 ms of 3.3 in it)
            landed = None
        else:   # over the same loops as vals, so both reduces share one kernel (the mask is computed once in it)
            landed = mask.expand(full)._reduce(Ops.MAX, red, False) if nb else mask.expand(full)
    inv = np.argsort(list(plan.axes) + list(rest)).tolist()
    return vals.permute(*inv), None if landed is None else landed.permute(*inv).expand(y_shape)


def scatter(x: Tensor, index: Any, values: ArrayLike, op: str, mode: str | None = None) -> Tensor:
    """x with `values` combined into x[index] by op ('set', 'add', 'multiply', 'min', 'max'): a new Tensor.

    JAX's semantics: values broadcast to the shape of x[index] and are cast to x's dtype; index entries out of range
    (after negative ones count from the end) are dropped (`mode="drop"`, the default; `mode="clip"` clamps them),
    traced and 0-d Tensor indices and Python ints alike;
    repeated entries accumulate for add/multiply/min/max, and for set the last one in C order of the broadcast index
    wins (numpy's rule; JAX leaves the order unspecified). The gradient of min/max shares equally among the values
    tied for a result, x's and the updates' (JAX's rule).
    """
    mode = _check_mode("drop" if mode == "fill" else mode, ("drop", "clip"), "drop", f"at[].{op}")   # JAX: fill drops
    xb, index = _scalar_bools_as_axes(x, index)
    if xb is not x:   # scalar booleans index axes of their own: scattered into x with those axes, then without them
        return scatter(xb, index, values, op, mode).reshape(x.shape)
    if (windowed := _window_scatter(x, index, values, op, mode)) is not None:
        return windowed
    plan = _plan(x, index, "drop" if mode == "drop" else "array")
    if plan is None:  # a scalar int out of range: every update is dropped
        return x
    u = _as_values(values, x)
    shape = plan.out_shape
    try:
        u = u.expand(shape)
    except ValueError as e:
        raise ValueError(f"at[].{op}: cannot broadcast updates of shape {u.shape} to the indexed shape {shape} "
                         f"(x has shape {x.shape})") from e
    if prod(shape) == 0:
        return x
    if op in ("min", "max") and plan.axes and x.dtype.is_float:   # (where updates can meet at one position)
        return _scatter_extremal(x, plan, u, op, mode)
    return _scatter_planned(x, plan, u, op, mode)


def _scatter_planned(x: Tensor, plan: _Plan, u: Tensor, op: str, mode: str) -> Tensor:
    """`scatter` of the updates u, broadcast to the indexed shape, at a plan's positions."""
    if plan.axes and (op == "min" or op == "multiply" and x.dtype.is_bool) and not x.dtype.is_complex:
        # the minimum is the maximum of the order-reversed values (a bool's product is its minimum): as the scatter
        # of a maximum, it is a loop over its updates (`fusion._scatter_reduce`); the flip of a reduce's values
        # was a reduce it does not know, which compared every update with every row (x.at[idx].min(v), 4,096 rows
        # of 64 into 512: 12.9 ms, 65,536 into 4,096: 1.7 s)
        flip = ew.logical_not if x.dtype.is_bool else ew.negative if x.dtype.is_float else ew.invert
        return flip(_scatter_planned(flip(x), plan, flip(u), "max", mode))
    y_shape = plan.basic.out_shape
    if plan.axes:
        nb, p = len(plan.bshape), plan.pos
        u = u.permute(*range(p, p + nb), *range(p), *range(p + nb, u.ndim)) if p else u
        vals, landed = _scatter_view(y_shape, plan, u, op, mode)   # (None: the identity where none lands)
    else:
        vals, landed = u, None  # every position of the view is updated
    combine = {"set": lambda a, b: b, "add": ew.add, "multiply": ew.multiply, "min": ew.minimum, "max": ew.maximum}
    vals = _unapply_basic(vals, plan.basic)
    if landed is None and prod(y_shape) == x.size:  # a basic index is one-to-one: this view is all of x
        return combine[op](x, vals).astype(x.dtype)
    landed = _unapply_basic(Tensor.full(y_shape, True) if landed is None else landed, plan.basic)
    return landed.where(combine[op](x, vals), x).astype(x.dtype)


def _window_scatter(x: Tensor, index: Any, values: ArrayLike, op: str, mode: str) -> Tensor | None:
    """`scatter` (set, add, multiply) at an index of `_window_items` (`x.at[i].set(row)`, `x.at[:, i].add(v)`): one
    window at runtime starts replaced, `where(DYNAMIC_PAD(True), DYNAMIC_PAD(new), x)` as in
    `lax.dynamic_update_slice`, which a loop carry takes in place. A position out of range (mode "drop") writes the
    window's own values back. None for any other index or op."""
    if op not in ("set", "add", "multiply") or (items := _window_items(x, index)) is None:
        return None
    inside = None
    for a, (i, n) in enumerate(zip(items, x.shape, strict=True)):
        if isinstance(i, int) and not 0 <= i < n:
            if mode != "clip":
                return x
            items[a] = min(max(i, 0), n - 1)
        elif isinstance(i, Tensor) and mode == "clip":
            items[a] = ew.clip(i, 0, n - 1)
        elif isinstance(i, Tensor):
            inside = _in_range(i, n) if inside is None else ew.logical_and(inside, _in_range(i, n))
    starts, window = _window(x, items)
    u = _as_values(values, x)
    picked = tuple(n for i, n in zip(items, x.shape, strict=True) if i is None)
    try:
        u = u.expand(picked)
    except ValueError as e:
        raise ValueError(f"at[].{op}: cannot broadcast updates of shape {u.shape} to the indexed shape {picked} "
                         f"(x has shape {x.shape})") from e
    new = u.reshape(window)
    old = window_at(Ops.DYNAMIC_SHRINK, x, starts, window, x.shape) if op != "set" or inside is not None else None
    if op != "set":
        new = (ew.add if op == "add" else ew.multiply)(old, new).astype(x.dtype)
    if inside is not None:
        new = ew.where(inside, new, old)
    placed = window_at(Ops.DYNAMIC_PAD, new, starts, window, x.shape)
    return window_at(Ops.DYNAMIC_PAD, Tensor.full(window, True, dtypes.bool), starts, window, x.shape).where(placed, x)


def _scatter_extremal(x: Tensor, plan: _Plan, u: Tensor, op: str, mode: str) -> Tensor:
    """A min/max scatter with JAX's gradient (its scatter_max JVP rule, transposed): at each position the values
    equal to the result, x's and those of the updates landing there, share its cotangent equally, as a max over
    them all would. The graph's own (x against the max of the updates, then a max of the updates) gave x half and
    split the other half: three tied values got 1/2, 1/4, 1/4. A position no update reaches passes it to x whole."""
    from tgfx.custom import custom_vjp
    gather_mode = "fill" if mode == "drop" else "clip"   # a dropped update reads NaN: it equals no result

    def at(idxs: tuple[Tensor, ...]) -> _Plan:
        return _Plan(plan.basic, plan.axes, tuple(idxs), plan.bshape, plan.pos)

    def fun(x: Tensor, u: Tensor, *idxs: Tensor) -> Tensor:
        return _scatter_planned(x, at(idxs), u, op, mode)

    def fwd(x: Tensor, u: Tensor, *idxs: Tensor) -> tuple[Tensor, tuple]:
        out = fun(x, u, *idxs)
        return out, (x, u, out, idxs)

    def bwd(res: tuple, g: Tensor) -> tuple[Tensor | None, ...]:
        x, u, out, idxs = res
        where = at(idxs)
        won = u == _gather(out, where, gather_mode, None)
        zeros = Tensor.full(x.shape, 0, x.dtype, device=x.device)
        winners = _scatter_planned(zeros, where, won.astype(x.dtype), "add", mode)
        reached = _scatter_planned(zeros, where, Tensor.full(u.shape, 1, x.dtype, device=x.device), "add", mode) > 0
        kept = x == out
        share = g / ew.maximum(winners + kept.astype(x.dtype), 1)   # (0 where no value is tied: NaN everywhere)
        gx = reached.where(kept.where(share, 0), g)
        return (gx, won.where(_gather(share, where, gather_mode, None), 0), *(None,) * len(idxs))

    extremal = custom_vjp(fun)
    extremal.defvjp(fwd, bwd)
    return extremal(x, u, *plan.idxs)


def _as_values(values: ArrayLike, x: Tensor) -> Tensor:
    """Updates as a Tensor of x's dtype (host data is converted on the host and put on x's device, scalars become
    constants)."""
    d = x.dtype
    if isinstance(values, Tensor):
        return values.astype(d)
    arr = np.asarray(values)
    return Tensor.full((), arr.item(), d) if arr.ndim == 0 else Tensor(arr, dtype=d, device=x.uop.device)


class _IndexUpdateRef:
    """`x.at[index]`: the functional forms of `x[index] = v`, `x[index] += v`, ... (see `scatter`), with JAX's keyword
    arguments: `indices_are_sorted` and `unique_indices` are promises JAX may exploit and tgfx does not need;
    `wrap_negative_indices=False` makes a negative index out of range instead of counting from the end."""

    __slots__ = ("x", "index")

    def __init__(self, x: Tensor, index: Any) -> None:
        self.x, self.index = x, index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef(shape={self.x.shape}, index={self.index!r})"

    def _index(self, wrap_negative_indices: bool, mode: str | None, default: str) -> Any:
        return self.index if wrap_negative_indices else _negatives_out_of_range(self.x, self.index, mode or default)

    def get(self, mode: str | None = None, fill_value: ArrayLike | None = None, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        """x[index]; `mode="fill"` gives fill_value (NaN by default) for out-of-range entries, "clip" clamps."""
        return getitem(self.x, self._index(wrap_negative_indices, mode, "clip"), mode, fill_value)

    def _update(self, values: ArrayLike, op: str, mode: str | None, wrap_negative_indices: bool) -> Tensor:
        return scatter(self.x, self._index(wrap_negative_indices, mode, "drop"), values, op, mode)

    def set(self, values: ArrayLike, mode: str | None = None, *, indices_are_sorted: bool = False,  # noqa: A003
            unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        return self._update(values, "set", mode, wrap_negative_indices)

    def add(self, values: ArrayLike, mode: str | None = None, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        return self._update(values, "add", mode, wrap_negative_indices)

    def subtract(self, values: ArrayLike, mode: str | None = None, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        return self._update(ew.negative(_as_values(values, self.x)), "add", mode, wrap_negative_indices)

    def multiply(self, values: ArrayLike, mode: str | None = None, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        return self._update(values, "multiply", mode, wrap_negative_indices)

    mul = multiply   # JAX's other name for it (`x.at[i].mul(v)`)

    def divide(self, values: ArrayLike, mode: str | None = None, *, indices_are_sorted: bool = False,
               unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        """x / (values at index, 1 elsewhere), as JAX: true division, so integers give floats."""
        return ew.true_divide(self.x, self._factors(values, mode, wrap_negative_indices))

    def power(self, values: ArrayLike, mode: str | None = None, *, indices_are_sorted: bool = False,
              unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        """x ** (values at index, 1 elsewhere), as JAX (a repeated index multiplies its exponents)."""
        return ew.power(self.x, self._factors(values, mode, wrap_negative_indices))

    def min(self, values: ArrayLike, mode: str | None = None, *, indices_are_sorted: bool = False,  # noqa: A003
            unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        return self._update(values, "min", mode, wrap_negative_indices)

    def max(self, values: ArrayLike, mode: str | None = None, *, indices_are_sorted: bool = False,  # noqa: A003
            unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        return self._update(values, "max", mode, wrap_negative_indices)

    def apply(self, func: Callable[[Tensor], Tensor], mode: str | None = None, *, indices_are_sorted: bool = False,
              unique_indices: bool = False, wrap_negative_indices: bool = True) -> Tensor:
        """`func` (elementwise) applied to x at index, once per time the index names an element, as JAX."""
        from tgfx._lax_more import apply_counted
        hits = Tensor.full(self.x.shape, 0, dtypes.int32, device=self.x.device).at[self.index]._update(
            1, "add", mode, wrap_negative_indices)
        return apply_counted("at[].apply", self.x, hits, func, unique_indices)

    def _factors(self, values: ArrayLike, mode: str | None, wrap_negative_indices: bool) -> Tensor:
        """`values` at index (a repeated one multiplied), 1 elsewhere: JAX's divide and power of `.at[]`."""
        ones = Tensor.full(self.x.shape, 1, self.x.dtype, device=self.x.device)
        return ones.at[self.index]._update(values, "multiply", mode, wrap_negative_indices)


def _negatives_out_of_range(x: Tensor, index: Any, mode: str) -> Any:
    """`index` with its negative entries made to fall outside their axis (JAX's `wrap_negative_indices=False`):
    past the end, or 0 where "clip" clamps them (below the start clamps to 0). A boolean mask is its positions (an
    index array per axis it spans, none negative); a scalar boolean has no axis of x."""
    items: list[Any] = []
    for i in list(index) if isinstance(index, tuple) else [index]:
        mask = not _is_basic(i) and not _is_scalar_bool(i) and (
            i.dtype.is_bool if isinstance(i, Tensor) else np.asarray(i).dtype == np.bool_)
        items += list(np.nonzero(_host_mask(i) if isinstance(i, Tensor) else np.asarray(i))) if mask else [i]
    out, dims = [], iter(range(x.ndim))
    for i in _expand_index(items, x.ndim + sum(map(_is_scalar_bool, items))):
        d = next(dims) if i is not None and not _is_scalar_bool(i) else None
        if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) and i < 0:
            i = 0 if mode == "clip" else x.shape[d]
        elif d is not None and not _is_basic(i):
            t = _index_array(i, x.uop.device)
            i = ew.where(t < 0, 0 if mode == "clip" else x.shape[d], t)
        out.append(i)
    return tuple(out)


class IndexUpdateHelper:
    """`x.at`: index it to get an `_IndexUpdateRef`, e.g. `x.at[1:, idx].add(1.0)`."""

    __slots__ = ("x",)

    def __init__(self, x: Tensor) -> None:
        self.x = x

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.x, index)
