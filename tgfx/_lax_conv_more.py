"""`tg.lax.conv_transpose`, `conv_general_dilated_patches` and the shape helpers of `jax.lax`'s convolutions.

`conv_transpose` is what JAX makes of it: a `conv_general_dilated` with the strides as `lhs_dilation` (zeros between
the input's elements) and a padding that gives Keras' `Conv2DTranspose` output size, so it runs as tgfx's direct
convolution (`_lax_conv.conv_nd`, one kernel) and differentiates with that convolution's backward.
`conv_general_dilated_patches` is the window view of `_lax_window._windows` laid out as channels: JAX convolves with
an identity kernel, which multiplies every element by 0 or 1 (an inf or NaN in a window spreads to every channel of
its patch); a view copies them exactly, in one kernel, and differentiates as a view.

>>> y = tg.lax.conv_transpose(tnp.ones((1, 4, 4, 3)), tnp.ones((3, 3, 3, 8)), (2, 2), "SAME")   # NHWC, HWIO
>>> y.shape                                                                                     # (1, 8, 8, 8)
>>> tg.lax.conv_general_dilated_patches(tnp.ones((1, 3, 5, 5)), (2, 2), (1, 1), "VALID").shape  # (1, 12, 4, 4)
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tgfx._lax_conv import (
    ConvDimensionNumbers,
    check_precision,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_pads,
)
from tgfx._lax_conv import conv_general_permutations as conv_general_permutations
from tgfx._lax_window import _windows, dilate, ints, pad_general, pad_pairs, padtype_to_pads
from tgfx.dtypes import to_dtype
from tgfx.tensor import ArrayLike, Tensor, to_tensor

# conv_transpose's layouts when dimension_numbers is None: TensorFlow's channels-last, by operand rank
_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                      5: ("NHWDC", "HWDIO", "NHWDC")}


def _dilate_dim(d: int, r: int) -> int:
    return 0 if d == 0 else 1 + r * (d - 1)


def _stride_dim(d: int, window: int, stride: int) -> int:
    return max(0, (d - window) // stride + 1)


def _conv_transpose_padding(k: int, s: int, padding: str | tuple[int, int]) -> tuple[int, int]:
    """The (low, high) padding of the dilated input that gives a transposed convolution the output size of Keras'
    Conv2DTranspose: for "SAME" in * s, for "VALID" in * s + max(k - s, 0); a pair is the forward convolution's own
    padding (PyTorch's meaning, `use_consistent_padding=True`), giving k - 1 - p on each side (JAX's rule)."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else math.ceil(total / 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        low = k - 1
    else:
        lo, hi = k - padding[0] - 1, k - padding[1] - 1
        return lo, hi
    return low, total - low


def conv_transpose(lhs: ArrayLike, rhs: ArrayLike, strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None, preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Tensor:
    """The n-d transposed ("fractionally strided") convolution, as `jax.lax.conv_transpose`.

    A convolution of `lhs` with `s - 1` zeros put between its elements (`lhs_dilation=strides`) and stride 1, so
    a stride-2 "SAME" transposed convolution doubles the spatial size. `padding` is "SAME" or "VALID" (read as the
    padding of the forward convolution this one transposes: the output has in * s, resp. in * s + max(k - s, 0)
    elements per axis), or one (low, high) pair per spatial axis: the padding of the dilated input itself, or, with
    `use_consistent_padding=True`, the forward convolution's padding, so that `conv_transpose` with a forward
    convolution's stride and padding is that convolution's input gradient (PyTorch's `ConvTranspose`).
    `dimension_numbers` defaults to TensorFlow's layouts ("NHWC", "HWIO", "NHWC" for 2-d, "NHC" ... for 1-d, up to
    3-d); `transpose_kernel=True` flips the kernel's spatial axes and swaps its I and O axes (Keras'
    `Conv2DTranspose`, the gradient of a forward convolution with that kernel). `rhs_dilation` spaces the kernel
    taps; `precision` is checked and ignored; `preferred_element_type` is the result dtype.

    One direct-convolution kernel (`conv_general_dilated` with `lhs_dilation`, as JAX lowers it); differentiable in
    both operands.

    >>> x, w = tnp.ones((1, 4, 4, 3)), tnp.ones((3, 3, 3, 8))
    >>> tg.lax.conv_transpose(x, w, (2, 2), "SAME").shape                          # (1, 8, 8, 8)
    >>> tg.lax.conv_transpose(x, w, (2, 2), "VALID").shape                         # (1, 9, 9, 8)
    >>> tg.lax.conv_transpose(x, w, (2, 2), [(1, 1), (1, 1)], use_consistent_padding=True).shape   # (1, 7, 7, 8)
    """
    fn = "conv_transpose"
    check_precision(fn, precision)
    x, w = to_tensor(lhs), to_tensor(rhs)
    if x.ndim != w.ndim or x.ndim < 2:
        raise TypeError(f"{fn}: lhs and rhs must have the same rank, at least 2 (batch and feature axes), got shapes "
                        f"{x.shape} and {w.shape}")
    if dimension_numbers is None:
        if x.ndim not in _TRANSPOSE_LAYOUTS:
            raise ValueError(f"{fn}: there is no default dimension_numbers for rank-{x.ndim} operands (shapes "
                             f"{x.shape} and {w.shape}); give them, e.g. ('NCDHWT', 'OIDHWT', 'NCDHWT')")
        dimension_numbers = _TRANSPOSE_LAYOUTS[x.ndim]
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    nsp = x.ndim - 2
    what = "spatial dimension"
    s = ints(fn, "strides", strides, nsp, what)
    rd = ints(fn, "rhs_dilation", rhs_dilation, nsp, what)
    k = tuple(_dilate_dim(w.shape[a], r) for a, r in zip(dn.rhs_spec[2:], rd, strict=True))
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            raise ValueError(f"{fn}: padding must be 'SAME', 'VALID' or one (low, high) pair per {what} ({nsp}), "
                             f"got {padding!r}")
        pads = tuple(_conv_transpose_padding(kk, ss, padding) for kk, ss in zip(k, s, strict=True))
    else:
        pads = pad_pairs(fn, padding, nsp, what)
        if use_consistent_padding:
            pads = tuple(_conv_transpose_padding(kk, ss, p) for kk, ss, p in zip(k, s, pads, strict=True))
    if transpose_kernel:   # flip the spatial axes and swap I and O
        w = w.flip(tuple(dn.rhs_spec[2:])) if nsp else w
        order = list(range(w.ndim))
        order[dn.rhs_spec[0]], order[dn.rhs_spec[1]] = order[dn.rhs_spec[1]], order[dn.rhs_spec[0]]
        w = w.permute(order)
    if nsp == 0:   # no spatial axis (a matmul): given one of size 1, which conv_general_dilated's windows need
        dn1 = ConvDimensionNumbers(*((*spec, x.ndim) for spec in dn))
        out = conv_general_dilated(x[..., None], w[..., None], (1,), ((0, 0),), (1,), (1,), dn1,
                                   preferred_element_type=preferred_element_type)
        return out[..., 0]
    return conv_general_dilated(x, w, (1,) * nsp, pads, s, rd, dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs: ArrayLike, filter_shape: Sequence[int], window_strides: Sequence[int],
                                 padding: str | Sequence[tuple[int, int]], lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                                 precision: Any = None, preferred_element_type: Any = None) -> Tensor:
    """The patches `conv_general_dilated` would multiply with a kernel of spatial shape `filter_shape`, as the
    output's feature axis, as `jax.lax.conv_general_dilated_patches` (im2col).

    The output has the layout of `dimension_numbers[2]` (None: NCHW...), with a feature axis of C * prod(filter_shape)
    entries ordered (c, *filter spatial axes in the order dimension_numbers[1] lists them), c outermost.
    `filter_shape` is given in that order too. Strides, padding and dilations as in `conv_general_dilated`.

    The windows are copied, not multiplied by an identity kernel: an inf or NaN stays in its own patch entry.

    >>> x = tnp.arange(16.0).reshape(1, 1, 4, 4)
    >>> tg.lax.conv_general_dilated_patches(x, (2, 2), (2, 2), "VALID")[0, :, 0, 0].tolist()   # [0, 1, 4, 5]
    """
    fn = "conv_general_dilated_patches"
    check_precision(fn, precision)
    x = to_tensor(lhs)
    nsp = x.ndim - 2
    what = "spatial dimension"
    if nsp < 0:
        raise TypeError(f"{fn}: lhs needs a batch and a feature axis, got shape {x.shape}")
    fs = ints(fn, "filter_shape", filter_shape, nsp, what, low=0)
    dn = conv_dimension_numbers(x.shape, (1, 1, *fs), dimension_numbers)
    if preferred_element_type is not None:
        x = x.astype(to_dtype(preferred_element_type))
    x = x.permute(dn.lhs_spec)                                                 # (N, C, *in), a view
    s = ints(fn, "window_strides", window_strides, nsp, what)
    ld = ints(fn, "lhs_dilation", lhs_dilation, nsp, what)
    rd = ints(fn, "rhs_dilation", rhs_dilation, nsp, what)
    span = tuple(_dilate_dim(kk, r) for kk, r in zip(fs, rd, strict=True))
    pads = conv_pads(fn, padding, x.shape[2:], span, s, ld, what)
    x = dilate(x, range(2, 2 + nsp), ld)
    padded = [i + lo + hi for i, (lo, hi) in zip(x.shape[2:], pads, strict=True)]
    if any(p < 0 for p in padded):
        raise ValueError(f"{fn}: padding {pads} crops more than the lhs spatial size {x.shape[2:]} (after "
                         f"lhs_dilation {ld}) has")
    (n, c), size = x.shape[:2], math.prod(fs)
    outs = tuple(_stride_dim(p, sp, ss) for p, sp, ss in zip(padded, span, s, strict=True))
    if 0 in outs or size == 0 or n * c == 0:
        out = Tensor.full((n, c * size, *outs), 0, x.dtype)
    else:
        win = _windows(pad_general(x, ((0, 0), (0, 0), *pads)), fs, s, rd)   # (N, C, *out, *k)
        out = win.permute(0, 1, *range(2 + nsp, 2 + 2 * nsp), *range(2, 2 + nsp)).reshape(n, c * size, *outs)
    return out.permute(np.argsort(dn.out_spec).tolist())


# ---- shapes ----
def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], strides: Sequence[int],
                     pads: str | Sequence[tuple[int, int]], batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape of a convolution of operands in the canonical (N, C, *spatial) / (O, I, *spatial) layout,
    as `jax.lax.conv_shape_tuple` (a string `pads` is resolved with the undilated kernel).

    >>> tg.lax.conv_shape_tuple((2, 3, 9, 9), (8, 3, 3, 3), (2, 2), "SAME")        # (2, 8, 5, 5)
    """
    fn = "conv_shape_tuple"
    nsp = len(lhs_shape) - 2
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != nsp:
        raise TypeError(f"{fn}: wrong number of explicit pads for the convolution: expected {nsp}, got {len(pads)}")
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads, strict=True)]
    if any(p < 0 for p in padded):
        raise ValueError(f"{fn}: negative padding is larger than the corresponding dimension: got padding={pads} "
                         f"for lhs_shape[2:]={tuple(lhs_shape[2:])}")
    spatial = tuple(_stride_dim(p, k, s) for p, k, s in zip(padded, rhs_shape[2:], strides, strict=True))
    if batch_group_count > 1 and lhs_shape[0] % batch_group_count:
        raise ValueError(f"{fn}: the batch size {lhs_shape[0]} is not a multiple of batch_group_count "
                         f"{batch_group_count}")
    return (int(lhs_shape[0]) // batch_group_count, int(rhs_shape[0]), *spatial)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                             padding: str | Sequence[tuple[int, int]],
                             dimension_numbers: tuple[str, str, str]) -> tuple[int, ...]:
    """The output shape of `conv_general_dilated` with spec-string `dimension_numbers` (no dilation), as
    `jax.lax.conv_general_shape_tuple`.

    >>> tg.lax.conv_general_shape_tuple((2, 9, 9, 3), (3, 3, 3, 8), (1, 1), "VALID", ("NHWC", "HWIO", "NHWC"))
    (2, 7, 7, 8)
    """
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple(tuple(np.take(lhs_shape, lhs_perm)), tuple(np.take(rhs_shape, rhs_perm)), window_strides,
                           padding)
    return tuple(int(v) for v in np.take(out, np.argsort(out_perm)))


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                               padding: str | Sequence[tuple[int, int]],
                               dimension_numbers: tuple[str, str, str]) -> tuple[int, ...]:
    """The output shape of `conv_transpose` (no kernel dilation), as `jax.lax.conv_transpose_shape_tuple`.

    >>> tg.lax.conv_transpose_shape_tuple((1, 4, 4, 3), (3, 3, 3, 8), (2, 2), "SAME", ("NHWC", "HWIO", "NHWC"))
    (1, 8, 8, 8)
    """
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t, rhs_t = np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(int(k), s, padding) for k, s in zip(rhs_t[2:], window_strides, strict=True)]
    spatial = [(i - 1) * s - k + 2 + lo + hi
               for i, k, s, (lo, hi) in zip(lhs_t[2:], rhs_t[2:], window_strides, padding, strict=True)]
    out = (lhs_t[0], rhs_t[0], *spatial)
    return tuple(int(v) for v in np.take(out, np.argsort(out_perm)))


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of `reduce_window` with explicit (low, high) `padding`, as
    `jax.lax.reduce_window_shape_tuple`.

    >>> tg.lax.reduce_window_shape_tuple((8, 8), (2, 2), (2, 2), ((0, 0), (0, 0)))     # (4, 4)
    """
    if base_dilation is not None:
        operand_shape = [_dilate_dim(d, r) for d, r in zip(operand_shape, base_dilation, strict=True)]
    if window_dilation is not None:
        window_dimensions = [_dilate_dim(d, r) for d, r in zip(window_dimensions, window_dilation, strict=True)]
    padded = [d + lo + hi for d, (lo, hi) in zip(operand_shape, padding, strict=True)]
    return tuple(_stride_dim(p, w, s) for p, w, s in zip(padded, window_dimensions, window_strides, strict=True))


__all__ = ["conv_transpose", "conv_general_dilated_patches", "conv_shape_tuple", "conv_general_shape_tuple",
           "conv_transpose_shape_tuple", "conv_general_permutations", "reduce_window_shape_tuple"]
