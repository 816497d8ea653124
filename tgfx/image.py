"""`tgfx.image`: image resampling (`resize`, `scale_and_translate`), as `jax.image` has it.

Every method but nearest is a separable filter: along each resampled axis, output pixel o is a normalised, weighted
sum of the input pixels, with weights `kernel(|sample(o) - i| / kernel_scale)` where `sample(o)` is o's centre mapped
back into the input (half-pixel centres: pixel i covers [i, i + 1)) and `kernel_scale` is 1, or 1 / scale when an
antialiased resize shrinks the axis (the kernel widens to low-pass filter what it drops). So each axis is one (in, out)
weight matrix, contracted with the image along that axis (`tnp.tensordot`), one axis after another; everything is
tgfx ops, hence traces under `jit` and `vmap` and differentiates under `grad`.

The weights depend only on the sizes, scale and translation. When those are Python or numpy numbers the matrix is
worked out once on the host in float64 (and cached) and enters the program as a constant; when `scale_and_translate`
is given Tensors (traced values, or arguments of a jitted function) the same formulas run as tnp ops, so the result
is differentiable in the scale and translation too, as in JAX. Nearest neighbour is no filter but a gather of one
input index per output, as in JAX.

>>> from tgfx import image
>>> img = tnp.ones((8, 64, 64, 3))
>>> image.resize(img, (8, 96, 96, 3), "bilinear").shape         # (8, 96, 96, 3); batch and channels unchanged
>>> image.scale_and_translate(img, (8, 32, 32, 3), (1, 2), scale=(0.5, 0.5), translation=(0.0, 0.0),
...                           method="lanczos3")                # a 2x antialiased downsample
"""
from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import DType, dtypes, promote_types, to_inexact
from tgfx.tensor import ArrayLike, Tensor, _shape_arg, normalize_axes, to_tensor


class ResizeMethod(enum.Enum):
    """How `resize` and `scale_and_translate` resample (the values and names are `jax.image.ResizeMethod`'s).

    NEAREST: the input pixel whose cell holds the output pixel's centre (a gather; `resize` only).
    LINEAR: the triangle kernel, linear interpolation (bilinear, trilinear, ... along several axes).
    LANCZOS3, LANCZOS5: the Lanczos kernel sinc(x) sinc(x / a) of radius a = 3 or 5.
    CUBIC: the Keys cubic kernel with a = -0.5 (Pillow's, TensorFlow's, PyTorch's with antialiasing).
    CUBIC_PYTORCH: CUBIC when antialiased; otherwise the a = -0.75 kernel with edge pixels repeated outside the image,
        as `torch.nn.functional.interpolate(mode="bicubic")` (and OpenCV).
    AREA: the average of the input pixels under the output pixel's cell, weighted by how much of each it covers.
    """
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> ResizeMethod:
        """The method a name stands for, with JAX's aliases ("bilinear", "bicubic", ...)."""
        for method, names in _NAMES.items():
            if s in names:
                return method
        raise ValueError(f"unknown resize method {s!r}; use a ResizeMethod or one of {', '.join(map(repr, _ALL))}")


_NAMES = {
    ResizeMethod.NEAREST: ("nearest",),
    ResizeMethod.LINEAR: ("linear", "bilinear", "trilinear", "triangle"),
    ResizeMethod.LANCZOS3: ("lanczos3",),
    ResizeMethod.LANCZOS5: ("lanczos5",),
    ResizeMethod.CUBIC: ("cubic", "bicubic", "tricubic"),
    ResizeMethod.CUBIC_PYTORCH: ("cubic-pytorch", "bicubic-pytorch"),
    ResizeMethod.AREA: ("area",),
}
_ALL = [name for names in _NAMES.values() for name in names]


# ---- the kernels: written against `xp` (numpy on the host, tgfx.numpy when traced), as functions of |distance| ----
def _triangle(xp: Any, x: Any) -> Any:
    return xp.maximum(0.0, 1.0 - xp.abs(x))


def _lanczos(radius: float, xp: Any, x: Any) -> Any:
    """sinc(x) sinc(x / radius), written as JAX does: 1 near 0, where the quotient loses its digits."""
    y = radius * xp.sin(np.pi * x) * xp.sin(np.pi * x / radius)
    out = xp.where(x > 1e-3, y / xp.where(x != 0, np.pi ** 2 * x ** 2, 1.0), 1.0)
    return xp.where(x > radius, 0.0, out)


def _cubic(a: float, xp: Any, x: Any) -> Any:
    """Keys' cubic convolution kernel (IEEE Trans. ASSP 29(6), 1981) with parameter a."""
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return xp.where(x >= 2.0, 0.0, xp.where(x >= 1.0, far, near))


# method -> (radius, kernel); AREA has no kernel of distance: its weights are overlaps (see `_weights`)
_KERNELS: dict[ResizeMethod, tuple[int, Callable[[Any, Any], Any] | None]] = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, functools.partial(_lanczos, 3.0)),
    ResizeMethod.LANCZOS5: (5, functools.partial(_lanczos, 5.0)),
    ResizeMethod.CUBIC: (2, functools.partial(_cubic, -0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, functools.partial(_cubic, -0.75)),
    ResizeMethod.AREA: (1, None),
}
_TINY_SUM = 1000.0 * float(np.finfo(np.float32).eps)   # a column summing to less has no weight at all (as JAX)


def _weights(xp: Any, n_in: int, n_out: int, scale: Any, translation: Any, method: ResizeMethod, antialias: bool,
             dtype: str) -> Any:
    """The (n_in, n_out) matrix taking one axis of the image to the output, as JAX's `compute_weight_mat`.

    Output pixel o samples the input at `(o + 0.5 - translation) / scale - 0.5`. Its weights are normalised to sum to 1
    (the kernel may reach past the image's edge); an output whose sample point lies outside the image gets none.
    CUBIC_PYTORCH without antialiasing instead repeats the edge pixels outside the image: the weights of the `radius`
    pixels beyond each edge are added onto the edge pixel (a fixed 0/1 matrix), and no output is zeroed.
    """
    radius, kernel = _KERNELS[method]
    edge_padding = method is ResizeMethod.CUBIC_PYTORCH and not antialias
    inv_scale = 1.0 / scale
    # downsampling low-pass filters, so the kernel widens by 1 / scale; upsampling only interpolates
    kernel_scale = xp.maximum(inv_scale, 1.0) if antialias else 1.0
    outputs = xp.arange(n_out, dtype=dtype)
    sample = (outputs + 0.5) * inv_scale - translation * inv_scale - 0.5
    if kernel is None:   # AREA: how much of input cell [i, i + 1) the output cell [L, L + 1 / scale) covers
        left = outputs * inv_scale - translation * inv_scale
        cells = xp.arange(n_in, dtype=dtype).reshape(-1, 1)
        w = xp.maximum(0.0, xp.minimum((left + inv_scale).reshape(1, -1), cells + 1.0)
                       - xp.maximum(left.reshape(1, -1), cells))
    else:
        k = radius if edge_padding else 0   # edge padding comes only without antialiasing, so the kernel is not wider
        inputs = xp.arange(-k, n_in + k, dtype=dtype).reshape(-1, 1)
        w = kernel(xp, xp.abs(sample.reshape(1, -1) - inputs) / kernel_scale)
        if edge_padding:
            onto = np.clip(np.arange(-k, n_in + k), 0, n_in - 1) == np.arange(n_in).reshape(-1, 1)
            w = xp.matmul(xp.asarray(onto, dtype=dtype), w)
    total = xp.sum(w, axis=0, keepdims=True)
    w = xp.where(xp.abs(total) > _TINY_SUM, w / xp.where(total != 0, total, 1.0), 0.0)
    if edge_padding:
        return w
    inside = xp.logical_and(sample >= -0.5, sample <= n_in - 0.5)
    return xp.where(inside.reshape(1, -1), w, 0.0)


@functools.lru_cache(maxsize=256)
def _host_weights(n_in: int, n_out: int, scale: float, translation: float, method: ResizeMethod,
                  antialias: bool) -> np.ndarray:
    """`_weights` in float64 on the host, read-only: the same sizes and method give the same constant."""
    w = _weights(np, n_in, n_out, scale, translation, method, antialias, "float64")
    w.setflags(write=False)
    return w


def _is_static(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating))


def _axis_weights(n_in: int, n_out: int, scale: Any, translation: Any, method: ResizeMethod, antialias: bool,
                  d: DType) -> Tensor:
    """The (n_in, n_out) weights of one axis as a Tensor of the image's dtype `d`."""
    if _is_static(scale) and _is_static(translation):
        w = _host_weights(n_in, n_out, float(scale), float(translation), method, antialias)
        host = w.astype(np.float64 if d == dtypes.float64 else np.float32)   # bfloat16 has no numpy type
        t = to_tensor(host)
        return t if t.dtype == d else t.astype(d)
    # traced: the same formulas as tnp ops, in the float type of the scale and translation (JAX's result_type, where
    # a Python number takes the other's type)
    kinds = [to_inexact(v.dtype) for v in (scale, translation) if isinstance(v, Tensor)]
    wd = promote_types(*kinds) if len(kinds) == 2 else kinds[0]
    s, t = (v.astype(wd) if isinstance(v, Tensor) else Tensor.full((), float(v), wd) for v in (scale, translation))
    w = _weights(tnp, n_in, n_out, s, t, method, antialias, wd.name)
    return w if w.dtype == d else w.astype(d)


def _contract(x: Tensor, axis: int, w: Tensor) -> Tensor:
    """x with `axis` (of size n_in) taken through the (n_in, n_out) weights w."""
    # the product's new axis comes last; move it to where the old one was
    return tnp.moveaxis(tnp.tensordot(x, w, axes=([axis], [0])), -1, axis)


def _method_arg(method: Any, fn: str) -> ResizeMethod:
    if isinstance(method, ResizeMethod):
        return method
    if isinstance(method, str):
        try:
            return ResizeMethod.from_string(method)
        except ValueError as e:
            raise ValueError(f"{fn}: method: {e}") from None
    raise TypeError(f"{fn}: method must be a ResizeMethod or its name (one of {', '.join(map(repr, _ALL))}), got "
                    f"{method!r}")


def _shape_of(shape: Any, image: Tensor, fn: str) -> tuple[int, ...]:
    """The output shape, checked: one size per axis of the image, none negative."""
    out = _shape_arg(shape, fn)
    if len(out) != image.ndim:
        raise ValueError(f"{fn}: shape {out} has {len(out)} sizes but the image has {image.ndim} axes (shape "
                         f"{image.shape}); give one size per axis, the image's own size for the axes to keep")
    return out


def _as_float(image: Tensor) -> Tensor:
    """The image in the float type filters compute in (JAX's promote_dtypes_inexact: integers and bool as float32)."""
    return image if image.dtype.is_inexact else image.astype(to_inexact(image.dtype))


def _resize_nearest(x: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Output pixel o along a resized axis reads input floor((o + 0.5) * n_in / n_out), as JAX.

    The index is computed in float32, as JAX does (it works around an XLA float64 bug), so that sizes where the float32
    product rounds onto an integer pick the pixel JAX picks."""
    for axis, (n_in, n_out) in enumerate(zip(x.shape, shape, strict=True)):
        if n_in == n_out:
            continue
        centres = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * np.float32(n_in) / np.float32(n_out)
        x = tnp.take(x, np.floor(centres).astype(np.int32), axis=axis)
    return x


def resize(image: ArrayLike, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision: Any = None) -> Tensor:
    """The image resampled to `shape`, as `jax.image.resize`.

    `shape` has one size per axis of the image: resize does not know which axes are spatial, so a batch or channel
    axis keeps its size (`(8, 64, 64, 3) -> (8, 96, 96, 3)`), and only axes whose size changes are resampled. Pixel
    centres sit at half-integers and the image's corners map onto the output's corners (no `align_corners`; get that
    with `scale_and_translate`). `method` is a `ResizeMethod` or a name: "nearest"; "linear" ("bilinear",
    "trilinear", "triangle"); "cubic" ("bicubic", "tricubic"; Keys a = -0.5); "cubic-pytorch" ("bicubic-pytorch");
    "lanczos3"; "lanczos5"; "area". With `antialias` (the default) a downsampling filter widens by the shrink factor,
    so it averages what it drops instead of aliasing; it changes nothing when upsampling. `precision` is accepted for
    JAX's signature and ignored (products run in the image's type).

    The result has the image's dtype for "nearest" and a float type otherwise (float32 for integer images).

    >>> img = tnp.arange(4.0).reshape(1, 4)
    >>> resize(img, (1, 8), "linear")      # [[0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3]]
    >>> resize(img, (1, 2), "nearest")     # [[1, 3]]: the pixels under the output centres 1.0 and 3.0
    """
    x = to_tensor(image)
    out_shape = _shape_of(shape, x, "resize")
    m = _method_arg(method, "resize")
    if m is ResizeMethod.NEAREST:
        return _resize_nearest(x, out_shape)
    for axis, (n_in, n_out) in enumerate(zip(x.shape, out_shape, strict=True)):
        if n_in == 0 and n_out > 0:
            raise ValueError(f"resize: axis {axis} of the image (shape {x.shape}) is empty, so it cannot be resized to "
                             f"{n_out} (shape {out_shape}); keep its size 0")
    x = _as_float(x)
    # only axes whose size changes: every kernel interpolates, so an identity warp is the identity
    axes = [a for a in range(x.ndim) if x.shape[a] != out_shape[a]]
    scales = [out_shape[a] / x.shape[a] if out_shape[a] else 1.0 for a in axes]
    return _scale_and_translate(x, out_shape, axes, scales, [0.0] * len(axes), m, antialias)


def _scale_and_translate(x: Tensor, shape: tuple[int, ...], axes: Sequence[int], scales: Sequence[Any],
                         translations: Sequence[Any], method: ResizeMethod, antialias: bool) -> Tensor:
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:   # PyTorch's antialiased bicubic is the Keys kernel
        method = ResizeMethod.CUBIC
    # the shrinking axes first: each contraction costs (current size) * n_out, and shrinking makes the next cheaper
    order = sorted(range(len(axes)), key=lambda i: shape[axes[i]] / max(x.shape[axes[i]], 1))
    for i in order:
        a = axes[i]
        w = _axis_weights(x.shape[a], shape[a], scales[i], translations[i], method, antialias, x.dtype)
        x = _contract(x, a, w)
    return x


def _per_axis(v: Any, k: int, name: str) -> list[Any]:
    """`scale` or `translation` as k per-axis values (numbers, or scalar Tensors when traced)."""
    if isinstance(v, Tensor):
        if v.shape != (k,):
            raise ValueError(f"scale_and_translate: {name} has shape {v.shape}, but spatial_dims names {k} axes; give "
                             f"one {name} per spatial dimension")
        return [v[i] for i in range(k)]
    values = list(np.asarray(v).reshape(-1)) if isinstance(v, np.ndarray) else list(v)
    if len(values) != k:
        raise ValueError(f"scale_and_translate: {name} has {len(values)} values, but spatial_dims names {k} axes; "
                         f"give one {name} per spatial dimension")
    return values


def scale_and_translate(image: ArrayLike, shape: Sequence[int], spatial_dims: Sequence[int], scale: Any,
                        translation: Any, method: str | ResizeMethod, antialias: bool = True,
                        precision: Any = None) -> Tensor:
    """The image resampled under x -> x * scale + translation along each of `spatial_dims`, as
    `jax.image.scale_and_translate`.

    Pixel (row, col) has centre (row + 0.5, col + 0.5); output pixel o along spatial dim k is sampled at input
    position `(o + 0.5 - translation[k]) / scale[k] - 0.5` (the inverse warp), with the filter `method` (any
    `ResizeMethod` but NEAREST; see `resize`). An output whose sample point falls outside the input is 0. `shape` is
    the whole output shape; the axes not in `spatial_dims` must keep their size. `scale` and `translation` hold one
    value per spatial dim: Python or numpy numbers (the weights are constants worked out on the host), or a Tensor
    (the weights are computed in the program, which is then differentiable in them). Integer images come out float32.

    PyTorch's `interpolate(..., align_corners=True)` is `scale = (n - 1) / (m - 1)`, `translation = 0.5 * (1 - scale)`
    for input size m and output size n.

    >>> img = tnp.arange(4.0).reshape(1, 4)
    >>> scale_and_translate(img, (1, 4), (1,), scale=(1.0,), translation=(1.0,), method="linear")   # [[0, 0, 1, 2]]
    """
    fn = "scale_and_translate"
    x = to_tensor(image)
    out_shape = _shape_of(shape, x, fn)
    m = _method_arg(method, fn)
    if m is ResizeMethod.NEAREST:
        raise ValueError(f"{fn}: method {method!r} is not supported here (as in JAX); use resize(..., 'nearest') or a "
                         f"filter such as 'linear'")
    axes = normalize_axes(tuple(spatial_dims), x.ndim, fn)
    scales = _per_axis(scale, len(axes), "scale")
    translations = _per_axis(translation, len(axes), "translation")
    for a in range(x.ndim):
        if a not in axes and x.shape[a] != out_shape[a]:
            raise ValueError(f"{fn}: axis {a} is not in spatial_dims {tuple(spatial_dims)} but changes size "
                             f"({x.shape} -> {out_shape}); add it to spatial_dims or keep its size")
        if a in axes and x.shape[a] == 0 and out_shape[a] > 0:
            raise ValueError(f"{fn}: spatial axis {a} of the image (shape {x.shape}) is empty, so it cannot be "
                             f"sampled into size {out_shape[a]}; keep its size 0")
    for k, s in enumerate(scales):
        if _is_static(s) and (s == 0 or not math.isfinite(s)):
            raise ValueError(f"{fn}: scale[{k}] is {s!r}; a scale must be finite and nonzero")
    return _scale_and_translate(_as_float(x), out_shape, axes, scales, translations, m, antialias)
