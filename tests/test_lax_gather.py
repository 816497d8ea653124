"""tg.lax.gather / scatter / scatter_add (_mul, _min, _max), the general tg.lax.reduce and tg.lax.linalg, against numpy.

The gathers and scatters are checked against numpy fancy indexing of the same selection, and, over random dimension
numbers, against a reference that walks XLA's definition position by position."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp

L = tg.lax
GDN, SDN = L.GatherDimensionNumbers, L.ScatterDimensionNumbers


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- a reference that follows XLA's definition of gather, one output position at a time ----
def ref_gather(x: np.ndarray, idx: np.ndarray, dn: GDN, sizes: tuple, mode: str, fill: float = np.nan) -> np.ndarray:
    batch = idx.shape[:-1]
    windows = [d for d in range(x.ndim) if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims]
    rank = len(batch) + len(windows)
    bpos = [p for p in range(rank) if p not in dn.offset_dims]
    out_shape = [0] * rank
    for p, b in zip(bpos, batch, strict=True):
        out_shape[p] = b
    for p, d in zip(dn.offset_dims, windows, strict=True):
        out_shape[p] = sizes[d]
    out = np.zeros(out_shape, x.dtype)
    for o in itertools.product(*map(range, out_shape)):
        g = tuple(o[p] for p in bpos)
        start, ok = [0] * x.ndim, True
        for k, d in enumerate(dn.start_index_map):
            s = int(idx[g + (k,)])
            ok &= 0 <= s <= x.shape[d] - sizes[d]
            start[d] = min(max(s, 0), x.shape[d] - sizes[d])
        for d, j in zip(dn.operand_batching_dims, dn.start_indices_batching_dims, strict=True):
            start[d] = g[j]
        pos = list(start)
        for p, d in zip(dn.offset_dims, windows, strict=True):
            pos[d] += o[p]
        out[o] = fill if mode == "fill" and not ok else x[tuple(pos)]
    return out


@st.composite
def gather_case(draw: st.DrawFn) -> tuple:
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd)))
    addressed = draw(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd))
    sizes = tuple(draw(st.integers(1, n)) if d not in addressed or draw(st.booleans()) else 1
                  for d, n in enumerate(shape))
    collapsed = tuple(d for d in range(nd) if sizes[d] == 1 and draw(st.booleans()))
    nbatch = draw(st.integers(0, 2))
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=nbatch, max_size=nbatch)))
    windows = [d for d in range(nd) if d not in collapsed]
    rank = nbatch + len(windows)
    offset = tuple(sorted(draw(st.permutations(range(rank)))[:len(windows)]))
    idx = np.asarray(draw(st.lists(st.integers(-2, 5), min_size=int(np.prod(batch)) * len(addressed),
                                   max_size=int(np.prod(batch)) * len(addressed))), np.int32)
    return shape, sizes, GDN(offset, collapsed, tuple(addressed)), idx.reshape(batch + (len(addressed),))


@settings(max_examples=20, deadline=None)
@given(gather_case(), st.sampled_from(["clip", "fill"]))
def test_gather_matches_xla_definition(case: tuple, mode: str) -> None:
    shape, sizes, dn, idx = case
    x = f32(*shape)
    got = np.asarray(L.gather(x, idx, dn, sizes, mode=mode))
    np.testing.assert_array_equal(got, ref_gather(x, idx, dn, sizes, mode))


def test_gather_as_numpy_fancy_indexing() -> None:
    x = f32(5, 6)
    rows = np.array([4, 0, 2, 2], np.int32)
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    np.testing.assert_array_equal(np.asarray(L.gather(x, rows[:, None], dn, (1, 6))), x[rows])
    ij = np.array([[1, 2], [4, 5], [0, 0]], np.int32)   # x[i, j]
    dn = GDN(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))
    np.testing.assert_array_equal(np.asarray(L.gather(x, ij, dn, (1, 1))), x[ij[:, 0], ij[:, 1]])
    xb = f32(2, 5, 3)                                     # take_along_axis through batching dims
    ib = np.array([[[4], [0]], [[1], [1]]], np.int32)
    dn = GDN(offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,), operand_batching_dims=(0,),
             start_indices_batching_dims=(0,))
    np.testing.assert_array_equal(np.asarray(L.gather(xb, ib, dn, (1, 1, 3))), np.take_along_axis(xb, ib, 1))


def test_gather_modes_out_of_bounds() -> None:
    x = np.arange(10, dtype=np.int32)
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))
    idx = np.array([[-1], [7], [8], [3]], np.int32)   # a window of 3 fits at starts 0..7
    np.testing.assert_array_equal(np.asarray(L.gather(x, idx, dn, (3,), mode="clip")),
                                  [[0, 1, 2], [7, 8, 9], [7, 8, 9], [3, 4, 5]])
    lo = np.iinfo(np.int32).min   # with "fill", the whole window of an out-of-bounds start is filled
    np.testing.assert_array_equal(np.asarray(L.gather(x, idx, dn, (3,), mode="fill")),
                                  [[lo] * 3, [7, 8, 9], [lo] * 3, [3, 4, 5]])
    # JAX's default for a gather is PROMISE_IN_BOUNDS, which its CPU and GPU gathers clamp
    np.testing.assert_array_equal(np.asarray(L.gather(x, idx, dn, (3,))),
                                  np.asarray(L.gather(x, idx, dn, (3,), mode="clip")))
    np.testing.assert_array_equal(np.asarray(L.gather(x, idx, dn, (3,), mode=L.GatherScatterMode.FILL_OR_DROP,
                                                      fill_value=-5)), [[-5] * 3, [7, 8, 9], [-5] * 3, [3, 4, 5]])
    np.testing.assert_array_equal(np.asarray(L.gather(x, idx, dn, (3,), mode="promise_in_bounds")),
                                  np.asarray(L.gather(x, idx, dn, (3,), mode="clip")))


def test_gather_jit_grad_vmap() -> None:
    x = f32(4, 5)
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    idx = np.array([[3], [1], [3]], np.int32)

    @tg.jit
    def f(x: tg.Tensor, i: tg.Tensor) -> tg.Tensor:
        return L.gather(x, i, dn, (1, 2), mode="clip")

    np.testing.assert_array_equal(np.asarray(f(x, idx)), x[idx[:, 0], :2])
    np.testing.assert_array_equal(np.asarray(f(x, idx[:2] + 0 * idx[:2])), x[idx[:2, 0], :2])
    w = f32(3, 2, seed=1)
    g = np.asarray(tg.grad(lambda x: (f(x, idx) * w).sum())(x))
    want = np.zeros_like(x)
    np.add.at(want, (idx[:, 0][:, None], np.arange(2)[None]), w)   # the transposed gather: repeats accumulate
    np.testing.assert_allclose(g, want, rtol=1e-6)
    got = tg.vmap(lambda i: L.gather(x, i, dn, (1, 5), mode="clip"))(idx[:, None, :])
    np.testing.assert_array_equal(np.asarray(got), x[idx[:, 0]][:, None])


def test_gather_and_scatter_add_are_one_kernel_each() -> None:
    x = tg.asarray(f32(6, 5)).realize()
    i = tg.asarray(np.array([[4], [0], [7]], np.int32)).realize()
    for mode in ("clip", "fill"):   # the fill's select fuses into the gather
        tg.counters.reset()
        L.gather(x, i, GDN((1,), (0,), (0,)), (1, 5), mode=mode).realize()
        assert tg.counters.kernel_count == 1, mode
    u = tg.asarray(f32(3, 5, seed=1)).realize()
    tg.counters.reset()
    L.scatter_add(x, i, u, SDN((1,), (0,), (0,))).realize()
    assert tg.counters.kernel_count == 1


# ---- scatter ----
def ref_scatter_add(x: np.ndarray, idx: np.ndarray, u: np.ndarray, dn: SDN, mode: str) -> np.ndarray:
    """XLA's scatter with addition, one update element at a time."""
    out = x.copy()
    windows = [d for d in range(x.ndim) if d not in dn.inserted_window_dims]
    sizes = [1] * x.ndim
    for d, a in zip(windows, dn.update_window_dims, strict=True):
        sizes[d] = u.shape[a]
    bpos = [a for a in range(u.ndim) if a not in dn.update_window_dims]
    for o in itertools.product(*map(range, u.shape)):
        g = tuple(o[a] for a in bpos)
        pos, ok = [0] * x.ndim, True
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            s = int(idx[g + (k,)])
            ok &= 0 <= s <= x.shape[d] - sizes[d]
            pos[d] = min(max(s, 0), x.shape[d] - sizes[d])
        for d, a in zip(windows, dn.update_window_dims, strict=True):
            pos[d] += o[a]
        if ok or mode == "clip":
            out[tuple(pos)] += u[o]
    return out


@settings(max_examples=20, deadline=None)
@given(gather_case(), st.sampled_from(["clip", "drop"]))
def test_scatter_add_matches_xla_definition(case: tuple, mode: str) -> None:
    shape, sizes, gdn, idx = case   # the scatter that is this gather's transpose
    dn = SDN(gdn.offset_dims, gdn.collapsed_slice_dims, gdn.start_index_map)
    x = f32(*shape)
    u = f32(*ref_gather(x, idx, gdn, sizes, "clip").shape, seed=1)
    got = np.asarray(L.scatter_add(x, idx, u, dn, mode=mode))
    np.testing.assert_allclose(got, ref_scatter_add(x, idx, u, dn, mode), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn,ufunc", [(L.scatter_add, np.add), (L.scatter_mul, np.multiply),
                                      (L.scatter_min, np.minimum), (L.scatter_max, np.maximum)])
def test_scatter_combining_as_numpy_at(fn: object, ufunc: np.ufunc) -> None:
    x, u = f32(5, 3), f32(4, 3, seed=1)
    rows = np.array([4, 0, 4, 2], np.int32)
    want = x.copy()
    ufunc.at(want, rows, u)
    got = fn(x, rows[:, None], u, SDN(update_window_dims=(1,), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,)))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize("fn", [L.scatter_min, L.scatter_max])
def test_scatter_min_max_gradient_shares_ties_as_jax(fn: object) -> None:
    # the operand's value and the updates tied with it share the cotangent equally (JAX's rule), also where no axis is
    # addressed and every update lands on the one window
    x, y = np.array([1.0, 2.0, 3.0], np.float32), np.array([1.0, 1.0, 3.0], np.float32)
    dn = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    rows = np.array([[0], [0], [2]], np.int32)
    gx, gy = tg.grad(lambda a, b: fn(a, rows, b, dn).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(gx), [1 / 3, 1.0, 0.5], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gy), [1 / 3, 1 / 3, 0.5], rtol=1e-6)
    ys = np.array([[1.0, 2.5, 3.0], [1.0, 1.5, 3.0]], np.float32)   # 2.5 wins the max of column 1, 1.5 the min
    whole = SDN(update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=())
    gx, gy = tg.grad(lambda a, b: fn(a, np.zeros((2, 0), np.int32), b, whole).sum(), argnums=(0, 1))(x, ys)
    np.testing.assert_allclose(np.asarray(gx), [1 / 3, 0.0, 1 / 3], rtol=1e-6)
    won = [1.0, 0.0] if fn is L.scatter_max else [0.0, 1.0]
    np.testing.assert_allclose(np.asarray(gy), [[1 / 3, won[0], 1 / 3], [1 / 3, won[1], 1 / 3]], rtol=1e-6)


def test_scatter_points_windows_and_drop() -> None:
    x = np.zeros((4, 5), np.float32)
    ij = np.array([[0, 1], [3, 4], [9, 0], [2, 2]], np.int32)   # (9, 0) is out of bounds
    u = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    dn = SDN(update_window_dims=(), inserted_window_dims=(0, 1), scatter_dims_to_operand_dims=(0, 1))
    want = x.copy()
    want[ij[[0, 1, 3], 0], ij[[0, 1, 3], 1]] = u[[0, 1, 3]]
    np.testing.assert_array_equal(np.asarray(L.scatter(x, ij, u, dn)), want)   # dropped by default
    want[3, 0] = 3.0                                                                # clamped to row 3
    np.testing.assert_array_equal(np.asarray(L.scatter(x, ij, u, dn, mode="clip")), want)
    # 2x2 windows; the one at (3, 4) does not fit and is dropped whole, (-1, 0) too
    starts = np.array([[0, 0], [3, 4], [2, 3], [-1, 0]], np.int32)
    w = np.arange(16, dtype=np.float32).reshape(4, 2, 2)
    dn = SDN(update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(0, 1))
    want = x.copy()
    want[0:2, 0:2] += w[0]
    want[2:4, 3:5] += w[2]
    np.testing.assert_array_equal(np.asarray(L.scatter_add(x, starts, w, dn)), want)


def test_scatter_batching_dims() -> None:
    x, u = f32(2, 5), f32(2, 3, seed=1)
    idx = np.array([[[4], [0], [4]], [[1], [2], [3]]], np.int32)
    dn = SDN(update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
             operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    want = x.copy()
    np.add.at(want, (np.arange(2)[:, None], idx[..., 0]), u)
    np.testing.assert_allclose(np.asarray(L.scatter_add(x, idx, u, dn)), want, rtol=1e-6)


def test_scatter_add_jit_and_grad() -> None:
    x, u = f32(5, 3), f32(4, 3, seed=1)
    rows = np.array([[4], [0], [4], [2]], np.int32)
    dn = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    f = tg.jit(lambda x, u, i: L.scatter_add(x, i, u, dn))
    want = x.copy()
    np.add.at(want, rows[:, 0], u)
    np.testing.assert_allclose(np.asarray(f(x, u, rows)), want, rtol=1e-6)
    w = f32(5, 3, seed=2)
    gx, gu = tg.grad(lambda x, u: (f(x, u, rows) * w).sum(), argnums=(0, 1))(x, u)
    np.testing.assert_allclose(np.asarray(gx), w)                       # d/dx: the identity
    np.testing.assert_allclose(np.asarray(gu), w[rows[:, 0]])           # d/du: a gather of the cotangent


# ---- reduce ----
@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_reduce_monoids(shape: list, data: st.DataObject) -> None:
    x = f32(*shape)
    dims = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1)))))
    for comp, init, ref in [(L.add, 0.0, np.sum), (L.mul, 1.0, np.prod), (L.max, -np.inf, np.max),
                            (tnp.minimum, np.inf, np.min), (lambda a, b: a + b, 0.0, np.sum)]:
        got = np.asarray(L.reduce(x, init, comp, dims))
        np.testing.assert_allclose(got, ref(x, axis=dims), rtol=1e-5, atol=1e-6)
    n = np.random.default_rng(1).integers(0, 256, shape).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(L.reduce(n, -1, L.bitwise_and, dims)),
                                  np.bitwise_and.reduce(n, axis=dims) if dims else n)
    np.testing.assert_array_equal(np.asarray(L.reduce(n, 0, L.bitwise_or, dims)),
                                  np.bitwise_or.reduce(n, axis=dims) if dims else n)


def test_reduce_tuple_and_init() -> None:
    x = f32(3, 4)
    s, m = L.reduce((x, x), (0.0, -np.inf), lambda a, b: (a[0] + b[0], L.max(a[1], b[1])), (1,))
    np.testing.assert_allclose(np.asarray(s), x.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(m), x.max(1))
    np.testing.assert_allclose(np.asarray(L.reduce(x, 2.0, L.add, (0,))), x.sum(0) + 2.0, rtol=1e-5)   # init once
    g = tg.grad(lambda x: L.reduce(x, 0.0, L.add, (0, 1)))(x)
    np.testing.assert_array_equal(np.asarray(g), np.ones_like(x))


# ---- linalg ----
def test_linalg_wrappers() -> None:
    la = L.linalg
    a = f32(4, 4)
    spd = a @ a.T + 4 * np.eye(4, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(la.cholesky(spd)), np.linalg.cholesky(spd), rtol=1e-5, atol=1e-5)
    # symmetrize_input=False reads the lower triangle only, as lax's (numpy.linalg now symmetrises by default)
    junk = spd + np.triu(np.full((4, 4), 7.0, np.float32), 1)
    np.testing.assert_allclose(np.asarray(la.cholesky(junk, symmetrize_input=False)), np.linalg.cholesky(spd),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(la.cholesky(junk)), np.linalg.cholesky((junk + junk.T) / 2), rtol=1e-5,
                               atol=1e-5)
    lt = np.tril(a) + 4 * np.eye(4, dtype=np.float32)
    b, bt = f32(4, 3, seed=1), f32(3, 4, seed=2)
    for left, lower, trans in itertools.product([True, False], repeat=3):
        t = lt if lower else lt.T
        op = t.T if trans else t
        x = np.asarray(la.triangular_solve(t, b if left else bt, left_side=left, lower=lower, transpose_a=trans))
        np.testing.assert_allclose(op @ x if left else x @ op, b if left else bt, atol=1e-5)
    m = f32(5, 3, seed=3)
    q, r = la.qr(m)
    assert q.shape == (5, 5) and r.shape == (5, 3)                          # lax's default: full matrices
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), m, atol=1e-5)
    v, w = la.eigh(spd)                                                     # eigenvectors first
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(spd), rtol=1e-5)
    np.testing.assert_allclose(spd @ np.asarray(v), np.asarray(v) * np.asarray(w), atol=1e-4)
    u, s, vh = la.svd(m)
    assert u.shape == (5, 5) and vh.shape == (3, 3)
    np.testing.assert_allclose(np.asarray(s), np.linalg.svd(m, compute_uv=False), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(la.svd(m, compute_uv=False)), np.asarray(s), rtol=1e-6)
    lu, piv, perm = la.lu(a)
    lower_ = np.tril(np.asarray(lu), -1) + np.eye(4)
    np.testing.assert_allclose(a[np.asarray(perm)], lower_ @ np.triu(np.asarray(lu)), atol=1e-5)
    assert piv.dtype == tnp.int32 and perm.dtype == tnp.int32


# ---- errors name the argument ----
def test_errors_name_the_argument() -> None:
    x = f32(3, 4)
    dn = GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    with pytest.raises(TypeError, match="start_indices must have an integer dtype"):
        L.gather(x, np.zeros((2, 1), np.float32), dn, (1, 4))
    with pytest.raises(ValueError, match="slice_sizes"):
        L.gather(x, np.zeros((2, 1), np.int32), dn, (1, 5))
    with pytest.raises(ValueError, match="start_index_map"):
        L.gather(x, np.zeros((2, 2), np.int32), dn, (1, 4))
    with pytest.raises(ValueError, match="offset_dims"):
        L.gather(x, np.zeros((2, 1), np.int32), GDN((0, 1), (0,), (0,)), (1, 4))
    with pytest.raises(ValueError, match="mode"):
        L.gather(x, np.zeros((2, 1), np.int32), dn, (1, 4), mode="wrap")
    sdn = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    with pytest.raises(ValueError, match="update window along operand axis 1 has 5"):
        L.scatter_add(x, np.zeros((2, 1), np.int32), f32(2, 5), sdn)
    with pytest.raises(ValueError, match=r"updates of shape \(3, 4\) must have the batch axes \(2,\)"):
        L.scatter_add(x, np.zeros((2, 1), np.int32), f32(3, 4), sdn)
    with pytest.raises(TypeError, match="updates .* dtype"):
        L.scatter(x, np.zeros((2, 1), np.int32), np.zeros((2, 4), np.int32), sdn)
    with pytest.raises(NotImplementedError, match="computation must be tg.lax.add"):
        L.reduce(x, 0.0, lambda a, b: a - b, (0,))
    with pytest.raises(ValueError, match="b must have shape"):
        L.linalg.triangular_solve(f32(3, 3), f32(3, 2), left_side=False)
    with pytest.raises(NotImplementedError, match="pivoting"):
        L.linalg.qr(x, pivoting=True)


def test_gathers_by_one_hashed_index_store_the_index_not_its_one_hot_mask():
    """A DQN's minibatch: rows drawn by `randint` from a replay buffer of 8,192, several columns gathered by that one
    index in different kernels. The index (a threefry hash) is costly to compute again, so it is stored once; its
    one-hot mask (`idx == arange`, 256 x 8,192) is not, else each gather is a reduce over all 8,192 rows instead of
    256 loads (two of them were 1.4 of a 3 ms step)."""
    from tgfx.ir.ops import Ops
    from tgfx.ir.uop import UOp
    from tgfx.lowering.fusion import find_realizes
    from tgfx.lowering.inline import inline
    rng = np.random.default_rng(0)
    s, s2 = (rng.standard_normal((8192, 4)).astype(np.float32) for _ in range(2))

    @tg.function
    def minibatch(key: tg.Tensor, s: tg.Tensor, s2: tg.Tensor) -> tuple[tg.Tensor, ...]:
        j = tg.random.randint(key, (256,), 0, 8192)
        return s[j] * 2, s2[j].sum(-1)
    outs = minibatch(tg.random.key(0), tg.asarray(s), tg.asarray(s2))
    sink = inline(UOp(Ops.SINK, None, tuple(t.uop for t in outs)))
    stored = find_realizes(list(sink.src))
    assert max(int(np.prod(u.shape or ())) for u in stored) <= 256 * 4, \
        [(u.op, u.dtype, u.shape) for u in stored]
    assert any(u.shape == (256,) and u.dtype.is_int for u in stored), [(u.op, u.dtype, u.shape) for u in stored]
    jn = tg.random.randint(tg.random.key(0), (256,), 0, 8192).numpy()
    np.testing.assert_array_equal(outs[0].numpy(), s[jn] * 2)
    np.testing.assert_allclose(outs[1].numpy(), s2[jn].sum(-1), rtol=1e-6)
