"""schedule: a graph of tensor ops to a LINEAR list of kernel CALLs, in dependency order.

1. decide where values are materialised: the requested outputs, `CONTIGUOUS` and `COPY`, and reduces that would
   otherwise be recomputed (a reduce read through an `EXPAND`, or by more than one kernel);
2. everything else is fused into the kernel of the materialised value that reads it;
3. each kernel's AST refers to its buffers by slot (`DEFINE_GLOBAL`), never by identity, so equal computations on
   different data have the same `key` and share one compiled program.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from tgfx.ir.control import n_bodies
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.inline import params_of, substitute_outside_calls, walk

_buffer_uid = itertools.count(1)
DEFAULT_DEVICE = "CPU:0"
REUSE_TO_TRANSPOSE = 16   # see _transposed_operand


def new_buffer(device: str, size: int, dtype) -> UOp:  # noqa: ANN001
    """A fresh BUFFER node; its memory is allocated when a kernel first writes it."""
    return UOp(Ops.BUFFER, dtype, (), (next(_buffer_uid), device, size))


def buffer_view(u: UOp) -> UOp | None:
    """The BUFFER under `u` if `u` reads it contiguously in order (a reshape of it), else None."""
    if u.op is Ops.BUFFER:
        return u
    if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER:
        return u.src[0]
    return None


def copy_source(u: UOp) -> tuple[UOp, int]:
    """The value a COPY reads and the element offset into it. Reshapes and leading-axis shrinks of a contiguous
    value are contiguous ranges of its buffer, so they are copied straight out of it (a shard of a buffer, a chunk of
    an all-reduce ring) instead of through a kernel."""
    off = 0
    while True:
        if u.op is Ops.RESHAPE:
            u = u.src[0]
        elif u.op is Ops.SHRINK and all(b == (0, s) for b, s in zip(u.arg[1:], u.src[0].shape[1:], strict=True)):
            off += u.arg[0][0] * prod(u.src[0].shape[1:])
            u = u.src[0]
        else:
            return u, off


def concat_pieces(u: UOp) -> list[tuple[UOp, int]]:
    """The pieces of a `CONTIGUOUS(joined, *pieces)` tagged ("concat", offsets) and their element offsets."""
    return list(zip(u.src[1:], u.tag[1], strict=True))


def is_concat(u: UOp) -> bool:
    return u.op is Ops.CONTIGUOUS and isinstance(u.tag, tuple) and u.tag[0] == "concat"


def _root_base(r: UOp) -> UOp:
    """What a requested result is a view of: a reshape of a value materialised anyway (CONTIGUOUS, COPY) needs no
    kernel of its own."""
    base = r
    while base.op is Ops.RESHAPE:
        base = base.src[0]
    return base if base.op in (Ops.CONTIGUOUS, Ops.COPY) else r


def _is_expanding(u: UOp) -> bool:
    return u.op is Ops.EXPAND and any(a != b for a, b in zip(u.src[0].shape, u.arg, strict=True))


@dataclass
class ScheduleCtx:
    realize: set[UOp] = field(default_factory=set)

    def is_leaf(self, u: UOp, root: UOp) -> bool:
        return u is not root and (u in self.realize or u.op in (Ops.BUFFER, Ops.CONST, Ops.IOTA))


def find_realizes(roots: list[UOp]) -> set[UOp]:
    """The nodes that get their own buffer."""
    realize = {_root_base(r) for r in roots if buffer_view(r) is None}
    for u in walk(UOp(Ops.SINK, None, tuple(roots))):
        if u.op in (Ops.CALL, Ops.LOOP, Ops.SWITCH):
            # opaque calls, loops and branches read buffers and write their own
            realize.update(a for a in u.src[n_bodies(u):] if buffer_view(a) is None)
        elif u.op is Ops.GETTUPLE:
            realize.add(u)
        elif u.op is Ops.COPY:
            realize.add(u)
            if (base := copy_source(u.src[0])[0]).op is not Ops.BUFFER:
                realize.add(base)
        elif is_concat(u):
            realize.add(u)
            realize.update(base for x, _ in concat_pieces(u) if (base := copy_source(x)[0]).op is not Ops.BUFFER)
        elif u.op is Ops.CONTIGUOUS and buffer_view(u.src[0]) is None:
            realize.add(u)
    ctx = ScheduleCtx(realize)
    changed = True
    while changed:
        changed = False
        users: dict[UOp, set[UOp]] = {}
        for root in list(ctx.realize):
            # walk the kernel of `root`, remembering whether the path from root passed an expanding EXPAND
            seen: set[tuple[UOp, bool]] = set()
            stack = [(root, False)]
            while stack:
                u, expanded = stack.pop()
                if (u, expanded) in seen:
                    continue
                seen.add((u, expanded))
                if u is not root and u.op is Ops.REDUCE_AXIS:
                    users.setdefault(u, set()).add(root)
                    if expanded and u not in ctx.realize:
                        ctx.realize.add(u)
                        changed = True
                        continue
                for s in u.src:
                    if not ctx.is_leaf(s, root):
                        stack.append((s, expanded or _is_expanding(u)))
        for red, kernels in users.items():
            if len(kernels) > 1 and red not in ctx.realize:
                ctx.realize.add(red)
                changed = True
    return ctx.realize


def kernel_ast(root: UOp, out_buf: UOp, realized: dict[UOp, UOp]) -> tuple[UOp, list[UOp]]:
    """The AST computing `root` into slot 0, and the buffers of its slots."""
    bufs = [out_buf]
    slot: dict[UOp, int] = {out_buf: 0}

    def global_of(buf: UOp) -> UOp:
        if buf not in slot:
            slot[buf] = len(bufs)
            bufs.append(buf)
        return UOp(Ops.DEFINE_GLOBAL, buf.dtype, (), (slot[buf], buf.arg[2]))

    new: dict[UOp, UOp] = {}
    stack: list[tuple[UOp, bool]] = [(root, False)]
    while stack:
        u, ready = stack.pop()
        if u in new:
            continue
        if u is not root and u in realized:
            new[u] = UOp(Ops.RESHAPE, u.dtype, (global_of(realized[u]),), u.shape)
            continue
        if u.op is Ops.BUFFER:
            new[u] = global_of(u)
            continue
        assert u.op not in (Ops.CALL, Ops.PARAM, Ops.FUNCTION), f"{u.op} inside a kernel"
        if not ready:
            stack.append((u, True))
            stack.extend((s, False) for s in u.src if s not in new)
            continue
        src = tuple(new[s] for s in u.src)
        if u.op is Ops.CONTIGUOUS:  # materialisation is this kernel's store
            new[u] = src[0]
        else:
            new[u] = u if src == u.src else u.replace(src=src)
    value = new[root]
    out = UOp(Ops.DEFINE_GLOBAL, out_buf.dtype, (), (0, out_buf.arg[2]))
    return UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (out, value)),)), bufs


def _stored_rows(v: UOp) -> bool:
    """Whether `v` reads a buffer in row-major order (through reshapes only)."""
    while v.op is Ops.RESHAPE:
        v = v.src[0]
    return v.op is Ops.BUFFER


def _transposed_operand(red: UOp) -> UOp | None:
    """`a @ w.T` as a contraction: a reduce over the innermost axis of a product whose operands both run along it in
    memory leaves no output axis that the kernel can read as vectors (every load in the loop is a dot product's
    stride-1 walk). A stored operand reused at least `REUSE_TO_TRANSPOSE` times is then read through a transposed
    copy, so the other output axis becomes contiguous in it: the contraction is a plain `a @ b`, for one extra pass
    over the smaller such operand. The reduce with that operand replaced, or None."""
    src = red.src[0]
    n = len(src.shape)
    if red.arg[0] is not Ops.ADD or red.arg[1] != (n - 1,) or src.op is not Ops.MUL or n < 2:
        return None
    k = src.shape[-1]
    candidates = []
    for i, e in enumerate(src.src):
        if e.op is not Ops.EXPAND or not _is_expanding(e):
            return None
        v = e.src[0]
        if v.shape[-1] == k and _stored_rows(v) and prod(e.arg) // prod(v.shape) >= REUSE_TO_TRANSPOSE:
            candidates.append((prod(v.shape), i, e, v))
    if not candidates or k < 2:
        return None
    _, i, e, v = min(candidates, key=lambda c: c[0])
    perm = (n - 1, *range(n - 1))
    inv = (*range(1, n), 0)
    copy = UOp(Ops.CONTIGUOUS, v.dtype, (UOp(Ops.PERMUTE, v.dtype, (v,), perm),))
    operand = e.replace(src=(UOp(Ops.PERMUTE, v.dtype, (copy,), inv),))
    return red.replace(src=(src.replace(src=tuple(operand if j == i else o for j, o in enumerate(src.src))),))


pm_transpose_operands = PatternMatcher([(UPat(Ops.REDUCE_AXIS, name="red"), _transposed_operand)])


def schedule(roots: list[UOp]) -> tuple[UOp, dict[UOp, UOp]]:
    """LINEAR of CALLs computing `roots`, and each root's result as a view of a buffer."""
    given = roots
    roots = list(graph_rewrite(UOp(Ops.SINK, None, tuple(roots)), pm_transpose_operands, name="transpose").src)
    realize = find_realizes(roots)
    realized: dict[UOp, UOp] = {}  # node -> its BUFFER
    calls: list[UOp] = []
    for u in walk(UOp(Ops.SINK, None, tuple(roots))):
        if u.op is Ops.CALL:
            calls.extend(schedule_call(u, realized))
            continue
        if u.op in (Ops.LOOP, Ops.SWITCH):
            calls.extend(schedule_control(u, realized))
            continue
        if u not in realize:
            continue
        if u.op is Ops.GETTUPLE:
            continue  # its CALL filled `realized`
        if u.op is Ops.COPY:
            base, off = copy_source(u.src[0])
            src_buf = base if base.op is Ops.BUFFER else realized[base]
            dst = new_buffer(u.arg, prod(u.shape), u.dtype)
            nbytes, offset = dst.arg[2] * u.dtype.itemsize, off * u.dtype.itemsize
            calls.append(UOp(Ops.CALL, None, (UOp(Ops.COPY, None, (), (nbytes, offset, 0)), dst, src_buf)))
            realized[u] = dst
            continue
        if is_concat(u):  # pieces copied into place
            out = realized[u] = new_buffer(u.device or DEFAULT_DEVICE, prod(u.shape), u.dtype)
            for x, at in concat_pieces(u):
                base, off = copy_source(x)
                size = u.dtype.itemsize
                arg = (prod(x.shape) * size, off * size, at * size)
                calls.append(UOp(Ops.CALL, None, (UOp(Ops.COPY, None, (), arg), out,
                                                  base if base.op is Ops.BUFFER else realized[base])))
            continue
        if u.op is Ops.CONTIGUOUS and u.src[0] in realized:
            realized[u] = realized[u.src[0]]
            continue
        out = new_buffer(u.device or DEFAULT_DEVICE, prod(u.shape), u.dtype)
        realized[u] = out
        if prod(u.shape) == 0:
            continue
        ast, bufs = kernel_ast(u, out, realized)
        calls.append(UOp(Ops.CALL, None, (ast, *bufs)))
    results: dict[UOp, UOp] = {}
    for g, r in zip(given, roots, strict=True):
        buf = realized.get(_root_base(r)) or buffer_view(r)
        results[g] = r if buf is None else (buf if buf.shape == r.shape else UOp(Ops.RESHAPE, r.dtype, (buf,), r.shape))
    return UOp(Ops.LINEAR, None, tuple(calls)), results


def _arg_buffer(a: UOp, realized: dict[UOp, UOp]) -> UOp:
    return buffer_view(a) or realized[a]


def schedule_call(call: UOp, realized: dict[UOp, UOp]) -> list[UOp]:
    """An opaque CALL: a custom kernel runs as written; a precompiled function replays its cached schedule."""
    args = [_arg_buffer(a, realized) for a in call.src[1:]]
    body = call.src[0]
    outs = call_outputs(call)
    if body.op is Ops.SINK:  # a custom kernel: outputs take the first slots, then the inputs
        out_bufs = [new_buffer(dev, prod(shape), dt) for shape, dt, dev in outs]
        for i, b in enumerate(out_bufs):
            realized[UOp(Ops.GETTUPLE, b.dtype, (call,), i)] = b
        return [UOp(Ops.CALL, None, (body, *out_bufs, *args))]
    tpl = template_of(body)
    linear, results = tpl.instantiate(args)
    for i, r in enumerate(results):
        realized[UOp(Ops.GETTUPLE, r.dtype, (call,), i)] = buffer_view(r)
    return list(linear.src)


def schedule_control(u: UOp, realized: dict[UOp, UOp]) -> list[UOp]:
    """A LOOP or SWITCH: its body scheduled once, between control commands (tgfx/lowering/control.py)."""
    from tgfx.lowering.control import schedule_loop, schedule_switch
    args = [_arg_buffer(a, realized) for a in u.src[n_bodies(u):]]
    cmds, results = (schedule_loop if u.op is Ops.LOOP else schedule_switch)(u, args)
    for i, r in enumerate(results):
        realized[UOp(Ops.GETTUPLE, r.dtype, (u,), i)] = r
    return cmds


def call_outputs(call: UOp) -> list[tuple[tuple[int, ...], object, str]]:
    body = call.src[0]
    if body.op is Ops.SINK:
        return list(call.arg[2])
    return [(r.shape, r.dtype, r.device or DEFAULT_DEVICE) for r in body.src]


# ---- schedule templates: a schedule computed once per graph key, replayed with other buffers ----
def placeholder(slot: int, dtype, device: str, size: int) -> UOp:  # noqa: ANN001
    """An input buffer by position; its uid is fixed, so a graph's key does not depend on which buffers it reads."""
    return UOp(Ops.BUFFER, dtype, (), (-1 - slot, device, size))


class ScheduleTemplate:
    """The LINEAR for a graph whose inputs are placeholders; `instantiate` binds real buffers and fresh outputs."""

    def __init__(self, roots: list[UOp], n_inputs: int) -> None:
        self.linear, results = schedule(roots)
        self.results = [results[r] for r in roots]
        self.n_inputs = n_inputs
        from tgfx.counters import counters
        counters.schedule_count += 1

    def instantiate(self, inputs: list[UOp]) -> tuple[UOp, list[UOp]]:
        def bind(b: UOp) -> UOp:  # placeholders are the inputs; every other buffer is made fresh
            return inputs[-1 - b.arg[0]] if b.arg[0] < 0 else new_buffer(b.arg[1], b.arg[2], b.dtype)
        mapping: dict[UOp, UOp] = {}
        result_bufs = [b for r in self.results if (b := buffer_view(r)) is not None]
        for b in [b for call in self.linear.src for b in call.src[1:]] + result_bufs:
            if b not in mapping:
                mapping[b] = bind(b)
        calls = tuple(c.replace(src=(c.src[0], *(mapping[b] for b in c.src[1:]))) for c in self.linear.src)
        return UOp(Ops.LINEAR, None, calls), [r.substitute(mapping) for r in self.results]


_templates: dict[str, ScheduleTemplate] = {}
_TEMPLATES_KEPT = 4096


def _cached_template(key: str, roots: list[UOp], n_inputs: int) -> ScheduleTemplate:
    tpl = _templates.get(key)
    if tpl is None:
        if len(_templates) >= _TEMPLATES_KEPT:
            _templates.pop(next(iter(_templates)))
        tpl = _templates[key] = ScheduleTemplate(roots, n_inputs)
    return tpl


def template_of(body: UOp) -> ScheduleTemplate:
    """The cached schedule of a precompiled function's body, its PARAMs bound to placeholders by slot."""
    params = params_of(body)
    mapping = {p: UOp(Ops.RESHAPE, p.dtype, (placeholder(k, p.dtype, p.arg[2], prod(p.arg[1])),), p.arg[1])
               if p.arg[1] != (prod(p.arg[1]),) else placeholder(k, p.dtype, p.arg[2], prod(p.arg[1]))
               for k, p in params.items()}
    roots = [substitute_outside_calls(r, mapping) for r in body.src]
    return _cached_template("call:" + body.key, roots, len(params))


def graph_template(sink: UOp) -> tuple[ScheduleTemplate, list[UOp]]:
    """The cached schedule of an inlined graph, and the buffers it reads (in placeholder order)."""
    inputs = [u for u in walk(sink) if u.op is Ops.BUFFER and u.arg[0] >= 0]
    mapping = {b: placeholder(i, b.dtype, b.arg[1], b.arg[2]) for i, b in enumerate(inputs)}
    abstract = substitute_outside_calls(sink, mapping)
    return _cached_template("graph:" + abstract.key, list(abstract.src), len(inputs)), inputs


__all__ = ["schedule", "new_buffer", "buffer_view", "graph_template"]
