"""The distributions of `tg.random` beyond uniform and normal, each JAX's algorithm on JAX's bits.

Every one is built from the same draws `uniform` and `normal` make (so from the same Threefry counters), in the
order and with the constants `jax.random` uses: the same key gives the same numbers, to the rounding of the
transcendental functions (`log`, `log1p`, `pow`), whose last bit can differ from XLA's; see tests/test_random_dists.py
for what is bit for bit and what agrees to a few ulp. Each draw is a jitted core (`_compiled`), as in JAX, so an eager
call with a new key replays a compiled program instead of building a new graph.

The gamma family samples by Marsaglia and Tsang's rejection method with JAX's per-element key sequence, vectorised:
one `tg.lax.while_loop` over the whole array in which each element takes its own next step (a fresh normal, or a
fresh pair of keys after a rejection) until every element has accepted, so each element follows exactly the path
JAX's per-element (vmapped) loop takes. Its gradient with respect to the shape `a` is the implicit
reparameterisation gradient (Figurnov, Mohamed, Mnih, "Implicit reparameterization gradients", NeurIPS 2018) that
JAX uses: dx/da = -(dP/da) / (dP/dx) for P the regularised lower incomplete gamma function, by the series and
continued fraction of `jax.lax.random_gamma_grad`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tgfx.dtypes import DType, dtypes
from tgfx.function import function
from tgfx.random import (
    KeyLike,
    _as,
    _compiled,
    _draw_arg,
    _float_dtype,
    _fma,
    _hash_shape,
    _normal_of,
    _scaled,
    _split2,
    _unit_floats,
    _unit_floats_of,
    check_key,
    erfinv,
    permutation,
    randint,
    threefry2x32,
    u32,
)
from tgfx.tensor import ArrayLike, Tensor, normalize_axis
from tgfx.tensor import _shape_arg as shape_arg

ShapeLike = int | Sequence[int]
_NMANT = {dtypes.float16: 10, dtypes.bfloat16: 7, dtypes.float32: 23, dtypes.float64: 52}
_MIN_EXP = {dtypes.float16: -14, dtypes.bfloat16: -126, dtypes.float32: -126, dtypes.float64: -1022}


def _tiny(d: DType) -> float:
    """The smallest normal number of `d` (numpy's finfo.tiny)."""
    return 2.0 ** _MIN_EXP[d]


def _epsneg(d: DType) -> float:
    """The distance from 1 to the next number below it in `d` (numpy's finfo.epsneg)."""
    return 2.0 ** -(_NMANT[d] + 1)


def _lit(v: float, d: DType) -> Tensor:
    return Tensor.literal(v, d)


def _shape_of(v: ArrayLike) -> tuple[int, ...]:
    return v.shape if isinstance(v, Tensor) else np.shape(v)


def _result_shape(fn: str, shape: ShapeLike | None, params: dict[str, ArrayLike]) -> tuple[int, ...]:
    """`shape`, or the broadcast shape of the parameters when it is None, as JAX's samplers take it."""
    if shape is not None:
        return shape_arg(shape, fn)
    shapes = {name: _shape_of(v) for name, v in params.items()}
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError:
        listed = ", ".join(f"`{n}` of shape {s}" for n, s in shapes.items())
        raise ValueError(f"{fn}: the parameters do not broadcast together: {listed}") from None


def _params(fn: str, d: DType, shape: tuple[int, ...], params: dict[str, ArrayLike]) -> list[Tensor | float]:
    """Each parameter as a compiled draw takes it: a Python float as itself, else a Tensor of dtype `d`; each must
    broadcast to the result `shape`."""
    out = []
    for name, v in params.items():
        if isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{fn}: `{name}` must be a float or a float array, got bool")
        out.append(_draw_arg(v, d, shape, fn, name))
    return out


# ---- transforms of one uniform draw ----
def exponential(key: KeyLike, shape: ShapeLike = (), dtype: DType | str | type = dtypes.float32) -> Tensor:
    """Standard exponential floats (density e^-x on x >= 0), as `jax.random.exponential`: -log1p(-u), u uniform.

    >>> waits = tg.random.exponential(tg.random.key(0), (1000,)) / rate
    """
    k = check_key("exponential", key)
    return _exponential(k, shape_arg(shape, "exponential"), _float_dtype("exponential", dtype))


@_compiled(1, 2)
def _exponential(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import log1p
    return -log1p(-_unit_floats(k, shape, d))  # 1 - u is in (0, 1], where log is finite


def laplace(key: KeyLike, shape: ShapeLike = (), dtype: DType | str | type = dtypes.float32) -> Tensor:
    """Standard Laplace floats (density e^-|x| / 2), as `jax.random.laplace`: sign(u) log1p(-|u|) for u uniform in
    (-1, 1).

    >>> x = tg.random.laplace(tg.random.key(0), (3,))
    """
    k = check_key("laplace", key)
    return _laplace(k, shape_arg(shape, "laplace"), _float_dtype("laplace", dtype))


@_compiled(1, 2)
def _laplace(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import abs as absolute
    from tgfx.numpy import log1p, sign
    u = _scaled(_unit_floats(k, shape, d), _lit(-1.0 + _epsneg(d), d), Tensor.full((), 1.0, d))
    return sign(u) * log1p(-absolute(u))


def logistic(key: KeyLike, shape: ShapeLike = (), dtype: DType | str | type = dtypes.float32) -> Tensor:
    """Standard logistic floats (density e^-x / (1 + e^-x)^2), as `jax.random.logistic`: log(u) - log1p(-u), the
    logit of u uniform in (0, 1).

    >>> x = tg.random.logistic(tg.random.key(0), (3,))
    """
    k = check_key("logistic", key)
    return _logistic(k, shape_arg(shape, "logistic"), _float_dtype("logistic", dtype))


@_compiled(1, 2)
def _logistic(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import log, log1p
    u = _scaled(_unit_floats(k, shape, d), _lit(_tiny(d), d), Tensor.full((), 1.0, d))
    return log(u) - log1p(-u)


def gumbel(key: KeyLike, shape: ShapeLike = (), dtype: DType | str | type = dtypes.float32,
           mode: str = "low") -> Tensor:
    """Standard Gumbel floats (density e^-(x + e^-x)), as `jax.random.gumbel`: -log(-log(u)), u uniform in (0, 1).

    `mode="low"` (JAX's default) draws one uniform per value, so the largest value is about 16 in float32;
    `mode="high"` adds a second uniform's bits below the first where it is under 1/2, which reaches about 32.

    >>> g = tg.random.gumbel(tg.random.key(0), (5,))
    """
    k = check_key("gumbel", key)
    if mode not in ("low", "high"):
        raise ValueError(f"gumbel: `mode` must be 'low' or 'high', got {mode!r}")
    return _gumbel(k, shape_arg(shape, "gumbel"), _float_dtype("gumbel", dtype), mode)


@_compiled(1, 2, 3)
def _gumbel(k: Tensor, shape: tuple[int, ...], d: DType, mode: str) -> Tensor:
    return _gumbel_draw(k, shape, d, mode)


def _gumbel_draw(k: Tensor, shape: tuple[int, ...], d: DType, mode: str = "low") -> Tensor:
    from tgfx.numpy import log, log1p
    if mode == "low":
        return -log(-log(_scaled(_unit_floats(k, shape, d), _lit(_tiny(d), d), Tensor.full((), 1.0, d))))
    both = _scaled(_unit_floats(k, (2, *shape), d), Tensor.full((), 0.0, d), Tensor.full((), 1.0, d))
    high, low = both[0], both[1]
    x = (high >= _lit(0.5, d)).where(high, high + _lit(2.0 ** -_NMANT[d], d) * low + _lit(_tiny(d), d))
    return -log(-log1p(-x))


# ---- the truncated normal ----
# XLA's float32 erf (xla/codegen/intrinsic/erf.cc, Eigen's rational interpolant): x p(x^2) / q(x^2) by fused
# multiply-adds, +-1 from |x| >= 3.8325 on. JAX's truncated_normal maps its bounds through it, so ours does too.
_ERF_CLAMP = 3.832506856900711
_ERF_P = (0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861, 0.18520832239976145,
          1.128379143519084)
_ERF_Q = (-1.1791602954361697e-7, 0.000023547966471313185, 0.0010179625278914885, 0.014070470171167667,
          0.11098505178285362, 0.49746925110067538, 1.0)


def _erf(x: Tensor) -> Tensor:
    """erf as XLA computes it: the rational interpolant in float32 (the 16-bit types computed in float32 and rounded
    once), the C library's erf in float64."""
    from tgfx.numpy import abs as absolute
    from tgfx.scipy.special import erf
    d = x.dtype
    if d == dtypes.float64:
        return erf(x)
    if d != dtypes.float32:
        return _erf(x.astype(dtypes.float32)).astype(d)
    f = dtypes.float32
    x2 = x * x
    p = _fma(x2, _lit(_ERF_P[0], f), _lit(_ERF_P[1], f))
    for c in _ERF_P[2:]:
        p = _fma(x2, p, _lit(c, f))
    q = _fma(x2, _lit(_ERF_Q[0], f), _lit(_ERF_Q[1], f))
    for c in _ERF_Q[2:]:
        q = _fma(x2, q, _lit(c, f))
    one = (x < 0).where(_lit(-1.0, f), Tensor.full((), 1.0, f))  # copysign(1, x) for the x the clamp catches
    return (absolute(x) >= _lit(_ERF_CLAMP, f)).where(one, (x * p) / q)


_UINT_OF = {16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def _next_toward(x: Tensor, up: bool) -> Tensor:
    """The float next to `x` toward +inf (`up`) or -inf, as `lax.nextafter(x, +-inf)`: one step of the bit pattern
    (the smallest subnormal from zero; an infinity in the direction of travel and NaN stay)."""
    d = x.dtype
    ui = _UINT_OF[d.itemsize * 8]
    b = x.bitcast(ui)
    away = (x > 0) if up else (x < 0)  # moving away from zero grows the magnitude: the pattern's next integer
    step = away.where(b + Tensor.full((), 1, ui), b - Tensor.full((), 1, ui))
    smallest = Tensor.literal(1 if up else 1 | (1 << (d.itemsize * 8 - 1)), ui)
    out = (x == 0).where(smallest, step).bitcast(d)
    stays = (x != x) | (x == (math.inf if up else -math.inf))
    return stays.where(x, out)


def truncated_normal(key: KeyLike, lower: ArrayLike, upper: ArrayLike, shape: ShapeLike | None = None,
                     dtype: DType | str | type = dtypes.float32) -> Tensor:
    """Standard normal floats conditioned on lower < x < upper, as `jax.random.truncated_normal`.

    The inverse-CDF method JAX uses: u uniform between erf(lower / sqrt 2) and erf(upper / sqrt 2), x = sqrt(2)
    erfinv(u), clipped into the open interval (rounding near the bounds could otherwise step onto them). `lower`
    and `upper` are floats or arrays; the result has `shape`, or their broadcast shape when it is None. Far in one
    tail (both bounds past about 5 in float32) erf rounds to +-1 and the values pile up at the bound, as in JAX.

    >>> w = tg.random.truncated_normal(tg.random.key(0), -2.0, 2.0, (256, 128)) * 0.02
    """
    k = check_key("truncated_normal", key)
    d = _float_dtype("truncated_normal", dtype)
    params = {"lower": lower, "upper": upper}
    out_shape = _result_shape("truncated_normal", shape, params)
    lo, hi = _params("truncated_normal", d, out_shape, params)
    return _truncated_normal(k, lo, hi, out_shape, d)


@_compiled(3, 4)
def _truncated_normal(k: Tensor, lower: Tensor | float, upper: Tensor | float, shape: tuple[int, ...],
                      d: DType) -> Tensor:
    from tgfx.numpy import clip
    lo, hi = _as(lower, d), _as(upper, d)
    sqrt2 = _lit(math.sqrt(2), d)
    # XLA rewrites a division by a constant as a product with its reciprocal, rounded in the dtype
    inv = _lit(float(np.float32(1) / np.float32(math.sqrt(2))) if d != dtypes.float64 else 1 / math.sqrt(2), d)
    a, b = _erf(lo * inv), _erf(hi * inv)
    u = _scaled(_unit_floats(k, shape, d), a, b)
    return clip(sqrt2 * erfinv(u), _next_toward(lo, True), _next_toward(hi, False))


# ---- categorical and choice ----
def categorical(key: KeyLike, logits: ArrayLike, axis: int = -1, shape: ShapeLike | None = None,
                replace: bool = True) -> Tensor:
    """Indices (int32) drawn with probabilities softmax(logits) along `axis`, as `jax.random.categorical`.

    The Gumbel-max trick JAX uses: argmax(logits + gumbel noise) along `axis`. The result has `shape`, or the
    shape of `logits` without `axis` when it is None; a `shape` with more leading axes draws that many samples per
    distribution (the trailing axes must broadcast with logits' batch shape). With `replace=False` each
    distribution gives distinct indices by the Gumbel top-k trick: the leading axes of `shape` (beyond the batch
    shape) count the draws, at most the number of categories.

    >>> tokens = tg.random.categorical(tg.random.key(0), logits)              # logits (batch, vocab) -> (batch,)
    >>> many = tg.random.categorical(tg.random.key(0), logits, shape=(8, batch))   # 8 samples per row
    """
    k = check_key("categorical", key)
    t = logits if isinstance(logits, Tensor) else Tensor(np.asarray(logits))
    if not t.dtype.is_float:
        raise TypeError(f"categorical: `logits` must be floats (log-probabilities), got {t.dtype.name}; convert "
                        f"with .astype(tg.dtypes.float32)")
    if t.ndim == 0:
        raise ValueError("categorical: `logits` must have at least one axis (the categories), got a scalar")
    axis = normalize_axis(axis, t.ndim, "categorical")
    batch = t.shape[:axis] + t.shape[axis + 1:]
    out = batch if shape is None else shape_arg(shape, "categorical")
    if shape is not None and not _broadcasts_to(batch, out):
        raise ValueError(f"categorical: `shape` {out} must end in axes that `logits`' batch shape {batch} (its "
                         f"shape {t.shape} without axis {axis}) broadcasts to")
    if not replace:
        draws = math.prod(out[:len(out) - len(batch)])
        if out[len(out) - len(batch):] != batch:
            raise ValueError(f"categorical: with replace=False `shape` {out} must end in logits' batch shape "
                             f"{batch}")
        if draws > t.shape[axis]:
            raise ValueError(f"categorical: cannot draw {draws} samples without replacement from "
                             f"{t.shape[axis]} categories (`shape` {out}, `logits` {t.shape} along axis {axis})")
    return _categorical(k, t, axis, out, bool(replace))


def _broadcasts_to(small: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    try:
        return tuple(np.broadcast_shapes(small, shape)) == shape
    except ValueError:
        return False


@_compiled(2, 3, 4)
def _categorical(k: Tensor, logits: Tensor, axis: int, shape: tuple[int, ...], replace: bool) -> Tensor:
    from tgfx.numpy import argmax, argsort, expand_dims, moveaxis
    nb = logits.ndim - 1
    prefix = shape[:len(shape) - nb]
    if replace:
        neg_axis = axis - logits.ndim
        noise_shape = list(shape[len(shape) - nb:])
        noise_shape.insert(axis, logits.shape[axis])
        noise = _gumbel_draw(k, (*prefix, *noise_shape), logits.dtype)
        # stored (contiguous) before argmax's two reductions read it: recomputed in each, the hash-fed log can round
        # differently between them, and then no entry equals the maximum (a tgfx lowering bug found with issue #22)
        scores = (noise + expand_dims(logits, tuple(range(len(prefix))))).contiguous()
        return argmax(scores, axis=neg_axis).astype(dtypes.int32)
    g = (logits + _gumbel_draw(k, logits.shape, logits.dtype)).contiguous()   # stored, as above
    n = math.prod(prefix)
    top = argsort(moveaxis(g, axis, -1), axis=-1, descending=True)   # top-k, ties to the lower index as lax.top_k
    top = top[..., :n]                                                 # (*batch, n)
    return moveaxis(top, -1, 0).reshape(shape).astype(dtypes.int32)


def choice(key: KeyLike, a: int | ArrayLike, shape: ShapeLike = (), replace: bool = True,
           p: ArrayLike | None = None, axis: int = 0) -> Tensor:
    """A random sample of `a`'s entries along `axis` (of range(a) for an integer `a`), as `jax.random.choice`.

    `shape` is the shape of the sample: the result is a.shape[:axis] + shape + a.shape[axis + 1:]. Without `p`
    every entry is equally likely: with replacement an index drawn by `randint`, without it the first entries of
    a `permutation`. With `p` (one weight per entry, summing to anything positive) an index is where a uniform
    fraction of the total falls in the cumulative sum; without replacement the Gumbel top-k of log(p).

    >>> batch = tg.random.choice(tg.random.key(0), 1000, (32,), replace=False)    # 32 distinct indices
    >>> coin = tg.random.choice(tg.random.key(1), tg.asarray([0.0, 1.0]), (10,), p=tg.asarray([0.9, 0.1]))
    """
    k = check_key("choice", key)
    shape = shape_arg(shape, "choice")
    if isinstance(a, (bool, np.bool_)):
        raise TypeError("choice: `a` must be an integer or an array, got bool")
    if isinstance(a, (int, np.integer)):
        arr, n = None, int(a)
        out_shape = shape
    else:
        arr = a if isinstance(a, Tensor) else Tensor(np.asarray(a))
        if arr.ndim == 0:
            raise TypeError("choice: `a` must be an integer or an array of at least one axis, got a 0-d array")
        axis = normalize_axis(axis, arr.ndim, "choice")
        n = arr.shape[axis]
        out_shape = arr.shape[:axis] + shape + arr.shape[axis + 1:]
    draws = math.prod(shape)
    if draws == 0:
        return Tensor.full(out_shape, 0, dtypes.int32 if arr is None else arr.dtype)
    if n <= 0:
        raise ValueError(f"choice: `a` must have at least one entry to draw from (got {n}) unless `shape` is empty")
    if not replace and draws > n:
        raise ValueError(f"choice: cannot take a sample of {draws} (`shape` {shape}) without replacement from a "
                         f"population of {n}; pass replace=True or a smaller shape")
    pt = None
    if p is not None:
        pt = p if isinstance(p, Tensor) else Tensor(np.asarray(p))
        if not pt.dtype.is_float:
            pt = pt.astype(dtypes.float32)
        if pt.shape != (n,):
            raise ValueError(f"choice: `p` must be None or a 1-d array with one probability per entry of `a` along "
                             f"axis {axis} ({n}), got shape {pt.shape}")
    return _choice(k, arr, pt, n, shape, bool(replace), axis if arr is not None else 0)


@_compiled(3, 4, 5, 6)
def _choice(k: Tensor, arr: Tensor | None, p: Tensor | None, n: int, shape: tuple[int, ...], replace: bool,
            axis: int) -> Tensor:
    from tgfx.numpy import argsort, cumsum, log, take
    draws = math.prod(shape)
    if p is None and not replace:
        perm = permutation(k, n if arr is None else arr, axis)
        picked = perm.shrink(tuple((0, draws) if i == axis else (0, s) for i, s in enumerate(perm.shape)))
        return picked.reshape(shape if arr is None else arr.shape[:axis] + shape + arr.shape[axis + 1:])
    if p is None:
        ind = randint(k, shape, Tensor.full((), 0, dtypes.int32), Tensor.full((), n, dtypes.int32))
    elif replace:
        total = cumsum(p)
        u = _scaled(_unit_floats(k, shape, p.dtype), Tensor.full((), 0.0, p.dtype), Tensor.full((), 1.0, p.dtype))
        r = total[n - 1] * (Tensor.full((), 1.0, p.dtype) - u)
        ind = (total < r.reshape(shape + (1,))).astype(dtypes.int32).sum(-1).astype(dtypes.int32)  # searchsorted
    else:
        g = (_gumbel_draw(k, (n,), p.dtype) + log(p)).contiguous()   # stored before the sort reads it (see above)
        ind = argsort(g, descending=True)[:draws].astype(dtypes.int32).reshape(shape)
    if arr is None:
        return ind.reshape(shape)
    return take(arr, ind.reshape(-1), axis=axis).reshape(arr.shape[:axis] + shape + arr.shape[axis + 1:])


# ---- gamma, beta, dirichlet ----
def gamma(key: KeyLike, a: ArrayLike, shape: ShapeLike | None = None,
          dtype: DType | str | type = dtypes.float32) -> Tensor:
    """Standard gamma floats (density x^(a-1) e^-x / Gamma(a)), as `jax.random.gamma`, with JAX's gradient.

    `a` > 0 is a float or an array; the result has `shape`, or a's shape when it is None (divide by a rate or
    multiply by a scale for other gamma distributions). Marsaglia and Tsang's method, with a < 1 boosted to a + 1
    and scaled by u^(1/a); every element follows JAX's own sequence of keys, so the samples are JAX's. `grad` with
    respect to `a` is the implicit reparameterisation gradient (as JAX's): d sample / d a at a fixed key.

    >>> x = tg.random.gamma(tg.random.key(0), 2.5, (1000,))
    >>> tg.grad(lambda a: tg.random.gamma(tg.random.key(0), a, (100,)).mean())(tg.asarray(2.5))   # about 1
    """
    return _gamma_entry("gamma", key, a, shape, dtype, False)


def loggamma(key: KeyLike, a: ArrayLike, shape: ShapeLike | None = None,
             dtype: DType | str | type = dtypes.float32) -> Tensor:
    """The log of standard gamma floats, as `jax.random.loggamma`: exp(loggamma(...)) is gamma(...) with the same
    key, but small `a` (where gamma samples underflow to 0) keeps its precision.

    >>> lx = tg.random.loggamma(tg.random.key(0), 0.01, (5,))                 # finite where gamma gives 0
    """
    return _gamma_entry("loggamma", key, a, shape, dtype, True)


def _gamma_entry(fn: str, key: KeyLike, a: ArrayLike, shape: ShapeLike | None, dtype: DType | str | type,
                 log_space: bool) -> Tensor:
    k = check_key(fn, key)
    d = _float_dtype(fn, dtype)
    out = _result_shape(fn, shape, {"a": a})
    (at,) = _params(fn, d, out, {"a": a})
    return _gamma(k, at, out, d, log_space)


def _gamma_draw(k: Tensor, a: Tensor | float, shape: tuple[int, ...], d: DType, log_space: bool) -> Tensor:
    from tgfx.numpy import broadcast_to
    at = broadcast_to(_as(a, d), shape)
    if math.prod(shape) == 0:
        return Tensor.full(shape, 0.0, d)
    return (_loggamma_call if log_space else _gamma_call)(k, at)


# beta and dirichlet call `_gamma_draw` itself, not this jitted core: a jitted function called inside another jit on
# both a traced value and a constant loses the traced call's gradient (a tgfx jit bug found with issue #22)
_gamma = _compiled(2, 3, 4)(_gamma_draw)


def _gamma_sample(k: Tensor, a: Tensor, log_space: bool) -> Tensor:
    """JAX's `_gamma_one` for every element of `a` at once: element i uses key split(k, a.size)[i] and takes the
    same steps JAX's per-element loops take, in one device loop until every element has accepted."""
    from tgfx.lax import while_loop
    from tgfx.numpy import any as any_of
    from tgfx.numpy import log, log1p, power, sqrt
    d = a.dtype
    one, zero = Tensor.full((), 1.0, d), Tensor.full((), 0.0, d)
    boost = a >= one
    alpha = boost.where(a, a + one)
    dd = alpha - _lit(1 / 3, d)
    c = _lit(1 / 3, d) / sqrt(dd)
    k0, k1 = _hash_shape(k, a.shape)          # element i's key: split(k, n)[i]
    key = _split_words(k0, k1, 0)              # key, subkey = split(key)
    sub = _split_words(k0, k1, 1)
    none = Tensor.full(a.shape, 0, u32)
    # carry: the outer key, the inner key (JAX's x_key as it is split), the key of U, V, done, and whether the next
    # step of an element starts a new proposal (split(key, 3)) before its inner step
    init = (*key, none, none, none, none, Tensor.full(a.shape, 1.0, d), Tensor.full(a.shape, False, dtypes.bool),
            Tensor.full(a.shape, True, dtypes.bool))

    def step(s: tuple) -> tuple:
        key0, key1, kk0, kk1, uk0, uk1, v_acc, done, fresh = s
        live = ~done
        new = live & fresh
        key0, key1, kk0, kk1, uk0, uk1 = (
            new.where(w, old) for w, old in zip((*_split_words(key0, key1, 0), *_split_words(key0, key1, 1),
                                                 *_split_words(key0, key1, 2)), (key0, key1, kk0, kk1, uk0, uk1),
                                                strict=True))
        # the inner loop's step: kk, subkey = split(kk); x = normal(subkey); v = 1 + x c, until v > 0
        nk0, nk1 = _split_words(kk0, kk1, 0)
        x = _normal_of(_unit_floats_of(*threefry2x32(*_split_words(kk0, kk1, 1), _zero32(), _zero32()), d))
        v = _fma(x, c, one)
        out_inner = ~(v <= zero)
        xx, vvv = x * x, v * v * v
        u = _unit_floats_of(*threefry2x32(uk0, uk1, _zero32(), _zero32()), d)
        reject = (u >= _fma(_lit(-0.0331, d), xx * xx, one)) & \
            (log(u) >= xx * _lit(0.5, d) + dd * ((one - vvv) + log(vvv)))
        proposed = live & out_inner
        return (key0, key1, live.where(nk0, kk0), live.where(nk1, kk1), uk0, uk1, proposed.where(vvv, v_acc),
                done | (proposed & ~reject), live.where(out_inner & reject, fresh))

    state = while_loop(lambda s: any_of(~s[7]), step, init)
    v_acc = state[6]
    u = _unit_floats_of(*threefry2x32(*sub, _zero32(), _zero32()), d)   # uniform(subkey, ())
    if log_space:
        log_u = log1p(-u)                      # -exponential(subkey)
        log_boost = (boost | (log_u == zero)).where(zero, log_u * (one / a))
        return log(dd) + log(v_acc) + log_boost
    return dd * v_acc * boost.where(one, power(one - u, one / a))


def _zero32() -> Tensor:
    return Tensor.full((), 0, u32)


def _split_words(k0: Tensor, k1: Tensor, i: int) -> tuple[Tensor, Tensor]:
    """Key i of split(key) for the per-element keys (k0, k1): the hash of counter (0, i)."""
    return threefry2x32(k0, k1, _zero32(), Tensor.literal(i, u32))


def _gamma_forward(k: Tensor, a: Tensor) -> Tensor:
    return _gamma_sample(k, a, False)


def _loggamma_forward(k: Tensor, a: Tensor) -> Tensor:
    return _gamma_sample(k, a, True)


def _gamma_backward(grads: tuple[Tensor, ...], call: object) -> tuple[None, Tensor]:
    g, (_, a), (x,) = grads, call.inputs, call.outputs
    return None, g * _gamma_grad_call(a, x)


def _loggamma_backward(grads: tuple[Tensor, ...], call: object) -> tuple[None, Tensor]:
    from tgfx.numpy import exp
    g, (_, a), (log_x,) = grads, call.inputs, call.outputs
    x = exp(log_x)
    x = (x == 0).where(_lit(_tiny(x.dtype), x.dtype), x)   # d log x = dx / x, with x underflowed to 0 kept finite
    return None, g * _gamma_grad_call(a, x) / x


def _no_second_order(grads: tuple[Tensor, ...], call: object) -> tuple[Tensor, Tensor]:
    """The derivative of dx/da itself is not implemented (JAX has none either): NaN, so that a second derivative
    with respect to `a` shows it is missing instead of coming out silently wrong. First-order forward mode, which
    transposes the backward, never uses these."""
    g, (a, x) = grads, call.inputs
    nan = g * Tensor.full((), math.nan, g.dtype)   # linear in the cotangent, as forward mode's transpose needs
    return nan.astype(a.dtype), nan.astype(x.dtype)


_gamma_call = function(_gamma_forward, grad_fxn=_gamma_backward, cache=True)
_loggamma_call = function(_loggamma_forward, grad_fxn=_loggamma_backward, cache=True)


def random_gamma_grad(a: Tensor, x: Tensor) -> Tensor:
    """d x / d a for x a standard gamma sample of shape a, as `jax.lax.random_gamma_grad`: -(dP/da) / (dP/dx) for
    P(a, x) the regularised lower incomplete gamma function, by its power series (x below 1 or a) or its continued
    fraction for Q = 1 - P, each with the derivative in a carried along (JAX's and Cephes' iterations). NaN outside
    a > 0, x >= 0; 0 at x = 0. The 16-bit types are computed in float32."""
    from tgfx.numpy import exp, isnan, log
    from tgfx.scipy.special import gammaln
    d = a.dtype
    if d in (dtypes.float16, dtypes.bfloat16):
        return random_gamma_grad(a.astype(dtypes.float32), x.astype(dtypes.float32)).astype(d)
    a, x = _broadcast_pair(a, x.astype(d))
    is_nan = isnan(a) | isnan(x)
    x_zero = x == 0
    domain = (x < 0) | (a <= 0)
    use_cf = (x > 1) & (x > a)
    safe_x, safe_a = domain.where(Tensor.full((), 1.0, d), x), domain.where(Tensor.full((), 1.0, d), a)
    ax = safe_a * log(safe_x) - safe_x - gammaln(safe_a)
    underflow = ax < _lit(-math.log(np.finfo(d.np).max), d)
    ax = exp(ax)
    enabled = ~(x_zero | domain | underflow | is_nan)
    out = use_cf.where(-_igammac_cf_sample_grad(ax, safe_x, safe_a, enabled & use_cf),
                       _igamma_series_sample_grad(ax, safe_x, safe_a, enabled & ~use_cf))
    out = x_zero.where(Tensor.full((), 0.0, d), out)
    return (domain | is_nan).where(Tensor.full((), math.nan, d), out)


def _gamma_grad_value(a: Tensor, x: Tensor) -> Tensor:
    return random_gamma_grad(a, x)


_gamma_grad_call = function(_gamma_grad_value, grad_fxn=_no_second_order, cache=True)


def _broadcast_pair(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    from tgfx.numpy import broadcast_to
    shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    return broadcast_to(a, shape), broadcast_to(b, shape)


def _eps(d: DType) -> Tensor:
    return _lit(2.0 ** -_NMANT[d], d)


def _igamma_series_sample_grad(ax: Tensor, x: Tensor, a: Tensor, enabled: Tensor) -> Tensor:
    """JAX's `_igamma_series` in SAMPLE_DERIVATIVE mode: the series of P(a, x) and its a-derivative
    (`tgfx.scipy.special`'s), combined into the sample's derivative."""
    from tgfx.numpy import log
    from tgfx.scipy._special_gamma import igamma_series_sums
    from tgfx.scipy.special import digamma
    ans, dans_da = igamma_series_sums(x, a, enabled, derivative=True)
    return -(dans_da + ans * (log(x) - digamma(a + 1))) * x / a


def _igammac_cf_sample_grad(ax: Tensor, x: Tensor, a: Tensor, enabled: Tensor) -> Tensor:
    """JAX's `_igammac_continued_fraction` in SAMPLE_DERIVATIVE mode: the continued fraction of Q(a, x) and its
    a-derivative (`tgfx.scipy.special`'s), combined into the sample's derivative."""
    from tgfx.numpy import log
    from tgfx.scipy._special_gamma import igammac_fraction
    from tgfx.scipy.special import digamma
    ans, dans = igammac_fraction(x, a, enabled, derivative=True)
    return -(dans + ans * (log(x) - digamma(a))) * x


def beta(key: KeyLike, a: ArrayLike, b: ArrayLike, shape: ShapeLike | None = None,
         dtype: DType | str | type = dtypes.float32) -> Tensor:
    """Beta floats (density x^(a-1) (1-x)^(b-1) / B(a, b) on [0, 1]), as `jax.random.beta`: G_a / (G_a + G_b) for
    two gamma samples, computed from their logs (so small a and b keep their precision); differentiable in a and b.

    >>> p = tg.random.beta(tg.random.key(0), 2.0, 5.0, (1000,))
    """
    k = check_key("beta", key)
    d = _float_dtype("beta", dtype)
    params = {"a": a, "b": b}
    out = _result_shape("beta", shape, params)
    at, bt = _params("beta", d, out, params)
    return _beta(k, at, bt, out, d)


@_compiled(3, 4)
def _beta(k: Tensor, a: Tensor | float, b: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import exp, maximum
    ka, kb = _split2(k)
    log_a, log_b = _gamma_draw(ka, a, shape, d, True), _gamma_draw(kb, b, shape, d, True)
    top = maximum(log_a, log_b)
    ga, gb = exp(log_a - top), exp(log_b - top)
    return ga / (ga + gb)


def dirichlet(key: KeyLike, alpha: ArrayLike, shape: ShapeLike | None = None,
              dtype: DType | str | type = dtypes.float32) -> Tensor:
    """Points on the simplex with density prod x_i^(alpha_i - 1), as `jax.random.dirichlet`: gamma samples of each
    alpha_i, normalised (a softmax of their logs).

    `alpha` has shape (..., n); the result has shape `shape + (n,)`, or alpha's shape when `shape` is None
    (`shape` must broadcast with alpha's leading axes).

    >>> w = tg.random.dirichlet(tg.random.key(0), tg.asarray([1.0, 2.0, 3.0]), (10,))   # (10, 3), rows sum to 1
    """
    k = check_key("dirichlet", key)
    d = _float_dtype("dirichlet", dtype)
    t = alpha.astype(d) if isinstance(alpha, Tensor) else Tensor(np.asarray(alpha), d)
    if t.ndim == 0:
        raise ValueError("dirichlet: `alpha` must be an array of at least one axis (the categories), got a scalar")
    out = t.shape[:-1] if shape is None else shape_arg(shape, "dirichlet")
    if not _broadcasts_to(t.shape[:-1], out):
        raise ValueError(f"dirichlet: `alpha`'s leading shape {t.shape[:-1]} (alpha has shape {t.shape}) must "
                         f"broadcast to `shape` {out}")
    return _dirichlet(k, t, out, d)


@_compiled(2, 3)
def _dirichlet(k: Tensor, alpha: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    from tgfx.numpy import exp
    from tgfx.transforms.grad import stop_gradient
    log_g = _gamma_draw(k, alpha, shape + alpha.shape[-1:], d, True)
    e = exp(log_g - stop_gradient(log_g.max(axis=-1, keepdims=True)))
    return e / e.sum(axis=-1, keepdims=True)
