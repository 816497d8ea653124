"""tg.scipy's signal, fft, integrate, ndimage, interpolate and cluster.vq against numpy references written out here
(n-d convolution by shifted sums, the DCT matrix, interpolation on an np.pad-ed array, Welch's periodograms), over
hypothesis-generated shapes; gradients by central differences (test_grad's `check_grads`), `jit` and `vmap`, and the
errors a user gets for modes and shapes that do not fit. Where scipy (or jax) is installed the same functions are
also compared with it; CI runs the numpy checks without either.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_grad import check_grads

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.scipy import fft as sfft
from tgfx.scipy import integrate, ndimage
from tgfx.scipy import signal as sg
from tgfx.scipy.cluster import vq
from tgfx.scipy.interpolate import RegularGridInterpolator

RNG = np.random.default_rng(0)


def T(x: np.ndarray) -> tg.Tensor:
    """x as a float32 (or complex64) Tensor."""
    x = np.asarray(x)
    return tnp.asarray(x.astype(np.complex64 if np.iscomplexobj(x) else np.float32))


def close(got: tg.Tensor, want: np.ndarray, tol: float = 2e-5) -> None:
    g, w = np.asarray(got.numpy()), np.asarray(want)
    assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
    scale = max(1.0, float(np.abs(w).max())) if w.size else 1.0
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


# ---- numpy references ----
def np_convolve(a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    """scipy.signal.convolve as sums of shifted copies of a, centred as scipy crops 'same' and 'valid'."""
    full = np.zeros(tuple(s1 + s2 - 1 for s1, s2 in zip(a.shape, b.shape, strict=True)), np.result_type(a, b))
    for j in np.ndindex(*b.shape):
        full[tuple(slice(i, i + s) for i, s in zip(j, a.shape, strict=True))] += a * b[j]
    out = {"full": full.shape, "same": a.shape,
           "valid": tuple(abs(s1 - s2) + 1 for s1, s2 in zip(a.shape, b.shape, strict=True))}[mode]
    return full[tuple(slice((f - o) // 2, (f - o) // 2 + o) for f, o in zip(full.shape, out, strict=True))]


def dct_matrix(n: int, norm: str | None) -> np.ndarray:
    """D with dct(x) = D @ x: 2 cos(pi k (2j + 1) / 2n), rows scaled for norm='ortho'."""
    k, j = np.arange(n)[:, None], np.arange(n)[None, :]
    d = 2 * np.cos(np.pi * k * (2 * j + 1) / (2 * n))
    if norm == "ortho":
        d[0] /= np.sqrt(4 * n)
        d[1:] /= np.sqrt(2 * n)
    return d


def np_resize(x: np.ndarray, n: int | None, axis: int) -> np.ndarray:
    if n is None:
        return x
    x = np.moveaxis(x, axis, -1)
    x = x[..., :n] if n <= x.shape[-1] else np.concatenate([x, np.zeros(x.shape[:-1] + (n - x.shape[-1],))], -1)
    return np.moveaxis(x, -1, axis)


_PAD_MODE = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "mirror": "reflect", "reflect": "symmetric"}


def np_map_coordinates(x: np.ndarray, coords: list[np.ndarray], order: int, mode: str, cval: float) -> np.ndarray:
    """JAX's map_coordinates on an input extended by np.pad with the mode's numpy name: every read lands inside."""
    p = int(max(np.abs(c).max() for c in coords)) + max(x.shape) + 2
    kw = {"constant_values": cval} if mode == "constant" else {}
    xp = np.pad(x.astype(np.float64), p, mode=_PAD_MODE[mode], **kw)
    cs = [c.astype(np.float64) + p for c in coords]
    if order == 0:
        return xp[tuple(np.floor(c + 0.5).astype(int) for c in cs)]   # halves away from zero (c > 0 here)
    lows = [np.floor(c).astype(int) for c in cs]
    out = 0.0
    for corner in itertools.product((0, 1), repeat=x.ndim):
        w = np.prod([(c - lo) if u else 1 - (c - lo) for c, lo, u in zip(cs, lows, corner, strict=True)], axis=0)
        out = out + w * xp[tuple(lo + u for lo, u in zip(lows, corner, strict=True))]
    return out


def np_detrend(x: np.ndarray, bp: list[int]) -> np.ndarray:
    """data minus a least-squares line (np.polyfit) on each piece between breakpoints, along the last axis."""
    points = sorted({0, *bp, x.shape[-1]})
    out = x.copy()
    for lo, hi in itertools.pairwise(points):
        t = np.arange(hi - lo, dtype=np.float64)
        for idx in np.ndindex(*x.shape[:-1]):
            seg = x[idx + (slice(lo, hi),)]
            out[idx + (slice(lo, hi),)] = seg - (np.polyval(np.polyfit(t, seg, 1), t) if hi - lo > 1 else seg)
    return out


def hann(n: int) -> np.ndarray:
    return np.sin(np.pi * np.arange(n) / n) ** 2


def np_welch(x: np.ndarray, nperseg: int, noverlap: int, fs: float) -> tuple[np.ndarray, np.ndarray]:
    """Welch's one-sided density: the mean periodogram of mean-removed, Hann-windowed segments."""
    w = hann(nperseg)
    starts = range(0, x.shape[-1] - nperseg + 1, nperseg - noverlap)
    segs = np.stack([x[..., s:s + nperseg] for s in starts], axis=-2)
    segs = segs - segs.mean(-1, keepdims=True)
    p = np.abs(np.fft.rfft(segs * w, axis=-1)) ** 2 / (fs * np.sum(w * w))
    p[..., 1:nperseg // 2 + (nperseg % 2)] *= 2
    return np.fft.rfftfreq(nperseg, 1 / fs), p.mean(-2)


def np_stft(x: np.ndarray, nperseg: int) -> np.ndarray:
    """scipy's default stft: zeros around, zero-padded to whole segments, Hann windows overlapping by half."""
    w, step = hann(nperseg), nperseg - nperseg // 2
    x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(nperseg // 2, nperseg // 2)])
    x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, (-(x.shape[-1] - nperseg) % step) % nperseg)])
    segs = np.stack([x[..., s:s + nperseg] for s in range(0, x.shape[-1] - nperseg + 1, step)], axis=-1)
    return np.fft.rfft(segs * w[:, None], axis=-2) / w.sum()


# ---- convolution and correlation ----
shapes_1_2d = st.integers(1, 2).flatmap(lambda nd: st.tuples(
    st.lists(st.integers(1, 5), min_size=nd, max_size=nd), st.lists(st.integers(1, 5), min_size=nd, max_size=nd)))


@settings(max_examples=15)
@given(shapes_1_2d, st.sampled_from(["full", "same", "valid"]), st.integers(0, 2 ** 16))
def test_convolve_and_correlate_match_numpy(shapes: tuple[list[int], list[int]], mode: str, seed: int) -> None:
    s1, s2 = shapes
    covers = all(a >= b for a, b in zip(s1, s2, strict=True)) or all(a <= b for a, b in zip(s1, s2, strict=True))
    if mode == "valid" and not covers:
        s2, covers = s1, True   # 'valid' needs one input covering the other
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(s1), rng.standard_normal(s2)
    if covers:   # the direct convolution needs it in every mode, as JAX's
        close(sg.convolve(T(a), T(b), mode), np_convolve(a, b, mode), 1e-4)
        close(sg.correlate(T(a), T(b), mode), np_convolve(a, np.flip(b), mode), 1e-4)
    if not covers or seed % 3 == 0:   # the FFT path compiles slowly: some of the examples
        close(sg.fftconvolve(T(a), T(b), mode), np_convolve(a, b, mode), 1e-4)


def test_convolve_1d_is_numpy_convolve_and_complex_correlate() -> None:
    a, b = RNG.standard_normal(7), RNG.standard_normal(3)
    for mode in ("full", "same", "valid"):
        close(sg.convolve(T(a), T(b), mode), np.convolve(a, b, mode), 1e-5)
        close(sg.convolve(T(a), T(b), mode, method="fft"), np.convolve(a, b, mode), 1e-5)
    ac, bc = a + 1j * RNG.standard_normal(7), b + 1j * RNG.standard_normal(3)
    close(sg.correlate(T(ac), T(bc)), np.correlate(ac, bc, "full"), 1e-5)    # sum_n a[n + k] conj(b[n])
    close(sg.fftconvolve(T(ac), T(bc), "same"), np.convolve(ac, bc, "same"), 1e-5)


def test_convolve2d_correlate2d_and_fftconvolve_axes() -> None:
    a, b, big = RNG.standard_normal((5, 4)), RNG.standard_normal((2, 3)), RNG.standard_normal((6, 6))
    for mode in ("full", "same", "valid"):
        close(sg.convolve2d(T(a), T(b), mode), np_convolve(a, b, mode), 1e-5)
        if mode != "same":
            close(sg.correlate2d(T(a), T(b), mode), np_convolve(a, np.flip(b), mode), 1e-5)
    # scipy's correlate2d 'same' centres the other way from correlate's: the crop starts ceil((full - out) / 2) in
    full = np_convolve(a, np.flip(b), "full")
    close(sg.correlate2d(T(a), T(b), "same"), full[1:6, 1:5], 1e-5)
    # in2 larger: scipy's correlate2d is the flipped correlation of (in2, in1) for 'full' and 'valid'
    close(sg.correlate2d(T(b), T(big), "full"), np.flip(np_convolve(big, np.flip(b), "full")), 1e-5)
    x, k = RNG.standard_normal((3, 8, 2)), RNG.standard_normal((3, 3, 2))
    want = np.stack([np.stack([np.convolve(x[i, :, j], k[i, :, j], "same") for j in range(2)], -1) for i in range(3)])
    close(sg.fftconvolve(T(x), T(k), "same", axes=1), want, 1e-5)


@pytest.mark.x64
def test_convolution_gradients() -> None:
    a, b = RNG.standard_normal((4, 5)), RNG.standard_normal((2, 3))
    check_grads(lambda x, y: sg.convolve(x, y, "same"), a, b)
    check_grads(lambda x, y: sg.correlate2d(x, y, "valid"), a, b)
    check_grads(lambda x, y: sg.fftconvolve(x, y, "full"), a[0], b[0])


def test_convolve_under_jit_and_vmap() -> None:
    a, b = RNG.standard_normal((3, 6)), RNG.standard_normal(3)
    traces = []

    @tg.jit
    def f(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        traces.append(1)
        return sg.convolve(x, y, "valid")

    want = np.stack([np.convolve(r, b, "valid") for r in a])
    close(tg.vmap(f, in_axes=(0, None))(T(a), T(b)), want, 1e-5)
    close(tg.vmap(lambda x: sg.fftconvolve(x, T(b)))(T(a)), np.stack([np.convolve(r, b) for r in a]), 1e-5)
    close(f(T(a[0]), T(b)), want[0], 1e-5)
    close(f(T(a[1]), T(b)), want[1], 1e-5)
    assert len(traces) == 2   # once under vmap, once for the 1-d shapes: a second call does not retrace


# ---- detrend, trapezoid ----
@settings(max_examples=12)
@given(st.integers(2, 12), st.lists(st.integers(0, 12), max_size=2), st.sampled_from([-1, 0]), st.integers(0, 99))
def test_detrend_matches_polyfit(n: int, bp: list[int], axis: int, seed: int) -> None:
    bp = [min(p, n) for p in bp] if axis == -1 else []
    x = np.random.default_rng(seed).standard_normal((2, n) if axis == -1 else (n, 2))
    want = np_detrend(x if axis == -1 else x.T, bp)
    close(sg.detrend(T(x), axis=axis, bp=bp), want if axis == -1 else want.T, 1e-4)
    close(sg.detrend(T(x), axis=axis, type="constant"), x - x.mean(axis, keepdims=True), 1e-5)


def test_trapezoid_values_and_gradients() -> None:
    y, x = RNG.standard_normal((3, 7)), np.cumsum(RNG.uniform(0.1, 1.0, 7))
    close(integrate.trapezoid(T(y), T(x)), np.trapezoid(y, x, axis=-1), 1e-5)
    close(integrate.trapezoid(T(y), dx=0.5, axis=0), np.trapezoid(y, dx=0.5, axis=0), 1e-5)
    assert integrate.trapezoid(tnp.asarray([1, 2, 3, 2, 3, 2, 1])).item() == 13.0
    grid = tnp.linspace(0, np.pi, 2001)
    assert abs(integrate.trapezoid(tnp.sin(grid), grid).item() - 2.0) < 1e-5     # closed form: 2
    g = tg.grad(lambda v: integrate.trapezoid(v, dx=2.0))(T(y[0]))                  # weights dx/2, dx, ..., dx, dx/2
    close(g, np.array([1.0] + [2.0] * 5 + [1.0]), 1e-6)


@pytest.mark.x64
def test_trapezoid_gradient_in_x() -> None:
    check_grads(lambda y, x: integrate.trapezoid(y, x), RNG.standard_normal((2, 6)), np.cumsum(RNG.uniform(0.1, 1, 6)))


# ---- DCT ----
@settings(max_examples=10)
@given(st.integers(1, 9), st.sampled_from([None, 3, 11]), st.sampled_from([None, "backward", "ortho"]),
       st.integers(0, 99))
def test_dct_and_idct_match_the_dct_matrix(n: int, size: int | None, norm: str | None, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((2, n))
    m = n if size is None else size
    mat = dct_matrix(m, "ortho" if norm == "ortho" else None)
    xr = np_resize(x, size, -1)
    close(sfft.dct(T(x), n=size, norm=norm), xr @ mat.T, 1e-4)
    close(sfft.idct(T(x), n=size, norm=norm), xr @ np.linalg.inv(mat).T, 1e-4)
    close(sfft.dct(T(x.T), n=size, norm=norm, axis=0), (xr @ mat.T).T, 1e-4)


def test_dctn_idctn_and_complex() -> None:
    x = RNG.standard_normal((3, 4, 5))
    d1, d2 = dct_matrix(4, "ortho"), dct_matrix(5, "ortho")
    want = np.einsum("ij,kl,ajl->aik", d1, d2, x)
    close(sfft.dctn(T(x), axes=(1, 2), norm="ortho"), want, 1e-4)
    close(sfft.dctn(T(x), s=(4, 5), norm="ortho"), want, 1e-4)                   # the last len(s) axes
    close(sfft.idctn(sfft.dctn(T(x)), s=None), x, 1e-4)                           # all axes, backward norm
    d3 = dct_matrix(2, None)
    close(sfft.dctn(T(x), s=[2], axes=[0]), np.einsum("ij,jkl->ikl", d3, x[:2]), 1e-4)
    z = x[0] + 1j * x[1]
    close(sfft.dct(T(z)), z @ dct_matrix(5, None).T, 1e-4)
    assert sfft.dct(tnp.asarray([1, 2, 3])).dtype == tg.dtypes.float32
    close(tg.jit(lambda v: sfft.idct(sfft.dct(v, norm="ortho"), norm="ortho"))(T(x)), x, 1e-5)
    g = tg.grad(lambda v: (sfft.dct(v) * tnp.arange(5.0)).sum())(T(x[0, 0]))      # linear: D^T w
    close(g, dct_matrix(5, None).T @ np.arange(5.0), 1e-5)


# ---- map_coordinates ----
@settings(max_examples=20)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.sampled_from([0, 1]),
       st.sampled_from(list(_PAD_MODE)), st.integers(0, 2 ** 16))
def test_map_coordinates_matches_padded_numpy(shape: list[int], order: int, mode: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    coords = [rng.uniform(-3, s + 2, size=(5,)) for s in shape]
    coords[0][0] = 0.5   # a half: rounded away from zero
    got = ndimage.map_coordinates(T(x), [T(c) for c in coords], order, mode, cval=1.5)
    close(got, np_map_coordinates(x, [c.astype(np.float32) for c in coords], order, mode, 1.5), 1e-4)


def test_map_coordinates_integers_jit_and_closed_form() -> None:
    img = np.arange(12.0).reshape(3, 4)
    close(ndimage.map_coordinates(T(img), [T([0.5, 1.5]), T([1.5, 2.5])], order=1), np.array([3.5, 8.5]))
    # linear interpolation of a linear function is exact inside the grid
    c0, c1 = RNG.uniform(0, 2, 6), RNG.uniform(0, 3, 6)
    f = tg.jit(lambda a, u, v: ndimage.map_coordinates(a, [u, v], 1, "nearest"))
    close(f(T(img), T(c0), T(c1)), 4 * c0 + c1, 1e-5)
    # an integer input is rounded and keeps its dtype; integer coordinates read the entries
    got = ndimage.map_coordinates(tnp.asarray(np.arange(6, dtype=np.int32).reshape(2, 3)), [T([0.5, 0.2]),
                                                                                           T([0.5, 1.5])], 1)
    assert got.dtype == tg.dtypes.int32 and got.tolist() == [2, 2]
    idx = ndimage.map_coordinates(T(img), [tnp.asarray([0, 2]), tnp.asarray([3, 1])], 1)
    close(idx, np.array([3.0, 9.0]))
    # coordinates broadcast together
    close(ndimage.map_coordinates(T(img), [T([[1.0], [2.0]]), T([0.0, 3.0])], 0), np.array([[4.0, 7.0], [8.0, 11.0]]))


@pytest.mark.x64
def test_map_coordinates_gradient() -> None:
    x = RNG.standard_normal((3, 4))
    c0, c1 = RNG.uniform(-0.8, 2.8, 5), RNG.uniform(-0.8, 3.8, 5)
    check_grads(lambda a, u, v: ndimage.map_coordinates(a, [u, v], 1, "mirror"), x, c0, c1)
    check_grads(lambda a: ndimage.map_coordinates(a, [tnp.asarray(c0), tnp.asarray(c1)], 0, "constant"), x)


# ---- RegularGridInterpolator ----
def test_regular_grid_interpolator_linear_nearest_and_fill() -> None:
    gx, gy = np.sort(RNG.uniform(0, 3, 5)), np.sort(RNG.uniform(-1, 1, 6))
    bilinear = lambda x, y: 1 + 2 * x - 3 * y + x * y    # reproduced exactly by multilinear interpolation
    values = bilinear(gx[:, None], gy[None, :])
    q = np.stack([RNG.uniform(gx[0], gx[-1], 7), RNG.uniform(gy[0], gy[-1], 7)], -1)
    f = RegularGridInterpolator((T(gx), T(gy)), T(values))
    close(f(T(q)), bilinear(q[:, 0], q[:, 1]), 1e-5)
    close(f((T(q[:, 0]), T(q[:, 1]))), bilinear(q[:, 0], q[:, 1]), 1e-5)           # a tuple of coordinate arrays
    near = values[np.abs(gx[:, None] - q[None, :, 0]).argmin(0), np.abs(gy[:, None] - q[None, :, 1]).argmin(0)]
    close(f(T(q), method="nearest"), near, 1e-6)
    out = np.array([[gx[-1] + 1.0, 0.0], [1.0, gy[0] - 0.5]])
    assert np.isnan(f(T(out)).numpy()).all()
    close(RegularGridInterpolator((T(gx), T(gy)), T(values), fill_value=-7.0)(T(out)), np.array([-7.0, -7.0]))
    close(RegularGridInterpolator((T(gx), T(gy)), T(values), fill_value=None)(T(out)), bilinear(out[:, 0], out[:, 1]),
          1e-4)                                                                          # extrapolated
    # trailing value axes and leading query axes
    f2 = RegularGridInterpolator((T(gx),), T(np.stack([values[:, 0], 2 * values[:, 0]], -1)))
    got = f2(T(q[:6, :1].reshape(2, 3, 1)))
    want = np.interp(q[:6, 0], gx, values[:, 0]).reshape(2, 3)
    close(got, np.stack([want, 2 * want], -1), 1e-5)


def test_regular_grid_interpolator_is_a_pytree_under_jit_and_grad() -> None:
    g = np.linspace(0.0, 1.0, 4)
    values = RNG.standard_normal((4, 4))
    q = np.array([[0.3, 0.7], [0.9, 0.1]])
    f = RegularGridInterpolator((T(g), T(g)), T(values))
    call = tg.jit(lambda interp, x: interp(x))
    close(call(f, T(q)), f(T(q)).numpy(), 1e-6)
    dv = tg.grad(lambda v: RegularGridInterpolator((T(g), T(g)), v)(T(q)).sum())(T(values))
    # each query spreads weight 1 over its cell's corners
    assert abs(float(dv.numpy().sum()) - 2.0) < 1e-5 and (dv.numpy() >= 0).all()


# ---- vq ----
@settings(max_examples=12)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 4), st.integers(0, 99))
def test_vq_matches_brute_force(m: int, k: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    obs, book = rng.standard_normal((m, n)), rng.standard_normal((k, n))
    dist = np.sqrt(((obs[:, None, :] - book[None]) ** 2).sum(-1))
    code, d = vq.vq(T(obs), T(book))
    assert code.dtype == tg.dtypes.int32 and code.tolist() == dist.argmin(1).tolist()
    close(d, dist.min(1), 1e-5)


def test_vq_one_dimensional_and_gradient() -> None:
    code, d = vq.vq(T([0.1, 2.9, 5.0]), T([0.0, 3.0]))
    assert code.tolist() == [0, 1, 1]
    close(d, np.array([0.1, 0.1, 2.0]), 1e-6)
    obs, book = T([[1.0, 1.0]]), T([[0.0, 0.0], [4.0, 4.0]])
    close(tg.grad(lambda o: vq.vq(o, book)[1].sum())(obs), np.full((1, 2), 1 / np.sqrt(2)), 1e-6)


# ---- spectral analysis ----
@settings(max_examples=5)
@given(st.integers(40, 70), st.sampled_from([8, 16, 15]), st.integers(0, 99))
def test_welch_and_stft_match_numpy(n: int, nperseg: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((2, n))
    f, p = sg.welch(T(x), fs=4.0, nperseg=nperseg)
    fw, pw = np_welch(x, nperseg, nperseg // 2, 4.0)
    close(f, fw, 1e-6)
    close(p, pw, 1e-4)
    f, t, z = sg.stft(T(x), nperseg=nperseg)
    zw = np_stft(x, nperseg)
    close(z, zw, 1e-4)
    close(t, np.arange(zw.shape[-1]) * (nperseg - nperseg // 2), 1e-6)
    assert z.dtype == tg.dtypes.complex64
    t2, x2 = sg.istft(z, nperseg=nperseg)                                             # the round trip
    close(x2[..., :n], x, 1e-4)


def test_csd_welch_options_and_jit() -> None:
    x, y = RNG.standard_normal((2, 128)), RNG.standard_normal((2, 128))
    _, pxy = sg.csd(T(x), T(y), nperseg=32)
    _, pxx = sg.csd(T(x), None, nperseg=32)
    _, pw = sg.welch(T(x), nperseg=32)
    close(pxx, pw.numpy(), 1e-6)
    close(sg.csd(T(x), T(x), nperseg=32)[1], pw.numpy().astype(np.complex64), 1e-5)     # csd(x, x) = welch(x)
    assert pxy.dtype == tg.dtypes.complex64 and pxy.shape == (2, 17)
    # a sinusoid's power is at its frequency: fs / 8 here
    s = np.sin(2 * np.pi * np.arange(512) / 8)
    f, ps = sg.welch(T(s), fs=1.0, nperseg=64, scaling="spectrum")
    assert abs(float(f.numpy()[int(np.argmax(ps.numpy()))]) - 1 / 8) < 1e-6
    jw = tg.jit(lambda v, fs: sg.welch(v, fs=fs, nperseg=32, average="median"))
    f1, p1 = jw(T(x), tnp.asarray(2.0))
    f2, p2 = sg.welch(T(x), fs=2.0, nperseg=32, average="median")
    close(f1, f2.numpy(), 1e-6)
    close(p1, p2.numpy(), 1e-5)
    g = tg.grad(lambda v: sg.welch(v, nperseg=32)[1].sum())(T(x[0]))
    assert g.shape == (128,) and np.isfinite(g.numpy()).all()


# ---- against scipy / jax where installed ----
def test_against_scipy() -> None:
    ss = pytest.importorskip("scipy.signal")
    sfft_ref = pytest.importorskip("scipy.fft")
    si = pytest.importorskip("scipy.interpolate")
    a, b = RNG.standard_normal((5, 4)), RNG.standard_normal((3, 2)) + 1j * RNG.standard_normal((3, 2))
    for mode in ("full", "same", "valid"):
        close(sg.correlate2d(T(b), T(a), mode), ss.correlate2d(b, a, mode), 1e-5)
        close(sg.correlate(T(a), T(b), mode), ss.correlate(a, b, mode), 1e-5)
    x = RNG.standard_normal((2, 120))
    close(sg.detrend(T(x), bp=[50, 90]), ss.detrend(x, bp=[50, 90]), 1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = {"nperseg": 40, "window": ("tukey", 0.3), "return_onesided": False, "scaling": "spectrum"}
        close(sg.welch(T(x), **kw)[1], ss.welch(x, **kw)[1], 1e-4)
        kw = {"nperseg": 50, "noverlap": 10, "nfft": 64, "detrend": "linear", "average": "median"}
        close(sg.csd(T(x), T(x[::-1]), **kw)[1], ss.csd(x, x[::-1], **kw)[1], 1e-4)
        close(sg.stft(T(x), nperseg=32, boundary="odd")[2], ss.stft(x, nperseg=32, boundary="odd")[2], 1e-4)
        z = ss.stft(x, nperseg=31, nfft=40, boundary="even")[2]
        close(sg.istft(T(z), nperseg=31, nfft=40)[1], ss.istft(z, nperseg=31, nfft=40)[1], 1e-4)
    y = RNG.standard_normal((4, 6))
    close(sfft.dctn(T(y), s=(3, 8), norm="ortho"), sfft_ref.dctn(y, s=(3, 8), norm="ortho"), 1e-4)
    close(sfft.idct(T(y), n=9, axis=0), sfft_ref.idct(y, n=9, axis=0), 1e-4)
    g = (np.array([0.0, 0.5, 2.0]), np.array([-1.0, 0.0, 1.0, 3.0]))
    q = RNG.uniform(-1.5, 3.5, (8, 2))
    for method in ("linear", "nearest"):
        want = si.RegularGridInterpolator(g, y[:3, :4], method=method, bounds_error=False)(q)
        close(RegularGridInterpolator(tuple(map(T, g)), T(y[:3, :4]), method=method)(T(q)), want, 1e-5)


def test_map_coordinates_against_jax() -> None:
    jax = pytest.importorskip("jax")
    from jax.scipy import ndimage as jnd
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    coords = [RNG.uniform(-5, 8, 9).astype(np.float32) for _ in range(2)]
    for order, mode in [(0, "wrap"), (1, "constant"), (1, "wrap"), (1, "mirror"), (1, "reflect")]:
        want = np.asarray(jnd.map_coordinates(x, [jax.numpy.asarray(c) for c in coords], order, mode, cval=-1.0))
        close(ndimage.map_coordinates(T(x), [T(c) for c in coords], order, mode, cval=-1.0), want, 1e-5)


# ---- errors ----
_img, _k = T(np.ones((4, 4))), T(np.ones((2, 2)))
ERRORS = [
    (lambda: sg.convolve(_img, _k, "bogus"), ValueError, "mode must be one of"),
    (lambda: sg.convolve(_img, _k, method="winograd"), ValueError, "method must be"),
    (lambda: sg.convolve(_img, T(np.ones(3))), ValueError, r"same number of dimensions.*\(4, 4\)"),
    (lambda: sg.convolve(T(np.ones((3, 1))), T(np.ones((1, 3)))), ValueError, "at least as large"),
    (lambda: sg.convolve2d(T(np.ones(3)), T(np.ones(3))), ValueError, "must be 2-d"),
    (lambda: sg.convolve2d(_img, _k, boundary="wrap"), NotImplementedError, "boundary='fill'"),
    (lambda: sg.fftconvolve(T(np.ones((2, 5))), T(np.ones((3, 2))), axes=1), ValueError, "same length"),
    (lambda: sg.detrend(_img, type="cubic"), ValueError, "type must be"),
    (lambda: sg.detrend(_img, bp=[9]), ValueError, "breakpoints"),
    (lambda: sg.welch(T(np.ones(64)), nperseg=16, nfft=8), ValueError, "nfft"),
    (lambda: sg.welch(T(np.ones(64)), nperseg=16, noverlap=16), ValueError, "noverlap"),
    (lambda: sg.welch(T(np.ones(64)), nperseg=16, average="mode"), ValueError, "average"),
    (lambda: sg.welch(T(np.ones(64)), window=np.ones((2, 8), np.float32)), ValueError, "window must be 1-d"),
    (lambda: sg.stft(T(np.ones(64)), nperseg=16, boundary="periodic"), ValueError, "boundary must be"),
    (lambda: sg.istft(T(np.ones(8))), ValueError, "at least 2 axes"),
    (lambda: ndimage.map_coordinates(_img, [T([1.0]), T([1.0])], 1, "grid-wrap"), NotImplementedError, "mode"),
    (lambda: ndimage.map_coordinates(_img, [T([1.0]), T([1.0])], 3), NotImplementedError, "order=3"),
    (lambda: ndimage.map_coordinates(_img, [T([1.0])], 1), ValueError, r"input.ndim.*\(4, 4\)"),
    (lambda: sfft.dct(_img, type=1), NotImplementedError, "type=1"),
    (lambda: sfft.idct(_img, norm="forward"), ValueError, "norm='forward'"),
    (lambda: sfft.dctn(_img, s=(2, 2, 2)), ValueError, "s must have at most"),
    (lambda: RegularGridInterpolator((_k[0],), _img, method="cubic"), ValueError, "method='cubic'"),
    (lambda: RegularGridInterpolator((_img[0],), _img, bounds_error=True), NotImplementedError, "bounds_error"),
    (lambda: RegularGridInterpolator((_k[0],), _img), ValueError, r"points\[0\]"),
    (lambda: RegularGridInterpolator((_img[0],), _img, fill_value=1j), ValueError, "fill_value"),
    (lambda: RegularGridInterpolator((_img[0],), _img)(T(np.ones((3, 2)))), ValueError, "last axis"),
    (lambda: vq.vq(_img, _k[0]), ValueError, "same rank"),
    (lambda: vq.vq(_img, _k), ValueError, "features"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_name_the_problem(case: int) -> None:
    fn, exc, pattern = ERRORS[case]
    with pytest.raises(exc, match=pattern):
        fn()
