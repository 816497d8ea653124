"""`tg.lax.reduce_window`, and the window view it shares with convolution (`_lax_conv.py`) and pooling (`tg.nn`).

`_windows` turns (..., *in) into a view (..., *out, *k) of every window (tinygrad's `_pool`): only movement ops,
so the index arithmetic folds into the consuming kernel and nothing is copied. A window reduction is that view
reduced over its window axes, one kernel; padding and base dilation are pads of the monoid's identity (JAX folds
`init_value` into each window once, and padded positions contribute nothing), and a non-identity `init_value` is
combined with each window's result afterwards. Axes whose window is trivial (size, stride and dilation 1) are not
windowed at all. The gradient is autodiff's: a max's goes to the window's maximum, a sum's to every element.
"""
from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx import _lax_elementwise as lax_ew
from tgfx.function import function
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.numpy import _elementwise as ew
from tgfx.numpy._scatter import _identity, _reduce_as
from tgfx.tensor import ArrayLike, Tensor, prod, to_tensor

Padding = str | Sequence[tuple[int, int]]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def ints(fn: str, name: str, v: Sequence[int] | None, n: int, what: str, low: int = 1) -> tuple[int, ...]:
    """A sequence of n ints >= low (None: all 1), as a tuple; errors name the function, the argument and n."""
    if v is None:
        return (1,) * n
    out = tuple(v) if isinstance(v, (Sequence, np.ndarray)) and not isinstance(v, str) else None
    if out is None or len(out) != n:
        raise ValueError(f"{fn}: {name} must have one entry per {what} ({n}), got {v!r}")
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) and i >= low for i in out):
        raise ValueError(f"{fn}: {name} must be ints >= {low}, got {v!r}")
    return tuple(int(i) for i in out)


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: str) -> list[tuple[int, int]]:
    """(low, high) padding per axis for "SAME", "SAME_LOWER" or "VALID", as `jax.lax.padtype_to_pads`.

    "SAME" (and "SAME_LOWER") pads so that the output has ceil(in / stride) elements; an odd total puts the extra
    element at the end ("SAME") or the start ("SAME_LOWER"). "VALID" pads nothing. `window_shape` is the window's
    extent, its dilation included.

    >>> tg.lax.padtype_to_pads((5, 5), (3, 2), (2, 1), "SAME")     # [(1, 1), (0, 1)]
    """
    mode = padding.upper() if isinstance(padding, str) else padding
    if mode == "VALID":
        return [(0, 0)] * len(in_shape)
    if mode not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence of (low, high) pairs, got "
                         f"{padding!r}")
    out = []
    for i, k, s in zip(in_shape, window_shape, window_strides, strict=True):
        total = max((_cdiv(i, s) - 1) * s + k - i, 0)
        small, big = total // 2, total - total // 2
        out.append((small, big) if mode == "SAME" else (big, small))
    return out


def pad_pairs(fn: str, padding: Any, n: int, what: str) -> tuple[tuple[int, int], ...]:
    """An explicit padding: n (low, high) pairs of ints, negative ones cropping."""
    pairs = tuple(padding) if isinstance(padding, (Sequence, np.ndarray)) and not isinstance(padding, str) else ()
    ok = len(pairs) == n and all(isinstance(p, (Sequence, np.ndarray)) and len(p) == 2 and
                                 all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in p)
                                 for p in pairs)
    if not ok:
        raise ValueError(f"{fn}: padding must be 'SAME', 'SAME_LOWER', 'VALID' or one (low, high) pair of ints per "
                         f"{what} ({n}), got {padding!r}")
    return tuple((int(a), int(b)) for a, b in pairs)


def dilate(x: Tensor, axes: Sequence[int], factors: Sequence[int], value: Any = 0) -> Tensor:
    """factor - 1 copies of `value` between neighbouring elements along each axis (XLA's base / lhs dilation)."""
    for a, f in zip(axes, factors, strict=True):
        n = x.shape[a]
        if f == 1 or n <= 1:
            continue
        split = x.reshape(x.shape[:a + 1] + (1,) + x.shape[a + 1:])
        pads = [(0, 0)] * split.ndim
        pads[a + 1] = (0, f - 1)
        spread = tnp.pad(split, pads, constant_values=value).reshape(x.shape[:a] + (n * f,) + x.shape[a + 1:])
        x = spread.shrink(tuple((0, (n - 1) * f + 1) if b == a else (0, s) for b, s in enumerate(spread.shape)))
    return x


def pad_general(x: Tensor, pads: Sequence[tuple[int, int]], value: Any = 0) -> Tensor:
    """x padded by `pads` (one pair per axis) with `value`; negative entries crop instead (after the growing, so a
    crop may reach into the other side's padding, as in XLA)."""
    grow = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pads)
    x = tnp.pad(x, grow, constant_values=value) if any(p != (0, 0) for p in grow) else x
    return x.shrink(tuple((max(-lo, 0), s - max(-hi, 0)) for (lo, hi), s in zip(pads, x.shape, strict=True)))


def _windows(x: Tensor, k: Sequence[int], s: Sequence[int], d: Sequence[int]) -> Tensor:
    """Every window of the last len(k) axes as a view: (..., *in) -> (..., *out, *k), window element j of output
    position o being x[..., o * s + j * d] (tinygrad's `_pool`).

    Each spatial axis is tiled r times, cut to k rows of length L + d (one row per kernel tap, each starting d
    further along x than the last), and each row is strided by s. Only movement ops, so the index arithmetic folds
    into the consuming kernel. L is doubled when a row of o * s elements would not fit in L + d.
    """
    nsp = len(k)
    if nsp == 0:   # no window axes: every element is its own (empty) window
        return x
    lead, ins = x.shape[:-nsp], x.shape[-nsp:]
    outs = [(i - dd * (kk - 1) - 1) // ss + 1 for i, kk, ss, dd in zip(ins, k, s, d, strict=True)]
    if all(dd == 1 and ss >= kk for kk, ss, dd in zip(k, s, d, strict=True)):
        return _disjoint_windows(x, k, s, outs)
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


def _disjoint_windows(x: Tensor, k: Sequence[int], s: Sequence[int], outs: Sequence[int]) -> Tensor:
    """`_windows` of windows that do not overlap (stride >= window, no dilation: 2 x 2 pooling with stride 2, a 1 x 1
    convolution with stride 2): each axis cut (or zero-extended) to o * s, split into (o, s) and the window's first
    k of each s kept. The same view, but its gradient is a reshape and a pad, where the tiled view's sums k shifted
    copies of the input (a 2 x 2 max pool's backward was a 5 x 5 windowed sum of masked reads, 20x slower)."""
    nsp, nl = len(k), x.ndim - len(k)
    lead, ins = x.shape[:nl], x.shape[nl:]
    keep = [(0, n) for n in lead]
    x = pad_general(x, [(0, 0)] * nl + [(0, o * ss - i) for i, o, ss in zip(ins, outs, s, strict=True)])
    x = x.reshape(lead + tuple(v for o, ss in zip(outs, s, strict=True) for v in (o, ss)))
    x = x.shrink(keep + [b for o, kk in zip(outs, k, strict=True) for b in ((0, o), (0, kk))])
    return x.permute(*range(nl), *(nl + 2 * j for j in range(nsp)), *(nl + 2 * j + 1 for j in range(nsp)))


def interleave(phases: list[Tensor], s: Sequence[int], ins: Sequence[int]) -> Tensor:
    """The phases of the last len(s) axes, phase r (in itertools.product order) holding positions q * s + r, each
    phase ceil(in / s) long, interleaved into one array cut to `ins`: a stack, a reshape and a permute, one copy."""
    nsp = len(s)
    lead, counts = phases[0].shape[:-nsp], phases[0].shape[-nsp:]
    if len(phases) > 1:
        nl = len(lead)
        x = tnp.stack(phases, axis=-1).reshape(lead + tuple(counts) + tuple(s))
        x = x.permute(*range(nl), *(i for a in range(nsp) for i in (nl + a, nl + nsp + a)))
        phases = [x.reshape(lead + tuple(c * ss for c, ss in zip(counts, s, strict=True)))]
    return phases[0][(Ellipsis, *(slice(0, i) for i in ins))]


@functools.cache
def _window_reduce(k: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...], op: str) -> Callable[[Tensor], Tensor]:
    """The add, max or min of every window of the last len(k) axes (overlapping windows: `_windows`' tiled view), as
    a function whose backward gives each window's gradient back to the input tap by tap: input position q * s + r
    (phase r) gets tap j of window q - c where j * d = c * s + r, so each phase is a sum of shifted copies of the
    output's gradient (times the tap's hits for max and min: the window's hits share it equally, as JAX), and the
    phases are interleaved (`interleave`). The view's own gradient read the tiled view's reshapes back through
    divisions and remainders for every tap of every window a position is in: a 3 x 3 stride-2 max pool's gradient
    on 32 x 32 x 32 x 16 took 186 ms, a 3 x 3 average's 10 (stride 1) and 138 (stride 2)."""
    nsp = len(k)
    taps = tuple(range(-nsp, 0))

    def forward(x: Tensor) -> Tensor:
        return _reduce_as(_windows(x, k, s, d), op, tuple(a + x.ndim + nsp for a in taps))

    def backward(g: Tensor, call: Any) -> tuple[Tensor]:
        (x,), (y,) = call.inputs, call.outputs
        nl, ins, outs = x.ndim - nsp, x.shape[-nsp:], g.shape[-nsp:]
        window = list(itertools.product(*(range(kk) for kk in k)))

        def tap(j: tuple[int, ...]) -> Tensor:   # x at window element j of every window: a strided slice
            return x[(Ellipsis, *(slice(jj * dd, jj * dd + (o - 1) * ss + 1, ss)
                                  for jj, dd, o, ss in zip(j, d, outs, s, strict=True)))]
        # (stored: read once per tap, each read would evaluate it again)
        part, hits = g.contiguous(), {}
        if op != "add":   # the max's (min's) hits in each window share its gradient equally, as JAX
            hits = {j: ew.equal(tap(j), y).astype(g.dtype) for j in window}
            count = hits[window[0]]
            for j in window[1:]:
                count = ew.add(count, hits[j])
            part = ew.divide(part, count).contiguous()
        counts = tuple(-(-i // ss) for i, ss in zip(ins, s, strict=True))
        phases = []
        for r in itertools.product(*(range(ss) for ss in s)):
            dx = tnp.zeros(x.shape[:nl] + counts, g.dtype)
            for j in window:
                if any(jj * dd % ss != rr for jj, dd, ss, rr in zip(j, d, s, r, strict=True)):
                    continue
                c = tuple(jj * dd // ss for jj, dd, ss in zip(j, d, s, strict=True))
                share = part if op == "add" else ew.multiply(part, hits[j])
                dx = ew.add(dx, pad_general(share, [(0, 0)] * nl + [(cc, q - cc - o) for cc, q, o in
                                                                      zip(c, counts, outs, strict=True)]))
            phases.append(dx)
        return (interleave(phases, s, ins),)

    return function(forward, grad_fxn=backward)


# ---- the reductions a window can take ----
_COMBINE = {"add": lax_ew.add, "multiply": lax_ew.mul, "max": lax_ew.max, "min": lax_ew.min}
_MONOIDS: dict[Callable, str] = {**{f: name for name, f in _COMBINE.items()},
                                 ew.add: "add", ew.multiply: "multiply", ew.maximum: "max", ew.minimum: "min"}


def _monoid(computation: Callable, dtype: Any, general: bool = False) -> str | None:
    """Which of add, multiply, max, min `computation` is: one of the lax or numpy functions, or any function whose
    graph on two scalars is theirs (`lambda a, b: a + b`), found by tracing it on stand-ins (hash-consing makes the
    comparison exact). None for another function with `general` (reduce_window folds it over each window)."""
    try:
        known = _MONOIDS.get(computation)
    except TypeError:   # an unhashable callable: not one of them, but maybe one by its graph
        known = None
    if known is not None:
        return known
    if callable(computation):
        a = Tensor(UOp(Ops.PARAM, dtype, (), (-1, (), "CPU"), tag=("reduce_window", 0)))
        b = Tensor(UOp(Ops.PARAM, dtype, (), (-1, (), "CPU"), tag=("reduce_window", 1)))
        try:
            got = computation(a, b)
        except Exception:  # noqa: BLE001 - anything it cannot do on scalars rules it out
            got = None
        if isinstance(got, Tensor):
            for name, f in _COMBINE.items():
                if got.uop is f(a, b).uop or got.uop is f(b, a).uop:
                    return name
            if general:   # a function of traced scalars: folded over each window (`_reduce_window_general`)
                return None
    raise TypeError(f"reduce_window: computation must be tg.lax.add, tg.lax.mul, tg.lax.max or tg.lax.min, or a "
                    f"function of two traced values (such as lambda a, b: a + b), got {computation!r}")


def _is_identity(init: Any, op: str, dtype: Any) -> bool:
    if isinstance(init, Tensor):
        return False
    v = np.asarray(init)
    return v.ndim == 0 and bool(v == _identity(op, dtype))


def reduce_window(operand: ArrayLike, init_value: ArrayLike, computation: Callable, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding: Padding = "VALID",
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Tensor:
    """Reduce every window of `operand` with `computation`, as `jax.lax.reduce_window`.

    `computation` is `tg.lax.add`, `tg.lax.mul`, `tg.lax.max` or `tg.lax.min` (or `tnp.add`, `lambda a, b: a + b`
    and the like). `window_dimensions`, `window_strides`, `base_dilation` and `window_dilation` have one entry per
    axis of `operand` (strides and dilations default to 1). `padding` is "VALID" (the default), "SAME",
    "SAME_LOWER" (computed with the dilated window, on the undilated operand, as JAX does) or one (low, high) pair
    per axis; negative entries crop. Window element j of output position o along an axis is
    x_dilated_padded[o * stride + j * window_dilation]; padded positions and base-dilation holes contribute nothing,
    and `init_value` is combined with every window's result once (0 for add, -inf for max leave it unchanged).
    The result has the operand's dtype; an output axis with no complete window has length 0.

    Runs as one kernel (a reduce over a view of every window); differentiable in both modes.

    >>> x = tnp.arange(10.0)
    >>> tg.lax.reduce_window(x, 1.0, tg.lax.mul, (2,)).tolist()            # [0., 2., 6., 12., ..., 72.]
    >>> img = tnp.ones((8, 32, 32, 3))                                      # NHWC max pooling, 3x3 stride 2
    >>> tg.lax.reduce_window(img, -tnp.inf, tg.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME").shape   # (8, 16, 16, 3)
    """
    tuples = isinstance(operand, (tuple, list))
    x = to_tensor(operand[0] if tuples and operand else operand)
    n = x.ndim
    op = None if tuples else _monoid(computation, x.dtype, general=True)
    k = ints("reduce_window", "window_dimensions", window_dimensions, n, "axis of the operand")
    s = ints("reduce_window", "window_strides", window_strides, n, "axis of the operand")
    bd = ints("reduce_window", "base_dilation", base_dilation, n, "axis of the operand")
    wd = ints("reduce_window", "window_dilation", window_dilation, n, "axis of the operand")
    span = tuple((kk - 1) * dd + 1 for kk, dd in zip(k, wd, strict=True))
    if isinstance(padding, str):
        try:
            pads = tuple(padtype_to_pads(x.shape, span, s, padding))
        except ValueError as e:
            raise ValueError(f"reduce_window: {e}") from None
    else:
        pads = pad_pairs("reduce_window", padding, n, "axis of the operand")
    if op is None:
        return _reduce_window_general(operand if tuples else (operand,), init_value if tuples else (init_value,),
                                      computation, k, s, pads, bd, wd, tuples)
    init = init_value if isinstance(init_value, Tensor) else np.asarray(init_value)
    if isinstance(init, Tensor) and init.shape != () or not isinstance(init, Tensor) and init.ndim:
        raise ValueError(f"reduce_window: init_value must be a scalar, got shape {tuple(init.shape)}")
    identity = _identity(op, x.dtype)
    dilated = tuple((i - 1) * b + 1 if i else 0 for i, b in zip(x.shape, bd, strict=True))
    padded = [i + lo + hi for i, (lo, hi) in zip(dilated, pads, strict=True)]
    if any(p < 0 for p in padded):
        raise ValueError(f"reduce_window: padding {pads} crops more than the operand of shape {x.shape} (base "
                         f"dilated to {dilated}) has")
    outs = tuple((p - sp) // ss + 1 if p >= sp else 0 for p, sp, ss in zip(padded, span, s, strict=True))
    if prod(outs) == 0:
        out = Tensor.full(outs, identity, x.dtype)
    else:
        x = pad_general(dilate(x, range(n), bd, identity), pads, identity)
        moved = [a for a in range(n) if (k[a], s[a], wd[a]) != (1, 1, 1)]
        still = [a for a in range(n) if a not in moved]
        if moved:
            kk, ss, dd = (tuple(v[a] for a in moved) for v in (k, s, wd))
            xm = x.permute(*still, *moved)
            if op == "multiply" or all(d1 == 1 and s1 >= k1 for k1, s1, d1 in zip(kk, ss, dd, strict=True)):
                y = _reduce_as(_windows(xm, kk, ss, dd), op, tuple(range(n, n + len(moved))))
            else:   # overlapping windows: a backward that places each tap's share back (`_window_reduce`)
                y = _window_reduce(kk, ss, dd, op)(xm)
            x = y.permute(*np.argsort(still + moved).tolist())
        out = x
    if _is_identity(init_value, op, x.dtype):
        return out
    return _COMBINE[op](to_tensor(init_value, like=out), out).astype(out.dtype)


def _reduce_window_general(operands: Sequence[ArrayLike], inits: Sequence[ArrayLike], computation: Callable,
                           k: tuple[int, ...], s: tuple[int, ...], pads: Sequence[tuple[int, int]],
                           bd: tuple[int, ...], wd: tuple[int, ...], tuples: bool) -> Any:
    """reduce_window of several operands together (a tuple, `computation` taking and giving tuples) or with a
    computation that is none of the four monoids, as JAX's variadic reduce_window: the computation folded over each
    window's elements in order, starting from the init values, elementwise over all windows at once (one traced call
    per window element); padding and base-dilation holes are skipped, as XLA's."""
    if not isinstance(inits, (tuple, list)) or len(inits) != len(operands):
        raise TypeError(f"reduce_window: init_value must be a tuple with one value per operand ({len(operands)}), "
                        f"got {inits!r:.80}")
    xs = [to_tensor(o) for o in operands]
    if any(t.shape != xs[0].shape for t in xs):
        raise ValueError(f"reduce_window: the operands must have one shape, got {[t.shape for t in xs]}")

    def windows(t: Tensor, value: Any) -> Tensor:   # (*outs, window elements)
        w = _windows(pad_general(dilate(t, range(t.ndim), bd, value), pads, value), k, s, wd)
        return w.reshape(*w.shape[:len(k)], prod(k))
    real = windows(Tensor.full(xs[0].shape, True), False)   # which window elements are operand elements
    outs = real.shape[:-1]
    acc = [tnp.broadcast_to(to_tensor(i, like=t).astype(t.dtype), outs) for t, i in zip(xs, inits, strict=True)]
    flat = [windows(t, 0) for t in xs]
    for j in range(real.shape[-1] if prod(outs) else 0):
        got = computation(*((tuple(acc), tuple(f[..., j] for f in flat)) if tuples else (acc[0], flat[0][..., j])))
        got = list(got) if tuples else [got]
        if len(got) != len(acc):
            raise TypeError(f"reduce_window: computation must return {len(acc)} values (one per operand), got "
                            f"{len(got)}")
        acc = [ew.where(real[..., j], to_tensor(g).astype(a.dtype), a) for g, a in zip(got, acc, strict=True)]
    return tuple(acc) if tuples else acc[0]
