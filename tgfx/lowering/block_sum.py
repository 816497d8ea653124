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
"""
from __future__ import annotations

from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import split_range
from tgfx.lowering.symbolic import pm_symbolic

# steps a block sums: BLAS's panels' depths (a few hundred); the rounding is least near sqrt(n), and a block's one
# extra addition and register then cost nothing beside its products
MIN_BLOCK = 128
MAX_BLOCK = 512


def block_size(n: int) -> int | None:
    """The steps of a block of a reduce loop of `n` steps (the most in range that divide it), or None: no longer
    than a block (summed as BLAS sums it: a 384-step `x @ w` is numpy's to the bit), or of no such divisor."""
    return next((b for b in range(MAX_BLOCK, MIN_BLOCK - 1, -1) if n % b == 0), None) if n > MAX_BLOCK else None


def _blocked(u: UOp) -> bool:
    """Whether `u` is a float sum of products over one reduce loop long enough to block."""
    return u.op is Ops.REDUCE and u.arg is Ops.ADD and u.dtype is not None and u.dtype.is_float and \
        len(u.src) == 2 and u.src[0].op in (Ops.MUL, Ops.MULACC) and u.src[1].op is Ops.RANGE and \
        u.src[1].arg[1] == "reduce" and block_size(u.src[1].src[0].arg) is not None


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


__all__ = ["MAX_BLOCK", "MIN_BLOCK", "block_size", "block_sums"]
