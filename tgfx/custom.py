"""`tg.custom_vjp` and `tg.custom_jvp`: JAX's API for a function with a derivative rule of its own.

Both are `@function` with a `grad_fxn` (SPEC §3) underneath: while a differentiation runs, a call is traced into a
FUNCTION whose custom backward is the user's rule, so it composes with `grad`, `jit`, `vmap` and higher orders as any
function does (forward mode is reverse mode transposed in tgfx, so `jvp` goes through the same backward). Outside a
differentiation the function is simply called, as in JAX.

- `custom_vjp`: `fwd(*args) -> (out, residuals)` runs in place of `fun` under differentiation, in the caller's
  graph; `out` then passes through a FUNCTION whose backward is `bwd(*nondiff_args, residuals, g) -> cotangents`
  (one per differentiable argument, `g` in the structure of `out`). The residuals (any pytree; Tensors among them
  are arguments of that FUNCTION, the rest is kept as Python values) are ordinary values of the graph, so a second
  order differentiates the backward through fwd's computation of them, as JAX does.
- `custom_jvp`: `jvp(*nondiff_args, primals, tangents) -> (out, tangent_out)`, or one rule per argument with
  `defjvps`. Reverse mode needs its transpose: the rule is run on tangent stand-ins, and since `tangent_out` is linear
  in them, reverse mode over that graph (with respect to the stand-ins) is the transpose: the backward JAX derives
  from a custom JVP the same way.

>>> @tg.custom_vjp
... def clip_gradient(x):
...     return x
>>> clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (tnp.clip(g, -1.0, 1.0),))
>>> tg.grad(lambda x: (3.0 * clip_gradient(x)).sum())(tnp.ones(2))   # [1., 1.]
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from tgfx.function import Function, is_grad_input
from tgfx.ir.control import n_bodies
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.multi import device_parts
from tgfx.tensor import Tensor, is_weak, to_tensor, weak
from tgfx.trace_state import current
from tgfx.transforms.control_grad import in_forward_mode
from tgfx.tree import PyTreeDef, keystr, tree_flatten, tree_flatten_with_path, tree_unflatten


def _none(v: Any) -> bool:
    return v is None


def _flat(tree: Any) -> tuple[list[Any], PyTreeDef]:
    """Leaves with None kept as a leaf: a cotangent of None lines up with the argument leaf it stands for."""
    return tree_flatten(tree, is_leaf=_none)


# the custom functions whose rule is being traced, each with the number of differentiation levels its call was made
# under: a call of one of them there is its plain function (`fwd` usually calls the function itself for its output,
# which must not run `fwd` again) once its rule runs for every level of the call. Under grad(grad(f)) the call in fwd
# is the custom function again for the outer level, as in JAX: a fixed point's fwd runs the fixed point, whose while
# loop the outer grad could not differentiate; and a custom_jvp rule that calls its function (a Bessel function's
# jv(v - 1, z)), transposed by the inner grad after its level ended, is custom for the outer one
_in_rule: ContextVar[tuple[tuple[int, int], ...]] = ContextVar("tgfx_custom_rule", default=())


def _plain(f: Any) -> bool:
    """Whether a call of the custom function `f` runs its plain function: no differentiation, or its rule already
    running once for every level of this call (rules of calls made under more levels count for none of these)."""
    levels = len(current().differentiating)
    return not levels or sum(1 for i, at in _in_rule.get() if i == id(f) and at <= levels) >= levels


@contextmanager
def _running_rule(f: Any, levels: int) -> Iterator[None]:
    """Run the rule of custom function `f`, called under `levels` differentiation levels."""
    token = _in_rule.set((*_in_rule.get(), (id(f), levels)))
    try:
        yield
    finally:
        _in_rule.reset(token)


def _name(f: Callable) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or type(f).__qualname__


def _nondiff(who: str, argnums: Sequence[int]) -> tuple[int, ...]:
    out = tuple(int(a) for a in argnums)
    if any(a < 0 for a in out) or len(set(out)) != len(out):
        raise ValueError(f"{who}: nondiff_argnums must be distinct non-negative positions, got {tuple(argnums)}")
    return tuple(sorted(out))


def _reads_closed_over_inputs(outs: list[Tensor], args: tuple) -> bool:
    """Whether `outs` depend on a differentiation's input (its placeholder, `is_grad_input`) other than through the
    call's `args`: one the function closed over, also where an argument is computed from it too (`f(w * 2)` with f
    reading w)."""
    seen = {a.uop for a in tree_flatten(args)[0] if isinstance(a, Tensor)}   # the walk stops at the arguments
    stack = [o.uop for o in outs]
    while stack:
        u = stack.pop()
        if u in seen:
            continue
        if is_grad_input(u):
            return True
        seen.add(u)
        stack.extend(u.src)
    return False


class _Split:
    """A call's positional arguments split into the differentiable ones and those at `nondiff_argnums`."""

    def __init__(self, who: str, args: tuple, nondiff: tuple[int, ...]) -> None:
        if nondiff and nondiff[-1] >= len(args):
            raise TypeError(f"{who}: nondiff_argnums {nondiff} name position {nondiff[-1]}, but the call has "
                            f"{len(args)} positional arguments")
        self.n = len(args)
        self.nondiff = nondiff
        self.static = tuple(args[i] for i in nondiff)
        self.diff = tuple(_arrays(a) for i, a in enumerate(args) if i not in nondiff)

    def join(self, diff: Sequence[Any]) -> tuple:
        """All arguments in order, with `diff` in the differentiable positions."""
        it, st = iter(diff), iter(self.static)
        return tuple(next(st) if i in self.nondiff else next(it) for i in range(self.n))


def _arrays(tree: Any) -> Any:
    """A differentiable argument with its NumPy arrays and Python numbers made Tensors (the numbers weakly typed), as
    JAX makes them arrays: the function then computes Tensors from them, which the custom call can pass on (a NumPy
    result could not be one of its outputs)."""
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [to_tensor(x) if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex))
                                    else x for x in leaves])


def _slots(who: str, leaves: list[Any]) -> list[int | None]:
    """The argument slot of the traced call that each leaf of its arguments becomes (`Function`'s numbering: every
    Tensor once, by identity, in order), None for a leaf that is not a Tensor."""
    slot_of: dict[int, int] = {}
    out: list[int | None] = []
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            out.append(None)
            continue
        if len(device_parts(leaf.uop)) != 1:
            raise NotImplementedError(f"{who}: a sharded argument ({leaf.dtype.name}{list(leaf.shape)} on "
                                      f"{leaf.device}) is not supported; call it on each shard, or unshard it first")
        out.append(slot_of.setdefault(id(leaf), len(slot_of)))
    return out


def _cotangents(who: str, what: str, cts: Any, diff: tuple, argnames: Sequence[str]) -> list[Tensor | None]:
    """The rule's cotangents (one per differentiable argument, each in the argument's structure or None), checked,
    as one per leaf of the arguments (`_flat`)."""
    if not isinstance(cts, (tuple, list)) or len(cts) != len(diff):
        got = f"a {type(cts).__name__} of length {len(cts)}" if isinstance(cts, (tuple, list)) else \
            type(cts).__name__
        raise TypeError(f"{who}: {what} must return a tuple with one cotangent per differentiable argument "
                        f"({len(diff)}: {', '.join(argnames)}), got {got}")
    out: list[Tensor | None] = []
    for ct, arg, name in zip(cts, diff, argnames, strict=True):
        arg_leaves, arg_tree = tree_flatten_with_path(arg, is_leaf=_none)
        if ct is None:
            out.extend([None] * len(arg_leaves))
            continue
        ct_leaves, ct_tree = _flat(ct)
        if ct_tree != arg_tree:
            raise TypeError(f"{who}: {what} returned a cotangent for argument {name} of structure {ct_tree}, but the "
                            f"argument has structure {arg_tree}; return one with the argument's structure, or None")
        for (path, a), c in zip(arg_leaves, ct_leaves, strict=True):
            if c is None or not isinstance(a, Tensor):
                out.append(None)
                continue
            where = f"{name}{keystr(path)}"
            if not isinstance(c, Tensor) or c.shape != a.shape:
                got = f"shape {c.shape}" if isinstance(c, Tensor) else f"a {type(c).__name__}"
                raise TypeError(f"{who}: {what} returned a cotangent of {got} for argument {where}, which has shape "
                                f"{a.shape} ({a.dtype.name}); a cotangent has its argument's shape")
            out.append(c)
    return out


def _grads_per_slot(cts: list[Tensor | None], slots: list[int | None], n_inputs: int) -> tuple[Tensor | None, ...]:
    """One gradient per input of the traced call: a Tensor passed twice gets the sum of its cotangents; values the
    call captured (closures, outer traces) get none."""
    per: list[Tensor | None] = [None] * n_inputs
    for c, s in zip(cts, slots, strict=True):
        if c is not None and s is not None:
            per[s] = c if per[s] is None else per[s] + c
    return tuple(per)


def _argnames(f: Callable, split: _Split) -> list[str]:
    import inspect
    try:
        params = [p.name for p in inspect.signature(f).parameters.values()]
    except (TypeError, ValueError):
        params = []
    names = [params[i] if i < len(params) and not params[i].startswith("*") else f"args[{i}]" for i in range(split.n)]
    return [n for i, n in enumerate(names) if i not in split.nondiff]


def _check_kwargs(who: str, kwargs: dict) -> None:
    if kwargs:
        raise TypeError(f"{who}: keyword arguments ({', '.join(kwargs)}) are not supported by a custom derivative; "
                        f"pass them positionally (as jax.custom_vjp resolves them), or bind them with "
                        f"functools.partial")


class custom_vjp:  # noqa: N801 - JAX's name
    """A function with a custom reverse-mode rule, as `jax.custom_vjp`.

    >>> @tg.custom_vjp
    ... def f(x, y):
    ...     return tnp.sin(x) * y
    >>> def f_fwd(x, y):
    ...     return f(x, y), (tnp.cos(x), tnp.sin(x), y)      # the output, and residuals for the backward
    >>> def f_bwd(res, g):                                   # g has the structure of f's output
    ...     cos_x, sin_x, y = res
    ...     return (cos_x * g * y, sin_x * g)                # one cotangent per argument (or None)
    >>> f.defvjp(f_fwd, f_bwd)
    >>> tg.grad(f)(tnp.asarray(1.0), tnp.asarray(2.0))

    `nondiff_argnums` marks positional arguments that are not differentiated (Python values, functions): they are
    passed to `fwd` in place and to `bwd` first, `bwd(*nondiff_args, res, g)`, which returns cotangents for the
    others only. A cotangent has its argument's structure; None is a zero. Keyword arguments are not supported.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        self.fun = fun
        self.nondiff_argnums = _nondiff(f"custom_vjp {_name(fun)}", nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        functools.update_wrapper(self, fun, updated=())

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Set the rule: `fwd(*args) -> (out, residuals)`, `bwd(*nondiff_args, residuals, g) -> cotangents`."""
        if not callable(fwd) or not callable(bwd):
            raise TypeError(f"custom_vjp {_name(self.fun)}: defvjp(fwd, bwd) needs two callables, got "
                            f"{type(fwd).__name__} and {type(bwd).__name__}")
        self.fwd, self.bwd = fwd, bwd

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        who = f"custom_vjp {_name(self.fun)}"
        _check_kwargs(who, kwargs)
        if self.fwd is None or self.bwd is None:
            raise TypeError(f"{who}: no rule was set; call {_name(self.fun)}.defvjp(fwd, bwd) before using it")
        if _plain(self):
            return self.fun(*args)
        split = _Split(who, args, self.nondiff_argnums)
        fwd, bwd = self.fwd, self.bwd
        names = _argnames(self.fun, split)
        args = split.join(split.diff)
        # fwd runs in the caller's graph: its residuals are ordinary values there, so a higher order differentiates
        # the backward through them (as JAX differentiates fwd then)
        with _running_rule(self, len(current().differentiating)):
            pair = fwd(*args)
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{who}: fwd {_name(fwd)} must return a pair (output, residuals), got "
                            f"{type(pair).__name__}")
        out_leaves, out_tree = tree_flatten(pair[0])
        if not out_leaves or not all(isinstance(o, Tensor) for o in out_leaves):
            raise TypeError(f"{who}: fwd {_name(fwd)} must return Tensors as its output, got {pair[0]!r:.80}")
        if _reads_closed_over_inputs(out_leaves, args):
            raise TypeError(f"{who}: its output depends on a value being differentiated that it reads from its "
                            f"closure, not from its arguments; its rule gives cotangents to its arguments only, so "
                            f"that value's gradient would be lost. Pass the value as an argument (jax.custom_vjp "
                            f"refuses this too; tg.closure_convert hoists such values)")
        res_leaves, res_tree = tree_flatten(pair[1])
        res_tensors = [r for r in res_leaves if isinstance(r, Tensor)]
        # residuals reach bwd with the weak types fwd gave them, as JAX's (checkpoint's are its inputs: a weak x
        # run again beside a float16 stays a float16 computation)
        res_weak = [is_weak(r) for r in res_tensors]
        diff_leaves, _ = _flat(split.diff)
        n_diff, n_out = len(diff_leaves), len(out_leaves)
        # the custom call passes fwd's output through; its arguments are the differentiable leaves (which get the
        # rule's cotangents), the output and the residual Tensors (which get none from it)
        leaves = [*diff_leaves, *out_leaves, *res_tensors]
        slots = _slots(who, leaves)

        def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor | None, ...]:
            given = iter(weak(Tensor(call.inputs[s].uop)) if w else call.inputs[s]   # this call's (per example,
                         for s, w in zip(slots[n_diff + n_out:], res_weak, strict=True))   # under vmap)
            res = tree_unflatten(res_tree, [next(given) if isinstance(r, Tensor) else r for r in res_leaves])
            cts = bwd(*split.static, res, tree_unflatten(out_tree, list(grads)))
            flat = _cotangents(who, f"bwd {_name(bwd)}", cts, split.diff, names)
            return _grads_per_slot(flat, slots[:n_diff], len(call.inputs))

        backward.__qualname__ = f"{_name(self.fun)}.bwd"
        outs = Function(lambda *xs: tuple(xs[n_diff:n_diff + n_out]), grad_fxn=backward, name=_name(self.fun))(*leaves)
        return tree_unflatten(out_tree, list(outs))


class custom_jvp:  # noqa: N801 - JAX's name
    """A function with a custom forward-mode rule, as `jax.custom_jvp`; reverse mode uses its transpose.

    >>> @tg.custom_jvp
    ... def log1pexp(x):
    ...     return tnp.log1p(tnp.exp(x))
    >>> @log1pexp.defjvp
    ... def log1pexp_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return log1pexp(x), t * tg.nn.sigmoid(x)           # stable where the plain rule gives inf / inf
    >>> tg.grad(log1pexp)(tnp.asarray(100.0))                 # 1.0, not nan

    The rule must be linear in the tangents (as every JVP is). `defjvps(jvp_0, jvp_1, ...)` gives one rule per
    argument instead, `jvp_i(g_i, ans, *primals) -> the tangent contribution of argument i` (None: no
    dependence). `nondiff_argnums` as in `custom_vjp`: the rule is called `jvp(*nondiff_args, primals, tangents)`.
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        self.fun = fun
        self.nondiff_argnums = _nondiff(f"custom_jvp {_name(fun)}", nondiff_argnums)
        self.jvp: Callable | None = None
        functools.update_wrapper(self, fun, updated=())

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the rule `jvp(*nondiff_args, primals, tangents) -> (out, tangent_out)`; returns it (a decorator)."""
        if not callable(jvp):
            raise TypeError(f"custom_jvp {_name(self.fun)}: defjvp needs a callable, got {type(jvp).__name__}")
        self.jvp = jvp
        return jvp

    def defjvps(self, *rules: Callable | None) -> None:
        """One rule per differentiable argument: `rule_i(g_i, ans, *primals)`, the output's tangent summed over
        them (None: the output does not depend on that argument)."""
        fun = self.fun

        def jvp(*a: Any) -> tuple:
            primals, tangents = a[-2], a[-1]
            if len(rules) != len(primals):
                raise TypeError(f"custom_jvp {_name(fun)}: defjvps got {len(rules)} rules for {len(primals)} "
                                f"differentiable arguments; give one per argument (None for none)")
            ans = fun(*_rejoin(self, a[:-2], primals))
            total = None
            for rule, t in zip(rules, tangents, strict=True):
                if rule is None or t is None:
                    continue
                term = rule(t, ans, *primals)
                total = term if total is None else _tree_add(total, term)
            return ans, total
        jvp.__qualname__ = f"{_name(fun)}.defjvps"
        jvp.per_argument = True   # type: ignore[attr-defined] - (a None tangent skips its rule)
        self.jvp = jvp

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        who = f"custom_jvp {_name(self.fun)}"
        _check_kwargs(who, kwargs)
        if self.jvp is None:
            raise TypeError(f"{who}: no rule was set; call {_name(self.fun)}.defjvp(jvp) before using it")
        if _plain(self):
            return self.fun(*args)
        split = _Split(who, args, self.nondiff_argnums)
        fun, rule = self.fun, self.jvp
        levels = len(current().differentiating)   # (the rule runs in the backward, maybe after this level ended)
        names = _argnames(fun, split)
        leaves, in_tree = _flat(split.diff)
        slots = _slots(who, leaves)

        def backward(grads_tree: Any, call: Any) -> tuple[Tensor | None, ...]:
            from tgfx.transforms.grad import compute_gradient, linear_input
            grads = tree_flatten(grads_tree)[0]
            # the primals as the call sees them, and a tangent stand-in for each differentiable Tensor leaf
            primal_leaves = [call.inputs[s] if s is not None else leaf for leaf, s in zip(leaves, slots, strict=True)]
            stand_ins = [linear_input(p.uop, "tangent") if isinstance(p, Tensor) and p.dtype.is_float else None
                         for p in primal_leaves]
            tangent_leaves = [Tensor(t) if t is not None else (p * 0 if isinstance(p, Tensor) else p)
                              for p, t in zip(primal_leaves, stand_ins, strict=True)]
            primals = tree_unflatten(in_tree, primal_leaves)
            if in_forward_mode() and any(s is not None for s in stand_ins):
                cts = _rule_as_transpose(self, levels, split, primals, primal_leaves, stand_ins, in_tree, list(grads))
                per_arg = [tree_unflatten(_flat(a)[1], cts[k:k + n]) for a, k, n in _leaf_spans(split.diff)]
                flat = _cotangents(who, f"the transpose of jvp {_name(rule)}", per_arg, split.diff, names)
                return _grads_per_slot(flat, slots, len(call.inputs))
            tangents = tree_unflatten(in_tree, tangent_leaves)
            with _running_rule(self, levels):
                res = rule(*split.static, tuple(primals), tuple(tangents))
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                raise TypeError(f"{who}: jvp {_name(rule)} must return a pair (output, tangent_out), got "
                                f"{type(res).__name__}")
            t_out, t_tree = _flat(res[1])
            if len(t_out) != len(grads):
                raise TypeError(f"{who}: jvp {_name(rule)} returned a tangent of structure {t_tree} for an output "
                                f"with {len(grads)} leaves; the tangent has the output's structure")
            pairs = []
            for i, (t, g) in enumerate(zip(t_out, grads, strict=True)):
                if t is None:
                    continue
                if not isinstance(t, Tensor) or t.shape != g.shape:
                    got = f"shape {t.shape}" if isinstance(t, Tensor) else type(t).__name__
                    raise TypeError(f"{who}: jvp {_name(rule)} returned an output tangent of {got} for output leaf "
                                    f"{i}, which has shape {g.shape}")
                if t.dtype.is_float:
                    pairs.append((t.uop.cast(g.dtype), g.uop))
            targets = [s for s in stand_ins if s is not None]
            # the output tangent is linear in the stand-ins: reverse mode with respect to them is its transpose
            d = compute_gradient(UOp(Ops.TUPLE, None, tuple(t for t, _ in pairs)), tuple(g for _, g in pairs),
                                 targets) if pairs and targets else {}
            left = {u for c in d.values() for u in c.toposort() if u in set(targets)}
            if left:
                raise TypeError(f"{who}: jvp {_name(rule)} is not linear in the tangents (the output tangent "
                                f"multiplies them together, feeds them to a nonlinear op, or carries them through a "
                                f"loop, which its transpose cannot take); a JVP is t -> J t")
            cts = [None if s is None or s not in d else Tensor(d[s]) for s in stand_ins]
            per_arg = [tree_unflatten(_flat(a)[1], cts[k:k + n]) for a, k, n in _leaf_spans(split.diff)]
            flat = _cotangents(who, f"the transpose of jvp {_name(rule)}", per_arg, split.diff, names)
            return _grads_per_slot(flat, slots, len(call.inputs))

        backward.__qualname__ = f"{_name(fun)}.jvp_transpose"
        out = Function(lambda *diff: fun(*split.join(diff)), grad_fxn=backward, allow_implicit=True,
                       name=_name(fun), reads_values=True)(*split.diff)
        if _reads_closed_over(out, len({s for s in slots if s is not None})):
            raise TypeError(f"{who}: its output depends on a value being differentiated that it reads from its "
                            f"closure, not from its arguments; its rule gives tangents to its arguments only, so "
                            f"that value's derivative would be lost. Pass the value as an argument")
        return out


def _rule_as_transpose(f: custom_jvp, levels: int, split: _Split, primals: Any, primal_leaves: list[Any],
                       stand_ins: list[UOp | None], in_tree: PyTreeDef, grads: list[Tensor]) -> list[Tensor | None]:
    """A custom_jvp's backward where forward mode builds it (`control_grad.forward_mode`): forward mode transposes
    it and never evaluates it, so each float input's cotangent is a node whose transpose is the rule itself, run on
    the tangents, as JAX's jvp runs it. Transposing the rule instead went through whatever it is written with: a rule
    with a loop (a geometric series, an implicit solve by iteration) had no jvp."""
    from tgfx.lowering.complex import is_zero
    floats = [i for i, s in enumerate(stand_ins) if s is not None]
    per_argument = getattr(f.jvp, "per_argument", False)
    at: dict[int, int] = {}
    g_slot = [at.setdefault(id(g), len(at)) for g in grads]   # (the node's inputs: each Tensor once)
    # the primals are inputs of the node too, read back from its call: under vmap the call is batched and its rule
    # run per example by another vmap (`vmap.BatchedBackward`), where this closure's primals, the first vmap's
    # stand-ins, are no longer bound (forward mode through vmap of a custom_jvp raised EscapedTracerError)
    tensors = [p for p in primal_leaves if isinstance(p, Tensor)]
    p_slot = {id(p): at.setdefault(id(p), len(at)) for p in tensors}

    def apply_rule(ts: tuple, call: Any) -> tuple:
        leaves = [call.inputs[p_slot[id(p)]] if isinstance(p, Tensor) else p for p in primal_leaves]
        # a tangent no path gives (a zero) is a symbolic zero for `defjvps` (its rule is not run: betainc's NaN rules
        # for a and b), zeros for a rule of all the arguments, as JAX's
        given = {i: None if per_argument and is_zero(t.uop, signed=False) else t
                 for i, t in zip(floats, ts, strict=True)}
        tangents = [given[i] if i in given else (p * 0 if isinstance(p, Tensor) else p)
                    for i, p in enumerate(leaves)]
        with _running_rule(f, levels):
            res = f.jvp(*split.static, tuple(tree_unflatten(in_tree, leaves)),
                        tuple(tree_unflatten(in_tree, tangents)))
        out: list[Tensor | None] = [None] * len(call.inputs)
        for k, t, g in zip(g_slot, _flat(res[1])[0], grads, strict=True):
            if isinstance(t, Tensor) and t.dtype.is_float:
                t = t.astype(g.dtype)
                out[k] = t if out[k] is None else out[k] + t
        return tuple(out)

    def zeros(*args: Tensor) -> tuple:
        # (never evaluated; read from every input, so that under vmap it is batched where they are: a constant's
        # cotangent, the tangents arriving at it, would be summed over the batch first)
        sums = [a.sum() * 0 for a in args]
        anchor = functools.reduce(lambda a, b: a + b, [z.real if z.dtype.is_complex else z for z in sums])
        return tuple(Tensor.full(p.shape, 0, p.dtype, device=p.device if isinstance(p.device, str) else None)
                     + anchor.astype(p.dtype) for p in (primal_leaves[i] for i in floats))
    inputs = list({id(t): t for t in [*grads, *tensors]}.values())
    made = Function(zeros, grad_fxn=apply_rule, name=f"{_name(f.fun)}.jvp")(*inputs)
    cts: list[Tensor | None] = [None] * len(primal_leaves)
    for i, z in zip(floats, made, strict=True):
        cts[i] = z
    return cts


def _reads_closed_over(out: Any, n_args: int) -> bool:
    """Whether the FUNCTION call giving `out` (with `n_args` argument Tensors) took, beyond them, a value being
    differentiated (`is_grad_input`) that its function read from its closure (`allow_implicit` made it an input)."""
    call = next((t.uop.src[0] for t in tree_flatten(out)[0] if isinstance(t, Tensor) and t.uop.op is Ops.GETTUPLE),
                None)
    return call is not None and any(is_grad_input(u) for u in call.src[n_bodies(call) + n_args:])


def _leaf_spans(diff: tuple) -> list[tuple[Any, int, int]]:
    """Each differentiable argument with the position of its first leaf among all of them and its leaf count."""
    out, k = [], 0
    for a in diff:
        n = len(_flat(a)[0])
        out.append((a, k, n))
        k += n
    return out


def _rejoin(f: custom_jvp, static: Sequence[Any], primals: Sequence[Any]) -> tuple:
    it, st = iter(primals), iter(static)
    n = len(static) + len(primals)
    return tuple(next(st) if i in f.nondiff_argnums else next(it) for i in range(n))


def _tree_add(a: Any, b: Any) -> Any:
    la, ta = tree_flatten(a)
    lb, _ = tree_flatten(b)
    return tree_unflatten(ta, [x + y for x, y in zip(la, lb, strict=True)])


__all__ = ["custom_vjp", "custom_jvp"]
