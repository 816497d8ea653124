"""Parameter initialisers with `jax.nn.initializers`' names and calling convention: `init(key, shape, dtype)`.

`zeros` and `ones` are initialisers themselves; the others are factories that return one:

>>> init = tg.nn.initializers.glorot_uniform()
>>> w = init(tg.random.key(0), (784, 256), tg.dtypes.float32)

The fan-based ones are `variance_scaling(scale, mode, distribution)`: variance scale / fan, with fan_in, fan_out
or their average taken from the shape (`in_axis`, `out_axis`; the remaining axes, e.g. a convolution's kernel
window, multiply both fans). "truncated_normal" is a normal cut at two standard deviations and rescaled so the
variance is still scale / fan, as in JAX.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

import tgfx.numpy as tnp
from tgfx import random
from tgfx.dtypes import DType, dtypes, host_np, to_dtype
from tgfx.tensor import Tensor, static_int

Initializer = Callable[..., Tensor]

# the standard deviation of a standard normal truncated to [-2, 2]; dividing by it restores unit variance
_TRUNCATED_STD = 0.87962566103423978


def _shape(shape: Sequence[int] | int, fn: str) -> tuple[int, ...]:
    try:
        return (int(shape),) if static_int(shape) is not None else tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{fn}: shape must be a tuple of ints, got {shape!r}") from None


def _float_dtype(dtype: DType | str, fn: str) -> DType:
    d = to_dtype(dtype)
    if not d.is_float:
        raise TypeError(f"{fn}: needs a float dtype, got {d.name}")
    return d


def _truncated_normal(key: Tensor, lower: float, upper: float, shape: tuple[int, ...], d: DType) -> Tensor:
    """Standard normal values truncated to [lower, upper], as `jax.random.truncated_normal` builds them: the
    inverse CDF sqrt(2) erfinv(u) of u uniform between erf(lower / sqrt 2) and erf(upper / sqrt 2), clipped strictly
    inside the bounds (rounding of erfinv near +-1 could step out)."""
    a, b = math.erf(lower / math.sqrt(2)), math.erf(upper / math.sqrt(2))
    u = random.uniform(key, shape, d, a, b)
    out = random.erfinv(u) * math.sqrt(2)
    npd = host_np(d)
    lo = float(np.nextafter(npd.type(lower), npd.type(np.inf)))
    hi = float(np.nextafter(npd.type(upper), npd.type(-np.inf)))
    return tnp.clip(out, lo, hi).astype(d)


def zeros(key: Tensor, shape: Sequence[int], dtype: DType | str = dtypes.float32) -> Tensor:
    """All zeros (the key is ignored)."""
    return tnp.zeros(_shape(shape, "zeros"), to_dtype(dtype))


def ones(key: Tensor, shape: Sequence[int], dtype: DType | str = dtypes.float32) -> Tensor:
    """All ones (the key is ignored)."""
    return tnp.ones(_shape(shape, "ones"), to_dtype(dtype))


def constant(value: float, dtype: DType | str = dtypes.float32) -> Initializer:
    """An initialiser filling with `value`."""
    def init(key: Tensor, shape: Sequence[int], dtype: DType | str = dtype) -> Tensor:
        return tnp.full(_shape(shape, "constant"), value, to_dtype(dtype))
    return init


def normal(stddev: float = 1e-2, dtype: DType | str = dtypes.float32) -> Initializer:
    """An initialiser drawing from N(0, stddev^2)."""
    def init(key: Tensor, shape: Sequence[int], dtype: DType | str = dtype) -> Tensor:
        d = _float_dtype(dtype, "normal")
        return random.normal(key, _shape(shape, "normal"), d) * stddev
    return init


def uniform(scale: float = 1e-2, dtype: DType | str = dtypes.float32) -> Initializer:
    """An initialiser drawing from U[0, scale) (as JAX's)."""
    def init(key: Tensor, shape: Sequence[int], dtype: DType | str = dtype) -> Tensor:
        d = _float_dtype(dtype, "uniform")
        return random.uniform(key, _shape(shape, "uniform"), d) * scale
    return init


def truncated_normal(stddev: float = 1e-2, dtype: DType | str = dtypes.float32, lower: float = -2.0,
                     upper: float = 2.0) -> Initializer:
    """An initialiser drawing stddev * (a standard normal truncated to [lower, upper])."""
    def init(key: Tensor, shape: Sequence[int], dtype: DType | str = dtype) -> Tensor:
        d = _float_dtype(dtype, "truncated_normal")
        return _truncated_normal(key, lower, upper, _shape(shape, "truncated_normal"), d) * stddev
    return init


def _fans(shape: tuple[int, ...], in_axis: int | Sequence[int], out_axis: int | Sequence[int],
          batch_axis: int | Sequence[int], fn: str) -> tuple[float, float]:
    """(fan_in, fan_out) as JAX computes them: the in / out axes' sizes times the receptive field (every axis that
    is none of in, out or batch)."""
    if len(shape) < 2:
        raise ValueError(f"{fn}: needs a shape of at least 2 axes to tell fan-in from fan-out, got {shape}")

    def axes(a: int | Sequence[int]) -> tuple[int, ...]:
        return tuple(int(i) % len(shape) for i in ((a,) if static_int(a) is not None else a))

    ins, outs, batch = axes(in_axis), axes(out_axis), axes(batch_axis)
    field = math.prod(s for i, s in enumerate(shape) if i not in ins + outs + batch)
    return math.prod(shape[i] for i in ins) * field, math.prod(shape[i] for i in outs) * field


def variance_scaling(scale: float, mode: str, distribution: str, in_axis: int | Sequence[int] = -2,
                     out_axis: int | Sequence[int] = -1, batch_axis: int | Sequence[int] = (),
                     dtype: DType | str = dtypes.float32) -> Initializer:
    """An initialiser with variance scale / n, n being fan_in, fan_out or their mean (`mode` "fan_in", "fan_out",
    "fan_avg"), drawn from `distribution` "truncated_normal", "normal" or "uniform" (JAX's
    `variance_scaling`). The default axes fit a (in, out) dense kernel; a PyTorch-layout conv kernel
    (out, in, kh, kw) wants in_axis=1, out_axis=0.

    >>> he = tg.nn.initializers.variance_scaling(2.0, "fan_in", "normal")   # He / Kaiming normal, untruncated
    """
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"variance_scaling: mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"variance_scaling: distribution must be 'truncated_normal', 'normal' or 'uniform', got "
                         f"{distribution!r}")

    def init(key: Tensor, shape: Sequence[int], dtype: DType | str = dtype) -> Tensor:
        shp = _shape(shape, "variance_scaling")
        d = _float_dtype(dtype, "variance_scaling")
        fan_in, fan_out = _fans(shp, in_axis, out_axis, batch_axis, "variance_scaling")
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        # the factors are rounded to the dtype step by step as JAX computes them, so the values match it bit for bit
        f = np.dtype(np.float32).type if d == dtypes.bfloat16 else d.np.type
        variance = f(scale / max(n, 1))
        if distribution == "truncated_normal":
            return _truncated_normal(key, -2.0, 2.0, shp, d) * float(np.sqrt(variance) / f(_TRUNCATED_STD))
        if distribution == "normal":
            return random.normal(key, shp, d) * float(np.sqrt(variance))
        return random.uniform(key, shp, d, -1.0, 1.0) * float(np.sqrt(f(3) * variance))
    return init


def glorot_uniform(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                   batch_axis: int | Sequence[int] = (), dtype: DType | str = dtypes.float32) -> Initializer:
    """Glorot / Xavier uniform: U(-a, a) with a = sqrt(6 / (fan_in + fan_out))."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                  batch_axis: int | Sequence[int] = (), dtype: DType | str = dtypes.float32) -> Initializer:
    """Glorot / Xavier normal: truncated normal with variance 2 / (fan_in + fan_out)."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def lecun_uniform(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                  batch_axis: int | Sequence[int] = (), dtype: DType | str = dtypes.float32) -> Initializer:
    """LeCun uniform: U(-a, a) with a = sqrt(3 / fan_in)."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                 batch_axis: int | Sequence[int] = (), dtype: DType | str = dtypes.float32) -> Initializer:
    """LeCun normal: truncated normal with variance 1 / fan_in (flax's default for dense and conv kernels)."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def he_uniform(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
               batch_axis: int | Sequence[int] = (), dtype: DType | str = dtypes.float32) -> Initializer:
    """He / Kaiming uniform: U(-a, a) with a = sqrt(6 / fan_in)."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
              batch_axis: int | Sequence[int] = (), dtype: DType | str = dtypes.float32) -> Initializer:
    """He / Kaiming normal: truncated normal with variance 2 / fan_in (for ReLU networks)."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def orthogonal(scale: float = 1.0, column_axis: int = -1, dtype: DType | str = dtypes.float32) -> Initializer:
    """An initialiser of uniformly (Haar) distributed orthogonal matrices, times `scale`, as JAX's `orthogonal`:
    the shape is read as a matrix of `shape[column_axis]` columns and all other axes as rows, and whichever side is
    smaller gets orthonormal vectors (`tg.random.orthogonal`). Needs at least 2 axes.

    >>> w = tg.nn.initializers.orthogonal()(tg.random.key(0), (4, 3))    # w.T @ w is the 3x3 identity
    """
    def init(key: Tensor, shape: Sequence[int], dtype: DType | str = dtype) -> Tensor:
        shp = _shape(shape, "orthogonal")
        d = _float_dtype(dtype, "orthogonal")
        if len(shp) < 2:
            raise ValueError(f"orthogonal: the initializer requires at least a 2D shape, got {shp}")
        if not -len(shp) <= column_axis < len(shp):
            raise ValueError(f"orthogonal: column_axis {column_axis} is out of range for shape {shp}")
        if 0 in shp:
            return tnp.zeros(shp, d)
        n_cols = shp[column_axis]
        rest = tuple(s for i, s in enumerate(shp) if i != column_axis % len(shp))
        q = random.orthogonal(key, math.prod(rest), (), d, n_cols)
        return tnp.moveaxis(q.reshape((*rest, n_cols)), -1, column_axis) * tnp.asarray(scale, d)
    return init


def delta_orthogonal(scale: float = 1.0, column_axis: int = -1, dtype: DType | str = dtypes.float32) -> Initializer:
    """An initialiser of delta-orthogonal convolution kernels (Xiao et al. 2018), as JAX's `delta_orthogonal`: for
    a 3D, 4D or 5D kernel of shape `window + (in, out)` with in <= out, zeros except an orthogonal (in, out) matrix
    (`orthogonal(scale, column_axis)`) at the window's centre.

    >>> w = tg.nn.initializers.delta_orthogonal()(tg.random.key(0), (3, 3, 4, 8))   # w[1, 1] is orthogonal
    """
    def init(key: Tensor, shape: Sequence[int], dtype: DType | str = dtype) -> Tensor:
        shp = _shape(shape, "delta_orthogonal")
        d = _float_dtype(dtype, "delta_orthogonal")
        if len(shp) not in (3, 4, 5):
            raise ValueError(f"delta_orthogonal: the initializer requires a 3D, 4D or 5D shape, got {shp}")
        if shp[-1] < shp[-2]:
            raise ValueError(f"delta_orthogonal: `fan_in` must be less or equal than `fan_out`: shape {shp} has "
                             f"{shp[-2]} inputs and {shp[-1]} outputs")
        ortho = orthogonal(scale, column_axis, d)(key, shp[-2:])
        centre = tuple((k - 1) // 2 for k in shp[:-2])
        return tnp.zeros(shp, d).at[centre].set(ortho)
    return init
