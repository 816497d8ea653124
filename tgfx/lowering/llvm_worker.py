"""llvm_worker: LLVM IR to an object file for the host CPU, in this process or in a compile worker process.

llvmlite runs every call into LLVM under one process-wide lock, so a process compiles one module at a time. A
program's first call spends most of its time in LLVM's optimiser; a second process compiles beside the first.
This module is the whole of that second process: it imports llvmlite and the standard library only (not tgfx), so it
starts in about 0.1 s, and `tgfx/lowering/compile.py` uses the same functions in-process, so both produce the same
object code.

Run as a script, it serves requests on its standard input until that closes: a request is its length (8 bytes,
little endian) and its UTF-8 text, a first line "<cpu>\t<features>" naming the target (empty: the host) and the IR;
the answer is a status byte (0: an object file, 1: an error message), the
payload's length (8 bytes) and the payload.
"""
from __future__ import annotations

import struct
import sys

import llvmlite.binding as llvm

OK, FAILED = 0, 1


def initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def target_machine(cpu: str = "", features: str = "") -> llvm.TargetMachine:
    """The target machine for LLVM CPU `cpu` with `features` (the host's when no CPU is named), at O3.
    The large code model, with static relocations: MCJIT places a kernel's code and its constants (separate
    sections) each anywhere in the 64-bit address space, so every reference between them must be a 64-bit address.
    The small model's are 32-bit: absolute ones with static relocations (a select of two float constants became an
    indexed load from a table at a 32-bit address) and PC-relative ones with position-independent code, which
    aborted the process (LLVM's assertion `isInt<32>(RealOffset)`) once a long run had placed the two sections more
    than 2 GB apart. (Large and position-independent crashed in RuntimeDyld's GOT handling.) The 64-bit addresses
    are set up outside the loops."""
    initialize()
    if not cpu:
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    return llvm.Target.from_default_triple().create_target_machine(cpu=cpu, features=features, opt=3, reloc="static",
                                                                   codemodel="large")


# the widest vector LLVM's SLP vectoriser builds, in bits. With AVX-512 (the renderer's "prefer-vector-width"=512)
# it tried 16 lanes of every group of scalar chains before 8 and 4: an FNO spectral contraction's 12 accumulators of
# strided loads, unrolled 4 times by LLVM, took 500 ms of SLP to build no vector at all (29 ms with SLP off, 120
# capped at 256 bits), a sixth of the model's whole first call. Kernels whose vectors matter are written as vectors
# by the renderer (a vector range; LLVM's loop vectoriser keeps 512 bits); of the 258 modules of four example
# programs' first calls, two came out different under the cap.
SLP_MAX_BITS = 256


def slp_bits(mod: llvm.ModuleRef) -> int:
    """The widest SLP vector for `mod`: its functions' preferred vector width (the target's), at most `SLP_MAX_BITS`."""
    widths = [int(a.split(b'="')[1].rstrip(b'"')) for f in mod.functions for a in f.attributes
              if a.startswith(b'"prefer-vector-width"=')]
    return min([SLP_MAX_BITS, *widths])


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine, slp: bool = True) -> None:
    """LLVM's O3 pipeline with loop and (unless `slp` is False) SLP vectorisation, SLP's vectors at most `slp_bits`
    wide (a process-wide option, set for each module: one module is optimised at a time), and unrolling."""
    if slp:
        llvm.set_option("", f"-slp-max-reg-size={slp_bits(mod)}")
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = slp
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


# named metadata the renderer puts on a module that hashes (tgfx/lowering/render_llvm.py: HASH_XORS); defined here,
# where the compile worker (which imports nothing of tgfx) reads it
NO_LSR = "!tgfx.no_lsr = !{}"
# a module whose vectors the renderer wrote (a kernel with a vector range): LLVM's SLP vectoriser has nothing left to
# build, and searched its per-lane loads and stores for vectors anyway (a weight gradient's epilogue: 99 -> 34 ms)
NO_SLP = "!tgfx.no_slp = !{}"


def set_strength_reduction(ir: str) -> None:
    """Turn LLVM's loop strength reduction off for the module `ir` if it is marked `!tgfx.no_lsr`, else on. The option
    is process-wide: it is set before each module's code is generated (under the one-module-at-a-time lock)."""
    llvm.set_option("", f"-disable-lsr={'true' if NO_LSR in ir else 'false'}")


# between the modules of a request that are compiled as one (`compile_ir`)
NEXT_MODULE = "\n; tgfx: next module\n"


def compile_ir(ir: str, tm: llvm.TargetMachine) -> bytes:
    """Parse, verify, optimise and emit one module (`set_strength_reduction` for its code generation). `ir` may be
    several modules joined by `NEXT_MODULE`, alike in their marks (`NO_SLP`, `NO_LSR`): they are linked into one and
    compiled as one object that defines all their kernels. Each function is optimised and its code generated as
    alone, but a module's fixed cost (LLVM's code generation pipeline is built for every module: 2.8 ms for an empty
    kernel, half of it in emitting the object) is paid once."""
    first, *more = ir.split(NEXT_MODULE) if NEXT_MODULE in ir else (ir,)
    mod = llvm.parse_assembly(first)
    mod.verify()
    for text in more:
        other = llvm.parse_assembly(text)
        other.verify()
        mod.link_in(other)
    optimize(mod, tm, slp=NO_SLP not in ir)
    set_strength_reduction(ir)
    return bytes(tm.emit_object(mod))


def _read(stream: object, n: int) -> bytes | None:
    data = stream.read(n)  # type: ignore[attr-defined]
    return data if len(data) == n else None


def serve(stdin: object, stdout: object) -> None:
    """Answer requests until `stdin` closes."""
    machines: dict[str, llvm.TargetMachine] = {}
    while (head := _read(stdin, 8)) is not None:
        (n,) = struct.unpack("<Q", head)
        data = _read(stdin, n)
        if data is None:
            return
        target, _, ir = data.decode().partition("\n")
        try:
            if target not in machines:
                machines[target] = target_machine(*target.split("\t"))
            status, payload = OK, compile_ir(ir, machines[target])
        except Exception as e:  # noqa: BLE001 -- the parent raises it, with the kernel's name
            status, payload = FAILED, f"{type(e).__name__}: {e}".encode()
        stdout.write(bytes([status]) + struct.pack("<Q", len(payload)) + payload)  # type: ignore[attr-defined]
        stdout.flush()  # type: ignore[attr-defined]


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
