"""compile: LLVM IR text to native code through llvmlite, for a CPU target, with an on-disk object cache.

One MCJIT engine per process. A module is parsed, verified, optimised at O3 with the new pass builder (loop and SLP
vectorisation on), for the CPU name and features of its target (`tgfx/lowering/target.py`: the host's, or the one
`TGFX_CPU` names) with a target machine per target, emitted as an object file, added to the engine and finalised.
llvmlite compiles one module at a time per process, so a compile worker process (`llvm_worker.py`) compiles beside
this one when it is busy (`compile_llvm`); objects are always loaded here.

Object files are cached on disk (`TGFX_CACHE_DIR`, default `~/.cache/tgfx`) under a key made of the kernel's `key`,
what chose its options (the options themselves, or the heuristics: see `optimize.opt_mode`), the version of the
lowering code, LLVM's version and the target (`Target.key`: CPU, features, cores, caches), so a new process compiles
nothing it compiled before, and code for one target never stands in for another's. An entry is a small header (magic,
JSON metadata, SHA-256 of both) followed by the object: a truncated or corrupt entry fails the check and is
recompiled; nothing is unpickled.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import os
import pathlib
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import llvmlite.binding as llvm

from tgfx import config
from tgfx.counters import counters
from tgfx.lowering import llvm_worker
from tgfx.lowering.target import Target, check_runnable, host_target, native_target

_MAGIC = b"TGFXOBJ1"


_machines_lock = threading.Lock()


@functools.cache
def _target_machine(cpu: str, features: str) -> llvm.TargetMachine:
    return llvm_worker.target_machine(cpu, features)


def target_machine(target: Target | None = None) -> llvm.TargetMachine:
    """The LLVM target machine that compiles for `target` (default: `host_target()`), one per target."""
    target = host_target() if target is None else target
    with _machines_lock:
        return _target_machine(target.cpu, target.features)


@functools.cache
def lowering_version() -> str:
    """A hash of the lowering code itself: a cached object is only valid for the code that produced it."""
    h = hashlib.sha256()
    root = pathlib.Path(__file__).resolve().parent.parent
    for sub in ("lowering", "ir", "dtypes.py"):
        p = root / sub
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


class _Engine:
    """The process's MCJIT engine; objects are added once and live as long as the process."""

    def __init__(self) -> None:
        self.tm = target_machine(native_target())   # the engine only links and loads objects, for this machine
        self.ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.tm)
        self.lock = threading.Lock()
        self.busy = threading.Lock()   # held while this process compiles (others go to a worker, or wait)
        self.loaded: dict[str, int] = {}

    def optimize(self, mod: llvm.ModuleRef, target: Target | None = None) -> None:
        llvm_worker.optimize(mod, target_machine(target))

    def compile(self, ir: str, target: Target | None = None) -> bytes:
        return llvm_worker.compile_ir(ir, target_machine(target))

    def load(self, key: str, name: str, obj: bytes) -> int:
        with self.lock:
            if key in self.loaded:
                return self.loaded[key]
            self.ee.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.ee.finalize_object()
            addr = self.ee.get_function_address(name)
            if not addr:
                raise RuntimeError(f"compiled object for kernel {name} has no symbol {name}")
            self.loaded[key] = addr
            return addr


@functools.cache
def engine() -> _Engine:
    return _Engine()


def cache_key(kernel_key: str, target: Target | None = None) -> str:
    """The cache key of a program: `kernel_key` (the kernel's key and what chose its options) for this code, this
    LLVM and `target` (default: `host_target()`)."""
    target = host_target() if target is None else target
    text = f"{kernel_key}|{lowering_version()}|llvm{'.'.join(map(str, llvm.llvm_version_info))}|{target.key}"
    return hashlib.sha256(text.encode()).hexdigest()


def _path(key: str) -> pathlib.Path:
    return pathlib.Path(str(config.CACHE_DIR.value)) / "kernels" / key[:2] / f"{key}.obj"


def read_cached(key: str) -> tuple[dict[str, Any], bytes] | None:
    """The metadata and object of a cache entry, or None if absent, truncated or corrupt."""
    if not config.DISK_CACHE:
        return None
    try:
        data = _path(key).read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 8
    if len(data) < head + 32 or not data.startswith(_MAGIC):
        return None
    (meta_len,) = struct.unpack("<Q", data[len(_MAGIC):head])
    meta_b, digest, obj = data[head:head + meta_len], data[head + meta_len:head + meta_len + 32], \
        data[head + meta_len + 32:]
    if len(meta_b) != meta_len or hashlib.sha256(meta_b + obj).digest() != digest:
        return None
    try:
        meta = json.loads(meta_b)
    except ValueError:
        return None
    return (meta, obj) if isinstance(meta, dict) and meta.get("key") == key else None


def write_atomic(path: pathlib.Path, data: bytes) -> None:
    """Write a cache file so a reader sees the old entry or the whole new one; a read-only or full cache directory
    is not an error (it only costs the work the entry would have saved)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


def write_cached(key: str, meta: dict[str, Any], obj: bytes) -> None:
    if not config.DISK_CACHE:
        return
    meta_b = json.dumps({**meta, "key": key}, sort_keys=True).encode()
    write_atomic(_path(key), _MAGIC + struct.pack("<Q", len(meta_b)) + meta_b + hashlib.sha256(meta_b + obj).digest()
                 + obj)


def compile_llvm(ir: str, candidate: bool = False, target: Target | None = None) -> bytes:
    """LLVM IR text to an object file for `target` (default: `host_target()`). A program compiled to run counts in
    `counters.compile_count`; a `candidate` of a BEAM search, compiled only to be timed, counts in
    `counters.search_compile_count` instead.

    Compiles run in this process, one at a time (llvmlite's lock), and, when this process is already compiling and
    `TGFX_COMPILE_WORKERS` allows, in a compile worker process beside it (`llvm_worker.py`): `prelower` keeps both
    busy. A worker that cannot start or dies leaves the compile to this process."""
    if config.DEBUG >= 4 and not candidate:
        print(ir)
    if candidate:  # a BEAM candidate compiled only to be timed
        counters.search_compile_count += 1
    else:
        counters.compile_count += 1
    target = host_target() if target is None else target
    eng = engine()
    if eng.busy.acquire(blocking=False):
        try:
            return eng.compile(ir, target)
        finally:
            eng.busy.release()
    for worker in compile_workers():
        if worker.lock.acquire(blocking=False):
            try:
                return worker.compile(ir, target)
            except WorkerGone:
                pass
            finally:
                worker.lock.release()
    with eng.busy:
        return eng.compile(ir, target)


COMPILE_WORKERS = config.Flag("TGFX_COMPILE_WORKERS", 1)   # compile worker processes beside this one (0: none)
WORKER_TIMEOUT_S = 600.0     # a compile worker that answers nothing for this long is given up on


class WorkerGone(RuntimeError):
    """The compile worker exited or stopped answering; the compile is done in this process instead."""


class CompileWorker:
    """A process running `llvm_worker.py` that compiles one module at a time for this one."""

    def __init__(self) -> None:
        # -P: the worker's own folder (tgfx/lowering, with modules named like stdlib ones) is not on its path
        self.proc = subprocess.Popen([sys.executable, "-P", llvm_worker.__file__], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lock = threading.Lock()

    def compile(self, ir: str, target: Target | None = None) -> bytes:
        """The object file of `ir` for `target` (default: the host's); raises `WorkerGone` if the worker does not
        answer, RuntimeError if LLVM failed."""
        data = (f"{target.cpu}\t{target.features}" if target is not None else "").encode() + b"\n" + ir.encode()
        try:
            self.proc.stdin.write(struct.pack("<Q", len(data)) + data)
            self.proc.stdin.flush()
            head = self._read(9)
            payload = self._read(struct.unpack("<Q", head[1:])[0])
        except (OSError, ValueError) as e:
            self.close()
            raise WorkerGone(str(e)) from e
        if head[0] != llvm_worker.OK:
            raise RuntimeError(f"LLVM failed in the compile worker: {payload.decode(errors='replace')}")
        return payload

    def _read(self, n: int) -> bytes:
        out = bytearray()
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + WORKER_TIMEOUT_S
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise OSError(f"the compile worker answered nothing for {WORKER_TIMEOUT_S:g} s")
            chunk = os.read(fd, n - len(out))
            if not chunk:
                raise OSError(f"the compile worker exited (status {self.proc.poll()})")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_worker_list: list[CompileWorker] = []
_workers_lock = threading.Lock()


def compile_workers() -> list[CompileWorker]:
    """The live compile workers, started on first use (none on a one-core machine or with TGFX_COMPILE_WORKERS=0)."""
    with _workers_lock:
        _worker_list[:] = [w for w in _worker_list if w.proc.poll() is None]
        want = min(int(COMPILE_WORKERS), max(native_target().cores - 1, 0))
        while len(_worker_list) < want:
            try:
                _worker_list.append(CompileWorker())
            except OSError:
                break
        return list(_worker_list)


@atexit.register
def _close_workers() -> None:
    for w in _worker_list:
        w.close()


def load_object(key: str, name: str, obj: bytes, target: Target | None = None) -> int:
    """Add an object compiled for `target` (default: `host_target()`) to the process's engine and return the address
    of function `name`; raises if this machine cannot run code for `target`."""
    check_runnable(host_target() if target is None else target)
    return engine().load(key, name, obj)


def optimized_ir(ir: str, target: Target | None = None) -> str:
    """The IR after LLVM's optimiser for `target` (default: `host_target()`), for DEBUG output and tests."""
    mod = llvm.parse_assembly(ir)
    engine().optimize(mod, target)
    return str(mod)
