"""Bessel, exponential-integral, error-function relatives and entropy functions of `jax.scipy.special`.

`i0e` / `i1e` (Cephes' Chebyshev expansions on [0, 8] and in 1/x beyond, as XLA's) and `i0` / `i1` from them;
`expi` (Cephes' rational approximations on [0, 2], (2, 4], ..., beyond 64), `expn` (Cephes: the power series for
x <= 1, the continued fraction beyond, the asymptotic series for n >= 5000) and `exp1`; `erfcx` (the Chebyshev
expansion `erfc` is built on), `dawsn` (Cody, Paciorek and Thacher's rational approximations), `spence` (Cephes);
`kl_div`, `rel_entr`, `boxcox`, `boxcox1p`. Derivatives are JAX's closed forms where JAX has one (i0e, i1e, expi,
expn, erfcx, dawsn): the approximation's own derivative is only close to it, and costs as much again.

>>> import tgfx.scipy.special as sp
>>> sp.i0(tg.asarray([0.0, 1.0]))                       # [1., 1.2660658]
>>> sp.expn(2, tg.asarray([0.5, 2.0]))                  # [0.32664386, 0.03753426]
>>> sp.erfcx(tg.asarray([-2.0, 30.0]))                  # [108.94054, 0.0187958]
"""
from __future__ import annotations

import math
from collections.abc import Callable

import tgfx.numpy as tnp
from tgfx.custom import custom_jvp
from tgfx.dtypes import dtypes
from tgfx.function import with_derivative
from tgfx.lax import while_loop
from tgfx.scipy._special_gamma import _eps, _real, _upcast_all
from tgfx.scipy._util import compute_dtype
from tgfx.scipy.special import _erfcx_nonneg, _exp_neg_square, _split, digamma, gammaln, xlogy
from tgfx.tensor import ArrayLike, Tensor

_EULER_GAMMA = 0.57721566490153286061


def _polyval(coeffs: tuple[float, ...], x: Tensor) -> Tensor:
    """sum c_i x^(n-1-i), highest degree first (numpy's and Cephes' order), by Horner's rule."""
    out = tnp.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        out = out * x + c
    return out


def _chbevl(coeffs: tuple[float, ...], x: Tensor) -> Tensor:
    """Cephes' `chbevl`: the Chebyshev series with these coefficients (highest degree first, the constant term
    halved) at x in [-2, 2], by Clenshaw's recurrence."""
    b0, b1, b2 = tnp.full_like(x, coeffs[0]), tnp.zeros_like(x), tnp.zeros_like(x)
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _in_compute(name: str, x: ArrayLike) -> tuple[Tensor, Tensor]:
    """x as a real float Tensor, and in the dtype the approximation is evaluated in (float32 for 16-bit floats)."""
    (t,) = _real(name, x)
    d = compute_dtype(t.dtype)
    return t, (t if t.dtype == d else t.astype(d))


# ---- modified Bessel functions of order 0 and 1 ----
# Cephes' i0.c and i1.c: Chebyshev coefficients of exp(-x) I0(x) on [0, 8] (A, in x/2 - 2) and of
# exp(-x) I0(x) sqrt(x) beyond 8 (B, in 32/x - 2); for I1 the first is of exp(-x) I1(x) / x. Float32 takes the
# trailing terms only (XLA's and Cephes' single precision sets): the leading ones are below its precision.
_I0E_A = (-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
          1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
          -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
          9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
          -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
          1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
          -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
          1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
          -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
          1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
_I0E_B = (-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
          3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
          1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
          -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
          7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
          -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
          3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
          2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
          8.04490411014108831608e-1)
_I1E_A = (2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
          -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
          3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
          -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
          9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
          -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
          4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
          -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
          2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
          -1.76416518357834055153e-1, 2.52587186443633654823e-1)
_I1E_B = (7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
          -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
          -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
          4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
          -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
          3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
          -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
          -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
          7.78576235018280120474e-1)
# (terms of A, terms of B) float32 keeps
_BESSEL_F32 = {"i0e": (18, 7), "i1e": (17, 7)}


def _bessel_scaled(x: Tensor, order: int) -> Tensor:
    """exp(-|x|) I_order(x): the series on [0, 8] (times |x| for order 1) and the one in 32/|x| - 2 beyond, each
    fed only arguments in its own interval; odd in x for order 1."""
    a_coefs, b_coefs = (_I0E_A, _I0E_B) if order == 0 else (_I1E_A, _I1E_B)
    if x.dtype != dtypes.float64:
        na, nb = _BESSEL_F32["i0e" if order == 0 else "i1e"]
        a_coefs, b_coefs = a_coefs[-na:], b_coefs[-nb:]
    ax = tnp.abs(x)
    small = tnp.minimum(ax, 8.0)
    large = tnp.maximum(ax, 8.0)
    low = _chbevl(a_coefs, small / 2 - 2)
    high = _chbevl(b_coefs, 32 / large - 2) / tnp.sqrt(large)
    out = tnp.where(ax <= 8, low * small if order == 1 else low, high)
    return tnp.where(x < 0, -out, out) if order == 1 else out


@custom_jvp
def _i0e(x: Tensor) -> Tensor:
    return _bessel_scaled(x, 0)


@custom_jvp
def _i1e(x: Tensor) -> Tensor:
    return _bessel_scaled(x, 1)


def _i1e_slope(x: Tensor, y: Tensor) -> Tensor:
    """d i1e / dx = i0e(x) - i1e(x) (sign(x) + 1/x), and its limit 1/2 at |x| <= eps."""
    eps = _eps(x.dtype)
    tiny = tnp.abs(x) <= eps
    sx = tnp.where(tiny, eps, x)
    return tnp.where(tiny, 0.5, _i0e(sx) - y * (tnp.sign(sx) + 1 / sx))


_i0e.defjvps(lambda g, y, x: g * (_i1e(x) - tnp.sign(x) * y))
_i1e.defjvps(lambda g, y, x: g * _i1e_slope(x, y))


def i0e(x: ArrayLike) -> Tensor:
    """The exponentially scaled modified Bessel function of order 0, exp(-|x|) I0(x) (`jax.scipy.special.i0e`);
    its derivative is i1e(x) - sign(x) i0e(x).

    >>> i0e(tg.asarray([0.0, 1.0, 100.0]))                # [1., 0.4657596, 0.03994437]
    """
    t, c = _in_compute("i0e", x)
    return _i0e(c).astype(t.dtype)


def i0(x: ArrayLike) -> Tensor:
    """The modified Bessel function of order 0, sum (x^2/4)^k / (k!)^2 (`jax.scipy.special.i0`), as
    exp(|x|) i0e(x); inf past |x| = 713.99 (float64) or 91.9 (float32).

    >>> i0(tg.asarray([0.0, 1.0, -3.0]))                  # [1., 1.2660658, 4.880793]
    """
    t, c = _in_compute("i0", x)
    return (tnp.exp(tnp.abs(c)) * _i0e(c)).astype(t.dtype)


def i1e(x: ArrayLike) -> Tensor:
    """The exponentially scaled modified Bessel function of order 1, exp(-|x|) I1(x) (`jax.scipy.special.i1e`), odd
    in x; its derivative is i0e(x) - i1e(x) (sign(x) + 1/x).

    >>> i1e(tg.asarray([0.0, 1.0, -100.0]))               # [0., 0.2079104, -0.03974415]
    """
    t, c = _in_compute("i1e", x)
    return _i1e(c).astype(t.dtype)


def i1(x: ArrayLike) -> Tensor:
    """The modified Bessel function of order 1, (x/2) sum (x^2/4)^k / (k! (k+1)!) (`jax.scipy.special.i1`), as
    exp(|x|) i1e(x).

    >>> i1(tg.asarray([0.0, 1.0, -3.0]))                  # [0., 0.5651591, -3.953370]
    """
    t, c = _in_compute("i1", x)
    return (tnp.exp(tnp.abs(c)) * _i1e(c)).astype(t.dtype)


# ---- exponential integrals ----
# Cephes' ei.c: Ei(x) = x A(x) / B(x) + euler_gamma + log x on (0, 2], then e^x / x (1 + A(1/x) / (x B(1/x))) on
# (2, 4], (4, 8], (8, 16], (16, 32], (32, 64] and beyond 64, each (A, B) highest degree first
_EXPI_INTERVALS = (
    ((-5.350447357812543, 218.50491688166133, -4176.572384826693, 55411.76756393557, -331338.13311781443,
      1592627.1633849454),
     (1.0, -52.505479591128626, 1259.6161867867906, -17565.495819735348, 149306.2117002726, -729494.9239640528,
      1592627.1633849454)),
    ((0.019818085032596897, -1.2716456259849176, -2.0881603356812284, 2.7555445091879367, -0.44095070487016,
      0.046656238059358916, -0.0015450426796734852, 7.059980605299618e-05),
     (1.0, 1.4764986709149215, 0.5629177174822436, 0.16990178978793072, 0.02291647179034212, 0.0044501504397287525,
      0.00017274396122065214, 3.953167195549672e-05)),
    ((-1.3732153758712087, -0.7084559133740839, 1.580806855547941, -0.2601500427425623, 0.029946746941137137,
      -0.001038086040188744, 4.371064420753005e-05, 2.141783679522603e-06),
     (1.0, 0.8585231423622028, 0.4483285822873995, 0.07687932158124476, 0.024498682410218877, 0.0008832165941927797,
      0.00045909522995113536, -4.729848351866523e-06, 2.66519553739071e-06)),
    ((-2.1069346016919166, 1.7327338696646881, -0.2423619178935842, 0.02322724180937566, 0.00023728804404931798,
      -8.343219561192553e-05, 1.3634087956052505e-05, -3.655412321999254e-07, 1.4649417339759612e-08,
      6.17640786371036e-10),
     (1.0, -0.2298062239901678, 0.11050770414740378, -0.015665429666307924, 0.002761106850817353,
      -0.00020891480122840484, 1.7085289388076754e-05, -4.4593117963566865e-07, 1.3946349303538475e-08,
      6.150865933977338e-10)),
    ((-0.24581193676740204, -0.14833822533220778, 0.07248291795735552, -0.013483156873809405, 0.001342775069788637,
      -7.942465637159712e-05, 2.644179518984236e-06, -4.239473659313765e-08),
     (1.0, -0.10442259084438711, -0.26764531281014026, 0.09695000254621984, -0.01601745692712991,
      0.001496414899205908, -8.462452563778485e-05, 2.7289384034767266e-06, -4.239462431819542e-08)),
    ((0.12125611181054567, -0.5823133179043894, 0.2348887314557017, -0.030400343181132484, 0.0015100821468651906,
      -2.5231370954995714e-05),
     (1.0, -1.002252150365854, 0.2928709694872224, -0.03337004338674008, 0.0015605448811273888,
      -2.5231370936032347e-05)),
    ((-0.7657847078286127, 0.6886192415566705, -0.2132598113545206, 0.033461075523841935, -0.003076541477344756,
      0.00017471193164549074, -6.1037116822741705e-06, 1.218032765428652e-07, -1.0860761027932903e-09),
     (1.0, -1.8888028686623086, 1.066691687211409, -0.27519159823063805, 0.039308526882338234, -0.003414684558602365,
      0.00018668443707035555, -6.345146083130515e-06, 1.239754287483207e-07, -1.0860761027931265e-09)),
)


def _expi_pos(x: Tensor) -> Tensor:
    """Ei(x) for x > 0: each interval's approximation fed x clamped into that interval, the one holding x taken."""
    a, b = _EXPI_INTERVALS[0]
    x1 = tnp.minimum(x, 2.0)
    out = x1 * _polyval(a, x1) / _polyval(b, x1) + _EULER_GAMMA + tnp.log(x1)
    lo = 2.0
    for a, b in _EXPI_INTERVALS[1:]:
        xk = tnp.clip(x, lo, 2 * lo if lo < 64 else math.inf)
        w = 1 / xk
        val = tnp.exp(xk) * w * (w * _polyval(a, w) / _polyval(b, w) + 1)
        out = tnp.where(x > lo, val, out)
        lo *= 2
    return out


def _expn_series(n: Tensor, x: Tensor) -> Tensor:
    """E_n(x) for 0 < x <= 1 and integer n >= 1 (Cephes): (-x)^(n-1) (digamma(n) - log x) / (n-1)! minus the power
    series sum_{k != n-1} (-x)^k / (k! (k - n + 1)), whose terms are below eps after 20 (12 in float32) steps."""
    one_n = n == 1
    ans = tnp.where(one_n, 0.0, 1 / (1 - tnp.where(one_n, 2.0, n)))
    yk, pk = tnp.ones_like(x), 1 - n
    for k in range(1, 21 if x.dtype == dtypes.float64 else 13):
        yk = yk * (-x) / k
        pk = pk + 1
        nonzero = pk != 0
        ans = ans + tnp.where(nonzero, yk / tnp.where(nonzero, pk, 1.0), 0.0)
    r = n - 1
    zr = tnp.where(tnp.fmod(r, 2) == 0, 1.0, -1.0) * tnp.power(x, r)
    return zr * (digamma(n) - tnp.log(x)) / tnp.exp(gammaln(n)) - ans


def _expn_cf(n: Tensor, x: Tensor, enabled: Tensor) -> Tensor:
    """E_n(x) for x > 1 by Cephes' continued fraction, each element iterated until its convergents agree to eps
    (at most 2000 steps; about 200 near x = 1), rescaled by 2^57 when they grow past it."""
    eps, big = _eps(x.dtype), 1.44115188075855872e17

    def body(s: tuple) -> tuple:
        on, k, pkm2, qkm2, pkm1, qkm1, ans = s
        k = k + 1
        odd = tnp.fmod(k, 2) == 1
        yk = tnp.where(odd, 1.0, x)
        xk = tnp.where(odd, n + (k - 1) / 2, k / 2)
        pk = pkm1 * yk + pkm2 * xk
        qk = qkm1 * yk + qkm2 * xk
        nonzero = qk != 0
        r = pk / tnp.where(nonzero, qk, 1.0)
        t = tnp.where(nonzero, tnp.abs((ans - r) / r), 1.0)
        ans1 = tnp.where(nonzero, r, ans)
        rescale = tnp.abs(pk) > big
        news = [tnp.where(rescale, v / big, v) for v in (pkm1, qkm1, pk, qk)]
        olds = (pkm2, qkm2, pkm1, qkm1, ans)
        return (on & (t > eps), k, *(tnp.where(on, nw, o) for nw, o in zip((*news, ans1), olds, strict=True)))

    one = tnp.ones_like(x)
    init = (enabled, Tensor.full((), 1.0, x.dtype), one, x, one, x + n, 1 / (x + n))
    ans = while_loop(lambda s: (s[1] < 2000) & tnp.any(s[0]), body, init)[6]
    return ans * tnp.exp(-x)


def _expn_large_n(n: Tensor, x: Tensor) -> Tensor:
    """E_n(x) for n >= 5000: the first terms of its asymptotic expansion in 1 / (x + n) (Cephes)."""
    xk = x + n
    yk = 1 / (xk * xk)
    ans = yk * n * (6 * x * x - 8 * n * x + n * n)
    ans = yk * (ans + n * (n - 2 * x))
    ans = yk * (ans + n)
    return (ans + 1) * tnp.exp(-x) / xk


def _expn_value(n: Tensor, x: Tensor) -> Tensor:
    domain = (n < 0) | (x < 0) | tnp.isnan(n) | tnp.isnan(x)
    cf = (x > 1) & ~domain & (x < math.inf)
    series = (x > 0) & (x <= 1) & (n >= 1) & (n < 5000) & (n == tnp.floor(n))
    safe_n = tnp.where(domain, 1.0, n)
    out_cf = _expn_cf(safe_n, tnp.where(cf, x, 2.0), cf)
    out_series = _expn_series(tnp.where(series, n, 1.0), tnp.where(series, x, 0.5))
    out = tnp.where(x > 1, out_cf, tnp.where(series, out_series, math.nan))
    out = tnp.where((x <= 1) & (n >= 5000), _expn_large_n(safe_n, x), out)
    out = tnp.where(n == 0, tnp.exp(-x) / x, out)
    out = tnp.where(x == 0, tnp.where(n < 2, math.inf, 1 / tnp.where(n < 2, 2.0, n - 1)), out)
    out = tnp.where(x == math.inf, 0.0, out)
    return tnp.where(domain, math.nan, out)


def _expn_slope(n: Tensor, x: Tensor, inner: custom_jvp) -> Tensor:
    """d E_n / dx = -E_{n-1}(x), and -e^-x (x + 1) / x^2 for n = 0 (E_0 = e^-x / x)."""
    zero_n = n == 0
    return tnp.where(zero_n, -tnp.exp(-x) * (x + 1) / (x * x), -inner(tnp.where(zero_n, 0.0, n - 1), x))


# two copies whose rules call each other: a rule that called its own function would get the plain value (a
# custom_jvp's function is plain inside its own rule), and second derivatives would run into the while loop
@custom_jvp
def _expn(n: Tensor, x: Tensor) -> Tensor:
    return _expn_value(n, x)


@custom_jvp
def _expn_twin(n: Tensor, x: Tensor) -> Tensor:
    return _expn_value(n, x)


_expn.defjvps(None, lambda g, y, n, x: g * _expn_slope(n, x, _expn_twin))
_expn_twin.defjvps(None, lambda g, y, n, x: g * _expn_slope(n, x, _expn))


def expn(n: ArrayLike, x: ArrayLike) -> Tensor:
    """The generalised exponential integral E_n(x) = int_1^inf e^(-xt) / t^n dt (`jax.scipy.special.expn`), for
    n >= 0 and x >= 0 (NaN outside).

    Cephes' algorithm, as JAX's: the power series for x <= 1 (integer n), the continued fraction for x > 1 (any
    n), the asymptotic series for n >= 5000; E_0 = e^-x / x, E_n(0) = inf for n <= 1 and 1 / (n - 1) beyond
    (scipy's; JAX has 1 / n there). Differentiable in x: -E_{n-1}(x); n is an order and gets no gradient.

    >>> expn(tg.asarray([0.0, 1.0, 2.0]), 0.5)            # [1.2130613, 0.5597736, 0.32664386]
    """
    nt, xt = _real("expn", n, x)
    (nt, xt), d = _upcast_all("expn", nt, xt)
    return _expn(nt, xt).astype(d)


def exp1(x: ArrayLike) -> Tensor:
    """The exponential integral E_1(x) = int_x^inf e^-t / t dt = expn(1, x) (`jax.scipy.special.exp1`): inf at 0,
    NaN below.

    >>> exp1(tg.asarray([0.5, 1.0]))                      # [0.5597736, 0.21938393]
    """
    (t,) = _real("exp1", x)
    return expn(tnp.ones_like(t), t)


def _exp1_pos(x: Tensor) -> Tensor:
    """E_1(x) for finite x > 0: only the two expansions expn takes for n = 1."""
    one = tnp.ones_like(x)
    cf = x > 1
    return tnp.where(cf, _expn_cf(one, tnp.where(cf, x, 2.0), cf), _expn_series(one, tnp.where(cf, 0.5, x)))


@custom_jvp
def _expi(x: Tensor) -> Tensor:
    neg = x < 0
    left = tnp.where(x == -math.inf, 0.0, -_exp1_pos(tnp.where(neg & (x > -math.inf), -x, 1.0)))
    right = _expi_pos(tnp.where(neg | (x == 0), 1.0, x))
    out = tnp.where(neg, left, tnp.where(x == 0, -math.inf, right))
    return tnp.where(x == math.inf, math.inf, out)


_expi.defjvps(lambda g, y, x: g * tnp.exp(x) / x)


def expi(x: ArrayLike) -> Tensor:
    """The exponential integral Ei(x) = int_-inf^x e^t / t dt (principal value) (`jax.scipy.special.expi`):
    Cephes' rational approximations on (0, 2], (2, 4], ..., beyond 64, and -E_1(-x) for x < 0. At 0 it is -inf, at
    +-inf inf and 0 (scipy's limits; JAX gives NaN at all three). Its derivative is e^x / x.

    >>> expi(tg.asarray([-1.0, 1.0, 10.0]))               # [-0.21938393, 1.8951178, 2492.2290]
    """
    t, c = _in_compute("expi", x)
    return _expi(c).astype(t.dtype)


# ---- relatives of the error function ----
def _erfcx_value(x: Tensor) -> Tensor:
    neg, a = _split(x)
    pos = _erfcx_nonneg(a)
    # erfcx(-a) = 2 exp(a^2) - erfcx(a), exp(a^2) without the rounding of a^2
    out = tnp.where(neg, 2 * _exp_neg_square(a, -1.0) - pos, pos)
    return tnp.where(x == math.inf, 0.0, out)


_erfcx = with_derivative(_erfcx_value, lambda x, y: 2 * x * y - 2 / math.sqrt(math.pi))


def erfcx(x: ArrayLike) -> Tensor:
    """The scaled complementary error function exp(x^2) erfc(x) (`jax.scipy.special.erfcx`), finite where erfc
    underflows: the Chebyshev expansion that `erfc` is built on for x >= 0, 2 exp(x^2) - erfcx(-x) below (inf
    once that overflows). Its derivative is 2x erfcx(x) - 2/sqrt(pi).

    >>> erfcx(tg.asarray([0.0, 5.0, 1e10]))               # [1., 0.11070464, 5.641896e-11]
    """
    t, c = _in_compute("erfcx", x)
    return _erfcx(c).astype(t.dtype)


# Cody, Paciorek and Thacher (Math. Comp. 24 (1970)), as JAX: Dawson's integral on [0, 3.25) as x P(x^2) / Q(x^2),
# on [3.25, 6.25) and beyond as 1/(2x) (1 + t P(t) / Q(t)), t = 1/x^2; highest degree first
_DAWSN_AN = (1.1368149897175597e-11, 8.492622676674738e-10, 1.9443420417555306e-08, 9.531517412544844e-07,
             3.078283098749132e-06, 0.00035251336852028877, -0.0008501498467244109, 0.04226182230055466,
             -0.09174803717734524, 1.0)
_DAWSN_AD = (2.403720730667626e-11, 1.488646813684934e-09, 5.212652810105416e-08, 1.2725847827318697e-06,
             2.324902498207895e-05, 0.00032552474182605793, 0.003488058146571626, 0.027944853119882897,
             0.15887424196012057, 0.5749186294893204, 1.0)
_DAWSN_BN = (0.5089551564179009, -0.24475441814269785, 0.09415123353035344, -0.021871125514203903,
             0.003662076123295692, -0.0004232091144603888, 3.5964130479389666e-05, -2.1464035171996896e-06,
             9.100107800763914e-08, -2.4027452082825098e-09, 3.592333854409284e-11)
_DAWSN_BD = (1.0, -0.6318398698733682, 0.2367067882282487, -0.053180636700322324, 0.008480417185862954,
             -0.0009479967684866654, 7.810255929445524e-05, -4.558751532524426e-06, 1.8910035811142186e-07,
             -4.913246913319206e-09, 7.184664032357345e-11)
_DAWSN_CN = (-0.5905928605347732, 0.6292352427243688, -0.17285897538038814, 0.016483704782518965,
             -0.0004868276130204627)
_DAWSN_CD = (1.0, -2.698200571975449, 1.7327079904594784, -0.3937085822819395, 0.03442789240412334,
             -0.0009736552260409412)


def _dawsn_value(x: Tensor) -> Tensor:
    ax = tnp.abs(x)
    near = ax < 3.25
    mid = (ax >= 3.25) & (ax < 6.25)
    a1 = tnp.where(near, ax, 1.0)
    s1 = a1 * a1
    val1 = a1 * _polyval(_DAWSN_AN, s1) / _polyval(_DAWSN_AD, s1)
    a2 = tnp.where(near, 3.25, ax)
    t = 1 / (a2 * a2)                                      # 0 once x^2 overflows, where 1/(2x) is all there is
    tail = tnp.where(mid, _polyval(_DAWSN_BN, t) / _polyval(_DAWSN_BD, t),
                     _polyval(_DAWSN_CN, t) / _polyval(_DAWSN_CD, t))
    val2 = (0.5 / a2) * (1 + t * tail)
    return tnp.sign(x) * tnp.where(near, val1, val2)


_dawsn = with_derivative(_dawsn_value, lambda x, y: 1 - 2 * x * y)


def dawsn(x: ArrayLike) -> Tensor:
    """Dawson's integral exp(-x^2) int_0^x exp(t^2) dt (`jax.scipy.special.dawsn`), odd in x, by Cody, Paciorek and
    Thacher's rational approximations (as JAX); its derivative is 1 - 2x dawsn(x).

    >>> dawsn(tg.asarray([1.0, -2.0, 10.0]))              # [0.5380795, -0.30134039, 0.05025385]
    """
    t, c = _in_compute("dawsn", x)
    return _dawsn(c).astype(t.dtype)


# ---- Spence's function (the dilogarithm) ----
# Cephes' spence.c: spence(1 - w) = -w A(w) / B(w) for w in [-1/2, 1/2], highest degree first
_SPENCE_A = (4.65128586073990045278e-5, 7.31589045238094711071e-3, 1.33847639578309018650e-1,
             8.79691311754530315341e-1, 2.71149851196553469920e0, 4.25697156008121755724e0,
             3.29771340985225106936e0, 1.00000000000000000126e0)
_SPENCE_B = (6.90990488912553276999e-4, 2.54043763932544379113e-2, 2.82974860602568089943e-1,
             1.41172597751831069617e0, 3.63800533345137075418e0, 5.03278880143316990390e0,
             3.54771340985225096217e0, 9.99999999999999998740e-1)


def spence(x: ArrayLike) -> Tensor:
    """Spence's function int_1^x log(t) / (1 - t) dt for x >= 0 (`jax.scipy.special.spence`; NaN below 0, as JAX,
    where scipy's is complex): Cephes' rational approximation around 1, with x -> 1/x above 2 (or 1.5) and the
    reflection pi^2/6 - log(x) log(1 - x) - spence(1 - x) below 1/2. Its derivative, log(x) / (1 - x), comes by
    differentiating the approximation, as in JAX; every branch is fed only arguments in its range.

    >>> spence(tg.asarray([0.0, 0.5, 2.0]))               # [1.644934, 0.5822405, -0.8224670]
    """
    t, c = _in_compute("spence", x)
    ok = (c > 0) & (c != 1)
    xs = tnp.where(ok, c, 1.0)
    inv = xs > 2
    xs = tnp.where(inv, 1 / xs, xs)
    upper = xs > 1.5
    lower = xs < 0.5
    w = tnp.where(upper, 1 / xs - 1, tnp.where(lower, -xs, xs - 1))
    y = -w * _polyval(_SPENCE_A, w) / _polyval(_SPENCE_B, w)
    xl = tnp.where(lower, xs, 0.25)
    y = tnp.where(lower, math.pi ** 2 / 6 - tnp.log(xl) * tnp.log1p(-xl) - y, y)
    log_x = tnp.log(xs)
    y = tnp.where(inv | upper, -0.5 * log_x * log_x - y, y)
    out = tnp.where(c == 0, math.pi ** 2 / 6, tnp.where(c == 1, 0.0, y))
    return tnp.where((c < 0) | tnp.isnan(c) | (c == math.inf), math.nan, out).astype(t.dtype)


# ---- relative entropy and the Box-Cox transformation ----
def rel_entr(p: ArrayLike, q: ArrayLike) -> Tensor:
    """The elementwise relative entropy p log(p / q) for p, q > 0; 0 where p == 0 and q >= 0; inf elsewhere
    (`jax.scipy.special.rel_entr`). The gradient is 0 outside p, q > 0.

    >>> rel_entr(tg.asarray([0.0, 1.0, 2.0]), tg.asarray([1.0, 2.0, 1.0]))   # [0., -0.6931472, 1.3862944]
    """
    pt, qt = _real("rel_entr", p, q)
    both = (pt > 0) & (qt > 0)
    sp, sq = tnp.where(both, pt, 1.0), tnp.where(both, qt, 1.0)
    value = xlogy(sp, sp) - xlogy(sp, sq)
    return tnp.where(both, value, tnp.where((pt == 0) & (qt >= 0), 0.0, math.inf))


def kl_div(p: ArrayLike, q: ArrayLike) -> Tensor:
    """The elementwise Kullback-Leibler divergence p log(p / q) - p + q for p, q > 0; q where p == 0 and q >= 0;
    inf elsewhere (`jax.scipy.special.kl_div`).

    >>> kl_div(tg.asarray([0.0, 1.0]), tg.asarray([3.0, 2.0]))   # [3., 0.30685282]
    """
    pt, qt = _real("kl_div", p, q)
    return rel_entr(pt, qt) - pt + qt


def _boxcox(name: str, x: ArrayLike, lmbda: ArrayLike, log: Callable[[Tensor], Tensor]) -> Tensor:
    xt, lt = _real(name, x, lmbda)
    zero = lt == 0
    safe = tnp.where(zero, 1.0, lt)
    log_x = log(xt)
    return tnp.where(zero, log_x, tnp.expm1(safe * log_x) / safe)


def boxcox(x: ArrayLike, lmbda: ArrayLike) -> Tensor:
    """The Box-Cox power transformation (x^lmbda - 1) / lmbda, log(x) at lmbda == 0 (`jax.scipy.special.boxcox`),
    as expm1(lmbda log x) / lmbda so that small lmbda loses nothing; NaN for x < 0.

    >>> boxcox(tg.asarray([1.0, 2.0, 2.0]), tg.asarray([0.5, 0.0, 2.0]))   # [0., 0.6931472, 1.5]
    """
    return _boxcox("boxcox", x, lmbda, tnp.log)


def boxcox1p(x: ArrayLike, lmbda: ArrayLike) -> Tensor:
    """The Box-Cox transformation of 1 + x, ((1 + x)^lmbda - 1) / lmbda, log1p(x) at lmbda == 0
    (`jax.scipy.special.boxcox1p`), accurate for small x; NaN for x < -1.

    >>> boxcox1p(tg.asarray([1e-8, 1.0]), tg.asarray([0.5, 0.0]))          # [1e-08, 0.6931472]
    """
    return _boxcox("boxcox1p", x, lmbda, tnp.log1p)


__all__ = ["i0", "i0e", "i1", "i1e", "expi", "expn", "exp1", "erfcx", "dawsn", "spence", "rel_entr", "kl_div",
           "boxcox", "boxcox1p"]
