"""vmap through LOOP and SWITCH (the rules `pm_batch` calls), JAX's way (`_scan_batching_rule`,
`_while_loop_batching_rule`, `_cond_batching_rule`).

A batched loop is still one LOOP, never unrolled and never one loop per example: its body is the body batched in the
slots whose operands carry the batch axis (consts, carries, per-step slices), so one step advances every example.
Inside the pass the batch axis is in front; a stacked operand (xs) or result (ys, saved carries) has the step axis in
front on the device, so it is passed with its batch axis second and its results get theirs moved back to the front.

Which carries are batched is a fixed point: a carry unbatched at entry that the body makes batched (it adds a
batched const, say) is broadcast at entry, and the body batched again, until no carry changes.

A loop whose examples may stop at different steps (a while loop whose predicate is batched, or a loop whose
dynamic trip count is) runs until the last example stops. An example is *active* at a step while its predicate
holds (and it held at every step before: its own step count equals the loop index) and the index is below its
trip count; every carry is then batched and updated by a select, `where(active, new, old)`, so a finished example
keeps its carry, as in JAX. Its ys at the steps it did not take are zeros, as the unbatched loop leaves them. The
loop's cond is `any(active)`, its trip count the largest; each example's step count, a result of the unbatched
loop, is an extra int64 carry counting its active steps (or, for a dynamic trip count, that example's count).
A loop with `save` keeps the carry of every step for the backward: at the steps an example did not take it holds
that example's final carry, not zeros; the backward reads only the steps each example took.

A SWITCH (`cond`, `switch`) whose index is unbatched stays one SWITCH: every branch is batched in the slots of its
batched operands, and a result some branch batches is broadcast in the branches that do not, so all branches return
the same types. A batched index picks a different branch per example, so it becomes a select: every branch runs,
inlined, on the batched operands, and each result is a chain of `where(index == k, branch k's, ...)` over the index
clamped to [0, n - 1], as in JAX (branches have no effects, so running the ones not taken changes nothing but the
work). A result every branch computes as the same value is that value, not a select.
"""
from __future__ import annotations

import dataclasses

from tgfx.dtypes import dtypes
from tgfx.ir.control import INDEX_DTYPE, LoopSpec, SwitchSpec, loop_results
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.transforms.vmap import BatchCtx, batch_graph, broadcast_front, move_axis


def _param(slot: int, shape: tuple[int, ...], dtype: object, device: str) -> UOp:
    return UOp(Ops.PARAM, dtype, (), (slot, tuple(shape), device))


def _full(shape: tuple[int, ...], value: int, dtype: object) -> UOp:
    c = UOp.const(dtype, value)
    if not shape:
        return c
    return UOp(Ops.EXPAND, c.dtype, (UOp(Ops.RESHAPE, c.dtype, (c,), (1,) * len(shape)),), tuple(shape))


def _along(mask: UOp, shape: tuple[int, ...]) -> UOp:
    """A (B,) mask broadcast over the example axes of a (B, ...) value."""
    if len(shape) == 1:
        return mask
    r = UOp(Ops.RESHAPE, mask.dtype, (mask,), (shape[0], *(1,) * (len(shape) - 1)))
    return UOp(Ops.EXPAND, mask.dtype, (r,), tuple(shape))


def _reduce_front(u: UOp, op: Ops) -> UOp:
    """A (B,) value reduced over the batch to a scalar."""
    r = UOp(Ops.REDUCE_AXIS, u.dtype, (u,), (op, (0,)))
    return UOp(Ops.RESHAPE, u.dtype, (r,), ())


def _get(u: UOp, i: int) -> UOp:
    return UOp(Ops.GETTUPLE, loop_results(u)[i][1], (u,), i)


def batch_loop(ctx: BatchCtx, x: UOp) -> UOp:
    """LOOP: the same loop over the batched body (see the module doc). Records each result's value and whether it is
    batched in `ctx.results` / `ctx.flags`, for the GETTUPLEs reading it."""
    sp: LoopSpec = x.arg
    size, dev = ctx.size, sp.device
    consts, init, xs, trip = sp.operands(x)
    nc, k, nx = sp.n_consts, sp.n_carry, sp.n_xs
    body, cond = x.src[0], x.src[1] if sp.cond else None
    n_ys = len(body.src) - k
    index = _param(0, (), INDEX_DTYPE, dev)
    # the body's PARAMs by role, and which operands carry the batch axis
    old = [*(_param(1 + i, c.shape, c.dtype, dev) for i, c in enumerate(consts)),
           *(_param(1 + nc + j, c.shape, c.dtype, dev) for j, c in enumerate(init)),
           *(_param(1 + nc + k + m, a.shape[1:], a.dtype, dev) for m, a in enumerate(xs))]
    b_const = [c in ctx.batched for c in consts]
    b_xs = [a in ctx.batched for a in xs]
    b_trip = trip is not None and trip in ctx.batched
    b_carry = [c in ctx.batched for c in init]

    def batch_bodies(b_carry: list[bool], slots: list[int]) -> tuple[list[UOp], list[UOp], list[bool], UOp | None,
                                                                      bool]:
        """The body's PARAMs at `slots` (batched where their operands are), the batched body results, which of them
        are batched, and the same of the predicate."""
        seeds, renamed, params = {}, {}, []
        for p, b, s in zip(old, b_const + b_carry + b_xs, slots, strict=True):
            q = _param(s, (size, *p.arg[1]) if b else p.arg[1], p.dtype, dev)
            if b:
                seeds[p] = q
            elif q is not p:
                renamed[p] = q
            params.append(q)
        res, res_b = batch_graph(body.src, seeds, size, renamed=renamed)
        if cond is None:
            return params, res, res_b, None, False
        (pred,), (pred_b,) = batch_graph(cond.src, seeds, size, renamed=renamed)
        return params, res, res_b, pred, pred_b

    # fixed point over which carries are batched (each round can only add some, so at most k + 1 rounds)
    slots = [p.arg[0] for p in old]
    while True:
        params, res, res_b, pred, pred_b = batch_bodies(b_carry, slots)
        per_example = pred_b or b_trip
        new_b = [b or f or per_example for b, f in zip(b_carry, res_b[:k], strict=True)]
        if new_b == b_carry:
            break
        b_carry = new_b
    # a per-example stop needs new slots: after the consts each example's trip count, after the carries its step
    # count (the slices come last)
    nc2, k2 = nc + b_trip, k + pred_b
    if per_example:
        slots = [*range(1, 1 + nc), *range(1 + nc2, 1 + nc2 + k), *range(1 + nc2 + k2, 1 + nc2 + k2 + nx)]
        params, res, res_b, pred, _ = batch_bodies(b_carry, slots)
    new_carry = params[nc:nc + k]
    carries = [r if f or not b else broadcast_front(r, size) for r, f, b in
               zip(res[:k], res_b[:k], b_carry, strict=True)]
    ys, ys_b = res[k:], res_b[k:]
    extra_consts, extra_init = [], []
    if per_example:
        step = broadcast_front(index, size)
        active = None
        if pred_b:   # the predicate holds, and held at every earlier step: the example's step count is the index
            assert not sp.reverse, "no front end builds a reversed while loop"
            count = _param(1 + nc2 + k, (size,), INDEX_DTYPE, dev)
            active = pred & count.eq(step)
        if b_trip:   # below the example's trip count (a loop counting down reaches it last)
            trips = _param(1 + nc, (size,), INDEX_DTYPE, dev)
            below = step < trips
            active = below if active is None else active & below
            extra_consts.append(ctx.new[trip])
        carries = [_along(active, c.shape).where(c, p) for c, p in zip(carries, new_carry, strict=True)]
        ys = [y if f else broadcast_front(y, size) for y, f in zip(ys, ys_b, strict=True)]
        ys = [_along(active, y.shape).where(y, _full(y.shape, 0, y.dtype)) for y in ys]
        ys_b = [True] * n_ys
        if pred_b:
            carries.append(count + active.cast(INDEX_DTYPE))
            extra_init.append(UOp(Ops.COPY, INDEX_DTYPE, (_full((size,), 0, INDEX_DTYPE),), dev))
            pred = _reduce_front(active, Ops.MAX)

    # operands: batched xs with their step axis in front (the loop slices it), the batch axis second
    op_consts = [ctx.new.get(c, c) for c in consts] + extra_consts
    op_init = [ctx.value(c) if b else ctx.new.get(c, c) for c, b in zip(init, b_carry, strict=True)] + extra_init
    op_xs = [move_axis(ctx.new[a], 0, 1) if b else ctx.new.get(a, a) for a, b in zip(xs, b_xs, strict=True)]
    op_trip = [] if trip is None else [_reduce_front(ctx.new[trip], Ops.MAX) if b_trip else ctx.new.get(trip, trip)]
    bodies = [UOp(Ops.TUPLE, None, (*carries, *ys))] + ([UOp(Ops.TUPLE, None, (pred,))] if cond is not None else [])
    spec = dataclasses.replace(sp, n_consts=nc2, n_carry=k2)
    loop = UOp(Ops.LOOP, None, (*bodies, *op_consts, *op_init, *op_xs, *op_trip), spec)

    # the value of each result of the original loop: stacked ones get their batch axis back in front
    def stacked(i: int, batched: bool) -> UOp:
        return move_axis(_get(loop, i), 1, 0) if batched else _get(loop, i)
    values = [_get(loop, j) for j in range(k)] + [stacked(k2 + j, b) for j, b in enumerate(ys_b)]
    flags = [*b_carry, *ys_b]
    if sp.save:
        values += [stacked(k2 + n_ys + j, b) for j, b in enumerate(b_carry)]
        flags += b_carry
    if sp.counted:
        if b_trip:       # a dynamic loop's step count is its trip count
            values.append(ctx.new[trip])
        elif pred_b and not sp.dynamic:
            values.append(_get(loop, k))
        else:
            values.append(_get(loop, len(loop_results(loop)) - 1))
        flags.append(b_trip or (pred_b and not sp.dynamic))
    ctx.results[x] = tuple(values)
    ctx.flags[x] = tuple(flags)
    return loop


def batch_switch(ctx: BatchCtx, x: UOp) -> UOp:
    """SWITCH: with an unbatched index, one SWITCH over the batched branches; with a batched one, a select over
    every branch's results (see the module doc). Records which results are batched in `ctx.flags`, and for a select
    their values in `ctx.results`, for the GETTUPLEs reading it."""
    sp: SwitchSpec = x.arg
    n, size, dev = sp.n_branches, ctx.size, sp.device
    branches, index, operands = x.src[:n], x.src[n], x.src[n + 1:]
    params = [_param(m, o.shape, o.dtype, dev) for m, o in enumerate(operands)]
    batched = [o in ctx.batched for o in operands]
    if index not in ctx.batched:
        seeds = {p: _param(m, (size, *p.shape), p.dtype, dev)
                 for m, (p, b) in enumerate(zip(params, batched, strict=True)) if b}
        bodies = [batch_graph(b.src, seeds, size) for b in branches]
        out_b = [any(fs) for fs in zip(*(flags for _, flags in bodies), strict=True)]
        new_branches = [UOp(Ops.TUPLE, None, tuple(r if f or not want else broadcast_front(r, size)
                                                   for r, f, want in zip(res, flags, out_b, strict=True)))
                        for res, flags in bodies]
        ctx.flags[x] = tuple(out_b)
        return UOp(Ops.SWITCH, None, (*new_branches, ctx.new.get(index, index), *(ctx.new.get(o, o) for o in operands)),
                   sp)
    # a batched index: each branch inlined, its PARAMs replaced by the (batched or unbatched) operands themselves
    seeds = {p: ctx.new[o] for p, o, b in zip(params, operands, batched, strict=True) if b}
    renamed = {p: ctx.new.get(o, o) for p, o, b in zip(params, operands, batched, strict=True) if not b}
    bodies = [batch_graph(b.src, seeds, size, renamed=renamed) for b in branches]
    lo, hi = _full((size,), 0, dtypes.int32), _full((size,), n - 1, dtypes.int32)
    idx = ctx.new[index]
    idx = (idx < lo).where(lo, (hi < idx).where(hi, idx))
    values, flags = [], []
    for j in range(len(branches[0].src)):
        vals = [res[j] for res, _ in bodies]
        if all(v is vals[0] for v in vals):   # every branch returns this value (an operand passed through, say)
            values.append(vals[0])
            flags.append(bodies[0][1][j])
            continue
        vals = [v if fs[j] else broadcast_front(v, size) for v, (_, fs) in zip(vals, bodies, strict=True)]
        out = vals[-1]
        for k in range(n - 2, -1, -1):
            out = _along(idx.eq(_full((size,), k, dtypes.int32)), out.shape).where(vals[k], out)
        values.append(out)
        flags.append(True)
    ctx.results[x] = tuple(values)
    ctx.flags[x] = tuple(flags)
    return UOp(Ops.TUPLE, None, tuple(values))
