"""Linear maps from functions: `linearize`, `linear_transpose`, and the helpers `custom_gradient` and
`closure_convert`, as JAX has them, built on the trace and rules of `grad.py` and the pushforward of `jvp.py`.

- `linearize(f, *primals)` traces `f` once and builds its pushforward once, a graph linear in tangent stand-ins;
  each call of the returned `f_jvp(*tangents)` binds the stand-ins to the tangents given, so `f` is not run again.
- `linear_transpose(f, *primals)` is the pullback of `f` at zeros of the primals' types: for a linear `f` the
  pullback does not depend on where it is taken, and it is `f`'s transpose.
- `custom_gradient(f)`: `f` returns `(value, vjp_rule)`; a `custom_vjp` whose forward keeps the rule.
- `closure_convert(f, *example_args)`: the float arrays `f` closes over that are being traced or differentiated
  become explicit trailing arguments, so a `custom_vjp` can return cotangents for them.

>>> y, f_jvp = tg.linearize(tnp.sin, tnp.asarray([0.0, 1.0]))
>>> f_jvp(tnp.ones(2))                                             # cos([0, 1])
>>> f_t = tg.linear_transpose(lambda x: 2.0 * x, tg.ShapeDtypeStruct((2,), tnp.float32))
>>> f_t(tnp.ones(2))                                               # (Tensor([2., 2.]),)
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tgfx.custom import custom_vjp
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.tensor import Tensor, is_weak, weak_like
from tgfx.transforms.grad import check_like, leave_trace, leave_with_aux, trace, vjp, zeros_like
from tgfx.transforms.jvp import _linear_leftovers, pushforward
from tgfx.transforms.shapes import ShapeDtypeStruct
from tgfx.tree import tree_flatten, tree_leaves, tree_map, tree_unflatten


def linearize(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """`(f(*primals), f_jvp)` with `f_jvp(*tangents) == jvp(f, primals, tangents)[1]`, as `jax.linearize`.

    `f` runs once, here; `f_jvp` evaluates the pushforward (linear in the tangents) for any tangents of the
    primals' structure, shapes and dtypes, eagerly or inside `tg.jit`. With has_aux, `(out, f_jvp, aux)`.

    >>> y, f_jvp = tg.linearize(lambda x: x ** 3, tnp.asarray([1.0, 2.0]))
    >>> f_jvp(tnp.ones(2))                   # 3 x^2: [3., 12.]

    Raises:
        TypeError: `fun` is not callable, or a primal is not an array.
        ValueError: `f_jvp` gets a different number of tangents, or tangents of another structure or shape.
    """
    if not callable(fun):
        raise TypeError(f"linearize: expected a function, got {type(fun).__name__}")
    tr = trace("linearize", fun, primals, {}, tuple(range(len(primals))), has_aux, allow_int=True)
    tans, outs_t = pushforward(tr, range(len(tr.params)))
    outs_t = [zeros_like(o) if d is None else d for o, d in zip(tr.outs, outs_t, strict=True)]
    outs, aux = leave_with_aux(tr, tr.outs)
    out = tree_unflatten(tr.out_tree, weak_like(outs, tr.weak_outs))   # the values as the function computed them
    leftovers = _linear_leftovers(tr)
    reads: dict[int, set[int]] = {}   # output -> the inputs whose tangent stand-ins its tangent reads, when asked

    def tangent_weak(j: int, flat_t: list[Any]) -> bool:
        # JAX's linearized function computes as any function of its tangents: a weakly typed output's tangent is weak
        # when the tangents it reads are (`linearize(lambda x: x * x, 2.0)[1]` gives a weak float32 for 1.0, a float32
        # for a float32); unlike `jvp`, which gives tangents their primals' types
        if not tr.weak_outs[j]:
            return False
        if j not in reads:
            nodes = set(outs_t[j].toposort())
            reads[j] = {i for i, stand_in in tans.items() if stand_in in nodes}
        return all(is_weak(flat_t[i]) for i in reads[j])

    def f_jvp(*tangents: Any) -> Any:
        if len(tangents) != len(primals):
            raise ValueError(f"linearize: the linearized function takes one tangent per primal ({len(primals)}), "
                             f"got {len(tangents)}")
        flat_t: list[Any] = []
        for i, t in enumerate(tangents):
            leaves, tree = tree_flatten(t)
            if tree != tr.in_trees[i]:
                raise ValueError(f"linearize: primal {i} has structure {tr.in_trees[i]!r} but its tangent has "
                                 f"{tree!r}")
            flat_t.extend(leaves)
        bind = {stand_in: check_like("linearize", f"tangent leaf {i}", flat_t[i], tr.inputs[i])
                for i, stand_in in tans.items()}
        flat = [Tensor(u) for u in leave_trace(tr, outs_t, {**leftovers, **bind})]
        return tree_unflatten(tr.out_tree, weak_like(flat, [tangent_weak(j, flat_t) for j in range(len(flat))]))

    f_jvp.__qualname__ = f"linearize({getattr(fun, '__qualname__', 'fun')})"
    return (out, f_jvp, aux) if has_aux else (out, f_jvp)


def _zeros_of(who: str, x: Any) -> Any:
    """A primal given for its type only, as an array of zeros of that type."""
    if isinstance(x, ShapeDtypeStruct):
        return Tensor.full(x.shape, 0, x.dtype)
    t = x if isinstance(x, Tensor) else Tensor(x)
    if not t.dtype.is_inexact:
        raise TypeError(f"{who} only supports float or complex inputs, but got {t.dtype.name}; cast the primal to "
                        f"a float dtype")
    return Tensor.full(t.shape, 0, t.dtype)


def linear_transpose(fun: Callable, *primals: Any, reduce_axes: tuple = ()) -> Callable:
    """The transpose of the linear function `fun`, as `jax.linear_transpose`: `f_t(cotangent)` returns a tuple
    with one cotangent per primal, in each primal's structure, such that `<f(x), c> == <x, f_t(c)>`.

    The primals give only the inputs' structure, shapes and float dtypes (arrays or `tg.ShapeDtypeStruct`s).
    `fun` is traced once, here, and must be linear: an affine `fun` is transposed as its linear part.

    >>> f_t = tg.linear_transpose(lambda x: tnp.cumsum(x), tnp.zeros(3))
    >>> f_t(tnp.asarray([1.0, 0.0, 0.0]))    # (Tensor([1., 0., 0.]),): cumsum's transpose sums from the right

    Raises:
        TypeError: `fun` is not callable, a primal is not a float array, or the cotangent has another dtype.
        ValueError: the cotangent's structure or shapes are not those of `fun`'s output.
    """
    if not callable(fun):
        raise TypeError(f"linear_transpose: expected a function, got {type(fun).__name__}")
    if reduce_axes:
        raise NotImplementedError("linear_transpose: reduce_axes is not supported (JAX deprecated it)")
    zeros = tree_map(functools.partial(_zeros_of, "linear_transpose"), primals,
                     is_leaf=lambda x: isinstance(x, ShapeDtypeStruct))
    out, pullback = vjp(fun, *zeros)
    out_leaves, out_tree = tree_flatten(out)
    for o in out_leaves:
        if not o.dtype.is_inexact:
            raise TypeError(f"linear_transpose only supports float or complex outputs, but the function returns "
                            f"{o.dtype.name}")

    def f_transpose(out_cotangent: Any) -> tuple:
        leaves, tree = tree_flatten(out_cotangent)
        if tree != out_tree:
            raise ValueError(f"linear_transpose: the cotangent has structure {tree!r}, but the function's output has "
                             f"{out_tree!r}")
        for i, (c, o) in enumerate(zip(leaves, out_leaves, strict=True)):
            d = c.dtype if isinstance(c, Tensor) else None
            if d is not None and d != o.dtype:
                raise TypeError(f"linear_transpose: cotangent leaf {i} has dtype {d.name}, the output has "
                                f"{o.dtype.name} (shape {o.shape}); cast it")
        return pullback(out_cotangent)

    f_transpose.__qualname__ = f"linear_transpose({getattr(fun, '__qualname__', 'fun')})"
    return f_transpose


def custom_gradient(fun: Callable) -> Callable:
    """A function with its own gradient, as `jax.custom_gradient`: `fun(*args)` returns `(value, vjp_rule)`, and
    `vjp_rule(cotangent)` returns one cotangent per argument (a tuple; a single value for one argument).

    >>> @tg.custom_gradient
    ... def clipped_identity(x):
    ...     return x, lambda g: (tnp.clip(g, -1.0, 1.0),)
    >>> tg.grad(lambda x: (5.0 * clipped_identity(x)).sum())(tnp.ones(2))   # [1., 1.]
    """
    if not callable(fun):
        raise TypeError(f"custom_gradient: expected a function, got {type(fun).__name__}")
    name = getattr(fun, "__qualname__", type(fun).__qualname__)

    def split(*args: Any) -> tuple[Any, Callable]:
        pair = fun(*args)
        if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not callable(pair[1]):
            raise TypeError(f"custom_gradient {name}: the function must return a pair (value, vjp_rule) with a "
                            f"callable rule, got {type(pair).__name__}")
        return pair[0], pair[1]

    def primal(*args: Any) -> Any:
        return split(*args)[0]

    def fwd(*args: Any) -> tuple[Any, Any]:
        ans, rule = split(*args)
        return ans, (rule, len(args))   # the rule is a Python value of the residuals, called by bwd

    def bwd(res: tuple[Callable, int], g: Any) -> tuple:
        rule, n = res
        cts = rule(g)
        if n == 1 and not (isinstance(cts, tuple) and len(cts) == 1):
            cts = (cts,)
        if not isinstance(cts, tuple):
            raise TypeError(f"custom_gradient {name}: the vjp rule must return a tuple of {n} cotangents (one per "
                            f"argument), got {type(cts).__name__}")
        return cts

    functools.update_wrapper(primal, fun)
    wrapped = custom_vjp(primal)
    wrapped.defvjp(fwd, bwd)
    return wrapped


def _traced(t: Tensor) -> bool:
    """Whether `t`'s value depends on something being traced (a PARAM stand-in) or differentiated (a placeholder):
    what JAX calls a closed-over tracer."""
    return any(u.op is Ops.PARAM or (u.op is Ops.CONTIGUOUS and isinstance(u.tag, tuple)
                                     and u.tag[:1] == ("grad_input",)) for u in t.uop.toposort())


def _closed_over(fun: Any, seen: set[int]) -> list[Tensor]:
    """The float Tensors in `fun`'s closure cells, its partial's bound arguments, and (recursively) the functions
    among them, first occurrence first."""
    if id(fun) in seen:
        return []
    seen.add(id(fun))
    values: list[Any] = []
    if isinstance(fun, functools.partial):
        values += [fun.func, fun.args, fun.keywords]
    for cell in getattr(fun, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:   # a cell not yet filled
            continue
    found: list[Tensor] = []
    for leaf in tree_leaves(values):
        if isinstance(leaf, Tensor):
            if leaf.dtype.is_inexact and all(leaf is not f for f in found):
                found.append(leaf)
        elif callable(leaf):
            found += [t for t in _closed_over(leaf, seen) if all(t is not f for f in found)]
    return found


def closure_convert(fun: Callable, *example_args: Any) -> tuple[Callable, list[Tensor]]:
    """`(converted, consts)` with `converted(*args, *consts) == fun(*args)`, as `jax.closure_convert`: the float
    arrays `fun` closes over that depend on a value being traced or differentiated become the explicit arguments
    `consts`, so a `custom_vjp` taking them can give them cotangents. Outside any transform there are none.

    The arrays are found in `fun`'s closure cells and bound `functools.partial` arguments (and those of the
    functions found there); `converted` calls `fun` and substitutes the given consts for them in its results.
    `example_args` are accepted for JAX's signature; `fun` is not called here.

    >>> def outer(c):
    ...     f, consts = tg.closure_convert(lambda x: x * c, tnp.ones(3))   # consts == [c] inside grad
    ...     return f(tnp.ones(3), *consts).sum()
    >>> tg.grad(outer)(tnp.ones(3))
    """
    if not callable(fun):
        raise TypeError(f"closure_convert: expected a function, got {type(fun).__name__}")
    consts = [t for t in _closed_over(fun, set()) if _traced(t)]
    n = len(example_args)

    def converted(*args: Any) -> Any:
        if len(args) != n + len(consts):
            raise TypeError(f"closure_convert: the converted function takes {n} argument(s) then {len(consts)} "
                            f"hoisted constant(s), got {len(args)} arguments")
        mapping: dict[UOp, UOp] = {}
        for i, (old, new) in enumerate(zip(consts, args[n:], strict=True)):
            if new is not old:
                mapping[old.uop] = check_like("closure_convert", f"hoisted constant {i}", new, old.uop)
        if not mapping:
            return fun(*args[:n])
        # fun reads the given values through its closure while it runs, not by a substitution of the closed-over
        # Tensors' nodes in its result: that also rewrote them inside its other arguments' values (a custom_vjp's
        # bwd calls converted on a state computed from those Tensors, whose stand-in then left the graph: a zero
        # gradient), and it missed them once computed (a bwd runs after the forward is realized, and a view of a
        # buffer folds into the ops that read it)
        swapped = [(old, old.uop) for old in consts if old.uop in mapping]
        for old, before in swapped:
            old.uop = mapping[before]
        try:
            return fun(*args[:n])
        finally:
            for old, before in swapped:
                old.uop = before

    functools.update_wrapper(converted, fun)
    return converted, consts


__all__ = ["closure_convert", "custom_gradient", "linear_transpose", "linearize"]
