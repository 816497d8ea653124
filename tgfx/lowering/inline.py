"""inline: FUNCTIONs are substituted into their callers, so code fuses across the call boundary (SPEC §3).

`GETTUPLE(i)` of `FUNCTION(TUPLE(body...), a0, a1, ...)` becomes `body[i]` with each `PARAM(k)` replaced by `a_k`.
Sources are rewritten first, so nested functions are inlined innermost first and a body holds only its own PARAMs
when it is substituted. The bodies of opaque `CALL`s (precompiled functions, custom kernels) are never entered.
"""
from __future__ import annotations

from collections.abc import Callable

from tgfx.ir.control import BODIED, n_bodies
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp


def outside_bodies(u: UOp) -> tuple[UOp, ...]:
    return u.src[n_bodies(u):] if u.op in BODIED else u.src


def walk(root: UOp) -> list[UOp]:
    """Toposort that treats the bodies of FUNCTIONs, CALLs, LOOPs and SWITCHes as opaque (they hold PARAMs of their
    own). The walk of a SINK or a TUPLE (a graph's roots, a body) is kept on it, as `toposort` keeps a SINK's order:
    tracing, inlining and scheduling walk the same roots again (spectral's first call: 104 walks of 38 roots, 60% of
    the nodes visited a second time or more). Without the root, last: kept on itself, it would be a cycle."""
    if root.op is not Ops.SINK and root.op is not Ops.TUPLE:
        return root.toposort(outside_bodies)
    if (hit := root.__dict__.get("_walk")) is None:
        order = root.toposort(outside_bodies)
        root.__dict__["_walk"] = tuple(order[:-1])
        return order
    return [*hit, root]


def substitute_outside_calls(root: UOp, mapping: dict[UOp, UOp],
                             operands: Callable[[UOp, tuple[UOp, ...]], tuple[UOp, ...]] | None = None) -> UOp:
    """`root` with the nodes of `mapping` replaced, outside bodies, every node rebuilt once on its new sources (in
    graph order). `operands`, given a node and its new non-body sources, may change them (a loop's operands)."""
    new: dict[UOp, UOp] = {}
    for u in walk(root):
        if u in mapping:
            new[u] = mapping[u]
            continue
        nb = n_bodies(u)
        ops = tuple(new[s] for s in u.src[nb:])
        src = (*u.src[:nb], *(ops if operands is None else operands(u, ops)))
        new[u] = u if src == u.src else u.replace(src=src)
    return new[root]


def params_of(body: UOp) -> dict[int, UOp]:
    """The PARAMs a body reads (outside nested FUNCTION, CALL and loop bodies), by slot."""
    return {u.arg[0]: u for u in walk(body) if u.op is Ops.PARAM}


def inline_function(ctx: dict[UOp, UOp], g: UOp, fn: UOp) -> UOp:
    # the whole body substituted once per FUNCTION, whose GETTUPLEs then pick their results from it: one walk of a
    # gradient's body, not one per parameter it returns (a transformer step's trace walked it 30 times: 0.25 s)
    if (body := ctx.get(fn)) is None:
        body, args = fn.src[0], fn.src[1:]
        body = ctx[fn] = substitute_outside_calls(body, {p: args[k] for k, p in params_of(body).items()})
    return body.src[g.arg]


pm_inline = PatternMatcher([
    (UPat(Ops.GETTUPLE, src=(UPat(Ops.FUNCTION, name="fn"),), name="g"), inline_function),
])
# ... but a FUNCTION with a backward of its own (custom_vjp, custom_jvp, checkpoint: `arg[1]`), which a graph that is
# differentiated later needs as a call
pm_inline_plain = PatternMatcher([
    (UPat(Ops.GETTUPLE, src=(UPat(Ops.FUNCTION, name="fn"),), name="g"),
     lambda ctx, g, fn: inline_function(ctx, g, fn) if fn.arg[1] is None else None),
])


def inline(root: UOp, custom: bool = True) -> UOp:
    """`root` with every FUNCTION it calls (outside opaque bodies) substituted into its callers; without `custom`,
    those with a backward of their own stay calls (a loop's or a branch's body, differentiated later: inlined, a
    custom_vjp's rule was lost and the body's own derivative taken instead)."""
    return graph_rewrite(root, pm_inline if custom else pm_inline_plain, ctx={}, name="inline")


class EscapedTracerError(RuntimeError):
    """PARAMs reached the lowering outside any function that binds them: traced values used after their trace
    returned, or read while it still runs. The lowering knows only the PARAMs; the front end, which knows the traces,
    words the user's error from them (tgfx/trace_state.py: the function that made it, or a concretization error)."""

    def __init__(self, message: str, params: tuple[UOp, ...] = ()) -> None:
        super().__init__(message)
        self.params = params


def check_no_params(sink: UOp) -> None:
    """After inlining, a PARAM outside any function is a traced value that escaped the function that made it."""
    params = tuple(u for u in walk(sink) if u.op is Ops.PARAM)
    if params:
        p = params[0]
        raise EscapedTracerError(f"a traced value (argument slot {p.arg[0]}, {p.dtype.name}{list(p.arg[1])}) was "
                                 f"used outside the function that made it", params)
