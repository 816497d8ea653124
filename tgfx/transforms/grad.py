"""Reverse mode over the UOp graph, and JAX's `grad`, `value_and_grad`, `vjp` and `stop_gradient` on top of it.

`pm_gradient` holds one rule per op. A rule sees the node, its sources and (as `ctx`) the gradient arriving at the
node, and returns one gradient per source; `None` is the symbolic zero and costs nothing. `compute_gradient` applies
the rules to the nodes between the root and the targets in reverse topological order, summing the gradients of a
node reached by several paths. Gradients are UOps of their node's shape and dtype; broadcasts are explicit `EXPAND`s
in the graph, so the EXPAND rule is where a broadcast gradient is summed back. Integer and bool values carry no
gradient: the walk drops whatever a rule returns for them.

How a function is differentiated (`trace`): each input leaf's UOp is replaced by a *placeholder*, a `CONTIGUOUS` of
that UOp tagged `("grad_input", n)`. It has the input's value, so Python control flow on it works as in JAX's eager
`grad` (`if x.sum() > 0:` realises only the comparison), yet it is a node of its own, so the target is told apart
from other uses of the same buffer (closures, one Tensor passed twice). `f` runs lazily on the placeholders, the
gradient graph is built, and as results leave (`leave_trace`) each placeholder is rewritten back to the input's UOp:
results hold no trace of differentiation, so their kernels are the ones an undifferentiated graph has and nothing
extra reaches the scheduler. Cotangents and tangents that a result is linear in stand in as tagged `PARAM`s and are
bound to their values the same way. `stop_gradient` inside a differentiation is a `CONTIGUOUS` tagged
`"stop_gradient"`: its rule passes nothing on, and it is kept until the outermost differentiation ends (so
`grad(grad(f))` honours it at both orders), then rewritten to its source.

Forward mode, Jacobians and Hessians are in `tgfx/transforms/jvp.py`; they reuse this module's trace and rules.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgfx.devices import DEFAULT_DEVICE
from tgfx.dtypes import DType, dtypes
from tgfx.function import is_grad_input
from tgfx.ir.control import n_bodies, n_results
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp, prod
from tgfx.placement import is_committed, move
from tgfx.tensor import WIDENED, Tensor, is_weak, weak, weak_input, weak_like
from tgfx.trace_state import active, current, differentiating
from tgfx.transforms.collectives import bind_batched, sum_invariant_gradients
from tgfx.transforms.control_grad import forward_mode, gradient_path, in_forward_mode
from tgfx.tree import PyTreeDef, keystr, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten

Grad = UOp | tuple | None  # a node's gradient: a UOp, a tuple for a TUPLE/FUNCTION (one per result), None = zero


# ---- UOp helpers: elementwise sources must have equal shapes, so constants are broadcast explicitly ----
def _full(like: UOp, value: float | int | bool, dtype: DType | None = None) -> UOp:
    c = UOp.const(dtype or like.dtype, value)
    if not like.shape:
        return c
    return UOp(Ops.EXPAND, c.dtype, (UOp(Ops.RESHAPE, c.dtype, (c,), (1,) * len(like.shape)),), like.shape)


def _conj_pairs(p: UOp) -> UOp:
    """Complex (re, im) pairs conjugated: times (1, -1) along the last axis."""
    from tgfx.lowering.complex import pack
    sign = pack(UOp.const(p.dtype, 1.0), UOp.const(p.dtype, -1.0))
    sign = UOp(Ops.EXPAND, p.dtype, (UOp(Ops.RESHAPE, p.dtype, (sign,), (1,) * (len(p.shape) - 1) + (2,)),), p.shape)
    return p * sign


def _reshape(u: UOp, shape: tuple[int, ...]) -> UOp:
    return u if u.shape == shape else UOp(Ops.RESHAPE, u.dtype, (u,), tuple(shape))


def _expand(u: UOp, shape: tuple[int, ...]) -> UOp:
    return u if u.shape == shape else UOp(Ops.EXPAND, u.dtype, (u,), tuple(shape))


def _permute(u: UOp, perm: Sequence[int]) -> UOp:
    if u.op is Ops.PERMUTE:   # one view, not two: a gradient stored transposed is then used where it lies
        return _permute(u.src[0], [u.arg[p] for p in perm])
    return u if tuple(perm) == tuple(range(len(perm))) else UOp(Ops.PERMUTE, u.dtype, (u,), tuple(perm))


def _reduce(u: UOp, op: Ops, axes: Sequence[int]) -> UOp:
    return UOp(Ops.REDUCE_AXIS, u.dtype, (u,), (op, tuple(axes))) if axes else u


def _div(a: UOp, b: UOp) -> UOp:
    return a.alu(Ops.FDIV, b)


def _argsort(perm: Sequence[int]) -> tuple[int, ...]:
    return tuple(sorted(range(len(perm)), key=lambda i: perm[i]))


# ---- rules that need more than one line ----
def _max_grad(ctx: UOp, x: UOp, y: UOp) -> tuple[UOp, UOp]:
    """Where x == y each side gets half, as in JAX, so that max(x, x) has gradient exactly 1."""
    zero, half = _full(ctx, 0), ctx * _full(ctx, 0.5)
    tie = x.alu(Ops.CMPEQ, y)
    return tie.where(half, (y < x).where(ctx, zero)), tie.where(half, (x < y).where(ctx, zero))


def _pow_grad(ctx: UOp, x: UOp, y: UOp, ret: UOp) -> tuple[UOp, UOp]:
    """JAX's rule: d/dx is 0 where y == 0 (so 0**0 has a finite gradient); d/dy reads log(0) as 0 there."""
    zero, one = _full(x, 0), _full(x, 1)
    y_zero = y.alu(Ops.CMPEQ, zero)
    dx = y_zero.where(zero, y * x.alu(Ops.POW, y_zero.where(one, y - one)))
    dy = x.alu(Ops.CMPEQ, zero).where(one, x).alu(Ops.LOG) * ret
    return ctx * dx, ctx * dy


def _atan2_grad(ctx: UOp, x: UOp, y: UOp) -> tuple[UOp, UOp]:  # atan2(x, y): x is the numerator
    r = _div(ctx, x * x + y * y)
    return r * y, -(r * x)


def _reduce_max_grad(ctx: UOp, x: UOp, ret: UOp) -> tuple[UOp]:
    """Every element equal to the max gets an equal share, as in JAX."""
    hit = x.alu(Ops.CMPEQ, _expand(ret, x.shape)).cast(x.dtype)
    return (hit * _expand(_div(ctx, _reduce(hit, Ops.ADD, ret.arg[1])), x.shape),)


PROD_EXACT_MAX = 128  # up to this many elements per product, its gradient is built without dividing


def _reduce_mul_grad(ctx: UOp, x: UOp, ret: UOp) -> tuple[UOp]:
    """d prod / dx_i = prod_{j != i} x_j. Exact (zeros, all orders) as a masked product over an (n, n) square;
    above PROD_EXACT_MAX elements, out / x with the zeros counted: still exact for first order at zeros."""
    axes = ret.arg[1]
    n = prod(x.shape[a] for a in axes)
    g = _expand(ctx, x.shape)
    if n <= PROD_EXACT_MAX:
        return (g * _exclusive_prod(x, axes),)
    zero, one = _full(x, 0), _full(x, 1)
    is_zero = x.alu(Ops.CMPEQ, zero)
    nonzero_prod = _expand(_reduce(is_zero.where(one, x), Ops.MUL, axes), x.shape)
    zeros = _expand(_reduce(is_zero.cast(x.dtype), Ops.ADD, axes), x.shape)
    only_zero = is_zero & zeros.alu(Ops.CMPEQ, one)
    return (g * zeros.alu(Ops.CMPEQ, zero).where(_div(nonzero_prod, x), only_zero.where(nonzero_prod, zero)),)


def _exclusive_prod(x: UOp, axes: tuple[int, ...]) -> UOp:
    keep = tuple(a for a in range(len(x.shape)) if a not in axes)
    kept, moved = tuple(x.shape[a] for a in keep), tuple(x.shape[a] for a in axes)
    n = prod(moved)
    rows = _expand(_reshape(_permute(x, keep + axes), kept + (1, n)), kept + (n, n))
    iota = UOp(Ops.IOTA, dtypes.index, (), n)
    diag = _expand(_reshape(iota, (n, 1)), (n, n)).alu(Ops.CMPEQ, _expand(_reshape(iota, (1, n)), (n, n)))
    diag = _expand(_reshape(diag, (1,) * len(kept) + (n, n)), kept + (n, n))
    excl = _reduce(diag.where(_full(rows, 1), rows), Ops.MUL, (len(kept) + 1,))
    return _permute(_reshape(excl, kept + moved), _argsort(keep + axes))


def _copy_grad(ctx: UOp, x: UOp) -> tuple[UOp]:
    """The gradient goes back to the source's device (a constant gradient has none and goes anywhere), and to a
    sharded source's layout where the source names it (a MULTI, or `shard`'s COPY, under placeholders): the gradient
    of `tg.shard(x, devs, 1)` of an `x` split along axis 0 came back split along axis 1."""
    if x.device is None or ctx.device is None:
        return (ctx,)
    if type(x.device) is tuple:
        s = x
        while s.op is Ops.CONTIGUOUS:   # (a placeholder of a differentiated input, a stop_gradient)
            s = s.src[0]
        if s.op is Ops.MULTI or s.op is Ops.COPY and type(s.arg) is tuple:
            return (UOp(Ops.COPY, ctx.dtype, (ctx,), (x.device, s.arg if s.op is Ops.MULTI else s.arg[1])),)
        if ctx.device != x.device:   # (a COPY onto a device tuple names its layout: replicated, where x's is not known)
            return (UOp(Ops.COPY, ctx.dtype, (ctx,), (x.device, None)),)
    return (ctx if ctx.device == x.device else UOp(Ops.COPY, ctx.dtype, (ctx,), x.device),)


@dataclass
class CallInfo:
    """What a custom backward (`grad_fxn(grad_outputs, call)`) gets to see of the call it differentiates."""
    name: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    uop: UOp


def _call_name(ret: UOp) -> str:
    return str(ret.arg[0]) if isinstance(ret.arg, tuple) and ret.arg else str(ret.arg)


def _custom_backward(ctx: tuple, ret: UOp, grad_fxn: Callable) -> tuple:
    name = _call_name(ret)
    args = ret.src[1:]
    outs = tuple(Tensor(UOp(Ops.GETTUPLE, _result_dtype(ret, i), (ret,), i)) for i in range(len(ctx)))
    gouts = tuple(Tensor(g) if g is not None else Tensor(_full(o.uop, 0)) for g, o in zip(ctx, outs, strict=True))
    res = grad_fxn(gouts, CallInfo(name, tuple(Tensor(a) for a in args), outs, ret))
    if not isinstance(res, (tuple, list)) or len(res) != len(args):
        raise TypeError(f"grad_fxn of {name} must return a tuple with one gradient (or None) per input, "
                        f"{len(args)} in all, but returned {type(res).__name__}"
                        f"{f' of length {len(res)}' if isinstance(res, (tuple, list)) else ''}")
    grads: list[UOp | None] = []
    for i, (r, a) in enumerate(zip(res, args, strict=True)):
        if r is None:
            grads.append(None)
            continue
        if not isinstance(r, Tensor) or r.shape != a.shape:
            got = f"shape {r.shape}" if isinstance(r, Tensor) else type(r).__name__
            raise TypeError(f"grad_fxn of {name}: the gradient of input {i} must be a Tensor of shape {a.shape}, "
                            f"got {got}")
        grads.append(r.uop.cast(a.dtype) if a.dtype.is_inexact else None)
    return (None, *grads)


def _result_dtype(call: UOp, i: int) -> DType:
    body = call.src[0]
    return call.arg[2][i][1] if body.op in (Ops.SINK, Ops.CALLBACK) else body.src[i].dtype


def _call_grad(ctx: tuple, ret: UOp) -> tuple:
    """The backward of FUNCTION(TUPLE(results), a0, a1, ...): a new FUNCTION `<name>_backward` whose body is the
    gradient of the forward body with respect to the PARAMs that get one, called on (forward args, output grads);
    params the backward does not read are compacted away. A precompiled forward (a CALL) passes its outputs to the
    backward instead of having them recomputed; `grad_fxn` replaces all of this."""
    from tgfx.lowering.inline import params_of, substitute_outside_calls
    name, body, args = _call_name(ret), ret.src[0], ret.src[1:]
    grad_fxn = ret.arg[1] if isinstance(ret.arg, tuple) and len(ret.arg) > 1 else None
    if grad_fxn is not None:
        return _custom_backward(ctx, ret, grad_fxn)
    if body.op is Ops.CALLBACK:   # (as JAX's: the callback is Python, opaque to differentiation)
        kind = "IO callbacks" if body.arg.effect else "Pure callbacks"
        raise ValueError(f"{name}: {kind} do not support JVP. Please use `tg.custom_jvp` (or `tg.custom_vjp`) to use "
                         f"callbacks while taking gradients")
    if body.op is not Ops.TUPLE:
        raise TypeError(f"cannot differentiate custom kernel {name!r}: it is an opaque CALL; give it a grad_fxn "
                        f"(custom_kernel(..., grad_fxn=...))")
    fwd_params = params_of(body)
    nslots = max(fwd_params, default=-1) + 1
    gparams: list[UOp | None] = []
    bound: list[UOp] = []  # the value of each extra slot, in slot order
    for r, g in zip(body.src, ctx, strict=True):
        if g is None:
            gparams.append(None)
            continue
        gparams.append(UOp(Ops.PARAM, r.dtype, (), (nslots + len(bound), r.shape, r.device or DEFAULT_DEVICE)))
        bound.append(g)
    targets = [p for _, p in sorted(fwd_params.items()) if p.dtype.is_inexact]
    grads = compute_gradient(body, tuple(gparams), targets)
    wanted = [(k, grads[p]) for k, p in sorted(fwd_params.items()) if p in grads]
    if not wanted:
        return (None,) * len(ret.src)
    bw_body = UOp(Ops.TUPLE, None, tuple(g for _, g in wanted))
    if ret.op is Ops.CALL:  # precompiled: read the forward's outputs rather than recomputing them
        outs = {}
        for i, r in enumerate(body.src):
            if r.op is not Ops.PARAM:
                outs[r] = UOp(Ops.PARAM, r.dtype, (), (nslots + len(bound), r.shape, r.device or DEFAULT_DEVICE))
                bound.append(UOp(Ops.GETTUPLE, r.dtype, (ret,), i))
        bw_body = substitute_outside_calls(bw_body, outs)
    # a custom rule in the body builds its backward from what it closes over: a concrete buffer there (a NumPy
    # constant) or an outer differentiation's placeholder is one more argument, as `function` makes them of a traced
    # body (read in place, a buffer inside a body's graph read as zeros, silently)
    captured = {}
    for b in bw_body.toposort(lambda u: () if is_grad_input(u) else u.src[n_bodies(u):]):
        if b.op is Ops.BUFFER or is_grad_input(b):
            captured[b] = UOp(Ops.PARAM, b.dtype, (), (nslots + len(bound), b.shape, b.device or DEFAULT_DEVICE))
            bound.append(b)
    bw_body = substitute_outside_calls(bw_body, captured)
    # compact: the backward's arguments are only the slots its body reads, renumbered in order
    values = {**{k: a for k, a in enumerate(args)}, **{nslots + j: v for j, v in enumerate(bound)}}
    used = sorted(params_of(bw_body).items())
    renumber = {p: UOp(Ops.PARAM, p.dtype, (), (j, *p.arg[1:])) for j, (_, p) in enumerate(used)}
    bw_body = substitute_outside_calls(bw_body, renumber)
    # (not for forward mode, which transposes the backward: a precompiled one would be run for its outputs, and a
    # loop's pullback there is a placeholder with no value, only a derivative)
    precompile_bw = isinstance(ret.arg, tuple) and len(ret.arg) > 2 and bool(ret.arg[2]) and not in_forward_mode()
    bw = UOp(Ops.CALL if precompile_bw else Ops.FUNCTION, None, (bw_body, *(values[k] for k, _ in used)),
             (f"{name}_backward", None))
    out: list[UOp | None] = [None] * len(ret.src)
    for i, (k, g) in enumerate(wanted):
        out[1 + k] = UOp(Ops.GETTUPLE, g.dtype, (bw,), i)
    return tuple(out)


def loop_grad(ctx: tuple, ret: UOp) -> tuple:
    from tgfx.transforms.control_grad import loop_grad as rule
    return rule(ctx, ret)


def switch_grad(ctx: tuple, ret: UOp) -> tuple:
    from tgfx.transforms.control_grad import switch_grad as rule
    return rule(ctx, ret)


_x, _y = UPat.var("x"), UPat.var("y")


def _un(op: Ops) -> UPat:
    return UPat(op, src=(_x,), name="ret")


def _bin(op: Ops) -> UPat:
    return UPat(op, src=(_x, _y), name="ret")


def _reduces(op: Ops) -> UPat:
    return UPat(Ops.REDUCE_AXIS, src=(_x,), name="ret", custom=lambda u: u.arg[0] is op)


# ops whose result is piecewise constant or not a float: nothing flows back through them
NO_GRADIENT = (GroupOp.Defines | GroupOp.Comparison | GroupOp.IntOnly |
               {Ops.BITCAST, Ops.BIND, Ops.TRUNC, Ops.FLOOR, Ops.CEIL, Ops.RINT})
LN2 = math.log(2)

pm_gradient = PatternMatcher([
    # unary float math: g * f'(x), written with the node's own value `ret` where that is cheaper
    (_un(Ops.NEG), lambda ctx, x, ret: (-ctx,)),
    (_un(Ops.EXP), lambda ctx, x, ret: (ctx * ret,)),
    (_un(Ops.EXP2), lambda ctx, x, ret: (ctx * ret * _full(x, LN2),)),
    (_un(Ops.EXPM1), lambda ctx, x, ret: (ctx * (ret + _full(x, 1)),)),
    (_un(Ops.LOG), lambda ctx, x, ret: (_div(ctx, x),)),
    (_un(Ops.LOG2), lambda ctx, x, ret: (_div(ctx, x * _full(x, LN2)),)),
    (_un(Ops.LOG1P), lambda ctx, x, ret: (_div(ctx, x + _full(x, 1)),)),
    (_un(Ops.SQRT), lambda ctx, x, ret: (_div(ctx, ret + ret),)),
    (_un(Ops.RECIP), lambda ctx, x, ret: (-(ctx * ret * ret),)),
    (_un(Ops.SIN), lambda ctx, x, ret: (ctx * x.alu(Ops.COS),)),
    (_un(Ops.COS), lambda ctx, x, ret: (-(ctx * x.alu(Ops.SIN)),)),
    (_un(Ops.TAN), lambda ctx, x, ret: (ctx * (_full(x, 1) + ret * ret),)),
    (_un(Ops.ASIN), lambda ctx, x, ret: (_div(ctx, (_full(x, 1) - x * x).alu(Ops.SQRT)),)),
    (_un(Ops.ACOS), lambda ctx, x, ret: (-_div(ctx, (_full(x, 1) - x * x).alu(Ops.SQRT)),)),
    (_un(Ops.ATAN), lambda ctx, x, ret: (_div(ctx, _full(x, 1) + x * x),)),
    (_un(Ops.SINH), lambda ctx, x, ret: (ctx * x.alu(Ops.COSH),)),
    (_un(Ops.COSH), lambda ctx, x, ret: (ctx * x.alu(Ops.SINH),)),
    (_un(Ops.TANH), lambda ctx, x, ret: (ctx * (_full(x, 1) - ret * ret),)),
    (_un(Ops.ERF), lambda ctx, x, ret: (ctx * _full(x, 2 / math.sqrt(math.pi)) * (-(x * x)).alu(Ops.EXP),)),
    # binary
    (_bin(Ops.ADD), lambda ctx, x, y, ret: (ctx, ctx)),
    (_bin(Ops.MUL), lambda ctx, x, y, ret: (ctx * y, ctx * x)),
    (_bin(Ops.FDIV), lambda ctx, x, y, ret: (_div(ctx, y), -_div(ctx * ret, y))),
    (_bin(Ops.MOD), lambda ctx, x, y, ret: (ctx, -(ctx * _div(x, y).alu(Ops.TRUNC)))),  # C fmod: x - trunc(x/y)*y
    (_bin(Ops.MAX), lambda ctx, x, y, ret: _max_grad(ctx, x, y)),
    (_bin(Ops.POW), _pow_grad),
    (_bin(Ops.ATAN2), lambda ctx, x, y, ret: _atan2_grad(ctx, x, y)),
    # ternary
    (UPat(Ops.WHERE, src=(UPat.var("c"), _x, _y)),
     lambda ctx, c, x, y: (None, c.where(ctx, _full(ctx, 0)), c.where(_full(ctx, 0), ctx))),
    (UPat(Ops.MULACC, src=(_x, _y, UPat.var("z"))), lambda ctx, x, y, z: (ctx * y, ctx * x, ctx)),
    (UPat(Ops.CAST, src=(_x,)), lambda ctx, x: (ctx.cast(x.dtype) if x.dtype.is_inexact else None,)),
    # complex views: a cotangent of z = x + iy is df/dx - i df/dy (JAX's), so each view conjugates
    (UPat(Ops.AS_PAIRS, src=(_x,)), lambda ctx, x: (UOp(Ops.AS_COMPLEX, x.dtype, (_conj_pairs(ctx),)),)),
    (UPat(Ops.AS_COMPLEX, src=(_x,)), lambda ctx, x: (_conj_pairs(UOp(Ops.AS_PAIRS, x.dtype, (ctx,))),)),
    # movement: each gradient is the inverse movement; an EXPAND's is the sum over the axes it grew
    (UPat(Ops.RESHAPE, src=(_x,)), lambda ctx, x: (_reshape(ctx, x.shape),)),
    (_un(Ops.PERMUTE), lambda ctx, x, ret: (_permute(ctx, _argsort(ret.arg)),)),
    (_un(Ops.EXPAND), lambda ctx, x, ret: (_reduce(ctx, Ops.ADD, [i for i, (a, b) in enumerate(
        zip(x.shape, ret.shape, strict=True)) if a != b]),)),
    (_un(Ops.PAD), lambda ctx, x, ret: (UOp(Ops.SHRINK, ctx.dtype, (ctx,), tuple(
        (b, b + s) for (b, _), s in zip(ret.arg, x.shape, strict=True))),)),
    (_un(Ops.SHRINK), lambda ctx, x, ret: (UOp(Ops.PAD, ctx.dtype, (ctx,), tuple(
        (b, s - e) for (b, e), s in zip(ret.arg, x.shape, strict=True))),)),
    (_un(Ops.FLIP), lambda ctx, x, ret: (UOp(Ops.FLIP, ctx.dtype, (ctx,), ret.arg),)),
    # a view at runtime starts (eager `x[i]`): put back at the same starts, which take no gradient
    (UPat(Ops.DYNAMIC_SHRINK, name="ret"), lambda ctx, ret: (UOp(Ops.DYNAMIC_PAD, ctx.dtype, (ctx, *ret.src[1:]), (
        ret.arg[0], ret.src[0].shape)), *(None,) * (len(ret.src) - 1))),
    (UPat(Ops.DYNAMIC_PAD, name="ret"), lambda ctx, ret: (UOp(Ops.DYNAMIC_SHRINK, ctx.dtype, (ctx, *ret.src[1:]), (
        ret.arg[0], ret.src[0].shape)), *(None,) * (len(ret.src) - 1))),
    # reduces (REDUCE_AXIS keeps the reduced axes with size 1, so the gradient expands straight back)
    (_reduces(Ops.ADD), lambda ctx, x, ret: (_expand(ctx, x.shape),)),
    (_reduces(Ops.MAX), _reduce_max_grad),
    (_reduces(Ops.MUL), _reduce_mul_grad),
    # memory
    (_un(Ops.CONTIGUOUS), lambda ctx, x, ret: (None if ret.tag == STOP else ctx,)),
    (UPat(Ops.COPY, src=(_x,)), _copy_grad),
    # calls: a TUPLE's gradient is a tuple with one entry per element; GETTUPLEs gather theirs onto the call
    (UPat(Ops.TUPLE), lambda ctx: ctx),
    (UPat(Ops.GETTUPLE, src=(UPat.var("fn"),), name="ret"),
     lambda ctx, fn, ret: (tuple(ctx if i == ret.arg else None for i in range(n_results(fn))),)),
    (UPat((Ops.FUNCTION, Ops.CALL), name="ret"), _call_grad),
    (UPat(Ops.LOOP, name="ret"), lambda ctx, ret: loop_grad(ctx, ret)),
    (UPat(Ops.SWITCH, name="ret"), lambda ctx, ret: switch_grad(ctx, ret)),
    (UPat(NO_GRADIENT, name="ret"), lambda ret: (None,) * len(ret.src)),
])


# ---- before the walk: bit tricks the front end uses, rewritten into ops that have derivatives ----
def _const_arg(u: UOp) -> Any:
    while u.op in (Ops.RESHAPE, Ops.EXPAND):
        u = u.src[0]
    return u.arg if u.op is Ops.CONST else None


def _sign_bit(d: DType) -> int:
    return 1 << (d.itemsize * 8 - 1)


def undo_abs(ret: UOp, x: UOp, m: UOp) -> UOp | None:
    """abs(x) as the front end writes it, bits(x) & ~signbit, is select(x < 0, -x, x) to the walk (JAX's rule)."""
    if x.dtype != ret.dtype or _const_arg(m) != _sign_bit(x.dtype) - 1:
        return None
    return (x < _full(x, 0)).where(-x, x)


def undo_copysign(ret: UOp, a: UOp, m1: UOp, sb: UOp) -> UOp | None:
    """copysign(a, b) = bits(a) & ~signbit | bits(b) & signbit is select(signbit(b), -|a|, |a|) to the walk (the
    sign bits `sb` take no gradient). They may be broadcast: `copysign(x, -1.0)` ands a scalar's bits, then expands."""
    sign = sb
    while sign.op in (Ops.RESHAPE, Ops.EXPAND):
        sign = sign.src[0]
    if a.dtype != ret.dtype or _const_arg(m1) != _sign_bit(a.dtype) - 1 or sign.op is not Ops.AND or \
            _sign_bit(a.dtype) not in (_const_arg(sign.src[0]), _const_arg(sign.src[1])):
        return None
    abs_a = (a < _full(a, 0)).where(-a, a)
    return sb.alu(Ops.CMPNE, _full(sb, 0)).where(-abs_a, abs_a)


def _bits(name: str) -> UPat:
    return UPat(Ops.BITCAST, src=(UPat.var(name),))


pm_differentiable = PatternMatcher([
    (UPat(Ops.BITCAST, src=(UPat(Ops.AND, src=[_bits("x"), UPat.var("m")]),), name="ret"), undo_abs),
    (UPat(Ops.BITCAST, src=(UPat(Ops.OR, src=[UPat(Ops.AND, src=[_bits("a"), UPat.var("m1")]), UPat.var("sb")]),),
          name="ret"), undo_copysign),
])


# ---- the walk ----
def _accumulate(a: Grad, b: Grad) -> Grad:
    if isinstance(a, tuple):
        return tuple(_accumulate(p, q) for p, q in zip(a, b, strict=True))
    return b if a is None else a if b is None else a + b


def _between(order: list[UOp], targets: set[UOp]) -> list[UOp]:
    """The nodes of a graph (`order`: its toposort) on some path from its root down to a target, sources before
    users; a path through a `stop_gradient` is none (a loop above one is not asked for a reverse mode it may lack)."""
    reach: set[UOp] = set()
    out = []
    for u in order:
        if u in targets or any(s in reach for s in u.src) and not (u.op is Ops.CONTIGUOUS and u.tag == STOP):
            reach.add(u)
            out.append(u)
    return out


def _differentiable(root: UOp, path: list[UOp], targets: set[UOp]) -> UOp:
    """`root` with `pm_differentiable` applied to the nodes on the path to the targets, sources first. Only there:
    the rest of the graph (what a stop_gradient cuts off, a value the gradient only reads) stays the very nodes the
    function's value is made of, so that it is computed once (a Sinkhorn loop's `abs` below a stop_gradient, rewritten,
    made the value's loop and the gradient's two loops, each run in full). The targets are leaves: what a target is
    made of (an argument computed with abs: grad(f)(|v|)) is not the function's graph, and a target rewritten would
    be a new node that no path reaches; so are other differentiations' input placeholders (`tg.jvp(f, (abs(a),),
    ...)`: its primal's), nodes its trace binds."""
    new: dict[UOp, UOp] = {}
    for u in path:
        if u in targets or is_grad_input(u):
            continue
        v = u.replace(src=tuple(new.get(s, s) for s in u.src)) if any(s in new for s in u.src) else u
        v = pm_differentiable.rewrite(v) or v
        if v is not u:
            new[u] = v
    return new.get(root, root)


def compute_gradient(root: UOp, root_grad: Grad, targets: Sequence[UOp]) -> dict[UOp, UOp]:
    """The gradient of each target, given the gradient `root_grad` arriving at `root` (for a TUPLE root, a tuple).

    Only nodes on a path from root to a target are visited, in reverse topological order; a node reached by several
    paths gets the sum. A target with no path (or only paths through integers or `stop_gradient`) is absent: its
    gradient is the symbolic zero.

    >>> x = UOp(Ops.BUFFER, dtypes.float32, (), (1, "CPU:0", 3))
    >>> g = compute_gradient(x * x, _full(x, 1.0), [x])[x]   # 1*x + 1*x
    """
    order = root.toposort()
    path = _between(order, set(targets))
    if not pm_differentiable.ops.isdisjoint(u.op for u in path):   # (one walk where no rule applies, the usual)
        root = _differentiable(root, path, set(targets))
        path = _between(root.toposort(), set(targets))
    on_path = set(path)
    grads: dict[UOp, Grad] = {root: root_grad}
    apart = _widened_views(path)
    uses: dict[UOp, list[UOp]] = {}   # a widened half's (or its view's) cotangents, one per use, kept apart
    with gradient_path(on_path):   # (once, not per node: a context switch per node cost eager steps their grads)
        for node in reversed(path):
            for g in (uses.get(node, []) if node in apart else [grads.get(node)]):
                if g is None:
                    continue
                src_grads = pm_gradient.rewrite(node, ctx=g)
                if src_grads is None:
                    raise NotImplementedError(f"no gradient rule for {node.op.name} (dtype {node.dtype!r}, arg "
                                              f"{node.arg!r})")
                for s, sg in zip(node.src, src_grads, strict=True):
                    if sg is None or s not in on_path or (s.dtype is not None and not s.dtype.is_inexact):
                        continue
                    if s in apart:
                        uses.setdefault(s, []).append(sg)
                    else:
                        grads[s] = _accumulate(grads.get(s), sg)
    return {t: g for t in targets if (g := grads.get(t)) is not None}


def _widened_views(path: list[UOp]) -> set[UOp]:
    """The casts of half floats that a dot or a sum computes in (`Tensor.widened`) and the views of them on the path:
    each use's cotangent goes through them on its own and is rounded to the half type, then the uses' are summed in
    it, as JAX's transposes of two half dots of one operand are two half dots added."""
    out: set[UOp] = set()
    for u in path:   # (sources first)
        if (u.op is Ops.CAST and u.tag == WIDENED and u.src[0].dtype.itemsize < u.dtype.itemsize or
                u.op in GroupOp.Movement and u.src and u.src[0] in out):
            out.add(u)
    return out


# ---- tracing a function for differentiation ----
STOP = "stop_gradient"
_uid = itertools.count()


def _placeholder(u: UOp) -> UOp:
    return UOp(Ops.CONTIGUOUS, u.dtype, (u,), tag=("grad_input", next(_uid)))


def linear_input(like: UOp, kind: str) -> UOp:
    """A stand-in leaf for a cotangent or tangent: results are built linear in it, then it is bound to a value."""
    return UOp(Ops.PARAM, like.dtype, (), (-1, like.shape, like.device), tag=(kind, next(_uid)))


def stop_gradient(x: Any) -> Any:
    """The value of `x` (any pytree), through which no gradient flows, at any order (`jax.lax.stop_gradient`).

    >>> tg.grad(lambda x: (x * tg.stop_gradient(x)).sum())(tg.asarray([1.0, 2.0]))   # [1., 2.], not [2., 4.]
    """
    def one(t: Any) -> Any:
        if not isinstance(t, Tensor) or not current().differentiating or not t.dtype.is_inexact:
            return t  # outside a differentiation there is nothing to stop
        stopped = Tensor(UOp(Ops.CONTIGUOUS, t.dtype, (t.uop,), tag=STOP))
        return weak(stopped) if is_weak(t) else stopped   # a value of the same type, as JAX's
    return tree_map(one, x)


def pullback_graph(outs: Sequence[UOp], params: Sequence[UOp],
                   forward: bool = False) -> tuple[list[UOp | None], list[UOp | None]]:
    """A cotangent stand-in per float output of `outs` (None for the others), and the gradient of each of `params`
    (None: zero), linear in them; `forward`: a pullback for forward mode to transpose (`control_grad.forward_mode`)."""
    cots = [linear_input(o, "cotangent") if o.dtype.is_inexact else None for o in outs]
    pairs = [(o, c) for o, c in zip(outs, cots, strict=True) if c is not None]
    with forward_mode(forward):
        g = compute_gradient(UOp(Ops.TUPLE, None, tuple(o for o, _ in pairs)), tuple(c for _, c in pairs),
                             params) if pairs else {}
    return cots, [g.get(p) for p in params]


@dataclass
class Traced:
    """A function run on placeholders: the graph that differentiation works on."""
    who: str                     # the transform, for messages
    argnums: tuple[int, ...]     # the positional arguments differentiated
    inputs: list[UOp]            # each differentiated leaf's own UOp ...
    params: list[UOp]            # ... and the placeholder the function saw instead
    in_trees: list[PyTreeDef]    # the structure of each differentiated argument
    outs: list[UOp]              # the function's output leaves, over the placeholders
    out_tree: PyTreeDef
    aux: Any = None
    weak_inputs: tuple[bool, ...] = ()   # which inputs were weakly typed (Python scalars): their stand-ins were too
    weak_outs: tuple[bool, ...] = ()     # which outputs the function computed weakly typed: the values returned are
    _pullback: tuple[list[UOp | None], list[UOp | None]] | None = field(default=None, repr=False)

    def pullback(self, forward: bool = False) -> tuple[list[UOp | None], list[UOp | None]]:
        """A cotangent stand-in per float output (None for the others), and each input's gradient, linear in them;
        `forward`: for forward mode to transpose (one Traced serves one transform, so one mode)."""
        if self._pullback is None:
            self._pullback = pullback_graph(self.outs, self.params, forward)
        return self._pullback

    def per_arg(self, leaves: Sequence[Any]) -> Any:
        """Leaves in input order, back in the structure of each differentiated argument: one tree per argnum."""
        out, k = [], 0
        for tree in self.in_trees:
            out.append(tree_unflatten(tree, leaves[k:k + tree.num_leaves]))
            k += tree.num_leaves
        return out


def _argnums_tuple(who: str, argnums: Any) -> tuple[int, ...]:
    def is_int(a: Any) -> bool:
        return isinstance(a, (int, np.integer)) and not isinstance(a, bool)
    if is_int(argnums):
        return (int(argnums),)
    if isinstance(argnums, (tuple, list)) and all(is_int(a) for a in argnums):
        if len(set(argnums)) != len(argnums):
            raise ValueError(f"{who}: argnums {tuple(argnums)} names an argument twice")
        return tuple(int(a) for a in argnums)
    raise TypeError(f"{who}: argnums must be an int or a tuple of ints, got {argnums!r}")


def _as_tensor(x: Any) -> Tensor | None:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float, complex, np.ndarray, np.generic)):
        t = Tensor(x)
        return t if t.shape == np.shape(x) else t.reshape(np.shape(x))  # Tensor(0-d) comes back 1-d (reported)
    return None


def trace(who: str, fun: Callable, args: tuple, kwargs: dict, argnums: Any, has_aux: bool,
          allow_int: bool = False, holomorphic: bool = False) -> Traced:
    """Run `fun(*args, **kwargs)` with the leaves of `args[argnums]` replaced by placeholders."""
    nums = _argnums_tuple(who, argnums)
    for a in nums:
        if not -len(args) <= a < len(args):
            raise TypeError(f"{who}: differentiating with respect to argnums={argnums} requires at least "
                            f"{a + 1 if a >= 0 else -a} positional arguments to be passed by the caller, but got only "
                            f"{len(args)} positional arguments")
    nums = tuple(a % len(args) for a in nums)
    new_args, inputs, params, in_trees, weak_inputs = list(args), [], [], [], []
    # (the placeholders are made inside the differentiation too: one over a graph LAZY_DEPTH deep would be computed
    # at once, its Tensor holding the value instead of the placeholder, and the gradient with respect to it was zero)
    with differentiating(who):
        for i in nums:
            pairs, tree = tree_flatten_with_path(args[i])
            leaves = []
            for path, leaf in pairs:
                t = _as_tensor(leaf)
                where = f"argument {i}{keystr(path)}"
                if t is None:
                    raise TypeError(f"{who}: {where} is a {type(leaf).__name__}, not an array; only arrays (Tensors, "
                                    f"numpy arrays, Python scalars) can be differentiated, pass others outside argnums")
                if not t.dtype.is_inexact and not allow_int:
                    raise TypeError(f"{who} requires float or complex inputs, but {where} has dtype {t.dtype.name}; "
                                    f"cast it to a float dtype to differentiate it, or leave it out of argnums")
                if holomorphic and not t.dtype.is_complex:
                    raise TypeError(f"{who} with holomorphic=True requires complex inputs, but {where} has dtype "
                                    f"{t.dtype.name}")
                inputs.append(t.uop)
                params.append(_placeholder(t.uop))
                weak_inputs.append(weak_input(leaf))   # a Python float stays weakly typed inside, as in JAX
                leaves.append(weak(Tensor(params[-1])) if weak_inputs[-1] else Tensor(params[-1]))
            in_trees.append(tree)
            new_args[i] = tree_unflatten(tree, leaves)
        out = fun(*new_args, **kwargs)
    aux = None
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"{who} with has_aux=True expects the function to return a pair (output, aux), but it "
                            f"returned {type(out).__name__} {_short(out)}")
        out, aux = out
    out_pairs, out_tree = tree_flatten_with_path(out)
    outs, weak_outs = [], []
    for path, leaf in out_pairs:
        t = _as_tensor(leaf)
        if t is None:
            raise TypeError(f"{who}: the function's output{keystr(path)} is a {type(leaf).__name__}, not an array")
        outs.append(t.uop)
        weak_outs.append(weak_input(leaf))
    return Traced(who, nums, inputs, params, in_trees, outs, out_tree, aux, tuple(weak_inputs), tuple(weak_outs))


def reads_any(u: UOp | None, leaves: set[UOp]) -> bool:
    """Whether the graph of `u` reads any of `leaves` (stand-ins)."""
    return u is not None and bool(leaves) and any(x in leaves for x in u.toposort())


def cotangents_weak(tr: Traced, cots: Sequence[UOp | None], grads: Sequence[UOp | None],
                    given_weak: Sequence[bool]) -> list[bool]:
    """Which inputs' cotangents JAX types weakly, given which output cotangents were (`given_weak`).

    JAX types a cotangent as any value: weakly only where all its operands are, except that the transpose of a
    conversion gives back the converted value's own type (`convert_element_type`'s transpose rule), and every
    promotion of a weak input to a strong type is one. So an input's cotangent is weak when the input is, unless a
    strongly typed cotangent reaches it through a weakly typed output, where no conversion restores it:
    `vjp(lambda x: x * x, 2.0)[1](f32(1.0))` is a float32, with `1.0` a weak float32, as `grad`'s is (its
    cotangent, a one of the output's type, is weak where the output is)."""
    strong = {c for c, o, w in zip(cots, tr.weak_outs, given_weak, strict=True) if c is not None and o and not w}
    return [w and not reads_any(g, strong) for w, g in zip(tr.weak_inputs, grads, strict=True)]


def _short(x: Any) -> str:
    r = repr(x) if not isinstance(x, Tensor) else f"Tensor(shape={x.shape}, dtype={x.dtype.name})"
    return r if len(r) < 80 else r[:77] + "..."


@dataclass
class _Leave:
    bind: dict[Any, UOp]  # a placeholder's tag -> the input's UOp, a stand-in's tag -> its value
    strip_stops: bool     # the outermost differentiation is ending: stop_gradient marks have done their job


def _leave_rule(ctx: _Leave, x: UOp) -> UOp | None:
    # by tag, not by node: sources are rewritten first, so a placeholder over an input that this pass changes is a
    # new node here, with the tag that makes it this placeholder (a custom rule's pullback, as checkpoint's, leaves
    # while an outer grad walks its graph and strips the stop_gradient marks; the second layer's input, the first's
    # output, holds its softmax's: that placeholder stayed in the gradient, an escaped tracer under jit)
    if (v := ctx.bind.get(x.tag)) is not None:
        return v
    return x.src[0] if ctx.strip_stops and x.tag == STOP else None


pm_leave_trace = PatternMatcher([(UPat((Ops.CONTIGUOUS, Ops.PARAM), name="x"), _leave_rule)])


def leave_trace(tr: Traced, uops: Sequence[UOp], bind: dict[UOp, UOp] | None = None) -> list[UOp]:
    """Results leaving a differentiation: placeholders become the inputs again, stand-ins their values."""
    if not uops:
        return []
    bind = {**dict(zip(tr.params, tr.inputs, strict=True)), **(bind or {})}
    assert all(u.tag is not None for u in bind), "only tagged placeholders and stand-ins are bound"
    by_tag = {u.tag: v for u, v in bind.items()}
    # (and the batches of the stand-ins a collective inside vmap or shard_map batched: the values' batches)
    by_tag.update({u.tag: v for u, v in bind_batched(by_tag).items()})
    ctx = _Leave(by_tag, strip_stops=not current().differentiating)
    return list(graph_rewrite(UOp(Ops.TUPLE, None, tuple(uops)), pm_leave_trace, ctx=ctx, name="leave trace").src)


def zeros_like(u: UOp) -> UOp:
    return Tensor.full(u.shape, 0, u.dtype, device=u.device if isinstance(u.device, str) else None).uop


def leave_with_aux(tr: Traced, uops: Sequence[UOp], bind: dict[UOp, UOp] | None = None) -> tuple[list[Tensor], Any]:
    """`leave_trace` for results and the aux output together; results come back as Tensors."""
    aux_leaves, aux_tree = tree_flatten(tr.aux)
    idx = [i for i, a in enumerate(aux_leaves) if isinstance(a, Tensor)]
    out = [Tensor(u) for u in leave_trace(tr, [*uops, *(aux_leaves[i].uop for i in idx)], bind)]
    for k, i in enumerate(idx):
        aux_leaves[i] = out[len(uops) + k]
    return out[:len(uops)], tree_unflatten(aux_tree, aux_leaves)


def check_like(who: str, what: str, x: Any, like: UOp) -> UOp:
    """A user-given cotangent or tangent as a UOp of `like`'s shape and dtype (Python scalars take its dtype)."""
    if isinstance(x, (bool, int, float)):
        return Tensor.full(like.shape, x, like.dtype).uop
    t = _as_tensor(x)
    if t is None or t.shape != like.shape:
        got = f"shape {t.shape}" if t is not None else f"a {type(x).__name__}"
        raise ValueError(f"{who}: {what} should have shape {like.shape} (dtype {like.dtype.name}), got {got}")
    if like.dtype.is_inexact and t.dtype != like.dtype:
        raise TypeError(f"{who}: {what} should have dtype {like.dtype.name} (shape {like.shape}), got {t.dtype.name}")
    if type(like.device) is tuple and t.uop.device != like.device and not is_committed(t):
        t = move(t, like.device)   # (an uncommitted cotangent, made on the default device, where the output is)
    return t.uop


# ---- the public API ----
class Transformed:
    """A transformed function: call it like the original. Used on a method, `self` is bound first, so `argnums`
    counts the arguments after it, as if you had written `grad(obj.method)`."""

    def __init__(self, fun: Callable, call: Callable[[Callable, tuple, dict], Any]) -> None:
        if not callable(fun):
            raise TypeError(f"expected a function to transform, got {type(fun).__name__} {fun!r}")
        functools.update_wrapper(self, fun)
        self._fun, self._call = fun, call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # a transform of a jitted function, called eagerly, is the jitted transform (`jit(grad(f))` for
        # `grad(jit(f))`): JAX caches the trace of `f` and its transformed form, so such a call costs a dispatch
        # there; traced again on every call, it cost 1-2 ms here
        if (under := getattr(self._fun, "transformed", None)) is not None and not active() \
                and (jitted := under(self._call)) is not None:
            return jitted(*args, **kwargs)
        return self._call(self._fun, args, kwargs)

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        bind = getattr(self._fun, "__get__", None)
        return self if obj is None or bind is None else Transformed(bind(obj, objtype), self._call)

    def __repr__(self) -> str:
        return f"<transformed {getattr(self._fun, '__qualname__', self._fun)!r}>"


def _value_and_grad_call(fun: Callable, args: tuple, kwargs: dict, *, argnums: Any, has_aux: bool, who: str,
                         with_value: bool, holomorphic: bool = False) -> Any:
    tr = trace(who, fun, args, kwargs, argnums, has_aux, holomorphic=holomorphic)
    if not tr.out_tree.is_leaf:
        raise TypeError(f"Gradient only defined for scalar-output functions. Output was a {tr.out_tree!r}"
                        + ("" if has_aux else "; to return extra values alongside the loss, use has_aux=True"))
    out = tr.outs[0]
    if out.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: {out.shape}. "
                        f"Use vjp, jacrev or jacfwd for non-scalar outputs, or reduce it (e.g. .sum())")
    if out.dtype.is_complex and not holomorphic:
        raise TypeError(f"{who} requires real-valued outputs (output dtype that is a sub-dtype of np.floating), but "
                        f"got {out.dtype.name}. For holomorphic differentiation, pass holomorphic=True. For "
                        f"differentiation of non-holomorphic functions involving complex outputs, use tg.vjp directly.")
    if holomorphic and not out.dtype.is_complex:
        raise TypeError(f"{who} with holomorphic=True requires a complex output, got {out.dtype.name}")
    if not out.dtype.is_inexact:
        raise TypeError(f"{who} requires real-valued (float) outputs, but the output has dtype {out.dtype.name}")
    with forward_mode(False):
        g = compute_gradient(out, UOp.const(out.dtype, 1.0), tr.params)
    grads = [g.get(p, None) for p in tr.params]
    grads = [zeros_like(p) if d is None else d for p, d in zip(tr.params, grads, strict=True)]
    (value, *flat), aux = leave_with_aux(tr, [out, *grads])
    (value,) = weak_like([value], tr.weak_outs)
    flat = sum_invariant_gradients(tr.inputs, flat)   # inside a shard_map: a replicated input's, over its devices
    # a weakly typed input's gradient is too, as JAX's (it takes the input's type: `grad(lambda x: x * x)(2.0)` is a
    # weak float32), a strongly typed one's is not; new Tensors, since a gradient may be a value someone else holds
    flat = [weak(Tensor(t.uop)) if w else t for t, w in zip(flat, tr.weak_inputs, strict=True)]
    per_arg = tr.per_arg(flat)
    result = per_arg[0] if isinstance(argnums, (int, np.integer)) else tuple(per_arg)
    value = (value, aux) if has_aux else value
    if with_value:
        return value, result
    return (result, aux) if has_aux else result


def grad(fun: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Any:
    """The gradient of a scalar function, as `jax.grad`: `grad(f)(x)` is df/dx, with x's structure and dtypes.

    `argnums` picks the positional argument(s) to differentiate; each may be a pytree of float arrays (Tensors,
    numpy arrays, Python floats). With a tuple, the result is a tuple of gradients. With `has_aux=True`, `f` returns
    `(loss, aux)` and the result is `(gradient, aux)`. Usable bare (`@grad`), with options (`@grad(argnums=1)`), and
    on methods (arguments count after `self`). Results are lazy Tensors, like every other result; read them together
    (`tg.realize(*leaves)`) so shared forward work is done once.

    >>> import tgfx as tg, tgfx.numpy as tnp
    >>> tg.grad(lambda x: (x ** 2).sum())(tg.asarray([1.0, 2.0])).tolist()
    [2.0, 4.0]
    >>> loss = lambda p, x: tnp.tanh(x @ p["w"] + p["b"]).sum()
    >>> g = tg.grad(loss)({"w": tnp.ones((3, 2)), "b": tnp.zeros(2)}, tnp.ones((4, 3)))   # {"b": ..., "w": ...}
    >>> tg.grad(tg.grad(tnp.sin))(1.0)   # -sin(1)

    Complex inputs follow JAX's convention: for a real f of z = x + iy the gradient is df/dx - i df/dy (the
    conjugate of the slope numpy's finite differences give); a complex output raises unless `holomorphic=True`
    (then the inputs must be complex too and the result is f'(z)).

    >>> tg.grad(lambda z: (z * z.conj()).real)(tg.asarray(1 + 2j))   # 2 conj(z) = 2 - 4j

    Raises TypeError for a non-scalar or integer output, integer inputs, argnums out of range, or has_aux=True
    without a pair.
    """
    if fun is None:
        return functools.partial(grad, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic)
    _argnums_tuple("grad", argnums)
    return Transformed(fun, functools.partial(_value_and_grad_call, argnums=argnums, has_aux=has_aux, who="grad",
                                              with_value=False, holomorphic=holomorphic))


def value_and_grad(fun: Callable | None = None, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False) -> Any:
    """`(f(x), grad(f)(x))` from one trace, as `jax.value_and_grad`; with has_aux, `((value, aux), gradient)`.

    >>> value, g = tg.value_and_grad(lambda x: (x * x).sum())(tg.asarray([3.0]))   # 9.0, [6.0]
    >>> tg.realize(value, g)   # one schedule: the backward reuses what the forward computes
    """
    if fun is None:
        return functools.partial(value_and_grad, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic)
    _argnums_tuple("value_and_grad", argnums)
    return Transformed(fun, functools.partial(_value_and_grad_call, argnums=argnums, has_aux=has_aux,
                                              who="value_and_grad", with_value=True, holomorphic=holomorphic))


def vjp(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """`(f(*primals), vjp_fn)`, as `jax.vjp`: `vjp_fn(cotangent)` is the tuple of cotangent @ df/dprimal_i, one
    per primal, in each primal's structure. The cotangent has the output's structure, shapes and dtypes. With
    has_aux, `(out, vjp_fn, aux)`. Integer primals get integer zeros (JAX's float0).

    >>> y, pullback = tg.vjp(tnp.sin, tg.asarray([0.0, 1.0]))
    >>> pullback(tnp.ones(2))   # (cos([0, 1]),)
    """
    tr = trace("vjp", fun, primals, {}, tuple(range(len(primals))), has_aux, allow_int=True)
    outs, aux = leave_with_aux(tr, tr.outs)
    out = tree_unflatten(tr.out_tree, weak_like(outs, tr.weak_outs))

    def vjp_fn(cotangent: Any) -> tuple:
        leaves, tree = tree_flatten(cotangent)
        if tree != tr.out_tree:
            raise ValueError(f"vjp_fn: the cotangent has structure {tree!r}, but the function's output has structure "
                             f"{tr.out_tree!r}; pass one cotangent per output leaf")
        # (a custom rule's backward building a pullback for forward mode to transpose, as checkpoint's: a loop there
        # is the placeholder of its transposed JVP, which a while loop with no bound on its steps has too)
        cots, grads = tr.pullback(forward=in_forward_mode())
        bind = {c: check_like("vjp_fn", f"cotangent leaf {i}", ct, o)
                for i, (c, ct, o) in enumerate(zip(cots, leaves, tr.outs, strict=True)) if c is not None}
        flat = [zeros_like(p) if d is None else d for p, d in zip(tr.params, grads, strict=True)]
        weak_cts = cotangents_weak(tr, cots, grads, [is_weak(ct) for ct in leaves])
        # (inside a shard_map: a replicated input's cotangent summed over its devices, as value_and_grad's)
        flat = sum_invariant_gradients(tr.inputs, [Tensor(u) for u in leave_trace(tr, flat, bind)])
        return tuple(tr.per_arg(weak_like(flat, weak_cts)))

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


__all__ = ["pm_gradient", "pm_differentiable", "compute_gradient", "grad", "value_and_grad", "vjp", "stop_gradient",
           "Traced", "trace", "leave_trace", "linear_input", "Transformed"]
