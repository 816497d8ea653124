"""What a forked child gets back as if no other thread of its parent had been running: tgfx's process-wide locks
unlocked, and the process-wide settings tgfx changes while it works (the garbage collector paused, a short GIL switch
interval) as they were before.

A fork copies only the thread that forks. A lock another thread of the parent held at that moment stays held in the
child, where no thread will ever release it: the child's first use of it hung (a child forked while another thread
made the first device waited on `get_device`'s lock for ever). What a lock guards is left as the fork found it,
which for tgfx's caches is an entry or a miss, both right. A child forked after the devices started fails at once
where it computes instead (`tgfx.devices.hcq.refuse_in_forked_child`): their threads stayed in the parent.

`members` reads a registry of live objects (a WeakSet) that other threads may be adding to.
"""
from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Protocol


class ForkAware(Protocol):
    def after_fork_in_child(self) -> None:
        """Put this object back as a child with no other thread needs it (its lock unlocked, its setting undone)."""


_locks: list[Any] = []                             # the process-wide locks `lock` made
_objects: weakref.WeakSet[ForkAware] = weakref.WeakSet()   # the objects `track` was given, while they live


def lock(reentrant: bool = False) -> Any:
    """A new lock (an RLock if `reentrant`) for process-wide state, unlocked again in a forked child."""
    made = threading.RLock() if reentrant else threading.Lock()
    _locks.append(made)
    return made


def track(obj: ForkAware) -> None:
    """Call `obj.after_fork_in_child()` in a forked child, for as long as `obj` lives (an object with a lock of its
    own: one per cache)."""
    _objects.add(obj)


def members(objects: weakref.WeakSet[Any]) -> list[Any]:
    """The objects of `objects` alive now, read in one step. A WeakSet iterated in Python lets other threads run
    between its items, and one that adds to it meanwhile (a new jitted function, a program's first recycled result)
    made the iteration raise "Set changed size during iteration" (`tg.clear_caches` beside a thread making jitted
    functions). Its set of references copies at once (C, under the GIL)."""
    return [o for ref in list(objects.data) if (o := ref()) is not None]


def _after_fork_in_child() -> None:
    for made in _locks:
        made._at_fork_reinit()
    for obj in members(_objects):
        obj.after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
