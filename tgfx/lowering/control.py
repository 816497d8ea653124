"""control: LOOP and SWITCH nodes to commands of a LINEAR that run on the device with no host in the loop.

A body is scheduled once, like a precompiled function (`template_of`: cached by the body's key, so a loop compiles
the same kernels whatever its trip count), and its commands are placed between control commands that the runtime
turns into packets (`tgfx/devices/hcq.py`, "Control flow"):

    LOOP   BLOCK
             COPY carry <- init                          the initial carries, once (on the compute queue)
             WORD i = 0                                  counter: an int64 device word, the body's PARAM 0
             what the body computes from constants only  once (a weight's packed copy for the body's matmul)
           top:
             step: carry -> other                        the body reading `carry`, writing its new carries to `other`
             JUMP i >= length -> end                     (an odd trip count ends here, its carries in `other`)
             step: other -> carry
             JUMP i < length -> top
           end:
           BLOCK
    a step:  [JUMP i >= bound -> end; cond body; JUMP pred == 0 -> end]          while loops
             COPY saved[i] <- carry                                              for the backward (save)
             COPY x[i]-slice <- xs[i]; body; COPY ys[i] <- y                     indexed copies, by the counter
             WORD i += 1
    SWITCH BLOCK; JUMP index != 0 -> b1; branch 0; JUMP -> end; b1: ...; branch n-1; end: BLOCK

A reversed loop counts down from length - 1; a loop with a dynamic trip count n (an operand: a fori_loop with Tensor
bounds, or the backward of a while loop) counts while a second word, n - i, is positive. An elementwise body skips
all of this: `tgfx/lowering/loop_kernel.py` makes the whole loop one kernel.

Per-step slices move by copies indexed with the counter (so kernels stay the ones the body compiles to, and a slice
is read where it is contiguous). The carries live in two fixed sets of buffers, so every buffer the body reads has
one address: the body is encoded twice, once each way, and writes its new carries straight into the other set (a
copy only for a carry it passes through). A loop whose trip count is known only on the device copies the carries of
an odd last step back into the first set. Branch results are written straight into the SWITCH's result
buffers when a branch computes them itself, else copied.

`lifetimes` gives the memory planner (jit) the span each buffer must live: a buffer touched inside a block and live
outside it is live for the whole block, since a loop comes back to the block's start.
"""
from __future__ import annotations

import dataclasses
import itertools

from tgfx.ir.control import INDEX_DTYPE, LoopSpec, loop_results
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.inplace import window_update
from tgfx.lowering.loop_kernel import loop_kernel

_labels = itertools.count()


class ControlFlowError(ValueError):
    """A loop or branch that cannot run on one device."""


def command(op: Ops, arg: object, *bufs: UOp) -> UOp:
    return UOp(Ops.CALL, None, (UOp(op, None, (), arg), *bufs))


def copy_command(dst: UOp, src: UOp, nbytes: int, index: UOp | None = None, dst_stride: int = 0,
                 src_stride: int = 0, count: int = 1) -> UOp:
    """COPY dst <- src; with `index` (an int64 word), at byte offsets index * stride, for 0 <= index < count."""
    if index is None:
        return command(Ops.COPY, (nbytes, 0, 0), dst, src)
    return command(Ops.COPY, (nbytes, dst_stride, src_stride, count), dst, src, index)


def _nbytes(b: UOp) -> int:
    return b.arg[2] * b.dtype.itemsize


def _check_device(what: str, bufs: list[UOp], device: str) -> None:
    for b in bufs:
        if b.arg[1] != device:
            raise ControlFlowError(f"{what} runs on {device} but reads or writes a buffer on {b.arg[1]}; a loop or "
                                   f"branch runs on one device: move its operands there first (Tensor.to)")


def _zero_fill(buf: UOp) -> list[UOp]:
    from tgfx.lowering.schedule import kernel_ast
    if buf.arg[2] == 0:
        return []
    c = UOp.const(buf.dtype, 0)
    zeros = UOp(Ops.EXPAND, buf.dtype, (UOp(Ops.RESHAPE, buf.dtype, (c,), (1,)),), (buf.arg[2],))
    ast, bufs = kernel_ast(zeros, buf, {})
    return [UOp(Ops.CALL, None, (ast, *bufs))]


def _body(body: UOp, inputs: list[UOp], device: str, what: str) -> tuple[list[UOp], list[UOp]]:
    """The commands of a body (scheduled once per body key) on `inputs` by PARAM slot, and its result buffers."""
    from tgfx.lowering.layout import buffer_view
    from tgfx.lowering.schedule import template_of
    linear, results = template_of(body, repeated=True).instantiate(inputs)
    cmds = list(linear.src)
    bufs = [b for c in cmds for b in c.src[1:]]
    _check_device(what, bufs, device)
    return cmds, [buffer_view(r) for r in results]


def schedule_loop(loop: UOp, operands: list[UOp]) -> tuple[list[UOp], list[UOp]]:
    """The commands running `loop` on operand buffers `operands`, and its result buffers (see the module doc)."""
    from tgfx.lowering.layout import new_buffer
    sp: LoopSpec = loop.arg
    what = f"loop {sp.name!r}"
    dev = sp.device
    _check_device(what, operands, dev)
    c, k, x = sp.n_consts, sp.n_carry, sp.n_xs
    consts, init, xs = operands[:c], operands[c:c + k], operands[c + k:c + k + x]
    trip = operands[-1] if sp.dynamic else None
    types = loop_results(loop)
    n_ys = len(loop.src[0].src) - k
    counter = new_buffer(dev, 1, INDEX_DTYPE)
    carry = [new_buffer(dev, b.arg[2], b.dtype) for b in init]
    slices = [new_buffer(dev, prod(u.shape[1:]), u.dtype) for u in sp.operands(loop)[2]]
    ys = [new_buffer(dev, prod(s), d) for s, d in types[k:k + n_ys]]
    saved = [new_buffer(dev, prod(s), d) for s, d in types[k + n_ys:k + n_ys + k]] if sp.save else []
    trip_out = trip if sp.dynamic else counter
    results = carry + ys + saved + ([trip_out] if sp.counted else [])

    if (fused := loop_kernel(loop, operands)) is not None:  # an elementwise body: one kernel, the steps a RANGE
        ast, inputs = fused
        return [UOp(Ops.CALL, None, (ast, *carry, *ys, *saved, *inputs))], results
    cmds = [copy_command(dst, src, _nbytes(src)) for dst, src in zip(carry, init, strict=True)]
    if sp.counted:  # steps the loop does not take leave zeros in the stacked outputs
        cmds += [z for b in ys + saved for z in _zero_fill(b)]
    if not sp.counted and sp.length == 0:
        return cmds, results
    top, end, end_b = next(_labels), next(_labels), next(_labels)
    step = -1 if sp.reverse else 1
    # the initial copies go inside the block, on the compute queue with the body: a copy outside any block is its
    # own submission to the copy engine, a hand-off between threads each way (about 10 us a loop on a busy host)
    cmds.insert(0, command(Ops.BLOCK, (True, dev)))
    rem = None
    if sp.dynamic and sp.reverse:   # i = n - 1, ..., 0
        cmds += [copy_command(counter, trip, 8), command(Ops.WORD, ("add", -1), counter)]
    elif sp.dynamic:                # i = 0, ..., n - 1, while rem = n - i > 0
        rem = new_buffer(dev, 1, INDEX_DTYPE)
        cmds += [command(Ops.WORD, ("set", 0), counter), copy_command(rem, trip, 8)]
    else:
        cmds.append(command(Ops.WORD, ("set", sp.length - 1 if sp.reverse else 0), counter))
    n = sp.length or 1
    # a carry the step updates in place (a window of it replaced: `inplace.py`) keeps one buffer both ways
    cmds0, outs0 = _body(loop.src[0], [counter, *consts, *carry, *slices], dev, what)
    inplace = _in_place_carries(cmds0, outs0, carry)
    other = [c if j in inplace else new_buffer(dev, b.arg[2], b.dtype)
             for j, (c, b) in enumerate(zip(carry, init, strict=True))]
    # the body's commands that read only the loop's constants run once, before the loop (`_invariant`); the first
    # step's encoding finds them, the second's reads their buffers instead of its own
    hoisted: list[UOp] = []
    at: list[int] = []

    def hoist(body_cmds: list[UOp], outs: list[UOp]) -> list[UOp]:
        body_cmds = _invariant_apart(body_cmds, set(consts))
        if not hoisted:
            at.extend(_invariant(body_cmds, set(consts), set(outs)))
            hoisted.extend(body_cmds[i] for i in at)
            return [c for i, c in enumerate(body_cmds) if i not in at]
        ours = {b: h for i, c in zip(at, hoisted, strict=True) for b, h in zip(writes(body_cmds[i]), writes(c),
                                                                                strict=True)}
        return [c.replace(src=(c.src[0], *(ours.get(b, b) for b in c.src[1:])))
                for i, c in enumerate(body_cmds) if i not in at]

    def half(src: list[UOp], dst: list[UOp], exit_to: int) -> list[UOp]:
        """One step reading the carries from `src` and leaving the new ones in `dst`."""
        out: list[UOp] = []
        if sp.dynamic:
            out.append(command(Ops.JUMP, ("<", 0, exit_to), counter) if sp.reverse else
                       command(Ops.JUMP, ("<", 1, exit_to), rem))
        if sp.cond:
            if sp.length is not None:
                out.append(command(Ops.JUMP, (">=", sp.length, exit_to), counter))
            cond_cmds, (pred,) = _body(loop.src[1], [counter, *consts, *src], dev, what)
            out += [*cond_cmds, command(Ops.JUMP, ("==", 0, exit_to), pred)]
        if sp.save:
            out += [copy_command(s, b, _nbytes(b), counter, dst_stride=_nbytes(b), count=n)
                    for s, b in zip(saved, src, strict=True)]
        out += [copy_command(s, b, _nbytes(s), counter, src_stride=_nbytes(s), count=n)
                for s, b in zip(slices, xs, strict=True)]
        inputs = [counter, *consts, *src, *slices]
        body_cmds, outs = _body(loop.src[0], inputs, dev, what)
        body_cmds = hoist(body_cmds, outs)
        rename, copies = _into_carries(body_cmds, outs[:k], dst, set(inputs))
        out += [_run_in_place(c.replace(src=(c.src[0], *(rename.get(b, b) for b in c.src[1:])))) for c in body_cmds]
        out += [copy_command(b, rename.get(y, y), _nbytes(y), counter, dst_stride=_nbytes(y), count=n)
                for b, y in zip(ys, outs[k:], strict=True)]
        out += copies
        out.append(command(Ops.WORD, ("add", step), counter))
        if rem is not None:
            out.append(command(Ops.WORD, ("add", -1), rem))
        return out

    # two steps a round trip, the carries going carry -> other -> carry, so no step copies its new carries back
    first = half(carry, other, end)
    cmds += [*hoisted, command(Ops.LABEL, top), *first]
    if not sp.counted:   # a known trip count: leave after an odd step, whose carries are in `other`
        cmds.append(command(Ops.JUMP, ("<", 0, end_b) if sp.reverse else (">=", sp.length, end_b), counter))
    cmds += half(other, carry, end_b)
    if sp.counted:
        cmds.append(command(Ops.JUMP, ("always", 0, top)))
    else:
        cmds.append(command(Ops.JUMP, (">=", 0, top) if sp.reverse else ("<", sp.length, top), counter))
    if not sp.counted:
        cmds += [command(Ops.LABEL, end), command(Ops.LABEL, end_b), command(Ops.BLOCK, (False, dev))]
        final = other if sp.length % 2 else carry
        return cmds, final + results[k:]
    # a trip count known only on the device: an exit after an odd step copies those carries where the results are
    cmds += [command(Ops.JUMP, ("always", 0, end)), command(Ops.LABEL, end_b)]
    cmds += [copy_command(c, o, _nbytes(c)) for c, o in zip(carry, other, strict=True) if c is not o]
    cmds += [command(Ops.LABEL, end), command(Ops.BLOCK, (False, dev))]
    return cmds, results


def _invariant_apart(cmds: list[UOp], consts: set[UOp]) -> list[UOp]:
    """A loop body's commands with each kernel of merged siblings (`schedule.merge_siblings`) that computes some
    outputs from the loop's constants alone and others from what changes split in two, so `_invariant` finds the
    first part (a weight's transposed copy merged with a step's product of that weight ran every step)."""
    from tgfx.lowering.schedule import kernel_of_stores
    known, out = set(consts), []
    for c in cmds:
        body = c.src[0]
        if body.op is Ops.SINK and len(body.src) > 1 and \
                all(st.op is Ops.STORE and st.src[0].op is Ops.DEFINE_GLOBAL for st in body.src):
            fixed, rest = [], []
            for st in body.src:
                slots = {u.arg[0] for u in st.toposort() if u.op is Ops.DEFINE_GLOBAL} - {st.src[0].arg[0]}
                (fixed if all(c.src[1 + s] in known for s in slots) else rest).append(st)
            if fixed and rest:
                first = kernel_of_stores(fixed, c)
                out += [first, kernel_of_stores(rest, c)]
                known.update(writes(first))
                continue
        out.append(c)
        if set(reads(c)) <= known | set(writes(c)):
            known.update(writes(c))
    return out


def _invariant(cmds: list[UOp], consts: set[UOp], outs: set[UOp]) -> list[int]:
    """The positions of a loop body's commands that compute the same every step: kernels and copies that read only
    the loop's constants and what such commands wrote (a weight's transposed copy for the body's matmul), and write
    none of the body's results."""
    out: list[int] = []
    known = set(consts)
    for i, c in enumerate(cmds):
        mine = writes(c)
        if c.src[0].op in (Ops.SINK, Ops.COPY) and mine and set(reads(c)) <= known | set(mine) and \
                not set(mine) & (outs | consts) and not any(set(mine) & set(writes(d)) for d in cmds if d is not c):
            out.append(i)
            known.update(mine)
    return out


def _in_place_carries(cmds: list[UOp], outs: list[UOp], carries: list[UOp]) -> set[int]:
    """The carries (by position) whose new value a step's commands `cmds` compute with one kernel replacing a window
    of the old value (`inplace.window_update`), where nothing reads the old value after that kernel (nor returns it:
    a result passed through is copied after the body): that kernel may run on the carry's own buffer."""
    out = set()
    for j, (o, old) in enumerate(zip(outs[:len(carries)], carries, strict=True)):
        at = [i for i, c in enumerate(cmds) if o in writes(c)]
        if len(at) == 1 and old not in outs and o not in carries and updates_window(cmds[at[0]], old, o) and \
                not any(old in reads(c) for c in cmds[at[0] + 1:]) and not any(old in writes(c) for c in cmds):
            out.add(j)
    return out


def _run_in_place(call: UOp, memory_of: dict[UOp, UOp] | None = None) -> UOp:
    """A window-update kernel whose output is the buffer it updates (or, by `memory_of`, will have that buffer's
    memory), as the kernel storing the window alone."""
    if call.src[0].op is Ops.SINK and (wu := window_update(call.src[0])) is not None and \
            (memory_of or {}).get(out := call.src[1 + wu.out], out) is call.src[1 + wu.base]:
        return call.replace(src=(wu.ast, *call.src[1:]))
    return call


def updates_window(call: UOp, base: UOp, out: UOp) -> bool:
    """Whether kernel `call` writes `out` as buffer `base` with a window replaced (`inplace.window_update`), reading
    `base` at that one slot: given `base`'s memory, it stores the window alone (`_run_in_place`)."""
    return call.src[0].op is Ops.SINK and (wu := window_update(call.src[0])) is not None and \
        call.src[1 + wu.out] is out and call.src[1 + wu.base] is base and sum(b is base for b in call.src[1:]) == 1


def donated_windows(linear: UOp, donated: dict[UOp, UOp]) -> UOp:
    """`linear` (a jitted call's) with each kernel that updates a window of a donated input into the output that
    takes over that input's memory (`donated`: output buffer -> input placeholder) storing the window alone: the
    rest of the output is the input already (`x.at[i].set(v)` of a replay buffer, `donate_argnums=0`). Only where
    that kernel is the output's one writer and the input's last reader (`jit._donation` checked both)."""
    return linear.replace(src=tuple(_run_in_place(c, donated) if any(updates_window(c, donated[b], b) for b in
                                                                    writes(c) if b in donated) else c
                                    for c in linear.src))


def _into_carries(cmds: list[UOp], outs: list[UOp], dst: list[UOp],
                  inputs: set[UOp]) -> tuple[dict[UOp, UOp], list[UOp]]:
    """How a step's commands write its new carries straight into `dst` (the buffers to rename, where the step
    computes a carry into a buffer of its own), and the copies into `dst` of the rest (a carry or input passed
    through, one buffer returned twice)."""
    rename: dict[UOp, UOp] = {}
    copies = []
    for o, d in zip(outs, dst, strict=True):
        if o not in inputs and o not in rename and any(o in writes(c) for c in cmds):
            rename[o] = d
        else:
            copies.append(copy_command(d, rename.get(o, o), _nbytes(d)))
    return rename, copies


def schedule_switch(sw: UOp, operands: list[UOp]) -> tuple[list[UOp], list[UOp]]:
    """The commands running the branch `index` picks (index is operands[0]), and the result buffers."""
    from tgfx.lowering.layout import new_buffer
    sp = sw.arg
    dev, what = sp.device, f"switch {sp.name!r}"
    index, args = operands[0], operands[1:]
    _check_device(what, operands, dev)
    results = [new_buffer(dev, prod(o.shape), o.dtype) for o in sw.src[0].src]
    end = next(_labels)
    cmds = [command(Ops.BLOCK, (True, dev))]
    for k, branch in enumerate(sw.src[:sp.n_branches]):
        last = k == sp.n_branches - 1
        nxt = next(_labels)
        if not last:
            cmds.append(command(Ops.JUMP, ("!=", k, nxt), index))
        body_cmds, outs = _body(branch, args, dev, what)
        cmds += _into(body_cmds, outs, results, set(operands))
        if not last:
            cmds += [command(Ops.JUMP, ("always", 0, end)), command(Ops.LABEL, nxt)]
    cmds += [command(Ops.LABEL, end), command(Ops.BLOCK, (False, dev))]
    return cmds, results


def _into(cmds: list[UOp], outs: list[UOp], results: list[UOp], inputs: set[UOp]) -> list[UOp]:
    """A branch's commands writing its results into `results`: renamed where the branch computes a result into a
    buffer of its own, copied otherwise (an input passed through, or one buffer returned twice)."""
    rename: dict[UOp, UOp] = {}
    copies = []
    for o, r in zip(outs, results, strict=True):
        if o not in inputs and o not in rename and any(o in writes(c) for c in cmds):
            rename[o] = r
        else:
            copies.append(copy_command(r, rename.get(o, o), _nbytes(r)))
    renamed = [c.replace(src=(c.src[0], *(rename.get(b, b) for b in c.src[1:]))) for c in cmds]
    return renamed + copies


# ---- before scheduling ----
# Not a PatternMatcher: the twin's body may itself hold loops to merge, and a rule would see the twin before or after
# they are merged; a substitution to a fixed point sees the whole graph each round.
def merge_saved_loops(root: UOp) -> UOp:
    """Make results of a LOOP read its twin with `save` where differentiation made one, so the forward runs once
    (the twin returns everything the LOOP does, the residuals the backward reads as extra ys after its own, and the
    saved carries besides)."""
    while True:
        twins = {}
        for u in root.toposort():
            if u.op is Ops.LOOP and u.arg.save:
                plain, outs = u.arg, u.src[0].src
                for n in range(plain.n_carry, len(outs) + 1):   # the LOOP's body results (the rest: residuals)
                    twins.setdefault(u.replace(src=(UOp(Ops.TUPLE, None, outs[:n]), *u.src[1:]),
                                               arg=dataclasses.replace(plain, save=False)), u)
        if not twins:
            return root
        mapping = {}
        for u in root.toposort():
            if u.op is Ops.GETTUPLE and (twin := twins.get(u.src[0])) is not None:
                last = u.arg == len(loop_results(u.src[0])) - 1 and u.src[0].arg.counted
                i = len(loop_results(twin)) - 1 if last else u.arg   # the step count is last, the rest in front
                mapping[u] = UOp(Ops.GETTUPLE, u.dtype, (twin,), i)
        if not mapping:
            return root
        root = root.substitute(mapping)


# ---- what commands touch, and how long buffers must live ----
def _stored_global(st: UOp) -> UOp:
    """The DEFINE_GLOBAL a STORE writes: its target, or under the INDEX or window view (`inplace.py`) it stores to."""
    dst = st.src[0]
    while dst.op is not Ops.DEFINE_GLOBAL:
        dst = dst.src[0]
    return dst


def _stored_slots(ast: UOp) -> frozenset[int]:
    """The slots a kernel stores, kept on its AST (a cache keyed by ASTs kept 4,096 alive past their kernels)."""
    if (hit := ast.__dict__.get("stored_slots")) is None:
        hit = ast.__dict__["stored_slots"] = frozenset(_stored_global(u).arg[0] for u in ast.toposort()
                                                       if u.op is Ops.STORE)
    return hit


def writes(call: UOp) -> list[UOp]:
    """The buffers a LINEAR command writes."""
    body, bufs = call.src[0], call.src[1:]
    if body.op is Ops.SINK:
        return [b for i, b in enumerate(bufs) if i in _stored_slots(body)]
    if body.op in (Ops.COPY, Ops.WORD, Ops.NETWORK):
        return [bufs[0]]
    if body.op is Ops.CALLBACK:   # its results (the effect token first)
        return list(bufs[:len(body.arg.outs) + 1])
    return []


def reads(call: UOp) -> list[UOp]:
    """The buffers a LINEAR command reads (a kernel's outputs count as read too: it may read them)."""
    body, bufs = call.src[0], call.src[1:]
    if body.op in (Ops.COPY, Ops.NETWORK):
        return list(bufs[1:])
    if body.op is Ops.WORD:
        return [bufs[0]] if body.arg[0] == "add" else []
    return list(bufs)


def blocks(calls: list[UOp]) -> list[tuple[int, int]]:
    """(start, end) command indices of every BLOCK, innermost first."""
    out, stack = [], []
    for i, c in enumerate(calls):
        if c.src[0].op is Ops.BLOCK:
            if c.src[0].arg[0]:
                stack.append(i)
            else:
                out.append((stack.pop(), i))
    return sorted(out, key=lambda se: se[1] - se[0])


def lifetimes(calls: list[UOp]) -> tuple[dict[UOp, int], dict[UOp, int]]:
    """The first and last command index each buffer must live for. A buffer touched inside a block and also outside
    it lives for the whole block: a loop goes back to the block's start, so the block is one long use of it. So does
    one read inside a block before a later write there (a loop's carry, read by one step and written by the next):
    its value crosses the jump back."""
    first: dict[UOp, int] = {}
    last: dict[UOp, int] = {}
    for i, c in enumerate(calls):
        for b in c.src[1:]:
            first.setdefault(b, i)
            last[b] = i
    for s, e in blocks(calls):
        first_read: dict[UOp, int] = {}
        last_write: dict[UOp, int] = {}
        for i in range(s, e + 1):
            for b in reads(calls[i]):
                first_read.setdefault(b, i)
            for b in writes(calls[i]):
                last_write[b] = i
        # a loop's top (its first label): what is written only before it and read after it (a value the loop's
        # steps share, computed once: `_invariant`) is read again after every jump back
        top = next((i for i in range(s, e + 1) if calls[i].src[0].op is Ops.LABEL), e + 1)
        for b in {b for c in calls[s:e + 1] for b in c.src[1:]}:
            if first[b] < s or last[b] > e or first_read.get(b, e + 1) < last_write.get(b, -1) or \
                    last_write.get(b, e + 1) < top < last[b]:
                first[b], last[b] = min(first[b], s), max(last[b], e)
    # a control word (what WORD commands set: a loop's counter, its steps left) lives for the whole program: a GPU
    # stream cannot jump, so the host drives the loops and keeps the values it gave such words for the rest of the
    # submission (`cuda_translate.Translator._known`); a later buffer in its memory (a while loop's predicate after a
    # fori_loop's counter) would have its kernels' values read as the stale count, and the loop left early
    for c in calls:
        if c.src[0].op is Ops.WORD:
            first[c.src[1]], last[c.src[1]] = 0, len(calls) - 1
    return first, last

