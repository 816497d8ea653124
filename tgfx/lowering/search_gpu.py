"""search_gpu: BEAM on an NVIDIA GPU, the timed search of `search.py` over a kernel's GPU options.

With `BEAM=n`, a kernel for a CUDA device (`render_nvptx.gpu_kernel`) takes the options a beam of width n finds
instead of the heuristics' (`optimize_gpu.hand_coded_gpu_opts`). The search is the CPU's (`search._Search`: rounds
that extend each list in the beam by one option, the n fastest kept, a final timing against the heuristics' list,
turn about), with what a GPU changes:

- the options: GLOBAL, LOCAL and GROUP at thread counts from the target (a warp up to the block's maximum), and the
  CPU's UPCAST and UNROLL as lane copies (`gpu_actions`); the beam starts from the heuristics' list and each of its
  prefixes that puts the kernel on the grid (none at all would run it on one thread);
- a candidate is rendered to NVPTX, compiled to PTX by LLVM and loaded by the device's driver (which JIT-compiles it
  with ptxas), and timed by the device's own profile events around each launch (CUDA events), on scratch buffers in
  the device's memory filled with random values (`search.random_data`);
- results are cached as the CPU's are, by kernel, width, lowering version and target, and a GPU target's key holds
  the device's name and compute capability: another GPU model searches again.

Counting as for the CPU: `search_count` once per search, `search_compile_count` per candidate compiled, and the
winner's PTX counts in `compile_count` when it is compiled to run.
"""
from __future__ import annotations

from typing import Any

from tgfx.counters import counters
from tgfx.devices.queue import HWQueue
from tgfx.devices.target import GPUTarget
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.kernel_opts import KernelOptError, Opt, ranges
from tgfx.lowering.optimize_gpu import apply_hand_coded_gpu, optimize_gpu
from tgfx.lowering.search import _Bench, _found, _Search, _write, beam_key, cached_search, searchable


def gpu_actions(sink: UOp, target: GPUTarget) -> list[Opt]:
    """The options that could extend a GPU kernel's list by one (`sink`: the kernel with the list applied), at thread
    counts and lane amounts from `target`; some may not fit (`optimize_gpu` raises `KernelOptError` for those)."""
    warp, most = target.warp_size, target.max_threads_per_block
    counts = [n for n in (warp, 2 * warp, 4 * warp, 8 * warp, 16 * warp, 32 * warp) if n <= most]
    out: list[Opt] = []
    for r in sorted(ranges(sink).values(), key=lambda r: r.arg[0]):
        size, rid = r.src[0].arg, r.arg[0]
        if r.arg[1] == "loop":
            out += [Opt("GLOBAL", rid, n) for n in (1, *counts) if n == 1 or n <= 2 * size]
            out += [Opt("LOCAL", rid, n) for n in counts if n <= 2 * size]
            out += [Opt("UPCAST", rid, a) for a in (2, 4) if size % a == 0]
        elif r.arg[1] == "reduce":
            out += [Opt("GROUP", rid, n) for n in counts if n <= 2 * size]
            out += [Opt("UNROLL", rid, a) for a in (2, 4) if size % a == 0]
            out += [Opt("SHARED", rid, d) for d in (8, 16) if d <= size]   # (after the grid axes: others refuse it)
    return out


class _GpuBench(_Bench):
    """The CPU's scratch buffers of one kernel's sizes, on the GPU, and a timer of its candidates by the device's
    profile events."""

    def run(self, prog: Any, gs: int, n: int) -> list[float]:
        """Seconds each of `n` back-to-back launches took, by the device's events around each."""
        _ = self.dev.profile_events   # (what ran before is drained first)
        q = HWQueue()
        for _ in range(n):
            q.exec(prog, self.bufs, global_size=gs)
        q.submit(self.dev).wait()
        times = [(ev.end_ns - ev.start_ns) / 1e9 for ev in self.dev.profile_events if ev.name == prog.name]
        return times[-n:]


class _GpuSearch(_Search):
    def __init__(self, device: Any, ast: UOp, sink: UOp, name: str, width: int) -> None:
        self.device, self.ast = device, ast
        super().__init__(sink, name, width, device.target)
        self.slice = 1   # a candidate runs whole: a GPU spreads even a poor one over thousands of threads

    def make_bench(self) -> _Bench:
        return _GpuBench(self.sink, self.device)

    def apply(self, opts: list[Opt]) -> UOp:
        return optimize_gpu(self.sink, self.target, opts)[0]

    def hand(self) -> list[Opt]:
        return apply_hand_coded_gpu(self.sink, self.target)[1]

    def starts(self, hand: list[Opt]) -> list[list[Opt]]:
        return [hand[:i] for i in range(len(hand), 0, -1) if any(o.op == "GLOBAL" for o in hand[:i])] or [hand]

    def actions(self, opts: list[Opt]) -> list[Opt]:
        return gpu_actions(self.apply(opts), self.target)

    def program(self, opts: list[Opt], cand: UOp | None = None) -> tuple[Any, int, float]:
        from tgfx.lowering.render_nvptx import compile_ptx, kernel_ir
        ir, name, dims, _ = kernel_ir(self.ast, self.target, opts)
        counters.search_compile_count += 1
        kernel = self.device.load_kernel(compile_ptx(ir, self.target), name, dims)
        return kernel.program, kernel.global_size, 1.0


def gpu_beam_search(device: Any, ast: UOp, width: int) -> list[Opt] | None:
    """The GPU options a search of width `width` finds for kernel AST `ast` on `device` (or found before: cached), or
    None where the kernel is not searched (its addresses depend on loaded data): the heuristics' then."""
    from tgfx.lowering import index_level, kernel_name
    target, key = device.target, beam_key(ast.key, width, device.target)
    sink = index_level(ast, pieces=False)
    if (opts := cached_search(ast.key, width, target)) is not None:
        try:
            optimize_gpu(sink, target, opts)
            return opts
        except KernelOptError:   # options that do not fit this kernel: a stale or forged entry
            _found.pop(key, None)
    if not searchable(sink) or any(u.op is Ops.REDUCE and isinstance(u.arg, tuple) for u in sink.toposort()):
        return None   # (a loop kernel steps its carries in order on one thread: nothing to search)
    counters.search_count += 1
    search = _GpuSearch(device, ast, sink, kernel_name(ast), width)
    _found[key] = opts = search.run()
    _write(key, opts, search.best[0])
    return opts


__all__ = ["gpu_actions", "gpu_beam_search"]
