"""gpu_cost: a static launch and memory model of a GPU kernel (`optimize_gpu` applied), read off its thread ids.

No timing and no device: what a launch of the kernel asks of a `GPUTarget`, to find the kernels that leave the GPU
idle or waste its memory bandwidth before a GPU is at hand (DEBUG=3 prints it for each GPU kernel compiled).

- **Fill**: threads launched (grid x block) against the threads the GPU holds at once (SMs x resident threads an
  SM): below one, SMs sit idle or hold too few warps to hide a load's latency.
- **Work a thread**: the trip counts of the loops each thread still runs (the ranges the options left), and the
  iterations of its deepest nest.
- **Coalescing**: for each global load and store, the addresses one warp's 32 threads touch. The warp's thread ids
  (`lidx0`, and each grid axis's threads of a block: `gidx<d>` = block index * n + thread index) are substituted
  into the access's index expression with every other range at its middle and the block in the middle of the grid,
  and the index evaluated as the compiled code would (`symbolic.evaluate`: the IR's own integer semantics). Its
  stride is the address step between the warp's first two threads (0: a broadcast, 1: coalesced), its sectors the
  distinct 32-byte sectors the warp touches. An UPCAST's copies of one access each step by its lanes; together
  (all accesses of one buffer at one point) they cover whole sectors, which `BufferCost.efficiency` shows.

An index that reads memory (a gather) has no static address: its stride and sectors are None.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tgfx.devices.target import GPUTarget
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.linearize import is_block_reduce, range_deps
from tgfx.lowering.optimize_gpu import TIDX, launch_dims, specials
from tgfx.lowering.symbolic import NotStatic, evaluate

SECTOR_BYTES = 32   # the unit a warp's global access is served in (L1/L2 sectors of every architecture since sm_60)


@dataclass(frozen=True)
class AccessCost:
    """One global LOAD or STORE as one warp issues it."""
    kind: str              # "load" or "store"
    buffer: int            # the buffer's slot
    itemsize: int
    stride: int | None     # elements between the addresses of the warp's first two threads; None: data-dependent
    sectors: int | None    # distinct 32-byte sectors the warp's active threads touch; None: data-dependent
    addresses: tuple[int, ...] = ()   # the active threads' element offsets (a lane masked off has none)

    @property
    def broadcast(self) -> bool:
        """Every active thread of the warp on one address: one sector serves them all."""
        return self.sectors is not None and len(set(self.addresses)) <= 1

    @property
    def dense_sectors(self) -> int:
        """The sectors this access would touch were its threads on adjacent elements (coalesced)."""
        return -(-len(self.addresses) * self.itemsize // SECTOR_BYTES)


@dataclass(frozen=True)
class BufferCost:
    """All accesses of one kind to one buffer at one point of the loops, together: an UPCAST's copies (each strided
    by the lanes, together adjacent), a stencil's taps. A broadcast is counted apart."""
    kind: str
    buffer: int
    accesses: int
    broadcasts: int
    sectors: int | None        # distinct sectors the accesses that are not broadcasts touch, together
    dense_sectors: int | None  # what they would touch, each coalesced
    used_bytes: int | None     # distinct bytes they read or write

    @property
    def coalesced(self) -> bool:
        """No more sectors than as many coalesced accesses would fetch (broadcasts are)."""
        return self.sectors is not None and self.dense_sectors is not None and self.sectors <= self.dense_sectors

    @property
    def efficiency(self) -> float | None:
        """The share of the fetched sectors' bytes the warp uses (1.0: all; 0.125: a float of each 32 bytes)."""
        if self.sectors is None or self.used_bytes is None:
            return None
        return 1.0 if not self.sectors else min(self.used_bytes / (self.sectors * SECTOR_BYTES), 1.0)


@dataclass(frozen=True)
class LaunchCost:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    threads: int                          # threads launched (grid x block)
    resident: int                         # threads the target holds at once (SMs x resident threads an SM)
    loops: tuple[tuple[str, int], ...]    # each range a thread still loops over: (its kind and id, trips)
    trips: int                            # iterations of a thread's deepest nest of loops
    accesses: tuple[AccessCost, ...]
    buffers: tuple[BufferCost, ...]

    @property
    def fill(self) -> float:
        """Threads launched per thread the GPU holds at once (below 1: idle thread slots in the first wave)."""
        return self.threads / self.resident

    @property
    def uncoalesced(self) -> tuple[BufferCost, ...]:
        """The buffers whose accesses fetch more sectors than coalesced ones would (or have no static address)."""
        return tuple(b for b in self.buffers if not b.coalesced)

    def __str__(self) -> str:
        lines = [f"{self.name}: grid {self.grid} block {self.block}: {self.threads} threads, fill {self.fill:.2f} "
                 f"of {self.resident}; a thread loops {self.trips} ({', '.join(f'{k}={n}' for k, n in self.loops)})"]
        for b in self.buffers:
            if b.broadcasts == b.accesses:
                lines.append(f"  {b.kind:5s} buf{b.buffer}: {b.accesses} accesses, every one a broadcast")
                continue
            mine = [a for a in self.accesses if a.buffer == b.buffer and a.kind == b.kind and not a.broadcast]
            strides = sorted({a.stride for a in mine}, key=lambda s: (s is None, s or 0))
            each = sorted({a.sectors for a in mine}, key=lambda s: s or 0)
            eff = "?" if b.efficiency is None else f"{b.efficiency:.2f}"
            lines.append(f"  {b.kind:5s} buf{b.buffer}: {b.accesses} accesses, {b.broadcasts} broadcast; the others "
                         f"stride {strides}, sectors a warp {each}, together {b.sectors} (coalesced {b.dense_sectors}, "
                         f"{eff} of their bytes used){'' if b.coalesced else '  UNCOALESCED'}")
        return "\n".join(lines)


def _warp_ids(sink: UOp, block: tuple[int, int, int], grid: tuple[int, int, int],
              warp: int) -> list[dict[UOp, int] | None]:
    """The thread ids of the first warp of the middle block: for each lane, its SPECIALs' values (None for a lane past
    its grid axis's end, which returns at entry)."""
    bid = [g // 2 for g in grid]
    lanes: list[dict[UOp, int] | None] = []
    for lin in range(min(warp, math.prod(block))):
        tid = (lin % block[0], lin // block[0] % block[1], lin // (block[0] * block[1]))
        env: dict[UOp, int] | None = {}
        for name, sp in specials(sink).items():
            if name == "lidx0":
                env[sp] = tid[0]
                continue
            if name == TIDX:   # (a shared tile's fill: the thread's index in its block)
                env[sp] = lin
                continue
            d, size, n = int(name[4:]), sp.arg[1], sp.arg[2]
            v = bid[d] * n + tid[d] if n > 1 else bid[d]
            if v >= size:
                env = None
                break
            env[sp] = v
        lanes.append(env)
    return lanes


def _gate(st_or_idx: UOp) -> UOp | None:
    return st_or_idx.src[2] if len(st_or_idx.src) > 2 else None


def _access(kind: str, index: UOp, gate: UOp | None, lanes: list[dict[UOp, int] | None],
            middle: dict[UOp, int]) -> AccessCost:
    buf, expr = index.src[0], index.src[1]
    itemsize = index.dtype.itemsize if index.dtype is not None else buf.dtype.itemsize
    addrs: list[int | None] = []
    try:
        for env in lanes:
            if env is None:
                addrs.append(None)
                continue
            full = {**middle, **env}
            if gate is not None and not evaluate(gate, full):
                addrs.append(None)
                continue
            addrs.append(evaluate(expr, full))
    except NotStatic:
        return AccessCost(kind, buf.arg[0], itemsize, None, None)
    active = tuple(a for a in addrs if a is not None)
    stride = addrs[1] - addrs[0] if len(addrs) > 1 and addrs[0] is not None and addrs[1] is not None else \
        0 if len(set(active)) <= 1 else None
    sectors = len({a * itemsize // SECTOR_BYTES for a in active})
    return AccessCost(kind, buf.arg[0], itemsize, stride, sectors, active)


def _buffers(accesses: list[AccessCost]) -> tuple[BufferCost, ...]:
    out = []
    for kind, slot in sorted({(a.kind, a.buffer) for a in accesses}):
        mine = [a for a in accesses if a.kind == kind and a.buffer == slot]
        spread = [a for a in mine if not a.broadcast]
        if any(a.sectors is None for a in spread):
            out.append(BufferCost(kind, slot, len(mine), len(mine) - len(spread), None, None, None))
            continue
        elems = {x for a in spread for x in a.addresses}
        size = mine[0].itemsize
        out.append(BufferCost(kind, slot, len(mine), len(mine) - len(spread),
                              len({x * size // SECTOR_BYTES for x in elems}), sum(a.dense_sectors for a in spread),
                              len(elems) * size))
    return tuple(out)


def launch_cost(sink: UOp, target: GPUTarget, name: str = "kernel") -> LaunchCost:
    """The model of GPU kernel `sink` (`optimize_gpu`'s result) launched on `target`."""
    grid, block = launch_dims(sink)
    nodes = sink.toposort()
    rngs = sorted({u for u in nodes if u.op is Ops.RANGE}, key=lambda r: r.arg[0])
    middle = {r: r.src[0].arg // 2 for r in rngs}
    lanes = _warp_ids(sink, block, grid, target.warp_size)
    accesses = []
    for u in nodes:
        if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL:
            accesses.append(_access("load", u.src[0], _gate(u.src[0]), lanes, middle))
        elif u.op is Ops.STORE and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.DEFINE_GLOBAL:
            accesses.append(_access("store", u.src[0], _gate(u), lanes, middle))
    # a thread's deepest nest: the ranges around each reduce's source, or a store's (its own loops)
    nests = [range_deps(u.src[0]) | set(u.src[1:]) for u in nodes
             if u.op is Ops.REDUCE and not is_block_reduce(u) and u.src[1].op is Ops.RANGE]
    nests += [range_deps(u) for u in nodes if u.op is Ops.STORE]
    trips = max((math.prod(r.src[0].arg for r in nest if r.op is Ops.RANGE) for nest in nests), default=1)
    resident = target.sms * target.threads_per_sm
    return LaunchCost(name, grid, block, math.prod(grid) * math.prod(block), resident,
                      tuple((f"{r.arg[1]}{r.arg[0]}", r.src[0].arg) for r in rngs), trips, tuple(accesses),
                      _buffers(accesses))


__all__ = ["AccessCost", "BufferCost", "LaunchCost", "launch_cost"]
