"""Reverse mode through LOOP and SWITCH (the rules `pm_gradient` calls), JAX's way.

The backward of a loop is a loop running the other way over the body's VJP. Its carries are the cotangents of the
forward carries, plus an accumulator per float const (the loop invariants get a gradient summed over the steps; a
term of it that contracts two values of the step, a recurrent weight's `h_t^T @ dz_t`, is summed after the loop as
one contraction over the stacked values instead, `_Stacked`);
it scans over what step i needs: the forward carry at the start of step i, saved by the forward (the same LOOP
with `save`, which returns them stacked), the forward slices xs[i], and the cotangents of ys[i] (and of saved[i],
for higher orders). It returns the cotangents of the initial carries and of the consts as its final carries, and
those of xs stacked as its ys. A loop whose step count is known only on the device (a while loop with max_steps, a
dynamic fori_loop) has a backward that takes the same number of steps, read from the forward's step count.

The body's VJP recomputes the step's elementwise forward from the saved carry (it fuses into the VJP's own kernels),
but not its reductions: the forward also stacks, as extra ys, the results of the body's REDUCE_AXIS nodes that the
VJP reads (a logsumexp's row maxima and sums, a matmul's product), and the backward reads them as scanned slices
(`_residuals`; JAX saves its residuals the same way). Hash-consing makes the VJP's graph hold the forward body's
nodes themselves, so each is replaced by its slice by node. The policy: a reduce is saved when the VJP reads it
(not only through another saved one), it varies by step (reads the index, a carry or a slice: one of the consts
only is the same every step), its dtype is a float, and the residuals fit a budget: per step at most
RESIDUAL_RATIO times the elements of the carries, and over all steps at most STACKED_BYTES_MAX bytes; reduces that
save the most work per element kept (input elements per output element) come first. A loop whose body calls
`tg.checkpoint` (`remat`) saves none: its backward recomputes the step, as a checkpointed scan body does in JAX. A
loop that already saves (the forward of a first-order backward, differentiated again) adds no residuals of its own.

The forward with `save` (and its residual ys) is a second LOOP node next to the one the primal results come from;
`tgfx.lowering.control.merge_saved_loops` makes the primal results read the saving one, so the forward runs once.

The backward of a SWITCH is a SWITCH on the same index over each branch's VJP.

Forward mode (`jvp`, `jacfwd`, `linearize`) transposes reverse mode, which a loop with no bound on its steps does not
have. Within `forward_mode()` a LOOP's reverse rule returns a placeholder instead, `Jᵀ u` as an opaque CALL whose own
reverse rule (all the transposition asks of it) is the loop's JVP `J w`: a loop with a tangent beside every float
carry, const and slice, as `jax.jvp` runs it. Every loop takes this way there, bounded or not: no carries are saved
and nothing runs backwards. The placeholder's value is never part of a tangent (a pullback is linear in `u`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from tgfx.ir.control import INDEX_DTYPE, LoopSpec, SwitchSpec, loop_results, n_bodies
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.complex import is_zero
from tgfx.lowering.inline import params_of, substitute_outside_calls, walk
from tgfx.lowering.symbolic import sum_terms
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


class _Stacked:
    """A term of a const's gradient that is a contraction of two values of the step (`x_t^T @ g_t`, a recurrent
    weight's): its operands are stacked over the steps (as the backward's ys, or read from the stacks the backward's
    slices are cut from: the saved carries, xs) and the term is one contraction over the steps and its own axes after
    the loop, instead of T contractions added into an accumulator carry."""
    def __init__(self, term: UOp, red: UOp) -> None:
        self.term, self.red = term, red
        self.operands = tuple(e.src[0] for e in red.src[0].src)   # what the two EXPANDs broadcast

    def summed(self, stacked: list[UOp]) -> UOp:
        """The term summed over every step, given its operands stacked (steps, *shape)."""
        mul = self.red.src[0]
        full = (stacked[0].shape[0], *mul.shape)
        prods = UOp(Ops.MUL, mul.dtype, tuple(UOp(Ops.EXPAND, a.dtype, (a,), full) for a in stacked))
        red = UOp(Ops.REDUCE_AXIS, self.red.dtype, (prods,), (Ops.ADD, (0, *(a + 1 for a in self.red.arg[1]))))
        return self.term.substitute({self.red: UOp(Ops.RESHAPE, red.dtype, (red,), self.red.shape)})


def _restacked(u: UOp, sliced: dict[UOp, UOp]) -> UOp | None:
    """`u`, a view (reshapes, broadcasts, permutes) of a loop slice in `sliced` (slice -> what it is cut from, steps in
    front), as the same view of the whole stack; None for anything else."""
    if u in sliced:
        return sliced[u]
    if u.op not in (Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE) or (inner := _restacked(u.src[0], sliced)) is None:
        return None
    arg = (0, *(a + 1 for a in u.arg)) if u.op is Ops.PERMUTE else (inner.shape[0], *u.arg)
    return UOp(u.op, u.dtype, (inner,), arg)


# the most bytes a backward loop stacks for `_Stacked` terms: a long loop of wide steps (1,000 steps of 64 x 8192) keeps
# its accumulator instead of stacking gigabytes
STACKED_BYTES_MAX = 1 << 28


def _stacked_terms(grad: UOp, const_params: set[UOp], size: int, steps: int) -> tuple[list[_Stacked], list[UOp]]:
    """The terms of a const's gradient `grad` (a sum) that are contractions of two values of the step whose elements
    together are at most the const's `size` (so stacking them moves no more than adding into the accumulator each step
    does: an LSTM's `h_t^T @ dz_t`, 32 x (256 + 1024) a step against 256 x 1024) and over all `steps` at most
    STACKED_BYTES_MAX, and the other terms."""
    stacked, rest = [], []
    for t in sum_terms(grad):
        red = t
        while red.op in GroupOp.Movement and red.op is not Ops.EXPAND:
            red = red.src[0]
        ok = red.op is Ops.REDUCE_AXIS and red.arg[0] is Ops.ADD and red.src[0].op is Ops.MUL and \
            all(e.op is Ops.EXPAND for e in red.src[0].src)
        if ok:
            term = _Stacked(t, red)
            ok = sum(a.size for a in term.operands) <= size and \
                steps * sum(a.size * a.dtype.itemsize for a in term.operands) <= STACKED_BYTES_MAX and all(
                any(u.op is Ops.PARAM and u not in const_params for u in walk(a)) for a in term.operands)
        (stacked if ok else rest).append(term if ok else t)
    return stacked, rest


def loop_grad(ctx: tuple, ret: UOp) -> tuple:
    """One gradient per source of `ret` (a LOOP), given the cotangent of each of its results (None: zero)."""
    from tgfx.transforms.grad import _full, compute_gradient
    sp: LoopSpec = ret.arg
    if in_forward_mode():
        return _transposed_jvp(ctx, ret)
    if sp.length is None and not _reaches(ctx, ret):   # (as JAX's: no path, no need of a reverse mode)
        return (None,) * len(ret.src)
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
    ct_carry, ct_ys = ctx[:k], ctx[k:k + n_ys]
    ct_saved = ctx[k + n_ys:k + n_ys + k] if sp.save else (None,) * k

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
    slot += len(cs)

    # the forward body on the backward's slots, and its VJP at (consts, saved carry, slice)
    c_p = [_param(1 + i, consts[i].shape, consts[i].dtype, dev) for i in range(nc)]
    fwd_slots = {0: _param(0, (), INDEX_DTYPE, dev), **{1 + i: c_p[i] for i in range(nc)},
                 **{1 + nc + j: k_i[j] for j in range(k)}, **{1 + nc + k + m: x_i[m] for m in range(nx)}}
    slots = {p: fwd_slots[s] for s, p in params_of(body).items()}
    step = substitute_outside_calls(body, slots)
    ct_out: list[UOp | None] = [None] * len(body.src)
    for a, j in enumerate(fc):
        ct_out[j] = ct_c[a]
    for a, j in enumerate(cy):
        ct_out[k + j] = cty_i[a]
    targets = [c_p[i] for i in fconst] + [k_i[j] for j in fc] + [x_i[m] for m in fx]
    g = compute_gradient(step, tuple(ct_out), targets)
    # the forward: the same loop with `save`, stacking the reduces the VJP reads besides (none when it saves already,
    # nor for a checkpointed body)
    vjp = [v for v in g.values() if v is not None]
    res = [] if sp.save or sp.remat else _residuals(body, slots, vjp, nc, init, sp.length)
    fwd = ret if sp.save else ret.replace(src=(UOp(Ops.TUPLE, None, (*body.src, *(r for r, _ in res))), *ret.src[1:]),
                                          arg=dataclasses.replace(sp, save=True))
    fwd_types = loop_results(fwd)
    n_res = len(res)
    residual = [_get(fwd, k + n_ys + a, r.dtype) for a, (r, _) in enumerate(res)]
    saved = [_get(fwd, k + n_ys + n_res + j, init[j].dtype) for j in range(k)]
    steps = trip if sp.dynamic else _get(fwd, len(fwd_types) - 1, INDEX_DTYPE) if sp.cond else None

    def grad_of(p: UOp) -> UOp:
        return g[p] if p in g else _full(p, 0)
    new_ct = []
    for j in fc:
        d = grad_of(k_i[j])
        if j in cs:
            d = d + cts_i[cs.index(j)]
        new_ct.append(d)
    # a const's gradient terms that contract two values of the step are summed over the steps after the loop, from
    # their operands stacked as ys (not with a loop whose steps are counted on the device: rows it never reaches would
    # be summed too); the other terms are added into an accumulator carry, a const with none left has no carry
    stacks, rests = {}, {}
    for i in fconst:
        stacks[i], rests[i] = _stacked_terms(grad_of(c_p[i]), set(c_p), consts[i].size, sp.length) \
            if steps is None else ([], [grad_of(c_p[i])])
    summed = [i for i in fconst if rests[i]]
    new_acc = [a + _sum(rests[i]) for a, i in zip(acc, fconst, strict=True) if rests[i]]
    # an operand that is a view of one of the backward's slices (a saved carry: h_t of h_t^T @ dz_t) is that view of
    # what the slices are cut from, not stacked again
    sliced = {**dict(zip(k_i, saved, strict=True)), **dict(zip(x_i, xs, strict=True)),
              **{cty_i[a]: _on(ct_ys[j], dev) for a, j in enumerate(cy)},
              **{cts_i[a]: _on(ct_saved[j], dev) for a, j in enumerate(cs)}}
    every = [a for i in fconst for t in stacks[i] for a in t.operands]
    restacked = {a: v for a in every if (v := _restacked(a, sliced)) is not None}
    operands = list(dict.fromkeys(a for a in every if a not in restacked))
    bw_body = UOp(Ops.TUPLE, None, (*new_ct, *new_acc, *(grad_of(x_i[m]) for m in fx), *operands))
    # the saved reduces, slices of the forward's residual ys (the last slots)
    res_i = [_param(slot + a, r.shape, r.dtype, dev) for a, (_, r) in enumerate(res)]
    bw_body = substitute_outside_calls(bw_body, {r: p for (_, r), p in zip(res, res_i, strict=True)})
    if len(summed) < len(fconst):   # the slots after a dropped accumulator move down
        first = 1 + nc + len(fc)
        kept = [first + a for a, i in enumerate(fconst) if rests[i]]
        def moved(p: UOp) -> UOp:
            s = p.arg[0]
            to = s if s < first else first + kept.index(s) if s < first + len(fconst) else s - len(fconst) + len(kept)
            return p.replace(arg=(to, *p.arg[1:]))
        bw_body = substitute_outside_calls(bw_body, {p: moved(p) for p in params_of(bw_body).values()})

    # (the buffers the VJP reads, as consts after the loop's own: the slots after them move up)
    bw_body, extra = _lift_buffers(bw_body, 1 + nc, {p: p.replace(arg=(s + len(_buffers(bw_body)), *p.arg[1:]))
                                                     for s, p in params_of(bw_body).items() if s >= 1 + nc})
    init_ct = [_on(ct_carry[j], dev) if ct_carry[j] is not None else _zeros(init[j], dev) for j in fc]
    bw_spec = LoopSpec(f"{sp.name}_backward", nc + len(extra), len(fc) + len(summed),
                       k + nx + len(cy) + len(cs) + n_res, sp.length, dev, reverse=not sp.reverse,
                       dynamic=steps is not None, remat=sp.remat)
    src = (bw_body, *consts, *extra, *init_ct, *(_zeros(consts[i], dev) for i in summed), *saved, *xs,
           *(_on(ct_ys[j], dev) for j in cy), *(_on(ct_saved[j], dev) for j in cs), *residual,
           *([steps] if steps is not None else []))
    # a const or slice the backward body does not read is zeros, not the value: a step linear in its carries (a
    # custom_jvp rule's loop over its tangent) has a VJP that reads no saved carry, and the transpose then neither
    # runs the forward again nor holds what it was computed from (the rule's tangent), as JAX's transpose of a linear
    # scan reads no primal of the carry
    read, nc2 = set(params_of(bw_body)), bw_spec.n_consts
    unread = [i for i in (*range(1, 1 + nc2), *range(1 + nc2 + bw_spec.n_carry, 1 + nc2 + bw_spec.n_carry +
                                                       bw_spec.n_xs)) if i not in read]
    if unread and isinstance(dev, str):
        src = tuple(_zeros(u, dev) if i in unread else u for i, u in enumerate(src))
    bw = UOp(Ops.LOOP, None, src, bw_spec)

    out: list[UOp | None] = [None] * len(ret.src)
    base = sp.n_bodies
    ys = len(fc) + len(summed) + len(fx)   # the first stacked operand
    for i in fconst:
        terms = [_get(bw, len(fc) + summed.index(i), consts[i].dtype)] if rests[i] else []
        for t in stacks[i]:
            terms.append(t.summed([restacked[o] if o in restacked else _get(bw, ys + operands.index(o), o.dtype)
                                   for o in t.operands]))
        out[base + i] = _sum(terms)
    for a, j in enumerate(fc):
        out[base + nc + j] = _get(bw, a, init[j].dtype)
    for a, m in enumerate(fx):
        out[base + nc + k + m] = _get(bw, len(fc) + len(summed) + a, xs[m].dtype)
    return tuple(out)


def _buffers(root: UOp) -> list[UOp]:
    return [u for u in walk(root) if u.op is Ops.BUFFER]


def _lift_buffers(root: UOp, first: int, moved: dict[UOp, UOp]) -> tuple[UOp, list[UOp]]:
    """`root` (a backward's bodies) with the concrete buffers it reads made PARAMs from slot `first` on, and those
    buffers, to pass as operands: a custom rule in the forward body builds its backward there from what it closes
    over (a checkpoint runs its function again: a NumPy constant in it is a new buffer), and a buffer inside a body
    read as zeros, silently. `moved`: the body's PARAMs to renumber at the same time."""
    found = _buffers(root)
    if not found:
        return root, []
    lifted = {b: UOp(Ops.PARAM, b.dtype, (), (first + i, b.shape, b.device)) for i, b in enumerate(found)}
    return substitute_outside_calls(root, {**moved, **lifted}), found


# a step's saved reduces hold at most this many times the elements of its carries (a loop's backward reads both per
# step; an LSTM's two gate products are 4x its (h, c)), and all steps' at most STACKED_BYTES_MAX
RESIDUAL_RATIO = 4


def _residuals(body: UOp, slots: dict[UOp, UOp], vjp: list[UOp], nc: int, init: tuple[UOp, ...],
               steps: int) -> list[tuple[UOp, UOp]]:
    """The reduces of the forward `body` whose results the backward reads from the forward instead of recomputing them
    (see the module doc), each as (the node in `body`, the same node in the VJP's graph: `body` with its PARAMs
    replaced by `slots`), given the VJP's results `vjp`; `nc` consts come after the index in `body`'s slots."""
    per_step = {p for s, p in params_of(body).items() if s == 0 or s > nc}
    varying: dict[UOp, bool] = {}
    for u in walk(body):
        varying[u] = u in per_step or any(varying[s] for s in u.src[n_bodies(u):])
    reduces = [u for u in walk(body) if u.op is Ops.REDUCE_AXIS and u.dtype.is_inexact and varying[u]]
    if not reduces or not steps:
        return []
    images = substitute_outside_calls(UOp(Ops.TUPLE, None, tuple(reduces)), slots).src
    of = dict(zip(images, reduces, strict=True))
    # the most work saved per element kept first (a matmul's product, then a row's sum)
    order = sorted(of, key=lambda r: -(r.src[0].size // max(r.size, 1)))
    budget = RESIDUAL_RATIO * sum(c.size for c in init)
    chosen: set[UOp] = set()
    for _ in range(len(order) + 1):   # a chosen reduce read only through others frees its room
        read = _read(vjp, of, chosen)
        pruned = chosen - read
        chosen &= read
        used, nbytes = sum(r.size for r in chosen), sum(r.size * r.dtype.itemsize for r in chosen)
        added = False
        for r in order:
            if r in read and r not in chosen and used + r.size <= budget and \
                    steps * (nbytes + r.size * r.dtype.itemsize) <= STACKED_BYTES_MAX:
                chosen.add(r)
                used, nbytes, added = used + r.size, nbytes + r.size * r.dtype.itemsize, True
        if not added and not pruned:
            break
    return [(of[r], r) for r in order if r in chosen]


def _read(roots: list[UOp], candidates: dict[UOp, UOp], chosen: set[UOp]) -> set[UOp]:
    """The `candidates` the graph of `roots` reads, not counting what it reads only through the `chosen` ones
    (outside nested bodies)."""
    seen: set[UOp] = set()
    stack, out = list(roots), set()
    while stack:
        u = stack.pop()
        if u in seen:
            continue
        seen.add(u)
        if u in candidates:
            out.add(u)
        if u not in chosen:
            stack.extend(u.src[n_bodies(u):])
    return out


def _sum(terms: list[UOp]) -> UOp:
    out = terms[0]
    for t in terms[1:]:
        out = out + t
    return out


def switch_grad(ctx: tuple, ret: UOp) -> tuple:
    """One gradient per source of `ret` (a SWITCH): a SWITCH on the same index over the branches' VJPs."""
    from tgfx.transforms.grad import _full, compute_gradient
    sp: SwitchSpec = ret.arg
    n = sp.n_branches
    branches, operands = ret.src[:n], ret.src[n + 1:]
    outs = branches[0].src
    with_ct = [j for j, c in enumerate(ctx) if c is not None and outs[j].dtype.is_inexact]
    # only the operands a gradient is asked of: the backward SWITCH computes all it returns, and the gradient of one
    # not asked for may read a value that must not run (transposing a backward for forward mode, the gradient of a
    # weight s in c * s reads the cotangent: forward mode's placeholder for a loop's `Jᵀ u`)
    asked = _ON_PATH.get()
    wanted = [m for m, o in enumerate(operands) if o.dtype.is_inexact and (asked is None or o in asked)]
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
    # an operand no VJP reads is passed as zeros: a cotangent the branches are linear in (this SWITCH is itself a
    # backward being transposed), which may be forward mode's placeholder for a loop's `Jᵀ u`, never evaluated
    read = set().union(*(params_of(b) for b in bw_branches))
    passed = [o if m in read else _zeros(o, sp.device) for m, o in enumerate(operands)]
    whole, extra = _lift_buffers(UOp(Ops.TUPLE, None, tuple(bw_branches)), len(operands) + len(with_ct), {})
    bw = UOp(Ops.SWITCH, None, (*whole.src, ret.src[n], *passed, *(_on(ctx[j], sp.device) for j in with_ct), *extra),
             SwitchSpec(f"{sp.name}_backward", n, sp.device))
    out: list[UOp | None] = [None] * len(ret.src)
    for a, m in enumerate(wanted):
        out[n + 1 + m] = _get(bw, a, operands[m].dtype)
    return tuple(out)


_ON_PATH: ContextVar[set | None] = ContextVar("tgfx_gradient_path", default=None)


@contextmanager
def gradient_path(nodes: set) -> Iterator[None]:
    """Within: the nodes a gradient is asked of (`compute_gradient`'s path to its targets); `switch_grad` computes
    only theirs."""
    token = _ON_PATH.set(nodes)
    try:
        yield
    finally:
        _ON_PATH.reset(token)


# ---- forward mode ----
_FORWARD: ContextVar[bool] = ContextVar("tgfx_loop_forward", default=False)
_TWINS: ContextVar[dict | None] = ContextVar("tgfx_loop_twins", default=None)
TRANSPOSED = "transposed_loop_jvp"   # the placeholder CALL's name


@contextmanager
def forward_mode(on: bool = True) -> Iterator[None]:
    """Within (with `on`): reverse rules of loops return the transposed-JVP placeholder, for a pullback that forward
    mode transposes. A reverse-mode transform sets it off for its own pullback (a custom rule may call one)."""
    token = _FORWARD.set(on)
    try:
        yield
    finally:
        _FORWARD.reset(token)


def in_forward_mode() -> bool:
    """Whether reverse rules run for forward mode to transpose (see `forward_mode`)."""
    return _FORWARD.get()


def _reaches(ctx: tuple, ret: UOp) -> bool:
    """Whether a result of LOOP `ret` given a cotangent depends on one of its float operands a gradient is asked of
    (`gradient_path`): a carry once the body makes it depend on one, to a fixed point (a JVP loop's tangents do not
    depend on its primal carries)."""
    sp: LoopSpec = ret.arg
    consts, init, xs, _ = sp.operands(ret)
    k, nc = sp.n_carry, sp.n_consts
    asked = _ON_PATH.get()

    def wanted(o: UOp) -> bool:
        return o.dtype.is_inexact and (asked is None or o in asked)
    body = ret.src[0]
    params = params_of(body)
    tk = {j for j in range(k) if wanted(init[j])}
    fixed = {params.get(1 + i) for i in range(nc) if wanted(consts[i])} | \
        {params.get(1 + nc + k + m) for m in range(sp.n_xs) if wanted(xs[m])}
    while True:
        dep = _depends(body.src, fixed | {params.get(1 + nc + j) for j in tk})
        more = tk | {j for j in range(k) if dep[j] and init[j].dtype.is_inexact}
        if more == tk:
            break
        tk = more
    types = loop_results(ret)
    return any(c is not None and types[r][1].is_inexact and (r in tk if r < k else r < len(body.src) and dep[r])
               for r, c in enumerate(ctx)) or any(c is not None for c in ctx[len(body.src):])


def _transposed_jvp(ctx: tuple, ret: UOp) -> tuple:
    """The gradients of `ret`'s float sources as `Jᵀ u`, u the cotangents of its results: GETTUPLEs of a placeholder
    CALL (never evaluated) whose reverse rule, `w -> J w`, is the loop's forward mode."""
    sp: LoopSpec = ret.arg
    consts, init, xs, _ = sp.operands(ret)
    types = loop_results(ret)
    sources = [sp.n_bodies + i for i, c in enumerate((*consts, *init, *xs)) if c.dtype.is_inexact]
    with_ct = [r for r, c in enumerate(ctx) if c is not None and types[r][1].is_inexact]
    if not with_ct or not sources:
        return (None,) * len(ret.src)

    nb = sp.n_bodies

    def forward(ws: tuple[Tensor, ...], call: Any) -> tuple[Tensor | None, ...]:
        tangents = {s: _on(w.uop, sp.device) for s, w in zip(sources, ws, strict=True)
                    if not is_zero(w.uop, signed=False)}   # (a symbolic zero is a tangent not worth carrying)
        # the loop over the operands the placeholder has now: in a function's backward they are that body's
        # PARAMs, renumbered from the forward's (`ret`'s own would read other slots: a second order through a jitted
        # while loop was zero, silently)
        now = UOp(ret.op, ret.dtype, (*ret.src[:nb], *(t.uop for t in call.inputs[len(with_ct):])), ret.arg)
        res = loop_jvp(now, tangents)
        return (*(Tensor(res[r]) if res[r] is not None else Tensor.full(types[r][0], 0, types[r][1], device=sp.device)
                  for r in with_ct), *(None for _ in ret.src[nb:]))

    spec = tuple((ret.src[s].shape, ret.src[s].dtype, sp.device) for s in sources)
    # the loop's operands are sources too (gradient None), so walks of the graph see what the JVP will read, and the
    # JVP reads them as they are where it is built
    placeholder = UOp(Ops.CALL, None, (UOp(Ops.SINK, None, (), TRANSPOSED), *(_on(ctx[r], sp.device) for r in with_ct),
                                       *ret.src[nb:]), (TRANSPOSED, forward, spec))
    out: list[UOp | None] = [None] * len(ret.src)
    for a, s in enumerate(sources):
        out[s] = _get(placeholder, a, ret.src[s].dtype)
    return tuple(out)


def loop_jvp(ret: UOp, tangents: dict[int, UOp]) -> list[UOp | None]:
    """The tangent of each result of LOOP `ret`, given the tangents of some of its sources (by source position; the
    others are zero): one loop carrying a tangent beside each float const, carry and slice, and stacking one beside
    each float ys (JAX's JVP of a loop). None where a result has no tangent (an integer, the step count)."""
    from tgfx.transforms.jvp import pushforward_graph
    sp: LoopSpec = ret.arg
    dev, nb = sp.device, sp.n_bodies
    consts, init, xs, trip = sp.operands(ret)
    k, nc, nx = sp.n_carry, sp.n_consts, sp.n_xs
    body = ret.src[0]
    n_ys = len(body.src) - k
    # tangents only where they may be nonzero: the given ones, and a carry once the body makes its tangent depend on
    # one (to a fixed point, as JAX's); a weight with no tangent is not multiplied by zeros every step
    tc = [i for i in range(nc) if nb + i in tangents]
    tx = [m for m in range(nx) if nb + nc + k + m in tangents]
    tk = [j for j in range(k) if nb + nc + j in tangents]
    old = params_of(body)
    while True:
        live = {old.get(s) for s in (*(1 + i for i in tc), *(1 + nc + j for j in tk), *(1 + nc + k + m for m in tx))}
        dep = _depends(body.src, live)
        more = sorted(set(tk) | {j for j in range(k) if dep[j] and init[j].dtype.is_inexact})
        if more == tk:
            break
        tk = more
    ty = [j for j in range(n_ys) if dep[k + j] and body.src[k + j].dtype.is_inexact]
    # the new slots: index, consts, their tangents, carries, theirs, slices, theirs
    at_c, at_k = 1 + nc, 1 + nc + len(tc)
    at_tk, at_x = at_k + k, at_k + k + len(tk)
    at_tx = at_x + nx
    shift = {0: 0, **{1 + i: 1 + i for i in range(nc)}, **{1 + nc + j: at_k + j for j in range(k)},
             **{1 + nc + k + m: at_x + m for m in range(nx)}}

    def moved(b: UOp) -> UOp:
        return substitute_outside_calls(b, {p: p.replace(arg=(shift[s], *p.arg[1:])) for s, p in params_of(b).items()})
    step = moved(body)
    slots = params_of(step)
    t_in: dict[UOp, UOp] = {}
    for a, i in enumerate(tc):
        if 1 + i in slots:
            t_in[slots[1 + i]] = _param(at_c + a, consts[i].shape, consts[i].dtype, dev)
    for a, j in enumerate(tk):
        if at_k + j in slots:
            t_in[slots[at_k + j]] = _param(at_tk + a, init[j].shape, init[j].dtype, dev)
    for a, m in enumerate(tx):
        if at_x + m in slots:
            t_in[slots[at_x + m]] = _param(at_tx + a, xs[m].shape[1:], xs[m].dtype, dev)
    outs = list(step.src)
    d = pushforward_graph(outs, t_in)

    def tangent(r: int) -> UOp:
        return d[r] if d[r] is not None else _zeros(outs[r], dev)
    new_body = UOp(Ops.TUPLE, None, (*outs[:k], *(tangent(j) for j in tk), *outs[k:], *(tangent(k + j) for j in ty)))
    # (each tangent a carry reads is given, so none holds a stand-in: the fixed point above saw every dependence)
    bodies = UOp(Ops.TUPLE, None, (new_body, *((moved(ret.src[1]),) if sp.cond else ())))
    # (the buffers the JVP makes, a custom rule's, as consts after the tangents of the loop's own: later slots move up)
    n_new = len(_buffers(bodies))
    bodies, extra = _lift_buffers(bodies, at_k, {p: p.replace(arg=(s + n_new, *p.arg[1:]))
                                                 for s, p in params_of(bodies).items() if s >= at_k})

    def given(s: int, like: UOp) -> UOp:
        return tangents[s] if s in tangents else _zeros(like, dev)
    src = (*bodies.src, *consts, *(given(nb + i, consts[i]) for i in tc), *extra, *init,
           *(given(nb + nc + j, init[j]) for j in tk), *xs, *(given(nb + nc + k + m, xs[m]) for m in tx),
           *([trip] if trip is not None else []))
    spec = dataclasses.replace(sp, name=f"{sp.name}_jvp", n_consts=nc + len(tc) + len(extra), n_carry=k + len(tk),
                               n_xs=nx + len(tx))
    fwd = UOp(Ops.LOOP, None, src, spec)
    types = loop_results(fwd)
    # results: carries, their tangents, ys, theirs, [saved carries, theirs], [step count]
    k2, ny2 = k + len(tk), n_ys + len(ty)
    if (twins := _TWINS.get()) is not None:   # where each of ret's own results is among fwd's
        twins[ret] = (fwd, [*range(k), *range(k2, k2 + n_ys), *(range(k2 + ny2, k2 + ny2 + k) if sp.save else ()),
                            *([len(types) - 1] if sp.counted else [])])
    res: list[UOp | None] = [None] * len(loop_results(ret))
    for a, j in enumerate(tk):
        res[j] = _get(fwd, k + a, types[k + a][1])
    for a, j in enumerate(ty):
        res[k + j] = _get(fwd, k2 + n_ys + a, types[k2 + n_ys + a][1])
    if sp.save:
        for a, j in enumerate(tk):
            res[k + n_ys + j] = _get(fwd, k2 + ny2 + k + a, types[k2 + ny2 + k + a][1])
    return res


def _depends(outs: tuple[UOp, ...], leaves: set) -> list[bool]:
    """Whether each of `outs` reads any of `leaves` (outside nested bodies, which read through their operands)."""
    dep: dict[UOp, bool] = {}
    for u in walk(UOp(Ops.TUPLE, None, outs)):
        dep[u] = u in leaves or any(dep[s] for s in u.src[n_bodies(u):])
    return [dep[o] for o in outs]


@contextmanager
def primal_twins() -> Iterator[dict]:
    """Within: each loop given a JVP is recorded, `{loop: (its JVP loop, where each of its results is there)}`, for
    `read_twins` (jvp evaluates primal and tangent together, so the primal need not run twice)."""
    twins: dict = {}
    token = _TWINS.set(twins)
    try:
        yield twins
    finally:
        _TWINS.reset(token)


def read_twins(roots: list[UOp], twins: dict) -> list[UOp]:
    """`roots` with the results of each recorded loop read from its JVP loop, which computes them too (repeated: a
    JVP loop's own operands may be results of another recorded loop)."""
    if not twins:
        return roots
    root = UOp(Ops.TUPLE, None, tuple(roots))
    while True:   # (outside bodies: a loop in a function's body and its JVP loop are over different parameters)
        mapping = {u: _get(twins[u.src[0]][0], twins[u.src[0]][1][u.arg], u.dtype) for u in walk(root)
                   if u.op is Ops.GETTUPLE and u.src[0] in twins}
        if not mapping:
            return list(root.src)
        root = substitute_outside_calls(root, mapping)
