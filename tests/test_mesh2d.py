"""Data x tensor parallelism on a 2-D mesh (`Mesh(devices.reshape(2, 2), ("data", "model"))`): block layouts over a
device grid (`tgfx/ir/blocks.py`), their lowering to per-device graphs with all-reduces over subgroups of devices
(`tgfx/lowering/multi.py`), and JAX's dp x tp programs end to end -- jit(grad) over NamedSharding'd parameters and
data, and shard_map with collectives over one mesh axis -- against numpy and one-device runs."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.ir import blocks
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering import _inline
from tgfx.lowering.inline import walk
from tgfx.lowering.multi import pm_multi
from tgfx.sharding import Mesh, NamedSharding
from tgfx.sharding import PartitionSpec as P

D4 = ("CPU:0", "CPU:1", "CPU:2", "CPU:3")
ROWS, COLS, BOTH = ((2, 2), (1, 1)), ((1, 1), (2, 1)), ((2, 2), (2, 1))   # P("data"), P(None, "model"), both


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture
def mesh() -> Mesh:
    with tg.Context(TGFX_CPU_DEVICES=4):
        return Mesh(np.array(tg.devices("cpu")).reshape(2, 2), ("data", "model"))


# ---- the layout algebra ----
def test_block_layouts() -> None:
    assert blocks.splits(1, 2, 4) == ((1, 1), (4, 1)) and blocks.splits(None, 2, 4) == ((1, 1), (1, 1))
    assert blocks.canonical(((1, 1), (4, 1)), 4) == 1 and blocks.canonical(((1, 1), (1, 1)), 4) is None
    assert blocks.canonical(ROWS, 4) == ROWS            # a split over part of the devices stays a grid layout
    assert [blocks.block_of(BOTH, i) for i in range(4)] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [blocks.block_of(ROWS, i) for i in range(4)] == [(0, 0), (0, 0), (1, 0), (1, 0)]
    assert blocks.is_valid(BOTH, 4) and not blocks.is_valid(((2, 1), (2, 1)), 4) and not blocks.is_valid(((4, 2),), 4)
    # an elementwise op of a batch split over "data" and a weight split over "model": each device's block of both
    assert blocks.join([ROWS, COLS], 2, 4) == BOTH
    assert blocks.join([ROWS, 0], 2, 4) == ROWS          # an axis split over all devices reads "data"'s digit too
    # a reduce over rows combines devices {0, 2} and {1, 3}; over columns {0, 1} and {2, 3}
    assert [blocks.group_key(BOTH, (0,), i) for i in range(4)] == [0, 1, 0, 1]
    assert [blocks.group_key(BOTH, (1,), i) for i in range(4)] == [0, 0, 2, 2]


def _param(i: int, shape: tuple[int, ...], device: str) -> UOp:
    from tgfx.dtypes import dtypes
    return UOp(Ops.PARAM, dtypes.float32, (), (i, shape, device))


def test_pm_multi_reduces_over_one_mesh_axis_with_subgroup_allreduces() -> None:
    """A sum over the rows of a (data, model)-blocked value: per-device partial sums, and one all-reduce per column
    of the grid -- over devices (0, 2) and (1, 3) -- not one over all four."""
    parts = tuple(_param(i, (2, 3), d) for i, d in enumerate(D4))
    x = UOp(Ops.MULTI, parts[0].dtype, parts, BOTH)
    assert x.shape == (4, 6)
    total = UOp(Ops.REDUCE_AXIS, x.dtype, (x,), (Ops.ADD, (0,)))
    out = graph_rewrite(UOp(Ops.SINK, None, (total,)), pm_multi, name="multi").src[0]
    assert out.op is Ops.MULTI and out.arg == COLS and out.shape == (1, 6)
    rings = {u for u in out.toposort() if u.op is Ops.ALLREDUCE}
    assert sorted(r.device for r in rings) == [("CPU:0", "CPU:2"), ("CPU:1", "CPU:3")]
    # an elementwise op with a value split over "model" only: each device takes its block of it (no collective)
    w = UOp(Ops.MULTI, parts[0].dtype, tuple(_param(4 + i, (4, 3), d) for i, d in enumerate(D4)), COLS)
    both = graph_rewrite(UOp(Ops.SINK, None, (x + w,)), pm_multi, name="multi").src[0]
    assert both.arg == BOTH and not any(u.op in (Ops.ALLREDUCE, Ops.COPY) for u in both.toposort())


# ---- numbers: placement, ops and layouts ----
def test_ops_on_grid_layouts_match_numpy(mesh: Mesh) -> None:
    a, w, v = randn(8, 6), randn(6, 4, seed=1), randn(4, seed=2)
    x = tg.device_put(a, NamedSharding(mesh, P("data", None)))
    wt = tg.device_put(w, NamedSharding(mesh, P(None, "model")))
    vt = tg.device_put(v, NamedSharding(mesh, P("model")))
    h = tnp.tanh(x @ wt + vt)                    # every device its (rows, columns) block: no collective
    assert tg.sharding(h.realize()) == (D4, BOTH)
    np.testing.assert_allclose(h.numpy(), np.tanh(a @ w + v), rtol=1e-5, atol=1e-6)
    assert h.sharding == NamedSharding(mesh, P("data", "model"))
    y = h @ tg.device_put(randn(4, 3, seed=3), NamedSharding(mesh, P("model", None)))   # all-reduce over "model"
    assert tg.sharding(y.realize()) == (D4, ROWS)
    np.testing.assert_allclose(y.numpy(), np.tanh(a @ w + v) @ randn(4, 3, seed=3), rtol=1e-5, atol=1e-6)
    s = x.sum(0)                                 # over "data": a replicated result
    assert tg.sharding(s.realize()) == (D4, None)
    np.testing.assert_allclose(s.numpy(), a.sum(0), rtol=1e-5)
    t = h.T.reshape(2, 2, 8)                      # views keep the blocks where they can
    assert tg.sharding(h.T.realize()) == (D4, ((2, 1), (2, 2)))
    np.testing.assert_allclose(t.numpy(), np.tanh(a @ w + v).T.reshape(2, 2, 8), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h[1:, ::2].numpy(), np.tanh(a @ w + v)[1:, ::2], rtol=1e-5, atol=1e-6)
    moved = tg.device_put(h, NamedSharding(mesh, P("model", "data")))   # resharded on the same devices
    assert tg.sharding(moved.realize()) == (D4, ((2, 1), (2, 2)))
    np.testing.assert_allclose(moved.numpy(), h.numpy(), rtol=0)
    assert [s.replica_id for s in x.addressable_shards] == [0, 1, 0, 1]


# ---- dp x tp training, JAX's spelling ----
def _mlp(steps: int = 4) -> tuple[dict, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((8, 12)) * 0.3, "b1": np.zeros(12), "w2": rng.standard_normal((12, 4)) * 0.3}
    xs, ys = rng.standard_normal((steps, 16, 8)), rng.standard_normal((steps, 16, 4))
    return {k: v.astype(np.float32) for k, v in params.items()}, xs.astype(np.float32), ys.astype(np.float32)


def _loss(p: dict, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    h = tnp.tanh(x @ p["w1"] + p["b1"])
    return tnp.mean((h @ p["w2"] - y) ** 2)


@tg.jit
def _step(p: dict, x: tg.Tensor, y: tg.Tensor) -> tuple:
    value, g = tg.value_and_grad(_loss)(p, x, y)
    return value, {k: p[k] - 0.1 * g[k] for k in p}


def _train(place: Mesh | None, steps: int = 4) -> tuple[list[float], dict]:
    params, xs, ys = _mlp(steps)
    if place is not None:
        specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None)}
        params = {k: tg.device_put(v, NamedSharding(place, specs[k])) for k, v in params.items()}
    losses = []
    for x, y in zip(xs, ys, strict=True):
        if place is not None:
            x, y = tg.device_put((x, y), NamedSharding(place, P("data", None)))
        value, params = _step(params, x, y)
        losses.append(float(value))
    return losses, params


def test_dp_tp_training_matches_one_device_and_keeps_the_layouts(mesh: Mesh) -> None:
    one, p1 = _train(None)
    tg.counters.reset()
    both, p4 = _train(mesh)
    # the first step compiles; each later step replays the same program with the same kernels
    assert _step.trace_count == 2
    np.testing.assert_allclose(both, one, rtol=2e-6)
    for k in p1:
        np.testing.assert_allclose(p4[k].numpy(), p1[k].numpy(), rtol=1e-5, atol=1e-6)
    assert tg.sharding(p4["w1"]) == (D4, COLS) and tg.sharding(p4["w2"]) == (D4, ((2, 1), (1, 1)))
    assert p4["w1"].sharding == NamedSharding(mesh, P(None, "model"))
    assert p4["b1"].sharding == NamedSharding(mesh, P("model"))


def test_dp_tp_step_all_reduces_over_subgroups(mesh: Mesh) -> None:
    """The dp x tp step's collectives: the forward's h @ w2 over "model" (devices (0, 1) and (2, 3)), the loss's
    mean and the weight gradients over "data" ((0, 2) and (1, 3)), never one over all four devices (which would sum
    the replicas)."""
    params, xs, ys = _mlp(1)
    specs = {"w1": P(None, "model"), "b1": P("model"), "w2": P("model", None)}
    p = {k: tg.device_put(v, NamedSharding(mesh, specs[k])) for k, v in params.items()}
    x, y = tg.device_put((xs[0], ys[0]), NamedSharding(mesh, P("data", None)))
    value, g = tg.value_and_grad(_loss)(p, x, y)
    roots = UOp(Ops.SINK, None, (value.uop, *(g[k].uop for k in sorted(g))))
    sink = graph_rewrite(_inline(roots), pm_multi, name="multi")   # as lower_multi runs it
    groups = sorted({r.device for r in walk(sink) if r.op is Ops.ALLREDUCE})
    assert groups == [("CPU:0", "CPU:1"), ("CPU:0", "CPU:2"), ("CPU:1", "CPU:3"), ("CPU:2", "CPU:3")]
    assert not any(len(r.device) == 4 for r in walk(sink) if r.op is Ops.ALLREDUCE)


# ---- shard_map over one mesh axis ----
def test_shard_map_psum_over_one_mesh_axis(mesh: Mesh) -> None:
    a, w, v = randn(8, 6), randn(6, 4, seed=1), randn(4, seed=2)

    @functools.partial(tg.shard_map, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model")),
                       out_specs=P("data"))
    def fwd(xb: tg.Tensor, wb: tg.Tensor, vb: tg.Tensor) -> tg.Tensor:   # (4, 6), (6, 2), (2,)
        assert xb.shape == (4, 6) and wb.shape == (6, 2)
        return tg.lax.psum(tnp.tanh(xb @ wb) @ vb, "model")
    out = fwd(a, w, v)
    assert tg.sharding(out.realize()) == (D4, ((2, 2),))
    np.testing.assert_allclose(out.numpy(), np.tanh(a @ w) @ v, rtol=1e-5, atol=1e-6)
    # psum over "data" only: rows 0:4 plus rows 4:8, the same on every device
    s = tg.shard_map(lambda b: tg.lax.psum(b, "data"), mesh=mesh, in_specs=P("data", None), out_specs=P())(a)
    np.testing.assert_allclose(s.numpy(), a[:4] + a[4:], rtol=1e-6)
    g = tg.shard_map(lambda b: tg.lax.all_gather(b, "model", axis=1, tiled=True), mesh=mesh, in_specs=P(None, "model"),
                     out_specs=P())(w)
    np.testing.assert_array_equal(g.numpy(), w)


def test_pmean_over_data_of_a_value_psummed_over_model_is_replicated(mesh: Mesh) -> None:
    """A value psum'd over "model" is the same on the devices of a "model" group, so its pmean over "data" is one
    value for all: out_specs P() holds it (it was an error, the collective's result taken to differ over "model")."""
    a, w = randn(8, 6), randn(6, 4, seed=1)

    def f(xb: tg.Tensor, wb: tg.Tensor) -> tg.Tensor:
        return tg.lax.pmean(tg.lax.psum((xb @ wb).sum(), "model"), "data")
    out = tg.shard_map(f, mesh=mesh, in_specs=(P("data", None), P(None, "model")), out_specs=P())(a, w)
    np.testing.assert_allclose(float(out), (a @ w).sum() / 2, rtol=1e-5)
    # the same under nested vmaps: the inner (model) axis's out_axes None is right for the pmean
    inner = tg.vmap(lambda x, wc: tg.lax.pmean(tg.lax.psum((x @ wc).sum(), "m"), "d"), in_axes=(None, 0),
                    out_axes=None, axis_name="m")
    got = tg.vmap(inner, in_axes=(0, None), out_axes=None, axis_name="d")(a.reshape(2, 4, 6),
                                                                          w.reshape(6, 2, 2).transpose(1, 0, 2))
    np.testing.assert_allclose(float(got), (a @ w).sum() / 2, rtol=1e-5)


def test_visualize_a_grid_layout(mesh: Mesh) -> None:
    x = tg.device_put(np.zeros((4, 6), np.float32), NamedSharding(mesh, P("data", None)))
    text = tg.visualize_sharding(x)
    assert text.startswith("float32[4, 6] split along axis 0 2 ways, each block on 2 devices over 4 devices")
    assert "CPU:1  [0:2, 0:6]" in text and "CPU:2  [2:4, 0:6]" in text


def test_grad_of_a_shard_mapped_loss_over_both_mesh_axes(mesh: Mesh) -> None:
    """dp x tp in shard_map's spelling: a loss psum'd over "model" and pmean'd over "data", differentiated (outside
    the shard_map) and jitted: the gradients of the one-device loss, laid out as the weights are."""
    a, w, v = randn(8, 6), randn(6, 4, seed=1), randn(4, seed=2)

    def local(xb: tg.Tensor, wb: tg.Tensor, vb: tg.Tensor) -> tg.Tensor:
        pred = tg.lax.psum(tnp.tanh(xb @ wb) @ vb, "model")
        return tg.lax.pmean(tnp.mean(pred ** 2), "data")
    loss = tg.shard_map(local, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model")), out_specs=P())
    value, (gw, gv) = tg.jit(tg.value_and_grad(loss, argnums=(1, 2)))(a, w, v)
    one = lambda x, w_, v_: tnp.mean((tnp.tanh(x @ w_) @ v_) ** 2)  # noqa: E731
    want, (ww, wv) = tg.value_and_grad(one, argnums=(1, 2))(a, w, v)
    np.testing.assert_allclose(float(value), float(want), rtol=1e-6)
    np.testing.assert_allclose(gw.numpy(), ww.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gv.numpy(), wv.numpy(), rtol=1e-5, atol=1e-6)


def test_collective_inside_a_grad_inside_shard_map(mesh: Mesh) -> None:
    """A psum over "model" inside a grad taken inside the shard_map, of a loss that depends on the "model" blocks of
    the differentiated weight: the gradient flows back through the collective by its transpose, as JAX's (it came
    out zero, and the loss wrong). Each device's cotangent of the psum'd row sums, 2 s / 4, is psum'd over the two
    "model" devices: the block's gradient is sum_r x[r, k] s_r on every column (jax 0.10.2 gives the same)."""
    a, w = randn(8, 6), randn(6, 4, seed=1)

    def local(xb: tg.Tensor, wb: tg.Tensor) -> tg.Tensor:
        return tg.grad(lambda w_: (tg.lax.psum((xb @ w_).sum(1), "model") ** 2).mean())(wb)
    got = tg.shard_map(local, mesh=mesh, in_specs=(P("data", None), P(None, "model")), out_specs=P(None, "model"),
                       check_vma=False)(a, w)
    s = (a @ w).sum(1)
    want = (a[:4] * s[:4, None]).sum(0)   # out_specs without "data": the first data block's, as JAX's
    np.testing.assert_allclose(got.numpy(), np.broadcast_to(want[:, None], (6, 4)), rtol=1e-4, atol=1e-4)
    # a weight the same on every example (unmapped): each example's cotangent of the psum is psum'd, 2 n total,
    # times its own x (jax's [0, 120, 240, ...])
    xs, w0 = np.arange(6, dtype=np.float32).reshape(2, 3), np.full(3, 2, np.float32)
    g = tg.vmap(lambda x, w_: tg.grad(lambda v: tg.lax.psum((x * v).sum(), "i") ** 2)(w_), in_axes=(0, None),
                axis_name="i")(xs, w0)
    total = (xs * w0).sum()
    np.testing.assert_allclose(g.numpy(), 2 * 2 * total * xs, rtol=1e-6)


def _mlp_grads(a: np.ndarray, w: np.ndarray, v: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    one = lambda x, w_, v_: tnp.mean((tnp.tanh(x @ w_) @ v_) ** 2)  # noqa: E731
    value, (gw, gv) = tg.value_and_grad(one, argnums=(1, 2))(a, w, v)
    return float(value), gw.numpy(), gv.numpy()


def test_grad_inside_shard_map_is_jax_s_check_vma(mesh: Mesh) -> None:
    """dp x tp with the gradient taken inside the shard_map, as JAX's shard_map (check_vma, its default) gives it:
    the loss, psum'd over "model" and pmean'd over "data", is one value, so a psum's cotangent goes back to each
    device as it is (not the sum of every device's), and the weight, the same on both "data" devices, gets the sum of
    their gradients: the one-device gradient, laid out as the weights. (It was twice that over "model", as vmap's.)"""
    a, w, v = randn(8, 6), randn(6, 4, seed=1), randn(4, seed=2)
    value, gw, gv = _mlp_grads(a, w, v)

    def local(x: tg.Tensor, w_: tg.Tensor, v_: tg.Tensor) -> tg.Tensor:
        return tg.lax.pmean(tnp.mean(tg.lax.psum(tnp.tanh(x @ w_) @ v_, "model") ** 2), "data")

    @functools.partial(tg.shard_map, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model")),
                       out_specs=(P(), P(None, "model"), P("model")))
    def step(xb: tg.Tensor, wb: tg.Tensor, vb: tg.Tensor) -> tuple:
        loss, (g1, g2) = tg.value_and_grad(local, argnums=(1, 2))(xb, wb, vb)
        return loss, g1, g2
    got = tg.jit(step)(a, w, v)
    np.testing.assert_allclose(float(got[0]), value, rtol=1e-6)
    np.testing.assert_allclose(got[1].numpy(), gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2].numpy(), gv, rtol=1e-5, atol=1e-6)
    assert tg.sharding(got[1]) == (D4, COLS)
    # without check_vma, as JAX: a psum's transpose is a psum (2x over "model"), and each "data" device keeps its
    # own rows' gradient (block 0's returned), halved by the pmean's transpose
    loose = tg.shard_map(lambda xb, wb, vb: tg.grad(local, argnums=1)(xb, wb, vb), mesh=mesh, check_vma=False,
                         in_specs=(P("data", None), P(None, "model"), P("model")), out_specs=P(None, "model"))(a, w, v)
    np.testing.assert_allclose(loose.numpy(), 2 * _mlp_grads(a[:4], w, v)[1], rtol=1e-5, atol=1e-6)


def test_check_vma_transposes_of_psum_and_pmean() -> None:
    """The numbers jax 0.10.2 gives on a 1-D mesh of two devices, with check_vma and without."""
    with tg.Context(TGFX_CPU_DEVICES=2):
        m = Mesh(np.array(tg.devices("cpu")), ("i",))
    w, y = np.arange(4.0, dtype=np.float32), np.array([1.0, 3.0], np.float32)
    for check, factor in [(True, 1), (False, 2)]:
        def run(f: Any, *args: Any, check: bool = check) -> np.ndarray:
            specs = tuple(P("i") for _ in args)
            return tg.shard_map(f, mesh=m, in_specs=specs, out_specs=P("i"), check_vma=check)(*args).numpy()
        # d/dw (sum w)^2 = 12: each device's cotangent 2 S is the one value's (check_vma), or psum'd (2 x)
        np.testing.assert_allclose(run(lambda wb: tg.grad(lambda u: tg.lax.psum(u.sum(), "i") ** 2)(wb), w),
                                   np.full(4, 12.0 * factor))
        np.testing.assert_allclose(run(lambda wb: tg.grad(lambda u: tg.lax.pmean((u * u).sum(), "i"))(wb), w),
                                   factor * w)
        # a cotangent that differs between the devices (the psum times each device's y) is summed either way
        np.testing.assert_allclose(run(lambda wb, yb: tg.grad(lambda u: (tg.lax.psum(u.sum(), "i") * yb).sum())(wb),
                                       w, y), np.full(4, 4.0))


def test_grad_of_a_replicated_weight_inside_shard_map_is_summed_over_its_devices() -> None:
    """Data parallelism with the gradient inside the shard_map: the weight is the same on every device, so (check_vma)
    its gradient is the sum of every device's, as JAX's -- a pmean of the per-device losses inside gives the
    one-device gradient, a pmean of the gradients after gives twice it; check_vma=False leaves each device its own."""
    with tg.Context(TGFX_CPU_DEVICES=2):
        m = Mesh(np.array(tg.devices("cpu")), ("data",))
    a, w = randn(8, 4), randn(4, 2, seed=1)
    true = tg.grad(lambda w_: ((tnp.asarray(a) @ w_) ** 2).mean())(w).numpy()
    def mean_inside(xb: tg.Tensor, wb: tg.Tensor) -> tg.Tensor:
        return tg.grad(lambda u: tg.lax.pmean(((xb @ u) ** 2).mean(), "data"))(wb)

    def mean_after(xb: tg.Tensor, wb: tg.Tensor) -> tg.Tensor:
        return tg.lax.pmean(tg.grad(lambda u: ((xb @ u) ** 2).mean())(wb), "data")
    for f, check, factor in [(mean_inside, True, 1), (mean_after, True, 2), (mean_after, False, 1)]:
        g = tg.shard_map(f, mesh=m, in_specs=(P("data"), P()), out_specs=P(), check_vma=check)(a, w)
        np.testing.assert_allclose(g.numpy(), factor * true, rtol=1e-5)
    # vjp's pullback too, with a cotangent made on the default device (it met the blocks on CPU:0: SPEC's invalid MUL)
    pulled = tg.shard_map(lambda xb, wb: tg.vjp(lambda u: ((xb @ u) ** 2).mean(), wb)[1](tnp.asarray(1.0))[0],
                          mesh=m, in_specs=(P("data"), P()), out_specs=P())(a, w)
    np.testing.assert_allclose(pulled.numpy(), 2 * true, rtol=1e-5)


def test_a_grid_layout_across_processes_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2 x 2 mesh over two processes of two devices each: blocks over the grid would need collectives between
    subgroups across processes, which the MPI lowering does not have (its gather joined one split axis)."""
    from tgfx.devices import network
    monkeypatch.setattr(network, "_group", network.ProcessGroup(0, 2, 2))
    devs = tuple(tg.devices("cpu"))
    assert devs == ("CPU:0", "CPU:1", "CPU:0@1", "CPU:1@1")
    m = Mesh(np.array(devs).reshape(2, 2), ("data", "model"))
    with pytest.raises(NotImplementedError, match=r"block layout over a device grid .* span processes"):
        tg.device_put(np.ones((4, 4), np.float32), NamedSharding(m, P("data", None)))
    assert tg.sharding(tg.device_put(np.ones((4, 4), np.float32), NamedSharding(m, P(("data", "model"))))) == (devs, 0)
