"""compile: LLVM IR text to native code through llvmlite, for a CPU target, with an on-disk object cache.

A module is parsed, verified, optimised at O3 with the new pass builder (loop and SLP vectorisation on), for the CPU
name and features of its target (`tgfx/devices/target.py`: the host's, or the one `TGFX_CPU` names) with a target
machine per target, and emitted as an object file. llvmlite compiles one module at a time per process, so a
compile worker process (`llvm_worker.py`) compiles beside this one when it is busy (`compile_llvm`), and takes over
once this process has compiled enough (LLVM keeps memory after each run); objects are always loaded here.

Loaded code has an owner: objects go into small MCJIT engines (`CodeOwner`, a few dozen kernels each), and each
kernel's `KernelCode` refers to its engine, so an engine and its code memory are released when no kernel of it is
held any more (evicted from the caches, no program or submission refers to it).

Object files are cached on disk (`TGFX_CACHE_DIR`, default `~/.cache/tgfx`) under a key made of the kernel's `key`,
what chose its options (the options themselves, or the heuristics: see `optimize.opt_mode`), the version of the
lowering code, LLVM's version and the target (`Target.key`: CPU, features, cores, caches), so a new process compiles
nothing it compiled before, and code for one target never stands in for another's. An entry is a small header (magic,
JSON metadata, SHA-256 of both) naming its object by the object's SHA-256; objects are files of their own, named by
that digest, so a batch's object (`CompileQueue`: up to `BATCH_KERNELS` kernels) is on disk once for all its kernels,
and a new process reads and checks it once for them all. A truncated or corrupt entry or object fails its check and
is recompiled; nothing is unpickled. The directory is bounded (`TGFX_CACHE_MAX_MB`, `tgfx/diskcache.py`): an
entry or object removed under a reader is a miss too.
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
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, NamedTuple

import llvmlite.binding as llvm

from tgfx import config, forksafe
from tgfx.counters import counters
from tgfx.devices.target import GPUTarget, Target, check_runnable, host_target, native_target
from tgfx.diskcache import cache_path, read_bytes, write_atomic
from tgfx.lowering import llvm_worker
from tgfx.lowering.lru import LRU

_MAGIC = b"TGFXOBJ2"   # (1: each entry held its object, a batch's object once per kernel)


_machines_lock = forksafe.lock()


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


# ---- compiling: LLVM IR to object code, in this process or in compile workers ----
IN_PROCESS_COMPILES = config.Flag("TGFX_IN_PROCESS_COMPILES", 64)   # compiles this process does itself (see below)
WORKER_COMPILES = 256        # a compile worker exits after this many compiles, and a fresh one takes its place


class _Compiler:
    """LLVM in this process: one module at a time (llvmlite's lock).

    LLVM's optimiser as llvmlite runs it keeps memory after every run (70 KB for an empty kernel, 400 KB for one of
    a thousand instructions: never returned). So this process compiles only its first `TGFX_IN_PROCESS_COMPILES`
    modules, the first calls of a program, where a compile worker's start would cost more than the compile; later
    compiles go to compile workers, which are replaced after `WORKER_COMPILES` each. With `TGFX_COMPILE_WORKERS=0`
    everything compiles here."""

    def __init__(self) -> None:
        self.busy = threading.Lock()   # held while this process compiles (others go to a worker, or wait)
        self.compiled = 0

    @property
    def open(self) -> bool:
        """Whether this process still compiles modules itself."""
        return self.compiled < int(IN_PROCESS_COMPILES) or int(COMPILE_WORKERS) <= 0

    def optimize(self, mod: llvm.ModuleRef, target: Target | None = None, slp: bool = True) -> None:
        llvm_worker.optimize(mod, target_machine(target), slp)

    def compile(self, ir: str, target: Target | None = None) -> bytes:
        self.compiled += 1
        return llvm_worker.compile_ir(ir, target_machine(target))


_compiler: _Compiler | None = None
_compiler_lock = forksafe.lock()


def compiler() -> _Compiler:
    """This process's LLVM compiler, made once (under a lock: two threads' first calls share one)."""
    global _compiler
    if _compiler is None:
        with _compiler_lock:
            if _compiler is None:
                _compiler = _Compiler()
    return _compiler


def cache_key(kernel_key: str, target: Target | GPUTarget | None = None) -> str:
    """The cache key of a program: `kernel_key` (the kernel's key and what chose its options) for this code, this
    LLVM and `target` (default: `host_target()`; a `GPUTarget` for PTX, `render_nvptx.ptx_of`)."""
    target = host_target() if target is None else target
    text = f"{kernel_key}|{lowering_version()}|llvm{'.'.join(map(str, llvm.llvm_version_info))}|{target.key}"
    return hashlib.sha256(text.encode()).hexdigest()


def _path(key: str) -> pathlib.Path:
    return cache_path("kernels", key[:2], f"{key}.obj")


def _object_path(digest: str) -> pathlib.Path:
    return cache_path("objects", digest[:2], f"{digest}.o")


# objects this process read and checked, or wrote, by path: a batch's kernels read its object once, and write it once
_objects: LRU[str, bytes] = LRU(lambda: 4 * BATCH_KERNELS)


def _read_object(digest: str) -> bytes | None:
    """The object whose SHA-256 is `digest`, or None if absent or not that object (truncated, corrupt)."""
    path = _object_path(digest)
    if (obj := _objects.get(str(path))) is not None:
        return obj
    obj = read_bytes(path)
    if obj is None or hashlib.sha256(obj).hexdigest() != digest:
        return None
    counters.cached_object_reads += 1
    _objects[str(path)] = obj
    return obj


def _has_size(path: pathlib.Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


def read_cached(key: str) -> tuple[dict[str, Any], bytes] | None:
    """The metadata and object of a cache entry, or None if the entry or its object is absent, truncated or corrupt."""
    data = read_bytes(_path(key))
    if data is None:
        return None
    head = len(_MAGIC) + 8
    if len(data) < head + 32 or not data.startswith(_MAGIC):
        return None
    (meta_len,) = struct.unpack("<Q", data[len(_MAGIC):head])
    meta_b, digest = data[head:head + meta_len], data[head + meta_len:]
    if len(meta_b) != meta_len or hashlib.sha256(meta_b).digest() != digest:
        return None
    try:
        meta = json.loads(meta_b)
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("key") != key or not isinstance(meta.get("object"), str):
        return None
    obj = _read_object(meta["object"])
    return None if obj is None else (meta, obj)


def write_cached(key: str, meta: dict[str, Any], obj: bytes) -> None:
    """Cache `obj` and its metadata under `key`: the object first (under its digest, unless this process wrote or read
    it there already and it is still whole), then the entry naming it, so a reader that finds the entry finds the
    object."""
    if not config.DISK_CACHE:
        return
    digest = hashlib.sha256(obj).hexdigest()
    path = _object_path(digest)
    if _objects.get(str(path)) is None or not _has_size(path, len(obj)):
        write_atomic(path, obj)
        _objects[str(path)] = obj
    meta_b = json.dumps({**meta, "key": key, "object": digest}, sort_keys=True).encode()
    write_atomic(_path(key), _MAGIC + struct.pack("<Q", len(meta_b)) + meta_b + hashlib.sha256(meta_b).digest())


def compile_llvm(ir: str | Sequence[str], candidate: bool = False, target: Target | None = None) -> bytes:
    """LLVM IR text to an object file for `target` (default: `host_target()`); several modules' IR to one object
    that defines all their functions (`llvm_worker.compile_ir`). A program compiled to run counts in
    `counters.compile_count` (and its module in `counters.module_count`); a `candidate` of a BEAM search, compiled
    only to be timed, counts in `counters.search_compile_count` instead.

    Compiles run in this process, one at a time (llvmlite's lock), and, when this process is already compiling and
    `TGFX_COMPILE_WORKERS` allows, in a compile worker process beside it (`llvm_worker.py`): `prelower` keeps both
    busy. Past `TGFX_IN_PROCESS_COMPILES` they all go to workers (see `_Compiler`). A worker that cannot start or
    dies leaves the compile to this process."""
    irs = [ir] if isinstance(ir, str) else list(ir)
    ir = llvm_worker.NEXT_MODULE.join(irs)
    if config.DEBUG >= 4 and not candidate:
        print(ir)
    if candidate:  # a BEAM candidate compiled only to be timed
        counters.search_compile_count += len(irs)
    else:
        counters.compile_count += len(irs)
        counters.module_count += 1
    target = host_target() if target is None else target
    comp = compiler()
    if comp.open and comp.busy.acquire(blocking=False):
        try:
            return comp.compile(ir, target)
        finally:
            comp.busy.release()
    workers = compile_workers()
    for worker in workers:
        if worker.lock.acquire(blocking=False):
            try:
                return worker.compile(ir, target)
            except WorkerGone:
                pass
            finally:
                worker.lock.release()
    if not comp.open and workers:   # every worker busy: wait for one
        worker = workers[hash(ir) % len(workers)]
        with worker.lock:
            try:
                return worker.compile(ir, target)
            except WorkerGone:
                pass
    with comp.busy:
        return comp.compile(ir, target)


# kernels compiled as one module at most (`CompileQueue`): a module's fixed cost is shared by them all; a longer batch
# would keep the kernels after its first waiting on one compile
BATCH_KERNELS = 8
# kernels waiting behind the running compiles before a `CompileQueue` adds the compile workers' threads: fewer are
# one batch, which its thread takes whole at its next compile
WORKER_BACKLOG = BATCH_KERNELS


class _Queued(NamedTuple):
    ir: str
    name: str
    target: Target
    future: Future
    compile: Callable[..., bytes]   # `compile_llvm` with the overrides of the thread that queued it (`config.carry`)


@dataclass(frozen=True)
class Objects:
    """An object file and the kernel symbols it defines (one kernel's, or a batch's: `CompileQueue`)."""
    obj: bytes
    symbols: tuple[str, ...]


class CompileQueue:
    """LLVM compiles on `threads` threads beside the caller (`prelower`), each taking what is waiting when it is free:
    kernels queued behind a compile (the lowering outpaces LLVM for most of a first call) are linked into one module
    and compiled together (`llvm_worker.compile_ir`), up to `BATCH_KERNELS` alike in target and marks. Spectral's 18
    modules, compiled alone, took 216 ms of LLVM, 184 in batches of up to 8 (gmm_em's 38: 418 -> 360 ms, fno's 103:
    2101 -> 1956). Each thread compiles with the overrides of the thread that queued its first kernel
    (`config.carry`).

    The threads (`threads`) start at the first `submit`: a program whose kernels are all cached starts none. Those
    `more()` says (one per compile worker, which it may start) join only once `WORKER_BACKLOG` kernels wait behind
    the running compiles: a worker is a Python process loading LLVM (~80 ms of CPU, and its own first compile's
    set-up) that pays only when the lowering outpaces one thread's compiles by more than a batch. Spectral's 18
    modules had at most 5 kernels waiting for one thread (its Python lowering is about as slow as their LLVM), yet
    started a worker: 130-210 ms of CPU for a few of them; fno's backlog reaches 18."""

    def __init__(self, threads: int, more: Callable[[], int] | None = None) -> None:
        self.pending: list[_Queued] = []
        self.cond = threading.Condition()
        self.closed = False
        self.want = threads
        self.more = more
        self.threads: list[threading.Thread] = []

    def _start(self, n: int) -> None:
        started = [threading.Thread(target=self._serve, name="tgfx-compile", daemon=True) for _ in range(n)]
        self.threads += started
        for t in started:
            t.start()

    def submit(self, ir: str, name: str, target: Target) -> Future:
        """A future of the `Objects` that defines kernel `name` of `ir`."""
        if not self.threads:
            self._start(self.want)
        elif self.more is not None and len(self.pending) >= WORKER_BACKLOG:   # the compiles fall behind: more threads
            more, self.more = self.more, None
            self._start(more())
        fut: Future = Future()
        with self.cond:
            self.pending.append(_Queued(ir, name, target, fut, config.carry(compile_llvm)))
            self.cond.notify()
        return fut

    def _take(self) -> list[_Queued]:
        """The first kernel waiting and those after it alike in target and marks, at most `BATCH_KERNELS`."""
        def marks(q: _Queued) -> tuple:
            return q.target, llvm_worker.NO_SLP in q.ir, llvm_worker.NO_LSR in q.ir
        first = marks(self.pending[0])
        batch = [q for q in self.pending if marks(q) == first][:BATCH_KERNELS]
        self.pending = [q for q in self.pending if all(q is not b for b in batch)]
        return batch

    def _serve(self) -> None:
        while True:
            with self.cond:
                while not self.pending and not self.closed:
                    self.cond.wait()
                if not self.pending:
                    return
                batch = self._take()
            try:
                got = Objects(batch[0].compile([q.ir for q in batch], False, batch[0].target),
                              tuple(q.name for q in batch))
            except BaseException as e:  # noqa: BLE001 -- each waiting caller raises it
                for q in batch:
                    q.future.set_exception(e)
            else:
                for q in batch:
                    q.future.set_result(got)

    def __enter__(self) -> CompileQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        for t in self.threads:
            t.join()


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
        self.compiles = 0

    def compile(self, ir: str, target: Target | None = None) -> bytes:
        """The object file of `ir` for `target` (default: the host's); raises `WorkerGone` if the worker does not
        answer, RuntimeError if LLVM failed. After `WORKER_COMPILES` `compile_workers` replaces it (LLVM's optimiser
        keeps memory after each run, see `_Compiler`)."""
        self.compiles += 1
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
_workers_lock = forksafe.lock()


def compile_workers() -> list[CompileWorker]:
    """The live compile workers, started on first use: `TGFX_COMPILE_WORKERS` of them beside this process's own
    compiles (none on a one-core machine), one more once this process has stopped compiling itself (`_Compiler`),
    none with TGFX_COMPILE_WORKERS=0."""
    with _workers_lock:
        for w in _worker_list:
            if w.compiles >= WORKER_COMPILES and w.lock.acquire(blocking=False):   # retired before its next compile
                w.close()
                w.lock.release()
        _worker_list[:] = [w for w in _worker_list if w.proc.poll() is None]
        want = min(int(COMPILE_WORKERS), max(native_target().cores - 1, 0))
        if int(COMPILE_WORKERS) > 0 and not compiler().open:
            want += 1
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


# ---- loading: object code into executable memory that an owner releases ----
OWNER_KERNELS = 32   # kernels' code per MCJIT engine: a new engine costs ~0.3 ms and 50 KB, a kernel ~10 KB


class CodeOwner:
    """An MCJIT engine holding the machine code of up to `OWNER_KERNELS` kernels. Every `KernelCode` loaded into it
    refers to it, so its code memory is released (the engine disposed) when the last of them is collected: no
    kernel address of it is then held anywhere (programs hold KernelCode, see `KernelCode`)."""

    def __init__(self) -> None:
        # the engine only links and loads objects, for this machine; it owns its target machine
        tm = llvm_worker.target_machine(native_target().cpu, native_target().features)
        self.ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        self.kernels = 0
        self.symbols: set[str] = set()    # the kernel symbols of the objects added: one engine never defines one twice
        self.objects: set[bytes] = set()  # the digests of the objects added
        _owners.add(self)

    def add(self, name: str, obj: bytes, symbols: Sequence[str] = (), digest: bytes = b"") -> int:
        """The address of kernel `name` of object `obj` (which defines `symbols`, `name` among them), adding the
        object unless it was added before (a batch's: `CompileQueue`)."""
        if digest not in self.objects:
            self.ee.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.ee.finalize_object()
            self.objects.add(digest)
            self.symbols.update(symbols or (name,))
        self.kernels += 1
        addr = self.ee.get_function_address(name)
        if not addr:
            raise RuntimeError(f"compiled object for kernel {name} has no symbol {name}")
        return addr


class KernelCode:
    """The loaded machine code of one kernel: `addr` is valid as long as this object lives. Whatever may call the
    address holds it: a CompiledKernel, the device Program made from it (so every command buffer that encodes the
    address, and every submission still running it, through the Program). `nbytes`: its share of the object it was
    loaded from (the object's size over the kernels it defines), what a cache holding it counts it as."""

    __slots__ = ("name", "addr", "owner", "nbytes", "__weakref__")

    def __init__(self, name: str, addr: int, owner: CodeOwner, nbytes: int = 0) -> None:
        self.name, self.addr, self.owner, self.nbytes = name, addr, owner, nbytes
        _codes.add(self)

    def __repr__(self) -> str:
        return f"<KernelCode {self.name} at {self.addr:#x}>"


_owners: weakref.WeakSet[CodeOwner] = weakref.WeakSet()
_codes: weakref.WeakSet[KernelCode] = weakref.WeakSet()
_loaded: weakref.WeakValueDictionary[str, KernelCode] = weakref.WeakValueDictionary()   # by cache key, while held
_open_owner: CodeOwner | None = None    # the engine new objects go into until it is full
_owner_of: weakref.WeakValueDictionary[bytes, CodeOwner] = weakref.WeakValueDictionary()   # by object digest
_load_lock = forksafe.lock()


def load_object(key: str, name: str, obj: bytes, target: Target | None = None,
                symbols: Sequence[str] = ()) -> KernelCode:
    """The code of object `obj` (cache key `key`, compiled for `target`, default `host_target()`), with function
    `name`, loaded into executable memory; the same KernelCode while something still holds the one loaded before.
    An object that defines several kernels (`symbols`: a batch's, `CompileQueue`) is loaded once for them all, in
    an engine where none of its symbols is defined yet. Raises if this machine cannot run code for `target`."""
    global _open_owner
    check_runnable(host_target() if target is None else target)
    symbols = tuple(symbols) or (name,)
    with _load_lock:
        if (code := _loaded.get(key)) is not None:
            return code
        digest = hashlib.sha256(obj).digest()
        if (owner := _owner_of.get(digest)) is None:
            if _open_owner is None or _open_owner.kernels >= OWNER_KERNELS or \
                    not _open_owner.symbols.isdisjoint(symbols):
                _open_owner = CodeOwner()
            owner = _owner_of[digest] = _open_owner
        code = _loaded[key] = KernelCode(name, owner.add(name, obj, symbols, digest), owner, len(obj) // len(symbols))
        return code


def loaded(key: str) -> KernelCode | None:
    """The code loaded under `key`, if something still holds it."""
    return _loaded.get(key)


@dataclass(frozen=True)
class CodeStats:
    kernels: int   # KernelCode objects alive: kernels whose code is loaded
    owners: int    # MCJIT engines alive (each holding the code of up to OWNER_KERNELS kernels)


def code_stats() -> CodeStats:
    """What compiled code this process holds in executable memory now (collect garbage first for exact counts)."""
    with _load_lock:
        return CodeStats(len(_codes), len(_owners))


def optimized_ir(ir: str, target: Target | None = None) -> str:
    """The IR after LLVM's optimiser for `target` (default: `host_target()`), for DEBUG output and tests."""
    mod = llvm.parse_assembly(ir)
    compiler().optimize(mod, target, slp=llvm_worker.NO_SLP not in ir)
    return str(mod)
