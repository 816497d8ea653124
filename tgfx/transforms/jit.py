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
import inspect
import sys
import threading
import weakref
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from tgfx import config, forksafe
from tgfx._realize import DonatedBufferError as DonatedBufferError
from tgfx._realize import DonatedTensor, donated_meanwhile, donations, realize, realize_readers
from tgfx.counters import counters
from tgfx.devices.hcq import DEFAULT_TIMEOUT_S, refuse_in_forked_child
from tgfx.dtypes import DType, cast_scalar, of_numpy
from tgfx.function import Function, _describe_paths
from tgfx.ir.control import n_bodies
from tgfx.ir.ops import GroupOp, Ops
from tgfx.ir.uop import UOp, prod
from tgfx.lowering import gc_paused, lower_multi, reads_in_place
from tgfx.lowering.constants import const_buffer, is_interned, strip_literals
from tgfx.lowering.control import donated_windows, lifetimes, merge_saved_loops, reads, updates_window, writes
from tgfx.lowering.execute import buffer_memory, copyin, copyout
from tgfx.lowering.inline import check_no_params, inline, substitute_outside_calls, walk
from tgfx.lowering.layout import buffer_view, is_onehot, new_buffer
from tgfx.lowering.lru import LRU
from tgfx.lowering.multi import device_parts
from tgfx.lowering.program import Program, recycled_holders
from tgfx.lowering.schedule import DEFAULT_DEVICE, ScheduleTemplate, placeholder
from tgfx.placement import describe, is_committed, mark, marked, move
from tgfx.tensor import Tensor, is_weak, to_tensor, weak, weak_like
from tgfx.trace_state import active, collecting_effects
from tgfx.transforms.jit_cache import jitted, last_run, track
from tgfx.transforms.jit_flat import MISSES, Flattener, compile_flatten
from tgfx.transforms.jit_replay import flatten_fast, replay, weak_dtype
from tgfx.tree import PyTreeDef, tree_flatten, tree_map, tree_unflatten
from tgfx.tree_compiled import unflattener

LOG_RETRACE = config.Flag("TGFX_LOG_RETRACE", 0)



LeafSpec = tuple[str, Any]  # ("tensor", (shape, dtype, device, layout, weak)), ("weak", ...) or ("static", value)


class Outputs(NamedTuple):
    """What a trace returned: the results' structure, and which are weakly typed (computed from Python scalars and
    weak values alone, as `jit(lambda x: x * 2)(3.0)`: JAX's results keep weak_type)."""
    tree: PyTreeDef
    weak: tuple[bool, ...]
    effects: bool = False   # the program's last result is the effect token of its host callbacks (not returned)
    # the results' tree of Tensors built from their nodes in one call (`unflattener`; None: `tree_unflatten`'s walk)
    build: Callable[[Sequence[UOp]], Any] | None = None


@dataclass
class Signature:
    treedef: PyTreeDef
    leaves: tuple[LeafSpec, ...]
    static: tuple[tuple[str, Hashable], ...]
    names: tuple[str, ...]  # a readable name per leaf, for retrace messages
    codegen: int = 0  # the flags it was traced and compiled under (`config.codegen`)

    @property
    def key(self) -> Hashable:
        return (self.treedef, self.leaves, self.static)


def _host_devices(leaves: list, name: str) -> str | tuple[str, ...] | None:
    """Where a call's uncommitted leaves go (host data, Python scalars, Tensors made without a device, as
    `tgfx/placement.py` says): replicated over the device tuple its sharded Tensor leaves lie on (JAX's uncommitted
    arguments: a learning rate, an Adam step count or a dropout key passed to a data-parallel step); host data where
    its one-device Tensor leaves lie when they all lie on one device (a step's scale beside parameters on CPU:1);
    None: the default device (beside a Tensor on another device, the trace moves them there, as an eager op does).

    A sharded leaf beside a leaf committed elsewhere (another device tuple, or one device) raises, as JAX's jit does;
    one-device leaves on several devices do not (a program over per-device parts, `tg.psum(parts)`, is tgfx's)."""
    devs = found = None
    for x in leaves:
        if isinstance(x, Tensor) and type(x.uop.device) is tuple:
            devs, found = x.uop.device, x
            break
    if devs is None:   # one-device leaves: where they all lie (a signature's devices say it: no committed bit)
        for x in leaves:
            if isinstance(x, Tensor):
                d = x.device
                if devs is not None and d != devs:
                    return None
                devs = d
        return None if devs == DEFAULT_DEVICE else devs
    for x in leaves:
        if isinstance(x, Tensor) and x.uop.device != devs and is_committed(x):
            raise ValueError(f"jit({name}): arguments are committed to different devices: {describe(found)} and "
                             f"{describe(x)}; put one where the other is with tg.device_put(x, device) or "
                             f"tg.shard(x, devices, axis) (an argument made without a device goes where the "
                             f"committed ones are)")
    return devs


def _moves(x: Any, devs: str | tuple[str, ...] | None) -> bool:
    """Whether leaf `x` is an uncommitted Tensor the call moves to the device tuple `devs` (`_host_devices`)."""
    return type(devs) is tuple and isinstance(x, Tensor) and x.uop.device != devs and not is_committed(x)


def _realize_sharded(leaves: list, devs: str | tuple[str, ...] | None) -> None:
    """The sharded Tensor leaves still lazy computed together, in one schedule: a sharded leaf's layout, part of the
    signature, is its computed value's (`_leaf_spec`), and realised one by one each was a program of its own, its
    kernels compiled one after another on this thread (the data-parallel MLP's zero momenta, `p * 0` for each of its
    six parameters: five programs before the step's own trace)."""
    sharded = [x for x in leaves if isinstance(x, Tensor) and isinstance(x.device, tuple) and not _moves(x, devs)]
    if len(sharded) > 1:
        realize(*sharded)


def _leaf_spec(x: Any, where: str, devs: str | tuple[str, ...] | None = None) -> LeafSpec:
    if isinstance(x, Tensor):
        # a sharded one's layout is part of the signature; a weakly typed one is traced weakly typed, as in JAX
        if _moves(x, devs):   # where it goes (replicated over a device tuple), as a Tensor placed there
            return ("tensor", (x.shape, x.dtype, devs, None, is_weak(x)))
        if isinstance(x.device, tuple):
            x.realize()
            return ("tensor", (x.shape, x.dtype, x.device, x.uop.arg, is_weak(x)))
        return ("tensor", (x.shape, x.dtype, x.device, None, is_weak(x)))
    if isinstance(x, (np.ndarray, np.generic)):  # what Tensor(x) would be: the same trace as that Tensor's
        return ("tensor", (x.shape, of_numpy(x.dtype), devs or DEFAULT_DEVICE, None, False))
    if type(x) in (int, float):
        return ("weak", (type(x), weak_dtype(x, where)))
    try:
        hash(x)
    except TypeError as e:
        raise TypeError(f"jit: argument {where} of type {type(x).__name__} is neither a Tensor nor hashable; pass "
                        f"arrays as Tensors and other values as hashable static arguments") from e
    if type(x).__hash__ is object.__hash__ and not callable(x) and not isinstance(x, ModuleType):
        # an object hashed by identity: keyed by it, a trace would be replayed after the object changed (a method's
        # self whose flag was flipped kept the first trace's branch), so JAX's error, as for any non-array argument
        raise TypeError(f"jit: argument {where} is a {type(x).__name__} object, neither an array nor a pytree; "
                        f"register its class as a pytree (tg.tree_util.register_pytree_node), or mark the argument "
                        f"static (static_argnums / static_argnames) with __hash__ and __eq__ over the values it reads")
    return ("static", (type(x), x))


def copy_buffer(buf: UOp) -> UOp:
    """A new BUFFER with the contents of `buf`."""
    out = new_buffer(buf.arg[1], buf.arg[2], buf.dtype)
    copyin(out, copyout(buf))
    return out


def _leaf_tensor(x: Any, devs: str | tuple[str, ...] | None = None) -> Tensor:
    """A dynamic leaf as a Tensor: a Python scalar is an interned one-element buffer (no copy for a value seen
    recently), host data is copied in; on `devs` (see `_host_devices`: a device, or each of a device tuple's,
    replicated) when given, else on the default device; an uncommitted Tensor is moved to a device tuple as well."""
    if isinstance(x, Tensor):
        return move(x, devs) if _moves(x, devs) else x
    if type(devs) is tuple:
        if type(x) in (int, float):
            d = weak_dtype(x, "")
            return Tensor(UOp(Ops.MULTI, d, tuple(UOp(Ops.RESHAPE, d, (const_buffer(d, cast_scalar(x, d), dev),), ())
                                                  for dev in devs), None))
        from tgfx.transforms.shard import shard
        return shard(np.asarray(x), devs)
    dev = devs or DEFAULT_DEVICE
    if type(x) in (int, float):
        d = weak_dtype(x, "")
        return Tensor(const_buffer(d, cast_scalar(x, d), dev)).reshape(())   # a scalar is 0-d, as in JAX
    return Tensor(x, device=dev)


def _fast_tensors(leaves: list, device: str) -> list[Tensor] | None:
    """The fast path's leaves (`flatten_fast`: Tensors on one device and Python scalars) as the general path's Tensors
    (`_leaf_tensor`), or None for an int out of range (the general path names the argument)."""
    out = []
    for x in leaves:
        if type(x) is Tensor:
            out.append(x)
            continue
        try:
            out.append(_leaf_tensor(x, device))
        except OverflowError:
            return None
    return out


def _describe_change(a: LeafSpec, b: LeafSpec) -> str:
    if a[0] == b[0] == "tensor":
        (sa, da, va, xa, wa), (sb, db, vb, xb, wb) = a[1], b[1]
        parts = []
        if sa != sb:
            parts.append(f"shape {sa} -> {sb}")
        if da != db:
            parts.append(f"dtype {getattr(da, 'name', da)} -> {getattr(db, 'name', db)}")
        if va != vb:
            parts.append(f"device {va} -> {vb}")
        elif xa != xb:
            parts.append(f"sharded axis {xa} -> {xb}")
        if wa != wb:
            parts.append(f"{'weakly' if wa else 'strongly'} typed -> {'weakly' if wb else 'strongly'} typed")
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


# ---- the public transform ----
# what a captured value may be computed by, once, when the trace is made: arithmetic, views and reductions of buffers
_CAPTURABLE = GroupOp.ALU | GroupOp.Movement | {Ops.REDUCE_AXIS, Ops.CAST, Ops.BITCAST, Ops.CONST, Ops.IOTA, Ops.BUFFER}
# ... when it is no bigger than the captured buffers it reads, or this many elements (a broadcast of captured values
# that a reduce consumes, n x n from n, stays in the program instead of being stored whole)
CAPTURED_MIN_ELEMENTS = 1 << 16


def compute_captured(sink: UOp) -> UOp:
    """`sink` with the values it computes from captured buffers alone computed now, once, and read as buffers.

    A Tensor a jitted function captures from a closure or a global may be a lazy eager value (`G = xs @ xs.T`, then
    `jit(step)` whose loss reads G): the trace holds its graph, and every call computed it again (two of seven
    kernels of JAX's kernel_lsq step). JAX's eager values are concrete when captured; so are these, computed where
    the program is made. What the function itself computes from captured values alone is a constant of the program
    as well (XLA folds such constants): it is computed once too, unless it is bigger than the buffers it reads and
    `CAPTURED_MIN_ELEMENTS` (an outer product that a reduce consumes stays in the program)."""
    nodes = walk(sink)
    if any(u.op is Ops.MULTI for u in nodes):
        return sink   # a sharded program: its constants belong to the devices of the values they meet
    const: dict[UOp, bool] = {}
    for u in nodes:
        const[u] = u.op in _CAPTURABLE and not (u.op is Ops.BUFFER and u.arg[0] < 0) and all(const[s] for s in u.src)
    todo: dict[UOp, None] = {}
    for u in nodes:
        if const[u]:
            continue
        for s in u.src[n_bodies(u):]:
            base = s
            while const[base] and base.op in GroupOp.Movement:
                base = base.src[0]
            if not const[base] or base.op in (Ops.BUFFER, Ops.CONST, Ops.IOTA) or not base.shape:
                continue
            read = [b for b in base.toposort() if b.op is Ops.BUFFER]
            # (a constant of no captured buffer, an arange, stays: the schedule reads a one-hot gather off it; so does
            # a one-hot mask of captured indices, `h[senders]` with senders captured: stored, the gather was a masked
            # sum over every node for each edge, 16 us for 256 edges of 64 nodes, not a load an element)
            if read and not is_onehot(base) and \
                    prod(base.shape) <= max(sum(b.arg[2] for b in read), CAPTURED_MIN_ELEMENTS):
                todo[base] = None
    if not todo:
        return sink
    from tgfx.lowering import realize as lower_realize
    return substitute_outside_calls(sink, lower_realize(list(todo)))


_live: weakref.WeakSet[Jit] = weakref.WeakSet()   # every jitted function still held (`clear_caches`)


class _Tracing:
    """The signatures being traced now, by jitted function: a thread whose first call finds its signature being
    traced by another waits for that trace instead of tracing it again, as JAX's jit does (eight threads of a pool
    making their first call at once traced, scheduled and compiled one function eight times)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[tuple[int, Hashable], threading.Event] = {}   # by (id of the Jit, signature)
        forksafe.track(self)

    def after_fork_in_child(self) -> None:
        # (the threads tracing stayed in the parent: their events would never be set)
        self.lock, self.now = threading.Lock(), {}

    def once(self, jit: Jit, key: Hashable, trace: Callable[[], tuple[Program, Outputs]]) -> tuple[Program, Outputs]:
        """`jit`'s program for signature `key`: traced here by `trace`, or the one another thread is tracing now.
        A wait lasts at most `DEFAULT_TIMEOUT_S`, then this thread traces too: a function whose trace waits for
        another thread's call of it with the same signature is slow, not stuck."""
        with self.lock:
            if (hit := jit._cache.get(key)) is not None:
                return hit
            running = self.now.get(at := (id(jit), key))
            if running is None:
                running = self.now[at] = threading.Event()
                mine = True
            else:
                mine = False
        if not mine:
            running.wait(DEFAULT_TIMEOUT_S)
            if (hit := jit._cache.get(key)) is not None:
                return hit
            with gc_paused():   # (its trace failed, or is waiting: this thread's own trace, error or program)
                return trace()
        try:
            with gc_paused():   # tracing and lowering allocate nodes by the ten thousand, and free them
                return trace()
        finally:
            with self.lock:
                del self.now[at]
            running.set()


_tracing = _Tracing()


def _transform_key(call: Callable) -> Hashable | None:
    """A transform and its options as a key: `call`, a `functools.partial` with lists and dicts in its options made
    tuples; None when an option is not hashable."""
    def freeze(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            return type(x), tuple(freeze(v) for v in x)
        if isinstance(x, dict):
            return dict, tuple((k, freeze(v)) for k, v in x.items())
        return x
    if not isinstance(call, functools.partial):
        return None
    key = (call.func, freeze(call.args), freeze(call.keywords))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def clear_caches() -> None:
    """`clear_cache` of every live jitted function."""
    for j in forksafe.members(_live):
        j.clear_cache()


def _returning_arrays(f: Callable) -> Callable:
    """`f` with the Python scalars and numpy values among its results made Tensors, as JAX's jit returns arrays:
    `jit(f, static_argnums=0)(10)` of an f returning its static argument is a weakly typed int32 Tensor (a trace's
    results must be Tensors, and a returned Python int was an error)."""
    def as_tensor(x: Any) -> Any:
        return to_tensor(x) if isinstance(x, (bool, int, float, complex, np.ndarray, np.generic)) else x

    @functools.wraps(f)
    def returning_arrays(*args: Any, **kwargs: Any) -> Any:
        return tree_map(as_tensor, f(*args, **kwargs))
    return returning_arrays


def _static_by_both(f: Callable, nums: tuple[int, ...], names: tuple[str, ...]) -> tuple[tuple[int, ...],
                                                                                   tuple[str, ...]]:
    """The static arguments by position and by name, each completed from the other through `f`'s signature, as JAX's
    jit does: `jit(g, static_argnames="n")(x, 20)` passes n by position and is static all the same (without this it
    was traced, and `range(n)` in g a concretization error). A function without a signature keeps what was given."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):   # (a builtin or a C function)
        return nums, names
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = {p.name: i for i, p in enumerate(positional) if p.kind is p.POSITIONAL_OR_KEYWORD}
    more_nums = tuple(by_name[n] for n in names if n in by_name and by_name[n] not in nums)
    more_names = tuple(p.name for i, p in enumerate(positional) if i in nums and p.name in by_name and
                       p.name not in names)
    return nums + more_nums, names + more_names


class Jit:
    """A jitted function; see the module docstring. `trace_count` counts traces."""

    def __init__(self, f: Callable, static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
                 donate_argnums: int | Sequence[int] = ()) -> None:
        self.f = f
        self.static_argnums, self.static_argnames = _static_by_both(
            f, (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums),
            (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames))
        self.donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        self.name = getattr(f, "__qualname__", type(f).__qualname__)
        self.trace_count = 0
        # programs by signature, the least recently run dropped past TGFX_JIT_CACHE_SIZE programs or TGFX_JIT_CACHE_MB
        # bytes (and all with this Jit): the programs' own stamps order them (`Program.last_run`), a call refreshes
        # no cache
        self._cache: LRU[Hashable, tuple[Program, Outputs]] = LRU(
            lambda: int(config.JIT_CACHE_SIZE), config.JIT_CACHE_MB.mib, lambda hit: hit[0].nbytes,
            self._evicted, last_run)
        self._signatures: deque[Signature] = deque(maxlen=max(int(config.JIT_CACHE_SIZE), 1))   # for retrace messages
        # `_cache`'s entries by the signatures of calls with only the fast path's kinds of leaves (`flatten_fast`)
        # (its keys begin with the code-changing flags the call traced under, `config.codegen`: threads in and out
        # of `enable_x64` or `Context(BEAM=2)` share them)
        # (with the `_cache` key of its program)
        self._fast: LRU[Hashable, tuple[Program, Outputs, str, Hashable]] = LRU(lambda: int(config.JIT_CACHE_SIZE),
                                                                                recency=last_run)
        self._transforms: dict[Hashable, Jit] = {}   # (`transformed`) by the transform and its options
        self._flat: Flattener | None = None   # the flatten compiled for the structure of the last calls (`jit_flat`)
        self._flat_tried = False   # whether one was compiled (or could not be) for a call's structure
        functools.update_wrapper(self, f, updated=())
        _live.add(self)

    def _evicted(self, key: Hashable, hit: tuple[Program, Outputs]) -> None:
        """`_cache` dropped signature `key`: its program goes from the fast path's entries and `jitted` too."""
        self._forget(key, hit[0])
        jitted.pop(id(hit[0]))

    def _forget(self, key: Hashable, prog: Program) -> None:
        """Drop program `prog` of signature `key` from this function's caches (a call of it traces again)."""
        if (hit := self._cache.peek(key)) is not None and hit[0] is prog:
            self._cache.pop(key)
        for k in [k for k, v in self._fast.items() if v[0] is prog]:
            self._fast.pop(k)

    def clear_cache(self) -> None:
        """Forget every trace and program: the next call traces again (`tg.clear_caches`)."""
        for hit in self._cache.values():
            jitted.pop(id(hit[0]))
        self._cache.clear()
        self._fast.clear()
        self._flat, self._flat_tried = None, False
        self._signatures.clear()
        self._transforms.clear()

    def __repr__(self) -> str:
        return f"<tgfx.jit {self.name}: {self.trace_count} trace(s)>"

    def transformed(self, call: Callable[[Callable, tuple, dict], Any]) -> Jit | None:
        """This function under a transform (`call(f, args, kwargs)`: a `functools.partial` of grad's, vmap's, ...
        with its options), jitted, and kept while this one is: `grad(jit(f))` called eagerly replays a program
        instead of tracing `f` again. None for options that are not hashable, with static or donated arguments (their
        positions are the untransformed function's) and under `tg.disable_jit`."""
        if self.static_argnums or self.static_argnames or self.donate_argnums or config.DISABLE_JIT.value:
            return None
        key = _transform_key(call)
        if key is None:
            return None
        if (hit := self._transforms.get(key)) is None:
            f = self.f

            @functools.wraps(f)   # argument names for messages
            def transformed(*args: Any, **kwargs: Any) -> Any:
                return call(f, args, kwargs)
            hit = Jit(transformed)
            who = call.keywords.get("who") or call.func.__name__.strip("_").removesuffix("_call")   # grad, vmap, ...
            hit.name = f"{who}({self.name})"
            hit = self._transforms.setdefault(key, hit)
        return hit

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
        if config.DISABLE_JIT.value:   # (`tg.disable_jit`)
            return self.f(*args, **kwargs)
        if active():  # inside another trace or a grad (in this thread): inline, like @function
            return Function(_returning_arrays(self.f), allow_implicit=True, name=self.name)(*args, **kwargs)
        refuse_in_forked_child()   # (before the locks a thread of the parent may have held at a fork: a program's)
        # (this thread's: a program traced in the other x64 mode, or compiled under other kernel options or for
        # another target, is not this call's)
        codegen = config.codegen()
        fast: list | None = None   # the call's leaves, when they all are of the fast path's kinds
        if not (self.static_argnums and any(-len(args) <= i < len(args) for i in self.static_argnums)) and \
                not (kwargs and self.static_argnames):
            # the common call: one-device Tensors and Python scalars in tuples, lists and dicts. Its key needs no
            # PyTreeDef, and a replay no Tensor per scalar
            hit = None
            # a call of the structure the last ones had: flattened by code compiled for it (`jit_flat`)
            if (flat := self._flat) is not None and (fast := flat(codegen, args, kwargs)) is not None:
                hit = self._fast.entries.get(fast_key := flat.key)
            if hit is None:
                fast, sig = [], [codegen, len(args)]
                for a in args:   # (the arguments' tuple, flattened here: one call fewer on every replay)
                    if not flatten_fast(a, fast, sig):
                        fast = None
                        break
                if fast is not None and kwargs and not flatten_fast(kwargs, fast, sig):
                    fast = None
                # (one lookup, no refresh: running the program stamps it the most recently run, of this function's
                # caches and of all jitted functions', `last_run`)
                if fast is not None and (hit := self._fast.entries.get(fast_key := tuple(sig))) is not None and \
                        (flat.misses >= MISSES if flat is not None else not self._flat_tried):
                    # (compiled once for a structure it takes; again when the calls' structure changed for good)
                    self._flat, self._flat_tried = compile_flatten(args, kwargs, codegen, fast_key, fast), True
            if hit is not None:
                if hit[0].donated:   # (an optimizer's step: the general path's run, without its flatten and specs)
                    tensors = _fast_tensors(fast, hit[2])
                    if tensors is not None:
                        return self._run(hit[0], hit[1], tensors, args)
                out = replay(hit[0], fast, hit[2]) if not hit[0].donated else None
                if out is not None:
                    if marked:   # (a value committed to the default device lives: see `_commit_results`)
                        _commit_results(fast, out)
                    return _as_tree(hit[1], out)
        dyn_args, dyn_kwargs, static = self._split(args, kwargs)
        leaves, treedef = tree_flatten((dyn_args, dyn_kwargs))
        devs = _host_devices(leaves, self.name)
        _realize_sharded(leaves, devs)
        names = None
        try:
            specs = tuple(_leaf_spec(x, str(i), devs) for i, x in enumerate(leaves))
        except TypeError:   # the argument named as the user wrote it (a leaf number above)
            names = _describe_paths(self.f, dyn_args, dyn_kwargs)
        if names is not None:
            specs = tuple(_leaf_spec(x, names[i], devs) for i, x in enumerate(leaves))
        tensors = [_leaf_tensor(x, devs) for x, spec in zip(leaves, specs, strict=True) if spec[0] != "static"]
        moved = type(devs) is tuple and any(_moves(x, devs) for x in leaves)
        # (which inputs share a buffer is no part of it: a program binds each input slot on its own, so one traced
        # with `zeros, zeros` for Adam's two states serves the distinct states of every later step, as JAX's)
        key = (treedef, specs, static, codegen)
        hit = self._cache.peek(key)   # (as the fast path's: its run is its refresh)
        if hit is None:
            hit = _tracing.once(self, key, lambda: self._trace(args, kwargs, leaves, treedef, specs, static, key,
                                                               tensors))
        prog, outs = hit
        # (the fast path makes a numpy leaf a Tensor on the default device before it knows where the others lie; a
        # call that moved an uncommitted Tensor has none: its key holds where each Tensor is, not where it goes)
        if fast is not None and not prog.sharded and not moved and \
                (devs is None or not any(type(x) is np.ndarray for x in leaves)) and \
                (cached := self._cache.peek(key)) is not None and cached[0] is prog:
            # (a program evicted meanwhile, by another thread's trace, is not made a fast entry again)
            self._fast[fast_key] = (prog, outs, devs or DEFAULT_DEVICE, key)
        return self._run(prog, outs, tensors, args)

    def _run(self, prog: Program, outs: Outputs, tensors: list[Tensor], args: tuple) -> Any:
        """Replay `prog` on the Tensor leaves `tensors` (any program: sharded, donating, lazy inputs)."""
        donated = donations.count   # (before the Tensors are read: see DonationLog)
        for t in tensors:
            if type(t) is DonatedTensor:   # donated by another thread since this call looked at its arguments
                t.shape   # noqa: B018 -- raises, naming the donation
        in_bufs = [buffer_view(t.uop) for t in tensors]
        if None in in_bufs:  # not yet computed, or sharded: one input per device part
            realize(*tensors)
            in_bufs = [buffer_view(p) for t in tensors for p in device_parts(t.uop)]
        mems = [buffer_memory(b, allocate=False) for b in in_bufs]
        if prog.donated_inputs:
            # the donated Tensors marked first: another thread reading one from now on fails at the Tensor
            owners = [t for t in tensors for _ in device_parts(t.uop)]  # the Tensor of each input
            for i in prog.donated_inputs:
                object.__setattr__(owners[i], "__class__", DonatedTensor)
            # lazy values read from a donated buffer are computed before it is taken over; views of it other Tensors
            # hold (`x[3]`, `x.reshape(2, 4)` beside x) keep reading it
            viewed = realize_readers({in_bufs[i] for i in prog.donated_inputs}, owners)
            passed = Counter(map(id, in_bufs))   # (by id: a reference to a buffer is a holder of it, `_held_elsewhere`)
            recycled: list[tuple[dict[int, int], dict[int, set[UOp]]]] = []   # made when first needed
        for i in prog.donated_inputs:   # shared memory (an interned scalar, an all-reduce's replicas, a range another
            # Tensor views, a buffer passed as another argument too, which the program may still read after writing
            # a result here), a buffer another Tensor views or a jitted program captured: the program takes over a
            # copy of it
            if is_interned(in_bufs[i]) or mems[i].shared or passed[id(in_bufs[i])] > 1 or in_bufs[i] in viewed \
                    or in_bufs[i] in donations.captured or _held_elsewhere(in_bufs[i], owners[i], recycled):
                passed[id(in_bufs[i])] -= 1
                in_bufs[i] = copy_buffer(in_bufs[i])
                mems[i] = buffer_memory(in_bufs[i], allocate=False)
        if prog.donated_inputs:
            # the buffers about to be written logged before anything is queued: another thread's read of one, queued
            # after this call's writes, can tell (DonationLog)
            donations.record([in_bufs[i] for i in prog.donated_inputs])
            donated = donations.count   # (this call's own donations are no reason to fail it)
        results = prog.execute(mems, in_bufs)
        if donations.count != donated and donations.since(donated, in_bufs):
            raise donated_meanwhile(f"jit({self.name})")
        if prog.sharded:
            results = prog.unflatten(results)
        elif marked:   # (as the fast path's replay)
            _commit_results(tensors, results)
        return _as_tree(outs, results)

    def _trace(self, args: tuple, kwargs: dict, leaves: list, treedef: PyTreeDef, specs: tuple, static: tuple,
               key: Hashable, leaf_tensors: list[Tensor]) -> tuple[Program, Outputs]:
        """Trace and compile the call's signature; `leaf_tensors`: its dynamic leaves as Tensors, as `__call__` made
        them (`_leaf_tensor`: host data copied in and uncommitted Tensors moved once, not again here)."""
        dyn_args, dyn_kwargs = tree_unflatten(treedef, leaves)
        sig = Signature(treedef, specs, static, tuple(_describe_paths(self.f, dyn_args, dyn_kwargs)), key[3])
        if self._signatures and (LOG_RETRACE or config.DEBUG >= 1):
            print(f"jit({self.name}): retracing: {self._explain(sig)}")
        with _tracing.lock:   # (threads tracing other signatures at once: no count lost)
            self._signatures.append(sig)
            self.trace_count += 1
            counters.trace_count += 1
        # the arguments still lazy computed first, all in one schedule: an optimiser's zero moments for each parameter
        # shape, realised one by one, were a program each, their kernels compiled one after another on this thread
        # (realnvp's first call: four, 10-20 ms each); together they are one program, compiled side by side
        dynamic = iter(leaf_tensors)
        tensors = {i: next(dynamic) for i, spec in enumerate(specs) if spec[0] != "static"}
        realize(*tensors.values())
        # stand-ins: each Tensor leaf becomes an input placeholder of its shape
        stand_ins, inputs, tensor_pos, real_inputs = [], [], [], []
        for i, (x, spec) in enumerate(zip(leaves, specs, strict=True)):
            if spec[0] != "static":
                t = tensors[i]
                views = []
                for part in device_parts(t.uop):  # one input per device part
                    buf = buffer_view(part)
                    if spec[0] == "weak" and buf in real_inputs:  # equal scalars share an interned buffer; the
                        buf = copy_buffer(buf)                     # trace gives each its own
                    ph = placeholder(len(inputs), t.dtype, buf.arg[1], buf.arg[2])
                    inputs.append(ph)
                    real_inputs.append(buf)
                    tensor_pos.append(i)
                    views.append(ph if part.shape == (buf.arg[2],) else UOp(Ops.RESHAPE, t.dtype, (ph,), part.shape))
                stand_ins.append(Tensor(UOp(Ops.MULTI, t.dtype, tuple(views), t.uop.arg) if t.uop.op is Ops.MULTI
                                        else views[0]))
                if spec[0] == "weak" or spec[1][-1] is True:   # a Python scalar, or a weakly typed Tensor
                    weak(stand_ins[-1])
            else:
                stand_ins.append(x)
        dyn_args, dyn_kwargs = tree_unflatten(treedef, stand_ins)
        static_map = dict(static)
        call_args = tuple(static_map.get(f"args[{i}]", a) if a is None and f"args[{i}]" in static_map else a
                          for i, a in enumerate(dyn_args))
        call_kwargs = {**dyn_kwargs, **{k: v for k, v in static if not k.startswith("args[")}}
        with collecting_effects() as effects:
            out = Function(_returning_arrays(self.f), allow_implicit=True, name=self.name)(*call_args, **call_kwargs)
        out_leaves, out_tree = tree_flatten(out)
        roots = [UOp(Ops.CONTIGUOUS, t.dtype, (t.uop,)) for t in out_leaves]
        if effects.token is not None:   # its host callbacks' last effect token: one more root, so they run every call
            roots.append(UOp(Ops.CONTIGUOUS, effects.token.dtype, (effects.token,)))
        sink = merge_saved_loops(inline(UOp(Ops.SINK, None, tuple(roots))))
        check_no_params(sink)
        sink = compute_captured(sink)
        sink, unflatten = lower_multi(sink)
        sink = strip_literals(sink)  # constants of a trace are literals of its program, as in JAX
        # Tensors captured from closures are constants of the trace: bound like inputs, but never patched
        captured = [u for u in walk(sink) if u.op is Ops.BUFFER and u.arg[0] >= 0]
        donations.captured.update(captured)
        sink = substitute_outside_calls(sink, {b: placeholder(len(inputs) + i, b.dtype, b.arg[1], b.arg[2])
                                               for i, b in enumerate(captured)})
        template = ScheduleTemplate(list(sink.src), len(inputs) + len(captured))
        real_inputs += captured
        donated = self._donation(template, real_inputs, leaves, tensor_pos, tree_unflatten(treedef, leaves)[0])
        if donated:   # an update of a window of a donated input into the result taking its memory: the window alone
            outs = list(dict.fromkeys(buffer_view(r) for r in template.results))
            template.linear = donated_windows(template.linear, {outs[o]: placeholder(
                k, real_inputs[k].dtype, real_inputs[k].arg[1], real_inputs[k].arg[2]) for o, k in donated.items()})
        prog = Program(template, real_inputs, len(inputs), donated, unflatten, reuse_results=True)
        returned = Outputs(out_tree, tuple(is_weak(t) for t in out_leaves), effects.token is not None,
                           unflattener(out_tree, Tensor))
        self._cache[key] = (prog, returned)
        track(self, key, prog)
        return prog, returned

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
                             (reads_in_place(calls[w].src[0], list(calls[w].src[1:]).index(ph),
                                             list(calls[w].src[1:]).index(ob)) or
                              (updates_window(calls[w], ph, ob) and sum(ob in writes(c) for c in calls) == 1))):
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
                    fields, s.static == sig.static, sum(a == b for a, b in zip(config.codegen_values(s.codegen),
                                                                               config.codegen_values(sig.codegen),
                                                                               strict=True)))
        prev = max(reversed(self._signatures), key=similarity)
        if prev.treedef != sig.treedef:
            return f"argument structure {prev.treedef} -> {sig.treedef}"
        diffs = [f"{name}: {_describe_change(a, b)}"
                 for name, a, b in zip(sig.names, prev.leaves, sig.leaves, strict=True) if a != b]
        names = _static_names(self.f)
        diffs += [f"static {names.get(k, k)}: {dict(prev.static).get(k)!r} -> {v!r}" for k, v in sig.static
                  if dict(prev.static).get(k) != v]
        flags = zip(config.CODEGEN, config.codegen_values(prev.codegen), config.codegen_values(sig.codegen),
                    strict=True)
        diffs += [f"flag {name} {a!r} -> {b!r}" for name, a, b in flags if a != b]
        return "; ".join(diffs) or "same signature"

    def memory_report(self) -> dict[str, int]:
        """Bytes of intermediates of the latest compiled program, without and with memory planning."""
        if not self._cache:
            return {}
        prog = next(reversed(self._cache.values()))[0]
        return {"unplanned_bytes": prog.unplanned_bytes, "planned_bytes": prog.planned_bytes}


def _held_elsewhere(buf: UOp, owner: Tensor, recycled: list) -> bool:
    """Whether something holds the donated `owner`'s BUFFER `buf` besides it, the call's argument list and the
    programs' recycled results: another Tensor of the same node (`tnp.array(x)`, `x.reshape(3, 4).reshape(12)` of
    a 1-D x fold to x's node), which must keep reading x's value. Counted by references, as `Program._reuse` does;
    one too many (a holder this does not know) costs a copy, never a wrong value. `recycled`: the call's memo of
    `recycled_holders` (one walk of the programs' pools for all its donated inputs, made when first needed)."""
    # (first: no local of this function may hold `buf` yet) the argument list's slot, this function's argument,
    # getrefcount's, and the owner's uop (or the reshape of `buf` it is)
    refs = sys.getrefcount(buf) - 4
    if refs <= 0:
        return False
    if not recycled:
        recycled.append(recycled_holders())
    direct, reshapes = recycled[0]
    return refs > direct.get(id(buf), 0) + len(reshapes.get(id(buf), set()) - {owner.uop})


def _as_tree(outs: Outputs, results: list[UOp]) -> Any:
    """The function's results as Tensors, in its output structure; weakly typed where the trace's were."""
    if outs.effects:
        results = results[:-1]
    if True not in outs.weak:   # (the common case, spelled out: this runs on every replay)
        if outs.build is not None:
            return outs.build(results)
        return Tensor(results[0]) if outs.tree.is_leaf else tree_unflatten(outs.tree, [Tensor(u) for u in results])
    ts = weak_like([Tensor(u) for u in results], outs.weak)
    return ts[0] if outs.tree.is_leaf else tree_unflatten(outs.tree, ts)


def _commit_results(inputs: list, results: list[UOp]) -> None:
    """A one-device program's `results` committed to the default device where one of its `inputs` was
    (`tgfx/placement.py`: a sharded program's are committed by construction). Only called while a value committed to
    the default device lives."""
    for t in inputs:
        if type(t) is Tensor and t.uop.device == DEFAULT_DEVICE and is_committed(t):
            held = {id(t.uop) for t in inputs if type(t) is Tensor}   # (an input returned as it is stays as it is)
            for u in results:
                if u.device == DEFAULT_DEVICE and id(u) not in held:
                    mark(u)
            return


class ShardedJit(Jit):
    """A jitted function with `in_shardings` / `out_shardings` (`tgfx/sharding.py`): each call first lays its
    positional arguments out as `in_shardings` says (host data and uncommitted Tensors are placed; a committed Tensor
    laid out otherwise is an error, as in JAX), and the traced function ends in `with_sharding_constraint` of its
    results to `out_shardings`. The program itself is `Jit`'s, keyed on the arguments' layouts as any call's is."""

    def __init__(self, f: Callable, static_argnums: int | Sequence[int], static_argnames: str | Sequence[str],
                 donate_argnums: int | Sequence[int], in_shardings: Any, out_shardings: Any) -> None:
        body = f
        if out_shardings is not None:
            from tgfx._lax_more import with_sharding_constraint

            @functools.wraps(f)
            def body(*args: Any, **kwargs: Any) -> Any:
                return with_sharding_constraint(f(*args, **kwargs), out_shardings)
        super().__init__(body, static_argnums, static_argnames, donate_argnums)
        self.in_shardings, self.out_shardings = in_shardings, out_shardings

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.in_shardings is not None:
            args = self._place(args)
        return super().__call__(*args, **kwargs)

    def _place(self, args: tuple) -> tuple:
        from tgfx.sharding import PartitionSpec, layout
        from tgfx.transforms.shard import put, sharding, shardings_per_leaf
        from tgfx.tree import keystr, tree_flatten_with_path
        dyn = [i for i in range(len(args)) if i not in self.static_argnums and i - len(args) not in self.static_argnums]
        shardings = self.in_shardings
        if isinstance(shardings, list):   # (JAX reads a list at the top as the tuple a user meant)
            shardings = tuple(shardings)
        if isinstance(shardings, tuple) and not isinstance(shardings, PartitionSpec) and len(shardings) != len(dyn):
            raise ValueError(f"jit({self.name}): in_shardings has {len(shardings)} entries, but the call has "
                             f"{len(dyn)} positional (non-static) arguments; give one sharding per argument, or one "
                             f"for all")
        dyn_args = tuple(args[i] for i in dyn)
        flat, treedef = tree_flatten_with_path(dyn_args)
        per_leaf = shardings_per_leaf(shardings, dyn_args)
        placed = []
        for (path, leaf), s in zip(flat, per_leaf, strict=True):
            what = f"jit({self.name}): args{keystr(path)}"
            if s is not None and isinstance(leaf, Tensor) and not active() and is_committed(leaf):
                want = layout(s, leaf.shape, what)
                have = sharding(leaf) or (leaf.device, None)
                if want != have:
                    raise ValueError(f"{what}: in_shardings lays it out as {s!r} (on {want[0]}, split along axis "
                                     f"{want[1]}), but the argument is committed to {describe(leaf)}; move it with "
                                     f"tg.device_put(x, sharding) first, or pass it uncommitted")
            placed.append(leaf if s is None else put(leaf, s, what))
        out = list(args)
        for i, a in zip(dyn, tree_unflatten(treedef, placed), strict=True):
            out[i] = a
        return tuple(out)


def jit(f: Callable | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (), in_shardings: Any = None,
        out_shardings: Any = None) -> Any:
    """Compile `f` once per signature and replay it. Usable as `@jit`, `@jit(static_argnums=...)` or `jit(f)`.

    static_argnums / static_argnames: arguments that are Python values baked into the trace (each value traces
        once); they must be hashable.
    donate_argnums: Tensor arguments whose buffers may be reused for outputs; a donated Tensor is invalid after the
        call (using it raises).
    in_shardings / out_shardings: JAX's shardings (`tg.sharding.NamedSharding`, ...; one for all, or a pytree prefix
        of the positional arguments or of the results; None: as it comes). Arguments are placed before the call
        (a committed one laid out otherwise raises a ValueError naming it), results constrained in the trace.

    >>> step = tg.jit(step, in_shardings=(replicated, replicated, NamedSharding(mesh, P("data"))))
    """
    if f is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, in_shardings=in_shardings, out_shardings=out_shardings)
    if in_shardings is not None or out_shardings is not None:
        return ShardedJit(f, static_argnums, static_argnames, donate_argnums, in_shardings, out_shardings)
    return Jit(f, static_argnums, static_argnames, donate_argnums)


__all__ = ["jit", "Jit", "ShardedJit", "DonatedBufferError"]
