"""Indexing against numpy: basic and integer-array gathers, take/take_along_axis, and `x.at[...]` scatters."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.ir.ops import Ops

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5) - 50


def check(got: tg.Tensor, want: np.ndarray, exact: bool = True) -> None:
    g = np.asarray(got)
    assert g.shape == want.shape, (g.shape, want.shape)
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    if exact:
        np.testing.assert_array_equal(g, want)
    else:
        np.testing.assert_allclose(g, want, rtol=1e-5, equal_nan=True)


# ---- gathers ----
GATHER_CASES = [
    ([1, 0],),
    ([[1], [0]],),
    (slice(None), [2, 0, 1, 2]),
    ([1, 0], [2, 2]),
    ([1, -1], slice(1, 3), [[3], [-4]]),           # separated arrays: broadcast axes go first
    (slice(None), 0, slice(None), [1, 2]),          # an int counts as advanced: not adjacent
    (slice(None), 0, [1, 2]),                       # adjacent: replaced in place
    (slice(None), [0], None, [1, 2]),               # None separates them
    (slice(None, None, -1), 0, Ellipsis, [1, 0], slice(None)),   # so does an Ellipsis standing for no axes
    ([0], 1),
    (Ellipsis, [1, 2], 0),
    (0, Ellipsis, [1]),
    (slice(None, None, -1), [[-1, 0]]),
    (slice(None, None, 2), slice(None), [0, 3], slice(4, 0, -3)),
    (None, [1], [[0, 1, 2]], None, 3),
    (np.array([1, 0, 1]), np.array([2, 1, 0]), np.array([3, 2, 1]), np.array([4, 3, 2])),
    ([],),
    (slice(None), np.zeros((2, 0), np.int64)),
    (np.array(1), slice(None), np.array([0, 3])),
]


@pytest.mark.parametrize("idx", GATHER_CASES, ids=[str(i) for i in range(len(GATHER_CASES))])
def test_gather_matches_numpy(idx: tuple) -> None:
    check(tg.asarray(A)[idx], A[idx])


@pytest.mark.parametrize("idx", [GATHER_CASES[3], GATHER_CASES[4], GATHER_CASES[6]])
def test_gather_with_tensor_indices(idx: tuple) -> None:
    tidx = tuple(tg.asarray(np.asarray(i, np.int32)) if isinstance(i, list) else i for i in idx)
    check(tg.asarray(A)[tidx], A[idx])


@pytest.mark.x64
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.int8, np.uint8, np.float16, np.int64])
def test_gather_dtypes(dtype: type) -> None:
    a = (A % 7).astype(dtype)
    check(tg.asarray(a)[[1, 0, 1], :, [3, -1, 0]], a[[1, 0, 1], :, [3, -1, 0]])


@pytest.mark.parametrize("idx_dtype", [np.int8, np.int16, np.int64, np.uint8, np.uint32])
def test_index_dtypes(idx_dtype: type) -> None:
    i = np.array([2, 0, 1], idx_dtype)
    check(tg.asarray(A)[:, tg.asarray(i)], A[:, i])


def test_gather_is_one_kernel() -> None:
    x = tg.asarray(np.random.default_rng(0).standard_normal((50, 8), dtype=np.float32)).realize()
    idx = tg.asarray(np.array([3, 7, 1, 49], np.int32)).realize()
    tg.counters.reset()
    out = x[idx, 2:].numpy()
    assert tg.counters.kernel_count == 1
    np.testing.assert_array_equal(out, np.asarray(x)[[3, 7, 1, 49], 2:])


def test_out_of_range_gather_clamps_like_jax() -> None:
    a = np.arange(5, dtype=np.float32)
    check(tg.asarray(a)[[7, -1, -9, 2]], a[[4, 4, 0, 2]])
    check(tg.asarray(a)[tg.asarray(np.array([100], np.int32))], a[[4]])


def test_gather_modes() -> None:
    a = np.arange(5, dtype=np.float32)
    x = tg.asarray(a)
    check(x.at[[7, -1, -9, 2]].get(mode="fill"), np.array([np.nan, 4, np.nan, 2], np.float32))
    check(x.at[[7, 1]].get(mode="fill", fill_value=-3), np.array([-3, 1], np.float32))
    check(x.at[[7, -6]].get(mode="wrap"), a[[2, 4]])
    check(x.at[[7, -6]].get(), a[[4, 0]])
    check(tg.asarray(a.astype(np.int32)).at[[9]].get(mode="fill"), np.array([-2**31], np.int32))
    check(x.at[9].get(mode="clip"), a[4])


def test_numpy_boolean_mask_is_concrete() -> None:
    m = np.array([[True, False, True], [False, False, True]])
    check(tg.asarray(A)[m], A[m])
    check(tg.asarray(A)[1, :, np.array([True, False, False, True])], A[1, :, np.array([True, False, False, True])])
    with pytest.raises(IndexError, match="boolean index did not match"):
        tg.asarray(A)[np.array([True, False, True])]
    for empty in (np.zeros((0,), bool), np.zeros((0, 3), bool), np.zeros((2, 0), bool)):   # matches any axis, as numpy
        check(tg.asarray(A)[empty], A[empty])


# scalar booleans in a tuple index: each indexes a new length-1 axis with [0] (True) or [] (False), as numpy's rules
# for index arrays place it (JAX gives numpy's results, but for a None before a boolean, where it drops data)
BOOL_CASES = [
    (0, True), (Ellipsis, False), (True, slice(1, None)), (0, True, 1), (True, True), (True, False), (np.True_, 0),
    (1, Ellipsis, True), ([0, 1], True), ([0, 1], True, [1, 2]), (True, [[0], [1]]), (slice(None), True, slice(0, 2)),
    (slice(None), slice(None), slice(None), slice(None), True), (True, Ellipsis), (False, 0), (True,), (None, True),
    ([0, 1], slice(None), True), (True, slice(None), [0, 2]), (0, slice(None), True), (True, slice(None), 0),
    (None, True, None), (True, None, 0), (np.array([True, False]), True), (Ellipsis, True, None), (np.array(True), 1),
    (None, Ellipsis, True, [3, 1]), (1, np.False_, slice(None, None, -1)), (None, Ellipsis, False, 1),
]


def test_scalar_boolean_with_an_empty_ellipsis_is_jaxs() -> None:
    # an Ellipsis standing for no axes does not separate a boolean from the int after it, as in JAX (numpy gives
    # (0, 2, 3, 5)); a None before a boolean puts its axis where numpy does (JAX 0.10 drops x[1] there)
    x = tg.asarray(A)
    assert x[::-1, ::-1, False, ..., 0, ::-1].shape == (2, 3, 0, 5)
    check(x[None, True], A[None, True])


@pytest.mark.parametrize("idx", BOOL_CASES, ids=repr)
def test_scalar_booleans_in_a_tuple_index(idx: tuple) -> None:
    x = tg.asarray(A)
    want = A[idx]
    check(x[idx], want)
    check(tg.jit(lambda v: v[idx])(x), want)
    check(x.at[idx].get(), want)
    for value in (np.float32(7), np.arange(want.size, dtype=np.float32).reshape(want.shape)):
        updated = A.copy()
        updated[idx] = value
        check(x.at[idx].set(value), updated)
    check(x.at[idx].add(1.0), A + (tnp.zeros(A.shape).at[idx].set(1.0)).numpy())
    check(x.at[idx].get(wrap_negative_indices=False), want)


def test_scalar_boolean_index_errors() -> None:
    x = tg.asarray(A)
    with pytest.raises(IndexError, match="broadcast"):   # [] and [0, 1] do not broadcast, as numpy says
        x[0, [0, 1], False]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0, 0, 0, True]
    with pytest.raises(tg.ConcretizationError):   # a traced 0-d boolean has no value to shape the result by
        tg.jit(lambda v, b: v[0, b])(x, tg.asarray(True))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.booleans(), st.integers(-2, 1), st.none(), st.just(slice(None, None, -1)),
                          st.just(slice(1, None)), st.just([1, 0])), max_size=5),
       st.sampled_from(["start", "end", None]))
def test_scalar_booleans_match_numpy(items: list, ellipsis: str | None) -> None:
    """Booleans among ints, slices, None, an Ellipsis and an index array: numpy's shape and values. (An Ellipsis
    that stands for no axes between a boolean and another advanced index separates them in numpy, not in JAX, whose
    answer tgfx gives: `x[:, :, False, ..., 0, :]` of a 4-d x is (2, 3, 0, 5), numpy's (0, 2, 3, 5).)"""
    idx = tuple([Ellipsis] * (ellipsis == "start") + items + [Ellipsis] * (ellipsis == "end"))
    try:
        want = A[idx]
    except IndexError:
        with pytest.raises(IndexError):
            tg.asarray(A)[idx]
        return
    check(tg.asarray(A)[idx], want)


def test_index_errors() -> None:
    x = tg.asarray(A)
    mask = np.array([True, False])
    check(x[tg.asarray(mask)], A[mask])  # a concrete boolean Tensor is read, as JAX reads it eagerly
    with pytest.raises(tg.ConcretizationError, match="where"):  # a traced one has no value to read
        tg.jit(lambda v, m: v[m])(x, tg.asarray(mask))
    with pytest.raises(IndexError, match="integer type"):
        x[np.array([0.5])]
    check(x[:, 3], A[:, 2])           # a static int out of range is clamped into its axis, as JAX reads it
    check(x[[0, 1], 3], A[[0, 1], 2])
    with pytest.raises(IndexError, match="broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0, 0, [0]]
    with pytest.raises(IndexError, match="size 0"):
        tg.asarray(np.zeros((0, 3), np.float32))[[0]]


def test_zero_size() -> None:
    z = np.zeros((0, 3), np.float32)
    check(tg.asarray(z)[:, [2, 0]], z[:, [2, 0]])
    check(tg.asarray(A)[np.zeros((0,), np.int32)], A[np.zeros((0,), np.int32)])


def test_basic_indexing_still_views() -> None:
    for idx in [(1,), (slice(None), -1), (Ellipsis, slice(None, None, -2)), (None, 0, slice(1, None, 2)), ()]:
        check(tg.asarray(A)[idx], A[idx])


@st.composite
def gather_case(draw: st.DrawFn) -> tuple[np.ndarray, tuple]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    dtype = draw(st.sampled_from([np.float32, np.int32, np.bool_]))
    a = (np.arange(int(np.prod(shape))).reshape(shape) * 7 % 11).astype(dtype)
    bshape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    idx = []
    for n in shape:
        kind = draw(st.sampled_from(["array", "slice", "int", "array"]))
        if kind == "array":
            idx.append(np.asarray(draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(bshape)),
                                                max_size=int(np.prod(bshape))))).reshape(bshape).astype(np.int32))
        elif kind == "int":
            idx.append(draw(st.integers(-n, n - 1)))
        else:
            idx.append(slice(draw(st.integers(-n, n)), None, draw(st.sampled_from([1, 2, -1]))))
    return a, tuple(idx)


@settings(max_examples=60)
@given(gather_case())
def test_gather_hypothesis(case: tuple[np.ndarray, tuple]) -> None:
    a, idx = case
    check(tg.asarray(a)[idx], a[idx])


# ---- take and take_along_axis ----
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take(axis: int | None) -> None:
    a = A[0]
    idx = np.array([[0, 2], [-1, 1]])
    check(tnp.take(a, idx, axis=axis), np.take(a, idx, axis=axis))
    check(tg.asarray(a).take(idx, axis=axis), np.take(a, idx, axis=axis))
    check(tnp.take(a, 1, axis=axis), np.take(a, 1, axis=axis))


def test_take_out_of_range_modes() -> None:
    a = np.arange(4, dtype=np.float32)
    check(tnp.take(a, [5, 1]), np.array([np.nan, 1], np.float32))
    check(tnp.take(a, [5, -7], mode="clip"), np.take(a, [5, -7], mode="clip"))
    # "clip" clamps a negative index to 0 (np.take's and jnp.take's rule; indexing counts it from the end first),
    # for host indices and computed ones alike
    check(tnp.take(a, [-1, 2], mode="clip"), np.take(a, [-1, 2], mode="clip"))
    check(tnp.take(a, tnp.asarray([-1, 2]) * 1, mode="clip"), np.take(a, [-1, 2], mode="clip"))
    check(tg.asarray(a).at[np.array([-1, 2])].get(mode="clip"), a[[-1, 2]])
    check(tnp.take(a, [5, -7], mode="wrap"), np.take(a, [5, -7], mode="wrap"))
    check(tnp.take(a.astype(np.uint8), [5], mode="fill"), np.array([255], np.uint8))
    with pytest.raises(ValueError, match="mode"):
        tnp.take(a, [0], mode="bogus")
    # numpy's "raise" (np.take(tensor, ...) passes it) checks indices known on the host
    check(np.take(a, [-1, 0], axis=0), np.asarray(a)[[-1, 0]])
    with pytest.raises(IndexError, match="out of bounds"):
        tnp.take(a, [0, 99], mode="raise")


def test_indices_from_host_data_skip_normalization_only_where_it_changes_nothing() -> None:
    # an index array from host data knows its range: in range it is used as it is (no ops), otherwise normalized
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    for idx in ([0, 3, 1], [-1, 2], [4, 1], [[-4, 3], [0, 0]]):
        i = np.array(idx)
        inside = np.take(a, np.clip(np.where(i < 0, i + 4, i), 0, 3), axis=0)
        fill = np.where(((i < -4) | (i > 3))[..., None], np.nan, inside).astype(np.float32)
        check(tnp.take(a, i, axis=0, mode="fill"), fill)
        check(tnp.take(a, i, axis=0, mode="wrap"), np.take(a, i, axis=0, mode="wrap"))
        check(tg.asarray(a).at[i].get(mode="clip"), a[np.clip(np.where(i < 0, i + 4, i), 0, 3)])
    from tgfx.ir.ops import Ops
    ops = {u.op for u in tg.asarray(a).at[np.array([3, 0])].get(mode="clip").uop.toposort()}
    assert not ops & {Ops.CMPLT, Ops.MAX}, ops   # no wrap of negative indices, no clamp


@pytest.mark.parametrize("axis", [0, 1, 2, -1, None])
def test_take_along_axis(axis: int | None) -> None:
    a = A[1]
    rng = np.random.default_rng(abs(axis or 7))
    if axis is None:
        idx = rng.integers(-a.size, a.size, 6)
    else:
        shape = list(a.shape)
        shape[axis] = 3
        idx = rng.integers(-a.shape[axis], a.shape[axis], shape)
    check(tnp.take_along_axis(a, idx, axis), np.take_along_axis(a, idx, axis))


def test_take_along_axis_with_argsort_and_broadcast() -> None:
    a = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    idx = np.argsort(a, axis=1)
    check(tnp.take_along_axis(a, idx, 1), np.take_along_axis(a, idx, 1))
    b = np.array([[0, 4]])  # broadcasts along axis 0
    check(tnp.take_along_axis(a, b, 1), np.take_along_axis(a, np.broadcast_to(b, (3, 2)), 1))
    check(tnp.take_along_axis(a, [[7]], 1), np.full((3, 1), np.nan, np.float32))
    # axis defaults to the last, as numpy 2.3's and the array API standard's (it was a required argument)
    check(tnp.take_along_axis(a, idx), np.take_along_axis(a, idx))
    check(tnp.take_along_axis(a, idx[:, :2]), np.take_along_axis(a, idx[:, :2], axis=-1))
    with pytest.raises(ValueError, match="same number of dimensions"):
        tnp.take_along_axis(a, [0, 1], 1)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_, np.complex64])
def test_take_along_an_empty_axis_is_zeros(dtype: type) -> None:
    """As jnp.take_along_axis: nothing to take, so zeros (not the fill value), whatever the mode; jnp.take raises."""
    x = np.zeros((3, 0), dtype)
    idx = np.array([[0], [1], [-1]])
    for mode in (None, "fill", "clip", "wrap"):
        check(tnp.take_along_axis(x, idx, axis=1, mode=mode), np.zeros((3, 1), dtype))
    check(tnp.take_along_axis(x, idx, axis=1, mode="fill", fill_value=7), np.zeros((3, 1), dtype))
    check(tg.jit(lambda a, i: tnp.take_along_axis(a, i, axis=1))(tg.asarray(x), tg.asarray(idx)), np.zeros((3, 1),
                                                                                                             dtype))
    check(tnp.take_along_axis(np.zeros((0, 2), dtype), np.array([1, 5]), axis=None), np.zeros(2, dtype))
    check(tnp.take_along_axis(np.zeros((2, 0), dtype), np.zeros((1, 0), np.int32), axis=0), np.zeros((1, 0), dtype))
    for mode in (None, "fill", "clip", "wrap"):
        with pytest.raises(IndexError, match="size 0"):
            tnp.take(x, np.array([0, 2]), axis=1, mode=mode)
    check(tnp.take(x, np.zeros(0, np.int32), axis=1), np.zeros((3, 0), dtype))


# ---- scatters: x.at[...] ----
def np_scatter(a: np.ndarray, idx: tuple, v: np.ndarray | float, op: str) -> np.ndarray:
    out = a.copy()
    v = np.asarray(v).astype(a.dtype)
    if op == "set":
        out[idx] = v
    else:
        {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}[op].at(out, idx, v)
    return out


OPS = ["set", "add", "multiply", "min", "max"]


@pytest.mark.parametrize("op", OPS)
def test_scatter_repeated_indices(op: str) -> None:
    a = np.arange(6, dtype=np.float32) - 2
    idx = (np.array([1, 3, 1, 1, -1]),)
    v = np.array([5, -2, 7, 0.5, 9], np.float32)
    out = getattr(tg.asarray(a).at[idx], op)(v)
    check(out, np_scatter(a, idx, v, op))
    check(tg.asarray(a), a)  # the input is unchanged


def test_scatter_set_last_wins() -> None:
    a = np.zeros((3, 2), np.int32)
    idx = np.array([[2, 0], [2, 2]])
    out = tg.asarray(a).at[idx].set(np.arange(8, dtype=np.int32).reshape(2, 2, 2))
    check(out, np.array([[2, 3], [0, 0], [6, 7]], np.int32))


@pytest.mark.parametrize("op", OPS)
def test_scatter_out_of_range_dropped(op: str) -> None:
    a = np.arange(5, dtype=np.float32)
    v = np.array([10, 20, 30, 40], np.float32)
    out = getattr(tg.asarray(a).at[[7, -1, -6, 2]], op)(v)
    keep = (np.array([-1, 2]),)
    check(out, np_scatter(a, keep, v[[1, 3]], op))
    check(getattr(tg.asarray(a).at[7], op)(1.0), a)  # a scalar int out of range drops everything
    check(tg.asarray(a).at[[7, -9]].set(-1.0, mode="clip"), np.array([-1, 1, 2, 3, -1], np.float32))


SCATTER_CASES = [
    (slice(1, 3),),
    (slice(None, None, -2), 1),
    (Ellipsis, slice(0, None, 3)),
    (1, [0, 2, 0]),
    ([1, 0], slice(None), [3, 3]),
    (slice(None), [[0], [2]], None, [1, -1]),
    (0, slice(None, None, 2), [-1, 0], 4),
    (np.array([[1, 1], [0, 1]]),),
    (np.array(1), slice(None), np.array(-1)),     # 0-d index arrays: every update lands on one known row
]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("idx", SCATTER_CASES, ids=[str(i) for i in range(len(SCATTER_CASES))])
def test_scatter_index_kinds(idx: tuple, op: str) -> None:
    a = (A % 13).astype(np.int32)
    shape = a[idx].shape
    v = (np.arange(int(np.prod(shape))).reshape(shape) % 5 - 2).astype(np.int32)
    check(getattr(tg.asarray(a).at[idx], op)(v), np_scatter(a, idx, v, op))
    check(getattr(tg.asarray(a).at[idx], op)(3), np_scatter(a, idx, 3, op))  # a broadcast scalar


@pytest.mark.parametrize("dtype", [np.float32, np.bool_, np.int8, np.uint8, np.float16])
@pytest.mark.parametrize("op", OPS)
def test_scatter_dtypes(dtype: type, op: str) -> None:
    a = (A[0, ..., 0] % 3).astype(dtype)
    idx = (np.array([2, 0, 2]), slice(1, None))
    v = (np.arange(9).reshape(3, 3) % 4).astype(dtype)
    check(getattr(tg.asarray(a).at[idx], op)(v), np_scatter(a, idx, v, op))


def test_scatter_nan_and_subtract() -> None:
    a = np.array([1, 2, 3], np.float32)
    check(tg.asarray(a).at[[0, 0]].max(np.array([np.nan, 5], np.float32)), np.array([np.nan, 2, 3], np.float32))
    check(tg.asarray(a).at[[2, 2]].subtract(1.5), np.array([1, 2, 0], np.float32))


def test_scatter_kernel_counts() -> None:
    x = tg.asarray(np.zeros((16, 4), np.float32)).realize()
    idx = tg.asarray(np.array([3, 1, 3], np.int32)).realize()
    v = tg.asarray(np.ones((3, 4), np.float32)).realize()
    for op, kernels in [("add", 1), ("max", 1), ("set", 2)]:
        tg.counters.reset()
        getattr(x.at[idx], op)(v).numpy()
        assert tg.counters.kernel_count == kernels, op
    tg.counters.reset()
    x.at[2:10:3, 1].set(5.0).numpy()
    assert tg.counters.kernel_count == 1


def test_scatter_errors_and_empty() -> None:
    x = tg.asarray(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match="cannot broadcast updates"):
        x.at[[0, 1]].set(np.ones((3, 4), np.float32))
    mask = np.array([True, False, True])
    want = np.broadcast_to(np.where(mask[:, None], 1.0, 0.0), (3, 4)).astype(np.float32)
    check(x.at[tg.asarray(mask)].set(1.0), want)
    with pytest.raises(tg.ConcretizationError, match="where"):
        tg.jit(lambda v, m: v.at[m].set(1.0))(x, tg.asarray(mask))
    with pytest.raises(ValueError, match="mode"):
        x.at[0].set(1.0, mode="wrap")
    check(x.at[tg.asarray([0, 7])].add(1.0, mode="fill"), x.at[tg.asarray([0, 7])].add(1.0, mode="drop").numpy())
    check(x.at[[]].add(1.0), np.zeros((3, 4), np.float32))
    check(x.at[:, 2:2].set(1.0), np.zeros((3, 4), np.float32))


@st.composite
def scatter_case(draw: st.DrawFn) -> tuple[np.ndarray, tuple, np.ndarray, str]:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    dtype = draw(st.sampled_from([np.float32, np.int32, np.int16]))
    a = (np.arange(int(np.prod(shape))).reshape(shape) * 5 % 9 - 4).astype(dtype)
    nb = draw(st.integers(0, 4))
    idx = []
    for n in shape:
        kind = draw(st.sampled_from(["array", "slice", "int"]))
        if kind == "array":
            idx.append(np.asarray(draw(st.lists(st.integers(-n, n - 1), min_size=nb, max_size=nb)), np.int32))
        elif kind == "int":
            idx.append(draw(st.integers(-n, n - 1)))
        else:
            idx.append(slice(draw(st.integers(-n, n)), None, draw(st.sampled_from([1, 2, -1]))))
    idx = tuple(idx)
    sub = a[idx].shape
    v = (np.arange(int(np.prod(sub))).reshape(sub) % 7 - 3).astype(dtype)
    return a, idx, v, draw(st.sampled_from(OPS))


@settings(max_examples=60)
@given(scatter_case())
def test_scatter_hypothesis(case: tuple[np.ndarray, tuple, np.ndarray, str]) -> None:
    a, idx, v, op = case
    check(getattr(tg.asarray(a).at[idx], op)(v), np_scatter(a, idx, v, op))


def test_gradients_flow_through_gather_and_scatter() -> None:
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    idx = np.array([2, 0, 2])
    want = np.zeros_like(a)
    np.add.at(want, idx, 3.0)
    check(tg.grad(lambda x: (x[idx] * 3.0).sum())(tg.asarray(a)), want)
    # set overwrites: no gradient reaches the overwritten rows; add passes it through
    g = tg.grad(lambda x: (x.at[[1, 3]].set(7.0) + x.at[0].add(1.0)).sum())(tg.asarray(a))
    check(g, np.array([[2, 2], [1, 1], [2, 2], [1, 1]], np.float32))


@pytest.mark.parametrize("op", ["max", "min"])
def test_scatter_min_max_gradient_shares_ties_equally(op: str) -> None:
    # JAX's rule: at each position the values equal to the result, x's and those of the updates landing there, share
    # its cotangent equally (x tied with three updates: 1/4 each, not 1/2, 1/4, 1/4 ... ); a position no update
    # reaches passes it to x whole, a dropped update gets nothing. Under jit, vmap and jvp (its transpose) too
    sign = 1.0 if op == "max" else -1.0
    x = np.array([1.0, 2.0, 3.0, -np.inf, 5.0], np.float32) * sign
    y = np.array([1.0, 1.0, 1.0, 3.0, 9.0, -np.inf, 2.0], np.float32) * sign
    idx = np.array([0, 0, 0, 2, 1, 3, 7])       # x[3] = -inf ties with y[5]; index 7 is out of range, dropped
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)

    def f(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
        return (getattr(a.at[idx], op)(b) * w).sum()

    want_x, want_y = [0.25, 0.0, 1.5, 2.0, 5.0], [0.25, 0.25, 0.25, 1.5, 2.0, 2.0, 0.0]
    for grad in (tg.grad(f, argnums=(0, 1)), tg.jit(tg.grad(f, argnums=(0, 1)))):
        gx, gy = grad(tg.asarray(x), tg.asarray(y))
        check(gx, np.array(want_x, np.float32))
        check(gy, np.array(want_y, np.float32))
    _, t = tg.jvp(lambda a, b: getattr(a.at[idx], op)(b), (tg.asarray(x), tg.asarray(y)),
                  (tg.asarray(np.ones(5, np.float32)), tg.asarray(np.full(7, 4.0, np.float32))))
    check(t, np.array([(1 + 3 * 4) / 4, 4.0, 2.5, 2.5, 1.0], np.float32))
    # per example under vmap, each row with its own index: three tied values get a third each
    xs, ys = np.array([[2.0, 0.0], [0.0, 2.0]], np.float32) * sign, np.full((2, 2), 2.0, np.float32) * sign
    gx, gy = tg.vmap(tg.grad(lambda a, b, i: getattr(a.at[i], op)(b).sum(), argnums=(0, 1)))(
        tg.asarray(xs), tg.asarray(ys), tg.asarray(np.array([[0, 0], [1, 1]], np.int32)))
    check(gx, np.array([[1 / 3, 1.0], [1.0, 1 / 3]], np.float32))
    check(gy, np.full((2, 2), 1 / 3, np.float32))


def test_scatter_zero_dim() -> None:
    x = tnp.full((), 2.0)
    check(x.at[()].add(1.0), np.float32(3))
    check(x.at[...].set(5.0), np.float32(5))


# ---- traced and 0-d Tensor indices clamp as in JAX; Python ints stay static and raise ----
def jax_clamped(i: int, n: int) -> int:
    """JAX's rule for a gather index: a negative one counts from the end, then it is clamped into [0, n-1]."""
    return min(max(i + n if i < 0 else i, 0), n - 1)


IDX = [7, 5, 4, -1, -5, -6, -100, 2]


@pytest.mark.parametrize("i", IDX)
def test_traced_index_clamps_under_jit(i: int) -> None:
    a = np.arange(5, dtype=np.float32)
    got = tg.jit(lambda x, k: x[k])(tg.asarray(a), tg.asarray(np.int32(i)))
    check(got, a[jax_clamped(i, 5)])
    b = A[0]   # (3, 4, 5): a traced index on a middle axis, next to slices
    got = tg.jit(lambda x, k: x[1:, k, ::2])(tg.asarray(b), tg.asarray(np.int32(i)))
    check(got, b[1:, jax_clamped(i, 4), ::2])


@pytest.mark.parametrize("i", IDX)
def test_eager_zero_d_tensor_index_clamps(i: int) -> None:
    a = np.arange(5, dtype=np.float32)
    for dt in (np.int32, np.int64, np.int8):
        check(tg.asarray(a)[tg.asarray(dt(i))], a[jax_clamped(i, 5)])
    b = A[1, 0]   # (4, 5)
    k = tg.asarray(np.int32(i))
    check(tg.asarray(b)[k, k], b[jax_clamped(i, 4), jax_clamped(i, 5)])
    check(tg.asarray(b)[..., k], b[..., jax_clamped(i, 5)])


def test_unsigned_zero_d_index_clamps() -> None:
    a = np.arange(5, dtype=np.float32)
    check(tg.asarray(a)[tg.asarray(np.uint8(200))], a[4])
    check(tg.asarray(a)[tg.asarray(np.uint32(3))], a[3])


def test_fori_loop_reading_past_the_end_clamps() -> None:
    a = np.arange(5, dtype=np.float32) ** 2
    x = tg.asarray(a)
    # the last step reads x[5]: JAX clamps it to x[4]
    total = tg.lax.fori_loop(0, 5, lambda i, acc: acc + x[i + 1], tg.asarray(np.float32(0)))
    check(total, np.float32(a[1:].sum() + a[4]))
    diffs = tg.lax.fori_loop(0, 5, lambda i, d: d.at[i].set(x[i + 1] - x[i]), tnp.zeros(5))
    check(diffs, np.array([1, 3, 5, 7, 0], np.float32))
    rows = tg.asarray(A[0, 0])   # (4, 5): rows 0..5, the last two clamped to row 3
    check(tg.lax.fori_loop(0, 6, lambda i, acc: acc + rows[i], tnp.zeros(5)), A[0, 0].sum(0) + 2 * A[0, 0, 3])


def test_fori_loop_with_traced_bounds_clamps_under_jit() -> None:
    a = np.arange(5, dtype=np.float32)
    f = tg.jit(lambda x, n: tg.lax.fori_loop(0, n, lambda i, acc: acc + x[i], tg.asarray(np.float32(0))))
    check(f(tg.asarray(a), tg.asarray(np.int32(8))), np.float32(a.sum() + 3 * a[4]))
    check(f(tg.asarray(a), tg.asarray(np.int32(3))), np.float32(a[:3].sum()))


def test_traced_scatter_out_of_range_is_dropped() -> None:
    a = np.arange(5, dtype=np.float32)
    set_at = tg.jit(lambda x, k: x.at[k].set(100.0))
    add_at = tg.jit(lambda x, k: x.at[k].add(100.0))
    for i in IDX:
        j = i + 5 if i < 0 else i
        want_set, want_add = a.copy(), a.copy()
        if 0 <= j < 5:   # JAX's scatter drops what stays out of range after negative indices count from the end
            want_set[j] = 100.0
            want_add[j] += 100.0
        check(set_at(tg.asarray(a), tg.asarray(np.int32(i))), want_set)
        check(add_at(tg.asarray(a), tg.asarray(np.int32(i))), want_add)
        check(tg.asarray(a).at[tg.asarray(np.int32(i))].set(100.0), want_set)   # eager: the same


def test_fori_loop_fibonacci_drops_the_write_past_the_end() -> None:
    n = 10
    fib = tg.jit(lambda v: tg.lax.fori_loop(2, n + 1, lambda i, x: x.at[i].set(x[i - 1] + x[i - 2]), v))
    start = tnp.zeros(n, dtype=tg.dtypes.int32).at[1].set(1)
    check(fib(start), np.array([0, 1, 1, 2, 3, 5, 8, 13, 21, 34], np.int32))


def test_vmap_over_indices_clamps() -> None:
    a = np.arange(5, dtype=np.float32)
    x = tg.asarray(a)
    idx = np.array(IDX, np.int32)
    check(tg.vmap(lambda k: x[k])(tg.asarray(idx)), a[[jax_clamped(int(i), 5) for i in idx]])
    rows = np.zeros((len(IDX), 5), np.float32)
    got = tg.vmap(lambda r, k: r.at[k].set(1.0))(tg.asarray(rows), tg.asarray(idx))
    want = rows.copy()
    for r, i in enumerate(idx):
        if -5 <= i < 5:
            want[r, i] = 1.0
    check(got, want)


def test_static_python_int_out_of_range_clamps_as_in_jax() -> None:
    """JAX reads `x[7]` of 5 elements as x[4] and `x[-6]` as x[0] (jax 0.10.2: 4.0 and 0.0 below), eagerly, under
    jit and in a loop body alike; JAX's examples/control.py reads `spec.Q[T + 1]` of T + 1 entries so. Writes at
    such an int are dropped (`x.at[7].set(v)` is x). An empty axis has no element to clamp to: that still raises."""
    x = tg.asarray(np.arange(5, dtype=np.float32))
    assert float(x[7]) == 4.0 and float(x[np.int64(-6)]) == 0.0
    check(tg.asarray(A)[0, 9], A[0, 2])
    check(tg.asarray(A)[1, -40, 1:], A[1, 0, 1:])
    assert float(tg.jit(lambda v: v[5])(x)) == 4.0   # static under jit too: the int is part of the program
    assert float(tg.lax.fori_loop(0, 2, lambda i, acc: acc + x[5], tg.asarray(np.float32(0)))) == 8.0
    assert float(x.at[7].get()) == 4.0
    check(x.at[7].set(100.0), np.arange(5, dtype=np.float32))
    check(x.at[-6].add(1.0), np.arange(5, dtype=np.float32))
    with pytest.raises(IndexError, match="index 0 is out of bounds for axis 0 with size 0"):
        tg.asarray(np.zeros((0, 3), np.float32))[0]


def test_iteration_gives_the_rows_and_unpacks_like_a_jax_array():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    rows = list(tg.asarray(x))
    assert len(rows) == 3 and all(r.shape == (4,) for r in rows)
    for got, want in zip(rows, x, strict=True):
        np.testing.assert_array_equal(got.numpy(), want)
    key, sub = tg.random.split(tg.random.key(0))
    np.testing.assert_array_equal(np.stack([key.numpy(), sub.numpy()]), tg.random.split(tg.random.key(0)).numpy())
    with pytest.raises(TypeError, match="0-d"):
        iter(tg.asarray(np.float32(1)))


def test_rows_of_a_computed_buffer_are_its_memory_without_a_kernel():
    """A row (or a leading-axis slice) of a computed buffer is a range of its memory: iterating, `x[3]`, `x[2:5]`
    compute nothing, and a jitted call taking one replays its program directly (no trace, no copy kernel)."""
    from tgfx.lowering.execute import buffer_memory
    a = np.arange(40, dtype=np.float32).reshape(10, 4)
    x = tg.device_put(a, "CPU").realize()     # host memory (on a GPU a row is a copy: its kernels assume alignment)
    base = buffer_memory(x.uop if x.uop.op is Ops.BUFFER else x.uop.src[0], allocate=False)
    tg.counters.reset()
    rows = list(x)
    picked, block = x[3].realize(), x[2:5].realize()
    assert tg.counters.kernel_count == 0 and tg.counters.copy_count == 0 and tg.counters.schedule_count == 0
    for got, want in [*zip(rows, a, strict=True), (picked, a[3]), (block, a[2:5])]:
        np.testing.assert_array_equal(got.numpy(), want)
    assert buffer_memory(rows[3].uop, allocate=False).ptr == base.ptr + 3 * 4 * 4
    f = tg.jit(lambda r: r * 2)
    f(rows[0])
    tg.counters.reset()
    for r, want in zip(x, a, strict=True):   # fresh rows each call: the fast replay path takes them
        np.testing.assert_array_equal(f(r).numpy(), want * 2)
    assert tg.counters.kernel_count == 10 and f.trace_count == 1
    bump = tg.jit(lambda r: r + 1, donate_argnums=0)   # donating a row writes into a copy: the rest is intact
    np.testing.assert_array_equal(bump(rows[1]).numpy(), a[1] + 1)
    np.testing.assert_array_equal(x.numpy(), a)


def test_a_row_keeps_its_values_while_a_jitted_loop_recycles_results():
    """A jit replay takes back the memory of its results of two calls before when nothing holds them: a row of one
    (a view of its memory) holds it, so the row keeps its values while the loop goes on."""
    f = tg.jit(lambda k: k * 2 + 1)
    x = tg.asarray(np.ones((2, 4), np.float32))
    for _ in range(3):
        x = f(x)
    y = f(x)
    a, b = y
    del y, b
    for _ in range(4):
        x = f(x)
    np.testing.assert_array_equal(a.numpy(), np.full(4, 31, np.float32))
    key, sub = tg.random.split(tg.random.key(0))   # the JAX idiom, against the split's own rows
    np.testing.assert_array_equal(np.stack([key.numpy(), sub.numpy()]), tg.random.split(tg.random.key(0)).numpy())


# ---- JAX's .at[] methods and keywords (found by a differential fuzz against jax) ----
def F(v: object) -> np.ndarray:
    return np.asarray(v, np.float32)


def test_at_divide_power_apply_and_jax_keywords() -> None:
    x = tg.asarray(np.arange(5, dtype=np.float32))
    i = np.array([1, 3, 1])
    want = np.arange(5, dtype=np.float32)
    d = np.ones(5, np.float32)
    np.multiply.at(d, i, np.float32(2.0))
    check(x.at[i].divide(2.0), want / d)
    check(x.at[i].power(2.0), want ** d)
    tripled = want.copy()
    for k in i:
        tripled[k] *= 3          # applied once per time the index names an element, as JAX
    check(x.at[i].apply(lambda v: v * 3), tripled)
    assert tnp.arange(4).at[1].divide(2).dtype == tnp.float32   # true division, as JAX
    check(x.at[np.array([1, 2])].set(7.0, unique_indices=True, indices_are_sorted=True), F([0, 7, 7, 3, 4]))
    check(x.at[np.array([1, 7])].add(1.0, mode="fill"), F([0, 2, 2, 3, 4]))       # "fill" drops, as JAX
    check(x.at[-1].set(9.0, wrap_negative_indices=False), want)                 # -1 is out of range: dropped
    check(x.at[np.array([-1, 2])].get(mode="fill", wrap_negative_indices=False), F([np.nan, 2]))
    check(x.at[-1].get(wrap_negative_indices=False), F(0.0))                        # clamped from below
    check(tnp.take(x, np.array([4, 0]), unique_indices=True, indices_are_sorted=False), F([4, 0]))


def test_nonzero_with_size_of_an_empty_input_is_all_fill() -> None:
    ys = tnp.nonzero(tnp.zeros((2, 0)), size=2, fill_value=(-1, -2))
    check(ys[0], np.array([-1, -1], np.int32))
    check(ys[1], np.array([-2, -2], np.int32))
    assert tnp.nonzero(tnp.zeros((0,)), size=0)[0].shape == (0,)
    check(tg.jit(lambda a: tnp.argwhere(a, size=2))(tnp.zeros((0, 3))), np.zeros((2, 2), np.int32))


def test_at_mul_is_multiply() -> None:
    """`x.at[i].mul(v)` is JAX's other name for `.multiply` (an AttributeError before); a repeated index multiplies
    twice."""
    x = tg.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    check(x.at[np.array([0, 2, 2])].mul(tg.asarray([5.0, 2.0, 3.0])), np.array([5.0, 2.0, 18.0], np.float32))
