"""search: BEAM, a timed search over a kernel's options (SPEC §7).

With `BEAM=n`, `optimize` asks `beam_search` for a kernel's options instead of the heuristics. The search is a beam
of width n over option lists: it starts from no options and the heuristics' list, and each round extends every list
in the beam by one more option (`actions`: UPCAST, UNROLL, THREAD, PADTO, SWAP at the amounts that fit), compiles
each candidate and times it on the device, and keeps the n fastest. It stops when a round finds nothing faster than
the best so far, or when `BEAM_BUDGET` seconds (per kernel) are spent. The best list wins if it still beats the
heuristics' list when the two are timed again, in turns; else the heuristics' list does.

Timing is real: each candidate runs through the HCQ runtime on scratch buffers of the kernel's sizes (random data,
every buffer its own, so no input is clobbered), bracketed by device TIMESTAMP packets; the minimum of a few runs
counts, and a candidate whose first run is 3x slower than the best so far is not run again. A native kernel cannot
be stopped once started, so a big kernel (more than `TIMED_TRIPS` innermost iterations before options) is timed on
a slice: its outermost loop runs 1/f of its iterations, the same f for every candidate, and the time is scaled
back up. Otherwise one poor candidate (the naive loop nest of a 1024^3 matmul takes seconds) would eat the budget.
Candidates that raise `KernelOptError` are skipped, and none is proposed with more lanes of upcast and unroll together
than the target's largest register tile (`Target.max_tile_lanes`: code size, and compile time, grow faster than speed);
the amounts tried come from the target's vector width too (`Target.upcast_amounts`, ...); two lists that give the same
kernel (hash-consing makes that `is`) are timed once.

Counting: each search adds one to `counters.search_count` and each compiled candidate to
`counters.search_compile_count`, never to `compile_count`, which counts only the programs compiled to run (the
winner is compiled once more under its own name and cache key, and counts there). Candidate programs stay loaded in
the process's one MCJIT engine (llvmlite cannot unload an object), a few KB each.

Results are cached by kernel key, search width, lowering code version and target (its cores included): in memory, and on
disk (`TGFX_CACHE_DIR/beam/`) as JSON with a SHA-256 checksum. An entry that is unreadable, fails its checksum or names
options that no longer fit is ignored and the kernel searched again; nothing is unpickled. So a second process on the
same cache searches nothing, and with the compiled-program cache (keyed by the options found) compiles nothing.

Kernels whose addresses depend on loaded data (a custom kernel's gather) are not searched, since random data could
address outside a buffer: they get the heuristics' options.

While it runs, a progress line on stderr (with `DEBUG>=1`, or when stderr is a terminal) shows the kernel, the
candidates timed and the best time so far.
"""
from __future__ import annotations

import hashlib
import json
import math
import pathlib
import sys
import time
from typing import Any

import numpy as np

from tgfx import config
from tgfx.counters import counters
from tgfx.devices import get_device
from tgfx.devices.hcq import Buffer, Program, Signal
from tgfx.devices.queue import HWQueue
from tgfx.devices.target import Target
from tgfx.diskcache import cache_path, read_bytes, write_atomic
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering import render_kernel
from tgfx.lowering.compile import compile_llvm, load_object, loaded, lowering_version
from tgfx.lowering.kernel_opts import OPT_OPS, KernelOptError, Opt, apply_opts, global_size, ranges
from tgfx.lowering.llvm_rules import RenderError
from tgfx.lowering.optimize import apply_hand_coded, opt_mode
from tgfx.lowering.optimize_gpu import GPU_OPT_OPS

RUNS = 3                 # timed runs of a candidate; the minimum counts
TIMED_TRIPS = 1 << 25    # innermost iterations a timed run does, about: bigger kernels are timed on a slice
EARLY_STOP = 3.0         # a first run this many times slower than the best is not repeated
CONFIRM_ROUNDS = 5       # runs each of the winner and the heuristics' options get in the final, interleaved timing

_found: dict[str, list[Opt]] = {}   # beam key -> the options found (this process)


# ---- the cache of results ----
def beam_key(kernel_key: str, width: int, target: Target) -> str:
    text = f"{kernel_key}|beam{width}|{lowering_version()}|{target.key}"
    return hashlib.sha256(text.encode()).hexdigest()


def _path(key: str) -> pathlib.Path:
    return cache_path("beam", key[:2], f"{key}.json")


def _checksum(key: str, opts: list[list[Any]]) -> str:
    return hashlib.sha256(json.dumps([key, opts], sort_keys=True).encode()).hexdigest()


def _read(key: str) -> list[Opt] | None:
    """The options of a valid disk entry, else None (absent, unreadable, malformed, or failing its checksum)."""
    data = read_bytes(_path(key))
    try:
        entry = json.loads(data) if data is not None else None
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("opts"), list):
        return None
    raw = entry["opts"]
    well_formed = all(isinstance(o, list) and len(o) == 3 and o[0] in OPT_OPS + GPU_OPT_OPS and
                      all(type(x) is int for x in o[1:]) for o in raw)
    if not well_formed or entry.get("checksum") != _checksum(key, raw):
        return None
    return [Opt(op, axis, amount) for op, axis, amount in raw]


def _write(key: str, opts: list[Opt], seconds: float) -> None:
    if not config.DISK_CACHE:
        return
    raw = [[o.op, o.axis, o.amount] for o in opts]
    text = json.dumps({"key": key, "opts": raw, "us": round(seconds * 1e6, 3), "checksum": _checksum(key, raw)})
    write_atomic(_path(key), text.encode())


def cached_search(kernel_key: str, width: int, target: Target) -> list[Opt] | None:
    """The options an earlier search for `target` (this process, or any process on this cache) found, or None."""
    key = beam_key(kernel_key, width, target)
    if key not in _found and (opts := _read(key)) is not None:
        _found[key] = opts
    return _found.get(key)


def clear_cache() -> None:
    """Forget this process's results (the disk entries stay)."""
    _found.clear()


# ---- the search ----
def actions(sink: UOp, opts: list[Opt], target: Target) -> list[Opt]:
    """The options that could extend `opts` (already applied to give `sink`) by one, at amounts `target`'s vectors
    and cores suggest; some may not fit."""
    max_lanes = target.max_tile_lanes()
    rngs = sorted(ranges(sink).values(), key=lambda r: r.arg[0])
    loops = [r for r in rngs if r.arg[1] == "loop"]
    lanes = math.prod(o.amount for o in opts if o.op in ("UPCAST", "UNROLL") and o.amount)   # (0: whole, no lanes)
    threaded = any(u.op is Ops.SPECIAL for u in sink.toposort())
    out: list[Opt] = []
    for r in rngs:
        size, rid = r.src[0].arg, r.arg[0]
        kind_amounts = target.upcast_amounts() if r.arg[1] == "loop" else target.unroll_amounts()
        out += [Opt("UPCAST" if r.arg[1] == "loop" else "UNROLL", rid, a) for a in kind_amounts
                if size % a == 0 and lanes * a <= max_lanes]
        out += [Opt("PADTO", rid, a) for a in target.padto_amounts() if size % a and size > a]
        if r.arg[1] == "loop" and not threaded and (n := target.thread_split(size)) > 1:
            out.append(Opt("THREAD", rid, n))
    out += [Opt("SWAP", a.arg[0], b.arg[0]) for i, a in enumerate(loops) for b in loops[i + 1:]]
    return out


def searchable(sink: UOp) -> bool:
    """Whether random scratch data is safe for this kernel: every address is computed from loop indices only."""
    index_math = (u.src[1] for u in sink.toposort() if u.op is Ops.INDEX)
    return bool(ranges(sink)) and not any(n.op is Ops.LOAD for off in index_math for n in off.toposort())


class _Bench:
    """Scratch buffers of one kernel's sizes on `device` (default: CPU:0, where the CPU's candidates run, whatever the
    default device: TGFX_DEVICE=CUDA made it a GPU, which cannot run them), filled with random values, and a timer
    for its candidates."""

    def __init__(self, sink: UOp, device: Any = None) -> None:
        self.dev = get_device("CPU:0") if device is None else device
        globals_ = {u.arg[0]: u for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL}
        rng = np.random.default_rng(0)
        self.bufs: list[Buffer] = []
        for slot in range(max(globals_) + 1):
            g = globals_.get(slot)
            if g is None:  # a slot the kernel does not use still needs a pointer
                self.bufs.append(self.dev.allocator.alloc(64))
                continue
            self.bufs.append(buf := self.dev.allocator.alloc(max(g.arg[1], 1) * g.dtype.itemsize))
            self.dev.allocator.copyin(buf, random_data(rng, g).view(np.uint8))
        self.marks = [Signal(0, name=f"beam.t{i}") for i in range(RUNS + 1)]

    def run(self, prog: Program, gs: int, n: int) -> list[float]:
        """Seconds each of `n` back-to-back runs took, by the device clock."""
        q = HWQueue().timestamp(self.marks[0])
        for i in range(n):
            q.exec(prog, self.bufs, global_size=gs).timestamp(self.marks[i + 1])
        q.submit(self.dev).wait()
        return [(self.marks[i + 1].value - self.marks[i].value) / 1e9 for i in range(n)]

    def time(self, prog: Program, gs: int, best: float) -> float:
        first = self.run(prog, gs, 1)[0]
        if first > EARLY_STOP * best:
            return first
        return min([first, *self.run(prog, gs, RUNS - 1)])


def random_data(rng: np.random.Generator, g: UOp) -> np.ndarray:
    """Values like real ones: normal floats (no NaN or denormal slow paths), small non-negative integers."""
    n, d = max(g.arg[1], 1), g.dtype
    if d.is_float:
        x = rng.standard_normal(n, dtype=np.float32)
        return (x.view(np.uint32) >> 16).astype(np.uint16) if d.name == "bfloat16" else x.astype(d.np)
    if d.is_bool:
        return rng.integers(0, 2, n).astype(np.uint8)
    return rng.integers(0, 8, n).astype(d.np)


class _Search:
    def __init__(self, sink: UOp, name: str, width: int, target: Target) -> None:
        self.sink, self.name, self.width, self.target = sink, name, width, target
        with config.Context(DEBUG=0):  # the scratch buffers' copies are not the program's either
            self.bench = self.make_bench()
            _ = self.bench.dev.profile_events
        self.deadline = time.perf_counter() + float(config.BEAM_BUDGET.value)
        self.timed: dict[UOp, float] = {}   # candidate kernel -> seconds
        self.slice = -(-math.prod(r.src[0].arg for r in ranges(sink).values()) // TIMED_TRIPS)
        self.best: tuple[float, list[Opt]] = (math.inf, [])
        self.show = config.DEBUG >= 1 or sys.stderr.isatty()
        self.shown = 0

    # ---- what a backend's search changes (tgfx/lowering/search_gpu.py) ----
    def make_bench(self) -> _Bench:
        return _Bench(self.sink)

    def apply(self, opts: list[Opt]) -> UOp:
        return apply_opts(self.sink, opts)

    def hand(self) -> list[Opt]:
        return apply_hand_coded(self.sink, self.target)[1]

    def starts(self, hand: list[Opt]) -> list[list[Opt]]:
        """The option lists the beam starts from: the heuristics' first (usually fast, they make a slow start stop
        early), and none at all."""
        return [hand, []]

    def actions(self, opts: list[Opt]) -> list[Opt]:
        return actions(self.apply(opts), opts, self.target)

    # ---- the search ----
    def evaluate(self, opts: list[Opt]) -> float | None:
        """Seconds the kernel takes with `opts`; None when they do not fit, give a kernel already timed, or do not
        compile."""
        try:
            cand = self.apply(opts)
        except KernelOptError:
            return None
        if cand in self.timed:
            return None
        try:
            prog, gs, scale = self.program(opts, cand)
        except (RenderError, RuntimeError):  # no renderer rule, or LLVM rejected the module: not a candidate
            self.timed[cand] = math.inf
            return None
        with config.Context(DEBUG=0):  # candidates are not the program's kernels: no per-run DEBUG lines
            secs = scale * self.bench.time(prog, gs, self.best[0] / scale)
            _ = self.bench.dev.profile_events  # drained here, unprinted
        self.timed[cand] = secs
        if secs < self.best[0]:
            self.best = (secs, opts)
        self.progress()
        return secs

    def program(self, opts: list[Opt], cand: UOp | None = None) -> tuple[Program, int, float]:
        """The candidate compiled (once per process) as it is timed, its launch size, and its time's scale."""
        cand = self.apply(opts) if cand is None else cand
        timed, scale = self.sliced(cand)
        tag = hashlib.sha256(f"{opt_mode(opts, self.target)}|{self.slice}".encode()).hexdigest()[:6]
        sym, load_key = f"{self.name}_beam{tag}", f"search|{self.sink.key}|{tag}"
        code = loaded(load_key)
        if code is None:
            ir, _, _ = render_kernel(sym, timed, opts, self.target)
            code = load_object(load_key, sym, compile_llvm(ir, candidate=True, target=self.target), self.target)
        return Program(sym, code.addr, keepalive=code), global_size(cand), scale

    def sliced(self, cand: UOp) -> tuple[UOp, float]:
        """The candidate with its outermost loop cut to 1/slice of its iterations, and the factor to scale its
        time by (the iterations of a loop do the same work; fewer of them stay in bounds)."""
        rngs = sorted(ranges(cand).values(), key=lambda r: (r.arg[1] != "loop", r.arg[0]))
        if self.slice == 1 or not rngs:
            return cand, 1.0
        outer = rngs[0]
        size = outer.src[0].arg
        keep = max(1, size // self.slice)
        cut = UOp(Ops.RANGE, outer.dtype, (UOp.const(outer.dtype, keep),), outer.arg)
        return cand.substitute({outer: cut}), size / keep

    def progress(self, end: str = "") -> None:
        if self.show:
            opts = ", ".join(f"{o.op} {o.axis} {o.amount}" for o in self.best[1]) or "none"
            line = f"BEAM {self.width} {self.name}: {len(self.timed)} candidates, best {self.best[0] * 1e6:.1f} us " \
                   f"({opts})"
            sys.stderr.write(f"\r{line.ljust(self.shown)}{end}")  # blanks what a longer line before left
            sys.stderr.flush()
            self.shown = len(line)

    def run(self) -> list[Opt]:
        hand = self.hand()
        beam = sorted(((t, o) for o in self.starts(hand) if (t := self.evaluate(o)) is not None),
                      key=lambda c: c[0])[:self.width]
        while beam and time.perf_counter() < self.deadline:
            best_before = self.best[0]
            children: list[tuple[float, list[Opt]]] = []
            for _, opts in beam:
                for act in self.actions(opts):
                    if time.perf_counter() >= self.deadline:
                        break
                    if (t := self.evaluate(opts + [act])) is not None:
                        children.append((t, opts + [act]))
            if not children or self.best[0] >= best_before:
                break
            beam = sorted(children, key=lambda c: c[0])[:self.width]
        self.progress(end="\n")
        return self.confirm(hand)

    def confirm(self, hand: list[Opt]) -> list[Opt]:
        """The winner, if it still beats the heuristics' options when the two are timed again, turn about: on a busy
        machine one lucky run can crown a slower kernel, and the search should never make a kernel slower."""
        if self.best[1] == hand:
            return hand
        progs = [self.program(opts) for opts in (self.best[1], hand)]
        mins = [math.inf, math.inf]
        with config.Context(DEBUG=0):
            for _ in range(CONFIRM_ROUNDS):
                for i, (prog, gs, scale) in enumerate(progs):
                    mins[i] = min(mins[i], scale * self.bench.run(prog, gs, 1)[0])
            _ = self.bench.dev.profile_events
        return self.best[1] if mins[0] < mins[1] else hand


def beam_search(sink: UOp, kernel_key: str, name: str, width: int, target: Target) -> tuple[UOp, list[Opt]]:
    """The kernel optimised with the options a search of width `width` for `target` finds (or found before: cached),
    and them.

    Called by `optimize` when `BEAM` > 0. `sink` is the kernel at index level, before options; `kernel_key` its
    AST's key, which names the cached result.
    """
    key = beam_key(kernel_key, width, target)
    if (opts := cached_search(kernel_key, width, target)) is not None:
        try:
            return apply_opts(sink, opts), opts
        except KernelOptError:  # options that do not fit this kernel: a stale or forged entry
            _found.pop(key, None)
    if not searchable(sink):
        return apply_hand_coded(sink, target)
    counters.search_count += 1
    search = _Search(sink, name, width, target)
    opts = search.run()
    _found[key] = opts
    _write(key, opts, search.best[0])
    return apply_opts(sink, opts), opts


__all__ = ["beam_search", "cached_search", "clear_cache", "actions"]
