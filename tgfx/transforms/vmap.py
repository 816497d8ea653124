"""`vmap`: vectorise a function over a batch axis by rewriting its graph, as `jax.vmap` does.

`vmap(f)(xs)` does not loop over the examples. It traces `f` once on *stand-ins* of one example's shape (a tagged
`PARAM` per mapped argument), so `f` builds an ordinary graph of per-example ops, and then rewrites that graph with
`pm_batch`, a table of batching rules. The batch axis is kept in front (axis 0) inside the pass: each stand-in becomes
its argument with the mapped axis moved to the front, and every node that depends on a stand-in is rebuilt in its
batched form:

- elementwise ops (ALU, CAST, BITCAST, WHERE) take batched sources as they are; an unbatched source is broadcast
  with a new leading axis (RESHAPE + EXPAND: a view, nothing is copied);
- the six movement ops and REDUCE_AXIS shift their axes by one and gain the batch axis in their shape arguments;
- CONTIGUOUS and COPY keep their tag and destination;
- a FUNCTION (from `tg.function`, or `jit` called inside) or a precompiled CALL gets its body batched in turn, with
  the PARAMs of its mapped arguments batched; a stand-in the body closes over becomes an extra argument;
- a LOOP (`tg.lax`'s loops) stays one LOOP over its body batched in the slots of its batched operands, with JAX's
  rules for carries the body makes batched and for examples that stop at different steps (`vmap_control.py`);
- a SWITCH (`tg.lax.cond`, `switch`) stays one SWITCH over batched branches if its index is unbatched, and becomes a
  select over every branch's results if it is batched, as in JAX (`vmap_control.py`);
- an opaque custom kernel has no batching rule: an error names it.

Nodes that do not depend on a stand-in (constants, IOTA, unmapped arguments, closures) are never touched, so an
unmapped weight stays one weight: `vmap(lambda x: x @ w)(xs)` runs the kernels `xs @ w` runs. Gathers, sorts,
einsums and softmaxes need no rules of their own: the front end builds them from these primitives.

Every transform composes because the result is a plain graph: `vmap(grad(f))` batches the gradient graph that `grad`
built on the stand-ins (per-example gradients), `grad(vmap(f))` differentiates the batched graph, `jit(vmap(f))`
traces it once and replays it, and `vmap(vmap(f))` batches the inner result again.
"""
from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgfx.dtypes import dtypes
from tgfx.function import _describe_paths, is_grad_input
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat
from tgfx.ir.uop import UOp
from tgfx.lowering.inline import outside_bodies
from tgfx.tensor import Tensor, is_weak, to_tensor, weak, weak_like
from tgfx.trace_state import effect_chain, record_owner, tracing
from tgfx.transforms.collectives import Axis, bound
from tgfx.transforms.grad import CallInfo, Transformed, _call_name
from tgfx.tree import KeyPath, keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

_uid = itertools.count()
STANDIN = "vmap"  # the first element of a stand-in PARAM's tag


# ---- the batching pass ----
@dataclass
class BatchCtx:
    """State of one batching pass over one graph level (a FUNCTION body is a level of its own)."""
    size: int                                   # the batch size B
    new: dict[UOp, UOp]                         # original node -> its replacement (the batched form, if it carries)
    batched: set[UOp] = field(default_factory=set)  # original nodes whose replacement has the batch axis in front
    flags: dict[UOp, tuple[bool, ...]] = field(default_factory=dict)  # original call or LOOP -> batched results
    results: dict[UOp, tuple[UOp, ...]] = field(default_factory=dict)  # original LOOP -> the value of each result
    standins: frozenset[UOp] = frozenset()      # stand-ins batched at this level (closures over them are lifted)

    def value(self, u: UOp) -> UOp:
        """`u`'s batched form: its replacement if it carries the batch axis, else broadcast along a new one."""
        new = self.new.get(u, u)
        return new if u in self.batched else broadcast_front(new, self.size)

    def carries(self, u: UOp) -> bool:
        """Whether `u` depends on a batched value, so that its batching rule must run."""
        if u.op is Ops.GETTUPLE:  # one result of a call: batched if that result of the batched body is
            flags = self.flags.get(u.src[0])
            return flags is not None and flags[u.arg]
        if u.op in (Ops.FUNCTION, Ops.CALL):
            return any(a in self.batched for a in u.src[1:]) or bool(closed_over(u.src[0], self.standins))
        return any(s in self.batched for s in outside_bodies(u))


def broadcast_front(u: UOp, size: int) -> UOp:
    """An unbatched value with a new leading axis of `size`: a view (RESHAPE + EXPAND), never a copy."""
    shape = u.shape
    base = u.src[0] if u.op is Ops.RESHAPE else u  # one reshape, not a reshape of a reshape
    r = base if base.shape == (1, *shape) else UOp(Ops.RESHAPE, u.dtype, (base,), (1, *shape))
    return r if size == 1 else UOp(Ops.EXPAND, u.dtype, (r,), (size, *shape))


def move_axis(u: UOp, src: int, dst: int) -> UOp:
    """`u` with axis `src` moved to position `dst` (a PERMUTE, or `u` itself)."""
    order = [a for a in range(len(u.shape)) if a != src]
    order.insert(dst, src)
    return u if order == sorted(order) else UOp(Ops.PERMUTE, u.dtype, (u,), tuple(order))


_CALLS = (Ops.FUNCTION, Ops.CALL, Ops.LOOP, Ops.SWITCH)


def closed_over(body: UOp, standins: frozenset[UOp]) -> list[UOp]:
    """The stand-ins a function body reads directly (from a closure) rather than through its arguments."""
    if not standins:
        return []
    return sorted((u for u in body.toposort() if u in standins), key=lambda u: u.tag[1])


def batch_graph(roots: Sequence[UOp], seeds: dict[UOp, UOp], size: int, standins: frozenset[UOp] = frozenset(),
                renamed: dict[UOp, UOp] | None = None) -> tuple[list[UOp], list[bool]]:
    """Rewrite `roots` with `seeds` (node -> its batched value, batch axis in front) by `pm_batch`, and `renamed`
    (node -> its unbatched replacement: a loop body's PARAM moved to another slot) substituted alongside.

    Returns the new roots and, for each, whether it carries the batch axis. Nodes that depend on no seed come back
    unchanged (or renamed). Nodes are visited sources first; FUNCTION, CALL and LOOP bodies are batched by their
    own rules.

    >>> x = UOp(Ops.PARAM, dtypes.float32, (), (0, (3,), "CPU:0"))
    >>> xs = UOp(Ops.PARAM, dtypes.float32, (), (0, (5, 3), "CPU:0"))
    >>> batch_graph([x.alu(Ops.EXP)], {x: xs}, 5)   # ([EXP(xs)], [True])
    """
    ctx = BatchCtx(size, {**(renamed or {}), **seeds}, set(seeds),
                   standins=frozenset(standins) | {s for s in seeds if is_standin(s)})
    for u in UOp(Ops.SINK, None, tuple(roots)).toposort(outside_bodies)[:-1]:
        if u in ctx.new:
            continue
        if ctx.carries(u):
            new = pm_batch.rewrite(u, ctx)
            if new is None:
                raise NotImplementedError(f"vmap: no batching rule for {u.op.name} (dtype {u.dtype!r}, arg {u.arg!r})")
            ctx.new[u] = new
            if u.op not in _CALLS:
                ctx.batched.add(u)
            continue
        if u.op is Ops.GETTUPLE and u.src[0] in ctx.results:  # an unbatched result of a batched LOOP
            ctx.new[u] = ctx.results[u.src[0]][u.arg]
            continue
        # not batched, but a source may be rebuilt (an unbatched result of a batched call, a renamed PARAM)
        outside = outside_bodies(u)
        src = tuple(ctx.new.get(s, s) for s in outside)
        if src != outside:
            ctx.new[u] = u.replace(src=(*u.src[:len(u.src) - len(outside)], *src))
    return [ctx.new.get(r, r) for r in roots], [r in ctx.batched for r in roots]


def is_standin(u: UOp) -> bool:
    return u.op is Ops.PARAM and isinstance(u.tag, tuple) and u.tag[:1] == (STANDIN,)


# ---- rules ----
def on_batched(ctx: BatchCtx, x: UOp, arg: Any) -> UOp:
    """`x` applied to its (one, batched) source's batched form, with `arg` for the leading batch axis."""
    return x.replace(src=(ctx.new[x.src[0]],), arg=arg)


def batch_memory(ctx: BatchCtx, x: UOp) -> UOp:
    return ctx.new[x.src[0]] if is_grad_input(x) else on_batched(ctx, x, x.arg)


def batch_call(ctx: BatchCtx, x: UOp) -> UOp:
    """FUNCTION or precompiled CALL: a new call of the same kind whose body is batched in the PARAMs of its mapped
    arguments; stand-ins the body closes over become extra (batched) arguments."""
    body, args = x.src[0], x.src[1:]
    name = _call_name(x)
    if body.op is Ops.CALLBACK:
        return batch_callback(ctx, x)
    if body.op is not Ops.TUPLE:
        raise NotImplementedError(
            f"vmap: cannot batch custom kernel {name!r}: it is an opaque CALL written for one example's shapes. "
            f"Call it outside vmap on the whole batch (write the kernel for the batched shapes), or apply vmap to "
            f"the code around it only")
    own = {u.arg[0]: u for u in body.toposort(outside_bodies) if u.op is Ops.PARAM and u.tag is None}
    seeds: dict[UOp, UOp] = {}
    for k, a in enumerate(args):
        if a in ctx.batched and k in own:
            p = own[k]
            seeds[p] = UOp(Ops.PARAM, p.dtype, (), (k, (ctx.size, *p.arg[1]), p.arg[2]))
    extra = []
    for s in closed_over(body, ctx.standins):
        seeds[s] = UOp(Ops.PARAM, s.dtype, (), (len(args) + len(extra), (ctx.size, *s.shape), s.device))
        record_owner((seeds[s],), name)
        extra.append(ctx.new[s])
    results, flags = batch_graph(body.src, seeds, ctx.size, ctx.standins)
    ctx.flags[x] = tuple(flags)
    arg = x.arg
    grad_fxn = arg[1] if isinstance(arg, tuple) and len(arg) > 1 else None
    if grad_fxn is not None:  # the custom backward is written for one example: it runs under vmap too
        in_flags = tuple(a in ctx.batched for a in args)
        arg = (arg[0], BatchedBackward(grad_fxn, in_flags, tuple(flags), ctx.size), *arg[2:])
    new_args = tuple(ctx.new.get(a, a) for a in args) + tuple(extra)
    return x.replace(src=(UOp(Ops.TUPLE, None, tuple(results)), *new_args), arg=arg)


def batch_callback(ctx: BatchCtx, x: UOp) -> UOp:
    """A host callback: one call on the batched arguments (batch axis in front) of a callback that handles the batch
    as its `vmap_method` says (`HostCallback.batched`); its results are batched, its effect token is not."""
    hc, args = x.src[0].arg, x.src[1:]
    chained = x.arg[3]
    data = args[1:] if chained else args
    flags = [a in ctx.batched for a in data]
    new = hc.batched(ctx.size, flags)
    ctx.flags[x] = (False, *(True for _ in hc.outs))
    spec = (x.arg[2][0], *((s, d, x.arg[2][0][2]) for s, d in new.outs))
    src = (*((ctx.new.get(args[0], args[0]),) if chained else ()), *(ctx.new.get(a, a) for a in data))
    return UOp(Ops.CALL, None, (UOp(Ops.CALLBACK, None, (), new), *src), (x.arg[0], None, spec, chained))


def batch_result(ctx: BatchCtx, x: UOp) -> UOp:
    """GETTUPLE: the batched call's result, or the value the LOOP rule made for it (a stacked output's batch axis
    moved to the front)."""
    results = ctx.results.get(x.src[0])
    return on_batched(ctx, x, x.arg) if results is None else results[x.arg]


def do_loop(ctx: BatchCtx, x: UOp) -> UOp:
    from tgfx.transforms.vmap_control import batch_loop
    return batch_loop(ctx, x)


def do_switch(ctx: BatchCtx, x: UOp) -> UOp:
    from tgfx.transforms.vmap_control import batch_switch
    return batch_switch(ctx, x)


def reject_sharded(x: UOp) -> UOp:
    raise NotImplementedError(f"vmap: batching a sharded value ({x.op.name}) is not supported; vmap the per-device "
                              f"function, or shard the result of vmap instead")


def _shift(axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(a + 1 for a in axes)


def batch_dynamic_view(ctx: BatchCtx, x: UOp) -> UOp:
    """DYNAMIC_SHRINK / DYNAMIC_PAD (`lax.dynamic_slice`, `dynamic_update_slice` at traced starts): with the starts
    unbatched, the same view of the batched value (its axes shift by one); a batched start differs per example, so
    the view becomes a one-hot selection along its axis (a gather, which the lowering makes one load an element)."""
    (axes, shape), starts = x.arg, x.src[1:]
    src = ctx.value(x.src[0])
    if not any(s in ctx.batched for s in starts):
        return x.replace(src=(src, *(ctx.new.get(s, s) for s in starts)), arg=(_shift(axes), (ctx.size, *shape)))
    y = Tensor(src)
    pad = x.op is Ops.DYNAMIC_PAD
    for a, s in zip(axes, starts, strict=True):
        n_in, n_out = y.shape[a + 1], shape[a]
        start = Tensor(ctx.value(s)).cast(dtypes.int32).clip(0, abs(n_out - n_in))
        # out[.., j, ..] = y[.., r, ..] where r = j - start (placed) or j + start (cut)
        j = Tensor.arange(n_out, dtype=dtypes.int32).reshape(1, n_out, 1)
        r = Tensor.arange(n_in, dtype=dtypes.int32).reshape(1, 1, n_in)
        hit = (j - start.reshape(ctx.size, 1, 1) == r) if pad else (j + start.reshape(ctx.size, 1, 1) == r)
        lead, rest = y.shape[1:a + 1], y.shape[a + 2:]
        hit = hit.reshape(ctx.size, *(1,) * len(lead), n_out, n_in, *(1,) * len(rest))
        wide = y.reshape(ctx.size, *lead, 1, n_in, *rest)
        if y.dtype == dtypes.bool:
            y = (hit & wide).any(axis=a + 2)
        else:
            y = hit.where(wide, Tensor.full((), 0, y.dtype)).sum(axis=a + 2, dtype=y.dtype)
    return y.uop


pm_batch = PatternMatcher([
    # elementwise: batched sources as they are, unbatched ones broadcast along a new leading axis (a view)
    (UPat(GroupOp.Elementwise, name="x"), lambda ctx, x: x.replace(src=tuple(ctx.value(s) for s in x.src))),
    # movement and reduce: the batch axis rides along in front, the op's own axes shift by one
    (UPat((Ops.RESHAPE, Ops.EXPAND), name="x"), lambda ctx, x: on_batched(ctx, x, (ctx.size, *x.arg))),
    (UPat(Ops.PERMUTE, name="x"), lambda ctx, x: on_batched(ctx, x, (0, *_shift(x.arg)))),
    (UPat(Ops.PAD, name="x"), lambda ctx, x: on_batched(ctx, x, ((0, 0), *x.arg))),
    (UPat(Ops.SHRINK, name="x"), lambda ctx, x: on_batched(ctx, x, ((0, ctx.size), *x.arg))),
    (UPat(Ops.FLIP, name="x"), lambda ctx, x: on_batched(ctx, x, _shift(x.arg))),
    (UPat(GroupOp.DynamicView, name="x"), batch_dynamic_view),
    # complex views act on the last axis: the batch axis in front changes nothing
    (UPat((Ops.AS_COMPLEX, Ops.AS_PAIRS), name="x"), lambda ctx, x: on_batched(ctx, x, x.arg)),
    (UPat(Ops.REDUCE_AXIS, name="x"), lambda ctx, x: on_batched(ctx, x, (x.arg[0], _shift(x.arg[1])))),
    # memory: the same op on the batched value (a stop_gradient tag, a COPY's device are kept); a grad placeholder
    # batched while its differentiation runs (a collective batches the example's graph) is a value, not that
    # placeholder, which leaving the differentiation binds to the one example's input
    (UPat((Ops.CONTIGUOUS, Ops.COPY), src=(UPat(),), name="x"), batch_memory),
    # calls: batch the body; a result of the batched call carries the batch axis if its body result does
    (UPat((Ops.FUNCTION, Ops.CALL), name="x"), batch_call),
    (UPat(Ops.GETTUPLE, name="x"), batch_result),
    # loops (tg.lax): one LOOP over the batched body; a per-example stop becomes a select (tgfx/transforms/vmap_control)
    (UPat(Ops.LOOP, name="x"), do_loop),
    # branches (tg.lax.cond / switch): one SWITCH if the index is unbatched, else a select over every branch
    (UPat(Ops.SWITCH, name="x"), do_switch),
    (UPat((Ops.MULTI, Ops.MSELECT, Ops.MSTACK, Ops.ALLREDUCE), name="x"), reject_sharded),
])


@dataclass(frozen=True)
class BatchedBackward:
    """A FUNCTION's custom backward (`grad_fxn`) for the batched call: the per-example backward under vmap, with the
    gradients of unmapped inputs summed over the batch."""
    grad_fxn: Callable
    in_batched: tuple[bool, ...]
    out_batched: tuple[bool, ...]
    size: int

    def __repr__(self) -> str:  # stable across processes: part of the call's key
        return (f"BatchedBackward({getattr(self.grad_fxn, '__qualname__', '?')}, {self.in_batched}, "
                f"{self.out_batched}, {self.size})")

    def __call__(self, grad_outputs: tuple[Tensor, ...], call: CallInfo) -> tuple[Tensor | None, ...]:
        n = len(self.in_batched)

        def per_example(gouts: tuple, ins: tuple, outs: tuple) -> tuple:
            return tuple(self.grad_fxn(gouts, CallInfo(call.name, ins, outs, call.uop)))

        def axes(flags: tuple[bool, ...]) -> tuple[int | None, ...]:
            return tuple(0 if f else None for f in flags)

        in_axes = (axes(self.out_batched), axes(self.in_batched), axes(self.out_batched))
        grads = vmap(per_example, in_axes=in_axes, axis_size=self.size)(tuple(grad_outputs), tuple(call.inputs[:n]),
                                                                          tuple(call.outputs))
        summed = [None if g is None else g if b else g.sum(axis=0)
                  for g, b in zip(grads, self.in_batched, strict=True)]
        return (*summed, *(None,) * (len(call.inputs) - n))


# ---- in_axes and out_axes ----
def _is_axis(a: Any) -> bool:
    return a is None or isinstance(a, (int, np.integer)) and not isinstance(a, bool)


def _check_axes_spec(who: str, spec: Any) -> None:
    leaves, _ = tree_flatten(spec, is_leaf=lambda a: a is None)
    if not all(_is_axis(a) for a in leaves):
        raise TypeError(f"vmap {who} must be an int, None, or a (nested) container with those as leaves, but got "
                        f"{spec!r}")


def _prefix_axes(spec: Any, value: Any, what: str, spec_name: str) -> list[int | None]:
    """One axis per leaf of `value`, from `spec`, an int, None or a tree prefix of `value`."""
    if _is_axis(spec):
        return [None if spec is None else int(spec)] * len(tree_flatten(value)[0])
    spec_leaves, spec_tree = tree_flatten(spec, is_leaf=lambda a: a is None)
    try:
        subtrees = spec_tree.flatten_up_to(value)
    except ValueError as e:
        raise ValueError(f"vmap {spec_name} is not a tree prefix of {what}: {e}\n(an int or None applies to a "
                         f"whole subtree; give a container only where {what} has that container)") from None
    out: list[int | None] = []
    for a, sub in zip(spec_leaves, subtrees, strict=True):
        out += [None if a is None else int(a)] * len(tree_flatten(sub)[0])
    return out


def _in_axes_per_leaf(in_axes: Any, args: tuple, kwargs: dict) -> list[int | None]:
    """One axis per leaf of (args, kwargs), in tree_flatten order. Keyword arguments are mapped along axis 0 (JAX)."""
    if isinstance(in_axes, list):  # JAX reads a list at the top as the tuple a user meant
        in_axes = tuple(in_axes)
    if _is_axis(in_axes):
        per_arg = [in_axes] * len(args)
    elif isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                             f"positional arguments passed to the function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        per_arg = list(in_axes)
    else:
        raise TypeError(f"vmap in_axes must be an int, None, or a tuple with one entry per positional argument, but "
                        f"got {type(in_axes).__name__} {in_axes!r}")
    out: list[int | None] = []
    for i, (spec, a) in enumerate(zip(per_arg, args, strict=True)):
        out += _prefix_axes(spec, a, f"positional argument {i}", f"in_axes[{i}] = {spec!r}")
    return out + [0] * len(tree_flatten(kwargs)[0])


def _as_array(x: Any) -> Tensor | None:
    """A Tensor, numpy array or Python number as a Tensor (None for anything else); a Python number weakly typed of
    the default type, as JAX's `vmap(lambda x: 2.0)(xs)` returns a weak float32."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)):
        return to_tensor(x)
    return None


def _mapped_array(leaf: Any, ax: int, where: str) -> Tensor:
    """A leaf that in_axes maps along `ax`, as a Tensor; an error if it is not an array or `ax` does not fit."""
    t = _as_array(leaf)
    if t is None:
        raise TypeError(f"vmap: argument {where} is a {type(leaf).__name__}, not an array, so it cannot be mapped "
                        f"along axis {ax}; give it in_axes None to pass it unchanged")
    if t.ndim == 0:
        raise ValueError(f"vmap was requested to map argument {where} along axis {ax}, which implies that its rank "
                         f"should be at least 1, but it is a scalar ({_describe(leaf)}); give it in_axes None to pass "
                         f"it to every example")
    if not -t.ndim <= ax < t.ndim:
        raise ValueError(f"vmap was requested to map argument {where} along axis {ax}, but it has rank {t.ndim} "
                         f"(shape {t.shape}); use an axis in [{-t.ndim}, {t.ndim})")
    return t


def _describe(x: Any) -> str:
    return f"{x.dtype.name}{list(x.shape)}" if isinstance(x, Tensor) else f"{type(x).__name__} {x!r}"


def _batch_size(sizes: list[tuple[str, int, int, str]], axis_size: int | None) -> int:
    """The one batch size of all mapped axes (and axis_size); an error lists every argument's size if they differ."""
    found = {s for _, _, s, _ in sizes} | ({axis_size} if axis_size is not None else set())
    if len(found) == 1:
        return found.pop()
    if not found:
        raise ValueError("vmap must have at least one non-None value in in_axes, or be given axis_size= to say how "
                         "many times to map a function that reads no mapped argument")
    lines = [f"  * argument {name} ({desc}) has size {s} along axis {a}" for name, a, s, desc in sizes]
    if axis_size is not None:
        lines.append(f"  * axis_size={axis_size} was given")
    raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n" + "\n".join(lines)
                     + "\nevery mapped axis must have the same size; fix the in_axes or the arguments' shapes")


# ---- the public transform ----
def _vmap_call(fun: Callable, args: tuple, kwargs: dict, *, in_axes: Any, out_axes: Any,
               axis_size: int | None, axis_name: Any = None) -> Any:
    name = f"vmap({getattr(fun, '__qualname__', type(fun).__qualname__)})"
    leaves, treedef = tree_flatten((args, kwargs))
    axes = _in_axes_per_leaf(in_axes, args, kwargs)
    assert len(axes) == len(leaves), "in_axes flattening lost the leaf order"
    names = _describe_paths(fun, args, kwargs)
    # each mapped leaf: its axis moved to the front (the batched value) and a stand-in of one example's shape
    mapped: dict[tuple[int, int], tuple[UOp, UOp]] = {}
    sizes: list[tuple[str, int, int, str]] = []
    new_leaves, described = list(leaves), {}
    for k, (leaf, ax, where) in enumerate(zip(leaves, axes, names, strict=True)):
        if ax is None:
            continue
        t = _mapped_array(leaf, ax, where)
        ax %= t.ndim
        sizes.append((where, ax, t.shape[ax], _describe(t)))
        if (key := (id(leaf), ax)) not in mapped:
            standin = UOp(Ops.PARAM, t.dtype, (), (-1, t.shape[:ax] + t.shape[ax + 1:], t.uop.device),
                          tag=(STANDIN, next(_uid)))
            record_owner((standin,), name)
            described[standin] = where
            mapped[key] = (move_axis(t.uop, ax, 0), standin)
        new_leaves[k] = weak(Tensor(mapped[key][1])) if is_weak(leaf) else Tensor(mapped[key][1])   # (as JAX's)
    size = _batch_size(sizes, axis_size)
    t_args, t_kwargs = tree_unflatten(treedef, new_leaves)
    # each stand-in's batched value; collectives batch with them while `fun` runs, those over this axis's name and,
    # through it, those over an outer one (axis_index adds stand-ins of its own)
    seeds = {standin: moved for moved, standin in mapped.values()}
    # (reading a stand-in's value is a concretization error naming it)
    # its host callbacks continue the caller's effect chain (the graph is rewritten in place, not closed as a body)
    outer = effect_chain()
    with tracing(name, described, token=None if outer is None else outer.token) as trace, \
            bound(Axis(axis_name, size, seeds)):
        out = fun(*t_args, **t_kwargs)
    effects = trace.effects
    pairs, out_tree = tree_flatten_with_path(out)
    roots, weak_outs = [], []
    for path, leaf in pairs:
        t = _as_array(leaf)
        if t is None:
            raise TypeError(f"vmap: {name} returned a {type(leaf).__name__} at output{keystr(path)}; the results of "
                            f"a vmapped function must be arrays")
        roots.append(t.uop)
        weak_outs.append(is_weak(t))
    if effects.happened:
        roots.append(effects.token)
    results, flags = batch_graph(roots, seeds, size)
    token = results.pop() if effects.happened else None
    flags = flags[:len(results)]
    outs = _place_outputs(results, flags, [p for p, _ in pairs], out, out_axes, size)
    if token is not None:
        from tgfx.callback import deliver
        deliver(token, outs)
    # a result the function computed weakly typed is weakly typed batched, as JAX's (batching keeps weak_type)
    return tree_unflatten(out_tree, weak_like(outs, weak_outs))


class MappedOutputError(ValueError):
    """An output whose out_axes is None differs between examples (`shard_map` names the out_spec it came from)."""


def _place_outputs(results: list[UOp], flags: list[bool], paths: list[KeyPath], out: Any, out_axes: Any,
                   size: int) -> list[Tensor]:
    """Each result with its batch axis moved to its out_axes entry (broadcast first if it has none)."""
    if isinstance(out_axes, list):
        out_axes = tuple(out_axes)
    axes = _prefix_axes(out_axes, out, "the function's output", f"out_axes = {out_axes!r}")
    outs = []
    for r, batched, path, ax in zip(results, flags, paths, axes, strict=True):
        where = f"output{keystr(path)}" if path else "the output"
        if ax is None:
            if batched:
                raise MappedOutputError(f"vmap has mapped {where} ({r.dtype.name}{list(r.shape[1:])} per example) "
                                        f"but out_axes is None for it: it depends on a mapped argument, so it differs "
                                        f"between examples. Give it an int out_axes, or compute it from unmapped "
                                        f"arguments only")
            outs.append(Tensor(r))
            continue
        b = r if batched else broadcast_front(r, size)
        if not -b.ndim <= ax < b.ndim:
            raise ValueError(f"vmap out_axes {ax} for {where} is out of range: with the batch axis it has rank "
                             f"{b.ndim} (shape {b.shape}); use an axis in [{-b.ndim}, {b.ndim})")
        outs.append(Tensor(move_axis(b, 0, ax % b.ndim)))
    return outs


def vmap(fun: Callable | None = None, in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None,
         axis_name: Any = None) -> Any:
    """Vectorise `fun` over a batch axis, as `jax.vmap`: `vmap(f)(xs)` stacks `f(x)` for each `x` along axis 0 of
    `xs`, computed by one batched graph (no Python loop: `f` is traced once and its graph rewritten).

    in_axes: which axis of each positional argument is mapped. An int or None for all of them, or a tuple with one
        entry per positional argument, each an int, None (pass the argument unchanged to every example), or a
        pytree prefix of that argument with int/None leaves (`({"w": None, "b": 0},)`). Negative axes count from
        the end. Keyword arguments are always mapped along axis 0.
    out_axes: where the batch axis goes in each output: an int, None (only for outputs that do not depend on a
        mapped argument), or a pytree prefix of the output.
    axis_size: the batch size, needed only when no argument is mapped (outputs are then broadcast to it).
    axis_name: a name (any hashable) for the batch axis, so `fun` can combine its examples with `tg.lax.psum(x,
        name)`, `pmean`, `pmax`, `pmin`, `all_gather` and read its position with `axis_index(name)`
        (`tgfx/transforms/collectives.py`).

    Usable bare (`@vmap`), with options (`@vmap(in_axes=(None, 0))`) and on methods (in_axes counts the arguments
    after `self`). It composes with every other transform.

    >>> import numpy as np, tgfx as tg, tgfx.numpy as tnp
    >>> xs = tg.asarray(np.arange(6.0, dtype=np.float32).reshape(3, 2))
    >>> tg.vmap(lambda x: x.sum())(xs).tolist()
    [1.0, 5.0, 9.0]
    >>> w = tnp.ones((2, 4))
    >>> tg.vmap(lambda x, w: x @ w, in_axes=(0, None))(xs, w).shape    # w is not copied per example
    (3, 4)
    >>> tg.vmap(lambda x: x * 2, in_axes=1, out_axes=1)(xs).shape
    (3, 2)
    >>> per_example_grads = tg.vmap(tg.grad(lambda w, x: ((x @ w) ** 2).sum()), in_axes=(None, 0))(w, xs)  # (3, 2, 4)
    >>> tg.vmap(tg.vmap(lambda a, b: a * b, in_axes=(0, None)), in_axes=(None, 0))(xs[0], xs[:, 0]).shape  # outer
    (3, 2)

    Errors (ValueError unless noted): mapped axes of different sizes (each argument's path and size is listed), an
    in_axes or out_axes that is not a prefix of the arguments or outputs, an axis out of range, a mapped scalar,
    out_axes None for an output that depends on a mapped argument, no mapped argument and no axis_size; TypeError
    for a non-array mapped argument or result; NotImplementedError for an opaque custom kernel inside `fun`.
    """
    if fun is None:
        return functools.partial(vmap, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size, axis_name=axis_name)
    _check_axes_spec("in_axes", in_axes)
    _check_axes_spec("out_axes", out_axes)
    if axis_size is not None and (not isinstance(axis_size, (int, np.integer)) or axis_size < 0):
        raise TypeError(f"vmap axis_size must be a non-negative int, got {axis_size!r}")
    try:
        hash(axis_name)
    except TypeError as e:
        raise TypeError(f"vmap axis_name must be hashable (a string, say), got {axis_name!r}") from e
    return Transformed(fun, functools.partial(_vmap_call, in_axes=in_axes, out_axes=out_axes,
                                              axis_size=None if axis_size is None else int(axis_size),
                                              axis_name=axis_name))


__all__ = ["vmap", "pm_batch", "batch_graph", "BatchCtx", "broadcast_front", "move_axis"]
