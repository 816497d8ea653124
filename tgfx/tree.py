"""Pytrees: nested containers of leaves, flattened to a list of leaves plus a hashable structure.

This mirrors `jax.tree_util`. A pytree is a leaf or a node; the nodes are tuple, list, dict (children in
sorted key order, as JAX does), None (a node with no children, so it is never a leaf), OrderedDict and
defaultdict, every NamedTuple (it keeps its type), and any class registered with `register_pytree_node`,
`register_pytree_with_keys` or `register_dataclass`. Every other object is a leaf.

>>> leaves, treedef = tree_flatten({"b": (1, 2), "a": [3, None]})
>>> leaves
[3, 1, 2]
>>> treedef
PyTreeDef({'a': [*, None], 'b': (*, *)})
>>> tree_unflatten(treedef, ["x", "y", "z"])
{'a': ['x', None], 'b': ('y', 'z')}

A `PyTreeDef` is immutable, hashable and compared by structure (node types, their static aux data and the
children), so it can be part of a cache key.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "KeyEntry", "KeyPath", "PyTreeDef", "SequenceKey",
    "all", "flatten", "keystr", "leaves", "map", "map_with_path", "reduce", "register_dataclass",
    "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys", "structure", "unflatten",
    "tree_all", "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path", "tree_map",
    "tree_map_with_path", "tree_reduce", "tree_structure", "tree_unflatten", "tree_transpose", "tree_broadcast",
    "flatten_with_path", "leaves_with_path", "transpose", "broadcast", "tree_reduce_associative", "reduce_associative",
]

# ---------------------------------------------------------------------------------------------------------------
# key paths


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The child at position `idx` of a tuple, list or NamedTuple-like sequence: renders as `[0]`."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """The child under `key` of a dict: renders as `['a']`."""

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The attribute `name` of a NamedTuple or dataclass: renders as `.name`."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """Child `key` of a registered node that gave no keys of its own: renders as `[<flat index 0>]`."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


KeyEntry = SequenceKey | DictKey | GetAttrKey | FlattenedIndexKey | Hashable
KeyPath = tuple[KeyEntry, ...]


def _key_simple(key: KeyEntry) -> str:
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, DictKey):
        return str(key.key)
    if isinstance(key, GetAttrKey):
        return key.name
    if isinstance(key, FlattenedIndexKey):
        return str(key.key)
    return str(key)


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Render a key path as JAX does.

    >>> keystr((DictKey("a"), SequenceKey(0), GetAttrKey("b")))
    "['a'][0].b"
    >>> keystr((DictKey("a"), SequenceKey(0), GetAttrKey("b")), simple=True, separator="/")
    'a/0/b'
    """
    return separator.join(_key_simple(k) if simple else str(k) for k in keys)


def _where(path: KeyPath) -> str:
    return f"path {keystr(path)}" if path else "the root"


# ---------------------------------------------------------------------------------------------------------------
# node registrations

# flatten(x) -> (children, aux); unflatten(aux, children) -> x; keys(node_type, aux, n) -> the children's keys;
# render(node_type, aux, child reprs) -> the node's text in a PyTreeDef repr.
FlattenFn = Callable[[Any], tuple[Iterable[Any], Any]]
UnflattenFn = Callable[[Any, Iterable[Any]], Any]
FlattenWithKeysFn = Callable[[Any], tuple[Iterable[tuple[KeyEntry, Any]], Any]]


@dataclasses.dataclass(frozen=True)
class _Registration:
    flatten: FlattenFn
    unflatten: UnflattenFn
    keys: Callable[[type, Any, int], tuple[KeyEntry, ...]]
    render: Callable[[type, Any, list[str]], str]
    flatten_with_keys: FlattenWithKeysFn | None = None


def _seq_keys(_t: type, _aux: Any, n: int) -> tuple[KeyEntry, ...]:
    return tuple(SequenceKey(i) for i in range(n))


def _flat_keys(_t: type, _aux: Any, n: int) -> tuple[KeyEntry, ...]:
    return tuple(FlattenedIndexKey(i) for i in range(n))


def _dict_items(keys: Sequence[Hashable], children: list[str]) -> str:
    return ", ".join(f"{k!r}: {c}" for k, c in zip(keys, children, strict=True))


def _sorted_keys(d: dict) -> tuple[Hashable, ...]:
    try:
        return tuple(sorted(d))
    except TypeError:  # keys of mixed, unorderable types: still deterministic, grouped by type
        return tuple(sorted(d, key=lambda k: (type(k).__qualname__, repr(k))))


def _render_tuple(_t: type, _aux: Any, cs: list[str]) -> str:
    return f"({cs[0]},)" if len(cs) == 1 else f"({', '.join(cs)})"


def _render_custom(t: type, aux: Any, cs: list[str]) -> str:
    return f"CustomNode({t.__qualname__}[{aux!r}], [{', '.join(cs)}])"


def _flatten_dict(d: dict) -> tuple[list, tuple]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _flatten_defaultdict(d: collections.defaultdict) -> tuple[list, tuple]:
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


_registry: dict[type, _Registration] = {
    type(None): _Registration(
        flatten=lambda _x: ((), None), unflatten=lambda _aux, _cs: None, keys=_seq_keys,
        render=lambda _t, _aux, _cs: "None"),
    tuple: _Registration(
        flatten=lambda x: (x, None), unflatten=lambda _aux, cs: tuple(cs), keys=_seq_keys, render=_render_tuple),
    list: _Registration(
        flatten=lambda x: (x, None), unflatten=lambda _aux, cs: list(cs), keys=_seq_keys,
        render=lambda _t, _aux, cs: f"[{', '.join(cs)}]"),
    dict: _Registration(
        flatten=_flatten_dict,
        unflatten=lambda aux, cs: dict(zip(aux, cs, strict=True)),
        keys=lambda _t, aux, _n: tuple(DictKey(k) for k in aux),
        render=lambda _t, aux, cs: f"{{{_dict_items(aux, cs)}}}"),
    collections.OrderedDict: _Registration(
        flatten=lambda x: (list(x.values()), tuple(x)),
        unflatten=lambda aux, cs: collections.OrderedDict(zip(aux, cs, strict=True)),
        keys=lambda _t, aux, _n: tuple(DictKey(k) for k in aux),
        render=lambda _t, aux, cs: f"OrderedDict({{{_dict_items(aux, cs)}}})"),
    collections.defaultdict: _Registration(
        flatten=_flatten_defaultdict,
        unflatten=lambda aux, cs: collections.defaultdict(aux[0], zip(aux[1], cs, strict=True)),
        keys=lambda _t, aux, _n: tuple(DictKey(k) for k in aux[1]),
        render=lambda _t, aux, cs: f"defaultdict({aux[0]!r}, {{{_dict_items(aux[1], cs)}}})"),
}

def _is_namedtuple_class(t: type) -> bool:
    return issubclass(t, tuple) and isinstance(getattr(t, "_fields", None), tuple)


def flattens_as_tuple(t: type) -> bool:
    """Whether instances of NamedTuple class `t` flatten as the tuple of their fields, in order (`t` is not
    registered as a pytree node of its own): what a caller that flattens tuples itself may rely on (jit's replay)."""
    return _is_namedtuple_class(t) and t not in _registry


def registered_flatten(t: type) -> FlattenFn | None:
    """The flatten function of a class registered as a pytree node (`register_pytree_node`, a registered dataclass,
    JAX's `OptimizerState`), or None: what a caller that flattens trees itself may use (jit's replay)."""
    reg = _registry.get(t)
    return None if reg is None else reg.flatten


# Every NamedTuple class is a node without being registered one by one; its registration is made on first sight.
_namedtuple_registrations: dict[type, _Registration] = {}


def _namedtuple_registration(t: type) -> _Registration:
    def render(_t: type, _aux: None, cs: list[str]) -> str:
        return f"{t.__name__}({', '.join(f'{f}={c}' for f, c in zip(t._fields, cs, strict=True))})"

    if (reg := _namedtuple_registrations.get(t)) is None:
        reg = _namedtuple_registrations[t] = _Registration(
            flatten=lambda x: (x, None), unflatten=lambda _aux, cs: t(*cs),
            keys=lambda _t, _aux, _n: tuple(GetAttrKey(f) for f in t._fields), render=render)
    return reg


def _registration(t: type) -> _Registration | None:
    reg = _registry.get(t)
    if reg is None and _is_namedtuple_class(t):
        return _namedtuple_registration(t)
    return reg


def _register(nodetype: type, reg: _Registration) -> None:
    if not isinstance(nodetype, type):
        raise TypeError(f"pytree node type must be a class, got {nodetype!r}")
    if nodetype in _registry:
        raise ValueError(f"{nodetype.__qualname__} is already registered as a pytree node; register each type once")
    _registry[nodetype] = reg


def register_pytree_node(nodetype: type, flatten_func: FlattenFn, unflatten_func: UnflattenFn) -> None:
    """Make instances of `nodetype` pytree nodes.

    `flatten_func(x)` returns `(children, aux_data)`: the children are flattened further, `aux_data` is static,
    must be hashable and comparable, and becomes part of the PyTreeDef. `unflatten_func(aux_data, children)`
    rebuilds the node; it may be handed non-array leaves (e.g. `object()` placeholders), so it should not
    validate its children.

    >>> class Pair:
    ...     def __init__(self, a, b): self.a, self.b = a, b
    >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, cs: Pair(*cs))
    >>> tree_leaves(Pair(1, (2, 3)))
    [1, 2, 3]
    """
    _register(nodetype, _Registration(
        flatten=flatten_func, unflatten=unflatten_func, keys=_flat_keys, render=_render_custom))


def register_pytree_node_class(cls: type) -> type:
    """Class decorator form of `register_pytree_node`, as `jax.tree_util.register_pytree_node_class`: the class
    defines `tree_flatten(self) -> (children, aux_data)` and the classmethod `tree_unflatten(aux_data, children)`.

    >>> @register_pytree_node_class
    ... class Affine:
    ...     def __init__(self, w, b): self.w, self.b = w, b
    ...     def tree_flatten(self): return (self.w, self.b), None
    ...     @classmethod
    ...     def tree_unflatten(cls, aux, children): return cls(*children)
    >>> tree_leaves(Affine(1, 2))
    [1, 2]
    """
    for name in ("tree_flatten", "tree_unflatten"):
        if not callable(getattr(cls, name, None)):
            raise TypeError(f"register_pytree_node_class: {cls.__qualname__} must define {name} (tree_flatten(self) "
                            f"-> (children, aux_data) and the classmethod tree_unflatten(aux_data, children))")
    register_pytree_node(cls, lambda x: x.tree_flatten(), lambda aux, children: cls.tree_unflatten(aux, children))
    return cls


def register_pytree_with_keys(nodetype: type, flatten_with_keys: FlattenWithKeysFn, unflatten_func: UnflattenFn,
                              flatten_func: FlattenFn | None = None) -> None:
    """Like `register_pytree_node`, but `flatten_with_keys(x)` returns `([(key, child), ...], aux_data)` so that
    `tree_flatten_with_path` names each child by its key (e.g. `GetAttrKey("w")`)."""
    def flatten_plain(x: Any) -> tuple[list[Any], Any]:
        pairs, aux = flatten_with_keys(x)
        return [c for _, c in pairs], aux

    _register(nodetype, _Registration(
        flatten=flatten_func or flatten_plain, unflatten=unflatten_func, keys=_flat_keys, render=_render_custom,
        flatten_with_keys=flatten_with_keys))


def register_dataclass(nodetype: type | None = None, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None) -> Any:
    """Register a dataclass as a pytree node whose children are its data fields; returns the class.

    Usable as `@register_dataclass`, `@register_dataclass(meta_fields=[...])` or a plain call. Without explicit
    fields, every `__init__` field is a data field, except those declared
    `dataclasses.field(metadata={"static": True})`, which are meta fields: static, hashable, part of the PyTreeDef.

    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Linear:
    ...     w: Any
    ...     b: Any
    ...     act: str = dataclasses.field(default="relu", metadata={"static": True})
    >>> tree_structure(Linear(1, 2))
    PyTreeDef(Linear(w=*, b=*, act='relu'))
    """
    if nodetype is None:
        return lambda cls: register_dataclass(cls, data_fields, meta_fields)
    name = getattr(nodetype, "__qualname__", repr(nodetype))
    if data_fields is None or meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {name} is not a dataclass; decorate it with @dataclasses.dataclass "
                            "first, or pass both data_fields and meta_fields")
        # the fields not named explicitly are split by their `static` metadata
        init_fields = [f for f in dataclasses.fields(nodetype) if f.init]
        named = set(data_fields or ()) | set(meta_fields or ())
        rest = [f for f in init_fields if f.name not in named]
        if data_fields is None:
            data_fields = [f.name for f in rest if not f.metadata.get("static", False)]
        if meta_fields is None:
            meta_fields = [f.name for f in rest if f.metadata.get("static", False)]
    data, meta = tuple(data_fields), tuple(meta_fields)
    if overlap := set(data) & set(meta):
        raise ValueError(f"register_dataclass: {name} fields {sorted(overlap)} are both data and meta fields")
    if dataclasses.is_dataclass(nodetype):
        init_names = {f.name for f in dataclasses.fields(nodetype) if f.init}
        if missing := init_names - set(data) - set(meta):
            raise ValueError(f"register_dataclass: {name} fields {sorted(missing)} are neither data nor meta fields; "
                             "every __init__ field must be one or the other")
        if unknown := (set(data) | set(meta)) - init_names:
            raise ValueError(f"register_dataclass: {name} has no __init__ fields {sorted(unknown)}")

    def render(t: type, aux: tuple, cs: list[str]) -> str:
        parts = [f"{n}={c}" for n, c in zip(data, cs, strict=True)]
        parts += [f"{n}={v!r}" for n, v in zip(meta, aux, strict=True)]
        return f"{t.__name__}({', '.join(parts)})"

    _register(nodetype, _Registration(
        flatten=lambda x: ([getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)),
        unflatten=lambda aux, cs: nodetype(**dict(zip(data, cs, strict=True)), **dict(zip(meta, aux, strict=True))),
        keys=lambda _t, _aux, _n: tuple(GetAttrKey(n) for n in data),
        render=render))
    return nodetype


# ---------------------------------------------------------------------------------------------------------------
# PyTreeDef


class _Mismatch(Exception):
    """Internal: where and how a value's structure departs from a PyTreeDef."""

    def __init__(self, path: KeyPath, detail: str) -> None:
        super().__init__(detail)
        self.path, self.detail = path, detail


def _describe(x: Any) -> str:
    t = type(x)
    if x is None:
        return "None"
    if isinstance(x, dict):
        return f"a {t.__name__} with keys {list(x)!r}"
    if _registration(t) is not None and isinstance(x, list | tuple):
        return f"a {t.__name__} of length {len(x)}"
    if _registration(t) is not None:
        return f"a {t.__qualname__} node"
    return f"a leaf of type {t.__qualname__}"


class PyTreeDef:
    """The structure of a pytree: node types, their static aux data and children, with `*` for each leaf.

    Hashable and compared by structure. `num_leaves` and `num_nodes` (leaves included) count the tree.
    """

    __slots__ = ("node_type", "node_data", "_children", "num_leaves", "num_nodes", "_hash")
    node_type: type | None
    node_data: Any
    _children: tuple[PyTreeDef, ...]
    num_leaves: int
    num_nodes: int
    _hash: int | None

    def __init__(self, node_type: type | None, node_data: Any, children: tuple[PyTreeDef, ...]) -> None:
        self.node_type, self.node_data, self._children = node_type, node_data, children
        n_leaves, n_nodes = 0, 1
        for c in children:   # (a loop, not two generators: each step of one is a call)
            n_leaves += c.num_leaves
            n_nodes += c.num_nodes
        self.num_leaves = 1 if node_type is None else n_leaves
        self.num_nodes = n_nodes
        self._hash = None

    @property
    def is_leaf(self) -> bool:
        return self.node_type is None

    def children(self) -> tuple[PyTreeDef, ...]:
        return self._children

    # -- identity -------------------------------------------------------------------------------------------------

    def __hash__(self) -> int:
        if self._hash is None:
            try:
                self._hash = hash((self.node_type, self.node_data, self._children))
            except TypeError:   # aux data that is not hashable (a dict, as JAX's Common Gotchas registers): hashed
                self._hash = hash((self.node_type, self._children))   # without it, compared by ==, as JAX's are
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        if self._hash is not None and other._hash is not None and self._hash != other._hash:
            return False
        return (self.node_type is other.node_type and self.num_leaves == other.num_leaves
                and bool(self.node_data == other.node_data) and self._children == other._children)

    def __repr__(self) -> str:
        return f"PyTreeDef({self._render()})"

    def _render(self) -> str:
        if self.node_type is None:
            return "*"
        reg = _registration(self.node_type)
        assert reg is not None, f"{self.node_type} was unregistered"
        return reg.render(self.node_type, self.node_data, [c._render() for c in self._children])

    def __reduce__(self) -> tuple[Any, ...]:
        return (PyTreeDef, (self.node_type, self.node_data, self._children))

    # -- leaves in, tree out ----------------------------------------------------------------------------------------

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Build a tree of this structure from `leaves`; a wrong number of leaves is a ValueError."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            if len(leaves) < self.num_leaves:
                where = f"; the leaves ran out at {_where(self.leaf_paths()[len(leaves)])}"
            else:
                where = f"; {len(leaves) - self.num_leaves} left over"
            raise ValueError(f"tree_unflatten: the structure {self!r} has {self.num_leaves} leaves, but got "
                             f"{len(leaves)} leaves{where}")
        return self._build(iter(leaves))

    def _build(self, leaves: Any) -> Any:
        if self.node_type is None:
            return next(leaves)
        children = []
        for c in self._children:   # (a leaf taken here, not by a call: most children are leaves)
            children.append(next(leaves) if c.node_type is None else c._build(leaves))
        reg = _registration(self.node_type)
        assert reg is not None, f"{self.node_type} was unregistered"
        return reg.unflatten(self.node_data, children)

    def leaf_paths(self) -> list[KeyPath]:
        """The key path of every leaf, computed from the structure alone (a node registered with keys gives flat
        indices here; `tree_flatten_with_path` on a value gives its real keys)."""
        out: list[KeyPath] = []
        self._leaf_paths((), out)
        return out

    def _leaf_paths(self, path: KeyPath, out: list[KeyPath]) -> None:
        if self.node_type is None:
            out.append(path)
            return
        reg = _registration(self.node_type)
        assert reg is not None
        for key, child in zip(reg.keys(self.node_type, self.node_data, len(self._children)), self._children,
                              strict=True):
            child._leaf_paths((*path, key), out)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """The subtrees of `tree` at this structure's leaves; `tree` must match every node above them.

        >>> tree_structure((0, 0)).flatten_up_to(([1, 2], {"a": 3}))
        [[1, 2], {'a': 3}]
        """
        return _up_to(self, tree, "tree structures differ at", ("expected:", "got:     "))

    def _flatten_up_to(self, x: Any, out: list[Any]) -> None:
        """`flatten_up_to` into `out`; a mismatch raises `_Mismatch`, its path filled in as it passes each node on
        its way out (no path, keys or description built where the structures agree: a 20-leaf dict's DictKeys were
        a third of a `tree_map`'s calls)."""
        if self.node_type is None:
            out.append(x)
            return
        t = self.node_type
        if type(x) is not t:
            raise _Mismatch((), f"expected {_describe_def(self)}, got {_describe(x)}")
        reg = _registration(t)
        assert reg is not None
        children, aux = reg.flatten(x)
        children = list(children)
        if t is dict or t is collections.OrderedDict or t is collections.defaultdict:
            want = self.node_data[1] if t is collections.defaultdict else self.node_data
            have = aux[1] if t is collections.defaultdict else aux
            if have != want and set(have) != set(want):
                missing = [k for k in want if k not in x]
                extra = [k for k in have if k not in set(want)]
                raise _Mismatch((), f"expected {_describe_def(self)}, got {_describe(x)} (missing {missing!r}, "
                                    f"unexpected {extra!r})")
            if have != want:
                children = [x[k] for k in want]  # an OrderedDict in another order still matches, taken in our order
        elif len(children) != len(self._children):
            raise _Mismatch((), f"expected {_describe_def(self)}, got {_describe(x)} with {len(children)} children")
        elif not bool(aux == self.node_data):
            raise _Mismatch((), f"expected {_describe_def(self)}, got {t.__qualname__} with aux data {aux!r}")
        for i, child_def in enumerate(self._children):
            if child_def.node_type is None:   # (a leaf, taken here)
                out.append(children[i])
                continue
            try:
                child_def._flatten_up_to(children[i], out)
            except _Mismatch as e:   # (the child's key, named only now)
                e.path = (reg.keys(t, self.node_data, len(self._children))[i], *e.path)
                raise


def _describe_def(d: PyTreeDef) -> str:
    t = d.node_type
    assert t is not None
    if t is type(None):
        return "None"
    if t is dict or t is collections.OrderedDict:
        return f"a {t.__name__} with keys {list(d.node_data)!r}"
    if t is collections.defaultdict:
        return f"a defaultdict with keys {list(d.node_data[1])!r}"
    if t is tuple or t is list or _is_namedtuple_class(t):
        return f"a {t.__name__} of length {len(d.children())}"
    return f"a {t.__qualname__} node with {len(d.children())} children and aux data {d.node_data!r}"


_LEAF = PyTreeDef(None, None, ())


# ---------------------------------------------------------------------------------------------------------------
# flatten / unflatten

IsLeafFn = Callable[[Any], bool]


def _flatten(x: Any, is_leaf: IsLeafFn | None, leaves: list[Any], paths: list[KeyPath] | None,
             path: KeyPath) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        reg = None
    else:
        reg = _registration(type(x))
    if reg is None:
        leaves.append(x)
        if paths is not None:
            paths.append(path)
        return _LEAF
    if paths is None:
        children, aux = reg.flatten(x)
        defs = []
        for c in children:
            # (a child of no registered type and no tuple's, taken as a leaf here: most are, and a call each for
            # them was most of a flatten)
            if is_leaf is None and (t := type(c)) not in _registry and not issubclass(t, tuple):
                leaves.append(c)
                defs.append(_LEAF)
            else:
                defs.append(_flatten(c, is_leaf, leaves, None, path))
        return PyTreeDef(type(x), aux, tuple(defs))
    if reg.flatten_with_keys is not None:
        pairs, aux = reg.flatten_with_keys(x)
        pairs = list(pairs)
    else:
        children, aux = reg.flatten(x)
        children = list(children)
        pairs = list(zip(reg.keys(type(x), aux, len(children)), children, strict=True))
    child_defs = tuple(_flatten(c, is_leaf, leaves, paths, (*path, k)) for k, c in pairs)
    return PyTreeDef(type(x), aux, child_defs)


def tree_flatten(tree: Any, is_leaf: IsLeafFn | None = None) -> tuple[list[Any], PyTreeDef]:
    """Flatten `tree` into its leaves (depth first, dict children in sorted key order) and its structure.

    `is_leaf(x)` is asked about every subtree, None included, before it is opened; True makes it a leaf.

    >>> tree_flatten([1, (2, None), {"b": 3, "a": 4}])
    ([1, 2, 4, 3], PyTreeDef([*, (*, None), {'a': *, 'b': *}]))
    """
    leaves: list[Any] = []
    treedef = _flatten(tree, is_leaf, leaves, None, ())
    return leaves, treedef


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Inverse of `tree_flatten`: build a tree of structure `treedef` from `leaves`.

    >>> tree_unflatten(tree_structure((0, [0])), ["a", "b"])
    ('a', ['b'])
    """
    if not isinstance(treedef, PyTreeDef):
        raise TypeError(f"tree_unflatten: expected a PyTreeDef as first argument, got {type(treedef).__qualname__}")
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: IsLeafFn | None = None) -> list[Any]:
    """The leaves of `tree`, in `tree_flatten` order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: IsLeafFn | None = None) -> PyTreeDef:
    """The PyTreeDef of `tree`."""
    return tree_flatten(tree, is_leaf)[1]


def tree_flatten_with_path(tree: Any, is_leaf: IsLeafFn | None = None) -> tuple[list[tuple[KeyPath, Any]],
                                                                                 PyTreeDef]:
    """Like `tree_flatten`, but each leaf comes as `(key_path, leaf)`; render a path with `keystr`.

    >>> pairs, _ = tree_flatten_with_path({"a": [0, {"b": 1}]})
    >>> [(keystr(p), v) for p, v in pairs]
    [("['a'][0]", 0), ("['a'][1]['b']", 1)]
    """
    leaves: list[Any] = []
    paths: list[KeyPath] = []
    treedef = _flatten(tree, is_leaf, leaves, paths, ())
    return list(zip(paths, leaves, strict=True)), treedef


def tree_leaves_with_path(tree: Any, is_leaf: IsLeafFn | None = None) -> list[tuple[KeyPath, Any]]:
    """The `(key_path, leaf)` pairs of `tree`."""
    return tree_flatten_with_path(tree, is_leaf)[0]


def _up_to(treedef: PyTreeDef, tree: Any, lead: str, names: tuple[str, str]) -> list[Any]:
    """The subtrees of `tree` where `treedef` has its leaves (`PyTreeDef.flatten_up_to`); when `treedef` is no
    prefix of `tree`'s structure, a ValueError: `lead`, where the two differ, and the two structures after their
    `names` (labels with their colons)."""
    leaves: list[Any] = []
    try:
        treedef._flatten_up_to(tree, leaves)
    except _Mismatch as e:
        raise ValueError(f"{lead} {_where(e.path)}: {e.detail}.\n  {names[0]} {treedef!r}\n"
                         f"  {names[1]} {tree_structure(tree)!r}") from None
    return leaves


def _flatten_rest(treedef: PyTreeDef, rest: Sequence[Any], fn_name: str) -> list[list[Any]]:
    return [_up_to(treedef, r, f"{fn_name}: argument {i} does not have the structure of argument 0; they differ at",
                   ("argument 0:", f"argument {i}:")) for i, r in enumerate(rest, start=1)]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeafFn | None = None) -> Any:
    """Apply `f` to each leaf of `tree` (and the matching subtrees of each of `rest`), keeping the structure.

    Each tree in `rest` must have `tree`'s structure, or be deeper where `tree` has a leaf: `f` then gets
    that whole subtree. A mismatch is a ValueError naming the path and both structures.

    >>> tree_map(lambda x, y: x + y, {"a": 1, "b": (2, 3)}, {"a": 10, "b": (20, 30)})
    {'a': 11, 'b': (22, 33)}
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    all_leaves = [leaves, *_flatten_rest(treedef, rest, "tree_map")]
    return treedef.unflatten([f(*xs) for xs in zip(*all_leaves, strict=True)])


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeafFn | None = None) -> Any:
    """Like `tree_map`, but `f(key_path, leaf, *others)` also gets each leaf's key path."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    paths, leaves = [p for p, _ in pairs], [leaf for _, leaf in pairs]
    all_leaves = [leaves, *_flatten_rest(treedef, rest, "tree_map_with_path")]
    return treedef.unflatten(f(p, *xs) for p, *xs in zip(paths, *all_leaves, strict=True))


_NO_INITIAL = object()


def tree_reduce(f: Callable[[Any, Any], Any], tree: Any, initializer: Any = _NO_INITIAL,
                is_leaf: IsLeafFn | None = None) -> Any:
    """`functools.reduce(f, tree_leaves(tree))`, with an optional initializer."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIAL:
        if not leaves:
            raise TypeError("tree_reduce of a tree with no leaves needs an initializer")
        acc, leaves = leaves[0], leaves[1:]
    else:
        acc = initializer
    for leaf in leaves:
        acc = f(acc, leaf)
    return acc


def tree_reduce_associative(operation: Callable[[Any, Any], Any], tree: Any, *, identity: Any = _NO_INITIAL,
                            is_leaf: IsLeafFn | None = None) -> Any:
    """Reduce the leaves with an associative `operation` as a balanced tree of calls, `jax.tree.reduce_associative`:
    depth log2(n) instead of n, so reductions of many arrays make shallow graphs. `identity` is returned for a tree
    with no leaves (and is required then).

    >>> tree_reduce_associative(lambda a, b: (a, b), [1, 2, 3, 4, 5])
    ((1, 2), (3, (4, 5)))
    """
    def halves(xs: list[Any]) -> Any:
        if len(xs) == 1:
            return xs[0]
        return operation(halves(xs[:len(xs) // 2]), halves(xs[len(xs) // 2:]))

    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INITIAL:
            raise TypeError("tree_reduce_associative of a tree with no leaves needs an `identity`")
        return identity
    return halves(leaves)


def tree_all(tree: Any, is_leaf: IsLeafFn | None = None) -> bool:
    """True when every leaf is truthy."""
    return builtins.all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef, pytree_to_transpose: Any) -> Any:
    """An outer structure of inner structures turned inside out (`jax.tree.transpose`): a list of dicts of the same
    keys becomes a dict of lists.

    >>> tree_transpose(tree_structure([0, 0]), tree_structure({"a": 0, "b": 0}), [{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    {'a': [1, 3], 'b': [2, 4]}
    """
    flat, treedef = tree_flatten(pytree_to_transpose)
    inner_size, outer_size = inner_treedef.num_leaves, outer_treedef.num_leaves
    expected = tree_structure(tree_unflatten(outer_treedef, [tree_unflatten(inner_treedef, [0] * inner_size)] *
                                             outer_size))
    if treedef != expected:
        raise TypeError(f"tree_transpose: the tree's structure {treedef!r} is not the outer structure "
                        f"{outer_treedef!r} with the inner structure {inner_treedef!r} at each leaf ({expected!r})")
    rows = [flat[i * inner_size:(i + 1) * inner_size] for i in range(outer_size)]
    return tree_unflatten(inner_treedef, [tree_unflatten(outer_treedef, col) for col in zip(*rows, strict=True)]
                          if outer_size else [tree_unflatten(outer_treedef, [])] * inner_size)


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeafFn | None = None) -> Any:
    """`prefix_tree` with each leaf repeated over the subtree of `full_tree` it stands for: the structure of
    `full_tree` (`jax.tree.broadcast`).

    >>> tree_broadcast([1, 2], [(0, 0), {"a": 0}])
    [(1, 1), {'a': 2}]
    """
    prefix_leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    subtrees = _up_to(prefix_def, full_tree, "tree_broadcast: the first tree is not a prefix of the second; they "
                      "differ at", ("prefix:", "full:  "))
    return tree_unflatten(prefix_def, [tree_map(lambda _, p=p: p, sub, is_leaf=is_leaf)
                                       for p, sub in zip(prefix_leaves, subtrees, strict=True)])


# the short names of `jax.tree` (they shadow builtins in this module only: its code calls `builtins.all`)
flatten, unflatten, map, map_with_path = tree_flatten, tree_unflatten, tree_map, tree_map_with_path  # noqa: A001
leaves, structure, reduce, all = tree_leaves, tree_structure, tree_reduce, tree_all  # noqa: A001
flatten_with_path, leaves_with_path = tree_flatten_with_path, tree_leaves_with_path
transpose, broadcast = tree_transpose, tree_broadcast
reduce_associative = tree_reduce_associative
