"""sort/argsort and einsum/tensordot against numpy."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
import tgfx.numpy as tnp


def check(got: tg.Tensor, want: np.ndarray, exact: bool = True) -> None:
    g = np.asarray(got)
    assert g.shape == want.shape, (g.shape, want.shape)
    if exact:
        assert g.dtype == want.dtype, (g.dtype, want.dtype)
        np.testing.assert_array_equal(g, want)
    else:
        np.testing.assert_allclose(g, want, rtol=2e-5, atol=1e-5)


# ---- sort and argsort ----
SPECIAL = np.array([3, np.nan, -np.inf, 1, 1, np.inf, -2, np.nan, 0, 1], np.float32)


@pytest.mark.parametrize("axis", [-1, 0, 1, None])
def test_sort_argsort_axes(axis: int | None) -> None:
    a = np.random.default_rng(0).integers(-3, 4, (4, 6)).astype(np.float32)
    a[1, 2] = np.nan
    check(tnp.sort(a, axis=axis), np.sort(a, axis=axis))
    check(tnp.argsort(a, axis=axis), np.argsort(a, axis=axis, stable=True).astype(np.int32))


def test_sort_nan_inf_ties_stable() -> None:
    check(tnp.sort(SPECIAL), np.sort(SPECIAL))
    check(tnp.argsort(SPECIAL), np.argsort(SPECIAL, stable=True).astype(np.int32))
    check(tg.asarray(SPECIAL).sort(), np.sort(SPECIAL))
    check(tg.asarray(SPECIAL).argsort(), np.argsort(SPECIAL, stable=True).astype(np.int32))


def test_descending_keeps_equal_elements_in_order() -> None:
    a = np.array([1, 3, 1, 2, 3], np.int32)
    check(tnp.argsort(a, descending=True), np.array([1, 4, 3, 0, 2], np.int32))
    check(tnp.sort(a, descending=True), np.array([3, 3, 2, 1, 1], np.int32))
    check(tnp.sort(SPECIAL, descending=True), np.sort(SPECIAL)[::-1])


@pytest.mark.x64
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int8, np.bool_, np.float16, np.int64, np.uint32])
def test_sort_dtypes(dtype: type) -> None:
    a = (np.array([[5, 250, 3, 3, 0, 7, 128], [1, 1, 0, 2, 200, 9, 4]]) % (2 if dtype == np.bool_ else 251))
    a = a.astype(dtype) if dtype != np.int8 else (a - 100).astype(np.int8)
    check(tnp.sort(a), np.sort(a))
    check(tnp.argsort(a), np.argsort(a, stable=True))   # int64 indices in x64, as JAX's default integer


def test_sort_edge_shapes() -> None:
    for shape in [(0,), (3, 0), (0, 4), (1,), (5, 1)]:
        a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)[::-1] if shape else np.float32(1)
        check(tnp.sort(a), np.sort(a))
        check(tnp.argsort(a), np.argsort(a).astype(np.int32))
    with pytest.raises(np.exceptions.AxisError):
        tnp.sort(tnp.ones(()))
    with pytest.raises(np.exceptions.AxisError):
        tnp.argsort(tnp.ones((2, 3)), axis=2)


def test_sort_kernel_count() -> None:
    x = tg.asarray(np.random.default_rng(1).standard_normal((8, 33)).astype(np.float32)).realize()
    tg.counters.reset()
    tnp.sort(x).numpy()
    assert tg.counters.kernel_count == 2
    tg.counters.reset()
    tnp.argsort(x, axis=0).numpy()
    assert tg.counters.kernel_count == 2


def test_an_eager_network_sort_traces_its_loop_once_per_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    # the network's body is a cached traced function: a second eager sort of the same shape replays its schedule
    # (building the loop again cost 1.7 ms of Python a call for 10,000 floats)
    loops = []
    fori_loop = tg.lax.fori_loop
    monkeypatch.setattr(tg.lax, "fori_loop", lambda *a, **k: (loops.append(1), fori_loop(*a, **k))[1])
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(1500).astype(np.float32) for _ in range(3)]
    for x in xs:
        np.testing.assert_array_equal(tnp.sort(tg.asarray(x)).numpy(), np.sort(x))
        np.testing.assert_array_equal(tnp.argsort(tg.asarray(x)).numpy(), np.argsort(x, kind="stable"))
    assert len(loops) == 1


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_long_rows_sort_by_the_network_stably(dtype: type) -> None:
    from tgfx.numpy._sort import _use_network
    n = 1500   # not a power of two: the padding sorts last
    assert _use_network(n) and not _use_network(64)
    rng = np.random.default_rng(2)
    a = (rng.integers(0, 40, (2, n)) if dtype != np.float32 else rng.standard_normal((2, n))).astype(dtype)
    if dtype == np.float32:
        a[0, ::7] = np.nan
        a[1, ::5] = 0.25   # ties keep their order
    check(tnp.argsort(a), np.argsort(a, kind="stable").astype(np.int32))
    check(tnp.sort(a), np.sort(a))
    check(tnp.argsort(a, axis=0), np.argsort(a, axis=0, kind="stable").astype(np.int32))   # short columns: ranks
    check(tnp.argsort(a, descending=True), np.flip(n - 1 - np.argsort(np.flip(a, -1), kind="stable"), -1)
          .astype(np.int32))


def test_network_sort_compiles_its_pass_once() -> None:
    # 2048 elements take 66 passes; the pass is one step of a device loop, compiled once
    x = tg.asarray(np.random.default_rng(3).standard_normal(2048).astype(np.float32)).realize()
    tnp.argsort(x).numpy()
    tg.counters.reset()
    got = tnp.argsort(x * 2.0).numpy()
    assert tg.counters.compile_count <= 1     # at most the new `x * 2.0`
    np.testing.assert_array_equal(got, np.argsort(x.numpy(), kind="stable"))


def test_gather_reads_one_element_per_output_not_the_axis(monkeypatch) -> None:
    # x[idx] over a 100,003-long axis (a shape no other test uses, so it compiles here): one kernel, whose cost
    # (FLOPs counted by the compiler) does not grow with the axis
    import tgfx.lowering as lowering
    seen, real = [], lowering.kernel_source
    monkeypatch.setattr(lowering, "kernel_source", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    x = tg.asarray(np.arange(200_006, dtype=np.float32).reshape(100_003, 2)).realize()
    got = x[tg.asarray(np.array([5, 100_002, 0, -1, 123], np.int32))].numpy()
    np.testing.assert_array_equal(got, x.numpy()[[5, 100_002, 0, -1, 123]])
    assert len(seen) == 1 and seen[0].flops < 1000, [(s.name, s.flops) for s in seen]


@settings(max_examples=40)
@given(hnp.arrays(st.sampled_from([np.float32, np.int32, np.int16]),
                  hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=7),
                  elements=st.integers(-4, 4)),
       st.integers(-3, 2), st.booleans())
def test_sort_hypothesis(a: np.ndarray, axis: int, with_nan: bool) -> None:
    axis = axis % a.ndim
    if with_nan and a.dtype == np.float32 and a.size:
        a = a.copy()
        a.flat[::3] = np.nan
    check(tnp.sort(a, axis=axis), np.sort(a, axis=axis))
    check(tnp.argsort(a, axis=axis), np.argsort(a, axis=axis, stable=True).astype(np.int32))


# ---- einsum and tensordot ----
rng = np.random.default_rng(2)
M34, M45, M52 = (rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4, 5), (5, 2)])
EINSUM_CASES = [
    ("ij,jk->ik", (M34, M45)),
    ("ij,jk", (M34, M45)),
    ("ij,jk,kl->il", (M34, M45, M52)),
    ("ij,jk,kl", (M34, M45, M52)),
    ("ii->i", (M45[:4, :4],)),
    ("ii", (M45[:4, :4],)),
    ("iji->j", (rng.standard_normal((3, 4, 3)).astype(np.float32),)),
    ("iii->i", (rng.standard_normal((3, 3, 3)).astype(np.float32),)),
    ("iij,jj", (rng.standard_normal((3, 3, 2)).astype(np.float32), M45[:2, :2])),
    ("ij->ji", (M34,)),
    ("ji", (M34,)),
    ("ij->", (M34,)),
    ("i,j->ij", (M34[0], M45[0])),
    ("i,i", (M34[0], M34[1])),
    ("ij,ij->i", (M34, M34)),
    ("bij,bjk->bik", (rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((2, 4, 5)).astype(
        np.float32))),
    ("...ij,...jk", (rng.standard_normal((2, 3, 4)).astype(np.float32), M45)),
    ("i...,i->...", (rng.standard_normal((3, 2, 2)).astype(np.float32), M34[:, 0])),
    ("...,...", (M34, M34[0])),
    ("ij,jk", (M34[:, :1], M45[:1])),            # a size-1 label broadcasts
    ("", (np.float32(3),)),
    ("i,i", (np.zeros(0, np.float32), np.zeros(0, np.float32))),
    ("ij,jk->ik", (np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32))),
    ("Ab,bA", (M34, M34.T)),
]


@pytest.mark.parametrize("spec,ops", EINSUM_CASES, ids=[c[0] or "scalar" for c in EINSUM_CASES])
def test_einsum_matches_numpy(spec: str, ops: tuple) -> None:
    check(tnp.einsum(spec, *ops), np.einsum(spec, *ops), exact=False)
    check(tnp.einsum(spec, *ops, optimize=False), np.einsum(spec, *ops), exact=False)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.bool_, np.float16])
def test_einsum_dtypes(dtype: type) -> None:
    a = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    b = (np.arange(20).reshape(4, 5) % 2).astype(dtype)
    check(tnp.einsum("ij,jk->ik", a, b), np.einsum("ij,jk->ik", a, b), exact=dtype != np.float16)


def test_einsum_interleaved_and_mixed_promotion() -> None:
    check(tnp.einsum(M34, [0, 1], M45, [1, 2], [2, 0]), np.einsum(M34, [0, 1], M45, [1, 2], [2, 0]), exact=False)
    check(tnp.einsum(M34, [Ellipsis, 1], M34[0], [1]), np.einsum(M34, [Ellipsis, 1], M34[0], [1]), exact=False)
    out = tnp.einsum("ij,j", np.ones((2, 3), np.int32), np.ones(3, np.float32))
    assert out.dtype == tg.dtypes.float32


def test_einsum_zero_dim_operands() -> None:
    check(tnp.einsum("", tnp.full((), 3.0)), np.float32(np.einsum("", 3.0)))
    check(tnp.einsum(",ij->ji", tnp.full((), 3.0), M34), np.einsum(",ij->ji", np.float32(3), M34), exact=False)
    check(tnp.einsum("i,", M34[0], tnp.full((), 3.0)), np.einsum("i,", M34[0], np.float32(3)), exact=False)


def test_einsum_sums_broadcast_axes_an_explicit_output_leaves_out() -> None:
    # as JAX's (and numpy's with optimize=True): 'i...,j...->ij' sums over the axes the ellipsis covers
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (4, 3), (5, 2, 3)))
    np.testing.assert_allclose(tnp.einsum("i...,j...->ij", x, y).numpy(), x @ y.T, rtol=1e-5)
    np.testing.assert_allclose(tnp.einsum("...i->i", z).numpy(), z.sum((0, 1)), rtol=1e-5)
    np.testing.assert_allclose(tnp.einsum("i...->i", z).numpy(), np.einsum("i...->i", z, optimize=True), rtol=1e-5)


def test_einsum_preferred_element_type() -> None:
    a = np.full((2, 40), 100, np.int8)
    out = tnp.einsum("ij,ij->i", a, a, preferred_element_type=tg.dtypes.int32)
    check(out, np.einsum("ij,ij->i", a.astype(np.int32), a.astype(np.int32)))


def test_einsum_kernel_counts() -> None:
    a, b, c = (tg.asarray(m).realize() for m in (M34, M45, M52))
    for ops, spec, kernels, opt in [((a, b), "ij,jk->ik", 1, "greedy"), ((a, b, c), "ij,jk,kl->il", 2, "greedy"),
                                    ((a, b, c), "ij,jk,kl->il", 1, False), ((b,), "ii->i", 1, "greedy")]:
        tg.counters.reset()
        tnp.einsum(spec, *(o[:4, :4] if spec == "ii->i" else o for o in ops), optimize=opt).numpy()
        assert tg.counters.kernel_count == kernels, spec


def test_einsum_errors() -> None:
    with pytest.raises(ValueError, match="operands given"):
        tnp.einsum("ij,jk", M34)
    with pytest.raises(ValueError, match="dimensions"):
        tnp.einsum("ijk", M34)
    with pytest.raises(ValueError, match="does not match"):
        tnp.einsum("ij,jk", M34, M34)
    with pytest.raises(ValueError, match="more than once"):
        tnp.einsum("ij->ii", M34)
    with pytest.raises(ValueError, match="never appears"):
        tnp.einsum("ij->k", M34)
    with pytest.raises(ValueError, match="don't match"):
        tnp.einsum("ii", M34)
    with pytest.raises(ValueError, match="letters"):
        tnp.einsum("i1", M34)


@settings(max_examples=40)
@given(st.data())
def test_einsum_hypothesis(data: st.DataObject) -> None:
    letters = "abcd"
    sizes = {c: data.draw(st.integers(0 if c == "d" else 1, 3)) for c in letters}
    n_ops = data.draw(st.integers(1, 3))
    # 0-d operands are covered by test_einsum_zero_dim_operands
    terms = [data.draw(st.lists(st.sampled_from(letters), min_size=1, max_size=3)) for _ in range(n_ops)]
    ops = [np.asarray(data.draw(hnp.arrays(np.float32, tuple(sizes[c] for c in t), elements=st.integers(-3, 3))))
           for t in terms]
    used = sorted(set("".join("".join(t) for t in terms)))
    out = data.draw(st.permutations(used).map(lambda p: p[:data.draw(st.integers(0, len(p)))]))
    spec = ",".join("".join(t) for t in terms) + "->" + "".join(out)
    check(tnp.einsum(spec, *ops), np.einsum(spec, *ops), exact=False)


@pytest.mark.parametrize("axes", [0, 1, 2, ([1, 0], [0, 1]), ([2], [0]), (-1, 0)])
def test_tensordot(axes: int | tuple) -> None:
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4, 5)).astype(np.float32) if axes != ([2], [0]) and axes != (-1, 0) else \
        rng.standard_normal((4, 3)).astype(np.float32)
    if axes == ([1, 0], [0, 1]):
        b = rng.standard_normal((3, 2, 5)).astype(np.float32)
    if axes == 1:
        b = rng.standard_normal((4, 5)).astype(np.float32)
    check(tnp.tensordot(a, b, axes), np.tensordot(a, b, axes), exact=False)


def test_tensordot_errors_and_kernels() -> None:
    with pytest.raises(ValueError, match="shape mismatch"):
        tnp.tensordot(M34, M34, 1)
    with pytest.raises(ValueError, match="axes"):
        tnp.tensordot(M34, M45, 3)
    a, b = tg.asarray(M34).realize(), tg.asarray(M45).realize()
    tg.counters.reset()
    tnp.tensordot(a, b, 1).numpy()
    assert tg.counters.kernel_count == 1
