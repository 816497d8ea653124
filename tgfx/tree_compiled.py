"""A pytree structure's builder compiled once: `unflattener(treedef, leaf)` is a function of the leaves that builds the
tree in one expression, as `tree_unflatten(treedef, map(leaf, leaves))` does, with no call per node.

A jitted function's replay returns its results this way: realnvp's step returns 218 Tensors in 166 lists and dicts,
and `tree_unflatten` walked them node by node (`PyTreeDef._build`, a registration lookup and an unflatten call per
node: about 700 Python calls and a sixth of the replay's host time). The structure is known when the trace is made,
so its builder is made then: `[{"s": ..., "t": ...}, ...]` as Python source, compiled, one call per leaf (`leaf`)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tgfx.tree import PyTreeDef, _registration, tree_unflatten

# a structure nested deeper than this, or with more nodes, is built by `tree_unflatten` (Python's parser refuses
# expressions nested 200 deep, and compiling a huge one costs more than the calls it saves)
MAX_DEPTH = 64
MAX_NODES = 1 << 14


def unflattener(treedef: PyTreeDef, leaf: Callable[[Any], Any] | None = None) -> Callable[[Sequence[Any]], Any]:
    """A function of a sequence of `treedef.num_leaves` values (not checked: the caller's are the structure's) that
    builds the tree of structure `treedef` whose leaves are `leaf(value)` (the values themselves without `leaf`).

    >>> from tgfx.tree import tree_structure
    >>> unflattener(tree_structure(({"a": 0, "b": 0}, [0])), str)([1, 2, 3])
    ({'a': '1', 'b': '2'}, ['3'])
    """
    if treedef.num_nodes > MAX_NODES or _depth(treedef) > MAX_DEPTH:
        if leaf is None:
            return lambda values: tree_unflatten(treedef, values)
        return lambda values: tree_unflatten(treedef, [leaf(v) for v in values])
    consts: list[Any] = []
    source = _source(treedef, consts, [0], "_f(_r[{}])" if leaf is not None else "_r[{}]")
    return eval(f"lambda _r: {source}", {"_f": leaf, "_c": consts})   # noqa: S307 -- our own source, of a structure


def _depth(t: PyTreeDef) -> int:
    return 0 if t.node_type is None else 1 + max((_depth(c) for c in t.children()), default=0)


def _source(t: PyTreeDef, consts: list[Any], at: list[int], leaf: str) -> str:
    """The expression building `t` from `_r` (its leaves from `at[0]` on; advanced past them), `_f` and `_c`."""
    if t.node_type is None:
        at[0] += 1
        return leaf.format(at[0] - 1)
    parts = [_source(c, consts, at, leaf) for c in t.children()]
    if t.node_type is tuple:
        return f"({''.join(p + ', ' for p in parts)})"
    if t.node_type is list:
        return f"[{', '.join(parts)}]"
    if t.node_type is type(None):
        return "None"
    if t.node_type is dict:   # (its keys in the structure's order, as `dict(zip(keys, children))` inserts them)
        return "{" + ", ".join(f"{_const(k, consts)}: {p}" for k, p in zip(t.node_data, parts, strict=True)) + "}"
    reg = _registration(t.node_type)
    assert reg is not None, f"{t.node_type} was unregistered"
    return f"{_const(reg.unflatten, consts)}({_const(t.node_data, consts)}, [{', '.join(parts)}])"


def _const(x: Any, consts: list[Any]) -> str:
    consts.append(x)
    return f"_c[{len(consts) - 1}]"
