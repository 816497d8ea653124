"""`@function`: trace a Python function on Tensors into a `FUNCTION` node (SPEC §3).

Calling a wrapped function
1. flattens the arguments (any pytree) and collects every Tensor, deduplicated by identity;
2. runs the function lazily on stand-ins of this call (tagged PARAMs, so no other trace's value is mistaken for one);
3. writes the results over `PARAM(k)` (slot k = position in that list), a value it read from an enclosing trace that
   is still running becoming one more argument, and builds `FUNCTION(TUPLE(results), a0, a1, ...)`, named by the
   function (a traced value whose trace has ended is an escaped tracer: an error naming the function that made it);
4. returns `GETTUPLE(i)` of it for each result Tensor, in the structure the function returned.

The body holds only PARAMs, never buffers, so calls with equal shapes, dtypes and devices build bodies with equal
`key`s and reuse everything compiled for them. The scheduler inlines a FUNCTION (so `f(x) * 2` fuses across the
call); with `precompile=True` the body is instead compiled once into an opaque `CALL` reused by every call.

>>> import tgfx as tg, tgfx.numpy as tnp
>>> @tg.function
... def gelu(x):
...     return 0.5 * x * (1 + tnp.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
>>> y = gelu(tg.asarray([0.0, 1.0]))   # lazy: a GETTUPLE of a FUNCTION
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import weakref
from collections.abc import Callable
from typing import Any

from tgfx import config, forksafe
from tgfx.devices import DEFAULT_DEVICE
from tgfx.ir.control import n_bodies
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.inline import EscapedTracerError, walk
from tgfx.lowering.multi import device_parts
from tgfx.tensor import Tensor, is_weak, weak, weak_like
from tgfx.trace_state import ConcretizationError as ConcretizationError
from tgfx.trace_state import active, current, effect_chain, record_owner, tracing, user_error
from tgfx.tree import PyTreeDef, keystr, tree_flatten, tree_flatten_with_path, tree_unflatten


class FunctionError(TypeError):
    """A user error in how a `@function` is written or called."""


_uid = itertools.count()
_TRACES_KEPT = 64   # bodies a `cache=True` function keeps, by signature


def _describe_paths(f: Callable, args: tuple, kwargs: dict) -> list[str]:
    """A readable name for every leaf of (args, kwargs): `x`, `params['w']`, `args[2]`."""
    import inspect
    try:
        names = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        names = []
    out = []
    for path, _ in tree_flatten_with_path((args, kwargs))[0]:
        where, idx, rest = path[0], path[1], path[2:]
        if getattr(where, "idx", None) == 0:
            i = getattr(idx, "idx", 0)
            base = names[i] if i < len(names) and not names[i].startswith("*") else f"args[{i}]"
        else:
            base = str(getattr(idx, "key", idx))
        out.append(base + keystr(rest))
    return out


def is_grad_input(u: UOp) -> bool:
    """`u` is a differentiation's placeholder for one of its inputs (`grad.py`'s `_placeholder`)."""
    return u.op is Ops.CONTIGUOUS and isinstance(u.tag, tuple) and u.tag[:1] == ("grad_input",)


def _implicit_buffers(body: UOp) -> list[UOp]:
    """Concrete buffers the body reads that were not passed in (captured from a closure or a global). A value being
    differentiated is captured whole (grad's placeholder, not the buffer under it), so the gradient reaches it."""
    return [u for u in body.toposort(lambda u: () if is_grad_input(u) else u.src)
            if u.op is Ops.BUFFER or is_grad_input(u)]


def _visible_tensors(f: Callable) -> dict[UOp, str]:
    """BUFFER -> the name of a Tensor the function can see in its closure or globals that holds it (for messages)."""
    from tgfx.lowering.layout import buffer_view
    fn = getattr(f, "__func__", f)
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    found: dict[str, Any] = {}
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or (), strict=False):
        try:
            found[name] = cell.cell_contents
        except ValueError:
            continue
    for name in code.co_names:
        if name in getattr(fn, "__globals__", {}):
            found.setdefault(name, fn.__globals__[name])
    out = {}
    for name, v in found.items():
        if isinstance(v, Tensor) and (b := buffer_view(v.uop)) is not None:
            out[b] = f"{name}: {v.dtype.name}{list(v.shape)} on {v.device}"
    return out


def _describe(u: UOp) -> str:
    return f"{u.dtype.name}{list(u.shape)} on {u.device}"


@dataclasses.dataclass(frozen=True)
class Backward:
    """A custom backward as the call node holds it: the passes hand it one gradient per result, flat; the user's
    `grad_fxn` gets them in the structure the function returned (a single Tensor for a single result, a tuple or a
    dict for those), as `jax.custom_vjp`'s backward does. Equal for equal functions and structures, so calls with
    the same shapes build the same node."""
    grad_fxn: Callable
    out_tree: PyTreeDef

    def __repr__(self) -> str:  # stable across processes: part of the call's key
        return f"Backward({getattr(self.grad_fxn, '__qualname__', '?')}, {self.out_tree!r})"

    def __call__(self, grad_outputs: tuple[Tensor, ...], call: Any) -> Any:
        return self.grad_fxn(tree_unflatten(self.out_tree, grad_outputs), call)


def clear_traces() -> None:
    """Forget the bodies every `function(cache=True)` kept (`tg.clear_caches`)."""
    for f in forksafe.members(_cached):
        f._traces.clear()


_cached: weakref.WeakSet[Function] = weakref.WeakSet()   # functions with `cache`, still held (`clear_traces`)


class Function:
    """A traced function; see the module docstring. Usable on functions, methods and callable instances."""

    def __init__(self, f: Callable, precompile: bool = False, grad_fxn: Callable | None = None,
                 allow_implicit: bool = False, name: str | None = None, precompile_backward: bool = False,
                 cache: bool = False, reads_values: bool = False) -> None:
        if not callable(f):
            raise TypeError(f"function() expects a callable, got {type(f).__name__}")
        self.f, self.precompile, self.grad_fxn, self.allow_implicit = f, precompile, grad_fxn, allow_implicit
        self.precompile_backward, self.cache = precompile_backward, cache
        # `f` may read its arguments' values (Python control flow on them), where they are known: its body then holds
        # the branch this call's values took, so it is traced at every call (custom_jvp's function under grad)
        self.reads_values = reads_values
        # with `cache`: outside any trace, a call's body by its signature (see `_signature`), newest last
        self._traces: dict[tuple, tuple[UOp, list[UOp], PyTreeDef, list[Any], tuple[bool, ...]]] = {}
        self.name = name or getattr(f, "__qualname__", None) or type(f).__qualname__
        functools.update_wrapper(self, f, updated=())
        if cache:
            _cached.add(self)

    def __repr__(self) -> str:
        return f"<tgfx.function {self.name}{' precompiled' if self.precompile else ''}>"

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        # methods: bind like a plain function, keep tracing
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, treedef = tree_flatten((args, kwargs))
        inputs: list[Tensor] = []
        slot_of: dict[int, int] = {}
        for leaf in leaves:
            if isinstance(leaf, Tensor) and id(leaf) not in slot_of:
                slot_of[id(leaf)] = len(inputs)
                inputs.append(leaf)
        constant, on = False, None
        for t in inputs:
            d = t.uop.device
            if d is None:
                constant = True
            elif on is None and type(d) is str:
                on = d
        if constant and on is not None and on != DEFAULT_DEVICE:
            # a constant argument (`eye(n)`, `zeros(...)`) goes where the others are, as JAX's uncommitted arrays:
            # made on the default device, `inv` of a matrix on another failed in the body
            inputs = [t.to(on) if t.uop.device is None else t for t in inputs]
        sig = self._signature(leaves, treedef, inputs, slot_of) \
            if self.cache and not self.allow_implicit and not self.reads_values and not active() else None
        if sig is not None and (hit := self._traces.get(sig)) is not None:
            body, extra, out_tree, dtypes, weak_outs = hit
            return self._call(body, [p for t in inputs for p in device_parts(t.uop)] + extra, out_tree, dtypes,
                              weak_outs)
        stand_ins, params_of_input, arg_uops = [], [], []
        for t in inputs:
            # a sharded Tensor is one PARAM per device part, so the body sees its layout (a MULTI of them)
            pieces = device_parts(t.uop)
            # traced on stand-ins of this call's own (tagged, so never another trace's PARAM, nor this function's
            # traced by another call); the body is then written over PARAM(k), equal for every call (see `_close`)
            params = [UOp(Ops.PARAM, p.dtype, (), (len(arg_uops) + j, p.shape, p.device or DEFAULT_DEVICE),
                          tag=("function", next(_uid))) for j, p in enumerate(pieces)]
            arg_uops.extend(pieces)
            record_owner(params, self.name)
            params_of_input.append(params)
            stand_ins.append(Tensor(UOp(Ops.MULTI, t.dtype, tuple(params), t.uop.arg)
                                    if t.uop.op is Ops.MULTI else params[0]))
            if is_weak(t):  # a jitted function's Python scalar argument stays weakly typed inside
                weak(stand_ins[-1])
        traced_leaves = [stand_ins[slot_of[id(x)]] if isinstance(x, Tensor) else x for x in leaves]
        targs, tkwargs = tree_unflatten(treedef, traced_leaves)
        paths = _describe_paths(self.f, args, kwargs)
        described = {}
        for leaf, path in zip(leaves, paths, strict=True):
            if isinstance(leaf, Tensor):
                for p in params_of_input[slot_of[id(leaf)]]:
                    described.setdefault(p, path)
        # host callbacks inside continue the caller's effect chain through a hidden argument, a stand-in of its token
        outer = effect_chain()
        token_in = None if outer is None or outer.token is None else \
            UOp(Ops.PARAM, outer.token.dtype, (), (len(arg_uops), (), outer.token.device or DEFAULT_DEVICE),
                tag=("function", next(_uid)))
        values = dict(zip([p for ps in params_of_input for p in ps], arg_uops, strict=True)) \
            if self.reads_values else None
        with tracing(self.name, described, token=token_in, values=values) as trace:
            out = self.f(*targs, **tkwargs)
        made, effects = trace.made, trace.effects
        results = self._results(out, effects.happened)
        _, out_tree = tree_flatten(out)
        # ... and it hands its last token back as a hidden result, which joins the caller's chain (`deliver`)
        hidden = effects.happened
        if hidden:
            results.append(((), Tensor(effects.token)))
            if token_in is not None:
                params_of_input.append([token_in])
                arg_uops.append(outer.token)
            sig = None   # (a body that runs callbacks is traced again, as it would be under jit)
        body = UOp(Ops.TUPLE, None, tuple(t.uop for _, t in results))
        n_args = len(arg_uops)
        body, arg_uops = self._close(body, [p for ps in params_of_input for p in ps], arg_uops)
        body, arg_uops = self._capture_implicit(body, arg_uops, made)
        dtypes = [t.dtype for _, t in results]
        weak_outs = tuple(is_weak(t) for _, t in results)
        if sig is not None:   # extra arguments here are buffers the body made (its constants): reused as they are
            self._traces[sig] = (body, arg_uops[n_args:], out_tree, dtypes, weak_outs)
            while len(self._traces) > _TRACES_KEPT:
                del self._traces[next(iter(self._traces))]
        return self._call(body, arg_uops, out_tree, dtypes, weak_outs, hidden)

    def _call(self, body: UOp, arg_uops: list[UOp], out_tree: PyTreeDef, dtypes: list[Any],
              weak_outs: tuple[bool, ...], hidden: bool = False) -> Any:
        op = Ops.CALL if self.precompile else Ops.FUNCTION
        backward = None if self.grad_fxn is None else Backward(self.grad_fxn, out_tree)
        fn = UOp(op, None, (body, *arg_uops), (self.name, backward, self.precompile_backward))
        outs = [Tensor(UOp(Ops.GETTUPLE, d, (fn,), i)) for i, d in enumerate(dtypes)]
        # a result the body computed weakly typed (from Python scalars alone) is weakly typed outside, as JAX's
        outs = weak_like(outs, weak_outs)
        if hidden:   # the effect token of the callbacks it ran: the caller's chain continues from it
            from tgfx.callback import deliver
            token = outs.pop()
            deliver(token.uop, outs)
        return tree_unflatten(out_tree, outs)

    @staticmethod
    def _signature(leaves: list[Any], treedef: PyTreeDef, inputs: list[Tensor],
                   slot_of: dict[int, int]) -> tuple | None:
        """What a body traced outside any trace depends on: the argument structure, which leaf is which input, each
        input's dtype, shape, device, layout across devices and weak typing, the other leaves (with their types:
        1 and True trace differently) and the x64 mode (a float64 constant of the body is float32 without it). None
        when a leaf is not hashable (then the call is traced)."""
        others = tuple((type(x), x) for x in leaves if not isinstance(x, Tensor))
        try:
            hash(others)
        except TypeError:
            return None
        slots = tuple(slot_of[id(x)] if isinstance(x, Tensor) else -1 for x in leaves)
        # (a sharded Tensor's pieces are a PARAM each: its layout, and whether it is pieces at all -- a lazy copy onto
        # a device tuple is one value -- tell bodies apart)
        avals = tuple((t.dtype, t.shape, t.device, is_weak(t), (t.uop.arg,) if t.uop.op is Ops.MULTI else None)
                      for t in inputs)
        return treedef, slots, avals, others, bool(config.X64)

    def _results(self, out: Any, effects: bool = False) -> list[tuple[Any, Tensor]]:
        flat, _ = tree_flatten_with_path(out)
        for path, leaf in flat:
            if not isinstance(leaf, Tensor):
                where = f" at {keystr(path)}" if path else ""
                raise FunctionError(f"function {self.name} returned a {type(leaf).__name__}{where}; a function's "
                                    f"results must be Tensors (wrap constants with tg.asarray)")
        if not flat and not effects:   # (one that only runs callbacks returns their effect token, hidden)
            raise FunctionError(f"function {self.name} returned no Tensors")
        return flat

    def _close(self, body: UOp, params: list[UOp], arg_uops: list[UOp]) -> tuple[UOp, list[UOp]]:
        """The body over PARAM(k) in place of this call's stand-ins. A value of an enclosing trace that is still
        running (an outer function's, vmap's or a loop body's argument, read from a closure) becomes one more
        argument, passed by the caller's graph, as JAX closes over outer tracers; a traced value whose trace has
        ended is an escaped tracer, reported now (inlining would read it as whatever this call passes in its slot)."""
        own = {p: p.replace(tag=None) for p in params}
        outer = {q for tr in current().traces for q in tr.described}
        extra: list[UOp] = []
        new: dict[UOp, UOp] = {}
        for u in walk(body):   # one pass, as substitute_outside_calls: the body is rebuilt over its new leaves
            if u.op is Ops.PARAM:
                if u in own:
                    new[u] = own[u]
                    continue
                if u not in outer:
                    raise user_error(EscapedTracerError(f"a traced value of another trace was read by {self.name}",
                                                        (u,)))
                new[u] = UOp(Ops.PARAM, u.dtype, (), (len(arg_uops) + len(extra), u.shape, u.device or DEFAULT_DEVICE))
                extra.append(u)
                continue
            nb = n_bodies(u)
            src = (*u.src[:nb], *(new[s] for s in u.src[nb:]))
            new[u] = u if src == u.src else u.replace(src=src)
        return new[body], arg_uops + extra

    def _capture_implicit(self, body: UOp, arg_uops: list[UOp], made: set[UOp]) -> tuple[UOp, list[UOp]]:
        """The body with the concrete buffers it reads as extra arguments: those it made itself from host data
        (`tnp.asarray(0)`, its constants, as JAX's), and with `allow_implicit` those it captured; a capture without
        it is an error naming them."""
        implicit = _implicit_buffers(body)
        if not implicit:
            return body, arg_uops
        captured = [b for b in implicit if b not in made]
        if captured and not self.allow_implicit:
            named = _visible_tensors(self.f)
            # a BUFFER read directly, or a value being differentiated (named by the buffer under it)
            listed = "\n".join(f"  - {named.get(b) or (b.src and named.get(b.src[0])) or _describe(b)}"
                                for b in captured)
            raise FunctionError(f"function {self.name} reads {len(captured)} concrete Tensor(s) it was not given as "
                                f"arguments (captured from a closure or a global):\n{listed}\npass them as arguments, "
                                f"or use @function(allow_implicit=True) to make them extra arguments")
        # each captured buffer becomes one more PARAM slot, read through the same view as before
        mapping, extra = {}, []
        for b in implicit:
            p = UOp(Ops.PARAM, b.dtype, (), (len(arg_uops) + len(extra), b.shape, b.device or DEFAULT_DEVICE))
            record_owner((p,), self.name)
            mapping[b] = p
            extra.append(b)
        return body.substitute(mapping), arg_uops + extra


def function(f: Callable | None = None, *, precompile: bool = False, grad_fxn: Callable | None = None,
             allow_implicit: bool = False, precompile_backward: bool = False, cache: bool = False) -> Any:
    """Trace `f` into a FUNCTION on every call. Usable as `@function`, `@function(...)` or `function(f, ...)`.

    precompile: lower the body once into an opaque CALL of compiled kernels, reused for every call with the same
        body key (no fusion across the call boundary).
    grad_fxn: a custom backward, `grad_fxn(grad_outputs, call) -> grads of the inputs` (like jax.custom_vjp):
        `grad_outputs` has the structure the function returns (a single Tensor for a single result, a tuple for a
        tuple of results); `call` has `.inputs`, `.outputs` (tuples, flat) and `.name`; it returns a tuple with one
        gradient Tensor (or None) per input Tensor. `tg.custom_vjp` and `tg.custom_jvp` are JAX's API over this.
    allow_implicit: make concrete Tensors the function reads from a closure extra arguments instead of an error.
    precompile_backward: under `grad`, precompile the backward function too.
    cache: outside any trace (an eager call), reuse the body traced for an earlier call with the same signature
        (argument structure, dtypes, shapes, devices, weak typing, the non-Tensor arguments) instead of running `f`
        again, as `jit` does; for functions whose body depends on nothing else (the library's linear algebra: an
        eager `cholesky` of a 3 x 3 matrix spent 60-100 ms tracing its loop every call). Not with
        `allow_implicit`, whose captures may change between calls.
    """
    if f is None:
        return functools.partial(function, precompile=precompile, grad_fxn=grad_fxn, allow_implicit=allow_implicit,
                                 precompile_backward=precompile_backward, cache=cache)
    return Function(f, precompile=precompile, grad_fxn=grad_fxn, allow_implicit=allow_implicit, cache=cache,
                    precompile_backward=precompile_backward)


def with_derivative(value: Callable[[Tensor], Tensor], derivative: Callable[[Tensor, Tensor], Tensor]) -> Function:
    """Elementwise `value` as a `tg.function` whose backward is g * derivative(x, y), y = value(x), in closed form.

    The closed form is exact where the derivative of the approximation (a Chebyshev series, Newton steps, a branch
    guarded by `where`) is only close or is NaN (inf * 0 from the branch not taken), and a handful of ops where
    differentiating the approximation would be hundreds; `jvp` (reverse mode transposed) and second derivatives go
    through it too. The scheduler inlines the function, so it still fuses."""
    def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor]:
        g, (x,), (y,) = grads, call.inputs, call.outputs
        return (g * derivative(x, y),)
    return function(value, grad_fxn=backward, cache=True)
