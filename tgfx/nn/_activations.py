"""Activations, the softmax family and `standardize`, with `jax.nn`'s names, arguments and numerics.

Each is a composition of tgfx.numpy ops, so it fuses with what surrounds it and is differentiable at any order.
Numerically delicate ones are written so neither the value nor its gradient overflows: `sigmoid` and `softplus`
never take `exp` of a positive number, `softmax`/`log_softmax`/`logsumexp` subtract the maximum first.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

import tgfx.numpy as tnp
from tgfx.custom import custom_jvp
from tgfx.dtypes import DType, dtypes, to_dtype, to_inexact
from tgfx.ir.ops import Ops
from tgfx.numpy._reduce import _axes
from tgfx.tensor import ArrayLike, Tensor, static_int, to_tensor
from tgfx.transforms.grad import stop_gradient

Axis = int | Sequence[int] | None


def _float(x: ArrayLike) -> Tensor:
    """x as a float Tensor (integers and bool as `to_inexact`: float32 up to 32 bits, as in JAX)."""
    t = to_tensor(x)
    return t if t.dtype.is_float else t.astype(to_inexact(t.dtype))


def relu(x: ArrayLike) -> Tensor:
    """max(x, 0), with gradient 0 at x == 0 (as `jax.nn.relu`).

    >>> tg.nn.relu(tg.asarray([-1.0, 0.0, 2.0]))     # [0., 0., 2.]
    """
    t = to_tensor(x)
    return (t > 0).where(t, tnp.zeros((), t.dtype))


def leaky_relu(x: ArrayLike, negative_slope: float = 0.01) -> Tensor:
    """x where x >= 0, else negative_slope * x (`jax.nn.leaky_relu`)."""
    t = _float(x)
    return (t >= 0).where(t, t * negative_slope)


def _split(t: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(t >= 0, t where t >= 0 else 0, t where t < 0 else 0): two branches that are each evaluated only on values
    safe for them (a masked-out branch that overflowed would still poison the gradient with 0 * inf), with no kink
    at 0 (|x| would give a wrong subgradient there)."""
    pos = t >= 0
    zero = tnp.zeros((), t.dtype)
    return pos, pos.where(t, zero), pos.where(zero, t)


def sigmoid(x: ArrayLike) -> Tensor:
    """The logistic function 1 / (1 + exp(-x)), accurate in both tails and with a finite gradient everywhere.

    1 / (1 + exp(-x)) for x >= 0 and exp(x) / (1 + exp(x)) below: exp only ever sees -|x| <= 0, so nothing
    overflows, and one exp serves both (two, one a branch, made sigmoid and silu twice JAX's time).

    >>> tg.nn.sigmoid(tg.asarray([0.0, 100.0, -100.0]))   # [0.5, 1.0, 3.7e-44]
    """
    pos, xp, xn = _split(_float(x))
    e = tnp.exp(xn - xp)   # exp(-|x|), differentiable on both sides of 0
    return pos.where(1 / (1 + e), e / (1 + e))


def silu(x: ArrayLike) -> Tensor:
    """x * sigmoid(x), also called swish (`jax.nn.silu`)."""
    t = _float(x)
    return t * sigmoid(t)


swish = silu


def softplus(x: ArrayLike) -> Tensor:
    """log(1 + exp(x)) (`jax.nn.softplus`), as max(x, 0) + log1p(exp(-|x|)), so large |x| neither overflows nor
    rounds to 0, with one exp and one log1p per element; -|x| is taken from the negative side at 0, so the gradient
    is sigmoid(x) everywhere (0.5 at 0)."""
    x = _float(x)
    pos = x > 0
    return pos.where(x, 0.0) + tnp.log1p(tnp.exp(pos.where(-x, x)))


def gelu(x: ArrayLike, approximate: bool = True) -> Tensor:
    """The Gaussian error linear unit x * Phi(x) (`jax.nn.gelu`).

    `approximate=True` (the default, as in JAX) is the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
    `approximate=False` is the exact 0.5 x (1 + erf(x / sqrt(2))).

    >>> tg.nn.gelu(tg.asarray([1.0]), approximate=False)   # [0.8413447]
    """
    t = _float(x)
    if approximate:
        inner = math.sqrt(2 / math.pi) * (t + 0.044715 * (t * t * t))
        return 0.5 * t * (1 + tnp.tanh(inner))
    return 0.5 * t * (1 + (t * (1 / math.sqrt(2)))._unary(Ops.ERF))


def elu(x: ArrayLike, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1) (`jax.nn.elu`); exp only ever sees x <= 0. The gradient at 0 is
    alpha (the left branch's), as in JAX."""
    t = _float(x)
    above = t > 0
    return above.where(t, alpha * tnp.expm1(above.where(tnp.zeros((), t.dtype), t)))



_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x: ArrayLike) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants alpha = 1.6733, scale = 1.0507 (`jax.nn.selu`).

    >>> tg.nn.selu(tg.asarray([-1.0, 1.0]))     # [-1.1113, 1.0507]
    """
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def celu(x: ArrayLike, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else alpha * (exp(x / alpha) - 1) (`jax.nn.celu`): elu made continuously differentiable
    (the gradient is 1 on both sides of 0, and at 0). exp only ever sees x <= 0."""
    t = _float(x)
    above = t > 0
    return above.where(t, alpha * tnp.expm1(above.where(tnp.zeros((), t.dtype), t) / alpha))


def hard_tanh(x: ArrayLike) -> Tensor:
    """x clipped to [-1, 1] (`jax.nn.hard_tanh`); the gradient is 1 on [-1, 1] (at its ends too, as in JAX), 0
    outside."""
    t = _float(x)
    one = tnp.ones((), t.dtype)
    return (t > 1).where(one, (t < -1).where(-one, t))


def log_sigmoid(x: ArrayLike) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), finite in both tails (`jax.nn.log_sigmoid`): -x for very negative x,
    -exp(-x) for very positive x, never -inf or log(0).

    >>> tg.nn.log_sigmoid(tg.asarray([-100.0, 0.0]))     # [-100., -0.6931]
    """
    return -softplus(-_float(x))


def glu(x: ArrayLike, axis: int = -1) -> Tensor:
    """The gated linear unit a * sigmoid(b), a and b the two halves of x along `axis` (`jax.nn.glu`).

    >>> tg.nn.glu(tnp.ones((2, 4))).shape       # (2, 2)

    Raises ValueError when that axis has an odd length.
    """
    t = _float(x)
    (ax,) = _axes(t, axis, "glu")
    n = t.shape[ax]
    if n % 2:
        raise ValueError(f"glu: axis {axis} of x (shape {t.shape}) must have an even length to split in two halves, "
                         f"got {n}")
    a, b = tnp.split(t, 2, axis=ax)
    return a * sigmoid(b)


def _finite_max(t: Tensor, axes: tuple[int, ...]) -> Tensor:
    """The maximum over `axes` (kept), at most the dtype's largest finite value, replaced by 0 where it is not finite
    (a row of -inf): subtracting it must not turn a row into NaNs, nor leave a large finite entry beside a +inf
    unshifted (float16's exp(11.8) overflows: the row [11.8, inf] shifted by 0 gave [nan, nan] for softmax where it is
    [0, nan]). It is a constant shift, so no gradient flows through it."""
    m = stop_gradient(tnp.max(tnp.minimum(t, tnp.finfo(t.dtype).max), axis=axes, keepdims=True))
    return tnp.isfinite(m).where(m, tnp.zeros((), t.dtype))


def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False, where: ArrayLike | None = None) -> Tensor | tuple[Tensor, Tensor]:
    """log(sum(b * exp(a), axis)), computed stably by subtracting the maximum first (`jax.nn.logsumexp`).

    A slice of all -inf gives -inf; one holding +inf gives +inf. `where` (booleans broadcasting to a's shape) leaves
    the entries where it is False out of the sum, as in JAX: a slice with none left gives -inf. `b` scales each
    term and `return_sign` returns (log|sum|, sign(sum)), as `tgfx.scipy.special.logsumexp` (a negative sum is NaN
    without it).

    >>> tg.nn.logsumexp(tg.asarray([1000.0, 1000.0]))     # 1000.6931, not inf
    >>> tg.nn.logsumexp(tg.asarray([1.0, 2.0]), b=tg.asarray([1.0, -1.0]), return_sign=True)   # (1.5413, -1.0)
    """
    if b is None and not return_sign:
        t = _float(a)
        return _logsumexp(t, _axes(t, axis, "logsumexp"), _mask(t, where, "logsumexp"), keepdims)
    from tgfx.scipy.special import logsumexp as scaled  # (tgfx.scipy.special imports this module)
    if where is not None:   # a left-out entry is one scaled by 0
        t = _float(a)
        b = _mask(t, where, "logsumexp").where(1.0 if b is None else b, 0.0)
    return scaled(a, axis, b, keepdims, return_sign)


def _mask(t: Tensor, where: ArrayLike | None, fn: str) -> Tensor | None:
    """`where` as booleans of t's shape, or a clear error when it does not broadcast to it."""
    if where is None:
        return None
    w = to_tensor(where)
    try:
        fits = np.broadcast_shapes(w.shape, t.shape) == t.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{fn}: `where` of shape {w.shape} does not broadcast to x's shape {t.shape}")
    return tnp.broadcast_to(w.astype(dtypes.bool), t.shape)


def _logsumexp(t: Tensor, axes: tuple[int, ...], mask: Tensor | None, keepdims: bool) -> Tensor:
    if mask is not None:
        t = mask.where(t, tnp.full((), -math.inf, t.dtype))  # left-out entries add exp(-inf) = 0, and no gradient
    m = _finite_max(t, axes)
    out = tnp.log(tnp.sum(tnp.exp(t - m), axis=axes, keepdims=True)) + m
    return out if keepdims else tnp.squeeze(out, axes)


def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Tensor:
    """exp(x) / sum(exp(x), axis), stable for any magnitude of x (`jax.nn.softmax`).

    `where` (booleans broadcasting to x's shape) leaves the entries where it is False out, as in JAX: the others
    sum to 1 (an attention mask without a -1e9 fill), the left-out ones are 0 and get no gradient; a slice with none
    left is all 0.

    >>> tg.nn.softmax(tg.asarray([[1.0, 2.0, 3.0]]))      # [[0.090, 0.245, 0.665]]
    >>> tg.nn.softmax(tg.asarray([1.0, 2.0, 3.0]), where=tg.asarray([True, True, False]))   # [0.269, 0.731, 0.]
    """
    t = _float(x)
    axes = _axes(t, axis, "softmax")
    mask = _mask(t, where, "softmax")
    if mask is not None:
        t = mask.where(t, tnp.full((), -math.inf, t.dtype))
    e = tnp.exp(t - _finite_max(t, axes))
    out = e / tnp.sum(e, axis=axes, keepdims=True)
    return out if mask is None else mask.where(out, tnp.zeros((), out.dtype))


def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Tensor:
    """x - logsumexp(x, axis): log-probabilities without the underflow of log(softmax(x)) (`jax.nn.log_softmax`).

    `where` leaves the entries where it is False out, as `softmax`'s: theirs are -inf.

    >>> tg.nn.log_softmax(tg.asarray([0.0, -200.0]))      # [0., -200.], where log(softmax) gives -inf
    """
    t = _float(x)
    axes = _axes(t, axis, "log_softmax")
    mask = _mask(t, where, "log_softmax")
    if mask is not None:
        t = mask.where(t, tnp.full((), -math.inf, t.dtype))
    shifted = t - _finite_max(t, axes)
    out = shifted - tnp.log(tnp.sum(tnp.exp(shifted), axis=axes, keepdims=True))
    return out if mask is None else mask.where(out, tnp.full((), -math.inf, out.dtype))


def standardize(x: ArrayLike, axis: int | Sequence[int] | None = -1, mean: ArrayLike | None = None,
                variance: ArrayLike | None = None, epsilon: float = 1e-5, where: ArrayLike | None = None, *,
                algorithm: str = "fast") -> Tensor:
    """(x - mean) / sqrt(variance + epsilon) over `axis` (`jax.nn.standardize`): `layer_norm` without the affine
    part, with the statistics optionally given (each broadcast against x, e.g. kept-dims running averages).

    As in JAX, the variance not given is mean(x^2) - mean^2 clipped at 0 (`algorithm="fast"`, with the mean
    given or computed), or mean((x - mean)^2) (`algorithm="stable"`, no cancellation for data far from 0).
    `where` (a boolean mask broadcast against x) picks the elements the statistics are taken over; every element
    is standardised. Statistics of float16 / bfloat16 input are taken in float32; the result has x's (float) dtype.

    >>> tg.nn.standardize(tg.asarray([[1.0, 2.0, 3.0]]))   # [[-1.2247, 0., 1.2247]]
    """
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"standardize: algorithm must be 'fast' or 'stable', got {algorithm!r}")
    t = _float(x)
    axes = _axes(t, axis, "standardize")
    s = t.astype(dtypes.float32) if t.dtype in (dtypes.float16, dtypes.bfloat16) else t
    m = tnp.mean(s, axis=axes, keepdims=True, where=where) if mean is None else to_tensor(mean).astype(s.dtype)
    if variance is not None:
        v = to_tensor(variance).astype(s.dtype)
    elif algorithm == "fast":
        v = tnp.maximum(tnp.mean(s * s, axis=axes, keepdims=True, where=where) - m * m, 0.0)
    else:
        c = s - m
        v = tnp.mean(c * c, axis=axes, keepdims=True, where=where)
    return ((s - m) * (1 / tnp.sqrt(v + epsilon))).astype(t.dtype)


def one_hot(x: ArrayLike, num_classes: int, dtype: DType | str = dtypes.float32, axis: int = -1) -> Tensor:
    """A one-hot encoding of integer `x`: a new axis of length `num_classes` at `axis` (`jax.nn.one_hot`).

    Indices outside [0, num_classes) give a row of zeros, as in JAX.

    >>> tg.nn.one_hot(tg.asarray([0, 2, 5]), 3)   # [[1,0,0], [0,0,1], [0,0,0]]
    """
    t = to_tensor(x)
    if not (t.dtype.is_int or t.dtype.is_bool):
        raise TypeError(f"one_hot: x must hold integer class indices, got dtype {t.dtype.name}; cast it with "
                        f".astype(tg.dtypes.int32)")
    if static_int(num_classes) is None or num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be a non-negative int, got {num_classes!r}")
    nd = t.ndim + 1
    if not -nd <= axis < nd:
        raise ValueError(f"one_hot: axis {axis} is out of range for a result with {nd} dimensions")
    axis %= nd
    idx = t.reshape(t.shape[:axis] + (1,) + t.shape[axis:])
    classes = tnp.arange(num_classes, dtype=idx.dtype if idx.dtype.is_int else dtypes.int32)
    classes = classes.reshape((num_classes,) + (1,) * (nd - axis - 1))
    return (idx == classes).astype(to_dtype(dtype))


# ---- the piecewise and smooth activations added to jax.nn later ----
def relu6(x: ArrayLike) -> Tensor:
    """x clipped to [0, 6] (`jax.nn.relu6`), with gradient 1 strictly inside (0, 6) and 0 elsewhere, at 0 and 6 too
    (JAX's choice at the kinks). Integer input gives float32, NaN stays NaN.

    >>> tg.nn.relu6(tg.asarray([-1.0, 3.0, 9.0]))     # [0., 3., 6.]
    """
    t = _float(x)
    inside = (t > 0) & (t < 6)
    # the ends are constants for the gradient; the clip still carries NaN through
    return inside.where(t, stop_gradient(tnp.minimum(tnp.maximum(t, 0.0), 6.0)))


def hard_sigmoid(x: ArrayLike) -> Tensor:
    """relu6(x + 3) / 6 (`jax.nn.hard_sigmoid`): 0 below -3, 1 above 3, linear between; the gradient is 1/6 strictly
    inside (-3, 3) and 0 at and beyond both ends.

    >>> tg.nn.hard_sigmoid(tg.asarray([-4.0, 0.0, 1.5]))   # [0., 0.5, 0.75]
    """
    return relu6(_float(x) + 3.0) / 6.0


def hard_silu(x: ArrayLike) -> Tensor:
    """x * hard_sigmoid(x) (`jax.nn.hard_silu`, also `hard_swish`): the gradient is 0 at -3 and 1 at 3, as JAX's.

    >>> tg.nn.hard_silu(tg.asarray([-4.0, 1.0, 4.0]))      # [-0., 0.6667, 4.]
    """
    t = _float(x)
    return t * hard_sigmoid(t)


hard_swish = hard_silu


def mish(x: ArrayLike) -> Tensor:
    """x * tanh(softplus(x)) (`jax.nn.mish`; Misra, "Mish: A Self Regularized Non-Monotonic Activation Function").

    >>> tg.nn.mish(tg.asarray([0.0, 1.0]))     # [0., 0.8651]
    """
    t = _float(x)
    return t * tnp.tanh(softplus(t))


def soft_sign(x: ArrayLike) -> Tensor:
    """x / (|x| + 1) (`jax.nn.soft_sign`), in (-1, 1); the gradient 1 / (|x| + 1)^2 is 1 at 0.

    >>> tg.nn.soft_sign(tg.asarray([-3.0, 1.0]))       # [-0.75, 0.5]
    """
    t = _float(x)
    return t / (tnp.abs(t) + 1)


def squareplus(x: ArrayLike, b: ArrayLike = 4) -> Tensor:
    """(x + sqrt(x^2 + b)) / 2 (`jax.nn.squareplus`; Barron, arXiv:2112.11687): a softplus made of one square root,
    smoother for larger `b` (a scalar or an array broadcasting with x; b = 0 is relu).

    >>> tg.nn.squareplus(tg.asarray([0.0, 3.0]))       # [1., 3.3028]
    """
    t = _float(x)
    y = t + tnp.sqrt(tnp.square(t) + b)
    return y / 2


def sparse_plus(x: ArrayLike) -> Tensor:
    """0 for x <= -1, (x + 1)^2 / 4 between, x for x >= 1 (`jax.nn.sparse_plus`, the twin of softplus with an exact
    0 and an exact identity; Blondel et al., "Learning with Fenchel-Young Losses"). Continuously differentiable:
    the gradient is sparse_sigmoid(x).

    >>> tg.nn.sparse_plus(tg.asarray([-2.0, 0.0, 2.0]))     # [0., 0.25, 2.]
    """
    t = _float(x)
    return (t <= -1).where(0.0, (t >= 1).where(t, (t + 1) ** 2 / 4))


def sparse_sigmoid(x: ArrayLike) -> Tensor:
    """0.5 * clip(x + 1, 0, 2) (`jax.nn.sparse_sigmoid`): 0 below -1, 1 above 1, linear between. At -1 and 1 the
    gradient is 0.25, half the slope, as JAX's clip splits a tie between its two sides.

    >>> tg.nn.sparse_sigmoid(tg.asarray([-2.0, 0.0, 0.5]))   # [0., 0.5, 0.75]
    """
    return 0.5 * tnp.clip(_float(x) + 1.0, 0.0, 2.0)


@custom_jvp
def _log1mexp(t: Tensor) -> Tensor:
    # log(-expm1(-x)) where exp(-x) is near 1, log1p(-exp(-x)) where it is small (Maechler's split at log 2)
    small = t < math.log(2.0)
    return small.where(tnp.log(-tnp.expm1(-t)), tnp.log1p(-tnp.exp(-t)))


# JAX's derivative rule: the plain chain rule through the unused branch would give 0 * inf = NaN
_log1mexp.defjvps(lambda g, ans, t: g / tnp.expm1(t))


def log1mexp(x: ArrayLike) -> Tensor:
    """log(1 - exp(-x)) for x >= 0, accurate at both ends (`jax.nn.log1mexp`; Maechler, "Accurately Computing
    log(1 - exp(-|a|))"): -inf at 0, NaN below it. Its gradient is 1 / expm1(x) (JAX's rule), inf at 0.

    >>> tg.nn.log1mexp(tg.asarray([1e-10, 1.0, 50.0]))    # [-23.0259, -0.4587, -1.9e-22]
    """
    return _log1mexp(_float(x))


def logmeanexp(x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None, keepdims: bool = False) -> Tensor:
    """log(mean(exp(x), axis)) = logsumexp(x, axis) - log(n), stable for any magnitude (`jax.nn.logmeanexp`).

    With `where` (booleans broadcasting to x's shape) only the entries where it is True count, in the sum and in n;
    a slice with none gives NaN, as in JAX.

    >>> tg.nn.logmeanexp(tg.asarray([[0.0, 2.0], [1.0, 1.0]]), axis=1)     # [1.4338, 1.]
    """
    t = _float(x)
    axes = _axes(t, axis, "logmeanexp")
    mask = _mask(t, where, "logmeanexp")
    lse = _logsumexp(t, axes, mask, keepdims)
    if mask is None:
        count = tnp.full((), math.prod(t.shape[a] for a in axes), lse.dtype)
    else:
        count = tnp.sum(mask, axis=axes, keepdims=keepdims, dtype=lse.dtype)
    return lse - tnp.log(count)


def identity(x: ArrayLike) -> Tensor:
    """x itself, as a Tensor (`jax.nn.identity`): the activation of a linear layer, dtype unchanged.

    >>> tg.nn.identity(tg.asarray([1, 2]))     # [1, 2], int32
    """
    return to_tensor(x)
