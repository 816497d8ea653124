"""target: the CPU that kernels are compiled for, and the kernel options that follow from it.

A `Target` describes one CPU: LLVM's name for it and its feature string (what LLVM compiles for), the vector
registers those give (width, count, FMA), its cores and its cache sizes. Every heuristic that picks kernel options
reads it (register tiles, the search's amounts, cache blocks, the thread split), and so do the cache keys of compiled
kernels, schedules and searches: code made for one target never runs as another's.

`host_target()` is the machine's own (LLVM's host CPU name and features, the cores this process may run on, the
cache sizes from `/sys/devices/system/cpu/cpu0/cache`), unless `TGFX_CPU=<llvm cpu name>` names another CPU: then
LLVM's features for that CPU take the place of the host's, so one host renders and measures the code another class
of machine would get (`TGFX_CPU=znver3` on an AVX-512 host gives 32-byte vectors). Cores and caches stay the host's:
they are what the code runs on here, unless `TGFX_CORES=<n>` describes a machine of n cores: then every split over
cores (a kernel's THREAD parts, a sum's split-K parts, whether a copy is a kernel) is chosen for n of them, and the
host's own threads claim those parts (what a 64-core server would run, checked on a laptop). Code for a CPU whose
vector instructions the host lacks can be rendered (`DEBUG=4`) but not run: loading it raises.

The numbers below that are not read from the machine are rules, each with its reason; none is tuned to one CPU.

A `GPUTarget` describes one NVIDIA GPU the same way for the NVPTX code generator (`tgfx/lowering/render_nvptx.py`):
its `sm_XY`, the PTX version the code is written in, its SM count, warp size, threads, registers and shared memory
per block. `GPUTarget.from_attributes` builds it from the driver's device attributes (what the CUDA runtime reads with
`cuDeviceGetAttribute`); `GPU_DEFAULT` (an H200, sm_90) stands in when no device is present (rendering and ptxas
checks on a machine without one).
"""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import hashlib
import os
import pathlib
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from tgfx import config, forksafe

CACHE_ROOT = "/sys/devices/system/cpu/cpu0/cache"
# where sysfs does not say (another OS, a container hiding it): sizes every x86-64 and aarch64 server core since
# about 2010 meets or exceeds, so blocking by them never overflows a real cache
FALLBACK_CACHES = {"l1d": 32 << 10, "l2": 256 << 10, "l3": 8 << 20}
# a helper thread's wake-up and join cost about what one core spends on this many vector-wide loop iterations (a few
# microseconds: the native runtime's futex hand-off, tgfx/devices/native.py); a thread given less work loses time
THREAD_HANDOFF_VECTORS = 4096
# a transcendental (exp's range reduction and polynomial, log's, tanh's) is about this many vector instructions: a
# loop iteration that evaluates one is that many plain iterations' work, for the thread split
TRANSCENDENTAL_OPS = 16
# a register tile's accumulators leave registers for the operands each step of the reduce loads: one broadcast row
# value and the tile's (at most two) vectors of a column
OPERAND_REGISTERS = 3
# independent accumulators that keep a core's FMA units busy: 4 cycles of latency times 2 pipes, on x86 server cores
# since Haswell and the Zen cores; fewer leave the units waiting on their own results, more only use registers
FMA_CHAINS = 8
# a core's first-level data TLB holds about this many pages (64 to 96 on x86 servers since 2013), of PAGE_BYTES: an
# access that steps through more pages than that in its inner loop takes a TLB miss a step (a matmul's panel of a
# page-long operand, a copy into panels read a row a page apart)
TLB_PAGES = 64
PAGE_BYTES = 4096
# ... and its second-level TLB about this many (1536 on Intel since Skylake, 2048-3072 on Zen): a loop sweeping more
# pages than that misses it every step
STLB_PAGES = 1536
CACHE_LINE = 64   # bytes, on every x86 core
# a kernel with work enough is split into up to this many parts a core: the cores claim parts as they finish one (the
# native runtime's fetch-add), so a core slowed by another process, or a slower kind of core, takes fewer instead of
# the kernel waiting on it (a 1024^3 matmul on 2 busy cores, alternated: 1.13-1.48x numpy's time in 2 parts,
# 0.81-1.10x in 8); each part still gets `min_thread_work`
CHUNKS_PER_CORE = 4


def rows_outrun_tlb(rows: int, row_bytes: int) -> bool:
    """Whether a loop reading a narrow column of `rows` rows, `row_bytes` apart (a contraction tile's panel of its
    vector operand, one row a step of the reduce), steps through more pages than the first-level TLB holds."""
    return rows * min(row_bytes, PAGE_BYTES) > TLB_PAGES * PAGE_BYTES


@dataclass(frozen=True)
class Target:
    """One CPU, as far as code generation cares.

    Args:
        cpu: LLVM's name for it (`llvm.get_host_cpu_name()`, or a name such as "haswell", "znver3").
        features: LLVM's feature string ("+avx2,+fma,-avx512f,..."): what the compiler may use.
        cores: threads a kernel may be spread over.
        l1d, l2, l3: data cache sizes in bytes (per core for L1d/L2, shared for L3).
        triple: LLVM's target triple.
        flush_denormals: kernels run with subnormal results flushed to zero (`TGFX_FLUSH_DENORMALS`).
    """
    cpu: str
    features: str
    cores: int
    l1d: int = FALLBACK_CACHES["l1d"]
    l2: int = FALLBACK_CACHES["l2"]
    l3: int = FALLBACK_CACHES["l3"]
    triple: str = "x86_64-unknown-linux-gnu"
    flush_denormals: bool = True

    def with_cores(self, cores: int) -> Target:
        """The same CPU with `cores` cores (tests, and experiments with the thread split)."""
        return dataclasses.replace(self, cores=cores)

    @functools.cached_property
    def key(self) -> str:
        """A short stable name of everything here: part of every cache key of code chosen or compiled for it."""
        text = "|".join(str(getattr(self, f.name)) for f in dataclasses.fields(self))
        return f"{self.cpu}.{hashlib.sha256(text.encode()).hexdigest()[:12]}"

    @functools.cached_property
    def enabled(self) -> frozenset[str]:
        return frozenset(f[1:] for f in self.features.split(",") if f.startswith("+"))

    @property
    def is_arm(self) -> bool:
        return self.triple.startswith(("aarch64", "arm64"))

    # ---- what the features give ----
    @property
    def vector_bytes(self) -> int:
        """Width of the widest float vector registers: AVX-512 64, AVX/AVX2 32, SSE and NEON 16."""
        if "avx512f" in self.enabled:
            return 64
        if "avx" in self.enabled:
            return 32
        return 16   # SSE2 is part of x86-64; NEON of aarch64

    @property
    def mask_registers(self) -> bool:
        """Whether vector masks are bit registers (AVX-512's k0-k7), built from an integer, rather than vectors."""
        return "avx512f" in self.enabled

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers: AVX-512's EVEX encoding and aarch64 have 32, x86 without it 16."""
        return 32 if "avx512f" in self.enabled or self.is_arm else 16

    @property
    def fma(self) -> bool:
        """Fused multiply-add in hardware (a contraction's inner step is one instruction)."""
        return "fma" in self.enabled or self.is_arm

    def lanes(self, itemsize: int = 4) -> int:
        """Elements of `itemsize` bytes in one vector register."""
        return max(self.vector_bytes // itemsize, 1)

    # ---- kernel options derived from it ----
    def accumulator_registers(self) -> int:
        """Vector registers a contraction's register tile may keep accumulators in: all but the operands' (one
        broadcast row value and the tile's vectors of a column, `OPERAND_REGISTERS`)."""
        return self.vector_registers - OPERAND_REGISTERS

    def tile_rows(self) -> int:
        """Rows of a contraction's register tile two vectors wide: the largest power of two whose 2 x rows
        accumulators fit beside the operand registers (8 with 32 registers, 4 with 16). Powers of two, since a tile
        must divide the output axis, and tensor sizes mostly are."""
        budget = (self.vector_registers - OPERAND_REGISTERS) // 2
        return 1 << (budget.bit_length() - 1)

    def padded_tile_rows(self) -> int:
        """Rows of a contraction's two-vector register tile along an axis it may pad to them: as many as the
        registers hold beside the operands, up to `FMA_CHAINS` (6 with AVX2's 16 registers: 12 accumulators, the tile
        of OpenBLAS's Haswell kernels; `tile_rows`' power of two, 4, leaves the FMA units no slack: the AVX2 class's
        1024^3 matmul 211 -> 237 GFLOP/s, 128 x 784 @ 784 x 512 182 -> 204, best of 4 runs each; with 32 registers
        it is `tile_rows`)."""
        return min((self.vector_registers - OPERAND_REGISTERS) // 2, FMA_CHAINS)

    def conv_tile_rows(self) -> int:
        """Rows of a direct convolution's register tile, one vector wide (its input a padded read): as many
        accumulators as keep the FMA units busy (`FMA_CHAINS`), fewer if the registers beside the operands and, without
        mask registers, the padding mask's vector do not hold them (8 with AVX2's 16 registers as with AVX-512's 32:
        the AVX2 class's CNN convolutions ran 606 -> 394 us with 8 rows instead of 4; 16 rows with AVX-512 gained
        nothing)."""
        budget = self.vector_registers - OPERAND_REGISTERS - (0 if self.mask_registers else 1)
        return min(1 << (budget.bit_length() - 1), FMA_CHAINS)

    def contraction_tiles(self, itemsize: int = 4) -> tuple[tuple[int, int], ...]:
        """Register tiles for a contraction, best first, as (lanes along the vectorised output axis, rows along the
        blocked one): two vectors by `tile_rows`, then one vector and half of one for axes the bigger one does not
        split (or would pad by more than double), each by `narrow_tile_rows`; rows of one are no tile."""
        lanes, rows = self.lanes(itemsize), self.tile_rows()
        half, narrow = max(lanes // 2, 1), self.narrow_tile_rows()
        tiles = ((2 * lanes, rows), (lanes, narrow), (half, narrow))
        return tuple(t for t in dict.fromkeys(tiles) if t[1] >= 2)

    def narrow_tile_rows(self) -> int:
        """Rows of a contraction's register tile one vector (or less) wide: as many accumulators as keep the FMA
        units busy (`FMA_CHAINS`), a power of two, fewer if the registers beside the tile's one vector of a column and
        one broadcast row value do not hold them (8 with AVX2's 16 registers as with AVX-512's 32). Half the rows of
        the two-vector tile, as these tiles had (AVX2 8 x 2, AVX-512 16 x 4 and 8 x 4), are 2 or 4 accumulators: each
        FMA waited on its own last result (1000 x 1000 @ 1000 x 200 ran at 11 GFLOP/s on AVX2, 10 on AVX-512, a
        sixth and a fourteenth of numpy's)."""
        budget = self.vector_registers - 2
        return min(1 << (budget.bit_length() - 1), FMA_CHAINS)

    def dot_tile(self) -> tuple[int, int]:
        """(rows, columns) of a dot-product tile (a contraction whose operands both run along the reduce, `q @ k.T`):
        rows x columns vector accumulators beside a vector of each row's and column's operand: 4 x 4 with 32
        registers (16 + 8), 2 x 4 with 16 (8 + 6)."""
        return max(self.tile_rows() // 2, 1), 4

    def max_tile_lanes(self, itemsize: int = 4) -> int:
        """Upcast x unroll lanes a kernel may have: the largest register tile (two vectors by `tile_rows`, half the
        register file). Beyond it accumulators spill and code size (and compile time) grows faster than speed."""
        return self.vector_registers * self.lanes(itemsize) // 2

    def upcast_amounts(self, itemsize: int = 4) -> tuple[int, ...]:
        """Amounts a search tries for UPCAST: small register blocks (3 for odd sizes), then powers of two up to a
        vector's lanes."""
        return tuple(sorted({2, 3, 4, *self._powers(8, self.lanes(itemsize))}))

    def unroll_amounts(self, itemsize: int = 4) -> tuple[int, ...]:
        """Amounts a search tries for UNROLL: powers of two up to a vector's lanes (independent accumulators hide the
        add latency; more than a vector's worth only adds code)."""
        return self._powers(2, self.lanes(itemsize))

    def padto_amounts(self, itemsize: int = 4) -> tuple[int, ...]:
        """Amounts a search tries for PADTO: powers of two from 4 up to a vector's lanes."""
        return self._powers(4, self.lanes(itemsize))

    @staticmethod
    def _powers(lo: int, hi: int) -> tuple[int, ...]:
        out, p = [], lo
        while p <= max(hi, lo):
            out.append(p)
            p *= 2
        return tuple(out)

    def min_thread_work(self, itemsize: int = 4) -> int:
        """Loop iterations a thread must get for spreading a kernel over cores to pay (`THREAD_HANDOFF_VECTORS`
        vector iterations' worth)."""
        return THREAD_HANDOFF_VECTORS * self.lanes(itemsize)

    def threads(self, work: int, itemsize: int = 4, chunks: bool = True) -> int:
        """How many parts a kernel of `work` loop iterations is split into: one a core, unless some core would get
        less than `min_thread_work`; and with work for more, up to `CHUNKS_PER_CORE` a core, each at least that
        (not without `chunks`: a kernel each part of which walks something whole, a scatter's updates)."""
        parts = work // self.min_thread_work(itemsize)
        if parts < self.cores or self.cores == 1 or not chunks:   # (one core has no other to share its parts with)
            return max(1, min(parts, self.cores))
        return self.cores * min(CHUNKS_PER_CORE, parts // self.cores)

    def thread_split(self, size: int, work: int | None = None, itemsize: int = 4, chunks: bool = True) -> int:
        """The THREAD amount for a loop of `size` in a kernel of `work` iterations: the most parts (at most
        `threads(work)`, or every core when `work` is not given: a search times what it tries) that divide the loop
        evenly, a multiple of the cores where there are more parts than cores (each core claims as many); 1 for
        none."""
        most = self.cores if work is None else self.threads(work, itemsize, chunks)
        fits = [n for n in range(min(most, size), 1, -1) if size % n == 0]
        return next((n for n in fits if n <= self.cores or n % self.cores == 0), 1)

    def matmul_blocks(self, itemsize: int = 4) -> tuple[int, int, int]:
        """Cache blocks (k, m, n) of a matmul, by the analytical model of BLIS (Low et al., 2016): a `k`-deep
        micro-panel of B (k x tile lanes) and one of A (tile rows x k) fill half of L1d (the other half holds the
        output tile and what streams through); an `m` x `k` block of A half of L2; a `k` x `n` panel of B half of L3
        (shared by the cores). Each is rounded down to a multiple of the register tile it is made of."""
        nr, mr = self.contraction_tiles(itemsize)[0]
        k = max(self.l1d // 2 // ((nr + mr) * itemsize), 1)
        k = 1 << (k.bit_length() - 1)   # a power of two: the reduce range splits by it
        m = max(self.l2 // 2 // (k * itemsize) // mr * mr, mr)
        n = max(self.l3 // 2 // (k * itemsize) // nr * nr, nr)
        return k, m, n

    def panels_outside_rows(self, b_bytes: int, panel_bytes: int) -> bool:
        """Whether a register-tiled contraction's loop over the panels of its vector operand B (`b_bytes` in all,
        `panel_bytes` a panel) goes outside its loop over the row blocks (`heuristics._panel_order`): B does not
        fit half of L2 (the rest holds A's block and what streams through), and a panel does."""
        return b_bytes > self.l2 // 2 and panel_bytes <= self.l2 // 2

    def panel_fits_cache(self, panel_bytes: int) -> bool:
        """Whether a contraction's panel of its vector operand (the reduce's depth by the register tile's lanes),
        copied into a buffer on the stack of the core running it (`tgfx/lowering/panel_buffer.py`), stays in L2 while
        each row tile of the output reads it: a quarter of L2, the rest for the other operand's rows and the outputs
        streaming through. It bounds the buffer for any depth: a deeper panel is packed by a kernel of its own."""
        return panel_bytes <= self.l2 // 4

    def row_fits_cache(self, row_bytes: int) -> bool:
        """Whether a row of `row_bytes` (and its output) stays in L2 between passes over it: a row-wise reduction
        (softmax, layernorm) can then read it more than once at cache speed."""
        return 2 * row_bytes <= self.l2 // 2


# the lowest PTX ISA version each architecture accepts (PTX ISA manual, "Release notes"); code is written in at
# least `MIN_PTX` (8.0: the instructions the renderer uses, and what every CUDA 12 driver JIT-compiles)
ARCH_PTX = {50: 40, 52: 41, 53: 42, 60: 50, 61: 50, 62: 50, 70: 60, 72: 61, 75: 63, 80: 70, 86: 71, 87: 74, 89: 78,
            90: 78, 100: 86, 101: 86, 103: 88, 120: 87, 121: 88}
MIN_PTX = 80
# the driver's attribute numbers (`CUdevice_attribute` in cuda.h) that `GPUTarget.from_attributes` reads
CU_DEVICE_ATTRIBUTES = {
    "MAX_THREADS_PER_BLOCK": 1, "MAX_BLOCK_DIM_X": 2, "MAX_GRID_DIM_X": 5, "MAX_GRID_DIM_Y": 6, "MAX_GRID_DIM_Z": 7,
    "MAX_SHARED_MEMORY_PER_BLOCK": 8, "WARP_SIZE": 10, "MAX_REGISTERS_PER_BLOCK": 12, "MULTIPROCESSOR_COUNT": 16,
    "L2_CACHE_SIZE": 38, "MAX_THREADS_PER_MULTIPROCESSOR": 39, "COMPUTE_CAPABILITY_MAJOR": 75,
    "COMPUTE_CAPABILITY_MINOR": 76, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 81,
    "MAX_REGISTERS_PER_MULTIPROCESSOR": 82}
# a thread holds at most this many 32-bit registers (every architecture since sm_35: the instruction encoding)
MAX_REGISTERS_PER_THREAD = 255
# threads a block is given when a kernel has no reason for another count: 8 warps, small enough that a block's
# registers stay under a quarter of an SM's file at the per-thread maximum, large enough to hide a load's latency
DEFAULT_BLOCK_WARPS = 8
# bytes one thread loads at once: the widest global load (`ld.global.v4.b32`)
GPU_VECTOR_BYTES = 16
# reduce steps a block's shared tiles hold at most: 16 float32 steps of a 128 x 64 block tile are 12 KiB, and a
# barrier pair a 16 steps is under a tenth of the 512 FMAs a thread's 4 x 8 register tile does meanwhile; deeper
# tiles only cost shared memory (blocks an SM) for barriers that are already rare
SHARED_TILE_STEPS = 16


@dataclass(frozen=True)
class GPUTarget:
    """One NVIDIA GPU, as far as code generation cares.

    Args:
        name: the device's name (the driver's, or "sm_90" for the default): part of cache keys.
        capability: compute capability (major, minor): code is generated for `sm_{major}{minor}`.
        sms: streaming multiprocessors (how many blocks run at once, times the blocks an SM holds).
        warp_size: threads that run in lockstep (shuffles reduce across them).
        max_threads_per_block: the most threads one block may have.
        registers_per_block: 32-bit registers one block may use (split among its threads).
        shared_per_block: bytes of shared memory one block may use without opting in to more (a kernel's static
            shared buffers, which is all tgfx's are).
        shared_per_sm: bytes of shared memory an SM has for its blocks together.
        max_grid: the most blocks along the grid's x, y and z axes.
        l2: bytes of L2 cache.
        ptx: the PTX ISA version the code is written in (80 = 8.0); 0 picks `max(MIN_PTX, ARCH_PTX[sm])`.
        threads_per_sm: the most threads an SM holds at once (its warps' slots): with `sms`, how many threads a
            launch needs to fill the GPU.
    """
    name: str
    capability: tuple[int, int]
    sms: int
    warp_size: int = 32
    max_threads_per_block: int = 1024
    registers_per_block: int = 65536
    shared_per_block: int = 48 << 10
    max_grid: tuple[int, int, int] = (2 ** 31 - 1, 65535, 65535)
    l2: int = 50 << 20
    ptx: int = 0
    triple: str = "nvptx64-nvidia-cuda"
    threads_per_sm: int = 2048
    shared_per_sm: int = 228 << 10

    def __post_init__(self) -> None:
        if not self.ptx:
            object.__setattr__(self, "ptx", max(MIN_PTX, ARCH_PTX.get(self.sm_number, MIN_PTX)))

    @staticmethod
    def from_attributes(name: str, attrs: dict[str, int], ptx: int = 0) -> GPUTarget:
        """The target of a device from its driver attributes, by the names of `CU_DEVICE_ATTRIBUTES` (without the
        `CU_DEVICE_ATTRIBUTE_` prefix): what the runtime reads with `cuDeviceGetAttribute`. A missing attribute
        keeps the default's."""
        d = GPU_DEFAULT
        return GPUTarget(
            name, (attrs["COMPUTE_CAPABILITY_MAJOR"], attrs["COMPUTE_CAPABILITY_MINOR"]),
            attrs.get("MULTIPROCESSOR_COUNT", d.sms), attrs.get("WARP_SIZE", d.warp_size),
            attrs.get("MAX_THREADS_PER_BLOCK", d.max_threads_per_block),
            attrs.get("MAX_REGISTERS_PER_BLOCK", d.registers_per_block),
            attrs.get("MAX_SHARED_MEMORY_PER_BLOCK", d.shared_per_block),
            (attrs.get("MAX_GRID_DIM_X", d.max_grid[0]), attrs.get("MAX_GRID_DIM_Y", d.max_grid[1]),
             attrs.get("MAX_GRID_DIM_Z", d.max_grid[2])),
            attrs.get("L2_CACHE_SIZE", d.l2), ptx,
            threads_per_sm=attrs.get("MAX_THREADS_PER_MULTIPROCESSOR", d.threads_per_sm),
            shared_per_sm=attrs.get("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", d.shared_per_sm))

    @property
    def sm_number(self) -> int:
        return self.capability[0] * 10 + self.capability[1]

    @property
    def cpu(self) -> str:
        """LLVM's name for the architecture (the NVPTX target machine's `cpu`)."""
        return f"sm_{self.sm_number}"

    @property
    def features(self) -> str:
        """LLVM's feature string: the PTX version."""
        return f"+ptx{self.ptx}"

    @functools.cached_property
    def key(self) -> str:
        """A short stable name of everything here: part of every cache key of code chosen or compiled for it."""
        text = "|".join(str(getattr(self, f.name)) for f in dataclasses.fields(self))
        return f"{self.cpu}.{hashlib.sha256(text.encode()).hexdigest()[:12]}"

    # ---- kernel options derived from it ----
    def block_threads(self) -> int:
        """Threads of a block by default (`DEFAULT_BLOCK_WARPS` warps, at most the device's maximum)."""
        return min(DEFAULT_BLOCK_WARPS * self.warp_size, self.max_threads_per_block)

    def fill_threads(self) -> int:
        """Threads a launch needs for every SM to hold a block of the default size (`block_threads`): two warps for
        each of an SM's schedulers, to hide a load's latency behind another's work. A kernel that would launch fewer
        takes less work a thread (a smaller register tile) to launch more."""
        return self.sms * self.block_threads()

    def register_budget(self, threads: int) -> int:
        """32-bit registers each of `threads` threads of a block may use (a multiple of 8, the allocation unit), at
        most `MAX_REGISTERS_PER_THREAD`: the bound `nvvm.maxntid` makes ptxas keep to."""
        return max(min(MAX_REGISTERS_PER_THREAD, self.registers_per_block // max(threads, 1) // 8 * 8), 8)

    def lanes(self, itemsize: int = 4) -> int:
        """Elements of `itemsize` bytes one thread loads at once (`GPU_VECTOR_BYTES`)."""
        return max(GPU_VECTOR_BYTES // itemsize, 1)

    @property
    def mask_registers(self) -> bool:
        """A thread's vector masks are predicates built lane by lane (no CPU-style mask register to fill at once)."""
        return False

    def contraction_tile(self, itemsize: int = 4) -> tuple[int, int]:
        """A thread's register tile of a contraction's outputs, (lanes along the vectorised axis, rows along the
        reused one): a vector's lanes wide, and as many rows (a power of two, at most twice the lanes) as keep the
        accumulators, in 32-bit registers, within a quarter of a thread's budget at the default block size (the
        rest holds the operands, addresses and the loop)."""
        lanes = self.lanes(itemsize)
        words = max(itemsize // 4, 1)
        rows = 1
        while rows < 2 * lanes and lanes * rows * 2 * words <= self.register_budget(self.block_threads()) // 4:
            rows *= 2
        return lanes, rows

    def group_threads(self, size: int) -> int:
        """Threads of a block that reduce a row of `size` together: a power of two, at least a warp, at most
        `block_threads`, and no more than the row has elements (rounded up to a warp)."""
        n = self.warp_size
        while n < min(size, self.block_threads()):
            n *= 2
        return min(n, self.block_threads())

    def shared_tile_depth(self, tile_elements: int, itemsize: int = 4) -> int:
        """Reduce steps a contraction's block stages in shared memory at once (`optimize_gpu.stage_shared`), its
        operands' tiles `tile_elements` elements a step together: the most (a power of two, at most
        `SHARED_TILE_STEPS`) whose tiles take no more than a quarter of a block's shared memory, and no more than
        the SM's share of each of the blocks it holds at the default block size (so that shared memory does not
        bound them before threads do); 0 where not even two steps fit."""
        blocks = max(self.threads_per_sm // self.block_threads(), 1)
        budget = min(self.shared_per_block // 4, self.shared_per_sm // blocks)
        steps = 1
        while steps < SHARED_TILE_STEPS and 2 * steps * tile_elements * itemsize <= budget:
            steps *= 2
        return steps if steps >= 2 else 0

    def shared_words(self, threads: int, itemsize: int = 8) -> int:
        """Bytes of shared memory a block reduction of `threads` threads uses: one word per warp."""
        return -(-threads // self.warp_size) * itemsize


# an H200 (sm_90, 132 SMs, 50 MiB L2): used when no device is present
GPU_DEFAULT = GPUTarget("sm_90", (9, 0), 132)


# ---- what the machine says ----
def _parse_size(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text.rstrip("KMGB")
    return int(digits) * scale if digits.isdigit() else None


def read_caches(root: str | os.PathLike[str] = CACHE_ROOT) -> dict[str, int]:
    """Cache sizes in bytes {"l1d", "l2", "l3"} from a sysfs cache folder (`index*/{level,type,size}`); a level
    missing or unreadable gets its `FALLBACK_CACHES` size."""
    found: dict[str, int] = {}
    for index in sorted(pathlib.Path(root).glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if size is None or kind == "Instruction" or level not in (1, 2, 3):
            continue
        name = "l1d" if level == 1 else f"l{level}"
        found[name] = max(found.get(name, 0), size)
    return {name: found.get(name, fallback) for name, fallback in FALLBACK_CACHES.items()}


def host_cores() -> int:
    """The cores this process may run on (its affinity mask: a container's share, not the whole machine's)."""
    with contextlib.suppress(AttributeError, OSError):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


# ---- what LLVM says ----
_lock = forksafe.lock(reentrant=True)   # LLVM's initialisation, the probes, and the caches below


def _llvm():  # noqa: ANN202 -- llvmlite.binding, initialised once
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm


@contextlib.contextmanager
def _stderr_to(f) -> Iterator[None]:  # noqa: ANN001
    """The process's file descriptor 2 into `f`: LLVM writes its CPU list (and its complaints) there, not through
    any API."""
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@functools.cache
def llvm_cpu_names() -> frozenset[str]:
    """The CPU names LLVM knows for the host's architecture (what `TGFX_CPU` may say). LLVM aborts the process when
    asked to compile for a name it does not know, so names are checked against this list first."""
    with _lock, tempfile.TemporaryFile() as f:
        llvm = _llvm()
        with _stderr_to(f):
            llvm.Target.from_default_triple().create_target_machine(cpu="help", features="")
        f.seek(0)
        text = f.read().decode(errors="replace")
    names, listing = set(), False
    for line in text.splitlines():
        if line.startswith("Available CPUs"):
            listing = True
        elif line.startswith("Available features"):
            break
        elif listing and line.strip():
            names.add(line.split()[0])
    return frozenset(names)


# what each probe compiles, and the instruction that shows the feature: LLVM has no API for the features a named CPU
# implies, but the code it generates for that CPU shows them
_PROBES = {
    "avx512f": ("define void @f(ptr %p) {\n  %v = load <16 x float>, ptr %p\n  %w = fadd <16 x float> %v, %v\n"
                "  store <16 x float> %w, ptr %p\n  ret void\n}", "zmm"),
    "avx": ("define void @f(ptr %p) {\n  %v = load <8 x float>, ptr %p\n  %w = fadd <8 x float> %v, %v\n"
            "  store <8 x float> %w, ptr %p\n  ret void\n}", "ymm"),
    "avx2": ("define void @f(ptr %p) {\n  %v = load <8 x i32>, ptr %p\n  %w = mul <8 x i32> %v, %v\n"
             "  store <8 x i32> %w, ptr %p\n  ret void\n}", "vpmulld\t%ymm"),
    "fma": ("declare float @llvm.fma.f32(float, float, float)\ndefine float @f(float %a, float %b, float %c) {\n"
            "  %r = call float @llvm.fma.f32(float %a, float %b, float %c)\n  ret float %r\n}", "vfmadd"),
}


@functools.cache
def cpu_features(cpu: str) -> str:
    """LLVM's features for the named CPU, as far as kernels use them (the vector extensions and FMA), as a feature
    string: read from the code LLVM generates for that CPU."""
    llvm = _llvm()
    triple = llvm.get_default_triple()
    if triple.startswith(("aarch64", "arm64")):
        return "+neon,+fp-armv8"   # every aarch64 CPU: 128-bit vectors with FMA
    known = llvm_cpu_names()
    if cpu not in known:
        close = difflib.get_close_matches(cpu, sorted(known), n=3)
        raise ValueError(f"TGFX_CPU={cpu!r}: LLVM {'.'.join(map(str, llvm.llvm_version_info))} knows no such CPU"
                         f"{f'; did you mean {close}' if close else ''} (unset TGFX_CPU for this machine's own)")
    with _lock:
        tm = llvm.Target.from_default_triple().create_target_machine(cpu=cpu, features="", opt=2)
        found = [name for name, (ir, shows) in _PROBES.items() if shows in tm.emit_assembly(llvm.parse_assembly(ir))]
    return ",".join(f"{'+' if name in found else '-'}{name}" for name in _PROBES)


def _machine(cpu: str, features: str, triple: str) -> Target:
    return Target(cpu, features, host_cores(), **read_caches(), triple=triple)


@functools.cache
def native_target() -> Target:
    """This machine as it is: LLVM's host CPU name and features, its cores and caches."""
    with _lock:
        llvm = _llvm()
        return _machine(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(), llvm.get_default_triple())


@functools.cache
def _named_target(cpu: str) -> Target:
    return dataclasses.replace(native_target(), cpu=cpu, features=cpu_features(cpu))


def target_for(cpu: str) -> Target:
    """The target for LLVM CPU `cpu` on this machine (its cores and caches): `native_target()` for the host's own
    name, else LLVM's features for that CPU. Cached (thread-safe); an unknown name raises ValueError."""
    if cpu == native_target().cpu:
        return native_target()
    with _lock:
        return _named_target(cpu)


def host_target() -> Target:
    """The target kernels are compiled for now: the machine's own (`native_target`), or the CPU `TGFX_CPU` names
    (`target_for`), with `TGFX_CORES` cores where that flag gives a number."""
    name = str(config.CPU.value)
    target = target_for(name) if name else native_target()
    if config.CORES.value and (cores := _cores_flag(config.CORES.value)):
        target = _with_cores(target, cores)
    return target if target.flush_denormals == bool(config.FLUSH_DENORMALS) else _flushing(target)


def _cores_flag(value: object) -> int:
    """`TGFX_CORES`' value as a count of cores (0: the machine's own), or an error that names the flag."""
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).strip().isdigit():
        raise ValueError(f"TGFX_CORES={value!r}: the cores of the target to choose thread splits for must be a "
                         "whole number (unset it, or 0, for this machine's own)")
    return int(value)


@functools.cache
def _with_cores(target: Target, cores: int) -> Target:
    """`target` with `cores` cores (one object each, so its `key` is computed once)."""
    return target if target.cores == cores else target.with_cores(cores)


@functools.cache
def _flushing(target: Target) -> Target:
    """`target` with the other subnormal mode (one object each, so its `key` is computed once)."""
    return dataclasses.replace(target, flush_denormals=not target.flush_denormals)


def check_runnable(target: Target) -> None:
    """Raise if code for `target` uses vector instructions this machine lacks (it would die of SIGILL)."""
    native = native_target()
    missing = sorted(f for f in target.enabled & set(_PROBES) if f not in native.enabled)
    if missing:
        raise RuntimeError(f"TGFX_CPU={target.cpu!r} compiles for {', '.join(missing)}, which this machine "
                           f"({native.cpu}) lacks: its kernels can be rendered (DEBUG=4) but not run here; unset "
                           f"TGFX_CPU, or name a CPU of this machine's class")


__all__ = ["Target", "GPUTarget", "GPU_DEFAULT", "CU_DEVICE_ATTRIBUTES",
           "host_target", "native_target", "target_for", "cpu_features", "read_caches", "check_runnable"]
