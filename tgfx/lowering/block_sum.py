"""block_sum: a contraction's long reduce loop summed in blocks, as BLAS sums its panels.

A register tile accumulates each output over the whole reduce in one register: every step adds a product to a sum
that grows with the steps, so the rounding of a float32 `a @ b` of 4,096 steps grew as 4,096 additions to a large
sum do (3.4e-6 of the largest output off float64's, where numpy's BLAS, which sums a panel of a few hundred steps
into a fresh register and adds that to the output, is 4.7e-7, and jax's 5.5e-7). A reduce loop longer than
`MAX_BLOCK` steps is two loops, the inner one a block of `MIN_BLOCK` to `MAX_BLOCK` steps (the most that divide it):

    REDUCE(ADD, v(r), r)   ->   REDUCE(ADD, REDUCE(ADD, v(hi * b + lo), lo), hi)

each block summed in a register of its own from zero (`linearize` places the inner reduce's accumulator inside the
outer loop) and added to the output's sum once a block: rounding as `b + n / b` additions, not `n` (5.5e-7 for the
4,096 steps). Only sums of products (`MUL`, `MULACC`: the tiles' loops, whose cost is the products'); a plain sum's
loop (a row's) already sums into a vector's lanes, and a long one with few outputs is split over the cores
(`split_reduce`). A length no block size divides stays one loop.

A plain sum whose loop LLVM's vectoriser does not take (`nested_sums`: its lanes are an UPCAST's, the outputs' -- a
column sum, the sum of a split row's parts --, or a small kernel's scalar loop) summed along its loop in one register
rounds as a long run of additions too: a float32 column sum of 4,096 rows 2.9e-6 of the largest sum off float64's
(numpy's the same, jax's tree 2.1e-7), a (64, 1,000,000) row sum's 500 parts 6.3e-7 (jax 5.5e-8). Its loop is a few
nested levels instead, each of `FAN` steps or so over sums in registers of their own, the innermost at most `LEAF`:

    REDUCE(ADD, v(r), r)   ->   REDUCE(ADD, REDUCE(ADD, REDUCE(ADD, v(o1 * b1 + o2 * b2 + i), i), o2), o1)

the rounding of a level's sum of m partial sums grows as sqrt(m), the inner levels' shrinks by the outer ones' steps
(independent blocks average out), so short outer levels round about as a pairwise tree does (4,096 rows as 8 x 8 x 64:
2.1e-7). The registers cost one addition a block, the loads are the same: no slower. A length with no divisor near
`FAN` (a prime count of rows) sums its last `n % FAN` steps in a loop of their own.

A plain sum over several reduce loops that stay apart (`kernel_opts.merge_reduce_ranges` merges those adjacent in
memory: a pixel shuffle's read and a contiguous operand's disagree on two axes) summed all its loops' steps in one
register: `chained` makes it a REDUCE a loop, the innermost first, each in a register of its own, and the levels above
nest each loop longer than a leaf. A VQ-VAE's reconstruction loss, the mean of a (32, 32, 32, 3) squared difference
from a pixel-shuffled (32, 16, 16, 12) decoder output, was 98,304 additions in one register: 3.5e-6 off float64's
(jax's 7.2e-8); its loops of 512 x 2 x 16 x 6 in registers of their own, the 512 in levels, 3.9e-8. Also where LLVM
vectorises the innermost loop: it reduces its lanes at the loop's end anyway, and a loop around another is none of
its vectoriser's (only such loops nest then, `nested_sums(vectorised=True)`).
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import split_range
from tgfx.lowering.linearize import range_deps
from tgfx.lowering.symbolic import pm_symbolic

# steps a block sums: BLAS's panels' depths (a few hundred); the rounding is least near sqrt(n), and a block's one
# extra addition and register then cost nothing beside its products
MIN_BLOCK = 128
MAX_BLOCK = 512


def block_size(n: int) -> int | None:
    """The steps of a block of a reduce loop of `n` steps (the most in range that divide it), or None: no longer
    than a block (summed as BLAS sums it: a 384-step `x @ w` is numpy's to the bit), or of no such divisor."""
    return next((b for b in range(MAX_BLOCK, MIN_BLOCK - 1, -1) if n % b == 0), None) if n > MAX_BLOCK else None


def _square(v: UOp) -> bool:
    """Whether `v` is a value times itself (a variance's, a norm's): a plain sum's, no contraction's tile."""
    return v.op is Ops.MUL and v.src[0] is v.src[1]


def _blocked(u: UOp) -> bool:
    """Whether `u` is a float sum of products over one reduce loop long enough to block."""
    return u.op is Ops.REDUCE and u.arg is Ops.ADD and u.dtype is not None and u.dtype.is_float and \
        len(u.src) == 2 and u.src[0].op in (Ops.MUL, Ops.MULACC) and not _square(u.src[0]) and \
        u.src[1].op is Ops.RANGE and u.src[1].arg[1] == "reduce" and block_size(u.src[1].src[0].arg) is not None


def block_sums(sink: UOp) -> UOp:
    """`sink` with each long sum of products over one reduce loop summed in blocks (module docstring): the loop
    split into `hi` (keeping its id) and an inner `lo` (`kernel_opts.split_range`), its sums nested."""
    nodes = sink.toposort()
    loops = sorted({u.src[1] for u in nodes if _blocked(u)}, key=lambda r: r.arg[0])
    if not loops or any(u.op is Ops.REDUCE and isinstance(u.arg, tuple) for u in nodes):
        return sink   # (nor a loop kernel's, whose carries step through the loop in order)
    for r in loops:
        sink = split_range(sink, r, block_size(r.src[0].arg), nest=lambda red: red.arg is Ops.ADD)
    return graph_rewrite(sink, pm_symbolic, name="block sums")


# a plain sum's levels: about FAN steps each (their partial sums' rounding grows as the root of a level's steps), down
# to an innermost loop of at most LEAF (its one register of lanes loaded LEAF times, then added once)
FAN = 8
LEAF = 64


def level(n: int) -> tuple[int, int]:
    """(m, tail) for a level of a plain sum of `n` steps: m steps over blocks of `n // m` (the largest divisor of `n`
    from FAN / 2 to FAN, else the least up to 2 * FAN, else FAN), and the `tail = n % m` steps left after them."""
    near = [d for d in range(FAN, FAN // 2 - 1, -1) if n % d == 0] + \
        [d for d in range(FAN + 1, 2 * FAN + 1) if n % d == 0]
    m = near[0] if near else FAN
    return m, n % m


def _plain(u: UOp) -> bool:
    """Whether `u` is a float sum over one reduce loop longer than a leaf, of no product (a contraction's are
    `_blocked`'s, BLAS's rounding), nor a loop that stores (a panel's fill, `panel_buffer`: its sum is read by none)."""
    return u.op is Ops.REDUCE and u.arg is Ops.ADD and u.dtype is not None and u.dtype.is_float and \
        len(u.src) == 2 and (u.src[0].op not in (Ops.MUL, Ops.MULACC) or _square(u.src[0])) and \
        u.src[1].op is Ops.RANGE and \
        u.src[1].arg[1] == "reduce" and u.src[1].src[0].arg > LEAF and \
        not any(s.op is Ops.STORE for s in u.src[0].toposort())


def _nested(red: UOp, rng: UOp, base: UOp, n: int, ids: Iterator[int]) -> UOp:
    """The sum over i < n of `red`'s value at `rng = base + i`, in levels (`level`) each a REDUCE of its own over a
    new range, numbered from `ids` in the order the levels nest (outermost first, so loops nest by id)."""
    def new_range(steps: int) -> UOp:
        return UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, steps),), (next(ids), rng.arg[1]))
    if n <= LEAF:
        r = new_range(n)
        return UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({rng: base + r}), r), Ops.ADD)
    m, tail = level(n)
    b = n // m
    o = new_range(m)
    total = UOp(Ops.REDUCE, red.dtype, (_nested(red, rng, base + o * b, b, ids), o), Ops.ADD)
    return total + _nested(red, rng, base + m * b, tail, ids) if tail else total


def _several(u: UOp) -> bool:
    """Whether `u` is a plain float sum (`_plain`'s) over several reduce loops of more than a leaf's steps in all."""
    return u.op is Ops.REDUCE and u.arg is Ops.ADD and u.dtype is not None and u.dtype.is_float and \
        len(u.src) > 2 and all(r.op is Ops.RANGE and r.arg[1] == "reduce" for r in u.src[1:]) and \
        math.prod(r.src[0].arg for r in u.src[1:]) > LEAF and \
        (u.src[0].op not in (Ops.MUL, Ops.MULACC) or _square(u.src[0])) and \
        not any(s.op is Ops.STORE for s in u.src[0].toposort())


def chained(sink: UOp) -> UOp:
    """`sink` with each plain sum over several reduce loops (`_several`) a REDUCE a loop, nested as the loops are (by
    id, the innermost the highest): `REDUCE(v, r0, r1)` -> `REDUCE(REDUCE(v, r1), r0)`, each in a register of its
    own (module docstring)."""
    mapping: dict[UOp, UOp] = {}
    for u in sink.toposort():
        if _several(u):
            value = u.src[0]
            for r in sorted(u.src[1:], key=lambda r: -r.arg[0]):
                value = UOp(Ops.REDUCE, u.dtype, (value, r), Ops.ADD)
            mapping[u] = value
    return sink.substitute(mapping) if mapping else sink


def _outer(u: UOp) -> bool:
    """Whether the loop of plain sum `u` holds a loop of its own: a REDUCE inside it that depends on its range."""
    return any(s.op is Ops.REDUCE and u.src[1] in range_deps(s) for s in u.src[0].toposort())


def nested_sums(sink: UOp, vectorised: bool = False) -> UOp:
    """`sink` with each plain float sum over one long reduce loop summed in nested levels, a sum over several loops
    first a sum a loop (`chained`; module docstring). With `vectorised` (a kernel whose innermost loops LLVM's
    vectoriser takes), only loops around another: it sums a loop in many lanes already (a row's 4,096 steps 64
    apiece), and a loop nested in blocks left it a horizontal sum a block (a row sum 2x slower)."""
    nodes = sink.toposort()
    if any(u.op is Ops.REDUCE and isinstance(u.arg, tuple) for u in nodes):
        return sink   # (a loop kernel's carries step through the loop in order)
    sink = chained(sink)
    nodes = sink.toposort()
    loops = sorted({u.src[1] for u in nodes if _plain(u) and (not vectorised or _outer(u))}, key=lambda r: r.arg[0])
    first = max((u.arg[0] for u in nodes if u.op is Ops.RANGE), default=0) + 1
    out = sink
    for rng in loops:
        # the same ids for every sum over `rng` (an UPCAST's copies): their levels are one loop nest
        mapping, last = {}, first
        for red in (u for u in out.toposort() if _plain(u) and u.src[1] is rng):
            ids = itertools.count(first)
            mapping[red] = _nested(red, rng, UOp.const(dtypes.index, 0), rng.src[0].arg, ids)
            last = next(ids)
        nested = out.substitute(mapping)
        if any(u is rng for u in nested.toposort()):
            continue   # (`rng` read outside its sums: left one loop)
        out, first = nested, last
    return out if out is sink else graph_rewrite(out, pm_symbolic, name="nested sums")


__all__ = ["FAN", "LEAF", "MAX_BLOCK", "MIN_BLOCK", "block_size", "block_sums", "chained", "level", "nested_sums"]
