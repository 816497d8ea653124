"""tg.random: the Threefry-2x32 hash against its published known answers, the distributions against their moments,
keys (determinism, independent streams, errors), tracing under jit and function, and bit equality with jax.random
when jax is installed."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tgfx as tg
from tgfx.dtypes import dtypes

R = tg.random

# Random123's known-answer vectors for threefry2x32 with 20 rounds: (ctr0, ctr1, key0, key1) -> (out0, out1).
# Source: Random123 1.09, examples/kat_vectors (D. E. Shaw Research; Salmon et al., "Parallel random numbers: as easy
# as 1, 2, 3", SC 2011), lines "threefry2x32 20 ...".
KAT_20 = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0)),
]


def u32(v: int | list[int]) -> tg.Tensor:
    return tg.asarray(np.asarray(v, np.uint32))


@pytest.mark.parametrize("inp,out", KAT_20)
def test_threefry_known_answers(inp: tuple[int, ...], out: tuple[int, int]) -> None:
    c0, c1, k0, k1 = inp
    y0, y1 = R.threefry2x32(u32(k0), u32(k1), u32(c0), u32(c1))
    assert (int(y0.item()), int(y1.item())) == out


def test_threefry_known_answers_under_jit_and_batched() -> None:
    # all three vectors at once as one batch, compiled: wrapping uint32 adds, xors and rotates in one kernel
    ins = np.array([i for i, _ in KAT_20], np.uint32).T
    f = tg.jit(lambda k0, k1, c0, c1: R.threefry2x32(k0, k1, c0, c1))
    y0, y1 = f(u32(ins[2]), u32(ins[3]), u32(ins[0]), u32(ins[1]))
    assert list(zip(y0.tolist(), y1.tolist(), strict=True)) == [o for _, o in KAT_20]


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=8), st.integers(1, 31))
def test_uint32_wrapping_ops_compile(xs: list[int], r: int) -> None:
    """What the hash is made of, against numpy: adds that wrap, logical shifts, a rotate, a bitcast to float32."""
    a = np.array(xs, np.uint32)
    b = a[::-1].copy()
    f = tg.jit(lambda x, y: (x + y, x * y, (x << r) | (x >> (32 - r)), x ^ y, ((x >> 9) | 0x3F800000).bitcast(
        dtypes.float32)))
    outs = f(tg.asarray(a), tg.asarray(b))
    with np.errstate(over="ignore"):
        ref = (a + b, a * b, (a << np.uint32(r)) | (a >> np.uint32(32 - r)), a ^ b,
               ((a >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32))
    for o, e in zip(outs, ref, strict=True):
        np.testing.assert_array_equal(o.numpy(), e)


# ---- keys ----
@pytest.mark.x64
def test_key_from_seeds() -> None:
    assert R.key(0).dtype == dtypes.uint32 and R.key(0).shape == (2,)
    assert R.key(42).tolist() == [0, 42]
    assert R.key(-1).tolist() == [0, 0xFFFFFFFF]          # the low 32 bits, as JAX's default 32-bit mode
    assert R.key(2**32 + 7).tolist() == [0, 7]
    assert R.key(np.int64(-5)).tolist() == [0, 2**32 - 5]
    assert R.PRNGKey(3).tolist() == R.key(3).tolist()
    # a 64-bit integer Tensor seed keeps both halves; a 32-bit one is the low word
    assert R.key(tg.asarray(np.int64(2**40 + 5))).tolist() == [256, 5]
    assert R.key(tg.asarray(np.int32(-3))).tolist() == [0, 2**32 - 3]
    with pytest.raises(OverflowError, match="seed"):
        R.key(2**64)
    with pytest.raises(TypeError, match="seed"):
        R.key(1.5)
    with pytest.raises(TypeError, match="seed"):
        R.key(tg.asarray(np.zeros(2, np.int32)))


def test_determinism() -> None:
    k = R.key(7)
    for f in (lambda k: R.normal(k, (50,)), lambda k: R.bits(k, (3, 4)), lambda k: R.randint(k, (20,), 0, 9)):
        np.testing.assert_array_equal(f(k).numpy(), f(R.key(7)).numpy())
        assert not np.array_equal(f(k).numpy(), f(R.key(8)).numpy())


def test_split_and_fold_in_give_distinct_streams() -> None:
    k = R.key(0)
    keys = R.split(k, 16).numpy()
    assert keys.shape == (16, 2) and keys.dtype == np.uint32
    rows = {tuple(r) for r in keys.tolist()} | {tuple(k.tolist())}
    assert len(rows) == 17
    # with JAX's partitionable threefry, key i of a split is the key folded with i
    for i in (0, 5, 15):
        np.testing.assert_array_equal(R.fold_in(k, i).numpy(), keys[i])
    assert R.split(k, (2, 3)).shape == (2, 3, 2)
    np.testing.assert_array_equal(R.split(k, (2, 3)).numpy().reshape(6, 2), keys[:6])
    streams = [R.bits(tg.asarray(r), (64,)).numpy() for r in keys[:4]] + [R.bits(k, (64,)).numpy()]
    for i in range(len(streams)):
        for j in range(i):
            assert np.mean(streams[i] == streams[j]) < 0.1
    # fold_in of a traced integer equals fold_in of the Python one
    np.testing.assert_array_equal(R.fold_in(k, tg.asarray(np.int32(9))).numpy(), R.fold_in(k, 9).numpy())
    with pytest.raises(OverflowError, match="data"):
        R.fold_in(k, -1)


def test_scalar_draw_is_counter_zero() -> None:
    k = R.key(3)
    assert R.bits(k).item() == R.bits(k, (5,)).numpy()[0]
    assert R.uniform(k).item() == R.uniform(k, (4,)).numpy()[0]


@pytest.mark.parametrize("bad", [
    np.zeros(2, np.int32), tg.asarray(np.zeros(2, np.int32)), tg.asarray(np.zeros(3, np.uint32)),
    tg.asarray(np.zeros((4, 2), np.uint32)), 0, [0, 0],
])
def test_bad_keys_raise(bad: object) -> None:
    for fn, call in (("split", lambda k: R.split(k)), ("normal", lambda k: R.normal(k, (2,))),
                     ("permutation", lambda k: R.permutation(k, 3))):
        with pytest.raises(TypeError, match=rf"{fn}: `key` must be a uint32\[2\] PRNG key"):
            call(bad)


def test_bad_arguments_raise() -> None:
    k = R.key(0)
    with pytest.raises(TypeError, match="uniform: `dtype` must be a float type"):
        R.uniform(k, (2,), dtypes.int32)
    with pytest.raises(TypeError, match="bits: `dtype` must be an unsigned"):
        R.bits(k, (2,), dtypes.int32)
    with pytest.raises(TypeError, match="randint: `dtype` must be an integer"):
        R.randint(k, (2,), 0, 3, dtypes.float32)
    with pytest.raises(TypeError, match="bernoulli: probability `p` must be a float"):
        R.bernoulli(k, 1, (3,))
    with pytest.raises(ValueError, match="`minval` of shape \\(3,\\) does not broadcast"):
        R.uniform(k, (2,), minval=tg.asarray(np.zeros(3, np.float32)))


# ---- distributions: sample moments within 6 standard errors ----
N = 100_000


def _assert_moments(x: np.ndarray, mean: float, var: float, fourth: float) -> None:
    """Sample mean and variance within 6 standard errors: se(mean) = sqrt(var/n), se(var) ~ sqrt((m4 - var^2)/n)."""
    x = x.astype(np.float64)
    n = x.size
    assert abs(x.mean() - mean) < 6 * math.sqrt(var / n), x.mean()
    assert abs(x.var() - var) < 6 * math.sqrt((fourth - var**2) / n), x.var()


@pytest.mark.x64
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16])
def test_uniform_moments_and_range(d: tg.DType) -> None:
    u = R.uniform(R.key(1), (N,), d, minval=-2.0, maxval=3.0)
    assert u.dtype == d
    x = u.astype(dtypes.float64).numpy()
    assert x.min() >= -2.0 and x.max() < 3.0
    _assert_moments(x, 0.5, 25 / 12, 5**4 / 80)  # uniform on width 5: var w^2/12, 4th central moment w^4/80


def test_normal_moments() -> None:
    x = R.normal(R.key(2), (N,)).numpy()
    assert np.isfinite(x).all()
    _assert_moments(x, 0.0, 1.0, 3.0)
    # tails: P(|z| > 3) = 0.0027
    assert abs(np.mean(np.abs(x) > 3) - 0.0027) < 6 * math.sqrt(0.0027 / N)


@pytest.mark.x64
def test_erfinv_inverts_erf() -> None:
    x = np.linspace(-0.999, 0.999, 1001)
    y = R.erfinv(tg.asarray(x)).numpy()
    from math import erf
    np.testing.assert_allclose([erf(v) for v in y], x, rtol=0, atol=1e-14)
    y32 = R.erfinv(tg.asarray(x.astype(np.float32))).numpy()
    np.testing.assert_allclose([erf(v) for v in y32.astype(np.float64)], x, rtol=0, atol=5e-7)
    assert R.erfinv(tg.asarray(np.float32([1.0, -1.0]))).tolist() == [math.inf, -math.inf]


def test_bernoulli_rate() -> None:
    for p in (0.1, 0.5, 0.9):
        b = R.bernoulli(R.key(3), p, (N,))
        assert b.dtype == dtypes.bool
        assert abs(b.numpy().mean() - p) < 6 * math.sqrt(p * (1 - p) / N)
    # p as a Tensor gives the shape
    p = tg.asarray(np.array([0.0, 1.0, 0.0, 1.0], np.float32))
    assert R.bernoulli(R.key(4), p).tolist() == [False, True, False, True]


@pytest.mark.x64
@pytest.mark.parametrize("lo,hi,d", [(0, 10, dtypes.int32), (-5, 3, dtypes.int8), (0, 256, dtypes.uint8),
                                     (-3, 4, dtypes.int64), (7, 7, dtypes.int32), (9, 2, dtypes.uint32)])
@pytest.mark.x64
def test_randint_range(lo: int, hi: int, d: tg.DType) -> None:
    x = R.randint(R.key(5), (20_000,), lo, hi, d)
    assert x.dtype == d
    v = x.numpy().astype(np.int64)
    if hi <= lo:  # an empty range gives minval, as JAX
        assert (v == lo).all()
        return
    assert v.min() >= lo and v.max() < hi
    counts = np.bincount(v - lo, minlength=hi - lo)
    assert (counts > 0).all()
    expect = v.size / (hi - lo)
    assert np.abs(counts - expect).max() < 6 * math.sqrt(expect)


@pytest.mark.x64
def test_randint_full_int32_range_uses_every_bit() -> None:
    # maxval past int32's range: the span wraps to 2**32 and every int32 value is possible
    v = R.randint(R.key(6), (N,), -(2**31), 2**31, dtypes.int32).numpy()
    assert v.min() < -(2**30) and v.max() > 2**30 and (v < 0).mean() == pytest.approx(0.5, abs=0.01)


@pytest.mark.parametrize("n", [0, 1, 2, 10, 1700])  # 1700 > 2**(32/3): two rounds of sorting
def test_permutation_is_a_permutation(n: int) -> None:
    p = R.permutation(R.key(8), n)
    assert p.dtype == dtypes.int32 and p.shape == (n,)
    np.testing.assert_array_equal(np.sort(p.numpy()), np.arange(n))
    if n >= 10:
        assert not np.array_equal(p.numpy(), np.arange(n))


def test_a_dataset_permutation_stores_nothing_of_its_length_squared(monkeypatch: pytest.MonkeyPatch) -> None:
    # a permutation's first round gathers from arange(n), which its sort's loop also reads (stored, it hid the
    # positions from the one-hot gather: every output compared with every position), and a graph computed because it
    # grew deep mid-gather took the gather's n x n one-hot mask, a local there, as a sibling to store (60,000: 14 GB)
    from tgfx.devices import get_device
    allocator = type(get_device().allocator)   # the default device's, where the permutation runs
    sizes: list[int] = []
    alloc = allocator.alloc
    monkeypatch.setattr(allocator, "alloc", lambda self, nbytes: (sizes.append(nbytes), alloc(self, nbytes))[1])
    n = 6000
    p = R.permutation(R.key(3), n).numpy()
    np.testing.assert_array_equal(np.sort(p), np.arange(n))
    assert max(sizes) < n * n, max(sizes)   # (with the bug: n * n * 4 bytes)
    # the same with an arange the caller holds, lazy: it is no sibling to store either
    x = tg.Tensor.arange(n, dtype=dtypes.int32)
    order = tg.asarray(np.random.default_rng(0).permutation(n).astype(np.int32))
    sizes.clear()
    np.testing.assert_array_equal(tg.numpy.take_along_axis(x, order, 0).numpy(), order.numpy())
    assert max(sizes) < n * n, max(sizes)   # (with the bug: n * n * 4 bytes)


def test_a_held_permutation_sliced_into_batches_is_sorted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # an epoch's shuffle, `perm[i * b:(i + 1) * b]` a step: a permutation at LAZY_DEPTH made each slice a deep graph,
    # computed alone with the permutation left lazy, so every step sorted again (6 kernels and 0.7 ms a batch of
    # 4096); its slice is a view of it, so it is stored with the first
    from tgfx import tensor
    from tgfx.counters import counters
    x = np.random.default_rng(0).standard_normal((4096, 8)).astype(np.float32)
    xs, p = tg.asarray(x), R.permutation(R.key(5), 4096)
    if not tensor.is_realized(p.uop):   # (a compiled shuffle's result is computed at once: no depth to be at)
        monkeypatch.setattr(tensor, "LAZY_DEPTH", tensor.lazy_depth(p.uop))   # (at the limit, whatever its depth)
    first = xs[p[0:128]].numpy()
    assert tensor.is_realized(p.uop)   # (before anything reads it)
    order, kernels = p.numpy(), counters.kernel_count
    np.testing.assert_array_equal(first, x[order[0:128]])
    for i in range(1, 4):
        np.testing.assert_array_equal(xs[p[i * 128:(i + 1) * 128]].numpy(), x[order[i * 128:(i + 1) * 128]])
    assert counters.kernel_count - kernels <= 3, counters.kernel_count - kernels   # a gather each, no sort


def test_permutation_of_an_array() -> None:
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    rows = R.permutation(R.key(9), tg.asarray(x)).numpy()
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, x.tolist()))
    cols = R.permutation(R.key(9), tg.asarray(x), axis=1).numpy()
    perm = cols[0].astype(np.int64)  # x's first row is 0..5, so it spells the column order
    np.testing.assert_array_equal(np.sort(perm), np.arange(6))
    np.testing.assert_array_equal(cols, x[:, perm])  # every row in the same column order
    ind = R.permutation(R.key(9), tg.asarray(x), axis=1, independent=True).numpy()
    np.testing.assert_array_equal(np.sort(ind, axis=1), x)
    assert len({tuple(np.argsort(r)) for r in ind}) > 1  # rows shuffled on their own


# ---- tracing ----
def _draws(k: tg.Tensor) -> tuple[tg.Tensor, ...]:
    k1, k2 = R.split(k)[0], R.split(k)[1]
    return (R.normal(k1, (5,)), R.uniform(k2, (2, 3), minval=-1.0, maxval=1.0), R.randint(k, (4,), 0, 100),
            R.bernoulli(k1, 0.5, (6,)), R.permutation(k2, 7), R.fold_in(k, 3), R.bits(k, (3,), dtypes.uint8))


def test_jit_traces_once_and_matches_eager() -> None:
    f = tg.jit(_draws)
    for seed in (0, 1, 2):
        k = R.key(seed)
        for got, want in zip(f(k), _draws(k), strict=True):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert f.trace_count == 1


def test_function_and_traced_seed() -> None:
    g = tg.function(lambda seed, i: R.normal(R.fold_in(R.key(seed), i), (4,)))
    got = g(tg.asarray(np.int32(11)), tg.asarray(np.int32(2)))
    np.testing.assert_array_equal(got.numpy(), R.normal(R.fold_in(R.key(11), 2), (4,)).numpy())


# ---- jax.random as the oracle ----
SEEDS = [0, 1, 42, -7, 2**40 + 5]
SHAPES = [(), (1,), (7,), (3, 4)]


@pytest.fixture(scope="module")
def jr():  # noqa: ANN201
    jax = pytest.importorskip("jax")
    return jax.random


@pytest.mark.parametrize("seed", SEEDS)
def test_jax_keys(jr, seed: int) -> None:  # noqa: ANN001
    jk, k = jr.PRNGKey(seed), R.key(seed)
    np.testing.assert_array_equal(k.numpy(), np.asarray(jk))
    np.testing.assert_array_equal(k.numpy(), np.asarray(jr.key_data(jr.key(seed))))
    np.testing.assert_array_equal(R.split(k).numpy(), np.asarray(jr.split(jk)))
    np.testing.assert_array_equal(R.split(k, (2, 3)).numpy(), np.asarray(jr.split(jk, (2, 3))))
    for d in (0, 5, 2**32 - 1):
        np.testing.assert_array_equal(R.fold_in(k, d).numpy(), np.asarray(jr.fold_in(jk, d)))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shape", SHAPES)
def test_jax_bits_and_floats(jr, seed: int, shape: tuple[int, ...]) -> None:  # noqa: ANN001
    jk, k = jr.PRNGKey(seed), R.key(seed)
    for d in ("uint8", "uint16", "uint32"):
        np.testing.assert_array_equal(R.bits(k, shape, d).numpy(), np.asarray(jr.bits(jk, shape, d)))
    for d in ("float32", "float16"):
        np.testing.assert_array_equal(R.uniform(k, shape, d, -2.0, 3.0).numpy(),
                                      np.asarray(jr.uniform(jk, shape, d, -2.0, 3.0)))
    bf = R.uniform(k, shape, "bfloat16", -2.0, 3.0).bitcast(dtypes.uint16).numpy()
    np.testing.assert_array_equal(bf, np.asarray(jr.uniform(jk, shape, "bfloat16", -2.0, 3.0)).view(np.uint16))
    for d in ("float16", "bfloat16"):
        np.testing.assert_array_equal(R.normal(k, shape, d).astype(dtypes.float32).numpy(),
                                      np.asarray(jr.normal(jk, shape, d)).astype(np.float32))
    np.testing.assert_array_equal(R.bernoulli(k, 0.3, shape).numpy(), np.asarray(jr.bernoulli(jk, 0.3, shape)))
    np.testing.assert_array_equal(R.randint(k, shape, -5, 17).numpy(), np.asarray(jr.randint(jk, shape, -5, 17)))


@pytest.mark.parametrize("seed", [0, 3])
def test_jax_normal_float32(jr, seed: int) -> None:  # noqa: ANN001
    """float32 normals agree to a few ulp and almost all exactly: only the rounding of log1p inside erfinv differs
    (XLA evaluates its own log1p; ours is the C library's)."""
    x = R.normal(R.key(seed), (20_000,)).numpy()
    y = np.asarray(jr.normal(jr.PRNGKey(seed), (20_000,)))
    ulps = np.abs(x.view(np.int32).astype(np.int64) - y.view(np.int32))
    assert ulps.max() <= 4 and np.mean(ulps == 0) > 0.98


@pytest.mark.parametrize("lo,hi,d", [(0, 256, "uint8"), (-128, 128, "int8"), (-(2**31), 2**31 - 1, "int32"),
                                     (0, 10, "uint32"), (5, 3, "int32"), (0, 1000, "int16")])
def test_jax_randint_edges(jr, lo: int, hi: int, d: str) -> None:  # noqa: ANN001
    for seed in (0, 9):
        np.testing.assert_array_equal(R.randint(R.key(seed), (16,), lo, hi, d).numpy(),
                                      np.asarray(jr.randint(jr.PRNGKey(seed), (16,), lo, hi, d)))


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_jax_permutation(jr, seed: int) -> None:  # noqa: ANN001
    jk, k = jr.PRNGKey(seed), R.key(seed)
    for n in (1, 10, 33):
        np.testing.assert_array_equal(R.permutation(k, n).numpy(), np.asarray(jr.permutation(jk, n)))
    np.testing.assert_array_equal(R.permutation(k, 1700).numpy(), np.asarray(jr.permutation(jk, 1700)))
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    for axis in (0, 1):
        for ind in (False, True):
            np.testing.assert_array_equal(R.permutation(k, tg.asarray(x), axis, ind).numpy(),
                                          np.asarray(jr.permutation(jk, x, axis, ind)))


@pytest.mark.x64
def test_jax_float64(jr) -> None:  # noqa: ANN001
    """With jax_enable_x64: 64-bit bits and uniforms bit for bit, normals to float64 rounding, 64-bit randint."""
    import jax
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        jk, k = jr.PRNGKey(4), R.key(4)
        np.testing.assert_array_equal(R.bits(k, (9,), "uint64").numpy(), np.asarray(jr.bits(jk, (9,), "uint64")))
        np.testing.assert_array_equal(R.uniform(k, (9,), "float64").numpy(), np.asarray(jr.uniform(jk, (9,),
                                                                                                   "float64")))
        np.testing.assert_allclose(R.normal(k, (1000,), "float64").numpy(),
                                   np.asarray(jr.normal(jk, (1000,), "float64")), rtol=1e-13, atol=1e-15)
        for lo, hi, d in ((-(2**31), 2**31, "int32"), (0, 2**32, "uint32"), (3, 2**40, "int64")):
            np.testing.assert_array_equal(R.randint(k, (7,), lo, hi, d).numpy(),
                                          np.asarray(jr.randint(jk, (7,), lo, hi, d)))
        # a 64-bit traced seed keeps its high word, as JAX's x64 mode
        np.testing.assert_array_equal(R.key(tg.asarray(np.int64(2**40 + 5))).numpy(), np.asarray(jr.PRNGKey(2**40 + 5)))
    finally:
        jax.config.update("jax_enable_x64", old)


def test_an_epochs_eager_permutation_replays_its_compiled_shuffle() -> None:
    # a loader's shuffle, `permutation(fold_in(key, epoch), n)` eagerly every epoch, built its sorting network's graph
    # again at each call and realised it as an eager graph (4.8 ms for 100 rows, jax's 0.95 ms); it is compiled once
    # per length, as the draws are, and replayed: no eager graph, no trace, the same permutation
    from tgfx.counters import counters
    key, n = R.key(11), 100
    first = R.permutation(R.fold_in(key, 0), n).numpy()
    before = counters.uop_count, counters.trace_count, counters.compile_count
    perms = [R.permutation(R.fold_in(key, epoch), n).numpy() for epoch in range(1, 4)]
    assert (counters.uop_count, counters.trace_count, counters.compile_count) == before
    for p in [first, *perms]:
        np.testing.assert_array_equal(np.sort(p), np.arange(n))
    assert len({tuple(p) for p in [first, *perms]}) == 4
    np.testing.assert_array_equal(R.permutation(R.fold_in(key, 0), n).numpy(), first)
    # inside a trace it is inlined: the same values
    np.testing.assert_array_equal(tg.jit(lambda k: R.permutation(k, n))(R.fold_in(key, 2)).numpy(), perms[1])
