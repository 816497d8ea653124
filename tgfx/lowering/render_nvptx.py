"""render_nvptx: a kernel as NVPTX LLVM IR and PTX for an NVIDIA GPU (`GPUTarget`), through llvmlite.

The kernel ABI: `define ptx_kernel void @name(ptr addrspace(1) noalias align 16 %g0, ...)`, one 8-byte global pointer
per buffer slot from 0 to the highest slot the kernel uses (`LaunchDims.params`), so an EXEC packet's buffer words
are the kernel's parameter buffer as they are. Buffers are at least 64-byte aligned (the allocators' contract in
`tgfx/devices/hcq.py`, and the arena's offsets), which the `align 16` promises LLVM so that adjacent accesses become
16-byte vector loads and stores.

The body is the CPU renderer's (`render_llvm.py`: the same op rules, loops, registers), with what a GPU adds: the
thread ids of `optimize_gpu.py`'s SPECIALs read from `llvm.nvvm.read.ptx.sreg.*` at entry (threads past a grid
axis's end return there), block REDUCEs as warp shuffles (`llvm.nvvm.shfl.sync.bfly.i32`) and a shared-memory
(addrspace 3) exchange between warps with barriers, and the block size as `"nvvm.reqntid"` (ptxas then budgets the
registers for it). LLVM's NVPTX backend selects no `llvm.sin/cos/exp/log/pow` and ptxas resolves no libm call: the
float32 exp, exp2, tanh, log, log2 and log1p are tgfx's own arithmetic (`transcendental.py`, after the options),
every other transcendental (and float64's) calls libdevice (`nvvm/libdevice/libdevice.10.bc` of the CUDA toolkit),
linked into the module and internalised so only what a kernel calls lands in its PTX.

`ptx_of(ast, target)` is what the CUDA runtime loads (`cuModuleLoadData`): (PTX text, kernel name, launch dims),
cached in memory and on disk under a key of the kernel, its options' mode, the lowering code, LLVM and the target.
"""
from __future__ import annotations

import functools
import hashlib
import math
import os
import pathlib
import shutil
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import llvmlite.binding as llvm

from tgfx import config, forksafe
from tgfx.counters import counters
from tgfx.devices.target import GPU_DEFAULT, GPUTarget, host_cores
from tgfx.dtypes import DType, dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.lowering.compile import cache_key, compiler, read_cached, write_cached
from tgfx.lowering.gpu_cost import launch_cost
from tgfx.lowering.kernel_opts import Opt
from tgfx.lowering.linearize import is_block_reduce, linearize
from tgfx.lowering.llvm_rules import (
    _INTRINSIC,
    _LIBM,
    RenderError,
    Rule,
    _kind,
    alu_rules,
    compute_type,
    mem_type,
    reg_type,
)
from tgfx.lowering.llvm_worker import set_strength_reduction
from tgfx.lowering.lru import LRU
from tgfx.lowering.optimize_gpu import TIDX, launch_dims, optimize_gpu
from tgfx.lowering.render_llvm import LLVMRenderer, step_loads
from tgfx.lowering.tensor_cores import LDMATRIX


class LaunchDims(NamedTuple):
    """How a kernel is launched: grid and block sizes (x, y, z), and how many 8-byte parameters it takes."""
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    params: int


# ---- libdevice: the toolkit's math library, for the transcendentals tgfx does not decompose ----
# where the CUDA toolkit may be, after $CUDA_HOME and $CUDA_PATH and beside `ptxas` on PATH
_CUDA_ROOTS = ("/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda")


@functools.cache
def libdevice_path() -> pathlib.Path | None:
    """`nvvm/libdevice/libdevice.10.bc` of the CUDA toolkit, or None when none is found."""
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    if (ptxas := shutil.which("ptxas")) is not None:
        roots.append(str(pathlib.Path(ptxas).resolve().parent.parent))
    for root in [*filter(None, roots), *_CUDA_ROOTS]:
        p = pathlib.Path(root) / "nvvm" / "libdevice" / "libdevice.10.bc"
        if p.is_file():
            return p
    return None


@functools.cache
def _libdevice_bitcode() -> bytes:
    p = libdevice_path()
    if p is None:
        raise RenderError("this kernel calls libdevice (a transcendental tgfx does not decompose for the GPU), and "
                          "no CUDA toolkit was found: set CUDA_HOME to one (its nvvm/libdevice/libdevice.10.bc)")
    return p.read_bytes()


def _libdevice(name: str) -> Rule:
    """A call of libdevice's `__nv_<name>f` (float) or `__nv_<name>` (double)."""
    return lambda r, t, x, f: r.call(f"__nv_{name}{'f' if t == 'float' else ''}", t, [(t, v) for v in x])


# float ops NVPTX cannot select (or would select as an approximation) go to libdevice; the rest are the CPU's rules
nvptx_rules: dict = {
    **alu_rules,
    **{(op, "f"): _libdevice(name) for op, name in {**_LIBM, **_INTRINSIC}.items()
       if op in (*_LIBM, Ops.EXP, Ops.EXP2, Ops.LOG, Ops.LOG2, Ops.SIN, Ops.COS, Ops.POW)},
    (Ops.MOD, "f"): _libdevice("fmod"),
}

_AXES = "xyz"
# what a kernel may assume of its buffers' addresses (`align 16` on its parameters): the allocators give 64
BASE_ALIGN = 16


def _twos(u: UOp) -> int:
    """How many factors of two the integer `u` is known to have (index arithmetic: sums, products, shifts)."""
    if u.op is Ops.CONST:
        return (u.arg & -u.arg).bit_length() - 1 if u.arg else 64
    if u.op is Ops.ADD:
        return min(_twos(s) for s in u.src)
    if u.op is Ops.MUL:
        return min(sum(_twos(s) for s in u.src), 64)
    if u.op is Ops.SHL and u.src[1].op is Ops.CONST:
        return min(_twos(u.src[0]) + u.src[1].arg, 64)
    if u.op is Ops.MOD and u.src[1].op is Ops.CONST:   # (a shared tile's fill: an element's digit, `stage_shared`)
        return min(_twos(u.src[0]), _twos(u.src[1]))
    if u.op is Ops.WHERE:   # (a masked read's index clamped to 0: either offset)
        return min(_twos(u.src[1]), _twos(u.src[2]))
    return 0


def _is_ldmatrix(u: UOp) -> bool:
    return u.op is Ops.LOAD and isinstance(u.arg, tuple) and u.arg[0] == LDMATRIX


class NVPTXRenderer(LLVMRenderer):
    rules = nvptx_rules
    chain_updates = True   # a register tile's unrolled lanes sum in its registers (`optimize_gpu.unroll_lanes`)

    def __init__(self, name: str, target: GPUTarget) -> None:
        super().__init__(name)
        self.target = target
        self.globals: list[str] = []
        self.tiles: set[str] = set()
        self.mma_out: dict[tuple[UOp, ...], list[str]] = {}   # a warp's mma (by its sources): its four results
        self.mma_accs: dict[tuple[UOp, ...], list[UOp]] = {}  # ... summed into these accumulators (`fuse_mma`)
        self.mma_updates: set[UOp] = set()                     # the updates `acc + mma` that are the mma's result
        self.ldm: dict[tuple[UOp, int, bool], list[str]] = {}   # a lane's ldmatrix registers by address

    def sreg(self, reg: str) -> str:
        """A special register (`tid.x`, `ctaid.y`, ...) as an i64."""
        fn = f"llvm.nvvm.read.ptx.sreg.{reg}"
        self.declares.add(f"declare i32 @{fn}()")
        return self.op_in(f"zext i32 {self.op_in(f'call i32 @{fn}()')} to i64")

    def thread_ids(self, specials: list[UOp]) -> None:
        """Every thread id the kernel uses, read at entry; threads past the end of a grid axis return."""
        threads = [1, 1, 1]   # the block's threads along x, y, z (a grid axis's threads a block)
        for u in specials:
            if u.arg[0].startswith("gidx") and u.arg[2] > 1:
                threads[int(u.arg[0][4:])] = u.arg[2]
            elif u.arg[0] == "lidx0":   # (a warp's lanes, with tensor cores' warps along y and z)
                threads[0] = u.arg[1]
        for u in specials:
            name = u.arg[0]
            if name == "lidx0":
                self.names[u] = self.sreg("tid.x")
                continue
            if name == TIDX:   # the thread's index in its block, x fastest
                tid = self.sreg("tid.x")
                for d in (1, 2):
                    if threads[d] > 1:
                        scaled = self.op_in(f"mul i64 {self.sreg(f'tid.{_AXES[d]}')}, {math.prod(threads[:d])}")
                        tid = self.op_in(f"add i64 {tid}, {scaled}")
                self.names[u] = tid
                continue
            d, size, n = _AXES[int(name[4:])], u.arg[1], u.arg[2]
            block = self.sreg(f"ctaid.{d}")
            self.names[u] = block if n == 1 else self.op_in(f"add i64 {self.op_in(f'mul i64 {block}, {n}')}, "
                                                            f"{self.sreg(f'tid.{d}')}")
            if size % n:
                inside = self.op_in(f"icmp ult i64 {self.names[u]}, {size}")
                self.n += 1
                self.emit(f"br i1 {inside}, label %G{self.n}, label %exit")
                self.lines.append(f"G{self.n}:")

    # ---- block reductions ----
    def shuffle(self, v: str, ty: str, lane_mask: int) -> str:
        """`v` (register type `ty`) of the lane whose id differs from this one's in the bits of `lane_mask`."""
        self.declares.add("declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32)")

        def shfl32(w: str) -> str:
            return self.op_in(f"call i32 @llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 {w}, i32 {lane_mask}, i32 31)")
        bits = {"i1": 1, "i8": 8, "i16": 16, "half": 16, "i32": 32, "float": 32, "i64": 64, "double": 64}[ty]
        ity = f"i{bits}"
        w = v if ty == ity else self.op_in(f"bitcast {ty} {v} to {ity}")
        if bits == 64:
            lo = shfl32(self.op_in(f"trunc i64 {w} to i32"))
            hi = shfl32(self.op_in(f"trunc i64 {self.op_in(f'lshr i64 {w}, 32')} to i32"))
            hi = self.op_in(f"shl i64 {self.op_in(f'zext i32 {hi} to i64')}, 32")
            out = self.op_in(f"or i64 {hi}, {self.op_in(f'zext i32 {lo} to i64')}")
        elif bits == 32:
            out = shfl32(w)
        else:
            out = self.op_in(f"trunc i32 {shfl32(self.op_in(f'zext {ity} {w} to i32'))} to {ity}")
        return out if ty == ity else self.op_in(f"bitcast {ity} {out} to {ty}")

    def combine(self, op: Ops, d: DType, a: str, b: str) -> str:
        """op(a, b) of two register values of dtype `d` (a reduce's step)."""
        rule = self.rules.get((op, _kind(d)))
        if rule is None:
            raise RenderError(f"no NVPTX rule for a block reduce {op} on {d!r}")
        out = rule(self, compute_type(d), [self.to_compute(a, d), self.to_compute(b, d)], "")
        return self.from_compute(out, d)

    def barrier(self) -> None:
        self.declares.add("declare void @llvm.nvvm.barrier0()")
        self.emit("call void @llvm.nvvm.barrier0()")

    def block_reduce(self, u: UOp) -> str:
        """The block REDUCE `u`: butterfly shuffles within each warp, then (more than one warp) each warp's lane 0
        writes its value to shared memory, and every thread combines the warps' values in order (the same order in
        every thread, so all get the same result). The second barrier keeps the words until all have read them (the
        reduce may run again in a loop)."""
        d, ty, op = u.dtype, reg_type(u.dtype), u.arg
        n, warp = u.src[1].arg[1], self.target.warp_size
        v = self.val(u.src[0])
        m = 1
        while m < min(n, warp):
            v = self.combine(op, d, v, self.shuffle(v, ty, m))
            m *= 2
        if n <= warp:
            return v
        warps = n // warp
        self.n += 1
        smem = f"@smem{self.n}"
        self.globals.append(f"{smem} = internal addrspace(3) global [{warps} x {ty}] poison, align 8")
        tid = self.names[u.src[1]]
        lane0 = self.op_in(f"icmp eq i64 {self.op_in(f'and i64 {tid}, {warp - 1}')}, 0")
        slot = self.op_in(f"getelementptr [{warps} x {ty}], ptr addrspace(3) {smem}, i64 0, i64 "
                          f"{self.op_in(f'udiv i64 {tid}, {warp}')}")
        self.emit(f"br i1 {lane0}, label %W{self.n}, label %W{self.n}.done")
        self.lines.append(f"W{self.n}:")
        self.emit(f"store {ty} {v}, ptr addrspace(3) {slot}")
        self.emit(f"br label %W{self.n}.done")
        self.lines.append(f"W{self.n}.done:")
        self.barrier()
        acc = ""
        for w in range(warps):
            p = self.op_in(f"getelementptr [{warps} x {ty}], ptr addrspace(3) {smem}, i64 0, i64 {w}")
            x = self.op_in(f"load {ty}, ptr addrspace(3) {p}")
            acc = x if not acc else self.combine(op, d, acc, x)
        self.barrier()
        return acc

    def align(self, idx: UOp) -> str:
        """The alignment of an access of buffer element `idx`: the element's size times the power of two its offset
        is known to be a multiple of, at most `BASE_ALIGN`. LLVM's load/store vectoriser joins adjacent accesses
        into 16-byte ones only where the first is stated 16-byte aligned (it proves nothing through the thread ids)."""
        if idx.op is not Ops.INDEX:
            return ""
        size = idx.src[0].dtype.itemsize
        return f", align {min(size << min(_twos(idx.src[1]), 8), BASE_ALIGN)}"

    # ---- tensor cores ----
    def fuse_mma(self, lin: list[UOp]) -> None:
        """The mmas whose four results are each summed into an accumulator of their own, and nothing else
        (`tensor_cores.tensor_core`: `acc_i += WMMA_i(a, b, 0)`): such an mma takes the accumulators as its C and its
        results are their updates, one instruction a step (not an mma and four adds)."""
        found: dict[tuple[UOp, ...], dict[int, tuple[UOp, UOp]]] = {}
        for u in lin:
            if u.op is not Ops.STORE or u.src[0].op is not Ops.DEFINE_ACC or u.src[1].op is not Ops.ADD:
                continue
            cur, w = u.src[1].src
            if cur.op is Ops.LOAD and cur.src[0] is u.src[0] and w.op is Ops.WMMA and \
                    all(c.op is Ops.CONST and c.arg == 0 for c in w.src[12:]):
                found.setdefault(w.src, {})[w.arg] = (u.src[0], u.src[1])
        # (each result used by its update alone; the REDUCE after the loop reads the accumulator, not the mma)
        users = [s for u in lin if u.op is not Ops.REDUCE for s in u.src if s.op is Ops.WMMA]
        for key, elems in found.items():
            if len(elems) == 4 and sum(s.src == key for s in users) == 4:
                self.mma_accs[key] = [elems[i][0] for i in range(4)]
                self.mma_updates.update(update for _, update in elems.values())

    def ldmatrix(self, u: UOp) -> list[str]:
        """The 32-bit registers a lane's `ldmatrix.sync.aligned.m8n8.x{n}[.trans].b16` (`tensor_cores._ldmatrix`) at
        shared address `u` (an INDEX of a tile) gives, loaded once for the elements that share it."""
        _, _, n, trans = u.arg
        key = (u.src[0], n, trans)
        if key not in self.ldm:
            fn = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{n}{'.trans' if trans else ''}.b16.p3"
            ret = "{" + ", ".join(["i32"] * n) + "}"
            self.declares.add(f"declare {ret} @{fn}(ptr addrspace(3))")
            p3 = self.op_in(f"addrspacecast ptr {self.names[u.src[0]]} to ptr addrspace(3)")
            out = self.op_in(f"call {ret} @{fn}(ptr addrspace(3) {p3})")
            self.ldm[key] = [self.op_in(f"extractvalue {ret} {out}, {j}") for j in range(n)]
        return self.ldm[key]

    def ldmatrix_element(self, u: UOp) -> str:
        """Element i of a lane's ldmatrix fragment: half i % 2 of its register i // 2."""
        i, word = u.arg[1], self.ldmatrix(u)[u.arg[1] // 2]
        if u.dtype == dtypes.bfloat16:
            return self.op_in(f"trunc i32 {self.op_in(f'lshr i32 {word}, {16 * (i % 2)}')} to i16")
        return self.op_in(f"extractelement <2 x half> {self.op_in(f'bitcast i32 {word} to <2 x half>')}, i64 {i % 2}")

    def fragment(self, lo: UOp, hi: UOp) -> str:
        """Two half-precision values as one 32-bit register of a fragment (`lo` in the low half): an i32 of bfloat16
        bits, a <2 x half> of float16s; an ldmatrix's register as it is."""
        if _is_ldmatrix(lo) and _is_ldmatrix(hi) and lo.src == hi.src and lo.arg[1] % 2 == 0 and \
                hi.arg == (lo.arg[0], lo.arg[1] + 1, *lo.arg[2:]):
            word = self.ldmatrix(lo)[lo.arg[1] // 2]
            return word if lo.dtype == dtypes.bfloat16 else self.op_in(f"bitcast i32 {word} to <2 x half>")
        if lo.dtype == dtypes.bfloat16:
            wide = [self.op_in(f"zext i16 {self.val(x)} to i32") for x in (lo, hi)]
            return self.op_in(f"or i32 {wide[0]}, {self.op_in(f'shl i32 {wide[1]}, 16')}")
        pair = self.op_in(f"insertelement <2 x half> poison, half {self.val(lo)}, i64 0")
        return self.op_in(f"insertelement <2 x half> {pair}, half {self.val(hi)}, i64 1")

    def mma(self, u: UOp) -> str:
        """Result `u.arg` of a warp's `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32` (one call
        of its intrinsic for the four WMMA nodes of one mma), C the accumulators where `fuse_mma` found them."""
        key = u.src
        if key not in self.mma_out:
            bf16 = u.src[0].dtype == dtypes.bfloat16
            reg = "i32" if bf16 else "<2 x half>"
            frags = [self.fragment(u.src[j], u.src[j + 1]) for j in range(0, 12, 2)]
            if key in self.mma_accs:
                c = [self.op_in(f"load float, ptr {self.names[acc]}") for acc in self.mma_accs[key]]
            else:
                c = [self.val(x) for x in u.src[12:]]
            fn = "llvm.nvvm.mma.m16n8k16.row.col." + ("bf16" if bf16 else "f32.f32")
            ret = "{float, float, float, float}"
            self.declares.add(f"declare {ret} @{fn}({', '.join([reg] * 6 + ['float'] * 4)})")
            args = ", ".join([f"{reg} {f}" for f in frags] + [f"float {x}" for x in c])
            out = self.op_in(f"call {ret} @{fn}({args})")
            self.mma_out[key] = [self.op_in(f"extractvalue {ret} {out}, {i}") for i in range(4)]
        return self.mma_out[key][u.arg]

    # ---- the kernel ----
    def render_one(self, u: UOp, is_update: bool) -> None:
        if u.op is Ops.SPECIAL:
            return   # read at entry (`thread_ids`)
        if u.op is Ops.WMMA:
            self.names[u] = self.mma(u)
            return
        if _is_ldmatrix(u):   # (its element alone: dead code where the fragment takes the register whole)
            self.names[u] = self.ldmatrix_element(u)
            return
        if u in self.mma_updates:   # acc + mma: the mma's result (it summed the accumulator itself)
            self.names[u] = self.names[u.src[1]]
            return
        if u.op is Ops.BARRIER:   # every thread of the block here, its shared stores seen by all
            self.barrier()
            return
        if u.op is Ops.DEFINE_LOCAL:   # a shared tile (`optimize_gpu.stage_shared`), read through a generic pointer
            tile = f"@tile{u.arg[0]}"
            if tile not in self.tiles:
                self.tiles.add(tile)
                self.globals.append(f"{tile} = internal addrspace(3) global [{u.arg[1]} x {mem_type(u.dtype)}] "
                                    f"poison, align {BASE_ALIGN}")
            self.names[u] = self.op_in(f"addrspacecast ptr addrspace(3) {tile} to ptr")
            return
        if is_block_reduce(u):
            self.names[u] = self.block_reduce(u)
            return
        super().render_one(u, is_update)

    def render_kernel(self, lin: list[UOp], acc_of: dict[UOp, list[UOp]], bufs: list[UOp], dims: LaunchDims) -> str:
        nslots = dims.params
        if any(u.op is Ops.DEFINE_LOCAL for u in lin):
            # a shared tile's steps (`optimize_gpu.stage_shared`): the innermost reduce loop, reading the tiles, is
            # unrolled whole, its shared reads at constant offsets
            self.tile_hints = ['!{!"llvm.loop.unroll.full"}']
            self.step_loads = step_loads(lin)
        self.bind_registers(acc_of)
        self.fuse_mma(lin)
        for b in bufs:
            self.names[b] = f"%b{b.arg[0]}"
            self.emit(f"%b{b.arg[0]} = addrspacecast ptr addrspace(1) %g{b.arg[0]} to ptr")
        self.thread_ids(sorted({u for u in lin if u.op is Ops.SPECIAL}, key=lambda u: u.arg[0]))
        update_of_acc = {u.src[1] for u in lin if u.op is Ops.STORE and u.src[0].op is Ops.DEFINE_ACC and
                         u.src[0].tag != "carry"}
        for u in lin:
            self.render_one(u, u in update_of_acc)
        params = ", ".join(f"ptr addrspace(1) noalias align 16 %g{i}" for i in range(nslots))
        return "\n".join([
            *sorted(self.declares), *self.globals,
            f"define ptx_kernel void @{self.name}({params}) #0 {{",
            "entry:", *self.allocas, "  br label %start", "start:", *self.lines, "  br label %exit",
            "exit:", "  ret void", "}",
            f'attributes #0 = {{ "nvvm.reqntid"="{",".join(map(str, dims.block))}" }}', *self.loop_metadata(),
        ])


def render_nvptx(name: str, lin: list[UOp], acc_of: dict[UOp, list[UOp]], bufs: list[UOp], dims: LaunchDims,
                 target: GPUTarget = GPU_DEFAULT) -> str:
    """A linearized GPU kernel (`optimize_gpu` applied) as NVPTX LLVM IR for `target`."""
    return NVPTXRenderer(name, target).render_kernel(lin, acc_of, bufs, dims)


# ---- compiling: LLVM IR to PTX ----
_nvptx_lock = forksafe.lock()


@functools.cache
def _target_machine(cpu: str, features: str) -> llvm.TargetMachine:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(cpu=cpu, features=features, opt=3)


def compile_ptx(ir: str, target: GPUTarget = GPU_DEFAULT) -> str:
    """NVPTX LLVM IR to PTX text for `target`: parsed, verified, libdevice linked in when called and internalised,
    optimised at O3 (the NVPTX passes: NVVMReflect folds libdevice's `__nvvm_reflect`, address spaces inferred),
    emitted."""
    if config.DEBUG >= 4:
        print(ir)
    with compiler().busy:   # one module at a time in this process (llvmlite's lock), beside the CPU's compiles
        with _nvptx_lock:
            tm = _target_machine(target.cpu, target.features)
        mod = llvm.parse_assembly(ir)
        mod.triple, mod.data_layout = target.triple, str(tm.target_data)
        mod.verify()
        kernels = {f.name for f in mod.functions if not f.is_declaration}
        if any(f.name.startswith("__nv_") for f in mod.functions):
            lib = llvm.parse_bitcode(_libdevice_bitcode())
            lib.triple, lib.data_layout = mod.triple, mod.data_layout
            mod.link_in(lib)
            for f in mod.functions:   # unused functions then go in the optimiser's dead-code elimination
                if f.name not in kernels and not f.is_declaration:
                    f.linkage = "internal"
            for g in mod.global_variables:
                if not g.is_declaration and g.linkage.name != "internal":
                    g.linkage = "internal"
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        set_strength_reduction(ir)
        return tm.emit_assembly(mod)


# ---- the kernel through every stage, cached ----
# by (kernel key, target key, options)
_ptx: LRU[tuple[str, str, str], tuple[str, str, LaunchDims]] = LRU(lambda: int(config.KERNEL_CACHE_SIZE))


def _hand_mode() -> str:
    """What of this thread's flags the heuristics' options depend on (shared tiles, tensor cores)."""
    return "hand" + ("" if config.GPU_SMEM else "-nosmem") + ("" if config.GPU_TC else "-notc")


def _mode(opts: Sequence[Opt] | None, target: GPUTarget) -> str:
    what = _hand_mode() if opts is None else \
        "opts:" + ",".join(f"{o.op}.{o.axis}.{o.amount}" for o in opts)
    return f"{'noopt' if config.NOOPT and opts is None else what}@{target.key}"


def kernel_ir(ast: UOp, target: GPUTarget = GPU_DEFAULT,
              opts: Sequence[Opt] | None = None) -> tuple[str, str, LaunchDims, list[Opt]]:
    """A kernel AST through every stage before LLVM's for `target`: (NVPTX LLVM IR, kernel name, launch dims, the
    options applied)."""
    from tgfx.lowering import decompose_transcendentals, index_level, kernel_name
    # rangeify -> symbolic, as for the CPU
    sink = index_level(ast, pieces=False)
    # threads and blocks: the GPU's options (heuristics from the target, or `opts` exactly)
    sink, applied = optimize_gpu(sink, target, opts)
    name = kernel_name(ast) if opts is None else \
        f"{kernel_name(ast)}_{hashlib.sha256(_mode(opts, target).encode()).hexdigest()[:6]}"
    if config.DEBUG >= 3:   # its launch and memory model: what a run on a GPU is to be read against
        print(f"{launch_cost(sink, target, name)}\n  options {applied}")
    # transcendentals as arithmetic, order into loops, then the LLVM IR of the GPU renderer
    lin, acc_of = linearize(decompose_transcendentals(sink))
    bufs = sorted({u for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL}, key=lambda u: u.arg[0])
    grid, block = launch_dims(sink)
    # a parameter for every slot of the AST, also one whose loads were folded away (a zero-size part): the EXEC gives
    # a word for each
    slots = max((u.arg[0] + 1 for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL), default=0)
    dims = LaunchDims(grid, block, slots)
    return render_nvptx(name, lin, acc_of, bufs, dims, target), name, dims, applied


def ptx_of(ast: UOp, target: GPUTarget = GPU_DEFAULT,
           opts: Sequence[Opt] | None = None) -> tuple[str, str, LaunchDims]:
    """A kernel AST (tensor level, buffers by slot, as a LINEAR's CALL holds it) as PTX for `target`: (PTX text, the
    kernel's name in it, `LaunchDims(grid, block, params)`). Load the text with `cuModuleLoadData`, get the function
    by the name, and launch it on `grid` x `block` threads with `params` 8-byte words (buffer slots 0 .. params - 1)
    as its parameter buffer, no dynamic shared memory.

    `opts` are applied exactly; without them the target's heuristics choose. Cached in memory and on disk."""
    return _ptx_job(ast, target, opts)()


def _ptx_job(ast: UOp, target: GPUTarget,
             opts: Sequence[Opt] | None = None) -> Callable[[], tuple[str, str, LaunchDims]]:
    """What gives `ptx_of`'s result: the cached one, or the kernel rendered to NVPTX IR here (Python) and compiled with
    LLVM and cached when called (on another thread: `preload`)."""
    mode = _mode(opts, target)
    if (hit := _ptx.get((ast.key, target.key, mode))) is not None:
        return lambda: hit
    key = cache_key(f"ptx|{ast.key}|{mode}", target)
    if (cached := read_cached(key)) is not None:
        meta, text = cached
        out = (text.decode(), meta["name"], LaunchDims(tuple(meta["grid"]), tuple(meta["block"]), meta["params"]))
        kept = _ptx.setdefault((ast.key, target.key, mode), out)
        return lambda: kept
    ir, name, dims, _ = kernel_ir(ast, target, opts)

    def compile_it() -> tuple[str, str, LaunchDims]:
        text = compile_ptx(ir, target)
        counters.compile_count += 1   # a program compiled to run, as `compile_llvm` counts the CPU's
        write_cached(key, {"name": name, "grid": dims.grid, "block": dims.block, "params": dims.params},
                     text.encode())
        return _ptx.setdefault((ast.key, target.key, mode), (text, name, dims))
    return compile_it


__all__ = ["LaunchDims", "NVPTXRenderer", "compile_ptx", "kernel_ir", "libdevice_path", "preload", "ptx_of",
           "render_nvptx"]


# (device, kernel AST key, what chose its options) -> the kernel the device loaded
_loaded: dict[tuple[str, str, str], Any] = {}
_loaded_lock = forksafe.lock()


def gpu_kernel(device: Any, ast: UOp) -> Any:
    """Kernel AST `ast` compiled to PTX for `device`'s GPU (its `target`) and loaded by its driver (`load_kernel`);
    cached per device, AST and what chooses its options (NOOPT, BEAM: this thread's flags)."""
    key = _loaded_key(device, ast)
    hit = _loaded.get(key)
    if hit is not None:
        return hit
    opts = None
    if config.BEAM > 0 and not config.NOOPT:   # the options a timed search on this device finds (search_gpu.py)
        from tgfx.lowering.search_gpu import gpu_beam_search
        opts = gpu_beam_search(device, ast, int(config.BEAM))
    return _load(device, key, ptx_of(ast, device.target, opts))


def _loaded_key(device: Any, ast: UOp) -> tuple[str, str, str]:
    """A loaded kernel's key: what chose its options is part of it, as of the CPU's compiled kernels (`opt_mode`): a
    thread inside `Context(NOOPT=1)` got the kernel with the GPU options another thread loaded before."""
    return device.name, ast.key, "noopt" if config.NOOPT else f"beam{int(config.BEAM)}" if config.BEAM > 0 else \
        _hand_mode()


def _load(device: Any, key: tuple[str, str, str], ptx: tuple[str, str, LaunchDims]) -> Any:
    kernel = device.load_kernel(*ptx)
    with _loaded_lock:
        return _loaded.setdefault(key, kernel)


def preload(kernels: Iterable[tuple[Any, UOp]]) -> None:
    """Compile and load a program's GPU kernels, (device, AST) pairs, before it is encoded: this thread renders each
    kernel's NVPTX IR (Python) while pool threads compile the one before to PTX (LLVM) and the driver JIT-compiles
    and loads it (ptxas, inside the driver), both with the GIL released, as `prelower` does for the CPU's. On the
    MLP step's 20 kernels the rendering is a third of the host's part (72 of 218 ms), and the driver's JIT comes on
    top of both, kernel after kernel, without this."""
    from tgfx.lowering import gc_paused, quick_gil_handoff
    todo = [(dev, ast, key) for dev, ast in dict.fromkeys(kernels) if (key := _loaded_key(dev, ast)) not in _loaded]
    if len(todo) < 2 or config.BEAM > 0:   # (searched kernels are compiled one by one, as each search ends)
        return
    threads = min(len(todo), host_cores())   # the driver's JIT runs side by side: one load per core at most
    with ThreadPoolExecutor(threads, thread_name_prefix="tgfx-ptx") as pool, gc_paused(), quick_gil_handoff():
        futures = []
        load = config.carry(lambda dev, key, job: _load(dev, key, job()))
        for dev, ast, key in todo:
            futures.append(pool.submit(load, dev, key, _ptx_job(ast, dev.target)))
    for f in futures:
        f.result()   # the first failure, in program order
