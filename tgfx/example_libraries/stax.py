"""`tgfx.example_libraries.stax`: JAX's `jax.example_libraries.stax`, the layer combinators of JAX's own examples, with
their names and calling convention, so that those programs port by spelling.

A layer is a pair `(init_fun, apply_fun)`: `init_fun(rng, input_shape)` gives `(output_shape, params)` and
`apply_fun(params, inputs, **kwargs)` the outputs (`rng=` a key where a layer draws, as `Dropout`). `serial` and
`parallel` combine layers; `FanOut`, `FanInSum` and `FanInConcat` branch and join.

>>> import tgfx as tg
>>> from tgfx.example_libraries import stax
>>> init_fun, predict = stax.serial(stax.Dense(32), stax.Relu, stax.Dense(10), stax.LogSoftmax)
>>> out_shape, params = init_fun(tg.random.PRNGKey(0), (-1, 784))
>>> out_shape
(-1, 10)

A dimension may be -1 in an input shape (a batch of any size); shapes are computed, never data.
"""
from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import tgfx.numpy as tnp
from tgfx import lax, random
from tgfx import nn as act
from tgfx.nn.initializers import glorot_normal, normal, ones, zeros

Layer = tuple[Callable[..., Any], Callable[..., Any]]

# the initialisers JAX's stax names besides jax.nn.initializers'
glorot = glorot_normal
randn = normal
logsoftmax = act.log_softmax
_GLOROT, _NORMAL, _BIAS = glorot_normal(), normal(), normal(1e-6)   # the layers' default initialisers, as JAX's


def Dense(out_dim: int, W_init: Callable = _GLOROT, b_init: Callable = _NORMAL) -> Layer:  # noqa: N802,N803
    """A fully connected layer: inputs @ W + b, W of shape (in, out_dim)."""
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple[tuple[int, ...], Any]:
        k1, k2 = random.split(rng)
        return tuple(input_shape[:-1]) + (out_dim,), (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params  # noqa: N806
        return tnp.dot(inputs, W) + b
    return init_fun, apply_fun


def _conv_layer(transpose: bool, dimension_numbers: tuple[str, str, str], out_chan: int, filter_shape: Sequence[int],
                strides: Sequence[int] | None, padding: str | Sequence[tuple[int, int]], W_init: Callable | None,  # noqa: N803
                b_init: Callable) -> Layer:
    """A convolution layer, or a transposed one (`lax.conv_transpose`): a kernel of `out_chan` outputs over
    `filter_shape`, the input's channels in, and a bias along the output's channels."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    one = (1,) * len(filter_shape)
    strides = tuple(strides) if strides else one
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))  # noqa: N806
    out_shape = lax.conv_transpose_shape_tuple if transpose else lax.conv_general_shape_tuple

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple[tuple[int, ...], Any]:
        window = iter(filter_shape)
        kernel_shape = tuple(out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I" else next(window)
                             for c in rhs_spec)
        output_shape = out_shape(tuple(input_shape), kernel_shape, strides, padding, dimension_numbers)
        bias_shape = tuple(out_chan if c == "C" else 1 for c in out_spec)
        k1, k2 = random.split(rng)
        return output_shape, (W_init(k1, kernel_shape), b_init(k2, bias_shape))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params  # noqa: N806
        if transpose:
            return lax.conv_transpose(inputs, W, strides, padding, dimension_numbers=dimension_numbers) + b
        return lax.conv_general_dilated(inputs, W, strides, padding, one, one,
                                        dimension_numbers=dimension_numbers) + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers: tuple[str, str, str], out_chan: int, filter_shape: Sequence[int],  # noqa: N802
                strides: Sequence[int] | None = None, padding: str | Sequence[tuple[int, int]] = "VALID",
                W_init: Callable | None = None, b_init: Callable = _BIAS) -> Layer:  # noqa: N803
    """A convolution whose layouts `dimension_numbers` = (lhs, rhs, out) name the axes ('NHWC', 'HWIO', 'NHWC')."""
    return _conv_layer(False, dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))
Conv1D = functools.partial(GeneralConv, ("NHC", "HIO", "NHC"))


def GeneralConvTranspose(dimension_numbers: tuple[str, str, str], out_chan: int,  # noqa: N802
                         filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                         padding: str | Sequence[tuple[int, int]] = "VALID", W_init: Callable | None = None,  # noqa: N803
                         b_init: Callable = _BIAS) -> Layer:  # noqa: N803
    """A transposed convolution (`lax.conv_transpose`), layouts as `GeneralConv`'s."""
    return _conv_layer(True, dimension_numbers, out_chan, filter_shape, strides, padding, W_init, b_init)


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis: Sequence[int] = (0, 1, 2), epsilon: float = 1e-5, center: bool = True,  # noqa: N802
              scale: bool = True, beta_init: Callable = zeros, gamma_init: Callable = ones) -> Layer:
    """Normalise over `axis` with the batch's own statistics (no running averages, as JAX's stax), then scale by
    gamma and shift by beta, both of the remaining axes' shape."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple[tuple[int, ...], Any]:
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return tuple(input_shape), (beta, gamma)

    def apply_fun(params: Any, x: Any, **kwargs: Any) -> Any:
        beta, gamma = params
        ed = tuple(None if i in axis else slice(None) for i in range(tnp.ndim(x)))
        z = act.standardize(x, axis, epsilon=epsilon)
        if center and scale:
            return gamma[ed] * z + beta[ed]
        if center:
            return z + beta[ed]
        if scale:
            return gamma[ed] * z
        return z
    return init_fun, apply_fun


def elementwise(fun: Callable[..., Any], **fun_kwargs: Any) -> Layer:
    """A layer that applies `fun(inputs, **fun_kwargs)`; no parameters."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, tuple]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(tnp.tanh)
Relu = elementwise(act.relu)
Exp = elementwise(tnp.exp)
LogSoftmax = elementwise(act.log_softmax, axis=-1)
Softmax = elementwise(act.softmax, axis=-1)
Softplus = elementwise(act.softplus)
Sigmoid = elementwise(act.sigmoid)
Elu = elementwise(act.elu)
LeakyRelu = elementwise(act.leaky_relu)
Selu = elementwise(act.selu)
Gelu = elementwise(act.gelu)


def _pooling_layer(reducer: Callable, init_val: float,
                   rescaler: Callable | None = None) -> Callable[..., Layer]:
    def PoolingLayer(window_shape: Sequence[int], strides: Sequence[int] | None = None,  # noqa: N802
                     padding: str = "VALID", spec: str | None = None) -> Layer:
        """A pooling layer over the spatial axes: `window_shape` and `strides` name those; the batch and channel
        axes are the first and last (or where `spec`'s 'N' and 'C' say)."""
        strides = tuple(strides) if strides else (1,) * len(window_shape)
        rescale = rescaler(window_shape, strides, padding) if rescaler else None
        non_spatial = (0, len(window_shape) + 1) if spec is None else (spec.index("N"), spec.index("C"))
        dims, steps = tuple(window_shape), strides
        for i in sorted(non_spatial):
            dims, steps = dims[:i] + (1,) + dims[i:], steps[:i] + (1,) + steps[i:]

        def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple[tuple[int, ...], tuple]:
            pads = lax.padtype_to_pads(tuple(input_shape), dims, steps, padding)
            ones_ = (1,) * len(dims)
            return tuple(lax.reduce_window_shape_tuple(tuple(input_shape), dims, steps, pads, ones_, ones_)), ()

        def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
            out = lax.reduce_window(inputs, init_val, reducer, dims, steps, padding)
            return rescale(out, inputs, spec) if rescale else out
        return init_fun, apply_fun
    return PoolingLayer


def _normalize_by_window_size(dims: Sequence[int], strides: Sequence[int], padding: str) -> Callable[..., Any]:
    def rescale(outputs: Any, inputs: Any, spec: str | None) -> Any:
        non_spatial = (0, inputs.ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))
        spatial_shape = tuple(inputs.shape[i] for i in range(inputs.ndim) if i not in non_spatial)
        window_sizes = lax.reduce_window(tnp.ones(spatial_shape, dtype=inputs.dtype), 0.0, lax.add, tuple(dims),
                                         tuple(strides), padding)
        for i in sorted(non_spatial):
            window_sizes = tnp.expand_dims(window_sizes, i)
        return outputs / window_sizes
    return rescale


MaxPool = _pooling_layer(lax.max, -math.inf)
SumPool = _pooling_layer(lax.add, 0.0)
AvgPool = _pooling_layer(lax.add, 0.0, _normalize_by_window_size)


def Flatten() -> Layer:  # noqa: N802
    """Every axis but the first (the batch) flattened into one."""
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple[tuple[int, int], tuple]:
        return (input_shape[0], functools.reduce(operator.mul, input_shape[1:], 1)), ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return tnp.reshape(inputs, (inputs.shape[0], -1))
    return init_fun, apply_fun


Flatten = Flatten()  # type: ignore[misc] -- as JAX's: the layer itself, not its maker


def Identity() -> Layer:  # noqa: N802
    """The inputs unchanged."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, tuple]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return inputs
    return init_fun, apply_fun


Identity = Identity()  # type: ignore[misc]


def FanOut(num: int) -> Layer:  # noqa: N802
    """The inputs, `num` times (a list): feeds `parallel`."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[list, tuple]:
        return [input_shape] * num, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return [inputs] * num
    return init_fun, apply_fun


def FanInSum() -> Layer:  # noqa: N802
    """The sum of a list of inputs of one shape."""
    def init_fun(rng: Any, input_shape: Sequence[Any]) -> tuple[Any, tuple]:
        return input_shape[0], ()

    def apply_fun(params: Any, inputs: Sequence[Any], **kwargs: Any) -> Any:
        return functools.reduce(operator.add, inputs)
    return init_fun, apply_fun


FanInSum = FanInSum()  # type: ignore[misc]


def FanInConcat(axis: int = -1) -> Layer:  # noqa: N802
    """A list of inputs concatenated along `axis`."""
    def init_fun(rng: Any, input_shape: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], tuple]:
        first = tuple(input_shape[0])
        ax = axis % len(first)
        return first[:ax] + (sum(s[ax] for s in input_shape),) + first[ax + 1:], ()

    def apply_fun(params: Any, inputs: Sequence[Any], **kwargs: Any) -> Any:
        return tnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate: float, mode: str = "train") -> Layer:  # noqa: N802
    """Dropout in training (`mode='train'`), the identity otherwise. As in JAX's stax, `rate` is the probability of
    KEEPING an element (kept ones are divided by it); `apply_fun` needs `rng=`."""
    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, tuple]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError("Dropout's apply_fun needs a PRNG key: call it (or the serial/parallel layer holding it) "
                             "with rng=key, e.g. predict(params, inputs, rng=random.PRNGKey(0))")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return tnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


def serial(*layers: Layer) -> Layer:
    """The layers one after another; `apply_fun`'s `rng=` is split among them."""
    n = len(layers)
    init_funs, apply_funs = zip(*layers, strict=True) if layers else ((), ())

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, list]:
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, n) if rng is not None else (None,) * n
        for fun, param, r in zip(apply_funs, params, rngs, strict=True):
            inputs = fun(param, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """Each layer on its own item of a list of inputs (as `FanOut` gives); `rng=` split among them."""
    n = len(layers)
    init_funs, apply_funs = zip(*layers, strict=True) if layers else ((), ())

    def init_fun(rng: Any, input_shape: Sequence[Any]) -> tuple[list, list]:
        rngs = random.split(rng, n)
        out = [init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape, strict=True)]
        return [shape for shape, _ in out], [param for _, param in out]

    def apply_fun(params: Any, inputs: Sequence[Any], **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, n) if rng is not None else (None,) * n
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs, strict=True)]
    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Any], Layer]) -> Layer:
    """A layer made from its input's shape: `make_layer(shape)` gives the (init_fun, apply_fun) to use."""
    def init_fun(rng: Any, input_shape: Any) -> Any:
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
