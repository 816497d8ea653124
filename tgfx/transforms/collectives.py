"""Collectives over a named vmap axis: `vmap(f, axis_name="i")` and, inside `f`, `lax.psum(x, "i")`, `pmean`,
`pmax`, `pmin`, `all_gather` and `axis_index`, as JAX has them.

Inside `f` every value is one example's; a collective's result is a value of the whole batch. It is built where it
is called: the example's graph of `x` is batched (`batch_graph` with the stand-ins' batched values, as vmap does with
`f`'s results), reduced over the batch axis, and handed back as a value that depends on no stand-in, the same for
every example (vmap broadcasts it where it meets batched values). So it is plain tgfx ops: it differentiates, jits and
nests (an inner vmap's collective over an outer axis name batches over the outer axis only). `axis_index` is a
stand-in of its own, whose batched value is the positions 0 .. size - 1.

>>> tg.vmap(lambda x: x - tg.lax.pmean(x, "b"), axis_name="b")(xs)       # centred over the batch
>>> tg.vmap(lambda x: x * tg.lax.axis_index("b"), axis_name="b")(xs)     # example i times i
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tgfx.devices import DEFAULT_DEVICE
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.tensor import Tensor, normalize_axis, to_tensor
from tgfx.trace_state import current
from tgfx.tree import tree_map

_uid = itertools.count()


def _levels() -> int:
    return len(current().differentiating)


@dataclass
class Axis:
    """A vmap axis while its function is traced (`name` None: unnamed): the stand-ins' batched values (the batch axis
    in front), and how many differentiations were running when it was bound (one begun inside its function
    differentiates through its collectives by their transposes, `_transposed`)."""
    name: Any
    size: int
    seeds: dict[UOp, UOp] = field(default_factory=dict)
    levels: int = field(default_factory=_levels)
    linear: dict[Any, UOp] = field(default_factory=dict)   # a linear stand-in's tag -> its batch's stand-in
    choices: dict[UOp, frozenset] = field(default_factory=dict)   # a row's stand-in -> the linear stand-ins' tags


_local = threading.local()


def _stack() -> list[Axis]:
    if not hasattr(_local, "axes"):
        _local.axes = []
    return _local.axes


@contextlib.contextmanager
def bound(axis: Axis) -> Iterator[None]:
    """`axis` is bound while vmap traces its function: by its name, its collectives work; named or not, a collective
    over an outer axis batches through it (`_over`)."""
    _stack().append(axis)
    try:
        yield
    finally:
        _stack().pop()


def _bound_at(name: Any, fn: str) -> int:
    """The position in the stack of the innermost axis named `name`."""
    stack = _stack()
    for i in range(len(stack) - 1, -1, -1):
        if stack[i].name is not None and stack[i].name == name:
            return i
    named = [a.name for a in stack if a.name is not None]
    raise NameError(f"{fn}: unbound axis name: {name!r}. The axis names bound here (by vmap(..., axis_name=...)) are "
                    f"{named}; name the vmap's axis, or call {fn} inside the vmapped function")


def _names(axis_name: Any) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _is_linear_standin(u: UOp) -> bool:
    # (a batch's stand-in over an inner axis too: batched over an outer one in turn)
    return u.op is Ops.PARAM and isinstance(u.tag, tuple) and (u.tag[:1] in (("tangent",), ("cotangent",))
                                                               or u.tag[:2] == ("vmap", "linear batch"))


def _linear_seeds(x: UOp, axis: Axis) -> dict[UOp, UOp]:
    """A stand-in for the batch of each tangent or cotangent stand-in `x` reads (`grad.linear_input`): the value it
    is bound to later (a vjp_fn's cotangent, a jvp's or a linearized function's tangent) may differ between the
    examples, which a graph batched now cannot see in the stand-in itself. `bind_batched` binds the batch's stand-in
    with the stand-in, to the batch of that value."""
    out, own = {}, set(axis.linear.values())   # (a batch over this axis is the same for each of its examples)
    for u in x.toposort():
        if _is_linear_standin(u) and u not in own:
            if u.tag not in axis.linear:
                axis.linear[u.tag] = UOp(Ops.PARAM, u.dtype, (), (-1, (axis.size, *u.shape), u.device),
                                         tag=("vmap", "linear batch", next(_uid)))
            out[u] = axis.linear[u.tag]
    return out


def bind_batched(bind: dict[Any, UOp]) -> dict[UOp, UOp]:
    """For `bind` ({stand-in tag: value}, as `grad.leave_trace` binds), each stand-in for the batch over a bound axis
    of a bound stand-in (`_linear_seeds`: a collective read it) with the batch of the value: innermost axis first,
    as `_batch_all` batches; a batch stand-in is a stand-in other axes batch in turn."""
    from tgfx.transforms.vmap import batch_graph, broadcast_front
    values, out = dict(bind), {}
    grew = True
    while grew:   # (until none is left: an inner axis may batch an outer axis's batch stand-in too)
        grew = False
        for axis in reversed(_stack()):
            for tag, standin in axis.linear.items():
                if tag in values and standin.tag not in values:
                    (v,), (flag,) = batch_graph([values[tag]], axis.seeds, axis.size)
                    out[standin] = values[standin.tag] = v if flag else broadcast_front(v, axis.size)
                    grew = True
    for axis in _stack():
        for choice, tags in axis.choices.items():
            if choice.tag not in values and tags & values.keys():
                varies = any(batch_graph([values[t]], axis.seeds, axis.size)[1][0] for t in tags if t in values)
                out[choice] = values[choice.tag] = _position(axis, choice.device).uop if varies else \
                    UOp.const(dtypes.int32, 0)
    return out


def _batched(x: Tensor, axis: Axis, broadcast: bool = True, linear: bool = True) -> tuple[Tensor, bool]:
    """x over the whole batch, the batch axis in front, and whether x differs between the examples (if not: x
    broadcast, or with `broadcast=False` x as it is). A tangent or cotangent stand-in x reads is batched by a
    stand-in for its batch (`_linear_seeds`); without `linear`, it is taken to be the same for every example."""
    from tgfx.transforms.vmap import batch_graph, broadcast_front
    seeds = {**axis.seeds, **_linear_seeds(x.uop, axis)} if linear else axis.seeds
    (out,), (flag,) = batch_graph([x.uop], seeds, axis.size)
    return Tensor(out if flag or not broadcast else broadcast_front(out, axis.size)), flag


@contextlib.contextmanager
def varying_manual_axes(names: frozenset) -> Iterator[None]:
    """Inside, the vmap axes of these names are a shard_map's with JAX's check_vma=True typing of what varies over
    them: a value every example holds alike is one value, so the transpose of a psum (pmean, pmax, pmin) into it is
    the cotangent as it is (pvary) where that cotangent is the same for every example, and a gradient taken inside
    with respect to an input the same for every example is summed over the axis (the transpose of the implicit
    pvary where it meets what varies: `sum_invariant_gradients`). Outside (vmap, pmap, check_vma=False) a psum's
    transpose is a psum of every example's cotangent, and gradients are per example."""
    before = getattr(_local, "vma", frozenset())
    _local.vma = before | names
    try:
        yield
    finally:
        _local.vma = before


def _vma(name: Any) -> bool:
    return name in getattr(_local, "vma", frozenset())


def sum_invariant_gradients(inputs: Sequence[UOp], grads: list[Tensor]) -> list[Tensor]:
    """Each gradient of an input that every example of a check_vma shard_map axis holds alike, where the gradient
    differs over that axis, summed over it (`varying_manual_axes`): a replicated weight's gradient taken inside a
    shard_map is the sum of every device's, as JAX's. Nothing outside a shard_map."""
    if not getattr(_local, "vma", None) or not _stack():
        return grads
    from tgfx.transforms.vmap import batch_graph
    out = []
    for u, g in zip(inputs, grads, strict=True):
        for axis in _stack():
            if axis.name is not None and _vma(axis.name) and not batch_graph([u], axis.seeds, axis.size)[1][0] \
                    and batch_graph([g.uop], axis.seeds, axis.size)[1][0]:
                g = psum(g, axis.name)
        out.append(g)
    return out


def _over(x: Tensor, name: Any, fn: str, combine: Callable[[Tensor, int], Tensor], each: bool = False,
          reduces: bool = False) -> Tensor:
    """`combine(batch, k)` of x's values over the axis `name`, as one example's value. Inside vmaps nested in that
    axis's, x is first batched over each of them it differs over (innermost first: k leading axes), then over `name`
    (in front), and the result, which differs between those inner examples, is handed back through a stand-in per
    such inner axis (an inner axis x does not differ over, a psum'd value's, the result does not differ over either:
    shard_map's pmean over "data" of a loss psum'd over "model" is one value per device). With `each`, the result
    differs between the examples of `name` too (its axis in front: a ppermute's, a psum_scatter's), and is handed back
    through a stand-in for that axis first. `reduces`: the result is the same for every example (psum, pmean, pmax,
    pmin), which a check_vma shard_map transposes as one value (`varying_manual_axes`)."""
    if x.dtype.is_inexact and _levels() > _stack()[_bound_at(name, fn)].levels:
        return _transposed(x, name, fn, combine, each, reduces and _vma(name))
    return _values(x, name, fn, combine, each)


def _transposed(x: Tensor, name: Any, fn: str, combine: Callable[[Tensor, int], Tensor], each: bool,
                one_value: bool = False) -> Tensor:
    """`_over` for a differentiation begun inside the axis's function. The example's gradient through a collective
    needs every example's cotangent, which its own graph does not hold (the batch's value does not depend on this
    example's input there), so the value passes through a call whose backward is the collective's transpose, as
    JAX's: the examples' cotangents, batched over the axis (summed where the result is the same for all of them), go
    back through the vjp of `combine`, and each example gets its row. So a psum's cotangent is the psum of theirs,
    a ppermute's is permuted back. With `one_value` (a check_vma shard_map's reduction), a cotangent the same for
    every example is that of the one value they hold, passed back as it is (JAX's pvary), not their sum; one that
    differs between them is summed (the transpose of the pvary that made the value meet them)."""
    from tgfx.function import Function
    from tgfx.transforms.control_grad import in_forward_mode
    from tgfx.transforms.grad import vjp
    out = _values(x, name, fn, combine, each)

    def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor | None, ...]:
        if in_forward_mode():
            return _pushforward_node(grads[0], call.inputs[0], name, fn, combine, each), None
        alike = one_value and not _batched(grads[0], _stack()[_bound_at(name, fn)], linear=False)[1]
        # (the input batched again from the call, not kept by this closure: the call's node holds the backward, and
        # an eager graph's cached description the node, which kept the batch, a lazy Tensor, alive after its use)
        x_in = call.inputs[0]
        b = _batch_all(x_in, name, fn)[0]

        def transpose(gb: Tensor, k: int) -> Tensor:
            return vjp(lambda v: combine(v, k), b)[1](gb if each else gb[0] if alike else gb.sum(0))[0]
        return _rows(grads[0], name, fn, transpose, x_in), None
    backward.__qualname__ = f"{fn}.transpose"
    return Function(lambda x, out: (out,), grad_fxn=backward, name=fn)(x, out)[0]


def _pushforward_node(g: Tensor, x: Tensor, name: Any, fn: str, combine: Callable[[Tensor, int], Tensor],
                      each: bool) -> Tensor:
    """The collective's backward where forward mode builds it (`control_grad.forward_mode`), as custom_jvp's
    (`custom._rule_as_transpose`): forward mode transposes this node and never evaluates it, so it is zeros of x's
    type whose transpose is the collective's JVP, as JAX's: the tangents of every example, batched over the axis,
    through the jvp of `combine` (for a linear collective, the collective of the tangents: a psum's tangent is the
    psum of theirs), each example's row of the result its tangent."""
    from tgfx.function import Function
    from tgfx.transforms.jvp import jvp

    def push(ts: tuple[Tensor, ...], call: Any) -> tuple[Tensor | None, ...]:
        # (x read back from the call, not this closure: a vmap nested in the axis batches this node and runs push per
        # example in a vmap of its own, where the closure's x, the first vmap's stand-in, is no longer bound)
        x_in = call.inputs[-1]
        bx = _batch_all(x_in, name, fn)[0]

        def tangent(bt: Tensor, k: int) -> Tensor:
            return jvp(lambda v: combine(v, k), (bx,), (bt,))[1]
        # (a reduction's tangent is the same for every example: no row of the axis is picked, so it stays a value
        # that does not differ over it, as a shard_map's out_specs without the axis need)
        return (_rows(ts[0], name, fn, tangent, x_in, each), *(None,) * (len(call.inputs) - 1))

    def zeros(*args: Tensor) -> tuple[Tensor]:
        # (never evaluated; read from its inputs, so that a vmap batches it where they are: a constant's cotangent,
        # the tangents arriving at it, would be summed over that vmap's examples first)
        anchor = sum((a.sum() * 0).astype(x.dtype) for a in args[1:]) + (args[0].sum() * 0).astype(x.dtype)
        return (Tensor.full(x.shape, 0, x.dtype, device=x.device if isinstance(x.device, str) else None) + anchor,)
    push.__qualname__ = f"{fn}.jvp"
    return Function(zeros, grad_fxn=push, name=f"{fn}.jvp")(*((g,) if g is x else (g, x)))[0]


def _rows(g: Tensor, name: Any, fn: str, f: Callable[[Tensor, int], Tensor], x: Tensor, each: bool = True) -> Tensor:
    """`f(batch, k)` of g's values over the axis `name` (batched as `_values` does), a row per example, each
    example's read at its position (row 0 along an inner axis neither g nor the collective's input `x` differs over:
    the rows are the same there, and the cotangent stays one that does not differ, as a check_vma shard_map's
    transposes need to see). Not handed back through a stand-in, whose value is kept beside the graph: a vjp's
    cotangent placeholder, bound when its pullback is called, would not be bound there. Without `each`, f's result
    has no axis `name` in front (it is the same for each of its examples): only the inner axes' rows are picked."""
    batch, k = _batch_all(g, name, fn)
    rows = f(batch, k)
    axes = _stack()[-k - 1:]
    for i, axis in enumerate(axes):
        if not i and not each:
            continue
        if i and not any(_batched(t, axis, linear=False)[1] for t in (g, x)):
            rows = rows[_row_choice(axis, g.uop, x.uop.device)]
        else:   # (where x is: a shard_map's device tuple)
            rows = rows[_position(axis, x.uop.device)]
    return rows


def _row_choice(axis: Axis, g: UOp, device: Any) -> Tensor | int:
    """Which row of an inner axis `_rows` reads where neither the cotangent `g` nor the collective's input differs
    over it: row 0, unless `g` reads tangent or cotangent stand-ins, whose values may differ there. Then a stand-in
    that `bind_batched` binds with them: to the example's position where a value bound differs over the axis, else
    to 0 (a basis vector of jacrev or jacfwd, a cotangent alike for every example: the row stays one that does not
    differ, as a check_vma shard_map's transposes need to see)."""
    tags = frozenset(u.tag for u in g.toposort() if _is_linear_standin(u))
    if not tags:
        return 0
    choice = UOp(Ops.PARAM, dtypes.int32, (), (-1, (), device or DEFAULT_DEVICE),
                 tag=("vmap", "row choice", next(_uid)))
    axis.choices[choice] = tags
    return Tensor(choice)


def _batch_all(x: Tensor, name: Any, fn: str) -> tuple[Tensor, int]:
    """x over every example of the axis `name` and of the k vmaps nested in it (batched over each, broadcast where x
    is the same for their examples): axes (name, outermost inner, ..., innermost) in front, and k."""
    stack = _stack()
    at = _bound_at(name, fn)
    for axis in reversed(stack[at + 1:]):
        x = _batched(x, axis)[0]
    return _batched(x, stack[at])[0], len(stack) - at - 1


def _values(x: Tensor, name: Any, fn: str, combine: Callable[[Tensor, int], Tensor], each: bool) -> Tensor:
    """`_over`'s value, through which nothing is differentiated (the batch's graph reads the stand-ins' values)."""
    stack = _stack()
    at = _bound_at(name, fn)
    inner = []
    for axis in reversed(stack[at + 1:]):
        x, varies = _batched(x, axis, broadcast=False)
        if varies:
            inner.insert(0, axis)
    x = combine(_batched(x, stack[at])[0], len(inner))
    for axis in ([stack[at]] if each else []) + inner:
        standin = UOp(Ops.PARAM, x.dtype, (), (-1, x.shape[1:], x.uop.device or DEFAULT_DEVICE),
                      tag=("vmap", "collective", next(_uid)))
        axis.seeds[standin] = x.uop
        x = Tensor(standin)
    return x


def _collective(fn: str, combine: Callable[[Tensor], Tensor]) -> Callable[..., Any]:
    def collective(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
        if axis_index_groups is not None:
            raise NotImplementedError(f"lax.{fn}: axis_index_groups is not supported")

        def one(leaf: Any) -> Tensor:
            t = to_tensor(leaf)
            for name in _names(axis_name):
                t = _over(t, name, f"lax.{fn}", lambda b, k: combine(b), reduces=True)
            return t
        return tree_map(one, x)
    collective.__name__ = collective.__qualname__ = fn
    collective.__doc__ = (f"The {fn[1:]} of `x` (a pytree) over the examples of the vmap axis (or axes) `axis_name`, "
                          f"as `jax.lax.{fn}`: the same value for every example.")
    return collective


psum = _collective("psum", lambda b: b.sum(0))
pmean = _collective("pmean", lambda b: b.mean(0))
pmax = _collective("pmax", lambda b: b.max(0))
pmin = _collective("pmin", lambda b: b.min(0))


def all_gather(x: Any, axis_name: Any, *, axis_index_groups: Any = None, axis: int = 0, tiled: bool = False) -> Any:
    """Every example's `x` (a pytree), stacked along `axis` (concatenated with `tiled`), as `jax.lax.all_gather`
    over a vmap axis: the same value for every example."""
    from tgfx.numpy import moveaxis
    if axis_index_groups is not None:
        raise NotImplementedError("lax.all_gather: axis_index_groups is not supported")

    def gather(b: Tensor, k: int) -> Tensor:   # b: (n, B1..Bk, ...) -> the example's axes with n at `axis`
        ax = k + normalize_axis(axis, b.ndim - 1 - k + (0 if tiled else 1), "lax.all_gather")
        if not tiled:
            return moveaxis(b, 0, ax)
        moved = moveaxis(b, 0, ax)   # (..., n, m, ...) -> (..., n * m, ...)
        return moved.reshape(moved.shape[:ax] + (moved.shape[ax] * moved.shape[ax + 1],) + moved.shape[ax + 2:])
    return tree_map(lambda leaf: _over(to_tensor(leaf), axis_name, "lax.all_gather", gather), x)


def _position(axis: Axis, device: str | tuple[str, ...] | None = None) -> Tensor:
    """The position of this example along `axis`: a stand-in whose batched value is 0 .. size - 1, on `device` (a
    device tuple: replicated over it, as the values of a shard_map it indexes are laid out)."""
    device = device or DEFAULT_DEVICE
    standin = UOp(Ops.PARAM, dtypes.int32, (), (-1, (), device), tag=("vmap", "axis_index", next(_uid)))
    positions = Tensor.arange(axis.size, dtype=dtypes.int32)
    if type(device) is tuple:
        from tgfx.transforms.shard import shard
        positions = shard(positions, device)
    axis.seeds[standin] = positions.uop
    return Tensor(standin)


def axis_index(axis_name: Any) -> Tensor:
    """The position of this example along the vmap axis `axis_name` (int32), as `jax.lax.axis_index`."""
    return _position(_stack()[_bound_at(axis_name, "lax.axis_index")])


def pmap(fun: Callable | None = None, axis_name: Any = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | tuple[int, ...] = (), devices: Any = None, backend: Any = None,
         axis_size: int | None = None, donate_argnums: Any = ()) -> Any:
    """`jax.pmap`'s spelling: `fun` mapped over an axis of its arguments (the leading one by default), its examples
    combined by the collectives over `axis_name`, compiled once per signature.

    tgfx runs the mapped axis as a `vmap` on the default device, under `jit`: the same values as JAX's pmap, computed
    in one batched program instead of one per device (so the axis may be longer than the device count). `devices`,
    `backend` and `donate_argnums` are accepted for compatibility and do not place anything; to spread work over
    devices, shard arrays over a device tuple (`tg.shard`, `tg.psum`).

    >>> tg.pmap(lambda x: x / tg.lax.psum(x, "i"), axis_name="i")(tnp.arange(1.0, 4.0))   # [1/6, 2/6, 3/6]
    """
    from tgfx.transforms.jit import jit
    from tgfx.transforms.vmap import vmap
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums, devices=devices,
                                 backend=backend, axis_size=axis_size, donate_argnums=donate_argnums)
    static = (static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int) \
        else tuple(static_broadcasted_argnums)

    def mapped(*args: Any) -> Any:
        fixed = {i % len(args): args[i] for i in static}
        dynamic = [a for i, a in enumerate(args) if i not in fixed]
        axes = in_axes
        if isinstance(in_axes, (tuple, list)) and fixed:
            axes = tuple(a for i, a in enumerate(in_axes) if i not in fixed)

        def per_example(*dyn: Any) -> Any:
            it = iter(dyn)
            return fun(*(fixed[i] if i in fixed else next(it) for i in range(len(args))))
        return vmap(per_example, in_axes=axes, out_axes=out_axes, axis_size=axis_size, axis_name=axis_name)(*dynamic)
    functools.update_wrapper(mapped, fun)
    return jit(mapped, static_argnums=static)


__all__ = ["Axis", "bound", "bind_batched", "varying_manual_axes", "sum_invariant_gradients", "psum", "pmean", "pmax",
           "pmin", "all_gather", "axis_index", "pmap"]
