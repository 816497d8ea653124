"""linearize: order a kernel's index-level graph into a program with explicit loops.

The output is a flat list of UOps in program order. `RANGE` opens a loop and `END(range)` closes it. A `REDUCE`
becomes a register: `DEFINE_ACC` (initialised to the reduce's identity) before its loops, an update
`STORE(acc, op(LOAD(acc), value))` inside them, and the REDUCE itself then reads the register after them.
Values that do not depend on a reduce's ranges are placed before its loops (loop-invariant hoisting); a value
placed inside a loop is only visible inside it.
"""
from __future__ import annotations

import functools

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.rangeify import reduce_identity


@functools.cache
def range_deps(u: UOp) -> frozenset[UOp]:
    """The RANGEs a value depends on (a REDUCE closes its own)."""
    if u.op is Ops.RANGE:
        return frozenset({u})
    deps = frozenset().union(*(range_deps(s) for s in u.src)) if u.src else frozenset()
    if u.op is Ops.REDUCE:
        deps = deps - frozenset(u.src[1:])
    return deps


def _range_order(r: UOp) -> int:
    return r.arg[0]


class _Linearizer:
    def __init__(self) -> None:
        self.out: list[UOp] = []
        self.scopes: list[set[UOp]] = [set()]
        self.open: list[UOp] = []
        self.n_acc = 0
        self.acc_of: dict[UOp, UOp] = {}

    def visible(self, u: UOp) -> bool:
        return any(u in s for s in self.scopes)

    def place(self, u: UOp) -> None:
        self.out.append(u)
        self.scopes[-1].add(u)

    def open_range(self, r: UOp) -> None:
        self.out.append(r)
        self.open.append(r)
        self.scopes.append({r})

    def close_range(self) -> None:
        r = self.open.pop()
        self.scopes.pop()
        self.out.append(UOp(Ops.END, None, (r,)))

    def emit(self, root: UOp) -> None:
        """Place `root` and everything it needs that is not visible yet (iteratively, sources first)."""
        stack: list[tuple[UOp, bool]] = [(root, False)]
        while stack:
            u, ready = stack.pop()
            if self.visible(u):
                continue
            if u.op is Ops.REDUCE:
                self.emit_reduce(u)
                continue
            if u.op is Ops.RANGE:
                raise AssertionError(f"range {u.arg} used outside its loop")
            if ready:
                self.place(u)
                continue
            stack.append((u, True))
            stack.extend((s, False) for s in reversed(u.src) if not self.visible(s))

    def hoist(self, value: UOp, inner: frozenset[UOp]) -> None:
        """Place every node of `value` that does not depend on the `inner` ranges (and so can run before them)."""
        for n in value.toposort():
            if n.op in (Ops.RANGE, Ops.CONST) or self.visible(n) or range_deps(n) & inner:
                continue
            if range_deps(n) <= set(self.open):
                self.emit(n)

    def emit_reduce(self, red: UOp) -> None:
        value, rngs = red.src[0], sorted(red.src[1:], key=_range_order)
        self.hoist(value, frozenset(rngs))
        acc = UOp(Ops.DEFINE_ACC, red.dtype, (UOp.const(red.dtype, reduce_identity(red.arg, red.dtype)),), self.n_acc)
        self.n_acc += 1
        self.place(acc)
        for r in rngs:
            self.open_range(r)
        self.emit(value)
        current = UOp(Ops.LOAD, red.dtype, (acc,))
        update = UOp(red.arg, red.dtype, (current, value))
        self.place(current)
        self.place(update)
        self.out.append(UOp(Ops.STORE, None, (acc, update)))
        for _ in rngs:
            self.close_range()
        self.out.append(red)  # the REDUCE now reads its register
        self.acc_of[red] = acc
        self.scopes[-1].add(red)
        self.scopes[-1].add(acc)

    def emit_store(self, st: UOp) -> None:
        rngs = sorted(range_deps(st), key=_range_order)
        for i, r in enumerate(rngs):
            # what only depends on the loops opened so far (a row's max in a softmax) is placed before the next one
            self.hoist(st, frozenset(rngs[i:]))
            self.open_range(r)
        self.emit(st)
        for _ in rngs:
            self.close_range()


def linearize(sink: UOp) -> tuple[list[UOp], dict[UOp, UOp]]:
    """The program order of `sink`, and for each REDUCE the DEFINE_ACC register it reads."""
    lin = _Linearizer()
    for st in sink.src:
        lin.emit_store(st)
    return lin.out, lin.acc_of


__all__ = ["linearize", "range_deps", "dtypes"]
