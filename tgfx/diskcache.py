"""diskcache: files under `TGFX_CACHE_DIR` (default `~/.cache/tgfx`) that only save work: compiled kernels
(`tgfx/lowering/compile.py`), BEAM's choices (`tgfx/lowering/search.py`), the device runtime's code
(`tgfx/devices/native.py`). A missing, unreadable or unwritable entry costs the work it would have saved, nothing else.
"""
from __future__ import annotations

import os
import pathlib
import tempfile

from tgfx import config


def cache_path(*parts: str) -> pathlib.Path:
    """A path under the cache directory."""
    return pathlib.Path(str(config.CACHE_DIR.value)).joinpath(*parts)


def read_bytes(path: pathlib.Path) -> bytes | None:
    """The file's bytes, or None when the disk cache is off or the file cannot be read."""
    if not config.DISK_CACHE:
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


def write_atomic(path: pathlib.Path, data: bytes) -> None:
    """Write a cache file so a reader sees the old entry or the whole new one; nothing when the disk cache is off. A
    read-only or full cache directory is not an error (it only costs the work the entry would have saved)."""
    if not config.DISK_CACHE:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass
