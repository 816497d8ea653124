"""Runtime flags: one place, readable from the environment, overridable in code with `Context`.

A flag has a process-wide value (its environment variable, then `update`) and, in each thread, the overrides of the
`Context` blocks that thread is inside (`disable_jit`, `tgfx.enable_x64` are such blocks): as JAX's, a block changes
what its own thread computes, never another thread's work running at the same time (a thread inside
`enable_x64()` made every other thread's `asarray(1.0)` float64 while the block lasted). Work a thread hands to others
(compile threads) takes its overrides along: `carry`.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

from tgfx import forksafe

P = ParamSpec("P")
R = TypeVar("R")
# the flags that change the code compiled for a program (the kernels' options, the target, the types of Python
# values): a jitted function keeps its programs per their values (`codegen`)
CODEGEN = ("TGFX_ENABLE_X64", "NOOPT", "BEAM", "TGFX_CPU", "TGFX_CORES", "TGFX_FLUSH_DENORMALS", "GPU_SMEM",
           "GPU_TC")


class _Local(threading.local):
    over: dict[str, Any] = {}   # this thread's overrides by flag name (each block's own dict, never changed)
    codegen: dict[str, Any] = {}   # those of them that are `CODEGEN` flags
    depth = 0                         # the blocks this thread is in


_local = _Local()
_open = 0   # blocks open in any thread
_open_lock = forksafe.lock()
_values: tuple = ()   # the process-wide values of the `CODEGEN` flags, in its order (kept by `Flag.__setattr__`)
_codegen = 0          # their number (`codegen`)
_numbers: dict[tuple, int] = {}   # each combination of `CODEGEN` values seen, numbered (`codegen`)
_combinations: list[tuple] = []   # by number


class Flag:
    """A named runtime flag whose default comes from the environment variable of the same name. `value` (and
    `bool`, `int`, comparisons) read this thread's override if a `Context` gives one, else the process-wide value;
    assigning `value` sets the process-wide one (`update`)."""

    _all: dict[str, Flag] = {}

    def __init__(self, name: str, default: Any) -> None:
        self.name = name
        raw = os.environ.get(name)
        self.value = default if raw is None else type(default)(raw)
        with _open_lock:
            Flag._all[name] = self
            if _open:
                self.__class__ = _Overridden
        if name in CODEGEN:
            _set_codegen()

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)   # (an `_Overridden`'s process-wide value through its property)
        if name == "value" and self.name in CODEGEN and self.name in Flag._all:
            _set_codegen()

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

    def mib(self) -> int:
        """The value of a flag that counts MiB (`TGFX_CACHE_MAX_MB`, `TGFX_JIT_CACHE_MB`, ...) in bytes; below 0, 0."""
        return max(int(float(self.value) * 2**20), 0)


class _Overridden(Flag):
    """A flag while some thread is inside a `Context` block: `value` is this thread's override, else the process-wide
    value (the instance's own attribute, which assigning sets). Flags are of this class only then, and plain
    attributes otherwise: a jitted call's replay (1.2 us) reads three flags, and a property's call on every read
    made it 55 ns slower."""

    @property
    def value(self) -> Any:
        over = _local.over
        return over[self.name] if self.name in over else self.__dict__["value"]

    @value.setter
    def value(self, value: Any) -> None:
        self.__dict__["value"] = value


def _set_codegen() -> None:
    global _values, _codegen
    _values = tuple(vars(Flag._all[n])["value"] if n in Flag._all else None for n in CODEGEN)
    _codegen = _number(_values)


def _number(values: tuple) -> int:
    if (n := _numbers.get(values)) is None:
        with _open_lock:
            if (n := _numbers.get(values)) is None:
                n = _numbers[values] = len(_combinations)
                _combinations.append(values)
    return n


def codegen() -> int:
    """This thread's values of the flags that change generated code (`CODEGEN`), as a number (`codegen_values`
    gives them back): part of a jitted function's cache key, so that `with Context(BEAM=2): step(...)` runs a program
    compiled under BEAM=2, and after the block the one compiled before. A jitted call's replay reads it: outside blocks
    that set such a flag, one global's read, and an int in its key (a tuple of the values cost 30 ns more to hash)."""
    if _open and (mine := _local.codegen):
        return _number(tuple(mine.get(n, v) for n, v in zip(CODEGEN, _values, strict=True)))
    return _codegen


def codegen_values(number: int) -> tuple:
    """The values of the `CODEGEN` flags, in its order, that `codegen` numbered `number`."""
    return _combinations[number]


DEBUG = Flag("DEBUG", 0)          # 1: kernels as they run, 2: + options and GFLOP/s, 3: + each GPU kernel's launch
#                                   and memory model (gpu_cost) as it compiles, 4: + generated code
SPEC = Flag("SPEC", 0)            # check every UOp against tgfx/ir/spec.py when it is built
BEAM = Flag("BEAM", 0)            # kernel option search width (0: heuristics only)
BEAM_BUDGET = Flag("BEAM_BUDGET", 20.0)  # seconds a BEAM search may spend on one kernel
NOOPT = Flag("NOOPT", 0)          # turn off the kernel optimiser
GPU_SMEM = Flag("GPU_SMEM", 1)    # 0: GPU contractions read their operands from global memory, no shared tiles
GPU_TC = Flag("GPU_TC", 1)        # 0: float16/bfloat16 GPU contractions without tensor cores (`tensor_cores.py`)
CACHE_DIR = Flag("TGFX_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "tgfx"))
DISK_CACHE = Flag("TGFX_DISK_CACHE", 1)
# the disk cache's size limit in MiB (0: unbounded): least recently used entries go past it (tgfx/diskcache.py)
CACHE_MAX_MB = Flag("TGFX_CACHE_MAX_MB", 1024.0)
# a program touching at most this much runs on the caller when its device is idle (-1: the L2 cache of one core of
# the target description: work that fits there takes less than waking the device's thread)
INLINE_BYTES = Flag("TGFX_INLINE_BYTES", -1)
# caches of compiled work, least recently used first out (what a running program still holds stays alive)
KERNEL_CACHE_SIZE = Flag("TGFX_KERNEL_CACHE_SIZE", 1024)      # compiled kernels by AST, in memory
SCHEDULE_CACHE_SIZE = Flag("TGFX_SCHEDULE_CACHE_SIZE", 1024)  # eager graphs' schedules and encoded programs
JIT_CACHE_SIZE = Flag("TGFX_JIT_CACHE_SIZE", 256)             # traced programs per jitted function
# MiB the programs of one jitted function may hold together (`Program.nbytes`), and those of all jitted functions
# together; past either, its least recently run programs go (a call of their signature traces again); 0: no bound
JIT_CACHE_MB = Flag("TGFX_JIT_CACHE_MB", 512.0)
JIT_TOTAL_MB = Flag("TGFX_JIT_TOTAL_MB", 2048.0)
# MiB the eager programs kept may hold together (their arenas, idle outputs, command words, code: `Program.nbytes`);
# 0: bound by TGFX_SCHEDULE_CACHE_SIZE programs only
PROGRAM_CACHE_MB = Flag("TGFX_PROGRAM_CACHE_MB", 512.0)
X64 = Flag("TGFX_ENABLE_X64", 0)  # 64-bit types; without it float64/int64/uint64 become 32-bit, as in JAX
# subnormal floats in CPU kernels: 1 flushes results that would be subnormal to zero (as XLA's CPU code; arithmetic
# never takes the processor's slow path for them), 0 keeps IEEE gradual underflow (numpy's results, bit for bit);
# read when a kernel is compiled (a jitted function compiled before a change compiles again under the new value)
FLUSH_DENORMALS = Flag("TGFX_FLUSH_DENORMALS", 1)
CPU = Flag("TGFX_CPU", "")        # compile for this LLVM CPU ("znver3") instead of the host's: tgfx/devices/target.py
# choose the splits over cores (threads, split-K parts) for a target of this many cores instead of the host's (0): the
# code still runs on this machine's threads, which claim the parts; with TGFX_CPU, one host shows what a 64-core
# server of another class would be given (tgfx/devices/target.py)
CORES = Flag("TGFX_CORES", 0)

# `update`'s names for flags, besides their own: JAX's spelling, so that ported programs keep theirs
DISABLE_JIT = Flag("TGFX_DISABLE_JIT", 0)   # jit calls its function directly, eagerly (debugging: prints, pdb)
_ALIASES = {"x64": "TGFX_ENABLE_X64", "enable_x64": "TGFX_ENABLE_X64", "jax_enable_x64": "TGFX_ENABLE_X64",
            "jax_disable_jit": "TGFX_DISABLE_JIT", "disable_jit": "TGFX_DISABLE_JIT"}


def update(name: str, value: Any) -> None:
    """Set a flag for the rest of the process, every thread, as `jax.config.update`: `tgfx.config.update("x64", True)`.
    A thread inside a `Context` that overrides it keeps its override until the block ends."""
    flag = Flag._all.get(_ALIASES.get(name, name))
    if flag is None:
        raise ValueError(f"config.update: unknown option {name!r}; known are {sorted([*_ALIASES, *Flag._all])}")
    flag.value = type(vars(flag)["value"])(value)   # (the process-wide value's type, not an override's)


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within the block, jitted functions this thread calls run their Python eagerly, op by op, as `jax.disable_jit`:
    values can be printed and stepped through in a debugger. The same results, slower. Other threads' jitted calls
    are not affected.

    >>> with tg.disable_jit():
    ...     step(params, batch)       # step's body runs as plain eager code
    """
    with Context(TGFX_DISABLE_JIT=int(bool(disable))):
        yield


@contextlib.contextmanager
def Context(**overrides: Any) -> Iterator[None]:
    """Set flags by name for this thread, within the block: `with Context(DEBUG=2): ...`. Blocks nest (the inner
    one's values win, the outer's come back after it); other threads keep seeing their own values."""
    unknown = [k for k in overrides if k not in Flag._all]
    if unknown:
        raise ValueError(f"unknown flag(s) {unknown}; known flags are {sorted(Flag._all)}")
    with _applied({**_local.over, **overrides}):
        yield


@contextlib.contextmanager
def _applied(over: dict[str, Any]) -> Iterator[None]:
    """`over` as this thread's overrides within the block."""
    outer, outer_codegen = _local.over, _local.codegen
    _opened(1)
    _local.over, _local.depth = over, _local.depth + 1
    _local.codegen = {n: over[n] for n in CODEGEN if n in over}
    try:
        yield
    finally:
        _local.over, _local.codegen, _local.depth = outer, outer_codegen, _local.depth - 1
        _opened(-1)


def _opened(n: int) -> None:
    """`n` blocks more open (or fewer): the flags read overrides from the first one's opening in any thread to the
    last one's closing."""
    global _open
    with _open_lock:
        was, _open = _open, _open + n
        if bool(was) != bool(_open):
            _set_class(_Overridden if _open else Flag)


def _set_class(cls: type[Flag]) -> None:
    for flag in Flag._all.values():
        flag.__class__ = cls


def overrides() -> Mapping[str, Any]:
    """This thread's overrides, by flag name: the `Context` blocks it is inside (empty outside every block)."""
    return MappingProxyType(_local.over)


def carry(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, to be called on another thread (a pool's) as if on this one: this thread's overrides, taken now, are
    that thread's around the call. A compile `prelower` hands to its pool under `Context(DEBUG=4)` prints its IR."""
    over = _local.over
    if not over:
        return fn

    def carried(*args: P.args, **kwargs: P.kwargs) -> R:
        with _applied(over):
            return fn(*args, **kwargs)
    return carried


class _AfterFork:
    def after_fork_in_child(self) -> None:
        """Only the forking thread lives on in a child: the blocks open are its own (another thread's would never
        close, and every read would look up overrides for good)."""
        global _open
        _open = _local.depth
        _set_class(_Overridden if _open else Flag)


_after_fork = _AfterFork()
forksafe.track(_after_fork)
