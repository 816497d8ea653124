"""lax.ppermute, pshuffle, psum_scatter, all_to_all and axis_size over a vmap axis (against numpy spellings of JAX's
semantics), nested vmaps, grad, and under shard_map over two CPU devices."""
from __future__ import annotations

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.sharding import Mesh
from tgfx.sharding import PartitionSpec as P


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def per_example(f: object, x: np.ndarray) -> np.ndarray:
    return np.asarray(tg.vmap(f, axis_name="i")(tnp.asarray(x)))


def test_ppermute_sends_to_destinations_and_zeros_the_rest() -> None:
    x = randn(3, 2)
    np.testing.assert_array_equal(per_example(lambda v: tg.lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 0)]), x),
                                  x[[2, 0, 1]])
    partial = per_example(lambda v: tg.lax.ppermute(v, "i", [(0, 1), (2, 0)]), x)
    np.testing.assert_array_equal(partial, np.stack([x[2], x[0], np.zeros(2, np.float32)]))
    np.testing.assert_array_equal(per_example(lambda v: tg.lax.pshuffle(v, "i", [2, 0, 1]), x), x[[2, 0, 1]])
    with pytest.raises(ValueError, match="perm names a destination twice"):
        per_example(lambda v: tg.lax.ppermute(v, "i", [(0, 1), (2, 1)]), x)
    with pytest.raises(ValueError, match=r"index in \[0, 3\)"):
        per_example(lambda v: tg.lax.ppermute(v, "i", [(0, 3)]), x)
    with pytest.raises(ValueError, match=r"permutation of range\(3\)"):
        per_example(lambda v: tg.lax.pshuffle(v, "i", [0, 0, 1]), x)
    with pytest.raises(NameError, match="unbound axis name: 'j'"):
        per_example(lambda v: tg.lax.ppermute(v, "j", [(0, 1)]), x)


def test_psum_scatter_gives_each_example_its_piece_of_the_sum() -> None:
    x = randn(2, 3, 2)
    np.testing.assert_allclose(per_example(lambda v: tg.lax.psum_scatter(v, "i", scatter_dimension=1), x),
                               x.sum(0).T, rtol=1e-6)
    x = randn(2, 4, 3)
    tiled = per_example(lambda v: tg.lax.psum_scatter(v, "i", tiled=True), x)
    np.testing.assert_allclose(tiled, x.sum(0).reshape(2, 2, 3), rtol=1e-6)
    with pytest.raises(ValueError, match="dimension 0 of x .* must be the size 2 of axis 'i'"):
        per_example(lambda v: tg.lax.psum_scatter(v, "i"), x)


@pytest.mark.parametrize("split, concat, tiled", [(0, 1, False), (1, 0, False), (0, 1, True), (1, 0, True)])
def test_all_to_all_moves_piece_j_of_example_i_to_example_j(split: int, concat: int, tiled: bool) -> None:
    n = 2
    shape = [4, 6] if tiled else [2, 3]
    shape[split] = n * (2 if tiled else 1)
    x = randn(n, *shape)
    got = per_example(lambda v: tg.lax.all_to_all(v, "i", split, concat, tiled=tiled), x)
    # receiver r's pieces from senders s = 0..n-1, each sender's piece r along split_axis
    blocks = [[np.split(x[s], n, axis=split)[r] for s in range(n)] for r in range(n)]
    pieces = blocks if tiled else [[np.take(b, 0, axis=split) for b in row] for row in blocks]
    want = np.stack([np.stack(p, axis=concat) if not tiled else np.concatenate(p, axis=concat) for p in pieces])
    np.testing.assert_array_equal(got, want)


def test_axis_size_nested_axes_and_grad() -> None:
    x = randn(2, 3, 2)
    np.testing.assert_allclose(per_example(lambda v: v * tg.lax.axis_size("i"), x), 2 * x)
    sizes = tg.vmap(tg.vmap(lambda v: v * 0 + tg.lax.axis_size(("i", "j")), axis_name="j"), axis_name="i")
    np.testing.assert_array_equal(np.asarray(sizes(tnp.asarray(x))), np.full(x.shape, 6.0))
    # a collective over the outer axis from inside an inner vmap: each inner example sends along the outer axis
    swapped = tg.vmap(tg.vmap(lambda v: tg.lax.ppermute(v, "i", [(0, 1), (1, 0)]) * tg.lax.axis_index("j"),
                              axis_name="j"), axis_name="i")(tnp.asarray(x))
    np.testing.assert_allclose(np.asarray(swapped), x[::-1] * np.arange(3)[None, :, None])

    def loss(v: tg.Tensor) -> tg.Tensor:
        return (tg.vmap(lambda r: tg.lax.psum_scatter(r, "i") ** 2, axis_name="i")(v)).sum()
    a = randn(2, 2)
    np.testing.assert_allclose(np.asarray(tg.grad(loss)(tnp.asarray(a))), np.broadcast_to(2 * a.sum(0), (2, 2)),
                               rtol=1e-6)


def test_under_shard_map_over_two_devices() -> None:
    with tg.Context(TGFX_CPU_DEVICES=2):
        mesh = Mesh(np.array(tg.devices()), ("data",))
    x = randn(4, 4)
    ring = tg.shard_map(lambda b: tg.lax.ppermute(b, "data", [(0, 1), (1, 0)]), mesh=mesh, in_specs=P("data"),
                        out_specs=P("data"))(x)
    np.testing.assert_array_equal(ring.numpy(), np.concatenate([x[2:], x[:2]]))
    # each device's rows summed over devices, then split by rows between them: a reduce-scatter
    scattered = tg.jit(tg.shard_map(lambda b: tg.lax.psum_scatter(b, "data", tiled=True), mesh=mesh,
                                    in_specs=P("data"), out_specs=P("data")))(x)
    np.testing.assert_allclose(scattered.numpy(), x[:2] + x[2:], rtol=1e-6)
    # rows split over devices become columns split over devices
    moved = tg.shard_map(lambda b: tg.lax.all_to_all(b, "data", 1, 0, tiled=True), mesh=mesh, in_specs=P("data"),
                         out_specs=P(None, "data"))(x)
    np.testing.assert_array_equal(moved.numpy(), x)
    assert tg.sharding(moved.realize()) == (("CPU:0", "CPU:1"), 1)
