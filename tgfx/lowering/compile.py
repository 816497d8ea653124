"""compile: LLVM IR text to native code through llvmlite, for the host CPU.

One MCJIT engine per process. Each module is parsed, verified, optimised at O3 with the new pass builder (loop and
SLP vectorisation on, the host's CPU name and features), added to the engine, finalised, and its function address
returned. Modules are cached in memory by the hash of their IR and the target.
"""
from __future__ import annotations

import functools
import hashlib
import threading

import llvmlite.binding as llvm

from tgfx import config
from tgfx.counters import counters


@functools.cache
def _target() -> tuple[llvm.TargetMachine, str]:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    tm = llvm.Target.from_default_triple().create_target_machine(cpu=cpu, features=features, opt=3, reloc="static",
                                                                 codemodel="default")
    return tm, f"{llvm.get_default_triple()}|{cpu}|{features}|llvm{'.'.join(map(str, llvm.llvm_version_info))}"


class _Engine:
    """The process's MCJIT engine; modules are added once and live as long as the process."""

    def __init__(self) -> None:
        tm, self.target = _target()
        self.tm = tm
        self.ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        self.lock = threading.Lock()
        self.loaded: dict[str, int] = {}

    def optimize(self, mod: llvm.ModuleRef) -> None:
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(self.tm, pto)
        pb.getModulePassManager().run(mod, pb)

    def add(self, name: str, ir: str) -> int:
        with self.lock:
            key = hashlib.sha256(f"{self.target}\n{ir}".encode()).hexdigest()
            if key in self.loaded:
                return self.loaded[key]
            mod = llvm.parse_assembly(ir)
            mod.verify()
            counters.compile_count += 1
            self.optimize(mod)
            mod.name = key
            self.ee.add_module(mod)
            self.ee.finalize_object()
            addr = self.ee.get_function_address(name)
            assert addr, f"compiled module has no function {name}"
            self.loaded[key] = addr
            return addr


@functools.cache
def engine() -> _Engine:
    return _Engine()


def compile_llvm(name: str, ir: str) -> int:
    """Compile LLVM IR text and return the address of function `name`."""
    if config.DEBUG >= 4:
        print(ir)
    return engine().add(name, ir)


def optimized_ir(ir: str) -> str:
    """The IR after LLVM's optimiser (for DEBUG output and tests)."""
    mod = llvm.parse_assembly(ir)
    engine().optimize(mod)
    return str(mod)
