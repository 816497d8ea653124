"""`tg.random`: splittable, counter-based random numbers, bit for bit those of `jax.random`.

A key is a `uint32[2]` Tensor, as `jax.random.PRNGKey` gives. Nothing is stateful: every function takes a key and
the same key always gives the same numbers, so a program draws fresh numbers by `split`ting or `fold_in`-ing keys:

>>> import tgfx as tg
>>> key = tg.random.key(0)
>>> key, sub = tg.random.split(key)
>>> x = tg.random.normal(sub, (3,))          # equals jax.random.normal(jax.random.split(jax.random.key(0))[1], (3,))

The generator is Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as
1, 2, 3", SC 2011), JAX's default, with JAX's default (`jax_threefry_partitionable=True`) way of turning a key into
many numbers: element i of a result of shape S is the hash of the counter pair (i >> 32, i & 0xFFFFFFFF), i the
row-major flat index into S, and its 32 bits are the xor of the two hashed words. `split(key, n)[i]` is the hashed
pair for counter i, and `fold_in(key, d)` the hashed pair for counter d. Everything is built from uint32 Tensor ops
(add, xor, shift), so it traces: random functions work inside `tg.jit` and `tg.function`, where the key is an
argument like any other Tensor.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tgfx.dtypes import DType, dtypes, host_np, max_value, min_value, to_dtype
from tgfx.ir.ops import Ops
from tgfx.ir.uop import UOp
from tgfx.tensor import ArrayLike, Tensor, _iota, broadcast, normalize_axis
from tgfx.tensor import _shape_arg as shape_arg

u32 = dtypes.uint32
KEY_PARITY = 0x1BD11BDA  # Threefish's key-schedule constant: the third key word is k0 ^ k1 ^ KEY_PARITY
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))  # Threefry-2x32's rotation amounts, alternating every 4 rounds
SeedLike = int | np.integer | Tensor
KeyLike = Tensor | np.ndarray


def _compiled(*static: int) -> Callable[[Callable], Callable]:
    """A draw compiled once per key shape and static arguments (`tg.jit`), as JAX jits its random functions: an eager
    call replays it instead of building the hash's graph again, and inside a trace it is inlined."""
    def wrap(f: Callable) -> Callable:
        from tgfx.transforms.jit import jit
        return jit(f, static_argnums=static)
    return wrap


def _scalar(v: int, d: DType, like: Tensor) -> Tensor:
    """A scalar argument of a compiled draw as a Tensor on `like`'s device: its interned one-element buffer."""
    from tgfx.lowering.constants import const_buffer
    device = like.device
    return Tensor(const_buffer(d, v, device)) if isinstance(device, str) else Tensor.full((), v, d)


# ---- the hash ----
def _rotl(x: Tensor, r: int) -> Tensor:
    return (x << Tensor.literal(r, u32)) | (x >> Tensor.literal(32 - r, u32))


def threefry2x32(k0: ArrayLike, k1: ArrayLike, x0: ArrayLike, x1: ArrayLike) -> tuple[Tensor, Tensor]:
    """Threefry-2x32 with 20 rounds: the key (k0, k1) hashes the counter words (x0, x1) into two words.

    All four are uint32 Tensors (or Python ints) that broadcast together; the result has their broadcast shape.
    Twenty rounds of add/rotate/xor with a key injection after every four, as Random123's `threefry2x32`:

    >>> [hex(int(v.item())) for v in threefry2x32(0, 0, 0, 0)]
    ['0x6b200159', '0x99ba4efe']
    """
    k0, k1, x0, x1 = (_uint32(v, name) for v, name in ((k0, "k0"), (k1, "k1"), (x0, "x0"), (x1, "x1")))
    ks = (k0, k1, k0 ^ k1 ^ Tensor.literal(KEY_PARITY, u32))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + Tensor.literal(i + 1, u32)
    return x0, x1


def _uint32(v: ArrayLike, name: str) -> Tensor:
    if isinstance(v, Tensor):
        if v.dtype != u32:
            raise TypeError(f"threefry2x32: `{name}` must be uint32, got {v.dtype.name}")
        return v
    return Tensor.full((), int(v) & 0xFFFFFFFF, u32) if isinstance(v, (int, np.integer)) else Tensor(v, u32)


def _counters(shape: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """The row-major flat index into `shape` as two uint32 words (high, low), as JAX's iota_2x32_shape."""
    size = math.prod(shape)
    if size == 0 or not shape:  # a scalar is counter 0, as in JAX
        zero = Tensor.full(shape, 0, u32)
        return zero, zero
    if size <= 1 << 32:
        return Tensor.full(shape, 0, u32), Tensor.arange(size, dtype=u32).reshape(shape)
    flat = _iota(size, dtypes.uint64)   # exact in either x64 mode
    return (flat >> 32).astype(u32).reshape(shape), flat.astype(u32).reshape(shape)


def _words(key: Tensor) -> tuple[Tensor, Tensor]:
    return key.shrink(((0, 1),)).reshape(()), key.shrink(((1, 2),)).reshape(())


def _hash_shape(key: Tensor, shape: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Both hashed words of every counter of `shape` under `key`."""
    hi, lo = _counters(shape)
    return threefry2x32(*_words(key), hi, lo)


# ---- keys ----
def key(seed: SeedLike) -> Tensor:
    """A PRNG key (uint32[2]) from an integer seed, as `jax.random.PRNGKey(seed)` (= `key_data(jax.random.key(seed))`).

    A Python or numpy integer is taken as JAX takes it by default (32-bit mode): its low 32 bits, so
    `key(-1)` is `[0, 0xFFFFFFFF]` and `key(2**32 + 7)` is `[0, 7]`; a Python int outside the int64 range is an
    error. An integer Tensor seed (a traced one too) of 32 bits gives `[0, seed]`, of 64 bits `[seed >> 32,
    seed & 0xFFFFFFFF]`.

    >>> tg.random.key(42).tolist()
    [0, 42]
    """
    if isinstance(seed, Tensor):
        if seed.ndim != 0 or not seed.dtype.is_int:
            raise TypeError(f"key: `seed` must be a scalar integer, got a {seed.dtype.name} Tensor of shape "
                            f"{seed.shape}")
        if seed.dtype.bits == 64:
            bits = seed.bitcast(dtypes.uint64)
            return _pair((bits >> 32).astype(u32), bits.astype(u32))
        return _pair(Tensor.full((), 0, u32), seed.astype(u32))  # narrower seeds sign-extend, as in JAX
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"key: `seed` must be an integer, got {type(seed).__name__} {seed!r}")
    if isinstance(seed, int) and not -(1 << 63) <= seed < (1 << 63):
        raise OverflowError(f"key: `seed` {seed} does not fit in int64; JAX takes seeds as int64 values")
    return _pair(Tensor.full((), 0, u32), Tensor.full((), int(seed) & 0xFFFFFFFF, u32))


def PRNGKey(seed: SeedLike) -> Tensor:  # noqa: N802 - JAX's name
    """The same as `key`: JAX's legacy name for a raw uint32[2] key."""
    return key(seed)


def _pair(a: Tensor, b: Tensor) -> Tensor:
    """[a, b] as a uint32[2] Tensor, built from the two scalars without touching host memory (so it traces)."""
    first = Tensor.arange(2, dtype=dtypes.int32) == 0
    return first.where(a.reshape(1).expand((2,)), b.reshape(1).expand((2,)))


def check_key(fn: str, k: KeyLike) -> Tensor:
    """`k` as a uint32[2] key Tensor, or a clear error naming `fn`'s `key` argument."""
    if isinstance(k, np.ndarray) and k.dtype == np.uint32 and k.shape == (2,):
        return Tensor(k)
    if not isinstance(k, Tensor):
        hint = f"; make one with tg.random.key({k!r})" if isinstance(k, (int, np.integer)) else ""
        raise TypeError(f"{fn}: `key` must be a uint32[2] PRNG key Tensor, got {type(k).__name__}{hint}")
    if k.dtype != u32 or k.shape != (2,):
        hint = "; index one key out of a batch of split keys, e.g. keys[0]" if k.dtype == u32 and k.ndim > 1 and \
            k.shape[-1] == 2 else "; make one with tg.random.key(seed)"
        raise TypeError(f"{fn}: `key` must be a uint32[2] PRNG key, got {k.dtype.name}{list(k.shape)}{hint}")
    return k


def split(key: KeyLike, num: int | Sequence[int] = 2) -> Tensor:
    """`num` new keys from `key`: a uint32[num, 2] Tensor (uint32[*num, 2] for a tuple), as `jax.random.split`.

    Key i is the hash of counter i, so `split(key, n)[i]` equals `fold_in(key, i)`; use one key per purpose and
    never reuse a key that was split.

    >>> key, sub = tg.random.split(tg.random.key(0))
    >>> keys = tg.random.split(key, 4)              # uint32[4, 2]: keys[0] ... keys[3]
    """
    return _split(check_key("split", key), shape_arg(num, "split"))


@_compiled(1)
def _split(k: Tensor, shape: tuple[int, ...]) -> Tensor:
    b0, b1 = _hash_shape(k, shape)
    return b0.reshape(shape + (1,)).pad_zeros([(0, 0)] * len(shape) + [(0, 1)]) | \
        b1.reshape(shape + (1,)).pad_zeros([(0, 0)] * len(shape) + [(1, 0)])


def fold_in(key: KeyLike, data: int | np.integer | Tensor) -> Tensor:
    """A new key that mixes the 32-bit integer `data` into `key`, as `jax.random.fold_in`.

    A Python `data` must be in [0, 2**32); an integer Tensor (e.g. a loop index under `jit`) is taken modulo 2**32.

    >>> step_key = tg.random.fold_in(tg.random.key(0), 7)
    """
    k = check_key("fold_in", key)
    if isinstance(data, Tensor):
        if data.ndim != 0 or not (data.dtype.is_int or data.dtype.is_bool):
            raise TypeError(f"fold_in: `data` must be a scalar integer, got a {data.dtype.name} Tensor of shape "
                            f"{data.shape}")
        d = data.astype(u32)
    elif isinstance(data, (int, np.integer)) and not isinstance(data, (bool, np.bool_)):
        if not 0 <= int(data) < (1 << 32):
            raise OverflowError(f"fold_in: `data` {data} is out of bounds for uint32 (0 <= data < 2**32)")
        d = _scalar(int(data), u32, k)
    else:
        raise TypeError(f"fold_in: `data` must be an integer, got {type(data).__name__} {data!r}")
    return _fold_in(k, d)


@_compiled()
def _fold_in(k: Tensor, d: Tensor) -> Tensor:
    b0, b1 = threefry2x32(*_words(k), Tensor.full((), 0, u32), d)
    return _pair(b0, b1)


# ---- raw bits ----
_UINTS = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def _random_bits(k: Tensor, nbits: int, shape: tuple[int, ...]) -> Tensor:
    return _combine(*_hash_shape(k, shape), nbits)


def _combine(b0: Tensor, b1: Tensor, nbits: int) -> Tensor:
    """`nbits` random bits from the two hashed words of a counter, as JAX's threefry_random_bits."""
    if nbits == 64:
        return (b0.astype(dtypes.uint64) << 32) | b1.astype(dtypes.uint64)
    out = b0 ^ b1
    return out if nbits == 32 else out.astype(_UINTS[nbits])


def bits(key: KeyLike, shape: int | Sequence[int] = (), dtype: DType | str = dtypes.uint32) -> Tensor:
    """Uniformly random bits as unsigned integers of `dtype` (uint8/16/32/64), as `jax.random.bits`.

    >>> tg.random.bits(tg.random.key(0), (2,)).tolist()       # the same words jax.random.bits gives
    [4070199207, 4202968722]
    """
    k = check_key("bits", key)
    d = to_dtype(dtype)
    if not d.is_unsigned:
        raise TypeError(f"bits: `dtype` must be an unsigned integer type, got {d.name}")
    return _bits(k, d.bits, shape_arg(shape, "bits"))


@_compiled(1, 2)
def _bits(k: Tensor, nbits: int, shape: tuple[int, ...]) -> Tensor:
    return _random_bits(k, nbits, shape)


# ---- floats ----
_FLOAT_LAYOUT = {  # dtype: (total bits, mantissa bits, bits of 1.0)
    dtypes.float16: (16, 10, 0x3C00), dtypes.bfloat16: (16, 7, 0x3F80), dtypes.float32: (32, 23, 0x3F800000),
    dtypes.float64: (64, 52, 0x3FF0000000000000),
}


def _float_dtype(fn: str, dtype: DType | str | type) -> DType:
    d = to_dtype(dtype)
    if not d.is_float:
        raise TypeError(f"{fn}: `dtype` must be a float type, got {d.name}")
    return d


def _bound(v: ArrayLike, d: DType, shape: tuple[int, ...], fn: str, name: str) -> Tensor:
    """A bound or parameter (`minval`, `p`, ...) as a Tensor of dtype `d` that broadcasts to the result `shape`."""
    t = v.astype(d) if isinstance(v, Tensor) else Tensor.full((), v, d) if isinstance(v, (bool, int, float)) else \
        Tensor(np.asarray(v)).astype(d)
    try:
        fits = np.broadcast_shapes(t.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{fn}: `{name}` of shape {t.shape} does not broadcast to the result shape {shape}")
    return t


def _unit_floats(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    """Floats in [0, 1): random mantissa bits under the exponent of 1.0, minus 1 (JAX's construction)."""
    return _unit_floats_of(*_hash_shape(k, shape), d)


def _unit_floats_of(b0: Tensor, b1: Tensor, d: DType) -> Tensor:
    """`_unit_floats` from the hashed words of each element's counter (or of per-element keys' counter 0)."""
    nbits, nmant, one = _FLOAT_LAYOUT[d]
    rng_bits = 8 if nmant < 8 else nbits  # bfloat16 draws 8 bits, as JAX does
    b = _combine(b0, b1, rng_bits)
    if rng_bits != nbits:
        b = b.astype(_UINTS[nbits])
    return ((b >> Tensor.literal(rng_bits - nmant, b.dtype)) | Tensor.literal(one, b.dtype)).bitcast(d) - \
        Tensor.full((), 1.0, d)


def uniform(key: KeyLike, shape: int | Sequence[int] = (), dtype: DType | str | type = dtypes.float32,
            minval: ArrayLike = 0.0, maxval: ArrayLike = 1.0) -> Tensor:
    """Uniform floats in [minval, maxval), as `jax.random.uniform` (bit for bit).

    `minval` and `maxval` are scalars or Tensors that broadcast to `shape`.

    >>> u = tg.random.uniform(tg.random.key(0), (2, 3), minval=-1.0, maxval=1.0)
    """
    k = check_key("uniform", key)
    d = _float_dtype("uniform", dtype)
    shape = shape_arg(shape, "uniform")
    lo, hi = _draw_arg(minval, d, shape, "uniform", "minval"), _draw_arg(maxval, d, shape, "uniform", "maxval")
    return _uniform(k, lo, hi, shape, d)


@_compiled(3, 4)
def _uniform(k: Tensor, lo: Tensor | float, hi: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    return _scaled(_unit_floats(k, shape, d), _as(lo, d), _as(hi, d))


def _draw_arg(v: ArrayLike, d: DType, shape: tuple[int, ...], fn: str, name: str) -> Tensor | float:
    """What a compiled draw of dtype `d` takes for a bound or parameter: a Python float (or int) as itself (a scalar
    argument, one trace for every value) where `d` holds a float32 exactly, with no Tensor made of it to check (a
    scalar broadcasts to any shape: two Tensors per eager `uniform(key, shape, minval=-5.0, maxval=5.0)`, 36 of its
    193 Python calls); else the bound's Tensor (`_bound`), checked."""
    if _scalar_arg(v, d):
        return float(v)
    return _bound(v, d, shape, fn, name)


def _bound_arg(v: ArrayLike, t: Tensor) -> Tensor | float:
    """`_draw_arg` for a bound whose Tensor `t` was made and checked already."""
    return float(v) if _scalar_arg(v, t.dtype) else t


def _scalar_arg(v: ArrayLike, d: DType) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and d.itemsize <= 4


def _as(v: Tensor | float, d: DType) -> Tensor:
    return v.astype(d) if isinstance(v, Tensor) else Tensor.full((), v, d)


def _scaled(u: Tensor, lo: Tensor, hi: Tensor) -> Tensor:
    from tgfx.numpy import maximum
    return maximum(lo, _fma(u, hi - lo, lo))


def _fma(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """a * b + c with one rounding in float32/float64, as XLA's CPU code fuses it (and the same whether the inputs are
    constants or not). float16 rounds once too (LLVM contracts XLA's half multiply-add into one float fma, then
    rounds to half); bfloat16 rounds after each op, as XLA normalises each bfloat16 op to float and back."""
    if a.dtype == dtypes.float16:
        return _fma(a.astype(dtypes.float32), b.astype(dtypes.float32), c.astype(dtypes.float32)).astype(a.dtype)
    if a.dtype not in (dtypes.float32, dtypes.float64):
        return a * b + c
    a, b, c = broadcast(a, b, c.astype(a.dtype), name="fma")
    return Tensor(UOp(Ops.MULACC, a.dtype, (a.uop, b.uop, c.uop)))


def normal(key: KeyLike, shape: int | Sequence[int] = (), dtype: DType | str | type = dtypes.float32) -> Tensor:
    """Standard normal floats, as `jax.random.normal`: sqrt(2) * erfinv(u) for u uniform in (-1, 1).

    The inverse error function is Giles' polynomial approximation, the one XLA evaluates, so results agree with JAX
    to within the rounding of the `log1p` inside it (a couple of ulp at most; most values are identical).

    >>> z = tg.random.normal(tg.random.key(0), (3,))
    """
    k = check_key("normal", key)
    return _normal(k, shape_arg(shape, "normal"), _float_dtype("normal", dtype))


@_compiled(1, 2)
def _normal(k: Tensor, shape: tuple[int, ...], d: DType) -> Tensor:
    return _normal_of(_unit_floats(k, shape, d))


def _normal_of(unit: Tensor) -> Tensor:
    """Standard normals from floats in [0, 1): JAX's map onto (-1, 1) and sqrt(2) erfinv."""
    d = unit.dtype
    lo = float(np.nextafter(np.array(-1.0, host_np(d)), np.array(0.0, host_np(d)), dtype=host_np(d)))
    if d == dtypes.bfloat16:
        lo = -1.0 + 2.0 ** -8  # the bfloat16 after -1 toward 0
    u = _scaled(unit, Tensor.literal(lo, d), Tensor.full((), 1.0, d))
    return Tensor.literal(math.sqrt(2), d) * erfinv(u)



# Giles, "Approximating the erfinv function", GPU Computing Gems Jade Edition (2011): with w = -log(1 - x^2),
# erfinv(x) = x * p(t) for a polynomial p per range of w, t = w - shift or sqrt(w) - shift. Each piece is
# (w below, uses sqrt(w), shift, Giles' coefficients highest degree first); XLA evaluates the same pieces.
_GILES_F32 = (
    (5.0, False, 2.5, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                -0.00417768164, 0.246640727, 1.50140941)),
    (math.inf, True, 3.0, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682)),
)
_GILES_F64 = (
    (6.25, False, 3.125, (-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
                   1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
                   6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
                   2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
                   1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
                   4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
                   0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
                   0.24015818242558961693, 1.6536545626831027356)),
    (16.0, True, 3.25, (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
                  1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
                  2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
                  6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
                  0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
                  -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
                  3.0838856104922207635)),
    (math.inf, True, 5.0, (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
                     -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
                     2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
                     -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
                     7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
                     1.0103004648645343977, 4.8499064014085844221)),
)


def erfinv(x: Tensor) -> Tensor:
    """The inverse error function on (-1, 1) (+-inf at +-1), by Giles' approximation as XLA computes it.

    float64 uses the double-precision polynomials; float16 and bfloat16 compute in float32 and round once.
    """
    from tgfx.numpy import log1p, sqrt
    d = x.dtype
    if d in (dtypes.float16, dtypes.bfloat16):
        return erfinv(x.astype(dtypes.float32)).astype(d)
    w = -log1p(-(x * x))
    sqrt_w = sqrt(w)
    out = None
    for upper, uses_sqrt, shift, coeffs in reversed(_GILES_F64 if d == dtypes.float64 else _GILES_F32):
        t = (sqrt_w if uses_sqrt else w) - Tensor.literal(shift, d)
        p = Tensor.literal(coeffs[0], d)
        for c in coeffs[1:]:
            p = _fma(p, t, Tensor.literal(c, d))
        out = p if out is None else (w < Tensor.literal(upper, d)).where(p, out)
    edge = (x == 1.0) | (x == -1.0)  # the polynomial is indeterminate at +-1
    return edge.where(x * math.inf, out * x)


def bernoulli(key: KeyLike, p: ArrayLike = 0.5, shape: int | Sequence[int] | None = None) -> Tensor:
    """Booleans that are True with probability `p`, as `jax.random.bernoulli`: `uniform(key, shape) < p`.

    `p` is a float scalar or Tensor (its dtype is the dtype of the uniform draw); the result has `shape`, or p's
    shape when `shape` is None.

    >>> coin = tg.random.bernoulli(tg.random.key(0), 0.3, (1000,))
    """
    k = check_key("bernoulli", key)
    if type(p) is float:   # (the commonest: its draw is float32's, its shape `shape`'s, no Tensor of it to check)
        return _bernoulli(k, p, () if shape is None else shape_arg(shape, "bernoulli"), dtypes.float32)
    pt = p if isinstance(p, Tensor) else Tensor.full((), p, dtypes.float32) if isinstance(p, float) else \
        Tensor(np.asarray(p)) if not isinstance(p, (bool, int)) else None
    if pt is None or not pt.dtype.is_float:
        got = type(p).__name__ if pt is None else pt.dtype.name
        raise TypeError(f"bernoulli: probability `p` must be a float or a float Tensor, got {got}")
    out_shape = pt.shape if shape is None else shape_arg(shape, "bernoulli")
    _bound(pt, pt.dtype, out_shape, "bernoulli", "p")
    return _bernoulli(k, _bound_arg(p, pt), out_shape, pt.dtype)


@_compiled(2, 3)
def _bernoulli(k: Tensor, p: Tensor | float, shape: tuple[int, ...], d: DType) -> Tensor:
    return _unit_floats(k, shape, d) < _as(p, d)


# ---- integers ----
def _int_bound(v: ArrayLike, fn: str, name: str) -> Tensor:
    """A randint bound as an integer Tensor: Python ints as the default int (int64 in x64 mode, else int32: a bound
    outside it is an OverflowError, as in JAX), floats and float Tensors truncated to int32 as JAX's `astype(int)`."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{fn}: `{name}` must be an integer, got bool")
    if isinstance(v, (int, np.integer)):
        d = dtypes.default_int
        if not min_value(d) <= int(v) <= max_value(d):
            hint = "" if d.bits == 64 else "; enable 64-bit types with tgfx.config.update('x64', True)"
            raise OverflowError(f"{fn}: `{name}` {v} does not fit in {d.name}{hint}")
        return Tensor.full((), int(v), d)
    t = v if isinstance(v, Tensor) else Tensor(np.asarray(v))
    if t.dtype.is_bool:
        raise TypeError(f"{fn}: `{name}` must be an integer, got bool")
    return t if t.dtype.is_int else t.astype(dtypes.int32)


def _clip_to(v: Tensor, d: DType) -> Tensor:
    """`v` clipped to the range both its own dtype and `d` can hold, then converted to `d` (no wrap-around)."""
    from tgfx.numpy import clip
    lo, hi = max(min_value(d), min_value(v.dtype)), min(max_value(d), max_value(v.dtype))
    return clip(v, Tensor.full((), lo, v.dtype), Tensor.full((), hi, v.dtype)).astype(d)


def _rem(a: Tensor, span: Tensor) -> Tensor:
    """a % span for unsigned Tensors, with a % 0 = a as XLA defines it (tgfx's own remainder by zero gives 0)."""
    zero = span == 0
    return zero.where(a, a % zero.where(Tensor.full((), 1, span.dtype), span))


def randint(key: KeyLike, shape: int | Sequence[int], minval: ArrayLike, maxval: ArrayLike,
            dtype: DType | str | type = dtypes.int32) -> Tensor:
    """Uniform integers in [minval, maxval), as `jax.random.randint` (bit for bit).

    Bounds are clipped to `dtype`'s range, and `maxval` one past its largest value (e.g. 256 for uint8) reaches
    it; where `maxval <= minval` the result is `minval`. As JAX does, two words of random bits per value are
    reduced modulo the span, which leaves a bias of at most span / 2**32 for 32-bit types; types narrower than
    32 bits are drawn as int32 and converted.

    >>> dice = tg.random.randint(tg.random.key(0), (10,), 1, 7)
    """
    from tgfx.numpy import clip
    k = check_key("randint", key)
    d = to_dtype(dtype)
    if not d.is_int:
        raise TypeError(f"randint: `dtype` must be an integer type, got {d.name}")
    shape = shape_arg(shape, "randint")
    lo, hi = _int_bound(minval, "randint", "minval"), _int_bound(maxval, "randint", "maxval")
    for bound, name in ((lo, "minval"), (hi, "maxval")):
        _bound(bound, bound.dtype, shape, "randint", name)
    sample = d
    if d.bits < 32:  # drawn in 32 bits, as JAX does, so the modulo bias stays small
        sample = dtypes.int32
        lo = clip(lo, Tensor.full((), min_value(d), lo.dtype), Tensor.full((), max_value(d), lo.dtype)) \
            .astype(dtypes.int32)
        hi = clip(hi, Tensor.full((), min_value(d), hi.dtype), Tensor.full((), max_value(d) + 1, hi.dtype)) \
            .astype(dtypes.int32)
    return _randint(k, shape, lo, hi, sample).astype(d)


@_compiled(1, 4)
def _randint(k: Tensor, shape: tuple[int, ...], lo: Tensor, hi: Tensor, d: DType) -> Tensor:
    nbits = d.bits
    udt = _UINTS[nbits]
    above = hi > _clip_to(Tensor.full((), max_value(d), d), hi.dtype)  # maxval past d's range: the span grows by one
    lo, hi = _clip_to(lo, d), _clip_to(hi, d)
    k1, k2 = _split2(k)
    higher, lower = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
    span = (hi - lo).bitcast(udt) if not d.is_unsigned else hi - lo
    span = (hi <= lo).where(Tensor.full((), 1, udt), span)
    span = (above & (hi > lo)).where(span + 1, span)
    # 2**nbits % span without overflow: (2**(nbits/2) % span)**2 % span
    mult = _rem(Tensor.full((), 1 << (nbits // 2), udt).expand(span.shape), span)
    mult = _rem(mult * mult, span)
    offset = _rem(_rem(higher, span) * mult + _rem(lower, span), span)
    return lo + offset.bitcast(d) if not d.is_unsigned else lo + offset


def _split2(k: Tensor) -> tuple[Tensor, Tensor]:
    keys = split(k, 2)
    return keys.shrink(((0, 1), (0, 2))).reshape(2), keys.shrink(((1, 2), (0, 2))).reshape(2)


# ---- permutations ----
@_compiled(2)
def _shuffle(k: Tensor, x: Tensor, axis: int) -> Tensor:
    """`x` sorted along `axis` by fresh random 32-bit keys, repeated until collisions are negligible (JAX's
    `_shuffle`: ceil(3 * log(n) / log(2**32 - 1)) rounds of a stable sort). Compiled, as the draws are: an eager
    shuffle built its sorting network's graph again at every call (4.8 ms for 100 rows, jax's 0.95 ms)."""
    from tgfx.numpy import argsort, take_along_axis
    rounds = math.ceil(3 * math.log(max(1, x.size)) / math.log(0xFFFFFFFF))
    for _ in range(rounds):
        k, sub = _split2(k)
        order = argsort(_random_bits(sub, 32, x.shape), axis=axis)
        x = take_along_axis(x, order, axis)
    return x


def permutation(key: KeyLike, x: int | ArrayLike, axis: int = 0, independent: bool = False) -> Tensor:
    """A random permutation of `range(x)` for an integer `x`, or of `x`'s entries along `axis`, as
    `jax.random.permutation` (bit for bit: a stable sort by random 32-bit keys, in one or more rounds).

    With `independent=True` every 1-d slice along `axis` is shuffled on its own. A dataset's permutation (60,000
    rows) sorts by a bitonic network, O(n log^2 n) (`tnp.argsort`).

    >>> tg.random.permutation(tg.random.key(0), 5).tolist()     # a permutation of [0, 1, 2, 3, 4]
    """
    k = check_key("permutation", key)
    if isinstance(x, (bool, np.bool_)):
        raise TypeError("permutation: `x` must be an integer or an array of at least one dimension, got bool")
    if isinstance(x, (int, np.integer)):
        if x < 0:
            raise ValueError(f"permutation: `x` must be a non-negative length, got {x}")
        normalize_axis(axis, 1, "permutation")
        return _permuted_range(k, int(x)) if x else Tensor.full((0,), 0, dtypes.int32)
    t = x if isinstance(x, Tensor) else Tensor(np.asarray(x))
    if t.ndim == 0:
        raise TypeError("permutation: `x` must be an integer or an array of at least one dimension, got a 0-d array")
    axis = normalize_axis(axis, t.ndim, "permutation")
    if t.shape[axis] <= 1 or t.size == 0:
        return t
    if independent or t.ndim == 1:
        return _shuffle(k, t, axis)
    from tgfx.numpy import take
    return take(t, _permuted_range(k, t.shape[axis]), axis=axis)


@_compiled(1)
def _permuted_range(k: Tensor, n: int) -> Tensor:
    """A permutation of range(n): its arange in the compiled shuffle, not an eager graph of every call."""
    return _shuffle(k, Tensor.arange(n, dtype=dtypes.int32), 0)


# the distributions built on these draws (JAX's algorithms), in modules of their own, and the key helpers
from tgfx._random_dists import beta as beta  # noqa: E402
from tgfx._random_dists import categorical as categorical  # noqa: E402
from tgfx._random_dists import choice as choice  # noqa: E402
from tgfx._random_dists import dirichlet as dirichlet  # noqa: E402
from tgfx._random_dists import exponential as exponential  # noqa: E402
from tgfx._random_dists import gamma as gamma  # noqa: E402
from tgfx._random_dists import gumbel as gumbel  # noqa: E402
from tgfx._random_dists import laplace as laplace  # noqa: E402
from tgfx._random_dists import loggamma as loggamma  # noqa: E402
from tgfx._random_dists import logistic as logistic  # noqa: E402
from tgfx._random_dists import truncated_normal as truncated_normal  # noqa: E402
from tgfx._random_extra import ball as ball  # noqa: E402
from tgfx._random_extra import binomial as binomial  # noqa: E402
from tgfx._random_extra import cauchy as cauchy  # noqa: E402
from tgfx._random_extra import chisquare as chisquare  # noqa: E402
from tgfx._random_extra import clone as clone  # noqa: E402
from tgfx._random_extra import double_sided_maxwell as double_sided_maxwell  # noqa: E402
from tgfx._random_extra import f as f  # noqa: E402
from tgfx._random_extra import generalized_normal as generalized_normal  # noqa: E402
from tgfx._random_extra import geometric as geometric  # noqa: E402
from tgfx._random_extra import key_data as key_data  # noqa: E402
from tgfx._random_extra import lognormal as lognormal  # noqa: E402
from tgfx._random_extra import maxwell as maxwell  # noqa: E402
from tgfx._random_extra import multinomial as multinomial  # noqa: E402
from tgfx._random_extra import multivariate_normal as multivariate_normal  # noqa: E402
from tgfx._random_extra import orthogonal as orthogonal  # noqa: E402
from tgfx._random_extra import pareto as pareto  # noqa: E402
from tgfx._random_extra import poisson as poisson  # noqa: E402
from tgfx._random_extra import rademacher as rademacher  # noqa: E402
from tgfx._random_extra import rayleigh as rayleigh  # noqa: E402
from tgfx._random_extra import t as t  # noqa: E402
from tgfx._random_extra import triangular as triangular  # noqa: E402
from tgfx._random_extra import wald as wald  # noqa: E402
from tgfx._random_extra import weibull_min as weibull_min  # noqa: E402
from tgfx._random_extra import wrap_key_data as wrap_key_data  # noqa: E402
