"""tnp.linalg (norm, solve, inv, det, slogdet), tg.scipy.linalg's LU (lu_factor, lu_solve) and the diagonal family
(diag, diagonal, trace) against numpy and scipy; gradients by central differences (test_grad's `check_grads`),
second order against JAX where it is installed, and the errors a user gets for shapes that do not fit.

Matrices are well conditioned (a random one plus 3 I) unless a test is about pivoting or singularity, so float64
results agree with LAPACK's to ~1e-12.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import assert_close
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grad import T, check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.scipy import linalg as sla


def well(*batch: int, n: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(batch + (n, n)) + 3 * np.eye(n)


def rand(*shape: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


# ---- diag, diagonal, trace ----
@settings(max_examples=12)
@given(st.lists(st.integers(1, 4), min_size=2, max_size=3), st.integers(-4, 4), st.data())
def test_diagonal_and_trace_match_numpy(shape: list[int], offset: int, data: st.DataObject) -> None:
    a = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    nd = len(shape)
    ax1 = data.draw(st.integers(-nd, nd - 1))
    ax2 = data.draw(st.integers(-nd, nd - 1).filter(lambda v: v % nd != ax1 % nd))
    np.testing.assert_array_equal(tnp.diagonal(tg.asarray(a), offset, ax1, ax2).numpy(),
                                  np.diagonal(a, offset, ax1, ax2))
    t = tnp.trace(tg.asarray(a), offset, ax1, ax2)
    assert t.dtype == dtypes.int32
    np.testing.assert_array_equal(t.numpy(), np.trace(a, offset, ax1, ax2))


@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3])
def test_diag_builds_and_extracts(k: int) -> None:
    v = np.array([1.5, -2.0, 3.0], np.float32)
    out = tnp.diag(tg.asarray(v), k)
    assert out.dtype == dtypes.float32
    np.testing.assert_array_equal(out.numpy(), np.diag(v, k))
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(tnp.diag(tg.asarray(m), k).numpy(), np.diag(m, k))


@pytest.mark.x64
def test_diagonal_family_methods_dtypes_and_gradients() -> None:
    a = tg.asarray(np.arange(9.0).reshape(3, 3))
    np.testing.assert_array_equal(a.diagonal(1).numpy(), [1.0, 5.0])
    assert a.trace().item() == 12.0
    assert tnp.trace(tg.asarray(np.ones((2, 2), np.int8))).dtype == dtypes.int64      # summed as sum does (x64)
    assert tnp.trace(a, dtype=dtypes.int32).dtype == dtypes.int32
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.trace(x, -1))(a).numpy(), np.eye(3, k=-1))
    check_grads(lambda v: tnp.diag(v, 1) * T(rand(4, 4)), rand(3))
    check_grads(lambda x: tnp.diagonal(x, -1, 0, 2), rand(3, 2, 4))



def test_the_diagonals_gradient_compares_rows_and_columns() -> None:
    # the diagonal is a strided view; its gradient puts g where row == column, not at flat positions read back
    # through a 64-bit remainder by n + 1 an element (0.7 ms of a 512 x 512 contrastive loss's gradient)
    from tgfx.ir.ops import Ops
    from tgfx.ir.uop import UOp
    from tgfx.lowering import index_level
    from tgfx.lowering.inline import inline
    from tgfx.lowering.schedule import schedule
    x = tg.asarray(np.random.default_rng(0).standard_normal((2, 64, 64)).astype(np.float32)).realize()
    w = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    g = tg.grad(lambda x: (tnp.diagonal(x, 0, 1, 2) * tg.asarray(w)).sum())(x)
    linear, _ = schedule(list(inline(UOp(Ops.SINK, None, (g.uop,))).src))
    ops = {u.op for c in linear.src if c.src[0].op is Ops.SINK for u in index_level(c.src[0]).toposort()}
    assert Ops.MOD not in ops and Ops.IDIV not in ops, ops
    want = np.zeros((2, 64, 64), np.float32)
    want[:, np.arange(64), np.arange(64)] = w
    np.testing.assert_array_equal(g.numpy(), want)

def test_diag_errors_name_the_shape() -> None:
    with pytest.raises(ValueError, match=r"1-d or 2-d, got shape \(2, 2, 2\)"):
        tnp.diag(tnp.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match=r"at least 2-d, got shape \(3,\)"):
        tnp.diagonal(tnp.zeros(3))
    with pytest.raises(ValueError, match="axis1 and axis2 must be different"):
        tnp.trace(tnp.zeros((2, 2)), axis1=1, axis2=-1)


# ---- norm ----
VECTOR_ORDS = [None, 1, 2, np.inf, -np.inf, 0, 3, 0.5]
MATRIX_ORDS = [None, "fro", 1, -1, np.inf, -np.inf]


@pytest.mark.parametrize("ord", VECTOR_ORDS, ids=str)
def test_vector_norms_match_numpy(ord: Any) -> None:  # noqa: A002 - numpy's name
    x = rand(3, 4)
    x[0, 1] = 0.0
    for axis in (1, 0, -1):
        for keepdims in (False, True):
            assert_close(tnp.linalg.norm(T(x), ord, axis, keepdims), np.linalg.norm(x, ord, axis, keepdims), ulps=4)
    assert_close(tnp.linalg.norm(T(x[1]), ord), np.linalg.norm(x[1], ord), ulps=4)


@pytest.mark.parametrize("ord", MATRIX_ORDS, ids=str)
def test_matrix_norms_match_numpy(ord: Any) -> None:  # noqa: A002
    x = rand(2, 3, 4)
    for axis in ((1, 2), (2, 0), (-1, -2)):
        for keepdims in (False, True):
            assert_close(tnp.linalg.norm(T(x), ord, axis, keepdims), np.linalg.norm(x, ord, axis, keepdims), ulps=4)
    assert_close(tnp.linalg.norm(T(x[0]), ord), np.linalg.norm(x[0], ord), ulps=4)


def test_norm_of_any_rank_dtype_and_keepdims() -> None:
    x = rand(2, 3, 2)
    assert_close(tnp.linalg.norm(T(x)), np.linalg.norm(x))
    assert tnp.linalg.norm(T(x), keepdims=True).shape == (1, 1, 1)
    assert tnp.linalg.norm(tg.asarray([3, 4])).dtype == dtypes.float32
    assert tnp.linalg.norm(tg.asarray([3, 4])).item() == 5.0
    assert tnp.linalg.norm(tg.asarray(np.ones(4, np.float16))).dtype == dtypes.float16


@pytest.mark.x64
@pytest.mark.parametrize("ord", [None, 1, np.inf, -np.inf, 3], ids=str)
def test_vector_norm_gradients(ord: Any) -> None:  # noqa: A002
    check_grads(lambda x: tnp.linalg.norm(x, ord, axis=-1), rand(2, 4) + 0.05)


@pytest.mark.x64
@pytest.mark.parametrize("ord", [None, 1, -1, np.inf], ids=str)
def test_matrix_norm_gradients(ord: Any) -> None:  # noqa: A002
    check_grads(lambda x: tnp.linalg.norm(x, ord, axis=(0, 1)), rand(3, 4) + 0.05)


def test_norm_gradient_at_zero_is_finite_where_jaxs_is() -> None:
    """Orders 1, inf, -inf, 0 have finite gradients at 0 (1 from |x|'s derivative at 0, ties sharing a max's: the
    inf norm's max starts from 0, JAX's amax(|x|, initial=0), so the zeros share half of it); the 2-norm's is NaN, as
    JAX's (the derivative of sqrt at 0)."""
    z = tg.asarray(np.zeros(4))
    grads = {o: tg.grad(lambda x, o=o: tnp.linalg.norm(x, o))(z).numpy() for o in (1, np.inf, -np.inf, 0, None)}
    np.testing.assert_array_equal(grads[1], np.ones(4))
    np.testing.assert_allclose(grads[np.inf], np.full(4, 0.125))
    np.testing.assert_allclose(grads[-np.inf], np.full(4, 0.25))
    np.testing.assert_array_equal(grads[0], np.zeros(4))
    assert np.isnan(grads[None]).all()
    zm = tg.asarray(np.zeros((2, 2)))
    for o in (1, -1, np.inf, -np.inf):
        assert np.isfinite(tg.grad(lambda x, o=o: tnp.linalg.norm(x, o))(zm).numpy()).all(), o


def test_norm_errors_name_the_order_and_shape() -> None:
    with pytest.raises(ValueError, match="invalid order 'fro' for a vector norm"):
        tnp.linalg.norm(tnp.ones(3), "fro")
    with pytest.raises(ValueError, match="invalid order 3 for a matrix norm"):
        tnp.linalg.norm(tnp.ones((2, 2)), 3)
    with pytest.raises(ValueError, match=r"1-d or 2-d, got shape \(2, 2, 2\)"):
        tnp.linalg.norm(tnp.ones((2, 2, 2)), 1)
    with pytest.raises(ValueError, match="an int or a pair"):
        tnp.linalg.norm(tnp.ones((2, 2, 2)), axis=(0, 1, 2))


# ---- solve, inv, det, slogdet ----
@pytest.mark.x64
@pytest.mark.parametrize("a_shape,b_shape", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (3, 1)),
                                             ((3, 3), (2, 3, 2)), ((2, 1, 3, 3), (4, 3, 2))], ids=str)
def test_solve_matches_numpy(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    a = well(*a_shape[:-2])
    b = rand(*b_shape)
    assert_close(tnp.linalg.solve(T(a), T(b)), np.linalg.solve(a, b), rtol=1e-11, atol=1e-12)


def test_solve_pivots_and_handles_singular_matrices_as_lapack() -> None:
    """A zero where the first pivot would be needs a row swap; an exactly singular matrix gives a zero determinant
    and infs or NaNs in a solve (JAX's LAPACK does the same; there is no error under tracing)."""
    p = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [4.0, 0.0, 3.0]])
    b = np.array([1.0, 2.0, 3.0])
    assert_close(tnp.linalg.solve(T(p), T(b)), np.linalg.solve(p, b), rtol=1e-12, atol=1e-13)
    assert_close(tnp.linalg.det(T(p)), np.linalg.det(p), rtol=1e-12, atol=1e-13)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert tnp.linalg.det(T(singular)).item() == 0.0
    assert not np.isfinite(tnp.linalg.solve(T(singular), T(np.ones(2))).numpy()).all()
    sign, logdet = tnp.linalg.slogdet(T(singular))
    assert sign.item() == 0.0 and logdet.item() == -np.inf


@pytest.mark.x64
def test_inv_det_slogdet_match_numpy() -> None:
    a = well(2, n=4, seed=3)
    a[1] = a[1][::-1]     # a row order that needs swaps: a negative determinant
    assert_close(tnp.linalg.inv(T(a)), np.linalg.inv(a), rtol=1e-11, atol=1e-12)
    assert_close(tnp.linalg.det(T(a)), np.linalg.det(a), rtol=1e-11)
    sign, logdet = tnp.linalg.slogdet(T(a))
    want_sign, want_logdet = np.linalg.slogdet(a)
    np.testing.assert_array_equal(sign.numpy(), want_sign)
    assert_close(logdet, want_logdet, rtol=1e-12)
    assert tnp.linalg.det(tnp.zeros((2, 0, 0))).tolist() == [1.0, 1.0]


def test_solve_family_float32_and_integer_inputs() -> None:
    a = well(n=4, seed=5).astype(np.float32)
    b = rand(4, 2).astype(np.float32)
    x = tnp.linalg.solve(tg.asarray(a), tg.asarray(b))
    assert x.dtype == dtypes.float32
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a.astype(np.float64), b), rtol=1e-5, atol=1e-5)
    xi = tnp.linalg.solve(tg.asarray([[2, 0], [0, 4]]), tg.asarray([2, 2]))
    assert xi.dtype == dtypes.float32 and xi.tolist() == [1.0, 0.5]


@pytest.mark.x64
def test_lu_factor_and_lu_solve_match_scipy() -> None:
    scipy_linalg = pytest.importorskip("scipy.linalg")
    a = rand(4, 4, seed=7)
    lu, piv = sla.lu_factor(T(a))
    want_lu, want_piv = scipy_linalg.lu_factor(a)
    assert piv.dtype == dtypes.int32
    np.testing.assert_array_equal(piv.numpy(), want_piv)
    assert_close(lu, want_lu, rtol=1e-12, atol=1e-13)
    b = rand(4, 2, seed=8)
    for trans in (0, 1, "T"):
        assert_close(sla.lu_solve((lu, piv), T(b), trans=trans), scipy_linalg.lu_solve((want_lu, want_piv), b,
                                                                                       trans=1 if trans else 0),
                     rtol=1e-10, atol=1e-11)
    assert sla.lu_solve((lu, piv), T(b[:, 0])).shape == (4,)


@pytest.mark.x64
def test_blocked_lu_matches_scipy() -> None:
    """From 128 rows the factorisation goes by panels (an identity tail pads 130 to a multiple of the panel): the
    same pivots as LAPACK, every row swap applied to the columns already factored; solve and slogdet on it."""
    scipy_linalg = pytest.importorskip("scipy.linalg")
    a = rand(2, 130, 130, seed=9)
    a[1, :, 1] = 0.0                                 # singular: a zero pivot, left as it is
    lu, piv = sla.lu_factor(T(a))
    for k in range(2):
        want_lu, want_piv = scipy_linalg.lu_factor(a[k], check_finite=False)
        np.testing.assert_array_equal(piv.numpy()[k], want_piv)
        np.testing.assert_allclose(lu.numpy()[k], want_lu, rtol=1e-9, atol=1e-9)
    b = rand(130, 3, seed=10)
    np.testing.assert_allclose(tnp.linalg.solve(T(a[0]), T(b)).numpy(), np.linalg.solve(a[0], b), rtol=1e-9,
                               atol=1e-9)
    sign, logdet = tnp.linalg.slogdet(T(a[0]))
    want_sign, want_logdet = np.linalg.slogdet(a[0])
    assert sign.item() == want_sign
    np.testing.assert_allclose(logdet.item(), want_logdet, rtol=1e-12)


SOLVE_GRADS = {
    "solve_matrix": (lambda a, b: tnp.linalg.solve(a, b), (well(), rand(3, 2))),
    "solve_vector": (lambda a, b: tnp.linalg.solve(a, b), (well(), rand(3))),
    "solve_batched": (lambda a, b: tnp.linalg.solve(a, b), (well(2), rand(3, 2))),
    "inv": (tnp.linalg.inv, (well(seed=2),)),
    "det": (tnp.linalg.det, (well(2, seed=3),)),
    "slogdet": (lambda a: tnp.linalg.slogdet(a)[1], (well(seed=4),)),
    "lu_solve": (lambda a, b: sla.lu_solve(sla.lu_factor(a), b, trans=1), (well(seed=5), rand(3, 2))),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", list(SOLVE_GRADS))
def test_solve_family_gradients(name: str) -> None:
    f, args = SOLVE_GRADS[name]
    check_grads(f, *args, rtol=1e-5, atol=1e-6)


@pytest.mark.x64
def test_solve_and_det_second_order_match_jax() -> None:
    """The backward reads the factorisation as plain ops, so a second grad is right (not only the first)."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    a, b = well(seed=6), rand(3, seed=6)
    with jax.enable_x64(True):
        want_solve = np.asarray(jax.grad(lambda m: (jax.grad(lambda m: (jnp.linalg.solve(m, b) ** 2).sum())(m) ** 2)
                                         .sum())(jnp.asarray(a)))
        want_det = np.asarray(jax.grad(lambda m: (jax.grad(jnp.linalg.det)(m) ** 2).sum())(jnp.asarray(a)))
    got_solve = tg.grad(lambda m: (tg.grad(lambda m: (tnp.linalg.solve(m, T(b)) ** 2).sum())(m) ** 2).sum())(T(a))
    got_det = tg.grad(lambda m: (tg.grad(tnp.linalg.det)(m) ** 2).sum())(T(a))
    np.testing.assert_allclose(got_solve.numpy(), want_solve, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got_det.numpy(), want_det, rtol=1e-9, atol=1e-12)


def test_solve_under_jit_traces_once() -> None:
    f = tg.jit(lambda a, b: tnp.linalg.solve(a, b))
    for seed in (0, 1):
        a, b = well(seed=seed).astype(np.float32), rand(3, seed=seed).astype(np.float32)
        np.testing.assert_allclose(f(tg.asarray(a), tg.asarray(b)).numpy(), np.linalg.solve(a, b), rtol=1e-5,
                                   atol=1e-5)
    assert f.trace_count == 1


def test_solve_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"solve: a must be a square matrix .* got shape \(2, 3\)"):
        tnp.linalg.solve(tnp.ones((2, 3)), tnp.ones(2))
    with pytest.raises(ValueError, match=r"b must have shape \(3,\) or \(\.\.\., 3, k\) .* got shape \(2,\)"):
        tnp.linalg.solve(tnp.eye(3), tnp.ones(2))
    with pytest.raises(ValueError, match=r"got shape \(2, 3\)"):   # numpy 2 / JAX: a 2-d b is (n, k), not a batch
        tnp.linalg.solve(tnp.ones((2, 3, 3)), tnp.ones((2, 3)))
    with pytest.raises(ValueError, match=r"inv: a must be a square matrix .* got shape \(4,\)"):
        tnp.linalg.inv(tnp.ones(4))
    with pytest.raises(ValueError, match=r"det: a must be a square"):
        tnp.linalg.det(tnp.ones((2, 3)))
    with pytest.raises(TypeError, match="the pair \\(lu, piv\\)"):
        sla.lu_solve(tnp.eye(2), tnp.ones(2))
    with pytest.raises(ValueError, match=r"piv must have shape \(2,\)"):
        sla.lu_solve((tnp.eye(2), tnp.zeros(3, dtypes.int32)), tnp.ones(2))
