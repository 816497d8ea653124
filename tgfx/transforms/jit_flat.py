"""A jitted function's arguments flattened by code compiled for their structure (`compile_flatten`), as
`tree_compiled` builds its results: the replay's flatten without a call per node.

`flatten_fast` (tgfx/transforms/jit_replay.py) walks the arguments node by node on every call, a Python call per
list, tuple and dict, and builds the signature they are looked up by: realnvp's step (218 Tensors in 166 lists and
dicts) spent 25,000 bytecodes of its 72,000 there, the largest part of its replay's host time. A training loop calls
its step with one structure call after call, so once a call of the fast path hits its program, the structure it had
is compiled into straight-line code that takes each node apart with a type and length test (a dict: its key set)
and returns the leaves; their types, and the Tensors' shapes, dtypes and devices, are compared with the signature's
in C (`map` and list equality). Anything else (another structure, a leaf of another shape, a weakly typed Tensor, a
registered node) is no match, and the call takes `flatten_fast`'s path as before.
"""
from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter, itemgetter
from typing import Any

from tgfx.tensor import Tensor
from tgfx.tensor import _weak as _weak_tensors
from tgfx.tree import flattens_as_tuple

MIN_LEAVES = 8        # fewer leaves are flattened as fast by `flatten_fast` as by the compiled code's tests
MAX_NODES = 1 << 14   # a larger structure is not compiled (compiling it would cost more than its calls save)
MISSES = 4            # a flattener that missed this many calls in a row gives way to one for the calls' structure

_uop = attrgetter("uop")
_spec = attrgetter("shape", "dtype", "device")   # a Tensor leaf's part of the signature (`flatten_fast`'s)


class Flattener:
    """The leaves of a call whose arguments have the structure, leaf types and Tensor signatures of the call it was
    compiled from (`compile_flatten`), or None. `key`: that call's fast-path signature (`Jit._fast`'s key)."""

    def __init__(self, walk: Callable[[tuple, dict], list | None], types: list[type], tensor_at: list[int],
                 specs: list[tuple], codegen: Any, key: tuple) -> None:
        self.walk, self.types, self.specs, self.codegen, self.key = walk, types, specs, codegen, key
        # the Tensor leaves among all (None: all of them are Tensors)
        self.pick: Callable[[list], Any] | None = None
        if len(tensor_at) != len(types):
            self.pick = (lambda leaves: (leaves[tensor_at[0]],)) if len(tensor_at) == 1 else itemgetter(*tensor_at)
        self.misses = 0   # calls in a row it did not match (`MISSES`)

    def __call__(self, codegen: Any, args: tuple, kwargs: dict) -> list | None:
        leaves = self.walk(args, kwargs) if codegen == self.codegen else None
        if leaves is not None and list(map(type, leaves)) == self.types:
            tensors = leaves if self.pick is None else self.pick(leaves)
            # (a weakly typed Tensor's signature says so: `flatten_fast` tells it, for the calls that pass one)
            if list(map(_spec, map(_uop, tensors))) == self.specs and _weak_tensors.keys().isdisjoint(map(id, tensors)):
                self.misses = 0
                return leaves
        self.misses += 1
        return None


def compile_flatten(args: tuple, kwargs: dict, codegen: Any, key: tuple, leaves: list) -> Flattener | None:
    """A `Flattener` for calls like this one (`leaves`: its leaves, as `flatten_fast` gave them; `key`: its
    signature), or None where it has too few leaves, too many nodes, or a kind of node or leaf it does not take
    (those calls keep `flatten_fast`)."""
    if len(leaves) < MIN_LEAVES or any(type(x) is not Tensor and type(x) is not int and type(x) is not float
                                       for x in leaves):
        return None
    lines: list[str] = []
    exprs: list[str] = []
    consts: list[Any] = []
    if not _source(args, "_a", lines, exprs, consts) or \
            (kwargs and not _source(kwargs, "_k", lines, exprs, consts)) or len(lines) > 2 * MAX_NODES:
        return None
    if not kwargs:
        lines.append("if _k: return None")
    if len(exprs) != len(leaves):
        return None
    body = "".join(f"    {line}\n" for line in lines)
    namespace = {"_c": consts}
    exec(f"def walk(_a, _k):\n{body}    return [{', '.join(exprs)}]\n", namespace)   # noqa: S102 -- our own source
    tensor_at = [i for i, x in enumerate(leaves) if type(x) is Tensor]
    specs = [_spec(leaves[i].uop) for i in tensor_at]
    return Flattener(namespace["walk"], [type(x) for x in leaves], tensor_at, specs, codegen, key)


def _source(x: Any, expr: str, lines: list[str], exprs: list[str], consts: list[Any]) -> bool:
    """The statements that test the node `expr` (whose value in the call compiled from is `x`) as `flatten_fast` sees
    it, appended to `lines`, and its leaves' expressions to `exprs` (in `tree_flatten`'s order: a dict's children in
    sorted key order); False for a node it does not take."""
    t = type(x)
    if t is Tensor or t is int or t is float:
        exprs.append(expr)
        return True
    if x is None:
        lines.append(f"if {expr} is not None: return None")
        return True
    name = f"_{len(lines)}"
    if t is tuple or t is list or isinstance(x, tuple) and flattens_as_tuple(t):
        lines.append(f"{name} = {expr}")
        lines.append(f"if type({name}) is not _c[{_const(t, consts)}] or len({name}) != {len(x)}: return None")
        return all(_source(c, f"{name}[{i}]", lines, exprs, consts) for i, c in enumerate(x))
    if t is dict:
        try:
            keys = sorted(x)
        except TypeError:
            return False
        lines.append(f"{name} = {expr}")
        lines.append(f"if type({name}) is not dict or {name}.keys() != _c[{_const(frozenset(keys), consts)}]: "
                     f"return None")
        return all(_source(x[k], f"{name}[_c[{_const(k, consts)}]]", lines, exprs, consts) for k in keys)
    return False


def _const(value: Any, consts: list[Any]) -> int:
    consts.append(value)
    return len(consts) - 1
