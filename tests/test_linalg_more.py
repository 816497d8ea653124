"""tnp.linalg's lstsq, cond, multi_dot, tensorinv and tensorsolve against numpy, and tgfx.scipy.linalg's det, inv,
solve, eigh, lu, qr, svd, polar, expm, solve_sylvester, hessenberg, eigh_tridiagonal and special matrices against
scipy: values over hypothesis-generated shapes, jit and vmap, gradients by central differences (test_grad's
`check_grads`, in float64), and the errors bad shapes and arguments raise. The JAX comparisons skip without jax.

Eigen- and singular vectors have no fixed sign, so they are checked through invariants (A v = w v, U diag(s) Vh = A).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grad import check_grads
from test_linalg_decomp import L, f32, rng

import tgfx as tg
import tgfx.numpy as tnp
import tgfx.scipy.linalg as tsl

sl = pytest.importorskip("scipy.linalg")


def close(ours: tg.Tensor, ref: np.ndarray, tol: float = 1e-4) -> None:
    got = ours.numpy()
    assert got.shape == np.shape(ref), (got.shape, np.shape(ref))
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


side = st.sampled_from([1, 3, 4])   # a few sizes, so examples share compiled kernels


# ---- tnp.linalg.lstsq ----
@settings(max_examples=8)
@given(side, side, st.sampled_from([None, 1, 2]), st.integers(0, 2 ** 16))
def test_lstsq_matches_numpy(m: int, n: int, k: int | None, seed: int) -> None:
    a = f32(rng(seed).standard_normal((m, n)))
    b = f32(rng(seed + 1).standard_normal((m,) if k is None else (m, k)))
    x, resid, rank, s = L.lstsq(tg.asarray(a), tg.asarray(b), numpy_resid=True)
    rx, rresid, rrank, rs = np.linalg.lstsq(a.astype(np.float64), b.astype(np.float64), rcond=None)
    close(x, rx, 1e-3)
    close(s, rs, 1e-4)
    assert rank.dtype == tnp.int32 and int(rank.numpy()) == rrank
    close(resid, rresid, 1e-3)


def test_lstsq_rank_deficient_default_resid_and_rcond() -> None:
    a = f32([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])        # rank 1: the minimum-norm solution
    b = f32([1.0, 2.0, 4.0])
    x, resid, rank, s = L.lstsq(tg.asarray(a), tg.asarray(b))
    rx = np.linalg.pinv(a.astype(np.float64)) @ b
    close(x, rx, 1e-4)
    assert int(rank.numpy()) == 1
    assert resid.shape == (1,)                      # JAX's: always the residual of each column, here (1,)
    close(resid, [np.sum((a @ rx - b) ** 2)], 1e-4)
    # an rcond above s[1] / s[0] cuts the second value of a full-rank matrix
    full = f32([[1.0, 0.0], [0.0, 1e-3]])
    assert int(L.lstsq(full, f32([1.0, 1.0]), rcond=1e-2)[2].numpy()) == 1
    assert int(L.lstsq(full, f32([1.0, 1.0]), rcond=-1)[2].numpy()) == 2   # negative: eps


def test_lstsq_jit_and_numpy_resid_error_under_jit() -> None:
    a, b = f32(rng(3).standard_normal((4, 3))), f32(rng(4).standard_normal((4, 2)))
    x = tg.jit(lambda a, b: L.lstsq(a, b)[0])(a, b)
    close(x, np.linalg.lstsq(a, b, rcond=None)[0], 1e-4)
    with pytest.raises(Exception, match="numpy_resid"):
        tg.jit(lambda a, b: L.lstsq(a, b, numpy_resid=True)[1])(a, b)


@pytest.mark.x64
def test_lstsq_grad() -> None:
    a, b = rng(5).standard_normal((4, 3)), rng(6).standard_normal((4, 2))
    check_grads(lambda a, b: L.lstsq(a, b)[0], a, b, rtol=1e-5, atol=1e-6)


def test_lstsq_errors() -> None:
    with pytest.raises(ValueError, match=r"same number of rows.*\(3, 2\).*\(4,\)"):
        L.lstsq(np.ones((3, 2)), np.ones(4))
    with pytest.raises(TypeError, match=r"a must be two-dimensional.*\(2, 3, 2\)"):
        L.lstsq(np.ones((2, 3, 2)), np.ones((2, 3)))
    with pytest.raises(TypeError, match="b must be one- or two-dimensional"):
        L.lstsq(np.ones((3, 2)), np.ones((3, 2, 2)))


# ---- cond ----
@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"])
def test_cond_matches_numpy(p: int | float | str | None) -> None:
    a = f32(rng(7).standard_normal((2, 3, 3)))
    close(L.cond(tg.asarray(a), p), np.linalg.cond(a.astype(np.float64), p), 1e-3)


def test_cond_rectangular_singular_and_errors() -> None:
    a = f32(rng(8).standard_normal((4, 2)))
    close(L.cond(a), np.linalg.cond(a.astype(np.float64)), 1e-4)
    assert np.isinf(L.cond(f32([[1.0, 2.0], [2.0, 4.0]]), 1).numpy())      # NaN from the inverse: inf, as JAX
    assert np.isnan(L.cond(f32([[np.nan, 2.0], [2.0, 4.0]]), 1).numpy())   # a NaN input stays NaN
    with pytest.raises(ValueError, match=r"must be square.*\(4, 2\)"):
        L.cond(a, 1)
    with pytest.raises(ValueError, match="at least 2-d"):
        L.cond(np.ones(3))
    with pytest.raises(ValueError, match="must not be empty"):
        L.cond(np.ones((0, 0)))


# ---- multi_dot ----
@settings(max_examples=10)
@given(st.lists(st.sampled_from([1, 2, 5, 9]), min_size=3, max_size=6), st.booleans(), st.booleans(),
       st.integers(0, 2 ** 16))
def test_multi_dot_matches_numpy(dims: list[int], vec_first: bool, vec_last: bool, seed: int) -> None:
    r = rng(seed)
    arrs = [f32(r.standard_normal((dims[i], dims[i + 1]))) for i in range(len(dims) - 1)]
    if vec_first:
        arrs[0] = arrs[0][0]
    if vec_last:
        arrs[-1] = arrs[-1][:, 0]
    close(L.multi_dot([tg.asarray(x) for x in arrs]), np.linalg.multi_dot([x.astype(np.float64) for x in arrs]), 1e-4)


def test_multi_dot_picks_the_cheapest_order() -> None:
    from tgfx.numpy._linalg_more import _chain_order
    # 10x100 @ 100x5 @ 5x50: (AB)C costs 5000 + 2500, A(BC) 25000 + 50000
    assert _chain_order([10, 100, 5, 50])[0][2] == 1
    assert _chain_order([50, 5, 100, 10])[0][2] == 0          # the mirror image: A(BC)
    # numpy's own choice, where its private helper is there to ask
    helper = getattr(getattr(np.linalg, "_linalg", None), "_multi_dot_matrix_chain_order", None)
    if helper is not None:
        dims = [3, 30, 2, 40, 7, 11]
        arrs = [np.ones((dims[i], dims[i + 1])) for i in range(len(dims) - 1)]
        ref = helper(arrs)
        ours = _chain_order(dims)
        assert all(ours[i][j] == ref[i, j] for i in range(5) for j in range(i + 1, 5))


def test_multi_dot_errors() -> None:
    with pytest.raises(ValueError, match="at least two"):
        L.multi_dot([np.ones((2, 2))])
    with pytest.raises(ValueError, match=r"must match.*\(2, 3\), \(2, 2\)"):
        L.multi_dot([np.ones((2, 3)), np.ones((2, 2))])
    with pytest.raises(ValueError, match="must all be 2-d"):
        L.multi_dot([np.ones((2, 2)), np.ones(2), np.ones((2, 2))])


# ---- tensorinv, tensorsolve ----
@pytest.mark.parametrize("shape,ind", [((4, 6, 8, 3), 2), ((6, 2, 3), 1), ((2, 3, 6), 2)])
def test_tensorinv_matches_numpy(shape: tuple[int, ...], ind: int) -> None:
    a = f32(rng(9).standard_normal(shape))
    close(L.tensorinv(tg.asarray(a), ind), np.linalg.tensorinv(a.astype(np.float64), ind), 2e-3)


@pytest.mark.parametrize("ashape,bshape,axes", [((6, 2, 3), (6,), None), ((2, 3, 6), (6,), (0, 1)),
                                                ((2, 3, 2, 3), (2, 3), None), ((2, 2, 3, 3), (2, 3), (0, 2))])
def test_tensorsolve_matches_numpy(ashape: tuple[int, ...], bshape: tuple[int, ...],
                                   axes: tuple[int, ...] | None) -> None:
    a, b = f32(rng(10).standard_normal(ashape)), f32(rng(11).standard_normal(bshape))
    ref = np.linalg.tensorsolve(a.astype(np.float64), b.astype(np.float64), axes=axes)
    close(L.tensorsolve(tg.asarray(a), tg.asarray(b), axes=axes), ref, 2e-3)


def test_tensor_errors() -> None:
    with pytest.raises(ValueError, match=r"ind must be a positive integer"):
        L.tensorinv(np.ones((2, 2)), 0)
    with pytest.raises(ValueError, match=r"\(2, 3\) must equal that of the rest \(4,\)"):
        L.tensorinv(np.ones((2, 3, 4)), 2)
    with pytest.raises(ValueError, match=r"leading shape must be b's.*\(2, 3\)"):
        L.tensorsolve(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError, match="must multiply to b's size"):
        L.tensorsolve(np.ones((2, 3)), np.ones(2))


# ---- scipy's signatures: det, inv, solve, eigh, svd, qr ----
def test_det_inv_solve_eigh_svd_match_scipy() -> None:
    r = rng(12)
    a = f32(r.standard_normal((3, 3)))
    spd = f32(a @ a.T + 3 * np.eye(3))
    b, bm = f32(r.standard_normal(3)), f32(r.standard_normal((3, 2)))
    a64, spd64 = a.astype(np.float64), spd.astype(np.float64)
    close(tsl.det(a, overwrite_a=True, check_finite=False), sl.det(a64))
    close(tsl.inv(a), sl.inv(a64), 1e-3)
    for assume in ("gen", "sym", "pos"):
        for lower in (False, True):
            ref = sl.solve(spd64, bm, assume_a=assume, lower=lower)
            close(tsl.solve(spd, bm, lower=lower, assume_a=assume), ref)
    # 'pos' reads only the named triangle, as scipy's
    close(tsl.solve(np.triu(spd), b, assume_a="pos"), sl.solve(spd64, b, assume_a="pos"))
    close(tsl.solve(np.tril(spd), b, assume_a="pos", lower=True), sl.solve(spd64, b, assume_a="pos"))
    w, v = tsl.eigh(spd)
    close(w, sl.eigh(spd64, eigvals_only=True))
    np.testing.assert_allclose(spd64 @ v.numpy(), v.numpy() * w.numpy(), atol=1e-4)
    # eigh symmetrises its input, as jax.scipy.linalg.eigh (lax.linalg.eigh's default), where scipy reads one triangle
    half = np.triu(spd).astype(np.float64)
    close(tsl.eigh(np.triu(spd), lower=False, eigvals_only=True), sl.eigh((half + half.T) / 2, eigvals_only=True))
    u, s, vh = tsl.svd(a)
    close(s, sl.svd(a64, compute_uv=False))
    np.testing.assert_allclose((u.numpy() * s.numpy()) @ vh.numpy(), a64, atol=1e-4)
    close(tsl.svd(a, compute_uv=False), sl.svd(a64, compute_uv=False))


@pytest.mark.x64
def test_solve_pos_grad_is_jaxs_full_matrix_gradient() -> None:
    r = rng(13)
    a = r.standard_normal((3, 3))
    spd, b = a @ a.T + 3 * np.eye(3), r.standard_normal((3, 2))
    # JAX's gradient is that of x = a^-1 b with the full a (a custom_linear_solve over a @ x): abar = -a^-1 xbar x^T
    ours = tg.grad(lambda m: tnp.sum(tsl.solve(m, b, assume_a="pos")))(tg.asarray(spd)).numpy()
    x = np.linalg.solve(spd, b)
    np.testing.assert_allclose(ours, -np.linalg.solve(spd, np.ones_like(b)) @ x.T, atol=1e-10)
    # along symmetric directions (the only ones a symmetric a moves in) it is the derivative of the function
    check_grads(lambda m, v: tsl.solve((m + m.T) / 2, v, assume_a="pos"), spd, b[:, 0])


@settings(max_examples=5)
@given(st.sampled_from([(), (2,)]), side, side, st.integers(0, 2 ** 16))
def test_lu_qr_polar_match_scipy(batch: tuple[int, ...], m: int, n: int, seed: int) -> None:
    a = f32(rng(seed).standard_normal(batch + (m, n)))
    p, low, up = tsl.lu(tg.asarray(a))
    pl, up2 = tsl.lu(tg.asarray(a), permute_l=True)
    for i in np.ndindex(*batch):
        a64 = a[i].astype(np.float64)
        rp, rl, ru = sl.lu(a64)
        close(p[i], rp, 0)
        close(low[i], rl)
        close(up[i], ru)
        close(pl[i], rp @ rl)
        close(up2[i], ru)
        for mode in ("full", "economic", "r"):
            for ours, ref in zip(tsl.qr(a[i], mode=mode), sl.qr(a64, mode=mode), strict=True):
                close(ours, ref)
        for sd in ("right", "left"):
            u, pos = tsl.polar(a[i], sd)
            ru, rpos = sl.polar(a64, sd)
            close(u, ru)
            close(pos, rpos)


def test_lu_jit_vmap_and_grad() -> None:
    a = f32(rng(14).standard_normal((2, 4, 3)))
    lows = tg.vmap(lambda x: tsl.lu(x)[1])(tg.asarray(a))
    ujit = tg.jit(lambda x: tsl.lu(x)[2])(tg.asarray(a))
    for i in range(2):
        _, rl, ru = sl.lu(a[i].astype(np.float64))
        close(lows[i], rl)
        close(ujit[i], ru)


@pytest.mark.x64
def test_lu_grad() -> None:
    a = rng(15).standard_normal((4, 3))
    check_grads(lambda x: tsl.lu(x)[2], a)
    check_grads(lambda x: tsl.lu(x, permute_l=True)[0], a)


# ---- expm ----
@pytest.mark.parametrize("scale", [0.01, 0.3, 1.0, 3.0, 10.0, 40.0])
def test_expm_matches_scipy(scale: float) -> None:
    a = f32(rng(16).standard_normal((4, 4)) * scale)
    ref = sl.expm(a.astype(np.float64))
    close(tsl.expm(tg.asarray(a)), ref, 2e-4 * max(1.0, float(np.abs(ref).max())))


def test_expm_batch_mixes_degrees_and_upper_triangular() -> None:
    r = rng(17)
    a = f32(r.standard_normal((3, 4, 4)) * np.array([0.05, 1.0, 20.0])[:, None, None])
    ref = np.stack([sl.expm(x.astype(np.float64)) for x in a])
    ours = tg.jit(tsl.expm)(tg.asarray(a)).numpy()
    for i in range(3):   # each within 2e-4 of its own size
        np.testing.assert_allclose(ours[i], ref[i], rtol=2e-4, atol=2e-4 * np.abs(ref[i]).max())
    u = f32(np.triu(r.standard_normal((4, 4))))
    close(tsl.expm(u, upper_triangular=True), sl.expm(u.astype(np.float64)), 1e-4)
    # closed forms: a nilpotent matrix, and a rotation generator
    close(tsl.expm(f32([[0.0, 1.0], [0.0, 0.0]])), [[1.0, 1.0], [0.0, 1.0]], 1e-6)
    close(tsl.expm(f32([[0.0, 1.0], [-1.0, 0.0]])), [[np.cos(1), np.sin(1)], [-np.sin(1), np.cos(1)]], 1e-6)


def test_expm_too_many_squarings_is_nan() -> None:
    big = f32(np.eye(2) * 100.0)      # 1-norm 100: 4 squarings bring it below 3.9
    assert np.isnan(tsl.expm(big, max_squarings=3).numpy()).all()
    assert np.isinf(tsl.expm(big, max_squarings=4).numpy()[0, 0])      # allowed: e^100 overflows float32
    assert np.isnan(tsl.expm(f32(np.eye(2) * 1e6)).numpy()).all()       # needs 17 > 16


@pytest.mark.x64
@pytest.mark.parametrize("scale", [0.01, 0.5, 3.0])
def test_expm_float64_and_grad(scale: float) -> None:
    a = rng(18).standard_normal((3, 3)) * scale          # float64: degrees up to 13
    close(tsl.expm(a), sl.expm(a), 1e-12 * max(1.0, float(np.abs(sl.expm(a)).max())))
    check_grads(tsl.expm, a, rtol=1e-5, atol=1e-6)


@pytest.mark.x64
def test_det_grad() -> None:
    check_grads(tsl.det, rng(19).standard_normal((3, 3)))
    check_grads(tsl.det, rng(19).standard_normal((5, 5)))


def _cofactors(a: np.ndarray) -> np.ndarray:
    """The cofactor matrix, from the minors' determinants (exact for these small integer matrices)."""
    n = a.shape[-1]
    out = np.zeros_like(a, dtype=np.float64)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, axis=0), j, axis=1).astype(np.float64)
            out[i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return np.round(out)


@pytest.mark.parametrize("a", [
    [[1, 1], [1, 1]], [[0, 0, 1], [0, 1, 0], [0, 0, 0]], [[1, 2, 3], [2, 4, 6], [1, 0, 1]], [[1, 2, 3], [4, 5, 6],
    [7, 8, 9]], [[1, 2, 0, 1], [2, 4, 0, 2], [0, 1, 1, 0], [1, 0, 0, 3]], [[1, 2, 3, 4], [2, 4, 6, 8], [0, 1, 0, 1],
    [0, 2, 0, 2]], np.zeros((4, 4)).tolist(), [[3, 1, 0, 2], [1, 2, 1, 0], [0, 1, 4, 1], [2, 0, 1, 5]]],
    ids=["2x2 rank 1", "3x3 rank 2", "3x3 rank 2 pivoted", "3x3 rank 2 dense", "4x4 rank 3", "4x4 rank 2", "4x4 zero",
         "4x4 invertible"])
def test_det_gradient_is_the_cofactor_matrix_at_singular_matrices(a: list) -> None:
    # jax 0.10.2's gradient of det is the cofactor matrix (2 x 2 and 3 x 3 by their cofactor expansion, larger ones
    # by its _cofactor_solve): finite at a singular matrix, where tgfx's det(a) a^-T was NaN (0 * inf)
    a = np.array(a, np.float32)
    got = tg.grad(tnp.linalg.det)(tg.asarray(a)).numpy()
    np.testing.assert_allclose(got, _cofactors(a), atol=1e-4)
    if a.shape[0] <= 3:   # the cofactor expansion of integers is exact, as JAX's (LU's is not: 6.7e-16 for 1..9)
        assert tnp.linalg.det(tg.asarray(a)).item() == round(float(np.linalg.det(a.astype(np.float64))))


# ---- solve_sylvester ----
@settings(max_examples=6)
@given(st.sampled_from([1, 2, 3]), st.sampled_from([1, 2, 4]), st.integers(0, 2 ** 16))
def test_solve_sylvester_matches_scipy(m: int, n: int, seed: int) -> None:
    r = rng(seed)
    a, b, c = f32(r.standard_normal((m, m))), f32(r.standard_normal((n, n))), f32(r.standard_normal((m, n)))
    a = a + f32(3 * np.eye(m))       # keeps eig(A) + eig(B) away from 0: a well-conditioned system
    ref = sl.solve_sylvester(a.astype(np.float64), b.astype(np.float64), c.astype(np.float64))
    close(tsl.solve_sylvester(a, b, c), ref, 1e-3)


@pytest.mark.x64
def test_solve_sylvester_batch_and_grad() -> None:
    r = rng(20)
    a, b, c = r.standard_normal((2, 3, 3)) + 3 * np.eye(3), r.standard_normal((2, 2)), r.standard_normal((3, 2))
    ours = tsl.solve_sylvester(a, b, c).numpy()
    for i in range(2):
        np.testing.assert_allclose(ours[i], sl.solve_sylvester(a[i], b, c), atol=1e-10)
    check_grads(tsl.solve_sylvester, a[0], b, c)


# ---- hessenberg ----
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_hessenberg_matches_scipy(n: int) -> None:
    a = f32(rng(21 + n).standard_normal((n, n)))
    h, q = tsl.hessenberg(a, calc_q=True)
    rh, rq = sl.hessenberg(a.astype(np.float64), calc_q=True)
    close(h, rh, 1e-4)
    close(q, rq, 1e-4)
    close(tsl.hessenberg(a), rh, 1e-4)


def test_hessenberg_batch_jit() -> None:
    a = f32(rng(26).standard_normal((2, 4, 4)))
    h, q = tg.jit(lambda x: tsl.hessenberg(x, calc_q=True))(tg.asarray(a))
    for i in range(2):
        close(h[i], sl.hessenberg(a[i].astype(np.float64)), 1e-4)
    np.testing.assert_allclose(q.numpy() @ h.numpy() @ np.swapaxes(q.numpy(), -1, -2), a, atol=1e-5)


@pytest.mark.x64
def test_hessenberg_grad() -> None:
    check_grads(tsl.hessenberg, rng(27).standard_normal((4, 4)))


# ---- eigh_tridiagonal ----
@settings(max_examples=6)
@given(st.sampled_from([2, 5, 8]), st.integers(0, 2 ** 16))
def test_eigh_tridiagonal_matches_scipy(n: int, seed: int) -> None:
    r = rng(seed)
    d, e = f32(r.standard_normal(n)), f32(r.standard_normal(n - 1))
    ref = sl.eigh_tridiagonal(d.astype(np.float64), e.astype(np.float64), eigvals_only=True)
    close(tsl.eigh_tridiagonal(d, e, eigvals_only=True), ref, 1e-5)
    lo, hi = n // 3, n - 1
    close(tsl.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(lo, hi)), ref[lo:hi + 1], 1e-5)


def test_eigh_tridiagonal_vectors_jit_and_repeated() -> None:
    d, e = f32([2.0, 2.0, 2.0, 2.0]), f32([1.0, 0.0, 1.0])     # the eigenvalues 1 and 3, each twice
    w, v = tsl.eigh_tridiagonal(d, e)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    close(w, [1.0, 1.0, 3.0, 3.0], 1e-5)
    np.testing.assert_allclose(t @ v.numpy(), v.numpy() * w.numpy(), atol=1e-5)
    np.testing.assert_allclose(v.numpy().T @ v.numpy(), np.eye(4), atol=1e-5)
    w2 = tg.jit(lambda d, e: tsl.eigh_tridiagonal(d, e, eigvals_only=True))(d, e)
    close(w2, [1.0, 1.0, 3.0, 3.0], 1e-5)


# ---- special matrices ----
_C, _R, _F = f32([1.0, -2.0, 3.5, 0.5]), f32([9.0, 4.0, -1.0]), f32([0.1, 2.0, 1.0, 0.5])
_SPECIAL = [
    ("toeplitz", (_C, _R), (_C, _R)), ("toeplitz", (_C,), (_C,)), ("hankel", (_C, _R), (_C, _R)),
    ("hankel", (_C,), (_C,)), ("circulant", (_C,), (_C,)), ("leslie", (_F, _R), (_F, _R)),
    ("companion", (_C,), (_C,)), ("fiedler", (_C,), (_C,)), ("fiedler_companion", (_C,), (_C,)),
    ("fiedler_companion", (_C[:3],), (_C[:3],)), ("convolution_matrix", (_C, 3), (_C, 3)),
    ("convolution_matrix", (_C, 6, "same"), (_C, 6, "same")),
    ("convolution_matrix", (_C, 2, "valid"), (_C, 2, "valid")),
    ("block_diag", (np.ones((2, 2)), 3.0, f32([1.0, 2.0])), (np.ones((2, 2)), 3.0, f32([1.0, 2.0]))),
    ("hilbert", (5,), (5,)), ("invhilbert", (5,), (5,)), ("pascal", (5,), (5,)), ("pascal", (5, "lower"), (5, "lower")),
    ("invpascal", (5,), (5,)), ("invpascal", (5, "upper"), (5, "upper")), ("helmert", (5,), (5,)),
    ("helmert", (5, True), (5, True)), ("hadamard", (8,), (8,)), ("dft", (6,), (6,)),
    ("dft", (6, "sqrtn"), (6, "sqrtn")),
]


@pytest.mark.parametrize("name,args,ref_args", _SPECIAL, ids=[f"{s[0]}-{i}" for i, s in enumerate(_SPECIAL)])
def test_special_matrices_match_scipy(name: str, args: tuple, ref_args: tuple) -> None:
    ours, ref = getattr(tsl, name)(*args), getattr(sl, name)(*ref_args)
    close(ours, np.asarray(ref), 1e-5 * max(1.0, float(np.abs(ref).max())))


def test_special_matrices_dtypes_batches_and_jit() -> None:
    assert tsl.hadamard(4).dtype == tnp.int32 and tsl.pascal(3).dtype == tnp.float32
    assert tsl.dft(3).dtype == tnp.complex64 and tsl.hilbert(3).dtype == tnp.float32
    cb = f32(rng(28).standard_normal((2, 4)))
    t = tsl.toeplitz(cb, _R)            # batch axes of c broadcast against r's
    for i in range(2):
        close(t[i], sl.toeplitz(cb[i], _R), 0)
        close(tsl.circulant(cb)[i], sl.circulant(cb[i]), 0)
        close(tsl.companion(cb)[i], sl.companion(cb[i]), 1e-5)
    close(tg.jit(tsl.toeplitz)(_C, _R), sl.toeplitz(_C, _R), 0)
    v = f32([1.0, -1.0, 2.0])
    close(tnp.matmul(tsl.convolution_matrix(_C, 3), v), np.convolve(_C, v), 1e-5)
    np.testing.assert_allclose((tsl.invhilbert(4).numpy().astype(np.float64) @ sl.hilbert(4)), np.eye(4), atol=1e-6)
    # gradients flow through the gathered entries: d sum(toeplitz(c) * w) / dc sums w over each diagonal
    w = f32(rng(29).standard_normal((4, 4)))
    g = tg.grad(lambda c: tnp.sum(tsl.toeplitz(c, _C) * w))(tg.asarray(_C)).numpy()
    np.testing.assert_allclose(g, [np.trace(w, -k) for k in range(4)], atol=1e-5)


def test_special_matrix_errors() -> None:
    with pytest.raises(ValueError, match="power of 2"):
        tsl.hadamard(6)
    with pytest.raises(ValueError, match="kind must be"):
        tsl.pascal(3, "diagonal")
    with pytest.raises(ValueError, match="one entry fewer than f"):
        tsl.leslie([1.0, 2.0, 3.0], [1.0])
    with pytest.raises(ValueError, match="at least 2 entries"):
        tsl.companion([1.0])
    with pytest.raises(ValueError, match="mode must be"):
        tsl.convolution_matrix([1.0, 2.0], 3, "circular")
    with pytest.raises(ValueError, match="scalar"):
        tsl.hankel(1.0)
    with pytest.raises(ValueError, match="at most 2 dimensions.*argument 1"):
        tsl.block_diag(np.ones(2), np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="complex"):
        tsl.dft(4, dtype="float32")


# ---- errors of the decompositions ----
def test_decomposition_errors() -> None:
    with pytest.raises(ValueError, match=r"expm: A must be a square matrix.*\(2, 3\)"):
        tsl.expm(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"hessenberg: a must be a square matrix.*\(3,\)"):
        tsl.hessenberg(np.ones(3))
    with pytest.raises(ValueError, match=r"lu: a must be a matrix.*\(3,\)"):
        tsl.lu(np.ones(3))
    with pytest.raises(ValueError, match=r"A must be \(\.\.\., m, m\).*A \(2, 3\)"):
        tsl.solve_sylvester(np.ones((2, 3)), np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="method must be"):
        tsl.solve_sylvester(np.eye(2), np.eye(2), np.eye(2), method="bartels")
    with pytest.raises(ValueError, match="assume_a must be one of"):
        tsl.solve(np.eye(2), np.ones(2), assume_a="tri")
    with pytest.raises(ValueError, match=r"solve: b must have shape.*\(3,\)"):
        tsl.solve(np.eye(2), np.ones(3), assume_a="pos")
    with pytest.raises(ValueError, match="'raw' is not supported"):
        tsl.qr(np.eye(2), mode="raw")
    with pytest.raises(NotImplementedError, match="pivoting"):
        tsl.qr(np.eye(2), pivoting=True)
    with pytest.raises(NotImplementedError, match="b=None"):
        tsl.eigh(np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="side must be"):
        tsl.polar(np.eye(2), "up")
    with pytest.raises(TypeError, match="same dtype"):
        tsl.eigh_tridiagonal(f32([1.0, 2.0]), np.array([1.0], np.int32))
    with pytest.raises(ValueError, match=r"d must be \(n,\) and e \(n - 1,\)"):
        tsl.eigh_tridiagonal(f32([1.0, 2.0]), f32([1.0, 2.0]))
    with pytest.raises(NotImplementedError, match="select='v'"):
        tsl.eigh_tridiagonal(f32([1.0, 2.0]), f32([1.0]), select="v")
    with pytest.raises(ValueError, match="select_range"):
        tsl.eigh_tridiagonal(f32([1.0, 2.0]), f32([1.0]), select="i", select_range=(1, 5))


# ---- against JAX itself, where it is installed ----
def test_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jnp, jsl = jax.numpy, jax.scipy.linalg
    a, b = f32(rng(30).standard_normal((5, 3))), f32(rng(31).standard_normal(5))
    for ours, ref in zip(L.lstsq(a, b), jnp.linalg.lstsq(a, b), strict=True):
        assert ours.shape == ref.shape and ours.dtype.name == str(ref.dtype)
        close(ours, np.asarray(ref), 1e-4)
    for name in ("pascal", "invpascal", "hilbert", "helmert"):
        ours, ref = getattr(tsl, name)(4), getattr(jsl, name)(4)
        assert ours.dtype.name == str(ref.dtype), name
        close(ours, np.asarray(ref), 1e-4)
    d, e = f32([1.0, 2.0, 3.0]), f32([0.5, -1.0])
    close(tsl.eigh_tridiagonal(d, e, eigvals_only=True), np.asarray(jsl.eigh_tridiagonal(d, e, eigvals_only=True)),
          1e-6)


def test_lax_linalg_lu_pivots_to_permutation_matches_the_swaps() -> None:
    pivots = np.array([[2, 2, 2], [0, 1, 2], [3, 1, 3]], np.int32)
    want = []
    for row in pivots:
        perm = list(range(5))
        for i, j in enumerate(row):
            perm[i], perm[j] = perm[j], perm[i]
        want.append(perm)
    got = tg.lax.linalg.lu_pivots_to_permutation(tnp.asarray(pivots), 5)
    assert got.dtype == tg.dtypes.int32
    np.testing.assert_array_equal(got.numpy(), want)
    # consistent with lu's own pivots and permutation
    a = rng(0).standard_normal((4, 4)).astype(np.float32)
    _, piv, perm = tg.lax.linalg.lu(tnp.asarray(a))
    np.testing.assert_array_equal(tg.lax.linalg.lu_pivots_to_permutation(piv, 4).numpy(), perm.numpy())
    with pytest.raises(ValueError, match="permutation_size 2 is less than the number of pivots 3"):
        tg.lax.linalg.lu_pivots_to_permutation(tnp.asarray(pivots), 2)


def test_lax_linalg_tridiagonal_solve_against_a_dense_solve_and_its_gradient() -> None:
    g = rng(1)
    m = 6
    dl, du = g.standard_normal((2, m)).astype(np.float32), g.standard_normal((2, m)).astype(np.float32)
    d = (4.0 + g.random((2, m))).astype(np.float32)
    b = g.standard_normal((2, m, 3)).astype(np.float32)
    dense = [np.diag(d[i]) + np.diag(dl[i, 1:], -1) + np.diag(du[i, :-1], 1) for i in range(2)]
    got = tg.lax.linalg.tridiagonal_solve(*map(tnp.asarray, (dl, d, du, b)))
    close(got, np.stack([np.linalg.solve(dense[i], b[i]) for i in range(2)]), 1e-5)
    # the unread corners do not matter
    dl[:, 0], du[:, -1] = 100.0, -100.0
    close(tg.lax.linalg.tridiagonal_solve(*map(tnp.asarray, (dl, d, du, b))), got.numpy(), 1e-6)
    with pytest.raises(ValueError, match=r"b must be \(\.\.\., m, n\)"):
        tg.lax.linalg.tridiagonal_solve(*map(tnp.asarray, (dl, d, du, b[..., 0])))


@pytest.mark.x64
def test_lax_linalg_tridiagonal_solve_gradient() -> None:
    g = rng(3)
    dl, du, b = g.standard_normal(5), g.standard_normal(5), g.standard_normal((5, 2))
    check_grads(tg.lax.linalg.tridiagonal_solve, dl, 4.0 + g.random(5), du, b)


def test_lax_linalg_householder_product_rebuilds_q_from_geqrf() -> None:
    lapack = pytest.importorskip("scipy.linalg.lapack")
    a = rng(2).standard_normal((5, 3))
    qr_, tau, _, _ = lapack.dgeqrf(a)
    q = tg.lax.linalg.householder_product(tnp.asarray(qr_.astype(np.float32)), tnp.asarray(tau.astype(np.float32)))
    close(q, lapack.dorgqr(qr_, tau)[0], 1e-5)
    close(q @ tnp.asarray(np.triu(qr_[:3]).astype(np.float32)), a, 1e-5)
