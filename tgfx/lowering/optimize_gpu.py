"""optimize_gpu: the kernel options of a GPU (SPEC §7's GLOBAL, LOCAL and GROUP), and the defaults a `GPUTarget` gets.

A GPU kernel runs as a grid of blocks of threads. Its options map ranges onto them, as graph rewrites of the
index-level kernel like the CPU's options (`kernel_opts.py`), with `SPECIAL` nodes for the thread's ids:

- GLOBAL(axis, n): the output range becomes an axis of the launch grid (x, y, z in the order applied): its index is
  block index * n + thread index, n threads of a block along it (n = 1: a block per index, the block's threads free
  for LOCAL and GROUP). A range that `n` does not divide leaves the last block's extra threads idle (the renderer
  returns them at entry). SPECIAL arg: ("gidx<d>", size, n). A GLOBAL past the grid's three axes (n = 1) shares the
  last: its index runs over both, the two indices its remainder and quotient.
- LOCAL(axis, n): an output range split over the block's n threads: thread t runs t, t + n, ... (a loop over the
  rest; iterations past the end are masked as PADTO's are). SPECIAL arg: ("lidx0", n).
- GROUP(axis, n): a reduce range (with the ranges every REDUCE over it also reduces, as one: `_merged_reduce`) split
  over the same n threads: each thread reduces its strided share, then a block REDUCE (a REDUCE over the thread
  SPECIAL, `linearize.is_block_reduce`) combines the partials (warp shuffles, then shared memory across warps) and
  gives the result to every thread: a row's max and sum in a softmax, read by the row's LOCAL output loop. A store
  that no thread index reaches is done by thread 0 alone.
- UPCAST and UNROLL are the CPU's (`kernel_opts.py`): an UPCAST by `GPUTarget.lanes` of an axis every access reads
  contiguously gives each thread adjacent elements, which LLVM's load/store vectoriser turns into 16-byte accesses.
- SHARED(axis, depth), after the grid axes: a contraction's operands staged in shared memory (`stage_shared`). The
  reduce range becomes an outer range over its steps, `depth` at a time, and an inner one; each operand's reads (a
  register tile's copies of one buffer, affine in the range and the thread ids) come from a tile of the block's
  reads for `depth` steps, a `DEFINE_LOCAL` (addrspace 3) laid out [step][thread along each grid axis the operand
  reads by][copy], so a thread's copies of a step are adjacent (16-byte shared reads). Each outer step: a `BARRIER`
  (every thread done reading the last step's tiles), the block's threads fill the tiles together (a reduce over a
  range of the fill's own, each thread a share by its index in the block, the SPECIAL "tidx": adjacent threads on
  adjacent addresses of the operand, a vector's lanes at a time where they are contiguous), a `BARRIER` (the tiles
  written), then the inner range reads them. A step past the reduce's end is a zero in the tile (and masked in the
  reduce); threads past a grid axis's end stay for the fills and barriers, their stores gated and their own reads
  clamped. The tiles' bytes must fit `GPUTarget.shared_per_block`.

`hand_coded_gpu_opts` picks them from the target: a row kernel, or a reduction with too few outputs to fill the GPU
with a thread each, gets a block per row (GLOBAL n = 1 on the row axes, GROUP on its reduce ranges, LOCAL on its
output loop); every other kernel gets one thread per output element (GLOBAL on every output axis: the innermost on
x with the target's block size, then the axes nearest in memory, ones past the third sharing the last) after an
UPCAST for vector loads, or per register tile of a contraction, as large as still fills the GPU
(`GPUTarget.fill_threads`), its operands staged in shared memory where it has two (`_shared_opts`; `GPU_SMEM=0`
turns it off). Every amount comes from the `GPUTarget`; `gpu_cost.launch_cost` shows what they give.

`thread_loops` turns a kernel back into loops for the CPU (tests/emulated_cuda.py runs test files so); a kernel with
shared tiles becomes loops over its blocks, then their threads, the tiles filled once a block (`_emulated_tiles`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from tgfx import config
from tgfx.devices.target import GPU_VECTOR_BYTES, GPUTarget
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.heuristics import MIN_CONTRACTION, _itemsize, _vector_axis
from tgfx.lowering.kernel_opts import (
    KernelOptError,
    Opt,
    _coef,
    apply_opt,
    pad_range,
    ranges,
    simplify_after_opts,
    unroll,
    upcast,
)
from tgfx.lowering.linearize import is_block_reduce, range_deps
from tgfx.lowering.rangeify import clamp, reduce_identity
from tgfx.lowering.symbolic import NotStatic, evaluate
from tgfx.lowering.tensor_cores import expand_ldmatrix, expand_wmma, tensor_core, tensor_core_opts

GPU_OPT_OPS = ("GLOBAL", "LOCAL", "GROUP", "SHARED", "TC")
TIDX = "tidx"   # the SPECIAL of a thread's index in its block, x fastest (a shared tile's fill)
TILE_REDUCES = 4   # reduces over one range that make a register tile (`unroll_lanes`)


def specials(sink: UOp) -> dict[str, UOp]:
    return {u.arg[0]: u for u in sink.toposort() if u.op is Ops.SPECIAL}


def _range(sink: UOp, opt: Opt, kind: str) -> UOp:
    if any(u.op is Ops.REDUCE and isinstance(u.arg, tuple) for u in sink.toposort()):
        raise KernelOptError(f"{opt}: a loop kernel's carries are stepped in order by one thread")
    rng = ranges(sink).get(opt.axis)
    if rng is None or rng.arg[1] != kind:
        raise KernelOptError(f"{opt}: no {kind} range {opt.axis} in this kernel")
    if opt.amount < 1:
        raise KernelOptError(f"{opt}: needs at least one thread")
    return rng


def global_axis(sink: UOp, opt: Opt) -> UOp:
    rng = _range(sink, opt, "loop")
    sp = specials(sink)
    dim = sum(name.startswith("gidx") for name in sp)
    if dim >= 3:
        return _shared_grid_axis(sink, opt, rng, sp)
    if opt.amount > 1 and "lidx0" in sp:
        raise KernelOptError(f"{opt}: the block's threads are split by LOCAL/GROUP; a grid axis beside them is n = 1")
    idx = UOp(Ops.SPECIAL, dtypes.index, (), (f"gidx{dim}", rng.src[0].arg, opt.amount))
    return sink.substitute({rng: idx})


def _shared_grid_axis(sink: UOp, opt: Opt, rng: UOp, sp: dict[str, UOp]) -> UOp:
    """GLOBAL(axis, 1) past the grid's three axes: the range shares the grid's last axis, whose index (block index *
    n + thread index) now runs over both: the axis's index its remainder by the axis's length, the range's index the
    quotient. So a fourth output axis is spread over blocks instead of looped in every thread. The axis's length must
    be a multiple of its threads (n), so that no padding falls between the two."""
    if opt.amount != 1:
        raise KernelOptError(f"{opt}: the launch grid's three axes are taken; a further axis shares the last (n = 1)")
    host = sp["gidx2"]
    size, n = host.arg[1], host.arg[2]
    if size % n:
        raise KernelOptError(f"{opt}: the grid's last axis ({size}) is padded to its {n} threads a block: no axis "
                             "can share it")
    merged = UOp(Ops.SPECIAL, dtypes.index, (), (host.arg[0], size * rng.src[0].arg, n))
    return sink.substitute({host: merged % size, rng: merged // size})


def _thread(sink: UOp, opt: Opt) -> UOp:
    sp = specials(sink)
    if any(name.startswith("gidx") and u.arg[2] > 1 for name, u in sp.items()):
        raise KernelOptError(f"{opt}: a grid axis already has threads of the block (GLOBAL n > 1)")
    if "lidx0" in sp and sp["lidx0"].arg[1] != opt.amount:
        raise KernelOptError(f"{opt}: the block already has {sp['lidx0'].arg[1]} threads")
    return UOp(Ops.SPECIAL, dtypes.index, (), ("lidx0", opt.amount))


def _strided(sink: UOp, rng: UOp, n: int) -> tuple[UOp, UOp, UOp]:
    """`rng` padded (masked) to a multiple of `n`, and its index as a strided share: (sink, padded range, outer * n +
    thread index); outer is the range the thread still loops over."""
    size = rng.src[0].arg
    padded = -(-size // n) * n
    if padded != size:
        sink = pad_range(sink, rng, padded)
        rng = ranges(sink)[rng.arg[0]]
    return sink, rng, UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, padded // n),), rng.arg)


def local_axis(sink: UOp, opt: Opt) -> UOp:
    rng = _range(sink, opt, "loop")
    lid = _thread(sink, opt)
    sink, rng, outer = _strided(sink, rng, opt.amount)
    return sink.substitute({rng: outer * opt.amount + lid})


def _merged_reduce(sink: UOp, rng: UOp) -> tuple[UOp, UOp]:
    """The reduce ranges that go with `rng` (every REDUCE over one is over all of them: a convolution's kernel
    gradient over the batch, the rows and the columns) as one range in their loop order, each index its quotient
    and remainder: (sink, the range). So a block's threads split them together, adjacent threads on adjacent
    elements of the innermost (the batch alone put each thread's reads a whole image apart)."""
    reds = [u for u in sink.toposort() if u.op is Ops.REDUCE]
    mine = [red for red in reds if rng in red.src[1:]]
    with_it = [r for r in mine[0].src[1:] if r.arg[1] == "reduce" and
               all((r in red.src[1:]) == (rng in red.src[1:]) for red in reds)]
    if len(with_it) < 2:
        return sink, rng
    with_it.sort(key=lambda r: r.arg[0])
    size = math.prod(r.src[0].arg for r in with_it)
    merged = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, size),), rng.arg)
    index, inner = {}, 1
    for r in reversed(with_it):
        n = r.src[0].arg
        quotient = merged // inner if inner > 1 else merged
        index[r] = quotient % n if inner * n < size else quotient
        inner *= n
    mapping = {red: UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute(index), merged,
                                                 *(r for r in red.src[1:] if r not in index)), red.arg)
               for red in mine}
    return sink.substitute(mapping), merged


def group(sink: UOp, opt: Opt) -> UOp:
    rng = _range(sink, opt, "reduce")
    lid = _thread(sink, opt)
    sink, rng = _merged_reduce(sink, rng)
    sink, rng, outer = _strided(sink, rng, opt.amount)
    index = outer * opt.amount + lid
    mapping = {}
    for red in (u for u in sink.toposort() if u.op is Ops.REDUCE and rng in u.src[1:]):
        others = tuple(outer if r is rng else r for r in red.src[1:])
        partial = UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({rng: index}), *others), red.arg)
        mapping[red] = UOp(Ops.REDUCE, red.dtype, (partial, lid), red.arg)
    return sink.substitute(mapping)


def upcast_lanes(sink: UOp, opt: Opt) -> UOp:
    """The CPU's UPCAST with its lanes as copies: the NVPTX renderer has no vector ranges."""
    return upcast(sink, opt, vector=False)


def unroll_lanes(sink: UOp, opt: Opt) -> UOp:
    """The CPU's UNROLL with its lanes as copies (as `upcast_lanes`): a lone reduce's lanes are partial registers
    combined after the loop (independent chains); a register tile's reduces (TILE_REDUCES or more over the range)
    sum each one's lanes in its one register (the tile's registers times the lanes do not fit a thread's budget; the
    renderer chains them into FMAs, `LLVMRenderer.chained_update`), so that the lanes' adjacent reads of one row are
    one 16-byte load."""
    rng = ranges(sink).get(opt.axis)
    tile = rng is not None and sum(u.op is Ops.REDUCE and rng in u.src[1:] for u in sink.toposort()) >= TILE_REDUCES
    return unroll(sink, opt, vector=False, in_register=tile)


def _affine(u: UOp) -> dict[UOp | None, int] | None:
    """Index `u` as integer multiples of RANGEs and SPECIALs plus a constant (key None); None if it is not such a sum
    (a masked read's `where`, a division)."""
    if u.op is Ops.CONST:
        return {None: int(u.arg)}
    if u.op in (Ops.RANGE, Ops.SPECIAL):
        return {u: 1}
    parts = [_affine(s) for s in u.src]
    if any(a is None for a in parts):
        return None
    if u.op is Ops.NEG:
        return {k: -v for k, v in parts[0].items()}
    if u.op is Ops.ADD:
        out = dict(parts[0])
        for k, v in parts[1].items():
            out[k] = out.get(k, 0) + v
        return out
    if u.op is Ops.MUL:
        a, b = parts if set(parts[1]) <= {None} else parts[::-1]
        if not set(b) <= {None}:
            return None
        return {k: v * b.get(None, 0) for k, v in a.items()}
    return None


def _index(c: int, terms: Sequence[tuple[int, UOp]]) -> UOp:
    out = UOp.const(dtypes.index, c)
    for coef, x in terms:
        if coef:
            out = out + (x if coef == 1 else x * coef)
    return out


def _all(conds: list[UOp]) -> UOp | None:
    out = None
    for c in conds:
        out = c if out is None else out & c
    return out


def stage_shared(sink: UOp, opt: Opt) -> UOp:
    """SHARED(axis, depth): the operands a contraction reads along reduce range `axis` staged in shared memory by
    the block, `depth` steps of the range at a time (see the module's docstring). Applied after the grid axes."""
    rk = _range(sink, opt, "reduce")
    depth = opt.amount
    if depth < 2:
        raise KernelOptError(f"{opt}: a shared tile of one step shares nothing")
    nodes = sink.toposort()
    if any(u.op in (Ops.DEFINE_LOCAL, Ops.BARRIER) for u in nodes):
        raise KernelOptError(f"{opt}: this kernel stages its operands already")
    sp = specials(sink)
    if "lidx0" in sp:
        raise KernelOptError(f"{opt}: the block's threads are split by LOCAL/GROUP")
    threaded = [sp[n] for n in sorted(sp) if n.startswith("gidx") and sp[n].arg[2] > 1]
    if not threaded:
        raise KernelOptError(f"{opt}: a block of one thread along every grid axis shares no tile")
    # threads past a grid axis's end stay: they load their share of the tiles and wait at the barriers (a thread
    # that returned would leave the others waiting); their stores are gated and their other reads clamped instead
    size = {g.arg[0]: g.arg[1] for g in threaded}
    padded = {g: UOp(Ops.SPECIAL, dtypes.index, (), (g.arg[0], -(-g.arg[1] // g.arg[2]) * g.arg[2], g.arg[2]))
              for g in threaded if g.arg[1] % g.arg[2]}
    if padded:
        sink = sink.substitute(padded)
        nodes = sink.toposort()
        threaded = [padded.get(g, g) for g in threaded]
    reds = [u for u in nodes if u.op is Ops.REDUCE and rk in u.src[1:]]
    if any(len(r.src) != 2 or is_block_reduce(r) for r in reds):
        raise KernelOptError(f"{opt}: a reduce over {rk.arg} and other ranges")
    # the operands: global reads along the range, each an affine index of the range, thread ids and loops;
    # a family is the reads of one buffer whose indices differ by constants only (a register tile's rows or lanes)
    families: dict[tuple, dict[int, UOp]] = {}
    for red in reds:
        for u in red.src[0].toposort():
            if u.op is not Ops.LOAD or u.src[0].op is not Ops.INDEX or rk not in range_deps(u):
                continue
            aff = _affine(u.src[0].src[1])
            if u.src[0].src[0].op is not Ops.DEFINE_GLOBAL or aff is None or u.dtype.is_bool or \
                    any(k is not None and k.op is Ops.RANGE and k is not rk and k.arg[1] != "loop" for k in aff):
                raise KernelOptError(f"{opt}: read {u.src[0].src[1]} of the reduce is not a plain strided one")
            key = (u.src[0].src[0], u.dtype, tuple(sorted(((k.arg, v) for k, v in aff.items() if k is not None and v),
                                                          key=str)))
            families.setdefault(key, {})[aff.get(None, 0)] = u
    if not families:
        raise KernelOptError(f"{opt}: no read along range {rk.arg} to stage")
    steps = rk.src[0].arg
    ko = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, -(-steps // depth)),), rk.arg)
    fresh = 1 + max(u.arg[0] for u in nodes if u.op is Ops.RANGE)
    ki = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, depth),), (fresh, "reduce"))
    k = ko * depth + ki
    k_valid = [] if steps % depth == 0 else [k < steps]
    block = math.prod(g.arg[2] for g in threaded)
    tid = UOp(Ops.SPECIAL, dtypes.index, (), (TIDX, block))
    write_bar = UOp(Ops.BARRIER, None, (ko,))
    regs = [u for u in nodes if u.op is Ops.DEFINE_LOCAL]
    fills, reads = [], {}
    for n_fam, ((buf, dtype, _), loads) in enumerate(families.items()):
        offsets = sorted(loads)
        unit = offsets[1] - offsets[0] if len(offsets) > 1 else 1
        if any((o - offsets[0]) % unit or (o - offsets[0]) // unit != i for i, o in enumerate(offsets)):
            raise KernelOptError(f"{opt}: the reads of buffer {buf.arg[0]} are not evenly spaced copies")
        aff = _affine(loads[offsets[0]].src[0].src[1])
        copies = len(offsets)
        dep = [g for g in threaded if aff.get(g, 0)]
        # the tile: [step][thread along each grid axis it depends on][copy], a thread's copies side by side
        strides, inner = {}, copies
        for g in dep:
            strides[g], inner = inner, inner * g.arg[2]
        per_step = inner
        local = UOp(Ops.DEFINE_LOCAL, dtype, (), (len(regs) + n_fam, depth * per_step))
        # each thread reads its copies of a step from the tile
        base = _index(0, [(strides[g], g % g.arg[2]) for g in dep]) + ki * per_step
        reads[buf, dtype] = (local, {loads[o]: base + i for i, o in enumerate(offsets)})
        # ... and the block fills it: element e of the tile along the operand's own order in memory (its smallest
        # stride innermost, so adjacent threads read adjacent addresses), `lanes` adjacent elements a thread
        dims = sorted([(abs(aff[rk]), "step", depth), *((abs(aff[g]), g, g.arg[2]) for g in dep),
                       (abs(unit), "copy", copies)], key=lambda d: d[0])
        # lanes along the innermost digit where it is contiguous in memory and they divide it, and every mask is the
        # same for them (a masked step or row's end a multiple of them): one 16-byte read at an aligned address
        inner_coef, inner, inner_size = dims[0]
        lanes = GPU_VECTOR_BYTES // dtype.itemsize if inner_coef == 1 and inner_size % 2 == 0 else 1
        if inner == "step" and k_valid and steps % lanes or inner in padded.values() and size[inner.arg[0]] % lanes:
            lanes = 1
        while lanes > 1 and inner_size % lanes:
            lanes //= 2
        total = depth * per_step
        f = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, -(-total // (block * lanes))),),
                (fresh + 1 + n_fam, "reduce"))
        uniform = [(v, key) for key, v in aff.items() if key is not None and key is not rk and key not in dep]
        e = (f * block + tid) * lanes   # the thread's first element this step of the fill; its lanes follow
        digit, at = {}, 1
        for _, name, n in dims:
            digit[name] = (e // at if at > 1 else e) % n if at * n < total else (e // at if at > 1 else e)
            at *= n
        origin = {g: (g // g.arg[2]) * g.arg[2] for g in dep}
        idx = _index(offsets[0], [*uniform, (aff[rk], ko * depth + digit["step"]), (unit, digit["copy"]),
                                  *((aff[g], origin[g] + digit[g]) for g in dep)])
        conds = [e < total] if total % (block * lanes) else []
        conds += [origin[g] + digit[g] < size[g.arg[0]] for g in dep if g in padded.values()]
        conds += [ko * depth + digit["step"] < steps] if k_valid else []
        valid = _all(conds)
        first = idx if valid is None else clamp(buf, idx, valid)
        slot = _index(0, [(per_step, digit["step"]), (1, digit["copy"]), *((strides[g], digit[g]) for g in dep)])
        step_of = {"step": (aff[rk], per_step), "copy": (unit, 1), **{g: (aff[g], strides[g]) for g in dep}}
        memory_step, slot_step = step_of[inner]
        stores, values = [], []
        for lane in range(lanes):
            at_lane = first + lane * memory_step if lane else first
            value = UOp(Ops.LOAD, dtype, (UOp(Ops.INDEX, dtype, (buf, at_lane)),))
            value = value if valid is None else valid.where(value, value.const_like(0))
            gate = (e < total,) if total % (block * lanes) else ()
            stores.append(UOp(Ops.STORE, None, (UOp(Ops.INDEX, dtype, (UOp(Ops.AFTER, dtype, (local, write_bar)),
                                                                         slot + lane * slot_step if lane else slot)),
                                                value, *gate)))
            values.append(value)
        # (every lane's read before the stores: LLVM joins adjacent reads only where no store may come between)
        fills.append(UOp(Ops.REDUCE, dtype, (UOp(Ops.AFTER, dtype, (*values, *stores)), f), Ops.ADD))
    read_bar = UOp(Ops.BARRIER, None, tuple(fills))
    mapping = {}
    for red in reds:
        swap: dict[UOp, UOp] = {rk: k}
        for local, slots in reads.values():
            tile = UOp(Ops.AFTER, local.dtype, (local, read_bar))
            swap.update({ld: UOp(Ops.LOAD, ld.dtype, (UOp(Ops.INDEX, ld.dtype, (tile, slot)),))
                         for ld, slot in slots.items() if ld in red.src[0].toposort()})
        value = red.src[0].substitute(swap)
        if k_valid:
            value = k_valid[0].where(value, value.const_like(reduce_identity(red.arg, value.dtype)))
        mapping[red] = UOp(Ops.REDUCE, red.dtype, (value, ko, ki), red.arg)
    sink = sink.substitute(mapping)
    if not padded:
        return sink
    return _gate_padded_threads(sink, {g: size[g.arg[0]] for g in padded.values()}, set(read_bar.toposort()))


def _gate_padded_threads(sink: UOp, sizes: dict[UOp, int], fills: set[UOp]) -> UOp:
    """The stores of threads past a grid axis's end gated, their own global reads clamped into the buffer (not the
    tiles' fills, `fills`: a thread past the end loads its share of the block's tiles as every other)."""
    def valid(u: UOp) -> UOp | None:
        deps = set(u.toposort())
        return _all([g < n for g, n in sizes.items() if g in deps])
    stores = []
    for st in sink.src:
        v = valid(st.src[0].src[1]) if st.src[0].op is Ops.INDEX else None
        stores.append(st if v is None else st.replace(src=(*st.src[:2], v if len(st.src) == 2 else st.src[2] & v)))
    sink = sink.replace(src=tuple(stores))
    clamps = {}
    for u in sink.toposort():
        if u.op is Ops.LOAD and u not in fills and u.src[0].op is Ops.INDEX and \
                u.src[0].src[0].op is Ops.DEFINE_GLOBAL and (v := valid(u.src[0].src[1])) is not None:
            buf, off = u.src[0].src
            clamps[u.src[0]] = u.src[0].replace(src=(buf, clamp(buf, off, v)))
    return sink.substitute(clamps) if clamps else sink


_APPLY_GPU = {"GLOBAL": global_axis, "LOCAL": local_axis, "GROUP": group, "UPCAST": upcast_lanes,
              "UNROLL": unroll_lanes, "SHARED": stage_shared, "TC": tensor_core}


def gate_unthreaded_stores(sink: UOp) -> UOp:
    """A store that does not depend on the block's thread index (a row's sum, reduced by the whole block) is done by
    thread 0 alone."""
    lid = specials(sink).get("lidx0")
    if lid is None:
        return sink
    first = lid.alu(Ops.CMPEQ, UOp.const(dtypes.index, 0))
    stores = tuple(st if lid in st.toposort() else st.replace(src=(*st.src[:2], first if len(st.src) == 2 else
                                                                   st.src[2] & first)) for st in sink.src)
    return sink.replace(src=stores)


def apply_gpu_opt(sink: UOp, opt: Opt, simplify: bool = True) -> UOp:
    """One option on a GPU kernel: GLOBAL, LOCAL, GROUP here, the CPU's UPCAST, UNROLL, PADTO and SWAP as they are
    (THREAD, a CPU core split, is not a GPU option)."""
    if opt.op == "THREAD":
        raise KernelOptError(f"{opt}: THREAD splits over CPU cores; a GPU kernel uses GLOBAL/LOCAL")
    staged = {u.op for u in sink.toposort() if u.op in (Ops.DEFINE_LOCAL, Ops.WMMA)}
    if Ops.WMMA in staged:   # (a GROUP over its lanes would mix the lanes' fragments)
        raise KernelOptError(f"{opt}: TC comes alone (its warps, lanes and steps are the tensor core's)")
    if Ops.DEFINE_LOCAL in staged:
        raise KernelOptError(f"{opt}: SHARED comes last (its tiles are made for the block and the steps as they are)")
    if opt.op not in _APPLY_GPU:
        return apply_opt(sink, opt, simplify)
    out = _APPLY_GPU[opt.op](sink, opt)
    return simplify_after_opts(out, name="symbolic after opt") if simplify else out


def _pow2_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def hand_coded_gpu_opts(sink: UOp, target: GPUTarget) -> list[Opt]:
    """Default options for `target` (see the module's docstring)."""
    if config.NOOPT or any(u.op is Ops.REDUCE and isinstance(u.arg, tuple) for u in sink.toposort()):
        return []   # a loop kernel steps its carries in order: one thread
    if config.GPU_TC and (tc := tensor_core_opts(sink, target)) is not None:
        return tc   # a float16/bfloat16 contraction: warps of tensor-core tiles (tensor_cores.py)
    rngs = ranges(sink)
    loops = [r for r in sorted(rngs.values(), key=lambda r: r.arg[0]) if r.arg[1] == "loop"]
    reduces = [r for r in rngs.values() if r.arg[1] == "reduce"]
    red_nodes = [u for u in sink.toposort() if u.op is Ops.REDUCE]
    outputs = math.prod(r.src[0].arg for r in loops)
    row_kernel = any(not set(loops) <= range_deps(red) for red in red_nodes)
    longest = max((r.src[0].arg for r in reduces), default=0)
    if reduces and (row_kernel or (outputs < target.fill_threads() and longest >= target.warp_size)):
        # a block per row: its threads share the row's reduces (GROUP) and its outputs (LOCAL)
        n = target.group_threads(longest)
        opts: list[Opt] = []
        # the block's threads split the outermost reduces; one inside another's range (a row's max within a sum over
        # the rows) runs whole in each thread, on the rows that thread holds
        outermost = [red for red in red_nodes if not any(r.arg[1] == "reduce" for r in range_deps(red))]
        grouped = {max(red.src[1:], key=lambda r: r.src[0].arg).arg[0] for red in outermost}
        rows = [r for r in loops if any(r in range_deps(red) for red in red_nodes)]
        cols = [r for r in loops if r not in rows]
        grid: list[int] = []   # blocks along each grid axis: the rows, innermost on x; past three, sharing z
        for r in reversed(rows):
            size = r.src[0].arg
            if len(grid) < 3 and size <= target.max_grid[len(grid)]:
                grid.append(size)
            elif len(grid) == 3 and grid[2] * size <= target.max_grid[2]:
                grid[2] *= size
            else:
                continue
            opts.append(Opt("GLOBAL", r.arg[0], 1))
        opts += [Opt("GROUP", a, n) for a in sorted(grouped)]
        if cols:
            opts.append(Opt("LOCAL", cols[-1].arg[0], n))
        return opts
    opts = []
    sizes = {r.arg[0]: r.src[0].arg for r in loops}
    itemsize = _itemsize(sink)
    loads = [u.src[0].src[1] for u in sink.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX]
    if reduces and math.prod(r.src[0].arg for r in reduces) >= MIN_CONTRACTION and len(sink.src) == 1:
        # a contraction: a register tile a thread, vectorised along an output axis an input reads contiguously
        # (16-byte loads of it) and blocked along one another input does not depend on (each of its loads serves
        # the tile's lanes), as large as leaves the GPU filled (`_filling_tile`)
        lanes, rows = _filling_tile(*target.contraction_tile(itemsize), outputs, target)
        hot = [i for i in loads if any(_coef(i, r) != 0 for r in reduces)]
        vec = _vector_axis(loops, loads, hot, lanes, pad=False)
        blks = [] if vec is None else [r for r in reversed(loops) if r is not vec and r.src[0].arg % rows == 0 and
                                       any(_coef(i, r) == 0 for i in loads)]
        # best an axis no operand read along the vector's lanes depends on: each of those loads serves every row of
        # the tile (a convolution's image row serves 8 output channels, not 8 image rows each their own loads)
        blk = next((r for r in blks if not any(_coef(i, vec) != 0 and _coef(i, r) != 0 for i in loads)),
                   blks[0] if blks else None)
        if vec is not None and lanes > 1 and (rows == 1 or blk is not None) and any(_coef(i, vec) == 0 for i in loads):
            opts.append(Opt("UPCAST", vec.arg[0], lanes))
            sizes[vec.arg[0]] //= lanes
            if rows > 1:
                opts.append(Opt("UPCAST", blk.arg[0], rows))
                sizes[blk.arg[0]] //= rows
                if config.GPU_SMEM and (staged := _shared_opts(sink, target, opts, loops, sizes, vec, blk, reduces,
                                                               (lanes, rows), itemsize)) is not None:
                    return staged
        # the reduce a vector's lanes at a time where an operand's rows run along it: each row's lanes one 16-byte
        # load (a 4 x 8 tile's row values were a load per step: 32 loads for 128 FMAs, 12 now; a thread an output of a
        # batch of 128 through a layer, too few outputs for tiles, reads its row 16 bytes at a time: 8 loads for 4
        # FMAs, 5 now)
        width = target.lanes(itemsize)
        red = next((r for r in reduces if r.src[0].arg % width == 0 and r.src[0].arg > width and
                    any(_coef(i, r) == 1 for i in hot)), None)
        if red is not None:
            opts.append(Opt("UNROLL", red.arg[0], width))
    elif loops and len(sink.src) == 1 and sink.src[0].src[0].op is Ops.INDEX:
        # adjacent elements per thread: one 16-byte access instead of four (an axis the store and every load read
        # contiguously or not at all, and long enough to leave the GPU a warp per SM)
        lanes = target.lanes(itemsize)
        out = sink.src[0].src[0].src[1]
        vec = _vector_axis(loops, loads + [out], loads + [out], lanes, pad=False) if lanes > 1 else None
        if vec is not None and _coef(out, vec) == 1 and outputs // lanes >= target.sms * target.warp_size:
            opts.append(Opt("UPCAST", vec.arg[0], lanes))
            sizes[vec.arg[0]] //= lanes
    # blocks of `block_threads`, or smaller ones (down to a warp) where that leaves SMs without a block
    stores = [st.src[0].src[1] for st in sink.src if st.src[0].op is Ops.INDEX]
    axes = _grid_axes(loops, sizes, loads + stores)
    rest = [r for r in loops if sizes[r.arg[0]] > 1 and r not in axes]   # past the grid's three axes
    threads = math.prod(sizes[r.arg[0]] for r in axes + rest)
    budget = min(target.block_threads(), max(target.warp_size, 1 << (max(threads // target.sms, 1).bit_length() - 1)))
    grid: list[tuple[int, int]] = []   # each grid axis's length and threads a block
    for dim, r in enumerate(axes):
        size = sizes[r.arg[0]]
        n = min(_pow2_at_least(size), budget)
        if rest and dim == len(axes) - 1 and size % n:   # an axis others share has no padding (`_shared_grid_axis`)
            n = 1
        if -(-size // n) > target.max_grid[dim]:
            return opts
        opts.append(Opt("GLOBAL", r.arg[0], n))
        budget //= n
        grid.append((size, n))
    for r in rest:   # each shares the last grid axis, while its blocks stay within the grid's bounds
        size, n = grid[-1]
        if size * sizes[r.arg[0]] // n > target.max_grid[len(grid) - 1]:
            break
        opts.append(Opt("GLOBAL", r.arg[0], 1))
        grid[-1] = (size * sizes[r.arg[0]], n)
    return opts


def _shared_opts(sink: UOp, target: GPUTarget, tile: list[Opt], loops: list[UOp], sizes: dict[int, int], vec: UOp,
                 blk: UOp, reduces: list[UOp], shape: tuple[int, int], itemsize: int) -> list[Opt] | None:
    """A register-tiled contraction's options with its operands staged in shared memory (SHARED), or None where
    they do not apply: the block's threads a warp along the vectorised axis (its tile row one run of adjacent
    16-byte reads, the other operand's column one broadcast) and the rest of `block_threads` along the blocked one,
    every other output axis a grid axis of its own (three at most); the reduce staged `shared_tile_depth` steps at
    a time, fewer where they divide its length (no masked steps). Tried on the kernel: None where an option does
    not fit (an operand read through a mask, a reduce over more ranges)."""
    if len(reduces) != 1 or len([r for r in loops if sizes[r.arg[0]] > 1]) > 3:
        return None
    red, (lanes, rows) = reduces[0], shape
    nx = min(target.warp_size, _pow2_at_least(sizes[vec.arg[0]]))
    ny = min(target.block_threads() // nx, _pow2_at_least(sizes[blk.arg[0]]))
    if ny < 2:
        return None
    depth = target.shared_tile_depth(nx * lanes + ny * rows, itemsize)
    steps = red.src[0].arg
    fits = next((d for d in (depth >> i for i in range(depth.bit_length())) if d >= 2 and steps % d == 0), depth)
    if fits < 2 or steps < fits:
        return None
    grid = [Opt("GLOBAL", vec.arg[0], nx), Opt("GLOBAL", blk.arg[0], ny)]
    grid += [Opt("GLOBAL", r.arg[0], 1) for r in reversed(loops) if r not in (vec, blk) and sizes[r.arg[0]] > 1]
    for dim, o in enumerate(grid):
        if -(-sizes[o.axis] // o.amount) > target.max_grid[dim]:
            return None
    opts = [*tile, *grid, Opt("SHARED", red.arg[0], fits)]
    try:
        staged = sink
        for o in opts:
            staged = apply_gpu_opt(staged, o, simplify=False)
    except KernelOptError:
        return None
    return opts


def _filling_tile(lanes: int, rows: int, outputs: int, target: GPUTarget) -> tuple[int, int]:
    """The largest register tile within (`lanes`, `rows`) whose threads (one a tile) fill the GPU (`fill_threads`):
    its rows halved while they leave too few threads; none (1, 1) where a vector's lanes alone do. The CNN step's
    forward convolution, 262144 outputs, took 4 x 8 tiles: 8192 threads, two warps an SM of an H200's 132 (5.8 of
    its 7.5 ms there); in 4 x 1 tiles, 65536."""
    while rows > 1 and outputs // (lanes * rows) < target.fill_threads():
        rows //= 2
    return (lanes, rows) if outputs // lanes >= target.fill_threads() else (1, 1)


def _grid_axes(loops: list[UOp], sizes: dict[int, int], indices: list[UOp]) -> list[UOp]:
    """The loop axes (at most three, a grid's dimensions) the threads spread over, in the order they take a block's
    threads (x, y, z): the innermost longer than one first (adjacent threads on adjacent output elements), then the
    others nearest first (`_spread`: a warp's threads along them read and write closest together), longer first among
    equals. Past three: the innermost, the nearest of the others and the longest of the rest; those left share the
    last grid axis (`_shared_grid_axis`). A convolution's 128 x 32 x 8 x 8 outputs (the image rows and columns, the
    output channels, the batch) had its y threads on the channels (the two longest besides the columns were the batch
    and the channels): a warp read 16 weights 576 bytes apart each step; on the image rows, one."""
    live = [r for r in loops if sizes[r.arg[0]] > 1] or loops[-1:]
    if not live:
        return []
    inner, others = live[-1], sorted(live[:-1], key=lambda r: (_spread(r, sizes, indices), -sizes[r.arg[0]]))
    if len(live) <= 3:
        return [inner, *others]
    nearest, rest = others[0], others[1:]
    return [inner, nearest, max(rest, key=lambda r: sizes[r.arg[0]])]


def _spread(rng: UOp, sizes: dict[int, int], indices: list[UOp]) -> float:
    """How far apart adjacent indices of `rng` (as the grid sees it: an UPCAST leaves its step the lanes') put the
    kernel's accesses: the largest element step over `indices` (0: a broadcast along it in all), each index
    evaluated with every range at its middle and with `rng` a step on (`symbolic.evaluate`: a pooling window's
    `r // 2` steps as it does there; a padded read's mask left out); inf where an index reads memory (a gather's)."""
    step = rng.src[0].arg // sizes[rng.arg[0]]
    widest = 0
    for index in indices:
        while index.op is Ops.WHERE and index.src[2].op is Ops.CONST:   # a padded read strides where it reads
            index = index.src[1]
        middle = {r: r.src[0].arg // 2 for r in index.toposort() if r.op is Ops.RANGE}
        if rng not in middle:
            continue
        try:
            on = evaluate(index, {**middle, rng: min(middle[rng] + step, rng.src[0].arg - 1)})
            widest = max(widest, abs(on - evaluate(index, middle)))
        except NotStatic:
            return math.inf
    return widest


def launch_dims(sink: UOp) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The (grid, block) sizes a kernel with these thread ids is launched with."""
    grid, block = [1, 1, 1], [1, 1, 1]
    for name, u in specials(sink).items():
        if name.startswith("gidx"):
            d, n = int(name[4:]), u.arg[2]
            grid[d], block[d] = -(-u.arg[1] // n), n if n > 1 else block[d]
        elif name == "lidx0":
            block[0] = u.arg[1]
    return (grid[0], grid[1], grid[2]), (block[0], block[1], block[2])


def apply_hand_coded_gpu(sink: UOp, target: GPUTarget) -> tuple[UOp, list[Opt]]:
    """Apply the default options for `target`, skipping any that does not fit."""
    applied = []
    for opt in hand_coded_gpu_opts(sink, target):
        try:
            sink = apply_gpu_opt(sink, opt, simplify=False)
            applied.append(opt)
        except KernelOptError:
            continue
    return simplify_after_opts(sink) if applied else sink, applied


def optimize_gpu(sink: UOp, target: GPUTarget, opts: Sequence[Opt] | None = None) -> tuple[UOp, list[Opt]]:
    """The kernel with GPU options applied, and them: `opts` exactly when given, else the defaults for `target`."""
    if opts is None:
        sink, applied = apply_hand_coded_gpu(sink, target)
    else:
        for opt in opts:
            sink = apply_gpu_opt(sink, opt)
        applied = list(opts)
    grid, block = launch_dims(sink)
    if math.prod(block) > target.max_threads_per_block:
        raise KernelOptError(f"{applied}: {math.prod(block)} threads a block, {target.name} allows "
                             f"{target.max_threads_per_block}")
    if any(g > m for g, m in zip(grid, target.max_grid, strict=True)):
        raise KernelOptError(f"{applied}: grid {grid} exceeds {target.name}'s {target.max_grid}")
    tiles = sum(u.arg[1] * u.dtype.itemsize for u in sink.toposort() if u.op is Ops.DEFINE_LOCAL)
    if tiles > target.shared_per_block:
        raise KernelOptError(f"{applied}: {tiles} bytes of shared tiles a block, {target.name} allows "
                             f"{target.shared_per_block}")
    return gate_unthreaded_stores(sink), applied


# bytes of a block's tiles for the whole reduce on the stack of the CPU thread emulating it (`_emulated_tiles`);
# beyond it each emulated thread fills its block's tiles itself, a step at a time
EMULATED_TILE_BYTES = 4 << 20


def _emulated_tiles(sink: UOp, tid: UOp, fresh: int) -> UOp:
    """Shared tiles (`stage_shared`) on the CPU, one thread at a time: the block's tiles of every step of the reduce
    in a register buffer, filled once a block before its threads run, each step's fill a loop over the block's
    threads (each thread's share by its own index arithmetic and masks: a share that missed a slot, or wrote the
    wrong one, leaves a value a thread reads wrong); each thread reads its step's tiles from it. The grid axes are
    loops over the blocks, then over their threads. Where the whole reduce's tiles do not fit
    `EMULATED_TILE_BYTES`, each thread fills its block's tiles itself every step (the same check, slower)."""
    nodes = sink.toposort()
    n_regs = sum(u.op is Ops.DEFINE_REG for u in nodes)
    read_bar = next(u for u in nodes if u.op is Ops.BARRIER and u.src[0].op is Ops.REDUCE)
    write_bar = next(u for u in nodes if u.op is Ops.BARRIER and u.src[0].op is Ops.RANGE)
    ko, fills = write_bar.src[0], read_bar.src
    tiles = [u for u in nodes if u.op is Ops.DEFINE_LOCAL]
    steps = ko.src[0].arg
    whole = sum(u.arg[1] * u.dtype.itemsize for u in tiles) * steps <= EMULATED_TILE_BYTES
    reg = {u: UOp(Ops.DEFINE_REG, u.dtype, (), (n_regs + u.arg[0], u.arg[1] * (steps if whole else 1))) for u in tiles}

    def rng(size: int, kind: str) -> UOp:
        nonlocal fresh
        fresh += 1
        return UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, size),), (fresh - 1, kind))
    t_fill = rng(tid.arg[1], "reduce")
    k_fill = rng(steps, "reduce") if whole else ko
    grid = sorted((u for u in nodes if u.op is Ops.SPECIAL and u.arg[0].startswith("gidx")), key=lambda u: u.arg[0])
    blocks = {g: rng(-(-g.arg[1] // g.arg[2]), "loop") for g in grid}
    threads = {g: rng(g.arg[2], "loop") for g in grid if g.arg[2] > 1}

    def rebuild(root: UOp, at: UOp) -> UOp:
        """`root` with each tile access an access of its register buffer, at step `at` of the reduce."""
        new: dict[UOp, UOp] = {}
        for u in root.toposort():
            src = tuple(new[x] for x in u.src)
            if u.op is Ops.INDEX and src[0].op is Ops.AFTER and src[0].src[0].op is Ops.DEFINE_LOCAL:
                tile, slot = src[0].src[0], src[1]
                buf = reg[tile] if src[0].src[1] is write_bar else UOp(Ops.AFTER, tile.dtype, (reg[tile], *new_fills))
                new[u] = u.replace(src=(buf, slot + at * tile.arg[1] if whole else slot))
            else:
                new[u] = u if src == u.src else u.replace(src=src)
        return new[root]
    new_fills: tuple[UOp, ...] = ()
    # a fill reads the thread ids only through its block's origin, `(gidx // n) * n`: the block's loop alone
    origin = {g: blocks[g] * g.arg[2] if g.arg[2] > 1 else blocks[g] for g in grid}
    new_fills = tuple(UOp(Ops.REDUCE, f.dtype, (rebuild(f.src[0], k_fill).substitute({tid: t_fill, ko: k_fill,
                                                                                         **origin}),
                                                *f.src[1:], t_fill, *((k_fill,) if whole else ())), f.arg)
                      for f in fills)
    sink = rebuild(sink, ko)
    return sink.substitute({g: blocks[g] * g.arg[2] + threads[g] if g in threads else blocks[g] for g in grid})


def thread_loops(sink: UOp) -> UOp:
    """A GPU kernel (`optimize_gpu` applied) as the same computation in loops for the CPU: each block REDUCE a
    reduce range over the threads' partials (innermost first), each grid axis a loop over its indices (threads past
    its end do nothing), the block's threads a loop. Run on the CPU, it checks what the GPU options rewrote (index
    arithmetic, masks, partials) against numpy on a machine without a GPU."""
    def fresh() -> int:
        return max((r.arg[0] for r in ranges(sink).values()), default=-1) + 1
    sink = expand_ldmatrix(sink)   # a lane's fragment by ldmatrix: the tile's elements, as other lanes address them
    if (tid := specials(sink).get(TIDX)) is not None:
        sink = _emulated_tiles(sink, tid, fresh())
    sink = expand_wmma(sink)   # a warp's tensor-core op as the sums of each lane's elements, read as other lanes do
    while blocks := [u for u in sink.toposort() if is_block_reduce(u)]:
        red = blocks[0]   # toposort: sources first, so a block reduce inside another's partial goes first
        lid = red.src[1]
        r = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, lid.arg[1]),), (fresh(), "reduce"))
        sink = sink.substitute({red: UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({lid: r}), r), red.arg)})
    for u in sorted(specials(sink).values(), key=lambda u: u.arg[0]):
        sink = sink.substitute({u: UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, u.arg[1]),),
                                       (fresh(), "loop"))})
    return sink


__all__ = ["GPU_OPT_OPS", "thread_loops", "apply_gpu_opt", "hand_coded_gpu_opts", "launch_dims", "optimize_gpu"]
