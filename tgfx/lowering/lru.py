"""LRU: a bounded, thread-safe cache that forgets what was used least recently (compiled kernels, schedules, jit
programs). What it forgets is only released when nothing else holds it: a program that still runs an evicted kernel
keeps that kernel's code (see `tgfx/lowering/compile.py`, `KernelCode`)."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from tgfx import forksafe

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A mapping of at most `capacity()` entries (read on every insert, so a config flag changes it at once; below
    1 it keeps one); inserting past it drops the least recently used. With `max_bytes` and `weigh`, also at most
    `max_bytes()` bytes (0: no such bound), an entry weighing `weigh(value)` when it is inserted: the least recently
    used go until the rest fit, the newest always stays. `evicted(key, value)` is called for each entry an insert
    drops, after the cache's lock is released (it may use the cache).

    With `recency(value)` (a number that grows each time the value is used: `Program.last_run`), a hit needs no
    refresh: the values stamp themselves when used, and an insert that must evict first puts the entries in the order
    of their stamps (the new one last). A jitted replay then reads its caches with one lookup and nothing more (three
    C calls of a 45-call replay were the refreshes of two caches)."""

    def __init__(self, capacity: Callable[[], int], max_bytes: Callable[[], int] | None = None,
                 weigh: Callable[[V], int] | None = None, evicted: Callable[[K, V], None] | None = None,
                 recency: Callable[[V], int] | None = None) -> None:
        self.capacity = capacity
        self.max_bytes, self.weigh = max_bytes, weigh
        self.on_evict = evicted
        self.recency = recency
        self.nbytes = 0                      # what the entries weigh, together (0 without `weigh`)
        self._weights: dict[K, int] = {}
        self._d: OrderedDict[K, V] = OrderedDict()
        # the entries, least recently used first, for a hot path that reads and refreshes one without a Python call
        # (`get` is one): the same dict for the cache's life
        self.entries = self._d
        self._lock = threading.Lock()
        forksafe.track(self)

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()   # (another thread of the parent may have held it: `tgfx/forksafe.py`)

    def get(self, key: K, default: V | None = None) -> V | None:
        # no lock: each OrderedDict call is atomic (C, under the GIL), and an entry evicted between the two is
        # still a right answer (jit's replay path reads this on every call)
        d = self._d
        value = d.get(key, self)
        if value is self:
            return default
        if len(d) > 1:   # (one entry is already the most recent: most jitted functions have one signature, and a
            try:         # reorder hashes the key again, half of a replay's lookup)
                d.move_to_end(key)
            except KeyError:
                pass
        return value   # type: ignore[return-value]

    def peek(self, key: K) -> V | None:
        """The value under `key` (None if none), without making it the most recent: one hash of the key, not two.
        For a cache whose misses are cheap, an entry read often may be evicted now and then (first in, first out)."""
        return self._d.get(key)

    def __getitem__(self, key: K) -> V:
        with self._lock:
            self._d.move_to_end(key)
            return self._d[key]

    def __setitem__(self, key: K, value: V) -> None:
        self._insert(key, value, replace=True)

    def setdefault(self, key: K, value: V) -> V:
        """The value under `key`, inserting `value` first if there is none (two threads racing get one value)."""
        return self._insert(key, value, replace=False)

    def _insert(self, key: K, value: V, replace: bool) -> V:
        evicted = []   # released after the lock: dropping the last reference may run code (a program's release)
        with self._lock:
            if replace or key not in self._d:
                self._d[key] = value
                if self.weigh is not None:
                    w = self.weigh(value)
                    self.nbytes += w - self._weights.get(key, 0)
                    self._weights[key] = w
            self._d.move_to_end(key)
            value = self._d[key]
            limit = max(int(self.capacity()), 1)
            budget = int(self.max_bytes()) if self.max_bytes is not None else 0
            if self.recency is not None and (len(self._d) > limit or budget > 0 and self.nbytes > budget):
                self._settle(key)
            while len(self._d) > limit or budget > 0 and self.nbytes > budget and len(self._d) > 1:
                old, v = self._d.popitem(last=False)
                self.nbytes -= self._weights.pop(old, 0)
                evicted.append((old, v))
        if self.on_evict is not None:
            for old, v in evicted:
                self.on_evict(old, v)
        del evicted
        return value

    def _settle(self, newest: K) -> None:
        """Put the entries in the order of their `recency` stamps, least recent first, `newest` (just inserted) last;
        equal stamps keep their order. Under the lock, before an eviction."""
        d, recency = self._d, self.recency
        # (a snapshot, one C call: `get` moves entries without the lock, which iterating the dict itself would see)
        for k, _ in sorted((kv for kv in list(d.items()) if kv[0] != newest), key=lambda kv: recency(kv[1])):
            try:
                d.move_to_end(k)
            except KeyError:   # (not possible under the lock; as `get`)
                pass
        d.move_to_end(newest)

    def pop(self, key: K, default: V | None = None) -> V | None:
        with self._lock:
            self.nbytes -= self._weights.pop(key, 0)
            return self._d.pop(key, default)

    def pop_if(self, key: K, test: Callable[[V], bool]) -> V | None:
        """Drop `key`'s entry if `test(value)` holds, in one step under the lock (another thread may put a new value
        under the key meanwhile); the value dropped, or None."""
        with self._lock:
            if (value := self._d.get(key, self)) is self or not test(value):   # type: ignore[arg-type]
                return None
            self.nbytes -= self._weights.pop(key, 0)
            return self._d.pop(key)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __len__(self) -> int:
        return len(self._d)

    def __iter__(self) -> Iterator[K]:
        with self._lock:
            return iter(list(self._d))

    def items(self) -> list[tuple[K, V]]:
        with self._lock:
            return list(self._d.items())

    def values(self) -> list[V]:
        with self._lock:
            return list(self._d.values())

    def clear(self) -> None:
        with self._lock:
            old = list(self._d.values())
            self._d.clear()
            self._weights, self.nbytes = {}, 0
        del old
