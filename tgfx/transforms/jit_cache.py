"""The programs of every jitted function together, bounded by the bytes they hold (`TGFX_JIT_TOTAL_MB`); each
function's own cache (`Jit._cache`) is bounded by `TGFX_JIT_CACHE_MB` and `TGFX_JIT_CACHE_SIZE`. A step called
with 200 batch sizes kept all 200 programs, each holding its arenas and its recent and pooled outputs (+880 MB of
RSS for an MLP's step), until the count bound of 256 per function."""
from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from tgfx import config
from tgfx.lowering.lru import LRU

if TYPE_CHECKING:
    from tgfx.lowering.program import Program


def _forget_program(entry: tuple[weakref.ref, Hashable, weakref.ref, int]) -> None:
    """A program evicted from `jitted`, dropped from its jitted function's caches (if both still live)."""
    jit, prog = entry[0](), entry[2]()
    if jit is not None and prog is not None:
        jit._forget(entry[1], prog)


# every jitted function's programs, by identity, in the order they last ran, weighing what each holds
# (`Program.nbytes`: arenas, pooled and recent outputs, command words, code): at most TGFX_JIT_TOTAL_MB together, the
# least recently run out of their functions' caches first. Held weakly: a function's own cache owns its programs, and
# the programs of a function collected go with it (an entry whose program died is dropped before the next insert,
# `_dead`, so no id is found again on another program). A program evicted while a submission of it is still queued
# is safe: the submission holds the memory and code its command buffers were encoded with until its fence passes
# (`HCQDevice.submit`)
# (ordered by the programs' stamps, `Program.last_run`, when an insert evicts: a run refreshes nothing)
jitted: LRU[int, tuple[weakref.ref, Hashable, weakref.ref, int]] = LRU(
    lambda: 1 << 62, config.JIT_TOTAL_MB.mib, lambda entry: entry[3], lambda _, entry: _forget_program(entry),
    lambda entry: prog.last_run if (prog := entry[2]()) is not None else -1)
# ids of programs `jitted` holds that were collected, with their entries' dead references (appended as they die): an
# id is only that program's while its reference is the entry's, since a new program may be allocated at the same
# address and inserted under it (by another thread) before the dead one's entry is dropped
_dead: deque[tuple[int, weakref.ref]] = deque()


def last_run(hit: tuple) -> int:
    """When the program of a jitted function's cache entry (`Jit._cache`, `Jit._fast`: the program first) last ran."""
    return hit[0].last_run


def track(jit: Any, key: Hashable, prog: Program) -> None:
    """`prog`, `jit`'s new program for signature `key`, counted in `jitted` as the most recently run."""
    while _dead:
        dead_id, dead = _dead.popleft()
        jitted.pop_if(dead_id, lambda entry, dead=dead: entry[2] is dead)
    pid = id(prog)
    jitted[pid] = (weakref.ref(jit), key, weakref.ref(prog, lambda ref, pid=pid: _dead.append((pid, ref))), prog.nbytes)
