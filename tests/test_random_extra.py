"""The rest of jax.random's distributions in tg.random: sample moments against the distributions' own (within a few
standard errors, at fixed keys, so each check passes or fails every run), supports, shapes, dtypes, determinism,
jit and vmap, gradients, errors, the key helpers; and jax.random as the oracle when jax is installed (the discrete
samplers, rejection loops included, count for count; the others to float32 rounding)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tgfx as tg
from tgfx.dtypes import dtypes

R = tg.random
N = 20_000
S = (N,)


def t32(x: object) -> tg.Tensor:
    return tg.asarray(np.asarray(x, np.float32))


def moments(x: np.ndarray, mean: float, var: float, k: float = 6.0) -> None:
    """The sample mean and variance are within k standard errors of the distribution's (the variance's standard
    error from the sample's fourth central moment)."""
    x = np.asarray(x, np.float64).ravel()
    n = x.size
    m, v = x.mean(), x.var()
    assert abs(m - mean) < k * math.sqrt(var / n), (m, mean)
    m4 = np.mean((x - m) ** 4)
    assert abs(v - var) < k * math.sqrt(max(m4 - v * v, 1e-12) / n), (v, var)


G = math.gamma
CONTINUOUS = {  # name: (draw of shape S, mean, variance, lower bound of the support)
    "lognormal": (lambda k: R.lognormal(k, 0.5, S), math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25), 0.0),
    "t": (lambda k: R.t(k, 6.0, S), 0.0, 6 / 4, -math.inf),
    "chisquare": (lambda k: R.chisquare(k, 3.0, S), 3.0, 6.0, 0.0),
    "f": (lambda k: R.f(k, 5.0, 12.0, S), 12 / 10, 2 * 144 * 15 / (5 * 100 * 8), 0.0),
    "weibull_min": (lambda k: R.weibull_min(k, 2.0, 1.5, S), 2 * G(1 + 1 / 1.5),
                    4 * (G(1 + 2 / 1.5) - G(1 + 1 / 1.5) ** 2), 0.0),
    "rayleigh": (lambda k: R.rayleigh(k, 2.0, S), 2 * math.sqrt(math.pi / 2), (4 - math.pi) / 2 * 4, 0.0),
    "pareto": (lambda k: R.pareto(k, 5.0, S), 5 / 4, 5 / (16 * 3), 1.0),
    "maxwell": (lambda k: R.maxwell(k, S), 2 * math.sqrt(2 / math.pi), 3 - 8 / math.pi, 0.0),
    "double_sided_maxwell": (lambda k: R.double_sided_maxwell(k, 1.0, 2.0, S), 1.0, 12.0, -math.inf),
    "triangular": (lambda k: R.triangular(k, 0.0, 0.3, 1.0, S), 1.3 / 3, (1 + 0.09 - 0.3) / 18, 0.0),
    "wald": (lambda k: R.wald(k, 2.0, S), 2.0, 8.0, 0.0),
    "generalized_normal": (lambda k: R.generalized_normal(k, 1.5, S), 0.0, G(3 / 1.5) / G(1 / 1.5), -math.inf),
}
DISCRETE = {  # name: (draw of shape S, mean, variance, dtype)
    "poisson_knuth": (lambda k: R.poisson(k, 3.5, S), 3.5, 3.5, dtypes.int32),
    "poisson_rejection": (lambda k: R.poisson(k, 40.0, S), 40.0, 40.0, dtypes.int32),
    "binomial_inversion": (lambda k: R.binomial(k, 20.0, 0.3, S), 6.0, 4.2, dtypes.float32),
    "binomial_btrs": (lambda k: R.binomial(k, 200.0, 0.7, S), 140.0, 42.0, dtypes.float32),
    "geometric": (lambda k: R.geometric(k, 0.25, S), 4.0, 12.0, dtypes.int32),
    "rademacher": (lambda k: R.rademacher(k, S), 0.0, 1.0, dtypes.int32),
}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_moments(name: str) -> None:
    draw, mean, var, lower = CONTINUOUS[name]
    x = draw(R.key(1))
    assert x.shape == S and x.dtype == dtypes.float32
    x = x.numpy()
    assert np.isfinite(x).all() and (x >= lower).all()
    moments(x, mean, var)
    np.testing.assert_array_equal(draw(R.key(1)).numpy(), x)       # the same key, the same numbers
    assert not np.array_equal(draw(R.key(2)).numpy(), x)


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_discrete_moments(name: str) -> None:
    draw, mean, var, d = DISCRETE[name]
    x = draw(R.key(1))
    assert x.shape == S and x.dtype == d
    x = x.numpy()
    assert (x == np.round(x)).all()
    assert (x >= (-1 if name == "rademacher" else 1 if name == "geometric" else 0)).all()
    moments(x, mean, var)


def test_cauchy_quartiles() -> None:
    """No moments to check: the median is 0 and the quartiles are -1 and 1."""
    x = R.cauchy(R.key(1), S).numpy()
    q = np.quantile(x, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(q, [-1.0, 0.0, 1.0], atol=0.05)
    assert R.cauchy(R.key(1), (2, 3), dtypes.float16).dtype == dtypes.float16


def test_poisson_and_binomial_edges() -> None:
    lam = t32([0.0, 1.0, 9.99, 10.0, 1000.0])
    x = R.poisson(R.key(3), lam, (4000, 5)).numpy()
    assert (x[:, 0] == 0).all()
    np.testing.assert_allclose(x.mean(0)[1:], [1.0, 9.99, 10.0, 1000.0], rtol=0.02)
    assert R.poisson(R.key(3), lam).shape == (5,)
    assert R.poisson(R.key(3), 2.0, (3,), dtypes.int16).dtype == dtypes.int16
    n = t32([0.0, 5.0, 7.9, math.nan, -1.0, math.inf, 12.0, 10.0])
    p = t32([0.5, 1.0, 0.5, 0.5, 0.5, 0.3, math.nan, 0.0])
    y = R.binomial(R.key(4), n, p, (3000, 8)).numpy()
    assert (y[:, 0] == 0).all() and (y[:, 1] == 5).all() and (y[:, 7] == 0).all()
    assert y[:, 2].max() <= 7 and abs(y[:, 2].mean() - 3.5) < 0.15        # n is floored, as numpy's
    assert np.isnan(y[:, 3]).all() and np.isnan(y[:, 4]).all() and np.isnan(y[:, 6]).all()
    assert np.isinf(y[:, 5]).all()


def test_multinomial() -> None:
    p = np.float32([0.1, 0.2, 0.3, 0.4])
    c = R.multinomial(R.key(5), 50.0, t32(p), shape=(4000, 4))
    assert c.shape == (4000, 4) and c.dtype == dtypes.float32
    c = c.numpy()
    assert (c.sum(1) == 50).all() and (c >= 0).all()
    moments(c[:, 3], 20.0, 50 * 0.4 * 0.6)
    batch = R.multinomial(R.key(5), t32([3.0, 300.0]), t32([[0.5, 0.5, 0.0], [0.2, 0.0, 0.8]])).numpy()
    assert batch.shape == (2, 3) and batch.sum(1).tolist() == [3.0, 300.0]
    assert batch[0, 2] == 0 and batch[1, 1] == 0


def test_multivariate_normal() -> None:
    cov = np.float32([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
    mean = np.float32([1.0, -2.0, 0.5])
    for method in ("cholesky", "eigh", "svd"):
        x = R.multivariate_normal(R.key(6), t32(mean), t32(cov), (N,), method=method)
        assert x.shape == (N, 3) and x.dtype == dtypes.float32
        x = x.numpy().astype(np.float64)
        np.testing.assert_allclose(x.mean(0), mean, atol=0.05)
        np.testing.assert_allclose(np.cov(x.T), cov, atol=0.06)
    # batch shapes broadcast: two means against one covariance
    y = R.multivariate_normal(R.key(6), t32([[0.0, 0.0, 0.0], [10.0, 10.0, 10.0]]), t32(cov))
    assert y.shape == (2, 3) and (y.numpy()[1] > 5).all()


def test_orthogonal() -> None:
    for n, m, shape in ((4, None, ()), (5, 3, (2,)), (2, 6, ())):
        q = R.orthogonal(R.key(7), n, shape, m=m)
        cols = n if m is None else m
        assert q.shape == (*shape, n, cols)
        q = q.numpy().astype(np.float64)
        small = min(n, cols)
        gram = np.swapaxes(q, -1, -2) @ q if n >= cols else q @ np.swapaxes(q, -1, -2)
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(small), gram.shape), atol=1e-5)


def test_ball() -> None:
    x = R.ball(R.key(8), 3, 2.0, (N,))
    assert x.shape == (N, 3)
    r = np.linalg.norm(x.numpy().astype(np.float64), axis=1)
    assert (r <= 1).all()
    moments(r, 3 / 4, 3 / 5 - 9 / 16)                     # P(r < s) = s^3 for points uniform in the 3-ball
    l1 = np.abs(R.ball(R.key(9), 3, 1.0, (N,)).numpy()).sum(1)      # the unit ball of the 1-norm, an octahedron
    assert (l1 <= 1).all()
    moments(l1, 3 / 4, 3 / 5 - 9 / 16)                    # its volume grows as s^3 too


def test_shapes_dtypes_and_broadcasting() -> None:
    k = R.key(10)
    assert R.lognormal(k).shape == () and R.lognormal(k, t32([0.1, 1.0])).shape == (2,)
    assert R.pareto(k, t32([[2.0], [5.0]]), (2, 3)).shape == (2, 3)
    assert R.triangular(k, 0.0, t32([0.2, 0.5]), 1.0).shape == (2,)
    assert R.weibull_min(k, t32([1.0, 2.0]), 1.0).shape == (2,)     # JAX: the parameters' shape joins `shape`
    assert R.double_sided_maxwell(k, t32([0.0, 1.0]), 1.0, (4,)).shape == (4, 2)
    assert R.geometric(k, t32([0.1, 0.9]), dtype=dtypes.int16).dtype == dtypes.int16
    assert R.rademacher(k, (3,), dtypes.float32).numpy().tolist() in ([a, b, c] for a in (-1, 1) for b in (-1, 1)
                                                                      for c in (-1, 1))
    for x, d in ((R.lognormal(k, 0.5, (4,), dtypes.float16), dtypes.float16),
                 (R.maxwell(k, (4,), dtypes.bfloat16), dtypes.bfloat16)):
        assert x.dtype == d and np.isfinite(x.astype(dtypes.float32).numpy()).all()


def test_jit_and_vmap_match_eager() -> None:
    def draws(k: tg.Tensor, a: tg.Tensor) -> tuple[tg.Tensor, ...]:
        k1, k2, k3, k4 = R.split(k, 4)
        return (R.poisson(k1, a * 4, (6,)), R.binomial(k2, a * 10, 0.4, (5,)), R.lognormal(k3, a, (3,)),
                R.wald(k4, a, (4,)), R.geometric(k1, a / 4, (3,)))
    f = tg.jit(draws)
    for seed in (0, 1):
        k, a = R.key(seed), t32(1.5 + seed)
        for got, want in zip(f(k, a), draws(k, a), strict=True):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert f.trace_count == 1
    keys = R.split(R.key(11), 3)
    batched = tg.vmap(lambda kk: R.poisson(kk, 20.0, (4,)))(keys).numpy()
    np.testing.assert_array_equal(batched, np.stack([R.poisson(keys[i], 20.0, (4,)).numpy() for i in range(3)]))


def test_gradients() -> None:
    """lognormal's draw is exp(sigma z) for the normal z of the same key: its gradient in sigma is z exp(sigma z);
    t's gradient in df flows through gamma's implicit gradient (finite, and small for large df)."""
    k = R.key(12)
    z = R.normal(k, (50,)).numpy().astype(np.float64)
    g = tg.grad(lambda s: R.lognormal(k, s, (50,)).sum())(t32(0.7)).numpy()
    np.testing.assert_allclose(g, (z * np.exp(0.7 * z)).sum(), rtol=1e-5)
    gt = tg.grad(lambda df: R.t(k, df, (50,)).sum())(t32(30.0)).numpy()
    assert np.isfinite(gt) and abs(gt) < 1.0
    gw = tg.grad(lambda s: R.weibull_min(k, s, 2.0, (50,)).sum())(t32(3.0)).numpy()
    np.testing.assert_allclose(gw, R.weibull_min(k, 1.0, 2.0, (50,)).numpy().sum(), rtol=1e-5)   # linear in scale


def test_key_helpers() -> None:
    k = R.key(13)
    keys = R.split(k, 3)
    assert R.key_data(k).tolist() == k.tolist() and R.key_data(keys).shape == (3, 2)
    np.testing.assert_array_equal(R.wrap_key_data(R.key_data(keys)).numpy(), keys.numpy())
    assert R.wrap_key_data(np.array([0, 7], np.uint32), impl="threefry2x32").tolist() == [0, 7]
    np.testing.assert_array_equal(R.normal(R.clone(k), (3,)).numpy(), R.normal(k, (3,)).numpy())
    with pytest.raises(TypeError, match=r"key_data: `keys` must be uint32 key data of shape \(..., 2\).*int32\[3\]"):
        R.key_data(tg.asarray(np.int32([1, 2, 3])))
    with pytest.raises(ValueError, match="wrap_key_data: only the 'threefry2x32' implementation"):
        R.wrap_key_data(R.key_data(k), impl="rbg")
    with pytest.raises(TypeError, match="clone: `key` must be uint32"):
        R.clone(5)


def test_errors() -> None:
    k = R.key(0)
    with pytest.raises(TypeError, match="poisson: `dtype` must be an integer type, got float32"):
        R.poisson(k, 1.0, (2,), dtypes.float32)
    with pytest.raises(TypeError, match="binomial: `dtype` must be a float type"):
        R.binomial(k, 5.0, 0.5, (2,), dtypes.int32)
    with pytest.raises(TypeError, match="rademacher: `dtype` must be a signed integer or float type"):
        R.rademacher(k, (2,), dtypes.uint8)
    with pytest.raises(ValueError, match=r"lognormal: `sigma` of shape \(3,\) does not broadcast to the result shape"):
        R.lognormal(k, t32([1.0, 2.0, 3.0]), (2,))
    with pytest.raises(ValueError, match="triangular: the parameters do not broadcast together"):
        R.triangular(k, t32([0.0, 0.1]), 0.5, t32([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"multivariate_normal: `cov` must have shape \(..., 2, 2\)"):
        R.multivariate_normal(k, t32([0.0, 0.0]), t32(np.eye(3)))
    with pytest.raises(ValueError, match="multivariate_normal: `method` must be one of"):
        R.multivariate_normal(k, t32([0.0]), t32([[1.0]]), method="qr")
    with pytest.raises(ValueError, match=r"multivariate_normal: the batch shape .* does not broadcast to `shape`"):
        R.multivariate_normal(k, t32(np.zeros((3, 2))), t32(np.eye(2)), (4,))
    with pytest.raises(TypeError, match="orthogonal: `n` must be a non-negative int"):
        R.orthogonal(k, 2.5)
    with pytest.raises(TypeError, match="ball: the dimension `d` must be a non-negative int"):
        R.ball(k, -1)
    with pytest.raises(ValueError, match="multinomial: `p` must have at least one axis"):
        R.multinomial(k, 5.0, 0.5)
    with pytest.raises(ValueError, match=r"multinomial: `p` of shape \(3,\) does not broadcast to `shape` \(2, 4\)"):
        R.multinomial(k, 5.0, t32([0.2, 0.3, 0.5]), shape=(2, 4))
    with pytest.raises(TypeError, match="cauchy: `key` must be a uint32"):
        R.cauchy(0, (2,))


# ---- jax.random as the oracle ----
def _same(ours: tg.Tensor, theirs: object) -> None:
    a, b = ours.numpy(), np.asarray(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


def _counts(ours: tg.Tensor, theirs: object, identical: float = 0.999) -> None:
    """Counts from a loop that compares logs (Knuth's product, PTRS, BTRS, inversion): identical except where the
    last bit of log or lgamma, which can differ from XLA's, decides a close call (one in 20,000 at most here)."""
    a, b = ours.numpy(), np.asarray(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b)) if a.dtype.kind == "f" else None
    assert np.mean((a == b) | (a != a)) >= identical, np.mean(a == b)


def _close(ours: tg.Tensor, theirs: object, exact: float, rtol: float) -> None:
    """Equal to float32 rounding (log, pow and erfinv's last bits differ from XLA's), most values exactly."""
    a, b = ours.numpy(), np.asarray(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=2e-6 if rtol else 0.0)
    assert np.mean(a == b) >= exact, np.mean(a == b)


@pytest.mark.parametrize("seed", [0, 3])
def test_jax_discrete(seed: int) -> None:
    """The loops walk JAX's key chains, so the counts are JAX's: a different key sequence would change most of
    them, not one in many thousands."""
    jr = pytest.importorskip("jax").random
    k, jk = R.key(seed), jr.PRNGKey(seed)
    for lam in (3.5, 40.0):
        _counts(R.poisson(k, lam, S), jr.poisson(jk, lam, S))
    lam = np.float32([0, 1, 9.99, 10, 1000, np.nan])
    _counts(R.poisson(k, t32(lam), (4000, 6)), jr.poisson(jk, lam, (4000, 6)))
    for n, p in ((20.0, 0.3), (200.0, 0.7)):
        _counts(R.binomial(k, n, p, S), jr.binomial(jk, n, p, S))
    n, p = np.float32([0, 5, 7.9, np.nan, -1, np.inf, 12, 10]), np.float32([0.5, 1, 0.5, 0.5, 0.5, 0.3, np.nan, 0])
    _counts(R.binomial(k, t32(n), t32(p), (3000, 8)), jr.binomial(jk, n, p, (3000, 8)))
    p4 = np.float32([0.1, 0.2, 0.3, 0.4])
    _counts(R.multinomial(k, 50.0, t32(p4), shape=(4000, 4)), jr.multinomial(jk, 50.0, p4, shape=(4000, 4)))
    _counts(R.geometric(k, 0.25, S), jr.geometric(jk, 0.25, S))
    _same(R.rademacher(k, S), jr.rademacher(jk, S))


CONTINUOUS_JAX = (  # (name, arguments after the key, share of values identical, rtol)
    ("cauchy", (S,), 1.0, 0.0), ("triangular", (0.0, 0.3, 1.0, S), 1.0, 0.0), ("lognormal", (0.5, S), 0.8, 2e-6),
    ("weibull_min", (2.0, 1.5, S), 0.9, 2e-6), ("rayleigh", (2.0, S), 0.9, 2e-6), ("pareto", (5.0, S), 0.8, 2e-6),
    ("maxwell", (S,), 0.8, 2e-6), ("double_sided_maxwell", (1.0, 2.0, S), 0.8, 2e-5), ("wald", (2.0, S), 0.95, 2e-5),
    ("t", (6.0, S), 0.8, 2e-6), ("chisquare", (3.0, S), 0.8, 3e-6), ("f", (5.0, 12.0, S), 0.3, 3e-6),
    ("generalized_normal", (1.5, S), 0.5, 3e-6), ("ball", (3, 2.0, S), 0.2, 3e-6),
)


@pytest.mark.parametrize("seed", [0, 3])
def test_jax_continuous(seed: int) -> None:
    """cauchy and triangular are arithmetic and XLA's tan, bit for bit; the rest agree to the rounding of log, pow
    and erfinv. JAX's draws are taken in one jitted function: one XLA compile instead of fourteen."""
    jax = pytest.importorskip("jax")
    jr = jax.random
    theirs = jax.jit(lambda jk: [getattr(jr, name)(jk, *args) for name, args, _, _ in CONTINUOUS_JAX])(
        jr.PRNGKey(seed))
    k = R.key(seed)
    for (name, args, exact, rtol), want in zip(CONTINUOUS_JAX, theirs, strict=True):
        _close(getattr(R, name)(k, *args), want, exact=exact, rtol=rtol)


def test_jax_matrices() -> None:
    """The Cholesky factor and the sign-fixed QR are unique, so those draws are JAX's to rounding; eigh and svd
    factors are unique only up to the signs of their columns, which differ between LAPACK and tgfx."""
    jr = pytest.importorskip("jax").random
    k, jk = R.key(1), jr.PRNGKey(1)
    cov = np.float32([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
    mean = np.float32([1.0, -2.0, 0.5])
    np.testing.assert_allclose(R.multivariate_normal(k, t32(mean), t32(cov), (N,)).numpy(),
                               np.asarray(jr.multivariate_normal(jk, mean, cov, (N,))), rtol=1e-5, atol=1e-5)
    for n, m, shape in ((4, None, ()), (5, 3, (2,)), (2, 6, ())):
        np.testing.assert_allclose(R.orthogonal(k, n, shape, m=m).numpy(), np.asarray(jr.orthogonal(jk, n, shape, m=m)),
                                   atol=1e-6)


def test_jax_key_helpers() -> None:
    jr = pytest.importorskip("jax").random
    for seed in (0, 42):
        assert R.key_data(R.key(seed)).tolist() == np.asarray(jr.key_data(jr.key(seed))).tolist()
