"""tg.random's distributions beyond uniform and normal: shapes, dtypes and errors; each distribution against scipy's
(Kolmogorov-Smirnov at fixed keys, so deterministic); gamma's implicit gradient against the incomplete gamma
function; compile counts of eager draws; and jax.random as the oracle when jax is installed (bit for bit where the
algorithm has no transcendental function, else to float32 rounding)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

import tgfx as tg
from tgfx.dtypes import dtypes

R = tg.random
N = 20_000


def t32(x: object) -> tg.Tensor:
    return tg.asarray(np.asarray(x, np.float32))


def ks(x: np.ndarray, dist: object) -> None:
    """The sample follows `dist`: a KS p-value that a fixed key either passes or fails every run (the threshold
    leaves a wrong distribution no chance at N = 20,000: a shift of 0.02 standard deviations already fails)."""
    res = stats.kstest(np.asarray(x, np.float64).ravel(), dist.cdf)
    assert res.pvalue > 1e-3, res


# ---- shapes, dtypes and the distributions themselves ----
SIMPLE = {"exponential": stats.expon(), "laplace": stats.laplace(), "logistic": stats.logistic(),
          "gumbel": stats.gumbel_r()}


@pytest.mark.parametrize("name", sorted(SIMPLE))
def test_simple_distributions(name: str) -> None:
    f = getattr(R, name)
    ks(f(R.key(1), (N,)).numpy(), SIMPLE[name])
    for d in (dtypes.float32, dtypes.float16, dtypes.bfloat16):
        x = f(R.key(2), (2, 3), d)
        assert x.shape == (2, 3) and x.dtype == d
        assert np.isfinite(x.astype(dtypes.float32).numpy()).all()
    assert f(R.key(3)).shape == ()
    with pytest.raises(TypeError, match=rf"{name}: `dtype` must be a float type"):
        f(R.key(0), (2,), dtypes.int32)


def test_gumbel_high_mode() -> None:
    ks(R.gumbel(R.key(4), (N,), mode="high").numpy(), stats.gumbel_r())
    with pytest.raises(ValueError, match="gumbel: `mode`"):
        R.gumbel(R.key(0), (2,), mode="highest")


def test_truncated_normal() -> None:
    x = R.truncated_normal(R.key(5), -1.5, 2.0, (N,)).numpy()
    assert x.min() > -1.5 and x.max() < 2.0
    ks(x, stats.truncnorm(-1.5, 2.0))
    # array bounds broadcast; the result takes their shape, every column within its own open interval
    lo, hi = np.float32([-3.0, 0.0, 1.0]), np.float32([-2.0, 0.5, 8.0])
    y = R.truncated_normal(R.key(6), t32(lo), t32(hi)).numpy()
    assert y.shape == (3,)
    z = R.truncated_normal(R.key(6), t32(lo), t32(hi), (1000, 3)).numpy()
    assert (z > lo).all() and (z < hi).all()
    ks(z[:, 2], stats.truncnorm(1.0, 8.0))
    # a narrow interval stays open: every value strictly inside (the clip to nextafter of the bounds)
    top = float(np.float32(0.25) + 3 * np.spacing(np.float32(0.25)))
    w = R.truncated_normal(R.key(7), 0.25, top, (100,)).numpy()
    assert (w > np.float32(0.25)).all() and (w < np.float32(top)).all()
    assert R.truncated_normal(R.key(8), -1.0, 1.0, (4,), dtypes.bfloat16).dtype == dtypes.bfloat16
    with pytest.raises(ValueError, match="truncated_normal: the parameters do not broadcast"):
        R.truncated_normal(R.key(0), t32([0.0, 1.0]), t32([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="truncated_normal: `lower` of shape \\(3,\\) does not broadcast"):
        R.truncated_normal(R.key(0), t32([0.0, 1.0, 2.0]), 3.0, (2,))


@pytest.mark.parametrize("a", [0.3, 1.0, 4.5, 50.0])
def test_gamma_distribution(a: float) -> None:
    x = R.gamma(R.key(9), a, (N,)).numpy()
    assert (x >= 0).all()
    ks(x, stats.gamma(a))
    # loggamma with the same key is the log of the same samples
    np.testing.assert_allclose(np.exp(R.loggamma(R.key(9), a, (2000,)).numpy()), x[:2000], rtol=2e-5, atol=1e-30)


def test_gamma_shapes_and_edges() -> None:
    a = t32([[0.5], [2.0], [9.0]])
    x = R.gamma(R.key(10), a, (3, 1000)).numpy()
    assert x.shape == (3, 1000)
    for row, ai in zip(x, (0.5, 2.0, 9.0), strict=True):
        assert abs(row.mean() - ai) < 6 * math.sqrt(ai / row.size)   # the variance of gamma(a) is a
    assert R.gamma(R.key(10), a).shape == (3, 1)
    assert R.gamma(R.key(10), 2.0, (0, 4)).shape == (0, 4)
    edge = R.gamma(R.key(11), t32([0.0, -1.0, np.nan, 1e-4])).numpy()
    assert edge[0] == 0 and np.isnan(edge[1]) and np.isnan(edge[2]) and edge[3] >= 0
    assert np.isfinite(R.loggamma(R.key(11), 1e-3, (100,)).numpy()).all()   # where gamma underflows to 0
    assert R.gamma(R.key(0), 2.0, (4,), dtypes.bfloat16).dtype == dtypes.bfloat16
    with pytest.raises(ValueError, match="gamma: `a` of shape \\(3, 1\\) does not broadcast to the result shape"):
        R.gamma(R.key(0), a, (2,))
    with pytest.raises(TypeError, match="gamma: `dtype` must be a float type"):
        R.gamma(R.key(0), 2.0, (2,), dtypes.int32)


def test_beta_and_dirichlet() -> None:
    for a, b in ((2.0, 0.5), (0.3, 0.3)):
        x = R.beta(R.key(12), a, b, (N,)).numpy()
        assert (x >= 0).all() and (x <= 1).all()
        ks(x, stats.beta(a, b))
    assert R.beta(R.key(12), t32([1.0, 2.0]), 3.0).shape == (2,)
    alpha = np.float32([0.5, 1.0, 3.0])
    w = R.dirichlet(R.key(13), t32(alpha), (N,)).numpy()
    assert w.shape == (N, 3)
    np.testing.assert_allclose(w.sum(-1), 1, rtol=1e-5)
    for i in range(3):   # a Dirichlet's marginals are beta(alpha_i, sum - alpha_i)
        ks(w[:, i], stats.beta(alpha[i], alpha.sum() - alpha[i]))
    batch = R.dirichlet(R.key(13), t32(np.ones((4, 2, 5))))
    assert batch.shape == (4, 2, 5)
    assert R.dirichlet(R.key(13), t32(np.ones((2, 5))), (3, 2)).shape == (3, 2, 5)
    with pytest.raises(ValueError, match="dirichlet: `alpha` must be an array of at least one axis"):
        R.dirichlet(R.key(0), 1.0)
    with pytest.raises(ValueError, match="dirichlet: `alpha`'s leading shape \\(2,\\)"):
        R.dirichlet(R.key(0), t32(np.ones((2, 5))), (3,))


def test_categorical() -> None:
    p = np.array([0.1, 0.2, 0.7])
    idx = R.categorical(R.key(14), t32(np.log(p)), shape=(N,)).numpy()
    assert idx.dtype == np.int32 and idx.shape == (N,)
    counts = np.bincount(idx, minlength=3)
    assert (np.abs(counts - N * p) < 6 * np.sqrt(N * p * (1 - p))).all(), counts
    logits = t32(np.log([[0.5, 0.5, 1e-9], [1e-9, 1e-9, 1.0]]))
    assert R.categorical(R.key(15), logits).shape == (2,)
    rows = R.categorical(R.key(15), logits, shape=(500, 2)).numpy()
    assert (rows[:, 1] == 2).all() and set(rows[:, 0].tolist()) == {0, 1}
    cols = R.categorical(R.key(15), logits.T, axis=0, shape=(500, 2)).numpy()     # the categories along axis 0
    assert (cols[:, 1] == 2).all()
    # without replacement: distinct categories per distribution, the likely ones first
    top = R.categorical(R.key(16), t32(np.log([[0.01, 0.01, 0.97, 0.01]] * 3)), shape=(4, 3), replace=False).numpy()
    assert top.shape == (4, 3) and (np.sort(top, axis=0) == np.arange(4)[:, None]).all()
    with pytest.raises(ValueError, match="categorical: cannot draw 5 samples without replacement from 4"):
        R.categorical(R.key(0), t32(np.zeros((3, 4))), shape=(5, 3), replace=False)
    with pytest.raises(TypeError, match="categorical: `logits` must be floats"):
        R.categorical(R.key(0), tg.asarray(np.zeros(3, np.int32)))
    with pytest.raises(ValueError, match="categorical: `shape` \\(4,\\) must end in axes"):
        R.categorical(R.key(0), t32(np.zeros((3, 5))), shape=(4,))


def test_choice() -> None:
    k = R.key(17)
    x = R.choice(k, 10, (N,)).numpy()
    assert x.dtype == np.int32 and x.min() >= 0 and x.max() < 10
    assert R.choice(k, 10).shape == ()
    p = np.array([0.5, 0.0, 0.25, 0.25])
    y = R.choice(k, 4, (N,), p=t32(p)).numpy()
    counts = np.bincount(y, minlength=4)
    assert counts[1] == 0 and (np.abs(counts - N * p) < 6 * np.sqrt(N * p * (1 - p) + 1e-9)).all(), counts
    # unnormalised weights are fine
    np.testing.assert_array_equal(R.choice(k, 4, (50,), p=t32(p * 8)).numpy(), R.choice(k, 4, (50,), p=t32(p)).numpy())
    z = R.choice(k, 100, (10, 5), replace=False).numpy()
    assert z.shape == (10, 5) and len(set(z.ravel().tolist())) == 50
    w = R.choice(k, 6, (4,), replace=False, p=t32([0.1, 0.0, 0.3, 0.2, 0.2, 0.2])).numpy()
    assert len(set(w.tolist())) == 4 and 1 not in w.tolist()
    arr = np.arange(24, dtype=np.float32).reshape(4, 6)
    rows = R.choice(k, t32(arr), (3,)).numpy()
    assert rows.shape == (3, 6) and all(r.tolist() in arr.tolist() for r in rows)
    cols = R.choice(k, t32(arr), (2, 2), replace=False, axis=1).numpy()
    assert cols.shape == (4, 2, 2) and len(set(cols[0].ravel().tolist())) == 4
    assert R.choice(k, 5, (0,)).shape == (0,)
    with pytest.raises(ValueError, match="choice: cannot take a sample of 11 .* without replacement from a "
                                         "population of 10"):
        R.choice(k, 10, (11,), replace=False)
    with pytest.raises(ValueError, match="choice: `p` must be None or a 1-d array with one probability per entry "
                                         "of `a` along axis 0 \\(4\\), got shape \\(3,\\)"):
        R.choice(k, 4, (2,), p=t32([0.2, 0.3, 0.5]))
    with pytest.raises(ValueError, match="choice: `a` must have at least one entry"):
        R.choice(k, 0, (2,))


# ---- gradients ----
def _implicit_dx_da(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dx/da for x = P^-1(u; a) at fixed u: -(dP/da) / (dP/dx), dP/da by a central difference in float64."""
    h = 1e-6 * np.maximum(a, 1)
    dp_da = (special.gammainc(a + h, x) - special.gammainc(a - h, x)) / (2 * h)
    dp_dx = np.exp((a - 1) * np.log(x) - x - special.gammaln(a))
    return -dp_da / dp_dx


def test_random_gamma_grad_against_incomplete_gamma() -> None:
    from tgfx._random_dists import random_gamma_grad
    a = np.array([0.05, 0.3, 0.9, 1.0, 2.5, 2.5, 2.5, 7.0, 30.0, 30.0, 200.0])
    x = np.array([0.01, 0.2, 3.0, 1.0, 0.5, 2.5, 9.0, 6.0, 25.0, 40.0, 210.0])   # series and continued fraction
    got = random_gamma_grad(t32(a), t32(x)).numpy()
    np.testing.assert_allclose(got, _implicit_dx_da(a, x), rtol=2e-4)
    edges = random_gamma_grad(t32([1.0, -1.0, 2.0]), t32([0.0, 1.0, -1.0])).numpy()
    assert edges[0] == 0 and np.isnan(edges[1:]).all()


def test_gamma_gradient_is_the_implicit_one() -> None:
    a = np.float32([0.2, 1.0, 3.0, 40.0])
    av = t32(a)
    x = R.gamma(R.key(18), av).numpy().astype(np.float64)
    g = tg.grad(lambda a: R.gamma(R.key(18), a).sum())(av).numpy()
    np.testing.assert_allclose(g, _implicit_dx_da(a.astype(np.float64), x), rtol=1e-3)
    # loggamma's is d log x / da = (dx/da) / x; forward mode agrees with reverse mode
    gl = tg.grad(lambda a: R.loggamma(R.key(18), a).sum())(av).numpy()
    np.testing.assert_allclose(gl, g / x, rtol=1e-4)
    _, tangent = tg.jvp(lambda a: R.gamma(R.key(18), a), (av,), (t32(np.ones(4)),))
    np.testing.assert_allclose(tangent.numpy(), g, rtol=1e-6)
    # the derivative of dx/da is not implemented: second derivatives say so with NaN rather than a wrong number
    assert np.isnan(tg.grad(tg.grad(lambda a: R.gamma(R.key(18), a, (3,)).sum()))(t32(2.0)).numpy())


def test_beta_and_dirichlet_gradients_flow() -> None:
    # E[beta(a, b)] = a / (a + b): the average pathwise gradient of the mean estimates d/da of it, b / (a + b)^2
    a, b = 2.0, 3.0
    ga, gb = tg.grad(lambda a, b: R.beta(R.key(19), a, b, (N,)).mean(), argnums=(0, 1))(t32(a), t32(b))
    assert abs(float(ga.numpy()) - b / (a + b) ** 2) < 0.01 and abs(float(gb.numpy()) + a / (a + b) ** 2) < 0.01
    alpha = np.float32([1.0, 2.0, 3.0])
    g = tg.grad(lambda al: R.dirichlet(R.key(20), al, (N,))[:, 0].mean())(t32(alpha)).numpy()
    s = alpha.sum()
    np.testing.assert_allclose(g, [(s - alpha[0]) / s**2, -alpha[0] / s**2, -alpha[0] / s**2], atol=0.01)
    jac = tg.jacrev(lambda a: R.beta(R.key(19), a, 2.0))(t32([0.5, 2.0])).numpy()
    assert jac[0, 1] == 0 and jac[1, 0] == 0 and (np.diag(jac) > 0).all()


# ---- compiled once, traced under jit ----
DRAWS = {
    "exponential": lambda k: R.exponential(k, (8,)), "laplace": lambda k: R.laplace(k, (8,)),
    "logistic": lambda k: R.logistic(k, (8,)), "gumbel": lambda k: R.gumbel(k, (8,)),
    "truncated_normal": lambda k: R.truncated_normal(k, -1.0, 2.0, (8,)),
    "gamma": lambda k: R.gamma(k, 2.5, (8,)), "loggamma": lambda k: R.loggamma(k, 0.5, (8,)),
    "beta": lambda k: R.beta(k, 0.5, 2.0, (8,)), "dirichlet": lambda k: R.dirichlet(k, t32([1.0, 2.0]), (4,)),
    "categorical": lambda k: R.categorical(k, t32(np.zeros((3, 4)))),
    "choice": lambda k: R.choice(k, 10, (4,), p=t32(np.ones(10))),
    "choice_noreplace": lambda k: R.choice(k, 10, (4,), replace=False),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_eager_draw_compiles_once(name: str) -> None:
    """A second eager call with a new key (and a new scalar parameter) replays the compiled draw: no trace and no
    compile."""
    keys = [R.key(s).block_until_ready() for s in (30, 31)]
    first = DRAWS[name](keys[0]).numpy()
    tg.counters.reset()
    second = DRAWS[name](keys[1]).numpy()
    assert (tg.counters.compile_count, tg.counters.trace_count) == (0, 0)
    assert not np.array_equal(first, second)


def test_new_parameter_values_reuse_the_program() -> None:
    k = R.key(32).block_until_ready()
    R.gamma(k, 2.5, (8,)).numpy()
    R.truncated_normal(k, -1.0, 2.0, (8,)).numpy()
    tg.counters.reset()
    R.gamma(k, 3.5, (8,)).numpy()
    R.truncated_normal(k, -0.5, 3.0, (8,)).numpy()
    assert (tg.counters.compile_count, tg.counters.trace_count) == (0, 0)


def test_jit_traces_once_and_matches_eager() -> None:
    def draws(k: tg.Tensor, a: tg.Tensor) -> tuple[tg.Tensor, ...]:
        k1, k2, k3 = R.split(k, 3)
        return (R.gamma(k1, a, (6,)), R.truncated_normal(k2, -a, a, (5,)), R.categorical(k3, a * t32(np.arange(4))),
                R.choice(k, 7, (3,), replace=False), R.exponential(k2, (2,)))
    f = tg.jit(draws)
    for seed in (0, 1):
        k, a = R.key(seed), t32(1.5 + seed)
        for got, want in zip(f(k, a), draws(k, a), strict=True):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert f.trace_count == 1


# ---- jax.random as the oracle ----
@pytest.fixture(scope="module")
def jr():  # noqa: ANN201
    return pytest.importorskip("jax").random


def _ulps(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.abs(np.asarray(x, np.float32).view(np.int32).astype(np.int64) - np.asarray(y, np.float32).view(np.int32))


def _close(x: np.ndarray, y: np.ndarray, exact: float = 0.8, atol: float = 2e-6, rtol: float = 2e-6) -> None:
    """Equal to float32 rounding (the last bits of log, log1p and pow differ from XLA's), most values exactly."""
    np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
    assert np.mean(x == y) >= exact, np.mean(x == y)


@pytest.mark.parametrize("seed", [0, 1, 42])
def test_jax_simple(jr, seed: int) -> None:  # noqa: ANN001
    jk, k = jr.PRNGKey(seed), R.key(seed)
    for name in sorted(SIMPLE):
        _close(getattr(R, name)(k, (5000,)).numpy(), np.asarray(getattr(jr, name)(jk, (5000,))))
        for d in ("float16", "bfloat16"):
            x = getattr(R, name)(k, (500,), d).astype(dtypes.float32).numpy()
            y = np.asarray(getattr(jr, name)(jk, (500,), d)).astype(np.float32)
            np.testing.assert_allclose(x, y, rtol=0.02, atol=0.08)   # a few 16-bit ulp: XLA's 16-bit log
    _close(R.gumbel(k, (5000,), mode="high").numpy(), np.asarray(jr.gumbel(jk, (5000,), mode="high")), exact=0.7)


@pytest.mark.parametrize("seed", [0, 7])
def test_jax_truncated_normal(jr, seed: int) -> None:  # noqa: ANN001
    """erf is XLA's float32 rational function, bit for bit; the values differ only by erfinv's log1p, as normal's."""
    jk, k = jr.PRNGKey(seed), R.key(seed)
    x, y = R.truncated_normal(k, -2.0, 1.5, (5000,)).numpy(), np.asarray(jr.truncated_normal(jk, -2.0, 1.5, (5000,)))
    assert _ulps(x, y).max() <= 4 and np.mean(x == y) > 0.97
    lo, hi = np.float32([-3, -1, 0.5, 2]), np.float32([-2, 1, 3, 10])
    x = R.truncated_normal(k, t32(lo), t32(hi), (500, 4)).numpy()
    assert _ulps(x, np.asarray(jr.truncated_normal(jk, lo, hi, (500, 4)))).max() <= 4
    for d in ("float16", "bfloat16"):
        np.testing.assert_array_equal(R.truncated_normal(k, -1.0, 2.0, (500,), d).astype(dtypes.float32).numpy(),
                                      np.asarray(jr.truncated_normal(jk, -1.0, 2.0, (500,), d)).astype(np.float32))


def test_jax_erf_float32(jr) -> None:  # noqa: ANN001
    import jax

    from tgfx._random_dists import _erf
    x = np.concatenate([np.linspace(-5, 5, 20001), [0.0, -0.0, 3.8325, 3.83251, -4.0, 1e-30]]).astype(np.float32)
    np.testing.assert_array_equal(_erf(t32(x)).numpy(), np.asarray(jax.lax.erf(x)))


@pytest.mark.parametrize("seed", [0, 1])
def test_jax_gamma_family(jr, seed: int) -> None:  # noqa: ANN001
    """Every element walks JAX's own key sequence through the rejection loop, so samples agree to rounding; a
    different acceptance anywhere would show as a difference of order 1."""
    jk, k = jr.PRNGKey(seed), R.key(seed)
    for a in (0.3, 1.0, 2.5, 30.0):
        _close(R.gamma(k, a, (3000,)).numpy(), np.asarray(jr.gamma(jk, a, (3000,))), exact=0.8, rtol=3e-6)
        _close(R.loggamma(k, a, (3000,)).numpy(), np.asarray(jr.loggamma(jk, a, (3000,))), exact=0.75, atol=3e-6)
    av = np.float32([0.1, 0.5, 1, 2, 7, 100])
    _close(R.gamma(k, t32(av), (3, 6)).numpy(), np.asarray(jr.gamma(jk, av, (3, 6))), rtol=3e-6)
    _close(R.beta(k, 2.0, 0.5, (3000,)).numpy(), np.asarray(jr.beta(jk, 2.0, 0.5, (3000,))), exact=0.9)
    al = np.float32([0.5, 1, 3])
    _close(R.dirichlet(k, t32(al), (2000,)).numpy(), np.asarray(jr.dirichlet(jk, al, (2000,))), exact=0.6)
    for d in ("float16", "bfloat16"):
        np.testing.assert_array_equal(R.gamma(k, 2.0, (500,), d).astype(dtypes.float32).numpy(),
                                      np.asarray(jr.gamma(jk, 2.0, (500,), d)).astype(np.float32))


def test_jax_gamma_gradients(jr) -> None:  # noqa: ANN001
    import jax
    av = np.float32([0.2, 0.9, 1.0, 2.5, 8.0, 50.0])
    ours = tg.grad(lambda a: R.gamma(R.key(0), a, (4, 6)).sum())(t32(av)).numpy()
    np.testing.assert_allclose(ours, np.asarray(jax.grad(lambda a: jr.gamma(jr.PRNGKey(0), a, (4, 6)).sum())(av)),
                               rtol=1e-5)
    ours = tg.grad(lambda a, b: R.beta(R.key(0), a, b, (100,)).sum(), argnums=(0, 1))(t32(2.0), t32(0.5))
    theirs = jax.grad(lambda a, b: jr.beta(jr.PRNGKey(0), a, b, (100,)).sum(), argnums=(0, 1))(np.float32(2.0),
                                                                                           np.float32(0.5))
    np.testing.assert_allclose([float(g.numpy()) for g in ours], [float(g) for g in theirs], rtol=1e-5)
    w = np.float32([1, 2, 3])
    ours = tg.grad(lambda al: (R.dirichlet(R.key(0), al, (50,)) * t32(w)).sum())(t32(w)).numpy()
    theirs = jax.grad(lambda al: (jr.dirichlet(jr.PRNGKey(0), al, (50,)) * w).sum())(w)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_jax_categorical_and_choice(jr, seed: int) -> None:  # noqa: ANN001
    """Indices bit for bit: the gumbel noise agrees to rounding and an argmax or a cumulative sum only differs on a
    near tie, which these keys do not have."""
    jk, k = jr.PRNGKey(seed), R.key(seed)
    logits = np.random.RandomState(seed).randn(7, 10).astype(np.float32)
    for axis in (0, 1, -1):
        np.testing.assert_array_equal(R.categorical(k, t32(logits), axis).numpy(),
                                      np.asarray(jr.categorical(jk, logits, axis)))
    np.testing.assert_array_equal(R.categorical(k, t32(logits), -1, (5, 7)).numpy(),
                                  np.asarray(jr.categorical(jk, logits, -1, (5, 7))))
    np.testing.assert_array_equal(R.categorical(k, t32(logits), -1, (3, 7), replace=False).numpy(),
                                  np.asarray(jr.categorical(jk, logits, -1, (3, 7), replace=False)))
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    p = np.float32([0.1, 0.2, 0.0, 0.3, 0.15, 0.25])
    cases = [dict(a=10, shape=(5,)), dict(a=10, shape=(2, 3), replace=False), dict(a=6, shape=(7,), p=p),
             dict(a=6, shape=(4,), p=p, replace=False), dict(a=6, shape=(3, 50), p=p), dict(a=x, shape=(3,), axis=1),
             dict(a=x, shape=(2,), replace=False), dict(a=x, shape=(2, 2), axis=1, replace=False),
             dict(a=x, shape=(5,), p=p, axis=1), dict(a=x, shape=(3,), p=p, axis=1, replace=False), dict(a=10),
             dict(a=x, shape=(), axis=0)]
    for case in cases:
        ours = R.choice(k, **{n: t32(v) if isinstance(v, np.ndarray) else v for n, v in case.items()}).numpy()
        theirs = np.asarray(jr.choice(jk, **case))
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, case
        np.testing.assert_array_equal(ours, theirs, err_msg=str(case))


def test_float16_draws_round_as_xla() -> None:
    """float16 draws are JAX's bit for bit where XLA rounds a multiply-add once (LLVM contracts the half ops into one
    float fma: uniform's scaling, so truncated_normal, gamma and beta) and jnp.linalg.norm sums float16 squares in
    float32 (maxwell). tgfx rounded after each op: 2 of these 8 values each differed by an ulp, and a gamma
    rejection loop could accept a different candidate. The bits are jax 0.10.2's for key 2."""
    k = R.key(2)
    jax_bits = {
        "uniform": [16598, 16528, 14566, 48026, 47776, 45616, 16428, 16173],
        "maxwell": [15976, 15503, 15896, 15771, 16464, 15521, 16391, 15690],
        "beta": [13831, 12333, 14182, 14699, 13830, 14026, 13738, 14418],
    }
    draws = {"uniform": R.uniform(k, (8,), "float16", -2.0, 3.0), "maxwell": R.maxwell(k, (8,), "float16"),
             "beta": R.beta(k, 2.0, 3.0, (8,), "float16")}
    for name, x in draws.items():
        np.testing.assert_array_equal(x.numpy().view(np.uint16), jax_bits[name], err_msg=name)


def test_python_float_parameters_are_taken_as_themselves(monkeypatch):
    """A distribution's Python float parameters (`truncated_normal`'s bounds, `beta`'s a and b) go to its compiled draw
    as themselves, with no Tensor made of them to check (a scalar broadcasts to any shape), as `uniform`'s bounds; the
    draws are those of Tensor parameters, bit for bit."""
    import tgfx._random_dists as dists
    import tgfx.random as random
    made = []
    real = random._bound
    for module in (random, dists):   # (wherever the draws find it)
        if hasattr(module, "_bound"):
            monkeypatch.setattr(module, "_bound", lambda *a: made.append(a[-1]) or real(*a))
    key = tg.random.PRNGKey(5)
    got = [tg.random.truncated_normal(key, -1.0, 2.0, (3, 4)), tg.random.beta(key, 2.0, 3.0, (5,))]
    assert made == []
    f32 = np.float32
    want = [tg.random.truncated_normal(key, tg.asarray(f32(-1.0)), tg.asarray(f32(2.0)), (3, 4)),
            tg.random.beta(key, tg.asarray(f32(2.0)), tg.asarray(f32(3.0)), (5,))]
    assert made == ["lower", "upper", "a", "b"]
    for g, w in zip(got, want, strict=True):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        np.testing.assert_array_equal(g.numpy(), w.numpy())
