"""linearize: order a kernel's index-level graph into a program with explicit loops.

The output is a flat list of UOps in program order. `RANGE` opens a loop and `END(range)` closes it. A `REDUCE`
becomes a register: `DEFINE_ACC` (initialised to the reduce's identity) before its loops, an update
`STORE(acc, op(LOAD(acc), value))` inside them, and the REDUCE itself then reads the register after them. A REDUCE
may be emitted more than once (its value is needed again after the loop it was placed in closed, e.g. once hoisted
before an outer loop and once inside it); each emission has its own register, and each read of the REDUCE in the
program reads the register of the emission just before it (`acc_of` lists them in program order). The
carries of a loop kernel (REDUCEs with arg ("carry", j)) are registers too, initialised to their initial values
and overwritten by their new values every step.
Values that do not depend on a reduce's ranges are placed before its loops (loop-invariant hoisting); a value
placed inside a loop is only visible inside it. A range of kind "vector" (an UPCAST's lanes, `kernel_opts.vector_lanes`)
is no loop: it is visible everywhere, and what depends on it is placed as any value, a vector the renderer computes;
a REDUCE over one (an UNROLL's lanes combined) is placed as any value too.
"""
from __future__ import annotations

import weakref

from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, sources_first
from tgfx.lowering.loop_kernel import is_carry
from tgfx.lowering.rangeify import reduce_identity

_NO_RANGES: frozenset[UOp] = frozenset()


class _OwnRange(frozenset):
    """A RANGE's own range set, {r}: held by the nodes that depend on r alone, and by r only weakly (a node holding
    itself is freed only by the cyclic collector, and with it what it holds: a first call's RANGEs and their rewrites
    outlived the compile until the next collection). A subclass, for the weak reference."""


def _own_range(r: UOp) -> frozenset[UOp]:
    ref = r.__dict__.get("range_deps")
    if ref is None or (own := ref()) is None:
        own = _OwnRange((r,))
        r.__dict__["range_deps"] = weakref.ref(own)
    return own


def range_deps(u: UOp) -> frozenset[UOp]:
    """The RANGEs a value depends on (a REDUCE closes its own). Cached on the node (a global cache would keep every
    kernel's graph alive); a RANGE's, itself, weakly (`_OwnRange`)."""
    if u.op is Ops.RANGE:
        return _own_range(u)
    deps = u.__dict__.get("range_deps")
    if deps is None:
        sources_first(u, "range_deps", range_deps)   # every source's deps are on it now: read, not asked for
        # a node whose sources depend on one set of ranges (a unary op, a cast, `r * 2`) shares that set: this is
        # the most called function of the lowering, and it built a copy for each node
        sets = [d for s in u.src if (d := s.__dict__["range_deps"] if s.op is not Ops.RANGE else _own_range(s))]
        deps = _NO_RANGES if not sets else sets[0] if all(d is sets[0] for d in sets) else frozenset().union(*sets)
        if u.op is Ops.REDUCE:
            deps = deps - frozenset(u.src[1:])
        u.__dict__["range_deps"] = deps
    return deps


def reduces_inside(u: UOp) -> frozenset[UOp]:
    """The REDUCEs in the graph of `u` (itself included), cached on the node (a REDUCE's without itself: a node
    holding itself would keep the reduce's whole graph alive until the cyclic collector ran)."""
    inner = u.__dict__.get("reduces_inside")
    if inner is None:
        sources_first(u, "reduces_inside", reduces_inside)
        inner = frozenset().union(*(reduces_inside(s) for s in u.src)) if u.src else frozenset()
        u.__dict__["reduces_inside"] = inner
    return inner | {u} if u.op is Ops.REDUCE else inner


def is_block_reduce(u: UOp) -> bool:
    """A REDUCE over a GPU block's threads (`optimize_gpu.group`): one value per thread in, their combination out to
    every thread; placed as a plain value, no loop of its own."""
    return u.op is Ops.REDUCE and len(u.src) == 2 and u.src[1].op is Ops.SPECIAL


def is_lane_reduce(u: UOp) -> bool:
    """A REDUCE over a vector range (an UNROLL's lanes, `kernel_opts.unroll`): the lanes of its source combined into
    one value, placed as a plain value (the renderer's horizontal reduce), no loop of its own."""
    return u.op is Ops.REDUCE and len(u.src) == 2 and is_vector_range(u.src[1])


def _range_order(r: UOp) -> int:
    return r.arg[0]


def is_vector_range(u: UOp) -> bool:
    return u.op is Ops.RANGE and u.arg[1] == "vector"


def vector_ranges(lin: list[UOp]) -> set[UOp]:
    """The vector ranges the values of linearized kernel `lin` depend on (never in its order themselves)."""
    return {s for u in lin for s in u.src if is_vector_range(s)}


class _Linearizer:
    def __init__(self, vector_ranges: frozenset[UOp] = frozenset()) -> None:
        self.vector_ranges = vector_ranges    # placed from the start, never opened
        self.out: list[UOp] = []
        self.scopes: list[list[UOp]] = [[]]   # what each open loop (and the kernel's top level) placed
        self.placed: set[UOp] = set(vector_ranges)   # all of it: what is visible here
        self.open: list[UOp] = []
        self.n_acc = 0
        self.acc_of: dict[UOp, list[UOp]] = {}   # a REDUCE's registers, one per emission, in program order
        self.reduces: dict[tuple[UOp, ...], list[UOp]] = {}  # REDUCEs of the current store group, by their ranges
        self.step_stores: dict[UOp, list[UOp]] = {}   # stores inside a loop kernel's step range (stacked outputs)
        self.carry_deps: dict[UOp, frozenset[UOp]] = {}   # per step range: the other ranges its carries need

    def visible(self, u: UOp) -> bool:
        return u in self.placed

    def place(self, u: UOp) -> None:
        self.out.append(u)
        self.scopes[-1].append(u)
        self.placed.add(u)

    def open_range(self, r: UOp) -> None:
        self.out.append(r)
        self.open.append(r)
        self.scopes.append([r])
        self.placed.add(r)

    def close_range(self) -> None:
        r = self.open.pop()
        self.placed.difference_update(self.scopes.pop())
        self.out.append(UOp(Ops.END, None, (r,)))

    def emit(self, root: UOp) -> None:
        """Place `root` and everything it needs that is not visible yet (iteratively, sources first)."""
        stack: list[tuple[UOp, bool]] = [(root, False)]
        while stack:
            u, ready = stack.pop()
            if u in self.placed:
                continue
            if u.op is Ops.REDUCE and not is_block_reduce(u) and not is_lane_reduce(u):
                (self.emit_carries if is_carry(u) else self.emit_reduce)(u)
                continue
            if u.op is Ops.RANGE:
                raise AssertionError(f"range {u.arg} used outside its loop")
            if ready:
                self.place(u)
                continue
            stack.append((u, True))
            stack.extend((s, False) for s in reversed(u.src) if s not in self.placed)

    def hoist(self, value: UOp, inner: frozenset[UOp]) -> None:
        """Place every node of `value` that does not depend on the `inner` ranges (and so can run before them)."""
        opened, skip = frozenset(self.open) | self.vector_ranges, (Ops.RANGE, Ops.CONST, Ops.SPECIAL, Ops.SINK)
        for n in value.toposort():
            # SINK: the caller's grouping node, not a value (it has no ranges when the values are constants)
            if n.op in skip or n in self.placed:
                continue
            deps = range_deps(n)
            if self.carry_deps:   # a loop kernel's carries are placed together (`emit_carries`), when all can be
                deps = deps.union(*(self.carry_deps[r.src[1]] for r in reduces_inside(n) if is_carry(r)))
            if deps <= opened and inner.isdisjoint(deps):
                self.emit(n)

    def emit_reduce(self, red: UOp) -> None:
        """A REDUCE and its siblings (REDUCEs over the same ranges, e.g. the lanes of an upcast): one loop nest,
        one register each."""
        rngs = tuple(sorted(red.src[1:], key=_range_order))
        group = [red] + [r for r in self.reduces.get(rngs, ()) if r is not red and not self.visible(r)
                         and range_deps(r) <= set(self.open) | self.vector_ranges]
        inside = frozenset().union(*(reduces_inside(r.src[0]) for r in group))
        group = [r for r in group if r is red or r not in inside]
        values = UOp(Ops.SINK, None, tuple(r.src[0] for r in group))
        self.hoist(values, frozenset(rngs))
        accs = []
        for r in group:
            acc = UOp(Ops.DEFINE_ACC, r.dtype, (UOp.const(r.dtype, reduce_identity(r.arg, r.dtype)),), self.n_acc)
            self.n_acc += 1
            self.place(acc)
            accs.append(acc)
        # a GPU block's shared tiles (`optimize_gpu.stage_shared`) are filled once a step of the outer range, between
        # its barriers, before the inner range opens: what depends on the ranges opened so far is placed there
        staged = any(n.op is Ops.BARRIER for n in values.toposort())
        for i, rng in enumerate(rngs):
            self.open_range(rng)
            if staged and i + 1 < len(rngs):
                self.hoist(values, frozenset(rngs[i + 1:]))
        for r in group:
            self.emit(r.src[0])
        for r, acc in zip(group, accs, strict=True):
            current = UOp(Ops.LOAD, r.dtype, (acc,))
            update = UOp(r.arg, r.dtype, (current, r.src[0]))
            self.place(current)
            self.place(update)
            self.out.append(UOp(Ops.STORE, None, (acc, update)))
        for _ in rngs:
            self.close_range()
        for r, acc in zip(group, accs, strict=True):
            self.out.append(r)  # the REDUCE now reads its register
            self.acc_of.setdefault(r, []).append(acc)
            self.scopes[-1] += (r, acc)
            self.placed.update((r, acc))

    def emit_carries(self, red: UOp) -> None:
        """The carries of a loop kernel (tgfx/lowering/loop_kernel.py): a register each, set to its initial value
        before the step range; inside, the placeholders read the registers, then every new value is computed, then
        stored (all carries step together)."""
        rng = red.src[1]
        group = [r for r in self.reduces.get((rng,), ()) if is_carry(r) and not self.visible(r)]
        steps = self.step_stores.pop(rng, [])
        holders = {u.arg: u for v in (*(r.src[0] for r in group), *steps) for u in v.toposort()
                   if u.op is Ops.DEFINE_ACC and is_carry(u)}
        assert set(holders) <= {r.arg for r in group}, "a loop kernel reads a carry it does not update"
        self.hoist(UOp(Ops.SINK, None, tuple(r.src[0] for r in group)), frozenset({rng}))
        regs: dict[tuple, UOp] = {}
        for r in group:
            init = holders[r.arg].src[0] if r.arg in holders else UOp.const(r.dtype, 0)
            self.emit(init)
            regs[r.arg] = UOp(Ops.DEFINE_ACC, r.dtype, (init,), self.n_acc, tag="carry")
            self.n_acc += 1
            self.place(regs[r.arg])
        self.open_range(rng)
        for arg, h in holders.items():
            self.place(h)
            self.acc_of.setdefault(h, []).append(regs[arg])
        for r in group:
            self.emit(r.src[0])
        for st in steps:   # a stacked output's slice: from this step's carries, as theirs
            self.emit(st)
        for r in group:
            self.out.append(UOp(Ops.STORE, None, (regs[r.arg], r.src[0])))
        self.close_range()
        for r in group:
            self.out.append(r)
            self.acc_of.setdefault(r, []).append(regs[r.arg])
            self.scopes[-1] += (r, regs[r.arg])
            self.placed.update((r, regs[r.arg]))

    def emit_stores(self, stores: list[UOp]) -> None:
        """Stores over the same ranges share one loop nest."""
        rngs = sorted((r for r in range_deps(stores[0]) if not is_vector_range(r)), key=_range_order)
        self.reduces = {}
        group = UOp(Ops.SINK, None, tuple(stores))
        for u in group.toposort():  # one walk: the stores of an upcast's lanes share most of their graphs
            if u.op is Ops.REDUCE:
                self.reduces.setdefault(tuple(sorted(u.src[1:], key=_range_order)), []).append(u)
        for i, r in enumerate(rngs):
            # what only depends on the loops opened so far (a row's max in a softmax) is placed before the next one
            self.hoist(group, frozenset(rngs[i:]))
            self.open_range(r)
        for st in stores:
            self.emit(st)
        for _ in rngs:
            self.close_range()


def linearize(sink: UOp) -> tuple[list[UOp], dict[UOp, list[UOp]]]:
    """The program order of `sink`, and for each REDUCE the DEFINE_ACC registers it reads, one per emission in program
    order (the k-th read of a REDUCE in the program reads its k-th register)."""
    lin = _Linearizer(frozenset(u for u in sink.toposort() if is_vector_range(u)))
    groups: dict[tuple[UOp, ...], list[UOp]] = {}
    for st in sink.src:
        if step := next((r for r in range_deps(st) if r.arg[1] == "carry"), None):   # (emit_carries places it)
            lin.step_stores.setdefault(step, []).append(st)
        else:
            groups.setdefault(tuple(sorted(range_deps(st), key=_range_order)), []).append(st)
    # a carry's new value may read no element (a scanned scalar broadcast: `zeros(n) + x`), but the carries are
    # placed together with their initial values and the stacked outputs, which do: none of them before those loops
    for u in sink.toposort():
        if is_carry(u):
            need = range_deps(u.src[0]).union(*(range_deps(st) for st in lin.step_stores.get(u.src[1], ())))
            lin.carry_deps[u.src[1]] = lin.carry_deps.get(u.src[1], frozenset()) | (need - {u.src[1]})
    for stores in groups.values():
        lin.emit_stores(stores)
    return lin.out, lin.acc_of


__all__ = ["linearize", "range_deps", "is_block_reduce", "is_lane_reduce", "is_vector_range", "vector_ranges"]
