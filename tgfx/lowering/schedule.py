"""schedule: a graph of tensor ops to a LINEAR list of kernel CALLs, in dependency order.

1. decide where values are materialised: the requested outputs, `CONTIGUOUS` and `COPY`, and reduces that would
   otherwise be recomputed (a reduce read through an `EXPAND`, or by more than one kernel);
2. everything else is fused into the kernel of the materialised value that reads it;
3. each kernel's AST refers to its buffers by slot (`DEFINE_GLOBAL`), never by identity, so equal computations on
   different data have the same `key` and share one compiled program.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from tgfx import config
from tgfx.devices import DEFAULT_DEVICE as DEFAULT_DEVICE  # where constants and host data go (TGFX_DEVICE)
from tgfx.devices import get_device
from tgfx.devices.target import host_target
from tgfx.ir.control import n_bodies
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.spec import check_stage
from tgfx.ir.uop import UOp, prod
from tgfx.lowering.complex import lower_complex, pairs_view
from tgfx.lowering.fusion import _gather, _stored_aranges_apart, find_realizes, made_where_it_goes
from tgfx.lowering.inline import params_of, substitute_outside_calls, walk
from tgfx.lowering.inplace import window_update
from tgfx.lowering.layout import _root_base, _unreshaped, buffer_view, concat_pieces, copy_source, is_concat, new_buffer
from tgfx.lowering.lru import LRU
from tgfx.lowering.multi import group_by_device
from tgfx.lowering.operands import _in_repeated_body, pm_reshape_reduces, pm_transpose_operands
from tgfx.lowering.rangeify import pad_pieces
from tgfx.lowering.split_reduce import split_reduces


def _copied_by_kernel(u: UOp) -> bool:
    """Whether COPY `u` between two devices that share memory (`host_memory`: CPU:0, CPU:1, ...) runs as a kernel on
    the destination that reads the source where it lies, spread over the cores as any kernel is, instead of one
    `memmove` on the copy engine's thread: one that moves at least `min_thread_work` elements a core (64 MB from
    CPU:0 to CPU:1: 8.2 ms as a memmove, 7.2 with numpy's copyto, 4.6 as a kernel on 2 cores). A smaller one stays a
    memmove (no kernel to compile for a small `device_put`)."""
    if u.tag == "in place" or not isinstance(u.arg, str) or not isinstance(u.src[0].device, str) or \
            u.src[0].device == u.arg:
        return False   # (a value of no device yet, a constant, is made where it goes)
    src, dst = get_device(u.src[0].device), get_device(u.arg)
    if not (src.host_memory and dst.host_memory and dst.compiles_on_host):
        return False
    target = host_target()
    return prod(u.shape) >= 2 * target.min_thread_work(max(u.dtype.itemsize, 4)) and target.cores > 1


def kernel_ast(root: UOp, out_buf: UOp, realized: dict[UOp, UOp]) -> tuple[UOp, list[UOp]]:
    """The AST computing `root` into slot 0, and the buffers of its slots."""
    bufs = [out_buf]
    slot: dict[UOp, int] = {out_buf: 0}

    def global_of(buf: UOp) -> UOp:
        if buf not in slot:
            slot[buf] = len(bufs)
            bufs.append(buf)
        if buf.dtype.is_complex:  # read as its (re, im) pairs (tgfx/lowering/complex.py)
            g = UOp(Ops.DEFINE_GLOBAL, buf.dtype.real, (), (slot[buf], 2 * buf.arg[2]))
            return UOp(Ops.RESHAPE, g.dtype, (g,), (buf.arg[2], 2))
        return UOp(Ops.DEFINE_GLOBAL, buf.dtype, (), (slot[buf], buf.arg[2]))

    new: dict[UOp, UOp] = {}
    stack: list[tuple[UOp, bool]] = [(root, False)]
    while stack:
        u, ready = stack.pop()
        if u in new:
            continue
        if u is not root and u in realized:
            g = global_of(realized[u])
            new[u] = UOp(Ops.RESHAPE, g.dtype, (g,), u.shape if not u.dtype.is_complex else (*u.shape, 2))
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
        if u.op in (Ops.CONTIGUOUS, Ops.COPY, Ops.AS_COMPLEX, Ops.AS_PAIRS):
            # materialisation is this kernel's store; an in-place read of another device's memory reads its buffer;
            # a complex value is its pairs here
            new[u] = src[0]
        elif u.dtype is not None and u.dtype.is_complex and u.op in GroupOp.Movement:
            new[u] = pairs_view(u, src[0])   # a result's view of a stored complex value: a view of its pairs
        else:
            new[u] = u if src == u.src else u.replace(src=src)
    value = new[root]
    out = UOp(Ops.DEFINE_GLOBAL, out_buf.dtype.real, (), (0, out_buf.arg[2] * (2 if out_buf.dtype.is_complex else 1)))
    return UOp(Ops.SINK, None, (UOp(Ops.STORE, None, (out, value)),)), bufs


def schedule(roots: list[UOp]) -> tuple[UOp, dict[UOp, UOp]]:
    """LINEAR of CALLs computing `roots`, and each root's result as a view of a buffer."""
    given = roots
    # complex values are computed as their (re, im) pairs: no kernel sees a complex type
    roots = lower_complex(roots)
    roots = list(graph_rewrite(UOp(Ops.SINK, None, tuple(roots)), pm_reshape_reduces, name="reshape reduces").src)
    # a sum with too few outputs for the cores is partial sums of its reduce's parts, and their sum: before the
    # operands' copies, which a part's share in cache does without (`x.T @ y` of (65536, 32): x packed, 1.9 ms; not,
    # 0.8)
    roots = split_reduces(roots, host_target())
    roots = list(graph_rewrite(UOp(Ops.SINK, None, tuple(roots)), pm_transpose_operands, name="transpose").src)
    # a result that is another device's value read in place is materialised by its COPY (an alias where it can be)
    roots = [r.src[0] if r.op is Ops.CONTIGUOUS and r.src[0].op is Ops.COPY and r.src[0].tag == "in place" else r
             for r in roots]
    roots = _stored_aranges_apart(roots)
    realize = find_realizes(roots)
    results_of = {_root_base(r) for r in roots}
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
        if u.op is Ops.COPY and (made_where_it_goes(u) or _copied_by_kernel(u)):
            out = realized[u] = new_buffer(u.arg, prod(u.shape), u.dtype)
            # (a kernel on the destination computing a constant, or reading the source in place)
            ast, bufs = kernel_ast(u, out, realized)
            calls.append(UOp(Ops.CALL, None, (ast, *bufs)))
            continue
        if u.op is Ops.COPY:
            base, off = copy_source(u.src[0])
            src_buf = base if base.op is Ops.BUFFER else realized[base]
            dst = new_buffer(u.arg, prod(u.shape), u.dtype)
            nbytes, offset = dst.arg[2] * u.dtype.itemsize, off * u.dtype.itemsize
            # a result read in place from memory this device shares, and computed here, is that memory (an alias)
            alias = u.tag == "in place" and u in results_of and base.op is not Ops.BUFFER and off == 0 and \
                prod(base.shape) == dst.arg[2]
            calls.append(UOp(Ops.CALL, None, (UOp(Ops.COPY, None, (), (nbytes, offset, 0), tag="alias" if alias else
                                                  None), dst, src_buf)))
            realized[u] = dst
            continue
        if u.op is Ops.NETWORK:  # the network engine runs it on (out, in)
            dst = realized[u] = new_buffer(u.device, prod(u.shape), u.dtype)
            src = buffer_view(u.src[0]) or realized[u.src[0]]
            calls.append(UOp(Ops.CALL, None, (UOp(Ops.NETWORK, None, (), u.arg), dst, src)))
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
        if u.op is Ops.CONTIGUOUS and (base := _unreshaped(u.src[0])) in realized:
            # (a reshape of a stored value is its buffer: an embedding table's gradient, its scatter's (1, rows,
            # width) stored as (rows, width), was copied, 1.5 ms for 32,000 x 256)
            realized[u] = realized[base]
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
    calls = group_by_device(merge_siblings(calls))
    # an alias of memory that is no result would be memory the program reuses: copied instead
    kept = {buffer_view(r) for r in results.values()}
    calls = [c.replace(src=(c.src[0].replace(tag=None), *c.src[1:])) if is_alias(c) and c.src[2] not in kept else c
             for c in calls]
    return UOp(Ops.LINEAR, None, tuple(calls)), results


# at most this many outputs one kernel of merged siblings stores (each is a stream of the loop and the registers of
# its pending values)
SIBLING_OUTPUTS = 4


def _elementwise_outputs(call: UOp) -> tuple[int, ...] | None:
    """The output shape of a kernel that stores whole elementwise values (no reduce but gathers, no window), else
    None."""
    ast = call.src[0]
    if ast.op is not Ops.SINK or isinstance(ast.arg, str) or \
            any(st.op is not Ops.STORE or st.src[0].op is not Ops.DEFINE_GLOBAL for st in ast.src):
        return None
    shapes = {st.src[1].shape for st in ast.src}
    if len(shapes) != 1 or any(u.op is Ops.REDUCE_AXIS and not _gather(u) for u in ast.toposort()) or \
            (len(ast.src) == 1 and window_update(ast) is not None) or any(pad_pieces(st.src[1]) for st in ast.src):
        return None   # (a gather is one load an element; a window update may run in place, storing the window alone;
        # a concatenation is stored piece by piece, each its own loop, which no other output shares)
    return shapes.pop()


def _written(call: UOp) -> list[UOp] | None:
    """The buffers a command of `schedule` writes (`control.writes`), None for one that is not a kernel or a copy: a
    loop's or a branch's, which `merge_siblings` does not move anything past."""
    from tgfx.lowering.control import writes
    return writes(call) if call.src[0].op in (Ops.SINK, Ops.COPY, Ops.NETWORK) else None   # (a callback: None)


def _into_slots(ast: UOp, call: UOp, bufs: list[UOp]) -> UOp:
    """`ast` (of kernel `call`, or some of its stores) with each buffer slot renumbered to that buffer's place in
    `bufs`, which takes the buffers it lacks at its end."""
    renumber = {}
    for g in (u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL):
        if (buf := call.src[1 + g.arg[0]]) not in bufs:
            bufs.append(buf)
        renumber[g] = g.replace(arg=(bufs.index(buf), *g.arg[1:]))
    return ast.substitute(renumber)


def _merged(a: UOp, b: UOp) -> UOp | None:
    """Kernel `a` storing `b`'s outputs too: b's buffers renumbered into a's slots, and what b reads of a's outputs
    element for element (its own element: a view of the same shape) taken from the value a stores, not loaded back.
    None where b reads one of a's outputs otherwise (another element's)."""
    bufs = list(a.src[1:])
    b_ast = _into_slots(b.src[0], b, bufs)
    stored = {st.src[0]: st.src[1] for st in a.src[0].src}   # a's output globals -> the values it stores there
    nodes = b_ast.toposort()
    if any(u in stored for u in nodes):
        own: dict[UOp, UOp] = {}
        for g, value in stored.items():
            for u in (u for u in nodes if g in u.src):
                if u.op is not Ops.RESHAPE or u.shape != value.shape or u.dtype != value.dtype or \
                        any(u in v.src and v.op in GroupOp.Movement for v in nodes):
                    return None   # (another element's: its value computed again there, or loaded)
                own[u] = value
        b_ast = b_ast.substitute(own)   # (a's outputs are a's slots already: no buffer was added for them)
    ast = UOp(Ops.SINK, None, (*a.src[0].src, *b_ast.src), a.src[0].arg)
    return UOp(Ops.CALL, None, (ast, *bufs))


def merge_siblings(calls: list[UOp]) -> list[UOp]:
    """Elementwise kernels of the same output shape on one device, as one kernel storing each output: what they read
    in common is read once, and what they compute in common computed once (a bitonic sort's pass updates its keys and
    their positions from the same compares, Adam its moments and its parameters from the same gradient, an LSTM cell
    its state and its output from the state). A kernel is merged into an earlier one that reads a buffer it reads too
    (unrelated values merged by shape alone made kernels that differ with a network's depth), or that stores what it
    reads element for element (`_merged`), when nothing between them writes what it reads (it runs earlier then); up
    to SIBLING_OUTPUTS outputs a kernel."""
    out: list[tuple[UOp, tuple[int, ...] | None, list[UOp] | None]] = []   # (command, its shape, what it writes)
    for c in calls:
        shape = _elementwise_outputs(c)
        merged = None
        if shape is not None:
            reads = set(c.src[1:])
            for i in range(len(out) - 1, -1, -1):
                prev, prev_shape, written = out[i]
                if written is None:
                    break
                if prev_shape == shape and prev.src[1].arg[1] == c.src[1].arg[1] and \
                        len(prev.src[0].src) < SIBLING_OUTPUTS and reads & set(prev.src[1:]) and \
                        (merged := _merged(prev, c)) is not None:
                    out[i] = (merged, shape, written + _written(c))
                    break
                if reads & set(written):
                    break
        if merged is None:
            out.append((c, shape, _written(c)))
    return [c for c, _, _ in out]


def kernel_of_stores(stores: list[UOp], call: UOp) -> UOp:
    """A kernel CALL storing `stores` (some of kernel `call`'s), its buffers renumbered to those they use."""
    bufs: list[UOp] = []
    sink = _into_slots(UOp(Ops.SINK, None, tuple(stores), call.src[0].arg), call, bufs)
    return UOp(Ops.CALL, None, (sink, *bufs))


def is_alias(call: UOp) -> bool:
    """Whether LINEAR command `call` is a COPY whose destination is its source's memory, seen from the destination's
    device (which shares it): no bytes move, the destination's device waits for the source's writer."""
    return call.src[0].op is Ops.COPY and call.src[0].tag == "alias"


def _arg_buffer(a: UOp, realized: dict[UOp, UOp]) -> UOp:
    return buffer_view(a) or realized[a]


def schedule_call(call: UOp, realized: dict[UOp, UOp]) -> list[UOp]:
    """An opaque CALL: a custom kernel runs as written; a precompiled function replays its cached schedule."""
    args = [_arg_buffer(a, realized) for a in call.src[1:]]
    body = call.src[0]
    outs = call_outputs(call)
    if body.op is Ops.SINK:  # a custom kernel: outputs take the first slots, then the inputs
        if not body.src:   # custom kernels store something; forward mode's loop placeholder is never evaluated
            raise RuntimeError(f"internal error: {body.arg} has no kernel to run (a forward-mode placeholder was "
                               f"evaluated); please report the program")
        out_bufs = [new_buffer(dev, prod(shape), dt) for shape, dt, dev in outs]
        for i, b in enumerate(out_bufs):
            realized[UOp(Ops.GETTUPLE, b.dtype, (call,), i)] = b
        return [UOp(Ops.CALL, None, (body, *out_bufs, *args))]
    if body.op is Ops.CALLBACK:   # a host callback: the processor runs it on (results, [token], arguments)
        out_bufs = [new_buffer(dev, prod(shape), dt) for shape, dt, dev in outs]
        for i, b in enumerate(out_bufs):
            realized[UOp(Ops.GETTUPLE, b.dtype, (call,), i)] = b
        return [UOp(Ops.CALL, None, (body, *out_bufs, *args), call.arg[3])]
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
    if body.op in (Ops.SINK, Ops.CALLBACK):
        return list(call.arg[2])
    return [(r.shape, r.dtype, r.device or DEFAULT_DEVICE) for r in body.src]


# ---- schedule templates: a schedule computed once per graph key, replayed with other buffers ----
def placeholder(slot: int, dtype, device: str, size: int) -> UOp:  # noqa: ANN001
    """An input buffer by position; its uid is fixed, so a graph's key does not depend on which buffers it reads."""
    return UOp(Ops.BUFFER, dtype, (), (-1 - slot, device, size))


class ScheduleTemplate:
    """The LINEAR for a graph whose inputs are placeholders; `instantiate` binds real buffers and fresh outputs."""

    def __init__(self, roots: list[UOp], n_inputs: int, key: str = "") -> None:
        self.key = key       # its entry in `_templates`
        self.roots = roots   # kept alive: the same graph built again is these nodes, their keys already computed
        # its eager programs by kernel-option mode (eager_program), while the eager program cache keeps them
        self.programs: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self.linear, results = schedule(roots)
        if config.SPEC:
            check_stage(self.linear, "linear")
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


# by graph key; an evicted template's eager programs are released with it, once no submission still runs them
_templates: LRU[str, ScheduleTemplate] = LRU(lambda: int(config.SCHEDULE_CACHE_SIZE))


def _cached_template(key: str, roots: list[UOp] | Callable[[], list[UOp]], n_inputs: int,
                     check: Callable[[], None] | None = None) -> ScheduleTemplate:
    # the schedule reads the target (vector widths: _transposed_operand); the input count is no part of the graph
    # where an input is read by nothing once the graph is inlined (a function's unused argument), yet the programs
    # kept on the template take their output slots after that many inputs. `check` runs before a new one is made,
    # and `roots`, when it is a function, only then: a template found needs no graph
    key = f"{key}|{n_inputs}|{host_target().key}"
    tpl = _templates.get(key)
    if tpl is None:
        if check is not None:
            check()
        tpl = _templates.setdefault(key, ScheduleTemplate(roots() if callable(roots) else roots, n_inputs, key))
    return tpl


def _only_params(body: UOp) -> None:
    """SPEC: a body holds only PARAMs. A template is scheduled once for every call of its body, so a buffer in it
    would be one of the template's own and read as zeros (three of a differential check's silent zero gradients
    were): a transform that builds a body must make such a value one of its arguments."""
    if (buf := next((u for u in body.toposort() if u.op is Ops.BUFFER), None)) is not None:
        raise RuntimeError(f"internal error: the body of a function, loop or branch holds a concrete buffer "
                           f"({buf.dtype.name}[{buf.arg[2]}] on {buf.arg[1]}) where it may only read its PARAMs; "
                           f"please report it with the program that raised it")


def template_of(body: UOp, repeated: bool = False) -> ScheduleTemplate:
    """The cached schedule of a precompiled function's body, its PARAMs bound to placeholders by slot. `repeated`: the
    body of a loop or a branch (tgfx/lowering/control.py). A loop's kernels that read only its constants run once,
    before it, so there a contraction's vector operand is packed by a kernel of its own (run once for a constant),
    not copied panel by panel by the contraction's kernel every step (`_copies_own_panels`); a branch's body is
    scheduled the same way (a body may be both)."""
    params = params_of(body)

    def roots() -> list[UOp]:   # (only for a template not made before: a loop's body is scheduled for each of the
        # two steps of its round trip, the second finding the first's template)
        mapping = {p: UOp(Ops.RESHAPE, p.dtype, (placeholder(k, p.dtype, p.arg[2], prod(p.arg[1])),), p.arg[1])
                   if p.arg[1] != (prod(p.arg[1]),) else placeholder(k, p.dtype, p.arg[2], prod(p.arg[1]))
                   for k, p in params.items()}
        # the body (a TUPLE, whose walk `params_of` kept on it) substituted at once: root by root, the nodes its
        # results share were walked once per result (a GMM's EM loop body: 15 templates, 8% of its first call)
        return list(substitute_outside_calls(body, mapping).src)
    token = _in_repeated_body.set(repeated or _in_repeated_body.get())
    try:
        return _cached_template(("body:" if _in_repeated_body.get() else "call:") + body.key, roots, len(params),
                                lambda: _only_params(body))
    finally:
        _in_repeated_body.reset(token)


__all__ = ["schedule", "new_buffer", "buffer_view"]
