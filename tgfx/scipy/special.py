"""`tgfx.scipy.special`: the special functions of `jax.scipy.special` that programs use, as tgfx Tensor programs.

Every function is a composition of elementwise tgfx ops (polynomials, recurrences, `where`), so it runs on the
device, fuses with what surrounds it, traces under `jit` and is differentiable with `grad` at any order. Branches
are selected with `where` on inputs made safe for each branch, so a branch not taken never puts an inf or NaN into
the gradient. Those whose value is a long approximation (`erfc`, `ndtr`, `log_ndtr`, `erfinv`, `ndtri`) carry their
derivative in closed form (a `tg.function` with its own backward). The 16-bit floats are computed in float32 and
rounded once.

Accuracy, float64 / float32, measured against mpmath and scipy (relative; absolute near a function's zeros):
`erfc`, `ndtr`, `log_ndtr` a few ulp over the whole real line (no underflow to 0 before the true value does, no
cancellation in the tails; scipy's own ndtr is off by 2e-13 in the far tails); `ndtri` and `erfinv` 1e-15 / 3e-7,
`ndtri` down to the smallest normal probability; `gammaln` and `digamma` 1e-13 / 3e-6 (absolute 1e-14 / 2e-6 near
their zeros, e.g. gammaln(1) is 4.8e-7 in float32).

>>> import tgfx.scipy.special as sp
>>> sp.logsumexp(tg.asarray([1000.0, 1000.0]))          # 1000.6931
>>> sp.gammaln(tg.asarray([0.5, 10.0]))                  # [0.5723649, 12.801827]
>>> sp.log_ndtr(tg.asarray([-40.0]))                     # [-804.6084]: log of a probability below 1e-349
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import tgfx.numpy as tnp
from tgfx.dtypes import dtypes
from tgfx.function import with_derivative
from tgfx.ir.ops import Ops
from tgfx.nn._activations import log_softmax as log_softmax
from tgfx.nn._activations import sigmoid
from tgfx.nn._activations import softmax as softmax
from tgfx.numpy._reduce import _axes
from tgfx.random import _GILES_F32, _GILES_F64, _fma
from tgfx.scipy._util import compute_dtype, promote_args_inexact
from tgfx.tensor import ArrayLike, Tensor
from tgfx.transforms.grad import stop_gradient

Axis = int | Sequence[int] | None


def _float(x: ArrayLike, name: str) -> Tensor:
    return promote_args_inexact(name, x)[0]


def _upcast(t: Tensor) -> Tensor:
    d = compute_dtype(t.dtype)
    return t if t.dtype == d else t.astype(d)


# ---- log-sum-exp and the logistic function ----
def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False, where: ArrayLike | None = None) -> Tensor | tuple[Tensor, Tensor]:
    """log(sum(b * exp(a), axis)), computed stably, as `jax.scipy.special.logsumexp`.

    The maximum over `axis` is subtracted before `exp` (and added back after `log`), so large entries do not
    overflow; it is a constant shift and gets no gradient. `b` scales each term and broadcasts with `a`; entries with
    b == 0 are left out, even where a is inf. When the sum is negative, the result is NaN unless `return_sign=True`,
    which returns (log|sum|, sign(sum)) instead. A slice of all -inf gives -inf; `where` (a boolean mask broadcast
    against a) leaves the other entries out, and a slice with none left gives -inf.

    >>> logsumexp(tg.asarray([1000.0, 1000.0]))                          # 1000.6931, not inf
    >>> logsumexp(tg.asarray([1.0, 2.0]), b=tg.asarray([1.0, -1.0]), return_sign=True)   # (1.5413, -1.0)
    """
    if b is None:
        (t,) = promote_args_inexact("logsumexp", a)
        bt = None
    else:
        t, bt = promote_args_inexact("logsumexp", a, b)
        t, bt = tnp.broadcast_arrays(t, bt)
        t = tnp.where(bt != 0, t, -math.inf)
    if where is not None:
        t, keep = tnp.broadcast_arrays(t, tnp.asarray(where))
        t = tnp.where(keep, t, -math.inf)
        bt = None if bt is None else tnp.broadcast_to(bt, t.shape)
    axes = _axes(t, axis, "logsumexp")
    m = stop_gradient(tnp.max(t, axis=axes, keepdims=True)) if t.size else tnp.zeros((1,) * t.ndim, t.dtype)
    m = tnp.where(tnp.isfinite(m), m, 0.0)
    e = tnp.exp(t - m)
    total = tnp.sum(e if bt is None else e * bt, axis=axes, keepdims=True)
    sign = tnp.sign(total)
    out = tnp.log(tnp.abs(total)) + m
    if not keepdims:
        out, sign = tnp.squeeze(out, axes), tnp.squeeze(sign, axes)
    if return_sign:
        return out, sign
    return out if bt is None else tnp.where(sign < 0, math.nan, out)


def expit(x: ArrayLike) -> Tensor:
    """The logistic function 1 / (1 + exp(-x)) (`jax.scipy.special.expit`), accurate in both tails.

    >>> expit(tg.asarray([0.0, -100.0]))     # [0.5, 3.7e-44]
    """
    return sigmoid(_float(x, "expit"))


def logit(p: ArrayLike) -> Tensor:
    """The inverse of `expit`, log(p / (1 - p)) (`jax.scipy.special.logit`): -inf at 0, inf at 1, NaN outside [0, 1].

    Near p = 1/2 it is log1p(s) - log1p(-s) with s = 2p - 1 (exact), as scipy computes it, so logit(0.5 + d) keeps
    its relative accuracy for tiny d.

    >>> logit(tg.asarray([0.5, 0.75]))       # [0., 1.0986123]
    """
    t = _float(p, "logit")
    middle = tnp.abs(t - 0.5) < 0.2
    s = tnp.where(middle, 2 * t - 1, 0.0)
    tails = tnp.where(middle, 0.25, t)
    return tnp.where(middle, tnp.log1p(s) - tnp.log1p(-s), tnp.log(tails / (1 - tails)))


# ---- x log y ----
def xlogy(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x * log(y), and 0 where x == 0 whatever y is (unless y is NaN), as `jax.scipy.special.xlogy`.

    The gradient with respect to x is log(y); where x == 0 and y is 0, negative or inf it is 0 (not NaN).

    >>> xlogy(tg.asarray([0.0, 2.0]), tg.asarray([0.0, math.e]))    # [0., 2.]
    """
    a, b = promote_args_inexact("xlogy", x, y)
    usable = ((b > 0) & (b < math.inf)) | tnp.isnan(b)
    return a * tnp.log(tnp.where((a == 0) & ~usable, 1.0, b))


def xlog1py(x: ArrayLike, y: ArrayLike) -> Tensor:
    """x * log1p(y), and 0 where x == 0 whatever y is (unless y is NaN), as `jax.scipy.special.xlog1py`.

    >>> xlog1py(tg.asarray([0.0, 1.0]), tg.asarray([-1.0, 1.0]))   # [0., 0.6931472]
    """
    a, b = promote_args_inexact("xlog1py", x, y)
    usable = ((b > -1) & (b < math.inf)) | tnp.isnan(b)
    return a * tnp.log1p(tnp.where((a == 0) & ~usable, 0.0, b))


def entr(x: ArrayLike) -> Tensor:
    """The elementwise entropy -x log x: 0 at 0, -inf below 0 (`jax.scipy.special.entr`)."""
    t = _float(x, "entr")
    return tnp.where(t < 0, -math.inf, -xlogy(t, t))


# ---- the error function and the normal distribution ----
def erf(x: ArrayLike) -> Tensor:
    """The error function 2/sqrt(pi) * integral of exp(-t^2) from 0 to x (`jax.scipy.special.erf`), by the C
    library's erf.

    >>> erf(tg.asarray([0.0, 1.0]))           # [0., 0.8427008]
    """
    t = _float(x, "erf")
    return _upcast(t)._unary(Ops.ERF).astype(t.dtype)


# Chebyshev coefficients of (1 + 2x) exp(x^2) erfc(x) on x in [0, inf) in the variable u = (x - K) / (x + K), K = 3.75
# (the mapping of Shepherd and Laframboise, Math. Comp. 36 (1981)), fitted with mpmath at 120 Chebyshev nodes. The
# function is smooth and bounded on the whole half line (it tends to 2 / sqrt(pi)), so 25 terms give float64 and the
# first 14 float32.
_ERFCX_K = 3.75
_ERFCX_CHEB = (
    1.1775789345674017, -0.004590054580646478, -0.08424913336651792, 0.05920993999819189, -0.026658668435305753,
    0.009074997670705265, -0.002413163540417608, 0.0004907758365258086, -6.916973302501207e-05, 4.13902798607301e-06,
    7.74038306619849e-07, -2.1886401049234397e-07, 1.076499946567091e-08, 4.521959811218287e-09,
    -7.754400208831351e-10, -6.318088340886684e-11, 2.86879501093067e-11, 1.9455868545777347e-13,
    -9.65469674843344e-13, 3.25254814814874e-14, 3.3478119482868056e-14, -1.864562880419313e-15,
    -1.2507950530688648e-15, 7.418235256624044e-17, 5.068148904796111e-17,
)


def _erfcx_nonneg(x: Tensor) -> Tensor:
    """exp(x^2) erfc(x) for x >= 0 (any x >= 0 works, +inf included: it is clamped where the result is ~1/(x sqrt pi)
    and only ever multiplied by exp(-x^2) = 0 or subtracted from a -inf)."""
    xc = tnp.minimum(x, 1e30)
    u = (xc - _ERFCX_K) / (xc + _ERFCX_K)
    coeffs = _ERFCX_CHEB if x.dtype == dtypes.float64 else _ERFCX_CHEB[:14]
    b1, b2 = tnp.zeros_like(u), tnp.zeros_like(u)
    for c in reversed(coeffs[1:]):      # Clenshaw's recurrence
        b1, b2 = c + 2 * u * b1 - b2, b1
    return (coeffs[0] + u * b1 - b2) / (1 + 2 * xc)


def _exp_neg_square(z: Tensor, scale: float = 1.0) -> Tensor:
    """exp(-scale z^2) for z >= 0 (scale 1 or 1/2) without the rounding of z^2, which exp would scale by z^2 (1e-5
    relative at z = 9 in float32): z^2 = h^2 + (z - h)(z + h) for h = z rounded down to sixteenths, whose square
    (and half of it) is exact."""
    zc = tnp.minimum(z, 1e4)           # exp(-1e8) is 0 in every dtype; z - h would be NaN at inf
    h = tnp.floor(zc * 16) * (1 / 16)
    return tnp.exp(-scale * (h * h)) * tnp.exp(-scale * ((zc - h) * (zc + h)))


def _ndtr_neg(a: Tensor) -> Tensor:
    """ndtr(-a) = erfc(a / sqrt 2) / 2 for a >= 0, with exp(-a^2 / 2) taken from a itself (a / sqrt 2 is rounded;
    its square would be off by up to a^2 ulp)."""
    return 0.5 * _exp_neg_square(a, 0.5) * _erfcx_nonneg(a * math.sqrt(0.5))


def _split(t: Tensor) -> tuple[Tensor, Tensor]:
    """(t < 0, |t|) with |t|'s derivative +1 at 0 (where's, not abs's 0), so a function of |t| gets its one-sided
    derivative there."""
    neg = t < 0
    return neg, tnp.where(neg, -t, t)


def _erfc_value(x: Tensor) -> Tensor:
    neg, a = _split(x)
    pos = _exp_neg_square(a) * _erfcx_nonneg(a)
    return tnp.where(neg, 2 - pos, pos)


_erfc = with_derivative(_erfc_value, lambda x, y: (-2 / math.sqrt(math.pi)) * tnp.exp(-(x * x)))


def erfc(x: ArrayLike) -> Tensor:
    """The complementary error function 1 - erf(x) (`jax.scipy.special.erfc`), accurate where it is tiny.

    exp(-x^2) times a Chebyshev expansion of exp(x^2) erfc(x) for x >= 0 and 2 - erfc(-x) below, so erfc(10) is
    2.088e-45 (float64) rather than the 0 that 1 - erf(10) rounds to.

    >>> erfc(tg.asarray([0.0, 5.0]))          # [1., 1.5374597e-12]
    """
    t = _float(x, "erfc")
    return _erfc(_upcast(t)).astype(t.dtype)


def _erfinv_value(x: Tensor, central: bool = False) -> Tensor:
    """erfinv by Giles' pieces (the polynomials `tg.random.erfinv` and XLA evaluate), with every piece fed only
    values it is defined for (sqrt(w) of a w below its range, x of +-1); `central` (|x| below 0.99) uses the first
    piece alone."""
    d = x.dtype
    edge = (x == 1) | (x == -1)
    xs = tnp.where(edge, 0.0, x)
    w = -(tnp.log1p(xs) + tnp.log1p(-xs))          # -log(1 - x^2), without the rounding of 1 - x^2 near +-1
    pieces = (_GILES_F64 if d == dtypes.float64 else _GILES_F32)[:1 if central else None]
    out, lower = None, 0.0
    for upper, uses_sqrt, shift, coeffs in pieces:
        t = (tnp.sqrt(tnp.maximum(w, lower)) if uses_sqrt else tnp.minimum(w, upper)) - shift
        p = Tensor.literal(coeffs[0], d)
        for c in coeffs[1:]:
            p = _fma(p, t, Tensor.literal(c, d))
        out = p if out is None else tnp.where(w < lower, out, p)
        lower = upper
    return tnp.where(edge, tnp.where(x > 0, math.inf, -math.inf).astype(d), out * xs)


_erfinv = with_derivative(_erfinv_value, lambda x, y: (math.sqrt(math.pi) / 2) * tnp.exp(y * y))


def erfinv(x: ArrayLike) -> Tensor:
    """The inverse error function on (-1, 1), +-inf at +-1 and NaN outside (`jax.scipy.special.erfinv`), by Giles'
    approximation as `tg.random.normal` and XLA compute it; its gradient is sqrt(pi) / 2 exp(erfinv(x)^2).

    >>> erfinv(tg.asarray([0.0, 0.5]))        # [0., 0.4769363]
    """
    t = _float(x, "erfinv")
    return _erfinv(_upcast(t)).astype(t.dtype)


def _ndtr_value(x: Tensor) -> Tensor:
    pos, a = _split(-x)
    tail = _ndtr_neg(a)
    return tnp.where(pos, 1 - tail, tail)


_ndtr = with_derivative(_ndtr_value, lambda x, y: (1 / math.sqrt(2 * math.pi)) * tnp.exp(-0.5 * (x * x)))


def ndtr(x: ArrayLike) -> Tensor:
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2) (`jax.scipy.special.ndtr`), accurate in both tails.

    >>> ndtr(tg.asarray([0.0, -10.0]))        # [0.5, 7.619853e-24]
    """
    t = _float(x, "ndtr")
    return _ndtr(_upcast(t)).astype(t.dtype)


def _log_ndtr_value(x: Tensor) -> Tensor:
    neg, a = _split(x)
    lower = tnp.log(0.5 * _erfcx_nonneg(a * math.sqrt(0.5))) - 0.5 * (a * a)
    upper = tnp.log1p(-_ndtr_neg(a))
    return tnp.where(neg, lower, upper)


# pdf(x) / ndtr(x) as exp(log pdf(x) - log_ndtr(x)): both terms go to -inf together in the lower tail
_log_ndtr = with_derivative(_log_ndtr_value,
                             lambda x, y: tnp.exp(-0.5 * (x * x) - 0.5 * math.log(2 * math.pi) - y))


def log_ndtr(x: ArrayLike) -> Tensor:
    """log of the standard normal CDF (`jax.scipy.special.log_ndtr`), finite as far as x^2 / 2 is.

    For x < 0 it is log(erfcx(-x / sqrt 2) / 2) - x^2 / 2, with erfcx(z) = exp(z^2) erfc(z) taken directly, so
    nothing underflows (log_ndtr(-40) = -804.61 in float32 too); for x >= 0, log1p(-ndtr(-x)).

    >>> log_ndtr(tg.asarray([0.0, -40.0, 10.0]))    # [-0.6931472, -804.6084, -7.619853e-24]
    """
    t = _float(x, "log_ndtr")
    return _log_ndtr(_upcast(t)).astype(t.dtype)


def _ndtri_value(c: Tensor) -> Tensor:
    upper = c > 0.5
    q = tnp.where(upper, 1 - c, c)
    central = (q >= 0.02) & (q <= 0.5)
    tail = (q > 0) & (q < 0.02)
    mid = math.sqrt(2) * _erfinv_value(2 * tnp.where(central, c, 0.5) - 1, central=True)
    qs = tnp.where(tail, q, 0.01)
    w = tnp.sqrt(-2 * tnp.log(qs))
    x = (2.515517 + w * (0.802853 + w * 0.010328)) / (1 + w * (1.432788 + w * (0.189269 + w * 0.001308))) - w
    log_q = tnp.log(qs)
    for _ in range(2):
        a = tnp.maximum(-x, 0.0)
        e = _erfcx_nonneg(a * math.sqrt(0.5))
        x = x - (tnp.log(0.5 * e) - 0.5 * (a * a) - log_q) * (math.sqrt(math.pi / 2) * e)
    edge = tnp.where(q == 0, tnp.where(upper, math.inf, -math.inf).astype(c.dtype), math.nan)
    x = tnp.where(tail, tnp.where(upper, -x, x), edge)
    return tnp.where(central, mid, x)


_ndtri = with_derivative(_ndtri_value, lambda p, y: math.sqrt(2 * math.pi) * tnp.exp(0.5 * (y * y)))


def ndtri(p: ArrayLike) -> Tensor:
    """The inverse of `ndtr`: the x with ndtr(x) = p (`jax.scipy.special.ndtri`); -inf at 0, inf at 1, NaN outside.

    For q = min(p, 1 - p) above 1/50 it is sqrt(2) erfinv(2p - 1) (2p - 1 is exact, so ndtri(0.5 + d) keeps its
    relative accuracy); below, it starts from Abramowitz and Stegun's 26.2.23 (absolute error under 4.5e-4) and takes
    two Newton steps on log_ndtr(x) = log(q), each squaring the error (times at most 0.2), so it is accurate for every
    q down to the smallest normal float (ndtri(1e-300) = -37.04710 in float64). In that tail x < -2, where
    log_ndtr(x) and its derivative's inverse ndtr(x) / pdf(x) share one erfcx(-x / sqrt 2). The gradient is
    1 / pdf(ndtri(p)).

    >>> ndtri(tg.asarray([0.5, 0.975]))      # [0., 1.959964]
    """
    t = _float(p, "ndtri")
    return _ndtri(_upcast(t)).astype(t.dtype)


# ---- the gamma function ----
# Lanczos' approximation with g = 7 and 9 terms (Godfrey's coefficients), good to float64's precision for x >= 1/2:
# Gamma(z + 1) = sqrt(2 pi) (z + g + 1/2)^(z + 1/2) exp(-(z + g + 1/2)) A(z), A(z) = c0 + sum c_i / (z + i).
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
            12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)


def _lgamma_half_up(x: Tensor) -> Tensor:
    """log Gamma(x) for x >= 1/2 (Lanczos); log(t) as log(g + 1/2) + log1p(z / (g + 1/2)) keeps its precision."""
    z = x - 1
    a = _LANCZOS[0] + sum(c / (z + i) for i, c in enumerate(_LANCZOS[1:], start=1))
    t = z + (_LANCZOS_G + 0.5)
    log_t = math.log(_LANCZOS_G + 0.5) + tnp.log1p(z * (1 / (_LANCZOS_G + 0.5)))
    return 0.5 * math.log(2 * math.pi) + (z + 0.5) * log_t - t + tnp.log(a)


def _sin_pi_abs(x: Tensor) -> Tensor:
    """|sin(pi x)|, with x reduced to [0, 1/2] first, exactly: |x - round(x)| (0 at the integers, and |x| itself
    near 0, where x - floor(x) rounded -1e-300 up to 1 and gammaln(-1e-300) came out inf, not 690.8)."""
    return tnp.sin(math.pi * tnp.abs(x - tnp.round(x)))


def gammaln(x: ArrayLike) -> Tensor:
    """log |Gamma(x)| (`jax.scipy.special.gammaln`): +inf at 0 and the negative integers and at +-inf.

    Lanczos' approximation for x >= 1/2, the reflection log(pi / |sin(pi x)|) - gammaln(1 - x) below. Its gradient
    is that of the approximation, which is `digamma` to the same accuracy.

    >>> gammaln(tg.asarray([1.0, 0.5, 100.0, -0.5]))    # [0., 0.5723649, 359.13420, 1.2655121]
    """
    t = _float(x, "gammaln")
    c = _upcast(t)
    up = c >= 0.5
    y = tnp.where(up, c, 1 - c)
    inf = tnp.isinf(c)
    lg = _lgamma_half_up(tnp.where(inf, 1.0, y))
    reflected = math.log(math.pi) - tnp.log(_sin_pi_abs(tnp.where(up | inf, 0.5, c))) - lg
    out = tnp.where(up, lg, reflected)
    return tnp.where(inf, math.inf, out).astype(t.dtype)


def betaln(a: ArrayLike, b: ArrayLike) -> Tensor:
    """log |B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b) (`jax.scipy.special.betaln`)."""
    x, y = promote_args_inexact("betaln", a, b)
    return gammaln(x) + gammaln(y) - gammaln(x + y)


# asymptotic series of digamma: log w - 1 / (2w) - sum B_2k / (2k w^2k), k = 1..6
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760)
_DIGAMMA_SHIFT = 10


def _digamma_pos(x: Tensor) -> Tensor:
    """digamma(x) for x > 0: shifted up by ten with psi(x) = psi(x + 10) - sum 1 / (x + k), then the asymptotic
    series, whose first omitted term is below 1e-15 at 10."""
    w = x + _DIGAMMA_SHIFT
    inv2 = 1 / (w * w)
    series = _DIGAMMA_SERIES[-1]
    for c in reversed(_DIGAMMA_SERIES[:-1]):
        series = c + inv2 * series
    shift = sum(1 / (x + k) for k in range(_DIGAMMA_SHIFT))
    return tnp.log(w) - 0.5 / w - inv2 * series - shift


def digamma(x: ArrayLike) -> Tensor:
    """The logarithmic derivative of Gamma, psi(x) = Gamma'(x) / Gamma(x) (`jax.scipy.special.digamma`).

    A recurrence and the asymptotic series for x > 0; the reflection psi(1 - x) - pi / tan(pi x) below. At the poles
    it is scipy's: -inf at 0, NaN at the negative integers.

    >>> digamma(tg.asarray([1.0, 0.5]))       # [-0.5772157, -1.9635100]
    """
    t = _float(x, "digamma")
    c = _upcast(t)
    pos = c > 0
    y = tnp.where(pos, c, 1 - c)
    r = tnp.where(pos, 0.25, c)
    cot = math.pi / tnp.tan(math.pi * (r - tnp.round(r)))
    out = _digamma_pos(y)
    pole = (c < 0) & (c == tnp.floor(c))
    return tnp.where(pos, out, tnp.where(pole, math.nan, out - cot)).astype(t.dtype)


# The rest of jax.scipy.special lives in modules of its own, which build on the functions above (so they are
# imported last): `_special_gamma` (the gamma family, the incomplete gamma and beta functions, zeta),
# `_special_extra` (Bessel functions, exponential integrals, erfcx, dawsn, spence, entropies, Box-Cox) and
# `_special_more` (hypergeometric functions, sine / cosine and Fresnel integrals, Owen's T, Bessel J).
from tgfx.scipy._special_extra import boxcox as boxcox  # noqa: E402
from tgfx.scipy._special_extra import boxcox1p as boxcox1p  # noqa: E402
from tgfx.scipy._special_extra import dawsn as dawsn  # noqa: E402
from tgfx.scipy._special_extra import erfcx as erfcx  # noqa: E402
from tgfx.scipy._special_extra import exp1 as exp1  # noqa: E402
from tgfx.scipy._special_extra import expi as expi  # noqa: E402
from tgfx.scipy._special_extra import expn as expn  # noqa: E402
from tgfx.scipy._special_extra import i0 as i0  # noqa: E402
from tgfx.scipy._special_extra import i0e as i0e  # noqa: E402
from tgfx.scipy._special_extra import i1 as i1  # noqa: E402
from tgfx.scipy._special_extra import i1e as i1e  # noqa: E402
from tgfx.scipy._special_extra import kl_div as kl_div  # noqa: E402
from tgfx.scipy._special_extra import rel_entr as rel_entr  # noqa: E402
from tgfx.scipy._special_extra import spence as spence  # noqa: E402
from tgfx.scipy._special_gamma import bernoulli as bernoulli  # noqa: E402
from tgfx.scipy._special_gamma import beta as beta  # noqa: E402
from tgfx.scipy._special_gamma import betainc as betainc  # noqa: E402
from tgfx.scipy._special_gamma import comb as comb  # noqa: E402
from tgfx.scipy._special_gamma import factorial as factorial  # noqa: E402
from tgfx.scipy._special_gamma import gamma as gamma  # noqa: E402
from tgfx.scipy._special_gamma import gammainc as gammainc  # noqa: E402
from tgfx.scipy._special_gamma import gammaincc as gammaincc  # noqa: E402
from tgfx.scipy._special_gamma import gammasgn as gammasgn  # noqa: E402
from tgfx.scipy._special_gamma import loggamma as loggamma  # noqa: E402
from tgfx.scipy._special_gamma import multigammaln as multigammaln  # noqa: E402
from tgfx.scipy._special_gamma import poch as poch  # noqa: E402
from tgfx.scipy._special_gamma import polygamma as polygamma  # noqa: E402
from tgfx.scipy._special_gamma import zeta as zeta  # noqa: E402
from tgfx.scipy._special_more import bessel_jn as bessel_jn  # noqa: E402
from tgfx.scipy._special_more import fresnel as fresnel  # noqa: E402
from tgfx.scipy._special_more import hyp1f1 as hyp1f1  # noqa: E402
from tgfx.scipy._special_more import hyp2f1 as hyp2f1  # noqa: E402
from tgfx.scipy._special_more import owens_t as owens_t  # noqa: E402
from tgfx.scipy._special_more import sici as sici  # noqa: E402

__all__ = ["logsumexp", "softmax", "log_softmax", "expit", "logit", "xlogy", "xlog1py", "entr", "erf", "erfc",
           "erfinv", "ndtr", "ndtri", "log_ndtr", "gammaln", "betaln", "digamma",
           "gamma", "gammasgn", "loggamma", "factorial", "comb", "beta", "poch", "multigammaln", "gammainc",
           "gammaincc", "betainc", "zeta", "polygamma", "bernoulli",
           "i0", "i0e", "i1", "i1e", "expi", "exp1", "expn", "erfcx", "dawsn", "spence", "kl_div", "rel_entr",
           "boxcox", "boxcox1p", "hyp1f1", "hyp2f1", "sici", "fresnel", "owens_t", "bessel_jn"]
