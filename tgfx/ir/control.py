"""The arguments of the control-flow ops `LOOP` and `SWITCH`, and the types of their results.

A `LOOP` runs its body FUNCTION on the device, once per step, with no host in the loop::

    LOOP src: (body, [cond], *consts, *init carries, *xs, [trip count])

The body is a TUPLE over PARAMs of its own: slot 0 is the step index (int64, counting down when `reverse`),
then the consts (loop invariants: values the body closed over), the carries and one slice `xs[i]` of each stacked
input. It returns the new carries, then one slice `ys[i]` of each stacked output. A `cond` body (same slots, no xs)
returns a bool scalar: the loop stops before the first step where it is false (a while loop). `length` is the static
trip count, or, for a loop with a cond or a dynamic trip count (an int64 scalar, the last operand), its bound:
the size of every stacked output, and for a while loop the most steps it may take (None: unbounded).

Results, in order: the final carries; the stacked ys; with `save`, the carry at the start of every step, stacked
(what the backward of the loop reads: JAX's residuals); with a cond or a dynamic trip count, the number of steps
taken (int64 scalar).

A `SWITCH` runs one of its branch bodies, picked on the device by an int32 index (clamped by the front end)::

    SWITCH src: (*branches, index, *operands)

Every branch is a TUPLE over PARAMs 0..n-1 (the operands) with results of the same types; the SWITCH returns them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tgfx.dtypes import DType, dtypes
from tgfx.ir.ops import Ops

if TYPE_CHECKING:
    from tgfx.ir.uop import UOp

INDEX_DTYPE = dtypes.int64   # a loop's step index and trip count: the processor's counter word


@dataclass(frozen=True)
class LoopSpec:
    name: str                  # the body function's name, for messages
    n_consts: int
    n_carry: int
    n_xs: int
    length: int | None         # static trip count, or the bound of a cond / dynamic loop (None: unbounded while)
    device: str
    reverse: bool = False
    cond: bool = False         # src[1] is a cond body: a while loop
    dynamic: bool = False      # the last operand is the trip count (int64 scalar, at most `length`)
    save: bool = False         # also return the carry at the start of every step, stacked
    remat: bool = False        # the body calls tg.checkpoint: its backward recomputes the step, reading no residuals

    @property
    def n_bodies(self) -> int:
        return 2 if self.cond else 1

    @property
    def counted(self) -> bool:
        """Whether the number of steps is known only on the device (and is returned as the last result)."""
        return self.cond or self.dynamic

    def operands(self, loop: UOp) -> tuple[tuple[UOp, ...], tuple[UOp, ...], tuple[UOp, ...], UOp | None]:
        """(consts, init carries, xs, trip count or None) of `loop`."""
        ops = loop.src[self.n_bodies:]
        c, k, x = self.n_consts, self.n_carry, self.n_xs
        return ops[:c], ops[c:c + k], ops[c + k:c + k + x], ops[-1] if self.dynamic else None


@dataclass(frozen=True)
class SwitchSpec:
    name: str
    n_branches: int
    device: str


# the ops that have bodies (`n_bodies` is 0 for every other)
BODIED = frozenset({Ops.CALL, Ops.FUNCTION, Ops.LOOP, Ops.SWITCH})


def n_bodies(u: UOp) -> int:
    """How many leading sources of `u` are bodies of their own (opaque to the passes outside them). A FUNCTION's
    body is one too: its PARAMs are its own, and hash-consing makes them the very UOps of an enclosing body's
    PARAMs of the same slot, shape and device."""
    op = u.op
    if op is Ops.CALL or op is Ops.FUNCTION:
        return 1
    if op is Ops.LOOP:
        return u.arg.n_bodies
    if op is Ops.SWITCH:
        return u.arg.n_branches
    return 0


def loop_results(loop: UOp) -> list[tuple[tuple[int, ...], DType]]:
    """(shape, dtype) of every result of a LOOP, in order."""
    spec: LoopSpec = loop.arg
    outs = loop.src[0].src
    carries = [(o.shape, o.dtype) for o in outs[:spec.n_carry]]
    n = spec.length or 0
    ys = [((n, *o.shape), o.dtype) for o in outs[spec.n_carry:]]
    saved = [((n, *s), d) for s, d in carries] if spec.save else []
    return carries + ys + saved + ([((), INDEX_DTYPE)] if spec.counted else [])


def n_results(u: UOp) -> int:
    """How many results a FUNCTION, CALL, LOOP or SWITCH has (GETTUPLE indices)."""
    from tgfx.ir.ops import Ops
    if u.op is Ops.LOOP:
        return len(loop_results(u))
    body = u.src[0]
    return len(u.arg[2]) if u.op is Ops.CALL and body.op in (Ops.SINK, Ops.CALLBACK) else len(body.src)
