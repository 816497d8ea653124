"""reduce_chains: independent accumulators for a small kernel's reduce along memory of a length no vector takes.

A kernel of at most SMALL_KERNEL_OPS operations is rendered with LLVM's loop vectoriser off (`render_kernel_values`),
so a reduce along memory that the heuristics leave to that vectoriser (a length neither a power of two up to a vector's
lanes nor a multiple of them: a classifier's 30 or 100 classes) ran as one scalar chain per output, each step waiting
on the last. A NaN-propagating maximum (`llvm.maximum`) is a sequence of compares and blends, 15 cycles a step: the
row max of a log-softmax over 32 x 30 took 3.8 us (0.3 GFLOP/s), over 32 x 100 15 us."""
from __future__ import annotations

import math

from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import Opt

# a kernel of at most this many operations (loads, stores and arithmetic, times their loops' trips; an op on a vector
# range's lanes is one) runs in about as long as its launch even as written: LLVM's loop vectoriser and unroller are
# told to leave it alone (a 128 x 256 column sum of vectors: LLVM unrolled its reduce loop, 31 ms, for 2 us a run).
# They made such kernels 3-7x bigger and slower to compile (a 10-column bias gradient: 26 ms of LLVM, 4 ms without),
# a third of a small model's first call being tiny kernels. Not one with a transcendental: its scalar polynomials
# cost 8-16x their vectors (a logistic loss's gradient over 200 rows: 2.1 us scalar, 0.3 as vectors).
SMALL_KERNEL_OPS = 32768


def surely_small(sink: UOp, sizes: list[int]) -> bool:
    """Whether a kernel whose ranges have `sizes` is small (`SMALL_KERNEL_OPS`) before its options: every load, store
    and arithmetic op counted at every iteration of every range (more than the lowering counts, which hoists what a
    loop does not depend on), and no transcendental."""
    nodes = sink.toposort()
    if any(u.op in GroupOp.Transcendental for u in nodes):
        return False
    ops = sum(1 for u in nodes if u.op in GroupOp.ALU or u.op in (Ops.LOAD, Ops.STORE))
    return ops * math.prod(sizes) <= SMALL_KERNEL_OPS


def chain_opts(red: UOp, chains: int) -> list[Opt]:
    """Reduce `red` (along memory) as `chains` independent accumulators, combined after its loop: UNROLL by the largest
    divisor of its length up to `chains`, or, where none divides it (a prime length), PADTO a multiple of `chains` (the
    padding adds the reduce's identity) and UNROLL by it. A max keeps its NaN (each partial maximum propagates it), a
    sum its partial sums' rounding (no worse than one chain's). 32 x 30 max: 3.8 -> 0.5 us; 32 x 31: 3.8 -> 1.3;
    32 x 100: 15.1 -> 1.4 (AVX-512)."""
    n = red.src[0].arg
    d = next((c for c in range(min(chains, n), 1, -1) if n % c == 0), None)
    if d is not None:
        return [Opt("UNROLL", red.arg[0], d)]
    return [Opt("PADTO", red.arg[0], chains), Opt("UNROLL", red.arg[0], chains)]
