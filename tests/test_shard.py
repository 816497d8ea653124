"""shard: sharded Tensors on CPU:0..3 give the unsharded answers; collectives, grad and jit compose with them."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices import DEFAULT_DEVICE, canonical_device
from tgfx.ir.ops import Ops
from tgfx.ir.pattern import graph_rewrite
from tgfx.ir.uop import UOp
from tgfx.lowering.layout import new_buffer
from tgfx.lowering.multi import RingCtx, ShardingError, pm_allreduce, pm_multi, ring_all_reduce

D2 = ("CPU:0", "CPU:1")
D4 = ("CPU:0", "CPU:1", "CPU:2", "CPU:3")
rng = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Each test draws the same data whichever tests ran before it in its worker (pytest -n spreads them)."""
    global rng
    rng = np.random.default_rng(0)


def randn(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# ---- placement ----
@pytest.mark.parametrize("devs", [D2, D4])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_shard_places_pieces_on_each_device(devs: tuple, axis: int | None) -> None:
    a = randn(8, 4)
    x = tg.shard(tg.asarray(a), devs, axis=axis)
    assert x.device == devs and x.shape == (8, 4)
    np.testing.assert_array_equal(x.numpy(), a)
    pieces = tg.parts(x)
    assert [p.device for p in pieces] == list(devs)
    for i, p in enumerate(pieces):
        expect = a if axis is None else np.split(a, len(devs), axis=axis)[i]
        np.testing.assert_array_equal(p.numpy(), expect)
    assert tg.sharding(x) == (devs, axis)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_eager_calls_of_functions_on_sharded_tensors(axis: int | None) -> None:
    """Eager ops that are traced functions (a cumulative sum or maximum; a user's `tg.function`) of a Tensor sharded
    from numpy (its pieces computed: an unknown device ('CPU:0', 'CPU:1') error, as the call's graph went to the
    one-device path), then of one sharded lazily (the body kept for the pieces' call, a PARAM a piece, was reused
    for the lazy copy's one value: IndexError), along either axis or replicated: numpy's values, the layout kept."""
    a = randn(4, 6)
    for x in (tg.shard(a, D2, axis=axis).realize(), tg.shard(tg.asarray(a), D2, axis=axis)):
        np.testing.assert_allclose(tnp.cumsum(x, axis=1).numpy(), np.cumsum(a, 1), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(tnp.cumsum(x, axis=0).numpy(), np.cumsum(a, 0), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(tg.lax.cummax(x, 1).numpy(), np.maximum.accumulate(a, 1))
        doubled = tg.function(lambda t: t * 2 + 1)(x)
        np.testing.assert_array_equal(doubled.numpy(), a * 2 + 1)
        assert doubled.device == D2 and tg.sharding(doubled) == (D2, axis)


def test_the_gradient_of_a_reshard_comes_back_in_the_inputs_layout() -> None:
    """The gradient of `tg.shard(x, devs, axis)` of a sharded `x` goes back to x's devices in x's layout: onto the
    same tuple along another axis it came back split along that axis; onto another tuple it raised ValueError in
    blocks.py (the COPY back named the bare tuple, which the lowering read as (device, layout)). A value computed
    on the tuple (whose layout the lowering chooses) comes back on its devices; the values are 2x either way."""
    a = randn(4, 2)
    x = tg.shard(a, D2, axis=0)
    other = ("CPU:2", "CPU:3")
    for devs, axis in ((D2, 1), (other, 1), (other, None)):
        g = tg.grad(lambda x, devs=devs, axis=axis: (tg.shard(x, devs, axis=axis) ** 2).sum())(x)
        assert tg.sharding(g) == (D2, 0)
        np.testing.assert_allclose(g.numpy(), 2 * a, rtol=1e-6)
    g = tg.grad(lambda x: (tg.shard(x * 1, other, axis=1) ** 2).sum())(x)
    assert g.device == D2
    np.testing.assert_allclose(g.numpy(), 2 * a, rtol=1e-6)


def test_shard_of_a_buffer_along_axis_0_is_copies_only() -> None:
    x = tg.asarray(randn(8, 4), device="CPU:0").realize()
    tg.counters.reset()
    tg.shard(x, D4, axis=0).realize()
    # the three pieces that move are contiguous ranges copied straight out of the buffer; CPU:0 keeps its piece (one
    # kernel materialises that view)
    assert tg.counters.copy_count == 3 and tg.counters.kernel_count == 1


@pytest.mark.parametrize("src_axis,dst_axis", [(0, 1), (1, 0), (None, 0), (0, None), (1, None)])
def test_reshard(src_axis: int | None, dst_axis: int | None) -> None:
    a = randn(4, 8)
    x = tg.shard(tg.asarray(a), D4, axis=src_axis)
    y = tg.shard(x, D4, axis=dst_axis)
    assert tg.sharding(y) == (D4, dst_axis)
    np.testing.assert_array_equal(y.numpy(), a)
    for i, p in enumerate(tg.parts(y)):
        expect = a if dst_axis is None else np.split(a, 4, axis=dst_axis)[i]
        np.testing.assert_array_equal(p.numpy(), expect)


def test_device_put_moves_gathers_and_shards() -> None:
    a = randn(4, 6)
    x = tg.device_put(tg.asarray(a), D2, axis=0)
    assert tg.sharding(x) == (D2, 0)
    y = tg.device_put(x, "CPU:3")
    assert y.device == "CPU:3"
    np.testing.assert_array_equal(y.numpy(), a)
    z = tg.device_put(x, ("CPU:2", "CPU:3"), axis=1)  # another device tuple
    assert tg.sharding(z) == (("CPU:2", "CPU:3"), 1)
    np.testing.assert_array_equal(z.numpy(), a)
    r = tg.Tensor(a, device=D2)  # host data replicated on a tuple
    assert tg.sharding(r) == (D2, None)


# ---- ops on sharded Tensors ----
def test_elementwise_maps_per_device_and_broadcasts_against_replicated() -> None:
    a, b, c = randn(8, 4), randn(8, 4), randn(4)
    x = tg.shard(tg.asarray(a), D4, axis=0)
    y = tg.shard(tg.asarray(b), D4, axis=1)        # a different layout: resharded to x's
    z = tg.shard(tg.asarray(c), D4)                 # replicated, broadcast along rows
    out = tnp.tanh(x * y + z) - 1.5 + np.float32(2) * x
    np.testing.assert_allclose(out.numpy(), np.tanh(a * b + c) - 1.5 + 2 * a, rtol=1e-5, atol=1e-6)
    assert tg.sharding(out.realize()) == (D4, 0)
    host = x + np.ones((8, 4), np.float32)         # host data goes to x's devices
    np.testing.assert_allclose(host.numpy(), a + 1, rtol=1e-6)


def test_iota_and_constants_are_sliced_per_device() -> None:
    labels = np.array([3, 0, 2, 1, 1, 0, 3, 2], np.int32)
    y = tg.shard(tg.asarray(labels), D2, axis=0)
    onehot = (y[:, None] == tnp.arange(4)[None, :]).astype(tg.dtypes.float32)
    np.testing.assert_array_equal(onehot.numpy(), np.eye(4, dtype=np.float32)[labels])


@pytest.mark.parametrize("fn", [
    lambda t: t.reshape(4, 2, 6), lambda t: t.reshape(48), lambda t: t.reshape(2, 24), lambda t: t.T,
    lambda t: t.reshape(8, 6, 1).transpose(2, 1, 0), lambda t: t[:, 1:4], lambda t: t[2:7], lambda t: t[::-1],
    lambda t: t[:, ::-1], lambda t: tnp.pad(t, ((0, 0), (1, 2))), lambda t: tnp.pad(t, ((1, 0), (0, 0))),
    lambda t: t[:, None, :].repeat(3, axis=1) if hasattr(t, "repeat") else tnp.repeat(t[:, None, :], 3, axis=1),
    lambda t: tnp.broadcast_to(t[:, None, :], (8, 3, 6)),
], ids=["reshape-keep", "flatten", "reshape-merge", "transpose", "permute3", "shrink-other", "shrink-sharded",
        "flip-sharded", "flip-other", "pad-other", "pad-sharded", "repeat", "broadcast"])
def test_movement_ops(fn) -> None:  # noqa: ANN001
    a = randn(8, 6)
    x = tg.shard(tg.asarray(a), D2, axis=0)
    np.testing.assert_array_equal(fn(x).numpy(), fn(tg.asarray(a)).numpy())


def test_movement_keeps_the_split_where_it_can() -> None:
    x = tg.shard(tg.asarray(randn(8, 6)), D2, axis=0)
    assert tg.sharding(x.T.realize()) == (D2, 1)
    assert tg.sharding(x.reshape(48).realize()) == (D2, 0)
    assert tg.sharding(x.reshape(2, 4, 6).realize()) == (D2, 0)
    assert tg.sharding(x[1:7].realize()) == (D2, None)  # a shrink across devices gathers


@pytest.mark.parametrize("devs", [D2, D4])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("red", ["sum", "max", "min", "mean", "prod"])
def test_reductions(devs: tuple, axis: int, red: str) -> None:
    a = randn(8, 12)
    x = tg.shard(tg.asarray(a), devs, axis=axis)
    for over in (0, 1, None):
        got = getattr(tnp, red)(x, axis=over)
        np.testing.assert_allclose(got.numpy(), getattr(np, red)(a, axis=over), rtol=2e-5, atol=1e-5)


@pytest.fixture
def ring_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU devices as a backend whose memory only its own engines reach: all-reduces go around the ring."""
    from tgfx.devices.cpu import CPUDevice
    monkeypatch.setattr(CPUDevice, "host_memory", False)


def test_allreduce_is_a_ring_of_copies_and_adds(ring_only: None) -> None:
    x = tg.shard(tg.asarray(randn(4, 1000)), D4, axis=0).realize()
    tg.counters.reset()
    s = x.sum(axis=0).realize()
    # per device: one partial sum and 3 reduce-scatter adds; 2 * 3 copies around the ring, and the 4 chunks copied
    # into place in the result
    assert tg.counters.copy_count == 4 * (2 * 3 + 4)
    assert tg.counters.kernel_count == 4 * (1 + 3)
    assert tg.sharding(s) == (D4, None)


@pytest.mark.parametrize("devs", [D2, D4])
def test_allreduce_over_host_memory_devices_reads_parts_in_place(devs: tuple) -> None:
    """CPU devices share this process's memory: the first device combines every partial sum where it lies, in one
    kernel, and every device's replica is that result (a ring over 4 devices is 40 copies and 12 adds)."""
    from tgfx.lowering.execute import buffer_memory
    a = randn(len(devs) * 3, 1001)
    x = tg.shard(tg.asarray(a), devs, axis=0).realize()
    tg.counters.reset()
    s = x.sum(axis=0).realize()
    assert tg.counters.copy_count == 0
    # a partial sum on each other device, and the all-reduce (which computes the first device's partial sum itself)
    assert tg.counters.kernel_count == len(devs)
    assert len({buffer_memory(p.uop, allocate=False).ptr for p in tg.parts(s)}) == 1   # one memory, n devices
    assert tg.sharding(s) == (devs, None)
    np.testing.assert_allclose(s.numpy(), a.sum(0), rtol=1e-5, atol=1e-5)
    for p in tg.parts(s):
        np.testing.assert_array_equal(p.numpy(), tg.parts(s)[0].numpy())
    m = tg.jit(lambda *ps: tg.pmax(ps))(*(tg.asarray(r).to(d) for r, d in zip(a[:len(devs)], devs, strict=True)))
    for p in tg.parts(m):
        np.testing.assert_array_equal(p.numpy(), a[:len(devs)].max(0))


def test_host_memory_allreduces_replay_in_order_under_jit() -> None:
    """A jitted psum over 3 devices, replayed with new parts each call and the last result kept: each call's kernels
    wait for the parts they read and hold the devices' next writes until they have read them."""
    f = tg.jit(lambda *ps: tg.psum(ps))
    devs = ("CPU:0", "CPU:1", "CPU:2")
    for step in range(4):
        parts = [rng.standard_normal(5001).astype(np.float32) + step for _ in devs]
        out = f(*(tg.asarray(p).to(d) * 2 for p, d in zip(parts, devs, strict=True)))
        for r in tg.parts(out):
            np.testing.assert_allclose(r.numpy(), 2 * sum(parts), rtol=1e-5, atol=1e-5)


def test_host_memory_allreduce_replicas_are_safe_to_donate_and_read() -> None:
    """The replicas of an all-reduce over CPU devices are one memory: a jitted call that donates one writes into a
    copy (the others keep the sum), and a jitted call on another device reads the sum only once it is written."""
    devs = ("CPU:0", "CPU:1", "CPU:2")
    vals = [randn(1 << 18) for _ in devs]
    f = tg.jit(lambda *ps: tg.psum(ps))
    parts = [tg.asarray(v).to(d).realize() for v, d in zip(vals, devs, strict=True)]
    tg.counters.reset()
    total = f(*parts)
    assert (tg.counters.kernel_count, tg.counters.copy_count) == (1, 0)
    want = sum(vals)
    double = tg.jit(lambda x: x * 2)   # queued on CPU:2 right behind the all-reduce's kernel on CPU:0
    np.testing.assert_allclose(double(tg.parts(total)[2]).numpy(), 2 * want, rtol=1e-5, atol=1e-5)
    step = tg.jit(lambda x: x + 1, donate_argnums=0)
    for i in (1, 0):
        bumped = step(tg.parts(total)[i])
        np.testing.assert_allclose(bumped.numpy(), want + 1, rtol=1e-5, atol=1e-5)
    for p in tg.parts(total)[1:]:   # (part 0 and 1 were donated: using them raises)
        np.testing.assert_allclose(p.numpy(), want, rtol=1e-5, atol=1e-5) if p.device == "CPU:2" else None
    only = tg.jit(lambda *ps: tg.psum(ps).to("CPU:1"))   # one replica: no result is memory the program reuses
    for _ in range(3):
        np.testing.assert_allclose(only(*(tg.asarray(v).to(d) for v, d in zip(vals, devs, strict=True))).numpy(),
                                   want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("size", [1, 5, 7, 64])
def test_ring_all_reduce_uneven_chunks(n: int, size: int) -> None:
    devs = tuple(f"CPU:{i}" for i in range(n))
    vals = [randn(size) for _ in range(n)]
    out = tg.psum([tg.asarray(v).to(d) for v, d in zip(vals, devs, strict=True)])
    for p in tg.parts(out.realize()):
        np.testing.assert_allclose(p.numpy(), sum(vals), rtol=1e-5, atol=1e-6)


# ---- matmuls in the three layouts ----
@pytest.mark.parametrize("devs", [D2, D4])
def test_matmul_sharded_batch_replicated_weights(devs: tuple) -> None:
    a, w = randn(16, 8), randn(8, 12)
    out = tg.shard(tg.asarray(a), devs, axis=0) @ tg.shard(tg.asarray(w), devs)
    np.testing.assert_allclose(out.numpy(), a @ w, rtol=1e-5, atol=1e-5)
    assert tg.sharding(out.realize()) == (devs, 0)


@pytest.mark.parametrize("devs", [D2, D4])
def test_matmul_tensor_parallel_output_axis(devs: tuple) -> None:
    a, w = randn(16, 8), randn(8, 12)
    out = tg.shard(tg.asarray(a), devs) @ tg.shard(tg.asarray(w), devs, axis=1)
    np.testing.assert_allclose(out.numpy(), a @ w, rtol=1e-5, atol=1e-5)
    assert tg.sharding(out.realize()) == (devs, 1)


@pytest.mark.parametrize("devs", [D2, D4])
def test_matmul_contraction_over_sharded_axis(devs: tuple) -> None:
    a, w = randn(16, 8), randn(8, 12)
    tg.counters.reset()
    out = (tg.shard(tg.asarray(a), devs, axis=1) @ tg.shard(tg.asarray(w), devs, axis=0)).realize()
    np.testing.assert_allclose(out.numpy(), a @ w, rtol=1e-5, atol=1e-5)
    assert tg.sharding(out) == (devs, None)
    assert tg.counters.copy_count > 0  # partial sums all-reduced


# ---- explicit collectives ----
def test_psum_pmax_all_gather_reduce_scatter() -> None:
    vals = [randn(4, 6) for _ in D4]
    pieces = [tg.asarray(v).to(d) for v, d in zip(vals, D4, strict=True)]
    np.testing.assert_allclose(tg.psum(pieces).numpy(), sum(vals), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(tg.pmax(pieces).numpy(), np.max(vals, axis=0))
    rs = tg.reduce_scatter(pieces, axis=0)
    assert tg.sharding(rs) == (D4, 0)
    for i, p in enumerate(tg.parts(rs)):
        np.testing.assert_allclose(p.numpy(), sum(vals)[i:i + 1], rtol=1e-5, atol=1e-6)
    x = tg.shard(tg.asarray(vals[0]), D2, axis=1)
    g = tg.all_gather(x)
    assert tg.sharding(g) == (D2, None)
    for p in tg.parts(g):
        np.testing.assert_array_equal(p.numpy(), vals[0])
    joined = tg.from_parts(pieces, axis=0)
    np.testing.assert_array_equal(joined.numpy(), np.concatenate(vals, axis=0))


# ---- grad ----
def _mse(w: tg.Tensor, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    return ((x @ w - y) ** 2).mean()


def test_grad_of_replicated_params_is_all_reduced() -> None:
    x, y, w = randn(16, 5), randn(16, 1), randn(5, 1)
    g1 = tg.grad(_mse)(tg.asarray(w), tg.asarray(x), tg.asarray(y)).numpy()
    g2 = tg.grad(_mse)(tg.shard(tg.asarray(w), D4), tg.shard(tg.asarray(x), D4, axis=0),
                       tg.shard(tg.asarray(y), D4, axis=0))
    np.testing.assert_allclose(g2.numpy(), g1, rtol=1e-5, atol=1e-6)
    assert tg.sharding(g2.realize()) == (D4, None)
    for p in tg.parts(g2):  # every replica holds the same gradient
        np.testing.assert_array_equal(p.numpy(), tg.parts(g2)[0].numpy())


def test_grad_through_shard_inside_the_function() -> None:
    a = randn(8, 3)

    def f(x: tg.Tensor) -> tg.Tensor:
        return (tnp.sin(tg.shard(x, D2, axis=0)) * 2).sum()
    g = tg.grad(f)(tg.asarray(a, device="CPU:1"))
    assert g.device == "CPU:1"   # the input's device, where the sharded computation's gradient is gathered
    np.testing.assert_allclose(g.numpy(), 2 * np.cos(a), rtol=1e-5, atol=1e-6)


def _mlp_loss(params: dict, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    h = tnp.maximum(x @ params["w1"] + params["b1"], 0)
    logits = h @ params["w2"] + params["b2"]
    logp = logits - tnp.log(tnp.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)) \
        - logits.max(axis=1, keepdims=True)
    return -(logp * y).sum() / x.shape[0]


def _init(din: int = 12, dh: int = 16, dout: int = 4) -> dict:
    return {"w1": randn(din, dh) * 0.3, "b1": np.zeros(dh, np.float32), "w2": randn(dh, dout) * 0.3,
            "b2": np.zeros(dout, np.float32)}


def _data(n: int = 32, din: int = 12, dout: int = 4) -> tuple[np.ndarray, np.ndarray]:
    return randn(n, din), np.eye(dout, dtype=np.float32)[rng.integers(0, dout, n)]


def _train(params: dict, x: tg.Tensor, y: tg.Tensor, steps: int = 5) -> tuple[dict, list[float], tg.jit]:
    @tg.jit
    def step(p: dict, x: tg.Tensor, y: tg.Tensor) -> tuple:
        loss, g = tg.value_and_grad(_mlp_loss)(p, x, y)
        return tg.tree.tree_map(lambda a, b: a - 0.5 * b, p, g), loss
    losses = []
    for _ in range(steps):
        params, loss = step(params, x, y)
        losses.append(float(loss))
    return params, losses, step


def test_data_parallel_training_matches_single_device() -> None:
    p0, (x, y) = _init(), _data()
    ref, ref_losses, _ = _train(tg.tree.tree_map(tg.asarray, p0), tg.asarray(x), tg.asarray(y))
    params = tg.tree.tree_map(lambda a: tg.shard(tg.asarray(a), D4), p0)
    out, losses, step = _train(params, tg.shard(tg.asarray(x), D4, axis=0), tg.shard(tg.asarray(y), D4, axis=0))
    assert step.trace_count == 1
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5)
    for k in p0:
        assert tg.sharding(out[k]) == (D4, None)
        np.testing.assert_allclose(out[k].numpy(), ref[k].numpy(), rtol=1e-5, atol=1e-5)
    assert ref_losses[-1] < ref_losses[0]


def test_tensor_parallel_mlp_matches_single_device() -> None:
    p0, (x, y) = _init(), _data()
    ref, ref_losses, _ = _train(tg.tree.tree_map(tg.asarray, p0), tg.asarray(x), tg.asarray(y))
    # Megatron layout: w1 split by output columns, w2 by input rows; the hidden layer stays split
    params = {"w1": tg.shard(tg.asarray(p0["w1"]), D2, axis=1), "b1": tg.shard(tg.asarray(p0["b1"]), D2, axis=0),
              "w2": tg.shard(tg.asarray(p0["w2"]), D2, axis=0), "b2": tg.shard(tg.asarray(p0["b2"]), D2)}
    out, losses, _ = _train(params, tg.shard(tg.asarray(x), D2), tg.shard(tg.asarray(y), D2))
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5)
    assert tg.sharding(out["w1"]) == (D2, 1) and tg.sharding(out["w2"]) == (D2, 0)
    for k in p0:
        np.testing.assert_allclose(out[k].numpy(), ref[k].numpy(), rtol=1e-5, atol=1e-5)


# ---- jit ----
def test_jit_keys_on_sharding_and_replays_without_compiling() -> None:
    f = tg.jit(lambda x: (x * 2).sum(axis=0))
    a = randn(8, 4)
    x0, x1 = tg.shard(tg.asarray(a), D2, axis=0), tg.shard(tg.asarray(a), D2, axis=1)
    # float32 sums of 8 terms near 1 in another order than numpy's: a column summing near zero (0.014, one run's
    # data) differs by a rounding of the terms (2.5e-7), not of the sum
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f(x0).numpy(), 2 * a.sum(0), **tol)
    np.testing.assert_allclose(f(x1).numpy(), 2 * a.sum(0), **tol)
    assert f.trace_count == 2
    tg.counters.reset()
    for _ in range(3):
        out = f(x0)
    np.testing.assert_allclose(out.numpy(), 2 * a.sum(0), **tol)
    assert f.trace_count == 2 and tg.counters.compile_count == 0
    assert tg.sharding(out) == (D2, None)


def test_jit_retrace_message_names_the_sharding_change(capsys: pytest.CaptureFixture) -> None:
    f = tg.jit(lambda x: x + 1)
    a = randn(4, 4)
    f(tg.shard(tg.asarray(a), D2, axis=0))
    with tg.Context(DEBUG=1):
        f(tg.shard(tg.asarray(a), D2, axis=1))
    assert "sharded axis 0 -> 1" in capsys.readouterr().out


# ---- the pass itself, on a tiny graph ----
def test_pm_multi_maps_an_add_per_device(ring_only: None) -> None:
    from tgfx.dtypes import dtypes
    b = [new_buffer(d, 4, dtypes.float32) for d in D2]
    c = [new_buffer(d, 4, dtypes.float32) for d in D2]
    x, y = UOp(Ops.MULTI, dtypes.float32, tuple(b), 0), UOp(Ops.MULTI, dtypes.float32, tuple(c), 0)
    got = graph_rewrite(UOp(Ops.ADD, dtypes.float32, (x, y)), pm_multi)
    per_device = tuple(UOp(Ops.ADD, dtypes.float32, (p, q)) for p, q in zip(b, c, strict=True))
    assert got is UOp(Ops.MULTI, dtypes.float32, per_device, 0)
    red = graph_rewrite(UOp(Ops.REDUCE_AXIS, dtypes.float32, (x,), (Ops.ADD, (0,))), pm_multi)
    assert red.op is Ops.MULTI and red.arg is None
    assert {p.op for p in red.src} == {Ops.MSELECT} and red.src[0].src[0].op is Ops.ALLREDUCE
    ring = graph_rewrite(UOp(Ops.SINK, None, red.src), pm_allreduce, ctx=RingCtx())
    assert ring.src == tuple(ring_all_reduce(list(red.src[0].src[0].src), Ops.ADD))


# ---- bad input ----
def test_errors_name_shape_axis_and_devices() -> None:
    x = tg.asarray(randn(6, 4))
    with pytest.raises(ValueError, match=r"axis 0 of a Tensor of shape \(6, 4\) has size 6, which does not divide "
                                         r"evenly across the 4 devices"):
        tg.shard(x, D4, axis=0)
    with pytest.raises(ValueError, match="unknown device 'GPU:0'"):
        tg.shard(x, ("CPU:0", "GPU:0"))
    with pytest.raises(ValueError, match="more than once"):
        tg.shard(x, ("CPU:0", "CPU"))
    with pytest.raises(ValueError, match=r"committed to different devices: float32\[6, 4\] sharded along axis 1 on "
                                         r"\('CPU:0', 'CPU:1'\) and float32\[6, 4\] sharded along axis 1 on "
                                         r"\('CPU:2', 'CPU:3'\); put one where the other is with tg.device_put"):
        _ = tg.shard(x, D2, axis=1) + tg.shard(x, ("CPU:2", "CPU:3"), axis=1)
    # (x, made without a device, is uncommitted: it goes where the sharded operand is, test_uncommitted.py; one put
    # on a device is committed there)
    with pytest.raises(ValueError, match=r"committed to different devices: .* and float32\[6, 4\] on CPU:0"):
        _ = tg.shard(x, D2, axis=1) + tg.device_put(x, "CPU:0")
    with pytest.raises(ShardingError, match="not sharded"):
        tg.parts(x)


def test_reshard_on_the_same_devices_is_differentiable() -> None:
    """`shard` of a traced value to another layout on its device tuple (a sharding constraint) is a COPY the
    lowering reshards in place, and a gradient flows through it as through any COPY (the MULTI of MSELECTs it was
    had no gradient rule: `grad` raised)."""
    a = randn(4, 6)
    f = lambda w: (tg.shard(tg.shard(w, D2, 0) * 2, D2, 1) ** 2).sum()  # noqa: E731
    for g in (tg.grad(f), tg.jit(tg.grad(f))):
        np.testing.assert_allclose(g(a).numpy(), 8 * a, rtol=1e-6)
    y = tg.shard(tg.shard(tg.asarray(a), D2, 0) + 1, D2, 1)
    assert tg.sharding(y.realize()) == (D2, 1)
    np.testing.assert_array_equal(y.numpy(), a + 1)


def test_visualize_sharding() -> None:
    x = tg.shard(tg.asarray(randn(4, 6)), D2, axis=0)
    text = tg.visualize_sharding(x)
    assert "sharded along axis 0 over 2 devices" in text and "CPU:0  rows 0:2" in text and "CPU:1  rows 2:4" in text
    assert "replicated on 4 devices" in tg.visualize_sharding(tg.shard(tg.asarray(randn(3)), D4))
    assert "cols 3:6" in tg.visualize_sharding(tg.shard(tg.asarray(randn(4, 6)), D2, axis=1))


# ---- hypothesis: layouts x ops ----
@settings(max_examples=25)
@given(st.sampled_from([D2, D4]), st.integers(0, 2), st.sampled_from([0, 1, 2, None]),
       st.sampled_from(["sum", "max"]), st.integers(0, 2))
def test_sharded_matches_unsharded(devs: tuple, shard_axis: int, red_axis: int | None, red: str, seed: int) -> None:
    r = np.random.default_rng(seed)
    shape = [2, 3, 5]
    shape[shard_axis] = 4
    a = r.standard_normal(shape).astype(np.float32)
    b = r.standard_normal(shape).astype(np.float32)
    x = tg.shard(tg.asarray(a), devs, axis=shard_axis)
    y = tg.shard(tg.asarray(b), devs)
    got = getattr(tnp, red)(tnp.exp(x) * y - x, axis=red_axis)
    np.testing.assert_allclose(got.numpy(), getattr(np, red)(np.exp(a) * b - a, axis=red_axis), rtol=1e-5, atol=1e-5)


def test_independent_allreduces_share_one_ring(ring_only: None) -> None:
    from tgfx.lowering.multi import bucket_allreduces
    xs = [tg.shard(tg.asarray(randn(4, k)), D2, axis=0).realize() for k in (3, 5)]
    sums = [graph_rewrite(x.sum(axis=0).uop, pm_multi) for x in xs]          # two independent all-reduces
    dependent = graph_rewrite((xs[0] * tg.Tensor(sums[0]).sum()).sum(axis=0).uop, pm_multi)  # one feeds another

    def rings(u: UOp) -> int:
        return sum(1 for v in u.toposort() if v.op is Ops.ALLREDUCE)
    both = bucket_allreduces(UOp(Ops.SINK, None, (*sums[0].src, *sums[1].src)))
    assert rings(UOp(Ops.SINK, None, (*sums[0].src, *sums[1].src))) == 2 and rings(both) == 1
    assert rings(bucket_allreduces(UOp(Ops.SINK, None, dependent.src))) == 2
    # and the values are the separate sums (summed in another order than numpy's: a sum of four N(0, 1) values that
    # cancels to near 0 is off by a few float32 ulps of the values, not of the sum)
    a, b = tg.Tensor(sums[0]), tg.Tensor(sums[1])
    np.testing.assert_allclose(a.numpy(), xs[0].numpy().sum(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), xs[1].numpy().sum(0), rtol=1e-5, atol=1e-6)
    tg.counters.reset()
    tg.realize(tg.Tensor(xs[0].sum(axis=0).uop), tg.Tensor(xs[1].sum(axis=0).uop))
    assert tg.counters.copy_count == 2 * 2 + 2 * 2 + 2 * 2  # per device: 2 pieces in, 1 + 1 ring copies, 2 chunks out


# ---- JAX's device listing and placement: devices, device_put on pytrees, device_put_replicated / _sharded ----
def test_devices_are_configured_not_discovered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    # (the CPU backend's listing, named: `tg.devices()` lists the default device's backend, which may be CUDA's)
    assert tg.devices() == tg.devices(canonical_device(DEFAULT_DEVICE).split(":")[0].lower())
    with tg.Context(TGFX_CPU_DEVICES=0):
        # one device by default, as JAX's CPU backend
        assert tg.devices("cpu") == tg.local_devices(backend="cpu") == ["CPU:0"]
        assert tg.device_count("cpu") == tg.local_device_count("cpu") == 1
        tg.shard(tnp.ones(4), D4, axis=0).realize()   # opening more devices does not change the list
        assert tg.devices("cpu") == ["CPU:0"]
        monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_foo=1 --xla_force_host_platform_device_count=3")
        assert tg.devices("cpu") == ["CPU:0", "CPU:1", "CPU:2"]   # what a ported JAX program asks for
    with tg.Context(TGFX_CPU_DEVICES=4):
        assert tg.devices("cpu") == list(D4) and tg.device_count("cpu") == 4   # the tgfx flag wins over XLA_FLAGS
        assert tg.local_devices(0, backend="cpu") == list(D4)
    assert tg.devices("gpu") == tg.devices("cuda")   # JAX's name for the CUDA backend (empty without a driver)
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        tg.devices("tpu")
    with pytest.raises(ValueError, match="process_index=1"):
        tg.local_devices(1)


def test_device_put_takes_any_pytree() -> None:
    a = randn(2, 3)
    on1 = tg.asarray(a).to("CPU:1")
    tree = {"w": a, "b": [1.5, on1], "n": (np.int32(3), None)}
    out = tg.device_put(tree)   # no device: host data to the default device, Tensors stay where they are
    default = canonical_device(DEFAULT_DEVICE)
    assert isinstance(out["w"], tg.Tensor) and out["w"].device == default
    np.testing.assert_array_equal(out["w"].numpy(), a)
    assert out["b"][0].device == default and out["b"][0].item() == 1.5
    assert out["b"][1] is on1
    assert out["n"][0].dtype == tg.dtypes.int32 and out["n"][1] is None
    moved = tg.device_put(tree, "CPU:2")
    assert {t.device for t in tg.tree.tree_leaves(moved)} == {"CPU:2"}
    np.testing.assert_array_equal(moved["b"][1].numpy(), a)
    split = tg.device_put({"x": a}, D2, axis=0)
    assert tg.sharding(split["x"]) == (D2, 0)
    np.testing.assert_array_equal(split["x"].numpy(), a)
    x = tg.asarray(a)
    assert tg.device_put(x) is x


def test_device_put_errors_name_the_leaf() -> None:
    with pytest.raises(TypeError, match=r"leaf at \['cfg'\]\['name'\] is a str"):
        tg.device_put({"cfg": {"name": "mlp"}, "w": np.ones(2)}, "CPU:1")
    with pytest.raises(ValueError, match="axis=0 needs a device tuple"):
        tg.device_put(np.ones(2), "CPU:1", axis=0)


@pytest.mark.parametrize("devs", [("CPU:1",), D2, D4])
def test_device_put_replicated_stacks_one_copy_per_device(devs: tuple) -> None:
    a, b = randn(3), randn(2, 2)
    out = tg.device_put_replicated({"a": a, "b": tg.asarray(b), "s": 2.0}, devs)
    n = len(devs)
    assert out["a"].shape == (n, 3) and out["b"].shape == (n, 2, 2) and out["s"].shape == (n,)
    np.testing.assert_array_equal(out["a"].numpy(), np.stack([a] * n))
    np.testing.assert_array_equal(out["b"].numpy(), np.stack([b] * n))
    np.testing.assert_array_equal(out["s"].numpy(), np.full(n, 2.0, np.float32))
    if n == 1:
        assert out["a"].device == devs[0]
    else:
        assert tg.sharding(out["a"]) == (devs, 0)
        assert [p.device for p in tg.parts(out["b"])] == list(devs)
        assert all(p.shape == (1, 2, 2) for p in tg.parts(out["b"]))
    # flax's unreplicate: row 0 is the value again
    np.testing.assert_array_equal(tg.tree.tree_map(lambda t: t[0], out)["b"].numpy(), b)


def test_device_put_sharded_stacks_along_a_new_axis() -> None:
    xs = [randn(4, 2) for _ in D4]
    out = tg.device_put_sharded([{"x": x, "i": np.int32(k)} for k, x in enumerate(xs)], D4)
    assert out["x"].shape == (4, 4, 2) and tg.sharding(out["x"]) == (D4, 0)
    np.testing.assert_array_equal(out["x"].numpy(), np.stack(xs))
    np.testing.assert_array_equal(out["i"].numpy(), np.arange(4, dtype=np.int32))
    for k, p in enumerate(tg.parts(out["x"])):
        assert p.device == D4[k]
        np.testing.assert_array_equal(p.numpy(), xs[k][None])
    # ops on it are per device, and a reduce over the new axis is an all-reduce
    np.testing.assert_allclose((out["x"] * 2).sum(axis=0).numpy(), 2 * np.sum(xs, axis=0), rtol=1e-5)
    t = tg.device_put_sharded([tg.asarray(xs[0]).to("CPU:3"), tg.asarray(xs[1])], D2)   # Tensors move as needed
    np.testing.assert_array_equal(t.numpy(), np.stack(xs[:2]))


def test_device_put_sharded_errors() -> None:
    with pytest.raises(ValueError, match=r"len\(shards\) = 1 must equal len\(devices\) = 2"):
        tg.device_put_sharded([np.ones(2)], D2)
    with pytest.raises(ValueError, match=r"shard 1 at \['w'\] is float32\[3\], but shard 0 is float32\[2\]"):
        tg.device_put_sharded([{"w": np.ones(2, np.float32)}, {"w": np.ones(3, np.float32)}], D2)
    with pytest.raises(ValueError, match="shard 1 has structure"):
        tg.device_put_sharded([{"w": 1.0}, {"v": 1.0}], D2)
    with pytest.raises(TypeError, match="shards must be a sequence"):
        tg.device_put_sharded(np.ones((2, 2)), D2)
    with pytest.raises(ValueError, match="device_put_replicated: the device tuple is empty"):
        tg.device_put_replicated(np.ones(2), [])
    with pytest.raises(ValueError, match="device_put_sharded: devices .* name a device more than once"):
        tg.device_put_sharded([np.ones(2), np.ones(2)], ("CPU:1", "CPU:1"))


def test_a_big_copy_between_cpu_devices_is_a_kernel_reading_the_source_where_it_lies():
    """CPU:0 and CPU:1 share one address space: a copy of at least a thread's share a core runs as a kernel on the
    destination that reads the source in place, spread over the cores (64 MB: one memmove 8.2 ms, the kernel 4.2 on
    2 cores), and waits for what writes the source, and the source's next writer waits for it. A small copy stays
    one memmove on the copy engine (no kernel to compile)."""
    from tgfx.devices import get_device
    from tgfx.devices.target import host_target
    if host_target().cores < 2:
        pytest.skip("one core: a copy stays one memmove")
    n = 4 * host_target().min_thread_work()
    x0 = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    d1 = get_device("CPU:1")

    @tg.jit
    def step(x):   # the source is written in the same program, and rewritten by the next call
        y = x * 2.0
        return y + 1.0, y.to("CPU:1"), x[n // 4:].to("CPU:1")
    x = tg.asarray(x0, device="CPU:0")
    want = x0.copy()
    for _ in range(4):
        d1.clear_profile()
        x, moved, tail = step(x)
        np.testing.assert_array_equal(moved.numpy(), want * 2.0)
        np.testing.assert_array_equal(tail.numpy(), want[n // 4:])
        assert moved.device == "CPU:1"
        want = want * 2.0 + 1.0
        assert {e.queue for e in d1.profile_events} == {"compute"}   # kernels, no copy engine
    np.testing.assert_array_equal(x.numpy(), want)
    small = tg.asarray(x0[:100], device="CPU:0")
    d1.clear_profile()
    np.testing.assert_array_equal(tg.device_put(small, "CPU:1").numpy(), x0[:100])
    assert {e.queue for e in d1.profile_events} == {"copy"}
    d1.clear_profile()
    big = tg.asarray(x0, device="CPU:0")
    np.testing.assert_array_equal(tg.device_put(big, "CPU:1").numpy(), x0)   # eager, big: a kernel
    assert {e.queue for e in d1.profile_events} == {"compute"}


def test_each_devices_kernels_run_as_one_segment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A jitted chain of matmuls on a batch split over two devices, each step a result: the walk that schedules the
    per-device graphs alternates between their parts op by op, and each switch of device was a segment of its own (a
    submit and a wait: a tensor-parallel MLP step made 146 for 136 kernels); each device's kernels are one segment."""
    from tgfx.lowering import program
    programs = []
    real = program.Program.run

    def spy(self, mems):   # noqa: ANN001, ANN202
        programs.append(self)
        return real(self, mems)
    monkeypatch.setattr(program.Program, "run", spy)

    def f(x: tg.Tensor, w: tg.Tensor) -> list[tg.Tensor]:
        out = []
        for _ in range(4):
            x = tnp.tanh(x @ w) @ w.T
            out.append(x)
        return out
    a, w = randn(8, 16), randn(16, 16) * 0.3
    x, ws = tg.shard(tg.asarray(a), D2, axis=0).realize(), tg.shard(tg.asarray(w), D2).realize()
    programs.clear()
    out = tg.jit(f)(x, ws)
    for o, ref in zip(out, f(tg.asarray(a), tg.asarray(w)), strict=True):
        np.testing.assert_allclose(o.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    (prog,) = programs
    assert prog.n_kernels >= 8 and len(prog.segments) == 2, (prog.n_kernels, len(prog.segments))


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_shard_of_host_data_writes_each_piece_where_it_goes(axis: int | None) -> None:
    """A batch from numpy, sharded every step of a data-parallel loop: each device's piece is written into its own
    memory, as `Tensor(data, device=d)` is, with no buffer on the first device, no copy and no program."""
    a = randn(4, 6)
    tg.counters.reset()
    x = tg.shard(a, D2, axis=axis)
    parts = tg.parts(x)
    assert tg.counters.copy_count == 0 and tg.counters.kernel_count == 0 and tg.counters.schedule_count == 0
    assert [p.device for p in parts] == list(D2)
    assert tg.sharding(x) == (D2, axis)
    np.testing.assert_array_equal(x.numpy(), a)
    for i, p in enumerate(parts):
        np.testing.assert_array_equal(p.numpy(), a if axis is None else np.split(a, 2, axis)[i])


def test_a_data_parallel_step_is_few_segments_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """A jitted data-parallel SGD step (batch split over two devices, four parameters replicated): each parameter's
    gradient is all-reduced by kernels that read the other device's partial sums where they lie. Each such reader
    was a segment of its own behind a segment that only waited, and the fences after them one each (45 segments for
    three layers); a device's readers go on in one queue behind one wait, and the fences on one reader are one: its
    kernels, its readers, the fence on the other's readers."""
    from tgfx.lowering import program
    programs = []
    real = program.Program.run

    def spy(self, mems):   # noqa: ANN001, ANN202
        programs.append(self)
        return real(self, mems)
    p0, (x, y) = _init(), _data()
    ref, ref_losses, _ = _train(tg.tree.tree_map(tg.asarray, p0), tg.asarray(x), tg.asarray(y), steps=2)
    params = tg.tree.tree_map(lambda a: tg.shard(a, D2), p0)
    xs, ys = tg.shard(x, D2, axis=0), tg.shard(y, D2, axis=0)
    monkeypatch.setattr(program.Program, "run", spy)
    out, losses, _ = _train(params, xs, ys, steps=2)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5)
    for k in p0:
        np.testing.assert_allclose(out[k].numpy(), ref[k].numpy(), rtol=1e-5, atol=1e-5)
    prog = max(programs, key=lambda p: p.n_kernels)
    assert len(prog.segments) <= 6, [(str(s.device), s.dep is not None) for s in prog.segments]


def test_host_data_passed_to_a_sharded_jitted_step_is_replicated_where_the_tensors_are() -> None:
    """A data-parallel step given its learning rate as a Python float or a numpy scalar, and a numpy mask, beside
    sharded Tensors: host data goes to the device tuple the Tensors lie on, replicated (JAX's uncommitted
    arguments); it was put on the default device, and the trace failed with "operands are on different devices".
    One trace for every value, no compile after the first call."""
    a, mask = randn(4, 6), rng.random(6).astype(np.float32)
    x = tg.shard(a, D2, axis=0)
    f = tg.jit(lambda x, lr, m: (x * lr * m).sum(axis=1))
    for lr in (0.5, 0.25, np.float32(0.125)):
        out = f(x, lr, mask)
        np.testing.assert_allclose(out.numpy(), (a * np.float32(lr) * mask).sum(1), rtol=1e-6)
        assert tg.sharding(out) == (D2, 0)
    assert f.trace_count == 2   # (a Python float is weakly typed, a numpy float32 not: two signatures, as in JAX)
    tg.counters.reset()
    f(x, 0.75, mask)
    assert tg.counters.compile_count == 0 and tg.counters.copy_count == 0 and f.trace_count == 2
    with pytest.raises(ValueError, match="committed to different devices"):   # a Tensor put on one device stays
        f(x, tg.device_put(np.float32(0.5), "CPU:0"), mask)


def test_a_sharded_replay_lists_what_it_holds_once_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a submission holds until it completes (its program's buffers, `_queue_refs`) is listed once per device
    a replay submits to, not once per segment: a list over every buffer of the program per segment was a tenth of
    a tensor-parallel step (tp_mlp quick: 18 segments over ~300 buffers, 1.45 -> 1.28 ms)."""
    from tgfx.lowering import program
    p0, (x, y) = _init(), _data()
    params = tg.tree.tree_map(lambda a: tg.shard(a, D2), p0)
    xs, ys = tg.shard(x, D2, axis=0), tg.shard(y, D2, axis=0)
    _, _, step = _train(params, xs, ys, steps=2)
    calls = []
    real = program._queue_refs
    monkeypatch.setattr(program, "_queue_refs", lambda mems, device: calls.append(device) or real(mems, device))
    programs = []
    run = program.Program.run
    monkeypatch.setattr(program.Program, "run", lambda self, mems: programs.append(self) or run(self, mems))
    step(params, xs, ys)
    (prog,) = programs
    assert len(prog.segments) > 2 and sorted(map(str, calls)) == sorted(map(str, {s.device for s in prog.segments}))


def test_a_tensor_parallel_step_waits_once_for_what_it_reads_and_fences(monkeypatch: pytest.MonkeyPatch) -> None:
    """A jitted Megatron-style MLP step (w1 split by columns, w2 by rows): the all-reduce's readers on one device
    wait for the other device's writes, and the device's later writes over memory the other reads wait for those
    reads. A wait for a segment the device's queue waits for already (its head wait, or an earlier segment's) was a
    segment of its own, and a fence and a reader's wait for the same segment two: 18 segments a tp_mlp step, now
    11; here the wait a queue starts with covers both."""
    from tgfx.lowering import program
    programs = []
    real = program.Program.run
    p0, (x, y) = _init(), _data()
    ref, ref_losses, _ = _train(tg.tree.tree_map(tg.asarray, p0), tg.asarray(x), tg.asarray(y), steps=2)
    params = {"w1": tg.shard(p0["w1"], D2, axis=1), "b1": tg.shard(p0["b1"], D2, axis=0),
              "w2": tg.shard(p0["w2"], D2, axis=0), "b2": tg.shard(p0["b2"], D2)}
    monkeypatch.setattr(program.Program, "run", lambda self, mems: programs.append(self) or real(self, mems))
    out, losses, _ = _train(params, tg.shard(x, D2), tg.shard(y, D2), steps=2)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5)
    for k in p0:
        np.testing.assert_allclose(out[k].numpy(), ref[k].numpy(), rtol=1e-5, atol=1e-5)
    prog = max(programs, key=lambda p: p.n_kernels)
    deps = [(str(s.device), s.dep and (str(s.dep[0]), s.dep[2])) for s in prog.segments]
    assert len(set(deps)) == len(deps), deps   # no two segments of a device wait for the same thing
    assert sum(s.dep is not None and not s.patches and len(s.cb.words) <= 11 for s in prog.segments) <= 1, deps


def _kernels(f, *args) -> dict[str, set[str]]:
    """The names (shape and AST hash) of the kernels a jitted call runs, by device."""
    from tgfx.devices import get_device
    devices = [get_device("CPU:0"), get_device("CPU:1")]
    tg.block_until_ready(f(*args))
    for d in devices:
        d.clear_profile()
    tg.block_until_ready(f(*args))
    return {d.name: {e.name for e in d.profile_events if e.queue == "compute"} for d in devices}


def test_a_column_split_layers_weight_gradient_is_each_devices_own_contraction() -> None:
    """Tensor parallelism: a weight split by columns, its input replicated. Each device's piece of the broadcast input
    is the broadcast of the input (not a SHRINK of the EXPAND: the weight gradient's sum over batch and sequence was
    then no contraction, its two reduce axes not merged, and ran 2-4x slower per FLOP in a Megatron MLP step), so
    each device runs the kernels (the same ASTs) the one-device program runs on its half of the weight."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 16)).astype(np.float32)
    w = (rng.standard_normal((16, 64)) * 0.1).astype(np.float32)

    def loss(w: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
        return tnp.tanh(x @ w).sum()
    step = tg.jit(tg.grad(loss))
    devs = ("CPU:0", "CPU:1")
    sharded = _kernels(step, tg.shard(tg.asarray(w), devs, axis=1), tg.shard(tg.asarray(x), devs))
    one = _kernels(step, tg.asarray(w[:, :32], device="CPU"), tg.asarray(x, device="CPU"))   # on CPU:0, as the
    # shards are (not the default device: CUDA:0 under -p tests.emulated_cuda)
    assert sharded["CPU:0"] == sharded["CPU:1"] == one["CPU:0"], (sharded, one)
    got = step(tg.shard(tg.asarray(w), devs, axis=1), tg.shard(tg.asarray(x), devs)).numpy()
    want = np.einsum("btk,btn->kn", x, 1 - np.tanh(x @ w) ** 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_jitted_calls_lazy_sharded_arguments_are_computed_in_one_schedule():
    """The sharded arguments of a jitted call that are still lazy (zero momenta `p * 0` of replicated parameters, as the
    data-parallel MLP makes them) are computed together before its trace: one schedule for them all, their kernels
    compiled side by side, not a program each (their layouts are part of the call's signature)."""
    rng = np.random.default_rng(0)
    ps = [tg.shard(tg.asarray(rng.standard_normal(s).astype(np.float32)), D2).realize() for s in ((8, 4), (4,), (4, 2))]
    momenta = [p * 0.5 for p in ps]
    step = tg.jit(lambda ps, ms: [p - 0.1 * m for p, m in zip(ps, ms, strict=True)])
    tg.counters.reset()
    out = step(ps, momenta)
    assert tg.counters.schedule_count == 2   # the momenta's, and the step's
    for o, p in zip(out, ps, strict=True):
        assert tg.sharding(o) == (D2, None)
        np.testing.assert_allclose(o.numpy(), p.numpy() * np.float32(0.95), rtol=1e-6)
