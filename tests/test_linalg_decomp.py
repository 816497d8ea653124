"""tnp.linalg's factorisations (qr, eigh, eigvalsh, svd, svdvals, pinv, matrix_rank, cholesky) against numpy's
float64 answers: float32 values within a few ulps * n of them, reconstruction (Q R, U diag(S) Vh, A v = w v) and
orthogonality on random, ill-conditioned and degenerate inputs (repeated eigenvalues, rank deficiency, zeros);
gradients table-driven against central differences (test_grad's `check_grads`, in float64), through
gauge-invariant functions of the vectors, as JAX's tests do; jit, vmap and compile counts.

Signs of eigen- and singular vectors (and bases of repeated ones) are not unique, so vectors are compared through
invariants; QR's are unique with LAPACK's Householder convention, and compared directly.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import numeric_grad
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grad import check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.dtypes import dtypes

L = tnp.linalg
EPS32 = float(np.finfo(np.float32).eps)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32)


def mT(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def orthogonal(n: int, seed: int) -> np.ndarray:
    return np.linalg.qr(rng(seed).standard_normal((n, n)))[0]


def with_spectrum(values: list[float], seed: int = 0, cols: int | None = None) -> np.ndarray:
    """u diag(values) v^T for random orthogonal u, v (v = u when cols is None: a symmetric matrix)."""
    k = len(values)
    u = orthogonal(k, seed)
    v = u if cols is None else orthogonal(cols, seed + 1)[:, :k]
    return (u * np.asarray(values)) @ v.T


def bound(a: np.ndarray, ulps: float = 4.0) -> float:
    """ulps * n * eps * ||a||_2 per matrix (the largest over the batch): the backward-stable error of a float32
    factorisation."""
    return ulps * max(a.shape[-2:]) * EPS32 * float(np.max(np.linalg.norm(a.astype(np.float64), 2, axis=(-2, -1))))


def assert_orthonormal_columns(q: np.ndarray, tol: float) -> None:
    k = q.shape[-1]
    np.testing.assert_allclose(mT(q) @ q.astype(np.float64), np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)),
                               atol=tol)


ORTHO_TOL = 8 * 8 * EPS32   # |Q^T Q - I| for the sizes here (n <= 8)


def assert_eigh(a: np.ndarray, w: tg.Tensor, v: tg.Tensor, ortho: float) -> None:
    """w numpy's eigenvalues of the symmetric a and a v = v diag(w), both within bound(a); v orthonormal within
    `ortho`."""
    tol = max(bound(a), 1e-30)
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(a.astype(np.float64)), atol=tol)
    wn, vn = w.numpy().astype(np.float64), v.numpy().astype(np.float64)
    np.testing.assert_allclose(a @ vn, vn * wn[..., None, :], atol=tol)
    assert_orthonormal_columns(v.numpy(), ortho)


def assert_svd(a: np.ndarray, u: tg.Tensor, s: tg.Tensor, vh: tg.Tensor, ortho: float) -> None:
    """s numpy's singular values and U S V^T = a, both within bound(a); U's and V's columns orthonormal within
    `ortho`."""
    tol = max(bound(a), 1e-30)
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(a.astype(np.float64), compute_uv=False), atol=tol)
    k = s.shape[-1]
    un, vn = u.numpy()[..., :k].astype(np.float64), vh.numpy()[..., :k, :].astype(np.float64)
    np.testing.assert_allclose((un * s.numpy()[..., None, :]) @ vn, a, atol=tol)
    assert_orthonormal_columns(u.numpy(), ortho)
    assert_orthonormal_columns(mT(vh.numpy()), ortho)

# a few sizes, so that examples and tests share compiled kernels (shapes are static: each new one compiles)
batch = st.sampled_from([(), (2,)])
side = st.sampled_from([1, 3, 4])


# ---- values against numpy, hypothesis over shapes (batch, 1 x 1, tall, wide) ----
@settings(max_examples=5)
@given(batch, side, side, st.sampled_from(["reduced", "complete", "r"]), st.integers(0, 2 ** 16))
def test_qr_matches_numpy(b: tuple[int, ...], m: int, n: int, mode: str, seed: int) -> None:
    a = f32(rng(seed).standard_normal(b + (m, n)))
    ours = L.qr(tg.asarray(a), mode)
    ref = np.linalg.qr(a.astype(np.float64), mode)
    tol = bound(a)
    if mode == "r":
        assert ours.dtype == dtypes.float32
        np.testing.assert_allclose(ours.numpy(), ref, atol=tol)
        return
    q, r = ours
    assert isinstance(ours, L.QRResult) and q.shape == ref[0].shape and r.shape == ref[1].shape
    # the same Householder convention as LAPACK: Q and R themselves agree (a random matrix is well conditioned)
    np.testing.assert_allclose(q.numpy(), ref[0], atol=tol * 4 / max(np.min(np.abs(np.diagonal(ref[1], 0, -2, -1))),
                                                                       1e-3))
    np.testing.assert_allclose(q.numpy() @ r.numpy().astype(np.float64), a, atol=tol)
    np.testing.assert_array_equal(np.tril(r.numpy(), -1), 0)
    assert_orthonormal_columns(q.numpy(), ORTHO_TOL)


@settings(max_examples=5)
@given(batch, side, st.sampled_from(["L", "U"]), st.integers(0, 2 ** 16))
def test_eigh_matches_numpy(b: tuple[int, ...], n: int, uplo: str, seed: int) -> None:
    x = rng(seed).standard_normal(b + (n, n))
    a = f32(x + mT(x))
    junk = np.triu(np.full((n, n), np.nan), 1) if uplo == "L" else np.tril(np.full((n, n), np.nan), -1)
    # numpy's way: the other triangle is not read
    w, v = L.eigh(tg.asarray(a + junk.astype(np.float32)), UPLO=uplo, symmetrize_input=False)
    assert_eigh(a, w, v, ORTHO_TOL)
    np.testing.assert_allclose(L.eigvalsh(tg.asarray(a), UPLO=uplo).numpy(), np.linalg.eigvalsh(a.astype(np.float64)),
                               atol=bound(a))


@pytest.mark.x64
def test_cholesky_and_eigh_symmetrise_their_input_as_jax() -> None:
    """jax.numpy.linalg's default, symmetrize_input=True: the factor of (a + a^T) / 2, and a gradient that is
    symmetric (numpy's one-triangle read gives the whole gradient to one triangle): against finite differences of
    numpy's factorisations of the symmetrised matrix."""
    g = rng(3)
    x = g.standard_normal((4, 4))
    spd_a = x @ x.T + 4 * np.eye(4)
    a = spd_a + np.triu(g.standard_normal((4, 4)), 1) * 0.3          # not symmetric
    sym = (a + a.T) / 2
    np.testing.assert_allclose(L.cholesky(tg.asarray(f32(a))).numpy(), np.linalg.cholesky(sym), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(L.eigvalsh(tg.asarray(f32(a))).numpy(), np.linalg.eigvalsh(sym), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(L.cholesky(tg.asarray(f32(a)), symmetrize_input=False).numpy(),
                               np.linalg.cholesky(np.tril(a) + np.tril(a, -1).T), rtol=1e-5, atol=1e-5)
    r = g.standard_normal((4, 4))
    for fn, ref in ((lambda k: (L.cholesky(k) * tg.asarray(r)).sum(),
                     lambda k: float((np.linalg.cholesky((k + k.T) / 2) * r).sum())),
                    (lambda k: (L.eigvalsh(k) * tg.asarray(r[0])).sum(),
                     lambda k: float((np.linalg.eigvalsh((k + k.T) / 2) * r[0]).sum()))):
        grad = tg.grad(fn)(tg.asarray(a)).numpy()
        np.testing.assert_allclose(grad, grad.T, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(grad, numeric_grad(ref, a), rtol=1e-5, atol=1e-7)


@settings(max_examples=5)
@given(batch, side, side, st.booleans(), st.integers(0, 2 ** 16))
def test_svd_matches_numpy(b: tuple[int, ...], m: int, n: int, full: bool, seed: int) -> None:
    a = f32(rng(seed).standard_normal(b + (m, n)))
    u, s, vh = L.svd(tg.asarray(a), full_matrices=full)
    ref_u, ref_s, ref_vh = np.linalg.svd(a.astype(np.float64), full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (ref_u.shape, ref_s.shape, ref_vh.shape)
    assert_svd(a, u, s, vh, ORTHO_TOL)
    np.testing.assert_allclose(L.svdvals(tg.asarray(a)).numpy(), ref_s, atol=bound(a))
    np.testing.assert_allclose(L.svd(tg.asarray(a), compute_uv=False).numpy(), ref_s, atol=bound(a))


@settings(max_examples=5)
@given(batch, side, side, st.integers(0, 2 ** 16))
def test_pinv_and_matrix_rank_match_numpy(b: tuple[int, ...], m: int, n: int, seed: int) -> None:
    g = rng(seed)
    r = g.integers(0, min(m, n) + 1)      # rank r (0: the zero matrix)
    a = f32(g.standard_normal(b + (m, r)) @ g.standard_normal(b + (r, n)))
    ranks = L.matrix_rank(tg.asarray(a))
    np.testing.assert_array_equal(ranks.numpy(), np.linalg.matrix_rank(a))
    p = L.pinv(tg.asarray(a)).numpy().astype(np.float64)
    a64 = a.astype(np.float64)
    # the Penrose conditions, which fix the pseudo-inverse
    tol = bound(a) * max(1.0, float(np.max(np.abs(np.linalg.pinv(a64)))) ** 2)
    np.testing.assert_allclose(a64 @ p @ a64, a64, atol=tol)
    np.testing.assert_allclose(p @ a64 @ p, p, atol=tol * max(1.0, float(np.max(np.abs(p)))))
    np.testing.assert_allclose(a64 @ p, mT(a64 @ p), atol=tol)
    np.testing.assert_allclose(p @ a64, mT(p @ a64), atol=tol)


# ---- ill-conditioned and degenerate inputs ----
DEGENERATE_SYMMETRIC = {
    "repeated": with_spectrum([1.0, 1.0, 1.0, 2.0, 3.0, 3.0]),
    "identity": np.eye(5),
    "zero": np.zeros((4, 4)),
    "ill_conditioned": with_spectrum(list(np.logspace(0, -6, 7)), seed=3),
    "indefinite_cluster": with_spectrum([-2.0, -2.0 + 1e-6, 0.0, 0.0, 5.0], seed=4),
    "diagonal": np.diag([3.0, -1.0, 2.0]),
    "odd_8": with_spectrum(list(np.arange(8.0) - 3.5), seed=5),
    # past HOUSEHOLDER_MIN rows: clusters (repeated eigenvalues) start inverse iteration in different directions and
    # end as an orthonormal basis of their invariant subspace
    "16_repeated": with_spectrum([1.0] * 6 + [2.0] * 5 + [3.0] * 5, seed=8),
    "16_identity": np.eye(16),
    "16_zero": np.zeros((16, 16)),
    "16_ill_conditioned": with_spectrum(list(np.logspace(0, -6, 16)), seed=9),
    "16_indefinite_cluster": with_spectrum([-2.0, -2.0 + 1e-6, -2.0 - 1e-6, 5.0, 5.0] + [0.0] * 11, seed=10),
    "16_diagonal": np.diag(np.arange(16.0) % 5 - 2.0),
    "16_tridiagonal_split": np.diag(np.arange(16.0)) + np.diag(np.r_[np.ones(7), 0.0, np.ones(7)], 1) +
    np.diag(np.r_[np.ones(7), 0.0, np.ones(7)], -1),
    "16_graded": np.diag(10.0 ** -np.arange(16.0)) + np.diag(np.full(15, 1e-3), 1) + np.diag(np.full(15, 1e-3), -1),
}


@pytest.mark.parametrize("name", DEGENERATE_SYMMETRIC)
def test_eigh_degenerate_and_ill_conditioned(name: str) -> None:
    a = f32(DEGENERATE_SYMMETRIC[name])
    w, v = L.eigh(tg.asarray(a))
    assert_eigh(a, w, v, max(ORTHO_TOL, 4 * a.shape[-1] * EPS32))
    assert np.all(np.diff(w.numpy()) >= 0), "ascending, as numpy"


# ---- past HOUSEHOLDER_MIN rows: a tridiagonal matrix, bisection and inverse iteration ----
@settings(max_examples=4)
@given(st.sampled_from([(), (2,)]), st.sampled_from([12, 20, 33]), st.sampled_from(["L", "U"]),
       st.integers(0, 2 ** 16))
def test_eigh_of_a_larger_matrix_matches_numpy(b: tuple[int, ...], n: int, uplo: str, seed: int) -> None:
    from tgfx.scipy._decomp import HOUSEHOLDER_MIN
    assert n >= HOUSEHOLDER_MIN
    x = rng(seed).standard_normal(b + (n, n))
    a = f32(x + mT(x))
    junk = np.triu(np.full((n, n), np.nan), 1) if uplo == "L" else np.tril(np.full((n, n), np.nan), -1)
    w, v = L.eigh(tg.asarray(a + junk.astype(np.float32)), UPLO=uplo, symmetrize_input=False)
    assert_eigh(a, w, v, 4 * n * EPS32)
    np.testing.assert_allclose(L.eigvalsh(tg.asarray(a), UPLO=uplo).numpy(), np.linalg.eigvalsh(a.astype(np.float64)),
                               atol=bound(a))


def test_eigh_of_a_batch_of_large_clusters() -> None:
    # two 62 x 62 matrices with 4 eigenvalues each repeated 15-16 times: nearly split tridiagonal matrices whose
    # clusters needed more than two inverse iterations (with two: residual 45 n eps ||a||); drawn as a fuzz run drew
    # them (the first matrices' draws are skipped)
    g = rng(1)
    for trial in range(3):
        n, b = int(g.integers(12, 70)), [(), (2,)][trial % 2]
        g.standard_normal(b + (n, n))
        g.standard_normal(b + (int(g.integers(12, 60)), int(g.integers(12, 60))))
    n = int(g.integers(12, 70))
    q, _ = np.linalg.qr(g.standard_normal((2, n, n)))
    values = np.repeat(g.standard_normal(4), (n + 3) // 4)[:n]
    a = f32((q * values[None, None, :]) @ mT(q))
    w, v = L.eigh(tg.asarray(a))
    assert_eigh(a, w, v, 4 * n * EPS32)


@pytest.mark.x64
def test_eigh_of_a_larger_matrix_is_differentiable() -> None:
    # the same backward (JAX's rule on w and V) whichever way the forward went, in float64
    check_grads(_vwv, _sym(12, 4))


@pytest.mark.x64
def test_svd_of_a_larger_matrix_is_differentiable() -> None:
    # past HOUSEHOLDER_MIN columns the bidiagonalisation's reflectors join a Python True into a mask: made a captured
    # constant, it was an input of the SVD function that its backward gave no gradient for (a ValueError)
    a = rng(5).standard_normal((14, 13))
    check_grads(lambda x: L.svd(x, compute_uv=False), a)
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    g = tg.grad(lambda x: L.svd(x, compute_uv=False).sum())(tg.asarray(a))   # d sum(s) / da = U V^T
    np.testing.assert_allclose(g.numpy(), u @ vh, rtol=1e-10, atol=1e-12)


def test_eigh_tridiagonal_vectors_by_inverse_iteration() -> None:
    import tgfx.scipy.linalg as sla
    rng_ = rng(11)
    d, e = rng_.standard_normal(40), rng_.standard_normal(39)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    w, v = sla.eigh_tridiagonal(tg.asarray(f32(d)), tg.asarray(f32(e)))
    tol = bound(f32(t))
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(t), atol=tol)
    vn = v.numpy().astype(np.float64)
    np.testing.assert_allclose(t @ vn, vn * w.numpy().astype(np.float64), atol=tol)
    assert_orthonormal_columns(v.numpy(), 4 * 40 * EPS32)


@settings(max_examples=4)
@given(st.sampled_from([(), (2,)]), st.sampled_from([(12, 12), (20, 13), (13, 30)]), st.booleans(),
       st.integers(0, 2 ** 16))
def test_svd_of_a_larger_matrix_matches_numpy(b: tuple[int, ...], mn: tuple[int, int], full: bool, seed: int) -> None:
    # past HOUSEHOLDER_MIN columns: V through a bidiagonal matrix (Golub-Kahan bisection and inverse iteration)
    m, n = mn
    a = f32(rng(seed).standard_normal(b + (m, n)))
    u, s, vh = L.svd(tg.asarray(a), full_matrices=full)
    ref_u, ref_s, ref_vh = np.linalg.svd(a.astype(np.float64), full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (ref_u.shape, ref_s.shape, ref_vh.shape)
    assert_svd(a, u, s, vh, 4 * max(m, n) * EPS32)
    np.testing.assert_allclose(L.svdvals(tg.asarray(a)).numpy(), ref_s, atol=bound(a))


DEGENERATE_GENERAL = {
    "rank_2_of_6x4": rng(1).standard_normal((6, 2)) @ rng(2).standard_normal((2, 4)),
    "rank_1_wide": np.outer([1.0, -2.0, 0.5], [3.0, 1.0, 0.0, 2.0, -1.0]),
    "zero": np.zeros((3, 5)),
    "ill_conditioned": with_spectrum(list(np.logspace(0, -6, 5)), seed=6, cols=7).T,     # 7 x 5, cond 1e6
    "repeated": with_spectrum([2.0, 2.0, 2.0, 1.0], seed=7, cols=4),
    "zero_column": np.concatenate([rng(3).standard_normal((4, 2)), np.zeros((4, 1))], axis=1),
    # past HOUSEHOLDER_MIN columns: V through a bidiagonal matrix
    "rank_3_of_20x14": rng(12).standard_normal((20, 3)) @ rng(13).standard_normal((3, 14)),
    "zero_14x16": np.zeros((14, 16)),
    "repeated_16": with_spectrum([2.0] * 6 + [1.0] * 6 + [0.5] * 4, seed=14, cols=16),
    "ill_conditioned_18x14": with_spectrum(list(np.logspace(0, -6, 14)), seed=15, cols=18).T,
    "identity_13": np.eye(13),
}


@pytest.mark.parametrize("name", DEGENERATE_GENERAL)
def test_svd_and_qr_degenerate_and_ill_conditioned(name: str) -> None:
    a = f32(DEGENERATE_GENERAL[name])
    ortho = max(ORTHO_TOL, 4 * max(a.shape) * EPS32)
    for full in (False, True):
        u, s, vh = L.svd(tg.asarray(a), full_matrices=full)
        assert_svd(a, u, s, vh, ortho)          # orthonormal whatever the rank
        assert np.all(np.diff(s.numpy()) <= 0), "descending, as numpy"
    for mode in ("reduced", "complete"):
        q, r = L.qr(tg.asarray(a), mode)
        np.testing.assert_allclose(q.numpy() @ r.numpy().astype(np.float64), a, atol=max(bound(a), 1e-30))
        assert_orthonormal_columns(q.numpy(), ortho)
    np.testing.assert_array_equal(L.matrix_rank(tg.asarray(a)).numpy(), np.linalg.matrix_rank(a))


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (20, 14)])   # Jacobi, its transpose, Householder
def test_svd_of_a_matrix_with_a_nan_is_nan_in_every_factor(shape: tuple[int, int]) -> None:
    """As JAX's: s and Vt were NaN, but U came out of QR of NaN columns as the identity's columns, a U that looked
    right. The other matrices of a batch keep their factors."""
    a = f32(rng(16).standard_normal((2, *shape)))
    a[1, 0, 0] = np.nan
    for full in (False, True):
        u, s, vh = (f.numpy() for f in L.svd(tg.asarray(a), full_matrices=full))
        assert np.isnan(u[1]).all() and np.isnan(s[1]).all() and np.isnan(vh[1]).all()
        assert not np.isnan(u[0]).any()
        assert_svd(a[0], *(tg.asarray(f[0]) for f in (u, s, vh)), ORTHO_TOL)


@pytest.mark.parametrize("scale", [1e25, 1e-25])
def test_extreme_scales_neither_overflow_nor_underflow(scale: float) -> None:
    """Entries near 1e25 (or 1e-25) have squares beyond float32's range: each factorisation scales by a power of two
    first, as LAPACK's norms do, and is as accurate as at scale 1."""
    b = rng(10).standard_normal((4, 3))
    a, s = f32(b * scale), f32(b.T @ b * scale)
    np.testing.assert_allclose(L.svdvals(tg.asarray(a)).numpy(), np.linalg.svd(a.astype(np.float64),
                               compute_uv=False), rtol=0, atol=bound(a))
    np.testing.assert_allclose(L.eigvalsh(tg.asarray(s)).numpy(), np.linalg.eigvalsh(s.astype(np.float64)),
                               rtol=0, atol=bound(s))
    q, r = L.qr(tg.asarray(a))
    np.testing.assert_allclose(r.numpy(), np.linalg.qr(a.astype(np.float64))[1], rtol=0, atol=bound(a))
    assert_orthonormal_columns(q.numpy(), ORTHO_TOL)


def test_singular_values_keep_their_relative_accuracy() -> None:
    """One-sided Jacobi, not eigh of A^T A: a singular value 1e-6 of the largest is right to float32's relative
    precision (through A^T A it would be lost below sqrt(eps) = 3e-4)."""
    values = [1.0, 1e-2, 1e-4, 1e-6]
    a = with_spectrum(values, seed=8, cols=4)
    s = L.svdvals(tg.asarray(f32(a))).numpy()
    ref = np.linalg.svd(f32(a).astype(np.float64), compute_uv=False)   # of the rounded input
    np.testing.assert_allclose(s, ref, rtol=0.05)


# ---- the rest of the API ----
def test_named_results_hermitian_svd_and_cholesky() -> None:
    x = rng(4).standard_normal((2, 4, 4))
    a = f32(x @ mT(x) + 4 * np.eye(4)) * np.array([1, -1], np.float32)[:, None, None]   # one definite, one not
    res = L.eigh(tg.asarray(a))
    assert res._fields == ("eigenvalues", "eigenvectors")
    assert L.qr(tg.asarray(a))._fields == ("Q", "R")
    sv = L.svd(tg.asarray(a), hermitian=True)
    assert sv._fields == ("U", "S", "Vh")
    tol = bound(a)
    np.testing.assert_allclose(sv.S.numpy(), np.linalg.svd(a.astype(np.float64), compute_uv=False), atol=tol)
    np.testing.assert_allclose((sv.U.numpy() * sv.S.numpy()[..., None, :]) @ sv.Vh.numpy().astype(np.float64), a,
                               atol=tol)
    np.testing.assert_allclose(L.pinv(tg.asarray(a), hermitian=True).numpy(), np.linalg.pinv(a.astype(np.float64)),
                               atol=1e-5)
    np.testing.assert_array_equal(L.matrix_rank(tg.asarray(a), hermitian=True).numpy(), [4, 4])
    spd = a[0]
    np.testing.assert_allclose(L.cholesky(tg.asarray(spd)).numpy(), np.linalg.cholesky(spd.astype(np.float64)),
                               atol=bound(spd))
    np.testing.assert_allclose(L.cholesky(tg.asarray(spd), upper=True).numpy(),
                               np.linalg.cholesky(spd.astype(np.float64), upper=True), atol=bound(spd))


@pytest.mark.parametrize("ord", ["nuc", 2, -2])
def test_singular_value_norms_match_numpy(ord: Any) -> None:  # noqa: A002 - numpy's name
    x = f32(rng(6).standard_normal((2, 3, 4)))
    tol = bound(x)
    for axis in ((1, 2), (2, 0)):
        for keepdims in (False, True):
            ours = L.norm(tg.asarray(x), ord, axis, keepdims)
            np.testing.assert_allclose(ours.numpy(), np.linalg.norm(x.astype(np.float64), ord, axis, keepdims),
                                       atol=tol * (3 if ord == "nuc" else 1))
    np.testing.assert_allclose(L.matrix_norm(tg.asarray(x), ord=ord).numpy(),
                               np.linalg.matrix_norm(x.astype(np.float64), ord=ord), atol=tol * 3)


def test_tolerances_and_edge_shapes() -> None:
    a = f32(np.diag([1.0, 1e-3, 1e-6]))
    assert L.matrix_rank(tg.asarray(a)).item() == 3
    assert L.matrix_rank(tg.asarray(a), rtol=1e-4).item() == 2
    assert L.matrix_rank(tg.asarray(a), tol=1e-2).item() == 1
    np.testing.assert_allclose(L.pinv(tg.asarray(a), rtol=1e-4).numpy(), np.diag([1.0, 1e3, 0.0]), rtol=1e-6)
    np.testing.assert_allclose(L.pinv(tg.asarray(a), rcond=1e-2).numpy(), np.diag([1.0, 0.0, 0.0]))
    per_matrix = L.pinv(tg.asarray(np.stack([a, a])), rtol=tg.asarray(np.array([1e-4, 1e-2], np.float32)))
    np.testing.assert_allclose(per_matrix.numpy()[:, 1, 1], [1e3, 0.0], rtol=1e-6)
    assert L.matrix_rank(tg.asarray(np.zeros(3, np.float32))).item() == 0
    assert L.matrix_rank(tg.asarray(np.array([0.0, 2.0], np.float32))).item() == 1
    assert L.qr(tg.asarray(np.zeros((3, 0), np.float32))).Q.shape == (3, 0)
    assert L.svd(tg.asarray(np.zeros((2, 0), np.float32))).U.shape == (2, 2)
    assert L.svdvals(tg.asarray(np.zeros((2, 0, 3), np.float32))).shape == (2, 0)
    assert L.eigh(tg.asarray(np.zeros((0, 0), np.float32))).eigenvectors.shape == (0, 0)
    one = L.svd(tg.asarray(np.array([[-3.0]], np.float32)))
    assert (one.S.item(), float(one.U.numpy()[0, 0] * one.Vh.numpy()[0, 0])) == (3.0, -1.0)


def test_errors_name_the_argument_and_the_fix() -> None:
    with pytest.raises(ValueError, match=r"qr: mode must be .*got 'raw'"):
        L.qr(tnp.ones((2, 2)), mode="raw")
    with pytest.raises(ValueError, match=r"eigh: UPLO must be 'L' or 'U', got 'X'"):
        L.eigh(tnp.ones((2, 2)), UPLO="X")
    with pytest.raises(ValueError, match=r"eigh: a must be a square matrix .*got shape \(2, 3\)"):
        L.eigh(tnp.ones((2, 3)))
    with pytest.raises(ValueError, match=r"svd: needs a matrix .*got shape \(3,\)"):
        L.svd(tnp.ones(3))
    with pytest.raises(TypeError, match=r"svdvals: takes real float32 or float64 .*got float16.*astype"):
        L.svdvals(tnp.ones((2, 2), dtype=dtypes.float16))
    with pytest.raises(ValueError, match="pinv: give rtol or rcond"):
        L.pinv(tnp.ones((2, 2)), rcond=0.1, rtol=0.1)
    with pytest.raises(NotImplementedError, match=r"qr: the gradient needs .*as in JAX"):
        tg.grad(lambda x: tnp.sum(L.qr(x).R))(tnp.ones((2, 3)))
    with pytest.raises(NotImplementedError, match=r"svd: the gradient of U and Vh needs full_matrices=False"):
        tg.grad(lambda x: tnp.sum(L.svd(x).U))(tnp.ones((3, 2)))


# ---- gradients: float64 against central differences ----
def _sym(n: int, seed: int) -> np.ndarray:
    x = rng(seed).standard_normal((n, n))
    return x + x.T


def _spd(n: int, seed: int) -> np.ndarray:
    x = rng(seed).standard_normal((n, n))
    return x @ x.T + n * np.eye(n)


def _uv(f: Callable[[tg.Tensor], tg.Tensor]) -> Callable[[Any], tg.Tensor]:
    """U diag(f(S)) Vh of the reduced SVD: invariant to the vectors' signs."""
    def g(x: tg.Tensor) -> tg.Tensor:
        u, s, vh = L.svd(x, full_matrices=False)
        return (u * f(s)[..., None, :]) @ vh
    return g


def _vwv(x: tg.Tensor) -> tg.Tensor:
    """V diag(sin w) V^T: invariant to the eigenvectors' signs."""
    w, v = L.eigh(x)
    return (v * tnp.sin(w)[..., None, :]) @ tnp.swapaxes(v, -1, -2)


GRADS: dict[str, tuple[Callable[..., tg.Tensor], np.ndarray]] = {
    "qr_q_tall": (lambda x: L.qr(x).Q, rng(1).standard_normal((4, 3))),
    "qr_r_batch": (lambda x: L.qr(x).R, rng(2).standard_normal((2, 3, 3))),
    "qr_mode_r": (lambda x: L.qr(x, "r"), rng(3).standard_normal((4, 3))),
    "eigvalsh": (L.eigvalsh, _sym(3, 4)),
    "eigh_w_upper": (lambda x: L.eigh(x, UPLO="U").eigenvalues, _sym(3, 5)),
    "eigh_v_squared": (lambda x: L.eigh(x).eigenvectors ** 2, _sym(3, 6)),
    "eigh_vwv_batch": (_vwv, np.stack([_sym(3, 7), _sym(3, 8)])),
    "svdvals_tall": (L.svdvals, rng(9).standard_normal((4, 3))),
    "svdvals_wide_batch": (L.svdvals, rng(10).standard_normal((2, 3, 4))),
    "svd_usv_tall": (_uv(tnp.exp), rng(11).standard_normal((4, 3))),
    "svd_usv_wide": (_uv(tnp.exp), rng(12).standard_normal((3, 4))),
    "svd_u_squared": (lambda x: L.svd(x, full_matrices=False).U ** 2, rng(14).standard_normal((4, 3))),
    "svd_vh_squared": (lambda x: L.svd(x, full_matrices=False).Vh ** 2, rng(15).standard_normal((3, 4))),
    "svd_hermitian": (lambda x: L.svd(x, hermitian=True, compute_uv=False), _sym(3, 16)),
    "pinv_tall": (L.pinv, rng(17).standard_normal((4, 3))),
    "pinv_wide": (L.pinv, rng(18).standard_normal((3, 4))),
    "pinv_hermitian": (lambda x: L.pinv(x, hermitian=True), _sym(3, 19)),
    "cholesky_upper": (lambda x: L.cholesky(x, upper=True), _spd(3, 20)),
    "norm_nuc_and_2": (lambda x: L.norm(x, "nuc", axis=(0, 2)) + L.norm(x, 2, axis=(2, 0)),
                       rng(21).standard_normal((3, 2, 3))),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", GRADS)
def test_gradients_match_finite_differences(name: str) -> None:
    f, x = GRADS[name]
    check_grads(f, x)


@pytest.mark.x64
def test_gradients_and_second_order_match_jax() -> None:
    """JAX's rules, checked against JAX itself (float64): qr, svd (reduced) and pinv on a general matrix; eigh on a
    symmetric one, where JAX symmetrises its input and tgfx reads the lower triangle, so tgfx's gradient is JAX's
    folded onto that triangle (2x below the diagonal, 1x on it). Second order through svdvals' backward."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    a, s = rng(30).standard_normal((4, 3)), _sym(3, 31)
    w4 = rng(32).standard_normal((4, 3))
    fns = {   # (tgfx function, jax function) of a scalar
        "qr": (lambda x, n: n.sum(n.linalg.qr(x)[0] * w4) + n.sum(n.linalg.qr(x)[1] ** 3), a),
        "svd": (lambda x, n: n.sum((lambda u, sv, vh: (u * n.exp(sv)[None, :]) @ vh)(
            *n.linalg.svd(x, full_matrices=False)) * w4), a),
        "pinv": (lambda x, n: n.sum(n.linalg.pinv(x) ** 2), a),
        "eigh": (lambda x, n: n.sum(n.linalg.eigh(x)[1] ** 4 * w4[:3]) + n.sum(n.linalg.eigh(x)[0] ** 3), s),
    }
    with jax.enable_x64(True):
        for name, (f, x) in fns.items():
            ours = tg.grad(lambda t, f=f: f(t, tnp))(tg.asarray(x)).numpy()
            want = np.asarray(jax.grad(lambda t, f=f: f(t, jnp))(jnp.asarray(x)))
            if name == "eigh":
                want = np.tril(want) + np.tril(want, -1)
            np.testing.assert_allclose(ours, want, rtol=1e-9, atol=1e-11, err_msg=name)
        ours2 = tg.grad(lambda t: tnp.sum(tg.grad(lambda u: tnp.sum(L.svdvals(u) ** 3))(t) ** 2))(tg.asarray(a))
        want2 = jax.grad(lambda t: jnp.sum(jax.grad(lambda u: jnp.sum(jnp.linalg.svd(u, compute_uv=False) ** 3))(t)
                                           ** 2))(jnp.asarray(a))
        np.testing.assert_allclose(ours2.numpy(), np.asarray(want2), rtol=1e-8, atol=1e-10)
        # eigvalsh: a symmetric direction, where reading the lower triangle and symmetrising agree
        d = _sym(3, 33)
        ours3 = tg.jvp(tg.grad(lambda t: tnp.sum(L.eigvalsh(t) ** 3)), (tg.asarray(s),), (tg.asarray(d),))[1]
        want3 = jax.jvp(jax.grad(lambda t: jnp.sum(jnp.linalg.eigvalsh(t) ** 3)), (jnp.asarray(s),),
                        (jnp.asarray(d),))[1]
        np.testing.assert_allclose(ours3.numpy(), np.tril(want3) + np.tril(want3, -1), rtol=1e-8, atol=1e-10)


@pytest.mark.x64
def test_gradient_at_repeated_eigenvalues_is_finite_for_the_values() -> None:
    """The eigenvalues' gradient needs no 1 / (w_j - w_i): finite at a repeated eigenvalue, as JAX's: d sum(w^2) / da
    = 2 a, the input symmetrised (JAX's default); reading only the lower triangle (symmetrize_input=False, numpy's
    way), 2 a on the diagonal, 4 a below it, 0 above."""
    a = with_spectrum([1.0, 1.0, 2.0], seed=9)
    g = tg.grad(lambda x: tnp.sum(L.eigvalsh(x) ** 2))(tg.asarray(a)).numpy()
    np.testing.assert_allclose(g, 2 * a, atol=1e-12)
    g = tg.grad(lambda x: tnp.sum(L.eigvalsh(x, symmetrize_input=False) ** 2))(tg.asarray(a)).numpy()
    np.testing.assert_allclose(g, 2 * np.tril(a) + 2 * np.tril(a, -1), atol=1e-12)


# ---- transforms and counts ----
def test_vmap_and_jit_compose_and_compile_once_per_shape() -> None:
    x = f32(rng(5).standard_normal((3, 4, 4)))
    s = x + mT(x)
    np.testing.assert_allclose(tg.vmap(L.eigvalsh)(tg.asarray(s)).numpy(), np.linalg.eigvalsh(s.astype(np.float64)),
                               atol=bound(s))
    np.testing.assert_allclose(tg.vmap(L.svdvals)(tg.asarray(x)).numpy(), np.linalg.svd(x, compute_uv=False),
                               atol=bound(x))
    np.testing.assert_allclose(tg.vmap(lambda m: L.qr(m).R)(tg.asarray(x)).numpy(), np.linalg.qr(x)[1],
                               atol=bound(x) * 4)
    grads = tg.vmap(tg.grad(lambda m: tnp.sum(L.svdvals(m))))(tg.asarray(x)).numpy()
    u, _, vh = np.linalg.svd(x.astype(np.float64))
    np.testing.assert_allclose(grads, u @ vh, atol=1e-5)      # d sum(s) / da = U Vh

    svd = tg.jit(lambda m: L.svd(m, full_matrices=False))
    svd(tg.asarray(x[0]))
    tg.counters.reset()
    for i in range(1, 3):      # new values, same shape: no retrace, nothing compiled
        u_, s_, vh_ = svd(tg.asarray(x[i]))
        np.testing.assert_allclose((u_.numpy() * s_.numpy()) @ vh_.numpy(), x[i], atol=bound(x))
    assert svd.trace_count == 1 and tg.counters.compile_count == 0


# Jacobi sweeps; a tridiagonal matrix's bisection, its Q accumulated (n <= ACCUMULATE_MAX_ROWS) or applied after
@pytest.mark.parametrize("sizes", [(9, 11), (13, 15), (17, 19)])
def test_eigh_loop_compiles_the_same_kernels_whatever_the_sweeps(sizes: tuple[int, int]) -> None:
    """The sweeps and rounds (or the tridiagonalisation's steps and the bisection's halvings) are device loops: a
    matrix that needs no sweep (diagonal) runs the program compiled for one that needs several, and a larger n runs as
    many distinct kernels as a small one (counted from the profile: compiles depend on what other tests compiled)."""
    from tgfx.devices import get_device
    from tgfx.scipy._decomp import ACCUMULATE_MAX_ROWS, HOUSEHOLDER_MIN
    small, large = sizes
    assert (small >= HOUSEHOLDER_MIN) == (large >= HOUSEHOLDER_MIN)
    assert (small <= ACCUMULATE_MAX_ROWS) == (large <= ACCUMULATE_MAX_ROWS)
    dev = get_device()   # the default device's: where eigh of a new Tensor runs
    kernels = []
    for a in (_sym(small, 1), _sym(large, 2)):
        dev.synchronize()
        dev.clear_profile()
        L.eigh(tg.asarray(f32(a))).eigenvalues.numpy()
        dev.synchronize()
        kernels.append({e.name for e in dev.profile_events if e.name != "copy"})
        if len(kernels) == 1:
            tg.counters.reset()
            L.eigh(tg.asarray(f32(np.diag(np.arange(float(small)))))).eigenvalues.numpy()
            assert tg.counters.compile_count == 0, \
                f"a diagonal {small} x {small} matrix (no sweep) compiles nothing after a full one"
    assert len(kernels[1]) == len(kernels[0]) > 0, f"n = {large} runs as many kernels as n = {small} ({kernels})"


def _packets_run(f: Callable[[], Any]) -> int:
    """Kernels and copies the default device ran for f() (a device loop's body once a step), from the profile."""
    from tgfx.devices import get_device
    dev = get_device()
    f()
    dev.synchronize()
    dev.clear_profile()
    f()
    dev.synchronize()
    assert dev.profile_events, f"f ran nothing on {dev.name}"
    return len(dev.profile_events)


def test_small_qr_and_eigh_run_few_launches() -> None:
    """A small QR accumulates Q^T beside R in one loop of five kernels a column (no stacked reflectors, no reverse
    loop applying them), a small eigh its tridiagonalisation's Q the same way, and the bisection runs a counted loop of
    three kernels a halving (no convergence test): a 12 x 12 QR ran 163 packets, an eigh 647. Launches, not
    arithmetic, are these sizes' time."""
    a = f32(_sym(12, 3))
    x = tg.asarray(a)
    qr = tg.jit(lambda m: L.qr(m))
    assert _packets_run(lambda: qr(x).Q.numpy()) <= 70
    q, r = qr(x)
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a, atol=bound(a) * 4)
    np.testing.assert_allclose(r.numpy(), np.linalg.qr(a.astype(np.float64))[1], atol=bound(a) * 4)
    assert_orthonormal_columns(q.numpy(), 12 * 12 * EPS32)
    eigh = tg.jit(lambda m: L.eigh(m))
    assert _packets_run(lambda: eigh(x).eigenvectors.numpy()) <= 400
    w, v = eigh(x)
    assert_eigh(a.astype(np.float64), w, v, 12 * 12 * EPS32)


@pytest.mark.parametrize("shape", [(3, 16, 10), (6, 16), (16, 12)])
def test_qr_accumulating_q_beside_r_matches_numpy(shape: tuple[int, ...]) -> None:
    # up to ACCUMULATE_MAX_ROWS rows and twice Q's columns: Q^T from [a | I] in the loop that makes R; wide, tall,
    # complete and batched, each the same Q and R as LAPACK's reflectors give
    a = f32(rng(7).standard_normal(shape))
    for mode in ("reduced", "complete"):
        q, r = L.qr(tg.asarray(a), mode=mode)
        qn, rn = np.linalg.qr(a.astype(np.float64), mode=mode)
        np.testing.assert_allclose(q.numpy(), qn, atol=bound(a) * 4)
        np.testing.assert_allclose(r.numpy(), rn, atol=bound(a) * 4)


def test_inverse_iteration_start_vectors_are_a_hash_of_the_indices() -> None:
    # murmur3's finaliser of a Weyl step of (i, j), on uint32 lanes: the same numbers as numpy's, in [-1, 1), and far
    # from dependent (a cluster's vectors start apart); made from constants, so eigh's function takes no buffer
    from tgfx.scipy._tridiagonal import _start
    i, j = np.arange(64, dtype=np.uint64)[:, None], np.arange(64, dtype=np.uint64)[None, :]
    h = (i * 0x9E3779B1 + j * 0x85EBCA77 + 0x27D4EB2F) % 2 ** 32
    for shift, mul in ((15, 0x2C1B3C6D), (12, 0x297A2D39)):
        h = ((h ^ (h >> shift)) * mul) % 2 ** 32
    h = h ^ (h >> 15)
    want = (h >> 8).astype(np.float32) * np.float32(2.0 / (1 << 24)) - 1
    got = _start(64, 64, dtypes.float32).numpy()
    np.testing.assert_array_equal(got, want)
    assert got.min() >= -1 and got.max() < 1 and np.linalg.cond(got.astype(np.float64)) < 1e4
    from tgfx.scipy._decomp import eigh_fn
    w, _ = eigh_fn(tg.asarray(f32(_sym(12, 1))))
    assert len(w.uop.src[0].src) == 2, "eigh's function has one input, the matrix"
