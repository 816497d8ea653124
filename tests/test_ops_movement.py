"""Movement functions against numpy: views (reshape, transpose, broadcast, flip, ...), padding, joining, splitting.

They move values without arithmetic, so results must be exact, in every dtype; a few dtypes stand for all of them.
"""
from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pytest
from helpers import arrays, assert_close, np_dtype, shapes, to_tensor
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import DType, dtypes

DTYPES = (dtypes.float32, dtypes.int8, dtypes.bool, dtypes.bfloat16, dtypes.uint64)



def _values(d: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Distinct values (where the dtype allows), so any misplaced element shows."""
    n = int(np.prod(shape, dtype=np.int64))
    if d.is_bool:
        return (np.arange(n) % 3 == 1).reshape(shape)
    return (np.arange(n) % 100 + 1).astype(np_dtype(d)).reshape(shape)


def _check(got: Any, want: np.ndarray, d: DType) -> None:
    assert_close(got, want, dtype=d, rtol=0, atol=0)


# ---- reshape, ravel, transpose, swapaxes, moveaxis, .T ----
@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_reshape(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=4)))
    new = list(data.draw(st.permutations(list(x.shape))))
    # regroup: split or merge neighbouring factors, maybe with one -1
    target = tuple(new) if data.draw(st.booleans()) else (int(np.prod(new[:1], dtype=np.int64)),
                                                          int(np.prod(new[1:], dtype=np.int64)))
    if target and x.size and data.draw(st.booleans()):
        k = data.draw(st.integers(0, len(target) - 1))
        target = target[:k] + (-1,) + target[k + 1:]
    assume(x.size or -1 not in target)
    want = x.reshape(target)
    _check(tnp.reshape(to_tensor(x, d), target), want, d)
    _check(to_tensor(x, d).reshape(target), want, d)
    if target:
        _check(to_tensor(x, d).reshape(*target), want, d)
    _check(tnp.ravel(to_tensor(x, d)), x.ravel(), d)
    _check(to_tensor(x, d).flatten(), x.flatten(), d)


@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_transpose(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=4)))
    perm = data.draw(st.permutations(range(x.ndim)))
    perm = [p - x.ndim if data.draw(st.booleans()) else p for p in perm]
    _check(tnp.transpose(to_tensor(x, d)), np.transpose(x), d)
    _check(tnp.transpose(to_tensor(x, d), perm), np.transpose(x, perm), d)
    _check(to_tensor(x, d).T, x.T, d)
    _check(to_tensor(x, d).transpose(), x.transpose(), d)
    _check(to_tensor(x, d).transpose(perm), x.transpose(perm), d)
    if x.ndim:
        _check(to_tensor(x, d).transpose(*perm), x.transpose(*perm), d)


@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_swapaxes_moveaxis(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(min_dims=1, max_dims=4)))
    ax = st.integers(-x.ndim, x.ndim - 1)
    a, b = data.draw(ax), data.draw(ax)
    _check(tnp.swapaxes(to_tensor(x, d), a, b), np.swapaxes(x, a, b), d)
    _check(to_tensor(x, d).swapaxes(a, b), x.swapaxes(a, b), d)
    _check(tnp.moveaxis(to_tensor(x, d), a, b), np.moveaxis(x, a, b), d)
    k = data.draw(st.integers(0, x.ndim))
    src = data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=k, max_size=k, unique=True))
    dst = data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=k, max_size=k, unique=True))
    _check(tnp.moveaxis(to_tensor(x, d), src, dst), np.moveaxis(x, src, dst), d)


def test_mT_swaps_the_last_two_axes() -> None:
    x = _values(dtypes.float32, (2, 3, 4))
    _check(to_tensor(x).mT, np.swapaxes(x, -1, -2), dtypes.float32)


# ---- broadcasting, expand_dims, squeeze ----
@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_broadcast_to(d: DType, data: st.DataObject) -> None:
    shape = data.draw(shapes(max_dims=3))
    small = data.draw(hnp.broadcastable_shapes(shape, min_dims=0, max_dims=len(shape), max_side=4))
    x = data.draw(arrays(d, small))
    target = np.broadcast_shapes(small, shape)
    _check(tnp.broadcast_to(to_tensor(x, d), target), np.broadcast_to(x, target), d)


def test_broadcast_arrays() -> None:
    a, b = _values(dtypes.float32, (3, 1)), _values(dtypes.int32, (4,))
    ta, tb = tnp.broadcast_arrays(to_tensor(a), to_tensor(b))
    na, nb = np.broadcast_arrays(a, b)
    _check(ta, na, dtypes.float32)
    _check(tb, nb, dtypes.int32)


@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_expand_dims_squeeze(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=3, max_side=3)))
    nd = x.ndim + 1
    axis = data.draw(st.integers(-nd, nd - 1))
    _check(tnp.expand_dims(to_tensor(x, d), axis), np.expand_dims(x, axis), d)
    two = data.draw(st.lists(st.integers(0, nd), min_size=2, max_size=2, unique=True))
    _check(tnp.expand_dims(to_tensor(x, d), two), np.expand_dims(x, two), d)
    y = np.expand_dims(x, two)
    _check(tnp.squeeze(to_tensor(y, d)), np.squeeze(y), d)
    _check(to_tensor(y, d).squeeze(), y.squeeze(), d)
    _check(tnp.squeeze(to_tensor(y, d), axis=tuple(two)), np.squeeze(y, axis=tuple(two)), d)
    _check(tnp.squeeze(to_tensor(y, d), axis=two[0] - y.ndim), np.squeeze(y, axis=two[0] - y.ndim), d)


# ---- flip, roll ----
@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_flip(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=3)))
    _check(tnp.flip(to_tensor(x, d)), np.flip(x), d)
    if x.ndim:
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
        _check(tnp.flip(to_tensor(x, d), axis), np.flip(x, axis), d)
        many = tuple(data.draw(st.lists(st.integers(0, x.ndim - 1), unique=True)))
        _check(tnp.flip(to_tensor(x, d), many), np.flip(x, many), d)
    if x.ndim >= 2:
        _check(tnp.fliplr(to_tensor(x, d)), np.fliplr(x), d)
        _check(tnp.flipud(to_tensor(x, d)), np.flipud(x), d)


@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_roll(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=3, min_side=1)))
    shift = data.draw(st.integers(-7, 7))
    _check(tnp.roll(to_tensor(x, d), shift), np.roll(x, shift), d)
    if x.ndim:
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
        _check(tnp.roll(to_tensor(x, d), shift, axis=axis), np.roll(x, shift, axis=axis), d)
        axes = tuple(data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=1, unique=True)))
        shifts = tuple(data.draw(st.lists(st.integers(-5, 5), min_size=len(axes), max_size=len(axes))))
        _check(tnp.roll(to_tensor(x, d), shifts, axis=axes), np.roll(x, shifts, axis=axes), d)
        _check(tnp.roll(to_tensor(x, d), shift, axis=axes), np.roll(x, shift, axis=axes), d)


# ---- pad ----
@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int8, dtypes.bool], ids=str)
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
@settings(max_examples=8)
@given(data=st.data())
def test_pad(mode: str, d: DType, data: st.DataObject) -> None:
    """Widths up to twice an axis's length, so reflect and wrap go round more than once."""
    x = data.draw(arrays(d, shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)))
    widths = [tuple(data.draw(st.lists(st.integers(0, 2 * s), min_size=2, max_size=2))) for s in x.shape]
    _check(tnp.pad(to_tensor(x, d), widths, mode=mode), np.pad(x, widths, mode=mode), d)
    k = data.draw(st.integers(0, 3))
    _check(tnp.pad(to_tensor(x, d), k, mode=mode), np.pad(x, k, mode=mode), d)
    _check(tnp.pad(to_tensor(x, d), (1, k), mode=mode), np.pad(x, (1, k), mode=mode), d)


@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int16, dtypes.bfloat16, dtypes.bool], ids=str)
def test_pad_constant_values(d: DType) -> None:
    x = _values(d, (2, 3))
    v = True if d.is_bool else 7
    _check(tnp.pad(to_tensor(x, d), ((1, 2), (0, 1)), constant_values=v),
           np.pad(x, ((1, 2), (0, 1)), constant_values=v), d)


@pytest.mark.parametrize("d", [dtypes.float32, dtypes.int16], ids=str)
@pytest.mark.parametrize("mode,kw", [
    ("constant", {"constant_values": (1, 3)}), ("constant", {"constant_values": ((1, 2), (3, 4))}),
    ("linear_ramp", {}), ("linear_ramp", {"end_values": (5, -2)}), ("maximum", {}), ("minimum", {"stat_length": 2}),
    ("mean", {}), ("mean", {"stat_length": (1, 3)}), ("median", {"stat_length": 3}),
    ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"})])
def test_pad_modes_beyond_copies(mode: str, kw: dict, d: DType) -> None:
    """numpy's (and JAX's) other pad modes: per-side constants, ramps, statistics of the elements next to each side
    (integers take the rounded statistic) and odd reflections; widths past the axis length go round more than once.
    tgfx raised for each (unsupported mode, or unexpected keyword)."""
    x = (_values(dtypes.float32, (3, 4)) * 3 - 7).astype(np.dtype(d.np))
    widths = ((2, 5), (4, 1))
    # (float ramps and means are computed in float32, numpy's in float64: one rounding apart)
    assert_close(tnp.pad(to_tensor(x, d), widths, mode=mode, **kw), np.pad(x, widths, mode=mode, **kw), dtype=d,
                 rtol=0 if d.is_int else 1e-6, atol=0)


def test_pad_empty_and_bad_stat_length() -> None:
    """'empty' pads zeros, as JAX's (numpy leaves them uninitialised); a stat_length of 0 is numpy's and JAX's error."""
    x = _values(dtypes.float32, (2, 2)) + 1
    _check(tnp.pad(tg.asarray(x), 1, mode="empty"), np.pad(x, 1), dtypes.float32)
    with pytest.raises(ValueError, match="stat_length .* yields no value for padding"):
        tnp.pad(tg.asarray(x), 1, mode="mean", stat_length=0)


def test_pad_constant_nan_and_negative() -> None:
    x = _values(dtypes.float32, (2, 2))
    _check(tnp.pad(to_tensor(x), 1, constant_values=np.nan), np.pad(x, 1, constant_values=np.nan), dtypes.float32)
    _check(tnp.pad(to_tensor(x), 2, constant_values=-1.5), np.pad(x, 2, constant_values=-1.5), dtypes.float32)


def test_pad_with_a_function_as_mode() -> None:
    """mode= a function (numpy's and jnp.pad's): zeros padded, then each axis's 1-d slices replaced by what the
    function returns given (slice, (before, after), axis, kwargs), the call's extra keywords being kwargs; numpy's
    values, under jit too (a ValueError 'unsupported mode' before). Extra keywords with a named mode are an error."""
    def pad_with(v: Any, width: tuple[int, int], axis: int, kw: dict) -> Any:
        value = kw.get("padder", 10)
        if isinstance(v, np.ndarray):   # numpy's form: the slice is written in place
            v[:width[0]] = value
            v[v.shape[0] - width[1]:] = value + axis
            return None
        v = v.at[:width[0]].set(value)
        return v.at[v.shape[0] - width[1]:].set(value + axis)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    _check(tnp.pad(tg.asarray(x), 2, pad_with), np.pad(x, 2, pad_with), dtypes.float32)
    _check(tnp.pad(tg.asarray(x), ((1, 0), (2, 1)), pad_with, padder=100),
           np.pad(x, ((1, 0), (2, 1)), pad_with, padder=100), dtypes.float32)
    _check(tg.jit(lambda t: tnp.pad(t, 1, pad_with))(x[0]), np.pad(x[0], 1, pad_with), dtypes.float32)
    with pytest.raises(ValueError, match=r"pad: unsupported keyword arguments for mode 'edge': \['padder'\]"):
        tnp.pad(tg.asarray(x), 1, "edge", padder=1)


# ---- concatenate, stack, hstack, vstack, atleast_2d ----
@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=15)
@given(data=st.data())
def test_concatenate(d: DType, data: st.DataObject) -> None:
    base = data.draw(shapes(min_dims=1, max_dims=3, min_side=1))
    axis = data.draw(st.integers(-len(base), len(base) - 1))
    parts = []
    for _ in range(data.draw(st.integers(1, 4))):
        s = list(base)
        s[axis] = data.draw(st.integers(1, 3))
        parts.append(data.draw(arrays(d, tuple(s))))
    _check(tnp.concatenate([to_tensor(p, d) for p in parts], axis=axis), np.concatenate(parts, axis=axis), d)
    _check(tnp.concatenate([to_tensor(p, d) for p in parts], axis=None), np.concatenate(parts, axis=None), d)


def test_numpy_integers_as_axes_and_lengths() -> None:
    x = tnp.ones((2, 3))
    assert tnp.transpose(x, tuple(np.array([1, 0]))).shape == (3, 2)       # numpy's ints, one axis or several
    assert tnp.transpose(tnp.ones(3), tuple(np.array([0]))).shape == (3,)
    assert x.reshape(np.int64(6)).shape == (6,) and x.transpose(np.int64(1), np.int64(0)).shape == (3, 2)


_I0, _I1, _I2, _I3 = (np.int64(v) for v in range(4))
_NUMPY_INT_CALLS = {   # numpy ints wherever a static int goes: axes, counts, shifts, sizes (each raised TypeError)
    "roll": (lambda xp, x: xp.roll(x, _I1, _I0)), "repeat": (lambda xp, x: xp.repeat(x, _I2, _I0)),
    "tile": (lambda xp, x: xp.tile(x, _I2)), "expand_dims": (lambda xp, x: xp.expand_dims(x, _I0)),
    "split": (lambda xp, x: xp.split(x, _I3, _I1)[1]), "tensordot": (lambda xp, x: xp.tensordot(x, x.T, _I1)),
    "fftshift": (lambda xp, x: xp.fft.fftshift(x, _I1)),
}


@pytest.mark.parametrize("name", sorted(_NUMPY_INT_CALLS))
def test_numpy_integers_wherever_a_static_int_goes(name: str) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = _NUMPY_INT_CALLS[name]
    np.testing.assert_array_equal(f(tnp, tnp.asarray(x)).numpy(), f(np, x))


def test_numpy_integers_in_nn_and_lax() -> None:
    x = tnp.asarray(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    assert tg.nn.one_hot(tnp.asarray([0, 2]), _I3).shape == (2, 3)
    assert tg.lax.top_k(x, _I2)[0].shape == (3, 2) and tg.lax.argmax(x, _I1, np.int32).shape == (3,)
    assert tg.lax.integer_pow(x, _I2).shape == (3, 4) and tg.lax.broadcast_to_rank(x, _I3).shape == (1, 3, 4)
    assert tg.lax.split(x, (_I1, _I3), 1)[1].shape == (3, 3)
    with pytest.raises(ValueError, match="k must be an int"):
        tg.lax.top_k(x, True)


def test_roll_by_a_traced_shift() -> None:
    # a shift that is a Tensor (a jit argument, a loop's index), as JAX allows: one trace for every shift
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    traces = []

    def f(x: tg.Tensor, s: tg.Tensor) -> tg.Tensor:
        traces.append(1)
        return tnp.roll(x, s, (0, 1))

    jf = tg.jit(f)
    for s in (7, -5, 0):
        np.testing.assert_array_equal(jf(tnp.asarray(x), tnp.asarray(np.int32(s))).numpy(), np.roll(x, s, (0, 1)))
    assert len(traces) == 1
    got = tg.lax.fori_loop(0, 3, lambda i, c: c + tnp.roll(tnp.asarray(x), i, 0), tnp.zeros((3, 4)))
    np.testing.assert_array_equal(got.numpy(), sum(np.roll(x, i, 0) for i in range(3)))
    g = tg.grad(lambda v: (tnp.roll(v, tnp.asarray(np.int32(1)), 1) * tnp.arange(4.0)).sum())(tnp.asarray(x))
    np.testing.assert_array_equal(g.numpy(), np.broadcast_to(np.roll(np.arange(4.0), -1), (3, 4)))
    with pytest.raises(TypeError, match="roll: shift must be"):
        tnp.roll(tnp.asarray(x), 1.5, 0)
    with pytest.raises(ValueError, match="3 shifts for 2 axes"):
        tnp.roll(tnp.asarray(x), [1, 2, 3], (0, 1))


def test_concatenate_keeps_negative_zeros() -> None:
    # the pieces are summed padded: padded with 0.0, a -0.0 came out 0.0 (-0.0 + 0.0); with -0.0 it stays
    a = np.array([-0.0, 1.0], np.float32)
    b = np.array([0.0, -0.0, -2.0], np.float32)
    for f in (lambda x, y: tnp.concatenate([x, y]), tg.jit(lambda x, y: tnp.concatenate([x, y]))):
        got = f(to_tensor(a), to_tensor(b)).numpy()
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.concatenate([a, b])))
    got = tnp.stack([to_tensor(a), to_tensor(b[:2])]).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.stack([a, b[:2]])))
    rolled = tnp.roll(tnp.roll(to_tensor(b), 1).at[0].set(-0.0), 1).at[0].set(0.0)   # (found by test_eager_fuzz)
    np.testing.assert_array_equal(np.signbit(rolled.numpy()), [False, True, False])


def test_concatenate_promotes_dtypes() -> None:
    a, b = np.array([1, 2], np.int8), np.array([300, -5], np.int16)
    _check(tnp.concatenate([to_tensor(a), to_tensor(b)]), np.concatenate([a, b]), dtypes.int16)
    c = np.array([0.5], np.float32)
    _check(tnp.concatenate([to_tensor(a), to_tensor(c)]), np.concatenate([a, c]).astype(np.float32), dtypes.float32)


@pytest.mark.parametrize("join,args,what", [
    (tnp.concatenate, ([[1, 2], [3]],), "arrays[0] is a list"),
    (tnp.concatenate, ([tnp.asarray([1, 2]), [3]],), "arrays[1] is a list"),
    (tnp.concatenate, ([np.array([1, 2]), (3,)],), "arrays[1] is a tuple"),
    (tnp.concat, ([[1.5], [3]],), "arrays[0] is a list"),
    (tnp.stack, ([[1, 2], [3, 4]],), "arrays[0] is a list"),
    (tnp.vstack, ([tnp.asarray([1, 2]), [3, 4]],), "arrays[1] is a list"),
    (tnp.hstack, ([[1, 2], [3]],), "arrays[0] is a list"),
    (tnp.dstack, ([[1, 2], [3, 4]],), "arrays[0] is a list"),
    (tnp.column_stack, ([[1, 2], [3, 4]],), "arrays[0] is a list"),
    (tnp.append, ([1, 2], [3]), "arr is a list"),
    (tnp.append, (tnp.asarray([1, 2]), (3,)), "values is a tuple"),
], ids=lambda v: getattr(v, "__name__", None))
def test_joins_of_nested_sequences_are_a_type_error_naming_the_argument(join: Any, args: tuple, what: str) -> None:
    # jax 0.10.2: "concatenate requires ndarray or scalar arguments, got <class 'list'> at position 0" (numpy reads
    # the lists as arrays; tgfx did too, so concatenate([[1, 2], [3]]) was [1, 2, 3] where JAX refuses it)
    with pytest.raises(TypeError, match=re.escape(what)):
        join(*args)
    # arrays, numpy arrays, scalars and an array whose rows are the arrays are what JAX joins
    assert tnp.concatenate([tnp.asarray([1, 2]), np.array([3])]).tolist() == [1, 2, 3]
    assert tnp.stack([1, 2.5]).tolist() == [1.0, 2.5]
    assert tnp.concatenate(np.array([[1, 2], [3, 4]])).tolist() == [1, 2, 3, 4]
    assert tnp.append(tnp.asarray([1, 2]), 3).tolist() == [1, 2, 3]


def test_python_scalars_in_joins_are_weak() -> None:
    """As in JAX, a Python scalar among the arrays of a join takes their type, as in `x + 3` (int8 with 3 is int8,
    uint8 with 300 wraps to 44), and the result is weakly typed where its type is (int8 with 2.5: a weak float32,
    which float16 then wins against)."""
    from tgfx.tensor import is_weak
    i8, u8 = tnp.asarray(np.int8(1)), tnp.asarray(np.uint8(1))
    f16, bf = tnp.asarray(np.float16(1)), tnp.asarray(1.0, dtype=dtypes.bfloat16)
    cases = [
        (tnp.stack([i8, 3]), dtypes.int8, [1, 3], False),
        (tnp.stack([3, i8]), dtypes.int8, [3, 1], False),
        (tnp.stack([u8, 300]), dtypes.uint8, [1, 44], False),
        (tnp.stack([u8, -1]), dtypes.uint8, [1, 255], False),
        (tnp.stack([f16, 2.5]), dtypes.float16, [1.0, 2.5], False),
        (tnp.stack([bf, 2]), dtypes.bfloat16, [1, 2], False),
        (tnp.stack([i8, 3.0]), dtypes.float32, [1.0, 3.0], True),
        (tnp.stack([i8, True]), dtypes.int8, [1, 1], False),
        (tnp.stack([tnp.asarray(True), 1]), dtypes.int32, [1, 1], True),
        (tnp.stack([1, 2]), dtypes.int32, [1, 2], True),
        (tnp.stack([1j, i8]), dtypes.complex64, [1j, 1], True),
        (tnp.stack([i8, np.int32(3)]), dtypes.int32, [1, 3], False),
        (tnp.hstack([i8.reshape(1), 3]), dtypes.int8, [1, 3], False),
        (tnp.vstack([i8, 3]), dtypes.int8, [[1], [3]], False),
        (tnp.dstack([i8, 3]), dtypes.int8, [[[1, 3]]], False),
        (tnp.block([i8.reshape(1), 3]), dtypes.int8, [1, 3], False),
        (tnp.append(i8.reshape(1), 3), dtypes.int8, [1, 3], False),
        (tnp.append(i8, 3.5), dtypes.float32, [1, 3.5], True),
        (tnp.concatenate([i8.reshape(1), tnp.asarray(np.int8([2]))]), dtypes.int8, [1, 2], False),
    ]
    for got, d, want, weak in cases:
        assert got.dtype == d and got.tolist() == want and is_weak(got) == weak, (got, d, want, weak)
    assert (tnp.stack([i8, 3.0]) + tnp.asarray(np.float16([1, 1]))).dtype == dtypes.float16   # a weak float32
    with pytest.raises(OverflowError):
        tnp.stack([tnp.asarray(1), 2 ** 40])
    assert tg.jit(lambda x: tnp.stack([x, 3]))(i8).dtype == dtypes.int8


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.float16, dtypes.float32, dtypes.bool,
                        dtypes.complex64]),
       st.one_of(st.booleans(), st.integers(-2 ** 31, 2 ** 31 - 1), st.floats(-1e4, 1e4, width=16),
                 st.complex_numbers(max_magnitude=1e4, allow_nan=False, allow_infinity=False)))
def test_a_python_scalar_joins_as_it_combines(d: DType, scalar: Any) -> None:
    """stack([x, s]) has the type of `result_type(x, s)`, and holds s converted to it as numpy converts (wrapping)."""
    x = tnp.asarray(np.ones((), d.np))
    out = tnp.stack([x, scalar])
    want = tnp.result_type(x, scalar)
    assert out.dtype == want
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = np.array([1, np.array(scalar).astype(want.np)]).astype(want.np)
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("zero_axis", [0, 1])
def test_concatenate_with_zero_size_constant_part(zero_axis: int) -> None:
    x = _values(dtypes.float32, (2, 3))
    empty_shape = (0, 3) if zero_axis == 0 else (2, 0)
    got = tnp.concatenate([tnp.zeros(empty_shape), to_tensor(x)], axis=zero_axis)
    _check(got, np.concatenate([np.zeros(empty_shape, np.float32), x], axis=zero_axis), dtypes.float32)


def test_concatenate_with_zero_size_buffer_part() -> None:
    x = _values(dtypes.float32, (2, 3))
    e = np.zeros((0, 3), np.float32)
    _check(tnp.concatenate([to_tensor(e), to_tensor(x)]), np.concatenate([e, x]), dtypes.float32)


@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=12)
@given(data=st.data())
def test_stack(d: DType, data: st.DataObject) -> None:
    shape = data.draw(shapes(max_dims=3, min_side=1))
    parts = [data.draw(arrays(d, shape)) for _ in range(data.draw(st.integers(1, 3)))]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    _check(tnp.stack([to_tensor(p, d) for p in parts], axis=axis), np.stack(parts, axis=axis), d)


def test_hstack_vstack_atleast_2d() -> None:
    a, b = _values(dtypes.int32, (3,)), _values(dtypes.int32, (2,)) + 50
    _check(tnp.hstack([to_tensor(a), to_tensor(b)]), np.hstack([a, b]), dtypes.int32)
    _check(tnp.vstack([to_tensor(a), to_tensor(a)]), np.vstack([a, a]), dtypes.int32)
    m, n = _values(dtypes.int32, (2, 3)), _values(dtypes.int32, (2, 2))
    _check(tnp.hstack([to_tensor(m), to_tensor(n)]), np.hstack([m, n]), dtypes.int32)
    _check(tnp.vstack([to_tensor(m), to_tensor(a)]), np.vstack([m, a]), dtypes.int32)
    for x in [np.int32(5), a, m]:
        _check(tnp.atleast_2d(to_tensor(x)), np.atleast_2d(x), dtypes.int32)


# ---- split, array_split ----
@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=12)
@given(data=st.data())
def test_split(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(min_dims=1, max_dims=3, max_side=6)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[axis]
    sections = [k for k in range(1, n + 1) if n % k == 0] or [1]
    k = data.draw(st.sampled_from(sections))
    for got, want in zip(tnp.split(to_tensor(x, d), k, axis=axis), np.split(x, k, axis=axis), strict=True):
        _check(got, want, d)
    idx = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    got_parts = tnp.split(to_tensor(x, d), idx, axis=axis)
    want_parts = np.split(x, idx, axis=axis)
    assert len(got_parts) == len(want_parts)
    for got, want in zip(got_parts, want_parts, strict=True):
        _check(got, want, d)


@pytest.mark.parametrize("n,sections", [(7, 3), (6, 4), (2, 3), (5, 5), (5, 1)])
def test_array_split(n: int, sections: int) -> None:
    x = _values(dtypes.float32, (2, n))
    got = tnp.array_split(to_tensor(x), sections, axis=1)
    want = np.array_split(x, sections, axis=1)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _check(g, w, dtypes.float32)


@pytest.mark.parametrize("idx", [[-1], [2, 1], [0, 6], [3, 3, 7]])
def test_split_indices_must_be_nondecreasing_and_within_the_axis(idx: list[int]) -> None:
    """JAX's split: the pieces' sizes are the differences of the indices, and one below zero is a ValueError (numpy
    would count -1 from the end; tgfx clamped it to 0, a split neither numpy nor JAX makes)."""
    with pytest.raises(ValueError, match=re.escape(f"split: indices {idx} along axis 0 of length 5 must be")):
        tnp.split(tnp.arange(5), idx)


def test_array_split_at_indices() -> None:
    """array_split takes split indices too, as numpy's and JAX's (it raised a TypeError from divmod)."""
    x = _values(dtypes.float32, (2, 7))
    for got, want in zip(tnp.array_split(to_tensor(x), [1, 4], axis=1), np.array_split(x, [1, 4], axis=1), strict=True):
        _check(got, want, dtypes.float32)


def test_roll_broadcasts_shifts_against_axes() -> None:
    """numpy and JAX broadcast shift and axis: several shifts of one axis, or one axis given twice, roll it in turn
    (tgfx raised for both)."""
    x = _values(dtypes.int32, (3, 4))
    _check(tnp.roll(to_tensor(x), (1, 2), 1), np.roll(x, (1, 2), 1), dtypes.int32)
    _check(tnp.roll(to_tensor(x), (1, -2, 2), (0, 1, 0)), np.roll(x, (1, -2, 2), (0, 1, 0)), dtypes.int32)


@pytest.mark.parametrize("order", ["C", "F"])
def test_reshape_and_ravel_in_either_order(order: str) -> None:
    """order='F' reads and writes with the first index fastest, as numpy's and JAX's (it was NotImplementedError;
    ravel took no order at all)."""
    x = _values(dtypes.float32, (2, 3, 4))
    _check(tnp.reshape(to_tensor(x), (4, -1), order=order), np.reshape(x, (4, -1), order=order), dtypes.float32)
    _check(tnp.reshape(to_tensor(x), 24, order=order), np.reshape(x, 24, order=order), dtypes.float32)
    _check(tnp.ravel(to_tensor(x), order=order), np.ravel(x, order=order), dtypes.float32)
    with pytest.raises(NotImplementedError, match="reshape: order='A'"):
        tnp.reshape(to_tensor(x), -1, order="A")


def test_joins_convert_to_a_given_dtype() -> None:
    """concatenate, stack, hstack and vstack take JAX's dtype= (each array converted, the result strongly typed)."""
    a, b = np.array([[1.7, -2.5]], np.float32), np.array([[3, 4]], np.int8)
    for join, kw in [(tnp.concatenate, {"axis": 1}), (tnp.stack, {}), (tnp.hstack, {}), (tnp.vstack, {})]:
        np_join = getattr(np, join.__name__)
        _check(join([tg.asarray(a), tg.asarray(b)], dtype=tnp.int8, **kw), np_join([a.astype(np.int8), b], **kw),
               dtypes.int8)
        assert join([tg.asarray(b), tg.asarray(b)], dtype="float16", **kw).dtype == dtypes.float16


# ---- tile, repeat ----
@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=12)
@given(data=st.data())
def test_tile(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=3, max_side=3)))
    reps = data.draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=4).map(tuple)))
    _check(tnp.tile(to_tensor(x, d), reps), np.tile(x, reps), d)


@pytest.mark.x64
@pytest.mark.parametrize("d", DTYPES, ids=str)
@settings(max_examples=12)
@given(data=st.data())
def test_repeat(d: DType, data: st.DataObject) -> None:
    x = data.draw(arrays(d, shapes(max_dims=3, max_side=3)))
    r = data.draw(st.integers(0, 3))
    _check(tnp.repeat(to_tensor(x, d), r), np.repeat(x, r), d)
    _check(to_tensor(x, d).repeat(r), x.repeat(r), d)
    if x.ndim:
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
        _check(tnp.repeat(to_tensor(x, d), r, axis=axis), np.repeat(x, r, axis=axis), d)
        per = data.draw(st.lists(st.integers(0, 3), min_size=x.shape[axis], max_size=x.shape[axis]))
        _check(tnp.repeat(to_tensor(x, d), per, axis=axis), np.repeat(x, per, axis=axis), d)


# ---- views compose: a chain of movement ops, then arithmetic on the result ----
@pytest.mark.parametrize("total", [0, 2, 5, 9])
def test_repeat_to_a_total_length(total: int) -> None:
    """JAX's total_repeat_length (an unexpected keyword before): the repeated axis cut to `total`, or its last element
    repeated up to it; under jit the counts may be traced."""
    x, reps = _values(dtypes.float32, (3, 2)), np.array([2, 0, 3])
    want = np.repeat(x, reps, axis=0)
    want = np.concatenate([want, np.repeat(x[-1:], max(total - len(want), 0), axis=0)])[:total]
    _check(tnp.repeat(tg.asarray(x), reps.tolist(), axis=0, total_repeat_length=total), want, dtypes.float32)
    f = tg.jit(lambda x, r: tnp.repeat(x, r, axis=0, total_repeat_length=total))
    _check(f(tg.asarray(x), tg.asarray(reps.astype(np.int32))), want, dtypes.float32)


def test_chained_views_then_arithmetic() -> None:
    x = _values(dtypes.float32, (2, 3, 4))
    t = to_tensor(x)
    got = tnp.flip(tnp.transpose(t, (2, 0, 1)), 1).reshape(4, 6)[1:, ::2] * 2 + tnp.pad(t.reshape(6, 4), 0)[:3, :3]
    want = np.flip(np.transpose(x, (2, 0, 1)), 1).reshape(4, 6)[1:, ::2] * 2 + x.reshape(6, 4)[:3, :3]
    assert_close(got, want, dtype=dtypes.float32)


def test_broadcasting_an_operand_builds_the_graph_expand_builds():
    # binary ops broadcast with one node chain and one Tensor (eager `x * 2`); the graph is the one `expand` makes, so
    # schedules and compiled kernels are shared between the two spellings
    import tgfx as tg
    from tgfx.tensor import broadcast
    x = tg.asarray(np.ones((4, 3, 5), np.float32))
    for t in (tg.asarray(np.float32(2)), tg.asarray(np.ones((3, 1), np.float32)), tg.asarray(np.ones(5, np.float32)),
              tg.asarray(np.ones((3, 5), np.float32)).reshape(15).reshape(3, 5)):
        assert broadcast(t, x)[0].uop is t.expand((4, 3, 5)).uop
    assert broadcast(x, x)[0] is x


def test_an_eager_stack_of_many_computed_values_is_joined_on_the_host() -> None:
    # a batch stacked from a list of samples, some drawn twice: as a graph, each pattern of repeats was another
    # kernel to compile (1.3 s a call for 128 of 1,000); values in host memory are now joined there, no kernel
    # (on CPU:0 whatever the default device: host memory is what lets the host join them)
    from tgfx.counters import counters
    rng = np.random.default_rng(0)
    data = [tg.device_put(rng.standard_normal(5).astype(np.float32), "CPU") for _ in range(20)]
    rows = tg.device_put(rng.standard_normal((20, 5)).astype(np.float32), "CPU")
    tg.realize(*data)
    for _ in range(3):
        idx = rng.integers(0, 20, 12)
        counters.reset()
        got = tnp.stack([data[i] for i in idx]).numpy()
        assert counters.compile_count == 0 and counters.kernel_count == 0
        np.testing.assert_array_equal(got, np.stack([data[i].numpy() for i in idx]))
        np.testing.assert_array_equal(tnp.stack([rows[i] for i in idx], axis=1).numpy(), rows.numpy()[idx].T)
    ints = [tg.asarray(np.arange(3, dtype=np.int8) + i) for i in range(9)]
    assert tnp.concatenate(ints).dtype == tnp.int8
    halves = [tg.asarray(np.float32([i, 0.5]), dtype=tnp.bfloat16) for i in range(9)]
    out = tnp.stack(halves)
    assert out.dtype == tnp.bfloat16 and out.numpy()[8, 0] == 8.0
    # traced or differentiated values stay a graph (jit, grad)
    f = tg.jit(lambda xs: tnp.stack(xs).sum(0))
    np.testing.assert_allclose(f(data[:10]).numpy(), np.sum([d.numpy() for d in data[:10]], 0), rtol=1e-6)
    g = tg.grad(lambda x: (tnp.stack([x * i for i in range(10)]) ** 2).sum())(data[0])
    np.testing.assert_allclose(g.numpy(), 2 * data[0].numpy() * sum(i * i for i in range(10)), rtol=1e-5)
    with pytest.raises(ValueError, match="same shape"):
        tnp.stack(data[:8] + [rows])


@pytest.mark.parametrize("shape", [(16, 24), (3, 8, 12), (64, 64), (400, 400)])
def test_rolls_along_several_axes_summed_are_numpys(shape: tuple[int, ...]) -> None:
    """The game of life's neighbour count, 8 rolls of rolls summed, and a stencil of rolls along the last two axes:
    stored as a grid of pieces (small boards, or a batch of them: tgfx/lowering/rangeify.py's `pad_pieces`) or masked
    (a board that threads split), numpy's values either way, in int and float."""
    rng = np.random.default_rng(0)
    board = (rng.uniform(size=shape) < 0.3).astype(np.uint8)
    a, b = -2, -1

    def life(x: Any, xp: Any) -> Any:
        x = x.astype(xp.int32)
        n = sum(xp.roll(xp.roll(x, dy, a), dx, b) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0))
        return ((n == 3) | ((x == 1) & (n == 2))).astype(xp.uint8)

    def stencil(x: Any, xp: Any) -> Any:
        return xp.roll(x, 1, a) + xp.roll(x, -2, a) + xp.roll(x, 3, b) - 4 * xp.roll(xp.roll(x, 1, a), -1, b)
    np.testing.assert_array_equal(tg.jit(lambda x: life(x, tnp))(tg.asarray(board)).numpy(), life(board, np))
    f = rng.standard_normal(shape).astype(np.float32)
    assert_close(tg.jit(lambda x: stencil(x, tnp))(tg.asarray(f)), stencil(f, np))
