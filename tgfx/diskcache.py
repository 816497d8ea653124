"""diskcache: files under `TGFX_CACHE_DIR` (default `~/.cache/tgfx`) that only save work: compiled kernels
(`tgfx/lowering/compile.py`), BEAM's choices (`tgfx/lowering/search.py`), the device runtime's code
(`tgfx/devices/native.py`). A missing, unreadable or unwritable entry costs the work it would have saved, nothing else.

The directory is bounded, as ccache's and JAX's persistent caches are: past `TGFX_CACHE_MAX_MB` (default 1024 MiB of
disk; 0: unbounded) the entries used least recently go. An entry's modification time is its last use: set when it is
written, and set again when it is read if older than `TOUCH_AFTER_S` (access times are not kept on noatime mounts; a
read costs one `fstat`, and an entry read by many processes is touched once a minute at most). The disk the entries
use is recorded in one small file at the top of the directory (`usage`), to which each process adds what it writes
every `_quantum` bytes, and at once when the record it last saw and its writes since pass the limit (at exit too,
where nothing holds the lock); that write makes its process scan the directory and remove the least recently used
entries until they use `LOW_WATER` of the limit, and record what is left. A process's first calls scan nothing: a scan
comes once per fifth of the limit written (and at the first record of a directory that has none: one an older tgfx
filled). Directories are never removed (another process may be writing into one): 256 per kind at most.

Several processes may share the directory. An entry is written under a temporary name and renamed into place, so a
reader sees all of it or nothing; a reader that opened an entry being removed still reads it whole, and one that finds
it gone has a miss (the work is done again and the entry written again); every reader checks what it read (a digest,
its key), so a truncated or foreign file is a miss too. The record is changed, and the directory scanned, under an
advisory lock (`lock`, `fcntl.flock`) that nobody waits for: a process that finds it taken keeps its writes to add
later, and does not scan. Only the subdirectories tgfx writes (`KINDS`) are counted and scanned: anything else in
the directory is left alone.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import pathlib
import tempfile
import time
from collections.abc import Iterator
from typing import NamedTuple

from tgfx import config, forksafe

try:
    import fcntl
except ImportError:   # (not POSIX: nothing is recorded or scanned, so the directory is not bounded)
    fcntl = None

KINDS = ("kernels", "objects", "beam", "runtime")   # the subdirectories tgfx writes: what is counted and removed
USAGE, LOCK = "usage", "lock"   # the record of the disk the entries use, and the lock file, at the top
LOW_WATER = 0.8         # a scan removes entries until they use this fraction of the limit
TOUCH_AFTER_S = 60.0    # a read entry last used longer ago than this is touched
STALE_TMP_S = 3600.0    # a temporary file this old is a dead writer's: a scan removes it
BLOCK = 4096            # a write of n bytes is recorded as whole blocks of this size, as the disk stores it

_pending: dict[str, int] = {}   # by directory: the bytes this process wrote there and has not added to its record
_known: dict[str, int] = {}     # by directory: its record when this process last read or wrote it
_pending_lock = forksafe.lock()
os.register_at_fork(after_in_child=_pending.clear)   # (the parent's writes are the parent's to record)


def cache_path(*parts: str) -> pathlib.Path:
    """A path under the cache directory, in one of the subdirectories `KINDS`."""
    assert parts and parts[0] in KINDS, f"a disk cache entry outside {KINDS}: {parts}"
    return pathlib.Path(str(config.CACHE_DIR.value)).joinpath(*parts)


def read_bytes(path: pathlib.Path) -> bytes | None:
    """The file's bytes, or None when the disk cache is off or the file cannot be read. A read is a use: the entry's
    modification time is set to now if it is older than `TOUCH_AFTER_S`."""
    if not config.DISK_CACHE:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
            with contextlib.suppress(OSError):   # (a read-only cache: its entries keep their times)
                if time.time() - os.fstat(f.fileno()).st_mtime > TOUCH_AFTER_S:
                    os.utime(f.fileno())
        return data
    except OSError:
        return None


def write_atomic(path: pathlib.Path, data: bytes) -> None:
    """Write a cache file so a reader sees the old entry or the whole new one; nothing when the disk cache is off. A
    read-only or full cache directory is not an error (it only costs the work the entry would have saved). The write
    counts toward the directory's limit (`TGFX_CACHE_MAX_MB`): it may make this process remove old entries."""
    if not config.DISK_CACHE:
        return
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return
    _wrote(len(data))


def limit_bytes() -> int:
    """The directory's limit in bytes (`TGFX_CACHE_MAX_MB`; 0: none)."""
    return config.CACHE_MAX_MB.mib()


def _quantum(limit: int) -> int:
    """How many bytes a process writes before it adds them to the record: a small part of the limit."""
    return max(BLOCK, min(1 << 20, limit // 16))


def _wrote(nbytes: int) -> None:
    limit = limit_bytes()
    if limit == 0 or fcntl is None:
        return
    root = str(config.CACHE_DIR.value)
    with _pending_lock:
        pending = _pending[root] = _pending.get(root, 0) + -(-max(nbytes, 1) // BLOCK) * BLOCK
        known = _known.get(root)
    if pending >= _quantum(limit) or known is not None and known + pending > limit:
        record(root, limit)


@atexit.register
def _record_all() -> None:
    """At exit: this process's writes added to the records (where the lock is free)."""
    for root in list(_pending):
        record(root)


def record(root: str | None = None, limit: int | None = None) -> int | None:
    """Add this process's unrecorded writes to the record of directory `root` (default: `TGFX_CACHE_DIR`), and scan
    it, removing what was used least recently, when the record passes `limit` (default: `TGFX_CACHE_MAX_MB`) or when
    there is none. Returns the bytes recorded, or None if another process holds the lock (nothing waits for it)."""
    root = str(config.CACHE_DIR.value) if root is None else root
    limit = limit_bytes() if limit is None else limit
    if fcntl is None:
        return None
    with _locked(root) as locked:
        if not locked:
            return None
        with _pending_lock:
            pending = _pending.pop(root, 0)
        used = _read_usage(root)
        if used is None or (limit and used + pending > limit):
            used = scan(root, limit)
        else:
            used += pending
        _write_usage(root, used)
        _known[root] = used
        return used


@contextlib.contextmanager
def _locked(root: str) -> Iterator[bool]:
    """Whether this process took the directory's lock (held for the block), without waiting for it."""
    try:
        os.makedirs(root, exist_ok=True)
        fd = os.open(os.path.join(root, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:   # taken: another process records or scans
            yield False
            return
        yield True
    finally:
        os.close(fd)   # (releases the lock)


def _read_usage(root: str) -> int | None:
    try:
        with open(os.path.join(root, USAGE), "rb") as f:
            return int(f.read(32).decode("ascii").strip())
    except (OSError, ValueError):
        return None


def _write_usage(root: str, used: int) -> None:
    try:
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(f"{used}\n")
        os.replace(tmp, os.path.join(root, USAGE))
    except OSError:
        pass


class Entry(NamedTuple):
    path: str
    mtime_ns: int
    nbytes: int   # the disk it uses


def entries(root: str | None = None) -> list[Entry]:
    """Every file in the subdirectories tgfx writes (`KINDS`) of directory `root` (default: `TGFX_CACHE_DIR`)."""
    root = str(config.CACHE_DIR.value) if root is None else root
    found: list[Entry] = []
    stack = [os.path.join(root, kind) for kind in KINDS]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.is_file(follow_symlinks=False):
                        st = e.stat(follow_symlinks=False)
                        found.append(Entry(e.path, st.st_mtime_ns, _disk_bytes(st)))
                except OSError:   # (removed meanwhile by another process)
                    continue
    return found


def _disk_bytes(st: os.stat_result) -> int:
    blocks = getattr(st, "st_blocks", None)
    return blocks * 512 if blocks is not None else -(-st.st_size // BLOCK) * BLOCK


def scan(root: str, limit: int) -> int:
    """Remove the temporary files of dead writers, and, when the entries of `root` use more than `limit` bytes, the
    least recently used of them until they use `LOW_WATER` of it; returns the bytes they use then. The caller holds
    the directory's lock."""
    found = entries(root)
    stale = time.time_ns() - int(STALE_TMP_S * 1e9)
    kept: list[Entry] = []
    for e in found:
        if os.path.basename(e.path).startswith(".tmp") and e.mtime_ns < stale:
            with contextlib.suppress(OSError):
                os.unlink(e.path)
        else:
            kept.append(e)
    used = sum(e.nbytes for e in kept)
    if limit and used > limit:
        for e in sorted(kept, key=lambda e: (e.mtime_ns, e.path)):
            if used <= LOW_WATER * limit:
                break
            if os.path.basename(e.path).startswith(".tmp"):   # (a write in progress)
                continue
            try:
                os.unlink(e.path)
            except FileNotFoundError:   # (removed, or replaced and removed, by another process)
                pass
            except OSError:
                continue
            used -= e.nbytes
    return used
