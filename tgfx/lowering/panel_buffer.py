"""panel_buffer: a contraction's kernel copies its panel of the vector operand onto its core's stack, as BLAS does.

A matmul's register tile (tgfx/lowering/heuristics.py: `rows` x `lanes`, the lanes a vector range) reads, each step of
its reduce loop, one row of a narrow panel of the operand it reads as vectors, `w` (K x N): `lanes` elements, a row
of `w` apart. With rows a page or more apart every step lands on another page and the panel's rows share cache sets
(schedule's `_packed_operand`), and each row tile of the output reads the whole panel again. A kernel that opens the
panel's loops (the N-panel loop, threaded or not) before a loop over the output's rows first copies its panel into a
buffer on the stack of the core running it (`DEFINE_REG`, K x lanes, contiguous), in a loop of its own placed inside
the panel loops and before the row loop; the reduce then reads the buffer, a sequential stream out of L2:

    REDUCE(ADD, x[m, k] * LOAD(w[k * N + n0 + l]), k)
        ->  fill = REDUCE(ADD, AFTER(w[k' * N + n0 + l], STORE(INDEX(reg, k' * lanes + l), w[k' * N + n0 + l])), k')
            REDUCE(ADD, x[m, k] * LOAD(INDEX(AFTER(reg, fill), k * lanes + l)), k)

The fill is a reduce over a range of its own (k'), only so that the linearizer gives it a loop: it depends on the
panel's ranges alone, so the linearizer places it (`hoist`) once they are open and before the row loop opens; its sum
is read by nothing but the AFTER that orders the buffer's reads after it (LLVM drops the sum). The buffer's reads
follow the fill's writes as row_buffer's do (tgfx/lowering/row_buffer.py).

This replaces the kernel that packed the whole operand into panels before the contraction (a full pass over `w`,
written to memory and read back, and a buffer as big as `w`): where the schedule can tell the kernel will copy its
panels (schedule's `_copies_own_panels`), it leaves `w` as it is. The copy still reads `w` a row a page apart, which
costs about what the pack's reads did (copying the 4 panels of a core's share at once, rows 512 bytes long, or
prefetching 8 rows ahead, measured no faster); what it saves is the pack's writes and the matmul's reads of them.
(AVX-512, 2 shared cores, pack + matmul against this kernel alternated in one process, the median of their paired
ratios over 60 runs, two rounds: 1024^3 0.95-0.96, 128 x 784 @ 784 x 1024 0.93-0.98, 128 x 1024^2 0.92-0.97,
128 x 784 @ 784 x 512 0.95, 256 x 1024^2 0.88-0.96; for AVX2 0.99-1.01, 0.96-1.0, 0.88-0.93, 0.91-0.93, 0.91-0.92.)
"""
from __future__ import annotations

from tgfx.devices.target import Target, rows_outrun_tlb
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import _coef, unit_stride
from tgfx.lowering.linearize import is_vector_range, range_deps
from tgfx.lowering.operands import REUSE_TO_TRANSPOSE  # (a panel is copied for the reuse a pack was made for)


def _panel_load(sink: UOp) -> tuple[UOp, UOp, UOp] | None:
    """(the load, its reduce range, the vector range) of the first load of a contraction's vector operand that a panel
    buffer pays for (module docstring), or None: a row of lanes side by side a step of the reduce, the rows far apart
    (`rows_outrun_tlb`), and read again by the row blocks of loops opened after the panel's."""
    nodes = sink.toposort()
    vecs = [u for u in nodes if is_vector_range(u)]
    if len(vecs) != 1 or any(u.op is Ops.REDUCE and len(u.src) == 2 and u.src[1] is vecs[0] for u in nodes):
        return None   # an UNROLL's lanes: a reduce's, not the tile's columns
    vec = vecs[0]
    loops = sorted({r for st in sink.src if st.op is Ops.STORE for r in range_deps(st) if r.arg[1] == "loop"},
                   key=lambda r: r.arg[0])
    readers: dict[UOp, list[UOp]] = {}   # each global load in a reduce over one range: the reduces that read it
    for red in nodes:
        if red.op is Ops.REDUCE and len(red.src) == 2 and red.src[1].op is Ops.RANGE and red.src[1].arg[1] == "reduce":
            for u in red.src[0].toposort():
                if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL:
                    readers.setdefault(u, []).append(red)
    for ld, reds in readers.items():
        rk, idx = reds[0].src[1], ld.src[0].src[1]
        deps = range_deps(ld)
        if ld.dtype.is_bool or any(r.src[1] is not rk for r in reds) or not {rk, vec} <= deps or \
                not unit_stride(idx, vec):
            continue
        lanes, k, stride = vec.src[0].arg, rk.src[0].arg, _coef(idx, rk)
        if stride is None or stride < lanes or not rows_outrun_tlb(k, stride * ld.dtype.itemsize):
            continue
        # the output's loops opened after every loop the panel depends on: its rows, each reading the whole panel
        panel = [r for r in deps if r.op is Ops.RANGE and r.arg[1] == "loop"]
        rows = [r for r in loops if r not in deps and all(p.arg[0] < r.arg[0] for p in panel)]
        reuse = len(reds)
        for r in rows:
            reuse *= r.src[0].arg
        if rows and reuse >= REUSE_TO_TRANSPOSE:
            return ld, rk, vec
    return None


def panel_buffers(sink: UOp, target: Target) -> UOp:
    """`sink` with its contraction's vector operand read through a panel buffer its kernel fills (module docstring);
    unchanged when it has none, or the panel does not fit `target`'s cache beside the register buffers it has."""
    if (found := _panel_load(sink)) is None:
        return sink
    ld, rk, vec = found
    lanes, k = vec.src[0].arg, rk.src[0].arg
    regs = [u for u in sink.toposort() if u.op is Ops.DEFINE_REG]
    if not target.panel_fits_cache(k * lanes * ld.dtype.itemsize + sum(r.arg[1] * r.dtype.itemsize for r in regs)):
        return sink
    reg = UOp(Ops.DEFINE_REG, ld.dtype, (), (len(regs), k * lanes))
    fill_range = UOp(Ops.RANGE, rk.dtype, rk.src, (1 + max(u.arg[0] for u in sink.toposort() if u.op is Ops.RANGE),
                                                    "reduce"))
    row = ld.substitute({rk: fill_range})
    store = UOp(Ops.STORE, None, (UOp(Ops.INDEX, ld.dtype, (reg, fill_range * lanes + vec)), row))
    fill = UOp(Ops.REDUCE, ld.dtype, (UOp(Ops.AFTER, ld.dtype, (row, store)), fill_range), Ops.ADD)
    filled = UOp(Ops.AFTER, ld.dtype, (reg, fill))
    return sink.substitute({ld: UOp(Ops.LOAD, ld.dtype, (UOp(Ops.INDEX, ld.dtype, (filled, rk * lanes + vec)),))})


__all__ = ["panel_buffers"]
