"""The compiled flatten of a jitted call's arguments (tgfx/transforms/jit_flat.py): a call whose structure, leaf types
or Tensor signatures differ from the compiled one's is no match, and runs the program its own signature traces (or
the one it has), never the compiled structure's."""
from __future__ import annotations

import collections

import numpy as np
import pytest
from helpers import as_in_a_fresh_process, count_calls, count_opcodes

import tgfx as tg
from tgfx import config
from tgfx.transforms.jit_flat import MIN_LEAVES, MISSES

Pair = collections.namedtuple("Pair", "a b")


def _t(*shape: int, seed: int = 0, dtype: type = np.float32) -> tg.Tensor:
    return tg.Tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype), device="CPU")


def _tree(n: int, seed: int = 0) -> list:
    return [{"w": _t(2, 3, seed=seed + i), "b": _t(3, seed=seed + 100 + i)} for i in range(n)]


def _total(tree: object) -> float:
    """The sum of every leaf's values, numpy's: what `f` computes."""
    return float(sum(np.asarray(x, dtype=np.float64).sum() for x in tg.tree_util.tree_leaves(tree)))


@tg.jit
def f(*args: object, **kwargs: object) -> tg.Tensor:
    return sum(tg.numpy.sum(x) * 1.0 for x in tg.tree_util.tree_leaves((args, kwargs)))


def _check(*args: object, **kwargs: object) -> None:
    got = float(f(*args, **kwargs))
    want = _total(tg.tree_util.tree_map(lambda x: x.numpy() if isinstance(x, tg.Tensor) else x, (args, kwargs)))
    assert np.isclose(got, want, rtol=1e-5, atol=1e-5), (got, want)


def test_calls_of_other_structures_leaves_and_kinds_run_their_own_program() -> None:
    f.clear_cache()
    base = _tree(6)
    for _ in range(3):   # traced, then compiled (a fast hit)
        _check(base, 2.0)
    assert f._flat is not None and f._flat_tried
    variants = [
        (_tree(6, seed=7), 2.0),                                    # same structure, other values: a match
        (_tree(5), 2.0),                                            # a shorter list
        (tuple(_tree(6)), 2.0),                                     # a tuple for the list
        ([{"w": x["w"], "c": x["b"]} for x in _tree(6)], 2.0),      # another key
        ([{"w": x["w"], "b": x["b"], "z": None} for x in _tree(6)], 2.0),   # a key more
        ([{"w": x["w"], "b": _t(4)} for x in _tree(6)], 2.0),       # a leaf of another shape
        ([{"w": x["w"], "b": _t(3, dtype=np.int32)} for x in _tree(6)], 2.0),   # ... of another dtype
        (_tree(6), 2),                                              # an int for the float
        (_tree(6), _t(1)),                                          # a Tensor for the float
        ([{"w": x["w"], "b": Pair(x["b"], None)} for x in _tree(6)], 2.0),   # a namedtuple node
        ([{"w": x["w"], "b": tg.Tensor(np.float32(3.0), device="CPU") * 1.0 + 0 * x["b"].sum()}
          for x in _tree(6)], 2.0),                                 # lazy leaves of another shape
    ]
    for args in variants:
        for _ in range(2):
            _check(*args)
    _check(*variants[0], extra=_t(2))                               # a keyword argument more
    _check(base, 2.0)


def test_weakly_typed_leaves_are_no_match() -> None:
    """A weakly typed Tensor's signature differs from a strong one's (JAX's weak_type): a compiled flatten of strong
    leaves must not take it. Here the program of weak leaves returns a weakly typed float32 for x * 2.0."""
    @tg.jit
    def g(p: list, s: float) -> list:
        return [x * s for x in p]
    strong = [_t(3, seed=i) for i in range(10)]
    for _ in range(3):
        g(strong, 2.0)
    weak = [tg.asarray(float(i)) for i in range(10)]   # Python floats made Tensors: weakly typed
    out = g(weak, 2.0)
    assert [float(o) for o in out] == [2.0 * i for i in range(10)]
    assert g.trace_count == 2


def test_a_changed_structure_is_compiled_after_it_stays() -> None:
    @tg.jit
    def g(p: list) -> tg.Tensor:
        return sum(x.sum() for x in p)
    a, b = [_t(3, seed=i) for i in range(10)], [_t(3, seed=i) for i in range(12)]
    for _ in range(3):
        g(a)
    first = g._flat
    assert first is not None and len(first.types) == 10
    for _ in range(MISSES + 2):
        assert np.isclose(float(g(b)), sum(x.numpy().sum() for x in b), rtol=1e-5)
    assert g._flat is not first and len(g._flat.types) == 12
    assert np.isclose(float(g(a)), sum(x.numpy().sum() for x in a), rtol=1e-5)


def test_few_leaves_and_registered_nodes_are_not_compiled() -> None:
    @tg.jit
    def g(p: object) -> tg.Tensor:
        return sum(x.sum() for x in tg.tree_util.tree_leaves(p))
    for _ in range(3):
        g([_t(2) for _ in range(MIN_LEAVES - 1)])
    assert g._flat is None and g._flat_tried


def _replay_cost(n: int) -> tuple[int, int]:
    @tg.jit
    def g(p: list, lr: float) -> list:
        return [{k: v * lr for k, v in layer.items()} for layer in p]
    p = _tree(n)
    for _ in range(3):
        tg.block_until_ready(g(p, 0.5))
    with as_in_a_fresh_process():
        calls, _ = count_calls(lambda: g(p, 0.5))
        counts = []
        for _ in range(3):   # the least of three: a collection or a finalizer may run during one
            n_ops, out = count_opcodes(lambda: g(p, 0.5))
            counts.append(n_ops)
            tg.block_until_ready(out)
        ops = min(counts)
    np.testing.assert_allclose(out[-1]["w"].numpy(), 0.5 * p[-1]["w"].numpy(), rtol=1e-6)
    return calls, ops


def test_a_replays_flatten_costs_no_call_per_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per layer of the arguments ({"b", "w"}: two leaves in and two results out, 4 against 400 layers): one call per
    result (its Tensor), none per node or leaf of the arguments (before: 4 a layer, a flatten of the dict and a
    `buffer_view` of the matrix more); the bytecodes per layer of the whole replay: 528 before (the flatten's walk,
    the buffers found leaf by leaf, `_reuse`'s tests result by result), 187 now."""
    monkeypatch.setattr(config.SPEC, "value", 0)
    (c_few, o_few), (c_many, o_many) = _replay_cost(4), _replay_cost(400)
    assert (c_many - c_few) / 396 <= 2.05, (c_few, c_many)
    assert (o_many - o_few) / 396 <= 200, (o_few, o_many)
