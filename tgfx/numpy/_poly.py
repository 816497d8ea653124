"""Polynomials, 1-d signals (convolution, interpolation, differences on samples), as jax.numpy has them; the set
operations, partial sorts and `vectorize` are `_sets.py`.

Everything is a composition of tnp ops with static shapes, so it works eagerly, under `jit` and `vmap`, and is
differentiable where JAX's is.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx.dtypes import DType, dtypes, promote_types, to_inexact
from tgfx.numpy import _data_dependent as dd
from tgfx.numpy import _elementwise as ew
from tgfx.numpy import _movement as mv
from tgfx.numpy import _reduce as rd
from tgfx.numpy import _sort
from tgfx.numpy._complex import conj
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, normalize_axis, promotion_kind, to_tensor


def _promote(fn: str, *xs: ArrayLike, inexact: bool = False) -> list[Tensor]:
    """The arguments as Tensors of their JAX result type (made inexact when asked); Python scalars are weak."""
    kinds = [promotion_kind(x) for x in xs]
    try:
        d = promote_types(*kinds)
    except (KeyError, TypeError) as e:
        names = ", ".join(str(getattr(k, "name", k)) for k in kinds)
        raise TypeError(f"{fn}: the arguments' dtypes {names} do not promote to one type; cast them with .astype") \
            from e
    d = to_inexact(d) if inexact else d
    out = []
    for x in xs:
        t = Tensor.full((), x, d) if isinstance(x, (bool, int, float, complex)) else to_tensor(x)
        out.append(t if t.dtype == d else t.astype(d))
    return out


def _along(x: Tensor, axis: int, start: int | None, stop: int | None) -> Tensor:
    """x[..., start:stop, ...] on `axis`."""
    return x[(slice(None),) * axis + (slice(start, stop),)]


# ---- convolution ----
def _conv(a: ArrayLike, v: ArrayLike, mode: str, op: str, precision: Any,
          preferred_element_type: DType | str | None) -> Tensor:
    from tgfx import lax
    x, y = _promote(op, a, v, inexact=preferred_element_type is None)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"{op}: only 1-d inputs are supported, got shapes {x.shape} and {y.shape}")
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got shapes {x.shape} and {y.shape}")
    reverse = False
    if op == "correlate":
        y = conj(y)
        if x.shape[0] < y.shape[0]:   # correlate(a, v) is correlate(v, a) reversed
            x, y, reverse = y, x, True
    else:
        if x.shape[0] < y.shape[0]:
            x, y = y, x
        y = y.flip(0)
    m = y.shape[0]
    pads = {"valid": (0, 0), "same": (m // 2, m - m // 2 - 1), "full": (m - 1, m - 1)}
    if mode not in pads:
        raise ValueError(f"{op}: mode must be one of 'full', 'same', 'valid', got {mode!r}")
    out = lax.conv_general_dilated(x.reshape(1, 1, -1), y.reshape(1, 1, -1), (1,), [pads[mode]],
                                   precision=precision, preferred_element_type=preferred_element_type)[0, 0]
    return out.flip(0) if reverse else out


def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full", *, precision: Any = None,
             preferred_element_type: DType | str | None = None) -> Tensor:
    """The discrete linear convolution of two 1-d arrays (numpy.convolve): out[k] = sum_j a[j] v[k - j].

    `mode="full"` (length n + m - 1), `"same"` (the length of the longer input, centred) or `"valid"` (where they
    overlap fully). Inputs are promoted to an inexact type unless `preferred_element_type` is given, as in JAX.
    One convolution kernel.

    >>> tnp.convolve(tnp.asarray([1.0, 2.0, 3.0]), tnp.asarray([0.0, 1.0, 0.5])).tolist()
    [0.0, 1.0, 2.5, 4.0, 1.5]
    """
    return _conv(a, v, mode, "convolve", precision, preferred_element_type)


def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: DType | str | None = None) -> Tensor:
    """The cross-correlation of two 1-d arrays (numpy.correlate): out[k] = sum_n a[n + k] conj(v[n]), modes as
    `convolve` (default "valid").

    >>> tnp.correlate(tnp.asarray([1.0, 2.0, 3.0]), tnp.asarray([0.0, 1.0, 0.5]), mode="full").tolist()
    [0.5, 2.0, 3.5, 3.0, 0.0]
    """
    return _conv(a, v, mode, "correlate", precision, preferred_element_type)


# ---- interpolation and calculus on samples ----
def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | str | None = None,
           right: ArrayLike | str | None = None, period: ArrayLike | None = None) -> Tensor:
    """Piecewise-linear interpolation of the points (xp, fp) at x (numpy.interp); xp must be increasing.

    Outside [xp[0], xp[-1]] the result is `left` / `right` (fp[0] / fp[-1] by default), or the end segment
    extended when they are "extrapolate" (JAX's extension). With `period` the points repeat with that period (xp
    need not be sorted) and left/right are ignored. Differentiable in x and fp (and xp away from the knots).

    >>> tnp.interp(tnp.asarray([0.5, 2.5, 9.0]), tnp.asarray([0.0, 1.0, 3.0]), tnp.asarray([0.0, 2.0, 0.0])).tolist()
    [1.0, 0.5, 0.0]
    """
    xt, xpt, fpt = to_tensor(x), to_tensor(xp), to_tensor(fp)
    if xpt.shape != fpt.shape or xpt.ndim != 1:
        raise ValueError(f"interp: xp and fp must be 1-d arrays of equal length, got shapes {xpt.shape} and "
                         f"{fpt.shape}")
    if xpt.shape[0] == 0:
        raise ValueError("interp: xp and fp must not be empty")
    if xt.dtype.is_complex or xpt.dtype.is_complex:
        raise ValueError("interp: complex x and xp are not supported")
    # JAX's types: x and xp promote together (with the period, if any), fp on its own; the slope is taken in x's type
    # and the result is what it promotes to with fp's (int xp with float16 fp: float32), then with left's and right's
    xt, xpt = _promote("interp", xt, xpt, inexact=True)
    (fpt,) = _promote("interp", fpt, inexact=True)
    extrapolate = []
    for name, side in (("left", left), ("right", right)):
        if isinstance(side, str) and side != "extrapolate":
            raise ValueError(f"interp: the only string value of {name} is 'extrapolate', got {side!r}")
        extrapolate.append(isinstance(side, str))
    if period is not None:
        xt, xpt, per = _promote("interp", xt, xpt, period)
        if per.ndim != 0:
            raise ValueError(f"interp: period must be a scalar, got shape {per.shape}")
        per = ew.absolute(per)
        xt, xpt = ew.remainder(xt, per), ew.remainder(xpt, per)
        order = _sort.argsort(xpt)
        xpt, fpt = xpt[order], fpt[order]
        xpt = mv.concatenate([xpt[-1:] - per, xpt, xpt[:1] + per])
        fpt = mv.concatenate([fpt[-1:], fpt, fpt[:1]])
    n = xpt.shape[0]
    i = ew.clip(dd.searchsorted(xpt, xt, side="right"), 1, max(n - 1, 1)).astype(dtypes.int32)
    lo = ew.maximum(i - 1, 0)
    x0, x1, f0, f1 = xpt[lo], xpt[i % n], fpt[lo], fpt[i % n]
    dx = x1 - x0
    # a zero-width segment (repeated knots): no division, no NaN gradient. Only that: a segment 6e-38 wide is as real
    # as any (|dx| below a threshold took f0 there, where numpy interpolates to f1 at its end)
    flat = dx == 0
    f = flat.where(f0, f0 + ((xt - x0) / flat.where(1, dx)) * (f1 - f0))
    if period is None:
        if not extrapolate[0]:
            f = ew.where(xt < xpt[0], fpt[0] if left is None else left, f)
        if not extrapolate[1]:
            f = ew.where(xt > xpt[-1], fpt[-1] if right is None else right, f)
    return f


def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: ArrayLike = 1.0, axis: int = -1) -> Tensor:
    """The integral of y along `axis` by the trapezoidal rule (numpy.trapezoid), at sample points `x` (1-d, or y's
    shape) or spaced `dx` apart.

    >>> tnp.trapezoid(tnp.asarray([1.0, 2.0, 3.0]), dx=0.5).item()
    2.0
    """
    if x is None:
        (yt,) = _promote("trapezoid", y, inexact=True)
        # then dx joins y's type, weakly when it is a Python number (as JAX's asarray(dx)): int32 or float16 y with the
        # default 1.0 keeps float32 / float16 whatever the x64 mode
        yt, d = _promote("trapezoid", yt, dx)
        if d.ndim > 0:
            d = mv.moveaxis(d.reshape((1,) * (yt.ndim - d.ndim) + d.shape), axis, -1)
    else:
        yt, xt = _promote("trapezoid", y, x, inexact=True)
        from tgfx.numpy._standard import diff
        d = diff(xt) if xt.ndim == 1 else mv.moveaxis(diff(xt, axis=axis), axis, -1)
    if yt.ndim == 0:
        raise ValueError("trapezoid: y must have at least one dimension")
    yt = mv.moveaxis(yt, normalize_axis(axis, yt.ndim, "trapezoid"), -1)
    if d.ndim == 0 or d.shape[-1] == 1:   # constant spacing: one sum
        step = d if d.ndim == 0 else d[..., 0]
        return step * (rd.sum(yt, axis=-1) - 0.5 * (yt[..., 0] + yt[..., -1]))
    return 0.5 * rd.sum(d * (yt[..., 1:] + yt[..., :-1]), axis=-1)


def gradient(f: ArrayLike, *varargs: ArrayLike, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None) -> Tensor | list[Tensor]:
    """The gradient of sampled f (numpy.gradient): central differences inside, one-sided first differences at
    the edges (edge_order 1). `varargs` gives the spacing: one scalar for every axis, one per axis, or 1-d sample
    coordinates. A list of Tensors, one per axis, or one Tensor for one axis.

    >>> tnp.gradient(tnp.asarray([1.0, 2.0, 4.0, 7.0])).tolist()
    [1.0, 1.5, 2.5, 3.0]
    """
    if edge_order not in (None, 1):
        raise NotImplementedError(f"gradient: edge_order={edge_order} is not supported; only first-order edges "
                                  f"(edge_order=1 or None), as jnp.gradient")
    a, *spacing = _promote("gradient", f, *varargs, inexact=True)
    axes = tuple(range(a.ndim)) if axis is None else tuple(
        normalize_axis(ax, a.ndim, "gradient") for ax in ((axis,) if isinstance(axis, (int, np.integer)) else axis))
    if not axes:
        return []
    if min(a.shape[ax] for ax in axes) < 2:
        raise ValueError(f"gradient: f of shape {a.shape} is too small: at least 2 samples are needed along each "
                         f"axis in {axes}")
    if len(spacing) not in (0, 1, len(axes)):
        raise TypeError(f"gradient: {len(spacing)} spacing arguments for the {len(axes)} axes {axes}; give none, one "
                        f"or one per axis")
    # unit spacing in f's own type: a strong 1.0 made int32 samples float64 with x64, where JAX's stay float32
    unit = Tensor.full((), 1, a.dtype)
    hs = [unit] * len(axes) if not spacing else spacing * len(axes) if len(spacing) == 1 else spacing
    out = [_gradient_along(a, h, ax) for ax, h in zip(axes, hs, strict=True)]
    return out[0] if len(axes) == 1 else out


def _gradient_along(a: Tensor, h: ArrayLike, axis: int) -> Tensor:
    def part(start: int | None, stop: int | None) -> Tensor:
        return _along(a, axis, start, stop)

    first, last = part(1, 2) - part(0, 1), part(-1, None) - part(-2, -1)
    h = to_tensor(h)
    if h.ndim == 0:
        inner = (part(2, None) - part(None, -2)) * 0.5 / h
        return mv.concatenate([first / h, inner, last / h], axis=axis)
    if h.ndim != 1 or h.shape[0] != a.shape[axis]:
        raise ValueError(f"gradient: spacing must be a scalar or 1-d coordinates of length {a.shape[axis]} (axis "
                         f"{axis} of f), got shape {h.shape}")
    h = h.reshape(tuple(h.shape[0] if i == axis else 1 for i in range(a.ndim)))

    def at(start: int | None, stop: int | None) -> Tensor:
        return _along(h, axis, start, stop)

    dx1, dx2 = at(1, -1) - at(0, -2), at(2, None) - at(1, -1)
    inner = (-dx2 / (dx1 * (dx1 + dx2)) * part(0, -2) + (dx2 - dx1) / (dx1 * dx2) * part(1, -1)
             + dx1 / (dx2 * (dx1 + dx2)) * part(2, None))
    return mv.concatenate([first / (at(1, 2) - at(0, 1)), inner, last / (at(-1, None) - at(-2, -1))], axis=axis)


def ediff1d(ary: ArrayLike, to_end: ArrayLike | None = None, to_begin: ArrayLike | None = None) -> Tensor:
    """The differences between consecutive elements of the flattened array (numpy.ediff1d), with `to_begin` and
    `to_end` (cast to its dtype) put before and after.

    >>> tnp.ediff1d(tnp.asarray([1, 4, 9]), to_begin=0).tolist()
    [0, 3, 5]
    """
    x = to_tensor(ary).reshape(-1)
    parts = [x[1:] - x[:-1]]
    if to_begin is not None:
        parts.insert(0, to_tensor(to_begin).astype(x.dtype).reshape(-1))
    if to_end is not None:
        parts.append(to_tensor(to_end).astype(x.dtype).reshape(-1))
    return mv.concatenate(parts) if len(parts) > 1 else parts[0]


def unwrap(p: ArrayLike, discont: ArrayLike | None = None, axis: int = -1,
           period: ArrayLike = 2 * np.pi) -> Tensor:
    """Unwrap phases (numpy.unwrap): where consecutive values along `axis` jump by more than `discont` (period / 2
    by default), add multiples of `period` so that they do not.

    >>> tnp.unwrap(tnp.asarray([0.0, 3.0, 6.5])).tolist()    # 6.5 - 2 pi
    [0.0, 3.0, 0.21681475639343262]
    """
    from tgfx.numpy._standard import diff
    x, per = _promote("unwrap", p, period)
    if x.dtype.is_complex:
        raise ValueError("unwrap: complex inputs are not supported; unwrap tnp.angle(p) instead")
    if x.ndim == 0:
        raise ValueError("unwrap: p must have at least one dimension")
    axis = normalize_axis(axis, x.ndim, "unwrap")
    if x.shape[axis] == 0:
        return x
    half = per // 2 if x.dtype.is_int else per / 2
    disc = half if discont is None else discont
    dd_ = diff(x, axis=axis)
    mod = ew.remainder(dd_ + half, per) - half
    mod = ew.where(ew.logical_and(mod == -half, dd_ > 0), half, mod)
    correct = ew.where(ew.absolute(dd_) < disc, 0, mod - dd_).astype(x.dtype)
    rest = _along(x, axis, 1, None) + rd.cumsum(correct, axis=axis)
    return mv.concatenate([_along(x, axis, 0, 1), rest.astype(x.dtype)], axis=axis)


# ---- polynomials (coefficients highest power first, as numpy.poly1d) ----
def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Tensor:
    """The polynomial with coefficients p (highest power first) at x, by Horner's rule (numpy.polyval). A 2-d p
    holds one polynomial per column, broadcast against x.

    Up to `unroll` coefficients are unrolled into one fused expression; longer ones run as a `lax.scan`.

    >>> tnp.polyval(tnp.asarray([1.0, 0.0, -2.0]), tnp.asarray([0.0, 3.0])).tolist()    # x^2 - 2
    [-2.0, 7.0]
    """
    pt, xt = _promote("polyval", p, x)
    if pt.ndim == 0:
        raise ValueError("polyval: p must have at least one dimension (the coefficients)")
    y = Tensor.full(broadcast_shapes(pt.shape[1:], xt.shape, name="polyval"), 0, xt.dtype)
    if pt.shape[0] <= max(int(unroll), 1):
        for i in range(pt.shape[0]):
            y = y * xt + pt[i]
        return y
    from tgfx import lax
    y, _ = lax.scan(lambda acc, c: (acc * xt + c, None), y, pt)
    return y


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """The sum of two polynomials (coefficient arrays, highest power first; numpy.polyadd).

    >>> tnp.polyadd(tnp.asarray([1, 2]), tnp.asarray([1, 0, 0])).tolist()
    [1, 1, 2]
    """
    x, y = _promote("polyadd", a1, a2)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"polyadd: coefficients must be arrays, got shapes {x.shape} and {y.shape}")
    if x.shape[0] < y.shape[0]:
        x, y = y, x
    lead = ((x.shape[0] - y.shape[0], 0),) + ((0, 0),) * (y.ndim - 1)
    return x + y.pad_zeros(lead)


def polysub(a1: ArrayLike, a2: ArrayLike) -> Tensor:
    """The difference of two polynomials (numpy.polysub).

    >>> tnp.polysub(tnp.asarray([1, 2]), tnp.asarray([1, 0, 0])).tolist()
    [-1, 1, 2]
    """
    x, y = _promote("polysub", a1, a2)
    return polyadd(x, -y)


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Tensor:
    """The product of two polynomials (numpy.polymul): the full convolution of their coefficients, in an inexact
    type. `trim_leading_zeros=True` drops leading zero coefficients first (reads the values: eagerly only).

    >>> tnp.polymul(tnp.asarray([1.0, 1.0]), tnp.asarray([1.0, -1.0])).tolist()    # (x + 1)(x - 1)
    [1.0, 0.0, -1.0]
    """
    x, y = _promote("polymul", a1, a2, inexact=True)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"polymul: coefficients must be 1-d, got shapes {x.shape} and {y.shape}")
    if trim_leading_zeros and (x.shape[0] > 1 or y.shape[0] > 1):
        hint = "Pass trim_leading_zeros=False (the default) inside jit"
        x, y = (t[int(np.argmax(dd.host_value(t, "polymul", "its coefficients", hint) != 0)):]
                if bool(np.any(dd.host_value(t, "polymul", "its coefficients", hint) != 0)) else t[:0] for t in (x, y))
    if x.shape[0] == 0:
        x = Tensor.full((1,), 0, y.dtype)
    if y.shape[0] == 0:
        y = Tensor.full((1,), 0, x.dtype)
    return convolve(x, y, mode="full")


def polyder(p: ArrayLike, m: int = 1) -> Tensor:
    """The m-th derivative of a polynomial (numpy.polyder), in an inexact type.

    >>> tnp.polyder(tnp.asarray([1.0, 1.0, 1.0, 1.0])).tolist()    # x^3 + x^2 + x + 1
    [3.0, 2.0, 1.0]
    """
    (pt,) = _promote("polyder", p, inexact=True)
    m = _order(m, "polyder", "derivative")
    if pt.ndim != 1:
        raise ValueError(f"polyder: p must be 1-d, got shape {pt.shape}")
    if m == 0:
        return pt
    n = pt.shape[0]
    # the factor of the coefficient of x^k after m derivatives: k (k-1) ... (k-m+1), computed exactly on the host
    powers = np.arange(n - 1, m - 1, -1, dtype=np.float64)
    coeff = np.prod(powers[None, :] - np.arange(m, dtype=np.float64)[:, None], axis=0) if powers.size else powers
    return pt[:max(n - m, 0)] * Tensor(coeff, dtype=pt.dtype, device=pt.uop.device)


def polyint(p: ArrayLike, m: int = 1, k: ArrayLike | None = None) -> Tensor:
    """The m-th antiderivative of a polynomial (numpy.polyint), with integration constants `k` (a scalar for all
    m, or m of them, the first integral's first).

    >>> tnp.polyint(tnp.asarray([3.0, 2.0, 1.0]), k=5.0).tolist()    # x^3 + x^2 + x + 5
    [1.0, 1.0, 1.0, 5.0]
    """
    m = _order(m, "polyint", "integral")
    pt, kt = _promote("polyint", p, 0 if k is None else k, inexact=True)
    if pt.ndim != 1:
        raise ValueError(f"polyint: p must be 1-d, got shape {pt.shape}")
    kt = kt.reshape(-1)
    if kt.shape[0] == 1:
        kt = kt.expand((m,))
    if kt.shape != (m,):
        raise ValueError(f"polyint: k must be a scalar or a 1-d array of length 1 or m={m}, got shape {kt.shape}")
    if m == 0:
        return pt
    n = pt.shape[0]
    grid = np.arange(n + m, dtype=np.float64)[None, :] - np.arange(m, dtype=np.float64)[:, None]
    coeff = np.maximum(1.0, grid).prod(axis=0)[::-1].copy()
    return mv.concatenate([pt, kt]) / Tensor(coeff, dtype=pt.dtype, device=pt.uop.device)


def _order(m: int, fn: str, what: str) -> int:
    if not isinstance(m, (int, np.integer)) or m < 0:
        raise ValueError(f"{fn}: the order of the {what} must be a non-negative Python int, got {m!r}")
    return int(m)


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803 - numpy's name
    """The Vandermonde matrix of 1-d x (numpy.vander): column j is x ** (N - 1 - j), or x ** j when `increasing`.

    >>> tnp.vander(tnp.asarray([2, 3]), 3).tolist()
    [[4, 2, 1], [9, 3, 1]]
    """
    xt = to_tensor(x)
    if xt.ndim != 1:
        raise ValueError(f"vander: x must be 1-d, got shape {xt.shape}")
    n = xt.shape[0] if N is None else int(N)
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    powers = Tensor.arange(n, dtype=dtypes.int32 if xt.dtype.is_bool else xt.dtype)
    return ew.power(xt.reshape(-1, 1), (powers if increasing else (n - 1) - powers).reshape(1, n))


def _lstsq(a: Tensor, b: Tensor, rcond: float) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """jnp.linalg.lstsq's (x, residuals, rank, singular values) for a 2-d a and a 2-d b, through the SVD."""
    from tgfx.numpy import linalg
    u, s, vt = linalg.svd(a, full_matrices=False)
    keep = ew.logical_and(s > 0, s >= rcond * s[0])
    s_inv = keep.where(1 / keep.where(s, 1), 0).reshape(-1, 1)
    x = vt.permute(1, 0) @ (s_inv * (u.permute(1, 0) @ b))
    resid = rd.sum(ew.square(b - a @ x), axis=0)
    return x, resid, rd.sum(keep.astype(dtypes.int32)).astype(dtypes.default_int), s


def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None, full: bool = False,
            w: ArrayLike | None = None, cov: bool | str = False) -> Tensor | tuple[Tensor, ...]:
    """The least-squares polynomial of degree `deg` through the points (x, y) (numpy.polyfit): its coefficients,
    highest power first (one column per column of a 2-d y).

    Solved as JAX does: the Vandermonde columns scaled to unit norm, then the SVD least squares with singular
    values below rcond * max dropped (rcond defaults to len(x) * eps). `w` weights the residuals;
    `full=True` also returns (residuals, rank, singular values, rcond); `cov=True` (or "unscaled") the
    coefficients' covariance. Differentiable in x, y and w.

    >>> tnp.polyfit(tnp.asarray([0.0, 1.0, 2.0]), tnp.asarray([1.0, 3.0, 5.0]), 1).tolist()    # 2 x + 1
    [2.0, 1.0]
    """
    from tgfx.numpy import linalg
    args = (x, y) if w is None else (x, y, w)
    xt, yt, *wt = _promote("polyfit", *args, inexact=True)
    deg = _order(deg, "polyfit", "polynomial (deg)")
    order = deg + 1
    if xt.ndim != 1 or xt.shape[0] == 0:
        raise ValueError(f"polyfit: x must be a non-empty 1-d array, got shape {xt.shape}")
    if yt.ndim not in (1, 2) or yt.shape[0] != xt.shape[0]:
        raise ValueError(f"polyfit: y must be 1-d or 2-d with len(x)={xt.shape[0]} rows, got shape {yt.shape}")
    rcond = float(xt.shape[0] * np.finfo(xt.dtype.np).eps) if rcond is None else float(rcond)
    lhs, rhs = vander(xt, order), yt
    if wt:
        if wt[0].shape != (xt.shape[0],):
            raise ValueError(f"polyfit: w must be 1-d with one weight per point ({xt.shape[0]}), got shape "
                             f"{wt[0].shape}")
        lhs = lhs * wt[0].reshape(-1, 1)
        rhs = rhs * (wt[0].reshape(-1, 1) if rhs.ndim == 2 else wt[0])
    scale = ew.sqrt(rd.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = _lstsq(lhs, rhs.reshape(rhs.shape[0], -1), rcond)
    c = c / scale.reshape(-1, 1)
    if rhs.ndim == 1:
        c, resids = c.reshape(-1), resids.reshape(-1)
    if full:
        return c, resids, rank, s, Tensor.full((), rcond, xt.dtype)
    if not cov:
        return c
    base = linalg.inv(lhs.permute(1, 0) @ lhs) / (scale.reshape(-1, 1) * scale.reshape(1, -1))
    if cov == "unscaled":
        fac = Tensor.full((1,), 1.0, xt.dtype)
    else:
        if xt.shape[0] <= order:
            raise ValueError(f"polyfit: scaling the covariance needs more points than coefficients, got "
                             f"{xt.shape[0]} points for deg={deg}; pass cov='unscaled'")
        fac = (resids / (xt.shape[0] - order)).reshape(-1)
    if yt.ndim == 1:
        return c, base * fac.reshape(1, -1)
    return c, base.reshape(order, order, 1) * fac.reshape(1, 1, -1)


__all__ = ["convolve", "correlate", "ediff1d", "gradient", "interp", "polyadd", "polyder", "polyfit", "polyint",
           "polymul", "polysub", "polyval", "trapezoid", "unwrap", "vander"]
