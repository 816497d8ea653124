"""Runtime flags: one place, readable from the environment, overridable in code with `Context`."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any


class Flag:
    """A named runtime flag whose default comes from the environment variable of the same name."""

    _all: dict[str, Flag] = {}

    def __init__(self, name: str, default: Any) -> None:
        self.name = name
        raw = os.environ.get(name)
        self.value = default if raw is None else type(default)(raw)
        Flag._all[name] = self

    def __bool__(self) -> bool:
        return bool(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __ge__(self, other: int) -> bool:
        return self.value >= other

    def __gt__(self, other: int) -> bool:
        return self.value > other

    def __repr__(self) -> str:
        return f"{self.name}={self.value!r}"


DEBUG = Flag("DEBUG", 0)          # 1: kernels as they run, 2: + options and GFLOP/s, 4: + generated code
SPEC = Flag("SPEC", 0)            # check every UOp against tgfx/ir/spec.py when it is built
BEAM = Flag("BEAM", 0)            # kernel option search width (0: heuristics only)
BEAM_BUDGET = Flag("BEAM_BUDGET", 20.0)  # seconds a BEAM search may spend on one kernel
NOOPT = Flag("NOOPT", 0)          # turn off the kernel optimiser
CACHE_DIR = Flag("TGFX_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "tgfx"))
DISK_CACHE = Flag("TGFX_DISK_CACHE", 1)
# a program touching at most this much runs on the caller when its device is idle (-1: the L2 cache of one core of
# the target description: work that fits there takes less than waking the device's thread)
INLINE_BYTES = Flag("TGFX_INLINE_BYTES", -1)
# caches of compiled work, least recently used first out (what a running program still holds stays alive)
KERNEL_CACHE_SIZE = Flag("TGFX_KERNEL_CACHE_SIZE", 1024)      # compiled kernels by AST (the disk cache is unbounded)
SCHEDULE_CACHE_SIZE = Flag("TGFX_SCHEDULE_CACHE_SIZE", 1024)  # eager graphs' schedules and encoded programs
JIT_CACHE_SIZE = Flag("TGFX_JIT_CACHE_SIZE", 256)             # traced programs per jitted function
X64 = Flag("TGFX_ENABLE_X64", 0)  # 64-bit types; without it float64/int64/uint64 become 32-bit, as in JAX
# subnormal floats in CPU kernels: 1 flushes results that would be subnormal to zero (as XLA's CPU code; arithmetic
# never takes the processor's slow path for them), 0 keeps IEEE gradual underflow (numpy's results, bit for bit);
# read when a kernel is compiled (a jitted function compiled before a change keeps its kernels)
FLUSH_DENORMALS = Flag("TGFX_FLUSH_DENORMALS", 1)
CPU = Flag("TGFX_CPU", "")        # compile for this LLVM CPU ("znver3") instead of the host's: tgfx/devices/target.py

# `update`'s names for flags, besides their own: JAX's spelling, so that ported programs keep theirs
DISABLE_JIT = Flag("TGFX_DISABLE_JIT", 0)   # jit calls its function directly, eagerly (debugging: prints, pdb)
_ALIASES = {"x64": "TGFX_ENABLE_X64", "enable_x64": "TGFX_ENABLE_X64", "jax_enable_x64": "TGFX_ENABLE_X64",
            "jax_disable_jit": "TGFX_DISABLE_JIT", "disable_jit": "TGFX_DISABLE_JIT"}


def update(name: str, value: Any) -> None:
    """Set a flag for the rest of the process, as `jax.config.update`: `tgfx.config.update("x64", True)`."""
    flag = Flag._all.get(_ALIASES.get(name, name))
    if flag is None:
        raise ValueError(f"config.update: unknown option {name!r}; known are {sorted([*_ALIASES, *Flag._all])}")
    flag.value = type(flag.value)(value)


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within the block, jitted functions run their Python eagerly, op by op, as `jax.disable_jit`: values can be
    printed and stepped through in a debugger. The same results, slower.

    >>> with tg.disable_jit():
    ...     step(params, batch)       # step's body runs as plain eager code
    """
    with Context(TGFX_DISABLE_JIT=int(bool(disable))):
        yield


@contextlib.contextmanager
def Context(**overrides: Any) -> Iterator[None]:
    """Temporarily set flags by name: `with Context(DEBUG=2): ...`."""
    unknown = [k for k in overrides if k not in Flag._all]
    if unknown:
        raise ValueError(f"unknown flag(s) {unknown}; known flags are {sorted(Flag._all)}")
    old = {k: Flag._all[k].value for k in overrides}
    try:
        for k, v in overrides.items():
            Flag._all[k].value = v
        yield
    finally:
        for k, v in old.items():
            Flag._all[k].value = v
