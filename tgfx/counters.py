"""Counts of work done, for tests and for people: assert counts, never wall-clock times."""
from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class Counters:
    kernel_count: int = 0      # kernel launches submitted (a loop's body counts once, whatever its trip count)
    compile_count: int = 0     # programs compiled by LLVM
    schedule_count: int = 0    # graphs scheduled (cache misses)
    copy_count: int = 0        # buffer copies submitted (likewise)

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, 0)


counters = Counters()
