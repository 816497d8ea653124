"""The disk cache is bounded (`TGFX_CACHE_MAX_MB`, `tgfx/diskcache.py`): past its limit the entries used least
recently go, a kernel whose entry or object went (or was cut short) is compiled again, and processes sharing one small
directory all compute the right answers while they fill it and remove from it."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import time

import numpy as np

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import diskcache
from tgfx.config import Context
from tgfx.counters import counters
from tgfx.lowering import compile as compile_mod
from tgfx.lowering import forget_compiled


def on_cpu(x: np.ndarray) -> tg.Tensor:
    """`x` on the CPU, whatever the default device (`-p tests.emulated_cuda` makes it CUDA:0): these are the CPU's
    compiled objects in the cache."""
    return tg.asarray(x, device="CPU")


def compiles(ks: range | list[int]) -> int:
    """Programs compiled to run `tanh(x * 3) + 1` on k + 15 elements for each k (a kernel of its own) in a process
    that holds no compiled code, so each kernel comes from the disk cache or from LLVM."""
    forget_compiled()
    compile_mod._objects.clear()
    before = counters.compile_count
    for k in ks:
        x = np.linspace(-1, 1, k + 15, dtype=np.float32)
        f = tg.jit(lambda a: tnp.tanh(a * 3.0) + 1.0)
        np.testing.assert_allclose(f(on_cpu(x)).numpy(), np.tanh(x * np.float32(3)) + 1, rtol=1e-5, atol=1e-6)
    return counters.compile_count - before


def disk_bytes(root: pathlib.Path) -> int:
    return sum(e.nbytes for e in diskcache.entries(str(root)))


def age(root: pathlib.Path, seconds: float, newer_than: float = 0.0) -> None:
    """Make the entries written since `newer_than` (a time) look last used `seconds` ago."""
    then = time.time() - seconds
    for e in diskcache.entries(str(root)):
        if e.mtime_ns / 1e9 >= newer_than:
            os.utime(e.path, (then, then))


def test_a_small_limit_keeps_the_directory_under_it_and_what_was_used_recently(tmp_path):
    """Kernels A (then unused for two hours) and B (one hour), a few of A used again (read: a hit, which marks them
    used now), then kernels C past the limit: the directory stays under it, and what goes is what was used least
    recently: the rest of A, not the A used again."""
    with Context(TGFX_CACHE_DIR=str(tmp_path), TGFX_CACHE_MAX_MB=0):
        assert compiles(range(1, 11)) == 10               # A
        age(tmp_path, 7200)
        start = time.time()
        assert compiles(range(11, 31)) == 20              # B
        age(tmp_path, 3600, newer_than=start)
        assert compiles(range(1, 4)) == 0                 # A[:3] read back: used now
        limit = disk_bytes(tmp_path) * 1.1
    with Context(TGFX_CACHE_DIR=str(tmp_path), TGFX_CACHE_MAX_MB=limit / 2**20):
        assert compiles(range(31, 46)) == 15              # C: half as much again as the limit left room for
        assert disk_bytes(tmp_path) <= limit
        assert compiles(range(1, 4)) == 0                 # used recently: kept
        assert compiles(range(4, 8)) == 4                 # the least recently used: gone, compiled again
        assert disk_bytes(tmp_path) <= limit
        assert 0.9 < diskcache.record() / disk_bytes(tmp_path) < 1.1   # the record, with this process's last writes


def test_an_entry_or_object_removed_or_cut_short_under_a_reader_is_a_miss(tmp_path):
    """What another process's scan removes (an entry, or the object its entries name) between a reader's looking and
    its reading, and an entry cut short, is a miss: the kernel is compiled again, right, and cached again. A record
    that is not a number is made again from the directory."""
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        assert compiles([3]) == 1
        [entry] = (tmp_path / "kernels").rglob("*.obj")
        [obj] = (tmp_path / "objects").rglob("*.o")
        obj.unlink()
        assert compiles([3]) == 1 and obj.exists()
        entry.write_bytes(entry.read_bytes()[:-7])
        assert compiles([3]) == 1
        entry.unlink()
        assert compiles([3]) == 1
        assert compiles([3]) == 0
        (tmp_path / diskcache.USAGE).write_text("garbage")
        assert diskcache.record() == disk_bytes(tmp_path)


def test_an_unused_entry_is_marked_used_when_read_and_a_recent_one_is_not_written_again(tmp_path):
    """A hit sets an entry's modification time (its last use: access times are not kept with noatime) when it is
    older than a minute; an entry used within the minute is only read. (The CPU runtime's code, which a process reads
    from the cache once, as it starts its first device, is read before: run alone, this test wrote it into its
    directory at the first compile and never read it again.)"""
    np.testing.assert_array_equal((on_cpu(np.ones(2, np.float32)) + 1).numpy(), [2, 2])
    with Context(TGFX_CACHE_DIR=str(tmp_path)):
        assert compiles([5]) == 1
        age(tmp_path, 3600)
        assert compiles([5]) == 0
        assert all(time.time() - e.mtime_ns / 1e9 < 60 for e in diskcache.entries(str(tmp_path)))
        age(tmp_path, 30)
        assert compiles([5]) == 0
        assert all(time.time() - e.mtime_ns / 1e9 >= 30 for e in diskcache.entries(str(tmp_path)))


_HAMMER = textwrap.dedent("""
    import sys
    import numpy as np, tgfx as tg, tgfx.numpy as tnp
    from tgfx.lowering import compile as compile_mod, forget_compiled
    first = int(sys.argv[1])
    for rnd in range(3):
        forget_compiled()
        compile_mod._objects.clear()
        for i in range(12):
            x = np.linspace(-1, 1, (first + i) % 16 + 16, dtype=np.float32)
            f = tg.jit(lambda a: tnp.tanh(a * 3.0) + 1.0)
            np.testing.assert_allclose(f(tg.asarray(x)).numpy(), np.tanh(x * np.float32(3)) + 1, rtol=1e-5, atol=1e-6)
    print("ok")
""")


def test_processes_sharing_a_small_directory_compute_right_answers(tmp_path):
    """Two processes compile and read back the same and different kernels in a directory that holds a few of them,
    each writing entries the other removes, reading entries the other is removing: both compute every answer right,
    and the directory stays near its limit."""
    limit_mb = 0.08
    env = {**os.environ, "TGFX_CACHE_DIR": str(tmp_path), "TGFX_CACHE_MAX_MB": str(limit_mb)}
    procs = [subprocess.Popen([sys.executable, "-c", _HAMMER, str(first)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for first in (0, 4)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and out.strip() == "ok", err[-3000:]
    assert disk_bytes(tmp_path) <= 1.5 * limit_mb * 2**20   # (each process's last writes may be unrecorded)


def test_a_test_sessions_cache_is_removed_when_it_ends_and_not_by_a_forked_child() -> None:
    """tests/conftest.py gives each test session (each xdist worker) a kernel cache of its own in the temp folder; it
    is removed when that process exits, not when a child forked from it does (a child runs its parent's exit
    handlers)."""
    script = textwrap.dedent("""
        import os, sys
        sys.path.insert(0, os.getcwd())
        import tests.conftest
        import tgfx as tg, numpy as np
        tg.Tensor(np.arange(5, dtype=np.float32) * 3, device="CPU").numpy()
        cache = os.environ["TGFX_CACHE_DIR"]
        pid = os.fork()
        if pid == 0:
            sys.exit(0)   # a normal exit: the exit handlers run
        os.waitpid(pid, 0)
        print(cache, os.path.isdir(cache))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=pathlib.Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    cache, alive_after_child = out.stdout.split()
    assert alive_after_child == "True" and not os.path.exists(cache)
