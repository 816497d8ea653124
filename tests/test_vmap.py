"""vmap: the batching pass on tiny graphs, every op group against a Python loop over the examples, compositions with
grad / jit / function / itself, kernel counts against hand-batched programs, and the errors a user can cause.

The reference for `vmap(f)(*args)` is always the unbatched `f` run on each example in a Python loop, its results
stacked along out_axes (numpy's `np.take` picks each example along its in_axes entry).
"""
from __future__ import annotations

import gc
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.function import ConcretizationError
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.kernel import custom_kernel, krange, load, sink, store
from tgfx.tensor import _lazy
from tgfx.transforms.vmap import batch_graph, broadcast_front
from tgfx.tree import tree_map

f32 = dtypes.float32


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def per_example(f: Any, args: tuple, in_axes: tuple, out_axes: Any = 0) -> Any:
    """The reference: `f` on each example (a Python loop), the results stacked along out_axes."""
    n = next(np.shape(a)[ax] for a, ax in zip(args, in_axes, strict=True) if ax is not None)
    outs = []
    for i in range(n):
        ex = [tg.asarray(a) if ax is None else tg.asarray(np.take(a, i, axis=ax)) for a, ax in
              zip(args, in_axes, strict=True)]
        outs.append(tree_map(np.asarray, f(*ex)))
    return tree_map(lambda *xs: np.stack(xs, axis=out_axes), *outs)


def check(f: Any, args: tuple, in_axes: tuple, out_axes: int = 0, rtol: float = 1e-6, atol: float = 1e-6) -> None:
    got = tg.vmap(f, in_axes=in_axes, out_axes=out_axes)(*(tg.asarray(a) for a in args))
    want = per_example(f, args, in_axes, out_axes)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype.np == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=atol)


@st.composite
def batched(draw: Any, min_dims: int = 0, max_dims: int = 3, min_side: int = 1) -> tuple[np.ndarray, int, tuple]:
    """(array, its in_axis, one example's shape): a batch of 1..3 examples stored along a drawn axis."""
    shape = tuple(draw(st.lists(st.integers(min_side, 4), min_size=min_dims, max_size=max_dims)))
    n = draw(st.integers(1, 3))
    ax = draw(st.integers(-(len(shape) + 1), len(shape)))
    full = list(shape)
    full.insert(ax % (len(shape) + 1), n)
    return rand(*full, seed=draw(st.integers(0, 1000))), ax, shape


def out_axis(draw: Any, ndim: int) -> int:
    return draw(st.integers(-(ndim + 1), ndim))


# ---- the pass itself, on tiny graphs: hash-consing makes == exact ----
def test_batching_pass_builds_the_exact_graph() -> None:
    x = UOp(Ops.PARAM, f32, (), (0, (3,), "CPU:0"))
    w = UOp(Ops.PARAM, f32, (), (1, (3,), "CPU:0"))
    xs = UOp(Ops.PARAM, f32, (), (0, (2, 3), "CPU:0"))
    dot = UOp(Ops.REDUCE_AXIS, f32, (x * w,), (Ops.ADD, (0,)))
    (out, w_exp), flags = batch_graph([dot, w.alu(Ops.EXP)], {x: xs}, 2)
    w_b = UOp(Ops.EXPAND, f32, (UOp(Ops.RESHAPE, f32, (w,), (1, 3)),), (2, 3))
    assert out is UOp(Ops.REDUCE_AXIS, f32, (xs * w_b,), (Ops.ADD, (1,)))
    assert w_exp is w.alu(Ops.EXP)  # unbatched: the very same node, not a batched copy
    assert flags == [True, False]


def test_batching_pass_movement_ops_shift_their_axes() -> None:
    x = UOp(Ops.PARAM, f32, (), (0, (2, 3), "CPU:0"))
    xs = UOp(Ops.PARAM, f32, (), (0, (4, 2, 3), "CPU:0"))
    graph = UOp(Ops.FLIP, f32, (UOp(Ops.PAD, f32, (UOp(Ops.PERMUTE, f32, (x,), (1, 0)),), ((1, 0), (0, 2))),), (0,))
    (out,), _ = batch_graph([graph], {x: xs}, 4)
    want = UOp(Ops.FLIP, f32, (UOp(Ops.PAD, f32, (UOp(Ops.PERMUTE, f32, (xs,), (0, 2, 1)),),
                                   ((0, 0), (1, 0), (0, 2))),), (1,))
    assert out is want


def test_batching_pass_batches_function_bodies() -> None:
    p0 = UOp(Ops.PARAM, f32, (), (0, (3,), "CPU:0"))
    p1 = UOp(Ops.PARAM, f32, (), (1, (3,), "CPU:0"))
    fn = UOp(Ops.FUNCTION, None, (UOp(Ops.TUPLE, None, (p0 * p1, p1.alu(Ops.EXP))), p0, p1), ("f", None, False))
    a = UOp(Ops.PARAM, f32, (), (5, (3,), "CPU:0"))
    a_b = UOp(Ops.PARAM, f32, (), (5, (2, 3), "CPU:0"))
    (prod, e), flags = batch_graph([UOp(Ops.GETTUPLE, f32, (fn,), 0), UOp(Ops.GETTUPLE, f32, (fn,), 1)], {p0: a_b}, 2)
    b0 = UOp(Ops.PARAM, f32, (), (0, (2, 3), "CPU:0"))
    body = UOp(Ops.TUPLE, None, (b0 * broadcast_front(p1, 2), p1.alu(Ops.EXP)))
    new_fn = UOp(Ops.FUNCTION, None, (body, a_b, p1), ("f", None, False))
    assert (prod, e) == (UOp(Ops.GETTUPLE, f32, (new_fn,), 0), UOp(Ops.GETTUPLE, f32, (new_fn,), 1))
    assert flags == [True, False]  # exp(p1) does not depend on the mapped argument
    assert a is not a_b


# ---- op groups against a loop over the examples ----
UNARY = [tnp.exp, tnp.sin, tnp.tanh, tnp.negative, lambda x: tnp.sqrt(tnp.abs(x)), tnp.floor,
         lambda x: x.astype(tg.dtypes.int32), lambda x: x.bitcast(tg.dtypes.int32), lambda x: x.astype(bool)]


@settings(max_examples=50)
@given(st.data())
def test_unary_and_casts(data: Any) -> None:
    x, ax, shape = data.draw(batched())
    f = data.draw(st.sampled_from(UNARY))
    check(f, (x,), (ax,), out_axis(data.draw, len(shape)), rtol=1e-5)


BINARY = [lambda a, b: a + b, lambda a, b: a * b - a, tnp.maximum, lambda a, b: tnp.where(a > b, a, b * 2),
          lambda a, b: a < b, lambda a, b: tnp.power(tnp.abs(a) + 1, b), lambda a, b: a / (tnp.abs(b) + 1)]


@settings(max_examples=50)
@given(st.data())
def test_binary_with_broadcasting(data: Any) -> None:
    """The second operand is mapped or not, and broadcasts against the first (a suffix of its shape, with 1s)."""
    x, ax, shape = data.draw(batched(min_dims=1))
    k = data.draw(st.integers(0, len(shape)))
    y_shape = tuple(s if data.draw(st.booleans()) else 1 for s in shape[len(shape) - k:])
    mapped = data.draw(st.booleans())
    if mapped:
        n = x.shape[ax % x.ndim]
        y_ax = data.draw(st.integers(-(len(y_shape) + 1), len(y_shape)))
        y = np.moveaxis(rand(n, *y_shape, seed=1), 0, y_ax)
    else:
        y, y_ax = rand(*y_shape, seed=1), None
    f = data.draw(st.sampled_from(BINARY))
    check(f, (x, y), (ax, y_ax), out_axis(data.draw, len(shape)), rtol=1e-5)


MOVEMENT = [
    lambda x: x.reshape(-1),
    lambda x: x.T,
    lambda x: tnp.broadcast_to(x, (2, *x.shape)),
    lambda x: tnp.pad(x, [(1, 2)] * x.ndim),
    lambda x: x[..., ::2],
    lambda x: x[1:],
    lambda x: tnp.flip(x),
    lambda x: tnp.expand_dims(x, 0),
    lambda x: x[None, ..., None].reshape(x.shape[::-1]),
    lambda x: tnp.concatenate([x, x * 2], axis=-1),
    lambda x: tnp.roll(x, 1),
]


@settings(max_examples=50)
@given(st.data())
def test_movement(data: Any) -> None:
    x, ax, shape = data.draw(batched(min_dims=1))
    f = data.draw(st.sampled_from(MOVEMENT))
    out_ndim = f(tg.asarray(np.zeros(shape, np.float32))).ndim
    check(f, (x,), (ax,), out_axis(data.draw, out_ndim))


REDUCE = [lambda x, a: x.sum(axis=a), lambda x, a: x.max(axis=a, keepdims=True), lambda x, a: tnp.prod(x, axis=a),
          lambda x, a: x.mean(axis=a), lambda x, a: tnp.argmax(x, axis=a if a is None or isinstance(a, int) else 0),
          lambda x, a: tnp.cumsum(x, axis=a if isinstance(a, int) else None)]


@settings(max_examples=50)
@given(st.data())
def test_reduce(data: Any) -> None:
    x, ax, shape = data.draw(batched(min_dims=1))
    a = data.draw(st.sampled_from([None, 0, -1, tuple(range(len(shape)))]))
    r = data.draw(st.sampled_from(REDUCE))
    f = lambda x: r(x, a)  # noqa: E731
    out_ndim = f(tg.asarray(np.zeros(shape, np.float32))).ndim
    check(f, (x,), (ax,), out_axis(data.draw, out_ndim), rtol=1e-5, atol=1e-5)


def test_iota_and_constants_stay_unbatched() -> None:
    x = rand(4, 5)
    f = lambda x: x * tnp.arange(5, dtype=tnp.float32) + tnp.ones(5) * 2 + tnp.eye(5)[2]  # noqa: E731
    check(f, (x,), (0,))
    out = tg.vmap(f)(tg.asarray(x)).uop
    iotas = [u for u in out.toposort() if u.op is Ops.IOTA]
    assert iotas and all(u.shape == (5,) for u in iotas)  # built once per example shape, never with the batch axis


# ---- what the front end builds from the primitives: indexing, sort, matmul, einsum, softmax ----
def test_indexing() -> None:
    x, idx = rand(3, 5, 4), np.array([[0, 4, 2], [1, 1, 3], [4, 0, 0]], np.int32)
    table = rand(6, 4, seed=2)
    check(lambda x, i: x[i], (x, idx), (0, 0))                        # both mapped
    check(lambda t, i: t[i], (table, idx), (None, 0))                 # embedding lookup: an unmapped table
    check(lambda x, i: x[i], (x, idx[0]), (1, None), out_axes=1)      # mapped array, shared index
    check(lambda x: x[1, ::2], (x,), (2,))
    check(lambda x, i: tnp.take_along_axis(x, i, axis=0), (x, np.stack([idx] * 4, -1)[:, :3]), (0, 0))
    check(lambda x, i, v: x.at[i].add(v), (x, idx, rand(3, 3, 4, seed=3)), (0, 0, 0))
    check(lambda x, i: x.at[i].set(0.0), (x, idx[:, :2]), (0, 0))


def test_sort_and_argsort() -> None:
    x = rand(3, 4, 6)
    for ax in (0, 1, -1):
        check(lambda v: tnp.sort(v), (x,), (ax,))
        check(lambda v: tnp.argsort(v, axis=0), (x,), (ax,))
        check(lambda v: tnp.sort(v, axis=None, descending=True), (x,), (ax,))


@settings(max_examples=30)
@given(st.data())
def test_matmul_over_in_axes(data: Any) -> None:
    """(m, k) @ (k, n) per example, the left operand mapped along any axis, the right one mapped or shared."""
    m, k, n, b = (data.draw(st.integers(1, 4)) for _ in range(4))
    ax = data.draw(st.integers(-3, 2))
    x = np.moveaxis(rand(b, m, k), 0, ax)
    w_ax = data.draw(st.sampled_from([None, 0, 1, 2, -1]))
    w = rand(k, n, seed=1) if w_ax is None else np.moveaxis(rand(b, k, n, seed=1), 0, w_ax)
    check(lambda x, w: x @ w, (x, w), (ax, w_ax), out_axis(data.draw, 2), rtol=1e-5, atol=1e-5)


def softmax(x: tg.Tensor) -> tg.Tensor:
    e = tnp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_matmul_einsum_softmax() -> None:
    x, w, v = rand(4, 3, 5), rand(5, 2, seed=1), rand(4, 5, seed=2)
    check(lambda x, w: x @ w, (x, w), (0, None), rtol=1e-5)
    check(lambda x, w: x @ w, (x, w), (1, None), out_axes=-1, rtol=1e-5)
    check(lambda x, v: x @ v, (x, v), (0, 0), rtol=1e-5)
    check(lambda x, u: u @ x, (x, rand(2, 4, seed=4)), (1, None), rtol=1e-5)
    check(lambda x, w: tnp.einsum("ij,jk->ki", x, w), (x, w), (0, None), rtol=1e-5)
    check(lambda x, v: tnp.einsum("ij,j->i", x, v), (x, v), (0, 0), rtol=1e-5)
    check(softmax, (x,), (1,), rtol=1e-5)
    check(lambda q, k: softmax(q @ k.T / 2) @ k, (x, x), (0, 0), rtol=1e-5)


# ---- pytrees, keyword arguments, axis_size, decorator forms ----
class Params(NamedTuple):
    w: Any
    b: Any


def test_pytree_in_axes_prefix_and_out_axes_tree() -> None:
    w, b, xs = rand(3, 2), rand(2, seed=1), rand(5, 3, seed=2)
    def f(p: Params, x: Any) -> dict:
        y = x @ p.w + p.b
        return {"y": y, "norm": (p.w * p.w).sum()}
    got = tg.vmap(f, in_axes=(Params(None, None), 0), out_axes={"y": 1, "norm": None})(
        Params(tg.asarray(w), tg.asarray(b)), tg.asarray(xs))
    np.testing.assert_allclose(got["y"].numpy(), (xs @ w + b).T, rtol=1e-5)
    np.testing.assert_allclose(got["norm"].numpy(), (w * w).sum(), rtol=1e-5)  # unmapped: out_axes None is allowed
    # a per-leaf prefix: w shared, b one per example
    bs = rand(5, 2, seed=3)
    got = tg.vmap(lambda p, x: x @ p.w + p.b, in_axes=(Params(None, 0), 0))(Params(tg.asarray(w), tg.asarray(bs)),
                                                                              tg.asarray(xs))
    np.testing.assert_allclose(got.numpy(), xs @ w + bs, rtol=1e-5)


def test_kwargs_are_mapped_along_axis_0_and_unmapped_outputs_broadcast() -> None:
    xs, ys = rand(4, 3), rand(4, 3, seed=1)
    got = tg.vmap(lambda x, *, y: (x * y, tnp.ones(2)))(tg.asarray(xs), y=tg.asarray(ys))
    np.testing.assert_allclose(got[0].numpy(), xs * ys, rtol=1e-6)
    assert got[1].shape == (4, 2) and (got[1].numpy() == 1).all()  # broadcast along the batch (out_axes 0)


def test_axis_size_without_mapped_inputs() -> None:
    c = rand(3)
    got = tg.vmap(lambda c: c * 2, in_axes=None, axis_size=5, out_axes=1)(tg.asarray(c))
    np.testing.assert_array_equal(got.numpy(), np.stack([c * 2] * 5, axis=1))


def test_same_tensor_mapped_and_unmapped() -> None:
    x = rand(4, 4)
    check(lambda a, b: a * b.sum(0), (x, x), (0, None))   # one Tensor, two roles: the stand-in is per (Tensor, axis)
    check(lambda a, b: a - b, (x, x), (0, 1))


def test_decorator_forms_and_methods() -> None:
    @tg.vmap
    def bare(x: tg.Tensor) -> tg.Tensor:
        return x.sum()

    @tg.vmap(in_axes=(None, 0))
    def scaled(s: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
        return s * x

    class Model:
        def __init__(self) -> None:
            self.w = tg.asarray(rand(3, 2))

        @tg.vmap
        def __call__(self, x: tg.Tensor) -> tg.Tensor:  # in_axes counts the arguments after self
            return x @ self.w

    xs = rand(5, 3)
    np.testing.assert_allclose(bare(tg.asarray(xs)).numpy(), xs.sum(1), rtol=1e-5)
    np.testing.assert_allclose(scaled(tg.asarray(np.float32(2.0)), tg.asarray(xs)).numpy(), 2 * xs)
    m = Model()
    np.testing.assert_allclose(m(tg.asarray(xs)).numpy(), xs @ m.w.numpy(), rtol=1e-5)


# ---- compositions ----
def loss(w: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
    return (tnp.tanh(x @ w) ** 2).sum()


W, XS, XS2 = rand(3, 2), rand(6, 3, seed=1), rand(6, 3, seed=2)


def per_example_grads(xs: np.ndarray) -> np.ndarray:
    return np.stack([tg.grad(loss)(tg.asarray(W), tg.asarray(x)).numpy() for x in xs])


def test_vmap_of_grad_gives_per_example_gradients() -> None:
    got = tg.vmap(tg.grad(loss), in_axes=(None, 0))(tg.asarray(W), tg.asarray(XS))
    np.testing.assert_allclose(got.numpy(), per_example_grads(XS), rtol=1e-5, atol=1e-6)
    # with respect to the mapped argument too
    gx = tg.vmap(tg.grad(loss, argnums=1), in_axes=(None, 0))(tg.asarray(W), tg.asarray(XS))
    want = np.stack([tg.grad(loss, argnums=1)(tg.asarray(W), tg.asarray(x)).numpy() for x in XS])
    np.testing.assert_allclose(gx.numpy(), want, rtol=1e-5, atol=1e-6)


def test_grad_of_vmap_sums_the_examples() -> None:
    g = tg.grad(lambda p: tg.vmap(loss, in_axes=(None, 0))(p, tg.asarray(XS)).sum())(tg.asarray(W))
    np.testing.assert_allclose(g.numpy(), per_example_grads(XS).sum(0), rtol=1e-5, atol=1e-5)
    # closing over the differentiated value instead of passing it
    g = tg.grad(lambda p: tg.vmap(lambda x: loss(p, x))(tg.asarray(XS)).mean())(tg.asarray(W))
    np.testing.assert_allclose(g.numpy(), per_example_grads(XS).mean(0), rtol=1e-5, atol=1e-5)


def test_jit_of_vmap_of_grad_traces_once_and_replays() -> None:
    step = tg.jit(tg.vmap(tg.grad(loss), in_axes=(None, 0)))
    np.testing.assert_allclose(step(tg.asarray(W), tg.asarray(XS)).numpy(), per_example_grads(XS), rtol=1e-5,
                               atol=1e-6)
    tg.counters.reset()
    out = step(tg.asarray(W), tg.asarray(XS2)).numpy()
    assert step.trace_count == 1 and tg.counters.compile_count == 0 and tg.counters.schedule_count == 0
    np.testing.assert_allclose(out, per_example_grads(XS2), rtol=1e-5, atol=1e-6)


def test_jacobians_and_forward_mode_compose() -> None:
    f = lambda x: tnp.sin(x) * x.sum()  # noqa: E731
    h = lambda x: (tnp.sin(x) ** 2).sum()  # noqa: E731
    xs = tg.asarray(XS)
    for jac in (tg.jacrev, tg.jacfwd):
        np.testing.assert_allclose(tg.vmap(jac(f))(xs).numpy(), per_example(jac(f), (XS,), (0,)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tg.vmap(tg.hessian(h))(xs).numpy(), per_example(tg.hessian(h), (XS,), (0,)),
                               rtol=1e-5, atol=1e-5)
    _, t = tg.jvp(tg.vmap(f), (xs,), (tnp.ones(XS.shape),))
    want = per_example(lambda x: tg.jvp(f, (x,), (tnp.ones(3),))[1], (XS,), (0,))
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5, atol=1e-6)
    g = tg.grad(lambda xs: tg.vmap(h)(xs).sum())(xs)  # with respect to the mapped argument
    np.testing.assert_allclose(g.numpy(), per_example(tg.grad(h), (XS,), (0,)), rtol=1e-5, atol=1e-6)


def test_vmap_of_vmap() -> None:
    a, b = rand(3, 4), rand(5, 4, seed=1)
    pair = tg.vmap(tg.vmap(lambda u, v: (u * v).sum(), in_axes=(None, 0)), in_axes=(0, None))
    np.testing.assert_allclose(pair(tg.asarray(a), tg.asarray(b)).numpy(), a @ b.T, rtol=1e-5)
    x = rand(2, 3, 4)
    inner_axis = tg.vmap(tg.vmap(softmax, in_axes=1, out_axes=1), in_axes=0, out_axes=2)(tg.asarray(x))
    want = np.stack([np.stack([softmax(tg.asarray(x[i, :, j])).numpy() for j in range(4)], 1) for i in range(2)], 2)
    np.testing.assert_allclose(inner_axis.numpy(), want, rtol=1e-5)


def test_vmap_of_jit() -> None:
    jloss = tg.jit(loss)
    got = tg.vmap(jloss, in_axes=(None, 0))(tg.asarray(W), tg.asarray(XS))
    want = [loss(tg.asarray(W), tg.asarray(x)).item() for x in XS]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


def test_vmap_of_functions() -> None:
    affine = tg.function(lambda x, w, b: x @ w + b)
    b = rand(2, seed=3)
    y = tg.vmap(lambda x: tnp.tanh(affine(x, tg.asarray(W), tg.asarray(b))))(tg.asarray(XS))
    fn = y.uop.src[0].src[0]
    assert fn.op is Ops.FUNCTION and fn.src[0].src[0].shape == (6, 2)  # the body itself was batched
    # a function of unmapped arguments only is left as it is: the same node, computed once
    shared = affine(tg.asarray(W), tg.asarray(np.eye(2, dtype=np.float32)), tg.asarray(b))
    z = tg.vmap(lambda x: x @ shared)(tg.asarray(XS))
    assert shared.uop in z.uop.toposort()
    np.testing.assert_allclose(y.numpy(), np.tanh(XS @ W + b), rtol=1e-5)
    # a body that closes over the stand-in: it becomes an extra, batched argument
    y = tg.vmap(lambda x: tg.function(lambda v: v * x.sum())(tg.asarray(W)))(tg.asarray(XS))
    np.testing.assert_allclose(y.numpy(), W[None] * XS.sum(1)[:, None, None], rtol=1e-5)
    # precompiled: batched once, compiled once for the batched body
    pre = tg.function(lambda x, w: tnp.sin(x @ w), precompile=True)
    y = tg.vmap(pre, in_axes=(0, None))(tg.asarray(XS), tg.asarray(W))
    np.testing.assert_allclose(y.numpy(), np.sin(XS @ W), rtol=1e-5)
    # and through grad, with the body batched under vmap of grad
    g = tg.vmap(tg.grad(lambda w, x: affine(x, w, tg.asarray(b)).sum()), in_axes=(None, 0))(tg.asarray(W),
                                                                                           tg.asarray(XS))
    np.testing.assert_allclose(g.numpy(), np.stack([np.outer(x, np.ones(2)) for x in XS]), rtol=1e-5)


def test_custom_backward_runs_per_example_under_grad_of_vmap() -> None:
    def clipped(g: tg.Tensor, call: Any) -> tuple:  # a gradient clipped to [-0.1, 0.1]: differs from the true one
        x, w = call.inputs
        return (tnp.clip(g * w, -0.1, 0.1), tnp.clip(g * x, -0.1, 0.1))
    mul = tg.function(lambda x, w: x * w, grad_fxn=clipped)
    f = lambda w, x: tnp.sin(mul(x, w)).sum()  # noqa: E731
    w = rand(3)
    g = tg.grad(lambda w: tg.vmap(f, in_axes=(None, 0))(w, tg.asarray(XS)).sum())(tg.asarray(w))
    want = sum(tg.grad(f)(tg.asarray(w), tg.asarray(x)).numpy() for x in XS)
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-6)
    assert np.abs(want).max() <= 0.1 * len(XS) + 1e-6


# ---- kernel counts: vmap runs the kernels the hand-batched program runs ----
def count_kernels(f: Any) -> int:
    tg.counters.reset()
    f().numpy()
    return tg.counters.kernel_count


def test_unmapped_weights_are_not_copied_per_example() -> None:
    w1, b1, w2 = (tg.asarray(a) for a in (rand(8, 16), rand(16, seed=1), rand(16, 4, seed=2)))
    xs = tg.asarray(rand(32, 8, seed=3))
    mlp = lambda x: tnp.tanh(x @ w1 + b1) @ w2  # noqa: E731
    assert count_kernels(lambda: tg.vmap(lambda x: x @ w1)(xs)) == count_kernels(lambda: xs @ w1) == 1
    assert count_kernels(lambda: tg.vmap(mlp)(xs)) == count_kernels(lambda: mlp(xs))
    np.testing.assert_allclose(tg.vmap(mlp)(xs).numpy(), mlp(xs).numpy(), rtol=1e-5, atol=1e-5)
    # the weight reaches the batched graph only as a view: no node computes on a batched copy of it
    g = tg.vmap(lambda x: x @ w1)(xs).uop
    w_users = [u for u in g.toposort() if w1.uop in u.src]
    assert all(u.op in (Ops.RESHAPE, Ops.EXPAND) for u in w_users)


def test_per_example_gradients_cost_what_the_hand_batched_gradient_costs() -> None:
    """By hand: one weight copy per example, (B, 3, 2), and the gradient of the summed batched loss with respect
    to it, which is the stack of per-example gradients."""
    w, xs = tg.asarray(W), tg.asarray(XS)
    by_vmap = count_kernels(lambda: tg.vmap(tg.grad(loss), in_axes=(None, 0))(w, xs))
    ws = tg.asarray(np.broadcast_to(W, (len(XS), *W.shape)).copy())
    by_hand = tg.grad(lambda ws: (tnp.tanh((xs[:, None, :] @ ws)[:, 0]) ** 2).sum())
    np.testing.assert_allclose(by_hand(ws).numpy(), per_example_grads(XS), rtol=1e-5, atol=1e-6)
    assert by_vmap == count_kernels(lambda: by_hand(ws))


# ---- errors ----
def test_inconsistent_sizes_name_every_argument() -> None:
    with pytest.raises(ValueError, match="inconsistent sizes") as e:
        tg.vmap(lambda p, y: p["a"] + y)({"a": tg.asarray(rand(5, 3))}, tg.asarray(rand(4, 3)))
    assert "p['a'] (float32[5, 3]) has size 5 along axis 0" in str(e.value)
    assert "y (float32[4, 3]) has size 4 along axis 0" in str(e.value)
    with pytest.raises(ValueError, match="axis_size=7"):
        tg.vmap(lambda x: x, axis_size=7)(tg.asarray(rand(5)))


def test_in_axes_errors() -> None:
    x = tg.asarray(rand(5, 3))
    with pytest.raises(ValueError, match=r"len\(in_axes\)=1, len\(args\)=2"):
        tg.vmap(lambda a, b: a, in_axes=(0,))(x, x)
    with pytest.raises(ValueError, match=r"in_axes\[1\] = \{'a': 0\} is not a tree prefix of positional argument 1"):
        tg.vmap(lambda a, b: a, in_axes=(0, {"a": 0}))(x, x)
    with pytest.raises(ValueError, match="map argument b along axis 2, but it has rank 2"):
        tg.vmap(lambda a, b: a, in_axes=(0, 2))(x, x)
    with pytest.raises(ValueError, match="argument b along axis 0, which implies that its rank should be at least 1"):
        tg.vmap(lambda a, b: a * b)(x, 2.0)
    with pytest.raises(ValueError, match=r"it is a scalar \(float32\[\]\)"):
        tg.vmap(lambda a, b: a * b)(x, tg.asarray(np.float32(2.0)))
    with pytest.raises(TypeError, match="argument b is a str, not an array"):
        tg.vmap(lambda a, b: a)(x, "label")
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        tg.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(TypeError, match="in_axes must be an int, None, or a"):
        tg.vmap(lambda a: a, in_axes="batch")
    with pytest.raises(TypeError, match="in_axes must be an int, None, or a tuple"):
        tg.vmap(lambda a: a, in_axes={"a": 0})(x)
    assert tg.vmap(lambda a, b, s: a * b, in_axes=(0, None, None))(x, 2.0, "label").shape == (5, 3)  # unmapped


def test_out_axes_errors() -> None:
    x = tg.asarray(rand(5, 3))
    with pytest.raises(ValueError, match=r"mapped output\[1\] .* but out_axes is None"):
        tg.vmap(lambda a: (a.sum(), a * 2), out_axes=(0, None))(x)
    with pytest.raises(ValueError, match="out_axes 3 for the output is out of range"):
        tg.vmap(lambda a: a, out_axes=3)(x)
    with pytest.raises(ValueError, match="out_axes = \\(0, 0\\) is not a tree prefix of the function's output"):
        tg.vmap(lambda a: a, out_axes=(0, 0))(x)


def test_custom_kernel_inside_vmap_is_an_error_naming_it() -> None:
    def double(out: UOp, x: UOp) -> UOp:
        i = krange(3, 0)
        return sink(store(out, i, load(x, i) * 2))
    with pytest.raises(NotImplementedError, match="cannot batch custom kernel 'double'"):
        tg.vmap(lambda x: custom_kernel(double, x, outputs=[((3,), f32)], name="double"))(tg.asarray(rand(4, 3)))


def test_reading_a_mapped_value_is_a_concretization_error() -> None:
    with pytest.raises(ConcretizationError, match="argument x"):
        tg.vmap(lambda x: x if float(x.sum()) > 0 else -x)(tg.asarray(rand(4, 3)))
    # an unmapped concrete value may be read, as in JAX
    w = tg.asarray(rand(3))
    got = tg.vmap(lambda x, w: x * 2 if float(w.sum()) > -100 else x, in_axes=(0, None))(tg.asarray(rand(4, 3)), w)
    assert got.shape == (4, 3)


def test_a_stand_in_kept_past_the_call_is_an_escaped_tracer() -> None:
    from tgfx.lowering.inline import EscapedTracerError
    kept = []
    tg.vmap(lambda v: kept.append(v) or v)(tg.asarray(rand(2, 3)))
    with pytest.raises(EscapedTracerError, match=r"traced value of function vmap\(.*<lambda>\)"):
        (kept[0] + 1).numpy()


def test_empty_batch() -> None:
    assert tg.vmap(lambda x: x.sum())(tg.asarray(np.zeros((0, 3), np.float32))).numpy().shape == (0,)


def test_named_axis_collectives() -> None:
    """vmap(f, axis_name=...) and, inside f, lax.psum / pmean / pmax / pmin / all_gather / axis_index over it, as JAX:
    values over the batch, nested axes (a collective over the outer axis from inside the inner one), pytrees and
    tuples of names, jit and grad through them, and an unbound name."""
    lax = tg.lax
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    xs = tg.asarray(x)
    close = lambda got, want: np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)  # noqa: E731
    close(tg.vmap(lambda v: v - lax.pmean(v, "b"), axis_name="b")(xs), x - x.mean(0))
    close(tg.vmap(lambda v: lax.psum(v, "b") + lax.pmax(v, "b") - lax.pmin(v, "b"), axis_name="b")(xs),
          np.broadcast_to(x.sum(0) + x.max(0) - x.min(0), x.shape))
    close(tg.vmap(lambda v: v * lax.axis_index("b"), axis_name="b")(xs), x * np.arange(4)[:, None])
    close(tg.vmap(lambda v: lax.all_gather(v, "b", axis=1), axis_name="b")(xs), np.broadcast_to(x.T, (4, 3, 4)))
    close(tg.vmap(lambda v: lax.all_gather(v, "b", tiled=True), axis_name="b")(xs), np.broadcast_to(x.ravel(), (4, 12)))
    tree = tg.vmap(lambda v: lax.psum({"a": v, "b": (v * 2,)}, "b"), axis_name="b")(xs)
    close(tree["b"][0], np.broadcast_to(2 * x.sum(0), x.shape))
    # rows over axis "i", the columns of each over "j": sums over the other axis, from inside the inner vmap
    nested = tg.vmap(tg.vmap(lambda v: lax.psum(v, "i") + 100 * lax.psum(v, "j") + 1000 * lax.axis_index("i"),
                             axis_name="j"), axis_name="i")(xs)
    close(nested, x.sum(0)[None, :] + 100 * x.sum(1)[:, None] + 1000 * np.arange(4)[:, None])
    close(tg.vmap(tg.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="j"), axis_name="i")(xs),
          np.full(x.shape, x.sum()))
    close(tg.vmap(tg.vmap(lambda v: lax.all_gather(v, "i"), axis_name="j"), axis_name="i")(xs)[1, 2], x[:, 2])
    # an unnamed vmap between: the outer collective batches through it too (it summed n copies of the example)
    close(tg.vmap(tg.vmap(lambda v: lax.psum(v, "i")), axis_name="i")(xs), np.broadcast_to(x.sum(0), x.shape))
    centred = tg.jit(tg.vmap(lambda v: v - lax.pmean(v, "b"), axis_name="b"))
    close(centred(xs), x - x.mean(0))
    # the gradient of the batch's squared deviations from its mean: 2 (x - mean) (the mean's own terms cancel)
    g = tg.grad(lambda t: tg.vmap(lambda v: ((v - lax.pmean(v, "b")) ** 2).sum(), axis_name="b")(t).sum())(xs)
    close(g, 2 * (x - x.mean(0)))
    with pytest.raises(NameError, match="unbound axis name: 'q'"):
        tg.vmap(lambda v: lax.psum(v, "q"), axis_name="b")(xs)
    with pytest.raises(NameError, match="unbound axis name"):
        lax.pmean(xs, "b")


def test_a_collective_s_transpose_keeps_no_value_alive() -> None:
    """The call a collective differentiated inside its axis passes through holds its backward, and an eager graph's
    cached description holds the call: the backward batches its input from the call when it runs, so once the
    result is read no lazy Tensor of the computation is left (it kept the batch and the example's input, which made
    every later eager read look for their siblings: test_eager_cost's Python call counts failed after this)."""
    xs, w0 = np.arange(6, dtype=np.float32).reshape(2, 3), np.full(3, 2, np.float32)
    before = set(_lazy)
    g = tg.vmap(lambda x, w_: tg.grad(lambda v: tg.lax.psum((x * v).sum(), "i") ** 2)(w_), in_axes=(0, None),
                axis_name="i")(xs, w0)
    np.testing.assert_allclose(g.numpy(), 2 * 2 * (xs * w0).sum() * xs, rtol=1e-6)
    del g
    gc.collect()
    assert set(_lazy) <= before


def test_differentiating_through_collectives_inside_the_axis() -> None:
    """A grad taken inside vmap(axis_name=) (pmap's data parallelism: a cross-replica batch norm's pmean inside the
    loss) differentiates through the collective by its transpose, as JAX: a psum's cotangent is the psum of every
    example's. The value was wrong (the batch's graph read the placeholder's tag, bound to one example's input) and
    the gradient zero, silently."""
    lax = tg.lax
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    s = x.sum(0)
    close = lambda got, want: np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)  # noqa: E731
    v, g = tg.vmap(tg.value_and_grad(lambda v: lax.psum((v ** 2).sum(), "i")), axis_name="i")(x)
    close(v, [(x ** 2).sum()] * 2)
    close(g, 2 * 2 * x)   # d/dv of the sum over both examples, times the two examples' cotangents (as JAX's)
    close(tg.vmap(tg.grad(lambda v: lax.pmean((v ** 2).sum(), "i")), axis_name="i")(x), 2 * x)
    close(tg.vmap(tg.grad(lambda v: (v * lax.psum(v, "i")).sum()), axis_name="i")(x), np.broadcast_to(2 * s, x.shape))
    centred = tg.vmap(tg.grad(lambda v: ((v - lax.pmean(v.mean(), "i")) ** 2).sum()), axis_name="i")(x)
    close(centred, 2 * (x - x.mean()))   # the mean's own terms cancel over the batch
    close(tg.vmap(lambda v: tg.vjp(lambda v: lax.psum(v, "i"), v)[1](tnp.ones(3))[0], axis_name="i")(x),
          np.full(x.shape, 2.0))
    close(tg.vmap(tg.grad(lambda v: (lax.all_gather(v, "i") * tnp.asarray([[1.0], [2.0]])).sum()), axis_name="i")(x),
          [[2.0] * 3, [4.0] * 3])
    ring = tg.pmap(tg.grad(lambda v: (lax.ppermute(v, "i", [(0, 1), (1, 0)]) * tnp.arange(3.0)).sum()),
                   axis_name="i")(x)
    close(ring, np.broadcast_to(np.arange(3.0), x.shape))
    # a collective over the outer axis from inside an inner vmap, under the grad
    nested = tg.vmap(tg.vmap(tg.grad(lambda v: (lax.psum(v, "i") * v).sum()), axis_name="j"), axis_name="i")(x)
    close(nested, np.broadcast_to(2 * s, x.shape))
    close(tg.jit(tg.vmap(tg.grad(lambda v: lax.psum((v ** 3).sum(), "i")), axis_name="i"))(x), 2 * 3 * x ** 2)
    close(tg.vmap(tg.grad(tg.grad(lambda v: lax.psum(v ** 3, "i"))), axis_name="i")(np.float32([1, 2])), [12, 24])
    # forward mode too (test_collective_derivatives has the rest): a psum's tangent is the psum of the tangents
    close(tg.vmap(lambda v: tg.jvp(lambda v: lax.psum(v * v, "i"), (v,), (tnp.ones(3),))[1], axis_name="i")(x),
          np.broadcast_to(2 * s, x.shape))


def test_pmap_is_a_jitted_vmap_with_a_named_axis() -> None:
    # jax.pmap's spelling, as ported programs write it: collectives over its axis name, static arguments, in_axes;
    # the values JAX's pmap gives (tgfx computes them in one batched program on the default device)
    x = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    norm = tg.pmap(lambda v: v / tg.lax.psum(v, "i"), axis_name="i")
    np.testing.assert_allclose(norm(x).numpy(), x / x.sum(0), rtol=1e-6)
    scaled = tg.pmap(lambda v, n: v * n - tg.lax.pmean(v, "d"), axis_name="d", static_broadcasted_argnums=1)
    np.testing.assert_allclose(scaled(x, 3).numpy(), x * 3 - x.mean(0), rtol=1e-6)
    np.testing.assert_allclose(scaled(x, 3).numpy(), x * 3 - x.mean(0), rtol=1e-6)
    shifted = tg.pmap(lambda a, b: a + b, in_axes=(0, None))(x, np.float32([1, 2, 3]))
    np.testing.assert_allclose(shifted.numpy(), x + [1, 2, 3], rtol=1e-6)
    with pytest.raises(NameError, match="unbound axis name"):
        tg.pmap(lambda v: tg.lax.psum(v, "j"), axis_name="i")(x)
