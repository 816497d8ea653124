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
from tgfx.trace_state import current
from tgfx.transforms.grad import vjp


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
        rematerialised = custom_vjp(call)
        rematerialised.defvjp(lambda *values: (call(*values), values),
                              lambda values, g: vjp(call, *values)[1](g))
        return rematerialised(*(args[i] for i in dynamic), *kwargs.values())
    return wrapped


remat = checkpoint
