"""JAX's sharding spelling (`tg.sharding`: Mesh, P, NamedSharding; `tg.shard_map`; jit's in/out_shardings) maps onto
tgfx's device tuples: the same layouts, numbers, programs and errors as `tg.shard`, and as numpy."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.devices import DEFAULT_DEVICE
from tgfx.sharding import Mesh, NamedSharding, SingleDeviceSharding
from tgfx.sharding import PartitionSpec as P

D2 = ("CPU:0", "CPU:1")
D4 = ("CPU:0", "CPU:1", "CPU:2", "CPU:3")


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture
def mesh() -> Mesh:
    with tg.Context(TGFX_CPU_DEVICES=2):
        return Mesh(np.array(tg.devices("cpu")), ("data",))   # as JAX programs write it (jax.devices("cpu"))


# ---- Mesh, PartitionSpec, NamedSharding ----
def test_mesh_of_listed_devices_and_make_mesh() -> None:
    with tg.Context(TGFX_CPU_DEVICES=4):
        m = tg.make_mesh((2, 2), ("data", "model"), devices=tg.devices("cpu"))   # (the default device's: CUDA's
        assert Mesh(np.array(tg.devices("cpu")), ("data",)).shape == {"data": 4}   # under -p tests.emulated_cuda)
    assert m.devices.tolist() == [["CPU:0", "CPU:1"], ["CPU:2", "CPU:3"]]
    assert (m.shape, m.size, m.axis_names) == ({"data": 2, "model": 2}, 4, ("data", "model"))
    assert repr(m) == "Mesh('data': 2, 'model': 2)" and m == Mesh(np.array(D4).reshape(2, 2), ("data", "model"))
    with tg.Context(TGFX_CPU_DEVICES=1), pytest.raises(ValueError, match=r"needs 2 devices.*TGFX_CPU_DEVICES=2"):
        tg.make_mesh((2,), ("data",))
    with pytest.raises(ValueError, match="axis name"):
        Mesh(np.array(D4).reshape(2, 2), ("data",))
    with pytest.raises(ValueError, match="more than once"):
        Mesh(np.array(["CPU:0", "CPU"]), ("data",))


def test_partition_spec_and_named_sharding(mesh: Mesh) -> None:
    assert repr(P("data", None)) == "P('data', None)" and P() == () and P(("a", "b")).names(0) == ("a", "b")
    s = NamedSharding(mesh, P("data", None))
    assert repr(s) == "NamedSharding(mesh=Mesh('data': 2), spec=P('data', None))"
    assert s == NamedSharding(mesh, P("data", None)) and s != NamedSharding(mesh, P())
    assert s.shard_shape((8, 6)) == (4, 6) and s.num_devices == 2 and not s.is_fully_replicated
    assert s.is_equivalent_to(NamedSharding(mesh, P("data")), 2)
    assert NamedSharding(mesh, P()).is_fully_replicated
    with pytest.raises(ValueError, match=r"mesh axis 'model' of P\('model'\) is not found in the mesh"):
        NamedSharding(mesh, P("model"))
    with pytest.raises(ValueError, match="more than once"):
        NamedSharding(mesh, P("data", "data"))
    with pytest.raises(TypeError, match="entry"):
        P(0)


# ---- device_put and .sharding ----
@pytest.mark.parametrize(("spec", "axis"), [(P("data"), 0), (P("data", None), 0), (P(None, "data"), 1), (P(), None),
                                            (P(None, None), None)])
def test_device_put_named_sharding_is_tg_shard(mesh: Mesh, spec: P, axis: int | None) -> None:
    a = randn(4, 6)
    x = tg.device_put(a, NamedSharding(mesh, spec))
    assert tg.sharding(x) == tg.sharding(tg.shard(a, D2, axis)) == (D2, axis) and x.committed
    np.testing.assert_array_equal(x.numpy(), a)
    assert x.sharding == NamedSharding(mesh, spec)   # what it was placed with
    assert x.devices() == set(D2)
    shards = x.addressable_shards
    assert [s.device for s in shards] == list(D2)
    for s in shards:
        np.testing.assert_array_equal(s.data.numpy(), a[s.index])


def test_sharding_of_one_device_and_of_tg_shard() -> None:
    assert tnp.ones(3).sharding == SingleDeviceSharding(DEFAULT_DEVICE)   # CPU:0, unless TGFX_DEVICE names another
    y = tg.device_put(np.ones(3, np.float32), SingleDeviceSharding("CPU:1"))
    assert y.device == "CPU:1" and y.committed and y.sharding == SingleDeviceSharding("CPU:1")
    s = tg.shard(randn(4, 6, 8), D4, axis=2).sharding   # no mesh given: one over its devices
    assert s.spec == P(None, None, "devices") and s.mesh.devices.tolist() == list(D4)


def test_device_put_a_pytree_of_shardings(mesh: Mesh) -> None:
    batch, rep = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    out = tg.device_put({"x": randn(4, 2), "y": randn(4), "w": [randn(2, 2), 1.0]}, {"x": batch, "y": batch, "w": rep})
    assert tg.sharding(out["x"]) == (D2, 0) and tg.sharding(out["y"]) == (D2, 0)
    assert tg.sharding(out["w"][0]) == (D2, None) and tg.sharding(out["w"][1]) == (D2, None)
    with pytest.raises(ValueError, match="axis=0 goes with a device tuple"):
        tg.device_put(randn(4), batch, axis=0)


def test_errors_name_the_shape_axis_and_mesh(mesh: Mesh) -> None:
    with pytest.raises(ValueError, match=r"P\('data', None\).*splits array axis 0 2 ways, but it has size 3.*"
                                         r"\(3, 4\).*Mesh\('data': 2\)"):
        tg.device_put(np.ones((3, 4)), NamedSharding(mesh, P("data", None)))
    with pytest.raises(ValueError, match=r"rank at least 2.*rank 1"):
        tg.device_put(np.ones(4), NamedSharding(mesh, P(None, "data")))
    with pytest.raises(TypeError, match="expected a sharding"):
        tg.lax.with_sharding_constraint(tnp.ones(4), "CPU:0")


def test_two_d_mesh_maps_where_device_tuples_can_hold_it() -> None:
    m = Mesh(np.array(D4).reshape(2, 2), ("data", "model"))
    a = randn(8, 4)
    for spec, layout in [(P(("data", "model")), (D4, 0)), (P(None, ("model", "data")), (D4[::2] + D4[1::2], 1)),
                         (P(), (D4, None))]:
        x = tg.device_put(a, NamedSharding(m, spec))
        assert tg.sharding(x) == layout
        np.testing.assert_array_equal(x.numpy(), a)
    one = Mesh(np.array(D2).reshape(2, 1), ("data", "model"))   # a mesh axis of size 1 splits nothing
    assert tg.sharding(tg.device_put(a, NamedSharding(one, P("data", "model")))) == (D2, 0)
    # a block per device over the grid (tgfx/ir/blocks.py): (ways, stride) per array axis, device i's block along
    # an axis (i // stride) % ways; rows replicated over "model", columns over "data", or both split
    for spec, blocks, index in [(P("data"), ((2, 2), (1, 1)), [(0, 0), (0, 0), (1, 0), (1, 0)]),
                                (P(None, "model"), ((1, 1), (2, 1)), [(0, 0), (0, 1), (0, 0), (0, 1)]),
                                (P("data", "model"), ((2, 2), (2, 1)), [(0, 0), (0, 1), (1, 0), (1, 1)]),
                                (P("model", "data"), ((2, 1), (2, 2)), [(0, 0), (1, 0), (0, 1), (1, 1)])]:
        x = tg.device_put(a, NamedSharding(m, spec))
        assert tg.sharding(x) == (D4, blocks)
        assert x.sharding == NamedSharding(m, spec)
        np.testing.assert_array_equal(x.numpy(), a)
        for (r, c), p, shard in zip(index, tg.parts(x), x.addressable_shards, strict=True):
            rows, cols = 8 // blocks[0][0], 4 // blocks[1][0]
            np.testing.assert_array_equal(p.numpy(), a[r * rows:(r + 1) * rows, c * cols:(c + 1) * cols])
            np.testing.assert_array_equal(np.asarray(shard.data), p.numpy())
        assert NamedSharding(m, spec).shard_shape(a.shape) == tg.parts(x)[0].shape
    three = Mesh(np.array(D4).reshape(2, 1, 2), ("a", "b", "c"))
    assert tg.sharding(tg.device_put(a, NamedSharding(three, P(("a", "c"))))) == (D4, 0)   # b has size 1
    with tg.Context(TGFX_CPU_DEVICES=8):
        cube = Mesh(np.array([f"CPU:{i}" for i in range(8)]).reshape(2, 2, 2), ("a", "b", "c"))
        with pytest.raises(NotImplementedError, match=r"P\(\('a', 'c'\), 'b'\)\) splits array axis 0 over mesh axes "
                                                      r"\('a', 'c'\), which are not neighbours"):
            tg.device_put(np.ones((4, 4)), NamedSharding(cube, P(("a", "c"), "b")))


# ---- jit and with_sharding_constraint ----
def test_jit_in_and_out_shardings(mesh: Mesh) -> None:
    a = randn(4, 6)
    f = tg.jit(lambda x, w: x @ w, in_shardings=(NamedSharding(mesh, P("data")), NamedSharding(mesh, P())),
               out_shardings=NamedSharding(mesh, P()))
    w = randn(6, 2)
    out = f(a, w)   # host data placed as in_shardings say
    assert tg.sharding(out) == (D2, None) and out.sharding == NamedSharding(mesh, P())
    np.testing.assert_allclose(out.numpy(), a @ w, rtol=1e-5)
    assert f.trace_count == 1 and tg.sharding(f(tg.shard(a, D2, 0), tg.shard(w, D2)).realize()) == (D2, None)
    assert f.trace_count == 1   # the same layouts: the same program
    with pytest.raises(ValueError, match=r"args\[0\].*committed to float32\[4, 6\] sharded along axis 1"):
        f(tg.shard(a, D2, 1), w)
    with pytest.raises(ValueError, match="in_shardings has 2 entries, but the call has 1"):
        f(a)
    g = tg.jit(lambda x: x + 1, in_shardings=NamedSharding(mesh, P(None, "data")))
    assert tg.sharding(g(tnp.asarray(a)).realize()) == (D2, 1)   # an uncommitted Tensor is placed


def test_with_sharding_constraint_inside_jit_moves_the_value(mesh: Mesh) -> None:
    a = randn(4, 6)

    @tg.jit
    def f(x: tg.Tensor) -> tg.Tensor:
        return tg.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P(None, "data")))
    out = f(tg.device_put(a, NamedSharding(mesh, P("data"))))
    assert tg.sharding(out) == (D2, 1)
    np.testing.assert_array_equal(out.numpy(), a * 2)
    with mesh:   # a bare spec: the mesh of `with mesh:`
        assert tg.sharding(tg.lax.with_sharding_constraint(tnp.asarray(a), P("data"))) == (D2, 0)
    with pytest.raises(ValueError, match=r"a bare P\('data'\) needs a mesh"):
        tg.lax.with_sharding_constraint(tnp.asarray(a), P("data"))


# ---- data-parallel training in JAX's spelling ----
def _mlp_data(steps: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(1)
    w1, w2 = rng.standard_normal((8, 16)) / 3, rng.standard_normal((16, 1)) / 4
    xs, ys = rng.standard_normal((steps, 16, 8)), rng.standard_normal((steps, 16, 1))
    return tuple(a.astype(np.float32) for a in (w1, w2, xs, ys))


def _mlp_losses(place: str, steps: int = 4) -> list[float]:
    """A tanh MLP's squared-error losses under SGD, the batch split over two devices and the parameters replicated,
    placed by `tg.shard` ("tuple"), by NamedSharding + device_put ("named") or by jit's in_shardings ("jit")."""
    w1, w2, xs, ys = _mlp_data(steps)

    def loss(p: dict, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        return ((tnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2).mean()

    def sgd(p: dict, x: tg.Tensor, y: tg.Tensor) -> tuple:
        value, g = tg.value_and_grad(loss)(p, x, y)
        return tg.tree.map(lambda a, b: a - 0.1 * b, p, g), value
    params = {"w1": w1, "w2": w2}
    if place == "tuple":
        step = tg.jit(sgd)
        params = tg.device_put(params, D2)
        batches = [(tg.shard(x, D2, 0), tg.shard(y, D2, 0)) for x, y in zip(xs, ys, strict=True)]
    else:
        with tg.Context(TGFX_CPU_DEVICES=2):
            mesh = Mesh(np.array(tg.devices("cpu")), ("data",))
        rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
        if place == "named":
            step = tg.jit(sgd)
            params = tg.device_put(params, rep)
            batches = [tg.device_put((x, y), data) for x, y in zip(xs, ys, strict=True)]
        else:
            step = tg.jit(sgd, in_shardings=(rep, data, data), out_shardings=(rep, rep))
            batches = list(zip(xs, ys, strict=True))
    out = []
    for x, y in batches:
        params, value = step(params, x, y)
        assert tg.sharding(params["w1"]) == (D2, None)
        out.append(float(value))
    assert step.trace_count == 1
    return out


def _mlp_losses_numpy(steps: int = 4) -> list[float]:
    w1, w2, xs, ys = _mlp_data(steps)
    w1, w2, out = w1.astype(np.float64), w2.astype(np.float64), []
    for x, y in zip(xs, ys, strict=True):
        h = np.tanh(x @ w1)
        r = h @ w2 - y
        out.append(float((r ** 2).mean()))
        dr = 2 * r / r.size
        g2, dh = h.T @ dr, dr @ w2.T
        g1 = x.T @ (dh * (1 - h ** 2))
        w1, w2 = w1 - 0.1 * g1, w2 - 0.1 * g2
    return out


def test_data_parallel_training_in_jax_spelling_matches_device_tuples_and_numpy() -> None:
    tuple_losses = _mlp_losses("tuple")
    tg.counters.reset()
    named = _mlp_losses("named")
    kernels_named = tg.counters.kernel_count
    tg.counters.reset()
    assert named == tuple_losses   # the same program: the same numbers, bit for bit
    assert _mlp_losses("jit") == tuple_losses
    np.testing.assert_allclose(tuple_losses, _mlp_losses_numpy(), rtol=2e-5)
    tg.counters.reset()
    _mlp_losses("tuple")
    assert kernels_named == tg.counters.kernel_count


# ---- shard_map ----
def test_shard_map_psum_matches_numpy(mesh: Mesh) -> None:
    a = randn(8, 3)
    total = tg.shard_map(lambda b: tg.lax.psum(b.sum(0), "data"), mesh=mesh, in_specs=P("data"), out_specs=P())(a)
    assert tg.sharding(total.realize()) == (D2, None)
    np.testing.assert_allclose(total.numpy(), a.sum(0), rtol=1e-5)

    def centre(b: tg.Tensor) -> tg.Tensor:   # b: this device's 4 rows
        return b - tg.lax.pmean(b.mean(0), "data") + tg.lax.axis_index("data")
    out = tg.experimental.shard_map.shard_map(centre, mesh, P("data"), P("data"))(a)
    assert tg.sharding(out.realize()) == (D2, 0)
    np.testing.assert_allclose(out.numpy(), a - a.mean(0) + np.repeat([0, 1], 4)[:, None], rtol=1e-5, atol=1e-6)
    gather = lambda b: tg.lax.all_gather(b, "data", axis=1, tiled=True)  # noqa: E731
    gathered = tg.shard_map(gather, mesh=mesh, in_specs=P(None, "data"), out_specs=P())(randn(2, 4))
    np.testing.assert_array_equal(gathered.numpy(), randn(2, 4))


def test_shard_map_under_jit_and_grad(mesh: Mesh) -> None:
    x, w = randn(8, 4), randn(4, 2, seed=1)

    @functools.partial(tg.shard_map, mesh=mesh, in_specs=(P("data"), P()), out_specs=P())
    def loss(xb: tg.Tensor, wb: tg.Tensor) -> tg.Tensor:
        assert xb.shape == (4, 4) and wb.shape == (4, 2)   # each device's block
        return tg.lax.pmean(((xb @ wb) ** 2).mean(), "data")
    value, g = tg.jit(tg.value_and_grad(loss, argnums=1))(x, w)
    np.testing.assert_allclose(float(value), ((x @ w) ** 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(g.numpy(), 2 * x.T @ (x @ w) / (x @ w).size, rtol=1e-4)


def test_shard_map_column_blocks_and_spec_errors(mesh: Mesh) -> None:
    a, b = randn(3, 4), randn(4, 6, seed=1)
    # a tensor-parallel matmul: columns of b on each device, the result's columns stitched back
    out = tg.shard_map(lambda x, y: x @ y, mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P(None, "data"))(a, b)
    assert tg.sharding(out.realize()) == (D2, 1)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5)
    with pytest.raises(ValueError, match=r"args\[0\].*splits array axis 0 2 ways, but it has size 3"):
        tg.shard_map(lambda x: x, mesh=mesh, in_specs=P("data"), out_specs=P("data"))(a)
    with pytest.raises(ValueError, match="no mesh"):
        tg.shard_map(lambda x: x, in_specs=P(), out_specs=P())(a)
    m = Mesh(np.array(D4).reshape(2, 2), ("data", "model"))
    c = randn(4, 4)
    out = tg.shard_map(lambda x: x * 2, mesh=m, in_specs=P("data"), out_specs=P("data"))(c)   # replicas over "model"
    assert tg.sharding(out.realize()) == (D4, ((2, 2), (1, 1)))
    np.testing.assert_array_equal(out.numpy(), c * 2)


def test_shard_map_over_both_axes_of_a_two_d_mesh() -> None:
    m = Mesh(np.array(D4).reshape(2, 2), ("data", "model"))
    a = randn(8, 3)

    def f(b: tg.Tensor) -> tg.Tensor:   # b: 2 rows; the sum over both mesh axes, and this block's position
        return b * 0 + tg.lax.psum(b.sum(), ("data", "model")) + 10 * tg.lax.axis_index("data") + \
            tg.lax.axis_index("model")
    out = tg.shard_map(f, mesh=m, in_specs=P(("data", "model")), out_specs=P(("data", "model")))(a)
    assert tg.sharding(out.realize()) == (D4, 0)
    np.testing.assert_allclose(out.numpy(), a.sum() + np.repeat([0, 1, 10, 11], 2)[:, None] + 0 * a, rtol=1e-5)


def test_shard_map_checks_that_an_unnamed_mesh_axis_is_replicated(mesh: Mesh) -> None:
    """out_specs P() says every device holds the same result: one that differs between the blocks (no psum) is an
    error, as JAX's replication check (it was block 0 of the rows, silently); check_vma=False returns block 0."""
    a = randn(8, 3)
    with pytest.raises(ValueError, match=r"shard_map\(<lambda>\): out_specs P\(\) leave out a mesh axis over which a "
                                         r"result differs"):
        tg.shard_map(lambda b: b.sum(0), mesh=mesh, in_specs=P("data"), out_specs=P())(a)
    first = tg.shard_map(lambda b: b.sum(0), mesh=mesh, in_specs=P("data"), out_specs=P(), check_vma=False)(a)
    np.testing.assert_allclose(first.numpy(), a[:4].sum(0), rtol=1e-5)
    both = tg.shard_map(lambda b: (b * 2, tg.lax.psum(b.sum(), "data")), mesh=mesh, in_specs=P("data"),
                        out_specs=(P("data"), P()))(a)
    np.testing.assert_allclose(both[0].numpy(), 2 * a, rtol=1e-6)
    np.testing.assert_allclose(float(both[1]), a.sum(), rtol=1e-5)
