"""Small top-level names of `jax` that ported programs call: name scopes, cache clearing, the default backend,
`ensure_compile_time_eval`, `typeof` and `enable_x64`.

>>> with tg.named_scope("encoder"):          # accepted and checked; tgfx keeps no name stack
...     h = tnp.tanh(x @ w)
>>> tg.default_backend()
'cpu'
>>> tg.typeof(tnp.ones((2, 3)))
ShapedArray(float32[2,3])
>>> with tg.enable_x64():
...     tnp.ones(2).dtype                     # float64
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tgfx import config
from tgfx.dtypes import DType, to_dtype
from tgfx.tensor import Tensor, is_weak
from tgfx.transforms.shapes import ShapeDtypeStruct


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """A context manager that names the operations inside it, as `jax.named_scope`. tgfx's graphs carry no name
    stack (profiles name kernels by what they compute), so the block runs unchanged; the name is checked, so code
    written for JAX keeps working.

    >>> with tg.named_scope("attention"):
    ...     scores = q @ k.T

    Raises:
        TypeError: `name` is not a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"named_scope: the name must be a string, got {type(name).__name__} {name!r}")
    yield


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """`fun` under another name, as `jax.named_call`: the wrapper calls `fun` unchanged and carries `name` (default
    `fun.__name__`) as its `__name__`, which is what `tg.jit` and error messages show.

    >>> step = tg.named_call(lambda x: x + 1, name="step")
    >>> step.__name__
    'step'
    """
    if not callable(fun):
        raise TypeError(f"named_call: expected a function, got {type(fun).__name__}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"named_call: name must be a string or None, got {type(name).__name__}")

    @functools.wraps(fun)
    def named(*args: Any, **kwargs: Any) -> Any:
        return fun(*args, **kwargs)

    if name is not None:
        named.__name__ = named.__qualname__ = name
    return named


def clear_caches() -> None:
    """Drop every cache of traced and compiled work this process holds, as `jax.clear_caches`: the programs of
    every `tg.jit` function (the next call traces again), the bodies `@function(cache=True)` kept, eager
    schedules, compiled kernels and kernel-option search results. The disk cache of compiled kernels stays.
    Results already computed are unaffected.
    """
    from tgfx.function import clear_traces
    from tgfx.lowering import forget_compiled, search
    from tgfx.lowering.eager import _template_keys
    from tgfx.lowering.schedule import _templates
    from tgfx.transforms.jit import clear_caches as clear_jits
    forget_compiled()
    _templates.clear()
    _template_keys.clear()
    search.clear_cache()
    clear_jits()
    clear_traces()


def default_backend() -> str:
    """The platform of the default device, as `jax.default_backend`: "cpu", or "gpu" when the default device is a
    CUDA device (`TGFX_DEVICE=CUDA`)."""
    from tgfx.devices import DEFAULT_DEVICE
    return "gpu" if DEFAULT_DEVICE.upper().startswith("CUDA") else "cpu"


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """A context manager in which values that do not depend on traced arguments are concrete, as
    `jax.ensure_compile_time_eval`. In tgfx this already holds everywhere: inside `tg.jit` or a `@function`, a value
    computed only from constants and closed-over arrays can be read (`int(...)`, `if ...:`, `.tolist()`), and only
    values that depend on the traced arguments raise a ConcretizationError. So the block runs unchanged.

    >>> @tg.jit
    ... def f(x):
    ...     with tg.ensure_compile_time_eval():
    ...         n = int(tnp.arange(4).sum())        # 6, a Python int while tracing
    ...     return x * n
    """
    yield


class ShapedArray(ShapeDtypeStruct):
    """The abstract value of an array, as `jax.typeof` returns it: shape, dtype and weak_type. It prints as JAX's
    does (`float32[2,3]`, with a `~` in front when weakly typed) and compares as a `ShapeDtypeStruct`."""

    __slots__ = ("weak_type",)

    def __init__(self, shape: Any, dtype: DType | str | type | np.dtype, weak_type: bool = False) -> None:
        super().__init__(shape, dtype)
        self.weak_type = bool(weak_type)

    def str_short(self) -> str:
        return f"{'~' if self.weak_type else ''}{self.dtype.name}[{','.join(str(d) for d in self.shape)}]"

    def __str__(self) -> str:
        return self.str_short()

    def __repr__(self) -> str:
        return f"ShapedArray({self.str_short()})"


def typeof(x: Any) -> ShapedArray:
    """The abstract value (shape, dtype, weak type) of an array or scalar, as `jax.typeof`.

    >>> str(tg.typeof(tnp.arange(3))), str(tg.typeof(1.0))
    ('int32[3]', '~float32[]')

    Raises:
        TypeError: `x` is not an array or a scalar.
    """
    if isinstance(x, Tensor):
        return ShapedArray(x.shape, x.dtype, is_weak(x))
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(x.shape, to_dtype(x.dtype))
    if isinstance(x, (bool, int, float, complex)):   # Python scalars are weakly typed, bools are not
        return ShapedArray((), to_dtype(type(x)), not isinstance(x, bool))
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, x.dtype)
    raise TypeError(f"typeof: {type(x).__qualname__} is not an array or a scalar; pass an array (a pytree of them "
                    f"maps with tg.tree.map(tg.typeof, tree))")


@contextlib.contextmanager
def enable_x64(new_val: bool = True) -> Iterator[None]:
    """Within the block, 64-bit types are on (or off, with False) for this thread, as `jax.enable_x64`: float64,
    int64 and complex128 keep their width instead of becoming 32-bit. Other threads keep their mode; a jitted
    function called in both modes keeps a trace for each. `tg.config.update("x64", True)` sets it for the rest of
    the process.

    >>> with tg.enable_x64():
    ...     tnp.asarray(1.0, tnp.float64).dtype     # float64
    """
    with config.Context(TGFX_ENABLE_X64=int(bool(new_val))):
        yield


__all__ = ["ShapedArray", "clear_caches", "default_backend", "enable_x64", "ensure_compile_time_eval", "named_call",
           "named_scope", "typeof"]
