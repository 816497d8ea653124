"""The gamma family of `jax.scipy.special` beyond `gammaln` / `digamma`: gamma, its sign, beta, factorials, the
regularised incomplete gamma and beta functions, Hurwitz zeta, polygamma and the Bernoulli numbers.

Each follows JAX's algorithm (XLA's and Cephes' before it), so values agree with `jax.scipy.special` to the
dtype's accuracy: gamma as sign * exp(gammaln); `gammainc` / `gammaincc` by the power series of P(a, x) below
x = max(1, a) and the continued fraction of Q(a, x) above; `betainc` by the continued fraction of DLMF 8.17.22 with
the modified Lentz method; `zeta` by Euler-Maclaurin summation after ten terms. The iterations are
`tg.lax.while_loop`s over the whole array that stop when every element has converged, each element keeping its
value once it has. Their derivatives are JAX's closed forms (a `tg.custom_jvp`), never the loop's: `gammainc` in x
and in a (d/da by the same series carrying its derivative), `betainc` in x only (as JAX, whose derivatives in a and
b do not exist: here they are NaN, so that asking for one shows it instead of a silent zero), `zeta` in both.

>>> import tgfx.scipy.special as sp
>>> sp.gamma(tg.asarray([0.5, -1.5, 5.0]))              # [1.7724539, 2.3632717, 24.]
>>> sp.gammainc(2.0, tg.asarray([0.5, 3.0]))            # [0.09020186, 0.80085173]
>>> sp.polygamma(1, tg.asarray([1.0]))                  # [1.644934]: pi^2 / 6
"""
from __future__ import annotations

import math
import operator

import numpy as np

import tgfx.numpy as tnp
from tgfx.custom import custom_jvp
from tgfx.dtypes import DType, dtypes
from tgfx.lax import while_loop
from tgfx.scipy._util import compute_dtype, promote_args_inexact
from tgfx.scipy.special import betaln, digamma, gammaln
from tgfx.tensor import ArrayLike, Tensor, promotion_kind, static_int


def _real(name: str, *args: ArrayLike) -> list[Tensor]:
    """The arguments promoted to one float dtype, as JAX's `promote_args_inexact`; complex ones are refused."""
    out = promote_args_inexact(name, *args)
    if out and out[0].dtype.is_complex:
        raise ValueError(f"{name} does not support complex-valued inputs (got {out[0].dtype.name}); pass real "
                         f"arrays, e.g. x.real")
    return out


def _eps(d: DType) -> float:
    return float(np.finfo(d.np).eps)


def _broadcast(name: str, *ts: Tensor) -> list[Tensor]:
    try:
        return tnp.broadcast_arrays(*ts)
    except ValueError:
        raise ValueError(f"{name}: the arguments' shapes {', '.join(str(t.shape) for t in ts)} do not broadcast "
                         f"together; reshape them (e.g. add axes of length 1) so that they do") from None


def _upcast_all(name: str, *ts: Tensor) -> tuple[list[Tensor], DType]:
    """The arguments broadcast together and in their compute dtype (float32 for the 16-bit floats), and the dtype to
    round the result back to."""
    d = ts[0].dtype
    c = compute_dtype(d)
    return [t if t.dtype == c else t.astype(c) for t in _broadcast(name, *ts)], d


# ---- gamma, its sign, factorials, beta ----
def gammasgn(x: ArrayLike) -> Tensor:
    """The sign of the gamma function (`jax.scipy.special.gammasgn`): +-1, +-1 at +-0, NaN at the negative integers
    (where the sign depends on the side), at -inf and at NaN.

    >>> gammasgn(tg.asarray([0.5, -0.5, -1.5, -2.0]))    # [1., -1., 1., nan]
    """
    (t,) = _real("gammasgn", x)
    fl = tnp.floor(t)
    neg = t < 0
    nan = (neg & (t == fl)) | tnp.isnan(t)
    minus = (neg & (tnp.fmod(fl, 2) != 0)) | ((t == 0) & tnp.signbit(t))
    one = tnp.ones_like(t)
    return tnp.where(nan, math.nan, tnp.where(minus, -one, one))


def gamma(x: ArrayLike) -> Tensor:
    """The gamma function, gammasgn(x) * exp(gammaln(x)) as JAX computes it (`jax.scipy.special.gamma`): +-inf at
    +-0, NaN at the negative integers and -inf, inf above 171.6 (float64) or 35.04 (float32).

    >>> gamma(tg.asarray([0.5, 5.0, -1.5]))                # [1.7724539, 24., 2.3632717]
    """
    (t,) = _real("gamma", x)
    return gammasgn(t) * tnp.exp(gammaln(t))


def loggamma(x: ArrayLike) -> Tensor:
    """The principal branch of log Gamma for real x (`jax.scipy.special.loggamma`): gammaln(x) for x > 0, NaN at and
    below 0 (where Gamma's logarithm is complex).

    >>> loggamma(tg.asarray([0.5, 10.0, -0.5]))            # [0.5723649, 12.801827, nan]
    """
    (t,) = _real("loggamma", x)
    pos = t > 0
    return tnp.where(pos, gammaln(tnp.where(pos, t, 1.0)), math.nan)


def factorial(n: ArrayLike, exact: bool = False) -> Tensor:
    """n! as exp(gammaln(n + 1)), a float, 0 for n < 0 (`jax.scipy.special.factorial`); non-integers get Gamma's
    interpolation. `exact=True` is refused, as in JAX: 21! does not fit in an int64.

    >>> factorial(tg.asarray([0.0, 5.0, 3.5, -1.0]))      # [1., 120., 11.631728, 0.]
    """
    if exact:
        raise NotImplementedError("factorial with exact=True: there is no arbitrary-precision integer on the device; "
                                  "use math.factorial on the host")
    (t,) = _real("factorial", n)
    return tnp.where(t < 0, 0.0, tnp.exp(gammaln(tnp.where(t < 0, 0.0, t) + 1)))


def comb(N: ArrayLike, k: ArrayLike, *, repetition: bool = False) -> Tensor:  # noqa: N803 - scipy's name
    """The number of ways to choose k of N things, exp(gammaln(N + 1) - gammaln(k + 1) - gammaln(N - k + 1)), a
    float (`jax.scipy.special.comb`); 0 where N < 0, k < 0 or k > N. `repetition=True` counts multisets:
    comb(N + k - 1, k), and 1 for k == 0.

    >>> comb(5.0, tg.asarray([0.0, 2.0, 6.0]))             # [1., 10., 0.]
    """
    nt, kt = _real("comb", N, k)
    if repetition:
        return tnp.where((kt == 0) & (nt >= 0), 1.0, comb(nt + kt - 1, kt))
    ok = (kt <= nt) & (nt >= 0) & (kt >= 0)
    sn, sk = tnp.where(ok, nt, 0.0), tnp.where(ok, kt, 0.0)
    return tnp.where(ok, tnp.exp(gammaln(sn + 1) - gammaln(sk + 1) - gammaln(sn + 1 - sk)), 0.0)


def beta(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The beta function Gamma(a) Gamma(b) / Gamma(a + b), as its sign times exp(betaln) (`jax.scipy.special.beta`).

    >>> beta(2.0, tg.asarray([3.0, 0.5]))                  # [0.08333333, 1.3333333]
    """
    at, bt = _real("beta", a, b)
    return gammasgn(at) * gammasgn(bt) * gammasgn(at + bt) * tnp.exp(betaln(at, bt))


@custom_jvp
def _poch(z: Tensor, m: Tensor) -> Tensor:
    return tnp.where(m == 0, tnp.ones_like(z), gamma(z + m) / gamma(z))


_poch.defjvps(lambda g, y, z, m: g * (digamma(z + m) - digamma(z)) * y,
              lambda g, y, z, m: g * digamma(z + m) * y)


def poch(z: ArrayLike, m: ArrayLike) -> Tensor:
    """The Pochhammer symbol (z)_m = Gamma(z + m) / Gamma(z), 1 where m == 0 (`jax.scipy.special.poch`); its
    derivatives are JAX's, (digamma(z + m) - digamma(z)) poch and digamma(z + m) poch, at m == 0 too.

    >>> poch(3.0, tg.asarray([0.0, 2.0]))                  # [1., 12.]
    """
    zt, mt = _real("poch", z, m)
    zt, mt = _broadcast("poch", zt, mt)
    return _poch(zt, mt)


def multigammaln(a: ArrayLike, d: int) -> Tensor:
    """log of the multivariate gamma function, d (d - 1) / 4 log(pi) + sum_{i<d} gammaln(a - i / 2)
    (`jax.scipy.special.multigammaln`); `d` is a Python int (it sets the number of terms).

    >>> multigammaln(tg.asarray([3.0, 4.0]), 3)            # [2.694925, 5.402975]
    """
    try:
        dim = operator.index(d)
    except TypeError:
        raise TypeError(f"multigammaln: d must be a Python int (the dimension, which sets how many terms are summed), "
                        f"got {type(d).__name__}; a traced value cannot be used") from None
    if dim < 1:
        raise ValueError(f"multigammaln: d must be at least 1, got {dim}")
    (t,) = _real("multigammaln", a)
    halves = tnp.arange(dim, dtype=t.dtype) / 2
    total = tnp.sum(gammaln(t[..., None] - halves), axis=-1)
    return total + 0.25 * dim * (dim - 1) * math.log(math.pi)


# ---- the regularised incomplete gamma functions ----
def _igamma_series(ax: Tensor, x: Tensor, a: Tensor, enabled: Tensor, derivative: bool) -> Tensor:
    """P(a, x) = ax / a * sum_n x^n / ((a+1)...(a+n)) (XLA's `IgammaSeries`), or its derivative in a."""
    ans, dans = igamma_series_sums(x, a, enabled, derivative)
    if not derivative:
        return ans * ax / a
    return ax * (ans * (tnp.log(x) - digamma(a + 1)) + dans) / a


def igamma_series_sums(x: Tensor, a: Tensor, enabled: Tensor, derivative: bool) -> tuple[Tensor, Tensor]:
    """The series of P(a, x) = ax / a * sum_n x^n / ((a+1)...(a+n)) and, with `derivative`, the sum's derivative in
    a carried along: (sum, its a-derivative), each element stopped when its last term no longer moves the sum (or
    its derivative). The gamma sampler's implicit gradient (`tgfx/_random_dists.py`) reads them too."""
    eps = _eps(x.dtype)
    one, zero = tnp.ones_like(a), tnp.zeros_like(a)

    def body(s: tuple) -> tuple:
        on, r, c, ans, dc, dans = s
        r1 = r + 1
        dc1 = dc * (x / r1) - (c * x) / (r1 * r1) if derivative else dc
        dans1 = dans + dc1 if derivative else dans
        c1 = c * (x / r1)
        ans1 = ans + c1
        more = on & ((tnp.abs(dc1 / dans1) if derivative else c1 / ans1) > eps)
        return (more, *(tnp.where(on, new, old) for new, old in zip((r1, c1, ans1, dc1, dans1), s[1:], strict=True)))

    _, _, _, ans, _, dans = while_loop(lambda s: tnp.any(s[0]), body, (enabled, a, one, one, zero, zero))
    return ans, dans


def _igammac_cf(ax: Tensor, x: Tensor, a: Tensor, enabled: Tensor, derivative: bool) -> Tensor:
    """Q(a, x) by its continued fraction (XLA's `IgammacContinuedFraction`), or its derivative in a."""
    ans, dans = igammac_fraction(x, a, enabled, derivative)
    if not derivative:
        return ans * ax
    return ax * (ans * (tnp.log(x) - digamma(a)) + dans)


def igammac_fraction(x: Tensor, a: Tensor, enabled: Tensor, derivative: bool) -> tuple[Tensor, Tensor]:
    """The continued fraction of Q(a, x) (at most 2000 terms) and, with `derivative`, its a-derivative from those of
    every convergent's numerator and denominator; all rescaled by eps when the numerator grows past 1 / eps. The
    gamma sampler's implicit gradient (`tgfx/_random_dists.py`) reads them too."""
    d = x.dtype
    eps = _eps(d)
    zero = tnp.zeros_like(x)

    def body(s: tuple) -> tuple:
        on, c, ans, y, z, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans = s
        c = c + 1
        y1, z1 = y + 1, z + 2
        yc = y1 * c
        pk = pkm1 * z1 - pkm2 * yc
        qk = qkm1 * z1 - qkm2 * yc
        nonzero = qk != 0
        safe_qk = tnp.where(nonzero, qk, 1.0)
        r = pk / safe_qk
        t = tnp.where(nonzero, tnp.abs((ans - r) / r), 1.0)
        ans1 = tnp.where(nonzero, r, ans)
        if derivative:
            dpk = dpkm1 * z1 - pkm1 - dpkm2 * yc + pkm2 * c
            dqk = dqkm1 * z1 - qkm1 - dqkm2 * yc + qkm2 * c
            dans1 = tnp.where(nonzero, (dpk - ans1 * dqk) / safe_qk, dans)
            moved = tnp.where(nonzero, tnp.abs(dans1 - dans), 1.0)
        else:
            dpk, dqk, dans1, moved = dpkm1, dqkm1, dans, t
        rescale = tnp.abs(pk) > 1 / eps
        scaled = [tnp.where(rescale, v * eps, v) for v in (pkm1, pk, qkm1, qk, dpkm1, dqkm1, dpk, dqk)]
        news = (ans1, y1, z1, scaled[1], scaled[3], scaled[0], scaled[2], *scaled[4:], dans1)
        olds = (ans, y, z, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans)
        return (on & (moved > eps), c, *(tnp.where(on, n, o) for n, o in zip(news, olds, strict=True)))

    y = 1 - a
    z = x + y + 1
    pkm1 = x + 1
    qkm1 = z * x
    ans = pkm1 / qkm1
    init = (enabled, Tensor.full((), 0.0, d), ans, y, z, pkm1, qkm1, tnp.ones_like(x), x, zero, zero, zero, -x,
            ans * x / qkm1)
    out = while_loop(lambda s: (s[1] < 2000) & tnp.any(s[0]), body, init)
    return out[2], out[13]


def _igamma_prefix(a: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
    """exp(a log x - x - gammaln(a)), the factor both expansions share, and whether it underflows (then P is 0 or 1
    to working precision and neither expansion runs). Inputs outside the domain get a harmless stand-in."""
    ok = (a > 0) & (x > 0) & (x < math.inf)
    sa, sx = tnp.where(ok, a, 1.0), tnp.where(ok, x, 1.0)
    log_ax = sa * tnp.log(sx) - sx - gammaln(sa)
    return tnp.exp(log_ax), ~ok | (log_ax < -math.log(float(np.finfo(a.dtype.np).max)))


def _domain_error(a: Tensor, x: Tensor) -> Tensor:
    return (x < 0) | (a < 0) | ((a == 0) & (x == 0)) | tnp.isnan(a) | tnp.isnan(x)


def _igamma_value(a: Tensor, x: Tensor) -> Tensor:
    ax, skip = _igamma_prefix(a, x)
    use_cf = (x >= 1) & (x > a)
    enabled = ~skip
    sa, sx = tnp.where(enabled, a, 1.0), tnp.where(enabled, x, 1.0)
    out = tnp.where(use_cf, 1 - _igammac_cf(ax, sx, sa, enabled & use_cf, False),
                    _igamma_series(ax, sx, sa, enabled & ~use_cf, False))
    out = tnp.where(skip, tnp.where(x > a, 1.0, 0.0), out)       # an underflowed prefix: P is 0 or 1
    out = tnp.where((x == math.inf) | ((a == 0) & (x > 0)), 1.0, tnp.where(x == 0, 0.0, out))
    return tnp.where(_domain_error(a, x), math.nan, out)


def _igamma_grad_a_value(a: Tensor, x: Tensor) -> Tensor:
    """dP(a, x)/da (XLA's `IgammaGradA`): 0 at x = 0 and where the prefix underflows, NaN for a <= 0 or x < 0."""
    ax, skip = _igamma_prefix(a, x)
    use_cf = (x > 1) & (x > a)
    enabled = ~skip
    sa, sx = tnp.where(enabled, a, 1.0), tnp.where(enabled, x, 1.0)
    out = tnp.where(use_cf, -_igammac_cf(ax, sx, sa, enabled & use_cf, True),
                    _igamma_series(ax, sx, sa, enabled & ~use_cf, True))
    out = tnp.where(skip, 0.0, out)
    return tnp.where((x < 0) | (a <= 0) | tnp.isnan(a) | tnp.isnan(x), math.nan, out)


def _igamma_dx(a: Tensor, x: Tensor) -> Tensor:
    """dP(a, x)/dx = x^(a-1) exp(-x) / Gamma(a)."""
    return tnp.exp(-x + (a - 1) * tnp.log(x) - gammaln(a))


@custom_jvp
def _gammainc(a: Tensor, x: Tensor) -> Tensor:
    return _igamma_value(a, x)


def _igammac_value(a: Tensor, x: Tensor) -> Tensor:
    ax, skip = _igamma_prefix(a, x)
    use_series = (x < 1) | (x < a)
    enabled = ~skip
    sa, sx = tnp.where(enabled, a, 1.0), tnp.where(enabled, x, 1.0)
    out = tnp.where(use_series, 1 - _igamma_series(ax, sx, sa, enabled & use_series, False),
                    _igammac_cf(ax, sx, sa, enabled & ~use_series, False))
    out = tnp.where(skip, tnp.where(x > a, 0.0, 1.0), out)
    out = tnp.where((x == math.inf) | ((a == 0) & (x > 0)), 0.0, tnp.where(x == 0, 1.0, out))
    return tnp.where(_domain_error(a, x), math.nan, out)


@custom_jvp
def _gammaincc(a: Tensor, x: Tensor) -> Tensor:
    return _igammac_value(a, x)


_gammainc.defjvps(lambda g, y, a, x: g * _igamma_grad_a_value(a, x), lambda g, y, a, x: g * _igamma_dx(a, x))
_gammaincc.defjvps(lambda g, y, a, x: -g * _igamma_grad_a_value(a, x), lambda g, y, a, x: -g * _igamma_dx(a, x))


def gammainc(a: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularised lower incomplete gamma function P(a, x) = 1/Gamma(a) int_0^x t^(a-1) e^-t dt
    (`jax.scipy.special.gammainc`), for a >= 0, x >= 0 (NaN outside, and at a = x = 0).

    The power series below x = max(1, a), 1 - the continued fraction of Q above (XLA's algorithm), each iterated
    until every element has converged. Differentiable in x (x^(a-1) e^-x / Gamma(a)) and in a (by the series and
    the fraction carrying their derivative in a, as XLA's `igamma_grad_a`). At a = 0, x > 0 it is 1, scipy's limit
    (JAX's own is NaN for x < 1 there).

    >>> gammainc(tg.asarray([1.0, 2.0]), 2.0)              # [0.86466473, 0.5939942]
    """
    at, xt = _real("gammainc", a, x)
    (at, xt), d = _upcast_all("gammainc", at, xt)
    return _gammainc(at, xt).astype(d)


def gammaincc(a: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularised upper incomplete gamma function Q(a, x) = 1 - P(a, x) (`jax.scipy.special.gammaincc`),
    computed directly where it is small (the continued fraction for x >= max(1, a)), so gammaincc(1, 50) is
    1.9e-22, not 0.

    >>> gammaincc(tg.asarray([1.0, 2.0]), 2.0)             # [0.13533528, 0.40600586]
    """
    at, xt = _real("gammaincc", a, x)
    (at, xt), d = _upcast_all("gammaincc", at, xt)
    return _gammaincc(at, xt).astype(d)


# ---- the regularised incomplete beta function ----
def _betainc_value(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    """XLA's `RegularizedIncompleteBeta`: the continued fraction of DLMF 8.17.22 by the modified Lentz method (at
    most 200 / 600 terms in float32 / float64, all elements iterated until the slowest converges), on (a, b, x) or,
    where it would converge slowly, on (b, a, 1 - x) by the symmetry I_x(a, b) = 1 - I_{1-x}(b, a)."""
    d = x.dtype
    tiny = _eps(d) / 2
    a_zero = (a == 0) | (b == math.inf)
    b_zero = (b == 0) | (a == math.inf)
    x_zero, x_one = x == 0, x == 1
    is_zero = (b_zero & ~x_one) | (a_zero & x_zero)
    is_one = (a_zero & ~x_zero) | (b_zero & x_one)
    is_nan = (a < 0) | (b < 0) | (x < 0) | (x > 1) | (a_zero & b_zero) | tnp.isnan(a) | tnp.isnan(b) | tnp.isnan(x)
    special = is_zero | is_one | is_nan
    a, b, x = tnp.where(special, 1.0, a), tnp.where(special, 1.0, b), tnp.where(special, 0.5, x)
    fast = x < (a + 1) / (a + b + 2)
    a, b, x = tnp.where(fast, a, b), tnp.where(fast, b, a), tnp.where(fast, x, 1 - x)

    def numerator(it: Tensor) -> Tensor:
        """The partial numerator of step `it`: 1 at the first, then the even and odd terms of DLMF 8.17.23."""
        m = ((it - 1) // 2).astype(d)
        even = tnp.where(m == 0, -(a + b) * x / (a + 1),
                         -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)))
        odd = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        return tnp.where(it == 1, 1.0, tnp.where(it % 2 == 0, even, odd))

    def body(s: tuple) -> tuple:
        it, _, c, dd, h = s
        pn = numerator(it)
        c = 1 + pn / c
        c = tnp.where(tnp.abs(c) < tiny, tiny, c)
        dd = 1 + pn * dd
        dd = 1 / tnp.where(tnp.abs(dd) < tiny, tiny, dd)
        delta = c * dd
        return it + 1, tnp.any(tnp.abs(delta - 1) >= tiny), c, dd, h * delta

    h0 = Tensor.full(x.shape, tiny, d)
    steps = 200 if d == dtypes.float32 else 600
    init = (Tensor.full((), 1, dtypes.int32), Tensor.full((), True, dtypes.bool), h0, tnp.zeros_like(x), h0)
    cf = while_loop(lambda s: (s[0] < steps) & s[1], body, init)[4]
    # a Gamma(a) -> 1 as a -> 0, so for a below the smallest normal B(a, b) is taken as 1 / a
    small_a = a < 2 * float(np.finfo(d.np).tiny)
    lbeta_small = gammaln(b) - gammaln(a + b)
    factor = tnp.where(small_a, tnp.exp(tnp.log1p(-x) * b - lbeta_small),
                       tnp.exp(tnp.log(x) * a + tnp.log1p(-x) * b - gammaln(a) - lbeta_small) / a)
    out = cf * factor
    out = tnp.where(fast, out, 1 - out)
    return tnp.where(is_nan, math.nan, tnp.where(is_one, 1.0, tnp.where(is_zero, 0.0, out)))


def _nan_tangent(g: Tensor) -> Tensor:
    """A tangent that is NaN wherever it is used (linear in g, as a JVP must be): the derivative does not exist."""
    return g * math.nan


@custom_jvp
def _betainc(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    return _betainc_value(a, b, x)


_betainc.defjvps(lambda g, y, a, b, x: _nan_tangent(g), lambda g, y, a, b, x: _nan_tangent(g),
                 lambda g, y, a, b, x: g * tnp.exp((b - 1) * tnp.log1p(-x) + (a - 1) * tnp.log(x) - betaln(a, b)))


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Tensor:
    """The regularised incomplete beta function I_x(a, b) = 1/B(a, b) int_0^x t^(a-1) (1-t)^(b-1) dt
    (`jax.scipy.special.betainc`), for a, b >= 0 and 0 <= x <= 1 (NaN outside).

    By XLA's continued fraction (modified Lentz), on whichever of I_x(a, b) and 1 - I_{1-x}(b, a) converges fast.
    Differentiable in x (x^(a-1) (1-x)^(b-1) / B(a, b)); JAX has no derivative in a or b, and here it is NaN.

    >>> betainc(2.0, 3.0, tg.asarray([0.25, 0.5]))         # [0.26171875, 0.6875]
    """
    at, bt, xt = _real("betainc", a, b, x)
    (at, bt, xt), d = _upcast_all("betainc", at, bt, xt)
    return _betainc(at, bt, xt).astype(d)


# ---- the Hurwitz zeta function and polygamma ----
# (2k)! / B_2k, k = 1..12: the Euler-Maclaurin coefficients of Cephes' zeta.c (and XLA's)
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
           -7.1661652561756670113e18)


def _zeta_value(x: Tensor, q: Tensor) -> Tensor:
    """Cephes' / XLA's zeta: the first ten terms summed, the rest by Euler-Maclaurin with twelve Bernoulli terms;
    the ten terms alone where the eleventh is below eps of them."""
    d = x.dtype
    terms = [tnp.power(q + i, -x) for i in range(10)]
    s = sum(terms[1:], terms[0])
    w = q + 9
    b = terms[-1]
    full = s + b * w / (x - 1) - 0.5 * b
    fac, k = tnp.ones_like(x), 0.0
    for c in _ZETA_A:
        fac = fac * (x + k)
        b = b / w
        full = full + fac * b / c
        fac = fac * (x + k + 1)
        b = b / w
        k += 2
    # (and where the tenth term underflowed to 0, so did the tail: zeta(170, 2) in float32 is 0, where the Bernoulli
    # terms' factors overflowed and 0 * inf made it NaN; polygamma(n, inf) likewise)
    out = tnp.where((tnp.abs(terms[-1]) < tnp.abs(s) * _eps(d)) | (terms[-1] == 0), s, full)
    out = tnp.where(x == 1, math.inf, tnp.where(x < 1, math.nan, out))
    q_nonpos = q <= 0
    out = tnp.where(q_nonpos & (x != tnp.floor(x)), math.nan, out)
    pole = q_nonpos & (q == tnp.floor(q))
    return tnp.where(pole, tnp.where(tnp.fmod(x, 2) != 0, math.nan, math.inf), out)


def _zeta_dx(s: Tensor, a: Tensor) -> Tensor:
    """d zeta(s, a) / ds by the derivative of Johansson's expansion (Numer. Algorithms 69 (2015), eq. 5), which JAX
    differentiates for its rule: sum_{k<N} (a+k)^-s + (a+N)^(1-s) / (s-1) + (a+N)^-s (1/2 + sum_j T_j / c_j)."""
    n = 8 if s.dtype == dtypes.float32 else 16
    d_sum = sum((-tnp.log(a + k) * tnp.power(a + k, -s) for k in range(n)), tnp.zeros_like(s))
    an = a + n
    log_an = tnp.log(an)
    integral = tnp.power(an, 1 - s) / (s - 1)
    d_integral = integral * (-log_an - 1 / (s - 1))
    t0 = tnp.power(an, -s)
    series, d_series = 0.5 * tnp.ones_like(s), tnp.zeros_like(s)
    prod, d_log = tnp.ones_like(s), tnp.zeros_like(s)
    for j in range(n):
        for m in ((0,) if j == 0 else (2 * j - 1, 2 * j)):
            prod = prod * (s + m) / an
            d_log = d_log + 1 / (s + m)
        series = series + prod / _EM_COEFS[j]
        d_series = d_series + prod * d_log / _EM_COEFS[j]
    return d_sum + d_integral - log_an * t0 * series + t0 * d_series


@custom_jvp
def _zeta(x: Tensor, q: Tensor) -> Tensor:
    return _zeta_value(x, q)


_zeta.defjvps(lambda g, y, x, q: g * _zeta_dx(x, q), lambda g, y, x, q: -g * x * _zeta(x + 1, q))


def zeta(x: ArrayLike, q: ArrayLike | None = None) -> Tensor:
    """The Hurwitz zeta function sum_{n>=0} (n + q)^-x (`jax.scipy.special.zeta`), for x > 1 (inf at 1, NaN below);
    q <= 0 needs an integer x, and at the poles q = 0, -1, ... it is inf (even x) or NaN (odd x). The Riemann zeta
    (q=None) is not implemented, as in JAX: pass q=1.

    Ten terms, then Euler-Maclaurin summation (Cephes' algorithm, as XLA's). Differentiable in q (-x zeta(x+1, q))
    and in x (the derivative of Johansson's expansion, as JAX).

    >>> zeta(2.0, tg.asarray([1.0, 2.0]))                  # [1.644934, 0.644934]
    """
    if q is None:
        raise NotImplementedError("zeta: the Riemann zeta function (q=None) is not implemented, as in JAX; pass q=1 "
                                  "for the Hurwitz zeta at 1, which is the same thing")
    xt, qt = _real("zeta", x, q)
    (xt, qt), d = _upcast_all("zeta", xt, qt)
    return _zeta(xt, qt).astype(d)


def polygamma(n: ArrayLike, x: ArrayLike) -> Tensor:
    """The n-th derivative of digamma, psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 and digamma for n = 0
    (`jax.scipy.special.polygamma`); n must have an integer dtype, NaN where it is negative. Differentiable in x:
    polygamma(n + 1, x).

    >>> polygamma(tg.asarray([0, 1, 2]), 1.0)             # [-0.5772157, 1.644934, -2.4041138]
    """
    kind = promotion_kind(n)
    if not (isinstance(kind, DType) and kind.is_int or kind == "i*"):
        name = getattr(kind, "name", type(n).__name__)
        raise ValueError(f"polygamma: n must have an integer dtype (the order of the derivative), got {name}; "
                         f"pass an int, or cast it with .astype(int)")
    order = static_int(n)
    nt, xt = _real("polygamma", n, x)
    nt, xt = _broadcast("polygamma", nt, xt)
    n1 = nt + 1
    sign = 2 * tnp.fmod(nt, 2) - 1
    # a static order reflects x below 0 (zeta's series starts too close to its pole there); the negative integers,
    # poles, stay zeta's (inf for odd n, NaN for even)
    neg = (xt < 0) & (xt != tnp.floor(xt)) if order is not None and order >= 1 else None
    higher = sign * tnp.exp(gammaln(n1)) * zeta(n1, xt if neg is None else tnp.where(neg, 1 - xt, xt))
    if neg is not None:
        higher = tnp.where(neg, (-1) ** order * higher - _cot_pi_derivative(order, xt), higher)
    out = tnp.where(nt == 0, digamma(xt), higher)
    return tnp.where((nt < 0) | (nt != tnp.floor(nt)), math.nan, out)


def _cot_pi_derivative(n: int, x: Tensor) -> Tensor:
    """pi d^n/dx^n cot(pi x) = pi^(n+1) P_n(cot(pi x)), P_0(c) = c, P_(k+1)(c) = -(1 + c^2) P_k'(c): the reflection
    psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi d^n/dx^n cot(pi x) for x < 0, where zeta(n + 1, x)'s ten terms then
    Euler-Maclaurin from x + 9 were wrong (polygamma(1, -7.5) was 6.78, not 9.74; JAX's is wrong at -11.6)."""
    p = np.polynomial.Polynomial([0.0, 1.0])
    for _ in range(n):
        p = -np.polynomial.Polynomial([1.0, 0.0, 1.0]) * p.deriv()
    # cot(pi x) has period 1: x reduced exactly to r in [-1/2, 1/2], as |sin(pi x)| in gammaln, and cos(pi r) as
    # sin(pi (1/2 - |r|)) (exact 0 at the half-integers, where float32's cos(pi / 2) is -4.4e-8)
    r = x - tnp.round(x)
    a = tnp.abs(r)
    c = tnp.sin(math.pi * (0.5 - a)) / tnp.copysign(tnp.sin(math.pi * a), r)
    acc = tnp.zeros_like(c)
    for coef in p.coef[::-1]:
        acc = acc * c + float(coef)
    return acc * math.pi ** (n + 1)


# ---- the Bernoulli numbers ----
def _bernoulli_exact(k: int) -> float:
    """B_k for even k >= 2 from zeta: (-1)^(k/2+1) 2 k! zeta(k) / (2 pi)^k, zeta(k) to float64 precision by 63
    terms and the Euler-Maclaurin tail from 64 (its next term is below 1e-14 of zeta(2)); OverflowError past B_258."""
    n = 64.0
    tail = n ** (1 - k) / (k - 1) + 0.5 * n ** -k + k / 12 * n ** (-k - 1) - k * (k + 1) * (k + 2) / 720 * n ** (-k - 3)
    zeta_k = math.fsum(j ** -float(k) for j in range(1, 64)) + tail
    return (-1) ** (k // 2 + 1) * 2 * math.exp(math.lgamma(k + 1) - k * math.log(2 * math.pi)) * zeta_k


# (2k)! / B_2k, k = 1..16: the coefficients of Johansson's expansion, which JAX differentiates for zeta's rule
_EM_COEFS = tuple(math.factorial(2 * k) / _bernoulli_exact(2 * k) for k in range(1, 17))


def bernoulli(n: int) -> Tensor:
    """The Bernoulli numbers B_0 .. B_n, with B_1 = -1/2 (`jax.scipy.special.bernoulli`), in the default float dtype.

    `n` is a Python int (it sets the length). B_2k = (-1)^(k+1) 2 (2k)! zeta(2k) / (2 pi)^2k, computed on the host
    in float64 with zeta summed to full precision (JAX sums 48 terms, so its B_4 is off by 2e-6); past B_258 they
    overflow float64 to +-inf, past B_62 float32, as JAX's.

    >>> bernoulli(6)            # [1., -0.5, 0.16666667, 0., -0.03333333, 0., 0.02380952]
    """
    try:
        count = operator.index(n)
    except TypeError:
        raise TypeError(f"bernoulli: n must be a Python int (it sets the length of the result), got "
                        f"{type(n).__name__}; a traced value cannot be used") from None
    if count < 0:
        raise ValueError(f"bernoulli: n must be a non-negative integer, got {count}")
    out = np.zeros(count + 1)
    out[:3] = (1.0, -0.5, 1 / 6)[:count + 1]
    with np.errstate(over="ignore"):
        for k in range(4, count + 1, 2):
            try:
                out[k] = _bernoulli_exact(k)
            except OverflowError:
                out[k] = (-1) ** (k // 2 + 1) * math.inf
    return tnp.asarray(out, dtype=dtypes.default_float)


__all__ = ["gammasgn", "gamma", "loggamma", "factorial", "comb", "beta", "poch", "multigammaln", "gammainc",
           "gammaincc", "betainc", "zeta", "polygamma", "bernoulli"]
