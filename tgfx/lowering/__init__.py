"""The lowering pipeline, top to bottom.

    tensor graph ──inline FUNCTIONs──▶ ──multi (sharded values to per-device graphs)──▶ ──allreduce (rings)──▶
                 ──schedule (cached per graph key)──▶ LINEAR of kernel CALLs
    per kernel (`compile_kernel`, cached by `lower_kernel`): rangeify ─▶ transcendental ─▶ symbolic ─▶ optimize
                (heuristics, or BEAM search) ─▶ linearize ─▶ render LLVM IR ─▶ compile (llvmlite) ─▶ load
    LINEAR ──execute──▶ device queues (a kernel that came before with other float constants: `lifted.choose`)
    for an NVIDIA GPU (`render_nvptx.ptx_of`): the same index level ─▶ optimize_gpu (grid, block, grouped reduces)
                ─▶ linearize ─▶ render NVPTX LLVM IR ─▶ PTX (llvmlite, libdevice linked) ─▶ the CUDA runtime loads it

`realize(uops)` runs the whole pipeline and returns each uop's result as a view of a buffer.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import math
import os
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from tgfx import config, forksafe
from tgfx.counters import counters
from tgfx.devices.hcq import Program
from tgfx.devices.target import Target, host_target, native_target
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.pattern import graph_rewrite, keep_rewritten, release_rewritten
from tgfx.ir.spec import check_stage
from tgfx.ir.uop import UOp, buffers
from tgfx.lowering.block_sum import block_sums, nested_sums
from tgfx.lowering.compile import (
    CompileQueue,
    KernelCode,
    Objects,
    cache_key,
    compile_llvm,
    compile_workers,
    compiler,
    load_object,
    read_cached,
    write_cached,
)
from tgfx.lowering.constants import const_buffer
from tgfx.lowering.control import merge_saved_loops
from tgfx.lowering.eager import Description, describe, dispatch_mode, graph_template
from tgfx.lowering.execute import RANGE_OPS, buffer_memory, range_view
from tgfx.lowering.gather import collapse_scatter, pm_gather
from tgfx.lowering.half import pm_widen_half_max
from tgfx.lowering.inline import check_no_params, inline, walk
from tgfx.lowering.kernel_opts import (
    Opt,
    global_size,
    merge_loops,
    merge_reduce_ranges,
    order_reduce_ranges,
    split_ranges,
)
from tgfx.lowering.linearize import linearize, range_deps, vector_ranges
from tgfx.lowering.lru import LRU
from tgfx.lowering.multi import RingCtx, bucket_allreduces, device_parts, has_multi, pm_allreduce, pm_multi
from tgfx.lowering.multi_process import has_remote, keep_local, lower_cross_process
from tgfx.lowering.optimize import forced_opts, opt_mode, optimize
from tgfx.lowering.panel_buffer import panel_buffers
from tgfx.lowering.rangeify import rangeify
from tgfx.lowering.reduce_chains import SMALL_KERNEL_OPS
from tgfx.lowering.render_llvm import render_llvm
from tgfx.lowering.row_buffer import row_buffers
from tgfx.lowering.symbolic import pm_given_valid, pm_symbolic
from tgfx.lowering.transcendental import pm_transcendental


@dataclass(frozen=True)
class KernelObject:
    """A kernel compiled to an object file, with what launching it needs: what `compile_kernel` returns and the disk
    cache stores."""
    name: str          # the object's function symbol
    obj: bytes
    nbufs: int
    mode: str          # what chose its options (`opt_mode`): part of its cache key
    flops: int = 0     # arithmetic ops on values (not index math), for DEBUG>=2 throughput
    mem_bytes: int = 0  # bytes of every buffer the kernel touches, once
    global_size: int = 1  # core ids it is launched with (THREAD)
    opts: tuple[Opt, ...] = ()  # the options applied, for DEBUG>=2
    src: str = ""      # LLVM IR as rendered ("" when read from the disk cache)
    vals: tuple[int, ...] = ()  # the values every launch passes (a trip count read at run time: `runtime_trips`)
    symbols: tuple[str, ...] = ()  # the kernels `obj` defines, when it is a batch's (`CompileQueue`); else `name`

    def meta(self) -> dict[str, Any]:
        return {"name": self.name, "nbufs": self.nbufs, "mode": self.mode, "flops": self.flops,
                "mem_bytes": self.mem_bytes, "global_size": self.global_size,
                "opts": [[o.op, o.axis, o.amount] for o in self.opts], "vals": list(self.vals),
                "symbols": list(self.symbols or (self.name,))}

    @staticmethod
    def from_meta(meta: dict[str, Any], obj: bytes) -> KernelObject:
        return KernelObject(meta["name"], obj, meta["nbufs"], meta["mode"], meta["flops"], meta["mem_bytes"],
                            meta["global_size"], tuple(Opt(*o) for o in meta["opts"]), vals=tuple(meta["vals"]),
                            symbols=tuple(meta["symbols"]))


@dataclass(frozen=True)
class KernelSource:
    """A kernel through every stage but LLVM's: its IR and launch metadata (`kernel_source`)."""
    name: str
    ir: str
    nbufs: int
    mode: str
    flops: int
    mem_bytes: int
    global_size: int
    opts: tuple[Opt, ...]
    vals: tuple[int, ...] = ()

    def assemble(self, obj: bytes | Objects) -> KernelObject:
        """This kernel's KernelObject in `obj`: its own object file, or a batch's (`Objects`)."""
        objects = obj if isinstance(obj, Objects) else Objects(obj, (self.name,))
        return KernelObject(self.name, objects.obj, self.nbufs, self.mode, self.flops, self.mem_bytes,
                            self.global_size, self.opts, self.ir, self.vals, objects.symbols)


@dataclass(frozen=True)
class CompiledKernel:
    """A kernel loaded to run: its code (`code.addr` is valid while the code is held), and the device Program that
    launches it, which holds the code too (command buffers and running submissions hold the Program)."""
    name: str
    code: KernelCode
    nbufs: int
    ast: UOp
    src: str           # LLVM IR as rendered
    flops: int = 0
    mem_bytes: int = 0
    global_size: int = 1
    opts: tuple[Opt, ...] = ()
    vals: tuple[int, ...] = ()   # what each launch passes as its values (`runtime_trips`)
    program: Program = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        prog = Program(self.name, self.code.addr, keepalive=self.code)
        prog.flops, prog.mem_bytes, prog.opts = self.flops, self.mem_bytes, self.opts
        object.__setattr__(self, "program", prog)

    @property
    def addr(self) -> int:   # native entry point, calling convention of tgfx/devices/hcq.py
        return self.code.addr


# by (kernel key, opt_mode); a kernel a program holds outlives its entry here
_kernels: LRU[tuple[str, str], CompiledKernel] = LRU(lambda: int(config.KERNEL_CACHE_SIZE))


def kernel_name(ast: UOp) -> str:
    """A short readable name: the ops that dominate, and the output shape."""
    store = ast.src[0]
    if isinstance(ast.arg, str):  # a custom kernel's own name, made a valid symbol
        return re.sub(r"[^A-Za-z0-9_]", "_", ast.arg) + f"_{ast.key[:8]}"
    shape = store.src[1].shape or ()
    has_reduce = any(u.op is Ops.REDUCE_AXIS for u in store.toposort())
    return f"{'r' if has_reduce else 'E'}_{'_'.join(map(str, shape)) or 'scalar'}_{ast.key[:8]}"


def estimate_cost(lin: list[UOp], bufs: list[UOp]) -> tuple[int, int]:
    """FLOPs (value arithmetic times loop trips) and bytes of buffers touched."""
    indices = [u.src[1] for u in lin if u.op is Ops.INDEX] + \
        [u.src[2] for u in lin if u.op is Ops.STORE and len(u.src) == 3]  # PADTO gates
    index_math = set(UOp(Ops.SINK, None, tuple(indices)).toposort())
    flops = sum(n for u, n in with_trips(lin) if u.op in GroupOp.ALU and u not in index_math)
    return flops, sum(b.arg[1] * b.dtype.itemsize for b in bufs)


def with_trips(lin: list[UOp], lanes: bool = True) -> Iterator[tuple[UOp, int]]:
    """Each op of a linearized kernel but its loops' ends, with the trips of the loops it is in (times its vector
    range's lanes, unless `lanes` is False: then a vector op counts once)."""
    trips = [1]
    vecs = vector_ranges(lin) if lanes else set()   # a value depending on one is that many lanes
    for u in lin:
        if u.op is Ops.END:
            trips.pop()
            continue
        lanes_of = vecs & range_deps(u) if vecs else vecs
        yield u, trips[-1] * math.prod(r.src[0].arg for r in lanes_of) if lanes_of else trips[-1]
        if u.op is Ops.RANGE:
            trips.append(trips[-1] * u.src[0].arg)


def index_level(ast: UOp, pieces: bool = True, grid_numel: int = 0) -> UOp:
    """A kernel AST (tensor level, buffers by slot) as scalar index-level code with explicit loops, simplified.
    `pieces`: an output that adds up padded pieces is stored piece by piece (`rangeify`; not for a GPU, whose
    threads spread over the output's loops: a piece's own loop would run whole in each thread); along several axes
    with no loop shared, only for an output of at most `grid_numel` elements (one that runs on one core)."""
    # movement ops become index arithmetic over explicit loops (custom kernels are written with loops already)
    sink = ast if ast.src[0].src[0].op is Ops.INDEX else rangeify(ast, pieces, grid_numel)
    # fold constants and simplify the index arithmetic rangeify produced, a read under a condition within its bounds
    sink = graph_rewrite(sink, pm_symbolic, name="symbolic")
    sink = graph_rewrite(sink, pm_given_valid, name="symbolic given valid")
    # a half float's maximum is taken in float32, the same value, in an accumulator LLVM's vectoriser takes
    sink = graph_rewrite(sink, pm_widen_half_max, name="widen half max")
    # a one-hot sum over an indexed axis (a gather) becomes one load at the index, and its index math is simplified
    if (gathered := graph_rewrite(sink, pm_gather, name="gather")) is not sink:
        sink = graph_rewrite(gathered, pm_symbolic, name="symbolic after gather")
    # a scatter (a one-hot reduce onto the output's rows) becomes a loop over its updates
    if (scattered := collapse_scatter(sink)) is not sink:
        sink = graph_rewrite(scattered, pm_symbolic, name="symbolic after scatter")
    # a range read through a division and a remainder is two ranges; contiguous output axes are one loop, and
    # contiguous axes a plain reduce sums over, once its loops nest in stride order, are one reduce loop
    sink = merge_reduce_ranges(order_reduce_ranges(merge_loops(split_ranges(sink))))
    if config.SPEC:
        check_stage(sink, "kernel")
    return sink


def scalar_ops(lin: list[UOp]) -> int:
    """The instructions a linearized kernel executes: each load, store and arithmetic op times its loops' trips (an op
    of a vector range's lanes once: it is one vector instruction already)."""
    return sum(n for u, n in with_trips(lin, lanes=False) if u.op in GroupOp.ALU or u.op in (Ops.LOAD, Ops.STORE))


def decompose_transcendentals(sink: UOp) -> UOp:
    """float32 exp/exp2/tanh/log as vectorisable arithmetic instead of scalar C library calls (`transcendental.py`).
    Done after the options: a register tile's lanes each copy one TANH node, not its thirty-node polynomial, through
    the options' rewrites (a 32 x 8 tile of the RNN cell `tanh(x @ wx + h @ wh + b)` spent 120 ms there)."""
    return graph_rewrite(sink, pm_transcendental, name="transcendental")


def render_kernel(name: str, sink: UOp, opts: Sequence[Opt],
                  target: Target | None = None) -> tuple[str, list[UOp], list[UOp]]:
    """An optimised index-level kernel as LLVM IR for `target` (default: `host_target()`), with its program order and
    its buffers (by slot)."""
    ir, lin, bufs, _ = render_kernel_values(name, sink, opts, target, trips_by_value=False)
    return ir, lin, bufs


def render_kernel_values(name: str, sink: UOp, opts: Sequence[Opt], target: Target | None = None,
                         trips_by_value: bool = True) -> tuple[str, list[UOp], list[UOp], tuple[int, ...]]:
    """`render_kernel`, and the values its launches pass (`vals`): with `trips_by_value`, a kernel of one loop reads
    its trip count from them (`runtime_trips`)."""
    # order into loops, hoisting what each loop does not depend on
    target = host_target() if target is None else target
    # a costly value a row kernel's reduce and output both compute is kept in a row buffer between them, and a
    # contraction's panel of its vector operand is copied into a buffer once, before the output rows that read it
    sink = panel_buffers(row_buffers(sink, target), target)
    # a contraction's long reduce loop summed in blocks, each block in a register of its own (BLAS's rounding)
    sink = block_sums(sink)
    transcendental = any(u.op in GroupOp.Transcendental for u in sink.toposort())
    sink = decompose_transcendentals(sink)
    lin, acc_of = linearize(sink)
    bufs = sorted({u for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL}, key=lambda u: u.arg[0])
    small = scalar_ops(lin) <= SMALL_KERNEL_OPS and not transcendental
    loop_vectorize = not small and not any(o.op in ("UPCAST", "UNROLL") for o in opts)
    # a long plain sum whose loop LLVM's vectoriser leaves (a column sum's, over an UPCAST's lanes, a loop around
    # another) summed in nested levels, each in a register of its own (a pairwise tree's rounding, at one addition a
    # block)
    if (nested := nested_sums(sink, vectorised=loop_vectorize)) is not sink:
        lin, acc_of = linearize(nested)
    trips = runtime_trips(lin) if trips_by_value else None
    # LLVM's unroller is for the loops of reduces (a tile's reduce loop, a row's passes); a kernel without one moves or
    # combines elements once each, which its loop vectoriser interleaves already: unrolled, it compiled 2-5x longer
    # (the MLP step's copies into packed panels: 23 -> 5 ms each) and ran no faster (gelu 16M, the SGD updates)
    ir = render_llvm(name, lin, acc_of, bufs, target=target, loop_unroll=not small and bool(acc_of),
                     loop_vectorize=loop_vectorize,
                     tile=not small and any(o.op == "UPCAST" for o in opts), trips_arg=trips)
    return ir, lin, bufs, () if trips is None else (trips.src[0].arg,)


def runtime_trips(lin: list[UOp]) -> UOp | None:
    """The loop of a kernel whose trip count can be a launch's value rather than written into its code: its one loop,
    without a vector range (whose lanes the options fitted to it), on one core or split over cores by the count
    itself (each core's share starting at `core * count`: `split_by_trips`). LLVM vectorises such a loop with a
    remainder for any count, or leaves it as written (a small kernel's), and kernels that differ only in their length
    are one code, compiled once (`lower_kernel`'s same-code cache): a U-Net's Adam updates, one per parameter of 32
    to 36,864 elements, and its gradients' zero fills, so its first call compiles 199 kernels, not 224 (4.45 -> 4.2 s
    of LLVM); a ViT's 91, not 108; a transformer's 76, not 83; the threaded updates of the data-parallel MLP's
    784 x 1024 and 1024 x 1024 weights one code, not two (32 compiles -> 30), a GPT's of its 256 x 768 and 1024 x 256
    ones (108 -> 104). (Kernels alike but for their strides are still one code each: a count read at run time is the
    whole saving.)"""
    ranges = [u for u in lin if u.op is Ops.RANGE]
    if len(ranges) != 1 or vector_ranges(lin):
        return None
    cores = [u for u in lin if u.op is Ops.SPECIAL]
    if cores and not split_by_trips(lin, cores, ranges[0]):
        return None
    return ranges[0]


def split_by_trips(lin: list[UOp], cores: list[UOp], rng: UOp) -> bool:
    """Whether the core id of a threaded kernel is used only as `core * trips` (one THREAD of its one loop, whose share
    of `trips` iterations starts there): the renderer writes that product with the count read at run time, and no
    other number in the code depends on the split. A core id scaled otherwise (a strided output, a second split) is
    a number of the code, which then keeps its count written in."""
    if len(cores) != 1:
        return False
    core, trips = cores[0], rng.src[0].arg
    return all(u.op is Ops.MUL and len(u.src) == 2 and u.src[0] is core and u.src[1].op is Ops.CONST
               and u.src[1].arg == trips for u in lin if core in u.src)


def symbol_name(ast: UOp, mode: str) -> str:
    """The kernel's symbol: its readable name, plus a tag of its options unless they are the default heuristics for
    this machine (one process may hold the same kernel compiled with several option lists, or for several targets,
    and symbols must be unique)."""
    name = kernel_name(ast)
    return name if mode == f"hand@{native_target().key}" else f"{name}_{hashlib.sha256(mode.encode()).hexdigest()[:6]}"


def kernel_source(ast: UOp, target: Target, opts: Sequence[Opt] | None = None) -> KernelSource:
    """A kernel AST through every stage before LLVM's: index level, options, program order, LLVM IR."""
    # rangeify -> symbolic: scalar index-level code with explicit loops
    # (an output split into pieces along every axis leaves threads no loop: only one that runs on one core anyway)
    itemsize = max(4, *(st.src[1].dtype.itemsize for st in ast.src))
    sink = index_level(ast, grid_numel=2 * target.min_thread_work(itemsize) - 1)
    # a kernel whose index-level code another kernel had is that kernel's, but for its name (see `_LOWERED`); not
    # under a search, which is keyed by the AST
    known = None if config.BEAM > 0 else (opt_mode(opts, target), target.key)
    if known is not None and (done := sink.__dict__.get(_LOWERED, {}).get(known)) is not None:
        name = symbol_name(ast, done.mode)
        return dataclasses.replace(done, name=name, ir=done.ir.replace(done.name, name))
    index_sink = sink
    # options on the loops: register blocking, vector lanes, cores (heuristics, forced, or a timed BEAM search)
    sink, applied = optimize(sink, target, kernel_name(ast), ast.key, opts)
    # options the caller gave or a search found name the object; the heuristics' are named by what chose them
    mode = opt_mode(applied, target) if opts is not None or config.BEAM > 0 else opt_mode(None, target)
    name = symbol_name(ast, mode)
    # transcendentals as arithmetic, order into loops and render LLVM IR for the target's vector width
    ir, lin, bufs, vals = render_kernel_values(name, sink, applied, target)
    flops, mem = estimate_cost(lin, bufs)
    # (the linearized loops are one core's share: DEBUG=2 printed a threaded kernel's rate its core count too low)
    cores = global_size(sink)
    src = KernelSource(name, ir, len(bufs), mode, flops * cores, mem, cores, tuple(applied), vals)
    if known is not None:
        index_sink.__dict__.setdefault(_LOWERED, {})[known] = src
    return src


# A kernel's source by its options' mode and target, kept on its index-level SINK: kernels whose tensor-level graphs
# differ but whose index-level code is one node (hash-consing) are lowered through the options, the linearizer and the
# renderer once. An Adam update of a (128,) bias and of a (128, 1) weight, the transposes of a spectral layer's
# complex weights viewed in two shapes, the gradients of one contraction reached by two spellings: 7 of fno's 120
# kernels, 2 of spectral's 22. Kept as long as the SINK lives: while a program is lowered, its rewritten graphs are
# (`keep_rewritten`), so the cache needs no bound and no eviction, and dies with the lowering.
_LOWERED = "kernel_sources"


def compile_kernel(ast: UOp, target: Target, opts: Sequence[Opt] | None = None) -> KernelObject:
    """One kernel AST (tensor level, buffers by slot) to an object file and its launch metadata, for `target`: the
    stages of `kernel_source` in order, then LLVM's.

    `opts` are applied exactly; without them the heuristics choose, or with `BEAM=n` a search
    (`tgfx/lowering/search.py`). No caching here: `lower_kernel` caches around it."""
    src = kernel_source(ast, target, opts)
    # LLVM's optimiser and code generator, for the target's CPU
    return src.assemble(compile_llvm(src.ir, target=target))


def lower_kernel(ast: UOp, opts: Sequence[Opt] | None = None, pool: CompileQueue | None = None) -> Any:
    """One kernel AST to a loaded, runnable kernel: `compile_kernel`, cached in memory (an LRU of
    `TGFX_KERNEL_CACHE_SIZE`) and on disk.

    `opts` (or those `use_opts` forces) are applied exactly; without them the heuristics choose, or with `BEAM=n`
    a search. The cache key holds what chose the options, so kernels compiled under different choices never stand
    in for each other. With `pool`, a kernel to compile comes back as (future object, finish) for `prelower`.
    """
    target = host_target()   # what the options are chosen for and the code compiled for (TGFX_CPU, or this machine)
    opts = forced_opts() if opts is None else tuple(opts)
    mode = opt_mode(opts, target)
    if (hit := _kernels.get((ast.key, mode))) is not None:
        return hit
    known = opts
    if known is None and mode.startswith("beam"):  # a search done before names its program: maybe compiled already
        from tgfx.lowering.search import cached_search
        known = cached_search(ast.key, int(config.BEAM), target)
    key = cache_key(f"{ast.key}|{mode if known is None else opt_mode(known, target)}", target)
    if (cached := read_cached(key)) is not None:
        return _load(ast, mode, key, KernelObject.from_meta(*cached), target)

    def finish(ko: KernelObject) -> CompiledKernel:
        key = cache_key(f"{ast.key}|{ko.mode}", target)
        write_cached(key, ko.meta(), ko.obj)
        return _load(ast, mode, key, ko, target)
    src = _lowered_once((ast.key, mode), lambda: kernel_source(ast, target, opts))
    same = _same_code.get(code_key := _code_key(src, target))
    if same is None:   # the code is entered as pending first: threads lowering it meanwhile wait for this compile
        # (another thread may have entered it since the lookup: then its object is the one kept)
        same = _same_code.setdefault(code_key, (src.name, pending := Future()))
        if same[1] is pending:   # compiled on the pool's thread (the caller finishes it, see `prelower`), or here
            if pool is not None:
                pool.submit(src.ir, src.name, target).add_done_callback(lambda done: _settle(pending, code_key, done))
            else:
                _settle(pending, code_key, lambda: compile_llvm(src.ir, target=target))
    if same[0] != src.name:   # the code of a kernel lowered before: its object, under its symbol
        src = dataclasses.replace(src, name=same[0], ir=src.ir.replace(src.name, same[0]))
    obj = same[1]
    if isinstance(obj, Future):
        if pool is not None:
            return obj, lambda got: finish(src.assemble(got))
        try:
            obj = obj.result()   # this thread's compile, or another's of the same code, still running
        except Exception:
            raise
        except BaseException:    # (the thread compiling it was interrupted, Ctrl-C: not this thread's error)
            obj = compile_llvm(src.ir, target=target)
    return finish(src.assemble(obj))


def _lowered_once(key: tuple[str, str], lower: Callable[[], KernelSource]) -> KernelSource:
    """`lower()`, a kernel's lowering to LLVM IR (`kernel_source`, ~1-20 ms of Python), or the one another thread is
    running for the same kernel and options now (`key`): eight threads' first eager op at once lowered each of its
    kernels six times over, 25 lowerings of 4 kernels. The latest lowerings are kept (`_lowered`) for a thread that
    comes while the first still compiles (the kernel is not in `_kernels` yet). An interrupted lowering (Ctrl-C) is
    the waiters' to redo."""
    if (done := _lowered.get(key)) is not None:
        return done
    with _lowering_lock:
        running = _lowering.get(key)
        mine = running is None
        if mine:
            running = _lowering[key] = Future()
    if not mine:
        try:
            return running.result()
        except Exception:
            raise
        except BaseException:
            return lower()
    try:
        src = lower()
    except BaseException as e:
        running.set_exception(e)
        raise
    else:
        _lowered[key] = src
        running.set_result(src)
        return src
    finally:
        with _lowering_lock:
            del _lowering[key]


# the kernels being lowered now, by (AST key, options mode): a thread lowering one of them waits for that lowering
_lowering: dict[tuple[str, str], Future] = {}
_lowering_lock = forksafe.lock()
_lowered: LRU[tuple[str, str], KernelSource] = LRU(lambda: 64)   # the latest lowerings (IR text: a few MB at most)
os.register_at_fork(after_in_child=_lowering.clear)   # (the threads lowering them stayed in the parent)


def _settle(pending: Future, code_key: str, compiled: Future | Callable[[], Any]) -> None:
    """Settle `pending`, the entry of `_same_code` under `code_key`, with the pool's future `compiled`, or with
    `compiled()` (a compile_llvm) run here. A compile that fails is not remembered (the threads waiting get its
    error; an interrupted one, Ctrl-C, compiles for them): the next lowering of the code compiles it again."""
    try:
        pending.set_result(compiled.result() if isinstance(compiled, Future) else compiled())
    except BaseException as e:
        if (entry := _same_code.peek(code_key)) is not None and entry[1] is pending:
            _same_code.pop(code_key)
        pending.set_exception(e)
        if not isinstance(compiled, Future):
            raise


# compiled objects by their code: the kernel's LLVM IR with its symbol left out, and the target. Kernel graphs that say
# one thing two ways (spectral's real part of a complex buffer read as a slice of a reshape in one kernel, a reshape of
# a slice in another) lower to the same IR but for their names: the second takes the first's object and symbol, one
# compile for both (spectral: 2 of 21 kernels, gnn 1 of 19, transformer 10 of 90). A pending compile is its future.
_same_code: LRU[str, tuple[str, bytes | Objects | Future]] = LRU(lambda: int(config.KERNEL_CACHE_SIZE))


def _code_key(src: KernelSource, target: Target) -> str:
    return hashlib.sha256(f"{target.key}\n{src.ir.replace(src.name, '')}".encode()).hexdigest()


def _load(ast: UOp, mode: str, key: str, ko: KernelObject, target: Target) -> CompiledKernel:
    """`ko` loaded into executable memory, and remembered in the LRU."""
    code = load_object(key, ko.name, ko.obj, target, ko.symbols)
    ck = CompiledKernel(ko.name, code, ko.nbufs, ast, ko.src, ko.flops, ko.mem_bytes, ko.global_size, ko.opts, ko.vals)
    return _kernels.setdefault((ast.key, mode), ck)


class _SharedSetting:
    """A process-wide setting changed while any of its users run: the first to enter changes it (`enter` returns
    what to restore), the last to leave restores it (`leave`). Nested and concurrent uses share one change."""

    _lock = forksafe.lock()

    def __init__(self, enter: Callable[[], Any], leave: Callable[[Any], None]) -> None:
        self.enter, self.leave, self.depth, self.saved = enter, leave, 0, None
        forksafe.track(self)

    def after_fork_in_child(self) -> None:
        """A fork while another thread used the setting: its users stayed in the parent, so the child restores it
        (a child running on with the garbage collector off for good would never free a cycle)."""
        if self.depth:
            self.depth = 0
            self.leave(self.saved)

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self.depth == 0:
                self.saved = self.enter()
            self.depth += 1
        try:
            yield
        finally:
            with self._lock:
                self.depth -= 1
                if self.depth == 0:
                    self.leave(self.saved)


def _gc_off() -> tuple[bool, list[UOp] | None]:
    was = gc.isenabled()
    gc.disable()
    return was, keep_rewritten()


def _gc_on(was: tuple[bool, list[UOp] | None]) -> None:
    release_rewritten(was[1])
    if was[0]:
        gc.enable()


# Python's cyclic garbage collector off while tracing and lowering: they allocate nodes by the ten thousand, every so
# many allocations start a collection, and a full one walks every live object (the program's graphs and caches) to
# find no cycles: UOp graphs are acyclic and freed by reference counts. An RNN step's first call spent 119 of its 930
# ms there. Meanwhile the graphs rewritten are kept (`keep_rewritten`: a program's kernels share nodes, and the
# memos on them), and freed before the collector comes back on, if it was on, when the last pause ends: the
# collection the next allocations start then walks what the trace made that lives on, not its garbage too.
gc_paused = _SharedSetting(_gc_off, _gc_on)

# while compile threads run beside the lowering thread: how long a thread may hold the GIL when another waits for it
COMPILE_SWITCH_S = 0.0005


def _short_switch() -> float:
    was = sys.getswitchinterval()
    sys.setswitchinterval(min(was, COMPILE_SWITCH_S))
    return was


# A short GIL switch interval while compile threads run: a compile makes a dozen llvmlite calls, each of which gives
# up the GIL and must take it back from the thread lowering the next kernel in Python, which by default keeps it for
# up to 5 ms. The MLP step's compiles took 2.2x as long beside the lowering as alone; with 0.5 ms they end about when
# the lowering does. Restored when the last user ends.
quick_gil_handoff = _SharedSetting(_short_switch, sys.setswitchinterval)


def prelower(asts: Iterable[UOp]) -> None:
    """Compile a program's kernels before it is encoded, the LLVM compiles on worker threads (llvmlite releases the
    GIL) while this thread lowers the next kernel in Python: a program's first call overlaps the two. One thread
    compiles in this process and one per compile worker process (`compile_llvm`), so compiles run side by side. Only
    the threads touch LLVM until they are done: the objects are loaded afterwards, here. The threads compile with
    this thread's flags (`config.carry`: DEBUG=4 prints their IR)."""
    todo = list(dict.fromkeys(asts))
    if len(todo) < 2 or config.BEAM > 0 or forced_opts() is not None:
        return
    compiler()  # made before the threads start: creating it uses LLVM

    def workers() -> int:   # (asked once kernels wait for LLVM: a program whose compiles keep up starts no worker)
        return len(compile_workers())
    # (the short switch interval lasts until the queue's threads are done: they may start compiling after the last
    # kernel is lowered, once threads start at the first compile)
    with quick_gil_handoff(), CompileQueue(1, workers) as pool, gc_paused():
        jobs = [job for ast in todo if isinstance(job := lower_kernel(ast, pool=pool), tuple)]
    for fut, finish in jobs:
        finish(fut.result())


def reads_in_place(ast: UOp, slot: int, out_slot: int | None = None) -> bool:
    """Whether the kernel's store into buffer `out_slot` (its only store when None) may be written into buffer
    `slot`: every read of `slot` is at that store's offset, by the same iteration, and feeds the stored value, so
    each element is read before it is overwritten. A kernel of several outputs (an optimizer's parameters and
    moments, updated together) qualifies output by output: a read that only another store uses could be placed
    after this one's store."""
    sink = ast if ast.src[0].src[0].op is Ops.INDEX else rangeify(ast)
    sink = graph_rewrite(sink, pm_symbolic, name="symbolic")
    stores = [s for s in sink.src if s.op is Ops.STORE and s.src[0].src[0].op is Ops.DEFINE_GLOBAL and
              (out_slot is None or s.src[0].src[0].arg[0] == out_slot)]
    if len(stores) != 1 or (out_slot is None and len(sink.src) != 1):
        return False
    store = stores[0]
    out_off = store.src[0].src[1]
    reads = [u for u in sink.toposort() if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL
             and u.src[0].arg[0] == slot]
    reduces = any(u.op is Ops.REDUCE for u in sink.toposort())
    feeds = set(store.src[1].toposort())
    return not reduces and all(r.src[1] is out_off and r in feeds for r in reads)


def realize(uops: list[UOp], described: Description | None = None,
            views: dict[UOp, UOp] | None = None) -> dict[UOp, UOp]:
    """Compute `uops` and return each as a view of a buffer (a BUFFER, or RESHAPE of one). `described`: the
    description of their SINK (`tgfx/lowering/eager.py`), if the caller has it; `views`: the ones that are ranges of
    computed buffers (`range_view`), if the caller looked."""
    # a contiguous range of a computed buffer in host memory is that memory: no graph, no kernel
    if views is None:
        views = {u: v for u in uops if u.op in RANGE_OPS and (v := range_view(u)) is not None}
    if views:
        rest = [u for u in uops if u not in views]
        return {**(realize(rest, views={}) if rest else {}), **views}
    d = described if described is not None else describe(UOp(Ops.SINK, None, tuple(uops)))
    unflatten: Callable[[list[UOp]], list[UOp]] = list
    if not d.front or d.front <= _CALLS and d.device is not None:
        prog, inputs = _program(d), d.inputs   # (a call of sharded arguments is on several devices: lowered below)
    else:
        prog, inputs, unflatten = _multi_program(d)
    counters.uop_count += len(d.nodes)
    mems = []
    for b in inputs:   # (`memory_of`, inlined: an eager op's every input)
        mems.append(buffers.get(id(b)) or buffer_memory(b, allocate=False))
    results = prog.execute(mems, inputs)
    if len(uops) == 1 and unflatten is list:
        return {uops[0]: results[0]}
    return dict(zip(uops, unflatten(results), strict=True))


def _program(d: Description) -> Any:
    """The program of a graph `describe` described (calls on one device in it are inlined)."""
    # a graph seen before (in this mode) is its program, whatever buffers and constant values it reads: the schedule
    # depends on the graph, not on them (eager learning rates, step counters: kernel arguments, one schedule and one
    # compile for all values)
    if (ref := _programs.peek(d.key)) is None or (prog := ref()) is None:
        # calls on one device are inlined in the graph's abstraction, when it is new
        tpl = graph_template(d, lower=_inline if d.front else None)
        # its program, lowered once per kernel-option mode and replayed as a jitted function's is
        prog = eager_program(tpl, d.inputs)
        _programs[d.key] = weakref.ref(prog)
    elif (kept := _kept.entries).get(pid := id(prog)) is prog:   # (`_keep`, inlined: an eager op's every run)
        kept.move_to_end(pid)
    else:
        _keep(prog)
    return prog


def _multi_program(d: Description) -> tuple[Any, list[UOp], Callable[[list[UOp]], list[UOp]]]:
    """The per-device program of a graph of sharded values (or of a call of them) `describe` described, the buffers
    it reads (the graph's MULTIs' parts, and its own) and the function that makes the graph's roots of its results.
    A graph seen before is its program by one lookup: its per-device graph is a function of the description, which
    names every shape, device and layout, and reads the graph's buffers, found by position (an eager metric on a
    sharded batch lowered it again every step: 0.4 ms, and 2.7 ms a step with its all-reduce)."""
    if (hit := _multi_programs.peek(d.key)) is not None and (prog := hit[0]()) is not None:
        if _kept.entries.get(id(prog)) is not prog:
            _keep(prog)
        return prog, [d.inputs[i] for i in hit[1]], hit[2]
    local = not has_remote(d.nodes)
    sink, unflatten = lower_multi(_inline(d.nodes[-1]))
    lowered = describe(sink)
    prog = eager_program(graph_template(lowered), lowered.inputs)
    at = {id(b): i for i, b in enumerate(d.inputs)}
    where = [at.get(id(b)) for b in lowered.inputs]
    if local and None not in where:   # (a lifted constant's buffer, or a process's parts: lowered each time)
        _multi_programs[d.key] = (weakref.ref(prog), where, unflatten)
    return prog, lowered.inputs, unflatten


# a sharded graph's program (weakly), where its inputs are among the graph's, and its unflattening, by description
_multi_programs: LRU[tuple, tuple] = LRU(lambda: int(config.SCHEDULE_CACHE_SIZE))


def realize_op(u: UOp, found: tuple[tuple, list[UOp], list[int]]) -> tuple[UOp, list[UOp]]:
    """`realize([u])[u]` for a chain of ops over buffers of one device and constants, whose `op_signature` is `found`,
    and the buffers it read (its inputs). An op whose signature was seen before (in this mode) goes from the
    signature to its program and runs it: no SINK, no description, no walk (an eager `x + 1`'s most common case)."""
    sig, inputs, consts = found
    key = (dispatch_mode(), sig)
    if (ref := _op_programs.entries.get(key)) is None or (prog := ref()) is None:   # (`peek`, inlined)
        d = describe(UOp(Ops.SINK, None, (u,)))
        prog = _program(d)
        _op_programs[key] = weakref.ref(prog)
        inputs = d.inputs
    else:
        if _kept.entries.get(id(prog)) is not prog:   # (`_keep`, inlined: a kept one is refreshed by its run)
            _keep(prog)
        if consts:   # its lifted constants' interned buffers, numbered as `describe` numbers them
            device = sig[-1]
            for i in consts:
                c = inputs[i]
                inputs[i] = const_buffer(c.dtype, c.arg, device, i)
    counters.uop_count += len(sig)   # (about its nodes)
    mems = []
    for b in inputs:   # (`memory_of`, inlined)
        mems.append(buffers.get(id(b)) or buffer_memory(b, allocate=False))
    return prog.execute(mems, inputs)[0], inputs


# the eager programs this process keeps, by identity: at most TGFX_SCHEDULE_CACHE_SIZE of them holding at most
# TGFX_PROGRAM_CACHE_MB together (`Program.nbytes`: arenas, idle outputs, command words, code), the least recently
# run out first. Their one owner: the maps that find a program (`_op_programs`, `_programs`, a template's `programs`)
# hold it weakly, so an evicted program is freed, and lowered again from its template (no compile) when run again.
# Evicting one a submitted queue still runs is safe: the submission holds the memory and code its command buffers
# were encoded with until its fence passes (`HCQDevice.submit`). Ordered by the programs' stamps when one must go
# (`Program.last_run`): a run refreshes nothing
_kept: LRU[int, Any] = LRU(lambda: int(config.SCHEDULE_CACHE_SIZE),
                           config.PROGRAM_CACHE_MB.mib, lambda prog: prog.nbytes, recency=lambda prog: prog.last_run)


def _keep(prog: Any) -> Any:
    """`prog`, kept as the most recently run eager program."""
    if _kept.get(id(prog)) is not prog:   # (an id is one program's while the cache holds it)
        _kept[id(prog)] = prog
    return prog


# an eager op's program (weakly) by its mode and `op_signature`; one evicted is found again through its description
_op_programs: LRU[tuple, weakref.ref] = LRU(lambda: int(config.SCHEDULE_CACHE_SIZE))


# an eager graph's program (weakly) by its description (which names the mode): one lookup for a graph seen before.
# Read without refreshing (`peek`: the description is long, a refresh hashes it again): an evicted program is found
# again through its template, which `_template_keys` and `_templates` keep in use order
_programs: LRU[tuple, weakref.ref] = LRU(lambda: int(config.SCHEDULE_CACHE_SIZE))


# front-end ops that inlining alone removes
_CALLS = frozenset({Ops.FUNCTION, Ops.GETTUPLE, Ops.CALL, Ops.LOOP, Ops.SWITCH})


def _inline(sink: UOp) -> UOp:
    """`sink` with its functions substituted into their callers, so the scheduler can fuse across calls."""
    sink = inline(sink)
    # a differentiated loop's forward saves its carries for the backward: the primal results read that one loop
    sink = merge_saved_loops(sink)
    check_no_params(sink)
    return sink


def eager_program(tpl: Any, inputs: list[UOp]) -> Any:
    """The program of an eager graph's template, built on its first use. Programs are kept on the template per
    kernel-option mode (`BEAM`, `NOOPT`, forced options), as compiled kernels are."""
    forced = forced_opts()
    now = dispatch_mode()   # what the mode is made of
    if (mode := _modes.get(now)) is None:
        mode = _modes[now] = opt_mode(forced, host_target())
    prog = tpl.programs.get(mode)
    if prog is None:
        from tgfx.lowering.program import Program
        # an op run inline (an eager op's: its dispatch is all it costs) takes back its results of the call before last
        # when nothing holds them: no node, memory or lease made per call
        prog = tpl.programs[mode] = Program(tpl, inputs, len(inputs), reuse_results="inline")
    return _keep(prog)


# kernel-option modes by the flags they are made of: an eager op's mode was 4 us of its ~70 to spell out each time
_modes: dict[tuple, str] = {}


def forget_compiled() -> None:
    """Drop every compiled kernel and eager program this process holds (the disk cache stays): what a new process
    would start from."""
    from tgfx.lowering import lifted
    from tgfx.lowering.schedule import _templates
    _kernels.clear()
    lifted.forget()
    _programs.clear()
    _multi_programs.clear()
    _op_programs.clear()
    _kept.clear()
    _same_code.clear()
    _lowered.clear()
    for tpl in _templates.values():
        tpl.programs.clear()


def lower_multi(sink: UOp) -> tuple[UOp, Callable[[list[UOp]], list[UOp]]]:
    """Sharded values to per-device graphs: a SINK of one-device roots, and the function that rebuilds each original
    root's result (a MULTI of its parts' results) from theirs."""
    if not has_multi(sink):
        return sink, lambda results: list(results)
    # every op on a sharded value becomes one op per device, with ALLREDUCEs where a reduction crosses devices
    sink = graph_rewrite(sink, pm_multi, name="multi")
    # independent all-reduces share one ring (gradients of many parameters, bucketed)
    sink = bucket_allreduces(sink)
    layout = [(len(r.src), r.arg) if r.op is Ops.MULTI else None for r in sink.src]
    flat = [p for r in sink.src for p in device_parts(r)]
    fill: Callable[[list[UOp]], list[UOp]] = list
    if has_remote(walk(sink)):
        # a device tuple that spans processes: this process computes its own parts, all-reducing over the network
        flat, fill = keep_local(flat)
        flat = list(lower_cross_process(UOp(Ops.SINK, None, tuple(flat))).src)
    # each ALLREDUCE within the process becomes a ring of copies and adds over its devices
    sink = graph_rewrite(UOp(Ops.SINK, None, tuple(flat)), pm_allreduce, ctx=RingCtx(), name="allreduce")

    def unflatten(results: list[UOp]) -> list[UOp]:
        results = fill(results)
        out, at = [], 0
        for lay in layout:
            if lay is None:
                out.append(results[at])
                at += 1
            else:
                out.append(UOp(Ops.MULTI, results[at].dtype, tuple(results[at:at + lay[0]]), lay[1]))
                at += lay[0]
        return out
    return sink, unflatten
