"""The split of a kernel over the cores: its THREAD options (`_thread_opts`), read from the target (`Target.threads`,
`Target.thread_split`, `Target.cores`) after the kernel's other options (`heuristics.hand_coded_opts`, which
re-exports these names): the outermost loop every store runs in that splits evenly over as many threads as the work
is worth, padded where it splits unevenly, and a second loop where the first leaves cores idle."""
from __future__ import annotations

import math

from tgfx.devices.target import PAGE_BYTES, Target
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import Opt, _round_up
from tgfx.lowering.linearize import range_deps

# a loop that splits unevenly over the cores is padded to a multiple of them by at most this share of it
THREAD_PAD_SHARE = 8


def _thread_opts(sink: UOp, loops: list[UOp], opts: list[Opt], work: int, itemsize: int,
                 target: Target) -> list[Opt]:
    """The THREAD option after `opts` (none when one core is enough). Where no loop splits evenly over as many cores
    as the work is worth (a column reduce's 200 outputs as 25 vectors of 8, on 2 cores), the largest loop that
    pads to a multiple of more cores by at most an eighth of it, each thread's share then smaller, is padded (its
    extra iterations masked). Not the innermost loop where LLVM vectorises it (no UPCAST made it vectors) into
    shares the vector's lanes do not divide: the digits MLP's tanh(x @ w + b), 128 x 1024, on 64 AVX-512 cores was
    34 parts of 31 columns (1024 padded to 1054), each row a vector and 15 scalar steps, for 2 more parts than its 128
    rows' 32 (on 2 cores the 34 parts took 158 us, the 32 parts 40)."""
    axis, n = _threads(sink, loops, opts, work, itemsize, target)
    sizes = _thread_sizes(sink, loops, opts)
    vectorised = {o.axis for o in opts if o.op == "UPCAST"}
    inner = loops[-1].arg[0] if loops and loops[-1].arg[0] not in vectorised else None
    for more in range(min(target.threads(work, itemsize, _chunks(sink)), target.cores), n, -1):
        # (and a thread's share shrinks: 64 blocks on 96 cores are one a thread either way; padded for the cores,
        # not for more parts than cores)
        pad = [a for a in sizes if 0 < _round_up(sizes[a], more) - sizes[a] <= sizes[a] // THREAD_PAD_SHARE and
               -(-sizes[a] // more) * n < sizes[a] and
               (a != inner or -(-sizes[a] // more) % target.lanes(itemsize) == 0)]
        if pad:
            axis = max(pad, key=lambda a: (sizes[a], -a))
            return [Opt("PADTO", axis, more), Opt("THREAD", axis, more)]
    return [Opt("THREAD", axis, n), *_second_thread(sink, sizes, axis, n, work, itemsize, target)] if n > 1 else []


def _second_thread(sink: UOp, sizes: dict[int, int], axis: int, n: int, work: int, itemsize: int,
                   target: Target) -> list[Opt]:
    """A THREAD of a second loop where the first (`axis`, `n` parts) leaves cores idle: the kernel then runs over the
    product of the two (`kernel_opts.thread`). A split sum's partial sums (tgfx/lowering/split_reduce.py) are its
    parts by its outputs, neither enough for a many-core machine alone: a column sum of 4096 x 1024 as 16 parts of
    its rows, its 1024 columns 16 blocks of 64 (two vectors by 4 rows of AVX-512): 16 of 64 cores, now 64. Only where
    `n` is fewer than the cores, so a kernel that already has a core each is as before (every kernel on 2 cores)."""
    most = target.threads(work, itemsize, _chunks(sink))
    if n >= min(most, target.cores) or not _chunks(sink):
        return []
    best = (1, 0)
    for b in sorted(a for a in sizes if a != axis):
        m = next((m for m in range(min(most // n, sizes[b]), 1, -1)
                  if sizes[b] % m == 0 and (n * m <= target.cores or n * m % target.cores == 0)), 1)
        best = max(best, (m, -b))
    return [Opt("THREAD", -best[1], best[0])] if best[0] > 1 else []


def _chunks(sink: UOp) -> bool:
    """Whether the kernel may be split into more parts than cores (`Target.threads`): not one each part of which
    walks all of something, the updates of a scatter (a GNN's segment sums in 8 parts: 3.7x slower than in 2) or a
    loop kernel's steps."""
    return not any(u.op is Ops.RANGE and u.arg[1] in ("scatter", "carry") for u in sink.toposort())


def _thread_sizes(sink: UOp, loops: list[UOp], opts: list[Opt]) -> dict[int, int]:
    """The sizes, after `opts`, of the loops a THREAD option may split: those every store runs in (a kernel storing
    pieces of its output, tgfx/lowering/rangeify.py: a loop of one piece would leave the other pieces to every
    thread whole)."""
    sizes = {r.arg[0]: r.src[0].arg for r in loops if all(r in range_deps(st) for st in sink.src)}
    for o in opts:
        if o.op == "SWAP":   # (its amount is the other range's id)
            if o.axis in sizes and o.amount in sizes:
                sizes[o.axis], sizes[o.amount] = sizes[o.amount], sizes[o.axis]
        elif o.axis in sizes and o.op == "PADTO":
            sizes[o.axis] = _round_up(sizes[o.axis], o.amount)
        elif o.axis in sizes:
            sizes[o.axis] = sizes[o.axis] // o.amount if o.amount else 1   # (0: the whole range, copies)
    return sizes


def _threads(sink: UOp, loops: list[UOp], opts: list[Opt], work: int, itemsize: int,
             target: Target) -> tuple[int, int]:
    """(axis, threads) of the THREAD option after `opts`: the outermost loop (`_thread_sizes`) that splits evenly
    over the most threads the work is worth; threads 1 when none is worth it."""
    if target.threads(work, itemsize) <= 1:
        return 0, 1
    sizes = _thread_sizes(sink, loops, opts)
    chunks = _chunks(sink)
    splits = {a: target.thread_split(sizes[a], work, itemsize, chunks) for a in sorted(sizes)}
    if any(u.op is Ops.RANGE and u.arg[1] == "scatter" for u in sink.toposort()) and \
            not any(u.op in GroupOp.Transcendental for u in sink.toposort()):
        # a scatter's loops split over cores are each update's row (its updates, in order, are the sequential
        # range): every core streams through all the rows, and a core's share of each, below a page, is not all a
        # core reads, the hardware prefetcher streaming on into its neighbours' (65,536 rows of 64 floats into 4,096
        # on 2 cores: 1.2-1.4 ms as halves of rows, 0.87 whole on one). Not where computing the updates costs more
        # than reading them (an exp of each: `fusion._scatter_value_expands`)
        row = math.prod(sizes.values()) * itemsize
        splits = {a: n if row // n >= PAGE_BYTES else 1 for a, n in splits.items()}
    outer = max(splits, key=lambda a: (splits[a], -a), default=None)
    return (0, 1) if outer is None else (outer, splits[outer])
