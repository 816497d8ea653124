"""Program: a scheduled graph, memory-planned and encoded into per-device command buffers, run by eager code and jit.

`Program(template, inputs, n_dynamic)` lowers a schedule template (tgfx/lowering/schedule.py) once: its kernels are
compiled, its intermediates share one arena per device (`plan_memory`), and its LINEAR is encoded as command buffers
(`Segment`s) whose buffer words are patch slots. `execute(mems, in_bufs)` points those words at this call's inputs
and fresh outputs and submits them: no graph work and no Python per kernel. Eager realisation (`tgfx.lowering.realize`)
and `jit` both run graphs this way; there is no second path to the devices.

Outputs are leased from the program's pool: an output's memory comes back to the pool when nothing holds it any
more, neither a result (its BUFFER node, through the runtime's buffer map) nor a queue still to run (queues keep the
memory they were given until their fence passes). A loop that keeps one result at a time (`params = step(params)`,
`y = f(y)`) then allocates nothing once warm, and its kernels write memory whose pages are already mapped.
"""
from __future__ import annotations

import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from operator import attrgetter, itemgetter
from sys import getrefcount
from typing import Any, Literal, NamedTuple

import numpy as np

from tgfx import forksafe
from tgfx.counters import counters
from tgfx.devices import get_device
from tgfx.devices.hcq import Buffer, Engine, Sym
from tgfx.devices.queue import HWQueue
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp, buffers
from tgfx.lowering.constants import scalar_host
from tgfx.lowering.control import lifetimes, writes
from tgfx.lowering.execute import (
    append_command,
    buffer_memory,
    buffer_nbytes,
    command_device,
    host_view,
    is_tiny,
    register_memory,
)
from tgfx.lowering.layout import buffer_uids, buffer_view, new_buffer
from tgfx.lowering.lifted import choose
from tgfx.lowering.schedule import ScheduleTemplate, is_alias

RECYCLE_BYTES = 256 << 20   # a program whose outputs are larger allocates them afresh every call
POOL_DEPTH = 2              # idle allocations kept per output slot
# a slot of small outputs keeps more, up to POOL_BYTES of them (at most POOL_MOST): an eager op run for each leaf of a
# pytree (`tree_map(lambda a, b: a + b, acc, grads)` over 20 leaves of one shape) holds 20 results of one program at
# once, and with two kept allocated 18 of them afresh every step
POOL_BYTES = 64 << 10
POOL_MOST = 32


def pool_depth(nbytes: int) -> int:
    """The idle allocations an output slot of `nbytes` keeps."""
    return max(POOL_DEPTH, min(POOL_MOST, POOL_BYTES // max(nbytes, 1)))
# tables by node id that a recycled result leaves when it is handed out again, holding another value (`_reuse`): the
# layers above register theirs (`tgfx.placement.marked`: a result of a committed argument stayed committed when its
# node came back as the result of uncommitted ones)
recycled_forget: list[dict[int, Any]] = []


# a segment with more patch words than this binds them in one numpy write (`Segment.bind`): realnvp's step has 663,
# bound word by word in 48 us of its host time, in bulk in 17 (the addresses of its 436 buffers, then three numpy
# calls); below this a word's scalar store (0.07 us) is cheaper than numpy's calls (1.2 us and more)
BULK_PATCHES = 24
_ptr = attrgetter("ptr")


def addresses(mems: list[Any]) -> np.ndarray:
    """The addresses of Buffers `mems`, as an int64 array (a bulk bind's table: one C loop, no Python per buffer)."""
    return np.fromiter(map(_ptr, mems), np.int64, len(mems))


@dataclass
class Segment:
    device: Any
    cb: Any                     # encoded CommandBuffer
    # (word, byte offset, program buffer index): the words a replay points at its inputs and outputs
    patches: list[tuple[int, int, int]]
    # (device waited on, Sym name, index of the segment it waits for, or None: all that device's earlier work)
    dep: tuple[Any, str, int | None] | None

    def __post_init__(self) -> None:
        # a long patch list as index arrays, bound in one write (`bind`): its words, their offsets, their buffers
        self.bulk: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if len(self.patches) > BULK_PATCHES:
            self.bulk = (np.array([w for w, _, _ in self.patches], np.intp),
                         np.array([o for _, o, _ in self.patches], np.int64),
                         np.array([i for _, _, i in self.patches], np.intp))

    def bind(self, mems: list[Any], ptrs: np.ndarray | None = None) -> None:
        """Point the encoded words at `mems`, the program's buffers (`ptrs`: their `addresses`, when the caller has
        them). No checks: the signature guarantees that every buffer fits its slot."""
        if (bulk := self.bulk) is not None:
            at, offsets, of = bulk
            self.cb.words[at] = (addresses(mems) if ptrs is None else ptrs)[of] + offsets
            return
        words = self.cb.word_view
        for word, offset, i in self.patches:
            words[word] = mems[i].ptr + offset


class _Leased(Buffer):
    """An output's memory, leased from its slot's free list while something uses it: its `_mem` is the raw
    allocation (a Buffer of the allocator's); dropped (no result, no view, no other device's queue holds it), it hands
    the raw allocation back to the free list. Free lists are deques: append and popleft are atomic, and this may run on
    whichever thread drops the last reference.

    A device runs what is submitted to it in order, on every engine (each submission waits for the device's
    timeline to pass the one before), and a copy to another device holds the source device until it is done (the
    fence segments of `Program._encode`). So work submitted to the memory's own device cannot race with a reuse,
    which is submitted there later: it holds the raw allocation, not the lease (`_queue_refs`; a one-segment program
    holds every Buffer's `_mem`, one C loop), and `params = step(params)` gets the parameters of the call before last
    back as soon as the Python side drops them, even while the device is still behind. Work on other devices holds
    the lease until it completes, and so does a view of it (`owner`)."""

    __slots__ = ("free",)

    def __init__(self, raw: Buffer, free: deque) -> None:   # (Buffer's fields set here: one call less per output)
        self.device, self.nbytes, self.ptr, self._mem, self.shared, self.free = \
            raw.device, raw.nbytes, raw.ptr, raw, False, free

    @property
    def owner(self) -> Any:
        return self

    def __del__(self) -> None:
        if len(self.free) < self.free.maxlen and (raw := self._mem) is not None:   # (a slot's depth: `pool_depth`)
            self.free.append(raw)


SCALAR_BUFFERS = 4   # buffers a Python scalar argument of a program cycles through (see ScalarArgs)


class _ScalarBuffer:
    """One buffer of a `ScalarArgs`: the value it holds (None while being written), the calls holding it, and the
    timeline value it may be read until."""
    __slots__ = ("buf", "mem", "view", "key", "users", "until")

    def __init__(self, buf: UOp, mem: Buffer, view: np.ndarray | None) -> None:
        self.buf, self.mem, self.view = buf, mem, view
        self.key: tuple | None = None
        self.users, self.until = 0, 0


class ScalarArgs:
    """The buffers one Python scalar argument of a one-segment program is written into, call after call.

    A loop counter (`update(i, state)`) is a new value every call: interned (`const_buffer`), each value cost a buffer
    allocated, filled, and evicted from the pool later, 11 us of a 25 us step of JAX's kernel_lsq. Here the value is
    written into one of `SCALAR_BUFFERS` buffers the program owns, one that no call may still read: none holds it
    now (`users`), and the device's timeline has passed the value it had after the last call that did. A buffer that
    already holds the value is read as it is, by any number of calls at once (a constant learning rate). With no
    buffer free, the caller falls back to the interned pool."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.lock = threading.Lock()
        self.entries: list[_ScalarBuffer] = []

    def take(self, dtype: Any, value: int | float) -> _ScalarBuffer | None:
        """A buffer holding `value` as `dtype`, held by the caller until `release`; None if none can be had."""
        key = (dtype, repr(value))   # repr: -0.0 is not 0.0, nan is one value
        dev = get_device(self.device)
        with self.lock:
            entry = next((e for e in self.entries if e.key == key), None)
            write = entry is None
            if write:
                done = dev.timeline.value
                entry = next((e for e in self.entries if e.users == 0 and e.until <= done and e.buf.dtype == dtype),
                             None)
                if entry is None:
                    if len(self.entries) >= SCALAR_BUFFERS:
                        return None
                    buf = new_buffer(self.device, 1, dtype)
                    mem = buffer_memory(buf)
                    entry = _ScalarBuffer(buf, mem, host_view(mem, self.device, scalar_host(dtype, 0).dtype))
                    self.entries.append(entry)
                entry.key = None   # being written: no other call reads it as any value until it is
            entry.users += 1
        if write:
            host = scalar_host(dtype, value)
            if entry.view is not None:
                entry.view[0] = host[0]
            else:
                dev.allocator.fill(entry.mem, host)
            with self.lock:
                entry.key = key
        return entry

    def release(self, entry: _ScalarBuffer) -> None:
        """A call that holds `entry` has submitted (or failed): it may be read until the timeline passes this value."""
        with self.lock:
            entry.users -= 1
            entry.until = max(entry.until, get_device(self.device).timeline_value)


_recycling: weakref.WeakSet[Program] = weakref.WeakSet()   # the programs with a `recent` pool


def recycled_holders() -> tuple[dict[int, int], dict[int, set[UOp]]]:
    """The references to BUFFERs that the results programs keep to recycle (`Program._reuse`) hold, which are no
    Tensor's, by the buffer's id (a key would be a reference too): how many of those results are the buffer, and
    the reshapes of it among them (a node's reference to its source is one, however many hold the node)."""
    direct: dict[int, int] = {}
    reshapes: dict[int, set[UOp]] = {}
    for prog in forksafe.members(_recycling):
        for results, bases, _ in list(prog.recent):
            for b in bases:   # (`Recycled.bases`' reference)
                direct[id(b)] = direct.get(id(b), 0) + 1
            for u in results:
                if u.op is Ops.BUFFER:
                    direct[id(u)] = direct.get(id(u), 0) + 1
                elif u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER:
                    reshapes.setdefault(id(u.src[0]), set()).add(u)
    return direct, reshapes


class Recycled(NamedTuple):
    """A call's results as `Program.recent` keeps them for `_reuse`: the result nodes, the output BUFFERs they are
    (or reshape), in output order, and the results that are reshapes. Nothing else holds them when each BUFFER is
    held by `bases` and by `results` or its reshape, and each reshape by `results` and `reshaped`: two holders each,
    which `map(sys.getrefcount, ...)` counts as `_TWO_HOLDERS`."""
    results: list[UOp]
    bases: list[UOp]
    reshaped: tuple[UOp, ...]


def _count_two_holders() -> int:
    x = object()   # held by this frame and by the list
    return max(map(getrefcount, [x]))


_TWO_HOLDERS = _count_two_holders()
BULK_RESULTS = 8   # a call with this many results has them tested in C loops for `Program._reuse` (fewer: one by one)
_recycled = partial(tuple.__new__, Recycled)   # (`Recycled(...)` without its Python __new__: a call per held result)
_shared = attrgetter("shared")


# programs built and run, in this process (`Program.last_run`): a list's item, so that a stamp is no call
_runs = [0]


class Program:
    """A LINEAR encoded as per-device command buffers, with patch slots for its inputs and outputs.

    Args:
        template: the schedule; its placeholders are `inputs` by position.
        inputs: the buffers of the call it is built for; `inputs[:n_dynamic]` change every call, the rest are
            constants captured by a trace, bound once.
        donated: output index -> input index whose buffer the output is written into (jit's `donate_argnums`).
        unflatten: per-device results -> the caller's results (MULTIs for sharded ones).
        reuse_results: whether a call may take back whole results of the call before last (`_reuse`): jit's replays
            (True), an eager graph's program when it runs inline ("inline": an op's dispatch is then all it costs,
            and a larger one's outputs are not kept twice over).
    """

    def __init__(self, template: ScheduleTemplate, inputs: list[UOp], n_dynamic: int,
                 donated: dict[int, int] | None = None,
                 unflatten: Callable[[list[UOp]], list[UOp]] = list,
                 reuse_results: bool | Literal["inline"] = False) -> None:
        # encoded against stand-ins for the inputs and outputs, patched per call: the command buffers keep what they
        # were encoded with alive, and must not keep the first call's arguments (nor memory for results) alive
        stand_ins = [_stand_in(b) for b in inputs[:n_dynamic]]
        linear, results = template.instantiate(stand_ins + inputs[n_dynamic:])
        donated = donated or {}
        self.n_dynamic = n_dynamic
        self.calls = list(linear.src)
        self.inputs = stand_ins + inputs[n_dynamic:]
        self.unflatten = unflatten
        written = {b for c in self.calls for b in writes(c)}
        in_set = set(self.inputs)
        # outputs: the buffers results view that the program writes (an eager result may be an input, or a view
        # no kernel made: those are rebuilt from this call's buffers, `_general`)
        self.outputs = list(dict.fromkeys(b for r in results if (b := buffer_view(r)) is not None
                                          and b in written and b not in in_set))
        for b in self.outputs:
            register_memory(b, _stand_in_memory(b))
        out_set = set(self.outputs)
        # a network collective's buffers are not planned: its engine reads and writes them while the device's own
        # later kernels (which planning might place in the same memory) run
        networked = {b for c in self.calls if c.src[0].op is Ops.NETWORK for b in c.src[1:]}
        self.intermediates = [b for b in dict.fromkeys(b for c in self.calls for b in c.src[1:])
                              if b not in in_set and b not in out_set and b.arg[0] >= 0 and b in written
                              and b not in networked]
        self.unplanned_bytes, self.planned_bytes = plan_memory(self.calls, self.intermediates)
        self.donated = donated
        self.donated_inputs = sorted(set(donated.values()))
        self.segments = self._encode()
        self.bulk = any(seg.bulk is not None for seg in self.segments)
        self.inline = is_tiny(self.calls)
        pooled = sum(buffer_nbytes(b) for b in self.outputs) <= RECYCLE_BYTES
        # what a call allocates: per output buffer (device, size, dtype, allocator, bytes, free list), None where
        # donated
        # an alias output is the memory of another output (its source), seen from its own device
        alias_of = {c.src[1]: self.outputs.index(c.src[2]) for c in self.calls if is_alias(c)}
        self.out_specs = [None if i in donated else ("alias", b.arg[1], b.arg[2], b.dtype, alias_of[b])
                          if b in alias_of else
                          (b.arg[1], b.arg[2], b.dtype, get_device(b.arg[1]).allocator, buffer_nbytes(b),
                           deque(maxlen=pool_depth(buffer_nbytes(b))) if pooled else None)
                          for i, b in enumerate(self.outputs)]
        # per result: ("out", output index, shape to view it as or None) or ("general", the result's expression,
        # None)
        self.result_views: list[tuple] = []
        for r in results:
            b = buffer_view(r)
            if b is not None and b in out_set:
                self.result_views.append(("out", self.outputs.index(b), None if r.shape == (b.arg[2],) else r.shape))
            else:
                self.result_views.append(("general", r, None))
        self._general = {b: i for i, b in enumerate(stand_ins)}
        # inputs a result is a view of: their buffers are handed out, so never rewritten (no ScalarArgs for them)
        self.returned_inputs = {self._general[u] for kind, r, _ in self.result_views if kind == "general"
                                for u in r.toposort() if u in self._general}
        self.sharded = any(u.op is Ops.MULTI for u in unflatten(results))  # results join into MULTIs
        self.waits_on_earlier = any(seg.dep is not None and seg.dep[2] is None for seg in self.segments)
        self.single = self.segments[0] if len(self.segments) == 1 and self.segments[0].dep is None else None
        # whether every buffer a call binds is on the one segment's device (what its submission holds: `_Leased`)
        self.one_device = self.single is not None and \
            all(get_device(b.arg[1]) is self.single.device for b in self.inputs[:n_dynamic] + self.outputs)
        self.scalar_args: dict[int, ScalarArgs] = {}   # by input position: Python scalars' buffers (jit's replays)
        self.host_args: dict[int, Any] = {}   # by input position: numpy arguments' buffers (`host_args.HostArgs`)
        # when it was built or last run, in runs of any program: what the caches that keep programs evict by (`LRU`'s
        # `recency`), so that a run refreshes no cache
        self.last_run = _runs[0] = _runs[0] + 1
        # a call may take back whole results of the call before last (`_reuse`)
        of_output = {v[1]: k for k, v in enumerate(self.result_views) if v[0] == "out"}
        self._result_of_output = [of_output.get(j) for j in range(len(self.outputs))]   # (each output's result)
        distinct = all(v[0] == "out" for v in self.result_views) and \
            len({v[1] for v in self.result_views}) == len(self.result_views) == len(self.outputs)
        self.recent: deque[Recycled] | None = deque(maxlen=2) \
            if reuse_results and (reuse_results is True or self.inline) and pooled and distinct and not donated \
            and not self.sharded else None
        if self.recent is not None:
            _recycling.add(self)
        # the results that are reshapes of their buffers, picked out of a call's results (`Recycled.reshaped`)
        at = [k for k, v in enumerate(self.result_views) if v[2] is not None]
        self._reshaped: Callable[[list[UOp]], tuple[UOp, ...]] = \
            (lambda results: ()) if not at else (lambda results: (results[at[0]],)) if len(at) == 1 else itemgetter(*at)
        self._reshaped_one = -1 if not at else at[0] if len(at) == 1 else None   # (`execute`'s way to them)
        # (an eager program's case: `execute` makes its outputs and results without per-output tests)
        self.plain = all(spec is not None and spec[0] != "alias" for spec in self.out_specs) \
            and all(kind == "out" for kind, _, _ in self.result_views)
        # what this program holds while something caches it (the eager program cache weighs it so): its arenas, the
        # idle outputs its pools may keep (and the results `recent` keeps), its encoded words and its kernels' code
        # (an output written into a donated input, or an alias of another output, is no allocation of its own: an
        # optimizer step donating its parameters holds none of them)
        recent = self.recent.maxlen if self.recent is not None else 0
        own = sum((spec[5].maxlen + recent) * spec[4] for spec in self.out_specs
                  if spec is not None and spec[0] != "alias" and spec[5] is not None)
        self.nbytes = self.planned_bytes + own \
            + sum(seg.cb.words.nbytes + sum(getattr(p.keepalive, "nbytes", 0) for p in getattr(seg.cb, "programs", ()))
                  for seg in self.segments)
        self.n_kernels = sum(1 for c in self.calls if c.src[0].op is Ops.SINK)
        self.n_copies = sum(1 for c in self.calls if c.src[0].op is Ops.COPY and not is_alias(c))
        self.lock = threading.Lock()

    # ---- encoding (once) ----
    def _encode(self) -> list[Segment]:
        """Split the LINEAR into per-device segments: consecutive commands of a device in one command buffer, a copy
        outside any block on the destination's copy engine (waiting for the segment that wrote its source), a block
        (a loop or a branch, with everything inside it) whole in the compute queue it starts in."""
        from tgfx.lowering import prelower
        kernels = [(get_device(c.src[1].arg[1]), choose(c.src[0])[0]) for c in self.calls if c.src[0].op is Ops.SINK]
        prelower(ast for dev, ast in kernels if dev.compiles_on_host)
        if gpu := [(dev, ast) for dev, ast in kernels if hasattr(dev, "load_kernel")]:   # a GPU's: PTX
            from tgfx.lowering.render_nvptx import preload
            preload(gpu)
        index = {b: i for i, b in enumerate(self.inputs[:self.n_dynamic])}
        index.update({b: self.n_dynamic + i for i, b in enumerate(self.outputs)})
        segments: list[Segment] = []
        queue, qdev, used = None, None, []
        qdep: tuple[Any, str, int | None] | None = None   # what the queue being built waits for first (see below)
        writer: dict[UOp, int] = {}  # buffer -> the segment that writes it (a copy waits for exactly that one)
        labels: list[dict] = []    # open blocks (loops, branches): everything inside goes into one queue
        pending: dict[UOp, int] = {}  # buffer a network collective writes -> its segment, until its device waits
        fences = _Fences(set(self.intermediates), segments)
        for call in self.calls:
            body, bufs = call.src[0], call.src[1:]
            if pending and any(b in pending for b in bufs) or body.op is Ops.NETWORK:
                if queue is not None:
                    segments.append(self._segment(qdev, queue, used, index, qdep))
                    queue = None
                self._await_network(segments, pending, writer, [b for b in bufs if b in pending])
            if body.op is Ops.NETWORK:
                assert not labels, "a collective between processes inside a loop or branch (they run on one device)"
                segments.append(network_segment(self, call, writer, index))
                writer[bufs[0]] = pending[bufs[0]] = len(segments) - 1
                continue
            if is_alias(call):   # no bytes move: the destination's device waits for the source's writer
                if queue is not None:
                    segments.append(self._segment(qdev, queue, used, index, qdep))
                    queue = None
                dst, src = bufs
                if get_device(src.arg[1]) is not get_device(dst.arg[1]):
                    fences.wait_for(get_device(dst.arg[1]), [src], writer)
                    writer[dst] = len(segments) - 1
                elif src in writer:
                    writer[dst] = writer[src]
                continue
            if body.op is Ops.COPY and not labels and len(body.arg) == 3:
                if queue is not None:
                    segments.append(self._segment(qdev, queue, used, index, qdep))
                    queue = None
                fences.before_write(get_device(bufs[0].arg[1]), [bufs[0]])
                dst, src = bufs
                ddev, sdev = get_device(dst.arg[1]), get_device(src.arg[1])
                # on the destination's copy engine, unless it cannot read the source's memory (a CPU's engine cannot
                # read a GPU's): then the source's engine pushes it, after the destination's work so far (which may
                # still read the memory dst reuses), and the destination's later work waits for it
                push = sdev is not ddev and ddev.host_memory and not sdev.host_memory
                runner, other = (sdev, ddev) if push else (ddev, sdev)
                q = HWQueue(Engine.COPY)
                name = f"dep{len(segments)}"
                if sdev is not ddev:
                    q.wait(other.timeline, Sym(name, 0))
                nbytes, src_offset, dst_offset = body.arg
                q.copy(buffer_memory(dst), buffer_memory(src, allocate=False), nbytes, dst_offset=dst_offset,
                       src_offset=src_offset)
                seg = self._segment(runner, q, [dst, src], index)
                waited = next((i for i in range(len(segments) - 1, -1, -1) if segments[i].device is ddev), None) \
                    if push else writer.get(src)
                seg.dep = (other, name, waited) if sdev is not ddev else None
                segments.append(seg)
                writer[dst] = len(segments) - 1
                if sdev is not ddev:  # the source device must not overwrite what is being copied until it is done
                    fence = HWQueue().wait(runner.timeline, Sym(name + "f", 0))
                    segments.append(Segment(other, fence.encode(), {}, (runner, name + "f", len(segments) - 1)))
                    if push:   # dst is ready on its device once that device's fence passed
                        writer[dst] = len(segments) - 1
                continue
            dev = command_device(call, qdev if labels else None)
            foreign = [] if labels or body.op is not Ops.SINK else \
                [b for b in bufs[1:] if get_device(b.arg[1]) is not dev]
            waits = _waits_for(foreign, writer) if foreign else None
            fence = not labels and fences.needed(dev, writes(call))
            if fence and queue is not None and qdev is dev and qdep is not None and qdep[2] is not None and \
                    all(r is qdep[0] and seg <= qdep[2] for r, seg in fences.take(dev, writes(call), True).items()):
                fences.take(dev, writes(call))   # the readers finished before this queue's first wait passed
                fence = False
            if foreign and queue is not None and qdev is dev and qdep is not None and len(waits) == 1 and \
                    waits[0][0] is qdep[0] and waits[0][1] is not None and qdep[2] is not None and \
                    waits[0][1] <= qdep[2] and not fence:
                # what it reads of the other device was written before what this queue waits for already: it goes
                # on in this queue (the collective's readers on one device, one after another: one segment)
                append_command(queue, call, labels)
                used.extend(bufs)
                for b in writes(call):
                    writer[b] = len(segments)
                fences.read_by(dev, len(segments), foreign)
                continue
            head = None   # the one wait this kernel's queue starts with, not a segment of its own
            if not labels and (foreign or fence):
                if queue is not None:
                    segments.append(self._segment(qdev, queue, used, index, qdep))
                    queue = None
                last = fences.take(dev, writes(call)) if fence else {}
                if foreign and len(waits) == 1 and waits[0][1] is not None and \
                        (not last or (len(last) == 1 and waits[0][0] in last)):
                    head = (waits[0][0], max(waits[0][1], last.get(waits[0][0], -1)))   # one wait for both
                elif not foreign and len(last) == 1:
                    head = next(iter(last.items()))
                else:
                    fences.emit(dev, last)
            if foreign and len(waits) == 1 and (head is not None or waits[0][1] is None):
                # one other device read: its wait starts the queue that runs this kernel, and the device's next
                # kernels go on in it (no segment of its own for the wait, none for each kernel after it)
                src, made = head if head is not None else waits[0]
                name = f"dep{len(segments)}"
                queue, qdev, used = HWQueue().wait(src.timeline, Sym(name, 0)), dev, list(bufs)
                qdep = (src, name, made)
                append_command(queue, call, labels)
                for b in writes(call):
                    writer[b] = len(segments)
                fences.read_by(dev, len(segments), foreign)
                continue
            if foreign:   # a kernel reading several other devices' memory where it lies (a collective on host memory)
                fences.wait_for(dev, foreign, writer)
                queue, qdev, used, qdep = HWQueue(), dev, list(bufs), None
                append_command(queue, call, labels)
                for b in writes(call):
                    writer[b] = len(segments)
                segments.append(self._segment(dev, queue, used, index))
                fences.read_by(dev, len(segments) - 1, foreign)
                queue = None
                continue
            if queue is None or (qdev is not dev and not labels):
                if queue is not None:
                    segments.append(self._segment(qdev, queue, used, index, qdep))
                queue, qdev, used, qdep = HWQueue(), dev, [], None
                if head is not None:
                    name = f"fence{len(segments)}"
                    queue.wait(head[0].timeline, Sym(name, 0))
                    qdep = (head[0], name, head[1])
            append_command(queue, call, labels)
            used.extend(bufs)
            for b in writes(call):
                writer[b] = len(segments)  # the segment being built
        if queue is not None:
            segments.append(self._segment(qdev, queue, used, index, qdep))
        self._await_network(segments, pending, writer, list(pending))
        fences.flush()   # the next call's writes wait for this call's readers
        assert all(isinstance(buffer_memory(b), Buffer) for b in self.intermediates)
        return segments

    @staticmethod
    def _await_network(segments: list[Segment], pending: dict[UOp, int], writer: dict[UOp, int],
                       bufs: list[UOp]) -> None:
        """Make the devices of `bufs` (written by network collectives) wait for them: as late as possible, before the
        first command that touches the result, so their kernels meanwhile overlap with the network."""
        for b in bufs:
            if b not in pending:
                continue
            producer = pending.pop(b)
            dev, net = get_device(b.arg[1]), segments[producer].device
            name = f"net{len(segments)}"
            segments.append(Segment(dev, HWQueue().wait(net.timeline, Sym(name, 0)).encode(), [], (net, name,
                                                                                                  producer)))
            writer[b] = len(segments) - 1

    def _segment(self, dev: Any, queue: HWQueue, used: list[UOp], index: dict[UOp, int],
                 dep: tuple[Any, str, int | None] | None = None) -> Segment:
        cb = queue.encode()
        patches = [(word, offset, index[b]) for b in dict.fromkeys(used) if b in index
                   for word, offset in cb.slot_words(cb.slot_of(buffer_memory(b)))]
        return Segment(dev, cb, patches, dep)

    # ---- calls ----
    def execute(self, mems: list[Any], in_bufs: list[UOp]) -> list[UOp]:
        """Run the program on inputs `mems` (the memory of buffers `in_bufs`, which donated outputs take over):
        the results, each a view of its output buffer (or of an input), per device part."""
        # (two threads may take one stamp: a cache's order among programs run at once is either)
        self.last_run = _runs[0] = _runs[0] + 1
        recycled = None
        if self.recent is not None and (recycled := self._reuse(mems)) is not None:
            results = recycled[0]
        elif self.plain:   # every output fresh, every result one of them: what the loops below do, without their tests
            # (loops, not comprehensions: each of those is a call, and an eager op runs this every time)
            out_bufs = []
            for spec in self.out_specs:
                out_bufs.append(_output(spec, mems))
            results = []
            for _, a, shape in self.result_views:
                b = out_bufs[a]
                results.append(b if shape is None else UOp(Ops.RESHAPE, b.dtype, (b,), shape))
        else:
            out_bufs = []
            for i, spec in enumerate(self.out_specs):
                if spec is None:  # donated: the output takes over the input's buffer
                    out_bufs.append(in_bufs[self.donated[i]])
                    mems.append(mems[self.donated[i]])
                elif spec[0] == "alias":   # made once the memory it aliases is
                    out_bufs.append(None)
                    mems.append(None)
                else:
                    out_bufs.append(_output(spec, mems))
            for i, spec in enumerate(self.out_specs):
                if spec is not None and spec[0] == "alias":
                    out_bufs[i] = _alias(spec, mems, self.n_dynamic + i, self.n_dynamic + spec[4])
            results = self.views(out_bufs, in_bufs)
        if self.recent is not None:
            if recycled is None:   # (its reshapes and the tuple built without Python calls: a held result's case)
                r = self._reshaped_one
                recycled = _recycled((results, out_bufs, () if r == -1 else (results[r],) if r is not None else
                                      self._reshaped(results)))
            self.recent.append(recycled)
        seg = self.single
        if seg is None:
            self.run(mems)
        else:  # one segment that waits for nothing: what `run` does, without its bookkeeping
            with self.lock:
                if seg.bulk is not None:
                    seg.bind(mems)
                else:
                    words = seg.cb.word_view
                    for word, offset, i in seg.patches:   # (`seg.bind(mems)`, inlined: an eager op's few words)
                        words[word] = mems[i].ptr + offset
                # a tiny program runs inline when it can, and holds nothing then
                # (what it holds: every Buffer's memory where all are its device's, `_Leased`)
                seg.device.submit(seg.cb, mems if self.inline else list(map(_owned, mems)) if self.one_device else
                                  _queue_refs(mems, seg.device), self.inline)
            counters.kernel_count += self.n_kernels
            counters.copy_count += self.n_copies
        return results

    def _reuse(self, mems: list[Any]) -> Recycled | None:
        """The results of the call before the previous one, whole (`Recycled`: their nodes, and their leased memory
        appended to `mems`), if nothing outside this program holds them any more; else None. A jitted loop that keeps
        one result at a time (`params = step(params, batch)`) then builds no node and allocates nothing per call: a
        replay's result nodes cost more than its dispatch. Only a node's reference count can tell that nothing
        holds it while the node itself is kept (`recent` keeps it): a result a Tensor, a lazy graph or a view
        still holds has more references than the pool's two (see `Recycled`). The counts are taken by `map`, in C:
        realnvp's 218 results were 14,000 bytecodes of its step's 72,000 tested one by one.
        The memory is written by this program's queue, after whatever was submitted before (see `_Leased`)."""
        recent = self.recent
        if len(recent) < recent.maxlen:
            return None
        entry = recent.popleft()   # taken first: another thread replaying meanwhile cannot take it too
        results, bases, reshaped = entry
        if len(bases) == 1:   # one result (an eager op's, `f(v)`'s): the same counts, without `map`'s calls and objects
            # (each `getrefcount(...)` counts the argument as `map` does: `_TWO_HOLDERS` is two holders then too; the
            # memory's are the runtime's map and `mem`, as `held`'s. x + 1 paid 1.5 us more for the maps)
            if sys.getrefcount(results) > 3 or getrefcount(bases[0]) > _TWO_HOLDERS or \
                    reshaped and getrefcount(reshaped[0]) > _TWO_HOLDERS:
                recent.appendleft(entry)
                return None
            mem = buffers.get(id(bases[0]))
            if mem.shared or getrefcount(mem) > _TWO_HOLDERS:
                recent.appendleft(entry)
                return None
            mems.append(mem)
            for table in recycled_forget:   # (`_forget`, inlined: a call more per eager op of a committed value)
                if table:
                    table.pop(id(results[0]), None)
                    if reshaped:
                        table.pop(id(bases[0]), None)
            return entry
        # (the results' list: `entry`, this frame and getrefcount's argument; more while the call that made them has
        # not handed them out yet, on another thread)
        if sys.getrefcount(results) > 3:
            recent.appendleft(entry)
            return None
        if len(bases) < BULK_RESULTS:   # a few (a small step's): one by one, cheaper than `map`'s calls and objects
            # (a loop's variable is one holder more)
            for r in reshaped:
                if getrefcount(r) > _TWO_HOLDERS + 1:
                    recent.appendleft(entry)
                    return None
            n = len(mems)
            for b in bases:
                mem = buffers.get(id(b))   # (held by the runtime's map and `mem`, as `held`'s below)
                if getrefcount(b) > _TWO_HOLDERS + 1 or mem.shared or getrefcount(mem) > _TWO_HOLDERS:
                    del mems[n:]
                    recent.appendleft(entry)
                    return None
                mems.append(mem)
            self._forget(results)
            return entry
        if max(map(getrefcount, bases)) > _TWO_HOLDERS or \
                reshaped and max(map(getrefcount, reshaped)) > _TWO_HOLDERS:
            recent.appendleft(entry)
            return None
        held = list(map(buffers.get, map(id, bases)))   # (memory_of, inlined: every replay)
        # a view of a result (`range_view`) may still read it; so may a submission to another device that holds the
        # Buffer (a copy of it to another CPU: same-device work holds the raw memory, and runs before a reuse). Held:
        # by the runtime's map and `held`
        if any(map(_shared, held)) or max(map(getrefcount, held)) > _TWO_HOLDERS:
            recent.appendleft(entry)
            return None
        mems += held
        self._forget(results)
        return entry

    @staticmethod
    def _forget(results: list[UOp]) -> None:
        """Drop recycled `results` from the tables that `recycled_forget` names (they come back as other values)."""
        for table in recycled_forget:
            if table:
                for u in results:
                    table.pop(id(u), None)
                    if u.op is Ops.RESHAPE:
                        table.pop(id(u.src[0]), None)

    def views(self, out_bufs: list[UOp], in_bufs: list[UOp]) -> list[UOp]:
        """The results, viewed in their shapes, from this call's output (and input) buffers."""
        out = []
        for kind, a, shape in self.result_views:
            if kind == "out":
                buf = out_bufs[a]
                out.append(buf if shape is None else UOp(Ops.RESHAPE, buf.dtype, (buf,), shape))
            else:  # a view of inputs or outputs no kernel made: the result's expression on this call's buffers
                mapping = {x: in_bufs[i] for x, i in self._general.items() if in_bufs[i] is not x}
                mapping.update({x: o for x, o in zip(self.outputs, out_bufs, strict=True) if o is not x})
                out.append(a.substitute(mapping) if mapping else a)
        return out

    def run(self, mems: list[Any]) -> None:
        """Submit the program with `mems` as its buffers (inputs, then outputs)."""
        with self.lock:  # the encoded words are shared: one call binds and submits them at a time
            values: list[int] = []  # the timeline value each segment completes at
            # the work given before this call, which a copy of a value made before the call waits for
            start = {seg.device: seg.device.timeline_value for seg in self.segments} if self.waits_on_earlier else {}
            refs: dict[Any, list[Any]] = {}   # what a device's submissions hold: one list for all of them
            ptrs = addresses(mems) if self.bulk else None   # (once for all the segments that bind in bulk)
            for seg in self.segments:
                seg.bind(mems, ptrs)
                if seg.dep is not None:
                    dev, name, producer = seg.dep
                    seg.cb.patch_vals({name: start[dev] if producer is None else values[producer]})
                if (held := refs.get(seg.device)) is None:
                    held = refs[seg.device] = _queue_refs(mems, seg.device)
                values.append(seg.device.submit(seg.cb, held, self.inline).value)
        counters.kernel_count += self.n_kernels
        counters.copy_count += self.n_copies



def network_segment(prog: Program, call: UOp, writer: dict[UOp, int], index: dict[UOp, int]) -> Segment:
    """A collective between processes, on the network engine: wait for the segment that wrote its input, then the
    collective's host program on (out, in), in place in their memory."""
    from tgfx.lowering.multi_process import collective_of
    out, src = call.src[1:]
    sdev, net = get_device(src.arg[1]), collective_of(call)
    q = HWQueue()
    name = f"dep{id(call)}"
    q.wait(sdev.timeline, Sym(name, 0))
    q.exec(net.program, [buffer_memory(out), buffer_memory(src, allocate=False)])
    seg = prog._segment(net.device, q, [out, src], index)
    seg.dep = (sdev, name, writer.get(src))
    return seg
class _Fences:
    """The waits around kernels that read other devices' memory where it lies (`HCQDevice.host_memory`): the kernel
    waits for each such device's segment that wrote what it reads, and that device holds its next write over what
    was read (planned memory reused, an output, the next call) until the kernel is done. Held as late as that, not
    right after the kernel, so the devices of a collective run their kernels side by side."""

    def __init__(self, intermediates: set[UOp], segments: list[Segment]) -> None:
        self.intermediates, self.segments = intermediates, segments
        self.pending: dict[Any, list[tuple[Any, int, list[UOp]]]] = {}   # device -> (reader, its segment, read)

    def _overlap(self, a: UOp, b: UOp) -> bool:
        if a is b:
            return True
        if a not in self.intermediates or b not in self.intermediates:   # patch slots: their memory changes per call
            return a not in self.intermediates and b not in self.intermediates
        ma, mb = buffer_memory(a), buffer_memory(b)
        return ma.ptr < mb.ptr + mb.nbytes and mb.ptr < ma.ptr + ma.nbytes

    def _hit(self, entry: tuple[Any, int, list[UOp]], written: list[UOp] | None) -> bool:
        return written is None or any(self._overlap(w, r) for w in written for r in entry[2])

    def needed(self, dev: Any, written: list[UOp]) -> bool:
        return any(self._hit(e, written) for e in self.pending.get(dev, ()))

    def before_write(self, dev: Any, written: list[UOp] | None) -> None:
        """Segments on `dev` that wait for the readers of what `written` (None: anything) overlaps."""
        self.emit(dev, self.take(dev, written))

    def take(self, dev: Any, written: list[UOp] | None, peek: bool = False) -> dict[Any, int]:
        """The readers of what `written` (None: anything) on `dev` overlaps, each by its last segment that reads it
        (its compute queue's segments finish in order), no longer pending (still pending with `peek`)."""
        keep, last = [], {}
        for entry in self.pending.get(dev, ()):
            if not self._hit(entry, written):
                keep.append(entry)
                continue
            reader, seg, _ = entry
            last[reader] = max(seg, last.get(reader, seg))
        if not peek:
            self.pending[dev] = keep
        return last

    def emit(self, dev: Any, last: dict[Any, int]) -> None:
        """A segment on `dev` waiting for each reader's segment of `last` (`take`), unless one of dev's segments
        (in its compute queue, so before what the fence would hold) waits for that segment or a later one already."""
        for reader, seg in last.items():
            if any(s.device is dev and s.dep is not None and s.dep[0] is reader and s.dep[2] is not None and
                   s.dep[2] >= seg and s.cb.engine is Engine.COMPUTE for s in self.segments):
                continue
            name = f"fence{len(self.segments)}"
            self.segments.append(Segment(dev, HWQueue().wait(reader.timeline, Sym(name, 0)).encode(), {},
                                         (reader, name, seg)))

    def wait_for(self, dev: Any, foreign: list[UOp], writer: dict[UOp, int]) -> None:
        """Segments on `dev` that wait for the devices of `foreign` to have written them."""
        by_device: dict[Any, list[UOp]] = {}
        for b in foreign:
            by_device.setdefault(get_device(b.arg[1]), []).append(b)
        for src, bs in by_device.items():
            made = [writer[b] for b in bs if b in writer]
            name = f"dep{len(self.segments)}"
            self.segments.append(Segment(dev, HWQueue().wait(src.timeline, Sym(name, 0)).encode(), {},
                                         (src, name, max(made) if made else None)))

    def read_by(self, dev: Any, seg: int, foreign: list[UOp]) -> None:
        for b in foreign:
            self.pending.setdefault(get_device(b.arg[1]), []).append((dev, seg, [b]))

    def flush(self) -> None:
        for dev in list(self.pending):
            self.before_write(dev, None)


def _waits_for(foreign: list[UOp], writer: dict[UOp, int]) -> list[tuple[Any, int | None]]:
    """(device, the last segment of this program that wrote what is read of it, or None: none did) for each device
    whose memory `foreign` lies in, as `_Fences.wait_for` waits for them."""
    by_device: dict[Any, list[UOp]] = {}
    for b in foreign:
        by_device.setdefault(get_device(b.arg[1]), []).append(b)
    return [(src, max(made) if (made := [writer[b] for b in bs if b in writer]) else None)
            for src, bs in by_device.items()]


def _stand_in_memory(b: UOp) -> Buffer:
    """Memory to encode a patch slot with: its device and size, at address 0, owning nothing."""
    return Buffer(get_device(b.arg[1]), buffer_nbytes(b), 0, _STAND_IN)


def _stand_in(b: UOp) -> UOp:
    """A BUFFER like `b` (an input bound per call), backed by stand-in memory."""
    out = new_buffer(b.arg[1], b.arg[2], b.dtype)
    register_memory(out, _stand_in_memory(out))
    return out


_STAND_IN = b""   # what a stand-in Buffer "owns": something that is not None (None means freed)


def _queue_refs(mems: list[Any], device: Any) -> list[Any]:
    """What a submission to `device` holds until it completes: the memory of leases of that device (a reuse is
    submitted there after it, see `_Leased`), the Buffers (and so the leases) of everything else."""
    return [m._mem if type(m) is _Leased and m.device is device else m for m in mems]


_owned = attrgetter("_mem")


def _output(spec: tuple, mems: list[Any]) -> UOp:
    """A new output buffer, its memory (appended to `mems`) leased from the slot's free list when one is idle."""
    device, size, dtype, allocator, nbytes, free = spec
    buf = UOp(Ops.BUFFER, dtype, (), (next(buffer_uids), device, size))   # (`new_buffer`, inlined: every eager op's)
    if free is None:
        mem = allocator.alloc(nbytes)
        counters.alloc_count += 1
    else:
        try:
            raw = free.popleft()
        except IndexError:
            raw = allocator.alloc(nbytes)
            counters.alloc_count += 1
        mem = _Leased(raw, free)
    buffers[id(buf)] = mem   # (`register_memory`, inlined)
    mems.append(mem)
    return buf


def _alias(spec: tuple, mems: list[Any], at: int, source: int) -> UOp:
    """An alias output: a new buffer on its device whose memory (put in `mems[at]`) is that of the output whose
    memory is `mems[source]`. Both are marked shared, so that no jitted call writes into either in place."""
    _, device, size, dtype, _ = spec
    buf, base = new_buffer(device, size, dtype), mems[source]
    base.shared = True
    mems[at] = register_memory(buf, Buffer(get_device(device), base.nbytes, base.ptr, base.owner, shared=True))
    return buf


def plan_memory(calls: list[UOp], intermediates: list[UOp]) -> tuple[int, int]:
    """Give intermediates whose lifetimes do not overlap the same memory; returns (bytes without, with planning).

    Lifetimes are [first call touching, last call touching]; buffers are placed greedily, largest first, at the
    lowest offset of their device's arena that no overlapping buffer uses.
    """
    first, last = lifetimes(calls)
    placed: dict[str, list[tuple[int, int, int, int]]] = {}  # device -> [(start, end, offset, size)]
    offsets: dict[UOp, int] = {}
    for b in sorted(intermediates, key=lambda b: -b.arg[2] * b.dtype.itemsize):
        size = -(-buffer_nbytes(b) // 64) * 64
        busy = sorted((o, o + s) for st, en, o, s in placed.get(b.arg[1], []) if not (en < first[b] or last[b] < st))
        off = 0
        for lo, hi in busy:
            if off + size <= lo:
                break
            off = max(off, hi)
        offsets[b] = off
        placed.setdefault(b.arg[1], []).append((first[b], last[b], off, size))
    unplanned = sum(buffer_nbytes(b) for b in intermediates)
    arenas = {dev: max((o + s for _, _, o, s in ps), default=0) for dev, ps in placed.items()}
    for dev, nbytes in arenas.items():
        arena = get_device(dev).allocator.alloc(max(nbytes, 1))
        counters.alloc_count += 1
        for b in intermediates:
            if b.arg[1] == dev:
                register_memory(b, arena.view(offsets[b], buffer_nbytes(b)))
    return unplanned, sum(arenas.values())


__all__ = ["Program", "Segment", "plan_memory", "RECYCLE_BYTES"]
