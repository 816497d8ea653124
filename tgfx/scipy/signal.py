"""`tgfx.scipy.signal`: n-d convolution and correlation (direct and by FFT), detrending, and the short-time Fourier
transform with the spectral densities built on it (`stft`, `istft`, `csd`, `welch`), as `jax.scipy.signal` has them.

The direct convolutions are one `tgfx.lax.conv_general_dilated` each; `fftconvolve` and the spectral functions go
through `tgfx.numpy.fft`. Segmenting a signal into overlapping frames is one gather with a constant index, and
overlap-adding them back (`istft`) is padding, reshapes and one sum: no loop runs over samples or segments, shapes
never depend on values, and every function traces under `jit` and `vmap` and is differentiable where JAX's is.

>>> from tgfx.scipy import signal
>>> signal.convolve(tg.asarray([1.0, 2.0, 3.0]), tg.asarray([0.0, 1.0, 0.5]))          # [0, 1, 2.5, 4, 1.5]
>>> signal.convolve2d(img, kernel, mode="same")
>>> f, pxx = signal.welch(x, fs=100.0, nperseg=64)                                     # power spectral density
>>> f, t, zxx = signal.stft(x, nperseg=32); t, x2 = signal.istft(zxx, nperseg=32)    # x2 == x
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx.dtypes import DType, dtypes, to_complex
from tgfx.lax import complex as lax_complex
from tgfx.lax import conv_general_dilated
from tgfx.scipy._util import promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor, broadcast_shapes, normalize_axis, to_tensor

_MODES = ("full", "same", "valid")


def _check_mode(fn: str, mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"{fn}: mode must be one of 'full', 'same', 'valid', got {mode!r}")


def _check_pair(fn: str, a: Tensor, b: Tensor) -> None:
    if a.ndim != b.ndim:
        raise ValueError(f"{fn}: in1 and in2 must have the same number of dimensions, got shapes {a.shape} and "
                         f"{b.shape}")
    if a.size == 0 or b.size == 0:
        raise ValueError(f"{fn}: zero-size arrays are not supported, got shapes {a.shape} and {b.shape}")


# ---- convolution and correlation ----
def _convolve_nd(fn: str, in1: ArrayLike, in2: ArrayLike, mode: str, precision: Any) -> Tensor:
    """The n-d convolution of in1 and in2 as one conv_general_dilated: the larger one is the image, the smaller one
    the (flipped) kernel; 'same' keeps in1's shape centred as scipy does."""
    _check_mode(fn, mode)
    a, b = promote_args_inexact(fn, in1, in2)
    _check_pair(fn, a, b)
    if a.ndim == 0:   # no spatial axes: a product
        return a * b
    no_swap = all(s1 >= s2 for s1, s2 in zip(a.shape, b.shape, strict=True))
    swap = all(s1 <= s2 for s1, s2 in zip(a.shape, b.shape, strict=True))
    if not (no_swap or swap):
        raise ValueError(f"{fn}: one input must be at least as large as the other in every dimension, got shapes "
                         f"{a.shape} and {b.shape}")
    shape_o = b.shape
    if swap:
        a, b = b, a
    shape = b.shape
    b = tnp.flip(b)
    if mode == "valid":
        padding = [(0, 0)] * len(shape)
    elif mode == "same":
        padding = [(s - 1 - (so - 1) // 2, s - so + (so - 1) // 2) for s, so in zip(shape, shape_o, strict=True)]
    else:
        padding = [(s - 1, s - 1) for s in shape]
    return conv_general_dilated(a[None, None], b[None, None], (1,) * len(shape), padding, precision=precision)[0, 0]


def convolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
             precision: Any = None) -> Tensor:
    """The n-d convolution of in1 and in2 (scipy.signal.convolve): out[k] = sum_j in1[j] in2[k - j].

    `mode` 'full' (each axis n1 + n2 - 1 long), 'same' (in1's shape, centred) or 'valid' (where one input covers
    the other; one must be at least as large as the other along every axis). `method` 'direct' and 'auto' (as in
    JAX) run one direct convolution kernel, 'fft' goes through `fftconvolve`. Inputs of the same rank, promoted to
    one inexact type; complex inputs are fine.

    >>> convolve(tg.asarray([1.0, 2.0, 3.0]), tg.asarray([0.0, 1.0, 0.5]))                 # [0, 1, 2.5, 4, 1.5]
    >>> convolve(tg.asarray([1.0, 2.0, 3.0]), tg.asarray([0.0, 1.0, 0.5]), mode="same")    # [1, 2.5, 4]
    """
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method in ("direct", "auto"):
        return _convolve_nd("convolve", in1, in2, mode, precision)
    raise ValueError(f"convolve: method must be 'auto', 'direct' or 'fft', got {method!r}")


def correlate(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
              precision: Any = None) -> Tensor:
    """The n-d cross-correlation of in1 and in2 (scipy.signal.correlate): out[k] = sum_j in1[j + k] conj(in2[j]),
    which is `convolve(in1, conj(flip(in2)))`; `mode` and `method` as `convolve`.

    >>> correlate(tg.asarray([1.0, 2.0, 3.0]), tg.asarray([0.0, 1.0, 0.5]))                # [0.5, 2, 3.5, 3, 0]
    """
    (b,) = promote_args_inexact("correlate", in2)
    return convolve(in1, tnp.flip(tnp.conj(b) if b.dtype.is_complex else b), mode, method, precision)


def _check_2d(fn: str, in1: ArrayLike, in2: ArrayLike, boundary: str, fillvalue: ArrayLike) -> tuple[Tensor, Tensor]:
    zero_fill = not isinstance(fillvalue, Tensor) and np.ndim(fillvalue) == 0 and complex(fillvalue) == 0
    if boundary != "fill" or not zero_fill:
        raise NotImplementedError(f"{fn}: only boundary='fill' with fillvalue=0 is supported, as in JAX; got "
                                  f"boundary={boundary!r}, fillvalue={fillvalue!r}. Pad the input yourself (tnp.pad "
                                  f"with mode 'wrap', 'symmetric', ...) and use mode='valid'")
    a, b = to_tensor(in1), to_tensor(in2)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"{fn}: in1 and in2 must be 2-d, got shapes {a.shape} and {b.shape}")
    return a, b


def convolve2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
               fillvalue: ArrayLike = 0, precision: Any = None) -> Tensor:
    """The 2-d convolution of two 2-d arrays (scipy.signal.convolve2d); `mode` as `convolve`, and only the zero
    boundary (boundary='fill', fillvalue=0), as in JAX.

    >>> convolve2d(tnp.ones((3, 3)), tnp.ones((2, 2)), mode="valid")      # [[4, 4], [4, 4]]
    """
    a, b = _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd("convolve2d", a, b, mode, precision)


def correlate2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
                fillvalue: ArrayLike = 0, precision: Any = None) -> Tensor:
    """The 2-d cross-correlation of two 2-d arrays (scipy.signal.correlate2d); `mode` as `convolve`, and only the
    zero boundary, as in JAX. Where in2 is the larger input, the result is scipy's, which for 'full' and 'valid' is
    conj(correlate2d(in2, in1)) flipped.

    >>> correlate2d(tnp.ones((3, 3)), tnp.ones((2, 2)), mode="valid")     # [[4, 4], [4, 4]]
    """
    fn = "correlate2d"
    a, b = _check_2d(fn, in1, in2, boundary, fillvalue)
    a, b = promote_args_inexact(fn, a, b)
    conj = (lambda t: tnp.conj(t)) if a.dtype.is_complex else (lambda t: t)
    swap = all(s1 <= s2 for s1, s2 in zip(a.shape, b.shape, strict=True))
    same_shape = a.shape == b.shape
    # the cases are scipy's: which input is flipped (and the result conjugated) depends on which is larger
    if mode == "same" or (mode == "valid" and not (swap and not same_shape)) or (mode == "full" and not swap):
        return tnp.flip(_convolve_nd(fn, tnp.flip(a), conj(b), mode, precision))
    if mode == "valid":
        return _convolve_nd(fn, tnp.flip(b), conj(a), mode, precision)
    if mode == "full":
        return conj(_convolve_nd(fn, tnp.flip(b), conj(a), mode, precision))
    _check_mode(fn, mode)
    raise AssertionError("unreachable")


def fftconvolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", axes: int | Sequence[int] | None = None) -> Tensor:
    """The n-d convolution of in1 and in2 by FFT (scipy.signal.fftconvolve): the same values as `convolve` up to
    rounding, in O(n log n). `axes` (all by default) are convolved; along the others the inputs must have the same
    length (as in JAX) and are treated as a batch. 'valid' needs one input at least as large as the other along
    every convolved axis.

    >>> fftconvolve(tg.asarray([1.0, 2.0, 3.0]), tg.asarray([0.0, 1.0, 0.5]))              # [0, 1, 2.5, 4, 1.5]
    """
    fn = "fftconvolve"
    a, b = promote_args_inexact(fn, in1, in2)
    if a.ndim != b.ndim:
        raise ValueError(f"{fn}: in1 and in2 must have the same number of dimensions, got shapes {a.shape} and "
                         f"{b.shape}")
    _check_mode(fn, mode)
    if axes is None:
        ax = tuple(range(a.ndim))
    else:
        raw = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
        ax = tuple(sorted({normalize_axis(x, a.ndim, fn) for x in raw}))
    batch = [i for i in range(a.ndim) if i not in ax]
    if any(a.shape[i] != b.shape[i] for i in batch):
        raise ValueError(f"{fn}: along the axes not convolved ({tuple(batch)}) in1 and in2 must have the same length, "
                         f"got shapes {a.shape} and {b.shape} with axes={axes!r}")
    if a.size == 0 or b.size == 0:
        raise ValueError(f"{fn}: zero-size arrays are not supported, got shapes {a.shape} and {b.shape}")
    if not ax:
        return a * b
    if mode == "valid":
        no_swap = all(a.shape[i] >= b.shape[i] for i in ax)
        swap = all(a.shape[i] <= b.shape[i] for i in ax)
        if not (no_swap or swap):
            raise ValueError(f"{fn}: for mode 'valid' one input must be at least as large as the other along every "
                             f"convolved axis, got shapes {a.shape} and {b.shape}")
        if swap:
            a, b = b, a
    full = {i: a.shape[i] + b.shape[i] - 1 for i in ax}
    if all(a.shape[i] == 1 or b.shape[i] == 1 for i in ax):   # nothing overlaps: each output is one product
        conv = a * b
    elif a.dtype.is_complex:
        sizes = [full[i] for i in ax]
        conv = tnp.fft.ifftn(tnp.fft.fftn(a, sizes, ax) * tnp.fft.fftn(b, sizes, ax), sizes, ax)
    else:
        sizes = [full[i] for i in ax]
        conv = tnp.fft.irfftn(tnp.fft.rfftn(a, sizes, ax) * tnp.fft.rfftn(b, sizes, ax), sizes, ax)
    index = []
    for i in range(a.ndim):
        if i not in full:
            index.append(slice(None))
            continue
        out = {"full": full[i], "same": a.shape[i], "valid": a.shape[i] - b.shape[i] + 1}[mode]
        start = (full[i] - out) // 2
        index.append(slice(start, start + out))
    return conv[tuple(index)]


# ---- detrending ----
def detrend(data: ArrayLike, axis: int = -1, type: str = "linear",  # noqa: A002 - scipy's name
            bp: int | Sequence[int] | np.ndarray = 0, overwrite_data: None = None) -> Tensor:
    """data minus its least-squares fit along `axis` (scipy.signal.detrend): the mean for type='constant', a line
    for type='linear' (a separate line between consecutive breakpoints `bp`, static indices into the axis).

    >>> detrend(tg.asarray([1.0, 3.0, 5.0, 7.0]))                         # [0, 0, 0, 0]
    >>> detrend(tg.asarray([1.0, 3.0, 5.0, 7.0]), type="constant")        # [-3, -1, 1, 3]
    """
    if overwrite_data is not None:
        raise NotImplementedError("detrend: overwrite_data is not supported (arrays are immutable); leave it None")
    if type not in ("constant", "linear"):
        raise ValueError(f"detrend: type must be 'linear' or 'constant', got {type!r}")
    (x,) = promote_args_inexact("detrend", data)
    if x.ndim == 0:
        raise ValueError("detrend: data must have at least one axis, got a scalar")
    ax = normalize_axis(axis, x.ndim, "detrend")
    if type == "constant":
        return x - tnp.mean(x, axis=ax, keepdims=True)
    n = x.shape[ax]
    points = np.sort(np.unique(np.r_[0, np.asarray(bp, dtype=np.int64).ravel(), n]))
    if points[0] < 0 or points[-1] > n:
        raise ValueError(f"detrend: the breakpoints bp={bp!r} must lie in [0, {n}], the length of data along axis "
                         f"{axis}")
    y = tnp.moveaxis(x, ax, -1)
    pieces = []
    for lo, hi in zip(points[:-1], points[1:], strict=True):
        seg = y[..., int(lo):int(hi)]
        m = int(hi - lo)
        # the least-squares line through the segment, centred so the slope is one weighted sum: the residual is
        # (y - mean y) - slope (t - mean t) with slope = sum((t - mean t) y) / sum((t - mean t)^2)
        centred = seg - tnp.mean(seg, axis=-1, keepdims=True)
        if m > 1:
            t = np.arange(m, dtype=np.float64) - (m - 1) / 2
            tc = to_tensor(t.astype(dtypes.float64.np if x.dtype.real.itemsize == 8 else np.float32))
            slope = tnp.sum(centred * tc, axis=-1, keepdims=True) / float(np.sum(t * t))
            centred = centred - slope * tc
        pieces.append(centred)
    out = pieces[0] if len(pieces) == 1 else tnp.concatenate(pieces, axis=-1)
    return tnp.moveaxis(out, -1, ax)


# ---- short-time Fourier transforms ----
def _hann(n: int) -> np.ndarray:
    """The periodic Hann window (scipy's get_window('hann', n))."""
    return np.array([1.0]) if n == 1 else np.sin(np.linspace(0, np.pi, n, endpoint=False)) ** 2


def _window(fn: str, window: Any, n: int, d: DType) -> Tensor:
    """`window` as an n-long array of dtype d: 'hann', another name or (name, parameter) tuple scipy's get_window
    knows (which needs scipy), or the samples themselves."""
    if isinstance(window, str) and window == "hann":
        return to_tensor(_hann(n).astype(d.np))
    if isinstance(window, (str, tuple)):
        try:
            from scipy.signal import get_window
        except ImportError as e:
            raise ImportError(f"{fn}: window={window!r} needs scipy installed (only 'hann' or an array of samples "
                              f"work without it)") from e
        return to_tensor(np.asarray(get_window(window, n)).astype(d.np))
    w = to_tensor(window)
    if w.ndim != 1:
        raise ValueError(f"{fn}: window must be 1-d, got shape {w.shape}")
    if w.shape[0] != n:
        raise ValueError(f"{fn}: the window has {w.shape[0]} samples but nperseg is {n}; they must agree")
    return w.astype(d)


def _static_int(fn: str, name: str, v: Any) -> int:
    if isinstance(v, Tensor):
        raise TypeError(f"{fn}: {name} must be a Python int (it sets shapes), got a Tensor")
    return int(v)


def _odd_ext(x: Tensor, n: int) -> Tensor:
    """x extended by n samples at each end of its last axis by odd symmetry about the end points."""
    if n < 1:
        return x
    if n > x.shape[-1] - 1:
        raise ValueError(f"boundary='odd': the extension length ({n}) must not exceed the signal's length - 1 "
                         f"({x.shape[-1] - 1})")
    left = 2 * x[..., :1] - tnp.flip(x[..., 1:n + 1], axis=-1)
    right = 2 * x[..., -1:] - tnp.flip(x[..., -n - 1:-1], axis=-1)
    return tnp.concatenate([left, x, right], axis=-1)


def _extend(boundary: str | None, x: Tensor, n: int) -> Tensor:
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    if boundary is None:
        return x
    if boundary == "odd":
        return _odd_ext(x, n)
    pad_mode = {"even": "reflect", "constant": "edge", "zeros": "constant"}[boundary]
    return tnp.pad(x, widths, pad_mode)


def _frames(x: Tensor, win: Tensor, detrend_func: Callable[[Tensor], Tensor], nperseg: int, noverlap: int,
            nfft: int, twosided: bool) -> Tensor:
    """The windowed FFT of each segment of x's last axis: shape (..., segments, frequencies)."""
    length = x.shape[-1]
    starts = np.arange(0, length - nperseg + 1, nperseg - noverlap)
    seg = tnp.take(x, starts[:, None] + np.arange(nperseg)[None, :], axis=-1)   # one gather of all segments
    seg = detrend_func(seg) * win
    return tnp.fft.fft(seg, n=nfft) if twosided else tnp.fft.rfft(tnp.real(seg), n=nfft)


def _spectral(fn: str, x: ArrayLike, y: ArrayLike | None, fs: ArrayLike, window: Any, nperseg: int | None,
              noverlap: int | None, nfft: int | None, detrend_type: Any, return_onesided: bool, scaling: str,
              axis: int, mode: str, boundary: str | None = None, padded: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """(frequencies, segment times, per-segment spectra) as scipy.signal's _spectral_helper: the spectra have the
    frequency axis where `axis` was and the segments last."""
    if boundary not in ("even", "odd", "constant", "zeros", None):
        raise ValueError(f"{fn}: boundary must be one of 'even', 'odd', 'constant', 'zeros', None, got {boundary!r}")
    if y is None:
        (xt,) = promote_args_inexact(fn, x)
        yt = None
    else:
        xt, yt = promote_args_inexact(fn, x, y)
        if xt.ndim != yt.ndim:
            raise ValueError(f"{fn}: x and y must have the same rank, got shapes {xt.shape} and {yt.shape}")
    if xt.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one axis, got a scalar")
    ax = normalize_axis(_static_int(fn, "axis", axis), xt.ndim, fn)
    outer = tuple(s for i, s in enumerate(xt.shape) if i != ax)
    if yt is not None:
        try:
            outer = broadcast_shapes(outer, tuple(s for i, s in enumerate(yt.shape) if i != ax))
        except ValueError as e:
            raise ValueError(f"{fn}: x (shape {xt.shape}) and y (shape {yt.shape}) do not broadcast together apart "
                             f"from axis {axis}") from e
    result_dtype = to_complex(xt.dtype if xt.dtype.itemsize >= 4 or xt.dtype.is_complex else dtypes.float32)
    freq_dtype = result_dtype.real
    if xt.size == 0 or (yt is not None and yt.size == 0):
        n = xt.shape[ax] if yt is None else min(xt.shape[ax], yt.shape[ax])
        shape = xt.shape if yt is None else outer[:ax] + (n,) + outer[ax:]
        return tnp.zeros(shape, freq_dtype), tnp.zeros(shape, freq_dtype), tnp.zeros(shape, result_dtype)
    length = xt.shape[ax] if yt is None else max(xt.shape[ax], yt.shape[ax])
    if nperseg is not None:
        nperseg = _static_int(fn, "nperseg", nperseg)
        if nperseg < 1:
            raise ValueError(f"{fn}: nperseg must be a positive integer, got {nperseg}")
    # scipy's _triage_segments: a named window takes nperseg (default 256, as scipy and JAX's documentation say;
    # JAX 0.10 itself takes the whole signal), an array window its own size
    if isinstance(window, (str, tuple)):
        nps = 256 if nperseg is None else nperseg
        if nps > xt.shape[ax]:
            warnings.warn(f"{fn}: nperseg={nps} is greater than the input length {xt.shape[ax]}, using nperseg="
                          f"{xt.shape[ax]}", stacklevel=3)
            nps = xt.shape[ax]
    else:
        wt = to_tensor(window)
        nps = wt.shape[0] if nperseg is None and wt.ndim == 1 else nperseg if nperseg is not None else 0
        if wt.ndim == 1 and xt.shape[ax] < wt.shape[0]:
            raise ValueError(f"{fn}: the window ({wt.shape[0]} samples) is longer than the signal ({xt.shape[ax]})")
    win = _window(fn, window, nps, xt.dtype.real if xt.dtype.is_complex else xt.dtype)
    nov = nps // 2 if noverlap is None else _static_int(fn, "noverlap", noverlap)
    nff = nps if nfft is None else _static_int(fn, "nfft", nfft)
    if nff < nps:
        raise ValueError(f"{fn}: nfft ({nff}) must be at least nperseg ({nps})")
    if not 0 <= nov < nps:
        raise ValueError(f"{fn}: noverlap ({nov}) must be in [0, nperseg) = [0, {nps})")
    nstep = nps - nov

    def prepare(t: Tensor) -> Tensor:
        t = tnp.moveaxis(t, ax, -1)
        if t.shape[-1] < length:   # x and y of different lengths: the shorter is zero-padded
            t = tnp.pad(t, [(0, 0)] * (t.ndim - 1) + [(0, length - t.shape[-1])])
        t = _extend(boundary, t, nps // 2)
        if padded:   # zeros so that the last segment is whole
            nadd = (-(t.shape[-1] - nps) % nstep) % nps
            t = tnp.pad(t, [(0, 0)] * (t.ndim - 1) + [(0, nadd)])
        return t

    xs = prepare(xt)
    ys = prepare(yt) if yt is not None else None
    if isinstance(detrend_type, str):
        detrend_func = lambda d: detrend(d, type=detrend_type, axis=-1)
    elif callable(detrend_type):
        detrend_func = detrend_type   # applied to the segments, (..., segments, nperseg)
    elif not detrend_type:
        detrend_func = lambda d: d
    else:
        raise ValueError(f"{fn}: detrend must be 'constant', 'linear', a function or False, got {detrend_type!r}")
    if scaling == "density":
        scale = 1.0 / (fs * tnp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / tnp.sum(win) ** 2
    else:
        raise ValueError(f"{fn}: scaling must be 'density' or 'spectrum', got {scaling!r}")
    if mode == "stft":
        scale = tnp.sqrt(scale)
    twosided = not return_onesided
    if return_onesided and (xt.dtype.is_complex or (yt is not None and yt.dtype.is_complex)):
        warnings.warn(f"{fn}: the input is complex, switching to return_onesided=False", stacklevel=3)
        twosided = True
    k = np.fft.fftfreq(nff) if twosided else np.fft.rfftfreq(nff)   # cycles per sample
    freqs = to_tensor(k.astype(freq_dtype.np)) * fs
    result = _frames(xs, win, detrend_func, nps, nov, nff, twosided)
    if ys is not None:
        result = tnp.conj(result) * _frames(ys, win, detrend_func, nps, nov, nff, twosided)
    elif mode == "psd":
        result = tnp.conj(result) * result
    result = result * scale
    if not twosided and mode == "psd":   # the one-sided density holds the power of the negative frequencies too
        double = np.full(result.shape[-1], 2.0)
        double[0] = 1.0
        if nff % 2 == 0:
            double[-1] = 1.0
        result = result * to_tensor(double.astype(freq_dtype.np))
    centres = np.arange(nps / 2, xs.shape[-1] - nps / 2 + 1, nstep)
    time = to_tensor(centres.astype(freq_dtype.np)) / fs
    if boundary is not None:
        time = time - nps / 2 / fs
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = tnp.real(result)
    return freqs, time, tnp.moveaxis(result, -1, ax)


def stft(x: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann", nperseg: int = 256, noverlap: int | None = None,
         nfft: int | None = None, detrend: Any = False, return_onesided: bool = True, boundary: str | None = "zeros",
         padded: bool = True, axis: int = -1) -> tuple[Tensor, Tensor, Tensor]:
    """The short-time Fourier transform (scipy.signal.stft): (f, t, Zxx), Zxx[..., f, t] the windowed FFT of the
    segment of `nperseg` samples (overlapping by `noverlap`, nperseg // 2 by default) centred at time t.

    `window` is 'hann', another name scipy's get_window knows (needs scipy), or the window's samples; the signal is
    extended at both ends by nperseg // 2 samples per `boundary` ('zeros', 'even', 'odd', 'constant' or None) and
    zero-padded to whole segments when `padded`. Scaled so a sinusoid's amplitude reads off directly
    ('spectrum' scaling), as scipy.

    >>> f, t, zxx = stft(tnp.sin(tnp.arange(256.0)), nperseg=64)        # zxx (33, 9), complex64
    """
    return _spectral("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, "spectrum",
                     axis, "stft", boundary, padded)


def csd(x: ArrayLike, y: ArrayLike | None, fs: ArrayLike = 1.0, window: Any = "hann", nperseg: int | None = None,
        noverlap: int | None = None, nfft: int | None = None, detrend: Any = "constant", return_onesided: bool = True,
        scaling: str = "density", axis: int = -1, average: str = "mean") -> tuple[Tensor, Tensor]:
    """The cross power spectral density of x and y by Welch's method (scipy.signal.csd): (f, Pxy), the average
    (`average` 'mean' or 'median') over segments of conj(X) Y, scaled as a density (V^2/Hz, `scaling`='density')
    or a power spectrum (V^2). y=None gives x's own (real) density, as `welch`.

    >>> f, pxy = csd(x, y, fs=100.0, nperseg=64)
    """
    freqs, _, pxy = _spectral("csd", x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
                              axis, "psd")
    if average not in ("mean", "median"):
        raise ValueError(f"csd: average must be 'mean' or 'median', got {average!r}")
    if pxy.ndim >= 2 and pxy.size > 0:
        segments = pxy.shape[-1]
        if segments == 1:
            pxy = pxy[..., 0]
        elif average == "mean":
            pxy = tnp.mean(pxy, axis=-1)
        else:
            # the median of periodograms is biased low relative to their mean (FINDCHIRP, Allen et al., App. B)
            bias = 1 + float(np.sum([1 / (i + 1) - 1 / i for i in range(2, segments, 2)]))
            if pxy.dtype.is_complex:
                pxy = lax_complex(tnp.median(tnp.real(pxy), axis=-1), tnp.median(tnp.imag(pxy), axis=-1))
            else:
                pxy = tnp.median(pxy, axis=-1)
            pxy = pxy / bias
    return freqs, pxy


def welch(x: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann", nperseg: int | None = None,
          noverlap: int | None = None, nfft: int | None = None, detrend: Any = "constant", return_onesided: bool = True,
          scaling: str = "density", axis: int = -1, average: str = "mean") -> tuple[Tensor, Tensor]:
    """The power spectral density of x by Welch's method (scipy.signal.welch): (f, Pxx), the mean (or median) of the
    periodograms of overlapping windowed segments; arguments as `csd`.

    >>> f, pxx = welch(x, fs=100.0, nperseg=64)          # f (33,), pxx (33,)
    """
    freqs, pxx = csd(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling, axis, average)
    return freqs, tnp.real(pxx)


def _overlap_add(frames: Tensor, step: int) -> Tensor:
    """The sum of frames (..., n, length) laid `step` apart: (..., step (n - 1) + length). Each frame is cut into
    k = ceil(length / step) blocks of `step`; block j of every frame lands j blocks later, which a reshape that skews
    the rows by one block each does at once, so the whole sum is pads, reshapes and one reduction."""
    *batch, n, length = frames.shape
    out_len = step * (n - 1) + length
    k = -(-length // step)
    x = tnp.pad(frames, [(0, 0)] * (len(batch) + 1) + [(0, k * step - length)])
    x = tnp.swapaxes(x.reshape(*batch, n, k, step), -3, -2)                  # (..., k, n, step)
    x = tnp.pad(x, [(0, 0)] * (len(batch) + 1) + [(0, n), (0, 0)])           # (..., k, 2n, step)
    x = x.reshape(*batch, k * 2 * n * step)[..., :k * (2 * n - 1) * step]
    x = x.reshape(*batch, k, (2 * n - 1) * step)                            # row j shifted by j blocks
    return tnp.sum(x, axis=-2)[..., :out_len]


def istft(Zxx: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann", nperseg: int | None = None,
          noverlap: int | None = None, nfft: int | None = None, input_onesided: bool = True, boundary: bool = True,
          time_axis: int = -1, freq_axis: int = -2) -> tuple[Tensor, Tensor]:
    """The inverse short-time Fourier transform (scipy.signal.istft): (t, x) with istft(stft(x)) == x for the same
    window, nperseg and noverlap (when the window satisfies the NOLA condition; unchecked, as in JAX).

    The segments' inverse FFTs are windowed and overlap-added, then divided by the overlap-added squared window.
    `boundary` drops the nperseg // 2 samples `stft` added at each end. As in scipy and JAX, t is
    arange(x.shape[0]) / fs (the time axis' samples for a 1-d signal). noverlap=None means nperseg // 2 (0 is
    taken as given, as scipy; JAX reads 0 as None).

    >>> f, t, zxx = stft(x, nperseg=64)
    >>> t, x2 = istft(zxx, nperseg=64)                   # x2[:len(x)] == x
    """
    fn = "istft"
    z = to_tensor(Zxx)
    if z.ndim < 2:
        raise ValueError(f"{fn}: Zxx must have at least 2 axes (frequencies and segments), got shape {z.shape}")
    fa, ta = normalize_axis(freq_axis, z.ndim, fn), normalize_axis(time_axis, z.ndim, fn)
    if fa == ta:
        raise ValueError(f"{fn}: time_axis and freq_axis must differ, both are axis {fa}")
    z = z.astype(to_complex(z.dtype))
    n_default = 2 * (z.shape[fa] - 1) if input_onesided else z.shape[fa]
    nps = n_default if nperseg is None else _static_int(fn, "nperseg", nperseg)
    if nps < 1:
        raise ValueError(f"{fn}: nperseg must be a positive integer, got {nps}")
    if nfft is None:
        nff = nps if input_onesided and nps == n_default + 1 else n_default   # an odd segment length
    else:
        nff = _static_int(fn, "nfft", nfft)
    if nff < nps:
        raise ValueError(f"{fn}: the FFT length ({nff}) must be at least nperseg ({nps})")
    nov = nps // 2 if noverlap is None else _static_int(fn, "noverlap", noverlap)
    if not 0 <= nov < nps:
        raise ValueError(f"{fn}: noverlap ({nov}) must be in [0, nperseg) = [0, {nps})")
    nstep = nps - nov
    if (ta, fa) != (z.ndim - 1, z.ndim - 2):
        outer = tuple(i for i in range(z.ndim) if i not in (ta, fa))
        z = tnp.transpose(z, outer + (fa, ta))
    segs = (tnp.fft.irfft(z, n=nff, axis=-2) if input_onesided else tnp.fft.ifft(z, n=nff, axis=-2))[..., :nps, :]
    win = _window(fn, window, nps, segs.dtype.real if segs.dtype.is_complex else segs.dtype)
    segs = segs * tnp.sum(win)
    frames = tnp.swapaxes(segs * win[:, None], -2, -1)                        # (..., segments, nperseg)
    x = _overlap_add(frames, nstep)
    norm = _overlap_add(tnp.broadcast_to(win * win, (segs.shape[-1], nps)), nstep)
    if boundary:
        half = nps // 2
        x, norm = x[..., half:x.shape[-1] - half], norm[..., half:norm.shape[-1] - half]
    x = x / tnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and ta != z.ndim - 1:
        x = tnp.moveaxis(x, -1, ta - 1 if fa < ta else ta)
    time = tnp.arange(x.shape[0], dtype=x.dtype.real if x.dtype.is_complex else x.dtype) / fs
    return time, x

