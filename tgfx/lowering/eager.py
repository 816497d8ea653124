"""eager: the schedule of a graph realised eagerly, found from one walk over it.

Each eager step builds new nodes over new buffers and new scalar values, and mostly the graphs of the step before.
`describe` walks a graph once, sources first, and returns its nodes, the buffers it reads (its inputs, and the
interned buffers of its lifted constants: `tgfx/lowering/constants.py`) and a description of it that names neither
which buffers nor which constant values: the same for every step. A description seen before finds its template
(`graph_template`) by one dict lookup, and the template's program is run with this call's buffers: no abstract
graph, no content hash, no schedule, no compile. A new description builds the abstract graph (placeholders for the
buffers and the lifted constants), which is scheduled once per content key.
"""
from __future__ import annotations

from collections.abc import Callable

from tgfx import config
from tgfx.ir.control import BODIED, n_bodies
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp, arg_key
from tgfx.lowering.constants import const_buffer, is_lifted, is_runtime_constant, view_chain
from tgfx.lowering.lru import LRU
from tgfx.lowering.optimize import forced_opts
from tgfx.lowering.schedule import DEFAULT_DEVICE, ScheduleTemplate, _cached_template, _templates, placeholder

# (the walk reads these once per node)
_CONST, _COPY, _SINK, _BUFFER, _RESHAPE = Ops.CONST, Ops.COPY, Ops.SINK, Ops.BUFFER, Ops.RESHAPE
_MOVEMENT = GroupOp.Movement
_DYNAMIC = GroupOp.DynamicView
# what only the stages before scheduling handle: an eager graph without them (most are) goes straight to its template
_FRONT = frozenset({Ops.FUNCTION, Ops.GETTUPLE, Ops.PARAM, Ops.MULTI, Ops.LOOP, Ops.SWITCH, Ops.CALL, Ops.ALLREDUCE,
                    Ops.MSELECT, Ops.MSTACK})
# how `describe` takes a node, by its op (one lookup; an op not named here is described as it is)
_VIEW, _STORED, _OFFSETS, _IOTA, _OTHER = range(5)
_KIND = {**{op: _VIEW for op in _MOVEMENT}, Ops.BUFFER: _STORED, **{op: _OFFSETS for op in _DYNAMIC},
         Ops.IOTA: _IOTA, **{op: _OTHER for op in _FRONT | {Ops.COPY}}}


class Description:
    """A graph as `describe` found it: `nodes`, its walk (sources first, bodies not entered, its SINK last);
    `inputs`, the buffers its placeholders stand for, in order; `device`, the one device it computes on (None:
    several, and then no constant is lifted); `key`, what its template is found by; `front`, the ops in it that only
    the stages before scheduling handle (calls, sharded values, a COPY that shards); `at`, each node's number;
    `iota`, whether it has an IOTA (an arange). Constants and their views are no nodes of it (see `describe`)."""

    __slots__ = ("nodes", "inputs", "device", "key", "front", "at", "iota")

    def __init__(self, nodes: list[UOp], inputs: list[UOp], device: str | None, key: tuple, front: set[Ops],
                 at: dict[UOp, int], iota: bool) -> None:
        self.nodes, self.inputs, self.device, self.key, self.front, self.at = nodes, inputs, device, key, front, at
        self.iota = iota

    def resink(self, sink: UOp) -> Description | None:
        """The description of `sink`, a SINK of more roots in this graph (the siblings `Tensor.realize` found), without
        walking it again: the same nodes and inputs, another SINK. None where that is not so (a root of either is a
        constant or a view of one, or one is no node of the graph): describe `sink` then."""
        at, old = self.at, self.nodes[-1].src
        refs = [at.get(r) for r in sink.src]
        if None in refs or any(r not in at for r in old):
            return None
        key = self.key[:len(self.key) - 5 - len(old)] + (_SINK, None, None, None, len(refs), *refs)
        return Description([*self.nodes[:-1], sink], self.inputs, self.device, key, self.front, at, self.iota)


def describe(sink: UOp, lift: bool = True) -> Description:
    """Walk the graph of `sink` once, in `walk`'s order (`tgfx/lowering/inline.py`), and describe it: one entry
    per node, the node itself where the abstraction keeps it (a buffer of a template), else its op, dtype, arg, tag,
    bodies and its sources by position. A constant and its views (`x * 2.0`: CONST, RESHAPE, EXPAND) are no nodes of
    the walk: each source that is one is described where it is read, by its dtype and views, and by its value where
    the abstraction keeps it. A lifted one is an argument of its own (each use one: the graph must not depend on
    which values are equal).

    A graph on one device lifts its constants (`lift`), and the start of a dynamic view (DYNAMIC_SHRINK, DYNAMIC_PAD)
    whatever its value; a graph across several devices lifts none (a constant's buffer lives on one device)."""
    if lift and len(sink.src) == 1 and (d := _describe_op(sink)) is not None:
        return d
    return walk_described(sink, lift)


def walk_described(sink: UOp, lift: bool = True) -> Description:
    """`describe(sink)` by the walk, for every graph."""
    nodes: list[UOp] = []
    desc: list = []               # the entries, flat: per node its op, dtype, arg, tag, source count, then sources
    at: dict[UOp, int] = {}       # a described node -> its number
    inputs: list[UOp] = []
    consts: list[int] = []        # the inputs that are lifted constants (their buffers are found at the end)
    device: str | None = None
    several = False
    front: set[Ops] = set()
    iota = False
    seen: set[UOp] = set()
    add, append, emit, extend = seen.add, nodes.append, desc.append, desc.extend
    # the walk of `UOp._toposort`, unrolled: a node is pushed again above a mark (None), then its unseen sources; a
    # buffer is described when it is reached, a constant or a view of one where it is read
    stack: list[UOp | None] = [sink]
    pop, push = stack.pop, stack.append
    while stack:
        u = pop()
        if u is None:
            u = pop()
        elif u in seen:
            continue
        else:
            add(u)
            if (op := u.op) is _CONST:
                continue
            if op in _MOVEMENT:   # (a scalar broadcast, EXPAND of RESHAPE of CONST, is seen here; a longer view of a
                v = u.src[0]      # constant where it is described)
                if v.op is _CONST or v.op in _MOVEMENT and v.src[0].op is _CONST:
                    continue
            if u.src:
                push(u)
                push(None)
                for s in reversed(u.src if u.op not in BODIED else u.src[n_bodies(u):]):
                    if s not in seen:
                        push(s)
                continue
        append(u)
        op, a, src = u.op, u.arg, u.src
        kind = _KIND.get(op)
        offsets = False
        if kind is None:   # (most nodes: elementwise ops, reduces)
            if type(a) is float or type(a) is complex:
                a = arg_key(a)
        elif kind is _VIEW:
            if src[0] not in at:   # a view of a constant (or of a view of one)
                nodes.pop()
                continue
        elif kind is _STORED:
            at[u] = len(at)
            if a[1] is not device:
                if device is None:
                    device = a[1]
                elif a[1] != device:
                    several = True
            if a[0] >= 0:   # a placeholder: which buffer it is is no part of the description
                extend((op, u.dtype, a[1], a[2], -1))
                inputs.append(u)
            else:           # a template's own buffer
                extend((u, -1))
            continue
        elif kind is _OFFSETS:
            offsets = lift
        elif kind is _IOTA:
            iota = True
        elif op is _COPY:
            if isinstance(a, str):
                if a is not device:
                    if device is None:
                        device = a
                    elif a != device:
                        several = True
            else:   # to a device tuple
                several = True
                front.add(op)
        else:
            front.add(op)
            if op in BODIED:   # its bodies by identity (with its arg): a call seen before is not inlined again
                nb = n_bodies(u)
                a, src = (a, *src[:nb]), src[nb:]
        at[u] = len(at)
        extend((op, u.dtype, a, u.tag, len(src)))
        for x in src:
            if (r := at.get(x)) is not None:
                emit(r)
                continue
            # a constant or a view of one: its dtype and views, and its value unless it is an argument (a lifted
            # constant, or a dynamic view's start)
            c, views = x, []
            while c.op in _MOVEMENT:
                views.append((c.op, c.arg, c.tag))
                c = c.src[0]
            if lift and c.tag is None and (c.dtype.kind in "fiu" and c.arg not in (0, 1) or
                                           offsets and x is not src[0] and c.dtype.kind in "iu"):
                emit(("argument", c.dtype, *views))
                consts.append(len(inputs))
                inputs.append(c)
            else:   # (a literal's tag is no part of the graph: it is a plain CONST there)
                emit(("constant", c.dtype, arg_key(c.arg), *views))
    if several:
        if consts and lift:   # described as one device's graph: again, lifting nothing
            return walk_described(sink, lift=False)
        device = None
    elif device is None:      # a graph of constants alone runs on the default device
        device = DEFAULT_DEVICE
    for i in consts:
        c = inputs[i]
        inputs[i] = const_buffer(c.dtype, c.arg, device, i)
    return Description(nodes, inputs, device, (dispatch_mode(), device, *desc), front, at, iota)


def _describe_op(sink: UOp) -> Description | None:
    """`describe(sink)` of the commonest eager graphs, one root that is ops over buffers of one device, views of them
    and constants (`x + 1`, `a @ b`, `mean(x * y + 1)`), or views of one buffer (`a.T`), by recursion instead of
    the walk's stack: the same description in the walk's order (each source's subgraph in turn, then the node, its
    constants described where they are read, then the SINK), in three quarters of the bytecodes. None for any
    other graph (a call, a copy, an arange, a dynamic view, buffers of several devices, deeper than `_DEEPEST`): the
    walk describes those."""
    top = sink.src[0]
    at: dict[UOp, int] = {}
    nodes: list[UOp] = []
    inputs: list[UOp] = []
    consts: list[int] = []
    desc: list = []
    device: list[str] = []
    if top.op is _BUFFER or not _entries(top, 0, at, nodes, inputs, consts, desc, device):
        return None
    dev = device[0] if device else DEFAULT_DEVICE
    for i in consts:   # (made once the device is known, as the walk makes them)
        c = inputs[i]
        inputs[i] = const_buffer(c.dtype, c.arg, dev, i)
    desc.extend((_SINK, sink.dtype, sink.arg, sink.tag, 1, at[top]))
    at[sink] = len(nodes)
    nodes.append(sink)
    return Description(nodes, inputs, dev, (dispatch_mode(), dev, *desc), set(), at, False)


_LEAVES = _MOVEMENT | {Ops.BUFFER, Ops.CONST}   # what the sources of an `op_signature` op may be
_DEEPEST = 64   # nodes deep that `_describe_op` recurses (a lazy chain is computed at 32: `tensor.LAZY_DEPTH`)


def _entries(u: UOp, depth: int, at: dict[UOp, int], nodes: list[UOp], inputs: list[UOp], consts: list[int],
             desc: list, device: list[str]) -> bool:
    """For `_describe_op`: describe `u` (a view or an op, not yet described, not a constant or a view of one) after
    its sources, as the walk does, into the walk's `at`, `nodes`, `inputs` (a lifted constant's node, its index in
    `consts`) and entries `desc`; `device`, the buffers' one device once one is seen. False where the walk must
    describe the graph."""
    op, src = u.op, u.src
    if op in _MOVEMENT:
        if len(src) != 1 or depth > _DEEPEST:
            return False
        s = src[0]
        if s not in at:
            if s.op is _BUFFER:
                if not _buffer_entry(s, at, nodes, inputs, desc, device):
                    return False
            elif not _entries(s, depth + 1, at, nodes, inputs, consts, desc, device):
                return False
        desc.extend((op, u.dtype, u.arg, u.tag, 1, at[s]))
    else:
        if op in _KIND or op is _CONST or not src or depth > _DEEPEST:
            return False
        for s in src:   # each source's subgraph in turn (a constant, or a view of one, is read where it is)
            if s in at:
                continue
            if s.op is _BUFFER:   # (`_buffer_entry`, inlined: most ops read a buffer)
                a = s.arg
                if a[0] < 0 or device and a[1] != device[0]:
                    return False
                if not device:
                    device.append(a[1])
                at[s] = len(nodes)
                nodes.append(s)
                inputs.append(s)
                desc.extend((_BUFFER, s.dtype, a[1], a[2], -1))
                continue
            c = s
            while c.op in _MOVEMENT:
                c = c.src[0]
            if c.op is not _CONST and not _entries(s, depth + 1, at, nodes, inputs, consts, desc, device):
                return False
        a = u.arg
        if type(a) is float or type(a) is complex:
            a = arg_key(a)
        desc.extend((op, u.dtype, a, u.tag, len(src)))
        for s in src:
            if (i := at.get(s)) is not None:
                desc.append(i)
                continue
            c, views = s, []
            while c.op in _MOVEMENT:
                views.append((c.op, c.arg, c.tag))
                c = c.src[0]
            if c.tag is None and c.dtype.kind in "fiu" and c.arg not in (0, 1):   # (`is_runtime_constant`, inlined)
                desc.append(("argument", c.dtype, *views))
                consts.append(len(inputs))
                inputs.append(c)
            else:   # (its arg as `arg_key` keys it, without the call for most values)
                a = c.arg
                desc.append(("constant", c.dtype, arg_key(a) if type(a) is complex or type(a) is float and a == 0.0
                             else a, *views))
    at[u] = len(nodes)
    nodes.append(u)
    return True


def _buffer_entry(b: UOp, at: dict[UOp, int], nodes: list[UOp], inputs: list[UOp], desc: list,
                  device: list[str]) -> bool:
    """Describe BUFFER `b` as the walk does: a placeholder of the abstraction, on the graph's one device; False for a
    template's own buffer or a second device."""
    a = b.arg
    if a[0] < 0 or device and a[1] != device[0]:
        return False
    if not device:
        device.append(a[1])
    at[b] = len(nodes)
    nodes.append(b)
    inputs.append(b)
    desc.extend((_BUFFER, b.dtype, a[1], a[2], -1))
    return True


def op_signature(u: UOp) -> tuple[tuple, list[UOp], list[int]] | None:
    """What an eager op's program depends on, found without describing its graph, for a chain of ops: each op's
    sources are buffers of one device, reshapes of them, constants and at most one op (or a reshape of one's result):
    `x + 1`, `exp(x)`, `i * 3 + 1`, `where(x > 0, x, y)`, `mean(x * y + 1)`. Its signature (per op: op, dtype, arg,
    tag, and per source its view, dtype and size, or which buffer before it it reads again, or its constant's entry,
    or the op's signature; the device) tells apart exactly what `describe`'s key does for such a graph: one
    signature, one program. With it: the inputs in `describe`'s order (each buffer where the walk first reads it, each
    lifted constant's CONST after its op's sources) and where the CONSTs are. None for any other graph (an op reading
    two ops, constants alone, several devices, a view other than a reshape): `describe` it."""
    if (noted := u.__dict__.get("op_signature")) is not None:   # (noted where the graph was built: `note_signature`)
        return noted[0], list(noted[1]), noted[2]
    if u.op in _COPY_VIEWS:   # a view of one buffer that no range of it is (`a.T`): its views, then the buffer's
        e = _const_entry(u)    # entry, as `describe` enters them
        if not e or e[0][0] is not _VIEWED or (b := e[1].arg)[0] < 0:
            return None
        return (e[0], e[1].dtype, b[2], b[1]), [e[1]], []
    sig: list = []
    inputs: list[UOp] = []
    consts: list[int] = []
    device: list[str] = []
    if not _chain_entries(u, 0, sig, inputs, consts, device) or not device:   # (constants alone: `describe` them)
        return None
    sig.append(device[0])
    return tuple(sig), inputs, consts


# the signatures of graphs that a fast path builds in one form for a given shape key (an eager product's), by the
# fast path's key: the nodes are new at every call, their signature is found once per key
_noted: dict[tuple, tuple] = {}
NOTED_KEPT = 256


def note_signature(u: UOp, shape_key: tuple, inputs: list[UOp]) -> None:
    """Note on `u`, a graph a fast path just built, its `op_signature`, for `realize` to read instead of walking the
    graph again. `shape_key` must determine the graph's form apart from its input buffers (the same key, the same
    nodes over other buffers of the same dtype, size and device), and begin with the fast path's name; `inputs` are
    those buffers, in the order `describe` enters them. The first graph of a key is walked: a chain of ops is noted
    with the chain's signature; another graph over buffers alone (a join's: ops reading two ops) with the key itself
    as its signature, which then stands for its description (one form, one program), without a walk at every read.
    Its inputs are checked against `inputs`: a key whose graph differs (a constant lifted as an argument, another
    order) notes nothing. (`a @ b` of 4 x 4 matrices: its seven nodes' walk was 2.5 of the product's 19 us; a stack
    of three vectors was described, 6.7 us, and scheduled as a new graph.)"""
    if (known := _noted.get(shape_key)) is None:
        if (found := op_signature(u)) is None:
            d = describe(UOp(Ops.SINK, None, (u,)))
            if d.device is not None and not d.front and all(b.op is _BUFFER for b in d.inputs):
                found = (("noted", shape_key, d.device), d.inputs, [])
        if len(_noted) >= NOTED_KEPT:
            _noted.clear()
        # (a key that notes nothing is remembered as such: it is not walked again at every call)
        known = _noted[shape_key] = (found[0], found[2]) if found is not None and found[1] == inputs else ()
    if known:
        u.__dict__["op_signature"] = (known[0], inputs, known[1])


# the views `op_signature` takes as a graph's root: a kernel copies them (a RESHAPE or a SHRINK may be a range of the
# buffer, which `realize` reads without one)
_COPY_VIEWS = frozenset({Ops.PERMUTE, Ops.FLIP, Ops.EXPAND, Ops.PAD})


_CHAIN_DEPTH = 16   # ops deep that `op_signature` follows a chain (a longer one is described)


def _chain_entries(u: UOp, depth: int, sig: list, inputs: list[UOp], consts: list[int], device: list[str]) -> bool:
    """For `op_signature`: the entries of `u` (an op, or a reshape of one's result) into `sig`, its buffers and
    lifted constants into `inputs` in `_entries`'s order; False where the graph is no chain of ops."""
    if u.op is _RESHAPE and u.src[0].op not in _KIND and u.src[0].op is not _CONST:
        sig.append((_RESHAPE, u.arg, u.tag))   # (a result viewed in another shape: not a range of a buffer)
        u = u.src[0]
    op, src = u.op, u.src
    if op in _KIND or op is _CONST or not src or depth > _CHAIN_DEPTH:
        return False
    a = u.arg
    sig.append((op, u.dtype, arg_key(a) if type(a) is float or type(a) is complex else a, u.tag, len(src)))
    later = []   # its constants' entries, entered after its buffers and its op (`_entries`' second loop)
    called = False
    for s in src:   # its buffers and the op it reads, in order (`_entries`' first loop)
        view = None
        if s.op is not _BUFFER:
            # how it is entered, cached on it (a broadcast scalar's nodes are kept: most are found here)
            if (e := s.__dict__.get("eager_entry")) is None:
                e = s.__dict__["eager_entry"] = True if s.op not in _MOVEMENT and s.op is not _CONST or \
                    s.op is _RESHAPE and s.src[0].op not in _LEAVES else _const_entry(s)
            if e is True:   # an op, or a reshape of its result
                if called or not _chain_entries(s, depth + 1, sig, inputs, consts, device):   # (a second op: none)
                    return False
                called = True
                continue
            if not e:
                return False
            if e[0][0] is not _VIEWED:   # a constant or a view of one: its entry where it is a source (`c / x` is not
                sig.append(e[0])          # `x / c`), its argument after the op's buffers
                later.append(e)
                continue
            view, s = e   # a view of a buffer: a matrix's reshape, a broadcast operand
        b = s.arg
        if b[0] < 0:
            return False
        if not device:
            device.append(b[1])
        elif b[1] != device[0]:
            return False
        if s in inputs:   # (a buffer read twice is one input, `x * x`: not the program of `x * y`)
            sig.append((view, inputs.index(s)))
        else:
            inputs.append(s)
            sig.append((view, s.dtype, b[2]))
    for e in later:
        if e[1] is not None:
            consts.append(len(inputs))
            inputs.append(e[1])
    return True


def chain_ops(u: UOp) -> list[UOp]:
    """The ops of a chain `op_signature` accepted, from `u` down (a reshape of a result is a view of it, not one):
    what a lazy Tensor held elsewhere may be a value of (`tgfx._realize.siblings`)."""
    ops = []
    while True:
        if u.op is _RESHAPE and u.src[0].op not in _KIND and u.src[0].op is not _CONST:
            u = u.src[0]
        ops.append(u)
        for s in u.src:   # (its one op source, as `_chain_entries` tells them)
            if s.op is not _BUFFER and (s.op not in _MOVEMENT and s.op is not _CONST or
                                        s.op is _RESHAPE and s.src[0].op not in _LEAVES):
                u = s
                break
        else:
            return ops


def _const_entry(s: UOp) -> tuple[tuple, UOp | None] | bool:
    """For `op_signature`: how `describe` enters source `s` if it is a constant or a view of one, and its CONST if it
    is lifted (an argument); for a view of a buffer (`a @ b`'s broadcast operands), its views and the BUFFER, marked
    by `_VIEWED`; False for anything else. Cached on the node (a broadcast Python scalar's nodes are kept:
    `_scalar_broadcast`)."""
    c, views = s, []
    while c.op in _MOVEMENT:
        if len(c.src) != 1:
            return False
        views.append((c.op, c.arg, c.tag))
        c = c.src[0]
    if c.op is _BUFFER:
        return (_VIEWED, *views), c
    if c.op is not _CONST:
        return False
    if is_runtime_constant(c):
        return ("argument", c.dtype, *views), c
    return ("constant", c.dtype, arg_key(c.arg), *views), None


_VIEWED = "viewed"   # (`_const_entry` of a view of a buffer)


def dispatch_mode() -> tuple:
    """What an eager graph's schedule and program depend on beside the graph: the kernel-option mode (forced options,
    NOOPT, BEAM) and the target (TGFX_CPU, and whether denormals are flushed: `host_target`)."""
    return (forced_opts(), config.NOOPT.value, config.BEAM.value, config.CPU.value, config.FLUSH_DENORMALS.value)


def graph_template(d: Description, lower: Callable[[UOp], UOp] | None = None) -> ScheduleTemplate:
    """The cached schedule of an inlined graph `describe` described; its placeholders are `d.inputs` by position.
    Its scalar constants are arguments read from interned buffers, so the schedule serves every value; literals are
    plain CONSTs in it.

    A description seen before (an eager step's graph) finds its template by one lookup: the abstract graph is not
    built again with content hashes of every new node (0.6 of an eager MLP step's 5 ms).

    `lower`: what the abstract graph goes through before it is scheduled, for a graph that still calls functions
    (`lowering.realize` inlines them there): the description names each call's body by identity, so a graph seen
    before is not inlined again (an eager `solve` of a 16 x 16 matrix spent 0.3 of its 0.4 ms inlining its body)."""
    if (key := _template_keys.get(d.key)) is not None and (tpl := _templates.get(key)) is not None:
        return tpl
    inputs, abstract = abstract_graph(d.nodes, d.device)
    assert inputs == d.inputs, "an eager graph's abstraction reads other buffers than its description names"
    if lower is not None:
        abstract = lower(abstract)
    tpl = _cached_template("graph:" + abstract.key, list(abstract.src), len(inputs))
    _template_keys[d.key] = tpl.key
    return tpl


# an eager graph's description (`Description.key`) -> its template's key in `schedule._templates`
_template_keys: LRU[tuple, str] = LRU(lambda: int(config.SCHEDULE_CACHE_SIZE))


def abstract_graph(nodes: list[UOp], device: str | None) -> tuple[list[UOp], UOp]:
    """The abstraction of a graph (`nodes`: its walk, its SINK last; constants and their views may be among them or
    not) that `describe` describes: placeholders for the buffers it reads and for each use of a lifted constant
    (`device`: the graph's one device, None to lift none), literals plain constants, the rest as it is; returns the
    buffers and constants' buffers the placeholders stand for, in order, and the graph."""
    inputs: list[UOp] = []
    new: dict[UOp, UOp] = {}

    def argument(buf: UOp) -> UOp:
        inputs.append(buf)
        return placeholder(len(inputs) - 1, buf.dtype, buf.arg[1], buf.arg[2])
    for u in nodes:
        if view_chain(u)[1].op is _CONST:   # a constant or a view of one: built where it is read
            continue
        if u.op is Ops.BUFFER:
            new[u] = argument(u) if u.arg[0] >= 0 else u
            continue
        nb = n_bodies(u) if u.op in BODIED else 0
        src = list(u.src[:nb])
        for j, x in enumerate(u.src[nb:]):
            if (y := new.get(x)) is not None:
                src.append(y)
                continue
            chain, c = view_chain(x)
            if device is not None and (is_runtime_constant(c) or j > 0 and u.op in _DYNAMIC and is_lifted(c, True)):
                y = UOp(Ops.RESHAPE, c.dtype, (argument(const_buffer(c.dtype, c.arg, device, len(inputs))),), ())
            elif c.tag is not None:   # a literal
                y = c.replace(tag=None)
            else:
                y = c
            for m in reversed(chain):
                y = m.replace(src=(y, *m.src[1:]))
            src.append(y)
        new[u] = u if tuple(src) == u.src else u.replace(src=tuple(src))
    return inputs, new[nodes[-1]]
