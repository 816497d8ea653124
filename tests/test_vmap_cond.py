"""vmap through tg.lax.cond and tg.lax.switch (SWITCH's batching rule, tgfx/transforms/vmap_control.py): the rule on
tiny graphs, every mix of batched and unbatched index and operands against the unbatched function run on each
example (and JAX when it is installed), compositions with grad / jit / itself / loops, and the graph's shape: an
unbatched index keeps one SWITCH, a batched one becomes selects.

The reference for `vmap(f)(*args)` is the unbatched `f` on each example in a Python loop, stacked along out_axes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import check_vmap, per_example, rand

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.ir.control import SwitchSpec
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.transforms.vmap import batch_graph, broadcast_front
from tgfx.tree import tree_leaves, tree_map

f32 = dtypes.float32




def nodes(out: Any, op: Ops) -> list[UOp]:
    """Every `op` node the (unrealized) results read, inside loop and branch bodies too."""
    return [u for u in UOp(Ops.SINK, None, tuple(t.uop for t in tree_leaves(out))).toposort() if u.op is op]


def traced(f: Callable, args: tuple, in_axes: tuple) -> Any:
    """vmap(f)'s results, not yet computed (their graph)."""
    return tg.vmap(f, in_axes=in_axes)(*(tree_map(tg.asarray, a) for a in args))


def against_jax(jax_f: Callable, args: tuple, in_axes: tuple, got: Any, tol: float = 1e-5) -> None:
    jax = pytest.importorskip("jax")
    want = jax.vmap(jax_f, in_axes=in_axes)(*args)
    for g, w in zip(tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=tol, atol=tol)


# ---- the rule itself, on tiny graphs: hash-consing makes == exact ----
def _p(slot: int, shape: tuple[int, ...], dtype: Any = f32) -> UOp:
    return UOp(Ops.PARAM, dtype, (), (slot, shape, "CPU:0"))


def _switch(x: UOp, y: UOp, index: UOp) -> UOp:
    """SWITCH(index; (x, y) -> (x * x, y), (x, y) -> (y, y))."""
    a, b = _p(0, x.shape), _p(1, y.shape)
    branches = (UOp(Ops.TUPLE, None, (a * a, b)), UOp(Ops.TUPLE, None, (b, b)))
    return UOp(Ops.SWITCH, None, (*branches, index, x, y), SwitchSpec("f|g", 2, "CPU:0"))


def test_an_unbatched_index_keeps_one_switch_over_the_batched_branches() -> None:
    """x batched: result 0 is batched in branch 0 and broadcast in branch 1 to match; result 1 reads only y and
    stays unbatched (one value, not a copy per example)."""
    x, y, i = _p(5, (3,)), _p(6, (3,)), _p(7, (), dtypes.int32)
    sw = _switch(x, y, i)
    outs = [UOp(Ops.GETTUPLE, f32, (sw,), k) for k in range(2)]
    xb = _p(5, (2, 3))
    got, flags = batch_graph(outs, {x: xb}, 2)
    a, b = _p(0, (2, 3)), _p(1, (3,))
    branches = (UOp(Ops.TUPLE, None, (a * a, b)), UOp(Ops.TUPLE, None, (broadcast_front(b, 2), b)))
    want = UOp(Ops.SWITCH, None, (*branches, i, xb, y), sw.arg)
    assert got == [UOp(Ops.GETTUPLE, f32, (want,), k) for k in range(2)] and flags == [True, False]


def test_a_batched_index_becomes_a_select_over_the_inlined_branches() -> None:
    x, y, i = _p(5, (3,)), _p(6, (3,)), _p(7, (), dtypes.int32)
    outs = [UOp(Ops.GETTUPLE, f32, (_switch(x, y, i),), k) for k in range(2)]
    (r0, r1), flags = batch_graph(outs, {i: _p(7, (2,), dtypes.int32)}, 2)
    assert flags == [True, False] and r1 is y    # both branches return y: y itself, not a select
    assert r0.op is Ops.WHERE and not any(u.op is Ops.SWITCH for u in r0.toposort())
    assert r0.src[1] is broadcast_front(x * x, 2) and r0.src[2] is broadcast_front(y, 2)


# ---- cond ----
def _cond(p: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
    return tg.lax.cond(p > 0, lambda x: tnp.sin(x) * 2, lambda x: x - 1, x)


def _jax_cond(p: Any, x: Any) -> Any:
    import jax
    return jax.lax.cond(p > 0, lambda x: jax.numpy.sin(x) * 2, lambda x: x - 1, x)


@pytest.mark.parametrize("in_axes", [(0, 0), (None, 0), (0, None)])
def test_cond_over_batched_and_unbatched_predicate_and_operand(in_axes: tuple) -> None:
    ps, xs = np.array([1.0, -1.0, 2.0, -3.0], np.float32), rand(4, 3)
    args = tuple(a if ax == 0 else a[1] for a, ax in zip((ps, xs), in_axes, strict=True))
    got = check_vmap(_cond, args, in_axes)
    out = traced(_cond, args, in_axes)
    assert len(nodes(out, Ops.SWITCH)) == (1 if in_axes[0] is None else 0)    # a batched predicate: no SWITCH,
    assert bool(nodes(out, Ops.WHERE)) == (in_axes[0] is not None)            # a select
    against_jax(_jax_cond, args, in_axes, got)


def test_cond_with_both_predicate_values_in_one_batch_and_an_unbatched_predicate_of_each_value() -> None:
    xs = rand(4, 3)
    for p in (2.0, -2.0):
        check_vmap(_cond, (np.float32(p), xs), (None, 0))
    check_vmap(_cond, (np.array([3.0, 3.0, 3.0, 3.0], np.float32), xs), (0, 0))     # every example the same branch


def test_a_result_one_branch_batches_and_the_other_does_not() -> None:
    """Branch 0 returns the batched x, branch 1 the unbatched y: the result is batched (y broadcast in branch 1).
    The second result reads only y in both branches and stays unbatched under an unbatched predicate."""
    def f(p: tg.Tensor, x: tg.Tensor, y: tg.Tensor) -> tuple:
        return tg.lax.cond(p, lambda x, y: (x + 1, y * 2), lambda x, y: (y, y * 3), x, y)
    xs, y = rand(4, 3), rand(3, seed=1)
    for p in (True, False):
        check_vmap(f, (np.bool_(p), xs, y), (None, 0, None))
        (sw,) = nodes(traced(f, (np.bool_(p), xs, y), (None, 0, None)), Ops.SWITCH)
        assert [b.src[1].shape for b in sw.src[:2]] == [(3,), (3,)]    # not broadcast per example
    ps = np.array([True, False, False, True])
    got = check_vmap(f, (ps, xs, y), (0, 0, None))
    against_jax(lambda p, x, y: __import__("jax").lax.cond(p, lambda x, y: (x + 1, y * 2), lambda x, y: (y, y * 3),
                                                          x, y), (ps, xs, y), (0, 0, None), got)


def test_cond_with_pytree_operands_and_results_and_a_closure() -> None:
    w = rand(3, seed=2)

    def f(p: tg.Tensor, d: dict) -> dict:
        return tg.lax.cond(p < 0.5, lambda d: {"s": (d["a"] * w).sum(), "v": d["b"]},
                           lambda d: {"s": d["a"].max(), "v": -d["b"] * w}, d)
    ps, a, b = np.array([0.1, 0.9, 0.3], np.float32), rand(3, 3, seed=3), rand(3, 3, seed=4)
    check_vmap(f, (ps, {"a": a, "b": b}), (0, 0))
    check_vmap(f, (ps[0], {"a": a, "b": b}), (None, 0))
    check_vmap(lambda p, a, b: f(p, {"a": a, "b": b}), (ps, a[0], b), (0, None, 0))


# ---- switch ----
_BRANCHES = [lambda x: x + 1, lambda x: x * 2, tnp.sin]


def test_switch_with_a_batched_index_clamps_out_of_range_indices() -> None:
    idx, xs = np.array([-2, 0, 1, 2, 7, 1], np.int32), rand(6, 3)
    f = lambda i, x: tg.lax.switch(i, _BRANCHES, x)   # noqa: E731
    got = check_vmap(f, (idx, xs), (0, 0))
    np.testing.assert_allclose(got.numpy()[[0, 1]], xs[[0, 1]] + 1, rtol=1e-6)   # -2 -> branch 0
    np.testing.assert_allclose(got.numpy()[4], np.sin(xs[4]), rtol=1e-6)         # 7 -> branch 2
    out = traced(f, (idx, xs), (0, 0))
    assert not nodes(out, Ops.SWITCH) and len(nodes(out, Ops.WHERE)) >= 2   # a chain of selects
    check_vmap(f, (idx, xs[0]), (0, None))                                              # the operand unbatched
    jax = pytest.importorskip("jax")
    jb = [lambda x: x + 1, lambda x: x * 2, jax.numpy.sin]
    against_jax(lambda i, x: jax.lax.switch(i, jb, x), (idx, xs), (0, 0), got)


def test_switch_with_an_unbatched_index_is_one_switch() -> None:
    xs = rand(4, 3)
    f = lambda i, x: tg.lax.switch(i, _BRANCHES, x)   # noqa: E731
    for i in (-1, 1, 5):
        check_vmap(f, (np.int32(i), xs), (None, 0))
        (sw,) = nodes(traced(f, (np.int32(i), xs), (None, 0)), Ops.SWITCH)
        assert sw.arg.n_branches == 3 and sw.src[0].src[0].shape == (4, 3)


# ---- compositions ----
def test_vmap_of_vmap() -> None:
    """The inner vmap batches over x with p fixed per row, the outer over p: the index is batched only outside."""
    ps, xs = np.array([1.0, -1.0], np.float32), rand(2, 5, 3)
    inner = tg.vmap(_cond, in_axes=(None, 0))
    got = tg.vmap(inner, in_axes=(0, 0))(tg.asarray(ps), tg.asarray(xs))
    assert not nodes(got, Ops.SWITCH)
    want = np.stack([per_example(_cond, (ps[i], xs[i]), (None, 0)) for i in range(2)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    same = tg.vmap(inner, in_axes=(None, 0))(tg.asarray(ps[0]), tg.asarray(xs))    # never batched: one SWITCH
    assert len(nodes(same, Ops.SWITCH)) == 1
    want = np.stack([per_example(_cond, (ps[0], xs[i]), (None, 0)) for i in range(2)])
    np.testing.assert_allclose(same.numpy(), want, rtol=1e-6, atol=1e-6)


def _loss(p: tg.Tensor, x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
    return tg.lax.cond(p > 0, lambda x, w: (tnp.sin(x) * w).sum(), lambda x, w: (x * x * w).sum(), x, w)


@pytest.mark.parametrize("p_axis", [0, None])
def test_vmap_of_grad_and_grad_of_vmap(p_axis: int | None) -> None:
    ps, xs, w = np.array([1.0, -1.0, 0.5, -2.0], np.float32), rand(4, 3), rand(3, seed=1)
    p = ps if p_axis == 0 else ps[0]
    g = tg.grad(_loss, argnums=(1, 2))
    check_vmap(g, (p, xs, w), (p_axis, 0, None), tol=1e-5)      # per-example gradients
    total = lambda p, x, w: tg.vmap(_loss, in_axes=(p_axis, 0, None))(p, x, w).sum()   # noqa: E731
    gx, gw = tg.grad(total, argnums=(1, 2))(tg.asarray(p), tg.asarray(xs), tg.asarray(w))
    px, pw = per_example(g, (p, xs, w), (p_axis, 0, None))
    np.testing.assert_allclose(gx.numpy(), px, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gw.numpy(), pw.sum(0), rtol=1e-5, atol=1e-5)


def test_grad_of_vmap_through_a_switch_with_a_batched_index() -> None:
    idx, xs = np.array([-1, 0, 1, 5], np.int32), rand(4, 3)
    branches = [lambda x: (x * x).sum(), lambda x: tnp.sin(x).sum(), lambda x: x.max()]
    f = lambda i, x: tg.lax.switch(i, branches, x)   # noqa: E731
    got = tg.grad(lambda x: tg.vmap(f)(tg.asarray(idx), x).sum())(tg.asarray(xs))
    np.testing.assert_allclose(got.numpy(), per_example(tg.grad(f, argnums=1), (idx, xs), (0, 0)), rtol=1e-6)
    check_vmap(tg.grad(f, argnums=1), (idx, xs), (0, 0))


def test_conds_in_functions_in_conds_and_loops_in_branches() -> None:
    """A FUNCTION body holding a SWITCH whose branch PARAM 0 is the very UOp of the function's PARAM 0 (hash-
    consing), a cond nested in a branch, and a loop inside a branch, each over every batched/unbatched mix."""
    xs, ps = rand(4, 3), np.array([1.0, -1.0, 2.0, -3.0], np.float32)
    g = tg.jit(lambda x, p: tg.lax.cond(p > 0, lambda x: x * 2, tnp.cos, x))
    for args, axes in [((xs, ps), (0, 0)), ((xs, ps[0]), (0, None)), ((xs[0], ps), (None, 0))]:
        check_vmap(g, args, axes)

    def nested(p: tg.Tensor, q: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
        return tg.lax.cond(p > 0, lambda x: tg.lax.cond(q > 0, lambda x: x + 1, lambda x: x * 5, x), lambda x: -x, x)
    for args, axes in [((ps, -ps, xs), (0, 0, 0)), ((ps[0], -ps, xs), (None, 0, 0)), ((ps, ps[0], xs), (0, None, 0))]:
        check_vmap(nested, args, axes)

    def looped(p: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
        return tg.lax.cond(p > 0, lambda x: tg.lax.fori_loop(0, 3, lambda i, c: tnp.sin(c) + x, x), lambda x: -x, x)
    for args, axes in [((ps, xs), (0, 0)), ((ps[0], xs), (None, 0)), ((ps, xs[0]), (0, None))]:
        check_vmap(looped, args, axes)


def test_bool_and_int_results() -> None:
    def f(p: tg.Tensor, x: tg.Tensor) -> tuple:
        return tg.lax.cond(p > 0, lambda x: (x > 0, x.astype(tnp.int32)), lambda x: (x < 0, (x * 2).astype(tnp.int32)),
                           x)
    ps, xs = np.array([1.0, -1.0, 2.0, -3.0], np.float32), rand(4, 3) * 3
    check_vmap(f, (ps, xs), (0, 0))
    check_vmap(f, (ps[0], xs), (None, 0))


def test_jit_of_vmap_traces_once() -> None:
    jf = tg.jit(tg.vmap(_cond))
    xs = rand(4, 3)
    for seed in range(3):
        ps = np.random.default_rng(seed).standard_normal(4).astype(np.float32)
        np.testing.assert_allclose(jf(tg.asarray(ps), tg.asarray(xs)).numpy(), per_example(_cond, (ps, xs), (0, 0)),
                                   rtol=1e-6, atol=1e-6)
    assert jf.trace_count == 1


def test_a_cond_inside_a_fori_loop_body_under_vmap() -> None:
    """The loop rule batches the body, whose SWITCH it hands to this rule: a predicate read from the batched carry
    is batched (selects inside the one loop), one read from the step index is not (a SWITCH inside the loop)."""
    def by_carry(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.fori_loop(0, 4, lambda i, c: tg.lax.cond(c.sum() > 0, lambda c: c * 0.5 - 1, lambda c: c + 2,
                                                                c), x)

    def by_step(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.fori_loop(0, 4, lambda i, c: tg.lax.cond(i % 2 == 0, lambda c: tnp.sin(c), lambda c: c * 3,
                                                                c), x)
    xs = rand(5, 3) * 3
    check_vmap(by_carry, (xs,), (0,))
    out = traced(by_carry, (xs,), (0,))
    assert len(nodes(out, Ops.LOOP)) == 1 and not nodes(out, Ops.SWITCH)
    check_vmap(by_step, (xs,), (0,))
    out = traced(by_step, (xs,), (0,))
    assert len(nodes(out, Ops.LOOP)) == 1 and len(nodes(out, Ops.SWITCH)) == 1
