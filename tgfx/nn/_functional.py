"""The layers as plain functions of (input, parameters): convolution, pooling, normalisation, dropout, attention.

The `Module`s in `_modules.py` are thin shells over these that hold hyperparameters and make parameters.

Convolution and pooling are built from movement ops only: `_windows` turns (..., H, W) into a view
(..., OH, OW, KH, KW) of every receptive field (nothing is copied), and the convolution is a broadcast multiply of
that view with the kernel and a sum over (C, KH, KW). The whole convolution is one fused kernel. Its backward is
written as two more such kernels (`grad_fxn`): differentiating the view itself would sum masked copies of the
tiled input, several times slower. Pooling's gradient is autodiff's.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx import random
from tgfx.dtypes import dtypes
from tgfx.function import function
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


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _padding(padding: Padding, in_sizes: Sequence[int], k: Sequence[int], s: Sequence[int], d: Sequence[int],
             fn: str) -> tuple[tuple[int, int], ...]:
    """(before, after) per spatial axis. "SAME" is JAX's / TensorFlow's: output size ceil(in / stride), the odd
    padding element after; "VALID" is none; an int or per-axis ints pad both sides; or explicit pairs."""
    n = len(in_sizes)
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return ((0, 0),) * n
        if mode == "SAME":
            out = []
            for i, kk, ss, dd in zip(in_sizes, k, s, d, strict=True):
                total = max((_cdiv(i, ss) - 1) * ss + (kk - 1) * dd + 1 - i, 0)
                out.append((total // 2, total - total // 2))
            return tuple(out)
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


def _windows(x: Tensor, k: Sequence[int], s: Sequence[int], d: Sequence[int]) -> Tensor:
    """Every window of the last len(k) axes as a view: (..., *in) -> (..., *out, *k), window element j of output
    position o being x[..., o * s + j * d] (tinygrad's `_pool`).

    Each spatial axis is tiled r times, cut to k rows of length L + d (one row per kernel tap, each starting d
    further along x than the last), and each row is strided by s. Only movement ops, so the index arithmetic folds
    into the consuming kernel. L is doubled when a row of o * s elements would not fit in L + d.
    """
    nsp = len(k)
    lead, ins = x.shape[:-nsp], x.shape[-nsp:]
    outs = [(i - dd * (kk - 1) - 1) // ss + 1 for i, kk, ss, dd in zip(ins, k, s, d, strict=True)]
    rows = [i * (1 + int(o * ss > i - dd * (kk - 1))) + dd for i, o, ss, dd, kk in zip(ins, outs, s, d, k, strict=True)]
    keep = [(0, n) for n in lead]
    x = tnp.tile(x, (1,) * len(lead) + tuple(_cdiv(kk * r, i) for kk, r, i in zip(k, rows, ins, strict=True)))
    x = x.shrink(keep + [(0, kk * r) for kk, r in zip(k, rows, strict=True)])
    x = x.reshape(lead + tuple(v for kk, r in zip(k, rows, strict=True) for v in (kk, r)))
    x = x.shrink(keep + [b for kk, o, ss in zip(k, outs, s, strict=True) for b in ((0, kk), (0, o * ss))])
    x = x.reshape(lead + tuple(v for kk, o, ss in zip(k, outs, s, strict=True) for v in (kk, o, ss)))
    x = x.shrink(keep + [b for kk, o in zip(k, outs, strict=True) for b in ((0, kk), (0, o), (0, 1))])
    x = x.reshape(lead + tuple(v for kk, o in zip(k, outs, strict=True) for v in (kk, o)))
    nl = len(lead)
    return x.permute(*range(nl), *(nl + 2 * j + 1 for j in range(nsp)), *(nl + 2 * j for j in range(nsp)))


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


def _pad(x: Tensor, pads: tuple, value: float = 0.0) -> Tensor:
    return tnp.pad(x, ((0, 0), (0, 0)) + tuple(pads), constant_values=value) if any(p != (0, 0) for p in pads) else x


def _correlate(x: Tensor, w: Tensor, s: tuple[int, ...], d: tuple[int, ...], groups: int) -> Tensor:
    """The convolution of padded x (N, C, H, W) with w (O, C // groups, KH, KW): a broadcast multiply of the window
    view with the kernel, summed over (C, KH, KW) in one kernel."""
    n, (o, cg, kh, kw) = x.shape[0], w.shape
    win = _windows(x, (kh, kw), s, d)                                          # (N, C, OH, OW, KH, KW)
    oh, ow = win.shape[2:4]
    a = win.reshape(n, groups, 1, cg, oh, ow, kh, kw)
    b = w.reshape(1, groups, o // groups, cg, 1, 1, kh, kw)
    return tnp.sum(a * b, axis=(3, 6, 7)).reshape(n, o, oh, ow)


def _dilate(g: Tensor, s: tuple[int, ...]) -> Tensor:
    """s - 1 zeros between neighbouring elements of the last two axes (the transpose of a stride)."""
    if s == (1, 1):
        return g
    n, o, oh, ow = g.shape
    t = g.reshape(n, o, oh, 1, ow, 1).pad_zeros(((0, 0), (0, 0), (0, 0), (0, s[0] - 1), (0, 0), (0, s[1] - 1)))
    return t.reshape(n, o, oh * s[0], ow * s[1]).shrink(((0, n), (0, o), (0, (oh - 1) * s[0] + 1),
                                                       (0, (ow - 1) * s[1] + 1)))


def _conv_input_grad(g: Tensor, w: Tensor, x_shape: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...],
                     pads: tuple, groups: int) -> Tensor:
    """d(conv)/dx as a convolution: the stride-dilated output gradient, padded by the dilated kernel span, correlated
    with the kernel flipped and transposed (per group) at the same dilation; then cut back to x's unpadded extent
    (rows of padded x that no window reached get 0)."""
    (_, cg, kh, kw), og = w.shape, w.shape[0] // groups
    wt = w.reshape(groups, og, cg, kh, kw).permute(0, 2, 1, 3, 4).reshape(cg * groups, og, kh, kw).flip((2, 3))
    span = (d[0] * (kh - 1), d[1] * (kw - 1))
    full = _correlate(_pad(_dilate(g, s), ((span[0], span[0]), (span[1], span[1]))), wt, (1, 1), d, groups)
    out = []
    for axis, ((before, _), size) in enumerate(zip(pads, x_shape[2:], strict=True)):
        have = full.shape[2 + axis]
        out.append((min(before, have), min(before + size, have), max(0, before + size - have)))
    full = full.shrink(((0, full.shape[0]), (0, full.shape[1]), *((a, b) for a, b, _ in out)))
    return full.pad_zeros(((0, 0), (0, 0), *((0, extra) for _, _, extra in out)))


def _conv_kernel_grad(g: Tensor, x: Tensor, w_shape: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...],
                      pads: tuple, groups: int) -> Tensor:
    """d(conv)/dkernel: the windows of padded x times the output gradient, summed over (N, OH, OW)."""
    (o, cg, kh, kw), og = w_shape, w_shape[0] // groups
    n, _, oh, ow = g.shape
    win = _windows(_pad(x, pads), (kh, kw), s, d)
    a = win.reshape(n, groups, 1, cg, oh, ow, kh, kw)
    b = g.reshape(n, groups, og, 1, oh, ow, 1, 1)
    return tnp.sum(a * b, axis=(0, 4, 5)).reshape(o, cg, kh, kw)


def conv2d(x: ArrayLike, kernel: ArrayLike, bias: ArrayLike | None = None, stride: int | Sequence[int] = 1,
           padding: Padding = 0, dilation: int | Sequence[int] = 1, groups: int = 1) -> Tensor:
    """2-d convolution (cross-correlation, as in every deep-learning library) of NCHW input with an OIHW kernel.

    x: (N, C, H, W); kernel: (O, C // groups, KH, KW); bias: (O,) or None. `stride` and `dilation` are an int or
    (sh, sw); `padding` is "SAME" (output H = ceil(H / stride), as JAX), "VALID", an int, (ph, pw) or
    ((top, bottom), (left, right)). `groups` splits C and O into that many independent convolutions (groups = C is
    a depthwise convolution). Output: (N, O, OH, OW) with OH = (H + pad - dilation * (KH - 1) - 1) // stride + 1.

    Runs as one kernel: a broadcast multiply of a view of every window with the kernel, summed over (C, KH, KW).
    Its gradient is two more such kernels (the input's a convolution with the flipped kernel, the kernel's a sum of
    windows times the output gradient).

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
    grp = int(groups)

    def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor, Tensor]:
        (g,), (xi, wi) = grads, call.inputs
        return (_conv_input_grad(g, wi, xi.shape, s, d, pads, grp),
                _conv_kernel_grad(g, xi, wi.shape, s, d, pads, grp))

    def conv2d(x: Tensor, w: Tensor) -> Tensor:
        return _correlate(_pad(x, pads), w, s, d, grp)

    # a function with its own backward: autodiff of the window view would sum masked tiled copies, several times
    # slower than these two convolutions
    out = function(conv2d, grad_fxn=backward)(x, w)
    if bias is not None:
        bt = to_tensor(bias)
        if bt.shape != (o,):
            raise ValueError(f"conv2d: bias must have shape ({o},) (one per output channel), got {bt.shape}")
        out = out + bt.reshape(o, 1, 1)
    return out


def _pool(x: ArrayLike, window: int | Sequence[int], stride: int | Sequence[int] | None, padding: Padding,
          fn: str, pad_value: float) -> Tensor:
    t = to_tensor(x)
    if t.ndim != 4:
        raise ValueError(f"{fn}: input must be 4-d (N, C, H, W), got shape {t.shape}")
    k = _pair(window, 2, "window", fn)
    s, d, pads = _geometry(t, k, k if stride is None else stride, padding, 1, fn)
    return _windows(_pad(t, pads, pad_value), k, s, d)


def max_pool2d(x: ArrayLike, window: int | Sequence[int], stride: int | Sequence[int] | None = None,
               padding: Padding = 0) -> Tensor:
    """The maximum of each (KH, KW) window of NCHW input; stride defaults to the window (non-overlapping).
    Padding counts as -inf, so it never wins.

    >>> tg.nn.max_pool2d(x, 2).shape                 # (N, C, H // 2, W // 2)
    """
    t = to_tensor(x)
    low = float("-inf") if t.dtype.is_float else int(np.iinfo(t.dtype.np).min)
    return tnp.max(_pool(t, window, stride, padding, "max_pool2d", low), axis=(-2, -1))


def avg_pool2d(x: ArrayLike, window: int | Sequence[int], stride: int | Sequence[int] | None = None,
               padding: Padding = 0) -> Tensor:
    """The mean of each (KH, KW) window of NCHW input (padding counts as zeros, as in PyTorch's default)."""
    return tnp.mean(_pool(x, window, stride, padding, "avg_pool2d", 0.0), axis=(-2, -1))


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
