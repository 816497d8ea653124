"""Computing lazy Tensors: `realize` (several in one schedule, with the lazy Tensors still held that are values of
the same graph: `siblings`), and what keeps that safe while other threads donate buffers (`DonationLog`,
`realize_readers`); `block_until_ready` and `device_get` over pytrees. `tgfx.tensor` builds the Tensors; this module
computes them (tensor.py imports `realize` at its end: it builds on Tensor)."""
from __future__ import annotations

import _thread
import os
import weakref
from _thread import allocate_lock as _allocate_lock
from _thread import get_ident as _get_ident
from collections import deque
from collections.abc import Collection, Sequence
from typing import Any

from tgfx import forksafe
from tgfx.devices import runtime
from tgfx.devices.hcq import refuse_in_forked_child
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, prod
from tgfx.lowering import layout, realize_op
from tgfx.lowering import realize as lower_realize
from tgfx.lowering.eager import Description, chain_ops, describe, op_signature
from tgfx.lowering.execute import RANGE_OPS, range_view
from tgfx.lowering.inline import EscapedTracerError, outside_bodies, substitute_outside_calls, walk
from tgfx.placement import carry, mark, marked
from tgfx.tensor import _BUFFER, _RESHAPE, _STORED, _VIEWS, Tensor, ThreadRef, _lazy, _views, is_realized
from tgfx.trace_state import argument_values, current, user_error

# the lazy graphs being computed for a single read (a value several threads may read at once: each `np.asarray` of a
# shared Tensor), with the claim of the thread computing it: [a lock it holds meanwhile, the result, its thread id,
# the graph]. Other threads reading the same graph wait for that result instead of computing the graph again each; a
# read inside the computation itself (a host callback of the graph), or after the claimer failed, computes it anew.
_computing: dict[UOp, list[Any]] = {}
os.register_at_fork(after_in_child=_computing.clear)   # (a claim of a thread that stayed in the parent ends nowhere)
# Python threads other than the main one (CPython's count; one, i.e. always claim, where it has none): with none, no
# other thread can read a value meanwhile, and a claim's lock and dictionary entry would cost an eager op 0.3 us
_other_threads = getattr(_thread, "_count", lambda: 1)


def _view_base(u: UOp) -> UOp:
    """What `u` is a view (or one result) of: movement ops, casts and GETTUPLEs stripped."""
    while u.op in _VIEWS and u.src:
        u = u.src[0]
    return u


def siblings(todo: list[Tensor], described: Description, most: int | None = None) -> list[tuple[Tensor, UOp]]:
    """Lazy Tensors still held that are values (or views of values) computed for `todo`.

    `key, sub = tg.random.split(key)` holds two rows of one value; realising `sub` alone would leave `key` a graph
    that the next split grows. An optimiser's state (`mu = b1 * mu + (1 - b1) * g`, held in `state`) is part of the
    new parameters' graph; computed only inside it, the next step's state would chain onto the old one's graph.
    Either way every step would compute the whole history again. Realising them in the same schedule keeps an eager
    step's cost the same at step 1,000 as at step 2 (JAX computes every op eagerly). A value held only in a local
    variable is a kernel of its own then, not fused into its users. `described`: the description of their graph. Each
    comes with the value it was found as (read once: another thread may rebind it). `most`: the most elements one may
    have."""
    held = set(map(id, todo))
    if _lazy.keys() <= held:   # no lazy Tensor but these (an eager op's case)
        return []
    candidates: list[tuple[Tensor, UOp, UOp]] = []
    me = _get_ident()
    for ref in _lazy_snapshot():
        if (t := ref()) is None:
            continue
        u = t.uop
        if u.op in _STORED or is_realized(u):
            _lazy.pop(id(t), None)
        elif id(t) not in held and (base := _view_base(u)).op not in _STORED and \
                (ref.__class__ is not ThreadRef or ref.owner == me):   # (not another thread's own: `ThreadRef`)
            candidates.append((t, u, base))
    if not candidates:
        return []
    nodes = described.nodes
    graph = described.at   # (every node of the walk, numbered: a set of them cost a held key 3 of an op's 20 us)
    # (not an arange: its every use recomputes it for nothing, and stored it would hide from the kernels that read it
    # as the positions of a one-hot gather (`take_along_axis(arange(n), order)`, a permutation's first round), which
    # then compared each output with every stored position: 60,000 of them needed a 14 GB buffer; a graph without an
    # IOTA has none)
    # (past `most`, still the value a realised Tensor is a view of: `perm[i:i + b]` of a held permutation that reached
    # LAZY_DEPTH computes all of it for its slice, and left lazy, each later slice sorted again, a step each time)
    bases = {_view_base(t.uop) for t in todo} if most is not None else ()
    # (a deep graph: one no larger than what the graph reads or computes for `todo`, so no local bigger than those
    # values is stored (a one-hot mask of a permutation); state a step carries is, as the parameters of an eager
    # training loop, read by the graph at their size)
    limit = None if most is None else max([most, *(prod(b.shape) for b in described.inputs)])
    found = [(t, u) for t, u, base in candidates if base in graph and not (described.iota and layout._iota_like(u)) and
             (limit is None or prod(u.shape) <= limit or u in bases)]
    if limit is not None:
        # (and a held Tensor whose graph reads its nodes, which shares its history: the next parameters of an eager
        # training loop each read all of the last ones. Left lazy, it computed that history again when it grew deep in
        # turn, and its siblings more of it: JAX's pytrees tutorial's MLP, 100 eager steps unread, spent 4.7, 41 and
        # 92 s there, JAX 11 s in all)
        found += [(t, u) for t, u, base in candidates if base not in graph and prod(u.shape) <= limit and
                  _reads_computed(u, graph)]
    # (the walk of nodes that read a PARAM or call a FUNCTION, in a graph with either)
    traced, called = _with_params(nodes) if described.front & _TRACED_OR_CALLED else (set(), set())
    if views := [u for _, u in found if u not in graph]:   # views of the graph's values (another result of a call)
        more = _with_params(walk(UOp(Ops.SINK, None, tuple(views))))
        traced, called = traced | more[0], called | more[1]
    # a function's result is one too where this graph computes it (`order = argsort(x)`, read by `x[order]` and then
    # by `cumsum(v[order])`: left lazy, each later read sorted again), not another result of the call nobody reads
    return [(t, u) for t, u in found if u not in traced and (u not in called or u in graph)]


def _reads_computed(u: UOp, graph: Collection[UOp]) -> bool:
    """Whether the graph of `u` reads a node of `graph` that is computed there (not a stored value)."""
    seen: set[UOp] = set()
    stack = [u]
    while stack:
        v = stack.pop()
        if v in seen or v.op in _STORED:
            continue
        if v in graph:
            return True
        seen.add(v)
        stack.extend(v.src)
    return False


def _holds_values_of(t: Tensor, ops: list[UOp]) -> bool:
    """Whether a lazy Tensor other than `t` is one of `ops` or a view of one: a sibling `siblings` could find (it
    keeps fewer: this is the question asked before any walk, for a graph that is a chain of `ops`).

    Asked of the ops, not of every lazy Tensor held: each Tensor made of a graph is noted on the node it is a value
    of (`held_by`, `Tensor.__init__`), and a note is believed only while its Tensor still holds that node (a Tensor
    computed since holds its buffer). A pytree's 20 lazy leaves read one by one each asked all the others before:
    15.6 us a read against 9.7 with none held."""
    me = None
    for v in ops:
        if (held := v.__dict__.get("held_by")) is None:
            continue
        for ref in held:
            if (o := ref()) is None or o is t:
                continue
            if ref.__class__ is ThreadRef and ref.owner != (me := me or _get_ident()):   # another thread's own
                continue
            u = o.uop
            while u.op in _VIEWS and u.src:
                u = u.src[0]
            if u is v:
                return True
    return False


_TRACED_OR_CALLED = frozenset({Ops.PARAM, Ops.FUNCTION})


def _lazy_snapshot(table: dict[int, weakref.ref] = _lazy) -> list[weakref.ref]:
    """`_lazy`'s entries (or `_views`'), in one step: other threads add Tensors meanwhile, and one that dies takes its
    entry out."""
    while True:
        try:
            return list(table.values())
        except RuntimeError:   # (changed size during the copy: a collection freed a Tensor)
            continue


def _with_params(nodes: list[UOp]) -> tuple[set[UOp], set[UOp]]:
    """The nodes of a graph (`nodes`: its walk, sources first) that are traced values (they read a trace's PARAMs),
    and the others computed by a FUNCTION: such a value is left to be computed when it is read unless the graph
    computes it, so one result of a function is computed alone. One pass for all (a walk per sibling cost an eager
    MLP step 3 of its 12 ms), none for a graph without either (an eager step's)."""
    traced: set[UOp] = set()
    called: set[UOp] = set()
    if not any(u.op is Ops.PARAM or u.op is Ops.FUNCTION for u in nodes):
        return traced, called
    for u in nodes:
        srcs = outside_bodies(u)
        if u.op is Ops.PARAM or any(s in traced for s in srcs):
            traced.add(u)
        elif u.op is Ops.FUNCTION or any(s in called for s in srcs):
            called.add(u)
    return traced, called


def _ranges_of(uops: list[UOp]) -> bool:
    """Whether each of `uops` is a contiguous range of a computed buffer in host memory (`x[3]`, `x[2:5]`): that
    memory, no kernel. A child forked after the devices started (a DataLoader worker reading rows of a dataset the
    parent computed) reads those as it reads a whole computed buffer; anything to compute is `ForkedRuntimeError`."""
    return all(u.op in RANGE_OPS and range_view(u) is not None for u in uops)


def realize(*ts: Tensor, deep: bool = False) -> list[UOp]:
    """Compute several Tensors in one schedule, so shared work is done once; returns each one's buffer view.

    A realised Tensor is rebound to its buffer, so later graphs start from it, and so are its `siblings` (lazy
    Tensors still held that are views of the same computed value). Inside a differentiation nothing is rebound: the
    graph is what the gradient flows through (reading a value there, e.g. to print it, must not cut it).

    `deep`: a graph computed because it grew LAZY_DEPTH deep, in the middle of whatever built it: a sibling larger
    than the value is left lazy. It is a local of the function building the graph (take_along_axis's one-hot mask,
    n x n for the n it gathers), not state a step carries (an optimiser's moments: the size of the value they make).
    """
    donated = donations.count   # (before the Tensors' graphs are read: see DonationLog)
    one = len(ts) == 1   # (an eager read's case, spelled without comprehensions: each is a call)
    if one:
        u = ts[0].uop    # read once: another thread realising a sibling may rebind it meanwhile
        if u.op is _BUFFER or u.op is _RESHAPE and u.src[0].op is _BUFFER or u.op is Ops.MULTI and is_realized(u):
            return [u]
        todo, uops = list(ts), [u]
    else:
        todo = [t for t in ts if not is_realized(t.uop)]
        if not todo:
            return [t.uop for t in ts]
        uops = [t.uop for t in todo]
    ranges = False   # (every value a range of a computed buffer: what a forked child computes, `_ranges_of`)
    if runtime._forked_from is not None:   # (`refuse_in_forked_child`, its test inline: every eager op runs this)
        if not (ranges := _ranges_of(uops)):
            refuse_in_forked_child()       # before the locks a thread of the parent may have held at a fork
    differentiating = current().differentiating
    claim = None   # (a single read's claim on computing its graph: `_computing`)
    # (inside the try from before the claim's lock is taken: a signal's handler runs after any call, and a
    # KeyboardInterrupt between the claim and the try left it filed and held, so the next thread to read the value
    # waited for it for ever)
    try:
        if one and not differentiating and u.op not in RANGE_OPS and _other_threads():   # (a buffer's range: no work)
            claim = [_allocate_lock(), None, _get_ident(), u]
            claim[0].acquire()
            if (held := _computing.setdefault(u, claim)) is not claim:
                claim[0].release()
                claim = None
                if held[2] != _get_ident() and (result := _result_of(held)) is not None:
                    ts[0].uop = result
                    _lazy.pop(id(ts[0]), None)
                    return [result]
            elif ts[0].uop is not u:   # computed by another thread between this one's read of it and its claim
                return [ts[0].uop]
        if one and not differentiating and not ranges and (found := op_signature(u)) is not None and \
                (_lazy.keys() <= {id(ts[0])} or not _holds_values_of(ts[0], chain_ops(u))):
            # a chain of ops over buffers (`x + 1`), and no other lazy Tensor that is a value of it (a sibling): from
            # its signature to its program, without describing its graph
            result, inputs = realize_op(u, found)
            if donations.count != donated and donations.since(donated, inputs):   # (as below)
                if is_realized(ts[0].uop):
                    return [ts[0].uop]
                raise donated_meanwhile("realizing a Tensor")
            ts[0].uop = result
            if claim is not None:
                claim[1] = result
            _lazy.pop(id(ts[0]), None)
            if marked:   # (a value placed on the default device lives: what is computed from one stays committed)
                for b in inputs:   # (a loop, no call: a value committed elsewhere costs an eager op nothing)
                    if id(b) in marked:
                        mark(result)
                        break
            return [result]
        described = views = None
        ranges_only = False
        if not differentiating:
            # a contiguous range of a computed buffer in host memory (`x[2:5]`, a row of a split key) is that memory: no
            # kernel, and when every Tensor is one, no graph to describe and no sibling (the graph computes nothing)
            views = {}
            for u in uops:
                if u.op in RANGE_OPS and (v := range_view(u)) is not None:
                    views[u] = v
            ranges_only = bool(views) and len(views) == len(set(uops))
            if not ranges_only:
                described = describe(UOp(Ops.SINK, None, tuple(dict.fromkeys(uops))))
                if more := siblings(todo, described, max(prod(t.uop.shape) for t in todo) if deep else None):
                    todo += [t for t, _ in more]
                    uops += [u for _, u in more]
                    # siblings that are nodes of the graph add nothing to its walk (views of them do: then another walk)
                    described = described.resink(UOp(Ops.SINK, None, tuple(dict.fromkeys(uops))))
        roots = list(dict.fromkeys(uops))
        try:
            results = views if ranges_only else lower_realize(roots, described, views)
        except EscapedTracerError as e:  # a traced value read while tracing, or after its trace returned
            if (values := argument_values(e.params)) is None:
                raise user_error(e) from None
            # stand-ins of a function that may read its arguments (`Trace.values`): the value computed from them, the
            # Tensors kept on the stand-ins (they are the function's graph)
            return realize(*(Tensor(substitute_outside_calls(t.uop, values)) for t in ts))
        if not differentiating:
            if donations.count != donated and donations.since(donated, described.at if described is not None else
                                                                set(walk(UOp(Ops.SINK, None, tuple(roots))))):
                # a buffer the graph reads was donated by another thread as this was queued: the donating call computed
                # the lazy Tensors reading it first (`realize_readers`), and this read may have come after its writes
                if all(is_realized(t.uop) for t in todo):
                    return [t.uop for t in ts]
                raise donated_meanwhile("realizing a Tensor")
            for t, u in zip(todo, uops, strict=True):
                t.uop = results[u]   # the same value either way, if another thread rebound it too
                _lazy.pop(id(t), None)
            if marked and _reads_marked(described, uops):   # (as above: each value that reads one is committed)
                for t, u in zip(todo, uops, strict=True):
                    carry(u, t.uop)
        if differentiating:
            return [results[u] if (u := t.uop) in results else u for t in ts]
        if claim is not None:
            claim[1] = ts[0].uop
        return [ts[0].uop] if one else [t.uop for t in ts]
    finally:
        if claim is not None:
            if _computing.get(claim[3]) is claim:
                del _computing[claim[3]]
            if claim[0].locked():   # (not yet taken where an interrupt came first)
                claim[0].release()


def _result_of(claim: list[Any]) -> UOp | None:
    """What another thread's claim on computing a graph gave, once it has (`None` where it failed: the reader computes
    the graph itself)."""
    with claim[0]:
        return claim[1]


def _reads_marked(described: Description | None, roots: list[UOp]) -> bool:
    """Whether a graph realised (`described`'s nodes and inputs; without one, `roots` are ranges of buffers) reads a
    node committed to the default device (`tgfx/placement.py`): a loop over what the description holds, no walk."""
    if described is None:
        for v in roots:
            while True:   # (a range's chain of views down to its buffer)
                if id(v) in marked:
                    return True
                if not v.src:
                    break
                v = v.src[0]
        return False
    for v in described.nodes:
        if id(v) in marked:
            return True
    for v in described.inputs:
        if id(v) in marked:
            return True
    return False


class DonatedBufferError(RuntimeError):
    """A Tensor was read after its buffer was donated to a jitted call (`donate_argnums`), or while another thread's
    call took it over."""


class DonatedTensor(Tensor):
    """A Tensor whose buffer was donated to a jitted call: every use raises."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in ("__class__", "__repr__", "uop"):
            return object.__getattribute__(self, name)
        raise DonatedBufferError("this Tensor was donated to a jitted function (donate_argnums) and its buffer was "
                                 "reused; use the function's result instead")

    def __repr__(self) -> str:
        return "<donated Tensor>"


class DonationLog:
    """The buffers jitted calls took over (`donate_argnums`), numbered. A donating call writes its results into a
    donated buffer, queued after what was queued before it: another thread that had taken the buffer from its Tensor
    before the Tensor was marked donated, and queued its read after the donating call, would read those results as
    the Tensor's value. Such a reader takes `count` before it looks at its Tensors, and once its read is queued (or
    done) asks `since` whether one of its buffers was donated meanwhile: almost always no donation at all since, one
    comparison."""

    KEPT = 1024   # donations remembered; a reader that saw more go by while it read takes its buffers as donated

    def __init__(self) -> None:
        self.count = 0
        # weakly: the log must not keep a buffer's memory (a reader holds the buffers it reads)
        self._entries: deque[tuple[int, weakref.ref[UOp]]] = deque(maxlen=self.KEPT)
        self._lock = forksafe.lock()
        # the buffers of Tensors jitted programs captured from closures, constants of their traces that every
        # replay reads: a donation takes over a copy of one, so that they keep the value they were traced with
        self.captured: weakref.WeakSet[UOp] = weakref.WeakSet()

    def record(self, bufs: Sequence[UOp]) -> None:
        """Buffers a donating call is about to queue its writes to (its donated Tensors already marked)."""
        with self._lock:
            self.count += 1
            self._entries.extend((self.count, weakref.ref(b)) for b in bufs)

    def since(self, count: int, bufs: Collection[UOp]) -> bool:
        """Whether any of `bufs` was donated after `count` was read."""
        if self.count == count:
            return False
        with self._lock:
            if not self._entries or self._entries[0][0] > count + 1:   # forgotten: maybe
                return True
            return any(n > count and (b := ref()) is not None and b in bufs for n, ref in self._entries)


donations = DonationLog()


def donated_meanwhile(what: str) -> DonatedBufferError:
    return DonatedBufferError(f"{what} read a buffer that a jitted call on another thread took over (donate_argnums) "
                              f"while it read it: the value it read is that call's result. Donate a Tensor only once "
                              f"no other thread uses it")


def realize_readers(bufs: set[UOp], donors: Sequence[Tensor] = ()) -> set[UOp]:
    """Compute the lazy Tensors whose graphs read any of `bufs`: buffers a jitted call is about to take over for its
    results (`donate_argnums`), so those Tensors keep the values they were built from, as JAX's eagerly computed
    ones do (`y = x + 1` then `f(x)` donating x: y read x's new contents). One walk over every lazy graph.

    Returns those of `bufs` that a Tensor other than `donors` (the donated ones) views as it is (`x.reshape(2, 4)`,
    `x[None]`, held beside x): no computation copies them, so the call must leave the buffer as it is. (A range of
    one, `x[3]`, is computed as a view of its memory: that memory is then `shared`.)"""
    skip = {id(t) for t in donors}
    held = [(t, t.uop) for ref in [*_lazy_snapshot(), *_lazy_snapshot(_views)] if (t := ref()) is not None and
            id(t) not in skip]
    viewed = {u.src[0] for _, u in held if u.op is Ops.RESHAPE and u.src[0] in bufs}
    held = [(t, u) for t, u in held if u.op not in _STORED and not is_realized(u)]
    if not held:
        return viewed
    nodes = walk(UOp(Ops.SINK, None, tuple(u for _, u in held)))
    reads: set[UOp] = set()
    for u in nodes:
        if u in bufs or any(s in reads for s in outside_bodies(u)):
            reads.add(u)
    traced, _ = _with_params(nodes)   # (a value of a trace still running is computed later)
    if readers := [t for t, u in held if u in reads and u not in traced]:
        realize(*readers)
    return viewed


def block_until_ready(tree: Any) -> Any:
    """Wait until every Tensor in a pytree is computed (`jax.block_until_ready`); returns the tree.

    The lazy ones are computed in one schedule first, so work they share is done once.
    """
    from tgfx.tree import tree_leaves
    ts = [x for x in tree_leaves(tree) if isinstance(x, Tensor)]
    realize(*ts)
    for t in ts:
        t.block_until_ready()
    return tree


def device_get(tree: Any) -> Any:
    """Every Tensor in a pytree as a numpy array (`jax.device_get`), computed in one schedule first; other leaves
    as they are.

    >>> tg.device_get({"loss": loss, "step": 3})     # {'loss': array(0.25, dtype=float32), 'step': 3}
    """
    from tgfx.tree import tree_leaves, tree_map
    realize(*(x for x in tree_leaves(tree) if isinstance(x, Tensor)))
    return tree_map(lambda x: x.numpy() if isinstance(x, Tensor) else x, tree)
