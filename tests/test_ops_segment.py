"""tg.ops: jax.ops' segment reductions against numpy's ufunc.at, under jit, vmap and grad."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp

REFS = {"segment_sum": (np.add, 0.0), "segment_prod": (np.multiply, 1.0), "segment_max": (np.maximum, -np.inf),
        "segment_min": (np.minimum, np.inf)}


def reference(name: str, data: np.ndarray, ids: np.ndarray, n: int) -> np.ndarray:
    ufunc, identity = REFS[name]
    out = np.full((n,) + data.shape[1:], identity, data.dtype)
    keep = (ids >= 0) & (ids < n)   # out-of-range ids are dropped, negative ones too
    ufunc.at(out, ids[keep], data[keep])
    return out


@settings(max_examples=20)
@given(st.sampled_from(list(REFS)), st.integers(0, 12), st.integers(0, 6), st.sampled_from([(), (3,)]),
       st.integers(0, 2 ** 16))
def test_segment_reductions_match_numpy(name: str, rows: int, n: int, tail: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((rows,) + tail).astype(np.float32)
    ids = rng.integers(-2, n + 2, rows).astype(np.int32)    # some out of range, both sides
    got = getattr(tg.ops, name)(tg.asarray(data), tg.asarray(ids), num_segments=n)
    np.testing.assert_allclose(got.numpy(), reference(name, data, ids, n), rtol=1e-6)


def test_integer_data_empty_segments_hold_the_identity_and_num_segments_defaults_to_the_ids() -> None:
    data, ids = np.array([[1, 2], [3, 4], [5, 6]], np.int32), np.array([0, 0, 3], np.int32)
    i32 = np.iinfo(np.int32)
    np.testing.assert_array_equal(tg.ops.segment_sum(data, ids).numpy(), [[4, 6], [0, 0], [0, 0], [5, 6]])
    np.testing.assert_array_equal(tg.ops.segment_max(data, ids).numpy()[1], [i32.min] * 2)
    np.testing.assert_array_equal(tg.ops.segment_min(data, ids).numpy()[2], [i32.max] * 2)
    np.testing.assert_array_equal(tg.ops.segment_prod(data, ids, num_segments=2).numpy(), [[3, 8], [1, 1]])
    clipped = tg.ops.segment_sum(np.ones(3, np.float32), np.array([0, 5, -1], np.int32), num_segments=2, mode="clip")
    np.testing.assert_array_equal(clipped.numpy(), [2.0, 1.0])


def test_segment_sum_under_jit_vmap_and_grad() -> None:
    # a graph network's aggregation: messages of the edges summed into their destination nodes
    rng = np.random.default_rng(0)
    h = rng.standard_normal((6, 3)).astype(np.float32)
    src, dst = np.array([0, 1, 2, 3, 4, 5, 1], np.int32), np.array([1, 2, 2, 0, 5, 5, 0], np.int32)

    def layer(h: tg.Tensor) -> tg.Tensor:
        return tnp.tanh(tg.ops.segment_sum(h[src], dst, num_segments=6))
    want = np.tanh(reference("segment_sum", h[src], dst, 6))
    np.testing.assert_allclose(tg.jit(layer)(tg.asarray(h)).numpy(), want, rtol=1e-6)
    batch = np.stack([h, 2 * h])
    np.testing.assert_allclose(tg.vmap(layer)(tg.asarray(batch)).numpy(),
                               np.stack([want, np.tanh(2 * reference("segment_sum", h[src], dst, 6))]), rtol=1e-5)
    # d/dh sum(segment_sum(h[src])) counts each node's outgoing edges
    g = tg.grad(lambda h: tg.ops.segment_sum(h[src], dst, num_segments=6).sum())(tg.asarray(h))
    np.testing.assert_allclose(g.numpy(), np.bincount(src, minlength=6)[:, None] * np.ones((6, 3)))
    # the maximum's gradient goes to each segment's largest row
    x = np.array([1.0, 5.0, 2.0, 7.0], np.float32)
    gm = tg.grad(lambda x: tg.ops.segment_max(x, np.array([0, 0, 1, 1], np.int32), num_segments=2).sum())(
        tg.asarray(x))
    np.testing.assert_array_equal(gm.numpy(), [0.0, 1.0, 0.0, 1.0])


def test_segment_errors_name_the_argument() -> None:
    with pytest.raises(TypeError, match="num_segments must be given"):
        tg.jit(lambda d, i: tg.ops.segment_sum(d, i))(tnp.ones(3), tg.asarray(np.array([0, 1, 1], np.int32)))
    with pytest.raises(ValueError, match=r"one id per row of data .*shape \(2,\) and data of shape \(3,\)"):
        tg.ops.segment_sum(tnp.ones(3), np.array([0, 1], np.int32), num_segments=2)
    with pytest.raises(TypeError, match="segment_ids must be integers, got float32"):
        tg.ops.segment_sum(tnp.ones(3), tnp.ones(3), num_segments=2)


# ---- scatters onto many rows: a loop over the updates (`gather.collapse_scatter`), not every row against every update
@settings(max_examples=12)
@given(st.sampled_from(["add", "multiply", "min", "max", "set"]), st.sampled_from([(), (5,)]),
       st.sampled_from(["drop", "clip"]), st.integers(0, 2 ** 16))
def test_large_scatters_match_numpy(op: str, tail: tuple[int, ...], mode: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = 150, 400    # past fusion.SCATTER_MIN both ways; indices repeat, some out of range on both sides
    x = rng.standard_normal((n,) + tail).astype(np.float32)
    idx = rng.integers(-n - 20, n + 20, m).astype(np.int32)
    v = rng.standard_normal((m,) + tail).astype(np.float32)
    got = getattr(tg.asarray(x).at[tg.asarray(idx)], op)(tg.asarray(v), mode=mode).numpy()
    want = x.copy()
    norm = np.where(idx < 0, idx + n, idx)   # negative indices count from the end, as in numpy
    keep = (norm >= 0) & (norm < n) if mode == "drop" else np.ones(m, bool)
    rows = np.clip(norm, 0, n - 1)[keep]
    if op == "set":
        want[rows] = v[keep]            # the last update of a row wins, as numpy's assignment
    else:
        {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}[op].at(want, rows, v[keep])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_scatter_kernel_is_a_loop_over_its_updates_and_an_embeddings_gradient_uses_it() -> None:
    from tgfx.lowering import index_level
    from tgfx.lowering.schedule import schedule
    rng = np.random.default_rng(1)
    table = rng.standard_normal((1000, 16)).astype(np.float32)
    tokens = rng.integers(0, 1000, 300).astype(np.int32)
    g = tg.grad(lambda t: (t[tokens] ** 2).sum())(tg.asarray(table))     # the gather's transpose: a scatter-add
    want = np.zeros_like(table)
    np.add.at(want, tokens, 2 * table[tokens])
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
    # the table's gradient is a scatter over its rows, each update's row (16 features) written whole: the rows' loop
    # (set to 0) and the updates' sequential range both outside the feature loop (the gather's sum once came out
    # features x rows, a strided column an update, then transposed)
    linear, _ = schedule([tg.grad(lambda t: (t[tokens] ** 2).sum())(tg.asarray(table)).uop])
    kernels = [index_level(c.src[0]) for c in linear.src if c.src[0].op is tg.Ops.SINK]
    scatters = [[u.arg[1] for u in sorted((u for u in k.toposort() if u.op is tg.Ops.RANGE), key=lambda u: u.arg[0])]
                for k in kernels if any(u.op is tg.Ops.RANGE and u.arg[1] == "scatter" for u in k.toposort())]
    assert scatters == [["loop", "scatter", "loop"]], scatters
    # jitted, the gradient is the scatter, the doubled gather computed in its loop, whose buffer is the result (its
    # (1, rows, width) seen as (rows, width): no copy)
    step = tg.jit(tg.grad(lambda t: (t[tokens] ** 2).sum()))
    step(tg.asarray(table)).numpy()
    tg.counters.reset()
    np.testing.assert_allclose(step(tg.asarray(table)).numpy(), want, rtol=1e-6)
    assert tg.counters.kernel_count == 1
    out = tg.ops.segment_sum(tg.asarray(table[:300]), tg.asarray(tokens), num_segments=1000)
    linear, _ = schedule([out.uop])
    kernels = [index_level(c.src[0]) for c in linear.src if c.src[0].op is tg.Ops.SINK]
    ranges = [{u.arg[1] for u in k.toposort() if u.op is tg.Ops.RANGE} for k in kernels]
    assert any("scatter" in r and "reduce" not in r for r in ranges), ranges
    # segment_sum's scatter too writes each update's row whole (its sum was laid out features x segments)
    orders = [[u.arg[1] for u in sorted((u for u in k.toposort() if u.op is tg.Ops.RANGE), key=lambda u: u.arg[0])]
              for k in kernels if any(u.op is tg.Ops.RANGE and u.arg[1] == "scatter" for u in k.toposort())]
    assert orders and all(o == ["loop", "scatter", "loop"] for o in orders), orders
    np.testing.assert_allclose(out.numpy(), np.add.at(z := np.zeros_like(table), tokens, table[:300]) or z,
                               rtol=1e-6)


@pytest.mark.parametrize("segments", [2, 16])
def test_a_scatter_into_a_few_rows_is_a_loop_over_its_updates_too(segments: int) -> None:
    # per-category sums of a table's rows (`.at[category].add(rows)`, segment_sum into a few segments): as a reduce,
    # every row and column read every update, a column's reads strided by the width (16 categories of 20,000 rows of
    # 64 features: 250 ms; as a loop 1 ms). From 2 rows (fusion.SCATTER_MIN_ROWS) it is the loop over the updates
    from tgfx.lowering import index_level
    from tgfx.lowering.schedule import schedule
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((500, 64)).astype(np.float32)
    cat = rng.integers(0, segments, 500).astype(np.int32)
    for out in (tnp.zeros((segments, 64), tnp.float32).at[tg.asarray(cat)].add(tg.asarray(rows)),
                tg.ops.segment_sum(tg.asarray(rows), tg.asarray(cat), num_segments=segments)):
        linear, _ = schedule([out.uop])
        kernels = [index_level(c.src[0]) for c in linear.src if c.src[0].op is tg.Ops.SINK]
        kinds = [{u.arg[1] for u in k.toposort() if u.op is tg.Ops.RANGE} for k in kernels]
        assert any("scatter" in r for r in kinds) and not any("reduce" in r for r in kinds), kinds
        want = np.zeros((segments, 64), np.float32)
        np.add.at(want, cat, rows)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_the_gradient_of_a_gather_by_rows_and_columns_is_one_scatter_loop() -> None:
    # t[i[:, None], j[None, :]]: its gradient sums updates (a, b) into row i[a], column j[b], matched by two indices
    # over two reduced axes; as a reduce it compared all 512 x 512 outputs with all 256 x 128 updates (122 ms)
    from tgfx.lowering import index_level
    from tgfx.lowering.schedule import schedule
    rng = np.random.default_rng(2)
    table = rng.standard_normal((512, 512)).astype(np.float32)
    i, j = rng.integers(-512, 512, 256).astype(np.int32), rng.integers(0, 512, 128).astype(np.int32)
    loss = lambda t: (t[tg.asarray(i)[:, None], tg.asarray(j)[None, :]] ** 2).sum()   # noqa: E731
    g = tg.jit(tg.grad(loss))(tg.asarray(table))
    want = np.zeros_like(table)
    np.add.at(want, (i[:, None] % 512, j[None, :]), 2 * table[i[:, None], j[None, :]])
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-6)
    linear, _ = schedule([tg.grad(loss)(tg.asarray(table)).uop])
    kernels = [index_level(c.src[0]) for c in linear.src if c.src[0].op is tg.Ops.SINK]
    ranges = [{u.arg[1] for u in k.toposort() if u.op is tg.Ops.RANGE} for k in kernels]
    assert any("scatter" in r and "reduce" not in r for r in ranges), ranges
    assert not any("reduce" in r and "loop" in r for r in ranges), ranges


def test_segment_sum_gradient_is_gathered_in_the_datas_layout() -> None:
    """The gradient of segment_sum is a gather of the upstream gradient by segment id; consumed by a matmul (a GNN's
    backward) it is stored, and stored rows x features as the data is: it was stored features x rows (each row a
    strided column: 230 us for 5,000 rows of 32, 20 us now)."""
    from test_conv_direct import kernel_asts
    rng = np.random.default_rng(0)
    data = tnp.asarray(rng.standard_normal((50, 8)).astype(np.float32))
    ids = tnp.asarray(rng.integers(0, 10, 50).astype(np.int32))
    w = tnp.asarray(rng.standard_normal((10, 8)).astype(np.float32))
    g = tg.grad(lambda d: (tg.ops.segment_sum(d, ids, 10) * w).sum())(data)
    stored = [tuple(s for s in a.src[0].src[1].shape if s != 1) for a in kernel_asts(g @ tnp.ones((8, 3)))]
    assert (50, 8) in stored and (8, 50) not in stored
    np.testing.assert_allclose(g.numpy(), w.numpy()[ids.numpy()], rtol=1e-6)


# ---- a scatter is one kernel: combined into its operand, its updates computed in its loop
def _jit_kernels(f, *args) -> tuple[np.ndarray, int]:
    """f jitted: its result on args, and the kernels one call runs."""
    jf = tg.jit(f)
    jf(*args).numpy()
    tg.counters.reset()
    out = jf(*args).numpy()
    return out, tg.counters.kernel_count


@pytest.mark.parametrize("name", ["segment_sum", "segment_max", "segment_prod", "segment_min"])
def test_large_segment_reductions_drop_out_of_range_ids_in_one_kernel(name: str) -> None:
    # past fusion.SCATTER_MIN, with repeated ids, empty segments and ids out of range on both sides (JAX drops
    # them: a negative id does not count from the end). segment_sum and segment_max are one kernel: the rows set to
    # the identity, then the loop over the updates (the data once masked by the ids was a kernel of its own, and the
    # scatter, where it landed and the identity combined with it three more); segment_min is the maximum of the
    # negated values, negated back
    rng = np.random.default_rng(3)
    rows, n = 700, 50
    data = rng.standard_normal((rows, 24)).astype(np.float32)
    if name == "segment_prod":
        data = (1 + data / 8).astype(np.float32)
    ids = rng.integers(-8, n + 8, rows).astype(np.int32)
    ids[(ids >= 10) & (ids < 14)] = 20   # segments 10 to 13 are empty
    fn = getattr(tg.ops, name)
    out, kernels = _jit_kernels(lambda d, i: fn(d, i, num_segments=n), tg.asarray(data), tg.asarray(ids))
    np.testing.assert_allclose(out, reference(name, data, ids, n), rtol=1e-5, atol=1e-6)
    assert kernels == (2 if name == "segment_min" else 1), kernels
    identity = REFS[name][1]
    assert (out[10:14] == identity).all()


def test_large_integer_segment_extrema_of_empty_segments_are_the_dtype_limits() -> None:
    rng = np.random.default_rng(4)
    data = rng.integers(-1000, 1000, (300, 8)).astype(np.int32)
    ids = rng.integers(-3, 40, 300).astype(np.int32)
    ids[ids == 7] = 8
    for name, limit in (("segment_max", np.iinfo(np.int32).min), ("segment_min", np.iinfo(np.int32).max)):
        out = getattr(tg.ops, name)(tg.asarray(data), tg.asarray(ids), num_segments=40).numpy()
        want = np.full((40, 8), limit, np.int32)
        keep = ids >= 0
        (np.maximum if name == "segment_max" else np.minimum).at(want, ids[keep], data[keep])
        np.testing.assert_array_equal(out, want)
        assert (out[7] == limit).all()


def test_gradients_of_large_segment_reductions_skip_dropped_rows() -> None:
    rng = np.random.default_rng(5)
    rows, n = 400, 30
    data = rng.standard_normal((rows, 8)).astype(np.float32)
    ids = rng.integers(-5, n + 5, rows).astype(np.int32)
    w = rng.standard_normal((n, 8)).astype(np.float32)
    keep = (ids >= 0) & (ids < n)
    g = tg.jit(tg.grad(lambda d: (tg.ops.segment_sum(d, ids, num_segments=n) * w).sum()))(tg.asarray(data))
    np.testing.assert_allclose(g.numpy(), np.where(keep[:, None], w[np.clip(ids, 0, n - 1)], 0), rtol=1e-6)
    # the maximum's gradient: each kept segment's largest row (no ties in random data), none for a dropped row
    gm = tg.jit(tg.grad(lambda d: (tg.ops.segment_max(d, ids, num_segments=n) * w).sum()))(tg.asarray(data))
    mx = reference("segment_max", data, ids, n)
    won = keep[:, None] & (data == mx[np.clip(ids, 0, n - 1)])
    np.testing.assert_allclose(gm.numpy(), np.where(won, w[np.clip(ids, 0, n - 1)], 0), rtol=1e-6)


@pytest.mark.parametrize("op", ["add", "max", "multiply", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_large_scatters_into_an_operand_are_one_kernel(op: str, dtype: type) -> None:
    # x.at[idx].op(v) onto many rows: x's rows copied, then the loop over the updates combining into them (the scatter
    # of the updates, where they landed and x combined with them were three kernels); min is a maximum negated twice
    rng = np.random.default_rng(6)
    n, m = 200, 600
    x = rng.integers(-50, 50, (n, 16)).astype(dtype)
    v = rng.integers(-50, 50, (m, 16)).astype(dtype)
    if op == "multiply":
        x, v = (rng.choice([-1, 1, 2], (n, 16)).astype(dtype), rng.choice([-1, 1], (m, 16)).astype(dtype))
    if dtype == np.float32:
        x[0] = -0.0   # a row no update reaches keeps its sign
    idx = rng.integers(-n - 10, n + 10, m).astype(np.int32)
    idx[idx == 0] = 1
    idx[idx == -n] = 1
    out, kernels = _jit_kernels(lambda x, i, v: getattr(x.at[i], op)(v), tg.asarray(x), tg.asarray(idx),
                                tg.asarray(v))
    want = x.copy()
    norm = np.where(idx < 0, idx + n, idx)
    keep = (norm >= 0) & (norm < n)
    {"add": np.add, "max": np.maximum, "multiply": np.multiply, "min": np.minimum}[op].at(want, norm[keep], v[keep])
    np.testing.assert_array_equal(out, want)
    if dtype == np.float32:
        assert np.signbit(out[0]).all()
    assert kernels == (2 if op == "min" else 1), kernels
    # and a loop over the updates, no reduce comparing every row with every update (the minimum was one: 1.7 s for
    # 65,536 rows of 64 into 4,096)
    from tgfx.lowering import index_level
    kinds = [{u.arg[1] for u in index_level(c.src[0]).toposort() if u.op is tg.Ops.RANGE}
             for c in schedule_of(getattr(tg.asarray(x).at[tg.asarray(idx)], op)(tg.asarray(v)))]
    assert any("scatter" in k for k in kinds) and not any("reduce" in k for k in kinds), kinds


def test_a_scatter_along_an_inner_axis_and_a_bool_scatter_match_numpy() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 300)).astype(np.float32)
    idx = rng.integers(0, 300, 500).astype(np.int32)
    v = rng.standard_normal((6, 500)).astype(np.float32)
    out, kernels = _jit_kernels(lambda x, i, v: x.at[:, i].add(v), tg.asarray(x), tg.asarray(idx), tg.asarray(v))
    want = x.copy()
    np.add.at(want, (slice(None), idx), v)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert kernels == 1
    b = rng.random((100, 4)) < 0.5
    bv = rng.random((300, 4)) < 0.5
    bi = rng.integers(0, 100, 300).astype(np.int32)
    for op, ufunc in (("multiply", np.logical_and), ("add", np.logical_or), ("min", np.logical_and)):
        got = getattr(tg.asarray(b).at[tg.asarray(bi)], op)(tg.asarray(bv)).numpy()
        want_b = b.copy()
        ufunc.at(want_b, bi, bv)
        np.testing.assert_array_equal(got, want_b, err_msg=op)


def test_a_scatter_into_a_reduce_of_its_own_kind_is_still_a_loop() -> None:
    # c.sum(1).at[idx].add(v): the kernel stores a sum of two reduces, the rows' (their start) and the scatter's
    from tgfx.lowering import index_level
    rng = np.random.default_rng(9)
    c = rng.standard_normal((200, 5, 16)).astype(np.float32)
    idx = rng.integers(0, 200, 600).astype(np.int32)
    v = rng.standard_normal((600, 16)).astype(np.float32)
    for op, ufunc, base in (("add", np.add, c.sum(1)), ("max", np.maximum, c.max(1))):
        f = (lambda c, i, v: c.sum(1).at[i].add(v)) if op == "add" else (lambda c, i, v: c.max(1).at[i].max(v))
        out, kernels = _jit_kernels(f, tg.asarray(c), tg.asarray(idx), tg.asarray(v))
        want = base.copy()
        ufunc.at(want, idx, v)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        kinds = [{u.arg[1] for u in index_level(k.src[0]).toposort() if u.op is tg.Ops.RANGE}
                 for k in schedule_of(f(tg.asarray(c), tg.asarray(idx), tg.asarray(v)))]
        assert kernels == 1 and kinds == [{"loop", "reduce", "scatter"}], (op, kernels, kinds)


def test_a_graph_networks_messages_are_computed_in_the_scatters_loop() -> None:
    # segment_sum(h[senders] * w, receivers): the gather and the product of each edge's message are computed where the
    # loop over the edges adds it to its receiver (stored first, the edges' messages were a kernel and a buffer of
    # their own); each message's row is 64 floats, a vector loop (fusion._scatter_value_expands)
    rng = np.random.default_rng(8)
    nodes, edges = 100, 500
    h = rng.standard_normal((nodes, 64)).astype(np.float32)
    w = rng.standard_normal((edges, 1)).astype(np.float32)
    snd, rcv = (rng.integers(0, nodes, edges).astype(np.int32) for _ in range(2))
    out, kernels = _jit_kernels(lambda h, w, s, r: tg.ops.segment_sum(h[s] * w, r, num_segments=nodes),
                                *map(tg.asarray, (h, w, snd, rcv)))
    np.testing.assert_allclose(out, reference("segment_sum", h[snd] * w, rcv, nodes), rtol=1e-5, atol=1e-5)
    assert kernels == 1


@pytest.mark.parametrize(("width", "threads"), [(64, 1), (4096, 2)])
def test_a_scatter_splits_its_rows_over_cores_only_a_page_or_more_each(width: int, threads: int) -> None:
    # each core streams every update, its share of each row alone: below a page, the hardware prefetcher streams on
    # into the rest of the row, and two cores read it all each (65,536 rows of 64 floats: 1.3 ms split, 0.87 whole)
    from test_optimize import on_cores

    from tgfx.lowering import index_level
    from tgfx.lowering.heuristics import hand_coded_opts
    rows = (1 << 20) // width
    data = tg.asarray(np.ones((rows, width), np.float32))
    ids = tg.asarray(np.arange(rows, dtype=np.int32) % 64)
    (ast,) = [c.src[0] for c in schedule_of(tg.ops.segment_sum(data, ids, num_segments=64))]
    opts = hand_coded_opts(index_level(ast), on_cores(2))
    split = [o.amount for o in opts if o.op == "THREAD"]
    assert (split or [1]) == [threads], opts


def schedule_of(out: tg.Tensor) -> list:
    from tgfx.lowering.schedule import schedule
    linear, _ = schedule([out.uop])
    return [c for c in linear.src if c.src[0].op is tg.Ops.SINK]


def test_two_scatters_into_one_table_are_each_a_loop_over_their_updates() -> None:
    # word2vec's output table, gathered by the contexts and by the negatives: its gradient is the sum of two scatters.
    # The first was combined into the second as into an operand (`x.at[i].add(v)`), whose rows it then computed as a
    # reduce comparing every row with every update (5,000 x 64 rows, 6,144 updates: 24 ms; 0.3 as two loops)
    from tgfx.lowering import index_level
    rng = np.random.default_rng(8)
    table = rng.standard_normal((300, 16)).astype(np.float32)
    a, b = rng.integers(0, 300, 200).astype(np.int32), rng.integers(0, 300, (200, 5)).astype(np.int32)
    c = rng.standard_normal((200, 16)).astype(np.float32)

    def loss(t):
        return (c * t[a]).sum() + (c[:, None, :] * t[b]).sum()
    g = tg.jit(tg.grad(loss))(tg.asarray(table)).numpy()
    want = np.zeros_like(table)
    np.add.at(want, a, c)
    np.add.at(want, b, np.broadcast_to(c[:, None], (200, 5, 16)))
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    kinds = [{u.arg[1] for u in index_level(c.src[0]).toposort() if u.op is tg.Ops.RANGE}
             for c in schedule_of(tg.grad(loss)(tg.asarray(table)))]
    assert sum("scatter" in k for k in kinds) == 2 and not any("reduce" in k for k in kinds), kinds


def test_a_table_gathered_twice_by_as_many_indices_scatters_each_gather_by_a_loop() -> None:
    # one table for a skip-gram's centers and contexts (or a graph's node features by senders and by receivers): the
    # two gathers of 200 rows read one broadcast of the table, whose gradient added both one-hot masks before its
    # reduce. That sum was no scatter, and its kernel compared every row with every update (word2vec's 5,000 x 64
    # table and 1,024 pairs: 43 ms; 0.44 as loops)
    from tgfx.lowering import index_level
    rng = np.random.default_rng(9)
    table = rng.standard_normal((300, 16)).astype(np.float32)
    a, b, c = (rng.integers(0, 300, s).astype(np.int32) for s in (200, (200, 5), 200))

    def loss(t):
        centers = t[c]
        return (centers * t[a]).sum() + (centers[:, None, :] * t[b]).sum()
    g = tg.jit(tg.grad(loss))(tg.asarray(table)).numpy()
    want = np.zeros_like(table)
    np.add.at(want, c, table[a] + table[b].sum(1))
    np.add.at(want, a, table[c])
    np.add.at(want, b, np.broadcast_to(table[c][:, None], (200, 5, 16)))
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
    kinds = [{(u.arg[1], u.src[0].arg) for u in index_level(k.src[0]).toposort() if u.op is tg.Ops.RANGE}
             for k in schedule_of(tg.grad(loss)(tg.asarray(table)))]
    rows = [k for k in kinds if ("loop", 300) in k]
    assert len(rows) == 3 and all(any(kind == "scatter" for kind, _ in k) for k in rows), kinds
    assert not any(kind == "reduce" for k in rows for kind, _ in k), kinds
