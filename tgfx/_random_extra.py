"""The rest of `jax.random`'s distributions and key helpers, each JAX's algorithm on JAX's bits.

As in `_random_dists`, every draw is built from the draws `uniform`, `normal`, `exponential`, `gamma` and `bernoulli`
make, with the keys split in the order `jax.random` splits them, so the same key gives JAX's numbers: bit for bit
where only arithmetic is involved (XLA fuses a product into the following sum on CPU, so those products are written
as `_fma`), to the rounding of `log`, `pow` or a factorisation elsewhere. The count samplers (`poisson`, `binomial`,
`multinomial`) are in `_random_counts.py`, re-exported at the end.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tgfx._random_dists import _broadcasts_to, _exponential, _gamma, _lit, _params, _result_shape, _shape_of
from tgfx.dtypes import DType, dtypes, to_dtype, to_inexact
from tgfx.random import (
    KeyLike,
    _as,
    _bound,
    _compiled,
    _float_dtype,
    _fma,
    _scaled,
    _split2,
    _unit_floats,
    check_key,
    split,
    u32,
)
from tgfx.random import (
    _normal as _normal_core,
)
from tgfx.tensor import ArrayLike, Tensor
from tgfx.tensor import _shape_arg as shape_arg

ShapeLike = int | Sequence[int]
Float = DType | str | type
f32 = dtypes.float32


# ---- shared pieces ----
def _keys(k: Tensor, n: int) -> list[Tensor]:
    """split(k, n) as n separate keys."""
    keys = split(k, n)
    return [keys.shrink(((i, i + 1), (0, 2))).reshape(2) for i in range(n)]


def _rademacher_draw(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    """JAX's rademacher: 2 * bernoulli(k, 0.5) - 1, the coin a float32 uniform below 0.5."""
    coin = (_unit_floats(k, shape, f32) < _lit(0.5, f32)).astype(d)
    return (coin * 2 - 1).astype(d)


def _int_dtype(fn: str, dtype: DType | str | type) -> DType:
    d = to_dtype(dtype)
    if not d.is_int:
        raise TypeError(f"{fn}: `dtype` must be an integer type, got {d.name}")
    return d


def _setup(fn: str, key: KeyLike, dtype: Float, shape: ShapeLike | None,
           params: dict[str, ArrayLike]) -> tuple[Tensor, DType, tuple[int, ...], list[Tensor | float]]:
    """The key, the float dtype, the result shape (`shape`, or the parameters' broadcast shape) and the parameters
    as the compiled draws take them, each checked with an error naming `fn`."""
    k = check_key(fn, key)
    d = _float_dtype(fn, dtype)
    out = _result_shape(fn, shape, params)
    return k, d, out, _params(fn, d, out, params)


def _inexact_of(v: ArrayLike, fn: str, name: str) -> DType:
    """The float dtype JAX computes with for a parameter: its own if it is a float array, float32 for integer
    arrays (of up to 32 bits) and Python numbers (weakly typed: the default float)."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{fn}: `{name}` must be a number or an array of numbers, got bool")
    if isinstance(v, (int, float)):
        return dtypes.default_float
    vd = v.dtype if isinstance(v, Tensor) else to_dtype(np.asarray(v).dtype)
    return vd if vd.is_float else to_inexact(vd)


# ---- transforms of uniform and normal draws ----
def lognormal(key: KeyLike, sigma: ArrayLike = 1.0, shape: ShapeLike | None = None, dtype: Float = f32) -> Tensor:
    """exp(sigma * z) for z standard normal, as `jax.random.lognormal`; `sigma` broadcasts to `shape` (which
    defaults to sigma's shape), and the draw is differentiable in it.

    >>> x = tg.random.lognormal(tg.random.key(0), 0.5, (1000,))     # median 1, mean exp(0.125)
    """
    k, d, out, (sigma_,) = _setup("lognormal", key, dtype, shape, {"sigma": sigma})
    return _lognormal(k, sigma_, out, d)


@_compiled(2, 3)
def _lognormal(k: Tensor, sigma: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import exp
    return exp(_normal_core(k, shape, d) * _as(sigma, d))


def cauchy(key: KeyLike, shape: ShapeLike = (), dtype: Float = f32) -> Tensor:
    """Standard Cauchy floats (density 1 / (pi (1 + x^2))), as `jax.random.cauchy`: tan(pi (u - 1/2)) for u
    uniform in [eps, 1).

    >>> x = tg.random.cauchy(tg.random.key(0), (3,))
    """
    k = check_key("cauchy", key)
    return _cauchy(k, shape_arg(shape, "cauchy"), _float_dtype("cauchy", dtype))


@_compiled(1, 2)
def _cauchy(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import tan
    eps = 2.0 ** -{dtypes.float16: 10, dtypes.bfloat16: 7, dtypes.float32: 23, dtypes.float64: 52}[d]
    u = _scaled(_unit_floats(k, shape, d), _lit(eps, d), Tensor.full((), 1.0, d))
    return tan(_lit(math.pi, d) * (u - _lit(0.5, d)))


def rademacher(key: KeyLike, shape: ShapeLike = (), dtype: DType | str | type = dtypes.int32) -> Tensor:
    """-1 or +1 with equal probability, as `jax.random.rademacher` (2 * bernoulli(key, 0.5) - 1), in `dtype` (an
    integer or float type).

    >>> signs = tg.random.rademacher(tg.random.key(0), (8,))
    """
    k = check_key("rademacher", key)
    d = to_dtype(dtype)
    if d.is_bool or d.is_unsigned:
        raise TypeError(f"rademacher: `dtype` must be a signed integer or float type to hold -1, got {d.name}")
    return _rademacher(k, shape_arg(shape, "rademacher"), d)


@_compiled(1, 2)
def _rademacher(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    return _rademacher_draw(k, shape, d)


def weibull_min(key: KeyLike, scale: ArrayLike, concentration: ArrayLike, shape: ShapeLike = (),
                dtype: Float = f32) -> Tensor:
    """Weibull floats, as `jax.random.weibull_min`: the inverse CDF scale * (-log(1 - u))^(1 / concentration).

    As in JAX, the result is the broadcast of `shape` with the parameters' shapes (default `shape` is ()).

    >>> x = tg.random.weibull_min(tg.random.key(0), 1.0, 1.5, (1000,))
    """
    k = check_key("weibull_min", key)
    d = _float_dtype("weibull_min", dtype)
    shape = shape_arg(shape, "weibull_min")
    params = {"scale": scale, "concentration": concentration}
    out = _result_shape("weibull_min", None, params)
    try:
        out = tuple(np.broadcast_shapes(shape, out))
    except ValueError:
        raise ValueError(f"weibull_min: the parameters' shape {out} does not broadcast with `shape` {shape}") from None
    sc, conc = _params("weibull_min", d, out, params)
    return _weibull_min(k, sc, conc, shape, d)


@_compiled(3, 4)
def _weibull_min(k: Tensor, scale: Tensor | float, conc: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import log1p, power
    u = _unit_floats(k, shape, d)
    return power(-log1p(-u), 1.0 / _as(conc, d)) * _as(scale, d)


def rayleigh(key: KeyLike, scale: ArrayLike, shape: ShapeLike | None = None, dtype: Float = f32) -> Tensor:
    """Rayleigh floats (density x e^(-x^2 / 2 scale^2) / scale^2), as `jax.random.rayleigh`: scale sqrt(-2 log u).

    >>> r = tg.random.rayleigh(tg.random.key(0), 2.0, (1000,))
    """
    k, d, out, (sc,) = _setup("rayleigh", key, dtype, shape, {"scale": scale})
    return _rayleigh(k, sc, out, d)


@_compiled(2, 3)
def _rayleigh(k: Tensor, scale: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import log, sqrt
    return _as(scale, d) * sqrt(log(_unit_floats(k, shape, d)) * _lit(-2.0, d))


def pareto(key: KeyLike, b: ArrayLike, shape: ShapeLike | None = None, dtype: Float = f32) -> Tensor:
    """Pareto floats (density b / x^(b + 1) on x >= 1), as `jax.random.pareto`: exp(e / b), e standard exponential.

    >>> x = tg.random.pareto(tg.random.key(0), 3.0, (1000,))
    """
    k, d, out, (bt,) = _setup("pareto", key, dtype, shape, {"b": b})
    return _pareto(k, bt, out, d)


@_compiled(2, 3)
def _pareto(k: Tensor, b: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import exp, log1p
    return exp(-log1p(-_unit_floats(k, shape, d)) / _as(b, d))


def maxwell(key: KeyLike, shape: ShapeLike = (), dtype: Float = f32) -> Tensor:
    """Maxwell floats (the length of a standard normal 3-vector), as `jax.random.maxwell`.

    >>> speeds = tg.random.maxwell(tg.random.key(0), (1000,))
    """
    k = check_key("maxwell", key)
    return _maxwell(k, shape_arg(shape, "maxwell"), _float_dtype("maxwell", dtype))


@_compiled(1, 2)
def _maxwell(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    return _maxwell_draw(k, shape, d)


def _maxwell_draw(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import sqrt
    z = _normal_core(k, (*shape, 3), d)
    x, y, w = (z[..., i] for i in range(3))
    if d == dtypes.float16:
        # jnp.linalg.norm's sum of float16 squares runs in float32 (jnp.sum upcasts float16), rounded once at its end
        x2, y2, w2 = ((v * v).astype(f32) for v in (x, y, w))
        return sqrt((x2 + y2 + w2).astype(d))
    return sqrt(_fma(w, w, _fma(y, y, x * x)))   # the sum of squares as XLA's fused reduction rounds it


def double_sided_maxwell(key: KeyLike, loc: ArrayLike, scale: ArrayLike, shape: ShapeLike = (),
                         dtype: Float = f32) -> Tensor:
    """loc + scale * s * m for m Maxwell and s a random sign, as `jax.random.double_sided_maxwell`.

    JAX's shape rule: the result has shape `shape + broadcast(loc, scale).shape`, with an empty `shape` standing
    for the parameters' shape (so array parameters and shape=() give that shape twice, as JAX does).

    >>> x = tg.random.double_sided_maxwell(tg.random.key(0), 0.0, 1.0, (1000,))
    """
    k = check_key("double_sided_maxwell", key)
    d = _float_dtype("double_sided_maxwell", dtype)
    params = {"loc": loc, "scale": scale}
    pshape = _result_shape("double_sided_maxwell", None, params)
    out = shape_arg(shape, "double_sided_maxwell") or pshape
    out = (*out, *pshape)
    lo, sc = _params("double_sided_maxwell", d, out, params)
    return _double_sided_maxwell(k, lo, sc, out, d)


@_compiled(3, 4)
def _double_sided_maxwell(k: Tensor, loc: Tensor | float, scale: Tensor | float, shape: tuple[int, ...],
                          d: DType) -> Tensor:
    k_maxwell, k_sign = _split2(k)
    m = _maxwell_draw(k_maxwell, shape, d)
    return _fma(_rademacher_draw(k_sign, shape, d) * m, _as(scale, d), _as(loc, d))


def triangular(key: KeyLike, left: ArrayLike, mode: ArrayLike, right: ArrayLike, shape: ShapeLike | None = None,
               dtype: Float = f32) -> Tensor:
    """Triangular floats on [left, right] peaking at `mode`, as `jax.random.triangular` (the inverse CDF of one
    uniform). The parameters broadcast to `shape`, which defaults to their broadcast shape.

    >>> x = tg.random.triangular(tg.random.key(0), 0.0, 0.3, 1.0, (1000,))
    """
    k, d, out, (lo, mo, hi) = _setup("triangular", key, dtype, shape, {"left": left, "mode": mode, "right": right})
    return _triangular(k, lo, mo, hi, out, d)


@_compiled(4, 5)
def _triangular(k: Tensor, left: Tensor | float, mode: Tensor | float, right: Tensor | float, shape: tuple[int, ...],
                d: DType) -> Tensor:
    from tgfx.numpy import sqrt
    lo, mo, hi = _as(left, d), _as(mode, d), _as(right, d)
    fc = (mo - lo) / (hi - lo)
    u = _unit_floats(k, shape, d)
    out1 = lo + sqrt(u * (hi - lo) * (mo - lo))
    out2 = hi - sqrt((1 - u) * (hi - lo) * (hi - mo))
    return (u < fc).where(out1, out2)


def wald(key: KeyLike, mean: ArrayLike, shape: ShapeLike | None = None, dtype: Float = f32) -> Tensor:
    """Wald (inverse Gaussian, shape 1) floats with the given `mean`, as `jax.random.wald`: Michael, Schucany and
    Haas' transformation of a normal and a uniform draw.

    >>> x = tg.random.wald(tg.random.key(0), 2.0, (1000,))
    """
    k, d, out, (mu,) = _setup("wald", key, dtype, shape, {"mean": mean})
    return _wald(k, mu, out, d)


@_compiled(2, 3)
def _wald(k: Tensor, mean: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import broadcast_to, sqrt
    k1, k2 = _split2(k)
    mu = broadcast_to(_as(mean, d), shape)
    v = _normal_core(k1, shape, d)
    z = _unit_floats(k2, shape, d)
    y = v * v
    mu2 = mu * mu
    root = sqrt(_fma(mu * 4, y, mu2 * (y * y)))
    x = _fma(-(mu / 2), root, _fma(mu2, y / 2, mu))
    return (z <= mu / (mu + x)).where(x, mu2 / x)


def geometric(key: KeyLike, p: ArrayLike, shape: ShapeLike | None = None,
              dtype: DType | str | type = dtypes.int32) -> Tensor:
    """The number of Bernoulli(p) trials up to and including the first success (1, 2, ...), as
    `jax.random.geometric`: floor(log(u) / log1p(-p)) + 1, in the integer `dtype`.

    >>> n = tg.random.geometric(tg.random.key(0), 0.25, (1000,))     # mean 4
    """
    k = check_key("geometric", key)
    d = _int_dtype("geometric", dtype)
    pd = _inexact_of(p, "geometric", "p")
    out = _result_shape("geometric", shape, {"p": p})
    (pp,) = _params("geometric", pd, out, {"p": p})
    return _geometric(k, pp, out, pd, d)


@_compiled(2, 3, 4)
def _geometric(k: Tensor, p: Tensor | float, shape: tuple[int, ...], pd: DType, d: DType) -> Tensor:
    from tgfx.numpy import floor, log, log1p
    u = _unit_floats(k, shape, pd)
    u = (u == 0).where(Tensor.full((), 1.0, pd), u)   # JAX maps u = 0 to 1: log stays finite
    return (floor(log(u) / log1p(-_as(p, pd))) + 1).astype(d)


# ---- through the gamma family ----
# These are compositions of the compiled gamma, loggamma, normal and exponential draws rather than programs of their
# own: a gamma loop is costly to compile, and this way t and generalized_normal share gamma's program, chisquare and
# f loggamma's (f's two draws one program between them); under `jit` they are inlined all the same.
def t(key: KeyLike, df: ArrayLike, shape: ShapeLike | None = None, dtype: Float = f32) -> Tensor:
    """Student's t floats with `df` degrees of freedom, as `jax.random.t`: z sqrt(df / 2 / g), z normal and g
    gamma(df / 2); differentiable in df (through gamma's implicit gradient).

    >>> x = tg.random.t(tg.random.key(0), 5.0, (1000,))
    """
    k, d, out, (dft,) = _setup("t", key, dtype, shape, {"df": df})
    from tgfx.numpy import sqrt
    k_n, k_g = _split2(k)
    half_df = _half(dft, d)
    g = _gamma(k_g, half_df, out, d, False)
    return _normal_core(k_n, out, d) * sqrt(_as(half_df, d) / g)


def _half(v: Tensor | float, d: DType) -> Tensor | float:
    """v / 2: a Python float stays one (a scalar argument of the compiled draw), as JAX's df / 2."""
    return v / 2 if isinstance(v, float) else _as(v, d) / 2


def chisquare(key: KeyLike, df: ArrayLike, shape: ShapeLike | None = None, dtype: Float = f32) -> Tensor:
    """Chi-square floats with `df` degrees of freedom, as `jax.random.chisquare`: 2 exp(loggamma(df / 2));
    differentiable in df.

    >>> x = tg.random.chisquare(tg.random.key(0), 3.0, (1000,))     # mean 3
    """
    k, d, out, (dft,) = _setup("chisquare", key, dtype, shape, {"df": df})
    return _chisquare(k, dft, out, d)


def _chisquare(k: Tensor, df: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import exp
    return exp(_gamma(k, _half(df, d), shape, d, True)) * 2


def f(key: KeyLike, dfnum: ArrayLike, dfden: ArrayLike, shape: ShapeLike | None = None, dtype: Float = f32) -> Tensor:
    """F (Fisher-Snedecor) floats, as `jax.random.f`: (chi2(dfnum) / dfnum) / (chi2(dfden) / dfden), the
    denominator's draw from the first key of split(key) as in JAX.

    >>> x = tg.random.f(tg.random.key(0), 5.0, 10.0, (1000,))
    """
    k, d, out, (num, den) = _setup("f", key, dtype, shape, {"dfnum": dfnum, "dfden": dfden})
    k_den, k_num = _split2(k)
    return (_chisquare(k_num, num, out, d) / _as(num, d)) / (_chisquare(k_den, den, out, d) / _as(den, d))


def generalized_normal(key: KeyLike, p: float | Tensor, shape: ShapeLike = (), dtype: Float = f32) -> Tensor:
    """Floats with density proportional to exp(-|x|^p), as `jax.random.generalized_normal`: s g^(1/p) for g
    gamma(1/p) and s a random sign. p = 2 is a normal of variance 1/2, p = 1 the Laplace distribution.

    >>> x = tg.random.generalized_normal(tg.random.key(0), 1.5, (1000,))
    """
    k = check_key("generalized_normal", key)
    d = _float_dtype("generalized_normal", dtype)
    (pt,) = _params("generalized_normal", d, (), {"p": p})
    return _generalized_normal(k, pt, shape_arg(shape, "generalized_normal"), d)


def _generalized_normal(k: Tensor, p: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import power
    k_g, k_s = _split2(k)
    inv = 1 / p if isinstance(p, float) else 1 / _as(p, d)
    return _rademacher(k_s, shape, d) * power(_gamma(k_g, inv, shape, d, False), _as(inv, d))


def ball(key: KeyLike, d: int, p: float | Tensor = 2, shape: ShapeLike = (), dtype: Float = f32) -> Tensor:
    """Points uniform in the unit p-norm ball of dimension `d`, as `jax.random.ball`: g / (||g||_p^p + e)^(1/p) for
    g generalized normal in R^d and e exponential (Barthe, Guedon, Mendelson, Naor). The result has shape
    `shape + (d,)`.

    >>> pts = tg.random.ball(tg.random.key(0), 3, shape=(100,))      # 100 points in the unit 3-ball
    """
    from tgfx.numpy import abs as absolute
    from tgfx.numpy import power
    k = check_key("ball", key)
    dt = _float_dtype("ball", dtype)
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 0:
        raise TypeError(f"ball: the dimension `d` must be a non-negative int, got {d!r}")
    out = shape_arg(shape, "ball")
    (pt,) = _params("ball", dt, (), {"p": p})
    k1, k2 = _split2(k)
    g = _generalized_normal(k1, pt, (*out, int(d)), dt)
    pp = _as(pt, dt)
    norm = power(power(absolute(g), pp).sum(-1) + _exponential(k2, out, dt), 1 / pp)
    return g / norm[..., None]


# ---- vectors and matrices ----
def multivariate_normal(key: KeyLike, mean: ArrayLike, cov: ArrayLike, shape: ShapeLike | None = None,
                        dtype: Float | None = None, method: str = "cholesky") -> Tensor:
    """Normal vectors with the given `mean` (..., n) and covariance `cov` (..., n, n), as
    `jax.random.multivariate_normal`: mean + A z for z standard normal of shape `shape + (n,)` and A A^T = cov.

    `method` is how A is found: "cholesky" (the default; cov positive definite), "eigh" or "svd" (either works for
    a singular cov). `shape` is the batch shape (default: mean's and cov's batch shapes broadcast); `dtype`
    defaults to mean's (float) dtype.

    >>> x = tg.random.multivariate_normal(tg.random.key(0), tnp.zeros(2), tg.asarray([[1.0, 0.9], [0.9, 1.0]]), (500,))
    """
    from tgfx.numpy import linalg, sqrt
    k = check_key("multivariate_normal", key)
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"multivariate_normal: `method` must be one of 'svd', 'eigh', 'cholesky', got {method!r}")
    cd = _promote_inexact("multivariate_normal", {"mean": mean, "cov": cov})
    mu = _bound(mean, cd, _shape_of(mean), "multivariate_normal", "mean")
    sigma = _bound(cov, cd, _shape_of(cov), "multivariate_normal", "cov")
    d = cd if dtype is None else _float_dtype("multivariate_normal", dtype)
    if mu.ndim < 1:
        raise ValueError("multivariate_normal: `mean` must have at least one axis (..., n), got a scalar")
    n = mu.shape[-1]
    if sigma.ndim < 2 or sigma.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal: `cov` must have shape (..., {n}, {n}) for a mean of shape {mu.shape}, "
                         f"got {sigma.shape}")
    batch = _result_shape("multivariate_normal", None, {"mean[:-1]": np.empty(mu.shape[:-1]),
                                                        "cov[:-2]": np.empty(sigma.shape[:-2])})
    if shape is not None:
        out = shape_arg(shape, "multivariate_normal")
        if not _broadcasts_to(batch, out):
            raise ValueError(f"multivariate_normal: the batch shape of `mean` and `cov` ({batch}) does not broadcast "
                             f"to `shape` {out}")
        batch = out
    if method == "cholesky":
        factor = linalg.cholesky(sigma)
    elif method == "eigh":
        w, v = linalg.eigh(sigma)
        factor = v * sqrt(w[..., None, :])
    else:
        u, s, _ = linalg.svd(sigma)
        factor = u * sqrt(s[..., None, :])
    z = _normal_core(k, (*batch, n), d)
    return mu + (factor @ z[..., None])[..., 0]


def _promote_inexact(fn: str, params: dict[str, ArrayLike]) -> DType:
    """The float type JAX's promote_dtypes_inexact gives the parameters: the widest float among the arrays (Python
    numbers are weakly typed and defer to them), the default float when all are Python numbers."""
    kinds = [_inexact_of(v, fn, name) for name, v in params.items() if not isinstance(v, (int, float))]
    return max(kinds, key=lambda t: t.bits) if kinds else dtypes.default_float


def orthogonal(key: KeyLike, n: int, shape: ShapeLike = (), dtype: Float = f32, m: int | None = None) -> Tensor:
    """Random n x m matrices with orthonormal columns (or rows, for n < m), uniform over them (Haar), as
    `jax.random.orthogonal`: the Q of a normal matrix's QR decomposition, each column's sign set by R's diagonal
    (Mezzadri, "How to generate random matrices from the classical compact groups"). m defaults to n (square
    orthogonal matrices); the result has shape `shape + (n, m)`.

    >>> q = tg.random.orthogonal(tg.random.key(0), 3)          # q.T @ q is the identity
    """
    from tgfx.numpy import expand_dims, linalg, matrix_transpose, sign
    k = check_key("orthogonal", key)
    d = _float_dtype("orthogonal", dtype)
    m = n if m is None else m
    for v, name in ((n, "n"), (m, "m")):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise TypeError(f"orthogonal: `{name}` must be a non-negative int (a static size), got {v!r}")
    out = shape_arg(shape, "orthogonal")
    z = _normal_core(k, (*out, max(n, m), min(n, m)), d)
    q, r = linalg.qr(z)
    x = q * expand_dims(sign(linalg.diagonal(r)), -2)
    return matrix_transpose(x) if n < m else x


# ---- keys ----
def _key_array(fn: str, keys: KeyLike, name: str) -> Tensor:
    """`keys` as a uint32 Tensor of one or more keys (trailing axis 2), or a clear error naming `fn`."""
    t = Tensor(keys) if isinstance(keys, np.ndarray) and keys.dtype == np.uint32 else keys
    if not isinstance(t, Tensor) or t.dtype != u32 or t.ndim < 1 or t.shape[-1] != 2:
        got = f"{t.dtype.name}{list(t.shape)}" if isinstance(t, Tensor) else type(keys).__name__
        raise TypeError(f"{fn}: `{name}` must be uint32 key data of shape (..., 2) (Threefry keys, as "
                        f"tg.random.key and tg.random.split give), got {got}")
    return t


def key_data(keys: KeyLike) -> Tensor:
    """The uint32 data of a key or an array of keys, as `jax.random.key_data`: tgfx's keys are that data already
    (JAX's raw `PRNGKey` form), so this checks and returns them.

    >>> tg.random.key_data(tg.random.key(42)).tolist()     # [0, 42]
    """
    return _key_array("key_data", keys, "keys")


def wrap_key_data(key_bits_array: KeyLike, *, impl: str | None = None, dtype: str | None = None) -> Tensor:
    """Keys from their uint32 data (shape (..., 2)), as `jax.random.wrap_key_data`; tgfx keys are the data itself,
    so the result is the same array, checked. Only the Threefry-2x32 implementation exists: `impl` or `dtype`, if
    given, must name it.

    >>> k = tg.random.wrap_key_data(tg.random.key_data(tg.random.key(0)))
    """
    if impl is not None and dtype is not None:
        raise ValueError("wrap_key_data: give `impl` or `dtype`, not both")
    spec = impl if impl is not None else dtype
    if spec is not None and spec not in ("threefry2x32", "threefry"):
        raise ValueError(f"wrap_key_data: only the 'threefry2x32' implementation is available, got {spec!r}")
    return _key_array("wrap_key_data", key_bits_array, "key_bits_array")


def clone(key: KeyLike) -> Tensor:
    """The key itself, as `jax.random.clone`: JAX needs a clone to reuse a key under its linearity checks; tgfx keys
    are plain values, so this only checks `key`.

    >>> same = tg.random.clone(tg.random.key(0))
    """
    return _key_array("clone", key, "key")


# the count samplers, in a module of their own (they use the helpers above)
from tgfx._random_counts import binomial as binomial  # noqa: E402
from tgfx._random_counts import multinomial as multinomial  # noqa: E402
from tgfx._random_counts import poisson as poisson  # noqa: E402
