"""`tg.lax.conv_general_dilated` (and `conv`, `conv_with_general_padding`), `ConvDimensionNumbers`, `Precision`.

Every convolution, `tg.nn.conv2d` included, comes down to `conv_nd`: channels-first input (N, C, *spatial) and
kernel (O, C // groups, *k), any number of spatial axes. It is a broadcast multiply of the window view
(`_lax_window._windows`) with the kernel, summed over (C, *k): one fused kernel, a direct convolution. Lowering reads
the input through index arithmetic, its padding a mask (no im2col), and the optimiser gives it a register tile of
output columns by output channels (`tgfx/lowering/heuristics.py`, `masked_contraction_opts`). A channels-last
convolution (NHWC) is tiled by output channels instead, its input a scalar per row of the tile: there the padded
input is stored first (`_stored_pad`), a copy of the input's size. Its
backward is written as more such kernels (`grad_fxn`): the input's gradient is a convolution of the output gradient
with the flipped, transposed kernel (with stride s, one per phase of the input, s ** nsp of them, interleaved by
an elementwise kernel); the kernel's is a sum of windows times the output
gradient, read channels last (a transposed copy of x and of the gradient for channels-first operands, so its output
channels are vectors). (Differentiating the view itself would sum masked copies of the tiled input, several times
slower.)

`conv_general_dilated` brings any layout to that one: dimension numbers are permutations (views), lhs dilation
puts zeros between input elements, negative padding crops, and `batch_group_count` moves batch groups into the
feature axis as feature groups. All of it is movement ops around `conv_nd`, folded into its kernel.
"""
from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

import tgfx.numpy as tnp
from tgfx._lax_window import _windows, dilate, interleave, ints, pad_general, pad_pairs, padtype_to_pads
from tgfx.dtypes import to_dtype
from tgfx.function import function
from tgfx.ir.ops import Ops
from tgfx.tensor import ArrayLike, Tensor, prod, promote, to_tensor


class Precision(enum.Enum):
    """The precision of a matmul or convolution on accelerators, as `jax.lax.Precision`.

    Accepted wherever JAX takes `precision=` and ignored: tgfx computes in the operands' dtype (or
    `preferred_element_type`), so every precision is HIGHEST. `Precision("highest")` and the like parse JAX's
    strings.
    """

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: object) -> Precision | None:
        names = {"default": cls.DEFAULT, "bfloat16": cls.DEFAULT, "fastest": cls.DEFAULT, "high": cls.HIGH,
                 "tensorfloat32": cls.HIGH, "bfloat16_3x": cls.HIGH, "highest": cls.HIGHEST, "float32": cls.HIGHEST}
        return names.get(value.lower()) if isinstance(value, str) else None

    def __str__(self) -> str:
        return self.name


def check_precision(fn: str, precision: Any) -> None:
    """`precision=` as JAX accepts it (None, a Precision, its string, or a pair of them): checked, then ignored."""
    items = precision if isinstance(precision, (tuple, list)) and len(precision) == 2 else (precision,)
    for p in items:
        if p is not None and not isinstance(p, Precision):
            try:
                Precision(p)
            except ValueError:
                raise ValueError(f"{fn}: precision must be None, a tg.lax.Precision, one of 'default', 'high', "
                                 f"'highest', or a pair of them, got {precision!r}") from None


class ConvDimensionNumbers(NamedTuple):
    """Which axes of lhs, rhs and the output are which, as `jax.lax.ConvDimensionNumbers`.

    lhs_spec = (batch axis, feature axis, spatial axes...); rhs_spec = (output feature axis, input feature axis,
    spatial axes...); out_spec = (batch axis, feature axis, spatial axes...). The spatial axes are listed in the
    same order in all three, the order in which window_strides, padding and the dilations are given.
    """

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def conv_general_permutations(dimension_numbers: tuple[str, str, str]) -> tuple[tuple[int, ...], ...]:
    """The (lhs, rhs, out) axis permutations of spec strings such as ("NHWC", "HWIO", "NHWC"), as JAX's: batch and
    feature first, then the spatial axes in the order the rhs spec lists them."""
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (spec, (a, b)) in enumerate(zip(dimension_numbers, charpairs, strict=True)):
        if not isinstance(spec, str) or spec.count(a) != 1 or spec.count(b) != 1:
            raise TypeError(f"conv_general_dilated: dimension_numbers[{i}] must be a string containing the "
                            f"characters {a!r} and {b!r} exactly once, got {spec!r}")
        if len(set(spec)) != len(spec):
            raise TypeError(f"conv_general_dilated: dimension_numbers[{i}] cannot repeat a character, got {spec!r}")
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if not set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} == set(out_spec) - {"N", "C"}:
        raise TypeError(f"conv_general_dilated: the three dimension_numbers must name the same spatial axes, got "
                        f"{dimension_numbers!r}")

    def perm(spec: str, pair: tuple[str, str]) -> tuple[int, ...]:
        spatial = sorted((i for i, c in enumerate(spec) if c not in pair), key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1]), *spatial)

    return tuple(perm(spec, pair) for spec, pair in zip(dimension_numbers, charpairs, strict=True))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """`dimension_numbers` (None for NCHW / OIHW / NCHW, a ConvDimensionNumbers, or three spec strings) as a
    ConvDimensionNumbers for operands of these shapes, as `jax.lax.conv_dimension_numbers`.

    >>> tg.lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 4), ("NHWC", "HWIO", "NHWC"))
    ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    n = len(lhs_shape)
    if len(rhs_shape) != n:
        raise TypeError(f"conv_general_dilated: lhs and rhs must have the same number of dimensions, got shapes "
                        f"{tuple(lhs_shape)} and {tuple(rhs_shape)}")
    if n < 2:
        raise TypeError(f"conv_general_dilated: lhs and rhs need at least a batch / feature pair of axes, got shapes "
                        f"{tuple(lhs_shape)} and {tuple(rhs_shape)}")
    if dimension_numbers is None:
        return ConvDimensionNumbers(*(tuple(range(n)),) * 3)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        specs = tuple(tuple(int(a) for a in spec) for spec in dimension_numbers)
        for name, spec in zip(ConvDimensionNumbers._fields, specs, strict=True):
            if sorted(spec) != list(range(n)):
                raise TypeError(f"conv_general_dilated: dimension_numbers.{name} must be a permutation of the "
                                f"{n} axes of lhs and rhs, got {spec}")
        return ConvDimensionNumbers(*specs)
    if not (isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3):
        raise TypeError(f"conv_general_dilated: dimension_numbers must be None, a ConvDimensionNumbers or three "
                        f"strings such as ('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}")
    for i, spec in enumerate(dimension_numbers):
        if isinstance(spec, str) and len(spec) != n:
            raise TypeError(f"conv_general_dilated: dimension_numbers[{i}] = {spec!r} must have one character per "
                            f"axis of lhs and rhs ({n}, shapes {tuple(lhs_shape)} and {tuple(rhs_shape)})")
    return ConvDimensionNumbers(*conv_general_permutations(tuple(dimension_numbers)))


# ---- the convolution, channels first ----
def _pad_spatial(x: Tensor, pads: Sequence[tuple[int, int]]) -> Tensor:
    return x.pad_zeros(((0, 0), (0, 0), *pads)) if any(p != (0, 0) for p in pads) else x


def _stored_pad(x: Tensor, pads: Sequence[tuple[int, int]]) -> Tensor:
    """x (N, C, *in) zero-padded by the non-negative `pads`, stored channels last, for a channels-last correlation.

    Such a correlation's register tile is output channels (vectors of the kernel's) by output columns, each step
    reading one input element per row of the tile, broadcast. Read through the padding's mask, each row's element was
    a masked scalar load and a broadcast from a register, a shuffle beside each row's two FMAs (AVX-512), where a
    plain load is the FMA's broadcast operand; stored padded, the copy is one pass over the input for k * k taps'
    reads of it (pixelcnn's 3 x 3, 32 -> 32 over 16 x 16 x 16, AVX-512: 904 -> 650 + 28 us, jax 837; AVX2 class
    1088 -> 722 + 30; a 7 x 7 of one input channel 254 -> 121 + 6)."""
    if not any(p != (0, 0) for p in pads):
        return x
    return _channels_last(_pad_spatial(x, pads))


# a channels-last convolution whose input elements are read (input channels x taps x output positions) fewer times
# than this reads them through the padding's mask: the copy is a kernel of its own, where the masks cost next to
# nothing (AVX-512: 2 x 9 x 9 x 4 -> 6 channels, 5,832 reads, 1.8 us as one kernel, 2.0 in two; 4 x 8 x 8 x 8 -> 8,
# pixelcnn's small size, 18,432: 15.1 -> 12.7 us, its input gradient 13.5 -> 6.1)
STORED_PAD_MIN_READS = 1 << 14


def _padded_reads(x_shape: tuple[int, ...], w_shape: tuple[int, ...], pads: Sequence[tuple[int, int]],
                  s: Sequence[int], d: Sequence[int]) -> int:
    """How many input elements a correlation of x (N, C, *in) padded by `pads` with w (O, C / g, *k), strides `s` and
    dilation `d`, reads for one block of output channels: N x C x taps x output positions."""
    k = w_shape[2:]
    outs = [max((i + lo + hi - (kk - 1) * dd - 1) // ss + 1, 0)
            for i, (lo, hi), kk, ss, dd in zip(x_shape[2:], pads, k, s, d, strict=True)]
    return x_shape[0] * x_shape[1] * math.prod(k) * math.prod(outs)


def _correlate(x: Tensor, w: Tensor, s: tuple[int, ...], d: tuple[int, ...], groups: int,
               last: bool = False) -> Tensor:
    """The convolution of padded x (N, C, *in) with w (O, C // groups, *k): a broadcast multiply of the window view
    with the kernel, summed over (C, *k) in one kernel. With `last` the sum is stored channels last (N, *out, O) and
    the result is a view of it (`_is_channels_last`): what an NHWC caller reads, per channel contiguously."""
    n, (o, cg), k = x.shape[0], w.shape[:2], w.shape[2:]
    nsp = len(k)
    win = _windows(x, k, s, d)                                                # (N, C, *out, *k)
    outs = win.shape[2:2 + nsp]
    a = win.reshape(n, groups, 1, cg, *outs, *k)
    b = w.reshape(1, groups, o // groups, cg, *(1,) * nsp, *k)
    if not last:
        return tnp.sum(a * b, axis=(3, *range(4 + nsp, 4 + 2 * nsp))).reshape(n, o, *outs)
    # (N, *out, groups, O / groups, C / groups, *k), summed over the last 1 + nsp axes
    prod_ = (a * b).permute(0, *range(4, 4 + nsp), 1, 2, 3, *range(4 + nsp, 4 + 2 * nsp))
    out = tnp.sum(prod_, axis=tuple(range(3 + nsp, 4 + 2 * nsp))).reshape(n, *outs, o)
    return out.permute(0, 1 + nsp, *range(1, 1 + nsp))


def _phase_taps(r: int, before: int, k: int, s: int, d: int) -> tuple[int, int, int, int]:
    """Along one axis, the kernel taps that reach input positions i = s * q + r: (first tap of the flipped kernel, how
    many, the step between them in it, and the offset e of the output gradient the first reads), so that
    dx[s * q + r] = sum_j g[q + e + j * d / gcd(s, d)] * flipped[first + j * step]. Output o's window reads padded
    position s * o + t * d, which is input i when s * o = i + before - t * d: tap t reaches phase r when
    r + before - t * d is a multiple of s, through g[q + (r + before - t * d) / s]."""
    taps = [t for t in range(k - 1, -1, -1) if (r + before - t * d) % s == 0]   # largest first: e ascending
    if not taps:
        return 0, 0, 1, 0
    return k - 1 - taps[0], len(taps), s // math.gcd(s, d), (r + before - taps[0] * d) // s


def _conv_input_grad(g: Tensor, w: Tensor, x_shape: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...],
                     pads: tuple, groups: int, store: bool = True) -> Tensor:
    """d(conv)/dx as convolutions of the output gradient with the kernel flipped and transposed (per group).

    With stride 1 that is one correlation of g, padded so that it covers exactly x's unpadded extent. With stride s
    the input splits into s phases per axis (positions s * q + r), each a stride-1 correlation of g with the taps
    that reach it (`_phase_taps`): as many products as the forward, where correlating the stride-dilated gradient
    (s - 1 zeros between its elements) multiplied zeros in all but one of s ** nsp of them and read g through a
    parity mask that no register tile takes. The phases are interleaved into x's layout by one elementwise kernel.
    Elements of x that no window reached are 0."""
    k = w.shape[2:]
    nsp = len(k)
    wt = _flip_transpose(w, groups)
    last = _is_channels_last(g)
    if last:   # NHWC: x's channels are the output's vector, so the kernel is read with them innermost
        to_last = (*range(2, 2 + nsp), 1, 0)
        wt = wt.permute(to_last).contiguous().permute(tuple(np.argsort(to_last).tolist()))
    lead, outs, ins = x_shape[:2], g.shape[2:], x_shape[2:]
    counts = tuple(-(-size // ss) for size, ss in zip(ins, s, strict=True))   # positions of phase 0 per axis
    dil = tuple(dd // math.gcd(ss, dd) for ss, dd in zip(s, d, strict=True))   # g's step between a phase's taps
    strided = any(ss > 1 for ss in s)
    phases = []
    for rs in itertools.product(*(range(ss) for ss in s)):
        taps = [_phase_taps(r, before, kk, ss, dd)
                for r, (before, _), kk, ss, dd in zip(rs, pads, k, s, d, strict=True)]
        sizes = tuple(-(-(size - r) // ss) for size, r, ss in zip(ins, rs, s, strict=True))
        if any(n == 0 for _, n, _, _ in taps) or 0 in sizes:
            phases.append(tnp.zeros((*lead, *counts), g.dtype))
            continue
        wp = wt[(slice(None), slice(None), *(slice(f, f + (n - 1) * m + 1, m) for f, n, m, _ in taps))]
        # g read from offset e on, as far as the last phase position's last tap (0 outside g)
        around = tuple((-e, size + (n - 1) * dd - o + e)
                       for (_, n, _, e), size, dd, o in zip(taps, sizes, dil, outs, strict=True))
        gp = pad_general(g, ((0, 0), (0, 0), *around)) if any(p != (0, 0) for p in around) else g
        if last and not strided and any(lo > 0 or hi > 0 for lo, hi in around) and \
                _padded_reads(gp.shape, wp.shape, ((0, 0),) * nsp, (1,) * nsp, dil) >= STORED_PAD_MIN_READS:
            # (stored padded, as `_stored_pad`)
            gp = _channels_last(gp)
        # (unstrided, the one phase is the gradient: channels last for an NHWC g, as the batch norm's backward before
        # it reads it; a strided phase is stored as a transposed copy, `_channels_last` below)
        dx = _correlate(gp, wp, (1,) * nsp, dil, groups, last and not strided)
        if strided:   # its own kernel: fused into the interleave, each element would run every phase's sum
            dx = _channels_last(dx) if last else dx.contiguous()
        phases.append(_pad_spatial(dx, tuple((0, c - n) for c, n in zip(counts, sizes, strict=True))))
    if len(phases) == 1:
        return phases[0]
    dx = interleave(phases, s, ins)
    # stored: fused into what reads it (the previous layer's activation gradient, then its convolution's input
    # gradient), the interleave's index arithmetic would run once per tap and read, and take that kernel's tile
    # (channels last for an NHWC g, as the phases: the interleave copies each position's channels whole, and the
    # NHWC input's gradient is a view of it; not stored for a caller whose function stores it, `conv_lhs_dilated`)
    if not store:
        return dx
    return _channels_last(dx) if last else dx.contiguous()


def _flip_transpose(w: Tensor, groups: int) -> Tensor:
    """w (O, C // groups, *k) with each group's O and C swapped and its taps flipped: (C, O // groups, *k), the kernel
    whose convolution is the adjoint (transpose) of w's."""
    (o, cg), k = w.shape[:2], w.shape[2:]
    nsp, og = len(k), o // groups
    wt = w.reshape(groups, og, cg, *k).permute(0, 2, 1, *range(3, 3 + nsp)).reshape(cg * groups, og, *k)
    return wt.flip(tuple(range(2, 2 + nsp)))


def _is_channels_last(t: Tensor) -> bool:
    """Whether t (N, C, *spatial) is a view of a channels-last (N, *spatial, C) value (an NHWC operand)."""
    nsp = t.ndim - 2
    return t.uop.op is Ops.PERMUTE and tuple(t.uop.arg) == (0, 1 + nsp, *range(1, 1 + nsp))


def _channels_last(t: Tensor) -> Tensor:
    """t (N, C, *spatial) stored channels last (N, *spatial, C), seen as (N, C, *spatial) again: a transposed copy,
    or none when t already lies that way."""
    if _is_channels_last(t):
        return t
    nsp = t.ndim - 2
    return t.permute(0, *range(2, 2 + nsp), 1).contiguous().permute(0, 1 + nsp, *range(1, 1 + nsp))


def _conv_kernel_grad(g: Tensor, x: Tensor, w_shape: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...],
                      pads: tuple, groups: int) -> Tensor:
    """d(conv)/dkernel: the windows of padded x times the output gradient, summed over (N, *out).

    A contraction over the spatial axes, which channels-first operands both read contiguously: no output axis
    (O, C, *k) is a vector of either, and the kernel ran at a few GFLOP/s. Both are read channels last instead
    (`_channels_last`: two transposed copies, none for NHWC operands), and the sum is stored (*k, C, O), so the output
    channels are a vector of g's and of the store, and the input channels broadcast rows of x's: a matmul's register
    tile."""
    (o, cg), k, og = w_shape[:2], w_shape[2:], w_shape[0] // groups
    n, outs, nsp = g.shape[0], g.shape[2:], len(k)
    x, g = _channels_last(x), _channels_last(g)
    win = _windows(_pad_spatial(x, pads), k, s, d)
    a = win.reshape(n, groups, 1, cg, *outs, *k)
    b = g.reshape(n, groups, og, 1, *outs, *(1,) * nsp)
    # summed in (groups, *k, C / groups, O / groups) order, the output channels innermost: the kernel stores its
    # vectors of them contiguously (LLVM's SLP vectoriser starts from adjacent stores), and the result is a view
    prod_ = (a * b).permute(0, 1, *range(4 + nsp, 4 + 2 * nsp), 3, 2, *range(4, 4 + nsp))
    dw = tnp.sum(prod_, axis=(0, *range(4 + nsp, 4 + 2 * nsp))).contiguous()   # (groups, *k, cg, og)
    if groups == 1:   # a view of the stored sum, which the gradient of an HWIO kernel's permute undoes
        return dw.reshape(dw.shape[1:]).permute(1 + nsp, nsp, *range(nsp))
    return dw.permute(0, 2 + nsp, 1 + nsp, *range(1, 1 + nsp)).reshape(o, cg, *k)


def conv_nd(x: Tensor, w: Tensor, strides: tuple[int, ...], pads: tuple[tuple[int, int], ...],
            dilation: tuple[int, ...], groups: int, channels_last: bool = False) -> Tensor:
    """The convolution of x (N, C, *in), zero-padded by the non-negative `pads`, with w (O, C // groups, *k): one
    kernel, with a backward of two (see the module docstring). Shapes are checked by the callers. With
    `channels_last` (a caller that wants (N, *out, O), an NHWC convolution) the output is stored that way and seen as
    (N, O, *out)."""
    def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor, Tensor]:
        g, (xi, wi) = grads, call.inputs
        return (_conv_input_grad(g, wi, xi.shape, strides, dilation, pads, groups),
                _conv_kernel_grad(g, xi, wi.shape, strides, dilation, pads, groups))

    # (a channels-last input read by a channels-last correlation is stored padded; the kernel's gradient reads it
    # through the mask: its tile takes taps along a row, whose reads repeat from one output column to the next, and the
    # stored rows' taps and channels merge into one loop, which lost them: 914 -> 1154 us for pixelcnn's)
    stored = channels_last and _is_channels_last(x) and \
        _padded_reads(x.shape, w.shape, pads, strides, dilation) >= STORED_PAD_MIN_READS

    def conv(x: Tensor, w: Tensor) -> Tensor:
        return _correlate(_stored_pad(x, pads) if stored else _pad_spatial(x, pads), w, strides, dilation, groups,
                          channels_last)

    return function(conv, grad_fxn=backward)(x, w)


def _lhs_dilated_pads(pads: tuple[tuple[int, int], ...], k: tuple[int, ...],
                      d: tuple[int, ...]) -> tuple[tuple[int, int], ...] | None:
    """The padding of the strided convolution whose transpose is a stride-1 convolution of the lhs-dilated input
    padded by `pads`: the span's reach minus each side's padding; None where a side pads beyond it."""
    out = tuple(((kk - 1) * dd - lo, (kk - 1) * dd - hi) for (lo, hi), kk, dd in zip(pads, k, d, strict=True))
    return out if all(lo >= 0 and hi >= 0 for lo, hi in out) else None


def conv_lhs_dilated(x: Tensor, w: Tensor, lhs_dilation: tuple[int, ...], fpads: tuple[tuple[int, int], ...],
                     dilation: tuple[int, ...], groups: int, out_shape: tuple[int, ...]) -> Tensor:
    """The stride-1 convolution of x (N, C, *in) dilated by `lhs_dilation` (s - 1 zeros between its elements, a
    transposed convolution) and padded so that `fpads` (`_lhs_dilated_pads`) is A's padding, with w (O, C // groups,
    *k): the transpose of the strided convolution A of an (N, O, *out) input with `_flip_transpose(w)`, computed
    as that convolution's input gradient (`_conv_input_grad`: one stride-1 correlation per output phase with the
    taps that reach it). Correlating the dilated input multiplied zeros in all but one of s ** nsp products and read
    it through a parity mask no register tile takes (a stride-2 transposed convolution of 32 x 32 x 32 x 16 to 8
    channels: 121 ms, jax 3.5). Its backward is A's forward (x's gradient) and A's kernel gradient, flipped and
    transposed back."""
    nsp = x.ndim - 2
    # an NHWC x enters as it lies, channels last, so that the phases and the result are stored that way too
    to_last, to_first = (0, *range(2, 2 + nsp), 1), (0, 1 + nsp, *range(1, 1 + nsp))
    last = _is_channels_last(x)

    def forward(x: Tensor, w: Tensor) -> Tensor:
        out = _conv_input_grad(x.permute(to_first) if last else x, _flip_transpose(w, groups), out_shape,
                               lhs_dilation, dilation, fpads, groups, store=False)
        return out.permute(to_last) if last else out

    def backward(grads: tuple[Tensor, ...], call: Any) -> tuple[Tensor, Tensor]:
        g, (xi, wi) = grads, call.inputs
        xi, g = (xi.permute(to_first), g.permute(to_first)) if last else (xi, g)
        wf = _flip_transpose(wi, groups)
        dx = conv_nd(g, wf, lhs_dilation, fpads, dilation, groups)
        dwf = _conv_kernel_grad(xi, g, wf.shape, lhs_dilation, dilation, fpads, groups)
        return dx.permute(to_last) if last else dx, _flip_transpose(dwf, groups)   # (its own inverse)

    out = function(forward, grad_fxn=backward)(x.permute(to_last) if last else x, w)
    return out.permute(to_first) if last else out


# ---- the JAX spellings ----
def conv_pads(fn: str, padding: Any, spatial: Sequence[int], span: Sequence[int], strides: Sequence[int],
              lhs_dilation: Sequence[int], what: str) -> tuple[tuple[int, int], ...]:
    """The (low, high) padding of each spatial axis: a padding name ("SAME", "VALID", ...) resolved for the window
    `span` and `strides` (not defined with an lhs dilation, a transposed convolution, as in JAX), or the pairs given."""
    if not isinstance(padding, str):
        return tuple(pad_pairs(fn, padding, len(spatial), what))
    if any(v != 1 for v in lhs_dilation):
        raise ValueError(f"{fn}: string padding ({padding!r}) is not defined for a transposed convolution "
                         f"(lhs_dilation={tuple(lhs_dilation)}); give the padding as (low, high) pairs")
    try:
        return tuple(padtype_to_pads(spatial, span, strides, padding))
    except ValueError as e:
        raise ValueError(f"{fn}: {e}") from None


def conv_general_dilated(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]], lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                         feature_group_count: int = 1, batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Tensor:
    """A general n-d convolution (cross-correlation, as every deep-learning library's), as
    `jax.lax.conv_general_dilated`.

    `dimension_numbers` says which axes are which: None is (N, C, *spatial) input, (O, I, *spatial) kernel and
    (N, C, *spatial) output; or spec strings such as ("NHWC", "HWIO", "NHWC") or ("NWC", "WIO", "NWC"); or a
    `ConvDimensionNumbers`. Any number of spatial axes (1-d, 2-d, 3-d, ...). `window_strides`, `lhs_dilation` and
    `rhs_dilation` have one entry per spatial axis; `padding` is "SAME", "SAME_LOWER", "VALID" or one (low, high)
    pair per spatial axis (negative entries crop). `rhs_dilation` spaces the kernel taps (atrous convolution);
    `lhs_dilation` puts zeros between input elements (a transposed convolution, which needs explicit padding).
    `feature_group_count` G splits the input features into G groups, each convolved with its O / G kernels (the
    kernel's input feature axis is C / G; G = C is a depthwise convolution); `batch_group_count` B splits the batch
    into B groups instead, each with its O / B kernels (at most one of them may exceed 1). `precision` is accepted
    and ignored; `preferred_element_type` is the dtype the operands are cast to and the result has.

    Output spatial size along an axis: (in_dilated + lo + hi - (k - 1) * rhs_dilation - 1) // stride + 1 (0 when
    no window fits). One kernel, with layout changes and padding folded into it; differentiable in lhs and rhs
    (the backward is two more convolution kernels).

    >>> x = tnp.ones((8, 32, 32, 3)); w = tnp.ones((3, 3, 3, 16))
    >>> tg.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")).shape
    (8, 32, 32, 16)
    >>> tg.lax.conv_general_dilated(tnp.ones((1, 4, 10)), tnp.ones((4, 1, 3)), (2,), [(1, 1)],
    ...                             feature_group_count=4).shape          # 1-d depthwise: (1, 4, 5)
    """
    fn = "conv_general_dilated"
    check_precision(fn, precision)
    x, w = to_tensor(lhs), to_tensor(rhs)
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    if preferred_element_type is not None:
        d = to_dtype(preferred_element_type)
        x, w = x.astype(d), w.astype(d)
    else:
        x, w = promote(x, w, fn)
    x, w = x.permute(dn.lhs_spec), w.permute(dn.rhs_spec)   # (N, C, *in) and (O, I, *k), views
    nsp = x.ndim - 2
    what = "spatial dimension"
    strides = ints(fn, "window_strides", window_strides, nsp, what)
    lhs_d = ints(fn, "lhs_dilation", lhs_dilation, nsp, what)
    rhs_d = ints(fn, "rhs_dilation", rhs_dilation, nsp, what)
    fgc, bgc = _group_count(fn, "feature_group_count", feature_group_count), \
        _group_count(fn, "batch_group_count", batch_group_count)
    (nb, c), (o, ci), k = x.shape[:2], w.shape[:2], w.shape[2:]
    if fgc > 1 and bgc > 1:
        raise ValueError(f"{fn}: at most one of feature_group_count and batch_group_count may be > 1, got "
                         f"feature_group_count={fgc} and batch_group_count={bgc}")
    if c % fgc or c // fgc != ci:
        raise ValueError(f"{fn}: the lhs feature dimension ({c}, of lhs shape {tuple(lhs.shape)}) divided by "
                         f"feature_group_count ({fgc}) must equal the rhs input feature dimension ({ci}, of rhs shape "
                         f"{tuple(rhs.shape)})")
    groups = fgc * bgc
    if o % groups:
        raise ValueError(f"{fn}: the rhs output feature dimension ({o}) must be a multiple of "
                         f"{'feature' if fgc > 1 else 'batch'}_group_count ({groups})")
    if nb % bgc:
        raise ValueError(f"{fn}: the lhs batch dimension ({nb}) must be a multiple of batch_group_count ({bgc})")
    span = tuple((kk - 1) * dd + 1 for kk, dd in zip(k, rhs_d, strict=True))
    pads = conv_pads(fn, padding, x.shape[2:], span, strides, lhs_d, what)
    if bgc > 1:   # batch groups as feature groups: (B * N', C) -> (N', B * C)
        x = x.reshape(bgc, nb // bgc, c, *x.shape[2:]).permute(1, 0, *range(2, x.ndim + 1))
        x = x.reshape(nb // bgc, bgc * c, *x.shape[3:])
    if any(v > 1 for v in lhs_d) and all(v == 1 for v in strides) and bgc == 1 and \
            (fpads := _lhs_dilated_pads(pads, k, rhs_d)) is not None and prod(x.shape[:2]) and o and all(x.shape[2:]):
        outs = tuple((i - 1) * dd + 1 + lo + hi - sp + 1
                     for i, dd, (lo, hi), sp in zip(x.shape[2:], lhs_d, pads, span, strict=True))
        if all(v > 0 for v in outs):
            out = conv_lhs_dilated(x, w, lhs_d, fpads, rhs_d, groups, (x.shape[0], o, *outs))
            return out.permute(np.argsort(dn.out_spec).tolist())
    x = dilate(x, range(2, 2 + nsp), lhs_d)
    padded = [i + lo + hi for i, (lo, hi) in zip(x.shape[2:], pads, strict=True)]
    if any(p < 0 for p in padded):
        raise ValueError(f"{fn}: padding {pads} crops more than the lhs spatial size {x.shape[2:]} (after "
                         f"lhs_dilation {lhs_d}) has")
    if any(lo < 0 or hi < 0 for lo, hi in pads):   # crops: a view in front of the convolution, autodiff's
        x, pads = pad_general(x, ((0, 0), (0, 0), *pads)), ((0, 0),) * nsp
    outs = tuple((p - sp) // ss + 1 if p >= sp else 0 for p, sp, ss in zip(padded, span, strides, strict=True))
    if prod(outs) == 0 or prod(x.shape[:2]) == 0 or o == 0:
        out = Tensor.full((x.shape[0], o, *outs), 0, x.dtype)
    else:
        # an NHWC output stored channels last: a channels-first store read NHWC by everything after it (a batch norm's
        # per-channel sums, the next layer) strides by the image's size from one channel to the next
        last = tuple(dn.out_spec) == (0, 1 + nsp, *range(1, 1 + nsp))
        out = conv_nd(x, w, strides, pads, rhs_d, groups, last)
    return out.permute(np.argsort(dn.out_spec).tolist())


def _group_count(fn: str, name: str, v: Any) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{fn}: {name} must be a positive int, got {v!r}")
    return int(v)


def conv(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int], padding: str | Sequence[tuple[int, int]],
         precision: Any = None, preferred_element_type: Any = None) -> Tensor:
    """`conv_general_dilated` with NCHW / OIHW / NCHW layouts and no dilation, as `jax.lax.conv`.

    >>> tg.lax.conv(tnp.ones((1, 3, 8, 8)), tnp.ones((4, 3, 3, 3)), (1, 1), "SAME").shape     # (1, 4, 8, 8)
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                              padding: str | Sequence[tuple[int, int]], lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision: Any = None,
                              preferred_element_type: Any = None) -> Tensor:
    """`conv_general_dilated` with NCHW / OIHW / NCHW layouts, as `jax.lax.conv_with_general_padding`."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)
