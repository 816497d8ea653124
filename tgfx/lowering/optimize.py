"""optimize: per-kernel options on ranges, applied as graph rewrites of the index-level kernel (SPEC §7).

An option is `Opt(op, axis, amount)`; `axis` names a range by its id (rangeify numbers the output axes first, then
each reduce's axes). Options:

- UPCAST: split an output range by `amount` and unroll the inner part: each store (and each reduce feeding it) is
  replicated per lane; LLVM's SLP vectoriser turns adjacent lanes into vector instructions, and lanes that read
  the same element share the load (register blocking).
- UNROLL: the same for a reduce range: `amount` consecutive iterations are combined in one loop iteration.
- THREAD: split an output range across `amount` cores: the kernel receives its core id (a `SPECIAL`) and the runtime
  launches it with `global_size = amount`.
- PADTO, SWAP, LOCAL, GROUP: part of the interface (GPU backends, search); not applied on the CPU yet.

An option that does not fit the kernel raises `KernelOptError`, which search skips. `hand_coded_opts` picks the
defaults: register-block contractions (UPCAST a stride-1 output axis by 8 and a reused one by 4) and spread large
kernels over the cores.
"""
from __future__ import annotations

from dataclasses import dataclass

from tgfx import config
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.linearize import range_deps
from tgfx.lowering.symbolic import pm_symbolic


class KernelOptError(ValueError):
    pass


@dataclass(frozen=True)
class Opt:
    op: str
    axis: int
    amount: int

    def __repr__(self) -> str:
        return f"Opt({self.op}, {self.axis}, {self.amount})"


def ranges(sink: UOp) -> dict[int, UOp]:
    return {u.arg[0]: u for u in sink.toposort() if u.op is Ops.RANGE}


def _split(sink: UOp, opt: Opt, kind: str) -> tuple[UOp, UOp, int]:
    if opt.op != "THREAD" and any(u.op is Ops.REDUCE and isinstance(u.arg, tuple) for u in sink.toposort()):
        raise KernelOptError(f"{opt}: a loop kernel's carries are stepped in order; only THREAD applies")
    rng = ranges(sink).get(opt.axis)
    if rng is None or rng.arg[1] != kind:
        raise KernelOptError(f"{opt}: no {kind} range {opt.axis} in this kernel")
    size = rng.src[0].arg
    if opt.amount <= 1 or size % opt.amount:
        raise KernelOptError(f"{opt}: range of size {size} does not split by {opt.amount}")
    outer = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, size // opt.amount),), rng.arg)
    return rng, outer, size


def upcast(sink: UOp, opt: Opt) -> UOp:
    rng, outer, _ = _split(sink, opt, "loop")
    lanes = [outer * opt.amount + c for c in range(opt.amount)]
    stores = [st.substitute({rng: lane}) if rng in range_deps(st) else st for st in sink.src for lane in
              (lanes if rng in range_deps(st) else lanes[:1])]
    return UOp(Ops.SINK, None, tuple(dict.fromkeys(stores)), sink.arg)


def unroll(sink: UOp, opt: Opt) -> UOp:
    """Each reduce over the range becomes `amount` partial reduces over its lanes (independent accumulators, which
    the linearizer puts in one loop and SLP vectorises), combined after the loop."""
    rng, outer, _ = _split(sink, opt, "reduce")
    lanes = [outer * opt.amount + c for c in range(opt.amount)]
    mapping = {}
    for red in (u for u in sink.toposort() if u.op is Ops.REDUCE and rng in u.src[1:]):
        others = tuple(outer if r is rng else r for r in red.src[1:])
        parts = [UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({rng: lane}), *others), red.arg) for lane in lanes]
        while len(parts) > 1:  # a balanced tree of combines
            parts = [UOp(red.arg, red.dtype, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i]
                     for i in range(0, len(parts), 2)]
        mapping[red] = parts[0]
    return sink.substitute(mapping)


def thread(sink: UOp, opt: Opt) -> UOp:
    rng, outer, size = _split(sink, opt, "loop")
    if any(u.op is Ops.SPECIAL for u in sink.toposort()):
        raise KernelOptError(f"{opt}: the kernel is already split across cores")
    core = UOp(Ops.SPECIAL, dtypes.index, (), ("core", opt.amount))
    return sink.substitute({rng: core * (size // opt.amount) + outer})


_APPLY = {"UPCAST": upcast, "UNROLL": unroll, "THREAD": thread}


def apply_opt(sink: UOp, opt: Opt) -> UOp:
    if opt.op not in _APPLY:
        raise KernelOptError(f"{opt}: {opt.op} is not supported on the CPU")
    return graph_rewrite(_APPLY[opt.op](sink, opt), pm_symbolic, name="symbolic after opt")


def vector_lanes() -> int:
    """float32 lanes of the host's widest vector registers."""
    from tgfx.lowering.compile import engine
    return 16 if "+avx512f" in engine().target else 8


def global_size(sink: UOp) -> int:
    """How many core ids the kernel is launched with."""
    return max((u.arg[1] for u in sink.toposort() if u.op is Ops.SPECIAL), default=1)


def _coef(index: UOp, rng: UOp) -> int | None:
    """The constant stride of `rng` in an index that is a sum of terms (None if it appears non-linearly). A masked
    index `where(valid, i, 0)` (a padded read) strides as i does where it reads."""
    while index.op is Ops.WHERE and index.src[2].op is Ops.CONST:
        index = index.src[1]
    terms = [index]
    while any(t.op is Ops.ADD for t in terms):
        terms = [s for t in terms for s in (t.src if t.op is Ops.ADD else (t,))]
    total = 0
    for t in terms:
        if t is rng:
            total += 1
        elif t.op is Ops.MUL and t.src[0] is rng and t.src[1].op is Ops.CONST:
            total += t.src[1].arg
        elif rng in range_deps(t):
            return None
    return total


def hand_coded_opts(sink: UOp, cores: int) -> list[Opt]:
    """Default options: register blocking for contractions, and threads for big kernels."""
    if config.NOOPT:
        return []
    rngs = ranges(sink)
    loops = [r for r in sorted(rngs.values(), key=lambda r: r.arg[0]) if r.arg[1] == "loop"]
    reduces = [r for r in rngs.values() if r.arg[1] == "reduce"]
    loads = [u.src[0].src[1] for u in sink.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX]
    work = 1
    for r in rngs.values():
        work *= r.src[0].arg
    opts: list[Opt] = []
    red_size = 1
    for r in reduces:
        red_size *= r.src[0].arg
    if reduces and red_size >= 8 and len(sink.src) == 1:
        # a contraction: vectorise an output axis some input reads contiguously, block another that an input reuses.
        # The tile (two vector registers of lanes x 8 rows with AVX-512, 16 x 4 otherwise) keeps every accumulator
        # in a register.
        lanes = vector_lanes()
        for vec_amt, blk_amt in ((2 * lanes, 8 if lanes >= 16 else 4), (lanes, 4), (8, 4), (8, 2)):
            vec = next((r for r in reversed(loops) if r.src[0].arg % vec_amt == 0 and
                        any(_coef(i, r) == 1 for i in loads)), None)
            if vec is None or not any(_coef(i, vec) == 0 for i in loads):
                continue
            opts.append(Opt("UPCAST", vec.arg[0], vec_amt))
            blk = next((r for r in reversed(loops) if r is not vec and r.src[0].arg % blk_amt == 0 and
                        any(_coef(i, r) == 0 for i in loads)), None)
            if blk is not None:
                opts.append(Opt("UPCAST", blk.arg[0], blk_amt))
            break
    if cores > 1 and work >= 1 << 17:
        sizes = {r.arg[0]: r.src[0].arg for r in loops}
        for o in opts:
            if o.axis in sizes:
                sizes[o.axis] //= o.amount
        outer = next((a for a in sorted(sizes) if sizes[a] % cores == 0 and sizes[a] >= cores), None)
        if outer is not None:
            opts.append(Opt("THREAD", outer, cores))
    return opts


def optimize(sink: UOp, cores: int) -> tuple[UOp, list[Opt]]:
    """Apply the default options; an option that does not fit is skipped."""
    applied = []
    for opt in hand_coded_opts(sink, cores):
        try:
            sink = apply_opt(sink, opt)
            applied.append(opt)
        except KernelOptError:
            continue
    return sink, applied
