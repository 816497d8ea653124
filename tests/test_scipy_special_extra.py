"""tgfx.scipy.special beyond gammaln / erf: gamma and its relatives, the incomplete gamma and beta functions, Hurwitz
zeta, polygamma, Bessel I0 / I1, the exponential integrals, erfcx, dawsn, spence, entropies and Box-Cox.

No scipy: every reference is computed here in float64, from `math`, a power series, a continued fraction, Gauss
quadrature or an exact rational recurrence (each checked against mpmath to 1e-12 or better when it was written), and
identities tie the branches together (P + Q = 1, the beta symmetry, i0e = exp(-|x|) i0, recurrences). Then `jit` and
`vmap`, gradients against central differences (test_grad's `check_grads`) and against the closed forms, the errors a
user gets, and, where jax is installed, jax.scipy.special itself over a grid.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_grad import T, check_grads

import tgfx as tg
from tgfx.dtypes import dtypes
from tgfx.scipy import special as sp

EULER = 0.5772156649015329


# ---- float64 references ----
def ref_gammainc(a: float, x: float) -> float:
    """P(a, x) = x^a e^-x / Gamma(a + 1) sum_k x^k / ((a+1)...(a+k)): every term positive, so no cancellation."""
    if x == 0:
        return 0.0
    term, total, k = 1.0, 1.0, 0
    while term > 1e-17 * total:
        k += 1
        term *= x / (a + k)
        total += term
    return math.exp(a * math.log(x) - x - math.lgamma(a + 1)) * total


def ref_gammaincc_int(n: int, x: float) -> float:
    """Q(n, x) = e^-x sum_{k<n} x^k / k! for integer n: accurate where Q is tiny."""
    return math.exp(-x) * math.fsum(x ** k / math.factorial(k) for k in range(n))


def ref_betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b) = x^a / B(a, b) sum_n (1-b)_n / n! x^n / (a + n), on the side of (a+1)/(a+b+2) where it converges."""
    if x > (a + 1) / (a + b + 2):
        return 1 - ref_betainc(b, a, 1 - x)
    total, coef, n = 0.0, 1.0, 0
    while True:
        term = coef * x ** n / (a + n)
        total += term
        if n > 10 and abs(term) < 1e-18 * abs(total):
            break
        coef *= (n + 1 - b) / (n + 1)
        n += 1
    return total * x ** a * math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))


def ref_zeta(s: float, q: float, n: int = 1000) -> float:
    """sum_{k<n} (q+k)^-s plus the Euler-Maclaurin tail from q + n (its omitted terms are below 1e-20)."""
    m = q + n
    head = math.fsum(((q + np.arange(n, dtype=np.float64)) ** -s).tolist())
    return head + m ** (1 - s) / (s - 1) + 0.5 * m ** -s + s / 12 * m ** (-s - 1) - \
        s * (s + 1) * (s + 2) / 720 * m ** (-s - 3)


def ref_bessel_scaled(order: int, x: float) -> float:
    """exp(-|x|) I_order(x): the power series up to |x| = 40, the asymptotic expansion from 80 on."""
    ax = abs(x)
    if ax <= 40:
        total, term, k = 0.0, (ax / 2) ** order / math.factorial(order), 0
        while term > 1e-18 * total or k < 5:
            total += term
            k += 1
            term *= (ax * ax / 4) / (k * (k + order))
        out = total * math.exp(-ax)
    else:
        assert ax >= 80
        mu, term, total = 4 * order * order, 1.0, 1.0
        for k in range(1, 12):
            term *= -(mu - (2 * k - 1) ** 2) / (k * 8 * ax)
            total += term
        out = total / math.sqrt(2 * math.pi * ax)
    return -out if (order == 1 and x < 0) else out


def _lentz_expn(n: float, x: float) -> float:
    """E_n(x) for x > 1 by the continued fraction DLMF 8.19.17, evaluated with Lentz's method."""
    b = x + n
    c, d = 1e300, 1 / b
    h = d
    for i in range(1, 2000):
        an = -i * (n - 1 + i)
        b += 2
        d = 1 / (an * d + b)
        c = b + an / c
        delta = c * d
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return h * math.exp(-x)


def ref_expn(n: int, x: float) -> float:
    """E_n(x): e^-x / x for n = 0; DLMF 8.19.17 for x > 1; E_1's power series and the upward recurrence
    E_{k+1} = (e^-x - x E_k) / k for x <= 1."""
    if n == 0:
        return math.exp(-x) / x
    if x > 1:
        return _lentz_expn(n, x)
    total, term, k = 0.0, 1.0, 0
    while abs(term) >= 1e-18 or k == 0:
        k += 1
        term *= -x / k
        total += term / k
    e = -EULER - math.log(x) - total
    for k in range(1, n):
        e = (math.exp(-x) - x * e) / k
    return e


def ref_expi(x: float) -> float:
    """Ei(x) = euler_gamma + log x + sum x^k / (k k!) for x > 0 (positive terms), -E_1(-x) below."""
    if x < 0:
        return -ref_expn(1, -x)
    total, term, k = 0.0, 1.0, 0
    while k == 0 or term / k >= 1e-18 * total:
        k += 1
        term *= x / k
        total += term / k
    return EULER + math.log(x) + total


def ref_dawsn(x: float) -> float:
    """int_0^x exp(t^2 - x^2) dt by 120-point Gauss-Legendre (the integrand is smooth on [0, x])."""
    t, w = np.polynomial.legendre.leggauss(120)
    s = x / 2 * (t + 1)
    return float(np.sum(w * np.exp(-(x - s) * (x + s))) * x / 2)


def ref_spence(x: float) -> float:
    """Li2(1 - x) = sum (1-x)^k / k^2 for |1 - x| <= 1/2; elsewhere the reflection and inversion identities."""
    if x == 0:
        return math.pi ** 2 / 6
    if x > 1.5:
        return -ref_spence(1 / x) - 0.5 * math.log(x) ** 2
    if x < 0.5:
        return math.pi ** 2 / 6 - math.log(x) * math.log1p(-x) - ref_spence(1 - x)
    return math.fsum((1 - x) ** k / k ** 2 for k in range(1, 80))


def ref_erfcx(x: float) -> float:
    if x < 25:
        return math.exp(x * x) * math.erfc(x)
    t = 1 / (2 * x * x)
    return (1 - t + 3 * t * t - 15 * t ** 3 + 105 * t ** 4) / (x * math.sqrt(math.pi))


def ref_gammasgn(x: float) -> float:
    if x < 0 and x == math.floor(x):
        return math.nan
    return math.copysign(1.0, math.gamma(x)) if x != 0 else math.copysign(1.0, x)


def bernoulli_exact(n: int) -> list[Fraction]:
    """B_0 .. B_n (B_1 = -1/2) by the Akiyama-Tanigawa algorithm, in exact fractions."""
    out, a = [], [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
        out.append(a[0])
    if n >= 1:
        out[1] = -out[1]
    return out


def grid(*axes: list[float]) -> list[np.ndarray]:
    return [g.ravel() for g in np.meshgrid(*[np.asarray(a, np.float64) for a in axes], indexing="ij")]


def vec(f: Callable[..., float], *args: np.ndarray) -> np.ndarray:
    return np.array([f(*a) for a in zip(*args, strict=True)], np.float64)


# ---- the table: name -> Case(tgfx function, float64 inputs, reference, rtol, atol, ...) ----
inf, nan = math.inf, math.nan


class Case(NamedTuple):
    """`f(*args)` must match `want` to rtol / atol; the last `edges` points are domain edges (0, inf, poles, outside
    the domain) with the values scipy gives, which jax does not always (they are left out of the jax comparison)."""
    f: Callable
    args: tuple[np.ndarray, ...]
    want: np.ndarray
    rtol: float
    atol: float = 0.0
    edges: int = 0


def case(f: Callable, ref: Callable[..., float], args: list[np.ndarray], rtol: float, atol: float = 0.0,
         edges: tuple[tuple[float, ...], ...] = ()) -> Case:
    """The reference at `args`, then each edge point (its inputs, then its value) appended."""
    want = vec(ref, *args)
    if edges:
        cols = list(zip(*edges, strict=True))
        args = [np.r_[a, np.asarray(c, np.float64)] for a, c in zip(args, cols[:-1], strict=True)]
        want = np.r_[want, np.asarray(cols[-1], np.float64)]
    return Case(f, tuple(args), want, rtol, atol, len(edges))


_X = np.array([-7.5, -3.3, -1.5, -0.5, 0.25, 0.5, 1.0, 2.0, 3.7, 10.0, 30.5, 150.0])
_XP = _X[_X > 0]
_BX_I = np.array([-30.0, -3.0, -0.001, 0.0, 0.5, 1.0, 7.9, 8.1, 20.0, 39.0, 100.0, 700.0])
CASES: dict[str, Case] = {
    "gamma": case(sp.gamma, math.gamma, [_X], 1e-12, edges=((0.0, inf), (-0.0, -inf), (-2.0, nan), (-inf, nan),
                                                            (inf, inf), (200.0, inf))),
    "gammasgn": case(sp.gammasgn, ref_gammasgn, [_X], 0, edges=((-2.0, nan), (0.0, 1.0), (-0.0, -1.0), (nan, nan))),
    "loggamma": case(sp.loggamma, math.lgamma, [_XP], 1e-13, 1e-14, edges=((-0.5, nan), (0.0, nan))),
    "factorial": case(sp.factorial, lambda n: math.gamma(n + 1), [np.r_[0.0, _XP]], 1e-12, edges=((-1.0, 0.0),)),
    "comb": case(sp.comb, lambda n, k: math.comb(int(n), int(k)), grid([0, 5, 12, 30], [0, 2, 5]), 1e-12,
                 edges=((3.0, 5.0, 0.0), (-1.0, 0.0, 0.0), (3.0, -1.0, 0.0))),
    "poch": case(sp.poch, lambda z, m: math.gamma(z + m) / math.gamma(z), grid([0.5, 2.0, 7.3], [0.0, 1.0, 2.5, -0.3]),
                 1e-12),
    "beta": case(sp.beta, lambda a, b: math.gamma(a) * math.gamma(b) / math.gamma(a + b),
                 grid([0.5, 2.0, 7.3, -1.5], [1.0, 2.5, -0.7]), 1e-12),
    "multigammaln": case(lambda a: sp.multigammaln(a, 3),
                         lambda a: 1.5 * math.log(math.pi) + sum(math.lgamma(a - i / 2) for i in range(3)),
                         [np.array([1.5, 2.0, 3.7, 10.0, 40.0])], 1e-14),
    "gammainc": case(sp.gammainc, ref_gammainc, grid([0.1, 0.5, 1.0, 2.5, 7.0, 30.0, 150.0],
                                                     [0.01, 0.3, 1.0, 2.0, 5.0, 10.0, 40.0, 200.0]), 1e-12, 1e-300,
                     edges=((1.0, 0.0, 0.0), (0.0, 0.5, 1.0), (0.0, 0.0, nan), (-1.0, 1.0, nan), (2.0, inf, 1.0),
                            (2.0, -1.0, nan))),
    "gammaincc": case(sp.gammaincc, lambda n, x: ref_gammaincc_int(int(n), x),
                      grid([1, 2, 5, 30], [0.5, 3.0, 20.0, 90.0]), 1e-12,
                      edges=((1.0, 0.0, 1.0), (0.0, 0.5, 0.0), (2.0, inf, 0.0), (nan, 1.0, nan))),
    "betainc": case(sp.betainc, ref_betainc, grid([0.2, 1.0, 3.0, 9.5], [0.5, 2.0, 7.5], [0.01, 0.3, 0.7, 0.95]),
                    1e-12, 1e-300, edges=((2.0, 3.0, 0.0, 0.0), (2.0, 3.0, 1.0, 1.0), (2.0, 3.0, 1.5, nan),
                                          (0.0, 3.0, 0.5, 1.0), (2.0, 0.0, 0.5, 0.0), (-1.0, 3.0, 0.5, nan))),
    "zeta": case(sp.zeta, ref_zeta, grid([1.5, 2.0, 3.0, 7.5, 20.0], [0.05, 0.5, 1.0, 3.0, 40.0]), 1e-14,
                 edges=((1.0, 2.0, inf), (0.5, 2.0, nan), (2.0, -3.0, inf), (3.0, -3.0, nan), (2.5, -1.5, nan))),
    "polygamma": case(lambda n, x: sp.polygamma(n.astype(dtypes.int32), x),
                      lambda n, x: (-1) ** (n + 1) * math.factorial(int(n)) * ref_zeta(n + 1, x),
                      grid([1, 2, 3, 5], [0.3, 1.0, 4.5, 30.0]), 1e-13, edges=((-1.0, 2.0, nan),)),
    "i0e": case(sp.i0e, lambda x: ref_bessel_scaled(0, x), [_BX_I], 2e-15, edges=((inf, 0.0), (-inf, 0.0))),
    "i1e": case(sp.i1e, lambda x: ref_bessel_scaled(1, x), [_BX_I], 2e-15, edges=((inf, 0.0), (-inf, -0.0))),
    "i0": case(sp.i0, lambda x: ref_bessel_scaled(0, x) * math.exp(abs(x)), [_BX_I[:-1]], 2e-15),
    "i1": case(sp.i1, lambda x: ref_bessel_scaled(1, x) * math.exp(abs(x)), [_BX_I[:-1]], 2e-15),
    "expn": case(sp.expn, lambda n, x: ref_expn(int(n), x), grid([0, 1, 2, 3, 7, 30], [0.01, 0.3, 1.0, 1.1, 2.0, 5.0,
                                                                                        30.0]), 1e-14,
                 edges=((1.0, 0.0, inf), (3.0, 0.0, 0.5), (-1.0, 1.0, nan), (2.0, inf, 0.0), (2.0, -1.0, nan))),
    "exp1": case(sp.exp1, lambda x: ref_expn(1, x), [np.array([1e-5, 0.3, 1.0, 1.1, 5.0, 30.0, 700.0])], 1e-14,
                 edges=((0.0, inf), (-1.0, nan), (inf, 0.0))),
    "expi": case(sp.expi, ref_expi, [np.array([-30.0, -2.0, -0.1, 0.001, 0.5, 2.0, 3.0, 6.0, 10.0, 20.0, 50.0, 100.0])],
                 1e-14, edges=((0.0, -inf), (inf, inf), (-inf, 0.0))),
    "erfcx": case(sp.erfcx, ref_erfcx, [np.r_[-5.0, -1.0, 0.0, _XP, 1e10]], 1e-13, edges=((-inf, inf), (inf, 0.0))),
    "dawsn": case(sp.dawsn, ref_dawsn, [np.array([-2.0, 0.01, 0.5, 1.0, 3.3, 5.0, 6.3, 10.0])], 2e-12,  # quadrature's
                  edges=((0.0, 0.0), (inf, 0.0))),
    "spence": case(sp.spence, ref_spence, [np.array([0.0, 1e-5, 0.1, 0.49, 0.5, 0.9, 1.0, 1.2, 1.6, 2.0, 2.5, 10.0,
                                                     1e4])], 1e-14, 1e-16, edges=((-1.0, nan), (nan, nan))),
}
_RESULTS64: dict[str, np.ndarray] = {}


def results64(name: str) -> np.ndarray:
    """tgfx's float64 values for CASES[name], computed once (the jax comparison reuses them and their compile)."""
    if name not in _RESULTS64:
        c = CASES[name]
        got = c.f(*[tg.asarray(a) for a in c.args])
        assert got.dtype == dtypes.float64 and got.shape == c.want.shape
        _RESULTS64[name] = got.numpy()
    return _RESULTS64[name]


@pytest.mark.x64
@pytest.mark.parametrize("name", list(CASES))
def test_matches_float64_reference(name: str) -> None:
    c, got = CASES[name], results64(name)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(c.want), err_msg="NaNs differ")
    inf_at = np.isinf(c.want)
    np.testing.assert_array_equal(got[inf_at], c.want[inf_at], err_msg="infinities differ")
    np.testing.assert_allclose(got, c.want, rtol=c.rtol, atol=c.atol)
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(c.want[got == 0]), err_msg="signs of 0")


@pytest.mark.parametrize("name", ["gamma", "gammainc", "betainc", "zeta", "i1", "expn", "expi", "erfcx", "spence"])
def test_float32_within_its_precision(name: str) -> None:
    """The default float32 against the float64 reference at the float32-rounded inputs: a few ulp; more for gamma
    (exp of a gammaln whose absolute error grows with its size) and for the iterated expansions (rounding adds up
    over their terms)."""
    c = CASES[name]
    n = len(c.want) - c.edges
    a32 = [a[:n].astype(np.float32) for a in c.args]
    keep = np.abs(a32[0]) < 30 if name == "gamma" else np.ones(n, bool)
    a32 = [a[keep] for a in a32]
    want = vec({"gamma": math.gamma, "gammainc": ref_gammainc, "betainc": ref_betainc, "zeta": ref_zeta,
                "i1": lambda x: ref_bessel_scaled(1, x) * math.exp(abs(x)), "expn": lambda k, x: ref_expn(int(k), x),
                "expi": ref_expi, "erfcx": ref_erfcx, "spence": ref_spence}[name], *[a.astype(np.float64) for a in a32])
    got = c.f(*[tg.asarray(a) for a in a32])
    assert got.dtype == dtypes.float32
    fin = np.abs(want) < 1e36
    rtol = {"gamma": 2e-5, "gammainc": 2e-5, "betainc": 2e-5, "expn": 1e-5}.get(name, 3e-6)
    np.testing.assert_allclose(got.numpy()[fin], want[fin], rtol=rtol, atol=1e-37)


# ---- identities, over hypothesis-drawn values (one shape, so one compile) ----
@settings(max_examples=15)
@given(hnp.arrays(np.float32, 8, elements=st.floats(0.0625, 60, width=32)),
       hnp.arrays(np.float32, 8, elements=st.floats(0.0, 80, width=32)))
def test_gammainc_plus_gammaincc_is_one(a: np.ndarray, x: np.ndarray) -> None:
    p, q = sp.gammainc(tg.asarray(a), tg.asarray(x)).numpy(), sp.gammaincc(tg.asarray(a), tg.asarray(x)).numpy()
    # both scale one factor exp(a log x - x - gammaln(a)), whose float32 exponent is off by ulps of its terms (jax's
    # sum is 1 - 1.3e-5 at a = x = 30)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    terms = a64 * np.abs(np.log(np.where(x64 > 0, x64, 1.0))) + x64 + vec(lambda v: abs(math.lgamma(v)), a64)
    np.testing.assert_array_less(np.abs(p + q - 1), 3e-6 + 2.5e-7 * terms)
    assert ((p >= 0) & (p <= 1) & (q >= 0) & (q <= 1)).all()


@settings(max_examples=15)
@given(hnp.arrays(np.float32, 8, elements=st.floats(0.125, 20, width=32)),
       hnp.arrays(np.float32, 8, elements=st.floats(0.125, 20, width=32)),
       hnp.arrays(np.float32, 8, elements=st.floats(0.0, 1.0, width=32)))
def test_betainc_symmetry(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> None:
    """I_x(a, b) = 1 - I_{1-x}(b, a) (where 1 - x is exact in float32), and I_x(a, 1) = x^a."""
    x64 = x.astype(np.float64)
    one_minus = (1 - x64).astype(np.float32)
    exact = one_minus.astype(np.float64) == 1 - x64
    ones = np.ones(8, np.float32)
    # one call for the three, so one compile: rows (a, b, x), (b, a, 1 - x), (a, 1, x)
    out = sp.betainc(tg.asarray(np.stack([a, b, a])), tg.asarray(np.stack([b, a, ones])),
                     tg.asarray(np.stack([x, one_minus, x]))).numpy()
    np.testing.assert_allclose(out[0][exact], 1 - out[1][exact], rtol=0, atol=2e-5)
    # the prefactor x^a / (a B(a, 1)) carries the float32 error of gammaln (a few 1e-6 of values near 20)
    np.testing.assert_allclose(out[2], x64 ** a.astype(np.float64), rtol=1e-4, atol=1e-30)


@pytest.mark.x64
def test_identities_and_recurrences() -> None:
    """i0e = exp(-|x|) i0; polygamma(n, z + 1) = polygamma(n, z) + (-1)^n n! / z^(n+1), polygamma(0) = digamma;
    E_{n+1}(x) = (e^-x - x E_n(x)) / n on both sides of x = 1; comb with and without repetition."""
    x = np.array([-20.0, -2.5, -0.3, 0.0, 0.7, 4.0, 9.0, 25.0])
    np.testing.assert_allclose(sp.i0e(tg.asarray(x)).numpy(), np.exp(-np.abs(x)) * sp.i0(tg.asarray(x)).numpy(),
                               rtol=1e-15)
    z = np.array([0.3, 1.7, 4.2, 11.0])
    n = np.repeat(np.arange(4), 4).astype(np.int32)
    both = sp.polygamma(tg.asarray(np.r_[n, n]), tg.asarray(np.r_[np.tile(z, 4), np.tile(z + 1, 4)])).numpy()
    step = (-1.0) ** n * vec(math.factorial, n) / np.tile(z, 4) ** (n + 1)
    np.testing.assert_allclose(both[16:], both[:16] + step, rtol=1e-12)
    np.testing.assert_allclose(both[:4], sp.digamma(tg.asarray(z)).numpy(), rtol=1e-15)
    xs = np.array([0.2, 0.9, 1.5, 6.0])
    e = sp.expn(tg.asarray(np.r_[np.full(4, 2.0), np.full(4, 3.0)]), tg.asarray(np.r_[xs, xs])).numpy()
    np.testing.assert_allclose(e[4:], (np.exp(-xs) - xs * e[:4]) / 2, rtol=1e-13)
    nn, k = np.array([5.0, 10.0, 30.0, 4.0, 3.0]), np.array([2.0, 0.0, 15.0, 5.0, 0.0])
    np.testing.assert_allclose(sp.comb(tg.asarray(nn), tg.asarray(k), repetition=True).numpy(),
                               [15, 1, math.comb(44, 15), 56, 1], rtol=1e-12)


@pytest.mark.x64
def test_entropies_and_boxcox() -> None:
    p = np.array([0.0, 0.0, 0.5, 1.0, 2.0, -1.0, 1.0])
    q = np.array([0.0, 3.0, 0.25, 2.0, 1.0, 1.0, 0.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.where((p > 0) & (q > 0), p * np.log(p / q), np.where((p == 0) & (q >= 0), 0.0, np.inf))
    np.testing.assert_allclose(sp.rel_entr(tg.asarray(p), tg.asarray(q)).numpy(), want, rtol=1e-15)
    np.testing.assert_allclose(sp.kl_div(tg.asarray(p), tg.asarray(q)).numpy(), want - p + q, rtol=1e-15)
    x, lam = np.array([0.5, 2.0, 2.0, 10.0, 1e-3, -1.0]), np.array([0.0, 1e-9, 2.0, -0.5, 0.3, 0.5])
    with np.errstate(invalid="ignore"):
        want = np.where(lam == 0, np.log(x), np.expm1(lam * np.log(x)) / np.where(lam == 0, 1, lam))
    np.testing.assert_allclose(sp.boxcox(tg.asarray(x), tg.asarray(lam)).numpy(), want, rtol=1e-14)
    np.testing.assert_allclose(sp.boxcox1p(tg.asarray(np.array([1e-12, 1.0, -2.0])),
                                           tg.asarray(np.array([0.5, 0.0, 1.0]))).numpy(), [1e-12, math.log(2), nan],
                               rtol=1e-12)


def test_bernoulli_numbers() -> None:
    exact = bernoulli_exact(30)
    got = sp.bernoulli(30)
    assert got.dtype == dtypes.float32 and got.shape == (31,)
    np.testing.assert_allclose(got.numpy(), [float(b) for b in exact], rtol=1e-7)
    assert sp.bernoulli(0).numpy().tolist() == [1.0] and sp.bernoulli(1).numpy().tolist() == [1.0, -0.5]


def test_dtypes_follow_jax() -> None:
    """Integers promote to the default float, float16 stays float16 (computed in float32), Python scalars are weak."""
    h = tg.asarray(np.array([1.5, 3.0], np.float16))
    assert sp.gammainc(h, 1.0).dtype == dtypes.float16 and sp.i0e(h).dtype == dtypes.float16
    np.testing.assert_allclose(sp.gammainc(h, 1.0).numpy(), [ref_gammainc(1.5, 1.0), ref_gammainc(3.0, 1.0)],
                               rtol=1e-3)
    g = sp.gamma(tg.asarray([1, 2, 3]))
    assert g.dtype == dtypes.float32
    np.testing.assert_allclose(g.numpy(), [1, 1, 2], rtol=1e-6)


# ---- transformations ----
def _mixed(a: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
    return sp.gammainc(a, x) + sp.zeta(a + 1, x) + sp.i1(x) + sp.spence(x) + sp.erfcx(-x)


def test_jit_matches_eager_and_traces_once() -> None:
    traces = []

    @tg.jit
    def f(a: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
        traces.append(1)
        return _mixed(a, x)

    x = tg.asarray(np.array([0.4, 1.5, 3.0, 12.0], np.float32))
    eager = _mixed(tg.asarray(np.float32(2.0)), x).numpy()
    np.testing.assert_allclose(f(tg.asarray(np.float32(2.0)), x).numpy(), eager, rtol=1e-6)
    other = f(tg.asarray(np.float32(0.7)), x).numpy()      # a new value, not a new trace
    assert len(traces) == 1
    a, v = float(np.float32(0.7)), float(np.float32(0.4))
    want = (ref_gammainc(a, v) + ref_zeta(a + 1, v) + ref_bessel_scaled(1, v) * math.exp(v) + ref_spence(v)
            + ref_erfcx(-v))
    np.testing.assert_allclose(other[0], want, rtol=2e-6)


def test_vmap_matches_the_batched_call() -> None:
    """gammaincc's while loops under vmap: every row converges, as in the broadcast call."""
    a = tg.asarray(np.array([0.5, 2.0, 9.0], np.float32))
    x = tg.asarray(np.array([0.3, 1.5, 4.0, 20.0], np.float32))
    rows = tg.vmap(lambda ai: sp.gammaincc(ai, x))(a)
    np.testing.assert_allclose(rows.numpy(), sp.gammaincc(a[:, None], x).numpy(), rtol=2e-6)


# ---- gradients ----
# name: (function, float64 inputs away from branch switches): jvp and vjp against central differences (check_grads)
GRADS: dict[str, tuple[Callable, tuple[np.ndarray, ...]]] = {
    "gammainc": (sp.gammainc, (np.array([0.7, 2.5, 6.0, 3.0]), np.array([0.4, 1.7, 9.0, 2.2]))),
    "zeta": (lambda s, q: sp.zeta(s + 1.5, q), (np.array([0.7, 2.5, 6.0]), np.array([0.4, 1.7, 9.0]))),
    "i0e_i1": (lambda x: sp.i0e(-x) * sp.i1(x), (np.array([0.3, 0.8, 2.6, 9.0]),)),
    "expn": (lambda x: sp.expn(T(np.array([0.0, 1.0, 2.0, 5.0])), x), (np.array([0.3, 0.8, 2.6, 9.0]),)),
    "spence_erfcx_dawsn": (lambda x: sp.spence(x) + sp.erfcx(x) + sp.dawsn(-x), (np.array([0.3, 0.8, 1.7, 2.6]),)),
}


@pytest.mark.x64
@pytest.mark.parametrize("name", list(GRADS))
def test_gradients_match_differences(name: str) -> None:
    f, xs = GRADS[name]
    check_grads(f, *xs, rtol=1e-6, atol=1e-8)


@pytest.mark.x64
def test_gradients_match_closed_forms() -> None:
    a, x = 2.5, np.array([0.3, 1.2, 4.0])
    dx = tg.grad(lambda v: sp.gammainc(a, v).sum())(T(x)).numpy()
    np.testing.assert_allclose(dx, x ** (a - 1) * np.exp(-x) / math.gamma(a), rtol=1e-13)
    # second derivative in x: ((a - 1) / x - 1) dP/dx
    d2 = tg.grad(lambda v: tg.grad(lambda w: sp.gammainc(a, w).sum())(v).sum())(T(x)).numpy()
    np.testing.assert_allclose(d2, ((a - 1) / x - 1) * dx, rtol=1e-12)
    db = tg.grad(lambda v: sp.betainc(2.0, 3.0, v).sum())(T(np.array([0.2, 0.7]))).numpy()
    np.testing.assert_allclose(db, 12 * np.array([0.2, 0.7]) * np.array([0.8, 0.3]) ** 2, rtol=1e-13)
    de = tg.grad(lambda v: sp.expn(3, v).sum())(T(np.array([0.5, 2.0]))).numpy()
    np.testing.assert_allclose(de, -vec(lambda v: ref_expn(2, v), np.array([0.5, 2.0])), rtol=1e-13)
    # poch's derivatives are JAX's rule, at m == 0 too (where poch is 1 by a `where`): digamma(z + m) - digamma(z)
    # and digamma(z + m), times poch
    z, m = np.array([0.5, 3.0]), np.array([0.0, 1.5])
    dz, dm = tg.grad(lambda u, v: sp.poch(u, v).sum(), argnums=(0, 1))(T(z), T(m))
    psi = sp.digamma(T(np.r_[z, z + m])).numpy()
    poch = vec(lambda u, v: math.gamma(u + v) / math.gamma(u), z, m)
    np.testing.assert_allclose(dz.numpy(), (psi[2:] - psi[:2]) * poch, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dm.numpy(), psi[2:] * poch, rtol=1e-13)
    # JAX has no derivative of betainc in a or b: NaN, never a silent 0
    assert np.isnan(tg.grad(lambda v: sp.betainc(v, 2.0, 0.3))(T(2.0)).numpy())


# ---- errors ----
def test_errors_name_the_argument() -> None:
    x = tg.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="gamma does not support complex"):
        sp.gamma(tg.asarray(np.array([1 + 1j], np.complex64)))
    with pytest.raises(ValueError, match="polygamma: n must have an integer dtype.*float"):
        sp.polygamma(1.0, x)
    with pytest.raises(TypeError, match="multigammaln: d must be a Python int"):
        sp.multigammaln(x, 2.5)
    with pytest.raises(TypeError, match="multigammaln: d must be a Python int.*traced"):
        tg.jit(lambda d: sp.multigammaln(x, d))(tg.asarray(3))
    with pytest.raises(ValueError, match="multigammaln: d must be at least 1"):
        sp.multigammaln(x, 0)
    with pytest.raises(ValueError, match="bernoulli: n must be a non-negative"):
        sp.bernoulli(-1)
    with pytest.raises(TypeError, match="bernoulli: n must be a Python int"):
        sp.bernoulli(2.5)
    with pytest.raises(NotImplementedError, match="factorial with exact=True"):
        sp.factorial(x, exact=True)
    with pytest.raises(NotImplementedError, match="Riemann zeta.*q=1"):
        sp.zeta(x)
    with pytest.raises(ValueError, match=r"gammainc: the arguments' shapes \(2,\), \(3,\) do not broadcast"):
        sp.gammainc(x, tg.asarray([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"betainc: the arguments' shapes"):
        sp.betainc(x, 1.0, tg.asarray([0.1, 0.2, 0.3]))


# ---- jax.scipy.special itself ----
# jax compiles each special function separately, a second or more apiece for the iterated ones; gammaincc, expn,
# exp1, expi and spence are left to their float64 references above to keep this file quick
_JAX_NAMES = ["gamma", "gammasgn", "loggamma", "factorial", "comb", "poch", "beta", "gammainc", "betainc", "zeta",
              "polygamma", "i0e", "i1e", "i0", "i1", "erfcx", "dawsn"]


@pytest.mark.x64
def test_matches_jax_over_the_grids() -> None:
    """jax.scipy.special in float64 on every grid above, but the domain edges (where jax's values are not scipy's:
    gammainc(0, x < 1) is NaN, expn(n, 0) is 1 / n, expi(0) is NaN)."""
    jax = pytest.importorskip("jax")
    jsp = pytest.importorskip("jax.scipy.special")
    fns = {"multigammaln": lambda a: jsp.multigammaln(a, 3), "polygamma": lambda n, x: jsp.polygamma(n.astype(int), x)}
    with jax.enable_x64(True):
        want = jax.jit(lambda cases: {name: fns.get(name, getattr(jsp, name))(*args) for name, args in cases.items()})(
            {name: tuple(a[:len(a) - CASES[name].edges] for a in CASES[name].args) for name in _JAX_NAMES})
        want = {name: np.asarray(w) for name, w in want.items()}
    for name in _JAX_NAMES:
        n = len(CASES[name].want) - CASES[name].edges
        got, w = results64(name)[:n], want[name]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(w), err_msg=name)
        np.testing.assert_allclose(got, w, rtol=1e-12, atol=1e-300, err_msg=name)


@pytest.mark.x64
def test_gamma_family_at_tiny_negative_arguments_and_underflowing_zeta() -> None:
    """Found against JAX: the reflection's |sin(pi x)| reduced x by x - floor(x), which rounds -1e-300 up to 1, so
    gammaln(-1e-300) was inf (log(1e300) = 690.8), gamma -inf; zeta(170, 2) in float32 underflows to 0, where the
    Bernoulli terms' overflowing factors made it NaN (and polygamma(1, inf) NaN, not 0)."""
    from tgfx.scipy import special as sp
    x = np.array([-1e-300, -1e-30, -1e-8, -0.5, -2.5, -100.3, 0.2], np.float64)
    np.testing.assert_allclose(sp.gammaln(tg.asarray(x)).numpy(), [math.lgamma(v) for v in x], rtol=1e-13)
    np.testing.assert_allclose(sp.gamma(tg.asarray(x[1:-2])).numpy(), [math.gamma(v) for v in x[1:-2]], rtol=1e-13)
    x32 = np.array([-1e-30, -1e-8, -1e-3, -2.5], np.float32)
    np.testing.assert_allclose(sp.gammaln(tg.asarray(x32)).numpy(), [math.lgamma(float(v)) for v in x32], rtol=2e-6)
    np.testing.assert_array_equal(sp.zeta(tg.asarray(np.array([170.0, 1e4], np.float32)), 2.0).numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(sp.polygamma(1, tg.asarray(np.array([np.inf], np.float32))).numpy(), [0.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])   # (float64: the x64 mode, by the conftest)
def test_polygamma_below_zero_by_reflection(dtype: type) -> None:
    """zeta(n + 1, x)'s ten terms then Euler-Maclaurin from x + 9 fell apart below about -8 (polygamma(1, -7.5) was
    6.78, not 9.74; polygamma(2, -7.5) off by 3000x): a static order reflects, psi^(n)(x) = (-1)^n psi^(n)(1 - x) -
    pi d^n/dx^n cot(pi x). The negative integers stay poles, as zeta's."""
    ss = pytest.importorskip("scipy.special")
    from tgfx.scipy import special as sp
    x = np.array([-7.5, -11.625, -0.5, -1.5, -0.3, -3.7, -20.2, -1e-3, -5.05, 0.3, 4.0], dtype)
    for n in (1, 2, 3):
        got = sp.polygamma(n, tg.asarray(x)).numpy()
        np.testing.assert_allclose(got, ss.polygamma(n, x.astype(np.float64)), rtol=2e-6 if dtype == np.float32
                                   else 1e-12)
    assert np.isinf(sp.polygamma(1, tg.asarray(np.array([-2.0], dtype))).numpy()).all()
