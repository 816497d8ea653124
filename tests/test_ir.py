"""The IR on its own: hash-consing, keys, derived properties, rewriting and the spec. No device needed."""
import math
import subprocess
import sys
from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tgfx.config import Context
from tgfx.dtypes import dtypes
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import PatternMatcher, UPat, graph_rewrite
from tgfx.ir.spec import SpecError
from tgfx.ir.uop import UOp, _stable_repr


def buf(n: int = 6, uid: int = 1) -> UOp:
    return UOp(Ops.BUFFER, dtypes.float32, (), (uid, "CPU:0", n))


def test_negative_zero_is_a_constant_of_its_own():
    # -0.0 == 0.0 and they hash alike: keyed as they are, a CONST of -0.0 was the CONST of 0.0 made before it, and
    # `x * -0.0` (-0.0 for x > 0) came out +0.0; an eager graph's template was shared between the two values too
    import numpy as np

    import tgfx as tg
    import tgfx.numpy as tnp
    pos, neg = UOp.const(dtypes.float32, 0.0), UOp.const(dtypes.float32, -0.0)
    assert pos is not neg and str(neg.arg) == "-0.0" and UOp.const(dtypes.float32, -0.0) is neg
    assert neg.key != pos.key
    ones = tnp.ones(2)
    for _ in range(2):   # each value after the other, both ways round
        assert np.signbit((ones * 0.0).numpy()).tolist() == [False, False]
        assert np.signbit((ones * -0.0).numpy()).tolist() == [True, True]
    assert np.signbit(tnp.full(3, -0.0).numpy()).all()
    assert np.signbit(tg.jit(lambda x: x * -0.0)(ones).numpy()).all()
    assert not np.signbit(tg.jit(lambda x: x * 0.0)(ones).numpy()).any()


def test_complex_constants_with_negative_zero_parts_are_their_own():
    # -0-0j == 0j == complex(0, -0.0) to Python: keyed as they are, `full(2, 0j)` made after `full(2, -0-0j)` was -0-0j
    import numpy as np

    import tgfx.numpy as tnp
    values = [complex(-0.0, -0.0), 0j, complex(0.0, -0.0), complex(-0.0, 0.0), complex(1.0, -0.0), 1 + 0j]
    consts = [UOp.const(dtypes.complex64, v) for v in values]
    assert len({id(c) for c in consts}) == len(values)
    assert UOp.const(dtypes.complex64, complex(1.0, -0.0)) is consts[4]
    for v in values + values[::-1]:
        got = tnp.full(2, v, tnp.complex64).numpy()
        assert np.signbit(got.real).tolist() == [np.signbit(v.real)] * 2
        assert np.signbit(got.imag).tolist() == [np.signbit(v.imag)] * 2


def test_hash_consing_gives_the_same_object():
    a = UOp(Ops.RESHAPE, dtypes.float32, (buf(),), (2, 3))
    b = UOp(Ops.RESHAPE, dtypes.float32, (buf(),), (2, 3))
    assert a is b
    assert (a + a) is (a + a)
    assert UOp(Ops.RESHAPE, dtypes.float32, (buf(),), (3, 2)) is not a


def test_interning_table_forgets_nodes_that_die():
    import gc
    import pickle

    from tgfx.ir import uop as uop_module

    def key(uid: int) -> tuple:
        return (Ops.BUFFER, dtypes.float32, (), (uid, "CPU:0", 6), None)
    gc.collect()
    gc.disable()                                          # only these nodes come and go meanwhile
    try:
        before = len(uop_module._cache)
        nodes = [UOp(Ops.RESHAPE, dtypes.float32, (buf(uid=10**12 + i),), (2, 3)) for i in range(1000)]
        assert len(uop_module._cache) == before + 2000
        assert all(key(10**12 + i) in uop_module._cache for i in range(1000))
        again = UOp(Ops.RESHAPE, dtypes.float32, (buf(uid=10**12),), (2, 3))
        assert again is nodes[0]
        del nodes, again
        assert len(uop_module._cache) == before          # each node removed its own entry as it died
        assert not any(key(10**12 + i) in uop_module._cache for i in range(1000))
    finally:
        gc.enable()
    fresh = UOp(Ops.RESHAPE, dtypes.float32, (buf(uid=10**12),), (2, 3))
    assert fresh.src[0].arg == (10**12, "CPU:0", 6)       # rebuilt, not a dead entry
    # dtypes are interned too: equal means identical, also through pickling and vector widths
    v4 = dtypes.float32.vec(4)
    assert v4 is dtypes.float32.vec(4) is dtypes.float32.vec(8).vec(4) and v4.scalar is dtypes.float32
    assert pickle.loads(pickle.dumps(v4)) is v4 and pickle.loads(pickle.dumps(dtypes.bfloat16)) is dtypes.bfloat16


def test_a_node_the_cyclic_collector_frees_forgets_its_entry_and_releases_its_sources():
    # a node in a reference cycle is freed by the collector, which clears its weak references before it runs the
    # node's finaliser: the entry left behind held the node's sources (a first call's kernels, index level) for good
    import gc
    import weakref

    from tgfx.ir import uop as uop_module
    gc.collect()
    before = len(uop_module._cache)
    src = UOp(Ops.RESHAPE, dtypes.float32, (buf(uid=10**12 + 7),), (2, 3))
    node = UOp(Ops.SINK, None, (src,))
    node.__dict__["cycle"] = node                        # as a kernel's cached order held its sink
    src_alive = weakref.ref(src)
    del node, src
    gc.collect()
    assert src_alive() is None
    assert len(uop_module._cache) == before
    assert not any(ref() is None for ref in uop_module._cache.values())


def test_graphs_rewritten_while_kept_live_until_released():
    # a program's kernels are lowered while their rewritten graphs are kept (their memos serve the next kernel), and
    # released together by reference counts, none left for the cyclic collector
    import gc
    import weakref

    from tgfx.ir.pattern import keep_rewritten, release_rewritten
    pm = PatternMatcher([(UPat(Ops.RESHAPE, src=(UPat.var("x"),)), lambda x: x if x.op is Ops.BUFFER else None)])

    def rewritten(uid: int) -> weakref.ref:
        sink = UOp(Ops.SINK, None, (UOp(Ops.RESHAPE, dtypes.float32, (buf(uid=uid),), (2, 3)),))
        out = graph_rewrite(sink, pm)
        assert out.src[0].op is Ops.BUFFER and len(sink.toposort()) == 3
        return weakref.ref(sink)
    gc.disable()
    try:
        assert rewritten(10**12 + 11)() is None          # freed as its last user lets go
        was = keep_rewritten()
        kept = rewritten(10**12 + 12)
        assert kept() is not None
        release_rewritten(was)
        assert kept() is None                              # by its reference count: the collector is off
    finally:
        gc.enable()


def test_key_is_stable_across_processes():
    code = ("from tgfx.ir.uop import UOp; from tgfx.ir.ops import Ops; from tgfx.dtypes import dtypes;"
            "p = UOp(Ops.PARAM, dtypes.float32, (), (0, (4,), 'CPU:0'));"
            "c = UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, 1.5),),"
            " (1,)),), (4,));"
            "print((p * p + c).key)")
    keys = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
            for _ in range(2)}
    assert len(keys) == 1
    p = UOp(Ops.PARAM, dtypes.float32, (), (0, (4,), "CPU:0"))
    c = UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, 1.5),), (1,)),),
            (4,))
    assert keys == {(p * p + c).key}


def _reference_repr(x: object) -> str:
    """`_stable_repr` as it was written before its fast paths: the text every disk cache's keys were made from."""
    if isinstance(x, UOp):
        return x.key
    if isinstance(x, (tuple, list)):
        return "(" + ",".join(_reference_repr(y) for y in x) + ")"
    if isinstance(x, float):
        return repr(x) if not math.isnan(x) else "nan"
    if callable(x) and hasattr(x, "__qualname__"):
        return f"{getattr(x, '__module__', '')}.{x.__qualname__}"
    return repr(x)


class _Pair(NamedTuple):
    a: int
    b: float


_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=3),
                    st.sampled_from([Ops.ADD, Ops.MAX, dtypes.float32, _Pair(1, -0.0), math.floor]))
_args = st.recursive(_leaves, lambda kids: st.one_of(st.tuples(kids, kids), st.lists(kids, max_size=3).map(tuple),
                                                     st.lists(kids, max_size=3)), max_leaves=12)


@given(_args)
def test_stable_repr_fast_paths_give_the_general_rules_text(arg):
    assert _stable_repr(arg) == _reference_repr(arg)


def test_keys_are_the_ones_disk_caches_hold():
    # keys made before `_stable_repr`'s fast paths (e89a928): a cache written then is still read
    def full(v: float, shape: tuple[int, ...]) -> UOp:
        c = UOp(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, v),), (1,) * len(shape))
        return UOp(Ops.EXPAND, dtypes.float32, (c,), shape)
    p = UOp(Ops.PARAM, dtypes.float32, (), (0, (4,), "CPU:0"))
    s = UOp(Ops.PAD, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (p,), (2, 2)),), ((1, 0), (0, 2)))
    z = UOp(Ops.REDUCE_AXIS, dtypes.float32, (s,), (Ops.ADD, (1,))) * full(-0.0, (3, 1)) + full(1.5, (3, 1))
    keys = [UOp(Ops.CMPLT, dtypes.bool, (z, z)).where(z, z).key, UOp(Ops.CONST, dtypes.bool, (), True).key,
            UOp(Ops.CONST, dtypes.int32, (), 7, tag=("t", 1)).key]
    assert keys == ["d40b70442242f5f2310cfd6d58b0a73b1918e7614b1c14db30145e87f9076683",
                    "ab450cbd96e2c014efe83d56e92e29d020bb07df10bcf966a3d298007b8e18b6",
                    "0d792c4a3f269680806fa687fa0d06a68b51a2fc334e3474d0c93ed7ce096693"]


def test_derived_shape_device_and_bounds():
    r = UOp(Ops.RESHAPE, dtypes.float32, (buf(),), (2, 3))
    assert r.shape == (2, 3) and r.device == "CPU:0"
    assert UOp(Ops.PERMUTE, dtypes.float32, (r,), (1, 0)).shape == (3, 2)
    assert UOp(Ops.PAD, dtypes.float32, (r,), ((1, 0), (2, 2))).shape == (3, 7)
    assert UOp(Ops.REDUCE_AXIS, dtypes.float32, (r,), (Ops.ADD, (1,))).shape == (2, 1)
    rng = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, 10),), (0, "loop"))
    assert (rng.vmin, rng.vmax) == (0, 9)
    e = rng * 4 + 3
    assert (e.vmin, e.vmax) == (3, 39)
    assert ((e // 4).vmin, (e // 4).vmax) == (0, 9)
    assert ((e % 4).vmin, (e % 4).vmax) == (0, 3)


def test_toposort_and_substitute_on_a_deep_graph():
    x = buf(1)
    one = UOp(Ops.RESHAPE, dtypes.float32, (UOp.const(dtypes.float32, 1.0),), (1,))
    for _ in range(100_000):
        x = x + one
    order = x.toposort()
    assert order[-1] is x and len(order) == 100_003
    y = x.substitute({buf(1): buf(1, uid=2)})
    assert buf(1, uid=2) in y.toposort() and buf(1) not in y.toposort()


def test_graph_rewrite_reaches_a_fixed_point_on_100k_nodes():
    one = UOp.const(dtypes.int32, 1)
    x = UOp(Ops.VARIABLE, dtypes.int32, (), ("n", 0, 10))
    for _ in range(100_000):
        x = x * one
    pm = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("c"))), lambda a, c: a if c.arg == 1 else None)])
    assert graph_rewrite(x, pm) is UOp(Ops.VARIABLE, dtypes.int32, (), ("n", 0, 10))


def test_graph_rewrite_skips_a_kernel_holding_no_op_its_rules_match():
    a, b = UOp(Ops.VARIABLE, dtypes.int32, (), ("a", 0, 5)), UOp.const(dtypes.int32, 3)
    tried: list[Ops] = []

    def rule(x: UOp) -> UOp | None:
        tried.append(x.op)
        return None
    only_mul = PatternMatcher([(UPat(Ops.MUL, name="x"), rule)])
    assert only_mul.ops == {Ops.MUL}
    sink = UOp(Ops.SINK, None, (a + b,))
    assert graph_rewrite(sink, only_mul) is sink and tried == []      # no MUL anywhere: not walked
    sink = UOp(Ops.SINK, None, (a * b + b,))
    assert graph_rewrite(sink, only_mul) is sink and tried == [Ops.MUL]
    tried.clear()
    anything = PatternMatcher([(UPat(name="x"), rule)])   # a rule for every op: always walked
    assert anything.ops is None
    graph_rewrite(UOp(Ops.SINK, None, (a + b,)), anything)
    assert Ops.ADD in tried


def test_a_rule_that_only_names_its_node_is_called_without_matching(monkeypatch: pytest.MonkeyPatch):
    # `UPat(ops, name="x")` matches every node of its ops: its rule gets the node at once, no UPat.match (the index
    # simplifier's constant folds and most of its other tries), and the answers are the general matcher's
    a, b = UOp(Ops.VARIABLE, dtypes.int32, (), ("a", 0, 5)), UOp.const(dtypes.int32, 3)
    sink, want = UOp(Ops.SINK, None, ((a * b) + b,)), UOp(Ops.SINK, None, (a + b,))
    mul, anything, int_mul = UPat(Ops.MUL, name="x"), UPat(name="y"), UPat(Ops.MUL, dtypes.int32, name="x")
    matched: list[UPat] = []
    match = UPat.match
    monkeypatch.setattr(UPat, "match", lambda self, u, store: matched.append(self) or match(self, u, store))
    named = PatternMatcher([(mul, lambda x: x.src[0] if x.src[1] is b else None),
                            (anything, lambda ctx, y: ctx.append(y.op) or None)])
    seen: list[Ops] = []
    assert graph_rewrite(sink, named, ctx=seen) is want
    assert {Ops.ADD, Ops.SINK} <= set(seen)   # the wildcard rule tried on the new sum too
    assert graph_rewrite(a * b, PatternMatcher([(int_mul, lambda x: x.src[0])])) is a   # a dtype to check
    assert [p for p in matched if p in (mul, anything, int_mul)] == [int_mul]


def test_pattern_captures_and_commutative_sources():
    a, b = UOp(Ops.VARIABLE, dtypes.int32, (), ("a", 0, 5)), UOp.const(dtypes.int32, 3)
    pm = PatternMatcher([(UPat(Ops.ADD, src=[UPat.cvar("c"), UPat.var("x")]), lambda c, x: x * c)])
    assert graph_rewrite(a + b, pm) is a * b
    assert graph_rewrite(b + a, pm) is a * b


def test_rewrite_with_ctx_and_bottom_up():
    seen = []
    a = UOp(Ops.VARIABLE, dtypes.int32, (), ("a", 0, 5))
    pm = PatternMatcher([(UPat(Ops.NEG, name="x"), lambda ctx, x: ctx.append(x.src[0].op) or None)])
    graph_rewrite(a.alu(Ops.NEG).alu(Ops.NEG), pm, ctx=seen, bottom_up=True)
    assert seen == [Ops.NEG, Ops.VARIABLE]


def test_spec_rejects_malformed_nodes():
    with Context(SPEC=1):
        with pytest.raises(SpecError, match="RESHAPE"):
            UOp(Ops.RESHAPE, dtypes.float32, (buf(),), (4, 4))
        with pytest.raises(SpecError, match="ADD"):
            UOp(Ops.ADD, dtypes.float32, (buf(), UOp.const(dtypes.int32, 1)))
        with pytest.raises(SpecError, match="EXP2"):
            UOp(Ops.EXP2, dtypes.int32, (UOp.const(dtypes.int32, 1),))
        with pytest.raises(SpecError, match="EXPAND"):
            UOp(Ops.EXPAND, dtypes.float32, (UOp(Ops.RESHAPE, dtypes.float32, (buf(),), (2, 3)),), (4, 3))


def test_ops_are_named_singletons():
    """`Ops` reads as an enum (names, numbers, iteration, lookup by name) and its members stay themselves through
    pickling and copies (a UOp pickled to a compile worker hashes its op by identity)."""
    import copy
    import pickle
    assert Ops["ADD"] is Ops.ADD and Ops.ADD.name == "ADD" and repr(Ops.ADD) == str(Ops.ADD) == "Ops.ADD"
    assert len(Ops) == len(set(Ops)) == len({op.value for op in Ops}) and Ops.SINK in set(Ops)
    assert all(isinstance(op, Ops) for op in Ops)
    assert pickle.loads(pickle.dumps(Ops.MUL)) is Ops.MUL and copy.deepcopy({Ops.MUL: 1}) == {Ops.MUL: 1}
    u = UOp(Ops.RESHAPE, dtypes.float32, (buf(),), (2, 3))
    assert pickle.loads(pickle.dumps(u)) is u


def test_graph_rewrite_result_that_is_a_later_node_of_the_graph():
    """A rule's result that is also a node of the graph is the same node for every user (graph_rewrite walks the
    graph's order, a rule's result as a graph of its own with what is done shared): the rules see it as a source of
    the graph and once more as the rule's result (the fixed point of the node a rule rewrote), never again."""
    a, b = UOp(Ops.VARIABLE, dtypes.int32, (), ("a", 0, 5)), UOp(Ops.VARIABLE, dtypes.int32, (), ("b", 0, 5))
    seen: list[UOp] = []

    def neg_neg(x: UOp) -> UOp | None:
        return x.src[0].src[0] if x.src[0].op is Ops.NEG else None

    def count(x: UOp) -> None:
        seen.append(x)
    pm = PatternMatcher([(UPat(Ops.NEG, name="x"), neg_neg), (UPat(Ops.MUL, name="x"), count)])
    later = a * b
    root = UOp(Ops.SINK, None, ((later.alu(Ops.NEG)).alu(Ops.NEG) + 1, later + 2))
    out = graph_rewrite(root, pm)
    assert out is UOp(Ops.SINK, None, (later + 1, later + 2))
    assert seen == [later, later]
