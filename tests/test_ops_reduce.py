"""Reductions against numpy: axis as None, int, negative int and tuple (also empty), keepdims, JAX's result dtypes.

numpy sums in float64 as the reference; float results may differ from it by the rounding of each partial sum, so their
tolerance grows with the number of elements reduced. Integer sums wrap in the result dtype, as in numpy with `dtype=`.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import ALL, FLOATS, NUMERIC, arrays, assert_close, eps, np_dtype, shapes, to_tensor
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import DType, dtypes, to_inexact

Axis = int | tuple[int, ...] | None

# Hypothesis shapes have axes of size 1 to 3 (and 0-d shapes); zero-size inputs are covered by
# test_reduce_degenerate_shapes.
REDUCE_SHAPES = {"min_side": 1, "max_side": 3, "max_dims": 3}


def axes(ndim: int) -> st.SearchStrategy:
    """None, one axis (maybe negative), or a tuple of distinct axes (maybe empty, maybe negative)."""
    if ndim == 0:
        return st.sampled_from([None, ()])
    one = st.integers(-ndim, ndim - 1)
    many = st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).flatmap(
        lambda ax: st.tuples(*(st.sampled_from([a, a - ndim]) for a in ax)))
    return st.one_of(st.none(), one, many)


def _norm(axis: Axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in ((axis,) if isinstance(axis, int) else axis))


def _count(shape: tuple[int, ...], axis: Axis) -> int:
    return int(np.prod([shape[a] for a in _norm(axis, len(shape))], dtype=np.int64))


def sum_dtype(d: DType) -> DType:
    """JAX: bool and integers narrower than 32 bits sum in int32 (uint32 if unsigned); others keep their dtype."""
    if d.is_bool:
        return dtypes.int32
    if d.is_int and d.itemsize < 4:
        return dtypes.uint32 if d.is_unsigned else dtypes.int32
    return d


def _float_tol(d: DType, n: int, scale: float) -> dict[str, float]:
    """Summing n values of magnitude <= scale in dtype d: each partial sum may round by eps * (its magnitude)."""
    return {"rtol": 2 * eps(d), "atol": max(n, 1) * eps(d) * max(scale, 1e-30)}


@st.composite
def reduce_case(draw: Any, d: DType, lo: float = -10, hi: float = 10) -> tuple[np.ndarray, Axis, bool]:
    x = draw(arrays(d, shapes(**REDUCE_SHAPES), lo=lo, hi=hi))
    return x, draw(axes(x.ndim)), draw(st.booleans())


# ---- sum and prod ----
@pytest.mark.parametrize("d", ALL, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_sum(d: DType, data: st.DataObject) -> None:
    x, axis, keepdims = data.draw(reduce_case(d, lo=-100, hi=100) if d.is_float else reduce_case(d, lo=None, hi=None))
    out = sum_dtype(d)
    want = np.sum(x.astype(np.float64 if d.is_float else out.np), axis=axis, keepdims=keepdims)
    tol = _float_tol(d, _count(x.shape, axis), float(np.abs(x).max(initial=0))) if d.is_float else {}
    assert_close(tnp.sum(to_tensor(x, d), axis=axis, keepdims=keepdims), want, dtype=out, **tol)
    assert_close(to_tensor(x, d).sum(axis=axis, keepdims=keepdims), want, dtype=out, **tol)


@pytest.mark.parametrize("d", ALL, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_prod(d: DType, data: st.DataObject) -> None:
    x, axis, keepdims = data.draw(reduce_case(d, lo=0.8, hi=1.25) if d.is_float else reduce_case(d, lo=-3, hi=3))
    if d.is_float:
        x = x * np.where(np.arange(x.size).reshape(x.shape) % 3 == 0, -1, 1).astype(x.dtype)
    out = sum_dtype(d)
    with np.errstate(over="ignore"):
        want = np.prod(x.astype(np.float64 if d.is_float else out.np), axis=axis, keepdims=keepdims)
    tol = {"rtol": 2 * _count(x.shape, axis) * eps(d), "atol": 0} if d.is_float else {}
    assert_close(tnp.prod(to_tensor(x, d), axis=axis, keepdims=keepdims), want, dtype=out, **tol)


@pytest.mark.x64
def test_sum_and_prod_with_dtype_argument() -> None:
    x = np.array([[100, 100, 100], [-128, 127, 1]], np.int8)
    assert_close(tnp.sum(to_tensor(x), axis=1, dtype=dtypes.int8), np.sum(x, axis=1, dtype=np.int8), dtype=dtypes.int8)
    assert_close(tnp.sum(to_tensor(x), dtype="float32"), np.sum(x, dtype=np.float32), dtype=dtypes.float32)
    assert_close(tnp.prod(to_tensor(x), axis=0, dtype=dtypes.int64), np.prod(x, axis=0, dtype=np.int64),
                 dtype=dtypes.int64)


# ---- max and min ----
@pytest.mark.x64
@pytest.mark.parametrize("d", ALL, ids=str)
@pytest.mark.parametrize("name", ["max", "min"])
@settings(max_examples=12)
@given(data=st.data())
def test_max_min(name: str, d: DType, data: st.DataObject) -> None:
    x, axis, keepdims = data.draw(reduce_case(d, lo=-1e4, hi=1e4) if d.is_float else reduce_case(d, lo=None, hi=None))
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    assert_close(getattr(tnp, name)(to_tensor(x, d), axis=axis, keepdims=keepdims), want, dtype=d)
    assert_close(getattr(to_tensor(x, d), name)(axis=axis, keepdims=keepdims), want, dtype=d)


def test_amax_amin_are_max_min() -> None:
    x = np.array([[3, -1, 2], [0, 5, -7]], np.int16)
    assert_close(tnp.amax(to_tensor(x), axis=0), np.amax(x, axis=0), dtype=dtypes.int16)
    assert_close(tnp.amin(to_tensor(x), axis=-1), np.amin(x, axis=-1), dtype=dtypes.int16)


# ---- mean, var, std ----
@pytest.mark.x64
@pytest.mark.parametrize("d", NUMERIC + (dtypes.bool,), ids=str)
@settings(max_examples=12)
@given(data=st.data())
def test_mean(d: DType, data: st.DataObject) -> None:
    x, axis, keepdims = data.draw(reduce_case(d, lo=-100, hi=100))
    out = to_inexact(d)
    want = np.mean(x.astype(np.float64), axis=axis, keepdims=keepdims)
    tol = _float_tol(out, _count(x.shape, axis), float(np.abs(x.astype(np.float64)).max(initial=0)))
    assert_close(tnp.mean(to_tensor(x, d), axis=axis, keepdims=keepdims), want, dtype=out, **tol)
    assert_close(to_tensor(x, d).mean(axis=axis, keepdims=keepdims), want, dtype=out, **tol)


def test_mean_with_an_integer_dtype_divides_in_it() -> None:
    # as jnp.mean: an integer dtype= sums and divides in that dtype, truncating toward zero (it divided in floats)
    x = np.array([[1, 2, 4], [-1, -2, -4]], np.int32)
    for f in (tnp.mean, tg.jit(tnp.mean, static_argnames=("axis", "dtype"))):
        assert_close(f(to_tensor(x), axis=1, dtype=dtypes.int32), [2, -2], dtype=dtypes.int32)
        assert_close(f(to_tensor(x), axis=0, dtype=dtypes.int8), [0, 0, 0], dtype=dtypes.int8)


@pytest.mark.x64
@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning")
@pytest.mark.parametrize("d", FLOATS + (dtypes.int32, dtypes.uint8), ids=str)
@pytest.mark.parametrize("name", ["var", "std"])
@settings(max_examples=12)
@given(data=st.data())
def test_var_std(name: str, d: DType, data: st.DataObject) -> None:
    x, axis, keepdims = data.draw(reduce_case(d, lo=-10, hi=10))
    ddof = data.draw(st.sampled_from([0, 1]))
    n = _count(x.shape, axis)
    out = to_inexact(d)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x.astype(np.float64), axis=axis, keepdims=keepdims, ddof=ddof)
    scale = float(np.abs(x.astype(np.float64)).max(initial=0))
    # var: squares of deviations up to (2 scale)^2, summed; std: its square root, whose error is relative
    tol = _float_tol(out, 4 * n, 4 * scale * scale) if name == "var" else {"rtol": 8 * n * eps(out),
                                                                            "atol": 4 * scale * np.sqrt(n * eps(out))}
    got = getattr(tnp, name)(to_tensor(x, d), axis=axis, keepdims=keepdims, ddof=ddof)
    assert_close(got, want, dtype=out, **tol)


def test_var_std_ddof_equal_to_count_is_nan() -> None:
    # as jnp.var (and nanvar): no degrees of freedom left is NaN; numpy divides by zero, inf for a nonzero sum
    x = np.array([[1.0, 2.0], [3.0, 5.0]], np.float32)
    for ddof in (2, 3):
        for name in ("var", "std"):
            assert_close(getattr(tnp, name)(to_tensor(x), axis=0, ddof=ddof), np.full(2, np.nan, np.float32))
            f = tg.jit(lambda v, name=name, ddof=ddof: getattr(tnp, name)(v, axis=0, ddof=ddof))
            assert_close(f(to_tensor(x)), np.full(2, np.nan, np.float32))


# ---- where= and initial=, as numpy's and JAX's ----
WHERE_CASES: list[Any] = [
    ("sum", {}), ("sum", {"initial": 2.5}), ("prod", {}), ("prod", {"initial": -2.0}), ("mean", {}), ("var", {}),
    ("std", {"ddof": 1}), ("max", {"initial": -1.0}), ("min", {"initial": 0.5}), ("amax", {"initial": 0.0}),
    ("any", {}), ("all", {}),
]


@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning", "ignore:invalid value:RuntimeWarning",
                            "ignore:Degrees of freedom:RuntimeWarning")
@pytest.mark.parametrize("name,kw", WHERE_CASES, ids=[f"{n}-{'-'.join(k)}" for n, k in WHERE_CASES])
def test_where_and_initial(name: str, kw: dict) -> None:
    # only the elements where `where` is True; a row with none selected is the identity (NaN for mean and var,
    # `initial` for max and min), as numpy's and JAX's. They raised TypeError: unexpected keyword
    x = np.array([[0.5, -1.5, 2.0, 3.0], [1.0, 0.0, -2.0, 4.0], [0.0, 1.0, 3.0, -0.5]], np.float32)
    w = np.array([[True, False, True, True], [False, False, False, False], [True, True, False, True]])
    for axis in (None, 0, 1):
        with np.errstate(all="ignore"):
            want = getattr(np, name)(x.astype(np.float64), axis=axis, where=w, **kw)
        out = dtypes.bool if name in ("any", "all") else dtypes.float32
        got = getattr(tnp, name)(to_tensor(x), axis=axis, where=to_tensor(w), **kw)
        assert_close(got, want, dtype=out, rtol=1e-6, atol=1e-6)
        f = tg.jit(lambda v, m, axis=axis: getattr(tnp, name)(v, axis=axis, where=m, **kw))
        assert_close(f(to_tensor(x), to_tensor(w)), want, dtype=out, rtol=1e-6, atol=1e-6)
    # a where= that broadcasts, through the method
    want = getattr(np, name)(x.astype(np.float64), axis=1, where=w[0], keepdims=True, **kw)
    method = getattr(to_tensor(x), "max" if name == "amax" else name)
    assert_close(method(axis=1, where=to_tensor(w[0]), keepdims=True, **kw), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "max"])
def test_where_gives_the_elements_left_out_a_zero_gradient(name: str) -> None:
    # as jax.grad: the gradient flows only to the selected elements (finite differences elsewhere are zero too)
    x = np.array([[0.5, -1.5, 2.0, 3.0], [1.0, 0.25, -2.0, 4.0]], np.float32)
    w = np.array([[True, False, True, True], [False, True, True, False]])
    kw = {"initial": -10.0} if name == "max" else {}

    def f(v: tg.Tensor) -> tg.Tensor:
        return tnp.sum(getattr(tnp, name)(v, axis=1, where=to_tensor(w), **kw) * to_tensor(np.float32([1.0, -2.0])))

    g = tg.grad(f)(to_tensor(x)).numpy()
    np.testing.assert_array_equal(g[~w], 0)
    np.testing.assert_allclose(tg.jit(tg.grad(f))(to_tensor(x)).numpy(), g, rtol=1e-6)
    h = 1e-3
    for i, j in zip(*np.nonzero(w), strict=True):
        e = np.zeros_like(x)
        e[i, j] = h
        fd = (f(to_tensor(x + e)).item() - f(to_tensor(x - e)).item()) / (2 * h)
        np.testing.assert_allclose(g[i, j], fd, rtol=1e-2, atol=1e-2)


def test_initial_on_integers_and_empty_slices() -> None:
    x = np.array([[3, -1, 2], [0, 5, -7]], np.int8)
    assert_close(tnp.sum(to_tensor(x), axis=1, initial=100), np.sum(x, axis=1, initial=100), dtype=dtypes.int32)
    assert_close(tnp.prod(to_tensor(x), axis=0, initial=-2), np.prod(x, axis=0, initial=-2), dtype=dtypes.int32)
    assert_close(tnp.max(to_tensor(x), axis=1, initial=4), np.max(x, axis=1, initial=4), dtype=dtypes.int8)
    assert_close(tnp.amin(to_tensor(x), initial=-100), np.int8(-100), dtype=dtypes.int8)
    empty = np.zeros((0, 3), np.float32)
    for name in ("sum", "prod", "max", "min"):
        assert_close(getattr(tnp, name)(to_tensor(empty), axis=0, initial=2.0),
                     getattr(np, name)(empty, axis=0, initial=2.0), dtype=dtypes.float32)
    with pytest.raises(ValueError, match="max: a where= mask needs initial="):
        tnp.max(to_tensor(x), where=to_tensor(x > 0))
    with pytest.raises(ValueError, match="min: initial must be a scalar"):
        tnp.min(to_tensor(x), initial=np.zeros(2))
    with pytest.raises(ValueError, match="zero-size array to reduction operation max"):
        tnp.max(to_tensor(empty), axis=0)


def test_var_std_dtype_argument() -> None:
    # as jnp.var: computed in dtype= (half floats in float32) and returned in it; a complex input needs a complex
    # dtype=, and std's must be inexact
    x = np.array([1.0, 2.0, 4.0], np.float32)
    want = np.var(x.astype(np.float64))
    assert_close(tnp.var(to_tensor(x), dtype=dtypes.float16), np.float16(want), dtype=dtypes.float16)
    assert_close(tnp.std(to_tensor(x.astype(np.int8)), dtype="float16"), np.float16(np.sqrt(want)),
                 dtype=dtypes.float16)
    z = to_tensor(np.array([1 + 1j, 1 - 1j, 2j], np.complex64))
    assert_close(tnp.var(z, dtype="complex64"), np.complex64(16 / 9), dtype=dtypes.complex64)
    with pytest.raises(ValueError, match="var: dtype=float32 for complex values"):
        tnp.var(z, dtype="float32")
    with pytest.raises(ValueError, match="std: dtype must be a float or complex type"):
        tnp.std(to_tensor(x), dtype="int32")
    # mean= gives the mean (keepdims shape) the deviations are taken from
    assert_close(tnp.var(to_tensor(x), mean=to_tensor(np.float32([0.0]))), np.float32(7.0), dtype=dtypes.float32)


# ---- any and all ----
@pytest.mark.parametrize("d", [dtypes.bool, dtypes.int32, dtypes.uint8, dtypes.float32, dtypes.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["any", "all"])
@settings(max_examples=12)
@given(data=st.data())
def test_any_all(name: str, d: DType, data: st.DataObject) -> None:
    # mostly zeros or mostly non-zeros, so that both answers come up
    fill = data.draw(st.sampled_from([0, 1]))
    x = data.draw(hnp.arrays(np_dtype(d), hnp.array_shapes(min_dims=0, **REDUCE_SHAPES),
                             elements=st.sampled_from([fill] * 5 + [1 - fill]).map(np_dtype(d).type)))
    axis, keepdims = data.draw(axes(x.ndim)), data.draw(st.booleans())
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    assert_close(getattr(tnp, name)(to_tensor(x, d), axis=axis, keepdims=keepdims), want, dtype=dtypes.bool)
    assert_close(getattr(to_tensor(x, d), name)(axis=axis, keepdims=keepdims), want, dtype=dtypes.bool)


# ---- argmax and argmin: the first of ties, indices in JAX's default int (int64 in x64, for 64-bit dtypes) ----
@pytest.mark.parametrize("d", ALL, ids=str)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@settings(max_examples=12)
@given(data=st.data())
def test_argmax_argmin(name: str, d: DType, data: st.DataObject) -> None:
    values = [False, True] if d.is_bool else [0, 1, 2, 3] if d.is_unsigned else [-2, -1, 0, 1, 2]
    x = data.draw(hnp.arrays(np_dtype(d), hnp.array_shapes(min_dims=1, **REDUCE_SHAPES),
                             elements=st.sampled_from(values).map(np_dtype(d).type)))
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
    keepdims = data.draw(st.booleans())
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    idx = dtypes.default_int
    assert_close(getattr(tnp, name)(to_tensor(x, d), axis=axis, keepdims=keepdims), want, dtype=idx)
    assert_close(getattr(to_tensor(x, d), name)(axis=axis), getattr(np, name)(x, axis=axis), dtype=idx)


# ---- cumsum and cumprod ----
@pytest.mark.parametrize("d", ALL, ids=str)
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@settings(max_examples=10)
@given(data=st.data())
def test_cumulative(name: str, d: DType, data: st.DataObject) -> None:
    lim = (0.8, 1.25) if name == "cumprod" and d.is_float else (-100, 100) if d.is_float else (-3, 3)
    x = data.draw(arrays(d, shapes(**REDUCE_SHAPES), lo=lim[0], hi=lim[1]))
    axis = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1) if x.ndim else st.nothing()))
    out = sum_dtype(d) if d.is_bool else d   # as jnp.cumsum: the input's dtype (bool counts in int32)
    want = getattr(np, name)(x.astype(np.float64 if d.is_float else out.np), axis=axis,
                             dtype=None if d.is_float else out.np)
    n = x.size if axis is None else x.shape[axis]
    scale = float(np.abs(x.astype(np.float64)).max(initial=0))
    tol = ({"rtol": 2 * n * eps(d), "atol": 0} if name == "cumprod" else _float_tol(d, n, scale)) if d.is_float else {}
    assert_close(getattr(tnp, name)(to_tensor(x, d), axis=axis), want, dtype=out, **tol)
    assert_close(getattr(to_tensor(x, d), name)(axis=axis), want, dtype=out, **tol)


@pytest.mark.parametrize("d", [dtypes.float16, dtypes.bfloat16])
def test_half_float_scans_of_a_few_elements_compile(d: DType) -> None:
    """A float16 or bfloat16 cumprod / cumsum of 4 or 8 elements (flattened or not): its lanes' products were
    combined by halves down to a `<1 x float>` whose rounding was written as a scalar's, which LLVM rejected (the
    CI profile's draw of a 2 x 2 float16 cumprod). Exact values (powers of two), as numpy's."""
    for x in (np.array([1, 2, 0.5, 4], np.float32), np.array([[2, 0.5], [4, 0.25]], np.float32),
              np.array([1, 2, 4, 0.5, 0.25, 2, 8, 0.125], np.float32)):
        t = to_tensor(x, d)
        np.testing.assert_array_equal(tnp.cumprod(t, axis=None).numpy().astype(np.float32), np.cumprod(x))
        np.testing.assert_array_equal(tnp.cumsum(t, axis=None).numpy().astype(np.float32), np.cumsum(x))


@settings(max_examples=15, deadline=None)
@given(n=st.integers(30, 1200), rows=st.integers(1, 3), reverse=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_long_cumulative_axes(n: int, rows: int, reverse: bool, seed: int) -> None:
    # past 32 elements a scan is a loop (cumsum, cumprod) or doubling steps (cummax, cummin, cumlogsumexp): values
    # as numpy's, reversed or not, with NaNs kept from where they appear; and no n x n triangle
    from tgfx import lax
    from tgfx.ir.uop import prod
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, n)).astype(np.float32)
    x[0, rng.integers(0, n)] = np.nan if n % 3 == 0 else x[0, 0]
    flip = (lambda a: a[:, ::-1]) if reverse else (lambda a: a)
    out = tnp.cumsum(to_tensor(x), axis=1)
    np.testing.assert_allclose(out.numpy(), np.cumsum(x.astype(np.float64), axis=1), rtol=1e-4, atol=1e-4 * n ** 0.5)
    assert max(prod(u.shape) for u in out.uop.toposort() if u.shape) < rows * n * 80   # (a triangle: rows n^2)
    for name, ref in (("cummax", np.maximum), ("cummin", np.minimum)):
        got = getattr(lax, name)(to_tensor(x), axis=1, reverse=reverse).numpy()
        np.testing.assert_array_equal(got, flip(ref.accumulate(flip(x), axis=1)))
    y = (0.5 + rng.random((rows, n))).astype(np.float32) ** (1 / n)
    np.testing.assert_allclose(tnp.cumprod(to_tensor(y), axis=1).numpy(), np.cumprod(y, axis=1), rtol=1e-5)
    lse = lax.cumlogsumexp(to_tensor(np.nan_to_num(x)), axis=1, reverse=reverse).numpy()
    np.testing.assert_allclose(lse, flip(np.logaddexp.accumulate(flip(np.nan_to_num(x)), axis=1)), rtol=1e-5, atol=1e-5)


def test_a_long_cumsum_is_a_loop_in_numpys_order_and_its_gradient_a_loop_too() -> None:
    # one loop kernel over the axis (the other elements its lanes), summing in numpy's order: the same bits; along
    # the last axis, a transposed copy in and out around it (the loop reads and writes a step's slice contiguously)
    x = np.random.default_rng(3).standard_normal((3, 1000)).astype(np.float32)
    for axis, kernels in ((0, 2), (1, 4)):   # (and the start value's buffer)
        xt = to_tensor(x if axis == 1 else np.ascontiguousarray(x.T)).realize()
        tg.counters.reset()
        out = tnp.cumsum(xt, axis=axis).numpy()
        assert tg.counters.kernel_count == kernels
        np.testing.assert_array_equal(out, np.cumsum(xt.numpy(), axis=axis))
    # cumprod's gradient through the loop is exact where a factor is 0 (a quotient by it would be inf or NaN):
    # d/dx_j sum_i w_i prod_{k <= i} x_k = sum_{i >= j} w_i prod_{k <= i, k != j} x_k
    v = np.random.default_rng(4).uniform(0.5, 1.5, 40).astype(np.float64)
    v[[7, 20]] = 0.0
    w = np.random.default_rng(5).standard_normal(40)
    g = tg.grad(lambda v: (tnp.cumprod(v) * to_tensor(w.astype(np.float32))).sum())(to_tensor(v.astype(np.float32)))
    want = [sum(w[i] * np.prod(np.delete(v[:i + 1], j)) for i in range(j, 40)) for j in range(40)]
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-6)


def test_sums_of_zeros_are_positive_zero() -> None:
    # a sum starts at -0.0 (the identity) and is -0.0 only when every term is: with "nsz" on the reduce's adds, LLVM
    # folded acc + 0.0 to acc and a sum of zeros (padding, a constant) came out -0.0
    p = tnp.pad(tnp.ones((2, 3)), [(0, 0), (1, 1)])
    for got in (tnp.sum(p, axis=0), tnp.nansum(p, axis=0), tnp.sum(tnp.zeros((2, 3)), axis=0)):
        assert not np.signbit(got.numpy()).any()
    assert np.signbit(tnp.sum(-tnp.zeros((2, 3)), axis=0).numpy()).all()



@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_a_sum_of_nothing_is_positive_zero(dtype: type) -> None:
    # the sum's accumulator starts at -0.0 (above); with no terms it was that start, and an empty sum printed -0.
    x = np.zeros((0, 3), dtype)
    with tg.enable_x64(dtype == np.float64):
        t = tnp.asarray(x)
        for got, want in ((tnp.sum(t), np.sum(x)), (tnp.sum(t, axis=0), np.sum(x, axis=0)),
                          (tg.jit(lambda v: v.sum(0))(t), np.sum(x, axis=0)),
                          (t.T @ t, x.T @ x), (tnp.einsum("ij,ij->j", t, t), np.einsum("ij,ij->j", x, x))):
            got = got.numpy()
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(np.real(got)), np.signbit(np.real(want)))
            np.testing.assert_array_equal(np.signbit(np.imag(got)), np.signbit(np.imag(want)))


def test_cumsum_keeps_a_leading_negative_zero() -> None:
    # a short cumsum is a masked sum of a triangle: masked with 0.0, a first element -0.0 came out 0.0
    for n in (3, 40):   # the triangle, and the loop
        x = np.zeros(n, np.float32)
        x[0], x[2] = -0.0, -0.0
        for f in (tnp.cumsum, tg.lax.cumsum):
            np.testing.assert_array_equal(np.signbit(f(tnp.asarray(x)).numpy()), np.signbit(np.cumsum(x)))


def test_cumsum_with_dtype() -> None:
    x = np.array([100, 100, 100, -50], np.int8)
    assert_close(tnp.cumsum(to_tensor(x), dtype=dtypes.int8), np.cumsum(x, dtype=np.int8), dtype=dtypes.int8)
    assert_close(tnp.cumsum(to_tensor(x), dtype=dtypes.float32), np.cumsum(x, dtype=np.float32), dtype=dtypes.float32)


@pytest.mark.parametrize("x64", [False, True])
def test_cumulative_sums_and_products_keep_the_input_dtype(x64: bool) -> None:
    # as jnp.cumsum: int8 wraps in int8 and uint32 stays uint32 (also with x64); only bool counts in the default
    # integer. cumulative_sum alone promotes narrow integers, as sum (JAX's _cumsum_with_promotion)
    from tgfx.config import Context
    x = np.array([100, 100, -50], np.int8)
    with Context(TGFX_ENABLE_X64=int(x64)):
        wide = dtypes.int64 if x64 else dtypes.int32
        for f in (tnp.cumsum, tnp.nancumsum, tg.jit(tnp.cumsum)):
            assert_close(f(to_tensor(x)), np.cumsum(x, dtype=np.int8), dtype=dtypes.int8)
        for f in (tnp.cumprod, tnp.nancumprod, tnp.cumulative_prod):
            assert_close(f(to_tensor(x)), np.cumprod(x, dtype=np.int8), dtype=dtypes.int8)
        u = np.array([4_000_000_000, 1], np.uint32)
        assert_close(tnp.cumsum(to_tensor(u)), np.cumsum(u, dtype=np.uint32), dtype=dtypes.uint32)
        assert_close(tnp.cumulative_sum(to_tensor(x)), np.cumsum(x, dtype=wide.np), dtype=wide)
        b = np.array([True, False, True])
        for f in (tnp.cumsum, tnp.cumprod, tnp.cumulative_sum, tnp.cumulative_prod):
            assert f(to_tensor(b)).dtype is wide
    # dtype=bool accumulates x != 0 (so -1 and 1 do not cancel) and returns bools, as JAX's
    v = to_tensor(np.array([-1, 1, 0], np.int32))
    assert_close(tnp.cumsum(v, dtype=bool), [True, True, True], dtype=dtypes.bool)
    assert_close(tnp.cumprod(v, dtype=bool), [True, True, False], dtype=dtypes.bool)


# ---- NaN and infinity ----
def test_reductions_propagate_nan() -> None:
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0], [np.nan, -1.0, np.nan]], np.float32)
    t = to_tensor(x)
    for name in ["sum", "prod", "max", "min", "mean", "var", "std", "cumsum", "cumprod"]:
        for axis in [None, 0, 1]:
            got, want = getattr(tnp, name)(t, axis=axis), getattr(np, name)(x, axis=axis)
            assert_close(got, want, dtype=dtypes.float32, rtol=1e-5, atol=1e-5)


def test_argmax_argmin_return_the_first_nan() -> None:
    x = np.array([[1.0, np.nan, 3.0, np.nan], [4.0, 5.0, 6.0, -1.0], [np.inf, -np.inf, np.nan, 2.0]], np.float32)
    for name in ["argmax", "argmin"]:
        for axis in [None, 0, 1]:
            assert_close(getattr(tnp, name)(to_tensor(x), axis=axis), getattr(np, name)(x, axis=axis),
                         dtype=dtypes.int32)


def test_argmax_and_max_gradient_of_a_recomputed_expression() -> None:
    # the value is computed once in the max kernel and again where it is compared with that maximum: both must round
    # alike (an FMA that LLVM fuses in one kernel and not the other gave argmax == n and zero max gradients)
    import tgfx as tg
    rng = np.random.default_rng(0)
    u = tg.asarray(rng.uniform(1e-3, 1 - 1e-3, (20000, 3)).astype(np.float32))
    logits = tg.asarray(np.log(np.float32([0.1, 0.2, 0.7])))

    def expr(u: Any) -> Any:
        return -tnp.log(-tnp.log(u)) * 1.5 + logits

    idx = tg.jit(lambda u: tnp.argmax(expr(u), axis=-1))(u).numpy()
    np.testing.assert_array_equal(idx, np.argmax(tg.jit(expr)(u).numpy(), axis=-1))
    g = tg.jit(tg.grad(lambda u: tnp.max(expr(u), axis=-1).sum()))(u).numpy()
    assert (np.count_nonzero(g, axis=-1) == 1).all()
    key = tg.random.key(14)
    gumbel = tg.jit(lambda k: tnp.argmax(tg.random.gumbel(k, (20000, 3)) + logits, axis=-1))(key).numpy()
    assert gumbel.max() < 3


def test_reductions_with_infinities() -> None:
    x = np.array([[np.inf, 1.0, -np.inf], [np.inf, 2.0, 3.0], [-np.inf, -np.inf, 0.0]], np.float32)
    for name in ["sum", "max", "min", "mean", "any", "all"]:
        for axis in [None, 0, 1]:
            with np.errstate(invalid="ignore"):
                want = getattr(np, name)(x, axis=axis)
            assert_close(getattr(tnp, name)(to_tensor(x), axis=axis), want)


def test_float16_sum_does_not_lose_small_terms_badly() -> None:
    """512 ones in float16: every partial sum is exact, so the total is too."""
    x = np.ones((8, 64), np.float16)
    assert_close(tnp.sum(to_tensor(x)), np.float16(512), dtype=dtypes.float16, rtol=0, atol=0)
    assert_close(tnp.sum(to_tensor(x), axis=1), np.full(8, 64, np.float16), dtype=dtypes.float16, rtol=0, atol=0)


# ---- degenerate shapes: 0-d, size-1 and zero-size reduced axes ----




DEGENERATE: list[Any] = [
    pytest.param((), None, id="0d-None"),
    pytest.param((), (), id="0d-empty-tuple"),
    pytest.param((2, 3), (), id="empty-tuple"),
    pytest.param((1, 3), 0, id="size1-axis0"),
    pytest.param((3, 1), -1, id="size1-axis-1"),
    pytest.param((1,), None, id="size1-None"),
    pytest.param((2, 1, 3), (0, 1), id="size1-tuple"),
    pytest.param((0, 3), 0, id="size0-axis0"),
    pytest.param((0, 3), None, id="size0-None"),
    pytest.param((3, 0), 0, id="size0-kept"),
]


@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "any", "all"])
@pytest.mark.parametrize("shape,axis", DEGENERATE)
def test_reduce_degenerate_shapes(shape: tuple[int, ...], axis: Axis, name: str) -> None:
    x = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)
    for keepdims in (False, True):
        with np.errstate(all="ignore"):
            want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
        assert_close(getattr(tnp, name)(to_tensor(x), axis=axis, keepdims=keepdims), want)


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin", "cumsum", "cumprod"])
@pytest.mark.parametrize("shape,axis", [
    pytest.param((), None, id="0d"),
    pytest.param((1, 3), 0, id="size1-axis0"),
    pytest.param((3, 1), 1, id="size1-axis1"),
])
def test_reduce_degenerate_shapes_nonempty(shape: tuple[int, ...], axis: Axis, name: str) -> None:
    x = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)
    assert_close(getattr(tnp, name)(to_tensor(x), axis=axis), getattr(np, name)(x, axis=axis))


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumulative_of_zero_size(name: str) -> None:
    x = np.zeros((2, 0), np.float32)
    assert_close(getattr(tnp, name)(to_tensor(x), axis=1), getattr(np, name)(x, axis=1))
    assert_close(getattr(tnp, name)(to_tensor(x)), getattr(np, name)(x))
