"""Modules: hyperparameters plus two pure functions, `init(key, x) -> params` and `apply(params, x) -> y`.

A module object holds only configuration (it is a frozen dataclass, hashable, safe to close over in `tg.jit`);
parameters are a nested dict of Tensors that the caller owns and passes in, so `grad`, `jit` and the optimizers in
`tg.optim` see plain pytrees. There is no global state and no hidden mutation (flax's `init`/`apply`, minimally).

>>> model = tg.nn.Sequential(tg.nn.Linear(64), tg.nn.relu, tg.nn.Linear(10))
>>> params = model.init(tg.random.key(0), (32, 784))     # a shape, or an example input Tensor
>>> tg.tree.tree_map(lambda p: p.shape, params)
{'layers_0': {'bias': (64,), 'kernel': (784, 64)}, 'layers_2': {'bias': (10,), 'kernel': (64, 10)}}
>>> logits = model.apply(params, x)                        # (32, 10)

Input sizes are inferred at `init` from the example (a `Linear(64)` learns its input width there); `init` of a
container runs each child lazily on the example to find the next child's input, which builds a graph but computes
nothing. `apply(params, x, key=..., deterministic=...)`: `key` feeds the layers that need randomness (`Dropout`),
`deterministic=True` turns them off for evaluation.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tgfx.numpy as tnp
from tgfx import random
from tgfx.dtypes import DType, dtypes, to_dtype
from tgfx.nn import _functional as F
from tgfx.nn import initializers as inits
from tgfx.tensor import Tensor

Params = dict[str, Any]
Initializer = Callable[[Tensor, tuple[int, ...], DType], Tensor]


class ModuleError(ValueError):
    """Parameters or an input that do not fit a module; the message names the module and where its parameters sit
    in the model's params tree (e.g. `params['layers_2']['kernel']`)."""

    def __init__(self, who: str, msg: str, path: tuple[str, ...] = ()) -> None:
        self.who, self.msg, self.path = who, msg, path
        where = f" at params{''.join(f'[{k!r}]' for k in path)}" if path else ""
        super().__init__(f"{who}{where}: {msg}")

    def within(self, name: str) -> ModuleError:
        """The same error, one level further down the params tree (a container adds its child's name)."""
        return ModuleError(self.who, self.msg, (name,) + self.path)


def _example(x: Any, dtype: DType = dtypes.float32) -> Tensor:
    """An example input: a Tensor as is, a numpy array copied in, a shape as lazy zeros (no memory is used)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return Tensor(x)
    try:
        shape = tuple(int(s) for s in x)
    except TypeError:
        raise TypeError(f"init: the example input must be a Tensor, a numpy array or a shape tuple, got "
                        f"{type(x).__name__}") from None
    return tnp.zeros(shape, dtype)


def _check_keys(params: Any, names: Sequence[str], who: str) -> None:
    """params is a dict with exactly the keys `names`: a clear error for a missing or an unexpected one."""
    if not isinstance(params, dict):
        raise ModuleError(who, f"params must be a dict with keys {sorted(names)}, got {type(params).__name__}; pass "
                          f"the params that this model's init returned")
    missing, extra = sorted(set(names) - set(params)), sorted(set(params) - set(names))
    if missing or extra:
        raise ModuleError(who, f"params have keys {sorted(params)}, expected {sorted(names)} (missing {missing}, "
                          f"unexpected {extra}); were these params made by this model's init?")


def _entries(params: Any, names: Sequence[str], who: str) -> list[Tensor]:
    """The Tensors params[name] for each name, after `_check_keys`."""
    _check_keys(params, names, who)
    out = []
    for n in names:
        if not isinstance(params[n], Tensor):
            raise ModuleError(who, f"params[{n!r}] must be a Tensor, got {type(params[n]).__name__}")
        out.append(params[n])
    return out


def _check_shape(p: Tensor, want: tuple[int, ...], name: str, who: str) -> None:
    if p.shape != want:
        raise ModuleError(who, f"params[{name!r}] has shape {p.shape}, expected {want}")


class Module:
    """The base of every layer: `init(key, x) -> params` and `apply(params, x, *, key=None, deterministic=False)`.

    A subclass implements `_init(key, x)` (x is always a Tensor there) and `apply`. Override `input_dtype` when
    the module's input is not float (an `Embedding` takes integer ids), so `init` from a shape builds the right
    example.
    """

    input_dtype: DType = dtypes.float32

    def init(self, key: Tensor, x: Tensor | np.ndarray | Sequence[int]) -> Params:
        """Fresh parameters for input like `x` (a Tensor, numpy array or shape), drawn from `key`."""
        return self._init(key, _example(x, self.input_dtype))

    def _init(self, key: Tensor, x: Tensor) -> Params:
        raise NotImplementedError

    def apply(self, params: Params, x: Tensor, *, key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        raise NotImplementedError

    @property
    def who(self) -> str:
        return repr(self)


def _kernel_and_bias(m: Linear | Conv2d, key: Tensor, kernel_shape: tuple[int, ...]) -> Params:
    """Fresh {"kernel", "bias"} params of a Linear or Conv2d (its initialisers and dtype; bias of its features)."""
    kk, kb = random.split(key)
    d = to_dtype(m.dtype)
    params = {"kernel": m.kernel_init(kk, kernel_shape, d)}
    if m.use_bias:
        params["bias"] = m.bias_init(kb, (m.features,), d)
    return params


@dataclass(frozen=True)
class Linear(Module):
    """y = x @ kernel + bias over the last axis of x. params: kernel (in, features), bias (features,).

    The input width is inferred at `init`. Defaults as flax's Dense: LeCun-normal kernel, zero bias.

    >>> layer = tg.nn.Linear(4); p = layer.init(tg.random.key(0), (8, 3)); layer.apply(p, x).shape   # (8, 4)
    """

    features: int
    use_bias: bool = True
    dtype: Any = dtypes.float32
    kernel_init: Initializer = field(default_factory=lambda: inits.lecun_normal(), repr=False, compare=False)
    bias_init: Initializer = field(default=inits.zeros, repr=False, compare=False)

    def _init(self, key: Tensor, x: Tensor) -> Params:
        if x.ndim < 1:
            raise ModuleError(self.who, f"input must have at least 1 axis (features last), got shape {x.shape}")
        return _kernel_and_bias(self, key, (x.shape[-1], self.features))

    def apply(self, params: Params, x: Tensor, *, key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        entries = _entries(params, ("kernel", "bias") if self.use_bias else ("kernel",), self.who)
        w = entries[0]
        if w.ndim != 2 or w.shape[1] != self.features:
            raise ModuleError(self.who, f"params['kernel'] has shape {w.shape}, expected (in, {self.features})")
        if x.ndim < 1 or x.shape[-1] != w.shape[0]:
            raise ModuleError(self.who, f"expected input with {w.shape[0]} features on its last axis (kernel shape "
                              f"{w.shape}), got input of shape {x.shape}")
        y = x @ w
        if self.use_bias:
            _check_shape(entries[1], (self.features,), "bias", self.who)
            y = y + entries[1]
        return y


@dataclass(frozen=True)
class Conv2d(Module):
    """2-d convolution of NCHW input (see `tg.nn.conv2d`). params: kernel (features, C // groups, KH, KW),
    bias (features,). Padding defaults to "SAME" (as flax); the input channels are inferred at `init`.

    >>> conv = tg.nn.Conv2d(16, (3, 3), stride=2); p = conv.init(key, (8, 3, 32, 32))   # out (8, 16, 16, 16)
    """

    features: int
    kernel_size: int | tuple[int, int]
    stride: int | tuple[int, int] = 1
    padding: F.Padding = "SAME"
    dilation: int | tuple[int, int] = 1
    groups: int = 1
    use_bias: bool = True
    dtype: Any = dtypes.float32
    kernel_init: Initializer = field(default_factory=lambda: inits.lecun_normal(in_axis=1, out_axis=0), repr=False,
                                     compare=False)
    bias_init: Initializer = field(default=inits.zeros, repr=False, compare=False)

    def _kernel_shape(self, channels: int) -> tuple[int, int, int, int]:
        kh, kw = F._pair(self.kernel_size, 2, "kernel_size", self.who)
        return (self.features, channels // self.groups, kh, kw)

    def _init(self, key: Tensor, x: Tensor) -> Params:
        if x.ndim != 4:
            raise ModuleError(self.who, f"input must be 4-d (N, C, H, W), got shape {x.shape}")
        if x.shape[1] % self.groups or self.features % self.groups:
            raise ModuleError(self.who, f"groups={self.groups} must divide the input channels ({x.shape[1]}) and "
                              f"features ({self.features})")
        return _kernel_and_bias(self, key, self._kernel_shape(x.shape[1]))

    def apply(self, params: Params, x: Tensor, *, key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        entries = _entries(params, ("kernel", "bias") if self.use_bias else ("kernel",), self.who)
        w = entries[0]
        if x.ndim != 4 or w.ndim != 4 or x.shape[1] != w.shape[1] * self.groups:
            raise ModuleError(self.who, f"expected input (N, {w.shape[1] * self.groups}, H, W) for the kernel of "
                              f"shape {w.shape}, got input of shape {x.shape}")
        _check_shape(w, self._kernel_shape(x.shape[1]), "kernel", self.who)
        bias = None
        if self.use_bias:
            _check_shape(entries[1], (self.features,), "bias", self.who)
            bias = entries[1]
        return F.conv2d(x, w, bias, self.stride, self.padding, self.dilation, self.groups)


@dataclass(frozen=True)
class LayerNorm(Module):
    """Layer normalisation over the last axis (see `tg.nn.layer_norm`). params: scale (features,) of ones and
    bias (features,) of zeros, each optional."""

    epsilon: float = 1e-5
    use_scale: bool = True
    use_bias: bool = True
    dtype: Any = dtypes.float32

    def _names(self) -> tuple[str, ...]:
        return tuple(n for n, use in (("scale", self.use_scale), ("bias", self.use_bias)) if use)

    def _init(self, key: Tensor, x: Tensor) -> Params:
        if x.ndim < 1:
            raise ModuleError(self.who, f"input must have at least 1 axis, got shape {x.shape}")
        d = to_dtype(self.dtype)
        return {n: (inits.ones if n == "scale" else inits.zeros)(key, (x.shape[-1],), d) for n in self._names()}

    def apply(self, params: Params, x: Tensor, *, key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        got = dict(zip(self._names(), _entries(params, self._names(), self.who), strict=True))
        for n, p in got.items():
            if x.ndim < 1 or p.shape != (x.shape[-1],):
                raise ModuleError(self.who, f"params[{n!r}] has shape {p.shape}, which does not fit input of shape "
                                  f"{x.shape} (expected ({x.shape[-1] if x.ndim else '?'},))")
        return F.layer_norm(x, got.get("scale"), got.get("bias"), -1, self.epsilon)


@dataclass(frozen=True)
class RMSNorm(Module):
    """Root-mean-square normalisation over the last axis (see `tg.nn.rms_norm`). params: scale (features,)."""

    epsilon: float = 1e-6
    dtype: Any = dtypes.float32

    def _init(self, key: Tensor, x: Tensor) -> Params:
        if x.ndim < 1:
            raise ModuleError(self.who, f"input must have at least 1 axis, got shape {x.shape}")
        return {"scale": inits.ones(key, (x.shape[-1],), to_dtype(self.dtype))}

    def apply(self, params: Params, x: Tensor, *, key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        (scale,) = _entries(params, ("scale",), self.who)
        if x.ndim < 1 or scale.shape != (x.shape[-1],):
            raise ModuleError(self.who, f"params['scale'] has shape {scale.shape}, which does not fit input of "
                              f"shape {x.shape}")
        return F.rms_norm(x, scale, -1, self.epsilon)


@dataclass(frozen=True)
class Embedding(Module):
    """A lookup table: integer ids (...) -> vectors (..., features). params: embedding (num_embeddings, features),
    N(0, 1) by default (as PyTorch). Ids outside [0, num_embeddings) give NaN rows (`tnp.take`'s "fill" mode)."""

    num_embeddings: int
    features: int
    dtype: Any = dtypes.float32
    embedding_init: Initializer = field(default_factory=lambda: inits.normal(1.0), repr=False, compare=False)
    input_dtype = dtypes.int32

    def _init(self, key: Tensor, x: Tensor) -> Params:
        return {"embedding": self.embedding_init(key, (self.num_embeddings, self.features), to_dtype(self.dtype))}

    def apply(self, params: Params, x: Tensor, *, key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        (table,) = _entries(params, ("embedding",), self.who)
        _check_shape(table, (self.num_embeddings, self.features), "embedding", self.who)
        if not x.dtype.is_int:
            raise ModuleError(self.who, f"input must be integer ids, got dtype {x.dtype.name}")
        return tnp.take(table, x, axis=0)


@dataclass(frozen=True)
class Dropout(Module):
    """Zero a fraction `rate` of the elements and rescale the rest (see `tg.nn.dropout`); no params.

    `apply` needs a `key` unless `deterministic=True` (evaluation), where it is the identity: forgetting the key in
    training is an error, not a silent no-op.
    """

    rate: float

    def _init(self, key: Tensor, x: Tensor) -> Params:
        return {}

    def apply(self, params: Params, x: Tensor, *, key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        _entries(params, (), self.who)
        if deterministic or self.rate == 0:
            return x
        if key is None:
            raise ModuleError(self.who, "needs a random key in training: apply(params, x, key=tg.random.key(...)), "
                              "or deterministic=True for evaluation")
        return F.dropout(x, self.rate, key)


@dataclass(frozen=True)
class MultiHeadAttention(Module):
    """Multi-head attention on (..., T, E) inputs: query/key/value projections E -> E split into `num_heads` heads,
    `tg.nn.dot_product_attention`, and an output projection E -> out_features (default E).

    params: {"query", "key", "value", "out"}, each a Linear's {"kernel", "bias"}. `apply(params, x, kv=None,
    mask=None)` attends from x to `kv` (default x: self-attention); `causal=True` masks future positions; `mask` is
    boolean, True = attend, broadcastable to (..., num_heads, T, S). `dropout_rate` drops attention weights.
    """

    num_heads: int
    out_features: int | None = None
    causal: bool = False
    dropout_rate: float = 0.0
    use_bias: bool = True
    dtype: Any = dtypes.float32

    def _projections(self, e: int) -> dict[str, Linear]:
        lin = {n: Linear(e, use_bias=self.use_bias, dtype=self.dtype) for n in ("query", "key", "value")}
        lin["out"] = Linear(self.out_features or e, use_bias=self.use_bias, dtype=self.dtype)
        return lin

    def _init(self, key: Tensor, x: Tensor) -> Params:
        if x.ndim < 2 or x.shape[-1] % self.num_heads:
            raise ModuleError(self.who, f"input must be (..., T, E) with E divisible by num_heads={self.num_heads}, "
                              f"got shape {x.shape}")
        keys = random.split(key, 4)
        return {n: m.init(keys[i], x) for i, (n, m) in enumerate(self._projections(x.shape[-1]).items())}

    def apply(self, params: Params, x: Tensor, kv: Tensor | None = None, mask: Tensor | None = None, *,
              key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        if x.ndim < 2 or x.shape[-1] % self.num_heads:
            raise ModuleError(self.who, f"input must be (..., T, E) with E divisible by num_heads={self.num_heads}, "
                              f"got shape {x.shape}")
        kv = x if kv is None else kv
        proj = self._projections(x.shape[-1])
        _check_keys(params, tuple(proj), self.who)
        h = self.num_heads

        def project(name: str, t: Tensor) -> Tensor:
            try:
                y = proj[name].apply(params[name], t)
            except ModuleError as e:
                raise e.within(name) from None
            return y.reshape(y.shape[:-1] + (h, y.shape[-1] // h)) if name != "out" else y

        q, k, v = project("query", x), project("key", kv), project("value", kv)
        drop = self.dropout_rate if not deterministic else 0.0
        if drop and key is None:
            raise ModuleError(self.who, "needs a random key for attention dropout in training: apply(params, x, "
                              "key=...), or deterministic=True for evaluation")
        y = F.dot_product_attention(q, k, v, mask=mask, is_causal=self.causal, dropout_rate=drop, dropout_key=key)
        return project("out", y.reshape(y.shape[:-2] + (y.shape[-2] * y.shape[-1],)))


class Sequential(Module):
    """Layers applied in order. Each is a Module or a plain function of one Tensor (an activation such as
    `tg.nn.relu`). params: {"layers_<i>": params of layer i} for the Modules (i is the position in the list).

    `key` in `apply` is split into one key per layer (`tg.random.fold_in(key, i)`), so every Dropout draws
    differently.

    >>> mlp = tg.nn.Sequential(tg.nn.Linear(128), tg.nn.gelu, tg.nn.Dropout(0.1), tg.nn.Linear(10))
    """

    def __init__(self, *layers: Module | Callable[[Tensor], Tensor]) -> None:
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module) and not callable(layer):
                raise TypeError(f"Sequential: layer {i} must be a Module or a function, got {type(layer).__name__}")
        self.layers: tuple[Module | Callable[[Tensor], Tensor], ...] = tuple(layers)

    def __repr__(self) -> str:
        inner = ", ".join(repr(m) if isinstance(m, Module) else getattr(m, "__name__", repr(m)) for m in self.layers)
        return f"Sequential({inner})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequential) and self.layers == other.layers

    def __hash__(self) -> int:
        return hash(self.layers)

    @property
    def input_dtype(self) -> DType:  # type: ignore[override]
        first = self.layers[0] if self.layers else None
        return first.input_dtype if isinstance(first, Module) else dtypes.float32

    def _names(self) -> list[tuple[str, Module | Callable]]:
        return [(f"layers_{i}" if isinstance(m, Module) else "", m) for i, m in enumerate(self.layers)]

    def _init(self, key: Tensor, x: Tensor) -> Params:
        params = {}
        for i, (name, m) in enumerate(self._names()):
            if name:
                try:
                    params[name] = m.init(random.fold_in(key, i), x)
                except ModuleError as e:
                    raise e.within(name) from None
                x = m.apply(params[name], x, deterministic=True)
            else:
                x = m(x)
        return params

    def apply(self, params: Params, x: Tensor, *, key: Tensor | None = None, deterministic: bool = False) -> Tensor:
        names = [n for n, _ in self._names() if n]
        _check_keys(params, names, repr(self))
        for i, (name, m) in enumerate(self._names()):
            if not name:
                x = m(x)
                continue
            sub = None
            if key is not None:
                sub = random.fold_in(key, i)
            try:
                x = m.apply(params[name], x, key=sub, deterministic=deterministic)
            except ModuleError as e:
                raise e.within(name) from None
        return x

