"""tg.lax.conv_general_dilated (and conv, conv_with_general_padding) and tg.lax.reduce_window against numpy
references written here in float64 from XLA's definitions; gradients by central differences (test_grad's
`check_grads`); kernel counts; the errors a user gets for arguments that do not fit.

The references dilate and pad the input explicitly, take every window with numpy's `sliding_window_view`, stride
and dilate it by slicing, and contract or reduce it: nothing in them is shared with the code under test.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view
from test_grad import T, check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx import _lax_conv, lax


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def close(out: tg.Tensor, ref: np.ndarray, tol: float = 1e-10) -> None:
    """Within `tol` in float64; float32's rounding when 64-bit types are off (JAX's default)."""
    assert out.shape == ref.shape, (out.shape, ref.shape)
    tol = tol if out.dtype == tg.dtypes.float64 else max(tol, 3e-5)
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)


# ---- numpy references ----
def np_same_pads(ins: Sequence[int], span: Sequence[int], s: Sequence[int], lower: bool) -> list[tuple[int, int]]:
    """TensorFlow's SAME: ceil(in / stride) outputs; the odd element after (SAME) or before (SAME_LOWER)."""
    out = []
    for i, k, ss in zip(ins, span, s, strict=True):
        total = max((-(-i // ss) - 1) * ss + k - i, 0)
        out.append((total - total // 2, total // 2) if lower else (total // 2, total - total // 2))
    return out


def np_pads(padding: Any, ins: Sequence[int], span: Sequence[int], s: Sequence[int]) -> list[tuple[int, int]]:
    if padding == "VALID":
        return [(0, 0)] * len(ins)
    if padding in ("SAME", "SAME_LOWER"):
        return np_same_pads(ins, span, s, padding == "SAME_LOWER")
    return [tuple(p) for p in padding]


def np_dilate_pad(x: np.ndarray, axes: Sequence[int], dil: Sequence[int], pads: Sequence[tuple[int, int]],
                  fill: float) -> np.ndarray:
    """x with dil - 1 fills between elements along `axes`, then padded by `pads` (negative crops)."""
    for a, d, (lo, hi) in zip(axes, dil, pads, strict=True):
        n = x.shape[a]
        shape = list(x.shape)
        shape[a] = (n - 1) * d + 1 if n else 0
        y = np.full(shape, fill, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[a] = slice(None, None, d)
        y[tuple(idx)] = x
        widths = [(0, 0)] * x.ndim
        widths[a] = (max(lo, 0), max(hi, 0))
        y = np.pad(y, widths, constant_values=fill)
        idx[a] = slice(max(-lo, 0), y.shape[a] - max(-hi, 0))
        x = y[tuple(idx)]
    return x


def np_windows(xp: np.ndarray, axes: Sequence[int], k: Sequence[int], s: Sequence[int],
               d: Sequence[int]) -> np.ndarray:
    """Every window of xp along `axes`: (..., *out, *k) with window element j of output o at o * s + j * d."""
    span = [(kk - 1) * dd + 1 for kk, dd in zip(k, d, strict=True)]
    if any(xp.shape[a] < sp for a, sp in zip(axes, span, strict=True)):   # no complete window: an empty axis
        shape = [0 if a in axes and xp.shape[a] < span[list(axes).index(a)] else n for a, n in enumerate(xp.shape)]
        xp = np.zeros([n if a not in axes else max(n, span[list(axes).index(a)]) for a, n in enumerate(xp.shape)])
        return np_windows(xp, axes, k, s, d)[tuple(slice(0, n) for n in shape)]
    win = sliding_window_view(xp, span, axis=tuple(axes))
    n = xp.ndim
    idx = [slice(None)] * n + [slice(None)] * len(axes)
    for j, (a, ss, dd) in enumerate(zip(axes, s, d, strict=True)):
        idx[a] = slice(None, None, ss)
        idx[n + j] = slice(None, None, dd)
    return win[tuple(idx)]


def np_conv(lhs: np.ndarray, rhs: np.ndarray, strides: Sequence[int], padding: Any,
            lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
            dimension_numbers: tuple[str, str, str] | None = None, fgc: int = 1, bgc: int = 1) -> np.ndarray:
    """XLA's convolution in float64, with dimension numbers as spec strings (None: NC..., OI..., NC...)."""
    nsp = lhs.ndim - 2
    if dimension_numbers is None:
        sp = "".join("HWDXYZ"[i] for i in range(nsp))
        dimension_numbers = ("NC" + sp, "OI" + sp, "NC" + sp)
    ls, rs, os_ = dimension_numbers
    spatial = [c for c in rs if c not in "OI"]
    x = np.transpose(lhs, [ls.index(c) for c in "NC"] + [ls.index(c) for c in spatial]).astype(np.float64)
    w = np.transpose(rhs, [rs.index(c) for c in "OI"] + [rs.index(c) for c in spatial]).astype(np.float64)
    ld = lhs_dilation or (1,) * nsp
    rd = rhs_dilation or (1,) * nsp
    k = w.shape[2:]
    span = [(kk - 1) * dd + 1 for kk, dd in zip(k, rd, strict=True)]
    pads = np_pads(padding, x.shape[2:], span, strides)
    xp = np_dilate_pad(x, range(2, 2 + nsp), ld, pads, 0.0)
    win = np_windows(xp, range(2, 2 + nsp), k, strides, rd)                 # (N, C, *out, *k)
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    outs = win.shape[2:2 + nsp]
    groups = max(fgc, bgc)
    og = o // groups
    out = np.zeros((n // bgc, o, *outs))
    letters = "ijkl"[:nsp]   # not n, c or o
    for g in range(groups):
        ws = w[g * og:(g + 1) * og]
        if bgc > 1:
            part = win[g * (n // bgc):(g + 1) * (n // bgc)]
        else:
            part = win[:, g * (c // fgc):(g + 1) * (c // fgc)]
        out[:, g * og:(g + 1) * og] = np.einsum(f"nc{letters.upper()}{letters},oc{letters}->no{letters.upper()}",
                                                part, ws)
    out_chars = "NC" + "".join(spatial)
    return np.transpose(out, [out_chars.index(ch) for ch in os_])


# ---- convolution ----
CONVS: dict[str, dict[str, Any]] = {   # lhs shape, rhs shape and conv_general_dilated's keyword arguments
    "2d_default": dict(lhs=(2, 3, 7, 6), rhs=(4, 3, 3, 3), window_strides=(1, 1), padding="VALID"),
    "2d_same_stride": dict(lhs=(1, 2, 9, 8), rhs=(3, 2, 3, 2), window_strides=(2, 3), padding="SAME"),
    "2d_same_lower": dict(lhs=(1, 2, 8, 7), rhs=(3, 2, 2, 2), window_strides=(1, 1), padding="SAME_LOWER"),
    "nhwc_hwio": dict(lhs=(2, 6, 5, 3), rhs=(3, 3, 3, 4), window_strides=(1, 2), padding="SAME",
                      dimension_numbers=("NHWC", "HWIO", "NHWC")),
    "spatial_order": dict(lhs=(1, 2, 6, 5), rhs=(3, 2, 2, 3), window_strides=(2, 1), padding=((1, 0), (0, 2)),
                          dimension_numbers=("NCHW", "OIWH", "NCWH")),
    "1d_nwc": dict(lhs=(2, 9, 3), rhs=(3, 3, 4), window_strides=(2,), padding=((1, 2),), rhs_dilation=(2,),
                   dimension_numbers=("NWC", "WIO", "NWC")),
    "1d_default": dict(lhs=(1, 2, 10), rhs=(2, 2, 4), window_strides=(1,), padding="SAME"),
    "3d": dict(lhs=(1, 2, 4, 5, 4), rhs=(3, 2, 2, 3, 2), window_strides=(1, 2, 1), padding="SAME"),
    "3d_ndhwc": dict(lhs=(1, 5, 4, 4, 2), rhs=(3, 2, 2, 2, 3), window_strides=(2, 1, 1), padding="VALID",
                     dimension_numbers=("NDHWC", "DHWIO", "NDHWC")),
    "rhs_dilation": dict(lhs=(1, 2, 10, 9), rhs=(2, 2, 3, 2), window_strides=(3, 1), padding="SAME",
                         rhs_dilation=(2, 3)),
    "lhs_dilation": dict(lhs=(1, 2, 4, 5), rhs=(3, 2, 3, 3), window_strides=(1, 1), padding=((2, 2), (1, 2)),
                         lhs_dilation=(2, 3)),
    "negative_padding": dict(lhs=(1, 2, 8, 7), rhs=(2, 2, 3, 2), window_strides=(1, 1), padding=((-1, 2), (1, -2))),
    "feature_groups": dict(lhs=(1, 4, 6, 6), rhs=(6, 2, 3, 3), window_strides=(1, 1), padding=((1, 0), (0, 2)),
                           feature_group_count=2),
    "depthwise_nhwc": dict(lhs=(2, 5, 5, 4), rhs=(3, 3, 1, 4), window_strides=(2, 2), padding="SAME",
                           dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=4),
    "batch_groups": dict(lhs=(4, 3, 5, 4), rhs=(6, 3, 2, 2), window_strides=(1, 1), padding="VALID",
                         batch_group_count=2),
    "transposed_1d_grouped": dict(lhs=(1, 4, 5), rhs=(4, 2, 3), window_strides=(1,), padding=((2, 2),),
                                  lhs_dilation=(2,), feature_group_count=2),
}


def _conv_args(case: dict[str, Any], seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    kw = {k: v for k, v in case.items() if k not in ("lhs", "rhs")}
    return rand(*case["lhs"], seed=seed), rand(*case["rhs"], seed=seed + 1), kw


def _np_conv_kw(kw: dict[str, Any]) -> dict[str, Any]:
    names = {"feature_group_count": "fgc", "batch_group_count": "bgc"}
    return {names.get(k, k): v for k, v in kw.items() if k not in ("window_strides", "padding")}


@pytest.mark.parametrize("name", list(CONVS))
def test_conv_general_dilated_matches_numpy(name: str) -> None:
    x, w, kw = _conv_args(CONVS[name])
    ref = np_conv(x, w, kw["window_strides"], kw["padding"], **_np_conv_kw(kw))
    close(lax.conv_general_dilated(T(x), T(w), **kw), ref)


@pytest.mark.x64
@pytest.mark.parametrize("name", ["2d_same_stride", "nhwc_hwio", "1d_nwc", "3d", "lhs_dilation", "negative_padding",
                                  "depthwise_nhwc", "batch_groups", "transposed_1d_grouped"])
def test_conv_general_dilated_gradient(name: str) -> None:
    x, w, kw = _conv_args(CONVS[name], seed=3)
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, **kw), x, w)


@pytest.mark.parametrize("name", ["nhwc_hwio", "1d_nwc", "lhs_dilation", "batch_groups", "spatial_order"])
def test_conv_general_dilated_matches_jax(name: str) -> None:
    """The numpy reference's reading of XLA's definition, checked against jax itself where it is installed."""
    jax_lax = pytest.importorskip("jax.lax")
    x, w, kw = _conv_args(CONVS[name], seed=5)
    x, w = x.astype(np.float32), w.astype(np.float32)
    want = np.asarray(jax_lax.conv_general_dilated(x, w, **kw))
    np.testing.assert_allclose(np_conv(x, w, kw["window_strides"], kw["padding"], **_np_conv_kw(kw)), want,
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(lax.conv_general_dilated(tg.asarray(x), tg.asarray(w), **kw).numpy(), want,
                               rtol=1e-4, atol=1e-4)


@settings(max_examples=10)
@given(st.data())
def test_conv_general_dilated_hypothesis(data: st.DataObject) -> None:
    nsp = data.draw(st.integers(1, 2))
    k = [data.draw(st.integers(1, 3)) for _ in range(nsp)]
    s = tuple(data.draw(st.integers(1, 2)) for _ in range(nsp))
    rd = tuple(data.draw(st.integers(1, 2)) for _ in range(nsp))
    ld = tuple(data.draw(st.integers(1, 2)) for _ in range(nsp))
    groups = data.draw(st.sampled_from([1, 2]))
    ins = [data.draw(st.integers(1, 5)) for _ in range(nsp)]
    if any(v > 1 for v in ld):
        padding: Any = tuple((data.draw(st.integers(-1, 2)), data.draw(st.integers(-1, 2))) for _ in range(nsp))
    else:
        padding = data.draw(st.sampled_from(["SAME", "VALID", "SAME_LOWER"]))
    x = rand(2, 2 * groups, *ins, seed=7).astype(np.float32)
    w = rand(2 * groups, 2, *k, seed=8).astype(np.float32)
    if not isinstance(padding, str) and any((i - 1) * d + 1 + lo + hi < 0
                                            for i, d, (lo, hi) in zip(ins, ld, padding, strict=True)):
        with pytest.raises(ValueError, match="crops more than the lhs spatial size"):
            lax.conv_general_dilated(tg.asarray(x), tg.asarray(w), s, padding, ld, rd, feature_group_count=groups)
        return
    ref = np_conv(x, w, s, padding, ld, rd, fgc=groups)
    out = lax.conv_general_dilated(tg.asarray(x), tg.asarray(w), s, padding, ld, rd, feature_group_count=groups)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=12)
@given(st.data())
def test_nhwc_convolution_and_gradients_hypothesis(data: st.DataObject) -> None:
    """NHWC convolutions (their padded input, and a stride-1 input gradient's padded output gradient, stored channels
    last first) and both gradients against numpy's float64 convolutions: the input's gradient is the correlation of
    g with the flipped, transposed kernel, the kernel's the correlation of x with g."""
    k = [data.draw(st.integers(1, 4)) for _ in range(2)]
    s = tuple(data.draw(st.integers(1, 2)) for _ in range(2))
    ins = [data.draw(st.integers(1, 7)) for _ in range(2)]
    c, o = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 17))
    padding = data.draw(st.sampled_from(["SAME", "VALID", ((2, 1), (0, 3))]))
    if padding == "VALID" and any(i < kk for i, kk in zip(ins, k, strict=True)):
        return
    x, w = rand(2, *ins, c, seed=15), rand(*k, c, o, seed=16)
    dn = ("NHWC", "HWIO", "NHWC")
    ref = np_conv(x.astype(np.float64), w.astype(np.float64), s, padding, dimension_numbers=dn)
    g = rand(*ref.shape, seed=17)
    least = _lax_conv.STORED_PAD_MIN_READS
    _lax_conv.STORED_PAD_MIN_READS = data.draw(st.sampled_from([0, least]))   # (these sizes are below it)
    try:
        out, vjp = tg.vjp(lambda x, w: lax.conv_general_dilated(x, w, s, padding, dimension_numbers=dn), T(x), T(w))
        dx, dw = vjp(T(g))
        tg.realize(out, dx, dw)
    finally:
        _lax_conv.STORED_PAD_MIN_READS = least
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)
    # the adjoints: <conv(x, w), g> is linear in each, so its gradients are the numpy convolution's vjp by the
    # identity <conv(e_i, w), g> for every basis e_i, computed at once by numpy's convolution of the pieces
    eps_x, eps_w = rand(*x.shape, seed=18), rand(*w.shape, seed=19)
    want_x = (np_conv(eps_x.astype(np.float64), w.astype(np.float64), s, padding, dimension_numbers=dn) * g).sum()
    want_w = (np_conv(x.astype(np.float64), eps_w.astype(np.float64), s, padding, dimension_numbers=dn) * g).sum()
    scale = np.abs(g).sum() * (1 + np.abs(w).max() + np.abs(x).max())
    assert abs((dx.numpy() * eps_x).sum() - want_x) <= 1e-4 * scale
    assert abs((dw.numpy() * eps_w).sum() - want_w) <= 1e-4 * scale


def test_conv_and_conv_with_general_padding_are_spellings() -> None:
    x, w = rand(1, 3, 6, 6, seed=9), rand(2, 3, 3, 3, seed=10)
    close(lax.conv(T(x), T(w), (2, 1), "SAME"), np_conv(x, w, (2, 1), "SAME"))
    close(lax.conv_with_general_padding(T(x), T(w), (1, 1), ((1, 1), (2, 0)), (2, 1), (1, 2)),
          np_conv(x, w, (1, 1), ((1, 1), (2, 0)), (2, 1), (1, 2)))


def test_nn_conv2d_is_conv_general_dilated() -> None:
    x, w = rand(2, 4, 7, 7, seed=11), rand(6, 2, 3, 3, seed=12)
    a = tg.nn.conv2d(T(x), T(w), stride=2, padding=1, dilation=(1, 2), groups=2)
    b = lax.conv_general_dilated(T(x), T(w), (2, 2), ((1, 1), (1, 1)), rhs_dilation=(1, 2), feature_group_count=2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_conv_general_dilated_in_any_layout_is_one_kernel_and_its_gradient_three() -> None:
    x = tg.asarray(rand(2, 12, 12, 8).astype(np.float32)).realize()
    w = tg.asarray(rand(3, 3, 8, 16).astype(np.float32)).realize()
    dn = ("NHWC", "HWIO", "NHWC")
    tg.counters.reset()
    tg.nn.relu(lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=dn)).realize()
    assert tg.counters.kernel_count == 1
    x = tg.asarray(rand(2, 9, 9, 4).astype(np.float32)).realize()   # small: the output gradient is recomputed in
    w = tg.asarray(rand(3, 3, 4, 6).astype(np.float32)).realize()   # both backward kernels, not stored first
    tg.counters.reset()
    gx, gw = tg.grad(lambda x, w: (lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn) ** 2).sum(),
                     argnums=(0, 1))(x, w)
    tg.realize(gx, gw)
    assert tg.counters.kernel_count == 3 + 1   # and the flipped kernel stored input channels innermost (96 floats)


def test_conv_general_dilated_under_jit_and_vmap() -> None:
    x, w = rand(3, 2, 6, seed=13).astype(np.float32), rand(4, 2, 3, seed=14).astype(np.float32)
    ref = np_conv(x, w, (1,), "SAME")
    f = tg.jit(lambda x, w: lax.conv_general_dilated(x, w, (1,), "SAME"))
    np.testing.assert_allclose(f(tg.asarray(x), tg.asarray(w)).numpy(), ref, rtol=1e-5, atol=1e-5)
    one = tg.vmap(lambda xi: lax.conv_general_dilated(xi[None], tg.asarray(w), (1,), "SAME")[0])
    np.testing.assert_allclose(one(tg.asarray(x)).numpy(), ref, rtol=1e-5, atol=1e-5)


def test_precision_and_preferred_element_type() -> None:
    assert lax.Precision("highest") is lax.Precision.HIGHEST and lax.Precision("default") is lax.Precision.DEFAULT
    assert set(lax.Precision.__members__) == {"DEFAULT", "HIGH", "HIGHEST"}
    x, w = rand(1, 2, 5, 5, seed=15), rand(3, 2, 2, 2, seed=16)
    for p in (None, lax.Precision.HIGHEST, "high", (lax.Precision.DEFAULT, lax.Precision.HIGH)):
        close(lax.conv(T(x), T(w), (1, 1), "VALID", precision=p), np_conv(x, w, (1, 1), "VALID"))
    xi = np.random.default_rng(17).integers(-100, 100, (1, 2, 5, 5)).astype(np.int8)
    wi = np.random.default_rng(18).integers(-100, 100, (3, 2, 3, 3)).astype(np.int8)
    out = lax.conv(tg.asarray(xi), tg.asarray(wi), (1, 1), "SAME", preferred_element_type=tg.dtypes.int32)
    assert out.dtype == tg.dtypes.int32     # accumulated in int32: no int8 wrap-around
    np.testing.assert_array_equal(out.numpy(), np_conv(xi, wi, (1, 1), "SAME").astype(np.int32))
    half = lax.conv(tg.asarray(x.astype(np.float16)), tg.asarray(w.astype(np.float16)), (1, 1), "VALID",
                    preferred_element_type=np.float32)
    assert half.dtype == tg.dtypes.float32


def test_conv_dimension_numbers() -> None:
    dn = lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 4), ("NHWC", "HWIO", "NHWC"))
    assert dn == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    assert lax.conv_dimension_numbers((1, 5, 6, 3), (3, 3, 3, 4), ("NHWC", "OIWH", "NCWH")) == \
        lax.ConvDimensionNumbers((0, 3, 2, 1), (0, 1, 2, 3), (0, 1, 2, 3))
    assert lax.conv_dimension_numbers((1, 2, 3), (1, 2, 3), None) == lax.ConvDimensionNumbers(*((0, 1, 2),) * 3)
    x, w = rand(2, 6, 5, 3, seed=19), rand(3, 3, 3, 4, seed=20)   # a ConvDimensionNumbers is taken as it is
    close(lax.conv_general_dilated(T(x), T(w), (1, 1), "SAME", dimension_numbers=dn),
          np_conv(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))


def test_conv_output_with_no_complete_window_is_empty() -> None:
    out = lax.conv_general_dilated(tnp.ones((1, 1, 2)), tnp.ones((1, 1, 3)), (1,), "VALID")
    assert out.shape == (1, 1, 0)


def test_conv_errors_name_the_argument() -> None:
    x, w = T(rand(1, 4, 5, 5)), T(rand(2, 4, 3, 3))
    conv = lax.conv_general_dilated
    with pytest.raises(TypeError, match=r"dimension_numbers\[0\] = 'NCH' must have one character per axis"):
        conv(x, w, (1, 1), "VALID", dimension_numbers=("NCH", "OIH", "NCH"))
    with pytest.raises(TypeError, match=r"dimension_numbers\[1\] must be a string containing the characters 'O'"):
        conv(x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "NCHW", "NCHW"))
    with pytest.raises(TypeError, match="must name the same spatial axes"):
        conv(x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHX", "NCHW"))
    with pytest.raises(TypeError, match="dimension_numbers.rhs_spec must be a permutation"):
        conv(x, w, (1, 1), "VALID", dimension_numbers=lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 2),
                                                                                (0, 1, 2, 3)))
    with pytest.raises(TypeError, match=r"same number of dimensions, got shapes \(1, 4, 5, 5\) and \(2, 4, 3\)"):
        conv(x, T(rand(2, 4, 3)), (1,), "VALID")
    with pytest.raises(ValueError, match=r"window_strides must have one entry per spatial dimension \(2\)"):
        conv(x, w, (1,), "VALID")
    with pytest.raises(ValueError, match="rhs_dilation must be ints >= 1"):
        conv(x, w, (1, 1), "VALID", rhs_dilation=(0, 1))
    with pytest.raises(ValueError, match=r"divided by feature_group_count \(2\) must equal the rhs input feature"):
        conv(x, w, (1, 1), "VALID", feature_group_count=2)
    with pytest.raises(ValueError, match="at most one of feature_group_count and batch_group_count"):
        conv(x, T(rand(4, 2, 3, 3)), (1, 1), "VALID", feature_group_count=2, batch_group_count=2)
    with pytest.raises(ValueError, match=r"batch dimension \(1\) must be a multiple of batch_group_count \(2\)"):
        conv(x, w, (1, 1), "VALID", batch_group_count=2)
    with pytest.raises(ValueError, match="string padding .* transposed convolution"):
        conv(x, w, (1, 1), "SAME", lhs_dilation=(2, 2))
    with pytest.raises(ValueError, match="padding must be 'SAME', 'SAME_LOWER', 'VALID' or"):
        conv(x, w, (1, 1), "FULL")
    with pytest.raises(ValueError, match=r"one \(low, high\) pair of ints per spatial dimension \(2\)"):
        conv(x, w, (1, 1), ((1, 1),))
    with pytest.raises(ValueError, match="precision must be None, a tg.lax.Precision"):
        conv(x, w, (1, 1), "VALID", precision="fast")


# ---- reduce_window ----
def np_reduce_window(x: np.ndarray, init: float, op: str, k: Sequence[int], s: Sequence[int] | None = None,
                     padding: Any = "VALID", bd: Sequence[int] | None = None,
                     wd: Sequence[int] | None = None) -> np.ndarray:
    """XLA's ReduceWindow as JAX runs it: padding and base-dilation holes contribute nothing, init once per window."""
    n = x.ndim
    s, bd, wd = s or (1,) * n, bd or (1,) * n, wd or (1,) * n
    reduce, combine, identity = {"add": (np.sum, np.add, 0), "mul": (np.prod, np.multiply, 1),
                                 "max": (np.max, np.maximum, -np.inf), "min": (np.min, np.minimum, np.inf)}[op]
    span = [(kk - 1) * dd + 1 for kk, dd in zip(k, wd, strict=True)]
    pads = np_pads(padding, x.shape, span, s)
    xp = np_dilate_pad(x.astype(np.float64), range(n), bd, pads, identity)
    win = np_windows(xp, range(n), k, s, wd)
    return combine(init, reduce(win, axis=tuple(range(n, 2 * n))))


WINDOWS: dict[str, tuple[tuple[int, ...], tuple, dict[str, Any]]] = {   # shape, (init, op), keyword arguments
    "1d_sum": ((10,), (0.0, "add"), dict(window_dimensions=(3,))),
    "1d_prod_init": ((10,), (1.0, "mul"), dict(window_dimensions=(2,), padding=((1, 1),))),
    "1d_sum_init": ((6,), (2.5, "add"), dict(window_dimensions=(3,), window_strides=(2,), padding="SAME")),
    "nhwc_max_pool": ((2, 7, 6, 3), (-np.inf, "max"), dict(window_dimensions=(1, 3, 3, 1),
                                                           window_strides=(1, 2, 2, 1), padding="SAME")),
    "nchw_avg_sum": ((1, 2, 6, 7), (0.0, "add"), dict(window_dimensions=(1, 1, 2, 3), window_strides=(1, 1, 2, 2))),
    "min_same_lower": ((5, 6), (np.inf, "min"), dict(window_dimensions=(2, 2), padding="SAME_LOWER")),
    "window_dilation": ((9, 8), (-np.inf, "max"), dict(window_dimensions=(2, 3), window_strides=(2, 1),
                                                       padding="SAME", window_dilation=(3, 2))),
    "base_dilation": ((4, 5), (0.0, "add"), dict(window_dimensions=(3, 2), window_strides=(2, 1),
                                                 padding=((1, 0), (0, 1)), base_dilation=(2, 3))),
    "negative_padding": ((6, 5), (0.0, "add"), dict(window_dimensions=(2, 2), padding=((-1, 1), (2, -2)))),
    "whole_axis": ((3, 4), (-np.inf, "max"), dict(window_dimensions=(3, 4))),
}
OPS = {"add": lax.add, "mul": lax.mul, "max": lax.max, "min": lax.min}


@pytest.mark.parametrize("name", list(WINDOWS))
def test_reduce_window_matches_numpy(name: str) -> None:
    shape, (init, op), kw = WINDOWS[name]
    x = rand(*shape, seed=21)
    close(lax.reduce_window(T(x), init, OPS[op], **kw), np_reduce_window(x, init, op, kw["window_dimensions"],
                                                                         kw.get("window_strides"),
                                                                         kw.get("padding", "VALID"),
                                                                         kw.get("base_dilation"),
                                                                         kw.get("window_dilation")))


@pytest.mark.x64
@pytest.mark.parametrize("name", ["1d_sum_init", "nhwc_max_pool", "min_same_lower", "window_dilation",
                                  "base_dilation", "negative_padding", "1d_prod_init"])
def test_reduce_window_gradient(name: str) -> None:
    shape, (init, op), kw = WINDOWS[name]
    x = rand(*shape, seed=22) + np.arange(np.prod(shape)).reshape(shape) * 0.01   # no ties for max and min
    check_grads(lambda t: lax.reduce_window(t, init, OPS[op], **kw), x)



@pytest.mark.parametrize("op,window,stride", [("max", 3, 2), ("add", 3, 1), ("add", 3, 2), ("min", 2, 1)])
def test_overlapping_windows_give_their_gradient_back_tap_by_tap(op: str, window: int, stride: int) -> None:
    """The gradient of a reduce over overlapping windows is each tap's share placed back, one shifted copy per tap
    and output phase, interleaved: a 3 x 3 stride-2 max pool's on 32 x 32 x 32 x 16 took 186 ms (3.6 now), a 3 x 3
    average's 10 ms (stride 1; 0.9) and 138 ms (stride 2; 0.65): the tiled window view's gradient read it back
    through divisions and remainders. A max's ties share it equally, as JAX's."""
    from tgfx.devices.target import host_target
    from tgfx.ir.uop import UOp
    from tgfx.lowering import kernel_source
    from tgfx.lowering.inline import inline
    from tgfx.lowering.schedule import schedule
    rng = np.random.default_rng(5)
    x = np.round(rng.standard_normal((2, 9, 8, 3)) * 2).astype(np.float32)     # (rounded: many ties)
    init = {"max": -np.inf, "min": np.inf, "add": 0.0}[op]
    kw = dict(window_dimensions=(1, window, window, 1), window_strides=(1, stride, stride, 1), padding="SAME")
    y, pullback = tg.vjp(lambda t: lax.reduce_window(t, init, OPS[op], **kw), T(x))
    g = rng.standard_normal(y.shape).astype(np.float32)
    (gx,) = pullback(T(g))
    # its kernels do a few operations per tap of the input (the view's gradient: 3 to 9 times as many)
    sink = inline(UOp(tg.Ops.SINK, None, (gx.uop,)))
    linear, _ = schedule(list(sink.src))
    flops = sum(kernel_source(c.src[0], host_target()).flops for c in linear.src if c.src[0].op is tg.Ops.SINK)
    assert flops <= (15 if op != "add" else 3) * x.size * window * window, flops
    # the reference: every window's gradient to its elements (the max's or min's hits, an equal share each)
    pads = lax.padtype_to_pads(x.shape, kw["window_dimensions"], kw["window_strides"], "SAME")
    fill = init if op != "add" else 0.0
    xp = np.pad(x, pads, constant_values=fill)
    want = np.zeros_like(xp)
    for n, oy, ox, c in np.ndindex(*y.shape):
        sl = (n, slice(oy * stride, oy * stride + window), slice(ox * stride, ox * stride + window), c)
        win = xp[sl]
        share = np.ones_like(win) if op == "add" else (win == y.numpy()[n, oy, ox, c]).astype(np.float32)
        want[sl] += g[n, oy, ox, c] * share / (1 if op == "add" else share.sum())
    want = want[tuple(slice(lo, lo + size) for (lo, _), size in zip(pads, x.shape, strict=True))]
    np.testing.assert_allclose(gx.numpy(), want, rtol=1e-5, atol=1e-5)


@settings(max_examples=10)
@given(st.data())
def test_reduce_window_hypothesis(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(n))
    k = tuple(data.draw(st.integers(1, 3)) for _ in range(n))
    s = tuple(data.draw(st.integers(1, 2)) for _ in range(n))
    wd = tuple(data.draw(st.integers(1, 2)) for _ in range(n))
    bd = tuple(data.draw(st.integers(1, 2)) for _ in range(n))
    padding = data.draw(st.sampled_from(["SAME", "VALID", "SAME_LOWER"]))
    init, op = data.draw(st.sampled_from([(0.0, "add"), (-np.inf, "max"), (np.inf, "min"), (1.0, "mul")]))
    x = rand(*shape, seed=23).astype(np.float32)
    ref = np_reduce_window(x, init, op, k, s, padding, bd, wd)
    out = lax.reduce_window(tg.asarray(x), init, OPS[op], k, s, padding, bd, wd)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("computation,op", [(tnp.add, "add"), (lambda a, b: a + b, "add"), (tnp.maximum, "max"),
                                            (lambda a, b: tnp.minimum(b, a), "min"), (lambda a, b: a * b, "mul")])
def test_reduce_window_recognises_the_computation(computation: Callable, op: str) -> None:
    x = rand(4, 5, seed=24)
    init = {"add": 0.0, "max": -np.inf, "min": np.inf, "mul": 1.0}[op]
    close(lax.reduce_window(T(x), init, computation, (2, 2), (1, 2)),
          np_reduce_window(x, init, op, (2, 2), (1, 2)))


def test_reduce_window_keeps_integer_dtypes_and_takes_a_traced_init() -> None:
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = lax.reduce_window(tg.asarray(x), 0, lax.add, (2, 2), (1, 1), "SAME")
    assert out.dtype == tg.dtypes.int32
    np.testing.assert_array_equal(out.numpy(), np_reduce_window(x, 0, "add", (2, 2), (1, 1), "SAME"))
    f = tg.jit(lambda x, init: lax.reduce_window(x, init, lax.max, (2,), (1,)))
    np.testing.assert_allclose(f(tg.asarray(np.array([1.0, 5.0, 2.0, 0.0], np.float32)), 3.0).numpy(), [5, 5, 3])


def test_reduce_window_is_one_kernel() -> None:
    x = tg.asarray(rand(2, 16, 16, 4).astype(np.float32)).realize()
    tg.counters.reset()
    lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME").realize()
    assert tg.counters.kernel_count == 1


def test_reduce_window_with_no_complete_window_is_empty() -> None:
    out = lax.reduce_window(tnp.ones((2, 3)), 0.0, lax.add, (3, 2), (1, 1))
    assert out.shape == (0, 2)


def _fold_windows(xs: list[np.ndarray], inits: list, f: Any, k: tuple, s: tuple, pads: tuple, bd: tuple,
                  wd: tuple) -> list[np.ndarray]:
    """reduce_window by loops, as XLA defines it: each window's operand elements (not padding, not base-dilation
    holes) folded from the init values in row-major order."""
    shape = xs[0].shape
    dil = [(n - 1) * b + 1 for n, b in zip(shape, bd, strict=True)]
    span = [(kk - 1) * d + 1 for kk, d in zip(k, wd, strict=True)]
    outs = [(n + lo + hi - sp) // st + 1 for n, (lo, hi), sp, st in zip(dil, pads, span, s, strict=True)]
    res = [np.empty(outs, x.dtype) for x in xs]
    for o in np.ndindex(*outs):
        acc = list(inits)
        for j in np.ndindex(*k):
            pos = [oo * st + jj * d - lo for oo, st, jj, d, (lo, _) in zip(o, s, j, wd, pads, strict=True)]
            if all(0 <= p < n and p % b == 0 for p, n, b in zip(pos, dil, bd, strict=True)):
                src = tuple(p // b for p, b in zip(pos, bd, strict=True))
                acc = list(f(tuple(acc), tuple(x[src] for x in xs)))
        for r, a in zip(res, acc, strict=True):
            r[o] = a
    return res


def test_reduce_window_of_any_computation_and_of_tuples() -> None:
    """A computation other than the four monoids, and several operands reduced together (JAX's variadic
    reduce_window: an argmax pool of (value, index) pairs), folded over each window from the init values, padding
    and holes skipped, as XLA's loops; they were a TypeError. Differentiable, and under jit."""
    x = rand(4, 5).astype(np.float32)
    idx = np.arange(20, dtype=np.int32).reshape(4, 5)

    def amax(a: Any, b: Any) -> Any:
        take = b[0] > a[0]
        return tnp.where(take, b[0], a[0]), tnp.where(take, b[1], a[1])

    def amax_np(a: Any, b: Any) -> Any:
        return (b[0], b[1]) if b[0] > a[0] else a
    cases = [((2, 2), (1, 2), ((1, 0), (0, 1)), (1, 1), (1, 1)), ((2, 2), (1, 1), ((0, 0), (0, 0)), (2, 1), (1, 2))]
    for k, s, pads, bd, wd in cases:
        got = lax.reduce_window((T(x), T(idx)), (-np.inf, -1), amax, k, s, pads, bd, wd)
        want = _fold_windows([x, idx], [-np.inf, -1], amax_np, k, s, pads, bd, wd)
        np.testing.assert_allclose(got[0].numpy(), want[0], rtol=1e-6)
        np.testing.assert_array_equal(got[1].numpy(), want[1])
        prod1 = lax.reduce_window(T(x), 1.0, lambda a, b: a * (1 + b), k, s, pads, bd, wd)
        want = _fold_windows([x], [1.0], lambda a, b: (a[0] * (1 + b[0]),), k, s, pads, bd, wd)[0]
        np.testing.assert_allclose(prod1.numpy(), want, rtol=1e-5)
    lse = tg.jit(lambda t: lax.reduce_window(t, -np.inf, tnp.logaddexp, (2, 3), (1, 1), "SAME"))(x)
    want = _fold_windows([x], [-np.inf], lambda a, b: (np.logaddexp(a[0], b[0]),), (2, 3), (1, 1), ((0, 1), (1, 1)),
                         (1, 1), (1, 1))[0]
    np.testing.assert_allclose(lse.numpy(), want, rtol=1e-5)
    g = tg.grad(lambda t: lax.reduce_window(t, 0.0, lambda a, b: a + b * b, (2, 2), (1, 1)).sum())(T(x))
    counts = np.zeros((4, 5), np.float32)   # the windows each element is in
    for i, j in np.ndindex(3, 4):
        counts[i:i + 2, j:j + 2] += 1
    np.testing.assert_allclose(g.numpy(), 2 * x * counts, rtol=1e-5)


def test_reduce_window_errors_name_the_argument() -> None:
    x = T(rand(4, 5))
    with pytest.raises(TypeError, match="computation must be tg.lax.add, tg.lax.mul, tg.lax.max or tg.lax.min"):
        lax.reduce_window(x, 0.0, max, (2, 2))     # Python's max cannot compare traced values
    with pytest.raises(TypeError, match=r"init_value must be a tuple with one value per operand \(2\)"):
        lax.reduce_window((x, x), 0.0, lambda a, b: a, (2, 2))
    with pytest.raises(ValueError, match=r"window_dimensions must have one entry per axis of the operand \(2\)"):
        lax.reduce_window(x, 0.0, lax.add, (2,))
    with pytest.raises(ValueError, match=r"window_strides must have one entry per axis of the operand \(2\)"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1,))
    with pytest.raises(ValueError, match="window_dilation must be ints >= 1"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), window_dilation=(1, 0))
    with pytest.raises(ValueError, match="padding must be 'SAME', 'SAME_LOWER', 'VALID' or"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), padding=((1, 1),))
    with pytest.raises(ValueError, match="init_value must be a scalar"):
        lax.reduce_window(x, np.zeros(2), lax.add, (2, 2))


def test_padtype_to_pads() -> None:
    assert lax.padtype_to_pads((5, 5), (3, 2), (2, 1), "SAME") == [(1, 1), (0, 1)]
    assert lax.padtype_to_pads((5,), (2,), (1,), "SAME_LOWER") == [(1, 0)]
    assert lax.padtype_to_pads((5, 4), (3, 3), (1, 1), "VALID") == [(0, 0), (0, 0)]


def test_a_convolution_with_no_spatial_axes_is_a_matrix_product() -> None:
    # (N, C) x (O, C): lax.conv_general_dilated with no window axes is x @ w.T, as in JAX (it raised in the windows)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(tg.lax.conv_general_dilated(x, w, (), "VALID").numpy(), x @ w.T, rtol=1e-5)
    g = tg.grad(lambda w: tg.lax.conv_general_dilated(x, w, (), "VALID").sum())(tg.asarray(w))
    np.testing.assert_allclose(g.numpy(), np.broadcast_to(x.sum(0), w.shape), rtol=1e-5)
