"""`jit`: trace once per signature, replay the compiled program with near-zero dispatch (SPEC §5).

The first call with a signature (tree structure, shapes, dtypes and devices of the Tensor leaves, values of static
arguments and of Python scalars) traces `f` through `@function`, schedules and compiles it into a LINEAR program,
plans the memory of its intermediates (buffers whose lifetimes do not overlap share memory) and encodes it as HCQ
command buffers. Every later call with that signature only patches the input and output buffer addresses into the
encoded commands and submits them: no tracing, no graph work, no Python per kernel. Results return at once;
reading them waits on the device.

>>> import tgfx as tg, tgfx.numpy as tnp
>>> @tg.jit
... def step(w, x):
...     return w - 0.1 * x
>>> w = step(tg.asarray([1.0, 2.0]), tg.asarray([1.0, 1.0]))
>>> step.trace_count
1
"""
from __future__ import annotations

import functools
import sys
import threading
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgfx import config
from tgfx.counters import counters
from tgfx.devices import get_device
from tgfx.devices.hcq import Engine, HWQueue, Sym
from tgfx.dtypes import DType, canonicalize, cast_scalar, dtypes, from_numpy, max_value, min_value
from tgfx.function import Function, _describe_paths, _traces
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering import lower_multi, prelower, reads_in_place
from tgfx.lowering.constants import const_buffer, is_interned, strip_literals
from tgfx.lowering.control import lifetimes, merge_saved_loops, reads, writes
from tgfx.lowering.execute import (
    append_command,
    buffer_memory,
    buffer_nbytes,
    command_device,
    copyin,
    copyout,
    is_tiny,
    register_memory,
)
from tgfx.lowering.inline import check_no_params, pm_inline, substitute_outside_calls, walk
from tgfx.lowering.multi import device_parts
from tgfx.lowering.schedule import DEFAULT_DEVICE, ScheduleTemplate, buffer_view, new_buffer, placeholder
from tgfx.tensor import Tensor, realize, weak
from tgfx.transforms.grad import _active as _grad_active
from tgfx.tree import PyTreeDef, tree_flatten, tree_unflatten

LOG_RETRACE = config.Flag("TGFX_LOG_RETRACE", 0)
RECYCLE_BYTES = 256 << 20   # a program whose outputs are larger allocates them afresh every call


class DonatedBufferError(RuntimeError):
    pass


class DonatedTensor(Tensor):
    """A Tensor whose buffer was donated to a jitted call: every use raises."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in ("__class__", "__repr__", "uop"):
            return object.__getattribute__(self, name)
        raise DonatedBufferError("this Tensor was donated to a jitted function (donate_argnums) and its buffer was "
                                 "reused; use the function's result instead")

    def __repr__(self) -> str:
        return "<donated Tensor>"


LeafSpec = tuple[str, Any]  # ("tensor", (shape, dtype, device)) or ("static", value)


@dataclass
class Signature:
    treedef: PyTreeDef
    leaves: tuple[LeafSpec, ...]
    static: tuple[tuple[str, Hashable], ...]
    names: tuple[str, ...]  # a readable name per leaf, for retrace messages
    aliases: tuple[int, ...] | None = None  # which inputs share a buffer (`_aliases`)
    x64: bool = False  # the x64 mode it was traced in

    @property
    def key(self) -> Hashable:
        return (self.treedef, self.leaves, self.static)


def _leaf_spec(x: Any, where: str) -> LeafSpec:
    if isinstance(x, Tensor):
        if isinstance(x.device, tuple):  # sharded: the layout is part of the signature
            x.realize()
            return ("tensor", (x.shape, x.dtype, x.device, x.uop.arg))
        return ("tensor", (x.shape, x.dtype, x.device))
    if isinstance(x, (np.ndarray, np.generic)):  # what Tensor(x) would be: the same trace as that Tensor's
        return ("tensor", (x.shape, canonicalize(from_numpy(x.dtype)), DEFAULT_DEVICE))
    if type(x) in (int, float):
        return ("weak", (type(x), _weak_dtype(x, where)))
    try:
        hash(x)
    except TypeError as e:
        raise TypeError(f"jit: argument {where} of type {type(x).__name__} is neither a Tensor nor hashable; pass "
                        f"arrays as Tensors and other values as hashable static arguments") from e
    return ("static", (type(x), x))


def _weak_dtype(x: int | float, where: str) -> DType:
    """The dtype a Python scalar argument is traced as: weakly typed, so it takes the type of what it meets."""
    if isinstance(x, float):
        return dtypes.default_float
    if not min_value(dtypes.default_int) <= x <= max_value(dtypes.default_int):
        raise OverflowError(f"jit: Python int argument {where} = {x} does not fit {dtypes.default_int.name}; pass it "
                            f"as a Tensor of a wider dtype, or mark it static (static_argnums)")
    return dtypes.default_int


def copy_buffer(buf: UOp) -> UOp:
    """A new BUFFER with the contents of `buf`."""
    out = new_buffer(buf.arg[1], buf.arg[2], buf.dtype)
    copyin(out, copyout(buf))
    return out


def _leaf_tensor(x: Any) -> Tensor:
    """A dynamic leaf as a Tensor: a Python scalar is an interned one-element buffer (no copy for a value seen
    recently), host data is copied in."""
    if isinstance(x, Tensor):
        return x
    if type(x) in (int, float):
        d = _weak_dtype(x, "")
        return Tensor(const_buffer(d, cast_scalar(x, d), DEFAULT_DEVICE)).reshape(())   # a scalar is 0-d, as in JAX
    return Tensor(x)


def _describe_change(a: LeafSpec, b: LeafSpec) -> str:
    if a[0] == b[0] == "tensor":
        (sa, da, va, *xa), (sb, db, vb, *xb) = a[1], b[1]
        parts = []
        if sa != sb:
            parts.append(f"shape {sa} -> {sb}")
        if da != db:
            parts.append(f"dtype {getattr(da, 'name', da)} -> {getattr(db, 'name', db)}")
        if va != vb:
            parts.append(f"device {va} -> {vb}")
        elif xa != xb:
            parts.append(f"sharded axis {xa[0] if xa else None} -> {xb[0] if xb else None}")
        return ", ".join(parts)
    return f"{_describe_spec(a)} -> {_describe_spec(b)}"


def _static_names(f: Callable) -> dict[str, str]:
    import inspect
    try:
        names = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        return {}
    return {f"args[{i}]": n for i, n in enumerate(names)}


def _describe_spec(spec: LeafSpec) -> str:
    kind, v = spec
    if kind == "weak":
        return f"Python {v[0].__name__} (traced as a weakly typed {v[1].name} scalar)"
    if kind == "tensor":
        shape, dt, dev, *_ = v
        return f"{dt.name if isinstance(dt, DType) else 'array'}{list(shape)}{'' if dev is None else ' on ' + dev}"
    return repr(v[1])


# ---- the compiled program ----
@dataclass
class Segment:
    device: Any
    cb: Any                     # encoded CommandBuffer
    # (word, byte offset, program buffer index): the words a replay points at its inputs and outputs
    patches: list[tuple[int, int, int]]
    # (device waited on, Sym name, index of the segment it waits for, or None: all that device's earlier work)
    dep: tuple[Any, str, int | None] | None

    def bind(self, mems: list[Any]) -> None:
        """Point the encoded words at `mems`, the program's buffers. No checks: the signature guarantees that every
        buffer fits its slot."""
        words = self.cb.words
        for word, offset, i in self.patches:
            words[word] = mems[i].ptr + offset


class JitProgram:
    """A LINEAR encoded as per-device command buffers, with placeholders for inputs and outputs."""

    def __init__(self, template: ScheduleTemplate, inputs: list[UOp], n_dynamic: int,
                 out_shapes: list[tuple[int, ...]], donated: dict[int, int],
                 unflatten: Callable[[list[UOp]], list[UOp]]) -> None:
        linear, results = template.instantiate(inputs)
        self.n_dynamic = n_dynamic  # inputs[:n_dynamic] change every call; the rest are captured constants
        self.constants = inputs[n_dynamic:]
        self.calls = list(linear.src)
        self.inputs = inputs
        self.results = [buffer_view(r) for r in results]
        self.out_shapes = out_shapes
        self.unflatten = unflatten  # per-device results -> the function's results (MULTIs for sharded ones)
        self.outputs = list(dict.fromkeys(self.results))
        in_set, out_set = set(inputs), set(self.outputs)
        self.intermediates = [b for b in dict.fromkeys(b for c in self.calls for b in c.src[1:])
                              if b not in in_set and b not in out_set and b.arg[0] >= 0 and _written(b, self.calls)]
        self.unplanned_bytes, self.planned_bytes = plan_memory(self.calls, self.intermediates)
        self.donated = donated  # output index -> input index whose buffer it reuses
        self.donated_inputs = sorted(set(donated.values()))
        self.segments = self._encode()
        self.inline = is_tiny(self.calls)
        # what a replay allocates: per output buffer (device, size, dtype, allocator, bytes), None where donated
        self.out_specs = [None if i in donated else (b.arg[1], b.arg[2], b.dtype, get_device(b.arg[1]).allocator,
                                                     buffer_nbytes(b)) for i, b in enumerate(self.outputs)]
        # per result: its output buffer, and the shape to view it as (None: the buffer's own)
        self.result_views = [(self.outputs.index(r), None if shape == (r.arg[2],) else shape)
                             for r, shape in zip(self.results, out_shapes, strict=True)]
        self.sharded = any(u.op is Ops.MULTI for u in unflatten(self.views(self.outputs)))  # results join into MULTIs
        self.waits_on_earlier = any(seg.dep is not None and seg.dep[2] is None for seg in self.segments)
        # a replay reuses the results of the call before last once they are dropped (`_recycle`), up to a size
        distinct = len({i for i, _ in self.result_views}) == len(self.result_views)
        recyclable = sum(buffer_nbytes(b) for b in self.outputs) <= RECYCLE_BYTES
        self.recent: deque[list[UOp]] | None = \
            deque(maxlen=2) if recyclable and distinct and not donated and not self.sharded else None
        self.result_of_output = [next(k for k, (i, _) in enumerate(self.result_views) if i == j)
                                 for j in range(len(self.outputs))] if distinct else []
        self.single = self.segments[0] if len(self.segments) == 1 and self.segments[0].dep is None else None
        self.n_kernels = sum(1 for c in self.calls if c.src[0].op is Ops.SINK)
        self.n_copies = sum(1 for c in self.calls if c.src[0].op is Ops.COPY)
        self.lock = threading.Lock()

    def _encode(self) -> list[Segment]:
        from tgfx.devices.hcq import Buffer
        prelower(c.src[0] for c in self.calls if c.src[0].op is Ops.SINK)
        index = {b: i for i, b in enumerate(self.inputs[:self.n_dynamic])}
        index.update({b: self.n_dynamic + i for i, b in enumerate(self.outputs)})
        segments: list[Segment] = []
        queue, qdev, used = None, None, []
        writer: dict[UOp, int] = {}  # buffer -> the segment that writes it (a copy waits for exactly that one)
        labels: list[dict] = []    # open blocks (loops, branches): everything inside goes into one queue
        for call in self.calls:
            body, bufs = call.src[0], call.src[1:]
            if body.op is Ops.COPY and not labels and len(body.arg) == 3:
                if queue is not None:
                    segments.append(self._segment(qdev, queue, used, index))
                    queue = None
                dst, src = bufs
                ddev, sdev = get_device(dst.arg[1]), get_device(src.arg[1])
                q = HWQueue(Engine.COPY)
                name = f"dep{len(segments)}"
                if sdev is not ddev:
                    q.wait(sdev.timeline, Sym(name, 0))
                nbytes, src_offset, dst_offset = body.arg
                q.copy(buffer_memory(dst), buffer_memory(src, allocate=False), nbytes, dst_offset=dst_offset,
                       src_offset=src_offset)
                seg = self._segment(ddev, q, [dst, src], index)
                seg.dep = (sdev, name, writer.get(src)) if sdev is not ddev else None
                segments.append(seg)
                writer[dst] = len(segments) - 1
                if sdev is not ddev:  # the source device must not overwrite what is being copied until it is done
                    fence = HWQueue().wait(ddev.timeline, Sym(name + "f", 0))
                    segments.append(Segment(sdev, fence.encode(), {}, (ddev, name + "f", len(segments) - 1)))
                continue
            dev = command_device(call, qdev if labels else None)
            if queue is None or (qdev is not dev and not labels):
                if queue is not None:
                    segments.append(self._segment(qdev, queue, used, index))
                queue, qdev, used = HWQueue(), dev, []
            append_command(queue, call, labels, strict=False)
            used.extend(bufs)
            for b in writes(call):
                writer[b] = len(segments)  # the segment being built
        if queue is not None:
            segments.append(self._segment(qdev, queue, used, index))
        assert all(isinstance(buffer_memory(b), Buffer) for b in self.intermediates)
        return segments

    def replay(self, args: tuple[Tensor, ...]) -> list[UOp] | None:
        """The hit path of the common call, one-device Tensors by position that are computed, into a program that
        donates nothing and shards nothing: the results' UOps, or None for `Jit._run` to take the general path."""
        if self.donated or self.sharded:
            return None
        mems = []
        for a in args:
            u = a.uop
            if u.op is not Ops.BUFFER:
                u = buffer_view(u)
                if u is None:
                    return None
            mem = u.__dict__.get("memory")
            if mem is None:
                return None
            mems.append(mem)
        return self.execute(mems, [])

    def execute(self, mems: list[Any], in_bufs: list[UOp]) -> list[UOp]:
        """Run the program on inputs `mems` (and their buffers `in_bufs`, which donated outputs take over): the
        results, each a view of its output buffer, per device part."""
        results = self._recycle(mems) if self.recent is not None else None
        if results is None:
            out_bufs = []
            for i, spec in enumerate(self.out_specs):
                if spec is None:  # donated: the output takes over the input's buffer
                    out_bufs.append(in_bufs[self.donated[i]])
                    mems.append(mems[self.donated[i]])
                else:
                    out_bufs.append(_output(spec, mems))
            results = self.views(out_bufs)
        seg = self.single
        if seg is None:
            self.run(mems)
        else:  # one segment that waits for nothing: what `run` does, without its bookkeeping
            with self.lock:
                seg.bind(mems)
                seg.device.submit(seg.cb, mems, self.inline)
            counters.kernel_count += self.n_kernels
            counters.copy_count += self.n_copies
        if self.recent is not None:
            self.recent.append(results)
        return results

    def _recycle(self, mems: list[Any]) -> list[UOp] | None:
        """The results of the call before the previous one, to be this call's, if nothing outside this program holds
        them any more (their memory appended to `mems`); None if something does. A replay then allocates nothing
        (and its kernels write memory they wrote before, not fresh pages), in loops that keep one result at a time
        (`params = step(params, batch)`, `y = f(y)`, `box[0] = f(x)`). Between calls the pool keeps the previous
        call's results alive, which a loop would allocate again at once; `RECYCLE_BYTES` bounds what it keeps.

        CPython's reference counts are exact: a result that a Tensor, a lazy graph or anything else still holds has
        more references than the pool's list, this loop's variable and getrefcount's argument, and is left alone.
        Device work that still reads the old value was submitted before this call, so it runs first."""
        recent = self.recent
        if len(recent) < recent.maxlen:
            return None
        results = recent.popleft()   # taken first: another thread replaying meanwhile cannot take it too
        if sys.getrefcount(results) > 2:   # the call that made them has not handed them out yet (another thread)
            recent.appendleft(results)
            return None
        for u in results:
            if sys.getrefcount(u) > 3 or (u.op is Ops.RESHAPE and sys.getrefcount(u.src[0]) > 2):
                recent.appendleft(results)
                return None
        for k in self.result_of_output:
            u = results[k]
            mems.append((u if u.op is Ops.BUFFER else u.src[0]).__dict__["memory"])
        return results

    def views(self, out_bufs: list[UOp]) -> list[UOp]:
        """The results, viewed in their shapes, from the output buffers."""
        out = []
        for i, shape in self.result_views:
            b = out_bufs[i]
            if shape is not None:
                b = UOp(Ops.RESHAPE, b.dtype, (b,), shape)
                b.__dict__.update(shape=shape, device=b.src[0].arg[1])
            out.append(b)
        return out

    def _segment(self, dev: Any, queue: HWQueue, used: list[UOp], index: dict[UOp, int]) -> Segment:
        cb = queue.encode()
        patches = [(word, offset, index[b]) for b in dict.fromkeys(used) if b in index
                   for word, offset in cb.slot_words(cb.slot_of(buffer_memory(b)))]
        return Segment(dev, cb, patches, None)

    def run(self, mems: list[Any]) -> None:
        """Submit the program with `mems` as its buffers (inputs, then outputs)."""
        with self.lock:  # the encoded words are shared: one replay binds and submits them at a time
            values: list[int] = []  # the timeline value each segment completes at
            # the work given before this call, which a copy of a value made before the call waits for
            start = {seg.device: seg.device.timeline_value for seg in self.segments} if self.waits_on_earlier else {}
            for seg in self.segments:
                seg.bind(mems)
                if seg.dep is not None:
                    dev, name, producer = seg.dep
                    seg.cb.patch_vals({name: start[dev] if producer is None else values[producer]})
                values.append(seg.device.submit(seg.cb, mems, self.inline).value)
        counters.kernel_count += self.n_kernels
        counters.copy_count += self.n_copies


def _output(spec: tuple, mems: list[Any]) -> UOp:
    """A new output buffer (its memory appended to `mems`); its shape and device are known, so set them."""
    device, size, dtype, allocator, nbytes = spec
    buf = new_buffer(device, size, dtype)
    mems.append(mem := allocator.alloc(nbytes))
    counters.alloc_count += 1
    buf.__dict__.update(memory=mem, shape=(size,), device=device)
    return buf


def _written(b: UOp, calls: list[UOp]) -> bool:
    return any(b in writes(c) for c in calls)


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


# ---- the public transform ----
class Jit:
    """A jitted function; see the module docstring. `trace_count` counts traces."""

    def __init__(self, f: Callable, static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
                 donate_argnums: int | Sequence[int] = ()) -> None:
        self.f = f
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        self.donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        self.name = getattr(f, "__qualname__", type(f).__qualname__)
        self.trace_count = 0
        self._cache: dict[Hashable, tuple[JitProgram, PyTreeDef]] = {}
        self._signatures: list[Signature] = []
        self._fast: dict[Hashable, tuple[JitProgram, PyTreeDef]] = {}  # signatures of all-Tensor positional calls
        self._fast_x64 = config.X64.value  # the x64 mode the fast signatures were traced in
        functools.update_wrapper(self, f, updated=())

    def __repr__(self) -> str:
        return f"<tgfx.jit {self.name}: {self.trace_count} trace(s)>"

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else functools.partial(self.__call__, obj)

    def _split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple[tuple[str, Hashable], ...]]:
        static = []
        dyn_args = []
        for i, a in enumerate(args):
            if i in self.static_argnums or i - len(args) in self.static_argnums:
                try:
                    hash(a)
                except TypeError as e:
                    raise TypeError(f"jit({self.name}): static argument {i} must be hashable, got "
                                    f"{type(a).__name__}") from e
                static.append((f"args[{i}]", a))
                dyn_args.append(None)
            else:
                dyn_args.append(a)
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                static.append((k, v))
            else:
                dyn_kwargs[k] = v
        return tuple(dyn_args), dyn_kwargs, tuple(static)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _traces or _grad_active:  # inside another trace or a grad: inline, like @function
            return Function(self.f, allow_implicit=True, name=self.name)(*args, **kwargs)
        if self._fast_x64 != config.X64.value:  # a trace made in the other x64 mode is not this one's
            self._fast.clear()
            self._fast_x64 = config.X64.value
        if not kwargs and not self.static_argnums:
            # the common call, only one-device Tensors by position: its key needs no pytree flattening
            try:
                hit = self._fast.get(_fast_key(args))
            except AttributeError:  # an argument that is not a Tensor
                hit = None
            if hit is not None:
                prog, out_tree = hit
                out = prog.replay(args)
                return self._run(prog, out_tree, list(args), args) if out is None else _as_tree(out_tree, out)
        dyn_args, dyn_kwargs, static = self._split(args, kwargs)
        leaves, treedef = tree_flatten((dyn_args, dyn_kwargs))
        specs = tuple(_leaf_spec(x, str(i)) for i, x in enumerate(leaves))
        tensors = [_leaf_tensor(x) for x, spec in zip(leaves, specs, strict=True) if spec[0] != "static"]
        aliases = _aliases(tensors, [spec[0] == "weak" for spec in specs if spec[0] != "static"])
        key = (treedef, specs, static, aliases, bool(config.X64))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._trace(args, kwargs, leaves, treedef, specs, static, key)
        if not kwargs and not static and aliases is None and \
                all(type(a) is Tensor and type(a.uop.device) is str for a in args):
            self._fast[_fast_key(args)] = hit
        prog, out_tree = hit
        return self._run(prog, out_tree, tensors, args)

    def _run(self, prog: JitProgram, out_tree: PyTreeDef, tensors: list[Tensor], args: tuple) -> Any:
        """Replay `prog` on the Tensor leaves `tensors` (any program: sharded, donating, lazy inputs)."""
        in_bufs = [buffer_view(t.uop) for t in tensors]
        if None in in_bufs:  # not yet computed, or sharded: one input per device part
            realize(*tensors)
            in_bufs = [buffer_view(p) for t in tensors for p in device_parts(t.uop)]
        for i in prog.donated_inputs:   # an interned scalar is shared: the program takes over a copy of it
            if is_interned(in_bufs[i]):
                in_bufs[i] = copy_buffer(in_bufs[i])
        mems = [buffer_memory(b, allocate=False) for b in in_bufs]
        results = prog.execute(mems, in_bufs)
        if prog.sharded:
            results = prog.unflatten(results)
        if prog.donated_inputs:
            owners = [t for t in tensors for _ in device_parts(t.uop)]  # the Tensor of each input
            for i in prog.donated_inputs:
                object.__setattr__(owners[i], "__class__", DonatedTensor)
        return _as_tree(out_tree, results)

    def _trace(self, args: tuple, kwargs: dict, leaves: list, treedef: PyTreeDef, specs: tuple, static: tuple,
               key: Hashable) -> tuple[JitProgram, PyTreeDef]:
        dyn_args, dyn_kwargs = tree_unflatten(treedef, leaves)
        sig = Signature(treedef, specs, static, tuple(_describe_paths(self.f, dyn_args, dyn_kwargs)), key[3],
                        key[4])
        if self._signatures and (LOG_RETRACE or config.DEBUG >= 1):
            print(f"jit({self.name}): retracing: {self._explain(sig)}")
        self._signatures.append(sig)
        self.trace_count += 1
        counters.trace_count += 1
        # stand-ins: each Tensor leaf becomes an input placeholder of its shape
        stand_ins, inputs, tensor_pos, real_inputs = [], [], [], []
        for i, (x, spec) in enumerate(zip(leaves, specs, strict=True)):
            if spec[0] != "static":
                t = _leaf_tensor(x).realize()
                views = []
                for part in device_parts(t.uop):  # one input per device part
                    buf = buffer_view(part)
                    if spec[0] == "weak" and buf in real_inputs:  # equal scalars share an interned buffer; the
                        buf = copy_buffer(buf)                     # trace gives each its own (see `_aliases`)
                    ph = placeholder(len(inputs), t.dtype, buf.arg[1], buf.arg[2])
                    inputs.append(ph)
                    real_inputs.append(buf)
                    tensor_pos.append(i)
                    views.append(ph if part.shape == (buf.arg[2],) else UOp(Ops.RESHAPE, t.dtype, (ph,), part.shape))
                stand_ins.append(Tensor(UOp(Ops.MULTI, t.dtype, tuple(views), t.uop.arg) if t.uop.op is Ops.MULTI
                                        else views[0]))
                if spec[0] == "weak":
                    weak(stand_ins[-1])
            else:
                stand_ins.append(x)
        dyn_args, dyn_kwargs = tree_unflatten(treedef, stand_ins)
        static_map = dict(static)
        call_args = tuple(static_map.get(f"args[{i}]", a) if a is None and f"args[{i}]" in static_map else a
                          for i, a in enumerate(dyn_args))
        call_kwargs = {**dyn_kwargs, **{k: v for k, v in static if not k.startswith("args[")}}
        out = Function(self.f, allow_implicit=True, name=self.name)(*call_args, **call_kwargs)
        out_leaves, out_tree = tree_flatten(out)
        roots = [UOp(Ops.CONTIGUOUS, t.dtype, (t.uop,)) for t in out_leaves]
        sink = merge_saved_loops(graph_rewrite(UOp(Ops.SINK, None, tuple(roots)), pm_inline, name="inline"))
        check_no_params(sink)
        sink, unflatten = lower_multi(sink)
        sink = strip_literals(sink)  # constants of a trace are literals of its program, as in JAX
        flat_shapes = [r.shape for r in sink.src]
        # Tensors captured from closures are constants of the trace: bound like inputs, but never patched
        captured = [u for u in walk(sink) if u.op is Ops.BUFFER and u.arg[0] >= 0]
        sink = substitute_outside_calls(sink, {b: placeholder(len(inputs) + i, b.dtype, b.arg[1], b.arg[2])
                                               for i, b in enumerate(captured)})
        template = ScheduleTemplate(list(sink.src), len(inputs) + len(captured))
        real_inputs += captured
        donated = self._donation(template, real_inputs, leaves, tensor_pos, tree_unflatten(treedef, leaves)[0])
        prog = JitProgram(template, real_inputs, len(inputs), flat_shapes, donated, unflatten)
        self._cache[key] = (prog, out_tree)
        return prog, out_tree

    def _donation(self, template: ScheduleTemplate, inputs: list[UOp], leaves: list, tensor_pos: list[int],
                  args: tuple) -> dict[int, int]:
        """Outputs that may be written into a donated input's buffer: same device, dtype and size, and the input is
        no longer read by the time the output is first written."""
        if not self.donate_argnums:
            return {}
        n_args = len(args)
        # which input indices come from donated positional arguments
        donated_inputs = []
        flat_counts = [len(tree_flatten(a)[0]) for a in args]
        starts = np.cumsum([0, *flat_counts])
        for k, pos in enumerate(tensor_pos):
            arg_i = int(np.searchsorted(starts, pos, side="right") - 1)
            if not isinstance(leaves[pos], Tensor) or is_interned(inputs[k]):   # interned buffers are shared
                continue
            if arg_i < n_args and (arg_i in self.donate_argnums or arg_i - n_args in self.donate_argnums):
                donated_inputs.append(k)
        calls = list(template.linear.src)
        results = [buffer_view(r) for r in template.results]
        out_bufs = list(dict.fromkeys(results))
        first, last = lifetimes(calls)      # inside a loop, a read comes again after the writes that follow it
        last_read = {b: last[b] for c in calls for b in reads(c)}
        first_write = {b: first[b] for c in calls for b in writes(c)}
        out: dict[int, int] = {}
        used = set()
        for oi, ob in enumerate(out_bufs):
            for k in donated_inputs:
                ph = placeholder(k, inputs[k].dtype, inputs[k].arg[1], inputs[k].arg[2])
                if k in used or ph.dtype != ob.dtype or ph.arg[1:] != ob.arg[1:]:
                    continue
                w = first_write.get(ob, 10**9)
                r = last_read.get(ph, -1)
                if r < w or (r == w and calls[w].src[0].op is Ops.SINK and
                             reads_in_place(calls[w].src[0], list(calls[w].src[1:]).index(ph))):
                    out[oi] = k
                    used.add(k)
                    break
        return out

    def _explain(self, sig: Signature) -> str:
        """What changed against the most similar earlier signature, argument by argument."""
        def similarity(s: Signature) -> tuple:
            fields = sum(x == y for a, b in zip(s.leaves, sig.leaves, strict=False) if a[0] == b[0] == "tensor"
                         for x, y in zip(a[1], b[1], strict=True))
            return (s.treedef == sig.treedef, sum(a == b for a, b in zip(s.leaves, sig.leaves, strict=False)),
                    fields, s.static == sig.static)
        prev = max(reversed(self._signatures), key=similarity)
        if prev.treedef != sig.treedef:
            return f"argument structure {prev.treedef} -> {sig.treedef}"
        diffs = [f"{name}: {_describe_change(a, b)}"
                 for name, a, b in zip(sig.names, prev.leaves, sig.leaves, strict=True) if a != b]
        names = _static_names(self.f)
        diffs += [f"static {names.get(k, k)}: {dict(prev.static).get(k)!r} -> {v!r}" for k, v in sig.static
                  if dict(prev.static).get(k) != v]
        if prev.aliases != sig.aliases:
            diffs.append(f"inputs sharing a buffer (index of each input's first sharer): {prev.aliases} -> "
                         f"{sig.aliases}")
        if prev.x64 != sig.x64:
            diffs.append(f"x64 mode {prev.x64} -> {sig.x64}")
        return "; ".join(diffs) or "same signature"

    def memory_report(self) -> dict[str, int]:
        """Bytes of intermediates of the latest compiled program, without and with memory planning."""
        if not self._cache:
            return {}
        prog = next(reversed(self._cache.values()))[0]
        return {"unplanned_bytes": prog.unplanned_bytes, "planned_bytes": prog.planned_bytes}


def _as_tree(out_tree: PyTreeDef, results: list[UOp]) -> Any:
    """The function's results as Tensors, in its output structure."""
    return Tensor(results[0]) if out_tree.is_leaf else tree_unflatten(out_tree, [Tensor(u) for u in results])


def _aliases(tensors: list[Tensor], scalars: list[bool]) -> tuple[int, ...] | None:
    """Which inputs share a buffer (the same Tensor twice, two views of one buffer), as the index of each input's
    first sharer; None when none do. Part of the signature: a program traced with two inputs in one buffer binds
    both from that buffer, so a call with distinct buffers needs its own trace. (A program traced with distinct
    inputs reads aliased ones correctly: every input slot is bound on its own.) Python scalar arguments (`scalars`)
    never alias: equal values share an interned buffer, but the trace copies it (`_trace`), so `f(x, 0, 0)` and
    `f(x, 3, 2)` are one trace, as in JAX."""
    first: dict[object, int] = {}
    pattern = []
    for t, scalar in zip(tensors, scalars, strict=True):
        for j, p in enumerate(device_parts(t.uop)):
            # a lazy value is its Tensor: a trace computes each argument into a buffer of its own (`tnp.zeros(8)`
            # twice is two buffers, as two jnp.zeros are), and one Tensor passed twice into one
            b = (id(t), j) if scalar else buffer_view(p) or (id(t), j)
            pattern.append(first.setdefault(b, len(pattern)))
    return None if len(first) == len(pattern) else tuple(pattern)


def _fast_key(args: tuple) -> tuple:
    return tuple([(type(a), a.uop.shape, a.uop.dtype, a.uop.device) for a in args])


def jit(f: Callable | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = ()) -> Any:
    """Compile `f` once per signature and replay it. Usable as `@jit`, `@jit(static_argnums=...)` or `jit(f)`.

    static_argnums / static_argnames: arguments that are Python values baked into the trace (each value traces
        once); they must be hashable.
    donate_argnums: Tensor arguments whose buffers may be reused for outputs; a donated Tensor is invalid after the
        call (using it raises).
    """
    if f is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums)
    return Jit(f, static_argnums, static_argnames, donate_argnums)


__all__ = ["jit", "Jit", "DonatedBufferError"]
