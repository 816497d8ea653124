"""The remaining jax.numpy names of tgfx.numpy (tgfx/numpy/_more.py): diagflat, matvec/vecmat, spacing,
sort_complex, mask_indices, poly/polydiv, host I/O, printing and einsum_path, against numpy (and JAX where it
differs from numpy), under jit and vmap, their gradients, and their error messages."""
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.function import ConcretizationError


def close(got: object, want: np.ndarray, tol: float = 1e-5) -> None:
    g = np.asarray(got)
    assert g.shape == np.shape(want), (g.shape, np.shape(want))
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol)


floats = st.floats(-4, 4, width=32)


def arr(shape: tuple[int, ...]) -> st.SearchStrategy:
    n = int(np.prod(shape))
    return st.lists(floats, min_size=n, max_size=n).map(lambda v: np.array(v, np.float32).reshape(shape))


# ---- diagflat, matvec, vecmat ----
@settings(max_examples=15)
@given(st.sampled_from([(3,), (2, 2), (1, 3, 1)]), st.integers(-3, 3), st.sampled_from(["int32", "float32"]))
def test_diagflat_matches_numpy(shape: tuple, k: int, dt: str) -> None:
    v = np.arange(1, np.prod(shape) + 1).reshape(shape).astype(dt)
    got = tnp.diagflat(v, k)
    assert got.dtype == tnp.dtype(dt)
    np.testing.assert_array_equal(np.asarray(got), np.diagflat(v, k))


@settings(max_examples=15)
@given(arr((2, 3, 4)), arr((4,)), arr((3, 1, 4)))
def test_matvec_matches_numpy(m: np.ndarray, v: np.ndarray, vb: np.ndarray) -> None:
    close(tnp.matvec(m, v), np.einsum("...ij,...j->...i", m, v), 1e-4)
    close(tnp.matvec(m, vb), np.einsum("...ij,...j->...i", m, vb), 1e-4)   # batch axes broadcast: (3, 2, 3)


@settings(max_examples=15)
@given(arr((3,)), arr((3,)), arr((2, 3, 5)))
def test_vecmat_conjugates_the_vector(re: np.ndarray, im: np.ndarray, m: np.ndarray) -> None:
    v = (re + 1j * im).astype(np.complex64)
    want = np.einsum("...i,...ij->...j", np.conj(v), m)
    got = tnp.vecmat(v, m)
    assert got.dtype == tnp.complex64
    close(got, want, 1e-4)
    close(tnp.vecmat(re, m), np.einsum("i,...ij->...j", re, m), 1e-4)


def test_matvec_vecmat_jit_vmap_grad() -> None:
    m, v = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1.0, -1.0, 2.0], np.float32)
    close(tg.jit(tnp.matvec)(m, v), m @ v)
    close(tg.vmap(tnp.matvec, (None, 0))(m, np.stack([v, 2 * v])), np.stack([m @ v, 2 * (m @ v)]))
    close(tg.grad(lambda v: tnp.matvec(m, v).sum())(v), m.sum(0))
    close(tg.grad(lambda v: tnp.vecmat(v, m.T).sum())(v), m.sum(0))


def test_matvec_vecmat_errors() -> None:
    with pytest.raises(ValueError, match=r"matvec: x1 must be a \(stack of\) matrices.*\(3,\)"):
        tnp.matvec(np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"matvec: the contracted axis differs.*\(2, 3\).*\(2,\)"):
        tnp.matvec(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match=r"vecmat: the contracted axis differs.*x2 has shape \(2, 3\)"):
        tnp.vecmat(np.ones(3), np.ones((2, 3)))


# ---- spacing, sort_complex ----
def test_spacing_matches_numpy_and_jax() -> None:
    x = np.array([1.0, -1.0, 3.5, -1e-3, 1e-40, 3e38, 0.0, np.inf, np.nan], np.float32)
    got = np.asarray(tg.jit(tnp.spacing)(x))
    np.testing.assert_array_equal(got, np.spacing(x))
    assert np.signbit(np.asarray(tnp.spacing(np.float32(-0.0))))   # JAX's sign for -0.0 (numpy gives +)
    h = np.array([1.0, -2.0, 0.5], np.float16)
    np.testing.assert_array_equal(np.asarray(tnp.spacing(h)), np.spacing(h))
    i = tnp.spacing(np.array([3, -1], np.int32))
    assert i.dtype == tnp.float32
    np.testing.assert_array_equal(np.asarray(i), np.spacing(np.array([3, -1], np.float32)))
    with pytest.raises(ValueError, match="spacing is not defined for complex inputs, got complex64"):
        tnp.spacing(np.array([1j], np.complex64))


@settings(max_examples=15)
@given(st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2)), min_size=1, max_size=8))
def test_sort_complex_matches_numpy(pairs: list) -> None:
    c = np.array([complex(a, b) for a, b in pairs], np.complex64)   # small ints: many ties in the real part
    got = tnp.sort_complex(c)
    assert got.dtype == tnp.complex64
    np.testing.assert_array_equal(np.asarray(got), np.sort_complex(c))


def test_sort_complex_real_input_and_jit() -> None:
    got = tg.jit(tnp.sort_complex)(np.array([[3, 1, 2], [0, -1, 5]], np.int32))
    assert got.dtype == tnp.complex64   # JAX's: the complex type of the input's (complex128 in numpy)
    np.testing.assert_array_equal(np.asarray(got), np.sort_complex(np.array([[3, 1, 2], [0, -1, 5]])))
    with pytest.raises(ValueError, match="sort_complex: a must have at least one axis"):
        tnp.sort_complex(1.0)


# ---- mask_indices ----
@pytest.mark.parametrize("func,k", [(tnp.triu, 0), (tnp.triu, 1), (tnp.tril, -1), (tnp.tril, 2)])
def test_mask_indices_matches_numpy(func: object, k: int) -> None:
    np_func = {tnp.triu: np.triu, tnp.tril: np.tril}[func]
    rows, cols = tnp.mask_indices(4, func, k)
    want_r, want_c = np.mask_indices(4, np_func, k)
    np.testing.assert_array_equal(np.asarray(rows), want_r)
    np.testing.assert_array_equal(np.asarray(cols), want_c)


def test_mask_indices_jit_size_and_errors() -> None:
    rows, cols = tg.jit(lambda: tnp.mask_indices(3, tnp.triu, 1))()   # the mask is a constant: no size needed
    assert rows.tolist() == [0, 0, 1] and cols.tolist() == [1, 2, 2]
    rows, _ = tnp.mask_indices(3, tnp.triu, 1, size=5)
    assert rows.tolist() == [0, 0, 1, 0, 0]
    with pytest.raises(TypeError, match="mask_indices: n must be a non-negative int"):
        tnp.mask_indices(-1, tnp.triu)
    with pytest.raises(ValueError, match=r"mask_indices: mask_func must return an \(3, 3\) array"):
        tnp.mask_indices(3, lambda m, k: m[0])


# ---- poly, polydiv ----
@settings(max_examples=15)
@given(st.lists(st.floats(-2, 2, width=32), min_size=0, max_size=5))
def test_poly_of_roots_matches_numpy(roots: list) -> None:
    z = np.array(roots, np.float32)
    got = tnp.poly(z)
    assert got.dtype == tnp.float32
    close(got, np.poly(z), 1e-4)


@settings(max_examples=15)
@given(st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_poly_of_matrix_is_characteristic_polynomial(n: int, seed: int) -> None:
    a = np.random.default_rng(seed).uniform(-1, 1, (n, n)).astype(np.float32)
    got = tg.jit(tnp.poly)(a)
    assert got.dtype == tnp.float32    # real, as numpy's (JAX's is complex)
    close(got, np.poly(a.astype(np.float64)).real, 2e-4)


def test_poly_complex_grad_and_errors() -> None:
    z = np.array([1 + 1j, 1 - 1j, 2], np.complex64)
    close(tnp.poly(z), np.poly(z), 1e-5)
    assert tnp.poly(np.array([1, 2], np.int32)).dtype == tnp.float32   # integers are made inexact
    # sum of poly([a, b]) = 1 - (a + b) + a b: gradient (b - 1, a - 1)
    close(tg.grad(lambda r: tnp.poly(r).sum())(np.array([3.0, 5.0], np.float32)), [4.0, 2.0])
    with pytest.raises(ValueError, match=r"poly: input must be 1d or non-empty square 2d array, got shape \(2, 3\)"):
        tnp.poly(np.ones((2, 3)))


@settings(max_examples=15)
@given(arr((5,)), st.lists(st.floats(0.5, 3, width=32), min_size=1, max_size=3))
def test_polydiv_matches_numpy(u: np.ndarray, v: list) -> None:
    v = np.array(v, np.float32)
    q, r = tnp.polydiv(u, v)
    want_q, want_r = np.polydiv(u.astype(np.float64), v.astype(np.float64))
    close(q, want_q, 1e-3)
    assert r.shape == u.shape                            # JAX's: the remainder keeps u's length
    close(np.asarray(r)[len(u) - len(want_r):], want_r, 1e-3)
    close(np.asarray(r)[:len(u) - len(want_r)], np.zeros(len(u) - len(want_r)), 1e-3)


def test_polydiv_jit_grad_trim_and_errors() -> None:
    u, v = np.array([1.0, -3.0, 2.0, 5.0], np.float32), np.array([2.0, -1.0], np.float32)
    q, r = tg.jit(tnp.polydiv)(u, v)
    close(q, [0.5, -1.25, 0.375])
    close(r, [0.0, 0.0, 0.0, 5.375])
    q, r = tnp.polydiv(u, v, trim_leading_zeros=True)
    close(r, [5.375])
    # q[0] = u[0] / v[0]
    close(tg.grad(lambda u: tnp.polydiv(u, v)[0][0])(u), [0.5, 0.0, 0.0, 0.0])
    with pytest.raises(ConcretizationError, match="polydiv:.*trim_leading_zeros=False"):
        tg.jit(lambda u: tnp.polydiv(u, v, trim_leading_zeros=True))(u)
    with pytest.raises(ValueError, match=r"polydiv: u and v must be 1-d.*\(2, 2\)"):
        tnp.polydiv(np.ones((2, 2)), v)


# ---- host data, printing, planning ----
def test_frombuffer_fromstring_fromiter() -> None:
    got = tnp.frombuffer(b"\x01\x02\x03", dtype=tnp.uint8)
    assert got.dtype == tnp.uint8 and got.tolist() == [1, 2, 3]
    f = tnp.frombuffer(np.arange(3, dtype=np.float32).tobytes(), dtype=np.float32, offset=4)
    assert f.tolist() == [1.0, 2.0]
    s = tnp.fromstring("1, 2, 3", dtype=int, sep=",")
    assert s.dtype == tnp.int32 and s.tolist() == [1, 2, 3]
    with pytest.raises(NotImplementedError, match=r"np.fromiter"):
        tnp.fromiter(iter([1, 2]), dtype=int)


def test_save_load_savez(tmp_path: os.PathLike) -> None:
    x = tnp.arange(6).reshape(2, 3)
    tnp.save(os.path.join(tmp_path, "x.npy"), x)
    back = tnp.load(os.path.join(tmp_path, "x.npy"))
    assert isinstance(back, tg.Tensor) and back.dtype == tnp.int32 and back.tolist() == x.tolist()
    # bfloat16 as JAX saves it (through ml_dtypes): numpy writes its 2-byte items as void
    bits = (np.array([1.5, 2.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    np.save(os.path.join(tmp_path, "b.npy"), bits.view("V2"))
    b = tnp.load(os.path.join(tmp_path, "b.npy"))
    assert b.dtype == tnp.bfloat16 and b.astype(tnp.float32).tolist() == [1.5, 2.0]
    tnp.savez(os.path.join(tmp_path, "z.npz"), a=x, b=tnp.ones(2))
    with tnp.load(os.path.join(tmp_path, "z.npz")) as z:
        np.testing.assert_array_equal(z["a"], np.arange(6).reshape(2, 3))


def test_array_repr_str_and_constants() -> None:
    x = tnp.asarray([1.0, 2.5])
    assert tnp.array_repr(x) == np.array_repr(np.array([1.0, 2.5], np.float32))
    assert tnp.array_str(x, precision=1) == "[1.  2.5]"
    assert tnp.euler_gamma == np.euler_gamma
    assert tnp.dtype(tnp.float32) == np.dtype("float32") and tnp.dtype is np.dtype
    assert issubclass(tnp.ComplexWarning, RuntimeWarning)


def test_einsum_path_plans_and_einsum_takes_it() -> None:
    ops = [tnp.ones((2, 3)), tnp.ones((3, 40)), tnp.ones((40, 5))]
    path, info = tnp.einsum_path("ij,jk,kl->il", *ops)
    want, _ = np.einsum_path("ij,jk,kl->il", *[np.ones(o.shape) for o in ops], optimize="greedy")
    assert path == [tuple(p) for p in want[1:]] and "Complete contraction" in info
    close(tnp.einsum("ij,jk,kl->il", *ops, optimize=path), np.full((2, 5), 120.0))
    assert tnp.einsum_path("ij,jk->ik", *ops[:2], optimize=False)[0] == [(0, 1)]


def test_matches_jax_where_jax_is_installed() -> None:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.array([0.5, -3.0, 0.0, 1e-39], np.float32)
    np.testing.assert_array_equal(np.asarray(tnp.spacing(x)), np.asarray(jnp.spacing(x)))
    u, v = np.array([1.0, -3.0, 2.0, 5.0], np.float32), np.array([2.0, -1.0], np.float32)
    for got, want in zip(tnp.polydiv(u, v), jnp.polydiv(u, v), strict=True):
        close(got, np.asarray(want))
    c = np.array([2 + 1j, 2 - 1j, -1 + 3j], np.complex64)
    np.testing.assert_array_equal(np.asarray(tnp.sort_complex(c)), np.asarray(jnp.sort_complex(c)))
    v2 = np.array([1 + 2j, 3 - 1j], np.complex64)
    close(tnp.vecmat(v2, np.eye(2, 3, dtype=np.float32)), np.asarray(jnp.vecmat(v2, np.eye(2, 3, dtype=np.float32))))
