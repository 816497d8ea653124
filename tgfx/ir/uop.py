"""The one node type: an immutable, hash-consed `UOp(op, dtype, src, arg, tag)`.

Building the same `(op, dtype, src, arg, tag)` twice returns the same object, so `is`/`==` is structural
equality and graphs share subgraphs. `key` is a content hash that is stable across processes.
Shape, device and value bounds are derived once and cached.
"""
from __future__ import annotations

import functools
import hashlib
import math
import weakref
from collections.abc import Callable
from typing import Any

from tgfx import config
from tgfx.dtypes import DType, dtypes
from tgfx.ir import blocks
from tgfx.ir.ops import GroupOp, Ops

Shape = tuple[int, ...]


def prod(xs: Any) -> int:
    return math.prod(xs)


# (op, dtype, src, arg, tag) -> a weak reference to the live UOp; a UOp removes its entry when it dies (__del__)
_cache: dict[tuple, weakref.ref] = {}
# id of a live BUFFER node -> the device memory the runtime backs it with (tgfx/lowering/execute.py), as tinygrad's
# `buffers`: a weak map, its entry dropped when the node dies (__del__), so the memory goes with the last user of the
# node. The IR never reads it: nodes stay immutable and shareable across threads.
buffers: dict[int, Any] = {}
_BUFFER = Ops.BUFFER
# index constants kept alive by `UOp.const` (the most recently asked for), so that asking again is one cache lookup
INDEX_CONSTS = 4096


def sources_first(u: UOp, name: str, fn: Callable[[UOp], object]) -> None:
    """Call `fn` (which caches its value as `name` in a node's __dict__) on every node under `u` that lacks it, sources
    before users, with an explicit stack: then `fn(u)` reads its sources' values without recursing, however deep the
    graph (a lazy chain of a thousand eager ops, a kernel of one)."""
    for s in u.src:
        if name not in s.__dict__:
            break
    else:
        return   # the common case: every source has it
    stack = [s for s in u.src if name not in s.__dict__]
    while stack:
        x = stack[-1]
        missing = [s for s in x.src if name not in s.__dict__]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        if name not in x.__dict__:
            fn(x)


class cached:   # noqa: N801 (a decorator, as functools.cached_property)
    """`functools.cached_property` without its lock (Python 3.11 takes one lock per property, for every instance, on
    each first read: a new node's shape and device cost 3.5 us, an eager op several such nodes). The value is a pure
    function of the immutable node: two threads computing it at once store the same value."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func, self.name = func, func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)
        return value


_NEGATIVE_ZERO = ("-0.0",)


def arg_key(arg: Any) -> Any:
    """`arg` as a dict key that tells values apart: -0.0 == 0.0 and they hash alike, but a CONST of -0.0 is another
    value (`x * -0.0` is -0.0 for x > 0), so it is keyed by a stand-in; a complex one by its parts' keys (-0-0j is
    0j to Python). Every cache keyed by a node's arg uses this."""
    if type(arg) is complex:
        return ("complex", arg_key(arg.real), arg_key(arg.imag))
    return _NEGATIVE_ZERO if type(arg) is float and arg == 0.0 and math.copysign(1.0, arg) < 0 else arg


class UOpMeta(type):
    def __call__(cls, op: Ops, dtype: DType | None = None, src: tuple = (), arg: Any = None,
                 tag: Any = None) -> UOp:
        k = (op, dtype, src, arg_key(arg) if type(arg) is float and arg == 0.0 or type(arg) is complex else arg, tag)
        try:
            ref = _cache.get(k)
        except TypeError as e:
            raise TypeError(f"UOp arg must be hashable, got {arg!r} for {op}") from e
        if ref is not None and (hit := ref()) is not None:
            return hit
        u = object.__new__(cls)
        if op is _BUFFER:   # (no live node has this id: memory filed under it is a dead node's, see `UOp.__del__`)
            buffers.pop(id(u), None)
        u.op, u.dtype, u.src, u.arg, u.tag, u._key = op, dtype, src, arg, tag, k
        _cache[k] = weakref.ref(u)
        if config.SPEC.value:
            from tgfx.ir.spec import check_uop
            check_uop(u)
        return u


class UOp(metaclass=UOpMeta):
    __slots__ = ("op", "dtype", "src", "arg", "tag", "_key", "__weakref__", "__dict__")

    op: Ops
    dtype: DType | None
    src: tuple[UOp, ...]
    arg: Any
    tag: Any

    def __del__(self, _cache: dict[tuple, weakref.ref] = _cache, _buffers: dict[int, Any] = buffers,
                _BUFFER: Ops = Ops.BUFFER) -> None:
        # freed by its reference count, a UOp is finalised before its weak references are cleared: the entry still
        # refers to it. Freed by the cyclic collector (a node in a reference cycle), its weak references are cleared
        # first: an entry whose node is gone is this one's too, and left behind its key would hold the sources alive
        # for the rest of the process (spectral's first call: 204 such keys held 19k index-level nodes). The cache is
        # bound here so that it is still reachable while the interpreter tears the module down. Its key is the one it
        # was made with, kept (rebuilding it cost half of a deletion, and eager code deletes every node it builds).
        # A signal's handler may run at any bytecode of this method (a KeyboardInterrupt raised here is printed and
        # dropped, the rest of it skipped): a dead BUFFER's memory is then still filed under its id, which the next
        # BUFFER node made at that address would have been given (a Ctrl-C in an eager loop, then `tg.asarray` of 16
        # KiB: 'copyin of 16384 B does not fit in <Buffer CPU:0 4 B>'), so a new BUFFER node drops what is filed
        # under its id (UOpMeta). A left cache entry only keeps its key's sources until that key is made again
        k = self._key
        ref = _cache.get(k)
        if ref is not None and ((hit := ref()) is self or hit is None):
            del _cache[k]
        if self.op is _BUFFER:
            _buffers.pop(id(self), None)

    # identity is structure: hash-consing makes `is` the equality, so object's own (C) __eq__/__hash__ are right

    def __reduce__(self) -> tuple:
        return (UOp, (self.op, self.dtype, self.src, self.arg, self.tag))

    def __repr__(self) -> str:
        return pretty(self)

    def replace(self, **kw: Any) -> UOp:
        d = {"op": self.op, "dtype": self.dtype, "src": self.src, "arg": self.arg, "tag": self.tag}
        d.update(kw)
        return UOp(d["op"], d["dtype"], tuple(d["src"]), d["arg"], d["tag"])

    # ---- derived, cached properties ----
    @cached
    def key(self) -> str:
        """A content hash of the whole subgraph, the same in every process."""
        sources_first(self, "key", lambda u: u.key)
        h = hashlib.sha256()
        h.update(f"{self.op.name}|{self.dtype!r}|{_stable_repr(self.arg)}|{_stable_repr(self.tag)}".encode())
        for s in self.src:
            h.update(s.key.encode())
        return h.hexdigest()

    @cached
    def shape(self) -> Shape | None:
        try:
            return _shape(self)
        except RecursionError:   # deeper than the interpreter's stack (a lazy chain of 1,000 ops, the new nodes of a
            # schedule's abstraction of one): the sources' shapes first, iteratively; nothing to pay when it is not
            sources_first(self, "shape", lambda u: u.shape)
            return _shape(self)

    @cached
    def device(self) -> str | tuple[str, ...] | None:
        try:
            return self._device()
        except RecursionError:   # as `shape`: the sources' devices first, iteratively, only when the graph is that deep
            sources_first(self, "device", lambda u: u.device)
            return self._device()

    def _device(self) -> str | tuple[str, ...] | None:
        if self.op is Ops.BUFFER:
            return self.arg[1]
        if self.op is Ops.PARAM:
            return self.arg[2]
        if self.op is Ops.COPY:  # arg: a device, or (device tuple, axis) to shard across
            return self.arg if isinstance(self.arg, str) else self.arg[0]
        if self.op in (Ops.MULTI, Ops.ALLREDUCE):
            return tuple(s.device for s in self.src)
        if self.op is Ops.MSELECT:
            return self.src[0].device[self.arg[0]]
        if self.op is Ops.GETTUPLE:
            return _call_result(self.src[0], self.arg, "device")
        for s in self.src:
            if s.device is not None:
                return s.device
        return None

    @property
    def ndim(self) -> int:
        assert self.shape is not None, f"{self.op} has no shape"
        return len(self.shape)

    @property
    def size(self) -> int:
        assert self.shape is not None, f"{self.op} has no shape"
        return prod(self.shape)

    def toposort(self, children: Callable[[UOp], tuple[UOp, ...]] | None = None) -> list[UOp]:
        """Every node of the graph, sources before users (iterative: deep graphs are fine). `children(u)` picks
        which sources to enter (default: all). A SINK's whole order is kept on it (the lowering asks a kernel's sink
        for its nodes many times; other nodes are not cached: a chain would keep n orders of up to n nodes). The sink
        itself, last, is left out of what it keeps: a node holding itself is freed only by the cyclic collector, so a
        kernel's whole lowered graph outlived its compile until the next collection."""
        if children is None and self.op is Ops.SINK:
            if (hit := self.__dict__.get("_order")) is None:
                order = self._toposort(None)
                self.__dict__["_order"] = tuple(order[:-1])
                return order
            return [*hit, self]
        return self._toposort(children)

    def _toposort(self, children: Callable[[UOp], tuple[UOp, ...]] | None) -> list[UOp]:
        out: list[UOp] = []
        seen: set[UOp] = set()
        append, add = out.append, seen.add
        stack: list[UOp | None] = [self]
        pop, push = stack.pop, stack.append
        while stack:
            u = pop()
            if u is None:   # the mark pushed above a node's sources: they are done, the node below it is next
                append(pop())
                continue
            if u in seen:
                continue
            add(u)
            push(u)
            push(None)
            for s in reversed(u.src if children is None else children(u)):
                if s not in seen:
                    push(s)
        return out

    def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
        """This graph with every node in `mapping` replaced (sources rebuilt bottom up)."""
        new: dict[UOp, UOp] = {}
        for u in self.toposort():
            if u in mapping:
                new[u] = mapping[u]
                continue
            src = tuple(new[s] for s in u.src)
            new[u] = u if src == u.src else u.replace(src=src)
        return new[self]

    @cached
    def _bounds(self) -> tuple[Any, Any]:
        return _bounds(self)

    @property
    def vmin(self) -> Any:
        return self._bounds[0]

    @property
    def vmax(self) -> Any:
        return self._bounds[1]

    # ---- builders ----
    @staticmethod
    def const(dtype: DType, value: Any) -> UOp:
        if dtype is dtypes.index and type(value) is int:
            return _index_const(value)
        from tgfx.dtypes import cast_scalar
        return UOp(Ops.CONST, dtype, (), cast_scalar(value, dtype))

    def const_like(self, value: Any) -> UOp:
        return UOp.const(self.dtype.scalar, value)

    def alu(self, op: Ops, *src: UOp) -> UOp:
        out_dtype = dtypes.bool if op in GroupOp.Comparison else (src[-1].dtype if op is Ops.WHERE else self.dtype)
        return UOp(op, out_dtype, (self, *src))

    def _ufix(self, x: UOp | int | float | bool) -> UOp:
        return x if isinstance(x, UOp) else self.const_like(x)

    def __add__(self, x: UOp | int) -> UOp: return self.alu(Ops.ADD, self._ufix(x))  # noqa: E704
    def __radd__(self, x: int) -> UOp: return self._ufix(x).alu(Ops.ADD, self)  # noqa: E704
    def __mul__(self, x: UOp | int) -> UOp: return self.alu(Ops.MUL, self._ufix(x))  # noqa: E704
    def __rmul__(self, x: int) -> UOp: return self._ufix(x).alu(Ops.MUL, self)  # noqa: E704
    def __neg__(self) -> UOp: return self.alu(Ops.NEG)  # noqa: E704
    def __sub__(self, x: UOp | int) -> UOp: return self + (-self._ufix(x))  # noqa: E704
    def __floordiv__(self, x: UOp | int) -> UOp: return self.alu(Ops.IDIV, self._ufix(x))  # noqa: E704
    def __mod__(self, x: UOp | int) -> UOp: return self.alu(Ops.MOD, self._ufix(x))  # noqa: E704
    def __lt__(self, x: UOp | int) -> UOp: return self.alu(Ops.CMPLT, self._ufix(x))  # noqa: E704
    def __and__(self, x: UOp | bool) -> UOp: return self.alu(Ops.AND, self._ufix(x))  # noqa: E704
    def ne(self, x: UOp | int) -> UOp: return self.alu(Ops.CMPNE, self._ufix(x))  # noqa: E704
    def eq(self, x: UOp | int) -> UOp: return self.alu(Ops.CMPEQ, self._ufix(x))  # noqa: E704
    def maximum(self, x: UOp | int) -> UOp: return self.alu(Ops.MAX, self._ufix(x))  # noqa: E704
    def where(self, a: UOp | int, b: UOp | int) -> UOp:  # noqa: E704
        a = a if isinstance(a, UOp) else b.const_like(a) if isinstance(b, UOp) else UOp.const(dtypes.index, a)
        return self.alu(Ops.WHERE, a, a._ufix(b))
    def cast(self, dtype: DType) -> UOp: return self if self.dtype == dtype else UOp(Ops.CAST, dtype, (self,))  # noqa: E704, E301


# args whose `repr` is their stable text (no float, nothing callable): most args are None or tuples of these
_PLAIN_ARGS = frozenset({int, str, bool, type(None)})


def _stable_repr(x: Any) -> str:
    """`x` as text that is the same in every process (a node's part of `UOp.key`). Plain values and plain tuples
    first, by their exact type (each node of a graph asks this of its arg and tag: the general checks below cost 2.3 us
    for None and 17 us for a shape of seven, half of a node's key); anything else, a tuple's subclass included, by the
    general rules, so the text is the one those give."""
    t = type(x)
    if t in _PLAIN_ARGS:
        return repr(x)
    if t is tuple:
        return "(" + ",".join(map(_stable_repr, x)) + ")"
    if isinstance(x, UOp):
        return x.key
    if isinstance(x, (tuple, list)):
        return "(" + ",".join(_stable_repr(y) for y in x) + ")"
    if isinstance(x, float):
        return repr(x) if not math.isnan(x) else "nan"
    if callable(x) and hasattr(x, "__qualname__"):
        return f"{getattr(x, '__module__', '')}.{x.__qualname__}"
    return repr(x)


# ---- shape rules: one per op group ----
def _shape(u: UOp) -> Shape | None:
    op, src, arg = u.op, u.src, u.arg
    if op in GroupOp.Elementwise:   # (first: most nodes a program builds are)
        for s in (src[1:] if op is Ops.WHERE else src):
            if s.shape is not None:
                return s.shape
        return None
    if op is Ops.RESHAPE or op is Ops.EXPAND:
        return tuple(arg)
    if op is Ops.CONST or op is Ops.VARIABLE or op is Ops.BIND:
        return ()
    if op is Ops.BUFFER:
        return (arg[2],)
    if op is Ops.IOTA:
        return (arg,)
    if op is Ops.DEFINE_GLOBAL:
        return (arg[1],)
    if op is Ops.PARAM:
        return arg[1]
    if op is Ops.PERMUTE:
        return tuple(src[0].shape[i] for i in arg)
    if op is Ops.PAD:
        return tuple(s + b + a for s, (b, a) in zip(src[0].shape, arg, strict=True))
    if op is Ops.SHRINK:
        return tuple(e - b for b, e in arg)
    if op is Ops.FLIP:
        return src[0].shape
    if op in (Ops.DYNAMIC_SHRINK, Ops.DYNAMIC_PAD):
        return tuple(arg[1])
    if op is Ops.AS_COMPLEX:
        return src[0].shape[:-1]
    if op is Ops.AS_PAIRS:
        return (*src[0].shape, 2)
    if op is Ops.REDUCE_AXIS:
        return tuple(1 if i in arg[1] else s for i, s in enumerate(src[0].shape))
    if op is Ops.MULTI and type(arg) is int:  # parts joined along the sharded axis
        return tuple(sum(p.shape[arg] for p in src) if a == arg else s for a, s in enumerate(src[0].shape))
    if op is Ops.MULTI and arg is not None:  # parts tiling a device grid's blocks (tgfx/ir/blocks.py)
        return blocks.whole_shape(src[0].shape, arg)
    if op is Ops.MSELECT:  # device i's piece in a layout (None: the whole value)
        i, layout = arg
        n, shape = len(src[0].device), src[0].shape
        return shape if layout is None else blocks.part_shape(shape, blocks.splits(layout, len(shape), n))
    if op is Ops.NETWORK:  # a collective between processes: arg (kind, op, processes, result shape)
        return arg[3]
    if op in (Ops.CONTIGUOUS, Ops.COPY, Ops.AFTER, Ops.MULTI, Ops.ALLREDUCE):
        for s in (src[1:] if op is Ops.WHERE else src):
            if s.shape is not None:
                return s.shape
        return None
    if op is Ops.GETTUPLE:
        return _call_result(src[0], arg, "shape")
    return None


def _call_result(call: UOp, i: int, attr: str) -> Any:
    """Shape or device of result i of a FUNCTION/CALL: from its body, or for a custom kernel from its arg. A LOOP or
    SWITCH runs on the device of its spec."""
    if call.op in (Ops.LOOP, Ops.SWITCH):
        from tgfx.ir.control import loop_results
        return call.arg.device if attr == "device" else (
            loop_results(call)[i][0] if call.op is Ops.LOOP else call.src[0].src[i].shape)
    body = call.src[0]
    if body.op is Ops.SINK or body.op is Ops.CALLBACK:
        shape, _, device = call.arg[2][i]
        return shape if attr == "shape" else device
    return getattr(body.src[i], attr)


# ---- value bounds for index arithmetic ----
def _bounds(u: UOp) -> tuple[Any, Any]:
    from tgfx.dtypes import max_value, min_value
    dt = u.dtype
    if dt is None:
        return (None, None)
    if u.op is Ops.CONST:
        return (u.arg, u.arg)
    if u.op is Ops.RANGE:
        end = u.src[0]
        return (0, end.vmax - 1)
    if u.op is Ops.SPECIAL:
        return (0, u.arg[1] - 1)
    if u.op is Ops.VARIABLE:
        return (u.arg[1], u.arg[2])
    if u.op is Ops.BIND:
        return u.src[0]._bounds
    if dt.is_bool:
        if u.op in GroupOp.Comparison or u.op in (Ops.AND, Ops.OR, Ops.XOR, Ops.WHERE):
            return _bool_bounds(u)
        return (False, True)
    if not dt.is_int:
        return (min_value(dt), max_value(dt))
    full = (min_value(dt), max_value(dt))
    s = u.src
    if u.op is Ops.ADD:
        return _clamp((s[0].vmin + s[1].vmin, s[0].vmax + s[1].vmax), full)
    if u.op is Ops.NEG:
        return _clamp((-s[0].vmax, -s[0].vmin), full)
    if u.op is Ops.MUL:
        c = [a * b for a in (s[0].vmin, s[0].vmax) for b in (s[1].vmin, s[1].vmax)]
        return _clamp((min(c), max(c)), full)
    if u.op is Ops.IDIV and s[1].op is Ops.CONST and s[1].arg > 0:
        d = s[1].arg
        return (tdiv(s[0].vmin, d), tdiv(s[0].vmax, d))
    if u.op is Ops.MOD and s[1].op is Ops.CONST and s[1].arg > 0:
        d = s[1].arg
        if s[0].vmin >= 0:
            return (0, min(s[0].vmax, d - 1))
        return (-(d - 1), d - 1)
    if u.op is Ops.MAX:
        return (max(s[0].vmin, s[1].vmin), max(s[0].vmax, s[1].vmax))
    if u.op is Ops.WHERE:
        return (min(s[1].vmin, s[2].vmin), max(s[1].vmax, s[2].vmax))
    if u.op is Ops.CAST and s[0].dtype is not None and (s[0].dtype.is_int or s[0].dtype.is_bool):
        lo, hi = int(s[0].vmin), int(s[0].vmax)
        if full[0] <= lo and hi <= full[1]:
            return (lo, hi)
    return full


def tdiv(a: int, b: int) -> int:
    """Integer division truncating toward zero, as C and our IDIV do; division by zero gives 0."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _clamp(b: tuple[int, int], full: tuple[int, int]) -> tuple[int, int]:
    return b if full[0] <= b[0] and b[1] <= full[1] else full


def _bool_bounds(u: UOp) -> tuple[bool, bool]:
    s = u.src
    if u.op is Ops.CMPLT and s[0].dtype.is_int:
        if s[0].vmax < s[1].vmin:
            return (True, True)
        if s[0].vmin >= s[1].vmax:
            return (False, False)
    if u.op is Ops.CMPNE and s[0].dtype.is_int:
        if s[0].vmax < s[1].vmin or s[0].vmin > s[1].vmax:
            return (True, True)
    if u.op is Ops.CMPEQ and s[0].dtype.is_int:
        if s[0].vmax < s[1].vmin or s[0].vmin > s[1].vmax:
            return (False, False)
    if u.op is Ops.AND:
        return (bool(s[0].vmin and s[1].vmin), bool(s[0].vmax and s[1].vmax))
    if u.op is Ops.OR:
        return (bool(s[0].vmin or s[1].vmin), bool(s[0].vmax or s[1].vmax))
    return (False, True)


def pretty(u: UOp, max_nodes: int = 60) -> str:
    """A readable listing of the graph, one node per line, shared nodes named once."""
    nodes = u.toposort()
    if len(nodes) > max_nodes:
        return f"UOp({u.op}, {u.dtype}, arg={u.arg!r}, <{len(nodes)} nodes>)"
    names = {n: f"%{i}" for i, n in enumerate(nodes)}
    lines = [f"{names[n]} = {n.op.name} {n.dtype!r} {', '.join(names[s] for s in n.src)}"
             + (f" arg={n.arg!r}" if n.arg is not None else "") + (f" tag={n.tag!r}" if n.tag is not None else "")
             for n in nodes]
    return "\n".join(lines) if len(lines) > 1 else f"UOp({u.op}, {u.dtype}, arg={u.arg!r})"


@functools.lru_cache(maxsize=INDEX_CONSTS)
def _index_const(value: int) -> UOp:
    """An index constant, kept alive for the next to ask for it: the lowering's most made node (rangeify's strides
    and offsets, symbolic's folds), each through a cast and the hash-consing table (1.7 us; 0.2 from here). gmm_em's
    first call made 32,180 of them."""
    from tgfx.dtypes import cast_scalar
    return UOp(Ops.CONST, dtypes.index, (), cast_scalar(value, dtypes.index))
