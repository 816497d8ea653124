"""`jax.random`'s count samplers: poisson, binomial and multinomial, each JAX's algorithm on JAX's bits.

They run JAX's loops as `tg.lax.while_loop`s over the whole array: every iteration draws one fresh uniform array from
the next key, elements that are done keep their value, and the loop ends when all are, exactly as JAX's loop does, so
each element sees JAX's sequence of uniforms and the counts are JAX's (but for a close call that the last bit of a
`log` decides, about one in 10^5). The helpers they share with the other distributions are `_random_extra`'s, which
re-exports these names.
"""
from __future__ import annotations

import math

import numpy as np

from tgfx._random_dists import _broadcasts_to, _lit, _params, _result_shape, _shape_of
from tgfx._random_extra import Float, ShapeLike, _inexact_of, _int_dtype, _keys, _promote_inexact, f32
from tgfx.dtypes import DType, dtypes, max_value
from tgfx.random import KeyLike, _as, _bound, _compiled, _float_dtype, _fma, _split2, _unit_floats, check_key, split
from tgfx.tensor import ArrayLike, Tensor
from tgfx.tensor import _shape_arg as shape_arg


def poisson(key: KeyLike, lam: ArrayLike, shape: ShapeLike | None = None,
            dtype: DType | str | type = dtypes.int32) -> Tensor:
    """Poisson counts with rate `lam` >= 0, as `jax.random.poisson` (the same counts for the same key).

    JAX's two samplers, both run and one picked per element: Knuth's product of uniforms for lam < 10 (one uniform
    per unit of the count), Hormann's transformed rejection ("PTRS") above. `lam` is taken in float32 and broadcast
    to `shape` (default: its own shape); lam = 0 gives 0.

    >>> counts = tg.random.poisson(tg.random.key(0), 3.5, (1000,))
    """
    k = check_key("poisson", key)
    d = _int_dtype("poisson", dtype)
    out = _shape_of(lam) if shape is None else shape_arg(shape, "poisson")
    (lt,) = _params("poisson", f32, out, {"lam": lam})
    return _poisson(k, lt, out, d)


@_compiled(2, 3)
def _poisson(k: Tensor, lam: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import broadcast_to
    lam = broadcast_to(_as(lam, f32), shape)
    use_knuth = (lam != lam) | (lam < _lit(10.0, f32))
    lam_knuth = use_knuth.where(lam, _lit(0.0, f32))
    lam_rejection = use_knuth.where(_lit(1e5, f32), lam)   # any large rate accepts fast; its result is unused
    limit = min(max_value(d), max_value(dtypes.int32))      # JAX's loop bound, iinfo(dtype).max: never reached
    out = use_knuth.where(_poisson_knuth(k, lam_knuth, shape, d, limit),
                          _poisson_rejection(k, lam_rejection, shape, d, limit))
    return (lam == 0).where(Tensor.full((), 0, d), out)


def _poisson_knuth(k: Tensor, lam: Tensor, shape: tuple[int, ...], d: DType, limit: int) -> Tensor:
    """Knuth: the count of uniforms whose running product stays above exp(-lam), minus one; one uniform array per
    step from the next key of the chain `key, sub = split(key)`."""
    from tgfx.lax import while_loop
    from tgfx.numpy import any as any_of
    from tgfx.numpy import log

    def body(c: tuple) -> tuple:
        i, n, key, log_prod = c
        key, sub = _split2(key)
        n = (log_prod > -lam).where(n + Tensor.full((), 1, d), n)
        return i + 1, n, key, log_prod + log(_unit_floats(sub, shape, f32))

    init = (Tensor.full((), 0, dtypes.int32), Tensor.full(shape, 0, d), k, Tensor.full(shape, 0.0, f32))
    n = while_loop(lambda c: any_of(c[3] > -lam) & (c[0] < limit), body, init)[1]
    return (n - Tensor.full((), 1, d)).astype(d)


def _poisson_rejection(k: Tensor, lam: Tensor, shape: tuple[int, ...], d: DType, limit: int) -> Tensor:
    """Hormann's PTRS ("The transformed rejection method for generating Poisson random variables", 1993) with JAX's
    constants: each step proposes from two uniforms (keys 1 and 2 of split(key, 3)) until every element accepted."""
    from tgfx.lax import while_loop
    from tgfx.numpy import abs as absolute
    from tgfx.numpy import any as any_of
    from tgfx.numpy import floor, log, sqrt
    log_lam = log(lam)
    b = _fma(_lit(2.53, f32), sqrt(lam), _lit(0.931, f32))
    a = _fma(_lit(0.02483, f32), b, _lit(-0.059, f32))
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(c: tuple) -> tuple:
        i, k_out, accepted, key = c
        key, k0, k1 = _keys(key, 3)
        u = _unit_floats(k0, shape, f32) - 0.5
        v = _unit_floats(k1, shape, f32)
        us = 0.5 - absolute(u)
        n = floor(_fma(2 * a / us + b, u, lam) + 0.43)
        s = log(v * inv_alpha / (a / (us * us) + b))
        t_ = _fma(n, log_lam, -lam) - _lgamma(n + 1)
        accept1 = (us >= 0.07) & (v <= v_r)
        reject = (n < 0) | ((us < 0.013) & (v > us))
        accept = accept1 | (~reject & (s <= t_))
        return i + 1, accept.where(n, k_out), accepted | accept, key

    init = (Tensor.full((), 0, dtypes.int32), Tensor.full(shape, -1.0, f32), Tensor.full(shape, False, dtypes.bool), k)
    return while_loop(lambda c: any_of(~c[2]) & (c[0] < limit), body, init)[1].astype(d)


# Lanczos' approximation (g = 7, 9 terms) in the form XLA evaluates lgamma, the product folded into a fused add:
# PTRS compares a difference of large log-densities, where lgamma's last bits decide close calls
_LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283, 771.3234287776530788486528258894,
            -176.61502916214059906584551354, 12.507343278686904814458936853, -0.13857109526572011689554707,
            9.984369578019570859563e-6, 1.50563273514931155834e-7)


def _lgamma(x: Tensor) -> Tensor:
    """log Gamma(x) for x >= 1/2 as XLA computes it (below 1/2 the value is meaningless: PTRS rejects there)."""
    from tgfx.numpy import log, log1p
    d = x.dtype
    z = x - 1
    a = _lit(0.99999999999980993227684700473478, d)
    for i, c in enumerate(_LANCZOS):
        a = a + _lit(c, d) / ((z + float(i)) + 1)
    t_ = _lit(7.5, d) + z
    # XLA turns the division by the constant g + 1/2 into a product with its reciprocal, rounded in the dtype
    log_t = _lit(math.log(7.5), d) + log1p(z * _lit(float(np.asarray(1 / 7.5, d.np)), d))
    return _fma((z + 0.5) - t_ / log_t, log_t, _lit(0.5 * math.log(2 * math.pi), d)) + log(a)


def binomial(key: KeyLike, n: ArrayLike, p: ArrayLike, shape: ShapeLike | None = None, dtype: Float = f32) -> Tensor:
    """Binomial counts (the successes in `n` trials of probability `p`) as floats of `dtype`, as
    `jax.random.binomial` (the same counts for the same key).

    JAX's two samplers, both run and one picked per element: inversion (a sum of geometric waiting times) where
    n * min(p, 1 - p) <= 10, Hormann's BTRS rejection above; p > 1/2 samples the failures of 1 - p. A non-integer
    n is floored; NaN or negative n, NaN or negative p give NaN; n = inf gives inf. n and p broadcast to `shape`
    (default: their broadcast shape); the work is done in p's float type (float32 for a Python float).

    >>> heads = tg.random.binomial(tg.random.key(0), 20.0, 0.3, (1000,))
    """
    k = check_key("binomial", key)
    d = _float_dtype("binomial", dtype)
    pd = _inexact_of(p, "binomial", "p")
    _inexact_of(n, "binomial", "n")
    out = _result_shape("binomial", shape, {"n": n, "p": p})
    nt, pt = _params("binomial", pd, out, {"n": n, "p": p})
    return _binomial(k, nt, pt, out, pd, d)


@_compiled(3, 4, 5)
def _binomial(k: Tensor, count: Tensor | float, prob: Tensor | float, shape: tuple[int, ...], pd: DType,
              d: DType) -> Tensor:
    return _binomial_draw(k, _as(count, pd), _as(prob, pd), shape, d)


def _binomial_draw(k: Tensor, count: Tensor, prob: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import broadcast_to, floor, isinf
    pd = prob.dtype
    count, prob = broadcast_to(count.astype(pd), shape), broadcast_to(prob, shape)
    one, zero = Tensor.full((), 1.0, pd), Tensor.full((), 0.0, pd)
    p_lt_half = prob < 0.5
    q = p_lt_half.where(prob, one - prob)
    count_bad = (count != count) | (count < 0)
    count_inf = isinf(count)
    q_nan, q_neg = q != q, q < 0
    q = (q_nan | q_neg).where(_lit(0.01, pd), q)
    use_inversion = count_bad | (count * q <= 10)
    count = floor(count)
    samples = use_inversion.where(
        _binomial_inversion(k, use_inversion.where(count, zero), q, shape, d),
        _btrs(k, use_inversion.where(_lit(1e4, pd), count), use_inversion.where(_lit(0.5, pd), q), shape, d))
    invalid = q_neg | q_nan | count_bad
    samples = invalid.where(Tensor.full((), math.nan, d), samples)
    samples = (count_inf & ~invalid).where(Tensor.full((), math.inf, d), samples)
    return (p_lt_half | count_bad | q_nan | count_inf).where(samples, count.astype(d) - samples)


def _binomial_inversion(k: Tensor, count: Tensor, prob: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    """Geometric waiting times ceil(log(u) / log(1 - p)) summed until they pass `count`: their number minus one.
    The key chain is `sub, key = split(key)`, as JAX's."""
    from tgfx.lax import while_loop
    from tgfx.numpy import any as any_of
    from tgfx.numpy import ceil, log, log1p
    pd = prob.dtype
    log1mp = log1p(-prob)

    def body(c: tuple) -> tuple:
        num, total, key = c
        sub, key = _split2(key)
        num = (total <= count).where(num + 1, num)
        return num, total + ceil(log(_unit_floats(sub, shape, pd)) / log1mp), key

    init = (Tensor.full(shape, 0.0, pd), Tensor.full(shape, 0.0, pd), k)
    num = while_loop(lambda c: any_of(c[1] <= count), body, init)[0]
    return (num - 1).astype(d)


_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287)


def _stirling_tail(x: Tensor) -> Tensor:
    """log(x!) minus its Stirling approximation: JAX's table for x <= 9, the series beyond."""
    from tgfx.numpy import clip, floor, take
    d = x.dtype
    small = x <= 9
    x = clip(x, 0.0, 9.0)
    kp1sq = (x + 1) * (x + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (x + 1)
    table = take(Tensor(np.asarray(_STIRLING_TAIL, d.np)), floor(x).astype(dtypes.int32))
    return small.where(table, approx)


def _btrs(k: Tensor, count: Tensor, prob: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    """Hormann's BTRS ("The generation of binomial random variates", 1993) with JAX's constants: each step proposes
    from two uniforms (keys 1 and 2 of split(key, 3)) until every element accepted."""
    from tgfx.lax import while_loop
    from tgfx.numpy import abs as absolute
    from tgfx.numpy import any as any_of
    from tgfx.numpy import floor, log, sqrt
    pd = prob.dtype
    stddev = sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = floor((count + 1) * prob)
    head = (m + 0.5) * log((m + 1) / (r * (count - m + 1)))
    tail_m, tail_count_m = _stirling_tail(m), _stirling_tail(count - m)

    def body(s: tuple) -> tuple:
        k_out, accepted, key = s
        key, k0, k1 = _keys(key, 3)
        u = _unit_floats(k0, shape, pd) - 0.5
        v = _unit_floats(k1, shape, pd)
        us = 0.5 - absolute(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        n = floor((2 * a / us + b) * u + c)
        reject = (n < 0) | (n > count)
        v = log(v * alpha / (a / (us * us) + b))
        ub = (head + (count + 1) * log((count - m + 1) / (count - n + 1))
              + (n + 0.5) * log(r * (count - n + 1) / (n + 1))
              + tail_m + tail_count_m - _stirling_tail(n) - _stirling_tail(count - n))
        accept = accept1 | (~reject & (v <= ub))
        return accept.where(n, k_out), accepted | accept, key

    init = (Tensor.full(shape, -1.0, pd), Tensor.full(shape, False, dtypes.bool), k)
    return while_loop(lambda s: any_of(~s[1]), body, init)[0].astype(d)


def multinomial(key: KeyLike, n: ArrayLike, p: ArrayLike, *, shape: ShapeLike | None = None, dtype: Float = f32,
                unroll: int | bool = 1) -> Tensor:
    """Counts of `n` draws among the categories of `p` (its last axis), as `jax.random.multinomial`: one binomial
    per category in turn, of the draws left and the category's share of the probability left (key i of
    split(key, categories) for category i, in a `tg.lax.scan` as JAX's).

    `p` (the probabilities, summing to 1 along the last axis) broadcasts to `shape` (default p's shape) and `n` to
    its leading axes; the counts are floats of `dtype`. `unroll` is accepted for JAX compatibility.

    >>> counts = tg.random.multinomial(tg.random.key(0), 100.0, tg.asarray([0.2, 0.3, 0.5]))    # sums to 100
    """
    from tgfx.lax import scan
    from tgfx.numpy import broadcast_to, clip, moveaxis
    k = check_key("multinomial", key)
    d = _float_dtype("multinomial", dtype)
    cd = _promote_inexact("multinomial", {"n": n, "p": p})
    pt = _bound(p, cd, _shape_of(p), "multinomial", "p")
    if pt.ndim == 0:
        raise ValueError("multinomial: `p` must have at least one axis (the categories), got a scalar")
    out = pt.shape if shape is None else shape_arg(shape, "multinomial")
    if not out or not _broadcasts_to(pt.shape, out):
        raise ValueError(f"multinomial: `p` of shape {pt.shape} does not broadcast to `shape` {out} (the last axis "
                         f"holds the categories)")
    nt = _bound(n, cd, out[:-1], "multinomial", "n")
    probs = moveaxis(broadcast_to(pt, out), -1, 0)
    left = _tail_sums(probs)
    ratios = probs / (left == 0).where(Tensor.full((), 1.0, cd), left)
    keys = split(k, out[-1])

    def step(remainder: Tensor, xs: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        ratio, sub = xs
        count = _binomial_draw(sub, remainder, clip(ratio, 0.0, 1.0), out[:-1], cd)
        return remainder - count, count

    _, counts = scan(step, broadcast_to(nt, out[:-1]), (ratios, keys))
    return moveaxis(counts, 0, -1).astype(d)


def _tail_sums(p: Tensor) -> Tensor:
    """p[i] + p[i + 1] + ... along axis 0, each summed from p[i] on as XLA's reduce_window sums JAX's reverse
    cumsum (the rounding decides which binomial sampler a category gets): a masked sum per category, K^2 terms, for
    up to 32 categories; a reversed cumulative sum (the same to rounding) beyond."""
    from tgfx.numpy import arange, cumsum, flip
    n = p.shape[0]
    if n > 32:
        return flip(cumsum(flip(p, 0), 0), 0)
    idx = arange(n, dtype=dtypes.int32).reshape((n,) + (1,) * (p.ndim - 1))
    keep = idx[None] >= idx[:, None]                       # [i, j]: category j counts toward tail i
    return keep.where(p[None], Tensor.full((), 0.0, p.dtype)).sum(1)
