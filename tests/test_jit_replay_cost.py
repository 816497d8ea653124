"""What a jitted call's replay costs in Python per leaf of its arguments and results, by counts (`sys.setprofile`'s
call events, as tests/test_eager_cost.py counts an eager op's): a training step's hundreds of parameters, moments and
results are flattened, bound and built again every call, and a Python call per node or leaf more is a step's host time
(realnvp's step: 218 leaves in, 218 results out in 166 lists and dicts)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import as_in_a_fresh_process, count_calls

import tgfx as tg
from tgfx import config


def _params(n: int) -> list[dict[str, tg.Tensor]]:
    """n layers of {"b", "w"}: 2n leaves in n + 1 nodes, on the CPU whatever the default device (the bound counts
    the CPU queue's submission)."""
    rng = np.random.default_rng(n)
    return [{"b": tg.Tensor(rng.standard_normal(3).astype(np.float32), device="CPU"),
             "w": tg.Tensor(rng.standard_normal((2, 3)).astype(np.float32), device="CPU")} for _ in range(n)]


@tg.jit
def _step(p: list, m: list, lr: float) -> tuple:
    new_m = tg.tree_util.tree_map(lambda m, p: 0.9 * m + p, m, p)
    return tg.tree_util.tree_map(lambda p, m: p - lr * m, p, new_m), new_m


def _replay_calls(n: int) -> int:
    """The Python calls of one replay of `_step` on n layers (traced and replayed before), its results read."""
    p, m = _params(n), _params(n)
    for _ in range(2):
        tg.block_until_ready(_step(p, m, 0.1))
    with as_in_a_fresh_process():
        calls, out = count_calls(lambda: _step(p, m, 0.1))
    want_m = [{k: 0.9 * m[i][k].numpy() + p[i][k].numpy() for k in ("b", "w")} for i in range(n)]
    for i in (0, n - 1):
        for k in ("b", "w"):
            np.testing.assert_allclose(out[1][i][k].numpy(), want_m[i][k], rtol=1e-6)
            np.testing.assert_allclose(out[0][i][k].numpy(), p[i][k].numpy() - 0.1 * want_m[i][k], rtol=1e-6)
    assert type(out) is tuple and type(out[0]) is list and type(out[0][0]) is dict and list(out[0][0]) == ["b", "w"]
    return calls


def test_a_replays_python_calls_grow_by_few_per_leaf(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per leaf of the arguments and its result (8 leaves in and out, against 800): two calls, the result's Tensor and
    the flatten of the dict holding the leaf and its sibling. Before: 4.5, the results' tree built node by node
    (`tree_unflatten`: `PyTreeDef._build`, its registration, its unflatten, per dict of two leaves; now one call for
    the whole tree, `tree_compiled`) and a flatten call per Tensor leaf (now taken by its container's loop)."""
    monkeypatch.setattr(config.SPEC, "value", 0)
    few, many = _replay_calls(2), _replay_calls(200)
    per_leaf = (many - few) / 792
    assert per_leaf <= 2.1, (few, many, per_leaf)


def test_a_compiled_builder_makes_what_tree_unflatten_makes() -> None:
    import collections

    from tgfx.tree import tree_flatten, tree_unflatten
    from tgfx.tree_compiled import unflattener
    Point = collections.namedtuple("Point", "x y")
    trees = [1, (), (1,), [1, (2, 3)], {"b": 1, "a": [2, None, 3]}, None, Point(1, {"z": (2,)}),
             collections.OrderedDict([("z", 1), ("a", 2)]), collections.defaultdict(list, {"k": [1, 2]}),
             [[[[[[[[1]]]]]]]], [(i, {"w": i}) for i in range(50)]]
    for tree in trees:
        leaves, treedef = tree_flatten(tree)
        for leaf in (None, str):
            got = unflattener(treedef, leaf)(leaves)
            want = tree_unflatten(treedef, leaves if leaf is None else [leaf(v) for v in leaves])
            assert got == want and type(got) is type(want), (tree, got)
            assert tree_flatten(got)[1] == treedef
    deep: object = 1
    for _ in range(300):   # nested past what Python's parser takes: built by tree_unflatten
        deep = [deep]
    leaves, treedef = tree_flatten(deep)
    assert unflattener(treedef, str)(leaves) == tree_unflatten(treedef, ["1"])
