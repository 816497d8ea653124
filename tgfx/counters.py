"""Counts of work done, for tests and for people: assert counts, never wall-clock times."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class Counters:
    kernel_count: int = 0      # kernel launches encoded (a device loop's body twice: one way, and back)
    compile_count: int = 0     # programs compiled by LLVM to run (not BEAM candidates)
    module_count: int = 0      # LLVM modules those were compiled in (a queue of kernels is compiled as one module)
    schedule_count: int = 0    # graphs scheduled (cache misses)
    copy_count: int = 0        # buffer copies submitted (likewise)
    cached_object_reads: int = 0  # compiled objects read from the disk cache (a batch's once for all its kernels)
    search_count: int = 0      # BEAM searches run (kernels whose options were not in the search cache)
    search_compile_count: int = 0  # BEAM candidates compiled to be timed
    alloc_count: int = 0       # device buffers allocated for computed values (eager results, jit outputs and arenas)
    trace_count: int = 0       # functions traced by jit (every Jit's retraces too)
    uop_count: int = 0         # UOps of eager graphs realised (outside bodies; not constants, views of them): a step

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, 0)


counters = Counters()
