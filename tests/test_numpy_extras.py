"""The rest of jax.numpy's names (tgfx/numpy/_extras.py) against numpy: index tricks, piecewise/choose/compress/
extract, functional place and put, bit packing and counting, multi-dimensional histograms, window functions, and the
abstract scalar types with issubdtype; under jit and vmap, their gradients, and their errors.

Where JAX differs from numpy (place and put need inplace=False, histogram counts are floats, histogramdd's and
histogram2d's ints without weights or density), the test checks JAX's.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import check_vmap, close
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
import tgfx.numpy as tnp

# numpy's default int64 and float64 inputs become int32 and float32 without x64, as in JAX (which warns too)
pytestmark = pytest.mark.filterwarnings("ignore:tgfx.*is not enabled:UserWarning")


def fd_grad(f: Any, x: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    """Central finite differences of the scalar f at x, in float64."""
    g = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (float(f(tg.asarray(x + d))) - float(f(tg.asarray(x - d)))) / (2 * eps)
    return g


# ---- index tricks ----
@pytest.mark.parametrize("key", [np.s_[0:3, 0:4], np.s_[1:7:2, -2:2], np.s_[0:1:5j, 2:4:3j], np.s_[0:4],
                                 np.s_[-1:1:4j]])
def test_mgrid_ogrid(key: Any) -> None:
    close(tnp.mgrid[key], np.mgrid[key])
    got, want = tnp.ogrid[key], np.ogrid[key]
    if isinstance(want, (list, tuple)):
        assert isinstance(got, list) and len(got) == len(want)  # a list, as JAX's
        for g, w in zip(got, want, strict=True):
            close(g, w)
    else:
        close(got, want)


@pytest.mark.parametrize("directive", ["0,3,1", "0,3,-1", "2,3,0", "1,3,-2", "0,3", "-1,2,1", "1,2"])
def test_r_directives(directive: str) -> None:
    a, b = np.array([1, 2], np.int32), np.array([3, 4], np.int32)
    close(tnp.r_[directive, tnp.asarray(a), b], np.r_[directive, a, b], dtype=np.int32)
    m = np.arange(4, dtype=np.float32).reshape(2, 2)
    close(tnp.r_[directive, tnp.asarray(m), m + 1], np.r_[directive, m, m + 1])


def test_r_c_mixed_pieces() -> None:
    close(tnp.r_[tnp.asarray([1, 2]), 0, 4, 0:3], np.r_[[1, 2], 0, 4, 0:3], dtype=np.int32)
    close(tnp.r_[-1:1:5j, tnp.asarray([3.0])], np.r_[-1:1:5j, [3.0]], dtype=np.float32)
    a, b = np.arange(3, dtype=np.float32), np.arange(3, 6, dtype=np.float32)
    close(tnp.c_[tnp.asarray(a), b], np.c_[a, b])
    close(tnp.c_[tnp.asarray(a[None]), 0, 0, b[None]], np.c_[a[None], 0, 0, b[None]])
    assert tnp.r_[tnp.asarray(np.int8([1])), 2].dtype == tnp.int8       # a Python scalar is weakly typed, as in JAX
    assert tnp.s_[1:2, ::3] == np.s_[1:2, ::3] and tnp.index_exp[2] == (2,)


def test_ix_() -> None:
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    rows, cols = np.array([0, 3, 2]), np.array([1, 4])
    close(tnp.asarray(x)[tnp.ix_(tnp.asarray(rows), tnp.asarray(cols))], x[np.ix_(rows, cols)])
    got = tnp.ix_(tnp.asarray([1, 2]), tnp.asarray([0]), tnp.asarray(np.zeros(0, np.int32)))
    assert [g.shape for g in got] == [(2, 1, 1), (1, 1, 1), (1, 1, 0)]


# ---- construction and selection ----
def test_fromfunction() -> None:
    want = np.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=int)
    close(tnp.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=int), want, dtype=np.int32)
    # mapped over scalars, as JAX's: a function with a Python branch on shapes still works
    got = tnp.fromfunction(lambda i, j, k: tnp.stack([i, j, k]).sum() * 0.5, (2, 3, 4), dtype=tnp.float32)
    close(got, np.fromfunction(lambda i, j, k: (i + j + k) * 0.5, (2, 3, 4)))


@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=5),
                  elements=st.floats(-3, 3, width=32)))
def test_piecewise_matches_numpy(x: np.ndarray) -> None:
    conds = [x < -1, x > 0.5]
    close(tnp.piecewise(tnp.asarray(x), [tnp.asarray(c) for c in conds], [lambda v: -v, lambda v: v ** 2]),
          np.piecewise(x, conds, [lambda v: -v, lambda v: v ** 2]))
    # an "otherwise" function, constants, overlapping conditions (the last true one wins), extra arguments
    conds = [x < 0, x < 1]
    close(tnp.piecewise(tnp.asarray(x), conds, [2.0, lambda v, s: v * s, lambda v, s: v - s], 3.0),
          np.piecewise(x, conds, [2.0, lambda v, s: v * s, lambda v, s: v - s], 3.0))


def test_trim_zeros() -> None:
    a = np.array([0, 0, 1, 0, 2, 0], np.int32)
    for trim in ("fb", "f", "b", "BF"):
        close(tnp.trim_zeros(tnp.asarray(a), trim), np.trim_zeros(a, trim))
    assert tnp.trim_zeros(tnp.zeros(3)).shape == (0,)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 12 - 1), st.integers(-2, 1), st.integers(1, 6))
def test_compress_and_extract_match_numpy(bits: int, axis: int, size: int) -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 5
    n = x.shape[axis]
    cond = np.array([(bits >> i) & 1 for i in range(n)], bool)
    close(tnp.compress(tnp.asarray(cond), tnp.asarray(x), axis=axis), np.compress(cond, x, axis=axis))
    close(tnp.compress(cond[:2], tnp.asarray(x)), np.compress(cond[:2], x))  # shorter than the axis: the rest drop
    # size=: the first `size` selected slices, the rest fill_value
    got = tnp.compress(tnp.asarray(cond), tnp.asarray(x), axis=axis, size=size, fill_value=-1.0)
    sel = np.compress(cond, x, axis=axis)
    want = np.full(x.shape[:axis % 3] + (size,) + x.shape[axis % 3 + 1:], -1.0, np.float32)
    k = min(size, sel.shape[axis])
    np.moveaxis(want, axis, 0)[:k] = np.moveaxis(sel, axis, 0)[:k]
    close(got, want)
    mask = np.resize(np.array([(bits >> i) & 1 for i in range(12)], bool), x.shape)
    close(tnp.extract(tnp.asarray(mask), tnp.asarray(x)), np.extract(mask, x))


@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.int32, st.integers(1, 8), elements=st.integers(-4, 6)), st.sampled_from(["wrap", "clip"]))
def test_choose_matches_numpy(a: np.ndarray, mode: str) -> None:
    choices = [np.arange(a.shape[0], dtype=np.float32) * k for k in (1, 10, 100)] + [np.float32(-1.0)]
    close(tnp.choose(tnp.asarray(a), choices, mode=mode), np.choose(a, choices, mode=mode))
    ok = np.clip(a, 0, 3)
    close(tnp.choose(tnp.asarray(ok), choices), np.choose(ok, choices))


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 10 - 1), st.integers(1, 4))
def test_place_matches_numpy(bits: int, nvals: int) -> None:
    arr = np.arange(10, dtype=np.float32).reshape(2, 5)
    mask = np.array([(bits >> i) & 1 for i in range(10)], bool).reshape(2, 5)
    vals = np.arange(100, 100 + nvals, dtype=np.float32)
    want = arr.copy()
    np.place(want, mask, vals)
    close(tnp.place(tnp.asarray(arr), tnp.asarray(mask), tnp.asarray(vals), inplace=False), want)


@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.int32, st.integers(1, 5), elements=st.integers(-8, 12), unique=True),
       st.sampled_from([None, "clip", "wrap"]))
def test_put_matches_numpy(ind: np.ndarray, mode: str | None) -> None:
    arr = np.arange(8, dtype=np.float32).reshape(2, 4)
    vals = np.array([-1.0, -2.0, -3.0], np.float32)
    want = arr.copy()
    if mode is None:  # JAX: one in [-8, -1] counts from the end, others are clamped (numpy would raise)
        np.put(want, np.clip(np.where((ind < 0) & (ind >= -8), ind + 8, ind), 0, 7), vals)
    else:
        np.put(want, ind, vals, mode=mode)
    close(tnp.put(tnp.asarray(arr), tnp.asarray(ind), tnp.asarray(vals), mode=mode, inplace=False), want)


# ---- bits ----
@settings(max_examples=20, deadline=None)
@given(hnp.arrays(np.uint8, hnp.array_shapes(min_dims=1, max_dims=3, max_side=11), elements=st.integers(0, 1)),
       st.sampled_from(["big", "little"]), st.integers(-4, 2), st.integers(-20, 20))
def test_packbits_unpackbits_match_numpy(b: np.ndarray, bitorder: str, axis: int, count: int) -> None:
    ax = None if axis >= b.ndim or axis < -b.ndim else axis
    p = np.packbits(b, axis=ax, bitorder=bitorder)
    got = tnp.packbits(tnp.asarray(b), axis=ax, bitorder=bitorder)
    close(got, p, dtype=np.uint8)
    close(tnp.unpackbits(got, axis=ax, bitorder=bitorder), np.unpackbits(p, axis=ax, bitorder=bitorder),
          dtype=np.uint8)
    if -count > 8 * p.shape[0 if ax is None else ax]:
        with pytest.raises(ValueError, match="drops more than"):
            tnp.unpackbits(got, axis=ax, count=count)
        return
    close(tnp.unpackbits(got, axis=ax, count=count, bitorder=bitorder),
          np.unpackbits(p, axis=ax, count=count, bitorder=bitorder))


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.bool_])
def test_bitwise_count(dt: Any) -> None:
    rng = np.random.default_rng(0)
    if dt is np.bool_:
        v = rng.integers(0, 2, 20).astype(bool)
    else:
        info = np.iinfo(dt)
        v = np.concatenate([rng.integers(info.min, info.max, 30, dtype=dt, endpoint=True),
                            np.array([0, 1, info.min, info.max], dt)])
    close(tnp.bitwise_count(tnp.asarray(v)), np.bitwise_count(v), dtype=np.uint8)


# ---- histograms ----
@settings(max_examples=15, deadline=None)
@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 30), st.integers(1, 3)), elements=st.floats(-4, 4, width=32)),
       st.integers(1, 5), st.booleans(), st.booleans())
def test_histogramdd_matches_numpy(s: np.ndarray, bins: int, density: bool, weighted: bool) -> None:
    w = np.abs(s[:, 0]) + 0.5 if weighted else None
    rng = [(-2.0, 2.0)] + [None] * (s.shape[1] - 1)
    for kw in ({"bins": bins}, {"bins": [bins + i for i in range(s.shape[1])], "range": rng}):
        h, edges = tnp.histogramdd(tnp.asarray(s), weights=None if w is None else tnp.asarray(w), density=density, **kw)
        hn, en = np.histogramdd(s, weights=w, density=density, **kw)   # numpy on the same float32 data
        close(h, hn, rtol=1e-4, atol=1e-4)
        assert h.dtype == (tnp.float32 if weighted or density else tnp.int32)   # JAX's counts: a bincount
        for e, want in zip(edges, en, strict=True):
            close(e, want, rtol=1e-5, atol=1e-5)


def test_histogram2d() -> None:
    r = np.random.default_rng(1).normal(size=(60, 2)).astype(np.float32)
    x, y = r[:, 0], r[:, 1]
    for bins in (4, (4, 3), np.array([-1.0, 0, 1, 2], np.float32), [np.array([-1.0, 1.0]), 3]):
        h, xe, ye = tnp.histogram2d(tnp.asarray(x), tnp.asarray(y), bins=bins)
        hn, xen, yen = np.histogram2d(x, y, bins=bins)
        close(h, hn)
        close(xe, xen)
        close(ye, yen)
    h, _, _ = tnp.histogram2d(tnp.asarray(x), tnp.asarray(y), bins=3, range=[(-1, 1), (0, 2)], weights=tnp.asarray(x),
                              density=True)
    close(h, np.histogram2d(x, y, bins=3, range=[(-1, 1), (0, 2)], weights=x, density=True)[0], rtol=1e-4)


# (x, y, weights dtypes, density) -> jnp.histogram2d's (counts, edges) dtypes: x and y promote together (JAX stacks
# them into histogramdd's sample), then with the weights to a float type; counts without weights or density are a
# bincount's default int
_HISTOGRAM_TYPES = [
    (("int32", "int32", None, False), ("int32", "float32")),
    (("bool", "float16", None, False), ("int32", "float16")),
    (("int32", "float16", None, True), ("float16", "float16")),
    (("int32", "bool", None, True), ("float32", "float32")),
    (("int32", "int32", "float16", False), ("float16", "float16")),
    (("int32", "bfloat16", "float32", True), ("float32", "float32")),
    (("float16", "float16", "int32", False), ("float16", "float16")),
]
_HISTOGRAM_TYPES_X64 = [
    (("int32", "int32", None, False), ("int64", "float32")),
    (("int32", "int64", None, False), ("int64", "float64")),
    (("int32", "int64", "float32", False), ("float32", "float32")),
    (("bool", "int32", "int64", True), ("float64", "float64")),
    (("float16", "float16", None, True), ("float16", "float16")),
]


def _histograms_with_types(types: tuple, want: tuple) -> None:
    dx, dy, dw, density = types
    x, y, w = ([0.0, 1, 1, 2, 3, 3, 3], [1.0, 0, 1, 1, 0, 1, 1], [1.0, 2, 1, 1, 3, 1, 2])
    xt, yt = tg.asarray(np.array(x, np.float32)).astype(dx), tg.asarray(np.array(y, np.float32)).astype(dy)
    weights = None if dw is None else tg.asarray(np.array(w, np.float32)).astype(dw)
    hn = np.histogram2d(np.array(x) != 0 if dx == "bool" else x, np.array(y) != 0 if dy == "bool" else y, bins=2,
                        weights=None if dw is None else w, density=density)[0]
    h, xe, ye = tnp.histogram2d(xt, yt, bins=2, weights=weights, density=density)
    assert (h.dtype.name, xe.dtype.name, ye.dtype.name) == (want[0], want[1], want[1]), types
    close(h.numpy().astype(np.float64), hn, rtol=2e-3)   # (float16 densities)
    if dx == dy:   # the same sample as one (N, 2) array
        h, (xe, ye) = tnp.histogramdd(tnp.stack([xt, yt], axis=1), bins=2, weights=weights, density=density)
        assert (h.dtype.name, xe.dtype.name, ye.dtype.name) == (want[0], want[1], want[1]), types
        close(h.numpy().astype(np.float64), hn, rtol=2e-3)


@pytest.mark.parametrize(("types", "want"), _HISTOGRAM_TYPES)
def test_histogram2d_and_histogramdd_types_are_jaxs(types: tuple, want: tuple) -> None:
    _histograms_with_types(types, want)


@pytest.mark.x64
@pytest.mark.parametrize(("types", "want"), _HISTOGRAM_TYPES_X64)
def test_histogram2d_and_histogramdd_types_are_jaxs_with_x64(types: tuple, want: tuple) -> None:
    _histograms_with_types(types, want)


# ---- windows ----
@pytest.mark.parametrize("m", [0, 1, 2, 5, 8])
def test_windows(m: int) -> None:
    for name in ("bartlett", "blackman", "hamming", "hanning"):
        close(getattr(tnp, name)(m), getattr(np, name)(m), dtype=np.float32)
    for beta in (0.0, 4.0, 8.6):
        close(tnp.kaiser(m, beta), np.kaiser(m, beta), rtol=1e-5, dtype=np.float32)


def test_i0() -> None:
    x = np.array([-3.0, 0.0, 0.5, 2.0, 10.0], np.float32)
    close(tnp.i0(tnp.asarray(x)), np.i0(x), rtol=1e-5, dtype=np.float32)
    close(tnp.i0(tnp.asarray([1, 2])), np.i0([1.0, 2.0]), rtol=1e-5, dtype=np.float32)


# ---- dtypes ----
def test_issubdtype_and_abstract_types() -> None:
    assert tnp.issubdtype(tnp.float32, tnp.floating) and tnp.issubdtype(np.float32, tnp.floating)
    assert tnp.issubdtype(tnp.float16, tnp.inexact) and not tnp.issubdtype(tnp.float32, tnp.integer)
    assert tnp.issubdtype(tnp.int8, tnp.signedinteger) and not tnp.issubdtype(tnp.int8, tnp.unsignedinteger)
    assert tnp.issubdtype(tnp.uint32, tnp.unsignedinteger) and tnp.issubdtype(tnp.uint32, tnp.number)
    assert tnp.issubdtype(tnp.complex64, tnp.complexfloating) and not tnp.issubdtype(tnp.complex64, tnp.floating)
    assert tnp.issubdtype(tnp.bool_, tnp.generic) and not tnp.issubdtype(tnp.bool_, tnp.number)
    assert tnp.issubdtype(tnp.bfloat16, tnp.floating) and not tnp.issubdtype(tnp.bfloat16, tnp.integer)
    assert tnp.issubdtype(tnp.bfloat16, tnp.bfloat16) and not tnp.issubdtype(tnp.float16, tnp.bfloat16)
    assert tnp.issubdtype(tnp.int32, tnp.int32) and not tnp.issubdtype(tnp.int32, tnp.int16)
    assert tnp.issubdtype("float32", tnp.number) and tnp.issubdtype(tnp.zeros(2).dtype, "float32")
    assert tnp.issubdtype(np.str_, tnp.character) and tnp.issubdtype(np.bytes_, tnp.flexible)
    assert (tnp.float_, tnp.double, tnp.single, tnp.int_, tnp.uint) == (tnp.float64, tnp.float64, tnp.float32,
                                                                         tnp.int64, tnp.uint64)
    assert (tnp.complex_, tnp.cdouble, tnp.csingle) == (tnp.complex128, tnp.complex128, tnp.complex64)
    assert tnp.zeros(2, dtype=tnp.single).dtype == tnp.float32
    assert tnp.iterable(tnp.zeros(3)) and tnp.iterable([1]) and not tnp.iterable(tnp.zeros(())) and \
        not tnp.iterable(3)


# ---- jit, vmap, grad ----
def test_jit_matches_eager() -> None:
    x = np.linspace(-2, 2, 12).astype(np.float32)

    def f(v: tg.Tensor) -> tuple:
        return (tnp.piecewise(v, [v < 0], [lambda t: t * t, lambda t: t + 1]),
                tnp.choose((v > 0).astype(tnp.int32), [v, -v], mode="clip"),
                tnp.compress(v > 0.5, v, size=5, fill_value=9.0),
                tnp.extract(v > 0.5, v, size=3),
                tnp.place(v, v < 0, tnp.asarray([1.0, 2.0]), inplace=False),
                tnp.put(v, tnp.asarray([0, -1]), 7.0, inplace=False),
                tnp.packbits(v > 0), tnp.bitwise_count((v * 10).astype(tnp.int32)),
                tnp.histogram2d(v, v * v, bins=3)[0], tnp.kaiser(6, v[0] + 3.0), tnp.r_[v[:2], 0.0, v[-1:]])

    got, want = tg.jit(f)(tg.asarray(x)), f(tg.asarray(x))
    for g, w in zip(got, want, strict=True):
        close(g, w)


def test_vmap() -> None:
    x = np.random.default_rng(2).normal(size=(3, 6)).astype(np.float32)
    check_vmap(lambda v: tnp.piecewise(v, [v < 0], [lambda t: -t, lambda t: t * 2]), (x,), (0,))
    check_vmap(lambda v: tnp.place(v, v > 0, tnp.asarray([5.0, 6.0]), inplace=False), (x,), (0,))
    check_vmap(lambda v: tnp.compress(v > 0, v, size=4), (x,), (0,))
    check_vmap(lambda v: tnp.packbits(v > 0, axis=0), (x,), (1,))


def test_grads() -> None:
    x = np.array([-1.5, -0.3, 0.4, 1.2, 2.0], np.float32)

    def f(v: tg.Tensor) -> tg.Tensor:
        p = tnp.piecewise(v, [v < 0, v > 1], [lambda t: t ** 3, lambda t: tnp.sin(t), lambda t: t * t])
        c = tnp.choose(tnp.asarray([0, 1, 0, 1, 1]), [v, v * v])
        q = tnp.place(v, v > 0, v[:2] * 3.0, inplace=False)
        return (p + c * q).sum() + tnp.kaiser(5, v[4]).sum() + tnp.compress(v > 0, v, size=3).sum()

    g = tg.grad(f)(tg.asarray(x)).numpy()
    close(g, fd_grad(f, x.astype(np.float64)), rtol=2e-2, atol=2e-2)


# ---- errors ----
def test_errors() -> None:
    x = tnp.arange(4.0)
    with pytest.raises(ValueError, match="inplace=False"):
        tnp.place(x, x > 1, tnp.asarray([1.0]))
    with pytest.raises(ValueError, match="inplace=False"):
        tnp.put(x, tnp.asarray([0]), 1.0)
    with pytest.raises(tg.ConcretizationError, match="size="):
        tg.jit(lambda v: tnp.compress(v > 1, v))(x)
    with pytest.raises(tg.ConcretizationError, match="size="):
        tg.jit(lambda v: tnp.extract(v > 1, v))(x)
    with pytest.raises(tg.ConcretizationError, match="mode='wrap'"):
        tg.jit(lambda v: tnp.choose((v > 1).astype(tnp.int32), [v, -v]))(x)
    with pytest.raises(tg.ConcretizationError, match="trim_zeros"):
        tg.jit(tnp.trim_zeros)(x)
    with pytest.raises(ValueError, match=r"outside \[0, 2\)"):
        tnp.choose(tnp.asarray([0, 2]), [x[:2], x[:2]])
    with pytest.raises(ValueError, match="funclist has 3 functions for 1 conditions"):
        tnp.piecewise(x, [x > 1], [1, 2, 3])
    with pytest.raises(NotImplementedError, match="boolean"):
        tnp.ix_(tnp.asarray([True, False]))
    with pytest.raises(ValueError, match="must be 1-dimensional, got shape"):
        tnp.ix_(tnp.zeros((2, 2), dtype=tnp.int32))
    with pytest.raises(TypeError, match="unpackbits: a must be uint8, got int32"):
        tnp.unpackbits(tnp.asarray([1, 2]))
    with pytest.raises(ValueError, match="bitorder"):
        tnp.packbits(tnp.asarray([1]), bitorder="middle")
    with pytest.raises(TypeError, match="bitwise_count: x must be integers"):
        tnp.bitwise_count(x)
    with pytest.raises(ValueError, match="bins has 3 entries for 2 dimensions"):
        tnp.histogramdd(tnp.zeros((5, 2)), bins=[2, 3, 4])
    with pytest.raises(ValueError, match=r"weights must have shape \(5,\)"):
        tnp.histogramdd(tnp.zeros((5, 2)), weights=tnp.ones(4))
    with pytest.raises(TypeError, match="M must be a static Python int"):
        tnp.hanning(2.5)
    with pytest.raises(NotImplementedError, match="matrix"):
        tnp.r_["r", x]
    with pytest.raises(TypeError, match="mgrid: index with slices"):
        tnp.mgrid[1]
    with pytest.raises(ValueError, match="condition has 6 entries"):
        tnp.compress([0, 0, 0, 0, 0, 1], x)


def test_matches_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.linspace(-2, 2, 9).astype(np.float32)
    close(tnp.piecewise(tnp.asarray(x), [x < 0], [lambda t: -t, 3.0]), jnp.piecewise(x, [x < 0], [lambda t: -t, 3.0]))
    close(tnp.kaiser(7, 3.0), jnp.kaiser(7, 3.0), rtol=1e-5)
    close(tnp.put(tnp.asarray(x), tnp.asarray([0, 20, -1]), 5.0, inplace=False),
          jnp.put(x, np.array([0, 20, -1]), 5.0, inplace=False))
    close(tnp.bitwise_count(tnp.asarray([-8, 7], dtype=tnp.int32)), jnp.bitwise_count(np.int32([-8, 7])))
    close(tnp.histogramdd(tnp.asarray(x.reshape(-1, 1)), bins=3)[0], jnp.histogramdd(x.reshape(-1, 1), bins=3)[0])
