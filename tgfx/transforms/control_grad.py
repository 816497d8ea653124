"""Reverse mode through LOOP and SWITCH (the rules `pm_gradient` calls), JAX's way.

The backward of a loop is a loop running the other way over the body's VJP. Its carries are the cotangents of the
forward carries, plus an accumulator per float const (the loop invariants get a gradient summed over the steps);
it scans over what step i needs: the forward carry at the start of step i, saved by the forward (the same LOOP
with `save`, which returns them stacked), the forward slices xs[i], and the cotangents of ys[i] (and of saved[i],
for higher orders). It returns the cotangents of the initial carries and of the consts as its final carries, and
those of xs stacked as its ys. The body's VJP recomputes the step's forward from the saved carry (nothing else is
kept). A loop whose step count is known only on the device (a while loop with max_steps, a dynamic fori_loop) has a
backward that takes the same number of steps, read from the forward's step count.

The forward with `save` is a second LOOP node next to the one the primal results come from;
`tgfx.lowering.control.merge_saved_loops` makes the primal results read the saving one, so the forward runs once.

The backward of a SWITCH is a SWITCH on the same index over each branch's VJP.
"""
from __future__ import annotations

import dataclasses

from tgfx.ir.control import INDEX_DTYPE, LoopSpec, SwitchSpec, loop_results
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.inline import params_of, substitute_outside_calls
from tgfx.tensor import Tensor


def _zeros(like: UOp, device: str) -> UOp:
    return Tensor.full(like.shape, 0, like.dtype, device=device).uop


def _on(u: UOp, device: str) -> UOp:
    """A cotangent as an operand of a loop or branch on `device` (a constant cotangent has no device yet)."""
    return u if u.device is not None else UOp(Ops.COPY, u.dtype, (u,), device)


def _param(slot: int, shape: tuple[int, ...], dtype: object, device: str) -> UOp:
    return UOp(Ops.PARAM, dtype, (), (slot, tuple(shape), device))


def _get(u: UOp, i: int, dtype: object) -> UOp:
    return UOp(Ops.GETTUPLE, dtype, (u,), i)


def loop_grad(ctx: tuple, ret: UOp) -> tuple:
    """One gradient per source of `ret` (a LOOP), given the cotangent of each of its results (None: zero)."""
    from tgfx.transforms.grad import _full, compute_gradient
    sp: LoopSpec = ret.arg
    if sp.length is None and sp.cond:
        raise TypeError(f"cannot differentiate the while loop of {sp.name!r} in reverse mode: its number of steps is "
                        f"unbounded; give while_loop max_steps=... (the most steps it may take), so the forward can "
                        f"keep every step's carry for the backward")
    if sp.length is None:
        raise TypeError(f"cannot differentiate the loop of {sp.name!r} in reverse mode: its trip count is known only "
                        f"on the device and unbounded (a fori_loop with Tensor bounds); use int bounds, or a "
                        f"while_loop with max_steps=...")
    dev = sp.device
    consts, init, xs, trip = sp.operands(ret)
    body = ret.src[0]
    k, nc, nx = sp.n_carry, sp.n_consts, sp.n_xs
    n_ys = len(body.src) - k
    fwd = ret if sp.save else ret.replace(arg=dataclasses.replace(sp, save=True))
    fwd_types = loop_results(fwd)
    ct_carry, ct_ys = ctx[:k], ctx[k:k + n_ys]
    ct_saved = ctx[k + n_ys:k + n_ys + k] if sp.save else (None,) * k
    saved = [_get(fwd, k + n_ys + j, init[j].dtype) for j in range(k)]
    steps = trip if sp.dynamic else _get(fwd, len(fwd_types) - 1, INDEX_DTYPE) if sp.cond else None

    fc = [j for j in range(k) if init[j].dtype.is_inexact]
    fconst = [i for i in range(nc) if consts[i].dtype.is_inexact]
    fx = [m for m in range(nx) if xs[m].dtype.is_inexact]
    cy = [j for j in range(n_ys) if ct_ys[j] is not None]
    cs = [j for j in fc if ct_saved[j] is not None]

    # the backward body's slots: index, consts, then carries (ct of carries, accumulators), then slices
    # (saved carries, xs, ct of ys, ct of saved carries)
    slot = 1 + nc
    ct_c = [_param(slot + a, init[j].shape, init[j].dtype, dev) for a, j in enumerate(fc)]
    slot += len(fc)
    acc = [_param(slot + a, consts[i].shape, consts[i].dtype, dev) for a, i in enumerate(fconst)]
    slot += len(fconst)
    k_i = [_param(slot + j, init[j].shape, init[j].dtype, dev) for j in range(k)]
    slot += k
    x_i = [_param(slot + m, xs[m].shape[1:], xs[m].dtype, dev) for m in range(nx)]
    slot += nx
    cty_i = [_param(slot + a, body.src[k + j].shape, body.src[k + j].dtype, dev) for a, j in enumerate(cy)]
    slot += len(cy)
    cts_i = [_param(slot + a, init[j].shape, init[j].dtype, dev) for a, j in enumerate(cs)]

    # the forward body on the backward's slots, and its VJP at (consts, saved carry, slice)
    c_p = [_param(1 + i, consts[i].shape, consts[i].dtype, dev) for i in range(nc)]
    fwd_slots = {0: _param(0, (), INDEX_DTYPE, dev), **{1 + i: c_p[i] for i in range(nc)},
                 **{1 + nc + j: k_i[j] for j in range(k)}, **{1 + nc + k + m: x_i[m] for m in range(nx)}}
    step = substitute_outside_calls(body, {p: fwd_slots[s] for s, p in params_of(body).items()})
    ct_out: list[UOp | None] = [None] * len(body.src)
    for a, j in enumerate(fc):
        ct_out[j] = ct_c[a]
    for a, j in enumerate(cy):
        ct_out[k + j] = cty_i[a]
    targets = [c_p[i] for i in fconst] + [k_i[j] for j in fc] + [x_i[m] for m in fx]
    g = compute_gradient(step, tuple(ct_out), targets)

    def grad_of(p: UOp) -> UOp:
        return g[p] if p in g else _full(p, 0)
    new_ct = []
    for j in fc:
        d = grad_of(k_i[j])
        if j in cs:
            d = d + cts_i[cs.index(j)]
        new_ct.append(d)
    new_acc = [a + grad_of(c_p[i]) for a, i in zip(acc, fconst, strict=True)]
    bw_body = UOp(Ops.TUPLE, None, (*new_ct, *new_acc, *(grad_of(x_i[m]) for m in fx)))

    init_ct = [_on(ct_carry[j], dev) if ct_carry[j] is not None else _zeros(init[j], dev) for j in fc]
    bw_spec = LoopSpec(f"{sp.name}_backward", nc, len(fc) + len(fconst), k + nx + len(cy) + len(cs), sp.length, dev,
                       reverse=not sp.reverse, dynamic=steps is not None)
    src = (bw_body, *consts, *init_ct, *(_zeros(consts[i], dev) for i in fconst), *saved, *xs,
           *(_on(ct_ys[j], dev) for j in cy), *(_on(ct_saved[j], dev) for j in cs),
           *([steps] if steps is not None else []))
    bw = UOp(Ops.LOOP, None, src, bw_spec)

    out: list[UOp | None] = [None] * len(ret.src)
    base = sp.n_bodies
    for a, i in enumerate(fconst):
        out[base + i] = _get(bw, len(fc) + a, consts[i].dtype)
    for a, j in enumerate(fc):
        out[base + nc + j] = _get(bw, a, init[j].dtype)
    for a, m in enumerate(fx):
        out[base + nc + k + m] = _get(bw, len(fc) + len(fconst) + a, xs[m].dtype)
    return tuple(out)


def switch_grad(ctx: tuple, ret: UOp) -> tuple:
    """One gradient per source of `ret` (a SWITCH): a SWITCH on the same index over the branches' VJPs."""
    from tgfx.transforms.grad import _full, compute_gradient
    sp: SwitchSpec = ret.arg
    n = sp.n_branches
    branches, operands = ret.src[:n], ret.src[n + 1:]
    outs = branches[0].src
    with_ct = [j for j, c in enumerate(ctx) if c is not None and outs[j].dtype.is_inexact]
    wanted = [m for m, o in enumerate(operands) if o.dtype.is_inexact]
    if not with_ct or not wanted:
        return (None,) * len(ret.src)
    cts = [_param(len(operands) + a, outs[j].shape, outs[j].dtype, sp.device) for a, j in enumerate(with_ct)]
    ops_p = [_param(m, o.shape, o.dtype, sp.device) for m, o in enumerate(operands)]
    bw_branches = []
    for b in branches:
        root_ct: list[UOp | None] = [None] * len(outs)
        for a, j in enumerate(with_ct):
            root_ct[j] = cts[a]
        g = compute_gradient(b, tuple(root_ct), [ops_p[m] for m in wanted])
        bw_branches.append(UOp(Ops.TUPLE, None, tuple(g.get(ops_p[m], _full(ops_p[m], 0)) for m in wanted)))
    bw = UOp(Ops.SWITCH, None, (*bw_branches, ret.src[n], *operands, *(_on(ctx[j], sp.device) for j in with_ct)),
             SwitchSpec(f"{sp.name}_backward", n, sp.device))
    out: list[UOp | None] = [None] * len(ret.src)
    for a, m in enumerate(wanted):
        out[n + 1 + m] = _get(bw, a, operands[m].dtype)
    return tuple(out)
