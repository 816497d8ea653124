"""`tg.checkpoint` (also `tg.remat`): JAX's rematerialisation decorator.

`jax.checkpoint(f)` computes what `f` computes, with the same derivatives; what changes is what a reverse-mode
differentiation keeps from the forward pass: only f's inputs, with f run again in the backward to get the values its
VJP needs. Here it is a `tg.custom_vjp` whose forward keeps the inputs as its residuals and whose backward is
`tg.vjp(f, *inputs)`, so the backward graph is built from the inputs, not from the forward's intermediates.

What is stored is the scheduler's decision in tgfx (a value is a buffer only where a kernel boundary needs it, and
cheap elementwise values are recomputed rather than stored). A loop's backward recomputes its body's elementwise work
from the saved carries and reads the body's reductions from the forward (`control_grad`'s residuals), unless the body
calls `checkpoint` (its forward runs in the body's own graph, beside the body's other reductions, so the call marks
the trace it runs in): then the backward recomputes the whole step from the saved carries, as a checkpointed `scan`
body does in JAX. Otherwise `checkpoint` mostly serves code written for JAX: `policy` and `prevent_cse` are accepted
for compatibility and change nothing.

>>> block = tg.checkpoint(lambda x, w: tnp.tanh(x @ w))
>>> tg.grad(lambda w: block(x, w).sum())(w)          # the same gradient as without checkpoint
>>> f = tg.checkpoint(g, static_argnums=(1,))        # argument 1 is a Python value (a flag, a size)
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from tgfx.custom import custom_vjp
from tgfx.ir.control import n_bodies
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.tensor import Tensor, is_weak, weak_like
from tgfx.trace_state import current
from tgfx.transforms.grad import vjp
from tgfx.tree import tree_flatten, tree_leaves, tree_unflatten


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = ()) -> Any:
    """`fun` with the same values and derivatives, whose reverse-mode differentiation keeps only its inputs and runs
    it again in the backward (`jax.checkpoint`). Usable bare (`@tg.checkpoint`) and with arguments
    (`@tg.checkpoint(static_argnums=(1,))`); keyword arguments of the call are differentiable inputs too.
    `static_argnums` name positional arguments that are Python values, not arrays (passed as they are)."""
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    if any(not isinstance(i, int) for i in static):
        raise TypeError(f"checkpoint: static_argnums must be ints (positions of arguments), got {static_argnums!r}")
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy, static_argnums=static)
    if not callable(fun):
        raise TypeError(f"checkpoint: expected a function to wrap, got {type(fun).__name__}")

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        where = {i % len(args) if -len(args) <= i < len(args) else i for i in static}
        if bad := sorted(i for i in where if not 0 <= i < len(args)):
            raise ValueError(f"checkpoint of {getattr(fun, '__name__', 'a function')}: static_argnums {bad} out of "
                             f"range for a call with {len(args)} positional arguments")
        dynamic = [i for i in range(len(args)) if i not in where]
        names = tuple(kwargs)

        def call(*values: Any) -> Any:   # the dynamic positional arguments, then the keyword arguments' values
            full = list(args)
            for i, v in zip(dynamic, values, strict=False):
                full[i] = v
            return fun(*full, **dict(zip(names, values[len(dynamic):], strict=True)))

        for t in current().traces:   # the loops whose bodies call it save no residuals (`control_grad`)
            t.checkpointed.add(getattr(fun, "__name__", "a function"))
        values = (*(args[i] for i in dynamic), *kwargs.values())
        if not current().differentiating:
            return call(*values)
        # the values `fun` closes over that depend on what is differentiated (a scan body's weights) are inputs of
        # the custom call too, or the rule, which gives cotangents to its inputs only, left them none (a zero
        # gradient, silently). This run of `fun` finds them, and is the forward's
        out, consts = _run_finding_captured(call, values)
        n = len(values)

        def converted(*given: Any) -> Any:   # `call` with the closed-over values replaced by the given ones
            mapping = {c.uop: v.uop for c, v in zip(consts, given[n:], strict=True) if v.uop is not c.uop}
            return _substituted(call(*given[:n]), mapping)

        def forward(*given: Any) -> Any:
            return (out if all(a is b for a, b in zip(given, (*values, *consts), strict=True)) else converted(*given),
                    given)
        rematerialised = custom_vjp(converted)
        rematerialised.defvjp(forward, lambda given, g: vjp(converted, *given)[1](g))
        return rematerialised(*values, *consts)
    return wrapped


def _run_finding_captured(call: Callable, values: tuple[Any, ...]) -> tuple[Any, list[Tensor]]:
    """`call(*values)`, and the values being traced or differentiated (`_stand_in`) that its graph reads other than
    through `values`: what it closed over, or computed from what it closed over. It runs on stand-ins for `values`,
    put back after: a view of a view input folds into one view of the input's own source, which would hide that it
    reads the input. The stand-ins themselves are what is found, not the nodes `call` computed from them: `call` runs
    again on the custom call's inputs, and only nodes it reads from outside are the same objects again (a constant it
    makes, `np.ones(3)` or a NumPy argument, is a new buffer each run, so a node computed from one is a new node)."""
    leaves, tree = tree_flatten(values)
    tensors = [i for i, v in enumerate(leaves) if isinstance(v, Tensor)]
    stand = list(leaves)
    for i in tensors:
        u = leaves[i].uop
        stand[i] = weak_like([Tensor(UOp(Ops.CONTIGUOUS, u.dtype, (u,), tag=("checkpoint input", i)))],
                             [is_weak(leaves[i])])[0]
    out = call(*tree_unflatten(tree, stand))
    given = {stand[i].uop for i in tensors}
    found: list[UOp] = []
    seen: set[UOp] = set()
    todo = [UOp(Ops.TUPLE, None, tuple(t.uop for t in tree_leaves(out) if isinstance(t, Tensor)))]
    while todo:   # (a call's, a loop's body is its own graph, its PARAMs its own)
        u = todo.pop()
        if u in seen or u in given:
            continue
        seen.add(u)
        if _stand_in(u):
            found.append(u)
        else:
            todo.extend(reversed(_operands(u)))
    return _substituted(out, {stand[i].uop: leaves[i].uop for i in tensors}), [Tensor(u) for u in found]


def _operands(u: UOp) -> tuple[UOp, ...]:
    return u.src[n_bodies(u):]


def _stand_in(u: UOp) -> bool:
    """A node standing for a value being traced (a PARAM) or differentiated (a placeholder), as
    `tgfx.transforms.linear` tells a closed-over tracer."""
    return u.op is Ops.PARAM or (u.op is Ops.CONTIGUOUS and isinstance(u.tag, tuple) and u.tag[:1] == ("grad_input",))


def _substituted(out: Any, mapping: dict[UOp, UOp]) -> Any:
    """`out` with the nodes in `mapping` replaced in its Tensors' graphs (weak types kept)."""
    if not mapping:
        return out
    leaves, tree = tree_flatten(out)
    idx = [i for i, x in enumerate(leaves) if isinstance(x, Tensor)]
    for i, u in zip(idx, UOp(Ops.TUPLE, None, tuple(leaves[i].uop for i in idx)).substitute(mapping).src, strict=True):
        leaves[i] = weak_like([Tensor(u)], [is_weak(leaves[i])])[0]
    return tree_unflatten(tree, leaves)


remat = checkpoint
