"""Hypergeometric functions, the sine / cosine and Fresnel integrals, Owen's T and Bessel J of `jax.scipy.special`.

`hyp1f1` and `hyp2f1` are JAX's algorithms (Pearson, Olver and Porter, "Numerical methods for the computation of the
confluent and Gauss hypergeometric functions", 2014): Taylor series iterated per element until a term no longer
moves the sum (at most 250 terms), 1F1's asymptotic series for |x| >= 100, 2F1's terminating series, its linear
transformation near x = 1 and AMS 55's 15.3.10-12 where c - a - b is an integer, with JAX's domains and its special
values (hyp1f1(0, 0, x) = 1, inf where 2F1 diverges). `sici` and `fresnel` are Cephes' rational approximations (as
JAX and scipy), `owens_t` JAX's 13-point quadrature (Patefield and Tandy's method T5), `bessel_jn` Miller's backward
recurrence (Zhang and Jin's BJNDD). Derivatives are JAX's closed forms and series.

>>> import tgfx.scipy.special as sp
>>> sp.hyp1f1(1.0, 2.0, tg.asarray([1.0]))             # [1.7182817]: (e - 1) / 1
>>> sp.hyp2f1(1.0, 1.0, 2.0, tg.asarray([0.5]))        # [1.3862944]: -log(1 - x) / x
>>> sp.sici(tg.asarray([1.0]))                         # ([0.9460831], [0.3374039])
>>> sp.bessel_jn(tg.asarray([1.0]), v=1, n_iter=20)    # [[0.7651977], [0.4400506]]
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable

import tgfx.numpy as tnp
from tgfx.custom import custom_jvp
from tgfx.dtypes import dtypes
from tgfx.lax import while_loop
from tgfx.scipy._special_extra import _EULER_GAMMA, _polyval
from tgfx.scipy._special_gamma import _eps, _real, _upcast_all, gamma
from tgfx.scipy._util import compute_dtype
from tgfx.scipy.special import digamma, erf, erfc
from tgfx.tensor import ArrayLike, Tensor
from tgfx.trace_state import ConcretizationError

_MAX_TERMS = 250


def _iterate(enabled: Tensor, state: tuple[Tensor, ...], step: Callable, go_on: Callable,
             limit: int = _MAX_TERMS) -> tuple[Tensor, ...]:
    """JAX's per-element `while_loop` of a vectorised series: `state` (counter first, a scalar shared by every element:
    an element that stops never restarts, so all running ones have taken the same number of steps) advances by
    `step` where an element is still running; it stops when `go_on(new state)` is false or the counter reaches
    `limit`. Elements not `enabled` never move."""
    def body(s: tuple) -> tuple:
        on, old = s[0], s[1:]
        new = step(*old)
        more = on & (new[0] < limit) & go_on(*new)
        return (more, new[0], *(tnp.where(on, n, o) for n, o in zip(new[1:], old[1:], strict=True)))

    on0 = enabled & go_on(*state)
    return while_loop(lambda s: tnp.any(s[0]), body, (on0, *state))[1:]


# ---- the confluent hypergeometric function 1F1 ----
def _hyp1f1_series(a: Tensor, b: Tensor, x: Tensor, enabled: Tensor) -> Tensor:
    """sum_k (a)_k / (b)_k x^k / k! (their method (a) of 3.2)."""
    eps = _eps(x.dtype)
    step = lambda k, serie, term: (k + 1, serie + term, term * ((a + k) / (b + k) * x / (k + 1)))   # noqa: E731
    go_on = lambda k, serie, term: tnp.abs(term) / tnp.abs(serie) > eps                           # noqa: E731
    one = tnp.ones_like(x)
    return _iterate(enabled, (Tensor.full((), 1.0, x.dtype), one, a / b * x), step, go_on)[1]


def _hyp1f1_asymptotic(a: Tensor, b: Tensor, x: Tensor, enabled: Tensor) -> Tensor:
    """Gamma(b) / Gamma(a) e^x x^(a - b) sum_k (b - a)_k (1 - a)_k / k! x^-k (their 3.8, for real x)."""
    eps = _eps(x.dtype)
    step = lambda k, serie, term: (k + 1, serie + term, term * ((b - a + k) * (1 - a + k) / (k + 1) / x))  # noqa: E731
    go_on = lambda k, serie, term: tnp.abs(term) / tnp.abs(serie) > eps                                 # noqa: E731
    serie = _iterate(enabled, (Tensor.full((), 1.0, x.dtype), tnp.ones_like(x), (b - a) * (1 - a) / x), step,
                     go_on)[1]
    return gamma(b) / gamma(a) * tnp.exp(x) * tnp.power(x, a - b) * serie


def _hyp1f1_value(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    near = tnp.abs(x) < 100
    series = _hyp1f1_series(a, b, tnp.where(near, x, 0.0), near)
    asymptotic = _hyp1f1_asymptotic(a, b, tnp.where(near, 100.0, x), ~near)
    out = tnp.where(near, series, asymptotic)
    out = tnp.where((b == 0) & (a != 0), math.inf, out)
    out = tnp.where((a == b) & (a != 0), tnp.exp(x), out)
    return tnp.where(a == 0, 1.0, out)


def _hyp1f1_param_derivative(a: Tensor, b: Tensor, x: Tensor, of_a: bool) -> Tensor:
    """d 1F1 / da = sum_k (digamma(a + k) - digamma(a)) t_k, d / db = sum_k (digamma(b) - digamma(b + k)) t_k for
    the series' terms t_k (JAX's rules, the series at every x)."""
    eps = _eps(x.dtype)
    base = digamma(a) if of_a else digamma(b)

    def step(k: Tensor, serie: Tensor, term: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        w = digamma(a + k) - base if of_a else base - digamma(b + k)
        return k + 1, serie + term * w, term * ((a + k) / (b + k) * x / (k + 1))

    go_on = lambda k, serie, term: tnp.abs(term) / tnp.abs(serie) > eps     # noqa: E731
    start = (Tensor.full((), 1.0, x.dtype), tnp.zeros_like(x), a / b * x)
    return _iterate(tnp.ones_like(x, dtype=tnp.bool_), start, step, go_on)[1]


# two copies whose x rules call each other (a custom_jvp is its plain function inside its own rule), so second
# derivatives in x go through the rule again
@custom_jvp
def _hyp1f1(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    return _hyp1f1_value(a, b, x)


@custom_jvp
def _hyp1f1_twin(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    return _hyp1f1_value(a, b, x)


def _hyp1f1_rules(other: custom_jvp) -> tuple:
    return (lambda g, y, a, b, x: g * _hyp1f1_param_derivative(a, b, x, True),
            lambda g, y, a, b, x: g * _hyp1f1_param_derivative(a, b, x, False),
            lambda g, y, a, b, x: g * (a / b) * other(a + 1, b + 1, x))


_hyp1f1.defjvps(*_hyp1f1_rules(_hyp1f1_twin))
_hyp1f1_twin.defjvps(*_hyp1f1_rules(_hyp1f1))


def hyp1f1(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Tensor:
    """The confluent hypergeometric function 1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k! (`jax.scipy.special.hyp1f1`).

    JAX's algorithm and domain: real inputs, meant for positive ones; the Taylor series for |x| < 100 and the
    asymptotic series beyond (NaN for x <= -100 unless a - b is an integer). 1 at a = 0 (also at a = b = 0, where
    scipy has no value), e^x at a = b, inf at b = 0. Large values lose precision, as in JAX (use float64).
    Differentiable in a, b (their series) and x (a / b 1F1(a + 1; b + 1; x)).

    >>> hyp1f1(1.0, 2.0, tg.asarray([1.0, -1.0]))        # [1.7182817, 0.6321206]

    Raises ValueError for complex inputs and for shapes that do not broadcast.
    """
    at, bt, xt = _real("hyp1f1", a, b, x)
    (at, bt, xt), d = _upcast_all("hyp1f1", at, bt, xt)
    return _hyp1f1(at, bt, xt).astype(d)


# ---- the Gauss hypergeometric function 2F1 ----
def _hyp2f1_series(a: Tensor, b: Tensor, c: Tensor, x: Tensor, enabled: Tensor) -> Tensor:
    """sum_k (a)_k (b)_k / (c)_k x^k / k! (their 4.1)."""
    eps = _eps(x.dtype)

    def step(k: Tensor, serie: Tensor, term: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return k + 1, serie + term, term * ((a + k - 1) * (b + k - 1) / (c + k - 1) / k * x)

    go_on = lambda k, serie, term: tnp.abs(term) > eps * tnp.abs(serie)     # noqa: E731
    return _iterate(enabled, (Tensor.full((), 1.0, x.dtype), tnp.zeros_like(x), tnp.ones_like(x)), step, go_on)[1]


def _hyp2f1_terminal(a: Tensor, b: Tensor, c: Tensor, x: Tensor, enabled: Tensor) -> Tensor:
    """The polynomial 2F1 is when a or b is a non-positive integer: its |a| + 1 terms (the parameter of larger
    magnitude that still stays above a non-positive integer c, as JAX picks it)."""
    eps = _eps(x.dtype) * 50
    swap = (b < a) & (tnp.abs(b - tnp.round(b)) < eps) & ~((tnp.fmod(c, 1) == 0) & (c <= 0) & (c > b))
    a, b = tnp.where(swap, b, a), tnp.where(swap, a, b)
    n = tnp.where(enabled, tnp.abs(a), 0.0)

    def body(s: tuple) -> tuple:
        i, serie, term = s
        on = i < n + 1
        term1 = term * (-(n - i + 1) / (c + i - 1) * (b + i - 1) / i * x)
        return i + 1, tnp.where(on, serie + term1, serie), tnp.where(on, term1, term)

    start = (Tensor.full((), 1.0, x.dtype), tnp.ones_like(x), tnp.ones_like(x))
    return while_loop(lambda s: tnp.any(s[0] < n + 1), body, start)[1]


def _hyp2f1_digamma_transform(a: Tensor, b: Tensor, c: Tensor, x: Tensor, enabled: Tensor) -> Tensor:
    """2F1 near x = 1 when c - a - b is (nearly) an integer, by AMS 55's 15.3.10-12 in 1 - x (JAX's and Cephes'
    `hys2f1` transcription)."""
    eps = _eps(x.dtype)
    d = c - a - b
    s = 1 - x
    rd = tnp.round(d)
    up = rd >= 0
    e = tnp.where(up, d, -d)
    d1 = tnp.where(up, d, 0.0)
    d2 = tnp.where(up, 0.0, d)
    ard = tnp.abs(rd)
    ax = tnp.log(s)
    y0 = (digamma(tnp.ones_like(x)) + digamma(1 + e) - digamma(a + d1) - digamma(b + d1) - ax) / gamma(e + 1)
    p0 = (a + d1) * (b + d1) * s / gamma(e + 2)

    def step(t: Tensor, p: Tensor, q: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        r = digamma(1 + t) + digamma(1 + t + e) - digamma(a + t + d1) - digamma(b + t + d1) - ax
        q1 = p * r
        p1 = p * s * (a + t + d1) / (t + 1) * (b + t + d1) / (t + 1 + e)
        return t + 1, p1, q1, y + q1

    go_on = lambda t, p, q, y: tnp.abs(q) >= eps * tnp.abs(y)      # noqa: E731
    y = _iterate(enabled, (Tensor.full((), 1.0, x.dtype), p0, y0, y0), step, go_on)[3]

    # the finite sum of 15.3.11 / 15.3.12: |c - a - b| - 1 terms
    steps = tnp.where(enabled, ard, 0.0)

    def body(st: tuple) -> tuple:
        i, t, p, y1 = st
        on = i < steps
        p1 = p * s * (a + t + d2) * (b + t + d2) / (1 - e + t) / (t + 1)
        return i + 1, tnp.where(on, t + 1, t), tnp.where(on, p1, p), tnp.where(on, y1 + p1, y1)

    one = tnp.ones_like(x)
    _, _, _, y1 = while_loop(lambda st: tnp.any(st[0] < steps), body,
                             (Tensor.full((), 1.0, x.dtype), tnp.zeros_like(x), one, one))
    gc = gamma(c)
    y1 = y1 * gamma(e) * gc / (gamma(a + d1) * gamma(b + d1))
    ys = y * gc / (gamma(a + d2) * gamma(b + d2))
    ys = tnp.where(tnp.fmod(ard, 2) != 0, -ys, ys)
    q = tnp.power(s, rd)
    summed = tnp.where(rd > 0, ys * q + y1, ys + y1 * q)
    return tnp.where(rd == 0, y * gc / (gamma(a) * gamma(b)), summed)


def _hyp2f1_terminal_or_series(a: Tensor, b: Tensor, c: Tensor, x: Tensor, enabled: Tensor) -> Tensor:
    """The terminating series where a or b is a non-positive integer; else near x = 1 (x > 0.9) the transformation
    where c - a - b is an integer; else the Taylor series (JAX's choice, each fed only its own elements)."""
    eps = _eps(x.dtype) * 50
    d = c - a - b
    neg_int = ((a <= 0) & (tnp.abs(a - tnp.round(a)) < eps)) | ((b <= 0) & (tnp.abs(b - tnp.round(b)) < eps))
    transform = (x > 0.9) & ~neg_int & (tnp.abs(d - tnp.round(d)) < eps)
    use_series = ~neg_int & ~transform
    series = _hyp2f1_series(a, b, c, x, enabled & use_series)
    terminal = _hyp2f1_terminal(a, b, c, x, enabled & neg_int)
    xs = tnp.where(enabled & transform, x, 0.95)
    transformed = _hyp2f1_digamma_transform(a, b, c, xs, enabled & transform)
    return tnp.where(neg_int, terminal, tnp.where(transform, transformed, series))


def _hyp2f1_value(a: Tensor, b: Tensor, c: Tensor, x: Tensor) -> Tensor:
    eps = _eps(x.dtype) * 50
    d = c - a - b
    s = 1 - x
    ca, cb = c - a, c - b
    one = (x == 0) | (((a == 0) | (b == 0)) & (c != 0))
    pole = (c == 0) | ((c < 0) & (tnp.fmod(c, 1) == 0))
    euler = (d <= -1) & ~((tnp.abs(d - tnp.round(d)) >= eps) & (s < 0))
    # JAX's cascade of cases, first match wins
    cases = [one, pole, euler, (d <= 0) & (x == 1), (x < 1) & (b == c), (x < 1) & (a == c), x > 1, x == 1]
    taken = tnp.zeros_like(x, dtype=tnp.bool_)
    chosen = []
    for case in cases:
        chosen.append(case & ~taken)
        taken = taken | case
    plain = ~taken
    euler_value = tnp.power(s, d) * _hyp2f1_terminal_or_series(ca, cb, c, x, chosen[2])
    gauss = gamma(c) * gamma(d) / (gamma(ca) * gamma(cb))
    inf = tnp.full_like(x, math.inf)
    values = [tnp.ones_like(x), inf, euler_value, inf, tnp.power(s, -a), tnp.power(s, -b), inf, gauss]
    out = _hyp2f1_terminal_or_series(a, b, c, x, plain)
    for case, value in zip(reversed(chosen), reversed(values), strict=True):
        out = tnp.where(case, value, out)
    return out


def _hyp2f1_param_derivative(a: Tensor, b: Tensor, c: Tensor, x: Tensor, which: int) -> Tensor:
    """d 2F1 / da, db, dc as JAX has them: sum_k t_k (digamma(a + k) - digamma(a)), (... b ...), and
    (digamma(c) - digamma(c + k)) for the series' terms t_k."""
    eps = _eps(x.dtype)
    param = (a, b, c)[which]
    base = digamma(param)

    def step(k: Tensor, serie: Tensor, term: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        w = base - digamma(param + k) if which == 2 else digamma(param + k) - base
        return k + 1, serie + term * w, term * ((a + k) * (b + k) / (c + k) / (k + 1) * x)

    go_on = lambda k, serie, term: tnp.abs(term) / tnp.abs(serie) > eps     # noqa: E731
    start = (Tensor.full((), 1.0, x.dtype), tnp.zeros_like(x), a * b / c * x)
    return _iterate(tnp.ones_like(x, dtype=tnp.bool_), start, step, go_on)[1]


@custom_jvp
def _hyp2f1(a: Tensor, b: Tensor, c: Tensor, x: Tensor) -> Tensor:
    return _hyp2f1_value(a, b, c, x)


@custom_jvp
def _hyp2f1_twin(a: Tensor, b: Tensor, c: Tensor, x: Tensor) -> Tensor:
    return _hyp2f1_value(a, b, c, x)


def _hyp2f1_rules(other: custom_jvp) -> tuple:
    return (*(lambda g, y, a, b, c, x, i=i: g * _hyp2f1_param_derivative(a, b, c, x, i) for i in range(3)),
            lambda g, y, a, b, c, x: g * (a * b / c) * other(a + 1, b + 1, c + 1, x))


_hyp2f1.defjvps(*_hyp2f1_rules(_hyp2f1_twin))
_hyp2f1_twin.defjvps(*_hyp2f1_rules(_hyp2f1))


def hyp2f1(a: ArrayLike, b: ArrayLike, c: ArrayLike, x: ArrayLike) -> Tensor:
    """The Gauss hypergeometric function 2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k!
    (`jax.scipy.special.hyp2f1`).

    JAX's algorithm and domain: real inputs, meant for x < 1 (inf for x > 1, where the series diverges); the Taylor
    series, the terminating polynomial when a or b is a non-positive integer, Euler's transformation
    (1 - x)^(c - a - b) 2F1(c - a, c - b; c; x) when c - a - b <= -1, and 15.3.10-12 near x = 1 when c - a - b is an
    integer. Closed forms: 1 at x = 0 (or a or b = 0), (1 - x)^-a at b = c, Gauss's Gamma(c) Gamma(c - a - b) /
    (Gamma(c - a) Gamma(c - b)) at x = 1, inf at c = 0 and the negative integers. Differentiable in a, b, c (their
    series) and x (ab / c 2F1(a + 1, b + 1; c + 1; x)). The Taylor series stops at 250 terms, as JAX's, so it loses
    digits as |x| nears 1 where no transformation applies (2F1(1/2, 1/2; 3/2; 0.99) is off by 3e-4, as in JAX).

    >>> hyp2f1(1.0, 1.0, 2.0, tg.asarray([0.5, -0.5]))    # [1.3862944, 0.8109302]: -log(1 - x) / x

    Raises ValueError for complex inputs and for shapes that do not broadcast.
    """
    at, bt, ct, xt = _real("hyp2f1", a, b, c, x)
    (at, bt, ct, xt), d = _upcast_all("hyp2f1", at, bt, ct, xt)
    return _hyp2f1(at, bt, ct, xt).astype(d)


# ---- the sine and cosine integrals ----
# Cephes' sici.c (as JAX and scipy): rational approximations in x^2 on [0, 4], auxiliary functions f and g in 1/x^2
# on (4, 8] and beyond, and Si = pi/2 - cos(x)/x, Ci = sin(x)/x past 1e9
_SN = (-8.39167827910303881427e-11, 4.62591714427012837309e-8, -9.75759303843632795789e-6,
       9.76945438170435310816e-4, -4.13470316229406538752e-2, 1.00000000000000000302e0)
_SD = (2.03269266195951942049e-12, 1.27997891179943299903e-9, 4.41827842801218905784e-7,
       9.96412122043875552487e-5, 1.42085239326149893930e-2, 9.99999999999999996984e-1)
_CN = (2.02524002389102268789e-11, -1.35249504915790756375e-8, 3.59325051419993077021e-6,
       -4.74007206873407909465e-4, 2.89159652607555242092e-2, -1.00000000000000000080e0)
_CD = (4.07746040061880559506e-12, 3.06780997581887812692e-9, 1.23210355685883423679e-6,
       3.17442024775032769882e-4, 5.10028056236446052392e-2, 4.00000000000000000080e0)
_FN4 = (4.23612862892216586994e0, 5.45937717161812843388e0, 1.62083287701538329132e0, 1.67006611831323023771e-1,
        6.81020132472518137426e-3, 1.08936580650328664411e-4, 5.48900223421373614008e-7)
_FD4 = (1.0, 8.16496634205391016773e0, 7.30828822505564552187e0, 1.86792257950184183883e0,
        1.78792052963149907262e-1, 7.01710668322789753610e-3, 1.10034357153915731354e-4,
        5.48900252756255700982e-7)
_GN4 = (8.71001698973114191777e-2, 6.11379109952219284151e-1, 3.97180296392337498885e-1,
        7.48527737628469092119e-2, 5.38868681462177273157e-3, 1.61999794598934024525e-4,
        1.97963874140963632189e-6, 7.82579040744090311069e-9)
_GD4 = (1.0, 1.64402202413355338886e0, 6.66296701268987968381e-1, 9.88771761277688796203e-2,
        6.22396345441768420760e-3, 1.73221081474177119497e-4, 2.02659182086343991969e-6,
        7.82579218933534490868e-9)
_FN8 = (4.55880873470465315206e-1, 7.13715274100146711374e-1, 1.60300158222319456320e-1,
        1.16064229408124407915e-2, 3.49556442447859055605e-4, 4.86215430826454749482e-6,
        3.20092790091004902806e-8, 9.41779576128512936592e-11, 9.70507110881952024631e-14)
_FD8 = (1.0, 9.17463611873684053703e-1, 1.78685545332074536321e-1, 1.22253594771971293032e-2,
        3.58696481881851580297e-4, 4.92435064317881464393e-6, 3.21956939101046018377e-8,
        9.43720590350276732376e-11, 9.70507110881952025725e-14)
_GN8 = (6.97359953443276214934e-1, 3.30410979305632063225e-1, 3.84878767649974295920e-2,
        1.71718239052347903558e-3, 3.48941165502279436777e-5, 3.47131167084116673800e-7,
        1.70404452782044526189e-9, 3.85945925430276600453e-12, 3.14040098946363334640e-15)
_GD8 = (1.0, 1.68548898811011640017e0, 4.87852258695304967486e-1, 4.67913194259625806320e-2,
        1.90284426674399523638e-3, 3.68475504442561108162e-5, 3.57043223443740838771e-7,
        1.72693748966316146736e-9, 3.87830166023954706752e-12, 3.14040098946363335242e-15)


def _sici_value(x: Tensor) -> tuple[Tensor, Tensor]:
    ax = tnp.abs(x)
    small = ax <= 4
    huge = ax > 1e9
    # each approximation gets arguments in its own interval only
    xs = tnp.where(small & (ax > 0), ax, 1.0)
    t = xs * xs
    si_small = tnp.where(ax == 0, 0.0, xs * _polyval(_SN, t) / _polyval(_SD, t))
    ci_small = tnp.where(ax == 0, -math.inf, _EULER_GAMMA + tnp.log(xs) + t * _polyval(_CN, t) / _polyval(_CD, t))
    xm = tnp.where(small | huge, 5.0, ax)
    z = 1 / (xm * xm)
    below8 = xm < 8
    f = tnp.where(below8, _polyval(_FN4, z) / (xm * _polyval(_FD4, z)), _polyval(_FN8, z) / (xm * _polyval(_FD8, z)))
    g = tnp.where(below8, z * _polyval(_GN4, z) / _polyval(_GD4, z), z * _polyval(_GN8, z) / _polyval(_GD8, z))
    sin, cos = tnp.sin(xm), tnp.cos(xm)
    si_mid, ci_mid = math.pi / 2 - f * cos - g * sin, f * sin - g * cos
    xh = tnp.where(huge & (ax < math.inf), ax, 2e9)
    inf = ax == math.inf
    si_huge = tnp.where(inf, math.pi / 2, math.pi / 2 - tnp.cos(xh) / xh)
    ci_huge = tnp.where(inf, 0.0, tnp.sin(xh) / xh)
    si = tnp.where(small, si_small, tnp.where(huge, si_huge, si_mid))
    ci = tnp.where(small, ci_small, tnp.where(huge, ci_huge, ci_mid))
    return tnp.sign(x) * si, tnp.where(x == -math.inf, math.nan, ci)


@custom_jvp
def _sici(x: Tensor) -> tuple[Tensor, Tensor]:
    return _sici_value(x)


@_sici.defjvp
def _sici_jvp(primals: tuple[Tensor], tangents: tuple[Tensor]) -> tuple:
    (x,), (t,) = primals, tangents
    return _sici(x), (tnp.sinc(x / math.pi) * t, tnp.cos(x) / x * t)


def sici(x: ArrayLike) -> tuple[Tensor, Tensor]:
    """The sine and cosine integrals (`jax.scipy.special.sici`): Si(x) = int_0^x sin(t) / t dt (odd) and
    Ci(x) = gamma + log|x| + int_0^x (cos(t) - 1) / t dt (even, as JAX has it for x < 0; -inf at 0, NaN at -inf).

    Cephes' approximations, as JAX and scipy; derivatives sin(x) / x and cos(x) / x.

    >>> sici(tg.asarray([1.0, 10.0]))      # ([0.9460831, 1.6583476], [0.3374039, -0.0454564])

    Raises ValueError for complex input.
    """
    (t,) = _real("sici", x)
    c = compute_dtype(t.dtype)
    si, ci = _sici(t if t.dtype == c else t.astype(c))
    return si.astype(t.dtype), ci.astype(t.dtype)


# ---- the Fresnel integrals ----
# Cephes' fresnl.c: float64 takes the rational approximations (SN/SD, CN/CD for x^2 < 2.5625, the auxiliary f and g
# in 1 / (pi x^2)^2 up to x = 36974), float32 the polynomials of Cephes' single precision fresnlf, as JAX does
_FRESNEL_F64 = {
    "sn": (-2.99181919401019853726e3, 7.08840045257738576863e5, -6.29741486205862506537e7, 2.54890880573376359104e9,
           -4.42979518059697779103e10, 3.18016297876567817986e11),
    "sd": (1.0, 2.81376268889994315696e2, 4.55847810806532581675e4, 5.17343888770096400730e6,
           4.19320245898111231129e8, 2.24411795645340920940e10, 6.07366389490084639049e11),
    "cn": (-4.98843114573573548651e-8, 9.50428062829859605134e-6, -6.45191435683965050962e-4,
           1.88843319396703850064e-2, -2.05525900955013891793e-1, 9.99999999999999998822e-1),
    "cd": (3.99982968972495980367e-12, 9.15439215774657478799e-10, 1.25001862479598821474e-7,
           1.22262789024179030997e-5, 8.68029542941784300606e-4, 4.12142090722199792936e-2,
           1.00000000000000000118e0),
    "fn": (4.21543555043677546506e-1, 1.43407919780758885261e-1, 1.15220955073585758835e-2, 3.45017939782574027900e-4,
           4.63613749287867322088e-6, 3.05568983790257605827e-8, 1.02304514164907233465e-10,
           1.72010743268161828879e-13, 1.34283276233062758925e-16, 3.76329711269987889006e-20),
    "fd": (1.0, 7.51586398353378947175e-1, 1.16888925859191382142e-1, 6.44051526508858611005e-3,
           1.55934409164153020873e-4, 1.84627567348930545870e-6, 1.12699224763999035261e-8,
           3.60140029589371370404e-11, 5.88754533621578410010e-14, 4.52001434074129701496e-17,
           1.25443237090011264384e-20),
    "gn": (5.04442073643383265887e-1, 1.97102833525523411709e-1, 1.87648584092575249293e-2, 6.84079380915393090172e-4,
           1.15138826111884280931e-5, 9.82852443688422223854e-8, 4.45344415861750144738e-10,
           1.08268041139020870318e-12, 1.37555460633261799868e-15, 8.36354435630677421531e-19,
           1.86958710162783235106e-22),
    "gd": (1.0, 1.47495759925128324529e0, 3.37748989120019970451e-1, 2.53603741420338795122e-2,
           8.14679107184306179049e-4, 1.27545075667729118702e-5, 1.04314589657571990585e-7,
           4.60680728146520428211e-10, 1.10273215066240270757e-12, 1.38796531259578871258e-15,
           8.39158816283118707363e-19, 1.86958710162783236342e-22),
}
_FRESNEL_F32 = {
    "sn": (1.647629463788700e-9, -1.522754752581096e-7, 8.424748808502400e-6, -3.120693124703272e-4,
           7.244727626597022e-3, -9.228055941124598e-2, 5.235987735681432e-1),
    "cn": (1.416802502367354e-8, -1.157231412229871e-6, 5.387223446683264e-5, -1.604381798862293e-3,
           2.818489036795073e-2, -2.467398198317899e-1, 9.999999760004487e-1),
    "fn": (-1.903009855649792e12, 1.355942388050252e11, -4.158143148511033e9, 7.343848463587323e7,
           -8.732356681548485e5, 8.560515466275470e3, -1.032877601091159e2, 2.999401847870011e0),
    "gn": (-1.860843997624650e11, 1.278350673393208e10, -3.779387713202229e8, 6.492611570598858e6,
           -7.787789623358162e4, 8.602931494734327e2, -1.493439396592284e1, 9.999841934744914e-1),
}


def _sincos_pi_half_square(x: Tensor) -> tuple[Tensor, Tensor]:
    """sin and cos of pi x^2 / 2 with the argument reduced mod 2 exactly (scipy's sinpi / cospi): r = (x^2 / 2) mod 2
    is s (x - s / 2) mod 2 for s = x mod 2, with no x^2 formed."""
    x = tnp.abs(x)
    s = tnp.fmod(x, 2.0)
    r = tnp.fmod(s * (x - s / 2), 2.0)
    sin = tnp.where(r < 0.5, tnp.sin(math.pi * r),
                    tnp.where(r > 1.5, tnp.sin(math.pi * (r - 2)), -tnp.sin(math.pi * (r - 1))))
    cos = tnp.where(r == 0.5, 0.0, tnp.where(r < 1, -tnp.sin(math.pi * (r - 0.5)), tnp.sin(math.pi * (r - 1.5))))
    return sin, cos


def _fresnel_value(xx: Tensor) -> tuple[Tensor, Tensor]:
    single = xx.dtype != dtypes.float64
    k = _FRESNEL_F32 if single else _FRESNEL_F64
    x = tnp.abs(xx)
    isinf = x == math.inf
    small = x * x < 2.5625
    large = x > 36974.0
    xs = tnp.where(small, x, 0.0)
    x2 = xs * xs
    t = x2 * x2
    if single:
        s_small, c_small = xs * x2 * _polyval(k["sn"], t), xs * _polyval(k["cn"], t)
    else:
        s_small = xs * x2 * _polyval(k["sn"], t) / _polyval(k["sd"], t)
        c_small = xs * _polyval(k["cn"], t) / _polyval(k["cd"], t)
    xo = tnp.where(small | isinf, 2.0, x)
    sin, cos = _sincos_pi_half_square(xo)
    if single:
        s_large = c_large = tnp.full_like(x, 0.5)
    else:
        c_large, s_large = 0.5 + sin / (math.pi * xo), 0.5 - cos / (math.pi * xo)
    tt = math.pi * xo * xo
    u = 1 / (tt * tt)
    if single:
        f, g = 1 - u * _polyval(k["fn"], u), _polyval(k["gn"], u) / tt
    else:
        f = 1 - u * _polyval(k["fn"], u) / _polyval(k["fd"], u)
        g = _polyval(k["gn"], u) / _polyval(k["gd"], u) / tt
    c_other = 0.5 + (f * sin - g * cos) / (math.pi * xo)
    s_other = 0.5 - (f * cos + g * sin) / (math.pi * xo)
    s = tnp.where(isinf, 0.5, tnp.where(small, s_small, tnp.where(large, s_large, s_other)))
    c = tnp.where(isinf, 0.5, tnp.where(small, c_small, tnp.where(large, c_large, c_other)))
    neg = xx < 0
    return tnp.where(neg, -s, s), tnp.where(neg, -c, c)


@custom_jvp
def _fresnel(x: Tensor) -> tuple[Tensor, Tensor]:
    return _fresnel_value(x)


@_fresnel.defjvp
def _fresnel_jvp(primals: tuple[Tensor], tangents: tuple[Tensor]) -> tuple:
    (x,), (t,) = primals, tangents
    sin, cos = _sincos_pi_half_square(x)
    return _fresnel(x), (sin * t, cos * t)


def fresnel(x: ArrayLike) -> tuple[Tensor, Tensor]:
    """The Fresnel integrals (S(x), C(x)) = int_0^x (sin, cos)(pi t^2 / 2) dt (`jax.scipy.special.fresnel`), both odd,
    1/2 at inf.

    Cephes' approximations (float32: its single precision polynomials, accurate on [-10, 10] as JAX warns; 16-bit
    floats are computed in float32); derivatives sin(pi x^2 / 2) and cos(pi x^2 / 2).

    >>> fresnel(tg.asarray([1.0]))          # ([0.43825915], [0.7798934])

    Raises ValueError for complex input.
    """
    (t,) = _real("fresnel", x)
    c = compute_dtype(t.dtype)
    s, co = _fresnel(t if t.dtype == c else t.astype(c))
    return s.astype(t.dtype), co.astype(t.dtype)


# ---- Owen's T function ----
# 13-point Gauss-type rule for T(h, a) = a sum_i w_i exp(-h^2 (1 + a^2 t_i) / 2) / (1 + a^2 t_i), the 1 / (2 pi)
# and the substitution u^2 = a^2 t folded into the weights (Patefield and Tandy's T5, as JAX)
_OWENS_T_POINTS = (0.0035082039676451715, 0.031279042338030754, 0.085266826283219451, 0.16245071730812277,
                   0.25851196049125435, 0.36807553840697534, 0.48501092905604697, 0.60277514152618577,
                   0.71477884217753227, 0.81475510988760099, 0.89711029755948966, 0.95723808085944262,
                   0.99178832974629704)
_OWENS_T_WEIGHTS = (0.018831438115323503, 0.018567086243977649, 0.018042093461223386, 0.017263829606398753,
                    0.016243219975989857, 0.014994592034116705, 0.013535474469662088, 0.011886351605820165,
                    0.010070377242777432, 0.0081130545742299587, 0.0060419009528470239, 0.0038862217010742058,
                    0.0016793031084546090)


def _owens_t_value(h: Tensor, a: Tensor) -> Tensor:
    h_abs, a_abs = tnp.abs(h), tnp.abs(a)
    root2 = math.sqrt(2)
    inside = a_abs <= 1
    ma = tnp.where(inside, a_abs, 1 / a_abs)            # |a| > 1 goes through T(h, a) = ... - T(a h, 1 / a)
    mh = tnp.where(inside, h_abs, a_abs * h_abs)
    half_h2 = 0.5 * mh * mh
    total = tnp.zeros_like(ma)
    for point, weight in zip(_OWENS_T_POINTS, _OWENS_T_WEIGHTS, strict=True):
        r = ma * ma * point
        total = total + weight * tnp.exp(-half_h2 * (1 + r)) / (1 + r)
    out = ma * total
    out = tnp.where(mh == 0, tnp.arctan(ma) / (2 * math.pi), out)
    out = tnp.where(ma == 1, 0.125 * erfc(-mh / root2) * erfc(mh / root2), out)
    hn = h_abs / root2
    norm_h, norm_ah = erfc(hn), erfc(a_abs * hn)
    reflected = tnp.where(a_abs * h_abs <= 0.67, 0.25 - 0.25 * erf(hn) * erf(a_abs * hn) - out,
                          0.25 * (norm_h + norm_ah - norm_h * norm_ah) - out)
    out = tnp.sign(a) * tnp.where(a_abs > 1, reflected, out)
    return tnp.where(tnp.isnan(a) | tnp.isnan(h), math.nan, out)


@custom_jvp
def _owens_t(h: Tensor, a: Tensor) -> Tensor:
    return _owens_t_value(h, a)


_owens_t.defjvps(
    lambda g, y, h, a: g * (-tnp.exp(-0.5 * h * h) * erf(a * h / math.sqrt(2)) / (2 * math.sqrt(2 * math.pi))),
    lambda g, y, h, a: g * tnp.exp(-0.5 * (a * a + 1) * h * h) / (2 * math.pi * (a * a + 1)))


def owens_t(h: ArrayLike, a: ArrayLike) -> Tensor:
    """Owen's T function T(h, a) = 1 / (2 pi) int_0^a exp(-h^2 (1 + t^2) / 2) / (1 + t^2) dt
    (`jax.scipy.special.owens_t`): even in h, odd in a.

    JAX's 13-point quadrature for |a| <= 1 (exact at h = 0 and a = 1) and the reflection through T(a h, 1 / a)
    beyond; derivatives in closed form.

    >>> owens_t(tg.asarray([0.0, 1.0]), 1.0)        # [0.125, 0.0667418]
    """
    ht, at = _real("owens_t", h, a)
    (ht, at), d = _upcast_all("owens_t", ht, at)
    return _owens_t(ht, at).astype(d)


# ---- Bessel functions of the first kind ----
def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Tensor:
    """J_0(z), ..., J_v(z) for real z, stacked on a new first axis: shape (v + 1, *z.shape)
    (`jax.scipy.special.bessel_jn`).

    Miller's algorithm as JAX runs it: the recurrence J_k = 2 (k + 1) / z J_(k+1) - J_(k+2) backwards from
    k = n_iter (an unrolled loop of n_iter + 1 elementwise steps; 16-bit floats in float32), normalised by
    J_0 + 2 sum J_2k = 1. `n_iter` must grow with |z| (about |z| + 20 terms suffice) but the backward values grow
    like (2 n_iter / z)^n_iter: in float32 the default 50 overflows to NaN for |z| below about 5, as in JAX (pass
    n_iter=20 there, or use float64). Orders above n_iter are not produced, as in JAX; NaN at z = 0.
    Differentiable in z through the recurrence.

    >>> bessel_jn(tg.asarray([1.0, 2.5]), v=2, n_iter=20)[2]     # [0.1149035, 0.4460591]

    Raises TypeError when v or n_iter is not a Python int (or is traced), ValueError for complex z.
    """
    try:
        order = operator.index(v)
        steps = operator.index(n_iter)
    except ConcretizationError:   # a traced v: says where its value was needed, as JAX's ConcretizationTypeError
        raise
    except TypeError:
        raise TypeError(f"bessel_jn: v and n_iter must be Python ints (they set the output's shape and the loop's "
                        f"length); got v={v!r}, n_iter={n_iter!r}") from None
    if order < 0 or steps < 0:
        raise ValueError(f"bessel_jn: v and n_iter must be non-negative; got v={order}, n_iter={steps}")
    (z_in,) = _real("bessel_jn", z)
    c = compute_dtype(z_in.dtype)
    zt = z_in if z_in.dtype == c else z_in.astype(c)       # 1e-16 is 0 in a 16-bit float: start in float32
    f0, f1 = tnp.zeros_like(zt), tnp.full_like(zt, 1e-16)
    total = tnp.zeros_like(zt)
    values: list[Tensor] = []
    for k in range(steps, -1, -1):
        f = 2.0 * (k + 1) * f1 / zt - f0
        if k % 2 == 0:
            total = total + 2.0 * f
        if k <= order:
            values.append(f)
        f0, f1 = f1, f
    return (tnp.stack(values[::-1]) / (total - f1)).astype(z_in.dtype)


__all__ = ["hyp1f1", "hyp2f1", "sici", "fresnel", "owens_t", "bessel_jn"]
