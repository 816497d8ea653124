"""tg.image (resize, scale_and_translate) against a numpy reference written out here from the definitions: each output
pixel's centre mapped back into the input, the kernel evaluated at its distance to each input pixel's centre (widened
by 1 / scale when an antialiased filter shrinks), the weights normalised, outputs sampling outside the image zero; a
loop over output pixels, in float64. Also identities (identity resize, a linear ramp stays a ramp), gradients (the
gradient of a sum is the column sums of the weight matrix; traced scale and translation by central differences),
`jit`, `vmap`, dtypes and the errors a user gets. Where jax is installed the same calls are compared with
jax.image; CI runs the numpy checks without it.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import tgfx as tg
import tgfx.numpy as tnp
from tgfx.image import ResizeMethod

RNG = np.random.default_rng(0)
METHODS = ["nearest", "linear", "lanczos3", "lanczos5", "cubic", "cubic-pytorch", "area"]
FILTERS = [m for m in METHODS if m != "nearest"]


# ---- the numpy reference ----
def keys_cubic(x: float, a: float) -> float:
    """Keys' cubic convolution kernel with parameter a at distance x >= 0."""
    if x < 1:
        return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
    if x < 2:
        return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
    return 0.0


KERNELS = {
    "linear": lambda x: max(0.0, 1.0 - x),
    "lanczos3": lambda x: float(np.sinc(x) * np.sinc(x / 3)) if x < 3 else 0.0,
    "lanczos5": lambda x: float(np.sinc(x) * np.sinc(x / 5)) if x < 5 else 0.0,
    "cubic": lambda x: keys_cubic(x, -0.5),
}


def ref_weights(n_in: int, n_out: int, scale: float, translation: float, method: str, antialias: bool) -> np.ndarray:
    """The (n_out, n_in) matrix W with output = W @ input along one axis, one output pixel at a time."""
    w = np.zeros((n_out, n_in))
    for o in range(n_out):
        centre = (o + 0.5 - translation) / scale     # output pixel o's centre, in input coordinates
        if method == "nearest":
            w[o, (2 * o + 1) * n_in // (2 * n_out)] = 1.0    # the input cell holding the centre, in exact integers
            continue
        if method == "area":    # how much of each input cell [i, i + 1) the output cell covers
            lo, hi = (o - translation) / scale, (o + 1 - translation) / scale
            row = np.array([max(0.0, min(hi, i + 1) - max(lo, i)) for i in range(n_in)])
        elif method == "cubic-pytorch" and not antialias:   # the edge pixels repeated 2 pixels past each edge
            for i in range(-2, n_in + 2):
                w[o, min(max(i, 0), n_in - 1)] += keys_cubic(abs(centre - (i + 0.5)), -0.75)
            w[o] = w[o] / w[o].sum() if abs(w[o].sum()) > 1e-4 else 0.0    # far outside: no weight at all
            continue
        else:
            kernel = KERNELS["cubic" if method == "cubic-pytorch" else method]
            width = max(1.0 / scale, 1.0) if antialias else 1.0
            row = np.array([kernel(abs(centre - (i + 0.5)) / width) for i in range(n_in)])
        if 0 <= centre <= n_in and abs(row.sum()) > 1e-4:
            w[o] = row / row.sum()
    return w


def ref_apply(x: np.ndarray, axes: list[int], shape: tuple[int, ...], scales: list[float],
              translations: list[float], method: str, antialias: bool) -> np.ndarray:
    out = x.astype(np.float64)
    for a, s, t in zip(axes, scales, translations, strict=True):
        w = ref_weights(out.shape[a], shape[a], s, t, method, antialias)
        out = np.moveaxis(np.tensordot(w, np.moveaxis(out, a, 0), axes=1), 0, a)
    return out


def ref_resize(x: np.ndarray, shape: tuple[int, ...], method: str, antialias: bool = True) -> np.ndarray:
    axes = [a for a in range(x.ndim) if x.shape[a] != shape[a]]
    return ref_apply(x, axes, shape, [shape[a] / x.shape[a] for a in axes], [0.0] * len(axes), method, antialias)


def close(got: tg.Tensor, want: np.ndarray, tol: float = 2e-5) -> None:
    g = np.asarray(got)
    assert g.shape == want.shape, f"shape {g.shape}, expected {want.shape}"
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max(initial=0))))


# up and down along each axis; the NHWC cases keep batch and channels
CASES = [((5, 7), (11, 3)), ((9, 4), (2, 10)), ((2, 6, 5, 3), (2, 13, 2, 3)), ((2, 8, 3, 3), (2, 3, 7, 3))]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_matches_reference(method: str, antialias: bool) -> None:
    for shape_in, shape_out in CASES:
        x = RNG.standard_normal(shape_in).astype(np.float32)
        got = tg.image.resize(tnp.asarray(x), shape_out, method, antialias=antialias)
        assert got.dtype == tg.dtypes.float32
        close(got, ref_resize(x, shape_out, method, antialias))


@pytest.mark.parametrize("method", FILTERS)
def test_scale_and_translate_matches_reference(method: str) -> None:
    x = RNG.standard_normal((2, 6, 5, 3)).astype(np.float32)
    # no output centre lands exactly on the image's edge, where float rounding decides whether it is inside
    for scale, translation in [((0.7, 1.9), (0.35, -1.2)), ((2.0, 0.5), (1.0, 0.0)), ((1.0, 1.0), (0.5, 2.5))]:
        for antialias in (True, False):
            want = ref_apply(x, [1, 2], (2, 8, 4, 3), list(scale), list(translation), method, antialias)
            close(tg.image.scale_and_translate(tnp.asarray(x), (2, 8, 4, 3), (1, 2), scale, translation, method,
                                               antialias=antialias), want)
            # Tensors for scale and translation: the weights are computed by tnp ops instead of on the host
            close(tg.image.scale_and_translate(tnp.asarray(x), (2, 8, 4, 3), (-3, -2), tnp.asarray(scale),
                                               tnp.asarray(translation), method, antialias=antialias), want)


def test_align_corners_recipe() -> None:
    """The docstring's align_corners recipe puts the corners of the input on the corners of the output."""
    x = np.arange(4.0, dtype=np.float32)
    scale = (7 - 1) / (4 - 1)
    got = tg.image.scale_and_translate(tnp.asarray(x), (7,), (0,), (scale,), (0.5 * (1 - scale),), "linear")
    close(got, np.linspace(0.0, 3.0, 7))


@pytest.mark.parametrize("method", METHODS)
def test_identity_resize_returns_the_input(method: str) -> None:
    x = tnp.asarray(RNG.standard_normal((2, 5, 3)).astype(np.float32))
    got = tg.image.resize(x, x.shape, method)
    assert got.dtype == x.dtype and np.array_equal(np.asarray(got), np.asarray(x))


def test_linear_upsampling_keeps_a_ramp() -> None:
    n, m = 6, 17
    ramp = 3.0 * np.arange(n, dtype=np.float32) - 2.0
    got = np.asarray(tg.image.resize(tnp.asarray(ramp), (m,), "linear"))
    positions = (np.arange(m) + 0.5) * n / m - 0.5   # where each output samples the input
    interior = (positions >= 0) & (positions <= n - 1)
    assert interior.sum() >= m - 4
    np.testing.assert_allclose(got[interior], 3.0 * positions[interior] - 2.0, rtol=1e-5, atol=1e-5)
    # beyond the outermost centres the (normalised) triangle kernel sees one pixel: the edge value
    np.testing.assert_allclose(got[~interior], np.where(positions[~interior] < 0, ramp[0], ramp[-1]), rtol=1e-6)


def test_nearest_picks_the_cell_under_the_centre() -> None:
    x = np.arange(4.0, dtype=np.float32).reshape(1, 4)
    assert np.asarray(tg.image.resize(tnp.asarray(x), (1, 2), "nearest")).tolist() == [[1.0, 3.0]]
    assert np.asarray(tg.image.resize(tnp.asarray(x), (1, 8), "nearest")).tolist() == [[0, 0, 1, 1, 2, 2, 3, 3]]


@pytest.mark.parametrize("method", ["linear", "lanczos3", "cubic", "area"])
def test_gradient_of_sum_is_column_sums(method: str) -> None:
    """sum(W x) has gradient W^T 1, the column sums of W; along two axes it is the outer product of both."""
    x = tnp.asarray(RNG.standard_normal((7, 4)).astype(np.float32))
    g = tg.grad(lambda im: tnp.sum(tg.image.resize(im, (3, 9), method)))(x)
    rows = ref_weights(7, 3, 3 / 7, 0.0, method, True).sum(axis=0)
    cols = ref_weights(4, 9, 9 / 4, 0.0, method, True).sum(axis=0)
    close(g, np.outer(rows, cols), 1e-5)


@pytest.mark.x64
def test_gradient_in_traced_scale_and_translation() -> None:
    """Tensors for scale and translation make the result differentiable in them; checked by central differences
    of the reference (float64, where a difference of 1e-6 resolves)."""
    x = RNG.standard_normal((6, 5))
    probe = RNG.standard_normal((8, 4))
    scale, translation = np.array([1.3, 0.7]), np.array([0.4, -0.2])

    def f(s: tg.Tensor, t: tg.Tensor) -> tg.Tensor:
        return tnp.sum(probe * tg.image.scale_and_translate(tnp.asarray(x), (8, 4), (0, 1), s, t, "cubic"))

    def f_ref(s: np.ndarray, t: np.ndarray) -> float:
        return float(np.sum(probe * ref_apply(x, [0, 1], (8, 4), list(s), list(t), "cubic", True)))

    gs, gt = tg.jit(tg.grad(f, argnums=(0, 1)))(tnp.asarray(scale), tnp.asarray(translation))
    h = 1e-6
    for k in range(2):
        e = np.eye(2)[k] * h
        ds = (f_ref(scale + e, translation) - f_ref(scale - e, translation)) / (2 * h)
        dt = (f_ref(scale, translation + e) - f_ref(scale, translation - e)) / (2 * h)
        np.testing.assert_allclose(float(gs[k]), ds, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(float(gt[k]), dt, rtol=1e-5, atol=1e-7)


def test_jit() -> None:
    x = RNG.standard_normal((2, 6, 5, 3)).astype(np.float32)
    f = tg.jit(lambda im: tg.image.resize(im, (2, 9, 4, 3), "bilinear"))
    close(f(tnp.asarray(x)), ref_resize(x, (2, 9, 4, 3), "linear"))
    close(f(tnp.asarray(2 * x)), 2 * ref_resize(x, (2, 9, 4, 3), "linear"))
    # scale and translation as arguments of the jitted function are traced
    g = tg.jit(lambda im, s, t: tg.image.scale_and_translate(im, (2, 9, 4, 3), (1, 2), s, t, "lanczos3"))
    close(g(tnp.asarray(x), tnp.asarray([1.5, 0.8]), tnp.asarray([0.25, -0.5])),
          ref_apply(x, [1, 2], (2, 9, 4, 3), [1.5, 0.8], [0.25, -0.5], "lanczos3", True))


def test_vmap() -> None:
    x = RNG.standard_normal((3, 6, 5)).astype(np.float32)
    got = tg.vmap(lambda im: tg.image.resize(im, (4, 8), "cubic"))(tnp.asarray(x))
    close(got, np.stack([ref_resize(im, (4, 8), "cubic") for im in x]))
    # a batch of translations
    ts = np.array([[0.0, 0.5], [1.0, -1.0]], np.float32)
    got = tg.vmap(lambda t: tg.image.scale_and_translate(tnp.asarray(x[0]), (4, 8), (0, 1), (0.7, 1.6), t, "linear"))(
        tnp.asarray(ts))
    close(got, np.stack([ref_apply(x[0], [0, 1], (4, 8), [0.7, 1.6], list(t), "linear", True) for t in ts]))


def test_dtypes() -> None:
    x = RNG.integers(0, 255, (4, 6, 3)).astype(np.uint8)
    nearest = tg.image.resize(tnp.asarray(x), (7, 3, 3), "nearest")
    assert nearest.dtype == tg.dtypes.uint8     # a gather keeps the image's type
    np.testing.assert_array_equal(np.asarray(nearest), ref_resize(x, (7, 3, 3), "nearest").astype(np.uint8))
    linear = tg.image.resize(tnp.asarray(x), (7, 3, 3), "linear")
    assert linear.dtype == tg.dtypes.float32    # a filter computes in floats: integers as float32, as JAX
    close(linear, ref_resize(x, (7, 3, 3), "linear"))
    half = tg.image.resize(tnp.asarray(x.astype(np.float16)), (7, 3, 3), "linear")
    assert half.dtype == tg.dtypes.float16
    close(half.astype("float32"), ref_resize(x, (7, 3, 3), "linear"), 2e-3)


@pytest.mark.x64
def test_float64() -> None:
    x = RNG.standard_normal((5, 7))
    got = tg.image.resize(tnp.asarray(x), (11, 3), "lanczos5")
    assert got.dtype == tg.dtypes.float64
    close(got, ref_resize(x, (11, 3), "lanczos5"), 1e-12)


def test_method_enum_and_names() -> None:
    assert ResizeMethod.from_string("bilinear") is ResizeMethod.LINEAR
    assert ResizeMethod.from_string("tricubic") is ResizeMethod.CUBIC
    x = tnp.asarray(RNG.standard_normal((4, 4)).astype(np.float32))
    assert np.array_equal(np.asarray(tg.image.resize(x, (6, 2), ResizeMethod.LANCZOS3)),
                          np.asarray(tg.image.resize(x, (6, 2), "lanczos3")))


def test_errors() -> None:
    x = tnp.ones((4, 5))
    with pytest.raises(ValueError, match="resize: method: unknown resize method 'bogus'.*'bilinear'"):
        tg.image.resize(x, (2, 2), "bogus")
    with pytest.raises(TypeError, match="method must be a ResizeMethod"):
        tg.image.resize(x, (2, 2), 3)
    with pytest.raises(ValueError, match=r"shape \(2, 2, 1\) has 3 sizes but the image has 2 axes"):
        tg.image.resize(x, (2, 2, 1), "linear")
    with pytest.raises(ValueError, match="negative dimensions"):
        tg.image.resize(x, (-2, 5), "linear")
    with pytest.raises(ValueError, match="axis 0 of the image .* is empty"):
        tg.image.resize(tnp.ones((0, 5)), (3, 5), "linear")
    with pytest.raises(ValueError, match="not supported here .* use resize"):
        tg.image.scale_and_translate(x, (4, 5), (0,), (1.0,), (0.0,), "nearest")
    with pytest.raises(ValueError, match="axis 1 is not in spatial_dims"):
        tg.image.scale_and_translate(x, (4, 6), (0,), (1.0,), (0.0,), "linear")
    with pytest.raises(ValueError, match="scale has 2 values, but spatial_dims names 1 axes"):
        tg.image.scale_and_translate(x, (4, 5), (0,), (1.0, 2.0), (0.0,), "linear")
    with pytest.raises(ValueError, match=r"scale\[0\] is 0.0"):
        tg.image.scale_and_translate(x, (4, 5), (0,), (0.0,), (0.0,), "linear")
    with pytest.raises(ValueError, match=r"scale\[0\] is inf"):
        tg.image.scale_and_translate(x, (4, 5), (0,), (math.inf,), (0.0,), "linear")


@pytest.mark.parametrize("method", METHODS)
def test_matches_jax(method: str) -> None:
    jax = pytest.importorskip("jax")
    x = RNG.standard_normal((2, 6, 5, 3)).astype(np.float32)
    for antialias in (True, False):     # up along one axis, down along the other (each jax call compiles)
        want = np.asarray(jax.image.resize(x, (2, 13, 2, 3), method, antialias=antialias))
        close(tg.image.resize(tnp.asarray(x), (2, 13, 2, 3), method, antialias=antialias), want)
    if method == "nearest":
        xi = RNG.integers(0, 255, (37, 3)).astype(np.uint8)
        for n in (5, 101):
            want = np.asarray(jax.image.resize(xi, (n, 3), "nearest"))
            np.testing.assert_array_equal(np.asarray(tg.image.resize(tnp.asarray(xi), (n, 3), "nearest")), want)
        return
    s, t = np.array([0.7, 1.9], np.float32), np.array([0.35, -1.2], np.float32)
    want = np.asarray(jax.image.scale_and_translate(x, (2, 8, 4, 3), (1, 2), s, t, method))
    close(tg.image.scale_and_translate(tnp.asarray(x), (2, 8, 4, 3), (1, 2), tuple(s), tuple(t), method), want)
    close(tg.image.scale_and_translate(tnp.asarray(x), (2, 8, 4, 3), (1, 2), tnp.asarray(s), tnp.asarray(t), method),
          want)
