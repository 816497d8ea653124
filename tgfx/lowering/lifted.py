"""lifted: a kernel that comes back with other float constants is compiled once more, with those constants as
arguments, and that code serves every later value.

A jitted function made anew each step around a Python float (a learning-rate schedule, a temperature, an annealing
weight: `jit(lambda p, g: p - lr * g)` inside the loop) traces a program whose constants are literals, as in JAX,
so each step's kernels are new ASTs: lowered and compiled by LLVM again (`tanh(a @ a) * scale` of 64 x 64: ~60 ms a
step; JAX recompiles each step too). Here each kernel AST of a program is compared with the first one seen of its
`family` (the AST with every float constant a placeholder): the constants whose values differ from that first one's
become reads of one-element buffers after the kernel's own (`DEFINE_GLOBAL`s, as an eager graph's lifted constants
are: `tgfx/lowering/constants.py`), filled with this kernel's values when its program is encoded; the rest stay
literals. That code is compiled once, and every later kernel of the family is it with other values.

A kernel that never comes back with other values (most programs') keeps its literals, folded as before, and so does
every float constant that is the same in each kernel of its family seen (a mask's 0, a one-hot sum's 1, an eps).
Integer and boolean constants always stay literals (index arithmetic, division by a constant). A float that is 0 or
1 in one step is an argument like any other value (a warm-up from 0, a temperature through 1.0), not a kernel of
another family.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tgfx import config
from tgfx.devices.programs import Buffer
from tgfx.dtypes import dtypes
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.constants import scalar_host, view_chain
from tgfx.lowering.lru import LRU


@dataclass
class _Family:
    first: tuple[str, ...]   # the constants (by use, as `repr`) of the first kernel seen
    lifted: frozenset[int]   # the uses that became arguments: those whose values differed from the first's


# a family's state by its key; a kernel's choice (the AST to compile, and the values of its arguments) by its key
_families: LRU[str, _Family] = LRU(lambda: int(config.KERNEL_CACHE_SIZE))
_chosen: LRU[str, tuple[UOp, tuple[UOp, ...]]] = LRU(lambda: int(config.KERNEL_CACHE_SIZE))


def is_liftable(c: UOp) -> bool:
    """Whether CONST `c` may be a kernel argument: a float (when it differs between kernels of a family)."""
    return c.op is Ops.CONST and c.dtype is not None and c.dtype.is_float


def is_index_level(ast: UOp) -> bool:
    """Whether kernel `ast` is written with its loops already (a custom or loop kernel: `index_level`)."""
    return ast.src[0].src[0].op is Ops.INDEX


def float_uses(ast: UOp) -> list[tuple[UOp, int, UOp]]:
    """Each use of a liftable constant in kernel `ast`, in one order for every kernel of a family: (the node reading
    it, the source position, the constant). A constant read in two places is two uses: which values happen to be
    equal is no part of the family."""
    uses = []
    indexed = is_index_level(ast)
    for u in ast.toposort():
        if u.op is Ops.CONST or u.op in GroupOp.Movement and view_chain(u)[1].op is Ops.CONST:
            continue   # (a constant or a view of one: described where it is read)
        if indexed and u.op not in GroupOp.Elementwise:
            continue   # (a kernel written with its loops: its values' arithmetic only, not an accumulator's start)
        for j, s in enumerate(u.src):
            if is_liftable(c := view_chain(s)[1]):
                uses.append((u, j, c))
    return uses


def lift(ast: UOp, uses: list[tuple[UOp, int, UOp]], which: frozenset[int] | range) -> UOp:
    """`ast` with the uses numbered in `which` reads of one-element buffers after its own slots, in use order."""
    slot = 1 + max(u.arg[0] for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL)
    indexed = is_index_level(ast)
    reads: dict[tuple[UOp, int], UOp] = {}
    for i in sorted(which):
        u, j, c = uses[i]
        chain, _ = view_chain(u.src[j])
        g = UOp(Ops.DEFINE_GLOBAL, c.dtype, (), (slot, 1))
        # a tensor-level kernel reads it as a scalar view of the buffer (as an eager graph's lifted constants are
        # read), one written with its loops as a load of element 0
        y = UOp(Ops.LOAD, c.dtype, (UOp(Ops.INDEX, c.dtype, (g, UOp.const(dtypes.index, 0))),)) if indexed else \
            UOp(Ops.RESHAPE, c.dtype, (g,), ())
        for m in reversed(chain):
            y = m.replace(src=(y, *m.src[1:]))
        reads[(u, j)] = y
        slot += 1
    new: dict[UOp, UOp] = {}
    for u in ast.toposort():
        src = tuple(new.get(s, s) if (y := reads.get((u, j))) is None else y for j, s in enumerate(u.src))
        new[u] = u if src == u.src else u.replace(src=src)
    return new[ast]


def choose(ast: UOp) -> tuple[UOp, tuple[UOp, ...]]:
    """The kernel to compile for `ast`, and the constants (CONSTs) its extra buffer slots hold, in slot order: `ast`
    itself and none, unless a kernel of its family with other constant values was seen before."""
    if (hit := _chosen.get(ast.key)) is not None:
        return hit
    uses = float_uses(ast)
    chosen: tuple[UOp, tuple[UOp, ...]] = (ast, ())
    if uses:
        values = tuple(repr(c.arg) for _, _, c in uses)   # (repr: -0.0 is not 0.0, nan is one value)
        # (with the count of uses: a kernel reading a buffer where another has a constant, in the slot lifting
        # gives that constant, is the same graph lifted, but not of the family)
        family_key = f"{len(uses)}:{lift(ast, uses, range(len(uses))).key}"
        family = _families.setdefault(family_key, _Family(values, frozenset()))
        if family.first is not values:
            differ = frozenset(i for i, (a, b) in enumerate(zip(family.first, values, strict=True)) if a != b)
            if differ or family.lifted:
                family.lifted |= differ
                chosen = (lift(ast, uses, family.lifted), tuple(uses[i][2] for i in sorted(family.lifted)))
    return _chosen.setdefault(ast.key, chosen)


def forget() -> None:
    """Forget every family and choice: a new process's start (`forget_compiled`)."""
    _families.clear()
    _chosen.clear()


def argument_memory(allocator: Any, consts: tuple[UOp, ...]) -> list[Buffer]:
    """One buffer per lifted constant, holding its value; the command buffer they are encoded in keeps them."""
    mems = []
    for c in consts:
        mem = allocator.alloc(c.dtype.itemsize)
        allocator.fill(mem, scalar_host(c.dtype, c.arg))
        mems.append(mem)
    return mems
