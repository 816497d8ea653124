"""The layers as plain functions of (input, parameters): convolution, pooling, normalisation, dropout, attention.

The `Module`s in `_modules.py` are thin shells over these that hold hyperparameters and make parameters.

Convolution and pooling are `tg.lax`'s: `conv2d` is `conv_nd` (`tgfx/_lax_conv.py`, the core of
`tg.lax.conv_general_dilated`: one fused kernel, with a backward of two convolution kernels), and the pools are
`tg.lax.reduce_window` (`tgfx/_lax_window.py`). This module adds the layer conventions: NCHW, ints or pairs for
strides and dilations, symmetric int padding, and errors named for the layer.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx import _lax_elementwise as lax_ew
from tgfx import random
from tgfx._lax_conv import conv_nd
from tgfx._lax_window import padtype_to_pads, reduce_window
from tgfx.dtypes import dtypes
from tgfx.nn._activations import softmax
from tgfx.numpy._reduce import _axes
from tgfx.tensor import ArrayLike, Tensor, promote, to_tensor

Padding = str | int | Sequence[int] | Sequence[tuple[int, int]]


def _pair(v: int | Sequence[int], n: int, name: str, fn: str, low: int = 1) -> tuple[int, ...]:
    """An int or a length-n sequence of ints >= low, as a tuple of n ints."""
    out = (v,) * n if isinstance(v, (int, np.integer)) else tuple(v)
    if len(out) != n or not all(isinstance(i, (int, np.integer)) and i >= low for i in out):
        raise ValueError(f"{fn}: {name} must be an int >= {low} or {n} of them, got {v!r}")
    return tuple(int(i) for i in out)


def _padding(padding: Padding, in_sizes: Sequence[int], k: Sequence[int], s: Sequence[int], d: Sequence[int],
             fn: str) -> tuple[tuple[int, int], ...]:
    """(before, after) per spatial axis. "SAME" is JAX's / TensorFlow's: output size ceil(in / stride), the odd
    padding element after; "VALID" is none; an int or per-axis ints pad both sides; or explicit pairs."""
    n = len(in_sizes)
    if isinstance(padding, str):
        if padding.upper() in ("SAME", "VALID"):
            span = [(kk - 1) * dd + 1 for kk, dd in zip(k, d, strict=True)]
            return tuple(padtype_to_pads(in_sizes, span, s, padding))
        raise ValueError(f"{fn}: padding must be 'SAME', 'VALID', an int, {n} ints or {n} (before, after) pairs, "
                         f"got {padding!r}")
    if isinstance(padding, (int, np.integer)):
        padding = (int(padding),) * n
    pads = tuple(padding)
    if len(pads) == n and all(isinstance(p, (int, np.integer)) for p in pads):
        pads = tuple((int(p), int(p)) for p in pads)
    if len(pads) != n or not all(isinstance(p, Sequence) and len(p) == 2 and min(p) >= 0 for p in pads):
        raise ValueError(f"{fn}: padding must be 'SAME', 'VALID', an int, {n} ints or {n} (before, after) pairs of "
                         f"non-negative ints, got {padding!r}")
    return tuple((int(a), int(b)) for a, b in pads)


def _geometry(x: Tensor, k: tuple[int, ...], stride: int | Sequence[int], padding: Padding,
              dilation: int | Sequence[int], fn: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple]:
    """(stride, dilation, padding pairs) of a window op on NCHW x; errors name the function and the sizes that do
    not fit."""
    s = _pair(stride, 2, "stride", fn)
    d = _pair(dilation, 2, "dilation", fn)
    pads = _padding(padding, x.shape[2:], k, s, d, fn)
    padded = [i + a + b for i, (a, b) in zip(x.shape[2:], pads, strict=True)]
    span = [dd * (kk - 1) + 1 for kk, dd in zip(k, d, strict=True)]
    if any(p < sp for p, sp in zip(padded, span, strict=True)):
        raise ValueError(f"{fn}: the window (kernel {k}, dilation {d}, spanning {tuple(span)}) is larger than the "
                         f"padded input {tuple(padded)} (input {x.shape[2:]}, padding {pads}); pad more or use a "
                         f"smaller kernel")
    return s, d, pads


def conv2d(x: ArrayLike, kernel: ArrayLike, bias: ArrayLike | None = None, stride: int | Sequence[int] = 1,
           padding: Padding = 0, dilation: int | Sequence[int] = 1, groups: int = 1) -> Tensor:
    """2-d convolution (cross-correlation, as in every deep-learning library) of NCHW input with an OIHW kernel.

    x: (N, C, H, W); kernel: (O, C // groups, KH, KW); bias: (O,) or None. `stride` and `dilation` are an int or
    (sh, sw); `padding` is "SAME" (output H = ceil(H / stride), as JAX), "VALID", an int, (ph, pw) or
    ((top, bottom), (left, right)). `groups` splits C and O into that many independent convolutions (groups = C is
    a depthwise convolution). Output: (N, O, OH, OW) with OH = (H + pad - dilation * (KH - 1) - 1) // stride + 1.

    Runs as one kernel: a broadcast multiply of a view of every window with the kernel, summed over (C, KH, KW), a
    direct convolution (padding a mask on the input's index, no im2col). Its gradient is two more such kernels (the
    input's a convolution with the flipped kernel, the kernel's a sum of windows times the output gradient, read
    through channels-last copies of x and the gradient).

    >>> x = tg.asarray(np.ones((1, 1, 4, 4), np.float32)); w = tg.asarray(np.ones((2, 1, 3, 3), np.float32))
    >>> tg.nn.conv2d(x, w, padding="SAME").shape      # (1, 2, 4, 4); corners are 4., the middle 9.
    """
    x, w = to_tensor(x), to_tensor(kernel)
    if x.ndim != 4:
        raise ValueError(f"conv2d: input must be 4-d (N, C, H, W), got shape {x.shape}; add a batch axis with "
                         f"x[None] for a single image")
    if w.ndim != 4:
        raise ValueError(f"conv2d: kernel must be 4-d (O, C // groups, KH, KW), got shape {w.shape}")
    if not isinstance(groups, (int, np.integer)) or groups < 1 or x.shape[1] % groups or w.shape[0] % groups:
        raise ValueError(f"conv2d: groups={groups!r} must be a positive int dividing the input channels "
                         f"({x.shape[1]}) and the output channels ({w.shape[0]})")
    if x.shape[1] != w.shape[1] * groups:
        raise ValueError(f"conv2d: input has {x.shape[1]} channels (shape {x.shape}) but the kernel of shape {w.shape} "
                         f"expects {w.shape[1] * groups} ({w.shape[1]} per group x {groups} groups)")
    x, w = promote(x, w, "conv2d")
    o, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    s, d, pads = _geometry(x, (kh, kw), stride, padding, dilation, "conv2d")
    out = conv_nd(x, w, s, pads, d, int(groups))
    if bias is not None:
        bt = to_tensor(bias)
        if bt.shape != (o,):
            raise ValueError(f"conv2d: bias must have shape ({o},) (one per output channel), got {bt.shape}")
        out = out + bt.reshape(o, 1, 1)
    return out


def _pool(x: ArrayLike, window: int | Sequence[int], stride: int | Sequence[int] | None, padding: Padding,
          fn: str, computation: Any, init: float) -> Tensor:
    t = to_tensor(x)
    if t.ndim != 4:
        raise ValueError(f"{fn}: input must be 4-d (N, C, H, W), got shape {t.shape}")
    k = _pair(window, 2, "window", fn)
    s, _, pads = _geometry(t, k, k if stride is None else stride, padding, 1, fn)
    return reduce_window(t, init, computation, (1, 1, *k), (1, 1, *s), ((0, 0), (0, 0), *pads))


def max_pool2d(x: ArrayLike, window: int | Sequence[int], stride: int | Sequence[int] | None = None,
               padding: Padding = 0) -> Tensor:
    """The maximum of each (KH, KW) window of NCHW input; stride defaults to the window (non-overlapping).
    Padding counts as -inf, so it never wins. (`tg.lax.reduce_window` with `tg.lax.max`.)

    >>> tg.nn.max_pool2d(x, 2).shape                 # (N, C, H // 2, W // 2)
    """
    t = to_tensor(x)
    low = float("-inf") if t.dtype.is_float else int(np.iinfo(t.dtype.np).min)
    return _pool(t, window, stride, padding, "max_pool2d", lax_ew.max, low)


def avg_pool2d(x: ArrayLike, window: int | Sequence[int], stride: int | Sequence[int] | None = None,
               padding: Padding = 0) -> Tensor:
    """The mean of each (KH, KW) window of NCHW input (padding counts as zeros, as in PyTorch's default).
    (`tg.lax.reduce_window` with `tg.lax.add`, divided by the window size.)"""
    k = _pair(window, 2, "window", "avg_pool2d")
    return _pool(x, window, stride, padding, "avg_pool2d", lax_ew.add, 0) / (k[0] * k[1])


def _stats_dtype(t: Tensor) -> Tensor:
    """Half-precision inputs take their mean and variance in float32 (as flax does): a float16 sum of squares of a
    few thousand values overflows or loses every digit."""
    return t.astype(dtypes.float32) if t.dtype in (dtypes.float16, dtypes.bfloat16) else t


def _affine(y: Tensor, p: ArrayLike | None, axes: tuple[int, ...], name: str, fn: str) -> Tensor:
    """y * p (or + p) with p shaped like the normalised axes, broadcast over the others."""
    if p is None:
        return y
    pt = to_tensor(p)
    want = tuple(y.shape[a] for a in axes)
    if pt.shape != want:
        raise ValueError(f"{fn}: {name} must have the shape of the normalised axes {axes} of the input "
                         f"{y.shape}, i.e. {want}, got {pt.shape}")
    return pt.reshape(tuple(y.shape[a] if a in axes else 1 for a in range(y.ndim)))


def layer_norm(x: ArrayLike, scale: ArrayLike | None = None, bias: ArrayLike | None = None,
               axis: int | Sequence[int] = -1, epsilon: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + epsilon) * scale + bias, with mean and (biased) variance over `axis`.

    `scale` and `bias` have the shape of the normalised axes (or are None). Statistics of float16 / bfloat16
    input are taken in float32; the result has x's dtype.

    >>> tg.nn.layer_norm(tg.asarray([[1.0, 2.0, 3.0]]))   # [[-1.2247, 0., 1.2247]]
    """
    t = to_tensor(x)
    axes = _axes(t, axis, "layer_norm")
    s = _stats_dtype(t)
    mean = tnp.mean(s, axis=axes, keepdims=True)
    c = s - mean
    var = tnp.mean(c * c, axis=axes, keepdims=True)
    y = (c * (1 / tnp.sqrt(var + epsilon))).astype(t.dtype)
    if scale is not None:
        y = y * _affine(y, scale, axes, "scale", "layer_norm")
    if bias is not None:
        y = y + _affine(y, bias, axes, "bias", "layer_norm")
    return y


def rms_norm(x: ArrayLike, scale: ArrayLike | None = None, axis: int | Sequence[int] = -1,
             epsilon: float = 1e-6) -> Tensor:
    """x / sqrt(mean(x ** 2, axis) + epsilon) * scale (root-mean-square normalisation, no centring).

    >>> tg.nn.rms_norm(tg.asarray([[3.0, 4.0]]))       # [[0.8485, 1.1314]]
    """
    t = to_tensor(x)
    axes = _axes(t, axis, "rms_norm")
    s = _stats_dtype(t)
    ms = tnp.mean(s * s, axis=axes, keepdims=True)
    y = (s * (1 / tnp.sqrt(ms + epsilon))).astype(t.dtype)
    return y if scale is None else y * _affine(y, scale, axes, "scale", "rms_norm")



def dropout(x: ArrayLike, rate: float, key: Tensor) -> Tensor:
    """Zero each element with probability `rate` and scale the rest by 1 / (1 - rate), so the expectation is x.

    `key` is a `tg.random.key`; the same key drops the same elements. rate 0 is the identity; rate 1 gives zeros.

    >>> y = tg.nn.dropout(x, 0.1, tg.random.key(0))
    """
    t = to_tensor(x)
    if not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
        raise ValueError(f"dropout: rate must be a float in [0, 1], got {rate!r}")
    if rate == 0:
        return t
    if rate == 1:
        return tnp.zeros_like(t)
    keep = random.bernoulli(key, 1.0 - rate, t.shape)
    return keep.where(t * (1.0 / (1.0 - rate)), tnp.zeros((), t.dtype))


def _large_negative(t: Tensor) -> float:
    """A finite stand-in for -inf in masked attention logits (JAX's choice): a fully masked row then gets uniform
    weights instead of 0 / 0 = NaN."""
    return -0.7 * float(np.finfo(np.float32 if t.dtype == dtypes.bfloat16 else t.dtype.np).max)


def dot_product_attention(query: ArrayLike, key: ArrayLike, value: ArrayLike, bias: ArrayLike | None = None,
                          mask: ArrayLike | None = None, *, scale: float | None = None, is_causal: bool = False,
                          dropout_rate: float = 0.0, dropout_key: Tensor | None = None) -> Tensor:
    """softmax(q k^T * scale + bias, masked) v, per head, with `jax.nn.dot_product_attention`'s layout.

    query: (..., T, N, H) (T queries, N heads of size H); key and value: (..., S, N, H). `scale` defaults to
    1 / sqrt(H). `bias` and the boolean `mask` (True = attend) broadcast to the logits' shape (..., N, T, S).
    `is_causal` lets query t attend only to keys s <= t (top-left aligned, as JAX). `dropout_rate` > 0 drops
    attention weights (after the softmax, as in the original Transformer) and needs `dropout_key`.
    Result: (..., T, N, H).

    >>> q = k = v = tg.asarray(np.ones((2, 5, 4, 8), np.float32))
    >>> tg.nn.dot_product_attention(q, k, v, is_causal=True).shape     # (2, 5, 4, 8)
    """
    q, k, v = to_tensor(query), to_tensor(key), to_tensor(value)
    if q.ndim < 3 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(f"dot_product_attention: query, key and value must be (..., T, N, H) with the same number "
                         f"of axes (at least 3), got shapes {q.shape}, {k.shape} and {v.shape}")
    if k.shape != v.shape or k.shape[-2:] != q.shape[-2:] or k.shape[:-3] != q.shape[:-3]:
        raise ValueError(f"dot_product_attention: key and value must have the same shape (..., S, N, H) and share "
                         f"the query's batch axes, heads N and head size H; got query {q.shape}, key {k.shape}, "
                         f"value {v.shape}")
    nb = q.ndim - 3
    t_len, s_len, h = q.shape[-3], k.shape[-3], q.shape[-1]
    heads_first = (*range(nb), nb + 1, nb, nb + 2)                        # (..., T, N, H) -> (..., N, T, H)
    qh, kh, vh = q.permute(heads_first), k.permute(heads_first), v.permute(heads_first)
    logits = qh @ tnp.swapaxes(kh, -1, -2) * (float(scale) if scale is not None else 1.0 / float(np.sqrt(h)))
    if bias is not None:
        logits = logits + to_tensor(bias)
    keep = None
    if mask is not None:
        m = to_tensor(mask)
        if not m.dtype.is_bool:
            raise TypeError(f"dot_product_attention: mask must be boolean (True = attend), got dtype {m.dtype.name}")
        keep = m
    if is_causal:
        causal = tnp.tri(t_len, s_len, dtype=dtypes.bool)
        keep = causal if keep is None else keep & causal
    if keep is not None:
        logits = keep.where(logits, _large_negative(logits))
    weights = softmax(logits, axis=-1)
    if dropout_rate:
        if dropout_key is None:
            raise ValueError("dot_product_attention: dropout_rate > 0 needs a dropout_key (a tg.random.key)")
        weights = dropout(weights, dropout_rate, dropout_key)
    out = weights @ vh                                                   # (..., N, T, H)
    return out.permute((*range(nb), nb + 1, nb, nb + 2))
