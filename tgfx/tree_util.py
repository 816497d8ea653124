"""`jax.tree_util`'s names over tgfx's pytrees, for programs that import them from there.

Everything `tgfx.tree` has is re-exported under its `tree_*` name; what `jax.tree_util` has besides is defined here
on the same registry: `Partial` (a `functools.partial` that is a pytree, so a function with bound array arguments
can cross `jit`), `register_static`, `register_pytree_with_keys_class`, `tree_reduce_associative`, and the small
helpers on structures (`treedef_is_leaf`, `treedef_children`, `treedef_tuple`, `all_leaves`, `flatten_one_level`).

>>> from tgfx.tree_util import Partial, tree_leaves
>>> add = Partial(tnp.add, tnp.ones(2))
>>> len(tree_leaves(add))                            # the bound array is the one leaf; tnp.add is static
1
>>> tg.jit(lambda f, x: f(x))(add, tnp.ones(2))      # [2., 2.]
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from tgfx.tree import (  # re-exported: __all__ below
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    KeyEntry,
    KeyPath,
    PyTreeDef,
    SequenceKey,
    _registration,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_pytree_with_keys,
    tree_all,
    tree_broadcast,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_reduce_associative,
    tree_structure,
    tree_transpose,
    tree_unflatten,
)

IsLeafFn = Callable[[Any], bool]


# ---- structures -----------------------------------------------------------------------------------------------

def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether `treedef` is a single node with no children: a leaf, or a childless node such as None or ()
    (`jax.tree_util.treedef_is_leaf` counts nodes, so both are True)."""
    return treedef.num_nodes == 1


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of the root's children, in flattening order.

    >>> treedef_children(tree_structure((1, [2, 3])))
    [PyTreeDef(*), PyTreeDef([*, *])]
    """
    return list(treedef.children())


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple whose children have the structures `treedefs`.

    >>> treedef_tuple([tree_structure(1), tree_structure([1, 2])])
    PyTreeDef((*, [*, *]))
    """
    children = tuple(treedefs)
    for i, c in enumerate(children):
        if not isinstance(c, PyTreeDef):
            raise TypeError(f"treedef_tuple: element {i} is a {type(c).__qualname__}, not a PyTreeDef")
    return PyTreeDef(tuple, None, children)


def all_leaves(iterable: Iterable[Any], is_leaf: IsLeafFn | None = None) -> bool:
    """Whether every item of `iterable` is a leaf (None is a node, so it is not).

    >>> all_leaves([1, tnp.ones(2)]), all_leaves([1, (2,)]), all_leaves([None])
    (True, False, False)
    """
    items = list(iterable)
    if is_leaf is None:
        return all(_registration(type(x)) is None for x in items)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(x is leaf for x, leaf in zip(items, leaves, strict=True))


def is_tree_node(typ: type) -> bool:
    """Whether instances of the class `typ` are pytree nodes (registered, built in, or a NamedTuple)."""
    if not isinstance(typ, type):
        raise TypeError(f"is_tree_node: expected a class, got {type(typ).__qualname__} {typ!r}; pass type(x)")
    return _registration(typ) is not None


def flatten_one_level(tree: Any) -> tuple[tuple[Any, ...], Hashable]:
    """The children of the root node and its aux data, one level only; a leaf is a ValueError.

    >>> flatten_one_level({"b": 1, "a": 2})
    ((2, 1), ('a', 'b'))
    """
    reg = _registration(type(tree))
    if reg is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    children, aux = reg.flatten(tree)
    return tuple(children), aux


def flatten_one_level_with_keys(tree: Any) -> tuple[tuple[tuple[KeyEntry, Any], ...], Hashable]:
    """`flatten_one_level` with each child's key: `(((key, child), ...), aux_data)`."""
    reg = _registration(type(tree))
    if reg is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    if reg.flatten_with_keys is not None:
        pairs, aux = reg.flatten_with_keys(tree)
        return tuple(pairs), aux
    children, aux = reg.flatten(tree)
    children = tuple(children)
    return tuple(zip(reg.keys(type(tree), aux, len(children)), children, strict=True)), aux


# ---- registrations --------------------------------------------------------------------------------------------

def register_static(cls: type) -> type:
    """Register `cls` as a node with no children whose instances are their own aux data: they pass through
    `jit` as static values, so they must be hashable and comparable. Returns the class (usable as a decorator).

    >>> @register_static
    ... class Config:
    ...     def __hash__(self): return 0
    ...     def __eq__(self, other): return isinstance(other, Config)
    >>> tree_leaves([Config(), 1])
    [1]
    """
    register_pytree_with_keys(cls, lambda obj: ((), obj), lambda obj, _children: obj, lambda obj: ((), obj))
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator form of `register_pytree_with_keys`: the class defines `tree_flatten_with_keys(self) ->
    ([(key, child), ...], aux_data)`, the classmethod `tree_unflatten(aux_data, children)`, and optionally
    `tree_flatten(self)` (a faster flatten without keys)."""
    for name in ("tree_flatten_with_keys", "tree_unflatten"):
        if not callable(getattr(cls, name, None)):
            raise TypeError(f"register_pytree_with_keys_class: {cls.__qualname__} must define {name} "
                            f"(tree_flatten_with_keys(self) -> ([(key, child), ...], aux_data) and the classmethod "
                            f"tree_unflatten(aux_data, children))")
    flatten = (lambda x: x.tree_flatten()) if callable(getattr(cls, "tree_flatten", None)) else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(),
                              lambda aux, children: cls.tree_unflatten(aux, children), flatten)
    return cls


# ---- Partial --------------------------------------------------------------------------------------------------

class _HashableCallableShim:
    """Holds a `functools.partial` as the function of a `Partial`, so that partial's constructor does not merge
    the two (that would make the inner partial's bound values static aux data instead of leaves)."""

    __slots__ = ("fun",)

    def __init__(self, fun: Callable) -> None:
        self.fun = fun

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _HashableCallableShim):
            return self.fun == other.fun
        return self.fun == other


class Partial(functools.partial):
    """A `functools.partial` that is a pytree, as `jax.tree_util.Partial`: its bound positional and keyword
    arguments are children (arrays among them are leaves), its function is static aux data. So a function with
    bound arrays can be passed to, and returned from, a jitted function.

    >>> double_then = Partial(lambda scale, x: scale * x, tnp.asarray(2.0))
    >>> tg.jit(lambda f, x: f(x))(double_then, tnp.ones(3))   # [2., 2., 2.]
    """

    def __new__(cls, func: Callable, *args: Any, **kwargs: Any) -> Partial:
        if not callable(func):
            raise TypeError(f"Partial: the first argument must be callable, got {type(func).__qualname__}")
        if isinstance(func, functools.partial):
            return super().__new__(cls, _HashableCallableShim(func), *args, **kwargs)
        return super().__new__(cls, func, *args, **kwargs)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, children: Partial(func, *children[0], **children[1]))


__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "KeyEntry", "KeyPath", "Partial", "PyTreeDef", "SequenceKey",
    "all_leaves", "flatten_one_level", "flatten_one_level_with_keys", "is_tree_node", "keystr", "register_dataclass",
    "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "register_static", "tree_all", "tree_broadcast", "tree_flatten",
    "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path", "tree_map", "tree_map_with_path", "tree_reduce",
    "tree_reduce_associative", "tree_structure", "tree_transpose", "tree_unflatten", "treedef_children",
    "treedef_is_leaf", "treedef_tuple",
]
