"""tg.lax.dynamic_slice, dynamic_update_slice and their _in_dim / _index_in_dim forms against a numpy reference of
JAX's rule (a negative start counts from the end, then every start is clamped to [0, dim - size]), with starts as
Python ints, eager integer Tensors, jit arguments, fori_loop steps and vmapped values; gradients by central
differences (test_grad's `check_grads`); trace counts; the errors a user gets.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grad import T, check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import lax


def rand(*shape: int, seed: int = 0, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def i32(v: int) -> tg.Tensor:
    return T(np.int32(v))


# ---- the numpy reference ----
def np_starts(shape: Sequence[int], starts: Sequence[int], sizes: Sequence[int]) -> list[int]:
    out = []
    for n, s, k in zip(shape, starts, sizes, strict=True):
        s = s + n if s < 0 else s
        out.append(min(max(s, 0), n - k))
    return out


def np_dynamic_slice(x: np.ndarray, starts: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    c = np_starts(x.shape, starts, sizes)
    return x[tuple(slice(s, s + k) for s, k in zip(c, sizes, strict=True))]


def np_dynamic_update_slice(x: np.ndarray, u: np.ndarray, starts: Sequence[int]) -> np.ndarray:
    c = np_starts(x.shape, starts, u.shape)
    out = x.copy()
    out[tuple(slice(s, s + k) for s, k in zip(c, u.shape, strict=True))] = u
    return out


SLICES = [  # operand shape, starts, sizes
    ((10,), (3,), (4,)),
    ((10,), (8,), (4,)),          # clamped back to 6
    ((10,), (-3,), (2,)),         # from the end: 7
    ((10,), (-20,), (2,)),        # from the end, then clamped to 0
    ((5, 6), (1, 4), (3, 3)),
    ((5, 6), (7, -1), (2, 6)),    # a whole axis: its start can only be 0
    ((3, 4, 5), (1, 0, 2), (2, 0, 3)),   # an empty slice
]


@pytest.mark.parametrize("shape,starts,sizes", SLICES)
def test_dynamic_slice_matches_numpy_with_int_and_tensor_starts(shape: tuple, starts: tuple, sizes: tuple) -> None:
    x = rand(*shape)
    ref = np_dynamic_slice(x, starts, sizes)
    np.testing.assert_array_equal(lax.dynamic_slice(T(x), starts, sizes).numpy(), ref)
    np.testing.assert_array_equal(lax.dynamic_slice(T(x), [i32(s) for s in starts], sizes).numpy(), ref)
    np.testing.assert_array_equal(lax.dynamic_slice(T(x), tg.asarray(np.array(starts, np.int32)), sizes).numpy(),
                                  ref)


@pytest.mark.parametrize("shape,starts,sizes", SLICES)
def test_dynamic_update_slice_matches_numpy_with_int_and_tensor_starts(shape: tuple, starts: tuple,
                                                                       sizes: tuple) -> None:
    x, u = rand(*shape), rand(*sizes, seed=1)
    ref = np_dynamic_update_slice(x, u, starts)
    np.testing.assert_array_equal(lax.dynamic_update_slice(T(x), T(u), starts).numpy(), ref)
    np.testing.assert_array_equal(lax.dynamic_update_slice(T(x), T(u), [i32(s) for s in starts]).numpy(), ref)
    mixed = [s if a % 2 else i32(s) for a, s in enumerate(starts)]   # static and traced axes together
    np.testing.assert_array_equal(lax.dynamic_update_slice(T(x), T(u), mixed).numpy(), ref)


def test_traced_starts_under_jit_trace_once_for_every_value() -> None:
    x, u = rand(6, 7), rand(2, 3, seed=1)
    f = tg.jit(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)))
    g = tg.jit(lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)))
    for i, j in [(0, 1), (3, 2), (5, 6), (-1, -2), (100, -100)]:   # (equal Python ints alias: a retrace)
        np.testing.assert_array_equal(f(tg.asarray(x), i, j).numpy(), np_dynamic_slice(x, (i, j), (2, 3)))
        np.testing.assert_array_equal(g(tg.asarray(x), tg.asarray(u), i, j).numpy(),
                                      np_dynamic_update_slice(x, u, (i, j)))
    assert f.trace_count == 1 and g.trace_count == 1


@settings(max_examples=8)
@given(st.data())
def test_dynamic_slice_and_update_hypothesis(data: st.DataObject) -> None:
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    sizes = tuple(data.draw(st.integers(0, n)) for n in shape)
    starts = tuple(data.draw(st.integers(-7, 7)) for _ in shape)
    x, u = rand(*shape, seed=2), rand(*sizes, seed=3)
    traced = [i32(s) for s in starts]
    np.testing.assert_array_equal(lax.dynamic_slice(T(x), traced, sizes).numpy(), np_dynamic_slice(x, starts, sizes))
    np.testing.assert_array_equal(lax.dynamic_update_slice(T(x), T(u), traced).numpy(),
                                  np_dynamic_update_slice(x, u, starts))


def test_dynamic_slice_in_a_fori_loop_body() -> None:
    """Sliding windows read at the loop step: the sum of x[2i:2i+3] for i < 4, one trace of the body."""
    x = rand(10)
    acc = lax.fori_loop(0, 4, lambda i, acc: acc + lax.dynamic_slice(tg.asarray(x), (2 * i,), (3,)), tnp.zeros(3))
    np.testing.assert_allclose(acc.numpy(), sum(x[2 * i:2 * i + 3] for i in range(4)), rtol=1e-6)

    def write(i: tg.Tensor, buf: tg.Tensor) -> tg.Tensor:   # row i of a buffer, written in a loop
        return lax.dynamic_update_index_in_dim(buf, tnp.full((3,), 1.0) * i.astype(tg.dtypes.float32), i, 0)
    np.testing.assert_array_equal(lax.fori_loop(0, 4, write, tnp.zeros((4, 3))).numpy(),
                                  np.repeat(np.arange(4.0)[:, None], 3, axis=1))


def test_vmap_over_start_indices() -> None:
    x = rand(8, 3)
    starts = np.array([0, 3, 7, -2], np.int32)
    out = tg.vmap(lambda i: lax.dynamic_slice_in_dim(tg.asarray(x), i, 2, axis=0))(tg.asarray(starts))
    np.testing.assert_array_equal(out.numpy(), np.stack([np_dynamic_slice(x, (s, 0), (2, 3)) for s in starts]))
    u = rand(4, 1, 3, seed=1)
    upd = tg.vmap(lambda i, u: lax.dynamic_update_slice_in_dim(tg.asarray(x), u, i, 0))(tg.asarray(starts),
                                                                                          tg.asarray(u))
    np.testing.assert_array_equal(upd.numpy(), np.stack([np_dynamic_update_slice(x, ui, (s, 0))
                                                         for s, ui in zip(starts, u, strict=True)]))


@pytest.mark.x64
@pytest.mark.parametrize("starts", [(1, 2), (4, -1)], ids=["inside", "clamped"])
def test_gradients_through_operand_and_update(starts: tuple) -> None:
    traced = [i32(s) for s in starts]
    x, u = rand(5, 6, seed=4, dtype=np.float64), rand(2, 3, seed=5, dtype=np.float64)
    check_grads(lambda x: lax.dynamic_slice(x, traced, (2, 3)) ** 2, x)
    check_grads(lambda x, u: lax.dynamic_update_slice(x, u * u, traced), x, u)
    check_grads(lambda x, u: lax.dynamic_update_slice(x, u, starts) * x, x, u)


def test_grad_under_jit_with_a_traced_start() -> None:
    x = rand(7)
    f = tg.jit(tg.grad(lambda x, i: (lax.dynamic_slice(x, (i,), (3,)) ** 2).sum()))
    for i in (0, 2, 6):
        c = np_starts((7,), (i,), (3,))[0]
        want = np.zeros(7, np.float32)
        want[c:c + 3] = 2 * x[c:c + 3]
        np.testing.assert_allclose(f(tg.asarray(x), i).numpy(), want, rtol=1e-6)
    assert f.trace_count == 1


def test_in_dim_and_index_in_dim_forms() -> None:
    x = rand(4, 5, 6)
    np.testing.assert_array_equal(lax.dynamic_slice_in_dim(T(x), i32(3), 2, axis=1).numpy(), x[:, 3:5])
    np.testing.assert_array_equal(lax.dynamic_slice_in_dim(T(x), -1, 2, axis=-1).numpy(), x[..., 4:6])
    np.testing.assert_array_equal(lax.dynamic_index_in_dim(T(x), i32(2), axis=2).numpy(), x[:, :, 2:3])
    np.testing.assert_array_equal(lax.dynamic_index_in_dim(T(x), 9, axis=0, keepdims=False).numpy(), x[3])
    u = rand(4, 2, 6, seed=1)
    np.testing.assert_array_equal(lax.dynamic_update_slice_in_dim(T(x), T(u), i32(4), axis=1).numpy(),
                                  np_dynamic_update_slice(x, u, (0, 4, 0)))
    row = rand(4, 6, seed=2)
    np.testing.assert_array_equal(lax.dynamic_update_index_in_dim(T(x), T(row), i32(1), axis=1).numpy(),
                                  np_dynamic_update_slice(x, row[:, None], (0, 1, 0)))


def test_errors_name_the_argument() -> None:
    x = T(rand(4, 5))
    with pytest.raises(ValueError, match=r"start_indices has 1 entries but the operand of shape \(4, 5\) has 2"):
        lax.dynamic_slice(x, (1,), (2, 2))
    with pytest.raises(ValueError, match=r"slice_sizes\[1\] = 6 must be an int between 0 and the operand's axis"):
        lax.dynamic_slice(x, (0, 0), (2, 6))
    with pytest.raises(ValueError, match="slice_sizes must have one size per axis"):
        lax.dynamic_slice(x, (0, 0), (2,))
    with pytest.raises(TypeError, match=r"start_indices\[1\] must be an integer scalar, got a float32\[\] Tensor"):
        lax.dynamic_slice(x, (0, tg.asarray(np.float32(1.0)).reshape(())), (2, 2))
    with pytest.raises(TypeError, match=r"start_indices\[0\] must be an int or an integer scalar Tensor, got 1.5"):
        lax.dynamic_slice(x, (1.5, 0), (2, 2))
    with pytest.raises(TypeError, match="start_indices must be a sequence of scalars or a 1-d integer Tensor"):
        lax.dynamic_slice(x, tg.asarray(np.zeros((2, 1), np.int32)), (2, 2))
    with pytest.raises(ValueError, match=r"update of shape \(5, 1\) must have the operand's 2 axes and fit inside"):
        lax.dynamic_update_slice(x, T(rand(5, 1)), (0, 0))
    with pytest.raises(ValueError, match=r"update of shape \(2,\) must have the operand's 2 axes"):
        lax.dynamic_update_slice(x, T(rand(2)), (0, 0))
    with pytest.raises(TypeError, match=r"same dtype, got float16 and float32; cast the update with .astype"):
        lax.dynamic_update_slice(x, tg.asarray(np.ones((1, 1), np.float16)), (0, 0))


def test_jacobian_is_jacrev() -> None:
    assert tg.jacobian is tg.jacrev
    np.testing.assert_allclose(tg.jacobian(lambda x: x * x)(T(np.array([1.0, 2.0], np.float32))).numpy(),
                               [[2, 0], [0, 4]])
