"""The rest of tg.lax (`_lax_more.py`, `_lax_conv_more.py`) against numpy and scipy references written from the
definitions: transposed convolutions and patches, special functions under lax's dtype rule, shapes, scatter
variants, exact approximate top-k, reduce_precision and mulhi on the bits, fft, implicit differentiation
(custom_root, custom_linear_solve) with solvers that cannot be differentiated, and the errors a user gets. Gradients
by central differences (test_grad's `check_grads`). One test compares with jax where it is installed.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special as sps
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_grad import T, check_grads
from test_lax_conv import np_conv, np_windows

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import lax
from tgfx.dtypes import bf16_to_f32, f32_to_bf16


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def f32(x: np.ndarray) -> tg.Tensor:
    return T(np.asarray(x, np.float32))


# ---- conv_transpose ----
def transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    """Keras' Conv2DTranspose padding of the stride-dilated input: SAME gives in * s outputs, VALID
    in * s + max(k - s, 0)."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    else:
        total, lo = k + s - 2 + max(k - s, 0), k - 1
    return lo, total - lo


@settings(max_examples=15)
@given(n=st.integers(1, 5), k=st.integers(1, 4), s=st.integers(1, 3), rd=st.integers(1, 2),
       padding=st.sampled_from(["SAME", "VALID", "pairs", "consistent"]), two_d=st.booleans(), seed=st.integers(0, 9))
@example(n=3, k=3, s=2, rd=1, padding="SAME", two_d=False, seed=0)    # an odd SAME total: the extra goes low
@example(n=2, k=2, s=3, rd=2, padding="VALID", two_d=True, seed=1)
@example(n=1, k=1, s=1, rd=1, padding="consistent", two_d=True, seed=0)   # the padding crops past the input: an error
def test_conv_transpose_matches_a_dilated_convolution(n: int, k: int, s: int, rd: int, padding: str, two_d: bool,
                                                      seed: int) -> None:
    nsp = 2 if two_d else 1
    dn = ("NHWC", "HWIO", "NHWC") if two_d else ("NHC", "HIO", "NHC")
    x, w = rand(2, *(n,) * nsp, 3, seed=seed), rand(*(k,) * nsp, 3, 2, seed=seed + 1)
    span = (k - 1) * rd + 1
    if padding in ("SAME", "VALID"):
        pads, arg = [transpose_pads(span, s, padding)] * nsp, padding
    elif padding == "pairs":
        pads = arg = [(1, 0), (0, 2)][:nsp]
    else:   # PyTorch's meaning: the forward convolution's padding p becomes span - 1 - p
        arg = [(1, 0), (0, 2)][:nsp]
        pads = [(span - 1 - lo, span - 1 - hi) for lo, hi in arg]
    if any((n - 1) * s + 1 + lo + hi < 0 for lo, hi in pads):   # the forward padding is more than the kernel spans
        with pytest.raises(ValueError, match="crops more than the lhs spatial size"):
            lax.conv_transpose(f32(x), f32(w), (s,) * nsp, arg, rhs_dilation=(rd,) * nsp, use_consistent_padding=True)
        return
    ref = np_conv(x, w, (1,) * nsp, pads, lhs_dilation=(s,) * nsp, rhs_dilation=(rd,) * nsp, dimension_numbers=dn)
    out = lax.conv_transpose(f32(x), f32(w), (s,) * nsp, arg, rhs_dilation=(rd,) * nsp,
                             use_consistent_padding=padding == "consistent")
    assert out.shape == ref.shape
    if padding == "SAME":
        assert out.shape[1:1 + nsp] == (n * s,) * nsp
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_conv_transpose_with_consistent_padding_is_the_input_gradient_of_the_convolution() -> None:
    # PyTorch's ConvTranspose: stride 2, padding 1, kernel 3 on a 7-long input gives back 7 from the 4 outputs
    x, w, g = rand(2, 3, 7, seed=1), rand(4, 3, 3, seed=2), rand(2, 4, 4, seed=3)
    _, pullback = tg.vjp(lambda x: lax.conv_general_dilated(x, f32(w), (2,), [(1, 1)]), f32(x))
    dx = lax.conv_transpose(f32(g), f32(w), (2,), [(1, 1)], dimension_numbers=("NCH", "OIH", "NCH"),
                            transpose_kernel=True, use_consistent_padding=True)
    np.testing.assert_allclose(dx.numpy(), pullback(f32(g))[0].numpy(), rtol=1e-5, atol=1e-5)


def test_conv_transpose_kernel_layouts_and_rank_two() -> None:
    x, w = rand(1, 2, 4, 5, seed=4), rand(2, 3, 2, 3, seed=5)     # OIHW: O = 2 is x's channels after the swap
    out = lax.conv_transpose(f32(x), f32(w), (2, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"),
                             transpose_kernel=True)
    swapped = np.flip(w, (2, 3)).transpose(1, 0, 2, 3)
    pads = [transpose_pads(2, 2, "SAME"), transpose_pads(3, 1, "SAME")]
    np.testing.assert_allclose(out.numpy(), np_conv(x, swapped, (1, 1), pads, lhs_dilation=(2, 1)), rtol=1e-5,
                               atol=1e-5)
    a, b = rand(3, 4, seed=6), rand(4, 5, seed=7)                    # no spatial axis: NC x IO is a matmul
    np.testing.assert_allclose(lax.conv_transpose(f32(a), f32(b), (), "VALID").numpy(), a @ b, rtol=1e-5)


@pytest.mark.x64
def test_conv_transpose_gradients_by_differences() -> None:
    x, w = rand(1, 3, 4, 2, seed=8), rand(2, 2, 2, 3, seed=9)
    check_grads(lambda x, w: lax.conv_transpose(x, w, (2, 1), "SAME", rhs_dilation=(1, 2)), x, w)
    check_grads(lambda x, w: lax.conv_transpose(x, w, (2, 2), [(0, 1), (2, -1)], transpose_kernel=True), x,
                w.transpose(0, 1, 3, 2))


def test_conv_transpose_kernels_and_jit() -> None:
    x = tg.asarray(rand(2, 6, 6, 4).astype(np.float32)).realize()
    w = tg.asarray(rand(3, 3, 4, 8).astype(np.float32)).realize()
    tg.counters.reset()
    lax.conv_transpose(x, w, (1, 1), "SAME").realize()
    assert tg.counters.kernel_count == 1     # stride 1: one convolution kernel
    tg.counters.reset()
    out = lax.conv_transpose(x, w, (2, 2), "SAME").realize()
    # stride 2: one convolution per output phase (2 x 2), their interleave, and the NHWC kernel's transposed copy
    # (test_conv_direct.py: as many products as the strided convolution it transposes)
    assert tg.counters.kernel_count == 6
    jitted = tg.jit(lambda x, w: lax.conv_transpose(x, w, (2, 2), "SAME"))(x, w)
    np.testing.assert_allclose(jitted.numpy(), out.numpy(), rtol=1e-6)


def test_under_vmap() -> None:
    x, w = rand(3, 1, 4, 4, 2, seed=26), rand(3, 3, 2, 5, seed=27)
    out = tg.vmap(lambda x: lax.conv_transpose(x, f32(w), (2, 2), "SAME"))(f32(x))
    ref = [lax.conv_transpose(f32(x[i]), f32(w), (2, 2), "SAME").numpy() for i in range(3)]
    np.testing.assert_allclose(out.numpy(), np.stack(ref), rtol=1e-5, atol=1e-5)
    a = np.diag([2.0, 4.0, 5.0])
    solve = tg.vmap(lambda b: lax.custom_linear_solve(lambda v: f32(a) @ v, b,
                                                      lambda mv, y: tnp.linalg.solve(f32(a), y), symmetric=True))
    bs = rand(4, 3, seed=28)
    np.testing.assert_allclose(solve(f32(bs)).numpy(), bs / np.diag(a), rtol=1e-6)
    np.testing.assert_allclose(tg.grad(lambda b: solve(b).sum())(f32(bs)).numpy(), np.tile(1 / np.diag(a), (4, 1)),
                               rtol=1e-6)
    np.testing.assert_array_equal(tg.vmap(lax.mulhi)(T(np.array([[-7, 5]], np.int32)),
                                                    T(np.array([[3, 2 ** 30]], np.int32))).numpy(), [[-1, 1]])


# ---- conv_general_dilated_patches and the shape helpers ----
@settings(max_examples=12)
@given(h=st.integers(2, 6), k=st.integers(1, 3), s=st.integers(1, 2), rd=st.integers(1, 2),
       padding=st.sampled_from(["SAME", "VALID", ((1, 0), (0, 1))]), seed=st.integers(0, 9))
def test_conv_general_dilated_patches_are_the_windows(h: int, k: int, s: int, rd: int, padding: Any,
                                                      seed: int) -> None:
    x = rand(2, 3, h, h + 1, seed=seed)
    span = (k - 1) * rd + 1
    if padding == "SAME":
        pads = [(max((-(-n // s) - 1) * s + span - n, 0) // 2,
                 max((-(-n // s) - 1) * s + span - n, 0) - max((-(-n // s) - 1) * s + span - n, 0) // 2)
                for n in (h, h + 1)]
    else:
        pads = [(0, 0), (0, 0)] if padding == "VALID" else list(padding)
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    win = np_windows(xp, (2, 3), (k, k), (s, s), (rd, rd))                  # (N, C, oh, ow, kh, kw)
    ref = win.transpose(0, 1, 4, 5, 2, 3).reshape(2, 3 * k * k, *win.shape[2:4])
    out = lax.conv_general_dilated_patches(f32(x), (k, k), (s, s), padding, rhs_dilation=(rd, rd))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)


def test_patches_in_a_layout_contract_to_the_convolution_and_keep_nan_local() -> None:
    x, w = rand(2, 5, 6, 3, seed=10), rand(2, 3, 3, 4, seed=11)         # NHWC, HWIO
    dn = ("NHWC", "HWIO", "NHWC")
    p = lax.conv_general_dilated_patches(f32(x), (2, 3), (1, 2), "SAME", dimension_numbers=dn)
    assert p.shape == (2, 5, 3, 3 * 6)                                   # features ordered (c, h, w)
    conv = lax.conv_general_dilated(f32(x), f32(w), (1, 2), "SAME", dimension_numbers=dn)
    np.testing.assert_allclose(p.numpy() @ w.transpose(2, 0, 1, 3).reshape(18, 4), conv.numpy(), rtol=1e-4,
                               atol=1e-4)
    x[0, 0, 0, 0] = np.nan                                               # an identity kernel would spread it
    p = lax.conv_general_dilated_patches(f32(x), (2, 2), (1, 1), "VALID", dimension_numbers=dn).numpy()
    assert np.isnan(p).sum() == 1


def test_shape_helpers() -> None:
    assert lax.conv_shape_tuple((2, 3, 9, 9), (8, 3, 3, 3), (2, 2), "SAME") == (2, 8, 5, 5)
    assert lax.conv_shape_tuple((4, 3, 9, 9), (8, 3, 3, 3), (2, 2), [(1, 0), (-2, 3)], 2) == (2, 8, 4, 4)
    dn = ("NHWC", "HWIO", "NCHW")
    x, w = tnp.ones((2, 9, 7, 3)), tnp.ones((3, 2, 3, 8))
    out = lax.conv_general_dilated(x, w, (1, 2), "SAME", dimension_numbers=dn)
    assert lax.conv_general_shape_tuple(x.shape, w.shape, (1, 2), "SAME", dn) == out.shape == (2, 8, 9, 4)
    for padding in ("SAME", "VALID", [(1, 2), (0, 1)]):
        out = lax.conv_transpose(x, w, (2, 3), padding, dimension_numbers=dn)
        assert lax.conv_transpose_shape_tuple(x.shape, w.shape, (2, 3), padding, dn) == out.shape
    assert lax.conv_general_permutations(("NHWC", "OIWH", "CNWH")) == ((0, 3, 2, 1), (0, 1, 2, 3), (1, 0, 2, 3))
    assert lax.reduce_window_shape_tuple((8, 7), (2, 3), (2, 1), ((1, 0), (0, 2)), (2, 1), (1, 2)) == (8, 5)


# ---- special functions ----
SPECIAL = [  # lax name, scipy reference, argument ranges
    ("igamma", sps.gammainc, [(0.1, 6), (0.0, 8)]),
    ("igammac", sps.gammaincc, [(0.1, 6), (0.0, 8)]),
    ("betainc", sps.betainc, [(0.2, 5), (0.2, 5), (0.0, 1)]),
    ("zeta", sps.zeta, [(1.1, 6), (0.2, 5)]),
    ("bessel_i0e", sps.i0e, [(-20, 20)]),
    ("bessel_i1e", sps.i1e, [(-20, 20)]),
]


@pytest.mark.parametrize(("name", "ref", "ranges"), SPECIAL, ids=[s[0] for s in SPECIAL])
def test_special_functions_match_scipy(name: str, ref: Any, ranges: list[tuple[float, float]]) -> None:
    rng = np.random.default_rng(12)
    args = [rng.uniform(lo, hi, 16).astype(np.float32) for lo, hi in ranges]
    out = getattr(lax, name)(*(f32(a) for a in args))
    assert out.dtype == tg.dtypes.float32
    np.testing.assert_allclose(out.numpy(), ref(*(a.astype(np.float64) for a in args)), rtol=5e-5, atol=1e-6)


def test_polygamma_takes_a_float_order_and_the_gamma_gradients() -> None:
    m, x = np.array([0, 1, 2, 3, 1.5, -1], np.float32), np.array([0.7, 1.5, 3.0, 4.5, 2.0, 2.0], np.float32)
    out = lax.polygamma(f32(m), f32(x)).numpy()
    ref = [sps.polygamma(int(mm), xx) if mm >= 0 and mm == int(mm) else np.nan for mm, xx in zip(m, x, strict=True)]
    np.testing.assert_allclose(out, ref, rtol=5e-5)
    a, x = np.array([0.5, 2.0, 3.0]), np.array([0.7, 1.5, 4.0])
    h = 1e-6   # dP/da by central differences of scipy's P, in float64
    dpda = (sps.gammainc(a + h, x) - sps.gammainc(a - h, x)) / (2 * h)
    np.testing.assert_allclose(lax.igamma_grad_a(f32(a), f32(x)).numpy(), dpda, rtol=1e-4)
    dpdx = x ** (a - 1) * np.exp(-x) / sps.gamma(a)
    np.testing.assert_allclose(lax.random_gamma_grad(f32(a), f32(x)).numpy(), -dpda / dpdx, rtol=1e-4)
    half = lax.igamma(T(a, "float16"), T(x, "float16"))
    assert half.dtype == tg.dtypes.float16
    np.testing.assert_allclose(half.numpy().astype(np.float64), sps.gammainc(a, x), rtol=2e-3)


@pytest.mark.x64
def test_special_function_gradients_by_differences() -> None:
    a, x = np.array([0.8, 2.0, 3.5]), np.array([0.6, 1.5, 4.0])
    check_grads(lambda a, x: lax.igamma(a, x), a, x, rtol=1e-5)
    check_grads(lambda x: lax.polygamma(T(np.ones(3)), x), x + 1, rtol=1e-5)
    check_grads(lambda x: lax.bessel_i1e(x) + lax.zeta(x + 2.0, x), x, rtol=1e-5)
    check_grads(lambda p: lax.betainc(T(a), T(x), p), np.array([0.2, 0.5, 0.7]), rtol=1e-5)


# ---- shapes ----
shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


@settings(max_examples=20)
@given(shape=shapes, data=st.data())
def test_shape_functions_match_numpy(shape: tuple[int, ...], data: st.DataObject) -> None:
    x = rand(*shape, seed=len(shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    stack_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    np.testing.assert_array_equal(lax.stack([f32(x), f32(2 * x)], stack_axis).numpy(),
                                  np.stack([x, 2 * x], stack_axis).astype(np.float32))
    parts = lax.unstack(f32(x), axis)
    assert len(parts) == shape[axis]
    for p, r in zip(parts, np.moveaxis(x, axis, 0), strict=True):
        np.testing.assert_array_equal(p.numpy(), r.astype(np.float32))
    n = shape[axis]
    cut = data.draw(st.integers(0, n))
    sizes = [cut, 0, n - cut]
    for p, r in zip(lax.split(f32(x), sizes, axis), np.split(x, [cut, cut], axis), strict=True):
        np.testing.assert_array_equal(p.numpy(), r.astype(np.float32))
    reps = tuple(data.draw(st.integers(0, 3)) for _ in shape)
    np.testing.assert_array_equal(lax.tile(f32(x), reps).numpy(), np.tile(x, reps).astype(np.float32))
    assert lax.broadcast_to_rank(f32(x), 4).shape == (1,) * (4 - len(shape)) + shape


def test_empty_and_shapes_under_jit() -> None:
    e = lax.empty((2, 3), "int32")
    assert e.shape == (2, 3) and e.dtype == tg.dtypes.int32
    f = tg.jit(lambda x: lax.tile(lax.split(x, [1, 2], 0)[1], (1, 2)))
    np.testing.assert_array_equal(f(tnp.arange(6).reshape(3, 2)).numpy(), [[2, 3, 2, 3], [4, 5, 4, 5]])


# ---- scatter variants and index_take ----
def test_scatter_sub_and_scatter_apply_with_repeated_indices() -> None:
    dn = lax.ScatterDimensionNumbers((1,), (0,), (0,))
    op, upd = rand(5, 3, seed=13), rand(4, 3, seed=14)
    idx = np.array([[1], [3], [1], [1]], np.int32)
    ref = op.copy()
    np.subtract.at(ref, idx[:, 0], upd)
    np.testing.assert_allclose(lax.scatter_sub(f32(op), T(idx), f32(upd), dn).numpy(), ref, rtol=1e-5, atol=1e-6)
    ref = op.copy()
    for i in idx[:, 0]:   # once per occurrence, as XLA applies it
        ref[i] = np.sin(ref[i])
    out = lax.scatter_apply(f32(op), T(idx), tnp.sin, dn, update_shape=(4, 3))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)
    jitted = tg.jit(lambda o, i: lax.scatter_apply(o, i, tnp.sin, dn, update_shape=(4, 3)))(f32(op), T(idx))
    np.testing.assert_allclose(jitted.numpy(), ref, rtol=1e-5, atol=1e-6)
    g = tg.grad(lambda u: lax.scatter_sub(f32(op), T(idx), u, dn).sum())(f32(upd))
    np.testing.assert_array_equal(g.numpy(), -np.ones((4, 3)))


def test_index_take_wraps_indices() -> None:
    src = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    i0, i1 = np.array([0, 2, 5, -1], np.int32), np.array([1, -1, 3, 9], np.int32)
    out = lax.index_take(T(src), (T(i0), T(i1)), (0, 2))
    np.testing.assert_array_equal(out.numpy(), src[i0 % 3, :, i1 % 5])


# ---- approx top-k, exact ----
@settings(max_examples=15)
@given(rows=st.integers(1, 3), n=st.integers(1, 12), data=st.data())
def test_approx_max_and_min_k_are_exact(rows: int, n: int, data: st.DataObject) -> None:
    x = np.random.default_rng(n).permutation(rows * n).reshape(rows, n).astype(np.float32)   # distinct
    k = data.draw(st.integers(0, n))
    vals, idx = lax.approx_max_k(f32(x), k)
    order = np.argsort(-x, axis=1)[:, :k]
    np.testing.assert_array_equal(idx.numpy(), order)
    np.testing.assert_array_equal(vals.numpy(), np.take_along_axis(x, order, 1))
    vals, idx = lax.approx_min_k(f32(x.T), k, reduction_dimension=0)
    order = np.argsort(x.T, axis=0)[:k]
    np.testing.assert_array_equal(idx.numpy(), order)
    assert idx.dtype == tg.dtypes.int32
    np.testing.assert_array_equal(vals.numpy(), np.take_along_axis(x.T, order, 0))


def test_approx_min_k_ties_and_gradient() -> None:
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0], np.float32)
    vals, idx = lax.approx_min_k(f32(x), 3)
    assert idx.numpy().tolist() == [1, 3, 0] and vals.numpy().tolist() == [1.0, 1.0, 3.0]
    assert lax.approx_max_k(f32(x), 2, aggregate_to_topk=False)[1].numpy().tolist() == [4, 2, 0, 1, 3]
    g = tg.grad(lambda x: lax.approx_max_k(x, 2)[0].sum())(f32(x))
    np.testing.assert_array_equal(g.numpy(), [0, 0, 1, 0, 1])


# ---- reduce_precision, mulhi ----
def test_reduce_precision_rounds_like_the_narrow_formats() -> None:
    rng = np.random.default_rng(15)
    x = np.concatenate([rng.normal(0, 100, 200), rng.normal(0, 1, 200)]).astype(np.float32)
    np.testing.assert_array_equal(lax.reduce_precision(f32(x), 5, 10).numpy(), x.astype(np.float16).astype(np.float32))
    bf16 = bf16_to_f32(f32_to_bf16(x))
    np.testing.assert_array_equal(lax.reduce_precision(f32(x), 8, 7).numpy(), bf16)
    special = np.array([65504, 65520, -70000, 2 ** -14, 2 ** -15, -2 ** -15, 1 + 2 ** -11, 1 + 3 * 2 ** -11, np.inf,
                        np.nan, -0.0], np.float32)
    out = lax.reduce_precision(f32(special), 5, 10).numpy()
    # overflow to inf, below float16's smallest normal to a signed zero (XLA flushes), ties to even, NaN kept
    np.testing.assert_array_equal(out, [65504, np.inf, -np.inf, 2 ** -14, 0, -0.0, 1, 1 + 2 ** -9, np.inf, np.nan,
                                        -0.0])
    assert np.signbit(out[5]) and np.signbit(out[-1])
    g = tg.grad(lambda x: (lax.reduce_precision(x, 5, 2) * 1.1).sum())(f32(np.ones(3)))
    np.testing.assert_array_equal(g.numpy(), [1.0] * 3)        # linear: the gradient 1.1 rounded to 2 mantissa bits


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
def test_mulhi_is_the_upper_half_of_the_product(dtype: str) -> None:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(16)
    x = np.concatenate([rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True),
                        np.array([info.min, info.max, 0, 1, info.max], dtype)])
    y = np.concatenate([rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True),
                        np.array([info.max, info.min, 5, info.max, info.max], dtype)])
    bits = info.bits
    ref = [((int(a) * int(b)) >> bits) for a, b in zip(x, y, strict=True)]   # Python ints: exact, floor shift
    ref = np.array([r % (1 << bits) for r in ref], dtype=np.uint64 if bits == 64 else np.int64).astype(dtype)
    np.testing.assert_array_equal(lax.mulhi(T(x), T(y)).numpy(), ref)


# ---- fft ----
def test_fft_types_match_numpy() -> None:
    rng = np.random.default_rng(17)
    c = (rng.standard_normal((2, 4, 6)) + 1j * rng.standard_normal((2, 4, 6))).astype(np.complex64)
    r = rng.standard_normal((2, 4, 6)).astype(np.float32)
    cases = [(T(c), "FFT", (4, 6), np.fft.fftn(c, axes=(1, 2))),
             (T(c), lax.FftType.IFFT, (6,), np.fft.ifft(c, axis=-1)),
             (T(r), "rfft", (2, 4, 6), np.fft.rfftn(r)),
             (T(c[..., :4]), lax.FftType.IRFFT, (4, 6), np.fft.irfftn(c[..., :4], s=(4, 6), axes=(1, 2)))]
    for x, kind, lengths, ref in cases:
        np.testing.assert_allclose(lax.fft(x, kind, lengths).numpy(), ref, rtol=1e-4, atol=1e-4)


# ---- implicit differentiation ----
def newton_sqrt(a: tg.Tensor, steps: int | None = None) -> tg.Tensor:
    """sqrt(a) by Newton iterations: in a while_loop (no max_steps: reverse mode cannot go through it), or `steps`
    of a fori_loop."""
    def solve(f: Any, x0: Any) -> Any:
        step = lambda x: x - f(x) / (2 * x)                       # noqa: E731
        if steps is not None:
            return lax.fori_loop(0, steps, lambda i, x: step(x), x0)
        return lax.while_loop(lambda x: (tnp.abs(f(x)) > 1e-6 * a).any(), step, x0)
    return lax.custom_root(lambda x: x * x - a, tnp.ones_like(a), solve, lambda g, y: y / g(tnp.ones_like(y)))


def test_custom_root_differentiates_through_closures_not_the_solver() -> None:
    a = f32(np.array(4.0))
    assert abs(float(newton_sqrt(a)) - 2.0) < 1e-5
    assert abs(float(tg.grad(newton_sqrt)(a)) - 0.25) < 1e-5              # 1 / (2 sqrt(a))
    # (a while_loop solver under jit(grad) trips an EscapedTracerError in tgfx's tracing: reported)
    assert abs(float(tg.jit(tg.grad(lambda a: newton_sqrt(a, 20)))(f32(np.array(9.0)))) - 1 / 6) < 1e-5
    _, tangent = tg.jvp(newton_sqrt, (a,), (f32(np.array(2.0)),))
    assert abs(float(tangent) - 0.5) < 1e-5


def test_custom_root_vector_with_aux_against_the_implicit_function_theorem() -> None:
    A = rand(3, 3, seed=18) + 4 * np.eye(3)
    theta = np.array([0.5, 1.0, -0.7])

    def root(t: tg.Tensor) -> tg.Tensor:
        def f(x: tg.Tensor) -> tg.Tensor:
            return f32(A) @ x + tnp.sin(x) - t ** 2

        def solve(f: Any, x0: Any) -> Any:
            x = lax.fori_loop(0, 30, lambda i, x: x - tnp.linalg.solve(tg.jacobian(f)(x), f(x)), x0)
            return x, tnp.abs(f(x)).max()
        x, err = lax.custom_root(f, tnp.zeros(3), solve, lambda g, y: tnp.linalg.solve(tg.jacobian(g)(y), y),
                                 has_aux=True)
        assert float(err) < 1e-5
        return x
    x = root(f32(theta)).numpy()
    np.testing.assert_allclose(A @ x + np.sin(x), theta ** 2, atol=1e-5)
    jac = np.linalg.solve(A + np.diag(np.cos(x)), np.diag(2 * theta))    # dx/dtheta = J^-1 d(theta^2)/dtheta
    np.testing.assert_allclose(tg.jacobian(root)(f32(theta)).numpy(), jac, rtol=1e-4, atol=1e-5)


def test_custom_root_second_and_third_derivatives() -> None:
    # d^n sqrt(a) / da^n: the correction's J and df must see x*'s own dependence on a (a single Newton step from a
    # constant x* gave d2 = 0, and d2 (sqrt(a) a) = 1 / sqrt(a) instead of 3 / (4 sqrt(a)))
    a = f32(np.array(3.0))
    assert abs(float(tg.grad(tg.grad(newton_sqrt))(a)) + 0.25 * 3 ** -1.5) < 1e-6
    assert abs(float(tg.jit(tg.grad(tg.grad(lambda a: newton_sqrt(a, 20) * a)))(a)) - 0.75 * 3 ** -0.5) < 1e-6
    assert abs(float(tg.grad(tg.grad(tg.grad(newton_sqrt)))(a)) - 0.375 * 3 ** -2.5) < 1e-6
    _, d2 = tg.jvp(tg.grad(newton_sqrt), (a,), (f32(np.array(1.0)),))
    assert abs(float(d2) + 0.25 * 3 ** -1.5) < 1e-6


def cg(matvec: Any, b: tg.Tensor) -> tg.Tensor:
    """Conjugate gradients in a while_loop: not differentiable, as in a real program."""
    def body(c: tuple) -> tuple:
        x, r, p, rr = c
        ap = matvec(p)
        alpha = rr / (p * ap).sum()
        x, r = x + alpha * p, r - alpha * ap
        new = (r * r).sum()
        return x, r, r + (new / rr) * p, new
    init = (tnp.zeros_like(b), b, b, (b * b).sum())
    return lax.while_loop(lambda c: c[3] > 1e-12, body, init)[0]


def test_custom_linear_solve_gradients_with_a_while_loop_solver() -> None:
    M = rand(3, 3, seed=19)
    S = M @ M.T + 3 * np.eye(3)                                          # symmetric positive definite
    b = rand(3, seed=20)

    def solve(s: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
        return lax.custom_linear_solve(lambda x: s @ x, b, cg, symmetric=True)
    x = np.linalg.solve(S, b)
    np.testing.assert_allclose(solve(f32(S), f32(b)).numpy(), x, rtol=1e-4)
    gs, gb = tg.grad(lambda s, b: solve(s, b).sum(), argnums=(0, 1))(f32(S), f32(b))
    lam = np.linalg.solve(S.T, np.ones(3))                               # d sum(x) / db = S^-T 1
    np.testing.assert_allclose(gb.numpy(), lam, rtol=1e-4)
    np.testing.assert_allclose(gs.numpy(), -np.outer(lam, x), rtol=1e-4, atol=1e-6)   # -lam x^T


def test_custom_linear_solve_transpose_solve_and_forward_mode() -> None:
    A, b = rand(3, 3, seed=21) + 3 * np.eye(3), rand(3, seed=22)

    def solve(a: tg.Tensor, b: tg.Tensor, with_transpose: bool) -> tg.Tensor:
        ts = (lambda vecmat, y: tnp.linalg.solve(a.T, y)) if with_transpose else None
        return lax.custom_linear_solve(lambda x: a @ x, b, lambda mv, y: tnp.linalg.solve(a, y), ts)
    lam = np.linalg.solve(A.T, np.ones(3))
    for with_transpose in (True, False):
        gb = tg.grad(lambda b, w=with_transpose: solve(f32(A), b, w).sum())(f32(b))
        np.testing.assert_allclose(gb.numpy(), lam, rtol=1e-4)
        _, t = tg.jvp(lambda b, w=with_transpose: solve(f32(A), b, w), (f32(b),), (f32(np.ones(3)),))
        np.testing.assert_allclose(t.numpy(), np.linalg.solve(A, np.ones(3)), rtol=1e-4)
    # a transpose_solve that checks it gets A^T as vecmat
    seen = []

    def tsolve(vecmat: Any, y: tg.Tensor) -> tg.Tensor:
        seen.append(vecmat(f32(np.eye(3)[0])).numpy())
        return tnp.linalg.solve(f32(A).T, y)
    tg.grad(lambda b: lax.custom_linear_solve(lambda x: f32(A) @ x, b, lambda mv, y: tnp.linalg.solve(f32(A), y),
                                              tsolve).sum())(f32(b))
    np.testing.assert_allclose(seen[0], A[0], rtol=1e-6)                 # e0^T A: A's first row


def test_custom_linear_solve_forward_mode_solves_with_solve() -> None:
    # a fixed-step CG (no while loop) as transpose_solve: forward mode linearised it at a zero cotangent, 0 / 0 in its
    # step length, and every tangent was NaN; the tangent is A^-1 (db - dA x) by solve
    A, b = rand(4, 4, seed=23) + 4 * np.eye(4), rand(4, seed=24)
    A = A @ A.T

    def cg_steps(matvec: Any, r: tg.Tensor) -> tg.Tensor:
        def step(i: Any, c: tuple) -> tuple:
            x, r, p, rr = c
            ap = matvec(p)
            alpha = rr / (p * ap).sum()
            x, r = x + alpha * p, r - alpha * ap
            return x, r, r + ((r * r).sum() / rr) * p, (r * r).sum()
        return lax.fori_loop(0, 4, step, (tnp.zeros_like(r), r, r, (r * r).sum()))[0]

    def solve(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
        return lax.custom_linear_solve(lambda v: a @ v, b, cg_steps, symmetric=True)
    x = np.linalg.solve(A, b)
    dA, db = rand(4, 4, seed=25), rand(4, seed=26)
    dA = dA + dA.T                                                       # (the operator stays symmetric)
    _, t = tg.jvp(solve, (f32(A), f32(b)), (f32(dA), f32(db)))
    np.testing.assert_allclose(t.numpy(), np.linalg.solve(A, db - dA @ x), rtol=1e-3, atol=1e-4)
    # no transpose_solve and a while_loop CG: JAX's jvp solves; tgfx transposed solve's transpose ("not linear in the
    # tangents ... carries them through a loop")
    _, t = tg.jvp(lambda b: lax.custom_linear_solve(lambda v: f32(A) @ v, b, cg), (f32(b),), (f32(db),))
    np.testing.assert_allclose(t.numpy(), np.linalg.solve(A, db), rtol=1e-3, atol=1e-4)


def test_custom_linear_solve_hessian_in_the_matrix() -> None:
    # L(A) = |A^-1 b|^2; its gradient -2 A^-T x x^T by central differences in float64 gives the hessian. With x*
    # held constant in dA x*, the second derivative missed A^-1 dA dx (rows off by up to 0.1)
    A, b = np.array([[4.0, 1.0], [0.5, 3.0]]), np.array([1.0, 2.0])

    def grad_ref(a: np.ndarray) -> np.ndarray:
        x = np.linalg.solve(a, b)
        return -2 * np.outer(np.linalg.solve(a.T, x), x)
    h = 1e-6
    ref = np.stack([(grad_ref(A + h * e.reshape(2, 2)) - grad_ref(A - h * e.reshape(2, 2))) / (2 * h)
                    for e in np.eye(4)], -1).reshape(2, 2, 2, 2)
    for ts in (lambda mv, y, a: tnp.linalg.solve(a.T, y), None):
        def loss(a: tg.Tensor, ts: Any = ts) -> tg.Tensor:
            tsolve = None if ts is None else (lambda mv, y: ts(mv, y, a))
            x = lax.custom_linear_solve(lambda v: a @ v, f32(b), lambda mv, y: tnp.linalg.solve(a, y), tsolve)
            return (x ** 2).sum()
        np.testing.assert_allclose(tg.hessian(loss)(f32(A)).numpy(), ref, rtol=1e-4, atol=1e-6)


@pytest.mark.x64
def test_custom_root_gradient_by_differences() -> None:
    check_grads(lambda a: newton_sqrt(a) * a, np.array([0.7, 2.0, 5.0]), rtol=1e-5)


# ---- placement no-ops ----
def test_barrier_sharding_constraint_and_platform_dependent() -> None:
    tree = lax.optimization_barrier((1.0, {"a": tnp.ones(2)}))
    assert isinstance(tree[0], tg.Tensor) and tree[1]["a"].shape == (2,)
    x = tg.device_put(np.arange(3.0, dtype=np.float32), "CPU")   # its device picks the branch
    assert lax.with_sharding_constraint(x, None) is x
    out = lax.platform_dependent(x, cpu=lambda v: v + 1, default=lambda v: v - 1)
    np.testing.assert_array_equal(out.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(lax.platform_dependent(x, tpu=lambda v: v, default=lambda v: -v).numpy(),
                                  [0, -1, -2])
    assert float(tg.grad(lambda v: lax.platform_dependent(v, cpu=tnp.sin).sum())(x)[0]) == 1.0


# ---- errors ----
ERRORS = [
    (lambda: lax.igamma(f32(np.ones(2)), T(np.ones(2), "float16")), TypeError, "same dtypes, got float32, float16"),
    (lambda: lax.igamma(1, 2), TypeError, "does not accept dtype int32"),
    (lambda: lax.stack([tnp.ones(2), tnp.ones(3)]), TypeError, r"same shape, got \(2,\), \(3,\)"),
    (lambda: lax.split(tnp.ones(5), [2, 2]), ValueError, "sum to 4, but axis 0 .* has 5"),
    (lambda: lax.tile(tnp.ones((2, 2)), (2,)), TypeError, "one non-negative int per axis"),
    (lambda: lax.broadcast_to_rank(tnp.ones((2, 2)), 1), ValueError, "at least the operand's rank 2"),
    (lambda: lax.approx_max_k(tnp.ones(5), 7), ValueError, r"k must be an int from 0 to the size of .* 0 \(5,"),
    (lambda: lax.approx_min_k(tnp.ones(5, "int32"), 2), TypeError, "does not accept dtype int32"),
    (lambda: lax.reduce_precision(tnp.ones(2), 0, 3), ValueError, "exponent_bits must be an int >= 1"),
    (lambda: lax.mulhi(tnp.ones(2), tnp.ones(2)), TypeError, "mulhi does not accept dtype float32"),
    (lambda: lax.fft(tnp.ones(4, "complex64"), "FFT", (3,)), ValueError, r"last 1 axes \(4,\) must be \(3,\)"),
    (lambda: lax.fft(tnp.ones(4), "DCT", (4,)), ValueError, "fft_type must be"),
    (lambda: lax.conv_transpose(tnp.ones((1, 4, 4, 2)), tnp.ones((3, 3, 2, 2)), (2, 2), "SAME_LOWER"), ValueError,
     "padding must be 'SAME', 'VALID'"),
    (lambda: lax.conv_transpose(tnp.ones((1, 4, 2)), tnp.ones((3, 3, 2, 2)), (2,), "SAME"), TypeError,
     r"same rank, .* \(1, 4, 2\) and \(3, 3, 2, 2\)"),
    (lambda: lax.conv_general_dilated_patches(tnp.ones((1, 2, 4)), (2,), (1,), "SAME", lhs_dilation=(2,)),
     ValueError, "string padding"),
    (lambda: lax.platform_dependent(1.0, gpu=lambda x: x), ValueError, "use 'cuda' or 'rocm'"),
    (lambda: lax.platform_dependent(tg.device_put(np.float32(1), "CPU"), cuda=lambda x: x), NotImplementedError,
     "no branch for platform 'cpu'"),
    (lambda: lax.custom_root(lambda x: x, tnp.ones(2), lambda f, x0: (x0, x0), lambda g, y: y), TypeError,
     "the solution solve returns must have the structure of initial_guess"),
    (lambda: lax.custom_linear_solve(lambda x: x, tnp.ones(2), lambda mv, b: b[:1]), ValueError,
     r"leaf 0 has shape \(1,\), but b's has \(2,\)"),
    (lambda: lax.scatter_apply(tnp.ones(3), T(np.array([[1]], np.int32)), lambda v: v.sum(),
                               lax.ScatterDimensionNumbers((), (0,), (0,)), update_shape=(1,)), TypeError,
     "func must be elementwise"),
]


@pytest.mark.parametrize(("call", "exc", "match"), ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_errors_name_the_argument(call: Any, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        call()


def test_against_jax() -> None:
    jax = pytest.importorskip("jax")
    jl = jax.lax
    x, w = rand(2, 5, 6, 3, seed=23).astype(np.float32), rand(3, 2, 3, 4, seed=24).astype(np.float32)
    for kw in (dict(padding="SAME"), dict(padding="VALID", transpose_kernel=True, rhs_dilation=(2, 1)),
               dict(padding=[(1, 2), (0, 1)], use_consistent_padding=True)):
        w_ = w.transpose(0, 1, 3, 2) if kw.get("transpose_kernel") else w
        ref = np.asarray(jl.conv_transpose(x, w_, (2, 3), **kw))
        np.testing.assert_allclose(lax.conv_transpose(T(x), T(w_), (2, 3), **kw).numpy(), ref, rtol=1e-4, atol=1e-4)
    dn = ("NHWC", "OIWH", "CNWH")
    ref = np.asarray(jl.conv_general_dilated_patches(x, (2, 3), (2, 1), [(1, -1), (2, 0)], rhs_dilation=(1, 2),
                                                     dimension_numbers=dn))
    out = lax.conv_general_dilated_patches(T(x), (2, 3), (2, 1), [(1, -1), (2, 0)], rhs_dilation=(1, 2),
                                           dimension_numbers=dn)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
    a, q = np.array([0.5, 2.0, 3.0], np.float32), np.array([0.7, 1.5, 4.0], np.float32)
    for name in ("igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "zeta", "polygamma"):
        np.testing.assert_allclose(getattr(lax, name)(T(a), T(q)).numpy(), np.asarray(getattr(jl, name)(a, q)),
                                   rtol=1e-4, err_msg=name)
    r = rand(200, seed=25).astype(np.float32) * 1e3
    for e, m in ((5, 10), (4, 3), (3, 0)):
        ref = np.asarray(jl.reduce_precision(r, e, m))
        np.testing.assert_array_equal(lax.reduce_precision(T(r), e, m).numpy(), ref)


def test_broadcast_shapes_and_dtype_as_jax_lax() -> None:
    assert tg.lax.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert tg.lax.broadcast_shapes((4, 1, 3), (1, 5, 1), ()) == (4, 5, 3)
    with pytest.raises(ValueError, match=r"incompatible shapes for broadcasting: \(2,\), \(3,\)"):
        tg.lax.broadcast_shapes((2,), (3,))
    assert tg.lax.dtype(1.0) == tg.dtypes.float32 and tg.lax.dtype(3) == tg.dtypes.int32
    assert tg.lax.dtype(True) == tg.dtypes.bool and tg.lax.dtype("float16") == tg.dtypes.float16
    assert tg.lax.dtype(tnp.ones(2, tnp.int8)) == tg.dtypes.int8
    assert tg.lax.dtype(np.ones(2, np.uint8)) == tg.dtypes.uint8
