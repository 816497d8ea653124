"""tgfx.tree: pytree flattening, structure equality and hashing, key paths, and the errors a user sees."""

import collections
import dataclasses
import pickle
from typing import Any, NamedTuple

import pytest
from helpers import count_calls
from hypothesis import given, settings
from hypothesis import strategies as st

from tgfx.tree import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    PyTreeDef,
    SequenceKey,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_with_keys,
    tree_all,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_structure,
    tree_unflatten,
)

# ---------------------------------------------------------------------------------------------------------------
# node types used below, registered once per process


class Point(NamedTuple):
    x: Any
    y: Any


class Other(NamedTuple):
    x: Any
    y: Any


class Box:
    """A custom node with a static tag in its aux data."""

    def __init__(self, tag: str, items: list) -> None:
        self.tag, self.items = tag, items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Box) and (self.tag, self.items) == (other.tag, other.items)

    def __repr__(self) -> str:
        return f"Box({self.tag!r}, {self.items!r})"


register_pytree_node(Box, lambda b: (b.items, b.tag), lambda tag, items: Box(tag, list(items)))


class Keyed:
    """A custom node that names its children for key paths."""

    def __init__(self, w: Any, b: Any) -> None:
        self.w, self.b = w, b

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Keyed) and (self.w, self.b) == (other.w, other.b)


register_pytree_with_keys(Keyed, lambda k: (((GetAttrKey("w"), k.w), (GetAttrKey("b"), k.b)), None),
                          lambda _aux, cs: Keyed(*cs))


@register_dataclass
@dataclasses.dataclass
class Linear:
    w: Any
    b: Any
    act: str = dataclasses.field(default="relu", metadata={"static": True})


@register_dataclass(meta_fields=["n"])
@dataclasses.dataclass(frozen=True)
class Frozen:
    a: Any
    n: int


# ---------------------------------------------------------------------------------------------------------------
# flatten and unflatten


def test_flatten_order_and_none_is_a_node() -> None:
    tree = [1, (2, None), {"b": 3, "a": 4}]
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2, 4, 3]  # dict children in sorted key order, as JAX does
    assert treedef.num_leaves == 4
    assert repr(treedef) == "PyTreeDef([*, (*, None), {'a': *, 'b': *}])"
    assert tree_unflatten(treedef, leaves) == tree


@pytest.mark.parametrize("tree", [None, (), [], {}, ((), [None, {}])])
def test_trees_without_leaves(tree: Any) -> None:
    leaves, treedef = tree_flatten(tree)
    assert leaves == [] and treedef.num_leaves == 0
    assert tree_unflatten(treedef, []) == tree


@pytest.mark.parametrize("leaf", [0, 1.5, "s", b"b", object(), {1, 2}, frozenset()])
def test_unregistered_objects_are_leaves(leaf: Any) -> None:
    leaves, treedef = tree_flatten(leaf)
    assert leaves == [leaf] and leaves[0] is leaf
    assert repr(treedef) == "PyTreeDef(*)" and treedef.is_leaf
    assert tree_unflatten(treedef, ["new"]) == "new"


def test_subclasses_of_containers_are_leaves() -> None:
    class MyTuple(tuple):
        pass

    t = MyTuple((1, 2))
    assert tree_leaves(t) == [t]


def test_namedtuple_keeps_type() -> None:
    leaves, treedef = tree_flatten(Point(1, (2, 3)))
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(Point(x=*, y=(*, *)))"
    out = tree_unflatten(treedef, [4, 5, 6])
    assert type(out) is Point and out == Point(4, (5, 6))


def test_dict_unflatten_in_sorted_order() -> None:
    out = tree_map(lambda x: x * 10, {"z": 1, "a": 2})
    assert out == {"a": 20, "z": 10} and list(out) == ["a", "z"]


def test_dict_with_unorderable_keys_is_deterministic() -> None:
    a, b = {1: "one", "a": "A"}, {"a": "A", 1: "one"}
    assert tree_flatten(a) == tree_flatten(b)
    assert tree_unflatten(tree_structure(a), tree_leaves(a)) == a


def test_ordered_dict_keeps_insertion_order_and_defaultdict_its_factory() -> None:
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    leaves, treedef = tree_flatten(od)
    assert leaves == [1, 2]
    assert type(tree_unflatten(treedef, leaves)) is collections.OrderedDict
    assert treedef != tree_structure(collections.OrderedDict([("a", 2), ("b", 1)]))

    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    leaves, treedef = tree_flatten(dd)
    assert leaves == [2, 1]
    out = tree_unflatten(treedef, leaves)
    assert type(out) is collections.defaultdict and out.default_factory is list and out == dd


def test_is_leaf_stops_descent_and_sees_none() -> None:
    tree = {"a": (1, 2), "b": None}
    assert tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple)) == [(1, 2)]
    assert tree_leaves(tree, is_leaf=lambda x: x is None) == [1, 2, None]
    assert tree_map(lambda x: x is None, tree, is_leaf=lambda x: x is None) == {"a": (False, False), "b": True}


def test_custom_node_with_aux() -> None:
    leaves, treedef = tree_flatten(Box("t", [1, [2]]))
    assert leaves == [1, 2]
    assert repr(treedef) == "PyTreeDef(CustomNode(Box['t'], [*, [*]]))"
    assert tree_unflatten(treedef, [3, 4]) == Box("t", [3, [4]])
    assert treedef != tree_structure(Box("u", [1, [2]]))  # aux data is part of the structure


def test_register_dataclass_with_static_field() -> None:
    lin = Linear(w=[1, 2], b=3, act="tanh")
    leaves, treedef = tree_flatten(lin)
    assert leaves == [1, 2, 3]
    assert repr(treedef) == "PyTreeDef(Linear(w=[*, *], b=*, act='tanh'))"
    assert tree_unflatten(treedef, [4, 5, 6]) == Linear([4, 5], 6, "tanh")
    assert treedef != tree_structure(Linear([1, 2], 3))
    assert tree_map(lambda x: -x, Frozen(a=1, n=2)) == Frozen(a=-1, n=2)


def test_register_dataclass_explicit_fields_on_plain_class() -> None:
    class Plain:
        def __init__(self, a: Any, k: int) -> None:
            self.a, self.k = a, k

    assert register_dataclass(Plain, data_fields=["a"], meta_fields=["k"]) is Plain
    out = tree_map(lambda x: x + 1, Plain(1, 7))
    assert (out.a, out.k) == (2, 7)


def test_register_dataclass_errors() -> None:
    class NotDc:
        pass

    with pytest.raises(TypeError, match="NotDc is not a dataclass"):
        register_dataclass(NotDc)

    @dataclasses.dataclass
    class Partial:
        a: Any
        b: Any

    with pytest.raises(ValueError, match=r"\['b'\] are neither data nor meta"):
        register_dataclass(Partial, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="both data and meta"):
        register_dataclass(Partial, data_fields=["a", "b"], meta_fields=["a"])
    with pytest.raises(ValueError, match="already registered"):
        register_dataclass(Linear)
    with pytest.raises(ValueError, match="already registered"):
        register_pytree_node(Box, lambda b: ((), None), lambda _a, _c: None)


def test_deep_tree() -> None:
    tree: Any = 0
    for i in range(200):
        tree = [tree, {"k": i}] if i % 2 else (tree,)
    leaves, treedef = tree_flatten(tree)
    assert tree_unflatten(treedef, leaves) == tree


# ---------------------------------------------------------------------------------------------------------------
# PyTreeDef identity


def test_treedef_equality_and_hash_ignore_leaves() -> None:
    a = tree_structure({"x": (1, [2.0]), "y": None})
    b = tree_structure({"y": None, "x": ("p", [object()])})
    assert a == b and hash(a) == hash(b)
    cache = {a: "compiled"}
    assert cache[b] == "compiled"


def test_unhashable_aux_data_hashes_without_it_and_compares_by_equality() -> None:
    # JAX's Common Gotchas registers a class whose aux data is a dict {'mul': ...} and jits a method on it: its treedef
    # hashes without the aux data and compares it by ==, so a cache keyed by treedefs (jit's) holds one entry per aux
    # value (hash() was a TypeError)
    class Scaled:
        def __init__(self, x: Any, mul: bool) -> None:
            self.x, self.mul = x, mul
    register_pytree_node(Scaled, lambda s: ((s.x,), {"mul": s.mul}), lambda aux, kids: Scaled(*kids, **aux))
    a, b, c = tree_structure(Scaled(1, True)), tree_structure(Scaled(2, True)), tree_structure(Scaled(1, False))
    assert a == b and hash(a) == hash(b) and a != c
    cache = {a: "mul", c: "pass"}
    assert cache[b] == "mul" and cache[tree_structure(Scaled(3, False))] == "pass" and len(cache) == 2


@pytest.mark.parametrize("a,b", [
    ((1, 2), [1, 2]),
    ((1, 2), (1, 2, 3)),
    ((1, 2), Point(1, 2)),
    (Point(1, 2), Other(1, 2)),
    ({"a": 1}, {"b": 1}),
    (None, 1),
    ((None,), (1,)),
    ((1, (2,)), ((1,), 2)),
    (Linear(1, 2), Linear(1, 2, "tanh")),
])
def test_treedef_inequality(a: Any, b: Any) -> None:
    assert tree_structure(a) != tree_structure(b)


def test_treedef_counts_children_and_pickle() -> None:
    treedef = tree_structure({"a": (1, 2), "b": [None, 3]})
    assert treedef.num_leaves == 3
    assert treedef.num_nodes == 7  # dict, tuple + 2 leaves, list + None + 1 leaf
    assert [c.num_leaves for c in treedef.children()] == [2, 1]
    assert treedef != "not a treedef"
    restored = pickle.loads(pickle.dumps(treedef))
    assert restored == treedef and hash(restored) == hash(treedef)


# ---------------------------------------------------------------------------------------------------------------
# key paths


def test_flatten_with_path_and_keystr() -> None:
    tree = {"a": [Point(x=1, y=2), Linear(3, 4)], "b": (Box("t", [5]), Keyed(6, 7))}
    pairs, treedef = tree_flatten_with_path(tree)
    assert treedef == tree_structure(tree)
    assert [(keystr(p), v) for p, v in pairs] == [
        ("['a'][0].x", 1), ("['a'][0].y", 2), ("['a'][1].w", 3), ("['a'][1].b", 4),
        ("['b'][0][<flat index 0>]", 5), ("['b'][1].w", 6), ("['b'][1].b", 7),
    ]
    assert pairs[0][0] == (DictKey("a"), SequenceKey(0), GetAttrKey("x"))
    assert pairs[4][0][-1] == FlattenedIndexKey(0)
    assert keystr(pairs[0][0], simple=True, separator="/") == "a/0/x"
    assert tree_leaves_with_path(7) == [((), 7)]


def test_leaf_paths_from_structure_alone() -> None:
    treedef = tree_structure({"a": [0, Point(1, 2)]})
    assert [keystr(p) for p in treedef.leaf_paths()] == ["['a'][0]", "['a'][1].x", "['a'][1].y"]


def test_tree_map_with_path() -> None:
    out = tree_map_with_path(lambda p, x, y: f"{keystr(p)}={x + y}", {"a": [1], "b": 2}, {"a": [10], "b": 20})
    assert out == {"a": ["['a'][0]=11"], "b": "['b']=22"}


# ---------------------------------------------------------------------------------------------------------------
# tree_map and friends


def test_tree_map_several_trees() -> None:
    out = tree_map(lambda x, y, z: x + y + z, (1, {"a": 2}), (10, {"a": 20}), (100, {"a": 200}))
    assert out == (111, {"a": 222})


def test_tree_map_rest_may_be_deeper_at_leaves() -> None:
    out = tree_map(lambda x, sub: (x, sub), {"a": 1, "b": 2}, {"a": [1, 2], "b": {"c": None}})
    assert out == {"a": (1, [1, 2]), "b": (2, {"c": None})}
    assert tree_structure((0, 0)).flatten_up_to(([1, 2], {"a": 3})) == [[1, 2], {"a": 3}]


def test_tree_map_result_can_be_tree() -> None:
    out = tree_map(lambda x: (x, x), [1, 2])
    assert out == [(1, 1), (2, 2)]
    assert tree_structure(out) == tree_structure([(0, 0), (0, 0)])


def test_tree_reduce_and_all() -> None:
    assert tree_reduce(lambda a, b: a + b, {"a": [1, 2], "b": 3}) == 6
    assert tree_reduce(lambda a, b: a + b, [], 0) == 0
    with pytest.raises(TypeError, match="initializer"):
        tree_reduce(lambda a, b: a + b, [])
    assert tree_all([True, (1, "x")]) and not tree_all({"a": 0})


# ---------------------------------------------------------------------------------------------------------------
# errors a user sees


@pytest.mark.parametrize("a,b,path,detail", [
    ({"a": [1, (2, 3)]}, {"a": [1, [2, 3]]}, "['a'][1]", "expected a tuple of length 2, got a list of length 2"),
    ({"a": [1, (2, 3)]}, {"a": [1, (2, 3, 4)]}, "['a'][1]", "expected a tuple of length 2, got a tuple of length 3"),
    ({"a": 1, "b": 2}, {"a": 1, "c": 2}, "the root", "missing ['b'], unexpected ['c']"),
    ([None], [1], "[0]", "expected None, got a leaf of type int"),
    (Point(1, 2), (1, 2), "the root", "expected a Point of length 2, got a tuple of length 2"),
    ({"k": Box("t", [1])}, {"k": Box("u", [1])}, "['k']", "got Box with aux data 'u'"),
    ({"k": Linear(1, 2)}, {"k": 3}, "['k']", "expected a Linear node"),
])
def test_tree_map_mismatch_names_path_and_structures(a: Any, b: Any, path: str, detail: str) -> None:
    with pytest.raises(ValueError) as info:
        tree_map(lambda x, y: x, a, b)
    msg = str(info.value)
    assert f"differ at {path if path == 'the root' else 'path ' + path}:" in msg
    assert detail in msg
    assert repr(tree_structure(a)) in msg and repr(tree_structure(b)) in msg


def test_flatten_up_to_mismatch() -> None:
    with pytest.raises(ValueError, match=r"differ at path \[1\]") as info:
        tree_structure((1, (2,))).flatten_up_to((1, 2))
    assert "PyTreeDef((*, (*,)))" in str(info.value) and "PyTreeDef((*, *))" in str(info.value)


def test_unflatten_wrong_number_of_leaves() -> None:
    treedef = tree_structure({"a": 1, "b": [2, 3]})
    with pytest.raises(ValueError, match=r"has 3 leaves, but got 2 leaves; the leaves ran out at path \['b'\]\[1\]"):
        tree_unflatten(treedef, [1, 2])
    with pytest.raises(ValueError, match=r"got 5 leaves; 2 left over") as info:
        tree_unflatten(treedef, range(5))
    assert "PyTreeDef({'a': *, 'b': [*, *]})" in str(info.value)
    with pytest.raises(TypeError, match="expected a PyTreeDef"):
        tree_unflatten([1], [1])  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------------------
# random structures


leaf_st = st.one_of(st.integers(), st.text(max_size=3), st.floats(allow_nan=False))
tree_st = st.recursive(
    st.one_of(leaf_st, st.none()),
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.lists(kids, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=3), kids, max_size=4),
        st.builds(Point, kids, kids),
        st.builds(Linear, kids, kids, st.sampled_from(["relu", "tanh"])),
        st.builds(Box, st.sampled_from(["p", "q"]), st.lists(kids, max_size=3)),
    ),
    max_leaves=20,
)


@dataclasses.dataclass(frozen=True)
class Tag:
    """A leaf wrapping another leaf (dataclasses are leaves unless registered)."""

    value: Any


def shape_of(x: Any) -> Any:
    """An independent, leafless description of a tree's structure, to check PyTreeDef equality against."""
    if x is None:
        return "None"
    if isinstance(x, Point):
        return ("Point", shape_of(x.x), shape_of(x.y))
    if isinstance(x, Linear):
        return ("Linear", x.act, shape_of(x.w), shape_of(x.b))
    if isinstance(x, Box):
        return ("Box", x.tag, tuple(shape_of(c) for c in x.items))
    if isinstance(x, list | tuple):
        return (type(x).__name__, tuple(shape_of(c) for c in x))
    if isinstance(x, dict):
        return ("dict", tuple(sorted((k, shape_of(v)) for k, v in x.items())))
    return "*"


def follow(tree: Any, path: tuple) -> Any:
    for key in path:
        if isinstance(key, SequenceKey):
            tree = tree[key.idx]
        elif isinstance(key, DictKey):
            tree = tree[key.key]
        elif isinstance(key, GetAttrKey):
            tree = getattr(tree, key.name)
        else:
            tree = tree.items[key.key]  # the only FlattenedIndexKey node here is Box
    return tree


@settings(max_examples=200, deadline=None)
@given(tree_st)
def test_random_round_trip(tree: Any) -> None:
    leaves, treedef = tree_flatten(tree)
    assert isinstance(treedef, PyTreeDef) and treedef.num_leaves == len(leaves)
    assert tree_unflatten(treedef, leaves) == tree
    # leaves may be replaced by anything, including containers, which then stay leaves of the new tree
    marked = tree_unflatten(treedef, [("leaf", i) for i in range(len(leaves))])
    assert tree_leaves(marked, is_leaf=lambda x: isinstance(x, tuple) and x[:1] == ("leaf",)) == \
        [("leaf", i) for i in range(len(leaves))]
    # key paths lead back to their leaves, and agree with the paths computed from the structure alone
    pairs, treedef2 = tree_flatten_with_path(tree)
    assert treedef2 == treedef and [v for _, v in pairs] == leaves
    assert all(follow(tree, p) is v for p, v in pairs)
    assert [p for p, _ in pairs] == treedef.leaf_paths()
    assert repr(treedef).startswith("PyTreeDef(")


@settings(max_examples=200, deadline=None)
@given(tree_st, tree_st)
def test_random_treedef_equality_matches_structure(a: Any, b: Any) -> None:
    da, db = tree_structure(a), tree_structure(b)
    assert (da == db) == (shape_of(a) == shape_of(b))
    if da == db:
        assert hash(da) == hash(db)
    # the same structure with other leaves has an equal, equally hashed treedef
    relabeled = tree_map(Tag, a)
    assert tree_structure(relabeled) == da and hash(tree_structure(relabeled)) == hash(da)
    assert tree_map(lambda x, y: y, a, relabeled) == relabeled


@settings(max_examples=200, deadline=None)
@given(tree_st, st.data())
def test_random_mismatch_names_the_path_of_the_leaf_that_differs(tree: Any, data: st.DataObject) -> None:
    """A tree whose k-th leaf became a pair matches `tree` where `tree` is the prefix (the pair is that leaf's
    subtree), and fails the other way round naming leaf k's key path: the path is filled in only as the mismatch
    passes each node on its way out (`PyTreeDef._flatten_up_to`)."""
    pairs, treedef = tree_flatten_with_path(tree)
    if not pairs:
        return
    k = data.draw(st.integers(0, len(pairs) - 1))
    deeper = tree_unflatten(treedef, [(v, v) if i == k else v for i, (_, v) in enumerate(pairs)])
    assert tree_map(lambda a, b: b, tree, deeper) == deeper
    with pytest.raises(ValueError) as info:
        tree_map(lambda a, b: a, deeper, tree)
    assert f"differ at path {keystr(pairs[k][0])}:" in str(info.value) if pairs[k][0] else \
        "differ at the root:" in str(info.value)


def test_tree_map_over_a_dict_of_leaves_calls_few_functions() -> None:
    """`tree_map(f, acc, grads)` over two 20-leaf dicts (an eager gradient accumulation between jitted steps): a
    leaf child is taken where its node is flattened, not by a call of its own, and the key paths, descriptions and
    per-leaf generators a mismatch message needs are built only for a mismatch. Its Python and C calls beside f's:
    at most 150 (149 measured; 360 before)."""
    acc = {f"w{k}": float(k) for k in range(20)}
    grads = {f"w{k}": 0.5 for k in range(20)}
    calls, out = count_calls(lambda: tree_map(lambda a, b: a, acc, grads), c_calls=True)
    assert out == acc
    assert calls - 20 <= 150, calls   # (less f's 20 calls)


def test_register_pytree_node_class_decorator():
    from tgfx.tree import register_pytree_node_class

    @register_pytree_node_class
    class Affine:
        def __init__(self, w, b):
            self.w, self.b = w, b

        def tree_flatten(self):
            return (self.w, self.b), "affine"

        @classmethod
        def tree_unflatten(cls, aux, children):
            assert aux == "affine"
            return cls(*children)

    import numpy as np

    import tgfx as tg
    p = Affine(tg.asarray(np.ones(2, np.float32)), tg.asarray(np.zeros(2, np.float32)))
    g = tg.grad(lambda p: (p.w * 3.0 + p.b).sum())(p)
    assert isinstance(g, Affine) and g.w.tolist() == [3.0, 3.0] and g.b.tolist() == [1.0, 1.0]
    assert tg.tree.leaves(tg.tree.map(lambda x: x * 2, p))[0].tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="tree_flatten"):
        register_pytree_node_class(type("NoMethods", (), {}))


def test_jax_tree_short_names():
    import tgfx as tg
    leaves, treedef = tg.tree.flatten({"a": 1, "b": (2, 3)})
    assert leaves == [1, 2, 3] and tg.tree.unflatten(treedef, [4, 5, 6]) == {"a": 4, "b": (5, 6)}
    assert tg.tree.map(lambda x: x + 1, [1, 2]) == [2, 3] and tg.tree.leaves([1, [2]]) == [1, 2]
    assert tg.tree.structure((1, 2)) == tg.tree.tree_structure((0, 0)) and tg.tree.reduce(max, [3, 9, 1]) == 9
    assert tg.tree.all([1, True]) and not tg.tree.all([1, 0])
